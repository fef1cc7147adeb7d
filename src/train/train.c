// train.c - the training loop: micro-batches and accumulation, clipping and AdamW on the device,
// the losses read back once per logging interval, validation, checkpoints; see train.h. The run's
// opening (options, directory, model, data) is train_open.c.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cJSON.h>
#include "train_open.h"
#include "attn/attn.h"
#include "core/dist.h"

train_hooks train_test_hooks;

// The steps of one logging interval (--log-every): they run without waiting for the device, and
// their losses and gradient norms are read back together at its end.
typedef struct {
    int cap;               // steps at most: --log-every, or fewer where the run ends sooner
    int64_t first;         // its first step
    int pending;           // its steps so far
    double t0, comm0;      // when it started; the collectives' seconds then
    double t1;             // when it ended (read back)
    double *loss;          // (cap) each step's summed micro-batch losses
    float *norm;           // (cap) each step's gradient norm
} log_interval;

static void fmt_eta(char *b, size_t n, double s) {
    long t = s < 0 || s > 1e8 ? -1 : (long)(s + 0.5);
    if (t < 0) snprintf(b, n, "?");
    else if (t >= 3600) snprintf(b, n, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
    else snprintf(b, n, "%ld:%02ld", t / 60, t % 60);
}

// A failed write: say what is still good and how to go on.
static int write_failed(int rc, const char *out, int64_t saved_step) {
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", lssar_errmsg());
    if (saved_step >= 0)
        return lssar_fail(rc, "%s. The previous checkpoint in %s (step %lld) is intact: fix that, then "
                          "continue with `lssar train --resume --out %s`", msg, out, (long long)saved_step,
                          out);
    return lssar_fail(rc, "%s. No checkpoint had been saved yet: fix that, then start the run again", msg);
}

// The NaN guard's error for step `step`.
static int not_finite(const train_opts *o, int64_t step, int loss_bad, int64_t saved_step) {
    char where[4200];
    if (saved_step >= 0)
        snprintf(where, sizeof where, "the last checkpoint in %s (step %lld) is intact", o->out,
                 (long long)saved_step);
    else snprintf(where, sizeof where, "no checkpoint was written");
    return lssar_fail(LSSAR_E_NAN, "step %lld: the %s is %s; stopped without saving: %s. Lower --lr, raise "
                      "--warmup, or check the data", (long long)step, loss_bad ? "loss" : "gradient norm",
                      "not finite (NaN or Inf)", where);
}

// One micro-batch of `ranks` x B windows: every rank draws the windows of all of them, in one
// process's order, from rng, and keeps its own (rank's) in inputs, targets.
static int draw_batch(const train_ctx *c, lssar_rng *rng) {
    int rc = 0;
    for (int k = 0; k < c->ranks && !rc; k++)
        rc = c->src.next_batch(c->src.ctx, rng, c->B, c->T, k == c->rank ? c->in : NULL,
                               k == c->rank ? c->tg : NULL);
    return rc;
}

// The run's two opening lines: the model, then the steps, batch, schedule and memory.
static void print_header(const train_ctx *c, int64_t first, int64_t end) {
    const gpt_config *cfg = c->cfg;
    const train_state *s = &c->s;
    const train_opts *o = c->o;
    char pdesc[64] = "", rdesc[64] = "";
    lssar_attn_stages ast = attn_stages(cfg->attn);
    if (ast.reweight) snprintf(pdesc, sizeof pdesc, " (p %g)", cfg->p);
    if (ast.norm == LSSAR_NORM_LEN)
        snprintf(pdesc, sizeof pdesc, " (len-norm %s)", lssar_len_norm_name(cfg->len_norm));
    if (cfg->temp_d > 0 && ast.score == LSSAR_SCORE_COS)
        snprintf(pdesc + strlen(pdesc), sizeof pdesc - strlen(pdesc), " (ln(%d) ln(n))", cfg->temp_d);
    if (c->ranks > 1) snprintf(rdesc, sizeof rdesc, " x %d ranks%s", c->ranks, o->zero ? " (ZeRO-1)" : "");
    char mdesc[128];
    snprintf(mdesc, sizeof mdesc, "AdamW state %.2f MiB per rank, activations %.2f MiB%s",
             gpt_dp_moment_floats(c->dp) * 4.0 / (1 << 20),
             gpt_activation_bytes(c->m, c->B, c->T, 1) / (double)(1 << 20),
             o->recompute ? " (recompute)" : "");
    fprintf(stderr, "lssar train: %s attention%s, %d layers, %d heads, width %d, vocab %d x %d channel%s, "
            "%s positions, %zu parameters\n", lssar_attn_name(cfg->attn), pdesc, cfg->layers, cfg->heads,
            cfg->dim, cfg->vocab, c->C, c->C > 1 ? "s" : "", lssar_pos_name(cfg->pos), gpt_num_params(c->m));
    if (cfg->pos == LSSAR_POS_ROPE && cfg->rope_base != GPT_ROPE_BASE)
        fprintf(stderr, "lssar train: RoPE base %g\n", (double)cfg->rope_base);
    fprintf(stderr, "lssar train: steps %lld..%lld of %d, batch %d x %d tokens x accum %d%s, lr %g (warmup "
            "%d, cosine to %g), %s, out %s\n", (long long)first, (long long)end, s->steps, c->B, c->T,
            c->accum, rdesc, s->lr, s->warmup, s->lr * s->min_lr_frac, mdesc, o->out);
}

// One optimizer step: each micro-batch computes while the next one is drawn and staged
// (gpt_prefetch); then clip and AdamW on the device. ahead: the data stream after the staged batch
// (c->s.rng: after the batches consumed, what a checkpoint stores).
static int run_step(train_ctx *c, int64_t step, int64_t end, float lr, lssar_rng *ahead) {
    train_state *s = &c->s;
    int rc;
    for (int a = 0; a < c->accum; a++) {
        int lrc = gpt_zero_grad(c->m);
        // the staged batch; its loss stays in the device accumulator (gpt_dp_add_grads keeps it)
        if (!lrc) lrc = gpt_forward(c->m, NULL, NULL, c->B, c->T, NULL);
        s->rng = *ahead;
        if (!lrc && (a + 1 < c->accum || step < end)) {   // the next one, while this one computes
            lrc = draw_batch(c, ahead);
            if (!lrc) lrc = gpt_prefetch(c->m, c->in, c->tg, c->B, c->T);
        }
        // a host error on any rank (a bad token, a short read) stops every rank
        if ((rc = lssar_dist_agree(lrc))) return rc;
        if ((rc = lssar_dist_agree(gpt_backward(c->m, 1.0f / s->accum)))) return rc;
        if (train_test_hooks.grads_done &&
            (rc = lssar_dist_agree(train_test_hooks.grads_done(c->m, step, a)))) return rc;
        if ((rc = gpt_dp_add_grads(c->dp, a))) return rc;
    }
    // a non-finite norm makes the parameters NaN, which the interval's end catches before
    // anything is saved
    return gpt_dp_step(c->dp, s->clip, (int)step, lr, s->beta1, s->beta2, s->eps, s->wd, NULL);
}

// The interval's end, its one wait for the device: each step's loss and norm read back (and
// exchanged between the ranks), checked in step order, logged one line per step.
static int end_interval(train_ctx *c, log_interval *iv, train_result *r) {
    int got = 0;   // == pending
    int rc = gpt_dp_flush(c->dp, &got, iv->loss, iv->norm);
    if (rc) return rc;
    iv->t1 = lssar_now();
    double dt = (iv->t1 - iv->t0) / iv->pending;   // the interval's seconds per step
    double comm = (gpt_dp_comm_seconds(c->dp) - iv->comm0) / iv->pending;
    const double tokens_per_step = (double)c->B * c->T * c->s.accum;
    for (int i = 0; i < iv->pending && !rc; i++) {
        int64_t st = iv->first + i;
        double loss_sum = iv->loss[i];
        if (train_test_hooks.step_loss) loss_sum = train_test_hooks.step_loss(st, loss_sum);
        float gnorm = iv->norm[i];
        // the same values on every rank (read back, exchanged): they all stop here together
        if (!isfinite(loss_sum) || !isfinite(gnorm))
            return not_finite(c->o, st, !isfinite(loss_sum), c->saved_step);
        r->step = st;
        r->train_loss = (float)(loss_sum / c->s.accum);
        if (c->lead) {
            cJSON *j = cJSON_CreateObject();
            cJSON_AddNumberToObject(j, "step", (double)st);
            cJSON_AddNumberToObject(j, "loss", r->train_loss);
            cJSON_AddNumberToObject(j, "lr", train_lr(&c->s, st));
            cJSON_AddNumberToObject(j, "grad_norm", gnorm);
            cJSON_AddNumberToObject(j, "ms", dt * 1e3);
            cJSON_AddNumberToObject(j, "tokens_per_s", tokens_per_step / dt);
            if (c->ranks > 1) cJSON_AddNumberToObject(j, "comm_ms", comm * 1e3);
            rc = train_log_line(c->logf, c->lp, j);
            if (rc) rc = write_failed(rc, c->o->out, c->saved_step);
        }
    }
    return lssar_dist_agree(rc);
}

// Every rank evaluates its share of the validation batches (the same numbers as one process);
// rank 0 alone logs them.
static int validate(train_ctx *c, int64_t step, train_result *r) {
    eval_result er;
    int rc = eval_shard_ranks(c->m, &c->val, c->T, c->B, c->o->eval_batches * c->B, &er, NULL);
    if (rc) return rc;
    r->val_loss = er.loss;
    if (c->lead) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "step", (double)step);
        cJSON_AddNumberToObject(e, "val_loss", er.loss);
        cJSON_AddNumberToObject(e, "val_tokens", (double)er.tokens);
        if ((rc = train_log_line(c->logf, c->lp, e))) rc = write_failed(rc, c->o->out, c->saved_step);
        else if (!c->quiet)
            fprintf(stderr, "step %lld/%d | val loss %.4f (%zu tokens)\n", (long long)step, c->s.steps,
                    er.loss, er.tokens);
    }
    return lssar_dist_agree(rc);
}

// The checkpoint of step `step`, written by rank 0 with the AdamW moments of every rank.
static int save(train_ctx *c, int64_t step) {
    int rc = gpt_dp_gather_moments(c->dp);
    if (!rc && c->lead && (rc = train_ckpt_save(c->o->out, c->m, &c->s)))
        rc = write_failed(rc, c->o->out, c->saved_step);
    gpt_dp_drop_moments(c->dp);
    if ((rc = lssar_dist_agree(rc))) return rc;
    c->saved_step = step;
    return 0;
}

// Steps first..end. A logging interval ends early before each validation and checkpoint, so
// neither ever follows a bad step. t0: when the run started, for its rates.
static int run_steps(train_ctx *c, log_interval *iv, int64_t first, int64_t end, double t0, train_result *r) {
    const train_opts *o = c->o;
    const double tokens_per_step = (double)c->B * c->T * c->s.accum;
    double last_print = 0;
    lssar_rng ahead = c->s.rng;
    int rc;
    if (first <= end) {
        int lrc = draw_batch(c, &ahead);
        if (!lrc) lrc = gpt_prefetch(c->m, c->in, c->tg, c->B, c->T);
        if ((rc = lssar_dist_agree(lrc))) return rc;
    }
    for (int64_t step = first; step <= end; step++) {
        if (!iv->pending) { iv->first = step; iv->t0 = lssar_now(); iv->comm0 = gpt_dp_comm_seconds(c->dp); }
        if (train_test_hooks.step_start) train_test_hooks.step_start(step);
        float lr = train_lr(&c->s, step);
        if ((rc = run_step(c, step, end, lr, &ahead))) return rc;
        iv->pending++;
        int last = step == end;
        int eval_now = c->have_val && (last || (o->eval_every > 0 && step % o->eval_every == 0));
        int save_now = last || (o->save_every > 0 && step % o->save_every == 0);
        if (iv->pending < iv->cap && !eval_now && !save_now) continue;
        if ((rc = end_interval(c, iv, r))) return rc;
        c->s.step = step;
        if (!c->quiet && (iv->t1 - last_print >= 1.0 || last || iv->first == first)) {
            last_print = iv->t1;
            double rate = (iv->t1 - t0) / (double)(step - first + 1);   // seconds per step so far
            char eta[32];
            fmt_eta(eta, sizeof eta, rate * (double)(end - step));
            fprintf(stderr, "step %lld/%d | loss %.4f | lr %.3e | gnorm %.3f | %.0f tok/s | %.1f ms/step | "
                    "ETA %s\n", (long long)step, c->s.steps, r->train_loss, lr, iv->norm[iv->pending - 1],
                    tokens_per_step / rate, rate * 1e3, eta);
        }
        iv->pending = 0;
        if (eval_now && (rc = validate(c, step, r))) return rc;
        if (save_now && (rc = save(c, step))) return rc;
    }
    return 0;
}

int train_close(train_ctx *c, int rc) {
    if (c->logf && fclose(c->logf) != 0 && !rc) {
        int e = errno;
        rc = lssar_fail(LSSAR_E_IO, "closing %s failed: %s (%s)", c->lp, strerror(e), lssar_io_hint(e));
        rc = write_failed(rc, c->o->out, c->saved_step);
    }
    if (c->locked) train_dir_unlock(c->o->out);
    if (c->src.close) c->src.close(c->src.ctx);
    free(c->in); free(c->tg);
    if (c->have_val) shard_close(&c->val);
    dl_close(&c->dl);
    gpt_dp_free(c->dp);
    if (c->m) gpt_free(c->m);
    return rc;
}

int train_run(const train_opts *o, train_result *r) {
    train_result dummy;
    if (!r) r = &dummy;
    memset(r, 0, sizeof *r);
    r->val_loss = r->train_loss = NAN;   // NaN: no step ran (a resumed run already at its end)
    train_ctx c;
    int rc = train_open(&c, o);
    if (rc) return train_close(&c, rc);
    int64_t end = c.s.steps;
    if (o->stop_at > 0 && o->stop_at < end) end = o->stop_at;
    const int64_t first = c.s.step + 1;
    if (!c.quiet && first <= end) print_header(&c, first, end);   // else only the nothing-to-do line below
    double t0 = lssar_now();
    // The steps of an interval run without waiting for the device: each one's loss and gradient
    // norm stay on the backend (gpt_dp_records) and are read back, and exchanged between the
    // ranks, once at the interval's end; then the log gets one line per step and the NaN guard
    // looks at each step in order (naming the first bad one).
    const int log_every = o->log_every > 0 ? o->log_every : 1;
    const int64_t left = end - first + 1;
    log_interval iv = {.cap = left < 1 ? 0 : (int)(left < log_every ? left : log_every)};
    if ((rc = lssar_dist_agree(gpt_dp_records(c.dp, iv.cap)))) return train_close(&c, rc);
    iv.loss = malloc(sizeof(double) * (iv.cap ? iv.cap : 1));
    iv.norm = malloc(sizeof(float) * (iv.cap ? iv.cap : 1));
    if (!iv.loss || !iv.norm) rc = lssar_fail(LSSAR_E_NOMEM, "out of memory");
    else rc = run_steps(&c, &iv, first, end, t0, r);
    free(iv.loss); free(iv.norm);
    if (rc) return train_close(&c, rc);
    if (first > end) {
        if (!c.quiet)
            fprintf(stderr, "lssar train: %s is already at step %lld of %d: nothing to do (pass a larger "
                    "--steps to continue)\n", o->out, (long long)c.s.step, c.s.steps);
        r->step = c.s.step;
    }
    r->seconds = lssar_now() - t0;
    return train_close(&c, 0);
}
