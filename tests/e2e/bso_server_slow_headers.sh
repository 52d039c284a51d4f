#!/usr/bin/env bash
# zeus bso-server against slow headers (issue 36, finding 1), played by a hostile second local user
# (nobody): 400 connections (of 256 allowed) whose headers trickle in (a line every 4 s, reconnecting when cut)
# and one request sent a byte a second. Before the connection guard (src/http/guard.c) they held
# every slot (each byte reset the idle timeout; the token is only checked after the headers) and
# every other client timed out. Now nobody holds at most --max-connections-per-client, a request
# that is not whole within --request-timeout is cut, and root and a second user (uid 1) are served
# throughout. Needs root (to run the attacker as nobody with setpriv) and python3. Bounded: ~20 s.
set -u
. "$(dirname "$0")/lib.sh"
need_nobody_python
tmp=$(mktemp -d)
chmod 755 "$tmp"
srv= att=
trap '[ -n "$att" ] && kill "$att" 2>/dev/null; [ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$tmp"' EXIT

"$ZEUS" bso-server --port 0 --log-level debug --database "sqlite://$tmp/bso.db" --request-timeout 2 --max-connections 256 \
  >"$tmp/out" 2>"$tmp/log" &
srv=$!
for _ in $(seq 100); do grep -q "port" "$tmp/out" 2>/dev/null && break; sleep 0.05; done
port=$(awk '{print $NF}' "$tmp/out")
[ -n "$port" ] || { fail "no port printed: $(cat "$tmp/log")"; finish; }

setpriv --reuid=nobody --regid="$group" --clear-groups --inh-caps=-all -- "$PY" "$FLOOD" trickles "127.0.0.1:$port" 400 >"$tmp/att.out" 2>&1 &
att=$!
for _ in $(seq 100); do [ -s "$tmp/att.out" ] && break; sleep 0.1; done
sleep 1
served=0 tries=0
for i in $(seq 12); do # root and uid 1 in turn, over ~9 s of the attack
  tries=$((tries + 1))
  if [ $((i % 2)) = 0 ]; then
    code=$(curl -s -m 3 -o /dev/null -w '%{http_code}' "127.0.0.1:$port/jobs/batch_size?job_id=nope")
  else
    code=$(as_user 1 1 curl -s -m 3 -o /dev/null -w '%{http_code}' "127.0.0.1:$port/jobs/batch_size?job_id=nope")
  fi
  [ "$code" != 000 ] && [ "$code" != 503 ] && served=$((served + 1))
  sleep 0.5
done
[ "$served" = "$tries" ] && pass "400 trickling connections of nobody (--max-connections 256): root and uid 1 served $served of $tries" ||
  fail "under slow headers only $served of $tries requests were served"
grep -q "uid 65534 holds 64 connections, the most one client may hold (--max-connections-per-client)" "$tmp/log" &&
  pass "nobody's connections beyond its 64 are refused, naming the bound" ||
  fail "no refusal naming nobody's bound in the log: $(grep -m3 refused "$tmp/log")"
grep -q "no whole request within 2 s (--request-timeout)" "$tmp/log" &&
  pass "trickling connections are cut at the request deadline" ||
  fail "no connection was cut at the deadline: $(tail -5 "$tmp/log")"
kill "$att" 2>/dev/null; wait "$att" 2>/dev/null; att=
sleep 1 # the attacker's connections close
# /metrics: the guard's counters saw the refusals and the cuts the log names.
curl -s -m 3 "127.0.0.1:$port/metrics" >"$tmp/metrics"
refused=$(awk '/^zeus_bso_connections_refused_total / {print $2}' "$tmp/metrics")
cut=$(awk '/^zeus_bso_connections_timed_out_total / {print $2}' "$tmp/metrics")
# The log (debug) names every refusal, and each reaper pass's cuts with their number.
nlog_refused=$(grep -c "connection refused:" "$tmp/log")
nlog_cut=$(sed -n 's/.*bso-server: \([0-9]*\) connections\{0,1\} closed: no whole request.*/\1/p' "$tmp/log" | awk '{ n += $1 } END { print n + 0 }')
awk -v r="$refused" -v c="$cut" -v lr="$nlog_refused" -v lc="$nlog_cut" 'BEGIN { exit !(r + 0 >= 1 && c + 0 >= 1 && r == lr && c == lc) }' &&
  grep -q '^zeus_bso_connections_open [0-9]' "$tmp/metrics" &&
  grep -q "^# TYPE zeus_bso_connections_refused_total counter" "$tmp/metrics" &&
  pass "/metrics counts $refused refused connections and $cut cut at the deadline (as the log says: $nlog_refused, $nlog_cut)" ||
  fail "/metrics does not show the refusals and cuts the log names ($nlog_refused, $nlog_cut): $(cat "$tmp/metrics")"

# one request a byte a second (the attacker gone): cut at the 2 s deadline, not refused at once
# (which a leftover attacker at its bound would cause) nor kept alive by each byte
as_user nobody "$group" "$PY" "$FLOOD" trickle "127.0.0.1:$port" >"$tmp/one.out" 2>&1
t=$(awk '{print $3}' "$tmp/one.out")
awk -v t="$t" 'BEGIN { exit !(t != "" && t >= 1.5 && t < 4) }' && pass "a request sent a byte a second is cut after $t s" ||
  fail "a request sent a byte a second was kept: $(cat "$tmp/one.out")"
finish
