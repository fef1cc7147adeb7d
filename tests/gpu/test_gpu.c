/*
 * test_gpu.c - every function of the CUDA backend (nn_backend_cuda, src/cuda) against the CPU
 * backend (nn_backend_cpu) on the same fresh random inputs, and the public lssar_attn_*_cuda
 * against lssar_attn_forward / _backward. Run by `make test-gpu` (mk/cuda_test.mk) and by
 * scripts/gpu-check.sh; docs/GPU_CHECK.md says what the first GPU run must confirm.
 *
 * Without a GPU (or in a build without CUDA) it prints one line "SKIP: no CUDA GPU (reason)" and
 * exits 0. Otherwise one line per check, "ok   NAME: rel E <= BOUND" or "FAIL NAME: ...", some
 * "info" lines (not counted), and last "test_gpu: N passed, M failed"; exit 0 when none failed,
 * 1 when some did, 2 on a fatal CUDA error (a sticky error ends the process's CUDA context, so
 * the run stops there and says after which check, and which groups did not run: scripts/
 * gpu-check.sh reruns those once).
 *
 * Environment: LSSAR_GPU_QUICK=1 small shapes only (for compute-sanitizer); LSSAR_GPU_ONLY=a,b
 * only those groups (in the order run: mem, attention, decode, api, long, matmul, layernorm,
 * elementwise, rope, embedding, xent, train, edge); LSSAR_GPU_SKIP=a,b not those (the sanitizer runs
 * leave out train: the trainer's thousands of launches, kernels the other groups check); LSSAR_GPU_SEED=n (default 20261201; printed); LSSAR_GPU_JSON=FILE one
 * JSON object per check, written as it goes (a crash leaves the checks done so far).
 *
 * Method (docs/.library METHOD.md): inputs are fresh random draws for every check, never zeros;
 * every output is poisoned (NaN, or 0xFF bytes) before the GPU call, so an element the kernel
 * did not write shows up as non-finite and fails; gradients that are accumulated start from
 * random values on both sides; every CUDA error (cudaDeviceSynchronize + cudaGetLastError after
 * each group of calls) is fatal.
 *
 * Error measure: rel = ||got - ref|| / ||ref|| over the whole tensor (float64 sums); any
 * non-finite element where the reference is finite fails. Bounds:
 *
 * NN_FP32 context: 1e-5 (docs/CUDA.md's contract), except where a function is exact:
 *   residual_forward, scale (one correctly rounded IEEE operation per element), embedding_forward
 *   with one channel (one addition wte + wpe, or a copy), memory ops, argmax and the row count
 *   of xent_forward: bit-identical. Derived exceptions: the AdamW parameter UPDATE (p_new - p_old,
 *   much smaller than p) is held to 1e-5 of the update plus the one rounding of p on each side
 *   (2 U32 ||p||); SSMax's ds (accumulated into a random dscale) is compared as the increment,
 *   bound + 2 U32 ||dscale|| / ||increment|| for the rounding of the accumulation, + 8 U32
 *   sum |terms| / ||increment|| (the float64 reference's sum of |terms| over (b, i, j), on every
 *   ssmax case) for the roundings of the terms, which do not cancel as the terms do.
 *   attention: 1e-5 + 2 cond (attn_conditioning): the outputs' sensitivity to the fp32 rounding of
 *   q . k on each side, and once to the GPU's exponential unit (MUFU ex2, src/attn/flash.h).
 *
 * NN_BF16 context (operands of matmul and attention rounded to bf16, unit roundoff u = 2^-9,
 * fp32 accumulation; activations STORED in bf16, act_dtype; parameters, gradients, statistics
 * fp32). Every activation input is rounded to bf16 on the host first (aput), so both sides compute
 * on the values stored. Each activation output is rounded once where it is stored, |e| <= u |g|
 * per element, so a norm-wise bound b on the fp32 result g becomes ab(b) = b + u (1 + b) (the
 * triangle inequality and ||g|| <= (1 + b) ||ref||); a bit-exact fp32 result (the residual, one
 * embedding channel) is compared with the CPU's rounded the same way (abits). The cross-entropy's
 * backward starts from the probabilities as stored (the CPU's rounded): the function of its
 * input, not of the forward before it. Attention stores out, dq, dk, dv as the public API's bf16
 * storage does (attn_ref64.h store_bf16: u |value| per stored output, D1 from the stored y).
 * Beyond that:
 *   matmul: each product x_i w_i of rounded operands is x_i w_i (1 + d1)(1 + d2), |d| <= u, so
 *     per element |err| <= (2u + u^2) sum_i |x_i w_i| + 2 gamma32(K + 1) sum_i |x_i w_i| (the
 *     GPU's and the CPU's fp32 sums, any order); sum |x||w| is computed exactly enough by the CPU
 *     backend on |x|, |w| (and |bias|, |pre-existing gradient|). The norm-wise bound is
 *     ||b|| / ||ref|| with b that per-element bound (|e_i| <= b_i for all i implies it). The
 *     backend's native bf16 GEMMs (the weights' copies made by its RNE cast kernel, the
 *     activations stored in bf16, fp32 accumulation) fit this model: one rounding per operand,
 *     exact bf16 x bf16 products, an fp32 sum; the bias's bf16 copy (cuBLASLt's bias has a bf16
 *     D's type) moves it by u |bias|, inside the bias's share of the bound; then ab for the stored
 *     output. After a product the weight is scaled on the device and the product run again: the
 *     bf16 weight copy must follow it.
 *   attention: q, k, v and dout are rounded to bf16 ON THE HOST first, so the GPU's rounding of
 *     them is exact and the CPU computes the same function (the sensitivity of the weights to a
 *     rounded q . k, up to p * ln D * ln n ~ 600 for lssar at n = 16384, is a property of the
 *     inputs, not of the kernel). What remains are the roundings inside the kernel: the weight
 *     tile before P V (and lssar's w / u before G V), dS before dS K and dS^T Q, the weights
 *     before P^T dY, and D1 / D2 from the GPU's own y and E. tests/gpu/attn_ref64.h propagates
 *     them to first order, per element, in a float64 reference (its header gives the model), as
 *     a worst case (certain, but it grows like n: it exceeds 1 for dq, dk at T = 4096, where it
 *     would let a zero gradient pass) and as a probabilistic scale sigma (rounding errors
 *     independent, mean zero, |delta| <= u: Higham & Mary 2019; Hoeffding). bound =
 *     min(6 ||sigma||, ||worst||) / ||ref|| + max(2e-4, 2 e32): 6 sigma is exceeded with
 *     probability <= 2 exp(-18) per check; e32 is the
 *     SAME inputs' NN_FP32-context error (the fp32-level part: summation order, fp32 x amplified
 *     by p); 2e-4 = the spec's 1e-4 fp32-vs-float64 bound for each of the two sides.
 *   public API: LSSAR_F32 storage as the fp32 context (1e-5); LSSAR_BF16 storage (bf16 in and
 *     out) as the bf16 context plus u |value| for each stored output (and D1 from the stored y).
 * Determinism: the same call twice gives the same bits (docs/CUDA.md: no atomics).
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "lssar.h"
#include "core/util.h"
#include "nn/backend.h"
#include "nn/nn.h"
#include "model/checkpoint.h"
#include "train/train.h"

#ifndef LSSAR_CUDA
int main(void) {
    printf("SKIP: no CUDA GPU (this test_gpu was built without CUDA (no LSSAR_CUDA); build it with "
           "`make test-gpu CUDA=1` where nvcc is installed)\n");
    return 0;
}
#else

#include <cuda_runtime_api.h>
#include "attn_ref64.h"
#include "attn/flash.h"  /* flash_fused_supported */

#ifdef LSSAR_GPU_FAKE
/* tests/gpu/fake_cuda.c: a host emulation of the CUDA backend and of the cudart calls used here,
   so that this program's own logic can be run (and its bounds exercised) on a machine without a
   GPU. Its symbols have their own names, so it links beside any liblssar. */
#define nn_backend_cuda fake_backend_cuda
#define lssar_attn_forward_cuda fake_attn_forward_cuda
#define lssar_attn_backward_cuda fake_attn_backward_cuda
#define lssar_attn_cuda_workspace_size fake_attn_cuda_workspace_size
#define lssar_cuda_device_count fake_cuda_device_count
size_t fake_attn_cuda_workspace_size(const lssar_attn_desc *, lssar_dtype, int, int, int, int);
int fake_attn_forward_cuda(const lssar_attn_desc *, lssar_dtype, int, int, int, int, const void *,
                           const void *, const void *, void *, void *, void *);
int fake_attn_backward_cuda(const lssar_attn_desc *, lssar_dtype, int, int, int, int, const void *,
                            const void *, const void *, const void *, const void *, void *, void *,
                            void *, float *, void *, void *);
int fake_cuda_device_count(void);
#endif
extern const nn_backend nn_backend_cuda;

#define U32 0x1p-24
#define UB 0x1p-9
static double gam32(double n) { return n * U32 / (1 - n * U32); }

/* ------------------------------------------------------------------ state, reporting */
static const nn_backend *GB = &nn_backend_cuda;  /* the backend under test */
static const nn_backend *CB = &nn_backend_cpu;   /* the reference */
static nn_ctx *gctx[2], *cctx, *G;               /* G: the GPU context in use */
static int P = NN_FP32;                          /* its precision */
static const char *PN[2] = {"fp32", "bf16"};
static int quick;
static uint64_t seed = 20261201;
static lssar_rng rng;
static FILE *jf;
static int npass, nfail;
static const char *group = "";
static const char *last_check = "(none yet)";
static char remaining[256];   /* the groups after the one running: a rerun after a FATAL takes them */
static char last_buf[256];
static double t_start;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        if ((unsigned char)*s < 32) fputc(' ', f); else fputc(*s, f);
    }
    fputc('"', f);
}
static void json_num(FILE *f, double x) {
    if (isfinite(x)) fprintf(f, "%.6g", x); else fputs("null", f);
}

static int summary(void) {
    printf("test_gpu: %d passed, %d failed  [%.1f s, seed %llu%s]\n", npass, nfail, now_s() - t_start,
           (unsigned long long)seed, quick ? ", quick" : "");
    if (jf) {
        fprintf(jf, "{\"summary\": true, \"passed\": %d, \"failed\": %d, \"seconds\": %.1f, \"quick\": %s}\n",
                npass, nfail, now_s() - t_start, quick ? "true" : "false");
        fclose(jf);
        jf = NULL;
    }
    fflush(stdout);
    return nfail ? 1 : 0;
}

static void record(int pass, const char *name, double err, double bound, size_t bad, const char *note) {
    if (pass) npass++; else nfail++;
    snprintf(last_buf, sizeof last_buf, "%s", name);
    last_check = last_buf;
    char nb[64] = "";
    if (bad) snprintf(nb, sizeof nb, " (%zu non-finite elements: unwritten or NaN)", bad);
    if (bound < 0)   /* exact check */
        printf("%s %s: %s%s\n", pass ? "ok  " : "FAIL", name, pass ? "bit-identical" : note, nb);
    else
        printf("%s %s: rel %.3g %s %.3g%s%s%s\n", pass ? "ok  " : "FAIL", name, err, pass ? "<=" : ">", bound,
               nb, note ? "  " : "", note ? note : "");
    fflush(stdout);
    if (jf) {
        fprintf(jf, "{\"group\": ");
        json_str(jf, group);
        fprintf(jf, ", \"name\": ");
        json_str(jf, name);
        fprintf(jf, ", \"pass\": %s, \"err\": ", pass ? "true" : "false");
        if (bound < 0) fputs("null, \"bound\": \"exact\"", jf);
        else { json_num(jf, err); fputs(", \"bound\": ", jf); json_num(jf, bound); }
        fprintf(jf, ", \"nonfinite\": %zu", bad);
        if (note) { fputs(", \"note\": ", jf); json_str(jf, note); }
        fputs("}\n", jf);
        fflush(jf);
    }
}

static void infof(const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    printf("info %s\n", buf);
    if (jf) {
        fprintf(jf, "{\"group\": ");
        json_str(jf, group);
        fputs(", \"info\": ", jf);
        json_str(jf, buf);
        fputs("}\n", jf);
        fflush(jf);
    }
}

static void fatal(const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    printf("FATAL %s (last check: %s; group %s; remaining groups: %s)\n", buf, last_check, group,
           remaining[0] ? remaining : "none");
    nfail++;
    if (jf) {
        fputs("{\"fatal\": ", jf);
        json_str(jf, buf);
        fputs(", \"after\": ", jf);
        json_str(jf, last_check);
        fputs(", \"group\": ", jf);
        json_str(jf, group);
        fputs(", \"remaining\": ", jf);
        json_str(jf, remaining);
        fputs("}\n", jf);
    }
    summary();
    exit(2);
}

/* every CUDA error is fatal: a fault inside a kernel is sticky */
static void gsync(const char *where) {
    cudaError_t e = cudaDeviceSynchronize();
    if (e == cudaSuccess) e = cudaGetLastError();
    if (e != cudaSuccess) fatal("CUDA error after %s: %s (%s)", where, cudaGetErrorName(e), cudaGetErrorString(e));
}
#define CU(call)                                                                                  \
    do {                                                                                          \
        cudaError_t e_ = (call);                                                                  \
        if (e_ != cudaSuccess) fatal("%s: %s (%s)", #call, cudaGetErrorName(e_), cudaGetErrorString(e_)); \
    } while (0)

/* ------------------------------------------------------------------ memory, tracked per case */
#define MAXTRACK 512
static void *dtr[MAXTRACK], *ctr[MAXTRACK], *htr[MAXTRACK];
static int ndtr, nctr, nhtr;

static void *hmem(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) fatal("host malloc of %zu bytes failed", bytes);
    if (nhtr == MAXTRACK) fatal("too many host buffers in one case");
    htr[nhtr++] = p;
    return p;
}
static float *hf(size_t n) { return hmem(n * sizeof(float)); }
static double *hd(size_t n) { double *p = hmem(n * sizeof(double)); memset(p, 0, n * sizeof(double)); return p; }
static void *dmem(size_t bytes) {
    void *p = GB->alloc(G, bytes);
    if (!p) fatal("backend alloc of %zu bytes failed", bytes);
    if (ndtr == MAXTRACK) fatal("too many device buffers in one case");
    dtr[ndtr++] = p;
    return p;
}
static void *cmem(size_t bytes) {   /* plain cudaMalloc, for the public API */
    void *p = NULL;
    CU(cudaMalloc(&p, bytes ? bytes : 1));
    if (nctr == MAXTRACK) fatal("too many cudaMalloc buffers in one case");
    ctr[nctr++] = p;
    return p;
}
/* device buffers only (a case's host inputs and references live on across its contexts) */
static void release_dev(void) {
    gsync("the case's last call");
    for (int i = 0; i < ndtr; i++) GB->release(G, dtr[i]);
    for (int i = 0; i < nctr; i++) cudaFree(ctr[i]);
    ndtr = nctr = 0;
    gsync("release");
}
static void release_all(void) {
    release_dev();
    for (int i = 0; i < nhtr; i++) free(htr[i]);
    nhtr = 0;
}

static float *hnan(size_t n) {
    float *p = hf(n);
    for (size_t i = 0; i < n; i++) p[i] = NAN;
    return p;
}
static float *dput(const float *h, size_t n) {
    float *d = dmem(n * sizeof(float));
    GB->upload(G, d, h, n * sizeof(float));
    return d;
}
static void *dputb(const void *h, size_t bytes) {
    void *d = dmem(bytes);
    GB->upload(G, d, h, bytes);
    return d;
}
static float *dnan(size_t n) {
    float *h = malloc(n * sizeof(float) + 1);
    if (!h) fatal("host malloc failed");
    for (size_t i = 0; i < n; i++) h[i] = NAN;
    float *d = dput(h, n);
    gsync("poison upload");   /* the upload may be asynchronous: h must live until it is done */
    free(h);
    return d;
}
static float *dget(const float *d, size_t n) {
    float *h = hf(n);
    GB->download(G, h, d, n * sizeof(float));
    return h;
}

/* ------------------------------------------------------------------ random data */
static void randn(float *x, size_t n, double s) { for (size_t i = 0; i < n; i++) x[i] = (float)(s * lssar_rng_normal(&rng)); }
static float *hrandn(size_t n, double s) { float *x = hf(n); randn(x, n, s); return x; }
static float *hcopy(const float *x, size_t n) { float *y = hf(n); memcpy(y, x, n * sizeof(float)); return y; }
static float *habs(const float *x, size_t n) { float *y = hf(n); for (size_t i = 0; i < n; i++) y[i] = fabsf(x[i]); return y; }

static uint16_t f2bf(float f) {   /* round to nearest even */
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}
static float bf2f(uint16_t b) { uint32_t x = (uint32_t)b << 16; float f; memcpy(&f, &x, 4); return f; }
static void round_bf16(float *x, size_t n) { for (size_t i = 0; i < n; i++) x[i] = bf2f(f2bf(x[i])); }
/* Activation tensors of the context in use (nn_act: bf16 in a context that stores them so, the CUDA
   backend's NN_BF16). aput rounds h to bf16 IN PLACE first there, so the CPU reference computes on
   the values stored; aget gives them back as floats; anan: n NaN activations (all-ones bytes). */
static int abf(void) { return GB->act_dtype(G) == LSSAR_BF16; }
static size_t aes(void) { return abf() ? 2 : 4; }
static void *aput(float *h, size_t n) {
    if (abf()) round_bf16(h, n);
    void *d = dmem(n * aes());
    GB->upload_act(G, d, h, n);
    return d;
}
static float *aget(const void *d, size_t n) {
    float *h = hf(n);
    GB->download_act(G, h, d, n);
    return h;
}
static void *anan(size_t n) {
    void *h = malloc(n * aes() + 1);
    if (!h) fatal("host malloc failed");
    memset(h, 0xFF, n * aes());
    void *d = dputb(h, n * aes());
    gsync("poison upload");
    free(h);
    return d;
}
/* An output stored as an activation: in a bf16 context rounded once more, |e| <= u |value| per
   element, so a norm-wise relative bound b becomes b + u (1 + b). A bit-exact reference is the
   CPU's rounded the same way (abits). */
static double ab(double b) { return abf() ? b + UB * (1 + b) : b; }
static float *abits(float *ref, size_t n) { if (abf()) round_bf16(ref, n); return ref; }

/* ------------------------------------------------------------------ comparisons */
typedef struct { double err; size_t bad; } cmpres;
static double nrm_f(const float *x, size_t n) { double s = 0; for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i]; return sqrt(s); }
static double nrm_d(const double *x, size_t n) { double s = 0; for (size_t i = 0; i < n; i++) s += x[i] * x[i]; return sqrt(s); }
static cmpres cmp_ff(const float *got, const float *ref, size_t n) {
    double num = 0, den = 0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i]) && isfinite(ref[i])) { bad++; continue; }
        double d = (double)got[i] - ref[i];
        if (isfinite(ref[i])) { num += d * d; den += (double)ref[i] * ref[i]; }
    }
    cmpres c = {den > 0 ? sqrt(num / den) : sqrt(num), bad};
    if (bad) c.err = INFINITY;
    return c;
}
static cmpres cmp_fd(const float *got, const double *ref, size_t n) {
    double num = 0, den = 0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) { bad++; continue; }
        double d = (double)got[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    cmpres c = {den > 0 ? sqrt(num / den) : sqrt(num), bad};
    if (bad) c.err = INFINITY;
    return c;
}
static int check(cmpres c, double bound, const char *fmt, ...) {
    char name[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    int pass = c.bad == 0 && c.err <= bound;
    record(pass, name, c.err, bound, c.bad, NULL);
    return pass;
}
static int check_note(cmpres c, double bound, const char *note, const char *fmt, ...) {
    char name[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    int pass = c.bad == 0 && c.err <= bound;
    record(pass, name, c.err, bound, c.bad, note);
    return pass;
}
/* bit-identical; elem = element size for the count of differing elements */
static int check_bits(const void *got, const void *ref, size_t bytes, size_t elem, const char *fmt, ...) {
    char name[256], note[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    size_t ndiff = 0, first = 0;
    const unsigned char *a = got, *b = ref;
    for (size_t i = 0; i < bytes / elem; i++)
        if (memcmp(a + i * elem, b + i * elem, elem)) { if (!ndiff) first = i; ndiff++; }
    if (bytes % elem && memcmp(a + bytes / elem * elem, b + bytes / elem * elem, bytes % elem)) ndiff++;
    snprintf(note, sizeof note, "%zu of %zu elements differ (first at %zu)", ndiff, bytes / elem, first);
    record(ndiff == 0, name, 0, -1, 0, note);
    return ndiff == 0;
}
static int check_true(int cond, const char *note, const char *fmt, ...) {
    char name[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    if (cond) npass++; else nfail++;
    snprintf(last_buf, sizeof last_buf, "%s", name);
    last_check = last_buf;
    printf("%s %s%s%s\n", cond ? "ok  " : "FAIL", name, note ? ": " : "", note ? note : "");
    if (jf) {
        fputs("{\"group\": ", jf); json_str(jf, group);
        fputs(", \"name\": ", jf); json_str(jf, name);
        fprintf(jf, ", \"pass\": %s, \"bound\": \"condition\"", cond ? "true" : "false");
        if (note) { fputs(", \"note\": ", jf); json_str(jf, note); }
        fputs("}\n", jf);
        fflush(jf);
    }
    fflush(stdout);
    return cond;
}
static size_t count_nonfinite(const float *x, size_t n) { size_t c = 0; for (size_t i = 0; i < n; i++) c += !isfinite(x[i]); return c; }
/* ||b|| / ||ref|| for a per-element bound b */
static double nbound_f(const float *b, const float *ref, size_t n) { double r = nrm_f(ref, n); return r > 0 ? nrm_f(b, n) / r : nrm_f(b, n); }

static const char *only, *skip_groups;
static int in_list(const char *list, const char *g) {
    size_t n = strlen(g);
    for (const char *p = list; (p = strstr(p, g)); p += n)
        if ((p == list || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return 1;
    return 0;
}
static int want(const char *g) {
    if (skip_groups && *skip_groups && in_list(skip_groups, g)) return 0;
    return !only || !*only || in_list(only, g);
}
static void use_ctx(int prec) { P = prec; G = gctx[prec]; }

/* ================================================================== memory */
static void test_memory(void) {
    use_ctx(NN_FP32);
    size_t sizes[] = {1, 13, 4096, (1u << 20) + 3};
    for (int s = 0; s < 4; s++) {
        size_t nb = sizes[s];
        unsigned char *z = hmem(nb), *r = hmem(nb), *h = hmem(nb);
        memset(z, 0, nb);
        for (size_t i = 0; i < nb; i++) r[i] = (unsigned char)(lssar_rng_u64(&rng) | 1);  /* never 0 */
        void *a = dmem(nb);
        memset(h, 0xAB, nb);
        GB->download(G, h, a, nb);
        check_bits(h, z, nb, 1, "mem alloc %zu bytes is zeroed", nb);
        GB->upload(G, a, r, nb);
        memset(h, 0, nb);
        GB->download(G, h, a, nb);
        check_bits(h, r, nb, 1, "mem upload + download %zu bytes", nb);
        void *c = dmem(nb);
        GB->copy(G, c, a, nb);
        memset(h, 0, nb);
        GB->download(G, h, c, nb);
        check_bits(h, r, nb, 1, "mem copy device->device %zu bytes", nb);
        release_all();
    }
    size_t n = 100003;
    float *x = dnan(n);
    GB->zero(G, x, n * sizeof(float));
    float *h = dget(x, n), *zf = hf(n);
    memset(zf, 0, n * sizeof(float));
    check_bits(h, zf, n * sizeof(float), 4, "mem zero %zu floats (over NaN)", n);
    release_all();
    gsync("memory");
}

/* ================================================================== elementwise */
static void test_elementwise(void) {
    for (int prec = 0; prec < 2; prec++) {
        use_ctx(prec);
        const char *pn = PN[prec];
        size_t n = quick ? 1003 : 1000003;
        /* gelu */
        float *x = hrandn(n, 2.5);
        float sp[] = {0.0f, 8.0f, -8.0f, 20.0f, -20.0f, 1e-3f, -1e-3f, 3.0f};
        memcpy(x, sp, sizeof sp);
        float *yc = hf(n), *d = hrandn(n, 1.0), *dxc = hf(n);
        void *dx_ = aput(x, n), *dy_ = anan(n), *dd_ = aput(d, n), *dg_ = anan(n);   /* (x, d as stored) */
        CB->gelu_forward(cctx, yc, x, n);
        CB->gelu_backward(cctx, dxc, x, d, n);
        GB->gelu_forward(G, dy_, dx_, n);
        check(cmp_ff(aget(dy_, n), yc, n), ab(1e-5), "gelu_forward %s n=%zu", pn, n);
        GB->gelu_backward(G, dg_, dx_, dd_, n);
        check(cmp_ff(aget(dg_, n), dxc, n), ab(1e-5), "gelu_backward %s n=%zu", pn, n);
        GB->gelu_backward(G, dd_, dx_, dd_, n);   /* dinp aliases dout */
        check(cmp_ff(aget(dd_, n), dxc, n), ab(1e-5), "gelu_backward %s n=%zu in place (dinp = dout)", pn, n);
        gsync("gelu");
        /* residual: one IEEE addition per element, exact */
        float *a = hrandn(n, 1.0), *b = hrandn(n, 1.0), *oc = hf(n);
        void *da_ = aput(a, n), *db_ = aput(b, n), *do_ = anan(n);
        CB->residual_forward(cctx, oc, a, b, n);
        abits(oc, n);   /* (a bf16 context rounds the one addition's result once: those bits) */
        GB->residual_forward(G, do_, da_, db_, n);
        check_bits(aget(do_, n), oc, n * 4, 4, "residual_forward %s n=%zu", pn, n);
        GB->residual_forward(G, da_, da_, db_, n);   /* out aliases a */
        check_bits(aget(da_, n), oc, n * 4, 4, "residual_forward %s n=%zu in place (out = a)", pn, n);
        gsync("residual");
        /* scale: one multiplication, exact */
        float ss[2] = {0.37f, -3.0f};
        for (int k = 0; k < 2; k++) {
            float *s = hrandn(n, 1.0), *sc = hcopy(s, n);
            CB->scale(cctx, sc, n, ss[k]);
            float *s_ = dput(s, n);
            GB->scale(G, s_, n, ss[k]);
            check_bits(dget(s_, n), sc, n * 4, 4, "scale %s n=%zu s=%g", pn, n, ss[k]);
        }
        gsync("scale");
        /* sum of squares (double result) */
        size_t ns[3] = {1, 17, n};
        for (int k = 0; k < 3; k++) {
            float *s = hrandn(ns[k], 1.5);
            double rc = CB->sum_squares(cctx, s, ns[k]);
            float *s_ = dput(s, ns[k]);
            double rg = GB->sum_squares(G, s_, ns[k]);
            cmpres c = {fabs(rg - rc) / rc, isfinite(rg) ? 0 : 1};
            if (c.bad) c.err = INFINITY;
            check(c, 1e-5, "sum_squares %s n=%zu", pn, ns[k]);
            double rg2 = GB->sum_squares(G, s_, ns[k]);
            check_bits(&rg2, &rg, sizeof rg, sizeof rg, "sum_squares %s n=%zu deterministic", pn, ns[k]);
        }
        gsync("sum_squares");
        /* block sums of squares (the gradient norm's, in one call): each block the bits of
           sum_squares on that block alone, and the CPU backend's within 1e-5; then the clip from
           the same block sums on both sides (the CPU's): its norm and scaled values bit for bit */
        {
            const size_t blk = 65536, bn = quick ? 3 * blk + 1001 : 20 * blk + 12345, nb = (bn + blk - 1) / blk;
            float *s = hrandn(bn, 1.5);
            double *cb = hd(nb), *gb = hd(nb), *one = hd(nb), *poison = hd(nb);
            memset(poison, 0xFF, nb * sizeof(double));
            CB->block_sum_squares(cctx, cb, s, bn, blk);
            float *s_ = dput(s, bn);
            double *gb_ = dputb(poison, nb * sizeof(double));
            GB->block_sum_squares(G, gb_, s_, bn, blk);
            GB->download(G, gb, gb_, nb * sizeof(double));
            for (size_t b = 0; b < nb; b++) one[b] = GB->sum_squares(G, s_ + b * blk, bn - b * blk < blk ? bn - b * blk : blk);
            check_bits(gb, one, nb * sizeof(double), sizeof(double), "block_sum_squares %s n=%zu: each of %zu blocks = sum_squares on it", pn, bn, nb);
            cmpres c = {0, 0};
            for (size_t b = 0; b < nb; b++) {
                if (!isfinite(gb[b])) { c.bad++; continue; }
                double e = fabs(gb[b] - cb[b]) / cb[b];
                if (e > c.err) c.err = e;
            }
            if (c.bad) c.err = INFINITY;
            check(c, 1e-5, "block_sum_squares %s n=%zu (max over blocks)", pn, bn);
            double *ss_ = dputb(cb, nb * sizeof(double));
            float nc0 = 0;
            for (int k = 0; k < 2; k++) {
                float clip = k ? 0.5f * nc0 : 0.0f, nc = NAN;   /* no clipping, then clipping */
                float *x = hrandn(bn, 1.0), *xc = hcopy(x, bn);
                CB->clip_norm(cctx, xc, bn, cb, nb, clip, &nc);
                if (!k) nc0 = nc;
                float *x_ = dput(x, bn), *nd_ = dnan(1);
                GB->clip_norm(G, x_, bn, ss_, nb, clip, nd_);
                check_bits(dget(nd_, 1), &nc, sizeof nc, sizeof nc, "clip_norm %s nb=%zu clip=%g: the norm", pn, nb, clip);
                check_bits(dget(x_, bn), xc, bn * sizeof(float), 4, "clip_norm %s n=%zu clip=%g: the gradients", pn, bn, clip);
            }
        }
        gsync("block_sum_squares");
        /* adamw */
        int ts[2] = {1, 1000};
        for (int k = 0; k < 2; k++) {
            float *p = hrandn(n, 0.5), *g = hrandn(n, 0.01), *m = hrandn(n, 0.005), *v = hf(n);
            for (size_t i = 0; i < n; i++) v[i] = (float)(1e-4 * fabs(lssar_rng_normal(&rng)));
            float *pc = hcopy(p, n), *mc = hcopy(m, n), *vc = hcopy(v, n);
            CB->adamw(cctx, pc, g, mc, vc, n, ts[k], 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f);
            float *p_ = dput(p, n), *g_ = dput(g, n), *m_ = dput(m, n), *v_ = dput(v, n);
            GB->adamw(G, p_, g_, m_, v_, n, ts[k], 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f);
            float *pg = dget(p_, n), *mg = dget(m_, n), *vg = dget(v_, n);
            check(cmp_ff(pg, pc, n), 1e-5, "adamw %s n=%zu t=%d params", pn, n, ts[k]);
            check(cmp_ff(mg, mc, n), 1e-5, "adamw %s n=%zu t=%d m", pn, n, ts[k]);
            check(cmp_ff(vg, vc, n), 1e-5, "adamw %s n=%zu t=%d v", pn, n, ts[k]);
            /* the update itself: 1e-5 of it plus the one rounding of p on each side */
            double num = 0, den = 0;
            size_t bad = 0;
            for (size_t i = 0; i < n; i++) {
                if (!isfinite(pg[i])) { bad++; continue; }
                double uc = (double)pc[i] - p[i], ug = (double)pg[i] - p[i];
                num += (ug - uc) * (ug - uc);
                den += uc * uc;
            }
            cmpres c = {den > 0 ? sqrt(num / den) : sqrt(num), bad};
            if (bad) c.err = INFINITY;
            check(c, 1e-5 + 2 * U32 * nrm_f(pc, n) / sqrt(den), "adamw %s n=%zu t=%d update p_new - p", pn, n, ts[k]);
        }
        gsync("adamw");
        release_all();
    }
}

/* ================================================================== matmul */
static double mm_eps(int K) { return 2 * UB + UB * UB + 2 * gam32(K + 1); }

static void test_matmul(void) {
    /* the last: a classifier's shape (V = 50257, odd), whose bf16 rows are copied into padded rows
       that take more than the backend's 128 MiB per product: two row chunks (1280 + 768) */
    int shapes[][3] = {{1, 16, 8}, {67, 48, 33}, {257, 384, 200}, {512, 768, 3072}, {2048, 64, 50257}};
    int nshape = quick ? 2 : 5;
    for (int prec = 0; prec < 2; prec++) {
        use_ctx(prec);
        const char *pn = PN[prec];
        for (int s = 0; s < nshape; s++) {
            int N = shapes[s][0], IC = shapes[s][1], OC = shapes[s][2];
            size_t nx = (size_t)N * IC, nw = (size_t)OC * IC, no = (size_t)N * OC;
            for (int variant = 0; variant < 3; variant++) {
                /* 0: bias, accumulate, dinp; 1: no bias, written dinp; 2: bias, no dinp */
                int has_bias = variant != 1, acc = variant == 0, has_dinp = variant != 2;
                float *x = hrandn(nx, 1.0), *w = hrandn(nw, 1.0 / sqrt(IC)), *bias = has_bias ? hrandn(OC, 0.5) : NULL;
                char shape[96];
                snprintf(shape, sizeof shape, "N=%d IC=%d OC=%d%s", N, IC, OC, has_bias ? " bias" : "");
                /* forward (x as stored; bf16 activations: the bias's bf16 copy, within the bias's
                   share of the bound, and the output's one rounding, ab) */
                float *oc = hf(no);
                void *x_ = aput(x, nx), *o_ = anan(no);
                float *w_ = dput(w, nw), *b_ = has_bias ? dput(bias, OC) : NULL;
                CB->matmul_forward(cctx, oc, x, w, bias, N, IC, OC);
                GB->matmul_forward(G, o_, x_, w_, b_, N, IC, OC);
                float *og = aget(o_, no), *M = NULL;
                if (prec == NN_FP32) {
                    check(cmp_ff(og, oc, no), 1e-5, "matmul_forward %s %s", pn, shape);
                } else if (variant != 2) {
                    float *xa = habs(x, nx), *wa = habs(w, nw), *ba = has_bias ? habs(bias, OC) : NULL;
                    M = hf(no);
                    CB->matmul_forward(cctx, M, xa, wa, ba, N, IC, OC);
                    for (size_t i = 0; i < no; i++) M[i] *= (float)(mm_eps(IC) * 1.001);
                    check(cmp_ff(og, oc, no), ab(nbound_f(M, oc, no)), "matmul_forward %s %s", pn, shape);
                }
                gsync("matmul_forward");
                if (variant == 0) {
                    /* the weight written on the device after a product, as AdamW writes it: the next
                       product must read the new values (the backend's bf16 copy recast, not stale).
                       x 0.5 is exact and shrinks every |x_i w_i|: the first product's bound holds. */
                    float *w2 = hcopy(w, nw), *oc2 = hf(no);
                    for (size_t i = 0; i < nw; i++) w2[i] *= 0.5f;
                    GB->scale(G, w_, nw, 0.5f);
                    CB->matmul_forward(cctx, oc2, x, w2, bias, N, IC, OC);
                    GB->matmul_forward(G, o_, x_, w_, b_, N, IC, OC);
                    check(cmp_ff(aget(o_, no), oc2, no), M ? ab(nbound_f(M, oc2, no)) : 1e-5,
                          "matmul_forward %s %s after the weight changed", pn, shape);
                    GB->scale(G, w_, nw, 2.0f);   /* back (exact) for the backward */
                    gsync("matmul_forward after the weight changed");
                }
                /* backward */
                float *dout = hrandn(no, 1.0);
                float *dic = has_dinp ? (acc ? hrandn(nx, 1.0) : hf(nx)) : NULL;
                float *dwc = hrandn(nw, 0.3), *dbc = has_bias ? hrandn(OC, 0.3) : NULL;
                void *di_ = NULL;
                float *dw_, *db_ = NULL;
                if (has_dinp) di_ = acc ? aput(dic, nx) : anan(nx);   /* (dic as stored) */
                dw_ = dput(dwc, nw);
                if (has_bias) db_ = dput(dbc, OC);
                float *Mdi = has_dinp ? habs(dic, nx) : NULL, *Mdw = habs(dwc, nw), *Mdb = has_bias ? habs(dbc, OC) : NULL;
                if (has_dinp && !acc) memset(Mdi, 0, nx * sizeof(float));
                void *dout_ = aput(dout, no);
                float *dw0 = hcopy(dwc, nw), *db0 = has_bias ? hcopy(dbc, OC) : NULL, *di0 = has_dinp ? hcopy(dic, nx) : NULL;
                CB->matmul_backward(cctx, dic, dwc, dbc, dout, x, w, N, IC, OC, acc);
                GB->matmul_backward(G, di_, dw_, db_, dout_, x_, w_, N, IC, OC, acc);
                float *dig = has_dinp ? aget(di_, nx) : NULL, *dwg = dget(dw_, nw), *dbg = has_bias ? dget(db_, OC) : NULL;
                double bi = 1e-5, bw = 1e-5, bb = 1e-5;
                if (prec == NN_BF16) {
                    float *xa = habs(x, nx), *wa = habs(w, nw), *da = habs(dout, no);
                    CB->matmul_backward(cctx, Mdi, Mdw, Mdb, da, xa, wa, N, IC, OC, 1);
                    for (size_t i = 0; has_dinp && i < nx; i++) Mdi[i] *= (float)(mm_eps(OC) * 1.001);
                    for (size_t i = 0; i < nw; i++) Mdw[i] *= (float)(mm_eps(N) * 1.001);
                    for (int i = 0; has_bias && i < OC; i++) Mdb[i] *= (float)(mm_eps(N) * 1.001);
                    if (has_dinp) bi = nbound_f(Mdi, dic, nx);
                    bw = nbound_f(Mdw, dwc, nw);
                    if (has_bias) bb = nbound_f(Mdb, dbc, OC);
                }
                if (has_dinp) check(cmp_ff(dig, dic, nx), ab(bi), "matmul_backward %s %s dinp (%s)", pn, shape, acc ? "+=" : "=");
                check(cmp_ff(dwg, dwc, nw), bw, "matmul_backward %s %s dweight (+=)", pn, shape);
                if (has_bias) check(cmp_ff(dbg, dbc, OC), bb, "matmul_backward %s %s dbias (+=)", pn, shape);
                gsync("matmul_backward");
                if (variant == 0) {   /* determinism: the same call from the same starting values */
                    GB->upload(G, dw_, dw0, nw * 4);
                    GB->upload(G, db_, db0, OC * 4);
                    GB->upload_act(G, di_, di0, nx);
                    GB->matmul_backward(G, di_, dw_, db_, dout_, x_, w_, N, IC, OC, acc);
                    check_bits(dget(dw_, nw), dwg, nw * 4, 4, "matmul_backward %s %s deterministic dweight", pn, shape);
                    check_bits(dget(db_, OC), dbg, OC * 4, 4, "matmul_backward %s %s deterministic dbias", pn, shape);
                    check_bits(aget(di_, nx), dig, nx * 4, 4, "matmul_backward %s %s deterministic dinp", pn, shape);
                    gsync("matmul_backward determinism");
                }
                release_all();
            }
        }
    }
}

/* ================================================================== layernorm */
static void test_layernorm(void) {
    int shapes[][2] = {{7, 70}, {333, 768}, {64, 1600}};
    int nshape = quick ? 1 : 3;
    for (int prec = 0; prec < 2; prec++) {
        use_ctx(prec);
        const char *pn = PN[prec];
        for (int s = 0; s < nshape; s++) {
            int N = shapes[s][0], C = shapes[s][1];
            size_t n = (size_t)N * C;
            float *x = hrandn(n, 1.0), *w = hrandn(C, 0.3), *b = hrandn(C, 0.5);
            for (size_t i = 0; i < n; i++) x[i] += 3.0f;
            for (int i = 0; i < C; i++) w[i] += 1.0f;
            float *oc = hf(n), *mc = hf(N), *rc = hf(N);
            void *x_ = aput(x, n), *o_ = anan(n);   /* (x as stored) */
            float *w_ = dput(w, C), *b_ = dput(b, C), *m_ = dnan(N), *r_ = dnan(N);
            CB->layernorm_forward(cctx, oc, mc, rc, x, w, b, N, C);
            GB->layernorm_forward(G, o_, m_, r_, x_, w_, b_, N, C);
            check(cmp_ff(aget(o_, n), oc, n), ab(1e-5), "layernorm_forward %s N=%d C=%d out", pn, N, C);
            check(cmp_ff(dget(m_, N), mc, N), 1e-5, "layernorm_forward %s N=%d C=%d mean", pn, N, C);
            check(cmp_ff(dget(r_, N), rc, N), 1e-5, "layernorm_forward %s N=%d C=%d rstd", pn, N, C);
            void *o2_ = anan(n);
            GB->layernorm_forward(G, o2_, NULL, NULL, x_, w_, b_, N, C);
            check(cmp_ff(aget(o2_, n), oc, n), ab(1e-5), "layernorm_forward %s N=%d C=%d out (mean, rstd NULL)", pn, N,
                  C);
            gsync("layernorm_forward");
            float *dout = hrandn(n, 1.0), *dic = hrandn(n, 0.5), *dwc = hrandn(C, 0.5), *dbc = hrandn(C, 0.5);
            void *dout_ = aput(dout, n), *di_ = aput(dic, n);   /* (as stored) */
            float *dw_ = dput(dwc, C), *db_ = dput(dbc, C);
            float *di0 = hcopy(dic, n), *dw0 = hcopy(dwc, C), *db0 = hcopy(dbc, C);
            CB->layernorm_backward(cctx, dic, dwc, dbc, dout, x, w, mc, rc, N, C);
            GB->layernorm_backward(G, di_, dw_, db_, dout_, x_, w_, m_, r_, N, C);
            float *dig = aget(di_, n), *dwg = dget(dw_, C), *dbg = dget(db_, C);
            check(cmp_ff(dig, dic, n), ab(1e-5), "layernorm_backward %s N=%d C=%d dinp (+=)", pn, N, C);
            check(cmp_ff(dwg, dwc, C), 1e-5, "layernorm_backward %s N=%d C=%d dweight (+=)", pn, N, C);
            check(cmp_ff(dbg, dbc, C), 1e-5, "layernorm_backward %s N=%d C=%d dbias (+=)", pn, N, C);
            GB->upload_act(G, di_, di0, n);
            GB->upload(G, dw_, dw0, C * 4);
            GB->upload(G, db_, db0, C * 4);
            GB->layernorm_backward(G, di_, dw_, db_, dout_, x_, w_, m_, r_, N, C);
            check_bits(aget(di_, n), dig, n * 4, 4, "layernorm_backward %s N=%d C=%d deterministic dinp", pn, N, C);
            check_bits(dget(dw_, C), dwg, C * 4, 4, "layernorm_backward %s N=%d C=%d deterministic dweight", pn, N, C);
            check_bits(dget(db_, C), dbg, C * 4, 4, "layernorm_backward %s N=%d C=%d deterministic dbias", pn, N, C);
            gsync("layernorm_backward");
            release_all();
        }
    }
}

/* ================================================================== embedding */
static void emb_case(int B, int T, int Ch, int C, int V, int with_wpe, int pos0, const char *pn) {
    size_t nt = (size_t)B * T * Ch, no = (size_t)B * T * C, nw = (size_t)V * C;
    int maxT = pos0 + T + 5;
    uint16_t *tok = hmem(nt * sizeof(uint16_t));
    for (size_t i = 0; i < nt; i++)   /* a third of the draws from 8 ids: many repeats */
        tok[i] = (uint16_t)(lssar_rng_below(&rng, 3) ? lssar_rng_below(&rng, V) : lssar_rng_below(&rng, V < 8 ? V : 8));
    float *wte[2], *wte_[2], *wpe = with_wpe ? hrandn((size_t)maxT * C, 1.0) : NULL;
    for (int c = 0; c < Ch; c++) wte[c] = hrandn(nw, 1.0);
    char shape[128];
    snprintf(shape, sizeof shape, "B=%d T=%d Ch=%d C=%d V=%d%s", B, T, Ch, C, V,
             with_wpe ? (pos0 ? " wpe+pos0" : " wpe") : " no-wpe");
    float *oc = hf(no);
    CB->embedding_forward(cctx, oc, tok, wte, wpe ? wpe + (size_t)pos0 * C : NULL, B, T, Ch, C);
    uint16_t *tok_ = dputb(tok, nt * sizeof(uint16_t));
    for (int c = 0; c < Ch; c++) wte_[c] = dput(wte[c], nw);
    float *wpe_ = wpe ? dput(wpe, (size_t)maxT * C) : NULL;
    void *o_ = anan(no);
    GB->embedding_forward(G, o_, tok_, wte_, wpe_ ? wpe_ + (size_t)pos0 * C : NULL, B, T, Ch, C);
    float *og = aget(o_, no);
    if (Ch == 1) check_bits(og, abits(oc, no), no * 4, 4, "embedding_forward %s %s", pn, shape);
    else check(cmp_ff(og, oc, no), ab(1e-5), "embedding_forward %s %s", pn, shape);
    gsync("embedding_forward");
    if (pos0) return;   /* the backward takes the whole table */
    float *dout = hrandn(no, 1.0), *dwte[2], *dwte_[2], *dwte0[2];
    for (int c = 0; c < Ch; c++) { dwte[c] = hrandn(nw, 0.5); dwte0[c] = hcopy(dwte[c], nw); dwte_[c] = dput(dwte[c], nw); }
    float *dwpe = with_wpe ? hrandn((size_t)maxT * C, 0.5) : NULL, *dwpe0 = dwpe ? hcopy(dwpe, (size_t)maxT * C) : NULL;
    float *dwpe_ = dwpe ? dput(dwpe, (size_t)maxT * C) : NULL;
    void *dout_ = aput(dout, no);   /* (dout as stored) */
    CB->embedding_backward(cctx, dwte, dwpe, dout, tok, B, T, Ch, C);
    GB->embedding_backward(G, dwte_, dwpe_, dout_, tok_, B, T, Ch, C);
    float *g[2], *gp = NULL;
    for (int c = 0; c < Ch; c++) {
        g[c] = dget(dwte_[c], nw);
        check(cmp_ff(g[c], dwte[c], nw), 1e-5, "embedding_backward %s %s dwte[%d] (+=)", pn, shape, c);
    }
    if (dwpe) {
        gp = dget(dwpe_, (size_t)maxT * C);
        check(cmp_ff(gp, dwpe, (size_t)maxT * C), 1e-5, "embedding_backward %s %s dwpe (+=, %d rows of %d fed)", pn, shape, T, maxT);
    }
    for (int c = 0; c < Ch; c++) GB->upload(G, dwte_[c], dwte0[c], nw * 4);
    if (dwpe) GB->upload(G, dwpe_, dwpe0, (size_t)maxT * C * 4);
    GB->embedding_backward(G, dwte_, dwpe_, dout_, tok_, B, T, Ch, C);
    for (int c = 0; c < Ch; c++)
        check_bits(dget(dwte_[c], nw), g[c], nw * 4, 4, "embedding_backward %s %s deterministic dwte[%d]", pn, shape, c);
    if (dwpe) check_bits(dget(dwpe_, (size_t)maxT * C), gp, (size_t)maxT * C * 4, 4, "embedding_backward %s %s deterministic dwpe", pn, shape);
    gsync("embedding_backward");
}

static void test_embedding(void) {
    for (int prec = 0; prec < 2; prec++) {
        use_ctx(prec);
        emb_case(3, 65, 1, 128, 1000, 1, 0, PN[prec]);
        emb_case(2, 33, 2, 256, 300, 1, 0, PN[prec]);
        emb_case(1, 3, 1, 128, 1000, 1, 5, PN[prec]);   /* decoding: wpe + pos0 * C */
        emb_case(2, 17, 2, 64, 7003, 0, 0, PN[prec]);   /* the orbit vocabulary, no positions */
        if (!quick) emb_case(4, 16, 1, 768, 50257, 1, 0, PN[prec]);   /* ids above 32767 */
        release_all();
    }
}

/* ================================================================== rope */
static void test_rope(void) {
    int cases[][5] = {{2, 65, 3, 64, 0}, {1, 7, 2, 16, 9}, {2, 100, 12, 128, 0}};
    int ncase = quick ? 2 : 3;
    for (int prec = 0; prec < 2; prec++) {
        use_ctx(prec);
        for (int c = 0; c < ncase; c++) {
            int B = cases[c][0], T = cases[c][1], NH = cases[c][2], HS = cases[c][3], pos0 = cases[c][4];
            int maxT = pos0 + T + 3;
            size_t n = (size_t)B * T * NH * HS, nt = (size_t)maxT * (HS / 2);
            float *cs = hf(nt), *sn = hf(nt);
            rope_table(cs, sn, maxT, HS, 10000.0);
            float *x = hrandn(n, 1.0);
            void *x_ = aput(x, n);   /* (x as stored) */
            float *xc = hcopy(x, n), *cs_ = dput(cs, nt), *sn_ = dput(sn, nt);
            CB->rope_forward(cctx, xc, cs, sn, B, T, NH, HS, pos0);
            GB->rope_forward(G, x_, cs_, sn_, B, T, NH, HS, pos0);
            check(cmp_ff(aget(x_, n), xc, n), ab(1e-5), "rope_forward %s B=%d T=%d NH=%d HS=%d pos0=%d", PN[prec], B, T,
                  NH, HS, pos0);
            if (pos0 == 0) {
                float *d = hrandn(n, 1.0);
                void *d_ = aput(d, n);
                float *dc = hcopy(d, n);
                CB->rope_backward(cctx, dc, cs, sn, B, T, NH, HS);
                GB->rope_backward(G, d_, cs_, sn_, B, T, NH, HS);
                check(cmp_ff(aget(d_, n), dc, n), ab(1e-5), "rope_backward %s B=%d T=%d NH=%d HS=%d", PN[prec], B, T, NH,
                      HS);
            }
            gsync("rope");
            release_all();
        }
    }
}

/* ================================================================== xent */
static void xent_case(int R, int V, int tstride, int ostride, int ignore_pct, int with_targets, const char *pn) {
    size_t nl = (size_t)R * V;
    float *lg = hrandn(nl, 3.0);
    if (R > 1) lg[(size_t)1 * V + 5] += 80.0f;   /* one very peaked row */
    uint16_t *tg = NULL;
    if (with_targets) {
        tg = hmem((size_t)R * tstride * sizeof(uint16_t));
        for (int i = 0; i < R * tstride; i++)
            tg[i] = (int)lssar_rng_below(&rng, 100) < ignore_pct ? NN_IGNORE : (uint16_t)lssar_rng_below(&rng, V);
    }
    char shape[128];
    snprintf(shape, sizeof shape, "R=%d V=%d tstride=%d ostride=%d %s", R, V, tstride, ostride,
             !with_targets ? "no targets" : ignore_pct >= 100 ? "all ignored" : "targets");
    size_t no = (size_t)R * ostride;
    void *lg_ = aput(lg, nl);   /* (the logits as stored) */
    float *pc = hcopy(lg, nl), *lc = hnan(no);
    uint16_t *ac = hmem(no * 2);
    memset(ac, 0xFF, no * 2);
    double accc[2] = {1.5, 2.0};
    if (ignore_pct >= 100) accc[0] = accc[1] = 0.0;
    double acc0[2] = {accc[0], accc[1]};
    CB->xent_forward(cctx, pc, lc, ac, tg, tstride, ostride, R, V, accc);
    float *l_ = dnan(no);
    uint16_t *a_ = dmem(no * 2);
    {
        uint16_t *ff = hmem(no * 2);
        memset(ff, 0xFF, no * 2);
        GB->upload(G, a_, ff, no * 2);
    }
    uint16_t *tg_ = tg ? dputb(tg, (size_t)R * tstride * 2) : NULL;
    double *acc_ = dputb(acc0, sizeof acc0);
    GB->xent_forward(G, lg_, l_, a_, tg_, tstride, ostride, R, V, acc_);
    float *pg = aget(lg_, nl), *lgot = dget(l_, no);
    uint16_t *ag = hmem(no * 2);
    double accg[2];
    GB->download(G, ag, a_, no * 2);
    GB->download(G, accg, acc_, sizeof accg);
    check(cmp_ff(pg, pc, nl), ab(1e-5), "xent_forward %s %s probs", pn, shape);
    /* losses and argmax at r * ostride only; the slots between (other channels') must be untouched */
    float *lcs = hf(R), *lgs = hf(R);
    uint16_t *acs = hmem(R * 2), *ags = hmem(R * 2);
    int gaps_ok = 1;
    for (int r = 0; r < R; r++) {
        lcs[r] = lc[(size_t)r * ostride]; lgs[r] = lgot[(size_t)r * ostride];
        acs[r] = ac[(size_t)r * ostride]; ags[r] = ag[(size_t)r * ostride];
        for (int o = 1; o < ostride; o++) gaps_ok &= !isfinite(lgot[(size_t)r * ostride + o]) && ag[(size_t)r * ostride + o] == 0xFFFF;
    }
    check(cmp_ff(lgs, lcs, R), 1e-5, "xent_forward %s %s losses", pn, shape);
    check_bits(ags, acs, (size_t)R * 2, 2, "xent_forward %s %s argmax", pn, shape);
    if (ostride > 1) check_true(gaps_ok, NULL, "xent_forward %s %s leaves the other channels' loss/argmax slots alone", pn, shape);
    check_bits(&accg[1], &accc[1], sizeof(double), sizeof(double), "xent_forward %s %s acc count (%g)", pn, shape, accc[1]);
    {
        double sc = accc[0] - acc0[0], sg = accg[0] - acc0[0];
        cmpres c = {sc != 0 ? fabs(sg - sc) / fabs(sc) : fabs(sg - sc), isfinite(accg[0]) ? 0 : 1};
        if (c.bad) c.err = INFINITY;
        check(c, 1e-5, "xent_forward %s %s acc loss sum", pn, shape);
    }
    gsync("xent_forward");
    if (!with_targets) return;
    abits(pc, nl);   /* the backward of the probabilities as stored */
    CB->xent_backward(cctx, pc, tg, tstride, R, V, 0.7f, accc);
    GB->xent_backward(G, lg_, tg_, tstride, R, V, 0.7f, acc_);
    float *dg = aget(lg_, nl);
    size_t nz = 0;
    for (int r = 0; r < R; r++)
        if (tg[(size_t)r * tstride] == NN_IGNORE)
            for (int j = 0; j < V; j++) nz += dg[(size_t)r * V + j] != 0.0f;
    if (ignore_pct >= 100) {
        float *z = hf(nl);
        memset(z, 0, nl * 4);
        check_bits(dg, z, nl * 4, 4, "xent_backward %s %s all zero (count 0)", pn, shape);
    } else {
        check(cmp_ff(dg, pc, nl), ab(1e-5), "xent_backward %s %s dlogits", pn, shape);
        char note[64];
        snprintf(note, sizeof note, "%zu non-zero elements", nz);
        check_true(nz == 0, note, "xent_backward %s %s ignored rows exactly 0", pn, shape);
    }
    gsync("xent_backward");
    /* determinism of the forward (the loss sum is a reduction) */
    double acc2[2] = {acc0[0], acc0[1]}, accg2[2];
    void *lg2_ = aput(lg, nl);
    float *l2_ = dnan(no);
    double *acc2_ = dputb(acc2, sizeof acc2);
    GB->xent_forward(G, lg2_, l2_, a_, tg_, tstride, ostride, R, V, acc2_);
    GB->download(G, accg2, acc2_, sizeof accg2);
    check_bits(accg2, accg, sizeof accg, sizeof(double), "xent_forward %s %s deterministic acc", pn, shape);
    check_bits(aget(lg2_, nl), pg, nl * 4, 4, "xent_forward %s %s deterministic probs", pn, shape);
    gsync("xent determinism");
}

static void test_xent(void) {
    for (int prec = 0; prec < 2; prec++) {
        use_ctx(prec);
        xent_case(300, 257, 1, 1, 20, 1, PN[prec]);
        xent_case(64, quick ? 5000 : 50257, 2, 2, 10, 1, PN[prec]);
        xent_case(17, 1000, 1, 1, 0, 0, PN[prec]);
        xent_case(8, 100, 1, 1, 100, 1, PN[prec]);
        release_all();
    }
}

/* ================================================================== attention */
/* Every kind the fused path supports (src/attn/flash.h flash_fused_supported: the loops skip the
   others, and test_refused checks that those are refused) */
static int fused_ok(int kind) {
    lssar_attn_stages st = ref_st(kind);
    return flash_fused_supported(&st);
}

/* sigmoid / relu: the length normalisation of the attention cases (the loops of test_attention,
   test_decode and test_api set it; the other kinds ignore it) and the training length of
   len_norm train, below most T so that rows past it are covered. */
static lssar_len_norm attn_len_norm = LSSAR_LEN_NORM_TRAIN;
#define ATTN_TRAIN_LEN 48
static lssar_attn_desc attn_desc(int kind, const float *ssmax_s) {
    lssar_attn_desc d = {.kind = (lssar_attn_kind)kind, .p = 15.0f, .ssmax_s = ref_is_ssmax(kind) ? ssmax_s : NULL,
                         .len_norm = attn_len_norm, .train_len = ATTN_TRAIN_LEN};
    return d;
}
static int attn_n_len_norms(int kind) { return kind == LSSAR_ATTN_SIGMOID || kind == LSSAR_ATTN_RELU ? 2 : 1; }
/* the kind's name in the check lines; sigmoid / relu with their length normalisation */
static const char *attn_label(int kind) {
    static const char *un[2][2] = {{"sigmoid(train)", "sigmoid(row)"}, {"relu(train)", "relu(row)"}};
    return attn_n_len_norms(kind) == 2 ? un[kind - LSSAR_ATTN_SIGMOID][attn_len_norm != LSSAR_LEN_NORM_TRAIN]
                                        : lssar_attn_name((lssar_attn_kind)kind);
}

/* the inputs of one attention case: bf16-representable when grid (see the header) */
typedef struct { float *q, *k, *v, *dy, *sh; } attn_in;

static attn_in attn_inputs(int B, int T, int H, int D, int kvs_rows, int grid, int adversarial) {
    attn_in in;
    size_t nq = (size_t)B * T * H * D, nk = (size_t)B * kvs_rows * H * D;
    in.q = hrandn(nq, 1.5);
    in.k = hrandn(nk, 1.0);
    in.v = hrandn(nk, 1.0);
    in.dy = hrandn(nq, 1.0);
    in.sh = hf(H);
    for (int h = 0; h < H; h++) in.sh[h] = (float)(0.43 + 0.1 * lssar_rng_normal(&rng));
    if (adversarial) {
        /* LSSAR's overflow case: every query along g, most keys against it, every (T/16)-th key
           (key 0 first) along it: x = +lambda for those, -lambda elsewhere, so at the end of the
           sequence u_max ~ n / 16 (1024 at T = 16384) and u^15 would overflow float32 without the
           (u / u_max)^p rescaling; the 16 aligned keys differ by their noise, so the weights
           and gradients are not trivially one-hot */
        float *g = hrandn(D, 1.0);
        int every = kvs_rows / 16 > 7 ? kvs_rows / 16 : 7;
        for (int b = 0; b < B; b++)
            for (int t = 0; t < kvs_rows; t++)
                for (int h = 0; h < H; h++)
                    for (int d = 0; d < D; d++) {
                        size_t o = (((size_t)b * kvs_rows + t) * H + h) * D + d;
                        in.k[o] = (t % every == 0 ? 2 * g[d] : -2 * g[d]) + 0.05f * in.k[o];
                    }
        for (size_t i = 0; i < nq; i++) in.q[i] = 2 * g[i % D] + 0.05f * in.q[i];
    }
    if (grid) { round_bf16(in.q, nq); round_bf16(in.k, nk); round_bf16(in.v, nk); round_bf16(in.dy, nq); }
    return in;
}

/* the bf16 bound of one tensor (the header): min(6 ||sigma||, ||worst||) / ||ref|| + the
   fp32-level term (both are bounds: the worst case a certain one, which is the tighter at small n) */
static double bound_bf16(const double *sig, const double *worst, const float *ref, size_t n, double e32, double extra,
                         char *note, size_t nn) {
    double r = nrm_f(ref, n), f32 = fmax(2e-4, 2 * e32);
    if (!(r > 0)) r = 1;
    double ps = 6 * nrm_d(sig, n) / r, wc = nrm_d(worst, n) / r;
    snprintf(note, nn, "(bf16: min(6-sigma %.2g, worst case %.2g) + fp32 %.2g)", ps, wc, f32);
    return fmin(ps, wc) + f32 + extra;
}
#define NEW_REF(R, n, H, bwd)                                                                          \
    do {                                                                                               \
        (R).y = hd(n); (R).yb = hd(n); (R).ys = hd(n);                                                \
        if (bwd) {                                                                                     \
            (R).dq = hd(n); (R).dk = hd(n); (R).dv = hd(n); (R).dqb = hd(n); (R).dkb = hd(n);          \
            (R).dvb = hd(n); (R).dqs = hd(n); (R).dks = hd(n); (R).dvs = hd(n);                        \
            (R).ds = hd(H); (R).dsb = hd(H); (R).dss = hd(H); (R).dsabs = hd(H);                       \
        }                                                                                              \
    } while (0)

/* ||R(A perturbed) - R|| / ||R|| for out, dq, dk, dv: q and k moved by du relative with random
   signs (du > 0), every logit moved by the exponential unit's error (exp_err > 0, attn_ref64.h's
   ref_jitter). */
static void attn_perturbed(const ref_args *A, const ref_out *R, size_t n, int H, double du, double exp_err,
                           double *rel) {
    ref_out P = {0};
    NEW_REF(P, n, H, 1);
    float *q2 = hcopy(A->q, n), *k2 = hcopy(A->k, n);
    lssar_rng r;
    lssar_rng_seed(&r, 4242 + (uint64_t)A->Tq);  /* (not the global stream: the inputs of later cases stay) */
    for (size_t i = 0; du > 0 && i < n; i++) {
        q2[i] = (float)(q2[i] * (1 + (lssar_rng_below(&r, 2) ? du : -du)));
        k2[i] = (float)(k2[i] * (1 + (lssar_rng_below(&r, 2) ? du : -du)));
    }
    ref_args A2 = *A;
    A2.q = q2;
    A2.k = k2;
    A2.exp_err = exp_err;
    if (attn_ref64(&A2, &P)) return;  /* (out of memory: no term) */
    const double *a[4] = {P.y, P.dq, P.dk, P.dv}, *b[4] = {R->y, R->dq, R->dk, R->dv};
    for (int t = 0; t < 4; t++) {
        double num = 0, den = 0;
        for (size_t i = 0; i < n; i++) {
            num += (a[t][i] - b[t][i]) * (a[t][i] - b[t][i]);
            den += b[t][i] * b[t][i];
        }
        rel[t] = den > 0 ? sqrt(num / den) : 0;
    }
}

/* The fp32 context's conditioning term of attn_seam's bounds. An fp32 dot product q . k is the
   exact dot product of inputs moved by up to gamma_D relative per component (backward error
   analysis); in the probabilistic model of rounding (attn_ref64.h) by about sqrt(D) u. Where the
   kind amplifies that (phi exp with the re-weighting on the cos score: the logits reach
   ln(D) ln(T) and the power p multiplies their relative error), two fp32 implementations cannot
   agree to 1e-5 however they sum (docs/CUDA.md "Supported kinds" has the figures: both sides
   near 1e-5 from float64). cond[t] = ||R(q~, k~) - R|| / ||R|| for out, dq, dk, dv, with q~, k~
   the inputs moved by sqrt(D) u with random signs (a first-order randomised condition estimate);
   each side may make such an error, so the bound adds 2 cond. The GPU side alone also takes its
   exponentials from the hardware unit (src/attn/flash.h, flash_ex2: 2^-22 relative and more;
   the CPU rows' exponential is within the 1e-5): its effect, every logit moved by the unit's
   error with random signs, is added once, as half of it in cond. */
static void attn_conditioning(const ref_args *A, const ref_out *R, size_t n, int H, double *cond) {
    double unit[4] = {0, 0, 0, 0};
    attn_perturbed(A, R, n, H, sqrt((double)A->D) * U32, 0, cond);
    attn_perturbed(A, R, n, H, 0, 0x1p-22, unit);
    for (int t = 0; t < 4; t++) cond[t] += unit[t] / 2;
}

/* full forward + backward through the seam (Tq = Tk = kv_stride = T) */
static void attn_seam(int kind, int B, int T, int H, int D, int grid) {
    size_t n = (size_t)B * T * H * D;
    attn_in in = attn_inputs(B, T, H, D, T, grid, 0);
    lssar_attn_desc dc = attn_desc(kind, in.sh);
    char shape[128];
    snprintf(shape, sizeof shape, "%s B=%d T=%d H=%d D=%d%s", attn_label(kind), B, T, H, D, grid ? "" : " full-fp32-inputs");
    /* the CPU */
    float *oc = hf(n), *dqc = hf(n), *dkc = hf(n), *dvc = hf(n), *ds0 = hrandn(H, 0.25), *dsc = hcopy(ds0, H);
    int rc = CB->attention_forward(cctx, oc, NULL, in.q, in.k, in.v, &dc, B, T, T, T, H, D);
    rc |= CB->attention_backward(cctx, dqc, dkc, dvc, ref_is_ssmax(kind) ? dsc : NULL, in.dy, in.q, in.k,
                                 in.v, oc, NULL, &dc, B, T, H, D);
    if (rc) { check_true(0, lssar_errmsg(), "attention CPU reference %s", shape); return; }
    float *dsinc_c = hf(H);
    for (int h = 0; h < H; h++) dsinc_c[h] = dsc[h] - ds0[h];
    /* the float64 reference (every case: the bf16 bounds, ds's rounding bound dsfp and the fp32
       context's conditioning term below need it) */
    ref_out R = {0};
    NEW_REF(R, n, H, 1);
    ref_args A = {kind, 15.0, in.sh, B, T, T, T, H, D, in.q, in.k, in.v, in.dy, 0, attn_len_norm,
                  ATTN_TRAIN_LEN, 0};
    int have_ref = attn_ref64(&A, &R) == 0;
    if (!have_ref)
        infof("attention %s: the float64 reference ran out of memory; bf16 checks use 1e-2", shape);
    for (int h = 0; have_ref && h < H; h++) R.dsb[h] += 8 * U32 * R.dsabs[h];
    double cond[4] = {0, 0, 0, 0};
    if (have_ref) attn_conditioning(&A, &R, n, H, cond);
    /* a bf16 context that stores its activations in bf16 stores out, dq, dk, dv so: the model of
       the public API's bf16 storage (attn_ref64.h store_bf16) */
    ref_out R16 = {0};
    int store16 = grid && have_ref && GB->act_dtype(gctx[NN_BF16]) == LSSAR_BF16;
    if (store16) {
        NEW_REF(R16, n, H, 1);
        ref_args A16 = A;
        A16.store_bf16 = 1;
        store16 = attn_ref64(&A16, &R16) == 0;
        for (int h = 0; store16 && h < H; h++) R16.dsb[h] += 8 * U32 * R16.dsabs[h];
    }
    double e32[5] = {0, 0, 0, 0, 0};   /* y, dq, dk, dv, ds of the fp32 context */
    for (int prec = 0; prec < (grid ? 2 : 1); prec++) {
        use_ctx(prec);
        const char *pn = PN[prec];
        float *sh_ = dput(in.sh, H);
        lssar_attn_desc dg = attn_desc(kind, sh_);
        void *q_ = aput(in.q, n), *k_ = aput(in.k, n), *v_ = aput(in.v, n), *dy_ = aput(in.dy, n);   /* (on the grid) */
        size_t nst = GB->attention_stats_floats(&dg, B, T, H, D);
        float *st_ = nst ? dnan(nst) : NULL;
        void *o_ = anan(n);
        rc = GB->attention_forward(G, o_, st_, q_, k_, v_, &dg, B, T, T, T, H, D);
        if (!check_true(rc == 0, rc ? lssar_errmsg() : NULL, "attention_forward %s %s returns 0", pn, shape)) { release_dev(); continue; }
        float *og = aget(o_, n);
        void *dq_ = anan(n), *dk_ = anan(n), *dv_ = anan(n);
        float *ds_ = ref_is_ssmax(kind) ? dput(ds0, H) : NULL;
        rc = GB->attention_backward(G, dq_, dk_, dv_, ds_, dy_, q_, k_, v_, o_, st_, &dg, B, T, H, D);
        if (!check_true(rc == 0, rc ? lssar_errmsg() : NULL, "attention_backward %s %s returns 0", pn, shape)) { release_dev(); continue; }
        float *dqg = aget(dq_, n), *dkg = aget(dk_, n), *dvg = aget(dv_, n), *dsg = ds_ ? dget(ds_, H) : NULL;
        gsync("attention");
        float *dsinc_g = hf(H);
        for (int h = 0; dsg && h < H; h++) dsinc_g[h] = (float)((double)dsg[h] - ds0[h]);
        double dsacc = 2 * U32 * nrm_f(dsc, H) / fmax(nrm_f(dsinc_c, H), 1e-300);
        cmpres c[5] = {cmp_ff(og, oc, n), cmp_ff(dqg, dqc, n), cmp_ff(dkg, dkc, n), cmp_ff(dvg, dvc, n),
                       dsg ? cmp_ff(dsinc_g, dsinc_c, H) : (cmpres){0, 0}};
        /* ds: a sum over (b, i, j) of signed terms; the fp32 roundings of each term (a few U32)
           do not cancel the way the terms do: + 8 U32 sum |terms| / ||ds|| */
        double dsfp = have_ref ? 8 * U32 * nrm_d(R.dsabs, H) / fmax(nrm_f(dsinc_c, H), 1e-300) : 0;
        double bnd[5] = {1e-5 + 2 * cond[0], 1e-5 + 2 * cond[1], 1e-5 + 2 * cond[2], 1e-5 + 2 * cond[3],
                         1e-5 + dsacc + dsfp};
        if (prec == NN_FP32) for (int t = 0; t < 5; t++) e32[t] = c[t].err;
        char notes[5][160] = {"", "", "", "", ""};
        for (int t = 0; prec == NN_FP32 && t < 4; t++)
            if (2 * cond[t] > 1e-6) snprintf(notes[t], 160, "(fp32: 1e-5 + 2 x conditioning %.2g)", cond[t]);
        if (prec == NN_BF16) {
            if (have_ref && (abf() ? store16 : 1)) {
                const ref_out *Rb = abf() ? &R16 : &R;
                bnd[0] = bound_bf16(Rb->ys, Rb->yb, oc, n, e32[0], 0, notes[0], 160);
                bnd[1] = bound_bf16(Rb->dqs, Rb->dqb, dqc, n, e32[1], 0, notes[1], 160);
                bnd[2] = bound_bf16(Rb->dks, Rb->dkb, dkc, n, e32[2], 0, notes[2], 160);
                bnd[3] = bound_bf16(Rb->dvs, Rb->dvb, dvc, n, e32[3], 0, notes[3], 160);
                bnd[4] = bound_bf16(Rb->dss, Rb->dsb, dsinc_c, H, e32[4], dsacc, notes[4], 160);
            } else for (int t = 0; t < 5; t++) { bnd[t] = 1e-2; snprintf(notes[t], 160, "(no float64 reference: 1e-2)"); }
        }
        const char *tn[5] = {"out", "dq", "dk", "dv", "ds (increment)"};
        for (int t = 0; t < (dsg ? 5 : 4); t++)
            check_note(c[t], bnd[t], notes[t][0] ? notes[t] : NULL, "attention %s %s %s", pn, shape, tn[t]);
        if (have_ref) {
            float *cpu[4] = {oc, dqc, dkc, dvc}, *gpu[4] = {og, dqg, dkg, dvg};
            double *ref[4] = {R.y, R.dq, R.dk, R.dv};
            char buf[512];
            int len = snprintf(buf, sizeof buf, "attention %s %s vs float64:", pn, shape);
            for (int t = 0; t < 4; t++)
                len += snprintf(buf + len, sizeof buf - len, " %s cpu %.2g gpu %.2g;", tn[t], cmp_fd(cpu[t], ref[t], n).err,
                                cmp_fd(gpu[t], ref[t], n).err);
            infof("%s", buf);
        }
        /* determinism: the same calls again into fresh poisoned buffers */
        if (T >= 63) {
            float *st2_ = nst ? dnan(nst) : NULL, *ds2_ = ds_ ? dput(ds0, H) : NULL;
            void *o2_ = anan(n), *dq2_ = anan(n), *dk2_ = anan(n), *dv2_ = anan(n);
            GB->attention_forward(G, o2_, st2_, q_, k_, v_, &dg, B, T, T, T, H, D);
            GB->attention_backward(G, dq2_, dk2_, dv2_, ds2_, dy_, q_, k_, v_, o2_, st2_, &dg, B, T, H, D);
            int same = 1;
            float *o2 = aget(o2_, n), *dq2 = aget(dq2_, n), *dk2 = aget(dk2_, n), *dv2 = aget(dv2_, n);
            same &= !memcmp(o2, og, n * 4) && !memcmp(dq2, dqg, n * 4) && !memcmp(dk2, dkg, n * 4) && !memcmp(dv2, dvg, n * 4);
            if (nst) { float *s1 = dget(st_, nst), *s2 = dget(st2_, nst); same &= !memcmp(s1, s2, nst * 4); }
            if (ds_) same &= !memcmp(dget(ds2_, H), dsg, H * 4);
            check_true(same, same ? NULL : "out / stats / dq / dk / dv / ds differ between two identical calls",
                       "attention %s %s deterministic (two runs, bits)", pn, shape);
            gsync("attention determinism");
        }
        release_dev();
    }
    release_all();
}

/* forward only over a KV cache: Tq < Tk <= kvs; the cache rows >= Tk are NaN (never read) */
static void attn_decode(int kind, int B, int Tq, int Tk, int kvs, int H, int D) {
    size_t nq = (size_t)B * Tq * H * D, nk = (size_t)B * kvs * H * D;
    attn_in in = attn_inputs(B, Tq, H, D, kvs, 1, 0);
    for (int b = 0; b < B; b++)
        for (int t = Tk; t < kvs; t++)
            for (int e = 0; e < H * D; e++) {
                in.k[((size_t)b * kvs + t) * H * D + e] = NAN;
                in.v[((size_t)b * kvs + t) * H * D + e] = NAN;
            }
    lssar_attn_desc dc = attn_desc(kind, in.sh);
    char shape[128];
    snprintf(shape, sizeof shape, "%s B=%d Tq=%d Tk=%d kv_stride=%d H=%d D=%d", attn_label(kind), B, Tq, Tk, kvs, H, D);
    float *oc = hf(nq);
    if (CB->attention_forward(cctx, oc, NULL, in.q, in.k, in.v, &dc, B, Tq, Tk, kvs, H, D)) {
        check_true(0, lssar_errmsg(), "decode CPU reference %s", shape);
        return;
    }
    ref_out R = {0};
    NEW_REF(R, nq, H, 0);
    ref_args A = {kind, 15.0, in.sh, B, Tq, Tk, kvs, H, D, in.q, in.k, in.v, NULL, 0, attn_len_norm, ATTN_TRAIN_LEN, 0};
    int have_ref = attn_ref64(&A, &R) == 0;
    double e32 = 0;
    for (int prec = 0; prec < 2; prec++) {
        use_ctx(prec);
        float *sh_ = dput(in.sh, H);
        lssar_attn_desc dg = attn_desc(kind, sh_);
        void *q_ = aput(in.q, nq), *k_ = aput(in.k, nk), *v_ = aput(in.v, nk), *o_ = anan(nq);   /* (on the grid) */
        int rc = GB->attention_forward(G, o_, NULL, q_, k_, v_, &dg, B, Tq, Tk, kvs, H, D);
        if (check_true(rc == 0, rc ? lssar_errmsg() : NULL, "decode %s %s returns 0", PN[prec], shape)) {
            cmpres c = cmp_ff(aget(o_, nq), oc, nq);
            double b = 1e-5;
            char note[160] = "";
            if (prec == NN_FP32) e32 = c.err;
            else b = have_ref ? ab(bound_bf16(R.ys, R.yb, oc, nq, e32, 0, note, sizeof note)) : 1e-2;
            check_note(c, b, note[0] ? note : NULL, "decode %s %s out", PN[prec], shape);
        }
        gsync("decode");
        release_dev();
    }
    release_all();
}

/* q, k, v, dy of `in` (n floats each) into buf[0..3] on the device: float32, or bf16 (dt 1) */
static void api_upload(const attn_in *in, size_t n, int dt, void *const *buf) {
    const float *src[4] = {in->q, in->k, in->v, in->dy};
    for (int t = 0; t < 4; t++) {
        if (dt) {
            uint16_t *hb = hmem(n * 2);
            for (size_t i = 0; i < n; i++) hb[i] = f2bf(src[t][i]);
            CU(cudaMemcpy(buf[t], hb, n * 2, cudaMemcpyHostToDevice));
        } else CU(cudaMemcpy(buf[t], src[t], n * 4, cudaMemcpyHostToDevice));
    }
}

/* the public API: lssar_attn_forward_cuda / _backward_cuda, fp32 and bf16 storage */
static void api_case(int kind, int B, int T, int H, int D, int adversarial) {
    size_t n = (size_t)B * T * H * D;
    attn_in in = attn_inputs(B, T, H, D, T, 1, adversarial);
    lssar_attn_desc dc = attn_desc(kind, in.sh);
    char shape[128];
    snprintf(shape, sizeof shape, "%s B=%d T=%d H=%d D=%d%s", attn_label(kind), B, T, H, D, adversarial ? " adversarial (u_max ~ n/16)" : "");
    float *oc = hf(n), *dqc = hf(n), *dkc = hf(n), *dvc = hf(n), *dsc = hf(H);
    memset(dsc, 0, H * 4);
    int rc = lssar_attn_forward(&dc, B, T, H, D, in.q, in.k, in.v, oc);
    rc |= lssar_attn_backward(&dc, B, T, H, D, in.q, in.k, in.v, in.dy, dqc, dkc, dvc, ref_is_ssmax(kind) ? dsc : NULL);
    if (rc) { check_true(0, lssar_errmsg(), "api CPU reference %s", shape); return; }
    ref_out R = {0};
    NEW_REF(R, n, H, 1);
    ref_args A = {kind, 15.0, in.sh, B, T, T, T, H, D, in.q, in.k, in.v, in.dy, 1, attn_len_norm, ATTN_TRAIN_LEN, 0};
    int have_ref = attn_ref64(&A, &R) == 0;
    for (int h = 0; have_ref && h < H; h++) R.dsb[h] += 8 * U32 * R.dsabs[h];
    double cond[4] = {0, 0, 0, 0};  /* f32 storage: the conditioning term, as attn_seam's */
    if (have_ref) attn_conditioning(&A, &R, n, H, cond);
    use_ctx(NN_FP32);
    float *sh_ = cmem(H * 4);
    CU(cudaMemcpy(sh_, in.sh, H * 4, cudaMemcpyHostToDevice));
    lssar_attn_desc dg = attn_desc(kind, sh_);
    double e32[5] = {0};
    const char *tn[5] = {"out", "dq", "dk", "dv", "ds"};
    float *cpu[5] = {oc, dqc, dkc, dvc, dsc};
    double *bref[5] = {R.yb, R.dqb, R.dkb, R.dvb, R.dsb}, *sref[5] = {R.ys, R.dqs, R.dks, R.dvs, R.dss};
    for (int dt = 0; dt < 2; dt++) {
        lssar_dtype dtype = dt ? LSSAR_BF16 : LSSAR_F32;
        const char *dn = dt ? "bf16-storage" : "f32-storage";
        size_t es = dt ? 2 : 4, ws = lssar_attn_cuda_workspace_size(&dg, dtype, B, T, H, D);
        void *buf[8];
        for (int t = 0; t < 8; t++) buf[t] = cmem(n * es);   /* q k v dy out dq dk dv */
        void *ws_ = cmem(ws), *ds_ = cmem(H * 4);
        api_upload(&in, n, dt, buf);
        float *got[5];
        uint16_t *raw[4];
        for (int run = 0; run < 2; run++) {   /* run 1: determinism */
            for (int t = 4; t < 8; t++) CU(cudaMemset(buf[t], 0xFF, n * es));   /* NaN in both dtypes */
            CU(cudaMemset(ws_, 0xFF, ws));
            CU(cudaMemset(ds_, 0xFF, H * 4));
            rc = lssar_attn_forward_cuda(&dg, dtype, B, T, H, D, buf[0], buf[1], buf[2], buf[4], ws_, NULL);
            if (!rc)
                rc = lssar_attn_backward_cuda(&dg, dtype, B, T, H, D, buf[0], buf[1], buf[2], buf[4], buf[3], buf[5],
                                              buf[6], buf[7], ref_is_ssmax(kind) ? (float *)ds_ : NULL, ws_, NULL);
            gsync("lssar_attn_*_cuda");
            if (!check_true(rc == 0, rc ? lssar_errmsg() : NULL, "api %s %s%s returns 0", dn, shape, run ? " (again)" : "")) break;
            if (run == 0) {
                for (int t = 0; t < 4; t++) {
                    got[t] = hf(n);
                    raw[t] = hmem(n * es);
                    CU(cudaMemcpy(raw[t], buf[4 + t], n * es, cudaMemcpyDeviceToHost));
                    for (size_t i = 0; i < n; i++) got[t][i] = dt ? bf2f(raw[t][i]) : ((float *)raw[t])[i];
                }
                got[4] = hf(H);
                CU(cudaMemcpy(got[4], ds_, H * 4, cudaMemcpyDeviceToHost));
                int nt = ref_is_ssmax(kind) ? 5 : 4;
                for (int t = 0; t < nt; t++) {
                    size_t m = t == 4 ? (size_t)H : n;
                    cmpres c = cmp_ff(got[t], cpu[t], m);
                    double b = 1e-5 + (t < 4 ? 2 * cond[t] : 0);
                    char note[160] = "";
                    if (t < 4 && !dt && 2 * cond[t] > 1e-6)
                        snprintf(note, sizeof note, "(fp32: 1e-5 + 2 x conditioning %.2g)", cond[t]);
                    if (t == 4 && have_ref) b += 8 * U32 * nrm_d(R.dsabs, H) / fmax(nrm_f(dsc, H), 1e-300);
                    if (!dt) e32[t] = c.err;
                    else b = have_ref ? bound_bf16(sref[t], bref[t], cpu[t], m, e32[t], 0, note, sizeof note) : 1e-2;
                    check_note(c, b, note[0] ? note : NULL, "api %s %s %s", dn, shape, tn[t]);
                }
                if (T >= 16384 || adversarial) {
                    size_t bad = 0;
                    for (int t = 0; t < 4; t++) bad += count_nonfinite(got[t], n);
                    char note[96];
                    snprintf(note, sizeof note, "%zu non-finite in out, dq, dk, dv", bad);
                    check_true(bad == 0, note, "api %s %s no NaN / inf", dn, shape);
                }
                if (have_ref) {
                    char b2[512];
                    int len = snprintf(b2, sizeof b2, "api %s %s vs float64:", dn, shape);
                    double *ref[4] = {R.y, R.dq, R.dk, R.dv};
                    for (int t = 0; t < 4; t++)
                        len += snprintf(b2 + len, sizeof b2 - len, " %s cpu %.2g gpu %.2g;", tn[t], cmp_fd(cpu[t], ref[t], n).err,
                                        cmp_fd(got[t], ref[t], n).err);
                    infof("%s", b2);
                }
            } else {
                int same = 1;
                void *h2 = hmem(n * es);
                for (int t = 0; t < 4; t++) {
                    CU(cudaMemcpy(h2, buf[4 + t], n * es, cudaMemcpyDeviceToHost));
                    same &= !memcmp(h2, raw[t], n * es);
                }
                float dsa[64];
                if (ref_is_ssmax(kind) && H <= 64) {
                    CU(cudaMemcpy(dsa, ds_, H * 4, cudaMemcpyDeviceToHost));
                    same &= !memcmp(dsa, got[4], H * 4);
                }
                check_true(same, same ? NULL : "outputs differ between two identical calls", "api %s %s deterministic (two runs, bits)", dn, shape);
            }
        }
        if (T >= 1000) infof("api %s %s workspace %zu bytes (%.1f per token per head)", dn, shape, ws, (double)ws / ((double)B * T * H));
    }
    release_all();
}

static void test_attention(void) {
    int Ts[] = {1, 63, 64, 65}, Ds[] = {16, 32, 64, 128};
    for (int kind = 0; kind < LSSAR_ATTN_NKINDS; kind++) if (fused_ok(kind))
      for (int ln = 0; ln < attn_n_len_norms(kind); ln++) {   /* sigmoid / relu: train, row */
        attn_len_norm = (lssar_len_norm)ln;
        /* full-mantissa fp32 inputs (fp32 context only) */
        attn_seam(kind, 2, 65, 3, 64, 0);
        attn_seam(kind, 1, 64, 2, 128, 0);
        if (!quick) attn_seam(kind, 1, 1000, 2, 64, 0);
        /* the grid: fp32 and bf16 contexts on bf16-representable inputs */
        for (int t = 0; t < 4; t++)
            for (int d = 0; d < 4; d++) {
                if (quick && (Ts[t] == 64 || Ds[d] == 32 || Ds[d] == 128)) continue;
                attn_seam(kind, 2, Ts[t], 3, Ds[d], 1);
            }
        if (!quick) {
            attn_seam(kind, 2, 1000, 2, 32, 1);
            attn_seam(kind, 1, 1000, 2, 128, 1);
            attn_seam(kind, 1, 4096, 2, 64, 1);
        }
    }
    attn_len_norm = LSSAR_LEN_NORM_TRAIN;
}

static void test_decode(void) {
    for (int kind = 0; kind < LSSAR_ATTN_NKINDS; kind++) if (fused_ok(kind))
      for (int ln = 0; ln < attn_n_len_norms(kind); ln++) {
        attn_len_norm = (lssar_len_norm)ln;
        attn_decode(kind, 2, 1, quick ? 70 : 1000, quick ? 80 : 1024, 2, 64);
        attn_decode(kind, 2, 5, 130, 131, 2, 32);
        if (!quick) attn_decode(kind, 1, 70, 200, 256, 2, 128);
        attn_decode(kind, 1, 65, 65, 80, 2, 16);   /* a full forward through a strided cache */
    }
    attn_len_norm = LSSAR_LEN_NORM_TRAIN;
}

/* NaN / inf in one element of q or k (head 0, channel 1), through the public API in both storage
   dtypes: the calls return 0 without a CUDA error (a row whose logits are all NaN once read v at
   row -1 or INT_MAX), and the output has the CPU rows' NaN pattern (tests/attn_ref.h
   check_nonfinite checks that pattern against the inputs) */
static void api_nonfinite(int kind) {
    const int B = 1, T = 130, H = 2, D = 64;
    size_t n = (size_t)B * T * H * D;
    static const struct { int tensor, t; float val; const char *name; } cases[3] = {
        {0, 70, NAN, "q[70] = NaN"}, {1, 1, NAN, "k[1] = NaN"}, {0, 70, INFINITY, "q[70] = inf"}};
    for (int c = 0; c < 3; c++) {
        attn_in in = attn_inputs(B, T, H, D, T, 1, 0);
        (cases[c].tensor ? in.k : in.q)[((size_t)cases[c].t * H) * D + 1] = cases[c].val;
        lssar_attn_desc dc = attn_desc(kind, in.sh);
        float *oc = hf(n);
        if (lssar_attn_forward(&dc, B, T, H, D, in.q, in.k, in.v, oc)) {
            check_true(0, lssar_errmsg(), "api nonfinite CPU reference %s %s", attn_label(kind), cases[c].name);
            continue;
        }
        use_ctx(NN_FP32);
        float *sh_ = cmem(H * 4);
        CU(cudaMemcpy(sh_, in.sh, H * 4, cudaMemcpyHostToDevice));
        lssar_attn_desc dg = attn_desc(kind, sh_);
        for (int dt = 0; dt < 2; dt++) {
            lssar_dtype dtype = dt ? LSSAR_BF16 : LSSAR_F32;
            size_t es = dt ? 2 : 4, ws = lssar_attn_cuda_workspace_size(&dg, dtype, B, T, H, D);
            void *buf[8];
            for (int t = 0; t < 8; t++) buf[t] = cmem(n * es);  /* q k v dy out dq dk dv */
            void *ws_ = cmem(ws), *ds_ = cmem(H * 4);
            api_upload(&in, n, dt, buf);
            CU(cudaMemset(ds_, 0, H * 4));
            int rc = lssar_attn_forward_cuda(&dg, dtype, B, T, H, D, buf[0], buf[1], buf[2], buf[4], ws_, NULL);
            if (!rc)
                rc = lssar_attn_backward_cuda(&dg, dtype, B, T, H, D, buf[0], buf[1], buf[2], buf[4], buf[3], buf[5],
                                              buf[6], buf[7], ref_is_ssmax(kind) ? (float *)ds_ : NULL, ws_, NULL);
            gsync("lssar_attn_*_cuda on non-finite inputs");
            const char *dn = dt ? "bf16-storage" : "f32-storage";
            if (!check_true(rc == 0, rc ? lssar_errmsg() : NULL, "api nonfinite %s %s %s returns 0", dn,
                            attn_label(kind), cases[c].name))
                continue;
            void *raw = hmem(n * es);
            CU(cudaMemcpy(raw, buf[4], n * es, cudaMemcpyDeviceToHost));
            size_t apart = 0, nans = 0;
            for (size_t i = 0; i < n; i++) {
                float g = dt ? bf2f(((uint16_t *)raw)[i]) : ((float *)raw)[i];
                apart += !isnan(g) != !isnan(oc[i]);
                nans += isnan(oc[i]);
            }
            char note[96];
            snprintf(note, sizeof note, "%zu of %zu outputs differ in NaN-ness (the CPU has %zu NaN)", apart, n, nans);
            check_true(apart == 0 && (nans > 0 || !isnan(cases[c].val)), note, "api nonfinite %s %s %s: the CPU's NaN rows", dn, attn_label(kind),
                       cases[c].name);
        }
    }
    release_all();
}

/* Every kind the fused path does not support is refused: the workspace size is 0, the public forward
   and backward and the backend's attention return LSSAR_E_UNSUPPORTED with a message that names the
   kind (so that the loops' skip cannot hide a wrong answer); the presets are supported */
static void test_refused(void) {
    const int B = 1, T = 4, H = 2, D = 16;
    size_t n = (size_t)B * T * H * D;
    for (int kind = 0; kind < LSSAR_ATTN_NKINDS; kind++) {
        if (kind <= LSSAR_ATTN_RELU)
            check_true(fused_ok(kind), NULL, "api %s is supported", attn_label(kind));
        if (fused_ok(kind)) continue;
        const char *kn = lssar_attn_name((lssar_attn_kind)kind);
        float sh[2] = {0.4f, 0.5f};
        float *sh_ = dput(sh, H), *x_ = dnan(n), *ws_ = dnan(4096);
        lssar_attn_desc dg = attn_desc(kind, sh_);
        size_t ws = lssar_attn_cuda_workspace_size(&dg, LSSAR_F32, B, T, H, D);
        int ok = ws == 0 && strstr(lssar_errmsg(), kn) != NULL;
        int rc = lssar_attn_forward_cuda(&dg, LSSAR_F32, B, T, H, D, x_, x_, x_, x_, ws_, NULL);
        ok &= rc == LSSAR_E_UNSUPPORTED && strstr(lssar_errmsg(), kn) != NULL;
        rc = lssar_attn_backward_cuda(&dg, LSSAR_F32, B, T, H, D, x_, x_, x_, x_, x_, x_, x_, x_, sh_, ws_,
                                      NULL);
        ok &= rc == LSSAR_E_UNSUPPORTED;
        use_ctx(NN_FP32);
        rc = GB->attention_forward(G, x_, NULL, x_, x_, x_, &dg, B, T, T, T, H, D);
        ok &= rc == LSSAR_E_UNSUPPORTED;
        gsync("attention refused");
        check_true(ok, ok ? NULL : lssar_errmsg(), "api %s refused by the fused path (LSSAR_E_UNSUPPORTED)",
                   kn);
        release_dev();
    }
}

static void test_api(void) {
    for (int kind = 0; kind < LSSAR_ATTN_NKINDS; kind++) if (fused_ok(kind))
      for (int ln = 0; ln < attn_n_len_norms(kind); ln++) {
        attn_len_norm = (lssar_len_norm)ln;
        api_case(kind, 2, 1, 2, 64, 0);
        api_case(kind, 2, 65, 2, 64, 0);
        if (!quick) {
            api_case(kind, 1, 65, 3, 128, 0);
            api_case(kind, 2, 1000, 2, 64, 0);
        }
    }
    attn_len_norm = LSSAR_LEN_NORM_TRAIN;
    if (!quick) {
        api_case(LSSAR_ATTN_SOFTMAX, 1, 4096, 2, 64, 0);
        api_case(LSSAR_ATTN_LSSAR, 1, 4096, 2, 64, 0);
    }
    api_case(LSSAR_ATTN_LSSAR, 1, quick ? 200 : 2000, 1, 64, 1);
    for (int kind = 0; kind < LSSAR_ATTN_NKINDS; kind++) if (fused_ok(kind)) api_nonfinite(kind);
    test_refused();
}

/* T = 16384: lssar through the seam (random inputs) and the public API (adversarial) */
static void test_long(void) {
    if (quick) { infof("long: skipped in quick mode"); return; }
    attn_seam(LSSAR_ATTN_LSSAR, 1, 16384, 1, 64, 1);
    api_case(LSSAR_ATTN_LSSAR, 1, 16384, 1, 64, 1);
    /* sigmoid / relu: no normalisation, so a row's output is a sum of up to T terms (len_norm
       train: far beyond L, the weights sum to ~n / L) */
    attn_seam(LSSAR_ATTN_SIGMOID, 1, 16384, 1, 64, 1);
    attn_len_norm = LSSAR_LEN_NORM_ROW;
    attn_seam(LSSAR_ATTN_RELU, 1, 16384, 1, 64, 1);
    attn_len_norm = LSSAR_LEN_NORM_TRAIN;
}

/* last: pointers off the 64-byte allocation start (a kernel that assumes 16-byte alignment may
   fault, and a fault ends the CUDA context, so nothing runs after these) */
static void test_edge(void) {
    use_ctx(NN_FP32);
    size_t n = 10007;
    float *x = hrandn(n, 1.0), *x_ = dput(x, n);
    GB->zero(G, x_ + 1, (n - 2) * sizeof(float));
    float *h = dget(x_, n);
    int ok = h[0] == x[0] && h[n - 1] == x[n - 1];
    for (size_t i = 1; i + 1 < n; i++) ok &= h[i] == 0.0f && !signbit(h[i]);
    check_true(ok, NULL, "edge zero of floats 1..n-2 (offset pointer) leaves 0 and n-1 alone");
    float *y = hrandn(n, 1.0), *y_ = dput(y, n), *yc = hcopy(y, n);
    GB->scale(G, y_ + 3, n - 4, 0.5f);
    CB->scale(cctx, yc + 3, n - 4, 0.5f);
    check_bits(dget(y_, n), yc, n * 4, 4, "edge scale at offset 3 floats");
    float *c_ = dnan(n);
    GB->copy(G, c_ + 1, x_ + 2, (n - 3) * 4);
    float *hc = dget(c_, n), *want = hnan(n);
    memcpy(want + 1, h + 2, (n - 3) * 4);
    check_bits(hc, want, n * 4, 4, "edge copy between offset pointers");
    gsync("edge memory");
    release_all();
    for (int prec = 0; prec < 2; prec++) {
        use_ctx(prec);
        emb_case(2, 9, 2, 70, 50, 1, 0, PN[prec]);   /* C = 70: rows 8-byte aligned only */
        emb_case(1, 3, 1, 70, 50, 1, 3, PN[prec]);
        release_all();
    }
}

/* ================================================================== train: the trainer end to end
 * A small model (2 layers, width 64, 4 heads, T = 64, B = 8, vocabulary 257, RoPE) trained by
 * train_run (src/train/train.h) for S = 200 steps (quick: 40) on a synthetic deterministic token
 * stream (a period-24 pattern, 10% of the tokens replaced by random ones: the loss falls from
 * ln 257 = 5.55 to the noise floor near 0.95), for lssar and softmax, on the GPU (NN_BF16: the
 * model's context on CUDA) and on the CPU (fp32), from the same initialisation and batches.
 *
 * Loss curves. The two runs differ in two ways. (1) At the same weights, one bf16 forward differs
 * from the fp32 one: e_fwd, MEASURED here on the same batch at the initial weights and at the CPU
 * run's final weights (the larger; the loss is 2-Lipschitz in the largest logit change; bf16
 * operands move a logit by at most (2u + u^2) sum |h_i w_i|, u = 2^-9, and the bf16 storage of
 * every activation adds a rounding per layer and u |logit| for the stored logits: e_fwd is
 * expected near 1e-2, and being measured it covers whatever they add; an info line prints it).
 * (2) The trajectories drift apart: every gradient carries bf16 rounding, a relative
 * perturbation of the update of about 1% (AdamW normalises the update, so what matters is the
 * relative error of each gradient element: O(u) per product, a few u after summation, and one u
 * for each activation gradient stored on the way down, a few per layer of the two). To
 * first order a relative change e of the updates shifts the curve in time, changing the loss of a
 * window by about e x the relative change the curve makes over the window; the negative control
 * below calibrates that response: on the CPU, lr x 0.7 (e = 0.3) moves the window means by up to
 * ~30% (measured with `lssar train` on this configuration, 200 steps: 32% in the steep second
 * window, 0.2-1% at the floor; the dry run below, quick mode: 8x the bound). A 5%
 * relative allowance therefore corresponds to an effective update change of ~5%, several times
 * what bf16 rounding gives, and is six times below the control's response. Bound per 20-step window w
 * (quick: 10-step): |mean_w(GPU) - mean_w(CPU)| <= e_fwd + 0.05 mean_w(CPU). The check reports
 * the largest ratio |diff| / bound over the windows (pass: <= 1); the control (lr x 0.7 against
 * lr, both CPU) must exceed 1, or the check could not fail.
 *
 * Checkpoints (bit for bit: they are float32 files, and upload / download move bytes): the GPU
 * run's model loaded on the CPU and on the GPU holds the same parameters; the CPU run's model
 * loaded on the GPU, saved from there and loaded on the CPU again equals the CPU's; and a model
 * saved from the GPU (ckpt_save_model) loads on the CPU with the GPU's bits.
 * Resume: on the GPU, S / 2 steps (--stop-at), then --resume to S, equals S straight: the same
 * per-step losses (log.jsonl), parameters and AdamW moments, bit for bit (docs/CUDA.md: the
 * backend is deterministic; the batches come from the RNG the checkpoint stores).
 *
 * LSSAR_GPU_TRAIN_DEVICE=cpu runs the "GPU" side on the CPU too: a dry run of this group's own
 * logic (curves then agree exactly, e_fwd = 0; the control must still fail), which is how the
 * fake self-test runs it (FAKE_SELFTEST_TRAIN=1 tests/gpu/fake_selftest.sh): the fake cannot stand
 * behind the trainer, so without that the group prints "SKIP group train (...)" on the fake.
 */
#define TR_V 257
#define TR_T 64
#define TR_B 8
#define TR_N 65536
static char tr_dir[256];
static uint16_t tr_tok[TR_N];

static void tr_path(char *out, size_t n, const char *sub, const char *file) {
    snprintf(out, n, "%s/%s%s%s", tr_dir, sub, file ? "/" : "", file ? file : "");
}

/* the token stream as an llm.c shard: 256 int32 header (magic, version, tokens, channels), uint16 tokens */
static void tr_write_shard(void) {
    lssar_rng r;
    lssar_rng_seed(&r, 24);
    uint16_t pat[24];
    for (int i = 0; i < 24; i++) pat[i] = (uint16_t)lssar_rng_below(&r, TR_V);
    for (int i = 0; i < TR_N; i++)
        tr_tok[i] = lssar_rng_uniform(&r) < 0.1 ? (uint16_t)lssar_rng_below(&r, TR_V) : pat[i % 24];
    int32_t hdr[256] = {20240520, 1, TR_N, 1};
    char path[512];
    tr_path(path, sizeof path, "train.bin", NULL);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(hdr, sizeof hdr, 1, f) != 1 || fwrite(tr_tok, sizeof tr_tok, 1, f) != 1 || fclose(f))
        fatal("cannot write %s", path);
}

static void tr_opts(train_opts *o, const char *sub, lssar_attn_kind kind, lssar_device dev, int steps, float lr) {
    static char data[512], out[4][512];   /* o->out points here: a few runs' options live at once */
    static int slot;
    char *op = out[slot++ % 4];
    tr_path(data, sizeof data, "train.bin", NULL);
    tr_path(op, 512, sub, NULL);
    train_opts_default(o);
    o->data = data;
    o->out = op;
    o->model.attn = kind;
    o->model.layers = 2; o->model.heads = 4; o->model.dim = 64; o->model.vocab = TR_V;
    o->seq = TR_T; o->batch = TR_B;
    o->steps = steps; o->warmup = steps / 10; o->lr = lr;
    o->model.device = dev;
    o->seed = 7;
    o->quiet = 1;
}
static int tr_run(const train_opts *o, const char *what) {
    train_result r;
    int rc = train_run(o, &r);
    if (rc) infof("train_run (%s) failed: %s", what, lssar_errmsg());
    return rc;
}

/* the per-step losses of a run's log.jsonl into loss[step - 1]; the number of steps read */
static int tr_losses(const char *sub, double *loss, int n) {
    char path[512], line[1024];
    tr_path(path, sizeof path, sub, "log.jsonl");
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int got = 0;
    while (fgets(line, sizeof line, f)) {
        char *sp = strstr(line, "\"step\":"), *lp = strstr(line, "\"loss\":");
        if (!sp || !lp) continue;
        long st = strtol(sp + 7, NULL, 10);
        if (st >= 1 && st <= n) { loss[st - 1] = strtod(lp + 7, NULL); if (st > got) got = (int)st; }
    }
    fclose(f);
    return got;
}

/* every tensor of buffer `which` of m, concatenated (host memory, tracked) */
static float *tr_read_all(const gpt *m, gpt_buffer which, size_t *n) {
    size_t tot = 0;
    for (int i = 0; i < gpt_num_tensors(m); i++) tot += gpt_tensor_numel(m, i);
    float *x = hf(tot), *p = x;
    for (int i = 0; i < gpt_num_tensors(m); i++) {
        if (gpt_read_tensor(m, which, i, p)) fatal("gpt_read_tensor: %s", lssar_errmsg());
        p += gpt_tensor_numel(m, i);
    }
    *n = tot;
    return x;
}
static gpt *tr_load(const char *sub, const char *file, lssar_device dev) {
    char path[512];
    tr_path(path, sizeof path, sub, file);
    ckpt_load_opts lo = {.device = dev};
    gpt *m = NULL;
    if (ckpt_load_model(path, &lo, &m, NULL)) fatal("ckpt_load_model(%s, %s): %s", path, lssar_device_name(dev), lssar_errmsg());
    return m;
}
/* mean loss of one fixed batch (the stream's first B windows) under m */
static double tr_batch_loss(gpt *m) {
    static uint16_t in[TR_B * TR_T], tg[TR_B * TR_T];
    for (int b = 0; b < TR_B; b++)
        for (int t = 0; t < TR_T; t++) { in[b * TR_T + t] = tr_tok[b * 997 + t]; tg[b * TR_T + t] = tr_tok[b * 997 + t + 1]; }
    float loss = NAN;
    if (gpt_reserve(m, TR_B, TR_T, 0) || gpt_forward(m, in, tg, TR_B, TR_T, &loss)) fatal("gpt_forward: %s", lssar_errmsg());
    return loss;
}
static double tr_e_fwd(gpt *mc, gpt *mg) { return fabs(tr_batch_loss(mg) - tr_batch_loss(mc)); }

/* max over windows of |mean_w(a) - mean_w(ref)| / (e_fwd + 0.05 mean_w(ref)); window means in info */
static double tr_curve_ratio(const double *a, const double *ref, int S, int W, double e_fwd, const char *what) {
    double worst = 0;
    char buf[900] = "";
    for (int w = 0; w + W <= S; w += W) {
        double ma = 0, mr = 0;
        for (int i = w; i < w + W; i++) { ma += a[i]; mr += ref[i]; }
        ma /= W; mr /= W;
        double ratio = fabs(ma - mr) / (e_fwd + 0.05 * mr);
        if (!(ratio <= worst)) worst = ratio;   /* NaN propagates */
        size_t l = strlen(buf);
        snprintf(buf + l, sizeof buf - l, " %.3f/%.3f", ma, mr);
    }
    infof("%s: window means (%d steps) %s", what, W, buf);
    return worst;
}

static void test_train(void) {
    const char *td = getenv("LSSAR_GPU_TRAIN_DEVICE");
    const lssar_device GD = td && !strcmp(td, "cpu") ? LSSAR_DEVICE_CPU : LSSAR_DEVICE_CUDA;   /* the "GPU" side */
#ifdef LSSAR_GPU_FAKE
    if (GD != LSSAR_DEVICE_CPU) {
        printf("SKIP group train (a build with tests/gpu/fake_cuda.c: the fake stands behind test_gpu's own "
               "backend calls only, not behind the trainer, whose nn_backend_get(cuda) finds no CUDA backend in a "
               "CUDA=0 library; LSSAR_GPU_TRAIN_DEVICE=cpu dry-runs the group's logic on the CPU; on a GPU it runs)\n");
        return;
    }
#endif
    if (GD == LSSAR_DEVICE_CPU) infof("LSSAR_GPU_TRAIN_DEVICE=cpu: a dry run, the \"GPU\" side on the CPU (fp32)");
    snprintf(tr_dir, sizeof tr_dir, "/tmp/lssar_gpu_train_XXXXXX");
    if (!mkdtemp(tr_dir)) fatal("mkdtemp %s failed", tr_dir);
    tr_write_shard();
    const int S = quick ? 40 : 200, W = quick ? 10 : 20;
    const float lr = 3e-3f;
    double *lc = hd(S), *lg = hd(S), *lr2 = hd(S), *lx = hd(S);
    lssar_attn_kind kinds[2] = {LSSAR_ATTN_LSSAR, LSSAR_ATTN_SOFTMAX};
    for (int kk = 0; kk < 2; kk++) {
        const char *kn = lssar_attn_name(kinds[kk]);
        char cpu[32], gpu[32], res[32], ctl[32];
        snprintf(cpu, sizeof cpu, "cpu_%s", kn);
        snprintf(gpu, sizeof gpu, "gpu_%s", kn);
        snprintf(res, sizeof res, "res_%s", kn);
        snprintf(ctl, sizeof ctl, "ctl_%s", kn);
        train_opts o;
        double t0 = now_s();
        tr_opts(&o, cpu, kinds[kk], LSSAR_DEVICE_CPU, S, lr);
        int rc_c = tr_run(&o, cpu);
        double tc = now_s() - t0;
        t0 = now_s();
        tr_opts(&o, gpu, kinds[kk], GD, S, lr);
        int rc_g = tr_run(&o, gpu);
        double tg = now_s() - t0;
        infof("train %s: %d steps on the CPU %.1f s, on the GPU %.1f s", kn, S, tc, tg);
        if (!check_true(!rc_c && !rc_g && tr_losses(cpu, lc, S) == S && tr_losses(gpu, lg, S) == S,
                        rc_c || rc_g ? lssar_errmsg() : NULL, "train %s: %d steps on the CPU and the GPU, every loss logged", kn, S))
            continue;
        /* e_fwd: one forward, same weights, bf16 GPU vs fp32 CPU, at the start and at the end */
        gpt_config cfg = {.layers = 2, .heads = 4, .dim = 64, .vocab = TR_V, .channels = 1, .max_seq = TR_T,
                          .pos = LSSAR_POS_ROPE, .attn = kinds[kk], .p = 15.0f, .tied = 1};
        gpt *mc = NULL, *mg = NULL;
        if (gpt_create(&cfg, o.seed, &mc)) fatal("gpt_create: %s", lssar_errmsg());
        cfg.device = GD;
        if (gpt_create(&cfg, o.seed, &mg)) fatal("gpt_create(cuda): %s", lssar_errmsg());
        double e0 = tr_e_fwd(mc, mg);
        gpt_free(mc); gpt_free(mg);
        mc = tr_load(cpu, NULL, LSSAR_DEVICE_CPU);
        mg = tr_load(cpu, NULL, GD);
        double e1 = tr_e_fwd(mc, mg), e_fwd = e0 > e1 ? e0 : e1;
        infof("train %s: one forward, bf16 GPU vs fp32 CPU, same weights: |loss diff| %.3g at the start, %.3g at the end", kn, e0, e1);
        /* CPU -> GPU -> CPU: the CPU's file on the GPU, saved from there, back on the CPU */
        size_t n1, n2, n3;
        float *pc = tr_read_all(mc, GPT_BUF_PARAM, &n1), *pg = tr_read_all(mg, GPT_BUF_PARAM, &n2);
        check_bits(pg, pc, n1 * 4, 4, "train %s: a CPU checkpoint loads on the GPU with the CPU's parameters", kn);
        char path[512];
        tr_path(path, sizeof path, cpu, "from_gpu.safetensors");
        if (ckpt_save_model(mg, path, S)) fatal("ckpt_save_model from the GPU: %s", lssar_errmsg());
        gpt_free(mg);
        gpt *m2 = tr_load(cpu, "from_gpu.safetensors", LSSAR_DEVICE_CPU);
        float *p2 = tr_read_all(m2, GPT_BUF_PARAM, &n3);
        check_bits(p2, pc, n1 * 4, 4, "train %s: saved from the GPU, loaded on the CPU: the parameters round-trip", kn);
        gpt_free(m2); gpt_free(mc);
        (void)n2; (void)n3;
        /* the GPU run's checkpoint on the CPU and on the GPU */
        mc = tr_load(gpu, NULL, LSSAR_DEVICE_CPU);
        mg = tr_load(gpu, NULL, GD);
        pc = tr_read_all(mc, GPT_BUF_PARAM, &n1);
        pg = tr_read_all(mg, GPT_BUF_PARAM, &n2);
        check_bits(pc, pg, n1 * 4, 4, "train %s: the GPU run's checkpoint loads on the CPU with the GPU's parameters", kn);
        gpt_free(mc); gpt_free(mg);
        /* the loss curves */
        char note[160];
        double ratio = tr_curve_ratio(lg, lc, S, W, e_fwd, "GPU/CPU");
        snprintf(note, sizeof note, "max over windows of |mean GPU - mean CPU| / (e_fwd %.3g + 0.05 mean CPU) = %.3f <= 1", e_fwd, ratio);
        check_true(ratio <= 1, note, "train %s: the GPU (bf16) loss curve follows the CPU's (fp32)", kn);
        if (kk == 0) {   /* negative control: a 30% smaller learning rate must fail the same check */
            t0 = now_s();
            tr_opts(&o, ctl, kinds[kk], LSSAR_DEVICE_CPU, S, 0.7f * lr);
            int rc = tr_run(&o, ctl);
            double rx = rc || tr_losses(ctl, lx, S) != S ? NAN : tr_curve_ratio(lx, lc, S, W, e_fwd, "CPU lr x 0.7/CPU");
            snprintf(note, sizeof note, "ratio %.3f > 1 (%.1f s)", rx, now_s() - t0);
            check_true(rx > 1, note, "train %s: negative control: lr x 0.7 on the CPU fails the curve check", kn);
        }
        /* resume on the GPU: S/2 steps, then --resume to S == S straight */
        tr_opts(&o, res, kinds[kk], GD, S, lr);
        o.stop_at = S / 2;
        int rc = tr_run(&o, "stop at S/2");
        if (!rc) {
            tr_opts(&o, res, kinds[kk], GD, 0, lr);
            o.data = NULL;
            o.resume = 1;
            rc = tr_run(&o, "resume");
        }
        if (!check_true(!rc && tr_losses(res, lr2, S) == S, rc ? lssar_errmsg() : NULL, "train %s: %d steps, resume, %d more on the GPU", kn, S / 2, S - S / 2))
            continue;
        check_bits(lr2, lg, S * sizeof(double), sizeof(double), "train %s: resumed on the GPU == straight: every step's loss", kn);
        mg = tr_load(gpu, NULL, LSSAR_DEVICE_CPU);
        gpt *mr = tr_load(res, NULL, LSSAR_DEVICE_CPU);
        pg = tr_read_all(mg, GPT_BUF_PARAM, &n1);
        float *pr = tr_read_all(mr, GPT_BUF_PARAM, &n2);
        check_bits(pr, pg, n1 * 4, 4, "train %s: resumed on the GPU == straight: the parameters", kn);
        train_state st;
        char tp[512];
        if (gpt_reserve(mg, 1, TR_T, 1) || gpt_reserve(mr, 1, TR_T, 1)) fatal("gpt_reserve: %s", lssar_errmsg());
        tr_path(tp, sizeof tp, gpu, "trainer.safetensors");
        if (ckpt_load_trainer(mg, tp, &st)) fatal("ckpt_load_trainer(%s): %s", tp, lssar_errmsg());
        tr_path(tp, sizeof tp, res, "trainer.safetensors");
        if (ckpt_load_trainer(mr, tp, &st)) fatal("ckpt_load_trainer(%s): %s", tp, lssar_errmsg());
        for (int which = GPT_BUF_ADAM_M; which <= GPT_BUF_ADAM_V; which++) {
            float *a = tr_read_all(mg, (gpt_buffer)which, &n1), *b = tr_read_all(mr, (gpt_buffer)which, &n2);
            check_bits(b, a, n1 * 4, 4, "train %s: resumed on the GPU == straight: AdamW %s", kn, which == GPT_BUF_ADAM_M ? "m" : "v");
        }
        gpt_free(mg); gpt_free(mr);
    }
    release_all();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tr_dir);
    if (system(cmd)) infof("could not remove %s", tr_dir);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    t_start = now_s();
    quick = getenv("LSSAR_GPU_QUICK") && atoi(getenv("LSSAR_GPU_QUICK")) != 0;
    only = getenv("LSSAR_GPU_ONLY");
    skip_groups = getenv("LSSAR_GPU_SKIP");
    if (getenv("LSSAR_GPU_SEED")) seed = strtoull(getenv("LSSAR_GPU_SEED"), NULL, 10);
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        printf("SKIP: no CUDA GPU (cudaGetDeviceCount: %s)\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 0;
    }
    const char *jp = getenv("LSSAR_GPU_JSON");
    if (jp && *jp && !(jf = fopen(jp, "w"))) { printf("FATAL cannot write %s\n", jp); return 2; }
    lssar_rng_seed(&rng, seed);
    struct cudaDeviceProp prop;
    CU(cudaGetDeviceProperties(&prop, 0));
    int drv = 0, rt = 0;
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    group = "device";
    infof("device 0 of %d: %s, compute capability %d.%d, %d SMs, %.1f GiB, driver %d, runtime %d%s", ndev, prop.name,
          prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem / 1073741824.0, drv, rt,
#ifdef LSSAR_GPU_FAKE
          " (FAKE: tests/gpu/fake_cuda.c, a host emulation; nothing here ran on a GPU)"
#else
          ""
#endif
    );
    {
        char note[96];
        int c = lssar_cuda_device_count();
        snprintf(note, sizeof note, "%d vs cudaGetDeviceCount %d", c, ndev);
        check_true(c == ndev, note, "lssar_cuda_device_count");
    }
#ifndef LSSAR_GPU_FAKE
    {
        const nn_backend *be = NULL;
        int rc = nn_backend_get(LSSAR_DEVICE_CUDA, &be);
        check_true(rc == 0 && be == &nn_backend_cuda, rc ? lssar_errmsg() : NULL, "nn_backend_get(cuda) is nn_backend_cuda");
    }
#endif
    if (CB->ctx_create(&cctx, NN_FP32)) fatal("cpu ctx_create: %s", lssar_errmsg());
    for (int p = 0; p < 2; p++) {
        int rc = GB->ctx_create(&gctx[p], (nn_precision)p);
        if (rc) fatal("cuda ctx_create(%s): %s", PN[p], lssar_errmsg());
    }
    check_true(GB->device == LSSAR_DEVICE_CUDA && GB->name && !strcmp(GB->name, "cuda"), GB->name, "nn_backend_cuda name and device");
    /* attention first (the most to learn from one run), edge last (see test_edge). A fault
       ends the CUDA context: FATAL names the groups not run, for a rerun with LSSAR_GPU_ONLY. */
    struct { const char *name; void (*fn)(void); } groups[] = {
        {"mem", test_memory}, {"attention", test_attention}, {"decode", test_decode}, {"api", test_api},
        {"long", test_long}, {"matmul", test_matmul}, {"layernorm", test_layernorm},
        {"elementwise", test_elementwise}, {"rope", test_rope}, {"embedding", test_embedding},
        {"xent", test_xent}, {"train", test_train}, {"edge", test_edge},
    };
    const size_t ngroups = sizeof groups / sizeof groups[0];
    for (size_t g = 0; g < ngroups; g++) {
        if (!want(groups[g].name)) continue;
        remaining[0] = 0;
        for (size_t r = g + 1; r < ngroups; r++)
            if (want(groups[r].name) && strlen(remaining) + strlen(groups[r].name) + 2 < sizeof remaining) {
                if (remaining[0]) strcat(remaining, ",");
                strcat(remaining, groups[r].name);
            }
        group = groups[g].name;
        double t0 = now_s();
        groups[g].fn();
        gsync(groups[g].name);
        printf("-- %s: %.1f s (total %.1f s)\n", groups[g].name, now_s() - t0, now_s() - t_start);
    }
    for (int p = 0; p < 2; p++) GB->ctx_free(gctx[p]);
    CB->ctx_free(cctx);
    return summary();
}
#endif
