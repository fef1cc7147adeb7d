/*
 * cuda_runtime.h - stands in for the CUDA toolkit's header in the host build of the kernels
 * (mk/cuda_host.mk puts tests/cuda_host on the include path): src/cuda/flash_attn.h includes
 * <cuda_runtime.h> for cudaStream_t, and under -DLSSAR_CUDA_HOST that must be the shim's.
 */
#include "cuda_host.h"
