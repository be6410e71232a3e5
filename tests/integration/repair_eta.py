#!/usr/bin/env python3
"""The repair progress of the control API tells the truth: on a 9-process tcp
cluster (RS(5,3)), a node removed for good is rebuilt elsewhere under a
throttle chosen so the run takes about 70 s; the ETA reported at several
points of the run is within 20% of the time the run really took from there,
and stripes/bytes done grow to their totals (samples with less than 10 s to go
are not judged: the end is only observed to the second), and the total stays
what the queue held when the run began (the scans report every queued stripe
again, once a second). Slow by design (the issue asks
for a run of at least 60 s); it mostly sleeps: the throttle paces repair.
argv[1]: the inec binary."""
import concurrent.futures
import json
import os
import random
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

NOBJ, SIZE, TARGET_S = 100, 40000, 70.0
srv = InecCluster(sys.argv[1], env={"INEC_PROFILE": "rs:k=5,m=3"},
                  gateway={"inline_max": 0,  # its objects in stripes: their repair is timed
                           "repair": {"scan_interval_ms": 1000}})


def fail(msg):
    srv.fail(msg)


def admin(path, body=None):
    req = urllib.request.Request(srv.admin + path, method="POST" if body is not None else "GET",
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Authorization": "Bearer " + srv.token})
    return json.loads(urllib.request.urlopen(req, timeout=60).read())


s3 = boto3.client(
    "s3", endpoint_url=srv.endpoint, region_name="us-east-1",
    aws_access_key_id=srv.access_key, aws_secret_access_key=srv.secret_key,
    config=Config(signature_version="s3v4", retries={"max_attempts": 1},
                  s3={"addressing_style": "path"}, max_pool_connections=16))
rng = random.Random(5)
bodies = {"e%04d" % i: rng.randbytes(SIZE) for i in range(NOBJ)}
s3.create_bucket(Bucket="eta")
with concurrent.futures.ThreadPoolExecutor(8) as ex:
    list(ex.map(lambda kv: s3.put_object(Bucket="eta", Key=kv[0], Body=kv[1]), bodies.items()))

admin("/admin/v1/repair", {"paused": True})
victim = srv.nodes()[2]
srv.kill_node(victim)
admin("/admin/v1/nodes/%s/remove" % victim, {})
# The scan queues every stripe with a chunk on the victim; wait until it is stable.
deadline, last, stable = time.monotonic() + 120, -1, 0
while stable < 3:
    st = admin("/admin/v1/repair")
    n = st["queue"]["stripes"]
    stable = stable + 1 if n == last and n > 0 and st["scan"]["scans"] >= 2 else 0
    last = n
    if time.monotonic() > deadline:
        fail("the queue never settled: %s" % st)
    time.sleep(1)
total = st["queue"]["bytes"]
if total <= 0 or st["queue"]["stripes"] < NOBJ // 2:
    fail("queue after the removal: %s" % st["queue"])
mbps = total / TARGET_S / 1e6
admin("/admin/v1/repair", {"throttle_mbps": mbps, "paused": False})
t0 = time.monotonic()
samples = []  # (time, eta reported)
while True:
    st = admin("/admin/v1/repair")
    now = time.monotonic()
    p = st["progress"]
    if st["state"] == "idle" and st["queue"]["stripes"] == 0:
        break
    if now - t0 > 5 and p["eta_s"] > 0 and (not samples or now - samples[-1][0] >= 10):
        samples.append((now, p["eta_s"], p["bytes_done"], p["bytes_total"]))
    if p["bytes_done"] > p["bytes_total"] or p["stripes_done"] > p["stripes_total"]:
        fail("progress beyond its total: %s" % p)
    # Nothing new degrades during the run: the scans (every second) report
    # the queued stripes again, which must not count them again.
    if p["bytes_total"] != total:
        fail("bytes_total %d, the queue held %d bytes when the run began: %s"
             % (p["bytes_total"], total, p))
    if now - t0 > 4 * TARGET_S:
        fail("the repair did not finish in %d s: %s" % (4 * TARGET_S, st))
    time.sleep(1)
end = time.monotonic()
took = end - t0
if took < 60:
    fail("the run took %.1f s, the ETA check needs at least 60" % took)
# Within the last 10 s the end is only seen to the second (1 s polls, 1 s scans),
# which alone is more than 20% of what is left: those samples say nothing.
judged = [s for s in samples if end - s[0] >= 10]
if len(judged) < 4:
    fail("too few ETA samples with 10 s or more to go: %s" % samples)
for t, eta, done, tot in judged:
    real = end - t
    if abs(eta - real) > 0.2 * real:
        fail("ETA %.1f s at +%.1f s, the run really ended %.1f s later (samples %s)"
             % (eta, t - t0, real, samples))
if st["totals"]["stripes_repaired"] < NOBJ // 2:
    fail("too few stripes repaired: %s" % st["totals"])
srv.stop()
print("ok: %.1f s run at %.4f MB/s; ETA samples (t, eta, real): %s" % (
    took, mbps, [(round(t - t0), round(e, 1), round(end - t, 1)) for t, e, _, _ in samples]))
