#!/usr/bin/env python3
"""Multipart Complete under crashes and races, on a 9-process tcp cluster
(garbage of replaced versions collected 300 ms after a commit, so a chunk
freed by mistake is gone well before the final reads):

 1. CompleteMultipartUpload with the gateway dying in it (INEC_CRASH_AT: once
    the upload's vote is decided, once the object record is written) or
    SIGKILLed right after it answered, then sent again to the restarted
    gateway: 200, the same ETag, the object byte-exact (a Complete replacing
    the record of an earlier one used to free its own parts);
 2. Abort racing Complete of the same upload, 200 times: never both
    succeed, never a 503; every upload whose Complete answered 200 reads back
    byte-exact at the end, the others are gone;
 3. a part uploaded again while Complete runs: a Complete that answers 200
    leaves the object with the part it named.
argv[1]: the inec binary."""
import concurrent.futures
import hashlib
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inec_server import InecCluster  # noqa: E402

try:
    import boto3
    from botocore.config import Config
    from botocore.exceptions import ClientError, EndpointConnectionError
    from botocore.exceptions import ConnectionClosedError, ReadTimeoutError
except ImportError:
    sys.exit("boto3 is missing: run scripts/deps.sh (python3-boto3)")

RACES = 200
srv = InecCluster(sys.argv[1], env={"INEC_CHUNK": "65536"}, gateway={"gc_delay_ms": 300})
PART = 5 << 20  # the smallest part that may be followed by another


def fail(msg):
    srv.fail(msg)


def client():
    return boto3.client(
        "s3", endpoint_url=srv.endpoint, region_name="us-east-1",
        aws_access_key_id=srv.access_key, aws_secret_access_key=srv.secret_key,
        config=Config(signature_version="s3v4", retries={"max_attempts": 1},
                      s3={"addressing_style": "path"}, max_pool_connections=16))


def code(e):
    return e.response["Error"]["Code"]


def read(s3, key):
    return s3.get_object(Bucket="mpu", Key=key)["Body"].read()


s3 = client()
s3.create_bucket(Bucket="mpu")


def upload(key, parts):
    """An upload with these part bodies; its id and the Complete part list."""
    uid = s3.create_multipart_upload(Bucket="mpu", Key=key)["UploadId"]
    done = []
    for n, body in enumerate(parts, 1):
        etag = s3.upload_part(Bucket="mpu", Key=key, UploadId=uid, PartNumber=n,
                              Body=body)["ETag"]
        done.append({"PartNumber": n, "ETag": etag})
    return uid, done


def complete(c, key, uid, done):
    return c.complete_multipart_upload(Bucket="mpu", Key=key, UploadId=uid,
                                       MultipartUpload={"Parts": done})


def together(calls):
    """Runs calls (name -> function returning an answer) at once; their answers
    by name, a ClientError as its code."""
    go = threading.Barrier(len(calls))
    res = {}

    def run(name, fn):
        go.wait()
        try:
            res[name] = fn()
        except ClientError as e:
            res[name] = code(e)

    ts = [threading.Thread(target=run, args=kv) for kv in calls.items()]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return res


# 1. Complete, the gateway killed, Complete again. The gateway dies where
# INEC_CRASH_AT says (object/multipart.c): once the vote is decided, once the
# object record is written (the upload and its parts not ended yet), or is
# SIGKILLed right after it answered.
def crashed_complete(key, uid, done):
    try:
        complete(client(), key, uid, done)
    except (ClientError, EndpointConnectionError, ConnectionClosedError, ReadTimeoutError):
        return  # the gateway died under it
    fail("%s: Complete answered although the gateway was to die in it" % key)


for attempt, point in enumerate(["mpu-decided", "mpu-committed", None]):
    key = "crash-%d" % attempt
    parts = [os.urandom(PART), os.urandom(1000 + attempt)]
    uid, done = upload(key, parts)
    want = hashlib.md5(b"".join(hashlib.md5(p).digest() for p in parts)).hexdigest() + "-2"
    if point:
        srv.dies_at(point, lambda: crashed_complete(key, uid, done))
    else:
        complete(s3, key, uid, done)
        srv.kill_gateway()
        srv.restart_gateway()
    s3 = client()
    try:
        r = complete(s3, key, uid, done)
    except ClientError as e:
        fail("Complete after a crash at %s: %s" % (point, e.response["Error"]))
    if r["ETag"].strip('"') != want:
        fail("Complete after a crash: ETag %s, want %s" % (r["ETag"], want))
    again = complete(s3, key, uid, done)  # and once more: the same answer
    if again["ETag"] != r["ETag"]:
        fail("a second Complete answered ETag %s, the first %s" % (again["ETag"], r["ETag"]))
    time.sleep(1.0)  # well past the garbage delay
    if read(s3, key) != b"".join(parts):
        fail("%s: not byte-exact after Complete was sent again (crash at %s)" % (key, point))
print("Complete survives a gateway crash and is idempotent")

# 2. Abort racing Complete.
small = [os.urandom(700 + i) for i in range(RACES)]
outcomes = {"complete": 0, "abort": 0}


def race(i):
    c = client()
    key = "race-%03d" % i
    uid = c.create_multipart_upload(Bucket="mpu", Key=key)["UploadId"]
    etag = c.upload_part(Bucket="mpu", Key=key, UploadId=uid, PartNumber=1,
                         Body=small[i])["ETag"]
    a = client()
    res = together({
        "complete": lambda: complete(c, key, uid, [{"PartNumber": 1, "ETag": etag}]) and 200,
        "abort": lambda: a.abort_multipart_upload(Bucket="mpu", Key=key, UploadId=uid) and 204})
    return key, res


completed = []
with concurrent.futures.ThreadPoolExecutor(4) as pool:
    for key, res in pool.map(race, range(RACES)):
        ok_c, ok_a = res["complete"] == 200, res["abort"] == 204
        if ok_c and ok_a:
            fail("%s: Complete and Abort both succeeded" % key)
        if res["complete"] not in (200, "NoSuchUpload") or res["abort"] not in (204, "NoSuchUpload"):
            fail("%s: unexpected answers %s" % (key, res))
        if not ok_c and not ok_a:
            fail("%s: neither Complete nor Abort succeeded: %s" % (key, res))
        outcomes["complete" if ok_c else "abort"] += 1
        if ok_c:
            completed.append(key)
time.sleep(1.0)
for key in ["race-%03d" % i for i in range(RACES)]:
    i = int(key[5:])
    if key in completed:
        if read(s3, key) != small[i]:
            fail("%s: Complete answered 200 but the object does not read back" % key)
    else:
        try:
            read(s3, key)
            fail("%s: Abort won, yet the object exists" % key)
        except ClientError as e:
            if code(e) != "NoSuchKey":
                fail("%s: %s" % (key, e.response["Error"]))
print("Abort racing Complete x%d: %s" % (RACES, outcomes))

# 3. A part uploaded again during Complete.
kept = {"200": 0, "InvalidPart": 0}
firsts = {}
for i in range(30):
    key = "reup-%02d" % i
    first, second = os.urandom(800 + i), os.urandom(900 + i)
    uid, done = upload(key, [first])
    c = client()

    def reupload():
        time.sleep(random.random() * 0.02)
        return c.upload_part(Bucket="mpu", Key=key, UploadId=uid, PartNumber=1, Body=second)

    res = together({"c": lambda: complete(s3, key, uid, done) and 200, "up": reupload})
    if res["c"] == 200:
        kept["200"] += 1
        firsts[key] = first
    elif res["c"] == "InvalidPart":  # the second upload replaced the part first
        kept["InvalidPart"] += 1
    else:
        fail("%s: Complete answered %s" % (key, res["c"]))
time.sleep(1.0)  # past the garbage delay of the replaced parts
for key, first in firsts.items():
    if read(s3, key) != first:
        fail("%s: Complete answered 200 for the first part, the object differs" % key)
print("part uploaded again during Complete: %s" % kept)
srv.stop()
print("ok")
