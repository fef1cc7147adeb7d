/*
 * bench/attention.c - forward + backward time of the CPU attention kernels, softmax against lssar
 * (and the other kinds), measured in the same run so the ratio is meaningful on a shared machine.
 *
 *   build/bench/attention [T ...]        default T = 256 1024 4096; B = 1, H = 12, D = 64
 *
 * Each figure is the median of several repetitions after one warm-up call.
 */
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>
#include "lssar.h"
#include "core/util.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}
static double last_cpu_ms;  // CPU time per call of the last time_kind (all threads, spin-waits included)

// Median milliseconds of fwd (which = 0), bwd (1) or fwd + bwd (2).
static double time_kind(const lssar_attn_desc *a, int B, int T, int H, int D, float *q, float *k, float *v,
                        float *out, float *dy, float *dq, float *dk, float *dv, float *ds, int reps, int which) {
    double t[64], c0 = 0;
    if (reps > 64) reps = 64;
    for (int r = -1; r < reps; r++) {
        if (r == 0) c0 = cpu_now();
        double t0 = lssar_now();
        if (which != 1 && lssar_attn_forward(a, B, T, H, D, q, k, v, out)) {
            fprintf(stderr, "forward failed: %s\n", lssar_errmsg());
            exit(1);
        }
        if (which != 0 && lssar_attn_backward(a, B, T, H, D, q, k, v, dy, dq, dk, dv, ds)) {
            fprintf(stderr, "backward failed: %s\n", lssar_errmsg());
            exit(1);
        }
        if (r >= 0) t[r] = (lssar_now() - t0) * 1e3;
    }
    last_cpu_ms = (cpu_now() - c0) * 1e3 / reps;
    qsort(t, reps, sizeof(double), cmp_double);
    return t[reps / 2];
}

int main(int argc, char **argv) {
    int Ts[16], nT = 0;
    for (int i = 1; i < argc && nT < 16; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: %s [T ...]   (default 256 1024 4096; B=1 H=12 D=64)\n", argv[0]);
            return 0;
        }
        Ts[nT] = atoi(argv[i]);
        if (Ts[nT] <= 0) { fprintf(stderr, "bad T '%s': give positive sequence lengths\n", argv[i]); return 1; }
        nT++;
    }
    if (!nT) { Ts[0] = 256; Ts[1] = 1024; Ts[2] = 4096; nT = 3; }
    int B = 1, H = 12, D = 64;
    printf("attention fwd+bwd, B=%d H=%d D=%d, %d threads (median ms; shared machine: noisy)\n", B, H, D,
           omp_get_max_threads());
    printf("%6s %10s %10s %10s %10s %10s %10s %8s %12s %12s\n", "T", "softmax_f", "softmax_fb", "ssmax_fb", "lssa_fb",
           "lssar_f", "lssar_fb", "ratio", "cpu_soft_fb", "cpu_lssar_fb");
    for (int ti = 0; ti < nT; ti++) {
        int T = Ts[ti];
        size_t N = (size_t)B * T * H * D;
        float *buf = malloc(8 * N * sizeof(float));
        if (!buf) { fprintf(stderr, "out of memory\n"); return 1; }
        float *q = buf, *k = q + N, *v = k + N, *dy = v + N, *out = dy + N, *dq = out + N, *dk = dq + N, *dv = dk + N;
        lssar_rng r;
        lssar_rng_seed(&r, 1);
        for (size_t i = 0; i < 4 * N; i++) buf[i] = (float)lssar_rng_normal(&r);
        float s[64], ds[64];
        for (int h = 0; h < H; h++) s[h] = 0.43f;
        int reps = T <= 256 ? 31 : T <= 1024 ? 11 : 5;
        double ms[4], msf_soft, msf_lssar;
        for (int kind = 0; kind < 4; kind++) {
            lssar_attn_desc a = {.kind = kind, .p = 15.0f, .ssmax_s = s};
            ms[kind] = time_kind(&a, B, T, H, D, q, k, v, out, dy, dq, dk, dv, ds, reps, 2);
        }
        lssar_attn_desc sm = {.kind = LSSAR_ATTN_SOFTMAX}, lr = {.kind = LSSAR_ATTN_LSSAR, .p = 15.0f};
        msf_soft = time_kind(&sm, B, T, H, D, q, k, v, out, dy, dq, dk, dv, ds, reps, 0);
        msf_lssar = time_kind(&lr, B, T, H, D, q, k, v, out, dy, dq, dk, dv, ds, reps, 0);
        // the ratio from a second, interleaved measurement of both, to damp drift
        double s2 = time_kind(&sm, B, T, H, D, q, k, v, out, dy, dq, dk, dv, ds, reps, 2);
        double cs = last_cpu_ms;
        double l2 = time_kind(&lr, B, T, H, D, q, k, v, out, dy, dq, dk, dv, ds, reps, 2);
        double cl = last_cpu_ms;
        double ratio = (ms[3] + l2) / (ms[0] + s2);
        printf("%6d %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f %8.2f %12.2f %12.2f\n", T, msf_soft, ms[0], ms[1], ms[2],
               msf_lssar, ms[3], ratio, cs, cl);
        fflush(stdout);
        free(buf);
    }
    return 0;
}
