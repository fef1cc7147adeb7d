/*
 * gpt_dp.h - data-parallel training of one model over the job's ranks (src/core/dist.h): the
 * gradient sum, the gradient norm and the AdamW step of the trainer (src/train/train.c), which
 * runs them the same way for one process (a job of one rank) and for N.
 *
 * A step of the trainer is G micro-batches (G = accum x ranks), numbered 0..G-1 in the order one
 * process draws them; rank r computes the ones numbered a * ranks + r (a = 0..accum-1). After each
 * micro-batch's backward (gradients zeroed before it), gpt_dp_add_grads adds the ranks' gradients
 * into the step's sum. The order of every addition is fixed, and it is the order of one process:
 *   - the step's gradient sum is g_0 + g_1 + ... + g_{G-1}, added one micro-batch at a time in that
 *     order (the first one copied), however many ranks computed them;
 *   - the gradient norm is gpt_sum_squares's (gpt.h): the sum, over fixed blocks of GPT_NORM_BLOCK
 *     floats of the flat gradient in order, of each block's sum of squares (in double), the blocks
 *     being the unit of the ranks' parts too;
 *   - AdamW is elementwise.
 * So N ranks give bit for bit the weights of one process that runs accum x N micro-batches of the
 * same size, and ZeRO-1 gives bit for bit those of plain data parallelism.
 *
 * Overlap: the sum of a micro-batch's gradient starts inside its backward. gpt_dp_create hooks the
 * model's backward (grads_ready, gpt_internal.h), which says after each block which flat range is
 * final; the whole blocks in it are summed at once (a bucket), last layers first, and
 * gpt_dp_add_grads sums what is left (the embeddings, and blocks that straddle a layer boundary).
 * A sum is elementwise, so the buckets change no bit. It is on where the backend runs the sums
 * beside its compute (nn_backend's dist_wait: the CUDA backend, a second stream), and off on the
 * CPU, where the sums are synchronous: there every bucket is one more point where the ranks wait
 * for each other, for nothing hidden (bench/dist_train.sh, 2 ranks: 4.4% of a step in the
 * collectives with buckets, 1% without).
 *
 * The flat buffers (parameters, gradients, moments: gpt_internal.h) are split into ranks parts of
 * whole blocks. Rank r owns part r: it holds the step's summed gradient for that part only.
 *   zero 0: the parts are all-gathered into every rank's gradients, and every rank runs the whole
 *           AdamW step with the whole AdamW state (like PyTorch DDP);
 *   zero 1: every rank keeps AdamW moments for its part only (memory / ranks), updates its part of
 *           the parameters, and the parameters are all-gathered (llm.c's ZeRO-1).
 * Checkpoints hold the whole state: gpt_dp_gather_moments puts the whole moments in rank 0's
 * model for ckpt_save and gpt_dp_drop_moments takes them away again, so a checkpoint is the same
 * file for any number of ranks and resumes on any other.
 */
#ifndef LSSAR_GPT_DP_H
#define LSSAR_GPT_DP_H

#include "model/gpt.h"

typedef struct gpt_dp gpt_dp;

/* Collective. m reserved with train = 1 and holding its AdamW state (a resumed run: loaded);
   accum: micro-batches per rank per step (>= 1); zero: 0 or 1. */
int gpt_dp_create(gpt *m, int accum, int zero, gpt_dp **out);
void gpt_dp_free(gpt_dp *dp);
/* Collective, after the backward of this rank's micro-batch a (0-based) of the step, which must
   follow micro-batch a - 1's (the backward in between already summed most of the gradient). */
int gpt_dp_add_grads(gpt_dp *dp, int a);
/* Collective, after the last gpt_dp_add_grads of a step: the norm of the summed gradient into
   *norm (NaN if any gradient is not finite: then nothing else is done); if clip > 0 and the norm
   exceeds it, the gradient is scaled to norm clip; then one AdamW step t at rate lr, and every
   rank holds the new parameters. All of it on the backend: with norm NULL (the norm recorded,
   gpt_dp_records) nothing waits for the device in a job of one rank; with several ranks, the
   block sums of squares are gathered over the host (one wait per step). */
int gpt_dp_step(gpt_dp *dp, float clip, int t, float lr, float beta1, float beta2, float eps, float wd,
                float *norm);
/* Per-step records, so a training step needs no host sync (the trainer's --log-every): with
   steps > 0, gpt_dp_add_grads keeps its micro-batch's loss (the forward's accumulator, left on the
   backend by gpt_forward with loss NULL) and gpt_dp_step the norm (its norm may then be NULL), for
   up to `steps` steps, on the backend; gpt_dp_flush reads them in one download. 0 (the default):
   nothing is recorded. Not while steps are recorded. */
int gpt_dp_records(gpt_dp *dp, int steps);
/* Collective: the steps recorded since the last flush (*nsteps, oldest first; room for the steps
   of gpt_dp_records in loss and norm), then none. loss[i]: the sum over the step's micro-batches,
   in one process's order (rank r's a-th is the step's a * ranks + r), of each one's mean loss as
   gpt_get_loss gives it (a float), in double; norm[i]: the step's gradient norm (NaN: not finite;
   the parameters are then NaN too, since a recorded step does not wait for its norm). */
int gpt_dp_flush(gpt_dp *dp, int *nsteps, double *loss, float *norm);
/* Collective: the model's AdamW moments whole on rank 0 (zero 1), for its checkpoint; then drop
   them (every rank). The other ranks send their parts and allocate nothing. */
int gpt_dp_gather_moments(gpt_dp *dp);
void gpt_dp_drop_moments(gpt_dp *dp);
/* Floats of AdamW moments this rank keeps (2 x its part under zero 1, 2 x all of them else). */
size_t gpt_dp_moment_floats(const gpt_dp *dp);
/* Turn the buckets inside the backward on or off (the default: on where the backend has
   dist_wait). Either gives the same bits; the test build of the program turns them on
   (LSSAR_TEST_OVERLAP=1, tests/hooks.c), so the bucketed path is tested on the CPU too. */
void gpt_dp_overlap(gpt_dp *dp, int on);
/* Seconds this rank spent in the gradient and parameter collectives so far (waiting for the other
   ranks included; a job of one rank: the local copies). */
double gpt_dp_comm_seconds(const gpt_dp *dp);

#endif
