#!/usr/bin/env bash
# cmake --install into a temporary prefix, then build a consumer with pkg-config and with
# find_package(zeus): the installed headers, libraries, zeus.pc and CMake package work.
set -u
. "$(dirname "$0")/lib.sh"
: "${ZEUS_BUILD_DIR:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
expect_ok "cmake --install" cmake --install "$ZEUS_BUILD_DIR" --prefix "$tmp/prefix"
for f in include/zeus.h include/zeus/monitor.h bin/zeus; do
  [ -e "$tmp/prefix/$f" ] && pass "installed $f" || fail "installed $f"
done
libdir=$(ls -d "$tmp"/prefix/lib* | head -1)
[ -f "$libdir/pkgconfig/zeus.pc" ] && pass "installed zeus.pc" || fail "installed zeus.pc"
cat >"$tmp/app.c" <<'C'
#include <stdio.h>
#include <zeus.h>
int main(void) {
  zeus_devices_opts o = {.backend = "sim"};
  zeus_devices *d;
  if (zeus_devices_open(&d, &o)) { fprintf(stderr, "%s\n", zeus_errmsg()); return 1; }
  printf("zeus %s, %u GPU\n", zeus_version(), zeus_gpu_count(d));
  zeus_devices_close(d);
  return zeus_version_hex() == ZEUS_VERSION_HEX ? 0 : 1;
}
C
export PKG_CONFIG_PATH="$libdir/pkgconfig"
if cc -o "$tmp/app_pc" "$tmp/app.c" $(pkg-config --cflags --libs zeus) -Wl,-rpath,"$libdir" 2>"$tmp/cc.log"; then
  expect_out_has "pkg-config consumer runs" "1 GPU" "$tmp/app_pc"
else
  fail "pkg-config consumer builds"; cat "$tmp/cc.log"
fi
mkdir -p "$tmp/cm"
cp "$tmp/app.c" "$tmp/cm/app.c"
cat >"$tmp/cm/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.18)
project(consumer C)
find_package(zeus REQUIRED)
add_executable(app app.c)
target_link_libraries(app zeus::zeus)
CM
if cmake -S "$tmp/cm" -B "$tmp/cm/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" >"$tmp/cm.log" 2>&1 &&
   cmake --build "$tmp/cm/build" >>"$tmp/cm.log" 2>&1; then
  LD_LIBRARY_PATH="$libdir" expect_out_has "find_package(zeus) consumer runs" "1 GPU" "$tmp/cm/build/app"
else
  fail "find_package(zeus) consumer builds"; tail -20 "$tmp/cm.log"
fi
finish
