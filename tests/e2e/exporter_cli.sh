#!/usr/bin/env bash
# zeus exporter from the command line: --help, bad options and backends named in the error,
# --once writing valid Prometheus text, the token over HTTP, and SIGTERM ending it promptly.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
zeus_has exporter || { skip_part "zeus exporter"; finish; exit; }
tmp=$(mktemp -d)
srv=
trap '[ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$tmp"' EXIT
export ZEUS_RAPL_ROOT=/nonexistent-rapl-root

expect_out_has "help names the token variable" "ZEUS_EXPORTER_TOKEN" "$ZEUS" exporter --help
expect_out_has "help shows an example" "zeus exporter --port 9401" "$ZEUS" exporter --help
expect_err_has "--sim-work needs simulated GPUs" "--sim-work needs simulated GPUs (ZEUS_GPU_BACKEND=sim); the backend is none" \
  env ZEUS_GPU_BACKEND=none "$ZEUS" exporter --sim-work 0 --once
expect_err_has "--sim-work names a missing GPU" "--sim-work: no visible GPU 3 (2 visible)" \
  env ZEUS_GPU_BACKEND=sim ZEUS_SIM_GPUS=2 "$ZEUS" exporter --sim-work 3 --once
expect_code "--interval out of range is a usage error" 2 "$ZEUS" exporter --interval 0 --once
expect_out_has "--once prints the GPU energy counters" '^zeus_gpu_energy_joules_total\{gpu="1",' \
  env ZEUS_GPU_BACKEND=sim ZEUS_SIM_GPUS=2 "$ZEUS" exporter --once
expect_out_has "simulated GPUs: the locked-clock state of each clock" '^zeus_gpu_clock_locked\{gpu="1",.*,clock="memory"\} 0$' \
  env ZEUS_GPU_BACKEND=sim ZEUS_SIM_GPUS=2 "$ZEUS" exporter --once
if [ -n "${FAKE_NVML:-}" ]; then # NVML cannot read a lock back: no series, never a guessed 0
  expect_out_has "NVML: the locked-clock state is left out, the clocks are there" '^absent 2$' sh -c \
    'out=$(ZEUS_GPU_BACKEND=nvml ZEUS_NVML_LIBRARY="$FAKE_NVML" ZEUS_SIM_GPUS=2 "$1" exporter --once) || exit 1
     n=$(printf "%s\n" "$out" | grep -c "^zeus_gpu_sm_clock_hertz")
     printf "%s\n" "$out" | grep -q zeus_gpu_clock_locked && echo present || echo "absent $n"' sh "$ZEUS"
fi
expect_out_has "no GPU: the exporter still answers" '^zeus_exporter_gpus 0$' \
  env ZEUS_GPU_BACKEND=none "$ZEUS" exporter --once
if command -v promtool >/dev/null; then
  ZEUS_GPU_BACKEND=sim ZEUS_SIM_GPUS=3 ZEUS_SIM_ENERGY_COUNTER=0 "$ZEUS" exporter --once >"$tmp/m.txt"
  expect_ok "promtool accepts --once (GPUs without energy counters)" promtool check metrics <"$tmp/m.txt"
  expect_out_has "GPUs without a counter say so" 'energy_source="power"' cat "$tmp/m.txt"
else
  echo "skip - promtool is not installed (scripts/deps.sh test installs prometheus)"
fi

if command -v curl >/dev/null; then
  ZEUS_EXPORTER_TOKEN=t0k ZEUS_GPU_BACKEND=sim "$ZEUS" exporter --port 0 >"$tmp/out" 2>"$tmp/err" &
  srv=$!
  for _ in $(seq 100); do grep -q "port" "$tmp/out" 2>/dev/null && break; sleep 0.1; done
  port=$(awk '{print $NF}' "$tmp/out")
  expect_out_has "no token: 401" '^401$' curl -s -o /dev/null -w '%{http_code}' "127.0.0.1:$port/metrics"
  expect_out_has "the token: 200 and the text" '^zeus_gpu_power_watts\{gpu="0",' \
    curl -sf -H "Authorization: Bearer t0k" "127.0.0.1:$port/metrics"
  kill -TERM "$srv"
  for _ in $(seq 50); do kill -0 "$srv" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$srv" 2>/dev/null; then fail "still running 5 s after SIGTERM"; else
    wait "$srv"; rc=$?; srv=
    if [ "$rc" -eq 0 ]; then pass "SIGTERM: exits 0"; else fail "SIGTERM: exit $rc"; fi
  fi
else
  echo "skip - curl is not installed"
fi
finish
