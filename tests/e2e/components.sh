#!/usr/bin/env bash
# The optional components (cmake/components.cmake) of this build: libzeus links the libraries of
# the components built and none of those left out (ldd), zeus.pc and the CMake package name only
# the former, and the CLI lists a left-out command as such and refuses it with a clear message.
set -u
. "$(dirname "$0")/lib.sh"
: "${ZEUS_LIBRARY:?}" "${ZEUS_BUILD_DIR:?}"
ldd_out=$(ldd "$ZEUS_LIBRARY")
pc=$(cat "$ZEUS_BUILD_DIR/zeus.pc")
cfg=$(cat "$ZEUS_BUILD_DIR/zeusConfig.cmake")
# A pkg-config module's library: libmicrohttpd -> libmicrohttpd.so, sqlite3 -> libsqlite3.so.
lib_of() { case $1 in lib*) echo "$1.so" ;; *) echo "lib$1.so" ;; esac; }
for p in ${ZEUS_PKGS_BUILT:-}; do
  echo "$ldd_out" | grep -q "$(lib_of "$p")" && pass "libzeus links $(lib_of "$p")" || fail "libzeus links $(lib_of "$p")"
  echo "$pc" | grep -q "^Requires.private:.* $p\b" && pass "zeus.pc requires $p" || fail "zeus.pc requires $p"
  echo "$cfg" | grep -q "IMPORTED_TARGET $p)" && pass "zeusConfig.cmake finds $p" || fail "zeusConfig.cmake finds $p"
done
for p in ${ZEUS_PKGS_LEFT_OUT:-}; do
  echo "$ldd_out" | grep -q "$(lib_of "$p")" && fail "libzeus does not link $(lib_of "$p")" || pass "libzeus does not link $(lib_of "$p")"
  echo "$pc" | grep -q "\b$p\b" && fail "zeus.pc does not name $p" || pass "zeus.pc does not name $p"
  echo "$cfg" | grep -q "IMPORTED_TARGET $p)" && fail "zeusConfig.cmake does not look for $p" \
    || pass "zeusConfig.cmake does not look for $p"
done
# Commands of left-out components: listed apart in --help, refused with the option to turn on.
for c in ${ZEUS_COMMANDS_LEFT_OUT:-}; do
  expect_out_has "zeus --help lists $c as not built" "^  $c +ZEUS_WITH_[A-Z_]+=ON, needs " "$ZEUS" --help
  expect_code "zeus $c is a usage error" 2 "$ZEUS" "$c" --help
  expect_err_has "zeus $c says how to build it" "is not part of this build: configure with -DZEUS_WITH_" "$ZEUS" "$c"
done
for c in ${ZEUS_COMMANDS_BUILT:-}; do
  expect_out_has "zeus --help lists $c" "^  $c +[a-z]" "$ZEUS" --help
  expect_ok "zeus $c --help" "$ZEUS" "$c" --help
done
echo "$(grep -c '#define ZEUS_HAVE_' "$ZEUS_BUILD_DIR/include/zeus/config.h") components in zeus/config.h"
[ "$(grep -c '#define ZEUS_HAVE_' "$ZEUS_BUILD_DIR/include/zeus/config.h")" -ge 3 ] && pass "zeus/config.h lists the components" \
  || fail "zeus/config.h lists the components"
finish
