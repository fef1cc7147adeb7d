/*
 * attn_ref.h - the float64 attention reference written straight from docs/attention.md, the input
 * families (random, peaked rows, zero vectors, repeated keys, large magnitudes) and the error
 * measures, shared by tests/test_attention.c (the CPU kernels) and tests/test_flash.c (the
 * emulation of the fused GPU kernels). Include after harness.h.
 *
 * Error measure (whole tensors): rel = ||got - ref||_2 / ||ref||_2; when ||ref|| is exactly 0
 * (e.g. dq at T = 1) the check is ||got||_2 <= 1e-6 * sqrt(N) instead; rel_err_floor takes a
 * floor for the denominator (test_attention.c explains the dq / dk floors).
 */
#ifndef LSSAR_TESTS_ATTN_REF_H
#define LSSAR_TESTS_ATTN_REF_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "lssar.h"
#include "core/util.h"

// Every function here is static; a test that does not use one must not warn about it.
#define ATTN_REF_FN static __attribute__((unused))

// ------------------------------------------------------------------ float64 reference

// kind: any lssar_attn_kind; the reference follows its stages (lssar_attn_stages_of), written
// straight from docs/attention.md "Stages". len_norm, L: norm len (sigmoid / relu) only
// (lssar_len_norm; L the training length for LSSAR_LEN_NORM_TRAIN). temp_d: score cos, the D of the
// ln(D) ln(n) temperature (0: the head size).
typedef struct { int kind; double p; const double *s; int len_norm; int L; int temp_d; } ref_desc;

// The relative error bound of the comparisons: the spec's 1e-4, which holds at the paper's
// p = 15; a larger power amplifies the relative error of u p-fold (docs/attention.md), so the
// bound grows with it.
ATTN_REF_FN double attn_ref_tol(double p) { return 1e-4 * fmax(1.0, p / 15.0); }

// The training length the comparisons give sigmoid / relu with len_norm train: below most of the
// grid's T, so rows beyond L (the extrapolation regime) are tested too.
#define ATTN_REF_TRAIN_LEN 64

ATTN_REF_FN lssar_attn_stages ref_stages(int kind) {
    lssar_attn_stages st = {0};
    lssar_attn_stages_of((lssar_attn_kind)kind, &st);
    return st;
}
ATTN_REF_FN int ref_unnormed(int kind) { return ref_stages(kind).norm == LSSAR_NORM_LEN; }
ATTN_REF_FN int ref_cos(int kind) { return ref_stages(kind).score == LSSAR_SCORE_COS; }
ATTN_REF_FN int ref_ssmax(int kind) { return ref_stages(kind).score == LSSAR_SCORE_SSMAX; }

#define IDX(b, t, h, d) ((((size_t)(b) * T + (t)) * H + (h)) * D + (d))

// g_j - sum_k w_k g_k for weights summing to 1, written as sum_k w_k (g_j - g_k) so that a
// one-hot w does not cancel the result away (the float64 reference must stay accurate on peaked
// rows, where the true value is many orders below g_j).
ATTN_REF_FN double centred(const double *w, const double *g, int n, int j) {
    double r = 0;
    for (int k = 0; k < n; k++) r += w[k] * (g[j] - g[k]);
    return r;
}

// The same for every j at once in O(n), for long rows (ref_backward_ex with fast = 1): centred on
// g_m, m = argmax_k w_k, as sum_k w_k (g_j - g_k) = (g_j - g_m) - sum_k w_k (g_k - g_m), exact in
// real arithmetic; the m term of the sum is exactly 0, so a one-hot w keeps its accuracy too.
ATTN_REF_FN void centred_all(const double *w, const double *g, int n, double *out) {
    int m = 0;
    for (int k = 1; k < n; k++)
        if (w[k] > w[m]) m = k;
    double s = 0;
    for (int k = 0; k < n; k++) s += w[k] * (g[k] - g[m]);
    for (int j = 0; j < n; j++) out[j] = (g[j] - g[m]) - s;
}

ATTN_REF_FN double softplus(double x) { return fmax(x, 0.0) + log1p(exp(-fabs(x))); }
ATTN_REF_FN double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

// One row i of head (b, h): the weights w (length n = i + 1) and what the backward needs.
typedef struct {
    double *qh, *kh;   // l2-normalised q_i (D) and k_j (T x D) for lssa/lssar
    double *x, *a, *alpha, *u, *beta, *w, *dot;
    double z, lam, sc, qn;   // sigmoid / relu: lam = the row's L (train length or n)
    int fallback;
} ref_row;

ATTN_REF_FN void ref_row_forward(const ref_desc *rd, int B, int T, int H, int D, const double *q,
                            const double *k, int b, int h, int i, ref_row *R) {
    int n = i + 1;
    for (int j = 0; j < n; j++) {
        double dot = 0;
        for (int d = 0; d < D; d++) dot += q[IDX(b, i, h, d)] * k[IDX(b, j, h, d)];
        R->dot[j] = dot;
    }
    lssar_attn_stages st = ref_stages(rd->kind);
    if (st.norm == LSSAR_NORM_LEN) {  // no row normalisation: the weight is f(x) itself
        R->sc = 1.0 / sqrt((double)D);
        R->lam = rd->len_norm == LSSAR_LEN_NORM_ROW ? (double)n : (double)rd->L;
        for (int j = 0; j < n; j++) {
            if (st.phi == LSSAR_PHI_SIGMOID) {
                R->x[j] = R->sc * R->dot[j] - log(R->lam);
                R->w[j] = sigmoid(R->x[j]);
            } else {
                R->x[j] = R->sc * R->dot[j];
                R->w[j] = fmax(R->x[j], 0.0) / R->lam;
            }
        }
        return;
    }
    // the score: x = sc q . k (dot, ssmax) or lam q^ . k^ (cos)
    if (st.score == LSSAR_SCORE_COS) {
        double qn = 0;
        for (int d = 0; d < D; d++) qn += q[IDX(b, i, h, d)] * q[IDX(b, i, h, d)];
        R->qn = fmax(sqrt(qn), 1e-12);
        for (int d = 0; d < D; d++) R->qh[d] = q[IDX(b, i, h, d)] / R->qn;
        R->lam = log((double)(rd->temp_d > 0 ? rd->temp_d : D)) * log((double)n);
        for (int j = 0; j < n; j++) {
            double c = 0;
            for (int d = 0; d < D; d++) c += R->qh[d] * R->kh[j * D + d];
            R->x[j] = R->lam * c;
        }
    } else {
        R->sc = 1.0 / sqrt((double)D);
        if (st.score == LSSAR_SCORE_SSMAX) R->sc *= rd->s[h] * log((double)n);
        for (int j = 0; j < n; j++) R->x[j] = R->sc * R->dot[j];
    }
    // phi (exp shifted by the row maximum, which alpha does not see), l1
    double m = -INFINITY;
    for (int j = 0; j < n; j++) m = fmax(m, R->x[j]);
    R->z = 0;
    for (int j = 0; j < n; j++) {
        R->a[j] = st.phi == LSSAR_PHI_EXP ? exp(R->x[j] - m) : softplus(R->x[j]);
        R->z += R->a[j];
    }
    for (int j = 0; j < n; j++) R->alpha[j] = R->a[j] / R->z;
    R->fallback = 0;
    if (!st.reweight) { for (int j = 0; j < n; j++) R->w[j] = R->alpha[j]; return; }
    double o = i < 3 ? 0 : 1, sb = 0;
    for (int j = 0; j < n; j++) {
        R->u[j] = n * R->alpha[j] - o;
        R->beta[j] = pow(fmax(R->u[j], 0.0), rd->p);
        sb += R->beta[j];
    }
    // sum b == 0 exactly when the alpha row is uniform (i >= 3). Test that directly: on a uniform
    // row n * alpha_j - 1 is rounding noise of either sign, even in float64.
    int uniform = i >= 3;
    for (int j = 1; j < n && uniform; j++) uniform = R->a[j] == R->a[0];
    R->fallback = sb == 0 || uniform;
    for (int j = 0; j < n; j++) R->w[j] = R->fallback ? R->alpha[j] : R->beta[j] / sb;
}

ATTN_REF_FN ref_row *ref_row_new(int T, int D) {
    ref_row *R = calloc(1, sizeof *R);
    R->qh = calloc(D, sizeof(double)); R->kh = calloc((size_t)T * D, sizeof(double));
    double **f[] = {&R->x, &R->a, &R->alpha, &R->u, &R->beta, &R->w, &R->dot};
    for (int i = 0; i < 7; i++) *f[i] = calloc(T, sizeof(double));
    return R;
}
ATTN_REF_FN void ref_row_free(ref_row *R) {
    double *f[] = {R->qh, R->kh, R->x, R->a, R->alpha, R->u, R->beta, R->w, R->dot};
    for (int i = 0; i < 9; i++) free(f[i]);
    free(R);
}

ATTN_REF_FN void ref_keys(int B, int T, int H, int D, const double *k, int b, int h, double *kh) {
    for (int j = 0; j < T; j++) {
        double kn = 0;
        for (int d = 0; d < D; d++) kn += k[IDX(b, j, h, d)] * k[IDX(b, j, h, d)];
        kn = fmax(sqrt(kn), 1e-12);
        for (int d = 0; d < D; d++) kh[j * D + d] = k[IDX(b, j, h, d)] / kn;
    }
}

ATTN_REF_FN void ref_forward(const ref_desc *rd, int B, int T, int H, int D, const double *q,
                        const double *k, const double *v, double *out) {
    // heads are independent: one per thread (only to keep the test quick)
#pragma omp parallel for schedule(dynamic, 1)
    for (int h = 0; h < H; h++) {
        ref_row *R = ref_row_new(T, D);
        for (int b = 0; b < B; b++) {
            ref_keys(B, T, H, D, k, b, h, R->kh);
            for (int i = 0; i < T; i++) {
                ref_row_forward(rd, B, T, H, D, q, k, b, h, i, R);
                for (int d = 0; d < D; d++) {
                    double y = 0;
                    for (int j = 0; j <= i; j++) y += R->w[j] * v[IDX(b, j, h, d)];
                    out[IDX(b, i, h, d)] = y;
                }
            }
        }
        ref_row_free(R);
    }
}

// gamma_K = K u / (1 - K u), u = 2^-24: the classic bound on the relative error of K float32
// operations in sequence (Higham, "Accuracy and Stability of Numerical Algorithms", 3.1).
ATTN_REF_FN double gamma_f32(double K) { double u = 0x1p-24; return K * u / (1 - K * u); }

// Row i's share of the float32 rounding error bound of the ssmax gradient
// ds_h = sum_ij dx_ij t_ij, t_ij = ln(n_i) S_ij / sqrt(D), dx_ij = w_ij (dw_ij - d_i),
// d_i = sum_k w_ik dw_ik. First order in the unit roundoff u = 2^-24, with e(x) the error of x
// and, for a row, the exact centred forms (sum_k w_k = 1):
//   S_j, dw_j are length-D dot products (sgemm): |e(S_j)| <= g_D Sabs_j, Sabs_j = sum_d |q_d k_jd|;
//     |e(dw_j)| <= g_D Wabs_j, Wabs_j = sum_d |dy_d v_jd|;
//   G_j = sum_k w_k |dw_j - dw_k| bounds |dw_j - d| (so |dx_j| <= w_j G_j);
//   the logit error sc e(S) moves the softmax weights by
//     e(w_j) = w_j ((1 - w_j) e(x_j) - sum_{k != j} w_k e(x_k)),
//     so |e(w_j)| <= w_j sc g_D ((1 - w_j) Sabs_j + sum_{k != j} w_k Sabs_k) =: ew_j,
//     and d by at most sum_k ew_k G_k =: ed (sum_k e(w_k) = 0, so the sum is centred);
//   dw's error enters dx_j as w_j (e(dw_j) - sum_k w_k e(dw_k)):
//     at most w_j g_D ((1 - w_j) Wabs_j + sum_{k != j} w_k Wabs_k);
//   exp (2 ulp), the products and the double row sums add g_16 relative to each term.
// So |e(dx_j)| <= ew_j G_j + w_j ed + (the dw term) + g_16 w_j G_j, and
// |e(dx_j t_j)| <= e_ij = |e(dx_j)| |t_j| + w_j G_j g_D Sabs_j ln(n)/sqrt(D),
// where g_K = gamma_K (gamma_f32). Returns sum_j e_ij; summed over (b, i) it bounds |e(ds_h)|.
// It is a worst case (every rounding error at its bound, with one sign): up to 30% of |ds| on the
// large inputs at D >= 64, 1e-4..1e-3 of it on the FD test's small ones, while the measured
// errors stay below 5e-5 of |ds|.
// fast = 1 (long rows): G_j <= |dw_j - d| + sum_k w_k |dw_k - d| (triangle inequality through
// d = sum_k w_k dw_k), O(n) instead of O(n^2); a larger, still valid bound.
ATTN_REF_FN double ds_error_bound_ex(int B, int T, int H, int D, const double *q, const double *k,
                                const double *v, const double *dy, int b, int h, int i, const ref_row *R,
                                const double *dw, int fast) {
    int n = i + 1;
    double gD = gamma_f32(D), g16 = gamma_f32(16);
    double sc = fabs(R->sc), f = log((double)n) / sqrt((double)D), ed = 0, e = 0;
    double *sabs = malloc(4 * n * sizeof(double)), *wabs = sabs + n, *G = wabs + n, *ew = G + n;
    for (int j = 0; j < n; j++) {
        sabs[j] = wabs[j] = 0;
        for (int d = 0; d < D; d++) {
            sabs[j] += fabs(q[IDX(b, i, h, d)] * k[IDX(b, j, h, d)]);
            wabs[j] += fabs(dy[IDX(b, i, h, d)] * v[IDX(b, j, h, d)]);
        }
    }
    double dmean = 0, gmean = 0, sall = 0, wall = 0;
    if (fast) {
        for (int k2 = 0; k2 < n; k2++) dmean += R->w[k2] * dw[k2];
        for (int k2 = 0; k2 < n; k2++) {
            gmean += R->w[k2] * fabs(dw[k2] - dmean);
            sall += R->w[k2] * sabs[k2];
            wall += R->w[k2] * wabs[k2];
        }
    }
    for (int j = 0; j < n; j++) {
        double so = 0, wo = 0;  // sums over k != j
        G[j] = 0;
        if (fast) {
            G[j] = fabs(dw[j] - dmean) + gmean;
            so = sall - R->w[j] * sabs[j];
            wo = wall - R->w[j] * wabs[j];
        } else {
            for (int k2 = 0; k2 < n; k2++) {
                G[j] += R->w[k2] * fabs(dw[j] - dw[k2]);
                if (k2 != j) { so += R->w[k2] * sabs[k2]; wo += R->w[k2] * wabs[k2]; }
            }
        }
        double om = 1 - R->w[j];
        ew[j] = R->w[j] * sc * gD * (om * sabs[j] + so);
        wabs[j] = R->w[j] * gD * (om * wabs[j] + wo);  // now: dw's contribution to e(dx_j)
        ed += ew[j] * G[j];
    }
    for (int j = 0; j < n; j++) {
        double edx = ew[j] * G[j] + R->w[j] * ed + wabs[j] + g16 * R->w[j] * G[j];
        double eij = f * (edx * fabs(R->dot[j]) + R->w[j] * G[j] * gD * sabs[j]);
        e += eij;
    }
    free(sabs);
    return e;
}

ATTN_REF_FN double ds_error_bound(int B, int T, int H, int D, const double *q, const double *k,
                             const double *v, const double *dy, int b, int h, int i, const ref_row *R,
                             const double *dw) {
    return ds_error_bound_ex(B, T, H, D, q, k, v, dy, b, h, i, R, dw, 0);
}

// The backward of docs/attention.md, row by row. For ssmax, dserr (may be NULL) receives per head
// the bound on the float32 rounding error of ds (ds_error_bound). fast = 1: the O(n) forms of
// centred_all and ds_error_bound_ex for long rows (the default, ref_backward, is O(n^2) per row).
ATTN_REF_FN void ref_backward_ex(const ref_desc *rd, int B, int T, int H, int D, const double *q,
                         const double *k, const double *v, const double *dy, double *dq,
                         double *dk, double *dv, double *ds, double *dserr, int fast) {
    size_t N = (size_t)B * T * H * D;
    memset(dq, 0, N * sizeof(double)); memset(dk, 0, N * sizeof(double)); memset(dv, 0, N * sizeof(double));
    if (ds) for (int h = 0; h < H; h++) ds[h] = 0;
    if (dserr) for (int h = 0; h < H; h++) dserr[h] = 0;
#pragma omp parallel for schedule(dynamic, 1)
    for (int h = 0; h < H; h++) {
    ref_row *R = ref_row_new(T, D);
    double *dw = calloc(T, sizeof(double)), *dal = calloc(T, sizeof(double)), *dc = calloc(T, sizeof(double));
    double *dkh = calloc((size_t)T * D, sizeof(double)), *dqh = calloc(D, sizeof(double));
    double *cw = calloc(T, sizeof(double)), *ca = calloc(T, sizeof(double));  // fast: centred_all
        for (int b = 0; b < B; b++) {
            ref_keys(B, T, H, D, k, b, h, R->kh);
            memset(dkh, 0, (size_t)T * D * sizeof(double));
            for (int i = 0; i < T; i++) {
                int n = i + 1;
                ref_row_forward(rd, B, T, H, D, q, k, b, h, i, R);
                for (int j = 0; j < n; j++) {
                    dw[j] = 0;
                    for (int d = 0; d < D; d++) {
                        dv[IDX(b, j, h, d)] += R->w[j] * dy[IDX(b, i, h, d)];
                        dw[j] += dy[IDX(b, i, h, d)] * v[IDX(b, j, h, d)];
                    }
                }
                lssar_attn_stages st = ref_stages(rd->kind);
                if (st.norm == LSSAR_NORM_LEN) {
                    // sigmoid: dx = da s(x) s(-x) (not s (1 - s): no cancellation at large x);
                    // relu: dx = da / L where x > 0, else 0 (the kink included)
                    for (int j = 0; j < n; j++) {
                        double x = R->x[j];
                        double dx = st.phi == LSSAR_PHI_SIGMOID ? dw[j] * sigmoid(x) * sigmoid(-x)
                                                                : (x > 0 ? dw[j] / R->lam : 0.0);
                        for (int d = 0; d < D; d++) {
                            dq[IDX(b, i, h, d)] += dx * R->sc * k[IDX(b, j, h, d)];
                            dk[IDX(b, j, h, d)] += dx * R->sc * q[IDX(b, i, h, d)];
                        }
                    }
                    continue;
                }
                if (dserr && rd->kind == LSSAR_ATTN_SSMAX)
                    dserr[h] += ds_error_bound_ex(B, T, H, D, q, k, v, dy, b, h, i, R, dw, fast);
                // the re-weighting: dalpha_j = n p / u_j beta_j (dbeta_j - D1), D1 = sum beta dbeta
                if (st.reweight && !R->fallback) {
                    if (fast) centred_all(R->w, dw, n, cw);
                    for (int j = 0; j < n; j++) {
                        double cj = fast ? cw[j] : centred(R->w, dw, n, j);
                        double du = R->u[j] > 0 ? (rd->p / R->u[j]) * R->w[j] * cj : 0;
                        dal[j] = n * du;
                    }
                } else {
                    for (int j = 0; j < n; j++) dal[j] = dw[j];
                }
                // l1 and phi: dx_j = (dalpha_j - D2) phi'(x_j) / Z, D2 = sum alpha dalpha
                // (exp: phi' / Z = alpha); the score: dc = lam dx (cos), dS = sc dx
                if (fast) centred_all(R->alpha, dal, n, ca);
                for (int j = 0; j < n; j++) {
                    double cj = fast ? ca[j] : centred(R->alpha, dal, n, j);
                    dc[j] = st.phi == LSSAR_PHI_EXP ? R->alpha[j] * cj : cj / R->z * sigmoid(R->x[j]);
                }
                if (st.score != LSSAR_SCORE_COS) {
                    for (int j = 0; j < n; j++) {
                        double dx = dc[j];
                        for (int d = 0; d < D; d++) {
                            dq[IDX(b, i, h, d)] += dx * R->sc * k[IDX(b, j, h, d)];
                            dk[IDX(b, j, h, d)] += dx * R->sc * q[IDX(b, i, h, d)];
                        }
                        if (ds && st.score == LSSAR_SCORE_SSMAX)
                            ds[h] += dx * log((double)n) * R->dot[j] / sqrt((double)D);
                        if (dserr && st.score == LSSAR_SCORE_SSMAX && rd->kind != LSSAR_ATTN_SSMAX) {
                            // first order, term by term: dx to (D + 16) roundings (its products and
                            // row sums), amplified p-fold by the re-weighting, times |t| with t's
                            // own error (the D products of S)
                            double sabs = 0;
                            for (int d = 0; d < D; d++) sabs += fabs(q[IDX(b, i, h, d)] * k[IDX(b, j, h, d)]);
                            double amp = st.reweight ? 1 + rd->p : 1;
                            dserr[h] += gamma_f32(D + 16) * amp * fabs(dx) * log((double)n) * (fabs(R->dot[j]) + sabs)
                                        / sqrt((double)D);
                        }
                    }
                    continue;
                }
                for (int j = 0; j < n; j++) dc[j] *= R->lam;
                memset(dqh, 0, D * sizeof(double));
                for (int j = 0; j < n; j++)
                    for (int d = 0; d < D; d++) {
                        dqh[d] += dc[j] * R->kh[j * D + d];
                        dkh[j * D + d] += dc[j] * R->qh[d];
                    }
                double qd = 0;
                for (int d = 0; d < D; d++) qd += R->qh[d] * dqh[d];
                for (int d = 0; d < D; d++) dq[IDX(b, i, h, d)] = (dqh[d] - R->qh[d] * qd) / R->qn;
            }
            if (ref_cos(rd->kind))
                for (int j = 0; j < T; j++) {
                    double kn = 0, kd = 0;
                    for (int d = 0; d < D; d++) kn += k[IDX(b, j, h, d)] * k[IDX(b, j, h, d)];
                    kn = fmax(sqrt(kn), 1e-12);
                    for (int d = 0; d < D; d++) kd += R->kh[j * D + d] * dkh[j * D + d];
                    for (int d = 0; d < D; d++)
                        dk[IDX(b, j, h, d)] = (dkh[j * D + d] - R->kh[j * D + d] * kd) / kn;
                }
        }
    free(dw); free(dal); free(dc); free(dkh); free(dqh); free(cw); free(ca);
    ref_row_free(R);
    }
}

ATTN_REF_FN void ref_backward(const ref_desc *rd, int B, int T, int H, int D, const double *q,
                         const double *k, const double *v, const double *dy, double *dq,
                         double *dk, double *dv, double *ds, double *dserr) {
    ref_backward_ex(rd, B, T, H, D, q, k, v, dy, dq, dk, dv, ds, dserr, 0);
}

// ------------------------------------------------------------------ helpers

ATTN_REF_FN double norm2(const double *x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += x[i] * x[i];
    return sqrt(s);
}

// ||got - ref|| / max(||ref||, floor); see the header.
ATTN_REF_FN double rel_err_floor(const float *got, const double *ref, size_t n, double floor) {
    double num = 0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)got[i] - ref[i];
        num += e * e;
    }
    num = sqrt(num);
    double den = fmax(norm2(ref, n), floor);
    if (!isfinite(num)) return INFINITY;
    if (den == 0) return num <= 1e-6 * sqrt((double)n) ? 0 : INFINITY;
    return num / den;
}
ATTN_REF_FN double rel_err_fd(const float *got, const double *ref, size_t n) { return rel_err_floor(got, ref, n, 0); }

ATTN_REF_FN double *to_double(const float *x, size_t n) {
    double *y = malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) y[i] = x[i];
    return y;
}

#define kind_name(kind) lssar_attn_name((lssar_attn_kind)(kind))
ATTN_REF_FN const char *len_norm_name[] = {"train", "row"};

enum { IN_RANDOM, IN_PEAKED, IN_ZEROS, IN_REPEATED, IN_LARGE, IN_COUNT };
ATTN_REF_FN const char *input_name[] = {"random", "peaked", "zero-vectors", "repeated-keys", "large"};

// Fill q, k, v (B, T, H, D) with one of the input families.
ATTN_REF_FN void make_inputs(int family, uint64_t seed, int B, int T, int H, int D, float *q, float *k, float *v,
                        float *dy, int kind) {
    lssar_rng r;
    lssar_rng_seed(&r, seed);
    size_t N = (size_t)B * T * H * D;
    for (size_t i = 0; i < N; i++) {
        q[i] = (float)lssar_rng_normal(&r);
        k[i] = (float)lssar_rng_normal(&r);
        v[i] = (float)lssar_rng_normal(&r);
        dy[i] = (float)lssar_rng_normal(&r);
    }
    int normed = ref_cos(kind);
    switch (family) {
    case IN_PEAKED:  // each query row equals one earlier key, scaled up: a dominant score
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                for (int i = 0; i < T; i++) {
                    int j = (int)lssar_rng_below(&r, (uint64_t)i + 1);
                    for (int d = 0; d < D; d++) q[IDX(b, i, h, d)] = 3.0f * k[IDX(b, j, h, d)];
                }
        break;
    case IN_ZEROS:  // every third query and every fourth key is the zero vector
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                for (int t = 0; t < T; t++)
                    for (int d = 0; d < D; d++) {
                        if (t % 3 == 1) q[IDX(b, t, h, d)] = 0;
                        if (t % 4 == 2) k[IDX(b, t, h, d)] = 0;
                    }
        break;
    case IN_REPEATED:  // head 0: all keys identical (uniform rows: the lssar fallback);
                       // other heads: keys repeat in runs of 3
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                for (int t = 0; t < T; t++) {
                    int src = h == 0 ? 0 : t - t % 3;
                    for (int d = 0; d < D; d++) k[IDX(b, t, h, d)] = k[IDX(b, src, h, d)];
                }
        break;
    case IN_LARGE:  // large magnitudes: softmax logits of tens, lssa inputs of 1e6
        for (size_t i = 0; i < N; i++) {
            float sq = normed ? 1e6f : 2.5f, sv = 1e3f;
            q[i] *= sq; k[i] *= sq; v[i] *= sv;
        }
        break;
    }
}

// The relative errors of one comparison (see the error measure above).
typedef struct { double out, dq, dk, dv, ds; } errs;

ATTN_REF_FN double worst(errs e) {
    double m = fmax(fmax(e.out, e.dq), fmax(e.dk, e.dv));
    return fmax(m, e.ds);
}

// An attention implementation under test: out, dq, dk, dv (B, T, H, D) and ds (H, SSMax) from
// q, k, v, dy; 0 or an error.
typedef int (*attn_impl)(const lssar_attn_desc *a, int B, int T, int H, int D, const float *q,
                         const float *k, const float *v, const float *dy, float *out, float *dq,
                         float *dk, float *dv, float *ds);
enum {
    CMP_FAST_REF = 1,   // T > 512: the reference's O(n) centred forms (ref_backward_ex fast)
    CMP_DS_ROUNDING = 2 // ds within 1e-4 relative OR within the float32 rounding bound of its sum
};

// Run impl and the float64 reference on one configuration of an input family; return the
// relative errors (whole tensors; dq and dk with the floors of the error measure above).
// len_norm, L: sigmoid / relu (compare_impl: train with L = ATTN_REF_TRAIN_LEN).
// temp_d: lssa / lssar temperature's D, given to the kernel (a->temp_d) and to the reference
// (ref_temp_d: another value makes a negative control).
ATTN_REF_FN errs compare_impl_x(attn_impl impl, int flags, int kind, float p, int family, uint64_t seed,
                                int B, int T, int H, int D, int len_norm, int L, int temp_d, int ref_temp_d) {
    size_t N = (size_t)B * T * H * D;
    float *q = malloc(N * 4), *k = malloc(N * 4), *v = malloc(N * 4), *dy = malloc(N * 4);
    float *out = malloc(N * 4), *dq = malloc(N * 4), *dk = malloc(N * 4), *dv = malloc(N * 4);
    float s[16], ds[16];
    double sd[16], dsr[16], dserr[16];
    make_inputs(family, seed, B, T, H, D, q, k, v, dy, kind);
    for (int h = 0; h < H; h++) { s[h] = 0.43f + 0.2f * h; sd[h] = s[h]; }
    lssar_attn_desc a = {.kind = kind, .p = p, .ssmax_s = ref_ssmax(kind) ? s : NULL,
                         .len_norm = (lssar_len_norm)len_norm, .train_len = L, .temp_d = temp_d};
    ref_desc rd = {.kind = kind, .p = p, .s = sd, .len_norm = len_norm, .L = L, .temp_d = ref_temp_d};
    errs e = {INFINITY, INFINITY, INFINITY, INFINITY, 0};
    int rc = impl(&a, B, T, H, D, q, k, v, dy, out, dq, dk, dv, ds);
    CHECK(rc == 0, "%s failed: %d %s", kind_name(kind), rc, lssar_errmsg());
    double *qd = to_double(q, N), *kd = to_double(k, N), *vd = to_double(v, N), *dyd = to_double(dy, N);
    double *ro = malloc(N * 8), *rdq = malloc(N * 8), *rdk = malloc(N * 8), *rdv = malloc(N * 8);
    ref_forward(&rd, B, T, H, D, qd, kd, vd, ro);
    ref_backward_ex(&rd, B, T, H, D, qd, kd, vd, dyd, rdq, rdk, rdv, dsr,
                    (flags & CMP_DS_ROUNDING) || (ref_ssmax(kind) && kind != LSSAR_ATTN_SSMAX) ? dserr : NULL,
                    (flags & CMP_FAST_REF) && T > 512);
    e.out = rel_err_fd(out, ro, N);
    double rq = norm2(qd, N), rk = norm2(kd, N);
    // The re-weighting keeps weights down to FLT_MIN of the row's largest (b = (u / u_max)^p in
    // float32): gradients that only such weights carry (a peaked softmax row re-weighted is
    // one-hot up to e^-60 weights) are 0 in float32. Below 1e-20 of the scale |dy| |v| |k|
    // (|q|) a gradient is such a remnant, far under any error of a wrong formula.
    double g = norm2(dyd, N) * norm2(vd, N) / sqrt((double)N);
    double fq = fmax(rq > 0 ? 1e-2 * norm2(rdk, N) * rk / rq : 0, 1e-20 * g * rk);
    double fk = fmax(rk > 0 ? 1e-2 * norm2(rdq, N) * rq / rk : 0, 1e-20 * g * rq);
    e.dq = rel_err_floor(dq, rdq, N, fq);
    e.dk = rel_err_floor(dk, rdk, N, fk);
    e.dv = rel_err_fd(dv, rdv, N);
    if (kind == LSSAR_ATTN_SSMAX)  // the bound of ds_error_bound is softmax's
        e.ds = flags & CMP_DS_ROUNDING ? rel_err_floor(ds, dsr, H, 1e4 * norm2(dserr, H)) : rel_err_fd(ds, dsr, H);
    else if (ref_ssmax(kind))  // 1e-4 relative or within the term-by-term bound of ref_backward_ex,
        // or below the remnant level of dq and dk (ds ~ dx q . k)
        e.ds = rel_err_floor(ds, dsr, H, fmax(1e4 * norm2(dserr, H), 1e-20 * g * rq * rk));
    free(q); free(k); free(v); free(dy); free(out); free(dq); free(dk); free(dv);
    free(qd); free(kd); free(vd); free(dyd); free(ro); free(rdq); free(rdk); free(rdv);
    return e;
}

ATTN_REF_FN errs compare_impl_ln(attn_impl impl, int flags, int kind, float p, int family, uint64_t seed,
                                 int B, int T, int H, int D, int len_norm, int L) {
    return compare_impl_x(impl, flags, kind, p, family, seed, B, T, H, D, len_norm, L, 0, 0);
}

ATTN_REF_FN errs compare_impl(attn_impl impl, int flags, int kind, float p, int family, uint64_t seed,
                              int B, int T, int H, int D) {
    return compare_impl_ln(impl, flags, kind, p, family, seed, B, T, H, D, LSSAR_LEN_NORM_TRAIN, ATTN_REF_TRAIN_LEN);
}

// lssa / lssar with the temperature of another head size (temp_d), through impl at length T: it
// matches the float64 reference of that temperature (forward and backward), and not the one of its
// own head size (an implementation that ignored temp_d fails here).
ATTN_REF_FN void check_temp_d(attn_impl impl, int flags, int T, uint64_t seed0) {
    static const int Ds[] = {16, 64}, temps[] = {2, 8, 64, 256};
    for (int kind = LSSAR_ATTN_LSSA; kind <= LSSAR_ATTN_LSSAR; kind++)
        for (int di = 0; di < 2; di++)
            for (int ti = 0; ti < 4; ti++)
                for (int fam = IN_RANDOM; fam <= IN_PEAKED; fam++) {
                    int D = Ds[di], td = temps[ti];
                    float p = kind == LSSAR_ATTN_LSSAR && ti % 2 ? 3.0f : 15.0f;
                    uint64_t seed = seed0 + 100 * di + 10 * ti + fam;
                    errs e = compare_impl_x(impl, flags, kind, p, fam, seed, 2, T, 2, D, 0, 0, td, td);
                    CHECK(worst(e) < 1e-4, "%s D=%d temp_d=%d %s: rel err out %.2e dq %.2e dk %.2e dv %.2e",
                          kind_name(kind), D, td, input_name[fam], e.out, e.dq, e.dk, e.dv);
                    if (td == D || fam != IN_RANDOM) continue;
                    errs n = compare_impl_x(impl, flags, kind, p, fam, seed, 2, T, 2, D, 0, 0, td, 0);
                    CHECK(n.out > 1e-3, "%s D=%d temp_d=%d: it matches the head size's temperature (%.2e)",
                          kind_name(kind), D, td, n.out);
                }
}

/* Non-finite inputs: NaN, +inf or -inf in one element (head 0, channel 1, at position 1 or 70 of
   T = 130: three 64-row tiles) of q, k or v, for every kind, through impl's forward and backward.
   - The call succeeds. NaN in q (and +-inf in q for lssa / lssar, whose norm then makes every
     logit NaN) leaves the row without an argmax, for which the fused kernels once read v at row
     -1 or INT_MAX (a crash; sanitizer builds also see the read before the buffer).
   - NaN: every output row that sees the element is NaN (all D values; for v, channel 1), since a
     finite row would hide the fault from the loss (relu's x > 0 test and lssar's (u / u_max)^p >
     FLT_MIN once dropped it); and the gradients hold a NaN.
   - Rows that cannot see the element keep the bits of the clean run: for q every other row, for k
     and v the rows before the element's 64-row tile (inside it the products multiply the masked
     rows' zero weights by v, as a GEMM does). */
ATTN_REF_FN void check_nonfinite(attn_impl impl) {
    enum { B = 1, T = 130, H = 2, D = 16 };
    static const int pos[2] = {1, 70};
    static const char *tname[3] = {"q", "k", "v"};
    const float vals[3] = {NAN, INFINITY, -INFINITY};
    size_t N = (size_t)B * T * H * D;
    float *clean[3], *in[3], *dy = malloc(N * 4), *out0 = malloc(N * 4), *out = malloc(N * 4);
    float *g[3], s[H], ds[H];
    for (int t = 0; t < 3; t++) { clean[t] = malloc(N * 4); in[t] = malloc(N * 4); g[t] = malloc(N * 4); }
    for (int kind = 0; kind < LSSAR_ATTN_NKINDS; kind++) {
        make_inputs(IN_RANDOM, 8100 + kind, B, T, H, D, clean[0], clean[1], clean[2], dy, kind);
        for (int h = 0; h < H; h++) s[h] = 0.43f + 0.2f * h;
        lssar_attn_desc a = {.kind = kind, .p = 15.0f, .ssmax_s = ref_ssmax(kind) ? s : NULL,
                             .len_norm = LSSAR_LEN_NORM_TRAIN, .train_len = ATTN_REF_TRAIN_LEN};
        int rc = impl(&a, B, T, H, D, clean[0], clean[1], clean[2], dy, out0, g[0], g[1], g[2], ds);
        CHECK(rc == 0, "%s: the clean run failed: %s", kind_name(kind), lssar_errmsg());
        for (int pi = 0; pi < 2; pi++)
            for (int ti = 0; ti < 3; ti++)
                for (int vi = 0; vi < 3; vi++) {
                    int t0 = pos[pi];
                    for (int t = 0; t < 3; t++) memcpy(in[t], clean[t], N * 4);
                    in[ti][IDX(0, t0, 0, 1)] = vals[vi];
                    rc = impl(&a, B, T, H, D, in[0], in[1], in[2], dy, out, g[0], g[1], g[2], ds);
                    CHECK(rc == 0, "%s, %s[%d] = %g: failed: %s", kind_name(kind), tname[ti], t0, vals[vi], lssar_errmsg());
                    int changed = 0, finite_seen = 0, grad_nan = 0;
                    for (int t = 0; t < T; t++)
                        for (int h = 0; h < H; h++) {
                            const float *o = out + IDX(0, t, h, 0), *o0 = out0 + IDX(0, t, h, 0);
                            int sees = h == 0 && (ti == 0 ? t == t0 : t >= t0);
                            int apart = h != 0 || (ti == 0 ? t != t0 : t < t0 / 64 * 64);
                            if (apart) changed += memcmp(o, o0, D * 4) != 0;
                            if (sees && vi == 0)  // (v's channel 1 reaches only channel 1 of y)
                                for (int d = 0; d < D; d++) finite_seen += (ti < 2 || d == 1) && !isnan(o[d]);
                        }
                    for (int t = 0; t < 3; t++)
                        for (size_t i = 0; i < N; i++) grad_nan += isnan(g[t][i]);
                    CHECK(changed == 0, "%s, %s[%d] = %g: %d rows that cannot see it changed", kind_name(kind),
                          tname[ti], t0, vals[vi], changed);
                    if (vi == 0) {
                        CHECK(finite_seen == 0, "%s, %s[%d] = NaN: %d outputs of the rows that see it are not NaN",
                              kind_name(kind), tname[ti], t0, finite_seen);
                        CHECK(grad_nan > 0, "%s, %s[%d] = NaN: every gradient is a number", kind_name(kind),
                              tname[ti], t0);
                    }
                }
    }
    for (int t = 0; t < 3; t++) { free(clean[t]); free(in[t]); free(g[t]); }
    free(dy); free(out0); free(out);
}

// Loss = sum(dy * out) of the float64 reference (for central finite differences).
ATTN_REF_FN double ref_loss(const ref_desc *rd, int B, int T, int H, int D, const double *q, const double *k,
                       const double *v, const double *dy, double *tmp) {
    ref_forward(rd, B, T, H, D, q, k, v, tmp);
    double L = 0;
    for (size_t i = 0; i < (size_t)B * T * H * D; i++) L += dy[i] * tmp[i];
    return L;
}

// The long-row input (B = H = 1, T rows of D, T > 16383): standard normal q, k, v (and dy when
// not NULL); channel 0 of v (and of dy) is 1 everywhere, so an output must come out 1 there
// when its weights sum to 1; zero-norm keys (every 4th) and zero queries (every 7th: uniform
// rows, the lssar fallback); and LONG_PEAKS peaked rows, whose query is twice a key a few
// hundred to thousands back (keys 4m+2 are zero, so none of those), which makes the lssa row far
// from uniform (u in the hundreds) and puts (almost) all the lssar weight on that key.
enum { LONG_PEAKS = 5 };
static const int long_peak_row[LONG_PEAKS] = {16383, 16000, 9001, 4097, 700};
static const int long_peak_key[LONG_PEAKS] = {5, 15001, 8, 4096, 699};
ATTN_REF_FN void long_rows_inputs(int T, int D, uint64_t seed, float *q, float *k, float *v, float *dy) {
    size_t N = (size_t)T * D;
    lssar_rng r;
    lssar_rng_seed(&r, seed);
    for (size_t i = 0; i < N; i++) {
        q[i] = (float)lssar_rng_normal(&r);
        k[i] = (float)lssar_rng_normal(&r);
        v[i] = i % D == 0 ? 1.0f : (float)lssar_rng_normal(&r);
        if (dy) dy[i] = i % D == 0 ? 1.0f : (float)lssar_rng_normal(&r);
    }
    for (int t = 0; t < T; t++)
        for (int d = 0; d < D; d++) {
            if (t % 4 == 2) k[(size_t)t * D + d] = 0;
            if (t % 7 == 3) q[(size_t)t * D + d] = 0;
        }
    for (int p = 0; p < LONG_PEAKS; p++)
        for (int d = 0; d < D; d++) q[(size_t)long_peak_row[p] * D + d] = 2.0f * k[(size_t)long_peak_key[p] * D + d];
}

#endif
