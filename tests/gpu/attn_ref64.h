/*
 * attn_ref64.h - a float64 reference of the causal attention kinds, written plainly from
 * spec/attention.md (docs/attention.md) as its chain of stages (score dot / ssmax / cos, phi exp /
 * softplus / sigmoid / relu, l1 or len, re-weighting; lssar_attn_stages_of), one query row at a
 * time (O(T) memory, never a T x T matrix), with first-order bounds on the error the GPU's bf16
 * tensor-core products add. Below, "softmax" stands for phi exp, "lssa" for phi softplus, "lssar"
 * for the re-weighting, whatever the score; "centred" rows (every l1 row but phi softplus on score
 * cos without re-weighting, src/attn/flash.h) keep their argmax key out of the rounded tile.
 *
 * Used by tests/gpu/test_gpu.c for two things:
 *   1. information: how far the CPU (float32) and the GPU (float32 context) are from the exact
 *      result, so that a GPU-vs-CPU disagreement can be told apart from a GPU that is simply
 *      less accurate than the CPU (or more);
 *   2. the bf16 bound: per element, how much the roundings of the bf16 mode can move each output.
 *
 * The rounding model of the bf16 mode (docs/CUDA.md "Precision"), for inputs q, k, v, dy that are
 * ALREADY bf16 values (the test rounds them on the host, so the GPU's own rounding of those
 * operands changes nothing and the bound does not have to carry the p * lambda amplification of
 * a rounded q . k, which is a property of the inputs, not of the kernel):
 *   - q . k: bf16 x bf16 products are exact in fp32; fp32 accumulation only.
 *   - y = sum_j w_j v_j / W: the weight tile is rounded to bf16 (unit roundoff u = 2^-9) before
 *     the product with V: |dy_d| <= 2u sum_j beta_j |v_jd| (2u, not u: it holds whether W is
 *     summed from the rounded or the unrounded weights), plus gamma(n + 2) for the fp32 sum;
 *     lssar's E = sum (beta_j / u_j) v_j likewise (S = sum beta_j / u_j is an fp32 row sum).
 *     softmax, ssmax and lssar keep the row's argmax key jm out of the rounded tile (its weight
 *     is exactly 1; src/attn/flash.h "centred"), lssa rounds every weight: the probabilistic
 *     scale below counts only the rounded weights (the worst case counts all).
 *   - the backward's D1 = dy . y (lssa) or dy . yc (the centred output, from the fp32
 *     statistics) carries the weights' rounding: sum_k delta_k beta_k dbeta_k; lssar's
 *     D2 = p o (dy . E - D1 S) inherits the errors of E and D1 (S is fp32); lssa (and a
 *     fallback row) has D2 = D1.
 *   - dbeta_j = dy . v_j: fp32 dot of bf16 operands: gamma(D) sum |dy_d v_jd|.
 *   - dS (the gradient w.r.t. the raw q . k) then carries those errors through the exact
 *     per-element formulas (first order), and is itself rounded to bf16 for dQ = dS K and
 *     dK = dS^T Q: + (2u + 4 U32) |dS| per element (and 2u in its probabilistic scale), plus
 *     gamma(n) for the fp32 sums. 2u: REF_UB = 2^-9 is half of what round-to-nearest to bf16 can
 *     move a value, |bf16(x) - x| <= 2^-8 |x| (the y and dV terms above carry 2u for that too).
 *     With u alone a one-key row (T = 1, sigmoid / relu: dq_i = dS_ii k_i, one rounding) fails:
 *     measured 2.25e-3 relative = 2^-8 / sqrt(3), the RMS of a uniform rounding error.
 *   - dV = beta^T dy: the weights rounded again: 2u sum_i beta_ij |dy_id| + gamma(T).
 *   - the l2-normalisation projection dq = G - q rq^2 (q . G) is linear: the worst case maps a
 *     bound on G to |dG_d| + |q_d| rq^2 sum_e |q_e| |dG_e|; the probabilistic scale carries each
 *     error term through the projection itself (an error along q is removed by it: when q and
 *     the keys it attends to are nearly parallel, most of G's error goes).
 *   - bf16 storage (the public API's LSSAR_BF16): every stored output adds u |value|, and the
 *     backward's D1 sees the stored (rounded) y.
 * Two bounds come out of that model, per element:
 *   - worst case (yb, dqb, ...): every rounding error at +-u with the worst signs: sums of
 *     |terms|. Rigorous, but it grows like n (or D) where the real error grows like sqrt(n): at
 *     T = 4096 it exceeds 1 for dq and dk, which would let a zero gradient pass. Printed only.
 *   - probabilistic (ys, dqs, ...): the standard model of rounding errors as independent,
 *     mean-zero, |delta| <= u (Higham & Mary, "A new approach to probabilistic rounding error
 *     analysis", SISC 2019). A sum sum_k c_k delta_k is then sub-Gaussian with scale
 *     sigma = u sqrt(sum_k c_k^2) (Hoeffding: P(|sum| > L sigma) <= 2 exp(-L^2 / 2)). Per element
 *     the scales of the error sources are added linearly (Minkowski: safe for correlated
 *     sources): one rounding per weight in P V (so the errors of y_d for different d, and of
 *     D1 = dy . y, are correlated and computed as such), the row errors of D1 / D2 propagated
 *     COHERENTLY along the row (one random variable per row, times sum_j coefficient_j k_j),
 *     and independently across rows (dk, dv, ds). test_gpu.c passes a tensor when
 *     ||err|| <= 6 sqrt(sum_e sigma_e^2) + the fp32-level term: with L = 6 a false failure has
 *     probability <= 2 e^-18 per check even when one element dominates.
 * sigmoid / relu (no row normalisation): every weight a_j = f(x_j) is rounded in P V (no
 * argmax kept out), there is no D1 / D2 (dS_j = a'(x_j) dbeta_j / sqrt(D): only dbeta's fp32 error
 * and dS's own rounding), and dV = A^T dy as above with beta = a.
 * Second-order terms (u^2 = 4e-6 relative) are left out; the fp32-level differences (summation
 * order, fp32 rounding of x amplified by p) are measured by the same inputs' fp32-context run and
 * added by the caller (test_gpu.c).
 */
#ifndef LSSAR_TEST_ATTN_REF64_H
#define LSSAR_TEST_ATTN_REF64_H

#include <float.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "lssar.h"

#define REF_UB 0x1p-9   /* bf16 unit roundoff: 8 significand bits, round to nearest */
#define REF_U32 0x1p-24 /* fp32 unit roundoff */
static double ref_gam(double n) { return n * REF_U32 / (1 - n * REF_U32); }

typedef struct {
    int kind;
    double p;
    const float *s_h;                 /* SSMax: H scales (host) */
    int B, Tq, Tk, kvs, H, D;         /* q (B, Tq, H, D); k, v: sequence b at row b * kvs */
    const float *q, *k, *v, *dy;      /* dy NULL: forward only; the backward needs Tq = Tk = kvs */
    int store_bf16;                   /* 1: outputs stored in bf16 (public API, LSSAR_BF16) */
    int len_norm, L;                  /* sigmoid / relu: lssar_len_norm, the training length L */
    double exp_err;                   /* > 0: every logit moved by the exponential unit's error (ref_jitter) */
} ref_args;

typedef struct {
    double *y, *yb, *ys;              /* (B, Tq, H, D): output, worst-case and probabilistic scale */
    double *dq, *dk, *dv, *dqb, *dkb, *dvb, *dqs, *dks, *dvs; /* (B, T, H, D), when dy */
    double *ds, *dsb, *dss, *dsabs;   /* (H): SSMax d(loss)/d(s_h), worst, scale, sum of |terms| */
} ref_out;

typedef struct {
    double sc;      /* softmax / ssmax: logit = sc S; lssa / lssar: x = sc rk_j S with sc = lam0 rq */
    double m, z, umax, W, D1, D2, d1b, d2b, rq, lam0, o;
    double s1, s2;  /* probabilistic scales of the errors of D1 and (lssar) of dy . E */
    double S;       /* lssar: sum_j beta_j / u_j */
    double bias, ilen;  /* sigmoid: x = sc S + bias (-ln L or -ln n); relu: a = max(x, 0) ilen */
    int n, fb;
} ref_row;

static inline double ref_softplus(double x) { return fmax(x, 0.0) + log1p(exp(-fabs(x))); }
static inline double ref_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
/* the stages of each kind, filled by attn_ref64 before its parallel loops (the per-pair functions
   ask for them often) */
static lssar_attn_stages ref_stab[LSSAR_ATTN_NKINDS];
static int ref_stab_ok;
static void ref_stab_init(void) {
    for (int k = 0; k < LSSAR_ATTN_NKINDS; k++) {
        memset(&ref_stab[k], 0, sizeof ref_stab[k]);
        lssar_attn_stages_of((lssar_attn_kind)k, &ref_stab[k]);
    }
    ref_stab_ok = 1;
}
static inline lssar_attn_stages ref_st(int kind) {
    if (!ref_stab_ok) ref_stab_init();
    return ref_stab[(unsigned)kind < LSSAR_ATTN_NKINDS ? kind : 0];
}
/* score cos: the l2-normalised score (x = lam0 rq rk S) and its projection in the backward */
static inline int ref_normed(int kind) { return ref_st(kind).score == LSSAR_SCORE_COS; }
static inline int ref_unnormed(int kind) { return ref_st(kind).norm == LSSAR_NORM_LEN; }
static inline int ref_exp(int kind) { return ref_st(kind).phi == LSSAR_PHI_EXP; }
static inline int ref_rw(int kind) { return ref_st(kind).reweight != 0; }
static inline int ref_is_ssmax(int kind) { return ref_st(kind).score == LSSAR_SCORE_SSMAX; }
static inline int ref_centred(int kind) {
    return !ref_unnormed(kind) && (ref_exp(kind) || ref_rw(kind) || !ref_normed(kind));
}

static inline double ref_logit(const ref_args *A, const ref_row *r, double S, double rk) {
    if (ref_unnormed(A->kind)) return r->sc * S + r->bias;
    return ref_normed(A->kind) ? r->sc * rk * S : r->sc * S;
}

/* The fused kernels' exponential unit (src/attn/flash.h, flash_ex2): exp(y) within
   eps_ex2 + 1.173 |y| 2^-23 relative (y = x - m for phi exp, -|x| inside softplus and sigmoid),
   which is exp of y moved by as much: so its effect on the outputs is that of every logit moved by
   delta = exp_err (1 + 0.5865 |y|) (exp_err = eps_ex2 = 2^-22; for softplus and sigmoid the change
   of the weight, e / (1 + e) of that for softplus and sigma (1 - sigma) of it for sigmoid, is
   their derivative times delta). The sign comes from a hash of (b, h, i, j), so the forward and
   the backward's recomputation move the same logit alike: a first-order randomised estimate, as
   test_gpu's conditioning term. relu takes no exponential. */
static inline double ref_jitter(const ref_args *A, const ref_row *r, double x, int b, int h, int i, int j) {
    if (!(A->exp_err > 0) || ref_st(A->kind).phi == LSSAR_PHI_RELU) return 0.0;
    double y = ref_exp(A->kind) && !ref_unnormed(A->kind) ? x - r->m : fabs(x);
    uint64_t z = ((((uint64_t)b * 65537u + (uint64_t)h) * 1000003u + (uint64_t)i) * 1000033u + (uint64_t)j);
    z *= 0x9E3779B97F4A7C15ull;
    z ^= z >> 31;
    z *= 0xBF58476D1CE4E5B9ull;
    z ^= z >> 29;
    return (z & 1 ? 1.0 : -1.0) * A->exp_err * (1.0 + 0.5865 * fabs(y));
}

/* beta of one pair; alpha and u (lssar's n alpha - o; 0 otherwise) on the side */
static inline double ref_weight(const ref_args *A, const ref_row *r, double x, double *alpha, double *u) {
    *alpha = 0; *u = 0;
    if (A->kind == LSSAR_ATTN_SIGMOID) return ref_sigmoid(x);
    if (A->kind == LSSAR_ATTN_RELU) return fmax(x, 0.0) * r->ilen;
    double al = (ref_exp(A->kind) ? exp(x - r->m) : ref_softplus(x)) / r->z;
    *alpha = al;
    if (!ref_rw(A->kind) || r->fb) return al;
    double uu = r->n * al - r->o;
    *u = uu;
    return uu > 0 ? pow(uu / r->umax, A->p) / r->W : 0.0;
}

/* dS of one pair (the gradient w.r.t. the raw dot product q . k) and the first-order bound of its
   error from the errors of D1 / D2 (row) and of dbeta (dbe). dx (the logit gradient), its bound
   dxb and f (dx = f (dalpha - D2): the l1 stage's phi' / Z) for SSMax. */
static inline void ref_pair_bwd(const ref_args *A, const ref_row *r, double x, double beta, double u,
                                double rk, double dbeta, double dbe, double *dS, double *dSb, double *dx,
                                double *a1, double *a2, double *dxb, double *fo) {
    double e = r->d1b + dbe;   /* error bound of (dbeta - D1) */
    if (ref_unnormed(A->kind)) {   /* dS = a'(x) dbeta sc: no row term */
        double fd = A->kind == LSSAR_ATTN_SIGMOID ? ref_sigmoid(x) * ref_sigmoid(-x) : (x > 0 ? r->ilen : 0.0);
        *dx = fd * dbeta;
        *dS = *dx * r->sc;
        *dSb = fd * dbe * r->sc;
        *a1 = 0;
        *a2 = 0;
        *dxb = fd * dbe;
        *fo = 0;
        return;
    }
    const int lssar_nf = ref_rw(A->kind) && !r->fb;
    double dal, dalb;
    if (lssar_nf) {
        if (u > 0) { dal = r->n * A->p * beta * (dbeta - r->D1) / u; dalb = r->n * A->p * beta * e / u; }
        else { dal = 0; dalb = 0; }
    } else { dal = dbeta; dalb = dbe; }
    /* the l1 stage: dx = f (dalpha - D2), f = phi'(x) / Z (exp: alpha; softplus: sigmoid(x) / Z);
       dS = scl dx (score cos: scl = lam0 rq rk) */
    double f = ref_exp(A->kind) ? exp(x - r->m) / r->z : ref_sigmoid(x) / r->z;
    double scl = ref_normed(A->kind) ? r->sc * rk : r->sc;
    *fo = f;
    *dx = f * (dal - r->D2);
    *dxb = f * (dalb + r->d2b);
    *dS = scl * *dx;
    *dSb = scl * *dxb;
    /* the coefficients of the row errors in dS (signed: the D1 error reaches dS through dalpha
       and through D2 = p o (dy . E - D1 S), and the two partly cancel) */
    if (lssar_nf) {
        *a1 = scl * f * A->p * (r->o * r->S - (u > 0 ? r->n * beta / u : 0));   /* d dS / d D1 */
        *a2 = -scl * f * A->p * r->o;                                            /* d dS / d (dy . E) */
    } else {
        *a1 = -scl * f;   /* no re-weighting, fallback: D2 = D1 */
        *a2 = 0;
    }
}

static inline double ref_dot(const float *a, const float *b, int D) {
    double s = 0;
    for (int d = 0; d < D; d++) s += (double)a[d] * b[d];
    return s;
}
static inline double ref_absdot(const float *a, const float *b, int D) {
    double s = 0;
    for (int d = 0; d < D; d++) s += fabs((double)a[d] * b[d]);
    return s;
}

/* Returns 0, or -1 when out of memory. out's arrays are allocated by the caller (y, yb, ys
   always; the rest when A->dy; ds* when SSMax). */
static int attn_ref64(const ref_args *A, ref_out *O) {
    const int B = A->B, Tq = A->Tq, Tk = A->Tk, H = A->H, D = A->D, HD = H * D, q0 = Tk - Tq;
    const double ub = REF_UB, sb = A->store_bf16 ? REF_UB : 0.0, p = A->p;
    const size_t nrows = (size_t)B * H * Tq;
    ref_row *rows = calloc(nrows, sizeof *rows);
    double *rk = malloc(sizeof(double) * (size_t)B * H * Tk);
    double *rds = calloc(nrows * 4, sizeof(double));   /* per-row SSMax: ds, worst, scale^2, |terms| */
    int oom = !rows || !rk || !rds;
    if (oom) { free(rows); free(rk); free(rds); return -1; }
    if (!ref_stab_ok) ref_stab_init();
    const int normed = ref_normed(A->kind);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int j = 0; j < Tk; j++) {
                const float *kj = A->k + ((size_t)b * A->kvs + j) * HD + (size_t)h * D;
                rk[((size_t)b * H + h) * Tk + j] = 1.0 / fmax(sqrt(ref_dot(kj, kj, D)), 1e-12);
            }
    /* ---- pass A: one task per query row: weights, y, row statistics, dq */
#pragma omp parallel
    {
        double *x = malloc(sizeof(double) * Tk), *bet = malloc(sizeof(double) * Tk);
        double *uu = malloc(sizeof(double) * Tk), *db = malloc(sizeof(double) * Tk);
        double *dbe = malloc(sizeof(double) * Tk), *S = malloc(sizeof(double) * Tk);
        double *acc = malloc(sizeof(double) * 12 * D);
        int mine_oom = !x || !bet || !uu || !db || !dbe || !S || !acc;
        if (mine_oom) {
#pragma omp atomic write
            oom = 1;
        }
#pragma omp for schedule(dynamic, 4)
        for (size_t idx = 0; idx < nrows; idx++) {
            if (mine_oom) continue;
            int rr = (int)(idx % Tq), h = (int)(idx / Tq % H), b = (int)(idx / ((size_t)Tq * H));
            int i = q0 + rr, n = i + 1;
            size_t qo = ((size_t)b * Tq + rr) * HD + (size_t)h * D;
            const float *qi = A->q + qo;
            const double *rkh = rk + ((size_t)b * H + h) * Tk;
#define KROW(j) (A->k + ((size_t)b * A->kvs + (j)) * HD + (size_t)h * D)
#define VROW(j) (A->v + ((size_t)b * A->kvs + (j)) * HD + (size_t)h * D)
            ref_row *r = &rows[idx];
            r->n = n;
            r->o = i < 3 ? 0.0 : 1.0;
            r->rq = 1.0 / fmax(sqrt(ref_dot(qi, qi, D)), 1e-12);
            r->lam0 = log((double)D) * log((double)n);
            if (normed) r->sc = r->lam0 * r->rq;
            else r->sc = (ref_is_ssmax(A->kind) ? A->s_h[h] * log((double)n) : 1.0) / sqrt((double)D);
            {
                double Lr = A->len_norm == LSSAR_LEN_NORM_ROW ? (double)n : (double)(A->L >= 1 ? A->L : 1);
                r->bias = A->kind == LSSAR_ATTN_SIGMOID ? -log(Lr) : 0.0;
                r->ilen = A->kind == LSSAR_ATTN_RELU ? 1.0 / Lr : 1.0;
            }
            double xmax = -INFINITY, xmin = INFINITY, z = 0, rkmin = INFINITY;
            int jm = 0;
            for (int j = 0; j < n; j++) {
                S[j] = ref_dot(qi, KROW(j), D);
                x[j] = ref_logit(A, r, S[j], rkh[j]);
                if (x[j] > xmax) { xmax = x[j]; jm = j; }
                xmin = fmin(xmin, x[j]);
                rkmin = fmin(rkmin, rkh[j]);
            }
            if (A->exp_err > 0) {   /* (r->m as set below: the jitter's y needs it first) */
                r->m = ref_exp(A->kind) && !ref_unnormed(A->kind) ? xmax : 0.0;
                for (int j = 0; j < n; j++) x[j] += ref_jitter(A, r, x[j], b, h, i, j);
            }
            if (ref_unnormed(A->kind)) {
                r->z = 1;   /* no normalisation */
            } else {
                const int ex = ref_exp(A->kind);
                r->m = ex ? xmax : 0.0;
#define REF_PHI(xx) (ex ? exp((xx) - r->m) : ref_softplus(xx))
                for (int j = 0; j < n; j++) z += REF_PHI(x[j]);
                r->z = z;
                if (ref_rw(A->kind)) {
                    /* the uniform-row tolerance: lambda 8 sqrt(D) eps (cos), |sc| |q| max |k| 8 sqrt(D)
                       eps (dot, ssmax), as attn_rows.c */
                    double lim = normed ? r->lam0 : fabs(r->sc) / (r->rq * rkmin);
                    double umax = -INFINITY;
                    for (int j = 0; j < n; j++) umax = fmax(umax, n * REF_PHI(x[j]) / z - r->o);
                    r->umax = umax;
                    double tol = lim * 8 * sqrt((double)D) * FLT_EPSILON;
                    r->fb = i >= 3 && (xmax - xmin <= tol || !(umax > 0));
                    if (!r->fb) {
                        double W = 0;
                        for (int j = 0; j < n; j++) {
                            double uj = n * REF_PHI(x[j]) / z - r->o;
                            W += uj > 0 ? pow(uj / umax, p) : 0.0;
                        }
                        r->W = W;
                    }
                }
#undef REF_PHI
            }
            /* y; worst: sum beta |v|; scale^2: sum beta^2 v^2 over the rounded weights; lssar E, S.
               softmax / ssmax / lssar keep the argmax key jm out of the rounded tile (centred:
               src/attn/flash.h), lssa rounds every weight. */
            double *y = acc, *ya = acc + D, *E = acc + 2 * D, *Ea = acc + 3 * D, *yv = acc + 4 * D, Ssum = 0;
            memset(acc, 0, sizeof(double) * 5 * D);
            /* the weight that is not rounded (lssa, sigmoid, relu: none) */
            const int skip = ref_centred(A->kind) ? jm : -1;
            int lssar_nf = ref_rw(A->kind) && !r->fb;
            for (int j = 0; j < n; j++) {
                double al, u;
                bet[j] = ref_weight(A, r, x[j], &al, &u);
                uu[j] = u;
                const float *vj = VROW(j);
                double rb = j == skip ? 0.0 : bet[j];
                for (int d = 0; d < D; d++) {
                    double t = rb * vj[d];
                    y[d] += bet[j] * vj[d];
                    ya[d] += bet[j] * fabs(vj[d]);
                    yv[d] += t * t;
                }
                if (lssar_nf && u > 0) {
                    double c = bet[j] / u;
                    Ssum += c;
                    for (int d = 0; d < D; d++) { E[d] += c * vj[d]; Ea[d] += c * fabs(vj[d]); }
                }
            }
            double eps_sum = 2 * ub + 2 * ref_gam(n + 2);
            for (int d = 0; d < D; d++) {
                O->y[qo + d] = y[d];
                O->yb[qo + d] = eps_sum * ya[d] + sb * fabs(y[d]);
                O->ys[qo + d] = ub * sqrt(yv[d]) + sb * fabs(y[d]);
            }
            if (!A->dy) continue;
            /* ---- backward of the row */
            const float *dyi = A->dy + qo;
            double D1 = 0, d1b = 0, dya_y = 0, v1 = 0;
            for (int j = 0; j < n; j++) {
                db[j] = ref_dot(dyi, VROW(j), D);
                dbe[j] = ref_gam(D) * ref_absdot(dyi, VROW(j), D);
                D1 += bet[j] * db[j];
            }
            /* D1 = dy . y (lssa) or dy . yc (centred, from the fp32 statistics): its error is
               sum_k delta_k beta_k dbeta_k over the rounded weights */
            for (int j = 0; j < n; j++) { double t = j == skip ? 0.0 : bet[j] * db[j]; v1 += t * t; }
            for (int d = 0; d < D; d++) {
                d1b += fabs(dyi[d]) * O->yb[qo + d];
                dya_y += fabs(dyi[d] * y[d]);
            }
            d1b += ref_gam(D + 2) * dya_y;
            r->D1 = D1;
            r->d1b = d1b;
            r->s1 = ub * sqrt(v1);
            if (ref_unnormed(A->kind)) {   /* no D1, D2 */
                r->D1 = r->d1b = r->s1 = 0;
                r->D2 = r->d2b = r->s2 = 0;
            } else if (lssar_nf) {
                double D2 = 0, dEb = 0, dEa = 0, v2 = 0;
                for (int j = 0; j < n; j++)
                    if (uu[j] > 0) {
                        D2 += (n * bet[j] / uu[j] * p * (db[j] - D1)) * (uu[j] + r->o) / n;
                        double t = j == jm ? 0.0 : bet[j] / uu[j] * db[j];   /* dy . dE */
                        v2 += t * t;
                    }
                for (int d = 0; d < D; d++) { dEb += fabs(dyi[d]) * eps_sum * Ea[d]; dEa += fabs(dyi[d] * E[d]); }
                r->D2 = D2;
                r->d2b = p * r->o * (dEb + ref_gam(D + 2) * dEa + d1b * Ssum + fabs(D1) * Ssum * ref_gam(n));
                r->s2 = ub * sqrt(v2);
                r->S = Ssum;
            } else {
                r->D2 = D1;     /* lssa, fallback row: sum alpha dalpha = sum beta dbeta */
                r->d2b = d1b;
                r->s2 = 0;
            }
            double *G = acc + 5 * D, *Gb = acc + 6 * D, *A1 = acc + 7 * D, *A2 = acc + 8 * D, *Q = acc + 9 * D;
            double *Gs = acc + 10 * D;
            memset(G, 0, sizeof(double) * 6 * D);
            double dsr = 0, dsa = 0, dsbr = 0, bS = 0, lnn = log((double)n) / sqrt((double)D);
            for (int j = 0; j < n; j++) {
                double dS, dSb, dx, a1, a2, dxb, f;
                ref_pair_bwd(A, r, x[j], bet[j], uu[j], rkh[j], db[j], dbe[j], &dS, &dSb, &dx, &a1, &a2, &dxb,
                             &f);
                double tb = dSb + (2 * ub + 4 * REF_U32 + ref_gam(n)) * fabs(dS);
                const float *kj = KROW(j);
                /* the scales go through the l2 projection exactly: an error along q_i is removed by
                   it, so each error term is carried as (P k_j) with P = 1 - q^ q^T (softmax: P = 1) */
                double pc = normed ? r->rq * r->rq * S[j] : 0.0;
                for (int d = 0; d < D; d++) {
                    double pk = kj[d] - qi[d] * pc;
                    G[d] += dS * kj[d];
                    Gb[d] += tb * fabs(kj[d]);
                    A1[d] += a1 * pk;
                    A2[d] += a2 * pk;
                    Q[d] += dS * dS * pk * pk;
                }
                if (ref_is_ssmax(A->kind)) {
                    dsr += dx * S[j] * lnn;
                    dsa += fabs(dx * S[j]) * lnn;
                    dsbr += dxb * fabs(S[j]) * lnn;
                    bS += f * S[j] * lnn;   /* the coefficient of D1's error (softmax: f = beta) */
                }
            }
            rds[4 * idx] = dsr; rds[4 * idx + 1] = dsbr; rds[4 * idx + 2] = pow(r->s1 * (fabs(bS) + fabs(S[jm]) * lnn), 2); rds[4 * idx + 3] = dsa;
            for (int d = 0; d < D; d++) Gs[d] = fabs(A1[d]) * r->s1 + fabs(A2[d]) * r->s2 + 2 * ub * sqrt(Q[d]);
            if (normed) {
                double qg = 0, qgb = 0, rq2 = r->rq * r->rq;
                for (int d = 0; d < D; d++) { qg += qi[d] * G[d]; qgb += fabs(qi[d]) * Gb[d]; }
                for (int d = 0; d < D; d++) {
                    double g = G[d] - qi[d] * rq2 * qg;
                    O->dq[qo + d] = g;
                    O->dqb[qo + d] = Gb[d] + fabs(qi[d]) * rq2 * qgb +
                                     4 * REF_U32 * (fabs(G[d]) + fabs(qi[d] * rq2 * qg)) + sb * fabs(g);
                    O->dqs[qo + d] = Gs[d] + sb * fabs(g);   /* Gs is already projected */
                }
            } else {
                for (int d = 0; d < D; d++) {
                    O->dq[qo + d] = G[d];
                    O->dqb[qo + d] = Gb[d] + sb * fabs(G[d]);
                    O->dqs[qo + d] = Gs[d] + sb * fabs(G[d]);
                }
            }
#undef KROW
#undef VROW
        }
        free(x); free(bet); free(uu); free(db); free(dbe); free(S); free(acc);
    }
    if (oom) { free(rows); free(rk); free(rds); return -1; }
    if (A->dy) {
        /* ---- pass B: one task per key: dk, dv (T = Tq = Tk = kvs) */
        const int T = Tk;
        const size_t nkeys = (size_t)B * H * T;
#pragma omp parallel
        {
            double *acc = malloc(sizeof(double) * 8 * D);
            if (!acc) {
#pragma omp atomic write
                oom = 1;
            }
#pragma omp for schedule(dynamic, 4)
            for (size_t idx = 0; idx < nkeys; idx++) {
                if (!acc) continue;
                int j = (int)(idx % T), h = (int)(idx / T % H), b = (int)(idx / ((size_t)T * H));
                size_t ko = ((size_t)b * T + j) * HD + (size_t)h * D;
                const float *kj = A->k + ko, *vj = A->v + ko;
                double rkj = rk[((size_t)b * H + h) * T + j];
                double *G = acc, *Gb = acc + D, *dv = acc + 2 * D, *dvb = acc + 3 * D;
                double *C = acc + 4 * D, *Q = acc + 5 * D, *Vv = acc + 6 * D, *Gs = acc + 7 * D;
                memset(acc, 0, sizeof(double) * 8 * D);
                for (int i = j; i < T; i++) {
                    const ref_row *r = &rows[((size_t)b * H + h) * T + i];
                    size_t qo = ((size_t)b * T + i) * HD + (size_t)h * D;
                    const float *qi = A->q + qo, *dyi = A->dy + qo;
                    double S = ref_dot(qi, kj, D), x = ref_logit(A, r, S, rkj), al, u;
                    x += ref_jitter(A, r, x, b, h, i, j);
                    double bet = ref_weight(A, r, x, &al, &u);
                    double dbeta = ref_dot(dyi, vj, D), dbe = ref_gam(D) * ref_absdot(dyi, vj, D);
                    double dS, dSb, dx, a1, a2, dxb, f;
                    ref_pair_bwd(A, r, x, bet, u, rkj, dbeta, dbe, &dS, &dSb, &dx, &a1, &a2, &dxb, &f);
                    double tb = dSb + (2 * ub + 4 * REF_U32 + ref_gam(T)) * fabs(dS);
                    double coh = fabs(a1) * r->s1 + fabs(a2) * r->s2;
                    double pc = normed ? rkj * rkj * S : 0.0;   /* P = 1 - k^ k^T on the error terms */
                    for (int d = 0; d < D; d++) {
                        double pq = qi[d] - kj[d] * pc, q2 = pq * pq;
                        G[d] += dS * qi[d];
                        Gb[d] += tb * fabs(qi[d]);
                        C[d] += coh * coh * q2;
                        Q[d] += dS * dS * q2;
                        dv[d] += bet * dyi[d];
                        dvb[d] += bet * fabs(dyi[d]);
                        Vv[d] += bet * bet * (double)dyi[d] * dyi[d];
                    }
                }
                double eps_v = 2 * ub + 2 * ref_gam(T);
                for (int d = 0; d < D; d++) Gs[d] = sqrt(C[d]) + 2 * ub * sqrt(Q[d]);
                if (normed) {
                    double kg = 0, kgb = 0, rk2 = rkj * rkj;
                    for (int d = 0; d < D; d++) { kg += kj[d] * G[d]; kgb += fabs(kj[d]) * Gb[d]; }
                    for (int d = 0; d < D; d++) {
                        double g = G[d] - kj[d] * rk2 * kg;
                        O->dk[ko + d] = g;
                        O->dkb[ko + d] = Gb[d] + fabs(kj[d]) * rk2 * kgb +
                                         4 * REF_U32 * (fabs(G[d]) + fabs(kj[d] * rk2 * kg)) + sb * fabs(g);
                        O->dks[ko + d] = Gs[d] + sb * fabs(g);   /* Gs is already projected */
                    }
                } else {
                    for (int d = 0; d < D; d++) {
                        O->dk[ko + d] = G[d];
                        O->dkb[ko + d] = Gb[d] + sb * fabs(G[d]);
                        O->dks[ko + d] = Gs[d] + sb * fabs(G[d]);
                    }
                }
                for (int d = 0; d < D; d++) {
                    O->dv[ko + d] = dv[d];
                    O->dvb[ko + d] = eps_v * dvb[d] + sb * fabs(dv[d]);
                    O->dvs[ko + d] = ub * sqrt(Vv[d]) + sb * fabs(dv[d]);
                }
            }
            free(acc);
        }
        if (ref_is_ssmax(A->kind) && O->ds)
            for (int h = 0; h < H; h++) {
                double s = 0, sbnd = 0, sv = 0, sa = 0;
                for (int b = 0; b < B; b++)
                    for (int i = 0; i < T; i++) {
                        size_t idx = ((size_t)b * H + h) * T + i;
                        s += rds[4 * idx]; sbnd += rds[4 * idx + 1]; sv += rds[4 * idx + 2]; sa += rds[4 * idx + 3];
                    }
                O->ds[h] = s; O->dsb[h] = sbnd; O->dss[h] = sqrt(sv); O->dsabs[h] = sa;
            }
    }
    free(rows); free(rk); free(rds);
    return oom ? -1 : 0;
}

#endif
