#!/usr/bin/env python3
"""Space comes back (9 node processes, `inec gateway`, RS(6,3)): one object
overwritten 1000 times and 1000 keys deleted and written again, through boto3;
then, once garbage collection (gc_delay_ms 1500) and the nodes' background
compaction (interval_ms 500, seal_bytes 64 KiB) have had their chance, every
node's segment files on disk hold at most 2x its live data, and the live data
is what the 1001 objects need (nothing replaced or deleted is still live).
Then tombstones: with a node down, 200 keys deleted; the gateway restarted
with the scanner every second and tombstone_grace_ms 2000: no tombstone goes
while the node is down (it may hold stale copies), all of them once it is back,
and no deleted key comes back.
argv[1]: the inec binary."""
import concurrent.futures
import glob
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inec_server import InecCluster  # noqa: E402

try:
    import boto3  # noqa: F401 (srv.s3)
except ImportError:
    sys.exit("boto3 is missing: run scripts/deps.sh (python3-boto3)")

NKEYS, NOVER, SIZE = 1000, 1000, 4096
# RS(6,3): 6 data chunks of ceil(4096 / 6) rounded up to 64 B, 9 chunks, each
# with its 64-byte record header.
CHUNK = (SIZE + 5) // 6
CHUNK = (CHUNK + 63) // 64 * 64
PER_OBJECT = 9 * (CHUNK + 64)

srv = InecCluster(sys.argv[1],
                  env={"INEC_NODE_CONFIG": json.dumps(
                      {"compaction": {"interval_ms": 500, "seal_bytes": 65536}})},
                  # inline_max 0: 4 KiB objects in stripes, whose chunks' space is under test
                  gateway={"max_get_ms": 1000, "gc_delay_ms": 1500, "inline_max": 0})


def fail(msg):
    srv.fail(msg)


def body(key, round_):
    return (b"%s/%d/" % (key.encode(), round_)).ljust(SIZE, b".")


s3 = srv.s3(retries={"max_attempts": 3}, max_pool_connections=16)
s3.create_bucket(Bucket="churn")
keys = ["k%04d" % i for i in range(NKEYS)]
t0 = time.monotonic()
with concurrent.futures.ThreadPoolExecutor(8) as ex:
    list(ex.map(lambda k: s3.put_object(Bucket="churn", Key=k, Body=body(k, 0)), keys))

    def recreate(k):
        s3.delete_object(Bucket="churn", Key=k)
        s3.put_object(Bucket="churn", Key=k, Body=body(k, 1))
    list(ex.map(recreate, keys))
for r in range(NOVER):  # one writer: each overwrite replaces the last
    s3.put_object(Bucket="churn", Key="hot", Body=body("hot", r))
print("%d PUTs, %d DELETEs in %.1f s" % (2 * NKEYS + NOVER, NKEYS, time.monotonic() - t0))


def disk():
    """Per node: segment bytes on disk (the files themselves) and live bytes."""
    live = {n["id"]: n["live_bytes"] for n in srv.admin_get("/admin/v1/cluster")["nodes"]}
    out = {}
    for i, node in enumerate(srv.nodes()):
        segs = glob.glob(os.path.join(srv.dir, "node-%d" % i, "seg-*.log"))
        out[node] = (sum(os.path.getsize(p) for p in segs), live[node])
    return out


want_live = (NKEYS + 1) * PER_OBJECT
deadline = time.monotonic() + 90
while True:
    d = disk()
    live = sum(v[1] for v in d.values())
    over = {n: v for n, v in d.items() if v[0] > 2 * v[1]}
    if not over and live <= want_live * 1.05:
        break
    if time.monotonic() > deadline:
        fail("after 90 s: live %d (the objects need %d), nodes over 2x live: %s"
             % (live, want_live, over))
    time.sleep(1)
if live < want_live:
    fail("live %d < %d: the nodes lost chunks" % (live, want_live))
print("disk/live per node: %s" % ", ".join("%s %.2f" % (n, v[0] / v[1]) for n, v in d.items()))
compacted = sum(n.get("compacted_bytes", 0)
                for n in srv.admin_get("/admin/v1/cluster")["nodes"])
if compacted == 0:
    fail("no node reports compacted bytes")

s3 = srv.s3(retries={"max_attempts": 3}, max_pool_connections=16)
for k in keys[:50] + keys[-50:]:
    if s3.get_object(Bucket="churn", Key=k)["Body"].read() != body(k, 1):
        fail("%s reads back wrong after compaction" % k)
if s3.get_object(Bucket="churn", Key="hot")["Body"].read() != body("hot", NOVER - 1):
    fail("the overwritten object reads back wrong after compaction")

# Tombstones: none collected while a node that may hold stale copies is down.
def metas():
    return sum(n.get("metas", 0)
               for n in srv.admin_get("/admin/v1/cluster")["nodes"] if n["up"])


srv.kill_gateway()
srv.set_gateway_config({"repair": {"scan_interval_ms": 1000, "tombstone_grace_ms": 2000}})
srv.restart_gateway()
s3 = srv.s3(retries={"max_attempts": 3}, max_pool_connections=16)
before = metas()
down = srv.nodes()[8]
srv.kill_node(down)
gone = keys[:200]
with concurrent.futures.ThreadPoolExecutor(8) as ex:
    list(ex.map(lambda k: s3.delete_object(Bucket="churn", Key=k), gone))
time.sleep(8)  # grace 2 s, scans every second
st = srv.admin_get("/admin/v1/repair")
if st["totals"]["tombstones_deleted"] != 0:
    fail("%d tombstones collected while %s (maybe holding stale copies) was down"
         % (st["totals"]["tombstones_deleted"], down))
r = srv._cluster("start", "9", srv.dir)  # restarts the node killed
if r.returncode != 0:
    fail("cluster.sh start: %s%s" % (r.stdout, r.stderr))
deadline = time.monotonic() + 90
while srv.admin_get("/admin/v1/repair")["totals"]["tombstones_deleted"] < len(gone):
    if time.monotonic() > deadline:
        fail("tombstones not collected after %s came back: %s"
             % (down, srv.admin_get("/admin/v1/repair")["totals"]))
    time.sleep(1)
after = metas()
if after > before - len(gone) * 4:
    fail("metadata records on the nodes: %d before the deletes, %d after collection" %
         (before, after))
for k in gone:
    e = None
    try:
        s3.head_object(Bucket="churn", Key=k)
    except s3.exceptions.ClientError as x:
        e = x.response["ResponseMetadata"]["HTTPStatusCode"]
    if e != 404:
        fail("%s came back after its tombstone was collected (HEAD: %s)" % (k, e))
if s3.get_object(Bucket="churn", Key=keys[500])["Body"].read() != body(keys[500], 1):
    fail("a live key reads back wrong after tombstone collection")
print("tombstones: %d collected, metadata records %d -> %d" % (
    srv.admin_get("/admin/v1/repair")["totals"]["tombstones_deleted"], before, after))
srv.stop()
print("OK: %d bytes compacted away" % compacted)
