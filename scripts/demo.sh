#!/usr/bin/env bash
# make demo: train a small model of each attention kind on the built-in synthetic "repeat" task
# (see src/data/synth.h) and evaluate each at 1x to 16x its training length.
# Runs on 2 CPU cores in a few minutes. Results: runs/demo/ (override with DEMO_OUT).
# A finished model is not retrained: delete its folder to train it again.
set -euo pipefail
cd "$(dirname "$0")/.."
L=build/lssar
OUT=${DEMO_OUT:-runs/demo}
SEQ=64
STEPS=${DEMO_STEPS:-400}
LENGTHS=64,128,256,512,1024
KINDS="softmax ssmax lssa lssar"
mkdir -p "$OUT"

# Alphabet 32 (+ end-of-text = vocabulary 33); strings of 4..24 symbols, each written twice.
[ -f "$OUT/train.bin" ] || $L data synth --tokens 2000000 --alphabet 32 --min-len 4 --max-len 24 --seed 1 --out "$OUT/train.bin"
[ -f "$OUT/val.bin" ] || $L data synth --tokens 200000 --alphabet 32 --min-len 4 --max-len 24 --seed 2 --out "$OUT/val.bin"

start=$SECONDS
for kind in $KINDS; do
  dir="$OUT/$kind"
  if [ ! -f "$dir/model.safetensors" ]; then
    echo "== training $kind ($STEPS steps, T=$SEQ)"
    $L train --data "$OUT/train.bin" --val "$OUT/val.bin" --vocab 33 --attn "$kind" --p 15 \
      --layers 2 --heads 4 --dim 64 --seq $SEQ --batch 16 --steps "$STEPS" --lr 3e-3 --warmup 40 \
      --eval-every 200 --seed 1 --out "$dir"
  fi
  echo "== evaluating $kind at T = $LENGTHS"
  $L eval --model "$dir" --data "$OUT/val.bin" --seq $LENGTHS --batches 4 --json "$dir/eval.json" > "$dir/eval.txt"
done

# One table: rows are attention kinds, columns context lengths (mean next-token loss).
echo
echo "mean next-token loss on held-out synthetic data (trained at T=$SEQ; lower is better)"
printf '%-8s' kind; for t in ${LENGTHS//,/ }; do printf '%10s' "T=$t"; done; echo
for kind in $KINDS; do
  printf '%-8s' "$kind"
  # eval.json: {"results": [{"seq": T, "loss": x, "tokens": n}, ...]}
  grep -o '"loss":[^,}]*' "$OUT/$kind/eval.json" | sed 's/"loss"://' | while read -r x; do printf '%10.4f' "$x"; done
  echo
done
echo
echo "(uniform guessing: $(awk 'BEGIN{printf "%.4f", log(33)}'); the second copy of each string is predictable,"
echo " so a model that finds the earlier copy approaches about half that.)"
echo "results in $OUT/ ($((SECONDS - start)) s)"
