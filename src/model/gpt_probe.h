/*
 * gpt_probe.h - read-only probes of a model's internals for experiments (attention statistics).
 *
 * gpt_probe_qk runs the model's own forward pass (the block forward of gpt_forward, in the model's
 * activations, reserved for B x T if they are smaller) and hands each layer's post-RoPE queries
 * and keys, copied to host memory, to a callback before the layer's attention runs, so per-layer
 * attention rows can be recomputed without a T x T matrix. The parameters are not changed; the
 * results of an earlier forward are replaced. No logits are computed.
 */
#ifndef LSSAR_GPT_PROBE_H
#define LSSAR_GPT_PROBE_H

#include <stdint.h>
#include "model/gpt.h"

/* q, k: (B, T, NH, HS) host memory, after RoPE; d: the layer's attention (kind, p, SSMax scales
   in host memory). Return
   non-zero to stop the pass (returned from gpt_probe_qk). */
typedef int (*gpt_probe_fn)(void *ctx, int layer, const float *q, const float *k, int B, int T,
                            int NH, int HS, const lssar_attn_desc *d);

/* inputs: (B, T, channels) uint16. */
int gpt_probe_qk(gpt *m, const uint16_t *inputs, int B, int T, gpt_probe_fn fn, void *ctx);

#endif
