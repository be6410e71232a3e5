#!/usr/bin/env python3
"""botocore, a real S3 client, parses the XML gateway/s3_xml.c writes: bucket
lists, ListObjects V1 and V2 pages (with encoding-type=url decoded by
botocore's own handlers), DeleteResult and Error. Listings are paged the way
a client pages them (NextMarker / NextContinuationToken) and must add up to
what S3's rules give for the key set: no entry lost, none repeated."""
import datetime
import json
import subprocess
import sys

try:
    import botocore.session
    from botocore import handlers
    from botocore.parsers import RestXMLParser
except ImportError:
    sys.exit("botocore is missing: run scripts/deps.sh (python3-boto3)")

model = botocore.session.get_session().get_service_model("s3")
parser = RestXMLParser()
render = subprocess.Popen([sys.argv[1]], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          text=True)
passed = failed = 0


def ask(req):
    render.stdin.write(json.dumps(req) + "\n")
    render.stdin.flush()
    return json.loads(render.stdout.readline())


def parse(op, xml, status=200):
    return parser.parse({"status_code": status, "headers": {}, "body": xml.encode()},
                        model.operation_model(op).output_shape)


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL", name, detail)


def expected(keys, prefix, delim, after):
    """S3's listing of sorted keys, unpaged: (kind, name) in order."""
    out = []
    for k in keys:
        if not k.startswith(prefix or "") or (after and k.encode() <= after.encode()):
            continue
        rest = k[len(prefix or ""):]
        if delim and delim in rest:
            cp = k[:len(prefix or "") + rest.index(delim) + len(delim)]
            if (after and cp.encode() <= after.encode()) or ("P", cp) in out:
                continue
            out.append(("P", cp))
        else:
            out.append(("K", k))
    return sorted(out, key=lambda e: e[1].encode())


KEYS = sorted(["a", "a b/1", "a b/2", "a&b", "a+b/c", "a/", "a/x", "a/y/z", "b%20c", "b<c>",
               "b\u00fc/\u65e5\u672c", "c\x01d", "d/e/f", "d/e/g", "d'q\"", "z"],
              key=lambda k: k.encode())


def run_listing(version, prefix, delim, max_keys, url):
    keys = KEYS if url else [k for k in KEYS if "\x01" not in k]  # XML 1.0 cannot hold \x01
    got, marker, token, pages = [], None, None, 0
    while True:
        req = {"op": "list", "version": version, "keys": keys, "prefix": prefix,
               "delimiter": delim, "max_keys": max_keys, "url": url}
        if version == 1:
            req["marker"] = marker
        else:
            req["token"] = token
        ans = ask(req)
        op = "ListObjectsV2" if version == 2 else "ListObjects"
        parsed = parse(op, ans["xml"])
        if url:  # what botocore does after parsing when it asked for encoding-type=url
            (handlers.decode_list_object_v2 if version == 2 else handlers.decode_list_object)(
                parsed, {"encoding_type_auto_set": True})
        entries = [("K", c["Key"]) for c in parsed.get("Contents", [])] + \
                  [("P", p["Prefix"]) for p in parsed.get("CommonPrefixes", [])]
        entries.sort(key=lambda e: e[1].encode())
        got += entries
        pages += 1
        for c in parsed.get("Contents", []):
            check("size", c["Size"] == len(c["Key"].encode()), c)
            check("etag", c["ETag"].startswith('"etag'), c)
            check("mtime", isinstance(c["LastModified"], datetime.datetime), c)
        check("prefix echoed", parsed.get("Prefix", "") == (prefix or ""), parsed.get("Prefix"))
        if version == 2:
            check("KeyCount", parsed["KeyCount"] == len(entries), parsed)
        if not parsed["IsTruncated"]:
            break
        check("full page", len(entries) == max_keys, (len(entries), max_keys))
        if version == 2:
            token = parsed["NextContinuationToken"]
        else:
            # NextMarker only comes with a delimiter; otherwise the last key is the marker.
            marker = parsed.get("NextMarker") or parsed["Contents"][-1]["Key"]
        if pages > 100:
            break
    want = expected(keys, prefix, delim, None)
    check("listing v%d prefix=%r delim=%r max=%d url=%s" % (version, prefix, delim, max_keys, url),
          got == want, "\n got  %s\n want %s" % (got, want))


for version in (1, 2):
    for prefix in (None, "a", "a/", "b", "nothing"):
        for delim in (None, "/", "b"):
            for max_keys in (1, 2, 3, 1000):
                for url in (False, True):
                    run_listing(version, prefix, delim, max_keys, url)

# A token the gateway did not make is refused.
check("bad token", ask({"op": "list", "version": 2, "keys": KEYS, "token": "bm9wZQ==",
                        "max_keys": 5}).get("error") == "InvalidArgument")

names = ["alpha", "b.c-d", "e&f"]
parsed = parse("ListBuckets", ask({"op": "buckets", "names": names})["xml"])
check("buckets", [b["Name"] for b in parsed["Buckets"]] == names, parsed)
check("bucket date", parsed["Buckets"][1]["CreationDate"] ==
      datetime.datetime(2013, 5, 24, 0, 0, 1, 1000, tzinfo=datetime.timezone.utc), parsed)
check("owner", parsed["Owner"] == {"ID": "owner-id", "DisplayName": "owner & co"}, parsed)

keys = ["gone", "err-denied", "a&<b>"]
for quiet in (False, True):
    parsed = parse("DeleteObjects", ask({"op": "delete", "keys": keys, "quiet": quiet})["xml"])
    deleted = [d["Key"] for d in parsed.get("Deleted", [])]
    check("deleted quiet=%s" % quiet, deleted == ([] if quiet else ["gone", "a&<b>"]), parsed)
    check("delete errors", [(e["Key"], e["Code"]) for e in parsed["Errors"]] ==
          [("err-denied", "AccessDenied")], parsed)

xml = ask({"op": "error", "resource": "/bkt/a&b"})["xml"]
parsed = parse("GetObject", xml, 404)
check("error", parsed["Error"]["Code"] == "NoSuchKey" and
      parsed["Error"]["Message"] == "The specified key does not exist." and
      parsed["Error"]["Resource"] == "/bkt/a&b", parsed)
# botocore takes the request id from the x-amz-request-id header, not the body
check("request id", "<RequestId>req-1</RequestId>" in xml, xml)

render.stdin.close()
render.wait(timeout=30)
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed or render.returncode else 0)
