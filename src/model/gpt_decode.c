/*
 * gpt_decode.c - incremental decoding: a KV cache per model (the keys and values of every layer,
 * after RoPE, for B sequences), fed through the same block forward as training and evaluation
 * (gpt_trunk_forward in gpt.c); attention runs the same kernel over the cache, so decoding gives
 * the full forward's logits.
 */
#include <stdlib.h>
#include <string.h>
#include "model/gpt_internal.h"

int gpt_kvcache_create(gpt *m, int B, int max_T, gpt_kvcache **out) {
    if (!m || !out) return lssar_fail(LSSAR_E_NULL, "gpt_kvcache_create: NULL argument");
    *out = NULL;
    const gpt_config *c = &m->cfg;
    if (B < 1 || max_T < 1)
        return lssar_fail(LSSAR_E_SIZE, "gpt_kvcache_create: B = %d, max_T = %d; both must be >= 1", B,
                          max_T);
    if (c->pos == LSSAR_POS_LEARNED && max_T > c->max_seq)
        return lssar_fail(LSSAR_E_SIZE, "gpt_kvcache_create: max_T = %d exceeds max_seq = %d of a model with "
                          "learned positions; use max_T <= %d", max_T, c->max_seq, c->max_seq);
    if ((long)B * max_T > (1L << 30))
        return lssar_fail(LSSAR_E_SIZE, "gpt_kvcache_create: B * max_T too large");
    int rc = gpt_ensure_rope(m, max_T);
    if (rc) return rc;
    gpt_kvcache *kv = calloc(1, sizeof *kv);
    if (!kv) return lssar_fail(LSSAR_E_NOMEM, "gpt_kvcache_create: out of memory");
    kv->m = m;
    kv->B = B;
    kv->cap = max_T;
    size_t n = (size_t)c->layers * B * max_T * c->dim * nn_dtype_bytes(m->act_dt);   // (L, B, max_T, C)
    kv->k = m->be->alloc(m->ctx, n);
    kv->v = m->be->alloc(m->ctx, n);
    if (!kv->k || !kv->v) {
        gpt_kvcache_free(kv);
        return lssar_fail(LSSAR_E_NOMEM,
                          "gpt_kvcache_create: cannot allocate 2 x %zu MiB for a cache of %d x %d positions",
                          n >> 20, B, max_T);
    }
    *out = kv;
    return 0;
}

void gpt_kvcache_free(gpt_kvcache *kv) {
    if (!kv) return;
    gpt *m = kv->m;
    gpt_acts_free(m, &kv->acts);
    m->be->release(m->ctx, kv->k);
    m->be->release(m->ctx, kv->v);
    free(kv);
}

void gpt_kvcache_clear(gpt_kvcache *kv) { if (kv) kv->len = 0; }
int gpt_kvcache_len(const gpt_kvcache *kv) { return kv ? kv->len : 0; }

int gpt_decode(gpt *m, gpt_kvcache *kv, const uint16_t *tokens, int T, float *logits) {
    if (!m || !kv || !tokens) return lssar_fail(LSSAR_E_NULL, "gpt_decode: NULL argument");
    if (kv->m != m) return lssar_fail(LSSAR_E_ARG, "gpt_decode: the cache belongs to another model");
    const gpt_config *c = &m->cfg;
    int B = kv->B, C = c->dim, V = c->vocab, Ch = c->channels;
    if (T < 1) return lssar_fail(LSSAR_E_SIZE, "gpt_decode: T = %d; feed at least one position", T);
    if (kv->len + T > kv->cap)
        return lssar_fail(LSSAR_E_SIZE, "gpt_decode: the cache holds %d of %d positions, %d more do not fit; "
                          "create a larger cache", kv->len, kv->cap, T);
    size_t ntok = (size_t)B * T * Ch;
    int rc = gpt_check_tokens(m, tokens, ntok, 0, "decode");
    if (rc) return rc;
    gpt_acts *a = &kv->acts;
    if (!a->mem || B * T > a->N) {   // evaluation activations for this many new positions
        gpt_acts_free(m, a);
        if ((rc = gpt_acts_alloc(m, B * T, T, 0, a))) return rc;
    }
    m->be->upload(m->ctx, a->inputs, tokens, ntok * sizeof(uint16_t));
    if ((rc = gpt_trunk_forward(m, a, B, T, kv))) return rc;
    kv->len += T;
    // output heads on the last fed position of each sequence only: (Ch, V) per sequence
    for (int b = 0; b < B && logits; b++)
        for (int ch = 0; ch < Ch; ch++) {
            const nn_act *h = gpt_act_at(m, a->lnf, ((size_t)b * T + T - 1) * C);   // (C)
            m->be->matmul_forward(m->ctx, a->logits, h, m->params.head[ch], NULL, 1, C, V);
            m->be->download_act(m->ctx, logits + ((size_t)b * Ch + ch) * V, a->logits, V);
        }
    return 0;
}
