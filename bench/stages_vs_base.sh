#!/bin/sh
# bench/stages_vs_base.sh [BASE] - the named attention kinds after attention became stages
# (issue 34) against BASE (default 7f1de41, main just before it), on the CPU, in one run:
#   1. bits: each preset (softmax, ssmax, lssa, lssar p = 15 and p = 3, sigmoid, relu) trains a
#      small model for 40 steps with this tree's lssar and with BASE's, from the same data and
#      seed; the trained tensors must be equal bit for bit (exit 1 otherwise);
#   2. speed: bench/attention (B = 1, H = 12, D = 64, fwd + bwd) of both, run alternately ROUNDS
#      times (default 5) per T (default 256 1024 4096) on THREADS threads (default 1): the median
#      ms per kind and the ratio this tree / BASE (1.00 = no change; compare repeated calls to see
#      the machine's noise).
set -eu
BASE=${1:-7f1de41}
TS=${TS:-256 1024 4096}
ROUNDS=${ROUNDS:-5}
THREADS=${THREADS:-1}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d)
trap 'git -C "$ROOT" worktree remove --force "$TMP/base" >/dev/null 2>&1 || true; rm -rf "$TMP"' EXIT
git -C "$ROOT" worktree add --detach "$TMP/base" "$BASE" >/dev/null 2>&1
echo "building $BASE and this tree (CPU) ..."
make -C "$TMP/base" --no-print-directory CUDA=0 build/lssar build/bench/attention >/dev/null
make -C "$ROOT" --no-print-directory CUDA=0 build/lssar build/bench/attention >/dev/null
NEW=$ROOT/build/lssar OLD=$TMP/base/build/lssar

echo "1. bits: 40 training steps per preset, tensors of this tree against $BASE"
"$NEW" data synth --tokens 20000 --alphabet 32 --out "$TMP/train.bin" >/dev/null 2>&1
bad=0
for spec in softmax: ssmax: lssa: lssar:15 lssar:3 sigmoid: relu:; do
    k=${spec%:*} p=${spec#*:}
    for side in old new; do
        bin=$OLD; [ $side = new ] && bin=$NEW
        OMP_NUM_THREADS=$THREADS "$bin" train --data "$TMP/train.bin" --layers 2 --heads 2 --dim 32 --seq 64 --batch 4 \
            --steps 40 --lr 3e-3 --attn "$k" ${p:+--p $p} --out "$TMP/$side-$k$p" --quiet --threads "$THREADS" >/dev/null
    done
    if python3 - "$TMP/old-$k$p/model.safetensors" "$TMP/new-$k$p/model.safetensors" <<'PY'
import json, struct, sys
def tensors(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; return b[8 + n:]
sys.exit(0 if tensors(sys.argv[1]) == tensors(sys.argv[2]) else 1)
PY
    then echo "   $k${p:+ p=$p}: identical"; else echo "   $k${p:+ p=$p}: DIFFERENT"; bad=1; fi
done

echo "2. speed: attention fwd+bwd, B=1 H=12 D=64, $THREADS thread(s), median of $ROUNDS alternating rounds"
echo "    T   kind       base_ms    this_ms  this/base"
for T in $TS; do
    for r in $(seq "$ROUNDS"); do
        # columns of bench/attention: T softmax_f softmax_fb ssmax_fb lssa_fb lssar_f lssar_fb ...
        OMP_NUM_THREADS=$THREADS "$TMP/base/build/bench/attention" "$T" | awk -v r=base 'NR > 2 {print r, $3, $4, $5, $7}'
        OMP_NUM_THREADS=$THREADS "$ROOT/build/bench/attention" "$T" | awk -v r=this 'NR > 2 {print r, $3, $4, $5, $7}'
    done > "$TMP/t$T"
    awk -v T="$T" '
        function median(a, n,   i, j, t) {
            for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
            return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
        }
        { n[$1]++; for (k = 1; k <= 4; k++) v[$1, k, n[$1]] = $(k + 1) }
        END {
            split("softmax ssmax lssa lssar", name, " ")
            for (k = 1; k <= 4; k++) {
                for (i = 1; i <= n["base"]; i++) b[i] = v["base", k, i]
                for (i = 1; i <= n["this"]; i++) c[i] = v["this", k, i]
                mb = median(b, n["base"]); mc = median(c, n["this"])
                printf "%5d   %-8s %9.2f  %9.2f  %8.3f\n", T, name[k], mb, mc, mc / mb
            }
        }' "$TMP/t$T"
done
exit $bad
