#!/bin/sh
# bench/sass.sh - the fused attention kernels' machine code, read without a GPU (issue 35): per
# kernel, kind and head size, registers, spills, shared memory, CTAs per SM, main-loop instructions
# per tensor-core op, and whether ldmatrix / cp.async / wgmma / TMA appear, against the goals at
# D = 64, bf16. A benchmark: it prints (and writes JSON with --json FILE); a missed goal is not an
# error. bench/sass.py says how each figure is read.
#
#   bench/sass.sh [--quick] [--arch sm_90a|sm_80] [--D 16 32 64 128] [--all] [--json FILE]
#
# Builds the nvcc object of src/cuda/flash_attn.cu first (make's rule: build-cuda/, every
# architecture); --quick builds sm_90a only, into build-sass/ (a few minutes less of nvcc).
# cuobjdump: PATH, then $CUDA_HOME/bin, then the project venv's PyPI package
# nvidia-cuda-cuobjdump (scripts/requirements.txt; `make deps` installs it).
set -eu
cd "$(dirname "$0")/.."
build=build-cuda arch=""
case "${1:-}" in
-h|--help) sed -n '2,12p' "$0"; python3 bench/sass.py --help | sed -n '/^options:/,$p'; exit 0 ;;
--quick) shift; build=build-sass arch="-gencode arch=compute_90a,code=sm_90a" ;;
esac
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
nvcc=$(command -v nvcc || true); [ -n "$nvcc" ] || nvcc=$CUDA_HOME/bin/nvcc
[ -x "$nvcc" ] || { echo "sass.sh: nvcc not found (PATH, $CUDA_HOME/bin): install the CUDA toolkit" >&2; exit 2; }
cuobjdump=$(command -v cuobjdump || true)
[ -n "$cuobjdump" ] || [ ! -x "$CUDA_HOME/bin/cuobjdump" ] || cuobjdump=$CUDA_HOME/bin/cuobjdump
[ -n "$cuobjdump" ] || cuobjdump=$(ls ${LSSAR_VENV:-.venv}/lib/python3*/site-packages/nvidia/cu*/bin/cuobjdump 2>/dev/null | head -1)
[ -n "$cuobjdump" ] || { echo "sass.sh: cuobjdump not found: run make deps (it installs the PyPI package" \
                              "nvidia-cuda-cuobjdump into .venv), or put the toolkit's on PATH" >&2; exit 2; }
obj=$build/obj/src/cuda/flash_attn.o
if [ -n "$arch" ]; then
  make --no-print-directory CUDA=1 CUDA_BUILD="$build" CUDA_ARCH="$arch" "$obj" >&2
else
  make --no-print-directory CUDA=1 "$obj" >&2
fi
exec python3 bench/sass.py --obj "$obj" --cuobjdump "$cuobjdump" "$@"
