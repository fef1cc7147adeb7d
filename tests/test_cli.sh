#!/usr/bin/env bash
# test_cli.sh - lssar train / eval / sample / bench end to end on tiny generated shards, and bad
# input of every kind: each must give a clear message and a non-zero exit below 128 (no crash).
# Binary: $LSSAR_BIN, else build/lssar. Ends with "test_cli: N passed, M failed".
cd "$(dirname "$0")/.."
LSSAR=${LSSAR_BIN:-build/lssar}
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; [ -n "$2" ] && printf '%s\n' "$2" | tail -5 | sed 's/^/    /'; }
if [ ! -x "$LSSAR" ]; then echo "test_cli: $LSSAR is not built"; echo "test_cli: 0 passed, 1 failed"; exit 1; fi
tmp=$(mktemp -d /tmp/lssar_cli_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
T1="--threads 1"   # one thread: tiny models, and no OpenMP spinning on a shared machine

# expect NAME EXIT_WANTED NEEDLE CMD...: run, check the exit code (or "fail": 1..127) and that
# stdout+stderr contain NEEDLE.
expect() {
  local name=$1 want=$2 needle=$3; shift 3
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ "$want" = fail ]; then
    if [ $rc -ge 1 ] && [ $rc -lt 128 ] && grep -qiF -- "$needle" <<<"$out"; then ok "$name"; else bad "$name (exit $rc)" "$out"; fi
  else
    if [ $rc -eq "$want" ] && grep -qiF -- "$needle" <<<"$out"; then ok "$name"; else bad "$name (exit $rc, want $want, '$needle')" "$out"; fi
  fi
}

# shard NAME POSITIONS CHANNELS VOCAB [magic]: a random period-24 pattern, llm.c format
shard() {
  python3 - "$@" <<'EOF'
import random, struct, sys
path, n, C, V = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
magic = int(sys.argv[5]) if len(sys.argv) > 5 else 20240520
r = random.Random(3)
pat = [r.randrange(V) for _ in range(24)]
toks = [pat[(i + 5 * c) % 24] for i in range(n) for c in range(C)]
with open(path, "wb") as f:
    f.write(struct.pack("<256i", magic, 1, n, C, *([0] * 252)))
    f.write(struct.pack("<%dH" % len(toks), *toks))
EOF
}
shard "$tmp/train.bin" 3000 1 16
shard "$tmp/val.bin" 800 1 16
shard "$tmp/val2.bin" 800 2 16
shard "$tmp/orbit.bin" 1500 2 16
shard "$tmp/magic.bin" 100 1 16 12345
head -c 1500 "$tmp/train.bin" > "$tmp/trunc.bin"
MODEL="--layers 2 --heads 2 --dim 32 --vocab 16 --seq 32 --batch 4 --lr 3e-3"

# ---- the vocabulary a shard records (header[4]) is train's default --vocab
$LSSAR data synth --tokens 4000 --alphabet 32 --out "$tmp/synth.bin" >/dev/null 2>&1
out=$($LSSAR train --data "$tmp/synth.bin" --layers 1 --heads 2 --dim 16 --seq 32 --batch 2 --steps 2 --out "$tmp/synthrun" --quiet $T1 2>&1); rc=$?
if [ $rc -eq 0 ] && python3 - "$tmp/synthrun/model.safetensors" <<'EOF'
import json, struct, sys
f = open(sys.argv[1], "rb"); n = struct.unpack("<Q", f.read(8))[0]; h = json.loads(f.read(n))
assert h["wte.0"]["shape"][0] == 33 and h["__metadata__"]["vocab"] == "33", (h["wte.0"], h["__metadata__"])
EOF
then ok "train on a data synth shard takes its vocabulary (33), not GPT-2's"; else bad "train on a data synth shard: vocabulary (exit $rc)" "$out"; fi

# ---- help and flag errors
expect "train --help" 0 "--resume" $LSSAR train --help
expect "eval --help" 0 "non-overlapping" $LSSAR eval --help
expect "sample --help" 0 "--temperature" $LSSAR sample --help
expect "bench --help" 0 "sgemm" $LSSAR bench --help
expect "unknown flag" 2 "--bogus" $LSSAR train --bogus 1 --out "$tmp/x"
expect "bad integer" 2 "--steps" $LSSAR train --data "$tmp/train.bin" --out "$tmp/x" --steps ten
expect "missing --out" 2 "--out" $LSSAR train --data "$tmp/train.bin"
expect "missing --data" 2 "--data" $LSSAR train --out "$tmp/x"
expect "bad --attn" 2 "--attn" $LSSAR train --data "$tmp/train.bin" --out "$tmp/x" --attn flash
expect "heads must divide dim" 2 "--heads" $LSSAR train --data "$tmp/train.bin" --out "$tmp/x" --dim 30 --heads 4

# ---- training
out=$($LSSAR train --data "$tmp/train.bin" --val "$tmp/val.bin" $MODEL --steps 60 --eval-every 20 --out "$tmp/run" $T1 2>&1); rc=$?
if [ $rc -eq 0 ] && [ -f "$tmp/run/model.safetensors" ] && [ -f "$tmp/run/trainer.safetensors" ] && grep -q "val loss" <<<"$out" \
   && grep -q "tok/s" <<<"$out" && grep -q "ETA" <<<"$out"; then ok "train"; else bad "train (exit $rc)" "$out"; fi
if command -v gnuplot >/dev/null 2>&1; then
  [ -s "$tmp/run/loss.png" ] && ok "train draws OUT/loss.png" || bad "train: no loss.png" "$(ls "$tmp/run")"
  $LSSAR train --data "$tmp/train.bin" $MODEL --steps 2 --out "$tmp/noplot" --no-plot --quiet $T1 2>/dev/null
  [ -f "$tmp/noplot/model.safetensors" ] && [ ! -e "$tmp/noplot/loss.png" ] && ok "train --no-plot" || bad "train --no-plot" "$(ls "$tmp/noplot")"
fi
if python3 -c "
import json, sys
lines = [json.loads(l) for l in open('$tmp/run/log.jsonl')]
steps = [l for l in lines if 'loss' in l]; evals = [l for l in lines if 'val_loss' in l]
assert len(steps) == 60 and [l['step'] for l in evals] == [20, 40, 60], (len(steps), evals)
assert all(k in steps[0] for k in ('lr', 'grad_norm', 'tokens_per_s'))
assert steps[-1]['loss'] < steps[0]['loss'] - 1, 'loss did not fall'
"; then ok "log.jsonl"; else bad "log.jsonl"; fi
# ---- sigmoid / relu (no row normalisation) with each length normalisation: they learn the
# pattern too, eval names the setting stored in the checkpoint, a wrong --len-norm is a usage error
expect "bad --len-norm" 2 "--len-norm" $LSSAR train --data "$tmp/train.bin" --out "$tmp/x" --attn sigmoid --len-norm sideways
expect "bad --temp-d" 2 "--temp-d must be 0" $LSSAR train --data "$tmp/train.bin" --out "$tmp/x" --attn lssa --temp-d 1
expect "bad --rope-base" 2 "--rope-base must be" $LSSAR train --data "$tmp/train.bin" --out "$tmp/x" --rope-base 1
# a run keeps its RoPE base and temperature: --resume with another one is a usage error
expect "train --rope-base 38 --temp-d 64" 0 "" $LSSAR train --data "$tmp/train.bin" $MODEL --steps 4 --attn lssa --rope-base 38 --temp-d 64 --out "$tmp/rt" $T1
expect "--resume with another --rope-base" 2 "--rope-base 100 differs from the checkpoint" $LSSAR train --resume --out "$tmp/rt" --steps 6 --rope-base 100
expect "--resume with another --temp-d" 2 "--temp-d 16 differs from the checkpoint" $LSSAR train --resume --out "$tmp/rt" --steps 6 --temp-d 16
for spec in sigmoid:train relu:row; do
  k=${spec%:*}; ln=${spec#*:}
  out=$($LSSAR train --data "$tmp/train.bin" $MODEL --steps 60 --attn "$k" --len-norm "$ln" --out "$tmp/run-$k" $T1 2>&1); rc=$?
  if [ $rc -eq 0 ] && grep -q "$k attention (len-norm $ln)" <<<"$out" && python3 -c "
import json
steps = [json.loads(l) for l in open('$tmp/run-$k/log.jsonl')]
assert steps[-1]['loss'] < steps[0]['loss'] - 1, 'loss did not fall'
"; then ok "train $k --len-norm $ln"; else bad "train $k --len-norm $ln (exit $rc)" "$out"; fi
  expect "eval $k --len-norm $ln" 0 "$k attention (len-norm $ln)" $LSSAR eval --model "$tmp/run-$k" --data "$tmp/val.bin" --seq 32,64 $T1
done
# attention as stages: a preset with other stages trains, evaluates and is named; invalid ones are refused
expect "train softmax+cos+rw" 0 "softmax+cos+rw attention (p 7)" $LSSAR train --data "$tmp/train.bin" $MODEL --steps 4 --attn softmax+cos+rw --p 7 --out "$tmp/run-stages" $T1
expect "eval softmax+cos+rw" 0 "softmax+cos+rw" $LSSAR eval --model "$tmp/run-stages" --data "$tmp/val.bin" --seq 32 $T1
expect "eval softmax+cos+rw without re-weighting" 0 "softmax+cos" $LSSAR eval --model "$tmp/run-stages" --data "$tmp/val.bin" --seq 32 --attn softmax+cos $T1
expect "eval softmax+cos+rw as lssa refused" fail "re-weighting switched" $LSSAR eval --model "$tmp/run-stages" --data "$tmp/val.bin" --seq 32 --attn lssa $T1
expect "--attn sigmoid+rw refused" 2 "do not go together" $LSSAR train --data "$tmp/train.bin" --out "$tmp/x" --attn sigmoid+rw
expect "--attn unknown stage" 2 "unknown stage '+cosine'" $LSSAR train --data "$tmp/train.bin" --out "$tmp/x" --attn softmax+cosine
expect "train into an existing run" fail "--resume" $LSSAR train --data "$tmp/train.bin" $MODEL --steps 5 --out "$tmp/run" $T1

# ---- exact resume: 2N straight == N, stop, resume to 2N
$LSSAR train --data "$tmp/train.bin" $MODEL --steps 20 --accum 2 --out "$tmp/straight" --quiet $T1 2>/dev/null
$LSSAR train --data "$tmp/train.bin" $MODEL --steps 20 --accum 2 --stop-at 10 --out "$tmp/split" --quiet $T1 2>/dev/null
if cmp -s "$tmp/straight/model.safetensors" "$tmp/split/model.safetensors"; then bad "stop-at stops early"; else ok "stop-at stops early"; fi
$LSSAR train --out "$tmp/split" --resume --quiet $T1 2>/dev/null
if cmp -s "$tmp/straight/model.safetensors" "$tmp/split/model.safetensors"; then ok "resume is bit-exact"; else bad "resume is bit-exact"; fi
# --recompute (activation recomputation) gives the same bits, and a resume may switch it either way
out=$($LSSAR train --data "$tmp/train.bin" $MODEL --steps 20 --accum 2 --recompute --out "$tmp/rc" $T1 2>&1)
if grep -q "activations .* MiB (recompute)" <<<"$out" && cmp -s "$tmp/straight/model.safetensors" "$tmp/rc/model.safetensors" &&
   cmp -s "$tmp/straight/trainer.safetensors" "$tmp/rc/trainer.safetensors"; then ok "--recompute is bit-exact"; else bad "--recompute is bit-exact" "$out"; fi
$LSSAR train --data "$tmp/train.bin" $MODEL --steps 20 --accum 2 --stop-at 10 --recompute --out "$tmp/rc_off" --quiet $T1 2>/dev/null
$LSSAR train --out "$tmp/rc_off" --resume --quiet $T1 2>/dev/null
$LSSAR train --data "$tmp/train.bin" $MODEL --steps 20 --accum 2 --stop-at 10 --out "$tmp/rc_on" --quiet $T1 2>/dev/null
$LSSAR train --out "$tmp/rc_on" --resume --recompute --quiet $T1 2>/dev/null
if cmp -s "$tmp/straight/model.safetensors" "$tmp/rc_off/model.safetensors" && cmp -s "$tmp/straight/model.safetensors" "$tmp/rc_on/model.safetensors"; then
  ok "resume with --recompute switched off / on is bit-exact"; else bad "resume with --recompute switched off / on is bit-exact"; fi
# ---- --log-every: the losses are read back every N steps; the weights, the trainer state and the
# log (all but its timings, one line per step) are those of every step, also across a resume
untimed() { sed -E 's/,"ms":[^,}]*,"tokens_per_s":[^,}]*//' "$1"; }
$LSSAR train --data "$tmp/train.bin" $MODEL --steps 20 --accum 2 --log-every 7 --out "$tmp/le7" --quiet $T1 2>/dev/null
$LSSAR train --data "$tmp/train.bin" $MODEL --steps 20 --accum 2 --log-every 3 --stop-at 10 --out "$tmp/le3" --quiet $T1 2>/dev/null
$LSSAR train --out "$tmp/le3" --resume --log-every 4 --quiet $T1 2>/dev/null
for d in le7 le3; do
  if cmp -s "$tmp/straight/model.safetensors" "$tmp/$d/model.safetensors" && cmp -s "$tmp/straight/trainer.safetensors" "$tmp/$d/trainer.safetensors" \
     && [ "$(untimed "$tmp/straight/log.jsonl")" = "$(untimed "$tmp/$d/log.jsonl")" ] && [ "$(grep -c '"loss"' "$tmp/$d/log.jsonl")" -eq 20 ]; then
    ok "--log-every ($d): the same weights, trainer state and log lines as every step"
  else bad "--log-every ($d): differs from --log-every 1" "$(diff <(untimed "$tmp/straight/log.jsonl") <(untimed "$tmp/$d/log.jsonl") | head -5)"; fi
done
if [ "$(untimed "$tmp/straight/log.jsonl")" != "$(untimed "$tmp/run/log.jsonl")" ]; then ok "negative control: another run's log differs"; else bad "negative control: logs of different runs compare equal"; fi
expect "--log-every 0" 2 "--log-every" $LSSAR train --data "$tmp/train.bin" $MODEL --steps 2 --log-every 0 --out "$tmp/x" $T1
# the same with passkey windows mixed in (they draw from the data stream's RNG too)
shard "$tmp/bytes.bin" 3000 1 257
PK="--data $tmp/bytes.bin --layers 1 --heads 2 --dim 16 --vocab 257 --seq 260 --batch 2 --steps 6 --passkey-mix 0.5"
$LSSAR train $PK --out "$tmp/pk_straight" --quiet $T1 2>/dev/null
$LSSAR train $PK --stop-at 3 --out "$tmp/pk_split" --quiet $T1 2>/dev/null
$LSSAR train --out "$tmp/pk_split" --resume --quiet $T1 2>/dev/null
if [ -f "$tmp/pk_straight/model.safetensors" ] && cmp -s "$tmp/pk_straight/model.safetensors" "$tmp/pk_split/model.safetensors"; then
  ok "resume with --passkey-mix is bit-exact"; else bad "resume with --passkey-mix is bit-exact"; fi
expect "passkey-mix with a short --seq" fail "at least" $LSSAR train --data "$tmp/bytes.bin" --vocab 257 --seq 100 --steps 1 --passkey-mix 0.5 --out "$tmp/pk_short" $T1
expect "passkey-mix out of range" fail "--passkey-mix" $LSSAR train --data "$tmp/bytes.bin" --vocab 257 --seq 260 --steps 1 --passkey-mix 1.5 --out "$tmp/pk_bad" $T1
expect "resume with another --layers" 2 "--layers" $LSSAR train --out "$tmp/split" --resume --layers 3 $T1
expect "resume with another --passkey-mix" 2 "--passkey-mix 0.25 differs" $LSSAR train --out "$tmp/pk_split" --resume --passkey-mix 0.25 $T1
expect "resume with the same --passkey-mix" 0 "" $LSSAR train --out "$tmp/pk_split" --resume --passkey-mix 0.5 --quiet $T1
$LSSAR train --data "$tmp/train.bin" $MODEL --steps 20 --accum 2 --stop-at 10 --out "$tmp/relr" --quiet $T1 2>/dev/null
expect "resume with a lower --lr" 0 "optimizer settings changed" $LSSAR train --out "$tmp/relr" --resume --lr 1e-3 $T1
if cmp -s "$tmp/straight/model.safetensors" "$tmp/relr/model.safetensors"; then bad "the new --lr is used"; else ok "the new --lr is used"; fi
expect "resume without a checkpoint" fail "--resume" $LSSAR train --out "$tmp/none" --resume $T1

# ---- eval
expect "eval" 0 "loss" $LSSAR eval --model "$tmp/run" --data "$tmp/val.bin" --seq 16,32,64 --json "$tmp/eval.json" $T1
if python3 -c "
import json
d = json.load(open('$tmp/eval.json'))
r = d['results']
assert [x['seq'] for x in r] == [16, 32, 64]
assert all(x['loss'] > 0 and x['tokens'] > 0 and x['seconds'] >= 0 for x in r)
assert r[1]['loss'] < 1.0, r
assert 'device_held_peak_bytes' not in d, d   # a GPU's only
"; then ok "eval JSON"; else bad "eval JSON" "$(cat "$tmp/eval.json" 2>&1)"; fi
expect "eval lssar as lssa" 0 "lssa attention" $LSSAR eval --model "$tmp/run" --data "$tmp/val.bin" --seq 32 --attn lssa $T1
expect "eval lssar as softmax refused" fail "lssa" $LSSAR eval --model "$tmp/run" --data "$tmp/val.bin" --seq 32 --attn softmax $T1
expect "eval --device cpu" 0 "loss" $LSSAR eval --model "$tmp/run" --data "$tmp/val.bin" --seq 32 --device cpu $T1
expect "--device gpu refused" 2 "use cpu, cuda or auto" $LSSAR eval --model "$tmp/run" --data "$tmp/val.bin" --seq 32 --device gpu $T1
if ! grep -q 'cuda=1' "${LSSAR_BUILD:-build}/build-flags" 2>/dev/null; then   # a build without the CUDA backend
    expect "--device cuda without CUDA" 2 "no CUDA backend" $LSSAR eval --model "$tmp/run" --data "$tmp/val.bin" --seq 32 --device cuda $T1
    expect "sample --device cuda without CUDA" 2 "no CUDA backend" $LSSAR sample --model "$tmp/run" --prompt-ids 1,2 --tokens 2 --device cuda
    expect "--version says CUDA is not built in" 0 "cuda: not built in" $LSSAR --version
elif [ "$($LSSAR --version | sed -n 's/.*; \([0-9]*\) GPUs\{0,1\} found.*/\1/p')" = 0 ]; then   # CUDA built, no GPU here
    expect "--device cuda without a GPU" 2 "no CUDA GPU found" $LSSAR eval --model "$tmp/run" --data "$tmp/val.bin" --seq 32 --device cuda $T1
    expect "--version says no GPU" 0 "0 GPUs found: runs on the CPU" $LSSAR --version
fi
if [ "$($LSSAR --version | grep -c ' [1-9][0-9]* GPUs\{0,1\} found')" = 0 ]; then   # no GPU: auto is the CPU, said once
    out=$($LSSAR eval --model "$tmp/run" --data "$tmp/val.bin" --seq 32 --device auto $T1 2>&1); rc=$?
    if [ $rc -eq 0 ] && [ "$(grep -c 'no CUDA GPU found.*running on the CPU' <<<"$out")" = 1 ] && grep -q loss <<<"$out"; then
        ok "--device auto without a GPU runs on the CPU and says so once"
    else bad "--device auto without a GPU runs on the CPU and says so once" "rc $rc: $out"; fi
fi
expect "eval channel mismatch" fail "channels" $LSSAR eval --model "$tmp/run" --data "$tmp/val2.bin" --seq 32 $T1
expect "eval bad --seq" 2 "--seq" $LSSAR eval --model "$tmp/run" --data "$tmp/val.bin" --seq 32,x $T1
expect "eval seq longer than the shard" fail "positions" $LSSAR eval --model "$tmp/run" --data "$tmp/val.bin" --seq 5000 $T1
$LSSAR train --data "$tmp/train.bin" $MODEL --pos learned --steps 2 --out "$tmp/learned" --quiet $T1 2>/dev/null
expect "eval learned positions beyond training" 2 "learned positions" $LSSAR eval --model "$tmp/learned" --data "$tmp/val.bin" --seq 64 $T1

# ---- sample
out=$($LSSAR sample --model "$tmp/run" --prompt-ids 1,2,3 --tokens 12 --seed 3 $T1 2>&1); rc=$?
if [ $rc -eq 0 ] && [ "$(wc -w <<<"$out")" -eq 12 ] && ! grep -qv '^[0-9 ]*$' <<<"$out"; then ok "sample"; else bad "sample (exit $rc)" "$out"; fi
a=$($LSSAR sample --model "$tmp/run" --prompt-ids 1,2,3 --tokens 12 --temperature 0 $T1 2>&1)
b=$($LSSAR sample --model "$tmp/run" --prompt-ids 1,2,3 --tokens 12 --temperature 0 --seed 9 $T1 2>&1)
if [ -n "$a" ] && [ "$a" = "$b" ]; then ok "greedy sampling is deterministic"; else bad "greedy sampling is deterministic" "$a / $b"; fi
expect "sample id out of range" 2 "vocabulary" $LSSAR sample --model "$tmp/run" --prompt-ids 1,99 $T1
expect "sample bad ids" 2 "--prompt-ids" $LSSAR sample --model "$tmp/run" --prompt-ids 1,-2 $T1
$LSSAR train --data "$tmp/orbit.bin" --layers 1 --heads 2 --dim 16 --vocab 16 --seq 16 --batch 2 --steps 2 --out "$tmp/orbit" --quiet $T1 2>/dev/null
out=$($LSSAR sample --model "$tmp/orbit" --prompt-ids 1,2,3,4 --tokens 5 $T1 2>&1); rc=$?
if [ $rc -eq 0 ] && [ "$(wc -w <<<"$out")" -eq 10 ]; then ok "sample 2 channels"; else bad "sample 2 channels (exit $rc)" "$out"; fi
expect "sample odd ids for 2 channels" 2 "channels" $LSSAR sample --model "$tmp/orbit" --prompt-ids 1,2,3 $T1
# --prompt TEXT: the byte model (vocabulary 257) encodes it and prints the continuation as text,
# the same bytes as --prompt-ids with those ids, decoded
a=$($LSSAR sample --model "$tmp/pk_straight" --prompt "ab" --tokens 6 --temperature 0 $T1 2>&1); rc=$?
ids=$($LSSAR sample --model "$tmp/pk_straight" --prompt-ids 97,98 --tokens 6 --temperature 0 $T1 2>&1)
b=$(echo "$ids" | $LSSAR tokenize --decode --tokenizer byte 2>&1)
if [ $rc -eq 0 ] && [ -n "$a" ] && [ "$a" = "$b" ]; then ok "sample --prompt text: the continuation as text"; else bad "sample --prompt (exit $rc)" "text '$a' ids '$ids' decoded '$b'"; fi
out=$($LSSAR sample --model "$tmp/pk_straight" --prompt "" --tokens 3 --temperature 0 $T1 2>&1); rc=$?
[ $rc -eq 0 ] && ok "sample --prompt '': starts from end-of-text" || bad "sample --prompt '' (exit $rc)" "$out"
expect "sample: --prompt and --prompt-ids" 2 "one of the two" $LSSAR sample --model "$tmp/run" --prompt a --prompt-ids 1 $T1
expect "sample: no prompt" 2 "one of the two" $LSSAR sample --model "$tmp/run" $T1
expect "sample --prompt, vocabulary 16" 2 "--tokenizer" $LSSAR sample --model "$tmp/run" --prompt a $T1
expect "sample --tokenizer without --prompt" 2 "--tokenizer" $LSSAR sample --model "$tmp/run" --prompt-ids 1 --tokenizer byte $T1
expect "sample --prompt on 2 channels" 2 "channels" $LSSAR sample --model "$tmp/orbit" --prompt a --tokenizer byte $T1

# ---- bad data
expect "missing data file" fail "nope.bin" $LSSAR train --data "$tmp/nope.bin" $MODEL --steps 2 --out "$tmp/x1" $T1
expect "truncated shard" fail "truncated" $LSSAR train --data "$tmp/trunc.bin" $MODEL --steps 2 --out "$tmp/x2" $T1
expect "wrong magic" fail "magic" $LSSAR train --data "$tmp/magic.bin" $MODEL --steps 2 --out "$tmp/x3" $T1
expect "shard shorter than seq+1" fail "--seq" $LSSAR train --data "$tmp/val.bin" $MODEL --seq 1000 --steps 2 --out "$tmp/x4" $T1
expect "token id >= vocab" fail "train.bin" $LSSAR train --data "$tmp/train.bin" --layers 1 --heads 1 --dim 8 --vocab 8 --steps 2 --out "$tmp/x5" $T1
expect "val channels differ" fail "channels" $LSSAR train --data "$tmp/train.bin" --val "$tmp/val2.bin" $MODEL --steps 2 --out "$tmp/x6" $T1
expect "NaN stops with exit 3" 3 "intact" $LSSAR train --data "$tmp/train.bin" $MODEL --lr 1e30 --warmup 0 --clip 0 --wd 0 --steps 30 --save-every 1 --out "$tmp/nan" $T1

# ---- damaged checkpoints
mkdir -p "$tmp/dmg"
cp "$tmp/run/model.safetensors" "$tmp/dmg/full.safetensors"
sz=$(stat -c %s "$tmp/dmg/full.safetensors")
head -c $((sz - 64)) "$tmp/dmg/full.safetensors" > "$tmp/dmg/model.safetensors"
expect "truncated checkpoint" fail "truncated" $LSSAR eval --model "$tmp/dmg" --data "$tmp/val.bin" --seq 32 $T1
{ printf '\xff\xff\xff\xff\xff\xff\xff\x7f'; tail -c +9 "$tmp/dmg/full.safetensors"; } > "$tmp/dmg/model.safetensors"
expect "garbage header length" fail "header length" $LSSAR eval --model "$tmp/dmg" --data "$tmp/val.bin" --seq 32 $T1
python3 -c "
import sys
b = bytearray(open('$tmp/dmg/full.safetensors', 'rb').read())
i = b.index(b'\"F32\"'); b[i+1:i+4] = b'I32'
open('$tmp/dmg/model.safetensors', 'wb').write(b)
"
expect "wrong dtype in checkpoint" fail "dtype" $LSSAR eval --model "$tmp/dmg" --data "$tmp/val.bin" --seq 32 $T1
python3 -c "
b = bytearray(open('$tmp/dmg/full.safetensors', 'rb').read())
i = b.index(b'\"layers\":\"2\"'); b[i+10] = ord('3')
open('$tmp/dmg/model.safetensors', 'wb').write(b)
"
expect "config and tensors disagree" fail "missing" $LSSAR eval --model "$tmp/dmg" --data "$tmp/val.bin" --seq 32 $T1
echo "not json at all" > "$tmp/dmg/model.safetensors"
expect "text file as checkpoint" fail "safetensors" $LSSAR sample --model "$tmp/dmg" --prompt-ids 1 $T1
expect "missing model" fail "cannot open" $LSSAR eval --model "$tmp/none" --data "$tmp/val.bin" --seq 32 $T1
cp -r "$tmp/run" "$tmp/run2"
head -c 3000 "$tmp/run/trainer.safetensors" > "$tmp/run2/trainer.safetensors"
expect "resume from a truncated trainer state" fail "trainer.safetensors" $LSSAR train --out "$tmp/run2" --resume --steps 70 $T1

# ---- bench
expect "bench --quick" 0 "sgemm" $LSSAR bench --quick --json "$tmp/bench.json" $T1
if python3 -c "
import json
d = json.load(open('$tmp/bench.json'))
for t in d['train']:
    assert all(k in t for k in ('layers', 'dim', 'ms_per_step', 'gflops', 'sgemm_gflops', 'sgemm_ratio')), t
    assert t['ms_per_step'] > 0 and t['gflops'] > 0 and t['sgemm_gflops'] > 0
kinds = {(a['kind'], a['T']) for a in d['attention']}
assert ('softmax', 32) in kinds and ('lssar', 64) in kinds, kinds
assert all(a['fwd_bwd_ms'] > 0 for a in d['attention'])
"; then ok "bench JSON"; else bad "bench JSON" "$(cat "$tmp/bench.json" 2>&1)"; fi
# one shape of one's own, two kinds, learned positions, MFU from --peak-tflops, peak memory
expect "bench one shape, two kinds" 0 "sgemm" $LSSAR bench --no-attn --attn softmax,lssar --layers 1 --dim 32 --heads 2 --vocab 300 \
  --batch 2 --seq 16 --pos learned --peak-tflops 0.5 --warmup 1 --repeats 2 --device cpu --json "$tmp/bench2.json" $T1
if python3 -c "
import json
d = json.load(open('$tmp/bench2.json'))
assert d['device'] == 'cpu' and d['train_attn'] == 'softmax,lssar' and d['attention'] == [], d
t = d['train']
assert [r['attn'] for r in t] == ['softmax', 'lssar'], t
for r in t:
    assert (r['layers'], r['dim'], r['heads'], r['vocab'], r['batch'], r['seq'], r['pos']) == (1, 32, 2, 300, 2, 16, 'learned'), r
    # 1 block (12 C^2 + 13 C) + wte 300 C + wpe 16 C + ln_f 2 C, C = 32
    assert r['params'] == 12 * 32 * 32 + 13 * 32 + 300 * 32 + 16 * 32 + 2 * 32, r['params']
    flop = (6 * r['params'] + 12 * 1 * 32 * 16) * 2 * 16
    assert abs(r['gflop_per_step'] * 1e9 - flop) < 1e-3 * flop, r
    assert abs(r['tokens_per_s'] - 32 / (r['ms_per_step'] * 1e-3)) < 1e-6 * r['tokens_per_s'], r
    assert r['peak_tflops'] == 0.5 and abs(r['mfu'] - r['gflops'] / 500) < 1e-9, r
    assert r['peak_rss_bytes'] > 1e6 and 'device_held_peak_bytes' not in r, r
    assert r['sgemm_gflops'] > 0
"; then ok "bench one-shape JSON: kinds, shape, params, FLOPs, tokens/s, MFU, peak RSS"; else bad "bench one-shape JSON" "$(cat "$tmp/bench2.json" 2>&1)"; fi
if python3 -c "
import json
assert all(r['mfu'] is None and r['peak_tflops'] is None for r in json.load(open('$tmp/bench.json'))['train'])
"; then ok "bench on the CPU without --peak-tflops: mfu null"; else bad "bench mfu null" "$(cat "$tmp/bench.json")"; fi
expect "bench --attn bad in a list" 2 "'nope' is unknown" $LSSAR bench --attn softmax,nope --quick
expect "bench --pos bad" 2 "--pos 'x' is unknown" $LSSAR bench --pos x --quick
expect "bench --repeats too many" 2 "--repeats must be 0 to 64" $LSSAR bench --repeats 65 --quick
expect "bench --vocab too large" 2 "16-bit" $LSSAR bench --vocab 70000 --quick
expect "bench --heads not dividing --dim" fail "head" $LSSAR bench --no-attn --layers 1 --dim 30 --heads 4 --vocab 64 --batch 1 --seq 8 $T1
expect "bench --device bad" 2 "use cpu, cuda or auto" $LSSAR bench --device gpu --quick
if ! grep -q 'cuda=1' "${LSSAR_BUILD:-build}/build-flags" 2>/dev/null; then
    expect "bench --device cuda without CUDA" 2 "no CUDA backend" $LSSAR bench --device cuda --quick $T1
elif [ "$($LSSAR --version | sed -n 's/.*; \([0-9]*\) GPUs\{0,1\} found.*/\1/p')" = 0 ]; then
    expect "bench --device cuda without a GPU" 2 "no CUDA GPU found" $LSSAR bench --device cuda --quick $T1
fi
if [ "$($LSSAR --version | grep -c ' [1-9][0-9]* GPUs\{0,1\} found')" = 0 ]; then
    out=$($LSSAR bench --device auto --quick --no-attn --json "$tmp/bench3.json" $T1 2>&1); rc=$?
    if [ $rc -eq 0 ] && [ "$(grep -c 'no CUDA GPU found.*running on the CPU' <<<"$out")" = 1 ] && grep -q '"device":[[:space:]]*"cpu"' "$tmp/bench3.json"; then
        ok "bench --device auto without a GPU: the CPU, said once"
    else bad "bench --device auto without a GPU" "rc $rc: $out"; fi
fi

echo "test_cli: $pass passed, $fail failed"
[ $fail -eq 0 ]
