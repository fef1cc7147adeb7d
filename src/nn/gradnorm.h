/*
 * gradnorm.h - the global gradient norm from the sums of squares of its blocks, and the factor
 * clipping scales the gradients by: one definition for every backend's clip_norm (backend.h). FM_FN
 * (host + device under nvcc), so the CPU backend, the CUDA kernel (src/cuda/kernels_reduce.cu)
 * and its emulation (src/cuda/kernels_emu.c) run this same code. Only IEEE operations that are
 * correctly rounded on both sides (double addition and square root, float division), and no
 * a * b + c to contract: the same bits everywhere for the same block sums.
 */
#ifndef LSSAR_NN_GRADNORM_H
#define LSSAR_NN_GRADNORM_H

#include <stddef.h>
#include "core/fastmath.h"

/* sqrt(ss[0] + ss[1] + ... + ss[nb - 1]): the doubles added in that order from 0, then the square
   root (double) rounded to float; NaN when the sum is not finite. */
FM_FN float nn_norm_of_blocks(const double *ss, size_t nb) {
    double s = 0.0;
    for (size_t b = 0; b < nb; b++) s += ss[b];
    return isfinite(s) ? (float)sqrt(s) : NAN;
}

/* clip / norm when clip > 0 and norm > clip, else 1 (no clipping; a NaN norm is never clipped). */
FM_FN float nn_clip_factor(float norm, float clip) {
    if (!(clip > 0.0f && norm > clip)) return 1.0f;
#ifdef __CUDA_ARCH__
    return __fdiv_rn(clip, norm);   // IEEE division whatever nvcc's -prec-div / --use_fast_math
#else
    return clip / norm;
#endif
}

#endif
