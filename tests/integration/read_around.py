#!/usr/bin/env python3
"""GET reads around slow and failing nodes, on a multi-process cluster (9 `inec
node` + `inec gateway` over tcp, RS(6,3), 64 KiB chunks so a stripe is 384 KiB).

1. Hedged reads: with a 15 s peer timeout, a node holding a data chunk of a
   one-stripe object is SIGSTOPped and the object read at once. The read of
   that chunk hangs; after the hedge delay (a percentile of recent chunk
   reads) the gateway reads a parity and decodes, so the GET answers well
   before the peer timeout (under half of it), byte-exact, counted in
   hedged_reads. Every log line naming that key carries the GET's request id.
2. Mid-stream failures: a 24 MiB GET (64 stripes) is started and 1 MiB read;
   then 3 nodes are SIGKILLed and a 4th SIGSTOPped for longer than the peer
   timeout (5 s): for those seconds stripes have more chunks out than the code
   tolerates. The gateway retries the failed reads until the stopped node
   answers again, so the whole body arrives byte-exact: no cut, no short read.
   Then, with 4 nodes gone for good, a GET is a 503 whose log lines carry its
   request id. argv[1]: the inec binary."""
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
    from botocore.exceptions import ClientError
except ImportError:
    sys.exit("boto3 is missing: run scripts/deps.sh (python3-boto3)")

SLOW_TIMEOUT_MS = 15000

srv = InecCluster(sys.argv[1], env={"INEC_CHUNK": "65536"})


def client():
    return boto3.client(
        "s3", endpoint_url=srv.endpoint, region_name="us-east-1",
        aws_access_key_id=srv.access_key, aws_secret_access_key=srv.secret_key,
        config=Config(signature_version="s3v4", retries={"max_attempts": 1},
                      read_timeout=120, s3={"addressing_style": "path"}))


def admin(path):
    req = urllib.request.Request(srv.admin + path, headers={"Authorization": "Bearer " + srv.token})
    return json.loads(urllib.request.urlopen(req, timeout=60).read())


def gateway_log():
    with open(os.path.join(srv.dir, "gateway.log"), errors="replace") as f:
        return f.read()


def set_peer_timeout(ms, heartbeat_ms):
    """Restarts the gateway with the map's peer timeout and heartbeat set."""
    path = os.path.join(srv.dir, "cluster.json")
    cfg = json.load(open(path))
    cfg["map"]["peer_timeout_ms"] = ms
    cfg["map"]["heartbeat_ms"] = heartbeat_ms
    json.dump(cfg, open(path, "w"), indent=2)
    srv.kill_gateway()
    srv.restart_gateway()


def lines_of(key):
    return [ln for ln in gateway_log().splitlines() if "key=%s " % key in ln or
            ln.endswith("key=%s" % key)]


rng = random.Random(15)
s3 = client()
s3.create_bucket(Bucket="around")

# --- 1. a hung node: hedged, long before the peer timeout --------------------------
# A slow heartbeat: the hung node is not suspected (and so routed around) for 4 s;
# the chunk read that hangs must be hedged, not avoided.
set_peer_timeout(SLOW_TIMEOUT_MS, 2000)
s3 = client()
small = rng.randbytes(300 << 10)  # one stripe: 5 data chunks of 64 KiB (the 6th padding)
s3.put_object(Bucket="around", Key="hedge", Body=small)
for _ in range(40):  # a history of chunk-read latencies for the hedge delay
    if s3.get_object(Bucket="around", Key="hedge")["Body"].read() != small:
        srv.fail("GET returned other bytes")
before = admin("/admin/v1/cluster")["hedged_reads"]
victim = admin("/admin/v1/objects/around/hedge")["stripes"][0]["chunks"][0]["node"]
pid = srv.pid(victim)
os.kill(pid, signal.SIGSTOP)
try:
    t0 = time.monotonic()
    r = s3.get_object(Bucket="around", Key="hedge")
    got = r["Body"].read()
    took = time.monotonic() - t0
finally:
    os.kill(pid, signal.SIGCONT)
rid = r["ResponseMetadata"]["RequestId"]
if got != small:
    srv.fail("the hedged GET returned other bytes")
if took >= SLOW_TIMEOUT_MS / 2000:
    srv.fail("GET with %s hung took %.1f s: not hedged (peer timeout %d ms)"
             % (victim, took, SLOW_TIMEOUT_MS))
after = admin("/admin/v1/cluster")["hedged_reads"]
if after <= before:
    srv.fail("hedged_reads did not grow (%d -> %d)" % (before, after))
if not any("hedged read" in ln and "req=%s:" % rid in ln for ln in lines_of("hedge")):
    srv.fail("no 'hedged read' line with request id %s:\n%s" % (rid, gateway_log()[-3000:]))
for ln in lines_of("hedge"):  # every line of a request names it
    if " req=" not in ln:
        srv.fail("a log line of a request without its id: %s" % ln)
print("hedged: %.2f s with %s stopped (peer timeout %.0f s), request %s"
      % (took, victim, SLOW_TIMEOUT_MS / 1000, rid))

# --- 2. failures mid-stream, beyond m for a while: no cut --------------------------
set_peer_timeout(5000, 500)
s3 = client()
big = rng.randbytes(24 << 20)
s3.put_object(Bucket="around", Key="big", Body=big)
degraded_before = admin("/admin/v1/cluster")["degraded_reads"]
body = s3.get_object(Bucket="around", Key="big")["Body"]
head = body.read(1 << 20)
nodes = srv.nodes()
killed = rng.sample(nodes, 3)
stopped = rng.choice([n for n in nodes if n not in killed])
for n in killed:
    os.kill(srv.pid(n), signal.SIGKILL)
os.kill(srv.pid(stopped), signal.SIGSTOP)
try:
    time.sleep(7)  # longer than the peer timeout: the stopped node's reads time out
finally:
    os.kill(srv.pid(stopped), signal.SIGCONT)
try:
    rest = body.read()
except Exception as e:  # botocore's ResponseStreamingError: the connection was cut
    srv.fail("GET cut mid-stream after %d bytes: %r" % (len(head), e))
got = head + rest
if len(got) != len(big):
    srv.fail("GET cut: %d of %d bytes" % (len(got), len(big)))
if got != big:
    srv.fail("GET returned other bytes after failures mid-stream")
if admin("/admin/v1/cluster")["degraded_reads"] <= degraded_before:
    srv.fail("no stripe of the GET was read after the failures: the test proved nothing")
print("mid-stream: 24 MiB byte-exact with %s killed and %s stopped 7 s" % (killed, stopped))

# --- 3. more than m down for good: a 503 whose log lines carry the request id -------
os.kill(srv.pid(stopped), signal.SIGKILL)
try:
    s3.get_object(Bucket="around", Key="big")["Body"].read()
    srv.fail("GET with 4 nodes dead succeeded")
except ClientError as e:
    st = e.response["ResponseMetadata"]["HTTPStatusCode"]
    rid = e.response["ResponseMetadata"]["RequestId"]
    if st != 503:
        srv.fail("GET with 4 nodes dead: %d, want 503" % st)
if not any("GetObject failed" in ln and "req=%s:" % rid in ln for ln in lines_of("big")):
    srv.fail("the 503's lines lack its request id %s:\n%s" % (rid, gateway_log()[-4000:]))
srv.stop()
print("ok")
