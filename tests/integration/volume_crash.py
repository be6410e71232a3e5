#!/usr/bin/env python3
"""The write hole of delta-parity volume updates, with data and parity NODES
dying at every step of an update (the gateway's own crash hooks are tested by
volume_nbd.py cluster).

Ten `inec node` processes and `inec gateway` (scripts/cluster.sh, RS(6,3)),
a volume created with --update delta, filled through libnbd. For each step of
the update DEG on a node (INEC_NODE_CRASH_FILE, node/service.c):
  update-data-{run,computed,stored}      the node holding the written chunk
  update-parity-{run,computed,stored}    a node holding a parity
a partial write of one data chunk of a fresh stripe makes exactly that node
SIGKILL itself there. Then:
  - with the node dead, every stripe reads its reference or fails (only the
    stripe being written may fail; its written range may read old or new);
  - the node restarts; the same client writes into another chunk of the
    stripe (the gateway first recovers the interrupted update: rewrites the
    stripe from its data chunks), and the stripe reads old-or-new in the first
    write's range, the rest exact;
  - parity is consistent: for each parity p of the stripe, the holders of the
    written chunk and of the two other parities are killed, so the written
    chunk can only be rebuilt through p: the stripe still reads exact (a
    rebuilt chunk is checked against the stripe's CRC, so a stale parity
    fails the read instead of passing).
argv[1]: the inec binary."""
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inec_server import InecCluster, _pid_alive  # noqa: E402

try:
    import nbd
except ImportError:
    sys.exit("libnbd's Python bindings are missing: run scripts/deps.sh (python3-libnbd)")

INEC = sys.argv[1]
TMP = tempfile.mkdtemp(prefix="inec-crash-")
TRIGGER, PAUSE = os.path.join(TMP, "step"), os.path.join(TMP, "pause")
FIRED = TRIGGER + ".fired"
srv = InecCluster(INEC, nodes=10,
                  env={"INEC_NODE_CRASH_FILE": TRIGGER, "INEC_VOLUME_PAUSE_FILE": PAUSE},
                  gateway={"nbd_listen": "127.0.0.1:0"})


def fail(msg):
    srv.fail(msg)


def field(prefix):
    for line in srv.banner.splitlines():
        if line.startswith(prefix):
            return line[len(prefix):].strip()
    fail("banner lacks %r" % prefix)


NBD_PORT = int(field("NBD (block volumes):").split()[0].rsplit(":", 1)[1])


def cli(*args):
    r = subprocess.run([INEC, "volume", *args, "--endpoint", srv.admin, "--token", srv.token,
                        "--json"], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        fail("inec volume %s: exit %d\n%s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
    return json.loads(r.stdout)


vol = cli("create", "crash1", "--size", str(12 * 384 << 10), "--update", "delta")
STRIPE, SIZE, EXPORT = vol["stripe_bytes"], vol["size"], vol["export"]
UNIT = STRIPE // 6
BUCKET = "inec-vol-crash1"


def connect():
    h = nbd.NBD()
    h.connect_uri("nbd://127.0.0.1:%d/%s" % (NBD_PORT, EXPORT))
    return h


def node_states():
    return {n["id"]: n["peer_state"] for n in srv.admin_get("/admin/v1/cluster")["nodes"]}


def wait_states(nodes, state):
    deadline = time.monotonic() + 60
    while True:
        st = node_states()
        if all(st[n] == state for n in nodes):
            return
        if time.monotonic() > deadline:
            fail("nodes %s not %s: %s" % (nodes, state, st))
        time.sleep(0.1)


def chunks(s):
    return srv.admin_get("/admin/v1/objects/%s/%016x" % (BUCKET, s))["stripes"][0]["chunks"]


def layout(s):
    """chunk index -> node id of stripe s's object."""
    return {c["index"]: c["node"] for c in chunks(s)}


def wait_whole(s, what):
    """Until every chunk of stripe s is stored (a write with a node down left
    one missing: the repair queue rebuilds it)."""
    deadline = time.monotonic() + 120
    while True:
        cs = chunks(s)
        if all(c["state"] == "ok" for c in cs):
            return
        if time.monotonic() > deadline:
            fail("%s: stripe %d not whole again: %s" % (what, s, cs))
        time.sleep(0.2)


def kill(nodes):
    pids = [srv.pid(n) for n in nodes]
    for p in pids:
        os.kill(p, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while any(_pid_alive(p) for p in pids):
        if time.monotonic() > deadline:
            fail("nodes %s outlived SIGKILL" % nodes)
        time.sleep(0.05)


def dead_nodes():
    return [n for n in srv.nodes() if not _pid_alive(srv.pid(n))]


rng = random.Random(13)
ref = bytearray(rng.randbytes(SIZE))
h = connect()
for off in range(0, SIZE, 1 << 20):
    h.pwrite(bytes(ref[off:off + (1 << 20)]), off)
h.flush()


def read_stripe(handle, s):
    return handle.pread(STRIPE, s * STRIPE)


def check_stripe(handle, s, what, pending=None):
    """Stripe s reads its reference; inside `pending` (off, old, new) old or new."""
    got = read_stripe(handle, s)
    want = ref[s * STRIPE:(s + 1) * STRIPE]
    if pending:
        off, old, new = pending
        a, b = off - s * STRIPE, off - s * STRIPE + len(new)
        if got[a:b] not in (old, new):
            fail("%s: stripe %d's written range is neither old nor new" % (what, s))
        want = bytes(want[:a]) + got[a:b] + bytes(want[b:])
    if got != want:
        bad = next(i for i in range(STRIPE) if got[i] != want[i])
        fail("%s: stripe %d differs from the reference at byte %d" % (what, s, bad))


STEPS = ["update-%s-%s" % (role, when) for role in ("data", "parity")
         for when in ("run", "computed", "stored")]
matrix = []
for i, step in enumerate(STEPS):
    s = 1 + i  # a stripe of its own, stored whole, all nodes up: a delta update
    wait_states(srv.nodes(), "up")
    with open(TRIGGER, "w") as f:
        f.write(step + "\n")
    off = s * STRIPE + UNIT + 1000  # inside data chunk 1
    new = rng.randbytes(3000)
    old = bytes(ref[off:off + len(new)])
    before = layout(s)
    try:
        h.pwrite(new, off)
        h.flush()
        acked = True
    except nbd.Error:
        acked = False
    if not os.path.exists(FIRED) or os.path.exists(TRIGGER):
        fail("the %s hook did not fire" % step)
    os.unlink(FIRED)
    dead = dead_nodes()
    role = "data" if "-data-" in step else "parity"
    holders = [before[1]] if role == "data" else [before[c] for c in (6, 7, 8)]
    if len(dead) != 1 or dead[0] not in holders:
        fail("%s: the dead nodes are %s, expected one of %s" % (step, dead, holders))
    pending = None
    if acked:
        ref[off:off + len(new)] = new
    else:
        pending = (off, old, new)
    # With the node dead: right bytes or an error, and an error only on this stripe.
    fails = 0
    for t in range(SIZE // STRIPE):
        try:
            check_stripe(h, t, "%s, node %s dead" % (step, dead[0]), pending if t == s else None)
        except nbd.Error:
            if t != s:
                fail("%s: stripe %d (not written) failed to read with one node dead" % (step, t))
            fails += 1
    srv.restart_nodes()
    wait_states(srv.nodes(), "up")
    # The same client goes on (no new attach): its next delta update of the
    # stripe must first finish the interrupted one, not add to stale parities.
    off2 = s * STRIPE + 3 * UNIT + 500  # inside data chunk 3
    new2 = rng.randbytes(2000)
    try:
        h.pwrite(new2, off2)
        h.flush()
    except nbd.Error as e:
        fail("%s: a write into the stripe once its node is back: %s" % (step, e))
    ref[off2:off2 + len(new2)] = new2
    got = read_stripe(h, s)[off - s * STRIPE:off - s * STRIPE + len(new)]
    if pending:
        if got not in (old, new):
            fail("%s: after recovery the written range is neither old nor new" % step)
        ref[off:off + len(new)] = got
    check_stripe(h, s, "%s, after recovery" % step)
    # Parity: rebuild chunk 1 through each parity alone.
    wait_whole(s, step)
    lay = layout(s)
    for p in (6, 7, 8):
        victims = [lay[1]] + [lay[q] for q in (6, 7, 8) if q != p]
        kill(victims)
        try:
            check_stripe(h, s, "%s: chunk 1 rebuilt through parity %d" % (step, p))
        except nbd.Error as e:
            fail("%s: stripe %d does not decode through parity %d (%s): stale parity"
                 % (step, s, p, e))
        srv.restart_nodes()
        wait_states(victims, "up")
    matrix.append("%s: node %s, write %s, %d stripe read(s) failed while it was down, "
                  "then exact with each parity" % (step, dead[0], "acked" if acked else "failed",
                                                   fails))

# --- a delta update racing repair of the same stripe ----------------------------------
# The update pauses after its DEG (INEC_VOLUME_PAUSE_FILE); meanwhile a parity's
# node is drained and repair moves that chunk (a new record). The update's record
# write must not undo the move: it is refused, the stripe recovered, the write
# applied by read-modify-write.
s = 1 + len(STEPS)
wait_states(srv.nodes(), "up")
victim = layout(s)[8]
off, new = s * STRIPE + UNIT + 222, rng.randbytes(4000)
open(PAUSE, "w").close()
outcome = []


def racing_write():
    try:
        h.pwrite(new, off)
        h.flush()
        outcome.append("ok")
    except nbd.Error as e:
        outcome.append(str(e))


writer = threading.Thread(target=racing_write)
writer.start()
deadline = time.monotonic() + 60
while "update paused after its DEG" not in srv.stderr():
    if time.monotonic() > deadline:
        fail("the update never reached its pause")
    time.sleep(0.05)


def admin_node(verb, node):
    r = subprocess.run([INEC, "admin", "node", verb, node, "--endpoint", srv.admin, "--token",
                        srv.token], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        fail("inec admin node %s %s: %s%s" % (verb, node, r.stdout, r.stderr))


admin_node("drain", victim)
deadline = time.monotonic() + 120
while victim in layout(s).values():
    if time.monotonic() > deadline:
        fail("repair did not move stripe %d's chunk off %s: %s" % (s, victim, chunks(s)))
    time.sleep(0.2)
os.unlink(PAUSE)
writer.join(120)
if outcome != ["ok"]:
    fail("the write racing repair: %s" % outcome)
ref[off:off + len(new)] = new
if victim in layout(s).values():
    fail("the delta update's record undid repair's move off %s: %s" % (victim, chunks(s)))
if "stripe record changed during a delta update" not in srv.stderr():
    fail("the update's record write was not refused")
check_stripe(h, s, "after the update raced repair")
admin_node("restore", victim)
matrix.append("delta update racing repair (drain of %s): refused, recovered, write applied"
              % victim)

# A new attach (recovery at open finds nothing left), the stripes take delta
# updates again, and the whole volume is exact.
h.shutdown()
h = connect()
for s in range(1, 2 + len(STEPS)):
    off = s * STRIPE + 3 * UNIT + 77
    new = rng.randbytes(5000)
    h.pwrite(new, off)
    ref[off:off + len(new)] = new
h.flush()
for t in range(SIZE // STRIPE):
    check_stripe(h, t, "at the end")
info = cli("info", "crash1")
if info["gateway_stripe_updates"]["delta"] < len(STEPS):
    fail("the updates did not go by delta parity: %s" % info["gateway_stripe_updates"])
h.shutdown()
cli("delete", "crash1")
srv.stop()
shutil.rmtree(TMP, ignore_errors=True)
print("\n".join(matrix))
print("volume_crash: ok")
