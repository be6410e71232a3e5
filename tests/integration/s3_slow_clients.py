#!/usr/bin/env python3
"""A few slow clients cannot lock everyone out of a real `inec server`.

300 connections from 127.0.0.1 each send one header byte every 2 s (more than
the server's 256 connections; MHD's own timeout is an idle one, which each
byte resets). The per-address limit keeps them to 64, so a client from
127.0.0.2 is served at once; the header deadline (--header-timeout 8 here)
then closes every one of them although they keep sending, after which
127.0.0.1 is served again. An oversized header is refused without harm.
argv[1]: the inec binary."""
import errno
import hashlib
import http.client
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inec_server import InecServer  # noqa: E402

SLOW = 300
PER_CLIENT = 64  # the server's default
HEADER_TIMEOUT = 8
srv = None


def check(cond, what):
    if not cond:
        srv.fail(what)


def list_buckets(source, timeout):
    """A signed ListBuckets from `source`: (status, seconds taken)."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
    host = "127.0.0.1:%d" % srv.port
    req = AWSRequest(method="GET", url="http://%s/" % host,
                     headers={"x-amz-content-sha256": hashlib.sha256(b"").hexdigest()})
    SigV4Auth(Credentials(srv.access_key, srv.secret_key), "s3", "us-east-1").add_auth(req)
    t0 = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=timeout,
                                      source_address=(source, 0))
    try:
        conn.request("GET", "/", headers=dict(req.headers.items()))
        r = conn.getresponse()
        r.read()
        status = r.status
    except (OSError, http.client.HTTPException) as e:
        status = "failed: %r" % e
    conn.close()
    return status, time.monotonic() - t0


def is_open(s):
    """The server has not closed this connection (nothing to read, no EOF)."""
    try:
        return s.recv(1, socket.MSG_DONTWAIT | socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def trickle(socks, n):
    """One more header byte on every connection still open."""
    for s in socks:
        try:
            s.send(b"a" if n else b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ", socket.MSG_DONTWAIT)
        except OSError:
            pass


def test_slow_clients():
    socks = []
    for _ in range(SLOW):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        s.settimeout(10)
        try:
            s.connect(("127.0.0.1", srv.port))
        except OSError as e:
            check(e.errno in (errno.ECONNREFUSED, errno.ECONNRESET), "connect: %r" % e)
            continue
        s.setblocking(False)  # is_open and trickle must never wait
        socks.append(s)
    trickle(socks, 0)
    t0 = time.monotonic()
    time.sleep(1.0)
    trickle(socks, 1)
    held = sum(is_open(s) for s in socks)
    check(held <= PER_CLIENT, "one address holds %d connections (limit %d)" % (held, PER_CLIENT))
    # Another address is served at once, while the slow ones are still held.
    status, took = list_buckets("127.0.0.2", 10)
    print("held %d, served from 127.0.0.2 in %.2f s, %.2f s after the slow ones began"
          % (held, took, time.monotonic() - t0), flush=True)
    check(status == 200, "a client from 127.0.0.2 beside %d slow ones: %s" % (held, status))
    check(time.monotonic() - t0 < HEADER_TIMEOUT, "the slow connections were not held long "
          "enough to prove anything (machine too slow?)")
    # The header deadline closes them although they keep sending.
    n = 2
    while time.monotonic() - t0 < HEADER_TIMEOUT + 20:
        time.sleep(2.0)
        trickle(socks, n)
        n += 1
        if not any(is_open(s) for s in socks):
            break
    still = sum(is_open(s) for s in socks)
    check(still == 0, "%d trickling connections still open %.0f s after their headers began "
          "(header timeout %d s)" % (still, time.monotonic() - t0, HEADER_TIMEOUT))
    for s in socks:
        s.close()
    status, took = list_buckets("127.0.0.1", 10)
    check(status == 200, "127.0.0.1 after the slow clients were cut off: %s" % status)


def test_big_header():
    """Headers beyond the per-connection memory limit: refused, the server lives on."""
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n" + b"X-Big: " + b"b" * (300 << 10) + b"\r\n\r\n")
    got = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            got += d
    except OSError:
        pass
    s.close()
    check(got == b"" or got.split(b" ")[1] in (b"413", b"431", b"400"),
          "an oversized header: %r" % got[:200])
    status, _ = list_buckets("127.0.0.1", 10)
    check(status == 200, "served after an oversized header: %s" % status)


def main():
    global srv
    srv = InecServer(sys.argv[1], extra_args=["--header-timeout", str(HEADER_TIMEOUT)])
    test_slow_clients()
    print("ok test_slow_clients", flush=True)
    test_big_header()
    print("ok test_big_header", flush=True)
    srv.stop()
    print("s3_slow_clients: all passed")


if __name__ == "__main__":
    main()
