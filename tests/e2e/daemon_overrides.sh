#!/usr/bin/env bash
# zeusd's --gpu-command-overrides on `zeus daemon serve`: the GPU writes a file names go to its
# commands (which record their arguments here) and never to NVML, gives-back included (a client
# that exits, a lease killed, the daemon stopped); a lock's reset falls back to
# reset_locked_clocks; a failing, lying (error_pattern) or hanging command answers 500 with its
# output; an operation the file leaves out still goes to NVML; a bad or world-writable file stops
# the daemon at start; and, as nobody, a daemon with overrides serves gpu-control without root.
set -uo pipefail
. "$(dirname "$0")/daemon_common.bash"

rec=$tmp/record.log
cat >"$tmp/rec.sh" <<EOF
#!/bin/sh
echo "\$*" >>"$rec"
EOF
cat >"$tmp/fail.sh" <<'EOF'
#!/bin/sh
echo "boom on stdout"; echo "nvidia-smi: insufficient permissions" >&2; exit 3
EOF
cat >"$tmp/liar.sh" <<'EOF'
#!/bin/sh
echo "ERROR: Unable to set persistence mode"; exit 0
EOF
chmod 755 "$tmp"/*.sh
ov=$tmp/overrides.toml
cat >"$ov" <<EOF
# What a cluster without root would use (nvidia-smi behind sudoers), recorded instead.
[set_power_limit]
commands = ["$tmp/rec.sh pl {gpu_id} {power_limit_mw} {power_limit_w}"]

[set_gpu_locked_clocks]
commands = [
  "$tmp/rec.sh lock-min {gpu_id} {min_clock_mhz}",
  "$tmp/rec.sh lock-max {gpu_id} {max_clock_mhz}",
]

[reset_locked_clocks]
commands = ["$tmp/rec.sh reset {gpu_id}"]

[set_mem_locked_clocks]
commands = ["$tmp/fail.sh", "$tmp/rec.sh never-runs"]

[set_persistence_mode]
commands = ["sh -c 'sleep 30; : zeus-override-hang'"]
timeout_s = 1
EOF
chmod 644 "$ov"
# req METHOD PATH: prints "CODE BODY".
req() { curl -s -X "$1" -o "$tmp/body" -w '%{http_code}' --unix-socket "$SOCK" "http://localhost$2"; echo " $(cat "$tmp/body")"; }
# wait_rec TEXT SECONDS: until the record has the line TEXT.
wait_rec() {
  for _ in $(seq $(( $2 * 20 ))); do grep -qxF "$1" "$rec" 2>/dev/null && return 0; sleep 0.05; done
  die "the record never got '$1' within $2 s; it has: $(tr '\n' '|' <"$rec" 2>/dev/null)"
}

# ---- bad files stop the daemon at start, naming the file and what is wrong
chmod 666 "$ov"
"$ZEUS" daemon serve --socket-path "$tmp/bad.sock" --no-state-file --gpu-command-overrides "$ov" 2>"$tmp/err" &&
  die "started with a world-writable override file"
grep -q "overrides.toml' is world-writable (mode 666)" "$tmp/err" || die "refusal: $(cat "$tmp/err")"
chmod 644 "$ov"
printf '[set_power_limit]\ncommands = ["x --clock={max_clock_mhz}"]\n' >"$tmp/bad.toml"
"$ZEUS" daemon serve --socket-path "$tmp/bad.sock" --no-state-file --gpu-command-overrides "$tmp/bad.toml" 2>"$tmp/err" &&
  die "started with an unknown placeholder"
grep -q "operation 'set_power_limit' has an unknown placeholder '{max_clock_mhz}'" "$tmp/err" || die "refusal: $(cat "$tmp/err")"
[ -e "$tmp/bad.sock" ] && die "a refused daemon left its socket"
echo "ok - a world-writable file and an unknown placeholder stop the daemon at start, named"

start_daemon --gpu-command-overrides "$ov"

# ---- a power limit through the command; the client (curl) exits, and the give-back goes through it too
out=$(req POST "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=200000")
[ "${out%% *}" = 200 ] || die "set_power_limit: $out"
wait_rec "pl 0 200000 200" 2
wait_rec "pl 0 300000 300" 3
grep -q "^nvmlDeviceSetPowerManagementLimit" "$LOG" 2>/dev/null && die "NVML set a power limit"
echo "ok - set_power_limit ran the command with {gpu_id} {power_limit_mw} {power_limit_w}; the give-back too"

# ---- a lease holder killed: its value comes back through the command
start_holder h1 1 150000
wait_rec "pl 1 150000 150" 2
kill -9 "$HOLDER"
wait_rec "pl 1 300000 300" 3
grep -q "^nvmlDeviceSetPowerManagementLimit" "$LOG" 2>/dev/null && die "NVML set a power limit"
echo "ok - a killed holder's power limit is given back through the command"

# ---- two commands for one lock, in order; its give-back resets through reset_locked_clocks
out=$(req POST "/gpu/set_gpu_locked_clocks?gpu_ids=1&min_clock_mhz=500&max_clock_mhz=1000")
[ "${out%% *}" = 200 ] || die "set_gpu_locked_clocks: $out"
wait_rec "reset 1" 3
[ "$(grep -n "" "$rec" | grep -E "lock-min 1 500|lock-max 1 1000|reset 1" | cut -d: -f2- | tr '\n' '|')" = \
  "lock-min 1 500|lock-max 1 1000|reset 1|" ] || die "lock commands out of order: $(tr '\n' '|' <"$rec")"
grep -q "^nvmlDeviceSetGpuLockedClocks\|^nvmlDeviceResetGpuLockedClocks" "$LOG" 2>/dev/null && die "NVML changed a lock"
echo "ok - set_gpu_locked_clocks ran both commands in order; its give-back fell back to reset_locked_clocks"

# ---- a failing command: 500 with its code and output; the next command never ran; nothing held
out=$(req POST "/gpu/set_mem_locked_clocks?gpu_ids=0&min_clock_mhz=800&max_clock_mhz=1600")
[ "${out%% *}" = 500 ] || die "a failing command answered: $out"
case "$out" in *"exited with code 3"*"stdout: boom on stdout; stderr: nvidia-smi: insufficient permissions"*) ;;
  *) die "the error lacks the command's code and output: $out";; esac
grep -q "never-runs" "$rec" && die "a command after a failure ran"
get /leases | grep -q mem_locked_clocks && die "a failed change was recorded as held: $(get /leases)"
echo "ok - a command that exits 3 answers 500 with its exit code, stdout and stderr, and stops the sequence"

# ---- a hanging command is killed at its timeout
t0=$(now)
out=$(req POST "/gpu/set_persistence_mode?gpu_ids=0&enabled=true")
t=$(elapsed "$t0" "$(now)")
[ "${out%% *}" = 500 ] || die "a hanging command answered: $out"
case "$out" in *"timed out after 1 s and was killed"*) ;; *) die "timeout error: $out";; esac
lt "$t" 4 || die "the hanging command took $t s to answer (timeout_s = 1)"
pgrep -f "zeus-override-hang" >/dev/null && die "the timed-out command is still running"
echo "ok - a command past timeout_s = 1 is killed and answers 500 after $t s"

# ---- the daemon stopped: what is held comes back through the command
start_holder h2 0 175000
kill -TERM "$DAEMON"
wait "$DAEMON" 2>/dev/null
[ "$(grep -c "^pl 0 300000 300$" "$rec")" = 2 ] || die "the stopped daemon did not give GPU 0 back through the command"
echo "ok - a daemon stopped with SIGTERM gives back through the command"

# ---- error_pattern: a zero exit that says ERROR fails
cat >"$tmp/pattern.toml" <<EOF
[set_persistence_mode]
commands = ["$tmp/liar.sh"]
error_pattern = "(?i)error|fail|unable"
EOF
chmod 600 "$tmp/pattern.toml"
start_daemon --gpu-command-overrides "$tmp/pattern.toml"
out=$(req POST "/gpu/set_persistence_mode?gpu_ids=1&enabled=true")
[ "${out%% *}" = 500 ] || die "a lying command answered: $out"
case "$out" in *"matched error_pattern '(?i)error|fail|unable'"*"ERROR: Unable to set persistence mode"*) ;;
  *) die "error_pattern error: $out";; esac
# The power limit is not in this file: NVML sets it.
out=$(req POST "/gpu/set_power_limit?gpu_ids=1&power_limit_mw=225000")
[ "${out%% *}" = 200 ] || die "set_power_limit through NVML: $out"
grep -q "^nvmlDeviceSetPowerManagementLimit 1 225000 -> 0" "$LOG" || die "NVML did not set the limit the file leaves out"
echo "ok - error_pattern fails a zero exit whose output says ERROR; an operation left out goes to NVML"
kill -TERM "$DAEMON"; wait "$DAEMON" 2>/dev/null

# ---- as nobody: gpu-control without root, only because of the overrides
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && group=$(id -gn nobody 2>/dev/null); then
  as_nobody() { setpriv --reuid=nobody --regid="$group" --clear-groups --inh-caps=-all -- "$@"; }
  if as_nobody test -x "$ZEUS" -a -r "$FAKE_NVML" -a -x "$tmp/rec.sh"; then
    cp "$ov" "$tmp/nobody.toml"; chown nobody "$tmp/nobody.toml"; chmod 644 "$tmp/nobody.toml"
    mkdir -p "$tmp/nb"; chown nobody "$tmp/nb"; : >"$rec"; chmod 666 "$rec"
    # setpriv itself in the background (not a function: its subshell's pid is not the daemon's)
    setpriv --reuid=nobody --regid="$group" --clear-groups --inh-caps=-all -- "$ZEUS" daemon serve --enable gpu-read,gpu-control --socket-path "$tmp/nb/z.sock" --no-state-file \
      --log-level info --gpu-command-overrides "$tmp/nobody.toml" 2>"$tmp/nobody.log" &
    NB=$!; PIDS+=("$NB")
    for _ in $(seq 100); do grep -q "serve: ready" "$tmp/nobody.log" && break; kill -0 $NB 2>/dev/null || break; sleep 0.05; done
    grep -q "serve: ready" "$tmp/nobody.log" || die "a daemon as nobody with overrides did not start: $(cat "$tmp/nobody.log")"
    grep -q "gpu-control without root: command overrides cover set_persistence_mode, set_power_limit, set_gpu_locked_clocks, set_mem_locked_clocks, reset_locked_clocks" "$tmp/nobody.log" ||
      die "no word of the overrides: $(cat "$tmp/nobody.log")"
    code=$(curl -s -X POST -o /dev/null -w '%{http_code}' --unix-socket "$tmp/nb/z.sock" \
      "http://localhost/gpu/set_power_limit?gpu_ids=0&power_limit_mw=180000")
    [ "$code" = 200 ] || die "set_power_limit through a daemon as nobody: $code"
    wait_rec "pl 0 180000 180" 2
    kill -TERM $NB; wait $NB 2>/dev/null
    echo "ok - as nobody, a daemon with overrides serves gpu-control without root"
  else
    echo "# skipped the nobody part: nobody cannot reach the build tree"
  fi
else
  echo "# skipped the nobody part: needs root, setpriv and a user nobody"
fi
echo "PASS"
