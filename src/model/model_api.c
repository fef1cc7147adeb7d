// model_api.c - the public model API of include/lssar.h (create, load, save, describe, loss,
// decoder) over gpt.h and the checkpoint code. lssar_model_eval_shard reads a token shard, so it
// lives in the train layer (src/train/eval.c).
#include <stdlib.h>
#include <string.h>
#include "lssar.h"
#include "attn/attn.h"
#include "model/checkpoint.h"
#include "model/model_api.h"

int model_api_wrap(gpt *g, int64_t step, lssar_model **out) {
    lssar_model *m = calloc(1, sizeof *m);
    if (!m) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    m->g = g;
    m->step = step;
    *out = m;
    return 0;
}

void lssar_model_defaults(lssar_model_config *cfg) {
    if (!cfg) return;
    memset(cfg, 0, sizeof *cfg);
    cfg->layers = 2; cfg->heads = 2; cfg->dim = 64;
    cfg->vocab = 257; cfg->channels = 1; cfg->max_seq = 256;
    cfg->pos = LSSAR_POS_ROPE;
    cfg->attn = LSSAR_ATTN_LSSAR;
    cfg->p = 15.0f;
    cfg->tied = 1;
    cfg->device = LSSAR_DEVICE_CPU;
    cfg->len_norm = LSSAR_LEN_NORM_TRAIN;
    cfg->rope_base = GPT_ROPE_BASE;
}

int lssar_model_create(const lssar_model_config *cfg, uint64_t seed, lssar_model **out) {
    if (!cfg || !out) return lssar_fail(LSSAR_E_NULL, "lssar_model_create: cfg and out must not be NULL");
    *out = NULL;
    gpt *m = NULL;   // the model's config is this struct: gpt_create checks it
    int rc = gpt_create(cfg, seed, &m);
    if (rc) return rc;
    if ((rc = model_api_wrap(m, 0, out))) gpt_free(m);
    return rc;
}

int lssar_model_load(const char *path, const lssar_load_options *opt, lssar_model **out) {
    if (!path || !out) return lssar_fail(LSSAR_E_NULL, "lssar_model_load: path and out must not be NULL");
    *out = NULL;
    ckpt_load_opts o = {0};
    if (opt) {
        if (!(opt->p >= 0))
            return lssar_fail(LSSAR_E_P, "lssar_model_load: p must be > 0 (or 0 to keep the model's)");
        int rc = opt->set_attn ? attn_kind_check(opt->attn, "lssar_model_load: attn") : 0;
        if (rc) return rc;
        o.set_attn = opt->set_attn != 0;
        o.attn = opt->attn;
        o.p = opt->p;
        o.device = opt->device;
    }
    gpt *g = NULL;
    int64_t step = 0;
    int rc = ckpt_load_model(path, &o, &g, &step);
    if (rc) return rc;
    if ((rc = model_api_wrap(g, step, out))) gpt_free(g);
    return rc;
}

int lssar_model_save(const lssar_model *m, const char *path) {
    if (!m || !path) return lssar_fail(LSSAR_E_NULL, "lssar_model_save: m and path must not be NULL");
    size_t n = strlen(path);
    const char *ext = ".safetensors";
    if (n == 0) return lssar_fail(LSSAR_E_ARG, "lssar_model_save: empty path");
    if (n >= strlen(ext) && !strcmp(path + n - strlen(ext), ext)) return ckpt_save_model(m->g, path, m->step);
    int rc = lssar_mkdirs(path);
    if (rc) return rc;
    char file[4096];
    if (snprintf(file, sizeof file, "%s/%s", path, CKPT_MODEL_FILE) >= (int)sizeof file)
        return lssar_fail(LSSAR_E_ARG, "lssar_model_save: path %s is too long", path);
    return ckpt_save_model(m->g, file, m->step);
}

void lssar_model_free(lssar_model *m) {
    if (!m) return;
    if (m->g) gpt_free(m->g);
    free(m);
}

int lssar_model_describe(const lssar_model *m, lssar_model_info *info) {
    if (!m || !info) return lssar_fail(LSSAR_E_NULL, "lssar_model_describe: NULL argument");
    const gpt_config *c = gpt_get_config(m->g);
    memset(info, 0, sizeof *info);
    info->layers = c->layers; info->heads = c->heads; info->dim = c->dim;
    info->vocab = c->vocab; info->channels = c->channels; info->max_seq = c->max_seq;
    info->pos = lssar_pos_name(c->pos);
    info->pos_kind = c->pos;
    info->attn = c->attn; info->p = c->p; info->tied = c->tied; info->len_norm = c->len_norm;
    info->rope_base = c->rope_base; info->temp_d = c->temp_d;
    info->device = c->device;
    info->params = gpt_num_params(m->g);
    info->step = (long long)m->step;
    return 0;
}

int lssar_model_loss(lssar_model *m, const uint16_t *windows, int B, int T, double *loss) {
    if (!m || !windows || !loss) return lssar_fail(LSSAR_E_NULL, "lssar_model_loss: NULL argument");
    if (B < 1 || T < 1)
        return lssar_fail(LSSAR_E_SIZE, "lssar_model_loss: B and T must be >= 1 (got %d, %d)", B, T);
    const gpt_config *c = gpt_get_config(m->g);
    const int C = c->channels;
    size_t per = (size_t)T * C;
    uint16_t *in = malloc(sizeof(uint16_t) * B * per), *tg = malloc(sizeof(uint16_t) * B * per);
    if (!in || !tg) { free(in); free(tg); return lssar_fail(LSSAR_E_NOMEM, "out of memory"); }
    int rc = 0;
    for (int b = 0; b < B && !rc; b++) {
        const uint16_t *w = windows + (size_t)b * (T + 1) * C;   // (T+1, C)
        for (size_t k = 0; k < per + C; k++)
            if (w[k] >= c->vocab) {
                rc = lssar_fail(LSSAR_E_ARG,
                                "lssar_model_loss: token id %d at window %d is outside the vocabulary "
                                "(0..%d)",
                                w[k], b, c->vocab - 1);
                break;
            }
        memcpy(in + b * per, w, sizeof(uint16_t) * per);
        memcpy(tg + b * per, w + C, sizeof(uint16_t) * per);
    }
    float l = 0;
    if (!rc) rc = gpt_reserve(m->g, B, T, 0);
    if (!rc) rc = gpt_forward(m->g, in, tg, B, T, &l);
    free(in); free(tg);
    if (!rc) *loss = l;
    return rc;
}

// ------------------------------------------------------------------------------ decoder

struct lssar_decoder {
    lssar_model *m;
    gpt_kvcache *kv;
    int max_T;
};

int lssar_decoder_create(lssar_model *m, int max_T, lssar_decoder **out) {
    if (!m || !out) return lssar_fail(LSSAR_E_NULL, "lssar_decoder_create: m and out must not be NULL");
    *out = NULL;
    const gpt_config *c = gpt_get_config(m->g);
    if (max_T < 1)
        return lssar_fail(LSSAR_E_SIZE, "lssar_decoder_create: max_T must be >= 1 (got %d)", max_T);
    if (c->pos == LSSAR_POS_LEARNED && max_T > c->max_seq)
        return lssar_fail(LSSAR_E_SIZE,
                          "lssar_decoder_create: the model has learned positions for %d tokens, so max_T %d "
                          "is too long",
                          c->max_seq, max_T);
    lssar_decoder *d = calloc(1, sizeof *d);
    if (!d) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    int rc = gpt_kvcache_create(m->g, 1, max_T, &d->kv);
    if (rc) { free(d); return rc; }
    d->m = m;
    d->max_T = max_T;
    *out = d;
    return 0;
}

void lssar_decoder_free(lssar_decoder *d) {
    if (!d) return;
    gpt_kvcache_free(d->kv);
    free(d);
}

void lssar_decoder_reset(lssar_decoder *d) {
    if (d) gpt_kvcache_clear(d->kv);
}

int lssar_decoder_len(const lssar_decoder *d) { return d ? gpt_kvcache_len(d->kv) : 0; }

int lssar_decoder_feed(lssar_decoder *d, const uint16_t *tokens, int n, float *logits) {
    if (!d || !tokens) return lssar_fail(LSSAR_E_NULL, "lssar_decoder_feed: d and tokens must not be NULL");
    if (n < 1) return lssar_fail(LSSAR_E_SIZE, "lssar_decoder_feed: n must be >= 1 (got %d)", n);
    int have = gpt_kvcache_len(d->kv);
    if (n > d->max_T - have)
        return lssar_fail(LSSAR_E_SIZE, "lssar_decoder_feed: %d + %d positions exceed the decoder's max_T %d",
                          have, n, d->max_T);
    const gpt_config *c = gpt_get_config(d->m->g);
    for (size_t k = 0; k < (size_t)n * c->channels; k++)
        if (tokens[k] >= c->vocab)
            return lssar_fail(LSSAR_E_ARG,
                              "lssar_decoder_feed: token id %d is outside the vocabulary (0..%d)", tokens[k],
                              c->vocab - 1);
    return gpt_decode(d->m->g, d->kv, tokens, n, logits);
}
