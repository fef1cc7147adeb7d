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
 * The metadata keys of both files are listed once, in one table per file (checkpoint.c), which
 * drives both writing and reading.
 *
 * Layer: model (src/model). It uses core and the model itself, never train/data/exp/cli; the
 * trainer state below is only a record of numbers, its meaning belongs to src/train.
 */
#ifndef LSSAR_CHECKPOINT_H
#define LSSAR_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>
#include "core/util.h"
#include "model/gpt.h"
#include "model/safetensors.h"

#define CKPT_MODEL_FILE "model.safetensors"
#define CKPT_TRAINER_FILE "trainer.safetensors"

/* The one resolver of a model argument: a run directory means DIR/model.safetensors, anything
   else is taken as the model file itself. Writes the file's path into out (n bytes) and checks
   that it can be opened: LSSAR_E_IO "no model at PATH: cannot open it (...)" otherwise, with the
   fix; LSSAR_E_ARG if the path does not fit. */
int ckpt_model_path(const char *path, char *out, size_t n);

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
    int passkey_prompt;      // their prompt (0 full, 1 short; absent in older files: 0)
    int64_t step;            // optimizer steps done
    lssar_rng rng;           // data cursor
} train_state;

/* Config from a model file's metadata; errors name the missing or bad field. */
int ckpt_config_from_meta(const st_file *f, gpt_config *cfg, int64_t *step);

int ckpt_save_model(const gpt *m, const char *path, int64_t step);
/* How to build the loaded model. A zeroed struct (or NULL) loads it as trained, on the CPU. */
typedef struct {
    int set_attn;            // 1: build it with `attn` instead of the stored kind - allowed only
    lssar_attn_kind attn;    //    between lssa and lssar, which share every parameter
    float p;                 // > 0: override the LSSAR power; 0 keeps it
    lssar_device device;     // where the model lives (gpt_config.device)
} ckpt_load_opts;

/* Load a model from a run directory or a model file (resolved by ckpt_model_path). *step may be
   NULL. */
int ckpt_load_model(const char *path, const ckpt_load_opts *o, gpt **out, int64_t *step);

/* Trainer file: needs gpt_reserve(m, ..., train = 1) first (the AdamW buffers). */
int ckpt_save_trainer(const gpt *m, const train_state *s, const char *path);
/* Read only the state (no tensors), e.g. to compare flags before building anything. */
int ckpt_read_train_state(const char *path, train_state *s);
int ckpt_load_trainer(gpt *m, const char *path, train_state *s);

/* Both files into DIR (created if needed), model first. */
int ckpt_save(const char *dir, const gpt *m, const train_state *s);

#endif
