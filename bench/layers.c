// bench/layers.c - the elementwise layers of src/nn at GPT-2-small sizes, forward + backward,
// one line per layer: milliseconds per call (best of REPS) and GB/s of the tensors touched.
//   layers [--reps 20]
// Run with OMP_NUM_THREADS=1 for a per-core figure; bench/dispatch_layers.sh compares builds.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/util.h"
#include "nn/nn.h"

enum { B = 4, T = 256, C = 768, NH = 12, HS = 64, V = 50257, XR = 64 /* xent rows */ };
#define NPARAM (16u << 20)   // AdamW over 16M parameters (124M would not fit the caches any better)

static float *randv(size_t n, float scale, uint64_t seed) {
    float *x = malloc(n * sizeof(float));
    lssar_rng r;
    lssar_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) x[i] = scale * (float)lssar_rng_normal(&r);
    return x;
}

static int reps = 20;
static volatile float sink;

#define TIME(name, bytes, body)                                                           \
    do {                                                                                  \
        double best = 1e30;                                                               \
        for (int rep = 0; rep < reps; rep++) {                                            \
            double t0 = lssar_now();                                                      \
            body;                                                                         \
            double dt = lssar_now() - t0;                                                 \
            if (dt < best) best = dt;                                                     \
        }                                                                                 \
        printf("%-28s %9.3f ms  %7.2f GB/s\n", name, best * 1e3, (double)(bytes) / best / 1e9); \
        fflush(stdout);                                                                   \
    } while (0)

int main(int argc, char **argv) {
    for (int i = 1; i + 1 < argc; i++) if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
    const size_t N = (size_t)B * T, F = N * 4 * C;   // rows; GELU width 4C
    // GELU forward + backward over (B*T, 4C)
    {
        float *x = randv(F, 1.0f, 1), *y = malloc(F * 4), *d = randv(F, 1.0f, 2), *dx = malloc(F * 4);
        TIME("gelu fwd+bwd (1024x3072)", 5.0 * F * 4, { gelu_forward(y, x, F); gelu_backward(dx, x, d, F); });
        sink = y[7] + dx[9];
        free(x); free(y); free(d); free(dx);
    }
    // LayerNorm forward + backward over (B*T, C)
    {
        size_t n = N * C;
        float *x = randv(n, 1.0f, 3), *w = randv(C, 0.1f, 4), *b = randv(C, 0.1f, 5), *y = malloc(n * 4);
        float *d = randv(n, 1.0f, 6), *dx = calloc(n, 4), *dw = calloc(C, 4), *db = calloc(C, 4);
        float *mean = malloc(N * 4), *rstd = malloc(N * 4);
        for (int i = 0; i < C; i++) w[i] += 1.0f;
        TIME("layernorm fwd+bwd (1024x768)", 6.0 * n * 4, {
            layernorm_forward(y, mean, rstd, x, w, b, (int)N, C);
            layernorm_backward(dx, dw, db, d, x, w, mean, rstd, (int)N, C);
        });
        sink = y[3] + dx[5] + dw[1];
        free(x); free(w); free(b); free(y); free(d); free(dx); free(dw); free(db); free(mean); free(rstd);
    }
    // softmax cross-entropy forward + backward over (XR, V)
    {
        size_t n = (size_t)XR * V;
        float *l0 = randv(n, 2.0f, 7), *l = malloc(n * 4), *loss = malloc(XR * 4);
        uint16_t tg[XR], am[XR];
        for (int r = 0; r < XR; r++) tg[r] = (uint16_t)(r * 777 % V);
        long cnt = 0;
        // the copy restores the logits (the forward overwrites them); it is timed too, and
        // is the same in every build
        TIME("xent fwd+bwd (64x50257)", 5.0 * n * 4, {
            memcpy(l, l0, n * 4);
            softmax_xent_forward(l, loss, am, tg, 1, 1, XR, V, &cnt);
            softmax_xent_backward(l, tg, 1, XR, V, 1.0f / XR);
        });
        sink = l[11] + loss[0];
        free(l0); free(l); free(loss);
    }
    // AdamW step + gradient norm over NPARAM parameters
    {
        float *p = randv(NPARAM, 0.02f, 8), *g = randv(NPARAM, 0.01f, 9), *m = calloc(NPARAM, 4), *v = calloc(NPARAM, 4);
        int t = 0;
        TIME("adamw+norm (16M params)", 8.0 * NPARAM * 4, {
            sink = (float)sum_squares(g, NPARAM);
            adamw_update(p, g, m, v, NPARAM, ++t, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f);
        });
        free(p); free(g); free(m); free(v);
    }
    // RoPE forward + backward on (B, T, NH, HS)
    {
        size_t n = N * NH * HS;
        float *x = randv(n, 1.0f, 10), *cs = malloc((size_t)T * HS / 2 * 4), *sn = malloc((size_t)T * HS / 2 * 4);
        rope_table(cs, sn, T, HS, 10000.0);
        TIME("rope fwd+bwd (4x256x12x64)", 4.0 * n * 4, {
            rope_forward(x, cs, sn, B, T, NH, HS, 0);
            rope_backward(x, cs, sn, B, T, NH, HS, 0);
        });
        sink = x[1];
        free(x); free(cs); free(sn);
    }
    // residual forward + backward, bias column sums on (B*T, C)
    {
        size_t n = N * C;
        float *a = randv(n, 1.0f, 11), *b = randv(n, 1.0f, 12), *o = malloc(n * 4), *da = calloc(n, 4), *db = calloc(n, 4);
        float *bias = calloc(4 * C, 4);
        TIME("residual fwd+bwd, colsum", 9.0 * n * 4, {
            residual_forward(o, a, b, n);
            residual_backward(da, db, o, n);
            colsum_accumulate(bias, o, (int)N, C);
        });
        sink = da[2] + bias[3];
        free(a); free(b); free(o); free(da); free(db); free(bias);
    }
    // token + position embedding forward + backward (one channel, V x C table)
    {
        size_t n = N * C;
        float *wte = randv((size_t)V * C, 0.02f, 13), *wpe = randv((size_t)T * C, 0.02f, 14), *o = malloc(n * 4);
        float *dwte = calloc((size_t)V * C, 4), *dwpe = calloc((size_t)T * C, 4);
        uint16_t *tok = malloc(N * 2);
        for (size_t i = 0; i < N; i++) tok[i] = (uint16_t)(i * 7919 % V);
        float *const wt[1] = {wte}, *const dwt[1] = {dwte};
        TIME("embedding fwd+bwd", 6.0 * n * 4, {
            embedding_forward(o, tok, wt, wpe, B, T, 1, C);
            embedding_backward(dwt, dwpe, o, tok, B, T, 1, C);
        });
        sink = o[4] + dwpe[5];
        free(wte); free(wpe); free(o); free(dwte); free(dwpe); free(tok);
    }
    return 0;
}
