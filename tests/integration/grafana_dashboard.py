#!/usr/bin/env python3
"""contrib/grafana/inec-dashboard.json asks only for metrics a real `inec
server` exports: every inec_* name in its queries appears in /metrics (after
some S3 traffic, so the labelled series exist), and the file is a Grafana
dashboard (panels with targets, a Prometheus datasource variable).
argv[1]: the inec binary; argv[2]: the dashboard file."""
import json
import os
import re
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inec_server import InecServer  # noqa: E402

import boto3
from botocore.config import Config

dash = json.load(open(sys.argv[2]))
srv = InecServer(sys.argv[1])
try:
    s3 = boto3.client("s3", endpoint_url=srv.endpoint, region_name="us-east-1",
                      aws_access_key_id=srv.access_key, aws_secret_access_key=srv.secret_key,
                      config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))
    s3.create_bucket(Bucket="grafana")
    s3.put_object(Bucket="grafana", Key="k", Body=b"x" * 1000)
    s3.get_object(Bucket="grafana", Key="k")["Body"].read()
    req = urllib.request.Request(srv.admin + "/metrics",
                                 headers={"Authorization": "Bearer " + srv.token})
    text = urllib.request.urlopen(req, timeout=30).read().decode()
    exported = set(re.findall(r"^# TYPE (\w+) ", text, re.M))
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    if not exprs or not all("datasource" in p for p in dash["panels"]):
        srv.fail("not a dashboard with queries")
    if dash["templating"]["list"][0]["query"] != "prometheus":
        srv.fail("no Prometheus datasource variable")
    for e in exprs:
        for name in re.findall(r"\binec_\w+", e):
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            if name not in exported and base not in exported:
                srv.fail("the dashboard queries %s, which /metrics does not export:\n%s"
                         % (name, "\n".join(sorted(exported))))
finally:
    if srv.alive():
        srv.stop()
print("grafana_dashboard: ok, %d queries" % len(exprs))
