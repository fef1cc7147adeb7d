#!/usr/bin/env bash
# deps.sh - install what lssar needs, only what is missing, and say what it installs:
#   1. Debian/Ubuntu packages (apt-get);
#   2. a project-local Python virtual environment .venv (/usr/bin/python3 -m venv
#      --system-site-packages, so Debian's python3-torch/numpy/scipy/sympy stay visible) holding
#      the pinned PyPI packages of scripts/requirements.txt (tiktoken, regex). Nothing is ever
#      pip-installed into the system interpreter. .venv is made again only if missing or broken.
#   3. with --torch2 (the tests that need it ask for it), also a second environment .venv-torch2
#      with a modern PyTorch (scripts/requirements-torch2.txt: torch 2.13, lm-evaluation-harness,
#      transformers), made without the system site packages so that Debian's torch 1.13 stays out.
# Quiet when everything is present. LSSAR_VENV overrides the environment's folder (default .venv
# in the repository root), LSSAR_VENV_TORCH2 the second one's (default .venv-torch2).
set -euo pipefail
cd "$(dirname "$0")/.."
torch2=0
case "${1:-}" in
  --torch2) torch2=1 ;;
  "") ;;
  *) echo "deps.sh: unknown argument '$1' (--torch2 or nothing)" >&2; exit 2 ;;
esac
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

# ---- the virtual environments
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "lssar: $PY is missing (Debian package python3)" >&2; exit 1; }
# venv_sync DIR REQUIREMENTS [VENV FLAGS]: make DIR if missing or broken, then install the pinned
# "name==version" lines whose installed version differs.
venv_sync() {
  local venv=$1 req=$2; shift 2
  if ! "$venv/bin/python" -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)' >/dev/null 2>&1 ||
     ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
    if [ -e "$venv" ]; then echo "lssar: $venv is broken; making it again" >&2; rm -rf "$venv"; fi
    echo "lssar: creating the Python virtual environment $venv${1:+ ($*)}" >&2
    "$PY" -m venv "$@" "$venv" ||
      { echo "lssar: python3 -m venv failed (Debian package python3-venv)" >&2; exit 1; }
  fi
  local want=()
  # one interpreter for every line (the torch2 list has a hundred)
  mapfile -t want < <("$venv/bin/python" - "$req" <<'PYEOF'
import sys, importlib.metadata as m
for line in open(sys.argv[1]):
    line = "".join(line.split("#")[0].split())
    if not line:
        continue
    name, ver = line.split("==")
    try:
        have = m.version(name)
    except m.PackageNotFoundError:
        have = None
    if have != ver:
        print(line)
PYEOF
)
  if [ ${#want[@]} -gt 0 ]; then
    echo "lssar: installing into $venv from PyPI: ${want[*]}" >&2
    PIP_DISABLE_PIP_VERSION_CHECK=1 "$venv/bin/python" -m pip install -q --no-deps "${want[@]}" >&2 ||
      { echo "lssar: pip install into $venv failed: is PyPI reachable (network, proxy, pip config list)?" >&2; exit 1; }
  fi
}
# --system-site-packages: Debian's python3-torch/numpy/scipy/sympy stay visible
venv_sync "${LSSAR_VENV:-.venv}" scripts/requirements.txt --system-site-packages
# the modern PyTorch on its own: nothing of Debian's site packages (torch 1.13, numpy) in it
[ "$torch2" = 1 ] && venv_sync "${LSSAR_VENV_TORCH2:-.venv-torch2}" scripts/requirements-torch2.txt
exit 0
