#!/usr/bin/env bash
# inec devices: soft's entry with its capabilities, every RDMA device or the
# reason there is none, the same as JSON, and usage errors.
set -euo pipefail
inec=$1
fail() { echo "FAIL: $*"; exit 1; }

out=$("$inec" devices)
echo "$out"
head -1 <<<"$out" | grep -q 'PROVIDER.*DEVICE.*CROSS-CHANNEL.*EC-OFFLOAD.*OFFLOAD' ||
    fail "no header"
grep -Eq '^soft +soft +software \(mem, tcp\) +active +32 +128 +no +yes +no +wait\+calc$' <<<"$out" ||
    fail "soft's line"
json=$("$inec" devices --json)
python3 - "$json" <<'PY'
import json, sys
d = json.loads(sys.argv[1])
soft = [x for x in d["devices"] if x["provider"] == "soft"]
assert len(soft) == 1 and soft[0]["offload"] == "wait+calc" and soft[0]["max_sge"] == 32, soft
verbs = [x for x in d["devices"] if x["provider"] == "verbs"]
# Either RDMA devices with their level, or the reason there are none.
assert verbs or d["verbs"], d
for v in verbs:
    assert v["offload"] in ("none", "wait", "wait+calc") and v["name"] and v["note"], v
    assert not v["ec_offload"], v  # no upstream verb computes EC
PY
if ! grep -q '^verbs ' <<<"$out"; then
    grep -Eq '^verbs: (no RDMA device|not built)' <<<"$out" || fail "no reason for no verbs device"
fi
set +e
"$inec" devices --bogus >/dev/null 2>&1
[ $? = 2 ] || fail "--bogus is not a usage error"
"$inec" devices extra >/dev/null 2>&1
[ $? = 2 ] || fail "an argument is not a usage error"
"$inec" devices --help | grep -q 'usage: inec devices' || fail "--help"
echo ok
