#!/usr/bin/env bash
# test_orbits_probe.sh - the orbit model's evaluation and the Newton probe from the command line:
# `lssar train` on orbit shards, `orbits eval` (its previous-position baseline recomputed here
# independently from the files), `orbits oracle` + `newton` (the audit's m1 m2 constant near G),
# `newton` on exact forces (c = G, m2 dependence flagged), `orbits probe` end to end on a tiny
# model, and bad inputs. Binary: $LSSAR_BIN, else build/lssar.
# Ends with "test_orbits_probe_sh: N passed, M failed".
cd "$(dirname "$0")/.."
LSSAR=${LSSAR_BIN:-build/lssar}
PY=/usr/bin/python3
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; [ -n "$2" ] && printf '%s\n' "$2" | tail -15 | sed 's/^/    /'; }
check() { if eval "$2"; then ok "$1"; else bad "$1" "$3"; fi; }
# expect NAME STATUS(0|fail) TEXT CMD...: exit status and a substring of the output
expect() {
  local name=$1 want=$2 text=$3; shift 3
  local out rc; out=$("$@" 2>&1); rc=$?
  if { [ "$want" = 0 ] && [ $rc -eq 0 ]; } || { [ "$want" = fail ] && [ $rc -ne 0 ]; }; then
    if [ -z "$text" ] || grep -qF -- "$text" <<<"$out"; then ok "$name"; return; fi
  fi
  bad "$name (exit $rc)" "$out"
}
tmp=$(mktemp -d /tmp/lssar_orbprobe_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
T1="--threads 2"
D=$tmp/d

# data: 40 training, 6 validation systems; a 500-system force set
out=$("$LSSAR" orbits simulate --out $D --systems 40 --seed 1 --quiet 2>&1 &&
      "$LSSAR" orbits simulate --out $D --split val --systems 6 --seed 2 --quiet 2>&1 &&
      "$LSSAR" orbits simulate --out $D --split force --two-body --state --systems 500 --seed 3 --quiet 2>&1); rc=$?
check "simulate the data" '[ $rc -eq 0 ] && [ -f $D/force_state.bin ]' "$out"

# a tiny orbit model (rope; 2 channels, vocab 7003)
expect "train on orbit shards" 0 "" $LSSAR train --data $D/train_000000.bin --out $tmp/m --attn lssar --vocab 7003 \
  --layers 1 --heads 2 --dim 16 --seq 64 --batch 2 --steps 3 --quiet $T1

# eval: the model's numbers, and the baseline recomputed from the files
expect "orbits eval" 0 "previous position" $LSSAR orbits eval --model $tmp/m --data $D --seq 999 --json $tmp/e.json --quiet
out=$($PY - "$D" "$tmp/e.json" <<'EOF' 2>&1
import json, struct, sys
d, ej = sys.argv[1], json.load(open(sys.argv[2]))
tok = open(d + "/val_000000.bin", "rb").read()[1024:]
meta = open(d + "/val_systems.bin", "rb").read()
n = (len(meta) - 64) // 464
acc = accb = err = 0.0; rows = 0
edges = [0, 5, 10, 20, 30]; brows = [0] * 5; berr = [0.0] * 5   # by the target's distance from the origin
unbin = lambda v: -50 + (v + 0.5) * 100 / 7000
for s in range(n):
    K = struct.unpack_from("<i", meta, 64 + 464 * s)[0]
    t = struct.unpack_from("<2000H", tok, s * 4000)
    for r in range(1, 1000):
        step = (r - 1) // (K + 1)
        if step < 1: continue
        p = r - (K + 1)
        tx, ty, px, py = t[2 * r], t[2 * r + 1], t[2 * p], t[2 * p + 1]
        acc += 0.5 * ((tx == px) + (ty == py)); accb += (tx == px and ty == py)
        dx = (px - tx) * 100 / 7000; dy = (py - ty) * 100 / 7000
        err += (dx * dx + dy * dy) ** 0.5; rows += 1
        k = max(i for i in range(5) if (unbin(tx) ** 2 + unbin(ty) ** 2) ** 0.5 >= edges[i])
        brows[k] += 1; berr[k] += (dx * dx + dy * dy) ** 0.5
b = ej["compared"]["previous_position"]
bands = ej["compared"]["by_radius"]
assert [x["from_au"] for x in bands] == edges and bands[-1]["to_au"] is None, bands
assert [x["rows"] for x in bands] == brows and sum(brows) == rows, (bands, brows)
for x, br, be in zip(bands, brows, berr):
    assert (x["previous_error_au"] is None) if br == 0 else abs(x["previous_error_au"] - be / br) < 1e-6, (x, be, br)
m = ej["compared"]["model"]   # the bands' model errors average back to the model's error
assert abs(sum(x["rows"] * x["model_error_au"] for x in bands if x["rows"]) / rows - m["error_au"]) < 1e-6, (bands, m)
assert ej["compared"]["rows"] == rows, (ej["compared"]["rows"], rows)
assert abs(b["accuracy"] - acc / rows) < 1e-9, (b["accuracy"], acc / rows)
assert abs(b["accuracy_both"] - accb / rows) < 1e-9
assert abs(b["error_au"] - err / rows) < 1e-6, (b["error_au"], err / rows)
assert ej["rows"] == n * 999 and 0 <= ej["accuracy"] <= 1 and ej["error_au"] > 0 and ej["loss"] > 0
print("baseline ok", rows, acc / rows, err / rows)
EOF
); rc=$?
check "eval: baseline = same body's previous position, recomputed" '[ $rc -eq 0 ]' "$out"
# model - baseline per system: on the force set every system has one planet, so the same number of
# compared rows, and the mean over systems equals the difference of the row means
expect "orbits eval on two-body systems" 0 "model - previous" $LSSAR orbits eval --model $tmp/m --data $D --split force --systems 30 --seq 999 --json $tmp/ef.json
out=$($PY - "$tmp/ef.json" <<'EOF' 2>&1
import json, sys
c = json.load(open(sys.argv[1]))["compared"]
d, m, b = c["model_minus_previous"], c["model"], c["previous_position"]
assert abs(d["accuracy"] - (m["accuracy"] - b["accuracy"])) < 1e-9, (d, m, b)
assert abs(d["error_au"] - (m["error_au"] - b["error_au"])) < 1e-9 * max(1, abs(d["error_au"])), (d, m, b)
assert d["accuracy_ci95_half"] > 0 and d["error_au_ci95_half"] > 0, d
print("difference ok", d)
EOF
); rc=$?
check "eval: model - previous over systems = the difference of the means (equal rows per system)" '[ $rc -eq 0 ]' "$out"
# --ordinal: the bins' embeddings start ordered (tests/test_model.c checks the numbers); past the vocabulary refused
expect "train --ordinal 7000 (tied)" 0 "" $LSSAR train --data $D/train_000000.bin --out $tmp/mo --attn softmax --vocab 7003 --ordinal 7000 \
  --layers 1 --heads 2 --dim 16 --seq 64 --batch 2 --steps 2 --quiet $T1
expect "train --ordinal past the vocabulary" fail "--ordinal 7004: ordered bins 7004: need 2..7003" $LSSAR train --data $D/train_000000.bin --out $tmp/mo2 \
  --attn softmax --vocab 7003 --ordinal 7004 --layers 1 --heads 2 --dim 16 --seq 64 --batch 2 --steps 1 --quiet $T1

# the oracle control: k-NN (k = 2) forces; the audit's m1 m2 constant near G and the better form
expect "orbits oracle" 0 "forces.csv" $LSSAR orbits oracle --data $D --out $tmp/or $T1
check "oracle forces.csv header and rows" '[ "$(head -1 $tmp/or/forces.csv)" = "r,m1,m2,F_pred,F_true" ] && [ $(wc -l < $tmp/or/forces.csv) -eq 5001 ]'
expect "newton on the oracle" 0 "law audit" $LSSAR orbits newton --forces $tmp/or/forces.csv --galaxies 5 --rows 1000 \
  --iterations 1 --restarts 1 --populations 2 --cycles 10 --json $tmp/or/newton.json --quiet $T1
out=$($PY -c "
import json; a = json.load(open('$tmp/or/newton.json'))['audit']
assert abs(a['c_m1m2'] / 39.4784176 - 1) < 0.05, a
assert a['better_form'] == 'c*m1*m2/r**2', a
print(a['c_m1m2'], a['c_m1'])" 2>&1); rc=$?
check "oracle: audit c m1 m2/r^2 within 5% of G, m1 m2 form fits better" '[ $rc -eq 0 ]' "$out"

# newton on exact forces F = G m1 m2 / r^2: c = G exactly, and the law depends on m2
awk 'BEGIN{srand(1); print "r,m1,m2,F_pred,F_true"; G=39.4784176044;
  for(i=0;i<300;i++){r=0.5+29.5*rand(); m1=exp(log(1e-7)+rand()*log(1e4)); m2=0.5+4.5*rand(); F=G*m1*m2/(r*r);
  printf "%.12g,%.12g,%.12g,%.12g,%.12g\n", r,m1,m2,F,F}}' > $tmp/exact.csv
expect "newton on exact forces" 0 "law audit" $LSSAR orbits newton --forces $tmp/exact.csv --galaxies 1 --rows 300 \
  --iterations 8 --restarts 1 --json $tmp/exact.json --quiet $T1
out=$($PY -c "
import json; j = json.load(open('$tmp/exact.json')); a = j['audit']
assert abs(a['c_m1m2'] - 39.4784176) < 1e-4, a
assert a['forces_depend_on_m2'] is True and a['m2_rank_correlation'] > 0.99, a
assert a['relative_l1_m1m2'] < 1e-6 and a['relative_l1_m1'] > 0.1, a
print(a['c_m1m2'], j['galaxies'][0]['equation'])" 2>&1); rc=$?
check "newton: exact forces give c = 39.478 and depend on m2 (rank correlation)" '[ $rc -eq 0 ]' "$out"
# a law that ignores m2: F = G m1 / r^2 - the audit must say so
awk -F, 'BEGIN{OFS=","} NR==1{print; next} {F=39.4784176044*$2/($1*$1); $4=F; $5=F; print}' $tmp/exact.csv > $tmp/nom2.csv
expect "newton on m2-free forces" 0 "law audit" $LSSAR orbits newton --forces $tmp/nom2.csv --galaxies 1 --rows 300 \
  --iterations 8 --restarts 1 --json $tmp/nom2.json --quiet $T1
out=$($PY -c "
import json; j = json.load(open('$tmp/nom2.json')); a = j['audit']
assert a['forces_depend_on_m2'] is False and abs(a['m2_rank_correlation']) < 0.3, a
assert a['better_form'] == 'c*m1/r**2' and abs(a['c_m1'] - 39.4784176) < 1e-4, a
print(a['c_m1'], j['galaxies'][0]['equation'])" 2>&1); rc=$?
check "newton: m2-free forces flagged as not depending on m2" '[ $rc -eq 0 ]' "$out"

# the probe end to end: fine-tune with the regression head, predict, forces.csv
expect "orbits probe" 0 "forces.csv" $LSSAR orbits probe --model $tmp/m --data $D --out $tmp/pr --systems 40 --steps 3 \
  --batch 1 --keep 300 --quiet $T1
out=$($PY - "$tmp/pr" <<'EOF2' 2>&1
import csv, json, math, sys
rows = list(csv.reader(open(sys.argv[1] + "/forces.csv")))
assert rows[0] == ["r", "m1", "m2", "F_pred", "F_true"], rows[0]
assert len(rows) == 301, len(rows)
for r in rows[1:]:
    v = [float(x) for x in r]
    assert all(math.isfinite(x) for x in v) and v[0] > 0 and v[3] > 0 and v[4] > 0, r
    assert abs(v[4] - 39.4784176 * v[1] * v[2] / v[0] ** 2) < 1e-4 * v[4], r   # F_true is Newton's
p = json.load(open(sys.argv[1] + "/probe.json"))
assert p["systems"] == 40 and p["kept_rows"] == 300 and p["labelled_rows"] == 36 * 499 + 4 * 2, p
print("forces.csv ok", p["final_train_mse"])
EOF2
); rc=$?
check "probe: forces.csv valid (header, 300 rows, finite, F_true = G m1 m2/r^2)" '[ $rc -eq 0 ]' "$out"
expect "probe: --target raw" 0 "forces.csv" $LSSAR orbits probe --model $tmp/m --data $D --out $tmp/pr2 --systems 20 --steps 1 \
  --batch 1 --keep 50 --target raw --quiet $T1
expect "probe: bad --target" fail "--target must be log or raw" $LSSAR orbits probe --model $tmp/m --data $D --out $tmp/x --target lin
$LSSAR train --data $D/train_000000.bin --out $tmp/ml --attn softmax --pos learned --vocab 7003 --layers 1 --heads 1 --dim 8 \
  --seq 32 --batch 1 --steps 1 --quiet $T1 >/dev/null 2>&1
expect "probe: learned positions shorter than a sequence refused" fail "--seq 999" $LSSAR orbits probe --model $tmp/ml --data $D --out $tmp/x --steps 1 --systems 20

# the pipeline command: paper is printed, never run; a dry run writes nothing
out=$("$LSSAR" orbits run --scale paper --out $tmp/paper 2>&1); rc=$?
check "run --scale paper prints the published recipe" '[ $rc -eq 0 ] && grep -q -- "--layers 12 --heads 12 --dim 768" <<<"$out" && grep -q "orbits newton" <<<"$out" && [ ! -e $tmp/paper ]' "$out"
out=$("$LSSAR" orbits run --scale tiny --attn softmax,lssa --dry-run --out $tmp/dry 2>&1); rc=$?
check "run --dry-run: one train per kind, oracle, newton x3, nothing written" '[ $rc -eq 0 ] && [ $(grep -c "^\$ lssar train" <<<"$out") -eq 2 ] && [ $(grep -c "orbits newton" <<<"$out") -eq 3 ] && [ ! -e $tmp/dry ]' "$out"
# a printed command is one a shell runs as it was: a path with a quote and a space survives
out=$("$LSSAR" orbits run --scale tiny --attn softmax --dry-run --out "$tmp/it's a \$dir" 2>&1); rc=$?
got=$($PY -c 'import shlex, sys
line = [l for l in sys.stdin.read().splitlines() if l.startswith("$ lssar train")][0]
a = shlex.split(line[2:]); print(a[a.index("--out") + 1])' <<<"$out")
check "run --dry-run: printed commands quote a path with ' and \$" '[ $rc -eq 0 ] && [ "$got" = "$tmp/it'"'"'s a \$dir/softmax" ]' "$out $got"
# laptop: two-body training and validation systems (no state file), tied heads with ordered bins
out=$("$LSSAR" orbits run --scale laptop --dry-run 2>&1); rc=$?
check "run --scale laptop: two-body data, --ordinal 7000, tied" '[ $rc -eq 0 ] && grep -q -- "--split train --systems [0-9]* --seed 1 --two-body --quiet" <<<"$out" && grep -q -- "--split val .*--two-body --quiet" <<<"$out" && grep -q -- "--split force .*--two-body --state" <<<"$out" && [ $(grep -c -- "--ordinal 7000 --wd 0 --eps 0.0001" <<<"$out") -eq 2 ] && ! grep -q -- "--untied" <<<"$out"' "$out"
# --heads / --dim: the head size of the models (the laptop plan's D = 64: one head of width 64)
out=$("$LSSAR" orbits run --scale laptop --heads 1 --dry-run 2>&1); rc=$?
check "run --heads 1: both models with 1 head of width 64" '[ $rc -eq 0 ] && [ $(grep -c -- "--layers 2 --heads 1 --dim 64 " <<<"$out") -eq 2 ]' "$out"
expect "run: --heads that does not divide --dim" fail "must be a multiple of the heads 3" $LSSAR orbits run --scale laptop --heads 3 --dry-run
expect "run: an odd head size" fail "even head size" $LSSAR orbits run --scale laptop --dim 72 --heads 8 --dry-run
out=$("$LSSAR" orbits run --scale tiny --dry-run 2>&1); rc=$?
check "run --scale tiny: the published models (untied, multi-planet training)" '[ $rc -eq 0 ] && [ $(grep -c -- "--untied" <<<"$out") -eq 2 ] && ! grep -q -- "--ordinal" <<<"$out" && [ $(grep -c -- "--two-body" <<<"$out") -eq 1 ]' "$out"
# --seeds 2: two models per kind (KIND, KIND-s1, trained with seeds 1337 and 1338) and a pooled
# table; every mean and interval recomputed here from the models' eval.json and probe.json
expect "run --scale smoke --seeds 2" 0 "orbits run (smoke): done" $LSSAR orbits run --scale smoke --attn softmax,lssar --seeds 2 --out $tmp/seeds $T1
out=$($PY - "$tmp/seeds" <<'EOF2' 2>&1
import json, re, sys
d = sys.argv[1]
t975 = 12.706  # Student t(0.975, 1) as src/exp/stats.c tabulates it (3 decimals)
def ci(a, b): return (a + b) / 2, t975 * abs(a - b) / 2
cmds = open(d + "/commands.sh").read()
assert re.search(r"train .*--out \S+/lssar-s1 .*--seed 1338 ", cmds) and not re.search(r"--out \S+/lssar .*--seed", cmds), cmds
md = open(d + "/RESULTS.md").read()
for kind in ("softmax", "lssar"):
    e = [json.load(open(f"{d}/{n}/eval.json"))["compared"] for n in (kind, kind + "-s1")]
    p = [json.load(open(f"{d}/{n}/probe.json"))["mean_abs_log10_error"] for n in (kind, kind + "-s1")]
    cols = [ci(e[0]["model"]["accuracy"], e[1]["model"]["accuracy"]),
            ci(*[x["model"]["accuracy"] - x["previous_position"]["accuracy"] for x in e]),
            ci(e[0]["model"]["error_au"], e[1]["model"]["error_au"]),
            ci(*[x["model"]["error_au"] - x["previous_position"]["error_au"] for x in e]),
            ci(*p)]
    row = re.search(r"^\| %s \|(.*)$" % kind, md.split("## Pooled over the 2 seeds")[1], re.M).group(1)
    got = re.findall(r"([-+]?[0-9.]+) \+- ([0-9.]+)", row)
    assert len(got) == 5, row
    for (m, h), (gm, gh) in zip(cols, got):
        assert abs(m - float(gm)) <= 6e-5 and abs(h - float(gh)) <= 6e-5, (kind, m, h, gm, gh)
    # the by-distance table: model / previous error and rows per band, from the same eval.json
    band = re.search(r"^\| %s \|(.* rows\) \|)$" % kind, md, re.M).group(1)
    got = re.findall(r"([0-9.]+|nan) / ([0-9.]+|nan) \(([0-9]+) rows\)", band)
    assert len(got) == 5, band
    for (gm, gb, gr), x in zip(got, e[0]["by_radius"]):
        assert int(gr) == x["rows"], (kind, band, x)
        for g, v in ((gm, x["model_error_au"]), (gb, x["previous_error_au"])):
            assert (g == "nan") if v is None else abs(float(g) - v) <= 6e-4, (kind, band, x)
print("pooled ok")
EOF2
); rc=$?
check "run --seeds 2: models per seed, the pooled table recomputed from their eval.json and probe.json" '[ $rc -eq 0 ]' "$out"
# a rerun resumes the models it finds, but not one of other settings (an earlier version of the scale)
cp $tmp/m/model.safetensors $tmp/seeds/softmax/model.safetensors
expect "run: a model of other settings in OUT is not resumed" fail "holds a lssar model of 1 layers, 2 heads, width 16, tied heads from an earlier run" \
  $LSSAR orbits run --scale smoke --attn softmax,lssar --seeds 2 --out $tmp/seeds --skip-simulate $T1
# ... nor one trained with another optimizer (here: one more step with AdamW eps 1e-4)
expect "train --resume --eps: one more step" 0 "" $LSSAR train --out $tmp/seeds/lssar --resume --steps 11 --eps 1e-4 --quiet $T1
expect "run: a model trained with another eps is not resumed" fail "trained with AdamW eps 0.0001, weight decay 0.1 in an earlier run; this scale uses eps 1e-08" \
  $LSSAR orbits run --scale smoke --attn lssar --out $tmp/seeds --skip-simulate $T1
expect "run: --seeds too many" fail "more than 16 models" $LSSAR orbits run --attn softmax,lssar --seeds 9 --dry-run
expect "run: unknown kind" fail "kind 'bogus' is unknown" $LSSAR orbits run --attn softmax,bogus --dry-run
expect "run: unknown scale" fail "--scale must be smoke, tiny, laptop, small or paper" $LSSAR orbits run --scale huge

# bad inputs
expect "eval: missing model" fail "model.safetensors" $LSSAR orbits eval --model $tmp/nope --data $D
expect "eval: missing data" fail "val_systems.bin" $LSSAR orbits eval --model $tmp/m --data $tmp/nodata
expect "oracle: no state file" fail "two-body" $LSSAR orbits oracle --data $D --split train --out $tmp/x
printf 'a,b\n1,2\n' > $tmp/nohead.csv
expect "newton: CSV without the header" fail "r,m1,m2,F_pred" $LSSAR orbits newton --forces $tmp/nohead.csv
expect "newton: missing file" fail "nope.csv" $LSSAR orbits newton --forces $tmp/nope.csv
# a 1-channel shard where orbit shards belong
mkdir -p $tmp/one && cp $D/val_systems.bin $tmp/one/ && $PY -c "
import struct; n = 6000
open('$tmp/one/val_000000.bin', 'wb').write(struct.pack('<256i', 20240520, 1, n, 1, *([0] * 252)) + bytes(2 * n))"
expect "eval: wrong channels" fail "has 1 channel(s); orbit shards have 2" $LSSAR orbits eval --model $tmp/m --data $tmp/one

echo "test_orbits_probe_sh: $pass passed, $fail failed"
[ $fail -eq 0 ]
