#!/usr/bin/env bash
# The four HTTP servers (bso-server, pfo-server, exporter, daemon serve) against a folded header
# line placed where libmicrohttpd 0.9.75 copies it over itself (issue 36, finding 10;
# cli/sanitizer/mhd_memcpy.c): tests/helpers/folded_header.py sends, for read buffers of 4, 8 and
# 16 KiB (half of each server's connection memory), 180 unauthenticated requests whose header
# section fills the buffer and ends in a field name and its continuation line, alone and pipelined
# behind a small request. Every one must be answered, and the server must serve a plain request
# afterwards. In the sanitizer build, before the executable's memcpy turned that overlapping copy
# into a memmove, the first such request killed each server (AddressSanitizer:
# memcpy-param-overlap); the release build answered them. Loopback and a Unix socket; ~5 s.
set -u
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || { echo "SKIPPED: curl is not installed"; exit 77; }
command -v python3 >/dev/null || { echo "SKIPPED: python3 is not installed"; exit 77; }
PROBE=$(cd "$(dirname "$0")/../helpers" && pwd)/folded_header.py
tmp=$(mktemp -d)
srv=
trap '[ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$tmp"' EXIT
export ZEUS_GPU_BACKEND=sim ZEUS_SIM_GPUS=2
unset ZEUSD_SOCK_PATH ZEUSD_HOST_PORT ZEUSD_TOKEN CUDA_VISIBLE_DEVICES

# start NAME READY_REGEX CMD...: starts a server (stdout and stderr in $tmp/NAME.out, .log), waits
# until READY_REGEX is in either; sets $srv, $log, and $port from a "port N" it printed.
start() {
  local name=$1 ready=$2; shift 2
  log=$tmp/$name.log
  "$@" >"$tmp/$name.out" 2>"$log" &
  srv=$!
  for _ in $(seq 200); do
    grep -Eq "$ready" "$tmp/$name.out" "$tmp/$name.log" 2>/dev/null && break
    kill -0 "$srv" 2>/dev/null || break
    sleep 0.05
  done
  port=$(grep -Eo 'port [0-9]+' "$tmp/$name.out" | head -1 | awk '{print $2}')
}
stop() {
  kill "$srv" 2>/dev/null
  wait "$srv" 2>/dev/null
  srv=
}
# probe NAME ADDRESS PATH CURL_ARGS...: the folded requests (pipelined behind GET PATH, which the
# server answers keeping the connection), then the server alive and serving.
probe() {
  local name=$1 address=$2 path=$3; shift 3
  if ! kill -0 "$srv" 2>/dev/null; then
    fail "$name did not start: $(tail -5 "$log")"
    return
  fi
  if timeout 120 python3 "$PROBE" "$address" "$path" 4096 8192 16384 >"$tmp/probe" 2>&1; then
    pass "$name: $(tail -1 "$tmp/probe")"
  else
    fail "$name: $(tail -1 "$tmp/probe"); first: $(head -1 "$tmp/probe")"
  fi
  local code
  code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' "$@")
  if kill -0 "$srv" 2>/dev/null && [ "$code" != 000 ]; then
    pass "$name still serves a plain request (HTTP $code)"
  else
    fail "$name is gone or silent after the folded requests (HTTP $code): $(grep -m1 -A3 'ERROR' "$log" || tail -3 "$log")"
  fi
  stop
}

if zeus_has bso-server; then
  start bso 'port [0-9]+' "$ZEUS" bso-server --port 0 --database "sqlite://$tmp/bso.db"
  probe bso-server "127.0.0.1:$port" /nowhere "127.0.0.1:$port/jobs/batch_size?job_id=nope"
else
  skip_part "bso-server"
fi

if zeus_has pfo-server; then
  start pfo 'port [0-9]+' "$ZEUS" pfo-server --scheduler AllMaxFrequency --scheduler-args '{"num_microbatches": 2}' --port 0
  probe pfo-server "127.0.0.1:$port" /info "127.0.0.1:$port/info"
else
  skip_part "pfo-server"
fi

if zeus_has exporter; then
  start exporter 'port [0-9]+' "$ZEUS" exporter --port 0
  probe exporter "127.0.0.1:$port" /metrics "127.0.0.1:$port/metrics"
else
  skip_part "exporter"
fi

if zeus_has daemon; then
  start daemon 'serve: ready' "$ZEUS" daemon serve --socket-path "$tmp/zeusd.sock" --no-state-file
  probe "daemon serve" "$tmp/zeusd.sock" /discover --unix-socket "$tmp/zeusd.sock" "http://localhost/discover"
else
  skip_part "daemon"
fi
finish
