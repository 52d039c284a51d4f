# Helpers for the shell end-to-end tests. ZEUS (the CLI) comes from CTest's environment.
: "${ZEUS:?ZEUS must point at the zeus binary}"
PASSED=0
FAILED=0
pass() { PASSED=$((PASSED + 1)); echo "ok - $*"; }
fail() { FAILED=$((FAILED + 1)); echo "FAIL - $*"; }
# expect_code NAME CODE CMD...
expect_code() {
  local name=$1 want=$2; shift 2
  "$@" >/tmp/zeus-e2e-out.$$ 2>&1
  local got=$?
  if [ "$got" -eq "$want" ]; then pass "$name"; else fail "$name (exit $got, expected $want)"; sed 's/^/    /' /tmp/zeus-e2e-out.$$; fi
}
expect_ok() { local name=$1; shift; expect_code "$name" 0 "$@"; }
# expect_out_has NAME REGEX CMD... (stdout)
expect_out_has() {
  local name=$1 re=$2; shift 2
  local out; out=$("$@" 2>/dev/null)
  if grep -Eq -- "$re" <<<"$out"; then pass "$name"; else fail "$name (stdout lacks /$re/)"; echo "$out" | head -20 | sed 's/^/    /'; fi
}
# expect_err_has NAME TEXT CMD... (stderr)
expect_err_has() {
  local name=$1 re=$2; shift 2
  local err; err=$("$@" 2>&1 >/dev/null)
  if grep -Fq -- "$re" <<<"$err"; then pass "$name"; else fail "$name (stderr lacks '$re')"; echo "$err" | head -20 | sed 's/^/    /'; fi
}
# zeus_has COMMAND: whether this build has a zeus command (optional components can leave some
# out: cmake/components.cmake). A test of a left-out command says so and moves on.
zeus_has() { "$ZEUS" "$1" --help >/dev/null 2>&1; }
skip_part() { echo "skip - $* (not in this build)"; }
finish() {
  rm -f /tmp/zeus-e2e-out.$$
  echo "$PASSED passed, $FAILED failed"
  [ "$FAILED" -eq 0 ]
}
# need_nobody_python: for tests that play a hostile second local user. Exits 77 (skipped, with
# the reason) unless this runs as root with setpriv, curl and a user nobody that may run a
# python3; sets PY (that python3), group (nobody's group) and FLOOD (tests/helpers/flood.py), and
# defines as_user UID GID CMD... (CMD as that user, no capabilities). Start a background attacker
# with setpriv itself (not as_user) so that its $! is the attacker and a kill reaches it.
need_nobody_python() {
  [ "$(id -u)" = 0 ] || { echo "SKIPPED: needs root to run the attacker as nobody"; exit 77; }
  command -v setpriv >/dev/null || { echo "SKIPPED: setpriv (util-linux) is not installed"; exit 77; }
  command -v curl >/dev/null || { echo "SKIPPED: curl is not installed"; exit 77; }
  group=$(id -gn nobody 2>/dev/null) || { echo "SKIPPED: no user nobody"; exit 77; }
  FLOOD=$(cd "$(dirname "$0")/../helpers" && pwd)/flood.py
  PY=
  local p
  for p in /usr/bin/python3 /usr/local/bin/python3; do
    [ -x "$p" ] && setpriv --reuid=nobody --regid="$group" --clear-groups --inh-caps=-all -- "$p" -c pass 2>/dev/null &&
      { PY=$p; break; }
  done
  [ -n "$PY" ] || { echo "SKIPPED: no python3 that nobody may run"; exit 77; }
}
as_user() { local u=$1 g=$2; shift 2; setpriv --reuid="$u" --regid="$g" --clear-groups --inh-caps=-all -- "$@"; }
# sanitizer_python DIR: in the sanitizer build, points PYTHON (which gpu-check's steps run) at a
# wrapper in DIR that preloads the sanitizer runtimes, without which the interpreter cannot load
# libzeus. Needs PY (the interpreter) and ZEUS_BUILD_DIR.
sanitizer_python() {
  grep -q '^ZEUS_SANITIZE:BOOL=ON' "${ZEUS_BUILD_DIR:?}/CMakeCache.txt" 2>/dev/null || return 0
  cat >"$1/py" <<PYEOF
#!/bin/sh
LD_PRELOAD=$(cc -print-file-name=libasan.so):$(cc -print-file-name=libubsan.so) ASAN_OPTIONS=detect_leaks=0 exec $PY "\$@"
PYEOF
  chmod +x "$1/py"
  export PYTHON=$1/py
}
# gpu_check_step REPORT NAME EXPR: whether the Python expression EXPR holds of gpu-check's
# report.json REPORT, with d the document, r the result of step NAME and steps each step's status
# by name; prints r (cut) when it does not.
gpu_check_step() {
  "$PY" - "$1" "$2" "$3" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
steps = {s["step"]: s["status"] for s in d["steps"]}
r = [s for s in d["steps"] if s["step"] == sys.argv[2]][0].get("result")
ok = eval(sys.argv[3])
if not ok:
    print("    %s: %s" % (sys.argv[2], json.dumps(r)[:1500]))
sys.exit(0 if ok else 1)
PYEOF
}
# jcheck FILE EXPR: whether the Python expression EXPR holds of the JSON document d in FILE.
# Needs PY.
jcheck() {
  "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if ($2) else 1)" "$1"
}
# expect_check_fails NAME EXPR [--busy] [--err TEXT]... [--no-err TEXT]... -- [VAR=VALUE...] CMD...
# A check of gpu-check that must fail (on a GPU that lies, FAKE_NVML_LIE or FAKE_AMDSMI_LIE, or
# one too slow for it): CMD (a zeus gpus tool with --json, or a step's script; JSON on stdout),
# run with those variables, exits 1, its JSON meets EXPR (as jcheck), and its stderr has each
# TEXT (a grep pattern) and none of the --no-err ones. --busy: the fake GPUs are busy while it
# runs ($tmp/busy, their FAKE_*_BUSY_FILE). Its JSON and stderr stay in $tmp/fails.json and
# $tmp/fails.err until the next call. Needs PY and tmp.
expect_check_fails() {
  local name=$1 expr=$2 busy= out=$tmp/fails why= t rc
  local -a has=() lacks=()
  shift 2
  while [ $# -gt 0 ]; do
    case $1 in
      --busy) busy=1; shift ;;
      --err) has+=("$2"); shift 2 ;;
      --no-err) lacks+=("$2"); shift 2 ;;
      --) shift; break ;;
      *) fail "$name (expect_check_fails: unknown option $1)"; return ;;
    esac
  done
  [ -z "$busy" ] || touch "$tmp/busy"
  env "$@" >"$out.json" 2>"$out.err"
  rc=$?
  rm -f "$tmp/busy"
  if [ "$rc" != 1 ]; then why="exit $rc, expected 1"
  elif ! jcheck "$out.json" "$expr"; then why="its JSON does not meet the check"
  else
    for t in ${has[@]+"${has[@]}"}; do grep -q -- "$t" "$out.err" || why="stderr lacks /$t/"; done
    for t in ${lacks[@]+"${lacks[@]}"}; do ! grep -q -- "$t" "$out.err" || why="stderr has /$t/"; done
  fi
  if [ -z "$why" ]; then pass "$name"
  else
    fail "$name ($why)"
    tail -n 3 "$out.err" | sed 's/^/    /'
    echo "    $(head -c 800 "$out.json")"
  fi
}
# plo_fails NAME EXPR TEXT [VAR=VALUE...]: gpu-check's plo step (gpu_check_plo.py --quick, no
# confidence runs, on GPU 0) with those variables fails: exit 1, its JSON meets EXPR and its
# stderr has TEXT. Needs SRC, PY (or PYTHON) and tmp.
plo_fails() {
  local name=$1 expr=$2 text=$3
  shift 3
  expect_check_fails "$name" "$expr" --err "$text" -- "$@" PYTHONPATH="$SRC/python" ${PYTHON:-$PY} \
    "$SRC/scripts/gpu_check_plo.py" --gpus 0 --quick --confidence 0
}
