#!/usr/bin/env bash
# End-to-end: zeus monitor power on the simulated GPU: sampling for a duration, while a command
# runs (-- CMD: its exit code, its output kept apart from the CSV, SIGTERM passed on), --time
# epoch, the power domains a GPU has, --temperature, -o FILE and bad options.
set -u
. "$(dirname "$0")/lib.sh"

export ZEUS_GPU_BACKEND=sim ZEUS_SIM_GPUS=2 ZEUS_RAPL_ROOT=/nonexistent-rapl-root
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# check_csv FILE HEADER MIN_ROWS MAX_ROWS [TIME_LO TIME_HI]: exact header, row count in range,
# every cell a number, times increasing (and within [TIME_LO, TIME_HI] when given).
check_csv() {
  python3 - "$@" <<'PY'
import csv, sys
path, header, lo, hi = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rows = list(csv.reader(open(path)))
assert rows, "empty CSV"
assert ",".join(rows[0]) == header, f"header {rows[0]} != {header}"
body = rows[1:]
assert lo <= len(body) <= hi, f"{len(body)} rows, expected {lo}..{hi}"
times = [float(r[0]) for r in body]
assert times == sorted(times), times
for r in body:
    assert len(r) == len(rows[0]), r
    for c, v in zip(rows[0][1:], r[1:]):
        x = float(v)
        if c.endswith("_power_w"):
            assert 1 < x < 2000, (c, x)
        if c.endswith("_temperature_c"):
            assert 0 < x < 150 and v.isdigit(), (c, v)
if len(sys.argv) > 5:
    t_lo, t_hi = float(sys.argv[5]), float(sys.argv[6])
    assert t_lo - 0.01 <= times[0] and times[-1] <= t_hi + 0.01, (t_lo, times, t_hi)
PY
}

# A duration: the default columns, relative time from 0.
"$ZEUS" monitor power --interval-ms 50 --duration-s 0.5 >"$tmp/a.csv" 2>"$tmp/a.err"
code=$?
if [ $code -eq 0 ] && check_csv "$tmp/a.csv" "time_s,gpu0_power_w,gpu1_power_w" 3 12 &&
   [ "$(sed -n 2p "$tmp/a.csv" | cut -d, -f1)" = "0.000" ] && [ ! -s "$tmp/a.err" ]; then
  pass "duration: header, ~10 rows from time 0, nothing on stderr"
else fail "duration (exit $code)"; cat "$tmp/a.csv" "$tmp/a.err"; fi

# -- CMD: its stdout goes to stderr, the CSV alone is on stdout, its exit code is ours; epoch
# times lie within the run; all domains the simulated GPU has (instant and average, no memory);
# temperatures.
before=$(python3 -c 'import time; print(time.time())')
"$ZEUS" monitor power --gpus 1 --time epoch --domains all --temperature --interval-ms 50 -- \
  sh -c 'echo child-says-hello; sleep 0.4; exit 3' >"$tmp/b.csv" 2>"$tmp/b.err"
code=$?
after=$(python3 -c 'import time; print(time.time())')
if [ $code -eq 3 ]; then pass "-- CMD: CMD's exit code"; else fail "-- CMD: exit $code, expected 3"; fi
if check_csv "$tmp/b.csv" "unix_time_s,gpu1_power_w,gpu1_average_power_w,gpu1_temperature_c" 2 12 \
     "$before" "$after"; then pass "-- CMD: epoch times within the run, both domains, temperature"
else fail "-- CMD CSV"; cat "$tmp/b.csv"; fi
if grep -q child-says-hello "$tmp/b.err" && ! grep -q child-says-hello "$tmp/b.csv"; then
  pass "-- CMD: CMD's output on stderr, never in the CSV"
else fail "-- CMD: CMD's output misplaced"; cat "$tmp/b.err"; fi

# -o FILE: CMD keeps stdout, the CSV goes to the file.
out=$("$ZEUS" monitor power -o "$tmp/c.csv" --interval-ms 20 -- sh -c 'echo on-stdout; sleep 0.1' 2>"$tmp/c.err")
code=$?
if [ $code -eq 0 ] && [ "$out" = "on-stdout" ] && check_csv "$tmp/c.csv" "time_s,gpu0_power_w,gpu1_power_w" 2 10; then
  pass "-o FILE: CMD keeps stdout, CSV in the file"
else fail "-o FILE (exit $code, stdout '$out')"; cat "$tmp/c.csv" "$tmp/c.err"; fi

# A command that cannot start: 127, the header and a last row all the same.
expect_code "-- CMD that cannot start: 127" 127 "$ZEUS" monitor power -- /nonexistent/cmd
expect_err_has "-- CMD that cannot start is named" "cannot run '/nonexistent/cmd'" \
  "$ZEUS" monitor power -- /nonexistent/cmd

# SIGTERM to zeus reaches CMD; zeus exits with CMD's status (143).
"$ZEUS" monitor power --interval-ms 50 -- sleep 60 >"$tmp/d.csv" 2>"$tmp/d.err" &
pid=$!
for _ in $(seq 100); do [ "$(wc -l <"$tmp/d.csv")" -ge 3 ] && break; sleep 0.05; done
kill -TERM $pid
t0=$(date +%s)
wait $pid
code=$?
if [ $code -eq 143 ] && [ $(( $(date +%s) - t0 )) -lt 10 ] && check_csv "$tmp/d.csv" "time_s,gpu0_power_w,gpu1_power_w" 2 1000; then
  pass "SIGTERM is passed on to CMD (exit 143)"
else fail "SIGTERM (exit $code)"; cat "$tmp/d.err"; fi

# SIGINT with CMD is CMD's: zeus keeps sampling until CMD (which ignores it here) ends.
"$ZEUS" monitor power --interval-ms 50 -- sh -c 'trap "" INT; sleep 0.8; exit 5' >"$tmp/g.csv" 2>/dev/null &
pid=$!
for _ in $(seq 100); do [ "$(wc -l <"$tmp/g.csv")" -ge 2 ] && break; sleep 0.02; done
kill -INT $pid
wait $pid
code=$?
last=$(tail -1 "$tmp/g.csv" | cut -d, -f1)
if [ $code -eq 5 ] && python3 -c "import sys; sys.exit(0 if float('$last') >= 0.7 else 1)"; then
  pass "SIGINT with CMD: sampling goes on until CMD ends (last row at ${last} s)"
else fail "SIGINT with CMD (exit $code, last row at '$last' s)"; cat "$tmp/g.csv"; fi

# --duration-s with CMD: sampling stops, zeus waits for CMD.
"$ZEUS" monitor power --interval-ms 20 --duration-s 0.1 -- sh -c 'sleep 0.5; exit 4' >"$tmp/e.csv" 2>/dev/null
code=$?
if [ $code -eq 4 ] && check_csv "$tmp/e.csv" "time_s,gpu0_power_w,gpu1_power_w" 2 7; then
  pass "--duration-s with CMD: sampling ends, CMD's exit code"
else fail "--duration-s with CMD (exit $code)"; cat "$tmp/e.csv"; fi

# A domain the GPU lacks: a note, no column; none at all: an error.
"$ZEUS" monitor power --domains instant,memory-average --duration-s 0 >"$tmp/f.csv" 2>"$tmp/f.err"
if head -1 "$tmp/f.csv" | grep -qx "time_s,gpu0_power_w,gpu1_power_w" &&
   grep -q "GPU 0 has no memory-average power reading" "$tmp/f.err"; then
  pass "a domain the GPU lacks: no column, a note"
else fail "missing domain"; cat "$tmp/f.csv" "$tmp/f.err"; fi
expect_code "no readable domain: exit 1" 1 "$ZEUS" monitor power --domains memory-average --duration-s 0
expect_err_has "no readable domain is named" "no GPU can read the power domains" \
  "$ZEUS" monitor power --domains memory-average --duration-s 0

# Bad options.
expect_code "--time bogus" 2 "$ZEUS" monitor power --time bogus
expect_err_has "--domains foo is named" "unknown power domain 'foo'" "$ZEUS" monitor power --domains instant,foo
expect_out_has "--help names -- CMD" "CMD" "$ZEUS" monitor power --help
expect_out_has "--help names --time" "--time relative\|epoch" "$ZEUS" monitor power --help

finish
