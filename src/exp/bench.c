// bench.c - training-step time against same-run sgemm, and attention kernels; see bench.h.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <cblas.h>
#include <cJSON.h>
#include "bench.h"
#include "core/json.h"
#include "core/util.h"
#include "model/gpt.h"

typedef struct { int layers, dim, heads, vocab, B, T; } shape;

/* What one timed training configuration gave. */
typedef struct {
    double ms;                          // median ms per step
    size_t params;
    double act_mib;                     // the model's activations (gpt_activation_bytes)
    int have_dev;                       // the backend reported the device (GPU)
    char dev_name[96];
    size_t held_peak, used_peak, total; // bytes, when have_dev
} step_result;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double median(double *v, int n) {
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void fill(float *x, size_t n, lssar_rng *r, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = scale * (float)(2 * lssar_rng_uniform(r) - 1);
}

/* Dense bf16 peak of a GPU in TFLOP/s from its name (NVIDIA's data sheets, without sparsity);
   0 when unknown. */
static double gpu_peak_tflops(const char *name) {
    if (strstr(name, "H100") && strstr(name, "PCIe")) return 756.0;
    if (strstr(name, "H100") || strstr(name, "H200") || strstr(name, "H800")) return 989.4;
    if (strstr(name, "A100") || strstr(name, "A800")) return 312.0;
    return 0;
}

// GFLOP/s of OpenBLAS on the forward GEMMs of one step: out (M, N) = A (M, K) W^T, W (N, K).
static double sgemm_gflops(const shape *s, int repeats) {
    const int M = s->B * s->T, C = s->dim, L = s->layers;
    struct { int N, K; double weight; } g[] = {
        {3 * C, C, L}, {C, C, L}, {4 * C, C, L}, {C, 4 * C, L}, {s->vocab, C, 1}};
    size_t maxA = (size_t)M * 4 * C, maxW = (size_t)(s->vocab > 4 * C ? s->vocab : 4 * C) * 4 * C;
    size_t maxO = (size_t)M * (s->vocab > 4 * C ? s->vocab : 4 * C);
    float *A = malloc(maxA * sizeof(float)), *W = malloc(maxW * sizeof(float)),
          *O = malloc(maxO * sizeof(float));
    if (!A || !W || !O) { free(A); free(W); free(O); return NAN; }
    lssar_rng r;
    lssar_rng_seed(&r, 7);
    fill(A, maxA, &r, 1); fill(W, maxW, &r, 0.02f);
    memset(O, 0, maxO * sizeof(float));
    double flops = 0, secs = 0;
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
        double t[16];
        int n = repeats < 16 ? repeats : 16;
        for (int k = -1; k < n; k++) {   // k = -1: warm-up
            double t0 = lssar_now();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, g[i].N, g[i].K, 1.0f, A, g[i].K, W,
                        g[i].K, 0.0f, O, g[i].N);
            if (k >= 0) t[k] = lssar_now() - t0;
        }
        flops += g[i].weight * 2.0 * M * g[i].N * g[i].K;
        secs += g[i].weight * median(t, n);
    }
    free(A); free(W); free(O);
    return flops / secs / 1e9;
}

// One training configuration: res->ms the median ms of a step. 0 or an lssar_err.
static int time_step(const shape *s, lssar_attn_kind kind, lssar_pos pos, lssar_device device, int recompute,
                     int warmup, int repeats, step_result *res) {
    gpt_config cfg = {.layers = s->layers, .heads = s->heads, .dim = s->dim, .vocab = s->vocab, .channels = 1,
                      .max_seq = s->T, .pos = pos, .attn = kind, .p = 15.0f, .tied = 1, .device = device};
    gpt *m = NULL;
    size_t n = (size_t)s->B * s->T;
    uint16_t *in = malloc(n * sizeof *in), *tg = malloc(n * sizeof *tg);
    float *sync = malloc((size_t)s->dim * sizeof *sync);
    memset(res, 0, sizeof *res);
    int rc = !in || !tg || !sync ? lssar_fail(LSSAR_E_NOMEM, "out of memory") : 0;
    if (!rc) rc = gpt_create(&cfg, 1, &m);
    if (!rc) rc = gpt_set_recompute(m, recompute);
    if (!rc) rc = gpt_reserve(m, s->B, s->T, 1);
    if (rc) {
        if (m) gpt_free(m);
        free(in); free(tg); free(sync);
        return rc;
    }
    res->params = gpt_num_params(m);
    res->act_mib = gpt_activation_bytes(m, s->B, s->T, 1) / 1048576.0;
    int lnf = gpt_tensor_index(m, "ln_f.bias");   // (C): read back after each step
    lssar_rng r;
    lssar_rng_seed(&r, 3);
    for (size_t i = 0; i < n; i++) {
        in[i] = (uint16_t)lssar_rng_below(&r, s->vocab);
        tg[i] = (uint16_t)lssar_rng_below(&r, s->vocab);
    }
    double t[64];
    // k < 0: warm-up (first touch of every buffer, GEMM plans)
    for (int k = -warmup; k < repeats && !rc; k++) {
        double t0 = lssar_now();
        float loss;
        rc = gpt_zero_grad(m);
        if (!rc) rc = gpt_forward(m, in, tg, s->B, s->T, &loss);
        if (!rc) rc = gpt_backward(m, 1.0f);
        if (!rc) gpt_clip_grad_norm(m, 1.0f);
        if (!rc) rc = gpt_adamw_step(m, k + warmup + 1, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f);
        // a download waits for the device: the AdamW just queued is inside this step's time
        if (!rc) rc = gpt_read_tensor(m, GPT_BUF_PARAM, lnf, sync);
        if (k >= 0) t[k] = lssar_now() - t0;
    }
    if (!rc) {
        res->ms = 1e3 * median(t, repeats);
        res->have_dev = !gpt_device_stats(m, res->dev_name, sizeof res->dev_name, &res->held_peak,
                                          &res->used_peak, &res->total);
    }
    gpt_free(m);
    free(in); free(tg); free(sync);
    return rc;
}

// *ms: the median ms of attention forward + backward, B = 1. 0 or an lssar_err.
static int time_attn(lssar_attn_kind kind, int T, int H, int D, int repeats, double *ms) {
    size_t n = (size_t)T * H * D;
    float *buf = malloc(8 * n * sizeof(float));
    if (!buf) return lssar_fail(LSSAR_E_NOMEM, "attention: out of memory");
    float *q = buf, *k = q + n, *v = k + n, *o = v + n, *dout = o + n, *dq = dout + n, *dk = dq + n,
          *dv = dk + n;
    lssar_rng r;
    lssar_rng_seed(&r, 5);
    fill(buf, 8 * n, &r, 1);
    lssar_attn_desc a = {.kind = kind, .p = 15.0f, .ssmax_s = NULL, .train_len = T};
    double t[64];
    int reps = repeats < 64 ? repeats : 64, rc = 0;
    for (int i = -1; i < reps && !rc; i++) {
        double t0 = lssar_now();
        rc = lssar_attn_forward(&a, 1, T, H, D, q, k, v, o);
        if (!rc) rc = lssar_attn_backward(&a, 1, T, H, D, q, k, v, dout, dq, dk, dv, NULL);
        if (i >= 0) t[i] = lssar_now() - t0;
    }
    free(buf);
    if (rc) return lssar_fail(rc, "attention: %s", lssar_errmsg());
    *ms = 1e3 * median(t, reps);
    return 0;
}

// The shapes to time: GPT-2 small's and a small one (tiny with --quick), or one of the caller's.
// shapes: room for 2; returns the count.
static int bench_shapes(const bench_opts *o, shape *shapes) {
    const shape full[] = {{12, 768, 12, 50304, 4, 256}, {4, 256, 4, 50304, 4, 256}};
    const shape tiny[] = {{2, 64, 2, 512, 2, 32}, {1, 32, 2, 256, 2, 16}};
    int n = 2;
    memcpy(shapes, o->quick ? tiny : full, sizeof full);
    if (o->layers || o->dim || o->heads || o->vocab) {
        shapes[0] = (shape){o->layers ? o->layers : 12, o->dim ? o->dim : 768, o->heads ? o->heads : 12,
                            o->vocab ? o->vocab : 50304, 4, 256};
        n = 1;
    }
    for (int i = 0; i < n; i++) {
        if (o->batch) shapes[i].B = o->batch;
        if (o->seq) shapes[i].T = o->seq;
    }
    return n;
}

// One timed step's derived figures: the table row on stdout and its JSON object in tr.
static void train_row(const bench_opts *o, lssar_attn_kind kind, const shape *s, const step_result *res,
                      cJSON *tr) {
    const int gpu = o->device == LSSAR_DEVICE_CUDA;
    double ms = res->ms, N = (double)res->params;
    double sg = gpu ? NAN : sgemm_gflops(s, 3);
    double flop = (6.0 * N + 12.0 * s->layers * s->dim * s->T) * s->B * s->T;
    double gf = flop / (ms * 1e-3) / 1e9, tps = s->B * s->T / (ms * 1e-3);
    double peak = o->peak_tflops > 0 ? o->peak_tflops
                                     : (gpu && res->have_dev ? gpu_peak_tflops(res->dev_name) : 0);
    double mfu = peak > 0 ? gf / (peak * 1e3) : NAN;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double rss = (double)ru.ru_maxrss * 1024.0;   // Linux: kilobytes
    double mem = res->have_dev ? (double)res->held_peak : rss;
    char sgs[32] = "-", rats[32] = "-", mfus[32] = "-";   // "-": not measured (GPU) or no peak known
    if (isfinite(sg)) {
        snprintf(sgs, sizeof sgs, "%.1f", sg);
        snprintf(rats, sizeof rats, "%.3f", gf / sg);
    }
    if (isfinite(mfu)) snprintf(mfus, sizeof mfus, "%.3f", mfu);
    printf("%-8s %6d %6d %6d %4d %6d %10.1f %10.1f %12s %7s %10.0f %7s %10.0f\n", lssar_attn_name(kind),
           s->layers, s->dim, s->heads, s->B, s->T, ms, gf, sgs, rats, tps, mfus, mem / 1048576.0);
    fflush(stdout);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "attn", lssar_attn_name(kind));
    cJSON_AddStringToObject(j, "pos", lssar_pos_name(o->pos));
    cJSON_AddNumberToObject(j, "layers", s->layers);
    cJSON_AddNumberToObject(j, "dim", s->dim);
    cJSON_AddNumberToObject(j, "heads", s->heads);
    cJSON_AddNumberToObject(j, "vocab", s->vocab);
    cJSON_AddNumberToObject(j, "batch", s->B);
    cJSON_AddNumberToObject(j, "seq", s->T);
    cJSON_AddNumberToObject(j, "params", N);
    cJSON_AddBoolToObject(j, "recompute", o->recompute);
    cJSON_AddNumberToObject(j, "activation_mib", res->act_mib);
    cJSON_AddNumberToObject(j, "gflop_per_step", flop / 1e9);
    cJSON_AddNumberToObject(j, "ms_per_step", ms);
    cJSON_AddNumberToObject(j, "gflops", gf);
    cJSON_AddNumberToObject(j, "tokens_per_s", tps);
    cJSON_AddItemToObject(j, "peak_tflops", lssar_json_number(peak > 0 ? peak : NAN));
    cJSON_AddItemToObject(j, "mfu", lssar_json_number(mfu));
    cJSON_AddItemToObject(j, "sgemm_gflops", lssar_json_number(sg));
    cJSON_AddItemToObject(j, "sgemm_ratio", lssar_json_number(gf / sg));
    if (res->have_dev) {
        cJSON_AddStringToObject(j, "device_name", res->dev_name);
        cJSON_AddNumberToObject(j, "device_held_peak_bytes", (double)res->held_peak);
        cJSON_AddNumberToObject(j, "device_used_peak_bytes", (double)res->used_peak);
        cJSON_AddNumberToObject(j, "device_total_bytes", (double)res->total);
    } else {
        cJSON_AddNumberToObject(j, "peak_rss_bytes", rss);
    }
    cJSON_AddItemToArray(tr, j);
}

// Every kind at every shape: one row each.
static int bench_train(const bench_opts *o, cJSON *tr) {
    shape shapes[2];
    const int nshapes = bench_shapes(o, shapes);
    printf("training step on %s (forward + backward + clip + AdamW%s), median of runs:\n",
           o->device == LSSAR_DEVICE_CUDA ? "cuda (bf16)" : "cpu",
           o->recompute ? ", activations recomputed" : "");
    printf("%-8s %6s %6s %6s %4s %6s %10s %10s %12s %7s %10s %7s %10s\n", "attn", "layers", "dim", "heads",
           "B", "T", "ms/step", "GFLOP/s", "sgemm GF/s", "ratio", "tok/s", "MFU", "peak MiB");
    for (int kk = 0; kk < o->nkinds; kk++)
        for (int i = 0; i < nshapes; i++) {
            const shape *s = &shapes[i];
            int reps = o->repeats ? o->repeats : (s->layers >= 12 ? 2 : 3);
            step_result res;
            int rc = time_step(s, o->kinds[kk], o->pos, o->device, o->recompute, o->warmup, reps, &res);
            if (rc) return rc;
            train_row(o, o->kinds[kk], s, &res, tr);
        }
    return 0;
}

// softmax and lssar forward + backward at a few lengths (CPU kernels), with the ratio to softmax.
static int bench_attention(const bench_opts *o, cJSON *at) {
    const int fullT[] = {256, 1024, 4096}, tinyT[] = {32, 64};
    const int *Ts = o->quick ? tinyT : fullT;
    const int nT = o->quick ? 2 : 3, H = o->quick ? 2 : 12, D = o->quick ? 16 : 64;
    printf("attention forward + backward, B = 1, H = %d, D = %d:\n%8s %8s %12s %10s\n", H, D, "kind", "T",
           "ms", "vs softmax");
    const lssar_attn_kind kinds[] = {LSSAR_ATTN_SOFTMAX, LSSAR_ATTN_LSSAR};
    for (int j = 0; j < nT; j++) {
        double base = NAN;
        for (int kk = 0; kk < 2; kk++) {
            int reps = o->repeats ? o->repeats : (Ts[j] >= 4096 ? 2 : 3);
            double ms = 0;
            int rc = time_attn(kinds[kk], Ts[j], H, D, reps, &ms);
            if (rc) return rc;
            if (kk == 0) base = ms;
            printf("%8s %8d %12.2f %10.2f\n", lssar_attn_name(kinds[kk]), Ts[j], ms, ms / base);
            fflush(stdout);
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "kind", lssar_attn_name(kinds[kk]));
            cJSON_AddNumberToObject(e, "T", Ts[j]);
            cJSON_AddNumberToObject(e, "heads", H);
            cJSON_AddNumberToObject(e, "head_dim", D);
            cJSON_AddNumberToObject(e, "fwd_bwd_ms", ms);
            cJSON_AddNumberToObject(e, "ratio_vs_softmax", ms / base);
            cJSON_AddItemToArray(at, e);
        }
    }
    return 0;
}

int bench_run(const bench_opts *o) {
    const int gpu = o->device == LSSAR_DEVICE_CUDA;
    if (o->threads > 0) lssar_set_threads(o->threads);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "device", lssar_device_name(o->device));
    cJSON_AddNumberToObject(root, "threads", o->threads > 0 ? o->threads : omp_get_max_threads());
    cJSON_AddBoolToObject(root, "quick", o->quick);
    cJSON_AddStringToObject(root, "train_attn", o->attn_list);
    cJSON *tr = cJSON_AddArrayToObject(root, "train"), *at = cJSON_AddArrayToObject(root, "attention");
    int rc = o->no_train ? 0 : bench_train(o, tr);
    if (!o->no_attn && !rc && gpu)
        printf("attention kernels: not timed on the GPU here (bench/gpu_attn times them: make gpu-bench)\n");
    if (!o->no_attn && !rc && !gpu) rc = bench_attention(o, at);
    if (!rc && o->json && (rc = lssar_write_json(o->json, root)))
        lssar_fail(rc, "--json: %s", lssar_errmsg());
    cJSON_Delete(root);
    return rc;
}
