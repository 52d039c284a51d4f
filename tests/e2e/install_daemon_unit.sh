#!/usr/bin/env bash
# make install's daemon files: the systemd unit (hardened, starting `zeus daemon serve` with the
# defaults file's arguments; systemd-analyze verify where systemd is installed) and the defaults
# file, which a second install leaves alone once edited.
set -u
. "$(dirname "$0")/lib.sh"
: "${ZEUS_BUILD_DIR:?}"
"$ZEUS" daemon --help >/dev/null 2>&1 || { echo "SKIPPED: this zeus was built without the daemon"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
expect_ok "cmake --install" cmake --install "$ZEUS_BUILD_DIR" --prefix "$tmp/p"
unit=$tmp/p/lib/systemd/system/zeus-daemon.service
defaults=$tmp/p/etc/default/zeus-daemon
[ -f "$unit" ] && pass "unit installed" || fail "unit installed"
[ -f "$defaults" ] && pass "defaults file installed" || fail "defaults file installed"
for k in "ExecStart=.*/zeus daemon serve \\\$ZEUS_DAEMON_ARGS" "EnvironmentFile=-.*/default/zeus-daemon" \
         "CapabilityBoundingSet=CAP_SYS_ADMIN CAP_DAC_READ_SEARCH CAP_CHOWN" "NoNewPrivileges=true" \
         "ProtectSystem=strict" "ReadWritePaths=/run/zeusd" "RuntimeDirectory=zeusd" "RuntimeDirectoryPreserve=yes" \
         "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6" "SystemCallFilter=@system-service" "Restart=on-failure"; do
  grep -Eq -- "^$k\$" "$unit" && pass "unit: $k" || fail "unit lacks $k"
done
grep -q '^#ZEUS_DAEMON_ARGS=""' "$defaults" && pass "defaults file names ZEUS_DAEMON_ARGS" || fail "defaults file"
if command -v systemd-analyze >/dev/null; then
  sed "s|^ExecStart=[^ ]*/zeus |ExecStart=$ZEUS |" "$unit" >"$tmp/zeus-daemon.service"
  expect_ok "systemd-analyze verify" systemd-analyze verify "$tmp/zeus-daemon.service"
else
  echo "# systemd-analyze not installed: the unit's syntax is not verified"
fi
echo 'ZEUS_DAEMON_ARGS="--enable gpu-read"' >>"$defaults"
cmake --install "$ZEUS_BUILD_DIR" --prefix "$tmp/p" >/dev/null 2>&1
grep -q -- '--enable gpu-read' "$defaults" && pass "an edited defaults file is kept" || fail "the defaults file was overwritten"
finish
