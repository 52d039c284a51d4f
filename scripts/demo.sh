#!/usr/bin/env bash
# make demo: a short tour of the zeus CLI and library on the simulated GPU (or real GPUs when
# ZEUS_GPU_BACKEND=nvml is set on an NVIDIA machine).
set -eu
build=${1:-build}
Z="$build/zeus"
export ZEUS_GPU_BACKEND=${ZEUS_GPU_BACKEND:-sim}
export ZEUS_SIM_GPUS=${ZEUS_SIM_GPUS:-2}
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

step "zeus --version"
"$Z" --version
step "zeus gpus            # backend: $ZEUS_GPU_BACKEND"
"$Z" gpus
step "zeus monitor energy -- sleep 1     # energy of a whole command (idle GPUs here)"
"$Z" monitor energy -- sleep 1
step "zeus monitor power --interval-ms 200 --duration-s 1"
"$Z" monitor power --interval-ms 200 --duration-s 1
step "ZEUS_SIM_CLOCK=virtual measure_power_limits 200   # library example: same work at each power limit"
ZEUS_SIM_CLOCK=virtual "$build/measure_power_limits" 200
echo
echo "Lower power limits cap the simulated GPU's clock: the work takes longer but, down to a point,"
echo "uses less energy. The power-limit optimizer finds that point during training."

step "zeus plo demo      # the power-limit optimizer in a simulated training loop"
"$Z" plo demo

out=$(mktemp -d)
step "zeus frontier --profile tests/data/frontier/small_profile.csv --stages 2 --microbatches 4 --blocking-power 60 --out $out --sample 3"
"$Z" frontier --profile tests/data/frontier/small_profile.csv --stages 2 --microbatches 4 --blocking-power 60 \
  --out "$out" --sample 3 --plot "$out/frontier.svg"
echo "frontier.csv (first lines) and the plan files written:"
head -5 "$out/frontier.csv"
ls "$out"
rm -rf "$out"
