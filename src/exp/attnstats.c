// attnstats.c - per-layer entropy, sink weight and top-1 weight of attention rows; see attnstats.h.
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "core/util.h"
#include "attn/attn_rows.h"
#include "exp/attnstats.h"
#include "model/gpt_probe.h"

typedef struct {
    int rows;
    attn_layer_stats *st;
    double (*acc)[4];   // per layer: sums of entropy, entropy_norm, sink, top1
    long *cnt;
    int failed;
} ctx_t;

// The row parameters exactly as the attention kernel sets them (the same function).
static attn_row_params row_params_of(const lssar_attn_desc *d, int HS, int h) {
    attn_row_params pp;
    attn_row_params_init(&pp, d, HS, h);
    return pp;
}

// 1 / max(|x_j|, 1e-12) for rows of a strided (n, HS) block.
static void inv_norms(const float *x, int n, int HS, int stride, float *r) {
    for (int j = 0; j < n; j++) {
        double nn = 0;
        for (int a = 0; a < HS; a++) nn += (double)x[(size_t)j * stride + a] * x[(size_t)j * stride + a];
        double v = sqrt(nn);
        r[j] = (float)(1.0 / (v > 1e-12 ? v : 1e-12));
    }
}

// Weights w[0..i] of query row i of one head: qb, kb point at the head's first row (stride HD).
static void row_weights(const attn_row_params *pp, const float *qb, const float *kb, int HD, int HS,
                        const float *rk, int i, float *s, float *al, float *w) {
    const float *qi = qb + (size_t)i * HD;
    float rq = 0;
    if (pp->norms) inv_norms(qi, 1, HS, HD, &rq);
    for (int j = 0; j <= i; j++) {
        const float *kj = kb + (size_t)j * HD;
        float dot = 0;
        for (int x = 0; x < HS; x++) dot += qi[x] * kj[x];
        s[j] = dot;
    }
    attn_row_stats rs;
    attn_row_forward(pp, i, i + 1, rq, rk, s, al, w, &rs);
}

int attn_weights_row(const lssar_attn_desc *d, const float *q, const float *k, int T, int NH, int HS,
                     int b, int h, int i, float *w) {
    if (i < 0 || i >= T || h < 0 || h >= NH)
        return lssar_fail(LSSAR_E_ARG, "attn_weights_row: row %d head %d out of range", i, h);
    float *buf = malloc(sizeof(float) * 3 * (size_t)T);
    if (!buf) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    const int HD = NH * HS;
    const float *qb = q + (size_t)b * T * HD + (size_t)h * HS, *kb = k + (size_t)b * T * HD + (size_t)h * HS;
    attn_row_params pp = row_params_of(d, HS, h);
    inv_norms(kb, i + 1, HS, HD, buf + 2 * T);
    row_weights(&pp, qb, kb, HD, HS, buf + 2 * T, i, buf, buf + T, w);
    free(buf);
    return 0;
}

static int on_layer(void *vc, int layer, const float *q, const float *k, int B, int T, int NH, int HS,
                    const lssar_attn_desc *d) {
    ctx_t *c = vc;
    int lo = T / 2, nrows = T - lo;
    int R = c->rows < nrows ? c->rows : nrows;
    if (R < 1) R = 1;
    const int HD = NH * HS;
    double e = 0, en = 0, sk = 0, t1 = 0;
    long cnt = 0;
    int failed = 0;
#pragma omp parallel reduction(+ : e, en, sk, t1, cnt)
    {
        float *s = malloc(sizeof(float) * 3 * (size_t)T + sizeof(float) * T), *al = s + T, *w = al + T,
              *rk = w + T;
        if (!s) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic, 1)
        for (int bh = 0; bh < B * NH; bh++) {
            if (!s) continue;
            int b = bh / NH, h = bh % NH;
            const float *kb = k + (size_t)b * T * HD + (size_t)h * HS;   // (T, HS) stride HD
            const float *qb = q + (size_t)b * T * HD + (size_t)h * HS;
            attn_row_params pp = row_params_of(d, HS, h);
            if (pp.norms) inv_norms(kb, T, HS, HD, rk);
            for (int r = 0; r < R; r++) {
                int i = lo + (int)((long)r * nrows / R);
                row_weights(&pp, qb, kb, HD, HS, rk, i, s, al, w);
                // sigmoid / relu rows are not normalised: the statistics describe the row's
                // distribution w / sum w (a relu row of zeros stays zeros: entropy, sink, top-1 0)
                if (pp.st.norm == LSSAR_NORM_LEN) {
                    double z = 0;
                    for (int j = 0; j <= i; j++) z += w[j];
                    if (z > 0)
                        for (int j = 0; j <= i; j++) w[j] = (float)(w[j] / z);
                }
                double H = 0, mx = 0;
                for (int j = 0; j <= i; j++) {
                    double wj = w[j];
                    if (wj > 0) H -= wj * log(wj);
                    if (wj > mx) mx = wj;
                }
                e += H;
                en += i > 0 ? H / log((double)(i + 1)) : 0;
                sk += w[0];
                t1 += mx;
                cnt++;
            }
        }
        free(s);
    }
    (void)layer;
    if (failed) return lssar_fail(LSSAR_E_NOMEM, "attnstats: out of memory for rows of %d", T);
    c->acc[layer][0] += e; c->acc[layer][1] += en; c->acc[layer][2] += sk; c->acc[layer][3] += t1;
    c->cnt[layer] += cnt;
    return 0;
}

int attn_stats(gpt *m, const uint16_t *windows, int B, int T, int rows, attn_layer_stats *st) {
    const gpt_config *cfg = gpt_get_config(m);
    int L = cfg->layers;
    ctx_t c = {rows, st, calloc(L, sizeof(double[4])), calloc(L, sizeof(long)), 0};
    if (!c.acc || !c.cnt) { free(c.acc); free(c.cnt); return lssar_fail(LSSAR_E_NOMEM, "out of memory"); }
    int rc = gpt_probe_qk(m, windows, B, T, on_layer, &c);
    for (int l = 0; l < L && !rc; l++) {
        long n = c.cnt[l] ? c.cnt[l] : 1;
        st[l].entropy = c.acc[l][0] / n;
        st[l].entropy_norm = c.acc[l][1] / n;
        st[l].sink = c.acc[l][2] / n;
        st[l].top1 = c.acc[l][3] / n;
        st[l].rows = c.cnt[l];
    }
    free(c.acc); free(c.cnt);
    return rc;
}
