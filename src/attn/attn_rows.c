/*
 * attn_rows.c - per-row forward and backward of the attention kinds (see attn_rows.h), written
 * stage by stage: the score (dot, ssmax, cos), phi (exp, softplus; sigmoid, relu), the l1
 * normalisation, the re-weighting. Each loop is specialised on the stages outside the loop (the
 * static inline helpers take them as constants), so a preset runs the loops it ran as its own path.
 *
 * sigmoid and relu have no row normalisation: a_ij is the weight itself, so they need no row
 * statistic, no argmax and no centred backward (dS_j = f'(x_j) da_j / sqrt(D), da_j = dy_i . v_j).
 *
 * Every loop over a row is a `#pragma omp simd` loop calling the branch-free functions of
 * core/fastmath.h, so GCC vectorises them (the sums become per-lane partial sums: deterministic for a
 * given build, independent of the thread count).
 *
 * Two numerical choices, both exact in real arithmetic (docs/attention.md explains them):
 *
 * 1. Centred normalisation backward. Each l1/softmax normalisation has a backward of the form
 *    g_j - sum_k w_k g_k with sum_k w_k = 1. When w is nearly one-hot (a peaked row; LSSAR with
 *    p = 15 nearly always) the two terms cancel and float32 keeps only rounding noise. We subtract
 *    c = g_jmax first (jmax = argmax of w): g_j - sum_k w_k g_k = (g_j - c) - sum_k w_k (g_k - c),
 *    and the jmax term of the sum is exactly zero, so the result keeps full relative accuracy.
 *    jmax is the argmax of the logit x, which is also the argmax of every weight (softmax, softplus
 *    and max(u, 0)^p are all non-decreasing).
 *
 * 2. Re-weighting fallback test. sum_j b_j == 0 means every u_j <= 0, i.e. every alpha_j <= 1/n, i.e. the
 *    lssa row is exactly uniform: all x_j equal. Testing the sign of n * alpha_j - 1 instead would
 *    read rounding noise of either sign on a uniform row. And x_j of identical keys need not be
 *    bit-identical: sgemm may sum the D products of different columns in different orders, so
 *    c = q^.k^ carries an error of about sqrt(D) float32 epsilons. So a row whose logits all lie
 *    within lambda * 8 sqrt(D) eps of each other (the rounding level; 4.5e-5 at n = 17, D = 64) is
 *    treated as uniform. The dot and ssmax scores have no bound 1 on the product: there the rounding
 *    level is |sc| |q_i| max_j |k_j| 8 sqrt(D) eps. Finer differences than that are not resolved by
 *    float32 scores anyway, and p = 15 would amplify that noise into arbitrary weights.
 *
 * CPU dispatch: attn_row_forward and attn_row_backward are LSSAR_HOT (core/dispatch.h), so a
 * portable build carries AVX-512, AVX2 + FMA and baseline clones of them, and the helpers below are
 * ROW_FN (always inlined) so that each clone gets its own copy compiled for its target: a helper
 * GCC chose not to inline would be compiled once, for the baseline, without FMA.
 *
 * -fno-trapping-math (the Makefile sets it for src/attn and src/nn; it changes no result, we
 * never enable FP exceptions):
 * GCC turns the selects of core/fastmath.h into branches, and with the default -ftrapping-math it
 * can if-convert them back into blends only through AVX-512 masked arithmetic. Without it every
 * transcendental loop here stayed scalar in the AVX2 and SSE builds (-fopt-info-vec-missed:
 * "control flow in loop"): lssar forward + backward was 3.1-3.3x softmax at T = 256..4096 with
 * -march=x86-64-v3, against 1.2-1.5x with AVX-512.
 *
 * Row sums (Z, sum b, the softmax sum, D1, D2, the ssmax ds term) are accumulated in double: a
 * float32 sum of n terms has a worst-case relative error of n * eps (1e-3 at n = 16384, beyond
 * the 1e-4 the spec asks for), the double sum 2^-29 times that. The conversion costs two
 * instructions per vector against the ~40 of softplus.
 */
#include <float.h>
#include <math.h>
#include "lssar.h"
#include "core/dispatch.h"
#include "core/fastmath.h"
#include "attn/attn_rows.h"

#define ROW_FN static inline __attribute__((always_inline))

void attn_row_params_init(attn_row_params *pp, const lssar_attn_desc *a, int D, int h) {
    lssar_attn_stages_of(a->kind, &pp->st);
    pp->norms = pp->st.score == LSSAR_SCORE_COS || pp->st.reweight;
    pp->p = a->p;
    pp->inv_sqrt_d = 1.0f / sqrtf((float)D);
    pp->ln_d = logf((float)(a->temp_d > 0 ? a->temp_d : D));
    pp->uniform_eps = 8.0f * sqrtf((float)D) * FLT_EPSILON;
    pp->s_h = pp->st.score == LSSAR_SCORE_SSMAX && a->ssmax_s ? a->ssmax_s[h] : 0.0f;
    int unnormed = pp->st.norm == LSSAR_NORM_LEN;
    pp->len_row = unnormed && a->len_norm == LSSAR_LEN_NORM_ROW;
    float L = unnormed && !pp->len_row && a->train_len >= 1 ? (float)a->train_len : 1.0f;
    pp->len_bias = -logf(L);
    pp->inv_len = 1.0f / L;
}

// sigmoid: the bias of row i, -ln L or -ln n_i (row 0: 0).
ROW_FN float sigmoid_bias(const attn_row_params *pp, int i) {
    return pp->len_row ? -logf((float)(i + 1)) : pp->len_bias;
}
// relu: the divisor's reciprocal of row i, 1 / L or 1 / n_i.
ROW_FN float relu_inv_len(const attn_row_params *pp, int i) {
    return pp->len_row ? 1.0f / (float)(i + 1) : pp->inv_len;
}

// sigmoid / relu: a_j = f(S_j / sqrt(D) (+ b)) straight into w; s keeps the raw dot products for
// the backward. No row statistic (jmax, z unused).
ROW_FN void unnormed_forward(const attn_row_params *pp, int i, const float *s, float *w,
                                    attn_row_stats *st) {
    int n = i + 1;
    float sc = pp->inv_sqrt_d;
    st->scale = sc;
    st->z = 0.0f;
    st->jmax = 0;
    if (pp->st.phi == LSSAR_PHI_SIGMOID) {
        float b = sigmoid_bias(pp, i);
#pragma omp simd
        for (int j = 0; j < n; j++) w[j] = fm_sigmoid(sc * s[j] + b);
    } else {
        float il = relu_inv_len(pp, i);
#pragma omp simd
        for (int j = 0; j < n; j++) {
            float x = sc * s[j];
            w[j] = !(x <= 0.0f) ? x * il : 0.0f;  // (not x > 0: a NaN x stays NaN)
        }
    }
}

// dw holds da_j = dy_i . v_j; returns dS_j = f'(x_j) da_j sc. relu: f'(0) = 0, as max(x, 0)'s
// subgradient at the kink is taken to be (x > 0 exactly as in the forward).
ROW_FN void unnormed_backward(const attn_row_params *pp, int i, const float *s, float *dw) {
    int n = i + 1;
    float sc = pp->inv_sqrt_d;
    if (pp->st.phi == LSSAR_PHI_SIGMOID) {
        float b = sigmoid_bias(pp, i);
#pragma omp simd
        for (int j = 0; j < n; j++) dw[j] *= sc * fm_sigmoid_grad(sc * s[j] + b);
    } else {
        float g = relu_inv_len(pp, i) * sc;
#pragma omp simd
        for (int j = 0; j < n; j++) {
            float x = sc * s[j];
            dw[j] = !(x <= 0.0f) ? (x == x ? dw[j] * g : x) : 0.0f;
        }
    }
}

// Scores dot / ssmax: the factor between the raw dot product and the logit of row i.
ROW_FN float logit_scale(const attn_row_params *pp, int i) {
    float sc = pp->inv_sqrt_d;
    if (pp->st.score == LSSAR_SCORE_SSMAX) sc *= pp->s_h * logf((float)(i + 1));
    return sc;
}

// First j with sc * s[j] == m (m is the row maximum of sc * s, so this always finds one; sc = 1
// when s holds the logits). Scans 16 at a time with a branch-free inner loop that vectorises; a
// plain scalar scan cost as much as a row pass.
ROW_FN int first_index_of(const float *s, int n, float sc, float m) {
    int j0 = 0;
    for (; j0 + 16 <= n; j0 += 16) {
        int hit = 0;
        for (int t = 0; t < 16; t++) hit |= sc * s[j0 + t] == m;
        if (hit) break;
    }
    for (int j = j0; j < n; j++)
        if (sc * s[j] == m) return j;
    return 0;
}

// The logits of a row: x_j = sc * s[j], with s the raw products (dot / ssmax, sc = the logit
// scale) or, for cos (s overwritten with x by logits_cos), sc = 1.
ROW_FN void logits_cos(int n, float lam, const float *rk, float *s) {
#pragma omp simd
    for (int j = 0; j < n; j++) s[j] = lam * (s[j] * rk[j]);
}

// phi = exp: a_j = exp(x_j - max x) into a, returns Z = sum a (double); *xmax, *xmin the logit
// range (xmin only when want_min: the re-weighting's uniform-row test).
ROW_FN double phi_exp(int n, float sc, const float *s, float *a, int want_min, float *xmax, float *xmin) {
    float m = -INFINITY, lo = INFINITY;
    if (want_min) {
#pragma omp simd reduction(max : m) reduction(min : lo)
        for (int j = 0; j < n; j++) {
            float x = sc * s[j];
            m = x > m ? x : m;  // not fmaxf: its NaN rules keep GCC from vectorising
            lo = x < lo ? x : lo;
        }
    } else {
#pragma omp simd reduction(max : m)
        for (int j = 0; j < n; j++) {
            float x = sc * s[j];
            m = x > m ? x : m;
        }
    }
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < n; j++) {
        float e = fm_exp(sc * s[j] - m);
        a[j] = e;
        sum += e;
    }
    *xmax = m;
    *xmin = lo;
    return sum;
}

// phi = softplus: a_j = softplus(x_j) into a (no shift: softplus never overflows), returns Z.
ROW_FN double phi_softplus(int n, float sc, const float *s, float *a, float *xmax, float *xmin) {
    double z = 0.0;
    float hi = -INFINITY, lo = INFINITY;
#pragma omp simd reduction(+ : z) reduction(max : hi) reduction(min : lo)
    for (int j = 0; j < n; j++) {
        float x = sc * s[j];
        float v = fm_softplus(x);
        a[j] = v;
        z += v;
        hi = x > hi ? x : hi;
        lo = x < lo ? x : lo;
    }
    *xmax = hi;
    *xmin = lo;
    return z;
}

enum { POW_SQUARE4, POW_SQUARE6, POW_EXPLOG };  // how reweight_pow raises to the power p

// w_j = b_j = (u_j / max u)^p with u_j = nz al_j - o (invm = 1 / max u); returns sum b. u <= 0 (or
// below FLT_MIN of max u) gives b = 0. how is a constant at each call, so after inlining each call
// is its own loop with one power function, vectorised as such.
ROW_FN double reweight_pow(int n, float nz, float o, float invm, const float *al, float *w, int how,
                           int ip, float p) {
    double sb = 0.0;
#pragma omp simd reduction(+ : sb)
    for (int j = 0; j < n; j++) {
        float r = (nz * al[j] - o) * invm;
        float b = how == POW_SQUARE4   ? fm_powi4(r, ip)
                  : how == POW_SQUARE6 ? fm_powi6(r, ip)
                                       : fm_pow01(r, p);
        b = !(r <= FLT_MIN) ? b : 0.0f;  // a NaN r stays NaN
        w[j] = b;
        sb += b;
    }
    return sb;
}

// The re-weighting of an l1 row: from a (alpha_j = a_j invz), u = n alpha - o,
// w = max(u, 0)^p / sum, computed as (u / max u)^p so nothing overflows. Returns 1 for a fallback
// row (uniform: sum b == 0, w = alpha).
ROW_FN int reweight_forward(const attn_row_params *pp, int i, int n, int jm, float invz, int uniform,
                            const float *al, float *w) {
    float o = i < 3 ? 0.0f : 1.0f, fn = (float)n, nz = fn * invz;
    float m = nz * al[jm] - o;
    if (i >= 3 && (uniform || !(m > 0.0f))) {  // uniform: sum b == 0 -> beta = alpha
#pragma omp simd
        for (int j = 0; j < n; j++) w[j] = al[j] * invz;
        return 1;
    }
    float invm = 1.0f / m, p = pp->p;
    int ip = (int)p;
    double sb;
    if (p == (float)ip && ip >= 1 && ip < 16)  // integer p (the paper's 15): repeated squaring
        sb = reweight_pow(n, nz, o, invm, al, w, POW_SQUARE4, ip, p);
    else if (p == (float)ip && ip >= 16 && ip < 64)
        sb = reweight_pow(n, nz, o, invm, al, w, POW_SQUARE6, ip, p);
    else
        sb = reweight_pow(n, nz, o, invm, al, w, POW_EXPLOG, ip, p);
    float invsb = (float)(1.0 / sb);
#pragma omp simd
    for (int j = 0; j < n; j++) w[j] *= invsb;
    return 0;
}

LSSAR_HOT void attn_row_forward(const attn_row_params *pp, int i, int ncols, float rq,
                                const float *rk, float *s, float *alpha, float *w,
                                attn_row_stats *st) {
    int n = i + 1;
    for (int j = n; j < ncols; j++) w[j] = 0.0f;
    st->fallback = 0;
    if (pp->st.norm == LSSAR_NORM_LEN) {
        unnormed_forward(pp, i, s, w, st);
        return;
    }
    const int cos = pp->st.score == LSSAR_SCORE_COS, rw = pp->st.reweight;
    // x = sc * s: cos writes lambda c into s first (row 0 has lambda = 0)
    float lam0 = cos ? pp->ln_d * logf((float)n) : 0.0f;
    float sc = 1.0f;
    if (cos) {
        st->scale = lam0 * rq;  // lambda_i with 1/|q_i| folded in
        logits_cos(n, st->scale, rk, s);
    } else {
        sc = st->scale = logit_scale(pp, i);
    }
    float *al = rw ? alpha : w;  // a, normalised in place unless re-weighted
    float xmax, xmin;
    double z = pp->st.phi == LSSAR_PHI_EXP ? phi_exp(n, sc, s, al, rw, &xmax, &xmin)
                                            : phi_softplus(n, sc, s, al, &xmax, &xmin);
    float invz = (float)(1.0 / z);
    int jm = first_index_of(s, n, sc, xmax);
    st->z = (float)z;
    st->jmax = jm;
    if (!rw) {
#pragma omp simd
        for (int j = 0; j < n; j++) al[j] *= invz;
        return;
    }
    // the uniform-row tolerance: the rounding level of the logits (see the header)
    float tol;
    if (cos) {
        tol = lam0 * pp->uniform_eps;
    } else {
        float rkmin = INFINITY;
#pragma omp simd reduction(min : rkmin)
        for (int j = 0; j < n; j++) rkmin = rk[j] < rkmin ? rk[j] : rkmin;
        tol = fabsf(sc) * pp->uniform_eps / (rq * rkmin);
    }
    st->fallback = reweight_forward(pp, i, n, jm, invz, xmax - xmin <= tol, al, w);
}

LSSAR_HOT void attn_row_backward(const attn_row_params *pp, int i, int ncols, float rq,
                                 const float *rk, const float *s, const float *alpha,
                                 const float *w, const attn_row_stats *st, float *dw,
                                 double *ds_acc) {
    (void)rq;
    int n = i + 1, jm = st->jmax;
    for (int j = n; j < ncols; j++) dw[j] = 0.0f;
    if (pp->st.norm == LSSAR_NORM_LEN) {
        unnormed_backward(pp, i, s, dw);
        return;
    }
    const int cos = pp->st.score == LSSAR_SCORE_COS, rw = pp->st.reweight;
    // al: without re-weighting alpha itself (= w); with it a, the unnormalised alpha (alpha_j = a_j / Z)
    const float *al = rw ? alpha : w;
    float alpha_scale = rw ? 1.0f / st->z : 1.0f;
    // dw holds dbeta; the re-weighting turns it into dalpha (no re-weighting and the fallback
    // row: dalpha = dbeta).
    if (rw && !st->fallback) {
        float o = i < 3 ? 0.0f : 1.0f, fn = (float)n, nz = fn * alpha_scale;
        float c = dw[jm];
        double d1d = 0.0;
#pragma omp simd reduction(+ : d1d)
        for (int j = 0; j < n; j++) d1d += w[j] * (dw[j] - c);
        float d1 = (float)d1d, np = fn * pp->p;
#pragma omp simd
        for (int j = 0; j < n; j++) {
            float u = nz * al[j] - o;
            float uu = u > 0.0f ? u : 1.0f;
            float g = np * w[j] / uu * ((dw[j] - c) - d1);
            dw[j] = u > 0.0f ? g : 0.0f;
        }
    }
    // the l1 normalisation, centred on jm: dalpha -> (dalpha_j - c) - D2
    float c = dw[jm];
    double d2d = 0.0;
#pragma omp simd reduction(+ : d2d)
    for (int j = 0; j < n; j++) d2d += al[j] * (dw[j] - c);
    float d2 = (float)(d2d * alpha_scale);
    float sc = st->scale;
    double dss = 0.0;  // ssmax: sum_j dx_j S_j, for d(loss)/d(s_h)
    if (pp->st.phi == LSSAR_PHI_EXP) {
        // dx_j = alpha_j ((dalpha_j - c) - D2); dS = dx sc (cos: dx lambda rk_j)
        if (cos) {
#pragma omp simd
            for (int j = 0; j < n; j++) dw[j] = (al[j] * alpha_scale) * ((dw[j] - c) - d2) * sc * rk[j];
        } else {
#pragma omp simd reduction(+ : dss)
            for (int j = 0; j < n; j++) {
                float dx = (al[j] * alpha_scale) * ((dw[j] - c) - d2);
                dss += dx * s[j];
                dw[j] = dx * sc;
            }
        }
    } else {
        // dx_j = ((dalpha_j - c) - D2) sigmoid(x_j) / Z. sigmoid(x) from x itself, not as
        // 1 - exp(-softplus(x)), which saves the division but leaves an absolute error of ~6e-8
        // on a sigmoid that can be far smaller: on a uniform row at small D (lambda = 19 at
        // n = 1024, D = 16, so x reaches -19, sigmoid 6e-9) sigmoid / Z is not negligible, and the
        // shortcut gave 1.4e-4 relative error on dk (test_attention: repeated keys, T = 1024, D = 16).
        float f = sc / st->z;  // lambda_i / |q_i| / Z (cos), sc / Z (dot, ssmax)
        if (cos) {
#pragma omp simd
            for (int j = 0; j < n; j++) {
                float sig = fm_sigmoid(s[j]);
                dw[j] = f * ((dw[j] - c) - d2) * sig * rk[j];
            }
        } else {
            float invz = 1.0f / st->z;
#pragma omp simd reduction(+ : dss)
            for (int j = 0; j < n; j++) {
                float dx = ((dw[j] - c) - d2) * fm_sigmoid(sc * s[j]) * invz;
                dss += dx * s[j];
                dw[j] = dx * sc;
            }
        }
    }
    if (pp->st.score == LSSAR_SCORE_SSMAX && ds_acc)
        *ds_acc += dss * log((double)n) * pp->inv_sqrt_d;
}
