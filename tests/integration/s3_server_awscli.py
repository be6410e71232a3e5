#!/usr/bin/env python3
"""The AWS CLI (Debian's awscli) against a real `inec server`: s3 mb, cp in
and out, ls, sync round trip, rm --recursive, rb; every byte compared.
argv[1]: the inec binary; argv[2] (optional): "cluster" for `inec gateway` in
front of nine `inec node` processes instead."""
import filecmp
import json
import os
import random
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inec_server import start  # noqa: E402

AWS = shutil.which("aws", path="/usr/bin") or shutil.which("aws")
srv = None


def aws(*args, ok=True):
    env = dict(os.environ, AWS_ACCESS_KEY_ID=srv.access_key,
               AWS_SECRET_ACCESS_KEY=srv.secret_key, AWS_DEFAULT_REGION="us-east-1",
               AWS_CONFIG_FILE=os.path.join(srv.dir, "aws-config"),
               AWS_SHARED_CREDENTIALS_FILE=os.path.join(srv.dir, "aws-credentials"),
               AWS_PAGER="", AWS_RETRY_MODE="standard", AWS_MAX_ATTEMPTS="1")
    r = subprocess.run([AWS, "--endpoint-url", srv.endpoint, *args], env=env,
                       capture_output=True, text=True, timeout=300)
    if ok and r.returncode != 0:
        srv.fail("aws %s: exit %d\n%s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
    return r


def main():
    global srv
    if not AWS:
        sys.exit("the AWS CLI is missing: run scripts/deps.sh (awscli)")
    mode = sys.argv[2] if len(sys.argv) > 2 else "server"
    srv = start(sys.argv[1], mode)
    # Multipart in small parts: a 20 MB file goes up as 4 parts of 5 MiB and one more.
    with open(os.path.join(srv.dir, "aws-config"), "w") as f:
        f.write("[default]\ns3 =\n  multipart_threshold = 8MB\n  multipart_chunksize = 5MB\n")
    rng = random.Random(9)
    src = os.path.join(srv.dir, "src")
    os.makedirs(os.path.join(src, "sub", "deeper"))
    files = {"empty": 0, "one": 1, "odd": 4095, "sub/mid.bin": 300000,
             "sub/deeper/big.bin": 5 << 20, "sub/name with spaces": 10}
    for name, n in files.items():
        with open(os.path.join(src, name), "wb") as f:
            f.write(rng.randbytes(n))

    aws("s3", "mb", "s3://cli")
    r = aws("s3", "ls")
    if "cli" not in r.stdout:
        srv.fail("s3 ls lists no bucket: %r" % r.stdout)
    # cp in and out, byte for byte
    aws("s3", "cp", os.path.join(src, "odd"), "s3://cli/single/odd")
    out = os.path.join(srv.dir, "odd.back")
    aws("s3", "cp", "s3://cli/single/odd", out)
    if not filecmp.cmp(os.path.join(src, "odd"), out, shallow=False):
        srv.fail("cp round trip changed the bytes")
    # a 20 MB file in (multipart) and out, copied server-side (UploadPartCopy)
    big = os.path.join(srv.dir, "big20")
    with open(big, "wb") as f:
        f.write(rng.randbytes(20 * 1000 * 1000))
    aws("s3", "cp", big, "s3://cli/single/big")
    aws("s3", "cp", "s3://cli/single/big", "s3://cli/single/big-copy")
    for key in ("big", "big-copy"):
        out = os.path.join(srv.dir, key + ".back")
        aws("s3", "cp", "s3://cli/single/" + key, out)
        if not filecmp.cmp(big, out, shallow=False):
            srv.fail("20 MB round trip of %s changed the bytes" % key)
    r = aws("s3api", "head-object", "--bucket", "cli", "--key", "single/big")
    if not json.loads(r.stdout)["ETag"].endswith('-4"'):
        srv.fail("a multipart upload's ETag ends in -4: %r" % r.stdout)
    # sync round trip
    aws("s3", "sync", src, "s3://cli/tree")
    r = aws("s3", "ls", "--recursive", "s3://cli/tree/")
    listed = sorted(line.split(None, 3)[3] for line in r.stdout.splitlines())
    if listed != sorted("tree/" + k for k in files):
        srv.fail("s3 ls --recursive: %s" % listed)
    r = aws("s3", "ls", "s3://cli/tree/")  # one level: a PRE line for sub/
    if "PRE sub/" not in r.stdout:
        srv.fail("s3 ls without --recursive: %r" % r.stdout)
    back = os.path.join(srv.dir, "back")
    aws("s3", "sync", "s3://cli/tree", back)
    for name in files:
        if not filecmp.cmp(os.path.join(src, name), os.path.join(back, name), shallow=False):
            srv.fail("sync round trip changed %s" % name)
    r = aws("s3", "sync", src, "s3://cli/tree")  # nothing changed: nothing to upload
    if "upload:" in r.stdout:
        srv.fail("a second sync uploaded again: %r" % r.stdout)
    # rm --recursive, then the bucket is empty and can go
    aws("s3", "rm", "--recursive", "s3://cli/")
    r = aws("s3", "ls", "--recursive", "s3://cli/", ok=False)
    if r.stdout.strip():
        srv.fail("rm --recursive left %r" % r.stdout)
    aws("s3", "rb", "s3://cli")
    r = aws("s3", "ls", "s3://cli", ok=False)
    if r.returncode == 0 or "NoSuchBucket" not in r.stderr:
        srv.fail("the removed bucket still lists: %d %r" % (r.returncode, r.stderr))
    srv.stop()
    print("s3_server_awscli (%s): all checks passed" % mode)


if __name__ == "__main__":
    main()
