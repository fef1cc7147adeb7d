/*
 * attn.h - the attention kernels' internal entry points (the public ones are lssar_attn_forward /
 * _backward in lssar.h).
 */
#ifndef LSSAR_ATTN_H
#define LSSAR_ATTN_H

#include "lssar.h"

/* The one rule of each enum of attention, a kind and a length normalisation; the _check functions
   (names.c) fail with a message that names `what` ("gpt config: attn"). */
static inline int attn_kind_ok(lssar_attn_kind k) { return (unsigned)k < (unsigned)LSSAR_ATTN_NKINDS; }
static inline int attn_len_norm_ok(lssar_len_norm ln) { return (unsigned)ln <= (unsigned)LSSAR_LEN_NORM_ROW; }
int attn_kind_check(lssar_attn_kind k, const char *what);       // LSSAR_E_KIND
int attn_len_norm_check(lssar_len_norm ln, const char *what);   // LSSAR_E_ARG

/* The stages of kind k (lssar_attn_stages_of) for callers that have checked k; all zero (dot, exp,
   l1, no re-weighting) for a value that is not a kind. */
static inline lssar_attn_stages attn_stages(lssar_attn_kind k) {
    lssar_attn_stages st = {LSSAR_SCORE_DOT, LSSAR_PHI_EXP, LSSAR_NORM_L1, 0};
    if (attn_kind_ok(k)) lssar_attn_stages_of(k, &st);
    return st;
}
// The kind has SSMax's per-head scales (a model parameter).
static inline int attn_has_ssmax_s(lssar_attn_kind k) { return attn_stages(k).score == LSSAR_SCORE_SSMAX; }
// The kind re-weights with the power p.
static inline int attn_reweights(lssar_attn_kind k) { return attn_stages(k).reweight; }

/* The checks of a descriptor that every backend shares (the CPU kernels, the fused emulation, the
   CUDA kernels): a kind, its length normalisation, temp_d, the re-weighting power, SSMax's scales
   being given. 0, or the error with a message that starts with fn. */
int attn_desc_check(const lssar_attn_desc *a, const char *fn);

/* Causal attention for the LAST Tq of Tk positions: query r of sequence b is position
   i = Tk - Tq + r and sees keys 0..i. q, out: (B, Tq, H, D) contiguous; k, v: sequence b starts
   at row b * kv_stride (rows of H * D floats), kv_stride >= Tk (a KV cache's capacity).
   lssar_attn_forward is Tq = Tk = kv_stride = T; decoding is Tq new rows over a cache, through the
   same blocks and row functions, so it gives the same weights. */
int attn_forward_cached(const lssar_attn_desc *a, int B, int Tq, int Tk, int kv_stride, int H, int D,
                        const float *q, const float *k, const float *v, float *out);

#endif
