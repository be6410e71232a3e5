#!/usr/bin/env python3
"""boto3 against a real `inec server` process on loopback: buckets; objects of
0 B, 1 B, 4095 B, 1 MiB and 64 MiB (once) with every byte compared; random
ranges; user metadata; overwrite; delete and DeleteObjects; listings V1 and
V2 with prefixes, delimiters and paging; virtual-host style; and the
security and robustness cases (wrong secret, unknown key, expired and
tampered presigned URLs, no signature, bad Content-MD5, malformed XML, bad
Range, huge headers, unsupported operations), multipart uploads and
CopyObject, each followed by proof that
the server still serves. argv[1]: the inec binary; argv[2] (optional):
"cluster" runs the data path (buckets, objects, ranges, listings, streaming,
multipart, copy) against `inec gateway` in front of nine `inec node`
processes instead ("cluster-ipv6": all of them on ::1); the rest is the same
front end and runs embedded only."""
import base64
import hashlib
import http.client
import json
import os
import random
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inec_server import InecServer, start  # noqa: E402

try:
    import boto3
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.config import Config
    from botocore.credentials import Credentials
    from botocore.exceptions import ClientError
except ImportError:
    sys.exit("boto3 is missing: run scripts/deps.sh (python3-boto3)")

srv = None


def check(cond, what):
    if not cond:
        srv.fail(what)


def client(secret=None, access=None, style="path"):
    return boto3.client(
        "s3", endpoint_url=srv.endpoint, region_name="us-east-1",
        aws_access_key_id=access or srv.access_key,
        aws_secret_access_key=secret or srv.secret_key,
        config=Config(signature_version="s3v4", retries={"max_attempts": 1},
                      s3={"addressing_style": style}))


def error_of(fn, *a, **kw):
    try:
        fn(*a, **kw)
    except ClientError as e:
        return e.response["Error"].get("Code"), e.response["ResponseMetadata"]["HTTPStatusCode"]
    return None, 200


def expect_error(code, status, fn, *a, **kw):
    got = error_of(fn, *a, **kw)
    check(got == (code, status), "%s: want %s %d, got %s" % (fn.__name__, code, status, got))


def raw(method, path, body=b"", headers=None, sign=True, host=None):
    """One request over http.client, optionally SigV4-signed by botocore."""
    return srv.request(method, path, body, headers, sign, host)


def still_serving():
    check(srv.alive(), "server died")
    names = [b["Name"] for b in client().list_buckets()["Buckets"]]
    check("data" in names, "server stopped serving: %s" % names)


def test_buckets(s3):
    s3.create_bucket(Bucket="data")
    s3.head_bucket(Bucket="data")
    check([b["Name"] for b in s3.list_buckets()["Buckets"]] == ["data"], "ListBuckets")
    s3.create_bucket(Bucket="data")  # again: 200 in us-east-1 (s3_compat_boto3 checks more)
    expect_error("404", 404, s3.head_bucket, Bucket="nope")
    expect_error("NoSuchBucket", 404, s3.list_objects_v2, Bucket="nope")
    expect_error("InvalidBucketName", 400, s3.create_bucket, Bucket="Bad_Name")
    s3.create_bucket(Bucket="scratch")
    s3.put_object(Bucket="scratch", Key="k", Body=b"x")
    expect_error("BucketNotEmpty", 409, s3.delete_bucket, Bucket="scratch")
    s3.delete_object(Bucket="scratch", Key="k")
    # A multipart upload in progress keeps the bucket too (its Complete would
    # land in no bucket), until it is aborted.
    uid = s3.create_multipart_upload(Bucket="scratch", Key="m")["UploadId"]
    etag = s3.upload_part(Bucket="scratch", Key="m", UploadId=uid, PartNumber=1,
                          Body=b"p" * 1000)["ETag"]
    expect_error("BucketNotEmpty", 409, s3.delete_bucket, Bucket="scratch")
    s3.abort_multipart_upload(Bucket="scratch", Key="m", UploadId=uid)
    s3.delete_bucket(Bucket="scratch")
    expect_error("404", 404, s3.head_bucket, Bucket="scratch")
    s3.create_bucket(Bucket="scratch")  # again: empty, and the old upload is not its
    check("Contents" not in s3.list_objects_v2(Bucket="scratch"), "a new bucket is not empty")
    expect_error("NoSuchUpload", 404, s3.complete_multipart_upload, Bucket="scratch", Key="m",
                 UploadId=uid, MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]})
    s3.delete_bucket(Bucket="scratch")


def test_objects(s3, rng):
    sizes = [0, 1, 4095, 1 << 20, 64 << 20]
    bodies = {}
    for n in sizes:
        body = rng.randbytes(n)
        key = "obj/%d" % n
        r = s3.put_object(Bucket="data", Key=key, Body=body)
        check(r["ETag"] == '"%s"' % hashlib.md5(body).hexdigest(), "ETag of %d B" % n)
        got = s3.get_object(Bucket="data", Key=key)
        data = got["Body"].read()
        check(data == body, "GET of %d B returned other bytes (%d B)" % (n, len(data)))
        check(got["ContentLength"] == n, "Content-Length of %d B" % n)
        bodies[key] = body
    # ranges, random and the edge forms
    for key in ("obj/4095", "obj/1048576", "obj/67108864"):
        body = bodies[key]
        n = len(body)
        cases = [(0, 0), (n - 1, n - 1), (0, n - 1)]
        cases += [tuple(sorted((rng.randrange(n), rng.randrange(n)))) for _ in range(6)]
        for a, b in cases:
            r = s3.get_object(Bucket="data", Key=key, Range="bytes=%d-%d" % (a, b))
            check(r["ResponseMetadata"]["HTTPStatusCode"] == 206, "206 for a range")
            check(r["ContentRange"] == "bytes %d-%d/%d" % (a, b, n), "Content-Range")
            check(r["Body"].read() == body[a:b + 1], "range %d-%d of %s" % (a, b, key))
        r = s3.get_object(Bucket="data", Key=key, Range="bytes=-100")
        check(r["Body"].read() == body[-100:], "suffix range")
        r = s3.get_object(Bucket="data", Key=key, Range="bytes=%d-" % (n - 10))
        check(r["Body"].read() == body[-10:], "open range")
        r = s3.get_object(Bucket="data", Key=key, Range="bytes=%d-%d" % (n - 5, n + 1000))
        check(r["Body"].read() == body[-5:], "range clamped to the end")
    expect_error("InvalidRange", 416, s3.get_object, Bucket="data", Key="obj/4095",
                 Range="bytes=4095-")
    expect_error("InvalidRange", 416, s3.get_object, Bucket="data", Key="obj/0",
                 Range="bytes=0-0")
    r = s3.get_object(Bucket="data", Key="obj/4095", Range="bytes=abc")  # ignored: 200
    check(r["ResponseMetadata"]["HTTPStatusCode"] == 200 and
          r["Body"].read() == bodies["obj/4095"], "a malformed Range means the whole object")
    # metadata, content type, Last-Modified
    before = time.time()
    s3.put_object(Bucket="data", Key="meta", Body=b"m" * 10, ContentType="text/plain",
                  Metadata={"color": "blue", "Owner-Id": "42"})
    h = s3.head_object(Bucket="data", Key="meta")
    check(h["Metadata"] == {"color": "blue", "owner-id": "42"}, "metadata %s" % h["Metadata"])
    check(h["ContentType"] == "text/plain", "Content-Type")
    check(h["ContentLength"] == 10, "HEAD Content-Length")
    check(abs(h["LastModified"].timestamp() - before) < 300, "Last-Modified %s" % h["LastModified"])
    lm = h["ResponseMetadata"]["HTTPHeaders"]["last-modified"]
    check(lm.endswith(" GMT") and lm[3] == ",", "Last-Modified is RFC 1123: %s" % lm)
    check(len(h["ResponseMetadata"]["HTTPHeaders"]["x-amz-request-id"]) > 0, "request id")
    # overwrite
    s3.put_object(Bucket="data", Key="meta", Body=b"second version")
    r = s3.get_object(Bucket="data", Key="meta")
    check(r["Body"].read() == b"second version" and r["Metadata"] == {}, "overwrite")
    # delete
    s3.delete_object(Bucket="data", Key="meta")
    expect_error("NoSuchKey", 404, s3.get_object, Bucket="data", Key="meta")
    expect_error("404", 404, s3.head_object, Bucket="data", Key="meta")
    s3.delete_object(Bucket="data", Key="meta")  # S3: deleting nothing succeeds
    # Content-MD5
    body = b"checked body"
    good = base64.b64encode(hashlib.md5(body).digest()).decode()
    s3.put_object(Bucket="data", Key="md5", Body=body, ContentMD5=good)
    bad = base64.b64encode(hashlib.md5(b"other").digest()).decode()
    expect_error("BadDigest", 400, s3.put_object, Bucket="data", Key="md5", Body=b"new body!!!!",
                 ContentMD5=bad)
    check(s3.get_object(Bucket="data", Key="md5")["Body"].read() == body,
          "a PUT refused for its digest must leave the old version")
    # keys with characters that need encoding
    for key in ("a b/c+d", "ünï/çødé", "x?y=z&w", "~!@$%^*()", "dir//double"):
        s3.put_object(Bucket="data", Key=key, Body=key.encode())
        check(s3.get_object(Bucket="data", Key=key)["Body"].read() == key.encode(), key)
        s3.delete_object(Bucket="data", Key=key)
    for key in list(bodies) + ["md5"]:
        s3.delete_object(Bucket="data", Key=key)


def listing(s3, version, **kw):
    """Every key and prefix over all pages, with the page size given."""
    keys, prefixes, pages = [], [], 0
    token = None
    while True:
        args = dict(Bucket="data", **kw)
        if version == 2:
            if token:
                args["ContinuationToken"] = token
            r = s3.list_objects_v2(**args)
        else:
            if token:
                args["Marker"] = token
            r = s3.list_objects(**args)
        pages += 1
        keys += [c["Key"] for c in r.get("Contents", [])]
        prefixes += [p["Prefix"] for p in r.get("CommonPrefixes", [])]
        if not r["IsTruncated"]:
            return keys, prefixes, pages
        if version == 2:
            token = r["NextContinuationToken"]
        else:
            token = r.get("NextMarker") or r["Contents"][-1]["Key"]
        check(pages < 1000, "listing does not end")


def test_listing(s3):
    keys = sorted(["a/1", "a/2", "a/b/3", "a/b/4", "b/5", "c", "d/e/f", "space key", "zz"])
    for k in keys:
        s3.put_object(Bucket="data", Key=k, Body=k.encode())
    for version in (1, 2):
        for page in (1, 2, 3, 1000):
            got = listing(s3, version, MaxKeys=page)
            check(got[0] == keys and got[1] == [], "v%d all keys, page %d: %s" % (version, page, got))
            got = listing(s3, version, MaxKeys=page, Delimiter="/")
            check(got[0] == ["c", "space key", "zz"] and got[1] == ["a/", "b/", "d/"],
                  "v%d delimiter page %d: %s" % (version, page, got))
            got = listing(s3, version, MaxKeys=page, Prefix="a/", Delimiter="/")
            check(got[0] == ["a/1", "a/2"] and got[1] == ["a/b/"],
                  "v%d prefix+delimiter page %d: %s" % (version, page, got))
            got = listing(s3, version, MaxKeys=page, Prefix="a/b/")
            check(got[0] == ["a/b/3", "a/b/4"], "v%d prefix page %d" % (version, page))
    r = s3.list_objects_v2(Bucket="data", StartAfter="b/5")
    check([c["Key"] for c in r["Contents"]] == ["c", "d/e/f", "space key", "zz"], "StartAfter")
    r = s3.list_objects_v2(Bucket="data", MaxKeys=0)
    check(r["KeyCount"] == 0 and not r["IsTruncated"], "MaxKeys=0")
    c = s3.list_objects_v2(Bucket="data", Prefix="c")["Contents"][0]
    check(c["Size"] == 1 and c["ETag"] == '"%s"' % hashlib.md5(b"c").hexdigest(), "entry")
    expect_error("InvalidArgument", 400, s3.list_objects_v2, Bucket="data",
                 ContinuationToken="not-a-token!")
    # DeleteObjects, quiet and verbose; a missing key is "deleted" too
    r = s3.delete_objects(Bucket="data", Delete={"Objects": [{"Key": k} for k in keys[:4]] +
                                                 [{"Key": "never-was"}], "Quiet": True})
    check(not r.get("Errors") and not r.get("Deleted"), "quiet DeleteObjects: %s" % r)
    r = s3.delete_objects(Bucket="data", Delete={"Objects": [{"Key": k} for k in keys[4:]]})
    check(sorted(d["Key"] for d in r["Deleted"]) == keys[4:], "DeleteObjects: %s" % r)
    check(s3.list_objects_v2(Bucket="data")["KeyCount"] == 0, "all deleted")


def test_virtual_host():
    """Host: data.s3.test:PORT names the bucket (the server runs with --base-domain)."""
    host = "data.s3.test:%d" % srv.port
    st, _, _ = raw("PUT", "/vh/key", body=b"virtual", host=host)
    check(st == 200, "virtual-host PUT: %d" % st)
    st, h, body = raw("GET", "/vh/key", host=host)
    check(st == 200 and body == b"virtual", "virtual-host GET: %d" % st)
    check(client().get_object(Bucket="data", Key="vh/key")["Body"].read() == b"virtual",
          "the same object path-style")
    st, _, body = raw("GET", "/?list-type=2&prefix=vh%2F", host=host)
    check(st == 200 and b"<Key>vh/key</Key>" in body, "virtual-host listing: %d %r" % (st, body))
    client().delete_object(Bucket="data", Key="vh/key")


def test_security(s3):
    s3.put_object(Bucket="data", Key="secret", Body=b"top secret")
    expect_error("SignatureDoesNotMatch", 403, client(secret="wrong" + srv.secret_key).get_object,
                 Bucket="data", Key="secret")
    expect_error("InvalidAccessKeyId", 403, client(access="AKIDUNKNOWN").list_buckets)
    # presigned: valid, tampered, expired
    url = s3.generate_presigned_url("get_object", Params={"Bucket": "data", "Key": "secret"},
                                    ExpiresIn=600)
    check(urllib.request.urlopen(url, timeout=30).read() == b"top secret", "presigned GET")

    def http_error(u, method="GET", data=None):
        try:
            urllib.request.urlopen(urllib.request.Request(u, method=method, data=data), timeout=30)
        except urllib.error.HTTPError as e:
            body = e.read().decode()
            code = body.split("<Code>")[1].split("</Code>")[0] if "<Code>" in body else ""
            return e.code, code
        return 200, ""

    sig = url.index("X-Amz-Signature=") + len("X-Amz-Signature=")
    flipped = "0" if url[sig] != "0" else "1"
    check(http_error(url[:sig] + flipped + url[sig + 1:]) == (403, "SignatureDoesNotMatch"),
          "tampered signature")
    check(http_error(url.replace("secret?", "secret2?")) == (403, "SignatureDoesNotMatch"),
          "presigned URL used for another key")
    short = s3.generate_presigned_url("get_object", Params={"Bucket": "data", "Key": "secret"},
                                      ExpiresIn=1)
    time.sleep(2.5)  # past its expiry whatever the machine's speed
    check(http_error(short) == (403, "AccessDenied"), "expired presigned URL")
    put_url = s3.generate_presigned_url("put_object", Params={"Bucket": "data", "Key": "pp"},
                                        ExpiresIn=600)
    check(http_error(put_url, "PUT", b"presigned body") == (200, ""), "presigned PUT")
    check(s3.get_object(Bucket="data", Key="pp")["Body"].read() == b"presigned body", "pp")
    s3.delete_object(Bucket="data", Key="pp")
    # no signature at all
    check(http_error(srv.endpoint + "/data/secret") == (403, "AccessDenied"), "anonymous GET")
    check(http_error(srv.endpoint + "/data/secret", "PUT", b"x") == (403, "AccessDenied"),
          "anonymous PUT")
    check(s3.get_object(Bucket="data", Key="secret")["Body"].read() == b"top secret",
          "refused requests changed nothing")
    # a signed body that is not the body sent
    req = AWSRequest(method="PUT", url=srv.endpoint + "/data/secret", data=b"evil")
    req.headers["x-amz-content-sha256"] = hashlib.sha256(b"good").hexdigest()
    SigV4Auth(Credentials(srv.access_key, srv.secret_key), "s3", "us-east-1").add_auth(req)
    st, _, body = raw("PUT", "/data/secret", body=b"evil", headers=dict(req.headers.items()),
                      sign=False)
    check(st == 400 and b"XAmzContentSHA256Mismatch" in body, "payload hash mismatch: %d" % st)
    check(s3.get_object(Bucket="data", Key="secret")["Body"].read() == b"top secret",
          "a body that fails its hash is never committed")
    s3.delete_object(Bucket="data", Key="secret")
    # The same wherever the put takes the hash: one stripe (after it is sent),
    # a body a hasher follows, a part.
    rng = random.Random(7)
    for size in (300 << 10, 3 << 20):
        good = rng.randbytes(size)
        s3.put_object(Bucket="data", Key="big", Body=good)
        evil = bytearray(good)
        evil[size // 2] ^= 1
        st, _, body = srv.request("PUT", "/data/big", bytes(evil),
                                  payload_hash=hashlib.sha256(good).hexdigest())
        check(st == 400 and b"XAmzContentSHA256Mismatch" in body,
              "payload hash mismatch, %d bytes: %d %r" % (size, st, body[:200]))
        check(s3.get_object(Bucket="data", Key="big")["Body"].read() == good,
              "a %d-byte body that fails its hash is never committed" % size)
    s3.delete_object(Bucket="data", Key="big")
    up = s3.create_multipart_upload(Bucket="data", Key="mp")["UploadId"]
    part = rng.randbytes(2 << 20)
    st, _, body = srv.request("PUT", "/data/mp?partNumber=1&uploadId=" + up, part,
                              payload_hash=hashlib.sha256(part[1:]).hexdigest())
    check(st == 400 and b"XAmzContentSHA256Mismatch" in body, "part hash mismatch: %d" % st)
    check(not s3.list_parts(Bucket="data", Key="mp", UploadId=up).get("Parts"),
          "a part that fails its hash is never sealed")
    s3.abort_multipart_upload(Bucket="data", Key="mp", UploadId=up)
    still_serving()


def streaming_put(key, body, chunk, tamper=None):
    """PUT with STREAMING-AWS4-HMAC-SHA256-PAYLOAD: the aws-chunked body with a
    chained signature per chunk, as the Java and Go SDKs send it. tamper(i,
    data) may change chunk i after it was signed."""
    import hmac
    hdrs = {"x-amz-content-sha256": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
            "x-amz-decoded-content-length": str(len(body)), "Content-Encoding": "aws-chunked"}
    pieces = [body[i:i + chunk] for i in range(0, len(body), chunk)] + [b""]
    enc_len = sum(len("%x;chunk-signature=" % len(p)) + 64 + 2 + len(p) + 2 for p in pieces)
    req = AWSRequest(method="PUT", url=srv.endpoint + "/data/" + key, data=b"", headers=hdrs)
    req.headers["Content-Length"] = str(enc_len)
    SigV4Auth(Credentials(srv.access_key, srv.secret_key), "s3", "us-east-1").add_auth(req)
    auth = req.headers["Authorization"]
    prev = auth.split("Signature=")[1]
    date = req.headers["X-Amz-Date"]
    scope = auth.split("Credential=")[1].split(",")[0].split("/", 1)[1]

    def h(k, m):
        return hmac.new(k, m.encode() if isinstance(m, str) else m, hashlib.sha256).digest()

    key_ = h(h(h(h(("AWS4" + srv.secret_key).encode(), date[:8]), "us-east-1"), "s3"),
             "aws4_request")
    out = b""
    for i, p in enumerate(pieces):
        sts = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", date, scope, prev,
                         hashlib.sha256(b"").hexdigest(), hashlib.sha256(p).hexdigest()])
        prev = hmac.new(key_, sts.encode(), hashlib.sha256).hexdigest()
        if tamper:
            p = tamper(i, p)
        out += b"%x;chunk-signature=%s\r\n%s\r\n" % (len(p), prev.encode(), p)
    headers = dict(req.headers.items())
    headers.pop("Content-Length", None)
    return raw("PUT", "/data/" + key, body=out, headers=headers, sign=False)


def test_streaming(s3, rng):
    body = rng.randbytes(200000)
    st, h, resp = streaming_put("chunked", body, 65536)
    check(st == 200, "streaming PUT: %d %r" % (st, resp[:300]))
    check(h["etag"] == '"%s"' % hashlib.md5(body).hexdigest(), "streaming ETag")
    check(s3.get_object(Bucket="data", Key="chunked")["Body"].read() == body, "streaming bytes")

    def flip(i, p):
        return bytes([p[0] ^ 1]) + p[1:] if i == 2 else p

    st, _, resp = streaming_put("chunked", rng.randbytes(200000), 65536, tamper=flip)
    check(st == 403 and b"SignatureDoesNotMatch" in resp, "tampered chunk: %d %r" % (st, resp))
    check(s3.get_object(Bucket="data", Key="chunked")["Body"].read() == body,
          "a PUT with a bad chunk signature must not be committed")
    s3.delete_object(Bucket="data", Key="chunked")
    still_serving()


def test_malformed(s3):
    for body in (b"<Delete><Object><Key>a</Key></Object>", b"not xml", b"",
                 b"<Delete></Delete>", b"<!DOCTYPE x [<!ENTITY a 'b'>]><Delete/>"):
        md5 = base64.b64encode(hashlib.md5(body).digest()).decode()
        st, _, resp = raw("POST", "/data?delete", body=body, headers={"Content-MD5": md5})
        check(st == 400 and b"<Code>MalformedXML</Code>" in resp,
              "malformed DeleteObjects %r: %d %r" % (body, st, resp[:200]))
    still_serving()
    # huge headers: refused with a 4xx, and the server carries on
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    try:
        conn.putrequest("GET", "/data/x")
        conn.putheader("X-Huge", "h" * (1 << 20))
        conn.endheaders()
        st = conn.getresponse().status
    except (ConnectionError, http.client.HTTPException):
        st = 431  # the server may hang up before reading it all; what matters is below
    conn.close()
    check(400 <= st < 500, "a 1 MiB header: %d" % st)
    st, _, _ = raw("GET", "/data/" + "k" * 1025)
    check(st == 400, "key over 1024 bytes: %d" % st)
    st, _, resp = raw("GET", "/data/a%zzb")
    check(st == 400, "bad escape: %d" % st)
    st, _, resp = raw("GET", "/data?max-keys=-1")
    check(st == 400 and b"InvalidArgument" in resp, "negative max-keys: %d" % st)
    # bytes that are not HTTP
    import socket
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    s.sendall(b"\x00\x01garbage\r\n\r\n")
    s.shutdown(socket.SHUT_WR)  # the end of it: an answer or a close, not a wait
    try:
        reply = s.recv(100)
    except OSError:
        reply = b""
    s.close()
    check(reply == b"" or reply.startswith(b"HTTP/1.1 4"), "garbage: %r" % reply)
    still_serving()


def test_multipart(s3, rng):
    """3 parts of 5 MiB and a small last one; GET, ranges across part
    boundaries, HEAD; ListParts, ListMultipartUploads; errors; abort; overwrite."""
    MiB = 1 << 20
    sizes = [5 * MiB, 5 * MiB, 5 * MiB, 123457]
    parts = [rng.randbytes(n) for n in sizes]
    whole = b"".join(parts)
    up = s3.create_multipart_upload(Bucket="data", Key="mp/obj", ContentType="text/x-mp",
                                    Metadata={"color": "blue"})
    uid = up["UploadId"]
    done = []
    for i, body in enumerate(parts):
        r = s3.upload_part(Bucket="data", Key="mp/obj", UploadId=uid, PartNumber=i + 1, Body=body)
        check(r["ETag"].strip('"') == hashlib.md5(body).hexdigest(), "part ETag is its MD5")
        done.append({"PartNumber": i + 1, "ETag": r["ETag"]})
    # parts are invisible until Complete
    check(s3.list_objects_v2(Bucket="data", Prefix="mp/")["KeyCount"] == 0, "parts are hidden")
    expect_error("404", 404, s3.head_object, Bucket="data", Key="mp/obj")
    lp = s3.list_parts(Bucket="data", Key="mp/obj", UploadId=uid)
    check([(p["PartNumber"], p["Size"]) for p in lp["Parts"]] ==
          [(i + 1, n) for i, n in enumerate(sizes)], "ListParts: %r" % lp["Parts"])
    lp = s3.list_parts(Bucket="data", Key="mp/obj", UploadId=uid, MaxParts=2)
    check(lp["IsTruncated"] and lp["NextPartNumberMarker"] == 2 and len(lp["Parts"]) == 2,
          "ListParts paging")
    lu = s3.list_multipart_uploads(Bucket="data")
    check([(u["Key"], u["UploadId"]) for u in lu.get("Uploads", [])] == [("mp/obj", uid)],
          "ListMultipartUploads: %r" % lu.get("Uploads"))
    # the part list is judged: order, ETags, sizes, upload ids
    expect_error("InvalidPartOrder", 400, s3.complete_multipart_upload, Bucket="data",
                 Key="mp/obj", UploadId=uid, MultipartUpload={"Parts": [done[1], done[0]]})
    bad = dict(done[0], ETag='"%s"' % ("0" * 32))
    expect_error("InvalidPart", 400, s3.complete_multipart_upload, Bucket="data", Key="mp/obj",
                 UploadId=uid, MultipartUpload={"Parts": [bad] + done[1:]})
    expect_error("InvalidPart", 400, s3.complete_multipart_upload, Bucket="data", Key="mp/obj",
                 UploadId=uid, MultipartUpload={"Parts": done[:3] + [{"PartNumber": 9, "ETag": "x"}]})
    extra = s3.upload_part(Bucket="data", Key="mp/obj", UploadId=uid, PartNumber=6, Body=b"z")
    expect_error("EntityTooSmall", 400, s3.complete_multipart_upload, Bucket="data",
                 Key="mp/obj", UploadId=uid,
                 MultipartUpload={"Parts": [done[3], {"PartNumber": 6, "ETag": extra["ETag"]}]})
    expect_error("NoSuchUpload", 404, s3.upload_part, Bucket="data", Key="mp/obj",
                 UploadId="0" * 32, PartNumber=1, Body=b"x")
    expect_error("NoSuchUpload", 404, s3.list_parts, Bucket="data", Key="other", UploadId=uid)
    r = s3.complete_multipart_upload(Bucket="data", Key="mp/obj", UploadId=uid,
                                     MultipartUpload={"Parts": done})
    want = hashlib.md5(b"".join(hashlib.md5(p).digest() for p in parts)).hexdigest() + "-4"
    check(r["ETag"].strip('"') == want, "multipart ETag %s, want %s" % (r["ETag"], want))
    h = s3.head_object(Bucket="data", Key="mp/obj")
    check(h["ContentLength"] == len(whole) and h["ETag"].strip('"') == want and
          h["ContentType"] == "text/x-mp" and h["Metadata"] == {"color": "blue"}, "HEAD %r" % h)
    got = s3.get_object(Bucket="data", Key="mp/obj")["Body"].read()
    check(got == whole, "multipart GET changed the bytes")
    for a, b in [(5 * MiB - 10, 5 * MiB + 9), (0, 15 * MiB + 5), (10 * MiB - 1, 10 * MiB),
                 (15 * MiB - 3, len(whole) - 1), (len(whole) - 7, len(whole) - 1),
                 (rng.randrange(len(whole) // 2), rng.randrange(len(whole) // 2, len(whole)))]:
        got = s3.get_object(Bucket="data", Key="mp/obj", Range="bytes=%d-%d" % (a, b))
        check(got["Body"].read() == whole[a:b + 1], "range %d-%d across parts" % (a, b))
    expect_error("NoSuchUpload", 404, s3.list_parts, Bucket="data", Key="mp/obj", UploadId=uid)
    check(not s3.list_multipart_uploads(Bucket="data").get("Uploads"), "upload still listed")
    # abort frees the parts; the upload is gone
    ab = s3.create_multipart_upload(Bucket="data", Key="mp/aborted")["UploadId"]
    s3.upload_part(Bucket="data", Key="mp/aborted", UploadId=ab, PartNumber=1, Body=b"y" * 1000)
    s3.abort_multipart_upload(Bucket="data", Key="mp/aborted", UploadId=ab)
    expect_error("NoSuchUpload", 404, s3.list_parts, Bucket="data", Key="mp/aborted", UploadId=ab)
    expect_error("NoSuchUpload", 404, s3.abort_multipart_upload, Bucket="data", Key="mp/aborted",
                 UploadId=ab)
    expect_error("404", 404, s3.head_object, Bucket="data", Key="mp/aborted")
    # UploadPartCopy with a range, from the multipart object itself
    cp = s3.create_multipart_upload(Bucket="data", Key="mp/copy")["UploadId"]
    r = s3.upload_part_copy(Bucket="data", Key="mp/copy", UploadId=cp, PartNumber=1,
                            CopySource={"Bucket": "data", "Key": "mp/obj"},
                            CopySourceRange="bytes=%d-%d" % (MiB, 6 * MiB - 1))
    e1 = r["CopyPartResult"]["ETag"]
    s3.complete_multipart_upload(Bucket="data", Key="mp/copy", UploadId=cp,
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1}]})
    got = s3.get_object(Bucket="data", Key="mp/copy")["Body"].read()
    check(got == whole[MiB:6 * MiB], "UploadPartCopy bytes")
    # overwrite and delete free the parts like any object's chunks
    s3.put_object(Bucket="data", Key="mp/obj", Body=b"small now")
    check(s3.get_object(Bucket="data", Key="mp/obj")["Body"].read() == b"small now", "overwrite")
    s3.delete_object(Bucket="data", Key="mp/obj")
    s3.delete_object(Bucket="data", Key="mp/copy")
    still_serving()


def test_copy(s3, rng):
    body = rng.randbytes(3 * (1 << 20) + 17)
    s3.put_object(Bucket="data", Key="src", Body=body, ContentType="a/b", Metadata={"k": "v"})
    r = s3.copy_object(Bucket="data", Key="dst", CopySource={"Bucket": "data", "Key": "src"})
    check(r["CopyObjectResult"]["ETag"].strip('"') == hashlib.md5(body).hexdigest(), "copy ETag")
    h = s3.head_object(Bucket="data", Key="dst")
    check(h["ContentType"] == "a/b" and h["Metadata"] == {"k": "v"}, "COPY keeps metadata")
    check(s3.get_object(Bucket="data", Key="dst")["Body"].read() == body, "copy bytes")
    s3.copy_object(Bucket="data", Key="dst", CopySource="data/src", MetadataDirective="REPLACE",
                   ContentType="c/d", Metadata={"x": "y"})
    h = s3.head_object(Bucket="data", Key="dst")
    check(h["ContentType"] == "c/d" and h["Metadata"] == {"x": "y"}, "REPLACE sets metadata")
    expect_error("InvalidRequest", 400, s3.copy_object, Bucket="data", Key="src",
                 CopySource={"Bucket": "data", "Key": "src"})
    expect_error("NoSuchKey", 404, s3.copy_object, Bucket="data", Key="dst",
                 CopySource={"Bucket": "data", "Key": "nothing"})
    s3.delete_objects(Bucket="data", Delete={"Objects": [{"Key": "src"}, {"Key": "dst"}]})


def test_not_implemented(s3):
    s3.put_object(Bucket="data", Key="src", Body=b"x")
    expect_error("NotImplemented", 501, s3.put_object_tagging, Bucket="data", Key="src",
                 Tagging={"TagSet": [{"Key": "a", "Value": "b"}]})
    expect_error("NotImplemented", 501, s3.put_bucket_versioning, Bucket="data",
                 VersioningConfiguration={"Status": "Enabled"})
    s3.delete_object(Bucket="data", Key="src")
    still_serving()


def test_admin():
    def get(path, token=srv.token):
        req = urllib.request.Request(srv.admin + path,
                                     headers={"Authorization": "Bearer " + token} if token else {})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    st, body = get("/admin/v1/cluster", token=None)
    check(st == 401 and json.loads(body)["code"] == "Unauthorized", "admin without token")
    st, body = get("/admin/v1/cluster", token="wrong")
    check(st == 401, "admin with a wrong token")
    st, body = get("/admin/v1/cluster")
    check(st == 200, "cluster: %d %r" % (st, body[:300]))
    nodes = json.loads(body)["nodes"]
    check(len(nodes) == 9 and all(n["up"] for n in nodes), "9 nodes up: %s" % nodes)
    st, body = get("/metrics")
    text = body.decode()
    check(st == 200 and 'inec_s3_requests_total{op="PutObject",status="200"}' in text,
          "metrics: %s" % text[:500])
    check('inec_node_up{node=' in text, "node gauges in metrics")
    # pools: list, create, refuse a duplicate and a bad profile
    st, body = get("/admin/v1/pools")
    check(st == 200 and [p["name"] for p in json.loads(body)] == ["default"], "pools: %r" % body)

    def post(path, doc):
        req = urllib.request.Request(srv.admin + path, data=doc, method="POST",
                                     headers={"Authorization": "Bearer " + srv.token,
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    st, body = post("/admin/v1/pools", b'{"name": "wide", "profile": "rs:k=4,m=2"}')
    check(st == 201 and json.loads(body)["name"] == "wide", "create pool: %d %r" % (st, body))
    st, body = post("/admin/v1/pools", b'{"name": "wide", "profile": "rs:k=4,m=2"}')
    check(st == 409 and json.loads(body)["code"] == "AlreadyExists", "duplicate pool: %d" % st)
    st, body = post("/admin/v1/pools", b'{"name": "bad", "profile": "rs:k=0"}')
    check(st == 400 and json.loads(body)["code"] == "InvalidArgument", "bad profile: %d" % st)
    st, body = post("/admin/v1/pools", b'{"name": ')
    check(st == 400 and json.loads(body)["code"] == "MalformedJSON", "bad JSON: %d" % st)
    st, body = get("/admin/v1/pools")
    check(sorted(p["name"] for p in json.loads(body)) == ["default", "wide"], "pools after")
    # an object's stripes and chunks
    client().put_object(Bucket="data", Key="dir/shown", Body=os.urandom(3 << 20))
    st, body = get("/admin/v1/objects/data/dir/shown")
    check(st == 200, "object: %d %r" % (st, body[:300]))
    doc = json.loads(body)
    chunks = [c for stripe in doc["stripes"] for c in stripe["chunks"]]
    check(doc["size"] == 3 << 20 and chunks and all(c["state"] == "ok" for c in chunks),
          "object document: %r" % doc)
    st, body = get("/admin/v1/objects/data/nope")
    check(st == 404 and json.loads(body)["code"] == "NotFound", "missing object: %d" % st)
    # DEGs as JSON and as Graphviz
    st, body = get("/admin/v1/deg?pool=default&op=decode&lost=0,3")
    check(st == 200 and isinstance(json.loads(body), dict), "deg json: %d %r" % (st, body[:200]))
    st, body = get("/admin/v1/deg?pool=default&op=encode&format=dot")
    check(st == 200 and body.lstrip().startswith(b"digraph"), "deg dot: %d %r" % (st, body[:200]))
    st, body = get("/admin/v1/deg?pool=default&op=decode&lost=0,1,2,3")
    check(st == 400, "more losses than RS(6,3) tolerates: %d" % st)
    st, body = get("/admin/v1/deg?pool=nope&op=encode")
    check(st == 404, "unknown pool: %d" % st)
    st, body = get("/admin/v1/deg?pool=default&op=fly")
    check(st == 400, "unknown op: %d" % st)
    st, body = get("/admin/v1/nope")
    check(st == 404 and json.loads(body)["code"] == "NotFound", "unknown endpoint")


def test_port_taken(s3):
    """A second server on the S3 port, or on the control API's, exits with a
    clear error rather than share the port (SO_REUSEPORT would have split the
    connections between two gateways), and the first goes on serving."""
    import subprocess
    import tempfile
    admin = srv.admin.split("://", 1)[1].split("/", 1)[0]
    for listen, admin_listen in ((srv.hostport, "127.0.0.1:0"), ("127.0.0.1:0", admin)):
        with tempfile.TemporaryDirectory(prefix="inec-port-") as d:
            try:
                p = subprocess.run([sys.argv[1], "server", "--data", d, "--listen", listen,
                                    "--admin-listen", admin_listen, "--nbd-listen", "off",
                                    "--nbd-socket", "off"], capture_output=True, timeout=60)
            except subprocess.TimeoutExpired:
                check(False, "a second server on %s / %s did not exit" % (listen, admin_listen))
        err = p.stderr.decode(errors="replace")
        check(p.returncode != 0 and "cannot listen on" in err,
              "a second server on %s / %s: exit %d, stderr %r"
              % (listen, admin_listen, p.returncode, err[-300:]))
    s3.put_object(Bucket="data", Key="after-port-taken", Body=b"x")
    check(s3.get_object(Bucket="data", Key="after-port-taken")["Body"].read() == b"x",
          "the first server stopped serving")


def test_graceful_shutdown(s3):
    """SIGTERM while a PUT is mid-body: the server stops accepting, lets the
    PUT finish (200, stored), then exits 0. The 100 Continue proves the
    request is in the server's hands before the signal is sent."""
    global srv
    import signal
    import socket
    body = os.urandom(300000)
    req = AWSRequest(method="PUT", url=srv.endpoint + "/data/inflight", data=b"",
                     headers={"x-amz-content-sha256": "UNSIGNED-PAYLOAD"})
    SigV4Auth(Credentials(srv.access_key, srv.secret_key), "s3", "us-east-1").add_auth(req)
    head = "PUT /data/inflight HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % srv.port
    for k, v in req.headers.items():
        head += "%s: %s\r\n" % (k, v)
    head += "Content-Length: %d\r\nExpect: 100-continue\r\n\r\n" % len(body)
    sock = socket.create_connection(("127.0.0.1", srv.port), timeout=60)
    sock.sendall(head.encode())
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = sock.recv(4096)
        check(chunk, "no 100 Continue")
        got += chunk
    check(got.startswith(b"HTTP/1.1 100"), "want 100 Continue, got %r" % got)
    sock.sendall(body[:100000])
    srv.proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)  # not needed for correctness: gives the shutdown a chance to go wrong
    sock.sendall(body[100000:])
    reply = b""
    while b"\r\n\r\n" not in reply:
        chunk = sock.recv(4096)
        check(chunk, "connection closed before the PUT's answer: %r" % reply)
        reply += chunk
    sock.close()
    check(reply.startswith(b"HTTP/1.1 200"), "PUT in flight at SIGTERM: %r" % reply[:200])
    check(('"%s"' % hashlib.md5(body).hexdigest()).encode() in reply, "its ETag")
    try:
        rc = srv.proc.wait(timeout=90)
    except Exception:
        srv.fail("server did not exit after SIGTERM")
    check(rc == 0, "exit status %d after SIGTERM" % rc)
    # A restart on the same directory reuses the stored credentials and finds the PUT.
    first = srv
    first.stop(keep=True)
    srv = InecServer(sys.argv[1], reuse=first)
    check((srv.access_key, srv.secret_key, srv.token) ==
          (first.access_key, first.secret_key, first.token), "credentials changed on restart")
    check("generated" not in srv.banner, "credentials generated again")
    check(client().get_object(Bucket="data", Key="inflight")["Body"].read() == body,
          "the PUT that finished during shutdown was not stored")


def main():
    global srv
    mode = sys.argv[2] if len(sys.argv) > 2 else "server"
    srv = start(sys.argv[1], mode, extra_args=["--base-domain", "s3.test"])
    rng = random.Random(6)
    s3 = client()
    test_buckets(s3)
    test_objects(s3, rng)
    test_listing(s3)
    test_streaming(s3, rng)
    test_multipart(s3, rng)
    test_copy(s3, rng)
    if mode == "server":
        test_virtual_host()
        test_security(s3)
        test_malformed(s3)
        test_not_implemented(s3)
        test_admin()
        test_port_taken(s3)
        test_graceful_shutdown(s3)
    srv.stop()
    print("s3_server_boto3 (%s, %s): all checks passed" % (mode, srv.endpoint))


if __name__ == "__main__":
    main()
