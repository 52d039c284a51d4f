#!/usr/bin/env bash
# scripts/gpu-check.sh: proves zeus on the NVIDIA GPUs of this machine (`make gpu-check`).
# Runs the zeus CLI's GPU tools one after another, under a GPU load where one can be started,
# and writes a Markdown report and a JSON document (zeus gpus report). See docs/gpu-check.md.
set -uo pipefail

usage() {
  cat <<'EOF'
usage: scripts/gpu-check.sh [--out DIR] [--gpus LIST] [--quick] [--json] [--zeus PATH]

Checks every part of zeus that touches a GPU, on the NVIDIA GPUs of this machine, and writes
DIR/report.md and DIR/report.json. Steps, each reported as passed, failed or skipped:
  gpus-before     zeus gpus --json: what is there, and the settings to be back at the end
  probe           zeus gpus probe: every NVML reading, supported or not, value, latency
  load            starts a GPU load: a CUDA program built with nvcc, else PyTorch matrix
                  products; without either, the checks below run on an idle GPU (weak)
  check           zeus gpus check: energy counter against integrated power, power against
                  the limit, the counter's update period
  set-power-limit zeus gpus set --power-limit min: set, read back, restore
  set-sm-clock    zeus gpus set --sm-clock mid: lock, read the clock under load, unlock
  set-memory-clock  zeus gpus set --memory-clock min (not supported before Ampere)
  clock-latency   zeus gpus clock-latency: how soon a locked clock shows up under load
  window-accuracy windows of 50 ms to 1 s under the load, the raw counter difference beside the
                  sampled source, against a long reference (scripts/gpu_check_window.py)
  actuation-latency  how soon an SM clock lock and a power limit show in timed PyTorch kernels,
                  beside the NVML call's own time (scripts/gpu_check_actuation.py)
  plo             the power-limit optimizer on PyTorch work (scripts/gpu_check_plo.py):
                  profile, choose, apply, restore; energy saved and slowdown measured; a
                  second run on the same work and a clean sweep: do the choices agree
  pfo             the Perseus client with instruction hooks on PyTorch work against a local
                  zeus pfo-server (scripts/gpu_check_pfo.py): every instruction at the highest
                  clock, then a plan at 75 % of it; energy saved and slowdown measured
  gpus-after      zeus gpus --json again: every power limit must be back as it was
Then DIR/hardware-model.json: the hardware model measured (read costs, sensor periods and phase,
actuation latencies, limits and clocks), which ZEUS_SIM_HARDWARE=FILE loads (gpu_check_model.py).
Changing settings needs root or CAP_SYS_ADMIN. Every zeus command puts back what it changed,
on SIGINT and SIGTERM too; this script forwards both to the step that runs and stops the load.

Options:
  --out DIR     where the report and each step's JSON go (default: gpu-check-out)
  --gpus LIST   comma-separated GPU indices (default: every visible GPU)
  --quick       shorter steps (what `make check` runs against the fake NVML)
  --json        print the report's JSON document (DIR/report.json) on stdout at the end; the
                progress lines go to stderr
  --zeus PATH   the zeus binary (default: $ZEUS, else build/zeus, else zeus on PATH)

Exit status: 0 when every step passed or was skipped, 1 when one failed or a setting is not
back, 0 with a "no NVIDIA GPU" message when there is none (nothing can be checked), 2 for a
usage error, 128+N after signal N.

Environment: ZEUS_GPU_CHECK_LOAD (a shell command to use as the GPU load instead of the
automatic choice), ZEUS_GPU_CHECK_PLO_ETA (the optimizer step's eta knob, default 0.5),
ZEUS_GPU_BACKEND (nvml, the default, or amdsmi for AMD GPUs), ZEUS_NVML_LIBRARY /
ZEUS_AMDSMI_LIBRARY (another vendor library, such as the tests' fakes), CUDA_VISIBLE_DEVICES,
NVCC (default nvcc), PYTHON (default python3).
EOF
}

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
out=gpu-check-out
gpus=
quick=0
json=0
zeus=${ZEUS:-}
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --out=*) out=${1#--out=}; shift ;;
    --gpus) gpus=${2:?--gpus needs a list}; shift 2 ;;
    --gpus=*) gpus=${1#--gpus=}; shift ;;
    --quick) quick=1; shift ;;
    --json) json=1; shift ;;
    --zeus) zeus=${2:?--zeus needs a path}; shift 2 ;;
    --zeus=*) zeus=${1#--zeus=}; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpu-check: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [ -z "$zeus" ]; then
  if [ -x "$root/build/zeus" ]; then zeus=$root/build/zeus; else zeus=$(command -v zeus || true); fi
fi
[ -n "$zeus" ] && [ -x "$zeus" ] || { echo "gpu-check: no zeus binary (build it with 'make', or give --zeus)" >&2; exit 2; }
# The binding loads the libzeus built beside this zeus.
if [ -z "${ZEUSC_LIBRARY:-}" ] && [ -f "$(dirname "$zeus")/libzeus.so" ]; then
  export ZEUSC_LIBRARY=$(cd "$(dirname "$zeus")" && pwd)/libzeus.so
fi
PYTHON=${PYTHON:-python3}
NVCC=${NVCC:-nvcc}
export ZEUS_GPU_BACKEND=${ZEUS_GPU_BACKEND:-nvml}
# With --json the document is the only thing on stdout (fd 3); progress goes to stderr.
exec 3>&1
[ "$json" = 1 ] && exec 1>&2
emit_json() { [ "$json" = 1 ] && [ -f "$out/report.json" ] && cat "$out/report.json" >&3; }
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
manifest=$out/manifest.tsv
: >"$manifest"
gsel=()
[ -n "$gpus" ] && gsel=(--gpus "$gpus")
if [ "$quick" = 1 ]; then calls=20; dur=1; hold=0.5; changes=4; else calls=200; dur=10; hold=3; changes=20; fi

step_pid=
load_pid=
stopped=0
on_signal() {
  stopped=$1
  # SIGTERM whichever signal came: a background step of a non-interactive shell may ignore
  # SIGINT (Python keeps it ignored), and every step restores on SIGTERM.
  [ -n "$step_pid" ] && kill -TERM "$step_pid" 2>/dev/null
}
trap 'on_signal TERM' TERM
trap 'on_signal INT' INT
stop_load() {
  if [ -n "$load_pid" ]; then
    kill -TERM -- "-$load_pid" 2>/dev/null || kill -TERM "$load_pid" 2>/dev/null
    wait "$load_pid" 2>/dev/null
    load_pid=
  fi
}
trap 'stop_load' EXIT

record() { # step status json note
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$manifest"
  printf '%-17s %-8s %s\n' "$1" "$2" "$4"
}

# run_step NAME NOTE CMD...: runs a zeus command with --json into NAME.json (its messages into
# NAME.log), in the background so that a signal reaches this script at once and is forwarded.
run_step() {
  local name=$1 note=$2; shift 2
  [ "$stopped" = 0 ] || { record "$name" skipped - "not run: stopped by SIG$stopped"; return; }
  "$@" >"$out/$name.json" 2>"$out/$name.log" &
  step_pid=$!
  local rc
  while :; do
    wait "$step_pid"; rc=$?
    # wait returns early (> 128) when a trapped signal arrives; the step may still be restoring.
    kill -0 "$step_pid" 2>/dev/null || break
  done
  step_pid=
  local why
  why=$(grep -v '^$' "$out/$name.log" | tail -n 1)
  if [ "$rc" = 0 ]; then record "$name" passed "$out/$name.json" "$note"
  elif [ -s "$out/$name.json" ]; then record "$name" failed "$out/$name.json" "$note; exit $rc${why:+: $why}"
  else record "$name" failed - "exit $rc${why:+: $why}"
  fi
}

echo "gpu-check: $("$zeus" --version 2>/dev/null | head -n 1), report in $out"
# Is there a GPU at all?
if ! "$zeus" gpus --json >"$out/gpus-before.json" 2>"$out/gpus-before.log" ||
   ! grep -q '"uuid"' "$out/gpus-before.json"; then
  why=$(grep -o '"gpu_error": *"[^"]*"' "$out/gpus-before.json" 2>/dev/null | sed 's/"gpu_error": *"//; s/"$//')
  [ -n "$why" ] || why=$(grep -v '^$' "$out/gpus-before.log" 2>/dev/null | tail -n 1 | sed 's/^zeus gpus: //')
  echo "gpu-check: no NVIDIA GPU here${why:+ ($why)}: nothing was checked."
  echo "gpu-check: run it on a machine with an NVIDIA GPU and its driver (see docs/gpu-check.md);"
  echo "gpu-check: ZEUS_NVML_LIBRARY=<build>/fake_nvml/libnvidia-ml.so.1 runs it against the fake NVML."
  record gpus-before skipped - "no NVIDIA GPU${why:+: $why}"
  "$zeus" gpus report "$manifest" -o "$out/report.md" --json-out "$out/report.json" >/dev/null
  emit_json
  exit 0
fi
record gpus-before passed "$out/gpus-before.json" "GPUs and settings before the run"

run_step probe "every reading, $calls calls each" "$zeus" gpus probe "${gsel[@]}" --calls "$calls" --json

# The load: the user's command, else a CUDA program, else PyTorch, else none.
load_note=
start_load() {
  local cmd=
  if [ -n "${ZEUS_GPU_CHECK_LOAD:-}" ]; then
    cmd=$ZEUS_GPU_CHECK_LOAD; load_note="ZEUS_GPU_CHECK_LOAD: $cmd"
  elif command -v "$NVCC" >/dev/null 2>&1; then
    if "$NVCC" -O2 -o "$out/gpu_load" "$here/gpu_load.cu" >"$out/nvcc.log" 2>&1; then
      cmd="exec '$out/gpu_load' 3600"; load_note="CUDA program scripts/gpu_load.cu built with $NVCC"
    else
      load_note="nvcc failed (see $out/nvcc.log)"
    fi
  fi
  if [ -z "$cmd" ] && "$PYTHON" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
    cmd="exec '$PYTHON' '$here/gpu_load.py' 3600"; load_note="${load_note:+$load_note; }PyTorch matrix products (scripts/gpu_load.py)"
  fi
  if [ -z "$cmd" ]; then
    record load skipped - "${load_note:+$load_note; }neither nvcc nor a CUDA-enabled torch: the checks below run on an idle GPU, a weak test"
    return
  fi
  # Its own process group, so stop_load ends it and whatever it started.
  setsid bash -c "$cmd" >"$out/load.log" 2>&1 &
  load_pid=$!
  sleep 2
  if kill -0 "$load_pid" 2>/dev/null; then record load passed - "$load_note"; return; fi
  wait "$load_pid"
  local lrc=$? why
  load_pid=
  why=$(grep -v '^$' "$out/load.log" 2>/dev/null | tail -n 1)
  if [ "$lrc" = 77 ]; then
    # Built (a build machine with nvcc, or the fake NVML), but no GPU here it can run on.
    record load skipped - "$load_note, but it cannot run here${why:+: $why}; the checks below run on an idle GPU"
  else
    record load failed - "$load_note: it ended at once (exit $lrc${why:+: $why}; see $out/load.log)"
  fi
}
start_load

# Does the GPUs' clock move with real time? The fake NVML on its virtual clock does not (time moves
# only with simulated work): the steps that wait in real time for readings to move are skipped
# there with the reason, as the Python steps skip themselves. Unknown (no zeusc): they run.
virtual_why=$(PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" - 2>/dev/null <<'PY'
import time
try:
    from zeusc.device import get_gpus
    g = get_gpus()
    n0, r0 = g.devices.now(), time.perf_counter()
    time.sleep(0.05)
    rate = (g.devices.now() - n0) / (time.perf_counter() - r0)
except Exception:  # noqa: BLE001
    rate = 1.0
if not 0.5 < rate < 2:
    print(f"the GPUs' clock does not move with real time ({rate:.3f} s per second: the fake NVML on its "
          "virtual clock; ZEUS_SIM_CLOCK=wall runs this step): readings cannot move while it waits")
PY
)
# run_real_time_step NAME NOTE CMD...: run_step, or skipped with the reason on such a clock.
run_real_time_step() {
  if [ -n "$virtual_why" ]; then record "$1" skipped - "$virtual_why"; else run_step "$@"; fi
}
run_real_time_step check "readings over ${dur} s" "$zeus" gpus check "${gsel[@]}" --duration-s "$dur" --json
run_step set-power-limit "power limit to the minimum, held ${hold} s" \
  "$zeus" gpus set "${gsel[@]}" --power-limit min --hold-s "$hold" --json
run_real_time_step set-sm-clock "SM clock locked to the middle supported clock, held ${hold} s" \
  "$zeus" gpus set "${gsel[@]}" --sm-clock mid --hold-s "$hold" --json
run_step set-memory-clock "memory clock locked to the lowest supported clock, held ${hold} s" \
  "$zeus" gpus set "${gsel[@]}" --memory-clock min --hold-s "$hold" --json
run_real_time_step clock-latency "$changes SM clock changes" "$zeus" gpus clock-latency "${gsel[@]}" --changes "$changes" --json

# The optimizers on real work (need zeusc and a CUDA-enabled torch, or the tests'
# ZEUS_GPU_CHECK_PLO_WORK): a skip is exit 77 with the reason on stderr.
run_py_step() { # name note script args...
  local name=$1 note=$2 script=$3; shift 3
  [ "$stopped" = 0 ] || { record "$name" skipped - "not run: stopped by SIG$stopped"; return; }
  PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" "$here/$script" "$@" \
    >"$out/$name.json" 2>"$out/$name.log" &
  step_pid=$!
  local rc why
  while :; do wait "$step_pid"; rc=$?; kill -0 "$step_pid" 2>/dev/null || break; done
  step_pid=
  why=$(grep -v '^$' "$out/$name.log" | tail -n 1)
  case $rc in
    0) record "$name" passed "$out/$name.json" "$note${why:+: ${why#*: }}" ;;
    77) record "$name" skipped - "${why:-skipped}" ;;
    *) if [ -s "$out/$name.json" ]; then record "$name" failed "$out/$name.json" "exit $rc${why:+: $why}"
       else record "$name" failed - "exit $rc${why:+: $why}"; fi ;;
  esac
}
first_gpu=${gpus%%,*}
first_gpu=${first_gpu:-0}
q=()
[ "$quick" = 1 ] && q=(--quick)
# Under the load still running: window energy against a long reference, raw and sampled.
run_py_step window-accuracy "windows of 50 ms to 1 s against a long reference" gpu_check_window.py \
  --gpu "$first_gpu" "${q[@]}"
stop_load
# On an otherwise idle GPU: how soon a clock lock and a power limit show in timed kernels.
run_py_step actuation-latency "SM clock lock and power limit, seen in the work" gpu_check_actuation.py \
  --gpu "$first_gpu" "${q[@]}"
run_py_step plo "power-limit optimizer" gpu_check_plo.py ${gpus:+--gpus "$gpus"} "${q[@]}"
run_py_step pfo "Perseus client against zeus pfo-server" gpu_check_pfo.py --zeus "$zeus" \
  --gpu "${first_gpu}" "${q[@]}"

if "$zeus" gpus --json >"$out/gpus-after.json" 2>"$out/gpus-after.log"; then
  record gpus-after passed "$out/gpus-after.json" "GPUs and settings after the run"
else
  record gpus-after failed - "zeus gpus failed: $(tail -n 1 "$out/gpus-after.log")"
fi

# The hardware model this run measured, for ZEUS_SIM_HARDWARE=FILE (scripts/gpu_check_model.py).
if "$PYTHON" "$here/gpu_check_model.py" "$out" --gpu "$first_gpu" >/dev/null 2>"$out/hardware-model.log"; then
  echo "gpu-check: $(tail -n 1 "$out/hardware-model.log" | sed 's/^gpu_check_model: //')"
else
  echo "gpu-check: no hardware model written: $(tail -n 1 "$out/hardware-model.log")"
fi

"$zeus" gpus report "$manifest" -o "$out/report.md" --json-out "$out/report.json"
rc=$?
emit_json
if [ "$stopped" != 0 ]; then
  echo "gpu-check: stopped by SIG$stopped; settings were put back by the step that ran (see $out/report.md)"
  [ "$stopped" = INT ] && exit 130
  exit 143
fi
if [ $rc = 0 ]; then echo "gpu-check: PASSED (report: $out/report.md)"; else echo "gpu-check: FAILED (report: $out/report.md)"; fi
exit $rc
