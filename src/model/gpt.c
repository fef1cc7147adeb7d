/*
 * gpt.c - the GPT model (see gpt.h): parameter table and initialisation, activation memory, the
 * block forward and backward, the output heads, AdamW, tensor copy-in / copy-out. The model only
 * orchestrates: every tensor lives in its backend's memory and every operation on one is a call
 * into the backend (nn/backend.h), so this file never reads or writes a tensor itself. The KV
 * cache (decoding) is gpt_decode.c, the probes gpt_probe.c; both run the block forward below.
 *
 * Memory (llm.c style): one contiguous block each for parameters, gradients, AdamW m and v (same
 * layout, tensors 64-byte aligned), and one block of activations allocated by gpt_reserve and
 * reused by every step: nothing is allocated per step.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include "attn/attn.h"
#include "attn/flash.h"
#include "model/gpt_internal.h"

/* ------------------------------------------------------------------ config */

// Indexed by lssar_pos: the names of the CLI, checkpoints and reports.
static const char *const POS_NAMES[] = {"rope", "learned", "none"};
#define N_POS (int)(sizeof POS_NAMES / sizeof POS_NAMES[0])

static int pos_ok(lssar_pos pos) { return (unsigned)pos < (unsigned)N_POS; }

const char *lssar_pos_name(lssar_pos pos) { return pos_ok(pos) ? POS_NAMES[pos] : "unknown"; }

int gpt_pos_check(lssar_pos pos, const char *what) {
    if (pos_ok(pos)) return 0;
    return lssar_fail(LSSAR_E_KIND, "%s = %d is not an lssar_pos (rope, learned or none)", what, (int)pos);
}

int gpt_pos_parse(const char *name) {
    for (int i = 0; name && i < N_POS; i++)
        if (!strcmp(name, POS_NAMES[i])) return i;
    return -1;
}

const char *gpt_not_gpt2(const gpt_config *c) {
    return c->attn != LSSAR_ATTN_SOFTMAX ? "its attention is not softmax"
           : c->pos != LSSAR_POS_LEARNED  ? "its positions are not learned (GPT-2 has a wpe table)"
           : !c->tied                   ? "its output head is not tied to the embedding"
           : c->channels != 1           ? "it has more than one token channel"
                                        : NULL;
}

int gpt_config_check(const gpt_config *c) {
    if (!c) return lssar_fail(LSSAR_E_NULL, "gpt config: NULL pointer");
    if (c->layers < 1 || c->layers > 1024)
        return lssar_fail(LSSAR_E_SIZE, "gpt config: layers = %d; use 1..1024", c->layers);
    if (c->heads < 1) return lssar_fail(LSSAR_E_SIZE, "gpt config: heads = %d; use >= 1", c->heads);
    if (c->dim < 1 || c->dim % c->heads)
        return lssar_fail(LSSAR_E_SIZE, "gpt config: dim = %d must be a positive multiple of heads = %d",
                          c->dim, c->heads);
    if (c->pos == LSSAR_POS_ROPE && (c->dim / c->heads) % 2)
        return lssar_fail(LSSAR_E_SIZE, "gpt config: RoPE needs an even head size, got dim/heads = %d",
                          c->dim / c->heads);
    if (c->vocab < 1 || c->vocab > 65535)
        return lssar_fail(LSSAR_E_SIZE, "gpt config: vocab = %d; use 1..65535 (tokens are uint16, 65535 "
                          "is the ignore marker)", c->vocab);
    if (c->channels < 1 || c->channels > GPT_MAX_CHANNELS)
        return lssar_fail(LSSAR_E_SIZE, "gpt config: channels = %d; use 1..%d", c->channels,
                          GPT_MAX_CHANNELS);
    if (c->max_seq < 1)
        return lssar_fail(LSSAR_E_SIZE, "gpt config: max_seq = %d; use >= 1", c->max_seq);
    int rc = gpt_pos_check(c->pos, "gpt config: pos");
    if (!rc) rc = attn_kind_check(c->attn, "gpt config: attn");
    if (!rc) rc = attn_len_norm_check(c->len_norm, "gpt config: len_norm");
    if (rc) return rc;
    if (attn_reweights(c->attn) && !(c->p > 0.0f && isfinite(c->p)))
        return lssar_fail(LSSAR_E_P,
                          "gpt config: %s re-weighting power p = %g; use a finite p > 0 (15 in the paper)",
                          lssar_attn_name(c->attn), (double)c->p);
    if (c->tied != 0 && c->tied != 1)
        return lssar_fail(LSSAR_E_ARG, "gpt config: tied = %d; use 0 or 1", c->tied);
    if (!(c->rope_base == 0.0f || gpt_rope_base_ok(c->rope_base)))
        return lssar_fail(LSSAR_E_ARG,
                          "gpt config: rope_base = %g; use a finite base > 1 (10000 is GPT-NeoX's; 0 means "
                          "10000)",
                          (double)c->rope_base);
    if (!attn_temp_d_ok(c->temp_d))
        return lssar_fail(LSSAR_E_ARG, "gpt config: temp_d = %d; use 0 (ln of the head size) or a D >= 2",
                          c->temp_d);
    return 0;
}


/* ---------------------------------------------------------- tensor table */

enum { INIT_NORMAL, INIT_ZERO, INIT_ONE, INIT_SSMAX };

static size_t round16(size_t n) { return (n + 15) & ~(size_t)15; }

/* One tensor of the table, bound to the gpt_params field at `field` (layer -1) or to the
   gpt_block_params field of block `layer`. */
static void add_tensor(gpt *m, const char *name, int layer, size_t field, int ndim, int s0, int s1,
                       int decay, int init, float std) {
    gpt_tensor *t = &m->t[m->nt++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = ndim;
    t->shape[0] = s0;
    t->shape[1] = ndim > 1 ? s1 : 0;
    t->numel = (size_t)s0 * (ndim > 1 ? (size_t)s1 : 1);
    t->off = m->nfloats;
    t->decay = decay;
    t->init = init;
    t->std = std;
    t->layer = layer;
    t->field = field;
    m->nfloats += round16(t->numel);
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
        add_tensor(m, nm, -1, offsetof(gpt_params, wte) + ch * sizeof(float *), 2, V, C, 1, INIT_NORMAL, std);
    }
    if (c->pos == LSSAR_POS_LEARNED)
        add_tensor(m, "wpe", -1, offsetof(gpt_params, wpe), 2, c->max_seq, C, 1, INIT_NORMAL, std);
    for (int l = 0; l < L; l++) {
#define T1(f, suffix, n, init) \
        snprintf(nm, sizeof nm, "h.%d.%s", l, suffix); \
        add_tensor(m, nm, l, offsetof(gpt_block_params, f), 1, n, 0, 0, init, 0)
#define T2(f, suffix, r, cc, sd) \
        snprintf(nm, sizeof nm, "h.%d.%s", l, suffix); \
        add_tensor(m, nm, l, offsetof(gpt_block_params, f), 2, r, cc, 1, INIT_NORMAL, sd)
        T1(ln1w, "ln_1.weight", C, INIT_ONE);
        T1(ln1b, "ln_1.bias", C, INIT_ZERO);
        T2(qkvw, "attn.c_attn.weight", 3 * C, C, std);
        T1(qkvb, "attn.c_attn.bias", 3 * C, INIT_ZERO);
        T2(attprojw, "attn.c_proj.weight", C, C, rstd);
        T1(attprojb, "attn.c_proj.bias", C, INIT_ZERO);
        if (attn_has_ssmax_s(c->attn)) { T1(ssmax_s, "attn.ssmax_s", c->heads, INIT_SSMAX); }
        T1(ln2w, "ln_2.weight", C, INIT_ONE);
        T1(ln2b, "ln_2.bias", C, INIT_ZERO);
        T2(fcw, "mlp.c_fc.weight", 4 * C, C, std);
        T1(fcb, "mlp.c_fc.bias", 4 * C, INIT_ZERO);
        T2(fcprojw, "mlp.c_proj.weight", C, 4 * C, rstd);
        T1(fcprojb, "mlp.c_proj.bias", C, INIT_ZERO);
#undef T1
#undef T2
    }
    add_tensor(m, "ln_f.weight", -1, offsetof(gpt_params, lnfw), 1, C, 0, 0, INIT_ONE, 0);
    add_tensor(m, "ln_f.bias", -1, offsetof(gpt_params, lnfb), 1, C, 0, 0, INIT_ZERO, 0);
    if (!c->tied)
        for (int ch = 0; ch < c->channels; ch++) {
            snprintf(nm, sizeof nm, "lm_head.%d", ch);
            add_tensor(m, nm, -1, offsetof(gpt_params, head) + ch * sizeof(float *), 2, V, C, 1, INIT_NORMAL,
                       std);
        }
}

static int num_tensors_for(const gpt_config *c) {
    return 2 * c->channels + 1 + c->layers * 13 + 2;   // an upper bound
}

/* Point every field of P (blocks in h) at its tensor in base, a block laid out by the table. */
static void bind_params(const gpt *m, float *base, gpt_params *P, gpt_block_params *h) {
    memset(P, 0, sizeof *P);
    memset(h, 0, sizeof *h * m->cfg.layers);
    P->h = h;
    for (int i = 0; i < m->nt; i++) {
        const gpt_tensor *t = &m->t[i];
        char *owner = t->layer < 0 ? (char *)P : (char *)&h[t->layer];
        float *p = base + t->off;
        memcpy(owner + t->field, &p, sizeof p);
    }
    if (m->cfg.tied)
        for (int ch = 0; ch < m->cfg.channels; ch++) P->head[ch] = P->wte[ch];
}

/* Deterministic, thread-count independent init, on the host then uploaded: each tensor is cut into
   chunks and every chunk draws from its own RNG stream. */
#define INIT_CHUNK 65536
static int init_params(gpt *m, uint64_t seed) {
    size_t most = 16;
    for (int i = 0; i < m->nt; i++) if (m->t[i].numel > most) most = m->t[i].numel;
    float *host = malloc(most * sizeof(float));   // (most) staging for one tensor at a time
    if (!host)
        return lssar_fail(LSSAR_E_NOMEM, "gpt_create: cannot allocate %zu MiB to initialise", most * 4 >> 20);
    for (int i = 0; i < m->nt; i++) {
        gpt_tensor *t = &m->t[i];
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
                    host[j] = (float)(rad * cs);
                    if (j + 1 < j1) host[j + 1] = (float)(rad * sn);
                }
            } else {
                float v = t->init == INIT_ZERO ? 0.0f : t->init == INIT_ONE ? 1.0f : 0.43f;
                for (size_t j = j0; j < j1; j++) host[j] = v;
            }
        }
        m->be->upload(m->ctx, m->params_mem + t->off, host, n * sizeof(float));
    }
    free(host);
    return 0;
}

static float *alloc_floats(gpt *m, size_t n) {
    return m->be->alloc(m->ctx, round16(n ? n : 1) * sizeof(float));
}

int gpt_create_empty(const gpt_config *cfg, gpt **out) {
    if (!out) return lssar_fail(LSSAR_E_NULL, "gpt_create: out is NULL");
    *out = NULL;
    int rc = gpt_config_check(cfg);
    if (rc) return rc;
    const nn_backend *be;
    if ((rc = nn_backend_get(cfg->device, &be))) return rc;
    gpt *m = calloc(1, sizeof *m);
    if (!m) return lssar_fail(LSSAR_E_NOMEM, "gpt_create: out of memory");
    m->cfg = *cfg;
    if (m->cfg.rope_base == 0.0f) m->cfg.rope_base = GPT_ROPE_BASE;  // checkpoints then record the base used
    m->be = be;
    // A GPU computes its matmuls and attention with bf16 operands (fp32 accumulation, docs/CUDA.md)
    nn_precision prec = cfg->device == LSSAR_DEVICE_CUDA ? NN_BF16 : NN_FP32;
    if ((rc = be->ctx_create(&m->ctx, prec))) { free(m); return rc; }
    m->act_dt = be->act_dtype(m->ctx);
    m->t = calloc(num_tensors_for(cfg), sizeof(gpt_tensor));
    m->hp = calloc(cfg->layers, sizeof(gpt_block_params));
    m->hg = calloc(cfg->layers, sizeof(gpt_block_params));
    if (!m->t || !m->hp || !m->hg) {
        gpt_free(m);
        return lssar_fail(LSSAR_E_NOMEM, "gpt_create: out of memory");
    }
    build_table(m);
    m->params_mem = alloc_floats(m, m->nfloats);
    if (!m->params_mem) {
        size_t mb = m->nfloats * 4 >> 20;
        gpt_free(m);
        return lssar_fail(LSSAR_E_NOMEM, "gpt_create: cannot allocate %zu MiB of parameters", mb);
    }
    bind_params(m, m->params_mem, &m->params, m->hp);
    *out = m;
    return 0;
}

int gpt_create(const gpt_config *cfg, uint64_t seed, gpt **out) {
    int rc = gpt_create_empty(cfg, out);
    if (!rc && (rc = init_params(*out, seed))) { gpt_free(*out); *out = NULL; }
    return rc;
}

int gpt_init_ordinal(gpt *m, int bins) {
    if (!m) return lssar_fail(LSSAR_E_NULL, "gpt_init_ordinal: NULL model");
    const gpt_config *c = &m->cfg;
    int C = c->dim, V = c->vocab, share = C / c->channels, P = share / 2;
    if (bins < 2 || bins > V)
        return lssar_fail(LSSAR_E_ARG, "ordered bins %d: need 2..%d (the vocabulary)", bins, V);
    if (share * c->channels != C || share % 2 || P < 2)
        return lssar_fail(LSSAR_E_ARG,
                          "ordered bins need a width that splits into %d even shares of at least 4 (one per "
                          "channel), got %d",
                          c->channels, C);
    float *w = malloc((size_t)V * C * sizeof(float));   // (V, C) one channel's embedding
    if (!w) return lssar_fail(LSSAR_E_NOMEM, "gpt_init_ordinal: out of memory");
    int rc = 0;
    for (int ch = 0; ch < c->channels && !rc; ch++) {
        char nm[32];
        snprintf(nm, sizeof nm, "wte.%d", ch);
        int ti = gpt_tensor_index(m, nm);
        if ((rc = gpt_read_tensor(m, GPT_BUF_PARAM, ti, w))) break;
        for (int b = 0; b < bins; b++) {
            float *row = w + (size_t)b * C + ch * share;   // (share) this channel's dims of row b
            for (int k = 0; k < P; k++) {
                double ang = 2.0 * M_PI * b / (2.0 * pow(bins, (double)k / (P - 1)));
                row[2 * k] += GPT_ORDINAL_AMP * (float)cos(ang);
                row[2 * k + 1] += GPT_ORDINAL_AMP * (float)sin(ang);
            }
        }
        rc = gpt_write_tensor(m, GPT_BUF_PARAM, ti, w);
    }
    free(w);
    return rc;
}

void gpt_free(gpt *m) {
    if (!m) return;
    if (m->ctx) {
        gpt_acts_free(m, &m->acts);
        m->be->release(m->ctx, m->rope_cos);
        m->be->release(m->ctx, m->rope_sin);
        m->be->release(m->ctx, m->params_mem);
        m->be->release(m->ctx, m->grads_mem);
        m->be->release(m->ctx, m->adam_m);
        m->be->release(m->ctx, m->adam_v);
        m->be->release(m->ctx, m->norm_ss);
        m->be->release(m->ctx, m->norm_dev);
        m->be->ctx_free(m->ctx);
    }
    free(m->t);
    free(m->hp);
    free(m->hg);
    free(m);
}

const gpt_config *gpt_get_config(const gpt *m) { return m ? &m->cfg : NULL; }

size_t gpt_num_params(const gpt *m) {
    if (!m) return 0;
    size_t n = 0;
    for (int i = 0; i < m->nt; i++) n += m->t[i].numel;
    return n;
}

int gpt_device_stats(const gpt *m, char *name, size_t name_len, size_t *held_peak, size_t *used_peak,
                     size_t *total) {
    if (!m || !name || !name_len || !held_peak || !used_peak || !total)
        return lssar_fail(LSSAR_E_NULL, "gpt_device_stats: NULL argument");
    if (!m->be->device_stats)
        return lssar_fail(LSSAR_E_UNSUPPORTED, "the %s backend keeps no device statistics", m->be->name);
    nn_device_stats st;
    m->be->device_stats(m->ctx, &st);
    snprintf(name, name_len, "%s", st.name);
    *held_peak = st.held_peak;
    *used_peak = st.used_peak;
    *total = st.total;
    return 0;
}

/* ------------------------------------------------------------- memory */

static int ensure_opt_state(gpt *m) {
    if (m->grads_mem) return 0;
    m->grads_mem = alloc_floats(m, m->nfloats);
    m->adam_m = alloc_floats(m, m->nfloats);
    m->adam_v = alloc_floats(m, m->nfloats);
    if (!m->grads_mem || !m->adam_m || !m->adam_v) {
        m->be->release(m->ctx, m->grads_mem);
        m->be->release(m->ctx, m->adam_m);
        m->be->release(m->ctx, m->adam_v);
        m->grads_mem = m->adam_m = m->adam_v = NULL;
        return lssar_fail(LSSAR_E_NOMEM, "gpt: cannot allocate 3 x %zu MiB for gradients and AdamW state",
                          m->nfloats * 4 >> 20);
    }
    bind_params(m, m->grads_mem, &m->grads, m->hg);
    return 0;
}

int gpt_ensure_rope(gpt *m, int T) {
    if (m->cfg.pos != LSSAR_POS_ROPE || T <= m->rope_T) return 0;
    int HS = m->cfg.dim / m->cfg.heads;
    size_t n = (size_t)T * HS / 2;
    float *hc = malloc(n * sizeof(float)), *hs = malloc(n * sizeof(float));   // host tables
    float *c = alloc_floats(m, n), *s = alloc_floats(m, n);
    int rc = 0;
    if (!hc || !hs || !c || !s) {
        m->be->release(m->ctx, c); m->be->release(m->ctx, s);
        rc = lssar_fail(LSSAR_E_NOMEM, "gpt: cannot allocate the RoPE table");
    } else {
        rope_table(hc, hs, T, HS, (double)m->cfg.rope_base);
        m->be->upload(m->ctx, c, hc, n * sizeof(float));
        m->be->upload(m->ctx, s, hs, n * sizeof(float));
        m->be->release(m->ctx, m->rope_cos); m->be->release(m->ctx, m->rope_sin);
        m->rope_cos = c; m->rope_sin = s; m->rope_T = T;
    }
    free(hc); free(hs);
    return rc;
}

/* The attention statistics one block set keeps for the backward, for up to N rows: the most any
   layer in [l0, l1) needs (they are linear in the rows, so (1, N) sizes (B, T) batches). */
static size_t stats_floats(const gpt *m, int l0, int l1, size_t N) {
    const gpt_config *c = &m->cfg;
    size_t most = 0;
    for (int l = l0; l < l1; l++) {
        lssar_attn_desc d = gpt_attn_desc(m, l);
        size_t ns = m->be->attention_stats_floats(&d, 1, (int)N, c->heads, c->dim / c->heads);
        if (ns > most) most = ns;
    }
    return most;
}

/* Lay the activations out in one block; base == NULL only counts (and leaves a alone). Returns the
   byte count; every tensor starts on a 64-byte line. Block sets: evaluation reuses one for every block; training keeps one per block,
   or with recompute one shared set plus each block's output res2 (N, C), the next block's input,
   from which the backward runs the block forward again. */
static size_t act_layout(const gpt *m, gpt_acts *a, char *base, size_t N, int train, int recompute) {
    const gpt_config *c = &m->cfg;
    size_t C = c->dim, off = 0;
    int L = c->layers;
    // TAKE: n activations (the context's type); TAKEF: n floats
#define TAKE_BYTES(ptr, bytes) do { if (base) (ptr) = (void *)(base + off); off += ((bytes) + 63) & ~(size_t)63; } while (0)
#define TAKE(ptr, n) TAKE_BYTES(ptr, (n) * nn_dtype_bytes(m->act_dt))
#define TAKEF(ptr, n) TAKE_BYTES(ptr, (n) * sizeof(float))
    recompute = train && recompute;
    int nsets = train && !recompute ? L : 1;
    for (int l = 0; l < nsets; l++) {
        gpt_block_acts b = {0};
        TAKE(b.ln1, N * C); TAKEF(b.ln1_mean, N); TAKEF(b.ln1_rstd, N);
        TAKE(b.q, N * C); TAKE(b.k, N * C); TAKE(b.v, N * C); TAKE(b.att, N * C);
        if (train) {   // a shared set serves every layer
            size_t ns = recompute ? stats_floats(m, 0, L, N) : stats_floats(m, l, l + 1, N);
            if (ns) TAKEF(b.att_stats, ns);
        }
        TAKE(b.res1, N * C);
        TAKE(b.ln2, N * C); TAKEF(b.ln2_mean, N); TAKEF(b.ln2_rstd, N);
        TAKE(b.fch, N * 4 * C); TAKE(b.fch_gelu, N * 4 * C);
        if (!recompute) TAKE(b.res2, N * C);
        if (base) a->h[l] = b;
    }
    for (int l = nsets; l < L; l++)
        if (base) a->h[l] = a->h[0];
    for (int l = 0; l < L && recompute; l++) TAKE(a->h[l].res2, N * C);
    TAKE(a->encoded, N * C);
    TAKE(a->lnf, N * C); TAKEF(a->lnf_mean, N); TAKEF(a->lnf_rstd, N);
    TAKE(a->scratch, N * C);
    // logits: chunks of the backend's eval_rows, in training as in evaluation (the backward makes
    // each chunk's logits again, gpt_backward), so memory stays linear in T with a 50k vocabulary
    size_t R = N < (size_t)m->be->eval_rows ? N : (size_t)m->be->eval_rows;
    if (base) a->logit_rows = (int)R;
    TAKE(a->logits, c->channels * R * c->vocab);
    if (train) {
        TAKE(a->dres, N * C); TAKE(a->dln, N * C); TAKE(a->datt, N * C);
        TAKE(a->dq, N * C); TAKE(a->dk, N * C); TAKE(a->dv, N * C);
        TAKE(a->dfch, N * 4 * C);
    }
    TAKEF(a->losses, N * c->channels);
    // the tokens and the loss accumulator share the block: five uint16 arrays of nt16 entries
    // (whole 64-byte lines each: two sets of inputs and targets, argmax), then two doubles
    size_t nt16 = (N * c->channels + 31) & ~(size_t)31;
    void *tok = NULL, *acc = NULL;
    TAKE_BYTES(tok, 5 * nt16 * sizeof(uint16_t));
    TAKE_BYTES(acc, 2 * sizeof(double));
    if (base) {
        for (int k = 0; k < 2; k++) {
            a->tok_in[k] = (uint16_t *)tok + 2 * k * nt16;
            a->tok_tg[k] = a->tok_in[k] + nt16;
        }
        a->tok_cur = 0;
        a->inputs = a->tok_in[0];
        a->targets = a->tok_tg[0];
        a->argmax = a->tok_in[0] + 4 * nt16;
        a->nt16 = nt16;
        a->loss_acc = (double *)acc;
    }
#undef TAKEF
#undef TAKE
#undef TAKE_BYTES
    return off;
}

int gpt_acts_alloc(gpt *m, int N, int T, int train, gpt_acts *a) {
    memset(a, 0, sizeof *a);
    a->h = calloc(m->cfg.layers, sizeof(gpt_block_acts));
    if (!a->h) return lssar_fail(LSSAR_E_NOMEM, "gpt: out of memory");
    int recompute = train && m->recompute;
    size_t n = act_layout(m, a, NULL, N, train, recompute);
    a->mem = m->be->alloc(m->ctx, n);
    if (!a->mem) {
        free(a->h); a->h = NULL;
        return lssar_fail(LSSAR_E_NOMEM, "gpt: cannot allocate %zu MiB of activations for %d rows; use a "
                          "smaller batch or T", n >> 20, N);
    }
    act_layout(m, a, a->mem, N, train, recompute);
    a->N = N; a->T = T; a->train = train;
    a->recompute = recompute;
    a->held = -1;
    return 0;
}

static void stage_free(gpt *m) {
    for (int k = 0; k < 2; k++) { m->be->host_free(m->ctx, m->staged.host[k]); m->staged.host[k] = NULL; }
    m->staged.ready = 0;
}

void gpt_acts_free(gpt *m, gpt_acts *a) {
    if (a == &m->acts) stage_free(m);   // sized for these activations (and a staged batch is in them)
    if (a->mem) m->be->release(m->ctx, a->mem);
    free(a->h);
    memset(a, 0, sizeof *a);
}

int gpt_reserve(gpt *m, int B, int T, int train) {
    if (!m) return lssar_fail(LSSAR_E_NULL, "gpt_reserve: model is NULL");
    if (B < 1 || T < 1)
        return lssar_fail(LSSAR_E_SIZE, "gpt_reserve: B = %d, T = %d; both must be >= 1", B, T);
    if (m->cfg.pos == LSSAR_POS_LEARNED && T > m->cfg.max_seq)
        return lssar_fail(LSSAR_E_SIZE,
                          "gpt_reserve: T = %d exceeds max_seq = %d of a model with learned positions; use T "
                          "<= %d (or RoPE / no positions)",
                          T, m->cfg.max_seq, m->cfg.max_seq);
    if ((long)B * T > (1L << 30))
        return lssar_fail(LSSAR_E_SIZE, "gpt_reserve: B*T = %ld too large", (long)B * T);
    train = train ? 1 : 0;
    int N = B * T;
    gpt_acts *a = &m->acts;
    if (a->mem && N <= a->N && T <= a->T && train <= a->train && a->recompute == (a->train && m->recompute))
        return 0;   // already fits
    // grow to cover both the old and the new shapes
    if (a->mem) {
        if (a->N > N) N = a->N;
        if (a->T > T) T = a->T;
        if (a->train > train) train = a->train;
    }
    gpt_acts_free(m, a);
    m->last = (gpt_forward_state){0};
    int rc;
    if (train && (rc = ensure_opt_state(m))) return rc;
    if ((rc = gpt_ensure_rope(m, T))) return rc;
    return gpt_acts_alloc(m, N, T, train, a);
}

void gpt_params_changed(gpt *m) {
    // a backward from the stored activations would mix the old parameters with the new
    m->last.heads = 0;
    m->last.hidden = 0;
}

int gpt_set_recompute(gpt *m, int on) {
    if (!m) return lssar_fail(LSSAR_E_NULL, "gpt_set_recompute: model is NULL");
    if (on != 0 && on != 1) return lssar_fail(LSSAR_E_ARG, "gpt_set_recompute: on = %d; use 0 or 1", on);
    m->recompute = on;
    gpt_acts *a = &m->acts;
    if (!a->mem || !a->train || a->recompute == on) return 0;
    // re-lay the reserved shape out (freed first, so the two layouts never coexist)
    int N = a->N, T = a->T;
    gpt_acts_free(m, a);
    m->last = (gpt_forward_state){0};
    return gpt_acts_alloc(m, N, T, 1, a);
}

size_t gpt_activation_bytes(const gpt *m, int B, int T, int train) {
    if (!m || B < 1 || T < 1) return 0;
    return act_layout(m, NULL, NULL, (size_t)B * T, train ? 1 : 0, m->recompute);
}

/* ------------------------------------------------------------- forward */

int gpt_check_tokens(const gpt *m, const uint16_t *tok, size_t n, int allow_ignore, const char *what) {
    int V = m->cfg.vocab, Ch = m->cfg.channels;
    for (size_t i = 0; i < n; i++) {
        if (tok[i] < V || (allow_ignore && tok[i] == GPT_IGNORE)) continue;
        return lssar_fail(LSSAR_E_ARG, "gpt: %s token %u at position %zu channel %zu is out of range; "
                          "the vocabulary has %d tokens%s", what, (unsigned)tok[i], i / Ch, i % Ch, V,
                          allow_ignore ? " (65535 = ignore)" : "");
    }
    return 0;
}

lssar_attn_desc gpt_attn_desc(const gpt *m, int l) {
    // sigmoid / relu with len_norm train: L is the training length max_seq, part of the config
    // (and of the checkpoint), so evaluation at longer T keeps the bias the model was trained with.
    lssar_attn_desc d = {.kind = m->cfg.attn, .p = m->cfg.p, .ssmax_s = m->hp[l].ssmax_s,
                         .len_norm = m->cfg.len_norm, .train_len = m->cfg.max_seq, .temp_d = m->cfg.temp_d};
    return d;
}

/* One block, forward: x (N, C) -> a->res2 (N, C), N = B * T.
   res1 = x + c_proj(attn(rope(c_attn(ln_1(x)))));  res2 = res1 + c_proj(gelu(c_fc(ln_2(res1)))).
   With a KV cache the T rows are positions pos0.. of each sequence: their keys and values are
   appended to the cache and the queries attend over all pos0 + T of them. */
static int block_forward(gpt *m, int l, gpt_block_acts *a, nn_act *scratch, const nn_act *x, int B, int T,
                         const gpt_kvcache *kv) {
    const nn_backend *be = m->be;
    nn_ctx *ctx = m->ctx;
    const gpt_config *c = &m->cfg;
    const gpt_block_params *w = &m->hp[l];
    int N = B * T, C = c->dim, NH = c->heads, HS = C / NH, pos0 = kv ? kv->len : 0;
    size_t NC = (size_t)N * C, CC = (size_t)C * C;
    be->layernorm_forward(ctx, a->ln1, a->ln1_mean, a->ln1_rstd, x, w->ln1w, w->ln1b, N, C);
    // q, k, v (N, C) each: three sgemms straight into the (B, T, NH, HS) layout attention wants,
    // instead of one (N, 3C) sgemm and a copy
    be->matmul_forward(ctx, a->q, a->ln1, w->qkvw, w->qkvb, N, C, C);
    be->matmul_forward(ctx, a->k, a->ln1, w->qkvw + CC, w->qkvb + C, N, C, C);
    be->matmul_forward(ctx, a->v, a->ln1, w->qkvw + 2 * CC, w->qkvb + 2 * C, N, C, C);
    if (c->pos == LSSAR_POS_ROPE) {
        be->rope_forward(ctx, a->q, m->rope_cos, m->rope_sin, B, T, NH, HS, pos0);
        be->rope_forward(ctx, a->k, m->rope_cos, m->rope_sin, B, T, NH, HS, pos0);
    }
    lssar_attn_desc d = gpt_attn_desc(m, l);
    if (m->probe) {
        int rc = gpt_probe_call(m, l, a->q, a->k, B, T, &d);
        if (rc) return rc;
    }
    const nn_act *keys = a->k, *values = a->v;
    int Tk = T, stride = T;
    if (kv) {   // append to the cache: sequence b's rows go to (l, b, pos0..pos0+T-1)
        size_t lay = (size_t)l * kv->B * kv->cap * C, rows = (size_t)T * C;
        for (int b = 0; b < B; b++) {
            size_t at = lay + ((size_t)b * kv->cap + pos0) * C;
            be->copy(ctx, gpt_act_at(m, kv->k, at), gpt_act_at(m, a->k, b * rows), rows * nn_dtype_bytes(m->act_dt));
            be->copy(ctx, gpt_act_at(m, kv->v, at), gpt_act_at(m, a->v, b * rows), rows * nn_dtype_bytes(m->act_dt));
        }
        keys = gpt_act_at(m, kv->k, lay);
        values = gpt_act_at(m, kv->v, lay);
        Tk = pos0 + T;
        stride = kv->cap;
    }
    int rc =
        be->attention_forward(ctx, a->att, a->att_stats, a->q, keys, values, &d, B, T, Tk, stride, NH, HS);
    if (rc) return rc;
    be->matmul_forward(ctx, scratch, a->att, w->attprojw, w->attprojb, N, C, C);
    be->residual_forward(ctx, a->res1, x, scratch, NC);
    be->layernorm_forward(ctx, a->ln2, a->ln2_mean, a->ln2_rstd, a->res1, w->ln2w, w->ln2b, N, C);
    be->matmul_forward(ctx, a->fch, a->ln2, w->fcw, w->fcb, N, C, 4 * C);
    be->gelu_forward(ctx, a->fch_gelu, a->fch, 4 * NC);
    be->matmul_forward(ctx, scratch, a->fch_gelu, w->fcprojw, w->fcprojb, N, 4 * C, C);
    be->residual_forward(ctx, a->res2, a->res1, scratch, NC);
    return 0;
}

/* One block, backward: acts->dres (N, C) holds the gradient on the block's output res2 and
   receives the gradient on its input x; the parameter gradients of block l are accumulated.
   dres passes through the residual additions unchanged (so no residual backward is needed). */
static int block_backward(gpt *m, int l, gpt_acts *acts, const nn_act *x, int B, int T) {
    const nn_backend *be = m->be;
    nn_ctx *ctx = m->ctx;
    const gpt_config *c = &m->cfg;
    const gpt_block_params *w = &m->hp[l];
    const gpt_block_params *g = &m->hg[l];
    const gpt_block_acts *a = &acts->h[l];
    int N = B * T, C = c->dim, NH = c->heads, HS = C / NH;
    size_t CC = (size_t)C * C;
    nn_act *dres = acts->dres, *dln = acts->dln;
    // MLP
    be->matmul_backward(ctx, acts->dfch, g->fcprojw, g->fcprojb, dres, a->fch_gelu, w->fcprojw, N, 4 * C, C,
                        0);
    be->gelu_backward(ctx, acts->dfch, a->fch, acts->dfch, (size_t)N * 4 * C);
    be->matmul_backward(ctx, dln, g->fcw, g->fcb, acts->dfch, a->ln2, w->fcw, N, C, 4 * C, 0);
    be->layernorm_backward(ctx, dres, g->ln2w, g->ln2b, dln, a->res1, w->ln2w, a->ln2_mean, a->ln2_rstd, N,
                           C);
    // attention
    be->matmul_backward(ctx, acts->datt, g->attprojw, g->attprojb, dres, a->att, w->attprojw, N, C, C, 0);
    lssar_attn_desc d = gpt_attn_desc(m, l);
    int rc = be->attention_backward(ctx, acts->dq, acts->dk, acts->dv, g->ssmax_s, acts->datt, a->q, a->k,
                                    a->v, a->att, a->att_stats, &d, B, T, NH, HS);
    if (rc) return rc;
    if (c->pos == LSSAR_POS_ROPE) {
        be->rope_backward(ctx, acts->dq, m->rope_cos, m->rope_sin, B, T, NH, HS);
        be->rope_backward(ctx, acts->dk, m->rope_cos, m->rope_sin, B, T, NH, HS);
    }
    be->matmul_backward(ctx, dln, g->qkvw, g->qkvb, acts->dq, a->ln1, w->qkvw, N, C, C, 0);
    be->matmul_backward(ctx, dln, g->qkvw + CC, g->qkvb + C, acts->dk, a->ln1, w->qkvw + CC, N, C, C, 1);
    be->matmul_backward(ctx, dln, g->qkvw + 2 * CC, g->qkvb + 2 * C, acts->dv, a->ln1, w->qkvw + 2 * CC,
                        N, C, C, 1);
    be->layernorm_backward(ctx, dres, g->ln1w, g->ln1b, dln, x, w->ln1w, a->ln1_mean, a->ln1_rstd, N, C);
    return 0;
}

int gpt_trunk_forward(gpt *m, gpt_acts *a, int B, int T, const gpt_kvcache *kv) {
    const nn_backend *be = m->be;
    const gpt_config *c = &m->cfg;
    int N = B * T, C = c->dim;
    const float *wpe = m->params.wpe ? m->params.wpe + (size_t)(kv ? kv->len : 0) * C : NULL;
    be->embedding_forward(m->ctx, a->encoded, a->inputs, m->params.wte, wpe, B, T, c->channels, C);
    const nn_act *x = a->encoded;   // the residual stream (N, C)
    a->held = -1;
    for (int l = 0; l < c->layers; l++) {
        int rc = block_forward(m, l, &a->h[l], a->scratch, x, B, T, kv);
        if (rc) return rc;
        x = a->h[l].res2;
    }
    a->held = c->layers - 1;   // (with recompute, what the shared set holds)
    be->layernorm_forward(m->ctx, a->lnf, a->lnf_mean, a->lnf_rstd, x, m->params.lnfw, m->params.lnfb, N, C);
    return 0;
}

// A batch's shape against the reservation, and its tokens (host memory) against the vocabulary.
static int check_batch(gpt *m, const char *fn, const uint16_t *inputs, const uint16_t *targets, int B,
                       int T) {
    const gpt_config *c = &m->cfg;
    if (B < 1 || T < 1) return lssar_fail(LSSAR_E_SIZE, "%s: B = %d, T = %d; both must be >= 1", fn, B, T);
    if (c->pos == LSSAR_POS_LEARNED && T > c->max_seq)
        return lssar_fail(LSSAR_E_SIZE, "%s: T = %d exceeds max_seq = %d of a model with learned "
                          "positions; use T <= %d", fn, T, c->max_seq, c->max_seq);
    gpt_acts *a = &m->acts;
    if (!a->mem || (long)B * T > a->N || T > a->T)
        return lssar_fail(LSSAR_E_SIZE, "%s: batch %d x %d exceeds the reserved %d rows / T = %d; "
                          "call gpt_reserve with the largest shape first", fn, B, T, a->N, a->T);
    size_t ntok = (size_t)B * T * c->channels;
    int rc = gpt_check_tokens(m, inputs, ntok, 0, "input");
    if (!rc && targets) rc = gpt_check_tokens(m, targets, ntok, 1, "target");
    return rc;
}

int gpt_prefetch(gpt *m, const uint16_t *inputs, const uint16_t *targets, int B, int T) {
    if (!m || !inputs) return lssar_fail(LSSAR_E_NULL, "gpt_prefetch: model or inputs is NULL");
    int rc = check_batch(m, "gpt_prefetch", inputs, targets, B, T);
    if (rc) return rc;
    gpt_acts *a = &m->acts;
    const size_t nt16 = a->nt16, ntok = (size_t)B * T * m->cfg.channels;
    for (int k = 0; k < 2; k++)
        if (!m->staged.host[k] &&
            !(m->staged.host[k] = m->be->host_alloc(m->ctx, 2 * nt16 * sizeof(uint16_t)))) {
            stage_free(m);
            return lssar_fail(LSSAR_E_NOMEM, "gpt_prefetch: out of host memory for the staged batches");
        }
    // stage[i] was last read by the upload before the previous one, which the previous
    // upload_async saw complete (backend.h): it may be rewritten
    uint16_t *st = m->staged.host[m->staged.next];
    m->staged.next ^= 1;
    memcpy(st, inputs, ntok * sizeof(uint16_t));
    if (targets) memcpy(st + nt16, targets, ntok * sizeof(uint16_t));
    // into the set the compute is not reading; it waits for the compute before the last switch of
    // sets (the one that last read this set)
    m->be->upload_async(m->ctx, a->tok_in[1 - a->tok_cur], st,
                        ((targets ? nt16 : 0) + ntok) * sizeof(uint16_t));
    m->staged.ready = 1;
    m->staged.B = B;
    m->staged.T = T;
    m->staged.targets = targets != NULL;
    return 0;
}

/* Validate and upload a batch (inputs NULL: switch to the one gpt_prefetch staged), then run the
   trunk into m->acts. targets (may be NULL) are only validated and uploaded for the output heads. */
static int forward_trunk(gpt *m, const uint16_t *inputs, const uint16_t *targets, int B, int T) {
    if (!m) return lssar_fail(LSSAR_E_NULL, "gpt_forward: model is NULL");
    gpt_acts *a = &m->acts;
    int rc;
    if (!inputs) {
        if (!m->staged.ready)
            return lssar_fail(LSSAR_E_NULL, "gpt_forward: inputs is NULL, and no batch was staged with "
                                            "gpt_prefetch");
        if (B != m->staged.B || T != m->staged.T)
            return lssar_fail(LSSAR_E_SIZE, "gpt_forward: batch %d x %d, but the staged one is %d x %d", B, T,
                              m->staged.B, m->staged.T);
        m->last = (gpt_forward_state){0};
        // the compute from here on reads the staged set; what was queued before is what the next
        // gpt_prefetch waits for before it overwrites the other set
        m->be->upload_wait(m->ctx);
        a->tok_cur ^= 1;
        a->inputs = a->tok_in[a->tok_cur];
        a->targets = a->tok_tg[a->tok_cur];
        m->staged.ready = 0;
    } else {
        if ((rc = check_batch(m, "gpt_forward", inputs, targets, B, T))) return rc;
        size_t ntok = (size_t)B * T * m->cfg.channels;
        m->last = (gpt_forward_state){0};   // until this forward completes
        m->be->upload(m->ctx, a->inputs, inputs, ntok * sizeof(uint16_t));
        if (targets) m->be->upload(m->ctx, a->targets, targets, ntok * sizeof(uint16_t));
    }
    if ((rc = gpt_trunk_forward(m, a, B, T, NULL))) return rc;
    m->last = (gpt_forward_state){.B = B, .T = T, .hidden = 1};
    return 0;
}

/* The logits of channel ch's head for rows [r0, r0 + rr) of the final hidden states lnf (N, C):
   a->logits + ch R V, (rr, V). The forward and the backward's recomputation both make them here. */
static nn_act *head_logits(gpt *m, gpt_acts *a, int ch, int r0, int rr) {
    const gpt_config *c = &m->cfg;
    nn_act *lg = gpt_act_at(m, a->logits, (size_t)ch * a->logit_rows * c->vocab);
    m->be->matmul_forward(m->ctx, lg, gpt_act_at(m, a->lnf, (size_t)r0 * c->dim), m->params.head[ch], NULL, rr,
                          c->dim, c->vocab);
    return lg;
}

/* The output heads of rows [r0, r0 + rr): softmax, per-row loss and argmax into a->losses /
   a->argmax rows r0.., loss sum and count added to a->loss_acc on the device. */
static void heads_forward(gpt *m, gpt_acts *a, int r0, int rr, int with_targets) {
    int Ch = m->cfg.channels;
    for (int ch = 0; ch < Ch; ch++) {
        nn_act *lg = head_logits(m, a, ch, r0, rr);
        size_t o = (size_t)r0 * Ch + ch;
        m->be->xent_forward(m->ctx, lg, a->losses + o, a->argmax + o, with_targets ? a->targets + o : NULL,
                            Ch, Ch, rr, m->cfg.vocab, a->loss_acc);
    }
}

int gpt_forward(gpt *m, const uint16_t *inputs, const uint16_t *targets, int B, int T, float *loss) {
    const int with_targets = inputs ? targets != NULL : m && m->staged.targets;
    int rc = forward_trunk(m, inputs, targets, B, T);
    if (rc) return rc;
    gpt_acts *a = &m->acts;
    int N = B * T, R = a->logit_rows;
    m->be->zero(m->ctx, a->loss_acc, 2 * sizeof(double));
    for (int r0 = 0; r0 < N; r0 += R)   // the whole batch, R rows of logits at a time
        heads_forward(m, a, r0, N - r0 < R ? N - r0 : R, with_targets);
    m->last.outputs = 1;
    m->last.targets = with_targets;
    m->last.heads = a->train && with_targets;
    return loss ? gpt_get_loss(m, loss) : 0;
}

float gpt_loss_of(const double acc[2]) { return acc[1] > 0 ? (float)(acc[0] / acc[1]) : 0.0f; }

int gpt_get_loss(const gpt *m, float *loss) {
    if (!m || !loss) return lssar_fail(LSSAR_E_NULL, "gpt_get_loss: NULL argument");
    if (!m->last.outputs) return lssar_fail(LSSAR_E_ARG, "gpt_get_loss: no forward pass has run");
    double acc[2];
    m->be->download(m->ctx, acc, m->acts.loss_acc, sizeof acc);
    *loss = gpt_loss_of(acc);
    if (m->last.targets && !isfinite(*loss))
        return lssar_fail(LSSAR_E_NAN, "gpt_forward: the loss is %g; lower the learning rate or clip "
                          "gradients", (double)*loss);
    return 0;
}

int gpt_get_losses(const gpt *m, float *out) {
    if (!m || !out) return lssar_fail(LSSAR_E_NULL, "gpt_get_losses: NULL argument");
    if (!m->last.outputs) return lssar_fail(LSSAR_E_ARG, "gpt_get_losses: no forward pass has run");
    size_t n = (size_t)m->last.B * m->last.T * m->cfg.channels;
    if (m->last.targets) m->be->download(m->ctx, out, m->acts.losses, n * sizeof(float));
    else memset(out, 0, n * sizeof(float));
    return 0;
}

int gpt_get_argmax(const gpt *m, uint16_t *out) {
    if (!m || !out) return lssar_fail(LSSAR_E_NULL, "gpt_get_argmax: NULL argument");
    if (!m->last.outputs) return lssar_fail(LSSAR_E_ARG, "gpt_get_argmax: no forward pass has run");
    size_t n = (size_t)m->last.B * m->last.T * m->cfg.channels;
    m->be->download(m->ctx, out, m->acts.argmax, n * sizeof(uint16_t));
    return 0;
}

int gpt_forward_hidden(gpt *m, const uint16_t *inputs, int B, int T) {
    return forward_trunk(m, inputs, NULL, B, T);
}

int gpt_get_hidden(const gpt *m, float *out) {
    if (!m || !out) return lssar_fail(LSSAR_E_NULL, "gpt_get_hidden: NULL argument");
    if (!m->last.hidden) return lssar_fail(LSSAR_E_ARG, "gpt_get_hidden: no forward pass has run");
    m->be->download_act(m->ctx, out, m->acts.lnf, (size_t)m->last.B * m->last.T * m->cfg.dim);
    return 0;
}

/* ------------------------------------------------------------- backward */

int gpt_zero_grad(gpt *m) {
    if (!m) return lssar_fail(LSSAR_E_NULL, "gpt_zero_grad: model is NULL");
    int rc = ensure_opt_state(m);
    if (rc) return rc;
    m->be->zero(m->ctx, m->grads_mem, m->nfloats * sizeof(float));
    return 0;
}

// The flat offset from which every gradient is final once the backward has passed block `layer`
// (layer L: the final LayerNorm, with the untied heads after it): that block's first tensor.
static size_t grads_final_from(const gpt *m, int layer) {
    for (int i = 0; i < m->nt; i++)
        if (layer < m->cfg.layers ? m->t[i].layer == layer : !strcmp(m->t[i].name, "ln_f.weight"))
            return m->t[i].off;
    return m->nfloats;
}

/* With recompute: refill the shared activation set with block l's by running its forward again
   from its saved input x (N, C). The same kernels on the same inputs give the same bits, so the
   backward that follows is the one of the stored activations exactly. It also writes the block's
   res2 again, which nothing in this backward reads any more. The probe saw the block in the
   forward already: it must not see it twice. */
static int recompute_block(gpt *m, int l, const nn_act *x, int B, int T) {
    gpt_acts *a = &m->acts;
    if (a->held == l) return 0;   // the last block, which the forward just ran
    struct gpt_probe_state *probe = m->probe;
    m->probe = NULL;
    a->held = -1;
    int rc = block_forward(m, l, &a->h[l], a->scratch, x, B, T, NULL);
    m->probe = probe;
    if (!rc) a->held = l;
    return rc;
}

/* Backward of the trunk from acts.dln = the gradient on the final hidden states (N, C): the final
   LayerNorm, the blocks in reverse, the embeddings. Only reads the stored activations (with
   recompute: the blocks' inputs), so a second call after the same forward is fine. */
static int backward_trunk(gpt *m) {
    const nn_backend *be = m->be;
    const gpt_config *c = &m->cfg;
    gpt_acts *a = &m->acts;
    int B = m->last.B, T = m->last.T, N = B * T, C = c->dim, L = c->layers;
    be->zero(m->ctx, a->dres, (size_t)N * C * nn_dtype_bytes(m->act_dt));
    be->layernorm_backward(m->ctx, a->dres, m->grads.lnfw, m->grads.lnfb, a->dln, a->h[L - 1].res2,
                           m->params.lnfw, a->lnf_mean, a->lnf_rstd, N, C);
    int rc = m->grads_ready ? m->grads_ready(m->grads_ready_user, grads_final_from(m, L)) : 0;
    if (rc) return rc;
    for (int l = L - 1; l >= 0; l--) {
        const nn_act *x = l ? a->h[l - 1].res2 : a->encoded;   // the block's input (N, C)
        if (a->recompute && (rc = recompute_block(m, l, x, B, T))) return rc;
        if ((rc = block_backward(m, l, a, x, B, T))) return rc;
        if (m->grads_ready && (rc = m->grads_ready(m->grads_ready_user, grads_final_from(m, l)))) return rc;
    }
    be->embedding_backward(m->ctx, m->grads.wte, m->grads.wpe, a->dres, a->inputs, B, T, c->channels, C);
    return 0;
}

/* The output heads' backward, R = logit_rows rows at a time: each chunk's logits are made again
   (the forward kept only its loss, argmax and loss sum, as evaluation does), turned into
   probabilities and in place into dlogits = (grad_scale / count) (p - onehot), count = the
   forward's acc[1] (all 0 if every target is ignored); then dlnf rows (rr, C) = sum_ch dlogits_ch
   W_ch and dW_ch (V, C) += dlogits_ch^T lnf rows, so dW is summed chunk by chunk.
   Why recompute (one more (N, C) x (C, V) product a step: 2 C V FLOPs a row, 77 M at GPT-2 small,
   9% on top of the step's 6 P + 12 L C T = 855 M at T = 1024) rather than llm.c's fused
   classifier, which does this backward inside the forward: that needs grad_scale and the
   gradients at forward time, and gpt_forward with targets on a training model also scores
   batches no backward follows, so every caller would need a new flag. The same kernels on the
   same rows give the same probabilities, so one chunk (N <= R) gives the bits of keeping every
   row's logits. */
static void heads_backward(gpt *m, gpt_acts *a, int N, float grad_scale) {
    const gpt_config *c = &m->cfg;
    int C = c->dim, V = c->vocab, Ch = c->channels, R = a->logit_rows;
    for (int r0 = 0; r0 < N; r0 += R) {
        int rr = N - r0 < R ? N - r0 : R;
        const nn_act *lnf = gpt_act_at(m, a->lnf, (size_t)r0 * C);   // (rr, C)
        for (int ch = 0; ch < Ch; ch++) {
            nn_act *lg = head_logits(m, a, ch, r0, rr);   // (rr, V)
            // probabilities only: without targets nothing is added to loss_acc
            m->be->xent_forward(m->ctx, lg, NULL, NULL, NULL, Ch, Ch, rr, V, a->loss_acc);
            m->be->xent_backward(m->ctx, lg, a->targets + (size_t)r0 * Ch + ch, Ch, rr, V, grad_scale,
                                 a->loss_acc);
            m->be->matmul_backward(m->ctx, gpt_act_at(m, a->dln, (size_t)r0 * C), m->grads.head[ch], NULL, lg, lnf,
                                   m->params.head[ch], rr, C, V, ch > 0);
        }
    }
}

int gpt_backward(gpt *m, float grad_scale) {
    if (!m) return lssar_fail(LSSAR_E_NULL, "gpt_backward: model is NULL");
    if (!m->last.heads)
        return lssar_fail(LSSAR_E_ARG, "gpt_backward: needs a gpt_forward with targets just before it, on a "
                          "model reserved with train = 1 (and only one backward per forward)");
    m->last.heads = 0;   // one backward per forward, as when the logits were consumed in place
    heads_backward(m, &m->acts, m->last.B * m->last.T, grad_scale);
    return backward_trunk(m);
}

int gpt_backward_hidden(gpt *m, const float *dhidden, float grad_scale) {
    if (!m || !dhidden) return lssar_fail(LSSAR_E_NULL, "gpt_backward_hidden: NULL argument");
    if (!m->last.hidden || !m->acts.train)
        return lssar_fail(LSSAR_E_ARG, "gpt_backward_hidden: needs a gpt_forward or gpt_forward_hidden just "
                                       "before it, on a model reserved with train = 1");
    int rc = ensure_opt_state(m);
    if (rc) return rc;
    size_t n = (size_t)m->last.B * m->last.T * m->cfg.dim;
    m->be->upload_act(m->ctx, m->acts.dln, dhidden, n);
    m->be->scale(m->ctx, m->acts.dln, n, grad_scale);
    return backward_trunk(m);
}

int gpt_block_sums(gpt *m, const float *x, size_t n, size_t *nb) {
    size_t k = (n + GPT_NORM_BLOCK - 1) / GPT_NORM_BLOCK;
    if (!m->norm_dev && !(m->norm_dev = m->be->alloc(m->ctx, 64)))
        return lssar_fail(LSSAR_E_NOMEM, "gpt: out of memory for the gradient norm");
    if (k > m->norm_nb) {
        double *p = m->be->alloc(m->ctx, k * sizeof(double));
        if (!p)
            return lssar_fail(LSSAR_E_NOMEM, "gpt: out of memory for %zu block sums of the gradient norm", k);
        m->be->release(m->ctx, m->norm_ss);
        m->norm_ss = p;
        m->norm_nb = k;
    }
    m->be->block_sum_squares(m->ctx, m->norm_ss, x, n, GPT_NORM_BLOCK);
    *nb = k;
    return 0;
}

// The blocks' sums in one backend call and one download (not one wait per block)
double gpt_sum_squares(gpt *m, const float *x, size_t n) {
    size_t nb = 0;
    if (gpt_block_sums(m, x, n, &nb)) return NAN;
    double *h = malloc((nb ? nb : 1) * sizeof(double)), s = 0;
    if (!h) return NAN;
    m->be->download(m->ctx, h, m->norm_ss, nb * sizeof(double));
    for (size_t b = 0; b < nb; b++) s += h[b];
    free(h);
    return s;
}

float gpt_clip_grad_norm(gpt *m, float max_norm) {
    if (!m || !m->grads_mem) return 0.0f;
    size_t nb = 0;
    if (gpt_block_sums(m, m->grads_mem, m->nfloats, &nb)) return NAN;
    m->be->clip_norm(m->ctx, m->grads_mem, m->nfloats, m->norm_ss, nb, max_norm, m->norm_dev);
    float norm;
    m->be->download(m->ctx, &norm, m->norm_dev, sizeof norm);
    return norm;
}

int gpt_adamw_check(float beta1, float beta2, float eps) {
    if (beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1 && eps > 0) return 0;
    return lssar_fail(LSSAR_E_ARG, "AdamW needs 0 <= beta1, beta2 < 1 and eps > 0 (got %g, %g, %g)",
                      (double)beta1, (double)beta2, (double)eps);
}

void gpt_adamw_part(gpt *m, size_t lo, size_t n, const float *grads, float *mom_m, float *mom_v, int t,
                    float lr, float beta1, float beta2, float eps, float wd) {
    for (int i = 0; i < m->nt; i++) {
        const gpt_tensor *tt = &m->t[i];
        size_t a = tt->off > lo ? tt->off : lo, b = tt->off + tt->numel;
        if (b > lo + n) b = lo + n;
        if (a >= b) continue;
        m->be->adamw(m->ctx, m->params_mem + a, grads + (a - lo), mom_m + (a - lo), mom_v + (a - lo), b - a,
                     t, lr, beta1, beta2, eps, tt->decay ? wd : 0.0f);
    }
    gpt_params_changed(m);
}

int gpt_adamw_step(gpt *m, int t, float lr, float beta1, float beta2, float eps, float weight_decay) {
    if (!m) return lssar_fail(LSSAR_E_NULL, "gpt_adamw_step: model is NULL");
    if (t < 1) return lssar_fail(LSSAR_E_ARG, "gpt_adamw_step: step t = %d; steps count from 1", t);
    int rc = gpt_adamw_check(beta1, beta2, eps);
    if (!rc) rc = ensure_opt_state(m);
    if (rc) return rc;
    gpt_adamw_part(m, 0, m->nfloats, m->grads_mem, m->adam_m, m->adam_v, t, lr, beta1, beta2, eps,
                   weight_decay);
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
    case GPT_BUF_PARAM: return m->params_mem;
    case GPT_BUF_GRAD: return m->grads_mem;
    case GPT_BUF_ADAM_M: return m->adam_m;
    case GPT_BUF_ADAM_V: return m->adam_v;
    }
    return NULL;
}

int gpt_read_tensor(const gpt *m, gpt_buffer which, int i, float *dst) {
    if (!m || !dst) return lssar_fail(LSSAR_E_NULL, "gpt_read_tensor: NULL argument");
    if (i < 0 || i >= m->nt) return lssar_fail(LSSAR_E_ARG, "gpt_read_tensor: tensor %d of %d", i, m->nt);
    if ((unsigned)which > GPT_BUF_ADAM_V)
        return lssar_fail(LSSAR_E_KIND, "gpt_read_tensor: buffer %d", (int)which);
    const float *b = buffer_of(m, which);
    if (!b) memset(dst, 0, m->t[i].numel * sizeof(float));   // not allocated yet: all zero
    else m->be->download(m->ctx, dst, b + m->t[i].off, m->t[i].numel * sizeof(float));
    return 0;
}

int gpt_write_tensor(gpt *m, gpt_buffer which, int i, const float *src) {
    if (!m || !src) return lssar_fail(LSSAR_E_NULL, "gpt_write_tensor: NULL argument");
    if (i < 0 || i >= m->nt) return lssar_fail(LSSAR_E_ARG, "gpt_write_tensor: tensor %d of %d", i, m->nt);
    if ((unsigned)which > GPT_BUF_ADAM_V)
        return lssar_fail(LSSAR_E_KIND, "gpt_write_tensor: buffer %d", (int)which);
    if (which != GPT_BUF_PARAM) { int rc = ensure_opt_state(m); if (rc) return rc; }
    m->be->upload(m->ctx, buffer_of(m, which) + m->t[i].off, src, m->t[i].numel * sizeof(float));
    gpt_params_changed(m);
    return 0;
}
