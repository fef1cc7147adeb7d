/*
 * fake_cuda.c - a host stand-in for the CUDA backend, for checking tests/gpu/test_gpu.c and
 * bench/gpu_attn.c themselves on a machine without a GPU (`make test-gpu-fake`). NOTHING here
 * runs on a GPU and nothing here says anything about the CUDA kernels.
 *
 * It provides, under their own names (test_gpu.c / gpu_attn.c map the real names to them when
 * built with -DLSSAR_GPU_FAKE, so it links beside any liblssar):
 *   - fake_backend_cuda: an nn_backend table over host memory whose functions are the CPU
 *     emulations of the CUDA kernels (src/cuda/kernels_emu.c, src/attn/flash_emu.c: the same
 *     algorithms, orders and bf16 roundings as the kernels), and for matmul the CPU sgemm on
 *     bf16-rounded operands in an NN_BF16 context (the weights' copies, the bf16 activations),
 *     an NN_BF16 context's activations stored in bf16 as the backend stores them (tests/bf16_acts.h),
 *     and dist_sum / dist_allgather for a job of one rank only (one process: no NCCL);
 *   - fake_attn_{forward,backward}_cuda, fake_attn_cuda_workspace_size, fake_cuda_device_count:
 *     the public API over flash_emu, with bf16 storage converted on the way in and out;
 *   - the cudart calls the two programs make (cudaMalloc = aligned host memory, cudaMemcpy =
 *     memcpy, events = the host clock, one device named "FAKE").
 * Faults, to see the test catch them (FAKE_CUDA_BREAK=name[,name...]):
 *   perturb:FN     one element of FN's output moved by 1% (FN: matmul_forward, gelu_forward,
 *                  layernorm_forward, attention_forward, attention_backward, api_forward)
 *   unwritten:FN   FN's last output element left unwritten (it keeps the caller's poison)
 *   nondet:FN      FN's output changes in the last bit on every second call
 *   fatal:FN       after FN, every synchronisation fails (a sticky error, as a kernel fault)
 *   nodevice       cudaGetDeviceCount reports no device
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cuda_runtime_api.h>
#include "lssar.h"
#include "core/dist.h"
#include "core/util.h"
#include "core/fastmath.h"
#include "nn/backend.h"
#include "nn/nn.h"
#include "attn/flash_emu.h"
#include "cuda/kernels_emu.h"

/* ------------------------------------------------------------------ faults */
static int brk(const char *what, const char *fn) {
    const char *e = getenv("FAKE_CUDA_BREAK");
    if (!e) return 0;
    char key[96];
    snprintf(key, sizeof key, "%s%s%s", what, fn ? ":" : "", fn ? fn : "");
    size_t n = strlen(key);
    for (const char *p = e; (p = strstr(p, key)); p += n)
        if ((p == e || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return 1;
    return 0;
}
static int sticky;   /* fatal:FN: every later synchronisation reports an illegal address */
static void fault(const char *fn, float *x, float saved_last, size_t n) {
    static int calls[16];
    if (brk("fatal", fn)) sticky = 1;
    if (!n) return;
    if (brk("perturb", fn)) x[n / 2] += 0.01f * (1.0f + fabsf(x[n / 2]));
    if (brk("unwritten", fn)) x[n - 1] = saved_last;
    if (brk("nondet", fn)) {
        int slot = (int)(strlen(fn) % 16);
        if (calls[slot]++ % 2) { uint32_t b; memcpy(&b, &x[0], 4); b ^= 1; memcpy(&x[0], &b, 4); }
    }
}

/* ------------------------------------------------------------------ bf16 (core/fastmath.h's rounding, as the cast kernel's) */
static float *rounded_copy(const float *x, size_t n) {
    float *y = malloc(n * sizeof(float) + 4);
    if (!y) { fprintf(stderr, "fake_cuda: out of memory\n"); abort(); }
    for (size_t i = 0; i < n; i++) y[i] = fm_bf16_float(fm_bf16_rne(x[i]));
    return y;
}

/* ------------------------------------------------------------------ "device" memory */
static size_t used_bytes;
#define FAKE_TOTAL ((size_t)64 << 30)
static void *fake_malloc(size_t bytes) {
    unsigned char *p = aligned_alloc(256, 256 + (bytes + 255) / 256 * 256);
    if (!p) return NULL;
    memcpy(p, &bytes, sizeof bytes);
    used_bytes += bytes;
    return p + 256;
}
static void fake_free(void *q) {
    if (!q) return;
    unsigned char *p = (unsigned char *)q - 256;
    size_t bytes;
    memcpy(&bytes, p, sizeof bytes);
    used_bytes -= bytes;
    free(p);
}

/* ------------------------------------------------------------------ cudart subset */
struct CUevent_st { double t; };
static double host_now(void) { struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return ts.tv_sec + 1e-9 * ts.tv_nsec; }

cudaError_t cudaGetDeviceCount(int *n) {
    if (brk("nodevice", NULL)) { *n = 0; return cudaErrorNoDevice; }
    *n = 1;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : cudaErrorInvalidDevice; }
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d) {
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "FAKE (host emulation, tests/gpu/fake_cuda.c)");
    p->major = 9; p->minor = 0; p->multiProcessorCount = 132; p->totalGlobalMem = FAKE_TOTAL;
    p->l2CacheSize = 60 << 20;
    return d == 0 ? cudaSuccess : cudaErrorInvalidDevice;
}
cudaError_t cudaDriverGetVersion(int *v) { *v = 13000; return cudaSuccess; }
cudaError_t cudaRuntimeGetVersion(int *v) { *v = 13000; return cudaSuccess; }
cudaError_t cudaMalloc(void **p, size_t bytes) { *p = fake_malloc(bytes); return *p ? cudaSuccess : cudaErrorMemoryAllocation; }
cudaError_t cudaFree(void *p) { fake_free(p); return cudaSuccess; }
cudaError_t cudaMemcpy(void *d, const void *s, size_t n, enum cudaMemcpyKind k) { (void)k; if (n) memcpy(d, s, n); return cudaSuccess; }
cudaError_t cudaMemset(void *d, int v, size_t n) { memset(d, v, n); return cudaSuccess; }
cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total) { *total = FAKE_TOTAL; *free_b = FAKE_TOTAL - used_bytes; return cudaSuccess; }
cudaError_t cudaDeviceSynchronize(void) { return sticky ? cudaErrorIllegalAddress : cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t s) { (void)s; return cudaSuccess; }
cudaError_t cudaGetLastError(void) { return sticky ? cudaErrorIllegalAddress : cudaSuccess; }
cudaError_t cudaPeekAtLastError(void) { return cudaSuccess; }
const char *cudaGetErrorName(cudaError_t e) {
    return e == cudaSuccess ? "cudaSuccess" : e == cudaErrorNoDevice ? "cudaErrorNoDevice"
         : e == cudaErrorIllegalAddress ? "cudaErrorIllegalAddress" : "cudaError(fake)";
}
const char *cudaGetErrorString(cudaError_t e) {
    return e == cudaSuccess ? "no error" : e == cudaErrorNoDevice ? "no CUDA-capable device is detected (fake)" : "fake error";
}
cudaError_t cudaEventCreate(cudaEvent_t *e) { *e = calloc(1, sizeof **e); return *e ? cudaSuccess : cudaErrorMemoryAllocation; }
cudaError_t cudaEventDestroy(cudaEvent_t e) { free(e); return cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) { (void)s; e->t = host_now(); return cudaSuccess; }
cudaError_t cudaEventSynchronize(cudaEvent_t e) { (void)e; return cudaSuccess; }
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) { *ms = (float)((b->t - a->t) * 1e3); return cudaSuccess; }

/* ------------------------------------------------------------------ the backend table */
struct nn_ctx { nn_precision prec; };
static int f_ctx_create(nn_ctx **out, nn_precision p) {
    *out = calloc(1, sizeof **out);
    if (!*out) return lssar_fail(LSSAR_E_NOMEM, "fake cuda: out of memory");
    (*out)->prec = p;
    return 0;
}
static void f_ctx_free(nn_ctx *c) { free(c); }
static void *f_alloc(nn_ctx *c, size_t bytes) {
    (void)c;
    void *p = fake_malloc(bytes ? bytes : 1);
    if (p) memset(p, 0, bytes);
    return p;
}
static void f_release(nn_ctx *c, void *p) { (void)c; fake_free(p); }
static void f_memcpy(nn_ctx *c, void *d, const void *s, size_t n) { (void)c; if (n) memcpy(d, s, n); }
static void f_zero(nn_ctx *c, void *x, size_t bytes) { (void)c; memset(x, 0, bytes); }
/* the float32 functions (fake_f32); an NN_BF16 context stores bf16 activations over them (below) */
static lssar_dtype f_act_dtype(nn_ctx *c) { (void)c; return LSSAR_F32; }
static void f_upload_act(nn_ctx *c, nn_act *d, const float *s, size_t n) { f_memcpy(c, d, s, n * sizeof(float)); }
static void f_download_act(nn_ctx *c, float *d, const nn_act *s, size_t n) { f_memcpy(c, d, s, n * sizeof(float)); }

static void f_matmul_forward(nn_ctx *c, nn_act *out_, const nn_act *inp, const float *w, const float *bias, int N, int IC, int OC) {
    float *out = out_;
    float last = out[(size_t)N * OC - 1];
    if (c->prec == NN_BF16) {
        float *ri = rounded_copy(inp, (size_t)N * IC), *rw = rounded_copy(w, (size_t)OC * IC);
        matmul_forward(out, ri, rw, bias, N, IC, OC);
        free(ri); free(rw);
    } else matmul_forward(out, inp, w, bias, N, IC, OC);
    fault("matmul_forward", out, last, (size_t)N * OC);
}
static void f_matmul_backward(nn_ctx *c, nn_act *dinp, float *dw, float *db, const nn_act *dout, const nn_act *inp,
                              const float *w, int N, int IC, int OC, int acc) {
    if (c->prec == NN_BF16) {
        float *rd = rounded_copy(dout, (size_t)N * OC), *ri = rounded_copy(inp, (size_t)N * IC), *rw = rounded_copy(w, (size_t)OC * IC);
        matmul_backward(dinp, dw, NULL, rd, ri, rw, N, IC, OC, acc);
        free(rd); free(ri); free(rw);
        if (db) kemu_colsum(db, dout, N, OC);
    } else {
        matmul_backward(dinp, dw, NULL, dout, inp, w, N, IC, OC, acc);
        if (db) kemu_colsum(db, dout, N, OC);
    }
}
static void f_ln_fwd(nn_ctx *c, nn_act *out_, float *mean, float *rstd, const nn_act *inp, const float *w, const float *b, int N, int C) {
    (void)c;
    float *out = out_;
    float last = out[(size_t)N * C - 1];
    kemu_layernorm_forward(out, mean, rstd, inp, w, b, N, C);
    fault("layernorm_forward", out, last, (size_t)N * C);
}
static void f_ln_bwd(nn_ctx *c, nn_act *dinp, float *dw, float *db, const nn_act *dout, const nn_act *inp, const float *w,
                     const float *mean, const float *rstd, int N, int C) {
    (void)c;
    kemu_layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, N, C);
}
static void f_gelu_fwd(nn_ctx *c, nn_act *out_, const nn_act *inp, size_t n) {
    (void)c;
    float *out = out_;
    float last = n ? out[n - 1] : 0;
    kemu_gelu_forward(out, inp, n);
    fault("gelu_forward", out, last, n);
}
static void f_gelu_bwd(nn_ctx *c, nn_act *dinp, const nn_act *inp, const nn_act *dout, size_t n) { (void)c; kemu_gelu_backward(dinp, inp, dout, n); }
static void f_residual(nn_ctx *c, nn_act *out, const nn_act *a, const nn_act *b, size_t n) { (void)c; kemu_residual_forward(out, a, b, n); }
static void f_emb_fwd(nn_ctx *c, nn_act *out, const uint16_t *tok, float *const *wte, const float *wpe, int B, int T, int Ch, int C) {
    (void)c;
    kemu_embedding_forward(out, tok, wte, wpe, B, T, Ch, C);
}
static void f_emb_bwd(nn_ctx *c, float *const *dwte, float *dwpe, const nn_act *dout, const uint16_t *tok, int B, int T, int Ch, int C) {
    (void)c;
    if (kemu_embedding_backward(dwte, dwpe, dout, tok, B, T, Ch, C)) { fprintf(stderr, "fake_cuda: embedding backward: out of memory\n"); abort(); }
}
static void f_rope_fwd(nn_ctx *c, nn_act *x, const float *cs, const float *sn, int B, int T, int NH, int HS, int pos0) {
    (void)c;
    kemu_rope(x, cs, sn, B, T, NH, HS, pos0, 0);
}
static void f_rope_bwd(nn_ctx *c, nn_act *dx, const float *cs, const float *sn, int B, int T, int NH, int HS) {
    (void)c;
    kemu_rope(dx, cs, sn, B, T, NH, HS, 0, 1);
}
static size_t f_stats(const lssar_attn_desc *d, int B, int T, int NH, int HS) { return flash_emu_stats_floats(d, B, T, NH, HS); }
static int f_attn_fwd(nn_ctx *c, nn_act *out_, float *stats, const nn_act *q, const nn_act *k, const nn_act *v, const lssar_attn_desc *d,
                      int B, int Tq, int Tk, int kvs, int NH, int HS) {
    float *out = out_;
    size_t n = (size_t)B * Tq * NH * HS;
    float last = out[n - 1];
    int rc = flash_emu_forward(d, c->prec == NN_BF16 ? FLASH_BF16 : FLASH_FP32, B, Tq, Tk, kvs, NH, HS, q, k, v, out, stats);
    fault("attention_forward", out, last, n);
    return rc;
}
static int f_attn_bwd(nn_ctx *c, nn_act *dq_, nn_act *dk, nn_act *dv, float *dscale, const nn_act *dout, const nn_act *q, const nn_act *k,
                      const nn_act *v, const nn_act *out, const float *stats, const lssar_attn_desc *d, int B, int T, int NH, int HS) {
    float *dq = dq_;
    size_t n = (size_t)B * T * NH * HS;
    float last = dq[n - 1], ds[256];
    if (NH > 256) return lssar_fail(LSSAR_E_SIZE, "fake cuda: NH > 256");
    int rc = flash_emu_backward(d, c->prec == NN_BF16 ? FLASH_BF16 : FLASH_FP32, B, T, NH, HS, q, k, v, out, stats, dout,
                                dq, dk, dv, dscale ? ds : NULL);
    if (!rc && dscale)
        for (int h = 0; h < NH; h++) dscale[h] += ds[h];
    fault("attention_backward", dq, last, n);
    return rc;
}
static void f_xent_fwd(nn_ctx *c, nn_act *logits, float *losses, uint16_t *argmax, const uint16_t *targets, int tstride, int ostride,
                       int R, int V, double *acc) {
    (void)c;
    kemu_xent_forward(logits, losses, argmax, targets, tstride, ostride, R, V, acc);
}
static void f_xent_bwd(nn_ctx *c, nn_act *probs, const uint16_t *targets, int tstride, int R, int V, float gs, const double *acc) {
    (void)c;
    kemu_xent_backward(probs, targets, tstride, R, V, gs, acc);
}
static void f_adamw(nn_ctx *c, float *p, const float *g, float *m, float *v, size_t n, int t, float lr, float b1, float b2, float eps,
                    float wd) {
    (void)c;
    kemu_adamw(p, g, m, v, n, t, lr, b1, b2, eps, wd);
}
static double f_sumsq(nn_ctx *c, const float *x, size_t n) { (void)c; return kemu_sum_squares(x, n); }
static void f_block_sumsq(nn_ctx *c, double *out, const float *x, size_t n, size_t block) {
    (void)c;
    kemu_block_sum_squares(out, x, n, block);
}
static void f_clip_norm(nn_ctx *c, float *x, size_t n, const double *ss, size_t nb, float clip, float *norm) {
    (void)c;
    kemu_clip_norm(x, n, ss, nb, clip, norm);
}
static void f_scale(nn_ctx *c, float *x, size_t n, float s) { (void)c; kemu_scale(x, n, s); }
// staged uploads: host memory, and a copy that is complete when it returns (no streams here)
static void *f_host_alloc(nn_ctx *c, size_t bytes) { (void)c; return malloc(bytes ? bytes : 1); }
static void f_host_free(nn_ctx *c, void *p) { (void)c; free(p); }
static void f_upload_wait(nn_ctx *c) { (void)c; }
// one process, no NCCL: a job of one rank's sum (the only piece is our own), as the real backend's
static int f_dist_sum(nn_ctx *c, float *out, const float *x, const size_t *off, const size_t *cnt, int accumulate,
                      float *scratch) {
    (void)c; (void)scratch;
    if (lssar_dist_size() != 1) return lssar_fail(LSSAR_E_UNSUPPORTED, "fake cuda: no collectives across ranks");
    const float *p = x + off[0];
    if (accumulate) for (size_t i = 0; i < cnt[0]; i++) out[i] += p[i];
    else if (out != p) memmove(out, p, cnt[0] * sizeof(float));
    return 0;
}
static int f_dist_allgather(nn_ctx *c, float *x, const size_t *off, const size_t *cnt, int root) {
    (void)c; (void)x; (void)off; (void)cnt; (void)root;
    if (lssar_dist_size() != 1) return lssar_fail(LSSAR_E_UNSUPPORTED, "fake cuda: no collectives across ranks");
    return 0;
}

static const nn_backend fake_f32 = {
    .name = "cuda",
    .device = LSSAR_DEVICE_CUDA,
    .eval_rows = 128,
    .ctx_create = f_ctx_create, .ctx_free = f_ctx_free, .alloc = f_alloc, .release = f_release,
    .upload = f_memcpy, .download = f_memcpy, .copy = f_memcpy, .zero = f_zero,
    .act_dtype = f_act_dtype, .upload_act = f_upload_act, .download_act = f_download_act,
    .matmul_forward = f_matmul_forward, .matmul_backward = f_matmul_backward,
    .layernorm_forward = f_ln_fwd, .layernorm_backward = f_ln_bwd,
    .gelu_forward = f_gelu_fwd, .gelu_backward = f_gelu_bwd, .residual_forward = f_residual,
    .embedding_forward = f_emb_fwd, .embedding_backward = f_emb_bwd,
    .rope_forward = f_rope_fwd, .rope_backward = f_rope_bwd,
    .attention_stats_floats = f_stats, .attention_forward = f_attn_fwd, .attention_backward = f_attn_bwd,
    .xent_forward = f_xent_fwd, .xent_backward = f_xent_bwd,
    .adamw = f_adamw, .sum_squares = f_sumsq, .block_sum_squares = f_block_sumsq, .clip_norm = f_clip_norm,
    .scale = f_scale,
    .host_alloc = f_host_alloc, .host_free = f_host_free, .upload_async = f_memcpy, .upload_wait = f_upload_wait,
    .dist_sum = f_dist_sum, .dist_allgather = f_dist_allgather,
};

/* The fake: fake_f32, with bf16 activations in an NN_BF16 context as the CUDA backend stores them
   (tests/bf16_acts.h: the float emulation on widened inputs, rounded where it stores) */
#define BA_BASE (&fake_f32)
#define BA_ON(c) ((c)->prec == NN_BF16)
#include "../bf16_acts.h"
const nn_backend fake_backend_cuda = {
    .name = "cuda",
    .device = LSSAR_DEVICE_CUDA,
    .eval_rows = 128,
    .ctx_create = f_ctx_create, .ctx_free = f_ctx_free, .alloc = f_alloc, .release = f_release,
    .upload = f_memcpy, .download = f_memcpy, .copy = f_memcpy, .zero = f_zero,
    .attention_stats_floats = f_stats,
    .adamw = f_adamw, .sum_squares = f_sumsq, .block_sum_squares = f_block_sumsq, .clip_norm = f_clip_norm,
    .scale = f_scale,
    .host_alloc = f_host_alloc, .host_free = f_host_free, .upload_async = f_memcpy, .upload_wait = f_upload_wait,
    .dist_sum = f_dist_sum, .dist_allgather = f_dist_allgather,
    BA_FUNCTIONS,
};

/* ------------------------------------------------------------------ the public API */
int fake_cuda_device_count(void) { int n = 0; cudaGetDeviceCount(&n); return n; }

size_t fake_attn_cuda_workspace_size(const lssar_attn_desc *a, lssar_dtype dtype, int B, int T, int H, int D) {
    (void)dtype;
    if (flash_emu_check_fused(a, "lssar_attn_cuda_workspace_size")) return 0;  // a kind the kernels refuse
    return flash_emu_stats_floats(a, B, T, H, D) * sizeof(float) + 256;
}

static float *to_float(const void *x, lssar_dtype dt, size_t n) {
    float *y = malloc(n * sizeof(float) + 4);
    if (!y) return NULL;
    if (dt == LSSAR_BF16) for (size_t i = 0; i < n; i++) y[i] = fm_bf16_float(((const uint16_t *)x)[i]);
    else memcpy(y, x, n * sizeof(float));
    return y;
}
static void from_float(void *dst, const float *x, lssar_dtype dt, size_t n) {
    if (dt == LSSAR_BF16) for (size_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = fm_bf16_rne(x[i]);
    else memcpy(dst, x, n * sizeof(float));
}

int fake_attn_forward_cuda(const lssar_attn_desc *a, lssar_dtype dt, int B, int T, int H, int D, const void *q, const void *k,
                           const void *v, void *out, void *ws, void *stream) {
    (void)stream;
    size_t n = (size_t)B * T * H * D;
    float *qf = to_float(q, dt, n), *kf = to_float(k, dt, n), *vf = to_float(v, dt, n), *of = malloc(n * 4 + 4);
    if (!qf || !kf || !vf || !of) return lssar_fail(LSSAR_E_NOMEM, "fake cuda: out of memory");
    float last = NAN;
    int rc = flash_emu_forward(a, dt == LSSAR_BF16 ? FLASH_BF16 : FLASH_FP32, B, T, T, T, H, D, qf, kf, vf, of, ws);
    if (!rc) {
        fault("api_forward", of, last, n);
        from_float(out, of, dt, n);
    }
    free(qf); free(kf); free(vf); free(of);
    return rc;
}

int fake_attn_backward_cuda(const lssar_attn_desc *a, lssar_dtype dt, int B, int T, int H, int D, const void *q, const void *k,
                            const void *v, const void *out, const void *dout, void *dq, void *dk, void *dv, float *ds, void *ws,
                            void *stream) {
    (void)stream;
    size_t n = (size_t)B * T * H * D;
    float *qf = to_float(q, dt, n), *kf = to_float(k, dt, n), *vf = to_float(v, dt, n), *of = to_float(out, dt, n);
    float *dyf = to_float(dout, dt, n), *g[3] = {malloc(n * 4 + 4), malloc(n * 4 + 4), malloc(n * 4 + 4)};
    if (!qf || !kf || !vf || !of || !dyf || !g[0] || !g[1] || !g[2]) return lssar_fail(LSSAR_E_NOMEM, "fake cuda: out of memory");
    int rc = flash_emu_backward(a, dt == LSSAR_BF16 ? FLASH_BF16 : FLASH_FP32, B, T, H, D, qf, kf, vf, of, ws, dyf, g[0], g[1], g[2], ds);
    if (!rc) { from_float(dq, g[0], dt, n); from_float(dk, g[1], dt, n); from_float(dv, g[2], dt, n); }
    free(qf); free(kf); free(vf); free(of); free(dyf); free(g[0]); free(g[1]); free(g[2]);
    return rc;
}
