#!/usr/bin/env bash
# zeus bso-server on a PostgreSQL that stops answering (issue 36, finding 5): every process of a
# throwaway PostgreSQL is SIGSTOPped (what a network partition looks like from here). Requests
# used to wait without bound; now each gets 503 within --db-timeout (2 s here; connecting again
# waits libpq's least connect_timeout, 2 s), and the server serves again once PostgreSQL runs.
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/bso_server_common.bash"

bso_databases >"$tmp/skip"
db=$(grep '^postgresql://' "$tmp/dbs")
[ -n "$db" ] || { cat "$tmp/skip"; echo "SKIPPED: no throwaway PostgreSQL"; exit 77; }
pgdir=$(cat "$tmp/pg/pgdir")
pm=$(head -n 1 "$pgdir/data/postmaster.pid")
stopped=
pg_signal() { # pg_signal STOP|CONT: the postmaster and all its children
  kill -"$1" "$pm"
  for p in $(pgrep -P "$pm"); do kill -"$1" "$p" 2>/dev/null; done
}
trap '[ -n "$stopped" ] && pg_signal CONT; bso_stop; "$PG_TEMP" stop "$tmp/pg"; rm -rf "$tmp"' EXIT

bso_start "$db" --db-timeout 2 --threads 2 || { fail "server start with --db-timeout"; finish; exit; }
spec='{"job_id":"t-1","job_id_prefix":"t","batch_sizes":[8,16],"default_batch_size":16,"max_power":300,"number_of_gpus":1,"gpu_model":"sim"}'
check "a job registers" 201 '"t-1"' POST /jobs "$spec"
check "a trial" 200 '"trial_number":1' GET "/jobs/batch_size?job_id=t-1"

pg_signal STOP; stopped=1
# timed REQ_NAME BOUND_S METHOD PATH: 503 within the bound
timed() {
  local name=$1 bound=$2; shift 2
  local t0 t1 got
  t0=$(date +%s.%N)
  got=$(REQ_TIMEOUT=30 req "$@")
  t1=$(date +%s.%N)
  local took; took=$(python3 -c "print(round($t1 - $t0, 2))")
  if [ "${got%% *}" = 503 ] && python3 -c "import sys; sys.exit(0 if $took <= $bound else 1)"; then
    pass "$name: 503 in $took s (bound $bound s)"
  else
    fail "$name: '$(head -c 300 <<<"$got")' after $took s (expected 503 within $bound s)"
  fi
}
timed "PostgreSQL stopped: a prediction" 4 GET "/jobs/batch_size?job_id=t-1"
timed "... again (connecting anew)" 4 GET "/jobs/batch_size?job_id=t-1"
timed "... a registration" 4 POST /jobs "$spec"
t0=$(date +%s.%N)
pids=()
for i in $(seq 16); do
  curl -s -m 30 -o /dev/null -w '%{http_code}\n' "$BSO/jobs/batch_size?job_id=t-1" >"$tmp/par.$i" &
  pids+=($!)
done
wait "${pids[@]}"
took=$(python3 -c "print(round($(date +%s.%N) - $t0, 2))")
codes=$(cat "$tmp"/par.* | sort | uniq -c | tr -s ' ' | tr '\n' ';')
if [ "$(cat "$tmp"/par.* | grep -c '^503$')" = 16 ] && python3 -c "import sys; sys.exit(0 if $took <= 6 else 1)"; then
  pass "16 requests at once: all 503 in $took s (bound 6 s)"
else fail "16 requests at once: $codes in $took s (expected 16 x 503 within 6 s)"; fi
grep -q "no answer within 2 s (--db-timeout)" "$tmp/log" && pass "the log says the database did not answer in time" \
  || { fail "no log line names the timeout"; head -c 1500 "$tmp/log"; }
pg_signal CONT; stopped=
st=
for _ in $(seq 100); do
  got=$(req GET "/jobs/batch_size?job_id=t-1"); st=${got%% *}
  [ "$st" = 200 ] && break
  sleep 0.1
done
[ "$st" = 200 ] && pass "PostgreSQL running again: served again ($got)" || fail "after SIGCONT: $got"
bso_stop
expect_out_has "--help documents --db-timeout" "db-timeout S" "$ZEUS" bso-server --help
finish
