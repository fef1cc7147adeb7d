#!/usr/bin/env bash
# test_examples.sh - the programs of examples/ build against the public header alone and print
# what they should: examples/tiny.c creates, scores, saves, reloads and decodes a tiny model
# (lssar.h only). Its saved run directory is then read by the lssar program, whose greedy
# `lssar sample` must give the same ids as the example's decoder.
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
LSSAR=${LSSAR_BIN:-$BUILD/lssar}
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; [ -n "${2:-}" ] && printf '%s\n' "$2" | tail -12 | sed 's/^/    /'; }
tmp=$(mktemp -d /tmp/lssar_examples_XXXXXX)
trap 'rm -rf "$tmp"' EXIT

out=$(make --no-print-directory BUILD="$BUILD" "$BUILD/examples/tiny" 2>&1) && ok "examples/tiny builds" || bad "examples/tiny builds" "$out"
# only the public header: the example must not reach into src/
grep -E '#include +"' examples/*.c && bad "examples include only <lssar.h> and system headers" || ok "examples include only <lssar.h> and system headers"

if [ -x "$BUILD/examples/tiny" ]; then
  run=$("$BUILD/examples/tiny" "$tmp/run" 2>&1); rc=$?
  [ $rc -eq 0 ] && ok "tiny exits 0" || bad "tiny exits 0 (exit $rc)" "$run"
  ver=$(sed -n 's/^#define LSSAR_VERSION "\(.*\)"/\1/p' include/lssar.h)
  grep -qx "liblssar $ver (header $ver)" <<<"$run" && ok "tiny reports version $ver" || bad "tiny reports version $ver" "$run"
  grep -qx "threads 1" <<<"$run" && ok "lssar_set_threads(1) / lssar_get_threads" || bad "lssar_set_threads(1) / lssar_get_threads" "$run"
  grep -q "^model 1 layers, 2 heads, dim 16, vocab 16, rope positions, lssar attention (p 15), [0-9]* parameters" <<<"$run" &&
    ok "created model described" || bad "created model described" "$run"
  # an untrained model over 16 ids scores about ln 16 = 2.77 nats per token
  loss=$(sed -n 's/^loss \([0-9.]*\) .*/\1/p' <<<"$run")
  awk -v l="$loss" 'BEGIN { exit !(l > 2.5 && l < 3.1) }' && ok "loss of the new model is near ln 16 ($loss)" || bad "loss of the new model is near ln 16 (got '$loss')" "$run"
  [ -f "$tmp/run/model.safetensors" ] && ok "lssar_model_save wrote run/model.safetensors" || bad "lssar_model_save wrote run/model.safetensors"
  grep -qx "reloaded loss $loss (same)" <<<"$run" && ok "the reloaded model scores the same" || bad "the reloaded model scores the same" "$run"
  grep -qx "load as softmax: refused" <<<"$run" && ok "an lssar -> softmax load is refused" || bad "an lssar -> softmax load is refused" "$run"
  grep -q "^decoded loss .* (matches the forward pass)" <<<"$run" && ok "decoder logits give the forward pass's loss" || bad "decoder logits give the forward pass's loss" "$run"
  ids=$(sed -n 's/^greedy: //p' <<<"$run")
  [ "$(wc -w <<<"$ids")" -eq 8 ] && ! grep -qvE '^([0-9]|1[0-5])( ([0-9]|1[0-5]))*$' <<<"$ids" &&
    ok "8 greedy ids in the vocabulary ($ids)" || bad "8 greedy ids in the vocabulary" "$run"
  grep -qx "greedy after reload same" <<<"$run" && ok "greedy decoding is the same after reload" || bad "greedy decoding is the same after reload" "$run"
  grep -qx 'byte tokens of "hi": 104 105' <<<"$run" && ok "lssar_encode + lssar_free" || bad "lssar_encode + lssar_free" "$run"
  # the trainer's tools read what lssar_model_save wrote
  if [ -x "$LSSAR" ] && [ -f "$tmp/run/model.safetensors" ]; then
    s=$("$LSSAR" sample --model "$tmp/run" --prompt-ids 1,2,3 --tokens 8 --temperature 0 --threads 1 2>&1)
    [ "$s" = "$ids" ] && ok "lssar sample reads the saved model and decodes the same ids" ||
      bad "lssar sample reads the saved model and decodes the same ids (example: '$ids')" "$s"
  else
    bad "lssar sample cross-check ($LSSAR not built)"
  fi
fi
echo "test_examples: $pass passed, $fail failed"
[ $fail -eq 0 ]
