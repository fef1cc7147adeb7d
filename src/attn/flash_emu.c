/*
 * flash_emu.c - the CPU emulation of the fused attention kernels (the algorithm, the fragment
 * ownership and the statistics layout: attn/flash.h; the design contract: docs/CUDA.md).
 *
 * What is modelled, and how:
 * - A "CTA" is one call of fwd_cta / bwd_dkdv_cta / bwd_dq_cta: one (b, h) and one 64-row query
 *   tile (or 64-key tile), walking the other dimension's tiles in the kernel's order. The four
 *   warps of a CTA own disjoint rows, so they are not modelled separately; the lanes of a quad
 *   are: every per-row reduction over keys is done per lane (q = 0..3, its columns
 *   flash_lane_col(q, t) in t order, running across key tiles) and then by the quad tree.
 * - Products: each output element is summed over its reduction index in order in fp32 (the
 *   score products over d = 0..D-1; those over keys or query rows one k-step of 16 at a time,
 *   see KSTEP), from operands that are bf16-rounded in FLASH_BF16 mode (Q, K, V and dY once at
 *   the start, P, G and dS when they enter a product). The per-element math is flash.h's, the
 *   same functions the CUDA kernels call.
 * - Row sums: per lane tile partials (lane_partial) into per-lane running sums, then the quad.
 *   Max / first argmax / min are order-free and are taken over the whole tile row.
 * - Threads: OpenMP over the CTAs (each writes only its own rows of the outputs, and the row
 *   sums of ds are added in index order at the end), so the result does not depend on the
 *   thread count, as on the GPU it does not depend on the scheduling of the CTAs.
 *
 * Tensors: q, out (B, Tq, H, D); k, v (B, kv_stride, H, D) of which rows < Tk are read;
 * rq (B, H, Tq), rk (B, H, Tk): the inverse norms of the pre-pass; stats as in flash.h.
 * Inside a CTA the tiles are small dense arrays: Q tile (64, D), K and V tiles transposed (D, 64)
 * for the score products (so that the loop over the 64 columns is the inner, vectorised one),
 * and (64, D) where they are the right operand of a product over keys.
 */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "lssar.h"
#include "core/util.h"
#include "attn/flash.h"
#include "attn/attn.h"
#include "attn/flash_emu.h"

#define BR FLASH_BR
#define BC FLASH_BC

// ------------------------------------------------------------------ one call's constants

typedef struct {
    flash_params fp;
    int bf16;                      // FLASH_BF16: round the product operands
    int B, Tq, Tk, kvs, H, D, HD;  // kvs: kv_stride
    int q0;                        // position of query row 0: Tk - Tq
    const float *q, *k, *v, *dy;   // product operands: the inputs, or their bf16 roundings
    const float *qf, *kf;          // the fp32 inputs (norms, the l2-normalisation backward)
    const float *ssmax_s;          // (H) ssmax scales, else NULL
    float *rq, *rk;                // (B, H, Tq), (B, H, Tk): 1 / max(|x|, 1e-12)
} emu_ctx;

// Row pointers: query-side rows (q, out, dy, dq) and key-side rows (k, v, dk, dv) of (b, t, h).
static inline size_t qrow(const emu_ctx *c, int b, int t, int h) {
    return ((size_t)b * c->Tq + t) * c->HD + (size_t)h * c->D;
}
static inline size_t krow(const emu_ctx *c, int b, int t, int h) {
    return ((size_t)b * c->kvs + t) * c->HD + (size_t)h * c->D;
}
static inline float rnd(const emu_ctx *c, float x) { return c->bf16 ? flash_bf16(x) : x; }

// ------------------------------------------------------------------ per-thread tile buffers

typedef struct {
    float *qt, *dyt;          // (BR, D): the query tile and its output gradient
    float *kT, *vT;           // (D, BC): the key tile transposed, the value tile transposed
    float *kt, *vt;           // (BC, D): the key and value tiles
    float *rkt;               // (BC): 1/|k_j| of the tile
    float *s, *x, *w, *dw, *dS, *dxs;  // (BR, BC) each: scores, logits, weights, dW, dS, dx
    float *res, *fj;          // (BR, BC) each: ssmax's row-term parts (flash_bwd_elem's res, f)
    float *acc, *acc2;        // (64, D): accumulators (acc', E' / dK, dV / dQ, its part)
    float *tmp;               // (64, D): one k-step's products before they join an accumulator
    float *lane;              // (BR, 4, 4): per-lane running row reductions, four kinds
} tiles;

static int tiles_alloc(tiles *t, int D) {
    size_t n64d = (size_t)64 * D, nt = (size_t)BR * BC;
    float *f = malloc((9 * n64d + BC + 8 * nt + BR * 16) * sizeof(float));
    if (!f) return -1;
    t->qt = f; t->dyt = t->qt + n64d; t->kT = t->dyt + n64d; t->vT = t->kT + n64d;
    t->kt = t->vT + n64d; t->vt = t->kt + n64d; t->acc = t->vt + n64d; t->acc2 = t->acc + n64d;
    t->tmp = t->acc2 + n64d;
    t->rkt = t->tmp + n64d;
    t->s = t->rkt + BC; t->x = t->s + nt; t->w = t->x + nt; t->dw = t->w + nt; t->dS = t->dw + nt;
    t->dxs = t->dS + nt; t->res = t->dxs + nt; t->fj = t->res + nt; t->lane = t->fj + nt;
    return 0;
}
static void tiles_free(tiles *t) { free(t->qt); }

// Query tile rows r0..r0+bq-1 of (b, h) -> t->qt (BR, D) (rows past bq zero).
static void load_rows(const emu_ctx *c, const float *src, int b, int h, int r0, int bq, float *dst) {
    int D = c->D;
    for (int r = 0; r < BR; r++) {
        if (r < bq) memcpy(dst + (size_t)r * D, src + qrow(c, b, r0 + r, h), D * sizeof(float));
        else memset(dst + (size_t)r * D, 0, D * sizeof(float));
    }
}

// Key tile j0..j0+nk-1 of (b, h): K transposed (D, BC) and, where asked, V transposed, K and V
// row-major (BC, D), and 1/|k| (BC). Columns past nk are zero (their scores are masked anyway).
static void load_keys(const emu_ctx *c, int b, int h, int j0, int nk, tiles *t, int want_vT,
                      int want_kt, int want_vt) {
    int D = c->D;
    for (int j = 0; j < BC; j++) {
        const float *kr = j < nk ? c->k + krow(c, b, j0 + j, h) : NULL;
        const float *vr = j < nk ? c->v + krow(c, b, j0 + j, h) : NULL;
        for (int d = 0; d < D; d++) {
            t->kT[(size_t)d * BC + j] = kr ? kr[d] : 0.0f;
            if (want_vT) t->vT[(size_t)d * BC + j] = vr ? vr[d] : 0.0f;
            if (want_kt) t->kt[(size_t)j * D + d] = kr ? kr[d] : 0.0f;
            if (want_vt) t->vt[(size_t)j * D + d] = vr ? vr[d] : 0.0f;
        }
        t->rkt[j] =
            j < nk && flash_needs_norms(&c->fp) ? c->rk[((size_t)b * c->H + h) * c->Tk + j0 + j] : 1.0f;
    }
}

// out (BR, BC) = A (bq rows of D) times BT (D, BC): each element summed over d = 0..D-1 in order.
static void tile_product(const float *A, const float *BT, int bq, int D, float *out) {
    for (int r = 0; r < bq; r++) {
        float *o = out + (size_t)r * BC;
        for (int j = 0; j < BC; j++) o[j] = 0.0f;
        for (int d = 0; d < D; d++) {
            float a = A[(size_t)r * D + d];
            const float *bt = BT + (size_t)d * BC;
#pragma omp simd
            for (int j = 0; j < BC; j++) o[j] += a * bt[j];
        }
    }
}

/* The products over keys (P V, G V, dS K) and over query rows (W^T dY, dS^T Q) accumulate as
   mma.sync does: one k-step of KSTEP = 16 consecutive reduction indices at a time, its products
   summed in order from 0 in fp32 (inside an mma the order is the hardware's), then added to the
   accumulator; the SIMT (fp32) kernel does the same with FMAs into a temporary. A running sum of
   all n products would round n times into the accumulator (docs/PERF.md); this rounds n / 16
   times. */
#define KSTEP 16

// acc (bq, D) += P M: acc[r][d] += sum_j P[r][j] M[j][d] over j < nk (M: (BC, D)); P (BR, BC) is
// rounded to bf16 in BF16 mode as it enters the product. tmp: D floats.
static void acc_product(const emu_ctx *c, const float *P, const float *M, int bq, int nk, float *acc,
                        float *tmp) {
    int D = c->D;
    for (int r = 0; r < bq; r++) {
        float *ar = acc + (size_t)r * D;
        for (int g0 = 0; g0 < nk; g0 += KSTEP) {
            int g1 = g0 + KSTEP < nk ? g0 + KSTEP : nk;
            for (int d = 0; d < D; d++) tmp[d] = 0.0f;
            for (int j = g0; j < g1; j++) {
                float p = rnd(c, P[(size_t)r * BC + j]);
                const float *m = M + (size_t)j * D;
#pragma omp simd
                for (int d = 0; d < D; d++) tmp[d] += p * m[d];
            }
#pragma omp simd
            for (int d = 0; d < D; d++) ar[d] += tmp[d];
        }
    }
}

// acc (nk, D) += P^T M: acc[j][d] += sum_r P[r][j] M[r][d] over r < bq (M: (BR, D); the dK / dV
// products of a key-tile CTA over the rows of one query tile). tmp: BC * D floats.
static void acc_product_t(const emu_ctx *c, const float *P, const float *M, int bq, int nk, float *acc,
                          float *tmp) {
    int D = c->D;
    for (int g0 = 0; g0 < bq; g0 += KSTEP) {
        int g1 = g0 + KSTEP < bq ? g0 + KSTEP : bq;
        memset(tmp, 0, (size_t)nk * D * sizeof(float));
        for (int r = g0; r < g1; r++) {
            const float *m = M + (size_t)r * D;
            for (int j = 0; j < nk; j++) {
                float p = rnd(c, P[(size_t)r * BC + j]);
                float *tj = tmp + (size_t)j * D;
#pragma omp simd
                for (int d = 0; d < D; d++) tj[d] += p * m[d];
            }
        }
        for (size_t e = 0; e < (size_t)nk * D; e++) acc[e] += tmp[e];
    }
}

// The per-lane running sums of one row over one key tile: lane q sums its 16 columns in t order
// from 0 (the tile partial), then adds that to its running sum.
static inline float lane_partial(const float *row, int q) {
    float s = 0.0f;
    for (int t = 0; t < FLASH_LANE_COLS; t++) s += row[flash_lane_col(q, t)];
    return s;
}
static inline void lane_sum(const float *row, float *lane4) {
    for (int q = 0; q < 4; q++) lane4[q] += lane_partial(row, q);
}
static inline float quad(const float *l) { return flash_quad_sum(l[0], l[1], l[2], l[3]); }

// Max, first argmax and min of one row of a tile (masked entries are -inf; min skips them). These
// do not depend on the order of the reduction, so the lanes-then-quad structure of the kernel is
// not spelt out here; *jm = -1 when every entry is masked.
static inline void tile_max_min(const float *x, float *mx, int *jm, float *mn) {
    float m = -INFINITY, n = INFINITY;
#pragma omp simd reduction(max : m) reduction(min : n)
    for (int j = 0; j < BC; j++) {
        m = x[j] > m ? x[j] : m;
        float y = x[j] == -INFINITY ? INFINITY : x[j];
        n = y < n ? y : n;
    }
    int a = -1;
    if (m > -INFINITY)
        for (int j = 0; j < BC; j++)
            if (x[j] == m) { a = j; break; }
    *mx = m; *jm = a; *mn = n;
}

// x (BR, BC): the logits of the score tile, -inf where key j0 + j is not visible to the row.
// (The row constants are copied to locals in the element loops: through the pointers they could
// alias the float stores, which kept GCC from vectorising the loops.)
static void tile_logits(const emu_ctx *c, const flash_row *rw, const float *s, const float *rkt,
                        int i0, int bq, int j0, int nkeys, float *x) {
    const flash_params fp = c->fp;
    for (int r = 0; r < bq; r++) {
        const flash_row rr = rw[r];
        int lim = nkeys - j0 < i0 + r - j0 + 1 ? nkeys - j0 : i0 + r - j0 + 1;  // visible: j < lim
        const float *sr = s + (size_t)r * BC;
        float *xr = x + (size_t)r * BC;
#pragma omp simd
        for (int j = 0; j < BC; j++) xr[j] = j < lim ? flash_logit(&fp, &rr, sr[j], rkt[j]) : -INFINITY;
    }
}

// ------------------------------------------------------------------ forward CTA

// One forward CTA's rows and their running per-row values (the kernel's registers).
typedef struct {
    int b, h, r0, bq;      // (b, h), the tile's first query row and its row count
    int i0, nkt;           // position of the tile's row 0; key tiles 0..nkt-1 (those above skipped)
    flash_row rw[BR];
    float m[BR];           // online softmax (and exp pass 1): running max
    int jm[BR];            // online: running argmax (-1: none yet); re-weighting: pass-1 argmax
    float xmax[BR];        // re-weighting: pass-1 max
} fwd_state;

// Keys of the key tile starting at j0.
static inline int tile_nk(const emu_ctx *c, int j0) { return c->Tk - j0 < BC ? c->Tk - j0 : BC; }
// Row r's visible keys in the key tile starting at j0: j < lim.
static inline int tile_lim(const emu_ctx *c, const fwd_state *s, int r, int j0) {
    return c->Tk - j0 < s->i0 + r - j0 + 1 ? c->Tk - j0 : s->i0 + r - j0 + 1;
}

// The CTA's row constants, its query tile, and the running values' starting points.
static void fwd_begin(const emu_ctx *c, int b, int h, int qt, tiles *t, fwd_state *s) {
    const flash_params *fp = &c->fp;
    s->b = b; s->h = h;
    s->r0 = qt * BR;
    s->bq = c->Tq - s->r0 < BR ? c->Tq - s->r0 : BR;
    s->i0 = c->q0 + s->r0;
    s->nkt = (s->i0 + s->bq - 1) / BC + 1;
    const float s_h = fp->score == LSSAR_SCORE_SSMAX ? c->ssmax_s[h] : 0.0f;
    const int norms = flash_needs_norms(fp);
    for (int r = 0; r < s->bq; r++) {
        float rq = norms ? c->rq[((size_t)b * c->H + h) * c->Tq + s->r0 + r] : 1.0f;
        flash_row_init(fp, s->i0 + r, s_h, rq, &s->rw[r]);
    }
    load_rows(c, c->q, b, h, s->r0, s->bq, t->qt);
    memset(t->lane, 0, (size_t)BR * 16 * sizeof(float));
    for (int r = 0; r < BR; r++) { s->m[r] = -INFINITY; s->jm[r] = -1; }
}

// Re-weighting pass 1: Z per lane (then the quad), xmax (first argmax), xmin, and for scores dot /
// ssmax min rk over the visible keys; then the row constants (flash_lssar_row_finish).
static void fwd_rw_pass1(const emu_ctx *c, tiles *t, fwd_state *s) {
    const flash_params *fp = &c->fp;
    float xmin[BR], rkmin[BR];
    for (int r = 0; r < s->bq; r++) {
        s->xmax[r] = -INFINITY; xmin[r] = INFINITY; s->jm[r] = INT_MAX; rkmin[r] = INFINITY;
    }
    for (int kt = 0; kt < s->nkt; kt++) {
        int j0 = kt * BC;
        load_keys(c, s->b, s->h, j0, tile_nk(c, j0), t, 0, 0, 0);
        tile_product(t->qt, t->kT, s->bq, c->D, t->s);
        tile_logits(c, s->rw, t->s, t->rkt, s->i0, s->bq, j0, c->Tk, t->x);
        for (int r = 0; r < s->bq; r++) {
            const float *xr = t->x + (size_t)r * BC;
            float *a = t->w + (size_t)r * BC, *L = t->lane + r * 16;
            float tm, tn;
            int tj;
            tile_max_min(xr, &tm, &tj, &tn);
            if (fp->phi == LSSAR_PHI_EXP) {
                // the online softmax's rescale (no centring: Z only)
                if (tm > s->m[r]) {
                    float al = flash_online_alpha(s->m[r], tm);
                    for (int q = 0; q < 4; q++) L[q] *= al;
                    s->m[r] = tm;
                }
                float mr = s->m[r];
#pragma omp simd
                for (int j = 0; j < BC; j++) a[j] = xr[j] == -INFINITY ? 0.0f : flash_softmax_p(xr[j], mr);
            } else {
#pragma omp simd
                for (int j = 0; j < BC; j++) a[j] = xr[j] == -INFINITY ? 0.0f : flash_lssa_a(xr[j]);
            }
            lane_sum(a, L);  // Z (masked entries have a = 0)
            if (tj >= 0) flash_argmax_update(&s->xmax[r], &s->jm[r], tm, j0 + tj);
            xmin[r] = tn < xmin[r] ? tn : xmin[r];
            int lim = tile_lim(c, s, r, j0);
            for (int j = 0; j < lim && j < BC; j++) rkmin[r] = t->rkt[j] < rkmin[r] ? t->rkt[j] : rkmin[r];
        }
    }
    for (int r = 0; r < s->bq; r++)
        flash_lssar_row_finish(fp, &s->rw[r], quad(t->lane + r * 16), s->xmax[r], xmin[r], s->jm[r],
                               rkmin[r]);
    memset(t->lane, 0, (size_t)BR * 16 * sizeof(float));
}

// The online paths (phi exp: the online softmax; softplus on scores dot / ssmax), row r of one key
// tile: the running max / argmax, the old argmax rejoining the sums, and the weights P' (pr, the
// argmax's entry 0) added to the lane sums L. ar: the row's accumulator acc' (D).
static void fwd_online_row(const emu_ctx *c, fwd_state *s, int r, int j0, const float *xr, float *pr,
                           float *L, float *ar) {
    const int D = c->D, pexp = c->fp.phi == LSSAR_PHI_EXP;
    // tile max and its first argmax (the kernel: per lane, then over the quad)
    float tm, tn;
    int tj;
    tile_max_min(xr, &tm, &tj, &tn);
    if (tm > s->m[r] && pexp) {
        // new max: the old argmax rejoins the sums with weight exp(x_jm - m_old) = 1, then
        // everything is rescaled to the new max
        float al = flash_online_alpha(s->m[r], tm);
        if (s->jm[r] >= 0) {
            L[flash_col_lane(s->jm[r] & (BC - 1))] += 1.0f;
            const float *vj = c->v + krow(c, s->b, s->jm[r], s->h);
            for (int d = 0; d < D; d++) ar[d] = (ar[d] + vj[d]) * al;
        } else {
            for (int d = 0; d < D; d++) ar[d] *= al;
        }
        for (int q = 0; q < 4; q++) L[q] *= al;
        s->m[r] = tm;
        s->jm[r] = j0 + tj;
    } else if (tm > s->m[r]) {
        // softplus: the old argmax rejoins with its weight softplus(m_old); no rescale
        if (s->jm[r] >= 0) {
            float aj = flash_lssa_a(s->m[r]);
            L[flash_col_lane(s->jm[r] & (BC - 1))] += aj;
            const float *vj = c->v + krow(c, s->b, s->jm[r], s->h);
            for (int d = 0; d < D; d++) ar[d] += aj * vj[d];
        }
        s->m[r] = tm;
        s->jm[r] = j0 + tj;
    }
    float mr = s->m[r];
    if (pexp) {
#pragma omp simd
        for (int j = 0; j < BC; j++) pr[j] = xr[j] == -INFINITY ? 0.0f : flash_softmax_p(xr[j], mr);
    } else {
#pragma omp simd
        for (int j = 0; j < BC; j++) pr[j] = xr[j] == -INFINITY ? 0.0f : flash_lssa_a(xr[j]);
    }
    if (s->jm[r] >= j0) pr[s->jm[r] - j0] = 0.0f;  // the argmax stays out of l' and acc'
    lane_sum(pr, L);
}

// sigmoid / relu, row r of one key tile: the weights themselves (0 at x = -inf), no row sum. The
// branch restates the relu flag as a constant so that the loop vectorises.
static void fwd_unnormed_row(const flash_row *rw, const float *xr, float *pr) {
#define UNNORMED(RELU)                                                                                 \
    {                                                                                                  \
        flash_row r2 = *rw;                                                                            \
        r2.relu = RELU;                                                                                \
        _Pragma("omp simd")                                                                            \
        for (int j = 0; j < BC; j++) pr[j] = flash_unnormed_a(&r2, xr[j]);                             \
    }
    if (rw->relu) UNNORMED(1)
    else UNNORMED(0)
#undef UNNORMED
}

// Re-weighting pass 2, row r of one key tile: flash_lssar_weight for every element, w into pr and
// g into gr (the argmax's entries 0), W' and S' into the lane sums L, L + 4. The branches only
// restate phi, the fallback flag and the power's range as constants, so each loop is branch-free
// and vectorises. Masked elements (x = -inf) come out w = g = 0 (a = 0, u <= 0).
static void fwd_pass2_row(const flash_params *fp, const flash_row *rw, int jm, int j0, const float *xr,
                          float *pr, float *gr, float *L) {
#define PASS2(PHI, FALLBACK, IP)                                                                       \
    {                                                                                                  \
        flash_params f2 = *fp;                                                                         \
        flash_row r2 = *rw;                                                                            \
        f2.phi = PHI; f2.ip = IP; r2.fallback = FALLBACK;                                              \
        _Pragma("omp simd")                                                                            \
        for (int j = 0; j < BC; j++) {                                                                 \
            float g;                                                                                   \
            pr[j] = flash_lssar_weight(&f2, &r2, xr[j], 0, &g);                                        \
            gr[j] = g;                                                                                 \
        }                                                                                              \
    }
#define PASS2_PHI(PHI)                                                                                 \
    if (rw->fallback) PASS2(PHI, 1, fp->ip)                                                            \
    else if (fp->ip >= 1 && fp->ip < 16) PASS2(PHI, 0, fp->ip)                                         \
    else if (fp->ip >= 16) PASS2(PHI, 0, fp->ip)                                                       \
    else PASS2(PHI, 0, 0)
    if (fp->phi == LSSAR_PHI_EXP) { PASS2_PHI(LSSAR_PHI_EXP) }
    else { PASS2_PHI(LSSAR_PHI_SOFTPLUS) }
#undef PASS2_PHI
#undef PASS2
    if (jm >= j0 && jm < j0 + BC) pr[jm - j0] = gr[jm - j0] = 0.0f;  // jm stays out
    lane_sum(pr, L);      // W'
    lane_sum(gr, L + 4);  // S'
}

// The main pass (re-weighting: pass 2) over the key tiles: acc' += P' V and, re-weighting,
// E' += G' V, with the row sums in the lanes.
static void fwd_main_pass(const emu_ctx *c, tiles *t, fwd_state *s) {
    const flash_params *fp = &c->fp;
    const int online = flash_online(fp), unnormed = flash_unnormed(fp);
    memset(t->acc, 0, (size_t)BR * c->D * sizeof(float));
    memset(t->acc2, 0, (size_t)BR * c->D * sizeof(float));
    for (int kt = 0; kt < s->nkt; kt++) {
        int j0 = kt * BC, nk = tile_nk(c, j0);
        load_keys(c, s->b, s->h, j0, nk, t, 0, 0, 1);
        tile_product(t->qt, t->kT, s->bq, c->D, t->s);
        tile_logits(c, s->rw, t->s, t->rkt, s->i0, s->bq, j0, c->Tk, t->x);
        float *P = t->w, *G = t->dw;  // (BR, BC): the weights entering P V, the re-weighting's g entering G V
        for (int r = 0; r < s->bq; r++) {
            const float *xr = t->x + (size_t)r * BC;
            float *pr = P + (size_t)r * BC, *gr = G + (size_t)r * BC, *L = t->lane + r * 16;
            if (online) fwd_online_row(c, s, r, j0, xr, pr, L, t->acc + (size_t)r * c->D);
            else if (unnormed) fwd_unnormed_row(&s->rw[r], xr, pr);
            else if (!fp->rw) {  // phi softplus
#pragma omp simd
                for (int j = 0; j < BC; j++) pr[j] = xr[j] == -INFINITY ? 0.0f : flash_lssa_a(xr[j]);
                lane_sum(pr, L);
            } else fwd_pass2_row(fp, &s->rw[r], s->jm[r], j0, xr, pr, gr, L);
        }
        acc_product(c, P, t->vt, s->bq, nk, t->acc, t->tmp);                // acc' += P' V
        if (fp->rw) acc_product(c, G, t->vt, s->bq, nk, t->acc2, t->tmp);   // E' += G' V
    }
}

// Finish the rows: y, the centred rows yc (and Ec), the statistics.
static void fwd_finish(const emu_ctx *c, tiles *t, fwd_state *s, float *out, float *stats) {
    const flash_params *fp = &c->fp;
    const int D = c->D, online = flash_online(fp), pexp = fp->phi == LSSAR_PHI_EXP;
    float *yc_all = stats ? stats + flash_stats_yc(c->B, c->Tq, c->H) : NULL;
    float *ec_all = stats && fp->rw ? stats + flash_stats_ec(c->B, c->Tq, c->H, D) : NULL;
    for (int r = 0; r < s->bq; r++) {
        size_t orow = qrow(c, s->b, s->r0 + r, s->h);
        float *y = out + orow, *ar = t->acc + (size_t)r * D, *er = t->acc2 + (size_t)r * D;
        float *yc = yc_all ? yc_all + orow : NULL, *ec = ec_all ? ec_all + orow : NULL;
        float *L = t->lane + r * 16;
        flash_row *rw = &s->rw[r];
        float st0 = 0.0f, wsum = 0.0f, ssum = 0.0f;
        int lost = flash_centred(fp) && flash_row_lost(s->jm[r], s->i0 + r);
        if (lost) s->jm[r] = rw->jm = 0;
        const float *vj = flash_centred(fp) ? c->v + krow(c, s->b, s->jm[r], s->h) : NULL;  // v_jm
        if (online && pexp) {
            float l1 = quad(L), l = 1.0f + l1, inv = lost ? flash_nan() : 1.0f / l;
            for (int d = 0; d < D; d++) {
                y[d] = (ar[d] + vj[d]) * inv;
                if (yc) yc[d] = (ar[d] - l1 * vj[d]) * inv;
            }
            st0 = lost ? flash_nan() : s->m[r] + fm_log(l);
            rw->jm = s->jm[r];
        } else if (online) {  // softplus: Z = softplus(m) + l'
            float l1 = quad(L), ajm = flash_lssa_a(s->m[r]), z = ajm + l1;
            float inv = lost ? flash_nan() : 1.0f / z;
            for (int d = 0; d < D; d++) {
                y[d] = (ar[d] + ajm * vj[d]) * inv;
                if (yc) yc[d] = (ar[d] - l1 * vj[d]) * inv;
            }
            st0 = lost ? flash_nan() : z;
            rw->jm = s->jm[r];
        } else if (flash_unnormed(fp)) {
            memcpy(y, ar, (size_t)D * sizeof(float));  // y = sum_j a_j v_j: no normalisation
        } else if (!fp->rw) {
            float z = quad(L), inv = 1.0f / z;
            for (int d = 0; d < D; d++) y[d] = ar[d] * inv;
            st0 = z;
        } else {
            float w1 = quad(L), s1 = quad(L + 4);
            float wjm = flash_lssar_wjm(fp, rw, s->xmax[r]);
            float W = w1 + wjm, inv = lost ? flash_nan() : 1.0f / W;
            for (int d = 0; d < D; d++) {
                y[d] = (ar[d] + wjm * vj[d]) * inv;
                if (yc) yc[d] = (ar[d] - w1 * vj[d]) * inv;
                if (ec) ec[d] = (er[d] - s1 * vj[d]) * inv;
            }
            st0 = lost ? flash_nan() : rw->z;
            wsum = W;
            ssum = (s1 + rw->invm) * inv;
        }
        if (stats)
            flash_stats_store(fp, rw, st0, wsum, ssum,
                              stats + flash_row_index(s->b, s->h, s->r0 + r, c->H, c->Tq) * FLASH_NSTAT);
    }
}

// One forward CTA: query tile qt of (b, h), in the kernel's order: re-weighting pass 1, the main
// pass, the rows' end.
static void fwd_cta(const emu_ctx *c, int b, int h, int qt, tiles *t, float *out, float *stats) {
    fwd_state s;
    fwd_begin(c, b, h, qt, t, &s);
    if (c->fp.rw) fwd_rw_pass1(c, t, &s);
    fwd_main_pass(c, t, &s);
    fwd_finish(c, t, &s, out, stats);
}

// ------------------------------------------------------------------ backward

// One (query tile, key tile) block of the backward, shared by the dK/dV and the dQ CTAs so that
// both see the same bits (the kernel computes it once, in its dK/dV CTA): S = Q K^T, dW = dY V^T,
// then per element the weight beta (t->w), dS (t->dS) and dx, the gradient of the logit (t->dxs,
// for ssmax's ds). Needs t->qt, t->dyt, t->kT, t->vT, t->rkt loaded.
static void bwd_block(const emu_ctx *c, const flash_row *rw, const float *bs, int i0, int bq, int j0,
                      tiles *t) {
    const flash_params *fp = &c->fp;
    tile_product(t->qt, t->kT, bq, c->D, t->s);
    tile_product(t->dyt, t->vT, bq, c->D, t->dw);
    tile_logits(c, rw, t->s, t->rkt, i0, bq, j0, c->Tk, t->x);
    for (int r = 0; r < bq; r++) {
        const float *xr = t->x + (size_t)r * BC, *dwr = t->dw + (size_t)r * BC;
        float b4[FLASH_NBSTAT];
        memcpy(b4, bs + (size_t)r * FLASH_NBSTAT, sizeof b4);
        flash_params fpl = *fp;
        flash_row rr = rw[r];
        const float *rkt = t->rkt;
        float *wr = t->w + (size_t)r * BC, *dsr = t->dS + (size_t)r * BC, *dxr = t->dxs + (size_t)r * BC;
        int jmc = rr.jm - j0;  // the argmax's column in this tile (any value outside 0..63: none)
        float *resr = t->res + (size_t)r * BC, *fr = t->fj + (size_t)r * BC;
        // The same flash_bwd_elem for every element; the branches below only restate (as
        // constants the compiler can see) the stages, the fallback flag and the power's range, so
        // that each loop is branch-free and vectorises. A masked element (x = -inf) comes out as
        // exactly w = dx = dS = 0 from flash_bwd_elem itself (exp(-inf) = 0, softplus = sigmoid
        // = 0, u <= 0), as on the GPU; selecting on the mask here kept GCC from vectorising.
        // (The score only matters as cos or not: dot stands for ssmax too.)
#define BWD_ELEMS(COS, PHI, NORM, RW, FALLBACK, IP)                                                  \
        {                                                                                              \
            flash_params f2 = fpl;                                                                     \
            flash_row r2 = rr;                                                                         \
            f2.score = COS ? LSSAR_SCORE_COS : LSSAR_SCORE_DOT; f2.phi = PHI; f2.norm = NORM;          \
            f2.rw = RW; r2.fallback = FALLBACK; f2.ip = IP;                                            \
            r2.relu = PHI == LSSAR_PHI_RELU;                                                           \
            _Pragma("omp simd")                                                                        \
            for (int j = 0; j < BC; j++) {                                                             \
                float w, dx, rs, ff;                                                                   \
                dsr[j] = flash_bwd_elem(&f2, &r2, b4, xr[j], j == jmc, dwr[j], rkt[j], &w, &dx, &rs, &ff); \
                wr[j] = w;                                                                             \
                dxr[j] = dx;                                                                           \
                resr[j] = rs;                                                                          \
                fr[j] = ff;                                                                            \
            }                                                                                          \
        }
#define BWD_L1(COS, PHI)                                                                               \
        if (!fpl.rw) BWD_ELEMS(COS, PHI, LSSAR_NORM_L1, 0, 0, 0)                                      \
        else if (rr.fallback) BWD_ELEMS(COS, PHI, LSSAR_NORM_L1, 1, 1, fpl.ip)                       \
        else if (fpl.ip >= 1 && fpl.ip < 16) BWD_ELEMS(COS, PHI, LSSAR_NORM_L1, 1, 0, fpl.ip)        \
        else if (fpl.ip >= 16) BWD_ELEMS(COS, PHI, LSSAR_NORM_L1, 1, 0, fpl.ip)                      \
        else BWD_ELEMS(COS, PHI, LSSAR_NORM_L1, 1, 0, 0)
        const int cos = flash_cos(&fpl);
        if (fpl.norm == LSSAR_NORM_LEN) {
            if (fpl.phi == LSSAR_PHI_RELU) BWD_ELEMS(0, LSSAR_PHI_RELU, LSSAR_NORM_LEN, 0, 0, 0)
            else BWD_ELEMS(0, LSSAR_PHI_SIGMOID, LSSAR_NORM_LEN, 0, 0, 0)
        } else if (fpl.phi == LSSAR_PHI_EXP) {
            if (cos) { BWD_L1(1, LSSAR_PHI_EXP) }
            else { BWD_L1(0, LSSAR_PHI_EXP) }
        } else {
            if (cos) { BWD_L1(1, LSSAR_PHI_SOFTPLUS) }
            else { BWD_L1(0, LSSAR_PHI_SOFTPLUS) }
        }
#undef BWD_L1
#undef BWD_ELEMS
    }
}

// Query tile rows r0..r0+bq-1: Q and dY into t->qt, t->dyt, and the rows' constants and pre-pass
// values (the kernels' bwd_load_rows).
static void bwd_rows(const emu_ctx *c, const float *stats, const float *bstat, int b, int h, int r0,
                     int bq, tiles *t, flash_row *rw, float *bs) {
    load_rows(c, c->q, b, h, r0, bq, t->qt);
    load_rows(c, c->dy, b, h, r0, bq, t->dyt);
    const flash_params *fp = &c->fp;
    const float s_h = fp->score == LSSAR_SCORE_SSMAX ? c->ssmax_s[h] : 0.0f;
    for (int r = 0; r < bq; r++) {
        size_t ri = flash_row_index(b, h, r0 + r, c->H, c->Tq);
        float rq = flash_needs_norms(fp) ? c->rq[ri] : 1.0f;
        flash_row_load(fp, r0 + r, s_h, rq, stats + ri * FLASH_NSTAT, &rw[r]);
        memcpy(bs + (size_t)r * FLASH_NBSTAT, bstat + ri * FLASH_NBSTAT, FLASH_NBSTAT * sizeof(float));
    }
}

// g <- g - x rx^2 (x . g) for one row (the l2-normalisation backward, g already carrying rx).
static void project(float *g, const float *x, float rx, int D) {
    float dot = 0.0f;
    for (int d = 0; d < D; d++) dot += x[d] * g[d];
    float cc = dot * rx * rx;
    for (int d = 0; d < D; d++) g[d] -= cc * x[d];
}

// dK, dV of key tile kt of (b, h): walk the query tiles kt..last (the ones that see it).
static void bwd_dkdv_cta(const emu_ctx *c, const float *stats, const float *bstat, int b, int h, int kt,
                         tiles *t, float *dk, float *dv) {
    const int D = c->D, T = c->Tq, j0 = kt * BC, nk = T - j0 < BC ? T - j0 : BC;
    const int nqt = (T + BR - 1) / BR;
    flash_row rw[BR];
    float bs[BR * FLASH_NBSTAT];
    float *dK = t->acc, *dV = t->acc2;  // (BC, D)
    memset(dK, 0, (size_t)BC * D * sizeof(float));
    memset(dV, 0, (size_t)BC * D * sizeof(float));
    load_keys(c, b, h, j0, nk, t, 1, 0, 0);
    for (int qt = kt; qt < nqt; qt++) {  // BR == BC: query tile qt sees key tile kt iff qt >= kt
        int r0 = qt * BR, bq = T - r0 < BR ? T - r0 : BR;
        bwd_rows(c, stats, bstat, b, h, r0, bq, t, rw, bs);
        bwd_block(c, rw, bs, r0, bq, j0, t);
        acc_product_t(c, t->w, t->dyt, bq, nk, dV, t->tmp);   // dV += W^T dY
        acc_product_t(c, t->dS, t->qt, bq, nk, dK, t->tmp);   // dK += dS^T Q
    }
    for (int j = 0; j < nk; j++) {
        size_t kr = krow(c, b, j0 + j, h);
        float *g = dK + (size_t)j * D;
        if (flash_cos(&c->fp)) project(g, c->kf + kr, c->rk[((size_t)b * c->H + h) * T + j0 + j], D);
        memcpy(dk + kr, g, D * sizeof(float));
        memcpy(dv + kr, dV + (size_t)j * D, D * sizeof(float));
    }
}

// The row constants of the re-weighting kinds (flash_bwd_rowsums) for query tile qt of
// (b, h): walk its key tiles 0..qt, recompute S, dW and the weights, and sum
// flash_bwd_rs_elem's R1, P1, P2 per lane (tile partials, then the quad); bstat's D1 and D2 of the
// tile's rows are replaced (flash_bwd_rs_finish). Runs before the dK/dV and dQ CTAs.
static void bwd_rowsums_cta(const emu_ctx *c, const float *stats, float *bstat, int b, int h, int qt,
                            tiles *t) {
    const int T = c->Tq, r0 = qt * BR, bq = T - r0 < BR ? T - r0 : BR;
    flash_row rw[BR];
    float bs[BR * FLASH_NBSTAT];
    float *L = t->lane;  // (BR, 3 sums, 4 lanes)
    memset(L, 0, (size_t)BR * 12 * sizeof(float));
    bwd_rows(c, stats, bstat, b, h, r0, bq, t, rw, bs);
    for (int kt = 0; kt <= qt; kt++) {
        int j0 = kt * BC, nk = T - j0 < BC ? T - j0 : BC;
        load_keys(c, b, h, j0, nk, t, 1, 0, 0);
        tile_product(t->qt, t->kT, bq, c->D, t->s);
        tile_product(t->dyt, t->vT, bq, c->D, t->dw);
        tile_logits(c, rw, t->s, t->rkt, r0, bq, j0, c->Tk, t->x);
        for (int r = 0; r < bq; r++) {
            const float *xr = t->x + (size_t)r * BC, *dwr = t->dw + (size_t)r * BC;
            float *Lr = L + r * 12;
            for (int q = 0; q < 4; q++) {  // tile partials, then into the running sums
                float R1 = 0.0f, P1 = 0.0f, P2 = 0.0f;
                for (int tt = 0; tt < FLASH_LANE_COLS; tt++) {
                    int j = flash_lane_col(q, tt);
                    float r1, p1, p2;
                    const float *b4 = bs + (size_t)r * FLASH_NBSTAT;
                    flash_bwd_rs_elem(&c->fp, &rw[r], b4, xr[j], j0 + j == rw[r].jm, dwr[j], &r1, &p1, &p2);
                    R1 += r1; P1 += p1; P2 += p2;
                }
                Lr[q] += R1; Lr[4 + q] += P1; Lr[8 + q] += P2;
            }
        }
    }
    for (int r = 0; r < bq; r++) {
        const float *Lr = L + r * 12;
        float *b4 = bstat + flash_row_index(b, h, r0 + r, c->H, T) * FLASH_NBSTAT;
        flash_bwd_rs_finish(&rw[r], quad(Lr), quad(Lr + 4), quad(Lr + 8), b4);
    }
}

/* dQ of query tile qt of (b, h): walk its key tiles 0..qt. The kernel computes each block's dQ part
   dS K in the dK/dV CTA of its key tile and adds the parts to an fp32 buffer in key-tile order;
   here the dQ CTA walks the same blocks (bwd_block gives the dK/dV CTA's bits) in that order: each
   part a fresh sum of k-steps (acc_product from 0), then added to the running dQ (the first one
   copied, as the kernel's key tile 0 stores it). ssmax: the rows' sums A, Bs, C in the same walk
   (per lane tile partials into running sums, the quad at the end, as the kernels' row pass);
   rowds (B, H, T) gets each row's flash_ssmax_ds_row. */
static void bwd_dq_cta(const emu_ctx *c, const float *stats, const float *bstat, int b, int h, int qt,
                       tiles *t, float *dq, float *rowds) {
    const int D = c->D, T = c->Tq, r0 = qt * BR, bq = T - r0 < BR ? T - r0 : BR;
    flash_row rw[BR];
    float bs[BR * FLASH_NBSTAT];
    // dQ, its part (BR, D); L (BR, 3 sums, 4 lanes): ssmax's per-lane A = sum dx S, Bs = sum res,
    // C = sum f S
    float *dQ = t->acc, *part = t->acc2, *L = t->lane;
    memset(L, 0, (size_t)BR * 12 * sizeof(float));
    bwd_rows(c, stats, bstat, b, h, r0, bq, t, rw, bs);
    for (int kt = 0; kt <= qt; kt++) {
        int j0 = kt * BC, nk = T - j0 < BC ? T - j0 : BC;
        load_keys(c, b, h, j0, nk, t, 1, 1, 0);
        bwd_block(c, rw, bs, r0, bq, j0, t);
        memset(part, 0, (size_t)bq * D * sizeof(float));
        acc_product(c, t->dS, t->kt, bq, nk, part, t->tmp);  // the block's dS K
        for (size_t e = 0; e < (size_t)bq * D; e++) dQ[e] = kt ? dQ[e] + part[e] : part[e];
        if (c->fp.score == LSSAR_SCORE_SSMAX)
            for (int r = 0; r < bq; r++) {
                const float *dxr = t->dxs + (size_t)r * BC, *sr = t->s + (size_t)r * BC;
                const float *rsr = t->res + (size_t)r * BC, *fr = t->fj + (size_t)r * BC;
                float *Lr = L + r * 12;
                for (int q = 0; q < 4; q++) {  // tile partials, then into the running sums
                    float A = 0.0f, Bs = 0.0f, C = 0.0f;
                    for (int tt = 0; tt < FLASH_LANE_COLS; tt++) {
                        int j = flash_lane_col(q, tt);
                        flash_ssmax_acc(dxr[j], rsr[j], fr[j], sr[j], &A, &Bs, &C);
                    }
                    Lr[q] += A; Lr[4 + q] += Bs; Lr[8 + q] += C;
                }
            }
    }
    for (int r = 0; r < bq; r++) {
        size_t qr = qrow(c, b, r0 + r, h), ri = flash_row_index(b, h, r0 + r, c->H, T);
        float *g = dQ + (size_t)r * D;
        if (flash_cos(&c->fp)) project(g, c->qf + qr, c->rq[ri], D);
        memcpy(dq + qr, g, D * sizeof(float));
        if (rowds) {
            const float *Lr = L + r * 12;
            rowds[ri] = flash_ssmax_ds_row(&c->fp, r0 + r,
                                           flash_ssmax_row_term(quad(Lr), quad(Lr + 4), quad(Lr + 8)));
        }
    }
}

// ------------------------------------------------------------------ setup shared by both calls

int flash_emu_check_fused(const lssar_attn_desc *a, const char *fn) {
    if (!a || !attn_kind_ok(a->kind)) return LSSAR_OK;   // attn_desc_check reports it
    lssar_attn_stages st = attn_stages(a->kind);
    if (flash_fused_supported(&st)) return LSSAR_OK;
    return lssar_fail(LSSAR_E_UNSUPPORTED, "%s: attention kind %s: the fused GPU kernels do not support it "
                      "yet (it runs on the CPU); see issue 34", fn, lssar_attn_name(a->kind));
}

static int check_args(const lssar_attn_desc *a, int B, int Tq, int Tk, int kvs, int H, int D) {
    int rc = attn_desc_check(a, "flash attention");
    if (rc) return rc;
    rc = flash_emu_check_fused(a, "flash attention");
    if (rc) return rc;
    if (B <= 0 || Tq <= 0 || H <= 0 || D <= 0 || Tq > Tk || kvs < Tk)
        return lssar_fail(LSSAR_E_SIZE,
                          "flash attention: B=%d Tq=%d Tk=%d kv_stride=%d H=%d D=%d; need sizes > 0, "
                          "Tq <= Tk <= kv_stride",
                          B, Tq, Tk, kvs, H, D);
    // the argmax travels as a float in the stats: exact below 2^24
    if (Tk > (1 << 24) || (int64_t)H * D > INT32_MAX / 2 || (int64_t)B * kvs > INT32_MAX / 2)
        return lssar_fail(LSSAR_E_SIZE, "flash attention: B=%d T=%d H=%d D=%d is too large", B, Tk, H, D);
    return LSSAR_OK;
}

// 1 / max(|x|, 1e-12) of rows 0..n-1 of (b, h) for every (b, h): (B, H, n).
static void inv_norms(const emu_ctx *c, const float *x, int n, int stride, float *out) {
    int D = c->D;
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < c->B * c->H; bh++) {
        int b = bh / c->H, h = bh % c->H;
        for (int t = 0; t < n; t++) {
            const float *xr = x + ((size_t)b * stride + t) * c->HD + (size_t)h * D;
            float ss = 0.0f;
            for (int d = 0; d < D; d++) ss += xr[d] * xr[d];
            out[(size_t)bh * n + t] = flash_inv_norm(ss);
        }
    }
}

// bf16 copy of rows 0..n-1 of each sequence (stride rows apart); rows past n left 0.
static float *bf16_copy(const float *x, int B, int n, int stride, int HD) {
    size_t N = (size_t)B * stride * HD;
    float *y = calloc(N ? N : 1, sizeof(float));
    if (!y) return NULL;
    for (int b = 0; b < B; b++)
        for (size_t e = 0; e < (size_t)n * HD; e++) {
            size_t i = (size_t)b * stride * HD + e;
            y[i] = flash_bf16(x[i]);
        }
    return y;
}

static void ctx_init(emu_ctx *c, const lssar_attn_desc *a, flash_mode mode, int B, int Tq, int Tk, int kvs,
                     int H, int D) {
    memset(c, 0, sizeof *c);
    lssar_attn_stages st;
    lssar_attn_stages_of(a->kind, &st);  // (checked by check_args)
    flash_params_init(&c->fp, &st, a->p, D);
    flash_params_len(&c->fp, a->len_norm == LSSAR_LEN_NORM_ROW, a->train_len);
    flash_params_temp(&c->fp, a->temp_d);
    c->bf16 = mode == FLASH_BF16;
    c->B = B; c->Tq = Tq; c->Tk = Tk; c->kvs = kvs; c->H = H; c->D = D; c->HD = H * D;
    c->q0 = Tk - Tq;
    c->ssmax_s = st.score == LSSAR_SCORE_SSMAX ? a->ssmax_s : NULL;
}

size_t flash_emu_stats_floats(const lssar_attn_desc *a, int B, int Tq, int H, int D) {
    if (!a || !attn_kind_ok(a->kind)) return 0;
    lssar_attn_stages st = attn_stages(a->kind);
    if (!flash_fused_supported(&st)) return 0;
    flash_params fp;
    flash_params_init(&fp, &st, a->p, D);
    return flash_stats_floats(&fp, B, Tq, H, D);
}

// ------------------------------------------------------------------ forward

int flash_emu_forward(const lssar_attn_desc *a, flash_mode mode, int B, int Tq, int Tk, int kv_stride,
                      int H, int D, const float *q, const float *k, const float *v, float *out,
                      float *stats) {
    int rc = check_args(a, B, Tq, Tk, kv_stride, H, D);
    if (rc) return rc;
    if (!q || !k || !v || !out)
        return lssar_fail(LSSAR_E_NULL, "flash attention forward: q, k, v and out must be non-NULL");
    emu_ctx c;
    ctx_init(&c, a, mode, B, Tq, Tk, kv_stride, H, D);
    float *qb = NULL, *kb = NULL, *vb = NULL;
    c.qf = q; c.kf = k;
    c.q = q; c.k = k; c.v = v;
    if (c.bf16) {
        qb = bf16_copy(q, B, Tq, Tq, c.HD);
        kb = bf16_copy(k, B, Tk, kv_stride, c.HD);
        vb = bf16_copy(v, B, Tk, kv_stride, c.HD);
        c.q = qb; c.k = kb; c.v = vb;
    }
    int normed = flash_needs_norms(&c.fp);  // the pre-pass of inverse norms
    if (normed) {
        c.rq = malloc((size_t)B * H * Tq * sizeof(float));
        c.rk = malloc((size_t)B * H * Tk * sizeof(float));
    }
    int failed = (c.bf16 && (!qb || !kb || !vb)) || (normed && (!c.rq || !c.rk));
    if (!failed && normed) {
        inv_norms(&c, q, Tq, Tq, c.rq);
        inv_norms(&c, k, Tk, kv_stride, c.rk);
    }
    const int nqt = (Tq + BR - 1) / BR;
    const int64_t ncta = (int64_t)B * H * nqt;
    if (!failed) {
#pragma omp parallel
        {
            tiles t;
            int ok = tiles_alloc(&t, D) == 0;
            if (!ok) {
#pragma omp atomic write
                failed = 1;
            }
#pragma omp for schedule(dynamic, 1)
            for (int64_t cta = 0; cta < ncta; cta++) {
                if (!ok) continue;
                // the GPU's grid order: query tile fastest would do as well; results do not depend on it
                int qt = (int)(cta % nqt), bh = (int)(cta / nqt);
                fwd_cta(&c, bh / H, bh % H, qt, &t, out, stats);
            }
            if (ok) tiles_free(&t);
        }
    }
    free(qb); free(kb); free(vb); free(c.rq); free(c.rk);
    if (failed)
        return lssar_fail(LSSAR_E_NOMEM, "flash attention forward: out of memory (B=%d T=%d H=%d D=%d)", B,
                          Tk, H, D);
    return LSSAR_OK;
}

// ------------------------------------------------------------------ backward

int flash_emu_backward(const lssar_attn_desc *a, flash_mode mode, int B, int T, int H, int D,
                       const float *q, const float *k, const float *v, const float *out,
                       const float *stats, const float *dout, float *dq, float *dk, float *dv,
                       float *ds) {
    int rc = check_args(a, B, T, T, T, H, D);
    if (rc) return rc;
    if (!q || !k || !v || !dout || !dq || !dk || !dv)
        return lssar_fail(LSSAR_E_NULL,
                          "flash attention backward: q, k, v, dout, dq, dk and dv must be non-NULL");
    if (!out != !stats)
        return lssar_fail(LSSAR_E_NULL,
                          "flash attention backward: pass both out and stats of the forward, or neither");
    size_t N = (size_t)B * T * H * D;
    float *own = NULL;  // the forward's out and stats when the caller has none
    if (!stats) {
        size_t ns = flash_emu_stats_floats(a, B, T, H, D);
        own = malloc((N + ns) * sizeof(float));
        if (!own) return lssar_fail(LSSAR_E_NOMEM, "flash attention backward: out of memory");
        rc = flash_emu_forward(a, mode, B, T, T, T, H, D, q, k, v, own, own + N);
        if (rc) { free(own); return rc; }
        out = own;
        stats = own + N;
    }
    emu_ctx c;
    ctx_init(&c, a, mode, B, T, T, T, H, D);
    const int normed = flash_needs_norms(&c.fp), ssmax = c.fp.score == LSSAR_SCORE_SSMAX;
    const int unnormed = flash_unnormed(&c.fp);
    float *qb = NULL, *kb = NULL, *vb = NULL, *dyb = NULL;
    c.qf = q; c.kf = k;
    c.q = q; c.k = k; c.v = v; c.dy = dout;
    if (c.bf16) {
        qb = bf16_copy(q, B, T, T, c.HD);
        kb = bf16_copy(k, B, T, T, c.HD);
        vb = bf16_copy(v, B, T, T, c.HD);
        dyb = bf16_copy(dout, B, T, T, c.HD);
        c.q = qb; c.k = kb; c.v = vb; c.dy = dyb;
    }
    size_t nrows = (size_t)B * H * T;
    float *bstat = malloc(nrows * FLASH_NBSTAT * sizeof(float));
    float *rowds = ssmax && ds ? malloc(nrows * sizeof(float)) : NULL;
    if (normed) {
        c.rq = malloc(nrows * sizeof(float));
        c.rk = malloc(nrows * sizeof(float));
    }
    int failed = !bstat || (ssmax && ds && !rowds) || (normed && (!c.rq || !c.rk)) ||
                 (c.bf16 && (!qb || !kb || !vb || !dyb));
    if (!failed) {
        if (normed) {
            inv_norms(&c, q, T, T, c.rq);
            inv_norms(&c, k, T, T, c.rk);
        }
        // ---- 0. rows: c = dy . v_jm, D1, D2 (flash_bwd_row); dots over d in order, fp32.
        // sigmoid / relu: none (no normalisation), the slots 0.
        if (unnormed) memset(bstat, 0, nrows * FLASH_NBSTAT * sizeof(float));
        const float *yc_all = flash_centred(&c.fp) ? stats + flash_stats_yc(B, T, H) : out;
        const float *ec_all = c.fp.rw ? stats + flash_stats_ec(B, T, H, D) : NULL;
        const float s_h0 = 0.0f;
#pragma omp parallel for schedule(static)
        for (int64_t row = 0; row < (int64_t)(unnormed ? 0 : nrows); row++) {
            int bh = (int)(row / T), i = (int)(row % T), b = bh / H, h = bh % H;
            const float *st = stats + (size_t)row * FLASH_NSTAT;
            flash_row rw;
            flash_row_load(&c.fp, i, ssmax ? c.ssmax_s[h] : s_h0, normed ? c.rq[row] : 1.0f, st, &rw);
            size_t qr = qrow(&c, b, i, h);
            const float *dyr = c.dy + qr, *ycr = yc_all + qr;
            const float *vj = c.v + krow(&c, b, rw.jm, h);
            float dyv = 0.0f, dyy = 0.0f, dye = 0.0f;
            for (int d = 0; d < D; d++) {
                dyv += dyr[d] * vj[d];
                dyy += dyr[d] * ycr[d];
            }
            if (ec_all)
                for (int d = 0; d < D; d++) dye += dyr[d] * ec_all[qr + d];
            flash_bwd_row(&c.fp, &rw, dyv, dyy, dye, st[FLASH_ST_S], bstat + (size_t)row * FLASH_NBSTAT);

        }
        const int nt = (T + BR - 1) / BR;
        const int64_t ncta = (int64_t)B * H * nt;
#pragma omp parallel
        {
            tiles t;
            int ok = tiles_alloc(&t, D) == 0;
            if (!ok) {
#pragma omp atomic write
                failed = 1;
            }
            // ---- 0b. the re-weighting kinds: the row constants from the backward's dw
#pragma omp for schedule(dynamic, 1)
            for (int64_t cta = 0; cta < (flash_bwd_rowsums(&c.fp) ? ncta : 0); cta++) {
                if (!ok) continue;
                int qt = (int)(cta % nt), bh = (int)(cta / nt);
                bwd_rowsums_cta(&c, stats, bstat, bh / H, bh % H, qt, &t);
            }
            // ---- 1. dK, dV: one CTA per key tile
#pragma omp for schedule(dynamic, 1)
            for (int64_t cta = 0; cta < ncta; cta++) {
                if (!ok) continue;
                int kt = (int)(cta % nt), bh = (int)(cta / nt);
                bwd_dkdv_cta(&c, stats, bstat, bh / H, bh % H, kt, &t, dk, dv);
            }
            // ---- 2. dQ: one CTA per query tile
#pragma omp for schedule(dynamic, 1)
            for (int64_t cta = 0; cta < ncta; cta++) {
                if (!ok) continue;
                int qt = (int)(cta % nt), bh = (int)(cta / nt);
                bwd_dq_cta(&c, stats, bstat, bh / H, bh % H, qt, &t, dq, rowds);
            }
            if (ok) tiles_free(&t);
        }
        // ---- 3. ssmax: ds_h = the row terms summed in (b, i) order
        if (rowds)
            for (int h = 0; h < H; h++) {
                double sum = 0.0;
                for (int b = 0; b < B; b++)
                    for (int i = 0; i < T; i++) sum += rowds[flash_row_index(b, h, i, H, T)];
                ds[h] = (float)sum;
            }
    }
    free(qb); free(kb); free(vb); free(dyb); free(bstat); free(rowds); free(c.rq); free(c.rk); free(own);
    if (failed)
        return lssar_fail(LSSAR_E_NOMEM, "flash attention backward: out of memory (B=%d T=%d H=%d D=%d)", B,
                          T, H, D);
    return LSSAR_OK;
}
