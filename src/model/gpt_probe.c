// gpt_probe.c - per-layer queries and keys of a forward pass; see gpt_probe.h. Mirrors the layer
// loop of gpt_forward in gpt.c (reading the model's parameters and RoPE table only).
#include <stdlib.h>
#include <string.h>
#include "model/gpt_internal.h"
#include "model/gpt_probe.h"

int gpt_probe_qk(gpt *m, const uint16_t *inputs, int B, int T, gpt_probe_fn fn, void *ctx) {
    if (!m || !inputs || !fn) return lssar_fail(LSSAR_E_NULL, "gpt_probe_qk: NULL argument");
    const gpt_config *c = &m->cfg;
    if (B < 1 || T < 1) return lssar_fail(LSSAR_E_SIZE, "gpt_probe_qk: B = %d, T = %d; both must be >= 1", B, T);
    if (c->pos == GPT_POS_LEARNED && T > c->max_seq)
        return lssar_fail(LSSAR_E_SIZE, "gpt_probe_qk: T = %d exceeds the %d learned positions of this model", T, c->max_seq);
    const int N = B * T, C = c->dim, NH = c->heads, HS = C / NH, Ch = c->channels, L = c->layers;
    for (size_t i = 0; i < (size_t)N * Ch; i++)
        if (inputs[i] >= c->vocab)
            return lssar_fail(LSSAR_E_ARG, "gpt_probe_qk: token %u at %zu is outside the vocabulary (%d ids)", (unsigned)inputs[i], i / Ch, c->vocab);
    int rc = gpt_ensure_rope(m, T);
    if (rc) return rc;
    size_t nc = (size_t)N * C;
    float *buf = gpt_alloc_floats(9 * nc);   // x, ln, q, k, v, att, scratch (N, C); fch (N, 4C) shares 2 more
    float *fch = gpt_alloc_floats(4 * nc), *fg = gpt_alloc_floats(4 * nc);
    if (!buf || !fch || !fg) { free(buf); free(fch); free(fg); return lssar_fail(LSSAR_E_NOMEM, "gpt_probe_qk: out of memory for %d x %d", B, T); }
    float *x = buf, *ln = x + nc, *q = ln + nc, *k = q + nc, *v = k + nc, *att = v + nc, *sc = att + nc, *res = sc + nc;
    const float *P = m->params;
#define W(l, kk) (P + m->t[m->lt[(l) * LT_N + (kk)]].off)
    float *wte[GPT_MAX_CHANNELS];
    for (int ch = 0; ch < Ch; ch++) wte[ch] = m->params + m->t[m->i_wte[ch]].off;
    embedding_forward(x, inputs, wte, m->i_wpe >= 0 ? P + m->t[m->i_wpe].off : NULL, B, T, Ch, C);
    for (int l = 0; l < L && !rc; l++) {
        const float *wqkv = W(l, LT_QKVW), *bqkv = W(l, LT_QKVB);
        layernorm_forward(ln, NULL, NULL, x, W(l, LT_LN1W), W(l, LT_LN1B), N, C);
        matmul_forward(q, ln, wqkv, bqkv, N, C, C);
        matmul_forward(k, ln, wqkv + (size_t)C * C, bqkv + C, N, C, C);
        matmul_forward(v, ln, wqkv + (size_t)2 * C * C, bqkv + 2 * C, N, C, C);
        if (c->pos == GPT_POS_ROPE) {
            rope_forward(q, m->rope_cos, m->rope_sin, B, T, NH, HS, 0);
            rope_forward(k, m->rope_cos, m->rope_sin, B, T, NH, HS, 0);
        }
        lssar_attn_desc d = gpt_attn_desc(m, l);
        if ((rc = fn(ctx, l, q, k, B, T, NH, HS, &d))) break;
        if (l == L - 1) break;   // the last layer's output is not needed
        if ((rc = attention_forward(att, q, k, v, &d, B, T, NH, HS))) break;
        matmul_forward(sc, att, W(l, LT_PROJW), W(l, LT_PROJB), N, C, C);
        residual_forward(res, x, sc, nc);
        layernorm_forward(ln, NULL, NULL, res, W(l, LT_LN2W), W(l, LT_LN2B), N, C);
        matmul_forward(fch, ln, W(l, LT_FCW), W(l, LT_FCB), N, C, 4 * C);
        gelu_forward(fg, fch, 4 * nc);
        matmul_forward(sc, fg, W(l, LT_FCPW), W(l, LT_FCPB), N, 4 * C, C);
        residual_forward(x, res, sc, nc);
    }
#undef W
    free(buf); free(fch); free(fg);
    return rc;
}
