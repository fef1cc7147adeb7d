// train_api.c - the public lssar_train (include/lssar.h): lssar_train_options -> train_opts ->
// train_run (train.h), the trainer `lssar train` runs. Batches come straight from the shards (no
// data source: --passkey-mix belongs to the experiments layer and is not offered here).
#include <math.h>
#include <string.h>
#include "lssar.h"
#include "core/util.h"
#include "attn/attn.h"
#include "data/shard.h"
#include "nn/backend.h"
#include "train/train.h"

void lssar_train_defaults(lssar_train_options *o) {
    if (!o) return;
    train_opts t;
    train_opts_default(&t);   // one set of defaults: the trainer's, which `lssar train --help` shows
    memset(o, 0, sizeof *o);
    // vocab 0: the shards' recorded vocabulary, else 50257 if the data fits; channels 0: the
    // shards'; max_seq 0: seq; the CPU
    o->model = t.model;
    o->align = t.align;
    o->steps = 100;           // `lssar train`'s default
    o->batch = t.batch; o->seq = t.seq; o->accum = t.accum;
    o->lr = t.lr;
    o->schedule = LSSAR_LR_COSINE;
    o->lr_floor = t.min_lr_frac;
    o->warmup = LSSAR_WARMUP_TENTH;
    o->weight_decay = t.wd;
    o->grad_clip = t.clip;
    o->beta1 = t.beta1; o->beta2 = t.beta2; o->eps = t.eps;
    o->seed = t.seed;
    o->eval_batches = t.eval_batches;
}

// The model fields of a fresh run, checked as `lssar train` checks its flags.
static int check_model(const lssar_train_options *o) {
    const lssar_model_config *c = &o->model;
    const nn_backend *be;   // a device this build has no backend for is refused here, before any data is read
    int rc0 = nn_backend_get(c->device, &be);
    if (rc0) return rc0;
    if ((rc0 = attn_kind_check(c->attn, "lssar_train: model.attn"))) return rc0;
    if ((rc0 = attn_len_norm_check(c->len_norm, "lssar_train: model.len_norm"))) return rc0;
    if ((rc0 = gpt_pos_check(c->pos, "lssar_train: model.pos"))) return rc0;
    if (!(c->p > 0) || !isfinite(c->p))
        return lssar_fail(LSSAR_E_P, "lssar_train: model.p must be > 0 (the paper uses 15), got %g",
                          (double)c->p);
    if (c->layers < 1 || c->heads < 1 || c->dim < 1)
        return lssar_fail(LSSAR_E_SIZE,
                          "lssar_train: model.layers, heads and dim must be >= 1 (got %d, %d, %d)", c->layers,
                          c->heads, c->dim);
    if (c->dim % c->heads)
        return lssar_fail(LSSAR_E_ARG, "lssar_train: model.heads %d must divide model.dim %d", c->heads,
                          c->dim);
    if (c->vocab < 0 || c->vocab > 65535)
        return lssar_fail(LSSAR_E_ARG,
                          "lssar_train: model.vocab must be 1..65535 (or 0 for the default), got %d",
                          c->vocab);
    if (c->max_seq != 0 && c->max_seq != o->seq)
        return lssar_fail(LSSAR_E_ARG,
                          "lssar_train: model.max_seq %d differs from seq %d: the model is built for the "
                          "training length (leave max_seq 0)",
                          c->max_seq, o->seq);
    if (c->channels < 0)
        return lssar_fail(LSSAR_E_ARG, "lssar_train: model.channels must be >= 0 (0: the shards'), got %d",
                          c->channels);
    if (c->channels > 0 && o->data && *o->data) {
        // the first shard's header says how many channels the data has (dl_open checks the rest agree)
        char first[4096];
        size_t n = strcspn(o->data, ",");
        if (n >= sizeof first) return lssar_fail(LSSAR_E_ARG, "lssar_train: data: a path is too long");
        memcpy(first, o->data, n);
        first[n] = 0;
        shard s;
        int rc = shard_open(&s, first);
        if (rc) return rc;
        int ch = s.channels;
        shard_close(&s);
        if (ch != c->channels)
            return lssar_fail(LSSAR_E_FORMAT,
                              "lssar_train: %s has %d token channels but model.channels is %d (0 takes the "
                              "shards')",
                              first, ch, c->channels);
    }
    return 0;
}

int lssar_train(const lssar_train_options *o, lssar_train_result *r) {
    if (r) { memset(r, 0, sizeof *r); r->val_loss = NAN; }
    if (!o)
        return lssar_fail(LSSAR_E_NULL, "lssar_train: options are NULL (lssar_train_defaults fills them)");
    if (!o->out || !*o->out)
        return lssar_fail(LSSAR_E_ARG, "lssar_train: out is required: the run directory for checkpoints and "
                                       "the log");
    if (o->threads < 0)
        return lssar_fail(LSSAR_E_ARG, "lssar_train: threads must be >= 0 (0: as they are), got %d",
                          o->threads);
    if (o->recompute != 0 && o->recompute != 1)
        return lssar_fail(LSSAR_E_ARG, "lssar_train: recompute must be 0 or 1, got %d", o->recompute);
    if ((unsigned)o->schedule > LSSAR_LR_CONSTANT)
        return lssar_fail(LSSAR_E_KIND, "lssar_train: schedule %d is not an lssar_lr_schedule",
                          (int)o->schedule);
    if ((unsigned)o->warmup > LSSAR_WARMUP_STEPS)
        return lssar_fail(LSSAR_E_KIND, "lssar_train: warmup %d is not an lssar_warmup", (int)o->warmup);
    if (o->warmup == LSSAR_WARMUP_STEPS && o->warmup_steps < 0)
        return lssar_fail(LSSAR_E_ARG, "lssar_train: warmup_steps must be >= 0, got %d", o->warmup_steps);
    if (!o->resume) {
        if (!o->data || !*o->data)
            return lssar_fail(LSSAR_E_ARG, "lssar_train: data is required: one or more token shards "
                                           "(TRAIN.bin[,MORE.bin])");
        if (o->steps < 1) return lssar_fail(LSSAR_E_ARG, "lssar_train: steps must be >= 1, got %d", o->steps);
        int rc = check_model(o);
        if (rc) return rc;
    }
    train_opts t;
    train_opts_default(&t);
    t.data = o->data;
    t.val = o->val;
    t.out = o->out;
    t.resume = o->resume;
    t.model = o->model;
    t.align = o->align;
    t.passkey_mix = 0;
    t.source = NULL;
    t.lr = o->lr;
    t.min_lr_frac = o->schedule == LSSAR_LR_CONSTANT ? 1.0f : o->lr_floor;
    t.warmup = o->warmup == LSSAR_WARMUP_TENTH ? -1 : o->warmup_steps;
    t.wd = o->weight_decay;
    t.clip = o->grad_clip;
    t.beta1 = o->beta1; t.beta2 = o->beta2; t.eps = o->eps;
    t.steps = o->steps;
    t.batch = o->batch; t.seq = o->seq; t.accum = o->accum;
    t.seed = o->seed;
    t.stop_at = o->stop_at;
    t.eval_every = o->eval_every;
    t.eval_batches = o->eval_batches;
    t.save_every = o->save_every;
    t.threads = o->threads;
    t.override_optim = 0;
    t.quiet = !o->progress;
    t.recompute = o->recompute;
    train_result tr;
    int rc = train_run(&t, &tr);
    if (r) {
        r->step = tr.step;
        r->train_loss = tr.train_loss;
        r->val_loss = tr.val_loss;
        r->seconds = tr.seconds;
    }
    return rc;
}
