# dist_lib.sh - what the tests under mpirun share (sourced by tests/test_dist*.sh, which set
# suite=NAME first): the lssar binary ($LSSAR_BIN, else build/lssar) and its test build with the
# hooks of tests/hooks.c ($LSSAR_HOOKS_BIN, else tests/lssar-hooks beside it), the check counters and
# their summary line "NAME: N passed, M failed" (finish), a scratch folder $tmp removed at exit,
# Open MPI's settings for CI containers, and $MPI, the launch line for 2 ranks on 2 cores.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
LSSAR=$(realpath "${LSSAR_BIN:-build/lssar}")
HOOKS=$(realpath -m "${LSSAR_HOOKS_BIN:-$(dirname "$LSSAR")/tests/lssar-hooks}")
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; [ -n "$2" ] && printf '%s\n' "$2" | tail -8 | sed 's/^/    /'; }
check() { if [ "$1" -eq 0 ]; then ok "$2"; else bad "$2" "$3"; fi; }
finish() { echo "$suite: $pass passed, $fail failed"; [ $fail -eq 0 ]; exit $?; }
if [ ! -x "$LSSAR" ]; then echo "$suite: $LSSAR is not built"; bad "lssar is built"; finish; fi
if ! command -v mpirun >/dev/null || ! grep -q 'mpi=1' "$(dirname "$LSSAR")/build-flags" 2>/dev/null; then
  bad "mpirun and an MPI build (scripts/deps.sh installs Open MPI; make MPI=1)"; finish
fi
tmp=$(mktemp -d "/tmp/lssar_${suite}_XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# Open MPI as root (CI containers), without the single-copy mechanism containers forbid; the
# sanitizer build's LeakSanitizer would report Open MPI's own allocations at exit
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_rmaps_base_oversubscribe=1
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
MPI="timeout 120 mpirun -np 2 --oversubscribe -x ASAN_OPTIONS -x UBSAN_OPTIONS"
