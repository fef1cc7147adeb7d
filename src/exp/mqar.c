// mqar.c - multi-query associative recall sequences and their scoring; see mqar.h.
#include <stdlib.h>
#include <string.h>
#include "data/shard.h"
#include "exp/mqar.h"

int mqar_build(const mqar_params *p, int n, lssar_rng *rng, uint16_t *seq, int *qpos) {
    int P = p->pairs;
    if (P < 1 || p->keys < P || p->values < 1)
        return lssar_fail(LSSAR_E_ARG,
                          "mqar: need 1 <= pairs <= keys and values >= 1 (got pairs %d, keys %d, values %d)",
                          P, p->keys, p->values);
    int rest = n - 1 - 2 * P, seg = P ? rest / P : 0;
    if (seg < 2)
        return lssar_fail(LSSAR_E_SIZE, "mqar: %d tokens are too few for %d pairs (need at least %d)", n, P,
                          1 + 4 * P);
    int *key = malloc(sizeof(int) * p->keys), *val = malloc(sizeof(int) * P);
    if (!key || !val) { free(key); free(val); return lssar_fail(LSSAR_E_NOMEM, "out of memory"); }
    for (int i = 0; i < p->keys; i++) key[i] = i;
    for (int i = 0; i < P; i++) {   // partial Fisher-Yates: P distinct keys
        int j = i + (int)lssar_rng_below(rng, p->keys - i);
        int t = key[i]; key[i] = key[j]; key[j] = t;
        val[i] = (int)lssar_rng_below(rng, p->values);
    }
    int pos = 0;
    seq[pos++] = (uint16_t)(p->keys + p->values + 1);
    for (int i = 0; i < P; i++) {
        seq[pos++] = (uint16_t)(1 + key[i]);
        seq[pos++] = (uint16_t)(1 + p->keys + val[i]);
    }
    for (int t = pos; t < n; t++) seq[t] = 0;
    // query order: a random permutation of the pairs
    int *ord = malloc(sizeof(int) * P);
    if (!ord) { free(key); free(val); return lssar_fail(LSSAR_E_NOMEM, "out of memory"); }
    for (int i = 0; i < P; i++) ord[i] = i;
    for (int i = P - 1; i > 0; i--) {
        int j = (int)lssar_rng_below(rng, i + 1);
        int t = ord[i];
        ord[i] = ord[j];
        ord[j] = t;
    }
    for (int i = 0; i < P; i++) {
        int at = pos + i * seg + (int)lssar_rng_below(rng, seg - 1);
        seq[at] = (uint16_t)(1 + key[ord[i]]);
        seq[at + 1] = (uint16_t)(1 + p->keys + val[ord[i]]);
        qpos[i] = at;
    }
    free(key); free(val); free(ord);
    return 0;
}

int mqar_write_shard(const char *path, const mqar_params *p, int T, int nseq, uint64_t seed) {
    shard_writer w;
    int rc = shard_writer_open(&w, path, 1, mqar_vocab(p));
    if (rc) return rc;
    uint16_t *seq = malloc(sizeof(uint16_t) * (T + 1));
    int *qpos = malloc(sizeof(int) * p->pairs);
    if (!seq || !qpos) {
        free(seq);
        free(qpos);
        shard_writer_abort(&w);
        return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    }
    lssar_rng rng;
    lssar_rng_seed(&rng, seed);
    for (int i = 0; i < nseq && !rc; i++) {
        rc = mqar_build(p, T + 1, &rng, seq, qpos);
        if (!rc) rc = shard_writer_append(&w, seq, T + 1);
    }
    free(seq); free(qpos);
    if (rc) { shard_writer_abort(&w); return rc; }
    return shard_writer_close(&w);
}

int mqar_eval(gpt *m, const mqar_params *p, int T, int nseq, int B, uint64_t seed, long *correct,
              long *total) {
    *correct = 0; *total = 0;
    if (mqar_vocab(p) > gpt_get_config(m)->vocab)
        return lssar_fail(LSSAR_E_ARG, "mqar: the model has %d ids but the task needs %d",
                          gpt_get_config(m)->vocab, mqar_vocab(p));
    if (B > nseq) B = nseq;
    int rc = gpt_reserve(m, B, T, 0);
    if (rc) return rc;
    uint16_t *seq = malloc(sizeof(uint16_t) * (size_t)B * (T + 1)),
             *in = malloc(sizeof(uint16_t) * (size_t)B * T);
    uint16_t *pred = malloc(sizeof(uint16_t) * (size_t)B * T);
    int *qpos = malloc(sizeof(int) * (size_t)B * p->pairs);
    if (!seq || !in || !pred || !qpos) {
        free(seq);
        free(in);
        free(pred);
        free(qpos);
        return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    }
    lssar_rng rng;
    lssar_rng_seed(&rng, seed);
    for (int s0 = 0; s0 < nseq && !rc; s0 += B) {
        int b = nseq - s0 < B ? nseq - s0 : B;
        for (int i = 0; i < b && !rc; i++) {
            rc = mqar_build(p, T + 1, &rng, seq + (size_t)i * (T + 1), qpos + i * p->pairs);
            memcpy(in + (size_t)i * T, seq + (size_t)i * (T + 1), sizeof(uint16_t) * T);
        }
        if (rc) break;
        if ((rc = gpt_forward(m, in, NULL, b, T, NULL))) break;
        if ((rc = gpt_get_argmax(m, pred))) break;
        for (int i = 0; i < b; i++)
            for (int q = 0; q < p->pairs; q++) {
                int at = qpos[i * p->pairs + q];   // the value is seq[at + 1], predicted at position at
                *correct += pred[(size_t)i * T + at] == seq[(size_t)i * (T + 1) + at + 1];
                (*total)++;
            }
    }
    free(seq); free(in); free(pred); free(qpos);
    return rc;
}
