# Helpers of the zeus bso-server hardening tests (tests/e2e/bso_server_*.sh), sourced after
# lib.sh; not a test itself (CTest runs *.sh). Each test runs its checks on SQLite and on a
# throwaway PostgreSQL (scripts/pg-temp.sh; that half skips, saying why, when none can start).
command -v curl >/dev/null || { echo "SKIPPED: curl is not installed"; exit 77; }
zeus_has bso-server || { echo "SKIPPED: this build has no zeus bso-server"; exit 77; }
PG_TEMP="$(dirname "${BASH_SOURCE[0]}")/../../scripts/pg-temp.sh"
tmp=$(mktemp -d)
srv=
pg_started=
trap 'bso_stop; [ -n "$pg_started" ] && "$PG_TEMP" stop "$tmp/pg"; rm -rf "$tmp"' EXIT
trap 'exit 143' INT TERM

# bso_databases: writes the databases to test to $tmp/dbs, one a line: a SQLite file, then a
# PostgreSQL database when this build has PostgreSQL support and a throwaway server starts
# (stopped at exit; a line "skip - ..." otherwise). Call it in this shell (not in $(...) or <(...)), so that the exit trap knows.
bso_databases() {
  echo "sqlite://$tmp/bso.db" >"$tmp/dbs"
  case " ${ZEUS_PKGS_BUILT-libpq} " in
    *" libpq "*) ;;
    *) echo "skip - PostgreSQL half: this build has no PostgreSQL support (ZEUS_WITH_STORE_PG=OFF)"; return 0 ;;
  esac
  local url
  url=$(unset LD_PRELOAD ASAN_OPTIONS; "$PG_TEMP" start "$tmp/pg" 2>"$tmp/pgerr" | tail -n 1)
  [ -f "$tmp/pg/pgdir" ] && pg_started=1
  case "$url" in
    postgresql://*) echo "$url" >>"$tmp/dbs" ;;
    *) echo "skip - PostgreSQL half: no throwaway PostgreSQL: $(head -c 300 "$tmp/pgerr")" ;;
  esac
}
# for_each_database FUNCTION: FUNCTION DATABASE KIND for each database of bso_databases.
for_each_database() {
  bso_databases
  local db
  while read -r db; do
    case "$db" in sqlite://*) "$1" "$db" sqlite ;; *) "$1" "$db" postgresql ;; esac
  done <"$tmp/dbs"
}

# bso_start DATABASE [ARGS...]: starts a server on a free port (BSO: its address; its stderr in
# $tmp/log). Fails when it does not start.
bso_start() {
  local db=$1; shift
  : >"$tmp/out"
  "$ZEUS" bso-server --port 0 --log-level info --database "$db" "$@" >"$tmp/out" 2>"$tmp/log" &
  srv=$!
  for _ in $(seq 400); do
    grep -q "port" "$tmp/out" 2>/dev/null && break
    kill -0 "$srv" 2>/dev/null || break
    sleep 0.025
  done
  port=$(awk '{print $NF}' "$tmp/out")
  BSO="127.0.0.1:$port"
  if [ -z "$port" ]; then echo "    the server did not start: $(head -c 500 "$tmp/log")"; srv=; return 1; fi
}
bso_stop() { if [ -n "${srv:-}" ]; then kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null; fi; srv=; }

# req METHOD PATH [BODY]: prints "STATUS BODY" (curl's own failure: status 000).
req() {
  local code
  rm -f "$tmp/body"
  code=$(curl -s -m "${REQ_TIMEOUT:-30}" -o "$tmp/body" -w '%{http_code}' -X "$1" "$BSO$2" ${3:+--data-binary "$3"})
  echo "$code $(cat "$tmp/body" 2>/dev/null)"
}
# check NAME WANT_STATUS WANT_TEXT METHOD PATH [BODY]: the answer has that status and holds the
# text (fixed string; "" for any).
check() {
  local name=$1 want=$2 text=$3; shift 3
  local got; got=$(req "$@")
  if [ "${got%% *}" = "$want" ] && grep -Fq -- "$text" <<<"$got"; then pass "$name"
  else fail "$name: expected $want with '$text', got: $(head -c 400 <<<"$got")"; fi
}
# sql DATABASE STATEMENT: runs it on the server's database, rows as a|b lines.
sql() {
  case "$1" in
    sqlite://*) sqlite3 -cmd ".timeout 5000" "${1#sqlite://}" "$2" ;;
    *) (unset LD_PRELOAD ASAN_OPTIONS; psql -X -q -tA -F '|' "$1" -c "$2") ;;
  esac
}
# field JSON KEY: a top-level value of a JSON object.
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1].split(" ", 1)[1])[sys.argv[2]])' "$1" "$2"; }
