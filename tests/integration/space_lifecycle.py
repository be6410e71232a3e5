#!/usr/bin/env python3
"""Abandoned multipart uploads expire (9 node processes, `inec gateway`, the
scanner every second, multipart_expire_ms 4000, a lifecycle "day" of 2000 ms),
through boto3:

 1. Put/Get/DeleteBucketLifecycle round trip; rules inec cannot honour
    (Expiration, Transition, tag filters) are 501 NotImplemented and change
    nothing; no configuration is NoSuchLifecycleConfiguration;
 2. an upload with a part in a bucket without rules is aborted after the
    default age (ListMultipartUploads no longer shows it, ListParts is
    NoSuchUpload, its part's chunks are freed), a young one is not;
 3. in a bucket whose AbortIncompleteMultipartUpload rules say 1 day (2 s)
    for tmp/ and 30 days (60 s) for keep/, tmp/ uploads go after about 2 s
    and keep/ ones outlive the default age: the rule applies, not the default;
 4. Completes whose gateway died once they were decided (INEC_CRASH_AT), and
    that the client never sends again, are finished at the upload's age: the
    object appears byte-exact with its multipart ETag (died before the
    object record, or after it), or, where the key was PUT since, the PUT
    stays and the parts' bytes are freed; none of them is listed any more.
argv[1]: the inec binary."""
import hashlib
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inec_server import InecCluster  # noqa: E402

try:
    from botocore.exceptions import ClientError, ConnectionClosedError
    from botocore.exceptions import EndpointConnectionError, ReadTimeoutError
except ImportError:
    sys.exit("boto3 is missing: run scripts/deps.sh (python3-boto3)")

srv = InecCluster(sys.argv[1], gateway={"repair": {"scan_interval_ms": 1000},
                                        "multipart_expire_ms": 4000, "lifecycle_day_ms": 2000,
                                        "max_get_ms": 500, "gc_delay_ms": 1000})


def fail(msg):
    srv.fail(msg)


s3 = srv.s3()


def live_bytes():
    return sum(n.get("live_bytes", 0) for n in srv.admin_get("/admin/v1/cluster")["nodes"])


def error_of(fn, **kw):
    try:
        fn(**kw)
    except ClientError as e:
        return e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"]
    return None


def uploads(bucket):
    return {u["Key"]: u["UploadId"] for u in
            s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])}


def start(bucket, key, part=True):
    uid = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    if part:
        s3.upload_part(Bucket=bucket, Key=key, UploadId=uid, PartNumber=1,
                       Body=os.urandom(300000))
    return uid


def wait_gone(bucket, key, limit):
    t0 = time.monotonic()
    while key in uploads(bucket):
        if time.monotonic() - t0 > limit:
            fail("upload %s/%s still there after %d s" % (bucket, key, limit))
        time.sleep(0.3)
    return time.monotonic() - t0


# 1. The configuration API.
s3.create_bucket(Bucket="plain")
s3.create_bucket(Bucket="ruled")
if error_of(s3.get_bucket_lifecycle_configuration, Bucket="ruled") != \
        ("NoSuchLifecycleConfiguration", 404):
    fail("GetBucketLifecycleConfiguration without one: %s"
         % (error_of(s3.get_bucket_lifecycle_configuration, Bucket="ruled"),))
rules = [{"ID": "tmp", "Filter": {"Prefix": "tmp/"}, "Status": "Enabled",
          "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}},
         {"ID": "keep", "Filter": {"Prefix": "keep/"}, "Status": "Enabled",
          "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 30}},
         {"ID": "off", "Filter": {"Prefix": "off/"}, "Status": "Disabled",
          "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}}]
s3.put_bucket_lifecycle_configuration(Bucket="ruled", LifecycleConfiguration={"Rules": rules})
got = s3.get_bucket_lifecycle_configuration(Bucket="ruled")["Rules"]
if [(r["ID"], r["Filter"]["Prefix"], r["Status"],
     r["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"]) for r in got] != \
        [("tmp", "tmp/", "Enabled", 1), ("keep", "keep/", "Enabled", 30),
         ("off", "off/", "Disabled", 1)]:
    fail("lifecycle rules read back as %s" % got)
for bad in ({"ID": "x", "Filter": {"Prefix": ""}, "Status": "Enabled",
             "Expiration": {"Days": 3}},
            {"ID": "x", "Filter": {"Prefix": ""}, "Status": "Enabled",
             "Transitions": [{"Days": 3, "StorageClass": "GLACIER"}]},
            {"ID": "x", "Filter": {"Tag": {"Key": "a", "Value": "b"}}, "Status": "Enabled",
             "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}}):
    e = error_of(s3.put_bucket_lifecycle_configuration, Bucket="plain",
                 LifecycleConfiguration={"Rules": [bad]})
    if e != ("NotImplemented", 501):
        fail("a rule inec cannot honour (%s) answered %s, not 501 NotImplemented" % (bad, e))
if error_of(s3.get_bucket_lifecycle_configuration, Bucket="plain") != \
        ("NoSuchLifecycleConfiguration", 404):
    fail("a refused configuration was kept")
e = error_of(s3.put_bucket_lifecycle_configuration, Bucket="plain", LifecycleConfiguration={
    "Rules": [{"ID": "x", "Filter": {"Prefix": ""}, "Status": "Enabled",
               "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 0}}]})
if e != ("InvalidArgument", 400):
    fail("DaysAfterInitiation 0 answered %s" % (e,))
s3.put_bucket_lifecycle_configuration(Bucket="plain", LifecycleConfiguration={"Rules": rules[:1]})
s3.delete_bucket_lifecycle(Bucket="plain")
if error_of(s3.get_bucket_lifecycle_configuration, Bucket="plain") != \
        ("NoSuchLifecycleConfiguration", 404):
    fail("DeleteBucketLifecycle left a configuration")
if error_of(s3.get_bucket_lifecycle_configuration, Bucket="nosuchbucket") != \
        ("NoSuchBucket", 404):
    fail("lifecycle of a missing bucket is not NoSuchBucket")

# 2. The default age (4 s) where no rule applies.
base = live_bytes()
created = time.monotonic()  # before: a slow start() must not make the expiry look early
old = start("plain", "abandoned")
with_part = live_bytes()
if with_part <= base:
    fail("the part holds no bytes on the nodes")
wait_gone("plain", "abandoned", 40)
took = time.monotonic() - created
if took < 2:
    fail("the upload went after %.1f s, before its 4 s" % took)
young, born = start("plain", "young", part=False), time.monotonic()
# 1.5 s old, checked first: the wait for the part's bytes below may take
# seconds under load, and the young upload expires at 4 s.
time.sleep(max(0.0, 1.5 - (time.monotonic() - born)))
if "young" not in uploads("plain"):
    fail("an upload of 1.5 s expired (the default age is 4 s)")
if error_of(s3.list_parts, Bucket="plain", Key="abandoned", UploadId=old) != \
        ("NoSuchUpload", 404):
    fail("ListParts of an expired upload is not NoSuchUpload")
deadline = time.monotonic() + 30
while live_bytes() > base + (with_part - base) // 10:
    if time.monotonic() > deadline:
        fail("the expired upload's part was not freed: live %d, before it %d"
             % (live_bytes(), base))
    time.sleep(0.5)
print("default expiry: gone %.1f s after it was created, part freed" % took)

# 3. The bucket's rules win over the default.
start("ruled", "keep/a", part=False)
start("ruled", "off/b", part=False)
t0 = time.monotonic()
start("ruled", "tmp/c", part=False)
wait_gone("ruled", "tmp/c", 40)
while time.monotonic() - t0 < 8:  # twice the default age
    time.sleep(0.5)
left = uploads("ruled")
if "keep/a" not in left:
    fail("keep/a expired: its rule says 30 days (60 s), not the default 4 s")
if "off/b" in left:
    fail("off/b outlived the default age: a disabled rule must not apply")
s3.abort_multipart_upload(Bucket="ruled", Key="keep/a", UploadId=left["keep/a"])

# 4. Decided Completes nobody finished, ended at the bucket's age (8 "days",
# 16 s: time for the gateway to die in them and start again).
s3.create_bucket(Bucket="done")
s3.put_bucket_lifecycle_configuration(Bucket="done", LifecycleConfiguration={"Rules": [
    {"ID": "all", "Filter": {"Prefix": ""}, "Status": "Enabled",
     "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 8}}]})
PART = 5 << 20


def upload(key, bodies):
    uid = s3.create_multipart_upload(Bucket="done", Key=key)["UploadId"]
    done = [{"PartNumber": n, "ETag": s3.upload_part(Bucket="done", Key=key, UploadId=uid,
                                                     PartNumber=n, Body=b)["ETag"]}
            for n, b in enumerate(bodies, 1)]
    return uid, done


def crashed_complete(key, uid, done, point):
    """Complete on a gateway that dies at `point` in it; the gateway is back after."""
    def complete():
        try:
            srv.s3().complete_multipart_upload(Bucket="done", Key=key, UploadId=uid,
                                               MultipartUpload={"Parts": done})
        except (ClientError, EndpointConnectionError, ConnectionClosedError, ReadTimeoutError):
            return
        fail("%s: Complete answered although the gateway was to die at %s" % (key, point))
    srv.dies_at(point, complete)


# a: died before the object record, part 3 not chosen; b: died after it;
# c: died before it, then the key was PUT.
a_parts = [os.urandom(PART), os.urandom(1000), os.urandom(3000)]
b_parts = [os.urandom(PART), os.urandom(2000)]
a_uid, a_done = upload("a", a_parts)
b_uid, b_done = upload("b", b_parts)
before_c = live_bytes()
c_uid, c_done = upload("c", [os.urandom(PART), os.urandom(PART)])
c_bytes = live_bytes() - before_c
crashed_complete("a", a_uid, a_done[:2], "mpu-decided")
crashed_complete("b", b_uid, b_done, "mpu-committed")
crashed_complete("c", c_uid, c_done, "mpu-decided")
s3 = srv.s3()
s3.put_object(Bucket="done", Key="c", Body=b"put after the Complete")
with_c = live_bytes()
if set(uploads("done")) != {"a", "b", "c"}:
    fail("decided Completes not listed as uploads in progress: %s" % uploads("done"))
t0 = time.monotonic()
for key in ("a", "b", "c"):
    wait_gone("done", key, 60)
print("decided Completes ended %.1f s after the last crash" % (time.monotonic() - t0))
for key, bodies in (("a", a_parts[:2]), ("b", b_parts)):
    want = hashlib.md5(b"".join(hashlib.md5(p).digest() for p in bodies)).hexdigest() + "-2"
    got = s3.get_object(Bucket="done", Key=key)
    if got["Body"].read() != b"".join(bodies):
        fail("%s: the finished Complete's object is not byte-exact" % key)
    if got["ETag"].strip('"') != want:
        fail("%s: ETag %s, want %s" % (key, got["ETag"], want))
if s3.get_object(Bucket="done", Key="c")["Body"].read() != b"put after the Complete":
    fail("c: the PUT after the decided Complete was replaced")
deadline = time.monotonic() + 30
while live_bytes() > with_c - c_bytes * 9 // 10:
    if time.monotonic() > deadline:
        fail("c's parts were not freed: live %d, with them %d, they hold %d"
             % (live_bytes(), with_c, c_bytes))
    time.sleep(0.5)
for key, uid, done in (("a", a_uid, a_done[:2]), ("b", b_uid, b_done)):
    r = s3.complete_multipart_upload(Bucket="done", Key=key, UploadId=uid,
                                     MultipartUpload={"Parts": done})  # sent again: the same 200
    if s3.head_object(Bucket="done", Key=key)["ETag"] != r["ETag"]:
        fail("%s: Complete sent again answered ETag %s" % (key, r["ETag"]))
print("decided Completes: a and b finished, c yielded to the PUT and its parts freed")
srv.stop()
print("OK")
