#!/usr/bin/env python3
"""Real-client SigV4 check: boto3/botocore signs S3 requests (header auth with
signed and unsigned payloads, presigned GET and PUT), this script captures
them just before they would be sent, and the C program given as argv[1]
verifies each with gateway/sigv4.c. Tampered, expired and wrong-secret
variants must fail with the S3 error S3 itself would return. No network."""
import json
import subprocess
import sys
import time
import calendar

try:
    import boto3
    from botocore.config import Config
except ImportError:
    sys.exit("botocore is missing: run scripts/deps.sh (python3-boto3)")

ACCESS, SECRET = "AKIDINECTEST", "inec/secret+key=with/odd chars"


class Captured(Exception):
    pass


def client(endpoint, payload_signing=None):
    s3 = boto3.client(
        "s3", endpoint_url=endpoint, region_name="us-east-1",
        aws_access_key_id=ACCESS, aws_secret_access_key=SECRET,
        config=Config(signature_version="s3v4", retries={"max_attempts": 1},
                      s3={"addressing_style": "path",
                          **({"payload_signing_enabled": payload_signing}
                             if payload_signing is not None else {})}))
    return s3


def capture(s3, call, **params):
    """The request botocore would put on the wire for s3.call(**params)."""
    got = []

    def grab(request, **kw):
        body = request.body
        if hasattr(body, "read"):
            body = body.read()
        got.append((request.method, request.url, dict(request.headers), body or b""))
        raise Captured()

    s3.meta.events.register("before-send.s3", grab)
    try:
        getattr(s3, call)(**params)
    except Captured:
        pass
    s3.meta.events.unregister("before-send.s3", grab)
    return got[0]


def amz_time(headers_or_query):
    return calendar.timegm(time.strptime(headers_or_query, "%Y%m%dT%H%M%SZ"))


def split(url):
    rest = url.split("://", 1)[1]
    host, _, rest = rest.partition("/")
    path, _, query = ("/" + rest).partition("?")
    return host, path, query


def case(name, method, url, headers, body, expect, now=None, secret=SECRET, payload=b""):
    host, path, query = split(url)
    hdrs = [["Host", host]] + [[k, v.decode() if isinstance(v, bytes) else v]
                               for k, v in headers.items()]
    if now is None:
        date = dict((k.lower(), v) for k, v in hdrs).get("x-amz-date")
        now = amz_time(date) + 5
    return {"name": name, "method": method, "path": path, "query": query,
            "headers": hdrs, "body": body.hex(), "now": now, "secret": secret,
            "expect": expect, "payload": payload.hex()}


def header_cases(endpoint, signing):
    s3 = client(endpoint, signing)
    calls = [
        ("put", "put_object", dict(Bucket="bkt", Key="photos/2026/cat & dog+1.jpg",
                                   Body=b"meow" * 1000)),
        ("put-unicode", "put_object", dict(Bucket="bkt", Key="\u00fc/\u65e5\u672c/~tilde*(x)'!",
                                           Body=b"")),
        ("get-range", "get_object", dict(Bucket="bkt", Key="a//double/slash", Range="bytes=0-9")),
        ("head", "head_object", dict(Bucket="bkt", Key="%percent=eq?q#hash")),
        ("list-v2", "list_objects_v2", dict(Bucket="bkt", Prefix="a b/\u00fc", Delimiter="/",
                                            MaxKeys=7, StartAfter="a b/+plus")),
        ("list-v1", "list_objects", dict(Bucket="bkt", Prefix="x", Marker="x/=y")),
        ("delete-multi", "delete_objects", dict(Bucket="bkt", Delete={
            "Objects": [{"Key": "a"}, {"Key": "b&<c>"}], "Quiet": True})),
        ("create-bucket", "create_bucket", dict(Bucket="newbucket")),
    ]
    out = []
    for name, call, params in calls:
        method, url, headers, body = capture(s3, call, **params)
        tag = "%s %s" % (endpoint.split("//")[1], name)
        payload = params.get("Body", b"")
        streaming = headers.get("X-Amz-Content-SHA256", b"").startswith(b"STREAMING-")
        out.append(case(tag, method, url, headers, body, "OK", payload=payload))
        out.append(case(tag + " wrong-secret", method, url, headers, body,
                        "SignatureDoesNotMatch", secret=SECRET + "x"))
        out.append(case(tag + " skewed", method, url, headers, body, "RequestTimeTooSkewed",
                        now=amz_time(headers["X-Amz-Date"].decode()) + 3600))
        slash = url.index("/", url.index("://") + 3)
        tampered = url[:slash] + "/x" + url[slash:]
        out.append(case(tag + " tampered-path", method, tampered, headers, body,
                        "SignatureDoesNotMatch"))
        if streaming and payload:
            # aws-chunked over TLS: the payload is unsigned, its checksum trailer is not
            tampered = body.replace(payload[:4], payload[:3] + b"?", 1)
            out.append(case(tag + " tampered-body", method, url, headers, tampered, "BadDigest",
                            payload=payload))
        elif body and not streaming and content_sha256(headers) != b"UNSIGNED-PAYLOAD":
            out.append(case(tag + " tampered-body", method, url, headers, body[:-1] + b"?",
                            "XAmzContentSHA256Mismatch"))
    return out


def content_sha256(headers):
    # botocore versions differ in header case and in str vs bytes values.
    for name, value in headers.items():
        if name.lower() == "x-amz-content-sha256":
            return value.encode() if isinstance(value, str) else value
    return None


def presign_cases():
    s3 = client("http://127.0.0.1:9000")
    out = []
    for name, call, params, method in [
            ("presign-get", "get_object", dict(Bucket="bkt", Key="dir/file name+1.txt"), "GET"),
            ("presign-put", "put_object", dict(Bucket="bkt", Key="\u00fcber.bin"), "PUT")]:
        url = s3.generate_presigned_url(call, Params=params, ExpiresIn=600, HttpMethod=method)
        query = dict(p.split("=", 1) for p in url.split("?", 1)[1].split("&"))
        t = amz_time(query["X-Amz-Date"])
        out.append(case(name, method, url, {}, b"", "OK", now=t + 600))
        out.append(case(name + " expired", method, url, {}, b"", "AccessDenied", now=t + 601))
        out.append(case(name + " wrong-secret", method, url, {}, b"", "SignatureDoesNotMatch",
                        now=t, secret="nope"))
        longer = url.replace("X-Amz-Expires=600", "X-Amz-Expires=6000")
        out.append(case(name + " extended", method, longer, {}, b"", "SignatureDoesNotMatch",
                        now=t))
    return out


def main():
    cases = (header_cases("http://127.0.0.1:9000", None) +
             header_cases("https://s3.example.test", None) +
             header_cases("http://localhost:8080", False) + presign_cases())
    text = "".join(json.dumps(c) + "\n" for c in cases)
    r = subprocess.run([sys.argv[1], ACCESS], input=text.encode(), timeout=60)
    sys.exit(r.returncode)


if __name__ == "__main__":
    main()
