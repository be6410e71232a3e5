#!/usr/bin/env python3
"""Chaos harness: a real multi-process cluster (9 `inec node` + `inec gateway`,
scripts/cluster.sh, RS(6,3)) under concurrent boto3 writers, overwriters and
deleters while nodes and the gateway are SIGKILLed and SIGSTOPped at random;
then verification of everything that was acknowledged.

  chaos.py INEC [--seconds 60] [--seed N] [--workers 3] [--max-down M]
                [--gateway-faults] [--inject-fault] [--self-check]
                [--strict] [--report FILE] [--keep]

Each worker owns its keys, so every key's history is one sequence: an
acknowledged PUT or DELETE sets what the key must read as; an operation that
failed (an error status, a cut connection) may or may not have taken effect, so
until the next acknowledgement its outcome is also legal. Reads during the run
check the same. The chaos thread never has more than --max-down nodes (default
m) killed or stopped at once; with --gateway-faults (default on) it also kills
and stops the gateway. At the end every process is brought back, every key is
read and checked (acknowledged content byte-exact, acknowledged deletes 404,
nothing resurrected), then m nodes are killed at once and every key is read
again.

Verifying the verifier: --inject-fault overwrites one acknowledged key and
deletes another behind the harness's back before the final verification, which
must then report violations (exit 1). --self-check does the same after a clean
verification and fails unless both injected faults are reported (that is what
the suite runs).

The run is seeded (--seed, printed): the chaos schedule, the operations, keys
and bodies are drawn from it; timing on a shared machine is not reproducible,
so neither is the exact interleaving. A report (JSON with --report, a summary on
stdout) gives acknowledgements, failures by code, kills, violations with
evidence, spurious 503s (a 503 while fewer nodes were down than the operation
tolerates), cut bodies (a 200 whose body was cut while the gateway lived) and
500s. Exit 1 on violations or 500s (--strict: also spurious 503s and cut bodies).
"""
import argparse
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from inec_server import SCRIPTS, InecCluster, _pid_alive  # noqa: E402

try:
    import boto3
    from botocore.config import Config
    from botocore.exceptions import (BotoCoreError, ClientError, ConnectionClosedError,
                                     EndpointConnectionError, ReadTimeoutError,
                                     ResponseStreamingError)
except ImportError:
    sys.exit("boto3 is missing: run scripts/deps.sh (python3-boto3)")

BUCKET = "chaos"
GRACE_S = 3.0  # a node counts as down this long after it is back (detector, reconnects)
K, N = 6, 9    # RS(6,3), scripts/cluster.sh's default profile for 9 nodes
M = N - K
WRITE_QUORUM = K + 1


def sha(b):
    return hashlib.sha256(b).hexdigest()


class Timeline:
    """When each node and the gateway were down: [(start, end or None)]."""

    def __init__(self, names):
        self.lock = threading.Lock()
        self.down = {n: [] for n in names}

    def begin(self, name):
        with self.lock:
            self.down[name].append([time.monotonic(), None])

    def end(self, name):
        with self.lock:
            if self.down[name] and self.down[name][-1][1] is None:
                self.down[name][-1][1] = time.monotonic()

    def is_down(self, name):
        with self.lock:
            return bool(self.down[name]) and self.down[name][-1][1] is None

    def count(self, names, t0, t1, grace=GRACE_S):
        """The most of `names` that were down together at any moment of [t0, t1]
        (a node back within `grace` before t0 still counts)."""
        with self.lock:
            spans = []
            for n in names:
                for a, b in self.down[n]:
                    b = time.monotonic() if b is None else b
                    if a <= t1 and b + grace >= t0:
                        spans.append((max(a, t0), min(b + grace, t1)))
        points = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans],
                        key=lambda p: (p[0], -p[1]))
        best = cur = 0
        for _, d in points:
            cur += d
            best = max(best, cur)
        return best

    def any_down(self, name, t0, t1):
        return self.count([name], t0, t1, grace=0) > 0


class Key:
    def __init__(self, name):
        self.name = name
        self.acked = None     # ("put", sha, size) or ("del",): what it must read as
        self.pending = []     # outcomes of failed operations since the last ack
        self.history = []     # (t, op, state, result): evidence

    def legal(self):
        states = {self.acked or ("del",)}
        states.update(self.pending)
        return states


class Report:
    def __init__(self):
        self.lock = threading.Lock()
        self.ops = {}         # op -> count
        self.acks = {}        # op -> count
        self.failures = {}    # "op code" -> count
        self.violations = []  # {"key", "kind", "expected", "got", "t", "phase"}
        self.spurious_503 = []
        self.cut_bodies = []
        self.http_500 = []
        self.failure_log = []  # every failure with its evidence
        self.chaos = {}       # action -> count
        self.phases = {}

    def add(self, d, k, n=1):
        with self.lock:
            d[k] = d.get(k, 0) + n

    def append(self, lst, item):
        with self.lock:
            lst.append(item)


def client(srv, timeout=60):
    return boto3.client(
        "s3", endpoint_url=srv.endpoint, region_name="us-east-1",
        aws_access_key_id=srv.access_key, aws_secret_access_key=srv.secret_key,
        config=Config(signature_version="s3v4", retries={"max_attempts": 1},
                      connect_timeout=5, read_timeout=timeout,
                      s3={"addressing_style": "path"}))


def classify(e):
    """(code, http status or None, cut) for an exception of a boto3 call."""
    if isinstance(e, ClientError):
        st = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return e.response.get("Error", {}).get("Code", "?"), st, False
    if isinstance(e, (ResponseStreamingError, ConnectionClosedError)):
        return "cut", None, True
    if isinstance(e, (EndpointConnectionError,)):
        return "refused", None, False
    if isinstance(e, ReadTimeoutError):
        return "timeout", None, False
    if isinstance(e, BotoCoreError):
        return type(e).__name__, None, False
    if isinstance(e, (ConnectionError, OSError)):
        return type(e).__name__, None, True
    raise e


class Chaos:
    def __init__(self, args, inec):
        self.args = args
        self.seed = args.seed
        self.rng = random.Random(self.seed)
        # 64 KiB chunks: a stripe is 384 KiB, so objects of a few MiB span many.
        os.environ.setdefault("INEC_CHUNK", "65536")
        self.srv = InecCluster(inec)
        self.nodes = self.srv.nodes()
        # The gateway must come back with the same credentials after a kill.
        cfg_path = os.path.join(self.srv.dir, "cluster.json")
        cfg = json.load(open(cfg_path))
        cfg["gateway"].update(access_key=self.srv.access_key, secret_key=self.srv.secret_key,
                              admin_token=self.srv.token)
        json.dump(cfg, open(cfg_path, "w"), indent=2)
        self.timeline = Timeline(self.nodes + ["gateway"])
        self.report = Report()
        self.stopped = {}  # name -> SIGCONT due (monotonic)
        self.killed = set()
        self.ctl = threading.Lock()  # one chaos action at a time (and the final restore)
        self.log_gen = 0
        self.end = 0.0
        self.keys = {}
        self.objects = {}
        s3 = client(self.srv)
        s3.create_bucket(Bucket=BUCKET)

    # ---- processes ----

    def pid(self, name):
        return self.srv.pid(name)

    def rotate_logs(self, names):
        """cluster.sh truncates a restarted process's log: keep the old one."""
        self.log_gen += 1
        for n in names:
            p = os.path.join(self.srv.dir, n + ".log")
            if os.path.exists(p):
                os.rename(p, "%s.%d" % (p, self.log_gen))

    def restart(self):
        """Brings back every killed process (cluster.sh start restarts what is dead)."""
        dead = sorted(self.killed)
        if not dead:
            return
        self.rotate_logs(dead)
        r = subprocess.run(["bash", os.path.join(SCRIPTS, "cluster.sh"), "start", str(N),
                            self.srv.dir], env=self.srv.env, capture_output=True, text=True,
                           timeout=300)
        if r.returncode != 0:
            raise RuntimeError("cluster.sh start: %s%s" % (r.stdout, r.stderr))
        if "gateway" in dead:
            self.wait_gateway()
            self.srv.gateway = self.pid("gateway")
        for n in dead:
            self.timeline.end(n)
            self.killed.discard(n)

    def wait_gateway(self):
        deadline = time.monotonic() + 120
        while "/admin/v1/cluster" not in self.srv.stderr():
            if time.monotonic() > deadline:
                raise RuntimeError("the gateway did not come back:\n" + self.srv.stderr())
            time.sleep(0.1)

    def kill(self, name):
        pid = self.pid(name)
        self.timeline.begin(name)
        os.kill(pid, signal.SIGKILL)
        while _pid_alive(pid):
            time.sleep(0.02)
        self.killed.add(name)
        self.report.add(self.report.chaos, ("gateway" if name == "gateway" else "node") + " SIGKILL")

    def stop(self, name, seconds):
        self.timeline.begin(name)
        os.kill(self.pid(name), signal.SIGSTOP)
        self.stopped[name] = time.monotonic() + seconds
        self.report.add(self.report.chaos, ("gateway" if name == "gateway" else "node") + " SIGSTOP")

    def cont(self, name):
        os.kill(self.pid(name), signal.SIGCONT)
        del self.stopped[name]
        self.timeline.end(name)

    def nodes_down(self):
        return [n for n in self.nodes if n in self.killed or n in self.stopped]

    def chaos_main(self):
        rng = self.rng
        while time.monotonic() < self.end:
            time.sleep(rng.uniform(0.5, 2.5))
            with self.ctl:
                now = time.monotonic()
                for n, due in list(self.stopped.items()):
                    if due <= now:
                        self.cont(n)
                r = rng.random()
                down = self.nodes_down()
                if self.args.gateway_faults and r < 0.04 and "gateway" not in self.stopped:
                    self.kill("gateway")
                    self.restart()  # brings back killed nodes too
                elif self.args.gateway_faults and r < 0.08 and "gateway" not in self.stopped:
                    self.stop("gateway", rng.uniform(0.5, 3.0))
                elif r < 0.35 and self.killed:
                    self.restart()
                elif len(down) < self.args.max_down:
                    up = [n for n in self.nodes if n not in down]
                    victim = rng.choice(up)
                    if rng.random() < 0.65:
                        self.kill(victim)
                    else:
                        self.stop(victim, rng.uniform(1.0, 6.0))
        with self.ctl:
            self.restore()

    def restore(self):
        for n in list(self.stopped):
            self.cont(n)
        self.restart()

    # ---- workers ----

    def body(self, rng):
        r = rng.random()
        if r < 0.6:
            size = rng.randrange(0, 64 << 10)
        elif r < 0.93:
            size = rng.randrange(64 << 10, 1 << 20)
        else:
            size = rng.randrange(1 << 20, 3 << 20)  # many stripes of 6 x 64 KiB
        return rng.randbytes(size)

    def tolerated(self, op):
        """Nodes that may be down with the operation still expected to succeed."""
        return N - WRITE_QUORUM if op == "put" else M

    def failed(self, op, key, e, t0, phase):
        code, status, cut = classify(e)
        t1 = time.monotonic()
        rep = self.report
        rep.add(rep.failures, "%s %s" % (op, code if status is None else "%s %d" % (code, status)))
        gw_down = self.timeline.any_down("gateway", t0 - GRACE_S, t1)
        down = self.timeline.count(self.nodes, t0, t1)
        ev = {"key": key.name, "op": op, "code": code, "status": status, "phase": phase,
              "t": round(t0 - self.t_start, 3), "nodes_down": down, "gateway_down": gw_down}
        if status == 500 or (status is not None and status >= 500 and status != 503):
            rep.append(rep.http_500, ev)
        rep.append(rep.failure_log, ev)
        if status == 503 and not gw_down and down <= self.tolerated(op) and \
                not self.degraded_object(key, down):
            rep.append(rep.spurious_503, ev)
        if cut and not gw_down:
            rep.append(rep.cut_bodies, ev)
        return code

    def degraded_object(self, key, down):
        """A GET 503 is no fault if the object's record already lacks chunks
        (a degraded write) that, with the nodes down, exceed m."""
        if key.acked is None or key.acked[0] != "put":
            return False
        try:
            req = urllib.request.Request(
                "%s/admin/v1/objects/%s/%s" % (self.srv.admin, BUCKET, key.name),
                headers={"Authorization": "Bearer " + self.srv.token})
            obj = json.loads(urllib.request.urlopen(req, timeout=60).read())
        except Exception:
            return False
        worst = 0
        for st in obj.get("stripes", []):
            worst = max(worst, sum(c.get("state") == "missing" for c in st.get("chunks", [])))
        return worst + down > M

    def check_read(self, s3, key, phase):
        """GET the key and compare with what is legal; a violation has evidence."""
        t0 = time.monotonic()
        self.report.add(self.report.ops, "get")
        try:
            got = s3.get_object(Bucket=BUCKET, Key=key.name)["Body"].read()
            state = ("put", sha(got), len(got))
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                state = ("del",)
            else:
                return self.failed("get", key, e, t0, phase)
        except Exception as e:
            return self.failed("get", key, e, t0, phase)
        self.report.add(self.report.acks, "get")
        legal = key.legal()
        if state not in legal:
            acked = key.acked or ("del",)
            kind = ("resurrected" if acked == ("del",) and state[0] == "put"
                    else "lost" if state == ("del",) else "wrong-bytes")
            self.report.append(self.report.violations, {
                "key": key.name, "kind": kind, "phase": phase,
                "t": round(t0 - self.t_start, 3),
                "expected": sorted(map(list, legal)), "got": list(state),
                "history": key.history[-6:]})
            return "violation"
        return "ok"

    def worker(self, w):
        rng = random.Random(self.seed * 1009 + w)
        s3 = client(self.srv)
        mine = [Key("w%d/k%03d" % (w, i)) for i in range(self.args.keys)]
        for k in mine:
            self.keys[k.name] = k
        while time.monotonic() < self.end:
            key = rng.choice(mine)
            r = rng.random()
            t0 = time.monotonic()
            if r < 0.45:
                data = self.body(rng)
                state = ("put", sha(data), len(data))
                self.report.add(self.report.ops, "put")
                try:
                    s3.put_object(Bucket=BUCKET, Key=key.name, Body=data)
                    key.acked, key.pending = state, []
                    self.report.add(self.report.acks, "put")
                    res = "ack"
                except Exception as e:
                    key.pending.append(state)
                    res = self.failed("put", key, e, t0, "run")
                key.history.append([round(t0 - self.t_start, 3), "put", list(state), res])
            elif r < 0.6:
                self.report.add(self.report.ops, "delete")
                try:
                    s3.delete_object(Bucket=BUCKET, Key=key.name)
                    key.acked, key.pending = ("del",), []
                    self.report.add(self.report.acks, "delete")
                    res = "ack"
                except Exception as e:
                    key.pending.append(("del",))
                    res = self.failed("delete", key, e, t0, "run")
                key.history.append([round(t0 - self.t_start, 3), "delete", ["del"], res])
            else:
                res = self.check_read(s3, key, "run")
                key.history.append([round(t0 - self.t_start, 3), "get", None, res])

    # ---- verification ----

    def cluster_up(self, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                req = urllib.request.Request(self.srv.admin + "/admin/v1/cluster",
                                             headers={"Authorization": "Bearer " + self.srv.token})
                c = json.loads(urllib.request.urlopen(req, timeout=30).read())
                if all(n.get("up") and n.get("peer_state", "up") == "up" for n in c["nodes"]):
                    return True
            except Exception:
                pass
            time.sleep(0.5)
        return False

    def lost_by_design(self, name, victims):
        """True when a stripe of the key's current object, with the chunks its
        record already lacks (a degraded write not yet repaired) and those on
        `victims`, has lost more than m: unreadable by design, no violation."""
        obj = self.objects.get(name)
        for st in (obj or {}).get("stripes", []):
            lost = sum(c.get("state") == "missing" or c.get("node") in victims
                       for c in st.get("chunks", []))
            if lost > M:
                return True
        return False

    def snapshot_objects(self):
        """Each acknowledged object's chunk states (all nodes up), for lost_by_design."""
        self.objects = {}
        for name, key in self.keys.items():
            if not key.acked or key.acked[0] != "put":
                continue
            try:
                req = urllib.request.Request(
                    "%s/admin/v1/objects/%s/%s" % (self.srv.admin, BUCKET, name),
                    headers={"Authorization": "Bearer " + self.srv.token})
                self.objects[name] = json.loads(urllib.request.urlopen(req, timeout=60).read())
            except Exception:
                pass

    def verify(self, phase, victims=()):
        s3 = client(self.srv)
        before = len(self.report.violations)
        checked = failed = 0
        for name in sorted(self.keys):
            key = self.keys[name]
            if key.acked is None and not key.pending:
                continue
            checked += 1
            res = self.check_read(s3, key, phase)
            if res not in ("ok", "violation") and victims and self.lost_by_design(name, victims):
                self.report.add(self.report.failures, "%s: degraded write, m more down" % phase)
            elif res not in ("ok", "violation"):
                failed += 1
                # With at most m nodes down every acknowledged key must read.
                self.report.append(self.report.violations, {
                    "key": name, "kind": "unreadable", "phase": phase, "got": res,
                    "expected": sorted(map(list, key.legal())), "history": key.history[-6:]})
        self.report.phases[phase] = {"keys": checked, "violations":
                                     len(self.report.violations) - before, "unreadable": failed}
        return len(self.report.violations) - before

    def inject(self):
        """Behind the harness's back: one acknowledged PUT overwritten, one
        deleted. Returns how many faults were injected."""
        s3 = client(self.srv)
        puts = sorted(n for n, k in self.keys.items() if k.acked and k.acked[0] == "put")
        rng = random.Random(self.seed + 7)
        victims = rng.sample(puts, min(2, len(puts)))
        if victims:
            s3.put_object(Bucket=BUCKET, Key=victims[0], Body=b"not what was acknowledged")
        if len(victims) > 1:
            s3.delete_object(Bucket=BUCKET, Key=victims[1])
        return len(victims)

    def run(self):
        a = self.args
        self.t_start = time.monotonic()
        self.end = self.t_start + a.seconds
        print("chaos: seed=%d seconds=%d workers=%d max_down=%d dir=%s"
              % (self.seed, a.seconds, a.workers, a.max_down, self.srv.dir), flush=True)
        threads = [threading.Thread(target=self.worker, args=(w,)) for w in range(a.workers)]
        threads.append(threading.Thread(target=self.chaos_main))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if not self.cluster_up():
            self.report.append(self.report.violations, {"kind": "cluster-not-up",
                                                        "phase": "restore"})
        if a.inject_fault:
            self.inject()
        self.verify("all-up")
        self.snapshot_objects()
        victims = random.Random(self.seed + 1).sample(self.nodes, M)
        with self.ctl:
            for n in victims:
                self.kill(n)
        self.verify("m-down:" + ",".join(victims), victims)
        with self.ctl:
            self.restart()
        self.cluster_up()
        if a.self_check:
            clean = len(self.report.violations)
            injected = self.inject()
            found = self.verify("self-check")
            del self.report.violations[clean:]  # expected ones: not this run's
            self.report.phases["self-check"]["injected"] = injected
            if found < injected:
                self.report.append(self.report.violations, {
                    "kind": "verifier-blind", "phase": "self-check",
                    "got": "%d of %d injected faults reported" % (found, injected)})

    def summary(self):
        r = self.report
        out = {"seed": self.seed, "seconds": self.args.seconds, "workers": self.args.workers,
               "max_down": self.args.max_down, "ops": r.ops, "acks": r.acks,
               "failures": r.failures, "chaos": r.chaos, "phases": r.phases,
               "violations": r.violations, "spurious_503": r.spurious_503,
               "cut_bodies": r.cut_bodies, "http_500": r.http_500,
               "failure_log": r.failure_log}
        return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("inec")
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--keys", type=int, default=40, help="keys per worker")
    p.add_argument("--max-down", type=int, default=M)
    p.add_argument("--no-gateway-faults", dest="gateway_faults", action="store_false")
    p.add_argument("--inject-fault", action="store_true")
    p.add_argument("--self-check", action="store_true")
    p.add_argument("--strict", action="store_true")
    p.add_argument("--report")
    p.add_argument("--keep", action="store_true")
    a = p.parse_args()
    if a.seed is None:
        a.seed = random.SystemRandom().randrange(1 << 31)
    if not 0 <= a.max_down <= M:
        p.error("--max-down must be in [0, %d]: more loses data by design" % M)
    c = Chaos(a, a.inec)
    try:
        c.run()
    finally:
        with c.ctl:
            c.restore()
    s = c.summary()
    for f in sorted(os.listdir(c.srv.dir)):  # the logs of killed processes too
        if ".log" in f:
            with open(os.path.join(c.srv.dir, f), errors="replace") as fh:
                log = fh.read()
            if "Sanitizer" in log or "runtime error:" in log:
                s["violations"].append({"kind": "sanitizer", "log": f, "tail": log[-3000:]})
    if a.report:
        with open(a.report, "w") as f:
            json.dump(s, f, indent=2)
    print(json.dumps({k: s[k] for k in ("seed", "ops", "acks", "failures", "chaos", "phases")},
                     indent=1))
    for k in ("violations", "spurious_503", "cut_bodies", "http_500"):
        print("%s: %d" % (k, len(s[k])))
        for item in s[k][:10]:
            print("  " + json.dumps(item))
    bad = s["violations"] or s["http_500"] or (a.strict and (s["spurious_503"] or s["cut_bodies"]))
    c.srv.stop(keep=a.keep or bool(bad))  # also checks the logs for sanitizer reports
    if bad:
        print("FAIL (seed %d; cluster kept in %s)" % (a.seed, c.srv.dir))
        sys.exit(1)
    print("ok (seed %d)" % a.seed)


if __name__ == "__main__":
    main()
