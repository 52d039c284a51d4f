#!/usr/bin/env bash
# scripts/gpu-check.sh (make gpu-check) and the zeus gpus tools it runs, against the fake NVML:
# a full quick run passes with every figure in the report and every setting back (the fake's
# FAKE_NVML_STATE keeps settings between processes, as a real GPU does); the figures are the
# fake's (clock latency = FAKE_NVML_CLOCK_DELAY_MS, energy counter = integrated power); a refused
# power limit fails the run and names the step; no GPU says so; SIGTERM during a change puts the
# GPU back, from zeus gpus set alone and through the script.
set -uo pipefail
ZEUS=${ZEUS:?path of the zeus binary}
. "$(dirname "$0")/lib.sh"
[ -n "${FAKE_NVML:-}" ] && [ -f "$FAKE_NVML" ] || { echo "SKIPPED: the fake NVML is not built"; exit 77; }
PY=$(command -v python3) || { echo "SKIPPED: python3 is needed to read JSON"; exit 77; }
SRC=${ZEUS_SOURCE_DIR:?}
tmp=$(mktemp -d)
bg=
trap '[ -n "$bg" ] && kill "$bg" 2>/dev/null; rm -rf "$tmp"' EXIT

export ZEUS_GPU_BACKEND=nvml ZEUS_NVML_LIBRARY=$FAKE_NVML ZEUS_SIM_GPUS=2 ZEUS_SIM_CLOCK=wall
export FAKE_NVML_STATE=$tmp/state FAKE_NVML_BUSY_FILE=$tmp/busy FAKE_NVML_CLOCK_DELAY_MS=40
export ZEUS_GPU_CHECK_LOAD="touch '$tmp/busy'; trap 'rm -f \"$tmp/busy\"; exit 0' TERM; while :; do sleep 0.05; done"
export ZEUS_GPU_CHECK_PLO_WORK=fake:$tmp/busy:0.02 ZEUSC_LIBRARY=${ZEUS_LIBRARY:?}
# The fake work's time does not depend on the limit, so time is only noise there: choose on
# energy alone (eta 1), or a slow moment on a loaded machine could make the maximum look best.
export ZEUS_GPU_CHECK_PLO_ETA=1
sanitizer_python "$tmp"   # the sanitizer build's interpreter needs its runtimes preloaded
GC=$SRC/scripts/gpu-check.sh
limits() { awk '{printf "%s ", $4}' "$tmp/state" 2>/dev/null; }

# ---- the tools alone ----
expect_out_has "gpus --help lists the tools" "clock-latency" "$ZEUS" gpus --help
for sub in probe check set clock-latency report; do
  expect_out_has "gpus $sub --help shows JSON keys" "JSON:" "$ZEUS" gpus "$sub" --help
done
expect_code "gpus set with nothing to set is a usage error" 2 "$ZEUS" gpus set --gpus 0
expect_err_has "a bad --gpus is named" "GPU 7 does not exist" "$ZEUS" gpus probe --gpus 7
"$ZEUS" gpus probe --gpus 1 --calls 5 --json >"$tmp/probe.json"
if jcheck "$tmp/probe.json" "d['ok'] and d['driver_version'].startswith('555.') and len(d['gpus']) == 1 and d['gpus'][0]['index'] == 1 and {c['call']: c['status'] for c in d['gpus'][0]['calls']}['power_memory_average'] == 'not_supported' and all(c['calls'] == 5 and c['median_latency_s'] >= 0 for c in d['gpus'][0]['calls']) and d['gpus'][0]['power_limit_min_w'] == 100 and d['gpus'][0]['architecture_name'] == 'Ampere'"; then
  pass "probe: values, statuses and latencies of GPU 1"
else fail "probe JSON: $(head -c 600 "$tmp/probe.json")"; fi
# Every NVML reading the backend makes is reached, once per probe call (nothing is cached).
FAKE_NVML_COUNTS=$tmp/counts "$ZEUS" gpus probe --gpus 0 --calls 7 --json >/dev/null
missing=
for fn in nvmlSystemGetDriverVersion nvmlSystemGetNVMLVersion nvmlDeviceGetName nvmlDeviceGetUUID \
          nvmlDeviceGetArchitecture nvmlDeviceGetPowerManagementLimitConstraints nvmlDeviceGetPowerManagementDefaultLimit \
          nvmlDeviceGetPowerManagementLimit nvmlDeviceGetPersistenceMode nvmlDeviceGetTotalEnergyConsumption \
          nvmlDeviceGetFieldValues nvmlDeviceGetTemperature nvmlDeviceGetClockInfo nvmlDeviceGetSupportedMemoryClocks \
          nvmlDeviceGetSupportedGraphicsClocks; do
  n=$(awk -v f="$fn" '$1 == f {print $2}' "$tmp/counts")
  [ "${n:-0}" -ge 7 ] || missing="$missing $fn(${n:-0})"
done
if [ -z "$missing" ]; then pass "probe reaches every NVML reading of the backend 7 times"
else fail "probe NVML calls missing or fewer than 7:$missing"; fi
FAKE_NVML_INJECT="nvmlDeviceGetPowerManagementLimit:UNKNOWN:0:2" "$ZEUS" gpus probe --gpus 0 --calls 5 --json >"$tmp/probe-bad.json"
if [ $? = 1 ] && jcheck "$tmp/probe-bad.json" "not d['ok'] and {c['call']: c['status'] for c in d['gpus'][0]['calls']}['power_limit'] == 'error'"; then
  pass "probe: a call failing after two good answers is an error and exit 1"
else fail "probe with an injected failure: $(head -c 600 "$tmp/probe-bad.json")"; fi

touch "$tmp/busy"
"$ZEUS" gpus check --gpus 0 --duration-s 0.5 --json >"$tmp/check.json"
if jcheck "$tmp/check.json" "d['ok'] and abs(d['gpus'][0]['agreement_pct']) < 1 and d['gpus'][0]['power']['instant_mean_w'] > 100 and d['gpus'][0]['checks'] == {'counter_monotonic': True, 'energy_agrees': True, 'power_within_limit': True}"; then
  pass "check: a busy GPU's counter agrees with integrated power"
else fail "check JSON: $(head -c 800 "$tmp/check.json")"; fi
ZEUS_SIM_ENERGY_COUNTER=0 "$ZEUS" gpus check --gpus 0 --duration-s 0.3 --json >"$tmp/check-nc.json"
if jcheck "$tmp/check-nc.json" "d['ok'] and d['gpus'][0]['checks']['energy_agrees'] is None and d['gpus'][0]['counter']['supported'] is False"; then
  pass "check: no energy counter is n/a, not a failure"
else fail "check without counter: $(head -c 800 "$tmp/check-nc.json")"; fi

"$ZEUS" gpus clock-latency --gpus 0 --changes 4 --json >"$tmp/lat.json"
if jcheck "$tmp/lat.json" "d['ok'] and 0.035 <= d['gpus'][0]['median_latency_s'] <= 1.0 and d['gpus'][0]['timeouts'] == 0 and len(d['gpus'][0]['latencies_s']) == 4 and d['gpus'][0]['high_mhz'] == 1740"; then
  pass "clock-latency measures the fake's 40 ms delay"
else fail "clock-latency JSON: $(head -c 800 "$tmp/lat.json")"; fi
FAKE_NVML_CLOCK_DELAY_MS=3000 "$ZEUS" gpus clock-latency --gpus 0 --changes 2 --timeout-s 0.1 --json >"$tmp/lat2.json"
# The first change never shows within 0.1 s; the second asks for the clock still shown.
if [ $? = 1 ] && jcheck "$tmp/lat2.json" "not d['ok'] and d['gpus'][0]['timeouts'] == 1 and d['gpus'][0]['latencies_s'][0] is None"; then
  pass "clock-latency: a clock that does not show up in time fails"
else fail "clock-latency timeouts: $(head -c 800 "$tmp/lat2.json")"; fi

"$ZEUS" gpus set --gpus 1 --power-limit 250 --sm-clock 1200 --hold-s 0.3 --json >"$tmp/set.json"
if jcheck "$tmp/set.json" "d['ok'] and [(s['setting'], s['ok']) for s in d['gpus'][0]['settings']] == [('power_limit', True), ('sm_clock', True)] and d['gpus'][0]['settings'][0]['requested_w'] == 250 and d['gpus'][0]['settings'][0]['read_back_w'] == 250 and d['gpus'][0]['settings'][1]['read_back_mhz'] == d['gpus'][0]['settings'][1]['requested_mhz'] and abs(d['gpus'][0]['settings'][1]['requested_mhz'] - 1200) < 15 and d['gpus'][0]['after']['power_limit_w'] == 300 and d['gpus'][0]['after']['restored']" &&
   [ "$(limits)" = "300000 300000 " ]; then
  pass "set: limit and clock read back, then back at 300 W in the GPU's state"
else fail "set JSON: $(head -c 900 "$tmp/set.json"); state: $(cat "$tmp/state")"; fi
# At 150 W the simulated GPU cannot hold 1200 MHz (120 + 170 (f/1740)^3 W): the clock read
# under load stays below the lock, as a power limit pulls a real GPU's clock down.
"$ZEUS" gpus set --gpus 1 --power-limit 150 --sm-clock 1200 --hold-s 0.3 --json >"$tmp/set-low.json"
if [ $? = 1 ] && jcheck "$tmp/set-low.json" "not d['ok'] and d['gpus'][0]['settings'][1]['ok'] is False and d['gpus'][0]['settings'][1]['read_back_mhz'] < 1100 and d['gpus'][0]['after']['restored']"; then
  pass "set: a locked clock the GPU does not reach fails"
else fail "set with an unreachable clock: $(head -c 900 "$tmp/set-low.json")"; fi
FAKE_NVML_INJECT="nvmlDeviceSetMemoryLockedClocks:NOT_SUPPORTED" "$ZEUS" gpus set --gpus 0 --memory-clock min --hold-s 0.1 --json >"$tmp/set-mem.json"
if [ $? = 0 ] && jcheck "$tmp/set-mem.json" "d['gpus'][0]['settings'][0]['supported'] is False and d['gpus'][0]['settings'][0]['ok'] is None"; then
  pass "set: memory clocks not supported is reported, not failed"
else fail "set memory clock not supported: $(head -c 600 "$tmp/set-mem.json")"; fi
expect_code "set: a refused power limit exits 1" 1 env FAKE_NVML_INJECT="nvmlDeviceSetPowerManagementLimit:NO_PERMISSION" \
  "$ZEUS" gpus set --gpus 0 --power-limit min --hold-s 0.1
"$ZEUS" gpus set --gpus 0 --power-limit min --json -- sh -c 'echo child-out; exit 3' >"$tmp/set-child.json" 2>"$tmp/set-child.err"
if [ $? = 1 ] && jcheck "$tmp/set-child.json" "d['command_exit_code'] == 3" && grep -q child-out "$tmp/set-child.err"; then
  pass "set -- CMD: holds while the command runs; its stdout goes to stderr with --json; its failure fails"
else fail "set with a command: $(cat "$tmp/set-child.json" "$tmp/set-child.err" | head -c 600)"; fi
rm -f "$tmp/busy"

# SIGTERM while zeus gpus set holds a lower limit: restored, exit 143.
"$ZEUS" gpus set --gpus 0 --power-limit min --hold-s 60 >"$tmp/sig.out" 2>&1 &
bg=$!
for _ in $(seq 200); do [ "$(limits)" = "100000 300000 " ] && break; sleep 0.05; done
kill -TERM "$bg"; wait "$bg"; rc=$?; bg=
if [ "$rc" = 143 ] && [ "$(limits)" = "300000 300000 " ] && grep -q restored "$tmp/sig.out"; then
  pass "set: SIGTERM during the hold puts the limit back and exits 143"
else fail "set SIGTERM: exit $rc, state $(limits), output $(cat "$tmp/sig.out")"; fi

# SIGINT while zeus gpus clock-latency holds a locked clock (each change waits up to 5 s for a
# clock the fake shows only after 3 s): unlocked, exit 130.
locks() { awk '{printf "%s-%s ", $8, $9}' "$tmp/state" 2>/dev/null; }
FAKE_NVML_CLOCK_DELAY_MS=3000 "$ZEUS" gpus clock-latency --gpus 0 --changes 10 --timeout-s 5 >"$tmp/sigint.out" 2>&1 &
bg=$!
for _ in $(seq 200); do case $(locks) in "0-0 "*) sleep 0.05 ;; *) break ;; esac; done
seen=$(locks)
kill -INT "$bg"; wait "$bg"; rc=$?; bg=
if [ "$rc" = 130 ] && [ "${seen%% *}" != "0-0" ] && [ "$(locks)" = "0-0 0-0 " ]; then
  pass "clock-latency: SIGINT while a clock is locked unlocks it and exits 130"
else fail "clock-latency SIGINT: exit $rc, locks seen '$seen', after '$(locks)': $(cat "$tmp/sigint.out")"; fi

# ---- the script ----
expect_out_has "gpu-check --help names the steps" "clock-latency" bash "$GC" --help
expect_code "gpu-check: an unknown option is a usage error" 2 bash "$GC" --bogus
env ZEUS_NVML_LIBRARY="$tmp/none.so" bash "$GC" --zeus "$ZEUS" --out "$tmp/nogpu" --quick --json >"$tmp/nogpu.json" 2>"$tmp/nogpu.out"
rc=$?
if [ "$rc" = 0 ] && grep -q "no NVIDIA GPU here" "$tmp/nogpu.out" && grep -q "nothing was checked" "$tmp/nogpu.out" &&
   jcheck "$tmp/nogpu.json" "d['skipped'] == 1 and d['passed'] == 0 and d['steps'][0]['status'] == 'skipped' and 'none.so' in d['steps'][0]['note']" &&
   grep -q "NOTHING CHECKED" "$tmp/nogpu/report.md"; then
  pass "gpu-check without a GPU says so (stderr with --json), checks nothing, and --json prints the report"
else fail "gpu-check without GPU: exit $rc: $(cat "$tmp/nogpu.out")"; fi

rm -f "$tmp/state"
bash "$GC" --zeus "$ZEUS" --out "$tmp/run" --quick >"$tmp/run.out" 2>&1
rc=$?
steps="['gpus-before', 'probe', 'load', 'check', 'set-power-limit', 'set-sm-clock', 'set-memory-clock', 'clock-latency', 'window-accuracy', 'actuation-latency', 'plo', 'pfo', 'gpus-after']"
if [ "$rc" = 0 ] && jcheck "$tmp/run/report.json" "d['ok'] and d['restored'] is True and [s['step'] for s in d['steps']] == $steps and [s['status'] for s in d['steps']].count('failed') == 0 and len([s for s in d['steps'] if s['step'] == 'probe'][0]['result']['gpus']) == 2"; then
  pass "gpu-check --quick on the fake NVML: every step passed and the GPUs are back"
else fail "gpu-check run: exit $rc: $(cat "$tmp/run.out")"; fi
if jcheck "$tmp/run/report.json" "[s for s in d['steps'] if s['step'] == 'plo'][0]['result']['energy_saved_pct'] > 0 and [s for s in d['steps'] if s['step'] == 'plo'][0]['result']['optimal_power_limit_w'] < 300 and [s for s in d['steps'] if s['step'] == 'plo'][0]['result']['checks']['restored']"; then
  pass "gpu-check: the power-limit optimizer saved energy on the fake GPU and put the limit back"
else fail "gpu-check plo: $(cat "$tmp/run/plo.log")"; fi
if jcheck "$tmp/run/report.json" "[s for s in d['steps'] if s['step'] == 'plo'][0]['result']['profile_window_s'] >= 0.5 and len([s for s in d['steps'] if s['step'] == 'plo'][0]['result']['sweep']) >= 2 and [s for s in d['steps'] if s['step'] == 'plo'][0]['result']['sweep_optimum_w'] is not None"; then
  pass "gpu-check plo: profile windows sized by time (>= 0.5 s quick), and a clean sweep beside the choice"
else fail "gpu-check plo windows/sweep: $(head -c 1500 "$tmp/run/plo.json")"; fi
# Issue 30: the optimizer twice on the same work, both choices, whether they agree, each beside the sweep.
if jcheck "$tmp/run/report.json" "(lambda r: len(r['optimizer_runs']) == 2 and all(x['optimal_power_limit_w'] in [s['power_limit_w'] for s in r['sweep']] and x['sweep_excess_cost_pct'] >= 0 and isinstance(x['agrees_with_sweep'], bool) for x in r['optimizer_runs']) and r['runs_agree'] == (r['optimizer_runs'][0]['optimal_power_limit_w'] == r['optimizer_runs'][1]['optimal_power_limit_w']) and r['optimizer_runs'][0]['optimal_power_limit_w'] == r['optimal_power_limit_w'] and r['checks']['second_run_done'])([s for s in d['steps'] if s['step'] == 'plo'][0]['result'])"; then
  pass "gpu-check plo: two runs on the same work, both choices and their agreement reported beside the sweep"
else fail "gpu-check plo two runs: $(head -c 1500 "$tmp/run/plo.json")"; fi

# The window-accuracy step on GPUs that behave like the measured H100 (100 ms tick, 3.3 ms counter
# reads): the sampled source meets the targets, the raw counter difference is far off at 50 ms.
touch "$tmp/busy"
PYTHONPATH="$SRC/python" ZEUS_SIM_HARDWARE=h100 ${PYTHON:-$PY} "$SRC/scripts/gpu_check_window.py" --gpu 1 --quick \
  >"$tmp/win.json" 2>"$tmp/win.err"
rc=$?
rm -f "$tmp/busy"
if [ "$rc" = 0 ] && jcheck "$tmp/win.json" "d['ok'] and d['windows'][0]['window_s'] == 0.05 and d['windows'][0]['raw_median_pct'] > 50 and d['windows'][0]['sampled_worst_pct'] < 5 and 280 < d['reference']['mean_power_w'] < 300"; then
  pass "window-accuracy on the h100 profile: sampled within the targets, raw 50 ms windows off by > 50 %"
else fail "window-accuracy h100: exit $rc: $(cat "$tmp/win.err") $(head -c 1200 "$tmp/win.json")"; fi

if jcheck "$tmp/run/report.json" "[s for s in d['steps'] if s['step'] == 'actuation-latency'][0]['status'] in ('skipped', 'passed')"; then
  pass "gpu-check: actuation-latency runs where torch sees a GPU, else is skipped"
else fail "gpu-check actuation-latency: $(cat "$tmp/run/actuation-latency.log")"; fi

# nvcc builds the load but no GPU can run it (a build machine, or the fake NVML): skipped, not failed.
printf '%s\n' '#!/bin/sh' 'while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done' \
  'printf "#!/bin/sh\necho \"gpu_load: no CUDA device it can run on (no CUDA-capable device is detected)\" >&2\nexit 77\n" >"$out"' \
  'chmod +x "$out"' >"$tmp/nvcc"
chmod +x "$tmp/nvcc"
# The whole run there, on GPUs that behave like the measured H100 (issue 24's acceptance).
rm -f "$tmp/state"
( unset ZEUS_GPU_CHECK_LOAD; NVCC=$tmp/nvcc ZEUS_SIM_HARDWARE=h100 bash "$GC" --zeus "$ZEUS" --out "$tmp/nvcc-run" --quick >"$tmp/nvcc-run.out" 2>&1 )
rc=$?
if jcheck "$tmp/nvcc-run/report.json" "[s for s in d['steps'] if s['step'] == 'load'][0]['status'] == 'skipped' and 'cannot run here' in [s for s in d['steps'] if s['step'] == 'load'][0]['note']"; then
  pass "gpu-check: a load nvcc built that no GPU can run is skipped, not failed"
else fail "gpu-check with nvcc and no GPU: $(cat "$tmp/nvcc-run.out")"; fi
if [ "$rc" = 0 ] && jcheck "$tmp/nvcc-run/report.json" "d['ok'] and d['restored'] is True and [s['status'] for s in d['steps']].count('failed') == 0 and [s for s in d['steps'] if s['step'] == 'window-accuracy'][0]['status'] == 'passed'"; then
  pass "gpu-check --quick passes on the fake NVML with the h100 profile and nvcc present"
else fail "gpu-check on h100: exit $rc: $(cat "$tmp/nvcc-run.out")"; fi
# A build without the Perseus server or client (cmake/components.cmake) skips the step, saying why.
if jcheck "$tmp/run/report.json" "[s for s in d['steps'] if s['step'] == 'pfo'][0]['status'] == 'skipped'"; then
  if { ! zeus_has pfo-server && grep -q "no pfo-server command" "$tmp/run/pfo.log"; } ||
     grep -q "Perseus client is not there" "$tmp/run/pfo.log"; then
    pass "gpu-check: without the Perseus components the pfo step is skipped"
  else fail "gpu-check pfo skipped: $(cat "$tmp/run/pfo.log")"; fi
elif jcheck "$tmp/run/report.json" "[s for s in d['steps'] if s['step'] == 'pfo'][0]['result']['energy_saved_pct'] > 0 and [s for s in d['steps'] if s['step'] == 'pfo'][0]['result']['checks']['plan_applied'] and [s for s in d['steps'] if s['step'] == 'pfo'][0]['result']['plan_mhz'] == 1305"; then
  pass "gpu-check: the Perseus client applied the 75 % plan from zeus pfo-server and saved energy"
else fail "gpu-check pfo: $(cat "$tmp/run/pfo.log")"; fi
for want in "## Summary" "## What it found" "Zeus Simulated GPU" "## Readings against each other" "## Settings changed, read back and restored" \
            "## Clock change latency" "## Window accuracy" "The energy counter moves at every read" "## Settings after the run" \
            "## Power-limit optimizer on real work" "a clean sweep" "optimizer steps a run" "PASSED"; do
  if grep -qF -- "$want" "$tmp/run/report.md"; then pass "report.md has '$want'"; else fail "report.md lacks '$want'"; fi
done
[ "$(limits)" = "300000 300000 " ] && pass "gpu-check: the fake GPUs' state is back at 300 W" || fail "state after gpu-check: $(cat "$tmp/state")"

FAKE_NVML_INJECT="nvmlDeviceSetPowerManagementLimit:NO_PERMISSION" bash "$GC" --zeus "$ZEUS" --out "$tmp/refused" --quick >"$tmp/refused.out" 2>&1
rc=$?
if [ "$rc" = 1 ] && grep -q "FAILED" "$tmp/refused.out" && grep -qE '^\| set-power-limit \| \*\*FAILED\*\*' "$tmp/refused/report.md"; then
  pass "gpu-check: a refused power limit fails the run and the report names the step"
else fail "gpu-check with refused limits: exit $rc: $(cat "$tmp/refused.out")"; fi

# SIGTERM to the script while a step holds a changed limit (the full run holds 3 s).
rm -f "$tmp/state"
bash "$GC" --zeus "$ZEUS" --out "$tmp/sigrun" >"$tmp/sigrun.out" 2>&1 &
bg=$!
for _ in $(seq 600); do [ "$(limits)" = "100000 100000 " ] && break; sleep 0.05; done
seen=$(limits)
kill -TERM "$bg"; wait "$bg"; rc=$?; bg=
if [ "$seen" = "100000 100000 " ] && [ "$rc" = 143 ] && [ "$(limits)" = "300000 300000 " ] &&
   grep -q "stopped by SIGTERM" "$tmp/sigrun.out" && grep -q "not run: stopped by SIGTERM" "$tmp/sigrun/report.md" &&
   [ ! -e "$tmp/busy" ]; then
  pass "gpu-check: SIGTERM mid-step restores the GPUs, stops the load, reports and exits 143"
else fail "gpu-check SIGTERM: seen '$seen', exit $rc, state $(limits): $(cat "$tmp/sigrun.out")"; fi

# ---- issue 35: steps sized by time, a hardware model, and checks that fail on a GPU that lies ----
# window-accuracy needs a clock that moves with real time: on the fake's virtual clock it is skipped.
PYTHONPATH="$SRC/python" ZEUS_SIM_CLOCK=virtual ${PYTHON:-$PY} "$SRC/scripts/gpu_check_window.py" --gpu 0 --quick \
  >"$tmp/win-virt.json" 2>"$tmp/win-virt.err"
rc=$?
if [ "$rc" = 77 ] && grep -q "does not move with real time" "$tmp/win-virt.err"; then
  pass "window-accuracy on the virtual clock is skipped (77) with its reason"
else fail "window-accuracy on the virtual clock: exit $rc: $(cat "$tmp/win-virt.err")"; fi
# plo and pfo work in real time too: on the virtual clock they are skipped with the reason (before,
# pfo "passed" there with an energy saved measured from nothing).
PYTHONPATH="$SRC/python" ZEUS_SIM_CLOCK=virtual ${PYTHON:-$PY} "$SRC/scripts/gpu_check_plo.py" --gpus 0 --quick \
  >/dev/null 2>"$tmp/plo-virt.err"
rc1=$?
rc2=77
if zeus_has pfo-server; then
  PYTHONPATH="$SRC/python" ZEUS_SIM_CLOCK=virtual ${PYTHON:-$PY} "$SRC/scripts/gpu_check_pfo.py" --zeus "$ZEUS" --gpu 0 --quick \
    >/dev/null 2>"$tmp/pfo-virt.err"
  rc2=$?
fi
if [ "$rc1" = 77 ] && [ "$rc2" = 77 ] && grep -q "does not move with real time" "$tmp/plo-virt.err"; then
  pass "plo and pfo on the virtual clock are skipped (77) with the reason"
else fail "plo/pfo on the virtual clock: exits $rc1/$rc2: $(cat "$tmp/plo-virt.err" "$tmp/pfo-virt.err" 2>/dev/null | tail -n 4)"; fi
# The h100 run above: the two clocks tick together there, and the counter's period is found.
if jcheck "$tmp/win.json" "abs(d['counter']['period_s'] - 0.0999) < 0.003 and d['phase']['power_with_counter'] and d['checks']['phase_fit'] and d['checks']['counter_ticks'] and d['checks']['sampled_1000ms']"; then
  pass "window-accuracy on h100: counter period 99.9 ms found, power ticks with it, every window length checked"
else fail "window-accuracy h100 clocks: $(head -c 1500 "$tmp/win.json")"; fi
# The phase figures from tick times like the H200's (counter every 100.0 ms, power every 101.6 ms:
# a cycle of 6.35 s), with the read resolution of its 2.3 ms counter reads: found within 0.05 ms
# per tick and 2 ms; a drift 0.5 ms per tick wrong, or power ticks that are no clock, fail phase_fit.
if PYTHONPATH="$SRC/scripts" ${PYTHON:-$PY} - <<'PYEOF'
import random, sys
import gpu_check_window as w
r = random.Random(35)
ct = [0.0123 + 0.1 * k + r.uniform(-0.00115, 0.00115) for k in range(160)]
pt = [0.045 + 0.1016 * k + r.uniform(-0.0003, 0.0003) for k in range(157)]
c, p = w.period_fit(ct, 0.0023), w.period_fit(pt, 0.0006)
ph = w.phase_model(ct, pt, c["period_s"], p["period_s"], 16.0, 0.00115)
ok = (abs(ph["drift_ms_per_tick"] - 1.6) < 0.05 and abs(ph["phase_ms"] - 32.7) < 2 and abs(ph["cycle_s"] - 6.35) < 0.2
      and ph["cycles_covered"] >= 2 and ph["fit_ok"] and not ph["power_with_counter"])
bad = w.phase_model(ct, pt, c["period_s"], p["period_s"] + 0.0005, 16.0, 0.00115)
pt2 = sorted(0.1016 * k + r.uniform(0, 0.1) for k in range(157))
p2 = w.period_fit(pt2, 0.0006)
noclock = w.phase_model(ct, pt2, c["period_s"], p2["period_s"], 16.0, 0.00115)
print(ph, bad["fit_ok"], noclock["fit_ok"])
sys.exit(0 if ok and not bad["fit_ok"] and not noclock["fit_ok"] else 1)
PYEOF
then pass "window-accuracy's phase and drift from H200-like ticks (1.6 ms per tick, 6.35 s cycle); a wrong drift fails phase_fit"
else fail "window-accuracy phase model on synthetic H200 ticks"; fi
# A GPU whose power reads 20 % low: the sampled source's sub-tick energy is off, and its checks fail.
window_script=("${PYTHON:-$PY}" "$SRC/scripts/gpu_check_window.py" --gpu 1 --quick)
expect_check_fails "window-accuracy: power reading 20 % low (FAKE_NVML_LIE=power_scaled:0.8) fails the sampled checks" \
  "not d['ok'] and not d['checks']['sampled_50ms'] and not d['checks']['sampled_100ms']" --busy -- \
  PYTHONPATH="$SRC/python" ZEUS_SIM_HARDWARE=h100 FAKE_NVML_LIE=power_scaled:0.8 "${window_script[@]}"
# A counter that never moves: no reference, and every window check fails with counter_ticks.
expect_check_fails "window-accuracy: a frozen counter (FAKE_NVML_LIE=counter_frozen) fails counter_ticks, no reference" \
  "not d['checks']['counter_ticks'] and d['reference']['mean_power_w'] is None and not d['checks']['sampled_1000ms']" --busy -- \
  PYTHONPATH="$SRC/python" ZEUS_SIM_HARDWARE=h100 FAKE_NVML_LIE=counter_frozen "${window_script[@]}"
# check: a counter that skips a tick's energy disagrees with integrated power.
expect_check_fails "check: a counter that skips a tick (FAKE_NVML_LIE=counter_skips_tick) fails energy_agrees" \
  "d['gpus'][0]['checks']['energy_agrees'] is False" --busy -- \
  FAKE_NVML_LIE=counter_skips_tick ZEUS_SIM_HARDWARE=h100 "$ZEUS" gpus check --gpus 0 --duration-s 1.5 --json
# set-sm-clock and clock-latency: a clock read-back that never moves fails both.
expect_check_fails "set-sm-clock: a frozen clock read-back (FAKE_NVML_LIE=clock_frozen) fails the setting" \
  "d['gpus'][0]['settings'][0]['ok'] is False" --busy -- \
  FAKE_NVML_LIE=clock_frozen "$ZEUS" gpus set --gpus 0 --sm-clock mid --hold-s 0.3 --json
expect_check_fails "clock-latency: a frozen clock read-back (FAKE_NVML_LIE=clock_frozen) times out" \
  "d['gpus'][0]['timeouts'] >= 1" --busy -- \
  FAKE_NVML_LIE=clock_frozen "$ZEUS" gpus clock-latency --gpus 0 --changes 2 --timeout-s 0.3 --json
# plo: sized by the plan and by time; a frozen counter and a counter too slow for its windows fail.
if jcheck "$tmp/run/report.json" "(lambda r: r['optimizer_steps'] < r['step_cap'] and r['baseline']['time_s'] >= 2 and r['at_optimum']['time_s'] >= 2 and r['energy_saved_uncertainty_pct'] is not None and r['checks']['energy_saved_meaningful'] and r['checks']['slowdown_meaningful'] and r['checks']['slowdown_agrees_with_sweep'])([s for s in d['steps'] if s['step'] == 'plo'][0]['result'])"; then
  pass "plo: done within the plan's step count, baseline and optimum windows >= 2 s, figures with their uncertainty"
else fail "plo sizing: $(head -c 1500 "$tmp/run/plo.json")"; fi
if jcheck "$tmp/run/report.json" "(lambda r: len(r['confidence_runs']) == 2 and r['confidence_target'] == 0.95 and r['checks']['confidence_runs_done'] and r['checks']['confidence_reported'] and all(c['steps'] >= r['optimizer_runs'][0]['steps'] and 0 <= c['confidence'] <= 1 and isinstance(c['contenders_w'], list) for c in r['confidence_runs']))([s for s in d['steps'] if s['step'] == 'plo'][0]['result'])" &&
   grep -q "confidence mode 0.95, run 2: " "$tmp/run/plo.log" 2>/dev/null; then
  pass "plo: twice more in the confidence mode (0.95), each choice with its confidence and contenders"
else fail "plo confidence runs: $(head -c 1500 "$tmp/run/plo.json")"; fi
# plo_fails (lib.sh): the plo step with those variables exits 1, its JSON meets the check, its stderr has the text.
plo_fails "plo: a frozen counter (FAKE_NVML_LIE=counter_frozen) fails energy_measured and says 'not measured'" \
  "not d['checks']['energy_measured'] and not d['checks']['energy_saved_meaningful']" "energy saved not measured" \
  FAKE_NVML_LIE=counter_frozen
plo_fails "plo: a 2 s counter tick against 4 s windows makes energy saved meaningless, and the check fails" \
  "d['checks']['energy_measured'] and not d['checks']['energy_saved_meaningful'] and d['energy_saved_uncertainty_pct'] > 5" \
  "energy saved not measured" ZEUS_SIM_COUNTER_PERIOD_MS=2000
# A step cap below the optimizer's plan (what stopped both runs on the H200: a fixed 10,000 steps
# against ~17,000 planned): neither run is done, and no window ran at an optimum, so the energy
# saved and the slowdown are not measured (the H200's report printed -52.7 % and 1.178).
plo_fails "plo: a step cap below the plan fails optimizer_done and second_run_done, energy saved not measured" \
  "not d['checks']['optimizer_done'] and not d['checks']['second_run_done'] and not d['checks']['optimum_applied'] and d['optimal_power_limit_w'] is None and d['energy_saved_pct'] is None and d['slowdown'] is None and d['step_cap'] == 30 and 'did not choose' in d['energy_saved_note']" \
  "energy saved not measured, slowdown not measured.*FAILED: optimizer_done" ZEUS_GPU_CHECK_PLO_STEP_CAP=30
printf 'plo\tfailed\t%s\t-\n' "$tmp/fails.json" >"$tmp/cap.tsv" # the capped run's, kept by plo_fails
"$ZEUS" gpus report "$tmp/cap.tsv" -o "$tmp/cap.md" 2>/dev/null
if grep -q "Energy saved \*\*not measured: the optimizer did not choose" "$tmp/cap.md" &&
   grep -q "^| optimizer_done | \*\*FAIL\*\* |" "$tmp/cap.md"; then
  pass "report: an unfinished optimizer's energy saved reads 'not measured' with the reason, optimizer_done FAIL"
else fail "report of the capped plo run: $(grep -i "energy saved\|optimizer_done" "$tmp/cap.md")"; fi
# Work that runs 1.5 times slower after its first 250 steps (the baseline window is over by then;
# the optimum and the sweep come after): the slowdown puts that on the power limit, the sweep's
# windows (all slow) do not, and slowdown_agrees_with_sweep fails.
plo_fails "plo: work that slows down by itself after the baseline fails slowdown_agrees_with_sweep" \
  "not d['checks']['slowdown_agrees_with_sweep'] and d['slowdown'] > 1.15 and abs(d['sweep_slowdown'] - 1) < 0.1" \
  "FAILED: .*slowdown_agrees_with_sweep" ZEUS_GPU_CHECK_PLO_WORK="fake:$tmp/busy:0.02:250:1.5"
# One step of the baseline window (the 40th of the run) stalls for 3 s: the window's time no
# longer measures the work's speed, its step times' spread says so, and slowdown_meaningful fails.
plo_fails "plo: a 3 s stall in the baseline window fails slowdown_meaningful, 'slowdown not measured'" \
  "not d['checks']['slowdown_meaningful'] and d['slowdown_uncertainty'] > 0.05 and d['baseline']['step_time_sem_pct'] > 10" \
  "slowdown not measured" ZEUS_GPU_CHECK_PLO_WORK="fake:$tmp/busy:0.02:40-40:150"
# pfo: rounds of >= 1 s and >= 10 ticks, checked against the counter; a lying counter and a slow one fail.
if jcheck "$tmp/run/report.json" "[s for s in d['steps'] if s['step'] == 'pfo'][0]['status'] == 'skipped' or (lambda r: r['all_max_frequency']['round_s'] >= 1 and r['checks']['round_ticks'] and r['checks']['energy_agrees_with_counter'] and r['checks']['energy_saved_within_clocks'] and abs(r['plan']['energy_vs_counter_pct']) <= 5)([s for s in d['steps'] if s['step'] == 'pfo'][0]['result'])"; then
  pass "pfo: rounds of >= 1 s, the client's energy within 5 % of the counter, energy saved within what the clocks allow"
else fail "pfo sizing: $(head -c 1500 "$tmp/run/pfo.json" 2>/dev/null)"; fi
if jcheck "$tmp/run/report.json" "[s for s in d['steps'] if s['step'] == 'pfo'][0]['status'] != 'skipped'"; then
  pfo_script=("${PYTHON:-$PY}" "$SRC/scripts/gpu_check_pfo.py" --zeus "$ZEUS" --gpu 0 --quick)
  expect_check_fails "pfo: a counter that skips ticks (FAKE_NVML_LIE=counter_skips_tick) fails counter_ticks_complete, 'not measured'" \
    "not d['checks']['counter_ticks_complete'] and all(d[k]['counter_ticks_in_round'] < d[k]['counter_ticks_expected'] - 1.5 for k in ('all_max_frequency', 'plan'))" \
    --err "not measured" -- PYTHONPATH="$SRC/python" ZEUS_SIM_HARDWARE=h100 FAKE_NVML_LIE=counter_skips_tick "${pfo_script[@]}"
  # A counter whose gain drifts up (1 + 0.5 / s): the plan, measured later, reads more than the
  # maximum clock: an energy saved below 0 that the clocks do not allow.
  expect_check_fails "pfo: a counter that gains (FAKE_NVML_LIE=counter_gains:0.5) gives an energy saved below 0, and energy_saved_within_clocks fails" \
    "not d['checks']['energy_saved_within_clocks'] and d['energy_saved_pct'] < 0 and d['checks']['energy_agrees_with_counter']" \
    --no-err "every check passed" -- PYTHONPATH="$SRC/python" ZEUS_SIM_HARDWARE=h100 FAKE_NVML_LIE=counter_gains:0.5 "${pfo_script[@]}"
  expect_check_fails "pfo: rounds with fewer than 10 counter ticks fail round_ticks and say 'not measured'" \
    "not d['checks']['round_ticks'] and d['all_max_frequency']['counter_ticks_in_round'] < 10" \
    --err "energy saved not measured" --no-err "every check passed" -- \
    PYTHONPATH="$SRC/python" ZEUS_SIM_COUNTER_PERIOD_MS=2000 "${pfo_script[@]}"
  # energy_agrees_with_counter (issue 35): a counter whose changes show late, each by a delay drawn
  # anew (uniform in [0, 20) ms on a 10 ms tick; no energy lost). The script's polled counter,
  # interpolated at the round's ends, stays within 1 % of the energy drawn; the client's fit
  # (forced: this fake's counter is cheap to read, so auto reads around each instruction instead)
  # puts each increment in the interval it showed in, and its least squares over those jittered
  # intervals come out low: 11-20 % at the highest clock, 4-20 % for the plan (the lower of the two
  # at least 11 % in 26 runs, 13 % with a busy loop beside). The same runs without the lie agree
  # (within 0.4 %, once 2.2 %).
  for lie in none counter_late:20; do
    PYTHONPATH="$SRC/python" ZEUS_SIM_COUNTER_PERIOD_MS=10 ZEUS_PFO_INSTRUCTION_ENERGY=fit FAKE_NVML_LIE=${lie#none} \
      ${PYTHON:-$PY} "$SRC/scripts/gpu_check_pfo.py" --zeus "$ZEUS" --gpu 0 --quick >"$tmp/pfo-${lie%:*}.json" 2>"$tmp/pfo-${lie%:*}.err"
    echo "exit $?" >>"$tmp/pfo-${lie%:*}.err"
  done
  runs="(d['all_max_frequency'], d['plan'])"
  if jcheck "$tmp/pfo-none.json" "d['checks']['energy_agrees_with_counter'] and all(r['energy_fitted'] and abs(r['energy_vs_counter_pct']) <= 5 for r in $runs)" &&
     jcheck "$tmp/pfo-counter_late.json" "not d['checks']['energy_agrees_with_counter'] and all(r['energy_fitted'] for r in $runs) and min(r['energy_vs_counter_pct'] for r in $runs) < -10" &&
     grep -q "^exit 1$" "$tmp/pfo-counter_late.err" && grep -q "energy saved not measured" "$tmp/pfo-counter_late.err"; then
    pass "pfo: a counter whose changes show late (FAKE_NVML_LIE=counter_late:20) fails energy_agrees_with_counter (the fit > 10 % low), which passes without the lie"
  else fail "pfo with counter_late: $(tail -n 3 "$tmp/pfo-none.err" "$tmp/pfo-counter_late.err")"; fi
fi
# The hardware model the h100 run measured gives back h100's figures.
if jcheck "$tmp/nvcc-run/hardware-model.json" "abs(d['tick_s'] - 0.0999) < 0.003 and d['power_at_ticks'] is True and 0.0025 < d['energy_read_s'] < 0.0045 and d['max_power_limit_w'] == 300 and d['min_power_limit_w'] == 100 and d['max_clock_mhz'] == 1740 and d['clock_step_mhz'] == 15 and d['power_noise'] < 0.01 and 'clock_lock_call_s' in d and all(isinstance(v, (int, float)) for k, v in d.items() if k not in ('name', 'power_at_ticks'))"; then
  pass "gpu-check writes hardware-model.json: on h100 it gives back h100's tick, read cost, limits and clocks"
else fail "hardware-model.json: $(cat "$tmp/nvcc-run/hardware-model.json" 2>/dev/null) $(cat "$tmp/nvcc-run/hardware-model.log" 2>/dev/null)"; fi
ZEUS_GPU_BACKEND=sim ZEUS_SIM_HARDWARE=$tmp/nvcc-run/hardware-model.json "$ZEUS" gpus probe --calls 2 --json >"$tmp/model-probe.json" 2>"$tmp/model-probe.err"
rc=$?
if [ "$rc" = 0 ] && jcheck "$tmp/model-probe.json" "d['ok'] and d['gpus'][0]['power_limit_max_w'] == 300"; then
  pass "ZEUS_SIM_HARDWARE=<gpu-check's hardware-model.json> loads: zeus gpus probe runs on it"
elif grep -q "unknown field" "$tmp/model-probe.err"; then
  echo "SKIP: ZEUS_SIM_HARDWARE=hardware-model.json: this build's loader does not know the model's keys yet ($(tail -n 1 "$tmp/model-probe.err")); the loader for them is issue 35 item 1 on main"
else fail "ZEUS_SIM_HARDWARE=hardware-model.json: exit $rc: $(cat "$tmp/model-probe.err")"; fi
# h200 (two clocks whose phase drifts): the phase and its drift are found, gpu-check passes on it,
# and the model it writes loads and gives back the H200's clocks, limits and phase.
if ZEUS_GPU_BACKEND=sim ZEUS_SIM_HARDWARE=h200 "$ZEUS" gpus >/dev/null 2>&1; then
  touch "$tmp/busy"
  PYTHONPATH="$SRC/python" ZEUS_SIM_HARDWARE=h200 ${PYTHON:-$PY} "$SRC/scripts/gpu_check_window.py" --gpu 1 --quick \
    >"$tmp/win-h200.json" 2>"$tmp/win-h200.err"
  rc=$?
  rm -f "$tmp/busy"
  if [ "$rc" = 0 ] && jcheck "$tmp/win-h200.json" "d['phase'] is not None and not d['phase']['power_with_counter'] and 1.0 <= d['phase']['drift_ms_per_tick'] <= 2.5 and abs(d['phase']['power_period_s'] - 0.1016) < 0.0005 and abs(d['counter']['period_s'] - 0.1) < 0.0005 and d['checks']['phase_fit']"; then
    pass "window-accuracy on h200: counter 100.0 ms, power 101.6 ms, the phase drifting 1-2.5 ms per tick, every check passed"
  else fail "window-accuracy h200: exit $rc: $(cat "$tmp/win-h200.err")"; fi
  # Cut short of two phase cycles (6 s against a ~6.5 s cycle), a full run fails phase_cycles.
  expect_check_fails "window-accuracy on h200 cut to 6 s: fewer than two phase cycles fails phase_cycles" \
    "d['checks']['phase_cycles'] is False and d['phase']['cycles_covered'] < 2 and d['checks']['phase_fit']" --busy -- \
    PYTHONPATH="$SRC/python" ZEUS_SIM_HARDWARE=h200 "${PYTHON:-$PY}" "$SRC/scripts/gpu_check_window.py" --gpu 1 --min-s 6 --max-s 6
  # Power ticks that are no clock on the fake, not only in the synthetic tick lists above: each
  # change of the power shows 0-40 ms late (a delay drawn anew per change), so the ticks fall a
  # median ~14 ms from where the phase and drift put them (the honest run above: under 1 ms)
  # against a 5 ms bound, and phase_fit fails; the counter is honest and still ticks.
  expect_check_fails "window-accuracy on h200: power changes shown 0-40 ms late (FAKE_NVML_LIE=power_late:40) fail phase_fit" \
    "d['checks']['phase_fit'] is False and d['phase']['fit_median_error_s'] > 0.005 and d['checks']['counter_ticks']" --busy -- \
    PYTHONPATH="$SRC/python" ZEUS_SIM_HARDWARE=h200 FAKE_NVML_LIE=power_late:40 "${PYTHON:-$PY}" "$SRC/scripts/gpu_check_window.py" --gpu 1 --quick
  rm -f "$tmp/state"
  ZEUS_SIM_HARDWARE=h200 bash "$GC" --zeus "$ZEUS" --out "$tmp/h200-run" --quick >"$tmp/h200-run.out" 2>&1
  rc=$?
  # Every step passes on h200, pfo included: its energy_agrees_with_counter caught the Perseus
  # client's fitted per-iteration energy off the counter (-6 % to +80 %) while the client placed
  # each counter value at the instant power's tick (another clock on an H200); the client now takes
  # the counter's own ticks from the monitor's followers.
  if jcheck "$tmp/h200-run/report.json" "d['restored'] is True and all(s['status'] != 'failed' for s in d['steps'] if s['step'] != 'pfo')"; then
    pass "gpu-check --quick on the fake NVML with the h200 profile: every step passed (pfo: next)"
  else fail "gpu-check on h200: exit $rc: $(cat "$tmp/h200-run.out")"; fi
  if jcheck "$tmp/h200-run/report.json" "[s for s in d['steps'] if s['step'] == 'pfo'][0]['status'] in ('passed', 'skipped')"; then
    pass "gpu-check on h200: pfo passed (or skipped without the Perseus components)"
  else fail "gpu-check on h200, pfo: $(tail -n 3 "$tmp/h200-run/pfo.log")"; fi
  m=$tmp/h200-run/hardware-model.json
  if jcheck "$m" "d['min_power_limit_w'] == 200 and d['max_power_limit_w'] == 700 and d['max_clock_mhz'] == 1980 and d['min_clock_mhz'] == 345 and d['power_at_ticks'] is True and abs(d['power_tick_s'] - 0.1016) < 0.0005 and abs(d['tick_s'] - 0.1) < 0.0005 and 0 <= d['power_phase_s'] < 0.1 and 0.0015 < d['energy_read_s'] < 0.0035"; then
    pass "hardware-model.json on h200: limits, clocks, the counter's and the power's clocks, the counter read cost"
  else fail "hardware-model.json on h200: $(cat "$m" "$tmp/h200-run/hardware-model.log" 2>/dev/null)"; fi
  ZEUS_GPU_BACKEND=sim ZEUS_SIM_HARDWARE=$m "$ZEUS" gpus probe --calls 2 --json >"$tmp/h200-model-probe.json" 2>"$tmp/h200-model-probe.err"
  rc=$?
  if [ "$rc" = 0 ] && jcheck "$tmp/h200-model-probe.json" "d['ok'] and d['gpus'][0]['power_limit_min_w'] == 200 and d['gpus'][0]['power_limit_max_w'] == 700 and d['gpus'][0]['graphics_clocks_mhz'][0] == 1980"; then
    pass "ZEUS_SIM_HARDWARE=<the h200 run's hardware-model.json>: zeus gpus probe shows 200-700 W and 1980 MHz"
  else fail "probe on the h200 model: exit $rc: $(cat "$tmp/h200-model-probe.err") $(head -c 600 "$tmp/h200-model-probe.json")"; fi
  # Measured again on the model: the same clocks (its phase within 5 ms, its drift within 0.3 ms a tick).
  # Only the phase is checked here (phase_fit and the figures): the windows' accuracy on h200 is the
  # full run's above, and a quick run's worst 100 ms window went 2.06 % on a loaded machine.
  touch "$tmp/busy"
  PYTHONPATH="$SRC/python" ZEUS_SIM_HARDWARE=$m ${PYTHON:-$PY} "$SRC/scripts/gpu_check_window.py" --gpu 1 --quick \
    >"$tmp/win-model.json" 2>"$tmp/win-model.err"
  rc=$?
  rm -f "$tmp/busy"
  if { [ "$rc" = 0 ] || [ "$rc" = 1 ]; } && "$PY" -c "
import json, sys
a = json.load(open(sys.argv[1])); d = json.load(open(sys.argv[2])); b = d['phase']
sys.exit(0 if d['checks']['phase_fit'] and abs(b['drift_s_per_tick'] - (a['power_tick_s'] - a['tick_s'])) < 0.0003 and min(abs(b['phase_s'] - a['power_phase_s']), 0.1 - abs(b['phase_s'] - a['power_phase_s'])) < 0.005 else 1)" "$m" "$tmp/win-model.json"; then
    pass "the h200 model measured again gives back its phase and drift"
  else fail "window-accuracy on the h200 model: exit $rc: $(cat "$tmp/win-model.err")"; fi
else
  echo "SKIP: h200 and its model: this build has no ZEUS_SIM_HARDWARE=h200 profile (issue 35 item 1, on main)"
fi
# zeus gpus report: a bad manifest is a usage error naming the line.
printf 'probe\tmaybe\t-\tx\n' >"$tmp/bad.tsv"
expect_err_has "report: a bad manifest line is named" "line 1: expected" "$ZEUS" gpus report "$tmp/bad.tsv"
# make gpu-check against the fake NVML on its virtual clock (the fake's default): every step that
# waits in real time is skipped with the reason, none fails, and the run passes (issue 35).
rm -f "$tmp/state"
ZEUS_SIM_CLOCK=virtual ZEUS_SIM_HARDWARE=h200 bash "$GC" --zeus "$ZEUS" --out "$tmp/virt" --quick >"$tmp/virt.out" 2>&1
rc=$?
if [ "$rc" = 0 ] && jcheck "$tmp/virt/report.json" "(lambda st: all(st[n] == 'skipped' for n in ('check', 'set-sm-clock', 'clock-latency', 'window-accuracy', 'plo', 'pfo')) and 'failed' not in st.values())({s['step']: s['status'] for s in d['steps']})" &&
   grep -q "clock does not move with real time" "$tmp/virt.out"; then
  pass "gpu-check on the fake's virtual clock: the real-time steps skipped with the reason, the run passes"
else fail "gpu-check on the virtual clock: exit $rc: $(tail -n 20 "$tmp/virt.out")"; fi
finish
