#!/bin/sh
# bench/dispatch.sh - what the runtime CPU dispatch (src/core/dispatch.h) buys the attention
# kernels: bench/attention built four ways and run interleaved in the same script, so the ratios
# are comparable on a shared machine.
#
#   noclones  -O3 -march=x86-64-v2 -DLSSAR_NATIVE   the portable baseline without clones (old style)
#   clones    the default portable build            x86-64-v2 + AVX2/AVX-512 clones picked at load time
#   v3        -O3 -march=x86-64-v3 -DLSSAR_NATIVE   AVX2 + FMA only: what an AVX2-only CPU (Zen 1)
#                                                   runs; emulates one on an AVX-512 machine
#   native    make NATIVE=1                         -march=native, no clones
#
#   bench/dispatch.sh [--test] [--reps N] [--prefix DIR] [T ...]     (default T = 256 1024 4096, N = 2)
#
# --test also builds and runs tests/test_attention in each configuration: the noclones, v3 and
# native builds compile the same source as the default, AVX2 and AVX-512 clones, so this checks
# the accuracy of every clone on one machine. Runs with OMP_NUM_THREADS=1 (override by setting
# it). Set OPENBLAS_CORETYPE=Haswell to make OpenBLAS use its AVX2 sgemm as well, for a closer
# AVX2-machine emulation (this applies to all four configurations).
set -eu
cd "$(dirname "$0")/.."
reps=2 test=0 prefix=build-dispatch
while [ $# -gt 0 ]; do
    case "$1" in
    --test) test=1; shift ;;
    --reps) reps=$2; shift 2 ;;
    --prefix) prefix=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    -*) echo "dispatch.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
    esac
done
Ts=${*:-256 1024 4096}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
jobs=${JOBS:-2}
configs="noclones clones v3 native"

build() {  # build <config> <target...>
    c=$1; shift
    b=$prefix-$c
    t=""
    for x in "$@"; do t="$t $b/$x"; done
    case $c in
    noclones) make -s BUILD="$b" OPT="-O3 -march=x86-64-v2 -mtune=generic -DLSSAR_NATIVE" -j"$jobs" $t ;;
    clones) make -s BUILD="$b" -j"$jobs" $t ;;
    v3) make -s BUILD="$b" OPT="-O3 -march=x86-64-v3 -DLSSAR_NATIVE" -j"$jobs" $t ;;
    native) make -s NATIVE=1 BUILD="$b" -j"$jobs" $t ;;
    esac
}

targets=bench/attention
[ $test = 1 ] && targets="$targets tests/test_attention"
for c in $configs; do
    echo "building $c ($prefix-$c)" >&2
    build $c $targets >/dev/null
done

if [ $test = 1 ]; then
    for c in $configs; do
        printf '%-9s ' "$c"
        if "$prefix-$c/tests/test_attention" >"$prefix-$c/test_attention.log" 2>&1; then
            tail -n 1 "$prefix-$c/test_attention.log"
        else
            echo "FAILED (see $prefix-$c/test_attention.log)"; grep FAIL "$prefix-$c/test_attention.log" | head -5
        fi
    done
fi

raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
r=1
while [ $r -le "$reps" ]; do
    for c in $configs; do  # interleaved, so drift hits every configuration alike
        echo "run $r/$reps: $c" >&2
        # columns of bench/attention: T softmax_f softmax_fb ssmax_fb lssa_fb lssar_f lssar_fb ratio ...
        "$prefix-$c/bench/attention" $Ts | awk -v c="$c" '$1 ~ /^[0-9]+$/ { print c, $1, $3, $7, $8 }' >>"$raw"
    done
    r=$((r + 1))
done

echo "attention fwd+bwd, B=1 H=12 D=64, OMP_NUM_THREADS=$OMP_NUM_THREADS, median of $reps runs (ms);"
echo "x_noclones: time of the noclones build / this build (higher = faster)"
awk -v configs="$configs" -v Ts="$Ts" '
function med(key,   n, i, j, t, v) {
    n = cnt[key]
    for (i = 1; i <= n; i++) v[i] = val[key, i]
    for (i = 2; i <= n; i++) { t = v[i]; for (j = i - 1; j >= 1 && v[j] > t; j--) v[j + 1] = v[j]; v[j + 1] = t }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
{ for (f = 3; f <= 5; f++) { k = $1 SUBSEP $2 SUBSEP f; val[k, ++cnt[k]] = $f } }
END {
    nc = split(configs, C, " "); nt = split(Ts, TT, " ")
    printf "%-9s %6s %11s %11s %13s %11s %11s\n", "build", "T", "softmax_fb", "lssar_fb", "lssar/softmax", "x_noclones", "x_noclones"
    printf "%-9s %6s %11s %11s %13s %11s %11s\n", "", "", "", "", "", "(softmax)", "(lssar)"
    for (t = 1; t <= nt; t++) {
        s0 = med("noclones" SUBSEP TT[t] SUBSEP 3); l0 = med("noclones" SUBSEP TT[t] SUBSEP 4)
        for (i = 1; i <= nc; i++) {
            s = med(C[i] SUBSEP TT[t] SUBSEP 3); l = med(C[i] SUBSEP TT[t] SUBSEP 4)
            rr = med(C[i] SUBSEP TT[t] SUBSEP 5)
            printf "%-9s %6d %11.2f %11.2f %13.2f %11.2f %11.2f\n", C[i], TT[t], s, l, rr, s0 / s, l0 / l
        }
    }
}' "$raw"
