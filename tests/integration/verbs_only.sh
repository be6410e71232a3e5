#!/usr/bin/env bash
# verbs_only.sh INEC CMD...: runs CMD where the verbs provider sees an RDMA
# device, else exits 77 (meson's "skipped") and says why, as `inec devices`
# does: no device, or no verbs provider in this build.
set -euo pipefail
inec=$1
shift
why=$("$inec" devices | sed -n 's/^verbs: //p')
if [ -n "$why" ]; then
    echo "skipped: verbs: $why"
    exit 77
fi
exec "$@"
