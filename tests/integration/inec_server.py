"""Starts a real `inec server` on loopback for a test: free ports picked by
the server itself (port 0, read back from its banner), a fresh data
directory, stderr kept for the failure report, SIGTERM at the end (and a
check that it exits 0, i.e. shuts down cleanly)."""
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

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
        self.banner = self._read_banner()
        self.endpoint = self._field(r"S3 endpoint: (http://\S+)")
        self.admin = self._field(r"control API: (http://\S+)")
        self.access_key = self._field(r"AWS_ACCESS_KEY_ID=(\S+)")
        self.secret_key = self._field(r"AWS_SECRET_ACCESS_KEY=(\S+)")
        self.token = self._field(r"Bearer (\S+)'")
        self.port = int(self.endpoint.rsplit(":", 1)[1])

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

    def stderr(self):
        self.errlog.flush()
        self.errlog.seek(0)
        return self.errlog.read()[-20000:]

    def fail(self, msg):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
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
