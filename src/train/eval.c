// eval.c - mean loss on deterministic windows of a shard; see eval.h.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "train/eval.h"
#include "model/model_api.h"
#include "core/dist.h"

int eval_num_windows(const shard *s, int T) {
    if (T < 1 || s->n < 2) return 0;
    size_t w = (s->n - 1) / (size_t)T;
    return w > INT32_MAX ? INT32_MAX : (int)w;
}

// This rank's batches [b0, b1) of the windows: win (one double per window, from window b0 B) and
// pos (T doubles per batch) as eval_windows describes them.
static int eval_batches(gpt *m, const shard *s, const size_t *starts, int n, int T, int B, long b0, long b1,
                        double *win, double *pos) {
    const gpt_config *cfg = gpt_get_config(m);
    const int C = cfg->channels;
    if (b1 <= b0) return 0;   // a rank with no batch (more ranks than batches) still meets the others
    int rc = gpt_reserve(m, B, T, 0);
    if (rc) return rc;
    size_t per = (size_t)T * C;
    uint16_t *in = malloc(B * per * sizeof *in), *tg = malloc(B * per * sizeof *tg);
    float *loss = malloc(B * per * sizeof *loss);
    if (!in || !tg || !loss) {
        free(in);
        free(tg);
        free(loss);
        return lssar_fail(LSSAR_E_NOMEM, "out of memory for evaluation");
    }
    for (long k = b0; k < b1 && !rc; k++) {
        int w0 = (int)(k * B), b = n - w0 < B ? n - w0 : B;
        for (int i = 0; i < b; i++) {
            size_t at = starts[w0 + i];
            if (at + T + 1 > s->n) {
                rc = lssar_fail(LSSAR_E_FORMAT,
                                "%s: window at %zu runs past the end (val_index.json does not match the "
                                "shard)",
                                s->path, at);
                break;
            }
            const uint16_t *src = s->tokens + at * C;   // (T+1, C)
            memcpy(in + i * per, src, per * sizeof *in);
            memcpy(tg + i * per, src + C, per * sizeof *tg);
        }
        for (size_t q = 0; !rc && q < (size_t)b * per; q++)   // the last target is in tg, the rest in in
            if (in[q] >= cfg->vocab || tg[q] >= cfg->vocab)
                rc = lssar_fail(LSSAR_E_FORMAT,
                                "%s holds token id %d but the model's vocabulary has %d ids: use a shard "
                                "made with the model's tokenizer",
                                s->path, in[q] >= cfg->vocab ? in[q] : tg[q], cfg->vocab);
        if (rc) break;
        if ((rc = gpt_forward(m, in, tg, b, T, NULL))) {
            if (rc == LSSAR_E_NAN)
                rc = lssar_fail(LSSAR_E_NAN,
                                "the loss on %s at seq %d is not finite: the activations overflow (a "
                                "diverged model?)",
                                s->path, T);
            break;
        }
        if ((rc = gpt_get_losses(m, loss))) break;
        double *pk = pos ? pos + (size_t)(k - b0) * T : NULL;
        if (pk) memset(pk, 0, T * sizeof *pk);
        for (int i = 0; i < b; i++) {
            double l = 0;
            for (int t = 0; t < T; t++) {
                double lt = 0;
                for (int c = 0; c < C; c++) { float x = loss[(i * (size_t)T + t) * C + c]; l += x; lt += x; }
                if (pk) pk[t] += lt;
            }
            win[w0 - b0 * B + i] = l;
        }
    }
    free(in); free(tg); free(loss);
    return rc;
}

// Gather every rank's doubles (in rank order, which is window and batch order) into all (want).
static int gather_doubles(const double *mine, size_t n, double *all, size_t want) {
    char *buf = NULL;
    size_t total = 0;
    int rc = lssar_dist_allgather_bytes(mine, n * sizeof *mine, &buf, &total, NULL);
    if (!rc && total != want * sizeof *all)
        rc = lssar_fail(LSSAR_E_SIZE, "evaluation: the ranks returned %zu results, %zu expected",
                        total / sizeof *all, want);
    if (!rc && want) memcpy(all, buf, want * sizeof *all);
    free(buf);
    return rc;
}

int eval_windows(gpt *m, const shard *s, const size_t *starts, int n, int T, int B, int shared,
                 double *win, double *per_pos) {
    const gpt_config *cfg = gpt_get_config(m);
    int rc = 0;
    if (T < 1 || B < 1)
        rc = lssar_fail(LSSAR_E_SIZE, "evaluation needs seq >= 1 and batch >= 1 (got %d, %d)", T, B);
    else if (n < 1) rc = lssar_fail(LSSAR_E_SIZE, "no evaluation windows of length %d", T);
    else if (s->channels != cfg->channels)
        rc = lssar_fail(LSSAR_E_FORMAT,
                        "%s has %d token channels but the model has %d: use a shard built for this model",
                        s->path, s->channels, cfg->channels);
    if (rc) return rc;   // the same on every rank: each returns it without waiting for the others
    if (B > n) B = n;
    long nb = (n + B - 1) / B, b0 = 0, b1 = nb;
    if (shared) lssar_dist_share(nb, &b0, &b1);
    // one process: its results go straight to the caller's arrays
    int direct = !shared || lssar_dist_size() == 1;
    size_t mw = b1 > b0 ? (size_t)((b1 * B < n ? b1 * B : n) - b0 * B) : 0, mb = (size_t)(b1 - b0);
    double *mwin = direct ? win : malloc((mw ? mw : 1) * sizeof *mwin);
    double *mpos = per_pos ? malloc((mb ? mb : 1) * T * sizeof *mpos) : NULL;
    double *apos = per_pos && !direct ? malloc((size_t)nb * T * sizeof *apos) : mpos;
    if (!mwin || (per_pos && (!mpos || !apos)))
        rc = lssar_fail(LSSAR_E_NOMEM, "out of memory for evaluation");
    if (!rc) rc = eval_batches(m, s, starts, n, T, B, b0, b1, mwin, mpos);
    // a failure on one rank (a bad token in its windows) is every rank's, met here
    if (shared) rc = lssar_dist_agree(rc);
    if (!rc && !direct) rc = gather_doubles(mwin, mw, win, (size_t)n);
    if (!rc && per_pos && !direct) rc = gather_doubles(mpos, mb * T, apos, (size_t)nb * T);
    if (!rc && per_pos) {
        memset(per_pos, 0, T * sizeof *per_pos);
        for (long k = 0; k < nb; k++)
            for (int t = 0; t < T; t++) per_pos[t] += apos[(size_t)k * T + t];
    }
    if (!direct) free(mwin);
    if (apos != mpos) free(apos);
    free(mpos);
    return rc;
}

static int shard_eval(gpt *m, const shard *s, int T, int B, int max_windows, int shared, eval_result *r,
                      double *per_pos) {
    memset(r, 0, sizeof *r);
    const gpt_config *cfg = gpt_get_config(m);
    const int C = cfg->channels;
    if (T < 1 || B < 1)
        return lssar_fail(LSSAR_E_SIZE, "evaluation needs seq >= 1 and batch >= 1 (got %d, %d)", T, B);
    if (s->channels != C)
        return lssar_fail(LSSAR_E_FORMAT,
                          "%s has %d token channels but the model has %d: use a shard built for this model",
                          s->path, s->channels, C);
    if (cfg->pos == LSSAR_POS_LEARNED && T > cfg->max_seq)
        return lssar_fail(LSSAR_E_UNSUPPORTED,
                          "this model has learned positions for up to %d tokens, so it cannot be evaluated "
                          "at --seq %d: use lengths <= %d (rope and none positions extrapolate)",
                          cfg->max_seq, T, cfg->max_seq);
    int nw = eval_num_windows(s, T);
    if (nw == 0)
        return lssar_fail(LSSAR_E_SIZE,
                          "%s has %zu positions, too few for one window of seq + 1 = %d: use a smaller --seq "
                          "or a longer shard",
                          s->path, s->n, T + 1);
    if (max_windows > 0 && max_windows < nw) nw = max_windows;
    size_t *starts = malloc((size_t)nw * sizeof *starts);
    double *win = malloc((size_t)nw * sizeof *win);
    int rc = 0;
    if (!starts || !win) rc = lssar_fail(LSSAR_E_NOMEM, "out of memory for evaluation");
    for (int w = 0; !rc && w < nw; w++) starts[w] = (size_t)w * T;
    if (shared) rc = lssar_dist_agree(rc);
    if (!rc) rc = eval_windows(m, s, starts, nw, T, B, shared, win, per_pos);
    double sum = 0;
    for (int w = 0; !rc && w < nw; w++) sum += win[w];   // window order, whatever the rank count
    free(starts); free(win);
    if (rc) return rc;
    r->windows = nw;
    r->tokens = (size_t)nw * T * C;
    r->loss = sum / (double)r->tokens;
    if (per_pos) for (int t = 0; t < T; t++) per_pos[t] /= (double)nw * C;
    if (!isfinite(r->loss))
        return lssar_fail(LSSAR_E_NAN, "evaluation loss is not finite on %s at seq %d", s->path, T);
    return 0;
}

int eval_shard(gpt *m, const shard *s, int T, int B, int max_windows, eval_result *r, double *per_pos) {
    return shard_eval(m, s, T, B, max_windows, 0, r, per_pos);
}

int eval_shard_ranks(gpt *m, const shard *s, int T, int B, int max_windows, eval_result *r, double *per_pos) {
    return shard_eval(m, s, T, B, max_windows, 1, r, per_pos);
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
