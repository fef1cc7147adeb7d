// generate.c - `lssar sample`: a prompt through the KV cache, then positions drawn one at a time;
// see generate.h.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lssar.h"
#include "core/util.h"
#include "exp/generate.h"
#include "model/gpt.h"

// One id from logits (V): argmax at temperature 0, else a draw from softmax(logits / temp).
static int pick(const float *logits, int V, float temp, lssar_rng *rng) {
    int best = 0;
    for (int i = 1; i < V; i++) if (logits[i] > logits[best]) best = i;
    if (temp <= 0) return best;
    double z = 0, mx = logits[best];
    for (int i = 0; i < V; i++) z += exp((logits[i] - mx) / temp);
    double u = lssar_rng_uniform(rng) * z, acc = 0;
    for (int i = 0; i < V; i++) {
        acc += exp((logits[i] - mx) / temp);
        if (u < acc) return i;
    }
    return best;   // rounding at the very end of the range
}

// --prompt: the tokenizer named, or the one the vocabulary V implies; NULL (error set) if none.
static lssar_tokenizer *text_tokenizer(const char *name, int V) {
    if (!name) name = V == 257 ? "byte" : V == 50257 || V == 50304 ? "gpt2" : NULL;
    if (!name) {
        lssar_fail(LSSAR_E_ARG,
                   "the model's vocabulary (%d) is neither byte's (257) nor GPT-2's (50257, 50304): give "
                   "--tokenizer, or the prompt as --prompt-ids",
                   V);
        return NULL;
    }
    lssar_tokenizer *t = NULL;
    if (lssar_tokenizer_open(name, &t)) return NULL;
    if (lssar_tokenizer_vocab_size(t) > V) {
        lssar_fail(LSSAR_E_ARG, "tokenizer %s has %d ids but the model only %d", name,
                   lssar_tokenizer_vocab_size(t), V);
        lssar_tokenizer_free(t);
        return NULL;
    }
    return t;
}

// Print one generated token: its id (ids mode), or its text (t given).
static void emit(const lssar_tokenizer *t, int id, int first) {
    if (!t) { printf("%s%d", first ? "" : " ", id); return; }
    int32_t one = id;
    char *txt = NULL;
    size_t len = 0;
    if (!lssar_decode(t, &one, 1, &txt, &len)) fwrite(txt, 1, len, stdout);
    lssar_free(txt);
}

// The prompt as ids (malloc'd into *own when built here): o->ids, or the text encoded, end-of-text
// alone for an empty one; then *tk prints the continuation as text.
static int prompt_ids(const generate_opts *o, const gpt_config *c, int **own, int *nids,
                      lssar_tokenizer **tk) {
    if (!o->text) { *nids = o->nids; return 0; }
    if (c->channels != 1)
        return lssar_fail(LSSAR_E_ARG, "--prompt is text, but this model has %d token channels: give "
                          "--prompt-ids", c->channels);
    int32_t *enc = NULL;
    size_t ne = 0;
    int rc = 0;
    if (!(*tk = text_tokenizer(o->tokenizer, c->vocab))) rc = LSSAR_E_ARG;
    else rc = lssar_encode(*tk, o->text, strlen(o->text), 0, &enc, &ne);
    if (!rc && !(*own = malloc(sizeof **own * (ne ? ne : 1))))
        rc = lssar_fail(LSSAR_E_NOMEM, "out of memory");
    if (!rc) {
        for (size_t i = 0; i < ne; i++) (*own)[i] = enc[i];
        if (!ne) (*own)[0] = lssar_tokenizer_eot(*tk);
        *nids = ne ? (int)ne : 1;
    }
    lssar_free(enc);
    return rc;
}

// Whole positions, ids inside the vocabulary, and no more positions than learned ones.
static int check_prompt(const generate_opts *o, const gpt_config *c, const int *ids, int nids) {
    const int C = c->channels, V = c->vocab;
    if (nids % C)
        return lssar_fail(LSSAR_E_ARG, "--prompt-ids has %d ids but the model has %d channels: give whole "
                          "positions (a multiple of %d ids, interleaved)", nids, C, C);
    for (int i = 0; i < nids; i++)
        if (ids[i] >= V)
            return lssar_fail(LSSAR_E_ARG, "--prompt-ids: id %d is outside the model's vocabulary (0..%d)",
                              ids[i], V - 1);
    const int P = nids / C;
    if (c->pos == LSSAR_POS_LEARNED && P + o->tokens > c->max_seq)
        return lssar_fail(LSSAR_E_ARG, "prompt (%d positions) + --tokens %d exceeds the %d positions this "
                          "model learned: use fewer --tokens", P, o->tokens, c->max_seq);
    return 0;
}

// The whole prompt in one decode call, then one position per call, each printed as it comes.
static int generate(gpt *m, const generate_opts *o, const int *ids, int nids, const lssar_tokenizer *tk) {
    const gpt_config *c = gpt_get_config(m);
    const int C = c->channels, V = c->vocab, P = nids / C;
    uint16_t *tok = malloc(sizeof(uint16_t) * (P > 1 ? P : 1) * C);   // (P, C) the prompt, then (C)
    float *logits = malloc(sizeof(float) * C * V);   // (C, V)
    gpt_kvcache *kv = NULL;
    lssar_rng rng;
    lssar_rng_seed(&rng, o->seed);
    int rc = !tok || !logits ? lssar_fail(LSSAR_E_NOMEM, "out of memory") : 0;
    if (!rc) rc = gpt_kvcache_create(m, 1, P + o->tokens, &kv);
    if (!rc) {
        for (int i = 0; i < P * C; i++) tok[i] = (uint16_t)ids[i];
        rc = gpt_decode(m, kv, tok, P, logits);
    }
    for (int n = 0; !rc && n < o->tokens; n++) {
        for (int ch = 0; ch < C; ch++) {
            tok[ch] = (uint16_t)pick(logits + (size_t)ch * V, V, o->temperature, &rng);
            emit(tk, tok[ch], !n && !ch);
        }
        fflush(stdout);
        if (n + 1 < o->tokens) rc = gpt_decode(m, kv, tok, 1, logits);
    }
    gpt_kvcache_free(kv);
    printf("\n");
    free(tok); free(logits);
    return rc;
}

int generate_run(const generate_opts *o, int *usage) {
    *usage = 0;
    gpt *m = NULL;
    int rc = ckpt_load_model(o->model, &o->load, &m, NULL);
    if (rc) return rc;
    const gpt_config *c = gpt_get_config(m);
    lssar_tokenizer *tk = NULL;
    int *own = NULL, nids = 0;
    rc = prompt_ids(o, c, &own, &nids, &tk);
    if (!rc) rc = check_prompt(o, c, own ? own : o->ids, nids);
    *usage = rc != 0;
    if (!rc) rc = generate(m, o, own ? own : o->ids, nids, tk);
    free(own);
    lssar_tokenizer_free(tk);
    gpt_free(m);
    return rc;
}
