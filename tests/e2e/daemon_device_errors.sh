#!/usr/bin/env bash
# zeus daemon: device errors as status codes, with zeusd's per-device aggregation, over the fake
# NVML with injected failures: NVML NO_PERMISSION on one GPU of two is 403 under "errors" naming
# that GPU, while the other GPU keeps its change (and only it is recorded); NOT_SUPPORTED is 400;
# any other NVML failure is 500. A failed change leaves no record to give back. Requests go over
# TCP without a lease (as the original zeusd's clients send them), so what succeeds stays (held by
# nobody) after curl exits, until SIGTERM gives it back.
set -uo pipefail
. "$(dirname "$0")/daemon_common.bash"

# code_and_body METHOD PATH: prints "<status> <body>" (over TCP).
code_and_body() {
  curl -s -X "$1" -w ' %{http_code}' "http://127.0.0.1:$PORT$2" |
    awk '{ code = $NF; $NF = ""; sub(/ $/, ""); print code " " $0 }'
}

export FAKE_NVML_INJECT="nvmlDeviceSetPowerManagementLimit:NO_PERMISSION:1;nvmlDeviceSetPersistenceMode:UNKNOWN;nvmlDeviceSetMemoryLockedClocks:NOT_SUPPORTED:0"
start_daemon --no-state-file --mode both --tcp-bind-address 127.0.0.1:0
unset FAKE_NVML_INJECT
PORT=$(sed -n 's/.*serve: TCP port \([0-9]*\)$/\1/p' "$DLOG" | tail -1)
[ -n "$PORT" ] || die "no TCP port in the daemon's log"

# ---- 403 on GPU 1 only: GPU 0 keeps its change
r=$(code_and_body POST "/gpu/set_power_limit?gpu_ids=0,1&power_limit_mw=200000")
case "$r" in
  "403 {\"errors\":{\"1\":"*) ;;
  *) die "NO_PERMISSION on GPU 1: expected 403 with errors for GPU 1 only, got: $r";;
esac
echo "$r" | grep -q '"0"' && die "GPU 0 is listed among the errors: $r"
echo "$r" | grep -qi 'permission' || die "the error does not say it is a permission failure: $r"
[ "$(limit_of 0)" = 200000 ] || die "GPU 0 did not keep its change: $(limit_of 0) mW"
[ "$(limit_of 1)" = 300000 ] || die "GPU 1 changed although NVML refused: $(limit_of 1) mW"
[ "$(lines "$(pl_line 0 200000)")" = 1 ] || die "GPU 0's change is not in the setter log"
grep -q "^nvmlDeviceSetPowerManagementLimit 1 200000 -> " "$LOG" || die "GPU 1's setter was never called"
leases=$(get /leases)
echo "$leases" | grep -q '"gpu_id":0,"setting":"power_limit"' || die "GPU 0's change is not recorded: $leases"
echo "$leases" | grep -q '"gpu_id":1' && die "GPU 1's failed change left a record: $leases"
echo "ok - NO_PERMISSION on one GPU: 403 naming GPU 1, GPU 0 keeps 200000 mW and is the only record"

# ---- 500: another NVML failure
r=$(code_and_body POST "/gpu/set_persistence_mode?gpu_ids=0&enabled=true")
case "$r" in
  "500 {\"errors\":{\"0\":"*) ;;
  *) die "an unknown NVML failure: expected 500 for GPU 0, got: $r";;
esac
get /leases | grep -q '"setting":"persistence_mode"' && die "the failed persistence change left a record"
echo "ok - an unknown NVML failure is 500 naming the GPU, and records nothing"

# ---- 400: not supported
r=$(code_and_body POST "/gpu/set_mem_locked_clocks?gpu_ids=0&min_clock_mhz=877&max_clock_mhz=877")
case "$r" in
  "400 {\"errors\":{\"0\":"*) ;;
  *) die "NOT_SUPPORTED: expected 400 for GPU 0, got: $r";;
esac
echo "ok - NOT_SUPPORTED is 400 naming the GPU"

# ---- the daemon still serves, and SIGTERM gives back the one change that went through
r=$(code_and_body GET "/gpu/get_power_limit")
case "$r" in
  "200 "*) ;;
  *) die "reads after the failures: $r";;
esac
kill -TERM "$DAEMON"
wait "$DAEMON" || die "the daemon exited with $? after SIGTERM"
[ "$(lines "$(pl_line 0 300000)")" = 1 ] || die "SIGTERM did not give GPU 0 back"
grep -q "^nvmlDeviceSetPowerManagementLimit 1 300000" "$LOG" && die "SIGTERM wrote GPU 1, which never changed"
echo "ok - still serving after the failures; SIGTERM gives back GPU 0 only"
