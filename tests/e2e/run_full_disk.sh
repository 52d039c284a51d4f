#!/usr/bin/env bash
# `zeus run` on a full disk (issue 26, item 8): the try is refused, the state is kept as it was,
# and the message says what happened (the disk is full, which file) instead of SQLite's "cannot
# rollback - no transaction is active". Needs root (a 256 KiB tmpfs stands for the full disk).
set -u
. "$(dirname "$0")/lib.sh"
zeus_has run || { skip_part "zeus run"; finish; exit; }
[ "$(id -u)" = 0 ] || { echo "SKIPPED: needs root to mount a small tmpfs"; exit 77; }
export ZEUS_GPU_BACKEND=sim ZEUS_SIM_GPUS=1 ZEUS_RAPL_ROOT=/nonexistent-rapl-root
TRAINEE="$ZEUS_BUILD_DIR/trainee_sim"
[ -x "$TRAINEE" ] || { echo "SKIPPED: $TRAINEE is not built"; exit 77; }
tmp=$(mktemp -d)
mounted=
trap '[ -n "$mounted" ] && umount "$tmp/full"; rm -rf "$tmp"' EXIT
mkdir -p "$tmp/full"
mount -t tmpfs -o size=256k tmpfs "$tmp/full" 2>/dev/null || { echo "SKIPPED: cannot mount a tmpfs here"; exit 77; }
mounted=1
JOB=(--batch-sizes 32,64,128 --default-bs 64 --target-metric 0.6 --max-epochs 40 --lr 0.1 --optimizer adam
     --profile-warmup-iters 1 --profile-measure-iters 4 --log-base "$tmp/logs" --quiet)
CMD=(-- "$TRAINEE" --bs {bs} --lr {lr} --seed {seed} --epochs {epochs} --samples 20000)
"$ZEUS" run "${JOB[@]}" --state "$tmp/full/s.sqlite" --recurrences 1 "${CMD[@]}" >/dev/null 2>&1 ||
  { fail "the first recurrence failed"; finish; exit; }
dd if=/dev/zero of="$tmp/full/filler" bs=4k 2>/dev/null   # fills the file system
"$ZEUS" run "${JOB[@]}" --state "$tmp/full/s.sqlite" --recurrences 1 "${CMD[@]}" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ "$rc" != 0 ] && grep -q "state '$tmp/full/s.sqlite'.*the disk is full" "$tmp/err" && ! grep -q "cannot rollback" "$tmp/err"
then pass "a full disk: exit $rc, the message names the state file and says the disk is full"
else fail "a full disk: exit $rc: $(cat "$tmp/err")"; fi
rm -f "$tmp/full/filler"
expect_out_has "the state is as before (1 recurrence done)" '"recurrences_done": 1' \
  "$ZEUS" run "${JOB[@]}" --state "$tmp/full/s.sqlite" --recurrences 0 --json "${CMD[@]}"
finish
