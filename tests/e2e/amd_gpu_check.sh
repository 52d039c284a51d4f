#!/usr/bin/env bash
# End-to-end (issue 38's acceptance on AMD): make gpu-check's script (--quick) with
# ZEUS_GPU_BACKEND=amdsmi on two MI300X as the fake amdsmi plays them (ZEUS_SIM_HARDWARE=mi300x, on
# its wall clock): the zeus gpus tools, the power-limit optimizer (zeusc over libzeus's zeus_plo,
# with the monitor) and the Perseus client against zeus pfo-server, every GPU call through the
# amdsmi backend. Besides passing, each step must show the MI300X: its 400-750 W cap range, the
# optimizer's caps reaching amdsmi in microwatts and bounding the power (a 500 W cap, 500 W), the
# Perseus plan's clock locks as amdsmi GFX clock ranges. Then, as tests/e2e/gpu_check.sh on the fake
# NVML, the checks that must fail on a GPU that lies (FAKE_AMDSMI_LIE) do. About 70 s.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
[ -n "${FAKE_AMDSMI:-}" ] && [ -f "$FAKE_AMDSMI" ] || { echo "SKIPPED: the fake amdsmi is not built"; exit 77; }
PY=$(command -v python3) || { echo "SKIPPED: python3 is needed to read JSON"; exit 77; }
SRC=${ZEUS_SOURCE_DIR:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

export ZEUS_GPU_BACKEND=amdsmi ZEUS_AMDSMI_LIBRARY=$FAKE_AMDSMI ZEUS_SIM_HARDWARE=mi300x ZEUS_SIM_GPUS=2 ZEUS_SIM_CLOCK=wall
export ZEUS_RAPL_ROOT=/nonexistent-rapl-root
export FAKE_AMDSMI_STATE=$tmp/state FAKE_AMDSMI_BUSY_FILE=$tmp/busy FAKE_AMDSMI_LOG=$tmp/amdsmi.log
export ZEUS_GPU_CHECK_LOAD="touch '$tmp/busy'; trap 'rm -f \"$tmp/busy\"; exit 0' TERM; while :; do sleep 0.05; done"
# Fixed-time fake work (as tests/e2e/gpu_check.sh): the cap changes energy only, so eta 1.
export ZEUS_GPU_CHECK_PLO_WORK=fake:$tmp/busy:0.02 ZEUS_GPU_CHECK_PLO_ETA=1 ZEUSC_LIBRARY=${ZEUS_LIBRARY:?}
unset ZEUS_NVML_LIBRARY
sanitizer_python "$tmp"
step() { gpu_check_step "$tmp/run/report.json" "$@"; }

bash "$SRC/scripts/gpu-check.sh" --zeus "$ZEUS" --out "$tmp/run" --quick >"$tmp/run.out" 2>&1
rc=$?
if [ "$rc" = 0 ] && step gpus-before "d['ok'] and d['restored'] is True and 'failed' not in steps.values() and all(steps[n] == 'passed' for n in ('probe', 'check', 'set-power-limit', 'set-sm-clock', 'clock-latency', 'window-accuracy', 'plo', 'gpus-after'))"; then
  pass "gpu-check --quick on the amdsmi backend: every step passed and the caps are back"
else fail "gpu-check --quick on amdsmi: exit $rc"; cat "$tmp/run.out"; fi

if step gpus-before "r['backend'] == 'amdsmi' and [g['name'] for g in r['gpus']] == ['AMD Instinct MI300X'] * 2 and all((g['power_limit_min_w'], g['power_limit_max_w'], g['power_limit_w']) == (400.0, 750.0, 750.0) for g in r['gpus'])"; then
  pass "gpus-before: the amdsmi backend, two MI300X with their 400-750 W caps"
else fail "gpus-before on amdsmi"; fi

# The optimizer's sweep: each cap bounds the busy GPU's power (the fake work's time is fixed), and
# the maximum cap goes back. Power per GPU of a window = its energy / time / 2 GPUs.
if step plo "r['checks']['restored'] and r['power_limit_after_w'] == {'0': 750.0, '1': 750.0} and len(r['sweep']) >= 2 and all(400 <= s['power_limit_w'] <= 750 and abs(s['energy_j'] / s['time_s'] / 2 - s['power_limit_w']) < 0.03 * s['power_limit_w'] for s in r['sweep'])"; then
  pass "gpu-check's plo step: every cap swept bounded the MI300X's power, and 750 W went back"
else fail "gpu-check's plo step on amdsmi"; fi
# ... and reached amdsmi in microwatts (amdsmi_set_power_cap GPU sensor µW), on both GPUs.
for g in 0 1; do
  if grep -Eq "^amdsmi_set_power_cap $g 0 500000000 -> 0$" "$tmp/amdsmi.log" &&
     grep -Eq "^amdsmi_set_power_cap $g 0 750000000 -> 0$" "$tmp/amdsmi.log"; then
    pass "GPU $g: the 500 W cap and the 750 W give-back were amdsmi calls in µW"
  else fail "GPU $g: no amdsmi_set_power_cap of 500000000 and 750000000 µW"; grep "set_power_cap $g" "$tmp/amdsmi.log" | head; fi
done

if step window-accuracy "745 < r['reference']['mean_power_w'] < 755"; then
  pass "gpu-check's window-accuracy step measured the busy MI300X's 750 W"
else fail "gpu-check's window-accuracy step on amdsmi"; fi

# The Perseus client: its plan's clock locks are amdsmi GFX clock ranges (clk type SYS = 0).
if step pfo "steps['pfo'] == 'skipped'" 2>/dev/null; then
  if zeus_has pfo-server; then fail "gpu-check's pfo step was skipped on amdsmi: $(cat "$tmp/run/pfo.log")"
  else skip_part "zeus pfo-server (the Perseus step)"; fi
elif step pfo "r['checks']['plan_applied'] and r['checks']['energy_agrees_with_counter'] and 500 in r['plan']['clocks_set_mhz'] and r['energy_saved_pct'] > 20" &&
     grep -Eq "^amdsmi_set_gpu_clk_range 0 500 500 0 -> 0$" "$tmp/amdsmi.log"; then
  pass "gpu-check's pfo step: the plan's 500 MHz lock was an amdsmi GFX clock range, and it saved energy"
else fail "gpu-check's pfo step on amdsmi"; grep clk_range "$tmp/amdsmi.log" | sort | uniq -c | head; fi

# ---- a GPU that lies (FAKE_AMDSMI_LIE, the fake NVML's lies on amdsmi's readings) ----
# Each check below passed in the honest run above and must fail, by name, on a GPU that lies about
# the one figure it checks, as tests/e2e/gpu_check.sh proves on the fake NVML. Single steps, quick.
if step check "all(g['checks']['energy_agrees'] for g in r['gpus'])" &&
   step set-sm-clock "all(s['ok'] for g in r['gpus'] for s in g['settings'])" &&
  step clock-latency "all(g['timeouts'] == 0 for g in r['gpus'])" &&
   step window-accuracy "r['checks']['sampled_50ms'] and r['checks']['sampled_100ms']" &&
   step plo "r['checks']['energy_measured']"; then
  pass "the honest run: energy_agrees, the SM clock read back without timeouts, the sampled windows and plo's energy all passed"
else fail "the honest run's checks that the lies below must fail"; fi
# check: a counter that skips every 5th change (its energy lost) reads ~20 % below integrated power.
expect_check_fails "check on amdsmi: a counter that skips a tick (FAKE_AMDSMI_LIE=counter_skips_tick) fails energy_agrees" \
  "d['gpus'][0]['checks']['energy_agrees'] is False" --busy -- \
  FAKE_AMDSMI_LIE=counter_skips_tick "$ZEUS" gpus check --gpus 0 --duration-s 1.5 --json
# set-sm-clock and clock-latency: a GFX clock read-back (amdsmi_get_clock_info) that never moves
# fails the setting, and every change times out.
expect_check_fails "set-sm-clock on amdsmi: a frozen GFX clock read-back (FAKE_AMDSMI_LIE=clock_frozen) fails the setting" \
  "d['gpus'][0]['settings'][0]['ok'] is False" --busy -- \
  FAKE_AMDSMI_LIE=clock_frozen "$ZEUS" gpus set --gpus 0 --sm-clock mid --hold-s 0.3 --json
expect_check_fails "clock-latency on amdsmi: a frozen GFX clock read-back (FAKE_AMDSMI_LIE=clock_frozen) times out" \
  "d['gpus'][0]['timeouts'] >= 1" --busy -- \
  FAKE_AMDSMI_LIE=clock_frozen "$ZEUS" gpus clock-latency --gpus 0 --changes 2 --timeout-s 0.3 --json
# window-accuracy: socket power (amdsmi_get_power_info) 20 % low puts the sampled source's sub-tick
# energy off the counter's.
expect_check_fails "window-accuracy on amdsmi: power reading 20 % low (FAKE_AMDSMI_LIE=power_scaled:0.8) fails the sampled checks" \
  "not d['ok'] and not d['checks']['sampled_50ms'] and not d['checks']['sampled_100ms']" --busy -- \
  FAKE_AMDSMI_LIE=power_scaled:0.8 PYTHONPATH="$SRC/python" "${PYTHON:-$PY}" "$SRC/scripts/gpu_check_window.py" --gpu 1 --quick
# plo: a counter that never moves measures no energy. The MI300X's counter is slow, so the monitor
# would sample power between its ticks (and plo fails energy_saved_meaningful on a tick never
# seen); the raw counter (ZEUS_MONITOR_ENERGY=raw) shows the figure the lie is about.
plo_fails "plo on amdsmi: a frozen counter (FAKE_AMDSMI_LIE=counter_frozen) fails energy_measured and says 'not measured'" \
  "not d['checks']['energy_measured'] and not d['checks']['energy_saved_meaningful']" "energy saved not measured" \
  ZEUS_MONITOR_ENERGY=raw FAKE_AMDSMI_LIE=counter_frozen
# A malformed lie fails amdsmi_init with the fake NVML's message, under the AMD fake's names.
if ! FAKE_AMDSMI_LIE=power_scaled:11 "$ZEUS" gpus >/dev/null 2>"$tmp/lie-bad.err" &&
   grep -q "fake amdsmi: FAKE_AMDSMI_LIE power_scaled factor '11' is not a number in (0, 10\]" "$tmp/lie-bad.err"; then
  pass "a malformed FAKE_AMDSMI_LIE fails init, saying why"
else fail "malformed FAKE_AMDSMI_LIE: $(cat "$tmp/lie-bad.err")"; fi

finish
