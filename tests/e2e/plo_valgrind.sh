#!/usr/bin/env bash
# valgrind --leak-check=full on `zeus plo` runs: no leak, no invalid access (exit 1 on any error).
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_valgrind.sh"
P=$(mktemp -d)
trap 'rm -rf "$P"' EXIT
printf 'start_time,window_name,elapsed_time,gpu0_energy,gpu1_energy\n1,__GlobalPowerLimitOptimizer_300,10,100,101\n2,__GlobalPowerLimitOptimizer_250,11,95,96\n3,__GlobalPowerLimitOptimizer_200,12,90,92\n' >"$P/p.csv"
expect_ok "valgrind: plo demo" vg "$ZEUS" plo demo --warmup 2 --profile-steps 5
ZEUS_SIM_GPUS=2 expect_ok "valgrind: plo demo --json on 2 GPUs" vg "$ZEUS" plo demo --json --selector time --warmup 1 --profile-steps 3
expect_ok "valgrind: plo replay with interrupted epochs" vg "$ZEUS" plo replay --profile "$P/p.csv" --steps-per-epoch 12 --warmup 2 --profile-steps 6
expect_ok "valgrind: plo replay --json" vg "$ZEUS" plo replay --profile "$P/p.csv" --selector max-slowdown --factor 1.1 --json
expect_code "valgrind: plo replay of a missing file fails cleanly" 1 vg "$ZEUS" plo replay --profile "$P/missing.csv"
expect_code "valgrind: plo replay not done fails cleanly" 1 vg "$ZEUS" plo replay --profile "$P/p.csv" --epochs 1 --steps-per-epoch 12 --warmup 2 --profile-steps 6
finish
