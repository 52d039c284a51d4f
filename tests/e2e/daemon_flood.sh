#!/usr/bin/env bash
# Floods of the daemon by a hostile second local user (issue 26): as nobody, an attacker fills
# what it can (leases, connections, power streams, trickling requests, a change sent on a
# connection whose owner has exited, and over TCP with tokens a second user's change on the first
# one's implicit lease); while it holds all it took, a normal client (root, and a second user)
# still makes, renews and releases leases and changes settings. Each attack succeeded before the
# per-client limits, the request deadline, the liveness rule and subject-keyed implicit leases.
# Needs root (to run the attacker as nobody with setpriv) and python3. Bounded: ~15 s.
set -uo pipefail
. "$(dirname "$0")/daemon_common.bash"
[ "$(id -u)" = 0 ] || { echo "SKIPPED: needs root to run the attacker as nobody"; exit 77; }
command -v setpriv >/dev/null || { echo "SKIPPED: setpriv (util-linux) is not installed"; exit 77; }
group=$(id -gn nobody 2>/dev/null) || { echo "SKIPPED: no user nobody"; exit 77; }
FLOOD=$(cd "$(dirname "$0")/../helpers" && pwd)/flood.py
as_nobody() { setpriv --reuid=nobody --regid="$group" --clear-groups --inh-caps=-all -- "$@"; }
# A python3 that nobody may run (not a shim under root's home).
PY=
for p in /usr/bin/python3 /usr/local/bin/python3 "$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null)"; do
  [ -n "$p" ] && as_nobody "$p" -c 'pass' 2>/dev/null && { PY=$p; break; }
done
[ -n "$PY" ] || { echo "SKIPPED: no python3 that nobody may run"; exit 77; }
as_nobody test -r "$FLOOD" || { echo "SKIPPED: nobody cannot read $FLOOD"; exit 77; }
code() { curl -s -m 5 -o "$tmp/body" -w '%{http_code}' --unix-socket "$SOCK" "$@"; }
# attack NAME ARGS...: the attacker as nobody in the background; waits for its one line.
attack() {
  local name=$1; shift
  # setpriv execs python3: $! is the attacker itself (a function here would leave it behind a subshell).
  setpriv --reuid=nobody --regid="$group" --clear-groups --inh-caps=-all -- "$PY" "$FLOOD" "$@" \
    >"$tmp/$name.out" 2>"$tmp/$name.err" &
  ATTACKER=$!
  PIDS+=("$ATTACKER")
  for _ in $(seq 200); do
    [ -s "$tmp/$name.out" ] && return 0
    kill -0 "$ATTACKER" 2>/dev/null || die "attacker $name exited: $(cat "$tmp/$name.err")"
    sleep 0.05
  done
  die "attacker $name said nothing within 10 s"
}
stop_attack() { kill "$ATTACKER" 2>/dev/null; wait "$ATTACKER" 2>/dev/null; }
# normal_client WHAT: root, and a second unprivileged user (uid 1), each make a lease, change a
# limit under it, renew and release it, and read.
normal_client() {
  timeout 20 python3 "$FLOOD" normal "$SOCK" 1 210000 >"$tmp/normal.out" 2>&1 || die "$1: root: $(cat "$tmp/normal.out")"
  timeout 20 setpriv --reuid=1 --regid=1 --clear-groups --inh-caps=-all -- "$PY" "$FLOOD" normal "$SOCK" 1 205000 \
    >"$tmp/normal.out" 2>&1 || die "$1: uid 1: $(cat "$tmp/normal.out")"
}

start_daemon --socket-permissions 666 --request-timeout 2

# ---- 1. the lease table
attack leases leases "$SOCK" 1100
got=$(cat "$tmp/leases.out")
n=$(echo "$got" | awk '{print $2}')
[ "$n" -le 64 ] || die "nobody made $n leases (the per-client limit is 64): $got"
echo "$got" | grep -q "503.*uid 65534 holds 64 leases.*--max-leases-per-client" || die "refusal: $got"
normal_client "leases flood"
echo "ok - lease flood: nobody stops at $n leases (503 naming the limit); root and uid 1 still make, renew, release"
stop_attack

# ---- 2a. connections
attack conns conns "$SOCK" 300
got=$(cat "$tmp/conns.out")
n=$(echo "$got" | awk '{print $3}')
[ "$n" -le 32 ] || die "nobody holds $n connections (the per-client limit is 32): $got"
normal_client "connection flood"
echo "ok - connection flood: nobody holds $n of 300 connections; root's and uid 1's requests are served"
stop_attack
sleep 0.3

# ---- 2b. power streams (they never go idle)
attack streams streams "$SOCK" 40
got=$(cat "$tmp/streams.out")
n=$(echo "$got" | awk '{print $2}')
[ "$n" -ge 1 ] && [ "$n" -le 8 ] || die "nobody holds $n streams (the per-client limit is 8): $got"
echo "$got" | grep -q "(503, " || die "no stream was refused: $got"
normal_client "stream flood"
echo "ok - stream flood: nobody holds $n of 40 streams, the others 503; root and uid 1 are served"
stop_attack
sleep 0.3

# ---- 2c. a request whose headers trickle in
as_nobody "$PY" "$FLOOD" trickle "$SOCK" >"$tmp/trickle.out" 2>&1 || die "trickle: $(cat "$tmp/trickle.out")"
t=$(awk '{print $3}' "$tmp/trickle.out")
lt "$t" 5 || die "a trickling request was kept $t s (--request-timeout 2): $(cat "$tmp/trickle.out")"
echo "ok - a request trickling in a byte a second is cut after $t s (--request-timeout 2)"
code "http://localhost/metrics" >/dev/null
grep -Eq '^zeus_daemon_connections_refused_total [1-9]' "$tmp/body" && grep -Eq '^zeus_daemon_connections_timed_out_total [1-9]' "$tmp/body" ||
  die "/metrics does not count the refused and timed-out connections: $(grep connections "$tmp/body")"
echo "ok - /metrics counts them: $(grep -E '^zeus_daemon_connections' "$tmp/body" | tr '\n' ' ')"

# ---- 3. a change sent on a connection whose owner (SO_PEERCRED) has exited
as_nobody "$PY" "$FLOOD" deadholder "$SOCK" 0 150000 >"$tmp/dead.out" 2>&1
for _ in $(seq 50); do [ -s "$tmp/dead.out" ] && break; sleep 0.1; done
grep -q "^deadholder 403 .*pid [0-9]* has exited\|^deadholder 403 .*(pid [0-9]*) has exited" "$tmp/dead.out" ||
  die "a change from a dead connector: $(cat "$tmp/dead.out")"
# Nobody holds GPU 0: a second user's change (no override) is not refused with 409.
[ "$(code -X POST "http://localhost/gpu/set_power_limit?gpu_ids=0&power_limit_mw=220000&block=true")" = 200 ] ||
  die "after the dead holder: $(cat "$tmp/body")"
echo "ok - a change on a connection whose process exited: 403 saying so; GPU 0 stays free for others"
kill -TERM "$DAEMON"; wait "$DAEMON" 2>/dev/null

# ---- 7. over TCP, aliases of loopback are one user (issue 36, finding 8): before, one user made
# 960 leases from 15 addresses of 127.0.0.0/8 and held all 256 TCP connections from 10, counted
# per address; counted by the connecting uid (/proc/net/tcp), nobody stops at the per-client limits
# and a second user on the Unix socket still changes a setting.
start_daemon --mode both --tcp-bind-address 127.0.0.1:0 --socket-permissions 666 --request-timeout 3
port=$(sed -n 's/.*TCP port \([0-9]*\)$/\1/p' "$DLOG" | tail -1)
[ -n "$port" ] || die "no TCP port printed"
attack aliasleases aliasleases "127.0.0.1:$port" 1100 15
got=$(cat "$tmp/aliasleases.out")
n=$(echo "$got" | awk '{print $2}')
[ "$n" -le 64 ] || die "nobody made $n leases from 15 addresses (the per-client limit is 64): $got"
echo "$got" | grep -q "503.*uid 65534 holds 64 leases" || die "the refusal does not name nobody's uid: $got"
normal_client "TCP alias lease flood"
echo "ok - lease flood from 15 loopback aliases: nobody stops at $n leases, counted as uid 65534; root and uid 1 are served"
stop_attack
attack aliasconns aliasconns "127.0.0.1:$port" 300 10
got=$(cat "$tmp/aliasconns.out")
n=$(echo "$got" | awk '{print $3}')
[ "$n" -le 32 ] || die "nobody holds $n TCP connections from 10 aliases (the per-client limit is 32): $got"
normal_client "TCP alias connection flood"
echo "ok - connection flood from 10 loopback aliases: nobody holds $n of 300; root and uid 1 are served"
stop_attack
kill -TERM "$DAEMON"; wait "$DAEMON" 2>/dev/null

# ---- 6. implicit TCP leases under tokens belong to the token's subject
key=$tmp/signing.key
head -c 32 /dev/urandom | base64 >"$key"
chmod 600 "$key"
alice=$("$ZEUS" daemon token issue --signing-key-path "$key" --user alice --scope gpu-read,gpu-control --expires 1h)
bob=$("$ZEUS" daemon token issue --signing-key-path "$key" --user bob --scope gpu-read,gpu-control --expires 1h)
start_daemon --mode both --tcp-bind-address 127.0.0.1:0 --signing-key-path "$key" --tcp-anonymous-ttl 60
port=$(sed -n 's/.*TCP port \([0-9]*\)$/\1/p' "$DLOG" | tail -1)
[ -n "$port" ] || die "no TCP port printed"
tcode() { curl -s -m 5 -o "$tmp/body" -w '%{http_code}' "$@"; }
[ "$(tcode -X POST -H "Authorization: Bearer $alice" "127.0.0.1:$port/gpu/set_power_limit?gpu_ids=0&power_limit_mw=200000&block=true")" = 200 ] ||
  die "alice's change: $(cat "$tmp/body")"
[ "$(tcode -X POST -H "Authorization: Bearer $bob" "127.0.0.1:$port/gpu/set_power_limit?gpu_ids=0&power_limit_mw=120000&block=true")" = 409 ] ||
  die "bob's change over alice's: not 409: $(cat "$tmp/body")"
grep -q "alice" "$tmp/body" || die "the 409 does not name alice: $(cat "$tmp/body")"
tcode -H "Authorization: Bearer $alice" "127.0.0.1:$port/gpu/get_power_limit?gpu_ids=0" >/dev/null
grep -q '"power_limit_mw":200000' "$tmp/body" || die "GPU 0 is not at alice's 200000 mW: $(cat "$tmp/body")"
echo "ok - --tcp-anonymous-ttl with tokens: bob's change over alice's implicit lease is 409 naming alice"
kill -TERM "$DAEMON"; wait "$DAEMON" 2>/dev/null
exit 0
