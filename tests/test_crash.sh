#!/usr/bin/env bash
# test_crash.sh - crash safety of `lssar train`:
#   1. kill -9 at random moments (20 times, most inside a checkpoint write, via
#      scripts/crash-test.sh --scale tiny), resume each time: the weights, AdamW state and per-step
#      log end bit-identical to an uninterrupted run;
#   2. a second run on the same --out refuses (the lock names the holder's pid); the lock of a
#      killed run does not block its resume;
#   3. a NaN in the loss or a gradient (test hooks), or a learning rate of 1e30: exit status 3, and
#      the checkpoint on disk stays byte-identical; the run then resumes to the reference weights
#      (run by lssar, which ignores the hooks' variables);
#   4. a full disk: a file size limit (ulimit -f, EFBIG: SIGXFSZ must not kill lssar) and, where a
#      tmpfs can be mounted (root), a 256 KiB tmpfs (ENOSPC): a clear error naming the file and the
#      fix, the previous checkpoint intact and loadable, and a resume ends at the reference weights;
#   5. exit statuses: 2 for bad flags, 1 for runtime errors, 3 documented in --help.
# Binary: $LSSAR_BIN, else build/lssar; the runs that need a fault injected (a slow save, a NaN) run
# its test build with the hooks of tests/hooks.c, $LSSAR_HOOKS_BIN, else tests/lssar-hooks beside
# it. Ends with "test_crash: N passed, M failed".
cd "$(dirname "$0")/.."
LSSAR=${LSSAR_BIN:-build/lssar}
HOOKS=${LSSAR_HOOKS_BIN:-$(dirname "$LSSAR")/tests/lssar-hooks}
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; [ -n "$2" ] && printf '%s\n' "$2" | tail -5 | sed 's/^/    /'; }
for b in "$LSSAR" "$HOOKS"; do
  if [ ! -x "$b" ]; then echo "test_crash: $b is not built"; echo "test_crash: 0 passed, 1 failed"; exit 1; fi
done
tmp=$(mktemp -d /tmp/lssar_crash_test_XXXXXX)
mnt=
cleanup() { [ -n "$mnt" ] && umount "$mnt" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

# ---- 1. kill -9 at random moments, resume, compare with an uninterrupted run
out=$(LSSAR_BIN=$LSSAR LSSAR_HOOKS_BIN=$HOOKS bash scripts/crash-test.sh --kills 20 --scale tiny --seed "${CRASH_SEED:-$RANDOM}" 2>&1); rc=$?
summary=$(grep -E '^crash-test: [0-9]+ kills' <<<"$out")
if [ $rc -eq 0 ] && grep -q 'bit-identical: yes' <<<"$summary"; then ok "20 x kill -9 + resume: bit-identical (${summary#crash-test: })"
else bad "kill -9 + resume (exit $rc)" "$out"; fi

"$LSSAR" data synth --tokens 20000 --alphabet 15 --out "$tmp/train.bin" >/dev/null 2>&1
F="--data $tmp/train.bin --layers 1 --heads 2 --dim 32 --vocab 16 --seq 32 --batch 4 --steps 40 --save-every 5 --lr 3e-3 --seed 7 --threads 1 --quiet"
"$LSSAR" train $F --out "$tmp/ref" 2>/dev/null || bad "reference run"
same_as_ref() { cmp -s "$1/model.safetensors" "$tmp/ref/model.safetensors" && cmp -s "$1/trainer.safetensors" "$tmp/ref/trainer.safetensors"; }
sums() { cat "$1/model.safetensors" "$1/trainer.safetensors" | sha256sum; }

# ---- 2. two runs on one --out
LSSAR_TEST_DELAY_SAVE_MS=300 "$HOOKS" train $F --out "$tmp/lock" 2>/dev/null &
holder=$!
for _ in $(seq 100); do [ -f "$tmp/lock/model.safetensors" ] && break; sleep 0.05; done
out=$("$LSSAR" train $F --out "$tmp/lock" --resume 2>&1); rc=$?
if [ $rc -eq 1 ] && grep -q "in use" <<<"$out" && grep -q "process $holder" <<<"$out" && grep -q "kill $holder" <<<"$out"; then ok "a second run (--resume) on a busy --out refuses, naming pid $holder"
else bad "second run on a busy --out (exit $rc, holder $holder)" "$out"; fi
out=$("$LSSAR" train $F --out "$tmp/lock" 2>&1); rc=$?
if [ $rc -eq 1 ] && grep -qE "in use|already holds" <<<"$out"; then ok "a second fresh run on a busy --out refuses"; else bad "second fresh run (exit $rc)" "$out"; fi
kill -9 $holder 2>/dev/null; { wait $holder; } 2>/dev/null
if [ -f "$tmp/lock/.lock" ] && [ "$(cat "$tmp/lock/.lock")" = "$holder" ]; then ok "the killed run left its .lock file (pid $holder)"; else bad "no .lock with the holder's pid"; fi
out=$("$LSSAR" train $F --out "$tmp/lock" --resume 2>&1); rc=$?
if [ $rc -eq 0 ] && same_as_ref "$tmp/lock"; then ok "the lock of a killed run does not block its resume; bit-identical"; else bad "resume after the lock holder was killed (exit $rc)" "$out"; fi

# ---- 3. NaN: exit 3, nothing overwritten
"$LSSAR" train $F --stop-at 20 --out "$tmp/nan" 2>/dev/null
before=$(sums "$tmp/nan")
out=$(LSSAR_TEST_NAN_AT_STEP=23 "$HOOKS" train $F --out "$tmp/nan" --resume 2>&1); rc=$?
if [ $rc -eq 3 ] && grep -q "step 23: the loss is not finite" <<<"$out" && grep -q "step 20) is intact" <<<"$out" && [ "$(sums "$tmp/nan")" = "$before" ]; then ok "NaN loss: exit 3, checkpoint byte-identical"
else bad "NaN loss (exit $rc)" "$out"; fi
out=$(LSSAR_TEST_NAN_GRAD_AT_STEP=21 "$HOOKS" train $F --out "$tmp/nan" --resume 2>&1); rc=$?
if [ $rc -eq 3 ] && grep -q "step 21: the gradient norm is not finite" <<<"$out" && [ "$(sums "$tmp/nan")" = "$before" ]; then ok "NaN gradient: exit 3, checkpoint byte-identical"
else bad "NaN gradient (exit $rc)" "$out"; fi
# the same with the losses read back every 5 or 7 steps: the first bad step is named, and the
# checkpoint (due at step 25, after the bad one, in the same interval) is not written
out=$(LSSAR_TEST_NAN_AT_STEP=23 "$HOOKS" train $F --log-every 5 --out "$tmp/nan" --resume 2>&1); rc=$?
if [ $rc -eq 3 ] && grep -q "step 23: the loss is not finite" <<<"$out" && grep -q "step 20) is intact" <<<"$out" && [ "$(sums "$tmp/nan")" = "$before" ] \
   && [ "$(tail -1 "$tmp/nan/log.jsonl" | sed -E 's/^\{"step":([0-9]+).*/\1/')" = 22 ]; then ok "NaN loss with --log-every 5: exit 3 naming step 23, steps 21-22 logged, checkpoint byte-identical"
else bad "NaN loss with --log-every 5 (exit $rc)" "$out"; fi
out=$(LSSAR_TEST_NAN_GRAD_AT_STEP=21 "$HOOKS" train $F --log-every 7 --out "$tmp/nan" --resume 2>&1); rc=$?
if [ $rc -eq 3 ] && grep -q "step 21: the gradient norm is not finite" <<<"$out" && [ "$(sums "$tmp/nan")" = "$before" ]; then ok "NaN gradient with --log-every 7: exit 3 naming step 21 (later steps NaN too), checkpoint byte-identical"
else bad "NaN gradient with --log-every 7 (exit $rc)" "$out"; fi
if [ ! -e "$tmp/nan/.ckpt-next" ] && ! compgen -G "$tmp/nan/*.tmp.*" >/dev/null; then ok "NaN: no partial files left"; else bad "NaN left files: $(ls -A "$tmp/nan")"; fi
# the program itself has no hooks: with their variables set it runs the steps as they are
out=$(LSSAR_TEST_NAN_AT_STEP=23 LSSAR_TEST_NAN_GRAD_AT_STEP=21 "$LSSAR" train $F --out "$tmp/nan" --resume 2>&1); rc=$?
if [ $rc -eq 0 ] && same_as_ref "$tmp/nan"; then ok "after the NaN exits, a resume by lssar (deaf to the hooks' variables) ends bit-identical"; else bad "resume after NaN (exit $rc)" "$out"; fi
out=$("$LSSAR" train ${F/--lr 3e-3/--lr 1e30} --out "$tmp/hot" 2>&1); rc=$?
if [ $rc -eq 3 ] && grep -q "not finite" <<<"$out" && [ ! -e "$tmp/hot/model.safetensors" ]; then ok "--lr 1e30 diverges: exit 3, nothing saved"; else bad "--lr 1e30 (exit $rc)" "$out"; fi

# ---- 4a. a file size limit (EFBIG): trainer.safetensors (107 KiB) is over 80 KiB
"$LSSAR" train $F --stop-at 20 --out "$tmp/fsz" 2>/dev/null
before=$(sums "$tmp/fsz")
out=$( (ulimit -f 80; exec "$LSSAR" train $F --out "$tmp/fsz" --resume) 2>&1); rc=$?
if [ $rc -eq 1 ] && grep -q "trainer.safetensors failed: File too large" <<<"$out" && grep -q "ulimit -f" <<<"$out" \
   && grep -q "step 20) is intact" <<<"$out" && grep -q -- "--resume --out" <<<"$out"; then ok "ulimit -f: exit 1 (not SIGXFSZ), names the file and the fix"
else bad "ulimit -f (exit $rc)" "$out"; fi
if [ "$(sums "$tmp/fsz")" = "$before" ] && [ ! -e "$tmp/fsz/.ckpt-next" ]; then ok "ulimit -f: checkpoint byte-identical, the partial pair removed"; else bad "ulimit -f changed the checkpoint: $(ls -A "$tmp/fsz")"; fi
out=$("$LSSAR" eval --model "$tmp/fsz" --data "$tmp/train.bin" --seq 32 --threads 1 2>&1); rc=$?
if [ $rc -eq 0 ]; then ok "ulimit -f: the checkpoint loads (lssar eval)"; else bad "eval after ulimit -f (exit $rc)" "$out"; fi
out=$("$LSSAR" train $F --out "$tmp/fsz" --resume 2>&1); rc=$?
if [ $rc -eq 0 ] && same_as_ref "$tmp/fsz"; then ok "ulimit -f: a resume with room ends bit-identical"; else bad "resume after ulimit -f (exit $rc)" "$out"; fi

# ---- 4b. a full tmpfs (ENOSPC), where one can be mounted
mkdir -p "$tmp/mnt"
if mount -t tmpfs -o size=256k tmpfs "$tmp/mnt" 2>/dev/null; then
  mnt=$tmp/mnt
  out=$("$LSSAR" train $F --out "$mnt/run" 2>&1); rc=$?
  if [ $rc -eq 1 ] && grep -qE "$mnt/run/[^ ]*safetensors[^ ]* failed: No space left on device" <<<"$out" && grep -q "the disk is full: free space" <<<"$out" \
     && grep -q "is intact" <<<"$out"; then ok "full disk (tmpfs): exit 1, names the file and the fix"
  else bad "full disk (exit $rc)" "$out"; fi
  out=$("$LSSAR" eval --model "$mnt/run" --data "$tmp/train.bin" --seq 32 --threads 1 2>&1); rc2=$?
  if [ $rc2 -eq 0 ]; then ok "full disk: the previous checkpoint loads (lssar eval)"; else bad "eval on the full disk (exit $rc2)" "$out"; fi
  cp -a "$mnt/run" "$tmp/full"
  umount "$mnt" && mnt=
  out=$("$LSSAR" train $F --out "$tmp/full" --resume 2>&1); rc=$?
  if [ $rc -eq 0 ] && same_as_ref "$tmp/full"; then ok "full disk: a resume with room ends bit-identical"; else bad "resume after a full disk (exit $rc)" "$out"; fi
else
  echo "skip - full tmpfs (cannot mount a tmpfs here: not root?)"
fi

# ---- 5. exit statuses
out=$("$LSSAR" train --help 2>&1)
if grep -q "3 the loss or gradient became NaN/Inf" <<<"$out"; then ok "--help documents exit status 3"; else bad "--help" "$out"; fi
out=$("$LSSAR" train $F --out "$tmp/x" --bogus 2>&1); rc=$?
[ $rc -eq 2 ] && ok "bad flag: exit 2" || bad "bad flag (exit $rc)" "$out"
out=$("$LSSAR" train ${F/$tmp\/train.bin/$tmp/missing.bin} --out "$tmp/x" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "missing.bin" <<<"$out" && ok "missing data file: exit 1" || bad "missing data (exit $rc)" "$out"
out=$("$LSSAR" train $F --out "$tmp/none" --resume 2>&1); rc=$?
[ $rc -ge 1 ] && [ $rc -le 2 ] && grep -q "without --resume" <<<"$out" && ok "--resume with nothing to resume: exit $rc, says what to do" || bad "--resume of nothing (exit $rc)" "$out"

echo "test_crash: $pass passed, $fail failed"
[ $fail -eq 0 ]
