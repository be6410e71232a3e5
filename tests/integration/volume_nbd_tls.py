#!/usr/bin/env python3
"""NBD STARTTLS with the gateway's X.509 certificate (`inec server --tls-cert
--tls-key`, the options S3's HTTPS uses): a self-signed certificate for
127.0.0.1 made here with the openssl CLI, given to libnbd as the CA of its
certificates directory (ca-cert.pem). libnbd's Python bindings and nbdinfo
attach over TLS (the export still names the volume's secret: the certificate
proves the server, not the client) and write and read back; a client whose
directory holds another CA, a wrong secret over TLS, and a plain client that
insists on TLS against a port without it are refused; TLS-PSK still works
beside the certificate. Started again with --nbd-tls require: over TCP every
option but STARTTLS is answered NBD_REP_ERR_TLS_REQD (raw handshake) and the
old-style EXPORT_NAME hangs up, libnbd without TLS is refused and with it
attaches; the Unix socket still attaches plain. argv[1]: the inec binary."""
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inec_server import InecServer  # noqa: E402

try:
    import nbd
except ImportError:
    sys.exit("libnbd's Python bindings are missing: run scripts/deps.sh (python3-libnbd)")

INEC = sys.argv[1]
tmp = tempfile.mkdtemp(prefix="inec-nbd-tls-")


def make_ca_dir(name):
    """A directory as libnbd wants it: ca-cert.pem, here a self-signed server
    certificate (its own CA); returns (dir, cert, key)."""
    d = os.path.join(tmp, name)
    os.mkdir(d)
    cert, key = os.path.join(d, "ca-cert.pem"), os.path.join(tmp, name + ".key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "2", "-subj", "/CN=inec " + name,
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                    "-addext", "basicConstraints=critical,CA:TRUE"],
                   check=True, capture_output=True)
    return d, cert, key


good_dir, cert, key = make_ca_dir("good")
other_dir, _, _ = make_ca_dir("other")
srv = InecServer(INEC, extra_args=["--nbd-listen", "127.0.0.1:0", "--tls-cert", cert,
                                   "--tls-key", key])


def fail(msg):
    shutil.rmtree(tmp, ignore_errors=True)
    srv.fail(msg)


def nbd_url():
    for line in srv.banner.splitlines():
        if line.startswith("NBD (block volumes):"):
            return line.split(":", 1)[1].split()[0]
    fail("no NBD address in the banner")


port = int(nbd_url().rsplit(":", 1)[1])
r = subprocess.run([INEC, "volume", "create", "tlsvol", "--size", str(8 << 20), "--endpoint",
                    srv.admin, "--token", srv.token, "--ca-bundle", cert, "--json"],
                   capture_output=True, text=True, timeout=120)
if r.returncode != 0:
    fail("inec volume create: %s%s" % (r.stdout, r.stderr))
vol = json.loads(r.stdout)
EXPORT, SECRET = vol["export"], vol["secret"]


def attach(certs, export, tls=nbd.TLS_REQUIRE):
    h = nbd.NBD()
    h.set_tls(tls)
    if certs:
        h.set_tls_certificates(certs)
    h.set_export_name(export)
    h.connect_tcp("127.0.0.1", str(port))
    return h


h = attach(good_dir, EXPORT)
if not h.get_tls_negotiated() or h.get_size() != 8 << 20:
    fail("X.509 TLS attach: negotiated %s" % h.get_tls_negotiated())
data = os.urandom(200000)
h.pwrite(data, 123456)
h.flush()
if h.pread(len(data), 123456) != data:
    fail("I/O over X.509 TLS")
h.shutdown()

# nbdinfo (libnbd-bin) with the certificates directory in the URI.
uri = "nbds://127.0.0.1:%d/%s?tls-certificates=%s" % (port, EXPORT, good_dir)
r = subprocess.run(["nbdinfo", "--json", uri], capture_output=True, text=True, timeout=60)
if r.returncode != 0:
    fail("nbdinfo over TLS: %s%s" % (r.stdout, r.stderr))
info = json.loads(r.stdout)
if not info.get("TLS") or info["exports"][0]["export-size"] != 8 << 20:
    fail("nbdinfo: %s" % r.stdout)

# Refused: another CA; the right CA but no or a wrong secret.
for certs, export, what in ((other_dir, EXPORT, "a client trusting another CA"),
                            (good_dir, "tlsvol", "no secret over X.509 TLS"),
                            (good_dir, "tlsvol/" + "0" * 32, "a wrong secret over X.509 TLS")):
    try:
        attach(certs, export).shutdown()
        fail("%s attached" % what)
    except nbd.Error:
        pass

# TLS-PSK beside the certificate.
psk = os.path.join(tmp, "keys.psk")
with open(psk, "w") as f:
    f.write("tlsvol:%s\n" % SECRET)
p = nbd.NBD()
p.set_tls(nbd.TLS_REQUIRE)
p.set_tls_psk_file(psk)
p.set_tls_username("tlsvol")
p.set_export_name("tlsvol")
p.connect_tcp("127.0.0.1", str(port))
if not p.get_tls_negotiated() or p.pread(len(data), 123456) != data:
    fail("TLS-PSK attach beside the certificate")
p.shutdown()

# TLS required on TCP.
srv.stop(keep=True)
srv = InecServer(INEC, reuse=srv, extra_args=["--nbd-listen", "127.0.0.1:0", "--tls-cert", cert,
                                              "--tls-key", key, "--nbd-tls", "require"])
if not nbd_url().startswith("nbds://"):
    fail("the banner names %s although TLS is required" % nbd_url())
port = int(nbd_url().rsplit(":", 1)[1])


def raw_option(opt, payload):
    """One option on a fresh plain connection: (reply type, message), or None
    when the server hung up."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        if s.recv(18, socket.MSG_WAITALL)[:8] != b"NBDMAGIC":
            fail("no NBD greeting")
        s.sendall(struct.pack(">I", 3))  # fixed newstyle, no zeroes
        s.sendall(struct.pack(">QII", 0x49484156454F5054, opt, len(payload)) + payload)
        head = s.recv(20, socket.MSG_WAITALL)
        if not head:
            return None
        _, _, rtype, n = struct.unpack(">QIII", head)
        return rtype, s.recv(n, socket.MSG_WAITALL).decode()
    finally:
        s.close()


go = struct.pack(">I", len(EXPORT)) + EXPORT.encode() + struct.pack(">H", 0)
for opt, payload, what in ((7, go, "GO"), (6, go, "INFO"), (3, b"", "LIST")):
    got = raw_option(opt, payload)
    if not got or got[0] != 0x80000005 or "TLS" not in got[1]:
        fail("plain %s with TLS required answered %s, not NBD_REP_ERR_TLS_REQD" % (what, got))
if raw_option(1, EXPORT.encode()) is not None:
    fail("a plain EXPORT_NAME with TLS required was answered")
try:
    attach(None, EXPORT, tls=nbd.TLS_DISABLE).shutdown()
    fail("a plain attach over TCP with TLS required")
except nbd.Error:
    pass
h = attach(good_dir, EXPORT)
if not h.get_tls_negotiated() or h.pread(len(data), 123456) != data:
    fail("X.509 TLS attach with TLS required")
h.shutdown()
u = nbd.NBD()
u.set_export_name(EXPORT)
u.connect_unix(os.path.join(srv.data, "nbd.sock"))
if u.get_tls_negotiated() or u.pread(len(data), 123456) != data:
    fail("a plain attach on the Unix socket with TLS required on TCP")
u.shutdown()

shutil.rmtree(tmp, ignore_errors=True)
srv.stop()
print("volume_nbd_tls: ok")
