// attnstats.c - per-layer entropy, sink weight and top-1 weight of attention rows; see attnstats.h.
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

static int on_layer(void *vc, int layer, const float *q, const float *k, int B, int T, int NH, int HS,
                    const lssar_attn_desc *d) {
    ctx_t *c = vc;
    int lo = T / 2, nrows = T - lo;
    int R = c->rows < nrows ? c->rows : nrows;
    if (R < 1) R = 1;
    const int HD = NH * HS;
    const int normed = d->kind == LSSAR_ATTN_LSSA || d->kind == LSSAR_ATTN_LSSAR;
    double e = 0, en = 0, sk = 0, t1 = 0;
    long cnt = 0;
    int failed = 0;
#pragma omp parallel reduction(+ : e, en, sk, t1, cnt)
    {
        float *s = malloc(sizeof(float) * 3 * (size_t)T + sizeof(float) * T), *al = s + T, *w = al + T, *rk = w + T;
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
            attn_row_params pp = {d->kind, d->p, 1.0f / sqrtf((float)HS), logf((float)HS), (float)HS,
                                  d->kind == LSSAR_ATTN_SSMAX && d->ssmax_s ? d->ssmax_s[h] : 0.0f};
            for (int j = 0; j < T; j++) {
                double nn = 0;
                for (int x = 0; x < HS; x++) nn += (double)kb[(size_t)j * HD + x] * kb[(size_t)j * HD + x];
                double r = sqrt(nn);
                rk[j] = (float)(1.0 / (r > 1e-12 ? r : 1e-12));
            }
            for (int r = 0; r < R; r++) {
                int i = lo + (int)((long)r * nrows / R);
                const float *qi = qb + (size_t)i * HD;
                double qq = 0;
                for (int x = 0; x < HS; x++) qq += (double)qi[x] * qi[x];
                float rq = (float)(1.0 / (sqrt(qq) > 1e-12 ? sqrt(qq) : 1e-12));
                for (int j = 0; j <= i; j++) {
                    const float *kj = kb + (size_t)j * HD;
                    float dot = 0;
                    for (int x = 0; x < HS; x++) dot += qi[x] * kj[x];
                    s[j] = dot;
                }
                attn_row_stats rs;
                attn_row_forward(&pp, i, i + 1, normed ? rq : 0.0f, rk, s, al, w, &rs);
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
