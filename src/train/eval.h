/*
 * eval.h - deterministic evaluation: mean next-token loss of a model on a shard at length T.
 *
 * Windows are the consecutive, non-overlapping windows from the start of the shard: window k
 * covers positions [kT, kT + T] (T inputs, the next T targets), k = 0, 1, ... up to max_windows
 * (0: every window that fits). The same shard and T give the same windows every time, so numbers
 * from different runs and attention kinds are comparable.
 */
#ifndef LSSAR_EVAL_H
#define LSSAR_EVAL_H

#include <stddef.h>
#include "data/shard.h"
#include "model/gpt.h"

typedef struct {
    double loss;       // mean cross-entropy per token (nats), over windows, positions, channels
    size_t tokens;     // targets counted (windows x T x channels)
    int windows;
} eval_result;

/* Number of windows of T+1 positions in a shard of n positions. */
int eval_num_windows(const shard *s, int T);
/* Evaluate in batches of up to B windows. per_pos (T doubles, may be NULL) receives the mean loss
   at each position. Errors: channels differ from the model, T too long for the shard (or for
   learned positions), a token id >= vocab (names the file). */
int eval_shard(gpt *m, const shard *s, int T, int B, int max_windows, eval_result *r, double *per_pos);

#endif
