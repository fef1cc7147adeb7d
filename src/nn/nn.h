/*
 * nn.h - the layer functions of the GPT model on the CPU, forward and backward side by side. The
 * model reaches them through the CPU backend (backend.h, backend_cpu.c); a CUDA backend provides
 * the same operations on device memory.
 *
 * Conventions (llm.c style):
 *   - all tensors are contiguous float32, row-major; N is a number of rows (usually B * T);
 *   - "dx +=" means the gradient is ACCUMULATED into dx, "dx =" that it is written;
 *   - parameter gradients are always accumulated;
 *   - every reduction runs in a fixed order, independent of the thread count, and every sgemm is
 *     cut into blocks by its shape alone, each a single-threaded OpenBLAS call (matmul.c), so the
 *     same seed gives bit-identical results on 1, 2 or more threads (test_model's
 *     test_determinism, test_train's test_deterministic). Results differ between CPUs: the hot
 *     loops carry AVX-512 / AVX2 + FMA / baseline clones (core/dispatch.h), with their own lane
 *     orders and fused multiply-adds, and OpenBLAS picks its kernels by CPU.
 */
#ifndef LSSAR_NN_H
#define LSSAR_NN_H

#include <stddef.h>
#include <stdint.h>
#include "lssar.h"

#define NN_IGNORE 0xFFFF   /* a target that counts no loss; equals GPT_IGNORE (src/model/gpt.h) */

/* ---- matmul (linear layer): all through cblas_sgemm */
// out (N, OC) = inp (N, IC) @ weight^T + bias;  weight (OC, IC), bias (OC) or NULL
void matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
                    int N, int IC, int OC);
// dinp (N, IC) = (or += if accumulate) dout (N, OC) @ weight;  dinp may be NULL (skipped)
// dweight (OC, IC) += dout^T @ inp;  dbias (OC) += column sums of dout (either may be NULL)
void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                     const float *inp, const float *weight, int N, int IC, int OC, int accumulate);
// dbias (OC) += sum over rows of dout (N, OC), fixed order
void colsum_accumulate(float *dbias, const float *dout, int N, int OC);

/* ---- layernorm (eps 1e-5, biased variance, like PyTorch) */
// out (N, C) = (inp - mean) * rstd * weight + bias;  mean, rstd (N) saved (may be NULL)
void layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                       const float *weight, const float *bias, int N, int C);
// dinp (N, C) += ...;  dweight, dbias (C) += ...
void layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, const float *mean,
                        const float *rstd, int N, int C);

/* ---- GELU, tanh approximation */
// out (n) = gelu(inp)
void gelu_forward(float *out, const float *inp, size_t n);
// dinp (n) = dout * gelu'(inp)   (dinp may alias dout)
void gelu_backward(float *dinp, const float *inp, const float *dout, size_t n);

/* ---- residual */
// out (n) = a + b
void residual_forward(float *out, const float *a, const float *b, size_t n);
// da += dout; db += dout
void residual_backward(float *da, float *db, const float *dout, size_t n);

/* ---- token + position embedding, C channels summed */
// out (B*T, C) = sum_ch wte[ch][tokens[(b*T + t)*Ch + ch]] + (wpe ? wpe[t] : 0)
// wte: Ch pointers to (V, C) tables; tokens (B, T, Ch), already validated < V
void embedding_forward(float *out, const uint16_t *tokens, float *const *wte, const float *wpe,
                       int B, int T, int Ch, int C);
// dwte[ch] (V, C) += scatter of dout (B*T, C);  dwpe (maxT, C) += (if non-NULL)
void embedding_backward(float *const *dwte, float *dwpe, const float *dout,
                        const uint16_t *tokens, int B, int T, int Ch, int C);

/* ---- rotary position embedding, rotate-half convention (pairs (c, c + HS/2)) */
// cos_t, sin_t (T, HS/2): angle = t * theta^(-2c/HS), computed in double
void rope_table(float *cos_t, float *sin_t, int T, int HS, double theta);
// x (B, T, NH, HS) rotated in place; row t uses table row pos0 + t
void rope_forward(float *x, const float *cos_t, const float *sin_t, int B, int T, int NH, int HS,
                  int pos0);
// dx (B, T, NH, HS) in place: the transpose (inverse) rotation
void rope_backward(float *dx, const float *cos_t, const float *sin_t, int B, int T, int NH,
                   int HS, int pos0);

/* ---- attention: the kernels are src/attn (lssar_attn_forward / _backward, attn_forward_cached),
   called by the backend (backend_cpu.c) */

/* ---- softmax cross-entropy over the vocabulary, one row per position */
// logits (R, V) are replaced in place by probabilities. targets[r * tstride] (GPT_IGNORE:
// no loss) may be NULL. losses[r * ostride] = -log p[target] (0 if ignored or no targets),
// argmax[r * ostride] = index of the largest logit (either output may be NULL).
// Returns the sum of the losses over counted rows (double) and adds their count to *count.
double softmax_xent_forward(float *logits, float *losses, uint16_t *argmax,
                            const uint16_t *targets, int tstride, int ostride, int R, int V,
                            long *count);
// probs (R, V) replaced in place by dlogits = scale * (probs - onehot(target)); rows whose
// target is GPT_IGNORE become 0
void softmax_xent_backward(float *probs, const uint16_t *targets, int tstride, int R, int V,
                           float scale);

/* ---- optimiser */
// One AdamW step (t >= 1) over n values, PyTorch formula with decoupled weight decay wd.
void adamw_update(float *params, const float *grads, float *m, float *v, size_t n, int t,
                  float lr, float beta1, float beta2, float eps, float wd);
// Sum of squares, in double, in fixed-size blocks added in order (thread-count independent).
double sum_squares(const float *x, size_t n);
// x *= s
void scale_inplace(float *x, size_t n, float s);
// x = 0 (not x *= 0, which would keep NaN and inf)
void zero_fill(float *x, size_t n);

#endif
