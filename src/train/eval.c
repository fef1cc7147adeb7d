// eval.c - mean loss on deterministic windows of a shard; see eval.h.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "train/eval.h"
#include "model/model_api.h"

int eval_num_windows(const shard *s, int T) {
    if (T < 1 || s->n < 2) return 0;
    size_t w = (s->n - 1) / (size_t)T;
    return w > INT32_MAX ? INT32_MAX : (int)w;
}

int eval_shard(gpt *m, const shard *s, int T, int B, int max_windows, eval_result *r, double *per_pos) {
    memset(r, 0, sizeof *r);
    const gpt_config *cfg = gpt_get_config(m);
    const int C = cfg->channels;
    if (T < 1 || B < 1) return lssar_fail(LSSAR_E_SIZE, "evaluation needs seq >= 1 and batch >= 1 (got %d, %d)", T, B);
    if (s->channels != C)
        return lssar_fail(LSSAR_E_FORMAT, "%s has %d token channels but the model has %d: use a shard built for this model", s->path, s->channels, C);
    if (cfg->pos == GPT_POS_LEARNED && T > cfg->max_seq)
        return lssar_fail(LSSAR_E_UNSUPPORTED, "this model has learned positions for up to %d tokens, so it cannot be evaluated at --seq %d: use lengths <= %d (rope and none positions extrapolate)",
                          cfg->max_seq, T, cfg->max_seq);
    int nw = eval_num_windows(s, T);
    if (nw == 0)
        return lssar_fail(LSSAR_E_SIZE, "%s has %zu positions, too few for one window of seq + 1 = %d: use a smaller --seq or a longer shard", s->path, s->n, T + 1);
    if (max_windows > 0 && max_windows < nw) nw = max_windows;
    if (B > nw) B = nw;
    int rc = gpt_reserve(m, B, T, 0);
    if (rc) return rc;
    size_t per = (size_t)B * T * C;
    uint16_t *in = malloc(per * sizeof *in), *tg = malloc(per * sizeof *tg);
    float *loss = malloc(per * sizeof *loss);
    if (!in || !tg || !loss) { free(in); free(tg); free(loss); return lssar_fail(LSSAR_E_NOMEM, "out of memory for evaluation"); }
    if (per_pos) memset(per_pos, 0, T * sizeof *per_pos);
    double sum = 0;
    for (int w0 = 0; w0 < nw && !rc; w0 += B) {
        int b = nw - w0 < B ? nw - w0 : B;
        for (int i = 0; i < b; i++) {
            const uint16_t *src = s->tokens + (size_t)(w0 + i) * T * C;   // (T+1, C)
            memcpy(in + (size_t)i * T * C, src, sizeof(uint16_t) * T * C);
            memcpy(tg + (size_t)i * T * C, src + C, sizeof(uint16_t) * T * C);
        }
        for (size_t k = 0; k < (size_t)b * T * C; k++)   // the last target is in tg, the rest in in
            if (in[k] >= cfg->vocab || tg[k] >= cfg->vocab) {
                rc = lssar_fail(LSSAR_E_FORMAT, "%s holds token id %d but the model's vocabulary has %d ids: use a shard made with the model's tokenizer",
                                s->path, in[k] >= cfg->vocab ? in[k] : tg[k], cfg->vocab);
                break;
            }
        if (rc) break;
        if ((rc = gpt_forward(m, in, tg, b, T, NULL))) {
            if (rc == LSSAR_E_NAN)
                rc = lssar_fail(LSSAR_E_NAN, "the loss on %s at seq %d is not finite: the activations overflow (a diverged model?)", s->path, T);
            break;
        }
        if ((rc = gpt_get_losses(m, loss))) break;
        for (int i = 0; i < b; i++)
            for (int t = 0; t < T; t++) {
                double l = 0;
                for (int c = 0; c < C; c++) l += loss[((size_t)i * T + t) * C + c];
                sum += l;
                if (per_pos) per_pos[t] += l;
            }
        r->windows += b;
    }
    free(in); free(tg); free(loss);
    if (rc) return rc;
    r->tokens = (size_t)r->windows * T * C;
    r->loss = sum / (double)r->tokens;
    if (per_pos) for (int t = 0; t < T; t++) per_pos[t] /= (double)r->windows * C;
    if (!isfinite(r->loss)) return lssar_fail(LSSAR_E_NAN, "evaluation loss is not finite on %s at seq %d", s->path, T);
    return 0;
}

// The public lssar_model_eval_shard (lssar.h): here rather than in src/model/model_api.c because
// it reads a token shard (src/data), a layer above the model.
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
