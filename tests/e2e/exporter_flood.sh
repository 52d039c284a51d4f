#!/usr/bin/env bash
# The exporter against slow clients (issue 26, item 5): 70 connections whose headers trickle in
# (a line every 4 s, reconnecting when cut) try to hold all 64 slots; scrapes must still be
# answered meanwhile, and a single trickling request is cut by the request deadline. With the
# defaults (64 connections, 5 s). Bounded: ~10 s. Needs curl and python3.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
zeus_has exporter || { skip_part "zeus exporter"; finish; exit; }
command -v curl >/dev/null || { echo "SKIPPED: curl is not installed"; exit 77; }
command -v python3 >/dev/null || { echo "SKIPPED: python3 is not installed"; exit 77; }
FLOOD=$(cd "$(dirname "$0")/../helpers" && pwd)/flood.py
tmp=$(mktemp -d)
srv= att=
trap '[ -n "$att" ] && kill "$att" 2>/dev/null; [ -n "$srv" ] && kill "$srv" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
export ZEUS_RAPL_ROOT=/nonexistent-rapl-root
ZEUS_GPU_BACKEND=sim ZEUS_SIM_GPUS=2 "$ZEUS" exporter --port 0 >"$tmp/out" 2>"$tmp/err" &
srv=$!
for _ in $(seq 100); do grep -q "port" "$tmp/out" 2>/dev/null && break; sleep 0.1; done
port=$(awk '{print $NF}' "$tmp/out")
[ -n "$port" ] || { fail "no port printed: $(cat "$tmp/err")"; finish; exit; }

python3 "$FLOOD" trickles "127.0.0.1:$port" 70 >"$tmp/att" 2>&1 &
att=$!
for _ in $(seq 100); do [ -s "$tmp/att" ] && break; sleep 0.05; done
sleep 0.5
ok=0 bad=0
for i in $(seq 8); do
  c=$(curl -s -m 3 -o /dev/null -w '%{http_code}' "127.0.0.1:$port/metrics")
  if [ "$c" = 200 ]; then ok=$((ok + 1)); else bad=$((bad + 1)); echo "    scrape $i: $c"; fi
  sleep 0.8
done
if [ "$bad" = 0 ]; then pass "70 trickling connections: $ok of 8 scrapes over ~7 s answered 200"; else
  fail "70 trickling connections: $bad of 8 scrapes failed ($(cat "$tmp/att"))"; fi
kill "$att" 2>/dev/null; wait "$att" 2>/dev/null; att=

python3 "$FLOOD" trickle "127.0.0.1:$port" >"$tmp/one" 2>&1
t=$(awk '{print $3}' "$tmp/one")
if awk -v t="$t" 'BEGIN { exit !(t >= 4 && t < 8) }'; then pass "a request trickling a byte a second is cut after $t s (deadline 5 s)"; else
  fail "a trickling request: $(cat "$tmp/one")"; fi
finish
