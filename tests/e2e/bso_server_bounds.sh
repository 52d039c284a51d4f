#!/usr/bin/env bash
# zeus bso-server: a report's numbers are bounded (issue 36, finding 4). time 1e307 during
# pruning made an infinite cost, energy 1e200 during Thompson sampling an infinite variance
# (precision 0), and every later request of the job was 500. Now: such a report is 422 naming the
# field and the accepted range; a max_power that would make costs overflow is refused at
# registration; and a job whose database already holds such a row (written before this check)
# recovers on its next request: the row counts as a failed trial, with one log line. On SQLite
# and PostgreSQL.
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/bso_server_common.bash"

spec() { # spec ID [JSON OBJECT OF FIELDS TO CHANGE]
  python3 -c 'import json,sys; j={"job_id":sys.argv[1],"job_id_prefix":"b","batch_sizes":[8,16],"default_batch_size":16,"beta_knob":None,"max_epochs":1,"num_pruning_rounds":1,"mab_num_explorations":0,"mab_seed":5,"max_power":300,"number_of_gpus":1,"gpu_model":"sim"}; j.update(json.loads(sys.argv[2])); print(json.dumps(j))' "$1" "${2:-{\}}"
}
report() { # report ID BS TRIAL TIME ENERGY
  echo "{\"job_id\":\"$1\",\"batch_size\":$2,\"trial_number\":$3,\"time\":$4,\"energy\":$5,\"metric\":0.9,\"current_epoch\":1}"
}

run_checks() {
  local db=$1 kind=$2 inf
  case "$db" in sqlite://*) inf=9e999 ;; *) inf="'Infinity'" ;; esac
  bso_start "$db" || { fail "$kind: server start"; return; }
  check "$kind: a job registers" 201 '"b-1"' POST /jobs "$(spec b-1)"
  check "$kind: max_power 1e300 is refused naming the field" 422 '"max_power"' POST /jobs "$(spec b-x '{"max_power":1e300}')"
  check "$kind: first trial" 200 '"trial_number":1' GET "/jobs/batch_size?job_id=b-1"
  check "$kind: time 1e307 is 422 naming time" 422 '["body","time"]' POST /report "$(report b-1 16 1 1e307 100)"
  check "$kind: ... and saying the accepted range" 422 '1e+09' POST /report "$(report b-1 16 1 1e307 100)"
  check "$kind: energy 1e200 is 422 naming energy" 422 '["body","energy"]' POST /report "$(report b-1 16 1 10 1e200)"
  check "$kind: a sound report of the trial still counts" 200 '"converged":true' POST /report "$(report b-1 16 1 10 1000)"
  check "$kind: the job goes on" 200 '"batch_size":8' GET "/jobs/batch_size?job_id=b-1"
  check "$kind: a report at the bounds is taken" 200 '"converged":true' POST /report "$(report b-1 8 2 1e9 1e18)"
  check "$kind: and pruning ends without overflow" 200 '"trial_number":3' GET "/jobs/batch_size?job_id=b-1"

  # A job bricked during pruning by a row written before the bound (time 1e307, least cost inf).
  check "$kind: job b-2" 201 '"b-2"' POST /jobs "$(spec b-2)"
  check "$kind: b-2 trial 1" 200 '"batch_size":16' GET "/jobs/batch_size?job_id=b-2"
  check "$kind: b-2 trial 1 report" 200 '"converged":true' POST /report "$(report b-2 16 1 10 1000)"
  check "$kind: b-2 trial 2" 200 '"batch_size":8' GET "/jobs/batch_size?job_id=b-2"
  check "$kind: b-2 trial 2 report" 200 '"converged":true' POST /report "$(report b-2 8 2 12 1100)"
  sql "$db" "UPDATE bso_trial SET time_s = 1e307 WHERE job_id = 'b-2' AND trial_number = 2"
  sql "$db" "UPDATE bso_job SET min_cost = $inf WHERE job_id = 'b-2'"
  check "$kind: the bricked job answers again: the bad row's batch size is explored again" 200 '"batch_size":8' \
    GET "/jobs/batch_size?job_id=b-2"
  local st; st=$(sql "$db" "SELECT status FROM bso_trial WHERE job_id = 'b-2' AND trial_number = 2")
  [ "$st" = 2 ] && pass "$kind: the bad row counts as a failed trial" || fail "$kind: the bad row's status is '$st'"
  local mc; mc=$(sql "$db" "SELECT min_cost FROM bso_job WHERE job_id = 'b-2'")
  [ "$mc" = 2000.0 ] || [ "$mc" = 2000 ] && pass "$kind: the least cost is recomputed from the sound rows ($mc)" \
    || fail "$kind: least cost '$mc', expected 2000 (trial 1: 0.5 * 1000 J + 0.5 * 300 W * 10 s)"
  local n; n=$(grep -c "b-2.*trial 2.*outside the accepted range" "$tmp/log")
  [ "$n" = 1 ] && pass "$kind: one log line names the job, trial and range" \
    || { fail "$kind: $n log lines about trial 2"; head -c 1000 "$tmp/log"; }
  check "$kind: b-2 goes on" 200 '"converged":true' POST /report "$(report b-2 8 3 12 1100)"
  check "$kind: b-2 reaches Thompson sampling" 200 '"trial_number":4' GET "/jobs/batch_size?job_id=b-2"
  n=$(grep -c "b-2.*outside the accepted range" "$tmp/log")
  [ "$n" = 1 ] && pass "$kind: the repair is logged once" || fail "$kind: $n repair lines"

  # A job bricked during Thompson sampling: an arm refitted over energy 1e200 (variance inf,
  # precision 0) answered 500 to every prediction.
  check "$kind: job b-3" 201 '"b-3"' POST /jobs "$(spec b-3)"
  for t in 1 2; do
    local a; a=$(req GET "/jobs/batch_size?job_id=b-3")
    check "$kind: b-3 trial $t report" 200 '"converged":true' POST /report \
      "$(report b-3 "$(field "$a" batch_size)" $t 10 $((900 + 100 * t)))"
  done
  local a bs; a=$(req GET "/jobs/batch_size?job_id=b-3"); bs=$(field "$a" batch_size)
  [ "$(field "$a" trial_number)" = 3 ] && pass "$kind: b-3 Thompson sampling trial" || fail "$kind: b-3 trial 3: $a"
  sql "$db" "UPDATE bso_trial SET energy_j = 1e200 WHERE job_id = 'b-3' AND batch_size = $bs AND status = 1"
  check "$kind: b-3: the report that refits the arm" 200 '"converged":true' POST /report "$(report b-3 "$bs" 3 10 1000)"
  for t in 4 5 6; do
    check "$kind: b-3 predicts again (trial $t)" 200 "\"trial_number\":$t" GET "/jobs/batch_size?job_id=b-3"
  done
  local prec; prec=$(sql "$db" "SELECT mab FROM bso_job WHERE job_id = 'b-3'")
  python3 -c 'import json,sys,math; m=json.loads(sys.argv[1]); assert all(a[2]=="inf" or (isinstance(a[2],(int,float)) and a[2]>0 and math.isfinite(a[2])) for a in m["arms"]), m' "$prec" \
    && pass "$kind: every arm has a precision > 0" || fail "$kind: arms: $prec"
  # A bandit saved with a mean that is not a number (null) by such a refit: the arm is refitted.
  local nan; nan=$(python3 -c 'import json,sys; m=json.loads(sys.argv[1]); m["arms"][0][1]=None; m["arms"][0][2]=0.0; print(json.dumps(m, separators=(",", ":")))' "$prec")
  sql "$db" "UPDATE bso_job SET mab = '$nan' WHERE job_id = 'b-3'"
  check "$kind: b-3 with a null mean in its bandit predicts again" 200 '"trial_number":7' GET "/jobs/batch_size?job_id=b-3"
  grep -q "b-3.*arm .* impossible belief" "$tmp/log" && pass "$kind: the refitted arm is logged" \
    || { fail "$kind: no line about the impossible belief"; tail -c 800 "$tmp/log"; }
  bso_stop
}

for_each_database run_checks
finish
