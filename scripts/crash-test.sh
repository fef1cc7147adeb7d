#!/usr/bin/env bash
# crash-test.sh - kill `lssar train` with SIGKILL at random moments, resume it each time, and check
# that the finished run's weights (and AdamW state and per-step log) are bit-identical to an
# uninterrupted run with the same seed and steps.
#
#   bash scripts/crash-test.sh [--kills N] [--scale tiny|small] [--seed S] [--keep]
#
# --kills N     SIGKILLs before the run may finish (default 100)
# --scale       tiny: 1 layer, width 32, 300 steps (tests/test_crash.sh uses it);
#               small (default): 2 layers, width 64, seq 64, 600 steps
# --seed S      seed of the kill times (bash $RANDOM), so a failure can be replayed
# --keep        keep the work directory (printed)
#
# Half of the runs checkpoint every few steps with LSSAR_TEST_DELAY_SAVE_MS set, run by the test
# build of the program (tests/hooks.c: the writer sleeps between writing each temporary file and
# renaming it, and between the two renames of a checkpoint), so most of their kills land inside a
# checkpoint write; the others run the program itself at full speed and are killed anywhere in the
# first half of a run's time. After each kill the script looks at the run directory to tell where
# the kill landed (temporary files left: inside a file write; DIR/.ckpt-next/COMPLETE: between the
# renames of a pair), then resumes (`lssar train --resume --out DIR`, same flags). Once N kills are
# done, the last resume runs to the end. Binary: $LSSAR_BIN, else build/lssar; its test build:
# $LSSAR_HOOKS_BIN, else tests/lssar-hooks beside it (`make test` builds it).
# Prints "crash-test: K kills (...), weights bit-identical: yes|no" and exits 0 only if they are.
cd "$(dirname "$0")/.."
LSSAR=${LSSAR_BIN:-build/lssar}
HOOKS=${LSSAR_HOOKS_BIN:-$(dirname "$LSSAR")/tests/lssar-hooks}
kills_wanted=100 scale=small seed=$$ keep=0
while [ $# -gt 0 ]; do
  case $1 in
    --kills) kills_wanted=$2; shift 2 ;;
    --scale) scale=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "crash-test: unknown flag $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -x "$LSSAR" ] || { echo "crash-test: $LSSAR is not built (make, or set LSSAR_BIN)" >&2; exit 2; }
[ -x "$HOOKS" ] || { echo "crash-test: $HOOKS is not built (make $HOOKS, or set LSSAR_HOOKS_BIN)" >&2; exit 2; }
RANDOM=$seed
case $scale in
  tiny) MODEL="--layers 1 --heads 2 --dim 32 --seq 32 --batch 4 --steps 200 --save-every 4"; TOKENS=20000; DELAY=10 ;;
  small) MODEL="--layers 2 --heads 4 --dim 64 --seq 64 --batch 8 --steps 600 --save-every 2"; TOKENS=100000; DELAY=10 ;;
  *) echo "crash-test: --scale is tiny or small" >&2; exit 2 ;;
esac
work=$(mktemp -d /tmp/lssar_crash_XXXXXX)
[ $keep = 1 ] || trap 'rm -rf "$work"' EXIT
start=$SECONDS
"$LSSAR" data synth --tokens $TOKENS --alphabet 15 --out "$work/train.bin" >/dev/null 2>&1 || { echo "crash-test: data synth failed" >&2; exit 1; }
F="--data $work/train.bin --vocab 16 $MODEL --lr 3e-3 --seed 7 --threads 1 --quiet"

# the uninterrupted run, and how long one takes (without and with the save delay)
t0=$(date +%s%N)
"$LSSAR" train $F --out "$work/ref" 2>"$work/ref.err" || { cat "$work/ref.err"; echo "crash-test: the reference run failed"; exit 1; }
ref_ms=$(( ($(date +%s%N) - t0) / 1000000 ))

run=$work/run
kills=0 in_write=0 between=0 early=0 lives=0 finished=0 errors=0
while :; do
  lives=$((lives + 1))
  resume=
  if [ -f "$run/model.safetensors" ] || [ -f "$run/.ckpt-next/COMPLETE" ]; then resume=--resume; fi
  if [ $kills -ge $kills_wanted ]; then   # enough: run to the end
    "$LSSAR" train $F --out "$run" $resume 2>"$work/last.err"; rc=$?
    [ $rc -eq 0 ] && finished=1 || { errors=$((errors + 1)); cat "$work/last.err" >&2; }
    break
  fi
  if [ $((lives % 2)) -eq 1 ]; then   # slow saves: kill within ~0.05..0.45 s, mostly inside a write
    bin=$HOOKS; max_ms=450
  else                                # full speed: anywhere in the first ~1.5 reference runs
    bin=$LSSAR; max_ms=$(( ref_ms / 2 + 20 ))
  fi
  LSSAR_TEST_DELAY_SAVE_MS=$DELAY "$bin" train $F --out "$run" $resume 2>"$work/life.err" &
  pid=$!
  ms=$(( 5 + RANDOM % max_ms ))
  sleep "$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))"
  kill -9 $pid 2>/dev/null
  { wait $pid; } 2>/dev/null; rc=$?
  if [ $rc -eq 137 ]; then
    kills=$((kills + 1))
    if compgen -G "$run/*.tmp.*" >/dev/null || compgen -G "$run/.ckpt-next/*.tmp.*" >/dev/null; then in_write=$((in_write + 1))
    elif [ -f "$run/.ckpt-next/COMPLETE" ]; then between=$((between + 1))
    elif [ ! -f "$run/model.safetensors" ]; then early=$((early + 1))
    fi
  elif [ $rc -eq 0 ]; then   # finished before the kill: start over, so every kill counts
    rm -rf "$run.done"; mv "$run" "$run.done"
    cmp -s "$run.done/model.safetensors" "$work/ref/model.safetensors" || { errors=$((errors + 1)); echo "crash-test: a run finished with different weights" >&2; }
  else
    errors=$((errors + 1)); echo "crash-test: life $lives exited $rc:" >&2; cat "$work/life.err" >&2
    [ $errors -ge 3 ] && break
  fi
done

same=no
if [ $finished = 1 ] && cmp -s "$run/model.safetensors" "$work/ref/model.safetensors" \
   && cmp -s "$run/trainer.safetensors" "$work/ref/trainer.safetensors"; then same=yes; fi
# the per-step log: each step once, with the loss, lr and gradient norm of the uninterrupted run
logs=no
if [ $finished = 1 ] && python3 - "$run/log.jsonl" "$work/ref/log.jsonl" <<'EOF'
import json, sys
def rows(p):
    return [(l["step"], l["loss"], l["lr"], l["grad_norm"]) for l in map(json.loads, open(p)) if "loss" in l]
a, b = rows(sys.argv[1]), rows(sys.argv[2])
sys.exit(0 if a == b else 1)
EOF
then logs=yes; fi
left=$(ls -A "$run" 2>/dev/null | grep -v -E '^(model\.safetensors|trainer\.safetensors|log\.jsonl|loss\.png|\.lock)$' | tr '\n' ' ')
[ $keep = 1 ] && echo "crash-test: work directory $work"
echo "crash-test: scale $scale, seed $seed, one uninterrupted run ${ref_ms} ms; $lives runs, $errors errors, $((SECONDS - start)) s"
echo "crash-test: leftover files in the run directory: ${left:-none}"
echo "crash-test: log.jsonl identical per step: $logs"
echo "crash-test: $kills kills ($in_write inside a checkpoint file write, $between between the renames of a pair, $early before the first checkpoint), weights bit-identical: $same"
[ $same = yes ] && [ $logs = yes ] && [ $errors -eq 0 ] && [ -z "$left" ]
