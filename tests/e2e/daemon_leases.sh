#!/usr/bin/env bash
# zeus daemon leases, end to end with the real daemon over the fake NVML, asserted through the fake
# NVML's setter log: a client killed with SIGKILL has its limit back within a second; two clients
# contend (409 naming the holder, override, the first holder's value back when the second goes);
# 100 concurrent clients; SIGTERM gives everything back and removes the socket and state file.
set -uo pipefail
. "$(dirname "$0")/daemon_common.bash"

start_daemon

# ---- SIGKILL: the limit is back within a second
start_holder a 0 150000
a=$HOLDER
[ "$(lines "$(pl_line 0 150000)")" = 1 ] || die "the holder's change is not in the setter log"
[ "$(limit_of 0)" = 150000 ] || die "GPU 0 is not at 150000 mW"
get /leases | grep -q "\"pid\":$a" || die "GET /leases does not list pid $a"
kill -9 "$a"
took=$(wait_line "$(pl_line 0 300000)" 1 1.0) || die "GPU 0 was not given back within 1 s of SIGKILL"
echo "ok - SIGKILLed client's limit given back after ${took} s"
grep -q "pid $a (daemon_test_cli) exited" "$DLOG" || die "the daemon did not log the give-back"
echo "ok - the give-back is logged"

# ---- two clients contending
start_holder a 1 200000
a=$HOLDER
if env ZEUSD_SOCK_PATH="$SOCK" "$CLIENT" set 1 150000 >/dev/null 2>"$tmp/b.err"; then die "the second client was not refused"; fi
grep -q "HTTP 409" "$tmp/b.err" && grep -q "is held by L[0-9]*: .*pid $a (daemon_test_cli" "$tmp/b.err" ||
  die "409 does not name the holder: $(cat "$tmp/b.err")"
echo "ok - the second client gets 409 naming pid $a"
[ "$(lines "$(pl_line 1 150000)")" = 0 ] || die "the refused change reached the GPU"
env ZEUSD_SOCK_PATH="$SOCK" ZEUS_TEST_OVERRIDE=1 "$CLIENT" set 1 150000 >/dev/null 2>"$tmp/b.err" || die "override failed: $(cat "$tmp/b.err")"
[ "$(lines "$(pl_line 1 150000)")" = 1 ] || die "the override did not reach the GPU"
# The overriding client has exited: the first holder's value comes back.
wait_line "$(pl_line 1 200000)" 2 1.0 >/dev/null || die "the first holder's 200000 mW did not come back"
[ "$(limit_of 1)" = 200000 ] || die "GPU 1 is not back at the first holder's value"
echo "ok - override, then the first holder's value back when the second goes"
kill -9 "$a"
wait_line "$(pl_line 1 300000)" 1 1.0 >/dev/null || die "GPU 1 not given back after the first holder died"
echo "ok - and the original value when the first goes"

# ---- 100 concurrent clients (separate processes)
mkdir "$tmp/codes"
seq 0 99 | xargs -P 100 -I{} sh -c '
  i={}; gpu=$((i % 2)); mw=$((100000 + 1000 * i)); ov=$([ $((i % 3)) = 0 ] && echo "&override=true")
  curl -s -o /dev/null -w "%{http_code}" -X POST --unix-socket "$1" \
    "http://localhost/gpu/set_power_limit?gpu_ids=$gpu&power_limit_mw=$mw$ov" >"$2/set.$i"
  curl -s -o /dev/null -w "%{http_code}" --unix-socket "$1" "http://localhost/discover" >"$2/get.$i"' _ "$SOCK" "$tmp/codes"
ok=$(grep -lx 200 "$tmp"/codes/set.* | wc -l)
busy=$(grep -lx 409 "$tmp"/codes/set.* | wc -l)
gets=$(grep -lx 200 "$tmp"/codes/get.* | wc -l)
[ $((ok + busy)) = 100 ] || die "100 concurrent writes: $ok ok and $busy busy: $(for f in "$tmp"/codes/set.*; do cat "$f"; echo; done | sort | uniq -c)"
[ "$ok" -ge 34 ] || die "only $ok of 100 concurrent writes succeeded"
[ "$gets" = 100 ] || die "only $gets of 100 concurrent reads answered 200"
echo "ok - 100 concurrent clients: $ok writes applied, $busy refused with 409, 100 reads"
# Every one of them has exited: everything is given back within a second.
t0=$(now)
until [ "$(limit_of 0)" = 300000 ] && [ "$(limit_of 1)" = 300000 ] && get /leases | grep -q '"leases":\[\]'; do
  lt "$(elapsed "$t0" "$(now)")" 1.0 || die "not everything given back 1 s after 100 clients exited: $(get /leases | head -c 300)"
  sleep 0.02
done
echo "ok - after them, both GPUs at 300000 mW and no lease left"

# ---- /metrics after them: the 100 reads counted, no lease left, promtool accepts the text
curl -s --unix-socket "$SOCK" http://localhost/metrics >"$tmp/metrics.txt" || die "GET /metrics failed"
grep -q '^zeus_daemon_requests_total{route="/discover",code="200"} 1[0-9][0-9]$' "$tmp/metrics.txt" ||
  die "/metrics does not count the 100 reads of /discover: $(grep discover "$tmp/metrics.txt")"
grep -qx 'zeus_daemon_leases 0' "$tmp/metrics.txt" || die "/metrics: leases not 0: $(grep leases "$tmp/metrics.txt")"
if command -v promtool >/dev/null; then
  promtool check metrics <"$tmp/metrics.txt" >"$tmp/promtool.out" 2>&1 || die "promtool: $(cat "$tmp/promtool.out")"
  echo "ok - /metrics counts the reads, no lease left, promtool check metrics passes"
else
  echo "ok - /metrics counts the reads and no lease is left (promtool not installed: not checked by it)"
fi

# ---- SIGTERM gives back what live clients hold, and cleans up
start_holder a 0 125000
a=$HOLDER
n=$(lines "$(pl_line 0 300000)")
kill -TERM "$DAEMON"
for _ in $(seq 100); do kill -0 "$DAEMON" 2>/dev/null || break; sleep 0.05; done
kill -0 "$DAEMON" 2>/dev/null && die "the daemon still runs 5 s after SIGTERM"
wait "$DAEMON"; rc=$?
[ "$rc" = 0 ] || die "the daemon exited with $rc after SIGTERM"
[ "$(lines "$(pl_line 0 300000)")" = $((n + 1)) ] || die "SIGTERM did not give GPU 0 back"
[ -e "$SOCK" ] && die "the socket is still there"
[ -e "$tmp/run/state.json" ] && die "the state file is still there"
echo "ok - SIGTERM: the held limit given back, socket and state file removed"
