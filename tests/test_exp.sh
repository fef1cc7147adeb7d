#!/usr/bin/env bash
# test_exp.sh - the experiment commands end to end on tiny configs (seconds): extrapolate (text
# and mqar, resumable, --seeds with intervals over seeds), attnstats and passkey (one model, and seeds
# pooled) with JSON and plots, and bad input.
# Binary: $LSSAR_BIN, else build/lssar. Ends with "test_exp_sh: N passed, M failed".
cd "$(dirname "$0")/.."
LSSAR=${LSSAR_BIN:-build/lssar}
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; [ -n "$2" ] && printf '%s\n' "$2" | tail -8 | sed 's/^/    /'; }
check() { if eval "$2"; then ok "$1"; else bad "$1" "$3"; fi; }
if [ ! -x "$LSSAR" ]; then echo "test_exp_sh: $LSSAR is not built"; echo "test_exp_sh: 0 passed, 1 failed"; exit 1; fi
tmp=$(mktemp -d /tmp/lssar_exp_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
have_plot=0; gnuplot -e 'set terminal pngcairo' </dev/null >/dev/null 2>&1 && have_plot=1

# a small text corpus: 8 documents of 2-6 kB of repetitive pseudo-English
mkdir -p "$tmp/text"
python3 - "$tmp/text" <<'EOF'
import random, sys
r = random.Random(1)
words = "the a of and to in is was that for on with as by at from his her it this which".split()
for d in range(8):
    n = 400 + 100 * d
    with open(f"{sys.argv[1]}/doc{d}.txt", "w") as f:
        f.write(" ".join(r.choice(words) for _ in range(n)) + ".\n")
EOF
out=$("$LSSAR" data build --text "$tmp/text" --tokenizer byte --val-frac 0.3 --out "$tmp/data" --quiet 2>&1)
check "data build for the tests" '[ -f "$tmp/data/val_index.json" ]' "$out"

FL="--layers 1 --heads 2 --dim 16 --seq 32 --batch 4 --steps 6 --lr 3e-3 --threads 1 --quiet"
out=$("$LSSAR" extrapolate --data "$tmp/data" --out "$tmp/ex" --attn softmax,lssa,lssar --lssar-p 15,3 --factors 1,2,4 --max-windows 4 $FL 2>&1); rc=$?
check "extrapolate text runs" '[ $rc -eq 0 ] && [ -f "$tmp/ex/results.json" ] && [ -f "$tmp/ex/results.md" ]' "$out"
check "extrapolate results.json shape" 'python3 - "$tmp/ex/results.json" <<EOF
import json, sys, math
j = json.load(open(sys.argv[1]))
names = [r["name"] for r in j["runs"]]
assert names == ["softmax", "lssa", "lssar-p15", "lssar-p3", "lssa+lssar-p15"], names
for r in j["runs"]:
    assert r["train_seq"] == 32 and [x["seq"] for x in r["results"]] == [32, 64, 128]
    for x in r["results"]:
        assert math.isfinite(x["loss"]) and x["loss"] > 0 and x["stderr"] >= 0 and x["windows"] >= 1, x
z = [r for r in j["runs"] if r["eval_only"]][0]
assert z["attn"] == "lssar" and z["p"] == 15 and z["trained_attn"] == "lssa"
assert len(j["manifest_sha256"]) == 64
EOF' "$(cat "$tmp/ex/results.json" 2>/dev/null | head -40)"
check "results.md has the table" 'grep -q "| lssar-p3 |" "$tmp/ex/results.md" && grep -q "T=128 (x4)" "$tmp/ex/results.md"' "$(cat "$tmp/ex/results.md")"
[ $have_plot -eq 1 ] && check "loss_vs_length.png written" '[ -s "$tmp/ex/loss_vs_length.png" ]'
out=$("$LSSAR" extrapolate --data "$tmp/data" --out "$tmp/ex" --attn softmax,lssa,lssar --lssar-p 15,3 --factors 1,2,4 --max-windows 4 ${FL/--quiet/} 2>&1)
check "extrapolate is resumable (nothing retrained or re-evaluated)" 'grep -q "softmax already trained" <<<"$out" && grep -q "evaluation cached" <<<"$out" && ! grep -q "training " <<<"$out"' "$out"
out=$("$LSSAR" extrapolate --data "$tmp/data" --out "$tmp/ex-default" --attn softmax,lssar --factors 1 --max-windows 2 ${FL/--steps 6/--steps 2} 2>&1); rc=$?
check "--lssar-p defaults to 15 alone (no p = 3 run unless asked)" '[ $rc -eq 0 ] && [ -d "$tmp/ex-default/lssar-p15" ] && [ ! -e "$tmp/ex-default/lssar-p3" ]' "$out"
check "one seed: the interval is over windows only (footnote), groups = runs" 'grep -q "One seed: interval over windows only" "$tmp/ex/results.md" && python3 -c "
import json; j = json.load(open(\"$tmp/ex/results.json\"))
assert j[\"seeds\"] == 1 and [g[\"name\"] for g in j[\"groups\"]] == [r[\"name\"] for r in j[\"runs\"]]
for g, r in zip(j[\"groups\"], j[\"runs\"]):
    for x, y in zip(g[\"results\"], r[\"results\"]):
        assert x[\"mean\"] == y[\"loss\"] and abs((x[\"ci95\"][1] - x[\"ci95\"][0]) / 2 - 1.96 * y[\"stderr\"]) < 1e-12, (x, y)
"' "$(cat "$tmp/ex/results.md")"

# --seeds: 2 kinds x 2 seeds (and the lssa->lssar evaluation of each lssa model)
SX="--data $tmp/data --out $tmp/sx --attn softmax,lssa --lssar-p 15 --seeds 2 --factors 1,2 --max-windows 4 $FL"
out=$("$LSSAR" extrapolate $SX 2>&1); rc=$?
check "extrapolate --seeds 2: 4 run folders (seed index 0 keeps the plain names)" '[ $rc -eq 0 ] && [ "$(find "$tmp/sx" -mindepth 1 -maxdepth 1 -type d -printf "%f\n" | LC_ALL=C sort | tr "\n" " ")" = "lssa lssa-s1 softmax softmax-s1 " ]' "$out$(ls "$tmp/sx")"
check "--seeds 2: groups with t intervals over seeds and paired differences to softmax" 'python3 - "$tmp/sx/results.json" <<EOF
import json, sys, math, statistics as st
j = json.load(open(sys.argv[1]))
assert j["seeds"] == 2
runs = {r["name"]: r for r in j["runs"]}
assert [(r["name"], r["seed"], r["group"]) for r in j["runs"]] == [("softmax", 1337, "softmax"), ("lssa", 1337, "lssa"),
    ("lssa+lssar-p15", 1337, "lssa+lssar-p15"), ("softmax-s1", 1338, "softmax"), ("lssa-s1", 1338, "lssa"),
    ("lssa+lssar-p15-s1", 1338, "lssa+lssar-p15")], [r["name"] for r in j["runs"]]
assert runs["lssa+lssar-p15-s1"]["model"] == "lssa-s1"
groups = {g["name"]: g for g in j["groups"]}
assert list(groups) == ["softmax", "lssa", "lssa+lssar-p15"]
for g in j["groups"]:
    assert g["seeds"] == [1337, 1338] and len(g["runs"]) == 2
    for f, x in enumerate(g["results"]):
        ps = [runs[n]["results"][f]["loss"] for n in g["runs"]]
        assert x["per_seed"] == ps
        assert ps[0] != ps[1], "the seeds train different models"
        lo, hi = x["ci95"]
        assert lo < x["mean"] < hi, x
        half = 12.706 * st.stdev(ps) / math.sqrt(2)          # t(0.975, 1)
        assert abs(x["mean"] - st.mean(ps)) < 1e-12 and abs((hi - lo) / 2 - half) < 1e-9, (x, half)
        d = x["diff_vs_softmax"]
        if g["name"] == "softmax":
            assert d["mean"] == 0 and d["ci95"] == [0, 0] and d["per_seed"] == [0, 0] and not d["excludes_zero"], d
        else:
            sm = groups["softmax"]["results"][f]["per_seed"]
            assert all(abs(a - (b - c)) < 1e-9 for a, b, c in zip(d["per_seed"], ps, sm)), d
            dl, dh = d["ci95"]
            assert dl <= d["mean"] <= dh and d["excludes_zero"] == (dl > 0 or dh < 0), d
EOF' "$(head -c 3000 "$tmp/sx/results.json")"
check "--seeds 2: results.md has the difference table and names the method" 'grep -q "^| lssa | .* +- " "$tmp/sx/results.md" && grep -q "Difference to softmax" "$tmp/sx/results.md" && grep -q "2 seeds: 95% Student t interval over seeds" "$tmp/sx/results.md" && grep -q "Paired by seed index" "$tmp/sx/results.md"' "$(cat "$tmp/sx/results.md")"
cp "$tmp/sx/results.json" "$tmp/sx1.json"
out=$("$LSSAR" extrapolate ${SX/--quiet/} 2>&1); rc=$?
check "--seeds 2: a rerun retrains and re-evaluates nothing" '[ $rc -eq 0 ] && [ "$(grep -c "already trained" <<<"$out")" = 4 ] && [ "$(grep -c "evaluation cached" <<<"$out")" = 6 ] && ! grep -q "training \|resuming " <<<"$out"' "$out"
# a cache of an older version, without the per-window losses, is recomputed (to the same numbers)
python3 - "$tmp/sx/softmax-s1/extrap.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
for e in j["results"]: del e["window_losses"]
json.dump(j, open(sys.argv[1], "w"))
EOF
nogt() { python3 -c 'import json,sys; d = json.load(open(sys.argv[1])); [r.pop("train_seconds") for r in d["runs"]]; print(json.dumps(d, sort_keys=True))' "$1"; }
out=$("$LSSAR" extrapolate ${SX/--quiet/} 2>&1); rc=$?
check "an evaluation cache without per-window losses is recomputed, to the same results" '[ $rc -eq 0 ] && [ "$(grep -c "evaluation cached" <<<"$out")" = 5 ] && ! grep -q "softmax-s1: evaluation cached" <<<"$out" && grep -q window_losses "$tmp/sx/softmax-s1/extrap.json" && [ "$(nogt "$tmp/sx/results.json")" = "$(nogt "$tmp/sx1.json")" ]' "$out"
out=$("$LSSAR" extrapolate ${SX/--seeds 2/--seeds 2 --seed 5} 2>&1); rc=$?
check "a run folder trained with another seed is not reused" '[ $rc -ne 0 ] && grep -q "trained with seed 1337, this call trains it with seed 5" <<<"$out"' "$out"
out=$("$LSSAR" extrapolate ${SX/--seeds 2/--seeds 0} 2>&1); rc=$?
check "--seeds 0 is refused" '[ $rc -eq 2 ] && grep -q -- "--seeds" <<<"$out"' "$out"

out=$("$LSSAR" extrapolate --task mqar --out "$tmp/mq" --attn softmax,lssar --lssar-p 15 --pairs 2 --factors 1,2 --mqar-eval 8 --no-plot $FL 2>&1); rc=$?
check "extrapolate --task mqar" '[ $rc -eq 0 ] && python3 -c "
import json; j = json.load(open(\"$tmp/mq/results.json\"))
assert [r[\"name\"] for r in j[\"runs\"]] == [\"softmax\", \"lssar-p15\"]
for r in j[\"runs\"]:
    for x in r[\"results\"]: assert 0 <= x[\"accuracy\"] <= 1 and x[\"lo\"] <= x[\"accuracy\"] <= x[\"hi\"] and x[\"queries\"] == 16
"' "$out"
check "mqar trains on whole sequences (align = T + 1 = 33)" 'python3 -c "
import json; j = json.load(open(\"$tmp/mq/results.json\"))
assert j[\"config\"][\"align\"] == 33 and j[\"config\"][\"passkey_mix\"] == 0, j[\"config\"]
" && ls "$tmp/mq"/mqar_train_T32_*.bin >/dev/null' "$(ls "$tmp/mq")"
out=$("$LSSAR" extrapolate --task mqar --out "$tmp/mq" --attn softmax --passkey-mix 0.5 --pairs 2 --factors 1 --no-plot $FL 2>&1); rc=$?
check "mqar refuses --passkey-mix" '[ $rc -eq 2 ] && grep -q -- "--passkey-mix" <<<"$out"' "$out"

# --passkey-mix reaches the trainer of every kind (byte passkeys need T + 1 >= ~260)
PK="--layers 1 --heads 2 --dim 16 --seq 272 --batch 2 --steps 3 --lr 3e-3 --threads 1 --quiet --no-plot --factors 1 --max-windows 2"
out=$("$LSSAR" extrapolate --data "$tmp/data" --out "$tmp/pm" --attn softmax,lssar --lssar-p 15 --passkey-mix 0.5 $PK 2>&1); rc=$?
check "extrapolate --passkey-mix 0.5: every run records it" '[ $rc -eq 0 ] && python3 -c "
import json; j = json.load(open(\"$tmp/pm/results.json\"))
assert j[\"config\"][\"passkey_mix\"] == 0.5
assert [(r[\"name\"], r[\"passkey_mix\"]) for r in j[\"runs\"]] == [(\"softmax\", 0.5), (\"lssar-p15\", 0.5)], j[\"runs\"]
" && grep -q "passkey share of 0.5" "$tmp/pm/results.md"' "$out"
out=$("$LSSAR" extrapolate --data "$tmp/data" --out "$tmp/pm" --attn softmax --passkey-mix 0.2 $PK 2>&1); rc=$?
check "a model trained with another passkey mix is not reused" '[ $rc -ne 0 ] && grep -q "passkey mix 0.5" <<<"$out"' "$out"
out=$("$LSSAR" extrapolate --data "$tmp/data" --out "$tmp/pm2" --attn softmax --passkey-mix 0.5 ${PK/--seq 272/--seq 64} 2>&1); rc=$?
check "--passkey-mix with a too short --seq names the minimum" '[ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -q "at least" <<<"$out"' "$out"
out=$("$LSSAR" extrapolate --data "$tmp/data" --out "$tmp/pm2" --passkey-mix 1.5 $PK 2>&1); rc=$?
check "--passkey-mix outside [0, 1] is refused" '[ $rc -eq 2 ] && grep -q -- "--passkey-mix" <<<"$out"' "$out"

J="$tmp/as.json"
out=$("$LSSAR" attnstats --model "$tmp/ex/softmax,$tmp/ex/lssar-p15" --data "$tmp/data/val.bin" --seq 32,64 --windows 2 --rows 8 --threads 1 --json "$J" $([ $have_plot -eq 1 ] && echo --plot "$tmp/as.png") 2>&1); rc=$?
check "attnstats runs" '[ $rc -eq 0 ] && grep -q "sink" <<<"$out"' "$out"
check "attnstats JSON: per layer and length, weights in [0, 1]" 'python3 - "$J" <<EOF
import json, sys, math
j = json.load(open(sys.argv[1]))
assert len(j["models"]) == 2
for m in j["models"]:
    assert [r["seq"] for r in m["results"]] == [32, 64]
    for r in m["results"]:
        for l in r["layers"]:
            assert 0 <= l["sink"] <= 1 and 0 < l["top1"] <= 1 and 0 <= l["entropy_norm"] <= 1.0001 and l["entropy"] <= math.log(64) + 1e-3, l
EOF' "$out"
[ $have_plot -eq 1 ] && check "attnstats plots written" '[ -s "$tmp/as.png" ] && [ -s "$tmp/as_sink.png" ]'
check "attnstats of models of different kinds pools nothing" 'python3 -c "import json; assert \"groups\" not in json.load(open(\"$J\"))"'
# the seeds of a kind pooled: means and t intervals over the models, paired differences to softmax
J2="$tmp/as2.json"
out=$("$LSSAR" attnstats --model "$tmp/sx/softmax,$tmp/sx/lssa,$tmp/sx/softmax-s1,$tmp/sx/lssa-s1" --data "$tmp/data/val.bin" --seq 32,64 --windows 2 --rows 8 --threads 1 --json "$J2" $([ $have_plot -eq 1 ] && echo --plot "$tmp/as2.png") 2>&1); rc=$?
check "attnstats --model of 2 kinds x 2 seeds: the pooled table" '[ $rc -eq 0 ] && grep -q "pooled over the models of each kind" <<<"$out" && grep -q "^lssa  .* 2 " <<<"$out"' "$out"
check "attnstats pooled JSON: mean and 95% t interval over seeds, paired difference to softmax" 'python3 - "$J2" <<EOF
import json, sys, math, statistics as st
j = json.load(open(sys.argv[1]))
per = {m["model"].rsplit("/", 1)[1]: m for m in j["models"]}
g = {x["attn"]: x for x in j["groups"]}
assert list(g) == ["softmax", "lssa"], list(g)
assert [m.rsplit("/", 1)[1] for m in g["lssa"]["models"]] == ["lssa", "lssa-s1"]
for t, r in enumerate(g["lssa"]["results"]):
    for stat in ("entropy", "entropy_norm", "sink", "top1"):
        xs = [per[n]["results"][t]["mean"][stat] for n in ("lssa", "lssa-s1")]
        sm = [per[n]["results"][t]["mean"][stat] for n in ("softmax", "softmax-s1")]
        half = 12.706 * st.stdev(xs) / math.sqrt(2)          # t(0.975, 1)
        lo, hi = r[stat]["ci95"]
        assert abs(r[stat]["mean"] - st.mean(xs)) < 1e-12 and abs((hi - lo) / 2 - half) < 1e-9, (stat, r[stat], xs)
        ds = [a - b for a, b in zip(xs, sm)]
        d = r["diff_vs_softmax"][stat]
        dl, dh = d["ci95"]
        assert abs(d["mean"] - st.mean(ds)) < 1e-12 and abs((dh - dl) / 2 - 12.706 * st.stdev(ds) / math.sqrt(2)) < 1e-9, (stat, d, ds)
        assert d["excludes_zero"] == (dl > 0 or dh < 0)
assert all("diff_vs_softmax" not in r for r in g["softmax"]["results"])
EOF' "$(head -c 2000 "$J2")"

P="$tmp/pk.json"
out=$("$LSSAR" passkey --model "$tmp/ex/lssa" --lengths 300,400 --depths 3 --trials 2 --json "$P" $([ $have_plot -eq 1 ] && echo --plot "$tmp/pk.png") 2>&1); rc=$?
check "passkey runs" '[ $rc -eq 0 ] && grep -q "passkey retrieval" <<<"$out"' "$out"
check "passkey JSON" 'python3 - "$P" <<EOF
import json, sys
j = json.load(open(sys.argv[1]))
assert j["passkey_mix"] == 0 and j["tokenizer"] == "byte"
r = j["results"]
assert [(x["length"], x["depth"]) for x in r] == [(300, 0), (300, 0.5), (300, 1), (400, 0), (400, 0.5), (400, 1)]
for x in r: assert x["trials"] == 2 and 0 <= x["accuracy"] <= 1 and 0 <= x["digit_accuracy"] <= 1
EOF' "$out"
[ $have_plot -eq 1 ] && check "passkey heatmap written" '[ -s "$tmp/pk.png" ]'
check "passkey JSON of one model: models is [it], per_model its accuracies, trials the flag's" 'python3 - "$P" "$tmp/ex/lssa" <<EOF
import json, sys
j = json.load(open(sys.argv[1]))
assert j["model"] == sys.argv[2] and j["models"] == [sys.argv[2]] and j["trials"] == 2
for x in j["results"]:
    assert x["successes"] == round(x["accuracy"] * 2) and x["per_model"] == [{"model": sys.argv[2], "accuracy": x["accuracy"], "digit_accuracy": x["digit_accuracy"]}], x
EOF' "$(head -c 2000 "$P")"

# pooled over seeds: the two softmax seeds of the --seeds 2 run, on the same keys
PKF="--lengths 300,400 --depths 3 --trials 3 --batch 2 --threads 1"
SA="$tmp/sx/softmax"; SB="$tmp/sx/softmax-s1"
"$LSSAR" passkey --model "$SA" $PKF --json "$tmp/pka.json" >/dev/null 2>&1
"$LSSAR" passkey --model "$SB" $PKF --json "$tmp/pkb.json" >/dev/null 2>&1
out=$("$LSSAR" passkey --model "$SA,$SB" $PKF --json "$tmp/pkab.json" 2>&1); rc=$?
check "passkey --model A,B pools the seeds" '[ $rc -eq 0 ] && grep -q "2 models pooled" <<<"$out" && grep -q "6 trials per cell (3 per model)" <<<"$out" && grep -q "softmax-s1: " <<<"$out"' "$out"
check "pooled passkey: trials and successes summed, accuracy the mean, per_model = the single runs, Wilson of the pooled counts" 'python3 - "$tmp/pkab.json" "$tmp/pka.json" "$tmp/pkb.json" "$SA" "$SB" <<EOF
import json, sys, math
j, a, b = (json.load(open(f)) for f in sys.argv[1:4])
assert j["models"] == sys.argv[4:6] and j["trials"] == 3 and a["trials"] == 3
assert len(j["results"]) == 6
z = 1.96
for x, xa, xb in zip(j["results"], a["results"], b["results"]):
    assert (x["length"], x["depth"]) == (xa["length"], xa["depth"]) == (xb["length"], xb["depth"])
    assert x["trials"] == 2 * xa["trials"] == 2 * xb["trials"] == 6, x
    pm = x["per_model"]
    assert [m["model"] for m in pm] == sys.argv[4:6]
    # the same keys as a run of each model alone
    assert [(m["accuracy"], m["digit_accuracy"]) for m in pm] == [(xa["accuracy"], xa["digit_accuracy"]), (xb["accuracy"], xb["digit_accuracy"])], (pm, xa, xb)
    assert x["successes"] == xa["successes"] + xb["successes"]
    assert abs(x["accuracy"] - (xa["accuracy"] + xb["accuracy"]) / 2) < 1e-12 and abs(x["accuracy"] - x["successes"] / 6) < 1e-12
    assert abs(x["digit_accuracy"] - (xa["digit_accuracy"] + xb["digit_accuracy"]) / 2) < 1e-12
    k, n = x["successes"], x["trials"]
    ph = k / n; den = 1 + z * z / n
    c = (ph + z * z / (2 * n)) / den; h = z * math.sqrt(ph * (1 - ph) / n + z * z / (4 * n * n)) / den
    assert abs(x["lo"] - max(0, c - h)) < 1e-12 and abs(x["hi"] - min(1, c + h)) < 1e-12, (x, c - h, c + h)
assert any(x["digit_accuracy"] > 0 for x in j["results"]), "an all-zero run checks little"
EOF' "$(head -c 2000 "$tmp/pkab.json")"
out=$("$LSSAR" train --data "$tmp/data/train_000.bin" --val "$tmp/data/val.bin" --vocab 300 --out "$tmp/v300" --layers 1 --heads 2 --dim 16 --seq 32 --batch 2 --steps 1 --threads 1 --quiet 2>&1)
out=$("$LSSAR" passkey --model "$SA,$tmp/v300" $PKF 2>&1); rc=$?
check "passkey pooling models of different vocabularies names the one that differs" '[ $rc -eq 2 ] && [ "$(grep -c "lssar passkey" <<<"$out")" = 1 ] && grep -q "$tmp/v300 has a vocabulary of 300 ids but $SA has 257" <<<"$out"' "$out"
out=$("$LSSAR" passkey --model "$SA,$tmp/sx/lssa" $PKF 2>&1); rc=$?
check "passkey pooling different kinds is refused" '[ $rc -eq 2 ] && grep -q "$tmp/sx/lssa (lssa attention" <<<"$out" && grep -q "seeds of one configuration" <<<"$out"' "$out"
out=$("$LSSAR" passkey --model "$SA,$SA" $PKF 2>&1); rc=$?
check "passkey --model naming a model twice is refused" '[ $rc -eq 2 ] && grep -q "twice" <<<"$out"' "$out"

# bad input: clear messages, exit 2 for flags, no crash
out=$("$LSSAR" extrapolate --out "$tmp/x" 2>&1); rc=$?
check "extrapolate without --data says so" '[ $rc -eq 2 ] && grep -q -- "--data" <<<"$out"' "$out"
out=$("$LSSAR" extrapolate --data "$tmp/data" --out "$tmp/x" --attn softmax,bogus 2>&1); rc=$?
check "unknown kind is named" '[ $rc -eq 2 ] && grep -q "bogus" <<<"$out"' "$out"
out=$("$LSSAR" extrapolate --data "$tmp/data" --out "$tmp/x" --attn softmax-p3 2>&1); rc=$?
check "a power for a kind that does not re-weight is refused" '[ $rc -eq 2 ] && grep -q "does not re-weight" <<<"$out"' "$out"
out=$("$LSSAR" extrapolate --data "$tmp/nodata" --out "$tmp/x" 2>&1); rc=$?
check "missing data folder names the fix" '[ $rc -ge 1 ] && [ $rc -lt 128 ] && grep -q "data build" <<<"$out"' "$out"
out=$("$LSSAR" passkey --model "$tmp/ex/lssa" --lengths 50 2>&1); rc=$?
check "passkey length too short" '[ $rc -eq 2 ] && grep -q "too short" <<<"$out"' "$out"
out=$("$LSSAR" passkey --model "$tmp/mq/softmax" --lengths 400 2>&1); rc=$?
check "passkey on a non-text model is refused" '[ $rc -ge 1 ] && [ $rc -lt 128 ] && grep -q "text model" <<<"$out"' "$out"
out=$("$LSSAR" attnstats --model "$tmp/none" --data "$tmp/data/val.bin" --seq 32 2>&1); rc=$?
check "attnstats on a missing model" '[ $rc -ge 1 ] && [ $rc -lt 128 ] && grep -q "no model" <<<"$out"' "$out"

echo "test_exp_sh: $pass passed, $fail failed"
[ $fail -eq 0 ]
