/*
 * eval.h - deterministic evaluation: mean next-token loss of a model on a shard at length T.
 *
 * Windows start every T tokens from the start of the shard: window k covers positions
 * [kT, kT + T] (T inputs, the next T targets; its last token is window k + 1's first), k = 0, 1, ... up to
 * max_windows (0: every window that fits). The same shard and T give the same windows every time, so numbers
 * from different runs and attention kinds are comparable.
 */
#ifndef LSSAR_EVAL_H
#define LSSAR_EVAL_H

#include <stddef.h>
#include "data/shard.h"
#include "model/checkpoint.h"
#include "model/gpt.h"

typedef struct {
    double loss;       // mean cross-entropy per token (nats), over windows, positions, channels
    size_t tokens;     // targets counted (windows x T x channels)
    int windows;
} eval_result;

/* Number of windows of T+1 positions in a shard of n positions. */
int eval_num_windows(const shard *s, int T);
/* Evaluate in batches of up to B windows, in this process alone (not a collective: training's
   validation calls it on rank 0 only). per_pos (T doubles, may be NULL) receives the mean loss
   at each position. Errors: channels differ from the model, T too long for the shard (or for
   learned positions), a token id >= vocab (names the file). */
int eval_shard(gpt *m, const shard *s, int T, int B, int max_windows, eval_result *r, double *per_pos);
/* The same, a collective: the batches are split over the ranks (src/core/dist.h) and every rank
   gets the whole result, bit for bit what eval_shard gives in one process (see eval_windows).
   An error on any rank is every rank's ("rank R: ..."). */
int eval_shard_ranks(gpt *m, const shard *s, int T, int B, int max_windows, eval_result *r, double *per_pos);

/* The one evaluation loop under both, and under exp_eval_windows (src/exp/docwin.h): the windows
   starting at starts[0..n) (each T + 1 positions of s: T inputs, T targets) in batches of B
   (batch k: windows kB .. kB + B - 1; the last may be short). With shared = 1 it is a collective:
   whole batches are split over the ranks (lssar_dist_share over the batches), so every forward
   pass holds the same windows as in one process and its bits do not depend on the rank count;
   with shared = 0 this process does every batch. On return, on every rank: win[w] (n doubles) =
   the sum of window w's T x C losses (in position, channel order); per_pos (T doubles, may be NULL)
   = at each position the sum over all windows of their channel-summed loss, added batch by batch
   in batch order. Every number is thus the same for any rank count. */
int eval_windows(gpt *m, const shard *s, const size_t *starts, int n, int T, int B, int shared,
                 double *win, double *per_pos);

/* `lssar eval`: the model's mean loss at each length on a shard's first windows (a collective under
   mpirun: each length's batches split over the ranks), the table on stdout, and the JSON rank 0
   writes (`lssar eval --help`). 0, or an lssar_err whose message names the flag it is about;
   *usage is set when a length is past the model's learned positions. */
typedef struct {
    const char *model, *data, *json;   // json: NULL for none
    const int *seqs;                   // lengths
    int nseqs;
    int batches, batch;                // batches per length (0: every window), windows per batch
    int per_position;                  // the loss at every position in the JSON
    ckpt_load_opts load;               // --attn, --p, --device
} eval_run_opts;
int eval_run(const eval_run_opts *o, int *usage);

#endif
