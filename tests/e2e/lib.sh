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
