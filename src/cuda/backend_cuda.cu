// backend_cuda.cu - the CUDA backend (src/nn/backend.h): device memory, cuBLASLt linear layers,
// the kernels of kernels_*.cu and the fused attention of flash_attn.h, all in order on one stream
// per context.
//
// Errors. Most of the seam's functions return nothing, so a failure (a CUDA or cuBLASLt error, or
// no memory for scratch) is kept in the context: the first one is printed to stderr once (with
// lssar_errmsg's detail), every later call on the context does nothing, attention_forward /
// attention_backward return it, sum_squares returns NaN and download fills the host buffer with
// 0xFF bytes (float NaN), so the model's loss or gradient norm turns NaN and the trainer stops.
//
// Streams. The compute runs on `stream`; dist_sum on `comm` (beside the backward); upload_async on
// `up`, so the next batch's tokens travel from page-locked memory while the compute runs.
//
// Determinism. Every kernel here has a launch shape fixed by the sizes, and sums in a fixed order
// without atomics (kernels_math.h). cuBLASLt: the algorithm comes from the heuristic for the
// shape, pointer alignments and workspace (cached per context, so one shape always runs one
// algorithm), and NVIDIA documents bit-wise identical results for a cuBLAS routine run again
// with the same toolkit on GPUs of the same architecture and SM count, with a workspace owned by
// the caller when several streams are active (here: one per context, its own workspace). Its
// split-K variants are deterministic too: cublasLtReductionScheme_t's schemes are in-place with
// counters "to guarantee the sequentiality", or a separate reduction step.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cublasLt.h>
#include "cuda/cuda_common.h"
#include "cuda/dist_nccl.h"
#include "cuda/flash_attn.h"
#include "cuda/flash_decode.h"
extern "C" {
#include "core/dist.h"
#include "nn/backend.h"
}

#define LT_WORKSPACE (32u << 20)   /* cuBLAS's recommended workspace on Hopper */
#define MM_CACHE 64                /* cached heuristic results (distinct GEMM shapes) */

// A GEMM shape's heuristic answer, asked once: its algorithm, or none (ok = 0: the caller falls back)
typedef struct {
    int transa, transb, m, n, k, lda, ldb, ldd, epilogue, bf16;   // bf16: the operands' type
    int d16;                                                      // D (and the bias) bf16
    uint32_t align_a, align_b, align_d;
    int ok;
    cublasLtMatmulAlgo_t algo;
} mm_entry;

// A bf16 copy of a weight the GEMMs read (NN_BF16; weight_bf16 below)
typedef struct {
    const float *src;   // the fp32 master weight (rows, cols), row-major
    int rows, cols;
    uint16_t *bf;       // its copy (rows, km_bf16_ld(cols)), `bytes` of device memory
    size_t bytes;
    int stale;          // src written since the last cast
} wcopy;

struct nn_ctx {
    cudaStream_t stream;
    cublasLtHandle_t lt;
    nn_precision precision;
    lssar_dtype act;   // the activations' element type (cuda_act_dtype)
    void *workspace;          // cuBLASLt's, LT_WORKSPACE bytes
    void *scratch;            // transient device memory of the kernels; grows, never shrinks
    size_t scratch_bytes;
    double *result_dev;       // sum_squares' result, then pinned host memory for it
    double *result_host;
    float *factor_dev;        // clip_norm's scale factor (device), for scale_by
    ncclComm_t nccl;          // dist_sum / dist_allgather's, made by the first (NULL: one rank)
    // dist_sum runs on its own stream, after the compute stream's work so far (ready) and beside
    // what follows it (the backward of the earlier layers); dist_wait makes the compute stream
    // wait for it (summed). Made by the first dist_sum.
    cudaStream_t comm;
    cudaEvent_t ready, summed;
    // upload_async's copy stream: the copies wait for up_free (recorded on the compute stream by
    // upload_wait: the compute queued before it is done with what the copy overwrites), and the
    // compute waits for up_done (the last copy). Made by the first upload_async or upload_wait.
    cudaStream_t up;
    cudaEvent_t up_free, up_done;
    int up_marked, up_pending;   // up_free / up_done recorded at least once
    int err;                  // the first failure (sticky), 0 while all is well
    // memory statistics (device_stats): bytes this context holds (alloc, scratch, workspace, the
    // bf16 weight copies) now and at most, the most device memory in use (cudaMemGetInfo, sampled
    // after each allocation: use grows only there), and the size of each live alloc (cudaFree does
    // not tell it)
    size_t held, held_peak, used_peak;
    struct { void *p; size_t bytes; } *live;
    int nlive, cap_live;
    int ncache;
    mm_entry cache[MM_CACHE];
    wcopy *wc;                // the bf16 weight copies (their bytes are in held, as every alloc's)
    int nwc, cap_wc;
};

/* ---- errors */
static void note(nn_ctx *c, int rc) {
    if (!rc || c->err) return;
    c->err = rc;
    fprintf(stderr, "lssar cuda backend: %s (later calls on this context do nothing)\n", lssar_errmsg());
}
// a runtime call; 1 (and the context's error set) if it failed
static int cu(nn_ctx *c, cudaError_t e, const char *what, int line) {
    if (e == cudaSuccess) return 0;
    note(c, cuda_fail_at(e, what, __FILE__, line));
    return 1;
}
#define CU(c, call) cu((c), (call), #call, __LINE__)
static int lt_fail(cublasStatus_t st, const char *what, int line) {
    return lssar_fail(LSSAR_E_UNSUPPORTED, "cuBLASLt error %s (%s) in %s at %s:%d", cublasLtGetStatusName(st),
                      cublasLtGetStatusString(st), what, __FILE__, line);
}

// An allocation of `bytes` (> 0) or a release (< 0) for device_stats
static void mem_note(nn_ctx *c, ptrdiff_t bytes) {
    c->held += bytes;
    if (c->held > c->held_peak) c->held_peak = c->held;
    size_t fr = 0, total = 0;
    if (bytes <= 0) return;
    // a statistic: never the context's error
    if (cudaMemGetInfo(&fr, &total) != cudaSuccess) cudaGetLastError();
    else if (total - fr > c->used_peak) c->used_peak = total - fr;
}

// Device scratch of at least `bytes`: grows (to the size asked, rounded up to 1 MiB) only when a
// larger size is asked, so after the first step of a run it is never reallocated.
static void *scratch(nn_ctx *c, size_t bytes) {
    if (bytes <= c->scratch_bytes) return c->scratch;
    size_t want = (bytes + (1u << 20) - 1) / (1u << 20) * (1u << 20);
    if (c->scratch) {
        // kernels already queued may still use the old buffer
        if (CU(c, cudaStreamSynchronize(c->stream)) || CU(c, cudaFree(c->scratch))) return NULL;
        c->scratch = NULL;
        mem_note(c, -(ptrdiff_t)c->scratch_bytes);
        c->scratch_bytes = 0;
    }
    if (CU(c, cudaMalloc(&c->scratch, want))) {
        c->scratch = NULL;
        return NULL;
    }
    c->scratch_bytes = want;
    mem_note(c, (ptrdiff_t)want);
    return c->scratch;
}

/* ---- bf16 weight copies (NN_BF16). The GEMMs read bf16 operands (docs/CUDA.md): the activations
   are bf16 already, weights (and biases) are kept here as bf16 copies, made by the
   first product that reads a weight and cast again only after its fp32 master changed. "Changed":
   every seam call that writes device memory names what it writes (wrote), and the copies whose
   source lies in the allocation written turn stale (a whole allocation: the seam does not always
   say how far a write reaches, e.g. embedding_backward's tables). The model keeps parameters,
   gradients, moments and activations in separate allocations, so only writes of the parameters
   (upload, copy, zero, scale, adamw, dist_allgather, ...) touch the copies: one cast of every
   weight per optimiser step, none between the micro-steps of gradient accumulation. */
static void wcopy_free(nn_ctx *c, int i) {
    cudaFree(c->wc[i].bf);
    mem_note(c, -(ptrdiff_t)c->wc[i].bytes);
    c->wc[i] = c->wc[--c->nwc];
}

// Every copy whose source lies in [lo, hi) is marked stale (drop: freed, when that memory goes).
static void wcopy_mark(nn_ctx *c, uintptr_t lo, uintptr_t hi, int drop) {
    for (int i = c->nwc - 1; i >= 0; i--) {
        uintptr_t s = (uintptr_t)c->wc[i].src;
        if (s < lo || s >= hi) continue;
        if (drop) wcopy_free(c, i);
        else c->wc[i].stale = 1;
    }
}

// A seam call writes device memory at p: the copies of weights in p's allocation are stale (all of
// them if p is in none of this context's allocations).
static void wrote(nn_ctx *c, const void *p) {
    if (!c->nwc || !p) return;
    uintptr_t a = (uintptr_t)p;
    for (int i = 0; i < c->nlive; i++) {
        uintptr_t lo = (uintptr_t)c->live[i].p;
        if (a >= lo && a < lo + (c->live[i].bytes ? c->live[i].bytes : 1)) {
            wcopy_mark(c, lo, lo + c->live[i].bytes, 0);
            return;
        }
    }
    wcopy_mark(c, 0, UINTPTR_MAX, 0);
}

// The bf16 copy of weight w (rows, cols), rows km_bf16_ld(cols) apart; cast now if stale. NULL
// (the context's error set) when there is no device memory for it.
static const uint16_t *weight_bf16(nn_ctx *c, const float *w, int rows, int cols) {
    wcopy *e = NULL;
    for (int i = 0; i < c->nwc && !e; i++)
        if (c->wc[i].src == w && c->wc[i].rows == rows && c->wc[i].cols == cols) e = &c->wc[i];
    if (!e) {
        if (c->nwc == c->cap_wc) {
            int cap = c->cap_wc ? 2 * c->cap_wc : 64;
            void *nw = realloc(c->wc, cap * sizeof *c->wc);
            if (!nw) { note(c, lssar_fail(LSSAR_E_NOMEM, "cuda backend: out of host memory")); return NULL; }
            c->wc = (wcopy *)nw;
            c->cap_wc = cap;
        }
        wcopy n = {w, rows, cols, NULL, (size_t)rows * km_bf16_ld(cols) * sizeof(uint16_t), 1};
        if (CU(c, cudaMalloc((void **)&n.bf, n.bytes))) return NULL;
        mem_note(c, (ptrdiff_t)n.bytes);
        c->wc[c->nwc] = n;
        e = &c->wc[c->nwc++];
    }
    if (e->stale) {
        int rc = cuda_to_bf16(e->bf, w, rows, cols, km_bf16_ld(cols), c->stream);
        if (rc) { note(c, rc); return NULL; }
        e->stale = 0;
    }
    return e->bf;
}

/* ---- context and memory */
static __global__ void probe_kernel(void) {}

static void cuda_ctx_free(nn_ctx *c) {
    if (!c) return;
    // a failed context's collectives may wait forever for a peer: abort them before waiting
    if (c->nccl && c->err) { cuda_dist_free(c->nccl, 1); c->nccl = NULL; }
    if (c->stream) cudaStreamSynchronize(c->stream);
    if (c->comm) cudaStreamSynchronize(c->comm);
    if (c->up) cudaStreamSynchronize(c->up);
    cuda_dist_free(c->nccl, 0);
    if (c->up) cudaStreamDestroy(c->up);
    if (c->up_free) cudaEventDestroy(c->up_free);
    if (c->up_done) cudaEventDestroy(c->up_done);
    if (c->comm) cudaStreamDestroy(c->comm);
    if (c->ready) cudaEventDestroy(c->ready);
    if (c->summed) cudaEventDestroy(c->summed);
    if (c->lt) cublasLtDestroy(c->lt);
    while (c->nwc) wcopy_free(c, c->nwc - 1);
    free(c->wc);
    cudaFree(c->workspace);
    cudaFree(c->scratch);
    cudaFree(c->result_dev);
    cudaFree(c->factor_dev);
    if (c->result_host) cudaFreeHost(c->result_host);
    if (c->stream) cudaStreamDestroy(c->stream);
    free(c->live);
    cudaGetLastError();   // leave no error behind for the next context
    free(c);
}

static int cuda_ctx_create(nn_ctx **out, nn_precision precision) {
    *out = NULL;
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        cudaGetLastError();
        return lssar_fail(LSSAR_E_UNSUPPORTED, "no CUDA GPU found (%s); use --device cpu",
                          cudaGetErrorString(e != cudaSuccess ? e : cudaErrorNoDevice));
    }
    nn_ctx *c = (nn_ctx *)calloc(1, sizeof *c);
    if (!c) return lssar_fail(LSSAR_E_NOMEM, "cuda backend: out of memory");
    c->precision = precision;
    // NN_BF16 stores the activations in bf16 (half their memory and traffic; docs/CUDA.md)
    c->act = precision == NN_BF16 ? LSSAR_BF16 : LSSAR_F32;
    int rc = 0;
    cublasStatus_t st;
#define CREATE_TRY(call)                                               \
    do {                                                               \
        cudaError_t e_ = (call);                                       \
        if (e_ != cudaSuccess) { rc = cuda_fail_at(e_, #call, __FILE__, __LINE__); goto fail; } \
    } while (0)
    {   // under mpirun / srun: one GPU per rank of a machine, by the launcher's local rank (NCCL
        // refuses two ranks on one GPU); docs/DISTRIBUTED.md
        const char *names[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"};
        for (int i = 0; i < 3; i++) {
            const char *lr = getenv(names[i]);
            if (lr && *lr) { CREATE_TRY(cudaSetDevice(atoi(lr) % ndev)); break; }
        }
    }
    CREATE_TRY(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    if ((st = cublasLtCreate(&c->lt)) != CUBLAS_STATUS_SUCCESS) {
        c->lt = NULL;
        rc = lt_fail(st, "cublasLtCreate", __LINE__);
        goto fail;
    }
    CREATE_TRY(cudaMalloc(&c->workspace, LT_WORKSPACE));
    mem_note(c, LT_WORKSPACE);
    CREATE_TRY(cudaMalloc((void **)&c->result_dev, sizeof(double)));
    CREATE_TRY(cudaMallocHost((void **)&c->result_host, sizeof(double)));
    CREATE_TRY(cudaMalloc((void **)&c->factor_dev, sizeof(float)));
    // a GPU this build has no kernels for fails its first launch: say so now, not mid-run
    probe_kernel<<<1, 1, 0, c->stream>>>();
    if ((e = cudaGetLastError()) == cudaSuccess) e = cudaStreamSynchronize(c->stream);
    if (e != cudaSuccess) {
        int dev = 0;
        cudaDeviceProp prop;
        cudaGetDevice(&dev);
        memset(&prop, 0, sizeof prop);
        cudaGetDeviceProperties(&prop, dev);
        rc = lssar_fail(LSSAR_E_UNSUPPORTED, "cuda backend: cannot run kernels on %s (compute capability "
                        "%d.%d): %s; use --device cpu or a build for this GPU", prop.name, prop.major,
                        prop.minor, cudaGetErrorString(e));
        goto fail;
    }
#undef CREATE_TRY
    *out = c;
    return 0;
fail:
    cuda_ctx_free(c);
    return rc;
}

static void *cuda_alloc(nn_ctx *c, size_t bytes) {
    void *p = NULL;
    if (c->err) return NULL;
    if (cudaMalloc(&p, bytes ? bytes : 64) != cudaSuccess) {
        cudaGetLastError();   // out of memory is the caller's to handle: clear it for later checks
        lssar_fail(LSSAR_E_NOMEM, "cuda backend: out of device memory (%zu bytes)", bytes);
        return NULL;
    }
    if (bytes && CU(c, cudaMemsetAsync(p, 0, bytes, c->stream))) { cudaFree(p); return NULL; }
    if (c->nlive == c->cap_live) {   // a model makes tens of allocations: a list is enough
        int cap = c->cap_live ? 2 * c->cap_live : 64;
        void *nl = realloc(c->live, cap * sizeof *c->live);
        if (!nl) { cudaFree(p); lssar_fail(LSSAR_E_NOMEM, "cuda backend: out of host memory"); return NULL; }
        c->live = (decltype(c->live))nl;
        c->cap_live = cap;
    }
    c->live[c->nlive].p = p;
    c->live[c->nlive++].bytes = bytes;
    mem_note(c, (ptrdiff_t)bytes);
    // a staged upload into the new memory must come after its zeroing: later copies wait for it
    if (c->up && !CU(c, cudaEventRecord(c->up_free, c->stream))) c->up_marked = 1;
    return p;
}

static void cuda_release(nn_ctx *c, void *p) {
    if (!p) return;
    cudaStreamSynchronize(c->stream);   // queued work may still use it
    if (c->up) cudaStreamSynchronize(c->up);   // and a staged upload write into it
    cudaFree(p);
    for (int i = c->nlive - 1; i >= 0; i--)
        if (c->live[i].p == p) {
            // the copies of weights it held go with it (the address may come back for other data)
            wcopy_mark(c, (uintptr_t)p, (uintptr_t)p + c->live[i].bytes, 1);
            mem_note(c, -(ptrdiff_t)c->live[i].bytes);
            c->live[i] = c->live[--c->nlive];
            break;
        }
}

static void cuda_device_stats(nn_ctx *c, nn_device_stats *o) {
    memset(o, 0, sizeof *o);
    size_t fr = 0, total = 0;
    int dev = 0, failed = 0;
    cudaDeviceProp prop;
    if (cudaMemGetInfo(&fr, &total) != cudaSuccess) failed = 1;
    else if (total - fr > c->used_peak) c->used_peak = total - fr;
    if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&prop, dev) == cudaSuccess)
        memcpy(o->name, prop.name, strnlen(prop.name, sizeof o->name - 1));   // memset: terminated
    else failed = 1;
    if (failed) cudaGetLastError();   // a failed query leaves no error for the next check
    o->held = c->held;
    o->held_peak = c->held_peak;
    o->used_peak = c->used_peak;
    o->total = total;
}

/* ---- staged uploads (backend.h): page-locked sources, the copy stream `up` */
static void *cuda_host_alloc(nn_ctx *c, size_t bytes) {
    void *p = NULL;
    if (c->err) return NULL;
    if (cudaMallocHost(&p, bytes ? bytes : 64) != cudaSuccess) {
        cudaGetLastError();
        lssar_fail(LSSAR_E_NOMEM, "cuda backend: cannot page-lock %zu bytes of host memory", bytes);
        return NULL;
    }
    return p;
}
static void cuda_host_free(nn_ctx *c, void *p) {
    if (!p) return;
    if (c->up) cudaStreamSynchronize(c->up);   // a copy may still read it
    cudaFreeHost(p);
}
static int up_stream(nn_ctx *c) {
    if (c->up) return 0;
    if (CU(c, cudaStreamCreateWithFlags(&c->up, cudaStreamNonBlocking)) ||
        CU(c, cudaEventCreateWithFlags(&c->up_free, cudaEventDisableTiming)) ||
        CU(c, cudaEventCreateWithFlags(&c->up_done, cudaEventDisableTiming)))
        return 1;
    // the first copy waits for everything queued so far (the zeroing of the memory it writes)
    if (CU(c, cudaEventRecord(c->up_free, c->stream))) return 1;
    c->up_marked = 1;
    return 0;
}
static void cuda_upload_async(nn_ctx *c, void *dst, const void *src, size_t bytes) {
    wrote(c, dst);
    if (c->err || !bytes || up_stream(c)) return;
    // the previous copy has read its source once this returns (the caller may rewrite it)
    if (c->up_pending && CU(c, cudaEventSynchronize(c->up_done))) return;
    if (c->up_marked && CU(c, cudaStreamWaitEvent(c->up, c->up_free, 0))) return;
    if (CU(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->up)) ||
        CU(c, cudaEventRecord(c->up_done, c->up)))
        return;
    c->up_pending = 1;
}
static void cuda_upload_wait(nn_ctx *c) {
    if (c->err || up_stream(c)) return;
    if (c->up_pending && CU(c, cudaStreamWaitEvent(c->stream, c->up_done, 0))) return;
    if (!CU(c, cudaEventRecord(c->up_free, c->stream))) c->up_marked = 1;
}

static void cuda_upload(nn_ctx *c, void *dst, const void *src, size_t bytes) {
    wrote(c, dst);
    // from pageable memory the call returns once src is staged: the caller may reuse it at once
    if (!c->err && bytes) CU(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream));
}

static void cuda_download(nn_ctx *c, void *dst, const void *src, size_t bytes) {
    if (!c->err && bytes) CU(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream));
    if (!c->err) CU(c, cudaStreamSynchronize(c->stream));
    if (c->err && bytes) memset(dst, 0xFF, bytes);   // NaN: never a plausible result
}

static void cuda_copy(nn_ctx *c, void *dst, const void *src, size_t bytes) {
    wrote(c, dst);
    if (!c->err && bytes) CU(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->stream));
}

static void cuda_zero(nn_ctx *c, void *x, size_t bytes) {
    wrote(c, x);
    if (!c->err && bytes) CU(c, cudaMemsetAsync(x, 0, bytes, c->stream));
}

// Activations (nn_act) have the context's type c->act. bf16 crosses to and from the host's floats
// through a host copy of the bits, rounded to nearest even on the way up (km_bf16_rne, the kernels'
// rounding); these transfers are small (a probe's q and k, the hidden states, one row of logits).
static lssar_dtype cuda_act_dtype(nn_ctx *c) { return c->act; }
static void cuda_upload_act(nn_ctx *c, nn_act *dst, const float *src, size_t n) {
    if (c->act == LSSAR_F32) { cuda_upload(c, dst, src, n * sizeof(float)); return; }
    uint16_t *h = static_cast<uint16_t *>(malloc((n ? n : 1) * sizeof(uint16_t)));
    if (!h) { note(c, lssar_fail(LSSAR_E_NOMEM, "cuda backend: out of host memory")); return; }
    for (size_t i = 0; i < n; i++) h[i] = km_bf16_rne(src[i]);
    cuda_upload(c, dst, h, n * sizeof(uint16_t));   // staged before it returns: h may go
    free(h);
}
static void cuda_download_act(nn_ctx *c, float *dst, const nn_act *src, size_t n) {
    if (c->act == LSSAR_F32) { cuda_download(c, dst, src, n * sizeof(float)); return; }
    uint16_t *h = static_cast<uint16_t *>(malloc((n ? n : 1) * sizeof(uint16_t)));
    if (!h) {
        note(c, lssar_fail(LSSAR_E_NOMEM, "cuda backend: out of host memory"));
        memset(dst, 0xFF, n * sizeof(float));   // NaN, as a failed download
        return;
    }
    cuda_download(c, h, src, n * sizeof(uint16_t));   // 0xFFFF (NaN) after a failure
    for (size_t i = 0; i < n; i++) dst[i] = fm_bf16_float(h[i]);
    free(h);
}
static float *act32(nn_act *p) { return static_cast<float *>(p); }
static const float *act32(const nn_act *p) { return static_cast<const float *>(p); }

/* ---- matmul through cuBLASLt. Row-major X (r, c) is column-major X^T (c, r) with ld c, so every
   product below is written for column-major matrices as cuBLASLt sees them.

   Precision. NN_FP32: fp32 operands and D, CUBLAS_COMPUTE_32F. NN_BF16: bf16 operands
   (CUDA_R_16BF), fp32 accumulation (CUBLAS_COMPUTE_32F), so the tensor cores read half the bytes:
   the weights' bf16 copies (weight_bf16, rounded to nearest even) and the bf16 activations as they
   are; a layer's output D bf16, a weight gradient's fp32 (docs/CUDA.md). */

// the largest power of two (<= 256) dividing the address: cuBLASLt assumes 256 unless told
static uint32_t align_of(const void *p) {
    uintptr_t a = (uintptr_t)p;
    uint32_t al = 256;
    while (al > 1 && a % al) al /= 2;
    return al;
}

// One line per GEMM shape, when cuBLASLt is first asked for it (rank 0): the algorithm it chose, or
// that it has none, so a fallback of gemm() is never silent.
static void log_shape(const mm_entry *e) {
    if (lssar_dist_rank() != 0) return;
    fprintf(stderr, "lssar cuda: GEMM %d x %d x %d op %c%c %s operands %s D %s compute 32F: ", e->m, e->n,
            e->k, e->transa ? 'T' : 'N', e->transb ? 'T' : 'N', e->epilogue ? "bias epilogue" : "no epilogue",
            e->bf16 ? "bf16" : "fp32", e->d16 ? "bf16" : "fp32");
    if (!e->ok) {
        const char *to = e->epilogue          ? " to the bias kernel"
                         : e->bf16 && !e->d16 ? " to fp32 operands (slower)"
                                              : "";
        fprintf(stderr, "no algorithm (alignments %u %u %u); gemm falls back%s\n", e->align_a, e->align_b,
                e->align_d, to);
        return;
    }
    int v[5] = {0};
    const cublasLtMatmulAlgoConfigAttributes_t at[5] = {
        CUBLASLT_ALGO_CONFIG_ID, CUBLASLT_ALGO_CONFIG_TILE_ID, CUBLASLT_ALGO_CONFIG_STAGES_ID,
        CUBLASLT_ALGO_CONFIG_SPLITK_NUM, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME};
    for (int i = 0; i < 5; i++) {
        size_t got = 0;
        cublasLtMatmulAlgoConfigGetAttribute(&e->algo, at[i], &v[i], sizeof v[i], &got);
    }
    fprintf(stderr, "algo %d tile %d stages %d split-k %d reduction %d\n", v[0], v[1], v[2], v[3], v[4]);
}

// D (m, n) = op(A) (m, k) op(B) (k, n) + beta D [+ bias (m) on every column], column-major, D and
// bias fp32 or bf16 (d16; cuBLASLt's bias has D's type), A and B fp32 or bf16 (bf16: their element
// type), compute CUBLAS_COMPUTE_32F. Returns 0, an lssar_err, or -1 when cuBLASLt has no algorithm
// for it (CUBLAS_STATUS_NOT_SUPPORTED), for gemm's fallbacks.
static int lt_matmul(nn_ctx *c, void *D, int d16, const void *A, const void *B, int bf16, const void *bias,
                     int transa, int transb, int m, int n, int k, int lda, int ldb, int ldd, float beta) {
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, ld = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    const char *what = "";
    int rc = 0, epi = bias != NULL;
    float alpha = 1.0f;
    cublasOperation_t ta = transa ? CUBLAS_OP_T : CUBLAS_OP_N, tb = transb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cudaDataType_t ab = bf16 ? CUDA_R_16BF : CUDA_R_32F;
    uint32_t aa = align_of(A), abl = align_of(B), ad = align_of(D);
    const mm_entry *hit = NULL;
    cublasLtMatmulAlgo_t algo;
#define LT(call)                                                  \
    do {                                                          \
        if ((st = (call)) != CUBLAS_STATUS_SUCCESS) { what = #call; goto done; } \
    } while (0)
    LT(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    if (epi) {
        cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_BIAS;
        int32_t bt = d16 ? CUDA_R_16BF : CUDA_R_32F;   // D's type, cuBLASLt's default, stated
        LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
        LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
        LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
    }
    // the stored matrices: A is (m, k), or (k, m) when transposed; B (k, n) or (n, k)
    LT(cublasLtMatrixLayoutCreate(&la, ab, transa ? k : m, transa ? m : k, lda));
    LT(cublasLtMatrixLayoutCreate(&lb, ab, transb ? n : k, transb ? k : n, ldb));
    LT(cublasLtMatrixLayoutCreate(&ld, d16 ? CUDA_R_16BF : CUDA_R_32F, m, n, ldd));
    for (int i = 0; i < c->ncache && !hit; i++) {
        const mm_entry *e = &c->cache[i];
        if (e->transa == transa && e->transb == transb && e->m == m && e->n == n && e->k == k &&
            e->lda == lda && e->ldb == ldb && e->ldd == ldd && e->epilogue == epi && e->bf16 == bf16 &&
            e->d16 == d16 && e->align_a == aa && e->align_b == abl && e->align_d == ad)
            hit = e;
    }
    if (hit) {
        if (!hit->ok) { st = CUBLAS_STATUS_NOT_SUPPORTED; goto done; }
        algo = hit->algo;
    } else {
        uint64_t ws = LT_WORKSPACE;
        cublasLtMatmulHeuristicResult_t res;
        int nres = 0;
        LT(cublasLtMatmulPreferenceCreate(&pref));
        LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                sizeof ws));
        LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &aa,
                                                sizeof aa));
        LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &abl,
                                                sizeof abl));
        LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ad,
                                                sizeof ad));
        LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ad,
                                                sizeof ad));
        memset(&res, 0, sizeof res);
        st = cublasLtMatmulAlgoGetHeuristic(c->lt, op, la, lb, ld, ld, pref, 1, &res, &nres);
        if (st == CUBLAS_STATUS_SUCCESS && nres == 0) st = CUBLAS_STATUS_NOT_SUPPORTED;
        if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED) {
            what = "cublasLtMatmulAlgoGetHeuristic";
            goto done;
        }
        // the answer, yes or no, is kept (a shape beyond the cache asks again: logged again)
        mm_entry e = {transa, transb, m, n, k, lda, ldb, ldd, epi, bf16, d16, aa, abl, ad,
                      st == CUBLAS_STATUS_SUCCESS, res.algo};
        if (c->ncache < MM_CACHE) c->cache[c->ncache++] = e;
        log_shape(&e);
        if (!e.ok) goto done;
        algo = res.algo;
    }
    LT(cublasLtMatmul(c->lt, op, &alpha, A, la, B, lb, &beta, D, ld, D, ld, &algo, c->workspace, LT_WORKSPACE,
                      c->stream));
#undef LT
done:
    if (st == CUBLAS_STATUS_NOT_SUPPORTED) rc = -1;
    else if (st != CUBLAS_STATUS_SUCCESS) rc = lt_fail(st, what, __LINE__);
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (ld) cublasLtMatrixLayoutDestroy(ld);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (op) cublasLtMatmulDescDestroy(op);
    return rc;
}

// A GEMM operand: a matrix of fp32 or (bf16) bf16 elements, leading dimension ld
typedef struct {
    const void *p;
    int ld, bf16;
} mm_op;
static mm_op op32(const float *f, int ld) {
    mm_op o = {f, ld, 0};
    return o;
}
static mm_op opb(const void *h, int ld) {
    mm_op o = {h, ld, 1};
    return o;
}

// The context's GEMM, D of type dt (a layer's output: the activations'; a weight gradient: fp32),
// the bias through the epilogue (a bf16 D's is bf16: bias16, the bias's copy). Where cuBLASLt has
// no algorithm for a shape and alignment: without the epilogue and with the bias kernel (the fp32
// bias; on a bf16 D a second rounding). Falling back, not failing, is what a user wants: a shape
// first met mid-run (an evaluation chunk, a short last batch, decoding's one row) would otherwise
// end a run hours in, and lt_matmul logs each step of it once (log_shape), so it is never silent.
// A shape with no algorithm even then fails, naming the shape.
static int gemm(nn_ctx *c, void *D, lssar_dtype dt, mm_op A, mm_op B, const float *bias,
                const uint16_t *bias16, int transa, int transb, int m, int n, int k, int ldd, float beta) {
    const int d16 = dt == LSSAR_BF16, bf = A.bf16;
    const void *ebias = d16 ? (const void *)bias16 : bias;
    int rc = lt_matmul(c, D, d16, A.p, B.p, bf, ebias, transa, transb, m, n, k, A.ld, B.ld, ldd, beta);
    if (rc == -1 && bias) {
        rc = lt_matmul(c, D, d16, A.p, B.p, bf, NULL, transa, transb, m, n, k, A.ld, B.ld, ldd, beta);
        if (rc == 0) rc = cuda_add_bias(dt, D, bias, n, m, ldd, c->stream);   // D's columns are its rows
    }
    if (rc != -1) return rc;
    return lssar_fail(LSSAR_E_UNSUPPORTED, "cuBLASLt has no algorithm for the %d x %d x %d product (op %c%c, "
                      "alignments %u %u %u)", m, n, k, transa ? 'T' : 'N', transb ? 'T' : 'N', align_of(A.p),
                      align_of(B.p), align_of(D));
}

// Rows per product of bf16 activations (km_cast_rows): all N, unless their padded copies
// (row_bytes each) exceed CAST_CAP; then chunks, each its own product. Only the classifier's rows
// are padded (V wide); a chunked dweight adds the chunks' products in order (beta 1), a fixed
// order: the same bits on every run.
#define CAST_CAP ((size_t)128 << 20)
static int cast_rows(int N, size_t row_bytes) { return row_bytes ? km_cast_rows(N, row_bytes, CAST_CAP) : N; }

/* ---- the GEMMs of bf16 activations: operands read as they are where their rows start 16-byte
   aligned (a multiple of 8 elements wide, as the model's C and 4C are), else copied first into
   scratch rows of km_bf16_ld(cols) (the classifier's V); a bf16 D likewise written in place or
   into padded scratch rows and copied out. Row chunks of R (cast_rows) bound the scratch. */
static int act_aligned(const void *x, int cols) { return cols % 8 == 0 && (uintptr_t)x % 16 == 0; }
// rows (rr, cols) of bf16 activations as an operand: themselves, or their copy into dst (rr, ldh)
static mm_op act_op(nn_ctx *c, const void *x, int rr, int cols, uint16_t *dst, int *rc) {
    if (act_aligned(x, cols)) return opb(x, cols);
    int ldh = km_bf16_ld(cols);
    if (!*rc)
        *rc = c->err ? c->err
                     : CU(c, cudaMemcpy2DAsync(dst, (size_t)ldh * 2, x, (size_t)cols * 2, (size_t)cols * 2, rr,
                                               cudaMemcpyDeviceToDevice, c->stream));
    return opb(dst, ldh);
}
// The two copies of a padded D: its rows (rr, cols) into dst (rr, ldh) before an accumulating
// product, or back out to x afterwards
static int act_pad_copy(nn_ctx *c, void *to, int ldt, const void *from, int ldf, int rr, int cols) {
    return c->err ? c->err
                  : CU(c, cudaMemcpy2DAsync(to, (size_t)ldt * 2, from, (size_t)ldf * 2, (size_t)cols * 2, rr,
                                            cudaMemcpyDeviceToDevice, c->stream));
}

// out (N, OC) = inp (N, IC) @ W^T + bias, all of it bf16 but W's fp32 master and the fp32 bias,
// whose bf16 copies the product reads (weight_bf16: a bias is a 1 x OC weight)
static int matmul_forward_act16(nn_ctx *c, uint16_t *out, const uint16_t *inp, const float *weight,
                                const float *bias, int N, int IC, int OC) {
    const int pin = !act_aligned(inp, IC), pout = !act_aligned(out, OC);
    const int ldi = km_bf16_ld(IC), ldo = km_bf16_ld(OC);
    const int R = cast_rows(N, (size_t)((pin ? ldi : 0) + (pout ? ldo : 0)) * 2);
    const uint16_t *wb = weight_bf16(c, weight, OC, IC), *bb = bias ? weight_bf16(c, bias, 1, OC) : NULL;
    if (!wb || (bias && !bb)) return c->err;
    size_t ib = cuda_round256((size_t)R * (pin ? ldi : 0) * 2);
    char *s = pin || pout ? (char *)scratch(c, ib + (size_t)R * (pout ? ldo : 0) * 2) : NULL;
    if ((pin || pout) && !s) return c->err;
    int rc = 0;
    for (int r0 = 0; !rc && r0 < N; r0 += R) {
        const int rr = N - r0 < R ? N - r0 : R;
        mm_op x = act_op(c, inp + (size_t)r0 * IC, rr, IC, (uint16_t *)s, &rc);
        uint16_t *d = pout ? (uint16_t *)(s + ib) : out + (size_t)r0 * OC;
        if (!rc)
            rc = gemm(c, d, LSSAR_BF16, opb(wb, km_bf16_ld(IC)), x, bias, bb, 1, 0, OC, rr, IC, pout ? ldo : OC,
                      0.0f);
        if (!rc && pout) rc = act_pad_copy(c, out + (size_t)r0 * OC, OC, d, ldo, rr, OC);
    }
    return rc;
}

// The backward's products on bf16 activations: dinp (bf16, accumulated in place when asked) and
// dweight (fp32), from dout's and inp's rows (padded copies where they need them)
static int matmul_backward_act16(nn_ctx *c, uint16_t *dinp, float *dweight, const uint16_t *dout,
                                 const uint16_t *inp, const float *weight, int N, int IC, int OC,
                                 int accumulate) {
    const int pd = !act_aligned(dout, OC), pi = dweight && !act_aligned(inp, IC),
              px = dinp && !act_aligned(dinp, IC);
    const int ldo = km_bf16_ld(OC), ldi = km_bf16_ld(IC);
    const int R = cast_rows(N, (size_t)((pd ? ldo : 0) + (pi ? ldi : 0) + (px ? ldi : 0)) * 2);
    const uint16_t *wb = dinp ? weight_bf16(c, weight, OC, IC) : NULL;
    if (dinp && !wb) return c->err;
    size_t ob = cuda_round256((size_t)R * (pd ? ldo : 0) * 2),
           ib = cuda_round256((size_t)R * (pi ? ldi : 0) * 2);
    size_t bytes = ob + ib + (size_t)R * (px ? ldi : 0) * 2;
    char *s = bytes ? (char *)scratch(c, bytes) : NULL;
    if (bytes && !s) return c->err;
    int rc = 0;
    for (int r0 = 0; !rc && r0 < N; r0 += R) {
        const int rr = N - r0 < R ? N - r0 : R;
        mm_op d = act_op(c, dout + (size_t)r0 * OC, rr, OC, (uint16_t *)s, &rc);
        if (!rc && dinp) {
            uint16_t *g = dinp + (size_t)r0 * IC, *gp = px ? (uint16_t *)(s + ob + ib) : g;
            if (px && accumulate) rc = act_pad_copy(c, gp, ldi, g, IC, rr, IC);
            if (!rc)
                rc = gemm(c, gp, LSSAR_BF16, opb(wb, km_bf16_ld(IC)), d, NULL, NULL, 0, 0, IC, rr, OC,
                          px ? ldi : IC, accumulate ? 1.0f : 0.0f);
            if (!rc && px) rc = act_pad_copy(c, g, IC, gp, ldi, rr, IC);
        }
        if (!rc && dweight) {
            mm_op x = act_op(c, inp + (size_t)r0 * IC, rr, IC, (uint16_t *)(s + ob), &rc);
            if (!rc) rc = gemm(c, dweight, LSSAR_F32, x, d, NULL, NULL, 0, 1, IC, OC, rr, IC, 1.0f);
        }
    }
    return rc;
}

// out (N, OC) = inp (N, IC) @ W^T + bias. W stored (OC, IC) row-major is (IC, OC) column-major,
// so D = out^T (OC, N) = op_T(W) (OC, IC) x inp^T (IC, N), and the bias (OC) runs down D's
// columns: along each output row.
static void cuda_matmul_forward(nn_ctx *c, nn_act *out_, const nn_act *inp_, const float *weight,
                                const float *bias, int N, int IC, int OC) {
    if (c->err || N <= 0 || OC <= 0) return;
    wrote(c, out_);
    if (c->act == LSSAR_BF16) {
        uint16_t *out = static_cast<uint16_t *>(out_);
        const uint16_t *inp = static_cast<const uint16_t *>(inp_);
        note(c, IC > 0 ? matmul_forward_act16(c, out, inp, weight, bias, N, IC, OC)
                       : lssar_fail(LSSAR_E_SIZE, "cuda matmul: IC = %d; need >= 1", IC));
        return;
    }
    note(c, gemm(c, out_, LSSAR_F32, op32(weight, IC), op32(act32(inp_), IC), bias, NULL, 1, 0, OC, N, IC, OC,
                 0.0f));
}

// dinp (N, IC) = / += dout (N, OC) @ W:  D (IC, N) = W (IC, OC) x dout^T (OC, N)
// dweight (OC, IC) += dout^T @ inp:      D (IC, OC) = inp^T (IC, N) x op_T(dout^T) (N, OC), beta 1
// dbias (OC) += column sums of dout: kernels_reduce.cu's fixed two-pass sum (the BGRADB epilogue
// writes rather than accumulates, and its order is the library's)
static void cuda_matmul_backward(nn_ctx *c, nn_act *dinp_, float *dweight, float *dbias, const nn_act *dout_,
                                 const nn_act *inp_, const float *weight, int N, int IC, int OC,
                                 int accumulate) {
    if (c->err || N <= 0 || OC <= 0 || IC <= 0) return;
    float *dinp = act32(dinp_);
    const float *dout = act32(dout_), *inp = act32(inp_);
    wrote(c, dinp);
    wrote(c, dweight);
    wrote(c, dbias);
    int rc = 0;
    if (c->act == LSSAR_BF16) {
        rc = matmul_backward_act16(c, static_cast<uint16_t *>(dinp_), dweight,
                                   static_cast<const uint16_t *>(dout_), static_cast<const uint16_t *>(inp_),
                                   weight, N, IC, OC, accumulate);
    } else {
        float bi = accumulate ? 1.0f : 0.0f;
        if (dinp)
            rc =
                gemm(c, dinp, LSSAR_F32, op32(weight, IC), op32(dout, OC), NULL, NULL, 0, 0, IC, N, OC, IC, bi);
        if (!rc && dweight)
            rc = gemm(c, dweight, LSSAR_F32, op32(inp, IC), op32(dout, OC), NULL, NULL, 0, 1, IC, OC, N, IC,
                      1.0f);
    }
    if (!rc && dbias && !c->err) {
        void *s = scratch(c, cuda_colsum_scratch(N, OC));
        if (!s) return;
        rc = cuda_colsum(c->act, dbias, dout, N, OC, s, c->stream);
    }
    note(c, rc);
}

/* ---- layers */
static void cuda_layernorm_forward_(nn_ctx *c, nn_act *out, float *mean, float *rstd, const nn_act *inp,
                                    const float *weight, const float *bias, int N, int C) {
    wrote(c, out); wrote(c, mean); wrote(c, rstd);
    if (!c->err)
        note(c, cuda_layernorm_forward(c->act, out, mean, rstd, inp, weight, bias, N, C, c->stream));
}
static void cuda_layernorm_backward_(nn_ctx *c, nn_act *dinp, float *dweight, float *dbias, const nn_act *dout,
                                     const nn_act *inp, const float *weight, const float *mean,
                                     const float *rstd, int N, int C) {
    wrote(c, dinp); wrote(c, dweight); wrote(c, dbias);
    if (c->err) return;
    void *s = scratch(c, cuda_layernorm_backward_scratch(N, C));
    if (!s) return;
    note(c, cuda_layernorm_backward(c->act, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, s,
                                    c->stream));
}
static void cuda_gelu_forward_(nn_ctx *c, nn_act *out, const nn_act *inp, size_t n) {
    wrote(c, out);
    if (!c->err) note(c, cuda_gelu_forward(c->act, out, inp, n, c->stream));
}
static void cuda_gelu_backward_(nn_ctx *c, nn_act *dinp, const nn_act *inp, const nn_act *dout, size_t n) {
    wrote(c, dinp);
    if (!c->err) note(c, cuda_gelu_backward(c->act, dinp, inp, dout, n, c->stream));
}
static void cuda_residual_forward_(nn_ctx *c, nn_act *out, const nn_act *a, const nn_act *b, size_t n) {
    wrote(c, out);
    if (!c->err) note(c, cuda_residual_forward(c->act, out, a, b, n, c->stream));
}
static void cuda_embedding_forward_(nn_ctx *c, nn_act *out, const uint16_t *tokens, float *const *wte,
                                    const float *wpe, int B, int T, int Ch, int C) {
    wrote(c, out);
    if (!c->err) note(c, cuda_embedding_forward(c->act, out, tokens, wte, wpe, B, T, Ch, C, c->stream));
}
static void cuda_embedding_backward_(nn_ctx *c, float *const *dwte, float *dwpe, const nn_act *dout,
                                     const uint16_t *tokens, int B, int T, int Ch, int C) {
    for (int ch = 0; ch < Ch; ch++) wrote(c, dwte[ch]);
    wrote(c, dwpe);
    if (c->err) return;
    size_t bytes = 0;
    int rc = cuda_embedding_backward_scratch(B, T, &bytes);
    if (rc) { note(c, rc); return; }
    void *s = scratch(c, bytes);
    if (!s) return;
    note(c, cuda_embedding_backward(c->act, dwte, dwpe, dout, tokens, B, T, Ch, C, s, c->scratch_bytes,
                                    c->stream));
}
static void cuda_rope_forward_(nn_ctx *c, nn_act *x, const float *cos_t, const float *sin_t, int B, int T,
                               int NH, int HS, int pos0) {
    wrote(c, x);
    if (!c->err) note(c, cuda_rope(c->act, x, cos_t, sin_t, B, T, NH, HS, pos0, 0, c->stream));
}
static void cuda_rope_backward_(nn_ctx *c, nn_act *dx, const float *cos_t, const float *sin_t, int B, int T,
                                int NH, int HS) {
    wrote(c, dx);
    if (!c->err) note(c, cuda_rope(c->act, dx, cos_t, sin_t, B, T, NH, HS, 0, 1, c->stream));
}

/* ---- attention: flash_attn.h (the statistics the forward saves are the backward's input) */
static size_t cuda_attention_stats_floats(const lssar_attn_desc *d, int B, int T, int NH, int HS) {
    return cuda_attn_stats_floats(d, B, T, NH, HS);
}
static int cuda_attention_forward(nn_ctx *c, nn_act *out, float *stats, const nn_act *q, const nn_act *k,
                                  const nn_act *v, const lssar_attn_desc *d, int B, int Tq, int Tk,
                                  int kv_stride, int NH, int HS) {
    wrote(c, out); wrote(c, stats);
    if (c->err) return c->err;
    // decoding (a few query rows against a long cache, no statistics): the keys split over CTAs,
    // since one CTA per (b, h, 64 query rows) would leave most SMs idle (flash_decode.h)
    if (cuda_attn_decode_applies(d, B, Tq, Tk, NH, HS, stats != NULL)) {
        size_t db = cuda_attn_decode_scratch_bytes(d, 0, B, Tq, Tk, NH, HS);
        void *s = db ? scratch(c, db) : NULL;
        if (db && !s) return c->err;
        return cuda_attn_decode_forward(d, c->precision == NN_BF16, c->act, 0, B, Tq, Tk, kv_stride, NH, HS, q,
                                        k, v, out, s, c->stream);
    }
    size_t bytes = cuda_attn_scratch_bytes(d, B, Tq, Tk, NH, HS);
    void *s = bytes ? scratch(c, bytes) : NULL;
    if (bytes && !s) return c->err;
    return cuda_attn_forward(d, c->precision == NN_BF16, c->act, B, Tq, Tk, kv_stride, NH, HS, q, k, v, out,
                             stats, s, c->stream);
}
static int cuda_attention_backward(nn_ctx *c, nn_act *dq, nn_act *dk, nn_act *dv, float *dscale,
                                   const nn_act *dout, const nn_act *q, const nn_act *k, const nn_act *v,
                                   const nn_act *out, const float *stats, const lssar_attn_desc *d, int B,
                                   int T, int NH, int HS) {
    wrote(c, dq); wrote(c, dk); wrote(c, dv); wrote(c, dscale);
    if (c->err) return c->err;
    size_t bytes = cuda_attn_scratch_bytes(d, B, T, T, NH, HS);
    void *s = bytes ? scratch(c, bytes) : NULL;
    if (bytes && !s) return c->err;
    return cuda_attn_backward(d, c->precision == NN_BF16, c->act, B, T, NH, HS, q, k, v, out, stats, dout, dq,
                              dk, dv, dscale, s, c->stream);
}

/* ---- cross-entropy, optimiser */
static void cuda_xent_forward_(nn_ctx *c, nn_act *logits, float *losses, uint16_t *argmax,
                               const uint16_t *targets, int tstride, int ostride, int R, int V, double *acc) {
    wrote(c, logits); wrote(c, losses); wrote(c, argmax); wrote(c, acc);
    if (c->err) return;
    void *s = scratch(c, cuda_xent_forward_scratch(R));
    if (!s) return;
    note(c, cuda_xent_forward(c->act, logits, losses, argmax, targets, tstride, ostride, R, V, acc, s,
                              c->stream));
}
static void cuda_xent_backward_(nn_ctx *c, nn_act *probs, const uint16_t *targets, int tstride, int R, int V,
                                float grad_scale, const double *acc) {
    wrote(c, probs);
    if (!c->err) note(c, cuda_xent_backward(c->act, probs, targets, tstride, R, V, grad_scale, acc, c->stream));
}
static void cuda_adamw_(nn_ctx *c, float *params, const float *grads, float *m, float *v, size_t n, int t,
                        float lr, float beta1, float beta2, float eps, float wd) {
    wrote(c, params); wrote(c, m); wrote(c, v);
    if (c->err) return;
    float ibc1, ibc2;
    km_adamw_ibc(t, beta1, beta2, &ibc1, &ibc2);   // on the host, with libm's powf, as adamw.c
    note(c, cuda_adamw(params, grads, m, v, n, lr, beta1, beta2, eps, wd, ibc1, ibc2, c->stream));
}
static double cuda_sum_squares_(nn_ctx *c, const float *x, size_t n) {
    if (c->err) return NAN;
    void *s = scratch(c, cuda_sum_squares_scratch(n));
    if (!s) return NAN;
    int rc = cuda_sum_squares(c->result_dev, x, n, s, c->stream);
    if (rc) { note(c, rc); return NAN; }
    if (CU(c, cudaMemcpyAsync(c->result_host, c->result_dev, sizeof(double), cudaMemcpyDeviceToHost,
                              c->stream)) ||
        CU(c, cudaStreamSynchronize(c->stream)))
        return NAN;
    return *c->result_host;
}
static void cuda_block_sum_squares_(nn_ctx *c, double *out, const float *x, size_t n, size_t block) {
    wrote(c, out);
    if (c->err) return;
    void *s = scratch(c, cuda_block_sum_squares_scratch(n));
    if (s) note(c, cuda_block_sum_squares(out, x, n, block, s, c->stream));
}
static void cuda_clip_norm_(nn_ctx *c, float *x, size_t n, const double *ss, size_t nb, float clip,
                            float *norm) {
    wrote(c, x); wrote(c, norm);
    if (!c->err) note(c, cuda_clip_norm(x, n, ss, nb, clip, norm, c->factor_dev, c->stream));
}
static void cuda_scale_(nn_ctx *c, float *x, size_t n, float s) {
    wrote(c, x);
    if (!c->err) note(c, cuda_scale(x, n, s, c->stream));
}

/* ---- data-parallel collectives: dist_nccl.h. A failure is sticky like the others (a collective
   that failed on one rank leaves the job's ranks out of step). */
static int cuda_dist_sum_(nn_ctx *c, float *out, const float *x, const size_t *off, const size_t *cnt,
                          int accumulate, float *scratch) {
    wrote(c, out);
    if (c->err) return c->err;
    if (!c->comm && (CU(c, cudaStreamCreateWithFlags(&c->comm, cudaStreamNonBlocking)) ||
                     CU(c, cudaEventCreateWithFlags(&c->ready, cudaEventDisableTiming)) ||
                     CU(c, cudaEventCreateWithFlags(&c->summed, cudaEventDisableTiming))))
        return c->err;
    // after the gradients it reads are written; the summed stream order is the call order
    if (CU(c, cudaEventRecord(c->ready, c->stream)) || CU(c, cudaStreamWaitEvent(c->comm, c->ready, 0)))
        return c->err;
    int rc = cuda_dist_sum(&c->nccl, out, x, off, cnt, accumulate, scratch, c->comm);
    note(c, rc);
    return rc;
}
static void cuda_dist_wait_(nn_ctx *c) {
    if (c->err || !c->comm) return;
    if (!CU(c, cudaEventRecord(c->summed, c->comm))) CU(c, cudaStreamWaitEvent(c->stream, c->summed, 0));
}
static int cuda_dist_allgather_(nn_ctx *c, float *x, const size_t *off, const size_t *cnt, int root) {
    wrote(c, x);
    if (c->err) return c->err;
    cuda_dist_wait_(c);   // one communicator, one order of its operations: after every sum
    if (c->err) return c->err;
    int rc = cuda_dist_allgather(&c->nccl, x, off, cnt, root, c->stream);
    note(c, rc);
    return rc;
}

// In the order of nn_backend's fields (C++17 has no designated initializers).
extern "C" const nn_backend nn_backend_cuda = {
    "cuda",                        // name
    LSSAR_DEVICE_CUDA,             // device
    1024,                          // eval_rows: 1024 rows x 50k vocabulary = 200 MB of logits
    cuda_ctx_create,               // ctx_create
    cuda_ctx_free,                 // ctx_free
    cuda_alloc,                    // alloc
    cuda_release,                  // release
    cuda_upload,                   // upload
    cuda_download,                 // download
    cuda_copy,                     // copy
    cuda_zero,                     // zero
    cuda_act_dtype,                // act_dtype
    cuda_upload_act,               // upload_act
    cuda_download_act,             // download_act
    cuda_matmul_forward,           // matmul_forward
    cuda_matmul_backward,          // matmul_backward
    cuda_layernorm_forward_,       // layernorm_forward
    cuda_layernorm_backward_,      // layernorm_backward
    cuda_gelu_forward_,            // gelu_forward
    cuda_gelu_backward_,           // gelu_backward
    cuda_residual_forward_,        // residual_forward
    cuda_embedding_forward_,       // embedding_forward
    cuda_embedding_backward_,      // embedding_backward
    cuda_rope_forward_,            // rope_forward
    cuda_rope_backward_,           // rope_backward
    cuda_attention_stats_floats,   // attention_stats_floats
    cuda_attention_forward,        // attention_forward
    cuda_attention_backward,       // attention_backward
    cuda_xent_forward_,            // xent_forward
    cuda_xent_backward_,           // xent_backward
    cuda_adamw_,                   // adamw
    cuda_sum_squares_,             // sum_squares
    cuda_block_sum_squares_,       // block_sum_squares
    cuda_clip_norm_,               // clip_norm
    cuda_scale_,                   // scale
    cuda_host_alloc,               // host_alloc
    cuda_host_free,                // host_free
    cuda_upload_async,             // upload_async
    cuda_upload_wait,              // upload_wait
    cuda_dist_sum_,                // dist_sum
    cuda_dist_allgather_,          // dist_allgather
    cuda_dist_wait_,               // dist_wait
    cuda_device_stats,             // device_stats
};
