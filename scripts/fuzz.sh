#!/usr/bin/env bash
# fuzz.sh - run lssar's libFuzzer targets (tests/fuzz/fuzz_NAME.c, built by `make fuzz-build` into
# build-fuzz/) and fail if any of them crashes, leaks, runs out of memory or times out.
#
#   scripts/fuzz.sh [--build DIR] [--seconds N] [--runs N] [--jobs J] [--keep] [--] [NAME...]
#
#   --seconds N  fuzz each target for N seconds (30); --runs N: stop a target after N executions
#                instead, whichever comes first (0: no limit)
#   --jobs J     run J targets at a time (1)
#   --keep       keep growing DIR/fuzz-work/NAME across runs (default: start each run from a fresh
#                copy of the seed corpus tests/fuzz/corpus/NAME)
#   --timeout S  one input taking longer than S seconds is a hang (10)
#   NAME...      only these targets (default: every DIR/fuzz_* built)
#
# Each target runs with its dictionary tests/fuzz/NAME.dict when there is one, under ASan, LSan and
# UBSan, with -rss_limit_mb=2048 -malloc_limit_mb=512 (so a header that makes the parser ask for
# gigabytes from a small file is a failure). Crash inputs go to DIR/fuzz-artifacts/NAME/, logs to
# DIR/fuzz-logs/NAME.log; replay one with `DIR/fuzz_NAME FILE`. The last lines are a table:
# target, executions, coverage (libFuzzer's cov:), features, corpus size, result.
# The GPT-2 tokenizer target reads data/gpt2 (scripts/fetch-gpt2.sh); without it, it fuzzes only
# the byte tokenizer and says so.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=build-fuzz SECONDS_EACH=30 RUNS=0 JOBS=1 KEEP=0 TIMEOUT=10
names=()
while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --seconds) SECONDS_EACH=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    --) shift; names+=("$@"); break ;;
    -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) names+=("$1"); shift ;;
  esac
done
if [ ${#names[@]} -eq 0 ]; then
  for b in "$BUILD"/fuzz_*; do
    [ -x "$b" ] && [ -f "$b" ] && case $b in *.d) ;; *) names+=("${b##*/fuzz_}") ;; esac
  done
fi
[ ${#names[@]} -gt 0 ] || { echo "fuzz.sh: no fuzz targets in $BUILD: run \`make fuzz-build\` first" >&2; exit 2; }
for n in "${names[@]}"; do
  [ -x "$BUILD/fuzz_$n" ] || { echo "fuzz.sh: $BUILD/fuzz_$n is missing: run \`make fuzz-build\`" >&2; exit 2; }
done
mkdir -p "$BUILD/fuzz-logs" "$BUILD/fuzz-artifacts" "$BUILD/fuzz-work"
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1:abort_on_error=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

run_one() {  # NAME: fuzz it; the log's last "#N DONE/pulse" line gives the figures
  local n=$1 work="$BUILD/fuzz-work/$n" art="$BUILD/fuzz-artifacts/$n/" log="$BUILD/fuzz-logs/$n.log"
  if [ $KEEP -eq 0 ]; then rm -rf "$work"; fi
  mkdir -p "$work" "$art"
  [ -d "tests/fuzz/corpus/$n" ] && cp -n tests/fuzz/corpus/"$n"/* "$work"/ 2>/dev/null
  local dict=() extra=()
  [ -f "tests/fuzz/$n.dict" ] && dict=(-dict="tests/fuzz/$n.dict")
  [ "$RUNS" -gt 0 ] && extra=(-runs="$RUNS")
  "$BUILD/fuzz_$n" -max_total_time="$SECONDS_EACH" "${extra[@]}" "${dict[@]}" \
      -rss_limit_mb=2048 -malloc_limit_mb=512 -timeout="$TIMEOUT" -max_len=65536 \
      -print_final_stats=1 -artifact_prefix="$art" "$work" >"$log" 2>&1
  echo $? >"$log.rc"
}

pids=()
for n in "${names[@]}"; do
  echo "fuzz.sh: fuzzing $n for ${SECONDS_EACH}s$([ "$RUNS" -gt 0 ] && echo " / at most $RUNS runs") (log $BUILD/fuzz-logs/$n.log)"
  run_one "$n" &
  pids+=($!)
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
done
wait

status=0
printf '%-12s %12s %8s %8s %8s  %s\n' target execs cov ft corpus result
for n in "${names[@]}"; do
  log="$BUILD/fuzz-logs/$n.log" rc=$(cat "$log.rc" 2>/dev/null || echo 99)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+' "$log" | grep -E 'cov: ' | tail -1)
  cov=$(sed -nE 's/.*cov: ([0-9]+).*/\1/p' <<<"$last")
  ft=$(sed -nE 's/.*ft: ([0-9]+).*/\1/p' <<<"$last")
  corp=$(sed -nE 's/.*corp: ([0-9]+\/[0-9]+[a-zA-Z]*).*/\1/p' <<<"$last")
  if [ "$rc" -eq 0 ]; then res=ok
  else
    status=1
    why=$(grep -m1 -oE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)[^(]*|runtime error:.*|SUMMARY: [A-Za-z]+: [a-z-]+' "$log" | head -1)
    res="FAILED (exit $rc${why:+: $why}); input in $BUILD/fuzz-artifacts/$n/, log $log"
  fi
  printf '%-12s %12s %8s %8s %8s  %s\n' "$n" "${execs:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$res"
done
[ $status -eq 0 ] && echo "fuzz.sh: all ${#names[@]} targets ran clean" || echo "fuzz.sh: some targets failed (see above)"
exit $status
