#!/usr/bin/env python3
"""The tools people move and mount buckets with, against a real `inec server`
(or, with argv[3] "cluster", `inec gateway` before nine `inec node`
processes); every byte compared, through the tool and through boto3.
argv[1]: the inec binary; argv[2]: which tools:
  transfer  rclone (sync, check, moveto, md5sum, delete; multipart in 5 MiB
            parts) and s3cmd (mb, put multipart, get, ls, del, rb);
  mount     s3fs: a bucket mounted with FUSE, used as a directory (write,
            append, overwrite smaller, mkdir, mv, rm, rmdir), each step
            checked on the mount and on the objects; mode, mtime and a
            symlink still there after a remount. Exit 77 (skipped)
            without /dev/fuse."""
import hashlib
import os
import random
import shutil
import subprocess
import sys
import time

import boto3
from botocore.config import Config

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inec_server import start  # noqa: E402

srv = None
s3 = None


def run(*args, env=None, timeout=300):
    r = subprocess.run(list(args), env=env, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        srv.fail("%s: exit %d\n%s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
    return r.stdout


def tool_env():
    env = dict(os.environ)
    # rclone refuses any custom CA bundle on plain HTTP ("unsupported transport").
    env.pop("AWS_CA_BUNDLE", None)
    return env


def obj(bucket, key):
    return s3.get_object(Bucket=bucket, Key=key)["Body"].read()


def keys(bucket, prefix=""):
    out = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        out += [o["Key"] for o in page.get("Contents", [])]
    return sorted(out)


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def transfer(rng):
    src = os.path.join(srv.dir, "src")
    os.makedirs(os.path.join(src, "sub"))
    files = {"a": rng.randbytes(1), "b.bin": rng.randbytes(300000),
             "sub/c": rng.randbytes(12 << 20), "sub/with space": b"x"}
    for name, data in files.items():
        write(os.path.join(src, name), data)

    # rclone: a remote from the environment, multipart from 5 MiB
    env = tool_env()
    env.update(RCLONE_CONFIG=os.path.join(srv.dir, "rclone.conf"), RCLONE_CONFIG_INEC_TYPE="s3",
               RCLONE_CONFIG_INEC_PROVIDER="Other", RCLONE_CONFIG_INEC_ENDPOINT=srv.endpoint,
               RCLONE_CONFIG_INEC_ACCESS_KEY_ID=srv.access_key,
               RCLONE_CONFIG_INEC_SECRET_ACCESS_KEY=srv.secret_key,
               RCLONE_CONFIG_INEC_REGION="us-east-1")
    rc = ["rclone", "--retries", "1", "--low-level-retries", "1", "--s3-upload-cutoff", "5M",
          "--s3-chunk-size", "5M"]
    run(*rc, "mkdir", "inec:rclone", env=env)
    run(*rc, "sync", src, "inec:rclone/tree", env=env)
    if keys("rclone") != sorted("tree/" + k for k in files):
        srv.fail("rclone sync stored %s" % keys("rclone"))
    for name, data in files.items():
        if obj("rclone", "tree/" + name) != data:
            srv.fail("rclone sync changed the bytes of %s" % name)
    run(*rc, "check", src, "inec:rclone/tree", env=env)  # sizes and MD5s, multipart too
    sums = dict(line.split(None, 1)[::-1] for line in
                run(*rc, "md5sum", "inec:rclone/tree", env=env).splitlines())
    for name, data in files.items():
        if sums.get(name) != hashlib.md5(data).hexdigest():
            srv.fail("rclone md5sum of %s: %r" % (name, sums.get(name)))
    run(*rc, "moveto", "inec:rclone/tree/b.bin", "inec:rclone/moved.bin", env=env)
    if "tree/b.bin" in keys("rclone") or obj("rclone", "moved.bin") != files["b.bin"]:
        srv.fail("rclone moveto left %s" % keys("rclone"))
    back = os.path.join(srv.dir, "back")
    run(*rc, "copy", "inec:rclone/tree/sub", back, env=env)
    for name in ("c", "with space"):
        if read(os.path.join(back, name)) != files["sub/" + name]:
            srv.fail("rclone copy back changed the bytes of sub/%s" % name)
    run(*rc, "purge", "inec:rclone", env=env)
    if "rclone" in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
        srv.fail("rclone purge left the bucket")

    # s3cmd: a config of its own, multipart in 5 MiB parts
    cfg = os.path.join(srv.dir, "s3cfg")
    host = srv.endpoint.split("//", 1)[1]
    write(cfg, ("[default]\naccess_key = %s\nsecret_key = %s\nhost_base = %s\n"
                "host_bucket = %s\nuse_https = False\nsignature_v2 = False\n"
                "bucket_location = us-east-1\n" % (srv.access_key, srv.secret_key, host,
                                                    host)).encode())
    sc = ["s3cmd", "-c", cfg, "--multipart-chunk-size-mb=5", "--no-progress"]
    run(*sc, "mb", "s3://s3cmd", env=env)
    run(*sc, "put", os.path.join(src, "sub", "c"), "s3://s3cmd/c", env=env)
    head = s3.head_object(Bucket="s3cmd", Key="c")
    if not head["ETag"].endswith('-3"') or obj("s3cmd", "c") != files["sub/c"]:
        srv.fail("s3cmd put (3 parts): ETag %s" % head["ETag"])
    run(*sc, "get", "--force", "s3://s3cmd/c", os.path.join(srv.dir, "c.back"), env=env)
    if read(os.path.join(srv.dir, "c.back")) != files["sub/c"]:
        srv.fail("s3cmd get changed the bytes")
    if "s3://s3cmd/c" not in run(*sc, "ls", "s3://s3cmd", env=env):
        srv.fail("s3cmd ls does not list the object")
    run(*sc, "del", "s3://s3cmd/c", env=env)
    run(*sc, "rb", "s3://s3cmd", env=env)


def s3fs_mount(pw, mnt):
    run("s3fs", "mounted", mnt, "-o", "passwd_file=" + pw, "-o", "url=" + srv.endpoint,
        "-o", "use_path_request_style", "-o", "endpoint=us-east-1", "-o", "retries=1",
        "-o", "multipart_size=5", "-o", "dbglevel=warn", env=tool_env())
    for _ in range(100):  # the daemon answers once it has mounted
        if os.path.ismount(mnt):
            return
        time.sleep(0.1)
    srv.fail("s3fs did not mount")


def unmount(mnt):
    subprocess.run(["umount", mnt], capture_output=True)
    if os.path.ismount(mnt):
        subprocess.run(["umount", "-l", mnt], capture_output=True)


def mount(rng):
    mnt = os.path.join(srv.dir, "mnt")
    os.makedirs(mnt)
    pw = os.path.join(srv.dir, "s3fs.passwd")
    write(pw, ("%s:%s\n" % (srv.access_key, srv.secret_key)).encode())
    os.chmod(pw, 0o600)
    s3.create_bucket(Bucket="mounted")
    before = rng.randbytes(70000)
    s3.put_object(Bucket="mounted", Key="from-s3", Body=before)
    s3fs_mount(pw, mnt)
    try:
        if read(os.path.join(mnt, "from-s3")) != before:
            srv.fail("an object PUT through S3 reads other bytes on the mount")
        big = rng.randbytes(12 << 20)  # written as a multipart upload
        write(os.path.join(mnt, "big"), big)
        if obj("mounted", "big") != big or read(os.path.join(mnt, "big")) != big:
            srv.fail("a file written on the mount is another object")
        with open(os.path.join(mnt, "log"), "ab") as f:
            f.write(b"one\n")
        with open(os.path.join(mnt, "log"), "ab") as f:
            f.write(b"two\n")
        if obj("mounted", "log") != b"one\ntwo\n":
            srv.fail("appends on the mount: %r" % obj("mounted", "log"))
        write(os.path.join(mnt, "big"), b"smaller")
        if obj("mounted", "big") != b"smaller" or os.path.getsize(os.path.join(mnt, "big")) != 7:
            srv.fail("an overwrite with fewer bytes left %d" % len(obj("mounted", "big")))
        os.mkdir(os.path.join(mnt, "dir"))
        os.rename(os.path.join(mnt, "log"), os.path.join(mnt, "dir", "log"))
        if sorted(os.listdir(os.path.join(mnt, "dir"))) != ["log"] or \
                obj("mounted", "dir/log") != b"one\ntwo\n" or "log" in keys("mounted"):
            srv.fail("mv into a directory left %s" % keys("mounted"))
        os.remove(os.path.join(mnt, "dir", "log"))
        os.rmdir(os.path.join(mnt, "dir"))
        os.remove(os.path.join(mnt, "big"))
        if sorted(os.listdir(mnt)) != ["from-s3"] or keys("mounted") != ["from-s3"]:
            srv.fail("after rm and rmdir: %s on the mount, %s stored"
                     % (sorted(os.listdir(mnt)), keys("mounted")))
        # Mode, times and links are object metadata (CopyObject onto itself,
        # REPLACE): they outlive the mount.
        f = os.path.join(mnt, "from-s3")
        os.chmod(f, 0o640)
        os.utime(f, (1577934245, 1577934245))
        os.symlink("from-s3", os.path.join(mnt, "link"))
        unmount(mnt)
        s3fs_mount(pw, mnt)
        st = os.stat(f)
        if (st.st_mode & 0o777, int(st.st_mtime)) != (0o640, 1577934245) or \
                os.readlink(os.path.join(mnt, "link")) != "from-s3" or read(f) != before:
            srv.fail("after a remount: mode %o, mtime %d, link %r"
                     % (st.st_mode & 0o777, st.st_mtime, os.readlink(os.path.join(mnt, "link"))))
    finally:
        unmount(mnt)


def main():
    global srv, s3
    which = sys.argv[2]
    need = {"transfer": ["rclone", "s3cmd"], "mount": ["s3fs"]}[which]
    for tool in need:
        if not shutil.which(tool):
            sys.exit("%s is missing: run scripts/deps.sh" % tool)
    if which == "mount" and not os.path.exists("/dev/fuse"):
        print("s3_tools mount: skipped, no /dev/fuse")
        sys.exit(77)
    srv = start(sys.argv[1], sys.argv[3] if len(sys.argv) > 3 else "server")
    s3 = boto3.client("s3", endpoint_url=srv.endpoint, aws_access_key_id=srv.access_key,
                      aws_secret_access_key=srv.secret_key, region_name="us-east-1",
                      config=Config(retries={"max_attempts": 1}))
    rng = random.Random(11)
    transfer(rng) if which == "transfer" else mount(rng)
    srv.stop()
    print("s3_tools %s: ok" % which)


if __name__ == "__main__":
    main()
