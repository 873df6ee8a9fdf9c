#!/usr/bin/env bash
# The full benchmark: every corpus at floor 0.8 and 0.5; tables go to benchmarks/results/.
# Usage: benchmarks/run_all.sh [PYTHON]   (default: python3; run from anywhere)
set -euo pipefail
PY=${1:-python3}
cd "$(dirname "$0")/.."
R=benchmarks/results
mkdir -p "$R"
TIMEOUT=${TIMEOUT:-600}
run() {  # kind docs floor
  local name="$1-$2-$3"
  rm -f "$R/$name.md"
  "$PY" benchmarks/bench_scan.py --kind "$1" --docs "$2" --floor "$3" --timeout "$TIMEOUT" \
      --out-md "$R/$name.md" --out-json "$R/$name.json"
}
run long 10000 0.8
run long 10000 0.5
run short 100000 0.8
run short 100000 0.5
run real 200000 0.8
run real 200000 0.5
if [ "${FULL_REAL:-1}" = 1 ]; then run real 841708 0.8; fi
"$PY" benchmarks/summarize.py > /dev/null
