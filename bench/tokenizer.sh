#!/usr/bin/env bash
# tokenizer.sh - GPT-2 encoding throughput: lssar (C, PCRE2 JIT; bench/tokenizer_bench.c) against
# PyPI tiktoken (Rust, pinned in scripts/requirements.txt, run from .venv; bench/tiktoken_bench.py)
# on the same English text in the same run: one thread on the whole text, then many documents
# (the text cut into ~8 KB pieces) encoded in parallel with 1, 2, ... threads - lssar with OpenMP,
# tiktoken with encode_ordinary_batch. Prints a table with the ratio lssar / tiktoken and writes
# JSON. Timings on a shared machine are noisy: rerun before trusting them.
#
#   bench/tokenizer.sh [--text FILE] [--mb N] [--threads 1,2] [--reps N] [--json OUT]
#
# The text: --text FILE; else the corpus text under $LSSAR_DATA or ./data (the raw/sotu speeches
# in order, 1790 onwards, then other *.txt files); else Debian's licence texts and package changelogs from /usr/share. It is cut
# to N MB (default 4) and made valid UTF-8 so that both encoders see the same characters.
# --json OUT (default $BUILD/bench/tokenizer.json). Env: BUILD (default build) for the lssar build
# directory; LSSAR_VENV (default .venv) for the Python environment (scripts/deps.sh makes it).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
VENV=${LSSAR_VENV:-.venv}
DATA=${LSSAR_DATA:-data}
text="" mb=4 threads=1,2 reps=3 json=""
while [ $# -gt 0 ]; do
  case "$1" in
    --text) text=$2; shift 2 ;;
    --mb) mb=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --json) json=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "tokenizer.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
die() { echo "tokenizer.sh: error: $*" >&2; exit 1; }
json=${json:-$BUILD/bench/tokenizer.json}
DOC_BYTES=8192

make --no-print-directory -s BUILD="$BUILD" "$BUILD/bench/tokenizer_bench" || die "building $BUILD/bench/tokenizer_bench failed"
bash scripts/fetch-gpt2.sh --quiet || die "the GPT-2 files are needed (scripts/fetch-gpt2.sh)"
PY="$VENV/bin/python"
"$PY" -c 'import tiktoken' 2>/dev/null || die "$PY cannot import tiktoken: run scripts/deps.sh (it makes $VENV)"

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
    done < <({ find -L "$DATA/raw/sotu" -type f -name '*.txt' 2>/dev/null | sort
               find -L "$DATA" -type f -name '*.txt' -size +1k -not -path '*/raw/sotu/*' 2>/dev/null | sort; })
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
"$PY" bench/tiktoken_bench.py prepare "$tmp/raw" "$tmp/text.txt" "$max"
bytes=$(stat -c %s "$tmp/text.txt")
[ "$bytes" -gt 0 ] || die "no text to encode"
load="$(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "text: $bytes bytes from $src; reps $reps; $load"

"$BUILD/bench/tokenizer_bench" "$tmp/text.txt" --reps "$reps" --threads "$threads" --doc-bytes $DOC_BYTES > "$tmp/c.out" || die "tokenizer_bench failed"
"$PY" bench/tiktoken_bench.py run "$DATA/gpt2" "$tmp/text.txt" "$reps" "$threads" $DOC_BYTES > "$tmp/py.out" || die "bench/tiktoken_bench.py failed"

mkdir -p "$(dirname "$json")"
awk -v json="$json" -v bytes="$bytes" -v src="$src" -v load="$load" '
  $1 != "RESULT" { next }
  $2 == "lssar" { l1 = $4; lt = $5; lload = $6; next }
  $2 == "lssar-docs" { ld[$3] = $4; nd = $5; order[++n] = $3; next }
  $2 == "tiktoken-docs" { td[$3] = $4; next }
  $2 ~ /^tiktoken-/ { tname = $2; t1 = $4; tt = $5; tload = $6; next }
  END {
    printf "%-34s %7s %10s %16s %9s\n", "encoder", "threads", "MB/s", "lssar/tiktoken", "load ms"
    printf "%-34s %7d %10.2f %16s %9.1f\n", "lssar (C, PCRE2 JIT)", 1, l1, "", lload
    printf "%-34s %7d %10.2f %15.2fx %9.1f\n", tname " (Rust)", 1, t1, l1 / t1, tload
    for (i = 1; i <= n; i++) {
      k = order[i]
      printf "%-34s %7d %10.2f %16s %9s\n", "lssar, " nd " documents (OpenMP)", k, ld[k], "", ""
      printf "%-34s %7d %10.2f %15.2fx %9s\n", "tiktoken, encode_ordinary_batch", k, td[k], ld[k] / td[k], ""
    }
    if (tt != lt) printf "WARNING: token counts differ: lssar %d, tiktoken %d (U+0085/U+FEFF in the text?)\n", lt, tt
    else print "token counts: both encoders give " lt " tokens"
    printf "{\n  \"text_bytes\": %d,\n  \"text_source\": \"%s\",\n  \"machine\": \"%s\",\n  \"tokens\": {\"lssar\": %d, \"tiktoken\": %d},\n", bytes, src, load, lt, tt > json
    printf "  \"tiktoken\": \"%s\",\n  \"single_thread_MBps\": {\"lssar\": %.2f, \"tiktoken\": %.2f, \"ratio\": %.3f},\n", tname, l1, t1, l1 / t1 > json
    printf "  \"load_ms\": {\"lssar\": %.1f, \"tiktoken\": %.1f},\n  \"documents\": %d,\n  \"many_documents\": [", lload, tload, nd > json
    for (i = 1; i <= n; i++) { k = order[i]; sep = (i > 1) ? "," : ""; printf "%s\n    {\"threads\": %d, \"lssar_MBps\": %.2f, \"tiktoken_MBps\": %.2f, \"ratio\": %.3f}", sep, k, ld[k], td[k], ld[k] / td[k] > json }
    printf "\n  ]\n}\n" > json
  }' "$tmp/c.out" "$tmp/py.out"
echo "wrote $json"
