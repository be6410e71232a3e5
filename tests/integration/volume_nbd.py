#!/usr/bin/env python3
"""Block volumes over NBD with real clients (libnbd's Python bindings, qemu-img)
against `inec server` (argv[2] "server", the default) or `inec gateway` in front
of nine `inec node` processes ("cluster"):
- `inec volume create/list/info/resize/delete` through the control API;
- the export needs its secret, or NBD STARTTLS with the secret as TLS-PSK;
  LIST names the volumes; BLOCK_STATUS (base:allocation) calls only zeros holes;
- random writes of every size and alignment (some FUA) against a reference,
  read back byte-exact over TCP and the Unix socket; TRIM and WRITE_ZEROES;
  FLUSH; two clients writing into one stripe at once lose no update;
- requests beyond the export and malformed handshakes get clean errors and
  the server keeps serving;
- qemu-img convert of a 128 MiB image (32 MiB on the cluster) into a volume
  without a secret and back out through qcow2, byte-exact, and qemu-img compare;
- cluster: crash hooks after each step of a delta-parity update, the gateway
  SIGKILLed during writes, 3 of 9 nodes SIGKILLed during writes: every
  acknowledged write reads back, a failed one left each stripe old or new.
argv[1]: the inec binary."""
import os
import random
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inec_server import InecCluster, InecServer  # noqa: E402

try:
    import nbd
except ImportError:
    sys.exit("libnbd's Python bindings are missing: run scripts/deps.sh (python3-libnbd)")

INEC = sys.argv[1]
MODE = sys.argv[2] if len(sys.argv) > 2 else "server"
if MODE == "cluster":
    srv = InecCluster(INEC, gateway={"nbd_listen": "127.0.0.1:0"})
else:
    srv = InecServer(INEC, extra_args=["--nbd-listen", "127.0.0.1:0"])


def fail(msg):
    srv.fail(msg)


def field(prefix):
    for line in srv.banner.splitlines():
        if line.startswith(prefix):
            return line[len(prefix):].strip()
    fail("banner lacks %r" % prefix)


nbd_line = field("NBD (block volumes):")  # "nbd://127.0.0.1:PORT and unix:PATH"
NBD_PORT = int(nbd_line.split()[0].rsplit(":", 1)[1])
UNIX = nbd_line.split("unix:", 1)[1] if "unix:" in nbd_line else None


def cli(*args, check=True):
    r = subprocess.run([INEC, "volume", *args, "--endpoint", srv.admin, "--token", srv.token,
                        "--json"] if args[0] != "--help" else [INEC, "volume", *args],
                       capture_output=True, text=True, timeout=300)
    if check and r.returncode != 0:
        fail("inec volume %s: exit %d\n%s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
    return r


def connect(export, unix=False):
    h = nbd.NBD()
    if unix:
        h.connect_uri("nbd+unix:///%s?socket=%s" % (export, UNIX))
    else:
        h.connect_uri("nbd://127.0.0.1:%d/%s" % (NBD_PORT, export))
    return h


import json  # noqa: E402

# --- the volume through the CLI ---------------------------------------------------
SIZE = 24 << 20
vol = json.loads(cli("create", "disk1", "--size", str(SIZE), "--update", "delta").stdout)
if vol["update"] != "delta" or vol["chains"] != "coherent":
    fail("create --update delta: %s" % vol)
if vol["size"] != SIZE or not vol["secret"] or vol["export"] != "disk1/" + vol["secret"]:
    fail("create answered %s" % vol)
STRIPE = vol["stripe_bytes"]
EXPORT = vol["export"]
if cli("create", "disk1", "--size", "1M", check=False).returncode != 1:
    fail("a second create of one name must fail")
for bad in (["create", "Bad_Name", "--size", "1M"], ["create", "x", "--size", "1000"],
            ["create", "y"], ["create", "z", "--size", "1M", "--update", "fast"],
            ["create", "w", "--size", "1M", "--chains", "fast"]):
    if cli(*bad, check=False).returncode == 0:
        fail("inec volume %s must fail" % bad)
names = [v["name"] for v in json.loads(cli("list").stdout)]
if names != ["disk1"]:
    fail("list: %s" % names)

# --- access -----------------------------------------------------------------------
for wrong in ("disk1", "disk1/" + "0" * 32, "nope", "disk1/" + vol["secret"] + "x"):
    try:
        connect(wrong).shutdown()
        fail("export %r attached without the right secret" % wrong)
    except nbd.Error:
        pass
h = nbd.NBD()
h.set_opt_mode(True)
h.connect_uri("nbd://127.0.0.1:%d" % NBD_PORT)
listed = []
h.opt_list(lambda name, desc: listed.append(name))
h.opt_abort()
if listed != ["disk1"]:
    fail("NBD_OPT_LIST: %s" % listed)

# TLS (NBD STARTTLS) with a PSK: identity = the volume's name, key = its secret.
psk_dir = tempfile.mkdtemp(prefix="inec-psk-")


def connect_tls(user, key, export):
    path = os.path.join(psk_dir, "keys.psk")
    with open(path, "w") as f:
        f.write("%s:%s\n" % (user, key))
    t = nbd.NBD()
    t.set_tls(nbd.TLS_REQUIRE)
    t.set_tls_psk_file(path)
    t.set_tls_username(user)
    t.set_export_name(export)
    t.connect_tcp("127.0.0.1", str(NBD_PORT))
    return t


t = connect_tls("disk1", vol["secret"], "disk1")
if not t.get_tls_negotiated() or t.get_size() != SIZE:
    fail("TLS-PSK attach")
t.pwrite(b"tls" * 1000, 1 << 20)
if t.pread(3000, 1 << 20) != b"tls" * 1000:
    fail("I/O over TLS")
t.zero(3000, 1 << 20)
t.shutdown()
for user, key, export in (("disk1", "ab" * 16, "disk1"), ("nope", vol["secret"], "nope"),
                          ("disk1", vol["secret"], "other")):
    try:
        connect_tls(user, key, export).shutdown()
        fail("TLS attach of %s as %s with a wrong key or name" % (export, user))
    except nbd.Error:
        pass
subprocess.run(["rm", "-rf", psk_dir])

h = connect(EXPORT)
if h.get_size() != SIZE or not h.can_flush() or not h.can_fua() or not h.can_trim() \
        or not h.can_zero() or not h.can_multi_conn():
    fail("export flags: size %d" % h.get_size())
if h.get_block_size(nbd.SIZE_PREFERRED) != 4096 or h.get_block_size(nbd.SIZE_MAXIMUM) != 8 << 20:
    fail("block sizes")

# --- random writes of every size and alignment --------------------------------------
rng = random.Random(13)
ref = bytearray(SIZE)
if h.pread(1 << 20, 0) != bytes(1 << 20):
    fail("a new volume does not read as zeros")
sizes = [1, 7, 511, 512, 4095, 4096, 4097, 65536, STRIPE - 1, STRIPE, STRIPE + 1, 1 << 20,
         (1 << 20) + 7, 3 * STRIPE]
for i in range(120):
    n = sizes[i % len(sizes)]
    off = rng.randrange(0, SIZE - n) if i % 3 else rng.randrange(0, SIZE // STRIPE - 4) * STRIPE
    data = rng.randbytes(n)
    h.pwrite(data, off, nbd.CMD_FLAG_FUA if i % 4 == 0 else 0)
    ref[off:off + n] = data
h.flush()
# TRIM and WRITE_ZEROES, whole stripes and parts of them.
for off, n, zero in ((STRIPE * 3, STRIPE * 2, False), (STRIPE * 7 + 100, 5000, True),
                     (STRIPE * 9 + 3, STRIPE * 3, False), (0, 4096, True)):
    (h.zero if zero else h.trim)(n, off)
    ref[off:off + n] = bytes(n)


def verify(handle, what):
    for off in range(0, SIZE, 4 << 20):
        n = min(4 << 20, SIZE - off)
        if handle.pread(n, off) != bytes(ref[off:off + n]):
            fail("%s: bytes [%d, %d) differ from the reference" % (what, off, off + n))


verify(h, "read back over TCP")
if json.loads(cli("info", "disk1").stdout)["gateway_stripe_updates"]["delta"] < 1:
    fail("no write took the delta-parity path")
if UNIX:
    u = connect(EXPORT, unix=True)
    verify(u, "read back over the Unix socket")
    u.shutdown()

# --- BLOCK_STATUS (base:allocation): stripes with data, holes elsewhere ---------------
b = nbd.NBD()
b.add_meta_context("base:allocation")
b.connect_uri("nbd://127.0.0.1:%d/%s" % (NBD_PORT, EXPORT))
if not b.can_meta_context("base:allocation"):
    fail("base:allocation not negotiated")
extents = []
pos = 0
while pos < SIZE:  # the server may answer less than asked: ask again from where it ended
    got = []
    b.block_status(SIZE - pos, pos, lambda meta, off, entries, err: got.extend(entries) or 0)
    if not got:
        fail("an empty block status answer")
    for i in range(0, len(got), 2):
        extents.append((pos, got[i], got[i + 1]))
        pos += got[i]
for off, n, flags in extents:
    zeros = ref[off:off + n] == bytes(n)
    if flags & 1 and not zeros:  # a hole must read as zeros; data may be zeros too
        fail("block status calls [%d, %d) a hole, it holds data" % (off, off + n))
    if flags not in (0, 3):
        fail("block status flags %d" % flags)
holes = sum(n for _, n, f in extents if f & 1)
if not 0 < holes < SIZE:
    fail("block status: %d bytes of holes in %d" % (holes, SIZE))
b.shutdown()

# --- two clients writing into one stripe at once ------------------------------------
h2 = connect(EXPORT)
base = STRIPE * 20
errors = []


def writer(handle, start):
    try:
        for j in range(12):
            off = base + start + j * 8192
            data = bytes([start // 4096 + 1 + j]) * 4096
            handle.pwrite(data, off)
            ref[off:off + 4096] = data
    except nbd.Error as e:
        errors.append(str(e))


ts = [threading.Thread(target=writer, args=(x, s)) for x, s in ((h, 0), (h2, 4096))]
for t in ts:
    t.start()
for t in ts:
    t.join()
if errors:
    fail("concurrent writes failed: %s" % errors)
if h2.pread(12 * 8192, base) != bytes(ref[base:base + 12 * 8192]):
    fail("two clients writing into one stripe lost an update")
h2.shutdown()

# --- requests beyond the export: errors, and the connection goes on ------------------
h.set_strict_mode(0)  # let the requests reach the server
for call in (lambda: h.pread(4096, SIZE - 100), lambda: h.pwrite(b"x" * 4096, SIZE),
             lambda: h.trim(8192, SIZE - 4096), lambda: h.zero(1, SIZE)):
    try:
        call()
        fail("a request beyond the export succeeded")
    except nbd.Error as e:
        if e.errno not in ("EINVAL", "ENOSPC"):
            fail("beyond the export: %s" % e)
if h.pread(4096, SIZE - 4096) != bytes(ref[SIZE - 4096:]):
    fail("the connection broke after refused requests")
# A write above the maximum payload (8 MiB): its bytes are dropped, EINVAL, and on.
try:
    h.pwrite(bytes(9 << 20), 0)
    fail("a 9 MiB write succeeded")
except nbd.Error as e:
    if e.errno != "EINVAL":
        fail("a 9 MiB write: %s" % e)
if h.pread(4096, 0) != bytes(ref[:4096]):
    fail("the connection broke after an oversized write")


# --- malformed handshakes ----------------------------------------------------------
def raw(payload, read_reply=True):
    s = socket.create_connection(("127.0.0.1", NBD_PORT), timeout=30)
    greet = b""
    while len(greet) < 18:
        greet += s.recv(18 - len(greet))
    if greet[:16] != b"NBDMAGICIHAVEOPT":
        fail("greeting: %r" % greet)
    s.sendall(payload)
    out = b""
    try:
        while read_reply:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
    except socket.timeout:
        fail("the server kept a malformed handshake open")
    s.close()
    return out


IHAVEOPT = b"IHAVEOPT"
raw(struct.pack(">I", 0xFF))                                    # unknown client flags
raw(struct.pack(">I", 1) + b"garbage!" + bytes(8))              # wrong option magic
raw(struct.pack(">I", 1) + IHAVEOPT + struct.pack(">II", 7, 1 << 30))  # huge option
bad_go = raw(struct.pack(">I", 1) + IHAVEOPT + struct.pack(">III", 7, 6, 1000) + b"\0\0"
             + IHAVEOPT + struct.pack(">II", 2, 0))            # name beyond the option, ABORT
if struct.unpack(">I", bad_go[12:16])[0] != 0x80000003:
    fail("a bad GO got %r, not NBD_REP_ERR_INVALID" % bad_go[:20])
raw(struct.pack(">I", 1) + IHAVEOPT + struct.pack(">II", 1, 4) + b"nope")  # unknown EXPORT_NAME
raw(struct.pack(">I", 1) + IHAVEOPT, read_reply=False)          # hangs up mid-option
h3 = connect(EXPORT)
if h3.pread(4096, 0) != bytes(ref[:4096]):
    fail("the server stopped serving after malformed handshakes")
h3.shutdown()

# --- qemu-img convert in and back out, on its own volume (no secret) ------------------
IMG = (128 if MODE == "server" else 32) << 20
if json.loads(cli("create", "img", "--size", str(IMG), "--no-secret").stdout)["export"] != "img":
    fail("a volume without a secret exports as its name")
tmp = tempfile.mkdtemp(prefix="inec-vol-")
img = os.path.join(tmp, "in.raw")
with open(img, "wb") as f:  # data, a hole, data, a short tail
    f.write(rng.randbytes(IMG // 2))
    f.write(bytes(IMG // 4))
    f.write(rng.randbytes(IMG // 4 - 4096))
    f.write(b"tail" * 1024)
uri = "nbd://127.0.0.1:%d/img" % NBD_PORT
for args in (["convert", "-n", "-f", "raw", "-O", "raw", img, uri],
             ["convert", "-f", "raw", "-O", "qcow2", uri, os.path.join(tmp, "out.qcow2")],
             ["convert", "-f", "qcow2", "-O", "raw", os.path.join(tmp, "out.qcow2"),
              os.path.join(tmp, "out.raw")]):
    r = subprocess.run(["qemu-img", *args], capture_output=True, text=True, timeout=600)
    if r.returncode:
        fail("qemu-img %s: %s" % (" ".join(args), r.stderr))
if open(img, "rb").read() != open(os.path.join(tmp, "out.raw"), "rb").read():
    fail("qemu-img convert round trip: other bytes")
r = subprocess.run(["qemu-img", "compare", "-f", "raw", "-F", "raw", img, uri],
                   capture_output=True, text=True, timeout=600)
if r.returncode:
    fail("qemu-img compare: %s%s" % (r.stdout, r.stderr))
subprocess.run(["rm", "-rf", tmp])
cli("delete", "img")

# --- resize: grown volumes show the new size at the next attach ----------------------
h.shutdown()
if json.loads(cli("resize", "disk1", "--size", str(SIZE * 2)).stdout)["size"] != SIZE * 2:
    fail("resize")
if cli("resize", "disk1", "--size", str(SIZE), check=False).returncode != 1:
    fail("a volume must not shrink")
h = connect(EXPORT)
if h.get_size() != SIZE * 2 or h.pread(4096, SIZE) != bytes(4096):
    fail("after resize: size %d" % h.get_size())
SIZE *= 2
ref.extend(bytes(SIZE - len(ref)))
# A discard of the whole device (mkfs does one) frees every stripe, then writes again.
h.trim(SIZE, 0)
ref[:] = bytes(SIZE)
verify(h, "after a whole-device TRIM")
for off in range(0, SIZE - STRIPE - 1, 5 * STRIPE + 4097):
    data = rng.randbytes(STRIPE + 1)
    h.pwrite(data, off)
    ref[off:off + len(data)] = data



def resolve(handle, off, old, new):
    """A write that failed: each stripe piece of its range reads old or new, never
    a mix; the reference takes what is there."""
    got = handle.pread(len(new), off)
    pos = off
    while pos < off + len(new):
        end = min((pos // STRIPE + 1) * STRIPE, off + len(new))
        a, b = pos - off, end - off
        if got[a:b] != old[a:b] and got[a:b] != new[a:b]:
            fail("a failed write left bytes [%d, %d) neither old nor new" % (pos, end))
        pos = end
    ref[off:off + len(new)] = got


def write_random(handle, count, before=None):
    """count random writes, each flushed; returns how many failed (each resolved)."""
    failed = 0
    for i in range(count):
        if before:
            before(i)
        n = sizes[i % len(sizes)]
        off = rng.randrange(0, SIZE - n)
        data = rng.randbytes(n)
        old = bytes(ref[off:off + n])
        try:
            handle.pwrite(data, off)
            handle.flush()
            ref[off:off + n] = data
        except nbd.Error:
            failed += 1
            resolve(handle, off, old, data)
    return failed


def nbd_port():
    return int(field("NBD (block volumes):").split()[0].rsplit(":", 1)[1])


if MODE == "cluster":
    # --- crash hooks at each step of a delta-parity update --------------------------------
    for step in ("after-intent", "after-deg", "after-record"):
        del h
        srv.kill_gateway()
        srv.env["INEC_VOLUME_CRASH"] = step
        srv.restart_gateway()
        NBD_PORT = nbd_port()
        h = connect(EXPORT)
        base = STRIPE * 5
        whole = rng.randbytes(STRIPE)  # a whole stripe: written as a new version, no hook
        h.pwrite(whole, base)
        ref[base:base + STRIPE] = whole
        off, data = base + 70000, rng.randbytes(3000)  # inside chunk 1: a delta update
        old = bytes(ref[off:off + len(data)])
        try:
            h.pwrite(data, off)
            fail("the %s crash hook did not fire" % step)
        except nbd.Error:
            pass
        deadline = time.monotonic() + 30
        while srv.alive():
            if time.monotonic() > deadline:
                fail("the gateway outlived its %s crash hook" % step)
            time.sleep(0.05)
        del srv.env["INEC_VOLUME_CRASH"]
        srv.restart_gateway()
        NBD_PORT = nbd_port()
        h = connect(EXPORT)  # attaching recovers the interrupted update
        if "recovered an interrupted update" not in srv.stderr():
            fail("no recovery after a crash %s:\n%s" % (step, srv.stderr()[-3000:]))
        resolve(h, off, old, data)
        verify(h, "after a crash %s" % step)
        h.pwrite(data, off)  # the stripe takes updates again
        ref[off:off + len(data)] = data
        if h.pread(len(data), off) != data:
            fail("a write after recovery from %s" % step)
    info = json.loads(cli("info", "disk1").stdout)
    if info["gateway_stripe_updates"]["delta"] < 1:
        fail("no delta-parity update after the crash tests: %s" % info)

    # --- the gateway SIGKILLed in the middle of writes, then started again ---------------
    killer = threading.Timer(1.0, srv.kill_gateway)
    killer.start()
    pending = None
    for i in range(400):
        n = sizes[i % len(sizes)]
        off = rng.randrange(0, SIZE - n)
        data = rng.randbytes(n)
        try:
            h.pwrite(data, off)
            ref[off:off + n] = data
        except nbd.Error:
            pending = (off, bytes(ref[off:off + n]), data)
            break
    killer.join()
    if pending is None:
        fail("400 writes finished before the gateway was killed")
    del h
    srv.restart_gateway()
    NBD_PORT = nbd_port()
    h = connect(EXPORT)
    resolve(h, *pending)
    verify(h, "after the gateway was SIGKILLed during writes")

    # --- three nodes die during writes ------------------------------------------------------
    victims = srv.nodes()[:3]
    failed = write_random(h, 60, lambda i: i in (10, 20, 30) and srv.kill_node(victims[i // 10 - 1]))
    if failed == 60:
        fail("no write succeeded with nodes dying")
    verify(h, "with 3 of 9 nodes dead")
    print("cluster: %d of 60 writes failed with nodes dying" % failed)
h.shutdown()

if cli("delete", "disk1").returncode != 0 or json.loads(cli("list").stdout) != []:
    fail("delete")
srv.stop()
print("volume_nbd %s: ok" % MODE)
