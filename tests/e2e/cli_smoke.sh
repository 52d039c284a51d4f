#!/usr/bin/env bash
# End-to-end: the zeus CLI on the simulated GPU (help, version, gpus, monitor, bad input).
set -u
. "$(dirname "$0")/lib.sh"

export ZEUS_GPU_BACKEND=sim ZEUS_SIM_GPUS=2
# No CPU package unless a test builds a fake RAPL tree: the figures below are the GPUs' alone.
export ZEUS_RAPL_ROOT=/nonexistent-rapl-root

# --version and --help on every subcommand
expect_ok "version" "$ZEUS" --version
expect_out_has "version string" "zeus [0-9]+\.[0-9]+\.[0-9]+" "$ZEUS" --version
for sub in gpus monitor; do
  expect_ok "$sub --help" "$ZEUS" $sub --help
  expect_out_has "$sub --help has an example" "Example" "$ZEUS" $sub --help
  expect_out_has "$sub --help names the environment" "ZEUS_GPU_BACKEND" "$ZEUS" $sub --help
done
expect_ok "help gpus" "$ZEUS" help gpus
expect_code "unknown command" 2 "$ZEUS" frobnicate
expect_err_has "unknown command is named" "unknown command 'frobnicate'" "$ZEUS" frobnicate
expect_err_has "misspelled --version: did you mean" "unknown option '--versio' (did you mean '--version'?)" "$ZEUS" --versio
expect_code "an option before the command exits 2" 2 "$ZEUS" --json gpus

# gpus
expect_out_has "gpus lists the sim backend" "backend: sim, 2 visible GPUs" "$ZEUS" gpus
json=$("$ZEUS" gpus --json) || fail "gpus --json failed"
echo "$json" | python3 -c '
import json, sys
doc = json.load(sys.stdin)
assert doc["backend"] == "sim" and doc["gpu_error"] is None, doc
g = doc["gpus"]
assert len(g) == 2, g
for i, d in enumerate(g):
    assert set(d) == {"index", "name", "uuid", "power_limit_w", "power_limit_min_w", "power_limit_max_w",
                      "power_limit_default_w", "graphics_clocks_mhz", "total_energy_supported",
                      "power_scope"}, d.keys()
    assert d["index"] == i and d["uuid"].startswith("GPU-")
    assert d["power_limit_min_w"] == 100.0 and d["power_limit_max_w"] == 300.0 == d["power_limit_w"], d
    c = d["graphics_clocks_mhz"]
    assert c == sorted(c, reverse=True) and len(c) > 10 and c[0] == 1740.0
    assert d["total_energy_supported"] is True
assert doc["cpus"] == [] and "RAPL" in doc["cpu_error"], doc
' || fail "gpus --json has the documented shape"
pass "gpus --json has the documented shape"
CUDA_VISIBLE_DEVICES=1 expect_out_has "CUDA_VISIBLE_DEVICES=1 shows one GPU" "1 visible GPU" "$ZEUS" gpus
CUDA_VISIBLE_DEVICES= expect_out_has "empty CUDA_VISIBLE_DEVICES shows none" "0 visible GPUs" "$ZEUS" gpus
CUDA_VISIBLE_DEVICES=MIG-abc expect_code "MIG entry is refused" 1 "$ZEUS" gpus
CUDA_VISIBLE_DEVICES=MIG-abc expect_err_has "MIG refusal explains" "MIG is not supported" "$ZEUS" gpus
ZEUS_GPU_BACKEND=amd expect_err_has "bad backend is named" "ZEUS_GPU_BACKEND 'amd'" "$ZEUS" gpus
ZEUS_SIM_GPUS=99 expect_err_has "bad sim setting is named" "ZEUS_SIM_GPUS" "$ZEUS" gpus
ZEUS_LOG_LEVEL=loud expect_code "bad log level" 2 "$ZEUS" gpus
expect_code "gpus bad option" 2 "$ZEUS" gpus --frob
expect_ok "gpus reset" "$ZEUS" gpus reset --gpus 1
# Issue 19: an index past 2^64 is named as given (it once showed as GPU 18446744073709551615).
CUDA_VISIBLE_DEVICES=99999999999999999999 expect_err_has "huge CUDA_VISIBLE_DEVICES entry is named as given" \
  "GPU 99999999999999999999 does not exist" "$ZEUS" gpus
CUDA_VISIBLE_DEVICES=99999999999999999999 expect_out_has "huge CUDA_VISIBLE_DEVICES entry shows no GPU" \
  "0 visible GPUs" "$ZEUS" gpus
# gpus reset turns persistence mode off (on real GPUs through NVML: the fake library logs the call).
# The fake GPUs start with it on (FAKE_NVML_STATE): NVML is not asked to set what a GPU already has.
if [ -n "${FAKE_NVML:-}" ]; then
  nvlog=$(mktemp)
  nvstate=$(mktemp)
  printf 'gpu %s power_limit_mw 300000 persistence 1 sm_lock 0 0 mem_lock 0 0\n' 0 1 >"$nvstate"
  ZEUS_GPU_BACKEND=nvml ZEUS_NVML_LIBRARY="$FAKE_NVML" FAKE_NVML_LOG="$nvlog" FAKE_NVML_STATE="$nvstate" "$ZEUS" gpus reset \
    >/dev/null 2>&1 || fail "gpus reset on the fake NVML failed"
  if grep -q '^nvmlDeviceSetPersistenceMode 0 0 -> 0$' "$nvlog" && grep -q '^nvmlDeviceSetPersistenceMode 1 0 -> 0$' "$nvlog"
  then pass "gpus reset turns persistence mode off on every GPU"
  else fail "gpus reset turns persistence mode off on every GPU"; sed 's/^/    /' "$nvlog"; fi
  : > "$nvlog"
  printf 'gpu %s power_limit_mw 300000 persistence 1 sm_lock 0 0 mem_lock 0 0\n' 0 1 >"$nvstate"
  ZEUS_GPU_BACKEND=nvml ZEUS_NVML_LIBRARY="$FAKE_NVML" FAKE_NVML_LOG="$nvlog" FAKE_NVML_STATE="$nvstate" "$ZEUS" gpus reset \
    --persistence keep >/dev/null 2>&1 || fail "gpus reset --persistence keep failed"
  if grep -q 'SetPersistenceMode' "$nvlog"; then fail "gpus reset --persistence keep leaves persistence mode alone"
  else pass "gpus reset --persistence keep leaves persistence mode alone"; fi
  rm -f "$nvlog" "$nvstate"
fi

# monitor energy: exit codes pass through, JSON shape, time roughly right
expect_code "monitor energy passes exit code 0" 0 "$ZEUS" monitor energy -- true
expect_code "monitor energy passes exit code 3" 3 "$ZEUS" monitor energy -- sh -c 'exit 3'
expect_code "monitor energy: missing command is 127" 127 "$ZEUS" monitor energy -- /nonexistent/cmd
expect_code "monitor energy: no command is a usage error" 2 "$ZEUS" monitor energy
expect_code "monitor energy: bad --gpus" 2 "$ZEUS" monitor energy --gpus x -- true
expect_code "monitor energy: GPU out of range" 1 "$ZEUS" monitor energy --gpus 7 -- true
out=$("$ZEUS" monitor energy --gpus 1 --json -- sleep 0.3) || fail "monitor energy --json failed"
echo "$out" | python3 -c '
import json, sys
r = json.load(sys.stdin)
assert r["exit_code"] == 0 and r["command"] == ["sleep", "0.3"], r
assert 0.25 < r["time_s"] < 5, r
assert list(r["gpu_energy_j"]) == ["1"], r
e = r["gpu_energy_j"]["1"]
# the simulated GPU idles at 30 W on the wall clock
assert abs(e - 30 * r["time_s"]) < 0.05 * e + 0.1, (e, r["time_s"])
assert abs(r["total_energy_j"] - e) < 1e-6
' || fail "monitor energy --json figures"
pass "monitor energy --json figures"

# monitor power: CSV header and bounded duration
out=$("$ZEUS" monitor power --interval-ms 50 --duration-s 0.3) || fail "monitor power failed"
head=$(echo "$out" | head -1)
[ "$head" = "time_s,gpu0_power_w,gpu1_power_w" ] || fail "monitor power header: $head"
rows=$(echo "$out" | tail -n +2 | wc -l)
[ "$rows" -ge 3 ] && [ "$rows" -le 8 ] || fail "monitor power rows: $rows"
pass "monitor power prints CSV for the duration"
expect_code "monitor power bad interval" 2 "$ZEUS" monitor power --interval-ms 0
expect_code "monitor bad mode" 2 "$ZEUS" monitor volume

# The output rule (cli/opt.h): standard output is the child's or the report's, never both.
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
out=$("$ZEUS" monitor energy --json -- sh -c 'echo hello; echo oops >&2' 2>"$T/err") || fail "monitor energy --json with a talking child"
if echo "$out" | python3 -m json.tool >/dev/null && grep -qx hello "$T/err" && grep -qx oops "$T/err"; then
  pass "monitor energy --json: stdout is only JSON, the child's output on stderr"
else fail "monitor energy --json: stdout is only JSON, the child's output on stderr"; echo "$out" | head -5; fi
"$ZEUS" monitor energy --json -- sh -c 'echo hello' | python3 -m json.tool >/dev/null \
  && pass "monitor energy --json -- sh -c 'echo hello' | python3 -m json.tool" \
  || fail "monitor energy --json -- sh -c 'echo hello' | python3 -m json.tool"
out=$("$ZEUS" monitor energy -- sh -c 'echo hello' 2>"$T/err")
[ "$out" = hello ] && grep -q "^  total: " "$T/err" && pass "monitor energy: the child keeps stdout, the report goes to stderr" \
  || fail "monitor energy: the child keeps stdout, the report goes to stderr ($out)"
out=$("$ZEUS" monitor energy --json -o "$T/r.json" -- sh -c 'echo hello' 2>"$T/err")
if [ "$out" = hello ] && python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["exit_code"] == 0' "$T/r.json" \
   && [ -z "$(ls "$T" | grep 'r.json.')" ]; then pass "monitor energy -o FILE: the report in FILE (no temporary left), stdout the child's"
else fail "monitor energy -o FILE: the report in FILE, stdout the child's ($out)"; fi
"$ZEUS" monitor energy -o "$T/r.txt" -- true && grep -q "^  total: " "$T/r.txt" && pass "monitor energy -o FILE (text)" \
  || fail "monitor energy -o FILE (text)"
expect_code "monitor energy -o into a missing folder fails before running the command" 1 \
  "$ZEUS" monitor energy -o "$T/missing/r.txt" -- touch "$T/ran"
[ -e "$T/ran" ] && fail "the command ran although -o could not be written" || pass "the command did not run"
expect_ok "monitor energy: --opt=value" "$ZEUS" monitor energy --gpus=1 -- true
expect_err_has "monitor energy: did you mean" "did you mean '--json'" "$ZEUS" monitor energy --jsn -- true
expect_err_has "monitor: a misspelled mode gets a suggestion" "did you mean 'energy'" "$ZEUS" monitor enrgy -- true
expect_out_has "monitor energy --help lists -o" "-o, --output FILE" "$ZEUS" monitor energy --help
for sub in "monitor energy" "monitor power" "gpus reset" "plo replay" "plo demo" run simulate pfo-server; do
  # shellcheck disable=SC2086
  long=$("$ZEUS" $sub --help | awk 'length > 100' | head -3)
  [ -z "$long" ] && pass "$sub --help fits 100 columns" || fail "$sub --help fits 100 columns: $long"
done

# CPU packages and DRAM through a fake RAPL tree: the child moves the counters.
R="$T/rapl"
mkdir -p "$R/intel-rapl:0" "$R/intel-rapl:0:0" "$R/intel-rapl:1"
echo package-0 >"$R/intel-rapl:0/name"; echo 1000000 >"$R/intel-rapl:0/energy_uj"
echo dram >"$R/intel-rapl:0:0/name"; echo 500000 >"$R/intel-rapl:0:0/energy_uj"
echo package-1 >"$R/intel-rapl:1/name"; echo 42 >"$R/intel-rapl:1/energy_uj"
out=$(ZEUS_RAPL_ROOT="$R" "$ZEUS" monitor energy --gpus 0 --json -- sh -c \
  "echo 3000000 >'$R/intel-rapl:0/energy_uj'; echo 1250000 >'$R/intel-rapl:0:0/energy_uj'") || fail "monitor energy with RAPL"
echo "$out" | python3 -c '
import json, sys
r = json.load(sys.stdin)
assert r["cpu_energy_j"] == {"0": 2.0, "1": 0.0}, r
assert r["dram_energy_j"] == {"0": 0.75}, r
assert abs(r["total_energy_j"] - (r["gpu_energy_j"]["0"] + 2.0)) < 1e-9, r
' && pass "monitor energy reports CPU packages and DRAM (DRAM not in the total)" \
  || fail "monitor energy reports CPU packages and DRAM: $out"
ZEUS_RAPL_ROOT="$R" "$ZEUS" monitor energy -- true 2>"$T/err"
grep -q "DRAM 0: " "$T/err" && pass "monitor energy's text report shows DRAM" || fail "monitor energy's text report shows DRAM"
ZEUS_RAPL_ROOT="$R" "$ZEUS" gpus >"$T/gpus.txt"
grep -q "CPU 0: package-0 ($R/intel-rapl:0/energy_uj)" "$T/gpus.txt" && grep -q "DRAM: measured ($R/intel-rapl:0:0/energy_uj)" "$T/gpus.txt" \
  && grep -q "CPU 1: package-1" "$T/gpus.txt" && pass "gpus lists CPU packages and DRAM zones" \
  || { fail "gpus lists CPU packages and DRAM zones"; cat "$T/gpus.txt"; }
ZEUS_RAPL_ROOT="$R" "$ZEUS" gpus --json | python3 -c '
import json, sys
c = json.load(sys.stdin)["cpus"]
assert [x["name"] for x in c] == ["package-0", "package-1"] and [x["dram"] for x in c] == [True, False], c
assert c[0]["dram_energy_path"].endswith("intel-rapl:0:0/energy_uj") and c[1]["dram_energy_path"] is None, c
' && pass "gpus --json lists CPU packages and DRAM zones" || fail "gpus --json lists CPU packages and DRAM zones"
expect_out_has "gpus says why there is no CPU package" "none: no RAPL" "$ZEUS" gpus

# No GPU because NVML does not load: say why, and how to try without a GPU.
ZEUS_GPU_BACKEND= ZEUS_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 expect_code "gpus without NVML exits 1" 1 "$ZEUS" gpus
ZEUS_GPU_BACKEND= ZEUS_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 expect_err_has "gpus without NVML says why" \
  "cannot load the NVML library '/nonexistent/libnvidia-ml.so.1'" "$ZEUS" gpus
ZEUS_GPU_BACKEND= ZEUS_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 expect_err_has "gpus without NVML names the way out" \
  "ZEUS_GPU_BACKEND=sim" "$ZEUS" gpus
ZEUS_GPU_BACKEND= ZEUS_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 "$ZEUS" gpus --json 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["backend"] == "none" and d["gpus"] == [] and "/nonexistent/libnvidia-ml.so.1" in d["gpu_error"], d
' && pass "gpus --json without NVML carries the load error" || fail "gpus --json without NVML carries the load error"
ZEUS_GPU_BACKEND=none expect_ok "an explicit 'none' backend is not an error" "$ZEUS" gpus
ZEUS_GPU_BACKEND= ZEUS_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 expect_err_has "monitor energy says why it measures no GPU" \
  "measuring no GPU: cannot load the NVML library" "$ZEUS" monitor energy -- true

# pfo-server without a plan: exit 2, naming the scheduler to try it with
if zeus_has pfo-server; then
  expect_code "pfo-server without a plan is a usage error" 2 "$ZEUS" pfo-server --port 0
  expect_err_has "pfo-server without a plan says which scheduler to try" "--scheduler AllMaxFrequency" \
    "$ZEUS" pfo-server --port 0
  expect_err_has "pfo-server: did you mean" "did you mean '--port'" "$ZEUS" pfo-server --prot 1
else
  skip_part "pfo-server"
fi
expect_err_has "zeus: a misspelled command gets a suggestion" "did you mean 'monitor'" "$ZEUS" moniter
expect_code "measure_power_limits --help does not run the example" 0 "$ZEUS_BUILD_DIR/measure_power_limits" --help
out=$(ZEUS_GPU_BACKEND=none "$ZEUS_BUILD_DIR/measure_power_limits" --help)
echo "$out" | grep -q "^usage: measure_power_limits" && ! echo "$out" | grep -q "power limit W" \
  && pass "measure_power_limits --help prints help only" || fail "measure_power_limits --help prints help only"

finish
