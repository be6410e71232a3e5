#!/usr/bin/env python3
"""bench/s3_boto3.py, tiny, against a real `inec server`, so it does not rot:
keys found in the data directory's credentials.json, every cell measured with
every GET body checked, the JSON shape, the CPU per request of clients and
server (--server-pid), the bucket removed after. Timing is not checked. argv[1]: the inec binary, argv[2]: bench/s3_boto3.py."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inec_server import InecServer  # noqa: E402

srv = InecServer(sys.argv[1])
env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
out = subprocess.run([sys.executable, sys.argv[2], "--data", srv.data, "--size", "4K,64K",
                      "--clients", "1,2", "--seconds", "0.2", "--json",
                      "--server-pid", str(srv.proc.pid)],
                     capture_output=True, text=True, env=env, timeout=300)
if out.returncode != 0:
    srv.fail("s3_boto3.py exit %d:\n%s\n%s" % (out.returncode, out.stdout, out.stderr))
doc = json.loads(out.stdout)
rows = doc["results"]
if doc["bench"] != "s3_boto3" or len(rows) != 8:
    srv.fail("unexpected document: %s" % doc)
for r in rows:
    if r["ops"] < r["clients"] or r["errors"] or r["bad_bodies"] or r["mbps"] <= 0:
        srv.fail("cell %s" % r)
    # Every request costs both sides CPU; the ceiling is what it says.
    if not (r["client_cpu_ms"] > 0 and r["server_cpu_ms"] > 0):
        srv.fail("no CPU per request in cell %s" % r)
    want = os.cpu_count() * 1e3 / (r["client_cpu_ms"] + r["server_cpu_ms"])
    if abs(r["cpu_ceiling_ops_per_s"] - want) > 1e-6 * want:
        srv.fail("cpu ceiling %s, not %s" % (r["cpu_ceiling_ops_per_s"], want))
bad = subprocess.run([sys.executable, sys.argv[2], "--data", srv.data, "--size", "1Q"],
                     capture_output=True, text=True, env=env, timeout=60)
if bad.returncode != 2 or "1Q" not in bad.stderr:
    srv.fail("--size 1Q: exit %d, %s" % (bad.returncode, bad.stderr))
gone = subprocess.run([sys.executable, sys.argv[2], "--data", srv.data, "--server-pid", "0"],
                      capture_output=True, text=True, env=env, timeout=60)
if gone.returncode != 2 or "--server-pid" not in gone.stderr:
    srv.fail("--server-pid 0: exit %d, %s" % (gone.returncode, gone.stderr))
import boto3  # noqa: E402
s3 = boto3.client("s3", endpoint_url=srv.endpoint, region_name="us-east-1",
                  aws_access_key_id=srv.access_key, aws_secret_access_key=srv.secret_key)
left = [b["Name"] for b in s3.list_buckets()["Buckets"]]
if left:
    srv.fail("the benchmark left buckets behind: %s" % left)
srv.stop()
print("s3_boto3_bench: ok")
