/*
 * mqar.h - multi-query associative recall (Zoology, Arora et al. 2023), a synthetic probe of
 * in-context retrieval: key-value pairs first, then the keys again as queries, each followed by
 * its value. The value after a query is predictable only by finding the key's earlier pair.
 *
 * Token ids: 0 filler, 1..keys the keys, keys+1..keys+values the values, keys+values+1 EOT;
 * vocabulary keys + values + 2. One sequence of n = T + 1 tokens:
 *
 *   EOT k1 v1 k2 v2 ... kP vP  0 0 q1 a1 0 0 0 q2 a2 0 ...
 *
 * P distinct keys with random values; the queries are the P keys in a random order, one placed at a
 * random offset inside each of P equal segments of the rest, so at a longer T the same P pairs
 * sit further back (a length-extrapolation probe with the task's difficulty otherwise unchanged).
 */
#ifndef LSSAR_MQAR_H
#define LSSAR_MQAR_H

#include <stdint.h>
#include "core/util.h"
#include "model/gpt.h"

typedef struct { int keys, values, pairs; } mqar_params;

static inline int mqar_vocab(const mqar_params *p) { return p->keys + p->values + 2; }

/* One sequence of n tokens; qpos[i] (pairs entries) = position of the i-th query key, its value at
   qpos[i] + 1. Error if n is too short (needs 1 + 4 pairs). */
int mqar_build(const mqar_params *p, int n, lssar_rng *rng, uint16_t *seq, int *qpos);
/* A training shard of nseq sequences of T + 1 tokens each. */
int mqar_write_shard(const char *path, const mqar_params *p, int T, int nseq, uint64_t seed);
/* Accuracy of the argmax at the query positions over nseq fresh sequences of T + 1 tokens. */
int mqar_eval(gpt *m, const mqar_params *p, int T, int nseq, int B, uint64_t seed, long *correct,
              long *total);

#endif
