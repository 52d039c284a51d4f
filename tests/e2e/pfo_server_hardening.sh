#!/usr/bin/env bash
# zeus pfo-server's access settings from the command line and the environment: an empty token is
# refused (flag and variable), a --token is blanked from the process list once the server runs
# (with a warning), a token file works, a non-loopback --host without a token is warned about,
# and a dump folder others may write is refused. Loopback only, each step bounded in time.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || { echo "SKIPPED: curl is not installed"; exit 77; }
tmp=$(mktemp -d)
srv=
trap '[ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$tmp"' EXIT
sched=(--scheduler AllMaxFrequency --scheduler-args '{"num_microbatches": 2}')

expect_code "--token '' is refused" 2 "$ZEUS" pfo-server "${sched[@]}" --port 0 --token ''
expect_err_has "--token '' says why" "an empty token would turn authentication off" \
  "$ZEUS" pfo-server "${sched[@]}" --port 0 --token ''
expect_code "ZEUS_PFO_TOKEN set but empty is refused" 2 env ZEUS_PFO_TOKEN= "$ZEUS" pfo-server "${sched[@]}" --port 0
expect_err_has "PERSEUS_TOKEN set but empty says which" "PERSEUS_TOKEN is set but empty" \
  env PERSEUS_TOKEN= "$ZEUS" pfo-server "${sched[@]}" --port 0
expect_code "--token with --token-file is refused" 2 "$ZEUS" pfo-server "${sched[@]}" --port 0 --token a --token-file /dev/null

# start_server OUT ERR ARGS...: starts it in the background, sets $srv and $port.
start_server() {
  local out=$1 err=$2; shift 2
  # A fresh file: the last server's "port N" must not be read before this one truncates it.
  rm -f "$out" "$err"
  "$ZEUS" pfo-server "${sched[@]}" --port 0 "$@" >"$out" 2>"$err" &
  srv=$!
  port=
  for _ in $(seq 100); do grep -q "port" "$out" 2>/dev/null && break; sleep 0.05; done
  port=$(awk '{print $NF}' "$out")
}
stop_server() {
  kill -TERM "$srv"
  for _ in $(seq 100); do kill -0 "$srv" 2>/dev/null || break; sleep 0.05; done
  wait "$srv" 2>/dev/null
  srv=
}

start_server "$tmp/out" "$tmp/err" --token s3cret-on-the-command-line
if [ -n "$port" ]; then
  if tr '\0' ' ' <"/proc/$srv/cmdline" | grep -q s3cret-on-the-command-line; then
    fail "the token is still in the process list"
  else
    pass "the token is blanked from the process list"
  fi
  grep -q "shows the token to every local user" "$tmp/err" && pass "--token warns" || fail "--token warns"
  code=$(curl -s -o /dev/null -w '%{http_code}' "127.0.0.1:$port/info")
  [ "$code" = 401 ] && pass "no token: 401" || fail "no token: $code"
  code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer s3cret-on-the-command-line' "127.0.0.1:$port/info")
  [ "$code" = 200 ] && pass "the blanked token still works" || fail "the blanked token: $code"
  stop_server
else
  fail "the server with --token did not start"; cat "$tmp/err"
fi

umask 077
printf 'from-a-file\n' >"$tmp/token"
start_server "$tmp/out" "$tmp/err" --token-file "$tmp/token"
if [ -n "$port" ]; then
  code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer from-a-file' "127.0.0.1:$port/info")
  [ "$code" = 200 ] && pass "--token-file" || fail "--token-file: $code"
  code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer wrong' "127.0.0.1:$port/info")
  [ "$code" = 401 ] && pass "--token-file, wrong token: 401" || fail "--token-file, wrong token: $code"
  stop_server
else
  fail "the server with --token-file did not start"; cat "$tmp/err"
fi
chmod 644 "$tmp/token"
start_server "$tmp/out" "$tmp/err" --token-file "$tmp/token"
[ -n "$port" ] && grep -q "may be read by every user" "$tmp/err" && pass "a readable token file is warned about" \
  || fail "a readable token file is warned about"
[ -n "$srv" ] && stop_server

# 192.0.2.1 is a documentation address: it never binds here, but the warning comes first.
expect_err_has "a non-loopback host without a token is warned about" "not a loopback address, without a token" \
  "$ZEUS" pfo-server "${sched[@]}" --port 0 --host 192.0.2.1

mkdir -m 700 "$tmp/shared" && chmod 777 "$tmp/shared"
expect_code "a world-writable dump folder is refused" 1 "$ZEUS" pfo-server "${sched[@]}" --port 0 --dump-data \
  --dump-dir "$tmp/shared"
expect_err_has "the refusal names the fix" "chmod go-w $tmp/shared" \
  "$ZEUS" pfo-server "${sched[@]}" --port 0 --dump-data --dump-dir "$tmp/shared"
finish
