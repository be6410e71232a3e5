#!/usr/bin/env python3
"""A node whose disk stalls does not hold a PUT, on a multi-process cluster
(9 `inec node` + `inec gateway` over tcp, RS(6,3)): a stripe is acknowledged
once its write quorum of chunks is durable and the rest may be rebuilt from
them, after a grace for the chunks still out; a chunk left out is a degraded
write, queued for repair, and repaired once the disk is back.

The stall is a real one: the node's process goes into a blkio cgroup (v1)
whose write bandwidth on the data directory's disk is throttled to 4 KiB/s.
Its engine and its heartbeat still answer, so the failure detector never
judges it down: only the PUT's own wait can route around it. With a 20 s
peer timeout, each PUT must answer well inside it (an availability property,
not a speed figure: the bound is a quarter of the timeout), read back
intact, count as degraded, and after the throttle is lifted the repair
queue drains. Skipped (77) where no blkio cgroup can be made (not root, no
cgroup v1 blkio). argv[1]: the inec binary."""
import hashlib
import json
import os
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inec_server import InecCluster  # noqa: E402

PEER_TIMEOUT_MS = 20000
BLKIO = "/sys/fs/cgroup/blkio"


def whole_disk(dev):
    """MAJ:MIN of the disk holding dev (blkio throttles whole disks, not partitions)."""
    sysdir = os.path.realpath("/sys/dev/block/%d:%d" % (os.major(dev), os.minor(dev)))
    if os.path.exists(os.path.join(sysdir, "partition")):
        sysdir = os.path.dirname(sysdir)
    with open(os.path.join(sysdir, "dev")) as f:
        return f.read().strip()


cgroup = os.path.join(BLKIO, "inec-slow-%d" % os.getpid())
try:
    os.mkdir(cgroup)
except OSError as e:
    print("SKIP: no blkio cgroup (%s)" % e)
    sys.exit(77)

srv = InecCluster(sys.argv[1])
try:
    path = os.path.join(srv.dir, "cluster.json")
    cfg = json.load(open(path))
    cfg["map"]["peer_timeout_ms"] = PEER_TIMEOUT_MS
    json.dump(cfg, open(path, "w"), indent=2)
    srv.kill_gateway()
    srv.restart_gateway()
    disk = whole_disk(os.stat(srv.dir).st_dev)

    s3 = srv.s3(read_timeout=120)
    s3.create_bucket(Bucket="slow")
    s3.put_object(Bucket="slow", Key="warm", Body=os.urandom(1 << 20))

    def admin(p):
        return srv.admin_get(p)

    degraded0 = admin("/admin/v1/cluster")["degraded_writes"]
    victim = srv.nodes()[4]
    pid = srv.pid(victim)
    with open(os.path.join(cgroup, "blkio.throttle.write_bps_device"), "w") as f:
        f.write("%s 4096" % disk)
    with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
        f.write(str(pid))  # its threads, io_uring workers included, follow
    bodies = {}
    slowest = 0.0
    try:
        for i, size in enumerate([1 << 20, 3 << 20, 1 << 20]):
            key = "k%d" % i
            bodies[key] = os.urandom(size)
            t0 = time.monotonic()
            s3.put_object(Bucket="slow", Key=key, Body=bodies[key])
            took = time.monotonic() - t0
            slowest = max(slowest, took)
            if took >= PEER_TIMEOUT_MS / 4000:
                srv.fail("PUT %s took %.1f s with %s's disk stalled (peer timeout %d ms)"
                         % (key, took, victim, PEER_TIMEOUT_MS))
        # Until the write left behind answers, the node is shown late and
        # takes no new chunks.
        late = [n.get("late_writes") for n in admin("/admin/v1/cluster")["nodes"]
                if n["id"] == victim]
        if late != [1]:
            srv.fail("%s's chunk write left behind is not shown: late_writes %r" % (victim, late))
        req = urllib.request.Request(srv.admin + "/metrics",
                                     headers={"Authorization": "Bearer " + srv.token})
        metrics = urllib.request.urlopen(req, timeout=60).read().decode()
        if ('inec_node_late_writes{node="%s"} 1' % victim) not in metrics:
            srv.fail("inec_node_late_writes does not show %s's late write" % victim)
    finally:
        with open(os.path.join(cgroup, "blkio.throttle.write_bps_device"), "w") as f:
            f.write("%s 0" % disk)
        with open(os.path.join(BLKIO, "cgroup.procs"), "w") as f:
            f.write(str(pid))
    print("slowest PUT with %s's disk stalled: %.2f s" % (victim, slowest))
    for key, body in bodies.items():
        got = s3.get_object(Bucket="slow", Key=key)["Body"].read()
        if hashlib.sha256(got).digest() != hashlib.sha256(body).digest():
            srv.fail("%s read back wrong (%d bytes)" % (key, len(got)))
    degraded = admin("/admin/v1/cluster")["degraded_writes"] - degraded0
    if degraded < 1:
        srv.fail("no degraded write counted")
    deadline = time.monotonic() + 120
    while True:
        rp = admin("/admin/v1/repair")
        if rp["queue"]["stripes"] == 0 and rp["pending"] == 0 \
                and rp["totals"]["stripes_repaired"] >= 1:
            break
        if time.monotonic() > deadline:
            srv.fail("the degraded stripes were not repaired: %s" % rp)
        time.sleep(0.5)
    for key, body in bodies.items():
        got = s3.get_object(Bucket="slow", Key=key)["Body"].read()
        if got != body:
            srv.fail("%s read back wrong after the repair" % key)
    srv.stop()
finally:
    os.rmdir(cgroup)
print("ok")
