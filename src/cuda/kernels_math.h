/*
 * kernels_math.h - the per-element math and the per-thread loops of the CUDA backend's
 * non-attention kernels (src/cuda/kernels_*.cu), shared with their CPU emulation
 * (src/cuda/kernels_emu.c). Everything here is FM_FN (host + device under nvcc, static inline in
 * C), so the kernels and the emulation run the same code for everything except the combining of
 * per-thread partial sums, which is warp shuffles on the GPU and the equivalent array tree in the
 * emulation (both described below, and in kernels_emu.h).
 *
 * Launch shapes are constants here, never derived from the device (SM count, occupancy), so a
 * result depends on the inputs alone: the same bits on every run and on every GPU.
 *
 * Reductions use KM_ADD / KM_MUL / KM_DIV / KM_SQRT: on the device the _rn intrinsics, which
 * nvcc never contracts into an FMA and which ignore --use_fast_math; on the host plain operators
 * (kernels_emu.c is C11 in ISO mode, where GCC's default is -ffp-contract=off; for clang it sets
 * #pragma STDC FP_CONTRACT OFF; kemu_fp_contract_off() checks the result at run time). So a
 * reduction kernel and its emulation give the same bits for the same inputs: the GPU tests can
 * compare them exactly. The elementwise math that calls fastmath.h (GELU's tanh, AdamW's sqrt, the
 * softmax's exp) uses plain operators instead, as the CPU layers do, and nvcc contracts them: those
 * agree with the emulation to a few ulp.
 *
 * The trees. A warp sum is the xor butterfly (offsets 16, 8, 4, 2, 1: every lane ends with the
 * same value, since IEEE addition is commutative); lane 0's value is the halving tree
 * km_tree_f(v, 32): at offset o, v[l] = v[l] + v[l + o] for l < o. A block sum is one warp sum per
 * warp, then a warp sum over 32 slots holding the warp totals and zeros after them (adding +0 is
 * exact). Per-thread partial sums always run over the thread's elements in increasing index.
 */
#ifndef LSSAR_CUDA_KERNELS_MATH_H
#define LSSAR_CUDA_KERNELS_MATH_H

#include <stddef.h>
#include <stdint.h>
#include "core/fastmath.h"

#ifdef __CUDA_ARCH__
#define KM_ADD(a, b) __fadd_rn((a), (b))
#define KM_SUB(a, b) __fsub_rn((a), (b))
#define KM_MUL(a, b) __fmul_rn((a), (b))
#define KM_DIV(a, b) __fdiv_rn((a), (b))
#define KM_SQRT(a) __fsqrt_rn(a)
#define KM_DADD(a, b) __dadd_rn((a), (b))
#define KM_DMUL(a, b) __dmul_rn((a), (b))
#else
#define KM_ADD(a, b) ((a) + (b))
#define KM_SUB(a, b) ((a) - (b))
#define KM_MUL(a, b) ((a) * (b))
#define KM_DIV(a, b) ((a) / (b))
#define KM_SQRT(a) sqrtf(a)
#define KM_DADD(a, b) ((a) + (b))
#define KM_DMUL(a, b) ((a) * (b))
#endif

/* ---- the bf16 operands of the GEMMs (NN_BF16): x rounded to the nearest bfloat16, ties to even,
   as its 16 bits. On the device the conversion instruction (cvt.rn.bf16.f32 through
   __float2bfloat16_rn, sm_80 and later: no .ftz, so subnormals round as on the host); on the host
   fm_bf16_rne (core/fastmath.h), the rounding of flash_bf16 and the fake GPU too. The device's
   NaN may differ in sign or payload from the host's 0x7FFF but is a NaN, which is all a product
   needs. */
FM_FN uint16_t km_bf16_rne(float x) {
#ifdef __CUDA_ARCH__
    return __bfloat16_as_ushort(__float2bfloat16_rn(x));
#else
    return fm_bf16_rne(x);
#endif
}
/* ---- activation storage: float32, or bf16 (its 16 bits as uint16_t). km_ld widens an element to
   float, km_st rounds a float into one (nearest even). The loops below that read or write
   activations are, under nvcc, templates over that element type (KM_ACT_FN, type km_act), and in
   C plain functions on float: so the kernels of either type run the emulation's code, with only
   the loads and stores changed, and a bf16 kernel computes what the float emulation computes on
   the widened inputs, rounded where it stores. */
FM_FN float km_ld(const float *p, size_t i) { return p[i]; }
FM_FN void km_st(float *p, size_t i, float v) { p[i] = v; }
#ifdef __cplusplus
FM_FN float km_ld(const uint16_t *p, size_t i) { return fm_bf16_float(p[i]); }
FM_FN void km_st(uint16_t *p, size_t i, float v) { p[i] = km_bf16_rne(v); }
#define KM_ACT_FN template <typename km_act> FM_FN
#else
typedef float km_act;
#define KM_ACT_FN FM_FN
#endif

#define KM_IGNORE 0xFFFF          /* = NN_IGNORE (nn.h; kernels_emu.c checks) */
#define KM_LN_EPS 1e-5f           /* layernorm eps, as src/nn/layernorm.c */
#define KM_GELU_K 0.7978845608028654f   /* sqrt(2 / pi), as src/nn/gelu.c */

/* ---- launch shapes */
#define KM_WARP 32
#define KM_LN_WARPS 8             /* layernorm: one warp per row, 8 rows per 256-thread block */
#define KM_COL_TX 32              /* column sums: a (32, 8) block owns 32 columns of a chunk */
#define KM_COL_TY 8               /*   of KM_COL_ROWS rows; thread (tx, ty) sums rows ty, ty + 8, ... */
#define KM_COL_ROWS 256           /*   of the chunk in order, the 8 partials meet in km_tree_f(., 8) */
#define KM_FIN_THREADS 256        /* column finish: one thread per column, chunks added in order */
#define KM_XENT_THREADS 512       /* cross-entropy: one 512-thread block per row */
#define KM_ACC_THREADS 256        /* loss accumulator: one 256-thread block */
#define KM_SS_THREADS 256         /* sum of squares: 256 threads x 32 values = 8192 per block, */
#define KM_SS_ITEMS 32            /*   thread t: values t, t + 256, ... of its block's chunk */
#define KM_SS_CHUNK (KM_SS_THREADS * KM_SS_ITEMS)
#define KM_EMB_THREADS 128        /* embedding backward: one block per token run, 128 columns at once */
#define KM_EW_THREADS 256         /* elementwise kernels */

/* ---- trees (the emulation's view; the kernels do the same with shuffles). n a power of 2. */
FM_FN float km_tree_f(float *v, int n) {
    for (int o = n / 2; o > 0; o /= 2)
        for (int l = 0; l < o; l++) v[l] = KM_ADD(v[l], v[l + o]);
    return v[0];
}
FM_FN double km_tree_d(double *v, int n) {
    for (int o = n / 2; o > 0; o /= 2)
        for (int l = 0; l < o; l++) v[l] = KM_DADD(v[l], v[l + o]);
    return v[0];
}

/* ---- layernorm: lane `lane` of the row's warp owns columns lane, lane + 32, ... */
KM_ACT_FN float km_ln_lane_sum(const km_act *x, int C, int lane) {
    float s = 0.0f;
    for (int i = lane; i < C; i += KM_WARP) s = KM_ADD(s, km_ld(x, i));
    return s;
}
// sum of (x - m)^2 over the lane's columns: the variance about the mean, as layernorm.c (two passes)
KM_ACT_FN float km_ln_lane_sqdev(const km_act *x, int C, int lane, float m) {
    float s = 0.0f;
    for (int i = lane; i < C; i += KM_WARP) {
        float d = KM_SUB(km_ld(x, i), m);
        s = KM_ADD(s, KM_MUL(d, d));
    }
    return s;
}
FM_FN float km_ln_rstd(float var) { return KM_DIV(1.0f, KM_SQRT(KM_ADD(var, KM_LN_EPS))); }
FM_FN float km_ln_out(float x, float m, float s, float w, float b) {
    return KM_ADD(KM_MUL(KM_MUL(KM_SUB(x, m), s), w), b);
}
// the row sums of the input gradient: g = dout * w, gm += g, gxm += g * (x - m) * s
KM_ACT_FN void km_ln_bwd_lane(const km_act *x, const km_act *d, const float *w, float m, float s, int C,
                              int lane, float *gm, float *gxm) {
    float a = 0.0f, b = 0.0f;
    for (int i = lane; i < C; i += KM_WARP) {
        float g = KM_MUL(km_ld(d, i), w[i]);
        a = KM_ADD(a, g);
        b = KM_ADD(b, KM_MUL(KM_MUL(g, KM_SUB(km_ld(x, i), m)), s));
    }
    *gm = a;
    *gxm = b;
}
// dx += s * (dout * w - gm - xh * gxm), xh = (x - m) * s;  gm, gxm already divided by C
FM_FN float km_ln_dx(float dx, float d, float w, float x, float m, float s, float gm, float gxm) {
    float xh = KM_MUL(KM_SUB(x, m), s);
    float t = KM_SUB(KM_SUB(KM_MUL(d, w), gm), KM_MUL(xh, gxm));
    return KM_ADD(dx, KM_MUL(s, t));
}
// parameter-gradient partials of thread (., ty) of chunk `chunk` for column j: rows
// chunk * KM_COL_ROWS + ty + 8 k in order; aw += dout * (x - m) * s, ab += dout
KM_ACT_FN void km_ln_param_thread(const km_act *dout, const km_act *inp, const float *mean, const float *rstd,
                                  int N, int C, int chunk, int ty, int j, float *aw, float *ab) {
    float a = 0.0f, b = 0.0f;
    int r1 = (chunk + 1) * KM_COL_ROWS < N ? (chunk + 1) * KM_COL_ROWS : N;
    for (int r = chunk * KM_COL_ROWS + ty; r < r1; r += KM_COL_TY) {
        float d = km_ld(dout, (size_t)r * C + j);
        a = KM_ADD(a, KM_MUL(KM_MUL(d, KM_SUB(km_ld(inp, (size_t)r * C + j), mean[r])), rstd[r]));
        b = KM_ADD(b, d);
    }
    *aw = a;
    *ab = b;
}

/* ---- column sums (matmul dbias) and the finish of every column reduction */
KM_ACT_FN float km_colsum_thread(const km_act *x, int N, int C, int chunk, int ty, int j) {
    float s = 0.0f;
    int r1 = (chunk + 1) * KM_COL_ROWS < N ? (chunk + 1) * KM_COL_ROWS : N;
    for (int r = chunk * KM_COL_ROWS + ty; r < r1; r += KM_COL_TY) s = KM_ADD(s, km_ld(x, (size_t)r * C + j));
    return s;
}
FM_FN int km_col_chunks(int N) { return (N + KM_COL_ROWS - 1) / KM_COL_ROWS; }
// part (nchunks, C): the chunks of column j in order, from 0
FM_FN float km_col_finish(const float *part, int nchunks, int C, int j) {
    float s = 0.0f;
    for (int c = 0; c < nchunks; c++) s = KM_ADD(s, part[(size_t)c * C + j]);
    return s;
}

/* ---- cross-entropy rows. Thread t of KM_XENT_THREADS owns columns t, t + 512, ...
   Max and argmax together: (m, i) starts at (x[0], 0) and takes a column only if it is strictly
   larger, so a thread keeps its first maximum; partners combine by the larger value, then the
   smaller index. That order is total on non-NaN values, so any tree gives the row's first maximum
   (the index xent.c's `while (x[am] != mx)` finds), m = x[i] exactly. A NaN never wins a strict
   comparison; if x[0] is NaN every thread keeps it and the row's max is NaN: then xent.c's search
   runs to V - 1, which km_xent_argmax reproduces. */
KM_ACT_FN void km_xent_thread_max(const km_act *x, int V, int t, float *m, int *idx, int *nonfinite) {
    float mx = km_ld(x, 0);
    int am = 0, bad = 0;
    for (int j = t; j < V; j += KM_XENT_THREADS) {
        float v = km_ld(x, j);
        if (v > mx) { mx = v; am = j; }
        bad |= !(KM_SUB(v, v) == 0.0f);   // inf - inf and NaN - NaN are NaN
    }
    *m = mx;
    *idx = am;
    *nonfinite = bad;
}
// does (m2, i2) beat (m1, i1)?
FM_FN int km_xent_better(float m1, int i1, float m2, int i2) { return m2 > m1 || (m2 == m1 && i2 < i1); }
FM_FN int km_xent_argmax(float mx, int idx, int V) { return mx == mx ? idx : V - 1; }
// the thread's partial sum of e = exp(x - max); e is made again for the probabilities rather than
// kept in place, where a bf16 row would round it before the division
KM_ACT_FN float km_xent_thread_z(const km_act *x, int V, int t, float mx) {
    float z = 0.0f;
    for (int j = t; j < V; j += KM_XENT_THREADS) z = KM_ADD(z, fm_exp(km_ld(x, j) - mx));
    return z;
}
// x = e / z in place (inv = 1 / z)
KM_ACT_FN void km_xent_thread_probs(km_act *x, int V, int t, float mx, float inv) {
    for (int j = t; j < V; j += KM_XENT_THREADS) km_st(x, j, KM_MUL(fm_exp(km_ld(x, j) - mx), inv));
}
// -log p[tg] = log z - (x_t - max) in double, as xent.c; 0 for an ignored row; NaN if any logit is
// not finite (xent.c tests the sum of the logits instead: the same rows, except that a sum of
// finite logits overflowing to inf, |logit| ~ 1e34, makes it NaN there and not here)
FM_FN float km_xent_loss(float z, float xt, float mx, int tg, int nonfinite) {
    float l = tg != KM_IGNORE ? (float)(log((double)z) - ((double)xt - (double)mx)) : 0.0f;
    return nonfinite ? fm_bits_to_float(0x7fc00000) : l;   // a quiet NaN
}
// dlogits = scale * (p - onehot): p * scale, and p * scale - scale at the target (as xent.c)
FM_FN float km_xent_grad(float p, float scale, int is_target) {
    float g = KM_MUL(p, scale);
    return is_target ? KM_SUB(g, scale) : g;
}
// grad_scale / count with count = acc[1] on the device (0 when nothing was counted)
FM_FN float km_xent_scale(float grad_scale, double count) {
    return count > 0 ? KM_DIV(grad_scale, (float)count) : 0.0f;
}
// the loss accumulator: thread t of KM_ACC_THREADS sums rows t, t + 256, ... in double
FM_FN double km_acc_thread(const float *rowloss, int R, int t) {
    double s = 0.0;
    for (int r = t; r < R; r += KM_ACC_THREADS) s = KM_DADD(s, (double)rowloss[r]);
    return s;
}

/* ---- sum of squares: chunk b of KM_SS_CHUNK values, thread t; (double) x * x is exact (48 bits) */
FM_FN double km_ss_thread(const float *x, size_t n, size_t b, int t) {
    double s = 0.0;
    size_t i0 = b * KM_SS_CHUNK + (size_t)t;
    for (int k = 0; k < KM_SS_ITEMS; k++) {
        size_t i = i0 + (size_t)k * KM_SS_THREADS;
        if (i < n) { double v = (double)x[i]; s = KM_DADD(s, KM_DMUL(v, v)); }
    }
    return s;
}
// the second stage: thread t sums partials t, t + 256, ... in order
FM_FN double km_ss_finish_thread(const double *part, size_t nb, int t) {
    double s = 0.0;
    for (size_t b = (size_t)t; b < nb; b += KM_SS_THREADS) s = KM_DADD(s, part[b]);
    return s;
}

/* ---- embedding backward. keys (n) sorted stably (the token of each row of one channel), rows
   (n) the row (b * T + t) of each key, ascending within a run of equal keys. A run starting at i
   adds its rows to the table row one after the other, in row order, into the stored value: the
   order of embedding.c's scatter (its rows in order), so the same bits as the CPU backend. */
FM_FN int km_emb_run_start(const uint16_t *keys, int i) { return i == 0 || keys[i] != keys[i - 1]; }
FM_FN int km_emb_run_end(const uint16_t *keys, int n, int i) {
    int e = i + 1;
    while (e < n && keys[e] == keys[i]) e++;
    return e;
}
// the run [i, e) of column c into acc (the stored gradient); a counted loop, so that nvcc can
// unroll it and have several rows' loads in flight while the additions stay in order
KM_ACT_FN float km_emb_run_col(float acc, const km_act *dout, const int *rows, int i, int e, int C, int c) {
#ifdef __CUDA_ARCH__
#pragma unroll 8
#endif
    for (int j = i; j < e; j++) acc = KM_ADD(acc, km_ld(dout, (size_t)rows[j] * C + c));
    return acc;
}
// dwpe[t][c] += dout[b * T + t][c] for b in order (embedding.c's row order again)
KM_ACT_FN float km_emb_pos_col(float acc, const km_act *dout, int B, int T, int C, int t, int c) {
    for (int b = 0; b < B; b++) acc = KM_ADD(acc, km_ld(dout, ((size_t)b * T + t) * C + c));
    return acc;
}

/* ---- elementwise (the formulas of src/nn, operation for operation) */
FM_FN float km_gelu(float v) {
    return 0.5f * v * (1.0f + fm_tanh(KM_GELU_K * (v + 0.044715f * v * v * v)));
}
FM_FN float km_gelu_grad(float v, float d) {
    float t = fm_tanh(KM_GELU_K * (v + 0.044715f * v * v * v));
    float sech2 = 1.0f - t * t;
    float g = 0.5f * (1.0f + t) + 0.5f * v * sech2 * KM_GELU_K * (1.0f + 3.0f * 0.044715f * v * v);
    return d * g;
}
// RoPE on one pair (x1, x2) = (v[c], v[c + HS/2]) with ss = dir * sin: (x1 cos - x2 ss, x2 cos + x1 ss)
FM_FN void km_rope_pair(float *x1, float *x2, float cc, float ss) {
    float a = *x1, b = *x2;
    *x1 = KM_SUB(KM_MUL(a, cc), KM_MUL(b, ss));
    *x2 = KM_ADD(KM_MUL(b, cc), KM_MUL(a, ss));
}
// The bias corrections 1 / (1 - beta^t), in float with libm's powf as adamw.c (host side)
FM_FN void km_adamw_ibc(int t, float beta1, float beta2, float *ibc1, float *ibc2) {
    *ibc1 = 1.0f / (1.0f - powf(beta1, (float)t));
    *ibc2 = 1.0f / (1.0f - powf(beta2, (float)t));
}
// One AdamW step on one value (adamw.c): ibc1, ibc2 = 1 / (1 - beta^t), computed by the host
FM_FN void km_adamw(float *p, float *m, float *v, float g, float lr, float beta1, float beta2, float eps,
                    float wd, float ibc1, float ibc2) {
    float mi = beta1 * *m + (1.0f - beta1) * g;
    float vi = beta2 * *v + (1.0f - beta2) * g * g;
    *m = mi;
    *v = vi;
    *p -= lr * (mi * ibc1 / (fm_sqrt(vi * ibc2) + eps) + wd * *p);
}


// leading dimension (elements) of a bf16 copy of rows of n values: n rounded up to 8, so that every
// row starts 16-byte aligned (the tensor-core GEMM kernels' alignment) whatever n is (V = 50257)
FM_FN int km_bf16_ld(int n) { return (n + 7) / 8 * 8; }
// Rows of N cast per product when a row's bf16 copies take row_bytes and a product may cast at
// most cap bytes: all N if they fit, else a multiple of 128 rows (so the chunks' fp32 rows keep
// the base's alignment), else as many as fit, at least 1.
FM_FN int km_cast_rows(int N, size_t row_bytes, size_t cap) {
    size_t r = cap / row_bytes;
    if (r >= (size_t)N) return N;
    return r >= 128 ? (int)(r / 128 * 128) : r ? (int)r : 1;
}

#endif
