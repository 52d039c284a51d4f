#!/usr/bin/env bash
# valgrind --leak-check=full on CLI smoke runs: no leak, no invalid access (exit 1 on any error).
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_valgrind.sh"
export ZEUS_GPU_BACKEND=sim ZEUS_SIM_GPUS=2
expect_ok "valgrind: zeus gpus --json (sim)" vg "$ZEUS" gpus --json
expect_ok "valgrind: zeus gpus (sim)" vg "$ZEUS" gpus
expect_ok "valgrind: monitor energy (sim)" vg "$ZEUS" monitor energy --json -- true
expect_ok "valgrind: monitor power (sim)" vg "$ZEUS" monitor power --interval-ms 20 --duration-s 0.1
expect_code "valgrind: monitor power -- CMD, epoch, all domains, temperature (sim)" 3 vg "$ZEUS" monitor power \
  --interval-ms 20 --time epoch --domains all --temperature -- sh -c 'sleep 0.2; exit 3'
if grep -q "define ZEUS_HAVE_METRICS_PUSH 1" "$ZEUS_BUILD_DIR/include/zeus/config.h" 2>/dev/null; then
  # A push to a port where nothing listens: the error path frees everything (exit 1).
  expect_code "valgrind: monitor energy --pushgateway, gateway down (sim)" 1 vg "$ZEUS" monitor energy \
    --pushgateway http://127.0.0.1:1 --push-labels instance=a/b -- true
fi
ZEUS_SIM_ENERGY_COUNTER=0 expect_ok "valgrind: monitor energy, polled power (sim)" vg "$ZEUS" monitor energy -- sleep 0.2
expect_code "valgrind: a usage error exits cleanly" 2 vg "$ZEUS" monitor energy --gpus x -- true
if [ -n "${FAKE_NVML:-}" ] && [ -f "$FAKE_NVML" ]; then
  ZEUS_GPU_BACKEND=nvml ZEUS_NVML_LIBRARY="$FAKE_NVML" expect_ok "valgrind: zeus gpus (nvml over the fake library)" vg "$ZEUS" gpus --json
  ZEUS_GPU_BACKEND=nvml ZEUS_NVML_LIBRARY="$FAKE_NVML" expect_ok "valgrind: monitor energy (nvml over the fake library)" vg "$ZEUS" monitor energy -- true
fi
# No GPU because NVML did not load: zeus gpus says why and exits 1 (valgrind's own errors are 99).
ZEUS_GPU_BACKEND= ZEUS_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 expect_code "valgrind: no NVML falls back to none" 1 \
  vg "$ZEUS" gpus
finish
