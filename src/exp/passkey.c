// passkey.c - the passkey retrieval sequence, its scoring and Wilson intervals; see passkey.h.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "exp/passkey.h"

static const char *TASK = "There is an important info hidden inside a lot of irrelevant text. Find it and "
                          "memorize them. I will quiz you about the important information there.";
static const char *FILLER = " The grass is green. The sky is blue. The sun is yellow. Here we go. There and "
                            "back again.";
static const char *QUESTION = " What is the pass key? The pass key is";

static int enc(const lssar_tokenizer *t, const char *s, int32_t **ids, int *n) {
    size_t m = 0;
    int rc = lssar_encode(t, s, strlen(s), 0, ids, &m);
    if (rc) return rc;
    *n = (int)m;
    return 0;
}

const char *passkey_prompt_name(passkey_prompt p) { return p == PASSKEY_SHORT ? "short" : "full"; }

int passkey_pieces_init(passkey_pieces *pp, const lssar_tokenizer *tok, passkey_prompt prompt) {
    memset(pp, 0, sizeof *pp);
    if (!tok) return lssar_fail(LSSAR_E_NULL, "passkey: tokenizer is NULL");
    if ((unsigned)prompt > PASSKEY_SHORT)
        return lssar_fail(LSSAR_E_ARG, "passkey: prompt %d is not full or short", (int)prompt);
    pp->tok = tok;
    pp->eot = lssar_tokenizer_eot(tok);
    int rc = prompt == PASSKEY_SHORT ? 0 : enc(tok, TASK, &pp->task, &pp->ntask);
    if (!rc) rc = enc(tok, FILLER, &pp->filler, &pp->nfiller);
    if (!rc) rc = enc(tok, QUESTION, &pp->question, &pp->nquestion);
    if (rc) passkey_pieces_free(pp);
    return rc;
}

void passkey_pieces_free(passkey_pieces *pp) {
    free(pp->task); free(pp->filler); free(pp->question);
    pp->task = pp->filler = pp->question = NULL;
}

// The needle and the answer for one key.
static int key_pieces(const passkey_pieces *pp, int key, int32_t **needle, int *nneedle, int32_t **ans,
                      int *nans) {
    char buf[128];
    snprintf(buf, sizeof buf, " The pass key is %d. Remember it. %d is the pass key.", key, key);
    int rc = enc(pp->tok, buf, needle, nneedle);
    if (rc) return rc;
    snprintf(buf, sizeof buf, " %d", key);
    rc = enc(pp->tok, buf, ans, nans);
    if (rc) { free(*needle); *needle = NULL; }
    return rc;
}

int passkey_min_len(const passkey_pieces *pp) {
    int32_t *nd = NULL, *an = NULL;
    int nn = 0, na = 0;
    if (key_pieces(pp, 99999, &nd, &nn, &an, &na)) return -1;
    free(nd); free(an);
    // the longest 5-digit key's pieces (GPT-2 may split other keys into more tokens: margin 4)
    return 1 + pp->ntask + nn + pp->nquestion + na + 4;
}

int passkey_build(const passkey_pieces *pp, int n, double depth, int key, uint16_t *out, int *ans_pos,
                  int *ans_len) {
    if (key < 10000 || key > 99999)
        return lssar_fail(LSSAR_E_ARG, "passkey: key %d is not a 5-digit number", key);
    if (!(depth >= 0 && depth <= 1))
        return lssar_fail(LSSAR_E_ARG, "passkey: depth %g is outside [0, 1]", depth);
    int32_t *nd = NULL, *an = NULL;
    int nn = 0, na = 0;
    int rc = key_pieces(pp, key, &nd, &nn, &an, &na);
    if (rc) return rc;
    if (na > PASSKEY_MAX_ANS) {
        free(nd);
        free(an);
        return lssar_fail(LSSAR_E_ARG, "passkey: answer has %d tokens", na);
    }
    int fixed = 1 + pp->ntask + nn + pp->nquestion + na;
    int nf = n - fixed;   // filler tokens
    if (nf < 0) {
        free(nd); free(an);
        return lssar_fail(LSSAR_E_SIZE,
                          "passkey: a sequence of %d tokens cannot hold the prompt (needs at least %d with "
                          "this tokenizer): use a longer length",
                          n, passkey_min_len(pp));
    }
    // The needle goes in the slot nearest depth of units + 2 slots: before whole filler unit
    // 0..units-1, after the last whole unit (before the cut one), and after the cut unit, right
    // before the question (whole units come first, so every slot but the last lies between two
    // whole sentences). Training draws depth uniformly from [0, 1) (passkey_window), which reaches
    // every slot, the last one too: evaluation at 100% asks for a layout training has seen. (Until
    // 0.6 only depth 1.0 itself reached the last slot, so no training window had it, and models
    // that retrieved at every other depth failed at 100%.)
    int units = nf / pp->nfiller, slots = units + 2;
    int slot = (int)floor(depth * (slots - 1) + 0.5);
    int at = slot <= units ? slot * pp->nfiller : nf;
    int p = 0;
    out[p++] = (uint16_t)pp->eot;
    for (int i = 0; i < pp->ntask; i++) out[p++] = (uint16_t)pp->task[i];
    for (int f = 0; f <= nf; f++) {
        if (f == at)
            for (int i = 0; i < nn; i++) out[p++] = (uint16_t)nd[i];
        if (f < nf) out[p++] = (uint16_t)pp->filler[f % pp->nfiller];
    }
    for (int i = 0; i < pp->nquestion; i++) out[p++] = (uint16_t)pp->question[i];
    *ans_pos = p;
    *ans_len = na;
    for (int i = 0; i < na; i++) out[p++] = (uint16_t)an[i];
    free(nd); free(an);
    if (p != n) return lssar_fail(LSSAR_E_ARG, "passkey: internal length mismatch %d != %d", p, n);
    return 0;
}

int passkey_window(const passkey_pieces *pp, int T, lssar_rng *rng, uint16_t *window) {
    double depth = lssar_rng_uniform(rng);
    int key = 10000 + (int)lssar_rng_below(rng, 90000);
    int ap, al;
    return passkey_build(pp, T + 1, depth, key, window, &ap, &al);
}

int passkey_mix_batch(const passkey_pieces *pp, double mix, int B, int T, lssar_rng *rng,
                      uint16_t *inputs, uint16_t *targets, int *replaced) {
    if (replaced) *replaced = 0;
    if (!(mix >= 0 && mix <= 1)) return lssar_fail(LSSAR_E_ARG, "--passkey-mix %g must be in [0, 1]", mix);
    if (mix == 0) return 0;
    uint16_t *w = malloc(sizeof(uint16_t) * (T + 1));
    if (!w) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    int rc = 0;
    for (int b = 0; b < B && !rc; b++) {
        if (lssar_rng_uniform(rng) >= mix) continue;
        if ((rc = passkey_window(pp, T, rng, w))) break;
        memcpy(inputs + (size_t)b * T, w, sizeof(uint16_t) * T);
        memcpy(targets + (size_t)b * T, w + 1, sizeof(uint16_t) * T);
        if (replaced) (*replaced)++;
    }
    free(w);
    return rc;
}

/* ------------------------------------------------------ the trainer's source */
typedef struct {
    train_source base;
    lssar_tokenizer *tok;
    passkey_pieces pk;
    double mix;
    uint16_t *scratch;   // (2, cap) another rank's batch
    size_t cap;
} passkey_source;

static int pks_next_batch(void *ctx, lssar_rng *rng, int B, int T, uint16_t *inputs, uint16_t *targets) {
    passkey_source *p = ctx;
    if (!inputs) {   // another rank's batch: made in scratch, so that rng moves on the same way
        if ((size_t)B * T > p->cap) {
            uint16_t *g = realloc(p->scratch, sizeof(uint16_t) * 2 * B * T);
            if (!g) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
            p->scratch = g;
            p->cap = (size_t)B * T;
        }
        inputs = p->scratch;
        targets = p->scratch + (size_t)B * T;
    }
    int rc = p->base.next_batch(p->base.ctx, rng, B, T, inputs, targets);
    if (!rc) rc = passkey_mix_batch(&p->pk, p->mix, B, T, rng, inputs, targets, NULL);
    return rc;
}

static void pks_close(void *ctx) {
    passkey_source *p = ctx;
    if (!p) return;
    passkey_pieces_free(&p->pk);
    lssar_tokenizer_free(p->tok);
    free(p->scratch);
    free(p);
}

int passkey_train_source(void *arg, const train_source_env *env, const train_source *base,
                         train_source *out) {
    (void)arg;
    if (!env || !base || !out) return lssar_fail(LSSAR_E_NULL, "passkey_train_source: NULL argument");
    if (!(env->passkey_mix > 0)) { *out = *base; return 0; }
    const int C = env->model->channels, T = env->seq;
    if (C != 1)
        return lssar_fail(LSSAR_E_ARG, "--passkey-mix needs a text model (1 token channel); this data has %d",
                          C);
    passkey_source *p = calloc(1, sizeof *p);
    if (!p) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    p->base = *base;
    p->mix = env->passkey_mix;
    int rc = passkey_tokenizer_for_vocab(env->model->vocab, &p->tok);
    if (rc) { free(p); return rc; }
    if ((rc = passkey_pieces_init(&p->pk, p->tok, (passkey_prompt)env->passkey_prompt))) {
        lssar_tokenizer_free(p->tok);
        free(p);
        return rc;
    }
    if (T + 1 < passkey_min_len(&p->pk)) {
        rc = lssar_fail(LSSAR_E_ARG,
                        "--passkey-mix: a passkey sequence needs at least %d tokens with the %s tokenizer; "
                        "--seq is %d",
                        passkey_min_len(&p->pk), lssar_tokenizer_name(p->tok), T);
        pks_close(p);
        return rc;
    }
    out->ctx = p;
    out->next_batch = pks_next_batch;
    out->close = pks_close;
    return 0;
}

int passkey_score(const passkey_pieces *pp, const uint16_t *seq, const uint16_t *pred, int ans_pos,
                  int ans_len, double *digit_acc, int *place) {
    int all = 1;
    int32_t want[PASSKEY_MAX_ANS], got[PASSKEY_MAX_ANS];
    for (int i = 0; i < ans_len; i++) {
        want[i] = seq[ans_pos + i];
        got[i] = pred[ans_pos + i - 1];
        if (want[i] != got[i]) all = 0;
    }
    if (digit_acc || place) {
        char *ws = NULL, *gs = NULL;
        size_t wl = 0, gl = 0;
        if (digit_acc) *digit_acc = 0;
        if (!lssar_decode(pp->tok, want, ans_len, &ws, &wl) &&
            !lssar_decode(pp->tok, got, ans_len, &gs, &gl)) {
            // the key's digits are the last 5 characters of the answer " K"; compare by place
            int hits = 0, nd = 0;
            for (size_t c = 0; c < wl; c++) {
                if (ws[c] < '0' || ws[c] > '9') continue;
                int right = c < gl && gs[c] == ws[c];
                if (place && nd < PASSKEY_DIGITS) place[nd] += right;
                nd++;
                hits += right;
            }
            if (digit_acc) *digit_acc = nd ? (double)hits / nd : 0;
        }
        free(ws); free(gs);
    }
    return all;
}

double passkey_depth(int d, int depths) { return depths == 1 ? 0.5 : (double)d / (depths - 1); }

int passkey_eval(gpt *g, const passkey_pieces *pp, const int *lens, int nl, int depths, int trials, int batch,
                 uint64_t seed, int *ok_n, double *dsum_n, int *place_n, lssar_progress *pg, double pg_done) {
    if (!g || !pp || !lens || !ok_n || !dsum_n)
        return lssar_fail(LSSAR_E_NULL, "passkey_eval: NULL argument");
    if (nl < 1 || depths < 1 || trials < 1 || batch < 1)
        return lssar_fail(LSSAR_E_ARG, "passkey_eval: empty grid");
    int maxL = 0;
    for (int i = 0; i < nl; i++) if (lens[i] > maxL) maxL = lens[i];
    int B = batch < trials ? batch : trials;
    uint16_t *seq = malloc(sizeof(uint16_t) * (size_t)B * (maxL + 1)),
             *in = malloc(sizeof(uint16_t) * (size_t)B * maxL);
    uint16_t *pred = malloc(sizeof(uint16_t) * (size_t)B * maxL);
    int *apos = malloc(sizeof(int) * B), *alen = malloc(sizeof(int) * B);
    int rc = 0;
    if (!seq || !in || !pred || !apos || !alen) rc = lssar_fail(LSSAR_E_NOMEM, "out of memory");
    for (int li = 0; li < nl && !rc; li++) {
        int L = lens[li];
        if ((rc = gpt_reserve(g, B, L, 0))) break;
        for (int d = 0; d < depths && !rc; d++) {
            double dv = passkey_depth(d, depths);
            lssar_rng rng;
            lssar_rng_stream(&rng, seed, (uint64_t)li * 1000 + d);
            int ok = 0, place[PASSKEY_DIGITS] = {0};
            double dsum = 0;
            for (int t0 = 0; t0 < trials && !rc; t0 += B) {
                int b = trials - t0 < B ? trials - t0 : B;
                for (int i = 0; i < b && !rc; i++) {
                    int key = 10000 + (int)lssar_rng_below(&rng, 90000);
                    rc = passkey_build(pp, L + 1, dv, key, seq + (size_t)i * (L + 1), &apos[i], &alen[i]);
                    memcpy(in + (size_t)i * L, seq + (size_t)i * (L + 1), sizeof(uint16_t) * L);
                }
                if (rc) break;
                if ((rc = gpt_forward(g, in, NULL, b, L, NULL))) break;
                if ((rc = gpt_get_argmax(g, pred))) break;
                for (int i = 0; i < b; i++) {
                    double da = 0;
                    ok += passkey_score(pp, seq + (size_t)i * (L + 1), pred + (size_t)i * L, apos[i], alen[i],
                                        &da, place);
                    dsum += da;
                }
            }
            if (rc) break;
            int k = li * depths + d;
            ok_n[k] = ok;
            dsum_n[k] = dsum;
            if (place_n) memcpy(place_n + (size_t)k * PASSKEY_DIGITS, place, sizeof place);
            if (pg) {
                char ex[64];
                snprintf(ex, sizeof ex, "L=%d depth=%.0f%% acc=%.2f", L, 100 * dv, (double)ok / trials);
                lssar_progress_update(pg, pg_done + k + 1, ex);
            }
        }
    }
    free(seq); free(in); free(pred); free(apos); free(alen);
    return rc;
}

void wilson_interval(int k, int n, double z, double *lo, double *hi) {
    if (n <= 0) { *lo = 0; *hi = 1; return; }
    double ph = (double)k / n, z2 = z * z;
    double den = 1 + z2 / n;
    double c = (ph + z2 / (2.0 * n)) / den;
    double h = z * sqrt(ph * (1 - ph) / n + z2 / (4.0 * n * n)) / den;
    *lo = c - h < 0 ? 0 : c - h;
    *hi = c + h > 1 ? 1 : c + h;
}

int passkey_tokenizer_for_vocab(int vocab, lssar_tokenizer **out) {
    if (vocab == 257) return lssar_tokenizer_byte(out);
    if (vocab >= 50257) return lssar_tokenizer_open("gpt2", out);
    return lssar_fail(LSSAR_E_UNSUPPORTED,
                      "the passkey test needs a text model (vocabulary 257 for the byte tokenizer, or >= "
                      "50257 for GPT-2); this model has %d ids",
                      vocab);
}
