#!/usr/bin/env bash
# test_gpu_science.sh - scripts/gpu-science.sh (issue 36's claim-1 run) dry-run on the CPU at toy
# size, so the GPU time goes to running: calibration, three trainings side by side, evaluation at
# 1x-16x and the summary; a cut training still evaluates its last checkpoint; no GPU: no_gpu,
# exit 0; missing data: a clear error, exit 1. Binary: $LSSAR_BIN, else $BUILD/lssar (build/).
# Ends with "test_gpu_science: N passed, M failed".
cd "$(dirname "$0")/.."
B=${BUILD:-build}
LSSAR=${LSSAR_BIN:-$B/lssar}
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; [ -n "$2" ] && printf '%s\n' "$2" | tail -8 | sed 's/^/    /'; }
finish() { echo "test_gpu_science: $pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit $?; }
[ -x "$LSSAR" ] || { echo "test_gpu_science: $LSSAR is not built"; fail=1; finish; }
tmp=$(mktemp -d /tmp/lssar_science_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
"$LSSAR" data build --corpus text --text docs --tokenizer byte --val-frac 0.3 --out "$tmp/d" --quiet \
  >/dev/null 2>&1 || { bad "data build --text docs"; finish; }
toy() {   # OUT [VAR=VALUE...]: the script on the CPU at toy size
  local out=$1; shift
  env GPU_SCIENCE_LSSAR="$LSSAR" GPU_SCIENCE_DATA="$tmp/d" GPU_SCIENCE_DEVICE=cpu GPU_SCIENCE_LAYERS=1 \
    GPU_SCIENCE_DIM=32 GPU_SCIENCE_SEQ=16 GPU_SCIENCE_BATCH=2 GPU_SCIENCE_BUDGET=40 \
    GPU_SCIENCE_CAL_SECONDS=3 GPU_SCIENCE_EVAL_BATCHES=2 GPU_SCIENCE_MAX_STEPS=60 GPU_SCIENCE_THREADS=1 \
    "$@" bash scripts/gpu-science.sh "$out" 2>&1
}
json() { /usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1" 2>&1; }

# 1. the whole run: three models, the same step budget, losses at five lengths, the tables
out=$(toy "$tmp/s"); rc=$?
got=$(json "$tmp/s/science.json" '",".join("%s:%d:%d" % (k, m["step_reached"], len(m.get("loss", {}))) for k, m in d["models"].items())')
if [ $rc -eq 0 ] && [ "$(json "$tmp/s/science.json" 'd["status"]')" = done ] &&
   [ "$got" = "softmax-d64:60:5,lssar-d64:60:5,lssar-d16:60:5" ] &&
   grep -q '^| lssar-d16 | 60 | ' "$tmp/s/science.md" && grep -q 'Loss by position range' "$tmp/s/science.md"; then
  ok "dry run: three models of 60 steps, 5 lengths each, science.md tables (exit 0)"
else bad "dry run (exit $rc; models $got)" "$out"; fi
# the step budget and each model's head size are what was asked
if [ "$(json "$tmp/s/science.json" 'd["steps"]')" = 60 ] &&
   [ "$(json "$tmp/s/science.json" '[m["heads"] for m in d["models"].values()]')" = "[1, 1, 2]" ]; then
  ok "same step budget for the three; heads 1, 1, 2 at width 32 (head sizes 32, 32, 16)"
else bad "steps/heads" "$(cat "$tmp/s/science.json")"; fi

# 2. a training cut by its timeout: the last checkpoint is evaluated, the step reached reported
out=$(toy "$tmp/c" GPU_SCIENCE_STEPS=100000000 GPU_SCIENCE_TRAIN_SECONDS=2); rc=$?
cut=$(json "$tmp/c/science.json" '",".join(m["train_exit"] for m in d["models"].values())')
reached=$(json "$tmp/c/science.json" 'min(m["step_reached"] for m in d["models"].values())')
nloss=$(json "$tmp/c/science.json" 'min(len(m.get("loss", {})) for m in d["models"].values())')
if [ "$cut" = "124,124,124" ] && [ "$reached" -gt 0 ] && [ "$nloss" = 5 ] && grep -q "reached step" <<<"$out"; then
  ok "trainings cut by their timeout: each evaluated from its last checkpoint (the least reached $reached)"
else bad "cut trainings (exit $rc, train exits $cut, reached $reached, lengths $nloss)" "$out"; fi

# 3. no GPU: says so, writes no_gpu, exit 0 (unless forced)
if ! nvidia-smi -L >/dev/null 2>&1; then
  out=$(GPU_SCIENCE_LSSAR="$LSSAR" GPU_SCIENCE_DATA="$tmp/d" bash scripts/gpu-science.sh "$tmp/n" 2>&1); rc=$?
  if [ $rc -eq 0 ] && grep -q "NO GPU" <<<"$out" && [ "$(json "$tmp/n/science.json" 'd["status"]')" = no_gpu ]; then
    ok "no GPU: NO GPU line, status no_gpu, exit 0"
  else bad "no GPU (exit $rc)" "$out"; fi
fi

# 4. missing data: a clear error naming the fix, exit 1
out=$(toy "$tmp/m" GPU_SCIENCE_DATA="$tmp/none"); rc=$?
if [ $rc -eq 1 ] && grep -q "NO DATA.*--prepare" <<<"$out"; then ok "missing data: NO DATA with the fix, exit 1"
else bad "missing data (exit $rc)" "$out"; fi
# 5. usage
out=$(bash scripts/gpu-science.sh 2>&1); rc=$?
if [ $rc -eq 2 ] && grep -q "claim 1" <<<"$out"; then ok "no argument: usage, exit 2"; else bad "usage (exit $rc)" "$out"; fi
finish
