#!/usr/bin/env bash
# test_reproduce.sh - `lssar reproduce` (issue 17: the whole comparison as one plan of lssar
# commands on worker processes) at smoke size: flags, the plan, a run end to end with its report
# (data hashes checked against sha256sum), a rerun that runs nothing, a runner killed with -9
# (no job left running; the rerun gives the same numbers as the uninterrupted run), and a failing
# job (its dependents stop, the others finish; fixed and rerun, it completes).
# Binary: $LSSAR_BIN, else $BUILD/lssar (build/). Ends with "test_reproduce: N passed, M failed".
cd "$(dirname "$0")/.."
B=${BUILD:-build}
LSSAR=${LSSAR_BIN:-$B/lssar}
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; [ -n "$2" ] && printf '%s\n' "$2" | tail -8 | sed 's/^/    /'; }
finish() { echo "test_reproduce: $pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit $?; }
if [ ! -x "$LSSAR" ]; then echo "test_reproduce: $LSSAR is not built"; fail=1; finish; fi
LSSAR=$(cd "$(dirname "$LSSAR")" && pwd)/$(basename "$LSSAR")
tmp=$(mktemp -d /tmp/lssar_reproduce_XXXXXX)
trap 'pkill -9 -f "$tmp/" 2>/dev/null; rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1
# 2 x (7 extrapolate kinds + gather + attnstats) (D = 64, D = 16), 2 head sizes + 5 cause experiments,
# 7 passkey trainings + gather, 8 passkey scores, orbits
NJOBS=55

# the corpus: our own docs as byte tokens (held-out documents of >= 520 tokens for the 2x windows)
if ! "$LSSAR" data build --corpus text --text docs --tokenizer byte --val-frac 0.3 --out "$tmp/d" --quiet >/dev/null 2>&1; then
  bad "data build --text docs"; finish
fi
S=(reproduce --scale smoke --data "$tmp/d")

# 1. flags
out=$("$LSSAR" reproduce --help 2>&1)
if [ $? -eq 0 ] && grep -q -- "--scale" <<<"$out" && grep -q "laptop" <<<"$out" && grep -q "Resumable" <<<"$out"; then ok "--help: scales, resume"; else bad "--help" "$out"; fi
out=$("$LSSAR" reproduce --scale huge 2>&1); rc=$?
if [ $rc -eq 2 ] && grep -q "smoke or laptop" <<<"$out"; then ok "unknown --scale: exit 2, the scales named"; else bad "--scale huge (exit $rc)" "$out"; fi
out=$("$LSSAR" reproduce --jobs 0 2>&1); rc=$?
if [ $rc -eq 2 ] && grep -q -- "--jobs must be" <<<"$out"; then ok "--jobs 0: exit 2"; else bad "--jobs 0 (exit $rc)" "$out"; fi

# 2. the plan: every job an lssar command, after what it needs; a data job only when the data is missing
out=$("$LSSAR" "${S[@]}" --out "$tmp/never" --dry-run 2>&1); rc=$?
n=$(grep -c '^lssar ' <<<"$out")
if [ $rc -eq 0 ] && [ "$n" -eq $NJOBS ] && [ ! -e "$tmp/never" ] && grep -q '^# extrapolate/all .*after extrapolate/softmax' <<<"$out" \
   && grep -q '^lssar orbits run --scale smoke ' <<<"$out" && grep -q '^lssar passkey .*--attn lssar --p 15 ' <<<"$out" \
   && ! grep -q '^lssar data build' <<<"$out"; then ok "--dry-run: $NJOBS commands with their dependencies, nothing written"
else bad "--dry-run (exit $rc, $n commands)" "$out"; fi
out=$("$LSSAR" reproduce --scale smoke --data "$tmp/nodata" --out "$tmp/never" --dry-run 2>&1)
if [ "$(grep '^lssar ' <<<"$out" | head -1 | cut -d' ' -f2-3)" = "data build" ] && grep -q '^# extrapolate/softmax .*after data' <<<"$out"; then
  ok "missing data: a first job builds it"; else bad "missing data" "$out"; fi
out=$("$LSSAR" reproduce --scale laptop --dry-run 2>&1)
if grep -q -- '--attn sigmoid .*--heads 2 --dim 128 .*--factors 1,2,4,8,16,32,64 --seeds 3 ' <<<"$out" \
   && grep -q -- 'extrapolate-d16 --attn sigmoid .*--heads 4 --dim 64 .*--factors 1,2,4,8,16,32 --seeds 3 ' <<<"$out" \
   && grep -q -- 'headsize/d16 --attn softmax,lssar --lssar-p 15 .*--heads 8 --dim 128 ' <<<"$out" \
   && grep -q -- 'headsize/d128 .*--heads 1 --dim 128 ' <<<"$out" \
   && grep -q -- 'causes/d64-rope38 .*--heads 2 --dim 128 .*--rope-base 38' <<<"$out" \
   && grep -q -- 'causes/d16-temp64 .*--heads 8 --dim 128 .*--temp-d 64' <<<"$out" \
   && grep -q -- 'passkey --attn lssar .*--heads 2 --dim 128 --seq 320 .*--passkey-mix 0.75 --passkey-short --factors 1 --seeds 1 ' <<<"$out" \
   && grep -q -- '--lengths 320,640,1280,2560,5120 ' <<<"$out" \
   && grep -q 'orbits run --scale laptop --attn softmax,lssar --heads 1 ' <<<"$out" \
   && grep -q -- 'ablation --attn softmax+cos+rw-p15 .*--heads 2 --dim 128 .*--factors 1,2,4,8,16,32 --seeds 3 ' <<<"$out" \
   && grep -q -- 'ablation --attn softmax,softmax+cos,softmax+cos+rw-p15,softmax+rw-p15,ssmax,ssmax+rw-p15,lssa,lssar-p1,lssar-p3,lssar-p7,lssar-p15,lssar-p31 ' <<<"$out"; then
  ok "laptop plan: 7 kinds x 3 seeds at D = 64 (1x-64x) and D = 16, head sizes, causes, the stage ablation, passkey 1x-16x, orbits at D = 64"
else bad "laptop plan" "$out"; fi

# 3. the smoke run end to end, 2 jobs at a time
out=$("$LSSAR" "${S[@]}" --out "$tmp/r" 2>&1); rc=$?
if [ $rc -eq 0 ] && grep -q "reproduce (smoke): done" <<<"$out" && grep -q "ETA" <<<"$out" && [ "$(ls "$tmp/r/jobs" | wc -l)" -eq $NJOBS ]; then
  ok "smoke run: $NJOBS jobs, progress with ETA"; else bad "smoke run (exit $rc)" "$out"; fi
if python3 - "$tmp/r" "$tmp/d" $NJOBS <<'EOF'
import hashlib, json, os, sys
d, data, njobs = sys.argv[1], sys.argv[2], int(sys.argv[3])
r = json.load(open(d + "/report.json"))
assert r["scale"] == "smoke" and r["workers"] == 2 and len(r["jobs"]) == njobs, r.keys()
assert all(j["state"] == "done" and j["exit"] == 0 and j["command"].startswith("lssar ") and not j["reused"] for j in r["jobs"])
names = [g["name"] for g in r["extrapolate"]["groups"]]
for k in ["softmax", "ssmax", "sigmoid", "relu", "lssa", "lssar-p3", "lssar-p15", "lssa+lssar-p15"]:
    assert k in names, names
assert all(g["seeds"] == [1337, 1338] for g in r["extrapolate"]["groups"])
assert len(r["passkey"]) == 8 and all(c["trials"] == 2 for p in r["passkey"].values() for c in p["results"])
assert r["passkey_training"]["groups"] and r["attnstats"]["groups"]
assert r["orbits"]["softmax"]["eval"] and r["orbits"]["lssar"]["newton"] and r["orbits"]["oracle"]["newton"]
files = {x["file"]: x for x in r["data"]}
for f in ["train_000.bin", "val.bin", "val_index.json", "manifest.json"]:
    p = os.path.join(data, f)
    assert files[p]["sha256"] == hashlib.sha256(open(p, "rb").read()).hexdigest() and files[p]["bytes"] == os.path.getsize(p), p
assert any(p.endswith("orbits/data/train_000000.bin") for p in files)
md = open(d + "/REPORT.md").read()
for h in ["## Data", "## 1. Length extrapolation", "## 1b. The same at head size D = 16", "## 1c. Why head size matters",
          "## 2. Attention statistics", "## 3. Passkey retrieval", "## 4. Orbits", "## Jobs", "| lssa+lssar-p15 |", "pooled over",
          "](extrapolate/loss_vs_length.png)", "](extrapolate/loss_vs_position.png)", "](orbits/forces.png)", "### Next-position",
          "Loss by position inside", "| d16-temp64 |", "| d64-rope38 | D = 64, RoPE base 38",
          "## 1d. Which stage carries the flat loss", "| softmax+cos+rw-p15 |", "](ablation/loss_vs_length.png)"]:
    assert h in md, h
# the head-size rows (16, 32 from OUT/headsize, 64 from section 1) and the causes, with intervals over the 2 seeds
hs = r["head_size"]
assert [x["D"] for x in hs] == [16, 32, 64] and all(len(x[k]["rise"]["ci95"]) == 2 for x in hs for k in ["softmax", "lssar-p15"]), hs
assert all("lssar_minus_softmax_rx" in x for x in hs) and r["head_size_rise_factor"] == 2
c = r["causes"]
assert set(c) == {"d64-rope38", "d16-temp64", "d64-temp16", "d16-temp8", "d64-temp256"}, c.keys()
assert set(c["d64-rope38"]) == {"change", "softmax", "lssar-p15"} and "rise_minus_unchanged" in c["d16-temp8"]["lssar-p15"]
assert r["extrapolate_d16"]["groups"] and r["attnstats_d16"]["groups"]
# the ablation: every run's rise and every stage's paired effect, with intervals over the 2 seeds
ar, st = r["ablation_rise"], r["ablation_stages"]
assert len(ar) == 12 and all(len(x["rise"]["ci95"]) == 2 for x in ar.values()), ar
assert len(st) == 11 and all(len(x[k]["ci95"]) == 2 for x in st.values() for k in ["at_1x", "at_rx", "at_longest", "on_rise"]), st
assert {g["name"] for g in r["ablation"]["groups"]} >= {"softmax+cos", "softmax+rw-p15", "ssmax+rw-p15", "lssar-p31"}
pp = [g["per_position"] for g in r["extrapolate"]["groups"]]
assert all(p["seq"] == 64 and len(p["loss"]) == len(p["start"]) == 64 for p in pp), pp[0]
# the per-position curve of each run averages to its loss at the longest length (equal bins)
for run in r["extrapolate"]["runs"]:
    pl, last = run["per_position"], run["results"][-1]["loss"]
    assert abs(sum(pl) / len(pl) - last) < 1e-9 * abs(last), (run["name"], sum(pl) / len(pl), last)
assert md.count("| ") > 50
EOF
then ok "report: REPORT.md sections, report.json (every job, every kind, seeds, passkey, orbits), data SHA-256 = sha256sum"
else bad "report"; fi
if [ -s "$tmp/r/commands.sh" ] && [ "$(grep -c '^lssar ' "$tmp/r/commands.sh")" -eq $NJOBS ] && grep -q '^\$ lssar extrapolate' "$tmp/r/logs/extrapolate-softmax.log"; then
  ok "commands.sh holds the plan; each job's log starts with its command"; else bad "commands.sh / logs"; fi

# 4. a rerun runs nothing and reports the same
cp "$tmp/r/report.json" "$tmp/report1.json"
out=$("$LSSAR" "${S[@]}" --out "$tmp/r" 2>&1); rc=$?
if [ $rc -eq 0 ] && grep -q "$NJOBS of $NJOBS jobs finished in an earlier run" <<<"$out" && ! grep -q "reproduce: start" <<<"$out" \
   && python3 -c "
import json, sys
a, b = json.load(open('$tmp/report1.json')), json.load(open('$tmp/r/report.json'))
assert all(j['reused'] for j in b['jobs']) and [j['seconds'] for j in a['jobs']] == [j['seconds'] for j in b['jobs']]
assert a['extrapolate']['groups'] == b['extrapolate']['groups'] and a['passkey'] == b['passkey']
"; then ok "rerun: every job kept with its wall time, the same results"; else bad "rerun (exit $rc)" "$out"; fi

# 4b. --report-only: the report of what OUT holds, nothing run
out=$("$LSSAR" "${S[@]}" --out "$tmp/r" --report-only 2>&1); rc=$?
if [ $rc -eq 0 ] && grep -q "$NJOBS of $NJOBS jobs recorded as done" <<<"$out" && ! grep -q "reproduce: start" <<<"$out" \
   && python3 -c "
import json
a, b = json.load(open('$tmp/report1.json')), json.load(open('$tmp/r/report.json'))
assert a['extrapolate'] == b['extrapolate'] and a['head_size'] == b['head_size'] and a['causes'] == b['causes'] and a['passkey'] == b['passkey']
assert a['ablation_stages'] == b['ablation_stages']
"; then ok "--report-only on a finished run: the same tables, nothing run"; else bad "--report-only (exit $rc)" "$out"; fi
out=$("$LSSAR" "${S[@]}" --out "$tmp/empty" --report-only 2>&1); rc=$?
if [ $rc -eq 0 ] && grep -q "0 of $NJOBS jobs recorded as done" <<<"$out" && grep -q "not run yet" "$tmp/empty/REPORT.md" \
   && [ ! -e "$tmp/empty/logs" ]; then ok "--report-only on an empty folder: every job 'not run yet', nothing started"
else bad "--report-only on an empty folder (exit $rc)" "$out"; fi

# 5. the runner killed with -9 while jobs run: no job keeps running, and the rerun ends with the same numbers
"$LSSAR" "${S[@]}" --out "$tmp/k" --jobs 1 > "$tmp/k.log" 2>&1 &
pid=$!
for i in $(seq 1 600); do [ "$(ls "$tmp/k/jobs" 2>/dev/null | wc -l)" -ge 4 ] && break; sleep 0.1; done
kill -9 $pid; wait $pid 2>/dev/null
sleep 1
left=$(pgrep -f "$tmp/k/" | wc -l)
done_before=$(ls "$tmp/k/jobs" | wc -l)
out=$("$LSSAR" "${S[@]}" --out "$tmp/k" 2>&1); rc=$?
if [ "$left" -eq 0 ] && [ "$done_before" -ge 4 ] && [ "$done_before" -lt $NJOBS ] && [ $rc -eq 0 ] && grep -q "$done_before of $NJOBS jobs finished in an earlier run" <<<"$out" \
   && python3 -c "
import json
a, b = json.load(open('$tmp/r/report.json')), json.load(open('$tmp/k/report.json'))
strip = lambda gs: [{k: v for k, v in g.items() if k != 'runs'} for g in gs]
assert strip(a['extrapolate']['groups']) == strip(b['extrapolate']['groups'])
assert a['passkey_training']['groups'] == b['passkey_training']['groups']
cells = lambda r: [[(c['length'], c['depth'], c['successes'], c['trials'], c['digit_accuracy']) for c in p['results']] for p in r['passkey'].values()]
assert cells(a) == cells(b)
ea, eb = a['orbits']['softmax']['eval'], b['orbits']['softmax']['eval']
assert [ea[k] for k in ['loss', 'accuracy', 'compared']] == [eb[k] for k in ['loss', 'accuracy', 'compared']]
"; then ok "kill -9 after $done_before jobs: no orphan job, the rerun keeps them and ends with the uninterrupted run's numbers"
else bad "kill -9 and resume (left $left, done $done_before, exit $rc)" "$out"; fi

# 6. a job that fails stops its dependents only; fixed, the rerun completes
cp -r "$tmp/d" "$tmp/bad"
echo '{ broken' > "$tmp/bad/val_index.json"
out=$("$LSSAR" reproduce --scale smoke --data "$tmp/bad" --out "$tmp/f" 2>&1); rc=$?
if [ $rc -eq 1 ] && grep -q "FAILED extrapolate/softmax" <<<"$out" && grep -q "    | " <<<"$out" && grep -q "could not start without them" <<<"$out" \
   && grep -q "reproduce: done orbits" <<<"$out" && [ -f "$tmp/f/jobs/orbits.json" ] && [ ! -f "$tmp/f/jobs/extrapolate-all.json" ] \
   && grep -q "FAILED" "$tmp/f/REPORT.md"; then ok "a failing job: exit 1, its log's end printed, dependents not run, orbits finished"
else bad "failing job (exit $rc)" "$out"; fi
cp "$tmp/d/val_index.json" "$tmp/bad/val_index.json"
out=$("$LSSAR" reproduce --scale smoke --data "$tmp/bad" --out "$tmp/f" 2>&1); rc=$?
if [ $rc -eq 0 ] && grep -q "jobs finished in an earlier run" <<<"$out" && ! grep -q "start orbits" <<<"$out"; then ok "fixed and rerun: completes, orbits kept"
else bad "rerun after the fix (exit $rc)" "$out"; fi
finish
