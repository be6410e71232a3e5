#!/usr/bin/env python3
"""Peer authentication (inec/auth.h) against real `inec node` and `inec gateway`
processes, with raw sockets that speak the wire protocols from the outside:

1. a client without the cluster secret that sends the connection manager a
   well-formed request, or the node's device well-formed RPC frames, gets no
   byte back and the connection closed, and the node connects nowhere;
2. the same with a wrong secret (an unknown key, or a known key id with a
   forged proof): closed, one log line each;
3. with the right secret (this script's own HMAC, so 1-2 test the real
   protocol) the manager answers, yet never dials the address the request
   named; a client dials a node's device at the host it reached the node on,
   never at the host the node's answer names;
4. a node started with another secret cannot join a running cluster (the
   gateway sees it down, the node logs the refusals) and joins once given
   the cluster's secret;
5. rotation (stage, rotate, retire) with nodes and the gateway restarted in
   between keeps every PUT and GET working; afterwards the old key is refused.

usage: node_auth.py INEC"""
import hashlib
import hmac
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inec_server import InecCluster, _pid_alive  # noqa: E402

INEC = os.path.abspath(sys.argv[1])
TMP = tempfile.mkdtemp(prefix="inec-auth-")
procs = []


def fail(msg):
    for p in procs:
        if p.poll() is None:
            p.kill()
    sys.stderr.write("FAIL: %s\n" % msg)
    for name in os.listdir(TMP):
        if name.endswith(".log"):
            sys.stderr.write("--- %s ---\n%s\n" % (name, open(os.path.join(TMP, name)).read()[-3000:]))
    sys.exit(1)


# ---- the handshake, from the outside ----------------------------------------------

def keys(path):
    out = {}
    for line in open(path):
        if line.strip() and not line.startswith("#"):
            role, hexkey = line.split()
            out[role] = bytes.fromhex(hexkey)
    return out


def key_id(key):
    return hmac.new(key, b"inec key id", hashlib.sha256).digest()[:8]


def name(s):
    return s.encode().ljust(96, b"\0")


def transcript(key, label, ctx, m1, m2_nonce, m2_name):
    return hmac.new(key, label + ctx + b"\0" + m1 + m2_nonce + m2_name, hashlib.sha256).digest()


def make_m1(key, frm, to, kid=None):
    return b"INECAUT1" + (kid or key_id(key)) + os.urandom(32) + name(frm) + name(to)


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        got = s.recv(n - len(buf))
        if not got:
            break
        buf += got
    return buf


def closed_silently(s, within):
    """True if the peer closes the connection within `within` s having sent nothing."""
    s.settimeout(within)
    try:
        got = s.recv(65536)
    except socket.timeout:
        return False
    except ConnectionResetError:
        return True
    finally:
        s.close()
    return got == b""


def initiate(addr, key, ctx, to=None):
    """Our side of a correct handshake; returns the socket and the peer's name."""
    s = socket.create_connection(addr, timeout=10)
    m1 = make_m1(key, "auth-test", to or "%s:%d" % addr)
    s.sendall(m1)
    m2 = recv_exact(s, 160)
    if len(m2) != 160:
        fail("no M2 from %s (got %d bytes)" % (addr, len(m2)))
    if not hmac.compare_digest(m2[128:], transcript(key, b"R", ctx, m1, m2[:32], m2[32:128])):
        fail("the node's proof does not verify with the secret")
    s.sendall(transcript(key, b"I", ctx, m1, m2[:32], m2[32:128]))
    return s, m2[32:128].rstrip(b"\0").decode()


class Listener:
    """A TCP port that records who connects (and the first bytes they send)."""

    def __init__(self, host="127.0.0.1", port=0):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.got = []
        self.sock.settimeout(0.2)
        self.stop = False
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while not self.stop:
            try:
                c, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            c.settimeout(5)
            try:
                self.got.append(recv_exact(c, 240))
            except OSError:
                self.got.append(b"")
            c.close()

    def close(self):
        self.stop = True
        self.t.join()
        self.sock.close()


def start_node(tag, secret, data=None):
    log = open(os.path.join(TMP, tag + ".log"), "a")
    p = subprocess.Popen([INEC, "node", "--listen", "127.0.0.1:0", "--data",
                          data or os.path.join(TMP, tag), "--id", tag, "--timeout-ms", "3000",
                          "--secret", secret], stdout=subprocess.PIPE, stderr=log, text=True)
    procs.append(p)
    line = p.stdout.readline()
    if not line.startswith("listening "):
        fail("%s did not start" % tag)
    host, port = line.split()[1].rsplit(":", 1)
    for _ in range(100):
        text = open(log.name).read()
        if "device=tcp:" in text:
            dev = text.split("device=tcp:", 1)[1].split()[0].rsplit(":", 1)
            return p, (host, int(port)), (dev[0], int(dev[1])), log.name
        time.sleep(0.05)
    fail("%s logged no device address" % tag)


def rpc_frames(qpn):
    """Today's wire: an F_CREDIT and an F_SEND carrying a HEALTH request."""
    def frame(dst, src, op, length=0, addr=0):
        return (dst.to_bytes(4, "little") + src.to_bytes(4, "little") + bytes([op, 0]) +
                b"\0\0" + b"\0" * 12 + length.to_bytes(8, "little") + addr.to_bytes(8, "little"))
    rpc = ((0x50524e49).to_bytes(4, "little") + (9).to_bytes(4, "little") +
           (1).to_bytes(8, "little") + (0).to_bytes(8, "little") + (0).to_bytes(8, "little"))
    return frame(qpn, 7, 6, addr=16) + frame(qpn, 7, 3, len(rpc)) + rpc


def refusals(log):
    return open(log).read().count("refused")


# ---- 1-3: one node, raw clients ----------------------------------------------------

def raw_clients():
    secret = os.path.join(TMP, "a.secret")
    subprocess.run([INEC, "secret", "init", secret], check=True, capture_output=True)
    if oct(os.stat(secret).st_mode & 0o777) != "0o600":
        fail("the secret file is not 0600")
    key = keys(secret)["current"]
    node, cm, dev, log = start_node("a0", secret)
    bait = Listener()
    named = "tcp:127.0.0.1:%d" % bait.port

    # 1. No secret: the connection manager's request as it was, then RPC frames.
    s = socket.create_connection(cm, timeout=10)
    s.sendall(json.dumps({"addr": named, "qpn": 7}).encode() + b"\n")
    if not closed_silently(s, 10):
        fail("a request without the secret was answered or left open")
    for target in (cm, dev):
        s = socket.create_connection(target, timeout=10)
        s.sendall(b"".join(rpc_frames(q) for q in range(4)))
        if not closed_silently(s, 10):
            fail("RPC frames without the secret to %s were answered or left open" % (target,))

    # 2. Wrong secrets: an unknown key; our key id with a forged proof.
    other = os.urandom(32)
    for target, to in ((cm, "%s:%d" % cm), (dev, "tcp:%s:%d" % dev)):
        s = socket.create_connection(target, timeout=10)
        s.sendall(make_m1(other, "intruder", to))
        if not closed_silently(s, 10):
            fail("an unknown key was not refused at %s" % (target,))
        s = socket.create_connection(target, timeout=10)
        m1 = make_m1(other, "intruder", to, kid=key_id(key))
        s.sendall(m1)
        if len(recv_exact(s, 160)) != 160:
            fail("no M2 for a known key id")
        s.sendall(os.urandom(32) + json.dumps({"addr": named, "qpn": 7}).encode() + b"\n")
        if not closed_silently(s, 10):
            fail("a forged proof was not refused at %s" % (target,))
    # A peer that dialed someone else: its answer cannot be relayed to us.
    s = socket.create_connection(cm, timeout=10)
    s.sendall(make_m1(key, "relay", "10.1.2.3:%d" % cm[1]))
    if not closed_silently(s, 10):
        fail("a handshake meant for another address was accepted")
    time.sleep(0.5)
    if refusals(log) < 8:
        fail("expected a log line per refused connection, got %d" % refusals(log))

    # 3. The right secret: served, but the named address is never dialed.
    s, who = initiate(cm, key, b"cm")
    if who != "a0":
        fail("the node proved the name %r" % who)
    s.sendall(json.dumps({"addr": named, "qpn": 7}).encode() + b"\n")
    answer = json.loads(s.makefile().readline())
    if answer.get("id") != "a0" or "qpn" not in answer:
        fail("no answer with the secret: %s" % answer)
    time.sleep(2)
    s.close()
    if bait.got:
        fail("the node dialed an address a peer named (%d connections)" % len(bait.got))
    bait.close()
    node.send_signal(signal.SIGTERM)
    if node.wait(timeout=60) != 0:
        fail("node did not stop cleanly")


def client_dials_map_host():
    """A fake node whose answer names another host: the client must dial the
    host it reached the node on, with only the port taken from the answer."""
    secret = os.path.join(TMP, "a.secret")
    key = keys(secret)["current"]
    near = Listener("127.0.0.1")
    far = Listener("127.0.0.2", near.port)
    cm = socket.socket()
    cm.bind(("127.0.0.1", 0))
    cm.listen(1)
    cm.settimeout(30)
    stat = subprocess.Popen([INEC, "node", "stat", "--connect", "127.0.0.1:%d" % cm.getsockname()[1],
                             "--secret", secret], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    procs.append(stat)
    c, _ = cm.accept()
    c.settimeout(10)
    m1 = recv_exact(c, 240)
    nonce = os.urandom(32)
    m2 = nonce + name("fake") + transcript(key, b"R", b"cm", m1, nonce, name("fake"))
    c.sendall(m2)
    if recv_exact(c, 32) != transcript(key, b"I", b"cm", m1, nonce, name("fake")):
        fail("the client's proof is wrong")
    c.makefile().readline()
    c.sendall(json.dumps({"addr": "tcp:127.0.0.2:%d" % near.port, "qpn": 3, "id": "fake"})
              .encode() + b"\n")
    c.close()
    cm.close()
    for _ in range(100):
        if near.got:
            break
        time.sleep(0.1)
    stat.kill()
    stat.wait()
    near.close()
    far.close()
    if far.got or not near.got:
        fail("the client dialed the host the node named (near=%d far=%d)"
             % (len(near.got), len(far.got)))
    if near.got[0][144:240].rstrip(b"\0") != b"tcp:127.0.0.1:%d" % near.port:
        fail("the client's handshake names %r" % near.got[0][144:240])


# ---- 4-5: a cluster ------------------------------------------------------------------

def cluster_checks():
    srv = InecCluster(INEC, nodes=5)
    secret = os.path.join(srv.dir, "cluster.secret")
    if oct(os.stat(secret).st_mode & 0o777) != "0o600":
        srv.fail("cluster.sh made the secret with mode %o" % os.stat(secret).st_mode)

    def status(node):
        req = urllib.request.Request(srv.admin + "/admin/v1/cluster",
                                     headers={"Authorization": "Bearer " + srv.token})
        c = json.loads(urllib.request.urlopen(req, timeout=30).read())
        return next(n for n in c["nodes"] if n["id"] == node)["up"]

    def wait_up(node, want, secs=60):
        deadline = time.monotonic() + secs
        while status(node) != want:
            if time.monotonic() > deadline:
                srv.fail("node %s never became %s" % (node, "up" if want else "down"))
            time.sleep(0.5)

    def stop_node(node):
        pid = srv.pid(node)
        os.kill(pid, signal.SIGTERM)
        while _pid_alive(pid):
            time.sleep(0.05)

    objects = {}

    def roundtrip(tag):
        body = os.urandom(100000)
        st, _, _ = srv.request("PUT", "/auth/%s" % tag, body)
        if st != 200:
            srv.fail("PUT after %s: %d" % (tag, st))
        objects[tag] = body
        for k, v in objects.items():
            st, _, got = srv.request("GET", "/auth/%s" % k)
            if st != 200 or got != v:
                srv.fail("GET %s after %s: %d" % (k, tag, st))

    st, _, _ = srv.request("PUT", "/auth")
    if st != 200:
        srv.fail("create bucket: %d" % st)
    roundtrip("start")

    # 4. n4 with another secret cannot join; with the cluster's it does.
    stop_node("n4")
    wrong = os.path.join(srv.dir, "wrong.secret")
    subprocess.run([INEC, "secret", "init", wrong], check=True, capture_output=True)
    log = os.path.join(srv.dir, "n4.log")
    with open(log, "a") as out:
        p = subprocess.Popen([INEC, "node", "run", "--config", os.path.join(srv.dir, "cluster.json"),
                              "--id", "n4", "--secret", wrong], stdout=out, stderr=out,
                             start_new_session=True)
    with open(os.path.join(srv.dir, "n4.pid"), "w") as f:
        f.write(str(p.pid))
    wait_up("n4", False)
    deadline = time.monotonic() + 30
    while "not in our cluster secret" not in open(log).read():
        if time.monotonic() > deadline:
            srv.fail("n4 with another secret logged no refused connection")
        time.sleep(0.2)
    roundtrip("wrong-n4")
    stop_node("n4")
    p.wait()
    srv._cluster("start", "5", srv.dir)  # n4 again, with the cluster's secret
    wait_up("n4", True)
    roundtrip("n4-back")

    # 5. Rotation: every step keeps the cluster serving.
    old = keys(secret)["current"]
    for step, restart in (("stage", "n3"), ("rotate", "n2"), ("retire", None)):
        r = subprocess.run([INEC, "secret", step, secret], capture_output=True, text=True)
        if r.returncode != 0:
            srv.fail("inec secret %s: %s" % (step, r.stderr))
        roundtrip(step)
        if restart:  # new connections from and to it use the file as it is now
            stop_node(restart)
            srv._cluster("start", "5", srv.dir)
            wait_up(restart, True)
            roundtrip(step + "-" + restart)
    srv.kill_gateway()
    srv.restart_gateway()
    roundtrip("gateway-restarted")
    if keys(secret).get("current") == old or "previous" in keys(secret):
        srv.fail("the rotation left the file as %s" % keys(secret))
    addr = srv.config["map"]["nodes"][0]["address"].rsplit(":", 1)
    s = socket.create_connection((addr[0], int(addr[1])), timeout=10)
    s.sendall(make_m1(old, "old-key", "%s:%s" % tuple(addr)))
    if not closed_silently(s, 10):
        srv.fail("the retired key is still accepted")
    srv.stop()


try:
    raw_clients()
    client_dials_map_host()
    cluster_checks()
    print("ok")
finally:
    for p in procs:
        if p.poll() is None:
            p.kill()
    shutil.rmtree(TMP, ignore_errors=True)
