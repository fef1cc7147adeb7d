// test_train.c - the trainer: schedule, data windows, learning a synthetic task, exact resume,
// determinism, and stopping on NaN without touching the last checkpoint.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "harness.h"
#include "data/shard.h"
#include "model/checkpoint.h"
#include "train/dataloader.h"
#include "train/eval.h"
#include "train/train.h"

// A library call that returns an error code (0 = success): a failure fails the test, with the
// library's message, instead of being ignored.

static char tmpdir[64];

static const char *tpath(const char *name) {
    static char buf[8][256];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

// A 1-channel shard: a random sequence of `period` tokens over `vocab` ids, repeated. Predicting
// the next token needs the last few tokens (the sequence is random), so a model must learn it.
static void write_pattern(const char *path, size_t n, int period, int vocab, uint64_t seed, int channels) {
    lssar_rng r;
    lssar_rng_seed(&r, seed);
    uint16_t pat[256];
    for (int i = 0; i < period; i++) pat[i] = (uint16_t)lssar_rng_below(&r, vocab);
    shard_writer w;
    CHECK_OK(shard_writer_open(&w, path, channels, 0));
    for (size_t i = 0; i < n; i++) {
        uint16_t t[4];
        for (int c = 0; c < channels; c++) t[c] = pat[(i + 5 * c) % period];
        CHECK_OK(shard_writer_append(&w, t, 1));
    }
    CHECK_OK(shard_writer_close(&w));
}

static void base_opts(train_opts *o, const char *out) {
    train_opts_default(o);
    o->data = tpath("train.bin");
    o->val = tpath("val.bin");
    o->out = out;
    o->model.layers = 2; o->model.heads = 2; o->model.dim = 32; o->model.vocab = 16;
    o->seq = 32; o->batch = 4; o->steps = 20; o->lr = 3e-3f; o->warmup = 4;
    o->threads = 1; o->quiet = 1;
}

// 1 if the model files in two run directories hold bitwise-equal parameters.
static int same_weights(const char *dir_a, const char *dir_b) {
    char pa[256], pb[256];
    snprintf(pa, sizeof pa, "%s/%s", dir_a, CKPT_MODEL_FILE);
    snprintf(pb, sizeof pb, "%s/%s", dir_b, CKPT_MODEL_FILE);
    st_file a, b;
    if (st_open(&a, pa)) return 0;
    if (st_open(&b, pb)) { st_close(&a); return 0; }
    int same = a.n == b.n && a.buf_len == b.buf_len;
    for (int i = 0; i < a.n && same; i++) {
        const st_tensor *t = st_find(&b, a.tensors[i].name);
        same = t && t->nbytes == a.tensors[i].nbytes && !memcmp(t->data, a.tensors[i].data, t->nbytes);
    }
    st_close(&a); st_close(&b);
    return same;
}

static void test_schedule(void) {
    train_state s;
    memset(&s, 0, sizeof s);
    s.lr = 1.0f; s.min_lr_frac = 0.1f; s.warmup = 10; s.steps = 110;
    CHECK_CLOSE(train_lr(&s, 1), 0.1, 1e-6);
    CHECK_CLOSE(train_lr(&s, 5), 0.5, 1e-6);
    CHECK_CLOSE(train_lr(&s, 10), 1.0, 1e-6);
    CHECK_CLOSE(train_lr(&s, 60), 0.55, 1e-6);   // halfway through the cosine: (1 + 0.1) / 2
    CHECK_CLOSE(train_lr(&s, 110), 0.1, 1e-6);
    CHECK_CLOSE(train_lr(&s, 500), 0.1, 1e-6);   // past the end: stays at the floor
    for (int t = 11; t <= 110; t++) CHECK(train_lr(&s, t) <= train_lr(&s, t - 1) + 1e-7f, "not decreasing at %d", t);
    s.warmup = 0;
    CHECK_CLOSE(train_lr(&s, 1), 0.1 + 0.9 * 0.5 * (1 + cos(M_PI / 110)), 1e-6);
}

static void test_dataloader(void) {
    const char *a = tpath("dl_a.bin"), *b = tpath("dl_b.bin");
    // shard a: token = position % 1000 (so a window's content tells where it came from); b: 2000 + ...
    shard_writer w;
    CHECK_OK(shard_writer_open(&w, a, 1, 0));
    for (uint16_t i = 0; i < 100; i++) CHECK_OK(shard_writer_append(&w, &i, 1));
    CHECK_OK(shard_writer_close(&w));
    CHECK_OK(shard_writer_open(&w, b, 1, 0));
    for (uint16_t i = 0; i < 300; i++) { uint16_t t = 2000 + i; CHECK_OK(shard_writer_append(&w, &t, 1)); }
    CHECK_OK(shard_writer_close(&w));
    char both[600];
    snprintf(both, sizeof both, "%s,%s", a, b);
    dataloader dl;
    int rc = dl_open(&dl, both, 10, 1, "--data");
    CHECK(rc == 0, "dl_open: %s", lssar_errmsg());
    if (rc) return;
    CHECK(dl.total_starts == 90 + 290, "starts %llu", (unsigned long long)dl.total_starts);
    CHECK(dl_max_token(&dl) == 2299, "max token %d", dl_max_token(&dl));
    lssar_rng r;
    lssar_rng_seed(&r, 1);
    uint16_t in[8 * 10], tg[8 * 10];
    int from_b = 0, draws = 0;
    for (int it = 0; it < 200; it++) {
        dl_next_batch(&dl, &r, 8, in, tg);
        for (int i = 0; i < 8; i++, draws++) {
            uint16_t *x = in + i * 10, *y = tg + i * 10;
            int ok = 1;
            for (int t = 0; t < 10; t++) ok &= y[t] == x[t] + 1 && (t == 0 || x[t] == x[t - 1] + 1);
            CHECK(ok, "window %d is not consecutive or targets are not the next tokens", i);
            from_b += x[0] >= 2000;
            CHECK(x[0] < 2000 ? x[0] + 10 < 100 : x[0] - 2000 + 10 < 300, "window runs past the end of its shard");
        }
    }
    // shards are sampled in proportion to their starts: 290 / 380 from b
    double frac = (double)from_b / draws;
    CHECK(fabs(frac - 290.0 / 380) < 0.05, "fraction from the larger shard %.3f", frac);
    // the same seed gives the same windows
    lssar_rng r1, r2;
    lssar_rng_seed(&r1, 7); lssar_rng_seed(&r2, 7);
    uint16_t in2[80], tg2[80];
    dl_next_batch(&dl, &r1, 8, in, tg);
    dl_next_batch(&dl, &r2, 8, in2, tg2);
    CHECK(!memcmp(in, in2, sizeof in) && !memcmp(tg, tg2, sizeof tg), "not deterministic");
    rc = dl_check_vocab(&dl, 2000, "--data");
    CHECK(rc == LSSAR_E_FORMAT && strstr(lssar_errmsg(), b), "vocab check: rc %d %s", rc, lssar_errmsg());
    dl_close(&dl);
    // aligned windows start only at multiples of align: 4 starts in a (0..75), 12 in b (0..275)
    rc = dl_open(&dl, both, 10, 25, "--data");
    CHECK(rc == 0 && dl.total_starts == 4 + 12, "aligned starts %llu: %s", (unsigned long long)dl.total_starts, lssar_errmsg());
    int misaligned = 0;
    for (int it = 0; !rc && it < 50; it++) {
        dl_next_batch(&dl, &r, 8, in, tg);
        for (int i = 0; i < 8; i++) {
            int pos = in[i * 10] >= 2000 ? in[i * 10] - 2000 : in[i * 10];
            misaligned += pos % 25 != 0 || tg[i * 10 + 9] != in[i * 10 + 9] + 1;
        }
    }
    CHECK(misaligned == 0, "%d windows not at a multiple of the alignment", misaligned);
    dl_close(&dl);
    CHECK(dl_open(&dl, both, 10, 0, "--data") == LSSAR_E_ARG, "align 0 accepted");
    // errors name the file
    rc = dl_open(&dl, a, 100, 1, "--data");
    CHECK(rc == LSSAR_E_SIZE && strstr(lssar_errmsg(), a) && strstr(lssar_errmsg(), "--seq"), "short shard: %s", lssar_errmsg());
    const char *c2 = tpath("dl_c2.bin");
    write_pattern(c2, 50, 7, 5, 1, 2);
    snprintf(both, sizeof both, "%s,%s", a, c2);
    rc = dl_open(&dl, both, 10, 1, "--data");
    CHECK(rc == LSSAR_E_FORMAT && strstr(lssar_errmsg(), c2) && strstr(lssar_errmsg(), "channels"), "channel mismatch: %s", lssar_errmsg());
    rc = dl_open(&dl, tpath("nope.bin"), 10, 1, "--data");
    CHECK(rc == LSSAR_E_IO && strstr(lssar_errmsg(), "nope.bin"), "missing file: %s", lssar_errmsg());
}

// The loss floor of windows of `seq` tokens of the repeated pattern (write_pattern, 1 channel):
// the mean over window positions t and start phases of the entropy of the next token given the
// t + 1 tokens seen (a window may start at any phase, equally often), which a causal model can
// at best reach. Positions whose context occurs at several phases with different next tokens
// cost their entropy; once the context is long enough to fix the phase it is 0.
static double pattern_floor(int period, int vocab, uint64_t seed, int seq) {
    lssar_rng r;
    lssar_rng_seed(&r, seed);
    uint16_t pat[256];
    for (int i = 0; i < period; i++) pat[i] = (uint16_t)lssar_rng_below(&r, vocab);
    double total = 0;
    for (int t = 0; t < seq; t++)
        for (int a = 0; a < period; a++) {   // phase a: context pat[a..a+t], next pat[a+t+1]
            int n = 0, same = 0;
            for (int b = 0; b < period; b++) {
                int eq = 1;
                for (int j = 0; j <= t && eq; j++) eq = pat[(a + j) % period] == pat[(b + j) % period];
                if (!eq) continue;
                n++;
                same += pat[(a + t + 1) % period] == pat[(b + t + 1) % period];
            }
            total += -log((double)same / n);   // the loss at phase a of the best predictor
        }
    return total / ((double)seq * period);
}

static void test_learns_pattern(void) {
    train_opts o;
    base_opts(&o, tpath("learn"));
    o.steps = 150;
    o.warmup = 10;
    train_result r;
    int rc = train_run(&o, &r);
    CHECK(rc == 0, "train_run: %s", lssar_errmsg());
    CHECK(r.step == 150, "steps %lld", (long long)r.step);
    // a random period-24 sequence over 16 ids: ln 16 = 2.77 at the start; the model must learn it.
    // The data's own floor (pattern_floor: the first positions of a window cannot know the phase)
    // is printed; 0.3 must stay above it with room, else the check would test the data, not the model.
    double floor_ = pattern_floor(24, 16, 11, 32);
    printf("  learns pattern: train loss %.4f, val loss %.4f (the data's floor %.4f)\n", r.train_loss, r.val_loss, floor_);
    CHECK(floor_ < 0.15, "the data's floor %.4f leaves no room under 0.3", floor_);
    CHECK(r.train_loss < 0.3f, "train loss %.4f after 150 steps", r.train_loss);
    CHECK(r.val_loss < 0.3, "val loss %.4f", r.val_loss);
    // the saved model gives the same validation loss through eval_shard
    gpt *m = NULL;
    char mp[256];
    snprintf(mp, sizeof mp, "%s/%s", o.out, CKPT_MODEL_FILE);
    CHECK(ckpt_load_model(mp, NULL, &m, NULL) == 0, "load: %s", lssar_errmsg());
    if (m) {
        shard s;
        CHECK_OK(shard_open(&s, o.val));
        eval_result er;
        CHECK(eval_shard(m, &s, 32, 4, 16, &er, NULL) == 0, "eval: %s", lssar_errmsg());
        CHECK_CLOSE(er.loss, r.val_loss, 1e-5);
        CHECK(er.windows == 16 && er.tokens == 16 * 32, "windows %d tokens %zu", er.windows, er.tokens);
        // longer than trained (rope): runs, and stays finite
        double pp[128];
        CHECK(eval_shard(m, &s, 128, 2, 4, &er, pp) == 0 && isfinite(er.loss), "eval at 128: %s", lssar_errmsg());
        double mean = 0;
        for (int t = 0; t < 128; t++) mean += pp[t] / 128;
        CHECK_CLOSE(mean, er.loss, 1e-6);
        shard_close(&s);
        gpt_free(m);
    }
    // training again into the same directory without --resume is refused
    rc = train_run(&o, &r);
    CHECK(rc == LSSAR_E_ARG && strstr(lssar_errmsg(), "--resume"), "existing run overwritten? rc %d %s", rc, lssar_errmsg());
}

// The public API (include/lssar.h) on the model trained above.
static void test_public_api(void) {
    lssar_model *m = NULL;
    int rc = lssar_model_load(tpath("learn"), NULL, &m);
    CHECK(rc == 0, "lssar_model_load: %s", lssar_errmsg());
    if (rc) return;
    lssar_model_info info;
    CHECK(lssar_model_describe(m, &info) == 0, "describe");
    CHECK(info.layers == 2 && info.heads == 2 && info.dim == 32 && info.vocab == 16 && info.channels == 1 &&
          info.max_seq == 32 && !strcmp(info.pos, "rope") && info.attn == LSSAR_ATTN_LSSAR && info.step == 150 && info.params > 0,
          "info: %d %d %d %d %s %lld", info.layers, info.heads, info.dim, info.vocab, info.pos, info.step);
    double l1 = 0, l2 = 0;
    size_t n = 0;
    CHECK(lssar_model_eval_shard(m, tpath("val.bin"), 32, 2, 2, &l1, &n, NULL) == 0 && n == 64, "eval_shard: %s", lssar_errmsg());
    // the same two windows through lssar_model_loss
    shard s;
    CHECK_OK(shard_open(&s, tpath("val.bin")));
    uint16_t w[2 * 33];
    memcpy(w, s.tokens, 33 * sizeof *w);
    memcpy(w + 33, s.tokens + 32, 33 * sizeof *w);
    shard_close(&s);
    CHECK(lssar_model_loss(m, w, 2, 32, &l2) == 0, "loss: %s", lssar_errmsg());
    CHECK_CLOSE(l2, l1, 1e-5);
    w[5] = 16;
    CHECK(lssar_model_loss(m, w, 2, 32, &l2) == LSSAR_E_ARG, "out-of-vocabulary id accepted");
    lssar_model_free(m);
    m = NULL;
    lssar_load_options as_softmax = {.set_attn = 1, .attn = LSSAR_ATTN_SOFTMAX};
    CHECK(lssar_model_load(tpath("learn"), &as_softmax, &m) == LSSAR_E_ARG && m == NULL, "lssar -> softmax accepted");
    CHECK(lssar_model_load(tpath("nothing"), NULL, &m) == LSSAR_E_IO, "missing model");
}

static void test_resume_exact(void) {
    // gradient accumulation, clipping and a save in the middle all take part
    train_opts o;
    base_opts(&o, tpath("straight"));
    o.steps = 16; o.accum = 2; o.clip = 0.5f; o.save_every = 5; o.eval_every = 3;
    int rc = train_run(&o, NULL);
    CHECK(rc == 0, "straight: %s", lssar_errmsg());
    base_opts(&o, tpath("split"));
    o.steps = 16; o.accum = 2; o.clip = 0.5f; o.save_every = 5; o.eval_every = 3;
    o.stop_at = 7;
    train_result r;
    rc = train_run(&o, &r);
    CHECK(rc == 0 && r.step == 7, "first half: rc %d step %lld %s", rc, (long long)r.step, lssar_errmsg());
    CHECK(!same_weights(tpath("straight"), tpath("split")), "weights after 7 and 16 steps are equal?");
    train_opts q;
    train_opts_default(&q);
    q.out = tpath("split"); q.resume = 1; q.threads = 1; q.quiet = 1;
    rc = train_run(&q, &r);
    CHECK(rc == 0 && r.step == 16, "resume: rc %d step %lld %s", rc, (long long)r.step, lssar_errmsg());
    CHECK(same_weights(tpath("straight"), tpath("split")), "7 steps + resume to 16 differs from 16 straight");
    // the AdamW state and data cursor match too
    train_state a, b;
    char pa[256], pb[256];
    snprintf(pa, sizeof pa, "%s/%s", tpath("straight"), CKPT_TRAINER_FILE);
    snprintf(pb, sizeof pb, "%s/%s", tpath("split"), CKPT_TRAINER_FILE);
    CHECK(ckpt_read_train_state(pa, &a) == 0 && ckpt_read_train_state(pb, &b) == 0, "read states");
    CHECK(a.step == 16 && b.step == 16 && !memcmp(&a.rng, &b.rng, sizeof a.rng), "data cursor differs");
    // resuming a finished run does nothing and fails nothing
    rc = train_run(&q, &r);
    CHECK(rc == 0 && r.step == 16, "resume of a finished run: rc %d %s", rc, lssar_errmsg());
    // a trainer file from another step (crash between the two renames) is refused
    char cmd[600];
    snprintf(cmd, sizeof cmd, "cp %s/model.safetensors %s/model.safetensors", tpath("learn"), tpath("split"));
    CHECK(system(cmd) == 0, "%s failed", cmd);
    q.steps = 20;
    rc = train_run(&q, &r);
    CHECK(rc != 0 && strstr(lssar_errmsg(), "step"), "mismatched model/trainer files accepted: %s", lssar_errmsg());
}

static void test_deterministic(void) {
    train_opts o;
    base_opts(&o, tpath("det1"));
    o.steps = 6;
    CHECK(train_run(&o, NULL) == 0, "run 1: %s", lssar_errmsg());
    base_opts(&o, tpath("det2"));
    o.steps = 6;
    CHECK(train_run(&o, NULL) == 0, "run 2: %s", lssar_errmsg());
    CHECK(same_weights(tpath("det1"), tpath("det2")), "two runs with the same seed differ");
    // the thread count does not change the result either (nn.h: every reduction runs in a fixed
    // order; the matmul blocks are cut from the shapes alone)
    base_opts(&o, tpath("det2t"));
    o.steps = 6; o.threads = 2;
    CHECK(train_run(&o, NULL) == 0, "run on 2 threads: %s", lssar_errmsg());
    CHECK(same_weights(tpath("det1"), tpath("det2t")), "1 and 2 threads give different weights");
    base_opts(&o, tpath("det3"));
    o.steps = 6; o.seed = 99;
    CHECK(train_run(&o, NULL) == 0, "run 3: %s", lssar_errmsg());
    CHECK(!same_weights(tpath("det1"), tpath("det3")), "another seed gives the same weights");
    // activation recomputation changes the memory, not the bits
    base_opts(&o, tpath("det_rc"));
    o.steps = 6; o.recompute = 1;
    CHECK(train_run(&o, NULL) == 0, "run with recompute: %s", lssar_errmsg());
    CHECK(same_weights(tpath("det1"), tpath("det_rc")), "recompute gives different weights");
}

static void test_nan_stops(void) {
    train_opts o;
    base_opts(&o, tpath("nan"));
    o.steps = 30; o.warmup = 0; o.lr = 1e30f; o.clip = 0; o.save_every = 1; o.wd = 0;
    train_result r;
    int rc = train_run(&o, &r);
    CHECK(rc == LSSAR_E_NAN, "lr 1e30 did not stop with LSSAR_E_NAN (rc %d, step %lld)", rc, (long long)r.step);
    if (rc != LSSAR_E_NAN) return;
    CHECK(strstr(lssar_errmsg(), "intact") || strstr(lssar_errmsg(), "no checkpoint"), "message: %s", lssar_errmsg());
    // the checkpoint on disk is the last completed step and loads
    char mp[256];
    snprintf(mp, sizeof mp, "%s/%s", o.out, CKPT_MODEL_FILE);
    gpt *m = NULL;
    int64_t step = -1;
    if (r.step > 0) {
        CHECK(ckpt_load_model(mp, NULL, &m, &step) == 0, "last checkpoint does not load: %s", lssar_errmsg());
        CHECK(step == r.step, "checkpoint at step %lld, last completed step %lld", (long long)step, (long long)r.step);
        if (m) gpt_free(m);
    }
}

static void test_bad_inputs(void) {
    train_opts o;
    base_opts(&o, tpath("bad"));
    o.model.vocab = 8;   // the pattern uses ids up to 15
    int rc = train_run(&o, NULL);
    CHECK(rc == LSSAR_E_FORMAT && strstr(lssar_errmsg(), "train.bin") && strstr(lssar_errmsg(), "--vocab"), "vocab: %s", lssar_errmsg());
    base_opts(&o, tpath("bad"));
    o.seq = 5000;
    rc = train_run(&o, NULL);
    CHECK(rc == LSSAR_E_SIZE && strstr(lssar_errmsg(), "train.bin"), "short shard: %s", lssar_errmsg());
    base_opts(&o, tpath("bad"));
    o.val = tpath("val2.bin");   // 2 channels
    rc = train_run(&o, NULL);
    CHECK(rc == LSSAR_E_FORMAT && strstr(lssar_errmsg(), "channels"), "val channels: %s", lssar_errmsg());
    base_opts(&o, tpath("bad2"));
    o.resume = 1;
    rc = train_run(&o, NULL);
    CHECK(rc == LSSAR_E_IO && strstr(lssar_errmsg(), "--resume"), "resume without a checkpoint: %s", lssar_errmsg());
    base_opts(&o, tpath("bad3"));
    o.recompute = 2;
    rc = train_run(&o, NULL);
    CHECK(rc == LSSAR_E_ARG && strstr(lssar_errmsg(), "recompute"), "recompute = 2: %s", lssar_errmsg());
    lssar_train_options po;
    lssar_train_defaults(&po);
    po.out = tpath("bad3");
    po.recompute = 2;
    rc = lssar_train(&po, NULL);
    CHECK(rc == LSSAR_E_ARG && strstr(lssar_errmsg(), "recompute"), "lssar_train recompute = 2: %s", lssar_errmsg());
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/lssar_train_XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }
    write_pattern(tpath("train.bin"), 4000, 24, 16, 11, 1);
    write_pattern(tpath("val.bin"), 1200, 24, 16, 11, 1);
    write_pattern(tpath("val2.bin"), 1200, 24, 16, 11, 2);
    RUN(test_schedule);
    RUN(test_dataloader);
    RUN(test_learns_pattern);
    RUN(test_public_api);
    RUN(test_resume_exact);
    RUN(test_deterministic);
    RUN(test_nan_stops);
    RUN(test_bad_inputs);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd)) {}
    return test_summary("test_train");
}
