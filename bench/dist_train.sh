#!/usr/bin/env bash
# bench/dist_train.sh - data-parallel scaling of `lssar train`: training tokens/s of a 4-layer
# width-256 model on 1 rank and on 2 ranks (mpirun, one thread each), in the same run, at the same
# global batch (1 rank: --batch B --accum 2; 2 ranks: --batch B --accum 1 each), with the time the
# 2-rank run spends in its gradient and parameter collectives (log.jsonl's comm_ms). The two runs
# are interleaved --reps times and the ratio is that of the medians of steady-state steps.
#
#   bench/dist_train.sh [--steps N] [--batch B] [--seq T] [--reps R] [--json FILE]
#   (defaults: 12 steps, B 8, T 256, 2 reps; the first 2 steps of every run are not counted)
#
# Goal (issue 15): 2 ranks >= 1.8 x the tokens/s of 1 rank. Binary: $LSSAR_BIN, else build/lssar.
set -euo pipefail
cd "$(dirname "$0")/.."
LSSAR=$(realpath "${LSSAR_BIN:-build/lssar}")
steps=12 batch=8 seq=256 reps=2 json=
while [ $# -gt 0 ]; do
  case "$1" in
  --steps) steps=$2; shift 2 ;;
  --batch) batch=$2; shift 2 ;;
  --seq) seq=$2; shift 2 ;;
  --reps) reps=$2; shift 2 ;;
  --json) json=$2; shift 2 ;;
  -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
  *) echo "dist_train.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
tmp=$(mktemp -d /tmp/lssar_dist_bench_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
"$LSSAR" data synth --tokens 400000 --alphabet 200 --out "$tmp/train.bin" >/dev/null 2>&1
F="--data $tmp/train.bin --layers 4 --heads 4 --dim 256 --vocab 256 --seq $seq --batch $batch --steps $steps --lr 1e-3 --threads 1 --quiet"
# steady-state numbers of a run: median tokens/s, median comm_ms, median ms per step
stats() {
  python3 - "$1" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1] + "/log.jsonl")]
rows = [r for r in rows if "loss" in r][2:]
print(statistics.median(r["tokens_per_s"] for r in rows), statistics.median(r.get("comm_ms", 0) for r in rows),
      statistics.median(r["ms"] for r in rows))
PY
}
one=() two=() comm=() ms2=()
for r in $(seq 1 "$reps"); do
  rm -rf "$tmp/one" "$tmp/two"
  "$LSSAR" train $F --accum 2 --out "$tmp/one"
  mpirun -np 2 --oversubscribe --bind-to core "$LSSAR" train $F --accum 1 --out "$tmp/two"
  read -r t1 _ _ < <(stats "$tmp/one"); read -r t2 c2 m2 < <(stats "$tmp/two")
  one+=("$t1"); two+=("$t2"); comm+=("$c2"); ms2+=("$m2")
  echo "rep $r: 1 rank $(printf '%.0f' "$t1") tok/s, 2 ranks $(printf '%.0f' "$t2") tok/s, 2-rank collectives $(printf '%.1f' "$c2") of $(printf '%.1f' "$m2") ms/step"
done
python3 - "$json" "${one[*]}" "${two[*]}" "${comm[*]}" "${ms2[*]}" "$batch" "$seq" "$(nproc)" <<'PY'
import json, statistics, sys
path, one, two, comm, ms = sys.argv[1], *[list(map(float, a.split())) for a in sys.argv[2:6]]
B, T, cores = map(int, sys.argv[6:9])
m1, m2, c, s = (statistics.median(x) for x in (one, two, comm, ms))
res = {"model": "4 layers, width 256, vocab 256", "global_batch_windows": 2 * B, "seq": T, "threads_per_rank": 1,
       "cores": cores, "tokens_per_s_1rank": m1, "tokens_per_s_2ranks": m2, "speedup": m2 / m1,
       "comm_ms_per_step_2ranks": c, "ms_per_step_2ranks": s, "comm_share": c / s, "goal_speedup": 1.8}
print(f"dist_train: 2 ranks / 1 rank = {m2 / m1:.2f}x ({m2:.0f} / {m1:.0f} tokens/s; goal 1.8x); "
      f"collectives {c:.1f} ms of {s:.1f} ms per step ({100 * c / s:.1f}%)")
if path:
    json.dump(res, open(path, "w"), indent=2)
PY
