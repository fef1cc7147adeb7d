#!/usr/bin/env bash
# test_cpus.sh - the numeric tests on every code path the portable build ships. The portable
# library carries three clones of each hot loop (AVX-512, AVX2 + FMA, and the x86-64-v2 baseline
# without FMA) and the CPU picks one at load time, so the suite's native run checks only the
# clone of this machine. Here test_attention and test_layers of the portable build run again
# under qemu-user's CPU emulation as a Haswell (AVX2 + FMA, no AVX-512: the AVX2 clone) and as a
# Nehalem (SSE4.2 only: the baseline clone), each against its float64 references with the
# tolerances the tests derive from float32 error bounds. Under TCG emulation AVX2 code runs about
# 500 times slower than natively, so test_attention runs only the tests that reach every clone's
# vector body and tail at small sizes (odd head dims 1, 3, 24 and lengths around the 64-row block,
# every kind, forward and backward, non-finite inputs, plus the finite differences): the random and
# adversarial grids, the other powers, the temperature-D grid, the thread-count check and the
# T = 16384 rows (together 15+ minutes there) run in the native suite, on the same loops.
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
skip=test_long_rows,test_long_rows_backward,test_long_rows_unnormed,test_matches_reference_random,test_matches_reference_adversarial,test_lssar_powers,test_thread_determinism,test_temp_d
# Five runs, two at a time (each qemu runs one thread), longest first: Haswell's test_attention in
# two parts (its non-finite inputs, every kind on every path, take as long as the rest).
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
runs=("Haswell test_attention test_nonfinite" "Haswell test_attention -test_nonfinite"
      "Nehalem test_attention" "Haswell test_layers" "Nehalem test_layers")
run_one() {  # i: runs[i] = cpu, program[, only these tests | -not this one]; output and exit status into $tmp
  local cpu t sel; read -r cpu t sel <<<"${runs[$1]}"
  local only="" skp=$skip
  case $sel in -*) skp=$skp,${sel#-} ;; ?*) only=$sel ;; esac
  [ -x "$BUILD/tests/$t" ] || { echo 127 > "$tmp/$1.rc"; return; }
  # OPENBLAS_CORETYPE tells OpenBLAS which CPU to assume; under emulation that is the emulated one.
  # (the limit only catches a hang: the longest run takes a few minutes)
  OPENBLAS_CORETYPE=$cpu OMP_NUM_THREADS=1 LSSAR_TEST_SKIP=$skp LSSAR_TEST_ONLY=$only timeout 900 \
    qemu-x86_64 -cpu "$cpu" "$BUILD/tests/$t" > "$tmp/$1.out" 2>&1
  echo $? > "$tmp/$1.rc"
}
for i in "${!runs[@]}"; do
  [ "$(jobs -rp | wc -l)" -lt 2 ] || wait -n
  run_one "$i" &
done
wait
for i in "${!runs[@]}"; do
  read -r cpu t sel <<<"${runs[$i]}"
  what="$t${sel:+ ($sel)} on an emulated $cpu"
  rc=$(cat "$tmp/$i.rc"); out=$(cat "$tmp/$i.out" 2>/dev/null)
  [ "$rc" != 127 ] || { bad "$t is built"; continue; }
  line=$(grep -E "^$t: [0-9]+ passed, 0 failed" <<<"$out")
  [ "$rc" -eq 0 ] && [ -n "$line" ] && ok "$what (${line#*: })" || bad "$what (exit $rc)" "$out"
done
finish
