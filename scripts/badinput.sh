#!/usr/bin/env bash
# badinput.sh - the long version of tests/test_badinput.sh: many more mutations per target, then
# (with --valgrind) a short memcheck pass. Usage:
#   bash scripts/badinput.sh [--n N] [--seed S] [--valgrind] [--keep DIR]     (LSSAR_BIN: the binary)
# Defaults: N = 1000 mutations per target (~40 targets, roughly 15-30 min on 2 cores), seed 1;
# --valgrind adds BADINPUT_VALGRIND=1 with BADINPUT_VG_N (default 12) mutations per target.
cd "$(dirname "$0")/.."
n=1000; seed=1; vg=0; keep=
while [ $# -gt 0 ]; do
  case $1 in
    --n) n=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --valgrind) vg=1; shift ;;
    --keep) keep=$2; shift 2 ;;
    *) echo "usage: bash scripts/badinput.sh [--n N] [--seed S] [--valgrind] [--keep DIR]" >&2; exit 2 ;;
  esac
done
rc=0
BADINPUT_N=$n BADINPUT_SEED=$seed BADINPUT_KEEP=$keep bash tests/test_badinput.sh || rc=1
if [ $vg = 1 ]; then
  BADINPUT_VALGRIND=1 BADINPUT_N=${BADINPUT_VG_N:-12} BADINPUT_SEED=$seed BADINPUT_KEEP=$keep bash tests/test_badinput.sh || rc=1
fi
exit $rc
