#!/usr/bin/env bash
# End-to-end: `zeus frontier` on a small profile — frontier.csv (columns, one unit per point,
# model cost not falling), plan files (Python literals PointSolution can load: one list per
# stage of ("forward"|"backward", MHz) in 1F1B order), --every/--sample, pictures, --json,
# --help, and bad input (exit codes and messages). With the SOSP'24 data present, also the
# GPT-3 profile against the reference frontier's fastest time.
set -u
. "$(dirname "$0")/lib.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prof="$ZEUS_SOURCE_DIR/tests/data/frontier/small_profile.csv"
unit=0.001

# --help
expect_ok "frontier --help" "$ZEUS" frontier --help
expect_out_has "--help has an example" "Example" "$ZEUS" frontier --help
expect_out_has "--help names the environment" "ZEUS_LOG_LEVEL" "$ZEUS" frontier --help
expect_out_has "--help lists the cost models" "--cost-model" "$ZEUS" frontier --help
expect_ok "help frontier" "$ZEUS" help frontier

# A full run: 2 stages x 4 microbatches, every plan written.
out="$tmp/all"
expect_ok "solve 2x4" "$ZEUS" frontier --profile "$prof" --stages 2 --microbatches 4 \
  --blocking-power 50 --out "$out" --plot "$out/frontier.svg" --timeline last
expect_err_has "summary on stderr" " points (" "$ZEUS" frontier --profile "$prof" --stages 2 \
  --microbatches 4 --blocking-power 50 --out "$tmp/again"

# frontier.csv: the documented columns, iterations 0.., time falling one unit per point,
# model cost not falling, evaluated figures positive and the evaluated time within the
# quantisation of the reported one.
if python3 - "$out/frontier.csv" "$unit" 2 4 <<'EOF'
import csv, sys
path, unit, S, M = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
# The most instructions on one path of the 1F1B DAG: each quantised duration hides less than
# a unit, so the evaluated time is at most that many units above the reported one (it can be
# below: a duration between two options runs at the faster one).
def order(s):
    warm = min(S - s - 1, M)
    seq = [("F", m) for m in range(warm)]
    for m in range(M - warm):
        seq += [("F", warm + m), ("B", m)]
    return seq + [("B", m) for m in range(M - warm, M)]
pos = {(s, k, m): i for s in range(S) for i, (k, m) in enumerate(order(s))}
chain = {}
def longest(node):
    if node not in chain:
        s, k, m = node
        preds = []
        i = pos[node]
        if i > 0:
            preds.append((s,) + order(s)[i - 1])
        if k == "F" and s > 0:
            preds.append((s - 1, "F", m))
        if k == "B" and s < S - 1:
            preds.append((s + 1, "B", m))
        chain[node] = 1 + max((longest(p) for p in preds), default=0)
    return chain[node]
most = max(longest(n) for n in pos)
with open(path, newline="") as f:
    rows = list(csv.reader(f))
assert rows[0] == ["iteration", "time_s", "cost_j", "cost_with_blocking_j", "eval_time_s", "eval_energy_j", "dominated"], rows[0]
pts = [[float(x) for x in r] for r in rows[1:]]
assert len(pts) >= 5, len(pts)
for i, p in enumerate(pts):
    assert p[0] == i, (i, p)
    assert p[4] > 0 and p[5] > 0, p
    assert p[4] <= p[1] + most * unit + 1e-9, (p, most)
for a, b in zip(pts, pts[1:]):
    assert abs((a[1] - b[1]) - unit) < 1e-6, (a, b)
    assert b[2] >= a[2] - 1e-6 * abs(a[2]), (a, b)
EOF
then pass "frontier.csv columns and monotonicity"; else fail "frontier.csv columns and monotonicity"; fi

# Plan files: one per point, each a Python literal: S lists of 2M (kind, MHz) tuples in
# 1F1B order (S - s - 1 warm-up forwards), clocks from the profile, then '#' comment lines.
n=$(($(wc -l <"$out/frontier.csv") - 1))
files=$(ls "$out"/freqs_pipeline_*.py | wc -l)
if [ "$files" -eq "$n" ]; then pass "a plan file per point ($n)"; else fail "plan files: $files, points: $n"; fi
if python3 - "$out" "$prof" 2 4 <<'EOF'
import ast, csv, glob, sys
out, prof, S, M = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
clocks = {}
with open(prof, newline="") as f:
    for r in csv.DictReader(f):
        clocks.setdefault((int(r["stage"]), r["instruction"]), set()).add(int(r["frequency"]))
def order(s):
    warm = min(S - s - 1, M)
    seq = ["forward"] * warm
    for _ in range(M - warm):
        seq += ["forward", "backward"]
    return seq + ["backward"] * warm
paths = sorted(glob.glob(out + "/freqs_pipeline_*.py"))
for path in paths:
    text = open(path).read()
    body, _, comments = text.partition("]\n#")
    plan = ast.literal_eval(body + "]")  # what PointSolution does with the file
    assert isinstance(plan, list) and len(plan) == S, path
    for s, stage in enumerate(plan):
        assert [k for k, _ in stage] == order(s), (path, s, stage)
        for kind, mhz in stage:
            assert isinstance(mhz, int) and mhz in clocks[(s, kind)], (path, s, kind, mhz)
    for key in ("iteration", "time_s", "cost_j", "eval_energy_j"):
        assert ("\n# %s: " % key) in "\n#" + comments, (path, key)
# The first plan is all-slowest: every instruction at its stage's lowest kept clock or above,
# the last plan reaches the fastest clocks somewhere.
first = ast.literal_eval(open(paths[0]).read().partition("]\n#")[0] + "]")
last = ast.literal_eval(open(paths[-1]).read().partition("]\n#")[0] + "]")
assert sum(m for st in first for _, m in st) < sum(m for st in last for _, m in st)
EOF
then pass "plan files load as Python and follow 1F1B"; else fail "plan files load as Python and follow 1F1B"; fi

# Pictures: well-formed SVG.
for svg in "$out/frontier.svg" "$out/timeline_$(printf %05d $((n - 1))).svg"; do
  if python3 -c 'import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); assert r.tag.endswith("svg")' "$svg"; then
    pass "$(basename "$svg") is SVG"
  else
    fail "$(basename "$svg") is not well-formed SVG"
  fi
done

# --every and --sample limit the plan files; frontier.csv keeps every point.
expect_ok "--every 5" "$ZEUS" frontier --profile "$prof" --stages 2 --microbatches 4 --blocking-power 50 \
  --out "$tmp/every" --every 5
want=$(((n - 1) / 5 + 1)); [ $(((n - 1) % 5)) -ne 0 ] && want=$((want + 1))
got=$(ls "$tmp/every"/freqs_pipeline_*.py | wc -l)
if [ "$got" -eq "$want" ] && [ -f "$tmp/every/freqs_pipeline_$(printf %05d $((n - 1))).py" ]; then
  pass "--every 5 writes every 5th plan and the last ($got)"
else
  fail "--every 5 wrote $got plans, expected $want"
fi
rows=$(($(wc -l <"$tmp/every/frontier.csv") - 1))
if [ "$rows" -eq "$n" ]; then pass "--every keeps every point in frontier.csv"; else fail "--every: $rows rows"; fi
expect_ok "--sample 4" "$ZEUS" frontier --profile "$prof" --stages 2 --microbatches 4 --blocking-power 50 \
  --out "$tmp/sample" --sample 4
got=$(ls "$tmp/sample"/freqs_pipeline_*.py | wc -l)
if [ "$got" -ge 2 ] && [ "$got" -le 4 ]; then pass "--sample 4 writes 2..4 plans ($got)"; else fail "--sample 4 wrote $got"; fi

# Without --out, frontier.csv goes to stdout; --json prints a summary.
expect_out_has "csv on stdout" "^iteration,time_s,cost_j,cost_with_blocking_j,eval_time_s,eval_energy_j,dominated$" \
  "$ZEUS" frontier --profile "$prof" --stages 2 --microbatches 2 --blocking-power 50
if "$ZEUS" frontier --profile "$prof" --stages 2 --microbatches 2 --blocking-power 50 --json --cost-model hull \
  --pareto energy --slack keep | python3 -c '
import json, sys
j = json.load(sys.stdin)
assert j["num_points"] >= 2 and j["out"] is None, j
assert j["slowest"]["time_s"] > j["fastest"]["time_s"], j
'; then pass "--json summary"; else fail "--json summary"; fi

# Fewer microbatches than stages: refused (usually swapped counts) unless asked for.
expect_code "M < S refused" 1 "$ZEUS" frontier --profile "$prof" --stages 2 --microbatches 1 --blocking-power 50 --json
expect_err_has "M < S named" "microbatches: 1 is fewer than the 2 stages" "$ZEUS" frontier --profile "$prof" --stages 2 \
  --microbatches 1 --blocking-power 50 --json
expect_ok "2 stages x 1 microbatch when asked" "$ZEUS" frontier --profile "$prof" --stages 2 --microbatches 1 \
  --blocking-power 50 --json --allow-fewer-microbatches

# Bad input: usage errors exit 2, failures exit 1, each naming the problem.
expect_code "no arguments" 2 "$ZEUS" frontier
expect_err_has "required options named" "--profile is required" "$ZEUS" frontier --stages 2
expect_err_has "a near miss gets a hint" "did you mean '--microbatches'?" "$ZEUS" frontier --profile "$prof" --stages 2 --microbatch 2 --blocking-power 50
expect_out_has "--opt=value is accepted" "^iteration," "$ZEUS" frontier --profile="$prof" --stages=2 --microbatches=2 --blocking-power=50
expect_code "unknown option" 2 "$ZEUS" frontier --profile "$prof" --stages 2 --microbatches 2 --blocking-power 50 --fast
expect_err_has "unknown option named" "unknown option '--fast'" "$ZEUS" frontier --profile "$prof" --stages 2 --microbatches 2 --blocking-power 50 --fast
expect_code "zero microbatches" 2 "$ZEUS" frontier --profile "$prof" --stages 2 --microbatches 0 --blocking-power 50
expect_err_has "zero microbatches named" "--microbatches" "$ZEUS" frontier --profile "$prof" --stages 2 --microbatches 0 --blocking-power 50
expect_code "non-numeric stages" 2 "$ZEUS" frontier --profile "$prof" --stages two --microbatches 2 --blocking-power 50
expect_code "bad cost model" 2 "$ZEUS" frontier --profile "$prof" --stages 2 --microbatches 2 --blocking-power 50 --cost-model cubic
expect_err_has "bad cost model named" "expected one of exponential|hull, got 'cubic'" "$ZEUS" frontier --profile "$prof" --stages 2 --microbatches 2 --blocking-power 50 --cost-model cubic
expect_err_has "bad pareto named" "expected one of effective|energy" "$ZEUS" frontier --profile "$prof" --stages 2 --microbatches 2 --blocking-power 50 --pareto time
expect_err_has "bad slack named" "expected one of reclaim|keep" "$ZEUS" frontier --profile "$prof" --stages 2 --microbatches 2 --blocking-power 50 --slack drop
expect_code "--every with --sample" 2 "$ZEUS" frontier --profile "$prof" --stages 2 --microbatches 2 --blocking-power 50 --every 2 --sample 3
expect_err_has "--every with --sample explained" "exclude each other" "$ZEUS" frontier --profile "$prof" --stages 2 --microbatches 2 --blocking-power 50 --every 2 --sample 3
expect_code "missing profile" 1 "$ZEUS" frontier --profile "$tmp/nope.csv" --stages 2 --microbatches 2 --blocking-power 50
expect_err_has "missing profile named" "nope.csv" "$ZEUS" frontier --profile "$tmp/nope.csv" --stages 2 --microbatches 2 --blocking-power 50
expect_code "more stages than the profile" 1 "$ZEUS" frontier --profile "$prof" --stages 3 --microbatches 3 --blocking-power 50
expect_err_has "more stages than the profile explained" "has 2 stages, fewer than the 3 stages asked for" "$ZEUS" frontier --profile "$prof" --stages 3 --microbatches 3 --blocking-power 50
expect_code "timeline of a missing plan" 1 "$ZEUS" frontier --profile "$prof" --stages 2 --microbatches 2 --blocking-power 50 --out "$tmp/tl" --timeline 99999
printf 'stage,instruction,frequency,time\n0,forward,1410,0.01\n' >"$tmp/nocol.csv"
expect_code "missing column" 1 "$ZEUS" frontier --profile "$tmp/nocol.csv" --stages 1 --microbatches 1 --blocking-power 50
expect_err_has "missing column named" "missing column 'energy'" "$ZEUS" frontier --profile "$tmp/nocol.csv" --stages 1 --microbatches 1 --blocking-power 50
printf 'stage,instruction,frequency,time,energy\n0,forward,1410,0.01,1\n0,backward,1410,fast,2\n' >"$tmp/nan.csv"
expect_err_has "non-numeric value: file, line and column" "nan.csv:3:4" "$ZEUS" frontier --profile "$tmp/nan.csv" --stages 1 --microbatches 1 --blocking-power 50
printf 'stage,instruction,frequency,time,energy\n0,forward,1410,0.01,1\n0,backward,1410,0.02,2\n1,forward,1410,0.01,1\n' >"$tmp/noopt.csv"
expect_code "stage without options" 1 "$ZEUS" frontier --profile "$tmp/noopt.csv" --stages 2 --microbatches 2 --blocking-power 50
expect_err_has "stage without options named" "stage 1 has no options for backward" "$ZEUS" frontier --profile "$tmp/noopt.csv" --stages 2 --microbatches 2 --blocking-power 50
# An unwritable output folder: a file stands where the folder should be. Found before solving.
touch "$tmp/file"
expect_code "unwritable --out" 1 "$ZEUS" frontier --profile "$prof" --stages 2 --microbatches 2 --blocking-power 50 --out "$tmp/file/sub"
expect_err_has "unwritable --out named before solving" "--out: cannot create or write to the folder '$tmp/file/sub'" \
  "$ZEUS" frontier --profile "$prof" --stages 2 --microbatches 2 --blocking-power 50 --out "$tmp/file/sub"
expect_err_has "unwritable --plot folder named before solving" "--plot: cannot create or write to the folder '$tmp/file/x'" \
  "$ZEUS" frontier --profile "$prof" --stages 2 --microbatches 2 --blocking-power 50 --out "$tmp/early" --plot "$tmp/file/x/f.svg"
if [ ! -e "$tmp/early/frontier.csv" ]; then pass "nothing solved or written when --plot cannot be written"; else fail "frontier.csv written although --plot could not be"; fi
# --plot and --timeline into folders that do not exist yet: created (with their parents).
expect_ok "--plot into a missing folder" "$ZEUS" frontier --profile "$prof" --stages 2 --microbatches 2 --blocking-power 50 \
  --json --plot "$tmp/new/a/b/f.svg" --timeline "last:$tmp/new/c/t.svg"
if [ -s "$tmp/new/a/b/f.svg" ] && [ -s "$tmp/new/c/t.svg" ]; then pass "plot and timeline written into new folders"; else fail "plot or timeline missing"; fi

# A profile whose header starts with a UTF-8 byte-order mark (as spreadsheets write it) is read.
printf '\357\273\277' >"$tmp/bom.csv"
cat "$prof" >>"$tmp/bom.csv"
expect_out_has "a byte-order mark is accepted" "^0,[0-9.]+,[0-9.]+,[0-9.]+,[0-9.]+,[0-9.]+,[01]$" \
  "$ZEUS" frontier --profile "$tmp/bom.csv" --stages 2 --microbatches 2 --blocking-power 50
# Not a regular file: refused at once (/dev/zero used to be read until memory ran out).
expect_code "/dev/zero refused" 1 timeout 20 "$ZEUS" frontier --profile /dev/zero --stages 1 --microbatches 1 --blocking-power 50
expect_err_has "/dev/zero named" "'/dev/zero' is not a regular file" "$ZEUS" frontier --profile /dev/zero --stages 1 --microbatches 1 --blocking-power 50
mkfifo "$tmp/fifo"
expect_code "a FIFO refused without blocking" 1 timeout 20 "$ZEUS" frontier --profile "$tmp/fifo" --stages 1 --microbatches 1 --blocking-power 50
# Past the limits: named at once, not a minute of work and a gigabyte of memory.
expect_err_has "a unit time far below the profile's resolution" "use a larger unit time" \
  "$ZEUS" frontier --profile "$prof" --stages 2 --microbatches 2 --blocking-power 50 --unit-time 1e-9

# The dominated column: 1 exactly where another point is no slower and no costlier by the
# evaluated figures (and better in one); --drop-dominated keeps the others, and their plans.
"$ZEUS" frontier --profile "$prof" --stages 2 --microbatches 4 --blocking-power 50 >"$tmp/all.csv" 2>/dev/null
"$ZEUS" frontier --profile "$prof" --stages 2 --microbatches 4 --blocking-power 50 --out "$tmp/nd" --drop-dominated 2>/dev/null
if python3 - "$tmp/all.csv" "$tmp/nd" <<'EOF'
import csv, glob, os, sys
rows = list(csv.DictReader(open(sys.argv[1])))
pts = [(float(r["eval_time_s"]), float(r["eval_energy_j"])) for r in rows]
ndom = 0
for r, (t, e) in zip(rows, pts):
    dom = any(t2 <= t and e2 <= e and (t2 < t or e2 < e) for t2, e2 in pts)
    assert r["dominated"] == ("1" if dom else "0"), (r, dom)
    ndom += dom
assert 0 < ndom < len(rows), (ndom, len(rows))
kept = list(csv.DictReader(open(os.path.join(sys.argv[2], "frontier.csv"))))
assert len(kept) == len(rows) - ndom and all(r["dominated"] == "0" for r in kept), len(kept)
want = {r["iteration"] for r in rows if r["dominated"] == "0"}
assert {r["iteration"] for r in kept} == want
plans = {str(int(os.path.basename(p)[15:20])) for p in glob.glob(sys.argv[2] + "/freqs_pipeline_*.py")}
assert plans == want, (len(plans), len(want))
EOF
then pass "dominated column and --drop-dominated"; else fail "dominated column and --drop-dominated"; fi

# --json: valid whatever the paths hold (quotes, backslashes, non-ASCII); its keys, with units.
odd="$tmp/we\"ird\\dir/ünï"
if "$ZEUS" frontier --profile "$prof" --stages 2 --microbatches 4 --blocking-power 50 --json --out "$odd" --sample 3 \
  --plot "$odd/p.svg" --timeline "min-energy" | python3 -c '
import json, sys
j = json.load(sys.stdin)
odd = sys.argv[1]
keys = {"num_points", "dominated_points", "plans_written", "solve_time_s", "out", "plot", "timeline", "slowest",
        "fastest", "min_energy"}
assert set(j) == keys, sorted(j)
point = {"iteration", "time_s", "cost_j", "cost_with_blocking_j", "eval_time_s", "eval_energy_j", "dominated"}
for k in ("slowest", "fastest", "min_energy"):
    assert set(j[k]) == point, (k, sorted(j[k]))
    assert isinstance(j[k]["dominated"], bool)
assert j["out"] == odd and j["plot"] == odd + "/p.svg", j
assert j["timeline"].startswith(odd + "/timeline_"), j
assert j["plans_written"] == 3 and isinstance(j["num_points"], int) and isinstance(j["solve_time_s"], float)
assert j["min_energy"]["eval_energy_j"] <= min(j["slowest"]["eval_energy_j"], j["fastest"]["eval_energy_j"])
assert not j["min_energy"]["dominated"]
' "$odd"; then pass "--json is valid with odd paths and pins its keys"; else fail "--json with odd paths"; fi
if [ -f "$odd/frontier.csv" ] && [ -f "$odd/p.svg" ]; then pass "files written under the odd path"; else fail "files under the odd path"; fi

# Progress: quiet when stderr is not a terminal (and under --json), shown when asked for;
# on a terminal it redraws one line. A short solve shows nothing on a terminal either.
err=$("$ZEUS" frontier --profile "$prof" --stages 2 --microbatches 4 --blocking-power 50 --out "$tmp/q" 2>&1 >/dev/null)
if [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] && ! printf '%s' "$err" | grep -q '%)'; then pass "no progress when stderr is not a terminal"; else fail "progress on a pipe: $err"; fi
err=$("$ZEUS" frontier --profile "$prof" --stages 2 --microbatches 4 --blocking-power 50 --json --progress always 2>&1 >/dev/null)
if printf '%s' "$err" | grep -Eq 'points \([0-9]+ %\), iteration time'; then pass "--progress always reports"; else fail "--progress always: $err"; fi
if python3 - "$ZEUS" "$prof" "$tmp/pty" <<'EOF'
import os, pty, subprocess, sys
zeus, prof, out_dir = sys.argv[1:4]
def run(*extra):
    master, slave = pty.openpty()
    p = subprocess.run([zeus, "frontier", "--profile", prof, "--stages", "2", "--microbatches", "4",
                        "--blocking-power", "50", "--out", out_dir, *extra],
                       stdout=subprocess.DEVNULL, stderr=slave, timeout=60)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO once the terminal is closed and drained
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert p.returncode == 0, p.returncode
    return out.decode()
shown = run("--progress", "always")
assert "\r" in shown and "\x1b[K" in shown and "points (" in shown, repr(shown)
quiet = run()  # auto: a solve under a second shows only the summary
assert "iteration time" not in quiet and "zeus frontier: " in quiet, repr(quiet)
EOF
then pass "progress redraws one line on a terminal"; else fail "progress on a terminal"; fi

# The SOSP'24 GPT-3 profile, when the data is present: the fastest time is the reference's.
data=${ZEUS_TEST_DATA_DIR:-${ZEUS_DATA_DIR_DEFAULT:-}}
gpt3="$data/perseus-sosp24/stage_profile/gpt3-175b+a100_sxm_bf16.csv"
ref="$data/perseus-sosp24/frontier/a100_sxm/gpt3-175b_bf16_mb12.csv"
if [ -f "$gpt3" ] && [ -f "$ref" ]; then
  "$ZEUS" frontier --profile "$gpt3" --stages 8 --microbatches 12 --blocking-power 83.64 --out "$tmp/gpt3" --sample 5 2>/dev/null
  if python3 - "$tmp/gpt3/frontier.csv" "$ref" <<'EOF'
import csv, sys
ours = [float(r["time_s"]) for r in csv.DictReader(open(sys.argv[1]))]
ref = [float(r["time"]) for r in csv.DictReader(open(sys.argv[2]))]
assert abs(min(ours) - min(ref)) < 5e-4, (min(ours), min(ref))
EOF
  then pass "GPT-3 175B: fastest iteration time equals the reference's"; else fail "GPT-3 175B fastest time"; fi
else
  echo "SKIPPED: the SOSP'24 data is absent ($gpt3)"
fi

finish
