#!/bin/sh
# A throwaway PostgreSQL server for tests and benchmarks (Debian's `postgresql` package).
#
#   scripts/pg-temp.sh start STATE_DIR      initdb into a fresh folder and start the server; prints
#                                           its libpq URI (the postgres database) on the last line
#   scripts/pg-temp.sh stop STATE_DIR       stop it and remove its folder
#   scripts/pg-temp.sh restart|pause|resume STATE_DIR
#                                           pause: stop the server keeping its data; resume: start
#                                           it again (the tests' "database goes away")
#   scripts/pg-temp.sh createdb STATE_DIR NAME
#   scripts/pg-temp.sh run CMD [ARGS...]    start one, run CMD with ZEUS_TEST_PG_URL set, stop it
#                                           at exit (whatever CMD's fate)
#
# The cluster lives in a folder of its own under ${TMPDIR:-/tmp}, owned by the user the server
# runs as: the caller, or, when the caller is root (PostgreSQL refuses to run as root), the
# system user "nobody" through runuser/setpriv. The server listens on a Unix socket in that
# folder only (no TCP port), trusts local connections, and is named in STATE_DIR/pgdir.
set -eu
# PostgreSQL's own programs run without the sanitizer runtimes a test's interpreter preloads.
unset LD_PRELOAD ASAN_OPTIONS UBSAN_OPTIONS

find_bin() {
  for d in /usr/lib/postgresql/*/bin; do
    if [ -x "$d/initdb" ]; then echo "$d"; return 0; fi
  done
  command -v initdb >/dev/null 2>&1 && { dirname "$(command -v initdb)"; return 0; }
  echo "pg-temp.sh: initdb not found: install PostgreSQL (apt-get install postgresql; scripts/deps.sh)" >&2
  return 1
}

as_owner() { # run "$@" as the cluster's owner
  if [ "$(id -u)" = 0 ]; then
    if command -v runuser >/dev/null 2>&1; then runuser -u nobody -- "$@"
    else setpriv --reuid=nobody --regid=nogroup --clear-groups -- "$@"; fi
  else "$@"; fi
}

uri() { echo "postgresql:///postgres?host=$1&user=zeus"; }

cmd=${1:-}
case "$cmd" in
  start)
    state=$2
    mkdir -p "$state"
    bin=$(find_bin)
    dir=$(mktemp -d "${TMPDIR:-/tmp}/zeus-pg.XXXXXX")
    echo "$dir" > "$state/pgdir"
    if [ "$(id -u)" = 0 ]; then chown nobody "$dir"; fi
    chmod 0700 "$dir"
    # Bounded: a hung initdb (its `postgres -V` under a preloaded sanitizer did) must not outlive
    # the caller; timeout kills its whole process group.
    as_owner timeout -k 5 60 "$bin/initdb" -D "$dir/data" -U zeus --auth=trust -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 || {
      cat "$dir/initdb.log" >&2; exit 1; }
    # The socket directory must be reachable by the client (root or the caller: it is).
    chmod 0711 "$dir"
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-k $dir -c listen_addresses='' -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
      start >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
    uri "$dir"
    ;;
  stop)
    state=$2
    [ -f "$state/pgdir" ] || exit 0
    dir=$(cat "$state/pgdir")
    bin=$(find_bin)
    as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$dir" "$state/pgdir"
    ;;
  pause|resume|restart)
    state=$2
    dir=$(cat "$state/pgdir")
    bin=$(find_bin)
    case "$cmd" in
      pause) as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null ;;
      resume) as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
                -o "-k $dir -c listen_addresses='' -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
                start >/dev/null ;;
      restart) as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w restart >/dev/null ;;
    esac
    ;;
  createdb)
    state=$2 name=$3
    dir=$(cat "$state/pgdir")
    bin=$(find_bin)
    "$bin/psql" -X -q -v ON_ERROR_STOP=1 "$(uri "$dir")" -c "CREATE DATABASE \"$name\"" >/dev/null
    ;;
  run)
    shift
    state=$(mktemp -d "${TMPDIR:-/tmp}/zeus-pg-state.XXXXXX")
    trap '"$0" stop "$state"; rm -rf "$state"' EXIT INT TERM
    url=$("$0" start "$state" | tail -n 1)
    ZEUS_TEST_PG_URL=$url "$@"
    ;;
  *)
    sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
