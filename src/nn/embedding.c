// embedding.c - token embeddings of Ch channels, summed, plus learned positions (optional).
#include <string.h>
#include "core/dispatch.h"
#include "nn.h"

// out (B*T, C) = sum_ch wte[ch][tok] + wpe[t]
LSSAR_HOT void embedding_forward(float *out, const uint16_t *tokens, float *const *wte, const float *wpe,
                       int B, int T, int Ch, int C) {
    #pragma omp parallel for schedule(static)
    for (int bt = 0; bt < B * T; bt++) {
        float *o = out + (size_t)bt * C;
        const float *w0 = wte[0] + (size_t)tokens[(size_t)bt * Ch] * C;
        if (wpe) {
            const float *p = wpe + (size_t)(bt % T) * C;
            for (int i = 0; i < C; i++) o[i] = w0[i] + p[i];
        } else {
            memcpy(o, w0, sizeof(float) * C);
        }
        for (int ch = 1; ch < Ch; ch++) {
            const float *w = wte[ch] + (size_t)tokens[(size_t)bt * Ch + ch] * C;
            for (int i = 0; i < C; i++) o[i] += w[i];
        }
    }
}

// Scatter-add; parallel over column blocks so that every table entry receives its rows in
// order (deterministic, no atomics).
#define COLBLK 64
LSSAR_HOT void embedding_backward(float *const *dwte, float *dwpe, const float *dout,
                        const uint16_t *tokens, int B, int T, int Ch, int C) {
    int nblk = (C + COLBLK - 1) / COLBLK;
    #pragma omp parallel for schedule(static)
    for (int bk = 0; bk < nblk; bk++) {
        int j0 = bk * COLBLK, j1 = j0 + COLBLK < C ? j0 + COLBLK : C;
        for (int bt = 0; bt < B * T; bt++) {
            const float *d = dout + (size_t)bt * C;
            for (int ch = 0; ch < Ch; ch++) {
                float *w = dwte[ch] + (size_t)tokens[(size_t)bt * Ch + ch] * C;
                for (int j = j0; j < j1; j++) w[j] += d[j];
            }
            if (dwpe) {
                float *p = dwpe + (size_t)(bt % T) * C;
                for (int j = j0; j < j1; j++) p[j] += d[j];
            }
        }
    }
}
