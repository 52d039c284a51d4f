#!/usr/bin/env bash
# Installs the Debian packages the build and the tests need, only those missing.
# Usage: scripts/deps.sh [build|test|all]   (default: all)
set -euo pipefail
what=${1:-all}
build_pkgs=(cmake make gcc pkg-config libjansson-dev libsqlite3-dev libcurl4-openssl-dev libmicrohttpd-dev libssl-dev libpq-dev)
test_pkgs=(libcmocka-dev python3 python3-pytest python3-setuptools python3-wheel python3-venv python3-pip valgrind clang libclang-rt-14-dev librsvg2-bin prometheus prometheus-pushgateway curl postgresql ccache sqlite3)
opt_pkgs=(libopenmpi-dev openmpi-bin)
# The fuzzer runtime must match the installed clang's major version (Debian 12: clang 14); the
# list above names Debian 12's, and an installed clang of another version picks its own.
clang_major=$(clang -dumpversion 2>/dev/null | cut -d. -f1 || true)
if [ -n "$clang_major" ] && [ "$clang_major" != 14 ]; then
  test_pkgs=("${test_pkgs[@]/libclang-rt-14-dev/libclang-rt-$clang_major-dev}")
fi
case "$what" in
  build) want=("${build_pkgs[@]}") ;;
  test|all) want=("${build_pkgs[@]}" "${test_pkgs[@]}" "${opt_pkgs[@]}") ;;
  *) echo "deps.sh: unknown set '$what' (expected build, test or all)" >&2; exit 2 ;;
esac
missing=()
for p in "${want[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "deps.sh: installing missing Debian packages: ${missing[*]}" >&2
SUDO=
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
    echo "deps.sh: need root (or sudo) to install: ${missing[*]}" >&2; exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
# A brand-new system has no package lists at all: fetch them first, rather than fail and retry.
if ! compgen -G "/var/lib/apt/lists/*_Packages" >/dev/null; then
  $SUDO apt-get update -q </dev/null
fi
# An out-of-date package list makes installs fail; refresh it once when an install fails.
if ! $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null; then
  $SUDO apt-get update -q </dev/null
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
fi
