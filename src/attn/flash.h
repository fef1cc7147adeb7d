/*
 * flash.h - the shared pieces of the fused (FlashAttention-style) attention kernels: tile sizes,
 * the per-row statistics layout, and the per-element math that both the CPU emulation
 * (src/attn/flash_emu.c) and the CUDA kernels (src/cuda/flash_attn.cu) call. Plain C11 that also
 * compiles as CUDA C++: every function is FM_FN (static inline, __host__ __device__ under nvcc),
 * no library calls besides core/fastmath.h, no compound literals, designated initialisers or
 * `restrict`. The design contract is docs/CUDA.md; the math is docs/attention.md.
 *
 * ---------------------------------------------------------------------------------------------
 * Tiles and fragment ownership
 *   A CTA owns FLASH_BR = 64 query rows of one (b, h) and walks key tiles of FLASH_BC = 64 keys
 *   (tiles wholly above the diagonal skipped, the diagonal tile masked per element: key j is
 *   visible to position i iff j <= i). FLASH_WARPS = 4 warps, warp w owns rows 16w..16w+15 of
 *   the tile. The m16n8k16 accumulator fragment of a warp's 16 x 64 score tile gives lane l rows
 *   l/4 and l/4 + 8 and, in each n8 column block c8 = 0..7, columns 8 c8 + 2 (l % 4) + {0, 1}:
 *   so the four lanes q = l % 4 of a quad share a row, lane q owning the 16 columns
 *   flash_lane_col(q, t), t = 0..15 (increasing in t). Every per-row sum over keys is: per lane
 *   and key tile, the lane's 16 elements summed in t order from 0 (the tile partial), added to
 *   the lane's running fp32 sum (after the online-softmax rescale); at the end the quad tree
 *   ((l0 + l1) + (l2 + l3)) (shuffle xor 1, then xor 2: both lanes of a pair add the same two
 *   floats, so all four end with the same bits). Max / argmax likewise (order-free). Matmul
 *   outputs are owned one element per lane. The score products (S = Q K^T, dW = dY V^T) sum
 *   d = 0..D-1 in order; the products over keys or query rows (P V, G V, dS K, W^T dY, dS^T Q)
 *   go one mma k-step of 16 reduction indices at a time: the 16 products summed in order from 0,
 *   then added to the accumulator (the SIMT variant: FMAs into a temporary, then one add), so an
 *   accumulator rounds n / 16 times, not n (measured: |sum of weights - 1| 2.4e-4 at T = 16384
 *   with a plain running sum). The emulation sums in those orders in fp32; the order inside one
 *   mma is the hardware's (the GPU tests' bounds cover it).
 *
 * Precision modes: FP32 (products of fp32 operands, fp32 accumulation) and BF16 (the operands of
 *   every product rounded to bf16, round-to-nearest-even, flash_bf16: Q, K, V, dY, and the
 *   intermediate weight matrices P, G and dS just before they enter a product, as mma.sync
 *   needs; accumulation, row statistics, u, Z, W and every per-element function stay fp32:
 *   p = 15 amplifies the relative error of u fifteen-fold). Row sums use the fp32 weights, not
 *   their bf16 roundings (as FlashAttention-2).
 *
 * Pre-pass (lssa, lssar): rq_i = 1 / max(|q_i|, 1e-12) and rk_j likewise (flash_inv_norm of the
 *   fp32 sum of squares over d in order, from the fp32 inputs), (B, H, T) each. The logits use
 *   the raw dot product: x_ij = (lambda_i rq_i) * (S_ij * rk_j), S_ij = q_i . k_j, as the CPU
 *   path (attn_rows.c).
 *
 * ---------------------------------------------------------------------------------------------
 * Forward (one CTA per (b, h, query tile))
 *   softmax / ssmax: one pass, online softmax, CENTRED on the running argmax (see "Why centred"
 *     below). Per row: running max m, its first index jm (ties keep the earlier key), and the
 *     sums over the keys seen EXCEPT jm: l' = sum_{k != jm} exp(x_k - m) (per lane) and
 *     acc' = sum_{k != jm} exp(x_k - m) v_k (the P V product with the jm entry of P zeroed).
 *     Per key tile: tile max and argmax over the quad; if it exceeds m, the old jm rejoins the
 *     sums with weight exp(x_jm_old - m_old) = 1: the lane owning column jm_old adds 1 to its
 *     l' and every lane of the row adds v_jm_old to its acc' columns, then all rescale by
 *     alpha = exp(m_old - m_new) (flash_online_alpha): l' = (l' [+ 1]) alpha,
 *     acc' = (acc' + v_jm_old) alpha. Then l' += p_j, acc' += P' V for the tile's keys, P' = p
 *     with the new jm's entry 0. At the end l = 1 + l', y = (acc' + v_jm) / l, and the centred
 *     output yc = (acc' - l' v_jm) / l = sum_k w_k (v_k - v_jm). Saves LSE = m + ln l, jm, yc.
 *   lssa: one pass (no max needed: |x| <= ln D ln n): a = softplus(x), Z += a, acc += a v;
 *     y = acc / Z. Saves Z. (Not centred: the largest a_j is at most ln D ln n + ln 2 and every
 *     a_j >= ln 2 e^-|x_j|, so a row is nearly one-hot only when almost every other key points
 *     away from q (q^ . k^ near -1), which none of the test families has; centring would add
 *     the online argmax bookkeeping to lssa's single pass.)
 *   lssar: pass 1: Z, xmax (with its first index jm), xmin (flash_lssar_pass1_a), then
 *     flash_lssar_row_finish: u_max = n softplus(xmax) / Z - o (exact: softplus increases), and
 *     the CPU's fallback test (attn_rows.c): i >= 3 and (xmax - xmin <= lambda * 8 sqrt(D) eps
 *     or !(u_max > 0)). Pass 2 recomputes x: w = (u / u_max)^p (0 where u / u_max <= FLT_MIN;
 *     exactly 1 at jm), or w = a / Z on a fallback row (flash_lssar_weight), g = w / u (u > 0,
 *     non-fallback rows; else 0). As for softmax the jm term is kept out of the sums:
 *     W' = sum_{k != jm} w_k, acc' = P' V, S' = sum_{k != jm} g_k, E' = G' V (one more product
 *     with V). With w_jm = 1 (fallback: a_jm / Z) and W = W' + w_jm:
 *     y = (acc' + w_jm v_jm) / W, yc = (acc' - W' v_jm) / W, S = (S' + 1 / u_max) / W,
 *     Ec = (E' - S' v_jm) / W = sum_k (beta_k / u_k) (v_k - v_jm). Saves Z, jm, u_max, W
 *     (W = -1 on a fallback row), S, yc and Ec.
 *   sigmoid / relu: one pass, no row statistic, no max and no normalisation: x = S / sqrt(D) + b
 *     (relu: b = 0; flash_logit), a = sigmoid(x) or max(x, 0) / L (flash_unnormed_a, L and b per
 *     row from the length normalisation), acc += a v (P V with P = a); y = acc. One kernel instance
 *     serves both (the row's relu flag; as softmax / ssmax share one). The per-row slots stay (all
 *     0) so that every kind has the same layout.
 *   Stats: (B, H, Tq, FLASH_NSTAT) floats (slots FLASH_ST_*), then the centred rows yc
 *     (B, Tq, H, D) for softmax / ssmax / lssar, then Ec (B, Tq, H, D) for lssar:
 *     flash_stats_floats() in all, flash_stats_yc() and flash_stats_ec() give the offsets.
 *
 * Backward (deterministic, no atomics)
 *   0. rows (flash_bwd_row): per row i, with dy (bf16-rounded in BF16 mode) and v_jm:
 *      c = dy . v_jm, D1 = dy . yc (= sum_k beta_k (dbeta_k - c), centred), and lssar (not
 *      fallback) D2 = p o (dy . Ec - D1 S) (= sum_k alpha_k dalpha_k, docs/attention.md "On a
 *      GPU", centred the same way); lssa: D1 = dy . y (not centred). Dots over d in order, fp32.
 *      Into a (B, H, T, FLASH_NBSTAT) buffer (slots FLASH_BS_*). Also rq, rk as in the forward.
 *      sigmoid / relu: no pre-pass (there is no normalisation to differentiate: no D1 term);
 *      per element dx_ij = a'(x_ij) (dy_i . v_j), dS_ij = dx_ij / sqrt(D) (flash_bwd_elem),
 *      dV += A^T dY with the weights a themselves.
 *   1. dK, dV: a CTA per (b, h, key tile) walks the query tiles that see it (in order):
 *      recompute S, x and the weights (flash_bwd_elem from the saved stats), dW = dY V^T,
 *      dV += W^T dY, dS per element, dK += dS^T Q; at the end the l2-normalisation projection
 *      for lssa / lssar: with G = sum_i dS_ij q_i (raw q), dk_j = G_j - k_j rk_j^2 (k_j . G_j).
 *   2. dQ: a CTA per (b, h, query tile) walks its key tiles (in order): the same recomputation,
 *      dQ += dS K; then dq_i = G_i - q_i rq_i^2 (q_i . G_i) (lssa / lssar). ssmax: each row's
 *      term sum_j dx_ij S_ij, as A - Bs C from three row sums (flash_ssmax_acc; lane tile
 *      partials and the quad tree as every row sum; flash_ssmax_row_term) to a buffer.
 *   3. ssmax ds_h = sum over (b, i) in index order of flash_ssmax_ds_row(...) (double).
 *   Since dS is recomputed by both 1 and 2 with the same function on the same inputs, the two
 *   agree bit for bit.
 *
 * Why centred (measured; it is not in FlashAttention): every normalisation backward has the form
 *   dbeta_j - D1 with D1 = sum_k beta_k dbeta_k. On a nearly one-hot row (softmax on the peaked
 *   input family: w_k ~ e^-60 off the argmax; lssar with p = 15 nearly always) the true
 *   dbeta_jm - D1 = sum_{k != jm} beta_k (dbeta_jm - dbeta_k) is tiny, but D1 = dy . y carries an
 *   absolute rounding error ~eps |dy| |y|, so dq and dk come out as pure rounding noise, orders of
 *   magnitude above their true size (the CPU path centres for the same reason, attn_rows.c). We
 *   centre on c = dbeta_jm: the jm element uses (dbeta_jm - c) = 0 exactly (flash_bwd_elem's
 *   is_jm), the others (dbeta_j - c) - D1c, with D1c = dy . yc computed from the centred output
 *   the forward saved, which keeps full relative accuracy because no large term ever enters it.
 *   Cost: one (B, Tq, H, D) row buffer (yc) in the stats, and in the online forward an
 *   occasional extra load of v_jm_old when a row's argmax moves to a later tile.
 *
 * Two more measured choices: the backward's sigmoid comes from flash_softplus_sigmoid, not as
 *   1 - exp(-softplus(x)) (attn_rows.c's shortcut loses the row where x is very negative, which
 *   matters on uniform rows); ssmax's row term is A - Bs C (flash_ssmax_row_term), not A.
 */
#ifndef LSSAR_ATTN_FLASH_H
#define LSSAR_ATTN_FLASH_H

#include <float.h>
#include <stddef.h>
#include "core/fastmath.h"

#define FLASH_BR 64       // query rows per CTA
#define FLASH_BC 64       // keys per key tile
#define FLASH_WARPS 4     // warps per CTA, 16 query rows each
#define FLASH_WROWS 16    // rows per warp
#define FLASH_LANE_COLS 16  // columns of a 64-wide tile owned by one lane of a quad

// The attention kinds (the values of lssar_attn_kind in lssar.h; repeated so that this header
// needs nothing from the public one).
#define FLASH_SOFTMAX 0
#define FLASH_SSMAX 1
#define FLASH_LSSA 2
#define FLASH_LSSAR 3
#define FLASH_SIGMOID 4
#define FLASH_RELU 5

// Per-row statistics the forward saves: (B, H, Tq, FLASH_NSTAT) floats. Unused slots are 0.
enum {
    FLASH_ST_M = 0,     // softmax / ssmax: LSE = m + ln l;  lssa / lssar: Z = sum_j a_j
                        // (sigmoid / relu: no statistic; every slot 0)
    FLASH_ST_JMAX = 1,  // softmax / ssmax / lssar: jm, the first argmax of x (a float; exact < 2^24)
    FLASH_ST_UMAX = 2,  // lssar: u_max = n softplus(xmax) / Z - o
    FLASH_ST_W = 3,     // lssar: W = sum_j w_j; -1 flags a fallback row (beta = alpha)
    FLASH_ST_S = 4,     // lssar: S = sum_{u_j > 0} beta_j / u_j
    FLASH_NSTAT = 8     // slots 5..7 reserved
};

// Per-row values the backward's row pre-pass computes: (B, H, T, FLASH_NBSTAT) floats.
enum {
    FLASH_BS_C = 0,     // c = dy . v_jm (the centring constant; unused by lssa)
    FLASH_BS_D1 = 1,    // softmax / ssmax / lssar: D1 - c = dy . yc;  lssa: D1 = dy . y
    FLASH_BS_D2 = 2,    // lssar (not fallback): D2 = p o (dy . Ec - (D1 - c) S)
    FLASH_NBSTAT = 4    // slot 3 reserved
};

// Rows of D floats per (b, position, h) after the per-row slots: yc (softmax, ssmax, lssar) and
// Ec (lssar); none for lssa, sigmoid and relu.
FM_FN int flash_stats_drows(int kind) {
    return kind == FLASH_LSSAR ? 2 : kind == FLASH_SOFTMAX || kind == FLASH_SSMAX ? 1 : 0;
}
// Total stats floats for a forward of Tq query rows: linear in B * Tq.
FM_FN size_t flash_stats_floats(int kind, int B, int Tq, int H, int D) {
    size_t rows = (size_t)B * Tq * H;
    return rows * FLASH_NSTAT + (size_t)flash_stats_drows(kind) * rows * D;
}
// Offset (floats) of yc (B, Tq, H, D) in the stats; of Ec (B, Tq, H, D) (lssar only).
FM_FN size_t flash_stats_yc(int B, int Tq, int H) { return (size_t)B * Tq * H * FLASH_NSTAT; }
FM_FN size_t flash_stats_ec(int B, int Tq, int H, int D) {
    return flash_stats_yc(B, Tq, H) + (size_t)B * Tq * H * D;
}
// Index of row (b, h, r) in a (B, H, T, nslot) per-row array.
FM_FN size_t flash_row_index(int b, int h, int r, int H, int T) {
    return ((size_t)b * H + h) * T + r;
}

// Per-launch parameters.
typedef struct {
    int kind;           // FLASH_SOFTMAX .. FLASH_LSSAR
    int D;              // head dim
    float p;            // lssar power
    int ip;             // lssar: p as an integer when p is one in [1, 63] (repeated squaring), else 0
    float inv_sqrt_d;   // 1 / sqrt(D) (softmax, ssmax)
    float ln_d;         // ln D (lssa, lssar)
    float uniform_eps;  // 8 sqrt(D) FLT_EPSILON: the lssar fallback tolerance per unit of lambda
    // sigmoid / relu length normalisation (flash_params_len): len_row = 1 uses n_i of each row;
    // otherwise the training length L: sigmoid bias -ln L, relu factor 1 / L
    int len_row;
    float len_bias;
    float inv_len;
} flash_params;

FM_FN void flash_params_init(flash_params *fp, int kind, float p, int D) {
    float fd = (float)D, sd = fm_sqrt(fd);
    sd = 0.5f * (sd + fd / sd);  // one Newton step: exact for the usual D (squares of 2^k)
    fp->kind = kind;
    fp->D = D;
    fp->p = p;
    int ip = (int)p;
    fp->ip = (kind == FLASH_LSSAR && p == (float)ip && ip >= 1 && ip < 64) ? ip : 0;
    fp->inv_sqrt_d = 1.0f / sd;
    fp->ln_d = fm_log(fd);
    fp->uniform_eps = 8.0f * sd * FLT_EPSILON;
    fp->len_row = 0;
    fp->len_bias = 0.0f;
    fp->inv_len = 1.0f;
}

// lssa / lssar: the D of the ln(D) ln(n) temperature when it is not the head size (temp_d >= 2;
// 0 keeps ln(head size)).
// The one rule for temp_d (the attention backends, the model config, the CLI): 0 or >= 2 (ln 1 = 0 scores nothing).
FM_FN int attn_temp_d_ok(int temp_d) { return temp_d == 0 || temp_d >= 2; }
FM_FN void flash_params_temp(flash_params *fp, int temp_d) {
    if (temp_d > 0) fp->ln_d = fm_log((float)temp_d);
}

// sigmoid / relu: the length normalisation, len_row (1: n_i per row) or the training length
// train_len (>= 1, checked by the caller). Ignored by the other kinds.
FM_FN void flash_params_len(flash_params *fp, int len_row, int train_len) {
    float L = !len_row && train_len >= 1 ? (float)train_len : 1.0f;
    fp->len_row = len_row;
    fp->len_bias = -fm_log(L);
    fp->inv_len = 1.0f / L;
}

FM_FN int flash_is_normed(int kind) { return kind == FLASH_LSSA || kind == FLASH_LSSAR; }
// sigmoid / relu: no row normalisation, hence no row statistic and one pass
FM_FN int flash_is_unnormed(int kind) { return kind == FLASH_SIGMOID || kind == FLASH_RELU; }

// bf16 rounding (round to nearest, ties to even), returned as the float it represents; NaN stays
// NaN. The same value as __float2bfloat16_rn.
FM_FN float flash_bf16(float x) {
    int32_t b = fm_float_to_bits(x);
    if ((b & 0x7f800000) == 0x7f800000 && (b & 0x007fffff)) return x;  // NaN
    uint32_t ub = (uint32_t)b;
    ub += 0x7fffu + ((ub >> 16) & 1u);
    ub &= 0xffff0000u;
    return fm_bits_to_float((int32_t)ub);
}

// Column (0..63) of a 64-wide tile owned by lane q (0..3) of a quad, its t-th (0..15).
FM_FN int flash_lane_col(int q, int t) { return 8 * (t >> 1) + 2 * q + (t & 1); }
// The lane (0..3) owning column j of a tile.
FM_FN int flash_col_lane(int j) { return (j & 7) >> 1; }
// The quad tree of four lane partial sums.
FM_FN float flash_quad_sum(float l0, float l1, float l2, float l3) { return (l0 + l1) + (l2 + l3); }
// Running (max, first argmax): take (x, j) if x is larger, or equal with a smaller index.
FM_FN void flash_argmax_update(float *m, int *jm, float x, int j) {
    if (x > *m || (x == *m && j < *jm)) { *m = x; *jm = j; }
}

/* A row with no argmax: every logit NaN or -inf (a non-finite q or k), so the running argmax of
   row i (position i, keys 0..i) was never set. Such a row reads v_0 where it would read v_jm (in
   range for every row) and outputs NaN (flash_nan), so that the loss shows it. */
FM_FN int flash_row_lost(int jm, int i) { return !(jm >= 0 && jm <= i); }
FM_FN float flash_nan(void) { return fm_bits_to_float(0x7fc00000); }

// 1 / max(sqrt(ss), 1e-12): ss the fp32 sum of squares of a row (over d in order).
FM_FN float flash_inv_norm(float ss) {
    float nr = fm_sqrt(ss);
    return 1.0f / (nr > 1e-12f ? nr : 1e-12f);
}

// The constants of query row i (position i, n = i + 1 keys), and what the passes / the saved
// statistics add to them.
typedef struct {
    float n;        // n_i = i + 1
    float o;        // lssar offset: 0 for i < 3, else 1
    float lam0;     // lssa / lssar: lambda_i = ln D ln n
    float scale;    // logit factor: softmax, sigmoid, relu 1/sqrt(D), ssmax s_h ln(n)/sqrt(D), lssa/lssar lam0 rq
    float bias;     // sigmoid: the logit bias b = -ln L or -ln n_i (0 otherwise)
    float ilen;     // relu: 1 / L or 1 / n_i (1 otherwise)
    int relu;       // 1 for relu (sigmoid and relu share a kernel instance: the row tells them apart)
    float lse;      // softmax / ssmax: LSE (backward)
    float z, invz, nz;  // lssa / lssar: Z, 1/Z, n/Z
    float umax, invm;   // lssar: u_max, 1/u_max
    float invw;         // lssar: 1/W (backward)
    int fallback;       // lssar: 1 on a fallback row (beta = alpha)
    int jm;             // argmax of the row (softmax / ssmax / lssar)
} flash_row;

// Row i's constants. s_h: the ssmax scale of the head (ignored otherwise); rq: lssa/lssar only.
FM_FN void flash_row_init(const flash_params *fp, int i, float s_h, float rq, flash_row *rw) {
    float n = (float)(i + 1), ln_n = fm_log(n);
    rw->n = n;
    rw->o = i < 3 ? 0.0f : 1.0f;
    rw->lam0 = 0.0f;
    rw->scale = fp->inv_sqrt_d;
    if (fp->kind == FLASH_SSMAX) rw->scale = fp->inv_sqrt_d * s_h * ln_n;
    if (flash_is_normed(fp->kind)) {
        rw->lam0 = fp->ln_d * ln_n;
        rw->scale = rw->lam0 * rq;
    }
    rw->bias = 0.0f;
    rw->ilen = 1.0f;
    rw->relu = fp->kind == FLASH_RELU;
    if (fp->kind == FLASH_SIGMOID) rw->bias = fp->len_row ? -ln_n : fp->len_bias;
    if (fp->kind == FLASH_RELU) rw->ilen = fp->len_row ? 1.0f / n : fp->inv_len;
    rw->lse = 0.0f;
    rw->z = 1.0f; rw->invz = 1.0f; rw->nz = n;
    rw->umax = 1.0f; rw->invm = 1.0f; rw->invw = 1.0f;
    rw->fallback = 0;
    rw->jm = 0;
}

// The logit of one score: S the raw dot product q_i . k_j, rk = 1/|k_j| (lssa/lssar). sigmoid /
// relu: S / sqrt(D) + b (relu: b = 0), as attn_rows.c.
FM_FN float flash_logit(const flash_params *fp, const flash_row *rw, float S, float rk) {
    if (flash_is_unnormed(fp->kind)) return rw->scale * S + rw->bias;
    return flash_is_normed(fp->kind) ? rw->scale * (S * rk) : rw->scale * S;
}

// ---- forward, per element

// softmax / ssmax: the online rescale factor exp(m_old - m_new) (0 while no key was seen).
FM_FN float flash_online_alpha(float m_old, float m_new) {
    return m_old == -INFINITY ? 0.0f : fm_exp(m_old - m_new);
}
// softmax / ssmax: the unnormalised weight of logit x under running max m.
FM_FN float flash_softmax_p(float x, float m) { return fm_exp(x - m); }
/* softplus(x) and sigmoid(x) from one exp: e = exp(-|x|), a = max(x, 0) + log1p(e),
   sigmoid = 1 / (1 + e) (x >= 0) or e / (1 + e). Not sigmoid = 1 - exp(-a) (attn_rows.c's
   shortcut): where x is very negative a ~ e is tiny and 1 - exp(-a) keeps only an absolute
   error of ~6e-8, while on a (nearly) uniform row sigmoid / Z ~ 1 / n is not small at all
   (measured: 1.5e-4 relative error of dk on the repeated-keys family at T = 1024, D = 16,
   where lambda = 19 and x reaches -19). */
FM_FN float flash_softplus_sigmoid(float x, float *sig) {
    float ax = x < 0.0f ? -x : x;
    float e = fm_exp(-ax);
    float inv = 1.0f / (1.0f + e);
    *sig = x >= 0.0f ? inv : e * inv;
    return (x > 0.0f ? x : 0.0f) + fm_log1p01(e);
}

// lssa (and lssar pass 1): a = softplus(x).
FM_FN float flash_lssa_a(float x) { return fm_softplus(x); }

// sigmoid / relu: the weight itself, a = sigmoid(x) or max(x, 0) / L (x > 0 exactly as
// attn_rows.c, and a NaN x stays NaN). A masked element (x = -inf) gives 0 in both.
FM_FN float flash_unnormed_a(const flash_row *rw, float x) {
    return rw->relu ? (!(x <= 0.0f) ? x * rw->ilen : 0.0f) : fm_sigmoid(x);
}
// ... and its derivative da/dx, *a the weight: sigmoid e / (1 + e)^2 with e = exp(-|x|) (=
// s(x) s(-x), no cancellation where s is near 1), a from the same e; relu 1 / L where x > 0, else
// 0 (the kink included, as attn_rows.c). Both 0 at x = -inf.
FM_FN float flash_unnormed_grad(const flash_row *rw, float x, float *a) {
    float ax = x < 0.0f ? -x : x;
    float e = fm_exp(-ax);
    float inv = 1.0f / (1.0f + e);
    float sa = x >= 0.0f ? inv : e * inv, sg = e * inv * inv;
    int pos = !(x <= 0.0f);  // a NaN x keeps its NaN weight (and gradient)
    float ra = pos ? x * rw->ilen : 0.0f, rg = pos ? (x == x ? rw->ilen : x) : 0.0f;
    *a = rw->relu ? ra : sa;
    return rw->relu ? rg : sg;
}

// lssar pass 1, one element of one lane, a = softplus(x) given: z += a (z: the lane's tile
// partial), running max / first argmax / min of x.
FM_FN void flash_lssar_pass1_a(float x, float a, int j, float *z, float *xmax, int *jm, float *xmin) {
    *z += a;
    if (x > *xmax) { *xmax = x; *jm = j; }  // columns arrive in increasing order: first index
    *xmin = x < *xmin ? x : *xmin;
}
FM_FN void flash_lssar_pass1(float x, int j, float *z, float *xmax, int *jm, float *xmin) {
    flash_lssar_pass1_a(x, fm_softplus(x), j, z, xmax, jm, xmin);
}

// lssar: after pass 1 (z, xmax, xmin, jm combined over the quad), the row's u_max and the
// fallback test, exactly the CPU's (attn_rows.c; i >= 3 <=> o = 1). Fills rw.
FM_FN void flash_lssar_row_finish(const flash_params *fp, flash_row *rw, float z, float xmax,
                                  float xmin, int jm) {
    rw->z = z;
    rw->invz = 1.0f / z;
    rw->nz = rw->n * rw->invz;
    rw->jm = jm;
    float m = rw->nz * fm_softplus(xmax) - rw->o;
    rw->umax = m;
    float uniform_tol = rw->lam0 * fp->uniform_eps;
    rw->fallback = rw->o > 0.0f && (xmax - xmin <= uniform_tol || !(m > 0.0f));
    rw->invm = rw->fallback ? 1.0f : 1.0f / m;
}

// r^p for r in (0, 1] (the caller masks r <= FLT_MIN).
FM_FN float flash_pow(const flash_params *fp, float r) {
    if (fp->ip >= 1 && fp->ip < 16) return fm_powi4(r, fp->ip);
    if (fp->ip >= 16) return fm_powi6(r, fp->ip);
    return fm_pow01(r, fp->p);
}

// lssar pass 2, one element: the unnormalised weight w (w_jm = 1 is the caller's: is_jm), and
// g = w / u for E and S (0 where u <= 0 and on fallback rows).
FM_FN float flash_lssar_weight(const flash_params *fp, const flash_row *rw, float x, int is_jm,
                               float *g) {
    float a = fm_softplus(x);
    if (rw->fallback) { *g = 0.0f; return a * rw->invz; }
    float u = rw->nz * a - rw->o;
    float r = u * rw->invm;
    float pw = flash_pow(fp, r);  // (computed, then selected: branch-free)
    float w = !(r <= FLT_MIN) ? pw : 0.0f;  // (not r > FLT_MIN: a NaN r stays NaN)
    w = is_jm ? 1.0f : w;
    int pos = u > 0.0f;
    float uu = pos ? u : 1.0f;
    float gg = w / uu;
    *g = pos ? gg : 0.0f;
    return w;
}

// lssar: the weight of jm itself (1, or alpha_jm = a_jm / Z on a fallback row), given xmax.
FM_FN float flash_lssar_wjm(const flash_row *rw, float xmax) {
    return rw->fallback ? fm_softplus(xmax) * rw->invz : 1.0f;
}

// ---- statistics save / load

// Forward end of a row: write the saved slots. lse_or_z: LSE (softmax/ssmax) or Z; w: W
// (lssar); s: S = (S' + 1/u_max) / W (lssar).
FM_FN void flash_stats_store(const flash_params *fp, const flash_row *rw, float lse_or_z, float w,
                             float s, float *st) {
    for (int t = 0; t < FLASH_NSTAT; t++) st[t] = 0.0f;
    st[FLASH_ST_M] = lse_or_z;
    st[FLASH_ST_JMAX] = (float)rw->jm;
    if (fp->kind == FLASH_LSSAR) {
        st[FLASH_ST_UMAX] = rw->umax;
        st[FLASH_ST_W] = rw->fallback ? -1.0f : w;
        st[FLASH_ST_S] = rw->fallback ? 0.0f : s;
    }
}

// Backward: row i's constants (flash_row_init) plus the saved statistics st (FLASH_NSTAT).
FM_FN void flash_row_load(const flash_params *fp, int i, float s_h, float rq, const float *st,
                          flash_row *rw) {
    flash_row_init(fp, i, s_h, rq, rw);
    if (flash_is_unnormed(fp->kind)) return;  // nothing saved
    rw->jm = (int)st[FLASH_ST_JMAX];
    if (fp->kind == FLASH_SOFTMAX || fp->kind == FLASH_SSMAX) {
        rw->lse = st[FLASH_ST_M];
        return;
    }
    rw->z = st[FLASH_ST_M];
    rw->invz = 1.0f / rw->z;
    rw->nz = rw->n * rw->invz;
    if (fp->kind == FLASH_LSSAR) {
        float w = st[FLASH_ST_W];
        rw->fallback = w < 0.0f;
        rw->umax = st[FLASH_ST_UMAX];
        rw->invm = rw->fallback ? 1.0f : 1.0f / rw->umax;
        rw->invw = rw->fallback ? 1.0f : 1.0f / w;
    }
}

// ---- backward

// Row pre-pass, from the dots the kernel computed over d in order (fp32): dyvjm = dy . v_jm,
// dyyc = dy . yc (lssa: dy . y), dyec = dy . Ec (lssar). s = the saved S. Writes FLASH_NBSTAT.
FM_FN void flash_bwd_row(const flash_params *fp, const flash_row *rw, float dyvjm, float dyyc,
                         float dyec, float s, float *bs) {
    for (int t = 0; t < FLASH_NBSTAT; t++) bs[t] = 0.0f;
    if (flash_is_unnormed(fp->kind)) return;  // sigmoid / relu: no row term (the pre-pass is skipped)
    bs[FLASH_BS_C] = fp->kind == FLASH_LSSA ? 0.0f : dyvjm;
    bs[FLASH_BS_D1] = dyyc;
    if (fp->kind == FLASH_LSSAR && !rw->fallback)
        bs[FLASH_BS_D2] = fp->p * rw->o * (dyec - dyyc * s);
}

/* One element of the backward: x the logit (recomputed as in the forward), is_jm (j == jm),
   dw = dy_i . v_j (the dY V^T product), rk = 1/|k_j| (lssa / lssar). Returns dS_ij, the
   gradient with respect to the raw dot product S_ij = q_i . k_j; *w gets the normalised weight
   beta_ij (for dV), *dx the gradient with respect to the logit (ssmax: the ds term is dx * S). */
FM_FN float flash_bwd_elem(const flash_params *fp, const flash_row *rw, const float *bs, float x,
                           int is_jm, float dw, float rk, float *w, float *dx) {
    // (Every value is computed, then selected: branch-free, so the CPU loops vectorise.)
    if (flash_is_unnormed(fp->kind)) {  // sigmoid / relu: no normalisation, so no D1 term
        float a, fd = flash_unnormed_grad(rw, x, &a);
        float dxj = fd * dw;  // dx = a'(x) dy_i . v_j
        *w = a;
        *dx = dxj;
        return rw->scale * dxj;  // dS = dx / sqrt(D)
    }
    float c = bs[FLASH_BS_C], d1 = bs[FLASH_BS_D1];
    float dwc = dw - c;
    float g = (is_jm ? 0.0f : dwc) - d1;  // dbeta_j - D1, centred on c = dbeta_jm (jm: exactly -D1)
    if (fp->kind == FLASH_SOFTMAX || fp->kind == FLASH_SSMAX) {
        float wj = fm_exp(x - rw->lse);
        float dxj = wj * g;
        *w = wj;
        *dx = dxj;
        return rw->scale * dxj;
    }
    float sig, a = flash_softplus_sigmoid(x, &sig);
    float da;
    if (fp->kind == FLASH_LSSA) {
        *w = a * rw->invz;
        da = (dw - d1) * rw->invz;  // not centred (see the header comment)
    } else if (rw->fallback) {
        *w = a * rw->invz;
        da = g * rw->invz;
    } else {
        float u = rw->nz * a - rw->o;
        float r = u * rw->invm;
        float pw = flash_pow(fp, r);
        float wu = !(r <= FLT_MIN) ? pw : 0.0f;
        wu = is_jm ? 1.0f : wu;
        float beta = wu * rw->invw;
        int pos = u > 0.0f;
        float uu = pos ? u : 1.0f;
        float dal = rw->n * fp->p * beta / uu * g;  // dalpha = n du (0 where u <= 0)
        dal = pos ? dal : 0.0f;
        *w = beta;
        da = (dal - bs[FLASH_BS_D2]) * rw->invz;
    }
    float dxj = da * sig;
    *dx = dxj;
    return rw->scale * dxj * rk;  // dS = lambda rq rk dx (c_ij = rq rk S_ij)
}

/* ssmax: the row term sum_j dx_ij S_ij of d(loss)/d(s_h) from three per-lane sums over the row,
   A = sum_j dx_j S_j, Bs = sum_j dx_j and C = sum_j beta_j S_j: A - Bs C. Since sum_j dx_j = 0
   this is A in real arithmetic; but here D1 comes from the forward's yc, not from the same dw
   values, so every dx_j carries a common error -beta_j e(D1), which in A alone is multiplied by
   C and does not cancel (measured: 2e-4 of |ds| on uniform rows, where the true term is 0, and
   on random rows). In A - Bs C it cancels to first order, leaving sum_j e_j (S_j - C) of the
   independent errors e_j. */
FM_FN void flash_ssmax_acc(float dx, float w, float S, float *A, float *Bs, float *C) {
    *A += dx * S;
    *Bs += dx;
    *C += w * S;
}
FM_FN float flash_ssmax_row_term(float A, float Bs, float C) { return A - Bs * C; }

// ssmax: row i's contribution to d(loss)/d(s_h) from its row term (flash_ssmax_row_term).
FM_FN float flash_ssmax_ds_row(const flash_params *fp, int i, float dxs) {
    return dxs * (fm_log((float)(i + 1)) * fp->inv_sqrt_d);
}

#endif
