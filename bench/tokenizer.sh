#!/usr/bin/env bash
# tokenizer.sh - GPT-2 encoding throughput: lssar (C) against js-tiktoken@1.0.21 (JavaScript) and
# tiktoken@1.0.22 (Rust compiled to WASM) on the same English text in the same run, one thread
# each; then lssar encoding many documents in parallel with 1 and 2 threads (the corpus builder's
# pattern). Prints a table. Timings on a shared machine are noisy: rerun before trusting them.
#
#   bench/tokenizer.sh [--text FILE] [--mb N] [--threads 1,2] [--reps N]
#
# The text: --text FILE; else the corpus text (*.txt) under $LSSAR_DATA or ./data; else Debian's
# licence texts and package changelogs from /usr/share (English, varied). It is cut to N MB
# (default 4) and made valid UTF-8 so that every encoder sees the same characters.
# Env: BUILD (default build) for the lssar build directory; LSSAR_NODE_DIR (default
# build/node) for the npm packages (installed on first use from tests/node/package-lock.json).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
NODE_DIR=${LSSAR_NODE_DIR:-$BUILD/node}
DATA=${LSSAR_DATA:-data}
text="" mb=4 threads=1,2 reps=3
while [ $# -gt 0 ]; do
  case "$1" in
    --text) text=$2; shift 2 ;;
    --mb) mb=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "tokenizer.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
die() { echo "tokenizer.sh: error: $*" >&2; exit 1; }

make --no-print-directory -s BUILD="$BUILD" "$BUILD/bench/tokenizer_bench" || die "building $BUILD/bench/tokenizer_bench failed"
bash scripts/fetch-gpt2.sh --quiet || die "the GPT-2 files are needed (scripts/fetch-gpt2.sh)"
command -v node >/dev/null || die "node is not installed (apt-get install nodejs)"
mkdir -p "$NODE_DIR"
if [ ! -f "$NODE_DIR/node_modules/tiktoken/package.json" ] || ! cmp -s tests/node/package-lock.json "$NODE_DIR/package-lock.json"; then
  cp tests/node/package.json tests/node/package-lock.json "$NODE_DIR/"
  (cd "$NODE_DIR" && npm ci --no-audit --no-fund --silent) || die "npm ci in $NODE_DIR failed: is the npm registry reachable?"
fi
cp bench/node/bench.mjs "$NODE_DIR/"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/lssar-tokbench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
max=$((mb * 1000000))
if [ -n "$text" ]; then
  [ -f "$text" ] || die "--text $text: no such file"
  cp "$text" "$tmp/raw"; src=$text
else
  : > "$tmp/raw"
  if [ -d "$DATA" ]; then
    while IFS= read -r f; do
      cat "$f" >> "$tmp/raw"; printf '\n\n' >> "$tmp/raw"
      [ "$(stat -c %s "$tmp/raw")" -ge "$max" ] && break
    done < <(find -L "$DATA" -type f -name '*.txt' -size +1k 2>/dev/null | sort)
  fi
  src="corpus text under $DATA"
  if [ "$(stat -c %s "$tmp/raw")" -lt $((max / 2)) ]; then
    src="/usr/share licence texts and changelogs"
    cat /usr/share/common-licenses/* >> "$tmp/raw" 2>/dev/null || true
    for f in /usr/share/doc/*/changelog*.gz; do
      zcat "$f" >> "$tmp/raw" 2>/dev/null || true
      [ "$(stat -c %s "$tmp/raw")" -ge "$max" ] && break
    done
  fi
fi
node "$NODE_DIR/bench.mjs" prepare "$tmp/raw" "$tmp/text.txt" "$max"
bytes=$(stat -c %s "$tmp/text.txt")
[ "$bytes" -gt 0 ] || die "no text to encode"
echo "text: $bytes bytes from $src; reps $reps; $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"

"$BUILD/bench/tokenizer_bench" "$tmp/text.txt" --reps "$reps" --threads "$threads" > "$tmp/c.out" || die "tokenizer_bench failed"
node "$NODE_DIR/bench.mjs" run "$tmp/text.txt" "$((reps < 2 ? reps : 2))" > "$tmp/js.out" || die "node bench.mjs failed"

awk '
  $1 == "RESULT" && $2 == "lssar" { l = $4; lt = $5; printf "%-26s %7s %10s %13s %9s\n", "encoder", "threads", "MB/s", "lssar faster", "load ms";
                                    printf "%-26s %7d %10.2f %13s %9.1f\n", "lssar (C, PCRE2 JIT)", 1, l, "-", $6; next }
  $1 == "RESULT" && $2 == "lssar-docs" { docs[++nd] = $0; next }
  $1 == "RESULT" { printf "%-26s %7d %10.2f %12.1fx %9.1f\n", $2, $3, $4, l / $4, $6;
                   if ($5 != lt) mismatch = mismatch " " $2 "(" $5 " tokens vs " lt ")" }
  END {
    for (i = 1; i <= nd; i++) { split(docs[i], f, " "); printf "%-26s %7d %10.2f %13s %9s   (%d documents, %.2fx vs 1 thread)\n", "lssar, many documents", f[3], f[4], "", "", f[5], f[6] }
    if (mismatch != "") printf "WARNING: token counts differ:%s\n", mismatch; else print "token counts: all encoders agree"
  }' "$tmp/c.out" "$tmp/js.out"
