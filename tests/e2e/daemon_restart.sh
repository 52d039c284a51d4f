#!/usr/bin/env bash
# zeus daemon killed and restarted (what it promises, docs/daemon.md): with its state file, the
# changes of clients still running stay theirs and come back when they exit; the changes of
# clients that exited while it was down are given back at its start. Without a state file they
# are lost. Then TCP: JWT tokens from `zeus daemon token issue`, and a libzeus client's lease that
# its renewer keeps alive and that lapses once the client is SIGKILLed.
set -uo pipefail
. "$(dirname "$0")/daemon_common.bash"

# The fake GPUs keep their settings across the daemon's restart, as real ones do.
export FAKE_NVML_STATE=$tmp/gpus.state
start_daemon
start_holder a 0 200000
a=$HOLDER
start_holder b 1 150000
b=$HOLDER
grep -q "\"pid\": $b" "$tmp/run/state.json" || die "the state file does not record pid $b"
[ "$(stat -c %a "$tmp/run/state.json")" = 600 ] || die "the state file is not mode 600"
kill -9 "$DAEMON"; wait "$DAEMON" 2>/dev/null
kill -9 "$b"; wait "$b" 2>/dev/null   # b exits while the daemon is down
: >"$LOG"
start_daemon   # GPU 1 is still at 150000 mW, and the records say so
wait_line "$(pl_line 1 300000)" 1 1.0 >/dev/null || die "b's change was not given back at start"
grep -q "pid $b (daemon_test_cli) exited while the daemon was down" "$DLOG" || die "the replay is not logged"
echo "ok - a change of a client that died while the daemon was down is given back at start"
get /leases | grep -q "\"pid\":$a" || die "a's lease was not adopted again: $(get /leases)"
[ "$(lines "$(pl_line 0 300000)")" = 0 ] || die "a's change was given back although a still runs"
if env ZEUSD_SOCK_PATH="$SOCK" "$CLIENT" set 0 100000 >/dev/null 2>"$tmp/c.err"; then die "a's setting is not held after the restart"; fi
grep -q "pid $a" "$tmp/c.err" || die "the 409 after the restart does not name a: $(cat "$tmp/c.err")"
echo "ok - a client still running keeps its change across the restart"
kill -9 "$a"
took=$(wait_line "$(pl_line 0 300000)" 1 1.0) || die "a's change not given back within 1 s after the restart"
echo "ok - and gets it given back ${took} s after it is killed"
kill -TERM "$DAEMON"; wait "$DAEMON"
unset FAKE_NVML_STATE

# Without a state file, a crash loses the records (documented).
: >"$LOG"
start_daemon --no-state-file
start_holder a 0 175000
a=$HOLDER
[ -e "$tmp/run/state.json" ] && die "a state file was written with --no-state-file"
kill -9 "$DAEMON"; wait "$DAEMON" 2>/dev/null
kill -9 "$a"; wait "$a" 2>/dev/null
start_daemon --no-state-file
sleep 0.3
[ "$(lines "$(pl_line 0 300000)")" = 0 ] || die "something was given back without a state file"
echo "ok - --no-state-file: nothing is replayed"
kill -TERM "$DAEMON"; wait "$DAEMON"

# ---- TCP with JWT
key=$tmp/signing.key
head -c 32 /dev/urandom | base64 >"$key"
chmod 600 "$key"
tok_rw=$("$ZEUS" daemon token issue --signing-key-path "$key" --user alice --scope gpu-read,gpu-control --expires 1h) || die "token issue failed"
tok_r=$("$ZEUS" daemon token issue --signing-key-path "$key" --user bob --scope gpu-read --expires never)
"$ZEUS" daemon token issue --signing-key-path "$key" --user x --scope gpu-write --expires 1h 2>"$tmp/err" && die "a bad scope was accepted"
grep -q "'gpu-write' is not an API group" "$tmp/err" || die "bad scope message: $(cat "$tmp/err")"
"$ZEUS" daemon token issue --signing-key-path "$key" --user x --scope gpu-read --expires soon 2>"$tmp/err" && die "a bad --expires was accepted"
echo "ok - zeus daemon token issue"
start_daemon --mode both --tcp-bind-address 127.0.0.1:0 --signing-key-path "$key"
port=$(sed -n 's/.*TCP port \([0-9]*\)$/\1/p' "$DLOG" | tail -1)
[ -n "$port" ] || die "no TCP port printed"
code() { curl -s -o "$tmp/body" -w '%{http_code}' "$@"; }
[ "$(code "127.0.0.1:$port/gpu/get_power")" = 401 ] || die "no token: not 401"
[ "$(code -H "Authorization: Bearer $tok_r" "127.0.0.1:$port/gpu/get_power")" = 200 ] || die "read token: not 200"
[ "$(code -X POST -H "Authorization: Bearer $tok_r" "127.0.0.1:$port/gpu/set_power_limit?gpu_ids=0&power_limit_mw=200000")" = 403 ] ||
  die "read token on a write: not 403"
grep -q "Token for user 'bob' lacks required scope 'gpu-control'" "$tmp/body" || die "403 body: $(cat "$tmp/body")"
[ "$(code -H "Authorization: Bearer $tok_rw" "127.0.0.1:$port/auth/whoami")" = 200 ] && grep -q '"sub":"alice"' "$tmp/body" ||
  die "whoami: $(cat "$tmp/body")"
echo "ok - TCP with tokens: 401, 200, 403 naming the user and scope, whoami"
# A libzeus client over TCP: a lease of 1 s that its renewer keeps alive while it runs.
: >"$LOG"
env -u ZEUSD_SOCK_PATH ZEUSD_HOST_PORT="127.0.0.1:$port" ZEUSD_TOKEN="$tok_rw" ZEUS_DAEMON_LEASE_TTL_S=1 \
  "$CLIENT" hold 1 160000 >"$tmp/t.out" 2>"$tmp/t.err" &
t=$!
PIDS+=("$t")
for _ in $(seq 100); do grep -q held "$tmp/t.out" && break; sleep 0.05; done
grep -q held "$tmp/t.out" || die "the TCP client did not hold: $(cat "$tmp/t.err")"
sleep 2.5
[ "$(lines "$(pl_line 1 300000)")" = 0 ] || die "the renewed lease lapsed while its client ran"
curl -s -H "Authorization: Bearer $tok_r" "127.0.0.1:$port/leases" | grep -q '"user":"alice"' ||
  die "the TCP lease does not name its token's user"
echo "ok - the TCP client's lease outlives its TTL while the client renews it"
kill -9 "$t"
took=$(wait_line "$(pl_line 1 300000)" 1 2.5) || die "the TCP lease did not lapse after its client died"
echo "ok - and lapses ${took} s after the client is killed (TTL 1 s)"
kill -TERM "$DAEMON"; wait "$DAEMON"
