#!/usr/bin/env bash
# End-to-end: the zeus CLI on the simulated GPU (help, version, gpus, monitor, bad input).
set -u
. "$(dirname "$0")/lib.sh"

export ZEUS_GPU_BACKEND=sim ZEUS_SIM_GPUS=2

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

# gpus
expect_out_has "gpus lists the sim backend" "backend: sim, 2 visible GPUs" "$ZEUS" gpus
json=$("$ZEUS" gpus --json) || fail "gpus --json failed"
echo "$json" | python3 -c '
import json, sys
g = json.load(sys.stdin)
assert len(g) == 2, g
for i, d in enumerate(g):
    assert set(d) == {"index", "name", "uuid", "power_limit_mw", "graphics_clocks_mhz", "total_energy_supported"}, d.keys()
    assert d["index"] == i and d["uuid"].startswith("GPU-")
    pl = d["power_limit_mw"]
    assert set(pl) == {"min", "max", "default", "current"} and pl["min"] < pl["max"], pl
    c = d["graphics_clocks_mhz"]
    assert c == sorted(c, reverse=True) and len(c) > 10
    assert d["total_energy_supported"] is True
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

finish
