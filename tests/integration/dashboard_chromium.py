#!/usr/bin/env python3
"""The dashboard in a real browser: headless Chromium (Debian's package), driven
over the DevTools protocol, against a real `inec server` with a few objects.
The page loads with no token and asks for one; a wrong token is refused on the
page; the admin token (typed into the form, never in a URL) shows HEALTH_OK,
nine nodes with capacity bars, both charts drawn from the rates, the repair
line, and the pool's DEG drawn by graphviz (encode, then a decode with two
chunks lost). Saves a screenshot (argv[2], default dashboard.png).
argv[1]: the inec binary."""
import atexit
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inec_server import InecServer  # noqa: E402

import boto3
from botocore.config import Config

try:
    import websocket  # python3-websocket
except ImportError:
    sys.exit("python3-websocket is missing: run scripts/deps.sh")

INEC = sys.argv[1]
SHOT = sys.argv[2] if len(sys.argv) > 2 else "dashboard.png"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if not CHROMIUM:
    sys.exit("chromium is missing: run scripts/deps.sh")

srv = InecServer(INEC)
atexit.register(lambda: srv.proc.poll() is None and srv.proc.kill())
s3 = boto3.client("s3", endpoint_url=srv.endpoint, region_name="us-east-1",
                  aws_access_key_id=srv.access_key, aws_secret_access_key=srv.secret_key,
                  config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))
s3.create_bucket(Bucket="dash")
for i in range(6):
    s3.put_object(Bucket="dash", Key="o%d" % i, Body=os.urandom(2 << 20))
    s3.get_object(Bucket="dash", Key="o%d" % i)["Body"].read()

profile = tempfile.mkdtemp(prefix="inec-chromium-")
chrome = subprocess.Popen(
    [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
     "--disable-background-networking", "--disable-component-update", "--disable-sync",
     "--user-data-dir=" + profile, "--remote-debugging-port=0", "--window-size=1280,1800",
     "about:blank"],
    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def cleanup():
    if chrome.poll() is None:
        chrome.kill()
        chrome.wait()
    shutil.rmtree(profile, ignore_errors=True)


atexit.register(cleanup)


def fail(msg):
    cleanup()
    srv.fail(msg)


# "DevTools listening on ws://127.0.0.1:PORT/devtools/browser/ID"
port = None
deadline = time.monotonic() + 60
while port is None:
    line = chrome.stderr.readline()
    if not line and chrome.poll() is not None:
        fail("chromium exited %s before listening" % chrome.returncode)
    m = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
    if m:
        port = int(m.group(1))
    if time.monotonic() > deadline:
        fail("chromium did not start its DevTools endpoint")
targets = json.load(urllib.request.urlopen("http://127.0.0.1:%d/json/list" % port, timeout=30))
page = next(t for t in targets if t["type"] == "page")
ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=60,
                                 suppress_origin=True)
next_id = 0


def cdp(method, **params):
    global next_id
    next_id += 1
    ws.send(json.dumps({"id": next_id, "method": method, "params": params}))
    while True:
        msg = json.loads(ws.recv())
        if msg.get("id") == next_id:
            if "error" in msg:
                fail("%s: %s" % (method, msg["error"]))
            return msg["result"]


def js(expr):
    r = cdp("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
    if "exceptionDetails" in r:
        fail("%s threw %s" % (expr, r["exceptionDetails"]))
    return r["result"].get("value")


def wait_for(expr, what, seconds=60):
    deadline = time.monotonic() + seconds
    while not js(expr):
        if time.monotonic() > deadline:
            fail("the page never showed %s; its text:\n%s" % (what, js("document.body.innerText")))
        time.sleep(0.2)


cdp("Page.enable")
cdp("Emulation.setDeviceMetricsOverride", width=1280, height=1800, deviceScaleFactor=1,
    mobile=False)
cdp("Page.navigate", url=srv.admin + "/")
wait_for("document.readyState === 'complete' && !document.getElementById('login').hidden",
         "the login form")

# A wrong token: refused, back at the form, the reason on the page.
js("document.getElementById('token').value = 'not-the-token';"
   "document.getElementById('login-form').requestSubmit()")
wait_for("document.getElementById('login-error').textContent.includes('refused')",
         "the refused token")

js("document.getElementById('token').value = %s;"
   "document.getElementById('login-form').requestSubmit()" % json.dumps(srv.token))
wait_for("document.getElementById('health').textContent === 'HEALTH_OK'", "HEALTH_OK")
wait_for("document.querySelectorAll('#nodes tbody tr').length === 9", "nine nodes")
wait_for("document.querySelectorAll('#nodes .bar').length === 9", "capacity bars")
wait_for("document.querySelectorAll('#chart-bytes polyline').length === 2 &&"
         "document.querySelectorAll('#chart-latency polyline').length === 2", "both charts")
# The uploads show in the throughput chart: a point above the axis.
wait_for("[...document.querySelectorAll('#chart-bytes polyline')].some(p =>"
         " p.getAttribute('points').split(' ').length >= 3 &&"
         " p.getAttribute('points').split(' ').some(xy => parseFloat(xy.split(',')[1]) < 170))",
         "the uploads in the throughput chart (3 samples or more)")
wait_for("document.getElementById('repair').textContent.includes('stripes') &&"
         "document.querySelectorAll('#repair .bar').length === 1", "the repair progress")
wait_for("document.getElementById('deg-img').naturalWidth > 50", "the encode DEG picture")
# The pool's objects, as the scan asked for here counts them.
urllib.request.urlopen(urllib.request.Request(
    srv.admin + "/admin/v1/repair", data=b'{"scan": true}', method="POST",
    headers={"Authorization": "Bearer " + srv.token}), timeout=30).read()
wait_for("[...document.querySelectorAll('#pools tbody tr')].some(r =>"
         " r.cells[0].textContent === 'default' && r.cells[4].textContent === '6' &&"
         " r.cells[5].textContent === '12 MiB') &&"
         " document.getElementById('pools-age').textContent.includes('as of the last scan')",
         "the pool's 6 objects and 12 MiB")
text = js("document.body.innerText")
# 4.0 MiB: the pool's chunk size (the default since chunks follow the object size).
for want in ("n0", "n8", "default", "rs:k=6,m=3", "all checks pass", "4.0 MiB"):
    if want not in text:
        fail("%r is not on the page:\n%s" % (want, text))

# A decode with chunks 0 and 3 lost: another picture.
js("document.getElementById('deg-op').value = 'decode';"
   "document.getElementById('deg-op').dispatchEvent(new Event('change'));"
   "document.querySelector('#deg-lost input[value=\"3\"]').checked = true;"
   "window.__before = document.getElementById('deg-img').src;"
   "document.getElementById('deg-form').requestSubmit()")
wait_for("document.getElementById('deg-img').src !== window.__before &&"
         "document.getElementById('deg-img').naturalWidth > 50 &&"
         "document.getElementById('deg-img').alt.includes('lost 0,3')", "the decode DEG picture")
if srv.token in js("location.href") or "token" in js("location.href"):
    fail("the token is in the URL")

shot = cdp("Page.captureScreenshot", format="png", captureBeyondViewport=True)
with open(SHOT, "wb") as f:
    f.write(base64.b64decode(shot["data"]))
ws.close()
cleanup()
srv.stop()
print("dashboard_chromium: ok, screenshot in", os.path.abspath(SHOT))
