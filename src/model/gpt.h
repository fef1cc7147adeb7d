/*
 * gpt.h - the GPT-2-style model: pre-LayerNorm blocks, GELU(tanh) MLP 4x, one of four attention
 * kinds, RoPE / learned / no positions, C token channels per position (one embedding table per
 * channel, summed; one output head per channel), AdamW state kept beside the parameters.
 *
 * Backend seam: the model's tensors live in the memory of its backend (nn/backend.h; chosen by
 * cfg.device), and every operation on them is a backend call. Callers above this level (trainer,
 * CLI, experiments) move data only through the copy-in / copy-out functions below, in host
 * memory, never through the model's pointers, so a CUDA backend keeps every buffer on the device.
 *
 * Parameter tensor names follow PyTorch GPT-2 conventions so model.safetensors loads with a few
 * lines of Python (see docs/pytorch.md):
 *   wte.{c}            (V, C)   token embedding of channel c
 *   wpe                (maxT, C) learned positions only
 *   h.{l}.ln_1.weight / .bias           (C)
 *   h.{l}.attn.c_attn.weight (3C, C), .bias (3C)      q, k, v = x W^T + b, heads split as (NH, HS)
 *   h.{l}.attn.c_proj.weight (C, C),  .bias (C)
 *   h.{l}.attn.ssmax_s      (NH)     SSMax only
 *   h.{l}.ln_2.weight / .bias           (C)
 *   h.{l}.mlp.c_fc.weight (4C, C), .bias (4C)
 *   h.{l}.mlp.c_proj.weight (C, 4C), .bias (C)
 *   ln_f.weight / .bias  (C)
 *   lm_head.{c}        (V, C)   untied models only; tied models use wte.{c}
 */
#ifndef LSSAR_GPT_H
#define LSSAR_GPT_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include "lssar.h"

#define GPT_IGNORE 0xFFFF   /* a target token that contributes no loss */

/* The model's config is the public lssar_model_config (include/lssar.h), field for field: layers L,
   heads NH, dim C (head size HS = C / NH), vocab V per channel, token channels (1 for text, 2 for
   orbits), max_seq (the training length, wpe's size with learned positions), pos, attn, p, tied,
   device (where tensors live; not saved in checkpoints), len_norm, rope_base (0 = GPT_ROPE_BASE;
   gpt_create stores the value it uses) and temp_d (0 = the head size). */
typedef lssar_model_config gpt_config;

#define GPT_ROPE_BASE 10000.0f
/* The rule for a given base (the config's 0 means GPT_ROPE_BASE): finite and > 1. */
static inline int gpt_rope_base_ok(float b) { return b > 1.0f && isfinite(b); }

typedef struct gpt gpt;

/* Validate a config (errors name the field); 0 if usable. */
int gpt_config_check(const gpt_config *cfg);
/* NULL if the config is GPT-2's architecture (softmax attention, learned positions, tied head, one
   token channel), which llm.c's and transformers' GPT-2 files hold; else why not. */
const char *gpt_not_gpt2(const gpt_config *cfg);
/* The one rule of an lssar_pos: 0, or LSSAR_E_KIND with a message that names `what`. */
int gpt_pos_check(lssar_pos pos, const char *what);
int gpt_pos_parse(const char *name);   /* "rope", "learned", "none" -> lssar_pos; -1 if unknown */

/* Create a model with parameters initialised GPT-2 style from `seed` (N(0, 0.02), residual
   projections scaled by 1/sqrt(2L), LayerNorm 1/0, SSMax scales 0.43). No activations yet. */
int gpt_create(const gpt_config *cfg, uint64_t seed, gpt **out);
/* Ordered tokens (orbit coordinates: ids 0..bins-1 are bins of one axis, in order). Adds to each
   embedding row b < bins of channel ch, in that channel's own share of the width (dims
   ch C/channels .. (ch+1) C/channels - 1), the sinusoids GPT_ORDINAL_AMP [cos(2 pi b / l_k),
   sin(2 pi b / l_k)] at P = C / (2 channels) wavelengths l_k = 2 (bins)^(k / (P-1)), k = 0..P-1,
   from 2 bins to 2 x bins. Nearby bins then start with nearby embeddings (their dot product is a
   kernel of b - b' alone), so a model, tied ones at the output too, need not learn the order of
   7000 bins from scratch; the random init underneath still tells every row apart. The sums of the
   channels stay apart because each writes its own dims. Call it once, after gpt_create (a fresh
   model); LSSAR_E_ARG unless 2 <= bins <= vocab and C / channels is even with P >= 2. */
#define GPT_ORDINAL_AMP 0.05f
int gpt_init_ordinal(gpt *m, int bins);
/* The same with every parameter 0, for a checkpoint load that overwrites them all. */
int gpt_create_empty(const gpt_config *cfg, gpt **out);
void gpt_free(gpt *m);
const gpt_config *gpt_get_config(const gpt *m);
size_t gpt_num_params(const gpt *m);
/* The model's device and its memory, for benchmarks (the backend's device_stats, src/nn/backend.h):
   the device's name, the most bytes the model's backend context held (parameters, optimiser
   state, activations, the backend's scratch), the most device memory in use (driver's total -
   free) and the device's total. LSSAR_E_UNSUPPORTED where the backend keeps none (the CPU: its
   memory is the process's, getrusage's peak RSS). */
int gpt_device_stats(const gpt *m, char *name, size_t name_len, size_t *held_peak, size_t *used_peak,
                     size_t *total);

/* Allocate activations once, up front, for batches of up to B x T (train = 1 also keeps what the
   backward pass needs, and gradients and AdamW state). Calling again with a smaller or equal
   shape is free. Memory grows linearly in T: no T x T matrix is stored, and the logits are
   produced in chunks of the backend's eval_rows (in training too: gpt_backward makes them again)
   and reduced, on the backend, to per-position loss, argmax and the loss sum. */
int gpt_reserve(gpt *m, int B, int T, int train);

/* Activation recomputation, a runtime option (not part of gpt_config, not in checkpoints; off at
   creation): with on = 1 the training activations keep, per block, only its output (N, C), plus
   one shared set of every block activation; the backward runs each block's forward again from
   its saved input into that set just before the block's backward (the last block's is still
   there). The kernels are deterministic, so the gradients are bit for bit those without it; the
   price is one more forward of every block but the last per step (at most 4/3 of the step's
   FLOPs; less where the output heads weigh: 1.20x for GPT-2 small at T = 1024). The backward
   recomputes with the parameters it finds, so they must not change between forward and backward
   (no caller changes them). Switching re-lays the reserved activations out at the same shape
   (their contents are lost: run the forward again). */
int gpt_set_recompute(gpt *m, int on);
/* The bytes gpt_reserve(m, B, T, train) allocates for activations in the current recompute
   setting (parameters, gradients and AdamW state not counted); 0 for bad arguments. */
size_t gpt_activation_bytes(const gpt *m, int B, int T, int train);

/* Forward pass of whole sequences. inputs, targets: (B, T, channels) uint16, host memory; targets
   may be NULL (then no loss) and may hold GPT_IGNORE. If loss is non-NULL, *loss is the mean over
   channels and counted positions of the cross-entropy (which waits for the backend; NULL leaves it
   there for gpt_get_loss). Longer T than max_seq is an error with learned positions. inputs and
   targets NULL: the batch staged by gpt_prefetch. */
int gpt_forward(gpt *m, const uint16_t *inputs, const uint16_t *targets, int B, int T, float *loss);
/* Stage the next batch (validated now; host memory, any) while the model computes: it is copied to
   the backend beside the compute (CUDA: from page-locked memory on a copy stream, into a second
   set of device token arrays) and used by the next gpt_forward / gpt_forward_hidden called with
   inputs = targets = NULL and the same B, T. Nothing else changes: the same numbers as passing
   the batch to gpt_forward. A gpt_forward with a batch of its own in between leaves the staged one
   waiting; gpt_reserve with a larger shape drops it. */
int gpt_prefetch(gpt *m, const uint16_t *inputs, const uint16_t *targets, int B, int T);
/* The mean loss of the last forward (as *loss of gpt_forward; LSSAR_E_NAN if it is not finite).
   The loss stays with the backend until this is called (or gpt_forward is given a loss pointer). */
int gpt_get_loss(const gpt *m, float *loss);
/* Per-position results of the last forward: loss (B, T, channels) (0 where ignored) and argmax
   prediction (B, T, channels). */
int gpt_get_losses(const gpt *m, float *out);
int gpt_get_argmax(const gpt *m, uint16_t *out);

/* Hidden states for heads of one's own (e.g. a regression probe): gpt_forward_hidden runs the
   forward pass without the output heads (no logits, loss or argmax); after it or gpt_forward,
   gpt_get_hidden copies the final hidden states (after ln_f) out, (B, T, C) host memory, and
   gpt_backward_hidden back-propagates a gradient dhidden (B, T, C) on them through the model
   (reserved with train = 1), ACCUMULATING scale x the parameter gradients like gpt_backward. */
int gpt_forward_hidden(gpt *m, const uint16_t *inputs, int B, int T);
int gpt_get_hidden(const gpt *m, float *out);
int gpt_backward_hidden(gpt *m, const float *dhidden, float grad_scale);

/* Backward of the last forward's mean loss; gradients are ACCUMULATED (call gpt_zero_grad first),
   scaled by grad_scale (1/accum steps for gradient accumulation). One per gpt_forward with targets
   on a model reserved with train = 1 (LSSAR_E_ARG otherwise). No full logits tensor is kept: the
   backward makes the output heads' logits again, eval_rows rows at a time (one more (B T, C) x
   (C, vocab) product per step), and sums the heads' weight gradients chunk by chunk. */
int gpt_zero_grad(gpt *m);
int gpt_backward(gpt *m, float grad_scale);
/* The sum of squares of n floats x (on the model's backend), as every gradient norm defines it: in
   double, the sum over consecutive blocks of GPT_NORM_BLOCK floats, in order, of each block's sum
   of squares. Blocks make the norm the same for any number of ranks (src/model/gpt_dp.h). The
   backend computes every block's sum in one call (block_sum_squares), and this waits once. */
#define GPT_NORM_BLOCK 65536
double gpt_sum_squares(gpt *m, const float *x, size_t n);
/* Global l2 norm of the gradients; if max_norm > 0 and the norm exceeds it, scale the gradients
   down to max_norm. Returns the pre-clip norm (NaN if any gradient is not finite). The norm and
   the clip are computed on the backend (clip_norm); only the returned norm waits for it. */
float gpt_clip_grad_norm(gpt *m, float max_norm);
/* One AdamW step (t = 1, 2, ...): decoupled weight decay on 2-D weight matrices only (not
   biases, LayerNorm, SSMax scales; embeddings count as 2-D). */
int gpt_adamw_step(gpt *m, int t, float lr, float beta1, float beta2, float eps, float weight_decay);
/* 0 if AdamW can run with these (0 <= beta1, beta2 < 1 and eps > 0), else LSSAR_E_ARG saying so. */
int gpt_adamw_check(float beta1, float beta2, float eps);

/* Incremental decoding: a KV cache holds the keys and values (after RoPE) of every layer for B
   sequences of up to max_T positions. gpt_decode feeds T new positions of every sequence (tokens
   (B, T, channels), host memory) through the same block forward as gpt_forward, appending to the
   cache, and copies the logits of the LAST fed position of each sequence, (B, channels, V), to
   host memory (logits may be NULL). A prompt can be fed whole (T > 1, "prefill") and then one
   position per call. The cache belongs to one model; free it before the model. */
typedef struct gpt_kvcache gpt_kvcache;
int gpt_kvcache_create(gpt *m, int B, int max_T, gpt_kvcache **out);
void gpt_kvcache_free(gpt_kvcache *kv);
void gpt_kvcache_clear(gpt_kvcache *kv);          /* back to 0 positions, memory kept */
int gpt_kvcache_len(const gpt_kvcache *kv);       /* positions held per sequence */
int gpt_decode(gpt *m, gpt_kvcache *kv, const uint16_t *tokens, int T, float *logits);

/* Tensor table, for checkpoints and tests. Buffers: parameters, gradients, AdamW m and v. */
typedef enum { GPT_BUF_PARAM = 0, GPT_BUF_GRAD = 1, GPT_BUF_ADAM_M = 2, GPT_BUF_ADAM_V = 3 } gpt_buffer;
int gpt_num_tensors(const gpt *m);
const char *gpt_tensor_name(const gpt *m, int i);
int gpt_tensor_ndim(const gpt *m, int i);
const int *gpt_tensor_shape(const gpt *m, int i);   /* ndim ints */
size_t gpt_tensor_numel(const gpt *m, int i);
int gpt_tensor_index(const gpt *m, const char *name);  /* -1 if absent */
/* Copy tensor i of buffer `which` out to / in from host memory (numel floats). */
int gpt_read_tensor(const gpt *m, gpt_buffer which, int i, float *dst);
int gpt_write_tensor(gpt *m, gpt_buffer which, int i, const float *src);

#endif
