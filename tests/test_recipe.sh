#!/usr/bin/env bash
# test_recipe.sh - `lssar recipe` (the paper's runs as one command) at smoke size on the CPU: the
# gpt2-124m recipe end to end on a corpus of ours (this repository's docs, byte tokens), its
# report, a rerun that continues, a killed run resumed bit for bit; the orbits-109m recipe; the
# full-size commands printed on the CPU; and --device on every command that runs a model
# (issue 14: cuda without a GPU exits 2 and says so, auto falls back to the CPU).
# Binary: $LSSAR_BIN, else $BUILD/lssar (build/); the killed run: its test build with the hooks of
# tests/hooks.c ($LSSAR_HOOKS_BIN, else tests/lssar-hooks beside it). Ends with
# "test_recipe: N passed, M failed".
cd "$(dirname "$0")/.."
B=${BUILD:-build}
LSSAR=${LSSAR_BIN:-$B/lssar}
HOOKS=${LSSAR_HOOKS_BIN:-$(dirname "$LSSAR")/tests/lssar-hooks}
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; [ -n "$2" ] && printf '%s\n' "$2" | tail -8 | sed 's/^/    /'; }
finish() { echo "test_recipe: $pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit $?; }
for b in "$LSSAR" "$HOOKS"; do [ -x "$b" ] || { echo "test_recipe: $b is not built"; fail=1; finish; }; done
tmp=$(mktemp -d /tmp/lssar_recipe_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1

# the corpus: our own docs as byte tokens (lssar data build --text), ~170k train and ~50k val tokens
if ! "$LSSAR" data build --corpus text --text docs --tokenizer byte --val-frac 0.3 --out "$tmp/d" --quiet >/dev/null 2>&1; then
  bad "data build --text docs" "$("$LSSAR" data build --corpus text --text docs --tokenizer byte --val-frac 0.3 --out "$tmp/d2" 2>&1)"; finish
fi
R=(recipe gpt2-124m --smoke --data "$tmp/d/train_000.bin" --val "$tmp/d/val.bin" --vocab 257 --device cpu --threads 1)

# 1. the smoke run: every stage, then the report
out=$("$LSSAR" "${R[@]}" --out "$tmp/r" 2>&1); rc=$?
if [ $rc -eq 0 ] && grep -q '^\$ lssar train .*--layers 2 .*--seq 256 .*--steps 10 ' <<<"$out" \
   && grep -q '^\$ lssar eval .*--seq 256,512,1024,2048,4096 ' <<<"$out" && grep -q '^\$ lssar passkey .*--lengths 256,512,1024,2048,4096 ' <<<"$out"; then
  ok "gpt2-124m --smoke: train, eval at 1x-16x, passkey (each stage printed as its command)"
else bad "gpt2-124m --smoke (exit $rc)" "$out"; fi
if python3 - "$tmp/r" <<'EOF'
import json, sys
d = sys.argv[1]
r = json.load(open(d + "/recipe.json"))
assert r["recipe"] == "gpt2-124m" and r["smoke"] is True and r["device"] == "cpu", r
assert [s["name"] for s in r["stages"]] == ["train", "eval", "passkey"], r["stages"]
assert all(s["exit"] == 0 and not s["skipped"] and s["command"].startswith("lssar ") for s in r["stages"])
assert r["train"]["step"] == 10 and 0 < r["train"]["val_loss"] < 6, r["train"]
assert [e["seq"] for e in r["eval"]] == [256, 512, 1024, 2048, 4096] and all(0 < e["loss"] < 6 for e in r["eval"])
assert [p["length"] for p in r["passkey"]] == [256, 512, 1024, 2048, 4096]
assert all(p["trials"] == 4 and 0 <= p["lo"] <= p["accuracy"] <= p["hi"] <= 1 for p in r["passkey"]), r["passkey"]
md = open(d + "/RESULTS.md").read()
assert "| 4096 |" in md and "Passkey" in md and "lssar train" in md, md
cmds = [l for l in open(d + "/commands.sh") if l.startswith("lssar ")]
assert len(cmds) == 3 and cmds[0].startswith("lssar train --data"), cmds
EOF
then ok "recipe.json, RESULTS.md and commands.sh hold the stages, the losses at 5 lengths and the passkey table"
else bad "the report"; fi
for f in train/model.safetensors train/log.jsonl eval.json passkey.json; do
  [ -s "$tmp/r/$f" ] || bad "OUT/$f written"
done

# 2. a rerun continues: training has nothing to do, eval and passkey are not run again
cp "$tmp/r/train/model.safetensors" "$tmp/model.first"
out=$("$LSSAR" "${R[@]}" --out "$tmp/r" 2>&1); rc=$?
if [ $rc -eq 0 ] && grep -q -- '--resume' <<<"$out" && grep -q 'nothing to do' <<<"$out" && [ "$(grep -c 'not run again' <<<"$out")" = 2 ] \
   && cmp -s "$tmp/model.first" "$tmp/r/train/model.safetensors" && ! grep -q 'train loss 0.0000' <<<"$out"; then
  ok "a rerun resumes (nothing to do), skips eval and passkey, leaves the model as it was"
else bad "rerun (exit $rc)" "$out"; fi

# 3. a run killed at step 7 (after the checkpoint of step 5) and rerun equals one uninterrupted run
out=$(LSSAR_TEST_KILL_AT_STEP=7 LSSAR_TEST_KILL_RANK=0 "$HOOKS" "${R[@]}" --out "$tmp/k" 2>&1); rc=$?
out2=$("$LSSAR" "${R[@]}" --out "$tmp/k" 2>&1); rc2=$?
if [ $rc -ne 0 ] && [ $rc2 -eq 0 ] && grep -q 'steps 6\.\.10' <<<"$out2" && cmp -s "$tmp/model.first" "$tmp/k/train/model.safetensors"; then
  ok "killed at step 7, rerun: resumes at step 6 and ends with the uninterrupted run's model, bit for bit"
else bad "killed and rerun (exits $rc, $rc2)" "$out2"; fi

# 4. the orbit world model's recipe at smoke size
out=$("$LSSAR" recipe orbits-109m --smoke --device cpu --threads 1 --out "$tmp/o" 2>&1); rc=$?
if [ $rc -eq 0 ] && [ -s "$tmp/o/RESULTS.md" ] && grep -q 'orbits run --scale smoke' <<<"$out" \
   && grep -q '^lssar train .*--steps 10 .*--device cpu' "$tmp/o/commands.sh" && grep -q '^lssar orbits probe .*--device cpu' "$tmp/o/commands.sh"; then
  ok "orbits-109m --smoke: orbits run --scale smoke, every stage on --device"
else bad "orbits-109m --smoke (exit $rc)" "$out"; fi

# 5. the full-size recipes on the CPU are printed, not run
out=$("$LSSAR" recipe gpt2-124m --data a.bin --val b.bin --device cpu --out "$tmp/full" 2>&1); rc=$?
if [ $rc -eq 0 ] && grep -q 'printed, not run' <<<"$out" && [ ! -e "$tmp/full" ] \
   && grep -q -- '--layers 12 --heads 12 --dim 768 .*--seq 1024 --batch 16 --accum 32 --steps 19073 --lr 0.0006 --warmup 700 --lr-floor 0 --wd 0.1' <<<"$out" \
   && grep -q -- '--seq 1024,2048,4096,8192,16384' <<<"$out"; then
  ok "gpt2-124m on the CPU: llm.c's 124M commands printed, nothing written"
else bad "gpt2-124m printed (exit $rc)" "$out"; fi
out=$("$LSSAR" recipe orbits-109m --device cpu --out "$tmp/fullo" 2>&1); rc=$?
if [ $rc -eq 0 ] && [ ! -e "$tmp/fullo" ] && grep -q -- '--layers 12 --heads 12 --dim 768 --seq 999 --batch 64' <<<"$out" && grep -q -- '--systems 10000000' <<<"$out"; then
  ok "orbits-109m on the CPU: the paper-scale commands printed, nothing written"
else bad "orbits-109m printed (exit $rc)" "$out"; fi

# 6. bad flags: exit 2 with what is wrong
expect() {
  local name=$1 want=$2 needle=$3; shift 3
  local o r
  o=$("$@" 2>&1); r=$?
  if [ $r -eq "$want" ] && grep -qiF -- "$needle" <<<"$o"; then ok "$name"; else bad "$name (exit $r, want $want, '$needle')" "$o"; fi
}
expect "no recipe named" 2 "name a recipe" "$LSSAR" recipe --smoke
expect "unknown recipe" 2 "unknown recipe 'gpt3'" "$LSSAR" recipe gpt3
expect "gpt2-124m needs data" 2 "needs --data" "$LSSAR" recipe gpt2-124m --smoke
expect "orbits-109m takes no --data" 2 "simulates its own data" "$LSSAR" recipe orbits-109m --data x.bin
expect "unknown kind" 2 "kind 'soft' is unknown" "$LSSAR" recipe gpt2-124m --attn soft --data a --val b
expect "recipe --help" 0 "llm.c" "$LSSAR" recipe --help

# 7. --device on every command that runs a model: documented, cuda refused without a GPU (exit 2,
# saying why and what to use), auto falls back to the CPU
if grep -q 'cuda=1' "$B/build-flags" 2>/dev/null; then why="no CUDA GPU found"; else why="no CUDA backend"; fi
gpus=$("$LSSAR" --version | sed -n 's/.*; \([0-9]*\) GPUs\{0,1\} found.*/\1/p')
m=$tmp/r/train
while IFS='|' read -r name args; do
  # shellcheck disable=SC2086
  if "$LSSAR" $name --help 2>&1 | grep -q -- '--device S'; then ok "$name --help documents --device"; else bad "$name --help documents --device"; fi
  [ "${gpus:-0}" = 0 ] || continue
  # shellcheck disable=SC2086
  o=$("$LSSAR" $name $args --device cuda 2>&1); r=$?
  if [ $r -eq 2 ] && grep -qF "$why" <<<"$o" && grep -qF -- "--device cpu" <<<"$o"; then ok "$name --device cuda without a GPU: exit 2, says so"
  else bad "$name --device cuda without a GPU (exit $r)" "$o"; fi
done <<EOF
train|--data $tmp/d/train_000.bin --out $tmp/dev-train --vocab 257 --steps 1
eval|--model $m --data $tmp/d/val.bin --seq 64
sample|--model $m --prompt-ids 1,2 --tokens 2
bench|--quick
extrapolate|--data $tmp/d --out $tmp/dev-ex
attnstats|--model $m --data $tmp/d/val.bin --seq 64
passkey|--model $m --lengths 256
downstream|--model $m --tasks lambada
orbits eval|--model $tmp/o/lssar --data $tmp/o/data
orbits probe|--model $tmp/o/lssar --data $tmp/o/data --out $tmp/dev-probe
orbits run|--scale smoke --out $tmp/dev-orun
recipe|gpt2-124m --smoke --data $tmp/d/train_000.bin --val $tmp/d/val.bin
EOF
if [ "${gpus:-0}" = 0 ]; then
  o=$("$LSSAR" orbits eval --model "$tmp/o/lssar" --data "$tmp/o/data" --systems 2 --quiet --device auto 2>&1); r=$?
  if [ $r -eq 0 ] && [ "$(grep -c 'running on the CPU' <<<"$o")" = 1 ] && grep -q 'accuracy' <<<"$o"; then ok "orbits eval --device auto without a GPU runs on the CPU, said once"
  else bad "orbits eval --device auto (exit $r)" "$o"; fi
fi
finish
