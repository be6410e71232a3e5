#!/bin/sh
# `inec node scrub|stat` on a real store, before and after a flipped byte, and
# `inec bench store` run tiny so it keeps working.
# usage: node_cli.sh INEC STORE_CRASH_HELPER
set -eu
inec=$1 helper=$2
dir=$(mktemp -d /tmp/inec-node-cli-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# up to 30 s for a line matching PATTERN in FILE, written by process PID
# (its stderr in ERRFILE)
wait_line() { # FILE PATTERN PID WHAT ERRFILE
    i=0
    until grep -q "$2" "$1"; do
        i=$((i + 1))
        [ $i -lt 300 ] || { kill "$3"; fail "$4: $(cat "$5")"; }
        sleep 0.1
    done
}

"$inec" node --help | grep -q scrub || fail "node --help"
"$inec" node scrub --help | grep -q -- --data || fail "scrub --help"
"$inec" node scrub >/dev/null 2>&1 && fail "scrub without --data succeeded"
"$inec" node stat --data "$dir/missing" 2>/dev/null && fail "stat of a missing store succeeded"

"$helper" fill "$dir/s" 20
"$inec" node scrub --data "$dir/s" | grep -q " 0 corrupt" || fail "clean scrub"
chunks=$("$inec" node stat --data "$dir/s" | awk '$1 == "chunks" {print $2}')
[ "$chunks" -eq 20 ] || fail "stat shows $chunks chunks, not 20"

# Flip one payload byte of the first record of the first segment (past its 64-byte header).
seg=$dir/s/seg-00000001.log
python3 - "$seg" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(64 + 10)
    b = f.read(1)
    f.seek(64 + 10)
    f.write(bytes([b[0] ^ 0x40]))
PY
out=$(INEC_LOG=error "$inec" node scrub --data "$dir/s") && fail "scrub missed the flip: $out"
echo "$out" | grep -q "^corrupt " || fail "scrub did not list the corrupt chunk: $out"
"$inec" node stat --data "$dir/s" | grep -q "^corrupt *1$" || fail "stat corrupt count"

# A running node: stat goes through its service (DIR/node.listen names its address
# and cluster secret), or --connect with --secret; it serves its own /metrics.
"$inec" node --listen 127.0.0.1:0 --data "$dir/s" --id statnode --metrics-listen 127.0.0.1:0 \
    --secret "$dir/secret" >"$dir/node.out" 2>"$dir/node.err" &
pid=$!
i=0
while [ ! -s "$dir/s/node.listen" ]; do
    i=$((i + 1))
    [ $i -lt 300 ] || { kill $pid; fail "the node never wrote node.listen: $(cat "$dir/node.err")"; }
    sleep 0.1
done
out=$("$inec" node stat --data "$dir/s") || { kill $pid; fail "stat of a running node: $out"; }
echo "$out" | grep -q "^node *statnode " || { kill $pid; fail "stat did not ask the node: $out"; }
echo "$out" | grep -q "^chunks *20$" || { kill $pid; fail "running stat chunks: $out"; }
echo "$out" | grep -q "^corrupt *1$" || { kill $pid; fail "running stat corrupt: $out"; }
addr=$(head -1 "$dir/s/node.listen")
out=$("$inec" node stat --connect "$addr" --secret "$dir/secret") || { kill $pid; fail "--connect: $out"; }
echo "$out" | grep -q "^chunks *20$" || { kill $pid; fail "--connect chunks: $out"; }
"$inec" secret init "$dir/other" >/dev/null
out=$("$inec" node stat --connect "$addr" --secret "$dir/other" 2>&1) && { kill $pid; fail "another secret was served: $out"; }
echo "$out" | grep -q "refused our proof" || { kill $pid; fail "another secret: $out"; }
# Its own Prometheus endpoint.
maddr=$(awk '$1 == "metrics" {print $2}' "$dir/node.out")
metrics=$(python3 -c 'import sys, urllib.request; print(urllib.request.urlopen("http://" + sys.argv[1] + "/metrics", timeout=30).read().decode())' "$maddr") ||
    { kill $pid; fail "scraping the node's metrics at '$maddr'"; }
echo "$metrics" | grep -q '^inec_store_chunks{node="statnode"} 20$' || { kill $pid; fail "node metrics: $metrics"; }
echo "$metrics" | grep -q '^inec_store_repair_list_chunks{node="statnode"} 1$' || { kill $pid; fail "node metrics: $metrics"; }
kill -TERM $pid
wait $pid || fail "the node did not stop cleanly"
[ ! -e "$dir/s/node.listen" ] || fail "a stopped node left node.listen"
"$inec" node stat --data "$dir/s" | grep -q "^chunks *20$" || fail "stat after the node stopped"

# The same node on the IPv6 loopback (where the machine has one): its service,
# stat --connect and /metrics at [::1] addresses.
if python3 -c 'import socket; socket.socket(socket.AF_INET6).bind(("::1", 0))' 2>/dev/null; then
    "$inec" node --listen '[::1]:0' --data "$dir/s" --id statnode --metrics-listen '[::1]:0' \
        --secret "$dir/secret" >"$dir/node6.out" 2>"$dir/node6.err" &
    pid=$!
    wait_line "$dir/node6.out" '^metrics ' $pid "the IPv6 node did not start" "$dir/node6.err"
    addr=$(awk '$1 == "listening" {print $2}' "$dir/node6.out")
    case "$addr" in "[::1]:"[1-9]*) ;; *) kill $pid; fail "IPv6 node listens at '$addr'" ;; esac
    out=$("$inec" node stat --connect "$addr" --secret "$dir/secret") || { kill $pid; fail "--connect $addr: $out"; }
    echo "$out" | grep -q "^chunks *20$" || { kill $pid; fail "--connect $addr chunks: $out"; }
    maddr=$(awk '$1 == "metrics" {print $2}' "$dir/node6.out")
    metrics=$(python3 -c 'import sys, urllib.request; print(urllib.request.urlopen("http://" + sys.argv[1] + "/metrics", timeout=30).read().decode())' "$maddr") ||
        { kill $pid; fail "scraping the IPv6 node's metrics at '$maddr'"; }
    echo "$metrics" | grep -q '^inec_store_chunks{node="statnode"} 20$' || { kill $pid; fail "IPv6 node metrics: $metrics"; }
    kill -TERM $pid
    wait $pid || fail "the IPv6 node did not stop cleanly"
else
    echo "no IPv6 loopback here: the IPv6 node is not checked"
fi

# cluster.json's "direct_min" (every node's, then a node's own): bad values are
# refused by name before anything starts, -1 (never O_DIRECT) is served.
for bad in '"node": {"direct_min": 5}' '"node": {"direct_min": -1}, "nodes": {"d1": {"direct_min": "x"}}'; do
    cat >"$dir/direct.json" <<JSON
{"map": {"nodes": [{"id": "d1", "address": "127.0.0.1:1"}]}, $bad}
JSON
    out=$("$inec" node run --config "$dir/direct.json" --id d1 --data "$dir/d1" 2>&1) &&
        fail "direct_min in '$bad' was taken"
    echo "$out" | grep -q "direct_min" || fail "direct_min in '$bad': $out"
done
cat >"$dir/direct.json" <<JSON
{"map": {"nodes": [{"id": "d1", "address": "127.0.0.1:1"}]}, "node": {"direct_min": -1},
 "nodes": {"d1": {"direct_min": 1048576}}}
JSON
"$inec" node run --config "$dir/direct.json" --id d1 --data "$dir/d1" --listen 127.0.0.1:0 \
    --secret "$dir/secret" >"$dir/d1.out" 2>"$dir/d1.err" &
pid=$!
wait_line "$dir/d1.out" '^listening ' $pid "a node with direct_min did not start" "$dir/d1.err"
kill -TERM $pid
wait $pid || fail "the node with direct_min did not stop cleanly"

"$inec" bench store --quick --bytes 1M --threads 2 --dir "$dir" | grep "^1MiB" >/dev/null || fail "bench table"
"$inec" bench store --quick --json --bytes 1M --dir "$dir" |
    python3 -c 'import json, sys; d = json.load(sys.stdin); r = d["results"]; assert d["bench"] == "store" and len(r) == 3 and r[0]["put_ratio"] > 0 and r[0]["chunk_bytes"] == 65536' ||
    fail "bench json"
[ -z "$(ls "$dir" | grep inec-bench)" ] || fail "bench left files behind"
echo "node cli: ok"
