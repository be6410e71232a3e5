#!/usr/bin/env bash
# Prints one closing line over the given meson build dirs: "tests: N passed, N failed".
set -euo pipefail
python3 - "$@" <<'PY'
import json, sys
passed = failed = skipped = 0
for build in sys.argv[1:]:
    with open(f"{build}/meson-logs/testlog.json") as f:
        for line in f:
            r = json.loads(line)["result"]
            if r in ("OK", "EXPECTEDFAIL"):
                passed += 1
            elif r == "SKIP":
                skipped += 1
            else:
                failed += 1
print(f"tests: {passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
sys.exit(1 if failed else 0)
PY
