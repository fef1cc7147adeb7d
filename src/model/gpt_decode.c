/*
 * gpt_decode.c - incremental decoding with a KV cache: one position per call, the keys and values
 * of every layer kept (after RoPE), one query row attending over the cache with n = pos + 1 (the
 * length-dependent kinds need the true row index). Same layer functions as the full forward.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "model/gpt_internal.h"

void gpt_decode_free(gpt *m) {
    free(m->kcache); m->kcache = NULL;
    free(m->vcache); m->vcache = NULL;
    free(m->dbuf); m->dbuf = NULL;
    free(m->dscratch); m->dscratch = NULL;
    m->dmax = m->dpos = 0;
}

int gpt_decode_reset(gpt *m, int max_T) {
    if (!m) return lssar_fail(LSSAR_E_NULL, "gpt_decode_reset: model is NULL");
    const gpt_config *c = &m->cfg;
    if (max_T < 1) return lssar_fail(LSSAR_E_SIZE, "gpt_decode_reset: max_T = %d; use >= 1", max_T);
    if (c->pos == GPT_POS_LEARNED && max_T > c->max_seq)
        return lssar_fail(LSSAR_E_SIZE, "gpt_decode_reset: max_T = %d exceeds max_seq = %d of a model with "
                          "learned positions; use max_T <= %d", max_T, c->max_seq, c->max_seq);
    if (max_T > m->dmax) {   // grow only; a smaller reset reuses the cache
        gpt_decode_free(m);
        size_t C = c->dim, kv = (size_t)c->layers * max_T * C;
        m->kcache = gpt_alloc_floats(kv);
        m->vcache = gpt_alloc_floats(kv);
        // x, ln, q, att, tmp (C each), fch, fch_gelu (4C each), logits (Ch, V)
        m->dbuf = gpt_alloc_floats(13 * C + (size_t)c->channels * c->vocab + 16 * 8);
        m->dscratch = malloc(sizeof(double) * c->heads * (size_t)max_T);
        if (!m->kcache || !m->vcache || !m->dbuf || !m->dscratch) {
            gpt_decode_free(m);
            return lssar_fail(LSSAR_E_NOMEM, "gpt_decode_reset: cannot allocate a KV cache of %d positions",
                              max_T);
        }
        m->dmax = max_T;
    }
    int rc = gpt_ensure_rope(m, max_T);
    if (rc) return rc;
    m->dpos = 0;
    return 0;
}

int gpt_decode_step(gpt *m, const uint16_t *tokens, float *logits) {
    if (!m || !tokens || !logits) return lssar_fail(LSSAR_E_NULL, "gpt_decode_step: NULL argument");
    if (!m->kcache) return lssar_fail(LSSAR_E_ARG, "gpt_decode_step: call gpt_decode_reset first");
    const gpt_config *c = &m->cfg;
    int pos = m->dpos, C = c->dim, NH = c->heads, HS = C / NH, V = c->vocab, Ch = c->channels;
    if (pos >= m->dmax)
        return lssar_fail(LSSAR_E_SIZE, "gpt_decode_step: the cache holds %d positions and is full; call "
                          "gpt_decode_reset with a larger max_T", m->dmax);
    for (int ch = 0; ch < Ch; ch++)
        if (tokens[ch] >= V)
            return lssar_fail(LSSAR_E_ARG, "gpt_decode_step: token %u of channel %d is out of range; the "
                              "vocabulary has %d tokens", (unsigned)tokens[ch], ch, V);
    const float *P = m->params;
#define W(l, k) (P + m->t[m->lt[(l) * LT_N + (k)]].off)
    float *x = m->dbuf, *ln = x + C, *q = ln + C, *att = q + C, *tmp = att + C;
    float *fch = tmp + C, *fg = fch + 4 * C, *lg = fg + 4 * C;   // lg (Ch, V)
    float *wte[GPT_MAX_CHANNELS];
    for (int ch = 0; ch < Ch; ch++) wte[ch] = m->params + m->t[m->i_wte[ch]].off;
    const float *wpe = m->i_wpe >= 0 ? P + m->t[m->i_wpe].off + (size_t)pos * C : NULL;
    embedding_forward(x, tokens, wte, wpe, 1, 1, Ch, C);
    for (int l = 0; l < c->layers; l++) {
        float *kc = m->kcache + (size_t)l * m->dmax * C, *vc = m->vcache + (size_t)l * m->dmax * C;
        float *k = kc + (size_t)pos * C, *v = vc + (size_t)pos * C;
        const float *wqkv = W(l, LT_QKVW), *bqkv = W(l, LT_QKVB);
        layernorm_forward(ln, NULL, NULL, x, W(l, LT_LN1W), W(l, LT_LN1B), 1, C);
        matmul_forward(q, ln, wqkv, bqkv, 1, C, C);
        matmul_forward(k, ln, wqkv + (size_t)C * C, bqkv + C, 1, C, C);
        matmul_forward(v, ln, wqkv + (size_t)2 * C * C, bqkv + 2 * C, 1, C, C);
        if (c->pos == GPT_POS_ROPE) {
            rope_forward(q, m->rope_cos, m->rope_sin, 1, 1, NH, HS, pos);
            rope_forward(k, m->rope_cos, m->rope_sin, 1, 1, NH, HS, pos);
        }
        lssar_attn_desc d = gpt_attn_desc(m, l);
        attention_row_forward(att, q, kc, vc, pos + 1, &d, NH, HS, m->dscratch);
        matmul_forward(tmp, att, W(l, LT_PROJW), W(l, LT_PROJB), 1, C, C);
        residual_forward(x, x, tmp, C);
        layernorm_forward(ln, NULL, NULL, x, W(l, LT_LN2W), W(l, LT_LN2B), 1, C);
        matmul_forward(fch, ln, W(l, LT_FCW), W(l, LT_FCB), 1, C, 4 * C);
        gelu_forward(fg, fch, 4 * C);
        matmul_forward(tmp, fg, W(l, LT_FCPW), W(l, LT_FCPB), 1, 4 * C, C);
        residual_forward(x, x, tmp, C);
    }
#undef W
    layernorm_forward(ln, NULL, NULL, x, P + m->t[m->i_lnfw].off, P + m->t[m->i_lnfb].off, 1, C);
    for (int ch = 0; ch < Ch; ch++)
        matmul_forward(lg + (size_t)ch * V, ln, P + m->t[m->i_head[ch]].off, NULL, 1, C, V);
    memcpy(logits, lg, sizeof(float) * Ch * V);
    m->dpos = pos + 1;
    return 0;
}
