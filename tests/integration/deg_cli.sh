#!/usr/bin/env bash
# `inec deg` and `inec bench ec` from the command line: graphs print in every
# format (the DOT renders with graphviz, the JSON says the paper's
# primitives), graphs run and match the codecs layer, bad input is refused
# with a reason, and the benchmark runs tiny without rotting.
set -euo pipefail
inec=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

# Text names every vertex with its primitive.
"$inec" deg show --scheme ppr --k 6 --m 3 --lost 2 >"$tmp/ppr.txt"
grep -q '^c2 .*recv-xor' "$tmp/ppr.txt" || fail "PPR root is not recv-xor"
grep -q 'recv-ec-send' "$tmp/ppr.txt" || fail "PPR has no internal vertex"

# JSON: the primitives of the paper's Figure 5.
"$inec" deg show --scheme tri --k 3 --m 2 --op encode --format json >"$tmp/tri.json"
python3 - "$tmp/tri.json" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
prim = {v["name"]: v["prim"] for v in g["vertices"]}
assert prim["gw"] == "send", prim
assert all(prim[f"c{i}"] == "recv-ec-send" for i in range(3)), prim
assert all(prim[f"c{i}"] == "recv-xor" for i in (3, 4)), prim
assert len(g["edges"]) == 3 + 3 * 2, g["edges"]
PY

# Delta parity: send -> recv-ec-send on the written chunk's node -> recv-xor on each parity.
"$inec" deg show --op update --chunk 2 >"$tmp/upd.txt"
grep -q '^gw .*send' "$tmp/upd.txt" || fail "update: the gateway does not send"
grep -q '^c2 .*recv-ec-send.*keep c2' "$tmp/upd.txt" || fail "update: c2 is not recv-ec-send"
[ "$(grep -c 'recv-xor' "$tmp/upd.txt")" = 3 ] || fail "update: not 3 recv-xor parities"
if "$inec" deg show --op update --chunk 6 2>"$tmp/err"; then fail "update of a parity accepted"; fi
grep -q 'out of range' "$tmp/err" || fail "update: no reason given"

# DOT renders to PNG.
"$inec" deg show --profile lrc:k=6,l=2,r=2 --lost 1 --format dot >"$tmp/lrc.dot"
dot -Tpng "$tmp/lrc.dot" -o "$tmp/lrc.png"
[ -s "$tmp/lrc.png" ] || fail "dot rendered nothing"

# Runs in process, both modes, sliced too.
"$inec" deg run --scheme ecpipe --k 6 --m 3 --lost 1,4 --slice 1000 --size 4099 | grep -q '^ok: 2 results'
"$inec" deg run --scheme tri --k 6 --m 3 --size 4099 --incoherent | grep -q '^ok: 9 results'

# Bad input: refused with a reason, exit code says so.
if "$inec" deg show --scheme rs --lost 0,1,2,3 2>"$tmp/err"; then fail "4 losses of RS(6,3) accepted"; fi
grep -q 'erased' "$tmp/err" || grep -q 'parities' "$tmp/err" || fail "no reason given: $(cat "$tmp/err")"
if "$inec" deg show --format yaml 2>/dev/null; then fail "--format yaml accepted"; fi
if "$inec" deg show --profile rs:k=0,m=1 2>/dev/null; then fail "k=0 accepted"; fi

# The benchmark, tiny.
"$inec" bench ec --quick --scheme ppr --size 4096 --seconds 0.001 --json >"$tmp/bench.json"
python3 - "$tmp/bench.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["bench"] == "ec", doc
rows = doc["results"]
assert len(rows) == 1 and rows[0]["profile"] == "ppr:k=6,m=3", rows
for mode in ("coherent", "incoherent"):
    assert rows[0][mode]["mb_per_s"] > 0, rows
PY
"$inec" bench ec --quick --scheme rs --op encode --size 1K,4K --seconds 0.001 --plot "$tmp/b.png" >/dev/null
[ -s "$tmp/b.png" ] || fail "no plot"
if "$inec" bench ec --size 1Q 2>/dev/null; then fail "--size 1Q accepted"; fi
if "$inec" bench ec --seconds x 2>/dev/null; then fail "--seconds x accepted"; fi
echo "deg_cli: ok"
