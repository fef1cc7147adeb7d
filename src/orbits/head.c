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

// One probe: the sequences, their labels, a batch's buffers and the head (w (C), b) with its
// AdamW gradient and moments.
typedef struct {
    int T, C, B;
    int64_t S;                         // systems
    uint16_t *seq;                     // (S, LSSAR_ORB_ROWS, 2) the token sequences
    float *y;                          // (S, T) labels: y at input position t = row t
    unsigned char *mask;               // (S, T) which are labelled
    uint16_t *in;                      // (B, T, 2)
    float *h, *dh;                     // (B, T, C) hidden states and their gradient
    float *pred, *yb;                  // (B, T)
    unsigned char *mb;                 // (B, T)
    float *head, *hg, *hm, *hv;        // (C + 1)
    double shift, scale;               // label = (target - shift) / scale
} probe_run;

static int probe_check_model(const gpt_config *cfg, const orb_probe_opts *o, int T) {
    if (cfg->channels != 2 || cfg->vocab < LSSAR_ORB_VOCAB - 1)
        return lssar_fail(LSSAR_E_ARG, "the model has %d channel(s) and vocabulary %d; the probe needs an "
                          "orbit model (2 channels, vocabulary %d)", cfg->channels, cfg->vocab,
                          LSSAR_ORB_VOCAB);
    if (cfg->pos == LSSAR_POS_LEARNED && cfg->max_seq < T)
        return lssar_fail(LSSAR_E_ARG, "the force probe reads whole sequences (%d positions) but this model "
                          "has learned positions up to %d; train it with --seq %d (or use rope / "
                          "none positions)", T, cfg->max_seq, T);
    if (o->batch < 1 || o->steps < 0)
        return lssar_fail(LSSAR_E_ARG, "probe: batch must be >= 1 and steps >= 0");
    return 0;
}

static int probe_alloc(probe_run *p) {
    const int64_t S = p->S;
    const int T = p->T, B = p->B, C = p->C;
    p->y = malloc(sizeof(float) * (size_t)S * T);
    p->mask = calloc((size_t)S * T, 1);
    p->in = malloc(sizeof(uint16_t) * (size_t)B * T * 2);
    p->h = malloc(sizeof(float) * (size_t)B * T * C);
    p->dh = malloc(sizeof(float) * (size_t)B * T * C);
    p->pred = malloc(sizeof(float) * (size_t)B * T);
    p->yb = malloc(sizeof(float) * (size_t)B * T);
    p->mb = malloc((size_t)B * T);
    p->head = calloc((size_t)C + 1, sizeof(float));    // w (C), b
    p->hg = calloc((size_t)C + 1, sizeof(float));
    p->hm = calloc((size_t)C + 1, sizeof(float));
    p->hv = calloc((size_t)C + 1, sizeof(float));
    if (!p->y || !p->mask || !p->in || !p->h || !p->dh || !p->pred || !p->yb || !p->mb || !p->head ||
        !p->hg || !p->hm || !p->hv)
        return lssar_fail(LSSAR_E_NOMEM, "probe: out of memory");
    return 0;
}

static void probe_free(probe_run *p) {
    free(p->seq); free(p->y); free(p->mask); free(p->in); free(p->h); free(p->dh); free(p->pred); free(p->yb);
    free(p->mb); free(p->head); free(p->hg); free(p->hm); free(p->hv);
}

// The labels: the training rows' forces (log10 with target_log), standardised over them.
static void probe_labels(probe_run *p, const orb_state *st, const orb_force_split *s,
                         const orb_probe_opts *o) {
    const int T = p->T;
    double sum = 0, sq = 0;
    for (int64_t k = 0; k < s->ntrain; k++) {
        double F = st->rows[(size_t)s->train[k] * ORB_S_FIELDS + ORB_S_F];
        double v = o->target_log ? log10(F > 1e-30 ? F : 1e-30) : F;
        sum += v; sq += v * v;
    }
    double mu = sum / s->ntrain, sd = sqrt(fmax(sq / s->ntrain - mu * mu, 1e-30));
    p->shift = o->target_log ? mu : 0.0;
    p->scale = o->target_log ? sd : sqrt(sq / s->ntrain);
    if (!(p->scale > 0)) p->scale = 1;
    for (int64_t k = 0; k < s->ntrain; k++) {
        int64_t id = s->train[k], sys = id / LSSAR_ORB_ROWS;
        int row = (int)(id % LSSAR_ORB_ROWS);
        double F = st->rows[(size_t)id * ORB_S_FIELDS + ORB_S_F];
        double v = o->target_log ? log10(F > 1e-30 ? F : 1e-30) : F;
        p->y[(size_t)sys * T + row] = (float)((v - p->shift) / p->scale);
        p->mask[(size_t)sys * T + row] = 1;
    }
    p->head[p->C] = 0.0f;
}

// Fine-tune the model and the head together on random systems: the trainer's schedule as a factor
// of the peak rates (linear warmup over 10% of the steps, at least 1, then cosine to 10%) and its
// AdamW step. *final_loss: the mean loss of the last tenth of the steps.
static int probe_fit(probe_run *p, gpt *m, const orb_probe_opts *o, double *final_loss) {
    const int T = p->T, C = p->C, B = p->B;
    int rc = gpt_reserve(m, B, T, 1);
    if (rc) return rc;
    lssar_rng rng;
    lssar_rng_stream(&rng, o->seed, 0x70726f6265ULL);   // "probe"
    lssar_progress pg;
    if (o->progress) lssar_progress_start(&pg, "orbits probe", "steps", o->steps);
    double tail = 0;
    int tail_n = 0;
    train_schedule sched = {1.0, 0.1, o->steps / 10 > 0 ? o->steps / 10 : 1, o->steps};
    const train_adamw adam = {0.9f, 0.95f, 1e-8f, o->wd};
    // the head: no weight decay
    train_tensor head_t = {p->head, p->hg, p->hm, p->hv, (size_t)C + 1, 0.0f, 0};
    for (int step = 1; step <= o->steps; step++) {
        for (int b = 0; b < B; b++) {
            int64_t i = (int64_t)lssar_rng_below(&rng, (uint64_t)p->S);
            memcpy(p->in + (size_t)b * T * 2, p->seq + (size_t)i * LSSAR_ORB_ROWS * 2,
                   sizeof(uint16_t) * T * 2);
            memcpy(p->yb + (size_t)b * T, p->y + (size_t)i * T, sizeof(float) * T);
            memcpy(p->mb + (size_t)b * T, p->mask + (size_t)i * T, T);
        }
        if ((rc = gpt_forward_hidden(m, p->in, B, T)) || (rc = gpt_get_hidden(m, p->h))) return rc;
        orb_head_forward(p->pred, p->h, p->head, p->head[C], B * T, C);
        memset(p->hg, 0, sizeof(float) * (C + 1));
        double loss = orb_head_loss_backward(p->pred, p->yb, p->mb, p->h, p->head, B * T, C, p->dh, p->hg,
                                             p->hg + C);
        if (!isfinite(loss))
            return lssar_fail(LSSAR_E_NAN, "probe: the loss became %g at step %d; lower --lr", loss, step);
        if ((rc = gpt_zero_grad(m)) || (rc = gpt_backward_hidden(m, p->dh, 1.0f))) return rc;
        float norm = gpt_clip_grad_norm(m, o->clip);
        if (!isfinite(norm))
            return lssar_fail(LSSAR_E_NAN, "probe: the gradient became %g at step %d; lower --lr",
                              (double)norm, step);
        double f = train_lr_at(&sched, step);
        head_t.lr = (float)(o->head_lr * f);
        if ((rc = train_adamw_step(m, (float)(o->lr * f), &head_t, 1, step, &adam))) return rc;
        if (step > o->steps - (o->steps + 9) / 10) { tail += loss; tail_n++; }
        if (o->progress) {
            char extra[64];
            snprintf(extra, sizeof extra, "mse %.4f", loss);
            lssar_progress_update(&pg, step, extra);
        }
    }
    if (final_loss) *final_loss = tail_n ? tail / tail_n : NAN;
    return 0;
}

// Predictions for the rows ids (n): every system holding a requested row, in batches. The rows
// are grouped by system with a counting pass (qsort_r is not C11): cnt[i] .. cnt[i + 1] - 1 are
// the places in order of system i's rows.
static int probe_predict(probe_run *p, gpt *m, const orb_probe_opts *o, const int64_t *ids, int64_t n,
                         double *pred_out) {
    const int T = p->T, C = p->C, B = p->B;
    const int64_t S = p->S;
    int64_t *order = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
    int64_t *cnt = calloc((size_t)S + 1, sizeof(int64_t));
    int64_t *pos = malloc(sizeof(int64_t) * (size_t)(S + 1));
    int64_t *sys_list = malloc(sizeof(int64_t) * (size_t)S);
    int rc = !order || !cnt || !pos || !sys_list ? lssar_fail(LSSAR_E_NOMEM, "probe: out of memory") : 0;
    int64_t ns = 0;
    if (!rc) {
        for (int64_t k = 0; k < n; k++) cnt[ids[k] / LSSAR_ORB_ROWS + 1]++;
        for (int64_t i = 0; i < S; i++) cnt[i + 1] += cnt[i];
        memcpy(pos, cnt, sizeof(int64_t) * (size_t)(S + 1));
        for (int64_t k = 0; k < n; k++) order[pos[ids[k] / LSSAR_ORB_ROWS]++] = k;
        for (int64_t i = 0; i < S; i++) if (cnt[i + 1] > cnt[i]) sys_list[ns++] = i;
    }
    for (int64_t j0 = 0; j0 < ns && !rc; j0 += B) {
        int b = ns - j0 < B ? (int)(ns - j0) : B;
        for (int k = 0; k < b; k++)
            memcpy(p->in + (size_t)k * T * 2, p->seq + (size_t)sys_list[j0 + k] * LSSAR_ORB_ROWS * 2,
                   sizeof(uint16_t) * T * 2);
        if ((rc = gpt_forward_hidden(m, p->in, b, T)) || (rc = gpt_get_hidden(m, p->h))) break;
        orb_head_forward(p->pred, p->h, p->head, p->head[C], b * T, C);
        for (int k = 0; k < b; k++) {
            int64_t i = sys_list[j0 + k];
            for (int64_t q = cnt[i]; q < cnt[i + 1]; q++) {
                int64_t id = ids[order[q]];
                double v = p->pred[(size_t)k * T + id % LSSAR_ORB_ROWS] * p->scale + p->shift;
                pred_out[order[q]] = o->target_log ? pow(10.0, v) : v;
            }
        }
    }
    free(order); free(cnt); free(pos); free(sys_list);
    return rc;
}

int orb_probe_fit_predict(gpt *m, const char *force_dir, const char *split, const orb_state *st,
                          const orb_force_split *s, const orb_probe_opts *o, const int64_t *ids, int64_t n,
                          double *pred_out, double *final_loss) {
    const gpt_config *cfg = gpt_get_config(m);
    probe_run p = {.T = LSSAR_ORB_ROWS - 1, .C = cfg->dim, .B = o->batch, .S = s->systems};
    int rc = probe_check_model(cfg, o, p.T);
    if (rc) return rc;
    if ((rc = load_sequences(force_dir, split, p.S, &p.seq))) return rc;
    rc = probe_alloc(&p);
    if (!rc) {
        probe_labels(&p, st, s, o);
        rc = probe_fit(&p, m, o, final_loss);
    }
    if (!rc) rc = probe_predict(&p, m, o, ids, n, pred_out);
    probe_free(&p);
    return rc;
}
