#!/usr/bin/env bash
# End-to-end: the zeus CLI on AMD GPUs as the fake libamd_smi.so plays two MI300X
# (ZEUS_GPU_BACKEND=amdsmi, ZEUS_SIM_HARDWARE=mi300x): zeus gpus lists them, zeus monitor energy
# measures their idle 190 W, gpus check/probe/set work through amdsmi (caps in microwatts, clock
# ranges, resets through the performance level, all logged by the fake), the exporter reports
# them, the zeus daemon serves them, and the backend is chosen by itself where NVML does not load.
set -u
. "$(dirname "$0")/lib.sh"

if [ -z "${FAKE_AMDSMI:-}" ] || [ ! -f "$FAKE_AMDSMI" ]; then
  echo "skip - no fake amdsmi in this build"
  exit 77
fi
command -v python3 >/dev/null || { echo "skip - python3 is needed to read JSON"; exit 77; }
export ZEUS_GPU_BACKEND=amdsmi ZEUS_AMDSMI_LIBRARY="$FAKE_AMDSMI" ZEUS_SIM_HARDWARE=mi300x ZEUS_SIM_GPUS=2
export ZEUS_SIM_CLOCK=wall ZEUS_RAPL_ROOT=/nonexistent-rapl-root ZEUS_LOG_LEVEL=warn
unset ZEUSD_SOCK_PATH ZEUSD_HOST_PORT
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export FAKE_AMDSMI_LOG="$tmp/amdsmi.log"

# zeus gpus: both MI300X with their caps (uW in amdsmi) in watts.
expect_out_has "gpus names the backend" "^backend: amdsmi, 2 visible GPUs" "$ZEUS" gpus
expect_out_has "gpus names the MI300X" "^GPU 1: AMD Instinct MI300X" "$ZEUS" gpus
if "$ZEUS" gpus --json >"$tmp/gpus.json" 2>"$tmp/gpus.err" && python3 - "$tmp/gpus.json" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["backend"] == "amdsmi", doc
assert [g["name"] for g in doc["gpus"]] == ["AMD Instinct MI300X"] * 2, doc
for g in doc["gpus"]:
    assert (g["power_limit_min_w"], g["power_limit_max_w"], g["power_limit_default_w"], g["power_limit_w"]) == (400, 750, 750, 750), g
    assert g["graphics_clocks_mhz"] == [2100, 500], g
    assert g["total_energy_supported"] is True and g["power_scope"] == "gpu", g
EOF
then pass "gpus --json: names, 400-750 W caps, GFX range, counter"
else fail "gpus --json: names, 400-750 W caps, GFX range, counter"; cat "$tmp/gpus.json" "$tmp/gpus.err"; fi

# zeus monitor energy: the counter (ticks x 15.259 uJ) over the window, about 190 W x the time.
if "$ZEUS" monitor energy --json -- sleep 0.5 >"$tmp/energy.json" 2>/dev/null && python3 - "$tmp/energy.json" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
e = doc["gpu_energy_j"]
assert set(e) == {"0", "1"}, doc
for j in e.values():
    w = j / doc["time_s"]
    assert abs(w - 190) < 190 * 0.05, (w, doc)   # 10 ms counter ticks over a 0.5 s window
EOF
then pass "monitor energy --json measures the MI300X's 190 W"
else fail "monitor energy --json measures the MI300X's 190 W"; cat "$tmp/energy.json"; fi

# zeus gpus check: the counter agrees with integrated socket power.
if "$ZEUS" gpus check --duration-s 1 --json >"$tmp/check.json" 2>/dev/null && python3 - "$tmp/check.json" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
for g in doc["gpus"]:
    assert g["checks"] == {"counter_monotonic": True, "energy_agrees": True, "power_within_limit": True}, g
    assert abs(g["power"]["instant_mean_w"] - 190) < 2, g
assert doc["ok"] is True, doc
EOF
then pass "gpus check on MI300X: energy agrees with power"
else fail "gpus check on MI300X: energy agrees with power"; cat "$tmp/check.json"; fi

# zeus gpus probe: every reading the backend has answers; persistence mode is not AMD's.
if "$ZEUS" gpus probe --calls 5 --json >"$tmp/probe.json" 2>/dev/null && python3 - "$tmp/probe.json" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["backend"] == "amdsmi" and doc["library_version"] == "24.7.0.0", doc
calls = {c["call"]: c for c in doc["gpus"][0]["calls"]}
for name in ("name", "uuid", "total_energy", "temperature", "power_limit"):
    hits = [c for k, c in calls.items() if k.startswith(name)]
    assert hits and all(c["supported"] for c in hits), (name, list(calls))
EOF
then pass "gpus probe answers every reading amdsmi has"
else fail "gpus probe answers every reading amdsmi has"; head -c 3000 "$tmp/probe.json"; fi

# zeus gpus set: the cap in microwatts, the GFX lock as a clock range, both put back.
: >"$FAKE_AMDSMI_LOG"
if "$ZEUS" gpus set --gpus 0 --power-limit 500 --sm-clock min --hold-s 0.2 --json >"$tmp/set.json" 2>/dev/null &&
   python3 - "$tmp/set.json" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
g = doc["gpus"][0]
assert g["ok"] is True and g["after"]["restored"] is True, g
got = {s["setting"]: s for s in g["settings"]}
assert got["power_limit"]["read_back_w"] == 500, got
assert got["sm_clock"]["read_back_mhz"] == 500, got
EOF
then pass "gpus set: 500 W and the lowest GFX clock read back, then restored"
else fail "gpus set: 500 W and the lowest GFX clock read back, then restored"; cat "$tmp/set.json"; fi
want='amdsmi_set_power_cap 0 0 500000000 -> 0
amdsmi_set_gpu_clk_range 0 500 500 0 -> 0
amdsmi_set_gpu_perf_level 0 0 -> 0
amdsmi_set_power_cap 0 0 750000000 -> 0'
if [ "$(cat "$FAKE_AMDSMI_LOG")" = "$want" ]; then pass "gpus set went through amdsmi in microwatts and reset by perf level"
else fail "gpus set went through amdsmi in microwatts and reset by perf level"; cat "$FAKE_AMDSMI_LOG"; fi

# A call amdsmi refuses: the report names the status and the call, and the command fails.
FAKE_AMDSMI_INJECT=amdsmi_set_power_cap:NO_PERM expect_code "a refused cap fails gpus set" 1 \
  "$ZEUS" gpus set --gpus 0 --power-limit 500 --hold-s 0
FAKE_AMDSMI_INJECT=amdsmi_set_power_cap:NO_PERM expect_out_has "a refused cap names the status and the call" \
  "amdsmi AMDSMI_STATUS_NO_PERM .* \\(amdsmi_set_power_cap\\): this operation needs root" \
  "$ZEUS" gpus set --gpus 0 --power-limit 500 --hold-s 0

# The exporter: the MI300X's counter and power.
if zeus_has exporter; then
  if "$ZEUS" exporter --once >"$tmp/metrics.txt" 2>/dev/null &&
     grep -q '^zeus_gpu_info{gpu="1",.*name="AMD Instinct MI300X",energy_source="counter"' "$tmp/metrics.txt" &&
     grep -Eq '^zeus_gpu_power_limit_max_watts\{gpu="0".*\} 750$' "$tmp/metrics.txt" &&
     grep -Eq '^zeus_gpu_power_watts\{gpu="0".*\} 1(89|90|91)$' "$tmp/metrics.txt"; then
    pass "exporter --once reports the MI300X"
  else fail "exporter --once reports the MI300X"; head -30 "$tmp/metrics.txt"; fi
else skip_part "zeus exporter"; fi

# The zeus daemon serving the MI300X: a client without privilege sets them through it.
if zeus_has daemon; then
  mkdir -p "$tmp/run"
  : >"$FAKE_AMDSMI_LOG"
  rm -f "$tmp/daemon.log"  # not the last daemon's "serve: ready" (the start below truncates it late)
  "$ZEUS" daemon serve --log-level info --socket-path "$tmp/run/zeusd.sock" --state-file "$tmp/run/state.json" \
    2>"$tmp/daemon.log" &
  daemon=$!
  for _ in $(seq 100); do grep -q "serve: ready" "$tmp/daemon.log" 2>/dev/null && break; sleep 0.05; done
  if grep -q "serving 2 GPUs (amdsmi)" "$tmp/daemon.log"; then pass "the daemon serves the amdsmi GPUs"
  else fail "the daemon serves the amdsmi GPUs"; cat "$tmp/daemon.log"; fi
  expect_ok "gpus set through the daemon" env -u ZEUS_GPU_BACKEND ZEUSD_SOCK_PATH="$tmp/run/zeusd.sock" \
    "$ZEUS" gpus set --gpus 1 --power-limit 450 --hold-s 0.2
  kill "$daemon" 2>/dev/null
  wait "$daemon" 2>/dev/null
  want='amdsmi_set_power_cap 1 0 450000000 -> 0
amdsmi_set_power_cap 1 0 750000000 -> 0'
  if [ "$(cat "$FAKE_AMDSMI_LOG")" = "$want" ]; then pass "the daemon set the cap through amdsmi and put it back"
  else fail "the daemon set the cap through amdsmi and put it back"; cat "$FAKE_AMDSMI_LOG"; fi

  # amdsmi+zeusd between two processes that number the GPUs differently: the client's HIP order
  # (KFD nodes 2,1: HIP 0 is amd-smi's GPU 1) against the daemon's amd-smi order. The client reads
  # locally and sends the cap and the clock lock to the daemon's GPU at the same PCI address; the
  # daemon's fake logs them, the client's logs nothing.
  : >"$FAKE_AMDSMI_LOG"
  rm -f "$tmp/daemon.log"  # not the last daemon's "serve: ready" (the start below truncates it late)
  FAKE_AMDSMI_KFD_NODES= "$ZEUS" daemon serve --log-level info --socket-path "$tmp/run/zeusd.sock" \
    --state-file "$tmp/run/state.json" 2>"$tmp/daemon.log" &
  daemon=$!
  for _ in $(seq 100); do grep -q "serve: ready" "$tmp/daemon.log" 2>/dev/null && break; sleep 0.05; done
  expect_out_has "the client is amdsmi+zeusd" "^backend: amdsmi\+zeusd, 2 visible GPUs" \
    env ZEUSD_SOCK_PATH="$tmp/run/zeusd.sock" FAKE_AMDSMI_KFD_NODES=2,1 FAKE_AMDSMI_LOG="$tmp/client.log" \
    "$ZEUS" gpus
  client=${ZEUS_BUILD_DIR:-}/tests/daemon_test_client
  if [ -x "$client" ]; then
    expect_out_has "a client in another HIP order sets GPU 0 through the daemon" "^locked" \
      env ZEUSD_SOCK_PATH="$tmp/run/zeusd.sock" FAKE_AMDSMI_KFD_NODES=2,1 FAKE_AMDSMI_LOG="$tmp/client.log" \
      "$client" lock 0 1200 450000
    want='amdsmi_set_power_cap 1 0 450000000 -> 0
amdsmi_set_gpu_clk_range 1 1200 1200 0 -> 0
amdsmi_set_power_cap 1 0 750000000 -> 0
amdsmi_set_gpu_perf_level 1 0 -> 0'
    if [ "$(cat "$FAKE_AMDSMI_LOG")" = "$want" ] && [ ! -s "$tmp/client.log" ]; then
      pass "the settings of HIP GPU 0 land on the daemon's GPU 1 and come back through it"
    else fail "the settings of HIP GPU 0 land on the daemon's GPU 1 and come back through it"
      echo "daemon:"; cat "$FAKE_AMDSMI_LOG"; echo "client:"; cat "$tmp/client.log"; fi
  else skip_part "tests/daemon_test_client"; fi
  kill "$daemon" 2>/dev/null
  wait "$daemon" 2>/dev/null
  # A daemon whose GPUs sit at one address: the client refuses, naming it and the daemon's GPUs.
  rm -f "$tmp/daemon.log"  # not the last daemon's "serve: ready" (the start below truncates it late)
  FAKE_AMDSMI_BDFS=0000:01:00.0,0000:01:00.0 "$ZEUS" daemon serve --log-level info \
    --socket-path "$tmp/run/zeusd.sock" --state-file "$tmp/run/state.json" 2>"$tmp/daemon.log" &
  daemon=$!
  for _ in $(seq 100); do grep -q "serve: ready" "$tmp/daemon.log" 2>/dev/null && break; sleep 0.05; done
  expect_err_has "two daemon GPUs at one PCI address are refused" \
    "HIP GPU 0 has PCI address 0000:01:00.0, which matches more than one GPU on the zeus daemon" \
    env ZEUSD_SOCK_PATH="$tmp/run/zeusd.sock" "$ZEUS" gpus set --gpus 0 --power-limit 450
  kill "$daemon" 2>/dev/null
  wait "$daemon" 2>/dev/null
else skip_part "zeus daemon"; fi

# Chosen by itself: NVML does not load here, amdsmi does and lists GPUs.
ZEUS_GPU_BACKEND= ZEUS_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 \
  expect_out_has "without ZEUS_GPU_BACKEND amdsmi is chosen after NVML" "^backend: amdsmi, 2 visible GPUs" "$ZEUS" gpus
ZEUS_GPU_BACKEND= ZEUS_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 ZEUS_AMDSMI_LIBRARY=/nonexistent/libamd_smi.so \
  expect_out_has "neither library: no GPU" "^backend: none" "$ZEUS" gpus
# Asked for by name without the library: the error names it.
ZEUS_AMDSMI_LIBRARY=/nonexistent/libamd_smi.so expect_err_has "amdsmi asked for but absent is named" \
  "cannot load the amdsmi library '/nonexistent/libamd_smi.so'" "$ZEUS" gpus

finish
