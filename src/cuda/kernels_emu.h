/*
 * kernels_emu.h - the CPU emulation of the CUDA backend's non-attention kernels (kernels_*.cu):
 * plain C11, always built, no CUDA headers. Each function computes what its kernel computes, in
 * the same order: the same per-thread loops (kernels_math.h, shared with the kernels) and the same
 * trees over their partial sums (the kernels' warp shuffles are the halving tree km_tree_f). The
 * reductions avoid FMA on both sides, so a reduction kernel returns the bits its emulation
 * returns (tests/test_cuda_emu.c checks the emulation; the GPU tests can compare bit for bit).
 * Signatures are those of the backend seam (src/nn/backend.h) on host memory.
 *
 * The shapes (constants in kernels_math.h):
 *   layernorm forward / input gradient: one warp per row; lane l owns columns l, l + 32, ...;
 *     warp sums of the row statistics.
 *   column reductions (layernorm dweight / dbias, matmul dbias): chunks of 256 rows; in a chunk,
 *     a (32, 8) block: thread (tx, ty) sums column j's rows ty, ty + 8, ..., the 8 partials meet
 *     in km_tree_f(., 8) into part[chunk][j]; a second kernel adds the chunks in order and adds
 *     the total to the gradient.
 *   cross-entropy: one 512-thread block per row; thread t owns columns t, t + 512, ...; block
 *     sums for the softmax normaliser; block max + first argmax; then the per-row losses summed
 *     in double by one 256-thread block (thread t: rows t, t + 256, ...; block tree) into acc.
 *   sum of squares: chunks of 8192 values, one 256-thread block each (thread t: values t,
 *     t + 256, ... of the chunk, in double), block tree -> part[chunk]; then one 256-thread block
 *     over the partials (thread t: partials t, t + 256, ...), block tree. Block sums of squares
 *     (the gradient norm's): the chunks of the whole range, then one such finish per block.
 *   embedding backward: per channel, (token, row) pairs sorted stably by token (CUB radix sort);
 *     each run of one token adds its rows in row order into the table row: the CPU's bits.
 */
#ifndef LSSAR_CUDA_KERNELS_EMU_H
#define LSSAR_CUDA_KERNELS_EMU_H

#include <stddef.h>
#include <stdint.h>

/* 1 when this file was compiled without FMA contraction (a * b + c rounds twice), which the
   bit-for-bit agreement with the kernels' KM_ operations needs. */
int kemu_fp_contract_off(void);

/* The block sum of the kernels: v (nthreads, a multiple of 32, at most 1024) is overwritten. */
float kemu_block_sum_f(float *v, int nthreads);
double kemu_block_sum_d(double *v, int nthreads);

void kemu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                            const float *bias, int N, int C);
void kemu_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                             const float *weight, const float *mean, const float *rstd, int N, int C);
// dbias (OC) += column sums of dout (N, OC)
void kemu_colsum(float *dbias, const float *dout, int N, int OC);

void kemu_xent_forward(float *logits, float *losses, uint16_t *argmax, const uint16_t *targets, int tstride,
                       int ostride, int R, int V, double *acc);
void kemu_xent_backward(float *probs, const uint16_t *targets, int tstride, int R, int V, float grad_scale,
                        const double *acc);

double kemu_sum_squares(const float *x, size_t n);
// out[b] = the sum of squares of block b of x (n) (blocks of `block`, a multiple of KM_SS_CHUNK),
// as the kernels compute all of them in one launch pair: each the bits of kemu_sum_squares on it
void kemu_block_sum_squares(double *out, const float *x, size_t n, size_t block);
// *norm = nn_norm_of_blocks(ss, nb); x (n) *= nn_clip_factor(*norm, clip) unless that is 1
void kemu_clip_norm(float *x, size_t n, const double *ss, size_t nb, float clip, float *norm);

void kemu_embedding_forward(float *out, const uint16_t *tokens, float *const *wte, const float *wpe, int B,
                            int T, int Ch, int C);
// 0, or LSSAR_E_NOMEM (the sort's buffers)
int kemu_embedding_backward(float *const *dwte, float *dwpe, const float *dout, const uint16_t *tokens, int B,
                            int T, int Ch, int C);

void kemu_gelu_forward(float *out, const float *inp, size_t n);
void kemu_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n);
void kemu_residual_forward(float *out, const float *a, const float *b, size_t n);
void kemu_scale(float *x, size_t n, float s);
// out (rows, ldo) = the bf16 bits of in (rows, cols), nearest even (km_bf16_rne: NaN -> 0x7FFF);
// out's columns cols..ldo-1 untouched. The GEMMs' operand cast (cuda_to_bf16).
void kemu_to_bf16(uint16_t *out, const float *in, int rows, int cols, int ldo);
// x (B, T, NH, HS) in place with table rows pos0 + t; inverse: the backward (the transpose)
void kemu_rope(float *x, const float *cos_t, const float *sin_t, int B, int T, int NH, int HS, int pos0,
               int inverse);
void kemu_adamw(float *params, const float *grads, float *m, float *v, size_t n, int t, float lr, float beta1,
                float beta2, float eps, float wd);

#endif
