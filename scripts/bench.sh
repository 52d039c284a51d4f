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
# The Python binding's per-call costs (python/zeusc over this build's libzeus).
py=/usr/bin/python3; [ -x "$py" ] || py=$(command -v python3 || true)
if [ -n "$py" ] && [ -e "$build/libzeus.so" ]; then
  echo "== bench_python.py"
  ZEUSC_LIBRARY="$build/libzeus.so" "$py" "$(dirname "$0")/../bench/bench_python.py" || status=1
  echo
fi
exit $status
