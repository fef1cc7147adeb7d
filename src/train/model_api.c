// model_api.c - the public model API of include/lssar.h over gpt.h and the
// checkpoint and evaluation code.
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "lssar.h"
#include "checkpoint.h"
#include "eval.h"

struct lssar_model {
    gpt *g;
    int64_t step;
};

int lssar_model_load(const char *path, int attn, float p, lssar_model **out) {
    if (!path || !out) return lssar_fail(LSSAR_E_NULL, "lssar_model_load: path and out must not be NULL");
    *out = NULL;
    if (p < 0) return lssar_fail(LSSAR_E_P, "lssar_model_load: p must be > 0 (or 0 to keep the model's)");
    char file[4096];
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) snprintf(file, sizeof file, "%s/%s", path, CKPT_MODEL_FILE);
    else snprintf(file, sizeof file, "%s", path);
    lssar_model *m = calloc(1, sizeof *m);
    if (!m) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    int rc = ckpt_load_model(file, attn, p, &m->g, &m->step);
    if (rc) { free(m); return rc; }
    *out = m;
    return 0;
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
    info->pos = gpt_pos_name(c->pos);
    info->attn = c->attn; info->p = c->p; info->tied = c->tied;
    info->params = gpt_num_params(m->g);
    info->step = (long long)m->step;
    return 0;
}

int lssar_model_loss(lssar_model *m, const uint16_t *windows, int B, int T, double *loss) {
    if (!m || !windows || !loss) return lssar_fail(LSSAR_E_NULL, "lssar_model_loss: NULL argument");
    if (B < 1 || T < 1) return lssar_fail(LSSAR_E_SIZE, "lssar_model_loss: B and T must be >= 1 (got %d, %d)", B, T);
    const gpt_config *c = gpt_get_config(m->g);
    const int C = c->channels;
    size_t per = (size_t)T * C;
    uint16_t *in = malloc(sizeof(uint16_t) * B * per), *tg = malloc(sizeof(uint16_t) * B * per);
    if (!in || !tg) { free(in); free(tg); return lssar_fail(LSSAR_E_NOMEM, "out of memory"); }
    int rc = 0;
    for (int b = 0; b < B && !rc; b++) {
        const uint16_t *w = windows + (size_t)b * (T + 1) * C;   // (T+1, C)
        for (size_t k = 0; k < per + C; k++)
            if (w[k] >= c->vocab) { rc = lssar_fail(LSSAR_E_ARG, "lssar_model_loss: token id %d at window %d is outside the vocabulary (0..%d)", w[k], b, c->vocab - 1); break; }
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

int lssar_model_eval_shard(lssar_model *m, const char *shard_path, int T, int B, int max_windows,
                           double *loss, size_t *tokens, double *per_pos) {
    if (!m || !shard_path || !loss) return lssar_fail(LSSAR_E_NULL, "lssar_model_eval_shard: NULL argument");
    if (max_windows < 0) return lssar_fail(LSSAR_E_SIZE, "lssar_model_eval_shard: max_windows must be >= 0");
    shard s;
    int rc = shard_open(&s, shard_path);
    if (rc) return rc;
    eval_result r;
    rc = eval_shard(m->g, &s, T, B, max_windows, &r, per_pos);
    shard_close(&s);
    if (rc) return rc;
    *loss = r.loss;
    if (tokens) *tokens = r.tokens;
    return 0;
}
