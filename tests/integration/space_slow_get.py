#!/usr/bin/env python3
"""A slow GET survives an overwrite of the object it reads (9 node processes,
`inec gateway`, RS(6,3), 1 MiB chunks):

 1. defaults: a 24 MiB object is overwritten once a slow reader (64 KiB
    receive buffer) has its first bytes; the reader then takes ~8 s for the
    rest, and its GET returns the old bytes exactly (the old gc_delay of 5 s deleted them under
    it), a new GET the new bytes;
 2. gateway restarted with max_get_ms 4000, gc_delay_ms 6000: a GET slower
    than max_get_ms is cut (a short body, never wrong bytes), and once the
    delay has passed the replaced version's chunks are freed (live bytes on
    the nodes drop by about its size x n/k).
argv[1]: the inec binary."""
import hashlib
import http.client
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inec_server import InecCluster  # noqa: E402

try:
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
except ImportError:
    sys.exit("boto3 is missing: run scripts/deps.sh (python3-boto3)")

SIZE = 24 << 20
srv = InecCluster(sys.argv[1])


def fail(msg):
    srv.fail(msg)


def live_bytes():
    return sum(n.get("live_bytes", 0) for n in srv.admin_get("/admin/v1/cluster")["nodes"])


class SlowConnection(http.client.HTTPConnection):
    """A receive buffer of 64 KiB: the gateway cannot run far ahead of the reader."""

    def connect(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        self.sock.settimeout(60)
        self.sock.connect((self.host, self.port))


def slow_get(key, rate, started, resume):
    """GET /slowget/key: sets `started` after the first bytes, waits for
    `resume` (the overwrite is done), then reads the rest at `rate` bytes/s.
    Returns (status, body so far, error or None)."""
    url = "http://127.0.0.1:%d/slowget/%s" % (srv.port, key)
    req = AWSRequest(method="GET", url=url, headers={"x-amz-content-sha256":
                                                     hashlib.sha256(b"").hexdigest()})
    SigV4Auth(Credentials(srv.access_key, srv.secret_key), "s3", "us-east-1").add_auth(req)
    conn = SlowConnection("127.0.0.1", srv.port)
    conn.request("GET", "/slowget/" + key, headers=dict(req.headers.items()))
    r = conn.getresponse()
    body = bytearray()
    t0 = None
    err = None
    try:
        while True:
            piece = r.read(32768)
            if not piece:
                break
            body += piece
            if t0 is None:
                started.set()
                resume.wait(120)
                t0, base = time.monotonic(), len(body)
            ahead = (len(body) - base) / rate - (time.monotonic() - t0)
            if ahead > 0:
                time.sleep(ahead)
    except (http.client.IncompleteRead, ConnectionError, socket.timeout) as e:
        err = e
    conn.close()
    started.set()
    return r.status, bytes(body), err


old = os.urandom(SIZE)
new = os.urandom(SIZE)
s3 = srv.s3()
s3.create_bucket(Bucket="slowget")

# 1. Defaults: the overwrite's garbage waits for the GET.
s3.put_object(Bucket="slowget", Key="big", Body=old)
started = threading.Event()
res = {}
resume = threading.Event()
t = threading.Thread(target=lambda: res.update(r=slow_get("big", SIZE / 8, started, resume)))
t.start()
if not started.wait(60):
    fail("the slow GET got no bytes")
s3.put_object(Bucket="slowget", Key="big", Body=new)
t0 = time.monotonic()
resume.set()
t.join()
status, body, err = res["r"]
took = time.monotonic() - t0
if status != 200 or err or len(body) != SIZE:
    fail("slow GET across an overwrite: status %d, %d of %d bytes, %r"
         % (status, len(body), SIZE, err))
if body != old:
    fail("slow GET across an overwrite returned other bytes than the old version's")
if took < 6:
    fail("the slow GET outlived the overwrite only %.1f s: it proves nothing" % took)
if s3.get_object(Bucket="slowget", Key="big")["Body"].read() != new:
    fail("a GET after the overwrite does not return the new bytes")
print("slow GET: old bytes exact, %.1f s after the overwrite" % took)

# 2. A GET longer than max_get_ms is cut; the garbage then goes after gc_delay_ms.
srv.kill_gateway()
srv.set_gateway_config({"max_get_ms": 4000, "gc_delay_ms": 6000})
srv.restart_gateway()
s3 = srv.s3()
started = threading.Event()
resume = threading.Event()
t = threading.Thread(target=lambda: res.update(r=slow_get("big", SIZE / 12, started, resume)))
t.start()
if not started.wait(60):
    fail("the second slow GET got no bytes")
s3.put_object(Bucket="slowget", Key="big", Body=old)
resume.set()
after_put = live_bytes()  # both versions
t.join()
status, body, err = res["r"]
if status != 200 or len(body) >= SIZE or body != new[:len(body)]:
    fail("a GET past max_get_ms: status %d, %d of %d bytes (%r), prefix exact: %s"
         % (status, len(body), SIZE, err, body == new[:len(body)]))
print("GET past max_get_ms cut after %d of %d bytes (%r)" % (len(body), SIZE, err))
# The version replaced holds 24 MiB x 9/6 on the nodes. (Step 1's, garbage
# of the gateway killed since, is left to the scanner's orphan grace.)
deadline = time.monotonic() + 60
while live_bytes() > after_put - SIZE * 9 // 6 * 9 // 10:
    if time.monotonic() > deadline:
        fail("the replaced version's chunks were not freed: live %d, both versions %d"
             % (live_bytes(), after_put))
    time.sleep(0.5)
print("replaced version freed after gc_delay_ms")
srv.stop()
print("OK")
