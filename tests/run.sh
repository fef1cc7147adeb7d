#!/usr/bin/env bash
# Run every test program ($BUILD/tests/test_*), Python reference test (tests/test_*.py) and shell
# test (tests/test_*.sh) against the build in $BUILD (default build/; `make test NATIVE=1` passes
# build-native), then print the total as "N passed, M failed". A program that crashes or prints
# no summary counts as one failed test.
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export BUILD LSSAR_BUILD="$BUILD" LSSAR_BIN="${LSSAR_BIN:-$BUILD/lssar}"
# A sanitizer build (`make test SANITIZE=1`, build-flags records -fsanitize): any ASan, LSan or UBSan
# report ends the program with a non-zero exit, so the suite (and a shell test expecting exit 1 or
# 2 on bad input) fails on it. SANITIZE=1 also reaches the `make install` in test_install.sh, so it
# does not rebuild this directory without the sanitizers when run.sh is started by hand. LeakSanitizer
# needs no suppressions: libgomp's thread pool is still reachable at exit, so it is not reported.
sanitized=
long_searches=test_noise,test_public_laws  # symbolic regression's two long searches (test_symreg)
if grep -q -- '-fsanitize=' "$BUILD/build-flags" 2>/dev/null; then
  sanitized=1
  export SANITIZE=1
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:halt_on_error=1:strict_string_checks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
  # Under ASan the two long symbolic-regression searches (minutes each at -O2 with shadow memory)
  # would take most of CI's time; they run in both normal builds, and the sanitizer still runs
  # whole searches through test_determinism. So do the attention tests at T = 1024 to 16384
  # (test_flash's fp32_long and long_rows*, test_attention's long_rows*): the sanitizer still sees
  # every tile edge, the diagonal and the multi-tile rows at T up to a few hundred. The
  # thread-count reruns below test determinism, not memory, and are left to the normal builds too.
  export LSSAR_TEST_SKIP="$long_searches,test_fp32_long,test_long_rows,test_long_rows_backward,test_long_rows_unnormed${LSSAR_TEST_SKIP:+,$LSSAR_TEST_SKIP}"
fi
# The NATIVE=1 build (build-flags records -march=native) differs from the portable one only in how
# the C source is compiled (FMA contraction and vector code everywhere, not only in the hot loops'
# clones), so it runs the numerics that this moves: the attention, layer and CUDA-emulation test
# programs and the PyTorch parity test. The rest (the model, trainer and CLI flows, the host
# harnesses, whose kernel object is the same in every build) runs in the portable build, what
# `make install` ships, and under the sanitizers.
native=
grep -q -- '-march=native' "$BUILD/build-flags" 2>/dev/null && native=1
native_tests=" test_attention test_flash test_flash_decode test_layers test_cuda_emu test_torch_parity.py "
# Under the sanitizers two long end-to-end shell tests run in the normal builds only:
# test_tokenizer_parity (the tokenizer against tiktoken on a corpus: minutes under ASan; the
# tokenizer's memory is test_tokenizer's and two fuzz targets') and test_reproduce (a plan of
# lssar commands that test_cli, test_recipe and test_badinput run under the sanitizers one by one).
sanitize_skip=" test_tokenizer_parity.sh test_reproduce.sh "
# LSSAR_TEST_ALL=1: every test program and script in every build
if [ "${LSSAR_TEST_ALL:-0}" = 1 ]; then native=; sanitize_skip=" "; fi
wanted() {  # test file name: whether this build runs it
  if [ -n "$native" ]; then [[ $native_tests == *" $1 "* ]]; return; fi
  [ -z "$sanitized" ] || [[ $sanitize_skip != *" $1 "* ]]
}
pass=0; fail=0; failed_suites=()
run_suite() {  # name, command...
  local name=$1; shift
  local out rc start=$SECONDS
  out=$("$@" 2>&1); rc=$?
  local line; line=$(printf '%s\n' "$out" | grep -E '^[A-Za-z0-9_.-]+: [0-9]+ passed, [0-9]+ failed' | tail -1)
  if [ -z "$line" ]; then
    printf '%s\n' "$out" | tail -30
    echo "$name: no summary (exit $rc) - counted as 1 failed"
    fail=$((fail + 1)); failed_suites+=("$name"); return
  fi
  local p f; p=$(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"$line"); f=$(sed -E 's/.*passed, ([0-9]+) failed.*/\1/' <<<"$line")
  if [ "$f" -gt 0 ] || [ "$rc" -ne 0 ]; then
    printf '%s\n' "$out" | grep -E 'FAIL|not ok|Error|error' | head -40
    [ "$f" -eq 0 ] && f=1
    failed_suites+=("$name")
  fi
  pass=$((pass + p)); fail=$((fail + f))
  echo "$line  [$((SECONDS - start))s]"
}
echo "== test suite on $BUILD ($(sed -n 's/^opt=//p' "$BUILD/build-flags" 2>/dev/null || echo "flags unknown"))"
for t in "$BUILD"/tests/test_*; do
  [ -x "$t" ] || continue
  wanted "$(basename "$t")" || continue
  run_suite "$(basename "$t")" "$t"
done
for t in tests/test_*.py; do
  [ -f "$t" ] || continue
  wanted "$(basename "$t")" || continue
  run_suite "$(basename "$t")" /usr/bin/python3 "$t"
done
for t in tests/test_*.sh; do
  [ -f "$t" ] || continue
  wanted "$(basename "$t")" || continue
  run_suite "$(basename "$t")" bash "$t"
done
# The GPU test program (tests/gpu/test_gpu.c, `make test-gpu`): built in every build so that CI
# compiles and links it; on a machine without a GPU (or in a CUDA=0 build) it prints one SKIP
# line, shown here and not counted.
if [ -x "$BUILD/tests/gpu/test_gpu" ]; then
  out=$(LSSAR_GPU_QUICK=1 "$BUILD/tests/gpu/test_gpu" 2>&1); rc=$?
  if [ $rc -eq 0 ] && skip=$(grep -m1 '^SKIP:' <<<"$out"); then echo "test_gpu: $skip"
  else run_suite test_gpu env LSSAR_GPU_QUICK=1 "$BUILD/tests/gpu/test_gpu"; fi
fi
# The determinism tests compare 1 and 2 threads inside the program; run them once more with
# OpenMP's default team forced to 1 and to 2 threads, so neither setting goes untested.
for n in 1 2; do
  [ -n "$sanitized" ] || [ -n "$native" ] && break
  for t in test_train test_model test_symreg test_orbits; do
    [ -x "$BUILD/tests/$t" ] || continue
    # symbolic regression's two long searches set their thread count themselves: not rerun
    run_suite "$t(OMP_NUM_THREADS=$n)" env OMP_NUM_THREADS=$n \
      LSSAR_TEST_SKIP="$long_searches${LSSAR_TEST_SKIP:+,$LSSAR_TEST_SKIP}" "$BUILD/tests/$t"
  done
done
[ ${#failed_suites[@]} -gt 0 ] && echo "failed suites: ${failed_suites[*]}"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
