#!/usr/bin/env python3
"""HTTPS on the S3 endpoint and the control API: a self-signed certificate
made here with the openssl CLI, served by `inec server --tls-cert/--tls-key` (argv[2] "server",
the default) or by `inec gateway` with tls_cert/tls_key in cluster.json's
gateway section ("cluster"); boto3 (verify=the certificate) and the AWS CLI
(--ca-bundle) store, list, read back and delete over it, a client that does
not trust the certificate and a plain-HTTP one are refused, and wrong files
stop the server with a clear message; `inec status` reaches the control API
over HTTPS; SIGHUP reloads the certificate from its files (new handshakes get
the new one, connections up keep theirs, unusable files change nothing).
argv[1]: the inec binary."""
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inec_server import InecCluster, InecServer  # noqa: E402

try:
    import boto3
    import botocore.exceptions
    from botocore.config import Config
except ImportError:
    sys.exit("boto3 is missing: run scripts/deps.sh (python3-boto3)")

AWS = shutil.which("aws", path="/usr/bin") or shutil.which("aws")
srv = None


def check(cond, what):
    if not cond:
        srv.fail(what)


def make_cert(d, name, cn):
    """A self-signed EC certificate for 127.0.0.1: (cert path, key path)."""
    cert, key = os.path.join(d, name + ".pem"), os.path.join(d, name + ".key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "2", "-subj", "/CN=" + cn,
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True)
    return cert, key


def client(verify):
    return boto3.client(
        "s3", endpoint_url=srv.endpoint, region_name="us-east-1", verify=verify,
        aws_access_key_id=srv.access_key, aws_secret_access_key=srv.secret_key,
        config=Config(signature_version="s3v4", retries={"max_attempts": 1},
                      s3={"addressing_style": "path"}))


def aws(ca, *args):
    env = dict(os.environ, AWS_ACCESS_KEY_ID=srv.access_key,
               AWS_SECRET_ACCESS_KEY=srv.secret_key, AWS_DEFAULT_REGION="us-east-1",
               AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull,
               AWS_PAGER="", AWS_MAX_ATTEMPTS="1")
    return subprocess.run([AWS, "--endpoint-url", srv.endpoint, "--ca-bundle", ca, *args],
                          env=env, capture_output=True, text=True, timeout=300)


def test_clients(cert, other_cert, tmp):
    check(srv.endpoint.startswith("https://"), "banner endpoint %s" % srv.endpoint)
    s3 = client(cert)
    s3.create_bucket(Bucket="tls")
    body = os.urandom(3 << 20)  # several TLS records, several stripes
    s3.put_object(Bucket="tls", Key="boto/obj", Body=body)
    check(s3.get_object(Bucket="tls", Key="boto/obj")["Body"].read() == body, "boto3 GET")
    # a client that trusts another certificate, or the system's CAs, refuses the server
    for verify in (other_cert, True):
        try:
            client(verify).list_buckets()
            srv.fail("boto3 with verify=%r trusted the self-signed server" % verify)
        except botocore.exceptions.SSLError:
            pass
    # plain HTTP on the TLS port gets no S3 answer
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    try:
        got = s.recv(4096)
    except (ConnectionResetError, socket.timeout):
        got = b""
    s.close()
    check(b"ListAllMyBucketsResult" not in got and b"<Error>" not in got,
          "plain HTTP was answered over the TLS port: %r" % got[:200])
    # the server's certificate is the one given
    ctx = ssl.create_default_context(cafile=cert)
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as t:
            der = t.getpeercert(binary_form=True)
    check(ssl.DER_cert_to_PEM_cert(der).split("-----")[2].strip().replace("\n", "") ==
          open(cert).read().split("-----")[2].strip().replace("\n", ""),
          "the server presents another certificate")
    if not AWS:
        sys.exit("the AWS CLI is missing: run scripts/deps.sh (awscli)")
    src = os.path.join(tmp, "cli.bin")
    with open(src, "wb") as f:
        f.write(os.urandom(9 << 20))  # over the CLI's 8 MB threshold: multipart
    r = aws(cert, "s3", "cp", src, "s3://tls/cli/file.bin")
    check(r.returncode == 0, "aws s3 cp over TLS: %s%s" % (r.stdout, r.stderr))
    r = aws(cert, "s3", "ls", "s3://tls/", "--recursive")
    check(r.returncode == 0 and "cli/file.bin" in r.stdout and "boto/obj" in r.stdout,
          "aws s3 ls over TLS: %s%s" % (r.stdout, r.stderr))
    out = os.path.join(tmp, "back.bin")
    r = aws(cert, "s3", "cp", "s3://tls/cli/file.bin", out)
    check(r.returncode == 0 and open(out, "rb").read() == open(src, "rb").read(),
          "aws s3 cp back over TLS: %s" % r.stderr)
    r = aws(other_cert, "s3", "ls", "s3://tls/")
    check(r.returncode != 0 and "SSL" in r.stderr.upper(),
          "the AWS CLI with another CA bundle: %d %s" % (r.returncode, r.stderr))
    r = aws(cert, "s3", "rm", "s3://tls/", "--recursive")
    check(r.returncode == 0, "aws s3 rm over TLS: %s" % r.stderr)
    check(s3.list_objects_v2(Bucket="tls")["KeyCount"] == 0, "everything deleted")


def test_control_api(inec, cert, other_cert, tmp):
    """The control API is HTTPS too, and `inec status` trusts the server's
    certificate from the data directory (server) or --ca-bundle (cluster)."""
    import json
    import urllib.request
    check(srv.admin.startswith("https://"), "banner control API %s" % srv.admin)
    req = urllib.request.Request(srv.admin + "/admin/v1/cluster",
                                 headers={"Authorization": "Bearer " + srv.token})
    ctx = ssl.create_default_context(cafile=cert)
    with urllib.request.urlopen(req, context=ctx, timeout=30) as r:
        check(r.status == 200 and "nodes" in json.load(r), "GET /admin/v1/cluster over TLS")
    env = dict(os.environ, INEC_DATA=os.path.join(tmp, "nowhere"))
    for k in ("INEC_ADMIN_ENDPOINT", "INEC_ADMIN_TOKEN", "INEC_CA_BUNDLE"):
        env.pop(k, None)
    if isinstance(srv, InecServer) and not isinstance(srv, InecCluster):
        how = ["--data", srv.data]  # admin-cert.pem, endpoint and token from there
    else:
        how = ["--endpoint", srv.admin, "--token", srv.token, "--ca-bundle", cert]
    r = subprocess.run([inec, "status", "--json", *how], env=env, capture_output=True,
                       text=True, timeout=60)
    check(r.returncode == 0 and "HEALTH_" in r.stdout,
          "inec status over TLS: exit %d %s%s" % (r.returncode, r.stdout[-500:], r.stderr))
    r = subprocess.run([inec, "status", "--endpoint", srv.admin, "--token", srv.token,
                        "--ca-bundle", other_cert], env=env, capture_output=True, text=True,
                       timeout=60)
    check(r.returncode == 1, "inec status trusting another certificate: exit %d %s"
          % (r.returncode, r.stderr))


def test_bad_files(inec, cert, key, other_key, tmp):
    """Wrong files stop `inec server` at once, with a message naming the problem."""
    cases = [
        (["--tls-cert", cert], "--tls-cert and --tls-key go together"),
        (["--tls-cert", os.path.join(tmp, "missing.pem"), "--tls-key", key],
         "No such file or directory"),
        (["--tls-cert", key, "--tls-key", key], "is not a PEM certificate"),
        (["--tls-cert", cert, "--tls-key", cert], "is not a PEM private key"),
        (["--tls-cert", cert, "--tls-key", other_key], "do not match"),
    ]
    for args, want in cases:
        r = subprocess.run([inec, "server", "--data", os.path.join(tmp, "bad"), "--listen",
                            "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", *args],
                           capture_output=True, text=True, timeout=120)
        check(r.returncode != 0 and want in r.stderr,
              "inec server %s: exit %d, want %r in:\n%s" % (" ".join(args), r.returncode, want,
                                                            r.stderr[-2000:]))


def served_cert(url):
    """The PEM certificate a new TLS handshake with url's host:port gets."""
    hostport = url.split("://", 1)[1].rstrip("/")
    host, port = hostport.rsplit(":", 1)
    return ssl.get_server_certificate((host, int(port)))


def same_cert(a, b):
    return ssl.PEM_cert_to_DER_cert(a) == ssl.PEM_cert_to_DER_cert(b)


def test_reload(cert, key, tmp, pid):
    """SIGHUP reloads the certificate from its files: new handshakes (S3 and
    the control API) get the new one, a connection already up keeps working,
    and files that cannot be used leave the old certificate in place."""
    import signal
    import time
    old = open(cert).read()
    kept = client(cert)  # trusts the old certificate only; its connection stays up
    kept.put_object(Bucket="tls", Key="reload/before", Body=b"before")
    new_cert, new_key = make_cert(tmp, "renewed", "renewed")
    key_bytes = open(key, "rb").read()
    with open(key, "w") as f:  # a broken renewal: the server keeps what it has
        f.write("not a key\n")
    os.kill(pid, signal.SIGHUP)
    time.sleep(1)
    check(same_cert(served_cert(srv.endpoint), old), "a bad key file replaced the certificate")
    check(kept.get_object(Bucket="tls", Key="reload/before")["Body"].read() == b"before",
          "GET after a failed reload")
    shutil.copy(new_cert, cert)
    shutil.copy(new_key, key)
    os.kill(pid, signal.SIGHUP)
    want = open(new_cert).read()
    deadline = time.monotonic() + 20
    while not same_cert(served_cert(srv.endpoint), want):
        check(time.monotonic() < deadline, "the S3 endpoint still serves the old certificate")
        time.sleep(0.2)
    check(same_cert(served_cert(srv.admin), want), "the control API serves the old certificate")
    check(kept.get_object(Bucket="tls", Key="reload/before")["Body"].read() == b"before",
          "the connection made before the reload stopped working")
    fresh = client(new_cert)
    fresh.put_object(Bucket="tls", Key="reload/after", Body=b"after")
    check(fresh.get_object(Bucket="tls", Key="reload/after")["Body"].read() == b"after",
          "a client trusting the new certificate")
    try:
        client(old_pem_file(tmp, old)).list_objects_v2(Bucket="tls")
        check(False, "a new connection trusting only the old certificate was accepted")
    except botocore.exceptions.SSLError:
        pass
    with open(key, "wb") as f:
        f.write(key_bytes)  # as it was (the other checks read these files)


def old_pem_file(tmp, pem):
    path = os.path.join(tmp, "old-only.pem")
    with open(path, "w") as f:
        f.write(pem)
    return path


def main():
    global srv
    inec = sys.argv[1]
    mode = sys.argv[2] if len(sys.argv) > 2 else "server"
    tmp = tempfile.mkdtemp(prefix="inec-tls-")
    cert, key = make_cert(tmp, "server", "127.0.0.1")
    other_cert, other_key = make_cert(tmp, "other", "other")
    if mode == "cluster":
        srv = InecCluster(inec, gateway={"tls_cert": cert, "tls_key": key})
    else:
        srv = InecServer(inec, extra_args=["--tls-cert", cert, "--tls-key", key])
    test_clients(cert, other_cert, tmp)
    print("ok test_clients", flush=True)
    test_control_api(inec, cert, other_cert, tmp)
    print("ok test_control_api", flush=True)
    if mode == "server":
        test_bad_files(inec, cert, key, other_key, tmp)
        print("ok test_bad_files", flush=True)
    test_reload(cert, key, tmp,
                srv.pid("gateway") if isinstance(srv, InecCluster) else srv.proc.pid)
    print("ok test_reload", flush=True)
    srv.stop()
    shutil.rmtree(tmp, ignore_errors=True)
    print("s3_tls (%s): all passed" % mode)


if __name__ == "__main__":
    main()
