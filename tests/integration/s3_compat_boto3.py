#!/usr/bin/env python3
"""The S3 behaviours clients and conformance suites check, with boto3 against a
real `inec server` (argv[2] "server", the default) or `inec gateway` in front
of nine `inec node` processes ("cluster"): bucket re-create, stored headers
and response-* overrides, empty user metadata, listing details (empty
delimiter, fetch-owner, empty continuation token, V1 url encoding),
ListObjectVersions on an unversioned bucket, a part uploaded twice and a
repeated Complete, GET/HEAD by part number, canned ACLs with unsigned (anonymous) requests, presigned
URL lifetimes, conditional GET/HEAD and copy sources (412, 304, and S3's
documented pairs), PutObject, CopyObject and CompleteMultipartUpload only if
absent (If-None-Match: *: 412 over an object, one winner among racing
creators), If-Match on PutObject, CopyObject and DeleteObject, the other
conditional writes and
what a write asks to be kept but inec does not keep (SSE, SSE-C, Object
Lock, tags) refused with 501, never ignored, and 501 for what is not served.
argv[1]: the inec binary."""
import base64
import datetime
import os
import sys
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inec_server import InecServer, start  # noqa: E402

try:
    import boto3
    from botocore import UNSIGNED
    from botocore.config import Config
    from botocore.exceptions import ClientError
except ImportError:
    sys.exit("boto3 is missing: run scripts/deps.sh (python3-boto3)")

srv = None
ALL_USERS = "http://acs.amazonaws.com/groups/global/AllUsers"
AUTH_USERS = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"


def check(cond, what):
    if not cond:
        srv.fail(what)


def client(region="us-east-1"):
    return boto3.client(
        "s3", endpoint_url=srv.endpoint, region_name=region,
        aws_access_key_id=srv.access_key, aws_secret_access_key=srv.secret_key,
        config=Config(signature_version="s3v4", retries={"max_attempts": 1},
                      s3={"addressing_style": "path"}))


def expect_error(code, status, fn, *a, **kw):
    try:
        fn(*a, **kw)
        got = (None, 200)
    except ClientError as e:
        got = (e.response["Error"].get("Code"), e.response["ResponseMetadata"]["HTTPStatusCode"])
    check(got == (code, status), "%s: want %s %d, got %s" % (fn.__name__, code, status, got))


def request(method, path, body=b"", headers=None, sign=True, payload_hash=None):
    return srv.request(method, path, body, headers, sign, payload_hash=payload_hash)


def anonymous(method, path):
    return request(method, path, sign=False)


def code_of(body):
    b = body.decode(errors="replace")
    return b.split("<Code>")[1].split("</Code>")[0] if "<Code>" in b else ""


def test_bucket_recreate(s3):
    s3.create_bucket(Bucket="compat")
    s3.put_object(Bucket="compat", Key="kept", Body=b"still here")
    r = s3.create_bucket(Bucket="compat")
    check(r["ResponseMetadata"]["HTTPStatusCode"] == 200, "re-create in us-east-1: 200")
    check(s3.get_object(Bucket="compat", Key="kept")["Body"].read() == b"still here",
          "re-creating a bucket keeps its contents")
    s3.delete_object(Bucket="compat", Key="kept")


def test_bucket_recreate_other_region():
    """A gateway in eu-west-1: re-creating a bucket one owns is a 409."""
    global srv
    main = srv
    srv = InecServer(sys.argv[1], extra_args=["--region", "eu-west-1"])
    s3 = client("eu-west-1")
    s3.create_bucket(Bucket="regional",
                     CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    s3.put_object(Bucket="regional", Key="k", Body=b"v")
    expect_error("BucketAlreadyOwnedByYou", 409, s3.create_bucket, Bucket="regional",
                 CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    check(s3.get_object(Bucket="regional", Key="k")["Body"].read() == b"v", "contents kept")
    srv.stop()
    srv = main


HEADERS = {"CacheControl": "max-age=3600, must-revalidate",
           "ContentDisposition": 'attachment; filename="report.txt"',
           "ContentEncoding": "gzip", "ContentLanguage": "de-CH",
           "ContentType": "text/x-report"}


def check_headers(got, want, what):
    for k, v in want.items():
        check(got.get(k) == v, "%s: %s is %r, want %r" % (what, k, got.get(k), v))


def test_stored_headers(s3):
    import datetime
    expires = datetime.datetime(2031, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
    s3.put_object(Bucket="compat", Key="h", Body=b"headers", Expires=expires, **HEADERS)
    for what, r in (("HEAD", s3.head_object(Bucket="compat", Key="h")),
                    ("GET", s3.get_object(Bucket="compat", Key="h"))):
        check_headers(r, HEADERS, what)
        check(r["ResponseMetadata"]["HTTPHeaders"].get("expires") ==
              "Thu, 02 Jan 2031 03:04:05 GMT", "%s Expires: %r" % (what, r["ResponseMetadata"]))
    # response-* overrides, GET and HEAD
    over = {"ResponseCacheControl": "no-cache", "ResponseContentDisposition": "inline",
            "ResponseContentEncoding": "identity", "ResponseContentLanguage": "fr",
            "ResponseContentType": "application/x-over", "ResponseExpires": expires}
    r = s3.get_object(Bucket="compat", Key="h", **over)
    check(r["Body"].read() == b"headers", "GET with overrides: the body")
    check_headers(r, {"CacheControl": "no-cache", "ContentDisposition": "inline",
                      "ContentEncoding": "identity", "ContentLanguage": "fr",
                      "ContentType": "application/x-over"}, "GET with overrides")
    st, h, _ = request("HEAD", "/compat/h?response-content-type=text%2Fover")
    check(st == 200 and h.get("content-type") == "text/over", "HEAD with an override: %r" % h)
    check(s3.head_object(Bucket="compat", Key="h")["ContentType"] == "text/x-report",
          "an override is for one response, the object keeps its own")
    # a header that would end the line is refused
    st, _, body = request("GET", "/compat/h?response-content-type=a%0D%0AX-Evil%3A%201")
    check(st == 400 and code_of(body) == "InvalidArgument", "CR LF in an override: %d %r" % (st, body))
    # CopyObject keeps them (COPY), or takes the request's (REPLACE)
    s3.copy_object(Bucket="compat", Key="h2", CopySource="compat/h")
    check_headers(s3.head_object(Bucket="compat", Key="h2"), HEADERS, "copied")
    s3.copy_object(Bucket="compat", Key="h2", CopySource="compat/h", MetadataDirective="REPLACE",
                   CacheControl="private")
    h = s3.head_object(Bucket="compat", Key="h2")
    check(h.get("CacheControl") == "private" and "ContentDisposition" not in h,
          "REPLACE takes only the request's headers: %r" % h)
    # multipart: the headers of CreateMultipartUpload
    up = s3.create_multipart_upload(Bucket="compat", Key="h3", **HEADERS)
    p = s3.upload_part(Bucket="compat", Key="h3", UploadId=up["UploadId"], PartNumber=1,
                       Body=b"part")
    s3.complete_multipart_upload(Bucket="compat", Key="h3", UploadId=up["UploadId"],
                                 MultipartUpload={"Parts": [{"PartNumber": 1,
                                                             "ETag": p["ETag"]}]})
    check_headers(s3.head_object(Bucket="compat", Key="h3"), HEADERS, "multipart")
    # aws-chunked says how the body travelled, not what it is: it is not kept
    body = b"hello"
    crc = base64.b64encode(zlib.crc32(body).to_bytes(4, "big")).decode()
    chunked = b"5\r\nhello\r\n0\r\nx-amz-checksum-crc32:%s\r\n\r\n" % crc.encode()
    st, _, resp = request("PUT", "/compat/h4", body=chunked,
                          payload_hash="STREAMING-UNSIGNED-PAYLOAD-TRAILER",
                          headers={"Content-Encoding": "aws-chunked,gzip",
                                   "x-amz-trailer": "x-amz-checksum-crc32",
                                   "x-amz-decoded-content-length": str(len(body))})
    check(st == 200, "unsigned aws-chunked PUT: %d %r" % (st, resp[:300]))
    r = s3.get_object(Bucket="compat", Key="h4")
    check(r["Body"].read() == body and r.get("ContentEncoding") == "gzip",
          "Content-Encoding without aws-chunked: %r" % r.get("ContentEncoding"))
    for k in ("h", "h2", "h3", "h4"):
        s3.delete_object(Bucket="compat", Key=k)


def test_empty_metadata(s3):
    s3.put_object(Bucket="compat", Key="m", Body=b"x", Metadata={"empty": "", "full": "1"})
    got = s3.head_object(Bucket="compat", Key="m")["Metadata"]
    check(got == {"empty": "", "full": "1"}, "an empty value is kept: %r" % got)
    s3.put_object(Bucket="compat", Key="m", Body=b"y", Metadata={"full": ""})
    got = s3.get_object(Bucket="compat", Key="m")["Metadata"]
    check(got == {"full": ""}, "an empty value replaces a non-empty one: %r" % got)
    s3.copy_object(Bucket="compat", Key="m", CopySource="compat/m", MetadataDirective="REPLACE",
                   Metadata={"full": "again", "e": ""})
    got = s3.head_object(Bucket="compat", Key="m")["Metadata"]
    check(got == {"full": "again", "e": ""}, "REPLACE with an empty value: %r" % got)
    s3.delete_object(Bucket="compat", Key="m")


def test_listing(s3):
    keys = ["a b+c/1", "a b+c/2", "d/e", "f"]
    for k in keys:
        s3.put_object(Bucket="compat", Key=k, Body=b"l")
    # delimiter= (empty) is no delimiter: every key, and no Delimiter in the answer
    st, _, body = request("GET", "/compat?list-type=2&delimiter=")
    check(st == 200 and b"<Delimiter>" not in body and b"<CommonPrefixes>" not in body and
          body.count(b"<Key>") == len(keys), "empty delimiter: %r" % body[:600])
    r = s3.list_objects(Bucket="compat", Delimiter="")
    check([c["Key"] for c in r["Contents"]] == keys and "Delimiter" not in r, "V1 empty delimiter")
    # fetch-owner: Owner only when asked for in V2; always in V1
    r = s3.list_objects_v2(Bucket="compat", FetchOwner=True)
    owners = [c.get("Owner", {}).get("ID") for c in r["Contents"]]
    check(all(owners) and len(set(owners)) == 1, "fetch-owner=true: %r" % r["Contents"][0])
    owner = owners[0]
    check(all("Owner" not in c for c in s3.list_objects_v2(Bucket="compat")["Contents"]),
          "no Owner without fetch-owner")
    check(s3.list_objects(Bucket="compat")["Contents"][0]["Owner"]["ID"] == owner, "V1 Owner")
    check(s3.list_buckets()["Owner"]["ID"] == owner, "the same owner in ListBuckets")
    check(srv.access_key not in owner, "the owner id is not the access key")
    # an empty continuation token is no token
    st, _, body = request("GET", "/compat?list-type=2&continuation-token=&max-keys=2")
    check(st == 200 and b"<Key>a b+c/1</Key>" in body and b"<ContinuationToken>" not in body,
          "empty continuation token: %d %r" % (st, body[:400]))
    # V1 with encoding-type=url: the top-level Prefix as sent, keys and prefixes encoded
    # (botocore asks for url encoding itself and decodes all but V1's Prefix)
    r = s3.list_objects(Bucket="compat", Prefix="a b+c/", Delimiter="/")
    check(r["Prefix"] == "a b+c/" and [c["Key"] for c in r["Contents"]] == keys[:2],
          "V1 url encoding: %r %r" % (r["Prefix"], r.get("Contents")))
    st, _, body = request("GET", "/compat?prefix=a%20b%2Bc%2F&encoding-type=url")
    check(b"<Prefix>a b+c/</Prefix>" in body and b"<Key>a%20b%2Bc/1</Key>" in body,
          "V1 raw: %r" % body[:500])
    r = s3.list_objects_v2(Bucket="compat", Prefix="a b+c/")
    check(r["Prefix"] == "a b+c/" and r["KeyCount"] == 2, "V2 url encoding: %r" % r["Prefix"])
    for k in keys:
        s3.delete_object(Bucket="compat", Key=k)


def test_versions(s3):
    keys = ["v/1", "v/2", "v/sub/3", "w"]
    etags = {}
    for k in keys:
        etags[k] = s3.put_object(Bucket="compat", Key=k, Body=k.encode())["ETag"]
    r = s3.list_object_versions(Bucket="compat")
    vs = r["Versions"]
    check([v["Key"] for v in vs] == keys, "every object: %r" % vs)
    check(all(v["VersionId"] == "null" and v["IsLatest"] and v["ETag"] == etags[v["Key"]] and
              v["Size"] == len(v["Key"]) and v["Owner"]["ID"] for v in vs), "null versions")
    check("DeleteMarkers" not in r and not r["IsTruncated"], "no delete markers")
    r = s3.list_object_versions(Bucket="compat", Prefix="v/", Delimiter="/")
    check([v["Key"] for v in r["Versions"]] == ["v/1", "v/2"] and
          [p["Prefix"] for p in r["CommonPrefixes"]] == ["v/sub/"], "prefix and delimiter")
    got, marker, pages = [], {}, 0
    while True:
        r = s3.list_object_versions(Bucket="compat", MaxKeys=1, **marker)
        got += [v["Key"] for v in r.get("Versions", [])]
        pages += 1
        if not r["IsTruncated"]:
            break
        check(r["NextVersionIdMarker"] == "null", "NextVersionIdMarker")
        marker = {"KeyMarker": r["NextKeyMarker"], "VersionIdMarker": r["NextVersionIdMarker"]}
        check(pages < 10, "paging does not end")
    check(got == keys, "paged versions: %r" % got)
    # never versioned: GetBucketVersioning answers no Status (what tools check first)
    r = s3.get_bucket_versioning(Bucket="compat")
    check(r["ResponseMetadata"]["HTTPStatusCode"] == 200 and "Status" not in r, "versioning %r" % r)
    # the null version can be named
    check(s3.get_object(Bucket="compat", Key="w", VersionId="null")["Body"].read() == b"w",
          "GET versionId=null")
    s3.head_object(Bucket="compat", Key="w", VersionId="null")
    s3.copy_object(Bucket="compat", Key="w2", CopySource={"Bucket": "compat", "Key": "w",
                                                          "VersionId": "null"})
    check(s3.get_object(Bucket="compat", Key="w2")["Body"].read() == b"w", "copy of versionId=null")
    s3.delete_object(Bucket="compat", Key="w2")
    expect_error("NotImplemented", 501, s3.get_object, Bucket="compat", Key="w",
                 VersionId="3HL4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY")
    s3.delete_object(Bucket="compat", Key="w", VersionId="null")
    expect_error("NoSuchKey", 404, s3.get_object, Bucket="compat", Key="w")
    for k in keys[:3]:
        s3.delete_object(Bucket="compat", Key=k)


def test_part_twice(s3):
    """A part number uploaded twice: the Complete's ETag names which bytes. Then
    the same Complete again (its answer lost on the way) is the same 200."""
    MiB = 1 << 20
    first, second, last = os.urandom(5 * MiB), os.urandom(5 * MiB), b"tail"
    up = s3.create_multipart_upload(Bucket="compat", Key="twice")["UploadId"]
    e1 = s3.upload_part(Bucket="compat", Key="twice", UploadId=up, PartNumber=1,
                        Body=first)["ETag"]
    e2 = s3.upload_part(Bucket="compat", Key="twice", UploadId=up, PartNumber=1,
                        Body=second)["ETag"]
    e3 = s3.upload_part(Bucket="compat", Key="twice", UploadId=up, PartNumber=2,
                        Body=last)["ETag"]
    named_first = {"Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e3}]}
    named_second = {"Parts": [{"PartNumber": 1, "ETag": e2}, {"PartNumber": 2, "ETag": e3}]}
    try:
        done = s3.complete_multipart_upload(Bucket="compat", Key="twice", UploadId=up,
                                            MultipartUpload=named_first)
        check(s3.get_object(Bucket="compat", Key="twice")["Body"].read() == first + last,
              "the first upload's ETag gave other bytes")
        winner = named_first
    except ClientError as e:  # the replaced part is gone: refusing it is right too
        check(e.response["Error"]["Code"] == "InvalidPart", "naming a replaced part: %r" % e)
        done = s3.complete_multipart_upload(Bucket="compat", Key="twice", UploadId=up,
                                            MultipartUpload=named_second)
        check(s3.get_object(Bucket="compat", Key="twice")["Body"].read() == second + last,
              "the part the Complete names")
        winner = named_second
    again = s3.complete_multipart_upload(Bucket="compat", Key="twice", UploadId=up,
                                         MultipartUpload=winner)
    check(again["ETag"] == done["ETag"], "a repeated Complete: %r, want %r" %
          (again["ETag"], done["ETag"]))
    expect_error("NoSuchUpload", 404, s3.complete_multipart_upload, Bucket="compat", Key="twice",
                 UploadId=up, MultipartUpload={"Parts": [{"PartNumber": 2, "ETag": e3}]})
    # GET and HEAD by part number, as the Java and Go SDKs' download managers
    # read an object: each part's bytes, 206, the part count
    body = (first if winner is named_first else second) + last
    for n, (lo, hi) in ((1, (0, 5 * MiB)), (2, (5 * MiB, len(body)))):
        r = s3.get_object(Bucket="compat", Key="twice", PartNumber=n, IfMatch=done["ETag"])
        check(r["ResponseMetadata"]["HTTPStatusCode"] == 206 and r["PartsCount"] == 2 and
              r["ContentRange"] == "bytes %d-%d/%d" % (lo, hi - 1, len(body)) and
              r["Body"].read() == body[lo:hi], "GET part %d: %r" % (n, r["ResponseMetadata"]))
        h = s3.head_object(Bucket="compat", Key="twice", PartNumber=n)
        check(h["PartsCount"] == 2 and h["ContentLength"] == hi - lo, "HEAD part %d" % n)
    expect_error("InvalidPartNumber", 416, s3.get_object, Bucket="compat", Key="twice",
                 PartNumber=3)
    expect_error("InvalidRequest", 400, s3.get_object, Bucket="compat", Key="twice",
                 PartNumber=1, Range="bytes=0-1")
    s3.put_object(Bucket="compat", Key="whole", Body=b"one part")
    r = s3.get_object(Bucket="compat", Key="whole", PartNumber=1)
    check(r["Body"].read() == b"one part" and "PartsCount" not in r, "part 1 of a plain PUT")
    expect_error("InvalidPartNumber", 416, s3.get_object, Bucket="compat", Key="whole",
                 PartNumber=2)
    s3.delete_object(Bucket="compat", Key="whole")
    s3.delete_object(Bucket="compat", Key="twice")
    expect_error("NoSuchUpload", 404, s3.complete_multipart_upload, Bucket="compat", Key="twice",
                 UploadId=up, MultipartUpload=winner)


def grants_of(acl):
    return sorted((g["Grantee"].get("URI") or "owner:" + g["Grantee"]["ID"], g["Permission"])
                  for g in acl["Grants"])


def test_acls(s3):
    owner = s3.list_buckets()["Owner"]["ID"]
    mine = ("owner:" + owner, "FULL_CONTROL")
    # bucket ACLs: x-amz-acl on create, Put/GetBucketAcl, anonymous listing
    s3.create_bucket(Bucket="pub", ACL="public-read")
    acl = s3.get_bucket_acl(Bucket="pub")
    check(acl["Owner"]["ID"] == owner and grants_of(acl) == sorted([mine, (ALL_USERS, "READ")]),
          "public-read bucket: %r" % acl["Grants"])
    s3.put_object(Bucket="pub", Key="private-obj", Body=b"hidden")
    s3.put_object(Bucket="pub", Key="open-obj", Body=b"for all", ACL="public-read",
                  ContentType="text/x-open")
    st, _, body = anonymous("GET", "/pub?list-type=2")
    check(st == 200 and b"<Key>open-obj</Key>" in body, "anonymous list: %d %r" % (st, body))
    st, _, body = anonymous("GET", "/pub")
    check(st == 200 and b"<Key>private-obj</Key>" in body, "anonymous V1 list: %d" % st)
    st, _, _ = anonymous("GET", "/pub?versions")
    check(st == 200, "anonymous ListObjectVersions: %d" % st)
    st, _, _ = anonymous("HEAD", "/pub")
    check(st == 200, "anonymous HEAD bucket: %d" % st)
    # object ACLs: anonymous GET/HEAD only where the object's ACL allows
    st, h, body = anonymous("GET", "/pub/open-obj")
    check(st == 200 and body == b"for all" and h.get("content-type") == "text/x-open",
          "anonymous GET of a public-read object: %d" % st)
    st, h, _ = anonymous("HEAD", "/pub/open-obj")
    check(st == 200 and h.get("content-length") == "7", "anonymous HEAD: %d" % st)
    st, _, body = anonymous("GET", "/pub/private-obj")
    check(st == 403 and code_of(body) == "AccessDenied", "anonymous GET of a private object")
    st, _, _ = anonymous("GET", "/pub/nothing-here")
    check(st == 404, "a missing key of a bucket anyone may list: %d" % st)
    # what a real client sends with no credentials (boto3 UNSIGNED, aws --no-sign-request)
    anon = boto3.client("s3", endpoint_url=srv.endpoint, region_name="us-east-1",
                        config=Config(signature_version=UNSIGNED, retries={"max_attempts": 1},
                                      s3={"addressing_style": "path"}))
    check(sorted(c["Key"] for c in anon.list_objects_v2(Bucket="pub")["Contents"]) ==
          ["open-obj", "private-obj"], "unsigned boto3 listing")
    check(anon.get_object(Bucket="pub", Key="open-obj")["Body"].read() == b"for all",
          "unsigned boto3 GET")
    check(anon.head_object(Bucket="pub", Key="open-obj")["ContentLength"] == 7, "unsigned HEAD")
    expect_error("AccessDenied", 403, anon.get_object, Bucket="pub", Key="private-obj")
    expect_error("AccessDenied", 403, anon.put_object, Bucket="pub", Key="w", Body=b"w")
    st, _, body = anonymous("GET", "/pub/open-obj?response-content-type=text/evil")
    check(st == 400 and code_of(body) == "InvalidRequest", "anonymous overrides: %d" % st)
    acl = s3.get_object_acl(Bucket="pub", Key="open-obj")
    check(grants_of(acl) == sorted([mine, (ALL_USERS, "READ")]), "GetObjectAcl %r" % acl)
    check(grants_of(s3.get_object_acl(Bucket="pub", Key="private-obj")) == [mine], "private")
    # PutObjectAcl both ways, canned and as a policy document
    s3.put_object_acl(Bucket="pub", Key="open-obj", ACL="private")
    check(anonymous("GET", "/pub/open-obj")[0] == 403, "made private")
    s3.put_object_acl(Bucket="pub", Key="private-obj", AccessControlPolicy={
        "Owner": {"ID": owner},
        "Grants": [{"Grantee": {"Type": "CanonicalUser", "ID": owner},
                    "Permission": "FULL_CONTROL"},
                   {"Grantee": {"Type": "Group", "URI": ALL_USERS}, "Permission": "READ"}]})
    st, _, body = anonymous("GET", "/pub/private-obj")
    check(st == 200 and body == b"hidden", "made public by a policy document: %d" % st)
    # an overwrite brings its own ACL (private), and so does a copy
    s3.put_object(Bucket="pub", Key="private-obj", Body=b"new")
    check(anonymous("GET", "/pub/private-obj")[0] == 403, "an overwrite is private again")
    s3.put_object_acl(Bucket="pub", Key="open-obj", ACL="public-read")
    s3.copy_object(Bucket="pub", Key="copy", CopySource="pub/open-obj")
    check(anonymous("GET", "/pub/copy")[0] == 403, "a copy does not inherit the ACL")
    s3.copy_object(Bucket="pub", Key="copy", CopySource="pub/open-obj", ACL="public-read",
                   MetadataDirective="REPLACE")
    check(anonymous("GET", "/pub/copy")[0] == 200, "a copy with x-amz-acl")
    # multipart: the ACL of CreateMultipartUpload
    up = s3.create_multipart_upload(Bucket="pub", Key="mp", ACL="public-read")["UploadId"]
    p = s3.upload_part(Bucket="pub", Key="mp", UploadId=up, PartNumber=1, Body=b"mp body")
    s3.complete_multipart_upload(Bucket="pub", Key="mp", UploadId=up, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": p["ETag"]}]})
    st, _, body = anonymous("GET", "/pub/mp")
    check(st == 200 and body == b"mp body", "public-read multipart object: %d" % st)
    # writes stay the owner's, whatever the ACL says
    s3.put_bucket_acl(Bucket="pub", ACL="public-read-write")
    acl = s3.get_bucket_acl(Bucket="pub")
    check(grants_of(acl) == sorted([mine, (ALL_USERS, "READ"), (ALL_USERS, "WRITE")]),
          "public-read-write: %r" % acl["Grants"])
    for method, path in (("PUT", "/pub/anon"), ("DELETE", "/pub/open-obj"), ("POST", "/pub?delete"),
                         ("PUT", "/pub?acl"), ("GET", "/pub?acl"), ("GET", "/pub/open-obj?acl"),
                         ("POST", "/pub/x?uploads"), ("GET", "/"), ("DELETE", "/pub")):
        st, _, body = anonymous(method, path)
        check(st == 403 and code_of(body) == "AccessDenied",
              "anonymous %s %s: %d %r" % (method, path, st, body[:200]))
    check(s3.get_object(Bucket="pub", Key="open-obj")["Body"].read() == b"for all",
          "anonymous requests changed nothing")
    # authenticated-read: signed users only, so nothing for anonymous ones
    s3.put_bucket_acl(Bucket="pub", ACL="authenticated-read")
    check(grants_of(s3.get_bucket_acl(Bucket="pub")) == sorted([mine, (AUTH_USERS, "READ")]),
          "authenticated-read")
    check(anonymous("GET", "/pub?list-type=2")[0] == 403, "authenticated-read: no anonymous list")
    s3.put_bucket_acl(Bucket="pub", ACL="private")
    check(grants_of(s3.get_bucket_acl(Bucket="pub")) == [mine], "private bucket")
    check(anonymous("GET", "/pub")[0] == 403, "private: no anonymous list")
    check(anonymous("GET", "/pub/nothing-here")[0] == 403, "private: a missing key is a 403")
    # as a policy document
    s3.put_bucket_acl(Bucket="pub", AccessControlPolicy={
        "Owner": {"ID": owner},
        "Grants": [{"Grantee": {"Type": "Group", "URI": ALL_USERS}, "Permission": "READ"},
                   {"Grantee": {"Type": "CanonicalUser", "ID": owner},
                    "Permission": "FULL_CONTROL"}]})
    check(anonymous("GET", "/pub")[0] == 200, "public-read by a policy document")
    # what is refused: other grantees, x-amz-grant-*, unknown canned ACLs, both forms at once
    expect_error("NotImplemented", 501, s3.put_bucket_acl, Bucket="pub", AccessControlPolicy={
        "Owner": {"ID": owner},
        "Grants": [{"Grantee": {"Type": "CanonicalUser", "ID": "someone-else"},
                    "Permission": "READ"}]})
    expect_error("NotImplemented", 501, s3.put_bucket_acl, Bucket="pub",
                 GrantRead='uri="%s"' % ALL_USERS)
    expect_error("InvalidArgument", 400, s3.put_object, Bucket="pub", Key="x", Body=b"x",
                 ACL="world-readable")
    st, _, body = request("PUT", "/pub?acl", body=b"<AccessControlPolicy/>",
                          headers={"x-amz-acl": "private"})
    check(st == 400, "x-amz-acl and a body: %d %r" % (st, body))
    st, _, body = request("PUT", "/pub?acl", body=b"<!DOCTYPE x><AccessControlPolicy/>")
    check(st == 400 and code_of(body) == "MalformedXML", "a DOCTYPE in an ACL: %d" % st)
    expect_error("NoSuchKey", 404, s3.put_object_acl, Bucket="pub", Key="nope", ACL="private")
    expect_error("NoSuchBucket", 404, s3.get_bucket_acl, Bucket="nope")
    for k in ("private-obj", "open-obj", "copy", "mp"):
        s3.delete_object(Bucket="pub", Key=k)
    s3.delete_bucket(Bucket="pub")


def test_presign_expiry(s3):
    """X-Amz-Expires of 0 or beyond a week (604800 s) is refused with 403."""
    import urllib.error
    import urllib.request
    s3.put_object(Bucket="compat", Key="p", Body=b"presigned")
    for expires, want in ((604800, 200), (0, 403), (604801, 403)):
        url = s3.generate_presigned_url("get_object", Params={"Bucket": "compat", "Key": "p"},
                                        ExpiresIn=expires or 1)
        if not expires:  # botocore will not sign it: the URL's own field says 0
            url = url.replace("X-Amz-Expires=1&", "X-Amz-Expires=0&")
            check("X-Amz-Expires=0&" in url, "no X-Amz-Expires to edit: %s" % url)
        try:
            with urllib.request.urlopen(url, timeout=30) as r:
                st, body = r.status, r.read()
        except urllib.error.HTTPError as e:
            st, body = e.code, e.read()
        check(st == want and (want != 200 or body == b"presigned") and
              (want == 200 or code_of(body) == "AccessDenied"),
              "X-Amz-Expires=%d: %d %r" % (expires, st, body[:200]))
    s3.delete_object(Bucket="compat", Key="p")


def test_conditions(s3):
    etag = s3.put_object(Bucket="compat", Key="c", Body=b"conditional")["ETag"]
    lm = s3.head_object(Bucket="compat", Key="c")["LastModified"]
    past, future = lm - datetime.timedelta(seconds=30), lm + datetime.timedelta(seconds=30)
    cases = [  # GET and HEAD conditions, what S3 answers
        ({"IfMatch": etag}, 200), ({"IfMatch": '"0123"'}, 412), ({"IfMatch": "*"}, 200),
        ({"IfMatch": 'W/"0123", %s' % etag}, 200),
        ({"IfNoneMatch": etag}, 304), ({"IfNoneMatch": '"0123"'}, 200),
        ({"IfModifiedSince": lm}, 304), ({"IfModifiedSince": past}, 200),
        ({"IfUnmodifiedSince": past}, 412), ({"IfUnmodifiedSince": future}, 200),
        # the pairs S3 documents: If-Match holding beats If-Unmodified-Since,
        # a matching If-None-Match is 304 whatever If-Modified-Since says
        ({"IfMatch": etag, "IfUnmodifiedSince": past}, 200),
        ({"IfNoneMatch": etag, "IfModifiedSince": past}, 304)]
    for kw, want in cases:
        for fn in (s3.get_object, s3.head_object):
            try:
                r = fn(Bucket="compat", Key="c", **kw)
                got = r["ResponseMetadata"]["HTTPStatusCode"]
                check(fn == s3.head_object or r["Body"].read() == b"conditional",
                      "a conditional GET's body")
            except ClientError as e:
                got = e.response["ResponseMetadata"]["HTTPStatusCode"]
                check(got != 412 or fn == s3.head_object or
                      e.response["Error"]["Code"] == "PreconditionFailed", "412's code")
            check(got == want, "%s %s: %s, want %s" % (fn.__name__, kw, got, want))
    # 304 carries the validators and no body
    st, hdrs, body = request("GET", "/compat/c", headers={"If-None-Match": etag})
    check(st == 304 and hdrs.get("etag") == etag and "last-modified" in hdrs and body == b"",
          "304: %s %s %r" % (st, hdrs, body))
    # a copy's source: any condition that does not hold is 412
    for kw, ok in (({"CopySourceIfMatch": etag}, True), ({"CopySourceIfMatch": '"0"'}, False),
                   ({"CopySourceIfNoneMatch": etag}, False),
                   ({"CopySourceIfModifiedSince": lm}, False),
                   ({"CopySourceIfUnmodifiedSince": past}, False)):
        try:
            s3.copy_object(Bucket="compat", Key="c2", CopySource="compat/c", **kw)
            check(ok, "copy with %s answered 200" % kw)
        except ClientError as e:
            check(not ok and e.response["Error"]["Code"] == "PreconditionFailed",
                  "copy with %s: %r" % (kw, e.response["Error"]))
    # the conditional writes not kept are refused, so no client believes it holds one
    for method, path, hdrs in (("PUT", "/compat/c", {"If-None-Match": etag}),
                               ("PUT", "/compat/c", {"If-Match": etag, "If-None-Match": "*"}),
                               ("DELETE", "/compat/c", {"If-None-Match": "*"})):
        st, _, body = request(method, path, body=b"overwritten" if method == "PUT" else b"",
                              headers=hdrs)
        check(st == 501 and code_of(body) == "NotImplemented",
              "%s %s %s: %s %r" % (method, path, hdrs, st, body[:200]))
    check(s3.get_object(Bucket="compat", Key="c")["Body"].read() == b"conditional",
          "a refused conditional write changed the object")
    # what a write asks to be kept that inec does not keep: refused, not ignored
    future = "2099-01-01T00:00:00Z"
    for fn, kw in ((s3.put_object, {"ServerSideEncryption": "AES256"}),
                   (s3.put_object, {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": "k"}),
                   (s3.put_object, {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": "k" * 32}),
                   (s3.put_object, {"ObjectLockMode": "COMPLIANCE",
                                    "ObjectLockRetainUntilDate": future}),
                   (s3.put_object, {"ObjectLockLegalHoldStatus": "ON"}),
                   (s3.put_object, {"Tagging": "a=b"}),
                   (s3.create_multipart_upload, {"ServerSideEncryption": "AES256"}),
                   (s3.copy_object, {"CopySource": "compat/c", "ServerSideEncryption": "AES256"})):
        extra = {"Body": b"overwritten"} if fn == s3.put_object else {}
        try:
            fn(Bucket="compat", Key="c", **extra, **kw)
            check(False, "%s with %s answered 200" % (fn.__name__, kw))
        except ClientError as e:
            check(e.response["Error"]["Code"] == "NotImplemented" and
                  e.response["ResponseMetadata"]["HTTPStatusCode"] == 501,
                  "%s with %s: %r" % (fn.__name__, kw, e.response["Error"]))
    check(s3.get_object(Bucket="compat", Key="c")["Body"].read() == b"conditional",
          "a refused write changed the object")
    check("Uploads" not in s3.list_multipart_uploads(Bucket="compat"),
          "a refused CreateMultipartUpload left an upload")
    for k in ("c", "c2"):
        s3.delete_object(Bucket="compat", Key=k)


def test_conditional_writes(s3):
    """PutObject with If-None-Match: * (Terraform's lock file, table-format
    commits): stored where the key holds no object, 412 over one (the object
    unchanged), again over a deleted key; among 8 creators racing on a fresh
    key exactly one gets 200, the others 412 or 409, and the key holds its
    body. CopyObject and CompleteMultipartUpload the same. If-Match on PutObject
    and CopyObject: stored over the object of that ETag, 412 over another, 404
    where none is; 8 writers racing with one ETag: at most one 200."""
    import concurrent.futures
    hdrs = {"If-None-Match": "*"}
    st, h, _ = request("PUT", "/compat/once", body=b"first", headers=hdrs)
    check(st == 200 and h.get("etag"), "a create-only PUT of a new key: %d" % st)
    st, _, body = request("PUT", "/compat/once", body=b"second", headers=hdrs)
    check(st == 412 and code_of(body) == "PreconditionFailed",
          "a create-only PUT over an object: %d %r" % (st, body[:200]))
    check(s3.get_object(Bucket="compat", Key="once")["Body"].read() == b"first",
          "a refused create-only PUT changed the object")
    s3.delete_object(Bucket="compat", Key="once")
    st, _, _ = request("PUT", "/compat/once", body=b"third", headers=hdrs)
    check(st == 200, "a create-only PUT over a deleted key: %d" % st)
    # CopyObject the same: over an object 412, else a copy
    copy = dict(hdrs, **{"x-amz-copy-source": "/compat/once"})
    s3.put_object(Bucket="compat", Key="there", Body=b"there")
    st, _, body = request("PUT", "/compat/there", headers=copy)
    check(st == 412 and code_of(body) == "PreconditionFailed",
          "a create-only copy over an object: %d %r" % (st, body[:200]))
    st, _, _ = request("PUT", "/compat/copied", headers=copy)
    check(st == 200 and s3.get_object(Bucket="compat", Key="copied")["Body"].read() == b"third",
          "a create-only copy to a new key: %d" % st)
    check(s3.get_object(Bucket="compat", Key="there")["Body"].read() == b"there",
          "a refused create-only copy changed the object")
    # CompleteMultipartUpload the same; a refused upload stays open
    mp = client()
    mp.meta.events.register("before-sign.s3.CompleteMultipartUpload",
                            lambda request, **kw: request.headers.__setitem__("If-None-Match", "*"))
    for key, want in (("there", "PreconditionFailed"), ("mp-new", None)):
        uid = s3.create_multipart_upload(Bucket="compat", Key=key)["UploadId"]
        etag = s3.upload_part(Bucket="compat", Key=key, UploadId=uid, PartNumber=1,
                              Body=b"part")["ETag"]
        done = {"Parts": [{"PartNumber": 1, "ETag": etag}]}
        try:
            mp.complete_multipart_upload(Bucket="compat", Key=key, UploadId=uid,
                                         MultipartUpload=done)
            check(want is None, "a create-only Complete over an object answered 200")
        except ClientError as e:
            check(e.response["Error"]["Code"] == want,
                  "a create-only Complete of %s: %r" % (key, e.response["Error"]))
            s3.abort_multipart_upload(Bucket="compat", Key=key, UploadId=uid)
    check(s3.get_object(Bucket="compat", Key="there")["Body"].read() == b"there",
          "a refused create-only Complete changed the object")
    check(s3.get_object(Bucket="compat", Key="mp-new")["Body"].read() == b"part",
          "a create-only Complete of a new key")
    # If-Match: a compare-and-swap on the ETag
    cur = s3.put_object(Bucket="compat", Key="cas", Body=b"v1")["ETag"]
    st, _, body = request("PUT", "/compat/cas", body=b"v2", headers={"If-Match": '"0123"'})
    check(st == 412 and code_of(body) == "PreconditionFailed", "If-Match, another ETag: %d" % st)
    st, h, _ = request("PUT", "/compat/cas", body=b"v2", headers={"If-Match": cur})
    check(st == 200 and s3.get_object(Bucket="compat", Key="cas")["Body"].read() == b"v2",
          "If-Match, its ETag: %d" % st)
    st, _, _ = request("PUT", "/compat/cas", body=b"v3", headers={"If-Match": cur})
    check(st == 412, "If-Match, the replaced ETag: %d" % st)
    st, _, body = request("PUT", "/compat/no-such", body=b"v", headers={"If-Match": cur})
    check(st == 404 and code_of(body) == "NoSuchKey", "If-Match, no object: %d %r" % (st, body))
    for method in ("PUT", "DELETE"):  # no ETag is that long: a clear error, nothing changed
        st, _, body = request(method, "/compat/cas", headers={"If-Match": '"%s"' % ("e" * 60)})
        check(st == 400 and code_of(body) == "InvalidArgument",
              "%s with an If-Match no ETag can be: %d %r" % (method, st, body[:200]))
    check(s3.get_object(Bucket="compat", Key="cas")["Body"].read() == b"v2",
          "a refused If-Match changed the object")
    st, _, _ = request("PUT", "/compat/cas", headers={"If-Match": h["etag"],
                                                       "x-amz-copy-source": "/compat/there"})
    check(st == 200 and s3.get_object(Bucket="compat", Key="cas")["Body"].read() == b"there",
          "a copy with If-Match, its ETag: %d" % st)
    # 8 writers with one If-Match, 2 readers beside them (a small object: its
    # shards are in its records, and the votes copy them)
    for rnd in range(5):
        cur = s3.head_object(Bucket="compat", Key="cas")["ETag"]
        bodies = [b"w%d-%d" % (rnd, i) for i in range(8)]
        with concurrent.futures.ThreadPoolExecutor(10) as ex:
            puts = [ex.submit(request, "PUT", "/compat/cas", b, {"If-Match": cur})
                    for b in bodies]
            gets = [ex.submit(request, "GET", "/compat/cas") for _ in range(2)]
            got = [f.result()[0] for f in puts]
            read = [f.result()[0] for f in gets]
        won = [i for i, st in enumerate(got) if st == 200]
        check(len(won) <= 1 and all(st in (200, 409, 412) for st in got),
              "round %d, 8 writers with one If-Match: %r" % (rnd, got))
        check(read == [200, 200], "round %d, reads beside them: %r" % (rnd, read))
        if won:
            body = s3.get_object(Bucket="compat", Key="cas")["Body"].read()
            check(body == bodies[won[0]], "round %d: the key holds %r" % (rnd, body))
    # DeleteObject with If-Match
    cur = s3.head_object(Bucket="compat", Key="there")["ETag"]
    st, _, body = request("DELETE", "/compat/there", headers={"If-Match": '"0123"'})
    check(st == 412 and code_of(body) == "PreconditionFailed", "DELETE, another ETag: %d" % st)
    st, _, _ = request("DELETE", "/compat/there", headers={"If-Match": cur})
    check(st == 204 and request("HEAD", "/compat/there")[0] == 404, "DELETE, its ETag: %d" % st)
    st, _, body = request("DELETE", "/compat/there", headers={"If-Match": cur})
    check(st == 404 and code_of(body) == "NoSuchKey", "DELETE If-Match, no object: %d" % st)
    for k in ("copied", "mp-new", "cas"):
        s3.delete_object(Bucket="compat", Key=k)
    for rnd in range(5):
        key = "/compat/race%d" % rnd
        bodies = [b"creator %d of round %d" % (i, rnd) for i in range(8)]
        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            got = list(ex.map(lambda b: request("PUT", key, body=b, headers=hdrs), bodies))
        won = [i for i, (st, _, _) in enumerate(got) if st == 200]
        others = sorted(set((st, code_of(body)) for st, _, body in got if st != 200))
        check(len(won) <= 1, "round %d: %d creators got 200" % (rnd, len(won)))
        check(set(others) <= {(412, "PreconditionFailed"), (409, "ConditionalRequestConflict")},
              "round %d: the losers' answers %r" % (rnd, others))
        if won:
            body = s3.get_object(Bucket="compat", Key=key[8:])["Body"].read()
            check(body == bodies[won[0]], "round %d: the key holds %r" % (rnd, body))
        s3.delete_object(Bucket="compat", Key=key[8:])
    s3.delete_object(Bucket="compat", Key="once")


def test_not_implemented(s3):
    for fn, kw in ((s3.put_bucket_versioning, {"VersioningConfiguration": {"Status": "Enabled"}}),
                   (s3.get_bucket_policy, {}),
                   (s3.put_bucket_tagging, {"Tagging": {"TagSet": []}})):
        try:
            fn(Bucket="compat", **kw)
            check(False, "%s answered 200" % fn.__name__)
        except ClientError as e:
            err = e.response["Error"]
            check(err["Code"] == "NotImplemented" and
                  e.response["ResponseMetadata"]["HTTPStatusCode"] == 501 and err.get("Message"),
                  "%s: %r" % (fn.__name__, e.response))


def main():
    global srv
    mode = sys.argv[2] if len(sys.argv) > 2 else "server"
    srv = start(sys.argv[1], mode)
    s3 = client()
    test_bucket_recreate(s3)
    test_stored_headers(s3)
    test_empty_metadata(s3)
    test_listing(s3)
    test_versions(s3)
    test_part_twice(s3)
    test_acls(s3)
    test_presign_expiry(s3)
    test_conditions(s3)
    test_conditional_writes(s3)
    test_not_implemented(s3)
    s3.delete_bucket(Bucket="compat")
    if mode == "server":
        test_bucket_recreate_other_region()
    check(srv.alive(), "the gateway died")
    srv.stop()
    print("s3_compat_boto3 (%s): all checks passed" % mode)


if __name__ == "__main__":
    main()
