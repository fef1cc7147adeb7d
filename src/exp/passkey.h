/*
 * passkey.h - Mohtashami & Jaggi's passkey retrieval test, built in token space.
 *
 * One sequence of exactly T + 1 tokens (a model sees the first T as inputs, the next T as targets):
 *
 *   [EOT] TASK  FILLER ... NEEDLE ... FILLER  QUESTION  ANSWER
 *
 *   TASK     "There is an important info hidden inside a lot of irrelevant text. Find it and
 *             memorize them. I will quiz you about the important information there."
 *   FILLER   " The grass is green. The sky is blue. The sun is yellow. Here we go. There and back
 *             again." repeated; whole repeats, then a cut repeat to reach the exact length
 *   NEEDLE   " The pass key is K. Remember it. K is the pass key."  in the slot nearest depth
 *             of the U + 2 slots (U whole filler units): before whole unit 0..U-1, after the
 *             last whole unit, and after the cut unit; depth 0 = right after TASK, 1 = right
 *             before QUESTION
 *   QUESTION " What is the pass key? The pass key is"
 *   ANSWER   " K"  (K a random 5-digit number 10000..99999)
 *
 * Each piece is encoded separately and concatenated, so every repeat of the filler has the same
 * tokens whatever the tokenizer (GPT-2 BPE merges never cross the pieces' leading spaces anyway).
 * The answer's tokens are the last ans_len tokens of the sequence; scoring is teacher-forced: the
 * model's argmax at the position before each answer token must equal it.
 */
#ifndef LSSAR_PASSKEY_H
#define LSSAR_PASSKEY_H

#include <stdint.h>
#include "lssar.h"
#include "core/util.h"
#include "model/checkpoint.h"
#include "train/train.h"

#define PASSKEY_MAX_ANS 16
#define PASSKEY_DIGITS 5   // the key K: 10000..99999

/* The prompt: FULL is the layout above; SHORT leaves out TASK (about 150 bytes), so that short
   byte-level windows hold whole filler units (at T = 320: two), and a longer window is the same
   task with more filler. Stored with a run (trainer.safetensors passkey_prompt). */
typedef enum { PASSKEY_FULL = 0, PASSKEY_SHORT = 1 } passkey_prompt;
const char *passkey_prompt_name(passkey_prompt p);   /* "full", "short" */

typedef struct {
    int32_t *task, *filler, *question;   // token ids of the fixed pieces
    int ntask, nfiller, nquestion;
    int eot;
    const lssar_tokenizer *tok;
} passkey_pieces;

/* Encode the fixed pieces of a prompt for a tokenizer. */
int passkey_pieces_init(passkey_pieces *pp, const lssar_tokenizer *tok, passkey_prompt prompt);
void passkey_pieces_free(passkey_pieces *pp);

/* The smallest T + 1 that fits one sequence (no filler) for this tokenizer; about 80 GPT-2 tokens
   or 260 bytes. */
int passkey_min_len(const passkey_pieces *pp);

/* Build one sequence of n = T + 1 tokens into out (n uint16) with the needle at depth in [0, 1]
   and key 10000 <= key <= 99999. *ans_pos receives the index in out of the answer's first token,
   *ans_len its token count (the answer fills out[ans_pos .. n-1]). */
int passkey_build(const passkey_pieces *pp, int n, double depth, int key, uint16_t *out,
                  int *ans_pos, int *ans_len);

/* For the trainer (--passkey-mix): one training window of T + 1 tokens, random depth and key drawn
   from rng. The pieces are built once (a static cache per tokenizer would hide errors, so the
   caller keeps them). Returns 0 or an lssar_err (T too short: the error names the minimum). */
int passkey_window(const passkey_pieces *pp, int T, lssar_rng *rng, uint16_t *window /* (T+1) */);

/* For the trainer: after dl_next_batch filled inputs, targets (B, T) of one channel, replace each
   window with a passkey window with probability mix (0 <= mix <= 1), drawing from the same rng
   (so a checkpointed rng state resumes exactly). *replaced (may be NULL) counts the swaps. */
int passkey_mix_batch(const passkey_pieces *pp, double mix, int B, int T, lssar_rng *rng,
                      uint16_t *inputs, uint16_t *targets, int *replaced);

/* The --passkey-mix data source, a train_source_fn (train/train.h) for train_opts.source: with
   env->passkey_mix > 0 it wraps the shard source so that each window of every batch is replaced
   by a passkey window (passkey_mix_batch) with that probability, drawing from the trainer's rng
   after the shards have drawn theirs. The tokenizer is the one the model's vocabulary implies
   (passkey_tokenizer_for_vocab). Refuses a model with more than 1 token channel and a --seq too
   short for one passkey sequence. With passkey_mix 0 the base source is returned unchanged. arg
   is unused (NULL). */
int passkey_train_source(void *arg, const train_source_env *env, const train_source *base, train_source *out);

/* Score teacher-forced predictions of one sequence: pred[t] is the model's argmax after reading
   inputs 0..t (so pred[t] predicts seq[t + 1]). Returns 1 if every answer token is right and puts
   the fraction of the key's 5 digits that the predicted text gets right at their places in
   *digit_acc (predicted tokens decoded and compared character by character); place (may be NULL,
   PASSKEY_DIGITS long) gets 1 added at each place whose digit is right. */
int passkey_score(const passkey_pieces *pp, const uint16_t *seq, const uint16_t *pred, int ans_pos,
                  int ans_len, double *digit_acc, int *place);

/* The needle depth of column d of `depths` evenly spaced from 0 to 1 (0.5 when depths is 1). */
double passkey_depth(int d, int depths);

/* Score one model over lengths x depths (cell k = li * depths + d): `trials` random keys per cell,
   `batch` sequences per forward pass, teacher-forced (passkey_score). The keys of cell (li, d) come
   from the stream (seed, li * 1000 + d) alone, so every model scored with the same seed sees the
   same keys: that is what lets `lssar passkey --model A,B,...` pool seeds trial for trial.
   ok[k] receives the successes, dsum[k] the summed digit accuracies (both nl * depths long), and
   place (may be NULL; nl * depths * PASSKEY_DIGITS long) the right digits by place: where a model
   fails (the first digit, after " is", has many look-alikes in the filler; the rest follow a digit).
   pg (may be NULL) is advanced by one per cell from pg_done. */
int passkey_eval(gpt *g, const passkey_pieces *pp, const int *lens, int nl, int depths, int trials, int batch,
                 uint64_t seed, int *ok, double *dsum, int *place, lssar_progress *pg, double pg_done);

/* Wilson score interval for k successes in n trials at z (1.96 for 95%). */
void wilson_interval(int k, int n, double z, double *lo, double *hi);

/* The tokenizer a model's vocabulary implies: 257 -> byte, >= 50257 -> gpt2; otherwise an error
   saying the passkey test needs a text model. */
int passkey_tokenizer_for_vocab(int vocab, lssar_tokenizer **out);

#define PASSKEY_MAX_LENGTHS 16
#define PASSKEY_MAX_DEPTHS 64
#define PASSKEY_MAX_MODELS 64

/* `lssar passkey`: score the models (the seeds of one configuration, checked from their metadata
   before any scoring) on the same keys, pool them per cell, print the table and write the JSON
   and the heatmap that `lssar passkey --help` describes. */
typedef struct {
    const char *model;                     // --model as given (JSON "model", the one-model title)
    char *models[PASSKEY_MAX_MODELS];      // its names, distinct
    int nmodels;
    int lens[PASSKEY_MAX_LENGTHS];         // lengths (tokens the model reads)
    int nlens;
    int depths, trials, batch;             // needle depths, keys per cell and model, batch
    uint64_t seed;                         // of the keys
    ckpt_load_opts load;                   // --attn, --p, --device
    const char *json, *plot;               // NULL: none
} passkey_opts;

/* 0, or an lssar_err (lssar_errmsg); *bad_args is set when the models or lengths do not fit the
   test (models that differ, a length too short for the prompt), found before any scoring. */
int passkey_run(const passkey_opts *o, int *bad_args);

#endif
