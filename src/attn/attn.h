/*
 * attn.h - the attention kernels' internal entry points (the public ones are lssar_attn_forward /
 * _backward in lssar.h).
 */
#ifndef LSSAR_ATTN_H
#define LSSAR_ATTN_H

#include "lssar.h"

/* Causal attention for the LAST Tq of Tk positions: query r of sequence b is position
   i = Tk - Tq + r and sees keys 0..i. q, out: (B, Tq, H, D) contiguous; k, v: sequence b starts
   at row b * kv_stride (rows of H * D floats), kv_stride >= Tk (a KV cache's capacity).
   lssar_attn_forward is Tq = Tk = kv_stride = T; decoding is Tq new rows over a cache, through the
   same blocks and row functions, so it gives the same weights. */
int attn_forward_cached(const lssar_attn_desc *a, int B, int Tq, int Tk, int kv_stride, int H, int D,
                        const float *q, const float *k, const float *v, float *out);

#endif
