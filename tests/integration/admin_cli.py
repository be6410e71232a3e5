#!/usr/bin/env python3
"""`inec admin` against a real `inec server`: S3 key pairs (a created pair
signs boto3 requests, the list never shows a secret, a revoked pair is refused
with InvalidAccessKeyId, the primary one cannot be revoked, pairs survive a
restart), pools (create, list, show, a bad profile's error), repair and node
states reached through `inec admin`, an object's layout, --json everywhere, and
one clear line with exit 1 for API errors and a wrong token.
argv[1]: the inec binary."""
import atexit
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inec_server import InecServer  # noqa: E402

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

INEC = sys.argv[1]
srv = InecServer(INEC)
atexit.register(lambda: srv.proc.poll() is None and srv.proc.kill())


def admin(*args, token=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("INEC_")}
    args = ["--data", srv.data, *args] if token is None else \
        ["--endpoint", srv.admin, "--token", token, *args]
    return subprocess.run([INEC, "admin", *args], capture_output=True, text=True, timeout=60,
                          env=e)


def expect(cond, msg, r=None):
    if not cond:
        srv.fail(msg + ("" if r is None else "\nrc=%d\nstdout:\n%s\nstderr:\n%s"
                        % (r.returncode, r.stdout, r.stderr)))


def ok(*args):
    r = admin(*args)
    expect(r.returncode == 0, "inec admin %s" % " ".join(args), r)
    return r


def s3_with(access, secret):
    return boto3.client("s3", endpoint_url=srv.endpoint, region_name="us-east-1",
                        aws_access_key_id=access, aws_secret_access_key=secret,
                        config=Config(signature_version="s3v4", retries={"max_attempts": 1},
                                      s3={"addressing_style": "path"}))


# Key pairs.
r = ok("keys", "create", "app one")
expect("AWS_SECRET_ACCESS_KEY=" in r.stdout and "app one" in r.stdout, "keys create", r)
created = json.loads(ok("keys", "create", "app-two", "--json").stdout)
expect(set(created) >= {"access_key", "secret_key", "name", "created"}, "keys create --json")
keys = json.loads(ok("keys", "--json").stdout)
expect(len(keys) == 3 and keys[0]["primary"] and keys[0]["access_key"] == srv.access_key
       and all("secret_key" not in k for k in keys), "keys list: %r" % keys)
expect(created["secret_key"] not in ok("keys", "list").stdout, "the list shows a secret")
s3 = s3_with(created["access_key"], created["secret_key"])
s3.create_bucket(Bucket="admin-test")
s3.put_object(Bucket="admin-test", Key="dir/obj", Body=b"x" * (3 << 20))
got = s3_with(srv.access_key, srv.secret_key).get_object(Bucket="admin-test", Key="dir/obj")
expect(got["Body"].read() == b"x" * (3 << 20), "the primary pair reads what the new one wrote")
try:
    s3_with(created["access_key"], "wrong" + created["secret_key"][5:]).list_buckets()
    expect(False, "a wrong secret was accepted")
except ClientError as e:
    expect(e.response["Error"]["Code"] == "SignatureDoesNotMatch", "wrong secret: %s" % e)

# An object's layout.
r = ok("object", "admin-test", "dir/obj")
expect("admin-test/dir/obj: 3.0 MiB" in r.stdout and "stripe 0:" in r.stdout, "object", r)
lay = json.loads(ok("object", "admin-test", "dir/obj", "--json").stdout)
expect(lay["size"] == 3 << 20 and len(lay["stripes"]) >= 1, "object --json")
s3.put_object(Bucket="admin-test", Key="small", Body=b"y" * 1000)
r = ok("object", "admin-test", "small")
line = [x for x in r.stdout.splitlines() if "inline RS(4,3) in its records:" in x]
expect(len(line) == 1 and sorted(int(x.split("@")[0]) for x in line[0].split(":")[1].split())
       == list(range(7)), "an inline object's shards on its 7 homes", r)

# Keys survive a restart; then revoke.
srv.stop(keep=True)
srv = InecServer(INEC, reuse=srv)
expect(len(json.loads(ok("keys", "--json").stdout)) == 3, "keys after a restart")
s3 = s3_with(created["access_key"], created["secret_key"])
expect(s3.head_object(Bucket="admin-test", Key="dir/obj")["ContentLength"] == 3 << 20,
       "the created pair after a restart")
r = ok("keys", "revoke", created["access_key"])
try:
    s3.list_buckets()
    expect(False, "a revoked key pair was accepted")
except ClientError as e:
    expect(e.response["Error"]["Code"] == "InvalidAccessKeyId", "revoked pair: %s" % e)
r = admin("keys", "revoke", srv.access_key)
expect(r.returncode == 1 and "PrimaryKey" in r.stderr, "revoking the primary pair", r)
r = admin("keys", "revoke", "NOSUCHKEY")
expect(r.returncode == 1 and "NoSuchKey" in r.stderr, "revoking an unknown pair", r)
r = admin("keys", "create", "x" * 65)
expect(r.returncode == 1 and "InvalidArgument" in r.stderr, "a name too long", r)

# Pools.
r = ok("pools", "create", "wide", "--profile", "rs:k=4,m=2", "--chunk-size", "256K")
expect("rs:k=4,m=2" in r.stdout and "256 KiB" in r.stdout, "pools create", r)
r = ok("pools")
expect("default" in r.stdout and "wide" in r.stdout, "pools list", r)
pool = json.loads(ok("pools", "show", "wide", "--json").stdout)
expect(pool["k"] == 4 and pool["n"] == 6 and pool["chunk_size"] == 256 << 10, "pools show")
r = admin("pools", "create", "bad", "--profile", "rs:k=0,m=2")
expect(r.returncode == 1 and "POST /admin/v1/pools" in r.stderr, "a bad profile", r)
r = admin("pools", "show", "nosuch")
expect(r.returncode == 1 and "no pool named" in r.stderr, "an unknown pool", r)

# Repair and node states (cli/cmd_repair.c), routed by `inec admin`.
expect(json.loads(ok("repair", "pause", "--json").stdout)["state"] == "paused", "pause")
expect(json.loads(ok("repair", "resume", "--json").stdout)["state"] != "paused", "resume")
r = ok("nodes")
expect(r.stdout.count(" up ") >= 9, "nodes list", r)
r = admin("node", "remove", "n3")
expect(r.returncode == 1 and "InvalidArgument" in r.stderr, "removing below a pool's width", r)

# Usage and token errors.
expect(admin("frobnicate").returncode == 2, "unknown command")
r = admin("keys", token="not-the-token")
expect(r.returncode == 1 and "refused the admin token" in r.stderr, "a wrong token", r)
srv.stop()
print("admin_cli: ok")
