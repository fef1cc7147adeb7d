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
 *   accumulator rounds n / 16 times, not n (a plain running sum drifts visibly at long T:
 *   docs/PERF.md). The emulation sums in those orders in fp32; the order inside one
 *   mma is the hardware's (the GPU tests' bounds cover it).
 *
 * Precision modes: FP32 (products of fp32 operands, fp32 accumulation) and BF16 (the operands of
 *   every product rounded to bf16, round-to-nearest-even, flash_bf16: Q, K, V, dY, and the
 *   intermediate weight matrices P, G and dS just before they enter a product, as mma.sync
 *   needs; accumulation, row statistics, u, Z, W and every per-element function stay fp32:
 *   p = 15 amplifies the relative error of u fifteen-fold). Row sums use the fp32 weights, not
 *   their bf16 roundings (as FlashAttention-2).
 *
 * Stages (lssar.h, docs/attention.md): a kind is a score (dot, ssmax, cos), a phi (exp,
 *   softplus; sigmoid, relu), a normalisation (l1, or len for sigmoid / relu) and optionally the
 *   re-weighting. The passes follow the stages: phi exp without re-weighting is the online
 *   softmax (softmax, ssmax, softmax+cos), phi softplus without it the one-pass lssa path (lssa,
 *   lssa+dot, lssa+ssmax), every re-weighting kind the two-pass lssar path (with pass 1 per phi),
 *   norm len the unnormalised pass. The score only changes the logit (flash_logit) and, for cos,
 *   the l2 projection of the backward; ssmax adds the ds row term. Every valid combination runs
 *   (issue 34); every re-weighting kind adds the backward's row-sum pass (0b below).
 *
 * Pre-pass (score cos, and the re-weighting): rq_i = 1 / max(|q_i|, 1e-12) and rk_j likewise
 *   (flash_inv_norm of the fp32 sum of squares over d in order, from the fp32 inputs), (B, H, T)
 *   each. Score cos: the logits use the raw dot product: x_ij = (lambda_i rq_i) * (S_ij * rk_j),
 *   S_ij = q_i . k_j, as the CPU path (attn_rows.c). Re-weighting with score dot / ssmax: the
 *   uniform-row tolerance |scale| |q_i| max_{j <= i} |k_j| 8 sqrt(D) eps (= |scale| 8 sqrt(D) eps
 *   / (rq_i min_j rk_j), attn_rows.c).
 *
 * ---------------------------------------------------------------------------------------------
 * Forward (one CTA per (b, h, query tile))
 *   phi exp (softmax, ssmax, softmax+cos): one pass, online softmax, CENTRED on the running
 *     argmax (see "Why centred" below). Per row: running max m, its first index jm (ties keep
 *     the earlier key), and the sums over the keys seen EXCEPT jm: l' = sum_{k != jm}
 *     exp(x_k - m) (per lane) and acc' = sum_{k != jm} exp(x_k - m) v_k (the P V product with the
 *     jm entry of P zeroed).
 *     Per key tile: tile max and argmax over the quad; if it exceeds m, the old jm rejoins the
 *     sums with weight exp(x_jm_old - m_old) = 1: the lane owning column jm_old adds 1 to its
 *     l' and every lane of the row adds v_jm_old to its acc' columns, then all rescale by
 *     alpha = exp(m_old - m_new) (flash_online_alpha): l' = (l' [+ 1]) alpha,
 *     acc' = (acc' + v_jm_old) alpha. Then l' += p_j, acc' += P' V for the tile's keys, P' = p
 *     with the new jm's entry 0. At the end l = 1 + l', y = (acc' + v_jm) / l, and the centred
 *     output yc = (acc' - l' v_jm) / l = sum_k w_k (v_k - v_jm). Saves LSE = m + ln l, jm, yc.
 *   phi softplus on score cos (lssa): one pass (softplus needs no max: it never overflows):
 *     a = softplus(x), Z += a, acc += a v; y = acc / Z. Saves Z. (Not centred: the largest a_j
 *     is at most ln D ln n + ln 2 and every a_j >= ln 2 e^-|x_j|, so a row is nearly one-hot only
 *     when almost every other key points away from q (q^ . k^ near -1), and row 0 has lambda = 0,
 *     so its gradient is exactly 0.)
 *   phi softplus on scores dot / ssmax (lssa+dot, lssa+ssmax): the online path of phi exp with
 *     a = softplus(x) and no rescale (alpha = 1): the old argmax rejoins with its weight
 *     softplus(m_old), at the end Z = softplus(m) + l', y = (acc' + softplus(m) v_jm) / Z,
 *     yc = (acc' - l' v_jm) / Z. Centred because these scores are unbounded: a row can be nearly
 *     one-hot, and a one-key row's gradient (exactly 0) would be D1's rounding noise. Saves Z,
 *     jm, yc.
 *   re-weighting (lssar and every +rw kind): pass 1: Z, xmax (with its first index jm), xmin;
 *     phi softplus per element (flash_lssar_pass1_a), phi exp as the online softmax: the tile's
 *     max first, Z rescaled by exp(m_old - m_new) when it grows, Z += exp(x - m), so that at the
 *     end m = xmax and a_jm = 1; scores dot / ssmax also min_j rk_j. Then
 *     flash_lssar_row_finish: u_max = n a(xmax) / Z - o (exact: phi increases), and
 *     the CPU's fallback test (attn_rows.c): i >= 3 and (xmax - xmin <= the uniform-row tolerance
 *     or !(u_max > 0)). Pass 2 recomputes x and a (exp: exp(x - xmax)): w = (u / u_max)^p (0
 *     where u / u_max <= FLT_MIN; exactly 1 at jm), or w = a / Z on a fallback row
 *     (flash_lssar_weight), g = w / u (u > 0, non-fallback rows; else 0). As for softmax the jm
 *     term is kept out of the sums:
 *     W' = sum_{k != jm} w_k, acc' = P' V, S' = sum_{k != jm} g_k, E' = G' V (one more product
 *     with V). With w_jm = 1 (fallback: a_jm / Z) and W = W' + w_jm:
 *     y = (acc' + w_jm v_jm) / W, yc = (acc' - W' v_jm) / W, S = (S' + 1 / u_max) / W,
 *     Ec = (E' - S' v_jm) / W = sum_k (beta_k / u_k) (v_k - v_jm). Saves Z, jm, u_max, W
 *     (W = -1 on a fallback row), S, (phi exp) xmax, yc and Ec.
 *   sigmoid / relu: one pass, no row statistic, no max and no normalisation: x = S / sqrt(D) + b
 *     (relu: b = 0; flash_logit), a = sigmoid(x) or max(x, 0) / L (flash_unnormed_a, L and b per
 *     row from the length normalisation), acc += a v (P V with P = a); y = acc. One kernel instance
 *     serves both (the row's relu flag; as softmax / ssmax share one). The per-row slots stay (all
 *     0) so that every kind has the same layout.
 *   Stats: (B, H, Tq, FLASH_NSTAT) floats (slots FLASH_ST_*), then the centred rows yc
 *     (B, Tq, H, D) for the centred rows (phi exp, re-weighting), then Ec (B, Tq, H, D) for the
 *     re-weighting:
 *     flash_stats_floats() in all, flash_stats_yc() and flash_stats_ec() give the offsets.
 *
 * Backward (deterministic, no atomics)
 *   0. rows (flash_bwd_row): per row i, with dy (bf16-rounded in BF16 mode) and v_jm:
 *      c = dy . v_jm, D1 = dy . yc (= sum_k beta_k (dbeta_k - c), centred), and re-weighting (not
 *      fallback) D2 = p o (dy . Ec - D1 S) (= sum_k alpha_k dalpha_k, docs/attention.md "On a
 *      GPU", centred the same way: it uses only alpha = (u + o) / n, so it holds for both phis);
 *      softplus without re-weighting: D1 = dy . y (not centred). Per element the l1 stage is
 *      dx_j = (dalpha_j - D2) phi'(x_j) / Z: exp alpha_j (...), softplus sigmoid(x_j) / Z (...).
 *      Dots over d in order, fp32.
 *      Into a (B, H, T, FLASH_NBSTAT) buffer (slots FLASH_BS_*). Also rq, rk as in the forward.
 *      sigmoid / relu: no pre-pass (there is no normalisation to differentiate: no D1 term);
 *      per element dx_ij = a'(x_ij) (dy_i . v_j), dS_ij = dx_ij / sqrt(D) (flash_bwd_elem),
 *      dV += A^T dY with the weights a themselves.
 *   0b. Row constants of the re-weighting (flash_bwd_rowsums: every re-weighting kind).
 *      The l1 stage is exact only if its constant is the weighted mean of the very h_j it is
 *      subtracted from: sum_j alpha_j (h_j - K) = 0, so that dx_j = f_j (h_j - K) carries no
 *      common part f_j e(K) into dQ = dS K (where it does not cancel: on repeated keys the true
 *      dq of a row is 0). D1 = dy . yc and D2 = p o (dy . Ec - D1 S) come from the forward's
 *      sums, whose rounding is not that of the dW the backward recomputes; D2's form also assumes
 *      sum_k beta_k (dbeta_k - D1) = 0, which for o = 0 (rows 0..2) leaves e(D1) times p in every
 *      dalpha_j; with them dq missed the 1e-4 bound against float64 on repeated keys
 *      (docs/CUDA.md "Supported kinds" has the figures). So a CTA per (b, h, query tile) walks
 *      its key tiles as dQ does, recomputes S, dW and the weights, and sums per lane (tile
 *      partials, the quad tree) R1 = sum_j beta_j (dw_j - c), P1 = sum_j alpha_j A_j (dw_j - c),
 *      P2 = sum_j alpha_j A_j with A_j = n p beta_j / u_j (flash_bwd_rs_elem: the same beta_j,
 *      A_j and dw_j as flash_bwd_elem); then D1 - c = R1, D2 = sum_j alpha_j dalpha_j =
 *      P1 - R1 P2. What is left is the rounding of these sums of the same computed terms:
 *      |sum_j beta_j g_j| <= gamma_m sum_j beta_j |dw_j - c| and |sum_j alpha_j (dalpha_j - D2)|
 *      <= gamma_m' (P1' + |R1| P2), m = 16 + n / 64 + 2 additions per sum, m' = m + 2 (P1' the
 *      sum of |terms|): relative to the row's own terms, no longer to |dy| |v| (the error of
 *      each dw_j). lssar took the forward's constants until the exponentials moved to the
 *      hardware unit: where the emulation's library contracts a * b + c (NATIVE=1) its dq on
 *      repeated keys then left 1e-4 (docs/CUDA.md), as the GPU, which contracts too, could;
 *      so lssar takes this pass as well. One more pass over the keys per backward for those kinds (S and dW
 *      again, no product into an accumulator).
 *   1. dK, dV and dQ's parts: a CTA per (b, h, key tile) walks the query tiles that see it (in
 *      order): recompute S, x and the weights (flash_bwd_elem from the saved stats),
 *      dW = dY V^T, dV += W^T dY, dS per element, dK += dS^T Q, and the block's part of dQ, dS K
 *      (a fresh sum), added to an fp32 dQ buffer in key-tile order (the CTAs of one query tile
 *      hand over by a counter; the emulation walks the same blocks per query tile, in the same
 *      order, for the same bits). At the end the l2-normalisation projection for score cos:
 *      with G = sum_i dS_ij q_i (raw q), dk_j = G_j - k_j rk_j^2 (k_j . G_j).
 *   2. dQ: per (b, h, query tile) the buffer's rows, dq_i = G_i - q_i rq_i^2 (q_i . G_i)
 *      (score cos). ssmax: a pass per (b, h, query tile) over its key tiles recomputes the
 *      blocks for each row's term sum_j dx_ij S_ij, as A - Bs C from three row sums
 *      (flash_ssmax_acc; lane tile partials and the quad tree as every row sum;
 *      flash_ssmax_row_term), to a buffer.
 *   3. ssmax ds_h = sum over (b, i) in index order of flash_ssmax_ds_row(...) (double).
 *   Five products per (query tile, key tile) block, as FlashAttention-2 (whose dQ adds are
 *   atomic, in no fixed order); the re-weighting kinds' row-sum pass adds two.
 *
 * Why centred (it is not in FlashAttention): every normalisation backward has the form
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
 * Two more choices, both from measurements (docs/PERF.md): the backward's sigmoid comes from
 *   flash_softplus_sigmoid, not as 1 - exp(-softplus(x)) (attn_rows.c's shortcut loses the row
 *   where x is very negative, which matters on uniform rows); ssmax's row term is A - Bs C
 *   (flash_ssmax_row_term), not A.
 */
#ifndef LSSAR_ATTN_FLASH_H
#define LSSAR_ATTN_FLASH_H

#include <float.h>
#include <stddef.h>
#include "core/fastmath.h"
#include "lssar.h"  // the stages (lssar_score, lssar_phi, lssar_norm)

#define FLASH_BR 64       // query rows per CTA
#define FLASH_BC 64       // keys per key tile
#define FLASH_WARPS 4     // warps per CTA, 16 query rows each
#define FLASH_WROWS 16    // rows per warp
#define FLASH_LANE_COLS 16  // columns of a 64-wide tile owned by one lane of a quad

// Per-row statistics the forward saves: (B, H, Tq, FLASH_NSTAT) floats. Unused slots are 0.
enum {
    FLASH_ST_M = 0,     // phi exp without re-weighting: LSE = m + ln l;  otherwise (softplus, or
                        // re-weighting) Z = sum_j a_j (norm len: no statistic; every slot 0)
    FLASH_ST_JMAX = 1,  // l1 rows: jm, the first argmax of x (a float; exact < 2^24)
    FLASH_ST_UMAX = 2,  // re-weighting: u_max = n a_jm / Z - o
    FLASH_ST_W = 3,     // re-weighting: W = sum_j w_j; -1 flags a fallback row (beta = alpha)
    FLASH_ST_S = 4,     // re-weighting: S = sum_{u_j > 0} beta_j / u_j
    FLASH_ST_XMAX = 5,  // re-weighting with phi exp: the shift m = max_j x_j of a_j = exp(x_j - m)
    FLASH_NSTAT = 8     // slots 6..7 reserved
};

// Per-row values the backward's row pre-pass computes: (B, H, T, FLASH_NBSTAT) floats.
enum {
    FLASH_BS_C = 0,     // c = dy . v_jm (the centring constant; 0 for rows not centred: lssa)
    FLASH_BS_D1 = 1,    // centred rows: D1 - c = dy . yc;  lssa: D1 = dy . y
    FLASH_BS_D2 = 2,    // re-weighting (not fallback): D2 = p o (dy . Ec - (D1 - c) S)
    FLASH_NBSTAT = 4    // slot 3 reserved
};

// Per-launch parameters.
typedef struct {
    int score;          // lssar_score (the kernels: LSSAR_SCORE_DOT stands for dot and ssmax, whose
                        // logits differ only in the row constant)
    int phi;            // lssar_phi (the kernels: LSSAR_PHI_SIGMOID stands for sigmoid and relu)
    int norm;           // lssar_norm
    int rw;             // 1: the re-weighting
    int D;              // head dim
    float p;            // re-weighting power
    int ip;             // re-weighting: p as an integer when p is one in [1, 63] (repeated squaring), else 0
    float inv_sqrt_d;   // 1 / sqrt(D) (scores dot, ssmax)
    float ln_d;         // ln D (score cos)
    float uniform_eps;  // 8 sqrt(D) FLT_EPSILON: the re-weighting's fallback tolerance per unit of the
                        // largest possible |logit| (lambda for cos, |scale| |q| max |k| otherwise)
    // sigmoid / relu length normalisation (flash_params_len): len_row = 1 uses n_i of each row;
    // otherwise the training length L: sigmoid bias -ln L, relu factor 1 / L
    int len_row;
    float len_bias;
    float inv_len;
} flash_params;

/* The stage combinations the fused path (the CUDA kernels and flash_emu) supports; the one place
   that decides it (flash_emu_check_fused gives the error). Every valid combination (issue 34): the
   re-weighting kinds take their backward's row constants from the backward's own dw
   (flash_bwd_rowsums), which their precision needed. */
FM_FN int flash_fused_supported(const lssar_attn_stages *st) { return st != NULL; }

// norm len (sigmoid / relu): no row normalisation, hence no row statistic and one pass
FM_FN int flash_unnormed(const flash_params *fp) { return fp->norm == LSSAR_NORM_LEN; }
FM_FN int flash_cos(const flash_params *fp) { return fp->score == LSSAR_SCORE_COS; }
// The pre-pass of inverse norms rq, rk: score cos (the l2 normalisation) and the re-weighting (its
// uniform-row tolerance is relative to |q| max |k|).
FM_FN int flash_needs_norms(const flash_params *fp) { return flash_cos(fp) || fp->rw; }
// The rows are centred on their argmax (every l1 row but softplus on score cos without
// re-weighting, see lssa in the header comment): jm saved, the backward's c = dy . v_jm.
FM_FN int flash_centred(const flash_params *fp) {
    return fp->norm == LSSAR_NORM_L1 && (fp->phi == LSSAR_PHI_EXP || fp->rw || !flash_cos(fp));
}
// The one-pass centred (running argmax) path: l1 without re-weighting, phi exp (the online
// softmax) or softplus on scores dot / ssmax.
FM_FN int flash_online(const flash_params *fp) { return flash_centred(fp) && !fp->rw; }
// ... with phi exp, whose statistic is the LSE (softplus: Z).
FM_FN int flash_online_exp(const flash_params *fp) { return flash_online(fp) && fp->phi == LSSAR_PHI_EXP; }

// Rows of D floats per (b, position, h) after the per-row slots: yc (centred rows) and Ec
// (re-weighting); none for softplus without re-weighting and for norm len.
FM_FN int flash_stats_drows(const flash_params *fp) {
    return fp->rw ? 2 : flash_centred(fp) ? 1 : 0;
}
// Total stats floats for a forward of Tq query rows: linear in B * Tq.
FM_FN size_t flash_stats_floats(const flash_params *fp, int B, int Tq, int H, int D) {
    size_t rows = (size_t)B * Tq * H;
    return rows * FLASH_NSTAT + (size_t)flash_stats_drows(fp) * rows * D;
}
// Offset (floats) of yc (B, Tq, H, D) in the stats; of Ec (B, Tq, H, D) (re-weighting only).
FM_FN size_t flash_stats_yc(int B, int Tq, int H) { return (size_t)B * Tq * H * FLASH_NSTAT; }
FM_FN size_t flash_stats_ec(int B, int Tq, int H, int D) {
    return flash_stats_yc(B, Tq, H) + (size_t)B * Tq * H * D;
}
// Index of row (b, h, r) in a (B, H, T, nslot) per-row array.
FM_FN size_t flash_row_index(int b, int h, int r, int H, int T) {
    return ((size_t)b * H + h) * T + r;
}

// st: the kind's stages (lssar_attn_stages_of).
FM_FN void flash_params_init(flash_params *fp, const lssar_attn_stages *st, float p, int D) {
    float fd = (float)D, sd = fm_sqrt(fd);
    sd = 0.5f * (sd + fd / sd);  // one Newton step: exact for the usual D (squares of 2^k)
    fp->score = (int)st->score;
    fp->phi = (int)st->phi;
    fp->norm = (int)st->norm;
    fp->rw = st->reweight != 0;
    fp->D = D;
    fp->p = p;
    int ip = (int)p;
    fp->ip = (fp->rw && p == (float)ip && ip >= 1 && ip < 64) ? ip : 0;
    fp->inv_sqrt_d = 1.0f / sd;
    fp->ln_d = fm_log(fd);
    fp->uniform_eps = 8.0f * sd * FLT_EPSILON;
    fp->len_row = 0;
    fp->len_bias = 0.0f;
    fp->inv_len = 1.0f;
}

// score cos: the D of the ln(D) ln(n) temperature when it is not the head size (temp_d >= 2;
// 0 keeps ln(head size)).
// The one rule for temp_d (the attention backends, the model config, the CLI): 0 or >= 2 (ln 1 = 0
// scores nothing).
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

// bf16 rounding (round to nearest, ties to even), returned as the float it represents; NaN stays
// NaN. The same value as __float2bfloat16_rn (fm_bf16_rne).
FM_FN float flash_bf16(float x) {
#ifdef __CUDA_ARCH__
    return __bfloat162float(__float2bfloat16_rn(x));  // the device's conversion instruction: the same value
#else
    return fm_bf16_float(fm_bf16_rne(x));
#endif
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
    float o;        // re-weighting offset: 0 for i < 3, else 1
    float lam0;     // score cos: lambda_i = ln D ln n
    float rq;       // 1 / max(|q_i|, 1e-12) (the pre-pass; 1 without it)
    float scale;    // logit factor: dot 1/sqrt(D), ssmax s_h ln(n)/sqrt(D), cos lam0 rq
    float bias;     // sigmoid: the logit bias b = -ln L or -ln n_i (0 otherwise)
    float ilen;     // relu: 1 / L or 1 / n_i (1 otherwise)
    int relu;       // 1 for relu (sigmoid and relu share a kernel instance: the row tells them apart)
    float lse;      // online softmax: LSE (backward)
    float z, invz, nz;  // softplus or re-weighting: Z, 1/Z, n/Z
    float xm;           // re-weighting with phi exp: the shift m of a = exp(x - m) (the row's max)
    float umax, invm;   // re-weighting: u_max, 1/u_max
    float invw;         // re-weighting: 1/W (backward)
    int fallback;       // re-weighting: 1 on a fallback row (beta = alpha)
    int jm;             // argmax of the row (centred rows)
} flash_row;

// Row i's constants. s_h: the ssmax scale of the head (ignored otherwise); rq: with the pre-pass only.
FM_FN void flash_row_init(const flash_params *fp, int i, float s_h, float rq, flash_row *rw) {
    float n = (float)(i + 1), ln_n = fm_log(n);
    rw->n = n;
    rw->o = i < 3 ? 0.0f : 1.0f;
    rw->lam0 = 0.0f;
    rw->rq = rq;
    rw->scale = fp->inv_sqrt_d;
    if (fp->score == LSSAR_SCORE_SSMAX) rw->scale = fp->inv_sqrt_d * s_h * ln_n;
    if (flash_cos(fp)) {
        rw->lam0 = fp->ln_d * ln_n;
        rw->scale = rw->lam0 * rq;
    }
    rw->bias = 0.0f;
    rw->ilen = 1.0f;
    rw->relu = fp->phi == LSSAR_PHI_RELU;
    if (fp->phi == LSSAR_PHI_SIGMOID) rw->bias = fp->len_row ? -ln_n : fp->len_bias;
    if (fp->phi == LSSAR_PHI_RELU) rw->ilen = fp->len_row ? 1.0f / n : fp->inv_len;
    rw->lse = 0.0f;
    rw->z = 1.0f; rw->invz = 1.0f; rw->nz = n;
    rw->xm = 0.0f;
    rw->umax = 1.0f; rw->invm = 1.0f; rw->invw = 1.0f;
    rw->fallback = 0;
    rw->jm = 0;
}

// The logit of one score: S the raw dot product q_i . k_j, rk = 1/|k_j| (score cos). sigmoid /
// relu: S / sqrt(D) + b (relu: b = 0), as attn_rows.c.
FM_FN float flash_logit(const flash_params *fp, const flash_row *rw, float S, float rk) {
    if (flash_unnormed(fp)) return rw->scale * S + rw->bias;
    return flash_cos(fp) ? rw->scale * (S * rk) : rw->scale * S;
}

// ---- the exponential of the fused path

/* 2^t, the one exponential of the kernels and the emulation (exp(y) = flash_ex2(y * FLASH_LOG2E)).
   Under nvcc the hardware unit: ex2.approx.ftz.f32 (one MUFU.EX2). The CUDA C++ Programming
   Guide's table of intrinsic functions gives __expf(x), this instruction applied to fl(x log2 e)
   as flash_exp below, a maximum error of 2 + floor(|1.173 x|) ulp; an ulp of a float y is at
   most 2^-23 |y|, so the unit's own part is eps_ex2 = 2^-22 relative; -inf
   gives +0, +inf gives +inf, NaN stays NaN, and results below FLT_MIN flush to +0 (.ftz). On the
   host (the emulation, the host harness) a model of it with the same special values and flush:
   t = n + r (n = rint(t), r exact, |r| <= 1/2), 2^r = e^(r ln 2) by its Taylor polynomial of
   degree 11 in double (remainder < 1e-14), times 2^n exactly, rounded once to float: within half
   an ulp (2^-24 relative) plus 1e-14 of 2^t. So model and hardware are each within
   eps_ex2 = 2^-22 of 2^t, and within 2^-21 of each other (tests/test_flash.c checks the model's
   side on a sweep of t).
   Error of exp(y) = flash_ex2(fl(y log2 e)): the product rounds to t (1 + d), |d| <= 2^-24, which
   moves 2^t by the factor 2^(t d) = 1 + |y| 2^-24 (to first order), and the rounding of log2 e
   as much again; the guide's figure for the whole is the larger 1.173 |y| ulp, so the bound
   used is |fl(exp(y)) / e^y - 1| <= eps_ex2 + 1.173 |y| 2^-23 (EXP_ERR in the tests).
   Every exponential of the fused path takes y = x - m <= 0 (the online max, the row's xmax, the
   LSE) or y = -|x| (softplus, sigmoid), and what it multiplies is w = e^y: so the absolute error
   of each weight is at most w (2^-22 + 1.173 2^-23 |y|) <= w 2^-22 + 1.173 2^-23 max_y |y| e^y =
   w 2^-22 + 1.173 2^-23 / e, relative to the row's largest weight (1 at the max): below 3.2e-7 of it. The
   online softmax multiplies a weight by at most one rescale factor per key tile, whose
   arguments telescope to x - xmax: (2 + n / 64) eps_ex2 + 1.173 2^-23 |x - xmax| in all.
   softplus: e = exp(-|x|) within e (eps_ex2 + 1.173 2^-23 |x|) moves log1p(e) by at most
   e / (1 + e) times that (absolute), so a = softplus(x) by a relative
   (eps_ex2 + 1.173 2^-23 |x|) e / ((1 + e) a),
   which is largest (the whole of it) where a ~ e, x << 0.
   Through the re-weighting, w = r^p with r = u / u_max, u = n a / Z - o: a relative error e_a of
   every a (so at most e_a of Z, a sum of them, and of u_max) moves u by (u + o) 2 e_a, r by
   2 e_a ((u + o) / u + (u_max + o) / u_max) relative, and w by p times that. A weight that shows
   in the fp32 sums has w >= 2^-24, r >= 2^(-24 / p) (0.33 at p = 15), so u >= 0.33 u_max and
   |dw / w| <= 2 p e_a (2 + 4 / u_max): for p = 15, 60 (1 + 2 / u_max) e_a (the re-weighting's
   own conditioning 1 / u_max, which every rounding of a meets alike; at |x| <= 4, e_a <= 3 2^-22
   and the factor is 4.3e-5 (1 + 2 / u_max)). tests/test_flash.c's (B) intervals carry e_a through
   this chain (EXP_ERR, with the unit's 2^-22 although the host model is within 2^-24). */
#define FLASH_LOG2E 1.44269504088896341f
FM_FN float flash_ex2(float t) {
#ifdef __CUDA_ARCH__
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(t));
    return y;
#else
    float tc = t > 128.0f ? 128.0f : t;  // 2^128 overflows to +inf, as the unit's
    tc = tc < -127.0f ? -127.0f : tc;     // (-inf too: (int) of it would be undefined)
    float n = (tc + 12582912.0f) - 12582912.0f;  // rint(t) by the 1.5 * 2^23 trick
    n = n == n ? n : 0.0f;                       // NaN: r below stays NaN
    double z = ((double)tc - (double)n) * 0.6931471805599453;  // r ln 2, |z| <= 0.347
    double q = 1.0 / 39916800.0;  // 1 / 11!
    q = q * z + 1.0 / 3628800.0;
    q = q * z + 1.0 / 362880.0;
    q = q * z + 1.0 / 40320.0;
    q = q * z + 1.0 / 5040.0;
    q = q * z + 1.0 / 720.0;
    q = q * z + 1.0 / 120.0;
    q = q * z + 1.0 / 24.0;
    q = q * z + 1.0 / 6.0;
    q = q * z + 0.5;
    q = q * z + 1.0;
    q = q * z + 1.0;
    int64_t eb = ((int64_t)n + 1023) << 52;  // 2^n, n in [-127, 128]: a normal double
    double sc;
    memcpy(&sc, &eb, 8);
    float y = (float)(q * sc);
    return t < -126.0f || y < FLT_MIN ? 0.0f : y;  // ftz (a NaN t compares false: y is NaN)
#endif
}
// e^y through the unit
FM_FN float flash_exp(float y) { return flash_ex2(y * FLASH_LOG2E); }

/* 1 / x on the GPU's reciprocal unit, for the divisions of the per-element hot loops (sigmoid,
   and the re-weighting's w / u and n p beta / u): rcp.approx.ftz.f32 under nvcc (MUFU.RCP),
   where an IEEE division (nvcc's default, -prec-div=true) is a dozen instructions and a branch
   to a slow path. Its error: the CUDA C++ Programming Guide's table of single-precision functions
   gives 1/x at most 1 ulp over the full range when compiled to the approximate reciprocal
   (-prec-div=false); .ftz reads a subnormal x as 0 of its sign (1 / x = +-inf) and flushes a
   subnormal result (|x| > 2^126) to 0. On the host (the emulation, the host harness) a model
   with the same flushes: the fp32 division 1 / x, within half an ulp. So model and hardware are
   each within 2^-23 of 1 / x (relative), and what a reciprocal feeds (g = w / u into S and E,
   A_j into dalpha, sigmoid into dx) is a product of a few such roundings: one more ulp per term
   than an IEEE division gave, small beside the exponential unit's 2^-22 that p multiplies (the
   GPU tests' fp32 bound carries the unit's error, not this one). The
   per-row reciprocals (1 / Z, 1 / u_max, 1 / W) stay IEEE divisions: once per row, they cost
   nothing, and u_max's error would be amplified p times. */
FM_FN float flash_rcp(float x) {
#ifdef __CUDA_ARCH__
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
#else
    float ax = x < 0.0f ? -x : x;
    float xf = ax < FLT_MIN ? x * 0.0f : x;  // subnormal (and 0): 0 of x's sign (NaN: ax < FLT_MIN is false)
    float r = 1.0f / xf;
    float ar = r < 0.0f ? -r : r;
    return ar < FLT_MIN ? r * 0.0f : r;  // a subnormal result: 0 of its sign
#endif
}
// sigmoid(x) = 1 / (1 + e) (x >= 0) or e / (1 + e) from e = exp(-|x|) (never overflows): fastmath's
// fm_sigmoid_e with the reciprocal of the unit
FM_FN float flash_sigmoid_e(float x, float e) {
    float inv = flash_rcp(1.0f + e);
    return x >= 0.0f ? inv : e * inv;
}
// softplus(x) = max(x, 0) + log1p(e), e = exp(-|x|) from the unit; log1p stays fastmath's
// polynomial (lg2.approx's absolute error near 1 would leave no relative accuracy in log1p(e)
// for small e, where softplus ~ e is the whole weight of a key that points away from q).
FM_FN float flash_softplus(float x) { return fm_softplus_e(x, flash_exp(x < 0.0f ? x : -x)); }
// sigmoid(x) through e = exp(-|x|) from the unit
FM_FN float flash_sigmoid(float x) { return flash_sigmoid_e(x, flash_exp(x < 0.0f ? x : -x)); }

// ---- forward, per element

// Online softmax (and the re-weighting's exp pass 1): the rescale factor exp(m_old - m_new) (0
// while no key was seen).
FM_FN float flash_online_alpha(float m_old, float m_new) {
    return m_old == -INFINITY ? 0.0f : flash_exp(m_old - m_new);
}
// phi exp: the unnormalised weight of logit x under the running max (or shift) m.
FM_FN float flash_softmax_p(float x, float m) { return flash_exp(x - m); }
/* softplus(x) and sigmoid(x) from one exp: e = exp(-|x|), a = max(x, 0) + log1p(e),
   sigmoid = 1 / (1 + e) (x >= 0) or e / (1 + e). Not sigmoid = 1 - exp(-a) (attn_rows.c's
   shortcut): where x is very negative a ~ e is tiny and 1 - exp(-a) keeps only an absolute
   error of ~6e-8, while on a (nearly) uniform row sigmoid / Z ~ 1 / n is not small at all
   (docs/PERF.md has the error it gave). */
FM_FN float flash_softplus_sigmoid(float x, float *sig) {
    float e = flash_exp(x < 0.0f ? x : -x);
    *sig = flash_sigmoid_e(x, e);
    return fm_softplus_e(x, e);
}

// phi softplus (and the re-weighting's softplus pass 1): a = softplus(x).
FM_FN float flash_lssa_a(float x) { return flash_softplus(x); }
// The re-weighting's a = phi(x) of a row after pass 1: exp(x - m) or softplus(x).
FM_FN float flash_rw_a(const flash_params *fp, const flash_row *rw, float x) {
    return fp->phi == LSSAR_PHI_EXP ? flash_exp(x - rw->xm) : flash_softplus(x);
}

// sigmoid / relu: the weight itself, a = sigmoid(x) or max(x, 0) / L (x > 0 exactly as
// attn_rows.c, and a NaN x stays NaN). A masked element (x = -inf) gives 0 in both.
FM_FN float flash_unnormed_a(const flash_row *rw, float x) {
    return rw->relu ? (!(x <= 0.0f) ? x * rw->ilen : 0.0f) : flash_sigmoid(x);
}
// ... and its derivative da/dx, *a the weight: sigmoid e / (1 + e)^2 with e = exp(-|x|) (=
// s(x) s(-x), no cancellation where s is near 1), a from the same e; relu 1 / L where x > 0, else
// 0 (the kink included, as attn_rows.c). Both 0 at x = -inf.
FM_FN float flash_unnormed_grad(const flash_row *rw, float x, float *a) {
    float ax = x < 0.0f ? -x : x;
    float e = flash_exp(-ax);
    float inv = flash_rcp(1.0f + e);
    float sa = x >= 0.0f ? inv : e * inv, sg = e * inv * inv;
    int pos = !(x <= 0.0f);  // a NaN x keeps its NaN weight (and gradient)
    float ra = pos ? x * rw->ilen : 0.0f, rg = pos ? (x == x ? rw->ilen : x) : 0.0f;
    *a = rw->relu ? ra : sa;
    return rw->relu ? rg : sg;
}

// Re-weighting pass 1 with phi softplus, one element of one lane, a = softplus(x) given: z += a
// (z: the lane's tile partial), running max / first argmax / min of x. (phi exp: the tile's max
// first, as the online softmax, then z += exp(x - m); the kernels spell that out.)
FM_FN void flash_lssar_pass1_a(float x, float a, int j, float *z, float *xmax, int *jm, float *xmin) {
    *z += a;
    if (x > *xmax) { *xmax = x; *jm = j; }  // columns arrive in increasing order: first index
    *xmin = x < *xmin ? x : *xmin;
}
FM_FN void flash_lssar_pass1(float x, int j, float *z, float *xmax, int *jm, float *xmin) {
    flash_lssar_pass1_a(x, flash_softplus(x), j, z, xmax, jm, xmin);
}

/* Re-weighting: after pass 1 (z, xmax, xmin, jm combined over the quad; phi exp: z = sum
   exp(x - xmax); scores dot / ssmax: rkmin = min_{j <= i} 1/|k_j|), the row's u_max and the
   fallback test, exactly the CPU's (attn_rows.c; i >= 3 <=> o = 1): the logits all within the
   rounding level of the score (cos: lambda 8 sqrt(D) eps; dot / ssmax: |scale| |q_i| max_j |k_j|
   8 sqrt(D) eps), or no u > 0. Fills rw. */
FM_FN void flash_lssar_row_finish(const flash_params *fp, flash_row *rw, float z, float xmax,
                                  float xmin, int jm, float rkmin) {
    rw->z = z;
    rw->invz = 1.0f / z;
    rw->nz = rw->n * rw->invz;
    rw->jm = jm;
    rw->xm = xmax;
    float ajm = fp->phi == LSSAR_PHI_EXP ? 1.0f : flash_softplus(xmax);  // exp: a_jm = exp(0)
    float m = rw->nz * ajm - rw->o;
    rw->umax = m;
    float asc = rw->scale < 0.0f ? -rw->scale : rw->scale;
    float uniform_tol = flash_cos(fp) ? rw->lam0 * fp->uniform_eps : asc * fp->uniform_eps / (rw->rq * rkmin);
    rw->fallback = rw->o > 0.0f && (xmax - xmin <= uniform_tol || !(m > 0.0f));
    rw->invm = rw->fallback ? 1.0f : 1.0f / m;
}

// r^p for r in (0, 1] (the caller masks r <= FLT_MIN).
FM_FN float flash_pow(const flash_params *fp, float r) {
    if (fp->ip >= 1 && fp->ip < 16) return fm_powi4(r, fp->ip);
    if (fp->ip >= 16) return fm_powi6(r, fp->ip);
    return fm_pow01(r, fp->p);
}

// Re-weighting pass 2, one element: the unnormalised weight w (w_jm = 1 is the caller's: is_jm),
// and g = w / u for E and S (0 where u <= 0 and on fallback rows).
FM_FN float flash_lssar_weight(const flash_params *fp, const flash_row *rw, float x, int is_jm,
                               float *g) {
    float a = flash_rw_a(fp, rw, x);
    if (rw->fallback) { *g = 0.0f; return a * rw->invz; }
    float u = rw->nz * a - rw->o;
    float r = u * rw->invm;
    float pw = flash_pow(fp, r);  // (computed, then selected: branch-free)
    float w = !(r <= FLT_MIN) ? pw : 0.0f;  // (not r > FLT_MIN: a NaN r stays NaN)
    w = is_jm ? 1.0f : w;
    int pos = u > 0.0f;
    float uu = pos ? u : 1.0f;
    float gg = w * flash_rcp(uu);
    *g = pos ? gg : 0.0f;
    return w;
}

// Re-weighting: the weight of jm itself (1, or alpha_jm = a_jm / Z on a fallback row), given xmax.
FM_FN float flash_lssar_wjm(const flash_params *fp, const flash_row *rw, float xmax) {
    float ajm = fp->phi == LSSAR_PHI_EXP ? 1.0f : flash_softplus(xmax);
    return rw->fallback ? ajm * rw->invz : 1.0f;
}

// ---- statistics save / load

// Forward end of a row: write the saved slots. lse_or_z: LSE (online softmax) or Z; w: W
// (re-weighting); s: S = (S' + 1/u_max) / W (re-weighting).
FM_FN void flash_stats_store(const flash_params *fp, const flash_row *rw, float lse_or_z, float w,
                             float s, float *st) {
    for (int t = 0; t < FLASH_NSTAT; t++) st[t] = 0.0f;
    st[FLASH_ST_M] = lse_or_z;
    st[FLASH_ST_JMAX] = (float)rw->jm;
    if (fp->rw) {
        st[FLASH_ST_UMAX] = rw->umax;
        st[FLASH_ST_W] = rw->fallback ? -1.0f : w;
        st[FLASH_ST_S] = rw->fallback ? 0.0f : s;
        if (fp->phi == LSSAR_PHI_EXP) st[FLASH_ST_XMAX] = rw->xm;
    }
}

// Backward: row i's constants (flash_row_init) plus the saved statistics st (FLASH_NSTAT).
FM_FN void flash_row_load(const flash_params *fp, int i, float s_h, float rq, const float *st,
                          flash_row *rw) {
    flash_row_init(fp, i, s_h, rq, rw);
    if (flash_unnormed(fp)) return;  // nothing saved
    rw->jm = (int)st[FLASH_ST_JMAX];
    if (flash_online_exp(fp)) {
        rw->lse = st[FLASH_ST_M];
        return;
    }
    rw->z = st[FLASH_ST_M];
    rw->invz = 1.0f / rw->z;
    rw->nz = rw->n * rw->invz;
    if (fp->rw) {
        float w = st[FLASH_ST_W];
        rw->fallback = w < 0.0f;
        rw->umax = st[FLASH_ST_UMAX];
        rw->invm = rw->fallback ? 1.0f : 1.0f / rw->umax;
        rw->invw = rw->fallback ? 1.0f : 1.0f / w;
        rw->xm = st[FLASH_ST_XMAX];
    }
}

// ---- backward

// Row pre-pass, from the dots the kernel computed over d in order (fp32): dyvjm = dy . v_jm,
// dyyc = dy . yc (softplus without re-weighting: dy . y), dyec = dy . Ec (re-weighting). s = the
// saved S. Writes FLASH_NBSTAT.
FM_FN void flash_bwd_row(const flash_params *fp, const flash_row *rw, float dyvjm, float dyyc,
                         float dyec, float s, float *bs) {
    for (int t = 0; t < FLASH_NBSTAT; t++) bs[t] = 0.0f;
    if (flash_unnormed(fp)) return;  // sigmoid / relu: no row term (the pre-pass is skipped)
    bs[FLASH_BS_C] = flash_centred(fp) ? dyvjm : 0.0f;
    bs[FLASH_BS_D1] = dyyc;
    if (fp->rw && !rw->fallback)
        bs[FLASH_BS_D2] = fp->p * rw->o * (dyec - dyyc * s);
}

/* The re-weighting's backward weights of one element (not fallback; rw->invw from the saved W):
   beta_j, and the factor A_j = n p beta_j / u_j of dalpha_j = A_j (dbeta_j - D1) where *pos (u_j > 0;
   dalpha_j = 0 elsewhere), from a = phi(x). flash_bwd_elem and the row-sum pass (flash_bwd_rs_elem)
   share it, so that their beta and A are the same bits. */
FM_FN float flash_bwd_rw_beta(const flash_params *fp, const flash_row *rw, float a, int is_jm, float *A,
                              int *pos) {
    float u = rw->nz * a - rw->o;
    float r = u * rw->invm;
    float pw = flash_pow(fp, r);
    float wu = !(r <= FLT_MIN) ? pw : 0.0f;
    wu = is_jm ? 1.0f : wu;
    float beta = wu * rw->invw;
    *pos = u > 0.0f;
    float uu = *pos ? u : 1.0f;
    *A = rw->n * fp->p * beta * flash_rcp(uu);
    return beta;
}

/* One element of the backward: x the logit (recomputed as in the forward), is_jm (j == jm),
   dw = dy_i . v_j (the dY V^T product), rk = 1/|k_j| (score cos). Returns dS_ij, the gradient
   with respect to the raw dot product S_ij = q_i . k_j; *w gets the normalised weight beta_ij
   (for dV), *dx the gradient with respect to the logit (ssmax: the ds term is dx * S). For the
   ssmax row term (flash_ssmax_acc) the l1 stage's dx_j = f_j (h_j - K) is split: *f = f_j
   (exp: alpha_j; softplus: sigmoid(x_j) / Z) and *res = alpha_j (h_j - K), whose row sum is
   the error of the row constant K (0 in real arithmetic). */
FM_FN float flash_bwd_elem(const flash_params *fp, const flash_row *rw, const float *bs, float x,
                           int is_jm, float dw, float rk, float *w, float *dx, float *res, float *f) {
    // (Every value is computed, then selected: branch-free, so the CPU loops vectorise.)
    if (flash_unnormed(fp)) {  // sigmoid / relu: no normalisation, so no D1 term
        float a, fd = flash_unnormed_grad(rw, x, &a);
        float dxj = fd * dw;  // dx = a'(x) dy_i . v_j
        *w = a;
        *dx = dxj;
        *res = 0.0f;
        *f = 0.0f;
        return rw->scale * dxj;  // dS = dx / sqrt(D)
    }
    float c = bs[FLASH_BS_C], d1 = bs[FLASH_BS_D1];
    float dwc = dw - c;
    float g = (is_jm ? 0.0f : dwc) - d1;  // dbeta_j - D1, centred on c = dbeta_jm (jm: exactly -D1)
    float dxj;
    if (flash_online_exp(fp)) {
        float wj = flash_exp(x - rw->lse);
        dxj = wj * g;
        *w = wj;
        *dx = dxj;
        *res = dxj;
        *f = wj;
    } else {
        // a = phi(x), alpha = a / Z; hk = dalpha - D2 (the l1 stage's h - K)
        float sig = 0.0f, a;
        if (fp->phi == LSSAR_PHI_EXP) a = flash_exp(x - rw->xm);
        else a = flash_softplus_sigmoid(x, &sig);
        float hk;
        if (!fp->rw) {
            *w = a * rw->invz;
            hk = flash_centred(fp) ? g : dw - d1;  // score cos: not centred (see the header comment)
        } else if (rw->fallback) {
            *w = a * rw->invz;
            hk = g;
        } else {
            int pos;
            float A, beta = flash_bwd_rw_beta(fp, rw, a, is_jm, &A, &pos);
            float dal = A * g;  // dalpha = n du (0 where u <= 0)
            dal = pos ? dal : 0.0f;
            *w = beta;
            hk = dal - bs[FLASH_BS_D2];
        }
        float alpha = a * rw->invz;
        if (fp->phi == LSSAR_PHI_EXP) {
            dxj = alpha * hk;  // phi' / Z = alpha
            *f = alpha;
        } else {
            float da = hk * rw->invz;
            dxj = da * sig;  // phi' / Z = sigmoid(x) / Z
            *f = sig * rw->invz;
        }
        *dx = dxj;
        *res = alpha * hk;
    }
    // dS = scale dx (cos: lambda rq rk dx, c_ij = rq rk S_ij)
    return flash_cos(fp) ? rw->scale * dxj * rk : rw->scale * dxj;
}

/* The re-weighting kinds take their row constants from the backward's own dw
   (flash_bwd_rowsums; see the header comment "Row constants of the re-weighting"): a pass over
   each row's keys, before the dK/dV kernel, sums per lane
     R1 = sum_j beta_j (dw_j - c),  P1 = sum_j alpha_j A_j (dw_j - c),  P2 = sum_j alpha_j A_j
   (the jm term 0: dw_jm - c is centred away exactly, as in flash_bwd_elem), from the same
   recomputed beta_j, A_j and dw_j as flash_bwd_elem's. Then D1 - c = R1 and D2 = sum_j alpha_j
   dalpha_j = P1 - R1 P2 (fallback rows: beta = alpha, D1 - c = R1, no D2). */
FM_FN int flash_bwd_rowsums(const flash_params *fp) { return fp->rw; }
// One element's terms of R1, P1, P2 (a masked element, x = -inf, gives 0: a = 0, u <= 0).
FM_FN void flash_bwd_rs_elem(const flash_params *fp, const flash_row *rw, const float *bs, float x, int is_jm,
                             float dw, float *r1, float *p1, float *p2) {
    float dwc = is_jm || x == -INFINITY ? 0.0f : dw - bs[FLASH_BS_C];  // (masked: 0, whatever dw is)
    float a = flash_rw_a(fp, rw, x);
    float alpha = a * rw->invz;
    if (rw->fallback) {
        *r1 = alpha * dwc;
        *p1 = 0.0f;
        *p2 = 0.0f;
        return;
    }
    int pos;
    float A, beta = flash_bwd_rw_beta(fp, rw, a, is_jm, &A, &pos);
    float aa = pos ? alpha * A : 0.0f;
    *r1 = beta * dwc;
    *p1 = aa * dwc;
    *p2 = aa;
}
// The row constants from the quad sums of R1, P1, P2 into bs (FLASH_NBSTAT; c stays).
FM_FN void flash_bwd_rs_finish(const flash_row *rw, float r1, float p1, float p2, float *bs) {
    bs[FLASH_BS_D1] = r1;
    bs[FLASH_BS_D2] = rw->fallback ? 0.0f : p1 - r1 * p2;
}

/* ssmax: the row term sum_j dx_ij S_ij of d(loss)/d(s_h) from three per-lane sums over the row,
   A = sum_j dx_j S_j, Bs = sum_j res_j and C = sum_j f_j S_j (flash_bwd_elem's res, f): A - Bs C.
   The l1 stage gives dx_j = f_j (h_j - K) with the row constant K = sum_k alpha_k h_k, so
   sum_j res_j = sum_j alpha_j (h_j - K) is 0 in real arithmetic and A - Bs C is A. But K (D1 or
   D2) comes from the forward's yc / Ec, not from the same dw values, so every dx_j carries a
   common error -f_j e(K), which in A alone is multiplied by C and does not cancel (docs/PERF.md
   has the size of it on softmax). In
   A - Bs C it cancels to first order: A - Bs C is A with K replaced by the K consistent with the
   dw values. (phi exp without re-weighting: res = dx, f = w.) */
FM_FN void flash_ssmax_acc(float dx, float res, float f, float S, float *A, float *Bs, float *C) {
    *A += dx * S;
    *Bs += res;
    *C += f * S;
}
FM_FN float flash_ssmax_row_term(float A, float Bs, float C) { return A - Bs * C; }

// ssmax: row i's contribution to d(loss)/d(s_h) from its row term (flash_ssmax_row_term).
FM_FN float flash_ssmax_ds_row(const flash_params *fp, int i, float dxs) {
    return dxs * (fm_log((float)(i + 1)) * fp->inv_sqrt_d);
}

#endif
