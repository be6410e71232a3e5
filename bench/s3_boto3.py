#!/usr/bin/env python3
"""S3 PUT and GET throughput and latency through boto3 (Debian's python3-boto3),
the client most users script with, against any S3 endpoint: inec, Ceph RGW,
MinIO... so their figures can be put side by side, measured the same way.

boto3 over plain HTTP signs every payload (SHA-256 of the body in the
signature), as users' scripts send it. Each client is its own process (the GIL
would otherwise cap what one Python process can drive), with its own
connection, writing and reading its own keys; a cell is one object size at one
client count, PUT then GET, each for --seconds. Every GET body is checked.

Where clients and server share a machine, the clients' CPU bounds what any
server can reach: each cell reports the clients' CPU per request (cli_ms) and,
with --server-pid, the server's (srv_ms), read from /proc. The CPU ceiling
(cpu_ops) is what this machine's cores could do at that total cost.

  bench/s3_boto3.py [--endpoint http://127.0.0.1:9000] [--data inec-data]
                    [--size 4K,1M,16M] [--clients 1,4,16] [--seconds 8] [--json]
                    [--server-pid PID]

Keys: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, else the credentials.json of
--data (what `inec server` writes). The bucket it creates is deleted at the end.
"""
import argparse
import hashlib
import json
import multiprocessing
import os
import sys
import time

try:
    import boto3
    from botocore.config import Config
except ImportError:
    sys.exit("s3_boto3: boto3 is missing (apt-get install python3-boto3)")

SUFFIX = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
KEYS_PER_CLIENT = 4


def parse_size(text):
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    mult = SUFFIX.get(t[-1:], 1)
    digits = t[:-1] if t[-1:] in SUFFIX else t
    if not digits.isdigit() or int(digits) < 1:
        raise argparse.ArgumentTypeError("bad size %r (e.g. 4K, 1M, 16M)" % text)
    return int(digits) * mult


def size_text(n):
    for s, m in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n % m == 0:
            return "%d%s" % (n // m, s)
    return str(n)


def client(args):
    return boto3.client(
        "s3", endpoint_url=args["endpoint"], region_name=args["region"],
        aws_access_key_id=args["key"], aws_secret_access_key=args["secret"],
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                      retries={"max_attempts": 1}, max_pool_connections=1))


def body_for(size, worker, k):
    # Distinct per key, cheap to make: a repeated 4 KiB block that names its key.
    seed = hashlib.sha256(b"%d/%d/%d" % (size, worker, k)).digest() * 128
    return (seed * (size // len(seed) + 1))[:size]


def run_worker(args, worker, size, op, start, seconds, out):
    s3 = client(args)
    bodies = [body_for(size, worker, k) for k in range(KEYS_PER_CLIENT)]
    keys = ["w%d-%s-%d" % (worker, size_text(size), k) for k in range(KEYS_PER_CLIENT)]
    lat, errors, bad = [], 0, 0
    while time.time() < start:
        time.sleep(0.001)
    end, i = start + seconds, 0
    cpu0 = os.times()
    while True:
        k = i % KEYS_PER_CLIENT
        t = time.perf_counter()
        try:
            if op == "PUT":
                s3.put_object(Bucket=args["bucket"], Key=keys[k], Body=bodies[k])
            else:
                got = s3.get_object(Bucket=args["bucket"], Key=keys[k])["Body"].read()
                bad += got != bodies[k]
            lat.append(time.perf_counter() - t)
        except Exception:  # counted, not fatal: a benchmark reports what it saw
            errors += 1
        i += 1
        if time.time() >= end and i >= KEYS_PER_CLIENT:
            break
    cpu1 = os.times()
    cpu = cpu1.user - cpu0.user + cpu1.system - cpu0.system
    out.put((worker, lat, errors, bad, time.time() - start, cpu))


def percentile(sorted_lat, q):
    if not sorted_lat:
        return 0.0
    return sorted_lat[min(len(sorted_lat) - 1, int(q * len(sorted_lat)))]


def process_cpu(pid):
    """The CPU seconds (user + system) process pid has used, or None."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cell(args, size, clients, op, seconds):
    out = multiprocessing.Queue()
    srv0 = process_cpu(args["server_pid"]) if args["server_pid"] else None
    start = time.time() + 0.5 + 0.05 * clients  # every process started before the clock runs
    procs = [multiprocessing.Process(target=run_worker,
                                     args=(args, w, size, op, start, seconds, out))
             for w in range(clients)]
    for p in procs:
        p.start()
    results = [out.get() for _ in procs]
    for p in procs:
        p.join()
    srv1 = process_cpu(args["server_pid"]) if srv0 is not None else None
    lat = sorted(x for r in results for x in r[1])
    ops, errors = len(lat), sum(r[2] for r in results)
    bad = sum(r[3] for r in results)
    wall = max(r[4] for r in results)  # from the common start to the last client's last answer
    cli_ms = sum(r[5] for r in results) / max(ops, 1) * 1e3
    # The server's CPU from before the clients started to after they ended: it
    # idles while they start, so the cost per request is only slightly high.
    srv_ms = (srv1 - srv0) / max(ops, 1) * 1e3 if srv1 is not None else None
    per_op = cli_ms + (srv_ms or 0.0)
    return {"size": size, "size_text": size_text(size), "clients": clients, "op": op,
            "ops": ops, "errors": errors, "bad_bodies": bad, "ops_per_s": ops / wall,
            "mbps": ops * size / wall / 1e6, "p50_ms": percentile(lat, 0.5) * 1e3,
            "p99_ms": percentile(lat, 0.99) * 1e3, "client_cpu_ms": cli_ms,
            "server_cpu_ms": srv_ms,
            "cpu_ceiling_ops_per_s": os.cpu_count() * 1e3 / per_op if per_op > 0 else None}


def credentials(data):
    """(access key, secret, endpoint or None)."""
    key, secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
    if key and secret:
        return key, secret, None
    path = os.path.join(data, "credentials.json")
    try:
        with open(path) as f:
            c = json.load(f)
        return c["access_key"], c["secret_key"], c.get("s3_endpoint")
    except (OSError, KeyError, ValueError) as e:
        sys.exit("s3_boto3: no keys: set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or point "
                 "--data at a directory with credentials.json (%s)" % e)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--endpoint", default=None,
                    help="S3 endpoint (default: credentials.json's, else http://127.0.0.1:9000)")
    ap.add_argument("--data", default=os.environ.get("INEC_DATA", "inec-data"),
                    help="where credentials.json is, when the keys are not in the environment")
    ap.add_argument("--region", default=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
    ap.add_argument("--size", default=None, help="object sizes, K/M/G suffixes (4K,1M,16M)")
    ap.add_argument("--clients", default=None, help="client counts (1,4,16)")
    ap.add_argument("--seconds", type=float, default=None, help="per phase per cell (8)")
    ap.add_argument("--quick", action="store_true", help="4K,1M x 1,4 clients, 1 s a phase")
    ap.add_argument("--json", action="store_true", help="one JSON document, no table")
    ap.add_argument("--server-pid", type=int, default=None,
                    help="the server's process on this machine: report its CPU per request")
    a = ap.parse_args()
    try:
        sizes = [parse_size(s) for s in (a.size or ("4K,1M" if a.quick else "4K,1M,16M")).split(",")]
        clients = [int(c) for c in (a.clients or ("1,4" if a.quick else "1,4,16")).split(",")]
    except (argparse.ArgumentTypeError, ValueError) as e:
        ap.error(str(e))
    if any(c < 1 or c > 64 for c in clients):
        ap.error("--clients: 1..64")
    seconds = a.seconds if a.seconds is not None else (1.0 if a.quick else 8.0)
    if not 0 < seconds <= 600:
        ap.error("--seconds: 0..600")
    if a.server_pid is not None and process_cpu(a.server_pid) is None:
        ap.error("--server-pid: no process %d here" % a.server_pid)
    key, secret, endpoint = credentials(a.data)
    a.endpoint = a.endpoint or endpoint or "http://127.0.0.1:9000"
    args = {"endpoint": a.endpoint, "region": a.region, "key": key, "secret": secret,
            "bucket": "s3-boto3-bench-%d" % os.getpid(), "server_pid": a.server_pid}
    s3 = client(args)
    s3.create_bucket(Bucket=args["bucket"])
    rows = []
    try:
        if not a.json:
            print("%-5s %7s %-4s %9s %9s %8s %8s %6s %7s %7s %8s" % (
                "size", "clients", "op", "ops/s", "MB/s", "p50_ms", "p99_ms", "errors",
                "cli_ms", "srv_ms", "cpu_ops"))
        for size in sizes:
            for n in clients:
                for op in ("PUT", "GET"):
                    r = cell(args, size, n, op, seconds)
                    rows.append(r)
                    if not a.json:
                        srv = r["server_cpu_ms"]
                        print("%-5s %7d %-4s %9.1f %9.1f %8.2f %8.2f %6d %7.2f %7s %8.0f" % (
                            r["size_text"], n, op, r["ops_per_s"], r["mbps"], r["p50_ms"],
                            r["p99_ms"], r["errors"] + r["bad_bodies"], r["client_cpu_ms"],
                            "-" if srv is None else "%.2f" % srv, r["cpu_ceiling_ops_per_s"]),
                              flush=True)
    finally:
        for size in sizes:
            for w in range(max(clients)):
                for k in range(KEYS_PER_CLIENT):
                    try:
                        s3.delete_object(Bucket=args["bucket"],
                                         Key="w%d-%s-%d" % (w, size_text(size), k))
                    except Exception:
                        pass
        s3.delete_bucket(Bucket=args["bucket"])
    if a.json:
        print(json.dumps({"bench": "s3_boto3", "endpoint": a.endpoint,
                          "boto3": boto3.__version__, "seconds": seconds, "results": rows},
                         indent=2))
    return 1 if any(r["bad_bodies"] or r["ops"] == 0 for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
