#!/usr/bin/env bash
# valgrind --leak-check=full on `zeus run`, the demo trainee (zeus_job) and `zeus simulate`.
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_valgrind.sh"
TRAINEE="$ZEUS_BUILD_DIR/trainee_sim"
[ -x "$TRAINEE" ] || { echo "SKIPPED: $TRAINEE is not built"; exit 77; }
export ZEUS_GPU_BACKEND=sim ZEUS_SIM_GPUS=1 ZEUS_RAPL_ROOT=/nonexistent-rapl-root
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
JOB=(--batch-sizes 64,128,256,512 --default-bs 256 --target-metric 0.6 --max-epochs 20 --lr 0.1 --optimizer adam
     --profile-warmup-iters 1 --profile-measure-iters 4 --log-base "$tmp/logs" --quiet)
CMD=(-- "$TRAINEE" --bs {bs} --lr {lr} --seed {seed} --epochs {epochs} --samples 20000)
expect_ok "valgrind: zeus run (3 recurrences)" vg "$ZEUS" run "${JOB[@]}" --recurrences 3 "${CMD[@]}"
expect_ok "valgrind: zeus run continues (--json)" vg "$ZEUS" run "${JOB[@]}" --recurrences 2 --json "${CMD[@]}"
expect_code "valgrind: zeus run with a crashing trainee" 1 vg "$ZEUS" run "${JOB[@]}" --state "$tmp/x.sqlite" -- false
expect_code "valgrind: zeus run usage error" 2 vg "$ZEUS" run --batch-sizes 1,x -- true
mkdir -p "$tmp/job"
ZEUS_TARGET_METRIC=0.6 ZEUS_LOG_DIR="$tmp/job" ZEUS_PROFILE_PARAMS=1,4 expect_ok "valgrind: trainee_sim profiling run" \
  vg "$TRAINEE" --bs 256 --samples 20000 --epochs 8
ZEUS_TARGET_METRIC=0.6 ZEUS_LOG_DIR="$tmp/job" ZEUS_COST_THRESH=1e9 ZEUS_USE_OPTIMAL_PL=false expect_ok \
  "valgrind: trainee_sim with a saved profile, observer mode" vg "$TRAINEE" --bs 256 --samples 20000 --epochs 8
ZEUS_TARGET_METRIC=x expect_code "valgrind: trainee_sim with a bad setting" 1 vg "$TRAINEE" --bs 256
DATA=${ZEUS_DATA_DIR:-$ZEUS_DATA_DIR_DEFAULT}
if [ -d "$DATA/nsdi23-trace" ]; then
  expect_ok "valgrind: zeus simulate --all" vg "$ZEUS" simulate --trace-dir "$DATA/nsdi23-trace" --gpu v100 --all --json
fi
expect_code "valgrind: zeus simulate with a missing trace" 1 vg "$ZEUS" simulate --trace-dir "$tmp" --gpu v100 --all
finish
