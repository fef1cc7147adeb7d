// gpt_probe.c - per-layer queries and keys of a forward pass; see gpt_probe.h. The pass is the
// model's own trunk forward (gpt.c), which calls gpt_probe_call in every block while a probe is
// set; the callback gets host copies, so it never sees backend memory.
#include <stdlib.h>
#include <string.h>
#include "model/gpt_internal.h"
#include "model/gpt_probe.h"

struct gpt_probe_state {
    gpt_probe_fn fn;
    void *ctx;
    float *q, *k;     // (B, T, NH, HS) host copies of the current layer's
    float *scales;    // (NH) host copy of its SSMax scales
};

int gpt_probe_call(gpt *m, int l, const nn_act *q, const nn_act *k, int B, int T, const lssar_attn_desc *d) {
    struct gpt_probe_state *p = m->probe;
    const gpt_config *c = &m->cfg;
    size_t n = (size_t)B * T * c->dim;
    m->be->download_act(m->ctx, p->q, q, n);
    m->be->download_act(m->ctx, p->k, k, n);
    lssar_attn_desc hd = *d;
    if (d->ssmax_s) {
        m->be->download(m->ctx, p->scales, d->ssmax_s, c->heads * sizeof(float));
        hd.ssmax_s = p->scales;
    }
    return p->fn(p->ctx, l, p->q, p->k, B, T, c->heads, c->dim / c->heads, &hd);
}

int gpt_probe_qk(gpt *m, const uint16_t *inputs, int B, int T, gpt_probe_fn fn, void *ctx) {
    if (!m || !inputs || !fn) return lssar_fail(LSSAR_E_NULL, "gpt_probe_qk: NULL argument");
    const gpt_config *c = &m->cfg;
    if (B < 1 || T < 1)
        return lssar_fail(LSSAR_E_SIZE, "gpt_probe_qk: B = %d, T = %d; both must be >= 1", B, T);
    if (c->pos == LSSAR_POS_LEARNED && T > c->max_seq)
        return lssar_fail(LSSAR_E_SIZE, "gpt_probe_qk: T = %d exceeds the %d learned positions of this model",
                          T, c->max_seq);
    int rc = gpt_reserve(m, B, T, 0);
    if (rc) return rc;
    size_t n = (size_t)B * T * c->dim;
    struct gpt_probe_state p = {fn, ctx, malloc(n * sizeof(float)), malloc(n * sizeof(float)),
                                malloc(c->heads * sizeof(float))};
    if (!p.q || !p.k || !p.scales)
        rc = lssar_fail(LSSAR_E_NOMEM, "gpt_probe_qk: out of memory for %d x %d", B, T);
    if (!rc) {
        m->probe = &p;
        rc = gpt_forward_hidden(m, inputs, B, T);
        m->probe = NULL;
    }
    free(p.q); free(p.k); free(p.scales);
    return rc;
}
