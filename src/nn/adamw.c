// adamw.c - AdamW update, gradient norm and scaling.
#include <math.h>
#include "core/dispatch.h"
#include "nn.h"
#include "core/fastmath.h"

// PyTorch AdamW: p -= lr * (mhat / (sqrt(vhat) + eps) + wd * p), on one block of values
// (fm_sqrt: sqrtf's errno branch would keep the loop scalar; docs/PERF.md)
LSSAR_HOT static void adamw_block(float *restrict params, const float *restrict grads, float *restrict m,
                        float *restrict v, int n, float lr, float beta1, float beta2, float eps,
                        float wd, float ibc1, float ibc2) {
    #pragma omp simd
    for (int i = 0; i < n; i++) {
        float g = grads[i];
        float mi = beta1 * m[i] + (1.0f - beta1) * g;
        float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        params[i] -= lr * (mi * ibc1 / (fm_sqrt(vi * ibc2) + eps) + wd * params[i]);
    }
}

#define ADAM_BLOCK 8192
void adamw_update(float *params, const float *grads, float *m, float *v, size_t n, int t,
                  float lr, float beta1, float beta2, float eps, float wd) {
    float ibc1 = 1.0f / (1.0f - powf(beta1, (float)t)), ibc2 = 1.0f / (1.0f - powf(beta2, (float)t));
    long nb = (long)((n + ADAM_BLOCK - 1) / ADAM_BLOCK);
    #pragma omp parallel for schedule(static)
    for (long b = 0; b < nb; b++) {
        size_t i0 = (size_t)b * ADAM_BLOCK, len = n - i0 < ADAM_BLOCK ? n - i0 : ADAM_BLOCK;
        adamw_block(params + i0, grads + i0, m + i0, v + i0, (int)len, lr, beta1, beta2, eps, wd, ibc1, ibc2);
    }
}

#define SS_BLOCK 16384
LSSAR_HOT double sum_squares(const float *x, size_t n) {
    size_t nb = (n + SS_BLOCK - 1) / SS_BLOCK;
    if (nb == 0) return 0.0;
    double part[4096];   // blocks are summed in groups so that the stack array stays small
    double total = 0.0;
    for (size_t g0 = 0; g0 < nb; g0 += 4096) {
        size_t g1 = g0 + 4096 < nb ? g0 + 4096 : nb;
        #pragma omp parallel for schedule(static)
        for (size_t b = g0; b < g1; b++) {
            size_t i0 = b * SS_BLOCK, i1 = i0 + SS_BLOCK < n ? i0 + SS_BLOCK : n;
            double s[8] = {0};   // 8 interleaved partial sums: latency, not adds, bound one sum
            size_t i = i0;
            for (; i + 8 <= i1; i += 8)
                for (int k = 0; k < 8; k++) s[k] += (double)x[i + k] * x[i + k];
            for (; i < i1; i++) s[0] += (double)x[i] * x[i];
            part[b - g0] = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
        }
        for (size_t b = g0; b < g1; b++) total += part[b - g0];
    }
    return total;
}

LSSAR_HOT void scale_inplace(float *x, size_t n, float s) {
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) x[i] *= s;
}

LSSAR_HOT void zero_fill(float *x, size_t n) {
    #pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) x[i] = 0.0f;
}
