/*
 * flash_emu.h - the CPU emulation of the fused GPU attention kernels (internal; the algorithm and
 * the statistics layout are in attn/flash.h, the design in docs/CUDA.md). Same tiles, loop order,
 * accumulation order and precision choices as src/cuda/flash_attn.cu, so the float64 reference
 * tests of this emulation (tests/test_flash.c) vouch for the kernels' algorithm in CI, where no
 * GPU runs.
 */
#ifndef LSSAR_ATTN_FLASH_EMU_H
#define LSSAR_ATTN_FLASH_EMU_H

#include <stddef.h>
#include "lssar.h"

// Products of fp32 operands, or of operands rounded to bf16 (round-to-nearest-even) as mma.sync
// needs; fp32 accumulation and fp32 row statistics in both.
typedef enum { FLASH_FP32 = 0, FLASH_BF16 = 1 } flash_mode;

/* LSSAR_OK if the fused path (the CUDA kernels and this emulation) supports kind a->kind
   (flash_fused_supported of flash.h), else LSSAR_E_UNSUPPORTED with a message that names the kind
   and fn. A kind that is not one is left to the caller's checks (LSSAR_OK here). */
int flash_emu_check_fused(const lssar_attn_desc *a, const char *fn);

// Floats of the statistics a forward of Tq query rows saves (flash_stats_floats of flash.h).
size_t flash_emu_stats_floats(const lssar_attn_desc *a, int B, int Tq, int H, int D);

/* Causal attention for the LAST Tq of Tk positions (as attn_forward_cached): query r of sequence
   b is position i = Tk - Tq + r and sees keys 0..i. q, out: (B, Tq, H, D); k, v: sequence b at
   row b * kv_stride, rows of H * D floats (kv_stride >= Tk). stats: flash_emu_stats_floats()
   floats (layout in flash.h), or NULL. Returns 0 or an lssar_err. */
int flash_emu_forward(const lssar_attn_desc *a, flash_mode mode, int B, int Tq, int Tk, int kv_stride,
                      int H, int D, const float *q, const float *k, const float *v, float *out,
                      float *stats);

/* The backward of the full forward (Tq = Tk = kv_stride = T). q, k, v, out, dout, dq, dk, dv:
   (B, T, H, D); out and stats are the forward's of the same q, k, v and mode; both NULL: the
   forward is run here first. dq, dk, dv written (not accumulated); ds (H, SSMax only, may be
   NULL) written. Returns 0 or an lssar_err. */
int flash_emu_backward(const lssar_attn_desc *a, flash_mode mode, int B, int T, int H, int D,
                       const float *q, const float *k, const float *v, const float *out,
                       const float *stats, const float *dout, float *dq, float *dk, float *dv,
                       float *ds);

#endif
