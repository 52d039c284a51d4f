#!/usr/bin/env bash
# `make test-components`: every optional component of libzeus can be left out alone. For each
# zeus_component() of cmake/components.cmake, configures a build with that one OFF (the others
# ON, tests and benchmarks on), builds everything (libzeus, the CLI, tests, examples, benchmarks:
# a module or test that calls into the component left out fails to link here), and runs the unit
# tests that apply (those of the component are left out of the test suite by its USED_BY).
#
#   scripts/test-components.sh [BUILD_ROOT]     (default build-components; one folder per component)
#   ZEUS_COMPONENT_TESTS="-L unit"              ctest arguments for each build ("" for every test;
#                                               "none" to build only)
#   ZEUS_COMPONENTS="DAEMON RUN"                only these components
#   JOBS=N, CMAKE_FLAGS=...                     as the Makefile's
set -euo pipefail
cd "$(dirname "$0")/.."
root=${1:-build-components}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
tests=${ZEUS_COMPONENT_TESTS--L unit}
names=${ZEUS_COMPONENTS:-$(sed -n 's/^zeus_component(\([A-Z0-9_]*\).*/\1/p' cmake/components.cmake)}
[ -n "$names" ] || { echo "test-components: no zeus_component() in cmake/components.cmake" >&2; exit 1; }
mkdir -p "$root"
failed=()
t_all=$SECONDS
for c in $names; do
  dir=$root/${c,,}-off
  t0=$SECONDS
  echo "== ZEUS_WITH_$c=OFF ($dir)"
  # shellcheck disable=SC2086
  if ! cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZEUS_TESTS=ON -DZEUS_BENCH=ON \
        -DZEUS_WITH_$c=OFF ${CMAKE_FLAGS:-} >"$dir.configure.log" 2>&1; then
    echo "   configure FAILED: see $dir.configure.log"; failed+=("$c (configure)"); continue
  fi
  grep -E '^ +ZEUS_WITH_' "$dir.configure.log" | sed 's/^ */   /' || true
  if ! cmake --build "$dir" -j "$jobs" >"$dir.build.log" 2>&1; then
    echo "   build FAILED: see $dir.build.log"; grep -E 'error|undefined reference' "$dir.build.log" | head -10 | sed 's/^/   /'
    failed+=("$c (build)"); continue
  fi
  if [ "$tests" != none ]; then
    # shellcheck disable=SC2086
    if ! scripts/ctest.sh "$dir" -j "$jobs" $tests >"$root/${c,,}-off.test.log" 2>&1; then
      echo "   tests FAILED: see $root/${c,,}-off.test.log"
      # the failures and their output here too: CI and fresh machines keep only this stream
      grep -E 'tests passed|\*\*\*(Failed|Timeout|Exception)' "$root/${c,,}-off.test.log" | sed 's/^/   /'
      sed -n '/The following tests FAILED/,$p' "$root/${c,,}-off.test.log" | sed 's/^/   /'
      awk '/\*\*\*(Failed|Timeout|Exception)/ { show = 40 } show-- > 0' "$root/${c,,}-off.test.log" | head -120 |
        sed 's/^/   | /'
      failed+=("$c (tests)"); continue
    fi
    echo "   $(grep -E 'tests passed' "$root/${c,,}-off.test.log")"
    sed -n '/failed once and passed when run again/,$p' "$root/${c,,}-off.test.log" | sed 's/^/   /'
  fi
  echo "   ok ($((SECONDS - t0)) s)"
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "test-components: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "test-components: each of $(echo $names | wc -w) components left out alone builds and passes ($((SECONDS - t_all)) s)"
