// train.c - the training loop: data, AdamW with warmup + cosine, clipping, accumulation,
// validation, checkpoints, exact resume; see train.h.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE   // flock, O_CLOEXEC
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cJSON.h>
#include "train.h"
#include "dataloader.h"
#include "eval.h"
#include "attn/attn.h"
#include "nn/nn.h"
#include "core/dist.h"
#include "model/gpt_dp.h"

#define GPT2_VOCAB 50257

void train_opts_default(train_opts *o) {
    memset(o, 0, sizeof *o);
    o->attn = LSSAR_ATTN_LSSAR; o->p = 15.0f; o->pos = GPT_POS_ROPE; o->rope_base = GPT_ROPE_BASE;
    o->layers = 4; o->heads = 4; o->dim = 128;
    o->lr = 6e-4f; o->min_lr_frac = 0.1f; o->wd = 0.1f; o->clip = 1.0f;
    o->beta1 = 0.9f; o->beta2 = 0.95f; o->eps = 1e-8f;
    o->warmup = -1; o->steps = 0; o->batch = 8; o->seq = 128; o->accum = 1;
    o->seed = 1337; o->eval_batches = 4; o->align = 1; o->log_every = 1;
}

double train_lr_at(const train_schedule *sc, int64_t step) {
    double lr = sc->lr, lr_min = sc->lr_min;
    if (sc->warmup > 0 && step <= sc->warmup) return lr * (double)step / sc->warmup;
    double span = sc->steps - sc->warmup;
    double u = span > 0 ? (double)(step - sc->warmup) / span : 1.0;
    if (u < 0) u = 0;
    if (u > 1) u = 1;   // past the schedule (never in a normal run): stay at the floor
    return lr_min + 0.5 * (lr - lr_min) * (1.0 + cos(M_PI * u));
}

train_schedule train_schedule_of(const train_state *s) {
    // min_lr_frac x lr in float, as the trainer has always computed it (bit-exact resumes)
    train_schedule sc = {s->lr, s->min_lr_frac * s->lr, s->warmup, s->steps};
    return sc;
}

float train_lr(const train_state *s, int64_t step) {
    train_schedule sc = train_schedule_of(s);
    return (float)train_lr_at(&sc, step);
}

int train_adamw_step(gpt *m, float lr, const train_tensor *extra, int n_extra, int64_t t, const train_adamw *h) {
    if (!h) return lssar_fail(LSSAR_E_NULL, "train_adamw_step: no hyper-parameters");
    if (t < 1 || t > 0x7fffffff) return lssar_fail(LSSAR_E_ARG, "train_adamw_step: step t = %lld; steps count from 1", (long long)t);
    if (!(h->beta1 >= 0 && h->beta1 < 1 && h->beta2 >= 0 && h->beta2 < 1 && h->eps > 0))
        return lssar_fail(LSSAR_E_ARG, "AdamW needs 0 <= beta1, beta2 < 1 and eps > 0 (got %g, %g, %g)",
                          (double)h->beta1, (double)h->beta2, (double)h->eps);
    int rc;
    if (m && (rc = gpt_adamw_step(m, (int)t, lr, h->beta1, h->beta2, h->eps, h->wd))) return rc;
    for (int i = 0; i < n_extra; i++) {
        const train_tensor *x = &extra[i];
        if (!x->param || !x->grad || !x->m || !x->v) return lssar_fail(LSSAR_E_NULL, "train_adamw_step: tensor %d has a NULL buffer", i);
        adamw_update(x->param, x->grad, x->m, x->v, x->n, (int)t, x->lr, h->beta1, h->beta2, h->eps, x->decay ? h->wd : 0.0f);
    }
    return 0;
}

static int shard_next_batch(void *ctx, lssar_rng *rng, int B, int T, uint16_t *inputs, uint16_t *targets) {
    dataloader *d = ctx;
    if (T != d->T) return lssar_fail(LSSAR_E_ARG, "shard source: batch length %d, but the shards were opened for %d", T, d->T);
    dl_next_batch(d, rng, B, inputs, targets);
    return 0;
}

train_source train_shard_source(dataloader *d) {
    train_source s = {d, shard_next_batch, NULL};
    return s;
}

static void fmt_eta(char *b, size_t n, double s) {
    long t = s < 0 || s > 1e8 ? -1 : (long)(s + 0.5);
    if (t < 0) snprintf(b, n, "?");
    else if (t >= 3600) snprintf(b, n, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
    else snprintf(b, n, "%ld:%02ld", t / 60, t % 60);
}

// One JSON object per line in DIR/log.jsonl (flushed, so a killed run keeps its log). A failed
// write (disk full) is an error: the run stops before its next checkpoint would fail the same way.
static int log_line(FILE *f, const char *path, cJSON *o) {
    int rc = 0;
    if (f) {
        char *s = cJSON_PrintUnformatted(o);
        if (!s) rc = lssar_fail(LSSAR_E_NOMEM, "out of memory writing %s", path);
        else {
            errno = 0;
            if (fprintf(f, "%s\n", s) < 0 || fflush(f) != 0) {
                int e = errno ? errno : EIO;
                rc = lssar_fail(LSSAR_E_IO, "writing %s failed: %s (%s)", path, strerror(e), lssar_io_hint(e));
            }
            free(s);
        }
    }
    cJSON_Delete(o);
    return rc;
}

/* ------------------------------------------------------- run directory lock */
// flock on DIR/.lock, held while a run writes DIR; the kernel drops it when the process dies, so a
// killed run never blocks its resume. Counted per process, so `lssar train` can take it before
// train_run (which takes it again).
typedef struct { char dir[4096]; int fd, refs; } dir_lock;
static dir_lock g_locks[8];

int train_dir_lock(const char *dir) {
    for (int i = 0; i < 8; i++)
        if (g_locks[i].refs > 0 && !strcmp(g_locks[i].dir, dir)) { g_locks[i].refs++; return 0; }
    int slot = -1;
    for (int i = 0; i < 8 && slot < 0; i++) if (g_locks[i].refs == 0) slot = i;
    if (slot < 0 || strlen(dir) >= sizeof g_locks[0].dir) return lssar_fail(LSSAR_E_ARG, "cannot lock %s: too many run directories open at once, or the path is too long", dir);
    char lp[4200];
    snprintf(lp, sizeof lp, "%s/.lock", dir);
    int fd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) {
        int e = errno;
        return lssar_fail(LSSAR_E_IO, "cannot create the lock file %s: %s (%s)", lp, strerror(e), e == ENOSPC || e == EFBIG ? lssar_io_hint(e) : "is the directory writable?");
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        if (e == EWOULDBLOCK) {
            char b[32] = "";
            ssize_t n = pread(fd, b, sizeof b - 1, 0);
            long pid = n > 0 ? atol(b) : 0;
            close(fd);
            char who[64] = "another process", stop[64] = "";
            if (pid > 0) { snprintf(who, sizeof who, "process %ld", pid); snprintf(stop, sizeof stop, " or stop it (kill %ld)", pid); }
            return lssar_fail(LSSAR_E_IO, "%s is in use: %s (another `lssar train`?) holds its lock %s and is writing checkpoints there. Two runs must not write one --out: wait for it to finish%s, then --resume; or choose another --out",
                              dir, who, lp, stop);
        }
        close(fd);
        return lssar_fail(LSSAR_E_IO, "cannot lock %s: %s", lp, strerror(e));
    }
    char b[32];
    int n = snprintf(b, sizeof b, "%ld\n", (long)getpid());
    // the pid is only for the message above: a failed write (disk full) does not matter
    if (ftruncate(fd, 0) == 0 && pwrite(fd, b, (size_t)n, 0) != n) {}
    snprintf(g_locks[slot].dir, sizeof g_locks[slot].dir, "%s", dir);
    g_locks[slot].fd = fd;
    g_locks[slot].refs = 1;
    return 0;
}

void train_dir_unlock(const char *dir) {
    for (int i = 0; i < 8; i++)
        if (g_locks[i].refs > 0 && !strcmp(g_locks[i].dir, dir)) {
            if (--g_locks[i].refs == 0) close(g_locks[i].fd);   // closing drops the flock
            return;
        }
}

/* ------------------------------------------------ checkpoints, crash-safe */
// A checkpoint is two files that must be at the same step. Each is written atomically (temporary
// file, fsync, rename), but a kill between the two renames would leave them at different steps.
// So both are first written into DIR/.ckpt-next/, then DIR/.ckpt-next/COMPLETE marks the pair
// whole, then they are renamed into DIR and COMPLETE removed. train_recover (under the lock, before
// a run reads DIR) finishes a move that a kill interrupted, and discards an unmarked pair.
#define NEXT_DIR ".ckpt-next"
#define NEXT_MARK "COMPLETE"
static const char *const CKPT_FILES[2] = {CKPT_MODEL_FILE, CKPT_TRAINER_FILE};

static int file_exists(const char *path) { struct stat st; return stat(path, &st) == 0; }

static int move_into_place(const char *out, const char *nd) {
    char a[4400], b[4400];
    for (int k = 0; k < 2; k++) {
        snprintf(a, sizeof a, "%s/%s", nd, CKPT_FILES[k]);
        snprintf(b, sizeof b, "%s/%s", out, CKPT_FILES[k]);
        if (!file_exists(a)) continue;   // recovery: moved before the kill
        if (k) lssar_test_delay_save();  // tests: a kill lands between the two renames
        if (rename(a, b) != 0) return lssar_fail(LSSAR_E_IO, "renaming %s to %s failed: %s", a, b, strerror(errno));
    }
    return lssar_fsync_dir_of(b);
}

// Remove what killed writers left: temporary files of the checkpoint and log in DIR (out; NULL:
// skip), and every file of an unmarked DIR/.ckpt-next (an interrupted write of a pair).
static void remove_leftovers(const char *out, const char *nd) {
    const char *dirs[2] = {out, nd};
    for (int d = 0; d < 2; d++) {
        DIR *dp = dirs[d] ? opendir(dirs[d]) : NULL;
        if (!dp) continue;
        struct dirent *e;
        char p[4400];
        while ((e = readdir(dp))) {
            const char *n = e->d_name;
            int ours = !strncmp(n, CKPT_MODEL_FILE ".tmp.", strlen(CKPT_MODEL_FILE) + 5) ||
                       !strncmp(n, CKPT_TRAINER_FILE ".tmp.", strlen(CKPT_TRAINER_FILE) + 5) ||
                       !strncmp(n, "log.jsonl.tmp.", 14);
            if (d == 1) ours = strcmp(n, ".") && strcmp(n, "..");
            if (!ours) continue;
            snprintf(p, sizeof p, "%s/%s", dirs[d], n);
            unlink(p);
        }
        closedir(dp);
    }
    rmdir(nd);
}

int train_recover(const char *out, int quiet) {
    char nd[4200], mark[4300];
    snprintf(nd, sizeof nd, "%s/" NEXT_DIR, out);
    snprintf(mark, sizeof mark, "%s/" NEXT_MARK, nd);
    if (file_exists(mark)) {
        int rc = move_into_place(out, nd);
        if (rc) return rc;
        if (unlink(mark) != 0) return lssar_fail(LSSAR_E_IO, "cannot remove %s: %s", mark, strerror(errno));
        if (!quiet) fprintf(stderr, "lssar train: %s: completed the checkpoint that a stopped run was moving into place\n", out);
    }
    remove_leftovers(out, nd);
    return 0;
}

static int save_checkpoint(const char *out, const gpt *m, const train_state *s) {
    char nd[4200], mark[4300];
    snprintf(nd, sizeof nd, "%s/" NEXT_DIR, out);
    snprintf(mark, sizeof mark, "%s/" NEXT_MARK, nd);
    if (unlink(mark) == 0) lssar_fsync_dir_of(mark);   // never left by a finished save; be safe
    int rc = ckpt_save(nd, m, s);                    // mkdir + both files, each fsynced
    if (!rc) {   // an empty mark; the directory's fsync makes it and the pair's renames durable
        int fd = open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
        if (fd < 0 || close(fd) != 0) {
            int e = errno;
            rc = lssar_fail(LSSAR_E_IO, "cannot create %s: %s (%s)", mark, strerror(e), lssar_io_hint(e));
        } else rc = lssar_fsync_dir_of(mark);   // from here on the pair is the checkpoint
    }
    if (rc) {   // an unmarked pair is no checkpoint: free its space (a full disk) and keep DIR's
        remove_leftovers(NULL, nd);
        return rc;
    }
    if ((rc = move_into_place(out, nd))) return rc;
    if (unlink(mark) != 0) return lssar_fail(LSSAR_E_IO, "cannot remove %s: %s", mark, strerror(errno));
    rmdir(nd);
    return 0;
}

// A failed write: say what is still good and how to go on.
static int write_failed(int rc, const char *out, int64_t saved_step) {
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", lssar_errmsg());
    if (saved_step >= 0)
        return lssar_fail(rc, "%s. The previous checkpoint in %s (step %lld) is intact: fix that, then continue with `lssar train --resume --out %s`",
                          msg, out, (long long)saved_step, out);
    return lssar_fail(rc, "%s. No checkpoint had been saved yet: fix that, then start the run again", msg);
}

// On resume: drop the log lines of steps after the checkpoint (written before a kill, and to be
// written again) and a last line cut short, so the log reads as one uninterrupted run.
static int trim_log(const char *path, int64_t step) {
    char *d;
    size_t n;
    if (!file_exists(path) || lssar_read_file(path, &d, &n)) return 0;   // no log: nothing to trim
    size_t keep = 0, at = 0;
    int drop = 0;
    while (at < n) {
        char *nl = memchr(d + at, '\n', n - at);
        if (!nl) { drop = 1; break; }   // cut short by a kill
        *nl = 0;
        cJSON *j = cJSON_Parse(d + at);
        const cJSON *st = j ? cJSON_GetObjectItemCaseSensitive(j, "step") : NULL;
        int ok = cJSON_IsNumber(st) && st->valuedouble <= (double)step;
        cJSON_Delete(j);
        *nl = '\n';
        size_t len = (size_t)(nl - (d + at)) + 1;
        if (ok) { if (keep != at) memmove(d + keep, d + at, len); keep += len; }
        else drop = 1;
        at += len;
    }
    int rc = 0;
    if (drop) {
        lssar_afile a;
        rc = lssar_afile_open(&a, path);
        if (!rc) {
            if (keep && fwrite(d, 1, keep, a.f) != keep) {
                int e = errno;
                lssar_afile_abort(&a);
                rc = lssar_fail(LSSAR_E_IO, "writing %s failed: %s (%s)", path, strerror(e), lssar_io_hint(e));
            } else rc = lssar_afile_commit(&a);
        }
    }
    free(d);
    return rc;
}

// Test hooks (tests/test_crash.sh): LSSAR_TEST_NAN_AT_STEP=k makes the loss of step k NaN,
// LSSAR_TEST_NAN_GRAD_AT_STEP=k one gradient element of step k; never set in normal use.
static long env_long(const char *name) {
    const char *e = getenv(name);
    return e && *e ? atol(e) : 0;
}

static int poison_grad(gpt *m) {
    float *g = malloc(gpt_tensor_numel(m, 0) * sizeof(float));
    if (!g) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    int rc = gpt_read_tensor(m, GPT_BUF_GRAD, 0, g);
    g[0] = NAN;
    if (!rc) rc = gpt_write_tensor(m, GPT_BUF_GRAD, 0, g);
    free(g);
    return rc;
}

// One micro-batch of `ranks` x B windows: every rank draws the windows of all of them, in one
// process's order, from rng, and keeps its own (rank's) in inputs, targets.
static int draw_batch(const train_source *src, lssar_rng *rng, int rank, int ranks, int B, int T, uint16_t *inputs,
                      uint16_t *targets) {
    int rc = 0;
    for (int k = 0; k < ranks && !rc; k++)
        rc = src->next_batch(src->ctx, rng, B, T, k == rank ? inputs : NULL, k == rank ? targets : NULL);
    return rc;
}

// The NaN guard's error for step `step`.
static int not_finite(const train_opts *o, int64_t step, int loss_bad, int64_t saved_step) {
    char where[4200];
    if (saved_step >= 0) snprintf(where, sizeof where, "the last checkpoint in %s (step %lld) is intact", o->out, (long long)saved_step);
    else snprintf(where, sizeof where, "no checkpoint was written");
    return lssar_fail(LSSAR_E_NAN, "step %lld: the %s is %s; stopped without saving: %s. Lower --lr, raise --warmup, or check the data",
                      (long long)step, loss_bad ? "loss" : "gradient norm", "not finite (NaN or Inf)", where);
}

static int check_opts(const train_opts *o) {
    if (!o->out || !*o->out) return lssar_fail(LSSAR_E_ARG, "--out is required: the run directory for checkpoints and the log");
    if (o->steps < 0) return lssar_fail(LSSAR_E_ARG, "--steps must be >= 1");
    if (o->stop_at < 0) return lssar_fail(LSSAR_E_ARG, "--stop-at must be >= 0 (0: run to --steps)");
    if (o->eval_every < 0 || o->save_every < 0) return lssar_fail(LSSAR_E_ARG, "--eval-every and --save-every must be >= 0 (0: only at the end)");
    if (o->eval_batches < 1) return lssar_fail(LSSAR_E_ARG, "--eval-batches must be >= 1");
    if (o->log_every < 0) return lssar_fail(LSSAR_E_ARG, "--log-every must be >= 1 (1: read the loss back after every step)");
    if (o->resume) return 0;   // the rest comes from the checkpoint
    if (!o->data || !*o->data) return lssar_fail(LSSAR_E_ARG, "--data is required: one or more token shards (TRAIN.bin[,MORE.bin])");
    if (o->steps < 1) return lssar_fail(LSSAR_E_ARG, "--steps must be >= 1");
    if (o->batch < 1 || o->seq < 1 || o->accum < 1) return lssar_fail(LSSAR_E_ARG, "--batch, --seq and --accum must be >= 1");
    if (!(o->lr > 0)) return lssar_fail(LSSAR_E_ARG, "--lr must be > 0");
    if (!(o->passkey_mix >= 0 && o->passkey_mix <= 1)) return lssar_fail(LSSAR_E_ARG, "--passkey-mix must be in [0, 1]");
    if (!(o->clip >= 0)) return lssar_fail(LSSAR_E_ARG, "--clip must be >= 0 (0: no clipping)");
    if (!(o->wd >= 0)) return lssar_fail(LSSAR_E_ARG, "--wd must be >= 0");
    if (!(o->min_lr_frac >= 0 && o->min_lr_frac <= 1)) return lssar_fail(LSSAR_E_ARG, "the cosine floor must be in [0, 1] of --lr");
    if (!(o->beta1 >= 0 && o->beta1 < 1 && o->beta2 >= 0 && o->beta2 < 1 && o->eps > 0))
        return lssar_fail(LSSAR_E_ARG, "AdamW needs 0 <= beta1, beta2 < 1 and eps > 0");
    return 0;
}

// Fresh run: choose the vocabulary, build the config and the model, seed the data stream.
static int start_fresh(const train_opts *o, const dataloader *dl, gpt **m, train_state *s) {
    int vocab = o->vocab > 0 ? o->vocab : dl_vocab(dl), mx = dl_max_token(dl);  // else what the shards record
    if (vocab <= 0) {
        if (mx >= GPT2_VOCAB)
            return lssar_fail(LSSAR_E_ARG, "the training shards hold token ids up to %d: pass --vocab (at least %d)", mx, mx + 1);
        vocab = GPT2_VOCAB;
        if (!o->quiet && mx < 257)
            fprintf(stderr, "lssar train: --vocab not given, using %d (GPT-2); the data's ids all fit in 257 (byte tokenizer?): --vocab 257 trains much faster\n", vocab);
    }
    int rc = dl_check_vocab(dl, vocab, "--data");
    if (rc) return rc;
    gpt_config cfg = {
        .layers = o->layers, .heads = o->heads, .dim = o->dim, .vocab = vocab,
        .channels = dl->channels, .max_seq = o->seq, .pos = o->pos, .attn = o->attn, .p = o->p,
        .tied = !o->untied, .device = o->device, .len_norm = o->len_norm,
        .rope_base = o->rope_base, .temp_d = o->temp_d};
    if ((rc = gpt_config_check(&cfg))) return rc;
    if ((rc = gpt_create(&cfg, o->seed, m))) return rc;
    if (o->ordinal > 0 && (rc = gpt_init_ordinal(*m, o->ordinal))) {
        char why[512];
        snprintf(why, sizeof why, "%s", lssar_errmsg());
        gpt_free(*m); *m = NULL;
        return lssar_fail(rc, "--ordinal %d: %s", o->ordinal, why);
    }
    memset(s, 0, sizeof *s);
    s->lr = o->lr; s->min_lr_frac = o->min_lr_frac;
    s->warmup = o->warmup >= 0 ? o->warmup : o->steps / 10;
    s->steps = o->steps; s->batch = o->batch; s->seq = o->seq; s->accum = o->accum;
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
    return 0;
}

// Resume: model + AdamW state + data cursor from DIR; the stored schedule unless --steps moves it.
static int start_resume(const train_opts *o, gpt **m, train_state *s) {
    char mp[4096], tp[4096];
    snprintf(mp, sizeof mp, "%s/%s", o->out, CKPT_MODEL_FILE);
    snprintf(tp, sizeof tp, "%s/%s", o->out, CKPT_TRAINER_FILE);
    if (!file_exists(mp) || !file_exists(tp))
        return lssar_fail(LSSAR_E_IO, "--resume: %s has no %s and %s to continue from: train without --resume first", o->out, CKPT_MODEL_FILE, CKPT_TRAINER_FILE);
    int64_t mstep;
    int rc = ckpt_read_train_state(tp, s);
    if (!rc) rc = ckpt_load_model(mp, &(ckpt_load_opts){.device = o->device}, m, &mstep);
    if (!rc && mstep != s->step)
        rc = lssar_fail(LSSAR_E_FORMAT, "%s is at step %lld but %s at step %lld (a run stopped between writing the two?): cannot resume exactly; start a new --out",
                        mp, (long long)mstep, tp, (long long)s->step);
    if (!rc && gpt_get_config(*m)->max_seq != s->seq)
        rc = lssar_fail(LSSAR_E_FORMAT, "%s: the model's max_seq %d differs from the trainer's seq %d: mismatched files", o->out, gpt_get_config(*m)->max_seq, s->seq);
    if (!rc) rc = gpt_set_recompute(*m, o->recompute);
    if (!rc) rc = gpt_reserve(*m, s->batch, s->seq, 1);
    if (!rc) rc = ckpt_load_trainer(*m, tp, s);
    if (rc) { if (*m) gpt_free(*m); *m = NULL; return rc; }
    if (o->steps > 0 && o->steps != s->steps) {
        if (!o->quiet)
            fprintf(stderr, "lssar train: --steps %d replaces the checkpoint's schedule length %d: the cosine decay is re-spread from step %lld on (an uninterrupted run with --steps %d would differ)\n",
                    o->steps, s->steps, (long long)s->step, o->steps);
        s->steps = o->steps;
    }
    if (o->override_optim) {
        if (!o->quiet)
            fprintf(stderr, "lssar train: optimizer settings changed from step %lld on (lr %g, warmup %d, floor %g, wd %g, clip %g)\n",
                    (long long)s->step, o->lr, o->warmup, o->min_lr_frac, o->wd, o->clip);
        s->lr = o->lr; s->min_lr_frac = o->min_lr_frac; s->warmup = o->warmup < 0 ? s->warmup : o->warmup;
        s->wd = o->wd; s->clip = o->clip; s->beta1 = o->beta1; s->beta2 = o->beta2; s->eps = o->eps;
    }
    if (o->data && *o->data && strcmp(o->data, s->data)) snprintf(s->data, sizeof s->data, "%s", o->data);
    if (o->val && strcmp(o->val, s->val)) snprintf(s->val, sizeof s->val, "%s", o->val);
    return 0;
}

// Test hook (tests/test_dist.sh): LSSAR_TEST_KILL_RANK=r with LSSAR_TEST_KILL_AT_STEP=k kills rank
// r with SIGKILL at the start of step k, as a crashed machine would.
static void maybe_kill(int64_t step) {
    long at = env_long("LSSAR_TEST_KILL_AT_STEP");
    const char *who = getenv("LSSAR_TEST_KILL_RANK");
    if (at > 0 && step == at && who && atoi(who) == lssar_dist_rank()) raise(SIGKILL);
}

int train_run(const train_opts *o, train_result *r) {
    train_result dummy;
    if (!r) r = &dummy;
    memset(r, 0, sizeof *r);
    r->val_loss = r->train_loss = NAN;   // NaN: no step ran (a resumed run already at its end)
    const int rank = lssar_dist_rank(), ranks = lssar_dist_size(), lead = rank == 0;
    const int quiet = o->quiet || !lead;
    int rc = check_opts(o);
    if (!rc && o->zero != 0 && o->zero != 1) rc = lssar_fail(LSSAR_E_ARG, "--zero must be 0 or 1");
    if (!rc && o->recompute != 0 && o->recompute != 1) rc = lssar_fail(LSSAR_E_ARG, "recompute must be 0 or 1");
    if (rc) return rc;   // the same options on every rank: they all stop here
    if (o->threads > 0) lssar_set_threads(o->threads);
    char mp[4096];
    snprintf(mp, sizeof mp, "%s/%s", o->out, CKPT_MODEL_FILE);
    if (!o->resume && file_exists(mp))
        return lssar_fail(LSSAR_E_ARG, "%s already holds a checkpoint: pass --resume to continue it, or choose another --out", o->out);

    gpt *m = NULL;
    gpt_dp *dp = NULL;
    double *iv_loss = NULL;   // (log interval) each step's summed micro-batch losses
    float *iv_norm = NULL;    // (log interval) each step's gradient norm
    const int log_every = o->log_every > 0 ? o->log_every : 1;
    const gpt_config *cfg = NULL;
    int B = 0, T = 0, C = 0, accum = 1;   // the run's batch, length, channels, micro-batches per rank
    train_state s;
    dataloader dl;
    memset(&dl, 0, sizeof dl);
    shard val;
    memset(&val, 0, sizeof val);
    int have_val = 0;
    uint16_t *in = NULL, *tg = NULL;
    FILE *logf = NULL;
    train_source src = {0};           // where batches come from: the shards, or o->source's wrap of them
    int64_t saved_step = -1;
    int locked = 0;
    char lp[4096];
    snprintf(lp, sizeof lp, "%s/log.jsonl", o->out);
    const long nan_loss_at = env_long("LSSAR_TEST_NAN_AT_STEP"), nan_grad_at = env_long("LSSAR_TEST_NAN_GRAD_AT_STEP");

    // Rank 0 takes the lock and repairs an interrupted checkpoint before anyone reads it.
    if (o->resume && lead) {
        struct stat st;
        if (stat(o->out, &st) == 0 && S_ISDIR(st.st_mode)) {   // else start_resume says what is missing
            rc = train_dir_lock(o->out);
            if (!rc) { locked = 1; rc = train_recover(o->out, quiet); }
        }
    }
    if ((rc = lssar_dist_agree(rc))) goto done;
    if (o->resume) {
        if ((rc = start_resume(o, &m, &s))) goto setup_done;
        if (lead && (rc = trim_log(lp, s.step))) goto setup_done;
        saved_step = s.step;
        if ((rc = dl_open(&dl, s.data, s.seq, s.align, "--data"))) {
            // the shards named in the checkpoint: say where the names came from and the way out
            char why[1024];
            snprintf(why, sizeof why, "%s", lssar_errmsg());
            rc = lssar_fail(rc, "--resume: the training shards stored in %s/%s: %s (pass --data to name them "
                            "again)", o->out, CKPT_TRAINER_FILE, why);
            goto setup_done;
        }
        const gpt_config *c = gpt_get_config(m);
        if (dl.channels != c->channels) {
            rc = lssar_fail(LSSAR_E_FORMAT, "--data: the shards have %d token channels but the model in %s has %d", dl.channels, o->out, c->channels);
            goto setup_done;
        }
        if ((rc = dl_check_vocab(&dl, c->vocab, "--data"))) goto setup_done;
        if (s.accum % ranks) {
            rc = lssar_fail(LSSAR_E_ARG, "--resume: a step of this run is %d micro-batches of %d windows, which %d ranks cannot share evenly: resume it on a number of ranks that divides %d",
                            s.accum, s.batch, ranks, s.accum);
            goto setup_done;
        }
    } else {
        if ((rc = dl_open(&dl, o->data, o->seq, o->align, "--data"))) goto setup_done;
        if ((rc = start_fresh(o, &dl, &m, &s))) goto setup_done;
        s.accum = o->accum * ranks;   // the checkpoint stores the step's micro-batches over all ranks
        if ((rc = gpt_set_recompute(m, o->recompute)) || (rc = gpt_reserve(m, s.batch, s.seq, 1))) goto setup_done;
    }
    cfg = gpt_get_config(m);
    B = s.batch; T = s.seq; C = cfg->channels; accum = s.accum / ranks;
    if (s.val[0]) {
        if ((rc = shard_open(&val, s.val))) goto setup_done;
        have_val = 1;
        if (val.channels != C) { rc = lssar_fail(LSSAR_E_FORMAT, "--val: %s has %d token channels but the model has %d", s.val, val.channels, C); goto setup_done; }
        if (eval_num_windows(&val, T) < 1) { rc = lssar_fail(LSSAR_E_SIZE, "--val: %s has %zu positions, fewer than --seq + 1 = %d", s.val, val.n, T + 1); goto setup_done; }
    }
    {
        train_source base = train_shard_source(&dl);
        if (o->source) {
            train_source_env env = {cfg, B, T, s.passkey_mix, s.passkey_prompt, quiet};
            if ((rc = o->source(o->source_arg, &env, &base, &src))) { memset(&src, 0, sizeof src); goto setup_done; }
        } else if (s.passkey_mix > 0) {
            rc = lssar_fail(LSSAR_E_ARG, "this run mixes passkey windows into its batches (passkey_mix %g), which needs the passkey data source: continue it with `lssar train --resume` (in code: train_opts.source = passkey_train_source, src/exp/passkey.h)",
                            (double)s.passkey_mix);
            goto setup_done;
        } else {
            src = base;
        }
    }
    if (lead) {
        if ((rc = lssar_mkdirs(o->out))) goto setup_done;
        if (!locked) {
            if ((rc = train_dir_lock(o->out))) goto setup_done;
            locked = 1;
            if ((rc = train_recover(o->out, quiet))) goto setup_done;
            char tp[4096];
            snprintf(tp, sizeof tp, "%s/%s", o->out, CKPT_TRAINER_FILE);
            if (!o->resume && (file_exists(mp) || file_exists(tp))) {   // written while we got here
                rc = lssar_fail(LSSAR_E_ARG, "%s already holds a checkpoint: pass --resume to continue it, or choose another --out", o->out);
                goto setup_done;
            }
        }
        logf = fopen(lp, o->resume ? "a" : "w");   // a log that cannot be opened is not worth failing a run for
        if (!logf && !quiet) fprintf(stderr, "lssar train: warning: cannot open %s (%s): training without a log\n", lp, strerror(errno));
    }
    if ((rc = gpt_dp_create(m, accum, o->zero, &dp))) goto setup_done;
    if (env_long("LSSAR_TEST_OVERLAP") == 1) gpt_dp_overlap(dp, 1);   // test hook (tests/test_dist.sh)
    in = malloc(sizeof(uint16_t) * B * T * C);
    tg = malloc(sizeof(uint16_t) * B * T * C);
    if (!in || !tg) rc = lssar_fail(LSSAR_E_NOMEM, "out of memory for batches");
setup_done:
    if ((rc = lssar_dist_agree(rc))) goto done;

    int64_t end = s.steps;
    if (o->stop_at > 0 && o->stop_at < end) end = o->stop_at;
    const int64_t first = s.step + 1;
    if (!quiet && first <= end) {   // else only the nothing-to-do line below
        char pdesc[64] = "", rdesc[64] = "";
        lssar_attn_stages ast = attn_stages(cfg->attn);
        if (ast.reweight) snprintf(pdesc, sizeof pdesc, " (p %g)", cfg->p);
        if (ast.norm == LSSAR_NORM_LEN)
            snprintf(pdesc, sizeof pdesc, " (len-norm %s)", lssar_len_norm_name(cfg->len_norm));
        if (cfg->temp_d > 0 && ast.score == LSSAR_SCORE_COS)
            snprintf(pdesc + strlen(pdesc), sizeof pdesc - strlen(pdesc), " (ln(%d) ln(n))", cfg->temp_d);
        if (ranks > 1) snprintf(rdesc, sizeof rdesc, " x %d ranks%s", ranks, o->zero ? " (ZeRO-1)" : "");
        char mdesc[128];
        snprintf(mdesc, sizeof mdesc, "AdamW state %.2f MiB per rank, activations %.2f MiB%s",
                 gpt_dp_moment_floats(dp) * 4.0 / (1 << 20), gpt_activation_bytes(m, B, T, 1) / (double)(1 << 20),
                 o->recompute ? " (recompute)" : "");
        fprintf(stderr, "lssar train: %s attention%s, %d layers, %d heads, width %d, vocab %d x %d channel%s, %s positions, %zu parameters\n",
                lssar_attn_name(cfg->attn), pdesc, cfg->layers, cfg->heads, cfg->dim, cfg->vocab, C, C > 1 ? "s" : "",
                gpt_pos_name(cfg->pos), gpt_num_params(m));
        if (cfg->pos == GPT_POS_ROPE && cfg->rope_base != GPT_ROPE_BASE)
            fprintf(stderr, "lssar train: RoPE base %g\n", (double)cfg->rope_base);
        fprintf(stderr, "lssar train: steps %lld..%lld of %d, batch %d x %d tokens x accum %d%s, lr %g (warmup %d, cosine to %g), %s, out %s\n",
                (long long)first, (long long)end, s.steps, B, T, accum, rdesc, s.lr, s.warmup, s.lr * s.min_lr_frac, mdesc, o->out);
    }
    double t0 = lssar_now(), last_print = 0;
    const double tokens_per_step = (double)B * T * s.accum;
    // The steps of a logging interval (--log-every) run without waiting for the device: each
    // one's loss and gradient norm stay on the backend (gpt_dp_records) and are read back, and
    // exchanged between the ranks, once at the interval's end; then the log gets one line per
    // step and the NaN guard looks at each step in order (naming the first bad one). A
    // checkpoint or a validation comes only after that, so an interval ends before each of them.
    const int cap = first > end ? 0 : (int)(end - first + 1 < log_every ? end - first + 1 : log_every);
    if ((rc = lssar_dist_agree(gpt_dp_records(dp, cap)))) goto done;
    iv_loss = malloc(sizeof(double) * (cap ? cap : 1));
    iv_norm = malloc(sizeof(float) * (cap ? cap : 1));
    if (!iv_loss || !iv_norm) { rc = lssar_fail(LSSAR_E_NOMEM, "out of memory"); goto done; }
    int64_t iv_first = first;   // the interval's first step
    int pending = 0;            // its steps so far
    double iv_t0 = 0, iv_comm0 = 0;
    // The batches: each micro-batch is drawn and staged (gpt_prefetch) while the one before it
    // computes. s.rng is the data stream after the batches consumed (what a checkpoint stores),
    // ahead after the one staged.
    lssar_rng ahead = s.rng;
    if (first <= end) {
        int lrc = draw_batch(&src, &ahead, rank, ranks, B, T, in, tg);
        if (!lrc) lrc = gpt_prefetch(m, in, tg, B, T);
        if ((rc = lssar_dist_agree(lrc))) goto done;
    }
    for (int64_t step = first; step <= end; step++) {
        if (!pending) { iv_first = step; iv_t0 = lssar_now(); iv_comm0 = gpt_dp_comm_seconds(dp); }
        maybe_kill(step);
        float lr = train_lr(&s, step);
        for (int a = 0; a < accum; a++) {
            int lrc = gpt_zero_grad(m);
            // the staged batch; its loss stays in the device accumulator (gpt_dp_add_grads keeps it)
            if (!lrc) lrc = gpt_forward(m, NULL, NULL, B, T, NULL);
            s.rng = ahead;
            if (!lrc && (a + 1 < accum || step < end)) {   // the next one, while this one computes
                lrc = draw_batch(&src, &ahead, rank, ranks, B, T, in, tg);
                if (!lrc) lrc = gpt_prefetch(m, in, tg, B, T);
            }
            // a host error on any rank (a bad token, a short read) stops every rank
            if ((rc = lssar_dist_agree(lrc))) goto done;
            if ((rc = lssar_dist_agree(gpt_backward(m, 1.0f / s.accum)))) goto done;
            if (a == 0 && step == nan_grad_at && (rc = lssar_dist_agree(poison_grad(m)))) goto done;
            if ((rc = gpt_dp_add_grads(dp, a))) goto done;
        }
        // clip and AdamW on the device; a non-finite norm makes the parameters NaN, which the
        // interval's end catches before anything is saved
        if ((rc = gpt_dp_step(dp, s.clip, (int)step, lr, s.beta1, s.beta2, s.eps, s.wd, NULL))) goto done;
        pending++;
        int last = step == end;
        int eval_now = have_val && (last || (o->eval_every > 0 && step % o->eval_every == 0));
        int save_now = last || (o->save_every > 0 && step % o->save_every == 0);
        if (pending < cap && !eval_now && !save_now) continue;
        // ---- the interval's end: its one wait for the device
        int got = 0;   // == pending
        if ((rc = gpt_dp_flush(dp, &got, iv_loss, iv_norm))) goto done;
        (void)got;
        double now = lssar_now(), dt = (now - iv_t0) / pending;   // the interval's seconds per step
        double comm = (gpt_dp_comm_seconds(dp) - iv_comm0) / pending;
        for (int i = 0; i < pending && !rc; i++) {
            int64_t st = iv_first + i;
            double loss_sum = st == nan_loss_at ? NAN : iv_loss[i];
            float gnorm = iv_norm[i];
            // the same values on every rank (read back, exchanged): they all stop here together
            if (!isfinite(loss_sum) || !isfinite(gnorm)) { rc = not_finite(o, st, !isfinite(loss_sum), saved_step); goto done; }
            r->step = st;
            r->train_loss = (float)(loss_sum / s.accum);
            if (lead) {
                cJSON *j = cJSON_CreateObject();
                cJSON_AddNumberToObject(j, "step", (double)st);
                cJSON_AddNumberToObject(j, "loss", r->train_loss);
                cJSON_AddNumberToObject(j, "lr", train_lr(&s, st));
                cJSON_AddNumberToObject(j, "grad_norm", gnorm);
                cJSON_AddNumberToObject(j, "ms", dt * 1e3);
                cJSON_AddNumberToObject(j, "tokens_per_s", tokens_per_step / dt);
                if (ranks > 1) cJSON_AddNumberToObject(j, "comm_ms", comm * 1e3);
                rc = log_line(logf, lp, j);
                if (rc) rc = write_failed(rc, o->out, saved_step);
            }
        }
        if ((rc = lssar_dist_agree(rc))) goto done;
        s.step = step;
        if (!quiet && (now - last_print >= 1.0 || last || iv_first == first)) {
            last_print = now;
            double rate = (now - t0) / (double)(step - first + 1);   // seconds per step so far
            char eta[32];
            fmt_eta(eta, sizeof eta, rate * (double)(end - step));
            fprintf(stderr, "step %lld/%d | loss %.4f | lr %.3e | gnorm %.3f | %.0f tok/s | %.1f ms/step | ETA %s\n",
                    (long long)step, s.steps, r->train_loss, lr, iv_norm[pending - 1], tokens_per_step / rate, rate * 1e3, eta);
        }
        pending = 0;
        if (eval_now) {
            // every rank evaluates its share of the batches (the same numbers as one process);
            // rank 0 alone logs them
            eval_result er;
            if ((rc = eval_shard_ranks(m, &val, T, B, o->eval_batches * B, &er, NULL))) goto done;
            r->val_loss = er.loss;
            if (lead) {
                cJSON *e = cJSON_CreateObject();
                cJSON_AddNumberToObject(e, "step", (double)step);
                cJSON_AddNumberToObject(e, "val_loss", er.loss);
                cJSON_AddNumberToObject(e, "val_tokens", (double)er.tokens);
                if ((rc = log_line(logf, lp, e))) rc = write_failed(rc, o->out, saved_step);
                else if (!quiet) fprintf(stderr, "step %lld/%d | val loss %.4f (%zu tokens)\n", (long long)step, s.steps, er.loss, er.tokens);
            }
            if ((rc = lssar_dist_agree(rc))) goto done;
        }
        if (save_now) {
            rc = gpt_dp_gather_moments(dp);
            if (!rc && lead && (rc = save_checkpoint(o->out, m, &s))) rc = write_failed(rc, o->out, saved_step);
            gpt_dp_drop_moments(dp);
            if ((rc = lssar_dist_agree(rc))) goto done;
            saved_step = step;
        }
    }
    if (first > end) {
        if (!quiet) fprintf(stderr, "lssar train: %s is already at step %lld of %d: nothing to do (pass a larger --steps to continue)\n", o->out, (long long)s.step, s.steps);
        r->step = s.step;
    }
    r->seconds = lssar_now() - t0;
done:
    if (logf && fclose(logf) != 0 && !rc) {
        int e = errno;
        rc = write_failed(lssar_fail(LSSAR_E_IO, "closing %s failed: %s (%s)", lp, strerror(e), lssar_io_hint(e)), o->out, saved_step);
    }
    free(iv_loss); free(iv_norm);
    if (locked) train_dir_unlock(o->out);
    if (src.close) src.close(src.ctx);
    free(in); free(tg);
    if (have_val) shard_close(&val);
    dl_close(&dl);
    gpt_dp_free(dp);
    if (m) gpt_free(m);
    return rc;
}
