#!/usr/bin/env python3
"""`inec node` processes over tcp, driven by node_peer (another process):

1. a DEG encode ec-sent from node_peer lands in three nodes' sink vertices;
   after SIGTERM the stores hold it (scrubbed offline) and after a restart it
   reads back over RPC;
2. SIGTERM, then SIGKILL, a node in the middle of a stream of writes: it stops
   cleanly (exit 0) or dies, the writer's next call fails within a bound, and
   after a restart every acknowledged chunk reads back;
3. a node that hangs (SIGSTOP) makes a call fail with -ETIMEDOUT, not hang;
4. `--config` with a cluster map; bad configs fail with a message.

usage: node_tcp.py INEC NODE_PEER"""
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

INEC, PEER = sys.argv[1], sys.argv[2]
TMP = tempfile.mkdtemp(prefix="inec-nodetcp-")
ETIMEDOUT = 110
BOUND_MS = 15000  # a call's timeout (1-10 s) plus slack for a loaded machine
# The cluster secret nodes and node_peer prove to each other; cluster.json's
# default (cluster.secret beside it) is this same file.
SECRET = os.path.join(TMP, "cluster.secret")
subprocess.run([INEC, "secret", "init", SECRET], check=True, capture_output=True)
os.environ["INEC_SECRET_FILE"] = SECRET


def fail(msg):
    sys.exit(f"FAIL: {msg}")


def start(name, *extra):
    log = open(os.path.join(TMP, name + ".log"), "a")
    args = list(extra) or ["--listen", "127.0.0.1:0", "--data", os.path.join(TMP, name),
                           "--id", name, "--timeout-ms", "3000", "--secret", SECRET]
    p = subprocess.Popen([INEC, "node"] + args, stdout=subprocess.PIPE, stderr=log, text=True)
    line = p.stdout.readline()
    if not line.startswith("listening "):
        p.kill()
        fail(f"{name} did not start: {open(log.name).read()[-2000:]}")
    return p, line.split()[1]


def stop(p, sig=signal.SIGTERM):
    p.send_signal(sig)
    rc = p.wait(timeout=60)
    if sig == signal.SIGTERM and rc != 0:
        fail(f"node exited with {rc} on SIGTERM")


def peer(*args, check=True):
    r = subprocess.run([PEER] + [str(a) for a in args], capture_output=True, text=True,
                       timeout=120)
    if check and r.returncode != 0:
        fail(f"node_peer {args}: rc={r.returncode}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def encode_then_restart():
    names = ["n0", "n1", "n2"]
    nodes = [start(n) for n in names]
    peer("encode", ",".join(a for _, a in nodes))
    for p, _ in nodes:
        stop(p)
    for n in names:  # the store alone, the node gone: one verified chunk each
        out = subprocess.run([INEC, "node", "scrub", "--data", os.path.join(TMP, n)],
                             capture_output=True, text=True, timeout=60)
        if out.returncode != 0 or "checked 1" not in out.stdout.replace("  ", " "):
            fail(f"scrub {n}: {out.stdout} {out.stderr}")
    nodes = [start(n) for n in names]
    peer("verify", ",".join(a for _, a in nodes))
    for p, _ in nodes:
        stop(p)


def stop_mid_writes(sig):
    node, addr = start("w0")
    w = subprocess.Popen([PEER, "writes", addr, "1000000"], stdout=subprocess.PIPE, text=True)
    acked = -1
    for line in w.stdout:
        if line.startswith("ack "):
            acked = int(line.split()[1])
            if acked == 50:  # with writes still streaming
                node.send_signal(sig)
                if node.wait(timeout=60) != (0 if sig == signal.SIGTERM else -sig):
                    fail(f"node exited with {node.returncode} on signal {sig}")
        elif line.startswith("fail "):
            f = dict(kv.split("=") for kv in line.split()[2:])
            if int(f["ms"]) > BOUND_MS:
                fail(f"a call to a stopped node took {f['ms']} ms")
            break
    w.stdout.close()
    w.wait(timeout=60)
    if acked < 50:
        fail(f"writer stopped after {acked} acknowledged writes")
    node, addr = start("w0")
    peer("check", addr, acked + 1)
    return node, addr


def hung_node(node, addr):
    node.send_signal(signal.SIGSTOP)
    for _ in range(6000):  # the signal is asynchronous: wait until the node is stopped
        if open(f"/proc/{node.pid}/stat").read().rsplit(")", 1)[1].split()[0] == "T":
            break
        time.sleep(0.01)
    else:
        fail("the node did not stop on SIGSTOP")
    try:
        out = peer("health", addr, 1000)
        rc, ms = (int(kv.split("=")[1]) for kv in out.split()[:2])
        if rc != -ETIMEDOUT or ms > BOUND_MS:
            fail(f"call to a stopped node: {out}")
    finally:
        node.send_signal(signal.SIGCONT)
    out = peer("health", addr, 5000)
    if not out.startswith("rc=0") or "id=w0" not in out:
        fail(f"health after SIGCONT: {out}")
    stop(node)


def config_file():
    # A port below the ephemeral range (32768+), which outgoing connections use.
    while True:
        port = random.randrange(20000, 32000)
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
            break
        except OSError:
            pass
        finally:
            s.close()
    cfg = {"map": {"nodes": [{"id": "c0", "address": f"127.0.0.1:{port}", "domain": "rackA"},
                             {"id": "c1", "address": "127.0.0.1:1", "domain": "rackB"}]},
           "nodes": {"c0": {"data": os.path.join(TMP, "c0"), "capacity": 1 << 30}}}
    path = os.path.join(TMP, "cluster.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    node, addr = start("c0", "--config", path, "--id", "c0")
    if addr != f"127.0.0.1:{port}":
        fail(f"config address not used: {addr}")
    out = peer("health", addr, 5000)
    if "id=c0 domain=rackA" not in out:
        fail(f"health: {out}")
    stop(node)
    for args, want in [(["--config", path, "--id", "zz"], "no node 'zz'"),
                       (["--config", path, "--id", "c1"], "no data directory")]:
        r = subprocess.run([INEC, "node"] + args, capture_output=True, text=True, timeout=30)
        if r.returncode == 0 or want not in r.stderr:
            fail(f"inec node {args}: rc={r.returncode} {r.stderr}")


try:
    encode_then_restart()
    stop(*stop_mid_writes(signal.SIGTERM)[:1])
    hung_node(*stop_mid_writes(signal.SIGKILL))
    config_file()
    print("ok")
finally:
    shutil.rmtree(TMP, ignore_errors=True)
