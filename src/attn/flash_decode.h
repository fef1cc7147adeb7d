/*
 * flash_decode.h - split-KV decoding: the per-row and per-element steps that the CUDA kernels
 * (src/cuda/flash_decode.cu) and their CPU emulation (src/attn/flash_decode_emu.c) share, so that
 * the two run the same arithmetic in the same order. Plain C11 that also compiles as CUDA C++
 * (every function FM_FN); the per-element math is flash.h's.
 *
 * ---------------------------------------------------------------------------------------------
 * Design
 *   The fused forward runs one CTA per (b, h, 64 query rows): at B = 1, H = 12, Tq = 1 that is 12
 *   CTAs on a 132-SM GPU. Here the Tq <= FD_MAXQ query rows of one (b, h) (positions Tk - Tq + r,
 *   causal as the fused forward) meet keys split into nsplit chunks of fd_chunk(Tk, nsplit) keys
 *   (a multiple of FD_KT), one CTA per (b, h, split): grid (B H, nsplit), FD_NT threads, SIMT.
 *   A CTA walks its chunk's key tiles of FD_KT keys and keeps per row (fd_rowst) a running max m,
 *   its first index jm, a running sum l and, per (row, d), an accumulator acc. Per tile:
 *     x_j   = flash_logit(S_j), S_j = q . k_j over d in order (fmaf), -inf where j is not visible;
 *     row   (fd_row_tile): the tile's max and first argmax over the visible keys; if it exceeds
 *           m, the rescale alpha = exp(m_old - m_new) (phi exp outside re-weighting pass 2;
 *           else 1), xmin, min rk;
 *     p_j   (fd_weight): exp(x - m), softplus(x), sigmoid / relu, or pass 2's re-weighting w_j;
 *           0 where not visible;
 *     l     = fmaf(l, alpha, t), t the tile's p_j summed in key order from 0 (fd_lsum);
 *     acc_d = fmaf(acc_d, alpha, t_d), t_d = the tile's p~_j v_jd fused in key order from 0
 *           (fd_acc_tile; p~ = p rounded to bf16 in BF16 mode, as the operands Q, K, V).
 *   Masked keys never enter a sum (not even as 0 * v: a v_j = inf a row cannot see stays out).
 *   Each CTA writes its rows' partial statistics (FD_PS_*) and acc; a combine kernel (one CTA per
 *   (b, h)) merges the splits in split order (fd_combine): M = max_s m_s, c_s = exp(m_s - M)
 *   (1 without the rescale), L = sum_s c_s l_s, Y_d = sum_s c_s acc_sd, both fused in s order,
 *   y = Y / L (sigmoid / relu: y = Y). Deterministic: every sum has a fixed order, no atomics,
 *   and nothing depends on the scheduling of the CTAs.
 *   The re-weighting kinds run the split twice: pass 1 (FD_RW1: Z, xmax, jm, xmin, min rk per
 *   split, no acc), then pass 2 (FD_RW2), whose CTAs each first combine pass 1's partials of their
 *   rows in split order (fd_rw1_combine: xmax and the first split reaching it give jm; Z =
 *   sum_s c_s Z_s fused; then flash_lssar_row_finish, the fused path's row constants), then walk
 *   their chunk with w_j = flash_lssar_weight (w_jm = 1), l = W, acc = sum w v; the combine gives
 *   y = acc / W. (The combine of pass 1 is done redundantly by each pass-2 CTA, in the same
 *   order, so that no third kernel is needed.)
 *   Outputs: out only. No statistics are written: decoding has no backward (the dispatch takes
 *   this path only when stats == NULL). Non-finite inputs: no value is ever used as an index (the
 *   argmax only selects w_jm = 1), so a row whose logits are all NaN yields NaN (exp(NaN - m) or
 *   NaN weights enter l and acc, c_s = 0 times a NaN partial is NaN) and nothing reads out of range.
 *
 * Error bound against the exact (float64) result, from the summation orders above (u = 2^-24,
 * gamma_K = K u / (1 - K u)). One row, n visible keys, chunk C, tiles of FD_KT keys, nsplit splits.
 *   A term p_j v_jd passes through: its fma into the tile partial (one rounding of the partial per
 *   later key of the tile: at most FD_KT), the fma into acc with the rescale (one per later tile of
 *   its split: at most C / FD_KT, the rescale factor's own rounding one more each), and the
 *   combine's fma chain (at most nsplit, c_s rounded once more). The same holds for l. So
 *   |Y~ - Y| <= gamma_K sum_j |p_j| |v_jd| and |L~ - L| <= gamma_K L with
 *     K = FD_KT + 2 C / FD_KT + 2 nsplit + 4,
 *   and y = Y / L to gamma_{2K + 1} sum_j w_j |v_jd| (w = p / L) plus the error of the weights
 *   themselves (the logit's dot product over d and the exp / softplus / pow, the fused path's
 *   per-element functions, covered by the spec's 1e-4 relative bound as in tests/test_flash.c).
 *   tests/test_flash_decode.c checks ||y~ - y|| <= max(1e-4 ||y||, ||gamma_{2K+1} sum_j w_j |v_j|||)
 *   per tensor, for every kind.
 */
#ifndef LSSAR_ATTN_FLASH_DECODE_H
#define LSSAR_ATTN_FLASH_DECODE_H

#include <limits.h>
#include <math.h>
#include "attn/flash.h"

#define FD_KT 32        // keys per tile
#define FD_MAXQ 16      // query rows per call at most
#define FD_NT 128       // threads per CTA
#define FD_NPS 8        // partial statistics per (b, h, split, row)
#define FD_MAXSPLIT 256 // splits per (b, h) at most

// The passes: the one pass of the kinds without re-weighting; the re-weighting's two.
enum { FD_MAIN = 0, FD_RW1 = 1, FD_RW2 = 2 };
// Partial statistics slots: (B H, nsplit, Tq, FD_NPS) floats.
enum { FD_PS_M = 0, FD_PS_L = 1, FD_PS_JM = 2, FD_PS_XMIN = 3, FD_PS_RKMIN = 4 };

// One row's running values in a split.
typedef struct {
    float m;      // running max of the visible logits (-inf: none yet, or all NaN)
    float l;      // running sum of the weights (Z in pass 1, W in pass 2)
    float xmin;   // pass 1: min logit
    float rkmin;  // pass 1: min 1/|k| over the visible keys (scores dot / ssmax)
    float alpha;  // the current tile's rescale factor
    int jm;       // first argmax (-1: none)
} fd_rowst;

// Keys per split (a multiple of FD_KT) for a requested split count; the splits actually run are
// fd_nsplit(Tk, chunk) <= the request.
FM_FN int fd_chunk(int Tk, int nsplit) {
    if (nsplit < 1) nsplit = 1;
    int per = (Tk + nsplit - 1) / nsplit;
    return (per + FD_KT - 1) / FD_KT * FD_KT;
}
FM_FN int fd_nsplit(int Tk, int chunk) { return (Tk + chunk - 1) / chunk; }
// The split count that fills the GPU: about two CTAs per SM over the B H pairs, at least two key
// tiles per split, at most FD_MAXSPLIT.
FM_FN int fd_auto_nsplit(int BH, int Tk, int nsm) {
    int want = (2 * nsm + BH - 1) / BH, most = (Tk + 2 * FD_KT - 1) / (2 * FD_KT);
    want = want < most ? want : most;
    want = want < FD_MAXSPLIT ? want : FD_MAXSPLIT;
    return want < 1 ? 1 : want;
}
// Row r's visible keys in the tile of nk keys starting at key t0 (position Tk - Tq + r sees
// keys <= it): j < fd_nvis.
FM_FN int fd_nvis(int Tk, int Tq, int r, int t0, int nk) {
    int n = Tk - Tq + r - t0 + 1;
    return n < 0 ? 0 : n < nk ? n : nk;
}
// The pass rescales its sums by the running max (phi exp, outside re-weighting pass 2).
FM_FN int fd_rescales(const flash_params *fp, int pass) {
    return fp->phi == LSSAR_PHI_EXP && pass != FD_RW2 && !flash_unnormed(fp);
}

// 1 / max(|x|, 1e-12) of one row of D floats (fp32 sum of squares over d in order, fused).
FM_FN float fd_inv_norm(const float *x, int D) {
    float ss = 0.0f;
    for (int d = 0; d < D; d++) ss = fmaf(x[d], x[d], ss);
    return flash_inv_norm(ss);
}
// q . k over d in order, fused.
FM_FN float fd_dot(const float *a, const float *b, int D) {
    float s = 0.0f;
    for (int d = 0; d < D; d++) s = fmaf(a[d], b[d], s);
    return s;
}

FM_FN void fd_row_begin(fd_rowst *s) {
    s->m = -INFINITY; s->l = 0.0f; s->xmin = INFINITY; s->rkmin = INFINITY; s->alpha = 1.0f; s->jm = -1;
}

// One row and one tile: x the row's logits (nvis visible, keys t0 + j), rk the keys' 1/|k|. The
// tile's max and first argmax (strictly larger than m: an earlier key keeps a tie), the rescale
// factor, and pass 1's xmin and min rk.
FM_FN void fd_row_tile(const flash_params *fp, int pass, fd_rowst *s, const float *x, const float *rk,
                       int nvis, int t0) {
    float tm = -INFINITY, mn = s->xmin, rm = s->rkmin;
    int tj = -1;
    for (int j = 0; j < nvis; j++) {
        if (x[j] > tm) { tm = x[j]; tj = j; }
        mn = x[j] < mn ? x[j] : mn;
        rm = rk[j] < rm ? rk[j] : rm;
    }
    s->alpha = 1.0f;
    if (tm > s->m) {
        if (fd_rescales(fp, pass)) s->alpha = flash_online_alpha(s->m, tm);
        s->m = tm;
        s->jm = t0 + tj;
    }
    s->xmin = mn;
    s->rkmin = rm;
}

// One visible element's weight: m the row's running max after this tile; is_jm (pass 2) j == jm.
FM_FN float fd_weight(const flash_params *fp, int pass, const flash_row *rw, float m, float x, int is_jm) {
    float g;
    if (pass == FD_RW2) return flash_lssar_weight(fp, rw, x, is_jm, &g);
    if (flash_unnormed(fp)) return flash_unnormed_a(rw, x);
    return fp->phi == LSSAR_PHI_EXP ? flash_softmax_p(x, m) : flash_lssa_a(x);
}

// The row sum after a tile: the tile's nvis weights summed in key order from 0, then fused into
// the rescaled running sum.
FM_FN float fd_lsum(float l, float alpha, const float *p, int nvis) {
    float t = 0.0f;
    for (int j = 0; j < nvis; j++) t += p[j];
    return fmaf(l, alpha, t);
}
// One (row, d) accumulator after a tile: p the row's weights, v column d of the tile's V (row
// stride ld), bf16: round p to bf16 as it enters the product.
FM_FN float fd_acc_tile(float acc, float alpha, const float *p, const float *v, int ld, int nvis, int bf16) {
    float t = 0.0f;
    for (int j = 0; j < nvis; j++) t = fmaf(bf16 ? flash_bf16(p[j]) : p[j], v[(size_t)j * ld], t);
    return fmaf(acc, alpha, t);
}

// A split's partial statistics of one row (FD_NPS floats).
FM_FN void fd_row_store(const fd_rowst *s, float *ps) {
    for (int t = 0; t < FD_NPS; t++) ps[t] = 0.0f;
    ps[FD_PS_M] = s->m;
    ps[FD_PS_L] = s->l;
    ps[FD_PS_JM] = (float)s->jm;  // exact: keys < 2^24
    ps[FD_PS_XMIN] = s->xmin;
    ps[FD_PS_RKMIN] = s->rkmin;
}

// The largest m over the splits (order-free); ps the row's first split's slots, stride floats
// between splits.
FM_FN float fd_max_m(const float *ps, int nsplit, size_t stride) {
    float M = -INFINITY;
    for (int s = 0; s < nsplit; s++) M = ps[s * stride + FD_PS_M] > M ? ps[s * stride + FD_PS_M] : M;
    return M;
}
// Split s's factor c_s in the combine.
FM_FN float fd_split_scale(const flash_params *fp, int pass, float ms, float M) {
    return fd_rescales(fp, pass) ? flash_online_alpha(ms, M) : 1.0f;
}

// Re-weighting: pass 1's partials of one row combined in split order into the row constants
// (rw from flash_row_init): xmax and its first key, Z, xmin, min rk, then flash_lssar_row_finish.
FM_FN void fd_rw1_combine(const flash_params *fp, flash_row *rw, const float *ps, int nsplit, size_t stride) {
    float M = fd_max_m(ps, nsplit, stride), z = 0.0f, xmin = INFINITY, rkmin = INFINITY;
    int jm = INT_MAX;  // none: a lost row (every logit NaN); never an index here
    for (int s = 0; s < nsplit; s++) {
        const float *p = ps + s * stride;
        if (jm == INT_MAX && p[FD_PS_M] == M && p[FD_PS_JM] >= 0.0f) jm = (int)p[FD_PS_JM];
        z = fmaf(fd_split_scale(fp, FD_RW1, p[FD_PS_M], M), p[FD_PS_L], z);
        xmin = p[FD_PS_XMIN] < xmin ? p[FD_PS_XMIN] : xmin;
        rkmin = p[FD_PS_RKMIN] < rkmin ? p[FD_PS_RKMIN] : rkmin;
    }
    flash_lssar_row_finish(fp, rw, z, M, xmin, jm, rkmin);
}

// The output y_d of one row: ps the row's partial statistics (stride floats between splits), acc
// its channel d's partial accumulators (astride floats between splits).
FM_FN float fd_combine(const flash_params *fp, int pass, const float *ps, size_t stride, const float *acc,
                       size_t astride, int nsplit) {
    float M = fd_max_m(ps, nsplit, stride), L = 0.0f, Y = 0.0f;
    for (int s = 0; s < nsplit; s++) {
        float c = fd_split_scale(fp, pass, ps[s * stride + FD_PS_M], M);
        L = fmaf(c, ps[s * stride + FD_PS_L], L);
        Y = fmaf(c, acc[s * astride], Y);
    }
    return flash_unnormed(fp) ? Y : Y / L;
}

#endif
