#!/usr/bin/env bash
# Unprivileged clients through a root zeus daemon: the power-limit optimizer runs as nobody (its
# own NVML cannot change anything: its setters are made to fail with NO_PERMISSION, and its own
# setter log must stay empty), `zeus gpus reset` works as nobody, RAPL counters readable by root
# only reach nobody through the daemon; and a daemon started as nobody refuses the root-only
# groups, saying which privilege they need. Needs root (to drop to nobody with setpriv).
set -uo pipefail
. "$(dirname "$0")/daemon_common.bash"
[ "$(id -u)" = 0 ] || { echo "SKIPPED: needs root to run clients as nobody"; exit 77; }
command -v setpriv >/dev/null || { echo "SKIPPED: setpriv (util-linux) is not installed"; exit 77; }
group=$(id -gn nobody 2>/dev/null) || { echo "SKIPPED: no user nobody"; exit 77; }
as_nobody() { setpriv --reuid=nobody --regid="$group" --clear-groups --inh-caps=-all -- "$@"; }
# Everything nobody runs must be reachable: the build tree and the fake library.
as_nobody test -x "$CLIENT" -a -r "$FAKE_NVML" || { echo "SKIPPED: nobody cannot read the build tree"; exit 77; }

# A powercap tree whose counters only root may read (as on kernels since CVE-2020-8694).
rapl=$tmp/powercap
mkdir -p "$rapl/intel-rapl:0" "$rapl/intel-rapl:0:0" "$rapl/intel-rapl:1"   # flat, as /sys/class/powercap
echo 123456789 >"$rapl/intel-rapl:0/energy_uj"; echo 262143328850 >"$rapl/intel-rapl:0/max_energy_range_uj"
echo dram >"$rapl/intel-rapl:0:0/name"; echo 7000000 >"$rapl/intel-rapl:0:0/energy_uj"
echo 42000000 >"$rapl/intel-rapl:1/energy_uj"
chmod 0400 "$rapl"/intel-rapl:*/energy_uj "$rapl"/intel-rapl:0:0/energy_uj
chmod -R a+rX "$rapl"; chmod 0400 "$rapl"/intel-rapl:*/energy_uj "$rapl"/intel-rapl:0:0/energy_uj
export ZEUS_RAPL_ROOT=$rapl

# ---- a daemon as nobody refuses what it cannot serve
as_nobody "$ZEUS" daemon serve --socket-path "$tmp/nobody.sock" --no-state-file 2>"$tmp/err" && die "started gpu-control as nobody"
grep -q "gpu-control needs root or CAP_SYS_ADMIN" "$tmp/err" || die "refusal message: $(cat "$tmp/err")"
as_nobody "$ZEUS" daemon serve --socket-path "$tmp/nobody.sock" --no-state-file --enable gpu-read,cpu-read 2>"$tmp/err" &&
  die "started cpu-read as nobody"
grep -q "cpu-read needs root or CAP_DAC_READ_SEARCH: 2 RAPL energy counters" "$tmp/err" || die "refusal message: $(cat "$tmp/err")"
echo "ok - a daemon started as nobody refuses gpu-control and cpu-read, saying which privilege they need"

start_daemon --socket-permissions 666
[ "$(stat -c %a "$SOCK")" = 666 ] || die "socket mode is $(stat -c %a "$SOCK")"
# ZEUS_PLO_PROFILING=original: the client's steps run in real time and jitter, so robust profiling
# (docs/plo.md) would measure some limits again; this checks the daemon's path on the original's.
nobody_env=(env ZEUSD_SOCK_PATH="$SOCK" FAKE_NVML_LOG="$tmp/client-nvml.log" ZEUS_PLO_PROFILING=original
            FAKE_NVML_INJECT="nvmlDeviceSetPowerManagementLimit:NO_PERMISSION;nvmlDeviceSetGpuLockedClocks:NO_PERMISSION")

# ---- the power-limit optimizer as nobody
as_nobody "${nobody_env[@]}" "$CLIENT" plo >"$tmp/plo.out" 2>"$tmp/plo.err" || die "the optimizer failed as nobody: $(cat "$tmp/plo.err")"
opt=$(sed -n 's/^optimal \([0-9]*\)$/\1/p' "$tmp/plo.out")
[ -n "$opt" ] || die "no optimum printed: $(cat "$tmp/plo.out")"
for g in 0 1; do
  for w in 275 250 225 200 175 150 125 100; do
    [ "$(lines "$(pl_line $g ${w}000)")" -ge 1 ] || die "GPU $g was never profiled at $w W"
  done
  seq=$(grep "^nvmlDeviceSetPowerManagementLimit $g " "$LOG" | awk '{print $3}' | tr '\n' ' ')
  case "$seq" in
    # The optimizer's first change at open sets the maximum, 300 W, on every GPU (as the original
    # does, whatever the GPU holds), which NVML is not asked to write, since the GPUs hold it (as
    # the original's NVML class); then each limit is profiled, the optimum is applied (no call
    # when it is the 100 W just profiled), and 300 W is given back at the end.
    "275000 250000 225000 200000 175000 150000 125000 100000 ${opt}000 300000 ") ;;
    "275000 250000 225000 200000 175000 150000 125000 100000 300000 ") # the optimum was 100 W or 300 W
      [ "$opt" = 100 ] || [ "$opt" = 300 ] || die "GPU $g: optimum $opt W never applied";;
    *) die "GPU $g setter sequence: $seq (optimum $opt W)";;
  esac
done
grep -qx "nvmlDeviceSetPersistenceMode 0 0 -> 0" "$LOG" || die "persistence mode was not given back"
[ -e "$tmp/client-nvml.log" ] && die "the unprivileged process called an NVML setter itself: $(cat "$tmp/client-nvml.log")"
echo "ok - the optimizer ran as nobody: every limit 300..100 W profiled, ${opt} W applied, 300 W back at the end"

# ---- zeus gpus reset as nobody, after a crash left GPU 1 low
post "/gpu/set_power_limit?gpu_ids=1&power_limit_mw=150000&persist=true" >/dev/null
as_nobody "${nobody_env[@]}" "$ZEUS" gpus reset --gpus 1 >"$tmp/reset.out" 2>"$tmp/reset.err" || die "reset failed: $(cat "$tmp/reset.err")"
grep -q "GPU 1: power limit reset to 300.0 W" "$tmp/reset.out" || die "reset output: $(cat "$tmp/reset.out")"
sleep 0.3
[ "$(limit_of 1)" = 300000 ] || die "GPU 1 is at $(limit_of 1) mW after the reset"
echo "ok - zeus gpus reset as nobody, kept after it exits"

# ---- RAPL through the daemon
as_nobody "${nobody_env[@]}" "$CLIENT" cpu >"$tmp/cpu.out" 2>"$tmp/cpu.err" || die "cpu: $(cat "$tmp/cpu.err")"
grep -qx "cpus 2" "$tmp/cpu.out" && grep -qx "cpu 0 energy_mj 123456 dram yes" "$tmp/cpu.out" &&
  grep -qx "cpu 1 energy_mj 42000 dram no" "$tmp/cpu.out" && grep -qx "window cpus 2" "$tmp/cpu.out" ||
  die "CPU energy as nobody: $(cat "$tmp/cpu.out")"
as_nobody env -u ZEUSD_SOCK_PATH "$CLIENT" cpu >"$tmp/cpu.out" 2>&1
grep -qx "cpus 0" "$tmp/cpu.out" || die "nobody read RAPL without the daemon: $(cat "$tmp/cpu.out")"
echo "ok - root-only RAPL counters reach nobody through the daemon (and only through it)"
kill -TERM "$DAEMON"; wait "$DAEMON"
