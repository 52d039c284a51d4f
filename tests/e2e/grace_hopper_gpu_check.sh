#!/usr/bin/env bash
# End-to-end (issue 38, item 4's acceptance): make gpu-check's script (--quick) on two Grace Hopper
# superchips as the fake NVML plays them (ZEUS_SIM_HARDWARE=gh200, on its wall clock), which runs
# the zeus gpus tools, the power-limit optimizer (zeusc over libzeus's zeus_plo, with the monitor)
# and the Perseus client against zeus pfo-server there. Besides passing, each step must show that
# it measured the module, not the GPU: the busy module's 390 W (the simulated GPU's 290 W at its
# highest clock and the profile's 100 W for the Grace CPU and its memory), the module named as
# such, and no GPU power limit held against the module's power.
# About 45 s (two 4 s optimizer windows and their sweep, two Perseus rounds, a 4 s window sweep).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
[ -n "${FAKE_NVML:-}" ] && [ -f "$FAKE_NVML" ] || { echo "SKIPPED: the fake NVML is not built"; exit 77; }
PY=$(command -v python3) || { echo "SKIPPED: python3 is needed to read JSON"; exit 77; }
SRC=${ZEUS_SOURCE_DIR:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

export ZEUS_GPU_BACKEND=nvml ZEUS_NVML_LIBRARY=$FAKE_NVML ZEUS_SIM_HARDWARE=gh200 ZEUS_SIM_GPUS=2 ZEUS_SIM_CLOCK=wall
export ZEUS_RAPL_ROOT=/nonexistent-rapl-root
export FAKE_NVML_STATE=$tmp/state FAKE_NVML_BUSY_FILE=$tmp/busy FAKE_NVML_CLOCK_DELAY_MS=40
export ZEUS_GPU_CHECK_LOAD="touch '$tmp/busy'; trap 'rm -f \"$tmp/busy\"; exit 0' TERM; while :; do sleep 0.05; done"
# Fixed-time fake work (as tests/e2e/gpu_check.sh): the limit changes energy only, so eta 1.
export ZEUS_GPU_CHECK_PLO_WORK=fake:$tmp/busy:0.02 ZEUS_GPU_CHECK_PLO_ETA=1 ZEUSC_LIBRARY=${ZEUS_LIBRARY:?}
sanitizer_python "$tmp"
step() { gpu_check_step "$tmp/run/report.json" "$@"; }

bash "$SRC/scripts/gpu-check.sh" --zeus "$ZEUS" --out "$tmp/run" --quick >"$tmp/run.out" 2>&1
rc=$?
if [ "$rc" = 0 ] && step gpus-before "d['ok'] and d['restored'] is True and 'failed' not in steps.values() and all(steps[n] == 'passed' for n in ('probe', 'check', 'set-power-limit', 'plo', 'gpus-after'))"; then
  pass "gpu-check --quick on gh200: every step passed and the power limits are back"
else fail "gpu-check --quick on gh200: exit $rc"; cat "$tmp/run.out"; fi

# zeus gpus check: the module's counter against its integrated power; no GPU-limit check.
if step check "[g['power_scope'] for g in r['gpus']] == ['module', 'module'] and all(g['checks'] == {'counter_monotonic': True, 'energy_agrees': True, 'power_within_limit': None} and 385 < g['power']['instant_max_w'] < 395 for g in r['gpus'])"; then
  pass "gpu-check's check step: power_scope module, the busy module's 390 W, power_within_limit not claimed"
else fail "gpu-check's check step on gh200"; fi
if [ "$(grep -Ec '^\| [01] \| [0-9]+ \|.*\| pass \| pass \| n/a \|$' "$tmp/run/report.md")" = 2 ]; then
  pass "the report leaves within-limit n/a for the modules"
else fail "the report's check table on gh200"; grep -A6 "gpus check" "$tmp/run/report.md"; fi
if grep -q "^Module scope (the whole superchip: CPU + memory + GPU) on GPU 0, GPU 1: " "$tmp/run/report.md"; then
  pass "the report says that GPUs 0 and 1 are measured as modules"
else fail "the report's module note"; grep -A10 "gpus check" "$tmp/run/report.md"; fi

# zeus gpus probe names the module's readings (module_power_w, module_energy_j) for each GPU.
if step probe "all(g['power_scope'] == 'module' and {c['call']: c['value'] for c in g['calls']}['power_instant'].keys() == {'module_power_w'} and {c['call']: c['value'] for c in g['calls']}['total_energy'].keys() == {'module_energy_j'} for g in r['gpus']) and len(r['gpus']) == 2"; then
  pass "gpu-check's probe step names module power and energy"
else fail "gpu-check's probe step on gh200"; fi

# The power-limit optimizer's profile measured the module: 390 W a GPU while busy at every limit
# (the GPU's 290 W is below each limit tried, and the Grace's 100 W does not depend on it).
if step plo "r['checks']['restored'] and r['power_limit_after_w'] == {'0': 900.0, '1': 900.0} and 385 < r['baseline']['energy_j'] / r['baseline']['time_s'] / 2 < 395 and len(r['sweep']) >= 2 and all(385 < s['energy_j'] / s['time_s'] / 2 < 395 for s in r['sweep'])"; then
  pass "gpu-check's plo step: the optimizer profiled the module's 390 W a GPU, and put 900 W back"
else fail "gpu-check's plo step on gh200"; fi

# The window-accuracy step's reference is the module's power.
if step window-accuracy "385 < r['reference']['mean_power_w'] < 395"; then
  pass "gpu-check's window-accuracy step measured the module's 390 W"
else fail "gpu-check's window-accuracy step on gh200"; fi

# The Perseus client: the clocks lower the GPU's part only. At the highest clock the module draws
# 390 W; the plan (forward at 1305 MHz, backward at 1530 MHz: 221 W on the simulated GPU) 321 W,
# so it saves 17.7 % of the module's energy where the GPU alone would save 23.8 %.
if step pfo "steps['pfo'] == 'skipped'" 2>/dev/null; then
  if zeus_has pfo-server; then fail "gpu-check's pfo step was skipped on gh200: $(cat "$tmp/run/pfo.log")"
  else skip_part "zeus pfo-server (the Perseus step)"; fi
elif step pfo "r['checks']['plan_applied'] and r['checks']['energy_agrees_with_counter'] and 385 < r['all_max_frequency']['iter_energy_j'] / r['all_max_frequency']['iter_time_s'] < 395 and 311 < r['plan']['iter_energy_j'] / r['plan']['iter_time_s'] < 331 and 15 < r['energy_saved_pct'] < 20.5"; then
  pass "gpu-check's pfo step: the Perseus client's clock plan saved the module's 17.7 %, measured on the module"
else fail "gpu-check's pfo step on gh200: $(tail -n 3 "$tmp/run/pfo.log")"; fi

finish
