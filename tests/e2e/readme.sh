#!/usr/bin/env bash
# End-to-end: the top-level README.md cannot rot. Every ```sh block is run, in order, in one shell
# as a newcomer would follow the page (lines "$ CMD" with their "\" continuations are commands,
# the lines after them their output; a block without "$ " lines is all commands), from a copy of
# the checkout's layout whose build/ is this build, on the simulated GPU. A block preceded by
# "<!-- readme.sh: not run (REASON) -->" (it needs root, a GPU, or it is make check itself) is
# not run, but every command in it must exist: its make targets in the Makefile, its `zeus`
# subcommands and options in `zeus ... --help`. The output the page shows for a command is
# compared where it is exact (frontier.csv's first lines). Also: the page stays under 250 lines,
# every docs/ page is in docs/README.md's index, and every docs/ page starts with what it is for
# and a command to try (a ```sh block before its second heading).
set -u
. "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || { echo "SKIPPED: python3 is needed to read the page"; exit 77; }
SRC=${ZEUS_SOURCE_DIR:?}
README="$SRC/README.md"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT

n=$(wc -l <"$README")
[ "$n" -le 250 ] && pass "README.md is $n lines (at most 250)" || fail "README.md is $n lines, more than 250"

# Split the page into its blocks: run.sh (the commands of every block that runs, in order, each
# echoed first), skipped.txt (the commands of the blocks not run) and shown.txt (each command's
# output as the page shows it: "### CMD" then the lines).
python3 - "$README" "$W" <<'EOF'
import re, sys
readme, out = sys.argv[1], sys.argv[2]
lines = open(readme).read().split("\n")
run, skipped, shown, blocks = [], [], [], 0
i, skip_reason = 0, None
while i < len(lines):
    l = lines[i]
    m = re.match(r"<!-- readme.sh: not run \((.+)\)", l)
    if m: skip_reason = m.group(1)
    if l.strip() == "```sh":
        j = i + 1
        body = []
        while lines[j].strip() != "```":
            body.append(lines[j]); j += 1
        blocks += 1
        prompt = any(b.startswith("$ ") for b in body)
        cmds, k = [], 0
        while k < len(body):
            b = body[k]
            if prompt and not b.startswith("$ "):
                if cmds: shown.append(b)
                k += 1; continue
            c = b[2:] if prompt else b
            while c.rstrip().endswith("\\") and k + 1 < len(body):
                k += 1; c = c.rstrip()[:-1] + " " + body[k].strip()
            if c.strip() and not c.lstrip().startswith("#"):
                cmds.append(c)
                shown.append("### " + c)
            k += 1
        (skipped if skip_reason else run).extend(cmds)
        skip_reason = None
        i = j
    i += 1
with open(out + "/run.sh", "w") as f:
    f.write("set -e\n")
    for c in run:
        f.write("printf '%%s\\n' %s\n" % ("'$ " + c.replace("'", "'\\''") + "'"))
        m = re.match(r"build/zeus ([a-z-]+)", c)
        if m:  # a command an optional component brings is left out of some builds (minimal)
            f.write("if build/zeus %s --help >/dev/null 2>&1; then\n%s\nelse echo '(zeus %s: not in this build)'; fi\n"
                    % (m.group(1), c, m.group(1)))
        elif c.startswith("PYTHONPATH=") or c.startswith("python3"):
            f.write("$PY_ENV %s\n" % c)  # the sanitizer runtimes first when libzeus is sanitized
        else:
            f.write(c + "\n")
open(out + "/skipped.txt", "w").write("\n".join(skipped) + "\n")
open(out + "/shown.txt", "w").write("\n".join(shown) + "\n")
print("%d blocks: %d commands run, %d not run" % (blocks, len(run), len(skipped)))
EOF
[ -s "$W/run.sh" ] && pass "the page's shell blocks were read" || fail "no shell block read from README.md"

# A working copy of the checkout's layout: build/ is this build, everything else the sources.
mkdir -p "$W/tree" "$W/home"
for f in "$SRC"/*; do ln -s "$f" "$W/tree/$(basename "$f")"; done
rm -f "$W/tree/build"
ln -s "$ZEUS_BUILD_DIR" "$W/tree/build"

# A sanitized libzeus loads into Python only after the sanitizer runtimes (as python.pytest does).
PY_ENV=env
if ldd "$ZEUS_LIBRARY" 2>/dev/null | grep -q libasan; then
  cc=${CC:-cc}
  PY_ENV="env LD_PRELOAD=$($cc -print-file-name=libasan.so):$($cc -print-file-name=libubsan.so) ASAN_OPTIONS=detect_leaks=0"
fi
export PY_ENV

# Run them. Each command's output goes to the log; a failing command fails the test.
if (cd "$W/tree" && HOME="$W/home" ZEUSC_LIBRARY="$ZEUS_LIBRARY" timeout 240 bash "$W/run.sh") >"$W/run.log" 2>&1; then
  pass "every command of the page's runnable blocks succeeded ($(grep -c '^\$ ' "$W/run.log") commands)"
else
  fail "a README command failed:"; tail -30 "$W/run.log" | sed 's/^/    /'
fi

# What the page shows for the frontier is what it writes.
want=$(awk '/^### head -3 plans\/frontier.csv$/ { on = 1; next } /^###/ { on = 0 } on' "$W/shown.txt")
got=$(head -3 "$W/tree/plans/frontier.csv" 2>/dev/null)
[ -n "$want" ] && [ "$want" = "$got" ] && pass "the frontier.csv lines the page shows are what zeus writes" \
  || { fail "frontier.csv as shown"; echo "    shown: $want"; echo "    got:   $got"; }
grep -q '"total_energy_j"' "$W/run.log" && pass "monitor energy --json printed its document" \
  || fail "monitor energy --json output missing"
grep -q 'optimal power limit' "$W/run.log" && pass "the Python example chose a power limit" \
  || fail "the Python example's output missing"
rm -rf "$W/tree/plans" "$W/tree/zeus-logs" "$W/tree/plo.json"

# The blocks not run: every make target exists, every zeus subcommand and option is accepted by
# its --help.
while IFS= read -r c; do
  [ -z "$c" ] && continue
  c=${c%%#*}
  c=${c#sudo }
  set -- $c
  case "$1" in
    make)
      t=$2
      if grep -Eq "^$t:" "$SRC/Makefile"; then pass "make $t exists"; else fail "README shows 'make $t', no such target"; fi ;;
    build/zeus)
      shift
      if [[ " ${ZEUS_COMMANDS_LEFT_OUT:-} " == *[\ \;,]"$1"[\ \;,]* ]]; then skip_part "zeus $1"; continue; fi
      sub=()
      while [ $# -gt 0 ] && [[ $1 != -* ]]; do sub+=("$1"); shift; done
      # the longest prefix of words that is a command
      while [ ${#sub[@]} -gt 0 ] && ! "$ZEUS" "${sub[@]}" --help >/dev/null 2>&1; do unset 'sub[${#sub[@]}-1]'; done
      help=$("$ZEUS" "${sub[@]}" --help 2>&1)
      ok=1
      for a in "$@"; do
        case "$a" in --*) o=${a%%=*}; grep -q -- "$o" <<<"$help" || { ok=0; echo "    unknown option $o"; } ;; esac
      done
      [ ${#sub[@]} -gt 0 ] && [ $ok = 1 ] && pass "zeus ${sub[*]} and its options exist" \
        || fail "README shows '$c', not accepted by zeus" ;;
    export) pass "export line ($2)" ;;
    *) fail "README shows '$c' in a block not run, and this test cannot check it" ;;
  esac
done <"$W/skipped.txt"

# docs/: every page is in the index, and every page starts with what it is for and a command to
# try (a ```sh block before the page's second heading).
for p in "$SRC"/docs/*.md; do
  b=$(basename "$p")
  [ "$b" = README.md ] && continue
  grep -q "](${b})" "$SRC/docs/README.md" && pass "docs/$b is in the index" || fail "docs/$b is not in docs/README.md"
  awk 'NR > 1 && /^#/ { exit } /^```sh/ { found = 1 } END { exit !found }' "$p" \
    && pass "docs/$b starts with a command to try" || fail "docs/$b has no command to try before its first section"
done

finish
