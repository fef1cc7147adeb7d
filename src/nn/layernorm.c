// layernorm.c - LayerNorm over the last dimension, eps 1e-5 (PyTorch's default).
#include <math.h>
#include "core/dispatch.h"
#include "nn.h"

#define LN_EPS 1e-5f

// One row. The sums are `omp simd` reductions (lane-interleaved partial sums, combined in a
// fixed order): the order depends on the clone's vector width, never on the thread count.
static inline void ln_row(float *restrict o, float *mean, float *rstd, const float *restrict x,
                          const float *restrict weight, const float *restrict bias, int C) {
    // two passes: the mean first, then the variance about it (no cancellation)
    float m = 0.0f;
    #pragma omp simd reduction(+ : m)
    for (int i = 0; i < C; i++) m += x[i];
    m /= C;
    float var = 0.0f;
    #pragma omp simd reduction(+ : var)
    for (int i = 0; i < C; i++) { float d = x[i] - m; var += d * d; }
    var /= C;
    float s = 1.0f / sqrtf(var + LN_EPS);
    #pragma omp simd
    for (int i = 0; i < C; i++) o[i] = (x[i] - m) * s * weight[i] + bias[i];
    if (mean) *mean = m;
    if (rstd) *rstd = s;
}

// out (N, C) = (inp - mean) * rstd * weight + bias;  mean, rstd (N) kept for backward
LSSAR_HOT void layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                                 const float *weight, const float *bias, int N, int C) {
    #pragma omp parallel for schedule(static)
    for (int r = 0; r < N; r++)
        ln_row(out + (size_t)r * C, mean ? mean + r : NULL, rstd ? rstd + r : NULL,
               inp + (size_t)r * C, weight, bias, C);
}

#define COLBLK 64
// dinp (N, C) += ...;  dweight, dbias (C) += ...
LSSAR_HOT void layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, const float *mean,
                        const float *rstd, int N, int C) {
    // input gradient, row-parallel: dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dout*w
    #pragma omp parallel for schedule(static)
    for (int r = 0; r < N; r++) {
        const float *x = inp + (size_t)r * C, *d = dout + (size_t)r * C;
        float *dx = dinp + (size_t)r * C;
        float m = mean[r], s = rstd[r];
        float gm = 0.0f, gxm = 0.0f;
        #pragma omp simd reduction(+ : gm, gxm)
        for (int i = 0; i < C; i++) {
            float g = d[i] * weight[i];
            gm += g;
            gxm += g * (x[i] - m) * s;
        }
        gm /= C;
        gxm /= C;
        #pragma omp simd
        for (int i = 0; i < C; i++) {
            float xh = (x[i] - m) * s;
            dx[i] += s * (d[i] * weight[i] - gm - xh * gxm);
        }
    }
    // parameter gradients, column-parallel so each sum runs over the rows in order
    int nblk = (C + COLBLK - 1) / COLBLK;
    #pragma omp parallel for schedule(static)
    for (int bk = 0; bk < nblk; bk++) {
        int j0 = bk * COLBLK, j1 = j0 + COLBLK < C ? j0 + COLBLK : C;
        float aw[COLBLK] = {0}, ab[COLBLK] = {0};
        for (int r = 0; r < N; r++) {
            const float *x = inp + (size_t)r * C, *d = dout + (size_t)r * C;
            float m = mean[r], s = rstd[r];
            for (int j = j0; j < j1; j++) {
                aw[j - j0] += d[j] * (x[j] - m) * s;
                ab[j - j0] += d[j];
            }
        }
        for (int j = j0; j < j1; j++) { dweight[j] += aw[j - j0]; dbias[j] += ab[j - j0]; }
    }
}
