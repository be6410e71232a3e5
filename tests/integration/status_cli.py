#!/usr/bin/env python3
"""`inec status` against real gateways. An `inec server`: found from its data
directory alone (endpoint and token in credentials.json), HEALTH_OK with nine
nodes up in the table and in --json, rates that show uploads, the pool's
objects and bytes after a scan (stored bytes = the chunks the object layouts
name), -w redrawing, and one clear line and exit 1 for a wrong token or a
gateway that is not there. `inec gateway` in front of nine node processes:
one node SIGKILLed is HEALTH_WARN naming it and, after a scan, every stripe of
the pool degraded; that node back with its clock 3 s ahead
(INEC_CLOCK_OFFSET_MS) is HEALTH_WARN CLOCK_SKEW naming it; four nodes down
are HEALTH_ERR (more lost than RS(6,3) tolerates). The server's threads are
named by role, and keep it. argv[1]: the inec binary."""
import atexit
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inec_server import InecCluster, InecServer  # noqa: E402

import boto3
from botocore.config import Config

INEC = sys.argv[1]


def status(*args, env=None):
    e = dict(os.environ)
    for k in ("INEC_ADMIN_ENDPOINT", "INEC_ADMIN_TOKEN", "INEC_DATA"):
        e.pop(k, None)
    e.update(env or {})
    return subprocess.run([INEC, "status", *args], capture_output=True, text=True, timeout=60,
                          env=e)


def admin(*args):
    return subprocess.run([INEC, "admin", *args], capture_output=True, text=True, timeout=60)


def scanned_pool(srv, auth, cond, what):
    """Asks for scans until the default pool's figures meet cond; returns the pool."""
    deadline = time.monotonic() + 90
    while True:
        r = admin("repair", "scan", *auth)
        expect(srv, r.returncode == 0, "inec admin repair scan", r)
        time.sleep(1)
        doc = json.loads(status("--json", *auth).stdout)
        pool = [p for p in doc["cluster"]["pools"] if p["name"] == "default"][0]
        if cond(pool):
            return pool
        expect(srv, time.monotonic() < deadline, "%s: pool %r" % (what, pool))


def expect(srv, cond, msg, r=None):
    if not cond:
        srv.fail(msg + ("" if r is None else "\nrc=%d\nstdout:\n%s\nstderr:\n%s"
                        % (r.returncode, r.stdout, r.stderr)))


def s3_client(srv):
    return boto3.client("s3", endpoint_url=srv.endpoint, region_name="us-east-1",
                        aws_access_key_id=srv.access_key, aws_secret_access_key=srv.secret_key,
                        config=Config(signature_version="s3v4", retries={"max_attempts": 1},
                                      s3={"addressing_style": "path"}))


srv = InecServer(INEC)
atexit.register(lambda: srv.proc.poll() is None and srv.proc.kill())  # a traceback, too
r = status("--data", srv.data)
expect(srv, r.returncode == 0 and r.stdout.startswith("health: HEALTH_OK"),
       "status from the data directory", r)
expect(srv, r.stdout.count(" up ") >= 9 and "rs:k=6,m=3" in r.stdout, "nodes and pools", r)
# The environment and flags name the gateway as well as the data directory does.
r = status(env={"INEC_ADMIN_ENDPOINT": srv.admin, "INEC_ADMIN_TOKEN": srv.token})
expect(srv, r.returncode == 0 and "HEALTH_OK" in r.stdout, "status from the environment", r)
r = status("--json", "--endpoint", srv.admin, "--token", srv.token)
doc = json.loads(r.stdout)
expect(srv, doc["health"]["status"] == "HEALTH_OK" and doc["health"]["checks"] == []
       and len(doc["cluster"]["nodes"]) == 9 and all(n["up"] for n in doc["cluster"]["nodes"]),
       "status --json", r)

s3 = s3_client(srv)
s3.create_bucket(Bucket="status")
for i in range(4):
    s3.put_object(Bucket="status", Key="k%d" % i, Body=os.urandom(1 << 20))
# Threads carry their role's name (top -H, perf): these live as long as the server.
task = "/proc/%d/task" % srv.proc.pid
roles = set()
for t in os.listdir(task):
    try:
        roles.add(open(os.path.join(task, t, "comm")).read().strip())
    except FileNotFoundError:  # a thread that ended meanwhile
        pass
missing = {"node-loop", "store-writer", "node-compactor", "soft-engine", "fanout", "gc",
           "detector"} - roles
expect(srv, not missing, "threads named %s, none %s" % (sorted(roles), sorted(missing)))
# A stripe or a vertex run on a thread that has another role (the request's,
# a node worker) leaves it that role's name: none of the passing roles stays.
stale = roles & {"put-stripe", "node-vertex"}
expect(srv, not stale, "threads named %s after the uploads ended" % sorted(stale))
deadline = time.monotonic() + 30
while True:
    doc = json.loads(status("--json", "--data", srv.data).stdout)
    rates = doc["rates"]
    if rates["requests_per_s"] > 0 and rates["received_bytes_per_s"] > 0:
        break
    expect(srv, time.monotonic() < deadline, "no rates after uploads: %r" % rates)
    time.sleep(0.5)
r = status("--data", srv.data)
expect(srv, "requests/s" in r.stdout and "MiB" in r.stdout, "rates and sizes in human units", r)

# The pool's figures come from a complete scan: 4 objects of 1 MiB, stored as
# the chunks (parity included) their layouts name.
auth = ("--endpoint", srv.admin, "--token", srv.token)
pool = scanned_pool(srv, auth, lambda p: p.get("objects") == 4, "4 objects")
stored = 0
for i in range(4):
    r = admin("object", "status", "k%d" % i, "--json", *auth)
    expect(srv, r.returncode == 0, "inec admin object", r)
    stored += sum(st["chunk_len"] * len(st["chunks"]) for st in json.loads(r.stdout)["stripes"])
expect(srv, pool["logical_bytes"] == 4 << 20 and pool["stored_bytes"] == stored
       and stored >= (4 << 20) * 9 // 6 and pool["degraded_stripes"] == 0
       and 0 <= pool["usage_age_s"] < 60, "pool figures %r, chunks %d" % (pool, stored))
r = status(*auth)
expect(srv, "objects and bytes as of the last scan" in r.stdout
       and any(ln.split()[:1] == ["default"] and " 4 " in ln and "4.0 MiB" in ln
               for ln in r.stdout.splitlines()), "pools table with objects and bytes", r)
r = admin("pools", "show", "default", *auth)
expect(srv, r.returncode == 0 and "4 objects, 4.0 MiB of data" in r.stdout
       and "0 degraded stripes" in r.stdout, "inec admin pools show", r)
m = urllib.request.urlopen(urllib.request.Request(
    srv.admin + "/metrics", headers={"Authorization": "Bearer " + srv.token}), timeout=30).read()
m = m.decode()
expect(srv, 'inec_pool_objects{pool="default"} 4\n' in m
       and 'inec_pool_stored_bytes{pool="default"} %d\n' % stored in m
       and 'inec_pool_degraded_stripes{pool="default"} 0\n' in m
       and 'inec_node_clock_offset_seconds{node="n0"}' in m, "pool and clock metrics:\n" + m)

# Errors: a wrong token, nothing listening, no token at all.
r = status("--endpoint", srv.admin, "--token", "wrong")
expect(srv, r.returncode == 1 and "refused the admin token" in r.stderr and not r.stdout,
       "a wrong token", r)
s = socket.socket()
s.bind(("127.0.0.1", 0))
free = s.getsockname()[1]
s.close()
r = status("--endpoint", "http://127.0.0.1:%d" % free, "--token", "x")
expect(srv, r.returncode == 1 and "cannot reach the control API" in r.stderr, "no gateway", r)
r = status("--data", os.path.join(srv.dir, "nowhere"))
expect(srv, r.returncode == 2 and "no admin token" in r.stderr, "no token", r)

# -w redraws until interrupted.
p = subprocess.Popen([INEC, "status", "-w", "0.5", "--data", srv.data], stdout=subprocess.PIPE,
                     text=True)
out, deadline = "", time.monotonic() + 30  # each redraw asks every node: slow under load
while out.count("health: HEALTH_OK") < 2 and time.monotonic() < deadline:
    line = p.stdout.readline()
    if not line:
        break
    out += line
p.terminate()
out += p.communicate(timeout=30)[0]
expect(srv, out.count("health: HEALTH_OK") >= 2, "-w printed:\n" + out)
srv.stop()

cl = InecCluster(INEC)
nodes = cl.nodes()
auth = ("--endpoint", cl.admin, "--token", cl.token)
s3 = s3_client(cl)
s3.create_bucket(Bucket="status")
for i in range(6):  # one stripe each, a chunk on every node (RS(6,3), 1 MiB chunks, 9 nodes)
    s3.put_object(Bucket="status", Key="k%d" % i, Body=os.urandom(1 << 20))
scanned_pool(cl, auth, lambda p: p.get("objects") == 6 and p["degraded_stripes"] == 0, "6 objects")
cl.kill_node(nodes[2])
r = status(*auth)
expect(cl, r.returncode == 0 and r.stdout.startswith("health: HEALTH_WARN")
       and "NODE_DOWN: 1 of 9 nodes down: %s" % nodes[2] in r.stdout, "one node down", r)
scanned_pool(cl, auth, lambda p: p["degraded_stripes"] == 6, "6 stripes degraded")

# The node back with a clock 3 s ahead: CLOCK_SKEW names it, the table shows it.
cl.env["INEC_CLOCK_OFFSET_MS"] = "3000"
r = cl._cluster("start", "9", cl.dir)  # starts only the node that is not running
del cl.env["INEC_CLOCK_OFFSET_MS"]
expect(cl, r.returncode == 0, "restarting %s: %s%s" % (nodes[2], r.stdout, r.stderr))
deadline = time.monotonic() + 60
while True:
    r = status(*auth)
    if "CLOCK_SKEW" in r.stdout:
        break
    expect(cl, time.monotonic() < deadline, "no CLOCK_SKEW for a node 3 s ahead", r)
    time.sleep(0.5)
# The offset is measured (a round trip's error): "+2.999 s" and "+3.001 s" both name it.
skew = re.search(r"CLOCK_SKEW: clocks off the gateway's by more than 0\.500 s on 1 of 9 nodes: "
                 r"(\S+) \+(\d+\.\d+) s", r.stdout)
expect(cl, r.stdout.startswith("health: HEALTH_WARN") and skew and skew.group(1) == nodes[2]
       and abs(float(skew.group(2)) - 3) < 0.25, "CLOCK_SKEW naming the node", r)
doc = json.loads(status("--json", *auth).stdout)
offsets = {n["id"]: n.get("clock_offset_s") for n in doc["cluster"]["nodes"]}
expect(cl, abs(offsets[nodes[2]] - 3) < 0.25
       and all(abs(v) < 0.25 for k, v in offsets.items() if k != nodes[2]),
       "clock offsets %r" % offsets)
cl.kill_node(nodes[2])
for n in nodes[3:6]:
    cl.kill_node(n)
r = status("--endpoint", cl.admin, "--token", cl.token, "--json")
doc = json.loads(r.stdout)
codes = {c["code"]: c["severity"] for c in doc["health"]["checks"]}
expect(cl, doc["health"]["status"] == "HEALTH_ERR" and codes.get("POOL_UNAVAILABLE") == "ERR"
       and codes.get("NODE_DOWN") == "WARN", "four nodes down", r)
cl.stop()
print("status_cli: ok")
