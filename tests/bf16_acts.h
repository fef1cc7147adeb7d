/*
 * bf16_acts.h - an nn_backend whose activations are stored in bf16, made from one whose activations
 * are float32 (tests only): each call widens its activation inputs to float, runs the base
 * backend's function and rounds its activation outputs to nearest even (outputs accumulated into
 * or rewritten in place are widened first); a bias is rounded to bf16 first, as the bf16 copy the
 * CUDA backend's GEMM epilogue reads for a bf16 output. That is what the CUDA backend's bf16
 * kernels compute (src/cuda/kernels_math.h: the float code on widened inputs, rounded where it
 * stores), so over the fake GPU's emulation (tests/gpu/fake_cuda.c) it is the fake of a bf16
 * context, and over the CPU backend (tests/test_model.c) it puts the model's byte layout, offsets
 * and transfers on 2-byte activations.
 *
 * The includer defines, before including it, BA_BASE (a pointer to the base backend's table) and
 * BA_ON(ctx) (whether a context stores bf16; else a call goes to the base as it is), and lists the
 * functions in its table: BA_FUNCTIONS, or ba_make at run time.
 */
#ifndef LSSAR_TESTS_BF16_ACTS_H
#define LSSAR_TESTS_BF16_ACTS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/fastmath.h"
#include "nn/backend.h"

// x (n) widened; x NULL: zeros. An output is widened too, so what the base leaves unwritten stays
// as the caller left it.
static float *ba_widen(const nn_act *x, size_t n) {
    float *f = calloc(n ? n : 1, sizeof(float));
    if (!f) { fprintf(stderr, "bf16_acts: out of memory\n"); abort(); }
    for (size_t i = 0; x && i < n; i++) f[i] = fm_bf16_float(((const uint16_t *)x)[i]);
    return f;
}
static void ba_narrow(nn_act *dst, float *f, size_t n) {   // and frees f
    for (size_t i = 0; dst && i < n; i++) ((uint16_t *)dst)[i] = fm_bf16_rne(f[i]);
    free(f);
}
static uint16_t *ba_bits(size_t n) {
    uint16_t *h = malloc((n ? n : 1) * sizeof(uint16_t));
    if (!h) { fprintf(stderr, "bf16_acts: out of memory\n"); abort(); }
    return h;
}
static float *ba_round_copy(const float *x, size_t n) {   // NULL stays NULL
    if (!x) return NULL;
    float *f = ba_widen(NULL, n);
    for (size_t i = 0; i < n; i++) f[i] = fm_bf16_float(fm_bf16_rne(x[i]));
    return f;
}

static lssar_dtype ba_act_dtype(nn_ctx *c) { return BA_ON(c) ? LSSAR_BF16 : BA_BASE->act_dtype(c); }
static void ba_upload_act(nn_ctx *c, nn_act *dst, const float *src, size_t n) {
    if (!BA_ON(c)) { BA_BASE->upload_act(c, dst, src, n); return; }
    float *f = ba_widen(NULL, n);
    memcpy(f, src, n * sizeof(float));
    uint16_t *h = ba_bits(n);
    ba_narrow(h, f, n);
    BA_BASE->upload(c, dst, h, n * sizeof(uint16_t));
    free(h);
}
static void ba_download_act(nn_ctx *c, float *dst, const nn_act *src, size_t n) {
    if (!BA_ON(c)) { BA_BASE->download_act(c, dst, src, n); return; }
    uint16_t *h = ba_bits(n);
    BA_BASE->download(c, h, src, n * sizeof(uint16_t));
    float *f = ba_widen(h, n);
    memcpy(dst, f, n * sizeof(float));
    free(f);
    free(h);
}
static void ba_matmul_forward(nn_ctx *c, nn_act *out, const nn_act *inp, const float *w, const float *b, int N,
                              int IC, int OC) {
    if (!BA_ON(c)) { BA_BASE->matmul_forward(c, out, inp, w, b, N, IC, OC); return; }
    float *o = ba_widen(out, (size_t)N * OC), *i = ba_widen(inp, (size_t)N * IC), *rb = ba_round_copy(b, OC);
    BA_BASE->matmul_forward(c, o, i, w, rb, N, IC, OC);
    ba_narrow(out, o, (size_t)N * OC);
    free(i); free(rb);
}
static void ba_matmul_backward(nn_ctx *c, nn_act *dinp, float *dw, float *db, const nn_act *dout,
                               const nn_act *inp, const float *w, int N, int IC, int OC, int acc) {
    if (!BA_ON(c)) { BA_BASE->matmul_backward(c, dinp, dw, db, dout, inp, w, N, IC, OC, acc); return; }
    float *di = dinp ? ba_widen(dinp, (size_t)N * IC) : NULL;
    float *d = ba_widen(dout, (size_t)N * OC), *i = ba_widen(inp, (size_t)N * IC);
    BA_BASE->matmul_backward(c, di, dw, db, d, i, w, N, IC, OC, acc);
    if (di) ba_narrow(dinp, di, (size_t)N * IC);
    free(d); free(i);
}
static void ba_ln_fwd(nn_ctx *c, nn_act *out, float *mean, float *rstd, const nn_act *inp, const float *w,
                      const float *b, int N, int C) {
    if (!BA_ON(c)) { BA_BASE->layernorm_forward(c, out, mean, rstd, inp, w, b, N, C); return; }
    float *o = ba_widen(out, (size_t)N * C), *i = ba_widen(inp, (size_t)N * C);
    BA_BASE->layernorm_forward(c, o, mean, rstd, i, w, b, N, C);
    ba_narrow(out, o, (size_t)N * C);
    free(i);
}
static void ba_ln_bwd(nn_ctx *c, nn_act *dinp, float *dw, float *db, const nn_act *dout, const nn_act *inp,
                      const float *w, const float *mean, const float *rstd, int N, int C) {
    if (!BA_ON(c)) { BA_BASE->layernorm_backward(c, dinp, dw, db, dout, inp, w, mean, rstd, N, C); return; }
    size_t n = (size_t)N * C;
    float *di = ba_widen(dinp, n), *d = ba_widen(dout, n), *i = ba_widen(inp, n);
    BA_BASE->layernorm_backward(c, di, dw, db, d, i, w, mean, rstd, N, C);
    ba_narrow(dinp, di, n);
    free(d); free(i);
}
static void ba_gelu_fwd(nn_ctx *c, nn_act *out, const nn_act *inp, size_t n) {
    if (!BA_ON(c)) { BA_BASE->gelu_forward(c, out, inp, n); return; }
    float *o = ba_widen(out, n), *i = ba_widen(inp, n);
    BA_BASE->gelu_forward(c, o, i, n);
    ba_narrow(out, o, n);
    free(i);
}
static void ba_gelu_bwd(nn_ctx *c, nn_act *dinp, const nn_act *inp, const nn_act *dout, size_t n) {
    if (!BA_ON(c)) { BA_BASE->gelu_backward(c, dinp, inp, dout, n); return; }
    float *di = ba_widen(dinp, n), *i = ba_widen(inp, n), *d = ba_widen(dout, n);
    BA_BASE->gelu_backward(c, di, i, d, n);
    ba_narrow(dinp, di, n);
    free(i); free(d);
}
static void ba_residual(nn_ctx *c, nn_act *out, const nn_act *a, const nn_act *b, size_t n) {
    if (!BA_ON(c)) { BA_BASE->residual_forward(c, out, a, b, n); return; }
    float *o = ba_widen(out, n), *x = ba_widen(a, n), *y = ba_widen(b, n);
    BA_BASE->residual_forward(c, o, x, y, n);
    ba_narrow(out, o, n);
    free(x); free(y);
}
static void ba_emb_fwd(nn_ctx *c, nn_act *out, const uint16_t *tok, float *const *wte, const float *wpe, int B,
                       int T, int Ch, int C) {
    if (!BA_ON(c)) { BA_BASE->embedding_forward(c, out, tok, wte, wpe, B, T, Ch, C); return; }
    float *o = ba_widen(out, (size_t)B * T * C);
    BA_BASE->embedding_forward(c, o, tok, wte, wpe, B, T, Ch, C);
    ba_narrow(out, o, (size_t)B * T * C);
}
static void ba_emb_bwd(nn_ctx *c, float *const *dwte, float *dwpe, const nn_act *dout, const uint16_t *tok, int B,
                       int T, int Ch, int C) {
    if (!BA_ON(c)) { BA_BASE->embedding_backward(c, dwte, dwpe, dout, tok, B, T, Ch, C); return; }
    float *d = ba_widen(dout, (size_t)B * T * C);
    BA_BASE->embedding_backward(c, dwte, dwpe, d, tok, B, T, Ch, C);
    free(d);
}
static void ba_rope_fwd(nn_ctx *c, nn_act *x, const float *cs, const float *sn, int B, int T, int NH, int HS,
                        int pos0) {
    if (!BA_ON(c)) { BA_BASE->rope_forward(c, x, cs, sn, B, T, NH, HS, pos0); return; }
    size_t n = (size_t)B * T * NH * HS;
    float *f = ba_widen(x, n);
    BA_BASE->rope_forward(c, f, cs, sn, B, T, NH, HS, pos0);
    ba_narrow(x, f, n);
}
static void ba_rope_bwd(nn_ctx *c, nn_act *dx, const float *cs, const float *sn, int B, int T, int NH, int HS) {
    if (!BA_ON(c)) { BA_BASE->rope_backward(c, dx, cs, sn, B, T, NH, HS); return; }
    size_t n = (size_t)B * T * NH * HS;
    float *f = ba_widen(dx, n);
    BA_BASE->rope_backward(c, f, cs, sn, B, T, NH, HS);
    ba_narrow(dx, f, n);
}
static int ba_attn_fwd(nn_ctx *c, nn_act *out, float *stats, const nn_act *q, const nn_act *k, const nn_act *v,
                       const lssar_attn_desc *d, int B, int Tq, int Tk, int kvs, int NH, int HS) {
    if (!BA_ON(c)) return BA_BASE->attention_forward(c, out, stats, q, k, v, d, B, Tq, Tk, kvs, NH, HS);
    size_t nq = (size_t)B * Tq * NH * HS, nk = (size_t)B * kvs * NH * HS;
    float *o = ba_widen(out, nq), *fq = ba_widen(q, nq), *fk = ba_widen(k, nk), *fv = ba_widen(v, nk);
    int rc = BA_BASE->attention_forward(c, o, stats, fq, fk, fv, d, B, Tq, Tk, kvs, NH, HS);
    ba_narrow(out, o, nq);
    free(fq); free(fk); free(fv);
    return rc;
}
static int ba_attn_bwd(nn_ctx *c, nn_act *dq, nn_act *dk, nn_act *dv, float *dscale, const nn_act *dout,
                       const nn_act *q, const nn_act *k, const nn_act *v, const nn_act *out, const float *stats,
                       const lssar_attn_desc *d, int B, int T, int NH, int HS) {
    if (!BA_ON(c))
        return BA_BASE->attention_backward(c, dq, dk, dv, dscale, dout, q, k, v, out, stats, d, B, T, NH, HS);
    size_t n = (size_t)B * T * NH * HS;
    float *g[3] = {ba_widen(dq, n), ba_widen(dk, n), ba_widen(dv, n)};
    float *fd = ba_widen(dout, n), *fq = ba_widen(q, n), *fk = ba_widen(k, n), *fv = ba_widen(v, n);
    float *fo = ba_widen(out, n);
    int rc = BA_BASE->attention_backward(c, g[0], g[1], g[2], dscale, fd, fq, fk, fv, fo, stats, d, B, T, NH, HS);
    ba_narrow(dq, g[0], n); ba_narrow(dk, g[1], n); ba_narrow(dv, g[2], n);
    free(fd); free(fq); free(fk); free(fv); free(fo);
    return rc;
}
static void ba_xent_fwd(nn_ctx *c, nn_act *logits, float *losses, uint16_t *argmax, const uint16_t *targets,
                        int tstride, int ostride, int R, int V, double *acc) {
    if (!BA_ON(c)) { BA_BASE->xent_forward(c, logits, losses, argmax, targets, tstride, ostride, R, V, acc); return; }
    float *f = ba_widen(logits, (size_t)R * V);
    BA_BASE->xent_forward(c, f, losses, argmax, targets, tstride, ostride, R, V, acc);
    ba_narrow(logits, f, (size_t)R * V);
}
static void ba_xent_bwd(nn_ctx *c, nn_act *probs, const uint16_t *targets, int tstride, int R, int V, float gs,
                        const double *acc) {
    if (!BA_ON(c)) { BA_BASE->xent_backward(c, probs, targets, tstride, R, V, gs, acc); return; }
    float *f = ba_widen(probs, (size_t)R * V);
    BA_BASE->xent_backward(c, f, targets, tstride, R, V, gs, acc);
    ba_narrow(probs, f, (size_t)R * V);
}

// the designated initializers of the replaced functions, for a static table
#define BA_FUNCTIONS                                                                                  \
    .act_dtype = ba_act_dtype, .upload_act = ba_upload_act, .download_act = ba_download_act,          \
    .matmul_forward = ba_matmul_forward, .matmul_backward = ba_matmul_backward,                       \
    .layernorm_forward = ba_ln_fwd, .layernorm_backward = ba_ln_bwd, .gelu_forward = ba_gelu_fwd,      \
    .gelu_backward = ba_gelu_bwd, .residual_forward = ba_residual, .embedding_forward = ba_emb_fwd,    \
    .embedding_backward = ba_emb_bwd, .rope_forward = ba_rope_fwd, .rope_backward = ba_rope_bwd,      \
    .attention_forward = ba_attn_fwd, .attention_backward = ba_attn_bwd, .xent_forward = ba_xent_fwd,  \
    .xent_backward = ba_xent_bwd
// t = the base with those functions replaced
static inline void ba_make(nn_backend *t) {
    const nn_backend w = {BA_FUNCTIONS};
    *t = *BA_BASE;
    t->act_dtype = w.act_dtype;
    t->upload_act = w.upload_act;
    t->download_act = w.download_act;
    t->matmul_forward = w.matmul_forward;
    t->matmul_backward = w.matmul_backward;
    t->layernorm_forward = w.layernorm_forward;
    t->layernorm_backward = w.layernorm_backward;
    t->gelu_forward = w.gelu_forward;
    t->gelu_backward = w.gelu_backward;
    t->residual_forward = w.residual_forward;
    t->embedding_forward = w.embedding_forward;
    t->embedding_backward = w.embedding_backward;
    t->rope_forward = w.rope_forward;
    t->rope_backward = w.rope_backward;
    t->attention_forward = w.attention_forward;
    t->attention_backward = w.attention_backward;
    t->xent_forward = w.xent_forward;
    t->xent_backward = w.xent_backward;
}

#endif
