#!/usr/bin/env bash
# examples/pipeline_sim against `zeus pfo-server`: --help and bad arguments; AllMaxFrequency gives
# the analytic iteration time of the simulated pipeline every round; a PointSolution plan that
# slows the middle stages saves energy; InstructionProfiler writes the instruction CSV; the 3D
# wrapper runs a dp2 x pp2 x tp2 job; a server that is gone is a clear error.
set -uo pipefail
ZEUS=${ZEUS:?path of the zeus binary}
. "$(dirname "$0")/lib.sh"
SIM=${ZEUS_BUILD_DIR:?}/pipeline_sim
[ -x "$SIM" ] || { echo "SKIPPED: $SIM is not built"; exit 77; }
PY=$(command -v python3) || { echo "SKIPPED: python3 is needed to read JSON"; exit 77; }
tmp=$(mktemp -d)
srv=
trap '[ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$tmp"' EXIT
export ZEUS_PFO_RETRIES=2 ZEUS_PFO_RETRY_BACKOFF=0.05 ZEUS_PFO_SCHEDULE_TIMEOUT=60

start_server() { # args...: starts zeus pfo-server on a free port, sets $srv and $url
  # The previous server's srv.out must go first: the background job truncates it only once it
  # runs, and until then the loop below would read the old (closed) port.
  rm -f "$tmp/srv.out"
  "$ZEUS" pfo-server --port 0 --log-level warn --dump-data --dump-dir "$tmp/dump" "$@" >"$tmp/srv.out" 2>"$tmp/srv.log" &
  srv=$!
  for _ in $(seq 400); do grep -q port "$tmp/srv.out" 2>/dev/null && break; sleep 0.05; done
  url="http://127.0.0.1:$(awk '{print $NF}' "$tmp/srv.out")"
}
stop_server() { kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null; srv=; }
json_check() { # python expression over `r` (the list of rounds) read from $1
  "$PY" -c "import json,sys; r=json.load(open(sys.argv[1])); sys.exit(0 if ($2) else 1)" "$1"
}

expect_out_has "help lists the options" "--iters-per-round" "$SIM" --help
expect_out_has "help lists the settings" "ZEUS_PFO_SERVER_URL" "$SIM" --help
expect_code "missing --pp is a usage error" 2 "$SIM" --server http://127.0.0.1:1 --microbatches 2 --iterations 2
expect_err_has "missing --pp says what is needed" "pipeline_sim: --pp is required" \
  "$SIM" --server http://127.0.0.1:1 --microbatches 2 --iterations 2
expect_err_has "a bad number is named" "--microbatches: expected an integer, got 'x'" \
  "$SIM" --pp 2 --microbatches x --iterations 2

# AllMaxFrequency: pp 4, 4 microbatches. The critical path at 1740 MHz is the last stage's
# 4 x (15 + 30) ms plus the fill (13 + 10 + 10 ms) and the drain (20 + 20 + 26 ms): 0.279 s.
start_server --scheduler AllMaxFrequency
expect_ok "pp4 job with AllMaxFrequency" "$SIM" --server "$url" --pp 4 --microbatches 4 --iterations 20 \
  --iters-per-round 5 --json
"$SIM" --server "$url" --pp 4 --microbatches 4 --iterations 20 --iters-per-round 5 --json >"$tmp/max.json"
if json_check "$tmp/max.json" "len(r) == 4 and [x['round'] for x in r] == [0,1,2,3] and all(abs(x['iter_time_s'] - 0.279) < 1e-9 and x['iter_energy_j'] > 0 and set(x) == {'round', 'iterations', 'iter_time_s', 'iter_energy_j', 'true_iter_energy_j', 'planned_clock_fraction', 'pipelines'} and x['iterations'] == 5 and x['pipelines'] == [{'dp': 0, 'iter_time_s': x['iter_time_s'], 'iter_energy_j': x['iter_energy_j'], 'true_iter_energy_j': x['true_iter_energy_j']}] and abs(x['iter_energy_j'] / x['true_iter_energy_j'] - 1) < 1e-3 and x['planned_clock_fraction'] == 1 for x in r)"; then
  pass "every round lasts the analytic 0.279 s"
else
  fail "AllMaxFrequency rounds: $(cat "$tmp/max.json")"
fi
expect_out_has "the table form prints rounds" "^3 +5 +0\.279000" "$SIM" --server "$url" --pp 4 --microbatches 4 \
  --iterations 20 --iters-per-round 5
expect_ok "dp2 x pp2 x tp2 with AllMaxFrequency" "$SIM" --server "$url" --pp 2 --dp 2 --tp 2 --microbatches 2 \
  --iterations 4 --iters-per-round 2
stop_server

# PointSolution: the same 1F1B order, middle stages at 1200 MHz.
"$PY" - "$tmp/plan.py" <<'EOF'
import sys
pp, m = 4, 4
with open(sys.argv[1], "w") as f:
    f.write("[\n")
    for s in range(pp):
        warm = min(pp - s - 1, m)
        order = ["forward"] * warm
        for _ in range(m - warm):
            order += ["forward", "backward"]
        order += ["backward"] * warm
        mhz = 1740 if s in (0, pp - 1) else 1200
        f.write("  [" + ", ".join('("%s", %d)' % (i, mhz) for i in order) + "],\n")
    f.write("]\n")
EOF
start_server --scheduler PointSolution --scheduler-args "{\"solution_path\": \"$tmp/plan.py\"}"
"$SIM" --server "$url" --pp 4 --microbatches 4 --iterations 10 --iters-per-round 5 --json >"$tmp/plan.json"
if json_check "$tmp/plan.json" "len(r) == 2 and all(x['iter_energy_j'] < 183.0 and x['iter_time_s'] < 0.279 * 1.2 for x in r)"; then
  pass "slower middle stages save energy (max: $(cut -c1-80 "$tmp/max.json"), plan: $(cut -c1-80 "$tmp/plan.json"))"
else
  fail "PointSolution rounds: $(cat "$tmp/plan.json")"
fi
stop_server

# InstructionProfiler: warm-up round, 10 frequencies (1740..1605), final round.
start_server --scheduler InstructionProfiler --scheduler-args '{"warmup_iters": 0, "min_frequency": 1605, "patience": 100}'
expect_ok "pp4 job with InstructionProfiler" "$SIM" --server "$url" --pp 4 --microbatches 4 --iterations 24 \
  --iters-per-round 2
csv=$(ls "$tmp"/dump/*InstructionProfiler*/instruction_profile.csv 2>/dev/null | head -1)
if [ -n "$csv" ] && [ "$(head -1 "$csv")" = "rank,dp_rank,pp_rank,tp_rank,stage,instruction,frequency,time,energy" ] &&
   [ "$(wc -l <"$csv")" -eq 81 ]; then
  pass "the instruction CSV has 4 ranks x 2 instructions x 10 frequencies"
else
  fail "instruction CSV '$csv': $(wc -l <"$csv" 2>/dev/null) lines"
fi
stop_server

# No server (port 1: nothing listens there; a port just freed could be taken by a test running
# beside this one): a clear error after the retries.
expect_code "a server that is gone fails the run" 1 "$SIM" --server http://127.0.0.1:1 --pp 2 --microbatches 2 \
  --iterations 2
expect_err_has "and says why" "is the server running at that address?" "$SIM" --server http://127.0.0.1:1 --pp 2 \
  --microbatches 2 --iterations 2
finish
