#!/usr/bin/env bash
# Every benchmark, tiny, so none rots: one flag style (--size with suffixes,
# --seconds, --json as {"bench", "results"}, --plot as a PNG), bad values refused
# with exit 2. Timing is never checked.
set -euo pipefail
inec=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "bench_cli: $*" >&2; exit 1; }

check_json() { # NAME FILE MIN_ROWS
    python3 - "$@" <<'PY'
import json, sys
name, path, least = sys.argv[1], sys.argv[2], int(sys.argv[3])
doc = json.load(open(path))
assert doc["bench"] == name, doc
assert len(doc["results"]) >= least, doc
PY
}

"$inec" bench codec --quick --size 4K --seconds 0.01 --profile rs:k=3,m=2 \
    --profile lrc:k=4,l=2,r=2 --json --plot "$tmp/codec.png" >"$tmp/codec.json"
check_json codec "$tmp/codec.json" 2 || fail "codec json"
"$inec" bench primitive --quick --size 128,8K --iters 3 --json --plot "$tmp/prim.png" \
    >"$tmp/prim.json" 2>/dev/null
check_json primitive "$tmp/prim.json" 12 || fail "primitive json"
"$inec" bench s3 --quick --size 4K --clients 1,2 --seconds 0.05 --json --plot "$tmp/s3.png" \
    >"$tmp/s3.json"
check_json s3 "$tmp/s3.json" 5 || fail "s3 json"
# The tcp pass (9 `inec node` processes), signed payloads, the disk limit.
"$inec" bench s3 --transport tcp --payload signed --size 4K --clients 1 --seconds 0.05 --json \
    >"$tmp/s3tcp.json"
python3 - "$tmp/s3tcp.json" <<'PY' || fail "s3 tcp json"
import json, sys
doc = json.load(open(sys.argv[1]))
rows = doc["results"]
assert doc["md5_limit_mbps"] > 0 and doc["disk_write_mbps"] > 0 and doc["flush_limit_ms"] > 0, doc
assert {r["transport"] for r in rows} == {"tcp"}, rows
assert {(r["op"], r["payload"]) for r in rows} == {("PUT", "signed"), ("GET", "none"),
                                                   ("GET-degr", "none")}, rows
assert all(r["disk_ratio"] > 0 for r in rows if r["op"] == "PUT"), rows
PY
"$inec" bench repair --quick --objects 3 --size 64K --transport mem --json >"$tmp/repair.json"
check_json repair "$tmp/repair.json" 3 || fail "repair json"
"$inec" bench objects --size 4K,64K --reps 1 --json >"$tmp/objects.json"
check_json objects "$tmp/objects.json" 2 || fail "objects json"
for png in codec prim s3; do
    [ "$(head -c 4 "$tmp/$png.png" | tail -c 3)" = PNG ] || fail "$png.png is not a PNG"
done

for b in codec primitive ec store objects s3 repair; do
    set +e
    "$inec" bench $b --size 1Q >/dev/null 2>"$tmp/err"
    rc=$?
    set -e
    [ $rc -eq 2 ] || fail "bench $b --size 1Q: exit $rc"
    grep -q "1Q" "$tmp/err" || fail "bench $b: the error does not name the bad value: $(cat "$tmp/err")"
done
for bad in "--transport udp" "--payload maybe"; do
    set +e
    "$inec" bench s3 $bad >/dev/null 2>&1
    rc=$?
    set -e
    [ $rc -eq 2 ] || fail "bench s3 $bad: exit $rc"
done
for b in codec primitive ec s3; do
    set +e
    "$inec" bench $b --seconds x >/dev/null 2>&1
    rc=$?
    set -e
    [ $rc -eq 2 ] || fail "bench $b --seconds x: exit $rc"
done
echo "bench_cli: ok"
