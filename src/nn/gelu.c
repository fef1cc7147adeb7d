// gelu.c - GELU, tanh approximation (GPT-2's): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
// and the residual addition. Loops run in blocks: threads over blocks, SIMD inside a block.
// LSSAR_HOT (core/dispatch.h): AVX-512 / AVX2+FMA / baseline clones picked at load time; GCC
// clones the OpenMP-outlined loop bodies with their function.
#include <math.h>
#include "core/dispatch.h"
#include "nn.h"
#include "core/fastmath.h"

#define GELU_K 0.7978845608028654f   // sqrt(2 / pi)
#define BLK 4096

LSSAR_HOT void gelu_forward(float *out, const float *inp, size_t n) {
    long nb = (long)((n + BLK - 1) / BLK);
    #pragma omp parallel for schedule(static)
    for (long b = 0; b < nb; b++) {
        int len = (size_t)(b + 1) * BLK <= n ? BLK : (int)(n - (size_t)b * BLK);
        const float *x = inp + (size_t)b * BLK;
        float *o = out + (size_t)b * BLK;
        #pragma omp simd
        for (int i = 0; i < len; i++) {
            float v = x[i];
            o[i] = 0.5f * v * (1.0f + fm_tanh(GELU_K * (v + 0.044715f * v * v * v)));
        }
    }
}

LSSAR_HOT void gelu_backward(float *dinp, const float *inp, const float *dout, size_t n) {
    long nb = (long)((n + BLK - 1) / BLK);
    #pragma omp parallel for schedule(static)
    for (long b = 0; b < nb; b++) {
        int len = (size_t)(b + 1) * BLK <= n ? BLK : (int)(n - (size_t)b * BLK);
        const float *x = inp + (size_t)b * BLK, *d = dout + (size_t)b * BLK;
        float *dx = dinp + (size_t)b * BLK;
        #pragma omp simd
        for (int i = 0; i < len; i++) {
            float v = x[i];
            float t = fm_tanh(GELU_K * (v + 0.044715f * v * v * v));
            float sech2 = 1.0f - t * t;
            float g = 0.5f * (1.0f + t) + 0.5f * v * sech2 * GELU_K * (1.0f + 3.0f * 0.044715f * v * v);
            dx[i] = d[i] * g;
        }
    }
}

LSSAR_HOT void residual_forward(float *out, const float *a, const float *b, size_t n) {
    #pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

LSSAR_HOT void residual_backward(float *da, float *db, const float *dout, size_t n) {
    #pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) { da[i] += dout[i]; db[i] += dout[i]; }
}
