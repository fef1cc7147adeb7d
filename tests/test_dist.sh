#!/usr/bin/env bash
# test_dist.sh - data-parallel training under `mpirun -np 2 --oversubscribe` (one thread per rank;
# src/core/dist.h, src/model/gpt_dp.h, docs/DISTRIBUTED.md):
#   1. 2 ranks give bit for bit the weights, AdamW state and loss log (validation included, its
#      batches split over the ranks) of one process with --accum x 2 (the reduction order is
#      fixed: rank-order sums of micro-batch gradients, a block-wise norm);
#      also with --accum 2 per rank against --accum 4;
#   2. --zero 1 gives bit for bit the checkpoint of --zero 0, and keeps half the AdamW state per rank;
#   3. a checkpoint written by 2 ranks resumes on 1, and one written by 1 resumes on 2, both equal to
#      the uninterrupted run; a rank count that does not divide the step is refused;
#   4. a rank killed with SIGKILL makes the job exit non-zero within a bounded time, naming the rank;
#      the last checkpoint is intact and resumes to the uninterrupted run's weights;
#   5. one clear error for: ranks started with different flags; a shard one rank cannot read; a
#      command that does not run distributed.
# Binary: $LSSAR_BIN, else build/lssar; the overlap and the killed rank: its test build with the
# hooks of tests/hooks.c ($LSSAR_HOOKS_BIN). Ends with "test_dist: N passed, M failed".
suite=test_dist
source "$(dirname "$0")/dist_lib.sh"
if [ ! -x "$HOOKS" ]; then bad "$HOOKS is built (make $HOOKS)"; finish; fi
# a model of about 7 blocks of GPT_NORM_BLOCK floats, so that each rank owns a real part
"$LSSAR" data synth --tokens 20000 --alphabet 15 --out "$tmp/train.bin" >/dev/null 2>&1
F="--data $tmp/train.bin --layers 2 --heads 2 --dim 128 --vocab 16 --seq 32 --batch 4 --steps 8 --lr 3e-3 --seed 7 --threads 1 --quiet"
same() { cmp -s "$1/model.safetensors" "$2/model.safetensors" && cmp -s "$1/trainer.safetensors" "$2/trainer.safetensors"; }
losses() { sed -E 's/.*"loss":([^,]*),.*/\1/' "$1/log.jsonl" | tr '\n' ' '; }

# ---- 1. the same answer as one process
"$LSSAR" train $F --accum 2 --out "$tmp/one" >/dev/null 2>&1
out=$($MPI "$LSSAR" train $F --out "$tmp/two" 2>&1); rc=$?
check $(( rc != 0 || ! $(same "$tmp/one" "$tmp/two"; echo $((! $?))) )) "2 ranks x accum 1 = 1 process x accum 2, bit for bit (weights, AdamW state, data cursor)" "$out"
[ "$(losses "$tmp/one")" = "$(losses "$tmp/two")" ] && [ -n "$(losses "$tmp/one")" ]
check $? "the loss curves are identical: $(losses "$tmp/two" | cut -c1-60)..."
# the losses read back and exchanged every 3 steps (--log-every), ZeRO-1 every 5: the same again
out=$($MPI "$LSSAR" train $F --log-every 3 --out "$tmp/two_le3" 2>&1); rc=$?
check $(( rc != 0 || ! $(same "$tmp/one" "$tmp/two_le3"; echo $((! $?))) )) "2 ranks, --log-every 3 = 1 process, bit for bit" "$out"
out=$($MPI "$LSSAR" train $F --zero 1 --log-every 5 --out "$tmp/two_le5z" 2>&1); rc=$?
[ $rc -eq 0 ] && same "$tmp/one" "$tmp/two_le5z" && [ "$(losses "$tmp/one")" = "$(losses "$tmp/two_le5z")" ]
check $? "2 ranks, --zero 1 --log-every 5 = 1 process (weights and loss log)" "$out"
V="--val $tmp/train.bin --eval-every 2 --eval-batches 3 --steps 4"   # 3 batches shared by 2 ranks
"$LSSAR" train $F $V --accum 2 --out "$tmp/one_v" >/dev/null 2>&1
$MPI "$LSSAR" train $F $V --out "$tmp/two_v" >/dev/null 2>&1
vl() { grep -o '"val_loss":[^,]*' "$1/log.jsonl" | tr '\n' ' '; }
[ "$(vl "$tmp/one_v")" = "$(vl "$tmp/two_v")" ] && [ "$(vl "$tmp/one_v" | wc -w)" = 2 ]
check $? "so are the validation losses, their batches split over the ranks: $(vl "$tmp/two_v")"
out=$($MPI -x LSSAR_TEST_OVERLAP=1 "$HOOKS" train $F --out "$tmp/two_b" 2>&1); rc=$?
same "$tmp/one" "$tmp/two_b"; r2=$?
check $((rc || r2)) "with the gradient sums started inside the backward (buckets, as on GPUs): the same bits" "$out"
"$LSSAR" train $F --accum 4 --out "$tmp/one4" >/dev/null 2>&1
out=$($MPI "$LSSAR" train $F --accum 2 --out "$tmp/two4" 2>&1); rc=$?
same "$tmp/one4" "$tmp/two4"; r2=$?
check $((rc || r2)) "2 ranks x accum 2 = 1 process x accum 4, bit for bit" "$out"
! same "$tmp/one" "$tmp/one4"
check $? "(the comparison can fail: accum 2 and accum 4 differ)"

# ---- 2. ZeRO-1
out=$($MPI "$LSSAR" train ${F/--quiet/} --zero 1 --out "$tmp/z" 2>&1); rc=$?
same "$tmp/z" "$tmp/one"; r2=$?
check $((rc || r2)) "--zero 1 on 2 ranks = plain data parallelism, bit for bit" "$out"
mz=$(grep -oE 'AdamW state [0-9.]+ MiB per rank' <<<"$out" | grep -oE '[0-9.]+')
m0=$($MPI "$LSSAR" train ${F/--quiet/} --steps 1 --out "$tmp/z0" 2>&1 | grep -oE 'AdamW state [0-9.]+ MiB per rank' | grep -oE '[0-9.]+')
awk -v a="$mz" -v b="$m0" 'BEGIN { exit !(a > 0 && b > 0 && a <= 0.55 * b) }'
check $? "--zero 1 keeps about half the AdamW state per rank ($mz MiB against $m0 MiB)"

# ---- 3. resume on another rank count
out=$($MPI "$LSSAR" train $F --zero 1 --stop-at 4 --out "$tmp/r21" 2>&1 && "$LSSAR" train --resume --out "$tmp/r21" --quiet 2>&1); rc=$?
same "$tmp/r21" "$tmp/one"; r2=$?
check $((rc || r2)) "a 2-rank checkpoint (step 4, ZeRO-1) resumes on 1 process to the same weights" "$out"
out=$("$LSSAR" train $F --accum 2 --stop-at 3 --out "$tmp/r12" 2>&1 && $MPI "$LSSAR" train --resume --out "$tmp/r12" --quiet 2>&1); rc=$?
same "$tmp/r12" "$tmp/one"; r2=$?
check $((rc || r2)) "a 1-process checkpoint (step 3) resumes on 2 ranks to the same weights" "$out"
"$LSSAR" train $F --stop-at 2 --out "$tmp/odd" >/dev/null 2>&1
out=$($MPI "$LSSAR" train --resume --out "$tmp/odd" 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q 'cannot share evenly' <<<"$out"
check $? "a step of 1 micro-batch is refused on 2 ranks, saying why" "$out"

# ---- 4. a killed rank
"$LSSAR" train $F --steps 10 --out "$tmp/ref10" >/dev/null 2>&1
t0=$SECONDS
out=$($MPI -x LSSAR_TEST_KILL_RANK=1 -x LSSAR_TEST_KILL_AT_STEP=6 "$HOOKS" train ${F/--accum 1/} --batch 2 --steps 10 --save-every 2 --out "$tmp/k" 2>&1); rc=$?
dt=$((SECONDS - t0))
[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $dt -lt 60 ] && grep -q 'rank 1' <<<"$out"
check $? "rank 1 killed at step 6: the job exits ($rc) in ${dt} s, naming rank 1" "$out"
out=$($MPI "$LSSAR" train --resume --out "$tmp/k" 2>&1); rc=$?
"$LSSAR" train $F --batch 2 --accum 2 --steps 10 --out "$tmp/k1" >/dev/null 2>&1
same "$tmp/k" "$tmp/k1"; r2=$?
check $((rc || r2)) "its last checkpoint (step 4) resumes to the uninterrupted run's weights" "$out"

# ---- 5. one clear error
out=$(timeout 120 mpirun -np 2 -x ASAN_OPTIONS bash -c "exec $LSSAR train $F --out $tmp/mm --lr \$((OMPI_COMM_WORLD_RANK + 1))e-3" 2>&1); rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$(grep -c 'rank 1 was started with a different command line' <<<"$out")" = 1 ]
check $? "ranks started with different flags: one error naming rank 1" "$out"
mkdir -p "$tmp/d0" "$tmp/d1"; cp "$tmp/train.bin" "$tmp/d0/t.bin"; head -c 100 "$tmp/train.bin" > "$tmp/d1/t.bin"
out=$(timeout 120 mpirun -np 2 -x ASAN_OPTIONS bash -c "cd $tmp/d\$OMPI_COMM_WORLD_RANK && exec $LSSAR train ${F/--data $tmp\/train.bin/--data t.bin} --out $tmp/unread" 2>&1); rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q 'rank 1: .*t.bin' <<<"$out"
check $? "a shard that rank 1 cannot read: every rank stops, rank 0 says rank 1's error" "$out"
out=$($MPI "$LSSAR" sample --model "$tmp/one" --tokens 4 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q 'sample: runs in one process' <<<"$out"
check $? "a command that does not share its work says so under mpirun (exit 2)" "$out"
out=$($MPI "$LSSAR" orbits eval --model "$tmp/one" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q 'orbits eval: runs in one process' <<<"$out"
check $? "so does an orbits subcommand that does not (exit 2)" "$out"

finish
