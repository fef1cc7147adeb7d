// head.c - the force probe's regression head (spec/orbits.md, "Force probe"): replace the output
// heads by one linear map width -> 1 and fine-tune the WHOLE model on the force set's labelled
// planet rows with a masked mean squared error.
//
//   h = ln_f(final residual)        (B, T, C)   gpt_get_hidden
//   pred = h w + b                  (B, T)
//   loss = sum_mask (pred - y)^2 / n_mask
//   dpred = 2 (pred - y) / n_mask on the mask, 0 elsewhere;  dh = dpred w^T;  dw = h^T dpred;  db = sum dpred
//   dh flows into the model through gpt_backward_hidden.
//
// Position t of a window (rows 0..998 of a sequence) holds row t, so the head reads the state
// after the model has seen the planet's position at that row and everything before it.
// Targets: |F| spans ~12 decades (planet masses 1e-9..1e-3 Msun, r 0.1..60 AU), so by default the
// head regresses standardised log10 |F| (target_log = 1) and predictions are mapped back with
// 10^(.); target_log = 0 regresses |F| / rms(|F|), the original's unnormalised target up to a scale.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/util.h"
#include "data/shard.h"
#include "lssar.h"
#include "orbits/probe.h"
#include "train/train.h"

void orb_probe_defaults(orb_probe_opts *o) {
    memset(o, 0, sizeof *o);
    o->steps = 200;
    o->batch = 4;
    o->lr = 3e-4f;
    o->head_lr = 1e-2f;
    o->wd = 0.0f;
    o->clip = 1.0f;
    o->target_log = 1;
    o->seed = 0;
}

// All sequences 0..n-1 of a split, (n, 1000, 2) uint16, read shard by shard.
static int load_sequences(const char *dir, const char *split, int64_t n, uint16_t **out) {
    *out = malloc((size_t)n * LSSAR_ORB_ROWS * 2 * sizeof(uint16_t));
    if (!*out)
        return lssar_fail(LSSAR_E_NOMEM, "force probe: out of memory for %lld sequences", (long long)n);
    char path[4400];
    int64_t have = 0;
    for (int64_t i = 0; have < n; i++) {
        shard sh;
        if (orb_path(path, sizeof path, dir, split, "shard", i)) {
            free(*out);
            *out = NULL;
            return lssar_fail(LSSAR_E_ARG, "path too long: %s", dir);
        }
        int rc = shard_open(&sh, path);
        if (rc) { free(*out); *out = NULL; return rc; }
        long long bad_tok = -1;   // bins 0..ORB_BINS-1 and the two dt tokens
        for (size_t t = 0; sh.channels == 2 && t < sh.n * 2 && bad_tok < 0; t++)
            if (sh.tokens[t] > ORB_BINS + 1) bad_tok = (long long)t;
        if (bad_tok >= 0) {
            int v = sh.tokens[bad_tok];
            shard_close(&sh); free(*out); *out = NULL;
            return lssar_fail(LSSAR_E_FORMAT, "%s: token %d at row %lld is not an orbit token (0..%d): "
                              "damaged; regenerate it with `lssar orbits simulate`",
                              path, v, bad_tok / 2, ORB_BINS + 1);
        }
        if (sh.channels != 2 || sh.n % LSSAR_ORB_ROWS || sh.n == 0) {
            shard_close(&sh); free(*out); *out = NULL;
            return lssar_fail(LSSAR_E_FORMAT, "%s: %d channel(s), %zu rows; orbit shards have 2 channels and "
                              "whole %d-row sequences", path, sh.channels, sh.n, LSSAR_ORB_ROWS);
        }
        int64_t k = (int64_t)(sh.n / LSSAR_ORB_ROWS);
        if (k > n - have) k = n - have;
        memcpy(*out + (size_t)have * LSSAR_ORB_ROWS * 2, sh.tokens,
               (size_t)k * LSSAR_ORB_ROWS * 2 * sizeof(uint16_t));
        have += k;
        shard_close(&sh);
    }
    return 0;
}

void orb_head_forward(float *pred, const float *h, const float *w, float b, int N, int C) {
    for (int i = 0; i < N; i++) {
        const float *x = h + (size_t)i * C;
        float s = b;
        for (int c = 0; c < C; c++) s += x[c] * w[c];
        pred[i] = s;
    }
}

double orb_head_loss_backward(const float *pred, const float *y, const unsigned char *mask, const float *h,
                                 const float *w, int N, int C, float *dh, float *dw, float *db) {
    int nm = 0;
    for (int i = 0; i < N; i++) nm += mask[i];
    double loss = 0;
    memset(dh, 0, sizeof(float) * (size_t)N * C);
    if (!nm) return 0;
    for (int i = 0; i < N; i++) {
        if (!mask[i]) continue;
        float e = pred[i] - y[i];
        loss += (double)e * e;
        float g = 2.0f * e / nm;
        *db += g;
        for (int c = 0; c < C; c++) {
            dh[(size_t)i * C + c] = g * w[c];
            dw[c] += g * h[(size_t)i * C + c];
        }
    }
    return loss / nm;
}

int orb_probe_fit_predict(gpt *m, const char *force_dir, const char *split, const orb_state *st,
                          const orb_force_split *s, const orb_probe_opts *o, const int64_t *ids, int64_t n,
                          double *pred_out, double *final_loss) {
    const gpt_config *cfg = gpt_get_config(m);
    const int T = LSSAR_ORB_ROWS - 1, C = cfg->dim, B = o->batch;
    if (cfg->channels != 2 || cfg->vocab < LSSAR_ORB_VOCAB - 1)
        return lssar_fail(LSSAR_E_ARG, "the model has %d channel(s) and vocabulary %d; the probe needs an "
                          "orbit model (2 channels, vocabulary %d)", cfg->channels, cfg->vocab,
                          LSSAR_ORB_VOCAB);
    if (cfg->pos == LSSAR_POS_LEARNED && cfg->max_seq < T)
        return lssar_fail(LSSAR_E_ARG, "the force probe reads whole sequences (%d positions) but this model "
                          "has learned positions up to %d; train it with --seq %d (or use rope / "
                          "none positions)", T, cfg->max_seq, T);
    if (B < 1 || o->steps < 0) return lssar_fail(LSSAR_E_ARG, "probe: batch must be >= 1 and steps >= 0");
    int64_t S = s->systems;
    int rc = 0;
    uint16_t *seq = NULL, *in = NULL;
    float *y = NULL, *h = NULL, *dh = NULL, *pred = NULL, *yb = NULL, *head = NULL, *hg = NULL, *hm = NULL,
          *hv = NULL;
    unsigned char *mask = NULL, *mb = NULL;
    if ((rc = load_sequences(force_dir, split, S, &seq))) return rc;
    // labels (S, T): y at input position t = row t; mask says which are labelled
    y = malloc(sizeof(float) * (size_t)S * T);
    mask = calloc((size_t)S * T, 1);
    in = malloc(sizeof(uint16_t) * (size_t)B * T * 2);
    h = malloc(sizeof(float) * (size_t)B * T * C);
    dh = malloc(sizeof(float) * (size_t)B * T * C);
    pred = malloc(sizeof(float) * (size_t)B * T);
    yb = malloc(sizeof(float) * (size_t)B * T);
    mb = malloc((size_t)B * T);
    head = calloc((size_t)C + 1, sizeof(float));    // w (C), b
    hg = calloc((size_t)C + 1, sizeof(float));
    hm = calloc((size_t)C + 1, sizeof(float));
    hv = calloc((size_t)C + 1, sizeof(float));
    if (!y || !mask || !in || !h || !dh || !pred || !yb || !mb || !head || !hg || !hm || !hv) {
        rc = lssar_fail(LSSAR_E_NOMEM, "probe: out of memory");
        goto done;
    }
    // target transform over the labelled rows
    double sum = 0, sq = 0;
    for (int64_t k = 0; k < s->ntrain; k++) {
        double F = st->rows[(size_t)s->train[k] * ORB_S_FIELDS + ORB_S_F];
        double v = o->target_log ? log10(F > 1e-30 ? F : 1e-30) : F;
        sum += v; sq += v * v;
    }
    double mu = sum / s->ntrain, sd = sqrt(fmax(sq / s->ntrain - mu * mu, 1e-30));
    double shift = o->target_log ? mu : 0.0, scale = o->target_log ? sd : sqrt(sq / s->ntrain);
    if (!(scale > 0)) scale = 1;
    for (int64_t k = 0; k < s->ntrain; k++) {
        int64_t id = s->train[k], sys = id / LSSAR_ORB_ROWS;
        int row = (int)(id % LSSAR_ORB_ROWS);
        double F = st->rows[(size_t)id * ORB_S_FIELDS + ORB_S_F];
        double v = o->target_log ? log10(F > 1e-30 ? F : 1e-30) : F;
        y[(size_t)sys * T + row] = (float)((v - shift) / scale);
        mask[(size_t)sys * T + row] = 1;
    }
    head[C] = 0.0f;
    if ((rc = gpt_reserve(m, B, T, 1))) goto done;
    lssar_rng rng;
    lssar_rng_stream(&rng, o->seed, 0x70726f6265ULL);   // "probe"
    lssar_progress pg;
    if (o->progress) lssar_progress_start(&pg, "orbits probe", "steps", o->steps);
    double tail = 0;
    int tail_n = 0;
    // the trainer's schedule as a factor of the peak rates: linear warmup over 10% of the steps
    // (at least 1), then cosine to 10%; and the trainer's AdamW step for the model and the head
    train_schedule sched = {1.0, 0.1, o->steps / 10 > 0 ? o->steps / 10 : 1, o->steps};
    const train_adamw adam = {0.9f, 0.95f, 1e-8f, o->wd};
    train_tensor head_t = {head, hg, hm, hv, (size_t)C + 1, 0.0f, 0};   // the head: no weight decay
    for (int step = 1; step <= o->steps; step++) {
        for (int b = 0; b < B; b++) {
            int64_t i = (int64_t)lssar_rng_below(&rng, (uint64_t)S);
            memcpy(in + (size_t)b * T * 2, seq + (size_t)i * LSSAR_ORB_ROWS * 2, sizeof(uint16_t) * T * 2);
            memcpy(yb + (size_t)b * T, y + (size_t)i * T, sizeof(float) * T);
            memcpy(mb + (size_t)b * T, mask + (size_t)i * T, T);
        }
        if ((rc = gpt_forward_hidden(m, in, B, T)) || (rc = gpt_get_hidden(m, h))) goto done;
        orb_head_forward(pred, h, head, head[C], B * T, C);
        memset(hg, 0, sizeof(float) * (C + 1));
        double loss = orb_head_loss_backward(pred, yb, mb, h, head, B * T, C, dh, hg, hg + C);
        if (!isfinite(loss)) {
            rc = lssar_fail(LSSAR_E_NAN, "probe: the loss became %g at step %d; lower --lr", loss, step);
            goto done;
        }
        if ((rc = gpt_zero_grad(m)) || (rc = gpt_backward_hidden(m, dh, 1.0f))) goto done;
        float norm = gpt_clip_grad_norm(m, o->clip);
        if (!isfinite(norm)) {
            rc = lssar_fail(LSSAR_E_NAN, "probe: the gradient became %g at step %d; lower --lr", (double)norm,
                            step);
            goto done;
        }
        double f = train_lr_at(&sched, step);
        head_t.lr = (float)(o->head_lr * f);
        if ((rc = train_adamw_step(m, (float)(o->lr * f), &head_t, 1, step, &adam))) goto done;
        if (step > o->steps - (o->steps + 9) / 10) { tail += loss; tail_n++; }
        if (o->progress) {
            char extra[64];
            snprintf(extra, sizeof extra, "mse %.4f", loss);
            lssar_progress_update(&pg, step, extra);
        }
    }
    if (final_loss) *final_loss = tail_n ? tail / tail_n : NAN;
    // predictions: every system holding a requested row, in batches
    {
        int64_t *order = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
        if (!order) { rc = lssar_fail(LSSAR_E_NOMEM, "probe: out of memory"); goto done; }
        for (int64_t k = 0; k < n; k++) order[k] = k;
        // sort positions by system (insertion into buckets would do; qsort_r is not C11, so a
        // simple merge of the ids' systems through a counting pass)
        int64_t *cnt = calloc((size_t)S + 1, sizeof(int64_t));
        if (!cnt) { free(order); rc = lssar_fail(LSSAR_E_NOMEM, "probe: out of memory"); goto done; }
        for (int64_t k = 0; k < n; k++) cnt[ids[k] / LSSAR_ORB_ROWS + 1]++;
        for (int64_t i = 0; i < S; i++) cnt[i + 1] += cnt[i];
        int64_t *pos = malloc(sizeof(int64_t) * (size_t)(S + 1));
        if (!pos) {
            free(order);
            free(cnt);
            rc = lssar_fail(LSSAR_E_NOMEM, "probe: out of memory");
            goto done;
        }
        memcpy(pos, cnt, sizeof(int64_t) * (size_t)(S + 1));
        for (int64_t k = 0; k < n; k++) order[pos[ids[k] / LSSAR_ORB_ROWS]++] = k;
        free(pos);
        int64_t *sys_list = malloc(sizeof(int64_t) * (size_t)S);
        int64_t ns = 0;
        for (int64_t i = 0; i < S; i++) if (cnt[i + 1] > cnt[i] && sys_list) sys_list[ns++] = i;
        if (!sys_list) {
            free(order);
            free(cnt);
            rc = lssar_fail(LSSAR_E_NOMEM, "probe: out of memory");
            goto done;
        }
        for (int64_t j0 = 0; j0 < ns && !rc; j0 += B) {
            int b = ns - j0 < B ? (int)(ns - j0) : B;
            for (int k = 0; k < b; k++)
                memcpy(in + (size_t)k * T * 2, seq + (size_t)sys_list[j0 + k] * LSSAR_ORB_ROWS * 2,
                       sizeof(uint16_t) * T * 2);
            if ((rc = gpt_forward_hidden(m, in, b, T)) || (rc = gpt_get_hidden(m, h))) break;
            orb_head_forward(pred, h, head, head[C], b * T, C);
            for (int k = 0; k < b; k++) {
                int64_t i = sys_list[j0 + k];
                for (int64_t q = cnt[i]; q < cnt[i + 1]; q++) {
                    int64_t id = ids[order[q]];
                    double v = pred[(size_t)k * T + id % LSSAR_ORB_ROWS] * scale + shift;
                    pred_out[order[q]] = o->target_log ? pow(10.0, v) : v;
                }
            }
        }
        free(order); free(cnt); free(sys_list);
    }
done:
    free(seq); free(y); free(mask); free(in); free(h); free(dh); free(pred); free(yb); free(mb);
    free(head); free(hg); free(hm); free(hv);
    return rc;
}
