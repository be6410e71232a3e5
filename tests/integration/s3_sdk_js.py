#!/usr/bin/env python3
"""The AWS SDK for JavaScript v3 (tests/integration/s3_sdk_js/) against a real
`inec server` (argv[2] "server", the default) or the nine-process cluster
("cluster"). The SDK is installed with `npm ci` from the committed lock file
into the build directory (argv[3]), once; node and npm come from
scripts/deps.sh. argv[1]: the inec binary."""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inec_server import start  # noqa: E402

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "s3_sdk_js")
FILES = ("package.json", "package-lock.json", "s3_sdk.mjs")


def install(work):
    """The suite and its node_modules in work/ (npm ci again when the lock changed)."""
    os.makedirs(work, exist_ok=True)
    lock = os.path.join(HERE, "package-lock.json")
    stamp = os.path.join(work, "node_modules", ".inec-lock")
    fresh = os.path.exists(stamp) and open(stamp).read() == open(lock).read()
    for f in FILES:
        shutil.copyfile(os.path.join(HERE, f), os.path.join(work, f))
    if not fresh:
        r = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=work,
                           capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            sys.exit("npm ci failed:\n%s%s" % (r.stdout, r.stderr))
        shutil.copyfile(lock, stamp)


def main():
    mode = sys.argv[2] if len(sys.argv) > 2 else "server"
    work = os.path.join(sys.argv[3] if len(sys.argv) > 3 else ".", "s3_sdk_js")
    for tool in ("node", "npm"):
        if not shutil.which(tool):
            sys.exit("%s is missing: run scripts/deps.sh" % tool)
    install(work)
    srv = start(sys.argv[1], mode)
    env = dict(os.environ, INEC_ENDPOINT=srv.endpoint, AWS_ACCESS_KEY_ID=srv.access_key,
               AWS_SECRET_ACCESS_KEY=srv.secret_key)
    for k in ("AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL"):
        env.pop(k, None)
    r = subprocess.run(["node", os.path.join(work, "s3_sdk.mjs")], env=env,
                       capture_output=True, text=True, timeout=600)
    sys.stdout.write(r.stdout)
    if r.returncode != 0:
        srv.fail("the SDK suite failed (exit %d):\n%s%s" % (r.returncode, r.stdout, r.stderr))
    if not srv.alive():
        srv.fail("the gateway died")
    srv.stop()
    print("s3_sdk_js (%s): all checks passed" % mode)


if __name__ == "__main__":
    main()
