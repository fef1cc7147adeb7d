/*
 * checkpoint.h - a training run's directory:
 *
 *   DIR/model.safetensors     the parameters, F32, named as in src/model/gpt.h; __metadata__
 *                             holds the model config, one string per field (see docs/pytorch.md):
 *                             lssar_format "gpt-v1", layers, heads, dim, vocab, channels, max_seq,
 *                             pos (rope|learned|none), attn (softmax|ssmax|lssa|lssar), p, tied
 *                             (1|0), step (optimizer steps done).
 *   DIR/trainer.safetensors   what --resume needs to continue bit-exactly: AdamW moments
 *                             "adam_m.NAME" / "adam_v.NAME" (F32, shaped like NAME), "step" (I64
 *                             [1]), "rng" (I64 [4]: the data loader's xoshiro256** state, the four
 *                             words bit-cast), and in __metadata__ (lssar_format "trainer-v1") the
 *                             schedule and batch arguments (lr, min_lr_frac, warmup, steps, batch,
 *                             seq, accum, seed, wd, clip, beta1, beta2, eps, data, val, step,
 *                             align, passkey_mix; absent in older files: 1 and 0).
 *                             Floats: the shortest decimal that reads back as the same float32.
 *
 * Each file is written atomically (temporary file, fsync, rename). Both carry the step, so a
 * crash between the two renames is detected on --resume instead of silently mixing states.
 * Loading checks everything against the config: dtype, shape, missing or unexpected tensors.
 */
#ifndef LSSAR_CHECKPOINT_H
#define LSSAR_CHECKPOINT_H

#include <stdint.h>
#include "../core/util.h"
#include "../model/gpt.h"
#include "safetensors.h"

#define CKPT_MODEL_FILE "model.safetensors"
#define CKPT_TRAINER_FILE "trainer.safetensors"

/* Everything besides the weights that decides the next step. */
typedef struct {
    float lr, min_lr_frac;   // peak learning rate; cosine floor as a fraction of it
    int warmup, steps;       // linear warmup steps; total steps the schedule spans
    int batch, seq, accum;   // micro-batch size, sequence length, micro-batches per step
    uint64_t seed;
    float wd, clip, beta1, beta2, eps;
    char data[2048], val[2048];   // shard lists used (informational; defaults on --resume)
    int align;               // windows start at multiples of this (dataloader.h)
    float passkey_mix;       // share of training windows replaced by passkey sequences (0: none)
    int64_t step;            // optimizer steps done
    lssar_rng rng;           // data cursor
} train_state;

/* Config from a model file's metadata; errors name the missing or bad field. */
int ckpt_config_from_meta(const st_file *f, gpt_config *cfg, int64_t *step);

int ckpt_save_model(const gpt *m, const char *path, int64_t step);
/* Load a model file. attn_override < 0 keeps the stored kind; otherwise the model is built with
   that kind (and p_override if > 0) - allowed only between lssa and lssar, which share every
   parameter. *step may be NULL. */
int ckpt_load_model(const char *path, int attn_override, float p_override, gpt **out, int64_t *step);

/* Trainer file: needs gpt_reserve(m, ..., train = 1) first (the AdamW buffers). */
int ckpt_save_trainer(const gpt *m, const train_state *s, const char *path);
/* Read only the state (no tensors), e.g. to compare flags before building anything. */
int ckpt_read_train_state(const char *path, train_state *s);
int ckpt_load_trainer(gpt *m, const char *path, train_state *s);

/* Both files into DIR (created if needed), model first. */
int ckpt_save(const char *dir, const gpt *m, const train_state *s);

#endif
