#!/usr/bin/env bash
# test_install.sh - `make install PREFIX=DIR` lays out the header, libraries, pkg-config file and
# program, and `pkg-config --static --libs lssar` is complete: a program links against the
# static library alone (no liblssar.so at run time) and runs.
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; [ -n "${2:-}" ] && printf '%s\n' "$2" | tail -8 | sed 's/^/    /'; }
tmp=$(mktemp -d /tmp/lssar_install_XXXXXX)
trap 'rm -rf "$tmp"' EXIT

out=$(make --no-print-directory BUILD="$BUILD" install PREFIX="$tmp/prefix" 2>&1) && ok "make install" || bad "make install" "$out"
for f in include/lssar.h lib/liblssar.a lib/liblssar.so lib/pkgconfig/lssar.pc bin/lssar; do
  [ -f "$tmp/prefix/$f" ] && ok "installed $f" || bad "installed $f"
done

cat > "$tmp/prog.c" <<'C'
#include <stdio.h>
#include <lssar.h>
/* One LSSAR forward through the installed library, and one refused call. */
int main(void) {
    float x[2 * 4] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f}, out[8];
    lssar_attn_desc a = {LSSAR_ATTN_LSSAR, 15.0f, NULL};
    if (lssar_attn_forward(&a, 1, 2, 1, 4, x, x, x, out) != 0) return 1;
    if (lssar_attn_forward(&a, 1, 0, 1, 4, x, x, x, out) != LSSAR_E_SIZE) return 2;
    printf("%s %.6f\n", lssar_attn_name(a.kind), out[4]);
    return 0;
}
C
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
cflags=$(pkg-config --cflags lssar) && libs=$(pkg-config --static --libs lssar) && ok "pkg-config knows lssar" || bad "pkg-config knows lssar"
# -l:liblssar.a makes the linker take the static library although the .so sits beside it.
out=$(cc "$tmp/prog.c" -o "$tmp/prog" $cflags ${libs/-llssar/-l:liblssar.a} 2>&1) && ok "static link with pkg-config --static --libs" || bad "static link with pkg-config --static --libs" "$out"
if [ -x "$tmp/prog" ]; then
  run=$("$tmp/prog" 2>&1); rc=$?
  [ $rc -eq 0 ] && [[ "$run" == lssar* ]] && ok "statically linked program runs ($run)" || bad "statically linked program runs (exit $rc)" "$run"
  ldd "$tmp/prog" | grep -q liblssar && bad "program does not need liblssar.so" || ok "program does not need liblssar.so"
fi
"$tmp/prefix/bin/lssar" --version | grep -q '^lssar ' && ok "installed lssar runs" || bad "installed lssar runs"
echo "test_install: $pass passed, $fail failed"
[ $fail -eq 0 ]
