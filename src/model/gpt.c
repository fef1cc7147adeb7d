/*
 * gpt.c - the GPT model (see gpt.h): parameter table and initialisation, activation memory,
 * forward, backward, AdamW, tensor copy-in / copy-out. Every tensor operation is a layer function
 * of src/nn; this file only lays out memory and calls them in order. Incremental decoding is in
 * gpt_decode.c.
 *
 * Memory (llm.c style): one contiguous block each for parameters, gradients, AdamW m and v (same
 * layout, tensors 64-byte aligned), and one block of activations allocated by gpt_reserve and
 * reused by every step: fresh pages are slow on the machines we use, so nothing is allocated per
 * step.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "model/gpt_internal.h"

/* ------------------------------------------------------------------ config */

const char *gpt_pos_name(gpt_pos pos) {
    switch (pos) {
    case GPT_POS_ROPE: return "rope";
    case GPT_POS_LEARNED: return "learned";
    case GPT_POS_NONE: return "none";
    }
    return "unknown";
}

int gpt_pos_parse(const char *name) {
    if (!name) return -1;
    if (!strcmp(name, "rope")) return GPT_POS_ROPE;
    if (!strcmp(name, "learned")) return GPT_POS_LEARNED;
    if (!strcmp(name, "none")) return GPT_POS_NONE;
    return -1;
}

int gpt_config_check(const gpt_config *c) {
    if (!c) return lssar_fail(LSSAR_E_NULL, "gpt config: NULL pointer");
    if (c->layers < 1 || c->layers > 1024)
        return lssar_fail(LSSAR_E_SIZE, "gpt config: layers = %d; use 1..1024", c->layers);
    if (c->heads < 1) return lssar_fail(LSSAR_E_SIZE, "gpt config: heads = %d; use >= 1", c->heads);
    if (c->dim < 1 || c->dim % c->heads)
        return lssar_fail(LSSAR_E_SIZE, "gpt config: dim = %d must be a positive multiple of heads = %d",
                          c->dim, c->heads);
    if (c->pos == GPT_POS_ROPE && (c->dim / c->heads) % 2)
        return lssar_fail(LSSAR_E_SIZE, "gpt config: RoPE needs an even head size, got dim/heads = %d",
                          c->dim / c->heads);
    if (c->vocab < 1 || c->vocab > 65535)
        return lssar_fail(LSSAR_E_SIZE, "gpt config: vocab = %d; use 1..65535 (tokens are uint16, 65535 "
                          "is the ignore marker)", c->vocab);
    if (c->channels < 1 || c->channels > GPT_MAX_CHANNELS)
        return lssar_fail(LSSAR_E_SIZE, "gpt config: channels = %d; use 1..%d", c->channels, GPT_MAX_CHANNELS);
    if (c->max_seq < 1)
        return lssar_fail(LSSAR_E_SIZE, "gpt config: max_seq = %d; use >= 1", c->max_seq);
    if ((unsigned)c->pos > GPT_POS_NONE)
        return lssar_fail(LSSAR_E_KIND, "gpt config: pos = %d; use rope, learned or none", (int)c->pos);
    if ((unsigned)c->attn > LSSAR_ATTN_LSSAR)
        return lssar_fail(LSSAR_E_KIND, "gpt config: attn = %d; use softmax, ssmax, lssa or lssar", (int)c->attn);
    if (c->attn == LSSAR_ATTN_LSSAR && !(c->p > 0.0f && isfinite(c->p)))
        return lssar_fail(LSSAR_E_P, "gpt config: LSSAR power p = %g; use a finite p > 0 (15 in the paper)",
                          (double)c->p);
    if (c->tied != 0 && c->tied != 1)
        return lssar_fail(LSSAR_E_ARG, "gpt config: tied = %d; use 0 or 1", c->tied);
    return 0;
}

/* ---------------------------------------------------------- tensor table */

enum { INIT_NORMAL, INIT_ZERO, INIT_ONE, INIT_SSMAX };

static size_t round16(size_t n) { return (n + 15) & ~(size_t)15; }

static int add_tensor(gpt *m, const char *name, int ndim, int s0, int s1, int decay, int init,
                      float std) {
    gpt_tensor *t = &m->t[m->nt];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = ndim;
    t->shape[0] = s0;
    t->shape[1] = ndim > 1 ? s1 : 0;
    t->numel = (size_t)s0 * (ndim > 1 ? (size_t)s1 : 1);
    t->off = m->nfloats;
    t->decay = decay;
    t->init = init;
    t->std = std;
    m->nfloats += round16(t->numel);
    return m->nt++;
}

static void build_table(gpt *m) {
    const gpt_config *c = &m->cfg;
    int C = c->dim, L = c->layers, V = c->vocab;
    char nm[48];
    float std = 0.02f, rstd = 0.02f / sqrtf(2.0f * L);
    m->nt = 0;
    m->nfloats = 0;
    for (int ch = 0; ch < c->channels; ch++) {
        snprintf(nm, sizeof nm, "wte.%d", ch);
        m->i_wte[ch] = add_tensor(m, nm, 2, V, C, 1, INIT_NORMAL, std);
    }
    m->i_wpe = c->pos == GPT_POS_LEARNED ? add_tensor(m, "wpe", 2, c->max_seq, C, 1, INIT_NORMAL, std) : -1;
    for (int l = 0; l < L; l++) {
        int *li = m->lt + l * LT_N;
#define T1(k, suffix, n, dec, init, sd) \
        snprintf(nm, sizeof nm, "h.%d.%s", l, suffix); li[k] = add_tensor(m, nm, 1, n, 0, dec, init, sd)
#define T2(k, suffix, r, cc, init, sd) \
        snprintf(nm, sizeof nm, "h.%d.%s", l, suffix); li[k] = add_tensor(m, nm, 2, r, cc, 1, init, sd)
        T1(LT_LN1W, "ln_1.weight", C, 0, INIT_ONE, 0);
        T1(LT_LN1B, "ln_1.bias", C, 0, INIT_ZERO, 0);
        T2(LT_QKVW, "attn.c_attn.weight", 3 * C, C, INIT_NORMAL, std);
        T1(LT_QKVB, "attn.c_attn.bias", 3 * C, 0, INIT_ZERO, 0);
        T2(LT_PROJW, "attn.c_proj.weight", C, C, INIT_NORMAL, rstd);
        T1(LT_PROJB, "attn.c_proj.bias", C, 0, INIT_ZERO, 0);
        if (c->attn == LSSAR_ATTN_SSMAX) {
            T1(LT_SSMAX, "attn.ssmax_s", c->heads, 0, INIT_SSMAX, 0);
        } else {
            li[LT_SSMAX] = -1;
        }
        T1(LT_LN2W, "ln_2.weight", C, 0, INIT_ONE, 0);
        T1(LT_LN2B, "ln_2.bias", C, 0, INIT_ZERO, 0);
        T2(LT_FCW, "mlp.c_fc.weight", 4 * C, C, INIT_NORMAL, std);
        T1(LT_FCB, "mlp.c_fc.bias", 4 * C, 0, INIT_ZERO, 0);
        T2(LT_FCPW, "mlp.c_proj.weight", C, 4 * C, INIT_NORMAL, rstd);
        T1(LT_FCPB, "mlp.c_proj.bias", C, 0, INIT_ZERO, 0);
#undef T1
#undef T2
    }
    m->i_lnfw = add_tensor(m, "ln_f.weight", 1, C, 0, 0, INIT_ONE, 0);
    m->i_lnfb = add_tensor(m, "ln_f.bias", 1, C, 0, 0, INIT_ZERO, 0);
    for (int ch = 0; ch < c->channels; ch++) {
        if (c->tied) {
            m->i_head[ch] = m->i_wte[ch];
        } else {
            snprintf(nm, sizeof nm, "lm_head.%d", ch);
            m->i_head[ch] = add_tensor(m, nm, 2, V, C, 1, INIT_NORMAL, std);
        }
    }
}

static int num_tensors_for(const gpt_config *c) {
    return 2 * c->channels + 1 + c->layers * LT_N + 2;   // an upper bound
}

/* Deterministic, thread-count independent init: each tensor is cut into chunks and every chunk
   draws from its own RNG stream. */
#define INIT_CHUNK 65536
static void init_params(gpt *m, uint64_t seed) {
    for (int i = 0; i < m->nt; i++) {
        gpt_tensor *t = &m->t[i];
        float *p = m->params + t->off;
        size_t n = t->numel, nch = (n + INIT_CHUNK - 1) / INIT_CHUNK;
        #pragma omp parallel for schedule(static)
        for (size_t c = 0; c < nch; c++) {
            size_t j0 = c * INIT_CHUNK, j1 = j0 + INIT_CHUNK < n ? j0 + INIT_CHUNK : n;
            lssar_rng r;
            lssar_rng_stream(&r, seed, ((uint64_t)i << 32) | c);
            if (t->init == INIT_NORMAL) {
                // Box-Muller using both outputs of each pair (half the log / sqrt calls of
                // lssar_rng_normal: a 124M model initialises in half the time)
                for (size_t j = j0; j < j1; j += 2) {
                    double u1 = lssar_rng_uniform(&r), u2 = lssar_rng_uniform(&r), sn, cs;
                    if (u1 < 1e-300) u1 = 1e-300;
                    double rad = t->std * sqrt(-2.0 * log(u1));
                    sincos(2.0 * M_PI * u2, &sn, &cs);
                    p[j] = (float)(rad * cs);
                    if (j + 1 < j1) p[j + 1] = (float)(rad * sn);
                }
            } else {
                float v = t->init == INIT_ZERO ? 0.0f : t->init == INIT_ONE ? 1.0f : 0.43f;
                for (size_t j = j0; j < j1; j++) p[j] = v;
            }
        }
    }
}

/* Allocate n floats, 64-byte aligned, zeroed (the pages are touched here, once). */
float *gpt_alloc_floats(size_t n) {
    if (n == 0) n = 16;
    size_t bytes = round16(n) * sizeof(float);
    float *p = aligned_alloc(64, bytes);
    if (!p) return NULL;
    size_t nn = round16(n);
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < nn; i++) p[i] = 0.0f;
    return p;
}

int gpt_create_empty(const gpt_config *cfg, gpt **out) {
    if (!out) return lssar_fail(LSSAR_E_NULL, "gpt_create: out is NULL");
    *out = NULL;
    int rc = gpt_config_check(cfg);
    if (rc) return rc;
    gpt *m = calloc(1, sizeof *m);
    if (!m) return lssar_fail(LSSAR_E_NOMEM, "gpt_create: out of memory");
    m->cfg = *cfg;
    m->lt = calloc((size_t)cfg->layers * LT_N, sizeof(int));
    m->t = calloc(num_tensors_for(cfg), sizeof(gpt_tensor));
    if (!m->lt || !m->t) { gpt_free(m); return lssar_fail(LSSAR_E_NOMEM, "gpt_create: out of memory"); }
    build_table(m);
    m->params = gpt_alloc_floats(m->nfloats);
    if (!m->params) {
        size_t mb = m->nfloats * 4 >> 20;
        gpt_free(m);
        return lssar_fail(LSSAR_E_NOMEM, "gpt_create: cannot allocate %zu MiB of parameters", mb);
    }
    *out = m;
    return 0;
}

int gpt_create(const gpt_config *cfg, uint64_t seed, gpt **out) {
    int rc = gpt_create_empty(cfg, out);
    if (!rc) init_params(*out, seed);
    return rc;
}

static void free_acts(gpt *m) {
    free(m->acts); m->acts = NULL;
    free(m->la); m->la = NULL;
    free(m->inputs); m->inputs = NULL;
    free(m->targets); m->targets = NULL;
    free(m->losses); m->losses = NULL;
    free(m->argmax); m->argmax = NULL;
    m->rN = m->rT = m->rtrain = 0;
    m->fvalid = 0;
    m->fhidden = 0;
}

void gpt_free(gpt *m) {
    if (!m) return;
    free_acts(m);
    gpt_decode_free(m);
    free(m->rope_cos);
    free(m->rope_sin);
    free(m->params);
    free(m->grads);
    free(m->adam_m);
    free(m->adam_v);
    free(m->t);
    free(m->lt);
    free(m);
}

const gpt_config *gpt_get_config(const gpt *m) { return m ? &m->cfg : NULL; }

size_t gpt_num_params(const gpt *m) {
    if (!m) return 0;
    size_t n = 0;
    for (int i = 0; i < m->nt; i++) n += m->t[i].numel;
    return n;
}

/* ------------------------------------------------------------- memory */

int gpt_ensure_opt_state(gpt *m) {
    if (m->grads) return 0;
    m->grads = gpt_alloc_floats(m->nfloats);
    m->adam_m = gpt_alloc_floats(m->nfloats);
    m->adam_v = gpt_alloc_floats(m->nfloats);
    if (!m->grads || !m->adam_m || !m->adam_v) {
        free(m->grads); free(m->adam_m); free(m->adam_v);
        m->grads = m->adam_m = m->adam_v = NULL;
        return lssar_fail(LSSAR_E_NOMEM, "gpt: cannot allocate 3 x %zu MiB for gradients and AdamW state",
                          m->nfloats * 4 >> 20);
    }
    return 0;
}

int gpt_ensure_rope(gpt *m, int T) {
    if (m->cfg.pos != GPT_POS_ROPE || T <= m->rope_T) return 0;
    int HS = m->cfg.dim / m->cfg.heads;
    float *c = gpt_alloc_floats((size_t)T * HS / 2), *s = gpt_alloc_floats((size_t)T * HS / 2);
    if (!c || !s) { free(c); free(s); return lssar_fail(LSSAR_E_NOMEM, "gpt: cannot allocate the RoPE table"); }
    rope_table(c, s, T, HS, 10000.0);
    free(m->rope_cos); free(m->rope_sin);
    m->rope_cos = c; m->rope_sin = s; m->rope_T = T;
    return 0;
}

/* Lay the activations out in one block; base == NULL only counts. Returns the float count. */
static size_t act_layout(gpt *m, float *base, size_t N, int train) {
    const gpt_config *c = &m->cfg;
    size_t C = c->dim, off = 0;
#define TAKE(ptr, n) do { if (base) (ptr) = base + off; off += round16(n); } while (0)
    int nsets = train ? c->layers : 1;   // evaluation reuses one set for every layer
    for (int l = 0; l < nsets; l++) {
        gpt_layer_acts *a = &m->la[l];
        TAKE(a->ln1, N * C); TAKE(a->ln1_mean, N); TAKE(a->ln1_rstd, N);
        TAKE(a->q, N * C); TAKE(a->k, N * C); TAKE(a->v, N * C); TAKE(a->att, N * C);
        TAKE(a->res1, N * C);
        TAKE(a->ln2, N * C); TAKE(a->ln2_mean, N); TAKE(a->ln2_rstd, N);
        TAKE(a->fch, N * 4 * C); TAKE(a->fch_gelu, N * 4 * C);
        TAKE(a->res2, N * C);
    }
    if (base)
        for (int l = nsets; l < c->layers; l++) m->la[l] = m->la[0];
    TAKE(m->encoded, N * C);
    TAKE(m->lnf, N * C); TAKE(m->lnf_mean, N); TAKE(m->lnf_rstd, N);
    TAKE(m->scratch, N * C);
    // logits: all rows when training (the backward pass turns them into dlogits in place),
    // chunks of rows in evaluation, so memory stays linear in T with a 50k vocabulary
    size_t R = train ? N : (N < GPT_EVAL_ROWS ? N : GPT_EVAL_ROWS);
    if (base) m->logit_rows = (int)R;
    TAKE(m->logits, c->channels * R * c->vocab);
    if (train) {
        TAKE(m->dres, N * C); TAKE(m->dln, N * C); TAKE(m->datt, N * C);
        TAKE(m->dq, N * C); TAKE(m->dk, N * C); TAKE(m->dv, N * C);
        TAKE(m->dfch, N * 4 * C);
        TAKE(m->ds_tmp, c->heads);
    }
#undef TAKE
    return off;
}

int gpt_reserve(gpt *m, int B, int T, int train) {
    if (!m) return lssar_fail(LSSAR_E_NULL, "gpt_reserve: model is NULL");
    if (B < 1 || T < 1) return lssar_fail(LSSAR_E_SIZE, "gpt_reserve: B = %d, T = %d; both must be >= 1", B, T);
    if (m->cfg.pos == GPT_POS_LEARNED && T > m->cfg.max_seq)
        return lssar_fail(LSSAR_E_SIZE, "gpt_reserve: T = %d exceeds max_seq = %d of a model with learned "
                          "positions; use T <= %d (or RoPE / no positions)", T, m->cfg.max_seq, m->cfg.max_seq);
    if ((long)B * T > (1L << 30)) return lssar_fail(LSSAR_E_SIZE, "gpt_reserve: B*T = %ld too large", (long)B * T);
    train = train ? 1 : 0;
    int N = B * T;
    if (m->acts && N <= m->rN && T <= m->rT && train <= m->rtrain) return 0;   // already fits
    // grow to cover both the old and the new shapes
    if (m->acts) {
        if (m->rN > N) N = m->rN;
        if (m->rT > T) T = m->rT;
        if (m->rtrain > train) train = m->rtrain;
    }
    free_acts(m);
    if (train) { int rc = gpt_ensure_opt_state(m); if (rc) return rc; }
    int rc = gpt_ensure_rope(m, T);
    if (rc) return rc;
    m->la = calloc(m->cfg.layers, sizeof(gpt_layer_acts));
    if (!m->la) return lssar_fail(LSSAR_E_NOMEM, "gpt_reserve: out of memory");
    size_t n = act_layout(m, NULL, N, train);
    m->acts = gpt_alloc_floats(n);
    size_t nt = (size_t)N * m->cfg.channels;
    m->inputs = calloc(nt, sizeof(uint16_t));
    m->targets = calloc(nt, sizeof(uint16_t));
    m->losses = calloc(nt, sizeof(float));
    m->argmax = calloc(nt, sizeof(uint16_t));
    if (!m->acts || !m->inputs || !m->targets || !m->losses || !m->argmax) {
        free_acts(m);
        return lssar_fail(LSSAR_E_NOMEM, "gpt_reserve: cannot allocate %zu MiB of activations for %d rows; "
                          "use a smaller batch or T", n * 4 >> 20, N);
    }
    act_layout(m, m->acts, N, train);
    m->rN = N; m->rT = T; m->rtrain = train;
    return 0;
}

/* ------------------------------------------------------------- forward */

static int check_tokens(const gpt *m, const uint16_t *tok, size_t n, int allow_ignore, const char *what) {
    int V = m->cfg.vocab, Ch = m->cfg.channels;
    for (size_t i = 0; i < n; i++) {
        if (tok[i] < V || (allow_ignore && tok[i] == GPT_IGNORE)) continue;
        return lssar_fail(LSSAR_E_ARG, "gpt_forward: %s token %u at position %zu channel %zu is out of range; "
                          "the vocabulary has %d tokens%s", what, (unsigned)tok[i], i / Ch, i % Ch, V,
                          allow_ignore ? " (65535 = ignore)" : "");
    }
    return 0;
}

lssar_attn_desc gpt_attn_desc(const gpt *m, int l) {
    lssar_attn_desc d = {m->cfg.attn, m->cfg.p, NULL};
    int i = m->lt[l * LT_N + LT_SSMAX];
    if (i >= 0) d.ssmax_s = m->params + m->t[i].off;
    return d;
}

/* The trunk of the forward pass: embeddings, blocks, final LayerNorm -> m->lnf (N, C). targets
   (may be NULL) are only validated and kept for the output heads. */
static int forward_trunk(gpt *m, const uint16_t *inputs, const uint16_t *targets, int B, int T) {
    if (!m || !inputs) return lssar_fail(LSSAR_E_NULL, "gpt_forward: model or inputs is NULL");
    const gpt_config *c = &m->cfg;
    if (B < 1 || T < 1) return lssar_fail(LSSAR_E_SIZE, "gpt_forward: B = %d, T = %d; both must be >= 1", B, T);
    if (c->pos == GPT_POS_LEARNED && T > c->max_seq)
        return lssar_fail(LSSAR_E_SIZE, "gpt_forward: T = %d exceeds max_seq = %d of a model with learned "
                          "positions; use T <= %d", T, c->max_seq, c->max_seq);
    if (!m->acts || (long)B * T > m->rN || T > m->rT)
        return lssar_fail(LSSAR_E_SIZE, "gpt_forward: batch %d x %d exceeds the reserved %d rows / T = %d; "
                          "call gpt_reserve with the largest shape first", B, T, m->rN, m->rT);
    int N = B * T, C = c->dim, NH = c->heads, HS = C / NH, Ch = c->channels, L = c->layers;
    size_t ntok = (size_t)N * Ch;
    int rc = check_tokens(m, inputs, ntok, 0, "input");
    if (!rc && targets) rc = check_tokens(m, targets, ntok, 1, "target");
    if (rc) return rc;
    m->fvalid = 0;
    m->fhidden = 0;
    m->fbackward_ready = 0;   // until this forward completes
    memcpy(m->inputs, inputs, ntok * sizeof(uint16_t));
    if (targets) memcpy(m->targets, targets, ntok * sizeof(uint16_t));
    const float *P = m->params;
#define W(l, k) (P + m->t[m->lt[(l) * LT_N + (k)]].off)
    float *wte[GPT_MAX_CHANNELS];
    for (int ch = 0; ch < Ch; ch++) wte[ch] = m->params + m->t[m->i_wte[ch]].off;
    embedding_forward(m->encoded, m->inputs, wte, m->i_wpe >= 0 ? P + m->t[m->i_wpe].off : NULL, B, T, Ch, C);
    const float *x = m->encoded;   // the residual stream (N, C)
    for (int l = 0; l < L; l++) {
        gpt_layer_acts *a = &m->la[l];
        const float *wqkv = W(l, LT_QKVW), *bqkv = W(l, LT_QKVB);
        layernorm_forward(a->ln1, a->ln1_mean, a->ln1_rstd, x, W(l, LT_LN1W), W(l, LT_LN1B), N, C);
        // q, k, v (N, C) each: three sgemms straight into the (B, T, NH, HS) layout attention
        // wants, instead of one (N, 3C) sgemm and a copy
        matmul_forward(a->q, a->ln1, wqkv, bqkv, N, C, C);
        matmul_forward(a->k, a->ln1, wqkv + (size_t)C * C, bqkv + C, N, C, C);
        matmul_forward(a->v, a->ln1, wqkv + (size_t)2 * C * C, bqkv + 2 * C, N, C, C);
        if (c->pos == GPT_POS_ROPE) {
            rope_forward(a->q, m->rope_cos, m->rope_sin, B, T, NH, HS, 0);
            rope_forward(a->k, m->rope_cos, m->rope_sin, B, T, NH, HS, 0);
        }
        lssar_attn_desc d = gpt_attn_desc(m, l);
        rc = attention_forward(a->att, a->q, a->k, a->v, &d, B, T, NH, HS);
        if (rc) return rc;
        matmul_forward(m->scratch, a->att, W(l, LT_PROJW), W(l, LT_PROJB), N, C, C);
        residual_forward(a->res1, x, m->scratch, (size_t)N * C);
        layernorm_forward(a->ln2, a->ln2_mean, a->ln2_rstd, a->res1, W(l, LT_LN2W), W(l, LT_LN2B), N, C);
        matmul_forward(a->fch, a->ln2, W(l, LT_FCW), W(l, LT_FCB), N, C, 4 * C);
        gelu_forward(a->fch_gelu, a->fch, (size_t)N * 4 * C);
        matmul_forward(m->scratch, a->fch_gelu, W(l, LT_FCPW), W(l, LT_FCPB), N, 4 * C, C);
        residual_forward(a->res2, a->res1, m->scratch, (size_t)N * C);
        x = a->res2;
    }
    layernorm_forward(m->lnf, m->lnf_mean, m->lnf_rstd, x, P + m->t[m->i_lnfw].off,
                      P + m->t[m->i_lnfb].off, N, C);
#undef W
    m->fB = B; m->fT = T;
    m->fhidden = 1;
    return 0;
}

int gpt_forward(gpt *m, const uint16_t *inputs, const uint16_t *targets, int B, int T, float *loss) {
    int rc = forward_trunk(m, inputs, targets, B, T);
    if (rc) return rc;
    const gpt_config *c = &m->cfg;
    int N = B * T, C = c->dim, V = c->vocab, Ch = c->channels;
    const float *P = m->params;
    // output heads, in chunks of R rows: logits (Ch, R, V) -> probabilities, loss, argmax
    int R = m->logit_rows;
    double total = 0.0;
    long count = 0;
    for (int r0 = 0; r0 < N; r0 += R) {
        int rr = N - r0 < R ? N - r0 : R;
        for (int ch = 0; ch < Ch; ch++) {
            float *lg = m->logits + (size_t)ch * R * V;
            matmul_forward(lg, m->lnf + (size_t)r0 * C, P + m->t[m->i_head[ch]].off, NULL, rr, C, V);
            size_t o = (size_t)r0 * Ch + ch;
            total += softmax_xent_forward(lg, m->losses + o, m->argmax + o, targets ? m->targets + o : NULL,
                                          Ch, Ch, rr, V, &count);
        }
    }
    m->fvalid = 1;
    m->ftargets = targets != NULL;
    m->fcount = count;
    // the probabilities of every row are still there only if one chunk held all rows
    m->fbackward_ready = m->rtrain && targets && R >= N;
    m->floss = count ? (float)(total / count) : 0.0f;
    if (loss) *loss = m->floss;
    if (targets && !isfinite(m->floss))
        return lssar_fail(LSSAR_E_NAN, "gpt_forward: the loss is %g; lower the learning rate or clip "
                          "gradients", (double)m->floss);
    return 0;
}

int gpt_get_losses(const gpt *m, float *out) {
    if (!m || !out) return lssar_fail(LSSAR_E_NULL, "gpt_get_losses: NULL argument");
    if (!m->fvalid) return lssar_fail(LSSAR_E_ARG, "gpt_get_losses: no forward pass has run");
    size_t n = (size_t)m->fB * m->fT * m->cfg.channels;
    if (m->ftargets) memcpy(out, m->losses, n * sizeof(float));
    else memset(out, 0, n * sizeof(float));
    return 0;
}

int gpt_get_argmax(const gpt *m, uint16_t *out) {
    if (!m || !out) return lssar_fail(LSSAR_E_NULL, "gpt_get_argmax: NULL argument");
    if (!m->fvalid) return lssar_fail(LSSAR_E_ARG, "gpt_get_argmax: no forward pass has run");
    memcpy(out, m->argmax, (size_t)m->fB * m->fT * m->cfg.channels * sizeof(uint16_t));
    return 0;
}

/* The hidden states of the last forward: lnf (B, T, C). */
int gpt_forward_hidden(gpt *m, const uint16_t *inputs, int B, int T) {
    return forward_trunk(m, inputs, NULL, B, T);
}

int gpt_get_hidden(const gpt *m, float *out) {
    if (!m || !out) return lssar_fail(LSSAR_E_NULL, "gpt_get_hidden: NULL argument");
    if (!m->fhidden) return lssar_fail(LSSAR_E_ARG, "gpt_get_hidden: no forward pass has run");
    memcpy(out, m->lnf, sizeof(float) * (size_t)m->fB * m->fT * m->cfg.dim);
    return 0;
}

/* ------------------------------------------------------------- backward */

int gpt_zero_grad(gpt *m) {
    if (!m) return lssar_fail(LSSAR_E_NULL, "gpt_zero_grad: model is NULL");
    int rc = gpt_ensure_opt_state(m);
    if (rc) return rc;
    zero_fill(m->grads, m->nfloats);
    return 0;
}

static int backward_trunk(gpt *m);

int gpt_backward(gpt *m, float grad_scale) {
    if (!m) return lssar_fail(LSSAR_E_NULL, "gpt_backward: model is NULL");
    if (!m->fbackward_ready)
        return lssar_fail(LSSAR_E_ARG, "gpt_backward: needs a gpt_forward with targets just before it, on a "
                          "model reserved with train = 1 (and only one backward per forward)");
    m->fbackward_ready = 0;   // the probabilities are consumed in place below
    if (m->fcount == 0) return 0;   // every target ignored: the loss is constant
    const gpt_config *c = &m->cfg;
    int N = m->fB * m->fT, C = c->dim, V = c->vocab, Ch = c->channels;
    const float *P = m->params;
    float *G = m->grads;
    // output heads: dlogits = scale (p - onehot) in place; dlnf (N, C) = sum_ch dlogits_ch W_ch
    float scale = grad_scale / (float)m->fcount;
    for (int ch = 0; ch < Ch; ch++) {
        float *lg = m->logits + (size_t)ch * N * V;   // R == N when training
        softmax_xent_backward(lg, m->targets + ch, Ch, N, V, scale);
        size_t o = m->t[m->i_head[ch]].off;
        matmul_backward(m->dln, G + o, NULL, lg, m->lnf, P + o, N, C, V, ch > 0);
    }
    return backward_trunk(m);
}

/* Backward of the trunk from m->dln = the gradient on the final hidden states (N, C): the final
   LayerNorm, the blocks in reverse, the embeddings. Only reads the activations, so a second call
   after the same forward is fine. */
static int backward_trunk(gpt *m) {
    const gpt_config *c = &m->cfg;
    int B = m->fB, T = m->fT, N = B * T, C = c->dim, NH = c->heads, HS = C / NH;
    int Ch = c->channels, L = c->layers;
    const float *P = m->params;
    float *G = m->grads;
#define W(l, k) (P + m->t[m->lt[(l) * LT_N + (k)]].off)
#define DW(l, k) (G + m->t[m->lt[(l) * LT_N + (k)]].off)
    const float *xlast = m->la[L - 1].res2;
    zero_fill(m->dres, (size_t)N * C);
    layernorm_backward(m->dres, G + m->t[m->i_lnfw].off, G + m->t[m->i_lnfb].off, m->dln, xlast,
                       P + m->t[m->i_lnfw].off, m->lnf_mean, m->lnf_rstd, N, C);
    // blocks in reverse; dres is the gradient of the residual stream, which the residual
    // additions pass through unchanged (so no explicit residual_backward is needed)
    for (int l = L - 1; l >= 0; l--) {
        gpt_layer_acts *a = &m->la[l];
        const float *x = l ? m->la[l - 1].res2 : m->encoded;
        // MLP: res2 = res1 + c_proj(gelu(c_fc(ln_2(res1))))
        matmul_backward(m->dfch, DW(l, LT_FCPW), DW(l, LT_FCPB), m->dres, a->fch_gelu, W(l, LT_FCPW),
                        N, 4 * C, C, 0);
        gelu_backward(m->dfch, a->fch, m->dfch, (size_t)N * 4 * C);
        matmul_backward(m->dln, DW(l, LT_FCW), DW(l, LT_FCB), m->dfch, a->ln2, W(l, LT_FCW), N, C, 4 * C, 0);
        layernorm_backward(m->dres, DW(l, LT_LN2W), DW(l, LT_LN2B), m->dln, a->res1, W(l, LT_LN2W),
                           a->ln2_mean, a->ln2_rstd, N, C);
        // attention: res1 = x + c_proj(attn(rope(c_attn(ln_1(x)))))
        matmul_backward(m->datt, DW(l, LT_PROJW), DW(l, LT_PROJB), m->dres, a->att, W(l, LT_PROJW),
                        N, C, C, 0);
        lssar_attn_desc d = gpt_attn_desc(m, l);
        float *dscale = m->lt[l * LT_N + LT_SSMAX] >= 0 ? DW(l, LT_SSMAX) : NULL;
        int rc = attention_backward(m->dq, m->dk, m->dv, dscale, m->ds_tmp, m->datt, a->q, a->k, a->v, &d,
                                    B, T, NH, HS);
        if (rc) return rc;
        if (c->pos == GPT_POS_ROPE) {
            rope_backward(m->dq, m->rope_cos, m->rope_sin, B, T, NH, HS, 0);
            rope_backward(m->dk, m->rope_cos, m->rope_sin, B, T, NH, HS, 0);
        }
        float *dw = DW(l, LT_QKVW), *db = DW(l, LT_QKVB);
        const float *w = W(l, LT_QKVW);
        size_t CC = (size_t)C * C;
        matmul_backward(m->dln, dw, db, m->dq, a->ln1, w, N, C, C, 0);
        matmul_backward(m->dln, dw + CC, db + C, m->dk, a->ln1, w + CC, N, C, C, 1);
        matmul_backward(m->dln, dw + 2 * CC, db + 2 * C, m->dv, a->ln1, w + 2 * CC, N, C, C, 1);
        layernorm_backward(m->dres, DW(l, LT_LN1W), DW(l, LT_LN1B), m->dln, x, W(l, LT_LN1W),
                           a->ln1_mean, a->ln1_rstd, N, C);
    }
#undef W
#undef DW
    float *dwte[GPT_MAX_CHANNELS];
    for (int ch = 0; ch < Ch; ch++) dwte[ch] = G + m->t[m->i_wte[ch]].off;
    embedding_backward(dwte, m->i_wpe >= 0 ? G + m->t[m->i_wpe].off : NULL, m->dres, m->inputs, B, T, Ch, C);
    return 0;
}

int gpt_backward_hidden(gpt *m, const float *dhidden, float grad_scale) {
    if (!m || !dhidden) return lssar_fail(LSSAR_E_NULL, "gpt_backward_hidden: NULL argument");
    if (!m->fhidden || !m->rtrain)
        return lssar_fail(LSSAR_E_ARG, "gpt_backward_hidden: needs a gpt_forward or gpt_forward_hidden just before "
                          "it, on a model reserved with train = 1");
    int rc = gpt_ensure_opt_state(m);
    if (rc) return rc;
    size_t n = (size_t)m->fB * m->fT * m->cfg.dim;
    for (size_t i = 0; i < n; i++) m->dln[i] = grad_scale * dhidden[i];
    return backward_trunk(m);
}

float gpt_clip_grad_norm(gpt *m, float max_norm) {
    if (!m || !m->grads) return 0.0f;
    double ss = sum_squares(m->grads, m->nfloats);
    if (!isfinite(ss)) return NAN;
    float norm = (float)sqrt(ss);
    if (max_norm > 0.0f && norm > max_norm) scale_inplace(m->grads, m->nfloats, max_norm / norm);
    return norm;
}

int gpt_adamw_step(gpt *m, int t, float lr, float beta1, float beta2, float eps, float weight_decay) {
    if (!m) return lssar_fail(LSSAR_E_NULL, "gpt_adamw_step: model is NULL");
    if (t < 1) return lssar_fail(LSSAR_E_ARG, "gpt_adamw_step: step t = %d; steps count from 1", t);
    if (!(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1 && eps > 0))
        return lssar_fail(LSSAR_E_ARG, "gpt_adamw_step: need 0 <= beta1, beta2 < 1 and eps > 0 (got %g, %g, %g)",
                          (double)beta1, (double)beta2, (double)eps);
    int rc = gpt_ensure_opt_state(m);
    if (rc) return rc;
    for (int i = 0; i < m->nt; i++) {
        const gpt_tensor *tt = &m->t[i];
        adamw_update(m->params + tt->off, m->grads + tt->off, m->adam_m + tt->off, m->adam_v + tt->off,
                     tt->numel, t, lr, beta1, beta2, eps, tt->decay ? weight_decay : 0.0f);
    }
    return 0;
}

/* ------------------------------------------------------------- tensor table API */

int gpt_num_tensors(const gpt *m) { return m ? m->nt : 0; }
const char *gpt_tensor_name(const gpt *m, int i) { return m && i >= 0 && i < m->nt ? m->t[i].name : NULL; }
int gpt_tensor_ndim(const gpt *m, int i) { return m && i >= 0 && i < m->nt ? m->t[i].ndim : 0; }
const int *gpt_tensor_shape(const gpt *m, int i) { return m && i >= 0 && i < m->nt ? m->t[i].shape : NULL; }
size_t gpt_tensor_numel(const gpt *m, int i) { return m && i >= 0 && i < m->nt ? m->t[i].numel : 0; }

int gpt_tensor_index(const gpt *m, const char *name) {
    if (!m || !name) return -1;
    for (int i = 0; i < m->nt; i++)
        if (!strcmp(m->t[i].name, name)) return i;
    return -1;
}

static float *buffer_of(const gpt *m, gpt_buffer which) {
    switch (which) {
    case GPT_BUF_PARAM: return m->params;
    case GPT_BUF_GRAD: return m->grads;
    case GPT_BUF_ADAM_M: return m->adam_m;
    case GPT_BUF_ADAM_V: return m->adam_v;
    }
    return NULL;
}

int gpt_read_tensor(const gpt *m, gpt_buffer which, int i, float *dst) {
    if (!m || !dst) return lssar_fail(LSSAR_E_NULL, "gpt_read_tensor: NULL argument");
    if (i < 0 || i >= m->nt) return lssar_fail(LSSAR_E_ARG, "gpt_read_tensor: tensor %d of %d", i, m->nt);
    if ((unsigned)which > GPT_BUF_ADAM_V) return lssar_fail(LSSAR_E_KIND, "gpt_read_tensor: buffer %d", (int)which);
    const float *b = buffer_of(m, which);
    if (!b) memset(dst, 0, m->t[i].numel * sizeof(float));   // not allocated yet: all zero
    else memcpy(dst, b + m->t[i].off, m->t[i].numel * sizeof(float));
    return 0;
}

int gpt_write_tensor(gpt *m, gpt_buffer which, int i, const float *src) {
    if (!m || !src) return lssar_fail(LSSAR_E_NULL, "gpt_write_tensor: NULL argument");
    if (i < 0 || i >= m->nt) return lssar_fail(LSSAR_E_ARG, "gpt_write_tensor: tensor %d of %d", i, m->nt);
    if ((unsigned)which > GPT_BUF_ADAM_V) return lssar_fail(LSSAR_E_KIND, "gpt_write_tensor: buffer %d", (int)which);
    if (which != GPT_BUF_PARAM) { int rc = gpt_ensure_opt_state(m); if (rc) return rc; }
    memcpy(buffer_of(m, which) + m->t[i].off, src, m->t[i].numel * sizeof(float));
    m->fbackward_ready = 0;   // a new parameter makes the stored forward stale
    m->fhidden = 0;
    return 0;
}
