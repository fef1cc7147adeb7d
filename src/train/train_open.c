// train_open.c - opening a run of train_run: the options, the run directory, a fresh or resumed
// model and its data; see train_open.h.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "core/dist.h"
#include "train_open.h"

#define GPT2_VOCAB 50257

void train_opts_default(train_opts *o) {
    memset(o, 0, sizeof *o);
    gpt_config *c = &o->model;   // vocab, channels and max_seq 0: the run's data and seq choose them
    c->attn = LSSAR_ATTN_LSSAR; c->p = 15.0f; c->pos = LSSAR_POS_ROPE; c->rope_base = GPT_ROPE_BASE;
    c->layers = 4; c->heads = 4; c->dim = 128; c->tied = 1;
    o->lr = 6e-4f; o->min_lr_frac = 0.1f; o->wd = 0.1f; o->clip = 1.0f;
    o->beta1 = 0.9f; o->beta2 = 0.95f; o->eps = 1e-8f;
    o->warmup = -1; o->steps = 0; o->batch = 8; o->seq = 128; o->accum = 1;
    o->seed = 1337; o->eval_batches = 4; o->align = 1; o->log_every = 1;
}

static int shard_next_batch(void *ctx, lssar_rng *rng, int B, int T, uint16_t *inputs, uint16_t *targets) {
    dataloader *d = ctx;
    if (T != d->T)
        return lssar_fail(LSSAR_E_ARG, "shard source: batch length %d, but the shards were opened for %d", T,
                          d->T);
    dl_next_batch(d, rng, B, inputs, targets);
    return 0;
}

train_source train_shard_source(dataloader *d) {
    train_source s = {d, shard_next_batch, NULL};
    return s;
}

static int file_exists(const char *path) { struct stat st; return stat(path, &st) == 0; }

static int check_opts(const train_opts *o) {
    if (!o->out || !*o->out)
        return lssar_fail(LSSAR_E_ARG, "--out is required: the run directory for checkpoints and the log");
    if (o->steps < 0) return lssar_fail(LSSAR_E_ARG, "--steps must be >= 1");
    if (o->stop_at < 0) return lssar_fail(LSSAR_E_ARG, "--stop-at must be >= 0 (0: run to --steps)");
    if (o->eval_every < 0 || o->save_every < 0)
        return lssar_fail(LSSAR_E_ARG, "--eval-every and --save-every must be >= 0 (0: only at the end)");
    if (o->eval_batches < 1) return lssar_fail(LSSAR_E_ARG, "--eval-batches must be >= 1");
    if (o->log_every < 0)
        return lssar_fail(LSSAR_E_ARG, "--log-every must be >= 1 (1: read the loss back after every step)");
    if (o->resume) return 0;   // the rest comes from the checkpoint
    if (!o->data || !*o->data)
        return lssar_fail(LSSAR_E_ARG, "--data is required: one or more token shards (TRAIN.bin[,MORE.bin])");
    if (o->steps < 1) return lssar_fail(LSSAR_E_ARG, "--steps must be >= 1");
    if (o->batch < 1 || o->seq < 1 || o->accum < 1)
        return lssar_fail(LSSAR_E_ARG, "--batch, --seq and --accum must be >= 1");
    if (!(o->lr > 0)) return lssar_fail(LSSAR_E_ARG, "--lr must be > 0");
    if (!(o->passkey_mix >= 0 && o->passkey_mix <= 1))
        return lssar_fail(LSSAR_E_ARG, "--passkey-mix must be in [0, 1]");
    if (!(o->clip >= 0)) return lssar_fail(LSSAR_E_ARG, "--clip must be >= 0 (0: no clipping)");
    if (!(o->wd >= 0)) return lssar_fail(LSSAR_E_ARG, "--wd must be >= 0");
    if (!(o->min_lr_frac >= 0 && o->min_lr_frac <= 1))
        return lssar_fail(LSSAR_E_ARG, "the cosine floor must be in [0, 1] of --lr");
    if (!(o->beta1 >= 0 && o->beta1 < 1 && o->beta2 >= 0 && o->beta2 < 1 && o->eps > 0))
        return lssar_fail(LSSAR_E_ARG, "AdamW needs 0 <= beta1, beta2 < 1 and eps > 0");
    return 0;
}

// Fresh run: the shards, the vocabulary, the config and the model, the schedule, the data stream.
static int start_fresh(train_ctx *c) {
    const train_opts *o = c->o;
    int rc = dl_open(&c->dl, o->data, o->seq, o->align, "--data");
    if (rc) return rc;
    const dataloader *dl = &c->dl;
    // no --vocab: what the shards record
    int vocab = o->model.vocab > 0 ? o->model.vocab : dl_vocab(dl), mx = dl_max_token(dl);
    if (vocab <= 0) {
        if (mx >= GPT2_VOCAB)
            return lssar_fail(LSSAR_E_ARG, "the training shards hold token ids up to %d: pass --vocab (at "
                              "least %d)", mx, mx + 1);
        vocab = GPT2_VOCAB;
        if (!o->quiet && mx < 257)
            fprintf(stderr, "lssar train: --vocab not given, using %d (GPT-2); the data's ids all fit in 257 "
                    "(byte tokenizer?): --vocab 257 trains much faster\n", vocab);
    }
    if ((rc = dl_check_vocab(dl, vocab, "--data"))) return rc;
    gpt_config cfg = o->model;
    cfg.vocab = vocab;
    cfg.channels = dl->channels;
    cfg.max_seq = o->seq;
    if ((rc = gpt_config_check(&cfg))) return rc;
    if ((rc = gpt_create(&cfg, o->seed, &c->m))) return rc;
    if (o->ordinal > 0 && (rc = gpt_init_ordinal(c->m, o->ordinal))) {
        char why[512];
        snprintf(why, sizeof why, "%s", lssar_errmsg());
        gpt_free(c->m); c->m = NULL;
        return lssar_fail(rc, "--ordinal %d: %s", o->ordinal, why);
    }
    train_state *s = &c->s;
    memset(s, 0, sizeof *s);
    s->lr = o->lr; s->min_lr_frac = o->min_lr_frac;
    s->warmup = o->warmup >= 0 ? o->warmup : o->steps / 10;
    s->steps = o->steps; s->batch = o->batch; s->seq = o->seq;
    s->seed = o->seed; s->wd = o->wd; s->clip = o->clip;
    s->beta1 = o->beta1; s->beta2 = o->beta2; s->eps = o->eps;
    s->passkey_mix = o->passkey_mix;
    s->passkey_prompt = o->passkey_prompt;
    s->align = o->align;
    snprintf(s->data, sizeof s->data, "%s", o->data);
    snprintf(s->val, sizeof s->val, "%s", o->val ? o->val : "");
    s->step = 0;
    // The data stream is a separate stream of the seed, so it does not repeat the init's numbers.
    lssar_rng_stream(&s->rng, o->seed, 1);
    s->accum = o->accum * c->ranks;   // the checkpoint stores the step's micro-batches over all ranks
    if ((rc = gpt_set_recompute(c->m, o->recompute))) return rc;
    return gpt_reserve(c->m, s->batch, s->seq, 1);
}

// Resume: model + AdamW state + data cursor from DIR; the stored schedule unless --steps moves it.
static int load_checkpoint(const train_opts *o, gpt **m, train_state *s) {
    char mp[4096], tp[4096];
    snprintf(mp, sizeof mp, "%s/%s", o->out, CKPT_MODEL_FILE);
    snprintf(tp, sizeof tp, "%s/%s", o->out, CKPT_TRAINER_FILE);
    if (!file_exists(mp) || !file_exists(tp))
        return lssar_fail(LSSAR_E_IO, "--resume: %s has no %s and %s to continue from: train without "
                          "--resume first", o->out, CKPT_MODEL_FILE, CKPT_TRAINER_FILE);
    int64_t mstep;
    int rc = ckpt_read_train_state(tp, s);
    if (!rc) rc = ckpt_load_model(mp, &(ckpt_load_opts){.device = o->model.device}, m, &mstep);
    if (!rc && mstep != s->step)
        rc = lssar_fail(LSSAR_E_FORMAT, "%s is at step %lld but %s at step %lld (a run stopped between "
                        "writing the two?): cannot resume exactly; start a new --out", mp, (long long)mstep,
                        tp, (long long)s->step);
    if (!rc && gpt_get_config(*m)->max_seq != s->seq)
        rc = lssar_fail(LSSAR_E_FORMAT, "%s: the model's max_seq %d differs from the trainer's seq %d: "
                        "mismatched files", o->out, gpt_get_config(*m)->max_seq, s->seq);
    if (!rc) rc = gpt_set_recompute(*m, o->recompute);
    if (!rc) rc = gpt_reserve(*m, s->batch, s->seq, 1);
    if (!rc) rc = ckpt_load_trainer(*m, tp, s);
    if (rc) { if (*m) gpt_free(*m); *m = NULL; return rc; }
    if (o->steps > 0 && o->steps != s->steps) {
        if (!o->quiet)
            fprintf(stderr, "lssar train: --steps %d replaces the checkpoint's schedule length %d: the "
                    "cosine decay is re-spread from step %lld on (an uninterrupted run with --steps %d would "
                    "differ)\n", o->steps, s->steps, (long long)s->step, o->steps);
        s->steps = o->steps;
    }
    if (o->override_optim) {
        if (!o->quiet)
            fprintf(stderr, "lssar train: optimizer settings changed from step %lld on (lr %g, warmup %d, "
                    "floor %g, wd %g, clip %g)\n", (long long)s->step, o->lr, o->warmup, o->min_lr_frac,
                    o->wd, o->clip);
        s->lr = o->lr; s->min_lr_frac = o->min_lr_frac; s->warmup = o->warmup < 0 ? s->warmup : o->warmup;
        s->wd = o->wd; s->clip = o->clip; s->beta1 = o->beta1; s->beta2 = o->beta2; s->eps = o->eps;
    }
    if (o->data && *o->data && strcmp(o->data, s->data)) snprintf(s->data, sizeof s->data, "%s", o->data);
    if (o->val && strcmp(o->val, s->val)) snprintf(s->val, sizeof s->val, "%s", o->val);
    return 0;
}

// Resumed run: the checkpoint, the log trimmed to it, the shards it names (or --data's).
static int start_resume(train_ctx *c) {
    const train_opts *o = c->o;
    train_state *s = &c->s;
    int rc = load_checkpoint(o, &c->m, s);
    if (rc) return rc;
    if (c->lead && (rc = train_log_trim(c->lp, s->step))) return rc;
    c->saved_step = s->step;
    if ((rc = dl_open(&c->dl, s->data, s->seq, s->align, "--data"))) {
        // the shards named in the checkpoint: say where the names came from and the way out
        char why[1024];
        snprintf(why, sizeof why, "%s", lssar_errmsg());
        return lssar_fail(rc, "--resume: the training shards stored in %s/%s: %s (pass --data to name them "
                          "again)", o->out, CKPT_TRAINER_FILE, why);
    }
    const gpt_config *cfg = gpt_get_config(c->m);
    if (c->dl.channels != cfg->channels)
        return lssar_fail(LSSAR_E_FORMAT, "--data: the shards have %d token channels but the model in %s has "
                          "%d", c->dl.channels, o->out, cfg->channels);
    if ((rc = dl_check_vocab(&c->dl, cfg->vocab, "--data"))) return rc;
    if (s->accum % c->ranks)
        return lssar_fail(LSSAR_E_ARG, "--resume: a step of this run is %d micro-batches of %d windows, "
                          "which %d ranks cannot share evenly: resume it on a number of ranks that divides "
                          "%d", s->accum, s->batch, c->ranks, s->accum);
    return 0;
}

static int open_val(train_ctx *c) {
    const train_state *s = &c->s;
    if (!s->val[0]) return 0;
    int rc = shard_open(&c->val, s->val);
    if (rc) return rc;
    c->have_val = 1;
    if (c->val.channels != c->C)
        return lssar_fail(LSSAR_E_FORMAT, "--val: %s has %d token channels but the model has %d", s->val,
                          c->val.channels, c->C);
    if (eval_num_windows(&c->val, c->T) < 1)
        return lssar_fail(LSSAR_E_SIZE, "--val: %s has %zu positions, fewer than --seq + 1 = %d", s->val,
                          c->val.n, c->T + 1);
    return 0;
}

// The batches: the shards, or what o->source makes of them.
static int open_source(train_ctx *c) {
    const train_opts *o = c->o;
    train_source base = train_shard_source(&c->dl);
    if (o->source) {
        train_source_env env = {c->cfg, c->B, c->T, c->s.passkey_mix, c->s.passkey_prompt, c->quiet};
        int rc = o->source(o->source_arg, &env, &base, &c->src);
        if (rc) memset(&c->src, 0, sizeof c->src);
        return rc;
    }
    if (c->s.passkey_mix > 0)
        return lssar_fail(LSSAR_E_ARG, "this run mixes passkey windows into its batches (passkey_mix %g), "
                          "which needs the passkey data source: continue it with `lssar train --resume` (in "
                          "code: train_opts.source = passkey_train_source, src/exp/passkey.h)",
                          (double)c->s.passkey_mix);
    c->src = base;
    return 0;
}

// Rank 0: the run directory, locked (a fresh run's lock is taken only now), and its log.
static int claim_dir(train_ctx *c) {
    const train_opts *o = c->o;
    int rc = lssar_mkdirs(o->out);
    if (rc) return rc;
    if (!c->locked) {
        if ((rc = train_dir_lock(o->out))) return rc;
        c->locked = 1;
        if ((rc = train_recover(o->out, c->quiet))) return rc;
        char mp[4096], tp[4096];
        snprintf(mp, sizeof mp, "%s/%s", o->out, CKPT_MODEL_FILE);
        snprintf(tp, sizeof tp, "%s/%s", o->out, CKPT_TRAINER_FILE);
        if (!o->resume && (file_exists(mp) || file_exists(tp)))   // written while we got here
            return lssar_fail(LSSAR_E_ARG, "%s already holds a checkpoint: pass --resume to continue it, or "
                              "choose another --out", o->out);
    }
    c->logf = fopen(c->lp, o->resume ? "a" : "w");   // a log that cannot be opened is no reason to fail a run
    if (!c->logf && !c->quiet)
        fprintf(stderr, "lssar train: warning: cannot open %s (%s): training without a log\n", c->lp,
                strerror(errno));
    return 0;
}

// Everything after the lock: the model and its data, the directory, the data-parallel state.
static int open_run(train_ctx *c) {
    const train_opts *o = c->o;
    int rc = o->resume ? start_resume(c) : start_fresh(c);
    if (rc) return rc;
    c->cfg = gpt_get_config(c->m);
    c->B = c->s.batch; c->T = c->s.seq; c->C = c->cfg->channels; c->accum = c->s.accum / c->ranks;
    if ((rc = open_val(c)) || (rc = open_source(c))) return rc;
    if (c->lead && (rc = claim_dir(c))) return rc;
    if ((rc = gpt_dp_create(c->m, c->accum, o->zero, &c->dp))) return rc;
    if (train_test_hooks.dp_ready) train_test_hooks.dp_ready(c->dp);
    c->in = malloc(sizeof(uint16_t) * c->B * c->T * c->C);
    c->tg = malloc(sizeof(uint16_t) * c->B * c->T * c->C);
    if (!c->in || !c->tg) return lssar_fail(LSSAR_E_NOMEM, "out of memory for batches");
    return 0;
}

int train_open(train_ctx *c, const train_opts *o) {
    memset(c, 0, sizeof *c);
    c->o = o;
    c->rank = lssar_dist_rank(); c->ranks = lssar_dist_size(); c->lead = c->rank == 0;
    c->quiet = o->quiet || !c->lead;
    c->saved_step = -1;
    c->accum = 1;
    int rc = check_opts(o);
    if (!rc && o->zero != 0 && o->zero != 1) rc = lssar_fail(LSSAR_E_ARG, "--zero must be 0 or 1");
    if (!rc && o->recompute != 0 && o->recompute != 1)
        rc = lssar_fail(LSSAR_E_ARG, "recompute must be 0 or 1");
    if (rc) return rc;   // the same options on every rank: they all stop here
    if (o->threads > 0) lssar_set_threads(o->threads);
    char mp[4096];
    snprintf(mp, sizeof mp, "%s/%s", o->out, CKPT_MODEL_FILE);
    if (!o->resume && file_exists(mp))
        return lssar_fail(LSSAR_E_ARG, "%s already holds a checkpoint: pass --resume to continue it, or "
                          "choose another --out", o->out);
    snprintf(c->lp, sizeof c->lp, "%s/log.jsonl", o->out);
    // Rank 0 takes the lock and repairs an interrupted checkpoint before anyone reads it.
    if (o->resume && c->lead) {
        struct stat st;
        if (stat(o->out, &st) == 0 && S_ISDIR(st.st_mode)) {   // else start_resume says what is missing
            rc = train_dir_lock(o->out);
            if (!rc) { c->locked = 1; rc = train_recover(o->out, c->quiet); }
        }
    }
    if ((rc = lssar_dist_agree(rc))) return rc;
    return lssar_dist_agree(open_run(c));
}
