#!/usr/bin/env bash
# End-to-end: zeus monitor energy on an NVIDIA Jetson played by a fake sysfs tree under
# ZEUS_JETSON_ROOT (the newer kernels' hwmon layout). The measured command itself changes the
# GPU rail's power halfway through (rewriting the file in place, as the INA3221 driver's value
# changes), so the report must follow the power while the command runs, not read it at the ends.
set -u
. "$(dirname "$0")/lib.sh"

export ZEUS_GPU_BACKEND=none ZEUS_RAPL_ROOT=/nonexistent-rapl-root ZEUS_LOG_LEVEL=warn
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
hw="$tmp/sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon2"
mkdir -p "$hw"
printf 'VDD_IN\n' >"$hw/in1_label"
printf '%012.3f\n' 3000 >"$hw/power1_input"          # total: 3 W, a power file
printf 'VDD_CPU_CV\n' >"$hw/in2_label"
printf '5000\n' >"$hw/in2_input"                       # CPU: 5 V x 200 mA = 1 W
printf '200\n' >"$hw/curr2_input"
printf 'GPU\n' >"$hw/in3_label"
printf '%012.3f\n' 2000 >"$hw/power3_input"          # GPU: 2 W, then 6 W
# In place (1<>: no truncation), at a fixed width: the monitor never reads a torn number.
step='sleep 0.4; printf "%012.3f\n" 6000 1<>"$1"; sleep 0.4'

if ZEUS_JETSON_ROOT="$tmp/sys" "$ZEUS" monitor energy --json -- bash -c "$step" _ "$hw/power3_input" \
     >"$tmp/energy.json" 2>"$tmp/energy.err" && python3 - "$tmp/energy.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
soc, t = doc["soc_energy_j"], doc["time_s"]
assert set(soc) == {"cpu", "gpu", "total"}, doc
assert abs(soc["total"] - 3.0 * t) < 0.03 * 3.0 * t, doc        # constant 3 W
assert abs(soc["cpu"] - 1.0 * t) < 0.03 * 1.0 * t, doc          # 5000 mV x 200 mA
# 2 W for ~0.4 s, then 6 W for ~0.4 s: ~3.2 J; ends-only readings would give 2.4 J or 4.8 J.
assert 2.7 < soc["gpu"] < 3.9, doc
assert abs(soc["gpu"] - (2.0 * 0.4 + 6.0 * (t - 0.4))) < 0.35, doc
assert doc["total_energy_j"] == 0, doc                          # the rails are in no total
assert doc["gpu_energy_j"] == {} and doc["cpu_energy_j"] == {}, doc
PY
then pass "monitor energy --json reports the rails' soc_energy_j integrated while CMD changes them"
else fail "monitor energy --json reports the rails' soc_energy_j integrated while CMD changes them"
  cat "$tmp/energy.json" "$tmp/energy.err"; fi

printf '%012.3f\n' 2000 >"$hw/power3_input"
ZEUS_JETSON_ROOT="$tmp/sys" "$ZEUS" monitor energy -- sleep 0.2 2>"$tmp/text.err"
if grep -Eq '^  Jetson total rail \(board input\): +0\.[56][0-9]{2} J \(not in the total\)$' "$tmp/text.err" &&
   grep -Eq '^  Jetson CPU rail: +0\.[12][0-9]{2} J' "$tmp/text.err" &&
   grep -Eq '^  Jetson GPU rail: +0\.[34][0-9]{2} J' "$tmp/text.err" && ! grep -q "no GPU or CPU package" "$tmp/text.err"; then
  pass "monitor energy's text lists the Jetson rails"
else fail "monitor energy's text lists the Jetson rails"; cat "$tmp/text.err"; fi

# zeus gpus lists the rails with their power, files and strategy, and a Jetson without NVML is
# something to measure (exit 0).
if ZEUS_JETSON_ROOT="$tmp/sys" "$ZEUS" gpus --json >"$tmp/gpus.json" 2>/dev/null && python3 - "$tmp/gpus.json" "$hw" <<'PY'
import json, sys
doc, hw = json.load(open(sys.argv[1])), sys.argv[2]
soc = doc["soc"]
assert soc["kind"] == "jetson" and soc["error"] is None, soc
r = {x["rail"]: x for x in soc["rails"]}
assert set(r) == {"cpu", "gpu", "total"}, soc
assert r["total"] == {"rail": "total", "label": "VDD_IN", "direct": True, "power_path": hw + "/power1_input",
                      "voltage_path": None, "current_path": None, "power_w": 3.0}, r["total"]
assert r["cpu"]["direct"] is False and r["cpu"]["current_path"] == hw + "/curr2_input", r["cpu"]
assert r["cpu"]["power_w"] == 1.0 and r["gpu"]["power_w"] == 2.0, soc
PY
then pass "gpus --json lists the Jetson's rails"
else fail "gpus --json lists the Jetson's rails"; cat "$tmp/gpus.json"; fi
expect_out_has "gpus lists the rails in words" "^  total VDD_IN: 3.000 W \\(" env ZEUS_JETSON_ROOT="$tmp/sys" "$ZEUS" gpus

# A rail file that is no number: the monitor says which, and measures without the rails.
printf 'n/a\n' >"$hw/power1_input"
expect_err_has "an unreadable rail is named in a warning" "$hw/power1_input' holds 'n/a': expected a decimal number" \
  env ZEUS_JETSON_ROOT="$tmp/sys" "$ZEUS" monitor energy -- true

# Off a Jetson (no ZEUS_JETSON_ROOT, not aarch64 with tegra files): no soc_energy_j at all.
if [ "$(uname -m)" != aarch64 ] || [ ! -e /etc/nv_tegra_release ]; then
  if "$ZEUS" monitor energy --json -- true 2>/dev/null | python3 -c 'import json,sys; assert "soc_energy_j" not in json.load(sys.stdin)'
  then pass "no soc_energy_j off a Jetson"; else fail "no soc_energy_j off a Jetson"; fi
  if "$ZEUS" gpus --json 2>/dev/null | python3 -c 'import json,sys; assert json.load(sys.stdin)["soc"] is None'
  then pass "gpus --json says soc null off a Jetson"; else fail "gpus --json says soc null off a Jetson"; fi
fi
finish
