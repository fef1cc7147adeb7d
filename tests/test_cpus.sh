#!/usr/bin/env bash
# test_cpus.sh - the numeric tests on every code path the portable build ships. The portable
# library carries three clones of each hot loop (AVX-512, AVX2 + FMA, and the x86-64-v2 baseline
# without FMA) and the CPU picks one at load time, so the suite's native run checks only the
# clone of this machine. Here test_attention and test_layers of the portable build run again
# under qemu-user's CPU emulation as a Haswell (AVX2 + FMA, no AVX-512: the AVX2 clone) and as a
# Nehalem (SSE4.2 only: the baseline clone), each against its float64 references with the
# tolerances the tests derive from float32 error bounds. The T = 16384 row tests are left out
# under emulation (tens of seconds there); the native run covers them.
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; [ -n "${2:-}" ] && printf '%s\n' "$2" | grep -E 'FAIL|rror' | head -10 | sed 's/^/    /'; }
finish() { echo "test_cpus: $pass passed, $fail failed"; [ $fail -eq 0 ]; exit $?; }

if ! grep -q 'x86-64-v2' "$BUILD/build-flags" 2>/dev/null; then
  echo "# $BUILD is not the portable build (NATIVE=1 has no clones): nothing to emulate here"
  ok "native build: no clones to check"; finish
fi
command -v qemu-x86_64 >/dev/null || { bad "qemu-x86_64 is installed (Debian qemu-user; scripts/deps.sh installs it)"; finish; }
skip=test_long_rows,test_long_rows_backward
for cpu in Haswell Nehalem; do
  for t in test_attention test_layers; do
    [ -x "$BUILD/tests/$t" ] || { bad "$t is built"; continue; }
    # OPENBLAS_CORETYPE tells OpenBLAS which CPU to assume; under emulation that is the emulated one.
    # (the limit only catches a hang: under TCG emulation the AVX2 clones of test_attention take
    # several minutes, and more on a loaded machine, where 900 s was seen to be too little)
    out=$(OPENBLAS_CORETYPE=$cpu OMP_NUM_THREADS=1 LSSAR_TEST_SKIP=$skip timeout 1800 \
          qemu-x86_64 -cpu "$cpu" "$BUILD/tests/$t" 2>&1); rc=$?
    line=$(grep -E "^$t: [0-9]+ passed, 0 failed" <<<"$out")
    [ $rc -eq 0 ] && [ -n "$line" ] && ok "$t on an emulated $cpu (${line#*: })" || bad "$t on an emulated $cpu (exit $rc)" "$out"
  done
done
finish
