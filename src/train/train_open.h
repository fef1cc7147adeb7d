/*
 * train_open.h - one run of train_run, from its opening to its end: train_open (train_open.c)
 * checks the options, takes the run directory, builds or loads the model and opens the data;
 * train_run's step loop (train.c) uses what it made, and train_close (train.c) frees it. Internal
 * to the trainer.
 */
#ifndef LSSAR_TRAIN_OPEN_H
#define LSSAR_TRAIN_OPEN_H

#include <stdint.h>
#include <stdio.h>
#include "train.h"
#include "eval.h"

typedef struct {
    const train_opts *o;
    int rank, ranks, lead, quiet;   // lead: rank 0, which locks, logs, prints and saves
    gpt *m;
    gpt_dp *dp;
    const gpt_config *cfg;
    train_state s;                  // what a checkpoint stores; s.step: the last step done
    dataloader dl;                  // the training shards
    shard val;                      // the validation shard, if have_val
    int have_val;
    train_source src;               // where batches come from: the shards, or o->source's wrap of them
    int B, T, C, accum;             // the run's batch, length, channels, micro-batches per rank
    uint16_t *in, *tg;              // (B, T, C) a micro-batch's inputs and targets
    FILE *logf;                     // DIR/log.jsonl (lead; NULL: none)
    char lp[4096];                  // its path
    int locked;                     // this run holds DIR's lock
    int64_t saved_step;             // the step of the checkpoint in DIR (-1: none yet)
} train_ctx;

/* Opens the run o describes into c (collective: the same result on every rank). On an error c
   holds what was made so far, for train_close. */
int train_open(train_ctx *c, const train_opts *o);
/* Frees what train_open made and returns rc, or the error of closing the log if rc is 0. */
int train_close(train_ctx *c, int rc);

#endif
