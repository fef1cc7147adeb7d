/*
 * flash_decode.h - split-KV decoding for the fused attention (internal, C-callable): Tq <= 16 query
 * rows against Tk keys, the keys split across CTAs so that a small B H still fills the GPU. The
 * algorithm, its orders and its error bound: src/attn/flash_decode.h; the CPU emulation:
 * src/attn/flash_decode_emu.c. Every kind of flash_fused_supported; fp32 storage (as
 * cuda_attn_forward); bf16_products as there. Writes out only: no statistics (no backward).
 */
#ifndef LSSAR_CUDA_FLASH_DECODE_H
#define LSSAR_CUDA_FLASH_DECODE_H

#include <stddef.h>
#include <cuda_runtime.h>
#include "lssar.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when cuda_attn_forward should take this path for these arguments: no statistics wanted
   (want_stats = 0: decoding, evaluation), a kind the fused path runs, Tq <= 16, D 16, 32, 64 or 128,
   and the automatic split count for this GPU is above 1 (B H CTAs leave SMs idle and Tk >= 64);
   otherwise the fused forward's one CTA per (b, h, 64 query rows) already fills the GPU. */
int cuda_attn_decode_applies(const lssar_attn_desc *d, int B, int Tq, int Tk, int H, int D, int want_stats);

/* Bytes of scratch cuda_attn_decode_forward needs (the splits' partials; a 256-byte multiple).
   nsplit as there (0: the split count that fills the current GPU). 0 for invalid arguments. */
size_t cuda_attn_decode_scratch_bytes(const lssar_attn_desc *d, int nsplit, int B, int Tq, int Tk, int H,
                                      int D);

/* out (B, Tq, H, D) for the LAST Tq of Tk positions, as cuda_attn_forward with stats = NULL: query
   row r is position Tk - Tq + r and sees keys 0..Tk - Tq + r. q (B, Tq, H, D); k, v: sequence b at
   k + b * kv_stride * H * D; q, k, v, out of element type `storage` (LSSAR_F32, or LSSAR_BF16,
   which takes bf16 products). Tq <= 16. nsplit: the requested number of key splits (0: fill the
   GPU, about two CTAs per SM; the splits run are at most this, each a multiple of 32 keys).
   scratch: cuda_attn_decode_scratch_bytes(d, nsplit, B, Tq, Tk, H, D) bytes. Asynchronous on
   stream; returns 0 or an lssar_err. */
int cuda_attn_decode_forward(const lssar_attn_desc *d, int bf16_products, lssar_dtype storage, int nsplit,
                             int B, int Tq, int Tk, int kv_stride, int H, int D, const void *q, const void *k,
                             const void *v, void *out, void *scratch, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
