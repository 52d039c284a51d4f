#!/usr/bin/env bash
# zeus pfo-server against slow headers (issue 36, finding 2), played by a hostile second local user
# (nobody): 1,200 connections (of 512 allowed) whose headers trickle in (a line every 4 s,
# reconnecting when cut) and one request sent a byte a second. Before the guard (src/http/guard.c)
# they held every slot, the registration reserve included (it is checked only once a request's
# headers are in; each byte reset the idle timeout), and no job could register. Now nobody's
# connections without a whole request after --slow-after are cut past --max-slow-per-client (and
# its new ones refused meanwhile), a request that is not whole within --request-timeout is cut,
# and root and a second user (uid 1) register a job, its rank and get its schedule throughout.
# --request-timeout is given as ZEUS_PFO_REQUEST_TIMEOUT, which an older server ignores, so that
# the same script shows the older server falling. Needs root (to run the attacker as nobody with
# setpriv) and python3. Bounded: ~20 s (~40 s against a server that falls).
set -u
. "$(dirname "$0")/lib.sh"
need_nobody_python
tmp=$(mktemp -d)
chmod 755 "$tmp"
srv= att=
trap '[ -n "$att" ] && kill "$att" 2>/dev/null; [ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$tmp"' EXIT

ZEUS_PFO_REQUEST_TIMEOUT=3 "$ZEUS" pfo-server --port 0 --log-level debug --scheduler AllMaxFrequency \
  --scheduler-args '{"num_microbatches": 2}' --dump-dir "$tmp/dump" --max-connections 512 >"$tmp/out" 2>"$tmp/log" &
srv=$!
for _ in $(seq 100); do grep -q "port" "$tmp/out" 2>/dev/null && break; sleep 0.05; done
port=$(awk '{print $NF}' "$tmp/out")
[ -n "$port" ] || { fail "no port printed: $(cat "$tmp/log")"; finish; }

setpriv --reuid=nobody --regid="$group" --clear-groups --inh-caps=-all -- "$PY" "$FLOOD" trickles "127.0.0.1:$port" 1200 >"$tmp/att.out" 2>&1 &
att=$!
for _ in $(seq 100); do [ -s "$tmp/att.out" ] && break; sleep 0.1; done
sleep 1

# One normal client's round as user U (uid:gid): register a job of one rank, register the rank,
# get its schedule. Prints what failed, nothing when all went through.
job='{"job_id": "", "pp_degree": 1, "dp_degree": 1, "tp_degree": 1, "world_size": 1}'
rank='{"rank": 0, "dp_rank": 0, "pp_rank": 0, "tp_rank": 0, "available_frequencies": [1410, 1000]}'
normal() {
  local u=$1 g=$2 id code
  id=$(as_user "$u" "$g" curl -s -m 2 -w ' %{http_code}' -X POST -d "$job" "127.0.0.1:$port/register_job")
  code=${id##* } id=${id% *}
  [ "$code" = 200 ] || { echo "register_job: $code $id"; return; }
  id=${id//\"/}
  code=$(as_user "$u" "$g" curl -s -m 2 -o /dev/null -w '%{http_code}' -X POST -d "$rank" \
    "127.0.0.1:$port/register_rank/$id")
  [ "$code" = 200 ] || { echo "register_rank: $code"; return; }
  code=$(as_user "$u" "$g" curl -s -m 2 -o /dev/null -w '%{http_code}' "127.0.0.1:$port/schedule/$id?rank=0")
  [ "$code" = 200 ] || echo "schedule: $code"
}
served=0 tries=0 why=
for i in $(seq 8); do # root and uid 1 in turn, over ~8 s of the attack
  tries=$((tries + 1))
  if [ $((i % 2)) = 0 ]; then r=$(normal 0 0); else r=$(normal 1 1); fi
  [ -z "$r" ] && served=$((served + 1)) || why="$why; try $i: $r"
  sleep 0.5
done
[ "$served" = "$tries" ] &&
  pass "1,200 trickling connections of nobody (--max-connections 512): root and uid 1 registered and were scheduled $served of $tries times" ||
  fail "under slow headers only $served of $tries normal rounds went through$why"
grep -q "uid 65534 holds [0-9]* connections without a whole request after 1 s, the most one client may hold (--max-slow-per-client)" "$tmp/log" &&
  pass "nobody's slow connections beyond its 64 are cut or refused, naming the bound" ||
  fail "no refusal naming nobody's bound of slow connections in the log: $(grep -m3 -i 'refused\|cut' "$tmp/log")"
grep -q "no whole request within 3 s (--request-timeout)" "$tmp/log" &&
  pass "trickling connections are cut at the request deadline" ||
  fail "no connection was cut at the deadline: $(tail -3 "$tmp/log")"
m=$(curl -s -m 3 "127.0.0.1:$port/metrics")
grep -Eq '^zeus_pfo_connections_refused_total [1-9]' <<<"$m" && grep -Eq '^zeus_pfo_connections_timed_out_total [1-9]' <<<"$m" &&
  pass "/metrics counts the refused and timed-out connections" ||
  fail "/metrics lacks the refused and timed-out connections: $(grep connections_ <<<"$m")"
kill "$att" 2>/dev/null; wait "$att" 2>/dev/null; att=

# one request a byte a second: cut at the deadline, not kept alive by each byte
timeout 12 setpriv --reuid=nobody --regid="$group" --clear-groups --inh-caps=-all -- "$PY" "$FLOOD" trickle "127.0.0.1:$port" >"$tmp/one.out" 2>&1
t=$(awk '{print $3}' "$tmp/one.out")
awk -v t="$t" 'BEGIN { exit !(t != "" && t >= 2.5 && t < 5) }' && pass "a request sent a byte a second is cut after $t s" ||
  fail "a request sent a byte a second was kept: $(cat "$tmp/one.out")"
finish
