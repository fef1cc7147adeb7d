/*
 * backend.h - the seam between the model and the machine it runs on.
 *
 * The model (src/model/gpt.c) orchestrates; a backend owns memory and kernels. Every tensor the
 * model holds (parameters, gradients, AdamW state, activations, tokens, the loss accumulator) is
 * allocated by its backend and lives wherever the backend keeps it (host memory for the CPU
 * backend, device memory for CUDA): the model passes those pointers from one backend call to the
 * next and never dereferences them. Host data crosses only through upload / download.
 *
 * A backend is a table of functions; every function takes the backend's context first (the CPU
 * backend has nothing in it; CUDA's holds its stream and library handles, so calls on one context
 * run in order and a download waits for what came before it). Several backends can be built into
 * one binary and chosen at run time (nn_backend_open), so tests can compare them.
 *
 * Conventions (row-major, "dx +=" accumulates, reductions in a fixed order) and the shapes in the
 * comments are those of the CPU layer functions (src/nn/nn.h), which the CPU backend wraps.
 * Parameters, their gradients, the optimiser state and the per-row statistics are float32;
 * activations (nn_act, below) have the context's activation type.
 */
#ifndef LSSAR_NN_BACKEND_H
#define LSSAR_NN_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include "lssar.h"

typedef struct nn_ctx nn_ctx;        /* one backend context (CUDA: a stream); opaque */

/* An activation tensor: what the model keeps per row (the residual stream, every layer's input and
   output, q, k, v, the logits) and the gradients on them. Its elements have the context's
   activation type (act_dtype); void, as the public API's tensors are, so that float arrays pass as
   they are to a context whose activations are float32. Only the backend reads the elements: the
   host sees them through upload_act and download_act. */
typedef void nn_act;

/* Bytes of one element of type t. */
static inline size_t nn_dtype_bytes(lssar_dtype t) { return t == LSSAR_BF16 ? 2 : 4; }

/* Arithmetic of a context. NN_FP32: float32 everywhere (CUDA matches the CPU backend to ~1e-5).
   NN_BF16: matmul and attention operands rounded to bf16, fp32 accumulation, everything else
   fp32 (docs/CUDA.md). The CPU backend always computes in float32. act_dtype says how a context
   stores its activations. */
typedef enum { NN_FP32 = 0, NN_BF16 = 1 } nn_precision;

/* What device_stats reports. held: bytes the context holds now (alloc, and the backend's own
   scratch); held_peak: the most it held; used_peak: the most device memory in use by anyone, as
   the driver reports it (total - free), since the context was created; total: the device's. */
typedef struct {
    char name[96];   /* the device's, e.g. "NVIDIA H200" */
    size_t held, held_peak, used_peak, total;
} nn_device_stats;

typedef struct nn_backend {
    const char *name;                /* "cpu", "cuda" */
    lssar_device device;
    int eval_rows;                   /* rows of logits per chunk in evaluation (memory stays linear in T) */

    /* ---- context and memory */
    int (*ctx_create)(nn_ctx **out, nn_precision precision);
    void (*ctx_free)(nn_ctx *ctx);
    // bytes of zeroed tensor memory, 64-byte aligned; NULL when out of memory
    void *(*alloc)(nn_ctx *ctx, size_t bytes);
    void (*release)(nn_ctx *ctx, void *p);
    // dst (device) = src (host); dst (host) = src (device); dst = src (both device)
    void (*upload)(nn_ctx *ctx, void *dst, const void *src, size_t bytes);
    void (*download)(nn_ctx *ctx, void *dst, const void *src, size_t bytes);
    void (*copy)(nn_ctx *ctx, void *dst, const void *src, size_t bytes);
    // bytes of x set to 0 (all-zero bytes are 0 in float32, bf16, double and the integers; not
    // x *= 0, which would keep NaN and inf)
    void (*zero)(nn_ctx *ctx, void *x, size_t bytes);
    // the element type of the context's activations: LSSAR_F32, or LSSAR_BF16
    lssar_dtype (*act_dtype)(nn_ctx *ctx);
    // dst (n) = src (n host floats) rounded to the activation type; host dst (n floats) = src (n)
    void (*upload_act)(nn_ctx *ctx, nn_act *dst, const float *src, size_t n);
    void (*download_act)(nn_ctx *ctx, float *dst, const nn_act *src, size_t n);

    /* ---- matmul (linear layer) */
    // out (N, OC) = inp (N, IC) @ weight^T + bias;  weight (OC, IC), bias (OC) or NULL
    void (*matmul_forward)(nn_ctx *ctx, nn_act *out, const nn_act *inp, const float *weight,
                           const float *bias, int N, int IC, int OC);
    // dinp (N, IC) = (or += if accumulate) dout (N, OC) @ weight; dinp may be NULL
    // dweight (OC, IC) += dout^T @ inp;  dbias (OC) += column sums of dout (either may be NULL)
    void (*matmul_backward)(nn_ctx *ctx, nn_act *dinp, float *dweight, float *dbias,
                            const nn_act *dout, const nn_act *inp, const float *weight,
                            int N, int IC, int OC, int accumulate);

    /* ---- layernorm (eps 1e-5, biased variance, like PyTorch) */
    // out (N, C) = (inp - mean) * rstd * weight + bias;  mean, rstd (N) saved (may be NULL)
    void (*layernorm_forward)(nn_ctx *ctx, nn_act *out, float *mean, float *rstd, const nn_act *inp,
                              const float *weight, const float *bias, int N, int C);
    // dinp (N, C) += ...;  dweight, dbias (C) += ...
    void (*layernorm_backward)(nn_ctx *ctx, nn_act *dinp, float *dweight, float *dbias,
                               const nn_act *dout, const nn_act *inp, const float *weight,
                               const float *mean, const float *rstd, int N, int C);

    /* ---- GELU (tanh approximation) and the residual add */
    // out (n) = gelu(inp)
    void (*gelu_forward)(nn_ctx *ctx, nn_act *out, const nn_act *inp, size_t n);
    // dinp (n) = dout * gelu'(inp)   (dinp may alias dout)
    void (*gelu_backward)(nn_ctx *ctx, nn_act *dinp, const nn_act *inp, const nn_act *dout, size_t n);
    // out (n) = a + b  (out may alias a)
    void (*residual_forward)(nn_ctx *ctx, nn_act *out, const nn_act *a, const nn_act *b, size_t n);

    /* ---- token + position embedding, Ch channels summed */
    // out (B*T, C) = sum_ch wte[ch][tokens[(b*T + t)*Ch + ch]] + (wpe ? wpe[t] : 0)
    // tokens (B, T, Ch) on the device, already validated < V; wte: Ch device pointers to (V, C);
    // wpe (T, C) the rows of the positions fed (decoding passes wpe + pos0 * C)
    void (*embedding_forward)(nn_ctx *ctx, nn_act *out, const uint16_t *tokens, float *const *wte,
                              const float *wpe, int B, int T, int Ch, int C);
    // dwte[ch] (V, C) += scatter of dout (B*T, C);  dwpe (maxT, C) += (if non-NULL)
    void (*embedding_backward)(nn_ctx *ctx, float *const *dwte, float *dwpe, const nn_act *dout,
                               const uint16_t *tokens, int B, int T, int Ch, int C);

    /* ---- rotary position embedding; tables cos_t, sin_t (maxT, HS/2) uploaded by the model */
    // x (B, T, NH, HS) rotated in place; row t uses table row pos0 + t
    void (*rope_forward)(nn_ctx *ctx, nn_act *x, const float *cos_t, const float *sin_t,
                         int B, int T, int NH, int HS, int pos0);
    // dx (B, T, NH, HS) in place: the inverse rotation
    void (*rope_backward)(nn_ctx *ctx, nn_act *dx, const float *cos_t, const float *sin_t,
                          int B, int T, int NH, int HS);

    /* ---- causal attention (the math: docs/attention.md). d->ssmax_s points to device memory. */
    // floats of per-row statistics the forward saves for the backward (0: the backend recomputes)
    size_t (*attention_stats_floats)(const lssar_attn_desc *d, int B, int T, int NH, int HS);
    // out (B, Tq, NH, HS) for the LAST Tq of Tk positions: query r of sequence b is position
    // i = Tk - Tq + r and sees keys 0..i. q (B, Tq, NH, HS); k, v: sequence b at
    // k + b * kv_stride * NH * HS, rows of NH * HS (kv_stride >= Tk; a KV cache has its capacity
    // there, a full forward Tq = Tk = kv_stride). stats (attention_stats_floats(d, B, Tq, NH, HS)
    // floats) receives what the backward needs; NULL when no backward follows (evaluation,
    // decoding). Returns 0 or an lssar_err.
    int (*attention_forward)(nn_ctx *ctx, nn_act *out, float *stats, const nn_act *q, const nn_act *k,
                             const nn_act *v, const lssar_attn_desc *d, int B, int Tq, int Tk,
                             int kv_stride, int NH, int HS);
    // dq, dk, dv (B, T, NH, HS) written; dscale (NH) += d(loss)/d(ssmax_s) for SSMax (else NULL).
    // out and stats are the forward's (Tq = Tk = kv_stride = T).
    int (*attention_backward)(nn_ctx *ctx, nn_act *dq, nn_act *dk, nn_act *dv, float *dscale,
                              const nn_act *dout, const nn_act *q, const nn_act *k, const nn_act *v,
                              const nn_act *out, const float *stats, const lssar_attn_desc *d,
                              int B, int T, int NH, int HS);

    /* ---- softmax cross-entropy over the vocabulary, one row per position */
    // logits (R, V) replaced in place by probabilities. targets[r * tstride] (NN_IGNORE: no
    // loss) may be NULL. losses[r * ostride] = -log p[target] (0 if ignored or no targets),
    // argmax[r * ostride] = index of the largest logit (either may be NULL).
    // acc (2 doubles, device) += {sum of the counted losses, number of counted rows}: the loss
    // stays on the device until the model downloads acc.
    void (*xent_forward)(nn_ctx *ctx, nn_act *logits, float *losses, uint16_t *argmax,
                         const uint16_t *targets, int tstride, int ostride, int R, int V,
                         double *acc);
    // probs (R, V) replaced in place by dlogits = (grad_scale / count) * (probs - onehot(target))
    // with count = acc[1] (all 0 when count is 0); rows whose target is NN_IGNORE become 0
    void (*xent_backward)(nn_ctx *ctx, nn_act *probs, const uint16_t *targets, int tstride, int R,
                          int V, float grad_scale, const double *acc);

    /* ---- optimiser */
    // One AdamW step (t >= 1) over n values, PyTorch formula with decoupled weight decay wd.
    void (*adamw)(nn_ctx *ctx, float *params, const float *grads, float *m, float *v, size_t n,
                  int t, float lr, float beta1, float beta2, float eps, float wd);
    // Sum of squares of x (n), in double, fixed order; returned to the host (waits for the device)
    double (*sum_squares)(nn_ctx *ctx, const float *x, size_t n);
    // The same for every block of x (n) at once, left in backend memory (no wait): out[b] (ceil(n /
    // block) doubles) = sum_squares(x + b * block, the block's length) bit for bit, the last block
    // shorter. block: a multiple of 65536 (gpt.h's GPT_NORM_BLOCK).
    void (*block_sum_squares)(nn_ctx *ctx, double *out, const float *x, size_t n, size_t block);
    // Gradient clipping without a host sync: *norm (one float, backend memory) =
    // nn_norm_of_blocks(ss, nb) (nn/gradnorm.h: ss[0] + ss[1] + ... in double, in that order, its
    // sqrt as float, NaN if not finite); then x (n) *= nn_clip_factor(norm, clip) where that is
    // not 1 (clip > 0 and norm > clip: clip / norm), as scale does.
    void (*clip_norm)(nn_ctx *ctx, float *x, size_t n, const double *ss, size_t nb, float clip, float *norm);
    // x (n) *= s
    void (*scale)(nn_ctx *ctx, float *x, size_t n, float s);

    /* ---- staged uploads, so the next batch's copy overlaps the compute (the CUDA backend: pinned
       host memory, a copy stream and events; the CPU backend: malloc and memcpy) */
    // host memory for upload_async's sources (CUDA: page-locked); NULL when out of memory
    void *(*host_alloc)(nn_ctx *ctx, size_t bytes);
    void (*host_free)(nn_ctx *ctx, void *p);
    // dst (device) = src (host_alloc memory), queued beside the compute: it starts once the
    // compute queued before the last upload_wait (and the zeroing of memory allocated since) is
    // done, so it may overwrite what that compute read; it has read src once the next
    // upload_async returns (src may be rewritten then).
    void (*upload_async)(nn_ctx *ctx, void *dst, const void *src, size_t bytes);
    // The compute queued after this call sees every upload_async queued before it complete; the
    // compute queued before it is what later upload_asyncs wait for.
    void (*upload_wait)(nn_ctx *ctx);

    /* ---- data-parallel collectives over the job's ranks (src/core/dist.h), on backend memory:
       every rank calls them in the same order; off, cnt (size ranks, host memory) are the same on
       every rank. Both return 0 or an lssar_err. dist_sum may read x and write out until the next
       dist_wait (below): neither may be touched before it. */
    // rank r: out (cnt[r]) = (accumulate ? out : 0) + rank 0's x[off[r] ..] + rank 1's + ...,
    // added in rank order (lssar_dist_sum_f32); scratch: ranks * cnt[r] floats
    int (*dist_sum)(nn_ctx *ctx, float *out, const float *x, const size_t *off, const size_t *cnt,
                    int accumulate, float *scratch);
    // x[off[r] .. + cnt[r]] = rank r's, for every r, on every rank (root < 0) or on rank root
    // alone (root >= 0; lssar_dist_allgather_f32)
    int (*dist_allgather)(nn_ctx *ctx, float *x, const size_t *off, const size_t *cnt, int root);
    // A backend may run dist_sum beside its compute (the CUDA backend: on a second stream, so a
    // sum overlaps the backward that follows it); after dist_wait, the next operation on ctx sees
    // every dist_sum queued so far complete. NULL: dist_sum is complete when it returns.
    void (*dist_wait)(nn_ctx *ctx);

    /* ---- the device and its memory, for benchmarks (NULL: none kept; the CPU backend's memory is
       the process's, which getrusage measures) */
    void (*device_stats)(nn_ctx *ctx, nn_device_stats *out);
} nn_backend;

/* Host helper: the RoPE tables cos_t, sin_t (T, HS/2), angle t * theta^(-2c/HS) in double, which
   the model uploads for rope_forward / rope_backward (src/nn/rope.c). */
void rope_table(float *cos_t, float *sin_t, int T, int HS, double theta);

/* The backend of a device: 0, or LSSAR_E_UNSUPPORTED when this build has none for it. */
int nn_backend_get(lssar_device device, const nn_backend **out);

/* The CPU backend (backend_cpu.c). A CUDA build adds nn_backend_cuda (src/cuda). */
extern const nn_backend nn_backend_cpu;

#endif
