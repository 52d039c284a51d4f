#!/usr/bin/env bash
# zeus monitor power --from (zeus/power_stream.h) against real servers: four `zeus daemon serve`
# on simulated GPUs whose power moves (h100 profile: a new reading every ~100 ms), three on Unix
# sockets and one on TCP 127.0.0.1 port 0, plus two tiny servers that misbehave: one answers and
# then stalls, one sends garbage. One daemon is SIGKILLed and restarted mid-stream: its readings
# stop and resume, and the other daemons' never stop. A token is sent to every node and never
# shows in any output. Bounded: about 12 s.
set -uo pipefail
. "$(dirname "$0")/daemon_common.bash"
command -v python3 >/dev/null || { echo "SKIPPED: python3 is not installed"; exit 77; }
export ZEUS_SIM_HARDWARE=h100
TOKEN=tok-3f9c2e7d51
start_node() { # name [serve options]: a daemon of its own (log $tmp/<name>.log)
  local name=$1; shift
  "$ZEUS" daemon serve --no-state-file --log-level info "$@" 2>>"$tmp/$name.log" &
  eval "PID_$name=$!"
  PIDS+=("$!")
  for _ in $(seq 100); do
    grep -q "serve: ready" "$tmp/$name.log" 2>/dev/null && return 0
    sleep 0.05
  done
  die "daemon $name not ready within 5 s: $(cat "$tmp/$name.log")"
}
# Node a also has two CPU packages (a fake powercap tree: package 0 with a DRAM zone, 1 without).
for z in "intel-rapl:0 package-0" "intel-rapl:0:0 dram" "intel-rapl:1 package-1"; do
  set -- $z
  mkdir -p "$tmp/powercap/$1"
  echo 1000 >"$tmp/powercap/$1/energy_uj"
  echo "$2" >"$tmp/powercap/$1/name"
  echo 262143328850 >"$tmp/powercap/$1/max_energy_range_uj"
done
ZEUS_RAPL_ROOT=$tmp/powercap start_node a --socket-path "$tmp/a.sock"
start_node b --socket-path "$tmp/b.sock"
start_node c --socket-path "$tmp/c.sock"
start_node d --mode tcp --tcp-bind-address 127.0.0.1:0
PORT=$(sed -n 's/.*TCP port \([0-9]*\).*/\1/p' "$tmp/d.log")
[ -n "$PORT" ] || die "daemon d did not print its TCP port"

# The misbehaving servers: "stall" answers the stream with one event, then says nothing;
# "garbage" answers 200 and sends lines that are no power event, again at each connection.
cat >"$tmp/bad.py" <<'EOF'
import os, socket, sys, threading, time
path, mode = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX)
s.bind(path)
s.listen(16)
def serve(c):
    try:
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                d = c.recv(4096)
                if not d:
                    return
                buf += d
            req, buf = buf.split(b"\r\n\r\n", 1)
            if req.startswith(b"GET /time "):
                body = b'{"timestamp_ms": %d}' % int(time.time() * 1000)
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
                continue
            if b"/cpu/" in req.split(b"\r\n")[0]:  # no cpu-read here: 404, as zeusd without it
                c.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                continue
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
            if mode == "stall":
                c.sendall(b'data: {"timestamp_ms": %d, "gpu_id": 0, "power_mw": 77000}\n\n' % int(time.time() * 1000))
                time.sleep(3600)
            else:
                while True:
                    c.sendall(b"data: {\"timestamp_ms\": oops}\n\n")
                    time.sleep(0.05)
    except OSError:
        pass
    finally:
        c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
EOF
python3 "$tmp/bad.py" "$tmp/stall.sock" stall & PIDS+=("$!")
python3 "$tmp/bad.py" "$tmp/garbage.sock" garbage & PIDS+=("$!")
for _ in $(seq 100); do [ -S "$tmp/stall.sock" ] && [ -S "$tmp/garbage.sock" ] && break; sleep 0.05; done

FROM="unix:$tmp/a.sock,unix:$tmp/b.sock,unix:$tmp/c.sock,tcp:127.0.0.1:$PORT,unix:$tmp/stall.sock,unix:$tmp/garbage.sock"
t0=$(now)
ZEUSD_TOKEN=$TOKEN "$ZEUS" monitor power --from "$FROM" --json --duration-s 9 --stall-timeout-s 1.5 \
  --reconnect-max-s 0.5 >"$tmp/out.jsonl" 2>"$tmp/err.txt" &
MON=$!
PIDS+=("$MON")
sleep 2.5
t_kill=$(now)
kill -9 "$PID_b"; wait "$PID_b" 2>/dev/null
sleep 2
t_restart=$(now)
start_node b --socket-path "$tmp/b.sock"
wait "$MON"
rc=$?
t1=$(now)
lt "$(elapsed "$t0" "$t1")" 12 || die "the monitor took $(elapsed "$t0" "$t1") s for --duration-s 9"
[ "$rc" = 1 ] || die "exit code $rc, expected 1 (the garbage node sent no event): $(cat "$tmp/err.txt")"

python3 - "$tmp" "$PORT" "$t0" "$t_kill" "$t_restart" "$t1" <<'EOF' || die "the timeline is wrong (above)"
import json, sys
tmp, port, t0, t_kill, t_restart, t1 = sys.argv[1], sys.argv[2], *map(float, sys.argv[3:])
rows = [json.loads(l) for l in open(f"{tmp}/out.jsonl")]
by = {}
for r in rows:
    assert set(r) == {"unix_time_s", "node", "kind", "device", "power_w", "dram_w"}, r
    by.setdefault(r["node"], []).append(r)
names = {k: f"{tmp}/{k}.sock" for k in "abc"}
names["d"] = f"127.0.0.1:{port}"
bad = False
def check(ok, what):
    global bad
    print(("ok - " if ok else "FAIL: ") + what)
    bad |= not ok
# The healthy daemons: both GPUs, and events in every second of the run (they never stop).
for k in "acd":
    ev = by.get(names[k], [])
    gpus = sorted({r["device"] for r in ev if r["kind"] == "gpu"})
    check(gpus == [0, 1], f"node {k}: GPUs {gpus} stream")
    gev = [r for r in ev if r["kind"] == "gpu"]
    check(all(20 <= r["power_w"] <= 1000 for r in gev) and len({r["power_w"] for r in gev}) > 10, f"node {k}: powers move (the h100 profile's noise)")
    gaps = [b["unix_time_s"] - a["unix_time_s"] for a, b in zip(ev, ev[1:])]
    check(len(ev) > 40 and max(gaps) < 0.8,
          f"node {k}: {len(ev)} events, longest gap {max(gaps):.2f} s (never stops while b and the bad nodes fail)")
cpu = [r for r in by.get(names["a"], []) if r["kind"] == "cpu"]
check({(r["device"], r["dram_w"] is None) for r in cpu} == {(0, False), (1, True)} and all(r["power_w"] == 0 for r in cpu),
      f"node a: CPU packages 0 (with DRAM) and 1 (without) at 0 W: {cpu[:2]}")
check(not any(r["kind"] == "cpu" for k in "bcd" for r in by.get(names[k], [])), "nodes without RAPL: no CPU event")
# The daemon killed and restarted: events before the kill, none while it was down, and again after.
ev = by.get(names["b"], [])
before = [r for r in ev if r["unix_time_s"] < t_kill]
during = [r for r in ev if t_kill + 0.3 < r["unix_time_s"] < t_restart]
after = [r for r in ev if r["unix_time_s"] > t_restart]
check(len(before) > 10, f"node b: {len(before)} events before it was killed")
check(not during, f"node b: {len(during)} events while it was down")
check(len(after) > 10 and after[0]["unix_time_s"] - t_restart < 2.0,
      f"node b: {len(after)} events after the restart, the first {after[0]['unix_time_s'] - t_restart if after else -1:.2f} s after it")
st = by.get(f"{tmp}/stall.sock", [])
check(1 <= len(st) <= 8 and all(r["power_w"] == 77.0 for r in st), f"stall node: {len(st)} events, one per connection")
check(f"{tmp}/garbage.sock" not in by, "garbage node: no event")
sys.exit(1 if bad else 0)
EOF
grep -q "node $tmp/garbage.sock sent no power event: garbage in the stream" "$tmp/err.txt" \
  || die "the garbage node is not reported: $(cat "$tmp/err.txt")"
grep -q "node $tmp/stall.sock: .* lost (last: stalled: nothing for 1.5 s" "$tmp/err.txt" \
  || die "the stalled node is not reported: $(cat "$tmp/err.txt")"
grep -q "node $tmp/b.sock: .* lost" "$tmp/err.txt" || die "the restarted node's loss is not reported: $(cat "$tmp/err.txt")"
echo "ok - stderr names the garbage, the stall and the lost node"
if grep -rqF "$TOKEN" "$tmp"/out.jsonl "$tmp"/err.txt "$tmp"/*.log; then die "the token appears in an output or log"; fi
echo "ok - the token appears in no output and no log"

# CSV: the header and one row per event.
"$ZEUS" monitor power --from "unix:$tmp/a.sock,tcp:127.0.0.1:$PORT" --gpus 1 --duration-s 1 >"$tmp/out.csv" 2>"$tmp/err2.txt" \
  || die "CSV run failed: $(cat "$tmp/err2.txt")"
[ "$(head -1 "$tmp/out.csv")" = "unix_time_s,node,device,power_w,dram_w" ] || die "CSV header: $(head -1 "$tmp/out.csv")"
n=$(grep -c "^[0-9.]*,$tmp/a.sock,gpu1,[0-9.]*,$" "$tmp/out.csv")
m=$(grep -c "^[0-9.]*,127.0.0.1:$PORT,gpu1,[0-9.]*,$" "$tmp/out.csv")
[ "$n" -ge 5 ] && [ "$m" -ge 5 ] || die "CSV rows for gpu1: $n and $m: $(head -5 "$tmp/out.csv")"
grep -q ",gpu0," "$tmp/out.csv" && die "--gpus 1 streamed GPU 0"
echo "ok - CSV: $n and $m rows of GPU 1 from the two nodes (--gpus 1)"
"$ZEUS" monitor power --from "ftp:x" >/dev/null 2>"$tmp/err3.txt" && die "--from ftp:x accepted"
grep -q "'ftp:x' is not unix:PATH or tcp:HOST:PORT" "$tmp/err3.txt" || die "bad --from message: $(cat "$tmp/err3.txt")"
echo "ok - a bad --from is refused, naming it"
