#!/usr/bin/env bash
# zeus bso-server: a request target (path or query) that is not UTF-8 or holds a NUL byte once
# decoded is refused with 400 naming the parameter, on SQLite and PostgreSQL (issue 36, finding 7:
# `DELETE /jobs?job_id=j1%00x` deleted j1; `job_id=%ff` was a 500 and an ERROR line per request on
# PostgreSQL, a bare null on SQLite). The refusals are logged at most once per client a minute.
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/bso_server_common.bash"

spec() {
  echo "{\"job_id\":\"$1\",\"job_id_prefix\":\"q\",\"batch_sizes\":[8,16],\"default_batch_size\":16,\"max_power\":300,\"number_of_gpus\":1,\"gpu_model\":\"sim\"}"
}

run_checks() {
  local db=$1 kind=$2
  bso_start "$db" || { fail "$kind: server start"; return; }
  check "$kind: job q-1" 201 '"q-1"' POST /jobs "$(spec q-1)"
  check "$kind: DELETE job_id=q-1%00x is 400 naming job_id" 400 "'job_id' holds a NUL byte" DELETE "/jobs?job_id=q-1%00x"
  check "$kind: ... and q-1 is still there" 200 '"trial_number":1' GET "/jobs/batch_size?job_id=q-1"
  check "$kind: GET job_id=%ff is 400 'not UTF-8'" 400 "'job_id' is not UTF-8" GET "/jobs/batch_size?job_id=%ff"
  check "$kind: an overlong form is not UTF-8" 400 "not UTF-8" GET "/jobs/batch_size?job_id=%c0%af"
  check "$kind: a surrogate is not UTF-8" 400 "not UTF-8" GET "/jobs/batch_size?job_id=%ed%a0%80"
  check "$kind: a cut sequence is not UTF-8" 400 "not UTF-8" DELETE "/jobs?job_id=q-1%e2%82"
  check "$kind: a parameter name with NUL" 400 "name holds a NUL byte" GET "/jobs/batch_size?job%00_id=q-1"
  check "$kind: a path with NUL (/jobs%00x)" 400 "path holds a NUL byte" POST "/jobs%00x" "$(spec q-2)"
  check "$kind: raw bytes that are not UTF-8" 400 "not UTF-8" GET "/jobs/batch_size?job_id=$(printf '\xfe')"
  check "$kind: a UTF-8 job id works (register)" 201 '"job_id":"q-é"' POST /jobs "$(spec 'q-é')"
  check "$kind: a UTF-8 job id works (query)" 200 '"trial_number":1' GET "/jobs/batch_size?job_id=q-%C3%A9"
  check "$kind: DELETE q-1" 200 "null" DELETE "/jobs?job_id=q-1"
  for _ in $(seq 20); do req GET "/jobs/batch_size?job_id=%ff" >/dev/null; done
  local n; n=$(grep -c "refused a .* request from 127.0.0.1" "$tmp/log")
  [ "$n" = 1 ] && pass "$kind: 29 refusals from one client, one log line" \
    || { fail "$kind: $n log lines for one client's refusals"; head -c 1500 "$tmp/log"; }
  if curl -s -m 10 --interface 127.0.0.2 -o /dev/null "$BSO/jobs/batch_size?job_id=%ff" 2>/dev/null; then
    n=$(grep -c "refused a .* request from 127.0.0.2" "$tmp/log")
    [ "$n" = 1 ] && pass "$kind: another client (127.0.0.2) gets its own line" || fail "$kind: 127.0.0.2: $n lines"
  else
    echo "skip - $kind: cannot connect from 127.0.0.2"
  fi
  if grep -q "ERROR" "$tmp/log"; then fail "$kind: an ERROR was logged"; grep ERROR "$tmp/log" | head -3; else pass "$kind: no ERROR logged"; fi
  bso_stop
}

for_each_database run_checks
finish
