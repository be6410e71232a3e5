#!/usr/bin/env python3
"""A frozen node holds no request, on a multi-process cluster (9 `inec node`
+ `inec gateway` over tcp, RS(6,3)): metadata rounds return once W (writes)
or R (reads) of the C = 7 homes answered, not after every home did (the
homes still out finish in the background), and a stripe write returns once
its write quorum stored its chunks and the grace passed, though the frozen
node's transport never takes the chunk sent to it.

With a 20 s peer timeout and a slow heartbeat (so the failure detector does
not route around it for a while), one node is SIGSTOPped and requests that
are metadata only are made on keys whose homes include it (7 of 9 nodes are
homes of any key; twelve keys): GetObject (inline bodies, so metadata
only too), CreateBucket, PutObjectAcl, DeleteObject.
Then PutObject of 1 MiB objects, which go to stripes on all 9 nodes.
Each must answer well inside the peer timeout (an availability property, not
a speed figure: the bound is a quarter of the timeout), and after the node
is resumed every change must read back. (A node whose disk stalls is
put_slow_disk.py.) argv[1]: the inec binary."""
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inec_server import InecCluster  # noqa: E402

PEER_TIMEOUT_MS = 20000

srv = InecCluster(sys.argv[1])
path = os.path.join(srv.dir, "cluster.json")
cfg = json.load(open(path))
cfg["map"]["peer_timeout_ms"] = PEER_TIMEOUT_MS
cfg["map"]["heartbeat_ms"] = 5000
json.dump(cfg, open(path, "w"), indent=2)
srv.kill_gateway()
srv.restart_gateway()

s3 = srv.s3(read_timeout=120)
s3.create_bucket(Bucket="frozen")
keys = ["k%d" % i for i in range(12)]
for key in keys:
    s3.put_object(Bucket="frozen", Key=key, Body=b"x" * 4096)
big = {"big%d" % i: os.urandom(1 << 20) for i in range(3)}
s3.put_object(Bucket="frozen", Key="warm", Body=os.urandom(1 << 20))  # an encode session
victim = srv.nodes()[4]
pid = srv.pid(victim)
slowest = 0.0


def timed(what, fn):
    global slowest
    t0 = time.monotonic()
    fn()
    took = time.monotonic() - t0
    slowest = max(slowest, took)
    if took >= PEER_TIMEOUT_MS / 4000:
        srv.fail("%s took %.1f s with %s stopped (peer timeout %d ms): held by a frozen home"
                 % (what, took, victim, PEER_TIMEOUT_MS))


os.kill(pid, signal.SIGSTOP)
try:
    for key in keys:  # a read asks R homes, and the rest once one is late
        timed("GetObject " + key,
              lambda: s3.get_object(Bucket="frozen", Key=key)["Body"].read() == b"x" * 4096
              or srv.fail("GetObject %s read back different bytes" % key))
    for i in range(3):
        timed("CreateBucket b%d" % i, lambda: s3.create_bucket(Bucket="frozen-b%d" % i))
    for key in keys[:6]:
        timed("PutObjectAcl " + key,
              lambda: s3.put_object_acl(Bucket="frozen", Key=key, ACL="public-read"))
    for key in keys[6:]:
        timed("DeleteObject " + key, lambda: s3.delete_object(Bucket="frozen", Key=key))
    for key, body in big.items():  # the first is written around the frozen node, by the grace
        timed("PutObject " + key, lambda: s3.put_object(Bucket="frozen", Key=key, Body=body))
finally:
    os.kill(pid, signal.SIGCONT)
print("slowest request with %s stopped: %.2f s" % (victim, slowest))
for i in range(3):
    s3.head_bucket(Bucket="frozen-b%d" % i)
for key in keys[:6]:
    grants = s3.get_object_acl(Bucket="frozen", Key=key)["Grants"]
    if not any(g["Grantee"].get("URI", "").endswith("AllUsers") for g in grants):
        srv.fail("the ACL of %s was lost: %r" % (key, grants))
for key, body in big.items():
    if s3.get_object(Bucket="frozen", Key=key)["Body"].read() != body:
        srv.fail("%s read back different bytes" % key)
left = [o["Key"] for o in s3.list_objects_v2(Bucket="frozen").get("Contents", [])
        if o["Key"] in keys]
if sorted(left) != keys[:6]:
    srv.fail("after the deletes the bucket lists %r" % left)
srv.stop()
print("ok")
