#!/usr/bin/env bash
# test_layering.sh - the layers of src/ depend one way (issue 12):
#   core < attn = nn < cuda < model < train = data = text < exp = orbits = symreg < cli
# (cuda implements the nn backend table; the model reaches it only through nn/backend.h)
# A file may include headers of its own layer and of lower layers, never of a higher one;
# include/lssar.h (the public header) is allowed everywhere. Every offending #include line is
# printed as FILE:LINE: the line (LAYER includes the higher layer LAYER).
# The tests sit above every layer: no file of src/ or include/ includes anything from tests/ (the
# harnesses include the library, never the reverse), and a file of tests/ includes only tests/,
# src/, include/ or system headers.
# An include is resolved as the compiler does for -Iinclude -Isrc: next to the including file,
# then under src/, then under include/.
cd "$(dirname "$0")/.."
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; }

rank() {   # layer directory -> rank; empty for a path outside the layers
  case "$1" in
    core) echo 0 ;; attn|nn) echo 1 ;; cuda) echo 2 ;; model) echo 3 ;; train|data|text) echo 4 ;;
    exp|orbits|symreg) echo 5 ;; cli) echo 6 ;; *) echo "" ;;
  esac
}
layer_of() {   # a normalised path src/LAYER/... -> LAYER
  case "$1" in src/*/*) local r=${1#src/}; echo "${r%%/*}" ;; *) echo "" ;; esac
}

# every layer directory that exists has a rank (a new directory must be placed in the order)
for d in src/*/; do
  d=${d%/}; d=${d#src/}
  [ -n "$(rank "$d")" ] && ok "src/$d has a layer" || bad "src/$d has a layer: add it to the order in tests/test_layering.sh"
done

offending=()
while IFS= read -r f; do
  from=$(layer_of "$f"); rf=$(rank "$from")
  [ -z "$rf" ] && continue
  dir=$(dirname "$f")
  while IFS=: read -r ln line; do
    inc=$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1/' <<<"$line")
    target=""
    for cand in "$dir/$inc" "src/$inc" "include/$inc"; do
      if [ -f "$cand" ]; then target=$(realpath -m --relative-to=. "$cand"); break; fi
    done
    [ -z "$target" ] && target=$(realpath -m --relative-to=. "src/$inc")   # not found: judge by its name
    [ "$target" = "include/lssar.h" ] && continue
    to=$(layer_of "$target"); rt=$(rank "$to")
    [ -z "$rt" ] && continue
    if [ "$rt" -gt "$rf" ]; then offending+=("$f:$ln: $line   ($from includes the higher layer $to)"); fi
  done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f")
done < <(find src -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' | sort)

# the tests above the library: quoted includes resolved as for the library, plus next to the file
upward=(); outside=()
while IFS= read -r f; do
  dir=$(dirname "$f")
  while IFS=: read -r ln line; do
    inc=$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1/' <<<"$line")
    target=""
    for cand in "$dir/$inc" "src/$inc" "include/$inc" "tests/cuda_host/$inc"; do
      if [ -f "$cand" ]; then target=$(realpath -m --relative-to=. "$cand"); break; fi
    done
    case "$f" in
      tests/*) case "$target" in tests/*|src/*|include/*) ;; *) outside+=("$f:$ln: $line") ;; esac ;;
      *) case "$target" in tests/*) upward+=("$f:$ln: $line") ;; esac ;;
    esac
  done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f")
done < <(find src include tests -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.cpp' | sort)
if [ ${#upward[@]} -eq 0 ]; then
  ok "nothing in src/ or include/ includes a file of tests/"
else
  bad "nothing in src/ or include/ includes a file of tests/ (${#upward[@]} includes):"
  printf '    %s\n' "${upward[@]}"
fi
if [ ${#outside[@]} -eq 0 ]; then
  ok "tests/ includes only tests/, src/, include/ and system headers"
else
  bad "tests/ includes only tests/, src/, include/ and system headers (${#outside[@]} includes):"
  printf '    %s\n' "${outside[@]}"
fi

if [ ${#offending[@]} -eq 0 ]; then
  ok "no file in src/ includes a header of a higher layer"
else
  bad "no file in src/ includes a header of a higher layer (${#offending[@]} includes):"
  printf '    %s\n' "${offending[@]}"
fi
echo "test_layering: $pass passed, $fail failed"
[ $fail -eq 0 ]
