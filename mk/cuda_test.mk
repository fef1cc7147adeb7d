# mk/cuda_test.mk - the GPU test program, `make test-gpu`, the GPU attention benchmark, the
# portable (statically linked) copies of both for a GPU machine without the Debian libraries,
# and a host self-test of the test program. Included by the Makefile; uses $(BUILD),
# $(ALL_CFLAGS), $(LIBS), $(CUDA_LIBS) and $(BUILD)/liblssar.a. docs/GPU_CHECK.md explains the
# checks and scripts/gpu-check.sh runs them on a GPU machine.
#
#   make test-gpu          build $(BUILD)/tests/gpu/test_gpu and run it; with a GPU and
#                          compute-sanitizer on PATH, also memcheck + racecheck in quick mode
#                          (GPU_SANITIZE=0 leaves them out). Without a GPU, or against a
#                          liblssar without the CUDA backend: one "SKIP: ..." line, exit 0.
#   make gpu-bench         build $(BUILD)/bench/gpu_attn (run: $(BUILD)/bench/gpu_attn --json F)
#   make gpu-portable      $(BUILD)/gpu-portable/{test_gpu,gpu_attn,lssar}: OpenBLAS, PCRE2, nettle,
#                          zlib and the CUDA runtime linked statically (cuBLASLt, libgomp and
#                          libc stay shared), for carrying to a machine that lacks them
#   make test-gpu-fake     tests/gpu/fake_selftest.sh: test_gpu and gpu_attn linked against
#                          tests/gpu/fake_cuda.c (a host emulation: nothing runs on a GPU), run
#                          in quick mode and with injected faults that must be caught (needs the
#                          CUDA headers and a CUDA=0 library: the fake stands in for the backend)
#
# The CUDA side is built when the Makefile builds the CUDA backend (CUDA=1); otherwise the same
# rules give the program that prints SKIP.

CUDA_HOME     ?= /usr/local/cuda
GPU_SANITIZE  ?= 1
GPU_TEST_DEPS  = tests/gpu/attn_ref64.h include/lssar.h src/nn/backend.h $(BUILD)/liblssar.a

# the test and the benchmark: CUDA side when the library has the CUDA backend
ifeq ($(CUDA),1)
define gpu_prog_rule
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -MF $@.d -o $@ $< $(BUILD)/liblssar.a $(LIBS)
endef
else
define gpu_prog_rule
	@mkdir -p $(dir $@)
	@echo "$(notdir $@): a build without the CUDA backend (CUDA=0): the program prints SKIP"
	$(CC) $(ALL_CFLAGS) -MMD -MP -MF $@.d -o $@ $< $(BUILD)/liblssar.a $(LIBS)
endef
endif

$(BUILD)/tests/gpu/test_gpu: tests/gpu/test_gpu.c $(GPU_TEST_DEPS)
	$(gpu_prog_rule)

# an explicit rule: it takes precedence over the Makefile's $(BUILD)/bench/% pattern rule
$(BUILD)/bench/gpu_attn: bench/gpu_attn.c include/lssar.h $(BUILD)/liblssar.a
	$(gpu_prog_rule)

-include $(BUILD)/tests/gpu/test_gpu.d $(BUILD)/bench/gpu_attn.d

.PHONY: test-gpu gpu-bench gpu-portable test-gpu-fake
test-gpu: $(BUILD)/tests/gpu/test_gpu
	@GPU_SANITIZE=$(GPU_SANITIZE) bash tests/gpu/run.sh $(BUILD)/tests/gpu/test_gpu

gpu-bench: $(BUILD)/bench/gpu_attn

# ---- portable copies: the Debian libraries (a GPU image may not have them) linked statically
GPU_MULTIARCH  := $(shell $(CC) -print-multiarch 2>/dev/null)
GPU_BLAS_DIR    = $(or $(BLAS_DIR),/usr/lib/$(GPU_MULTIARCH)/openblas-openmp)
GPU_STATIC_LIBS = -L$(GPU_BLAS_DIR) -Wl,-Bstatic -lopenblas -lpcre2-8 -lnettle -lz -Wl,-Bdynamic \
                  -Wl,--as-needed -lcjson -Wl,--no-as-needed -Wl,-rpath,'$$ORIGIN/lib' \
                  -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublasLt -lnccl -lcudart_static -lstdc++ \
                  -ldl -lrt -fopenmp -lmvec -lm -lpthread -static-libgcc

# src/core/dist.c again without MPI (these programs run one process; a GPU image may lack Open
# MPI): linked before liblssar.a, it stands in for the archive's copy
$(BUILD)/gpu-portable/dist_nompi.o: src/core/dist.c src/core/dist.h
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -DLSSAR_MPI,$(ALL_CFLAGS)) -c $< -o $@

$(BUILD)/gpu-portable/%: $(GPU_TEST_DEPS) bench/gpu_attn.c tests/gpu/test_gpu.c $(BUILD)/gpu-portable/dist_nompi.o
	@mkdir -p $(dir $@)
	@[ "$(CUDA)" = 1 ] || { echo "gpu-portable: this is a CUDA=0 build; build with CUDA=1"; exit 1; }
	$(CC) $(ALL_CFLAGS) -o $@ \
	  $(if $(filter test_gpu,$*),tests/gpu/test_gpu.c,bench/gpu_attn.c) $(BUILD)/gpu-portable/dist_nompi.o \
	  $(BUILD)/liblssar.a $(GPU_STATIC_LIBS)
	@echo "$@ needs at run time:"; ldd $@ | sed 's/^/  /'

# the CLI too (gpu-check's training and evaluation steps run it), linked the same way; an explicit
# rule, so the pattern rule above does not take it
$(BUILD)/gpu-portable/lssar: $(CLI_OBJ) $(BUILD)/liblssar.a $(BUILD)/gpu-portable/dist_nompi.o
	@mkdir -p $(dir $@)
	@[ "$(CUDA)" = 1 ] || { echo "gpu-portable: this is a CUDA=0 build; build with CUDA=1"; exit 1; }
	$(CC) $(ALL_CFLAGS) -o $@ $(CLI_OBJ) $(BUILD)/gpu-portable/dist_nompi.o $(BUILD)/liblssar.a $(GPU_STATIC_LIBS)
	@echo "$@ needs at run time:"; ldd $@ | sed 's/^/  /'

# Debian ships cJSON only as a shared library: it travels beside the binaries (rpath $ORIGIN/lib)
$(BUILD)/gpu-portable/lib/libcjson.so.1:
	@mkdir -p $(dir $@)
	cp -L $$($(CC) -print-file-name=libcjson.so.1) $@

gpu-portable: $(BUILD)/gpu-portable/test_gpu $(BUILD)/gpu-portable/gpu_attn $(BUILD)/gpu-portable/lssar \
              $(BUILD)/gpu-portable/lib/libcjson.so.1

# ---- the host self-test of the test program (a fake GPU; needs only the CUDA headers)
GPU_FAKE_FLAGS = -DLSSAR_CUDA -DLSSAR_GPU_FAKE -I$(CUDA_HOME)/include

$(BUILD)/tests/gpu/test_gpu_fake: tests/gpu/test_gpu.c tests/gpu/fake_cuda.c tests/bf16_acts.h $(GPU_TEST_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(GPU_FAKE_FLAGS) -o $@ tests/gpu/test_gpu.c tests/gpu/fake_cuda.c $(BUILD)/liblssar.a $(LIBS)

$(BUILD)/tests/gpu/gpu_attn_fake: bench/gpu_attn.c tests/gpu/fake_cuda.c tests/bf16_acts.h include/lssar.h \
                                  $(BUILD)/liblssar.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(GPU_FAKE_FLAGS) -o $@ bench/gpu_attn.c tests/gpu/fake_cuda.c $(BUILD)/liblssar.a $(LIBS)

test-gpu-fake: $(BUILD)/liblssar.a
	@if [ ! -f $(CUDA_HOME)/include/cuda_runtime_api.h ]; then \
	  echo "SKIP: test-gpu-fake needs the CUDA headers ($(CUDA_HOME)/include/cuda_runtime_api.h)"; \
	elif [ "$(CUDA)" = 1 ]; then \
	  echo "test-gpu-fake: $(BUILD)/liblssar.a has the real CUDA backend; the fake needs a CUDA=0 build (make test-gpu-fake CUDA=0 BUILD=...)"; exit 1; \
	else \
	  $(MAKE) --no-print-directory -f $(firstword $(MAKEFILE_LIST)) $(BUILD)/tests/gpu/test_gpu_fake $(BUILD)/tests/gpu/gpu_attn_fake && \
	  bash tests/gpu/fake_selftest.sh $(BUILD); \
	fi
