#!/usr/bin/env bash
# test_tokenizer_parity.sh - `lssar tokenize` gives exactly js-tiktoken@1.0.21's GPT-2 ids on a
# varied set of documents (tests/node/parity.mjs: prose, code, emoji, CJK, combining marks, runs
# of spaces and newlines, numbers, contractions in both cases, mixed scripts, 600 random mixes,
# and samples of corpus text under the data directory if any), with and without allow_special;
# plus command-line round trips on binary input (invalid UTF-8, NULs) and token shards, and the
# command's errors.
#
# Needs node and npm (the npm registry on first run): the reference packages are installed from
# tests/node/package-lock.json into build/node (LSSAR_NODE_DIR overrides) and reused after.
# LSSAR_BIN picks the lssar binary (default build/lssar).
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${LSSAR_BIN:-build/lssar}
NODE_DIR=${LSSAR_NODE_DIR:-build/node}
DATA=${LSSAR_DATA:-data}
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "  FAIL $*" >&2; }
finish() { echo "test_tokenizer_parity: $pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit $?; }
die() { bad "$*"; finish; }

[ -x "$BIN" ] || die "$BIN not found: build it first (make)"
bash scripts/fetch-gpt2.sh --quiet || die "scripts/fetch-gpt2.sh failed: the GPT-2 files are needed"
command -v node >/dev/null || die "node is not installed (Debian: apt-get install nodejs, or scripts/deps.sh)"

# ---- reference packages, installed once (again only when the lock file changes)
mkdir -p "$NODE_DIR"
if [ ! -f "$NODE_DIR/node_modules/js-tiktoken/package.json" ] || ! cmp -s tests/node/package-lock.json "$NODE_DIR/package-lock.json"; then
  command -v npm >/dev/null || die "npm is not installed (Debian: apt-get install npm)"
  cp tests/node/package.json tests/node/package-lock.json "$NODE_DIR/"
  echo "installing js-tiktoken and tiktoken into $NODE_DIR (npm ci)"
  (cd "$NODE_DIR" && npm ci --no-audit --no-fund --silent) || die "npm ci in $NODE_DIR failed: is the npm registry reachable?"
fi
cp tests/node/*.mjs "$NODE_DIR/"   # run from there so `import 'js-tiktoken'` finds node_modules

tmp=$(mktemp -d "${TMPDIR:-/tmp}/lssar-parity.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# ---- parity of ids, one document per line
samples=()
if [ -d "$DATA" ]; then
  # Up to 3 files per directory (per corpus), at most 16.
  while IFS= read -r f; do samples+=("$f"); done < <(find -L "$DATA" -type f -name '*.txt' -size +1k 2>/dev/null | sort |
    awk '{ d = $0; sub(/\/[^\/]*$/, "", d) } seen[d]++ < 3' | head -16)
fi
node "$NODE_DIR/parity.mjs" "$tmp" "${samples[@]+"${samples[@]}"}" || die "node parity.mjs failed"

compare() {  # name, reference ids, lssar ids, documents
  local r
  r=$(awk -v name="$1" 'FILENAME == ARGV[1] { ref[FNR] = $0; next }
        FILENAME == ARGV[2] { got[FNR] = $0; n = FNR; next }
        { doc[FNR] = $0 }
        END {
          for (i = 1; i <= length(ref); i++) {
            if (ref[i] == got[i]) p++
            else { f++; if (f <= 5) printf "  FAIL %s document %d: %.200s\n    js-tiktoken: %.200s\n    lssar:       %.200s\n", name, i, doc[i], ref[i], got[i] > "/dev/stderr" }
          }
          printf "%d %d\n", p, f
        }' "$2" "$3" "$4")
  pass=$((pass + ${r% *})); fail=$((fail + ${r#* }))
  echo "$1: ${r% *} of $(( ${r% *} + ${r#* } )) documents identical to js-tiktoken"
}
"$BIN" tokenize --jsonl --in "$tmp/ordinary.jsonl" > "$tmp/ordinary.got" || die "lssar tokenize --jsonl failed"
"$BIN" tokenize --jsonl --allow-special --in "$tmp/special.jsonl" > "$tmp/special.got" || die "lssar tokenize --jsonl --allow-special failed"
[ "$(wc -l < "$tmp/ordinary.got")" -eq "$(wc -l < "$tmp/ordinary.ref")" ] || bad "line counts differ (ordinary)"
compare "ordinary" "$tmp/ordinary.ref" "$tmp/ordinary.got" "$tmp/ordinary.jsonl"
compare "allow_special" "$tmp/special.ref" "$tmp/special.got" "$tmp/special.jsonl"
if [ -f "$tmp/ordinary.wasm" ]; then  # informational: tiktoken reads \s as Unicode White_Space
  same=$(paste -d '\n' "$tmp/ordinary.wasm" "$tmp/ordinary.got" | awk 'NR % 2 { a = $0; next } a == $0 { s++ } END { print s + 0 }')
  echo "info: tiktoken (wasm) agrees on $same of $(wc -l < "$tmp/ordinary.got") documents (it differs on U+0085 and U+FEFF)"
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
out=$(printf '' | "$BIN" tokenize); rc=$?
[ $rc -eq 0 ] && [ -z "$out" ] && ok || bad "empty input should print an empty line and exit 0 (exit $rc)"
[ ! -e "$tmp/empty.bin" ] && ok || bad "a failed --out left a file behind"

finish
