/*
 * gpu_attn.c - times fused causal attention forward + backward on the GPU through the public API
 * (lssar_attn_forward_cuda / lssar_attn_backward_cuda, bf16 storage), for softmax, lssa and lssar
 * (p = 15) at T = 1024, 4096, 16384 with H = 12, D = 64 and 16k tokens per call (B = 16, 4, 1):
 * the shapes of spec/anchors.md, where PyTorch SDPA (flash) took 0.749 / 1.165 / 3.41 ms forward
 * + backward. scripts/gpu_attn_torch.py times SDPA and plain-PyTorch LSSAR in the same run;
 * scripts/gpu-check.sh puts the two together (ratios against SDPA, the goals).
 *
 *   gpu_attn [--json FILE] [--iters N] [--warmup N] [--T 1024,4096,16384] [--tokens 16384]
 *            [--heads 12] [--kinds softmax,lssa,lssar]
 *
 * Method (the device notes' METHOD.md): random bf16 inputs (never zeros); several input sets
 * (q, k, v, dout, outputs and workspace each) rotated so that each call reads data that is not in
 * the 60 MB L2 from the call before; warm-up calls first; CUDA events around the forward and the
 * backward of every iteration, no host synchronisation between iterations; the median of N (and
 * p10 / p90 to show the spread). Every call's return code is checked and the outputs of the last
 * iteration are read back and must be finite, or the row is marked invalid.
 *
 * Memory: at every T, device memory in use (cudaMemGetInfo) before allocating, after allocating
 * the inputs, outputs and workspaces, and after the timed calls (growth there would be memory
 * the library takes behind the caller's back); the workspace bytes per token and head at each T
 * (constant when the memory is O(T)), against the bytes one T x T fp32 score matrix would need.
 *
 * Without a GPU (or built without CUDA): one line "SKIP: no CUDA GPU (reason)", exit 0, and
 * the JSON (if asked) says skipped.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lssar.h"

static const char *json_path;

static void write_skip_json(const char *reason) {
    if (!json_path) return;
    FILE *f = fopen(json_path, "w");
    if (!f) return;
    fprintf(f, "{\"skipped\": true, \"reason\": \"%s\"}\n", reason);
    fclose(f);
}

static void parse_common(int argc, char **argv) {
    for (int i = 1; i < argc - 1; i++)
        if (!strcmp(argv[i], "--json")) json_path = argv[i + 1];
}

#ifndef LSSAR_CUDA
int main(int argc, char **argv) {
    parse_common(argc, argv);
    const char *why = "this gpu_attn was built without CUDA (no LSSAR_CUDA); build it with `make gpu-bench CUDA=1`";
    printf("SKIP: no CUDA GPU (%s)\n", why);
    write_skip_json(why);
    return 0;
}
#else

#include <cuda_runtime_api.h>

#ifdef LSSAR_GPU_FAKE   /* tests/gpu/fake_cuda.c: a host emulation, for checking this program */
#define lssar_attn_forward_cuda fake_attn_forward_cuda
#define lssar_attn_backward_cuda fake_attn_backward_cuda
#define lssar_attn_cuda_workspace_size fake_attn_cuda_workspace_size
size_t fake_attn_cuda_workspace_size(const lssar_attn_desc *, lssar_dtype, int, int, int, int);
int fake_attn_forward_cuda(const lssar_attn_desc *, lssar_dtype, int, int, int, int, const void *,
                           const void *, const void *, void *, void *, void *);
int fake_attn_backward_cuda(const lssar_attn_desc *, lssar_dtype, int, int, int, int, const void *,
                            const void *, const void *, const void *, const void *, void *, void *,
                            void *, float *, void *, void *);
#endif

#define CU(call)                                                                                    \
    do {                                                                                            \
        cudaError_t e_ = (call);                                                                    \
        if (e_ != cudaSuccess) {                                                                    \
            fprintf(stderr, "gpu_attn: %s: %s (%s)\n", #call, cudaGetErrorName(e_), cudaGetErrorString(e_)); \
            exit(2);                                                                                \
        }                                                                                           \
    } while (0)

static uint16_t f2bf(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}
static float bf2f(uint16_t b) { uint32_t x = (uint32_t)b << 16; float f; memcpy(&f, &x, 4); return f; }

/* a pool of normal draws (xorshift + Box-Muller), spread over the buffers with a prime stride */
#define POOL 1000003
static float pool[POOL];
static void fill_pool(void) {
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < POOL; i += 2) {
        double u[2];
        for (int k = 0; k < 2; k++) {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            u[k] = ((s >> 11) + 0.5) * 0x1p-53;
        }
        double r = sqrt(-2 * log(u[0])), t = 6.283185307179586 * u[1];
        pool[i] = (float)(r * cos(t));
        if (i + 1 < POOL) pool[i + 1] = (float)(r * sin(t));
    }
}
static void fill_bf16(uint16_t *h, size_t n, size_t salt, float scale) {
    for (size_t i = 0; i < n; i++) h[i] = f2bf(scale * pool[(i * 7919 + salt * 104729 + salt) % POOL]);
}

static int cmp_float(const void *a, const void *b) { float x = *(const float *)a, y = *(const float *)b; return (x > y) - (x < y); }
static float pct(float *v, int n, double p) {   /* v sorted */
    int i = (int)floor(p * (n - 1) + 0.5);
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

static int parse_list(const char *s, int *out, int max) {
    int n = 0;
    while (*s && n < max) {
        out[n++] = atoi(s);
        const char *c = strchr(s, ',');
        if (!c) break;
        s = c + 1;
    }
    return n;
}

static const char *KN[4] = {"softmax", "ssmax", "lssa", "lssar"};

typedef struct {
    int kind, T, B, iters, valid, rc;
    double fwd_ms, bwd_ms, tot_ms, fwd_p10, fwd_p90, tot_p10, tot_p90, tflops, ws_bytes;
    size_t nonfinite;
    char err[200];
} result;

typedef struct {
    int T, B;
    double used_before_gib, used_after_alloc_gib, used_after_calls_gib, growth_gib, tensors_gib, ws_gib[4],
        ws_per_token_head[4], txt_gib;
} memrow;

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        fputc((unsigned char)*s < 32 ? ' ' : *s, f);
    }
    fputc('"', f);
}

int main(int argc, char **argv) {
    parse_common(argc, argv);
    int iters = 30, warmup = 3, tokens = 16384, H = 12, D = 64;
    int Ts[8] = {1024, 4096, 16384}, nT = 3, kinds[4] = {LSSAR_ATTN_SOFTMAX, LSSAR_ATTN_LSSA, LSSAR_ATTN_LSSAR}, nk = 3;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--json") && v) i++;
        else if (!strcmp(a, "--iters") && v) { iters = atoi(v); i++; }
        else if (!strcmp(a, "--warmup") && v) { warmup = atoi(v); i++; }
        else if (!strcmp(a, "--tokens") && v) { tokens = atoi(v); i++; }
        else if (!strcmp(a, "--heads") && v) { H = atoi(v); i++; }
        else if (!strcmp(a, "--T") && v) { nT = parse_list(v, Ts, 8); i++; }
        else if (!strcmp(a, "--kinds") && v) {
            nk = 0;
            for (const char *s = v; *s && nk < 4;) {
                for (int k = 0; k < 4; k++)
                    if (!strncmp(s, KN[k], strlen(KN[k])) && (s[strlen(KN[k])] == ',' || !s[strlen(KN[k])])) kinds[nk++] = k;
                const char *c = strchr(s, ',');
                if (!c) break;
                s = c + 1;
            }
            i++;
        } else {
            fprintf(stderr, "usage: gpu_attn [--json FILE] [--iters N] [--warmup N] [--T a,b,c] [--tokens N] [--heads H] [--kinds k1,k2]\n");
            return 2;
        }
    }
    if (iters < 1) iters = 1;
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        char why[160];
        snprintf(why, sizeof why, "cudaGetDeviceCount: %s", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        printf("SKIP: no CUDA GPU (%s)\n", why);
        write_skip_json(why);
        return 0;
    }
    struct cudaDeviceProp prop;
    CU(cudaGetDeviceProperties(&prop, 0));
    size_t l2 = prop.l2CacheSize > 0 ? (size_t)prop.l2CacheSize : (size_t)60 << 20;
    printf("gpu_attn: %s, %d SMs, L2 %.0f MB, %.1f GiB; bf16 storage, H=%d D=%d, %d tokens per call, %d warm-up + %d timed iterations\n",
           prop.name, prop.multiProcessorCount, l2 / 1e6, prop.totalGlobalMem / 1073741824.0, H, D, tokens, warmup, iters);
    fill_pool();
    result res[64];
    memrow mem[8];
    int nres = 0, failed = 0;
    for (int ti = 0; ti < nT; ti++) {
        int T = Ts[ti], B = tokens / T;
        if (B < 1) B = 1;
        size_t n = (size_t)B * T * H * D, tb = n * 2;
        /* sets of (q, k, v, dout, out, dq, dk, dv, ws): inputs of one set alone exceed the L2
           at 16k tokens; at least 3 sets, and enough that the inputs of all are >= 4 L2 */
        int nsets = (int)((4 * l2 + 4 * tb - 1) / (4 * tb));
        if (nsets < 3) nsets = 3;
        if (nsets > 8) nsets = 8;
        size_t fr, tot;
        CU(cudaDeviceSynchronize());
        CU(cudaMemGetInfo(&fr, &tot));
        memrow *mr = &mem[ti];
        memset(mr, 0, sizeof *mr);
        mr->T = T; mr->B = B;
        mr->used_before_gib = (tot - fr) / 1073741824.0;
        void *buf[8][8];
        uint16_t *h = malloc(tb);
        if (!h) { fprintf(stderr, "gpu_attn: out of host memory\n"); return 2; }
        for (int s = 0; s < nsets; s++)
            for (int t = 0; t < 8; t++) {
                CU(cudaMalloc(&buf[s][t], tb));
                if (t < 4) {
                    fill_bf16(h, n, (size_t)s * 8 + t + 1, t == 0 ? 1.5f : 1.0f);
                    CU(cudaMemcpy(buf[s][t], h, tb, cudaMemcpyHostToDevice));
                } else CU(cudaMemset(buf[s][t], 0xFF, tb));
            }
        mr->tensors_gib = (double)nsets * 8 * tb / 1073741824.0;
        mr->txt_gib = (double)B * H * T * (double)T * 4 / 1073741824.0;
        for (int ki = 0; ki < nk; ki++) {
            int kind = kinds[ki];
            lssar_attn_desc a = {kind, 15.0f, NULL};
            float *sh = NULL;
            if (kind == LSSAR_ATTN_SSMAX) {   /* not in the default set; supported for completeness */
                float s43[64];
                for (int i = 0; i < 64; i++) s43[i] = 0.43f;
                CU(cudaMalloc((void **)&sh, 64 * 4));
                CU(cudaMemcpy(sh, s43, 64 * 4, cudaMemcpyHostToDevice));
                a.ssmax_s = sh;
            }
            size_t ws = lssar_attn_cuda_workspace_size(&a, LSSAR_BF16, B, T, H, D);
            void *wsb[8];
            for (int s = 0; s < nsets; s++) { CU(cudaMalloc(&wsb[s], ws ? ws : 1)); CU(cudaMemset(wsb[s], 0xFF, ws ? ws : 1)); }
            mr->ws_gib[kind] = (double)ws / 1073741824.0;
            mr->ws_per_token_head[kind] = (double)ws / ((double)B * T * H);
            size_t f2;
            CU(cudaMemGetInfo(&f2, &tot));
            double alloc_used = (tot - f2) / 1073741824.0;
            if (alloc_used > mr->used_after_alloc_gib) mr->used_after_alloc_gib = alloc_used;
            result *r = &res[nres++];
            memset(r, 0, sizeof *r);
            r->kind = kind; r->T = T; r->B = B; r->ws_bytes = (double)ws; r->valid = 1;
            int total = warmup + iters, rc = 0;
            cudaEvent_t *ev = malloc(sizeof(cudaEvent_t) * 3 * iters);
            for (int i = 0; i < 3 * iters; i++) CU(cudaEventCreate(&ev[i]));
            for (int it = 0; it < total && !rc; it++) {
                int s = it % nsets, ti2 = it - warmup;
                void **b = buf[s];
                if (ti2 >= 0) CU(cudaEventRecord(ev[3 * ti2], NULL));
                rc = lssar_attn_forward_cuda(&a, LSSAR_BF16, B, T, H, D, b[0], b[1], b[2], b[4], wsb[s], NULL);
                if (ti2 >= 0) CU(cudaEventRecord(ev[3 * ti2 + 1], NULL));
                if (!rc)
                    rc = lssar_attn_backward_cuda(&a, LSSAR_BF16, B, T, H, D, b[0], b[1], b[2], b[4], b[3], b[5], b[6], b[7],
                                                  NULL, wsb[s], NULL);
                if (ti2 >= 0) CU(cudaEventRecord(ev[3 * ti2 + 2], NULL));
                if (it == warmup - 1 || (warmup == 0 && it == 0)) {
                    e = cudaDeviceSynchronize();
                    if (e != cudaSuccess) { snprintf(r->err, sizeof r->err, "CUDA error in warm-up: %s", cudaGetErrorString(e)); rc = -1; }
                }
            }
            e = cudaDeviceSynchronize();
            if (e == cudaSuccess) e = cudaGetLastError();
            if (rc || e != cudaSuccess) {
                r->valid = 0; r->rc = rc;
                if (!r->err[0])
                    snprintf(r->err, sizeof r->err, "%s", rc > 0 ? lssar_errmsg() : e != cudaSuccess ? cudaGetErrorString(e) : "error");
                failed = 1;
                printf("  %-7s T=%-5d B=%-2d  FAILED: %s\n", KN[kind], T, B, r->err);
                if (e != cudaSuccess) { fprintf(stderr, "gpu_attn: CUDA error %s: stopping\n", cudaGetErrorString(e)); return 2; }
            } else {
                float *f = malloc(sizeof(float) * iters), *b2 = malloc(sizeof(float) * iters), *t2 = malloc(sizeof(float) * iters);
                for (int i = 0; i < iters; i++) {
                    float x, y;
                    CU(cudaEventElapsedTime(&x, ev[3 * i], ev[3 * i + 1]));
                    CU(cudaEventElapsedTime(&y, ev[3 * i + 1], ev[3 * i + 2]));
                    f[i] = x; b2[i] = y; t2[i] = x + y;
                }
                qsort(f, iters, sizeof(float), cmp_float);
                qsort(b2, iters, sizeof(float), cmp_float);
                qsort(t2, iters, sizeof(float), cmp_float);
                r->iters = iters;
                r->fwd_ms = pct(f, iters, 0.5); r->bwd_ms = pct(b2, iters, 0.5); r->tot_ms = pct(t2, iters, 0.5);
                r->fwd_p10 = pct(f, iters, 0.1); r->fwd_p90 = pct(f, iters, 0.9);
                r->tot_p10 = pct(t2, iters, 0.1); r->tot_p90 = pct(t2, iters, 0.9);
                /* SDPA-equivalent FLOP: causal forward 2 B H T^2 D (two products over half the matrix), backward 2.5x */
                double flop = 2.0 * B * H * (double)T * T * D * 3.5;
                r->tflops = flop / (r->tot_ms * 1e-3) / 1e12;
                free(f); free(b2); free(t2);
                /* the last iteration's outputs must be finite */
                int s = (total - 1) % nsets;
                for (int t = 4; t < 8; t++) {
                    CU(cudaMemcpy(h, buf[s][t], tb, cudaMemcpyDeviceToHost));
                    for (size_t i = 0; i < n; i++) r->nonfinite += !isfinite(bf2f(h[i]));
                }
                if (r->nonfinite) { r->valid = 0; failed = 1; snprintf(r->err, sizeof r->err, "%zu non-finite outputs", r->nonfinite); }
                printf("  %-7s T=%-5d B=%-2d  fwd %8.3f ms  bwd %8.3f ms  fwd+bwd %8.3f ms (p10 %.3f, p90 %.3f)  %6.1f TFLOP/s  ws %.1f MB%s%s\n",
                       KN[kind], T, B, r->fwd_ms, r->bwd_ms, r->tot_ms, r->tot_p10, r->tot_p90, r->tflops, ws / 1e6,
                       r->valid ? "" : "  INVALID: ", r->valid ? "" : r->err);
            }
            fflush(stdout);
            for (int i = 0; i < 3 * iters; i++) cudaEventDestroy(ev[i]);
            free(ev);
            {
                size_t f3;
                CU(cudaDeviceSynchronize());
                CU(cudaMemGetInfo(&f3, &tot));
                double calls_used = (tot - f3) / 1073741824.0;
                if (calls_used > mr->used_after_calls_gib) mr->used_after_calls_gib = calls_used;
                if (calls_used - alloc_used > mr->growth_gib) mr->growth_gib = calls_used - alloc_used;
            }
            for (int s = 0; s < nsets; s++) CU(cudaFree(wsb[s]));
            if (sh) CU(cudaFree(sh));
        }
        for (int s = 0; s < nsets; s++)
            for (int t = 0; t < 8; t++) CU(cudaFree(buf[s][t]));
        free(h);
    }
    /* the table */
    printf("\n%-8s %6s %3s %10s %10s %10s %8s\n", "kind", "T", "B", "fwd ms", "bwd ms", "total ms", "TFLOP/s");
    for (int i = 0; i < nres; i++) {
        result *r = &res[i];
        if (r->valid) printf("%-8s %6d %3d %10.3f %10.3f %10.3f %8.1f\n", KN[r->kind], r->T, r->B, r->fwd_ms, r->bwd_ms, r->tot_ms, r->tflops);
        else printf("%-8s %6d %3d %10s %10s %10s %8s  (%s)\n", KN[r->kind], r->T, r->B, "-", "-", "-", "-", r->err);
    }
    printf("\nmemory (GiB in use on the device; workspace per token and head in bytes; a T x T fp32 score matrix for contrast)\n");
    printf("%6s %3s %9s %9s %9s %9s %10s", "T", "B", "before", "allocated", "after", "growth", "T x T");
    for (int ki = 0; ki < nk; ki++) printf(" %9s", KN[kinds[ki]]);
    printf("\n");
    for (int ti = 0; ti < nT; ti++) {
        memrow *m = &mem[ti];
        printf("%6d %3d %9.2f %9.2f %9.2f %9.3f %10.2f", m->T, m->B, m->used_before_gib, m->used_after_alloc_gib,
               m->used_after_calls_gib, m->growth_gib, m->txt_gib);
        for (int ki = 0; ki < nk; ki++) printf(" %9.1f", m->ws_per_token_head[kinds[ki]]);
        printf("\n");
    }
    if (json_path) {
        FILE *f = fopen(json_path, "w");
        if (!f) { fprintf(stderr, "gpu_attn: cannot write %s\n", json_path); return 2; }
        fprintf(f, "{\"skipped\": false,\n \"device\": {\"name\": ");
        json_str(f, prop.name);
        fprintf(f, ", \"sms\": %d, \"l2_bytes\": %zu, \"memory_bytes\": %zu},\n", prop.multiProcessorCount, l2,
                (size_t)prop.totalGlobalMem);
        fprintf(f, " \"config\": {\"dtype\": \"bf16\", \"H\": %d, \"D\": %d, \"tokens_per_call\": %d, \"warmup\": %d, \"iters\": %d, \"p\": 15,"
                   " \"flop_convention\": \"SDPA-equivalent: 2 B H T^2 D forward, 2.5x that backward\"},\n", H, D, tokens, warmup, iters);
        fprintf(f, " \"results\": [\n");
        for (int i = 0; i < nres; i++) {
            result *r = &res[i];
            fprintf(f, "  {\"kind\": \"%s\", \"T\": %d, \"B\": %d, \"valid\": %s, \"fwd_ms\": %.6g, \"bwd_ms\": %.6g, \"fwdbwd_ms\": %.6g,"
                       " \"fwd_p10_ms\": %.6g, \"fwd_p90_ms\": %.6g, \"fwdbwd_p10_ms\": %.6g, \"fwdbwd_p90_ms\": %.6g, \"tflops\": %.4g,"
                       " \"workspace_bytes\": %.0f, \"nonfinite\": %zu, \"error\": ",
                    KN[r->kind], r->T, r->B, r->valid ? "true" : "false", r->fwd_ms, r->bwd_ms, r->tot_ms, r->fwd_p10, r->fwd_p90,
                    r->tot_p10, r->tot_p90, r->tflops, r->ws_bytes, r->nonfinite);
            json_str(f, r->err);
            fprintf(f, "}%s\n", i + 1 < nres ? "," : "");
        }
        fprintf(f, " ],\n \"memory\": [\n");
        for (int ti = 0; ti < nT; ti++) {
            memrow *m = &mem[ti];
            fprintf(f, "  {\"T\": %d, \"B\": %d, \"used_before_gib\": %.4f, \"used_after_alloc_gib\": %.4f, \"used_after_calls_gib\": %.4f,"
                       " \"growth_during_calls_gib\": %.4f, \"our_tensors_gib\": %.4f, \"txt_fp32_gib\": %.4f,"
                       " \"workspace_per_token_head_bytes\": {",
                    m->T, m->B, m->used_before_gib, m->used_after_alloc_gib, m->used_after_calls_gib, m->growth_gib, m->tensors_gib,
                    m->txt_gib);
            for (int ki = 0; ki < nk; ki++)
                fprintf(f, "\"%s\": %.2f%s", KN[kinds[ki]], m->ws_per_token_head[kinds[ki]], ki + 1 < nk ? ", " : "");
            fprintf(f, "}}%s\n", ti + 1 < nT ? "," : "");
        }
        fprintf(f, " ]}\n");
        fclose(f);
    }
    return failed ? 1 : 0;
}
#endif
