#!/usr/bin/env bash
# End-to-end: `zeus plo replay` on every measured profile against optima and call sequences that a
# Python reference computes from the CSV; `zeus plo demo`; help and bad input.
set -u
. "$(dirname "$0")/lib.sh"

expect_ok "plo --help" "$ZEUS" plo --help
expect_out_has "plo --help has an example" "Example" "$ZEUS" plo --help
expect_out_has "plo --help names the environment" "ZEUS_GPU_BACKEND" "$ZEUS" plo --help
expect_out_has "zeus --help lists plo" "plo +power-limit optimizer" "$ZEUS" --help
expect_ok "help plo" "$ZEUS" help plo

# demo: the table, the choice, the saving
expect_out_has "demo prints the chosen limit" "^optimal power limit: [0-9]+ W" "$ZEUS" plo demo
expect_out_has "demo prints the saving" "against the maximum limit \(300 W\): energy saved" "$ZEUS" plo demo
ZEUS_SIM_GPUS=2 expect_out_has "demo on 2 GPUs changes both" "GPUs 0,1 -> 275 W" "$ZEUS" plo demo
expect_out_has "demo --json" '"optimal_power_limit_w"' "$ZEUS" plo demo --json --selector energy

# bad input
P=$(mktemp -d)
trap 'rm -rf "$P"' EXIT
printf 'start_time,window_name,elapsed_time,gpu0_energy\n1,__GlobalPowerLimitOptimizer_300,10,100\n2,__GlobalPowerLimitOptimizer_200,12,90\n' >"$P/small.csv"
expect_ok "replay a small profile" "$ZEUS" plo replay --profile "$P/small.csv"
expect_code "replay without --profile" 2 "$ZEUS" plo replay
expect_err_has "replay without --profile says so" "--profile FILE.csv is required" "$ZEUS" plo replay
expect_code "unknown subcommand" 2 "$ZEUS" plo frob
expect_err_has "a misspelled subcommand gets a suggestion" "did you mean 'replay'" "$ZEUS" plo rpelay
expect_code "demo refuses --profile" 2 "$ZEUS" plo demo --profile "$P/small.csv"
expect_ok "--opt=value is accepted" "$ZEUS" plo replay --profile="$P/small.csv" --warmup=2 --profile-steps=5
expect_code "unknown option" 2 "$ZEUS" plo replay --profile "$P/small.csv" --frob
expect_err_has "eta out of range" "--eta: 1.5 is outside [0, 1]" "$ZEUS" plo replay --profile "$P/small.csv" --eta 1.5
expect_err_has "factor below 1" "--factor: 0.5 is outside" "$ZEUS" plo replay --profile "$P/small.csv" --selector max-slowdown --factor 0.5
expect_err_has "max-slowdown needs a factor" "needs --factor" "$ZEUS" plo replay --profile "$P/small.csv" --selector max-slowdown
expect_err_has "eta with another selector" "--eta applies to --selector zeus-cost only" "$ZEUS" plo replay --profile "$P/small.csv" --selector time --eta 0.3
expect_err_has "unknown selector" "expected one of energy|time|zeus-cost|max-slowdown, got 'fast'" "$ZEUS" plo replay --profile "$P/small.csv" --selector fast
expect_err_has "zero profile steps" "--profile-steps: 0 is outside" "$ZEUS" plo replay --profile "$P/small.csv" --profile-steps 0
expect_err_has "negative warmup" "--warmup: -1 is outside" "$ZEUS" plo replay --profile "$P/small.csv" --warmup -1
expect_err_has "missing file is named" "/nonexistent/p.csv" "$ZEUS" plo replay --profile /nonexistent/p.csv
printf 'start_time,window_name,elapsed_time\n1,__GlobalPowerLimitOptimizer_300,10\n' >"$P/nogpu.csv"
expect_err_has "profile without energy columns" "no gpu0_energy column" "$ZEUS" plo replay --profile "$P/nogpu.csv"
printf 'start_time,window_name,elapsed_time,gpu0_energy\n1,window,10,100\n' >"$P/badname.csv"
expect_err_has "window name without a limit" "does not end in _<power limit in W>" "$ZEUS" plo replay --profile "$P/badname.csv"
expect_err_has "epochs too short" "too short to profile one power limit" "$ZEUS" plo replay --profile "$P/small.csv" --steps-per-epoch 10
expect_err_has "not done after the epochs asked for" "not done after 1 epoch" "$ZEUS" plo replay --profile "$P/small.csv" --epochs 1 --steps-per-epoch 60

# Every measured profile, every selector: the optimum and the exact calls, from a reference.
DATA=${ZEUS_DATA_DIR:-$ZEUS_DATA_DIR_DEFAULT}
if [ ! -d "$DATA/plo-profiles" ]; then
  echo "SKIPPED: $DATA/plo-profiles is absent (the replays against measured profiles)"
  finish
  exit $?
fi
for f in "$DATA"/plo-profiles/*.csv; do
  for sel in "--selector energy" "--selector time" "--eta 0" "--eta 0.25" "--eta 0.5" "--eta 0.75" "--eta 1" \
             "--selector max-slowdown --factor 1.0" "--selector max-slowdown --factor 1.1" \
             "--selector max-slowdown --factor 1.5" "--selector max-slowdown --factor 100"; do
    # shellcheck disable=SC2086
    for epochs in "" "--steps-per-epoch 40 --warmup 3 --profile-steps 20"; do
      out=$("$ZEUS" plo replay --profile "$f" $sel $epochs --json 2>"$P/err") || { fail "replay $f $sel $epochs: $(cat "$P/err")"; continue; }
      if echo "$out" | python3 -c '
import csv, json, sys
path, args = sys.argv[1], sys.argv[2].split()
got = json.load(sys.stdin)
rows = list(csv.DictReader(open(path)))
ngpu = sum(1 for k in rows[0] if k.startswith("gpu") and k.endswith("_energy"))
m = [(int(r["window_name"].rsplit("_", 1)[1]), sum(float(r["gpu%d_energy" % i]) for i in range(ngpu)),
      float(r["elapsed_time"])) for r in rows]
opt = dict(zip(args[::2], args[1::2]))
top = max(l for l, _, _ in m)
t_top = [t for l, _, t in m if l == top][0]
if opt.get("--selector") == "energy": key = lambda x: x[1]
elif opt.get("--selector") == "time": key = lambda x: x[2]
elif opt.get("--selector") == "max-slowdown":
    f = float(opt["--factor"]); key = lambda x: x[0] if x[2] <= f * t_top else float("inf")
else:
    eta = float(opt.get("--eta", 0.5)); key = lambda x: eta * x[1] + (1 - eta) * top * ngpu * x[2]
want = min(m, key=lambda x: (key(x), x[0]))[0]
assert got["optimal_power_limit_w"] == want, (got["optimal_power_limit_w"], want)
# The calls: every limit below the maximum in order on every GPU, then the optimum. With 40-step
# epochs the warmup (3) + window (20) of the second limit is cut by each epoch end, so each limit
# goes max -> L, interrupted -> max, retried -> L.
limits = [l for l, _, _ in m]
seq, cur = [], top
def go(l):
    global cur
    if l != cur: seq.extend({"gpu": g, "power_limit_w": float(l)} for g in range(ngpu)); cur = l
if "--steps-per-epoch" in opt:
    # epoch 1: wait 1 -> L0 at step 2, L1 at 2+23=25, cut at 40; then every epoch: L_i at 1, L_i+1 at 24, cut at 40
    go(limits[0]); go(limits[1]); go(top)
    for i in range(1, len(limits)):
        go(limits[i])
        if i + 1 < len(limits): go(limits[i + 1]); go(top)
else:
    for l in limits: go(l)
go(want)
assert got["set_power_limit_calls"] == seq, (got["set_power_limit_calls"], seq)
assert [x["power_limit_w"] for x in got["measurements"]] == limits == got["power_limits_w"]
assert got["profile"] == path and got["num_gpus"] == ngpu
' "$f" "$sel $epochs" 2>"$P/err"; then pass "replay $(basename "$f") $sel $epochs"; else fail "replay $(basename "$f") $sel $epochs: $(tail -3 "$P/err")"; fi
    done
  done
done
finish
