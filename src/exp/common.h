/*
 * common.h - small shared pieces of the experiment commands: writing text files atomically, glob
 * of training shards, a run directory's manifest and trainer metadata. (Loading a run directory
 * or model file is the model layer's ckpt_load_model, src/model/checkpoint.h.)
 */
#ifndef LSSAR_EXP_COMMON_H
#define LSSAR_EXP_COMMON_H

#include <cJSON.h>
#include <stdint.h>
#include "model/gpt.h"

/* Write a string to path atomically. */
int exp_write_text(const char *path, const char *text);
/* Comma-separated DIR/train_*.bin, sorted (malloc'd); error if none. */
int exp_train_shards(const char *dir, char **list);
/* sha256 hex of DIR/manifest.json into hex (or "none" if absent). */
void exp_manifest_hash(const char *dir, char hex[65]);
/* The tokenizer's vocabulary size from DIR/manifest.json (0 if unknown). */
int exp_manifest_vocab(const char *dir);
/* The fraction of passkey windows a run was trained with: trainer.safetensors metadata
   "passkey_mix" (written by `lssar train --passkey-mix`), 0 when absent. */
double exp_passkey_mix(const char *model);
/* Its passkey prompt (0 full, 1 short; 0 for runs from before the field). */
int exp_passkey_prompt(const char *model);
/* A number from a run directory's trainer.safetensors metadata (e.g. "align"); dflt when the
   directory, the file or the key is absent. */
double exp_trainer_meta(const char *model, const char *key, double dflt);
/* DIR/loss.png from DIR/log.jsonl: the training loss at every logged step and the validation
   loss at each evaluation, against the step. LSSAR_E_UNSUPPORTED without gnuplot. */
int exp_plot_train_log(const char *dir);
/* Parse "a,b,c" of positive numbers into out (max entries); returns the count or -1. */
int exp_parse_doubles(const char *s, double *out, int max);

#endif
