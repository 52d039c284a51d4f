#!/usr/bin/env bash
# make bench: runs every benchmark built in BUILD/bench and prints its figures. Not a test.
set -u
build=${1:-build}
export ZEUS_DATA_DIR=${ZEUS_DATA_DIR:-$(cd "$(dirname "$0")/../.." && pwd)/shared/data}
status=0
for b in "$build"/bench/bench_*; do
  [ -x "$b" ] || continue
  echo "== $(basename "$b")"
  "$b" || status=1
  echo
done
exit $status
