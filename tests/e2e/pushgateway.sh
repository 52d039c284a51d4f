#!/usr/bin/env bash
# End-to-end: windows pushed to a real Prometheus Pushgateway (Debian prometheus-pushgateway, on a
# loopback port) from C (zeus monitor energy --pushgateway, through zeus/metric.h) and from the
# Python binding (zeusc.metric: histogram, counter, gauge), read back from the gateway's /metrics.
# scripts/deps.sh installs the package; without it (it cannot be installed here) the test says so
# and is skipped. Bounded: the gateway gets 20 s to start, every request 10 s.
set -u
. "$(dirname "$0")/lib.sh"

PG=$(command -v prometheus-pushgateway || true)
if [ -z "$PG" ]; then
  echo "SKIPPED: prometheus-pushgateway is not installed (scripts/deps.sh test installs the Debian package" \
       "prometheus-pushgateway; it could not be installed on this machine)"
  exit 77
fi
command -v curl >/dev/null || { echo "SKIPPED: curl is not installed"; exit 77; }
PY=$(command -v python3)

export ZEUS_GPU_BACKEND=sim ZEUS_SIM_GPUS=2 ZEUS_SIM_CLOCK=wall ZEUS_RAPL_ROOT=/nonexistent-rapl-root
tmp=$(mktemp -d)
pg=
trap '[ -n "$pg" ] && kill "$pg" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT

# A free loopback port (the gateway cannot be told port 0 and report it); a few tries in case
# another process takes it in between.
for try in 1 2 3; do
  port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$PG" --web.listen-address="127.0.0.1:$port" --persistence.file="$tmp/pg.data" --log.level=warn \
    >"$tmp/pg.log" 2>&1 &
  pg=$!
  up=
  for _ in $(seq 200); do
    if curl -sf --max-time 1 "http://127.0.0.1:$port/-/ready" >/dev/null 2>&1; then up=1; break; fi
    kill -0 "$pg" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$up" ] && break
  kill "$pg" 2>/dev/null; wait "$pg" 2>/dev/null; pg=
done
if [ -z "$up" ]; then fail "the Pushgateway did not start"; cat "$tmp/pg.log"; finish; exit 1; fi
URL="http://127.0.0.1:$port"
echo "Pushgateway $("$PG" --version 2>&1 | head -1) on $URL"
scrape() { curl -sf --max-time 10 "$URL/metrics" >"$tmp/metrics" || fail "GET /metrics"; }

# ---- from C: zeus monitor energy --pushgateway ----
"$ZEUS" monitor energy --json --pushgateway "$URL" --push-job e2e --push-labels "instance=c,rack=a/b c" \
  -- sleep 0.3 >"$tmp/c.json" 2>"$tmp/c.err"
code=$?
if [ $code -eq 0 ]; then pass "C: zeus monitor energy --pushgateway exits 0"
else fail "C: exit $code"; cat "$tmp/c.err"; fi
# Another run, CMD failing: its window is pushed all the same. Under its own grouping labels: a
# Pushgateway keeps the last push of each family per job and labels, so a run pushed under the
# same ones would replace the first run's histograms.
"$ZEUS" monitor energy --pushgateway "$URL" --push-job e2e --push-labels "instance=c2,rack=a/b c" \
  --push-window epoch -- sh -c 'sleep 0.1; exit 3' 2>/dev/null
code=$?
if [ $code -eq 3 ]; then pass "C: CMD's exit code kept when pushing"; else fail "C: exit $code, expected 3"; fi
scrape
"$PY" - "$tmp/metrics" "$tmp/c.json" <<'PY' && pass "C: the gateway holds the window's histograms, equal to the report" || fail "C: series on the gateway"
import json, re, sys
text = open(sys.argv[1]).read()
rep = json.load(open(sys.argv[2]))
def series(name, **labels):
    out = []
    for line in text.splitlines():
        m = re.match(r'^(\w+)\{(.*)\} (\S+)$', line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2)))
        if all(got.get(k) == v for k, v in labels.items()):
            out.append((got, float(m.group(3))))
    return out
grp = {"job": "e2e", "instance": "c", "rack": "a/b c"}
for g, e in rep["gpu_energy_j"].items():
    s = series("energy_monitor_gpu_energy_joules_sum", window="sleep", index=g, **grp)
    assert len(s) == 1, s
    assert abs(s[0][1] - e) <= 1e-9 * max(1, e), (s, e)
    assert 0.28 * 30 <= e <= 10 * 30, e   # the simulated GPU idles at 30 W
    c = series("energy_monitor_gpu_energy_joules_count", window="sleep", index=g, **grp)
    assert c[0][1] == 1, c
    b = series("energy_monitor_gpu_energy_joules_bucket", window="sleep", index=g, **grp)
    assert {x[0]["le"] for x in b} == {"50", "100", "200", "500", "1000", "+Inf"}, b
    assert [x[1] for x in b if x[0]["le"] == "+Inf"] == [1.0]
    assert len(series("energy_monitor_gpu_energy_joules_count", window="epoch", index=g,
                      **{**grp, "instance": "c2"})) == 1
d = series("energy_monitor_window_duration_seconds_sum", window="sleep", **grp)
assert len(d) == 1 and abs(d[0][1] - rep["time_s"]) <= 1e-9, (d, rep["time_s"])
assert "# TYPE energy_monitor_gpu_energy_joules histogram" in text
assert not series("energy_monitor_cpu_energy_joules_count", **grp)  # no CPU package measured
PY

# A gateway that is not there: exit 1 and a message naming it; the report is still written.
"$ZEUS" monitor energy --json --pushgateway http://127.0.0.1:1 -- true >"$tmp/d.json" 2>"$tmp/d.err"
code=$?
if [ $code -eq 1 ] && grep -q "Pushgateway http://127.0.0.1:1" "$tmp/d.err" && grep -q total_energy_j "$tmp/d.json"; then
  pass "C: a dead gateway is named, exit 1, report written"
else fail "C: dead gateway (exit $code)"; cat "$tmp/d.err"; fi
expect_err_has "C: bad --push-labels" "expected NAME=VALUE" \
  "$ZEUS" monitor energy --pushgateway "$URL" --push-labels nolabel -- true
# A bad URL or label is refused (exit 2) before CMD runs, not after a long run.
out=$("$ZEUS" monitor energy --pushgateway "ftp://127.0.0.1" -- echo CMD-RAN 2>"$tmp/e.err")
code=$?
if [ $code -eq 2 ] && [ -z "$out" ] && grep -q "expected http://HOST:PORT" "$tmp/e.err"; then
  pass "C: a bad URL is refused before CMD runs"
else fail "C: bad URL (exit $code, stdout '$out')"; cat "$tmp/e.err"; fi
out=$("$ZEUS" monitor energy --pushgateway "$URL" --push-labels index=3 -- echo CMD-RAN 2>"$tmp/e.err")
code=$?
if [ $code -eq 2 ] && [ -z "$out" ] && grep -q "grouping label 'index': reserved" "$tmp/e.err"; then
  pass "C: a reserved label is refused before CMD runs"
else fail "C: reserved label (exit $code, stdout '$out')"; cat "$tmp/e.err"; fi

# ---- from Python: zeusc.metric, the three kinds under one job and grouping key ----
# A libzeus built with the sanitizers needs their runtimes loaded first in an interpreter (as the
# pytest entry of tests/CMakeLists.txt does).
preload=
if ldd "$ZEUS_LIBRARY" 2>/dev/null | grep -q libasan; then
  preload="$(cc -print-file-name=libasan.so):$(cc -print-file-name=libubsan.so)"
fi
LD_PRELOAD="$preload" ASAN_OPTIONS=detect_leaks=0 \
PYTHONPATH="$ZEUS_SOURCE_DIR/python${PYTHONPATH:+:$PYTHONPATH}" ZEUSC_LIBRARY="$ZEUS_LIBRARY" \
  timeout 120 "$PY" - "$URL" >"$tmp/py.json" 2>"$tmp/py.err" <<'PY'
import json, sys, time
import zeusc.metric as zm
url = sys.argv[1]
key = {"instance": "py"}
h = zm.EnergyHistogram([], None, url, "e2e", grouping_key=key)
c = zm.EnergyCumulativeCounter([], [0], 0.1, url, "e2e", grouping_key=key)
g = zm.PowerGauge([1], 0.1, url, "e2e", grouping_key=key)
c.begin_window("train")
g.begin_window("train")
for _ in range(2):
    h.begin_window("step")
    time.sleep(0.15)
    h.end_window("step")
time.sleep(0.1)
c.end_window("train")
g.end_window("train")
print(json.dumps({"hist": h.text(), "counter": c.text(), "gauge": g.text()}))
for m in (h, c, g):
    m.close()
PY
code=$?
if [ $code -eq 0 ]; then pass "zeusc: three metrics pushed without error"
else fail "zeusc: exit $code"; cat "$tmp/py.err"; fi
scrape
"$PY" - "$tmp/metrics" "$tmp/py.json" <<'PY' && pass "zeusc: histogram, counter and gauge side by side on the gateway, equal to what was pushed" || fail "zeusc: series on the gateway"
import json, re, sys
text = open(sys.argv[1]).read()
pushed = json.load(open(sys.argv[2]))
def parse(t, extra):
    out = {}
    for line in t.splitlines():
        m = re.match(r'^(\w+)\{(.*)\} (\S+)$', line)
        if m:
            labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2)))
            labels.update(extra)
            out[(m.group(1), tuple(sorted(labels.items())))] = float(m.group(3))
    return out
gw = parse(text, {})
grp = {"job": "e2e", "instance": "py"}
n = 0
for kind in ("hist", "counter", "gauge"):
    for k, v in parse(pushed[kind], grp).items():
        assert gw.get(k) == v, (k, v, gw.get(k))   # every pushed value, exactly, with the group labels
        n += 1
assert n >= 20, n
get = lambda name, **l: gw[(name, tuple(sorted({**grp, **l}.items())))]
assert get("energy_monitor_gpu_energy_joules_count", window="step", index="0") == 2
assert get("energy_monitor_window_duration_seconds_count", window="step") == 2
e = get("energy_monitor_gpu_energy_joules_total", window="train", index="0")
assert 0.35 * 30 <= e <= 20 * 30, e
assert get("power_monitor_gpu_power_watts", window="train", index="1") == 30.0
for t in ("energy_monitor_gpu_energy_joules histogram", "energy_monitor_gpu_energy_joules_total counter",
          "power_monitor_gpu_power_watts gauge"):
    assert "# TYPE " + t in text, t
# The C pushes are still there: groups do not overwrite each other.
assert ('energy_monitor_gpu_energy_joules_count', tuple(sorted({"job": "e2e", "instance": "c", "rack": "a/b c",
        "window": "sleep", "index": "0"}.items()))) in gw
PY

# The push body passes promtool's lint where Prometheus's promtool is installed.
if command -v promtool >/dev/null; then
  "$PY" -c 'import json,sys; d = json.load(open(sys.argv[1])); print(d["hist"] + d["counter"] + d["gauge"], end="")' \
    "$tmp/py.json" >"$tmp/body" 2>/dev/null
  if [ ! -s "$tmp/body" ]; then fail "promtool check metrics: no push body to check"
  elif promtool check metrics <"$tmp/body" >"$tmp/lint" 2>&1; then pass "promtool check metrics: the push bodies"
  else fail "promtool check metrics"; cat "$tmp/lint"; fi
else
  echo "skip - promtool check metrics (promtool is not installed)"
fi

finish
