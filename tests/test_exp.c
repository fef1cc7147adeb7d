// test_exp.c - the experiment pieces (src/exp, src/model/gpt_probe.c): the passkey prompt's exact
// token layout and its scoring on known outputs, Wilson intervals, t intervals over seeds, windows
// inside documents and their mean +- standard error (and per-window losses), MQAR sequences, and attention statistics against float64
// references (a uniform-attention model and a direct softmax recomputation).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "harness.h"
#include "lssar.h"
#include "exp/attnstats.h"
#include "exp/docwin.h"
#include "exp/downstream.h"
#include "exp/mqar.h"
#include "exp/passkey.h"
#include "exp/plot.h"
#include "exp/stats.h"
#include "model/gpt.h"
#include "model/gpt_probe.h"
#include "train/dataloader.h"

// A library call that returns an error code (0 = success): a failure fails the test, with the
// library's message, instead of being ignored.

static const char *TASK = "There is an important info hidden inside a lot of irrelevant text. Find it and "
                          "memorize them. I will quiz you about the important information there.";
static const char *FILLER = " The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";
static const char *QUESTION = " What is the pass key? The pass key is";

static int eq_bytes(const uint16_t *t, const char *s) {
    for (size_t i = 0; s[i]; i++) if (t[i] != (unsigned char)s[i]) return 0;
    return 1;
}

static lssar_tokenizer *byte_tok(void) {
    lssar_tokenizer *t = NULL;
    if (lssar_tokenizer_byte(&t)) return NULL;
    return t;
}

// The short prompt: no task sentence, so a byte window of T = 320 holds two whole filler units;
// the rest of the layout is the full prompt's.
static void test_passkey_short(void) {
    lssar_tokenizer *tok = byte_tok();
    if (!tok) return;
    passkey_pieces pp;
    CHECK_OK(passkey_pieces_init(&pp, tok, PASSKEY_SHORT));
    int nf = strlen(FILLER), nq = strlen(QUESTION);
    char needle[128];
    snprintf(needle, sizeof needle, " The pass key is %d. Remember it. %d is the pass key.", 12345, 12345);
    int nn = strlen(needle), n = 321, ap, al;
    uint16_t s[321];
    CHECK(passkey_build(&pp, n, 0.0, 12345, s, &ap, &al) == 0, "build: %s", lssar_errmsg());
    CHECK(s[0] == LSSAR_BYTE_EOT && eq_bytes(s + 1, needle), "depth 0: the needle right after EOT");
    CHECK(eq_bytes(s + 1 + nn, FILLER) && eq_bytes(s + 1 + nn + nf, FILLER), "two whole filler units at T = 320");
    CHECK(eq_bytes(s + n - 6 - nq, QUESTION) && ap == n - 6 && al == 6, "question, then the answer");
    CHECK(passkey_min_len(&pp) == 1 + nn + nq + 6 + 4, "minimum length %d", passkey_min_len(&pp));
    passkey_pieces_free(&pp);
    CHECK(passkey_pieces_init(&pp, tok, (passkey_prompt)2) == LSSAR_E_ARG, "prompt 2 accepted");
    lssar_tokenizer_free(tok);
}

static void test_passkey_layout(void) {
    lssar_tokenizer *tok = byte_tok();
    CHECK(tok != NULL, "byte tokenizer");
    if (!tok) return;
    passkey_pieces pp;
    CHECK(passkey_pieces_init(&pp, tok, PASSKEY_FULL) == 0, "pieces: %s", lssar_errmsg());
    int nt = strlen(TASK), nf = strlen(FILLER), nq = strlen(QUESTION);
    char needle[128];
    snprintf(needle, sizeof needle, " The pass key is %d. Remember it. %d is the pass key.", 12345, 12345);
    int nn = strlen(needle);
    int n = 1 + nt + 3 * nf + 10 + nn + nq + 6;   // 3 whole filler units and 10 tokens of a 4th
    uint16_t *s = malloc(sizeof(uint16_t) * n);
    int ap = -1, al = -1;
    // depth 0: EOT, task, needle, fillers, question, answer
    CHECK(passkey_build(&pp, n, 0.0, 12345, s, &ap, &al) == 0, "build: %s", lssar_errmsg());
    CHECK(s[0] == LSSAR_BYTE_EOT, "starts with EOT (got %d)", s[0]);
    CHECK(eq_bytes(s + 1, TASK), "task line right after EOT");
    CHECK(eq_bytes(s + 1 + nt, needle), "depth 0: needle right after the task");
    CHECK(eq_bytes(s + 1 + nt + nn, FILLER) && eq_bytes(s + 1 + nt + nn + 2 * nf, FILLER), "whole filler units follow");
    CHECK(memcmp(s + 1 + nt + nn + 3 * nf, s + 1 + nt + nn, 10 * sizeof(uint16_t)) == 0, "then 10 tokens of a cut unit");
    CHECK(eq_bytes(s + n - 6 - nq, QUESTION), "question before the answer");
    CHECK(ap == n - 6 && al == 6 && eq_bytes(s + ap, " 12345"), "answer ' 12345' at the end (pos %d len %d)", ap, al);
    // depth 1: the needle right before the question (after the cut unit)
    CHECK(passkey_build(&pp, n, 1.0, 12345, s, &ap, &al) == 0, "build depth 1");
    CHECK(eq_bytes(s + n - 6 - nq - nn, needle), "depth 1: needle right before the question");
    CHECK(eq_bytes(s + 1 + nt, FILLER), "depth 1: filler right after the task");
    // depth 0.5 of 3 whole units: boundary round(1.5) = 2 units in
    CHECK(passkey_build(&pp, n, 0.5, 54321, s, &ap, &al) == 0, "build depth 0.5");
    char needle2[128];
    snprintf(needle2, sizeof needle2, " The pass key is %d. Remember it. %d is the pass key.", 54321, 54321);
    CHECK(eq_bytes(s + 1 + nt + 2 * nf, needle2), "depth 0.5: needle after 2 of 3 units");
    // too short: a clear error; exactly the minimum works
    CHECK(passkey_build(&pp, 1 + nt + nn + nq + 5, 0.5, 12345, s, &ap, &al) != 0, "too short is refused");
    CHECK(strstr(lssar_errmsg(), "longer") != NULL, "the error says to use a longer length: %s", lssar_errmsg());
    CHECK(passkey_build(&pp, 1 + nt + nn + nq + 6, 0.5, 12345, s, &ap, &al) == 0, "the exact minimum fits");
    CHECK(passkey_build(&pp, n, 0.5, 1234, s, &ap, &al) != 0, "a 4-digit key is refused");
    // training windows reach every slot, the last one (right before the question, 100%) too: with
    // 3 whole units there are 5 slots; a window's needle slot is where " The pass key is" starts
    {
        lssar_rng rs;
        lssar_rng_seed(&rs, 11);
        int seen[5] = {0}, other = 0;
        const int draws = 400;
        for (int i = 0; i < draws; i++) {
            CHECK(passkey_window(&pp, n - 1, &rs, s) == 0, "window: %s", lssar_errmsg());
            int at = -1;
            for (int q = 1 + nt; q + 16 <= n && at < 0; q++) if (eq_bytes(s + q, " The pass key is")) at = q - (1 + nt);
            if (at == 0 || at == nf || at == 2 * nf || at == 3 * nf) seen[at / nf]++;
            else if (at == 3 * nf + 10) seen[4]++;
            else other++;
        }
        // interior slots ~ 1/4 of the draws each, the two end slots ~ 1/8 (nearest-slot rounding);
        // 400 draws put each well inside [1/16, 3/8] (binomial sd <= 2.2% of the draws)
        for (int k = 0; k < 5; k++)
            CHECK(seen[k] >= draws / 16 && seen[k] <= 3 * draws / 8, "training windows: slot %d drawn %d of %d times", k, seen[k], draws);
        CHECK(other == 0, "every needle in one of the 5 slots (%d elsewhere)", other);
    }
    // training windows: T + 1 tokens ending in a 5-digit answer
    lssar_rng r;
    lssar_rng_seed(&r, 3);
    uint16_t *w = malloc(sizeof(uint16_t) * 401);
    CHECK(passkey_window(&pp, 400, &r, w) == 0, "window");
    int digits = 0;
    for (int i = 395; i < 401; i++) digits += w[i] >= '0' && w[i] <= '9';
    CHECK(w[0] == LSSAR_BYTE_EOT && w[395] == ' ' && digits == 5, "window ends with ' DDDDD'");
    free(w);
    free(s);
    passkey_pieces_free(&pp);
    lssar_tokenizer_free(tok);
}

static void test_passkey_mix(void) {
    lssar_tokenizer *tok = byte_tok();
    if (!tok) { CHECK(0, "byte tokenizer"); return; }
    passkey_pieces pp;
    CHECK_OK(passkey_pieces_init(&pp, tok, PASSKEY_FULL));
    int B = 64, T = 300, rep = -1;
    uint16_t *in = calloc(B * T, 2), *tg = calloc(B * T, 2);
    lssar_rng r;
    lssar_rng_seed(&r, 11);
    CHECK(passkey_mix_batch(&pp, 0.25, B, T, &r, in, tg, &rep) == 0, "mix");
    CHECK(rep > 5 && rep < 30, "about a quarter of 64 windows replaced (%d)", rep);
    int n = 0, shifted = 1;
    for (int b = 0; b < B; b++)
        if (in[b * T] == LSSAR_BYTE_EOT) {
            n++;
            for (int t = 0; t + 1 < T; t++) shifted &= tg[b * T + t] == in[b * T + t + 1];
        }
    CHECK(n == rep && shifted, "replaced windows start with EOT and targets are inputs shifted by one");
    CHECK(passkey_mix_batch(&pp, 1.5, B, T, &r, in, tg, &rep) != 0, "mix > 1 refused");
    free(in); free(tg);
    passkey_pieces_free(&pp);
    lssar_tokenizer_free(tok);
}

static void test_passkey_score(void) {
    lssar_tokenizer *tok = byte_tok();
    if (!tok) { CHECK(0, "byte tokenizer"); return; }
    passkey_pieces pp;
    CHECK_OK(passkey_pieces_init(&pp, tok, PASSKEY_FULL));
    int n = 300, ap, al;
    uint16_t s[300], pred[300];
    CHECK(passkey_build(&pp, n, 0.3, 24680, s, &ap, &al) == 0, "build");
    // a perfect teacher-forced model predicts s[t + 1] at t
    for (int t = 0; t < n - 1; t++) pred[t] = s[t + 1];
    double da = -1;
    int place[PASSKEY_DIGITS] = {0};
    CHECK(passkey_score(&pp, s, pred, ap, al, &da, place) == 1 && da == 1.0, "perfect: success, digits 1 (%g)", da);
    pred[ap + 2 - 1] = '9';   // the second digit '4' -> '9'
    CHECK(passkey_score(&pp, s, pred, ap, al, &da, place) == 0, "one wrong digit fails the trial");
    CHECK_CLOSE(da, 0.8, 1e-12);
    CHECK(place[0] == 2 && place[1] == 1 && place[2] == 2 && place[3] == 2 && place[4] == 2,
          "right digits by place over the two calls: %d %d %d %d %d", place[0], place[1], place[2], place[3], place[4]);
    pred[ap - 1] = 'x';        // the space before the key: not a digit, digits still 4/5
    passkey_score(&pp, s, pred, ap, al, &da, NULL);
    CHECK_CLOSE(da, 0.8, 1e-12);
    for (int i = 0; i < al; i++) pred[ap + i - 1] = '0';
    passkey_score(&pp, s, pred, ap, al, &da, NULL);
    CHECK_CLOSE(da, 0.2, 1e-12);   // 24680 vs 00000: only the last digit is right
    passkey_pieces_free(&pp);
    lssar_tokenizer_free(tok);
}

static void test_wilson(void) {
    double lo, hi;
    wilson_interval(0, 20, 1.96, &lo, &hi);
    CHECK(lo == 0, "0/20 lower bound 0");
    CHECK_CLOSE(hi, 0.16113, 1e-4);
    wilson_interval(10, 20, 1.96, &lo, &hi);
    CHECK_CLOSE(lo, 0.29929, 1e-4);
    CHECK_CLOSE(hi, 0.70071, 1e-4);
    wilson_interval(20, 20, 1.96, &lo, &hi);
    CHECK(hi == 1 && fabs(lo - 0.83887) < 1e-4, "20/20: [%g, %g]", lo, hi);
}

// The t interval over seeds on numbers worked by hand: {1, 2, 3, 4} has mean 2.5, sd
// sqrt(5/3) = 1.290994, se = sd / 2 = 0.645497, and t(0.975, 3) = 3.182 gives +- 2.053972.
static void test_t_interval(void) {
    CHECK(exp_t975(3) == 3.182 && exp_t975(1) == 12.706 && exp_t975(30) == 2.042, "t table");
    CHECK(isnan(exp_t975(0)) && isnan(exp_t975(-2)), "no t without degrees of freedom");
    // past the table: the expansion against the exact quantiles (R's qt(0.975, df))
    CHECK_CLOSE(exp_t975(31), 2.039513, 2e-4);
    CHECK_CLOSE(exp_t975(40), 2.021075, 2e-4);
    CHECK_CLOSE(exp_t975(60), 2.000298, 1e-4);
    CHECK_CLOSE(exp_t975(120), 1.979930, 1e-4);
    CHECK_CLOSE(exp_t975(100000), 1.959985, 1e-4);
    CHECK(exp_t975(31) < exp_t975(30) && exp_t975(200) < exp_t975(100), "t falls towards 1.96 as df grows");
    const double x[4] = {1, 2, 3, 4};
    double m, se, h;
    exp_mean_se(x, 4, &m, &se);
    CHECK_CLOSE(m, 2.5, 1e-12);
    CHECK_CLOSE(se, 0.6454972244, 1e-9);
    exp_mean_ci95(x, 4, &m, &h);
    CHECK_CLOSE(h, 3.182 * 0.6454972244, 1e-9);
    CHECK(m - h < m && m < m + h && fabs(h - 2.053972) < 1e-5, "2.5 +- %g", h);
    // negative controls: one value has no interval; equal values have a zero-width one
    exp_mean_ci95(x, 1, &m, &h);
    CHECK(m == 1 && isnan(h), "one seed: mean %g, no half-width (got %g)", m, h);
    const double c[3] = {0.25, 0.25, 0.25};
    exp_mean_ci95(c, 3, &m, &h);
    CHECK(m == 0.25 && h == 0, "equal values: 0.25 +- 0 (got %g +- %g)", m, h);
    exp_mean_se(x, 0, &m, &se);
    CHECK(isnan(m) && isnan(se), "no values: NaN");
    // not the normal interval: two seeds are 4.3 / 1.96 times wider at df = 2
    const double y[3] = {5.0, 5.1, 5.2};
    exp_mean_ci95(y, 3, &m, &h);
    CHECK_CLOSE(h, 4.303 * 0.1 / sqrt(3.0), 1e-9);
}

static void test_docwin(void) {
    // three documents: 10, 25 and 3 tokens at 1, 12, 38 (EOT before each)
    const char *idx = "/tmp/lssar_test_exp_index.json";
    FILE *f = fopen(idx, "w");
    fprintf(f, "{\"documents\": [{\"name\": \"a\", \"start\": 1, \"tokens\": 10}, {\"name\": \"b\", \"start\": 12, \"tokens\": 25},"
               " {\"name\": \"c\", \"start\": 38, \"tokens\": 3}]}");
    fclose(f);
    exp_docs d;
    CHECK(exp_docs_load(idx, &d) == 0 && d.n == 3, "index loads (%s)", lssar_errmsg());
    size_t *st = NULL;
    int n = 0;
    CHECK(exp_doc_windows(&d, 4, 0, &st, &n) == 0, "windows");
    // a: (10-1)/4 = 2 windows; b: (25-1)/4 = 6; c: none
    CHECK(n == 8, "8 windows of 4 (got %d)", n);
    int inside = 1;
    for (int i = 0; i < n; i++) {
        int ok = 0;
        for (int j = 0; j < d.n; j++) ok |= st[i] >= d.start[j] && st[i] + 5 <= d.start[j] + d.tokens[j];
        inside &= ok;
    }
    CHECK(inside, "every window of T+1 lies inside one document");
    free(st);
    CHECK(exp_doc_windows(&d, 4, 3, &st, &n) == 0 && n == 3 && st[0] == 1, "thinned to 3, first kept (%d)", n);
    free(st);
    CHECK(exp_doc_windows(&d, 30, 0, &st, &n) == 0 && n == 0, "no document holds 31 tokens");
    free(st);
    exp_docs_free(&d);
    remove(idx);
    CHECK(exp_docs_load("/nonexistent/val_index.json", &d) != 0 && strstr(lssar_errmsg(), "data build"), "missing index names the fix");
}

static gpt *tiny_model(lssar_attn_kind k, lssar_pos pos, int layers) {
    gpt_config c = {.layers = layers, .heads = 2, .dim = 16, .vocab = 20, .channels = 1, .max_seq = 32,
                    .pos = pos, .attn = k, .p = 15.0f, .tied = 1};
    gpt *m = NULL;
    if (gpt_create(&c, 7, &m)) return NULL;
    return m;
}

static void test_eval_windows(void) {
    gpt *m = tiny_model(LSSAR_ATTN_SOFTMAX, LSSAR_POS_ROPE, 1);
    CHECK(m != NULL, "model");
    if (!m) return;
    // a shard file of 200 tokens
    const char *path = "/tmp/lssar_test_exp_shard.bin";
    shard_writer w;
    CHECK_OK(shard_writer_open(&w, path, 1, 0));
    uint16_t tok[200];
    for (int i = 0; i < 200; i++) tok[i] = (uint16_t)((i * 7 + i / 5) % 20);
    CHECK_OK(shard_writer_append(&w, tok, 200));
    CHECK(shard_writer_close(&w) == 0, "shard written");
    shard s;
    CHECK(shard_open(&s, path) == 0, "shard opens");
    size_t starts[3] = {0, 50, 120};
    double mean, se, win[3] = {NAN, NAN, NAN};
    CHECK(exp_eval_windows(m, &s, starts, 3, 16, 2, &mean, &se, win, NULL) == 0, "eval: %s", lssar_errmsg());
    // reference: each window alone
    double l[3];
    CHECK_OK(gpt_reserve(m, 1, 16, 0));
    for (int i = 0; i < 3; i++) {
        float lf;
        CHECK_OK(gpt_forward(m, tok + starts[i], tok + starts[i] + 1, 1, 16, &lf));
        l[i] = lf;
    }
    double mu = (l[0] + l[1] + l[2]) / 3, var = 0;
    for (int i = 0; i < 3; i++) var += (l[i] - mu) * (l[i] - mu);
    double se_ref = sqrt(var / 2) / sqrt(3.0);
    CHECK_CLOSE(mean, mu, 1e-5);
    CHECK_CLOSE(se, se_ref, 1e-5);
    for (int i = 0; i < 3; i++) CHECK_CLOSE(win[i], l[i], 1e-5);   // the per-window losses, in window order
    CHECK(se > 0, "windows differ, so the standard error is positive");
    shard_close(&s);
    remove(path);
    gpt_free(m);
}

static void test_mqar(void) {
    mqar_params p = {16, 16, 4};
    lssar_rng r;
    lssar_rng_seed(&r, 5);
    uint16_t s[65];
    int q[4];
    CHECK(mqar_build(&p, 65, &r, s, q) == 0, "build");
    CHECK(s[0] == mqar_vocab(&p) - 1, "EOT first");
    int ok = 1;
    for (int i = 0; i < 4; i++) {
        // find the query key's pair and check the value after the query
        int found = 0;
        for (int j = 0; j < 4; j++)
            if (s[1 + 2 * j] == s[q[i]]) found = s[2 + 2 * j] == s[q[i] + 1];
        ok &= found && s[q[i]] >= 1 && s[q[i]] <= 16 && s[q[i] + 1] > 16 && q[i] > 8 && q[i] + 1 < 65;
    }
    CHECK(ok, "each query is a key of a pair and is followed by its value");
    int keys_distinct = 1;
    for (int i = 0; i < 4; i++) for (int j = 0; j < i; j++) keys_distinct &= s[1 + 2 * i] != s[1 + 2 * j];
    CHECK(keys_distinct, "keys distinct");
    CHECK(mqar_build(&p, 16, &r, s, q) != 0, "too short is refused");
}

// The mqar training shard read with align = T + 1 (what `extrapolate --task mqar` sets): every
// window is one whole sequence as written (EOT first, no other EOT, each query's pair inside).
// With align 1 most windows cut a sequence, which is why recall stayed at chance before.
static void test_mqar_aligned_windows(void) {
    mqar_params p = {16, 16, 4};
    const int T = 40, nseq = 50, B = 64;
    const uint16_t eot = (uint16_t)(mqar_vocab(&p) - 1);
    char path[] = "/tmp/lssar_test_mqar_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "temp file");
    if (fd < 0) return;
    close(fd);
    CHECK(mqar_write_shard(path, &p, T, nseq, 9) == 0, "write shard: %s", lssar_errmsg());
    uint16_t in[64 * 40], tg[64 * 40];
    for (int align = T + 1; align >= 1; align -= T) {   // T + 1, then 1
        dataloader d;
        CHECK(dl_open(&d, path, T, align, "--data") == 0, "dl_open align %d: %s", align, lssar_errmsg());
        if (align == T + 1) CHECK(d.total_starts == (uint64_t)nseq, "one start per sequence (got %llu)", (unsigned long long)d.total_starts);
        lssar_rng r;
        lssar_rng_seed(&r, 3);
        int whole = 0;
        for (int rep = 0; rep < 4; rep++) {
            dl_next_batch(&d, &r, B, in, tg);
            for (int b = 0; b < B; b++) {
                const uint16_t *x = in + b * T, *y = tg + b * T;
                int ok = x[0] == eot && y[T - 1] != eot;
                for (int t = 1; t < T; t++) ok &= x[t] != eot;
                for (int t = 0; t < T - 1; t++) ok &= y[t] == x[t + 1];
                // every query (a key token after the pairs) is followed by the value of its pair
                for (int t = 1 + 2 * p.pairs; ok && t < T - 1; t++)
                    if (x[t] >= 1 && x[t] <= p.keys) {
                        int found = 0;
                        for (int j = 0; j < p.pairs; j++) if (x[1 + 2 * j] == x[t]) found = x[2 + 2 * j] == x[t + 1];
                        ok &= found;
                    }
                whole += ok;
            }
        }
        if (align == T + 1) CHECK(whole == 4 * B, "aligned: every window is one whole sequence (%d of %d)", whole, 4 * B);
        else CHECK(whole < B, "unaligned: most windows cut a sequence (%d of %d whole)", whole, 4 * B);
        dl_close(&d);
    }
    unlink(path);
}

// the probe's layer-0 q (no positions) against a float64 recomputation from the parameters
typedef struct { int layer; float *q, *k; int n; } grab_ctx;
static int grab(void *vc, int layer, const float *q, const float *k, int B, int T, int NH, int HS, const lssar_attn_desc *d) {
    grab_ctx *g = vc;
    if (layer == g->layer) { memcpy(g->q, q, sizeof(float) * g->n); memcpy(g->k, k, sizeof(float) * g->n); }
    return 0;
}

static float *tensor(gpt *m, const char *name) {
    int i = gpt_tensor_index(m, name);
    if (i < 0) return NULL;
    float *t = malloc(sizeof(float) * gpt_tensor_numel(m, i));
    CHECK_OK(gpt_read_tensor(m, GPT_BUF_PARAM, i, t));
    return t;
}

static void test_probe_q(void) {
    gpt *m = tiny_model(LSSAR_ATTN_SOFTMAX, LSSAR_POS_NONE, 2);
    if (!m) { CHECK(0, "model"); return; }
    int T = 8, C = 16;
    uint16_t in[8] = {1, 5, 3, 19, 0, 7, 7, 2};
    float q[8 * 16], k[8 * 16];
    grab_ctx g = {0, q, k, T * C};
    CHECK(gpt_probe_qk(m, in, 1, T, grab, &g) == 0, "probe: %s", lssar_errmsg());
    float *wte = tensor(m, "wte.0"), *lw = tensor(m, "h.0.ln_1.weight"), *lb = tensor(m, "h.0.ln_1.bias");
    float *W = tensor(m, "h.0.attn.c_attn.weight"), *b = tensor(m, "h.0.attn.c_attn.bias");
    CHECK(wte && lw && lb && W && b, "tensors by name");
    double maxerr = 0;
    for (int t = 0; t < T && wte && lw && lb && W && b; t++) {
        double x[16], mu = 0, var = 0;
        for (int c = 0; c < C; c++) { x[c] = wte[in[t] * C + c]; mu += x[c]; }
        mu /= C;
        for (int c = 0; c < C; c++) var += (x[c] - mu) * (x[c] - mu);
        double rs = 1 / sqrt(var / C + 1e-5);
        for (int c = 0; c < C; c++) x[c] = (x[c] - mu) * rs * lw[c] + lb[c];
        for (int o = 0; o < C; o++) {
            double qq = b[o], kk = b[C + o];
            for (int c = 0; c < C; c++) { qq += W[o * C + c] * x[c]; kk += W[(C + o) * C + c] * x[c]; }
            maxerr = fmax(maxerr, fmax(fabs(qq - q[t * C + o]), fabs(kk - k[t * C + o])));
        }
    }
    // float32 layernorm (|err| ~ 1e-5 of the unit-scale outputs at most, test_layers' bound for C =
    // 16 is smaller) then a 16-term dot product plus bias: |err| <= gam(17) sum |w x| + |w| . |dx|,
    // with |w| ~ 0.02 (GPT-2 init) and sum |w x| <= 16 x 0.02 x 3: about 1e-6; 1e-4 holds on any CPU
    CHECK(maxerr < 1e-4, "layer-0 q, k match a float64 recomputation (max err %g)", maxerr);
    free(wte); free(lw); free(lb); free(W); free(b);
    gpt_free(m);
}

static void test_attnstats_uniform(void) {
    // zero query weights and biases: every softmax logit is 0, rows are uniform
    gpt *m = tiny_model(LSSAR_ATTN_SOFTMAX, LSSAR_POS_ROPE, 2);
    if (!m) { CHECK(0, "model"); return; }
    int C = 16;
    for (int l = 0; l < 2; l++) {
        char nm[64];
        snprintf(nm, sizeof nm, "h.%d.attn.c_attn.weight", l);
        int i = gpt_tensor_index(m, nm);
        float *W = tensor(m, nm);
        memset(W, 0, sizeof(float) * C * C);   // the q rows come first
        CHECK_OK(gpt_write_tensor(m, GPT_BUF_PARAM, i, W));
        free(W);
        snprintf(nm, sizeof nm, "h.%d.attn.c_attn.bias", l);
        i = gpt_tensor_index(m, nm);
        float *bb = tensor(m, nm);
        memset(bb, 0, sizeof(float) * C);
        CHECK_OK(gpt_write_tensor(m, GPT_BUF_PARAM, i, bb));
        free(bb);
    }
    int T = 40, rows = 5;
    uint16_t in[80];
    for (int i = 0; i < 80; i++) in[i] = (uint16_t)(i * 3 % 20);
    attn_layer_stats st[2];
    CHECK(attn_stats(m, in, 2, T, rows, st) == 0, "stats: %s", lssar_errmsg());
    // rows i = 20 + r * 20 / 5 = 20, 24, 28, 32, 36
    double e = 0, s = 0;
    for (int r = 0; r < rows; r++) { int i = 20 + r * 4; e += log(i + 1.0); s += 1.0 / (i + 1); }
    e /= rows; s /= rows;
    for (int l = 0; l < 2; l++) {
        CHECK_CLOSE(st[l].entropy, e, 1e-4);
        CHECK_CLOSE(st[l].entropy_norm, 1.0, 1e-4);
        CHECK_CLOSE(st[l].sink, s, 1e-5);
        CHECK_CLOSE(st[l].top1, s, 1e-5);
        CHECK(st[l].rows == 2 * 2 * rows, "rows counted: %ld", st[l].rows);
    }
    gpt_free(m);
}

// softmax weights in float64 from the probe's q, k vs attn_stats on a random model
typedef struct { double e, s, t; long n; int rows; } ref_ctx;
static int ref_layer(void *vc, int layer, const float *q, const float *k, int B, int T, int NH, int HS, const lssar_attn_desc *d) {
    ref_ctx *c = vc;
    if (layer != 1) return 0;
    int HD = NH * HS, lo = T / 2, nr = T - lo;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int r = 0; r < c->rows; r++) {
                int i = lo + r * nr / c->rows;
                double x[256], mx = -1e300, z = 0;
                for (int j = 0; j <= i; j++) {
                    double dot = 0;
                    for (int a = 0; a < HS; a++) dot += (double)q[((size_t)b * T + i) * HD + h * HS + a] * k[((size_t)b * T + j) * HD + h * HS + a];
                    x[j] = dot / sqrt((double)HS);
                    mx = fmax(mx, x[j]);
                }
                for (int j = 0; j <= i; j++) z += exp(x[j] - mx);
                double H = 0, top = 0;
                for (int j = 0; j <= i; j++) { double w = exp(x[j] - mx) / z; H -= w * log(w); top = fmax(top, w); }
                c->e += H; c->s += exp(x[0] - mx) / z; c->t += top; c->n++;
            }
    return 0;
}

static void test_attnstats_reference(void) {
    gpt *m = tiny_model(LSSAR_ATTN_SOFTMAX, LSSAR_POS_ROPE, 2);
    if (!m) { CHECK(0, "model"); return; }
    // sharpen the attention so rows are far from uniform: scale the q weights up
    int i = gpt_tensor_index(m, "h.1.attn.c_attn.weight");
    float *W = tensor(m, "h.1.attn.c_attn.weight");
    for (int a = 0; a < 16 * 16; a++) W[a] *= 300;
    CHECK_OK(gpt_write_tensor(m, GPT_BUF_PARAM, i, W));
    free(W);
    int T = 48, rows = 6;
    uint16_t in[48];
    for (int a = 0; a < 48; a++) in[a] = (uint16_t)((a * 11 + 3) % 20);
    attn_layer_stats st[2];
    CHECK(attn_stats(m, in, 1, T, rows, st) == 0, "stats");
    ref_ctx c = {0, 0, 0, 0, rows};
    CHECK_OK(gpt_probe_qk(m, in, 1, T, ref_layer, &c));
    CHECK(c.n == st[1].rows, "same row count");
    CHECK_CLOSE(st[1].entropy, c.e / c.n, 1e-4);
    CHECK_CLOSE(st[1].sink, c.s / c.n, 1e-5);
    CHECK_CLOSE(st[1].top1, c.t / c.n, 1e-5);
    CHECK(st[1].entropy_norm < 0.9, "the sharpened layer is not uniform (%g)", st[1].entropy_norm);
    gpt_free(m);
}

// For every kind, the rows attnstats uses, times V, must give the kernel's own attention output.
static void test_weights_match_kernel(void) {
    const int B = 1, T = 37, H = 2, D = 8, HD = H * D;
    float *q = malloc(sizeof(float) * T * HD), *k = malloc(sizeof(float) * T * HD), *v = malloc(sizeof(float) * T * HD);
    float *out = malloc(sizeof(float) * T * HD), w[37];
    lssar_rng r;
    lssar_rng_seed(&r, 9);
    for (int i = 0; i < T * HD; i++) { q[i] = 2 * (float)lssar_rng_normal(&r); k[i] = 2 * (float)lssar_rng_normal(&r); v[i] = (float)lssar_rng_normal(&r); }
    float ss[2] = {0.7f, 1.3f};
    for (int kind = 0; kind < 4; kind++)
        for (int pi = 0; pi < (kind == LSSAR_ATTN_LSSAR ? 2 : 1); pi++) {
            lssar_attn_desc d = {.kind = (lssar_attn_kind)kind, .p = pi ? 3.0f : 15.0f, .ssmax_s = kind == LSSAR_ATTN_SSMAX ? ss : NULL};
            CHECK(lssar_attn_forward(&d, B, T, H, D, q, k, v, out) == 0, "kernel %d", kind);
            double maxerr = 0, sumerr = 0;
            for (int h = 0; h < H; h++)
                for (int i = 0; i < T; i++) {
                    CHECK_OK(attn_weights_row(&d, q, k, T, H, D, 0, h, i, w));
                    double tot = 0;
                    for (int j = 0; j <= i; j++) tot += w[j];
                    sumerr = fmax(sumerr, fabs(tot - 1));
                    for (int a = 0; a < D; a++) {
                        double y = 0;
                        for (int j = 0; j <= i; j++) y += (double)w[j] * v[(size_t)j * HD + h * D + a];
                        maxerr = fmax(maxerr, fabs(y - out[(size_t)i * HD + h * D + a]));
                    }
                }
            // both sides are float32 code of src/attn on the same rows; the weights of a row sum to 1
            // up to their normalisation's gam(T + 1) = 2.3e-6 (T = 37), and weights x V (|v| ~ 1,
            // summed in double here) differ from the kernel's float32 accumulation by gam(T) sum
            // |w v| <= 2.2e-6 plus the kernel's own weight rounding (p = 15 amplifies LSSAR's):
            // 1e-4 bounds both on every CPU
            CHECK(maxerr < 1e-4 && sumerr < 1e-4, "%s p=%g: weights x V match the kernel (max err %g, row sum err %g)",
                  lssar_attn_name((lssar_attn_kind)kind), d.p, maxerr, sumerr);
        }
    free(q); free(k); free(v); free(out);
}

// The log-log CSV scatter (orbits run's force plot): a PNG from two CSV files; a missing file is
// gnuplot's error, passed on with the PNG's name.
static void test_plot_csv_loglog(void) {
    if (!plot_available()) { printf("  gnuplot missing: plot test skipped (scripts/deps.sh installs it)\n"); return; }
    char dir[] = "/tmp/lssar-plot-test-XXXXXX", a[256], b[256], png[256];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(a, sizeof a, "%s/a.csv", dir); snprintf(b, sizeof b, "%s/b.csv", dir); snprintf(png, sizeof png, "%s/f.png", dir);
    for (int k = 0; k < 2; k++) {
        FILE *f = fopen(k ? b : a, "w");
        fprintf(f, "r,m1,m2,F_pred,F_true\n");
        for (int i = 1; i <= 20; i++) fprintf(f, "%d,1,1,%g,%g\n", i, (k + 1.0) / (i * i), 1.0 / (i * i));
        fclose(f);
    }
    const char *csv[] = {a, b}, *names[] = {"exact", "twice"};
    CHECK(plot_csv_loglog(png, "t", "x", "y", csv, names, 2, 5, 4) == 0, "plot failed: %s", lssar_errmsg());
    unsigned char magic[8] = {0};
    FILE *f = fopen(png, "rb");
    CHECK(f && fread(magic, 1, 8, f) == 8 && !memcmp(magic, "\x89PNG", 4), "%s is not a PNG", png);
    if (f) fclose(f);
    unlink(png);
    const char *missing[] = {"/nonexistent/forces.csv"};
    CHECK(plot_csv_loglog(png, "t", "x", "y", missing, names, 1, 5, 4) != 0 && strstr(lssar_errmsg(), png),
          "a missing CSV should fail naming the plot, got '%s'", lssar_errmsg());
    unlink(png); unlink(a); unlink(b); rmdir(dir);
}

// acc_norm's divisor is lm-evaluation-harness's: characters of the choice, without the delimiter
// (the byte length of " " + choice picks another answer on a few percent of HellaSwag documents).
static void test_downstream_norm_length(void) {
    CHECK(ds_norm_length(" sea") == 3.0, "' sea': %g", ds_norm_length(" sea"));
    CHECK(ds_norm_length("sea") == 3.0, "'sea': %g", ds_norm_length("sea"));
    CHECK(ds_norm_length("  two") == 4.0, "only one delimiter goes: %g", ds_norm_length("  two"));
    CHECK(ds_norm_length(" caf\xc3\xa9") == 4.0, "' cafe' with an acute e: %g", ds_norm_length(" caf\xc3\xa9"));
    CHECK(ds_norm_length(" \xe6\x97\xa5\xe6\x9c\xac") == 2.0, "two CJK characters: %g",
          ds_norm_length(" \xe6\x97\xa5\xe6\x9c\xac"));
    CHECK(ds_norm_length(" \xf0\x9f\x98\x80!") == 2.0, "an emoji and '!': %g", ds_norm_length(" \xf0\x9f\x98\x80!"));
    CHECK(ds_norm_length(" ") == 1.0 && ds_norm_length("") == 1.0, "empty choices divide by 1");
}

int main(void) {
    RUN(test_plot_csv_loglog);
    RUN(test_passkey_layout);
    RUN(test_passkey_short);
    RUN(test_passkey_mix);
    RUN(test_passkey_score);
    RUN(test_downstream_norm_length);
    RUN(test_wilson);
    RUN(test_t_interval);
    RUN(test_docwin);
    RUN(test_eval_windows);
    RUN(test_mqar);
    RUN(test_mqar_aligned_windows);
    RUN(test_probe_q);
    RUN(test_weights_match_kernel);
    RUN(test_attnstats_uniform);
    RUN(test_attnstats_reference);
    return test_summary("test_exp");
}
