#!/usr/bin/env python3
"""`inec gateway --config cluster.json` in front of 9 `inec node` processes over
tcp (started by scripts/cluster.sh): boto3 writes and reads objects through
it, every byte compared, also after one node is killed (a degraded read across
processes, and writes that go on without it); SIGTERM stops the gateway cleanly. argv[1]: the inec binary,
argv[2]: the scripts directory."""
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

try:
    import boto3
    from botocore.config import Config
except ImportError:
    sys.exit("boto3 is missing: run scripts/deps.sh (python3-boto3)")

inec, scripts = os.path.abspath(sys.argv[1]), sys.argv[2]
d = tempfile.mkdtemp(prefix="inec-gw-")
env = dict(os.environ, INEC=inec)
for k in ("INEC_ACCESS_KEY", "INEC_SECRET_KEY", "INEC_ADMIN_TOKEN"):
    env.pop(k, None)


def cluster(*args):
    return subprocess.run(["bash", os.path.join(scripts, "cluster.sh"), *args], env=env,
                          capture_output=True, text=True, timeout=120)


def log():
    try:
        return open(os.path.join(d, "gateway.log")).read()[-20000:]
    except OSError:
        return ""


def fail(msg):
    cluster("stop", d)
    sys.stderr.write("FAIL: %s\n--- gateway log ---\n%s\n" % (msg, log()))
    shutil.rmtree(d, ignore_errors=True)
    sys.exit(1)


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


r = cluster("start", "9", d)
if r.returncode != 0:
    fail("cluster.sh start: %s%s" % (r.stdout, r.stderr))
deadline = time.monotonic() + 120
while "/admin/v1/cluster" not in log():
    if time.monotonic() > deadline:
        fail("the gateway printed no banner")
    time.sleep(0.1)
banner = log()
endpoint = re.search(r"S3 endpoint: (http://\S+)", banner).group(1)
s3 = boto3.client(
    "s3", endpoint_url=endpoint, region_name="us-east-1",
    aws_access_key_id=re.search(r"AWS_ACCESS_KEY_ID=(\S+)", banner).group(1),
    aws_secret_access_key=re.search(r"AWS_SECRET_ACCESS_KEY=(\S+)", banner).group(1),
    config=Config(signature_version="s3v4", retries={"max_attempts": 1},
                  s3={"addressing_style": "path"}))

rng = random.Random(3)
bodies = {"zero": b"", "small": rng.randbytes(5000), "big": rng.randbytes(13 << 20)}
s3.create_bucket(Bucket="tcp")
for k, b in bodies.items():
    s3.put_object(Bucket="tcp", Key=k, Body=b)
for k, b in bodies.items():
    if s3.get_object(Bucket="tcp", Key=k)["Body"].read() != b:
        fail("GET %s over tcp returned other bytes" % k)
keys = [c["Key"] for c in s3.list_objects_v2(Bucket="tcp")["Contents"]]
if keys != sorted(bodies):
    fail("listing: %s" % keys)

# One node dies: every object still reads back whole (RS(6,3) tolerates 3).
victim = json.load(open(os.path.join(d, "cluster.json")))["map"]["nodes"][4]["id"]
pid = int(open(os.path.join(d, victim + ".pid")).read())
os.kill(pid, signal.SIGKILL)
while alive(pid):
    time.sleep(0.05)
for k, b in bodies.items():
    if s3.get_object(Bucket="tcp", Key=k)["Body"].read() != b:
        fail("degraded GET %s returned other bytes" % k)
r = s3.get_object(Bucket="tcp", Key="big", Range="bytes=1000000-9000000")
if r["Body"].read() != bodies["big"][1000000:9000001]:
    fail("degraded range read")

import urllib.request  # noqa: E402
admin = re.search(r"control API: (http://\S+)", banner).group(1)
token = re.search(r"Bearer (\S+)'", banner).group(1)
req = urllib.request.Request(admin + "/metrics", headers={"Authorization": "Bearer " + token})
metrics = urllib.request.urlopen(req, timeout=30).read().decode()
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
req = urllib.request.Request(admin + "/admin/v1/objects/tcp/after-big",
                             headers={"Authorization": "Bearer " + token})
obj = json.loads(urllib.request.urlopen(req, timeout=30).read())
missing = [c["node"] for s in obj["stripes"] for c in s["chunks"] if c["state"] == "missing"]
if missing != [victim] * len(obj["stripes"]):
    fail("the chunks on the dead node are not marked missing: %s" % obj)

gw = int(open(os.path.join(d, "gateway.pid")).read())
os.kill(gw, signal.SIGTERM)
deadline = time.monotonic() + 60
while alive(gw):
    if time.monotonic() > deadline:
        fail("the gateway ignored SIGTERM")
    time.sleep(0.05)
if "shutting down" not in log():
    fail("the gateway did not shut down cleanly")
cluster("stop", d)
shutil.rmtree(d, ignore_errors=True)
print("s3_gateway_tcp: all checks passed")
