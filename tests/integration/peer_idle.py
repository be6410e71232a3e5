#!/usr/bin/env python3
"""The failure detector does not cry wolf: a multi-process cluster (9 `inec node`
+ `inec gateway` over tcp) serves one GET, then stays idle for longer than the
peer timeout (the map's default peer_timeout_ms, 5 s, twice over); no live peer
may be closed as "peer silent" or even suspected, the control API must show
every node up with a recent last_seen, and the next GET must read the object
without a degraded read. Then the detector must see a hung node: one holding a
data chunk is SIGSTOPped; it must be suspected (logged), the GET must still
read the object byte-exact (routed around it), and after SIGCONT the node must
be up again at the first answer. argv[1]: the inec binary."""
import json
import os
import random
import signal
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inec_server import InecCluster  # noqa: E402

try:
    import boto3
    from botocore.config import Config
except ImportError:
    sys.exit("boto3 is missing: run scripts/deps.sh (python3-boto3)")

IDLE_S = 11

srv = InecCluster(sys.argv[1])
s3 = boto3.client(
    "s3", endpoint_url=srv.endpoint, region_name="us-east-1",
    aws_access_key_id=srv.access_key, aws_secret_access_key=srv.secret_key,
    config=Config(signature_version="s3v4", retries={"max_attempts": 1},
                  s3={"addressing_style": "path"}))


def logs():
    out = {}
    for name in ["gateway"] + srv.nodes():
        with open(os.path.join(srv.dir, name + ".log"), errors="replace") as f:
            out[name] = f.read()
    return out


def cluster_json():
    req = urllib.request.Request(srv.admin + "/admin/v1/cluster",
                                 headers={"Authorization": "Bearer " + srv.token})
    return json.loads(urllib.request.urlopen(req, timeout=30).read())


body = random.Random(15).randbytes(3 << 20)
s3.create_bucket(Bucket="idle")
s3.put_object(Bucket="idle", Key="k", Body=body)
if s3.get_object(Bucket="idle", Key="k")["Body"].read() != body:
    srv.fail("GET returned other bytes")
before = cluster_json()["degraded_reads"]
time.sleep(IDLE_S)
for name, log in logs().items():
    for bad in ("peer silent", " suspect "):
        hits = [line for line in log.splitlines() if bad in line]
        if hits:
            srv.fail("%s: %d live peers seen as %r after %d s idle:\n%s"
                     % (name, len(hits), bad.strip(), IDLE_S, "\n".join(hits[:12])))
if s3.get_object(Bucket="idle", Key="k")["Body"].read() != body:
    srv.fail("GET after the idle spell returned other bytes")
c = cluster_json()
if c["degraded_reads"] != before:
    srv.fail("the GET after the idle spell was degraded: a live node was taken for down")
for n in c["nodes"]:
    if n.get("peer_state") != "up" or not n.get("up") or n.get("suspicions") != 0 \
            or n.get("last_seen_age_seconds", 99) > 5:
        srv.fail("node %s is not up after an idle spell: %s" % (n["id"], n))
req = urllib.request.Request(srv.admin + "/metrics", headers={"Authorization": "Bearer " + srv.token})
metrics = urllib.request.urlopen(req, timeout=30).read().decode()
for want in ('inec_node_suspect{node="n0"} 0', "inec_node_last_seen_age_seconds{node="):
    if want not in metrics:
        srv.fail("/metrics lacks %r" % want)

# A hung node (SIGSTOP): suspected, routed around, up again at its first answer.
obj = json.loads(urllib.request.urlopen(urllib.request.Request(
    srv.admin + "/admin/v1/objects/idle/k",
    headers={"Authorization": "Bearer " + srv.token}), timeout=30).read())
victim = obj["stripes"][0]["chunks"][0]["node"]
pid = srv.pid(victim)
os.kill(pid, signal.SIGSTOP)
try:
    deadline = time.monotonic() + 60
    while not any(("node %s suspect" % victim) in line or ("node %s down" % victim) in line
                  for line in logs()["gateway"].splitlines()):
        if time.monotonic() > deadline:
            srv.fail("node %s SIGSTOPped for 60 s and never suspected" % victim)
        time.sleep(0.2)
    if s3.get_object(Bucket="idle", Key="k")["Body"].read() != body:
        srv.fail("GET with a hung node returned other bytes")
finally:
    os.kill(pid, signal.SIGCONT)
deadline = time.monotonic() + 60
while not any(("node %s up" % victim) in line for line in logs()["gateway"].splitlines()):
    if time.monotonic() > deadline:
        srv.fail("node %s answers again but is not up 60 s after SIGCONT" % victim)
    time.sleep(0.2)
for n in cluster_json()["nodes"]:
    if n["id"] == victim and n.get("peer_state") != "up":
        srv.fail("node %s after SIGCONT: %s" % (victim, n))
if s3.get_object(Bucket="idle", Key="k")["Body"].read() != body:
    srv.fail("GET after SIGCONT returned other bytes")
srv.stop()
print("ok: %d s idle, no live peer suspected or closed" % IDLE_S)
