#!/usr/bin/env bash
# The cluster map's per-node "device": a node whose device is an RDMA NIC it
# does not have still serves, on soft, and says so in one log line; a node
# whose device is "soft" says nothing of the kind. And INEC_PROVIDER=verbs on
# `inec server` (gateway + 9 nodes, 10 devices): one line for the process.
set -euo pipefail
inec=$1
dir=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$dir"/*.log; do echo "--- $f"; cat "$f"; done; exit 1; }

cat >"$dir/cluster.json" <<JSON
{"map": {"nodes": [{"id": "nic", "address": "127.0.0.1:1", "device": "nosuchnic0"},
                   {"id": "sw", "address": "127.0.0.1:2", "device": "soft"}]},
 "nodes": {"nic": {"data": "$dir/nic"}, "sw": {"data": "$dir/sw"}}}
JSON
for id in nic sw; do
    env -u INEC_PROVIDER "$inec" node run --config "$dir/cluster.json" --id "$id" --listen 127.0.0.1:0 \
        >"$dir/$id.log" 2>&1 &
    pids+=($!)
done
for id in nic sw; do
    for _ in $(seq 100); do
        grep -q '^listening ' "$dir/$id.log" && break
        sleep 0.1
    done
    grep -q '^listening ' "$dir/$id.log" || fail "node $id did not start"
done
n=$(grep -c 'using soft' "$dir/nic.log" || true)
[ "$n" = 1 ] || fail "node nic: $n fallback lines, want 1"
grep 'using soft' "$dir/nic.log" | grep -q 'verbs' || fail "the fallback line does not name verbs"
! grep -q 'using soft' "$dir/sw.log" || fail "node sw (device soft) logged a fallback"

INEC_PROVIDER=verbs "$inec" server --data "$dir/server" --listen 127.0.0.1:0 \
    --admin-listen 127.0.0.1:0 >"$dir/server.log" 2>&1 &
server=$!
pids+=($server)
for _ in $(seq 200); do
    grep -q '^S3 endpoint' "$dir/server.log" && break
    sleep 0.1
done
grep -q '^S3 endpoint' "$dir/server.log" || fail "inec server did not start"
n=$(grep -c 'using soft' "$dir/server.log" || true)
[ "$n" = 1 ] || fail "inec server: $n fallback lines, want 1"
kill -TERM "$server"
wait "$server" || fail "inec server did not stop cleanly"
echo "ok: $(grep 'using soft' "$dir/nic.log")"
