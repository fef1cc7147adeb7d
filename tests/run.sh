#!/usr/bin/env bash
# Run every test program (build/tests/test_*) and Python reference test (tests/test_*.py),
# then print the total as "N passed, M failed". A program that crashes or prints no summary
# counts as one failed test.
cd "$(dirname "$0")/.."
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
for t in build/tests/test_*; do
  [ -x "$t" ] || continue
  run_suite "$(basename "$t")" "$t"
done
for t in tests/test_*.py; do
  [ -f "$t" ] || continue
  run_suite "$(basename "$t")" /usr/bin/python3 "$t"
done
for t in tests/test_*.sh; do
  [ -f "$t" ] || continue
  run_suite "$(basename "$t")" bash "$t"
done
[ ${#failed_suites[@]} -gt 0 ] && echo "failed suites: ${failed_suites[*]}"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
