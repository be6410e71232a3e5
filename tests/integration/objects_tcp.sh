#!/usr/bin/env bash
# The object layer over nine `inec node` processes (scripts/cluster.sh):
# round trips, then m = 3 nodes killed (every object still exact, degraded),
# a fourth (-EIO, never wrong bytes), then a flipped byte on disk; a stale pid
# file naming another process is not taken for a node by cluster.sh, nor does it
# wait forever on an INEC_HOST it cannot bind.
set -euo pipefail
INEC=$1 CHECK=$2 SCRIPTS=$3
export INEC
dir=$(mktemp -d /tmp/objects_tcp.XXXXXX)
other=
trap 'INEC=$INEC "$SCRIPTS/cluster.sh" stop "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"; [ -z "$other" ] || kill "$other" 2>/dev/null || true' EXIT
INEC_NO_GATEWAY=1 INEC_CHUNK=4096 "$SCRIPTS/cluster.sh" start 9 "$dir"
python3 - "$dir/cluster.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["map"]["peer_timeout_ms"] = 3000
c["gateway"]["gc_delay_ms"] = 0
c["gateway"]["repair"] = {"paused": True}  # the queue is checked, not drained
json.dump(c, open(sys.argv[1], "w"))
PY
"$CHECK" "$dir/cluster.json" write
"$CHECK" "$dir/cluster.json" verify
"$SCRIPTS/cluster.sh" status "$dir"
for id in n2 n5 n8; do kill -KILL "$(cat "$dir/$id.pid")"; done
"$CHECK" "$dir/cluster.json" verify
kill -KILL "$(cat "$dir/n0.pid")"
"$CHECK" "$dir/cluster.json" lost
if "$SCRIPTS/cluster.sh" status "$dir" >/dev/null; then echo "status should report dead nodes"; exit 1; fi
# n0's pid handed out again to an unrelated process (pids wrap around): it is
# not n0, so start starts n0 anyway, and stop leaves that process alone.
sleep 600 &
other=$!
echo "$other" >"$dir/n0.pid"
# Back up (same data directories), then a byte flipped under a live node.
INEC_NO_GATEWAY=1 "$SCRIPTS/cluster.sh" start 9 "$dir"
if [ "$(cat "$dir/n0.pid")" = "$other" ]; then echo "start took another process for n0"; exit 1; fi
"$CHECK" "$dir/cluster.json" verify
"$CHECK" "$dir/cluster.json" corrupt
echo "$other" >"$dir/n0-before.pid"
"$SCRIPTS/cluster.sh" stop "$dir"
if ! kill "$other" 2>/dev/null; then echo "stop signalled a process that is not the cluster's"; exit 1; fi
# A host this machine does not have (TEST-NET-1): start says so and stops.
if out=$(INEC_HOST=192.0.2.1 timeout 60 "$SCRIPTS/cluster.sh" start 3 "$dir/nohost" 2>&1); then
    echo "start on a host this machine lacks succeeded: $out"; exit 1
fi
echo "$out" | grep -q "cannot bind any port on 192.0.2.1" || { echo "start on a missing host: $out"; exit 1; }
echo ok
