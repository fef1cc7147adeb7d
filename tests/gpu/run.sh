#!/usr/bin/env bash
# tests/gpu/run.sh BIN - `make test-gpu`: run the GPU test program BIN (tests/gpu/test_gpu.c),
# then, when a GPU answered (BIN did not print SKIP) and compute-sanitizer is on PATH (or in
# $CUDA_HOME/bin), a quick-mode run (LSSAR_GPU_QUICK=1: small shapes only) under
# compute-sanitizer's memcheck and racecheck. GPU_SANITIZE=0 leaves the sanitizer runs out;
# GPU_SANITIZE_TIMEOUT (seconds, default 300) bounds each. The last line is the total,
# "test-gpu: N passed, M failed", where N and M are the program's checks plus one per sanitizer
# run (a sanitizer that refuses the device, as on gVisor runtimes, is reported and not counted).
# Exit 0 when nothing failed (or there is no GPU), 1 otherwise.
set -u
bin=${1:?usage: tests/gpu/run.sh BIN}
[ -x "$bin" ] || { echo "test-gpu: $bin is missing or not executable"; echo "test-gpu: 0 passed, 1 failed"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" 2>&1 | tee "$tmp/out"
rc=${PIPESTATUS[0]}
if grep -q '^SKIP:' "$tmp/out"; then
  [ "$rc" -eq 0 ] || { echo "test-gpu: the SKIP run exited $rc"; exit 1; }
  exit 0
fi
line=$(grep -E '^test_gpu: [0-9]+ passed, [0-9]+ failed' "$tmp/out" | tail -1)
if [ -z "$line" ]; then
  echo "test-gpu: $bin printed no summary (exit $rc): counted as 1 failed"
  pass=0; fail=1
else
  pass=$(sed -E 's/^test_gpu: ([0-9]+) passed.*/\1/' <<<"$line")
  fail=$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")
  if [ "$rc" -ne 0 ] && [ "$fail" -eq 0 ]; then fail=1; echo "test-gpu: exit $rc with no failed check: counted as 1 failed"; fi
fi

san=$(command -v compute-sanitizer || true)
[ -z "$san" ] && [ -x "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer" ] && san=${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer
if [ "${GPU_SANITIZE:-1}" = 0 ]; then
  echo "test-gpu: compute-sanitizer runs left out (GPU_SANITIZE=0)"
elif [ -z "$san" ]; then
  echo "test-gpu: compute-sanitizer runs skipped: compute-sanitizer is not on PATH (nor in \$CUDA_HOME/bin)"
else
  for tool in memcheck racecheck; do
    extra=()
    [ "$tool" = memcheck ] && extra=(--leak-check full)
    echo "== compute-sanitizer --tool $tool (quick mode)"
    env -u LSSAR_GPU_JSON LSSAR_GPU_QUICK=1 LSSAR_GPU_SKIP="${LSSAR_GPU_SKIP:-train}" timeout -k 10 "${GPU_SANITIZE_TIMEOUT:-300}" \
      "$san" --tool "$tool" "${extra[@]}" --error-exitcode 9 --print-limit 50 "$bin" >"$tmp/$tool" 2>&1
    src=$?
    grep -E '^========|^test_gpu:|^FAIL|^FATAL' "$tmp/$tool" | tail -40
    if grep -qiE 'device not supported|not supported on this|unable to (launch|initialize)|error 999' "$tmp/$tool" &&
       ! grep -q '^test_gpu:' "$tmp/$tool"; then
      echo "test-gpu: $tool: compute-sanitizer refused the device (not counted)"
    elif [ "$src" -eq 124 ] || [ "$src" -eq 137 ]; then
      echo "test-gpu: $tool: timed out after ${GPU_SANITIZE_TIMEOUT:-300} s: counted as 1 failed"; fail=$((fail + 1))
    elif [ "$src" -eq 0 ]; then
      echo "test-gpu: $tool: clean"; pass=$((pass + 1))
    else
      echo "test-gpu: $tool: errors reported (exit $src): counted as 1 failed"; fail=$((fail + 1))
    fi
  done
fi
echo "test-gpu: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
