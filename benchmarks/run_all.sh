#!/usr/bin/env bash
# The full benchmark: every corpus at floor 0.8 and 0.5; tables go to benchmarks/results/.
# Usage: benchmarks/run_all.sh [PYTHON]   (default: python3; run from anywhere)
set -euo pipefail
PY=${1:-python3}
cd "$(dirname "$0")/.."
R=benchmarks/results
mkdir -p "$R"
TIMEOUT=${TIMEOUT:-600}
run() {  # kind docs floor [more bench_scan options]
  local name="$1-$2-$3" kind=$1 docs=$2 floor=$3
  shift 3
  rm -f "$R/$name.md"
  "$PY" benchmarks/bench_scan.py --kind "$kind" --docs "$docs" --floor "$floor" --timeout "$TIMEOUT" \
      --out-md "$R/$name.md" --out-json "$R/$name.json" "$@"
}
run long 10000 0.8
run long 10000 0.5
run short 100000 0.8
run short 100000 0.5
run real 200000 0.8
run real 200000 0.5
run template 20000 0.5
run families 64000 0.5
# Real template pages (issue 21): the 9,885 manual pages of ../shared/corpora/manpages_a.jsonl.gz
# and twice as many (each page plus a generated variant in its template, standing in for the
# full 19.8k-page set), against both of rensa's lean uses; the first also with a first run on
# an empty numba cache. Skipped when the file is absent.
if "$PY" -c 'import sys; sys.path.insert(0, "benchmarks"); import corpora; sys.exit(corpora.manpages_path() is None)'; then
  run manpages 9885 0.5 --peers rensa,rensa-sets --cold
  run manpages2x 19770 0.5 --peers rensa,rensa-sets
else
  echo "skipping manpages, manpages2x: ../shared/corpora/manpages_a.jsonl.gz not found (or set DEDUP_BENCH_MANPAGES)" >&2
fi
if [ "${FULL:-1}" = 1 ]; then  # the scaling issue's sizes (~20 min; datasketch would take ~7 min each)
  run real 841708 0.8 --peers rensa
  run real 841708 0.5 --peers rensa
  run realplus 1000000 0.5 --peers rensa
  run long 100000 0.8 --peers rensa
  run long 100000 0.5 --peers rensa
fi
# Adding documents to a scanned project: incremental scan against a full rescan (issue 24).
"$PY" benchmarks/bench_incremental.py --out-md "$R/incremental-families-100000+2000-0.5.md"
if [ "${FULL:-1}" = 1 ]; then
  "$PY" benchmarks/bench_incremental.py --kind realplus --docs 841708 --add 10000 \
      --out-md "$R/incremental-realplus-841708+10000-0.5.md"
fi
"$PY" benchmarks/summarize.py > /dev/null
