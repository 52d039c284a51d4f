#!/usr/bin/env bash
# A token with the gpu-control scope only (no gpu-read) against a daemon with tokens: the hybrid
# (nvml+zeusd) reads settings with its own NVML, so it sets a power limit (the read of the limit it
# makes first to put it back later is not sent to the daemon, whose 403 failed the set); a client
# with no NVML (ZEUS_GPU_BACKEND=zeusd) must read through the daemon and fails naming the scope.
set -uo pipefail
. "$(dirname "$0")/daemon_common.bash"

key=$tmp/signing.key
head -c 32 /dev/urandom | base64 >"$key"
chmod 600 "$key"
tok_c=$("$ZEUS" daemon token issue --signing-key-path "$key" --user carol --scope gpu-control --expires 1h) ||
  die "token issue failed"
start_daemon --signing-key-path "$key"

env ZEUSD_SOCK_PATH="$SOCK" ZEUSD_TOKEN="$tok_c" "$CLIENT" set 0 200000 >"$tmp/h.out" 2>"$tmp/h.err" ||
  die "the hybrid with a control-only token did not set the limit: $(cat "$tmp/h.err")"
grep -qx set "$tmp/h.out" || die "the hybrid did not say set: $(cat "$tmp/h.out")"
[ "$(lines "$(pl_line 0 200000)")" = 1 ] || die "the daemon did not set GPU 0 to 200000 mW"
wait_line "$(pl_line 0 300000)" 1 2.0 >/dev/null || die "the hybrid's change was not given back after it exited"
curl -s --unix-socket "$SOCK" -H "Authorization: Bearer $tok_c" http://localhost/metrics >"$tmp/metrics"
grep -q '^zeus_daemon_requests_total{.*code="200"' "$tmp/metrics" || die "no /metrics: $(head -5 "$tmp/metrics")"
grep -q '^zeus_daemon_requests_total{.*code="403"' "$tmp/metrics" &&
  die "the daemon refused a request of the hybrid: $(grep 'code="403"' "$tmp/metrics")"
echo "ok - nvml+zeusd with a gpu-control token sets a power limit, reading it locally"

if env ZEUS_GPU_BACKEND=zeusd ZEUSD_SOCK_PATH="$SOCK" ZEUSD_TOKEN="$tok_c" "$CLIENT" set 1 200000 \
  >"$tmp/r.out" 2>"$tmp/r.err"; then
  die "the remote client set a limit it cannot read back"
fi
grep -q "lacks required scope 'gpu-read'" "$tmp/r.err" && grep -q "no GPU library in this process" "$tmp/r.err" ||
  die "the remote client's error does not name the gpu-read scope: $(cat "$tmp/r.err")"
[ "$(lines "$(pl_line 1 200000)")" = 0 ] || die "the remote client's refused set reached NVML"
echo "ok - zeusd alone with a gpu-control token fails, naming the gpu-read scope"
kill -TERM "$DAEMON"; wait "$DAEMON"
