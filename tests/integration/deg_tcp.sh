#!/usr/bin/env bash
# PPR(6,3) repair across seven processes on loopback: six survivors and the
# new home of the lost chunk each run `inec deg serve`; `inec deg run` sends
# every participant its vertex, the data moves between their tcp devices, and
# the rebuilt chunk must equal the codecs layer's. Then one participant dies:
# the run must fail (every wait is bounded) and name the missing vertex.
set -euo pipefail
inec=$1
tmp=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# Runner and participants prove one cluster secret to each other.
"$inec" secret init "$tmp/secret" >/dev/null
for i in 0 1 2 3 4 5 6; do
    INEC_LOG=error "$inec" deg serve --listen 127.0.0.1:0 --secret "$tmp/secret" >"$tmp/serve$i.out" 2>"$tmp/serve$i.err" &
    pids+=($!)
done
peers=()
for i in 0 1 2 3 4 5 6; do
    for _ in $(seq 100); do
        [ -s "$tmp/serve$i.out" ] && break
        sleep 0.1
    done
    addr=$(awk '/^listening/ {print $2}' "$tmp/serve$i.out")
    [ -n "$addr" ] || fail "participant $i did not start: $(cat "$tmp/serve$i.err")"
    peers+=("$addr")
done
list=$(IFS=,; echo "${peers[*]}")

for mode in "" --incoherent; do
    INEC_LOG=error "$inec" deg run --scheme ppr --k 6 --m 3 --lost 2 --size 262147 \
        --peers "$list" --secret "$tmp/secret" $mode >"$tmp/run.out" || fail "run $mode: $(cat "$tmp/run.out")"
    grep -q '^ok: 1 results' "$tmp/run.out" || fail "run $mode: $(cat "$tmp/run.out")"
done
# The participants serve again, slice by slice this time.
INEC_LOG=error "$inec" deg run --scheme ecpipe --k 6 --m 3 --lost 2 --size 100003 --slice 8192 \
    --peers "$list" --secret "$tmp/secret" | grep -q '^ok: 1 results' || fail "ECPipe over tcp"

# A runner with another secret gets nothing run.
"$inec" secret init "$tmp/other" >/dev/null
if INEC_LOG=error "$inec" deg run --scheme ppr --k 6 --m 3 --lost 2 --size 4096 \
    --peers "$list" --secret "$tmp/other" >"$tmp/wrong.out" 2>"$tmp/wrong.err"; then
    fail "a runner with another cluster secret was served"
fi
grep -q 'refused our proof' "$tmp/wrong.err" || fail "wrong secret: $(cat "$tmp/wrong.err")"

# Node 3 (a leaf of the tree) dies.
kill "${pids[3]}"
wait "${pids[3]}" 2>/dev/null || true
if INEC_LOG=error "$inec" deg run --scheme ppr --k 6 --m 3 --lost 2 --size 4096 --timeout 1000 \
    --peers "$list" --secret "$tmp/secret" >"$tmp/dead.out" 2>"$tmp/dead.err"; then
    fail "a run with a dead participant succeeded"
fi
grep -q 'vertex c3' "$tmp/dead.err" || fail "error does not name vertex c3: $(cat "$tmp/dead.err")"
echo "deg_tcp: ok"
