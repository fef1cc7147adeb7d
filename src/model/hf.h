/*
 * hf.h - Hugging Face transformers' GPT-2 (GPT2LMHeadModel) and GPT-NeoX (GPTNeoXForCausalLM):
 * a folder with config.json and model.safetensors, written for `from_pretrained` and read back.
 *
 * Softmax models with one token channel and a tied head convert: learned positions as GPT-2, RoPE
 * as GPT-NeoX (rotary_pct 1, sequential residual; its fused q, k, v rows are grouped per head, and
 * embed_out is written as the embedding's copy). For GPT-2: learned positions, tied head, one
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
   what differs, for a model transformers cannot hold as GPT-2 or GPT-NeoX. */
int hf_save(const gpt *m, const char *dir);
/* A new CPU model from a GPT-2 or GPT-NeoX folder of transformers (config.json +
   model.safetensors, float32). */
int hf_load(const char *dir, gpt **out);

#endif
