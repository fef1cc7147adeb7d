/*
 * dataloader.h - random training windows from one or more token shards (src/data/shard.h).
 *
 * A window is T+1 consecutive positions (all C channels): inputs are the first T, targets the
 * next T. Windows are drawn uniformly over every valid start of every shard (a shard with n
 * positions has n - T starts), so bigger shards are sampled proportionally. With align = A > 1 a
 * window starts only at multiples of A: data made of fixed-length sequences (the orbits' 1000-row
 * systems, an associative-recall task) is then read whole sequences at a time, as it was written. The only
 * state is the caller's lssar_rng, which the trainer saves in its checkpoint: that makes the data cursor
 * exact on --resume.
 */
#ifndef LSSAR_DATALOADER_H
#define LSSAR_DATALOADER_H

#include <stddef.h>
#include <stdint.h>
#include "../core/util.h"
#include "../data/shard.h"

typedef struct {
    shard *shards; int n;
    int *max_token;          // per shard: the largest token id in it
    int channels;            // C, the same in every shard
    int T;
    int align;               // windows start at multiples of this (1: anywhere)
    uint64_t *starts;        // per shard: valid window starts
    uint64_t total_starts;   // sum of starts
} dataloader;

/* Open a comma-separated list of shards for windows of T+1 positions. Errors (named file): a
   missing or damaged shard, channel counts that differ, a shard shorter than T+1 positions.
   `flag` ("--data") is named in messages. align >= 1 (see above). */
int dl_open(dataloader *d, const char *paths, int T, int align, const char *flag);
void dl_close(dataloader *d);
/* Largest token id over all shards. */
int dl_max_token(const dataloader *d);
/* The vocabulary the shards' headers record (the largest; 0 when none records one). */
int dl_vocab(const dataloader *d);
/* Every token id must be < vocab; the error names the file, the id and the fix. */
int dl_check_vocab(const dataloader *d, int vocab, const char *flag);
/* B random windows: inputs, targets (B, T, C). inputs = targets = NULL only draws them (the rng
   moves on as if it had read them: the windows of another rank, src/train/train.c). */
void dl_next_batch(dataloader *d, lssar_rng *rng, int B, uint16_t *inputs, uint16_t *targets);

/* Largest token id of a single open shard (scans it). */
int shard_max_token(const shard *s);

#endif
