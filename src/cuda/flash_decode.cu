/*
 * flash_decode.cu - split-KV decoding (issue 35): Tq <= 16 query rows of each (b, h) against Tk
 * keys split into chunks, one CTA per (b, h, chunk), and a combine kernel that merges the chunks in
 * a fixed order. The algorithm, the orders and the error bound are src/attn/flash_decode.h; the
 * per-element math is src/attn/flash.h's; the CPU emulation is src/attn/flash_decode_emu.c, which
 * tests/cuda_host/test_decode_host.cpp compares with this file's kernels (run on the CPU) bit for
 * bit.
 *
 *   split_kernel    grid (B H, nsplit), FD_NT threads (SIMT: Tq <= 16 rows leave the tensor cores
 *                   nothing to fill). Per key tile of FD_KT keys: K, V (and 1/|k|) to shared
 *                   memory; the logits (one thread per (row, key), over d in order); the row max
 *                   and rescale (one thread per row); the weights (one thread per (row, key));
 *                   the row sums (one thread per row) and the accumulators (one thread per
 *                   (row, d), the key order). Writes each row's partial statistics and acc.
 *                   Re-weighting: launched twice (FD_RW1, FD_RW2); each FD_RW2 CTA first combines
 *                   pass 1's partials of its rows (fd_rw1_combine).
 *   combine_kernel  grid (B H), one thread per (row, d): the splits in order (fd_combine).
 * q, k, v and out are float32 or bf16 (storage; bf16 takes bf16 products, and 1/|q|, 1/|k| come from
 * the shared-memory copies, which are then exact). Deterministic (fixed orders, no atomics). No
 * statistics for a backward are written.
 */
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#ifdef LSSAR_CUDA_HOST
// Host-test hooks (as flash_attn.cu's): the CUDA shim is force-included (mk/cuda_host.mk).
#ifndef LSSAR_TESTS_CUDA_HOST_H
#error "the -DLSSAR_CUDA_HOST build force-includes the CUDA shim (mk/cuda_host.mk: -include cuda_host.h)"
#endif
#define FD_LAUNCH(grid, block, smem, stream, ...) cuda_host_launch(__VA_ARGS__, grid, block, smem, stream)
#define FD_SHARED_ARRAY(type, name, n) type *const name = cuda_host_static_shared<type>(n)
#else
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#define FD_LAUNCH(grid, block, smem, stream, ...) __VA_ARGS__<<<grid, block, smem, stream>>>
#define FD_SHARED_ARRAY(type, name, n) __shared__ type name[n]
#endif
#include "lssar.h"
extern "C" {
#include "core/util.h"
#include "attn/flash_emu.h"  // flash_emu_check_fused
#include "attn/attn.h"       // attn_desc_check, attn_stages
}
#include "attn/flash.h"
#include "attn/flash_decode.h"
#include "cuda/flash_decode.h"

struct dec_args {
    flash_params fp;
    const void *q, *k, *v;  // float32, or bf16 (io)
    void *out;
    const float *ssmax_s;   // (H): ssmax
    float *ps1, *ps, *pa;   // partials: pass 1's statistics; the last pass's statistics and acc
    int B, Tq, Tk, kvs, H, ns, chunk, bf16, io;
};

// Element of row (b, position t, h) of a (B, T, H, D) tensor whose sequences are `stride` rows
// apart: the row's offset, and element i of x widened to float (bf16 storage: io)
static __device__ __forceinline__ size_t row_of(int b, int t, int h, int stride, int H, int D) {
    return ((size_t)b * stride + t) * H * D + (size_t)h * D;
}
static __device__ __forceinline__ float ld_in(const dec_args &a, const void *x, size_t i) {
    return a.io ? fm_bf16_float(__ldg(static_cast<const unsigned short *>(x) + i))
                : __ldg(static_cast<const float *>(x) + i);
}
static __device__ __forceinline__ size_t ps_at(const dec_args &a, int bh, int s, int r) {
    return (((size_t)bh * a.ns + s) * a.Tq + r) * FD_NPS;
}

// The CTA's rows (threads < Tq): constants (pass 2: pass 1's partials combined), running values.
// 1/|q| from the input row; with bf16 storage from Qs, its exact copy (rounding a bf16 value to
// bf16 is the identity), which the caller has made visible.
static __device__ __forceinline__ void split_rows(const dec_args &a, int pass, int bh, int D, const float *Qs,
                                                  flash_row *RW, fd_rowst *RS) {
    const int b = bh / a.H, h = bh % a.H;
    for (int r = threadIdx.x; r < a.Tq; r += FD_NT) {
        float s_h = a.fp.score == LSSAR_SCORE_SSMAX ? a.ssmax_s[h] : 0.0f;
        const float *q32 = static_cast<const float *>(a.q) + row_of(b, r, h, a.Tq, a.H, D);
        float rq = !flash_needs_norms(&a.fp) ? 1.0f : fd_inv_norm(a.io ? Qs + r * D : q32, D);
        flash_row_init(&a.fp, a.Tk - a.Tq + r, s_h, rq, &RW[r]);
        if (pass == FD_RW2)
            fd_rw1_combine(&a.fp, &RW[r], a.ps1 + ps_at(a, bh, 0, r), a.ns, (size_t)a.Tq * FD_NPS);
        fd_row_begin(&RS[r]);
    }
}

// K, V of the tile (rows past nk zero; bf16-rounded in BF16 mode) and 1/|k| from the fp32 inputs;
// with bf16 storage 1/|k| comes from Ks, the inputs' exact copy, after a barrier here.
// K's rows are D + 1 floats apart in shared memory: the logits' threads read K[j][d] of 32 keys j at
// once, which at a stride of D (a multiple of 32 floats) would all hit one bank.
template <int D>
static __device__ __forceinline__ void load_tile(const dec_args &a, int b, int h, int t0, int nk, float *Ks,
                                                 float *Vs, float *RKs) {
    for (int i = threadIdx.x; i < FD_KT * D; i += FD_NT) {
        int j = i / D, d = i % D;
        float kx = 0.0f, vx = 0.0f;
        if (j < nk) {
            kx = ld_in(a, a.k, row_of(b, t0 + j, h, a.kvs, a.H, D) + d);
            vx = ld_in(a, a.v, row_of(b, t0 + j, h, a.kvs, a.H, D) + d);
        }
        Ks[j * (D + 1) + d] = a.bf16 ? flash_bf16(kx) : kx;
        Vs[i] = a.bf16 ? flash_bf16(vx) : vx;
    }
    if (a.io && flash_needs_norms(&a.fp)) __syncthreads();   // the rows of Ks, for their norms
    for (int j = threadIdx.x; j < FD_KT; j += FD_NT)
        RKs[j] = !(j < nk && flash_needs_norms(&a.fp))
                     ? 1.0f
                 : a.io ? fd_inv_norm(Ks + j * (D + 1), D)
                        : fd_inv_norm(static_cast<const float *>(a.k) + row_of(b, t0 + j, h, a.kvs, a.H, D), D);
}

template <int D>
__global__ void __launch_bounds__(FD_NT) split_kernel(dec_args a, int pass) {
    constexpr int PER =
        FD_MAXQ * D / FD_NT;  // (row, d) accumulators per thread: d fixed, rows apart by RSTEP
    constexpr int RSTEP = FD_NT / D;
    static_assert(FD_NT % D == 0, "a thread's accumulators share one d");
    FD_SHARED_ARRAY(float, Qs, FD_MAXQ * D);
    FD_SHARED_ARRAY(float, Ks, FD_KT * (D + 1));  // (see load_tile)
    FD_SHARED_ARRAY(float, Vs, FD_KT * D);
    FD_SHARED_ARRAY(float, Xs, FD_MAXQ * FD_KT);
    FD_SHARED_ARRAY(float, RKs, FD_KT);
    FD_SHARED_ARRAY(flash_row, RW, FD_MAXQ);
    FD_SHARED_ARRAY(fd_rowst, RS, FD_MAXQ);
    const int bh = blockIdx.x, s = blockIdx.y, b = bh / a.H, h = bh % a.H, Tq = a.Tq, tid = threadIdx.x;
    const flash_params &fp = a.fp;
    for (int i = tid; i < Tq * D; i += FD_NT) {
        float x = ld_in(a, a.q, row_of(b, i / D, h, Tq, a.H, D) + i % D);
        Qs[i] = a.bf16 ? flash_bf16(x) : x;
    }
    if (a.io) __syncthreads();   // Qs, for split_rows' norms
    split_rows(a, pass, bh, D, Qs, RW, RS);
    const int dd = tid % D, r0 = tid / D;
    float acc[PER];
#pragma unroll
    for (int e = 0; e < PER; e++) acc[e] = 0.0f;
    const int k0 = s * a.chunk, k1 = min(k0 + a.chunk, a.Tk);
    for (int t0 = k0; t0 < k1; t0 += FD_KT) {
        const int nk = min(FD_KT, k1 - t0);
        __syncthreads();  // the previous tile's readers are done (and the rows and Q are in place)
        load_tile<D>(a, b, h, t0, nk, Ks, Vs, RKs);
        __syncthreads();
        for (int i = tid; i < Tq * FD_KT; i += FD_NT) {  // logits
            int r = i / FD_KT, j = i % FD_KT;
            Xs[i] = j < fd_nvis(a.Tk, Tq, r, t0, nk)
                        ? flash_logit(&fp, &RW[r], fd_dot(Qs + r * D, Ks + j * (D + 1), D), RKs[j])
                        : -INFINITY;
        }
        __syncthreads();
        for (int r = tid; r < Tq; r += FD_NT)  // row max, argmax, rescale
            fd_row_tile(&fp, pass, &RS[r], Xs + r * FD_KT, RKs, fd_nvis(a.Tk, Tq, r, t0, nk), t0);
        __syncthreads();
        for (int i = tid; i < Tq * FD_KT; i += FD_NT) {  // weights
            int r = i / FD_KT, j = i % FD_KT;
            Xs[i] = j < fd_nvis(a.Tk, Tq, r, t0, nk)
                        ? fd_weight(&fp, pass, &RW[r], RS[r].m, Xs[i], t0 + j == RW[r].jm)
                        : 0.0f;
        }
        __syncthreads();
        for (int r = tid; r < Tq; r += FD_NT)  // row sums
            RS[r].l = fd_lsum(RS[r].l, RS[r].alpha, Xs + r * FD_KT, fd_nvis(a.Tk, Tq, r, t0, nk));
        if (pass != FD_RW1) {
#pragma unroll
            for (int e = 0; e < PER; e++) {  // the products, key order
                int r = r0 + e * RSTEP;
                if (r < Tq)
                    acc[e] = fd_acc_tile(acc[e], RS[r].alpha, Xs + r * FD_KT, Vs + dd, D,
                                         fd_nvis(a.Tk, Tq, r, t0, nk), a.bf16);
            }
        }
    }
    __syncthreads();
    float *ps = pass == FD_RW1 ? a.ps1 : a.ps;
    for (int r = tid; r < Tq; r += FD_NT) fd_row_store(&RS[r], ps + ps_at(a, bh, s, r));
    if (pass != FD_RW1) {
#pragma unroll
        for (int e = 0; e < PER; e++) {
            int r = r0 + e * RSTEP;
            if (r < Tq) a.pa[(((size_t)bh * a.ns + s) * Tq + r) * D + dd] = acc[e];
        }
    }
}

__global__ void __launch_bounds__(FD_NT) combine_kernel(dec_args a, int pass, int D) {
    const int bh = blockIdx.x, b = bh / a.H, h = bh % a.H;
    for (int i = threadIdx.x; i < a.Tq * D; i += FD_NT) {
        int r = i / D, d = i % D;
        size_t o = ((size_t)b * a.Tq + r) * a.H * D + (size_t)h * D + d;
        float y = fd_combine(&a.fp, pass, a.ps + ps_at(a, bh, 0, r), (size_t)a.Tq * FD_NPS,
                             a.pa + ((size_t)bh * a.ns * a.Tq + r) * D + d, (size_t)a.Tq * D, a.ns);
        if (a.io) static_cast<uint16_t *>(a.out)[o] = fm_bf16_rne(y);
        else static_cast<float *>(a.out)[o] = y;
    }
}

// ================================================================ host side

static int cuda_fail(cudaError_t e, const char *what) {
    return lssar_fail(e == cudaErrorMemoryAllocation ? LSSAR_E_NOMEM : LSSAR_E_UNSUPPORTED,
                      "flash decode: CUDA error %s (%s) in %s", cudaGetErrorName(e), cudaGetErrorString(e),
                      what);
}
static size_t round256(size_t b) { return (b + 255) / 256 * 256; }

// The SMs of the current device (the emulated device of the host build: an H100's 132).
static int sm_count(void) {
#ifdef LSSAR_CUDA_HOST
    return 132;
#else
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return 132;
    }
    return n > 0 ? n : 132;
#endif
}
static int chunk_of(int nsplit, int B, int Tk, int H) {
    return fd_chunk(Tk, nsplit ? nsplit : fd_auto_nsplit(B * H, Tk, sm_count()));
}
// Scratch layout (each piece 256-byte aligned): pass 1's statistics (re-weighting), the last
// pass's statistics, its accumulators.
static size_t carve(const flash_params &fp, int ns, int B, int Tq, int H, int D, char *base, dec_args *a) {
    size_t rows = (size_t)B * H * ns * Tq, off = 0;
    size_t nps = round256(rows * FD_NPS * sizeof(float)), npa = round256(rows * D * sizeof(float));
    if (a) a->ps1 = fp.rw ? reinterpret_cast<float *>(base + off) : NULL;
    off += fp.rw ? nps : 0;
    if (a) a->ps = reinterpret_cast<float *>(base + off);
    off += nps;
    if (a) a->pa = reinterpret_cast<float *>(base + off);
    return off + npa;
}
static flash_params params_of(const lssar_attn_desc *d, int D) {
    lssar_attn_stages st = attn_stages(d->kind);
    flash_params fp;
    flash_params_init(&fp, &st, d->p, D);
    flash_params_len(&fp, d->len_norm == LSSAR_LEN_NORM_ROW, d->train_len);
    flash_params_temp(&fp, d->temp_d);
    return fp;
}

extern "C" int cuda_attn_decode_applies(const lssar_attn_desc *d, int B, int Tq, int Tk, int H, int D,
                                        int want_stats) {
    if (want_stats || !d || !attn_kind_ok(d->kind) || B <= 0 || H <= 0 || Tq <= 0 || Tq > FD_MAXQ || Tq > Tk)
        return 0;
    lssar_attn_stages st = attn_stages(d->kind);
    if (!flash_fused_supported(&st) || (D != 16 && D != 32 && D != 64 && D != 128)) return 0;
    return (int64_t)B * H < INT32_MAX && fd_auto_nsplit(B * H, Tk, sm_count()) > 1;
}

extern "C" size_t cuda_attn_decode_scratch_bytes(const lssar_attn_desc *d, int nsplit, int B, int Tq, int Tk,
                                                 int H, int D) {
    if (!d || !attn_kind_ok(d->kind) || B <= 0 || Tq <= 0 || Tk < Tq || H <= 0 || D <= 0 || nsplit < 0)
        return 0;
    const flash_params fp = params_of(d, D);
    return carve(fp, fd_nsplit(Tk, chunk_of(nsplit, B, Tk, H)), B, Tq, H, D, NULL, NULL);
}

template <int D>
static int launch_d(const dec_args &a, cudaStream_t st) {
    dim3 grid((unsigned)(a.B * a.H), (unsigned)a.ns);
    if (a.fp.rw) FD_LAUNCH(grid, FD_NT, 0, st, split_kernel<D>)(a, (int)FD_RW1);
    int pass = a.fp.rw ? FD_RW2 : FD_MAIN;
    FD_LAUNCH(grid, FD_NT, 0, st, split_kernel<D>)(a, pass);
    FD_LAUNCH((unsigned)(a.B * a.H), FD_NT, 0, st, combine_kernel)(a, pass, D);
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? LSSAR_OK : cuda_fail(e, "the launch of the decode kernels");
}

extern "C" int cuda_attn_decode_forward(const lssar_attn_desc *d, int bf16_products, lssar_dtype storage,
                                        int nsplit, int B, int Tq, int Tk, int kv_stride, int H, int D,
                                        const void *q, const void *k, const void *v, void *out, void *scratch,
                                        cudaStream_t stream) {
    const char *fn = "attention decode forward (CUDA)";
    int rc = attn_desc_check(d, fn);
    if (!rc) rc = flash_emu_check_fused(d, fn);
    if (rc) return rc;
    if (B <= 0 || Tq <= 0 || Tq > FD_MAXQ || H <= 0 || Tq > Tk || kv_stride < Tk || nsplit < 0 ||
        (int64_t)B * H > INT32_MAX || (int64_t)B * kv_stride * H * D > INT64_MAX / 8)
        return lssar_fail(LSSAR_E_SIZE,
                          "%s: B=%d Tq=%d Tk=%d kv_stride=%d H=%d nsplit=%d; need sizes > 0, "
                          "Tq <= %d, Tq <= Tk <= kv_stride, nsplit >= 0",
                          fn, B, Tq, Tk, kv_stride, H, nsplit, FD_MAXQ);
    if (D != 16 && D != 32 && D != 64 && D != 128)
        return lssar_fail(LSSAR_E_UNSUPPORTED,
                          "%s: head dim D=%d; the CUDA kernels support 16, 32, 64 and 128", fn, D);
    if (!q || !k || !v || !out || !scratch)
        return lssar_fail(LSSAR_E_NULL, "%s: q, k, v, out and scratch must be non-NULL", fn);
    dec_args a;
    memset(&a, 0, sizeof a);
    a.fp = params_of(d, D);
    a.q = q; a.k = k; a.v = v; a.out = out;
    a.ssmax_s = a.fp.score == LSSAR_SCORE_SSMAX ? d->ssmax_s : NULL;
    a.io = storage == LSSAR_BF16;   // bf16 storage takes bf16 products (rounding its values is exact)
    a.B = B; a.Tq = Tq; a.Tk = Tk; a.kvs = kv_stride; a.H = H; a.bf16 = bf16_products != 0 || a.io;
    a.chunk = chunk_of(nsplit, B, Tk, H);
    a.ns = fd_nsplit(Tk, a.chunk);
    carve(a.fp, a.ns, B, Tq, H, D, static_cast<char *>(scratch), &a);
    switch (D) {
    case 16: return launch_d<16>(a, stream);
    case 32: return launch_d<32>(a, stream);
    case 64: return launch_d<64>(a, stream);
    default: return launch_d<128>(a, stream);
    }
}
