#!/usr/bin/env bash
# End-to-end: the zeus CLI on a Grace Hopper superchip as the fake NVML plays it
# (ZEUS_SIM_HARDWARE=gh200: GPU-scope power refused, module scope answered). zeus gpus says the
# scope, the fallback is logged once per GPU, and zeus gpus probe, zeus monitor energy (its report
# and its push to a Pushgateway) and zeus monitor power name the module's energy and power as the
# module's, with the module's figures (the idle GPU's 30 W and the profile's 100 W for the CPU and
# its memory).
set -u
. "$(dirname "$0")/lib.sh"

if [ -z "${FAKE_NVML:-}" ] || [ ! -f "$FAKE_NVML" ]; then
  echo "skip - no fake NVML in this build"
  exit 77
fi
export ZEUS_GPU_BACKEND=nvml ZEUS_NVML_LIBRARY="$FAKE_NVML" ZEUS_SIM_HARDWARE=gh200 ZEUS_SIM_GPUS=2
export ZEUS_SIM_CLOCK=wall ZEUS_RAPL_ROOT=/nonexistent-rapl-root ZEUS_LOG_LEVEL=warn
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# zeus gpus: the scope in JSON and in words, the fallback said once per GPU.
if "$ZEUS" gpus --json >"$tmp/gpus.json" 2>"$tmp/gpus.err" && python3 - "$tmp/gpus.json" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
assert [g["power_scope"] for g in doc["gpus"]] == ["module", "module"], doc
assert all(g["total_energy_supported"] is True for g in doc["gpus"]), doc
EOF
then pass "gpus --json says power_scope module for each GH200"
else fail "gpus --json says power_scope module for each GH200"; cat "$tmp/gpus.json"; fi
n=$(grep -c "refuses GPU-scope power" "$tmp/gpus.err")
if [ "$n" -eq 2 ] && grep -q "^zeus\[device\] WARN: GPU 1: NVML refuses GPU-scope power" "$tmp/gpus.err"; then
  pass "the fallback is logged once per GPU"
else fail "the fallback is logged once per GPU ($n lines)"; cat "$tmp/gpus.err"; fi
expect_out_has "gpus says power scope module in words" "power scope: +module" "$ZEUS" gpus
ZEUS_SIM_HARDWARE=h100 expect_out_has "an H100 keeps power scope gpu" "power scope: +gpu" "$ZEUS" gpus

# zeus gpus probe: the module's instant and average power and its counter under module_ keys, read
# at the idle module's 130 W (the GPU's 30 W and the profile's 100 W); the memory's stays power_w.
if "$ZEUS" gpus probe --gpus 1 --calls 3 --json >"$tmp/probe.json" 2>/dev/null && python3 - "$tmp/probe.json" <<'EOF'
import json, sys
g = json.load(open(sys.argv[1]))["gpus"][0]
v = {c["call"]: c["value"] for c in g["calls"]}
assert g["power_scope"] == "module", g
assert v["power_instant"] == {"module_power_w": 130.0} and v["power_average"] == {"module_power_w": 130.0}, v
assert list(v["total_energy"]) == ["module_energy_j"], v
assert v["power_limit"] == {"power_limit_w": 900.0}, v
EOF
then pass "gpus probe names the module's power and energy (module_power_w 130 W)"
else fail "gpus probe names the module's power and energy"; cat "$tmp/probe.json"; fi
if ZEUS_SIM_HARDWARE=h100 "$ZEUS" gpus probe --gpus 0 --calls 2 --json 2>/dev/null | python3 -c '
import json, sys
g = json.load(sys.stdin)["gpus"][0]
v = {c["call"]: c["value"] for c in g["calls"]}
sys.exit(0 if g["power_scope"] == "gpu" and v["power_instant"] == {"power_w": 30.0} and list(v["total_energy"]) == ["energy_j"] else 1)'; then
  pass "an H100's probe keeps power_w and energy_j"
else fail "an H100's probe keeps power_w and energy_j"; fi
expect_out_has "gpus probe says power scope module in words" "power scope: module" "$ZEUS" gpus probe --calls 1

# zeus monitor energy: the module's energy under module_energy_j, about 130 W x the time.
if "$ZEUS" monitor energy --json -- sleep 0.5 >"$tmp/energy.json" 2>/dev/null && python3 - "$tmp/energy.json" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["gpu_energy_j"] == {}, doc
m = doc["module_energy_j"]
assert set(m) == {"0", "1"}, doc
for j in m.values():
    w = j / doc["time_s"]
    assert abs(w - 130) < 130 * 0.25, (w, doc)   # the counter's ~100 ms ticks over a 0.5 s window
assert abs(doc["total_energy_j"] - sum(m.values())) < 1e-6, doc
EOF
then pass "monitor energy --json reports module_energy_j at the module's power"
else fail "monitor energy --json reports module_energy_j at the module's power"; cat "$tmp/energy.json"; fi
ZEUS_SIM_HARDWARE=h100 expect_out_has "an H100's energy stays gpu_energy_j" '"gpu_energy_j": \{$' \
  "$ZEUS" monitor energy --json -- sleep 0.1
expect_err_has "monitor energy's text names the module" "module of GPU 0:" "$ZEUS" monitor energy -- sleep 0.1

# zeus monitor energy --pushgateway: the window's histogram under the module's name, as sent to a
# gateway (a stand-in that keeps what is POSTed); only where this build has the push component.
if grep -q "define ZEUS_HAVE_METRICS_PUSH 1" "${ZEUS_BUILD_DIR:-}/include/zeus/config.h" 2>/dev/null; then
  python3 - "$tmp/pushed" "$tmp/port" <<'EOF' &
import http.server, sys
class Gateway(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with open(sys.argv[1], "ab") as f:
            f.write(body)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), Gateway)
with open(sys.argv[2] + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os
os.rename(sys.argv[2] + ".tmp", sys.argv[2])
server.serve_forever()
EOF
  gw=$!
  for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.05; done
  if "$ZEUS" monitor energy --json --pushgateway "http://127.0.0.1:$(cat "$tmp/port")" --push-job gh -- sleep 0.3 \
       >"$tmp/push.json" 2>"$tmp/push.err" && python3 - "$tmp/pushed" "$tmp/push.json" <<'EOF'
import json, re, sys
text = open(sys.argv[1]).read()
doc = json.load(open(sys.argv[2]))
assert "energy_monitor_gpu_energy_joules" not in text, text
for i in ("0", "1"):
    m = re.search(r'^energy_monitor_module_energy_joules_sum\{window="[^"]*",index="%s"\} (\S+)$' % i, text, re.M)
    assert m and abs(float(m.group(1)) - doc["module_energy_j"][i]) < 1e-6, (i, text, doc)
EOF
  then pass "monitor energy --pushgateway pushes energy_monitor_module_energy_joules, equal to the report"
  else fail "monitor energy --pushgateway on GH200"; cat "$tmp/push.err" "$tmp/pushed" 2>/dev/null | head -30; fi
  kill "$gw" 2>/dev/null; wait "$gw" 2>/dev/null
else skip_part "zeus monitor energy --pushgateway"; fi

# zeus monitor power: module<i>_ columns at the module's power.
if "$ZEUS" monitor power --interval-ms 100 --duration-s 0.35 --domains instant,average >"$tmp/power.csv" 2>/dev/null &&
   head -1 "$tmp/power.csv" | grep -qx "time_s,module0_power_w,module0_average_power_w,module1_power_w,module1_average_power_w" &&
   awk -F, 'NR > 1 { if ($2 < 129 || $2 > 131) bad = 1 } END { exit bad }' "$tmp/power.csv"; then
  pass "monitor power names module<i>_ columns with the module's power"
else fail "monitor power names module<i>_ columns with the module's power"; cat "$tmp/power.csv"; fi

# zeus gpus check: the module's counter agrees with its integrated power; the GPU's power limit
# is not held against the module's power.
if "$ZEUS" gpus check --duration-s 1 --json >"$tmp/check.json" 2>/dev/null && python3 - "$tmp/check.json" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
for g in doc["gpus"]:
    assert g["power_scope"] == "module", g
    assert g["checks"] == {"counter_monotonic": True, "energy_agrees": True, "power_within_limit": None}, g
    assert abs(g["power"]["instant_mean_w"] - 130) < 1, g
assert doc["ok"] is True, doc
EOF
then pass "gpus check on GH200: module scope, energy agrees, no GPU-limit check"
else fail "gpus check on GH200: module scope, energy agrees, no GPU-limit check"; cat "$tmp/check.json"; fi

finish
