#!/usr/bin/env python3
"""`inec gateway --config cluster.json` in front of 9 `inec node` processes over
tcp (RS(6,3), started by scripts/cluster.sh): boto3 writes and reads objects
through it, every byte compared; one node killed (a degraded read across
processes, and writes that go on without it); m = 3 killed: every object,
multi-stripe and multipart ones too, still reads byte-exact; a 4th killed:
reads and writes fail with a 503-class S3 error, never other bytes, and the
gateway keeps answering; SIGTERM stops the gateway cleanly.
argv[1]: the inec binary."""
import json
import os
import random
import re
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inec_server import InecCluster  # noqa: E402

try:
    import boto3
    from botocore.config import Config
    from botocore.exceptions import ClientError
except ImportError:
    sys.exit("boto3 is missing: run scripts/deps.sh (python3-boto3)")

srv = InecCluster(sys.argv[1])
s3 = boto3.client(
    "s3", endpoint_url=srv.endpoint, region_name="us-east-1",
    aws_access_key_id=srv.access_key, aws_secret_access_key=srv.secret_key,
    config=Config(signature_version="s3v4", retries={"max_attempts": 1},
                  s3={"addressing_style": "path"}))


def fail(msg):
    srv.fail(msg)


def admin_get(path):
    req = urllib.request.Request(srv.admin + path, headers={"Authorization": "Bearer " + srv.token})
    return urllib.request.urlopen(req, timeout=30).read()


rng = random.Random(3)
# "big" is a 13 MiB stripe of 6 data chunks (chunks grow with the object).
bodies = {"zero": b"", "small": rng.randbytes(5000), "big": rng.randbytes(13 << 20)}
s3.create_bucket(Bucket="tcp")
for k, b in bodies.items():
    s3.put_object(Bucket="tcp", Key=k, Body=b)
# A multipart object: two parts, each its own stripes.
parts = [rng.randbytes(5 << 20), rng.randbytes((1 << 20) + 3)]
uid = s3.create_multipart_upload(Bucket="tcp", Key="mp")["UploadId"]
etags = [s3.upload_part(Bucket="tcp", Key="mp", UploadId=uid, PartNumber=i + 1,
                        Body=p)["ETag"] for i, p in enumerate(parts)]
s3.complete_multipart_upload(Bucket="tcp", Key="mp", UploadId=uid, MultipartUpload={
    "Parts": [{"PartNumber": i + 1, "ETag": e} for i, e in enumerate(etags)]})
bodies["mp"] = b"".join(parts)
for k, b in bodies.items():
    if s3.get_object(Bucket="tcp", Key=k)["Body"].read() != b:
        fail("GET %s over tcp returned other bytes" % k)
keys = [c["Key"] for c in s3.list_objects_v2(Bucket="tcp")["Contents"]]
if keys != sorted(bodies):
    fail("listing: %s" % keys)

# One node dies: every object still reads back whole (RS(6,3) tolerates 3). It
# holds a data chunk of "big" (placement is random), so some read must decode.
view = json.loads(admin_get("/admin/v1/objects/tcp/big"))
victim = view["stripes"][0]["chunks"][0]["node"]
srv.kill_node(victim)
for k, b in bodies.items():
    if s3.get_object(Bucket="tcp", Key=k)["Body"].read() != b:
        fail("degraded GET %s returned other bytes" % k)
r = s3.get_object(Bucket="tcp", Key="big", Range="bytes=1000000-9000000")
if r["Body"].read() != bodies["big"][1000000:9000001]:
    fail("degraded range read")

metrics = admin_get("/metrics").decode()
m = re.search(r"^inec_degraded_reads_total (\d+)$", metrics, re.M)
if not m or int(m.group(1)) == 0:
    fail("no degraded reads counted after a node died:\n%s" % metrics[-2000:])
if not re.search(r'^inec_node_up\{node="%s"\} 0$' % victim, metrics, re.M):
    fail("the dead node is not reported down:\n%s" % metrics[-2000:])

# Writes go on with the node dead: each stripe is stored without its chunk
# (the write quorum, k + 1 = 7 of 9, holds), which the record marks missing.
after = {"after-small": rng.randbytes(7000), "after-big": rng.randbytes(5 << 20)}
for k, b in after.items():
    s3.put_object(Bucket="tcp", Key=k, Body=b)
    if s3.get_object(Bucket="tcp", Key=k)["Body"].read() != b:
        fail("GET %s written with a node dead returned other bytes" % k)
obj = json.loads(admin_get("/admin/v1/objects/tcp/after-big"))
missing = [c["node"] for s in obj["stripes"] for c in s["chunks"] if c["state"] == "missing"]
if missing != [victim] * len(obj["stripes"]):
    fail("the chunks on the dead node are not marked missing: %s" % obj)
bodies.update(after)

# m = 3 nodes dead (two more, SIGKILL): every object, whole and in ranges
# across stripe boundaries, still reads byte-exact from the six left.
others = [n for n in srv.nodes() if n != victim]
for node in (others[0], others[-1]):
    srv.kill_node(node)
for k, b in bodies.items():
    if s3.get_object(Bucket="tcp", Key=k)["Body"].read() != b:
        fail("GET %s with 3 nodes dead returned other bytes" % k)
big = bodies["big"]
for a, z in [(0, 0), ((6 << 20) - 5, (6 << 20) + 4), (len(big) - 100, len(big) - 1),
             tuple(sorted((rng.randrange(len(big)), rng.randrange(len(big)))))]:
    r = s3.get_object(Bucket="tcp", Key="big", Range="bytes=%d-%d" % (a, z))
    if r["Body"].read() != big[a:z + 1]:
        fail("range %d-%d with 3 nodes dead returned other bytes" % (a, z))
r = s3.get_object(Bucket="tcp", Key="mp", Range="bytes=%d-%d" % ((5 << 20) - 7, (5 << 20) + 7))
if r["Body"].read() != bodies["mp"][(5 << 20) - 7:(5 << 20) + 8]:
    fail("range across the parts with 3 nodes dead returned other bytes")


def error_of(fn, **kw):
    """The S3 error status of a call, or None when it succeeded (and what it read)."""
    try:
        r = fn(**kw)
        return None, r["Body"].read() if "Body" in r else None
    except ClientError as e:
        return e.response["ResponseMetadata"]["HTTPStatusCode"], e.response["Error"].get("Code")


# A 4th node dead: more than m lost. Reads of stored bytes fail with a clear
# 503-class error, never other bytes (the empty object has no chunk to lose,
# so it may read, empty; an inline one may still have 4 of its 7 homes).
srv.kill_node(others[1])
for k, b in bodies.items():
    st, what = error_of(s3.get_object, Bucket="tcp", Key=k)
    if not b and st is None:
        if what != b"":
            fail("the empty object with 4 nodes dead read %r" % what[:100])
    elif len(b) <= 131072 and st is None:
        # Inline (README "Small objects go inline"): its 7 metadata homes hold
        # its shards, and 4 dead nodes may leave k = 4 of them.
        if what != b:
            fail("the inline object %s with 4 nodes dead read other bytes" % k)
    elif st != 503:
        fail("GET %s with 4 nodes dead: want a 503 error, got %s %r" % (
            k, st, what[:100] if st is None else what))
# A range within one data chunk reads that chunk alone: one on a dead node.
dead = {victim, others[0], others[-1], others[1]}
first = view["stripes"][0]
c = next(ch for ch in first["chunks"] if ch["node"] in dead and ch["index"] < 6)
a = c["index"] * first["chunk_len"] + 1000
st, what = error_of(s3.get_object, Bucket="tcp", Key="big", Range="bytes=%d-%d" % (a, a + 100))
if st != 503:
    fail("range GET of a chunk on a dead node, with 4 nodes dead: %s" % st)
# (Past inline_max, 128 KiB: an inline PUT needs only its metadata homes.)
st, what = error_of(s3.put_object, Bucket="tcp", Key="refused", Body=rng.randbytes(300000))
if st != 503:
    fail("PUT with 4 nodes dead (5 of 9 < write quorum 7): %s %r" % (st, what))
# ...and the gateway keeps answering: metadata lives on the nodes too (in
# replicas), so each call either succeeds, right, or says 503; the control
# API, local to the gateway, reports the four nodes down.
if not srv.alive():
    fail("the gateway died when a 4th node did")
st, what = error_of(s3.head_bucket, Bucket="tcp")
if st not in (None, 503):
    fail("HEAD bucket with 4 nodes dead: %s %r" % (st, what))
try:
    names = [b["Name"] for b in s3.list_buckets()["Buckets"]]
    if names != ["tcp"]:
        fail("ListBuckets with 4 nodes dead: %s" % names)
except ClientError as e:
    if e.response["ResponseMetadata"]["HTTPStatusCode"] != 503:
        fail("ListBuckets with 4 nodes dead: %s" % e)
try:
    keys = [c["Key"] for c in s3.list_objects_v2(Bucket="tcp")["Contents"]]
    if keys != sorted(bodies):
        fail("listing with 4 nodes dead (the refused PUT must not show): %s" % keys)
except ClientError as e:
    if e.response["ResponseMetadata"]["HTTPStatusCode"] != 503:
        fail("ListObjectsV2 with 4 nodes dead: %s" % e)
metrics = admin_get("/metrics").decode()
down = re.findall(r'^inec_node_up\{node="([^"]+)"\} 0$', metrics, re.M)
if sorted(down) != sorted(dead):
    fail("nodes reported down: %s" % down)

srv.stop()  # SIGTERM: the gateway must shut down cleanly
print("s3_gateway_tcp: all checks passed")
