#!/usr/bin/env bash
# zeus pfo-server: --help lists the settings; bad settings fail at start-up; SIGTERM with a
# waiting schedule request answers it with 503, exits 0, and the dumps are in place.
set -euo pipefail
ZEUS=${ZEUS:?path of the zeus binary}
command -v curl >/dev/null || { echo "SKIPPED: curl is not installed"; exit 77; }
tmp=$(mktemp -d)
srv=
trap '[ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$tmp"' EXIT

# (not piped into grep -q: its early exit can SIGPIPE zeus mid-help, which pipefail fails)
"$ZEUS" pfo-server --help >"$tmp/help"
grep -q ZEUS_PFO_MAX_JOB_IDLE_TIME "$tmp/help"
if ZEUS_PFO_SCHEDULER=Nope "$ZEUS" pfo-server --port 0 2>"$tmp/err"; then echo "bad scheduler accepted"; exit 1; fi
grep -q "unknown scheduler 'Nope'" "$tmp/err"
if PERSEUS_SCHEDULER_ARGS='{"bogus":1}' "$ZEUS" pfo-server --scheduler AllMaxFrequency --port 0 2>"$tmp/err"; then
  echo "bad scheduler args accepted"; exit 1
fi
grep -q "no argument 'bogus'" "$tmp/err"

ZEUS_PFO_SCHEDULER=AllMaxFrequency ZEUS_PFO_SCHEDULER_ARGS='{"num_microbatches": 2}' \
  "$ZEUS" pfo-server --port 0 --dump-data --dump-dir "$tmp/dump" --log-level warn >"$tmp/out" 2>"$tmp/log" &
srv=$!
for _ in $(seq 50); do grep -q "port" "$tmp/out" 2>/dev/null && break; sleep 0.1; done
port=$(awk '{print $NF}' "$tmp/out")
id=$(curl -sf -X POST "127.0.0.1:$port/register_job" \
  -d '{"job_id":"","pp_degree":2,"dp_degree":1,"tp_degree":1,"world_size":2}' | tr -d '"')
for r in 0 1; do
  curl -sf -X POST "127.0.0.1:$port/register_rank/$id" \
    -d "{\"rank\":$r,\"dp_rank\":0,\"pp_rank\":$r,\"tp_rank\":0,\"available_frequencies\":[1410,1000]}" >/dev/null
done
curl -s -o "$tmp/waiter" -w '%{http_code}' "127.0.0.1:$port/schedule/$id?rank=0" >"$tmp/code" &
waiter=$!
sleep 0.3
kill -TERM "$srv"
for _ in $(seq 50); do kill -0 "$srv" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$srv" 2>/dev/null; then echo "server still running 5 s after SIGTERM"; exit 1; fi
wait "$srv"; rc=$?; srv=
[ "$rc" -eq 0 ] || { echo "server exited with $rc"; exit 1; }
wait "$waiter" || true
code=$(cat "$tmp/code")
[ "$code" = 503 ] || [ "$code" = 000 ] || { echo "waiting request got $code"; exit 1; }
test -s "$tmp/dump/$id/ranks.json"
test -s "$tmp/dump/$id/0.sched.json"
echo "ok"
