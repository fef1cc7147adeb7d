#!/usr/bin/env bash
# Recovery rate of the 10 public laws of docs/spec symreg.md over 10 seeds (default budget, 2 threads),
# and the time to recover Newton's law; then the node-evaluation rate. Long: minutes to an hour.
#   bash bench/symreg_recovery.sh [SEEDS] [BUILD]      e.g. bash bench/symreg_recovery.sh 10 build
# Pass extra options through the environment: NOISE=0.01 for 1% multiplicative noise.
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${1:-10}
build=${2:-build}
bin="$build/bench/symreg"
[ -x "$bin" ] || { echo "symreg_recovery: $bin not built; run: make BUILD=$build $bin" >&2; exit 2; }
extra=()
[ -n "${NOISE:-}" ] && extra=(--noise "$NOISE")
"$bin" eval --threads 2
"$bin" laws --seeds "$seeds" --threads 2 "${extra[@]}" | tee "$build/symreg_recovery.txt"
echo "per-seed lines in $build/symreg_recovery.txt"
