#!/usr/bin/env bash
# End-to-end: the numbers the CLI and the servers write, compared as TEXT (docs/output.md). A
# figure is written at the resolution it was measured at (J from mJ counters with at most three
# decimals, s from ns clocks with at most nine), derived figures at six significant digits, and
# no document carries binary-float noise such as 0.049999999999999996 or 0.10099999999999999.
set -u
. "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || { echo "SKIPPED: python3 is needed to read JSON"; exit 77; }
export ZEUS_GPU_BACKEND=sim ZEUS_SIM_GPUS=2 ZEUS_RAPL_ROOT=/nonexistent-rapl-root
T=$(mktemp -d)
srv=
trap '[ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$T"' EXIT

# check_numbers.py DOC [RULE...]: reads DOC keeping every number's text (parse_float/parse_int), and
# checks each against the rules: KEYSUFFIX=decimals:N (at most N decimals), KEYSUFFIX=digits:N
# (at most N significant digits); every number at most 12 significant digits whatever its key
# (noise has 16 or 17). With --sum OBJ KEY: the parts in OBJ add up, in decimal, to KEY. With
# --exact KEY: KEY is a parameter written exactly as it was passed on (a learning rate).
cat >"$T/check_numbers.py" <<'EOF'
import decimal, json, re, sys
path, args = sys.argv[1], sys.argv[2:]
rules, sums, exact = [], [], set()
while args:
    a = args.pop(0)
    if a == "--sum": sums.append((args.pop(0), args.pop(0)))
    elif a == "--exact": exact.add(args.pop(0))
    else:
        k, v = a.split("="); kind, n = v.split(":"); rules.append((k, kind, int(n)))
class Num(str): pass
doc = json.load(open(path), parse_float=Num, parse_int=Num)
bad = []
def sig(t):  # significant digits: 183872.0 has 6, 0.00207247 has 6, 300 has 1
    return len(t.lstrip("-").split("e")[0].replace(".", "").strip("0"))
def dec(t):
    m = t.split("e")[0]
    return len(m.split(".")[1]) if "." in m else 0
def walk(v, key):
    if isinstance(v, dict):
        for k, x in v.items(): walk(x, k)
    elif isinstance(v, list):
        for x in v: walk(x, key)
    elif isinstance(v, Num) and key not in exact:
        if sig(v) > 12: bad.append("%s: %s has %d significant digits" % (key, v, sig(v)))
        for suffix, kind, n in rules:
            if key and key.endswith(suffix):
                if kind == "decimals" and dec(v) > n: bad.append("%s: %s has more than %d decimals" % (key, v, n))
                if kind == "digits" and sig(v) > n: bad.append("%s: %s has more than %d digits" % (key, v, n))
walk(doc, None)
for obj, total in sums:
    parts = sum(decimal.Decimal(str(x)) for x in doc[obj].values())
    if parts != decimal.Decimal(str(doc[total])):
        bad.append("%s: the parts %s add up to %s, not %s" % (total, dict(doc[obj]), parts, doc[total]))
for b in bad: print("   ", b)
sys.exit(1 if bad else 0)
EOF
check() { # check NAME DOC RULES...
  local name=$1 doc=$2; shift 2
  if python3 "$T/check_numbers.py" "$doc" "$@"; then pass "$name"; else fail "$name"; sed 's/^/    /' "$doc" | head -30; fi
}

# 1. monitor energy: GPU energies are differences of mJ counts, the total their exact sum, the time
# a difference of ns. Twenty short runs meet the sums that used to print as 0.10099999999999999.
ok=1
for i in $(seq 20); do
  "$ZEUS" monitor energy --json -- sh -c ':' >"$T/me$i.json" 2>/dev/null || { ok=0; break; }
  python3 "$T/check_numbers.py" "$T/me$i.json" _j=decimals:3 _s=decimals:9 --sum gpu_energy_j total_energy_j \
    || { ok=0; cat "$T/me$i.json"; break; }
done
[ $ok = 1 ] && pass "monitor energy --json: J at the mJ, the total the exact sum, s at the ns (20 runs)" \
  || fail "monitor energy --json numbers"
# The text report says the same at three decimals.
"$ZEUS" monitor energy -- true 2>"$T/me.txt" >/dev/null
grep -Eq '^  total: +[0-9]+\.[0-9]{3} J$' "$T/me.txt" && pass "monitor energy text: the total at the mJ" \
  || { fail "monitor energy text"; cat "$T/me.txt"; }

# 2. zeus gpus: limits from mW, clocks in MHz, as numbers with a fraction kept.
"$ZEUS" gpus --json >"$T/gpus.json"
check "gpus --json" "$T/gpus.json" _w=decimals:3
grep -q '"power_limit_w": 300.0,' "$T/gpus.json" && pass "gpus --json writes 300.0, not 300 or 300.00000000000006" \
  || fail "gpus --json power_limit_w text"

# 3. zeus plo demo (simulated, virtual clock: deterministic): measured figures pinned as text.
if zeus_has plo; then
  "$ZEUS" plo demo --json >"$T/plo.json" 2>/dev/null
  check "plo demo --json" "$T/plo.json" _j=decimals:3 _s=decimals:9
  if python3 - "$T/plo.json" <<'EOF'
import sys
t = open(sys.argv[1]).read()
assert '"power_limit_w": 275.0,\n      "time_s": 2.053571429,\n      "energy_j": 1121.304\n' in t, t[:2000]
EOF
  then pass "plo demo --json: 275 W measured as 2.053571429 s and 1121.304 J (text)"; else fail "plo demo --json text"; fi
else skip_part "zeus plo"; fi

# 4. zeus frontier: frontier.csv at the us and the uJ, without trailing zeros (text pinned).
if zeus_has frontier; then
  "$ZEUS" frontier --profile "$ZEUS_SOURCE_DIR/tests/data/frontier/small_profile.csv" --stages 2 --microbatches 4 \
    --blocking-power 60 --out "$T/fr" --sample 2 >/dev/null 2>&1
  if [ "$(sed -n 2p "$T/fr/frontier.csv")" = "0,0.322,34.227169,72.867169,0.322,73.2,1" ]; then
    pass "frontier.csv: 0,0.322,34.227169,72.867169,0.322,73.2,1"
  else fail "frontier.csv row 1: $(sed -n 2p "$T/fr/frontier.csv")"; fi
  if awk -F, 'NR > 1 { for (i = 2; i <= 6; i++) if ($i ~ /\.[0-9]*0$/ || $i ~ /\.[0-9]{7,}/) bad++ } END { exit bad > 0 }' \
    "$T/fr/frontier.csv"; then pass "frontier.csv: no trailing zeros, at most 6 decimals"; else fail "frontier.csv figures"; fi
  grep -q '^# eval_energy_j: 73.2$' "$T"/fr/freqs_pipeline_00000.py && pass "plan file comments at the same resolution" \
    || { fail "plan file comments"; tail -8 "$T"/fr/freqs_pipeline_00000.py; }
  "$ZEUS" frontier --profile "$ZEUS_SOURCE_DIR/tests/data/frontier/small_profile.csv" --stages 2 --microbatches 4 \
    --blocking-power 60 --json >"$T/fr.json" 2>/dev/null
  check "frontier --json" "$T/fr.json" _j=decimals:6 _s=decimals:9
  grep -q '"eval_energy_j": 73.2,' "$T/fr.json" && pass "frontier --json: 73.2, not 73.19999999999999" \
    || fail "frontier --json text"
else skip_part "zeus frontier"; fi

# 5. zeus run: the history's energies at the mJ, times at the ns, costs at six digits.
TRAINEE="$ZEUS_BUILD_DIR/trainee_sim"
if zeus_has run && [ -x "$TRAINEE" ]; then
  R=(--batch-sizes 32,64,128 --default-bs 64 --target-metric 0.6 --max-epochs 20 --lr 0.1 --optimizer adam
     --log-base "$T/run")
  "$ZEUS" run "${R[@]}" --recurrences 3 --quiet -- "$TRAINEE" --bs {bs} --lr {lr} --seed {seed} --epochs {epochs} \
    >/dev/null 2>&1
  "$ZEUS" run "${R[@]}" --recurrences 0 --json -- "$TRAINEE" --bs {bs} --lr {lr} --seed {seed} --epochs {epochs} \
    >"$T/run.json" 2>/dev/null
  check "run --json" "$T/run.json" --exact learning_rate energy_j=decimals:3 time_s=decimals:9 cost_j=digits:6 _sd_j=digits:6
  f=$(ls "$T"/run/*/*.train.json | head -1)
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); json.dump({"energy_j": d["energy"], "time_s": d["time"], "cost_j": d["cost"]}, open(sys.argv[2], "w"))' \
    "$f" "$T/train.json"
  check "run: the trainee's result file" "$T/train.json" _j=decimals:3 time_s=decimals:9 cost_j=digits:6
else skip_part "zeus run or trainee_sim"; fi

# 6. zeus simulate on the NSDI'23 traces (when the measured data is there): six digits.
DATA=${ZEUS_DATA_DIR:-${ZEUS_DATA_DIR_DEFAULT:-}}
if zeus_has simulate && [ -n "$DATA" ] && [ -d "$DATA/nsdi23-trace" ]; then
  "$ZEUS" simulate --trace-dir "$DATA/nsdi23-trace" --gpu v100 --dataset cifar100 --network shufflenetv2 \
    --optimizer adadelta --target-metric 0.6 --max-epochs 100 --default-bs 1024 --json >"$T/sim.json" 2>/dev/null
  check "simulate --json" "$T/sim.json" _j=digits:6 _s=digits:6 _pct=digits:6
else echo "skip - simulate: no measured data folder (ZEUS_DATA_DIR)"; fi

# 7. The Perseus server: its status, plans and dumps.
PSIM="$ZEUS_BUILD_DIR/pipeline_sim"
if zeus_has pfo-server && [ -x "$PSIM" ] && command -v curl >/dev/null; then
  "$ZEUS" pfo-server --port 0 --log-level warn --scheduler Perseus \
    --scheduler-args '{"warmup_iters": 0, "min_frequency": 1620}' --dump-data --dump-dir "$T/dump" \
    >"$T/srv.out" 2>"$T/srv.log" &
  srv=$!
  for _ in $(seq 100); do grep -q port "$T/srv.out" 2>/dev/null && break; sleep 0.05; done
  port=$(awk '{print $NF}' "$T/srv.out")
  timeout 120 "$PSIM" --server "http://127.0.0.1:$port" --pp 2 --dp 1 --microbatches 4 --iterations 30 \
    --iters-per-round 1 --pace 0.005 >/dev/null 2>&1 || fail "pipeline_sim against the server"
  job=$(ls "$T/dump" | head -1)
  curl -sf "http://127.0.0.1:$port/perseus/$job" >"$T/status.json" || fail "GET /perseus/<job>"
  curl -sf "http://127.0.0.1:$port/perseus/$job/plans" >"$T/plans.json" || fail "GET /perseus/<job>/plans"
  kill "$srv"; wait "$srv" 2>/dev/null; srv=
  check "pfo-server: GET /perseus/<job>" "$T/status.json" _j=decimals:3 _s=decimals:9
  check "pfo-server: GET /perseus/<job>/plans" "$T/plans.json" _j=decimals:3 _s=decimals:9
  check "pfo-server: perseus.json" "$T/dump/$job/perseus.json" _j=decimals:3 _s=decimals:9
  python3 -c 'import json,sys; json.dump(json.load(open(sys.argv[1])), open(sys.argv[2], "w"))' \
    "$T/dump/$job/1.prof.json" "$T/prof.json"
  check "pfo-server: a dumped profile round" "$T/prof.json"
  if awk -F, 'NR > 1 && ($4 ~ /\.[0-9]{10,}/ || $5 ~ /\.[0-9]{7,}/) { bad++ } END { exit bad > 0 }' \
    "$T/dump/$job/stage_profile.csv"; then pass "stage_profile.csv: times at the ns, energies at the uJ"
  else fail "stage_profile.csv"; head -5 "$T/dump/$job/stage_profile.csv"; fi
else skip_part "zeus pfo-server, pipeline_sim or curl"; fi

finish
