#!/usr/bin/env bash
# scripts/gpu-check.sh OUTDIR - the first (and every) GPU run of the CUDA backend, as ONE prepared
# script that fits a short device lease (under 8 minutes; docs/GPU_CHECK.md):
#   1. the machine: nvidia-smi, nvcc --version, torch, compute-sanitizer, CPU, glibc;
#   2. the build: `make -j16 CUDA=1` when the Debian dev libraries the library needs are there;
#      otherwise (or when that build fails) binaries carried from build/ (gpu-portable/ first:
#      `make gpu-portable` links those libraries statically), with the reason logged;
#   3. make test-gpu (tests/gpu/test_gpu.c: every CUDA function against the CPU backend);
#   4. bench/gpu_attn (our attention forward + backward, bf16) and scripts/gpu_attn_torch.py
#      (SDPA flash and plain-PyTorch LSSAR at the same shapes, in the same run); then, a step of
#      its own, LSSA and LSSAR in FlexAttention (scripts/flex_attn_torch.py, compiled; its
#      forward and gradients checked against the float64 reference first);
#   5. GPT-2 124M training throughput (B = 16, T = 1024, bf16): `lssar bench --device cuda` for
#      softmax and lssar, and scripts/gpt2_torch_bench.py (PyTorch eager and torch.compile) in
#      the same call: tokens/s, MFU, peak memory; then `lssar eval --device cuda` at T = 16384 on a
#      124M RoPE lssar model (made by `lssar train --steps 1`): time and peak memory;
#   5b. compute-sanitizer memcheck and racecheck on test_gpu in quick mode (small shapes);
#   6. two GPU ranks over NCCL (mpirun -np 2 lssar train --device cuda against one rank with
#      --accum 2, bit for bit) when the machine has 2 or more GPUs; skipped, and said so, otherwise;
#   7. OUTDIR/gpu-check.json (every figure) and OUTDIR/gpu-check.log (everything printed),
#      ending with a summary table: the checks, the timings, ours / SDPA, the goals.
# Every step runs under `timeout`, sized from what is left of the budget, so one hang cannot eat
# the lease. Without a GPU it says so, writes the JSON (status "no_gpu") and exits 0.
#
# Environment: GPU_CHECK_BUDGET seconds for everything (default 460); GPU_CHECK_MODE auto |
# build | prebuilt (default auto); GPU_CHECK_BUILD build directory (default build-gpu);
# GPU_CHECK_PREBUILT where carried binaries are looked for (default build); GPU_CHECK_JOBS
# (16); GPU_CHECK_FORCE=1 run the steps even without a GPU; GPU_CHECK_REQUIRE_GPU=1 exit 3
# without one; GPU_CHECK_ITERS timed iterations of the benchmarks (30); GPU_CHECK_BENCH_ARGS,
# GPU_CHECK_TORCH_ARGS extra arguments for the two benchmarks (smaller shapes for a dry run);
# GPU_CHECK_TRAIN_ARGS, GPU_CHECK_TORCH_TRAIN_ARGS, GPU_CHECK_EVAL_ARGS the same for lssar bench,
# gpt2_torch_bench.py and the 16k evaluation's train (GPU_CHECK_EVAL_DEVICE=cpu: both on the CPU,
# for a dry run); GPU_CHECK_SKIP=step,... leaves steps out (test-gpu, bench, torch, flex, train124m,
# torch124m, eval16k, memcheck, racecheck, dist2), e.g. a second run for the timings alone.
# Exit: 0 all checks passed (or no GPU), 1 a check failed or a step could not run, 3 no GPU
# with GPU_CHECK_REQUIRE_GPU=1. Missed performance goals are reported, not an exit code.
set -u -o pipefail
if [ $# -ne 1 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
  sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
mkdir -p "$1" || { echo "gpu-check: cannot create $1"; exit 2; }
OUTDIR=$(cd "$1" && pwd)
cd "$(dirname "$0")/.." || exit 2
ROOT=$(pwd)
BUDGET=${GPU_CHECK_BUDGET:-460}
MODE=${GPU_CHECK_MODE:-auto}
BUILD=${GPU_CHECK_BUILD:-build-gpu}
PREBUILT=${GPU_CHECK_PREBUILT:-build}
JOBS=${GPU_CHECK_JOBS:-16}
ITERS=${GPU_CHECK_ITERS:-30}
WORK=$(mktemp -d /tmp/gpu-check.XXXXXX)
STEPS=$WORK/steps.tsv
: >"$STEPS"
T0=$SECONDS
DEADLINE=$((T0 + BUDGET))
export PYTHONUNBUFFERED=1

hdr() { echo; echo "==== [$((SECONDS - T0)) s] $*"; }
note() { echo "gpu-check: $*"; }
# record NAME STATUS SECONDS DETAIL  (tab-separated; the summary reads it)
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$(tr '\t\n' '  ' <<<"$4")" >>"$STEPS"; }
# seconds a step may take: at most CAP, leaving RESERVE for the steps after it; 0 when < 20
allot() {
  local cap=$1 reserve=$2 l
  l=$((DEADLINE - SECONDS - reserve))
  [ "$l" -gt "$cap" ] && l=$cap
  [ "$l" -lt 20 ] && l=0
  echo "$l"
}
# run_timed SECONDS LOG cmd...: the command under timeout, output to the terminal and to LOG
run_timed() {
  local t=$1 log=$2; shift 2
  timeout -k 10 "$t" "$@" 2>&1 | tee "$log"
  return "${PIPESTATUS[0]}"
}
timed_out() { [ "$1" -eq 124 ] || [ "$1" -eq 137 ]; }
# skip_step NAME: true (and recorded) when GPU_CHECK_SKIP names it
skip_step() {
  case ",${GPU_CHECK_SKIP:-}," in
    *",$1,"*) note "$1 left out (GPU_CHECK_SKIP)"; record "$1" skipped 0 "GPU_CHECK_SKIP"; return 0 ;;
  esac
  return 1
}

main() {
  echo "gpu-check: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), repo $ROOT ($(git rev-parse --short HEAD 2>/dev/null || echo 'no git')$(git diff --quiet 2>/dev/null || echo ', with local changes')), budget ${BUDGET} s, out $OUTDIR"

  # ------------------------------------------------------------------ 1. the machine
  hdr "machine"
  local t0=$SECONDS
  uname -a
  grep -E '^PRETTY_NAME' /etc/os-release 2>/dev/null
  ldd --version 2>/dev/null | head -1
  echo "cpus: $(nproc), memory: $(free -g 2>/dev/null | awk '/^Mem:/ {print $2 " GiB"}')"
  GPU_OK=0; GPU_WHY=""
  if command -v nvidia-smi >/dev/null; then
    timeout 30 nvidia-smi 2>&1 | head -30
    timeout 20 nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu,persistence_mode --format=csv 2>&1 | tee "$WORK/gpu.csv"
    if timeout 20 nvidia-smi -L 2>/dev/null | grep -q '^GPU [0-9]'; then GPU_OK=1; else GPU_WHY="nvidia-smi -L lists no GPU"; fi
  else
    GPU_WHY="nvidia-smi is not installed"
  fi
  export PATH="$PATH:/usr/local/cuda/bin"
  NVCC=$(command -v nvcc || true)
  if [ -n "$NVCC" ]; then timeout 20 "$NVCC" --version | tail -2; else echo "nvcc: not found (PATH and /usr/local/cuda/bin)"; fi
  SAN=$(command -v compute-sanitizer || true)
  if [ -n "$SAN" ]; then timeout 20 "$SAN" --version 2>&1 | head -2; else echo "compute-sanitizer: not found"; fi
  PY=$(command -v python3 || true)
  if [ -n "$PY" ]; then
    timeout 90 "$PY" -c 'import sys
try:
    import torch
    print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available(),
          "devices", torch.cuda.device_count() if torch.cuda.is_available() else 0)
except Exception as e:
    print("python", sys.version.split()[0], "torch: not importable:", e)
try:
    import triton; print("triton", triton.__version__)
except Exception as e:
    print("triton: not importable:", e)' 2>&1 | tee "$WORK/python.txt"
    if [ $GPU_OK = 0 ] && grep -q 'available True' "$WORK/python.txt"; then GPU_OK=1; GPU_WHY=""; fi
  else
    echo "python3: not found"
  fi
  record machine ok $((SECONDS - t0)) "gpu=$GPU_OK ${GPU_WHY}"

  if [ $GPU_OK = 0 ] && [ "${GPU_CHECK_FORCE:-0}" != 1 ]; then
    echo
    echo "======================================================================"
    echo "NO GPU: $GPU_WHY. Nothing was built, tested or timed."
    echo "$OUTDIR/gpu-check.json says status \"no_gpu\" (GPU_CHECK_FORCE=1 runs the steps anyway)."
    echo "======================================================================"
    record gpu no_gpu 0 "$GPU_WHY"
    summarize no_gpu
    [ "${GPU_CHECK_REQUIRE_GPU:-0}" = 1 ] && return 3
    return 0
  fi

  # ------------------------------------------------------------------ 2. the build
  hdr "build (mode $MODE)"
  t0=$SECONDS
  local ma; ma=$(cc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
  local missing=()
  command -v make >/dev/null || missing+=(make)
  command -v cc >/dev/null || missing+=(cc)
  [ -n "$NVCC" ] || missing+=(nvcc)
  # the Debian dev libraries, by compiling and linking a program that uses each
  if command -v cc >/dev/null; then
    for lib in "openblas:cblas.h:-lopenblas" "cjson:cJSON.h:-lcjson" "pcre2:pcre2.h:-lpcre2-8" "zlib:zlib.h:-lz" "nettle:nettle/sha2.h:-lnettle"; do
      IFS=: read -r name hdrf flag <<<"$lib"
      if ! cc -I/usr/include/"$ma"/openblas-openmp -I/usr/include/cjson -I/usr/include/openblas -DPCRE2_CODE_UNIT_WIDTH=8 \
              -fsyntax-only -include "$hdrf" -x c /dev/null 2>/dev/null ||
         ! cc -x c - -o "$WORK/deps.out" -L/usr/lib/"$ma"/openblas-openmp "$flag" <<<'int main(void){return 0;}' 2>/dev/null; then
        missing+=("$name")
      fi
    done
  fi
  BIN_TEST=""; BIN_BENCH=""; LIBSO=""; HOW=""
  local mkf=()
  grep -q 'mk/cuda_test.mk' Makefile 2>/dev/null || mkf=(-f Makefile -f mk/cuda_test.mk)
  if [ "$MODE" != prebuilt ] && [ ${#missing[@]} -eq 0 ]; then
    local bt; bt=$(allot 240 200)
    note "building: make -j$JOBS CUDA=1 BUILD=$BUILD ${mkf[*]} (timeout ${bt} s)"
    run_timed "$bt" "$WORK/build.log" make "${mkf[@]}" -j"$JOBS" CUDA=1 BUILD="$BUILD" \
      "$BUILD/liblssar.a" "$BUILD/liblssar.so" "$BUILD/lssar" "$BUILD/tests/gpu/test_gpu" "$BUILD/bench/gpu_attn"
    local brc=$?
    if [ $brc -eq 0 ] && nm "$BUILD/liblssar.a" 2>/dev/null | grep -qE ' [BDGRSV] nn_backend_cuda$'; then
      BIN_TEST=$BUILD/tests/gpu/test_gpu; BIN_BENCH=$BUILD/bench/gpu_attn; LIBSO=$BUILD/liblssar.so
      HOW="built here: make -j$JOBS CUDA=1 BUILD=$BUILD ($((SECONDS - t0)) s)"
      record build ok $((SECONDS - t0)) "$HOW"
    elif [ $brc -eq 0 ]; then
      note "BUILD WITHOUT CUDA: make succeeded but $BUILD/liblssar.a has no nn_backend_cuda (is CUDA=1 honoured, is nvcc found?)"
      record build no_cuda $((SECONDS - t0)) "make succeeded but liblssar.a has no CUDA backend"
    else
      local why="exit $brc"; timed_out $brc && why="timed out after $bt s"
      note "BUILD FAILED ($why); the build's output is above (and in gpu-check.log)"
      record build failed $((SECONDS - t0)) "$why: $(grep -m1 -iE 'error' "$WORK/build.log" | cut -c1-200)"
    fi
  elif [ "$MODE" = build ]; then
    note "BUILD IMPOSSIBLE HERE: missing ${missing[*]} (GPU_CHECK_MODE=build: no fallback)"
    record build impossible 0 "missing: ${missing[*]}"
  else
    [ ${#missing[@]} -gt 0 ] && note "NOT BUILDING: missing here: ${missing[*]} (the Debian dev libraries the library links; this image does not have them)"
    [ "$MODE" = prebuilt ] && note "NOT BUILDING: GPU_CHECK_MODE=prebuilt"
    record build skipped 0 "missing: ${missing[*]:-none} mode: $MODE"
  fi
  if [ -z "$BIN_TEST" ] && [ "$MODE" != build ]; then
    note "looking for carried binaries in $PREBUILT/ (gpu-portable/ first)"
    # carried compressed (the three portable binaries are ~90 MB, the carry 64 MiB): unpack them
    for z in "$PREBUILT"/gpu-portable/*.xz; do
      [ -f "$z" ] || continue
      if command -v xz >/dev/null 2>&1; then xz -d -k -f "$z"
      elif [ -n "$PY" ]; then "$PY" -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[1][:-3], "wb"))' "$z"
      fi && chmod +x "${z%.xz}" && note "  unpacked ${z%.xz}"
    done
    local extra=""
    if [ -n "$PY" ]; then
      extra=$(timeout 60 "$PY" -c 'import os, importlib.util as u
d = []
for m in ("nvidia.cublas", "nvidia.cuda_runtime", "nvidia.nccl", "torch"):
    s = u.find_spec(m)
    if s and s.submodule_search_locations:
        for p in s.submodule_search_locations:
            d.append(os.path.join(p, "lib"))
print(":".join(x for x in d if os.path.isdir(x)))' 2>/dev/null)
    fi
    for cand in "$PREBUILT/gpu-portable/test_gpu:$PREBUILT/gpu-portable/gpu_attn" "$PREBUILT/tests/gpu/test_gpu:$PREBUILT/bench/gpu_attn"; do
      local t=${cand%%:*} b=${cand##*:}
      [ -x "$t" ] || { note "  $t: not there"; continue; }
      local nf; nf=$(ldd "$t" 2>/dev/null | grep 'not found')
      if [ -n "$nf" ] && [ -n "$extra" ]; then
        note "  $t: $(tr '\n' ' ' <<<"$nf"); trying LD_LIBRARY_PATH=$extra"
        export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/cuda/lib64:$extra"
        nf=$(ldd "$t" 2>/dev/null | grep 'not found')
      fi
      if [ -n "$nf" ]; then note "  $t: cannot run here, missing: $(tr '\n' ' ' <<<"$nf")"; continue; fi
      BIN_TEST=$t; [ -x "$b" ] && BIN_BENCH=$b
      HOW="prebuilt: $t${BIN_BENCH:+ and $BIN_BENCH} (carried; not built here)"
      break
    done
    if [ -f "$PREBUILT/liblssar.so" ] && ! ldd "$PREBUILT/liblssar.so" 2>/dev/null | grep -q 'not found'; then LIBSO=$PREBUILT/liblssar.so; fi
    if [ -n "$BIN_TEST" ]; then note "USING PREBUILT BINARIES: $HOW"; record prebuilt ok 0 "$HOW"
    else note "NO RUNNABLE TEST BINARY: not built here and none carried that runs (carry build/gpu-portable/, see docs/GPU_CHECK.md)"; record prebuilt none 0 "no runnable carried binary"; fi
  fi
  if [ -n "$BIN_TEST" ] && grep -q 'was built without CUDA' "$BIN_TEST"; then
    note "$BIN_TEST was built WITHOUT CUDA (skip-only program): it cannot test anything"
    record binary no_cuda 0 "$BIN_TEST is the skip-only build"
  fi

  # ------------------------------------------------------------------ 3. test-gpu
  hdr "test-gpu"
  t0=$SECONDS
  if skip_step test-gpu; then :
  elif [ -n "$BIN_TEST" ]; then
    local tt; tt=$(allot 240 150)
    if [ "$tt" = 0 ]; then record test-gpu skipped 0 "out of time budget"; note "test-gpu skipped: out of time"; else
      export LSSAR_GPU_JSON=$WORK/test_gpu.jsonl
      if [[ $HOW == built* ]]; then
        note "make test-gpu (timeout ${tt} s)"
        run_timed "$tt" "$WORK/test.log" make "${mkf[@]}" --no-print-directory CUDA=1 BUILD="$BUILD" GPU_SANITIZE=0 test-gpu
      else
        note "tests/gpu/run.sh $BIN_TEST (timeout ${tt} s)"
        run_timed "$tt" "$WORK/test.log" env GPU_SANITIZE=0 bash tests/gpu/run.sh "$BIN_TEST"
      fi
      local trc=$?
      unset LSSAR_GPU_JSON
      # a fault (sticky CUDA error) ends the program's CUDA context: run the groups it did not reach, once
      local rest_rec=""
      local rem; rem=$(grep -m1 -oE '^FATAL .*remaining groups: [a-z,]+\)' "$WORK/test.log" | sed -E 's/.*remaining groups: ([a-z,]+)\)$/\1/')
      if [ -n "$rem" ] && ! timed_out $trc; then
        local t2; t2=$(allot 200 110)
        if [ "$t2" != 0 ]; then
          note "test_gpu ended on a FATAL CUDA error; running the groups it did not reach: $rem (timeout ${t2} s)"
          LSSAR_GPU_JSON=$WORK/test_gpu_rest.jsonl LSSAR_GPU_ONLY=$rem GPU_SANITIZE=0 \
            run_timed "$t2" "$WORK/test_rest.log" bash tests/gpu/run.sh "$BIN_TEST"
          local rrc=$?
          rest_rec="$([ $rrc -eq 0 ] && echo ok || echo failed)	groups $rem: $(grep -E '^test_gpu: [0-9]+ passed' "$WORK/test_rest.log" | tail -1)"
        else
          rest_rec="skipped	out of time budget for the groups $rem"
        fi
      fi
      local line; line=$(grep -E '^test_gpu: [0-9]+ passed' "$WORK/test.log" | tail -1)
      if timed_out $trc; then record test-gpu timeout $((SECONDS - t0)) "timed out after $tt s; $(grep -c '^ok ' "$WORK/test.log") ok lines before that"
      elif [ -z "$line" ]; then record test-gpu failed $((SECONDS - t0)) "no summary (exit $trc): $(grep -m1 -E '^FATAL|SKIP' "$WORK/test.log")"
      elif [ $trc -eq 0 ]; then record test-gpu ok $((SECONDS - t0)) "$line"
      else record test-gpu failed $((SECONDS - t0)) "$line"; fi
      [ -n "$rest_rec" ] && record test-gpu-rest "${rest_rec%%	*}" 0 "${rest_rec#*	}"
    fi
  else
    record test-gpu not_run 0 "no test binary"
  fi

  # ------------------------------------------------------------------ 4. benchmarks
  hdr "bench/gpu_attn (ours: fused attention, bf16, through lssar_attn_*_cuda)"
  t0=$SECONDS
  if skip_step bench; then :
  elif [ -n "$BIN_BENCH" ]; then
    local bt2; bt2=$(allot 90 150)
    if [ "$bt2" = 0 ]; then record bench skipped 0 "out of time budget"; else
      # shellcheck disable=SC2086 # GPU_CHECK_BENCH_ARGS: extra words for a dry run
      run_timed "$bt2" "$WORK/bench.log" "$BIN_BENCH" --iters "$ITERS" ${GPU_CHECK_BENCH_ARGS:-} --json "$WORK/gpu_attn.json"
      local rc=$?
      if timed_out $rc; then record bench timeout $((SECONDS - t0)) "timed out after $bt2 s"
      elif [ $rc -eq 0 ]; then record bench ok $((SECONDS - t0)) ""
      else record bench failed $((SECONDS - t0)) "exit $rc: $(grep -m1 -E 'FAILED|INVALID|error' "$WORK/bench.log")"; fi
    fi
  else
    record bench not_run 0 "no benchmark binary"
  fi
  hdr "scripts/gpu_attn_torch.py (SDPA flash; plain-PyTorch LSSAR)"
  t0=$SECONDS
  if skip_step torch; then :
  elif [ -n "$PY" ]; then
    local pt; pt=$(allot 100 130)
    if [ "$pt" = 0 ]; then record torch skipped 0 "out of time budget"; else
      local libarg=()
      [ -n "$LIBSO" ] && nm -D "$LIBSO" 2>/dev/null | grep -q ' T lssar_attn_forward_cuda' && libarg=(--lib "$LIBSO")
      # shellcheck disable=SC2086
      run_timed "$pt" "$WORK/torch.log" "$PY" scripts/gpu_attn_torch.py --impls sdpa,plain --iters "$ITERS" ${GPU_CHECK_TORCH_ARGS:-} --json "$WORK/torch.json" "${libarg[@]}"
      local rc=$?
      if timed_out $rc; then record torch timeout $((SECONDS - t0)) "timed out after $pt s"
      elif [ $rc -eq 0 ] && grep -q '^SKIP' "$WORK/torch.log"; then
        note "TORCH BENCHMARK SKIPPED: $(grep -m1 '^SKIP' "$WORK/torch.log"): no ratios against SDPA"
        record torch skipped $((SECONDS - t0)) "$(grep -m1 '^SKIP' "$WORK/torch.log")"
      elif [ $rc -eq 0 ]; then record torch ok $((SECONDS - t0)) ""
      else record torch failed $((SECONDS - t0)) "exit $rc: $(tail -1 "$WORK/torch.log")"; fi
    fi
  else
    record torch not_run 0 "no python3"
  fi
  # FlexAttention on its own time limit: compiling its kernels (two LSSAR calls, forward and
  # backward, per length) takes a while, and a slow compile must not cost the SDPA figures
  hdr "scripts/gpu_attn_torch.py --impls flex (LSSA and LSSAR in FlexAttention)"
  t0=$SECONDS
  if skip_step flex; then :
  elif [ -n "$PY" ]; then
    local ft; ft=$(allot 120 130)
    if [ "$ft" = 0 ]; then record flex skipped 0 "out of time budget"; else
      # shellcheck disable=SC2086
      run_timed "$ft" "$WORK/flex.log" "$PY" scripts/gpu_attn_torch.py --impls flex --iters "$ITERS" ${GPU_CHECK_TORCH_ARGS:-} --json "$WORK/flex.json"
      local rc=$?
      if timed_out $rc; then record flex timeout $((SECONDS - t0)) "timed out after $ft s (the rows measured before are kept)"
      elif [ $rc -eq 0 ] && grep -q '^SKIP' "$WORK/flex.log"; then record flex skipped $((SECONDS - t0)) "$(grep -m1 '^SKIP' "$WORK/flex.log")"
      elif [ $rc -ne 0 ]; then record flex failed $((SECONDS - t0)) "exit $rc: $(tail -1 "$WORK/flex.log")"
      elif grep -qE 'DISAGREE|check FAILED' "$WORK/flex.log"; then record flex failed $((SECONDS - t0)) "$(grep -m1 -E 'DISAGREE|check FAILED' "$WORK/flex.log")"
      else record flex ok $((SECONDS - t0)) ""; fi
    fi
  else
    record flex not_run 0 "no python3"
  fi


  # ------------------------------------------------------------------ 5. training throughput, long evaluation
  # GPT-2 124M (12 layers, 768, 12 heads, vocabulary 50304, learned positions: the model PyTorch's
  # side trains too), B = 16, T = 1024, bf16; goals: lssar >= 550k tokens/s, our softmax >= the
  # torch.compile rate of the same call. The lssar CLI: built here, else carried
  # ($PREBUILT/gpu-portable/lssar from `make gpu-portable`, else $PREBUILT/lssar, which needs the
  # Debian libraries at run time).
  local LS=""
  for c in "$BUILD/lssar" "$PREBUILT/gpu-portable/lssar" "$PREBUILT/lssar"; do
    [ -x "$c" ] || continue
    if "$c" --version >/dev/null 2>&1; then LS=$c; break; fi
    note "  $c: does not run here: $(ldd "$c" 2>/dev/null | grep 'not found' | tr '\n' ' ')"
  done
  [ -z "$LS" ] && note "NO RUNNABLE lssar CLI (not built here; none carried that runs): the training and evaluation steps are skipped"
  hdr "lssar bench --device cuda: GPT-2 124M training step, softmax and lssar"
  t0=$SECONDS
  if skip_step train124m; then :
  elif [ -z "$LS" ]; then record train124m skipped 0 "no runnable lssar CLI"
  else
    local tb; tb=$(allot 60 100)
    if [ "$tb" = 0 ]; then record train124m skipped 0 "out of time budget"; note "train124m skipped: out of time"; else
      # shellcheck disable=SC2086 # GPU_CHECK_TRAIN_ARGS: extra words (later flags win)
      run_timed "$tb" "$WORK/train124m.log" "$LS" bench --device cuda --no-attn --attn softmax,lssar --layers 12 --dim 768 \
        --heads 12 --vocab 50304 --batch 16 --seq 1024 --pos learned --warmup 3 --repeats 10 ${GPU_CHECK_TRAIN_ARGS:-} --json "$WORK/train124m.json"
      local rc=$?
      if timed_out $rc; then record train124m timeout $((SECONDS - t0)) "timed out after $tb s"
      elif [ $rc -eq 0 ]; then record train124m ok $((SECONDS - t0)) "$(grep -E '^(softmax|lssar) ' "$WORK/train124m.log" | awk '{printf "%s %s tok/s MFU %s; ", $1, $11, $12}')"
      else record train124m failed $((SECONDS - t0)) "exit $rc: $(grep -m1 -E 'lssar bench' "$WORK/train124m.log")"; fi
    fi
  fi
  hdr "scripts/gpt2_torch_bench.py: PyTorch GPT-2 124M training step, eager and torch.compile"
  t0=$SECONDS
  if skip_step torch124m; then :
  elif [ -z "$PY" ]; then record torch124m not_run 0 "no python3"
  else
    local tt2; tt2=$(allot 150 60)
    if [ "$tt2" = 0 ]; then record torch124m skipped 0 "out of time budget"; note "torch124m skipped: out of time"; else
      # shellcheck disable=SC2086
      run_timed "$tt2" "$WORK/torch124m.log" "$PY" scripts/gpt2_torch_bench.py --device cuda --attn softmax --modes eager,compile \
        --batch 16 --seq 1024 --warmup 3 --iters 10 ${GPU_CHECK_TORCH_TRAIN_ARGS:-} --json "$WORK/torch124m.json"
      local rc=$?
      if timed_out $rc; then record torch124m timeout $((SECONDS - t0)) "timed out after $tt2 s (the rows so far are in the JSON)"
      elif [ $rc -eq 0 ] && grep -q '^SKIP' "$WORK/torch124m.log"; then record torch124m skipped $((SECONDS - t0)) "$(grep -m1 '^SKIP' "$WORK/torch124m.log")"
      elif [ $rc -eq 0 ]; then record torch124m ok $((SECONDS - t0)) "$(grep -E '^softmax ' "$WORK/torch124m.log" | awk '{ if ($3 ~ /^[0-9.]+$/) printf "%s %s tok/s; ", $2, $4; else printf "%s %s; ", $2, $3 }')"
      else record torch124m failed $((SECONDS - t0)) "exit $rc: $(grep -m1 -E 'ERROR|Error' "$WORK/torch124m.log" | cut -c1-200)"; fi
    fi
  fi
  hdr "lssar eval --device ${GPU_CHECK_EVAL_DEVICE:-cuda} at T = 16384 (GPT-2 124M shape, RoPE, lssar)"
  t0=$SECONDS
  if skip_step eval16k; then :
  elif [ -z "$LS" ]; then record eval16k skipped 0 "no runnable lssar CLI"
  else
    local et; et=$(allot 60 40)
    if [ "$et" = 0 ]; then record eval16k skipped 0 "out of time budget"; note "eval16k skipped: out of time"; else
      local ev="$WORK/eval16k" edev=${GPU_CHECK_EVAL_DEVICE:-cuda}
      mkdir -p "$ev"
      # the model: one training step on a generated shard (the weights do not matter for time and memory)
      # shellcheck disable=SC2086
      run_timed "$et" "$WORK/eval16k.log" bash -c "'$LS' data synth --tokens 40000 --alphabet 200 --out '$ev/data.bin' >/dev/null &&
        '$LS' train --device $edev --data '$ev/data.bin' --layers 12 --heads 12 --dim 768 --vocab 50304 --pos rope --attn lssar \
          --seq 128 --batch 2 --steps 1 --quiet ${GPU_CHECK_EVAL_ARGS:-} --out '$ev/model' &&
        '$LS' eval --device $edev --model '$ev/model' --data '$ev/data.bin' --seq 16384 --batches 1 --batch 1 --json '$WORK/eval16k.json'"
      local rc=$?
      if timed_out $rc; then record eval16k timeout $((SECONDS - t0)) "timed out after $et s"
      elif [ $rc -eq 0 ]; then record eval16k ok $((SECONDS - t0)) "$(grep -E '^ +16384 |^device ' "$WORK/eval16k.log" | tr -s ' ' | tr '\n' ';')"
      else record eval16k failed $((SECONDS - t0)) "exit $rc: $(grep -m1 -E '^lssar ' "$WORK/eval16k.log" | cut -c1-200)"; fi
    fi
  fi

  # ------------------------------------------------------------------ 5b. compute-sanitizer
  for tool in memcheck racecheck; do
    hdr "compute-sanitizer --tool $tool (test_gpu, LSSAR_GPU_QUICK=1)"
    t0=$SECONDS
    if skip_step "$tool"; then continue; fi
    if [ -z "$BIN_TEST" ]; then record "$tool" not_run 0 "no test binary"; continue; fi
    if [ -z "$SAN" ]; then note "$tool skipped: compute-sanitizer is not installed"; record "$tool" skipped 0 "compute-sanitizer not installed"; continue; fi
    local st; st=$([ $tool = memcheck ] && allot 90 25 || allot 90 5)
    if [ "$st" = 0 ]; then note "$tool skipped: out of time budget"; record "$tool" skipped 0 "out of time budget"; continue; fi
    local args=(--tool "$tool" --error-exitcode 9 --print-limit 50)
    [ $tool = memcheck ] && args+=(--leak-check full)
    run_timed "$st" "$WORK/$tool.log" env -u LSSAR_GPU_JSON LSSAR_GPU_QUICK=1 LSSAR_GPU_SKIP="${LSSAR_GPU_SKIP:-train}" "$SAN" "${args[@]}" "$BIN_TEST" | grep -vE '^ok |^info '
    local rc=${PIPESTATUS[0]}
    local summ; summ=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$WORK/$tool.log" | tail -1 | sed 's/^========= *//')
    local tl; tl=$(grep -E '^test_gpu: [0-9]+ passed' "$WORK/$tool.log" | tail -1)
    if grep -qiE 'device not supported|not supported on this|error 999|unable to (launch|initialize)' "$WORK/$tool.log" && [ -z "$tl" ]; then
      note "$tool: compute-sanitizer REFUSED the device (e.g. a gVisor runtime): not checked"
      record "$tool" refused $((SECONDS - t0)) "$(grep -m1 -iE 'not supported|error 999|unable to' "$WORK/$tool.log")"
    elif timed_out $rc; then record "$tool" timeout $((SECONDS - t0)) "timed out after $st s"
    elif [ $rc -eq 0 ]; then record "$tool" ok $((SECONDS - t0)) "${summ:-no summary line}; $tl"
    else record "$tool" failed $((SECONDS - t0)) "exit $rc; ${summ:-no summary line}; $tl"; fi
  done

  # ------------------------------------------------------------------ 6. two GPU ranks (NCCL)
  # 2 ranks x accum 1 against 1 rank x accum 2 on the GPU: the same weights bit for bit (the
  # rank-order sums of src/cuda/dist_nccl.cu); needs 2 GPUs, mpirun and an MPI build of lssar
  hdr "2 GPU ranks over NCCL (mpirun -np 2 lssar train --device cuda)"
  t0=$SECONDS
  local ngpu; ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  local L2=$BUILD/lssar
  [ -x "$L2" ] || L2=$PREBUILT/lssar
  if skip_step dist2; then :
  elif [ "$ngpu" -lt 2 ]; then note "dist2 skipped: $ngpu GPU(s); the 2-rank check needs 2"; record dist2 skipped 0 "$ngpu GPU(s): needs 2"
  elif ! command -v mpirun >/dev/null || [ ! -x "$L2" ]; then record dist2 skipped 0 "no mpirun or no lssar binary"
  else
    local dt2; dt2=$(allot 120 5)
    local d2="$WORK/dist2" F2
    mkdir -p "$d2"
    "$L2" data synth --tokens 200000 --alphabet 200 --out "$d2/train.bin" >/dev/null 2>&1
    F2="--data $d2/train.bin --layers 2 --heads 4 --dim 256 --vocab 256 --seq 256 --batch 8 --steps 20 --seed 3 --quiet --device cuda"
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    run_timed "$dt2" "$WORK/dist2.log" bash -c "'$L2' train $F2 --accum 2 --out '$d2/one' && mpirun -np 2 --oversubscribe '$L2' train $F2 --out '$d2/two'"
    local rc=${PIPESTATUS[0]}
    if timed_out $rc; then record dist2 timeout $((SECONDS - t0)) "timed out after $dt2 s"
    elif [ $rc -ne 0 ]; then record dist2 failed $((SECONDS - t0)) "exit $rc"
    elif cmp -s "$d2/one/model.safetensors" "$d2/two/model.safetensors"; then record dist2 ok $((SECONDS - t0)) "2 ranks = 1 rank x accum 2, bit for bit"
    else record dist2 failed $((SECONDS - t0)) "2 ranks differ from 1 rank x accum 2"; fi
  fi

  summarize ran
  local bad; bad=$(awk -F'\t' '$2 ~ /^(failed|timeout|not_run|none|no_cuda|impossible)$/' "$STEPS" | wc -l)
  [ "$bad" -eq 0 ]
}

# ---------------------------------------------------------------------- the JSON and the table
summarize() {
  local status=$1
  hdr "summary"
  if [ -z "${PY:-}" ]; then
    note "python3 is missing: writing a minimal gpu-check.json (steps only)"
    { printf '{"status": "%s", "python3": false, "steps": [' "$status"
      awk -F'\t' 'BEGIN{s=""} {gsub(/"/,"'"'"'",$4); printf "%s{\"step\": \"%s\", \"status\": \"%s\", \"seconds\": %s, \"detail\": \"%s\"}", s, $1, $2, $3, $4; s=", "}' "$STEPS"
      printf ']}\n'; } >"$OUTDIR/gpu-check.json"
    column -t -s $'\t' "$STEPS" 2>/dev/null || cat "$STEPS"
    return
  fi
  STATUS=$status WORK=$WORK OUTDIR=$OUTDIR BUDGET=$BUDGET ELAPSED=$((SECONDS - T0)) HOW="${HOW:-}" \
    "$PY" - <<'PYEOF'
import json, os, re
W, OUT = os.environ["WORK"], os.environ["OUTDIR"]
def load(name):
    p = os.path.join(W, name)
    try:
        with open(p) as f:
            return json.load(f)
    except Exception as e:  # noqa: BLE001
        return {"missing": f"{name}: {e}"} if os.path.exists(p) else None
def text(name):
    p = os.path.join(W, name)
    return open(p, errors="replace").read() if os.path.exists(p) else ""
steps = []
for line in text("steps.tsv").splitlines():
    f = (line.split("\t") + ["", "", "", ""])[:4]
    steps.append({"step": f[0], "status": f[1], "seconds": int(f[2] or 0), "detail": f[3]})
st = {s["step"]: s for s in steps}
# test-gpu: every check
checks, fatal, tsum, infos, rest_sum = [], None, None, [], None
for fname, rerun in (("test_gpu.jsonl", False), ("test_gpu_rest.jsonl", True)):
    for line in text(fname).splitlines():
        try:
            r = json.loads(line)
        except Exception:  # noqa: BLE001
            continue
        if rerun: r["rerun_after_fatal"] = True
        if r.get("summary"):
            if rerun: rest_sum = r
            else: tsum = r
        elif "fatal" in r: fatal = fatal or r
        elif "info" in r: infos.append(r["info"])
        else: checks.append(r)
failed = [c for c in checks if not c.get("pass")]
bench, torch, flex = load("gpu_attn.json"), load("torch.json"), load("flex.json")
train124m, torch124m, eval16k = load("train124m.json"), load("torch124m.json"), load("eval16k.json")
# sanitizer summaries
san = {}
for tool in ("memcheck", "racecheck"):
    t = text(f"{tool}.log")
    m = re.findall(r"(ERROR SUMMARY: .*|RACECHECK SUMMARY: .*)", t)
    san[tool] = {"status": st.get(tool, {}).get("status", "not_run"), "summary": m[-1].strip() if m else None,
                 "detail": st.get(tool, {}).get("detail", ""), "tail": t.splitlines()[-15:] if t else []}
# timings, ratios, goals
GOALS = {"softmax": 1.1, "lssa": 1.2, "lssar": 1.3}
rows, goals = [], []
sdpa = {r["T"]: r for r in (torch or {}).get("results", []) if r.get("impl") == "sdpa_flash" and r.get("valid")}
plain = {r["T"]: r for r in (torch or {}).get("results", []) if r.get("impl") == "plain_lssar"}
flexr = {(r["impl"], r["T"]): r for r in (flex or {}).get("results", []) if r.get("impl", "").startswith("flex_")}
ours = {}
for r in (bench or {}).get("results", []):
    ours[(r["kind"], r["T"])] = r
for T in sorted({k[1] for k in ours} | set(sdpa) | {k[1] for k in flexr}):
    row = {"T": T, "B": (sdpa.get(T) or {}).get("B") or next((r["B"] for (k, t), r in ours.items() if t == T), None),
           "sdpa_fwdbwd_ms": sdpa[T]["fwdbwd_ms"] if T in sdpa else None,
           "sdpa_fwd_ms": sdpa[T]["fwd_ms"] if T in sdpa else None}
    p = plain.get(T)
    row["plain_lssar_fwdbwd_ms"] = p.get("fwdbwd_ms") if p and p.get("valid") else None
    row["plain_lssar_peak_gib"] = p.get("peak_gib") if p and p.get("valid") else None
    row["plain_lssar_note"] = (p.get("skipped") or p.get("error")) if p and not p.get("valid") else None
    for fk in ("lssa", "lssar"):
        fr = flexr.get((f"flex_{fk}", T))
        row[f"flex_{fk}_fwdbwd_ms"] = fr.get("fwdbwd_ms") if fr and fr.get("valid") else None
        row[f"flex_{fk}_fwd_ms"] = fr.get("fwd_ms") if fr and fr.get("valid") else None
        row[f"flex_{fk}_note"] = (fr.get("skipped") or fr.get("error")) if fr and not fr.get("valid") else None
    for kind, lim in GOALS.items():
        o = ours.get((kind, T))
        ms = o["fwdbwd_ms"] if o and o.get("valid") else None
        row[f"{kind}_fwdbwd_ms"] = ms
        row[f"{kind}_fwd_ms"] = o["fwd_ms"] if o and o.get("valid") else None
        ratio = ms / row["sdpa_fwdbwd_ms"] if ms and row["sdpa_fwdbwd_ms"] else None
        row[f"{kind}_over_sdpa"] = ratio
        g = {"goal": f"{kind} fwd+bwd <= {lim}x SDPA", "T": T, "ratio": ratio, "met": None if ratio is None else ratio <= lim}
        if ratio is None:
            g["why"] = "not measured: " + ("no SDPA time" if not row["sdpa_fwdbwd_ms"] else f"no valid {kind} time")
        goals.append(g)
        if kind == "lssar" and ms and row["plain_lssar_fwdbwd_ms"]:
            row["plain_lssar_over_ours"] = row["plain_lssar_fwdbwd_ms"] / ms
        if kind in ("lssa", "lssar") and ms and row[f"flex_{kind}_fwdbwd_ms"]:
            row[f"flex_{kind}_over_ours"] = row[f"flex_{kind}_fwdbwd_ms"] / ms
    rows.append(row)
mem = (bench or {}).get("memory", [])
if mem:
    per = {k: [m["workspace_per_token_head_bytes"].get(k) for m in mem if m["workspace_per_token_head_bytes"].get(k)] for k in GOALS}
    flat = all(v and max(v) <= 1.05 * min(v) for v in per.values() if v)
    growth = max((m.get("growth_during_calls_gib", 0) for m in mem), default=0)
    big = [m for m in mem if m["T"] == max(x["T"] for x in mem)][0]
    ws_big = max(big["workspace_per_token_head_bytes"].values()) * big["B"] * big["T"] * (bench.get("config", {}).get("H", 12)) / 2**30
    goals.append({"goal": "memory O(T): workspace per token and head the same at every T, no growth during the calls, "
                          "far below one T x T fp32 matrix", "T": big["T"],
                  "met": bool(flat and growth < 0.01 and (big["T"] < 4096 or ws_big < big["txt_fp32_gib"] / 10)),
                  "workspace_per_token_head_bytes": per, "growth_gib": growth, "workspace_gib_at_max_T": ws_big,
                  "txt_fp32_gib_at_max_T": big["txt_fp32_gib"]})
# GPT-2 124M training throughput: ours (lssar bench) and PyTorch's (gpt2_torch_bench.py), same call
GIB = 2**30
train_rows = []
for r in (train124m or {}).get("train", []) if isinstance(train124m, dict) else []:
    train_rows.append({"who": f"ours {r['attn']}", "tokens_per_s": r.get("tokens_per_s"), "ms_per_step": r.get("ms_per_step"),
                       "mfu": r.get("mfu"), "peak_gib": (r.get("device_held_peak_bytes") or 0) / GIB or None,
                       "device_used_gib": (r.get("device_used_peak_bytes") or 0) / GIB or None, "params": r.get("params")})
for r in (torch124m or {}).get("results", []) if isinstance(torch124m, dict) else []:
    train_rows.append({"who": f"torch {r['attn']} {r['mode']}", "status": r.get("status"), "reason": r.get("reason"),
                       "tokens_per_s": r.get("tokens_per_s"), "ms_per_step": r.get("ms_per_step"), "mfu": r.get("mfu"),
                       "peak_gib": (r.get("peak_memory_bytes") or 0) / GIB or None, "compile_s": r.get("compile_s"),
                       "params": (torch124m or {}).get("params")})
tr = {r["who"]: r for r in train_rows}
def tps(who):
    r = tr.get(who)
    return r.get("tokens_per_s") if r and r.get("status", "ok") == "ok" else None
if "train124m" in st or "torch124m" in st:   # the steps ran (or were tried)
    g = {"goal": "lssar training >= 550k tokens/s (GPT-2 124M, B=16, T=1024, bf16)", "T": 1024, "tokens_per_s": tps("ours lssar"),
         "mfu": (tr.get("ours lssar") or {}).get("mfu")}
    g["met"] = None if g["tokens_per_s"] is None else g["tokens_per_s"] >= 550e3
    if g["met"] is None: g["why"] = "not measured: " + (st.get("train124m", {}).get("detail") or "no train124m result")
    goals.append(g)
    a, b = tps("ours softmax"), tps("torch softmax compile")
    g = {"goal": "our softmax training >= torch.compile's rate (same call)", "T": 1024, "tokens_per_s": a, "torch_compile_tokens_per_s": b,
         "ratio": a / b if a and b else None, "mfu": (tr.get("ours softmax") or {}).get("mfu"),
         "torch_mfu": (tr.get("torch softmax compile") or {}).get("mfu")}
    g["met"] = None if g["ratio"] is None else g["ratio"] >= 1.0
    if g["met"] is None:
        g["why"] = "not measured: " + ("no torch.compile rate (" + ((tr.get("torch softmax compile") or {}).get("reason") or st.get("torch124m", {}).get("detail") or "not run") + ")" if a else "no softmax rate of ours")
    goals.append(g)
ev = None
if isinstance(eval16k, dict) and eval16k.get("results"):
    r0 = eval16k["results"][0]
    ev = {"seq": r0.get("seq"), "seconds": r0.get("seconds"), "loss": r0.get("loss"),
          "held_peak_gib": (eval16k.get("device_held_peak_bytes") or 0) / GIB or None,
          "device_used_peak_gib": (eval16k.get("device_used_peak_bytes") or 0) / GIB or None, "attn": eval16k.get("attn")}
correct_ok = (st.get("test-gpu", {}).get("status") == "ok" and all(
    san[t]["status"] in ("ok", "skipped", "refused") for t in san))
status = os.environ["STATUS"]
overall = "no_gpu" if status == "no_gpu" else ("pass" if correct_ok and not [s for s in steps if s["status"] in
             ("failed", "timeout", "not_run", "none", "no_cuda", "impossible")] else "fail")
out = {"status": overall, "elapsed_s": int(os.environ["ELAPSED"]), "budget_s": int(os.environ["BUDGET"]),
       "how": os.environ.get("HOW", ""), "steps": steps,
       "machine": {"gpu_csv": text("gpu.csv").strip(), "python": text("python.txt").strip()},
       "test_gpu": {"summary": tsum, "rerun_summary": rest_sum, "fatal": fatal, "n_checks": len(checks), "n_failed": len(failed),
                    "failed": failed, "checks": checks, "info": infos},
       "sanitizer": san, "bench": bench, "torch": torch, "flex": flex, "timings": rows,
       "train_bench": train124m, "torch_train": torch124m, "eval_long": eval16k, "training": train_rows, "eval_16k": ev,
       "goals": goals,
       "goals_met": sum(1 for g in goals if g["met"]), "goals_missed": sum(1 for g in goals if g["met"] is False),
       "goals_not_measured": sum(1 for g in goals if g["met"] is None), "goals_total": len(goals)}
with open(os.path.join(OUT, "gpu-check.json"), "w") as f:
    json.dump(out, f, indent=1)
# ---- the table
fmt = lambda x, p=3: "-" if x is None else f"{x:.{p}f}"  # noqa: E731
print(f"gpu-check: {overall.upper()}   ({out['elapsed_s']} s of {out['budget_s']})")
for s in steps:
    print(f"  {s['step']:<10} {s['status']:<9} {s['seconds']:>4} s  {s['detail'][:110]}")
if tsum:
    print(f"  test_gpu: {tsum['passed']} passed, {tsum['failed']} failed ({len(infos)} info lines)")
if fatal:
    print(f"  test_gpu FATAL: {fatal['fatal']} (after {fatal.get('after')}; not reached: {fatal.get('remaining') or 'none'})")
if rest_sum:
    print(f"  test_gpu rerun of the groups not reached: {rest_sum['passed']} passed, {rest_sum['failed']} failed")
for c in failed[:25]:
    print(f"    FAIL {c['name']}: err {c.get('err')} bound {c.get('bound')} {c.get('note') or ''}")
if len(failed) > 25:
    print(f"    ... {len(failed) - 25} more failures in gpu-check.json")
if rows:
    print("\n  attention forward + backward, bf16, H=12 D=64, 16k tokens per call (ms; ratio = ours / SDPA flash):")
    print(f"  {'T':>6} {'B':>3} {'SDPA':>8} {'softmax':>8} {'ratio':>6} {'lssa':>8} {'ratio':>6} {'lssar':>8} {'ratio':>6} {'plain-torch lssar':>18}"
          f" {'flex lssa':>10} {'flex lssar':>10}")
    for r in rows:
        pl = fmt(r["plain_lssar_fwdbwd_ms"], 1) if r["plain_lssar_fwdbwd_ms"] else ("skipped" if r["plain_lssar_note"] else "-")
        fl = {k: fmt(r[f"flex_{k}_fwdbwd_ms"]) if r[f"flex_{k}_fwdbwd_ms"] else ("failed" if r[f"flex_{k}_note"] else "-") for k in ("lssa", "lssar")}
        print(f"  {r['T']:>6} {r['B'] or '-':>3} {fmt(r['sdpa_fwdbwd_ms']):>8} {fmt(r['softmax_fwdbwd_ms']):>8} {fmt(r['softmax_over_sdpa'], 2):>6}"
              f" {fmt(r['lssa_fwdbwd_ms']):>8} {fmt(r['lssa_over_sdpa'], 2):>6} {fmt(r['lssar_fwdbwd_ms']):>8} {fmt(r['lssar_over_sdpa'], 2):>6} {pl:>18}"
              f" {fl['lssa']:>10} {fl['lssar']:>10}")
    fc = (flex or {}).get("flex_check") or {}
    if fc:
        print("  FlexAttention (scripts/flex_attn_torch.py, compiled) vs float64 reference, fp32, T=256: " +
              ("; ".join(f"{k} " + ", ".join(f"{a} {b:.1e}" for a, b in v["rel_err"].items()) for k, v in fc.items() if "rel_err" in v)
               or str(fc.get("error"))[:120]))
if train_rows:
    print("\n  GPT-2 124M training step, B=16 T=1024, bf16 (forward + backward + clip + AdamW):")
    print(f"  {'':<22} {'ms/step':>8} {'tokens/s':>10} {'MFU':>6} {'peak GiB':>9} {'compile s':>9}")
    for r in train_rows:
        if r.get("status", "ok") != "ok":
            print(f"  {r['who']:<22} {r.get('status', '').upper()}: {(r.get('reason') or '')[:90]}")
            continue
        print(f"  {r['who']:<22} {fmt(r['ms_per_step'], 1):>8} {fmt(r['tokens_per_s'], 0):>10} {fmt(r['mfu']):>6} {fmt(r['peak_gib'], 1):>9} {fmt(r.get('compile_s'), 1):>9}")
if ev:
    print(f"\n  lssar eval at T={ev['seq']} ({ev['attn']}, 124M RoPE): {fmt(ev['seconds'], 2)} s, peak {fmt(ev['held_peak_gib'], 2)} GiB held by the model, "
          f"{fmt(ev['device_used_peak_gib'], 2)} GiB in use on the device")
if goals:
    print(f"\n  goals: {out['goals_met']} met, {out['goals_missed']} missed, {out['goals_not_measured']} not measured (of {out['goals_total']})")
    for g in goals:
        tag = "NOT MEASURED" if g["met"] is None else "met" if g["met"] else "MISSED"
        extra = f", ratio {g['ratio']:.2f}" if g.get("ratio") is not None else (f", {g['why']}" if g.get("why") else "")
        if g.get("tokens_per_s") is not None:
            extra += f", {g['tokens_per_s']:.0f} tok/s" + (f", MFU {g['mfu']:.3f}" if g.get("mfu") is not None else "")
            if g.get("torch_compile_tokens_per_s"):
                extra += f" vs torch.compile {g['torch_compile_tokens_per_s']:.0f} tok/s" + (f", MFU {g['torch_mfu']:.3f}" if g.get("torch_mfu") is not None else "")
        print(f"    {tag:<12} {g['goal']} (T={g['T']}{extra})")
why = [f"{s['step']} {s['status']}" for s in steps if s["status"] in ("failed", "timeout", "not_run", "none", "no_cuda", "impossible")]
skipped = [f"{s['step']}" for s in steps if s["status"] in ("skipped", "refused") and s["step"] != "build"]
print(f"\n  RESULT: {overall.upper()}" + (f" ({', '.join(why)})" if why else "") +
      (f"; not run or refused: {', '.join(skipped)}" if skipped else ""))
print(f"\n  written: {OUT}/gpu-check.json, {OUT}/gpu-check.log")
PYEOF
}

main 2>&1 | tee "$OUTDIR/gpu-check.log"
rc=${PIPESTATUS[0]}
rm -rf "$WORK"
exit "$rc"
