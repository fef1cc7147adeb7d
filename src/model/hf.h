/*
 * hf.h - Hugging Face transformers' GPT-2 (GPT2LMHeadModel) and GPT-NeoX (GPTNeoXForCausalLM):
 * a folder with config.json and model.safetensors, written for `from_pretrained` and read back.
 *
 * Softmax models with one token channel and a tied head convert to transformers' own classes:
 *   - learned positions as GPT-2. Its Conv1D keeps weights (in, out), the transpose of lssar's
 *     (out, in); names get the "transformer." prefix. lssar's blocks are GPT-2's (pre-LayerNorm,
 *     eps 1e-5, GELU's tanh approximation, q.k / sqrt(D)). Reading accepts names without the prefix
 *     (the Hub's gpt2) and skips the attention-mask buffers (attn.bias) of older files;
 *   - RoPE as GPT-NeoX (rotary_pct 1, the model's base, sequential residual): its fused q, k, v rows
 *     are grouped per head, and embed_out is written as the embedding's copy.
 * Every other text model is written as lssar's own checkpoint with the modelling file
 * python/lssar/modeling_lssar.py (model_type "lssar", for trust_remote_code) and read back as such.
 * Configs lssar's blocks do not compute (another activation or epsilon, an untied head, other
 * attention scaling, parallel residual, partial rotary) are refused with the field named.
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
