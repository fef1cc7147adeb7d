#!/usr/bin/env bash
# deps.sh - install what lssar needs, only what is missing, and say what it installs:
#   1. Debian/Ubuntu packages (apt-get);
#   2. a project-local Python virtual environment .venv (/usr/bin/python3 -m venv
#      --system-site-packages, so Debian's python3-torch/numpy/scipy/sympy stay visible) holding
#      the pinned PyPI packages of scripts/requirements.txt (tiktoken, regex). Nothing is ever
#      pip-installed into the system interpreter. .venv is made again only if missing or broken.
# Quiet when everything is present. LSSAR_VENV overrides the environment's folder (default .venv
# in the repository root).
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs=(build-essential pkg-config libopenblas-openmp-dev libcjson-dev libpcre2-dev zlib1g-dev gnuplot-nox
      python3-torch python3-numpy python3-scipy python3-sympy python3-pip python3-venv nettle-dev qemu-user
      clang libclang-rt-14-dev libomp-14-dev valgrind
      libopenmpi-dev openmpi-bin iproute2)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "lssar: installing missing system packages: ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

# ---- the virtual environment
VENV=${LSSAR_VENV:-.venv}
REQ=scripts/requirements.txt
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "lssar: $PY is missing (Debian package python3)" >&2; exit 1; }
if ! "$VENV/bin/python" -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)' >/dev/null 2>&1 ||
   ! "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
  if [ -e "$VENV" ]; then echo "lssar: $VENV is broken; making it again" >&2; rm -rf "$VENV"; fi
  echo "lssar: creating the Python virtual environment $VENV (system site packages visible)" >&2
  "$PY" -m venv --system-site-packages "$VENV" ||
    { echo "lssar: python3 -m venv failed (Debian package python3-venv)" >&2; exit 1; }
fi
# Pinned "name==version" lines; install those whose installed version differs.
want=()
while read -r line; do
  line=${line%%#*}; line=${line//[[:space:]]/}
  [ -n "$line" ] || continue
  name=${line%%==*} ver=${line#*==}
  have=$("$VENV/bin/python" -c 'import sys, importlib.metadata as m; print(m.version(sys.argv[1]))' "$name" 2>/dev/null || true)
  [ "$have" = "$ver" ] || want+=("$line")
done <"$REQ"
if [ ${#want[@]} -gt 0 ]; then
  echo "lssar: installing into $VENV from PyPI: ${want[*]}" >&2
  PIP_DISABLE_PIP_VERSION_CHECK=1 "$VENV/bin/python" -m pip install -q --no-deps "${want[@]}" >&2 ||
    { echo "lssar: pip install into $VENV failed: is PyPI reachable (network, proxy, pip config list)?" >&2; exit 1; }
fi
