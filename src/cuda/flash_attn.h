/*
 * flash_attn.h - the fused causal attention kernels of the CUDA backend (internal, C-callable).
 *
 * The kernels (flash_attn.cu) are the transliteration of the CPU emulation src/attn/flash_emu.c:
 * the same 64-row query tiles, 64-key tiles, 4 warps, mma.sync m16n8k16 fragment ownership and
 * accumulation order; the per-element math is src/attn/flash.h's FM_FN functions. The design
 * contract is docs/CUDA.md.
 *
 * Every pointer is device memory. q, k, v, out, dout, dq, dk, dv are (B, T, H, D) rows of H * D
 * elements of type `storage` (LSSAR_F32 or LSSAR_BF16; k and v of the forward: sequence b starts
 * at row b * kv_stride); stats and d->ssmax_s (H floats) are float32. bf16_products = 0: fp32 SIMT
 * products (the result matches the CPU backend to ~1e-5 relative); 1: operands rounded to bf16 for
 * mma.sync, fp32 accumulation (bf16 storage always takes these).
 * Every call is asynchronous on `stream` and returns 0 or an lssar_err (lssar_errmsg says why).
 * Pointers must be 16-byte aligned (cudaMalloc's are); D must be 16, 32, 64 or 128.
 */
#ifndef LSSAR_CUDA_FLASH_ATTN_H
#define LSSAR_CUDA_FLASH_ATTN_H

#include <stddef.h>
#include <cuda_runtime.h>
#include "lssar.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Floats the forward saves for the backward of the same inputs (flash.h's layout: the per-row
   statistics, the centred rows yc and, for lssar, Ec): linear in B * T. */
size_t cuda_attn_stats_floats(const lssar_attn_desc *d, int B, int T, int H, int D);

/* Bytes of transient workspace both calls need (lssa / lssar: the q and k inverse norms; the
   backward: its per-row D1 / D2 values, dQ summed in fp32 over the key tiles (4 B T H D bytes),
   one counter per (b, h, 64 query rows), ssmax its row sums and row terms); a 256-byte multiple, and at
   least what both the forward of (Tq, Tk) and the backward of T = Tq = Tk need. */
size_t cuda_attn_scratch_bytes(const lssar_attn_desc *d, int B, int Tq, int Tk, int H, int D);

/* out (B, Tq, H, D) for the LAST Tq of Tk positions: query row r is position Tk - Tq + r and sees
   keys 0..Tk - Tq + r. q (B, Tq, H, D); k, v: sequence b at k + b * kv_stride * H * D
   (kv_stride >= Tk). stats: cuda_attn_stats_floats(d, B, Tq, H, D) floats for the backward, or
   NULL (evaluation, decoding: nothing is saved). scratch: cuda_attn_scratch_bytes(d, B, Tq, Tk,
   H, D) bytes. The decode case (Tq < Tk, Tq = 1 included) works; the backward needs Tq = Tk. */
int cuda_attn_forward(const lssar_attn_desc *d, int bf16_products, lssar_dtype storage, int B, int Tq, int Tk,
                      int kv_stride, int H, int D, const void *q, const void *k, const void *v, void *out,
                      float *stats, void *scratch, cudaStream_t stream);

/* dq, dk, dv (B, T, H, D) written from the forward's out and stats (Tq = Tk = kv_stride = T).
   dscale (H floats): SSMax only, += d(loss)/d(ssmax_s); may be NULL. scratch as for the forward
   (cuda_attn_scratch_bytes(d, B, T, T, H, D)). */
int cuda_attn_backward(const lssar_attn_desc *d, int bf16_products, lssar_dtype storage, int B, int T, int H,
                       int D, const void *q, const void *k, const void *v, const void *out, const float *stats,
                       const void *dout, void *dq, void *dk, void *dv, float *dscale, void *scratch,
                       cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
