// cmd_bench.c - `lssar bench`: training-step time against same-run sgemm, and attention kernels.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cblas.h>
#include <cJSON.h>
#include "args.h"
#include "lssar.h"
#include "core/util.h"
#include "model/gpt.h"
#include "core/json.h"

static const char *ABOUT =
    "Time a full training step (forward, backward, gradient clipping, AdamW) at the GPT-2-small\n"
    "shape (12 layers, width 768, 12 heads) and a small one (4 layers, width 256, 4 heads), both with\n"
    "vocabulary 50304, B = 4, T = 256, on random tokens; report ms/step and GFLOP/s with\n"
    "FLOPs/step = (6 N + 12 L C T) B T (N = parameter count), next to OpenBLAS sgemm GFLOP/s measured\n"
    "in the same run on the step's own matrix shapes (the forward GEMMs of one block and the output\n"
    "layer, weighted by how often a step runs them), and their ratio. Then attention forward +\n"
    "backward (lssar_attn_forward/backward, B = 1, H = 12, D = 64) for softmax and lssar at\n"
    "T = 256, 1024, 4096. Each time is the median of --repeats runs after one warm-up.\n"
    "--quick: tiny shapes (for tests). Times on a shared machine are noisy: compare ratios.\n"
    "--recompute: the steps recompute the blocks' activations in the backward (lssar train\n"
    "--recompute); GFLOP/s still counts the model's FLOPs, so it shows what recomputation costs.\n"
    "JSON (--json): {\"train\": [{\"layers\", \"dim\", \"heads\", \"vocab\", \"batch\", \"seq\", \"params\",\n"
    "\"recompute\", \"activation_mib\", \"ms_per_step\", \"gflops\", \"sgemm_gflops\", \"sgemm_ratio\",\n"
    "\"tokens_per_s\"}, ...],\n"
    "\"attention\": [{\"kind\", \"T\", \"fwd_bwd_ms\", \"ratio_vs_softmax\"}, ...]}.";

typedef struct { int layers, dim, heads, vocab, B, T; } shape;

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

// GFLOP/s of OpenBLAS on the forward GEMMs of one step: out (M, N) = A (M, K) W^T, W (N, K).
static double sgemm_gflops(const shape *s, int repeats) {
    const int M = s->B * s->T, C = s->dim, L = s->layers;
    struct { int N, K; double weight; } g[] = {
        {3 * C, C, L}, {C, C, L}, {4 * C, C, L}, {C, 4 * C, L}, {s->vocab, C, 1}};
    size_t maxA = (size_t)M * 4 * C, maxW = (size_t)(s->vocab > 4 * C ? s->vocab : 4 * C) * 4 * C;
    size_t maxO = (size_t)M * (s->vocab > 4 * C ? s->vocab : 4 * C);
    float *A = malloc(maxA * sizeof(float)), *W = malloc(maxW * sizeof(float)), *O = malloc(maxO * sizeof(float));
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
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, g[i].N, g[i].K, 1.0f, A, g[i].K, W, g[i].K, 0.0f, O, g[i].N);
            if (k >= 0) t[k] = lssar_now() - t0;
        }
        flops += g[i].weight * 2.0 * M * g[i].N * g[i].K;
        secs += g[i].weight * median(t, n);
    }
    free(A); free(W); free(O);
    return flops / secs / 1e9;
}

// Median ms of a training step; *params set. Returns NAN on failure (message printed).
static double time_step(const shape *s, lssar_attn_kind kind, int recompute, int repeats, size_t *params,
                        double *act_mib) {
    gpt_config cfg = {.layers = s->layers, .heads = s->heads, .dim = s->dim, .vocab = s->vocab, .channels = 1,
                      .max_seq = s->T, .pos = GPT_POS_ROPE, .attn = kind, .p = 15.0f, .tied = 1};
    gpt *m = NULL;
    size_t n = (size_t)s->B * s->T;
    uint16_t *in = malloc(n * sizeof *in), *tg = malloc(n * sizeof *tg);
    if (!in || !tg || gpt_create(&cfg, 1, &m) || gpt_set_recompute(m, recompute) || gpt_reserve(m, s->B, s->T, 1)) {
        fprintf(stderr, "lssar bench: %s\n", in && tg ? lssar_errmsg() : "out of memory");
        if (m) gpt_free(m);
        free(in); free(tg);
        return NAN;
    }
    *params = gpt_num_params(m);
    *act_mib = gpt_activation_bytes(m, s->B, s->T, 1) / 1048576.0;
    lssar_rng r;
    lssar_rng_seed(&r, 3);
    for (size_t i = 0; i < n; i++) { in[i] = (uint16_t)lssar_rng_below(&r, s->vocab); tg[i] = (uint16_t)lssar_rng_below(&r, s->vocab); }
    double t[64];
    int reps = repeats < 64 ? repeats : 64, rc = 0;
    for (int k = -1; k < reps && !rc; k++) {   // k = -1: warm-up (first touch of every buffer)
        double t0 = lssar_now();
        float loss;
        rc = gpt_zero_grad(m);
        if (!rc) rc = gpt_forward(m, in, tg, s->B, s->T, &loss);
        if (!rc) rc = gpt_backward(m, 1.0f);
        if (!rc) gpt_clip_grad_norm(m, 1.0f);
        if (!rc) rc = gpt_adamw_step(m, k + 2, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f);
        if (k >= 0) t[k] = lssar_now() - t0;
    }
    if (rc) fprintf(stderr, "lssar bench: %s\n", lssar_errmsg());
    gpt_free(m);
    free(in); free(tg);
    return rc ? NAN : 1e3 * median(t, reps);
}

// Median ms of attention forward + backward, B = 1.
static double time_attn(lssar_attn_kind kind, int T, int H, int D, int repeats) {
    size_t n = (size_t)T * H * D;
    float *buf = malloc(8 * n * sizeof(float));
    if (!buf) return NAN;
    float *q = buf, *k = q + n, *v = k + n, *o = v + n, *dout = o + n, *dq = dout + n, *dk = dq + n, *dv = dk + n;
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
    if (rc) { fprintf(stderr, "lssar bench: attention: %s\n", lssar_errmsg()); return NAN; }
    return 1e3 * median(t, reps);
}

int cmd_bench(int argc, char **argv) {
    const char *json = NULL, *attn = "lssar";
    int quick = 0, repeats = 0, threads = 0, no_train = 0, no_attn = 0, recompute = 0;
    arg_spec sp[] = {
        {"json", ARG_STR, &json, "write the results as JSON to this file", 0, 0},
        {"quick", ARG_BOOL, &quick, "tiny shapes (seconds; for tests)", 0, 0},
        {"attn", ARG_STR, &attn, "attention kind of the timed training steps", 0, 0},
        {"repeats", ARG_INT, &repeats, "timed runs per measurement (0: 3, or 2 for the 124M step)", 0, 0},
        {"threads", ARG_INT, &threads, "CPU threads (0: all cores)", 0, 0},
        {"no-train", ARG_BOOL, &no_train, "skip the training steps", 0, 0},
        {"no-attn", ARG_BOOL, &no_attn, "skip the attention kernels", 0, 0},
        {"recompute", ARG_BOOL, &recompute, "training steps with activation recomputation (see above)", 0, 0},
        {0}};
    int rc = args_parse("bench", ABOUT, sp, argc, argv);
    if (rc >= 0) return rc;
    rc = 0;
    lssar_attn_kind kind;
    if (args_attn_kind(attn, &kind)) return args_error("bench", "--attn '%s' is unknown: use softmax, ssmax, lssa, lssar, sigmoid or relu", attn);
    if (repeats < 0) return args_error("bench", "--repeats must be >= 0");
    if (threads < 0) return args_error("bench", "--threads must be >= 0");
    if (threads > 0) lssar_set_threads(threads);
    shape full[] = {{12, 768, 12, 50304, 4, 256}, {4, 256, 4, 50304, 4, 256}};
    shape tiny[] = {{2, 64, 2, 512, 2, 32}, {1, 32, 2, 256, 2, 16}};
    const shape *shapes = quick ? tiny : full;
    int nshapes = 2;
    int fullT[] = {256, 1024, 4096}, tinyT[] = {32, 64};
    const int *Ts = quick ? tinyT : fullT;
    int nT = quick ? 2 : 3, H = quick ? 2 : 12, D = quick ? 16 : 64;

    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "threads", threads > 0 ? threads : omp_get_max_threads());
    cJSON_AddBoolToObject(root, "quick", quick);
    cJSON_AddStringToObject(root, "train_attn", lssar_attn_name((lssar_attn_kind)kind));
    cJSON *tr = cJSON_AddArrayToObject(root, "train"), *at = cJSON_AddArrayToObject(root, "attention");
    if (!no_train) {
        printf("training step (%s attention, forward + backward + AdamW%s), median of runs:\n",
               lssar_attn_name((lssar_attn_kind)kind), recompute ? ", recompute" : "");
        printf("%6s %6s %6s %6s %12s %10s %12s %8s %10s %10s\n", "layers", "dim", "B", "T", "ms/step", "GFLOP/s", "sgemm GF/s",
               "ratio", "tok/s", "acts MiB");
    }
    for (int i = 0; i < nshapes && !no_train && !rc; i++) {
        const shape *s = &shapes[i];
        int reps = repeats ? repeats : (s->layers >= 12 ? 2 : 3);
        size_t N = 0;
        double act = 0;
        double ms = time_step(s, (lssar_attn_kind)kind, recompute, reps, &N, &act);
        if (isnan(ms)) { rc = 1; break; }
        double sg = sgemm_gflops(s, 3);
        double flop = (6.0 * N + 12.0 * s->layers * s->dim * s->T) * s->B * s->T;
        double gf = flop / (ms * 1e-3) / 1e9;
        printf("%6d %6d %6d %6d %12.1f %10.1f %12.1f %8.3f %10.0f %10.1f\n", s->layers, s->dim, s->B, s->T, ms, gf, sg, gf / sg,
               s->B * s->T / (ms * 1e-3), act);
        fflush(stdout);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "layers", s->layers);
        cJSON_AddNumberToObject(o, "dim", s->dim);
        cJSON_AddNumberToObject(o, "heads", s->heads);
        cJSON_AddNumberToObject(o, "vocab", s->vocab);
        cJSON_AddNumberToObject(o, "batch", s->B);
        cJSON_AddNumberToObject(o, "seq", s->T);
        cJSON_AddNumberToObject(o, "params", (double)N);
        cJSON_AddBoolToObject(o, "recompute", recompute);
        cJSON_AddNumberToObject(o, "activation_mib", act);
        cJSON_AddNumberToObject(o, "gflop_per_step", flop / 1e9);
        cJSON_AddNumberToObject(o, "ms_per_step", ms);
        cJSON_AddNumberToObject(o, "gflops", gf);
        cJSON_AddNumberToObject(o, "sgemm_gflops", sg);
        cJSON_AddNumberToObject(o, "sgemm_ratio", gf / sg);
        cJSON_AddNumberToObject(o, "tokens_per_s", s->B * s->T / (ms * 1e-3));
        cJSON_AddItemToArray(tr, o);
    }
    if (!no_attn && !rc) {
        printf("attention forward + backward, B = 1, H = %d, D = %d:\n%8s %8s %12s %10s\n", H, D, "kind", "T", "ms", "vs softmax");
        lssar_attn_kind kinds[] = {LSSAR_ATTN_SOFTMAX, LSSAR_ATTN_LSSAR};
        for (int j = 0; j < nT && !rc; j++) {
            double base = NAN;
            for (int kk = 0; kk < 2; kk++) {
                int reps = repeats ? repeats : (Ts[j] >= 4096 ? 2 : 3);
                double ms = time_attn(kinds[kk], Ts[j], H, D, reps);
                if (isnan(ms)) { rc = 1; break; }
                if (kk == 0) base = ms;
                printf("%8s %8d %12.2f %10.2f\n", lssar_attn_name(kinds[kk]), Ts[j], ms, ms / base);
                fflush(stdout);
                cJSON *o = cJSON_CreateObject();
                cJSON_AddStringToObject(o, "kind", lssar_attn_name(kinds[kk]));
                cJSON_AddNumberToObject(o, "T", Ts[j]);
                cJSON_AddNumberToObject(o, "heads", H);
                cJSON_AddNumberToObject(o, "head_dim", D);
                cJSON_AddNumberToObject(o, "fwd_bwd_ms", ms);
                cJSON_AddNumberToObject(o, "ratio_vs_softmax", ms / base);
                cJSON_AddItemToArray(at, o);
            }
        }
    }
    if (!rc && json) {
        if (lssar_write_json(json, root)) {
            fprintf(stderr, "lssar bench: --json: %s\n", lssar_errmsg());
            rc = 1;
        }
    }
    cJSON_Delete(root);
    return rc ? 1 : 0;
}
