#!/usr/bin/env python3
"""Repair on a 9-process tcp cluster (scripts/cluster.sh, RS(5,3): every stripe
has 8 chunks, so 8 nodes still hold a whole stripe after one is gone):

 1. a few hundred objects written through boto3; repair paused;
 2. one node SIGKILLed and removed for good (POST /admin/v1/nodes/ID/remove):
    the scanner moves the metadata off it and queues every stripe that had a
    chunk there, in the durable queue on the nodes;
 3. the gateway SIGKILLed with those repairs queued, restarted with its scanner
    off (so only the queue can say what to repair): still paused (the setting
    lives on the nodes), then resumed: the queue drains;
 4. every stripe is back to k+m healthy chunks, none on the removed node, on 8
    distinct nodes (the control API reads every chunk of every object), and no
    record has the removed node for a home any more;
 5. any 3 other nodes SIGKILLed: every object still reads byte-exact.
argv[1]: the inec binary."""
import concurrent.futures
import json
import os
import random
import re
import subprocess
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

NOBJ = 240
# inline_max 0: every object in stripes, the repair of stripes under test
# (inline objects through a removal: inline_objects.py).
srv = InecCluster(sys.argv[1], env={"INEC_PROFILE": "rs:k=5,m=3"},
                  gateway={"inline_max": 0,
                           "repair": {"scan_interval_ms": 1000, "orphan_grace_ms": 600000}})


def fail(msg):
    srv.fail(msg)


def client():
    return boto3.client(
        "s3", endpoint_url=srv.endpoint, region_name="us-east-1",
        aws_access_key_id=srv.access_key, aws_secret_access_key=srv.secret_key,
        config=Config(signature_version="s3v4", retries={"max_attempts": 1},
                      s3={"addressing_style": "path"}, max_pool_connections=16))


def admin(path, body=None):
    req = urllib.request.Request(srv.admin + path, method="POST" if body is not None else "GET",
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Authorization": "Bearer " + srv.token})
    for attempt in range(3):
        try:
            return json.loads(urllib.request.urlopen(req, timeout=60).read())
        except ConnectionResetError:
            # Seen once right after the restart; every call here is idempotent.
            if attempt == 2:
                raise
            time.sleep(0.5)


def cli(*args):
    """`inec admin ...` against the gateway; its stdout."""
    r = subprocess.run([sys.argv[1], "admin", *args, "--endpoint", srv.admin, "--token",
                        srv.token], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        fail("inec admin %s: exit %d\n%s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
    return r.stdout


def wait(what, pred, timeout=240):
    deadline = time.monotonic() + timeout
    while True:
        st = admin("/admin/v1/repair")
        if pred(st):
            return st
        if time.monotonic() > deadline:
            fail("timed out waiting for %s; repair status:\n%s" % (what, json.dumps(st, indent=1)))
        time.sleep(0.5)


rng = random.Random(9)
bodies = {"o%04d" % i: rng.randbytes(rng.choice([1, 700, 5000, 40000, 150000]))
          for i in range(NOBJ)}
s3 = client()
s3.create_bucket(Bucket="rep")
with concurrent.futures.ThreadPoolExecutor(8) as ex:
    list(ex.map(lambda kv: s3.put_object(Bucket="rep", Key=kv[0], Body=kv[1]), bodies.items()))

# 2. Repair paused; a node gone for good.
cli("repair", "pause")
nodes = srv.nodes()
victim = nodes[4]
on_victim = 0
for k in bodies:
    st = admin("/admin/v1/objects/rep/" + k)
    on_victim += sum(1 for s in st["stripes"] for c in s["chunks"] if c["node"] == victim)
if on_victim < NOBJ // 2:
    fail("only %d chunks on %s: placement should spread 8 of 9" % (on_victim, victim))
srv.kill_node(victim)
out = cli("node", "remove", victim)
if "rebuilt elsewhere" not in out:
    fail("inec admin node remove said: %s" % out)
st = wait("the scan to queue the lost chunks",
          lambda st: st["queue"]["stripes"] >= on_victim and st["scan"]["scans"] >= 1)
if st["state"] != "paused" or st["totals"]["stripes_repaired"] != 0:
    fail("paused repair ran: %s" % st)

# 3. The gateway dies with the repairs queued; the next one finds them on the nodes.
srv.kill_gateway()
srv.set_gateway_config({"repair": {"scan_interval_ms": 0}})
srv.restart_gateway()
st = admin("/admin/v1/repair")
if st["state"] != "paused":
    fail("pause did not survive the gateway: %s" % st)
st = wait("the queue listing", lambda st: st["queue"]["stripes"] >= on_victim)
out = cli("repair")
m = re.search(r"queue: (\d+) stripes", out)
if not re.search(r"repair: paused", out) or not re.search(r"\[\.{40}\]\s+0%", out) \
        or not m or int(m.group(1)) < on_victim:
    fail("inec admin repair while paused:\n%s" % out)
cli("repair", "resume")
st = wait("the queue to drain",
          lambda st: st["queue"]["stripes"] == 0 and st["state"] == "idle"
          and st["pending"] == 0)
out = cli("repair")
m = re.search(r"\[#{40}\] 100%\s+(\d+)/(\d+) stripes", out)
if not m or m.group(1) != m.group(2) or int(m.group(1)) < on_victim:
    fail("inec admin repair after the run:\n%s" % out)
if st["totals"]["stripes_repaired"] < on_victim:
    fail("%d stripes repaired, %d had a chunk on %s" % (st["totals"]["stripes_repaired"],
                                                       on_victim, victim))
metrics = urllib.request.urlopen(urllib.request.Request(
    srv.admin + "/metrics", headers={"Authorization": "Bearer " + srv.token})).read().decode()
m = re.search(r"^inec_repair_bytes_total (\d+)$", metrics, re.M)
if not m or int(m.group(1)) == 0 or "inec_repair_queue_length 0" not in metrics:
    fail("repair metrics:\n%s" % metrics[-3000:])

# 4. Every stripe whole again, off the removed node, and its metadata moved off
# it too (by this gateway, periodic scans off, if the first died before the move).
wait("the metadata to move off %s" % victim,
     lambda st: not [n for n in st["nodes"] if n["id"] == victim and n["meta_member"]])
for k in bodies:
    st = admin("/admin/v1/objects/rep/" + k)
    for s in st["stripes"]:
        where = [c["node"] for c in s["chunks"]]
        bad = [c for c in s["chunks"] if c["state"] != "ok"]
        if bad or victim in where or len(set(where)) != 8:
            fail("%s stripe %d after repair: %s" % (k, s["index"], s["chunks"]))

# 5. Any 3 more nodes die: every object still reads back exact.
others = [n for n in nodes if n != victim]
for n in rng.sample(others, 3):
    srv.kill_node(n)
s3 = client()


def check(kv):
    try:
        got = s3.get_object(Bucket="rep", Key=kv[0])["Body"].read()
    except Exception as e:  # the gateway's log says why
        fail("GET %s with 3 more nodes down: %s" % (kv[0], e))
    return kv[0] if got != kv[1] else None


with concurrent.futures.ThreadPoolExecutor(8) as ex:
    wrong = [k for k in ex.map(check, bodies.items()) if k]
if wrong:
    fail("read back wrong after 3 more nodes died: %s" % wrong[:10])
srv.stop()
print("ok: %d objects, %d stripes repaired off %s, then 3 more nodes down" % (NOBJ, on_victim,
                                                                             victim))
