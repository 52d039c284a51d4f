# Sourced by tests/e2e/daemon_*.sh: a zeus daemon over the fake NVML (2 simulated GPUs) on a Unix
# socket in a fresh folder, its setter log, and clean-up of every process started. Not a test itself.
: "${ZEUS:?ZEUS must point at the zeus binary}" "${FAKE_NVML:?}" "${ZEUS_BUILD_DIR:?}"
CLIENT=$ZEUS_BUILD_DIR/tests/daemon_test_client
"$ZEUS" daemon --help >/dev/null 2>&1 || { echo "SKIPPED: this zeus was built without the daemon (ZEUS_WITH_DAEMON=OFF)"; exit 77; }
command -v curl >/dev/null || { echo "SKIPPED: curl is not installed"; exit 77; }
tmp=$(mktemp -d)
chmod 755 "$tmp"
SOCK=$tmp/run/zeusd.sock
LOG=$tmp/nvml.log
DLOG=$tmp/daemon.log
PIDS=()
DAEMON=
cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
die() { echo "FAIL: $*"; echo "--- daemon log"; tail -30 "$DLOG" 2>/dev/null; echo "--- NVML setter log"; cat "$LOG" 2>/dev/null; exit 1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }
# The environment of the daemon and of its clients: the same fake GPUs.
export ZEUS_NVML_LIBRARY=$FAKE_NVML ZEUS_SIM_GPUS=2 ZEUS_SIM_CLOCK=wall ZEUS_LOG_LEVEL=warn
unset ZEUSD_SOCK_PATH ZEUSD_HOST_PORT ZEUSD_TOKEN ZEUS_GPU_BACKEND CUDA_VISIBLE_DEVICES
# start_daemon [serve options...]: starts it (root), waits until it is ready.
start_daemon() {
  local ready_before
  ready_before=$(grep -c "serve: ready" "$DLOG" 2>/dev/null || true)
  FAKE_NVML_LOG=$LOG "$ZEUS" daemon serve --log-level info --socket-path "$SOCK" --state-file "$tmp/run/state.json" "$@" 2>>"$DLOG" &
  DAEMON=$!
  PIDS+=("$DAEMON")
  for _ in $(seq 100); do
    [ "$(grep -c "serve: ready" "$DLOG" 2>/dev/null || true)" -gt "${ready_before:-0}" ] && return 0
    kill -0 "$DAEMON" 2>/dev/null || die "the daemon exited at start"
    sleep 0.05
  done
  die "the daemon was not ready within 5 s"
}
# lines N TEXT: how many lines of the NVML setter log are exactly TEXT.
lines() { grep -cxF "$1" "$LOG" 2>/dev/null || true; }
# wait_line TEXT COUNT SECONDS: until TEXT appears COUNT times; prints the time it took.
wait_line() {
  local t0; t0=$(now)
  while [ "$(lines "$1")" -lt "$2" ]; do
    lt "$(elapsed "$t0" "$(now)")" "$3" || return 1
    sleep 0.01
  done
  elapsed "$t0" "$(now)"
}
# start_holder NAME GPU MW [env...]: a client that sets a limit and waits; its pid in $HOLDER.
start_holder() {
  local name=$1 gpu=$2 mw=$3; shift 3
  rm -f "$tmp/$name.out" "$tmp/$name.err"   # a "held" of an earlier holder of that name is not this one's
  env ZEUSD_SOCK_PATH="$SOCK" "$@" "$CLIENT" hold "$gpu" "$mw" >"$tmp/$name.out" 2>"$tmp/$name.err" &
  HOLDER=$!
  PIDS+=("$HOLDER")
  for _ in $(seq 100); do
    grep -q held "$tmp/$name.out" 2>/dev/null && return 0
    kill -0 "$HOLDER" 2>/dev/null || die "holder $name exited: $(cat "$tmp/$name.err")"
    sleep 0.05
  done
  die "holder $name did not hold within 5 s"
}
get() { curl -s --unix-socket "$SOCK" "http://localhost$1"; }
post() { curl -s -X POST --unix-socket "$SOCK" "http://localhost$1"; }
limit_of() { get "/gpu/get_power_limit?gpu_ids=$1" | sed -n 's/.*"power_limit_mw":\([0-9]*\).*/\1/p'; }
pl_line() { echo "nvmlDeviceSetPowerManagementLimit $1 $2 -> 0"; }
