/*
 * hf.h - Hugging Face transformers' GPT-2 (GPT2LMHeadModel): a folder with config.json and
 * model.safetensors, written for `from_pretrained` and read back.
 *
 * Only lssar models of GPT-2's shape convert: softmax attention, learned positions, tied head, one
 * token channel (lssar's blocks are GPT-2's: pre-LayerNorm with eps 1e-5, GELU with the tanh
 * approximation, q.k / sqrt(D)). transformers' Conv1D keeps its weights (in, out), the transpose of
 * lssar's (out, in) ones; every tensor name gets the "transformer." prefix. Reading accepts names
 * with or without that prefix (the Hub's gpt2 files have none), skips the attention-mask buffers
 * (attn.bias, attn.masked_bias) of older files, and refuses configs lssar's blocks do not compute
 * (another activation or epsilon, untied head, scaled or reordered attention).
 */
#ifndef LSSAR_MODEL_HF_H
#define LSSAR_MODEL_HF_H

#include "model/gpt.h"

/* Write dir/config.json and dir/model.safetensors (dir is created). LSSAR_E_UNSUPPORTED, naming
   what differs, for a model of another shape than GPT-2's. */
int hf_save(const gpt *m, const char *dir);
/* A new CPU model from a GPT-2 folder of transformers (config.json + model.safetensors, float32). */
int hf_load(const char *dir, gpt **out);

#endif
