#!/usr/bin/env bash
# A real Prometheus (Debian's prometheus, on a loopback port, scraping every second) against
# `zeus exporter` (2 simulated GPUs, GPU 0 kept busy, a fake RAPL package) and `zeus pfo-server`
# (a job running rounds), queried through its HTTP API:
#   - every target is up; the GPU energy counter rises while the simulated work runs;
#   - rate() of it agrees with the simulated power within 5 % (290 W working, 30 W idle);
#   - every series carries its labels (gpu/uuid/name, cpu/name, route/code, le), and the
#     simulated GPUs' locked-clock state is there (0: not locked);
#   - promtool check metrics passes on each endpoint's output;
#   - the exporter also serves the grid's carbon intensity and price (--carbon, --price) from a
#     local stand-in for ElectricityMaps and OpenEI (grid_fake_provider.py), and the grams and
#     money per GPU the dashboard derives from them and the energy counters in PromQL agree with
#     the simulated power times the served intensity and price;
#   - every PromQL query of the Grafana dashboard (packaging/grafana-zeus.json) returns data (the
#     carbon and cost panels' only where this zeus was built with ZEUS_WITH_GRID).
# Skips (77) only when prometheus/promtool are not installed (scripts/deps.sh test installs them).
set -euo pipefail
ZEUS=${ZEUS:?path of the zeus binary}
SRC=${ZEUS_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
for t in prometheus promtool curl python3; do
  command -v "$t" >/dev/null || { echo "SKIPPED: $t is not installed (scripts/deps.sh test installs Debian's prometheus)"; exit 77; }
done
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

# wait_for FILE REGEX SECONDS: until the file has a line matching the regex.
wait_for() {
  for _ in $(seq $(($3 * 10))); do grep -Eq "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  echo "timed out waiting for /$2/ in $1:"; cat "$1" || true; return 1
}

# A fake RAPL package with a DRAM zone (the exporter's CPU series).
mkdir -p "$tmp/rapl/intel-rapl:0/intel-rapl:0:0"
echo package-0 >"$tmp/rapl/intel-rapl:0/name"; echo 123456789 >"$tmp/rapl/intel-rapl:0/energy_uj"
echo 262143328850 >"$tmp/rapl/intel-rapl:0/max_energy_range_uj"
ln -s "intel-rapl:0/intel-rapl:0:0" "$tmp/rapl/intel-rapl:0:0"
echo dram >"$tmp/rapl/intel-rapl:0/intel-rapl:0:0/name"; echo 5000000 >"$tmp/rapl/intel-rapl:0/intel-rapl:0:0/energy_uj"
echo 65532610987 >"$tmp/rapl/intel-rapl:0/intel-rapl:0:0/max_energy_range_uj"

# The grid's carbon intensity and price, where this zeus has ZEUS_WITH_GRID (zeus/config.h of its
# build): from a local ElectricityMaps and OpenEI that want an API key.
config=${ZEUS_BUILD_DIR:-$(dirname "$ZEUS")}/include/zeus/config.h
grid_args=()
GRID=0
if grep -q '^#define ZEUS_HAVE_GRID 1' "$config" 2>/dev/null; then
  GRID=1
  key="e2e-SECRET-$RANDOM$RANDOM"
  label=5f1a2b3c4d5e6f7a8b9c0d1e
  python3 "$SRC/tests/e2e/grid_fake_provider.py" --intensity 420 --rate 0.25 --label "$label" --key "$key" \
    >"$tmp/grid.out" 2>"$tmp/grid.err" &
  pids+=($!)
  wait_for "$tmp/grid.out" "port [0-9]+" 20
  gurl="http://127.0.0.1:$(awk '{print $NF}' "$tmp/grid.out")"
  grid_args=(--carbon latlon:42.2776,-83.7409 --electricitymaps-url "$gurl" --price latlon:42.2776,-83.7409
             --price-label "$label" --openei-url "$gurl" --grid-poll 1)
  export ZEUS_ELECTRICITYMAPS_API_KEY="$key" ZEUS_OPENEI_API_KEY="$key"
else
  echo "ok - skipped: the carbon and cost series (this zeus was built without ZEUS_WITH_GRID)"
fi

ZEUS_GPU_BACKEND=sim ZEUS_SIM_GPUS=2 ZEUS_RAPL_ROOT="$tmp/rapl" ZEUS_LOG_LEVEL=debug \
  "$ZEUS" exporter --port 0 --sim-work 0 "${grid_args[@]}" >"$tmp/exporter.out" 2>"$tmp/exporter.err" &
pids+=($!)
ZEUS_PFO_SCHEDULER=AllMaxFrequency ZEUS_PFO_SCHEDULER_ARGS='{"num_microbatches": 2}' \
  "$ZEUS" pfo-server --port 0 --log-level warn >"$tmp/pfo.out" 2>"$tmp/pfo.err" &
pids+=($!)
wait_for "$tmp/exporter.out" "port [0-9]+" 20
wait_for "$tmp/pfo.out" "port [0-9]+" 20
eport=$(awk '{print $NF}' "$tmp/exporter.out")
pport=$(awk '{print $NF}' "$tmp/pfo.out")

# The exporter's CPU package must be there (the fake RAPL tree was read).
curl -sf "127.0.0.1:$eport/metrics" | grep -q '^zeus_cpu_dram_energy_joules_total{cpu="0",name="package-0"}'
# And the grid's intensity and price, once the first fetch is in; the key in no log line.
if [ "$GRID" = 1 ]; then
  for _ in $(seq 100); do
    curl -sf "127.0.0.1:$eport/metrics" >"$tmp/m.txt"
    grep -q '^zeus_grid_carbon_intensity_grams_per_kilowatt_hour{.*} 420$' "$tmp/m.txt" &&
      grep -q '^zeus_grid_price_per_kilowatt_hour{.*currency="USD".*} 0.25$' "$tmp/m.txt" && break
    sleep 0.1
  done
  if ! grep -q '^zeus_grid_price_per_kilowatt_hour{.*} 0.25$' "$tmp/m.txt" ||
     ! grep -q '^zeus_grid_carbon_intensity_grams_per_kilowatt_hour{.*} 420$' "$tmp/m.txt"; then
    echo "FAIL - the exporter serves no intensity 420 and price 0.25 within 10 s:"; grep zeus_grid "$tmp/m.txt" || true
    cat "$tmp/exporter.err"; exit 1
  fi
  echo "ok - the exporter serves the fake provider's intensity (420 gCO2eq/kWh) and price (0.25 USD/kWh)"
fi

# A Perseus job of two ranks running rounds for as long as the test lasts.
id=$(curl -sf -X POST "127.0.0.1:$pport/register_job" \
  -d '{"job_id":"","pp_degree":2,"dp_degree":1,"tp_degree":1,"world_size":2}' | tr -d '"')
for r in 0 1; do
  curl -sf -X POST "127.0.0.1:$pport/register_rank/$id" \
    -d "{\"rank\":$r,\"dp_rank\":0,\"pp_rank\":$r,\"tp_rank\":0,\"available_frequencies\":[1410,1000]}" >/dev/null
done
(
  while :; do
    for r in 0 1; do curl -sf -o /dev/null "127.0.0.1:$pport/schedule/$id?rank=$r" & done
    wait
    for r in 0 1; do
      curl -sf -o /dev/null -X POST "127.0.0.1:$pport/result/$id" -d "{\"rank\":$r,\"iter_time\":[1.5],\"iter_energy\":[100],\"time_breakdown\":{\"forward\":[[0.1]],\"backward\":[[0.2]]},\"energy_breakdown\":{\"forward\":[[1]],\"backward\":[[2]]}}"
    done
    sleep 0.3
  done
) &
pids+=($!)

# promtool on each endpoint's own output.
for ep in "$eport" "$pport"; do
  curl -sf "127.0.0.1:$ep/metrics" >"$tmp/m.txt"
  if ! promtool check metrics <"$tmp/m.txt" >"$tmp/promtool.out" 2>&1; then
    echo "promtool check metrics failed on port $ep:"; cat "$tmp/promtool.out"; exit 1
  fi
done
echo "ok - promtool check metrics passes on the exporter and the pfo-server"

promport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$tmp/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
scrape_configs:
  - job_name: zeus-exporter
    static_configs: [{targets: ['127.0.0.1:$eport']}]
  - job_name: zeus-pfo-server
    static_configs: [{targets: ['127.0.0.1:$pport']}]
YML
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/data" \
  --web.listen-address="127.0.0.1:$promport" --log.level=warn >"$tmp/prom.log" 2>&1 &
pids+=($!)

PROM="http://127.0.0.1:$promport" DASHBOARD="$SRC/packaging/grafana-zeus.json" GRID=$GRID timeout 120 python3 - <<'PY'
import json, os, sys, time, urllib.parse, urllib.request

PROM = os.environ["PROM"]
failed = []

def query(q):
    url = PROM + "/api/v1/query?" + urllib.parse.urlencode({"query": q})
    with urllib.request.urlopen(url, timeout=10) as r:
        d = json.load(r)
    if d.get("status") != "success":
        raise RuntimeError(f"query {q!r}: {d}")
    return d["data"]["result"]

def value(q):
    res = query(q)
    if len(res) != 1:
        raise RuntimeError(f"query {q!r}: expected one series, got {len(res)}: {res}")
    return float(res[0]["value"][1])

def check(ok, what):
    print(("ok - " if ok else "FAIL - ") + what)
    if not ok:
        failed.append(what)

deadline = time.time() + 40
while True:  # Prometheus ready, both targets scraped
    try:
        up = {r["metric"]["job"]: r["value"][1] for r in query("up")}
        if up.get("zeus-exporter") == "1" and up.get("zeus-pfo-server") == "1":
            break
    except Exception as e:  # not listening yet
        up = str(e)
    if time.time() > deadline:
        sys.exit(f"FAIL - targets not up within 40 s: {up}")
    time.sleep(0.5)
check(True, "both targets are up")
time.sleep(12)  # ten seconds of 1 s scrapes for the rate windows

gpu0 = 'zeus_gpu_energy_joules_total{job="zeus-exporter",gpu="0"}'
e1 = value(gpu0)
time.sleep(3)
e2 = value(gpu0)
check(e2 - e1 > 290 * 1.5, f"the GPU 0 energy counter rises while simulated work runs ({e1:.1f} J -> {e2:.1f} J in 3 s)")

for gpu, want in (("0", 290.0), ("1", 30.0)):
    r = value(f'rate(zeus_gpu_energy_joules_total{{job="zeus-exporter",gpu="{gpu}"}}[10s])')
    check(abs(r - want) <= 0.05 * want, f"rate() of GPU {gpu}'s energy is {r:.2f} W, simulated {want:.0f} W (within 5 %)")
avg = value('avg_over_time(zeus_gpu_power_average_watts{job="zeus-exporter",gpu="0"}[10s])')
r0 = value('rate(zeus_gpu_energy_joules_total{job="zeus-exporter",gpu="0"}[10s])')
check(abs(r0 - avg) <= 0.05 * avg, f"rate() of GPU 0's energy ({r0:.2f} W) agrees with its average power gauge ({avg:.2f} W)")

series = query('{job="zeus-exporter", __name__=~"zeus_gpu_.+"}')
bad = [s["metric"] for s in series if not all(s["metric"].get(l) for l in ("gpu", "uuid", "name"))]
check(len(series) >= 2 * 12 and not bad, f"{len(series)} GPU series all carry gpu, uuid and name {bad[:2]}")
series = query('zeus_gpu_clock_locked{job="zeus-exporter"}')  # the simulated GPUs know their locks: none
check(len(series) == 4 and sorted((s["metric"]["gpu"], s["metric"].get("clock")) for s in series)
      == [("0", "memory"), ("0", "sm"), ("1", "memory"), ("1", "sm")] and all(s["value"][1] == "0" for s in series),
      f"the locked-clock state is 0 for each GPU's sm and memory clock: {[(s['metric'], s['value'][1]) for s in series]}")
series = query('{job="zeus-exporter", __name__=~"zeus_cpu_.+"}')
bad = [s["metric"] for s in series if not all(s["metric"].get(l) for l in ("cpu", "name"))]
check(len(series) == 2 and not bad, f"{len(series)} CPU series all carry cpu and name {bad[:2]}")
series = query('{job="zeus-pfo-server", __name__=~"zeus_pfo_request.+"}')
bad = [s["metric"] for s in series if not s["metric"].get("route")
       or (s["metric"]["__name__"] == "zeus_pfo_requests_total" and not s["metric"].get("code"))
       or (s["metric"]["__name__"].endswith("_bucket") and not s["metric"].get("le"))]
check(len(series) > 0 and not bad, f"{len(series)} pfo-server request series all carry route (and code, le) {bad[:2]}")
check(value('zeus_pfo_rounds_total{job="zeus-pfo-server"}') > 0, "the pfo-server's rounds counter counts the job's rounds")
check(value('zeus_pfo_ranks{job="zeus-pfo-server"}') == 2, "the pfo-server reports the job's 2 ranks")

GRID = os.environ["GRID"] == "1"
if GRID:
    # Grams and money from the energy counter and the intensity and price gauges, as the
    # dashboard's carbon and cost panels compute them: GPU 0 works at 290 W, the grid is at
    # 420 gCO2eq/kWh and 0.25 USD/kWh.
    E0 = 'rate(zeus_gpu_energy_joules_total{job="zeus-exporter",gpu="0"}[10s])'
    I = 'max by (instance) (zeus_grid_carbon_intensity_grams_per_kilowatt_hour{job="zeus-exporter"})'
    P = 'max by (instance, currency) (zeus_grid_price_per_kilowatt_hour{job="zeus-exporter"})'
    g_h = value(f"{E0} * on (instance) group_left () {I} / 1000")
    want = 290 * 420 / 1000
    check(abs(g_h - want) <= 0.05 * want, f"GPU 0 emits {g_h:.2f} gCO2eq/h: 290 W x 420 g/kWh is {want:.1f} (within 5 %)")
    res = query(f"{E0} * on (instance) group_left (currency) {P} / 1000")
    want = 290 * 0.25 / 1000
    ok = len(res) == 1 and res[0]["metric"].get("currency") == "USD" and res[0]["metric"].get("gpu") == "0"
    c_h = float(res[0]["value"][1]) if ok else float("nan")
    check(ok and abs(c_h - want) <= 0.05 * want,
          f"GPU 0 costs {c_h:.5f} USD/h: 290 W x 0.25 USD/kWh is {want:.4f} (within 5 %), labelled USD: {res}")
    # (5 s windows, so that every one of them lies in what Prometheus has scraped)
    E5 = E0.replace("[10s]", "[5s]")
    inner = f"({E5} * on (instance) group_left () {I})[5s:1s]"
    g, n = value(f"sum_over_time({inner}) * 1000 / 3.6e9"), value(f"count_over_time({inner})")
    want = 290 * n * 420 / 3.6e6
    check(n >= 4 and abs(g - want) <= 0.05 * want,
          f"GPU 0 emitted {g:.4f} g in {n:.0f} s: 290 W x {n:.0f} s x 420 g/kWh is {want:.4f} (within 5 %)")

# Every query of the Grafana dashboard returns data, with its variables at "All".
subst = {"$__rate_interval": "10s", "$__range": "30s", "$__interval_ms": "1000", "$__interval": "1s",
         "$instance": ".*", "$gpu": ".*"}
dash = json.load(open(os.environ["DASHBOARD"]))
exprs = []
for p in dash["panels"]:
    exprs += [t["expr"] for t in p.get("targets", [])]
for v in dash["templating"]["list"]:
    q = v.get("query")
    if isinstance(q, dict) and q.get("query", "").startswith("label_values("):
        exprs.append(q["query"][len("label_values("):].rsplit(",", 1)[0])  # the series it reads
check(len(exprs) >= 27, f"the dashboard has {len(exprs)} queries")
grid_exprs = [e for e in exprs if "zeus_grid_" in e]
check(len(grid_exprs) >= 7, f"{len(grid_exprs)} of them are the carbon and cost panels' (zeus_grid_*)")
for e in exprs:
    if not GRID and "zeus_grid_" in e:
        print(f"ok - skipped (no ZEUS_WITH_GRID): {e}")
        continue
    q = e
    for k in sorted(subst, key=len, reverse=True):
        q = q.replace(k, subst[k])
    try:
        n = len(query(q))
    except Exception as ex:
        n, q = 0, f"{q} ({ex})"
    check(n > 0, f"dashboard query returns {n} series: {q}")

print(f"{len(failed)} failed")
sys.exit(1 if failed else 0)
PY

# No API key in anything the exporter printed.
if [ "$GRID" = 1 ] && grep -qF "$key" "$tmp/exporter.out" "$tmp/exporter.err"; then
  echo "FAIL - the API key appears in the exporter's output"; exit 1
fi
