#!/usr/bin/env bash
# bench/seam.sh - same-run before/after benchmark for a refactor: the training step and evaluation
# of a baseline revision and of the working tree (or a second revision), timed alternately in the
# same run so that load drifts on a shared machine hit both alike. Pass: every metric's median
# within --threshold percent (default 3) of the baseline's.
#
#   bench/seam.sh [--base-rev REV] [--new-rev REV] [--rounds N] [--threads N] [--quick]
#                 [--json FILE] [--workdir DIR] [--threshold PCT] [--repeats N]
#                 [--eval-seq LIST] [--eval-tokens N] [--eval-vocab N] [--jobs N] [--repo DIR]
#
#   --base-rev REV   baseline revision (default 2f15bfd, the commit before the refactor); exported
#                    with `git archive` into WORKDIR/base-SHA12 and built there with `make -j2`
#   --new-rev REV    build and time this revision instead of the working tree (same way as the
#                    baseline, in WORKDIR/new-SHA12); `--new-rev 2f15bfd` checks the script itself
#                    (the baseline built twice: ratios come out near 1.00). Default: the working
#                    tree of --repo, built with `make BUILD=WORKDIR/new-worktree` (nothing is
#                    written into the repository but the --json file)
#   --rounds N       rounds (default 5; --quick 3). Round r runs base then new (r odd) or new then
#                    base (r even) for each metric, so a linear drift cancels out of the medians
#   --threads N      CPU threads for every timed command (default 1: steadier on a shared machine;
#                    0 = all cores, as lssar's own default)
#   --quick          tiny shapes, 3 rounds: checks the script works (a minute or two), times nothing real
#   --json FILE      raw per-round times and the summary (default bench/seam.json in --repo)
#   --workdir DIR    exports, builds, model and shard (default /tmp/seam)
#   --threshold PCT  allowed slowdown of the median, in percent (default 3)
#   --repeats N      timed steps per `lssar bench` run (default 3; --quick 20); each bench run
#                    reports the median of its own steps after a warm-up step
#   --eval-seq LIST  context lengths of the evaluation, comma-separated (default 256,1024; --quick 64,256)
#   --eval-tokens N  tokens evaluated per length and run (default 16384; --quick 8192)
#   --eval-vocab N   vocabulary of the evaluation model (default 257, byte-level as in the demo; 50257
#                    makes the output layer dominate the evaluation time)
#   --jobs N         make -jN (default 2)
#   --repo DIR       the git repository (default: the one holding this script)
#
# Metrics (lower is better):
#   train L.. C.. (ms/step)  `lssar bench --no-attn`: a full training step (forward, backward, clip,
#                            AdamW) at B=4 T=256 vocab 50304, at 12 layers x 768 and 4 layers x 256
#                            (the main figure; --quick: bench's tiny shapes). Both shapes always run:
#                            `lssar bench` has no flag to pick one
#   eval T=.. (s)            wall time of `lssar eval --seq T` (forward-only loss over whole windows,
#                            model load included) on one model and shard made with the baseline
#                            binary: a random-initialised 4-layer width-256 lssar model (2 training
#                            steps of `lssar train` on a `lssar data synth` shard; --quick: 2 layers x 64)
# Both binaries must give the same eval loss on the same model; the report says whether they do.
# Uses only flags that exist in the baseline. Needs git, make, a C toolchain (make deps) and python3.
# Exit status: 0 every metric within the threshold, 1 some metric slower, 2 bad usage, 3 a build or
# run failed.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "seam.sh: $*" >&2; exit 3; }
bad() { echo "seam.sh: $* (see --help)" >&2; exit 2; }

repo=$(cd "$(dirname "$0")/.." && pwd)
base_rev=2f15bfd new_rev="" rounds="" threads=1 quick=0 json="" workdir=/tmp/seam threshold=3
repeats="" eval_seq="" eval_tokens="" eval_vocab=257 jobs=2
need() { [ $# -ge 2 ] || bad "$1 needs a value"; }
while [ $# -gt 0 ]; do
    case "$1" in
    --base-rev) need "$@"; base_rev=$2; shift 2 ;;
    --new-rev) need "$@"; new_rev=$2; shift 2 ;;
    --rounds) need "$@"; rounds=$2; shift 2 ;;
    --threads) need "$@"; threads=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --json) need "$@"; json=$2; shift 2 ;;
    --workdir) need "$@"; workdir=$2; shift 2 ;;
    --threshold) need "$@"; threshold=$2; shift 2 ;;
    --repeats) need "$@"; repeats=$2; shift 2 ;;
    --eval-seq) need "$@"; eval_seq=$2; shift 2 ;;
    --eval-tokens) need "$@"; eval_tokens=$2; shift 2 ;;
    --eval-vocab) need "$@"; eval_vocab=$2; shift 2 ;;
    --jobs) need "$@"; jobs=$2; shift 2 ;;
    --repo) need "$@"; repo=$(cd "$2" && pwd) || bad "--repo $2 is not a folder"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) bad "unknown argument '$1'" ;;
    esac
done
if [ $quick = 1 ]; then
    : "${rounds:=3}" "${repeats:=20}" "${eval_seq:=64,256}" "${eval_tokens:=8192}"
    layers=2 dim=64 heads=2 train_seq=32
else
    : "${rounds:=5}" "${repeats:=3}" "${eval_seq:=256,1024}" "${eval_tokens:=16384}"
    layers=4 dim=256 heads=4 train_seq=256
fi
: "${json:=$repo/bench/seam.json}"
isint() { case "$1" in ''|*[!0-9]*) return 1 ;; esac; }
for v in rounds threads repeats eval_tokens eval_vocab jobs; do
    isint "${!v}" || bad "--${v//_/-} must be a whole number, not '${!v}'"
done
[ "$rounds" -ge 1 ] || bad "--rounds must be >= 1"
[ "$repeats" -ge 1 ] || bad "--repeats must be >= 1"
[ "$eval_vocab" -ge 33 ] || bad "--eval-vocab must be >= 33 (the synthetic shard uses ids 0..32)"
case "$threshold" in ''|*[!0-9.]*) bad "--threshold must be a number of percent, not '$threshold'" ;; esac
IFS=, read -r -a Ts <<<"$eval_seq"
for T in "${Ts[@]}"; do
    if ! isint "$T" || [ "$T" -lt 2 ]; then bad "--eval-seq: '$T' is not a length"; fi
done
command -v python3 >/dev/null || die "python3 is needed for the statistics"
git -C "$repo" rev-parse --git-dir >/dev/null 2>&1 || die "$repo is not a git repository (--repo)"

# Build settings from the caller's environment would make the two builds differ from the default.
unset BUILD OPT NATIVE SANITIZE CFLAGS MAKEFLAGS
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
[ "$threads" = 0 ] && unset OMP_NUM_THREADS OPENBLAS_NUM_THREADS

mkdir -p "$workdir"
workdir=$(cd "$workdir" && pwd)
t_start=$EPOCHREALTIME
log() { printf '[%6.0fs] %s\n' "$(awk -v a="$t_start" -v b="$EPOCHREALTIME" 'BEGIN { print b - a }')" "$*" >&2; }

resolve() { git -C "$repo" rev-parse --verify --quiet "$1^{commit}" || die "'$1' is not a revision of $repo"; }

# export_build ROLE REV -> sets $bin to the built program (a fresh export each run, built in the
# copy; one copy per role, so `--new-rev` equal to the baseline still builds it twice).
export_build() {
    local sha dir
    sha=$(resolve "$2")
    dir=$workdir/$1-${sha:0:12}
    shift
    log "exporting $1 ($sha) to $dir"
    rm -rf "$dir"
    mkdir -p "$dir"
    git -C "$repo" archive "$sha" | tar -x -C "$dir" || die "git archive $1 failed"
    log "building $dir (make -j$jobs)"
    make -C "$dir" -j"$jobs" >"$dir.build.log" 2>&1 || { tail -n 30 "$dir.build.log" >&2; die "build of $1 failed (log: $dir.build.log)"; }
    bin=$dir/build/lssar
}

export_build base "$base_rev"
bin_base=$bin base_sha=$(resolve "$base_rev")
if [ -n "$new_rev" ]; then
    export_build new "$new_rev"
    bin_new=$bin new_sha=$(resolve "$new_rev") new_desc="revision $new_rev ($new_sha)"
else
    nb=$workdir/new-worktree
    new_sha=$(git -C "$repo" rev-parse HEAD)
    dirty=$(git -C "$repo" --no-optional-locks status --porcelain --untracked-files=no | wc -l)
    new_desc="working tree of $repo (HEAD $new_sha, $dirty modified tracked files)"
    log "building the working tree into $nb (make BUILD=$nb -j$jobs)"
    make -C "$repo" BUILD="$nb" -j"$jobs" >"$nb.build.log" 2>&1 || { tail -n 30 "$nb.build.log" >&2; die "build of the working tree failed (log: $nb.build.log)"; }
    bin_new=$nb/lssar
fi
for b in "$bin_base" "$bin_new"; do [ -x "$b" ] || die "the build did not produce $b"; done

# One model and one shard for both binaries, made with the baseline.
run_dir=$workdir/run
rm -rf "$run_dir"
mkdir -p "$run_dir"
maxT=0
for T in "${Ts[@]}"; do [ "$T" -gt "$maxT" ] && maxT=$T; done
shard_tokens=$(( (eval_tokens / 4 + 2) * 4 * 2 + 8 * (maxT + 1) + 200000 ))
shard=$run_dir/synth.bin model=$run_dir/model
log "making the shard ($shard_tokens tokens) and the model ($layers layers, width $dim, vocab $eval_vocab)"
"$bin_base" data synth --out "$shard" --tokens "$shard_tokens" --seed 1 >"$run_dir/synth.log" 2>&1 \
    || { cat "$run_dir/synth.log" >&2; die "lssar data synth failed"; }
"$bin_base" train --data "$shard" --out "$model" --vocab "$eval_vocab" --layers $layers --heads $heads \
    --dim $dim --seq $train_seq --batch 2 --steps 2 --threads "$threads" --quiet >"$run_dir/train.log" 2>&1 \
    || { cat "$run_dir/train.log" >&2; die "lssar train failed"; }

bench_flags=(bench --no-attn --repeats "$repeats" --threads "$threads")
[ $quick = 1 ] && bench_flags+=(--quick)
eval_flags() {  # eval_flags T: the windows of --eval-tokens tokens, 4 per batch
    local w=$(( (eval_tokens + $1 - 1) / $1 ))
    echo --seq "$1" --batch 4 --batches $(( (w + 3) / 4 )) --threads "$threads"
}

manifest=$run_dir/runs.tsv
: >"$manifest"
run_one() {  # run_one METRIC LABEL ROUND
    local m=$1 label=$2 r=$3 b out t0 t1
    if [ "$label" = base ]; then b=$bin_base; else b=$bin_new; fi
    out=$run_dir/$m-$label-r$r
    if [ "$m" = train ]; then
        "$b" "${bench_flags[@]}" --json "$out.json" >"$out.log" 2>&1 || { cat "$out.log" >&2; die "$label: lssar bench failed"; }
        printf 'train\t%s\t%s\t0\t%s\n' "$label" "$r" "$out.json" >>"$manifest"
    else
        t0=$EPOCHREALTIME
        # shellcheck disable=SC2046
        "$b" eval --model "$model" --data "$shard" $(eval_flags "${m#eval}") --json "$out.json" >"$out.log" 2>&1 \
            || { cat "$out.log" >&2; die "$label: lssar eval failed"; }
        t1=$EPOCHREALTIME
        printf '%s\t%s\t%s\t%s\t%s\n' "$m" "$label" "$r" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }')" "$out.json" >>"$manifest"
    fi
}

# Warm-up (page cache, first touch): one untimed eval with each binary.
for label in base new; do
    if [ "$label" = base ]; then b=$bin_base; else b=$bin_new; fi
    # shellcheck disable=SC2046
    "$b" eval --model "$model" --data "$shard" $(eval_flags "${Ts[0]}") >"$run_dir/warmup-$label.log" 2>&1 \
        || { cat "$run_dir/warmup-$label.log" >&2; die "$label: lssar eval failed"; }
done

load0=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")
metrics=(train)
for T in "${Ts[@]}"; do metrics+=("eval$T"); done
for r in $(seq 1 "$rounds"); do
    if [ $((r % 2)) = 1 ]; then order="base new"; else order="new base"; fi
    log "round $r/$rounds ($order)"
    for m in "${metrics[@]}"; do
        for label in $order; do run_one "$m" "$label" "$r"; done
    done
done
load1=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")
elapsed=$(awk -v a="$t_start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }')

mkdir -p "$(dirname "$json")"
rc=0
python3 - "$manifest" "$json" <<PY || rc=$?
import json, statistics, sys
manifest, out = sys.argv[1], sys.argv[2]
thr = float("$threshold") / 100
raw = {}      # metric -> label -> {round: value}
order = []
loss = {}     # T -> label -> set of losses
for line in open(manifest):
    m, label, r, val, path = line.rstrip("\n").split("\t")
    r = int(r)
    d = json.load(open(path))
    if m == "train":
        for s in d["train"]:
            name = "train L%d C%d (ms/step)" % (s["layers"], s["dim"])
            raw.setdefault(name, {}).setdefault(label, {})[r] = s["ms_per_step"]
            if name not in order: order.append(name)
    else:
        T = int(m[4:])
        name = "eval T=%d (s)" % T
        raw.setdefault(name, {}).setdefault(label, {})[r] = float(val)
        if name not in order: order.append(name)
        loss.setdefault(T, {}).setdefault(label, set()).add(d["results"][0]["loss"])

rows, metrics, slower = [], [], False
for name in order:
    rb, rn = raw[name]["base"], raw[name]["new"]
    b, n = [rb[k] for k in sorted(rb)], [rn[k] for k in sorted(rn)]
    mb, mn = statistics.median(b), statistics.median(n)
    ratio = mn / mb
    paired = statistics.median([rn[k] / rb[k] for k in sorted(rb) if k in rn])
    spread = (max(b) - min(b)) / mb
    verdict = "SLOWER" if ratio > 1 + thr else ("faster" if ratio < 1 - thr else "ok")
    slower |= verdict == "SLOWER"
    if spread > thr: verdict += " (noisy)"
    metrics.append({"metric": name, "baseline": b, "new": n, "baseline_median": mb, "new_median": mn,
                    "ratio": ratio, "baseline_min": min(b), "new_min": min(n), "min_ratio": min(n) / min(b),
                    "paired_ratio_median": paired, "baseline_spread": spread, "verdict": verdict})
    rows.append((name, mb, mn, ratio, min(b), min(n), min(n) / min(b), paired, spread, verdict))

def fmt(x): return "%.2f" % x if x >= 10 else "%.4f" % x
w = max(len(r[0]) for r in rows)
print("%-*s %11s %11s %7s %11s %11s %7s %7s %7s  %s" % (w, "metric", "base med", "new med", "ratio",
      "base min", "new min", "ratio", "paired", "spread", "verdict (%.0f%%)" % (thr * 100)))
for r in rows:
    print("%-*s %11s %11s %7.3f %11s %11s %7.3f %7.3f %6.1f%%  %s" % (w, r[0], fmt(r[1]), fmt(r[2]), r[3],
          fmt(r[4]), fmt(r[5]), r[6], r[7], 100 * r[8], r[9]))
print("ratio = new/base of the medians over rounds (the verdict); then of the minima; paired = median of the")
print("per-round new/base ratios; spread = (max - min)/median of the baseline's rounds (noise; '(noisy)' above the threshold)")
same = {}
for T in sorted(loss):
    lb, ln = loss[T].get("base", set()), loss[T].get("new", set())
    same[T] = {"baseline": sorted(lb), "new": sorted(ln), "identical": lb == ln and len(lb) == 1}
    print("eval loss T=%d: baseline %s, new %s: %s" % (T, " ".join("%.6f" % x for x in sorted(lb)),
          " ".join("%.6f" % x for x in sorted(ln)),
          "identical" if same[T]["identical"] else "DIFFERENT (max |diff| %.3g)" % max(abs(a - b) for a in lb for b in ln)))
doc = {"baseline": {"rev": "$base_rev", "commit": "$base_sha", "bin": "$bin_base"},
       "new": {"what": "$new_desc", "commit": "$new_sha", "bin": "$bin_new"},
       "quick": bool($quick), "rounds": $rounds, "threads": $threads, "bench_repeats": $repeats,
       "threshold_pct": float("$threshold"), "eval_model": {"layers": $layers, "dim": $dim, "heads": $heads,
       "vocab": $eval_vocab, "train_seq": $train_seq}, "eval_tokens": $eval_tokens,
       "loadavg_start": "$load0", "loadavg_end": "$load1", "elapsed_s": $elapsed,
       "metrics": metrics, "eval_loss": {str(k): v for k, v in same.items()},
       "pass": not slower}
with open(out, "w") as f: json.dump(doc, f, indent=1)
sys.exit(10 if slower else 0)
PY
case $rc in 0|10) ;; *) die "the statistics failed (raw runs: $manifest)" ;; esac
echo "baseline: $base_rev ($base_sha); new: $new_desc"
echo "$rounds rounds, --threads $threads, load average $load0 -> $load1, ${elapsed}s; JSON: $json"
if [ $rc = 0 ]; then echo "PASS: every median within ${threshold}% of the baseline"; exit 0; fi
echo "FAIL: some median more than ${threshold}% slower than the baseline"
exit 1
