#!/bin/sh
# `inec node scrub|stat` on a real store, before and after a flipped byte, and
# `inec bench store` run tiny so it keeps working.
# usage: node_cli.sh INEC STORE_CRASH_HELPER
set -eu
inec=$1 helper=$2
dir=$(mktemp -d /tmp/inec-node-cli-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

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

"$inec" bench store --quick --bytes 1M --threads 2 --dir "$dir" | grep "^1MiB" >/dev/null || fail "bench table"
"$inec" bench store --quick --json --bytes 1M --dir "$dir" |
    python3 -c 'import json, sys; r = json.load(sys.stdin)["results"]; assert len(r) == 3 and r[0]["put_ratio"] > 0' ||
    fail "bench json"
[ -z "$(ls "$dir" | grep inec-bench)" ] || fail "bench left files behind"
echo "node cli: ok"
