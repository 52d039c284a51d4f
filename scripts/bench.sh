#!/usr/bin/env bash
# Runs every benchmark built under <build>/bench (bench_*), one after the other.
# Usage: scripts/bench.sh [build-dir]
set -euo pipefail
build=${1:-build}
status=0
for b in "$build"/bench/bench_*; do
  [ -x "$b" ] || continue
  echo "== $(basename "$b")"
  "$b" || status=1
done
exit $status
