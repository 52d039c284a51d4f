#!/usr/bin/env bash
# zeus bso-server --trial-lease (issue 36, finding 6): a trial handed out and then never reported
# nor ended (its client preempted or SIGKILLed) used to stay dispatched for ever, and pruning,
# waiting for that exploration, never moved again (every later client got a "concurrent" trial).
# Now such a trial ends as failed after the lease, counted from its start or its latest report,
# and its batch size is explored again; a trial that keeps reporting keeps its lease; a report of
# an expired trial is refused; --trial-lease 0 keeps the original's behaviour. SQLite and
# PostgreSQL.
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/bso_server_common.bash"

LEASE=2
spec() {
  echo "{\"job_id\":\"$1\",\"job_id_prefix\":\"l\",\"batch_sizes\":[8,16,32],\"default_batch_size\":16,\"beta_knob\":null,\"max_epochs\":5,\"num_pruning_rounds\":1,\"max_power\":300,\"number_of_gpus\":1,\"gpu_model\":\"sim\"}"
}
report() { # report ID BS TRIAL EPOCH METRIC
  echo "{\"job_id\":\"$1\",\"batch_size\":$2,\"trial_number\":$3,\"time\":10,\"energy\":1000,\"metric\":$5,\"current_epoch\":$4}"
}
trial() { echo "{\"job_id\":\"$1\",\"batch_size\":$2,\"trial_number\":$3}"; }

run_checks() {
  local db=$1 kind=$2
  bso_start "$db" --trial-lease $LEASE || { fail "$kind: server start with --trial-lease"; return; }
  check "$kind: job l-1" 201 '"l-1"' POST /jobs "$(spec l-1)"
  check "$kind: trial 1 explores the default" 200 '"batch_size":16,"trial_number":1' GET "/jobs/batch_size?job_id=l-1"
  check "$kind: trial 1 converges" 200 '"converged":true' POST /report "$(report l-1 16 1 1 0.9)"
  check "$kind: trial 2 explores 8 (its client dies without a word)" 200 '"batch_size":8,"trial_number":2' \
    GET "/jobs/batch_size?job_id=l-1"
  check "$kind: while it runs, others get concurrent trials at the cheapest (16)" 200 '"batch_size":16,"trial_number":3' \
    GET "/jobs/batch_size?job_id=l-1"
  check "$kind: trial 3 ends" 200 "null" PATCH /trials "$(trial l-1 16 3)"
  sleep $((LEASE + 1))
  check "$kind: after the lease, 8 is explored again" 200 '"batch_size":8,"trial_number":4' GET "/jobs/batch_size?job_id=l-1"
  local st; st=$(sql "$db" "SELECT status FROM bso_trial WHERE job_id = 'l-1' AND trial_number = 2")
  [ "$st" = 2 ] && pass "$kind: trial 2 counts as failed" || fail "$kind: trial 2's status is '$st'"
  local n; n=$(grep -c "l-1.*trial 2 (batch size 8) had no report.*--trial-lease" "$tmp/log")
  [ "$n" = 1 ] && pass "$kind: one log line names the job, trial and lease" || { fail "$kind: $n lines"; cat "$tmp/log"; }
  check "$kind: a late report of trial 2 is refused" 400 "trial lease" POST /report "$(report l-1 8 2 1 0.9)"
  # Trial 4 keeps reporting: each report renews its lease, though it outlives the lease in all.
  check "$kind: trial 4 epoch 1" 200 '"stop_train":false' POST /report "$(report l-1 8 4 1 0.1)"
  sleep 1.3
  check "$kind: trial 4 epoch 2 (1.3 s later)" 200 '"stop_train":false' POST /report "$(report l-1 8 4 2 0.1)"
  sleep 1.3
  check "$kind: trial 4 epoch 3 (2.6 s after its start): still its own" 200 '"converged":true' POST /report \
    "$(report l-1 8 4 3 0.9)"
  bso_stop

  bso_start "$db" --trial-lease 0 || { fail "$kind: server start with --trial-lease 0"; return; }
  check "$kind: --trial-lease 0: job l-2" 201 '"l-2"' POST /jobs "$(spec l-2)"
  check "$kind: --trial-lease 0: trial 1" 200 '"batch_size":16,"trial_number":1' GET "/jobs/batch_size?job_id=l-2"
  sleep $((LEASE + 1))
  check "$kind: --trial-lease 0: never expires (a concurrent trial)" 200 '"batch_size":16,"trial_number":2' \
    GET "/jobs/batch_size?job_id=l-2"
  st=$(sql "$db" "SELECT status FROM bso_trial WHERE job_id = 'l-2' AND trial_number = 1")
  [ "$st" = 0 ] && pass "$kind: --trial-lease 0: trial 1 still dispatched" || fail "$kind: --trial-lease 0: status '$st'"
  bso_stop
}

expect_out_has "--help documents --trial-lease and its default" "trial-lease S" "$ZEUS" bso-server --help
expect_code "a negative lease is a usage error" 2 "$ZEUS" bso-server --port 0 --trial-lease -5
for_each_database run_checks
finish
