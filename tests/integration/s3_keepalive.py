#!/usr/bin/env python3
"""HTTP keep-alive against a real `inec server`: every kind of answer leaves
the connection open for the next request, a refusal that leaves a body unread
closes it, and idle pooled connections never lock a client out.

- One http.client connection carries ListBuckets, CreateBucket, PUT, GET,
  HEAD, DELETE, a 404 and a 403 (the local port never changes).
- A refused PUT: with a short body sent at once, the body is read and the
  connection lives on; with Expect: 100-continue, or a body longer than the
  server drains, the answer comes before the body and the server closes.
- boto3 doing 41 operations uses one TCP connection (counted in /proc/net/tcp,
  where a connection the server closed would stay in TIME_WAIT).
- 300 kept-alive connections from one address (more than the 64 active
  connections one address may hold, and than the server's 256 in all) are each
  served; the longest idle are closed to make room, the latest stay usable.
argv[1]: the inec binary."""
import hashlib
import http.client
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inec_server import InecServer  # noqa: E402

srv = None


def check(cond, what):
    if not cond:
        srv.fail(what)


def signed(method, path, body=b"", headers=None, secret=None):
    """Headers of a SigV4-signed request (botocore), with a wrong secret if given."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
    host = "127.0.0.1:%d" % srv.port
    req = AWSRequest(method=method, url="http://%s%s" % (host, path), data=body,
                     headers=dict(headers or {}))
    req.headers["x-amz-content-sha256"] = hashlib.sha256(body).hexdigest()
    SigV4Auth(Credentials(srv.access_key, secret or srv.secret_key), "s3",
              "us-east-1").add_auth(req)
    return dict(req.headers.items())


def raw_request(method, path, body=b"", headers=None, secret=None):
    """The bytes of one signed request (Content-Length always sent)."""
    h = signed(method, path, body, headers, secret)
    h["Content-Length"] = str(len(body))
    h.setdefault("Host", "127.0.0.1:%d" % srv.port)
    head = "%s %s HTTP/1.1\r\n" % (method, path)
    head += "".join("%s: %s\r\n" % (k, v) for k, v in h.items()) + "\r\n"
    return head.encode()


def read_response(sock, method="GET"):
    """One response read off a raw socket: (status, headers, body)."""
    r = http.client.HTTPResponse(sock, method=method)
    r.begin()
    return r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read()


def server_closed(sock, wait=10):
    """The server closed this connection (EOF or reset within `wait` seconds)."""
    sock.settimeout(wait)
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except socket.timeout:
        return False
    except OSError:
        return True


def test_one_connection():
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    port = None
    steps = [("GET", "/", b"", 200), ("PUT", "/keep-alive", b"", 200),
             ("PUT", "/keep-alive/obj", b"x" * 100000, 200), ("GET", "/keep-alive/obj", b"", 200),
             ("HEAD", "/keep-alive/obj", b"", 200), ("GET", "/keep-alive/missing", b"", 404),
             ("GET", "/keep-alive?list-type=2", b"", 200), ("DELETE", "/keep-alive/obj", b"", 204)]
    for method, path, body, want in steps:
        conn.request(method, path, body=body, headers=signed(method, path, body))
        r = conn.getresponse()
        data = r.read()
        check(r.status == want, "%s %s: HTTP %d, wanted %d: %r" % (method, path, r.status,
                                                                    want, data[:300]))
        check((r.getheader("Connection") or "").lower() != "close",
              "%s %s answered with Connection: close" % (method, path))
        if method == "GET" and path == "/keep-alive/obj":
            check(data == b"x" * 100000, "GET returned other bytes")
        p = conn.sock.getsockname()[1] if conn.sock else None
        check(p is not None and port in (None, p),
              "%s %s: the connection was not kept (local port %s, then %s)"
              % (method, path, port, p))
        port = p
    # An error without a body: answered on the same connection.
    conn.request("GET", "/", headers=signed("GET", "/", secret="wrong" * 8))
    r = conn.getresponse()
    r.read()
    check(r.status == 403, "wrong signature: HTTP %d" % r.status)
    check(conn.sock and conn.sock.getsockname()[1] == port,
          "a 403 without a body closed the connection")
    conn.close()


def test_refused_bodies():
    # A short body sent with its headers: read and dropped, the connection stays.
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    body = b"y" * 5000
    s.sendall(raw_request("PUT", "/keep-alive/refused", body, secret="wrong" * 8) + body)
    st, _, _ = read_response(s)
    check(st == 403, "refused PUT with its body: HTTP %d" % st)
    s.sendall(raw_request("GET", "/"))
    st, _, _ = read_response(s)
    check(st == 200, "the request after a refused, drained body: HTTP %d" % st)
    s.close()
    # Expect: 100-continue: answered before the body, which is never sent; closed.
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    s.sendall(raw_request("PUT", "/keep-alive/refused", body, {"Expect": "100-continue"},
                          secret="wrong" * 8))
    st, h, _ = read_response(s)
    check(st == 403, "refused PUT with Expect: 100-continue: HTTP %d" % st)
    check(h.get("connection", "").lower() == "close" and server_closed(s),
          "a refusal before an unsent body left the connection open")
    s.close()
    # A body longer than the server drains (64 MiB declared): answered at once, closed.
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    head = raw_request("PUT", "/keep-alive/refused", b"", secret="wrong" * 8)
    head = head.replace(b"Content-Length: 0", b"Content-Length: %d" % (64 << 20))
    s.sendall(head + b"z" * 1000)
    st, h, _ = read_response(s)
    check(st == 403, "refused 64 MiB PUT: HTTP %d" % st)
    check(server_closed(s), "a refusal of a long unread body left the connection open")
    s.close()


def tcp_ports_of(server_port):
    """Client ports of every TCP socket (any state, TIME_WAIT too) with the server."""
    ports = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(name).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            local, remote = int(f[1].split(":")[1], 16), int(f[2].split(":")[1], 16)
            if local == server_port and remote:
                ports.add(remote)
            elif remote == server_port:
                ports.add(local)
    return ports


def test_boto3_reuses():
    before = tcp_ports_of(srv.port)
    s3 = srv.s3()
    s3.create_bucket(Bucket="ka-boto")
    for i in range(10):
        s3.put_object(Bucket="ka-boto", Key="k%d" % i, Body=b"b" * 4096)
        check(s3.get_object(Bucket="ka-boto", Key="k%d" % i)["Body"].read() == b"b" * 4096,
              "boto3 read back other bytes")
        s3.head_object(Bucket="ka-boto", Key="k%d" % i)
        s3.delete_object(Bucket="ka-boto", Key="k%d" % i)
    used = tcp_ports_of(srv.port) - before
    print("boto3: 41 operations over %d connection(s)" % len(used), flush=True)
    check(len(used) == 1, "boto3's 41 operations used %d connections, not 1" % len(used))


def test_idle_pool():
    n = 300  # > 64 per address, > 256 in all
    socks = []
    for i in range(n):
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        s.sendall(raw_request("GET", "/"))
        st, _, _ = read_response(s)
        check(st == 200, "kept-alive connection %d of %d: HTTP %d" % (i + 1, n, st))
        socks.append(s)
    closed = [server_closed(s, 0.01) for s in socks[:n - 20]]
    print("%d kept-alive connections all served; %d of the oldest closed to make room"
          % (n, sum(closed)), flush=True)
    check(sum(closed) >= n - 256, "only %d idle connections closed with %d open (limit 256)"
          % (sum(closed), n))
    for s in socks[-20:]:
        s.sendall(raw_request("GET", "/"))
        st, _, _ = read_response(s)
        check(st == 200, "a recent idle connection: HTTP %d" % st)
    for s in socks:
        s.close()


def main():
    global srv
    srv = InecServer(sys.argv[1])
    for t in (test_one_connection, test_refused_bodies, test_boto3_reuses, test_idle_pool):
        t()
        print("ok %s" % t.__name__, flush=True)
    srv.stop()
    print("s3_keepalive: all passed")


if __name__ == "__main__":
    main()
