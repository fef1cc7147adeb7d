/*
 * flash_decode_emu.h - the CPU emulation of the split-KV decoding kernels (src/cuda/flash_decode.cu;
 * the algorithm, its orders and its error bound: attn/flash_decode.h). Same splits, tiles, orders
 * and precision, so tests/cuda_host/test_decode_host.cpp compares the kernels with it bit for bit
 * and tests/test_flash_decode.c vouches for both against the float64 reference.
 */
#ifndef LSSAR_ATTN_FLASH_DECODE_EMU_H
#define LSSAR_ATTN_FLASH_DECODE_EMU_H

#include "lssar.h"
#include "attn/flash_emu.h"  // flash_mode

/* out (B, Tq, H, D) for the last Tq of Tk positions (query r is position Tk - Tq + r and sees keys
   0..Tk - Tq + r), as flash_emu_forward without statistics. q (B, Tq, H, D); k, v: sequence b at
   row b * kv_stride, rows of H * D floats. Tq <= 16 (FD_MAXQ), D 16, 32, 64 or 128. nsplit: the
   requested split count (fd_chunk; 0: fd_auto_nsplit for a 132-SM GPU). Returns 0 or an
   lssar_err. */
int flash_decode_emu_forward(const lssar_attn_desc *a, flash_mode mode, int nsplit, int B, int Tq, int Tk,
                             int kv_stride, int H, int D, const float *q, const float *k, const float *v,
                             float *out);

#endif
