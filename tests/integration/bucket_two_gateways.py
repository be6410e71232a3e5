#!/usr/bin/env python3
"""A bucket deleted through one gateway while another still caches it, on a
9-process tcp cluster with two `inec gateway` processes (A and B) and boto3:

 1. B caches bucket "twogw" (a PUT), A deletes it: B still accepts a PUT
    into it within bucket_cache_ms (documented: its record lands under a
    bucket that no longer exists);
 2. A creates "twogw" again: the object committed through B is not in it
    (ListObjectsV2 empty, HEAD and GET 404), and DeleteBucket finds the new
    bucket empty (without the bucket stamp on records: the object showed up
    in the new bucket and DeleteBucket answered BucketNotEmpty);
 3. the new bucket works: a PUT through A is listed and read back.
argv[1]: the inec binary."""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inec_server import InecCluster  # noqa: E402

try:
    import boto3
    from botocore.config import Config
    from botocore.exceptions import ClientError
except ImportError:
    sys.exit("boto3 is missing: run scripts/deps.sh (python3-boto3)")

# Long enough that B still holds the bucket after A's delete on a slow (ASan) run.
srv = InecCluster(sys.argv[1], gateway={"bucket_cache_ms": 60000})
b_proc = None
b_dir = tempfile.mkdtemp(prefix="inec-gw-b-")


def fail(msg):
    if b_proc:
        b_proc.kill()
    srv.fail(msg)


def check(cond, msg):
    if not cond:
        fail(msg)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def client(endpoint):
    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=srv.access_key,
                        aws_secret_access_key=srv.secret_key, region_name="us-east-1",
                        config=Config(retries={"max_attempts": 1}))


def code(call):
    try:
        call()
    except ClientError as e:
        return e.response["Error"]["Code"]
    return "OK"


def start_b():
    """Gateway B: the same cluster.json, its own data directory holding A's keys."""
    global b_proc
    shutil.copy(os.path.join(srv.config["gateway"]["data"], "credentials.json"), b_dir)
    port = free_port()
    log = open(os.path.join(b_dir, "gateway.log"), "w")
    b_proc = subprocess.Popen([sys.argv[1], "gateway", "--config",
                               os.path.join(srv.dir, "cluster.json"), "--data", b_dir,
                               "--listen", "127.0.0.1:%d" % port,
                               "--admin-listen", "127.0.0.1:%d" % free_port(),
                               "--nbd-listen", "off", "--nbd-socket", "off"],
                              stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while "/admin/v1/cluster" not in open(log.name).read():
        if time.monotonic() > deadline or b_proc.poll() is not None:
            fail("gateway B did not start:\n" + open(log.name).read()[-2000:])
        time.sleep(0.1)
    return "http://127.0.0.1:%d" % port


a = client(srv.endpoint)
b = client(start_b())

a.create_bucket(Bucket="twogw")
b.put_object(Bucket="twogw", Key="warm", Body=b"w")  # B caches the bucket
b.delete_object(Bucket="twogw", Key="warm")
a.delete_bucket(Bucket="twogw")
check(code(lambda: a.head_bucket(Bucket="twogw")) == "404", "the bucket is still there")
b.put_object(Bucket="twogw", Key="ghost", Body=b"committed into a deleted bucket")

a.create_bucket(Bucket="twogw")
listed = a.list_objects_v2(Bucket="twogw").get("Contents", [])
check(listed == [], "the new bucket lists what went into the old one: %r" % listed)
check(code(lambda: a.head_object(Bucket="twogw", Key="ghost")) == "404",
      "HEAD finds the old bucket's object in the new one")
check(code(lambda: a.get_object(Bucket="twogw", Key="ghost")) == "NoSuchKey",
      "GET finds the old bucket's object in the new one")
rc = code(lambda: a.delete_bucket(Bucket="twogw"))
check(rc == "OK", "DeleteBucket of the new, empty bucket: %s" % rc)

a.create_bucket(Bucket="twogw")
a.put_object(Bucket="twogw", Key="live", Body=b"live")
keys = [o["Key"] for o in a.list_objects_v2(Bucket="twogw").get("Contents", [])]
check(keys == ["live"], "listing of the new bucket: %r" % keys)
check(a.get_object(Bucket="twogw", Key="live")["Body"].read() == b"live", "read back")

b_proc.terminate()
b_proc.wait(timeout=60)
shutil.rmtree(b_dir, ignore_errors=True)
srv.stop()
print("bucket_two_gateways: OK")
