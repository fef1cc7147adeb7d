#!/usr/bin/env bash
# bench/dispatch_layers.sh - does the portable build lose speed against a native one?
# Builds the library three ways and times the elementwise layers (bench/layers.c) and
# symbolic-regression evaluation (bench/symreg eval) of each, on one thread, interleaved so that
# all three see the same machine load:
#   noclones  -O3 -march=x86-64-v2 -DLSSAR_NATIVE  (baseline only: LSSAR_HOT is empty)
#   portable  -O3 -march=x86-64-v2                 (the default build: AVX2 / AVX-512 clones)
#   native    make NATIVE=1                        (-march=native)
# Usage: bench/dispatch_layers.sh [PREFIX [ROUNDS]]  (build dirs PREFIX-noclones etc.; default
# build-dispatch, 3 rounds). Prints each run, then the best time of every layer per build.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${1:-build-dispatch}
rounds=${2:-3}
jobs=${JOBS:-2}
make -s BUILD="$prefix-noclones" OPT="-O3 -march=x86-64-v2 -mtune=generic -DLSSAR_NATIVE" -j"$jobs" \
    "$prefix-noclones/bench/layers" "$prefix-noclones/bench/symreg" >/dev/null
make -s BUILD="$prefix-portable" -j"$jobs" "$prefix-portable/bench/layers" "$prefix-portable/bench/symreg" >/dev/null
make -s NATIVE=1 BUILD="$prefix-native" -j"$jobs" "$prefix-native/bench/layers" "$prefix-native/bench/symreg" >/dev/null
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for r in $(seq "$rounds"); do
  for b in noclones portable native; do
    OMP_NUM_THREADS=1 "$prefix-$b/bench/layers" --reps 10 | sed "s/^/$b | /" | tee -a "$out"
    OMP_NUM_THREADS=1 "$prefix-$b/bench/symreg" eval --threads 1 | sed "s/^/$b | /" | tee -a "$out"
  done
done
echo
echo "best of $rounds rounds, OMP_NUM_THREADS=1 (layers: ms per forward+backward; symreg: node-evals/s)"
python3 - "$out" <<'EOF'
import re, sys
best = {}
order = []
for line in open(sys.argv[1]):
    b, rest = line.split(' | ', 1)
    m = re.match(r'(.*?)\s+([0-9.]+) ms', rest)
    if m: key, val, lower = m.group(1).strip(), float(m.group(2)), True
    else:
        m = re.match(r'eval (.*?)\s+1 threads: ([0-9.e+]+) node-evals/s', rest)
        if not m: continue
        key, val, lower = 'symreg ' + m.group(1).split(' (')[0], float(m.group(2)), False
    if key not in order: order.append(key)
    k = (key, b)
    best[k] = val if k not in best else (min(best[k], val) if lower else max(best[k], val))
print(f"{'':34s} {'noclones':>10s} {'portable':>10s} {'native':>10s} {'port/nocl':>9s} {'port/nat':>9s}")
for key in order:
    v = [best.get((key, b), float('nan')) for b in ('noclones', 'portable', 'native')]
    lower = not key.startswith('symreg')
    # speed ratios (>1: the first is faster)
    r1 = v[0] / v[1] if lower else v[1] / v[0]
    r2 = v[2] / v[1] if lower else v[1] / v[2]
    fmt = (lambda x: f"{x:10.3f}") if lower else (lambda x: f"{x:10.3g}")
    print(f"{key:34s} {fmt(v[0])} {fmt(v[1])} {fmt(v[2])} {r1:9.2f} {r2:9.2f}")
print("port/nocl: speed of the portable build over the no-clone one; port/nat: over the native one")
EOF
