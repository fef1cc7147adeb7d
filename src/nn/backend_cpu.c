// backend_cpu.c - the CPU backend (backend.h): host memory, the layer functions of nn.h and the
// attention kernels of src/attn. The context is empty: every call runs to completion before it
// returns, so upload, download and copy are memcpy.
#include <stdlib.h>
#include <string.h>
#include "attn/attn.h"
#include "core/util.h"
#include "core/dist.h"
#include "nn/backend.h"
#include "nn/gradnorm.h"
#include "nn/nn.h"

struct nn_ctx { int unused; };

static int cpu_ctx_create(nn_ctx **out, nn_precision precision) {
    (void)precision;  // the CPU backend always computes in float32
    *out = calloc(1, sizeof **out);
    return *out ? 0 : lssar_fail(LSSAR_E_NOMEM, "cpu backend: out of memory");
}
static void cpu_ctx_free(nn_ctx *ctx) { free(ctx); }

// 64-byte aligned and zeroed by the OpenMP threads: the pages are touched here, once, and each by
// the thread whose static share of a loop will use it (fresh pages are slow on our machines, so
// the model allocates everything up front and nothing per step).
static void *cpu_alloc(nn_ctx *ctx, size_t bytes) {
    (void)ctx;
    size_t n = (bytes + 63) / 64 * 16;   // floats, whole cache lines
    if (n == 0) n = 16;
    float *p = aligned_alloc(64, n * sizeof(float));
    if (!p) return NULL;
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) p[i] = 0.0f;
    return p;
}
static void cpu_release(nn_ctx *ctx, void *p) { (void)ctx; free(p); }
static void cpu_memcpy(nn_ctx *ctx, void *dst, const void *src, size_t bytes) {
    (void)ctx;
    if (bytes) memcpy(dst, src, bytes);
}
// whole floats by the threads that will use them (as cpu_alloc touches them), the tail bytes after
static void cpu_zero(nn_ctx *ctx, void *x, size_t bytes) {
    (void)ctx;
    size_t n = bytes / sizeof(float);
    zero_fill(x, n);
    if (bytes > n * sizeof(float)) memset((char *)x + n * sizeof(float), 0, bytes - n * sizeof(float));
}
// activations are float32 here: their transfers are copies
static lssar_dtype cpu_act_dtype(nn_ctx *ctx) { (void)ctx; return LSSAR_F32; }
static void cpu_upload_act(nn_ctx *ctx, nn_act *dst, const float *src, size_t n) {
    cpu_memcpy(ctx, dst, src, n * sizeof(float));
}
static void cpu_download_act(nn_ctx *ctx, float *dst, const nn_act *src, size_t n) {
    cpu_memcpy(ctx, dst, src, n * sizeof(float));
}

static void cpu_matmul_forward(nn_ctx *ctx, nn_act *out, const nn_act *inp, const float *weight,
                               const float *bias, int N, int IC, int OC) {
    (void)ctx;
    matmul_forward(out, inp, weight, bias, N, IC, OC);
}
static void cpu_matmul_backward(nn_ctx *ctx, nn_act *dinp, float *dweight, float *dbias, const nn_act *dout,
                                const nn_act *inp, const float *weight, int N, int IC, int OC,
                                int accumulate) {
    (void)ctx;
    matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, IC, OC, accumulate);
}
static void cpu_layernorm_forward(nn_ctx *ctx, nn_act *out, float *mean, float *rstd, const nn_act *inp,
                                  const float *weight, const float *bias, int N, int C) {
    (void)ctx;
    layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
}
static void cpu_layernorm_backward(nn_ctx *ctx, nn_act *dinp, float *dweight, float *dbias, const nn_act *dout,
                                   const nn_act *inp, const float *weight, const float *mean,
                                   const float *rstd, int N, int C) {
    (void)ctx;
    layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}
static void cpu_gelu_forward(nn_ctx *ctx, nn_act *out, const nn_act *inp, size_t n) {
    (void)ctx;
    gelu_forward(out, inp, n);
}
static void cpu_gelu_backward(nn_ctx *ctx, nn_act *dinp, const nn_act *inp, const nn_act *dout, size_t n) {
    (void)ctx;
    gelu_backward(dinp, inp, dout, n);
}
static void cpu_residual_forward(nn_ctx *ctx, nn_act *out, const nn_act *a, const nn_act *b, size_t n) {
    (void)ctx;
    residual_forward(out, a, b, n);
}
static void cpu_embedding_forward(nn_ctx *ctx, nn_act *out, const uint16_t *tokens, float *const *wte,
                                  const float *wpe, int B, int T, int Ch, int C) {
    (void)ctx;
    embedding_forward(out, tokens, wte, wpe, B, T, Ch, C);
}
static void cpu_embedding_backward(nn_ctx *ctx, float *const *dwte, float *dwpe, const nn_act *dout,
                                   const uint16_t *tokens, int B, int T, int Ch, int C) {
    (void)ctx;
    embedding_backward(dwte, dwpe, dout, tokens, B, T, Ch, C);
}
static void cpu_rope_forward(nn_ctx *ctx, nn_act *x, const float *cos_t, const float *sin_t, int B, int T,
                             int NH, int HS, int pos0) {
    (void)ctx;
    rope_forward(x, cos_t, sin_t, B, T, NH, HS, pos0);
}
static void cpu_rope_backward(nn_ctx *ctx, nn_act *dx, const float *cos_t, const float *sin_t, int B, int T,
                              int NH, int HS) {
    (void)ctx;
    rope_backward(dx, cos_t, sin_t, B, T, NH, HS, 0);
}

// The CPU backward recomputes the forward row by row, so nothing is saved between the two.
static size_t cpu_attention_stats_floats(const lssar_attn_desc *d, int B, int T, int NH, int HS) {
    (void)d; (void)B; (void)T; (void)NH; (void)HS;
    return 0;
}
static int cpu_attention_forward(nn_ctx *ctx, nn_act *out, float *stats, const nn_act *q, const nn_act *k,
                                 const nn_act *v, const lssar_attn_desc *d, int B, int Tq, int Tk,
                                 int kv_stride, int NH, int HS) {
    (void)ctx; (void)stats;
    return attn_forward_cached(d, B, Tq, Tk, kv_stride, NH, HS, q, k, v, out);
}

static int cpu_attention_backward(nn_ctx *ctx, nn_act *dq, nn_act *dk, nn_act *dv, float *dscale,
                                  const nn_act *dout, const nn_act *q, const nn_act *k, const nn_act *v,
                                  const nn_act *out, const float *stats, const lssar_attn_desc *d,
                                  int B, int T, int NH, int HS) {
    (void)ctx; (void)out; (void)stats;
    float ds_stack[64], *ds = NULL;
    if (attn_has_ssmax_s(d->kind) && dscale) {
        ds = NH <= 64 ? ds_stack : malloc(sizeof(float) * NH);
        if (!ds) return lssar_fail(LSSAR_E_NOMEM, "attention backward: out of memory");
    }
    int rc = lssar_attn_backward(d, B, T, NH, HS, q, k, v, dout, dq, dk, dv, ds);
    if (!rc && ds)
        for (int h = 0; h < NH; h++) dscale[h] += ds[h];
    if (ds != ds_stack) free(ds);
    return rc;
}

static void cpu_xent_forward(nn_ctx *ctx, nn_act *logits, float *losses, uint16_t *argmax,
                             const uint16_t *targets, int tstride, int ostride, int R, int V, double *acc) {
    (void)ctx;
    long count = 0;
    acc[0] += softmax_xent_forward(logits, losses, argmax, targets, tstride, ostride, R, V, &count);
    acc[1] += (double)count;
}
static void cpu_xent_backward(nn_ctx *ctx, nn_act *probs, const uint16_t *targets, int tstride, int R, int V,
                              float grad_scale, const double *acc) {
    (void)ctx;
    float scale = acc[1] > 0 ? grad_scale / (float)acc[1] : 0.0f;
    softmax_xent_backward(probs, targets, tstride, R, V, scale);
}

static void cpu_adamw(nn_ctx *ctx, float *params, const float *grads, float *m, float *v, size_t n, int t,
                      float lr, float beta1, float beta2, float eps, float wd) {
    (void)ctx;
    adamw_update(params, grads, m, v, n, t, lr, beta1, beta2, eps, wd);
}
static double cpu_sum_squares(nn_ctx *ctx, const float *x, size_t n) { (void)ctx; return sum_squares(x, n); }
// The blocks in parallel; sum_squares inside each is then one thread's (its result does not depend
// on the thread count, nn.h), so every block has the bits of a call of its own.
static void cpu_block_sum_squares(nn_ctx *ctx, double *out, const float *x, size_t n, size_t block) {
    (void)ctx;
    size_t nb = (n + block - 1) / block;
    #pragma omp parallel for schedule(static)
    for (size_t b = 0; b < nb; b++)
        out[b] = sum_squares(x + b * block, n - b * block < block ? n - b * block : block);
}
static void cpu_clip_norm(nn_ctx *ctx, float *x, size_t n, const double *ss, size_t nb, float clip,
                          float *norm) {
    (void)ctx;
    float nm = nn_norm_of_blocks(ss, nb), f = nn_clip_factor(nm, clip);
    *norm = nm;
    if (f != 1.0f) scale_inplace(x, n, f);
}
static void cpu_scale(nn_ctx *ctx, float *x, size_t n, float s) { (void)ctx; scale_inplace(x, n, s); }
static void *cpu_host_alloc(nn_ctx *ctx, size_t bytes) { (void)ctx; return malloc(bytes ? bytes : 1); }
static void cpu_host_free(nn_ctx *ctx, void *p) { (void)ctx; free(p); }
static void cpu_upload_wait(nn_ctx *ctx) { (void)ctx; }   // every upload is complete when it returns
static int cpu_dist_sum(nn_ctx *ctx, float *out, const float *x, const size_t *off, const size_t *cnt,
                        int accumulate, float *scratch) {
    (void)ctx;
    return lssar_dist_sum_f32(out, x, off, cnt, accumulate, scratch);
}
static int cpu_dist_allgather(nn_ctx *ctx, float *x, const size_t *off, const size_t *cnt, int root) {
    (void)ctx;
    return lssar_dist_allgather_f32(x, off, cnt, root);
}

const nn_backend nn_backend_cpu = {
    .name = "cpu",
    .device = LSSAR_DEVICE_CPU,
    // 128 rows of a 50k vocabulary are 25 MB of logits per channel: in cache-sized steps, and
    // memory independent of T
    .eval_rows = 128,
    .ctx_create = cpu_ctx_create,
    .ctx_free = cpu_ctx_free,
    .alloc = cpu_alloc,
    .release = cpu_release,
    .upload = cpu_memcpy,
    .download = cpu_memcpy,
    .copy = cpu_memcpy,
    .zero = cpu_zero,
    .act_dtype = cpu_act_dtype,
    .upload_act = cpu_upload_act,
    .download_act = cpu_download_act,
    .matmul_forward = cpu_matmul_forward,
    .matmul_backward = cpu_matmul_backward,
    .layernorm_forward = cpu_layernorm_forward,
    .layernorm_backward = cpu_layernorm_backward,
    .gelu_forward = cpu_gelu_forward,
    .gelu_backward = cpu_gelu_backward,
    .residual_forward = cpu_residual_forward,
    .embedding_forward = cpu_embedding_forward,
    .embedding_backward = cpu_embedding_backward,
    .rope_forward = cpu_rope_forward,
    .rope_backward = cpu_rope_backward,
    .attention_stats_floats = cpu_attention_stats_floats,
    .attention_forward = cpu_attention_forward,
    .attention_backward = cpu_attention_backward,
    .xent_forward = cpu_xent_forward,
    .xent_backward = cpu_xent_backward,
    .adamw = cpu_adamw,
    .sum_squares = cpu_sum_squares,
    .block_sum_squares = cpu_block_sum_squares,
    .clip_norm = cpu_clip_norm,
    .scale = cpu_scale,
    .host_alloc = cpu_host_alloc,
    .host_free = cpu_host_free,
    .upload_async = cpu_memcpy,
    .upload_wait = cpu_upload_wait,
    .dist_sum = cpu_dist_sum,
    .dist_allgather = cpu_dist_allgather,
};
