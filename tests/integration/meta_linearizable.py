#!/usr/bin/env python3
"""Metadata never goes back in time, on a 9-process tcp cluster (RS(6,3):
every key has 7 metadata homes, written to 4, read from 4):

 1. two writers PUT one key at once, 500 rounds (250 each, one pair a
    round); after each round a GET must return one of that round's two
    bodies, never an older one (both PUTs were acknowledged before it);
 2. each of the 9 nodes in turn is SIGKILLed: GETs and HEADs (the key's
    homes include the dead node for 7 of the 9) return the last acknowledged
    body, never a 503 or an older one; a new body is PUT while it is down and
    read back; then the node is started again, holding the older record;
 3. the restarted homes' stale copies were repaired by reads (the cluster's
    "read_repairs" counter), and a last read with every node up returns the
    last body.
argv[1]: the inec binary."""
import concurrent.futures
import json
import os
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inec_server import InecCluster  # noqa: E402

try:
    import boto3
    from botocore.config import Config
    from botocore.exceptions import ClientError
except ImportError:
    sys.exit("boto3 is missing: run scripts/deps.sh (python3-boto3)")

ROUNDS = 500
srv = InecCluster(sys.argv[1], env={"INEC_CHUNK": "65536"})


def fail(msg):
    srv.fail(msg)


def client():
    return boto3.client(
        "s3", endpoint_url=srv.endpoint, region_name="us-east-1",
        aws_access_key_id=srv.access_key, aws_secret_access_key=srv.secret_key,
        config=Config(signature_version="s3v4", retries={"max_attempts": 1},
                      s3={"addressing_style": "path"}))


def admin(path):
    req = urllib.request.Request(srv.admin + path, headers={"Authorization": "Bearer " + srv.token})
    return json.loads(urllib.request.urlopen(req, timeout=60).read())


def get(s3, what):
    try:
        return s3.get_object(Bucket="lin", Key="hot")["Body"].read().decode()
    except ClientError as e:
        fail("%s: GET answered %s" % (what, e.response["Error"]))


writers = [client(), client()]
reader = client()
reader.create_bucket(Bucket="lin")

# 1. Two writers, one key.
barrier = threading.Barrier(2)


def write(w, body):
    barrier.wait()
    writers[w].put_object(Bucket="lin", Key="hot", Body=body.encode())


t0 = time.monotonic()
with concurrent.futures.ThreadPoolExecutor(2) as pool:
    for r in range(ROUNDS // 2):
        bodies = ["w0-%d" % r, "w1-%d" % r]
        for f in [pool.submit(write, w, bodies[w]) for w in range(2)]:
            f.result()  # a failed PUT raises: every one must be acknowledged
        got = get(reader, "round %d" % r)
        if got not in bodies:
            fail("round %d: read %r after both of %s were acknowledged" % (r, got, bodies))
last = get(reader, "after the rounds")
print("%d concurrent PUTs in %.1f s, the key holds %s" % (ROUNDS, time.monotonic() - t0, last))

# 2. Every node down in turn (so every metadata home of the key).
for i, node in enumerate(srv.nodes()):
    srv.kill_node(node)
    for n in range(10):
        got = get(reader, "%s down, read %d" % (node, n))
        if got != last:
            fail("%s down: read %r, the last acknowledged body is %r" % (node, got, last))
        try:
            head = reader.head_object(Bucket="lin", Key="hot")
        except ClientError as e:
            fail("%s down: HEAD answered %s" % (node, e.response["Error"]))
        if head["ContentLength"] != len(last):
            fail("%s down: HEAD says %d bytes, want %d" % (node, head["ContentLength"], len(last)))
    last = "while-%s-down" % node
    writers[0].put_object(Bucket="lin", Key="hot", Body=last.encode())
    got = get(reader, "%s down, after a PUT" % node)
    if got != last:
        fail("%s down: read %r right after %r was acknowledged" % (node, got, last))
    srv.restart_nodes()
    deadline = time.monotonic() + 60
    while any(n["peer_state"] != "up" for n in admin("/admin/v1/cluster")["nodes"]):
        if time.monotonic() > deadline:
            fail("%s was not seen up again within 60 s" % node)
        time.sleep(0.2)

# 3. Stale homes repaired by reads; everything up reads the last body.
for n in range(20):
    got = get(reader, "all up, read %d" % n)
    if got != last:
        fail("all up: read %r, want %r" % (got, last))
meta = admin("/admin/v1/cluster")["metadata"]
print("metadata:", meta)
if meta["read_repairs"] < 1:
    fail("nodes came back with stale copies of the key, but no read repaired one: %s" % meta)
srv.stop()
print("ok")
