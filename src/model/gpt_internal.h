/*
 * gpt_internal.h - the model's private state, shared by gpt.c (training path) and gpt_decode.c
 * (incremental decoding). Not part of any public API.
 */
#ifndef LSSAR_GPT_INTERNAL_H
#define LSSAR_GPT_INTERNAL_H

#include <stdio.h>
#include "core/util.h"
#include "model/gpt.h"
#include "nn/nn.h"

#define GPT_MAX_CHANNELS 16
#define GPT_EVAL_ROWS 128   /* rows of logits per chunk in evaluation */

/* per-layer parameter tensors */
enum { LT_LN1W, LT_LN1B, LT_QKVW, LT_QKVB, LT_PROJW, LT_PROJB, LT_SSMAX, LT_LN2W, LT_LN2B,
       LT_FCW, LT_FCB, LT_FCPW, LT_FCPB, LT_N };

typedef struct {
    char name[64];
    int ndim, shape[2];
    size_t off, numel;   // offset (floats) in each of the four blocks; element count
    int decay;           // AdamW weight decay applies (2-D tensors)
    int init;
    float std;
} gpt_tensor;

/* activations of one layer, each (N, ...) with N = B * T rows */
typedef struct {
    float *ln1, *ln1_mean, *ln1_rstd;   // (N, C), (N), (N)
    float *q, *k, *v;                   // (N, C) each = (B, T, NH, HS), after RoPE
    float *att;                         // (N, C) attention output
    float *res1;                        // (N, C) residual after attention
    float *ln2, *ln2_mean, *ln2_rstd;   // (N, C), (N), (N)
    float *fch, *fch_gelu;              // (N, 4C) each
    float *res2;                        // (N, C) residual after the MLP (the layer's output)
} gpt_layer_acts;

struct gpt {
    gpt_config cfg;
    int nt;
    gpt_tensor *t;
    size_t nfloats;                     // floats per block, padding included
    float *params, *grads, *adam_m, *adam_v;
    int i_wte[GPT_MAX_CHANNELS], i_head[GPT_MAX_CHANNELS], i_wpe, i_lnfw, i_lnfb;
    int *lt;                            // (L, LT_N) tensor indices, -1 if absent
    // activations (gpt_reserve)
    int rN, rT, rtrain;
    float *acts;
    gpt_layer_acts *la;                 // L entries; in evaluation all alias one set
    float *encoded;                     // (N, C)
    float *lnf, *lnf_mean, *lnf_rstd;   // (N, C), (N), (N)
    float *scratch;                     // (N, C)
    float *logits;                      // (Ch, R, V), R = logit_rows
    int logit_rows;
    float *dres, *dln, *datt, *dq, *dk, *dv;   // (N, C) each, training only
    float *dfch;                        // (N, 4C)
    float *ds_tmp;                      // (NH)
    float *rope_cos, *rope_sin;         // (rope_T, HS/2)
    int rope_T;
    uint16_t *inputs, *targets, *argmax;   // (N, Ch)
    float *losses;                         // (N, Ch)
    // the last forward pass
    int fB, fT, fvalid, ftargets, fbackward_ready;
    int fhidden;                        // lnf (the final hidden states) holds the last forward's
    long fcount;
    float floss;
    // incremental decoding (gpt_decode.c)
    int dmax, dpos;
    float *kcache, *vcache;             // (L, dmax, C) each, after RoPE
    float *dbuf;                        // one row's working vectors
    double *dscratch;                   // (NH, dmax)
};

float *gpt_alloc_floats(size_t n);
int gpt_ensure_opt_state(gpt *m);
int gpt_ensure_rope(gpt *m, int T);
lssar_attn_desc gpt_attn_desc(const gpt *m, int l);
void gpt_decode_free(gpt *m);

#endif
