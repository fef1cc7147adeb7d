#!/usr/bin/env bash
# Install the Debian/Ubuntu packages lssar needs, only those missing, and say which.
set -euo pipefail
pkgs=(build-essential pkg-config libopenblas-openmp-dev libcjson-dev libpcre2-dev zlib1g-dev gnuplot-nox
      nodejs npm python3-torch python3-numpy python3-scipy python3-sympy)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm may come with nodejs from another source; accept a working npm on PATH.
if command -v npm >/dev/null 2>&1; then
  tmp=(); for p in "${missing[@]}"; do [ "$p" = npm ] || tmp+=("$p"); done; missing=("${tmp[@]+"${tmp[@]}"}")
fi
[ ${#missing[@]} -eq 0 ] && exit 0
echo "lssar: installing missing system packages: ${missing[*]}" >&2
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
