# mk/cuda_host.mk - the fused attention CUDA kernels run on the CPU, in every build (no GPU and no
# CUDA toolkit needed): src/cuda/flash_attn.cu compiled as host C++ (-DLSSAR_CUDA_HOST) against
# tests/cuda_host/cuda_host.h (every CUDA thread a pthread, mma.sync emulated from the PTX fragment
# layout) and compared with the emulation src/attn/flash_emu.c by tests/cuda_host/test_flash_host.cpp.
# Included by the Makefile; uses $(BUILD), $(BUILD)/build-flags, $(BUILD)/liblssar.a (flash_emu,
# lssar_fail), $(LIBS), $(WARN), $(SAN). The Makefile adds $(CUDA_HOST_TEST) to the test target's
# prerequisites; tests/run.sh runs it with the other $(BUILD)/tests/test_* in the portable and
# sanitizer builds (quick mode; LSSAR_HOST_FULL=1 $(CUDA_HOST_TEST) runs every case).
#
# The host copy defines the library's CUDA entry points under other names (cuda_host.h renames
# cuda_attn_* to cuda_host_attn_*, lssar_attn_*_cuda to lssar_host_attn_*_cuda), so it links
# beside liblssar.a whether that holds the real backend (CUDA=1) or src/cuda/cuda_off.c (CUDA=0).
#
# Flags: -O2 whatever OPT is (the kernels are the same code in every build variant, and -O2 keeps
# the quick mode fast); -ffp-contract=off so that the host copy rounds every a * b + c as written,
# like the emulation in a build without FMA (only the kernels' explicit fmaf fuse), whatever
# CXXFLAGS add; -fno-strict-aliasing because the kernels reinterpret shared and global memory
# between float, float2, float4, uint16_t, uint32_t and uint4 as CUDA code does, which C++
# type-based alias analysis would be entitled to reorder; -Wno-unknown-pragmas for the CUDA
# `#pragma unroll`s; -Itests/cuda_host so that src/cuda/flash_attn.h's <cuda_runtime.h> is the
# shim's (tests/cuda_host/cuda_runtime.h). $(SAN) as everywhere: SANITIZE=1 runs it under ASan and
# UBSan too (measured: the quick mode takes about as long as without them, since the CUDA threads
# are a pool of a few hundred pthreads, not one per thread and block).
#
# -include cuda_host.h (the object's rule) puts the shim ahead of the kernels' source, so that the
# library's file includes nothing from tests/: the harness includes the library, not the reverse.
#
# LSSAR_HOST_EMU_FMA: the library's C flags ($(OPT) $(CFLAGS), e.g. NATIVE=1's -march=native) make
# FMA instructions available, so GCC contracts a * b + c in the emulation (src/attn is built with
# -ffp-contract=fast) and the test's bit-exact family compares within its allowance instead.

CXX ?= g++
CUDA_HOST_TEST := $(BUILD)/tests/test_flash_host
CUDA_HOST_OBJ := $(BUILD)/obj/tests/cuda_host/flash_attn.o $(BUILD)/obj/tests/cuda_host/test_flash_host.o
CUDA_HOST_EMU_FMA := $(shell $(CC) $(OPT) $(CFLAGS) -dM -E -x c /dev/null 2>/dev/null | grep -c '__FMA__')
CUDA_HOST_CXXFLAGS := -DLSSAR_CUDA_HOST -std=c++17 -O2 -pthread -ffp-contract=off -fno-strict-aliasing $(SAN) $(WARN) \
                      -Wno-unknown-pragmas -Iinclude -Isrc -Itests/cuda_host \
                      $(if $(filter-out 0,$(CUDA_HOST_EMU_FMA)),-DLSSAR_HOST_EMU_FMA) $(CXXFLAGS)

$(BUILD)/obj/tests/cuda_host/flash_attn.o: src/cuda/flash_attn.cu $(BUILD)/build-flags
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_HOST_CXXFLAGS) -include cuda_host.h -MMD -MP -MF $@.d -MT $@ -x c++ -c $< -o $@

$(BUILD)/obj/tests/cuda_host/test_flash_host.o: tests/cuda_host/test_flash_host.cpp $(BUILD)/build-flags
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_HOST_CXXFLAGS) -MMD -MP -MF $@.d -MT $@ -c $< -o $@

$(CUDA_HOST_TEST): $(CUDA_HOST_OBJ) $(BUILD)/liblssar.a
	@mkdir -p $(dir $@)
	$(CXX) -pthread -o $@ $(CUDA_HOST_OBJ) $(BUILD)/liblssar.a $(LIBS)

.PHONY: test-flash-host
test-flash-host: $(CUDA_HOST_TEST)
	$(CUDA_HOST_TEST)

-include $(CUDA_HOST_OBJ:=.d)

# The split-KV decoding kernels (src/cuda/flash_decode.cu) the same way, against their emulation
# src/attn/flash_decode_emu.c (tests/cuda_host/test_decode_host.cpp); the -D renames play the part
# of cuda_host.h's for flash_attn.cu's entry points.
CUDA_DECODE_HOST_TEST := $(BUILD)/tests/test_decode_host
CUDA_DECODE_HOST_OBJ := $(BUILD)/obj/tests/cuda_host/flash_decode.o \
                        $(BUILD)/obj/tests/cuda_host/test_decode_host.o
CUDA_DECODE_RENAME := -Dcuda_attn_decode_forward=cuda_host_attn_decode_forward \
                      -Dcuda_attn_decode_applies=cuda_host_attn_decode_applies \
                      -Dcuda_attn_decode_scratch_bytes=cuda_host_attn_decode_scratch_bytes

$(BUILD)/obj/tests/cuda_host/flash_decode.o: src/cuda/flash_decode.cu $(BUILD)/build-flags
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_HOST_CXXFLAGS) $(CUDA_DECODE_RENAME) -include cuda_host.h -MMD -MP -MF $@.d -MT $@ \
	    -x c++ -c $< -o $@

$(BUILD)/obj/tests/cuda_host/test_decode_host.o: tests/cuda_host/test_decode_host.cpp $(BUILD)/build-flags
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_HOST_CXXFLAGS) $(CUDA_DECODE_RENAME) -MMD -MP -MF $@.d -MT $@ -c $< -o $@

$(CUDA_DECODE_HOST_TEST): $(CUDA_DECODE_HOST_OBJ) $(BUILD)/liblssar.a
	@mkdir -p $(dir $@)
	$(CXX) -pthread -o $@ $(CUDA_DECODE_HOST_OBJ) $(BUILD)/liblssar.a $(LIBS)

-include $(CUDA_DECODE_HOST_OBJ:=.d)
