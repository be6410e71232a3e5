#!/usr/bin/env bash
# One fuzz target for FUZZ_SECONDS (default 5): run.sh FUZZER SEEDS WORKDIR.
# New inputs go to WORKDIR/corpus, crashes to WORKDIR/crash-* (the test then
# fails and names the file: reproduce with `FUZZER FILE`).
set -euo pipefail
fuzzer=$1 seeds=$2 work=$3
mkdir -p "$work/corpus"
exec "$fuzzer" "$work/corpus" "$seeds" \
    -max_total_time="${FUZZ_SECONDS:-5}" -timeout=10 -rss_limit_mb=2048 \
    -max_len=65536 -error_exitcode=1 -artifact_prefix="$work/" -print_final_stats=1 "${@:4}"
