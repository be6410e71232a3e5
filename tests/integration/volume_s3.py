#!/usr/bin/env python3
"""A volume's stripes are out of S3's reach: with a volume written over NBD
(libnbd), boto3 does not see its bucket (inec-vol-NAME) in ListBuckets and
gets AccessDenied for every request on it (list, get, head, put, delete,
create, delete bucket), while ordinary buckets work; the disk reads back
byte-exact afterwards. argv[1]: the inec binary."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inec_server import InecServer  # noqa: E402

try:
    import boto3  # noqa: F401
    import botocore.exceptions
    import nbd
except ImportError as e:
    sys.exit("%s: run scripts/deps.sh (python3-boto3, python3-libnbd)" % e)

INEC = sys.argv[1]
srv = InecServer(INEC, extra_args=["--nbd-listen", "127.0.0.1:0"])
port = None
for line in srv.banner.splitlines():
    if line.startswith("NBD (block volumes):"):
        port = int(line.split(":", 1)[1].split()[0].rsplit(":", 1)[1])
if not port:
    srv.fail("no NBD port in the banner")
r = subprocess.run([INEC, "volume", "create", "disk9", "--size", str(4 << 20), "--endpoint",
                    srv.admin, "--token", srv.token, "--json"],
                   capture_output=True, text=True, timeout=120)
if r.returncode != 0:
    srv.fail("inec volume create: %s%s" % (r.stdout, r.stderr))
vol = json.loads(r.stdout)
h = nbd.NBD()
h.connect_uri("nbd://127.0.0.1:%d/%s" % (port, vol["export"]))
data = os.urandom(1 << 20)
h.pwrite(data, 0)
h.flush()

s3 = srv.s3()
s3.create_bucket(Bucket="plain")
s3.put_object(Bucket="plain", Key="k", Body=b"x")
names = [b["Name"] for b in s3.list_buckets()["Buckets"]]
if names != ["plain"]:
    srv.fail("ListBuckets shows %s" % names)
B, KEY = "inec-vol-disk9", "0000000000000000"
for what, call in (
        ("ListObjectsV2", lambda: s3.list_objects_v2(Bucket=B)),
        ("GetObject", lambda: s3.get_object(Bucket=B, Key=KEY)),
        ("HeadBucket", lambda: s3.head_bucket(Bucket=B)),
        ("PutObject", lambda: s3.put_object(Bucket=B, Key=KEY, Body=b"corrupt")),
        ("DeleteObject", lambda: s3.delete_object(Bucket=B, Key=KEY)),
        ("DeleteBucket", lambda: s3.delete_bucket(Bucket=B)),
        ("CreateBucket", lambda: s3.create_bucket(Bucket="inec-vol-other"))):
    try:
        call()
        srv.fail("%s on a volume's bucket succeeded" % what)
    except botocore.exceptions.ClientError as e:
        code = e.response["Error"]["Code"]
        status = e.response["ResponseMetadata"]["HTTPStatusCode"]
        if status != 403 or code not in ("AccessDenied", "403"):
            srv.fail("%s on a volume's bucket: %s %s" % (what, status, code))
if h.pread(len(data), 0) != data:
    srv.fail("the disk changed")
h.shutdown()
srv.stop()
print("volume_s3: ok")
