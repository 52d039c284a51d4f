#!/usr/bin/env bash
# zeus run --state postgresql://...: two "nodes" (two log bases, one throwaway PostgreSQL from
# scripts/pg-temp.sh) continue one recurring job; a driver of the same job while another holds it
# (the advisory lock, held here by psql) is refused; --reset-state keeps the old row.
set -u
. "$(dirname "$0")/lib.sh"
: "${ZEUS_BUILD_DIR:?}"
export ZEUS_GPU_BACKEND=sim ZEUS_SIM_GPUS=1 ZEUS_RAPL_ROOT=/nonexistent-rapl-root
PG_TEMP="$(dirname "$0")/../../scripts/pg-temp.sh"
tmp=$(mktemp -d)
trap '"$PG_TEMP" stop "$tmp/pg"; rm -rf "$tmp"' EXIT
url=$("$PG_TEMP" start "$tmp/pg" 2>"$tmp/pgerr" | tail -n 1)
case "$url" in postgresql://*) ;; *) echo "SKIPPED: no throwaway PostgreSQL: $(cat "$tmp/pgerr")"; exit 77 ;; esac
JOB=(--batch-sizes 32,64,128,256 --default-bs 128 --target-metric 0.6 --max-epochs 40 --lr 0.1 --optimizer adam
     --profile-warmup-iters 1 --profile-measure-iters 4)
CMD=(-- "$ZEUS_BUILD_DIR/trainee_sim" --bs {bs} --lr {lr} --seed {seed} --epochs {epochs} --samples 20000)

expect_ok "node a: 2 recurrences" "$ZEUS" run "${JOB[@]}" --log-base "$tmp/a" --state "$url" --recurrences 2 \
  --json -o "$tmp/a.json" "${CMD[@]}"
expect_ok "node b: 2 more" "$ZEUS" run "${JOB[@]}" --log-base "$tmp/b" --state "$url" --recurrences 2 \
  --json -o "$tmp/b.json" "${CMD[@]}"
if python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["recurrences_done"] == 4' "$tmp/b.json"; then
  pass "node b continued node a's job (4 recurrences in all)"
else fail "node b continued node a's job"; cat "$tmp/b.json" | head -5; fi

key=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["state"].split(" of ", 1)[1])' "$tmp/b.json")
psql -X -q "$url" -c "SELECT pg_advisory_lock(727275, hashtext('$key')); SELECT pg_sleep(6)" >/dev/null 2>&1 &
holder=$!
sleep 1
expect_err_has "a second driver of the job is refused" "another zeus run" "$ZEUS" run "${JOB[@]}" \
  --log-base "$tmp/c" --state "$url" --recurrences 1 "${CMD[@]}"
wait "$holder"
expect_ok "reset-state" "$ZEUS" run "${JOB[@]}" --log-base "$tmp/a" --state "$url" --recurrences 1 --reset-state \
  --json -o "$tmp/r.json" "${CMD[@]}"
rows=$(psql -X -tA "$url" -c "SELECT count(*) FROM run_state WHERE job_key LIKE '%.reset-%'")
[ "$rows" = 1 ] && pass "--reset-state kept the old row" || fail "--reset-state: $rows reset rows"
finish
