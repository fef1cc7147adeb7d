/*
 * cuda_common.h - shared pieces of the CUDA backend (nvcc only): error checks that return lssar
 * errors (with file:line and the CUDA error string), the warp and block sums of the reduction
 * kernels, bf16 rounding, and the host launchers of kernels_*.cu that backend_cuda.cu calls.
 *
 * Every launcher enqueues on `stream`, checks the launch (cudaGetLastError: a bad configuration
 * fails here; a fault inside a kernel surfaces at the next synchronising call) and returns 0 or an
 * lssar_err. Scratch: a launcher that needs device scratch has a *_scratch function giving its
 * bytes for the shape; the caller passes at least that much (backend_cuda.cu's growable buffer).
 */
#ifndef LSSAR_CUDA_COMMON_H
#define LSSAR_CUDA_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <type_traits>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include "lssar.h"
extern "C" {
#include "core/util.h"
}
#include "cuda/kernels_math.h"

/* ---- errors */
static inline int cuda_fail_at(cudaError_t e, const char *what, const char *file, int line) {
    // no GPU or no driver is LSSAR_E_UNSUPPORTED like any other device failure (lssar.h has no
    // code for device faults); out of memory is LSSAR_E_NOMEM
    int code = e == cudaErrorMemoryAllocation ? LSSAR_E_NOMEM : LSSAR_E_UNSUPPORTED;
    return lssar_fail(code, "CUDA error %s (%s) in %s at %s:%d", cudaGetErrorName(e), cudaGetErrorString(e),
                      what, file, line);
}
// CUDA_TRY(cudaMemcpyAsync(...)): return the lssar error of a failed runtime call
#define CUDA_TRY(call)                                                             \
    do {                                                                           \
        cudaError_t e_ = (call);                                                   \
        if (e_ != cudaSuccess) return cuda_fail_at(e_, #call, __FILE__, __LINE__); \
    } while (0)
// after a <<<...>>> launch ("name" a string literal): a configuration error (grid too large, too
// much shared memory, no kernel image for this GPU) is reported here
#define CUDA_LAUNCHED(name)                                                                     \
    do {                                                                                        \
        cudaError_t e_ = cudaGetLastError();                                                    \
        if (e_ != cudaSuccess) return cuda_fail_at(e_, "the launch of " name, __FILE__, __LINE__); \
    } while (0)
// grid size for n items of `per` each, as unsigned int (launchers keep n below 2^31 blocks)
static inline unsigned cuda_blocks(size_t n, size_t per) { return (unsigned)((n + per - 1) / per); }
// scratch carving: p advanced past `bytes`, rounded up to 256 (cudaMalloc's alignment)
static inline void *cuda_carve(char **p, size_t bytes) {
    void *r = *p;
    *p += (bytes + 255) / 256 * 256;
    return r;
}
static inline size_t cuda_round256(size_t b) { return (b + 255) / 256 * 256; }

/* ---- warp and block sums: the trees of kernels_math.h (km_tree_f over the lanes) */
#ifdef __CUDACC__
static __device__ __forceinline__ float cuda_warp_sum(float v) {
    for (int o = KM_WARP / 2; o > 0; o /= 2) v = KM_ADD(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
static __device__ __forceinline__ double cuda_warp_sum(double v) {
    for (int o = KM_WARP / 2; o > 0; o /= 2) v = KM_DADD(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
// The block total, in every thread: warp sums, then every warp sums the 32 slots (the warp totals,
// zeros after them): the same value everywhere without another barrier. sh: 32 shared slots;
// blockDim.x a multiple of 32; every thread of the block must call it.
template <typename F>
static __device__ __forceinline__ F cuda_block_sum(F v, F *sh) {
    int lane = threadIdx.x % KM_WARP, w = threadIdx.x / KM_WARP;
    v = cuda_warp_sum(v);
    __syncthreads();   // a previous call's readers are done with sh
    if (lane == 0) sh[w] = v;
    __syncthreads();
    F t = lane < (int)(blockDim.x / KM_WARP) ? sh[lane] : (F)0;
    return cuda_warp_sum(t);
}
// x rounded to bfloat16 (nearest even) and back: what a bf16 tensor-core operand holds
static __device__ __forceinline__ float cuda_bf16_round(float x) {
    return __bfloat162float(__float2bfloat16_rn(x));
}
#endif

/* f(tag) with tag a null pointer to the element type of activations of type at: float, or
   uint16_t for bf16 (km_ld / km_st); the launchers of the activation kernels instantiate their
   kernels through it. */
template <typename F> static inline int cuda_by_act(lssar_dtype at, F f) {
    return at == LSSAR_BF16 ? f(static_cast<uint16_t *>(nullptr)) : f(static_cast<float *>(nullptr));
}
#define CUDA_ACT_T(tag) std::remove_pointer_t<decltype(tag)>

/* ---- launchers (kernels_*.cu). at: the element type of the activation arguments (void *): the
   input and output rows, logits, dout; parameters, statistics and their gradients are float. */
// kernels_layernorm.cu
int cuda_layernorm_forward(lssar_dtype at, void *out, float *mean, float *rstd, const void *inp,
                           const float *weight, const float *bias, int N, int C, cudaStream_t stream);
size_t cuda_layernorm_backward_scratch(int N, int C);
int cuda_layernorm_backward(lssar_dtype at, void *dinp, float *dweight, float *dbias, const void *dout,
                            const void *inp, const float *weight, const float *mean, const float *rstd, int N,
                            int C, void *scratch, cudaStream_t stream);
// kernels_reduce.cu: dst (C) += column sums of x (N, C); sum of squares into *out (device double)
size_t cuda_colsum_scratch(int N, int C);
int cuda_colsum(lssar_dtype at, float *dst, const void *x, int N, int C, void *scratch, cudaStream_t stream);
// dst (C) += sum over c < nchunks of part[c][.] in order (the second pass of every column sum)
int cuda_col_finish(float *dst, const float *part, int nchunks, int C, cudaStream_t stream);
size_t cuda_sum_squares_scratch(size_t n);
int cuda_sum_squares(double *out, const float *x, size_t n, void *scratch, cudaStream_t stream);
// out[b] = the sum of squares of block b of x (n), blocks of `block` values (a multiple of
// KM_SS_CHUNK), each with cuda_sum_squares's bits for that block alone
size_t cuda_block_sum_squares_scratch(size_t n);
int cuda_block_sum_squares(double *out, const float *x, size_t n, size_t block, void *scratch,
                           cudaStream_t stream);
// *norm = nn_norm_of_blocks(ss, nb), *factor = nn_clip_factor(*norm, clip) (device floats), then
// x (n) *= *factor unless it is 1 (cuda_scale_by)
int cuda_clip_norm(float *x, size_t n, const double *ss, size_t nb, float clip, float *norm, float *factor,
                   cudaStream_t stream);
// kernels_xent.cu
size_t cuda_xent_forward_scratch(int R);
int cuda_xent_forward(lssar_dtype at, void *logits, float *losses, uint16_t *argmax, const uint16_t *targets,
                      int tstride, int ostride, int R, int V, double *acc, void *scratch, cudaStream_t stream);
int cuda_xent_backward(lssar_dtype at, void *probs, const uint16_t *targets, int tstride, int R, int V,
                       float grad_scale, const double *acc, cudaStream_t stream);
// kernels_elementwise.cu
int cuda_gelu_forward(lssar_dtype at, void *out, const void *inp, size_t n, cudaStream_t stream);
int cuda_gelu_backward(lssar_dtype at, void *dinp, const void *inp, const void *dout, size_t n,
                       cudaStream_t stream);
int cuda_residual_forward(lssar_dtype at, void *out, const void *a, const void *b, size_t n,
                          cudaStream_t stream);
int cuda_scale(float *x, size_t n, float s, cudaStream_t stream);
// x (n) *= *s, a factor in device memory; 1 leaves x untouched
int cuda_scale_by(float *x, size_t n, const float *s, cudaStream_t stream);
int cuda_adamw(float *params, const float *grads, float *m, float *v, size_t n, float lr, float beta1,
               float beta2, float eps, float wd, float ibc1, float ibc2, cudaStream_t stream);
// out (N, OC), rows ld apart, += bias on every row (the matmul's fallback when the bias epilogue is
// refused)
int cuda_add_bias(lssar_dtype at, void *out, const float *bias, int N, int OC, int ld, cudaStream_t stream);
// out (rows, ldo) bf16 bits = in (rows, cols) rounded to nearest even (km_bf16_rne), ldo >= cols:
// the GEMMs' bf16 operands (kemu_to_bf16 emulates it)
int cuda_to_bf16(uint16_t *out, const float *in, int rows, int cols, int ldo, cudaStream_t stream);
// kernels_embedding.cu (wte, dwte: Ch device pointers in a host array)
int cuda_embedding_forward(lssar_dtype at, void *out, const uint16_t *tokens, float *const *wte,
                           const float *wpe, int B, int T, int Ch, int C, cudaStream_t stream);
// 0 and *bytes, or an lssar_err (the sort's size query failed)
int cuda_embedding_backward_scratch(int B, int T, size_t *bytes);
int cuda_embedding_backward(lssar_dtype at, float *const *dwte, float *dwpe, const void *dout,
                            const uint16_t *tokens, int B, int T, int Ch, int C, void *scratch,
                            size_t scratch_bytes, cudaStream_t stream);
// kernels_rope.cu: x (B, T, NH, HS) in place, table rows pos0 + t; inverse = the backward
int cuda_rope(lssar_dtype at, void *x, const float *cos_t, const float *sin_t, int B, int T, int NH, int HS,
              int pos0, int inverse, cudaStream_t stream);

#endif
