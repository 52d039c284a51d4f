# Sourced by the *_valgrind.sh tests after lib.sh: without valgrind the test is skipped (CTest
# code 77); with it, `vg CMD...` runs CMD under valgrind --leak-check=full and exits 99 on any
# invalid access or leak (definite, indirect or possible).
if ! command -v valgrind >/dev/null 2>&1; then
  echo "SKIPPED: valgrind is not installed"
  exit 77
fi
vg() {
  valgrind -q --leak-check=full --show-leak-kinds=definite,indirect,possible \
    --errors-for-leak-kinds=definite,indirect,possible --error-exitcode=99 "$@"
}
