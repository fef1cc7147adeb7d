/*
 * gpt_internal.h - the model's private state, shared by gpt.c (parameters, forward, backward,
 * optimiser), gpt_decode.c (the KV cache) and gpt_probe.c. Not part of any public API.
 *
 * Every float / uint16 pointer below is backend memory (nn/backend.h): the model hands it from one
 * backend call to the next and never reads or writes through it.
 */
#ifndef LSSAR_GPT_INTERNAL_H
#define LSSAR_GPT_INTERNAL_H

#include <stdio.h>
#include "core/util.h"
#include "model/gpt.h"
#include "model/gpt_probe.h"
#include "nn/backend.h"

#define GPT_MAX_CHANNELS 16

/* The parameters of one block (llm.c's ParameterTensors, per layer). The same struct names the
   gradients. */
typedef struct {
    float *ln1w, *ln1b;           // (C) each
    float *qkvw, *qkvb;           // (3C, C), (3C): q, k, v rows in that order
    float *attprojw, *attprojb;   // (C, C), (C)
    float *ssmax_s;               // (NH), SSMax only; NULL otherwise
    float *ln2w, *ln2b;           // (C) each
    float *fcw, *fcb;             // (4C, C), (4C)
    float *fcprojw, *fcprojb;     // (C, 4C), (C)
} gpt_block_params;

typedef struct {
    float *wte[GPT_MAX_CHANNELS];     // (V, C) per channel
    float *wpe;                       // (max_seq, C), learned positions only; NULL otherwise
    gpt_block_params *h;              // (L)
    float *lnfw, *lnfb;               // (C) each
    float *head[GPT_MAX_CHANNELS];    // (V, C) per channel; = wte[ch] in a tied model
} gpt_params;

/* One entry of the tensor table: its name, shape, place in each of the four blocks (parameters,
   gradients, AdamW m and v) and the gpt_params field it binds to. */
typedef struct {
    char name[64];
    int ndim, shape[2];
    size_t off, numel;   // offset (floats) in each block; element count
    int decay;           // AdamW weight decay applies (2-D tensors)
    int init;
    float std;
    int layer;           // -1: a field of gpt_params; else a field of gpt_block_params h[layer]
    size_t field;        // offsetof the float * it binds to
} gpt_tensor;

/* The activations of one block, each (N, ...) with N = B * T rows: nn_act tensors have the
   context's activation type (m->act_dt), the per-row statistics are float32. */
typedef struct {
    nn_act *ln1;                        // (N, C)
    float *ln1_mean, *ln1_rstd;         // (N), (N)
    nn_act *q, *k, *v;                  // (N, C) each = (B, T, NH, HS), after RoPE
    nn_act *att;                        // (N, C) attention output
    float *att_stats;                   // what the backend's attention backward needs from the
                                        // forward (attention_stats_floats; training only, may be NULL)
    nn_act *res1;                       // (N, C) residual after attention
    nn_act *ln2;                        // (N, C)
    float *ln2_mean, *ln2_rstd;         // (N), (N)
    nn_act *fch, *fch_gelu;             // (N, 4C) each
    nn_act *res2;                       // (N, C) residual after the MLP (the block's output)
} gpt_block_acts;

/* Activations for batches of up to N rows, T positions (llm.c's ActivationTensors). In evaluation
   (train = 0) every block aliases one set. The logits are made eval_rows rows at a time, in
   training too (the backward makes each chunk again), so memory is linear in T. The training set
   keeps every block; with recompute (gpt_set_recompute) it keeps only each block's output res2
   and one shared set that the backward refills block by block by running the block forward
   again. */
typedef struct {
    int N, T, train;                    // capacity
    int recompute;                      // training layout: h[l] share one set but for res2
    int held;                           // recompute: the block whose activations the shared set
                                        // holds (-1: none), so the backward of the last block,
                                        // which the forward just left there, reruns nothing
    void *mem;                          // the one allocation every tensor below lives in
    gpt_block_acts *h;                  // (L), host array of device pointers
    nn_act *encoded;                    // (N, C)
    nn_act *lnf;                        // (N, C): the final hidden states
    float *lnf_mean, *lnf_rstd;         // (N), (N)
    nn_act *scratch;                    // (N, C)
    nn_act *logits;                     // (Ch, R, V), R = logit_rows
    int logit_rows;
    nn_act *dres, *dln, *datt, *dq, *dk, *dv;   // (N, C) each, training only
    nn_act *dfch;                       // (N, 4C), training only
    uint16_t *inputs, *targets, *argmax;   // (N, Ch) each; inputs, targets: tok_in / tok_tg[tok_cur]
    // two sets of token arrays: gpt_prefetch uploads the next batch into the set not in use while
    // the compute reads the other; in each set the targets follow the inputs (tok_tg = tok_in +
    // nt16), so one copy carries both
    uint16_t *tok_in[2], *tok_tg[2];
    int tok_cur;
    size_t nt16;                        // entries of each token array (N * Ch, whole 64-byte lines)
    float *losses;                      // (N, Ch)
    double *loss_acc;                   // (2): sum of counted losses, their count
} gpt_acts;

/* What the last forward left in gpt.acts, for the calls that read it. Set by the forward, cleared by
   what makes it stale: a new batch, new activations (gpt_reserve, gpt_set_recompute) or new
   parameters (gpt_params_changed). */
typedef struct {
    int B, T;           // its batch
    int hidden;         // acts.lnf holds its final hidden states (gpt_get_hidden, gpt_backward_hidden)
    int outputs;        // acts.losses, argmax and loss_acc hold its heads' outputs (gpt_get_loss, ...)
    int targets;        // ... scored against targets
    int heads;          // it scored targets on a training reservation: one gpt_backward may run
} gpt_forward_state;

/* gpt_prefetch's staging: two host buffers (the backend's host_alloc, 2 * acts.nt16 tokens each:
   inputs then targets), filled in turn; a staged batch waits in acts.tok_in[1 - tok_cur]. */
typedef struct {
    uint16_t *host[2];
    int next;           // the buffer the next gpt_prefetch fills
    int ready;          // a batch is staged: B x T, with targets if `targets`
    int B, T, targets;
} gpt_staged;

struct gpt {
    gpt_config cfg;
    const nn_backend *be;
    nn_ctx *ctx;
    int nt;
    gpt_tensor *t;                      // (nt) tensor table, host
    size_t nfloats;                     // floats per block, padding included
    float *params_mem, *grads_mem, *adam_m, *adam_v;   // (nfloats) each
    gpt_params params, grads;           // bound to params_mem, grads_mem
    gpt_block_params *hp, *hg;          // (L) each, host: params.h, grads.h
    gpt_acts acts;                      // gpt_reserve's
    lssar_dtype act_dt;                 // the context's activation type (be->act_dtype)
    float *rope_cos, *rope_sin;         // (rope_T, HS/2)
    int rope_T;
    gpt_forward_state last;             // what the last forward left in acts
    // a probe (gpt_probe.c) that the block forward calls while it is set
    struct gpt_probe_state *probe;
    // gpt_set_recompute: lay training activations out for recomputation (not saved anywhere)
    int recompute;
    // While set (by gpt_dp.c), the backward calls it each time the gradients in [from, nfloats)
    // are final for this backward (after the final LayerNorm, then after each block, last block
    // first: the flat layout puts layer l after layer l - 1), so their sum over the ranks can
    // start while the earlier layers' backward runs. A non-zero return ends the backward with it.
    int (*grads_ready)(void *user, size_t from);
    void *grads_ready_user;
    gpt_staged staged;                  // gpt_prefetch's batch
    // the gradient norm's block sums of squares (norm_nb doubles) and the norm (one float), backend
    // memory, made by the first gpt_block_sums
    double *norm_ss;
    size_t norm_nb;
    float *norm_dev;
};

struct gpt_kvcache {
    gpt *m;
    int B, cap, len;                    // sequences, positions each can hold, positions held
    nn_act *k, *v;                      // (L, B, cap, C) each, after RoPE
    gpt_acts acts;                      // evaluation activations for the positions fed per call
};

/* The sums of squares of x's (n floats, backend memory) blocks of GPT_NORM_BLOCK, into m->norm_ss
   (grown as needed; backend memory, nothing waits); *nb of them. 0 or LSSAR_E_NOMEM. */
/* Element i of activation tensor p (the context's activation type). */
static inline nn_act *gpt_act_at(const gpt *m, const nn_act *p, size_t i) {
    return (char *)p + i * nn_dtype_bytes(m->act_dt);
}
int gpt_block_sums(gpt *m, const float *x, size_t n, size_t *nb);
/* The parameters changed (a step, a written tensor): the stored forward can no longer run a backward. */
void gpt_params_changed(gpt *m);
/* The AdamW step of every caller (gpt_adamw_step: the whole model; ZeRO-1: a rank's part): each
   tensor, or its piece, in the flat range [lo, lo + n) of the parameters, its weight decay only if
   it takes one. grads, mom_m and mom_v (backend memory) hold that range: their index 0 is lo. */
void gpt_adamw_part(gpt *m, size_t lo, size_t n, const float *grads, float *mom_m, float *mom_v, int t,
                    float lr, float beta1, float beta2, float eps, float wd);
/* The mean loss of a loss accumulator (sum, count) downloaded from the device (gpt_get_loss's). */
float gpt_loss_of(const double acc[2]);
int gpt_acts_alloc(gpt *m, int N, int T, int train, gpt_acts *a);
void gpt_acts_free(gpt *m, gpt_acts *a);
int gpt_ensure_rope(gpt *m, int T);
lssar_attn_desc gpt_attn_desc(const gpt *m, int l);
int gpt_check_tokens(const gpt *m, const uint16_t *tok, size_t n, int allow_ignore, const char *what);
/* The trunk: embeddings of tokens (on the backend, in a->inputs), the blocks, the final
   LayerNorm -> a->lnf (B*T, C). kv: NULL, or the cache the blocks append to (positions pos0..). */
int gpt_trunk_forward(gpt *m, gpt_acts *a, int B, int T, const gpt_kvcache *kv);
/* Hand layer l's queries and keys (backend memory, (B, T, NH, HS)) to the probe set on m, as host
   copies (gpt_probe.c). */
int gpt_probe_call(gpt *m, int l, const nn_act *q, const nn_act *k, int B, int T, const lssar_attn_desc *d);

#endif
