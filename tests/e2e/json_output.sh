#!/usr/bin/env bash
# End-to-end: every --json report is one valid JSON document whose keys are a public interface
# (README, "Output"). For each command: the exact keys at every level are pinned, every key with a
# unit suffix (_w, _j, _s, _mhz, _pct) holds reals (or null), no real sits under a key without a
# unit unless it is a dimensionless number named for what it is, and no number is a string. Paths
# with quotes, backslashes, a newline-free control of odd characters and non-ASCII go through every
# report that carries a path or a name, and must come back unchanged.
set -u
. "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || { echo "SKIPPED: python3 is needed to read JSON"; exit 77; }
TRAINEE="$ZEUS_BUILD_DIR/trainee_sim"
[ -x "$TRAINEE" ] || { echo "SKIPPED: $TRAINEE is not built"; exit 77; }
export ZEUS_GPU_BACKEND=sim ZEUS_SIM_GPUS=1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
# A folder name no hand-built JSON survives: quotes, a backslash, non-ASCII, spaces.
ODD="$T/we\"ird\\dir 'é€ü"
mkdir -p "$ODD"

# The checker: check.py DOC SHAPE [EXPECT...] where SHAPE names an entry of SHAPES below and each
# EXPECT is a dotted.path=value that must hold exactly (values compared as strings).
cat >"$T/check.py" <<'EOF'
import json, sys

R, I, S, B, N = "real", "int", "str", "bool", "null"
def opt(t): return ("opt", t)          # t or null
def lst(t): return ("list", t)
def dct(t): return ("map", t)          # an object whose keys are data (GPU indices)
PLO_MEAS = {"power_limit_w": R, "time_s": R, "energy_j": R}
FIG = {"energy_j": R, "time_s": R, "cost_j": R}
FIG_BS = {"batch_size": I, "power_limit_w": R, "energy_j": R, "time_s": R, "cost_j": R}
WORKLOAD = {"dataset": S, "network": S, "optimizer": S, "target_metric": R, "max_epochs": I,
            "default_batch_size": I}
SIM_SUMMARY = {"recurrences": I, "tries": I, "batch_sizes": lst(I), "default_batch_size": I,
               "num_power_limits": I, "max_power_w": R, "total": FIG,
               "baseline_per_recurrence": FIG_BS, "oracle_per_recurrence": FIG_BS,
               "energy_saved_pct": R, "time_saved_pct": R}
SIM_OPTIONS = {"eta": R, "beta": opt(R), "seed": I}
SHAPES = {
    "gpus": {"backend": S, "gpu_error": opt(S),
             "gpus": lst({"index": I, "name": S, "uuid": S, "power_limit_w": opt(R),
                          "power_limit_min_w": opt(R), "power_limit_max_w": opt(R),
                          "power_limit_default_w": opt(R), "graphics_clocks_mhz": lst(R),
                          "total_energy_supported": opt(B), "power_scope": S}),
             "cpu_error": opt(S),
             "cpus": lst({"index": I, "zone": I, "name": S, "energy_path": S, "dram": B,
                          "dram_energy_path": opt(S)}),
             "soc": opt({"kind": S, "error": opt(S),
                         "rails": lst({"rail": S, "label": S, "direct": B, "power_path": opt(S),
                                       "voltage_path": opt(S), "current_path": opt(S),
                                       "power_w": opt(R)})})},
    "monitor energy": {"command": lst(S), "exit_code": I, "time_s": R, "gpu_energy_j": dct(R),
                       "cpu_energy_j": dct(R), "dram_energy_j": dct(R), "total_energy_j": R},
    "plo": {"profile": opt(S), "selector": ("any-of", [{"name": S}, {"name": S, "eta": R},
                                                      {"name": S, "factor": R}]),
            "num_gpus": I, "power_limits_w": lst(R), "optimal_power_limit_w": R,
            "set_power_limit_calls": lst({"gpu": I, "power_limit_w": R}),
            "measurements": lst(PLO_MEAS), "confidence": R, "contenders_w": lst(R)},
    "simulate": {"trace_dir": S, "gpu": S, "options": SIM_OPTIONS, "workload": WORKLOAD,
                 "history": lst({"recurrence": I, "try": I, "batch_size": I, "power_limit_w": R,
                                 "epochs": I, "energy_j": R, "time_s": R, "cost_j": R,
                                 "reached": B}),
                 "summary": SIM_SUMMARY},
    "simulate --all": {"trace_dir": S, "gpu": S, "options": SIM_OPTIONS,
                       "workloads": lst({"workload": WORKLOAD, "summary": SIM_SUMMARY})},
    "run": {"logdir": S, "state": S, "recurrences_done": I, "next_try": I, "min_cost_j": opt(R),
            "max_power_w": R,
            "history": lst({"recurrence": I, "try": I, "batch_size": I, "learning_rate": opt(R),
                            "seed": I, "cost_threshold_j": opt(R), "energy_j": opt(R),
                            "time_s": opt(R), "cost_j": opt(R), "epochs": opt(I), "reached": B,
                            "status": S, "exit_code": I}),
            "optimizer": {"phase": S, "expecting_batch_size": opt(I),
                          "observations": lst({"batch_size": I, "cost_j": opt(R)}),
                          "arms": lst({"batch_size": I, "mean_cost_j": opt(R),
                                       "mean_cost_sd_j": opt(R), "cost_sd_j": opt(R),
                                       "num_observations": I})}},
    "pipeline_sim": lst({"round": I, "iterations": I, "iter_time_s": R, "iter_energy_j": R,
                         "true_iter_energy_j": R, "planned_clock_pct": R,
                         "pipelines": lst({"dp": I, "iter_time_s": R, "iter_energy_j": R,
                                           "true_iter_energy_j": R})}),
    "frontier": {"num_points": I, "dominated_points": I, "plans_written": I, "solve_time_s": R,
                 "out": opt(S), "plot": opt(S), "timeline": opt(S),
                 **{k: {"iteration": I, "time_s": R, "cost_j": R, "cost_with_blocking_j": R,
                        "eval_time_s": R, "eval_energy_j": R, "dominated": B}
                    for k in ("slowest", "fastest", "min_energy")}},
}
UNITS = ("_w", "_j", "_s", "_mhz", "_pct")
# Reals that carry no unit: weights, factors and metrics named for what they are.
DIMENSIONLESS = {"eta", "beta", "factor", "target_metric", "learning_rate", "confidence"}  # a probability

def kind(v):
    if v is None: return N
    if isinstance(v, bool): return B
    if isinstance(v, int): return I
    if isinstance(v, float): return R
    if isinstance(v, str): return S
    return type(v).__name__

def check(v, shape, where, key=""):
    if isinstance(shape, tuple) and shape[0] == "opt":
        return None if v is None else check(v, shape[1], where, key)
    if isinstance(shape, tuple) and shape[0] == "list":
        assert isinstance(v, list), f"{where}: expected a list, got {kind(v)}"
        for i, x in enumerate(v): check(x, shape[1], f"{where}[{i}]", key)
        return
    if isinstance(shape, tuple) and shape[0] == "map":
        assert isinstance(v, dict), f"{where}: expected an object, got {kind(v)}"
        for k, x in v.items():
            assert k.isdigit(), f"{where}: key {k!r} is not an index"
            check(x, shape[1], f"{where}.{k}", key)
        return
    if isinstance(shape, tuple) and shape[0] == "any-of":
        keys = set(v) if isinstance(v, dict) else None
        for s in shape[1]:
            if keys == set(s): return check(v, s, where, key)
        raise AssertionError(f"{where}: keys {sorted(keys or [])} match none of {[sorted(s) for s in shape[1]]}")
    if isinstance(shape, dict):
        assert isinstance(v, dict), f"{where}: expected an object, got {kind(v)}"
        assert set(v) == set(shape), (f"{where}: keys differ: extra {sorted(set(v) - set(shape))}, "
                                      f"missing {sorted(set(shape) - set(v))}")
        for k, s in shape.items(): check(v[k], s, f"{where}.{k}", k)
        return
    assert kind(v) == shape, f"{where}: expected {shape}, got {kind(v)} ({v!r})"
    # the unit convention
    if shape == R:
        assert key.endswith(UNITS) or key in DIMENSIONLESS, f"{where}: a real under a key without a unit"
    if key.endswith(UNITS):
        assert shape == R, f"{where}: a quantity with a unit must be a real, not {shape}"

doc_path, name = sys.argv[1], sys.argv[2]
text = open(doc_path, encoding="utf-8").read()
doc = json.loads(text)                      # one document, nothing before or after it
assert "Infinity" not in text and "NaN" not in text, "non-finite numbers"
check(doc, SHAPES[name], name)
for e in sys.argv[3:]:
    path, want = e.split("=", 1)
    v = doc
    for p in path.split("."):
        v = v[int(p)] if isinstance(v, list) else v[p]
    assert str(v) == want, f"{path}: {v!r} != {want!r}"
EOF
# check NAME SHAPE FILE [EXPECT...]
check() {
  local name=$1 shape=$2 file=$3; shift 3
  if python3 "$T/check.py" "$file" "$shape" "$@" 2>"$T/check.err"; then pass "$name"
  else fail "$name: $(tail -2 "$T/check.err")"; head -c 600 "$file" | sed 's/^/    /'; fi
}

# gpus, its CPU packages read from a fake RAPL tree in the odd folder
R="$ODD/rapl"
mkdir -p "$R/intel-rapl:0" "$R/intel-rapl:0:0"
echo package-0 >"$R/intel-rapl:0/name"; echo 1000 >"$R/intel-rapl:0/energy_uj"
echo dram >"$R/intel-rapl:0:0/name"; echo 1000 >"$R/intel-rapl:0:0/energy_uj"
ZEUS_RAPL_ROOT="$R" "$ZEUS" gpus --json >"$T/gpus.json" || fail "gpus --json"
check "gpus --json: keys, units, odd paths" gpus "$T/gpus.json" "cpus.0.energy_path=$R/intel-rapl:0/energy_uj" \
  "cpus.0.dram_energy_path=$R/intel-rapl:0:0/energy_uj" gpus.0.power_limit_max_w=300.0
ZEUS_GPU_BACKEND= ZEUS_NVML_LIBRARY="$ODD/libnvidia-ml.so.1" "$ZEUS" gpus --json >"$T/gpus-none.json" 2>/dev/null
check "gpus --json without NVML: the error names the odd path" gpus "$T/gpus-none.json" backend=none

# monitor energy: an odd command path and odd arguments come back in "command"
printf '#!/bin/sh\necho "child output"\n' >"$ODD/child.sh"
chmod +x "$ODD/child.sh"
ZEUS_RAPL_ROOT="$R" "$ZEUS" monitor energy --json -- "$ODD/child.sh" 'a"b\c' 'ü€' >"$T/monitor.json" 2>/dev/null \
  || fail "monitor energy --json"
check "monitor energy --json: keys, units, odd command" "monitor energy" "$T/monitor.json" "command.0=$ODD/child.sh" \
  'command.1=a"b\c' 'command.2=ü€' exit_code=0 dram_energy_j.0=0.0

# plo replay and demo
printf 'start_time,window_name,elapsed_time,gpu0_energy\n1,__GlobalPowerLimitOptimizer_300,10,100\n2,__GlobalPowerLimitOptimizer_200,12,90\n' >"$ODD/p.csv"
"$ZEUS" plo replay --profile "$ODD/p.csv" --json >"$T/plo.json" || fail "plo replay --json"
check "plo replay --json: keys, units, odd profile path" plo "$T/plo.json" "profile=$ODD/p.csv" selector.name=zeus-cost \
  selector.eta=0.5 optimal_power_limit_w=300.0
"$ZEUS" plo replay --profile "$ODD/p.csv" --selector max-slowdown --factor 1.5 --json >"$T/plo2.json" || fail "plo --factor"
check "plo replay --json (max-slowdown)" plo "$T/plo2.json" selector.factor=1.5 optimal_power_limit_w=200.0
"$ZEUS" plo demo --json --warmup 1 --profile-steps 2 --selector energy >"$T/plo3.json" || fail "plo demo --json"
check "plo demo --json" plo "$T/plo3.json" profile=None num_gpus=1

# simulate on a small synthetic trace in the odd folder, with a non-ASCII dataset name
TR="$ODD/trace"
mkdir -p "$TR"
cat >"$TR/summary_train.csv" <<'EOF'
dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch
dätä,n€t,16,sgd,0.1,1,0.5,10
dätä,n€t,16,sgd,0.1,2,0.5,10
dätä,n€t,8,sgd,0.05,1,0.5,4
dätä,n€t,32,sgd,0.2,1,0.5,3
EOF
cat >"$TR/summary_power_toy.csv" <<'EOF'
dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power
dätä,n€t,16,sgd,200,10,180
dätä,n€t,16,sgd,100,15,95
dätä,n€t,8,sgd,200,12,150
dätä,n€t,8,sgd,100,14,90
dätä,n€t,32,sgd,200,5,190
dätä,n€t,32,sgd,100,8,100
EOF
W=(--trace-dir "$TR" --gpu toy --dataset dätä --network n€t --optimizer sgd --target-metric 0.5 --max-epochs 20
   --default-bs 16 --recurrences 6)
"$ZEUS" simulate "${W[@]}" --json >"$T/sim.json" || fail "simulate --json"
check "simulate --json: keys, units, odd trace path and names" simulate "$T/sim.json" "trace_dir=$TR" workload.dataset=dätä \
  workload.network=n€t summary.recurrences=6 options.beta=2.0
"$ZEUS" simulate "${W[@]}" --beta inf --json >"$T/sim-inf.json" || fail "simulate --beta inf --json"
check "simulate --json: beta inf is null" simulate "$T/sim-inf.json" options.beta=None
D=${ZEUS_DATA_DIR:-$ZEUS_DATA_DIR_DEFAULT}
if [ -d "$D/nsdi23-trace" ]; then
  "$ZEUS" simulate --trace-dir "$D/nsdi23-trace" --gpu v100 --all --json >"$T/sim-all.json" || fail "simulate --all --json"
  check "simulate --all --json: keys and units" "simulate --all" "$T/sim-all.json" gpu=v100
else
  echo "SKIPPED (part): simulate --all needs the NSDI'23 traces (ZEUS_DATA_DIR; README, \"Measured data\")"
fi

# run: the job folder and state under the odd folder
if zeus_has run; then
  "$ZEUS" run --batch-sizes 64,128,256 --default-bs 128 --target-metric 0.6 --max-epochs 30 --lr 0.1 --optimizer adam \
    --profile-warmup-iters 1 --profile-measure-iters 2 --recurrences 5 --log-base "$ODD/logs" --json \
    -- "$TRAINEE" --bs {bs} --lr {lr} --seed {seed} --epochs {epochs} --samples 5000 >"$T/run.json" 2>"$T/run.err" \
    || { fail "run --json"; tail -5 "$T/run.err"; }
  check "run --json: keys, units, odd log folder" run "$T/run.json" recurrences_done=5
  python3 - "$T/run.json" "$ODD/logs/" <<'EOF' && pass "run --json: the paths come back unchanged" || fail "run --json: the paths come back unchanged"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["logdir"].startswith(sys.argv[2]) and r["state"].startswith(r["logdir"]), (r["logdir"], r["state"])
EOF
else
  skip_part "zeus run"
fi

# pipeline_sim (an example, but its --json is a report too): one round against AllMaxFrequency
if zeus_has pfo-server && [ -x "$ZEUS_BUILD_DIR/pipeline_sim" ]; then
  "$ZEUS" pfo-server --port 0 --log-level warn --scheduler AllMaxFrequency >"$T/srv.out" 2>"$T/srv.err" &
  srv=$!
  for _ in $(seq 200); do grep -q port "$T/srv.out" 2>/dev/null && break; sleep 0.05; done
  "$ZEUS_BUILD_DIR/pipeline_sim" --server "http://127.0.0.1:$(awk '{print $NF}' "$T/srv.out")" --pp 2 --microbatches 2 \
    --iterations 4 --iters-per-round 2 --json >"$T/psim.json" 2>"$T/psim.err" || fail "pipeline_sim --json: $(tail -2 "$T/psim.err")"
  kill "$srv"; wait "$srv" 2>/dev/null
  check "pipeline_sim --json: keys and units" pipeline_sim "$T/psim.json" 0.iterations=2
else
  skip_part "pipeline_sim"
fi

# zeus frontier --json: the output folder, plot and timeline under the odd folder.
"$ZEUS" frontier --profile "$ZEUS_SOURCE_DIR/tests/data/frontier/small_profile.csv" --stages 2 --microbatches 2 \
  --blocking-power 50 --out "$ODD/plans" --sample 2 --plot "$ODD/plans/f.svg" --timeline "last:$ODD/t.svg" --json \
  >"$T/frontier.json" 2>"$T/frontier.err" || fail "frontier --json: $(tail -2 "$T/frontier.err")"
check "frontier --json: keys, units, odd paths" frontier "$T/frontier.json" "out=$ODD/plans" "plot=$ODD/plans/f.svg" \
  "timeline=$ODD/t.svg" plans_written=2
finish
