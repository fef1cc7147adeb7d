// xent.c - softmax cross-entropy over the vocabulary, one row per (position, channel).
#include <math.h>
#include "nn.h"
#include "vmath.h"

// logits (R, V) -> probabilities in place; per-row loss and argmax; returns the loss sum.
double softmax_xent_forward(float *logits, float *losses, uint16_t *argmax,
                            const uint16_t *targets, int tstride, int ostride, int R, int V,
                            long *count) {
    long cnt = 0;
    #pragma omp parallel for schedule(static) reduction(+:cnt)
    for (int r = 0; r < R; r++) {
        float *x = logits + (size_t)r * V;
        float mx = x[0], sum = 0.0f;
        #pragma omp simd reduction(max:mx) reduction(+:sum)
        for (int j = 0; j < V; j++) { mx = fmaxf(mx, x[j]); sum += x[j]; }
        int am = 0;
        while (am < V - 1 && x[am] != mx) am++;   // the first maximum
        int tg = targets ? targets[(size_t)r * tstride] : NN_IGNORE;
        float xt = tg != NN_IGNORE ? x[tg] : 0.0f;
        double z = 0.0;
        #pragma omp simd reduction(+:z)
        for (int j = 0; j < V; j++) { float e = nn_expf(x[j] - mx); x[j] = e; z += e; }
        float inv = (float)(1.0 / z);
        #pragma omp simd
        for (int j = 0; j < V; j++) x[j] *= inv;
        float l = 0.0f;
        if (tg != NN_IGNORE) {
            l = (float)(log(z) - ((double)xt - mx));   // -log p = log z - (x_t - max)
            cnt++;
        }
        if (!isfinite(sum)) l = NAN;   // a NaN or inf logit: report it, don't hide it
        if (losses) losses[(size_t)r * ostride] = l;
        if (argmax) argmax[(size_t)r * ostride] = (uint16_t)am;
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
void softmax_xent_backward(float *probs, const uint16_t *targets, int tstride, int R, int V,
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
