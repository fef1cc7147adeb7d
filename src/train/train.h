/*
 * train.h - the training loop behind `lssar train`, callable from other commands and tests.
 *
 * One optimizer step: for each of `accum` micro-batches, draw `batch` random windows
 * (dataloader.h), forward, backward with grad_scale 1/accum; then clip the global gradient norm
 * to `clip`, and one AdamW step at the scheduled learning rate:
 *
 *   step t = 1..steps:  lr(t) = lr * t / warmup                          for t <= warmup
 *                       lr(t) = lr_min + (lr - lr_min) (1 + cos(pi u)) / 2 after, u = (t - warmup) / (steps - warmup)
 *                       lr_min = min_lr_frac * lr  (default 0.1: cosine decay to 10%)
 *
 * A run is deterministic for a fixed thread count: the model is initialised from `seed`, the data
 * windows come from an RNG stream of `seed` that is saved in every checkpoint. Stopping at step N
 * (--stop-at) and resuming gives bit-identical weights to an uninterrupted run, because the
 * schedule spans `steps` in both (a resumed run keeps the stored schedule unless --steps changes
 * it, which then stretches the cosine from the resume point on).
 *
 * A NaN or infinite loss or gradient norm stops the run before the optimizer step with
 * LSSAR_E_NAN; nothing is saved then, so the last checkpoint in `out` stays the last good one.
 */
#ifndef LSSAR_TRAIN_H
#define LSSAR_TRAIN_H

#include <stdint.h>
#include "../model/gpt.h"
#include "checkpoint.h"

typedef struct {
    const char *data;      // comma-separated training shards (on --resume: NULL = the stored ones)
    const char *val;       // validation shard or NULL
    const char *out;       // run directory
    // model (ignored on resume: the checkpoint's config is used)
    lssar_attn_kind attn;
    float p;
    gpt_pos pos;
    int layers, heads, dim;
    int vocab;             // 0: 50257 (GPT-2) if every id fits, else an error asking for --vocab
    int untied;
    int align;             // windows start at multiples of this (1: anywhere; orbits: 1000)
    float passkey_mix;     // replace this share of training windows by passkey sequences (1 channel text)
    // schedule and batch (ignored on resume except steps)
    float lr, min_lr_frac, wd, clip, beta1, beta2, eps;
    int warmup;            // < 0: 10% of steps
    int steps;             // schedule length, required (>= 1); on resume 0 keeps the stored one
    int batch, seq, accum;
    uint64_t seed;
    // run control
    int stop_at;           // > 0: stop (and save) after this step, keeping the schedule of `steps`
    int eval_every;        // > 0: validation loss every this many steps (always at the end)
    int eval_batches;      // validation batches per evaluation
    int save_every;        // > 0: checkpoint every this many steps (always at the end)
    int threads;           // > 0: OpenMP and OpenBLAS threads
    int resume;
    int override_optim;    // on resume: lr, min_lr_frac, warmup, wd, clip, betas, eps from here
    int quiet;             // no progress lines (tests)
} train_opts;

/* Defaults that match `lssar train --help`. */
void train_opts_default(train_opts *o);

typedef struct {
    int64_t step;          // optimizer steps done when the run ended
    float train_loss;      // mean micro-batch loss of the last step
    double val_loss;       // last validation loss (NaN if none)
    double seconds;
} train_result;

int train_run(const train_opts *o, train_result *r);

/* The schedule above; step is 1-based. */
float train_lr(const train_state *s, int64_t step);

#endif
