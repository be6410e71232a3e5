#!/usr/bin/env python3
"""Crash test of the chunk store: kill a writer of chunks and metadata at random
moments and at named hook points (INEC_CRASH_AT), recover, and check that every
acknowledged write reads back byte-exact and nothing unacknowledged appears
half-written.

usage: store_crash.py HELPER [ITERATIONS]"""
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading

HOOKS = [None, None, "before_write", "mid_write", "after_write", "after_flush",
         "after_ack", "after_index", "compact_copied", "compact_switched", "meta_logged", "meta_applied"]


def run_writer(helper, data, it, seed, hook, gc):
    env = dict(os.environ, INEC_LOG="error")
    if hook:
        # compactions and metadata log applications (at metadata deletes and the
        # close) are few per run, writes many: hit counts that land inside the run
        few = "compact" in hook or hook == "meta_applied"
        env["INEC_CRASH_AT"] = f"{hook}:{random.randint(1, 4 if few else 25)}"
    cmd = [helper, "write", data, str(it * 1_000_000), "3", "40", str(seed), str(gc)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, env=env, text=True)
    timer = None
    if not hook:  # a kill at a random moment
        timer = threading.Timer(random.uniform(0.0, 0.06), p.send_signal, [signal.SIGKILL])
        timer.start()
    out, _ = p.communicate(timeout=120)
    if timer:
        timer.cancel()
    if p.returncode not in (0, -signal.SIGKILL):
        sys.exit(f"iteration {it}: writer failed rc={p.returncode}\n{out[-2000:]}")
    return out.splitlines(), p.returncode


def main():
    helper = sys.argv[1]
    iterations = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    random.seed(int(os.environ.get("STORE_CRASH_SEED", "1")))
    data = tempfile.mkdtemp(prefix="inec-store-crash-")
    model = {}  # chunk n -> (version, len) acknowledged, or None when deleted
    kills = {}
    acked = 0
    try:
        for it in range(1, iterations + 1):
            hook = random.choice(HOOKS)
            lines, rc = run_writer(helper, data, it, random.randint(1, 1 << 30), hook,
                                   random.randint(0, 1))
            if rc == -signal.SIGKILL:
                kills[hook or "random"] = kills.get(hook or "random", 0) + 1
            inflight = {}
            for line in lines:
                f = line.split()
                if not f or f[0] == "DONE":
                    continue
                n = ("m" if f[1] in "MX" else "c", int(f[2]))
                state = (int(f[3]), int(f[4])) if f[1] in "PM" else None
                if f[0] == "B":
                    inflight[n] = state
                elif f[0] == "A":
                    model[n] = state
                    inflight.pop(n)
                    acked += 1
                elif f[0] == "F":
                    inflight.pop(n)
                else:
                    sys.exit(f"iteration {it}: bad line {line!r}")
            chk = subprocess.run([helper, "check", data], capture_output=True, text=True,
                                 timeout=120, env=dict(os.environ, INEC_LOG="error"))
            if chk.returncode != 0:
                sys.exit(f"iteration {it}: check failed\n{chk.stdout}{chk.stderr}")
            present = {}
            for line in chk.stdout.splitlines():
                f = line.split()
                if f[0] == "S":
                    if f[1] != "0":
                        sys.exit(f"iteration {it}: scrub found {f[1]} corrupt chunks")
                    continue
                if f[4] != "ok":
                    sys.exit(f"iteration {it} hook={hook}: {line!r} reads wrong")
                present[("m" if f[0] == "M" else "c", int(f[1]))] = (int(f[2]), int(f[3]))
            for n in set(model) | set(present) | set(inflight):
                allowed = [model.get(n)]
                if n in inflight:  # killed mid-operation: either outcome is fine
                    allowed.append(inflight[n])
                if present.get(n) not in allowed:
                    sys.exit(f"iteration {it} hook={hook}: {n} is {present.get(n)}, "
                             f"expected one of {allowed}")
                model[n] = present.get(n)
        hooks = " ".join(f"{k}={v}" for k, v in sorted(kills.items()))
        print(f"store crash test: {iterations} iterations, {sum(kills.values())} kills ({hooks}), "
              f"{acked} acknowledged operations verified, "
              f"{sum(v is not None for k, v in model.items() if k[0] == 'c')} chunks and "
              f"{sum(v is not None for k, v in model.items() if k[0] == 'm')} metadata records "
              "stored")
    finally:
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
