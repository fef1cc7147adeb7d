#!/usr/bin/env bash
# test_dist_eval.sh - the embarrassingly parallel commands under `mpirun --oversubscribe` (one
# thread per rank; src/train/eval.h, src/exp/extrapolate.c, docs/DISTRIBUTED.md):
#   1. eval on 2 and on 3 ranks (an uneven split of the batches, and a rank with none) prints and
#      writes (--json, --per-position) bit for bit what one process does;
#   2. extrapolate (2 kinds and the lssa->lssar run) on 2 ranks writes the results.json of one
#      process (every number but the wall times) and the same checkpoints; a rerun on 2 ranks
#      retrains and re-evaluates nothing, and so does one on 1 process; with --seeds 2 the runs
#      of both seeds are spread over the ranks, with the statistics over seeds of one process;
#   3. the comparisons can fail (another seed, another length give other numbers);
#   4. a failure on one rank alone is one clear error naming it, without a hang: a bad token in the
#      windows of rank 1 (eval); a run folder of rank 1 holding another model, a val.bin rank 1
#      cannot read (extrapolate).
# Binary: $LSSAR_BIN, else build/lssar. Ends with "test_dist_eval: N passed, M failed".
suite=test_dist_eval
source "$(dirname "$0")/dist_lib.sh"
MPI3=${MPI/-np 2/-np 3}
numbers() { python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
for r in d["runs"]: r.pop("train_seconds", None)   # wall time, the one thing that may differ
print(json.dumps(d, sort_keys=True))' "$1"; }

# ---- data: a synthetic shard and a tiny model; a text folder for extrapolate
"$LSSAR" data synth --tokens 6000 --alphabet 15 --out "$tmp/t.bin" >/dev/null 2>&1
"$LSSAR" train --data "$tmp/t.bin" --layers 1 --heads 2 --dim 16 --vocab 16 --seq 32 --batch 4 --steps 4 --lr 3e-3 \
  --threads 1 --quiet --out "$tmp/m" >/dev/null 2>&1
mkdir -p "$tmp/text"
python3 - "$tmp/text" <<'EOF'
import random, sys
r = random.Random(1)
words = "the a of and to in is was that for on with as by at from his her it this which".split()
for d in range(6):
    with open(f"{sys.argv[1]}/doc{d}.txt", "w") as f:
        f.write(" ".join(r.choice(words) for _ in range(300 + 100 * d)) + ".\n")
EOF
"$LSSAR" data build --text "$tmp/text" --tokenizer byte --val-frac 0.4 --out "$tmp/data" --quiet >/dev/null 2>&1
[ -f "$tmp/m/model.safetensors" ] && [ -f "$tmp/data/val_index.json" ]
check $? "a tiny model and data for the tests"

# ---- 1. eval: 5 batches of 3 windows (the last one short) at 3 lengths
E="eval --model $tmp/m --data $tmp/t.bin --seq 32,64,100 --batches 5 --batch 3 --threads 1 --per-position"
table() { grep -E '^ +[0-9]+ ' <<<"$1" | sed -E 's/ +\([0-9.]+ s\)$//'; }
# the JSON of an eval without its wall times ("seconds"), numbers exactly as written (repr)
untimed() { python3 -c 'import json, sys
def strip(x):
    if isinstance(x, dict): return {k: strip(v) for k, v in x.items() if k != "seconds"}
    if isinstance(x, list): return [strip(v) for v in x]
    return x
print(json.dumps(strip(json.load(open(sys.argv[1])))))' "$1"; }
same_json() { [ -s "$1" ] && [ -s "$2" ] && [ "$(untimed "$1")" = "$(untimed "$2")" ]; }
o1=$("$LSSAR" $E --json "$tmp/e1.json" 2>&1); r1=$?
o2=$($MPI "$LSSAR" $E --json "$tmp/e2.json" 2>&1); r2=$?
o3=$($MPI3 "$LSSAR" $E --json "$tmp/e3.json" 2>&1); r3=$?
check $((r1 || r2 || r3)) "eval runs on 1, 2 and 3 ranks" "$o1$o2$o3"
[ -n "$(table "$o1")" ] && [ "$(table "$o1")" = "$(table "$o2")" ] && [ "$(table "$o1")" = "$(table "$o3")" ]
check $? "the printed tables are the same on 1, 2 and 3 ranks" "$(table "$o1"; table "$o2"; table "$o3")"
same_json "$tmp/e1.json" "$tmp/e2.json" && same_json "$tmp/e1.json" "$tmp/e3.json" && grep -q per_position "$tmp/e1.json"
check $? "--json (losses, per-position losses) is bit for bit that of one process on 2 and 3 ranks (wall times aside)"
# 2 batches on 3 ranks: rank 2 has none and still meets the others
o1=$("$LSSAR" ${E/--batches 5/--batches 2} --json "$tmp/f1.json" 2>&1) && o3=$($MPI3 "$LSSAR" ${E/--batches 5/--batches 2} --json "$tmp/f3.json" 2>&1)
check $(( $? || ! $(same_json "$tmp/f1.json" "$tmp/f3.json"; echo $((! $?))) )) "more ranks than batches: the same JSON" "$o3"

# ---- 2. extrapolate: softmax, lssa and the lssa->lssar run, 2 lengths
X="extrapolate --data $tmp/data --attn softmax,lssa --lssar-p 15 --factors 1,2 --max-windows 6 --eval-batch 2 \
  --layers 1 --heads 2 --dim 16 --seq 32 --batch 4 --steps 6 --lr 3e-3 --threads 1 --no-plot"
o1=$("$LSSAR" $X --out "$tmp/x1" 2>&1); r1=$?
o2=$($MPI "$LSSAR" $X --out "$tmp/x2" 2>&1); r2=$?
check $((r1 || r2)) "extrapolate runs on 1 process and on 2 ranks" "$o1$o2"
grep -q 'extrapolate: 3 runs over 2 ranks: rank 0: softmax lssa+lssar-p15; rank 1: lssa' <<<"$o2"
check $? "rank 0 says which rank runs what" "$o2"
n1=$(numbers "$tmp/x1/results.json" 2>&1); n2=$(numbers "$tmp/x2/results.json" 2>&1)
[ -n "$n1" ] && [ "${n1//x1/x2}" = "$n2" ] && grep -q '"lssa+lssar-p15"' <<<"$n2"
check $? "results.json on 2 ranks = one process's (every number but the wall times)" "$n1
$n2"
cmp -s "$tmp/x1/softmax/model.safetensors" "$tmp/x2/softmax/model.safetensors" &&
  cmp -s "$tmp/x1/lssa/model.safetensors" "$tmp/x2/lssa/model.safetensors" &&
  cmp -s "$tmp/x1/lssa/trainer.safetensors" "$tmp/x2/lssa/trainer.safetensors"
check $? "the runs' checkpoints are the same (rank 1 trained lssa as one process would)"
[ "$(sed -n '/^| run/,/^$/p' "$tmp/x1/results.md")" = "$(sed -n '/^| run/,/^$/p' "$tmp/x2/results.md")" ]
check $? "results.md has the same table"
sums() { md5sum "$1"/*/model.safetensors "$1"/*/extrap*.json | cut -c1-32 | tr '\n' ' '; }
before=$(sums "$tmp/x2"); touch -d '2000-01-01' "$tmp"/x2/*/model.safetensors
o=$($MPI -x LSSAR_RANK_STDERR=1 "$LSSAR" $X --out "$tmp/x2" 2>&1); r=$?
[ $r -eq 0 ] && [ "$(grep -c 'already trained' <<<"$o")" = 2 ] && [ "$(grep -c 'evaluation cached' <<<"$o")" = 3 ] &&
  ! grep -q 'training \|resuming ' <<<"$o" && [ "$(sums "$tmp/x2")" = "$before" ]
check $? "a rerun on 2 ranks retrains and re-evaluates nothing (every rank's log)" "$o"
[ -z "$(find "$tmp/x2" -name model.safetensors -newermt '2001-01-01')" ]
check $? "(its checkpoints were not rewritten)"
o=$("$LSSAR" $X --out "$tmp/x2" 2>&1); r=$?
[ $r -eq 0 ] && ! grep -q 'training \|resuming ' <<<"$o" && [ "$(numbers "$tmp/x2/results.json")" = "$n2" ]
check $? "and so does one on 1 process, with the same results" "$o"
# --seeds 2: the 6 runs (3 per seed) spread over the ranks, the statistics over seeds those of one process
o1=$("$LSSAR" $X --seeds 2 --out "$tmp/x7" 2>&1); r1=$?
o2=$($MPI "$LSSAR" $X --seeds 2 --out "$tmp/x8" 2>&1); r2=$?
n7=$(numbers "$tmp/x7/results.json" 2>&1); n8=$(numbers "$tmp/x8/results.json" 2>&1)
[ $r1 -eq 0 ] && [ $r2 -eq 0 ] && grep -q 'extrapolate: 6 runs over 2 ranks: rank 0: softmax lssa+lssar-p15 lssa-s1; rank 1: lssa softmax-s1 lssa+lssar-p15-s1' <<<"$o2" &&
  [ -n "$n7" ] && [ "${n7//x7/x8}" = "$n8" ] && grep -q '"diff_vs_softmax"' <<<"$n8"
check $? "extrapolate --seeds 2 on 2 ranks: the runs of both seeds spread over the ranks, results.json (groups too) = one process's" "$o2
$n7
$n8"

# ---- 3. the comparisons can fail
losses() { python3 -c 'import json,sys; print([r["results"] for r in json.load(open(sys.argv[1]))["runs"]])' "$1"; }
"$LSSAR" $X --seed 8 --out "$tmp/x3" >/dev/null 2>&1
l3=$(losses "$tmp/x3/results.json") && [ -n "$l3" ] && [ "$l3" != "$(losses "$tmp/x2/results.json")" ]
check $? "(another seed gives other losses in results.json)"
"$LSSAR" ${E/--seq 32,64,100/--seq 32,64,99} --json "$tmp/e4.json" >/dev/null 2>&1
! cmp -s "$tmp/e1.json" "$tmp/e4.json"
check $? "(another eval gives another JSON)"

# ---- 4. one rank fails alone
python3 - "$tmp/t.bin" "$tmp/bad.bin" <<'EOF'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
at = len(b) - 2 * 40            # a token id 300 near the end: in the last batch, rank 1's
b[at:at + 2] = (300).to_bytes(2, "little")
open(sys.argv[2], "wb").write(b)
EOF
B="eval --model $tmp/m --data $tmp/bad.bin --seq 32 --batches 0 --batch 3 --threads 1"
t0=$SECONDS
o=$($MPI "$LSSAR" $B 2>&1); r=$?
[ $r -ne 0 ] && [ $r -ne 124 ] && [ "$(grep -c 'rank 1: .*bad.bin holds token id 300' <<<"$o")" = 1 ] && ! grep -q MPI_ABORT <<<"$o"
check $? "eval: a bad token in rank 1's windows is one error naming rank 1 ($((SECONDS - t0)) s, exit $r)" "$o"
o1=$("$LSSAR" $B 2>&1); r1=$?
[ $r1 -ne 0 ] && grep -q 'bad.bin holds token id 300' <<<"$o1"
check $? "(one process reports the same token)" "$o1"
mkdir -p "$tmp/x4/lssa" && cp "$tmp/x1/softmax/model.safetensors" "$tmp/x4/lssa/"
t0=$SECONDS
o=$($MPI "$LSSAR" $X --out "$tmp/x4" 2>&1); r=$?
[ $r -eq 1 ] && [ "$(grep -c 'training failed: rank 1: .*x4/lssa holds a model with another configuration' <<<"$o")" = 1 ] &&
  ! grep -q MPI_ABORT <<<"$o" && [ ! -f "$tmp/x4/results.json" ]
check $? "extrapolate: rank 1's run folder holds another model: one error naming rank 1 ($((SECONDS - t0)) s), no results" "$o"
mkdir -p "$tmp/d0" "$tmp/d1/data"; cp -r "$tmp/data" "$tmp/d0/"; cp "$tmp"/data/train_* "$tmp/d1/data/"
o=$(timeout 120 mpirun -np 2 -x ASAN_OPTIONS bash -c "cd $tmp/d\$OMPI_COMM_WORLD_RANK && exec $LSSAR ${X/--data $tmp\/data/--data data} --out $tmp/x6" 2>&1); r=$?
[ $r -eq 2 ] && [ "$(grep -c 'rank 1: cannot open shard data/val.bin' <<<"$o")" = 1 ] && ! grep -q MPI_ABORT <<<"$o"
check $? "extrapolate: a val.bin that rank 1 cannot read: one error naming rank 1 (exit $r)" "$o"

finish
