/*
 * train.h - the training loop behind `lssar train`, callable from other commands and tests.
 *
 * One optimizer step: for each of `accum` micro-batches, draw `batch` random windows
 * (dataloader.h), forward, backward with grad_scale 1/accum; then clip the global gradient norm
 * to `clip`, and one AdamW step at the scheduled learning rate:
 *
 *   step t = 1..steps:  lr(t) = lr * t / warmup                          for t <= warmup
 *                       lr(t) = lr_min + (lr - lr_min) (1 + cos(pi u)) / 2 after, u = (t - warmup) / (steps -
 * warmup) lr_min = min_lr_frac * lr  (default 0.1: cosine decay to 10%)
 *
 * A run is deterministic for a fixed thread count: the model is initialised from `seed`, the data
 * windows come from an RNG stream of `seed` that is saved in every checkpoint. Stopping at step N
 * (--stop-at) and resuming gives bit-identical weights to an uninterrupted run, because the
 * schedule spans `steps` in both (a resumed run keeps the stored schedule unless --steps changes
 * it, which then stretches the cosine from the resume point on).
 *
 * Data parallel (`mpirun -np N lssar train`, src/core/dist.h, src/model/gpt_dp.h): --batch and
 * --accum are per rank, so a step is accum x N micro-batches of `batch` windows, drawn in the order
 * one process with --accum accum x N draws them; rank r computes micro-batches a * N + r. The
 * checkpoint stores the step's micro-batches (accum x N) as its accum, so it resumes on any rank
 * count M that divides it, with the same global batch; N ranks give bit for bit the run of one
 * process with accum x N (gpt_dp.h says why). Rank 0 alone takes the lock, writes the log, the
 * progress lines and the checkpoints; every rank reads the data and, on --resume, the checkpoint
 * (a shared file system, or the same paths on every machine). An error on any rank stops every
 * rank with that rank's message.
 *
 * A NaN or infinite loss or gradient norm stops the run with LSSAR_E_NAN, naming the first step
 * that had one; nothing is saved then, so the last checkpoint in `out` stays the last good one.
 *
 * The device and the host. A step waits for nothing on the device: the loss of each micro-batch
 * stays in the backend's accumulator, the gradient norm and the clip are computed there
 * (gpt_dp.h), and the next micro-batch's tokens are drawn and staged (gpt_prefetch: on CUDA a copy
 * from page-locked memory on a second stream) while the current one computes. Every `log_every`
 * steps the steps' losses and norms are read back in one download (and, with several ranks,
 * exchanged), and only then logged (one line per step, its "ms" the interval's wall time / its
 * steps) and checked for NaN, in step order. An interval also ends before every checkpoint and
 * validation and at the end, so neither ever follows a bad step. The numbers are the same for any
 * log_every, bit for bit: it only moves the points where the host looks. (With several ranks a
 * step also downloads its gradient norm's block sums once, to gather them over the host.)
 *
 * Batches come from a train_source (below): the trainer opens the shards of `data` as the base
 * source and knows nothing else about the data. Anything that changes the batches (the passkey
 * windows of --passkey-mix, src/exp/passkey.h) is a source the caller hands in through
 * train_opts.source, which wraps the base source once the model is known.
 */
#ifndef LSSAR_TRAIN_H
#define LSSAR_TRAIN_H

#include <stddef.h>
#include <stdint.h>
#include "../core/util.h"
#include "../model/gpt.h"
#include "../model/checkpoint.h"
#include "../model/gpt_dp.h"
#include "dataloader.h"
#include "rundir.h"

/* ------------------------------------------------------------ data sources */
/* A source of training batches. next_batch fills inputs and targets (B, T, C) with B windows
   (targets = inputs shifted by one position) and takes every random number from rng: the trainer
   saves rng in its checkpoints, so a resumed run continues with the same batches. With inputs =
   targets = NULL it fills nothing but takes the same random numbers (a batch of another rank).
   close (may be NULL) frees ctx. */
typedef struct {
    void *ctx;
    int (*next_batch)(void *ctx, lssar_rng *rng, int B, int T, uint16_t *inputs, uint16_t *targets);
    void (*close)(void *ctx);
} train_source;

/* The shard dataloader (dataloader.h) as a source; it stays owned by the caller (close is NULL). */
train_source train_shard_source(dataloader *d);

/* What a source builder learns before the first batch. */
typedef struct {
    const gpt_config *model;   // vocab and channels of the model being trained
    int batch, seq;            // B and T of every batch
    float passkey_mix;         // the run's passkey share (fresh: train_opts; resumed: the checkpoint's)
    int passkey_prompt;        // and its prompt (passkey_prompt of src/exp/passkey.h)
    int quiet;
} train_source_env;

/* Builds the run's source on top of `base` (the shards). *out = *base keeps it unchanged; a
   source that wraps base must not close it. Returns 0 or an lssar_err (with lssar_fail). */
typedef int (*train_source_fn)(void *arg, const train_source_env *env, const train_source *base,
                               train_source *out);

/* ---------------------------------------------------- schedule and optimizer */
/* The learning-rate schedule of the header comment: linear warmup to lr over `warmup` steps (none
   if 0), then cosine decay to lr_min at `steps`; step is 1-based, past `steps` it stays at lr_min. */
typedef struct {
    double lr, lr_min;
    int64_t warmup, steps;
} train_schedule;
double train_lr_at(const train_schedule *sc, int64_t step);
/* The schedule a train_state stores (lr_min = min_lr_frac x lr). */
train_schedule train_schedule_of(const train_state *s);

/* AdamW with the trainer's conventions: PyTorch's formula, decoupled weight decay wd on 2-D weight
   matrices only (gpt_adamw_step for the model's tensors). */
typedef struct {
    float beta1, beta2, eps, wd;
} train_adamw;
/* A tensor trained beside a model (a probe's regression head): host memory, its own AdamW moments
   m and v (n floats each, zero at the start), its own learning rate, decayed only if decay. */
typedef struct {
    float *param;
    const float *grad;
    float *m, *v;
    size_t n;
    float lr;
    int decay;
} train_tensor;
/* One AdamW step t (1, 2, ...): the model (may be NULL) at learning rate lr, then each of the
   n_extra tensors at its own rate, all with the hyper-parameters h. */
int train_adamw_step(gpt *m, float lr, const train_tensor *extra, int n_extra, int64_t t,
                     const train_adamw *h);

typedef struct {
    const char *data;      // comma-separated training shards (on --resume: NULL = the stored ones)
    const char *val;       // validation shard or NULL
    const char *out;       // run directory
    // The model of a fresh run; on resume the checkpoint's, but for model.device, which applies to
    // both. model.vocab 0: the shards' recorded vocabulary, else 50257 (GPT-2) if every id fits;
    // model.channels and max_seq are ignored (the shards' and seq, set when the run opens).
    gpt_config model;
    int ordinal;           // > 0: ids 0..ordinal-1 are ordered bins, embeddings start as sinusoids
                           // of the id (gpt_init_ordinal); fresh runs only, resume keeps the weights
    int align;             // windows start at multiples of this (1: anywhere; orbits: 1000)
    float passkey_mix;     // share of training windows the source replaces by passkey sequences
    int passkey_prompt;    // their prompt: 0 full, 1 short (src/exp/passkey.h)
                           // (recorded in the checkpoint; > 0 needs a source that does it)
    train_source_fn source;   // NULL: batches straight from the shards; else builds the run's source
    void *source_arg;      // passed to source
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
    int zero;              // data parallel (mpirun -np N): 1 shards the AdamW state (ZeRO-1)
    int recompute;         // 1: recompute the blocks' activations in the backward (gpt_set_recompute):
                           // less activation memory, up to 4/3 the FLOPs, the same bits; fresh and
                           // resumed runs alike (not in the checkpoint)
    int log_every;         // read the losses and norms back every this many steps (0 or 1: every
                           // step); the log still has one line per step, the results are the same
} train_opts;

/* Defaults that match `lssar train --help`. */
void train_opts_default(train_opts *o);
typedef struct {
    int64_t step;          // optimizer steps done when the run ended
    float train_loss;      // mean micro-batch loss of the last step (NaN when no step ran)
    double val_loss;       // last validation loss (NaN if none)
    double seconds;
} train_result;

int train_run(const train_opts *o, train_result *r);

/* Test seams of train_run: points where a test injects a fault (a NaN, a killed rank) through the
   real trainer. All NULL in the library and the program; the test build of the program sets them
   (tests/hooks.c), and so may a test program. */
typedef struct {
    void (*step_start)(int64_t step);                    // before the step's first micro-batch
    int (*grads_done)(gpt *m, int64_t step, int micro);  // after each micro-batch's backward
    double (*step_loss)(int64_t step, double loss);      // the step's summed loss -> the one checked
    void (*dp_ready)(gpt_dp *dp);                        // the data-parallel state, once made
} train_hooks;
extern train_hooks train_test_hooks;

/* The schedule above for a train_state; step is 1-based (train_lr_at of train_schedule_of). */
float train_lr(const train_state *s, int64_t step);

#endif
