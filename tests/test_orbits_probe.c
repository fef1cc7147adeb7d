// test_orbits_probe.c - the force probe's numeric pieces: the k-d tree against brute force, the
// L1-optimal constant against a float64 brute-force minimisation, the force set's 90%/10% split,
// and (with the model) the regression head's gradient through gpt_backward_hidden against finite
// differences.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/util.h"
#include "harness.h"
#include "model/gpt.h"
#include "orbits/probe.h"
#include "orbits/sample.h"

// A library call that returns an error code (0 = success): a failure fails the test, with the
// library's message, instead of being ignored.

static void test_kdtree_matches_brute_force(void) {
    const int n = 3000, d = 6, nq = 200;
    float *p = malloc(sizeof(float) * n * d), q[6];
    lssar_rng r;
    lssar_rng_seed(&r, 7);
    for (int i = 0; i < n * d; i++) p[i] = (float)lssar_rng_normal(&r);
    // exact duplicates and a flat dimension: the median split must cope with ties
    for (int i = 0; i < 100; i++) memcpy(p + (size_t)(n - 1 - i) * d, p + (size_t)i * d, sizeof(float) * d);
    for (int i = 0; i < n; i++) p[i * d + 5] = (float)(i % 3);
    orb_kdtree *t;
    CHECK(orb_kd_build(p, n, d, &t) == 0, "build: %s", lssar_errmsg());
    int bad = 0;
    for (int k = 1; k <= 5; k += 2)
        for (int s = 0; s < nq; s++) {
            for (int j = 0; j < d; j++) q[j] = (float)lssar_rng_normal(&r);
            if (s % 4 == 0) memcpy(q, p + (size_t)(s * 7) * d, sizeof q);   // queries on data points
            int64_t idx[5];
            float d2[5];
            orb_kd_knn(t, q, k, idx, d2);
            // brute force in double: the k smallest distances
            double best[5];
            for (int j = 0; j < k; j++) best[j] = INFINITY;
            for (int i = 0; i < n; i++) {
                double e = 0;
                for (int j = 0; j < d; j++) { double u = (double)p[i * d + j] - q[j]; e += u * u; }
                for (int a = 0; a < k; a++)
                    if (e < best[a]) { for (int b = k - 1; b > a; b--) best[b] = best[b - 1]; best[a] = e; break; }
            }
            for (int j = 0; j < k; j++) {
                double e = 0;
                for (int c = 0; c < d; c++) { double u = (double)p[idx[j] * d + c] - q[c]; e += u * u; }
                if (fabs(e - best[j]) > 1e-4 * (1 + best[j]) || fabs(d2[j] - e) > 1e-4 * (1 + e)) bad++;
            }
        }
    CHECK(bad == 0, "%d k-NN answers differ from brute force", bad);
    orb_kd_free(t);
    free(p);
}

static double l1_obj(const double *y, const double *g, int n, double c) {
    double s = 0;
    for (int i = 0; i < n; i++) s += fabs(y[i] - c * g[i]);
    return s / n;
}

static void test_l1_constant(void) {
    lssar_rng r;
    lssar_rng_seed(&r, 3);
    enum { N = 401 };
    double y[N], g[N];
    // exact law: c = G
    for (int i = 0; i < N; i++) { g[i] = exp(6 * lssar_rng_normal(&r)); y[i] = ORB_G * g[i]; }
    double l1, c = orb_l1_const(y, g, N, &l1);
    CHECK_CLOSE(c, ORB_G, 1e-12 * ORB_G);
    CHECK(l1 < 1e-9 * ORB_G, "exact data: L1 %g", l1);
    // noisy, heavy-tailed weights: the weighted median must minimise the float64 L1 objective,
    // whose minimum sits at one of the ratios y_i / g_i
    for (int i = 0; i < N; i++) { g[i] = exp(3 * lssar_rng_normal(&r)); y[i] = g[i] * (20 + 30 * lssar_rng_uniform(&r)); }
    c = orb_l1_const(y, g, N, &l1);
    double best = INFINITY;
    for (int i = 0; i < N; i++) { double o = l1_obj(y, g, N, y[i] / g[i]); if (o < best) best = o; }
    CHECK(l1_obj(y, g, N, c) <= best * (1 + 1e-12), "weighted median %g: L1 %g > brute-force minimum %g", c, l1_obj(y, g, N, c), best);
    CHECK_CLOSE(l1, l1_obj(y, g, N, c), 1e-12);
    // one dominant row decides the constant (the 27.02 effect)
    for (int i = 0; i < N; i++) { g[i] = 1; y[i] = 40; }
    g[0] = 1e6; y[0] = 27.0 * 1e6;
    CHECK_CLOSE(orb_l1_const(y, g, N, NULL), 27.0, 1e-12);
}

// A fake K = 1 state file in memory: planet rows odd (r > 0), star rows even.
static float *fake_state(int64_t S) {
    float *rows = calloc((size_t)S * ORB_ROWS * ORB_S_FIELDS, sizeof(float));
    lssar_rng r;
    lssar_rng_seed(&r, 11);
    for (int64_t s = 0; s < S; s++) {
        float m1 = (float)(1e-6 * (1 + lssar_rng_uniform(&r))), m2 = (float)(0.5 + lssar_rng_uniform(&r));
        for (int row = 1; row < ORB_ROWS; row++) {
            float *x = rows + ((size_t)s * ORB_ROWS + row) * ORB_S_FIELDS;
            if (row % 2) {
                x[ORB_S_DX] = (float)lssar_rng_normal(&r); x[ORB_S_DY] = (float)lssar_rng_normal(&r);
                x[ORB_S_DVX] = (float)lssar_rng_normal(&r); x[ORB_S_DVY] = (float)lssar_rng_normal(&r);
                x[ORB_S_R] = hypotf(x[ORB_S_DX], x[ORB_S_DY]);
                x[ORB_S_MASS] = m1;
                x[ORB_S_F] = (float)(ORB_G * m1 * m2 / (x[ORB_S_R] * x[ORB_S_R]));
            } else {
                x[ORB_S_MASS] = m2;
            }
            x[ORB_S_STAR_MASS] = m2;
        }
    }
    return rows;
}

static void test_force_split(void) {
    const int64_t S = 40;
    float *rows = fake_state(S);
    orb_state st = {0};
    st.rows = rows; st.n = S;
    orb_force_split a, b;
    CHECK(orb_force_split_make(&st, 0, 2, 5, &a) == 0, "split: %s", lssar_errmsg());
    CHECK(a.systems == 40 && a.full == 36, "systems %lld full %lld", (long long)a.systems, (long long)a.full);
    CHECK(a.ntrain == 36 * ORB_PLANET_ROWS + 4 * 2 && a.ntest == 4 * (ORB_PLANET_ROWS - 2),
          "train %lld test %lld", (long long)a.ntrain, (long long)a.ntest);
    // every labelled/test row is a planet row; test rows only from systems >= full; disjoint
    char *seen = calloc((size_t)S * ORB_ROWS, 1);
    int bad = 0;
    for (int64_t k = 0; k < a.ntrain; k++) { bad += a.train[k] % 2 == 0 || seen[a.train[k]]; seen[a.train[k]] = 1; }
    for (int64_t k = 0; k < a.ntest; k++) {
        bad += a.test[k] % 2 == 0 || seen[a.test[k]] || a.test[k] / ORB_ROWS < a.full || a.test[k] % ORB_ROWS > 997;
        seen[a.test[k]] = 1;
    }
    CHECK(bad == 0, "%d rows misplaced", bad);
    // deterministic per seed; another seed labels other rows
    CHECK(orb_force_split_make(&st, 0, 2, 5, &b) == 0 && !memcmp(a.train, b.train, sizeof(int64_t) * a.ntrain), "same seed differs");
    orb_force_split_free(&b);
    CHECK(orb_force_split_make(&st, 0, 2, 6, &b) == 0 && memcmp(a.train, b.train, sizeof(int64_t) * a.ntrain), "seed ignored");
    orb_force_split_free(&b);
    // standardised features: mean ~0, sd ~1 over the labelled rows
    double m = 0, v = 0;
    for (int64_t k = 0; k < a.ntrain; k++) { float f[ORB_FEAT]; orb_force_features(&st, &a, a.train[k], f); m += f[4]; v += f[4] * f[4]; }
    m /= a.ntrain; v = v / a.ntrain - m * m;
    CHECK(fabs(m) < 1e-3 && fabs(v - 1) < 1e-2, "m1 feature mean %g var %g", m, v);
    // the kept test rows are the nearest, sorted; the 1-NN oracle on exact copies is exact
    int64_t *ids, n;
    CHECK(orb_force_nearest(&st, &a, NULL, 50, &ids, &n) == 0 && n == 50, "nearest: %s", lssar_errmsg());
    free(ids);
    // a file that is not K = 1 is refused
    rows[((size_t)0 * ORB_ROWS + 2) * ORB_S_FIELDS + ORB_S_R] = 1.0f;
    CHECK(orb_force_split_make(&st, 0, 2, 5, &b) == LSSAR_E_FORMAT, "a K > 1 file was accepted");
    orb_force_split_free(&a);
    free(seen);
    free(rows);
}

// The head's loss and gradients against float64 finite differences of the same loss.
static void test_head_gradient(void) {
    enum { N = 7, C = 5 };
    float h[N * C], w[C], y[N], pred[N], dh[N * C], dw[C] = {0}, db = 0;
    unsigned char mask[N] = {1, 0, 1, 1, 0, 1, 1};
    lssar_rng r;
    lssar_rng_seed(&r, 9);
    for (int i = 0; i < N * C; i++) h[i] = (float)lssar_rng_normal(&r);
    for (int i = 0; i < C; i++) w[i] = (float)lssar_rng_normal(&r);
    for (int i = 0; i < N; i++) y[i] = (float)lssar_rng_normal(&r);
    float b = 0.3f;
    orb_head_forward(pred, h, w, b, N, C);
    double loss = orb_head_loss_backward(pred, y, mask, h, w, N, C, dh, dw, &db);
    // float64 reference: the loss and its derivatives by central differences
    #define LOSS64(H, W, Bb) ({ double s_ = 0; int n_ = 0; for (int i = 0; i < N; i++) if (mask[i]) { \
        double p_ = (Bb); for (int c = 0; c < C; c++) p_ += (double)(H)[i * C + c] * (W)[c]; \
        s_ += (p_ - y[i]) * (p_ - y[i]); n_++; } s_ / n_; })
    double hd[N * C], wd[C];
    for (int i = 0; i < N * C; i++) hd[i] = h[i];
    for (int i = 0; i < C; i++) wd[i] = w[i];
    CHECK_CLOSE(loss, LOSS64(hd, wd, (double)b), 1e-5);
    const double e = 1e-6;
    for (int i = 0; i < N * C; i++) {
        hd[i] += e; double lp = LOSS64(hd, wd, (double)b); hd[i] -= 2 * e; double lm = LOSS64(hd, wd, (double)b); hd[i] += e;
        CHECK_CLOSE(dh[i], (lp - lm) / (2 * e), 1e-4);
    }
    for (int c = 0; c < C; c++) {
        wd[c] += e; double lp = LOSS64(hd, wd, (double)b); wd[c] -= 2 * e; double lm = LOSS64(hd, wd, (double)b); wd[c] += e;
        CHECK_CLOSE(dw[c], (lp - lm) / (2 * e), 1e-4);
    }
    CHECK_CLOSE(db, (LOSS64(hd, wd, b + e) - LOSS64(hd, wd, b - e)) / (2 * e), 1e-4);
    #undef LOSS64
}

// gpt_backward_hidden: the gradient of L = sum R . h (h = the final hidden states) against central
// differences of L through gpt_forward_hidden, for each attention kind; and the hidden states of
// gpt_forward_hidden equal those of a full gpt_forward.
static double hidden_objective(gpt *m, const uint16_t *in, int B, int T, const float *R, float *h) {
    CHECK_OK(gpt_forward_hidden(m, in, B, T));
    CHECK_OK(gpt_get_hidden(m, h));
    double s = 0;
    for (int i = 0; i < B * T * gpt_get_config(m)->dim; i++) s += (double)R[i] * h[i];
    return s;
}

static void test_backward_hidden(void) {
    const lssar_attn_kind kinds[3] = {LSSAR_ATTN_SOFTMAX, LSSAR_ATTN_SSMAX, LSSAR_ATTN_LSSAR};
    for (int kk = 0; kk < 3; kk++) {
        gpt_config cfg = {.layers = 2, .heads = 2, .dim = 8, .vocab = 11, .channels = 2, .max_seq = 6,
                          .pos = kk == 1 ? LSSAR_POS_LEARNED : LSSAR_POS_ROPE, .attn = kinds[kk], .p = 3.0f,
                          .tied = 0};
        gpt *m;
        CHECK(gpt_create(&cfg, 5 + kk, &m) == 0, "create: %s", lssar_errmsg());
        enum { B = 2, T = 6, C = 8 };
        CHECK(gpt_reserve(m, B, T, 1) == 0, "reserve: %s", lssar_errmsg());
        uint16_t in[B * T * 2];
        float R[B * T * C], h[B * T * C], h2[B * T * C];
        lssar_rng r;
        lssar_rng_seed(&r, 100 + kk);
        for (int i = 0; i < B * T * 2; i++) in[i] = (uint16_t)lssar_rng_below(&r, 11);
        for (int i = 0; i < B * T * C; i++) R[i] = (float)lssar_rng_normal(&r);
        // same hidden states with and without the output heads
        CHECK_OK(gpt_forward(m, in, NULL, B, T, NULL));
        CHECK_OK(gpt_get_hidden(m, h2));
        hidden_objective(m, in, B, T, R, h);
        CHECK(!memcmp(h, h2, sizeof h), "%s: gpt_forward_hidden differs from gpt_forward", lssar_attn_name(kinds[kk]));
        CHECK(gpt_zero_grad(m) == 0 && gpt_backward_hidden(m, R, 0.5f) == 0, "backward: %s", lssar_errmsg());
        // a few entries of every tensor against central differences (float32 model: loose tolerance)
        int bad = 0, checked = 0;
        for (int t = 0; t < gpt_num_tensors(m); t++) {
            size_t n = gpt_tensor_numel(m, t);
            float *p = malloc(n * sizeof(float)), *g = malloc(n * sizeof(float));
            CHECK_OK(gpt_read_tensor(m, GPT_BUF_PARAM, t, p));
            CHECK_OK(gpt_read_tensor(m, GPT_BUF_GRAD, t, g));
            for (int s = 0; s < 3; s++) {
                size_t i = (size_t)lssar_rng_below(&r, n);
                float keep = p[i];
                const float e = 1e-3f;
                p[i] = keep + e; CHECK_OK(gpt_write_tensor(m, GPT_BUF_PARAM, t, p)); double lp = hidden_objective(m, in, B, T, R, h);
                p[i] = keep - e; CHECK_OK(gpt_write_tensor(m, GPT_BUF_PARAM, t, p)); double lm = hidden_objective(m, in, B, T, R, h);
                p[i] = keep; CHECK_OK(gpt_write_tensor(m, GPT_BUF_PARAM, t, p));
                double fd = 0.5 * (lp - lm) / (2 * e);   // x 0.5: the grad_scale used above
                if (fabs(g[i] - fd) > 0.1 * fmax(1.0, fabs(fd))) {   // LayerNorm of a ~0.02-scale stream: curved
                    bad++;
                    fprintf(stderr, "    %s %s[%zu]: grad %g, finite difference %g\n", lssar_attn_name(kinds[kk]),
                            gpt_tensor_name(m, t), i, (double)g[i], fd);
                }
                checked++;
            }
            free(p); free(g);
        }
        CHECK(bad == 0, "%s: %d of %d gradients differ from finite differences", lssar_attn_name(kinds[kk]), bad, checked);
        // equivalence with the cross-entropy backward: dh = sum_ch (softmax(h W_ch^T) - onehot) W_ch / count
        // (float64 here) through gpt_backward_hidden gives gpt_backward's gradients on every tensor but
        // the output heads
        uint16_t tg[B * T * 2];
        for (int i = 0; i < B * T * 2; i++) tg[i] = (uint16_t)lssar_rng_below(&r, 11);
        float dh[B * T * C] = {0};
        CHECK_OK(gpt_forward(m, in, tg, B, T, NULL));
        CHECK_OK(gpt_get_hidden(m, h));
        for (int ch = 0; ch < 2; ch++) {
            char name[32];
            snprintf(name, sizeof name, "lm_head.%d", ch);
            int ti = gpt_tensor_index(m, name);
            float W[11 * C];
            CHECK_OK(gpt_read_tensor(m, GPT_BUF_PARAM, ti, W));
            for (int i = 0; i < B * T; i++) {
                double z[11], mx = -1e300, sum = 0;
                for (int v = 0; v < 11; v++) { z[v] = 0; for (int c = 0; c < C; c++) z[v] += (double)h[i * C + c] * W[v * C + c]; if (z[v] > mx) mx = z[v]; }
                for (int v = 0; v < 11; v++) { z[v] = exp(z[v] - mx); sum += z[v]; }
                for (int v = 0; v < 11; v++) {
                    double gz = (z[v] / sum - (v == tg[i * 2 + ch])) / (B * T * 2);
                    for (int c = 0; c < C; c++) dh[i * C + c] += (float)(gz * W[v * C + c]);
                }
            }
        }
        size_t total = 0;
        for (int t = 0; t < gpt_num_tensors(m); t++) total += gpt_tensor_numel(m, t);
        float *g1 = malloc(total * sizeof(float)), *g2 = malloc(total * sizeof(float));
        CHECK_OK(gpt_zero_grad(m));
        CHECK_OK(gpt_backward(m, 1.0f));
        for (int t = 0, o = 0; t < gpt_num_tensors(m); o += gpt_tensor_numel(m, t), t++) CHECK_OK(gpt_read_tensor(m, GPT_BUF_GRAD, t, g1 + o));
        CHECK_OK(gpt_forward_hidden(m, in, B, T));
        CHECK_OK(gpt_zero_grad(m));
        CHECK_OK(gpt_backward_hidden(m, dh, 1.0f));
        for (int t = 0, o = 0; t < gpt_num_tensors(m); o += gpt_tensor_numel(m, t), t++) CHECK_OK(gpt_read_tensor(m, GPT_BUF_GRAD, t, g2 + o));
        double worst = 0;
        for (int t = 0, o = 0; t < gpt_num_tensors(m); o += gpt_tensor_numel(m, t), t++) {
            if (!strncmp(gpt_tensor_name(m, t), "lm_head", 7)) continue;
            for (size_t i = 0; i < gpt_tensor_numel(m, t); i++) {
                double e = fabs(g1[o + i] - g2[o + i]) / (1e-3 + fabs(g1[o + i]));
                if (e > worst) worst = e;
            }
        }
        CHECK(worst < 1e-3, "%s: backward_hidden(xent dh) differs from gpt_backward by %g (relative)", lssar_attn_name(kinds[kk]), worst);
        free(g1); free(g2);
        gpt_free(m);
    }
    gpt_config cfg = {.layers = 1, .heads = 1, .dim = 4, .vocab = 5, .channels = 1, .max_seq = 4,
                      .pos = LSSAR_POS_ROPE, .attn = LSSAR_ATTN_SOFTMAX, .p = 1, .tied = 1};
    gpt *m;
    float d[16] = {0};
    uint16_t in[4] = {1, 2, 3, 4};
    CHECK_OK(gpt_create(&cfg, 1, &m));
    CHECK_OK(gpt_reserve(m, 1, 4, 0));
    CHECK(gpt_backward_hidden(m, d, 1.0f) != 0, "backward without a forward was accepted");
    CHECK_OK(gpt_forward_hidden(m, in, 1, 4));
    CHECK(gpt_backward_hidden(m, d, 1.0f) != 0, "backward on an evaluation-only reservation was accepted");
    uint16_t out[4];
    CHECK(gpt_get_argmax(m, out) != 0, "argmax after a forward without heads was accepted");
    gpt_free(m);
}

int main(void) {
    RUN(test_kdtree_matches_brute_force);
    RUN(test_l1_constant);
    RUN(test_force_split);
    RUN(test_head_gradient);
    RUN(test_backward_hidden);
    return test_summary("test_orbits_probe");
}
