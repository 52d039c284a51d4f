#!/usr/bin/env bash
# zeus bso-server: --help; bad settings fail at start-up naming what is wrong; port 0 says which
# port it picked; the SQLite file keeps the job across a restart (a second server on the same
# file continues its trial numbers); SIGTERM exits 0.
set -u
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || { echo "SKIPPED: curl is not installed"; exit 77; }
tmp=$(mktemp -d)
srv=
trap '[ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$tmp"' EXIT

expect_out_has "--help names the routes" "GET" "$ZEUS" bso-server --help
expect_out_has "--help names the databases" "postgresql://" "$ZEUS" bso-server --help
expect_code "a bad port is a usage error" 2 "$ZEUS" bso-server --port 70000
expect_err_has "an unknown database scheme is named" "unknown scheme" "$ZEUS" bso-server --port 0 --database mysql://x/y
expect_err_has "an unreachable PostgreSQL is named" "postgresql" "$ZEUS" bso-server --port 0 \
  --database "postgresql:///nope?host=$tmp/nosuchdir&connect_timeout=2"
expect_err_has "an empty --token is refused" "empty token" "$ZEUS" bso-server --port 0 --token ""

start() {
  # The old server's line must be gone first: the background job truncates the file only when it
  # runs, and the loop below could read the previous port (a restart then answers 000).
  rm -f "$tmp/out"
  "$ZEUS" bso-server --port 0 --log-level warn --database "sqlite://$tmp/bso.db" >"$tmp/out" 2>"$tmp/log" &
  srv=$!
  for _ in $(seq 200); do grep -q "port" "$tmp/out" 2>/dev/null && break; sleep 0.05; done
  port=$(awk '{print $NF}' "$tmp/out")
}
start
[ -n "$port" ] && pass "port 0: the server says which port ($port)" || fail "port 0: no port printed"
job='{"job_id":"e2e-1","job_id_prefix":"e2e","batch_sizes":[8,16],"default_batch_size":16,"max_power":300,"number_of_gpus":1,"gpu_model":"sim"}'
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "127.0.0.1:$port/jobs" -d "$job")
[ "$code" = 201 ] && pass "a job registers (201)" || fail "registering: $code"
t=$(curl -s "127.0.0.1:$port/jobs/batch_size?job_id=e2e-1")
grep -q '"trial_number":1' <<<"$t" && pass "first trial: $t" || fail "first trial: $t"
kill "$srv"; wait "$srv"; rc=$?; srv=
[ "$rc" = 0 ] && pass "SIGTERM: exit 0" || fail "SIGTERM: exit $rc"
start
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "127.0.0.1:$port/jobs" -d "$job")
[ "$code" = 200 ] && pass "after a restart the job is known (200)" || fail "after a restart: $code"
t=$(curl -s "127.0.0.1:$port/jobs/batch_size?job_id=e2e-1")
grep -q '"trial_number":2' <<<"$t" && pass "trial numbers continue: $t" || fail "after a restart: $t"
finish
