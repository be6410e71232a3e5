#!/usr/bin/env python3
"""Inline objects on a 9-process tcp cluster (RS(5,3): 7 metadata homes, W = 4):

 1. small objects (<= inline_max, 128 KiB) write no chunk on any node; each of
    their 7 homes holds a distinct shard (the control API asks every home);
    an object one byte over inline_max, and a bigger one, go to stripes;
 2. listing shows their sizes and ETags; CopyObject, and a metadata-only copy
    onto the same key, read back exact;
 3. 3 nodes SIGKILLed (M): every object still reads exact, ranges too;
 4. PUTs while they are down, then the nodes restart: the gateway's heal of
    the keys its writes left lacking, or (a gateway restarted since, with no
    notes, in doubt until then: reads ask every home) its sweep makes every
    home hold its shard again; out of doubt, reads ask R homes;
 5. a node removed for good: the scan moves the records with their shards,
    and with 3 more nodes down every inline object still reads exact.
argv[1]: the inec binary."""
import hashlib
import json
import os
import random
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inec_server import InecCluster  # noqa: E402

# RS(5,3): stripes of 8 chunks, so a node can be removed from the 9; M = 3 as
# with RS(6,3), so C = 7 homes and RS(4,3) inline.
srv = InecCluster(sys.argv[1], env={"INEC_PROFILE": "rs:k=5,m=3"},
                  gateway={"repair": {"scan_interval_ms": 3600000}})
s3 = srv.s3()
rng = random.Random(11)
BUCKET = "inline"


def fail(msg):
    srv.fail(msg)


def chunks():
    return sum(n["chunks"] for n in srv.admin_get("/admin/v1/cluster")["nodes"] if n["up"])


def homes(key):
    view = srv.admin_get("/admin/v1/objects/%s/%s" % (BUCKET, key))
    if "inline" not in view:
        fail("%s is not inline: %s" % (key, view))
    if view["stripes"]:
        fail("%s is inline and has stripes: %s" % (key, view))
    return view["inline"]["homes"]


def whole(key):
    """Every home holds a good shard of the record, no two the same."""
    h = homes(key)
    return all(x["state"] == "ok" for x in h) and len({x["shard"] for x in h}) == len(h) == 7


def wait_whole(keys, what, timeout=120):
    deadline = time.monotonic() + timeout
    while True:
        bad = [k for k in keys if not whole(k)]
        if not bad:
            return
        if time.monotonic() > deadline:
            fail("%s: %s still lack shards: %s" % (what, bad[0], homes(bad[0])))
        time.sleep(0.5)


def metadata():
    return srv.admin_get("/admin/v1/cluster")["metadata"]


def wait_metadata_clear(field, what, timeout):
    """Waits until the gateway's metadata `field` is 0 / false."""
    deadline = time.monotonic() + timeout
    while metadata()[field]:
        if time.monotonic() > deadline:
            fail("%s %d s after the nodes came back" % (what, timeout))
        time.sleep(0.2)


def post(path, body):
    req = urllib.request.Request(srv.admin + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Authorization": "Bearer " + srv.token})
    try:
        return json.loads(urllib.request.urlopen(req, timeout=60).read() or b"{}")
    except urllib.error.HTTPError as e:
        fail("POST %s: %d %s" % (path, e.code, e.read().decode(errors="replace")))


def scan():
    """Asks for a scan and waits until one more ended."""
    scans = srv.admin_get("/admin/v1/repair")["scan"]["scans"]
    post("/admin/v1/repair", {"scan": True})
    deadline = time.monotonic() + 120
    while srv.admin_get("/admin/v1/repair")["scan"]["scans"] <= scans:
        if time.monotonic() > deadline:
            fail("the scan requested did not run")
        time.sleep(0.3)


def get(key):
    return s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()


s3.create_bucket(Bucket=BUCKET)
objs = {}
before = chunks()
for i, size in enumerate([1, 63, 64, 1000, 4096, 5000, 12345, 65536, 131072]):
    objs["small-%d" % i] = os.urandom(size)
for key, body in objs.items():
    s3.put_object(Bucket=BUCKET, Key=key, Body=body)
if chunks() != before:
    fail("small PUTs wrote chunks: %d before, %d after" % (before, chunks()))
wait_whole(objs, "after the PUTs", timeout=10)
print("small objects: no chunk written, 7 homes hold 7 distinct shards", flush=True)

for key, size in (("over", 131073), ("big", 300000)):
    objs[key] = os.urandom(size)
    s3.put_object(Bucket=BUCKET, Key=key, Body=objs[key])
    view = srv.admin_get("/admin/v1/objects/%s/%s" % (BUCKET, key))
    if "inline" in view or not view["stripes"]:
        fail("%s (%d bytes, over inline_max) is not in stripes: %s" % (key, size, view))
if chunks() < before + 16:
    fail("the two objects over inline_max wrote %d chunks" % (chunks() - before))

listed = {o["Key"]: o for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]}
for key, body in objs.items():
    o = listed.get(key)
    if not o or o["Size"] != len(body) or o["ETag"].strip('"') != hashlib.md5(body).hexdigest():
        fail("listing of %s: %s" % (key, o))

s3.copy_object(Bucket=BUCKET, Key="copy", CopySource="%s/small-5" % BUCKET)
objs["copy"] = objs["small-5"]
s3.copy_object(Bucket=BUCKET, Key="copy", CopySource="%s/copy" % BUCKET,
               MetadataDirective="REPLACE", Metadata={"color": "blue"})
if get("copy") != objs["copy"]:
    fail("CopyObject of an inline object read back different bytes")
if s3.head_object(Bucket=BUCKET, Key="copy")["Metadata"] != {"color": "blue"}:
    fail("the metadata-only copy lost its metadata")
wait_whole(["copy"], "after the copies", timeout=10)
print("listing, CopyObject and a metadata-only copy: exact", flush=True)

victims = ["n1", "n4", "n7"]
for v in victims:
    srv.kill_node(v)
for key, body in objs.items():
    if get(key) != body:
        fail("%s read back different bytes with %s down" % (key, victims))
    first = len(body) // 3
    r = s3.get_object(Bucket=BUCKET, Key=key, Range="bytes=%d-%d" % (first, first + 40))
    if r["Body"].read() != body[first:first + 41]:
        fail("range of %s with %s down" % (key, victims))
print("3 nodes down: every object reads exact", flush=True)

degraded = {}
for i in range(12):
    degraded["down-%d" % i] = os.urandom(rng.randint(1, 16384))
degraded["small-2"] = os.urandom(777)  # an overwrite
for key, body in degraded.items():
    s3.put_object(Bucket=BUCKET, Key=key, Body=body)
    objs[key] = body
lacking = [k for k in degraded if not whole(k)]
if not lacking:
    fail("no object written with 3 nodes down lacks a shard: the check is blind")
# The gateway noted each key a write left lacking on a home: it heals them
# once their homes are back. No view of them until it is done: a view reads
# the record, and a read repairs the homes it asked.
meta = metadata()
if meta["heal_pending"] < len(degraded):
    fail("%d heals pending for %d keys written with 3 nodes down" % (meta["heal_pending"],
                                                                     len(degraded)))
repairs = meta["read_repairs"]
srv.restart_nodes()
wait_metadata_clear("heal_pending", "heals still pending", 60)
# 7 homes of 9 nodes: each key has at least one of the 3 restarted nodes.
done = metadata()["read_repairs"] - repairs
if done < len(degraded):
    fail("the heal repaired %d home copies, want >= %d" % (done, len(degraded)))
wait_whole(list(degraded), "heal", timeout=10)
print("heal: every home holds its shard again", flush=True)

# A gateway restarted after such writes has no notes: it is in doubt, and its
# reads ask every home, until its sweep found every inline record on every
# home, which heals them once the nodes are back.
for v in victims:
    srv.kill_node(v)
unnoted = {"unnoted-%d" % i: os.urandom(rng.randint(1, 16384)) for i in range(7)}
for key, body in unnoted.items():
    s3.put_object(Bucket=BUCKET, Key=key, Body=body)
    objs[key] = body
srv.kill_gateway()
srv.restart_gateway()
if not metadata()["doubt"]:
    fail("a gateway restarted with 3 nodes down is not in doubt")
srv.restart_nodes()
# No view of those keys before the sweep: the view reads the record, and a
# read repairs the homes it asked.
wait_metadata_clear("doubt", "still in doubt", 120)
# 7 homes of 9 nodes: each key has at least one of the 3 restarted nodes.
meta = metadata()
if meta["read_repairs"] < len(unnoted):
    fail("the sweep repaired %d home copies, want >= %d" % (meta["read_repairs"], len(unnoted)))
wait_whole(list(unnoted), "the sweep", timeout=10)
print("sweep: every home holds its shard again", flush=True)
# Out of doubt, a read asks R of the C homes (the rest only when one is late).
calls = metadata()["read_calls"]
for key in list(unnoted)[:5] * 4:
    s3.head_object(Bucket=BUCKET, Key=key)
calls = metadata()["read_calls"] - calls
if calls > 20 * 6:
    fail("20 HEADs out of doubt asked %d homes, want about 20 x R" % calls)
for key, body in objs.items():
    if get(key) != body:
        fail("%s read back different bytes after the sweep" % key)

# 5. A node removed for good: the scan moves every record to the homes left,
# inline ones with their shards (no read in between), so with 3 more nodes
# down each inline object still has k = 4 good shards among its live homes.
srv.kill_node("n0")
post("/admin/v1/nodes/n0/remove", {})
scan()
scan()  # one that began before the removal may not have moved the records
for v in ("n2", "n5", "n8"):
    srv.kill_node(v)
for key, body in objs.items():
    if key not in ("over", "big") and get(key) != body:
        fail("%s read back different bytes after n0 left and 3 more died" % key)
print("a node removed, 3 more down: every inline object reads exact", flush=True)
srv.stop()
print("OK")
