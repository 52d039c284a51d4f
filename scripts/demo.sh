#!/usr/bin/env bash
# make demo: a short tour of the zeus CLI and library on the simulated GPU (or real GPUs when
# ZEUS_GPU_BACKEND=nvml is set on an NVIDIA machine).
set -eu
build=${1:-build}
Z="$build/zeus"
export ZEUS_GPU_BACKEND=${ZEUS_GPU_BACKEND:-sim}
export ZEUS_SIM_GPUS=${ZEUS_SIM_GPUS:-2}
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

step "zeus --version"
"$Z" --version
step "zeus gpus            # backend: $ZEUS_GPU_BACKEND"
"$Z" gpus
step "zeus monitor energy -- sleep 1     # energy of a whole command (idle GPUs here)"
"$Z" monitor energy -- sleep 1
step "zeus monitor energy --json -- sh -c 'echo hello' | python3 -m json.tool   # stdout: the JSON alone"
if command -v python3 >/dev/null; then
  "$Z" monitor energy --json -- sh -c 'echo hello' | python3 -m json.tool
else
  "$Z" monitor energy --json -- sh -c 'echo hello'   # (no python3 to reformat it)
fi
step "zeus monitor power --interval-ms 200 --duration-s 1"
"$Z" monitor power --interval-ms 200 --duration-s 1
step "ZEUS_SIM_CLOCK=virtual measure_power_limits 200   # library example: same work at each power limit"
ZEUS_SIM_CLOCK=virtual "$build/measure_power_limits" 200
echo
echo "Lower power limits cap the simulated GPU's clock: the work takes longer but, down to a point,"
echo "uses less energy. The power-limit optimizer finds that point during training."

step "zeus plo demo      # the power-limit optimizer in a simulated training loop"
"$Z" plo demo

out=$(mktemp -d)
step "zeus frontier --profile tests/data/frontier/small_profile.csv --stages 2 --microbatches 4 --blocking-power 60 --out $out --sample 3"
"$Z" frontier --profile tests/data/frontier/small_profile.csv --stages 2 --microbatches 4 --blocking-power 60 \
  --out "$out" --sample 3 --plot "$out/frontier.svg"
echo "frontier.csv (first lines) and the plan files written:"
head -5 "$out/frontier.csv"
ls "$out"
rm -rf "$out"

pfo=$(mktemp -d)
step "zeus pfo-server --port 0 --scheduler InstructionProfiler ... &   # the Perseus server"
"$Z" pfo-server --port 0 --log-level warn --scheduler InstructionProfiler \
  --scheduler-args '{"warmup_iters": 0, "min_frequency": 1605}' --dump-data --dump-dir "$pfo/dump" >"$pfo/srv.out" &
srv=$!
for _ in $(seq 100); do grep -q port "$pfo/srv.out" 2>/dev/null && break; sleep 0.05; done
port=$(awk '{print $NF}' "$pfo/srv.out")
step "pipeline_sim --server http://127.0.0.1:$port --pp 4 --microbatches 4 --iterations 24 --iters-per-round 2"
"$build/pipeline_sim" --server "http://127.0.0.1:$port" --pp 4 --microbatches 4 --iterations 24 --iters-per-round 2
echo "The profiler stepped each stage's clock down one frequency per round; what it measured:"
head -4 "$pfo"/dump/*/instruction_profile.csv
kill "$srv"; wait "$srv" 2>/dev/null || true
rm -rf "$pfo"

# Perseus in one command: profile, solve and deploy inside the server, and follow a straggler
# (docs/perseus.md). On the Perseus artifact's measured GPT-3 A40 profile when ../shared/data is
# there, else on the built-in simulated GPUs.
pfo=$(mktemp -d)
profile=${ZEUS_DATA_DIR:-$(cd "$(dirname "$0")/../.." && pwd)/shared/data}/perseus-sosp24/stage_profile/gpt3-175b+a40_bf16.csv
if [ -f "$profile" ]; then
  args='{"warmup_iters": 0}'
  sim=(--pp 8 --dp 2 --microbatches 12 --iterations 90 --iters-per-round 1 --pace 0.02 --stage-profile "$profile"
       --blocking-power 70.38 --straggler 1:1.2@70-85)
  show='NR == 1 || $1 == 0 || $1 == 30 || $1 == 59 || $1 == 65 || $1 == 70 || $1 == 71 || $1 == 85 || $1 == 86'
else
  echo
  echo "(no measured stage profile at $profile: Perseus runs on the built-in simulated GPUs)"
  args='{"warmup_iters": 0, "min_frequency": 1400}'
  sim=(--pp 4 --dp 2 --microbatches 8 --iterations 60 --iters-per-round 1 --pace 0.02 --straggler 1:1.2@40-50)
  show='NR == 1 || $1 == 0 || $1 == 12 || $1 == 23 || $1 == 30 || $1 == 40 || $1 == 41 || $1 == 50 || $1 == 51'
fi
step "zeus pfo-server --port 0 --scheduler Perseus --scheduler-args '$args' &"
"$Z" pfo-server --port 0 --log-level warn --scheduler Perseus --scheduler-args "$args" --dump-data \
  --dump-dir "$pfo/dump" >"$pfo/srv.out" 2>"$pfo/srv.log" &
srv=$!
for _ in $(seq 100); do grep -q port "$pfo/srv.out" 2>/dev/null && break; sleep 0.05; done
port=$(awk '{print $NF}' "$pfo/srv.out")
step "pipeline_sim --server http://127.0.0.1:$port ${sim[*]}   # (some rounds shown)"
"$build/pipeline_sim" --server "http://127.0.0.1:$port" "${sim[@]}" | awk "$show"
echo "Round 0 profiles at the highest clocks; Perseus steps every stage down a clock per round, solves"
echo "the frontier on a solver thread while the job trains, and deploys the least-energy plan at the"
echo "fastest time; when pipeline 1 slows down 1.2x, pipeline 0 moves to the plan of least energy at"
echo "the straggler's time, and back once it recovers. Why, from GET /perseus/<job_id>/plans:"
job=$(ls "$pfo/dump" | head -1)
if command -v python3 >/dev/null; then
  python3 -c 'import json, sys, urllib.request
d = json.load(urllib.request.urlopen("http://127.0.0.1:%s/perseus/%s/plans" % (sys.argv[1], sys.argv[2])))
for x in d["deployments"]: print("  %d. %s" % (x["deployment"], x["reason"]))' "$port" "$job"
else
  grep -o '"reason": "[^"]*"' "$pfo/dump/$job/perseus.json"
fi
echo "Files in $pfo/dump/<job_id>: $(ls "$pfo/dump/$job" | grep -v '^[0-9]' | tr '\n' ' ')"
kill "$srv"; wait "$srv" 2>/dev/null || true
rm -rf "$pfo"

logs=$(mktemp -d)
step "zeus run ... -- trainee_sim --bs {bs} --lr {lr} --seed {seed} --epochs {epochs}   # recurring job, batch-size optimizer"
"$Z" run --batch-sizes 32,64,128,256,512,1024,2048 --default-bs 256 --target-metric 0.6 --max-epochs 40 \
  --lr 0.1 --optimizer adam --recurrences 6 --log-base "$logs" --quiet \
  -- "$build/trainee_sim" --bs {bs} --lr {lr} --seed {seed} --epochs {epochs} 2>&1 | grep -v '^\[zeus run\] [$l]'
step "zeus run ... --recurrences 4   # a later run continues from the SQLite state in the job folder"
"$Z" run --batch-sizes 32,64,128,256,512,1024,2048 --default-bs 256 --target-metric 0.6 --max-epochs 40 \
  --lr 0.1 --optimizer adam --recurrences 4 --log-base "$logs" --quiet \
  -- "$build/trainee_sim" --bs {bs} --lr {lr} --seed {seed} --epochs {epochs} 2>&1 | grep -v '^\[zeus run\] [$l]'
step "zeus run ... --recurrences 0 --json | head -24   # the history and the optimizer's state"
"$Z" run --batch-sizes 32,64,128,256,512,1024,2048 --default-bs 256 --target-metric 0.6 --max-epochs 40 \
  --lr 0.1 --optimizer adam --recurrences 0 --log-base "$logs" --json \
  -- "$build/trainee_sim" --bs {bs} --lr {lr} --seed {seed} --epochs {epochs} 2>/dev/null | head -24
rm -rf "$logs"
py=/usr/bin/python3; [ -x "$py" ] || py=$(command -v python3 || true)
if [ -n "$py" ]; then
  pylogs=$(mktemp -d)
  step "zeus run ... -- python3 examples/python/train_zeus_run.py --bs {bs} --lr {lr} --seed {seed} --epochs {epochs}   # a Python trainee (zeusc.run.ZeusDataLoader)"
  # One simulated GPU: a single-process ZeusDataLoader trains on one GPU, as the original.
  ZEUS_SIM_GPUS=1 ZEUSC_LIBRARY="$build/libzeus.so" PYTHONPATH="$(pwd)/python${PYTHONPATH:+:$PYTHONPATH}" \
    "$Z" run --batch-sizes 32,64,128,256,512 --default-bs 128 --target-metric 0.80 --max-epochs 40 \
    --lr 0.2 --optimizer adam --recurrences 5 --log-base "$pylogs" \
    -- "$py" examples/python/train_zeus_run.py --bs {bs} --lr {lr} --seed {seed} --epochs {epochs} 2>&1 \
    | grep -v '^\[zeus run\] [$l]' | grep -E '^(train_zeus_run|\[zeus run\])'
  rm -rf "$pylogs"
else
  echo
  echo "(the Python trainee skipped: no python3)"
fi
if [ -n "$py" ] && "$Z" bso-server --help >/dev/null 2>&1; then
  bsodir=$(mktemp -d)
  step "zeus bso-server --port 0 --database sqlite://$bsodir/bso.db &   # two \"nodes\" share one recurring job"
  "$Z" bso-server --port 0 --log-level warn --database "sqlite://$bsodir/bso.db" >"$bsodir/out" 2>"$bsodir/err" &
  bsopid=$!
  for _ in $(seq 100); do grep -q port "$bsodir/out" 2>/dev/null && break; sleep 0.05; done
  bsourl="http://127.0.0.1:$(awk '{print $NF}' "$bsodir/out")"
  echo "(each line: one training session, alternately on node a and node b; pruning from 128 down,"
  echo " then up, twice, then Thompson sampling; the server holds the job's state between nodes)"
  for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
    n=$([ $((i % 2)) = 1 ] && echo a || echo b)
    ZEUS_SIM_GPUS=1 ZEUSC_LIBRARY="$build/libzeus.so" PYTHONPATH="$(pwd)/python${PYTHONPATH:+:$PYTHONPATH}" \
      "$py" examples/python/bso_node.py --server "$bsourl" --node "$n" 2>/dev/null
  done
  kill "$bsopid"; wait "$bsopid" 2>/dev/null || true
  rm -rf "$bsodir"
fi
data=${ZEUS_DATA_DIR:-$(cd "$(dirname "$0")/../.." && pwd)/shared/data}
trace=${ZEUS_TRACE_DIR:-$data/nsdi23-trace}
if [ -d "$trace" ]; then
  step "zeus simulate --trace-dir $trace --gpu v100 --all   # the NSDI'23 traces"
  "$Z" simulate --trace-dir "$trace" --gpu v100 --all
else
  echo
  echo "(zeus simulate skipped: no NSDI'23 traces at $trace. They are the original Zeus project's"
  echo " published traces: set ZEUS_DATA_DIR to the measured-data folder; docs/data.md)"
fi
