// cmd_bench.c - `lssar bench`: training-step time against same-run sgemm, and attention kernels.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
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
    "vocabulary 50304, B = 4, T = 256, on random tokens (or one shape of your own: --layers, --dim,\n"
    "--heads, --vocab, --batch, --seq; unset ones keep GPT-2 small's, B = 4, T = 256), for each kind\n"
    "in --attn; report ms/step, tokens/s and GFLOP/s with FLOPs/step = (6 N + 12 L C T) B T\n"
    "(N = parameter count), MFU = that rate / the device's peak, and peak memory. On the CPU, next\n"
    "to OpenBLAS sgemm GFLOP/s measured in the same run on the step's own matrix shapes (the forward\n"
    "GEMMs of one block and the output layer, weighted by how often a step runs them), and their\n"
    "ratio. Then (CPU only) attention forward + backward (lssar_attn_forward/backward, B = 1,\n"
    "H = 12, D = 64) for softmax and lssar at T = 256, 1024, 4096 (on a GPU: bench/gpu_attn).\n"
    "Each time is the median of --repeats runs after --warmup untimed ones; a step ends with a\n"
    "read-back from the device, so a GPU step's time includes all its work.\n"
    "--device cuda: the model in a bf16 context (docs/CUDA.md); MFU against the GPU's dense bf16\n"
    "peak, from its name (H100 / H200 SXM 989.4 TFLOP/s, H100 PCIe 756, A100 312) or\n"
    "--peak-tflops; peak memory = the most bytes the model's backend context held (parameters,\n"
    "optimiser state, activations, scratch) and the most device memory in use (cudaMemGetInfo).\n"
    "--device cpu: MFU only with --peak-tflops; peak memory = the process's peak RSS (getrusage:\n"
    "the most so far, so later rows include earlier ones).\n"
    "--quick: tiny shapes (for tests). Times on a shared machine are noisy: compare ratios.\n"
    "--recompute: the steps recompute the blocks' activations in the backward (lssar train\n"
    "--recompute); GFLOP/s still counts the model's FLOPs, so it shows what recomputation costs.\n"
    "JSON (--json): {\"device\", \"threads\", \"quick\", \"train_attn\", \"train\": [{\"attn\", \"pos\",\n"
    "\"layers\", \"dim\", \"heads\", \"vocab\", \"batch\", \"seq\", \"params\", \"recompute\",\n"
    "\"activation_mib\", \"gflop_per_step\",\n"
    "\"ms_per_step\", \"gflops\", \"tokens_per_s\", \"peak_tflops\", \"mfu\" (null: peak unknown),\n"
    "\"sgemm_gflops\", \"sgemm_ratio\" (null on a GPU), \"peak_rss_bytes\" (CPU), \"device_name\",\n"
    "\"device_held_peak_bytes\", \"device_used_peak_bytes\", \"device_total_bytes\" (GPU)}, ...],\n"
    "\"attention\": [{\"kind\", \"T\", \"heads\", \"head_dim\", \"fwd_bwd_ms\", \"ratio_vs_softmax\"}, "
    "...]}.";

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

// One training configuration: res->ms the median ms of a step. Returns 1 on failure (message printed).
static int time_step(const shape *s, lssar_attn_kind kind, lssar_pos pos, lssar_device device, int recompute,
                     int warmup, int repeats, step_result *res) {
    gpt_config cfg = {.layers = s->layers, .heads = s->heads, .dim = s->dim, .vocab = s->vocab, .channels = 1,
                      .max_seq = s->T, .pos = pos, .attn = kind, .p = 15.0f, .tied = 1, .device = device};
    gpt *m = NULL;
    size_t n = (size_t)s->B * s->T;
    uint16_t *in = malloc(n * sizeof *in), *tg = malloc(n * sizeof *tg);
    float *sync = malloc((size_t)s->dim * sizeof *sync);
    memset(res, 0, sizeof *res);
    if (!in || !tg || !sync || gpt_create(&cfg, 1, &m) || gpt_set_recompute(m, recompute) ||
        gpt_reserve(m, s->B, s->T, 1)) {
        fprintf(stderr, "lssar bench: %s\n", in && tg && sync ? lssar_errmsg() : "out of memory");
        if (m) gpt_free(m);
        free(in); free(tg); free(sync);
        return 1;
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
    int rc = 0;
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
    if (rc) fprintf(stderr, "lssar bench: %s\n", lssar_errmsg());
    else {
        res->ms = 1e3 * median(t, repeats);
        res->have_dev = !gpt_device_stats(m, res->dev_name, sizeof res->dev_name, &res->held_peak,
                                          &res->used_peak, &res->total);
    }
    gpt_free(m);
    free(in); free(tg); free(sync);
    return rc ? 1 : 0;
}

// Median ms of attention forward + backward, B = 1.
static double time_attn(lssar_attn_kind kind, int T, int H, int D, int repeats) {
    size_t n = (size_t)T * H * D;
    float *buf = malloc(8 * n * sizeof(float));
    if (!buf) return NAN;
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
    if (rc) { fprintf(stderr, "lssar bench: attention: %s\n", lssar_errmsg()); return NAN; }
    return 1e3 * median(t, reps);
}


int cmd_bench(int argc, char **argv) {
    const char *json = NULL, *attn = "lssar", *device_name = "cpu", *pos_name = "rope";
    int quick = 0, repeats = 0, threads = 0, no_train = 0, no_attn = 0, warmup = 1, recompute = 0;
    int layers = 0, dim = 0, heads = 0, vocab = 0, batch = 0, seq = 0;
    float peak_tflops = 0;
    arg_spec sp[] = {
        {"json", ARG_STR, &json, "write the results as JSON to this file", 0, 0},
        {"quick", ARG_BOOL, &quick, "tiny shapes (seconds; for tests)", 0, 0},
        {"device", ARG_STR, &device_name, ARGS_DEVICE_HELP, 0, 0},
        {"attn", ARG_STR, &attn,
         "attention kinds of the timed training steps, a list (e.g. softmax,lssar): one row per kind and "
         "shape",
         0, 0},
        {"layers", ARG_INT, &layers,
         "time one shape of your own: layers (0: the default shapes; an unset shape flag takes GPT-2 "
         "small's)",
         0, 0},
        {"dim", ARG_INT, &dim, "its width (0: 768 with a shape of your own)", 0, 0},
        {"heads", ARG_INT, &heads, "its heads (0: 12 with a shape of your own)", 0, 0},
        {"vocab", ARG_INT, &vocab, "its vocabulary, <= 65535 (0: 50304)", 0, 0},
        {"batch", ARG_INT, &batch, "sequences per step, B (0: 4, or 2 with --quick)", 0, 0},
        {"seq", ARG_INT, &seq, "sequence length, T (0: 256, or the tiny shapes' with --quick)", 0, 0},
        {"pos", ARG_STR, &pos_name, "positions: rope, learned (GPT-2's) or none", 0, 0},
        {"peak-tflops", ARG_FLOAT, &peak_tflops,
         "the device's peak TFLOP/s for MFU (0: a known GPU's dense bf16 peak from its name; none on the "
         "CPU)",
         0, 0},
        {"warmup", ARG_INT, &warmup, "untimed runs before each measurement", 0, 0},
        {"repeats", ARG_INT, &repeats,
         "timed runs per measurement, at most 64 (0: 3, or 2 for a 12-layer step)", 0, 0},
        {"threads", ARG_INT, &threads, "CPU threads (0: all cores)", 0, 0},
        {"no-train", ARG_BOOL, &no_train, "skip the training steps", 0, 0},
        {"no-attn", ARG_BOOL, &no_attn, "skip the attention kernels", 0, 0},
        {"recompute", ARG_BOOL, &recompute, "training steps with activation recomputation (see above)", 0, 0},
        {0}};
    int rc = args_parse("bench", ABOUT, sp, argc, argv);
    if (rc >= 0) return rc;
    rc = 0;
    lssar_attn_kind kinds_list[8];
    int nkinds = 0;
    {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", attn);
        for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            if (nkinds == 8) return args_error("bench", "--attn: at most 8 kinds");
            if (args_attn_kind("bench", tok, &kinds_list[nkinds])) return 2;
            nkinds++;
        }
        if (!nkinds)
            return args_error("bench", "--attn is empty: give a kind, e.g. --attn lssar or --attn "
                                       "softmax,lssar");
    }
    int pos = gpt_pos_parse(pos_name);
    if (pos < 0) return args_error("bench", "--pos '%s' is unknown: use rope, learned or none", pos_name);
    if (repeats < 0 || repeats > 64) return args_error("bench", "--repeats must be 0 to 64 (0: the default)");
    if (warmup < 0) return args_error("bench", "--warmup must be >= 0");
    if (threads < 0) return args_error("bench", "--threads must be >= 0");
    if (layers < 0 || dim < 0 || heads < 0 || vocab < 0 || batch < 0 || seq < 0)
        return args_error("bench", "--layers, --dim, --heads, --vocab, --batch and --seq must be >= 0 (0: "
                                   "the default)");
    if (vocab > 65535) return args_error("bench", "--vocab %d: tokens are 16-bit, use at most 65535", vocab);
    if (!(peak_tflops >= 0) || !isfinite(peak_tflops))
        return args_error("bench", "--peak-tflops must be a number >= 0 (0: from the GPU's name)");
    lssar_device device;
    if (args_device("bench", device_name, &device)) return 2;
    const int gpu = device == LSSAR_DEVICE_CUDA;
    if (threads > 0) lssar_set_threads(threads);
    shape full[] = {{12, 768, 12, 50304, 4, 256}, {4, 256, 4, 50304, 4, 256}};
    shape tiny[] = {{2, 64, 2, 512, 2, 32}, {1, 32, 2, 256, 2, 16}};
    shape own = {layers ? layers : 12, dim ? dim : 768, heads ? heads : 12, vocab ? vocab : 50304, 4, 256};
    shape *shapes = quick ? tiny : full;
    int nshapes = 2;
    if (layers || dim || heads || vocab) { shapes = &own; nshapes = 1; }
    for (int i = 0; i < nshapes; i++) {
        if (batch) shapes[i].B = batch;
        if (seq) shapes[i].T = seq;
    }
    int fullT[] = {256, 1024, 4096}, tinyT[] = {32, 64};
    const int *Ts = quick ? tinyT : fullT;
    int nT = quick ? 2 : 3, H = quick ? 2 : 12, D = quick ? 16 : 64;

    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "device", lssar_device_name(device));
    cJSON_AddNumberToObject(root, "threads", threads > 0 ? threads : omp_get_max_threads());
    cJSON_AddBoolToObject(root, "quick", quick);
    cJSON_AddStringToObject(root, "train_attn", attn);
    cJSON *tr = cJSON_AddArrayToObject(root, "train"), *at = cJSON_AddArrayToObject(root, "attention");
    if (!no_train) {
        printf("training step on %s (forward + backward + clip + AdamW%s), median of runs:\n",
               gpu ? "cuda (bf16)" : "cpu", recompute ? ", activations recomputed" : "");
        printf("%-8s %6s %6s %6s %4s %6s %10s %10s %12s %7s %10s %7s %10s\n", "attn", "layers", "dim",
               "heads", "B", "T", "ms/step", "GFLOP/s", "sgemm GF/s", "ratio", "tok/s", "MFU", "peak MiB");
    }
    for (int kk = 0; kk < nkinds && !no_train && !rc; kk++)
        for (int i = 0; i < nshapes && !rc; i++) {
            const shape *s = &shapes[i];
            int reps = repeats ? repeats : (s->layers >= 12 ? 2 : 3);
            step_result res;
            if (time_step(s, kinds_list[kk], (lssar_pos)pos, device, recompute, warmup, reps, &res)) {
                rc = 1;
                break;
            }
            double ms = res.ms, N = (double)res.params;
            double sg = gpu ? NAN : sgemm_gflops(s, 3);
            double flop = (6.0 * N + 12.0 * s->layers * s->dim * s->T) * s->B * s->T;
            double gf = flop / (ms * 1e-3) / 1e9, tps = s->B * s->T / (ms * 1e-3);
            double peak =
                peak_tflops > 0 ? peak_tflops : (gpu && res.have_dev ? gpu_peak_tflops(res.dev_name) : 0);
            double mfu = peak > 0 ? gf / (peak * 1e3) : NAN;
            struct rusage ru;
            getrusage(RUSAGE_SELF, &ru);
            double rss = (double)ru.ru_maxrss * 1024.0;   // Linux: kilobytes
            double mem = res.have_dev ? (double)res.held_peak : rss;
            char sgs[32] = "-", rats[32] = "-", mfus[32] = "-";   // "-": not measured (GPU) or no peak known
            if (isfinite(sg)) {
                snprintf(sgs, sizeof sgs, "%.1f", sg);
                snprintf(rats, sizeof rats, "%.3f", gf / sg);
            }
            if (isfinite(mfu)) snprintf(mfus, sizeof mfus, "%.3f", mfu);
            printf("%-8s %6d %6d %6d %4d %6d %10.1f %10.1f %12s %7s %10.0f %7s %10.0f\n",
                   lssar_attn_name(kinds_list[kk]), s->layers, s->dim, s->heads, s->B, s->T, ms, gf, sgs,
                   rats, tps, mfus, mem / 1048576.0);
            fflush(stdout);
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "attn", lssar_attn_name(kinds_list[kk]));
            cJSON_AddStringToObject(o, "pos", lssar_pos_name((lssar_pos)pos));
            cJSON_AddNumberToObject(o, "layers", s->layers);
            cJSON_AddNumberToObject(o, "dim", s->dim);
            cJSON_AddNumberToObject(o, "heads", s->heads);
            cJSON_AddNumberToObject(o, "vocab", s->vocab);
            cJSON_AddNumberToObject(o, "batch", s->B);
            cJSON_AddNumberToObject(o, "seq", s->T);
            cJSON_AddNumberToObject(o, "params", N);
            cJSON_AddBoolToObject(o, "recompute", recompute);
            cJSON_AddNumberToObject(o, "activation_mib", res.act_mib);
            cJSON_AddNumberToObject(o, "gflop_per_step", flop / 1e9);
            cJSON_AddNumberToObject(o, "ms_per_step", ms);
            cJSON_AddNumberToObject(o, "gflops", gf);
            cJSON_AddNumberToObject(o, "tokens_per_s", tps);
            cJSON_AddItemToObject(o, "peak_tflops", lssar_json_number(peak > 0 ? peak : NAN));
            cJSON_AddItemToObject(o, "mfu", lssar_json_number(mfu));
            cJSON_AddItemToObject(o, "sgemm_gflops", lssar_json_number(sg));
            cJSON_AddItemToObject(o, "sgemm_ratio", lssar_json_number(gf / sg));
            if (res.have_dev) {
                cJSON_AddStringToObject(o, "device_name", res.dev_name);
                cJSON_AddNumberToObject(o, "device_held_peak_bytes", (double)res.held_peak);
                cJSON_AddNumberToObject(o, "device_used_peak_bytes", (double)res.used_peak);
                cJSON_AddNumberToObject(o, "device_total_bytes", (double)res.total);
            } else {
                cJSON_AddNumberToObject(o, "peak_rss_bytes", rss);
            }
            cJSON_AddItemToArray(tr, o);
        }
    if (!no_attn && !rc && gpu)
        printf("attention kernels: not timed on the GPU here (bench/gpu_attn times them: make gpu-bench)\n");
    if (!no_attn && !rc && !gpu) {
        printf("attention forward + backward, B = 1, H = %d, D = %d:\n%8s %8s %12s %10s\n", H, D, "kind", "T",
               "ms", "vs softmax");
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
