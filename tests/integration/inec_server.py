"""Starts a real `inec server` on loopback for a test: free ports picked by
the server itself (port 0, read back from its banner), a fresh data
directory, stderr kept for the failure report, SIGTERM at the end (and a
check that it exits 0, i.e. shuts down cleanly). InecCluster is the same
for `inec gateway` in front of nine `inec node` processes (scripts/cluster.sh);
start() picks one of the two by name, so a suite runs unchanged against both."""
import atexit
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse

START_TIMEOUT = 120  # seconds: generous for ASan builds on a busy machine


class InecServer:
    def __init__(self, inec, extra_args=(), env=None, reuse=None):
        """reuse: a stopped InecServer whose directory (data, credentials) to start on."""
        self.dir = reuse.dir if reuse else tempfile.mkdtemp(prefix="inec-s3-")
        self.data = os.path.join(self.dir, "data")
        self.errlog = open(os.path.join(self.dir, "stderr.log"), "a+")
        args = [inec, "server", "--data", self.data, "--listen", "127.0.0.1:0",
                "--admin-listen", "127.0.0.1:0", *extra_args]
        e = dict(os.environ)
        for k in ("INEC_ACCESS_KEY", "INEC_SECRET_KEY", "INEC_ADMIN_TOKEN"):
            e.pop(k, None)
        e.update(env or {})
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.errlog, env=e)
        # A test that dies of an exception must not leave the server running.
        atexit.register(self._kill)
        self.banner = self._read_banner()
        self._parse_banner()

    def _kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def _parse_banner(self):
        self.endpoint = self._field(r"S3 endpoint: (https?://\S+)")
        self.admin = self._field(r"control API: (https?://\S+)")
        self.access_key = self._field(r"AWS_ACCESS_KEY_ID=(\S+)")
        self.secret_key = self._field(r"AWS_SECRET_ACCESS_KEY=(\S+)")
        self.token = self._field(r"Bearer (\S+)'")
        self.port = int(self.endpoint.rsplit(":", 1)[1])
        self.host = urllib.parse.urlsplit(self.endpoint).hostname  # 127.0.0.1, ::1
        self.hostport = "[%s]:%d" % (self.host, self.port) if ":" in self.host \
            else "%s:%d" % (self.host, self.port)

    def _read_banner(self):
        out = b""
        deadline = time.monotonic() + START_TIMEOUT
        fd = self.proc.stdout.fileno()
        while b"/admin/v1/cluster" not in out:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                self.fail("server did not start (exit %s); stdout so far:\n%s"
                          % (self.proc.poll(), out.decode(errors="replace")))
            r, _, _ = select.select([fd], [], [], left)
            if r:
                chunk = os.read(fd, 65536)
                if not chunk:
                    continue
                out += chunk
        return out.decode()

    def _field(self, pattern):
        m = re.search(pattern, self.banner)
        if not m:
            self.fail("banner lacks %r:\n%s" % (pattern, self.banner))
        return m.group(1)

    def alive(self):
        return self.proc.poll() is None

    def request(self, method, path, body=b"", headers=None, sign=True, host=None,
                payload_hash=None):
        """One S3 request over http.client, SigV4-signed by botocore (payload_hash:
        the x-amz-content-sha256 to sign, else the body's SHA-256) or unsigned
        (anonymous). Returns status, headers (lower-case names), body."""
        import hashlib
        import http.client
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials
        host = host or self.hostport
        headers = dict(headers or {})
        if sign:
            req = AWSRequest(method=method, url="http://%s%s" % (host, path), data=body,
                             headers=headers)
            req.headers["x-amz-content-sha256"] = payload_hash or hashlib.sha256(body).hexdigest()
            SigV4Auth(Credentials(self.access_key, self.secret_key), "s3",
                      "us-east-1").add_auth(req)
            headers = dict(req.headers.items())
        conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", host)
        for k, v in headers.items():
            if k.lower() != "host":
                conn.putheader(k, v)
        conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        r = conn.getresponse()
        data = r.read()
        conn.close()
        return r.status, dict((k.lower(), v) for k, v in r.getheaders()), data

    def s3(self, **config):
        """A boto3 client of this endpoint: SigV4, path style, one attempt unless
        config (botocore Config fields) says otherwise."""
        import boto3
        from botocore.config import Config
        cfg = {"signature_version": "s3v4", "retries": {"max_attempts": 1},
               "s3": {"addressing_style": "path"}}
        cfg.update(config)
        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id=self.access_key,
                            aws_secret_access_key=self.secret_key, config=Config(**cfg))

    def admin_get(self, path):
        """GET of the control API (admin token), its JSON. A reset connection
        (seen right after a gateway restart) is tried again: a GET is idempotent."""
        import json
        import urllib.request
        req = urllib.request.Request(self.admin + path,
                                     headers={"Authorization": "Bearer " + self.token})
        for attempt in range(3):
            try:
                return json.loads(urllib.request.urlopen(req, timeout=60).read())
            except ConnectionResetError:
                if attempt == 2:
                    raise
                time.sleep(0.5)

    def stderr(self):
        self.errlog.flush()
        self.errlog.seek(0)
        return self.errlog.read()[-20000:]

    def fail(self, msg):
        self._kill()
        sys.stderr.write("FAIL: %s\n--- server stderr ---\n%s\n" % (msg, self.stderr()))
        shutil.rmtree(self.dir, ignore_errors=True)
        sys.exit(1)

    def stop(self, keep=False):
        """SIGTERM must shut the server down cleanly (exit 0) in bounded time."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            self.fail("server ignored SIGTERM for 90 s")
        if rc != 0:
            self.fail("server exited %d after SIGTERM" % rc)
        if not keep:
            shutil.rmtree(self.dir, ignore_errors=True)


SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts")


def _pid_alive(pid):
    """Alive while any of its threads is: after SIGKILL the main thread can be
    a zombie already while the others still exit, holding the process's
    sockets (a restart on its port would find it in use). A zombie whose
    threads are all gone is dead (cluster.sh's children are nobody's to reap)."""
    try:
        tasks = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return False
    for t in tasks:
        try:
            with open("/proc/%d/task/%s/stat" % (pid, t)) as f:
                if f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
                    return True
        except OSError:
            continue  # that thread is gone
    return False


def _hold_port(address):
    """A socket bound (SO_REUSEADDR, not listening) to HOST:PORT, which a killed
    process listened on: while it is down, cluster.sh in a parallel test would
    otherwise find the port free and give it to a cluster of its own (its probe
    binds without SO_REUSEADDR, and is refused now). The process started again
    binds with SO_REUSEADDR, which a socket that does not listen lets it do."""
    host, port = address.rsplit(":", 1)
    host = host.strip("[]")
    fam, typ, _, _, addr = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)[0]
    s = socket.socket(fam, typ)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(addr)
    except OSError:
        s.close()  # taken in the instant it was free: the restart will say so
        return None
    return s


class InecCluster(InecServer):
    """`scripts/cluster.sh start 9 DIR`: nine `inec node` processes on tcp and
    `inec gateway` in front of them (RS(6,3), 1 MiB chunks); the same fields
    as InecServer (endpoint, keys, admin token, dir) from the gateway's banner."""

    def __init__(self, inec, nodes=9, env=None, gateway=None):
        """env: more environment for cluster.sh (INEC_PROFILE, INEC_CHUNK);
        gateway: fields merged into cluster.json's "gateway" section."""
        self.dir = tempfile.mkdtemp(prefix="inec-cluster-")
        self.env = dict(os.environ, INEC=os.path.abspath(inec), **(env or {}))
        self._held = {}  # name ("gateway" or a node) -> the sockets holding its ports
        for k in ("INEC_ACCESS_KEY", "INEC_SECRET_KEY", "INEC_ADMIN_TOKEN"):
            self.env.pop(k, None)
        # An exception in the test must not leave ten processes behind.
        atexit.register(self._cluster, "stop", self.dir)
        if gateway:
            r = self._cluster("start", str(nodes), self.dir, no_gateway=True)
            if r.returncode != 0:
                self.fail("cluster.sh start: %s%s" % (r.stdout, r.stderr))
            self.set_gateway_config(gateway)
        r = self._cluster("start", str(nodes), self.dir)
        if r.returncode != 0:
            self.fail("cluster.sh start: %s%s" % (r.stdout, r.stderr))
        self.config = json.load(open(os.path.join(self.dir, "cluster.json")))
        self._wait_gateway()

    def set_gateway_config(self, fields):
        """Merges fields into cluster.json's "gateway" section (read at the next start)."""
        path = os.path.join(self.dir, "cluster.json")
        cfg = json.load(open(path))
        cfg["gateway"].update(fields)
        with open(path, "w") as f:
            json.dump(cfg, f, indent=2)

    def restart_gateway(self):
        """Starts the gateway again (after it died or was killed): same data, same config."""
        with open(os.path.join(self.dir, "gateway.log"), "a") as f:
            f.write("\n--- restart ---\n")
        log = os.path.join(self.dir, "gateway.log")
        self._log_from = os.path.getsize(log)
        # Only the gateway (cluster.sh start would also restart nodes killed for good).
        with open(log, "a") as out:
            p = subprocess.Popen([self.env["INEC"], "gateway", "--config",
                                  os.path.join(self.dir, "cluster.json")],
                                 stdout=out, stderr=out, env=self.env, start_new_session=True)
        with open(os.path.join(self.dir, "gateway.pid"), "w") as f:
            f.write(str(p.pid))
        self._wait_gateway()

    def kill_gateway(self):
        """SIGKILL the gateway and wait until it is gone."""
        os.kill(self.gateway, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while _pid_alive(self.gateway):
            if time.monotonic() > deadline:
                self.fail("the gateway outlived SIGKILL")
            time.sleep(0.01)
        gw = json.load(open(os.path.join(self.dir, "cluster.json")))["gateway"]
        self._hold("gateway", [gw["listen"], gw["admin_listen"]])

    def dies_at(self, point, action):
        """Restarts the gateway with INEC_CRASH_AT=point (it dies there, see
        object/multipart.c), runs action() to make it get there, waits until it
        is dead and starts it again as before."""
        self.kill_gateway()
        self.env["INEC_CRASH_AT"] = point
        self.restart_gateway()
        action()
        deadline = time.monotonic() + 30
        while self.alive():
            if time.monotonic() > deadline:
                self.fail("the gateway did not die at %s" % point)
            time.sleep(0.05)
        del self.env["INEC_CRASH_AT"]
        self.restart_gateway()

    def _hold(self, name, addresses):
        self._held[name] = [s for s in map(_hold_port, addresses) if s]

    def _release(self, name):
        """Lets go of the ports held for name: it listens on them again."""
        for s in self._held.pop(name, []):
            s.close()

    def _wait_gateway(self):
        self.gateway = self.pid("gateway")
        deadline = time.monotonic() + START_TIMEOUT
        while "/admin/v1/cluster" not in self.stderr():
            if time.monotonic() > deadline or not self.alive():
                self.fail("the gateway printed no banner")
            time.sleep(0.1)
        self.banner = self.stderr()
        self._parse_banner()
        self._release("gateway")

    def _cluster(self, *args, no_gateway=False):
        env = dict(self.env, INEC_NO_GATEWAY="1") if no_gateway else self.env
        r = subprocess.run(["bash", os.path.join(SCRIPTS, "cluster.sh"), *args],
                           env=env, capture_output=True, text=True, timeout=180)
        if args[0] == "start" and r.returncode == 0:
            for name in list(self._held):  # every node listens again; the gateway,
                if name != "gateway":       # maybe started, is let go at its banner
                    self._release(name)
        return r

    def pid(self, name):
        with open(os.path.join(self.dir, name + ".pid")) as f:
            return int(f.read())

    def nodes(self):
        return [n["id"] for n in self.config["map"]["nodes"]]

    def kill_node(self, node):
        """SIGKILL one node process and wait until it is gone."""
        pid = self.pid(node)
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while _pid_alive(pid):
            if time.monotonic() > deadline:
                self.fail("node %s outlived SIGKILL" % node)
            time.sleep(0.01)
        self._hold(node, [n["address"] for n in self.config["map"]["nodes"] if n["id"] == node])

    def restart_nodes(self):
        """Starts again every node that was killed (same data, same address)."""
        r = self._cluster("start", str(len(self.nodes())), self.dir)
        if r.returncode != 0:
            self.fail("cluster.sh start: %s%s" % (r.stdout, r.stderr))

    def alive(self):
        return _pid_alive(self.gateway)

    _log_from = 0  # the banner of the gateway started last comes after this offset

    def stderr(self):
        try:
            with open(os.path.join(self.dir, "gateway.log")) as f:
                f.seek(self._log_from)
                return f.read()[-20000:]
        except OSError:
            return ""

    def fail(self, msg):
        self._cluster("stop", self.dir)
        sys.stderr.write("FAIL: %s\n--- gateway log ---\n%s\n" % (msg, self.stderr()))
        shutil.rmtree(self.dir, ignore_errors=True)
        sys.exit(1)

    def stop(self, keep=False):
        """SIGTERM must shut the gateway down cleanly in bounded time; then the nodes."""
        os.kill(self.gateway, signal.SIGTERM)
        deadline = time.monotonic() + 90
        while self.alive():
            if time.monotonic() > deadline:
                self.fail("the gateway ignored SIGTERM for 90 s")
            time.sleep(0.05)
        if "shutting down" not in self.stderr():
            self.fail("the gateway did not shut down cleanly")
        r = self._cluster("stop", self.dir)
        if r.returncode != 0:
            self.fail("cluster.sh stop: %s%s" % (r.stdout, r.stderr))
        # No exit status to check (cluster.sh's children): ASan/UBSan reports instead.
        for name in ["gateway"] + self.nodes():
            with open(os.path.join(self.dir, name + ".log"), errors="replace") as f:
                log = f.read()
            if "Sanitizer" in log or "runtime error:" in log:
                self.fail("%s.log has a sanitizer report:\n%s" % (name, log[-8000:]))
        if not keep:
            shutil.rmtree(self.dir, ignore_errors=True)


def ipv6_loopback():
    """Whether this machine can listen on ::1."""
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


def start(inec, mode="server", **kw):
    """mode "server": the embedded `inec server`; "cluster": InecCluster;
    "cluster-ipv6": the same on ::1, every process (exit 77 without IPv6)."""
    if mode == "cluster":
        return InecCluster(inec)
    if mode == "cluster-ipv6":
        if not ipv6_loopback():
            print("no IPv6 loopback here: skipped")
            sys.exit(77)
        return InecCluster(inec, env={"INEC_HOST": "::1"})
    if mode != "server":
        sys.exit("unknown mode %r: server, cluster or cluster-ipv6" % mode)
    return InecServer(inec, **kw)
