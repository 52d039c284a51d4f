#!/usr/bin/env bash
# End-to-end: `zeus run` with the demo trainee on the simulated GPU (continuation across runs,
# crashing and garbage-writing trainees, interruption) and `zeus simulate` on the NSDI'23 traces.
set -u
. "$(dirname "$0")/lib.sh"

export ZEUS_GPU_BACKEND=sim ZEUS_SIM_GPUS=1 ZEUS_RAPL_ROOT=/nonexistent-rapl-root
TRAINEE="$ZEUS_BUILD_DIR/trainee_sim"
[ -x "$TRAINEE" ] || { echo "SKIPPED: $TRAINEE is not built"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for sub in run simulate; do
  expect_ok "$sub --help" "$ZEUS" $sub --help
  expect_out_has "$sub --help has an example" "Example" "$ZEUS" $sub --help
  expect_out_has "$sub --help names the environment" "ZEUS_" "$ZEUS" $sub --help
done
expect_out_has "zeus --help lists run" "run +run a recurring training job" "$ZEUS" --help
expect_out_has "zeus --help lists simulate" "simulate +replay" "$ZEUS" --help

JOB=(--batch-sizes 32,64,128,256,512,1024,2048 --default-bs 256 --target-metric 0.6 --max-epochs 40
     --lr 0.1 --optimizer adam --profile-warmup-iters 1 --profile-measure-iters 4 --log-base "$tmp/logs")
CMD=(-- "$TRAINEE" --bs {bs} --lr {lr} --seed {seed} --epochs {epochs} --samples 20000)

# usage errors
expect_code "run without a command" 2 "$ZEUS" run "${JOB[@]}"
expect_err_has "run without a command says so" "no training command" "$ZEUS" run "${JOB[@]}"
expect_code "run with an unknown option" 2 "$ZEUS" run --frobnicate 1 "${CMD[@]}"
expect_err_has "bad batch sizes" "--batch-sizes: expected comma-separated positive integers" \
  "$ZEUS" run --batch-sizes 32,x --default-bs 32 --target-metric 1 --max-epochs 1 -- true
expect_err_has "default not among the batch sizes" "default batch size 100 is not among" \
  "$ZEUS" run --batch-sizes 32,64 --default-bs 100 --target-metric 1 --max-epochs 1 -- true
expect_err_has "unknown placeholder" "unknown placeholder {batch}" \
  "$ZEUS" run --batch-sizes 32 --default-bs 32 --target-metric 1 --max-epochs 1 --max-power-w 300 \
  --log-base "$tmp/u" -- echo {batch}
expect_err_has "bad spec file" "unknown field 'batchsizes'" \
  sh -c "echo '{\"batchsizes\": [1]}' > '$tmp/bad.json'; '$ZEUS' run --spec '$tmp/bad.json'"

# issue 37: --plo-confidence P reaches the trainee as ZEUS_PLO_CONFIDENCE (a GlobalPowerLimitOptimizer
# in it reads it); out of range is a usage error
"$ZEUS" run --plo-confidence 0.9 --batch-sizes 32 --default-bs 32 --target-metric 1 --max-epochs 1 \
  --max-power-w 300 --max-tries 1 --log-base "$tmp/pc" --state "$tmp/pc.sqlite" \
  -- sh -c "echo \"\$ZEUS_PLO_CONFIDENCE\" > '$tmp/pc.seen'; exit 1" >/dev/null 2>&1
if [ "$(cat "$tmp/pc.seen" 2>/dev/null)" = "0.9" ]; then pass "run --plo-confidence exports ZEUS_PLO_CONFIDENCE"
else fail "run --plo-confidence exports ZEUS_PLO_CONFIDENCE (saw '$(cat "$tmp/pc.seen" 2>/dev/null)')"; fi
expect_code "run --plo-confidence 1.5 is a usage error" 2 "$ZEUS" run --plo-confidence 1.5 "${JOB[@]}" "${CMD[@]}"

# one stream, one owner (README, "Output"): the trainee keeps stdout and the report goes to stderr;
# with -o FILE --json the JSON is in FILE and stdout is still only the trainee's
"$ZEUS" run "${JOB[@]}" --state "$tmp/s.sqlite" --recurrences 1 "${CMD[@]}" >"$tmp/s.out" 2>"$tmp/s.err" \
  || { fail "run (streams)"; tail -3 "$tmp/s.err"; }
if grep -q "^epoch 1: accuracy" "$tmp/s.out" && ! grep -q "zeus run" "$tmp/s.out" && grep -q "^\[zeus run\] recurrence 1" "$tmp/s.err"
then pass "run: the trainee keeps stdout, the report goes to stderr"
else fail "run: the trainee keeps stdout, the report goes to stderr"; head -3 "$tmp/s.out"; fi
"$ZEUS" run "${JOB[@]}" --state "$tmp/s.sqlite" --recurrences 1 --json -o "$tmp/s.json" "${CMD[@]}" >"$tmp/s2.out" 2>"$tmp/s2.err" \
  || { fail "run -o FILE --json"; tail -3 "$tmp/s2.err"; }
if grep -q "^epoch 1: accuracy" "$tmp/s2.out" && ! grep -q '"recurrences_done"' "$tmp/s2.out" \
   && python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["recurrences_done"] == 2' "$tmp/s.json"
then pass "run -o FILE --json: the JSON in FILE, stdout the trainee's"
else fail "run -o FILE --json: the JSON in FILE, stdout the trainee's"; head -3 "$tmp/s2.out"; fi

# two runs of 3 and 4 recurrences == one run of 7 (history and optimizer state; test_run.c compares
# the SQLite tables themselves)
"$ZEUS" run "${JOB[@]}" --state "$tmp/a.sqlite" --recurrences 3 --quiet "${CMD[@]}" >/dev/null 2>"$tmp/a1.err" \
  || { fail "first run of 3"; cat "$tmp/a1.err"; }
"$ZEUS" run "${JOB[@]}" --state "$tmp/a.sqlite" --recurrences 4 --json "${CMD[@]}" >"$tmp/a.json" 2>"$tmp/a2.err" \
  || { fail "second run of 4"; cat "$tmp/a2.err"; }
"$ZEUS" run "${JOB[@]}" --state "$tmp/b.sqlite" --recurrences 7 --json "${CMD[@]}" >"$tmp/b.json" 2>"$tmp/b.err" \
  || { fail "one run of 7"; cat "$tmp/b.err"; }
if python3 - "$tmp/a.json" "$tmp/b.json" <<'EOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["recurrences_done"] == b["recurrences_done"] == 7, (a["recurrences_done"], b["recurrences_done"])
assert a["history"] == b["history"], "histories differ"
assert a["optimizer"] == b["optimizer"], "optimizer states differ"
assert a["min_cost_j"] == b["min_cost_j"]
assert sum(e["reached"] for e in a["history"]) == 7
for e in a["history"]:
    assert set(e) >= {"recurrence", "try", "batch_size", "learning_rate", "seed", "energy_j", "time_s", "cost_j",
                      "reached", "status"}, e
EOF
then pass "two runs equal one run (history and state)"; else fail "two runs equal one run (history and state)"; fi
grep -Fq "(3 recurrences done)" "$tmp/a2.err" && pass "second run reports where it continues" \
  || fail "second run reports where it continues"
expect_out_has "--recurrences 0 --json prints the state" '"recurrences_done": 7' \
  "$ZEUS" run "${JOB[@]}" --state "$tmp/a.sqlite" --recurrences 0 --json "${CMD[@]}"
expect_err_has "other knobs are refused" "was made for eta = 0.5, this run has 0.3" \
  "$ZEUS" run "${JOB[@]}" --eta 0.3 --state "$tmp/a.sqlite" --recurrences 1 "${CMD[@]}"

# a crashing trainee: reported with its exit code and result file; what finished is kept
cat >"$tmp/crash.sh" <<EOF
#!/bin/sh
[ -e "$tmp/crash-now" ] && { echo "crash.sh: segfault (simulated)" >&2; exit 139; }
exec "$TRAINEE" "\$@"
EOF
chmod +x "$tmp/crash.sh"
CRASH=(-- "$tmp/crash.sh" --bs {bs} --lr {lr} --seed {seed} --epochs {epochs} --samples 20000)
"$ZEUS" run "${JOB[@]}" --state "$tmp/c.sqlite" --recurrences 2 --quiet "${CRASH[@]}" >/dev/null 2>&1
touch "$tmp/crash-now"
expect_code "crashing trainee stops the run" 1 "$ZEUS" run "${JOB[@]}" --state "$tmp/c.sqlite" --recurrences 2 "${CRASH[@]}"
expect_err_has "crash names the result file" "rec03+try01+bs" \
  "$ZEUS" run "${JOB[@]}" --state "$tmp/c.sqlite" --recurrences 2 "${CRASH[@]}"
expect_err_has "crash names the exit status" "exited with code 139 without writing its result file" \
  "$ZEUS" run "${JOB[@]}" --state "$tmp/c.sqlite" --recurrences 2 "${CRASH[@]}"
expect_out_has "crashing trainee's output is echoed" "segfault \(simulated\)" \
  "$ZEUS" run "${JOB[@]}" --state "$tmp/c.sqlite" --recurrences 1 "${CRASH[@]}"
rm -f "$tmp/crash-now"
expect_ok "after the crash the next run continues" "$ZEUS" run "${JOB[@]}" --state "$tmp/c.sqlite" --recurrences 2 --quiet "${CRASH[@]}"
expect_out_has "four recurrences in all" '"recurrences_done": 4' \
  "$ZEUS" run "${JOB[@]}" --state "$tmp/c.sqlite" --recurrences 0 --json "${CRASH[@]}"

# a damaged (empty) state is refused, not started over; --reset-state starts over and keeps it
: > "$tmp/empty.sqlite"
expect_code "an empty state is refused" 1 "$ZEUS" run "${JOB[@]}" --state "$tmp/empty.sqlite" --recurrences 1 --quiet "${CMD[@]}"
expect_err_has "an empty state is named as damaged" "is damaged: it is empty (0 bytes)" \
  "$ZEUS" run "${JOB[@]}" --state "$tmp/empty.sqlite" --recurrences 1 --quiet "${CMD[@]}"
expect_ok "--reset-state starts over" "$ZEUS" run "${JOB[@]}" --state "$tmp/empty.sqlite" --reset-state --recurrences 1 \
  --quiet "${CMD[@]}"
if ls "$tmp" | grep -q '^empty.sqlite.reset-[0-9]*$'; then pass "--reset-state keeps the old state"
else fail "--reset-state keeps the old state"; ls "$tmp" | sed 's/^/    /'; fi
expect_out_has "run --help documents --reset-state" "--reset-state" "$ZEUS" run --help

# garbage results: stop by default, recorded and skipped with --keep-going
cat >"$tmp/garbage.sh" <<'EOF'
#!/bin/sh
echo "garbage.sh: writing nonsense"
echo '{"energy": "lots"}' > "$ZEUS_LOG_DIR/$ZEUS_JOB_ID+bs$1.train.json"
EOF
chmod +x "$tmp/garbage.sh"
G=(--batch-sizes 8,16 --default-bs 16 --target-metric 1 --max-epochs 1 --max-power-w 300 --log-base "$tmp/g")
expect_code "garbage result stops the run" 1 "$ZEUS" run "${G[@]}" --state "$tmp/g1.sqlite" -- "$tmp/garbage.sh" {bs}
expect_err_has "garbage names the file and what was expected" 'rec01+try01+bs16.train.json: expected {"energy"' \
  "$ZEUS" run "${G[@]}" --state "$tmp/g1.sqlite" -- "$tmp/garbage.sh" {bs}
expect_code "keep-going records the tries and gives up after --max-tries" 1 \
  "$ZEUS" run "${G[@]}" --state "$tmp/g2.sqlite" --keep-going --max-tries 2 -- "$tmp/garbage.sh" {bs}
n_failed=$("$ZEUS" run "${G[@]}" --state "$tmp/g2.sqlite" --recurrences 0 --json -- "$tmp/garbage.sh" {bs} 2>/dev/null |
  python3 -c 'import json, sys; print(sum(e["status"] == "failed" for e in json.load(sys.stdin)["history"]))')
[ "$n_failed" = 2 ] && pass "keep-going recorded 2 failed tries" || fail "keep-going recorded 2 failed tries (got $n_failed)"

# interruption: SIGINT (and SIGHUP, a dropped SSH session) stops the trainee, records nothing,
# exits 130; kill -9 of zeus run takes the trainee with it (issue 19: it was left running)
for sig in INT HUP KILL; do
  rm -f "$tmp/trainee.pid"
  "$ZEUS" run "${G[@]}" --state "$tmp/i-$sig.sqlite" -- sh -c "echo \$\$ > '$tmp/trainee.pid'; exec sleep 30" \
    >"$tmp/i.out" 2>&1 &
  pid=$!
  for _ in $(seq 100); do [ -s "$tmp/trainee.pid" ] && break; sleep 0.1; done
  sleep 0.2
  kill -$sig $pid
  t0=$(date +%s)
  wait $pid
  code=$?
  t1=$(date +%s)
  want=130; [ $sig = KILL ] && want=137
  [ $code -eq $want ] && pass "SIG$sig exits $want" || { fail "SIG$sig exits $want (got $code)"; cat "$tmp/i.out"; }
  [ $((t1 - t0)) -lt 8 ] && pass "SIG$sig stops the trainee promptly" || fail "SIG$sig stops the trainee promptly"
  if [ $sig != KILL ]; then
    grep -q "interrupted" "$tmp/i.out" && pass "SIG$sig is reported" || fail "SIG$sig is reported"
  fi
  tpid=$(cat "$tmp/trainee.pid" 2>/dev/null)
  # a zombie counts as gone (its parent, init, may be slow to reap it)
  for _ in $(seq 50); do
    st=$(awk '{print $3}' "/proc/$tpid/stat" 2>/dev/null)
    { [ -z "$st" ] || [ "$st" = Z ]; } && break
    sleep 0.1
  done
  if [ -n "$tpid" ] && [ -n "$st" ] && [ "$st" != Z ]; then fail "SIG$sig: the trainee was left running"; kill "$tpid"
  else pass "SIG$sig: no trainee left running"; fi
done

# zeus simulate
expect_code "simulate without --gpu" 2 "$ZEUS" simulate --trace-dir "$tmp" --all
expect_err_has "simulate names a missing trace file" "summary_train.csv" "$ZEUS" simulate --trace-dir "$tmp" --gpu v100 --all
DATA=${ZEUS_DATA_DIR:-$ZEUS_DATA_DIR_DEFAULT}
if [ -d "$DATA/nsdi23-trace" ]; then
  T="$DATA/nsdi23-trace"
  out=$("$ZEUS" simulate --trace-dir "$T" --gpu v100 --all) || fail "simulate --all"
  [ "$(echo "$out" | tail -n +2 | wc -l)" -eq 6 ] && pass "simulate --all prints six rows" || fail "simulate --all prints six rows"
  W=(--trace-dir "$T" --gpu v100 --dataset cifar100 --network shufflenetv2 --optimizer adadelta --target-metric 0.6
     --max-epochs 100 --default-bs 1024)
  "$ZEUS" simulate "${W[@]}" --json >"$tmp/s1.json" && "$ZEUS" simulate "${W[@]}" --json >"$tmp/s2.json" \
    && "$ZEUS" simulate "${W[@]}" --json --seed 2 >"$tmp/s3.json" || fail "simulate --json"
  cmp -s "$tmp/s1.json" "$tmp/s2.json" && pass "simulate is identical for a seed" || fail "simulate is identical for a seed"
  cmp -s "$tmp/s1.json" "$tmp/s3.json" && fail "another seed changes the run" || pass "another seed changes the run"
  if python3 - "$tmp/s1.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
s = r["summary"]
for k in ("total", "baseline_per_recurrence", "oracle_per_recurrence", "energy_saved_pct", "time_saved_pct"):
    assert k in s, k
assert set(s["total"]) == {"energy_j", "time_s", "cost_j"}
assert set(s["oracle_per_recurrence"]) == {"batch_size", "power_limit_w", "energy_j", "time_s", "cost_j"}
assert s["baseline_per_recurrence"]["batch_size"] == r["workload"]["default_batch_size"] == 1024
# the total covers every recurrence; the baseline is one recurrence's
assert s["total"]["energy_j"] > 10 * s["baseline_per_recurrence"]["energy_j"]
# derived figures carry six significant digits (docs/output.md), so agree to that
want = 100 * (1 - s["total"]["energy_j"] / (s["recurrences"] * s["baseline_per_recurrence"]["energy_j"]))
assert abs(s["energy_saved_pct"] - want) <= 1e-5 * abs(want) + 1e-9, (s["energy_saved_pct"], want)
assert s["energy_saved_pct"] > 0
assert len(r["history"]) >= s["recurrences"]
assert set(r["history"][0]) >= {"batch_size", "power_limit_w", "energy_j", "time_s", "reached"}
EOF
  then pass "simulate --json has the documented shape"; else fail "simulate --json has the documented shape"; fi
  expect_out_has "simulate prints the summary" "energy saved: " "$ZEUS" simulate "${W[@]}"
  expect_err_has "simulate names an unknown workload" "no batch size is in both" \
    "$ZEUS" simulate --trace-dir "$T" --gpu v100 --dataset mnist --network lenet --optimizer sgd --target-metric 0.9 \
    --max-epochs 10 --default-bs 64
else
  echo "SKIPPED (part): the measured data folder is absent; simulate on the traces not run"
fi
finish
