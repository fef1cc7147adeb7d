// xent.c - softmax cross-entropy over the vocabulary, one row per (position, channel).
#include <math.h>
#include "core/dispatch.h"
#include "nn.h"
#include "core/fastmath.h"

// One row: logits x (V) -> probabilities in place; returns -log p[tg] (0 if tg is ignored, NaN
// if any logit is NaN or inf). A separate function so that GCC vectorises its loops (they stay
// scalar inside OpenMP's outlined loop body).
LSSAR_HOT static float xent_row(float *restrict x, int V, int tg, uint16_t *am_out) {
    // max and sum in XL interleaved lanes combined in a fixed order. (An `omp simd
    // reduction(max)` over fmaxf stayed a scalar loop calling fmaxf: GCC inlines fmaxf only under
    // -ffinite-math-only.) A NaN compares false and never becomes the max; `sum` catches it.
    enum { XL = 16 };
    float mxl[XL], sl[XL];
    for (int k = 0; k < XL; k++) { mxl[k] = x[0]; sl[k] = 0.0f; }
    int j0 = 0;
    for (; j0 + XL <= V; j0 += XL)
        for (int k = 0; k < XL; k++) {
            float v = x[j0 + k];
            mxl[k] = fm_select(v > mxl[k], v, mxl[k]);
            sl[k] += v;
        }
    for (int j = j0; j < V; j++) { mxl[0] = fm_select(x[j] > mxl[0], x[j], mxl[0]); sl[0] += x[j]; }
    float mx = mxl[0], sum = 0.0f;
    for (int k = 0; k < XL; k++) { mx = fm_select(mxl[k] > mx, mxl[k], mx); sum += sl[k]; }
    int am = 0;
    while (am < V - 1 && x[am] != mx) am++;   // the first maximum
    *am_out = (uint16_t)am;
    float xt = tg != NN_IGNORE ? x[tg] : 0.0f;
    float z = 0.0f;   // float partial sums per SIMD lane: ~1e-7 relative at V = 50k
    #pragma omp simd reduction(+:z)
    for (int j = 0; j < V; j++) { float e = fm_exp(x[j] - mx); x[j] = e; z += e; }
    float inv = 1.0f / z;
    #pragma omp simd
    for (int j = 0; j < V; j++) x[j] *= inv;
    float l = tg != NN_IGNORE ? (float)(log((double)z) - ((double)xt - mx)) : 0.0f;   // log z - (x_t - max)
    return isfinite(sum) ? l : NAN;   // a NaN or inf logit: report it, don't hide it
}

// logits (R, V) -> probabilities in place; per-row loss and argmax; returns the loss sum.
double softmax_xent_forward(float *logits, float *losses, uint16_t *argmax,
                            const uint16_t *targets, int tstride, int ostride, int R, int V,
                            long *count) {
    long cnt = 0;
    #pragma omp parallel for schedule(static) reduction(+:cnt)
    for (int r = 0; r < R; r++) {
        int tg = targets ? targets[(size_t)r * tstride] : NN_IGNORE;
        uint16_t am;
        float l = xent_row(logits + (size_t)r * V, V, tg, &am);
        cnt += tg != NN_IGNORE;
        if (losses) losses[(size_t)r * ostride] = l;
        if (argmax) argmax[(size_t)r * ostride] = am;
    }
    // summed in row order from the per-row losses (the reduction clause's order would depend
    // on the threads)
    double total = 0.0;
    if (targets && losses)
        for (int r = 0; r < R; r++) total += losses[(size_t)r * ostride];
    if (count) *count += cnt;
    return total;
}

// dlogits = scale * (probs - onehot(target)), in place; ignored rows are zeroed
LSSAR_HOT void softmax_xent_backward(float *probs, const uint16_t *targets, int tstride, int R, int V,
                           float scale) {
    #pragma omp parallel for schedule(static)
    for (int r = 0; r < R; r++) {
        float *p = probs + (size_t)r * V;
        int tg = targets[(size_t)r * tstride];
        if (tg == NN_IGNORE) {
            for (int j = 0; j < V; j++) p[j] = 0.0f;
            continue;
        }
        for (int j = 0; j < V; j++) p[j] *= scale;
        p[tg] -= scale;
    }
}
