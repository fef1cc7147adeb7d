/*
 * flash_attn.cu - the fused causal attention kernels (forward, backward) of the CUDA backend and
 * the public lssar_attn_*_cuda entry points of include/lssar.h.
 *
 * These kernels are the transliteration of the CPU emulation src/attn/flash_emu.c, which CI tests
 * against a float64 reference: same tiles (64 query rows x 64 keys, 4 warps of 16 rows), same
 * fragment ownership, same loop and accumulation order, same rounding points. Every per-element
 * formula is a flash.h FM_FN function shared with the emulation; nothing of the math is re-derived
 * here. Read flash.h first: it documents the algorithm, the statistics layout and why the softmax
 * and lssar rows are centred on their argmax.
 *
 * Fragments (mma.sync m16n8k16, bf16 x bf16 -> fp32). Lane l of a warp has g = l / 4, tq = l % 4.
 *   A 16x16 (row): a0a1 = A[g][2tq..], a2a3 = A[g+8][2tq..], a4a5 = A[g][2tq+8..], a6a7 = A[g+8][2tq+8..]
 *   B 16x8 (col):  b0b1 = B[2tq..][g], b2b3 = B[2tq+8..][g]
 *   C 16x8:        c0c1 = C[g][2tq..], c2c3 = C[g+8][2tq..]
 *   (each pair packed in one 32-bit register, the lower index in the low half).
 * A warp's 16 x 64 score tile is 8 C fragments s[c8][0..3]: the lane's row g at columns
 * 8 c8 + 2 tq + {0, 1} (elements 0, 1) and row g + 8 (elements 2, 3); its t-th column (flash.h's
 * flash_lane_col) is element (c8 = t / 2, t % 2). A 16 x D output (P V, dQ, dK, dV) is D / 8 C
 * fragments acc[nb][0..3] at columns 8 nb + 2 tq + {0, 1}.
 *
 * Two product modes with one code path after the products: MMA (operands in shared memory as bf16,
 * rounded to nearest even as the emulation's flash_bf16; mma.sync) and SIMT (operands fp32, every
 * fragment element computed by scalar FMAs over the reduction index in order, as the emulation
 * sums: the scores over d = 0..D-1 from 0; the products over keys or rows (P V, dS K, W^T dY,
 * dS^T Q) one k-step of 16 indices at a time, summed from 0 and then added to the accumulator, as
 * an mma does). Per-row reductions over keys are per lane in t order from 0 within a key tile,
 * the tile partial then added to the lane's running value, and the quad tree at the end.
 * Storage (float32 or bf16 tensors in global memory) is a run-time flag: the tile loaders
 * convert, so the kernels are templated on (stages, D, mode) only (flash_st); dot and ssmax share one
 * instance, and so do sigmoid and relu (kind_params).
 *
 * Kernels, per call (grid (B * H, tiles); 128 threads):
 *   norms_kernel     lssa / lssar: rq, rk = 1 / max(|x|, 1e-12), one thread per row (B, H, T)
 *   fwd_kernel       one CTA per (b, h, 64 query rows): softmax/ssmax online (centred), lssa one
 *                    pass, lssar two passes, sigmoid/relu one pass (no row statistic); writes out
 *                    and (if asked) the statistics
 *   bwd_rows_kernel  one thread per row: D1, D2, c (flash_bwd_row) into (B, H, T, FLASH_NBSTAT)
 *                    (not for sigmoid / relu: no normalisation, nothing to compute)
 *   rowpass_kernel   PASS_RS, the re-weighting kinds: one CTA per (b, h, 64 query rows) walks
 *                    its key tiles and replaces D1, D2 by sums of the backward's own dW
 *                    (flash_bwd_rowsums)
 *   sem_zero_kernel  the dK/dV kernel's counters (one per (b, h, query tile)) to 0
 *   dkdv_kernel      one CTA per (b, h, 64 keys): walks the query tiles that see them; dK, dV in
 *                    registers, and each query tile's part of dQ (dS K) added to an fp32 dQ
 *                    buffer in key-tile order (sem_wait / sem_post)
 *   dq_finish_kernel one CTA per (b, h, 64 query rows): the fp32 dQ buffer through the projection
 *                    (lssa / lssar) to dq
 *   rowpass_kernel   PASS_SSMAX, ssmax with ds wanted: the same walk for each row's term of ds
 *   ds_kernel        ssmax: one CTA per head, a fixed-order double sum of the row terms
 * Deterministic: no floating-point atomics; every sum has a fixed order (dQ's over key tiles by
 * the counters). Memory O(T): no T x T buffer.
 */
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <type_traits>
#ifdef LSSAR_CUDA_HOST
/* Host-test hooks: this block, the host branch of mma_bf16, and the FLASH_LAUNCH,
   FLASH_DYNAMIC_SHARED and FLASH_SHARED_ARRAY macros (nothing else in the file differs). Under
   -DLSSAR_CUDA_HOST the file compiles as plain C++ (g++ -x c++, mk/cuda_host.mk) with the test
   harness's CUDA shim force-included ahead of it (-include cuda_host.h: the library includes
   nothing from tests/). The shim runs the kernels on the CPU (every CUDA thread a pthread) for
   tests/cuda_host/test_flash_host.cpp and renames the public entry points (cuda_host_attn_*,
   lssar_host_*) so that this copy links beside the library's. Under nvcc the macros expand to
   exactly the code they stand for (<<<>>>, extern __shared__, __shared__). */
#ifndef LSSAR_TESTS_CUDA_HOST_H  // the shim's include guard
#error "the -DLSSAR_CUDA_HOST build force-includes the CUDA shim (mk/cuda_host.mk: -include cuda_host.h)"
#endif
#define FLASH_LAUNCH(grid, block, smem, stream, ...) cuda_host_launch(__VA_ARGS__, grid, block, smem, stream)
#define FLASH_DYNAMIC_SHARED(name) unsigned char *const name = cuda_host_dynamic_shared()
#define FLASH_SHARED_ARRAY(type, name, n) type *const name = cuda_host_static_shared<type>(n)
#else
#include <cuda_runtime.h>
#include <cuda_bf16.h>
// FLASH_LAUNCH(grid, block, smem, stream, kernel)(args) is kernel<<<grid, block, smem, stream>>>(args)
// (the kernel last: its template arguments contain commas)
#define FLASH_LAUNCH(grid, block, smem, stream, ...) __VA_ARGS__<<<grid, block, smem, stream>>>
#define FLASH_DYNAMIC_SHARED(name) extern __shared__ __align__(16) unsigned char name[]
#define FLASH_SHARED_ARRAY(type, name, n) __shared__ type name[n]
#endif
#include "lssar.h"
extern "C" {
#include "core/util.h"
#include "attn/flash_emu.h"  // flash_emu_check_fused: which kinds the kernels support
#include "attn/attn.h"       // attn_desc_check: the descriptor checks every backend shares
}
#include "attn/flash.h"
#include "cuda/flash_attn.h"

#define NT (32 * FLASH_WARPS)  // threads per attention CTA
#define FULL_MASK 0xffffffffu

static_assert(FLASH_BR == 64 && FLASH_BC == 64 && FLASH_WARPS == 4 && FLASH_WROWS == 16,
              "the kernels hard-wire 64 x 64 tiles of 4 warps x 16 rows");

// ================================================================ small device helpers

// fp32 pair -> one register of two bf16 (round to nearest even; lo in the low half, as mma wants)
static __device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&h);
}
static __device__ __forceinline__ float bf16_lo(uint32_t u) { return __uint_as_float(u << 16); }
static __device__ __forceinline__ float bf16_hi(uint32_t u) { return __uint_as_float(u & 0xffff0000u); }

// D (16x8 fp32) += A (16x16 bf16) B (16x8 bf16)
static __device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                                uint32_t b1) {
#ifdef LSSAR_CUDA_HOST
    cuda_host_mma_bf16(c, a, b0, b1);  // the shim's warp-collective emulation of the instruction
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// The quad tree of flash.h: ((l0 + l1) + (l2 + l3)). xor 1 pairs (l0, l1), (l2, l3); xor 2 pairs
// the two sums. Addition is commutative, so the four lanes end with the same bits. All 32 lanes
// must call it.
static __device__ __forceinline__ float quad_sum(float v) {
    v = v + __shfl_xor_sync(FULL_MASK, v, 1);
    v = v + __shfl_xor_sync(FULL_MASK, v, 2);
    return v;
}
static __device__ __forceinline__ float quad_min(float v) {
    float o = __shfl_xor_sync(FULL_MASK, v, 1);
    v = o < v ? o : v;
    o = __shfl_xor_sync(FULL_MASK, v, 2);
    return o < v ? o : v;
}
// (max, first index) over the quad: "none" is (-inf, INT_MAX), which every real entry beats. The
// result does not depend on the order of the combination (ties go to the smaller index).
static __device__ __forceinline__ void quad_argmax(float &m, int &j) {
#pragma unroll
    for (int o = 1; o <= 2; o <<= 1) {
        float om = __shfl_xor_sync(FULL_MASK, m, o);
        int oj = __shfl_xor_sync(FULL_MASK, j, o);
        flash_argmax_update(&m, &j, om, oj);
    }
}

// ================================================================ global memory access

// 8 consecutive elements of a float32 or bf16 tensor (element offset off, a multiple of 8), as floats
static __device__ __forceinline__ void load8(const void *base, int64_t off, int io_bf16, float (&f)[8]) {
    if (io_bf16) {
        uint4 u = __ldg(reinterpret_cast<const uint4 *>(static_cast<const uint16_t *>(base) + off));
        f[0] = bf16_lo(u.x); f[1] = bf16_hi(u.x); f[2] = bf16_lo(u.y); f[3] = bf16_hi(u.y);
        f[4] = bf16_lo(u.z); f[5] = bf16_hi(u.z); f[6] = bf16_lo(u.w); f[7] = bf16_hi(u.w);
    } else {
        const float4 *p = reinterpret_cast<const float4 *>(static_cast<const float *>(base) + off);
        float4 a = __ldg(p), b = __ldg(p + 1);
        f[0] = a.x; f[1] = a.y; f[2] = a.z; f[3] = a.w; f[4] = b.x; f[5] = b.y; f[6] = b.z; f[7] = b.w;
    }
}
// 2 consecutive elements (off even) as floats; rnd: round to bf16 (an mma operand, as the
// emulation's bf16 copies of the inputs)
static __device__ __forceinline__ float2 load2(const void *base, int64_t off, int io_bf16, bool rnd) {
    if (io_bf16) {
        uint32_t u = __ldg(reinterpret_cast<const unsigned int *>(static_cast<const uint16_t *>(base) + off));
        return make_float2(bf16_lo(u), bf16_hi(u));
    }
    float2 v = __ldg(reinterpret_cast<const float2 *>(static_cast<const float *>(base) + off));
    if (rnd) { v.x = flash_bf16(v.x); v.y = flash_bf16(v.y); }
    return v;
}
static __device__ __forceinline__ float load1(const void *base, int64_t off, int io_bf16) {
    if (io_bf16)
        return __uint_as_float((uint32_t)__ldg(static_cast<const unsigned short *>(base) + off) << 16);
    return __ldg(static_cast<const float *>(base) + off);
}
static __device__ __forceinline__ void store2(void *base, int64_t off, int io_bf16, float x, float y) {
    if (io_bf16) *reinterpret_cast<uint32_t *>(static_cast<uint16_t *>(base) + off) = pack_bf16(x, y);
    else *reinterpret_cast<float2 *>(static_cast<float *>(base) + off) = make_float2(x, y);
}

// ================================================================ shared-memory tiles

// The operand type of a mode in shared memory: fp32 (SIMT) or bf16 bits (MMA). Rows are padded by
// 16 bytes: the fragment loads below then hit 32 distinct banks (row r starts 4 r words apart
// modulo 32 for D = 64, 128; other D similar).
template <bool MMA> struct Op;
template <> struct Op<false> { typedef float T; static constexpr int PAD = 4; };
template <> struct Op<true> { typedef uint16_t T; static constexpr int PAD = 8; };

// SIMT weight scratch row stride (mm_pv16): its float2 writes, float4 reads are conflict-free
#define PW_LD 24

template <bool MMA, int D> struct Tile {
    typedef typename Op<MMA>::T T;
    static constexpr int LD = D + Op<MMA>::PAD;                    // (64, D) tile row stride
    static constexpr int LDP = FLASH_BC + Op<MMA>::PAD;            // (64, 64) staging row stride
    static constexpr int LDG = D + 4;                              // fp32 (64, D) epilogue rows
    static constexpr size_t TILE = (size_t)64 * LD * sizeof(T);    // bytes of one (64, D) tile
    static constexpr size_t STAGE = (size_t)64 * LDP * sizeof(T);  // bytes of one (64, 64) tile
    static constexpr size_t EPI = (size_t)64 * LDG * sizeof(float);
    // SIMT: each warp's (16, PW_LD) scratch for the weights entering P V (mm_pv16)
    static constexpr size_t PW = MMA ? 0 : (size_t)FLASH_WARPS * 16 * PW_LD * sizeof(float);
    // buffers of the tiles a kernel walks (the forward's and the row pass's K / V, dK / dV's Q / dY):
    // two in MMA mode (the next tile's cp.async beside the current one), one at D = 128, where the
    // lssar forward's registers leave no room for the copies' addresses and two more tiles would
    // leave dK / dV one CTA per SM
    static constexpr int NBUF = MMA && D <= 64 ? 2 : 1;
    // the forward and dK / dV split their tiles into full ones and the diagonal (the causal mask
    // only there) up to D = 64; at D = 128 their registers leave no room for the second copy of
    // the tile step (it spilled), so every tile takes the masked one
    static constexpr bool SPLIT = D <= 64;
    static constexpr size_t FWD =
        (1 + 2 * NBUF) * TILE + NBUF * 64 * sizeof(float) + PW;  // Q (K V)* rk* (Pw)
    static constexpr size_t ROWSUMS = (2 + 2 * NBUF) * TILE + 64 * sizeof(float);           // Q dY (K V)* rk
    static constexpr size_t DKDV = (2 + 2 * NBUF) * TILE + 2 * STAGE + 64 * sizeof(float);  // K V Q* dY* W dS rk
    static_assert(EPI <= 2 * TILE, "the fp32 epilogue rows reuse two operand tiles");
    static_assert(TILE % 16 == 0 && STAGE % 16 == 0, "16-byte aligned tiles");
};

// Rows 0..nvalid-1 of a (64, D) tile from global memory (row r at element g_off + r * ld) into
// shared memory as the operand type; rows past nvalid are zero (a 0 weight times them must be 0,
// not NaN). 16-byte pieces of 8 elements, a fixed number per thread (fully unrolled: no loop
// control, the row and column by shifts). bf16 storage into a bf16 tile is copied as it is (the
// rounding to bf16 is the identity there).
template <bool MMA, int D>
static __device__ __forceinline__ void load_tile(typename Op<MMA>::T *s, const void *g, int64_t g_off,
                                                 int64_t ld, int nvalid, int io_bf16) {
    constexpr int CH = D / 8, LD = Tile<MMA, D>::LD, STEPS = 64 * CH / NT;
    static_assert(64 * CH % NT == 0, "whole steps of NT pieces");
#pragma unroll
    for (int it = 0; it < STEPS; it++) {
        const int c = (int)threadIdx.x + it * NT, r = c / CH, d = (c % CH) * 8;
        const bool in = r < nvalid;
        const int64_t off = g_off + (int64_t)r * ld + d;
        if constexpr (MMA) {
            uint4 u = make_uint4(0u, 0u, 0u, 0u);
            if (in && io_bf16)
                u = __ldg(reinterpret_cast<const uint4 *>(static_cast<const uint16_t *>(g) + off));
            else if (in) {
                const float4 *p = reinterpret_cast<const float4 *>(static_cast<const float *>(g) + off);
                float4 x = __ldg(p), y = __ldg(p + 1);
                u = make_uint4(pack_bf16(x.x, x.y), pack_bf16(x.z, x.w), pack_bf16(y.x, y.y),
                               pack_bf16(y.z, y.w));
            }
            *reinterpret_cast<uint4 *>(s + r * LD + d) = u;
        } else {
            float f[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
            if (in) load8(g, off, io_bf16, f);
            *reinterpret_cast<float4 *>(s + r * LD + d) = make_float4(f[0], f[1], f[2], f[3]);
            *reinterpret_cast<float4 *>(s + r * LD + d + 4) = make_float4(f[4], f[5], f[6], f[7]);
        }
    }
}

/* cp.async.cg.shared.global (16 bytes; src_size 0 fills zeros and reads nothing), commit_group and
   wait_group: a tile's copy runs while the warps compute on the previous tile. */
static __device__ __forceinline__ void cp_async16(void *dst, const void *src, unsigned src_size) {
#ifdef LSSAR_CUDA_HOST
    cuda_host_cp_async16(dst, src, src_size);  // the shim's model: done at the covering wait
#else
    const unsigned a = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(a), "l"(src), "r"(src_size)
                 : "memory");
#endif
}
static __device__ __forceinline__ void cp_async_commit() {
#ifdef LSSAR_CUDA_HOST
    cuda_host_cp_async_commit();
#else
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
template <int N>
static __device__ __forceinline__ void cp_async_wait() {
#ifdef LSSAR_CUDA_HOST
    cuda_host_cp_async_wait(N);
#else
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

/* Ordered hand-overs between the CTAs of one launch: the dK/dV kernel adds each query tile's dQ
   part in key-tile order. A counter in global memory holds how many key tiles have added theirs;
   thread 0 of the next one spins (ld.acquire.gpu) until it holds its own index, and after the
   CTA's adds (each thread's __threadfence, then the barrier) sets the next (st.release.gpu). A CTA
   waits only on CTAs with a smaller linear block index, which the hardware dispatches first
   (FlashAttention-3's deterministic backward relies on the same order); the host harness runs
   blocks in that order and reports a wait on a later block as the deadlock it would be. */
static __device__ __forceinline__ void sem_wait(const int *sem, int v) {
#ifdef LSSAR_CUDA_HOST
    cuda_host_sem_wait(sem, v);
#else
    for (;;) {
        int x;
        asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(x) : "l"(sem) : "memory");
        if (x == v) break;
        __nanosleep(64);
    }
#endif
}
static __device__ __forceinline__ void sem_post(int *sem, int v) {
#ifdef LSSAR_CUDA_HOST
    cuda_host_sem_post(sem, v);
#else
    asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(sem), "r"(v) : "memory");
#endif
}

// load_tile of bf16 storage into a bf16 tile by cp.async: the same pieces, copied as they are (rows
// past nvalid zero-filled); visible after the covering cp_async_wait and a barrier.
template <int D>
static __device__ __forceinline__ void load_tile_async(uint16_t *s, const void *g, int64_t g_off, int64_t ld,
                                                       int nvalid) {
    constexpr int CH = D / 8, LD = Tile<true, D>::LD, STEPS = 64 * CH / NT;
#pragma unroll
    for (int it = 0; it < STEPS; it++) {
        const int c = (int)threadIdx.x + it * NT, r = c / CH, d = (c % CH) * 8;
        const bool in = r < nvalid;
        const uint16_t *src = static_cast<const uint16_t *>(g) + (in ? g_off + (int64_t)r * ld + d : 0);
        cp_async16(s + r * LD + d, src, in ? 16u : 0u);
    }
}

// 1/|k| of the tile's keys (1 past nk and for the kinds without norms, as the emulation's rkt)
static __device__ __forceinline__ void load_rk(float *rks, const float *rk, int64_t off, int nk,
                                               bool normed) {
    if (threadIdx.x < 64) rks[threadIdx.x] = normed && (int)threadIdx.x < nk ? rk[off + threadIdx.x] : 1.0f;
}

/* ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: four 8 x 8 bf16 matrices from shared memory in
   one instruction; lane l gives the address of row l % 8 of matrix l / 8 (16 bytes, 16-byte
   aligned) and receives in r[i] row l / 4, elements 2 (l % 4) + {0, 1} of matrix i, or (TRANS) of
   its transpose: the A and B fragment pairs of mma.m16n8k16, without 16-bit gathers. */
template <bool TRANS>
static __device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const uint16_t *p) {
#ifdef LSSAR_CUDA_HOST
    cuda_host_ldmatrix_x4(r, p, TRANS);  // the shim's warp-collective emulation of the instruction
#else
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    if constexpr (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
#endif
}

// ================================================================ warp products

/* The MMA steps of c = A B^T (c zeroed here): for each of the D / 16 k-steps, A's fragment
   from a_kstep(kk, a), then the n8 blocks of Bt (8 NNB rows, row-major in shared memory, stride
   LD) by ldmatrix: matrices (n8 block nb, nb + 1) x (cols 0-7, 8-15) give b0, b1 of both blocks;
   lane l: row 8 nb + l % 8 + 8 (l / 16), col 8 ((l / 8) % 2). */
template <int D, int NNB, typename AK>
static __device__ __forceinline__ void mm_abt_mma(float (&c)[NNB][4], AK a_kstep, const uint16_t *Bt, int lane) {
    constexpr int LD = Tile<true, D>::LD;
    static_assert(NNB % 2 == 0, "ldmatrix.x4 loads two n8 blocks");
#pragma unroll
    for (int nb = 0; nb < NNB; nb++)
#pragma unroll
        for (int e = 0; e < 4; e++) c[nb][e] = 0.0f;
    __syncwarp();  // ldmatrix and mma.sync.aligned: the whole warp, converged
    const uint16_t *pb = Bt + ((lane & 7) + 8 * (lane >> 4)) * LD + 8 * ((lane >> 3) & 1);
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
        uint32_t a[4];
        a_kstep(kk, a);
#pragma unroll
        for (int nb = 0; nb < NNB; nb += 2) {
            uint32_t b[4];
            ldsm_x4<false>(b, pb + 8 * nb * LD + 16 * kk);
            mma_bf16(c[nb], a, b[0], b[1]);
            mma_bf16(c[nb + 1], a, b[2], b[3]);
        }
    }
}

/* c[NNB][4] = A B^T for the warp: A the warp's 16 rows (16, D), Bt the 8 NNB rows (keys) of the
   other operand (8 NNB, D), both row-major in shared memory with stride LD; summed over d.
   MMA: D / 16 mma k-steps. SIMT: each element by FMAs over d = 0..D-1 in order (the emulation's
   tile_product). */
template <bool MMA, int D, int NNB>
static __device__ __forceinline__ void mm_abt(float (&c)[NNB][4], const typename Op<MMA>::T *A,
                                              const typename Op<MMA>::T *Bt, int lane) {
    constexpr int LD = Tile<MMA, D>::LD;
    const int g = lane >> 2, tq = lane & 3;
    if constexpr (MMA) {
        // A: matrices (rows 0-7, 8-15) x (cols 0-7, 8-15) give a0..a3; lane l: row l % 16, col 8 (l / 16).
        const uint16_t *pa = A + (lane & 15) * LD + 8 * (lane >> 4);
        mm_abt_mma<D, NNB>(c, [&](int kk, uint32_t (&a)[4]) { ldsm_x4<false>(a, pa + 16 * kk); }, Bt, lane);
    } else {
#pragma unroll
        for (int nb = 0; nb < NNB; nb++)
#pragma unroll
            for (int e = 0; e < 4; e++) c[nb][e] = 0.0f;
        const float *a0 = A + g * LD, *a1 = a0 + 8 * LD;
#pragma unroll 2
        for (int d = 0; d < D; d += 4) {
            float4 x0 = *reinterpret_cast<const float4 *>(a0 + d),
                   x1 = *reinterpret_cast<const float4 *>(a1 + d);
#pragma unroll
            for (int nb = 0; nb < NNB; nb++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    float4 y = *reinterpret_cast<const float4 *>(Bt + (8 * nb + 2 * tq + e) * LD + d);
                    float u = c[nb][e], w = c[nb][2 + e];
                    u = fmaf(x0.x, y.x, u);
                    u = fmaf(x0.y, y.y, u);
                    u = fmaf(x0.z, y.z, u);
                    u = fmaf(x0.w, y.w, u);
                    w = fmaf(x1.x, y.x, w);
                    w = fmaf(x1.y, y.y, w);
                    w = fmaf(x1.z, y.z, w);
                    w = fmaf(x1.w, y.w, w);
                    c[nb][e] = u;
                    c[nb][2 + e] = w;
                }
        }
    }
}

/* The forward's Q operand: the warp's 16 query rows as the A side of every score product of the
   CTA. REG: held in registers as the bf16 A fragments of the D / 16 k-steps (ldmatrix once per
   CTA, q_load); else the rows in shared memory, which mm_abt reads again for every key tile
   (one ldmatrix per k-step). Held where the registers allow it (QREG): bf16 products up to
   D = 32, and at D = 64 without the re-weighting; the re-weighting's forward at D = 64 and every
   forward at D = 128 have no D / 4 registers to spare (they would spill). */
template <bool MMA, int D, bool REG> struct QOperand { const typename Op<MMA>::T *p; };
template <int D> struct QOperand<true, D, true> { uint32_t a[D / 16][4]; };

// Rows 16 warp.. of the Q tile Qs (stride LD) as the warp's operand; Qs written and synchronised.
template <bool MMA, int D, bool REG>
static __device__ __forceinline__ void q_load(QOperand<MMA, D, REG> &q, const typename Op<MMA>::T *Qw,
                                              int lane) {
    if constexpr (REG) {
        constexpr int LD = Tile<true, D>::LD;
        __syncwarp();
        const uint16_t *pa = Qw + (lane & 15) * LD + 8 * (lane >> 4);  // as mm_abt's A
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++) ldsm_x4<false>(q.a[kk], pa + 16 * kk);
    } else {
        q.p = Qw;
    }
}

// mm_abt with the forward's Q operand: the same products, A's fragments from the registers.
template <bool MMA, int D, int NNB, bool REG>
static __device__ __forceinline__ void mm_abt(float (&c)[NNB][4], const QOperand<MMA, D, REG> &q,
                                              const typename Op<MMA>::T *Bt, int lane) {
    if constexpr (REG) {
        mm_abt_mma<D, NNB>(
            c, [&](int kk, uint32_t (&a)[4]) {
#pragma unroll
                for (int i = 0; i < 4; i++) a[i] = q.a[kk][i];
            }, Bt, lane);
    } else {
        mm_abt<MMA, D, NNB>(c, q.p, Bt, lane);
    }
}

// The SIMT products' inner step: t (rows lo, hi x columns v.x, v.y) += (lo, hi) (v.x, v.y), each an
// FMA, then add_4 adds the four sums to a C fragment (the emulation's order).
static __device__ __forceinline__ void fma_2x2(float (&t)[4], float lo, float hi, float2 v) {
    t[0] = fmaf(lo, v.x, t[0]);
    t[1] = fmaf(lo, v.y, t[1]);
    t[2] = fmaf(hi, v.x, t[2]);
    t[3] = fmaf(hi, v.y, t[3]);
}
static __device__ __forceinline__ void add_4(float (&acc)[4], const float (&t)[4]) {
#pragma unroll
    for (int e = 0; e < 4; e++) acc[e] += t[e];
}

/* The SIMT k-step of 16 keys: acc (16, 8 NNB) += P B with the lane's rows' 16 weights at plo
   (row g) and phi (row g + 8), B's 16 rows at Bs (stride LD, NNB n8 blocks from there): per n8
   block the products summed key by key in order from 0 by FMAs, that partial then added to acc
   (the emulation's acc_product). */
template <int D, int NNB>
static __device__ __forceinline__ void pv16_simt(float (&acc)[NNB][4], const float *plo, const float *phi,
                                                 const float *Bs, int lane) {
    constexpr int LD = Tile<false, D>::LD;
    const float *b = Bs + 2 * (lane & 3);
#pragma unroll
    for (int nb = 0; nb < NNB; nb++) {
        float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int j4 = 0; j4 < 16; j4 += 4) {
            float4 x = *reinterpret_cast<const float4 *>(plo + j4),
                   y = *reinterpret_cast<const float4 *>(phi + j4);
            const float xs[4] = {x.x, x.y, x.z, x.w}, ys[4] = {y.x, y.y, y.z, y.w};
#pragma unroll
            for (int e = 0; e < 4; e++)
                fma_2x2(t, xs[e], ys[e], *reinterpret_cast<const float2 *>(b + (j4 + e) * LD + 8 * nb));
        }
        add_4(acc[nb], t);
    }
}

/* One k-step of a product over keys or rows, acc[0..NNB) (16, 8 NNB) += A B: A the k-step's fragment,
   B its 16 rows of 8 NNB columns, row-major in shared memory with stride LD, transposed out by
   ldmatrix.trans: matrices (rows 0-7, 8-15) x (n8 blocks nb, nb + 1) give b0, b1 of both blocks;
   lane l's address is row l % 16, col 8 (l / 16) (pb, set by the caller). */
template <int LD, int NNB>
static __device__ __forceinline__ void mma_kstep_bt(float (&acc)[NNB][4], const uint32_t (&a)[4],
                                                    const uint16_t *pb) {
#pragma unroll
    for (int nb = 0; nb < NNB; nb += 2) {
        uint32_t r[4];
        ldsm_x4<true>(r, pb + 8 * nb);
        mma_bf16(acc[nb], a, r[0], r[1]);
        mma_bf16(acc[nb + 1], a, r[2], r[3]);
    }
}

/* acc (16, D) += P B for one chunk of 16 keys (one mma k-step): P the warp's weights of those keys
   as two C fragments (p0: keys 0..7 of the chunk, p1: keys 8..15), Bs the chunk's 16 rows (16, D)
   of the right operand in shared memory. MMA: P rounded to bf16 becomes the A fragment directly
   (the C layout of keys 16kk..16kk+15 is the A layout of one k-step), B by ldmatrix.trans.
   SIMT: P goes through the
   warp's scratch Pw (16 rows x PW_LD floats) so that each lane can read its rows' 16 weights; per
   n8 block the 16 products are summed key by key in order from 0 by FMAs and that k-step partial
   is added to acc (the emulation's acc_product: it rounds into acc n / 16 times, not n). */
template <bool MMA, int D>
static __device__ __forceinline__ void mm_pv16(float (&acc)[D / 8][4], const float (&p0)[4],
                                               const float (&p1)[4], const typename Op<MMA>::T *Bs, float *Pw,
                                               int lane) {
    constexpr int LD = Tile<MMA, D>::LD;
    const int g = lane >> 2, tq = lane & 3;
    if constexpr (MMA) {
        __syncwarp();
        uint32_t a[4] = {pack_bf16(p0[0], p0[1]), pack_bf16(p0[2], p0[3]), pack_bf16(p1[0], p1[1]),
                         pack_bf16(p1[2], p1[3])};
        mma_kstep_bt<LD, D / 8>(acc, a, Bs + (lane & 15) * LD + 8 * (lane >> 4));  // B[k][n] = Bs[k][8 nb + n]
    } else {
        __syncwarp();  // the previous chunk's readers of Pw are done
        *reinterpret_cast<float2 *>(Pw + g * PW_LD + 2 * tq) = make_float2(p0[0], p0[1]);
        *reinterpret_cast<float2 *>(Pw + (g + 8) * PW_LD + 2 * tq) = make_float2(p0[2], p0[3]);
        *reinterpret_cast<float2 *>(Pw + g * PW_LD + 8 + 2 * tq) = make_float2(p1[0], p1[1]);
        *reinterpret_cast<float2 *>(Pw + (g + 8) * PW_LD + 8 + 2 * tq) = make_float2(p1[2], p1[3]);
        __syncwarp();
        pv16_simt<D, D / 8>(acc, Pw + g * PW_LD, Pw + (g + 8) * PW_LD, Bs, lane);
    }
}

/* acc (16, 8 NNB) = P B over the 64 keys of a staged (64, 64) matrix Ps[r][j], for the warp's
   rows row0..row0+15, B = Bs (64, D) from column 8 NB0 on: the dK/dV kernel's dQ part of one
   query tile (dS K), in NNB-block pieces where the whole would not fit in the registers beside
   dK and dV. A fresh sum: the k-steps of 16 keys added in order from 0, each as mm_pv16 adds it
   (the same bits as mm_pv16 on the C fragments staged here). MMA: A by ldmatrix, B by
   ldmatrix.trans. */
template <bool MMA, int D, int NB0, int NNB>
static __device__ __forceinline__ void mm_pb(float (&acc)[NNB][4], const typename Op<MMA>::T *Ps, int row0,
                                             const typename Op<MMA>::T *Bs, int lane) {
    constexpr int LD = Tile<MMA, D>::LD, LDP = Tile<MMA, D>::LDP;
    static_assert(NNB % 2 == 0 && NB0 + NNB <= D / 8, "pairs of n8 blocks within D");
    const int g = lane >> 2;
#pragma unroll
    for (int nb = 0; nb < NNB; nb++)
#pragma unroll
        for (int e = 0; e < 4; e++) acc[nb][e] = 0.0f;
    if constexpr (MMA) {
        __syncwarp();
        // A as in mm_abt (rows row0 + l % 16, col 8 (l / 16)); B as in mm_pv16
        const uint16_t *pa = Ps + (row0 + (lane & 15)) * LDP + 8 * (lane >> 4);
        const uint16_t *pb = Bs + (lane & 15) * LD + 8 * (lane >> 4) + 8 * NB0;
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            uint32_t a[4];
            ldsm_x4<false>(a, pa + 16 * kk);
            mma_kstep_bt<LD, NNB>(acc, a, pb + 16 * kk * LD);
        }
    } else {
#pragma unroll 1
        for (int kk = 0; kk < 4; kk++)
            pv16_simt<D, NNB>(acc, Ps + (row0 + g) * LDP + 16 * kk, Ps + (row0 + g + 8) * LDP + 16 * kk,
                              Bs + 16 * kk * LD + 8 * NB0, lane);
    }
}

/* acc (16, D) += P^T B over the 64 rows r of a staged (64, 64) matrix Ps[r][j] (r: query rows,
   j: keys) for the warp's 16 keys m0..m0+15, B = Bs (64, D): the dK / dV products of a key-tile
   CTA. MMA: A[m][k] = Ps[k][m0 + m] and B by ldmatrix.trans. SIMT: per k-step of 16 rows, the
   products summed in r order from 0 by FMAs, then added to acc (the emulation's acc_product_t). */
template <bool MMA, int D>
static __device__ __forceinline__ void mm_ptb(float (&acc)[D / 8][4], const typename Op<MMA>::T *Ps, int m0,
                                              const typename Op<MMA>::T *Bs, int lane) {
    constexpr int LD = Tile<MMA, D>::LD, LDP = Tile<MMA, D>::LDP;
    const int g = lane >> 2, tq = lane & 3;
    if constexpr (MMA) {
        __syncwarp();
        // A[m][k] = Ps[16 kk + k][m0 + m], transposed: matrices (cols m0.., m0 + 8..) x (rows 0-7,
        // 8-15) give a0..a3; lane l: row l % 8 + 8 (l / 16), col m0 + 8 ((l / 8) % 2). B as in mm_pv16.
        const uint16_t *pa = Ps + ((lane & 7) + 8 * (lane >> 4)) * LDP + m0 + 8 * ((lane >> 3) & 1);
        const uint16_t *pb = Bs + (lane & 15) * LD + 8 * (lane >> 4);
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            uint32_t a[4];
            ldsm_x4<true>(a, pa + 16 * kk * LDP);
            mma_kstep_bt<LD, D / 8>(acc, a, pb + 16 * kk * LD);
        }
    } else {
#pragma unroll 1
        for (int kk = 0; kk < 4; kk++) {
            float alo[16], ahi[16];  // A[g][k], A[g + 8][k] of the k-step
#pragma unroll
            for (int rr = 0; rr < 16; rr++) {
                alo[rr] = Ps[(16 * kk + rr) * LDP + m0 + g];
                ahi[rr] = Ps[(16 * kk + rr) * LDP + m0 + g + 8];
            }
            const float *b = Bs + 16 * kk * LD + 2 * tq;
#pragma unroll
            for (int nb = 0; nb < D / 8; nb++) {
                float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
                for (int rr = 0; rr < 16; rr++)
                    fma_2x2(t, alo[rr], ahi[rr], *reinterpret_cast<const float2 *>(b + rr * LD + 8 * nb));
                add_4(acc[nb], t);
            }
        }
    }
}

// Stage a C fragment pair (the warp's rows 16w + g, + 8; 16 columns 16 kk + ...) into a (64, 64)
// matrix Ps[row][col], rounded to the operand type.
template <bool MMA>
static __device__ __forceinline__ void stage16(typename Op<MMA>::T *Ps, int ldp, int row0, int kk,
                                               const float (&v)[2][4], int lane) {
    const int g = lane >> 2, tq = lane & 3;
#pragma unroll
    for (int cc = 0; cc < 2; cc++) {
        int col = 16 * kk + 8 * cc + 2 * tq;
        if constexpr (MMA) {
            *reinterpret_cast<uint32_t *>(Ps + (row0 + g) * ldp + col) = pack_bf16(v[cc][0], v[cc][1]);
            *reinterpret_cast<uint32_t *>(Ps + (row0 + g + 8) * ldp + col) = pack_bf16(v[cc][2], v[cc][3]);
        } else {
            *reinterpret_cast<float2 *>(Ps + (row0 + g) * ldp + col) = make_float2(v[cc][0], v[cc][1]);
            *reinterpret_cast<float2 *>(Ps + (row0 + g + 8) * ldp + col) = make_float2(v[cc][2], v[cc][3]);
        }
    }
}

// ================================================================ kernel arguments

/* The kernels are templated on the stages, packed in one int ST (flash_st): the score as cos or
   not (dot and ssmax share an instance: their logits differ only in the row constant, fpr: the
   ssmax scale s_h ln n / sqrt D, and ssmax adds the ds terms, which the kernels test at run time),
   phi (exp, softplus, or LSSAR_PHI_SIGMOID standing for sigmoid and relu, whose row constants
   from fpr carry the bias, 1 / L and the relu flag) and the re-weighting. The per-element math gets
   them as compile-time constants (fp: flash.h's branches on them fold). */
#define flash_st(cos, phi, rw) ((cos) * 16 + (phi) * 2 + (rw))
static constexpr __host__ __device__ bool st_cos(int st) { return st / 16 != 0; }
static constexpr __host__ __device__ int st_phi(int st) { return (st % 16) / 2; }
static constexpr __host__ __device__ bool st_rw(int st) { return st % 2 != 0; }
static constexpr __host__ __device__ bool st_unnormed(int st) { return st_phi(st) == LSSAR_PHI_SIGMOID; }
// flash.h's flash_online / flash_centred / flash_needs_norms of the instance
static constexpr __host__ __device__ bool st_online(int st) {
    return !st_unnormed(st) && !st_rw(st) && (st_phi(st) == LSSAR_PHI_EXP || !st_cos(st));
}
static constexpr __host__ __device__ bool st_centred(int st) { return st_online(st) || st_rw(st); }
static constexpr __host__ __device__ bool st_norms(int st) { return st_cos(st) || st_rw(st); }
// the forward holds Q in registers (QOperand)
template <int ST, int D, bool MMA>
constexpr bool QREG = MMA && (D <= 32 || (D == 64 && !st_rw(ST)));

/* The causal mask only where it can hide a key: a FULL tile (every key visible to every row the
   CTA owns) runs the tile step instantiated with FULL = true, which has no test of the key's
   position at all; only the diagonal tile (and the forward's second partial tile when Tq != Tk)
   runs the masked one. Rows past the end of the tensor (valid = false) need no mask in a full tile
   where each row's values stay in that row's accumulators and are never stored (forward, dQ, the
   row sums); dK / dV sum over the rows, so there a query tile with such rows is masked. (The forward
   and dK / dV at D = 128 keep the masked step on every tile: Tile::SPLIT.) The masked
   step is called outside the loop of full tiles (after it, or before it in dK / dV), so the loop
   holds only the unmasked code. Full<F>() passes the choice to the tile lambdas as a type. */
template <bool F> struct Full { static constexpr bool value = F; };
// key j visible to row i (valid: i is a row of the tensor); always in a FULL tile
template <bool FULL>
static __device__ __forceinline__ bool visible(bool valid, int j, int i) { return FULL || (valid && j <= i); }

template <int ST>
static __device__ __forceinline__ void kind_params(const flash_params &in, flash_params &fp,
                                                   flash_params &fpr) {
    fp = in;
    fp.score = st_cos(ST) ? LSSAR_SCORE_COS : LSSAR_SCORE_DOT;
    fp.phi = st_phi(ST);
    fp.norm = st_unnormed(ST) ? LSSAR_NORM_LEN : LSSAR_NORM_L1;
    fp.rw = st_rw(ST);
    fpr = in;
}

typedef struct {
    flash_params fp;
    const void *q, *k, *v;   // q (B, Tq, H, D); k, v (B, kvs, H, D): storage io_bf16
    void *out;               // (B, Tq, H, D)
    float *stats;            // flash.h layout, or NULL (nothing saved)
    const float *rq, *rk;    // (B, H, Tq), (B, H, Tk): score cos, re-weighting
    const float *ssmax_s;    // (H): ssmax
    int B, Tq, Tk, kvs, H, q0;  // q0 = Tk - Tq: the position of query row 0
    int io_bf16;
} fwd_args;

typedef struct {
    flash_params fp;
    const void *q, *k, *v, *out, *dout;  // (B, T, H, D): storage io_bf16
    void *dq, *dk, *dv;                  // (B, T, H, D)
    const float *stats;                  // the forward's
    float *bstat;                        // (B, H, T, FLASH_NBSTAT): the row pre-pass
    float *rowds;                        // (B, H, T): ssmax row terms
    float *dqacc;                        // (B, T, H, D) fp32: dQ summed over the key tiles
    int *sem;                            // (B H, query tiles): key tiles added so far
    const float *rq, *rk;                // (B, H, T) each
    const float *ssmax_s;                // (H)
    float *dscale;                       // (H) ssmax: ds written or added
    int B, T, H, io_bf16, mma, accumulate;
} bwd_args;

// ================================================================ pre-pass: inverse norms

// out (B, H, n) = 1 / max(|x_row|, 1e-12) for the rows 0..n-1 of every sequence of x (rows of
// H * D, sequences `stride` rows apart). One thread per row, threads in memory order (b, t, h)
// so that a warp reads consecutive rows; the sum of squares runs over d in order, in fp32, from
// the unrounded inputs (the emulation's inv_norms).
__global__ void norms_kernel(const void *x, float *out, int B, int n, int stride, int H, int D, int io_bf16) {
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (int64_t)B * n * H) return;
    int h = (int)(idx % H), t = (int)((idx / H) % n), b = (int)(idx / ((int64_t)H * n));
    int64_t off = (((int64_t)b * stride + t) * H + h) * D;
    float ss = 0.0f;
    for (int d = 0; d < D; d += 8) {
        float f[8];
        load8(x, off + d, io_bf16, f);
#pragma unroll
        for (int e = 0; e < 8; e++) ss = fmaf(f[e], f[e], ss);
    }
    out[((int64_t)b * H + h) * n + t] = flash_inv_norm(ss);
}

// ================================================================ forward

// The forward's per-CTA constants, and this lane's two rows (u = 0 -> tile row 16 warp + g,
// u = 1 -> + 8) with their running statistics. The steps below take them by reference; they are
// inlined, so everything stays in registers as in one function.
struct FwdCta {
    int H, b, h, r0, bq, i0, nkt, HD, warp, lane, g, tq;
    int nfull;  // key tiles 0..nfull-1 are full (every key visible to every row)
    int64_t kv_base;  // element of k[b][0][h][0]
    int64_t rk_base;
};
struct FwdRows {
    bool valid[2];
    int ipos[2];
    flash_row rw[2];
    float m[2];     // online (and exp pass 1): running max
    int jm[2];      // online: running argmax (-1: none yet); re-weighting: pass-1 argmax
    float xmax[2];
    float l[2];     // per-lane row sums: l' / Z / W'
    float l2[2];    // re-weighting S'
};

/* Re-weighting pass 1: Z, xmax (first argmax), xmin and (dot / ssmax) min rk per lane, then the
   quad; the row constants. One key tile per call (FULL: no mask test), into the lane's running
   values p. */
struct Pass1 {
    float z[2], xn[2], rkm[2];  // Z (running, rescaled for phi exp), min x, min rk
    int lj[2];                  // the first argmax (-1: none yet)
};
template <int ST, int D, bool MMA, bool FULL, typename QW>
static __device__ __forceinline__ void fwd_rw_pass1_tile(const flash_params &fp, const FwdCta &c, FwdRows &r,
                                                         Pass1 &p, const QW &Qw,
                                                         const typename Op<MMA>::T *Ks, const float *rks,
                                                         int j0) {
    constexpr int LD = Tile<MMA, D>::LD;
    constexpr bool PEXP = st_phi(ST) == LSSAR_PHI_EXP;
    const int lane = c.lane, tq = c.tq;
    if constexpr (PEXP) {
        // the whole 16 x 64 tile first: its max decides the rescaling of Z (the online
        // softmax, without the centring)
        float s[8][4];
        mm_abt<MMA, D, 8>(s, Qw, Ks, lane);
#pragma unroll
        for (int u = 0; u < 2; u++) {
            float lm = -INFINITY;
            int ljt = -1;
#pragma unroll
            for (int t = 0; t < 16; t++) {
                int c8 = t >> 1, e = t & 1, j = 8 * c8 + 2 * tq + e;
                bool vis = visible<FULL>(r.valid[u], j0 + j, r.ipos[u]);
                float x = vis ? flash_logit(&fp, &r.rw[u], s[c8][2 * u + e], rks[j]) : -INFINITY;
                s[c8][2 * u + e] = x;
                if (x > lm) { lm = x; ljt = j; }
                if (vis) {
                    p.xn[u] = x < p.xn[u] ? x : p.xn[u];
                    p.rkm[u] = rks[j] < p.rkm[u] ? rks[j] : p.rkm[u];
                }
            }
            float tm = ljt >= 0 ? lm : -INFINITY;
            int tj = ljt >= 0 ? ljt : INT_MAX;
            quad_argmax(tm, tj);
            if (tm > r.m[u]) {  // uniform over the quad
                p.z[u] *= flash_online_alpha(r.m[u], tm);
                r.m[u] = tm;
            }
            if (tm > r.xmax[u]) { r.xmax[u] = tm; p.lj[u] = j0 + tj; }  // later tiles: larger j
            float zp = 0.0f;  // the lane's tile partial (masked entries: a = 0)
#pragma unroll
            for (int t = 0; t < 16; t++) {
                float x = s[t >> 1][2 * u + (t & 1)];
                zp += x == -INFINITY ? 0.0f : flash_softmax_p(x, r.m[u]);
            }
            p.z[u] += zp;
        }
    } else {
        float zp[2] = {0.0f, 0.0f};  // the lane's tile partials of Z (masked entries: a = 0)
#pragma unroll 1
        for (int kk = 0; kk < 4; kk++) {  // chunks of 16 keys (kept rolled: compile time)
            float s[2][4];
            mm_abt<MMA, D, 2>(s, Qw, Ks + 16 * kk * LD, lane);
#pragma unroll
            for (int u = 0; u < 2; u++)
#pragma unroll
                for (int t = 0; t < 4; t++) {  // the lane's columns of this chunk, in t order
                    int cc = t >> 1, e = t & 1, j = 16 * kk + 8 * cc + 2 * tq + e;
                    if (visible<FULL>(r.valid[u], j0 + j, r.ipos[u])) {
                        float x = flash_logit(&fp, &r.rw[u], s[cc][2 * u + e], rks[j]);
                        // max / first argmax / min run across tiles: they do not depend on the order
                        flash_lssar_pass1_a(x, flash_lssa_a(x), j0 + j, &zp[u], &r.xmax[u], &p.lj[u],
                                            &p.xn[u]);
                        p.rkm[u] = rks[j] < p.rkm[u] ? rks[j] : p.rkm[u];
                    }
                }
        }
        p.z[0] += zp[0];
        p.z[1] += zp[1];
    }
}

template <int ST, int D, bool MMA, typename QW>
static __device__ __forceinline__ void fwd_rw_pass1(const fwd_args &a, const flash_params &fp,
                                                    const FwdCta &c, FwdRows &r,
                                                    const QW &Qw, typename Op<MMA>::T *Ks,
                                                    float *rks) {
    Pass1 p;
#pragma unroll
    for (int u = 0; u < 2; u++) {
        p.z[u] = 0.0f;
        p.xn[u] = p.rkm[u] = INFINITY;
        p.lj[u] = -1;
    }
    // bf16 storage into bf16 tiles: key tile kt + 1 copied by cp.async into the K slot of the other
    // (K, V) buffer while tile kt is computed on (the key tiles run 0, 1, ..., nkt - 1)
    constexpr int LD = Tile<MMA, D>::LD, NBUF = Tile<MMA, D>::NBUF;
    const bool async = NBUF == 2 && a.io_bf16;
    auto copy_k = [&](int kt) {
        if constexpr (NBUF == 2) {
            load_tile_async<D>(Ks + (kt & 1) * 2 * 64 * LD, a.k, c.kv_base + (int64_t)kt * 64 * c.HD, c.HD,
                               min(64, a.Tk - kt * 64));
            cp_async_commit();
        }
    };
    if (async) copy_k(0);
    auto tile = [&](int kt, auto full) {
        const int j0 = kt * 64, nk = min(64, a.Tk - j0);
        typename Op<MMA>::T *const Kt = Ks + (async ? kt & 1 : 0) * 2 * 64 * LD;
        __syncthreads();  // the previous tile's readers (of the buffer the next copy goes to) are done
        if (async) {
            if (kt + 1 < c.nkt) copy_k(kt + 1);
            if (kt + 1 < c.nkt) cp_async_wait<1>();
            else cp_async_wait<0>();
        } else {
            load_tile<MMA, D>(Kt, a.k, c.kv_base + (int64_t)j0 * c.HD, c.HD, nk, a.io_bf16);
        }
        load_rk(rks, a.rk, c.rk_base + j0, nk, true);
        __syncthreads();
        fwd_rw_pass1_tile<ST, D, MMA, decltype(full)::value>(fp, c, r, p, Qw, Kt, rks, j0);
    };
    if constexpr (Tile<MMA, D>::SPLIT) {
        for (int kt = 0; kt < c.nfull; kt++) tile(kt, Full<true>());
        if (c.nfull < c.nkt) tile(c.nfull, Full<false>());  // the diagonal: at most two tiles
        if (c.nfull + 1 < c.nkt) tile(c.nfull + 1, Full<false>());
    } else {
        for (int kt = 0; kt < c.nkt; kt++) tile(kt, Full<false>());
    }
#pragma unroll
    for (int u = 0; u < 2; u++) {
        float zz = quad_sum(p.z[u]), mn = quad_min(p.xn[u]), rkmin = quad_min(p.rkm[u]);
        float mx = p.lj[u] >= 0 ? r.xmax[u] : -INFINITY;
        int j = p.lj[u] >= 0 ? p.lj[u] : INT_MAX;
        quad_argmax(mx, j);
        flash_lssar_row_finish(&fp, &r.rw[u], zz, mx, mn, j, rkmin);
        r.xmax[u] = mx;
        r.jm[u] = j;
    }
}

/* The main pass's copy of key tile kt into its buffer. bf16 storage into bf16 tiles (async): K, V
   of tile kt + 1 copied by cp.async into the other buffer while tile kt is computed on. */
template <int ST, int D, bool MMA>
static __device__ __forceinline__ void fwd_load_kv(const fwd_args &a, const FwdCta &c, int kt, bool async,
                                                   typename Op<MMA>::T *K0, typename Op<MMA>::T *V0,
                                                   typename Op<MMA>::T *Ks, typename Op<MMA>::T *Vs,
                                                   float *rks) {
    constexpr int LD = Tile<MMA, D>::LD, NBUF = Tile<MMA, D>::NBUF;
    const int j0 = kt * 64, nk = min(64, a.Tk - j0), HD = c.HD;
    if constexpr (NBUF == 2) {
        if (async) {
            for (int t = kt == 0 ? 0 : kt + 1; t <= kt + 1 && t < c.nkt; t++) {  // kt = 0: tiles 0 and 1
                const int64_t o = c.kv_base + (int64_t)t * 64 * HD;
                const int b2 = (t & 1) * 2 * 64 * LD, n2 = min(64, a.Tk - t * 64);
                load_tile_async<D>(K0 + b2, a.k, o, HD, n2);
                load_tile_async<D>(V0 + b2, a.v, o, HD, n2);
                cp_async_commit();
            }
            if (kt + 1 < c.nkt) cp_async_wait<1>();  // tile kt's group done, tile kt + 1's may run on
            else cp_async_wait<0>();
        }
    }
    if (!async) {
        load_tile<MMA, D>(Ks, a.k, c.kv_base + (int64_t)j0 * HD, HD, nk, a.io_bf16);
        load_tile<MMA, D>(Vs, a.v, c.kv_base + (int64_t)j0 * HD, HD, nk, a.io_bf16);
    }
    load_rk(rks, a.rk, c.rk_base + j0, nk, st_norms(ST));
}

/* The main pass over key tile j0 of an online kind (softmax, ssmax; softplus with the online max):
   the whole 16 x 64 tile first, its max decides the rescaling before any weight. FULL: no mask. */
template <int ST, int D, bool MMA, bool FULL, typename QW>
static __device__ __forceinline__ void fwd_online_tile(const fwd_args &a, const flash_params &fp,
                                                       const FwdCta &c, FwdRows &r, float (&acc)[D / 8][4],
                                                       const QW &Qw,
                                                       const typename Op<MMA>::T *Ks,
                                                       const typename Op<MMA>::T *Vs, const float *rks,
                                                       float *Pw, int j0) {
    constexpr int LD = Tile<MMA, D>::LD;
    constexpr bool PEXP = st_phi(ST) == LSSAR_PHI_EXP;
    const int lane = c.lane, tq = c.tq;
    float s[8][4];
    mm_abt<MMA, D, 8>(s, Qw, Ks, lane);
#pragma unroll
    for (int u = 0; u < 2; u++) {
        // logits (-inf where not visible) and the lane's max / first argmax in t order
        float lm = -INFINITY;
        int lj = -1;
#pragma unroll
        for (int t = 0; t < 16; t++) {
            int c8 = t >> 1, e = t & 1, j = 8 * c8 + 2 * tq + e;
            float x = visible<FULL>(r.valid[u], j0 + j, r.ipos[u])
                          ? flash_logit(&fp, &r.rw[u], s[c8][2 * u + e], rks[j])
                          : -INFINITY;
            s[c8][2 * u + e] = x;
            if (x > lm) { lm = x; lj = j; }
        }
        float tm = lj >= 0 ? lm : -INFINITY;
        int tj = lj >= 0 ? lj : INT_MAX;
        quad_argmax(tm, tj);
        if (tm > r.m[u] && !PEXP) {
            // softplus: the old argmax rejoins with its weight softplus(m_old); no rescale
            if (r.jm[u] >= 0) {
                float aj = flash_lssa_a(r.m[u]);
                if (tq == flash_col_lane(r.jm[u] & 63)) r.l[u] += aj;
                const int64_t vo = c.kv_base + (int64_t)r.jm[u] * c.HD + 2 * tq;
#pragma unroll
                for (int nb = 0; nb < D / 8; nb++) {
                    float2 vj = load2(a.v, vo + 8 * nb, a.io_bf16, MMA);
                    acc[nb][2 * u] += aj * vj.x;
                    acc[nb][2 * u + 1] += aj * vj.y;
                }
            }
            r.m[u] = tm;
            r.jm[u] = j0 + tj;
        } else if (tm > r.m[u]) {  // uniform over the quad (its four lanes hold the same tm, m)
            // new max: the old argmax rejoins the sums with weight exp(x_jm - m_old) = 1,
            // then everything is rescaled to the new max
            float al = flash_online_alpha(r.m[u], tm);
            if (r.jm[u] >= 0) {
                if (tq == flash_col_lane(r.jm[u] & 63)) r.l[u] += 1.0f;
                const int64_t vo = c.kv_base + (int64_t)r.jm[u] * c.HD + 2 * tq;
#pragma unroll
                for (int nb = 0; nb < D / 8; nb++) {
                    float2 vj = load2(a.v, vo + 8 * nb, a.io_bf16, MMA);
                    acc[nb][2 * u] = (acc[nb][2 * u] + vj.x) * al;
                    acc[nb][2 * u + 1] = (acc[nb][2 * u + 1] + vj.y) * al;
                }
            } else {
#pragma unroll
                for (int nb = 0; nb < D / 8; nb++) {
                    acc[nb][2 * u] *= al;
                    acc[nb][2 * u + 1] *= al;
                }
            }
            r.l[u] *= al;
            r.m[u] = tm;
            r.jm[u] = j0 + tj;
        }
        // the weights; the argmax stays out of l' and acc'. l' += the lane's tile partial.
        float lp = 0.0f;
#pragma unroll
        for (int t = 0; t < 16; t++) {
            int c8 = t >> 1, e = t & 1, j = 8 * c8 + 2 * tq + e;
            float x = s[c8][2 * u + e];
            float p = x == -INFINITY ? 0.0f : PEXP ? flash_softmax_p(x, r.m[u]) : flash_lssa_a(x);
            p = j0 + j == r.jm[u] ? 0.0f : p;
            s[c8][2 * u + e] = p;
            lp += p;
        }
        r.l[u] += lp;
    }
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
        mm_pv16<MMA, D>(acc, s[2 * kk], s[2 * kk + 1], Vs + 16 * kk * LD, Pw, lane);
}

/* The main pass over key tile j0 of lssa, re-weighting pass 2, sigmoid / relu: no tile-wide
   statistic, so chunks of 16 keys (fewer live registers). FULL: no mask. */
template <int ST, int D, bool MMA, bool FULL, typename QW>
static __device__ __forceinline__ void fwd_chunk_tile(const flash_params &fp, const FwdCta &c, FwdRows &r,
                                                      float (&acc)[D / 8][4],
                                                      float (&acc2)[st_rw(ST) ? D / 8 : 1][4],
                                                      const QW &Qw,
                                                      const typename Op<MMA>::T *Ks,
                                                      const typename Op<MMA>::T *Vs, const float *rks,
                                                      float *Pw, int j0) {
    constexpr int LD = Tile<MMA, D>::LD;
    constexpr bool RW = st_rw(ST), UNNORMED = st_unnormed(ST);
    const int lane = c.lane, tq = c.tq;
    float lp[2] = {0.0f, 0.0f}, lp2[2] = {0.0f, 0.0f};  // the lane's tile partials
#pragma unroll 1
    for (int kk = 0; kk < 4; kk++) {
        float s[2][4], gg[2][4];
        mm_abt<MMA, D, 2>(s, Qw, Ks + 16 * kk * LD, lane);
#pragma unroll
        for (int u = 0; u < 2; u++)
#pragma unroll
            for (int t = 0; t < 4; t++) {
                int cc = t >> 1, e = t & 1, j = 16 * kk + 8 * cc + 2 * tq + e;
                float x = visible<FULL>(r.valid[u], j0 + j, r.ipos[u])
                              ? flash_logit(&fp, &r.rw[u], s[cc][2 * u + e], rks[j])
                              : -INFINITY;
                if constexpr (!RW && !UNNORMED) {  // lssa
                    float p = x == -INFINITY ? 0.0f : flash_lssa_a(x);
                    s[cc][2 * u + e] = p;
                    lp[u] += p;
                } else if constexpr (UNNORMED) {
                    s[cc][2 * u + e] = flash_unnormed_a(&r.rw[u], x);  // 0 at x = -inf; no row sum
                } else {
                    // masked: w = g = 0 (what flash_lssar_weight gives at x = -inf on a valid
                    // row; rows past the end would give NaN there); jm stays out of the sums
                    float w = 0.0f, gv = 0.0f;
                    if (x != -INFINITY) w = flash_lssar_weight(&fp, &r.rw[u], x, 0, &gv);
                    if (j0 + j == r.jm[u]) w = gv = 0.0f;
                    s[cc][2 * u + e] = w;
                    gg[cc][2 * u + e] = gv;
                    lp[u] += w;    // W'
                    lp2[u] += gv;  // S'
                }
            }
        mm_pv16<MMA, D>(acc, s[0], s[1], Vs + 16 * kk * LD, Pw, lane);  // acc' += P' V
        if constexpr (RW) mm_pv16<MMA, D>(acc2, gg[0], gg[1], Vs + 16 * kk * LD, Pw, lane);  // E' += G' V
    }
#pragma unroll
    for (int u = 0; u < 2; u++) {
        r.l[u] += lp[u];
        r.l2[u] += lp2[u];
    }
}

/* Finish the rows: y, the centred rows, the statistics. */
template <int ST, int D, bool MMA>
static __device__ __forceinline__ void fwd_finish(const fwd_args &a, const flash_params &fp, const FwdCta &c,
                                                  FwdRows &r, float (&acc)[D / 8][4],
                                                  float (&acc2)[st_rw(ST) ? D / 8 : 1][4]) {
    constexpr bool ONLINE = st_online(ST), RW = st_rw(ST);
    constexpr bool PEXP = st_phi(ST) == LSSAR_PHI_EXP, UNNORMED = st_unnormed(ST);
    const int H = c.H, HD = c.HD, tq = c.tq;
    float *yc_all = a.stats && st_centred(ST) ? a.stats + flash_stats_yc(a.B, a.Tq, H) : NULL;
    float *ec_all = a.stats && RW ? a.stats + flash_stats_ec(a.B, a.Tq, H, D) : NULL;
#pragma unroll
    for (int u = 0; u < 2; u++) {
        const int row = 16 * c.warp + c.g + 8 * u;
        // + 8 nb + {0, 1}
        const int64_t orow = ((int64_t)c.b * a.Tq + c.r0 + row) * HD + (int64_t)c.h * D + 2 * tq;
        float q1 = quad_sum(r.l[u]), q2 = quad_sum(r.l2[u]);  // every lane: shuffles
        if (!r.valid[u]) continue;
        float st0 = 0.0f, wsum = 0.0f, ssum = 0.0f;
        const bool lost = st_centred(ST) && flash_row_lost(r.jm[u], r.ipos[u]);
        if (lost) r.jm[u] = r.rw[u].jm = 0;  // every logit NaN or -inf: v_0 (in range), a NaN row
        if constexpr (ONLINE) {
            // the argmax's weight: exp: exp(m - m) = 1, so Z = 1 + l', LSE = m + ln Z; softplus:
            // softplus(m), Z = softplus(m) + l' (saved as it is)
            float ajm = PEXP ? 1.0f : flash_lssa_a(r.m[u]), zz = ajm + q1,
                  inv = lost ? flash_nan() : 1.0f / zz;
            const int64_t vo = c.kv_base + (int64_t)r.jm[u] * HD + 2 * tq;
#pragma unroll
            for (int nb = 0; nb < D / 8; nb++) {
                float2 vj = load2(a.v, vo + 8 * nb, a.io_bf16, MMA);
                float y0 = (acc[nb][2 * u] + ajm * vj.x) * inv, y1 = (acc[nb][2 * u + 1] + ajm * vj.y) * inv;
                store2(a.out, orow + 8 * nb, a.io_bf16, y0, y1);
                if (yc_all)
                    *reinterpret_cast<float2 *>(yc_all + orow + 8 * nb) = make_float2(
                        (acc[nb][2 * u] - q1 * vj.x) * inv, (acc[nb][2 * u + 1] - q1 * vj.y) * inv);
            }
            st0 = lost ? flash_nan() : PEXP ? r.m[u] + fm_log(zz) : zz;
            r.rw[u].jm = r.jm[u];
        } else if constexpr (!RW && !UNNORMED) {  // lssa
            float inv = 1.0f / q1;
#pragma unroll
            for (int nb = 0; nb < D / 8; nb++)
                store2(a.out, orow + 8 * nb, a.io_bf16, acc[nb][2 * u] * inv, acc[nb][2 * u + 1] * inv);
            st0 = q1;
        } else if constexpr (UNNORMED) {
#pragma unroll
            for (int nb = 0; nb < D / 8; nb++)  // y = sum_j a_j v_j: no normalisation
                store2(a.out, orow + 8 * nb, a.io_bf16, acc[nb][2 * u], acc[nb][2 * u + 1]);
        } else {
            float wjm = flash_lssar_wjm(&fp, &r.rw[u], r.xmax[u]);
            float W = q1 + wjm, inv = lost ? flash_nan() : 1.0f / W;
            const int64_t vo = c.kv_base + (int64_t)r.jm[u] * HD + 2 * tq;
#pragma unroll
            for (int nb = 0; nb < D / 8; nb++) {
                float2 vj = load2(a.v, vo + 8 * nb, a.io_bf16, MMA);
                float y0 = (acc[nb][2 * u] + wjm * vj.x) * inv, y1 = (acc[nb][2 * u + 1] + wjm * vj.y) * inv;
                store2(a.out, orow + 8 * nb, a.io_bf16, y0, y1);
                if (yc_all) {
                    *reinterpret_cast<float2 *>(yc_all + orow + 8 * nb) = make_float2(
                        (acc[nb][2 * u] - q1 * vj.x) * inv, (acc[nb][2 * u + 1] - q1 * vj.y) * inv);
                    *reinterpret_cast<float2 *>(ec_all + orow + 8 * nb) = make_float2(
                        (acc2[nb][2 * u] - q2 * vj.x) * inv, (acc2[nb][2 * u + 1] - q2 * vj.y) * inv);
                }
            }
            st0 = lost ? flash_nan() : r.rw[u].z;
            wsum = W;
            ssum = (q2 + r.rw[u].invm) * inv;
        }
        if (a.stats && tq == 0)
            flash_stats_store(&fp, &r.rw[u], st0, wsum, ssum,
                              a.stats + flash_row_index(c.b, c.h, c.r0 + row, H, a.Tq) * FLASH_NSTAT);
    }
}

/* One CTA: 64 query rows r0.. of (b, h) = (blockIdx.x / H, blockIdx.x % H); query tiles in
   reverse order (blockIdx.y = 0 is the last, longest tile) so the longest CTAs start first.
   The emulation's fwd_cta, line by line: per lane two rows u = 0, 1 (g, g + 8 of the warp). */
template <int ST, int D, bool MMA>
__global__ void __launch_bounds__(NT, 1) fwd_kernel(const fwd_args a) {
    typedef typename Op<MMA>::T T;
    constexpr int LD = Tile<MMA, D>::LD;
    constexpr bool ONLINE = st_online(ST), RW = st_rw(ST), NORMS = st_norms(ST), SPLIT = Tile<MMA, D>::SPLIT;
    FLASH_DYNAMIC_SHARED(smem);
    constexpr int NBUF = Tile<MMA, D>::NBUF;
    // Q, then NBUF (K, V) pairs, (64, LD) each; the keys' 1/|k| (NBUF, 64); SIMT: Pw
    T *Qs = reinterpret_cast<T *>(smem), *Ks = Qs + 64 * LD, *Vs = Ks + 64 * LD;  // buffer 0
    float *rks = reinterpret_cast<float *>(Qs + (1 + 2 * NBUF) * 64 * LD);
    float *Pw = rks + NBUF * 64 + (threadIdx.x >> 5) * 16 * PW_LD;              // SIMT: (16, PW_LD)

    flash_params fp, fpr;
    kind_params<ST>(a.fp, fp, fpr);
    const bool ssmax = a.fp.score == LSSAR_SCORE_SSMAX;
    FwdCta c;
    c.H = a.H;
    c.b = blockIdx.x / c.H;
    c.h = blockIdx.x % c.H;
    const int qt = (int)gridDim.y - 1 - (int)blockIdx.y;
    c.r0 = qt * 64;
    c.bq = min(64, a.Tq - c.r0);
    c.i0 = a.q0 + c.r0;
    c.nkt = (c.i0 + c.bq - 1) / 64 + 1;  // key tiles 0..nkt-1; those above the diagonal are skipped
    c.nfull = (c.i0 + 1) / 64;           // j0 + 63 <= i0: nkt - nfull is 1 or 2 (Tq != Tk)
    c.HD = c.H * D;
    c.warp = threadIdx.x >> 5;
    c.lane = threadIdx.x & 31;
    c.g = c.lane >> 2;
    c.tq = c.lane & 3;
    c.kv_base = (int64_t)c.b * a.kvs * c.HD + (int64_t)c.h * D;
    c.rk_base = ((int64_t)c.b * c.H + c.h) * a.Tk;

    FwdRows r;
    const float s_h = ssmax ? a.ssmax_s[c.h] : 0.0f;
#pragma unroll
    for (int u = 0; u < 2; u++) {
        int row = 16 * c.warp + c.g + 8 * u;
        r.valid[u] = row < c.bq;
        r.ipos[u] = c.i0 + row;
        float rq = NORMS && r.valid[u] ? a.rq[((int64_t)c.b * c.H + c.h) * a.Tq + c.r0 + row] : 1.0f;
        flash_row_init(&fpr, r.ipos[u], s_h, rq, &r.rw[u]);
        r.m[u] = r.xmax[u] = -INFINITY;
        r.jm[u] = -1;
        r.l[u] = r.l2[u] = 0.0f;
    }
    load_tile<MMA, D>(Qs, a.q, ((int64_t)c.b * a.Tq + c.r0) * c.HD + (int64_t)c.h * D, c.HD, c.bq, a.io_bf16);
    QOperand<MMA, D, QREG<ST, D, MMA>> Qw;  // the warp's 16 query rows
    if constexpr (QREG<ST, D, MMA>) __syncthreads();  // the Q tile, before its fragments are read
    q_load(Qw, Qs + 16 * c.warp * LD, c.lane);

    if constexpr (RW) fwd_rw_pass1<ST, D, MMA>(a, fp, c, r, Qw, Ks, rks);

    float acc[D / 8][4], acc2[RW ? D / 8 : 1][4];  // acc' (acc); re-weighting E'
#pragma unroll
    for (int nb = 0; nb < D / 8; nb++)
#pragma unroll
        for (int e = 0; e < 4; e++) acc[nb][e] = 0.0f;
#pragma unroll
    for (int nb = 0; nb < (RW ? D / 8 : 1); nb++)
#pragma unroll
        for (int e = 0; e < 4; e++) acc2[nb][e] = 0.0f;

    // ---- the main pass (lssar: pass 2)
    const bool async = NBUF == 2 && a.io_bf16;
    T *const K0 = Ks, *const V0 = Vs;
    float *const rk0 = rks;
    auto tile = [&](int kt, auto full) {
        constexpr bool FULL = decltype(full)::value;
        const int j0 = kt * 64, buf = async ? kt & 1 : 0;
        Ks = K0 + buf * 2 * 64 * LD;
        Vs = V0 + buf * 2 * 64 * LD;
        rks = rk0 + buf * 64;
        __syncthreads();  // the readers of the buffer the next copy goes to (tile kt - 1's) are done
        fwd_load_kv<ST, D, MMA>(a, c, kt, async, K0, V0, Ks, Vs, rks);
        __syncthreads();  // every thread's copies of tile kt are visible
        if constexpr (ONLINE) fwd_online_tile<ST, D, MMA, FULL>(a, fp, c, r, acc, Qw, Ks, Vs, rks, Pw, j0);
        else fwd_chunk_tile<ST, D, MMA, FULL>(fp, c, r, acc, acc2, Qw, Ks, Vs, rks, Pw, j0);
    };
    if constexpr (SPLIT) {
        for (int kt = 0; kt < c.nfull; kt++) tile(kt, Full<true>());
        if (c.nfull < c.nkt) tile(c.nfull, Full<false>());  // the diagonal: at most two tiles
        if (c.nfull + 1 < c.nkt) tile(c.nfull + 1, Full<false>());
    } else {
        for (int kt = 0; kt < c.nkt; kt++) tile(kt, Full<false>());
    }
    fwd_finish<ST, D, MMA>(a, fp, c, r, acc, acc2);
}

// ================================================================ backward

// 0. The row pre-pass (the emulation's step 0): one thread per row, in memory order (b, i, h).
//    c = dy . v_jm, dy . yc (lssa: dy . y), dy . Ec over d in order, fp32, dy and v_jm rounded
//    to bf16 in MMA mode (the emulation's bf16 copies); then flash_bwd_row.
template <int ST>
__global__ void bwd_rows_kernel(const bwd_args a, int D) {
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int T = a.T, H = a.H;
    if (idx >= (int64_t)a.B * T * H) return;
    const int h = (int)(idx % H), i = (int)((idx / H) % T), b = (int)(idx / ((int64_t)H * T));
    flash_params fp, fpr;
    kind_params<ST>(a.fp, fp, fpr);
    const size_t ri = flash_row_index(b, h, i, H, T);
    const float *st = a.stats + ri * FLASH_NSTAT;
    flash_row rw;
    flash_row_load(&fpr, i, a.fp.score == LSSAR_SCORE_SSMAX ? a.ssmax_s[h] : 0.0f,
                   st_norms(ST) ? a.rq[ri] : 1.0f, st, &rw);
    const int64_t HD = (int64_t)H * D, qr = ((int64_t)b * T + i) * HD + (int64_t)h * D;
    const int64_t vr = ((int64_t)b * T + rw.jm) * HD + (int64_t)h * D;
    const bool rnd = a.mma != 0;
    float dyv = 0.0f, dyy = 0.0f, dye = 0.0f;
    constexpr bool CENTRED = st_centred(ST);  // else lssa: D1 = dy . y
    const float *yc = CENTRED ? a.stats + flash_stats_yc(a.B, T, H) + qr : NULL;
    const float *ec = st_rw(ST) ? a.stats + flash_stats_ec(a.B, T, H, D) + qr : NULL;
    for (int d = 0; d < D; d += 2) {
        float2 dy = load2(a.dout, qr + d, a.io_bf16, rnd), vj = load2(a.v, vr + d, a.io_bf16, rnd);
        float2 y =
            !CENTRED ? load2(a.out, qr + d, a.io_bf16, false) : *reinterpret_cast<const float2 *>(yc + d);
        dyv = fmaf(dy.x, vj.x, dyv); dyy = fmaf(dy.x, y.x, dyy);
        dyv = fmaf(dy.y, vj.y, dyv); dyy = fmaf(dy.y, y.y, dyy);
        if (st_rw(ST)) {
            float2 e = *reinterpret_cast<const float2 *>(ec + d);
            dye = fmaf(dy.x, e.x, dye);
            dye = fmaf(dy.y, e.y, dye);
        }
    }
    flash_bwd_row(&fp, &rw, dyv, dyy, dye, st[FLASH_ST_S], a.bstat + ri * FLASH_NBSTAT);
}

// Query tile r0..: Q and dY into shared memory (tiles: here; else the caller's cp.async copied
// them; the caller syncs before they are read), and the constants of this lane's two rows
// (flash_row_load from the saved stats) with their pre-pass values; rows past the end stay masked
// (valid = false).
template <int ST, int D, bool MMA>
static __device__ __forceinline__ void bwd_load_rows(const bwd_args &a, const flash_params &fpr, int b, int h,
                                                     int r0, int warp, int g, typename Op<MMA>::T *Qs,
                                                     typename Op<MMA>::T *dYs, bool tiles, bool (&valid)[2],
                                                     flash_row (&rw)[2], float (&bs)[2][FLASH_NBSTAT]) {
    const int HD = a.H * D, bq = min(64, a.T - r0);
    const int64_t off = ((int64_t)b * a.T + r0) * HD + (int64_t)h * D;
    if (tiles) {
        load_tile<MMA, D>(Qs, a.q, off, HD, bq, a.io_bf16);
        load_tile<MMA, D>(dYs, a.dout, off, HD, bq, a.io_bf16);
    }
    const float s_h = a.fp.score == LSSAR_SCORE_SSMAX ? a.ssmax_s[h] : 0.0f;
#pragma unroll
    for (int u = 0; u < 2; u++) {
        const int i = r0 + 16 * warp + g + 8 * u;
        valid[u] = i < a.T;
        if (valid[u]) {
            const size_t ri = flash_row_index(b, h, i, a.H, a.T);
            flash_row_load(&fpr, i, s_h, st_norms(ST) ? a.rq[ri] : 1.0f, a.stats + ri * FLASH_NSTAT, &rw[u]);
#pragma unroll
            for (int t = 0; t < FLASH_NBSTAT; t++)  // sigmoid / relu: no pre-pass, the slots 0
                bs[u][t] = st_unnormed(ST) ? 0.0f : a.bstat[ri * FLASH_NBSTAT + t];
        } else {
            flash_row_init(&fpr, 0, s_h, 1.0f, &rw[u]);
#pragma unroll
            for (int t = 0; t < FLASH_NBSTAT; t++) bs[u][t] = 0.0f;
        }
    }
}

/* One 16-key chunk (keys j0 + 16 kk ..) of the (query tile, key tile) block of the dK/dV kernel:
   the emulation's bwd_block. S = Q K^T and dW = dY V^T by products, then flash_bwd_elem for every
   element (a masked one has x = -inf and comes out w = dS = 0): the weight beta (w) and dS (ds).
   The rows are the warp's (query rows r0 + 16 warp + g, + 8). FULL: no mask. */
template <int ST, int D, bool MMA, bool FULL>
static __device__ __forceinline__ void bwd_chunk(const flash_params &fp, const flash_row (&rw)[2],
                                                 const float (&bs)[2][FLASH_NBSTAT], const bool (&valid)[2],
                                                 int i0w, const typename Op<MMA>::T *Qw,
                                                 const typename Op<MMA>::T *dYw,
                                                 const typename Op<MMA>::T *Ks, const typename Op<MMA>::T *Vs,
                                                 const float *rks, int j0, int kk, int lane, float (&w)[2][4],
                                                 float (&ds)[2][4]) {
    constexpr int LD = Tile<MMA, D>::LD;
    const int g = lane >> 2, tq = lane & 3;
    float s[2][4], dw[2][4];
    mm_abt<MMA, D, 2>(s, Qw, Ks + 16 * kk * LD, lane);
    mm_abt<MMA, D, 2>(dw, dYw, Vs + 16 * kk * LD, lane);
#pragma unroll
    for (int u = 0; u < 2; u++) {
        const int i = i0w + g + 8 * u;  // the row's position
#pragma unroll
        for (int t = 0; t < 4; t++) {
            const int cc = t >> 1, e = t & 1, jl = 16 * kk + 8 * cc + 2 * tq + e, kj = j0 + jl,
                      el = 2 * u + e;
            float x = visible<FULL>(valid[u], kj, i) ? flash_logit(&fp, &rw[u], s[cc][el], rks[jl])
                                                     : -INFINITY;
            float wv, dx, rs, ff;
            ds[cc][el] = flash_bwd_elem(&fp, &rw[u], bs[u], x, kj == rw[u].jm, dw[cc][el], rks[jl], &wv, &dx,
                                        &rs, &ff);
            w[cc][el] = wv;
        }
    }
}

/* The l2-normalisation backward and the store of a finished (64, D) gradient tile: G staged as
   fp32 rows in Gs (stride LDG); rows 0..nvalid-1 of the tile are global rows g_off + r * ld.
   normed: one thread per row, g <- g - x rx^2 (x . g) with the raw (unrounded) input row x, dot
   over d in order (the emulation's project); then a coalesced store. Ends with __syncthreads. */
template <int D>
static __device__ void finish_tile(float *Gs, void *dst, const void *x, const float *rx, int64_t g_off,
                                   int64_t ld, int nvalid, bool normed, int io_bf16) {
    constexpr int LDG = D + 4;
    __syncthreads();  // Gs complete
    if (normed && (int)threadIdx.x < nvalid) {
        float *gr = Gs + threadIdx.x * LDG;
        const int64_t xo = g_off + (int64_t)threadIdx.x * ld;
        float dot = 0.0f;
        for (int d = 0; d < D; d++) dot = fmaf(load1(x, xo + d, io_bf16), gr[d], dot);
        float r = rx[threadIdx.x], cc = dot * r * r;
        for (int d = 0; d < D; d++) gr[d] -= cc * load1(x, xo + d, io_bf16);
    }
    __syncthreads();
    constexpr int CH = D / 2;
    for (int c = threadIdx.x; c < 64 * CH; c += NT) {
        int r = c / CH, d = (c % CH) * 2;
        if (r < nvalid)
            store2(dst, g_off + (int64_t)r * ld + d, io_bf16, Gs[r * LDG + d], Gs[r * LDG + d + 1]);
    }
    __syncthreads();
}

// Write a warp's C fragments acc (16, D) into fp32 rows Gs (rows row0 + g, + 8).
template <int D>
static __device__ __forceinline__ void stage_acc(float *Gs, int row0, const float (&acc)[D / 8][4],
                                                 int lane) {
    constexpr int LDG = D + 4;
    const int g = lane >> 2, tq = lane & 3;
#pragma unroll
    for (int nb = 0; nb < D / 8; nb++) {
        *reinterpret_cast<float2 *>(Gs + (row0 + g) * LDG + 8 * nb + 2 * tq) =
            make_float2(acc[nb][0], acc[nb][1]);
        *reinterpret_cast<float2 *>(Gs + (row0 + g + 8) * LDG + 8 * nb + 2 * tq) =
            make_float2(acc[nb][2], acc[nb][3]);
    }
}

// flash.h's flash_bwd_rowsums of the instance: the re-weighting kinds
static constexpr __host__ __device__ bool st_rowsums(int st) {
    return st_rw(st);
}

/* Row passes: a CTA per (b, h, 64 query rows) walks key tiles 0..qt, recomputes S and dW and
   sums three per-element quantities per lane (the chunk's columns in t order into tile partials,
   added to running sums), the quad tree at the end; lane tq = 0 finishes the row. Each CTA reads
   and writes only its own rows.
   PASS_RS (0b, the re-weighting kinds: st_rowsums; the emulation's bwd_rowsums_cta), after
     bwd_rows_kernel and before the dK/dV kernel: flash_bwd_rs_elem's R1, P1, P2; flash_bwd_rs_finish
     replaces the row's D1 and D2 in bstat.
   PASS_SSMAX (2b, ssmax with ds wanted; the emulation's bwd_dq_cta), after them: flash_bwd_elem's
     dx S, res and f S (flash_ssmax_acc, the bits of the dK/dV kernel's elements); rowds gets
     flash_ssmax_ds_row of A - Bs C. Two more products per block for ssmax only: kept in the dK/dV
     kernel, these sums made the D = 128 instances that ssmax shares with the dot score spill. */
enum { PASS_RS = 0, PASS_SSMAX = 1 };
template <int ST, int D, bool MMA, int PASS>
__global__ void __launch_bounds__(NT, 1) rowpass_kernel(const bwd_args a) {
    typedef typename Op<MMA>::T T;
    constexpr int LD = Tile<MMA, D>::LD, NBUF = Tile<MMA, D>::NBUF;
    FLASH_DYNAMIC_SHARED(smem);
    // Q, dY, then NBUF (K, V) pairs
    T *Qs = reinterpret_cast<T *>(smem), *dYs = Qs + 64 * LD, *K0 = dYs + 64 * LD;
    float *rks = reinterpret_cast<float *>(K0 + NBUF * 2 * 64 * LD);

    flash_params fp, fpr;
    kind_params<ST>(a.fp, fp, fpr);
    const int H = a.H, T_ = a.T, bh = blockIdx.x, b = bh / H, h = bh % H;
    const int qt = (int)gridDim.y - 1 - (int)blockIdx.y;
    const int r0 = qt * 64;
    const int HD = H * D;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tq = lane & 3;
    const int64_t head = (int64_t)b * T_ * HD + (int64_t)h * D;
    const int i0w = r0 + 16 * warp;

    bool valid[2];
    flash_row rw[2];
    float bs[2][FLASH_NBSTAT];
    bwd_load_rows<ST, D, MMA>(a, fpr, b, h, r0, warp, g, Qs, dYs, true, valid, rw, bs);
    float L[3][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}, {0.0f, 0.0f}};  // the lane's running sums

    // key tile kt's K and V into buffer kt & 1, one cp.async group (bf16 storage into bf16 tiles:
    // tile kt + 1's copies run beside tile kt's products)
    const bool async = NBUF == 2 && a.io_bf16;
    auto copy_kv = [&](int kt) {
        if constexpr (NBUF == 2) {
            const int64_t o = head + (int64_t)kt * 64 * HD;
            const int nk = min(64, T_ - kt * 64), off = (kt & 1) * 2 * 64 * LD;
            load_tile_async<D>(K0 + off, a.k, o, HD, nk);
            load_tile_async<D>(K0 + off + 64 * LD, a.v, o, HD, nk);
            cp_async_commit();
        }
    };
    if (async) copy_kv(0);
    auto tile = [&](int kt, auto full) {
        constexpr bool FULL = decltype(full)::value;
        const int j0 = kt * 64, nk = min(64, T_ - j0);
        T *const Ks = K0 + (async ? kt & 1 : 0) * 2 * 64 * LD, *const Vs = Ks + 64 * LD;
        __syncthreads();  // the readers of the buffer the next copy goes to (tile kt - 1's) are done
        if (async) {      // the key tiles run 0, 1, ..., qt
            if (kt < qt) copy_kv(kt + 1);
            if (kt < qt) cp_async_wait<1>();
            else cp_async_wait<0>();
        } else {
            load_tile<MMA, D>(Ks, a.k, head + (int64_t)j0 * HD, HD, nk, a.io_bf16);
            load_tile<MMA, D>(Vs, a.v, head + (int64_t)j0 * HD, HD, nk, a.io_bf16);
        }
        load_rk(rks, a.rk, ((int64_t)b * H + h) * T_ + j0, nk, st_norms(ST));
        __syncthreads();
        float p[3][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}, {0.0f, 0.0f}};  // tile partials
#pragma unroll 1
        for (int kk = 0; kk < 4; kk++) {
            float s[2][4], dw[2][4];
            mm_abt<MMA, D, 2>(s, Qs + 16 * warp * LD, Ks + 16 * kk * LD, lane);
            mm_abt<MMA, D, 2>(dw, dYs + 16 * warp * LD, Vs + 16 * kk * LD, lane);
#pragma unroll
            for (int u = 0; u < 2; u++) {
                const int i = i0w + g + 8 * u;
#pragma unroll
                for (int t = 0; t < 4; t++) {  // the lane's columns of the chunk in t order
                    const int cc = t >> 1, el = 2 * u + (t & 1), jl = 16 * kk + 8 * cc + 2 * tq + (t & 1);
                    const int kj = j0 + jl;
                    float x = visible<FULL>(valid[u], kj, i) ? flash_logit(&fp, &rw[u], s[cc][el], rks[jl])
                                                             : -INFINITY;
                    if constexpr (PASS == PASS_RS) {
                        float r1, p1, p2;
                        flash_bwd_rs_elem(&fp, &rw[u], bs[u], x, kj == rw[u].jm, dw[cc][el], &r1, &p1, &p2);
                        p[0][u] += r1;
                        p[1][u] += p1;
                        p[2][u] += p2;
                    } else {
                        float wv, dx, rs, ff;
                        flash_bwd_elem(&fp, &rw[u], bs[u], x, kj == rw[u].jm, dw[cc][el], rks[jl], &wv, &dx, &rs,
                                       &ff);
                        flash_ssmax_acc(dx, rs, ff, s[cc][el], &p[0][u], &p[1][u], &p[2][u]);
                    }
                }
            }
        }
#pragma unroll
        for (int m = 0; m < 3; m++)
#pragma unroll
            for (int u = 0; u < 2; u++) L[m][u] += p[m][u];
    };
    for (int kt = 0; kt < qt; kt++) tile(kt, Full<true>());  // rows past T: their own sums, unused
    tile(qt, Full<false>());                                 // the diagonal
#pragma unroll
    for (int u = 0; u < 2; u++) {
        const float q0 = quad_sum(L[0][u]), q1 = quad_sum(L[1][u]), q2 = quad_sum(L[2][u]);
        const int i = i0w + g + 8 * u;
        if (!valid[u] || tq != 0) continue;
        const size_t ri = flash_row_index(b, h, i, H, T_);
        if constexpr (PASS == PASS_RS) flash_bwd_rs_finish(&rw[u], q0, q1, q2, a.bstat + ri * FLASH_NBSTAT);
        else a.rowds[ri] = flash_ssmax_ds_row(&fp, i, flash_ssmax_row_term(q0, q1, q2));
    }
}

// n8 blocks of the dK/dV kernel's dQ part at a time: all of them up to D = 64, half at D = 128
template <int D> constexpr int DQ_PIECE = D > 64 ? D / 16 : D / 8;

/* 1. dK, dV of 64 keys j0.. of (b, h), and their part of dQ: walk the query tiles kt..last
   (BR == BC, so query tile qt sees key tile kt iff qt >= kt). Per query tile, the warps own query
   rows for the block (bwd_chunk: S, dW and the elements), stage W and dS in shared memory, then own
   keys (16 per warp) for dV += W^T dY, dK += dS^T Q, and query rows again for the tile's dQ part
   dS K (mm_pb): five products per block, as FlashAttention-2. The part is added to the fp32 dQ
   buffer in key-tile order: key tile kt waits until the query tile's counter says kt tiles have
   added theirs (key tile 0 stores its part: nothing is before it), adds, and counts itself in.
   At the end dV is stored, dK projected (lssa / lssar) and stored. (ssmax's row terms are
   rowpass_kernel's: their three row sums here, even in shared memory, made the D = 128
   instances shared by dot and ssmax spill.) bf16 storage into bf16 tiles (NBUF = 2): Q, dY of
   query tile qt + 1 copied by cp.async into the other buffer while tile qt is computed on. */
template <int ST, int D, bool MMA>
__global__ void __launch_bounds__(NT, 1) dkdv_kernel(const bwd_args a) {
    typedef typename Op<MMA>::T T;
    constexpr int LD = Tile<MMA, D>::LD, LDP = Tile<MMA, D>::LDP, NBUF = Tile<MMA, D>::NBUF;
    constexpr bool NORMS = st_norms(ST), COS = st_cos(ST);
    FLASH_DYNAMIC_SHARED(smem);
    // K, V, then NBUF Q tiles and NBUF dY tiles
    T *Ks = reinterpret_cast<T *>(smem), *Vs = Ks + 64 * LD, *Q0 = Vs + 64 * LD, *dY0 = Q0 + NBUF * 64 * LD;
    T *Ws = dY0 + NBUF * 64 * LD, *dSs = Ws + 64 * LDP;  // (64 query rows, 64 keys) each
    float *rks = reinterpret_cast<float *>(dSs + 64 * LDP);

    flash_params fp, fpr;
    kind_params<ST>(a.fp, fp, fpr);
    const int H = a.H, T_ = a.T, bh = blockIdx.x, b = bh / H, h = bh % H;
    const int nt = (int)gridDim.y, kt = (int)blockIdx.y;  // the first key tiles see the most rows: first
    const int j0 = kt * 64, nk = min(64, T_ - j0);
    const int HD = H * D;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tq = lane & 3;
    const int64_t head = (int64_t)b * T_ * HD + (int64_t)h * D;  // element of x[b][0][h][0]

    // query tile qt's Q and dY into buffer (qt - kt) & 1, one cp.async group
    const bool async = NBUF == 2 && a.io_bf16;
    auto copy_rows = [&](int qt) {
        if constexpr (NBUF == 2) {
            const int64_t o = head + (int64_t)qt * 64 * HD;
            const int bq = min(64, T_ - qt * 64), off = ((qt - kt) & 1) * 64 * LD;
            load_tile_async<D>(Q0 + off, a.q, o, HD, bq);
            load_tile_async<D>(dY0 + off, a.dout, o, HD, bq);
            cp_async_commit();
        }
    };
    if (async) copy_rows(kt);  // beside the key tile's loads
    load_tile<MMA, D>(Ks, a.k, head + (int64_t)j0 * HD, HD, nk, a.io_bf16);
    load_tile<MMA, D>(Vs, a.v, head + (int64_t)j0 * HD, HD, nk, a.io_bf16);
    load_rk(rks, a.rk, ((int64_t)b * H + h) * T_ + j0, nk, NORMS);

    float dK[D / 8][4], dV[D / 8][4];  // the warp's keys j0 + 16 warp + g, + 8
#pragma unroll
    for (int nb = 0; nb < D / 8; nb++)
#pragma unroll
        for (int e = 0; e < 4; e++) { dK[nb][e] = 0.0f; dV[nb][e] = 0.0f; }

    auto tile = [&](int qt, auto full) {
        constexpr bool FULL = decltype(full)::value;
        const int r0 = qt * 64, buf = async ? (qt - kt) & 1 : 0;
        T *const Qs = Q0 + buf * 64 * LD, *const dYs = dY0 + buf * 64 * LD;
        __syncthreads();  // the previous query tile's readers of its Q, dY (the buffer the next
                          // copy goes to), Ws, dSs are done
        if (async) {      // the query tiles run kt, kt + 1, ..., nt - 1 in every order below
            if (qt + 1 < nt) copy_rows(qt + 1);
            if (qt + 1 < nt) cp_async_wait<1>();  // tile qt's group done, tile qt + 1's may run on
            else cp_async_wait<0>();
        }
        bool valid[2];
        flash_row rw[2];
        float bs[2][FLASH_NBSTAT];
        bwd_load_rows<ST, D, MMA>(a, fpr, b, h, r0, warp, g, Qs, dYs, !async, valid, rw, bs);
        __syncthreads();
#pragma unroll 1
        for (int kk = 0; kk < 4; kk++) {
            float w[2][4], ds[2][4];
            bwd_chunk<ST, D, MMA, FULL>(fp, rw, bs, valid, r0 + 16 * warp, Qs + 16 * warp * LD,
                                        dYs + 16 * warp * LD, Ks, Vs, rks, j0, kk, lane, w, ds);
            stage16<MMA>(Ws, LDP, 16 * warp, kk, w, lane);
            stage16<MMA>(dSs, LDP, 16 * warp, kk, ds, lane);
        }
        __syncthreads();
        mm_ptb<MMA, D>(dV, Ws, 16 * warp, dYs, lane);   // dV += W^T dY
        mm_ptb<MMA, D>(dK, dSs, 16 * warp, Qs, lane);   // dK += dS^T Q
        // the warp's rows' dS K, added to dqacc after key tiles 0..kt-1, in that order: in two
        // halves of D at D = 128 (beside dK and dV the whole spilled)
        int *sem = a.sem + (int64_t)bh * nt + qt;
        auto add_dq = [&](auto nb0) {
            constexpr int NB0 = decltype(nb0)::value, NQ = DQ_PIECE<D>;
            float dQ[NQ][4];
            mm_pb<MMA, D, NB0, NQ>(dQ, dSs, 16 * warp, Ks, lane);
            if (NB0 == 0 && kt > 0) {
                if (threadIdx.x == 0) sem_wait(sem, kt);
                __syncthreads();
            }
#pragma unroll
            for (int u = 0; u < 2; u++) {
                const int i = r0 + 16 * warp + g + 8 * u;
                if (!valid[u]) continue;
                float *qr = a.dqacc + ((int64_t)b * T_ + i) * HD + (int64_t)h * D + 2 * tq + 8 * NB0;
#pragma unroll
                for (int nb = 0; nb < NQ; nb++) {
                    float2 *p = reinterpret_cast<float2 *>(qr + 8 * nb);
                    float2 x = make_float2(dQ[nb][2 * u], dQ[nb][2 * u + 1]);
                    if (kt > 0) {
                        const float2 o = __ldcg(p);
                        x = make_float2(o.x + x.x, o.y + x.y);
                    }
                    __stcg(p, x);
                }
            }
        };
        add_dq(std::integral_constant<int, 0>());
        if constexpr (DQ_PIECE<D> < D / 8) add_dq(std::integral_constant<int, DQ_PIECE<D>>());
        __threadfence();
        __syncthreads();
        if (threadIdx.x == 0) sem_post(sem, kt + 1);
    };
    // the diagonal first, then the full query tiles; one with rows past T (the last when T % 64
    // != 0) is masked too: W^T dY and dS^T Q sum over the rows
    if constexpr (Tile<MMA, D>::SPLIT) {
        const int nfull_end = T_ % 64 == 0 ? nt : nt - 1;
        tile(kt, Full<false>());
        for (int qt = kt + 1; qt < nfull_end; qt++) tile(qt, Full<true>());
        if (nfull_end < nt && kt < nt - 1) tile(nt - 1, Full<false>());
    } else {
        for (int qt = kt; qt < nt; qt++) tile(qt, Full<false>());
    }

    // dV straight from the fragments; dK through the projection
    const int jr[2] = {j0 + 16 * warp + g, j0 + 16 * warp + g + 8};
#pragma unroll
    for (int u = 0; u < 2; u++)
        if (jr[u] < T_) {
            const int64_t o = head + (int64_t)jr[u] * HD + 2 * tq;
#pragma unroll
            for (int nb = 0; nb < D / 8; nb++)
                store2(a.dv, o + 8 * nb, a.io_bf16, dV[nb][2 * u], dV[nb][2 * u + 1]);
        }
    float *Gs = reinterpret_cast<float *>(Q0);  // the Q and dY tiles are free now (after the barrier below)
    __syncthreads();
    stage_acc<D>(Gs, 16 * warp, dK, lane);
    // rx for the projection: rks holds 1/|k| of the tile's keys (1 where unused)
    finish_tile<D>(Gs, a.dk, a.k, rks, head + (int64_t)j0 * HD, HD, nk, COS, a.io_bf16);
}

// The counters of the dK/dV kernel's ordered adds to 0 (n of them).
__global__ void sem_zero_kernel(int *sem, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) sem[i] = 0;
}

/* 2. dQ of 64 query rows r0.. of (b, h) from the fp32 buffer the dK/dV kernel summed (the
   emulation's bwd_dq_cta): staged as fp32 rows, projected (lssa / lssar) and stored. */
template <int D>
__global__ void __launch_bounds__(NT) dq_finish_kernel(const bwd_args a) {
    constexpr int LDG = Tile<true, D>::LDG, CH = D / 4;
    FLASH_DYNAMIC_SHARED(smem);
    float *Gs = reinterpret_cast<float *>(smem), *rqs = Gs + 64 * LDG;
    const bool cos = a.fp.score == LSSAR_SCORE_COS;
    const int H = a.H, T_ = a.T, bh = blockIdx.x, b = bh / H, h = bh % H;
    const int r0 = (int)blockIdx.y * 64, bq = min(64, T_ - r0);
    const int64_t HD = (int64_t)H * D, g_off = ((int64_t)b * T_ + r0) * HD + (int64_t)h * D;
    for (int c = threadIdx.x; c < 64 * CH; c += NT) {
        const int r = c / CH, d = (c % CH) * 4;
        if (r < bq)
            *reinterpret_cast<float4 *>(Gs + r * LDG + d) =
                __ldcg(reinterpret_cast<const float4 *>(a.dqacc + g_off + r * HD + d));
    }
    if (threadIdx.x < 64)
        rqs[threadIdx.x] = cos && (int)threadIdx.x < bq ? a.rq[((int64_t)b * H + h) * T_ + r0 + threadIdx.x] : 1.0f;
    finish_tile<D>(Gs, a.dq, a.q, rqs, g_off, HD, bq, cos, a.io_bf16);
}

/* 3. ssmax: ds_h = sum over (b, i) of rowds (B, H, T), in double. One CTA per head: thread t sums
   a contiguous run of the B * T terms in index order, then a fixed halving tree over the threads
   (the same order on every run; it differs from the emulation's single running sum only in double
   rounding, far below the float result). */
#define DS_THREADS 256
__global__ void ds_kernel(const float *rowds, float *ds, int B, int T, int H, int accumulate) {
    FLASH_SHARED_ARRAY(double, sh, DS_THREADS);
    const int h = blockIdx.x;
    const int64_t n = (int64_t)B * T, per = (n + DS_THREADS - 1) / DS_THREADS;
    const int64_t e0 = threadIdx.x * per, e1 = e0 + per < n ? e0 + per : n;
    double s = 0.0;
    for (int64_t e = e0; e < e1; e++) {
        int b = (int)(e / T), i = (int)(e % T);
        s += (double)rowds[((int64_t)b * H + h) * T + i];
    }
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int o = DS_THREADS / 2; o > 0; o >>= 1) {
        if ((int)threadIdx.x < o) sh[threadIdx.x] = sh[threadIdx.x] + sh[threadIdx.x + o];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        float v = (float)sh[0];
        ds[h] = accumulate ? ds[h] + v : v;
    }
}

// ================================================================ host side

static int cuda_err(cudaError_t e, const char *what) {
    // as the rest of the backend (cuda_common.h): out of memory is LSSAR_E_NOMEM, any other
    // device failure LSSAR_E_UNSUPPORTED (lssar.h has no code for device faults)
    return lssar_fail(e == cudaErrorMemoryAllocation ? LSSAR_E_NOMEM : LSSAR_E_UNSUPPORTED,
                      "flash attention: CUDA error %s (%s) in %s", cudaGetErrorName(e), cudaGetErrorString(e),
                      what);
}
static int launched(const char *name) {
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? LSSAR_OK : cuda_err(e, name);
}
static size_t round256(size_t b) { return (b + 255) / 256 * 256; }

// Dynamic shared memory above 48 KB must be asked for per kernel; the device must have it.
template <typename K>
static int prepare(K kern, size_t smem, const char *name) {
    if (smem > 48 * 1024) {
        int dev = 0, optin = 0;
        cudaError_t e = cudaGetDevice(&dev);
        if (e == cudaSuccess)
            e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
        if (e != cudaSuccess) return cuda_err(e, name);
        if ((size_t)optin < smem)
            return lssar_fail(
                LSSAR_E_UNSUPPORTED,
                "flash attention: %s needs %zu bytes of shared memory per block; this GPU allows %d "
                "(use bf16 products, or a smaller head dim)",
                name, smem, optin);
        e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess) return cuda_err(e, name);
    }
    return LSSAR_OK;
}

template <int ST, int D, bool MMA>
static int launch_fwd(const fwd_args &a, dim3 grid, cudaStream_t st) {
    const size_t smem = Tile<MMA, D>::FWD;
    int rc = prepare(fwd_kernel<ST, D, MMA>, smem, "fwd_kernel");
    if (rc) return rc;
    FLASH_LAUNCH(grid, NT, smem, st, fwd_kernel<ST, D, MMA>)(a);
    return launched("the launch of fwd_kernel");
}
template <int ST, int D, bool MMA>
static int launch_bwd(const bwd_args &a, dim3 grid, cudaStream_t st) {
    size_t smem = Tile<MMA, D>::ROWSUMS;
    int rc;
    if constexpr (st_rowsums(ST)) {  // the row constants first (the emulation's step 0b)
        if ((rc = prepare(rowpass_kernel<ST, D, MMA, PASS_RS>, smem, "rowpass_kernel"))) return rc;
        FLASH_LAUNCH(grid, NT, smem, st, rowpass_kernel<ST, D, MMA, PASS_RS>)(a);
        if ((rc = launched("the launch of rowpass_kernel (row sums)"))) return rc;
    }
    const int nsem = (int)(grid.x * grid.y);
    FLASH_LAUNCH((unsigned)((nsem + 255) / 256), 256, 0, st, sem_zero_kernel)(a.sem, nsem);
    if ((rc = launched("the launch of sem_zero_kernel"))) return rc;
    smem = Tile<MMA, D>::DKDV;
    if ((rc = prepare(dkdv_kernel<ST, D, MMA>, smem, "dkdv_kernel"))) return rc;
    FLASH_LAUNCH(grid, NT, smem, st, dkdv_kernel<ST, D, MMA>)(a);
    if ((rc = launched("the launch of dkdv_kernel"))) return rc;
    smem = Tile<MMA, D>::EPI + 64 * sizeof(float);
    FLASH_LAUNCH(grid, NT, smem, st, dq_finish_kernel<D>)(a);
    if ((rc = launched("the launch of dq_finish_kernel"))) return rc;
    if constexpr (!st_cos(ST) && !st_unnormed(ST)) {  // the instances ssmax shares with dot
        if (a.rowds) {
            smem = Tile<MMA, D>::ROWSUMS;
            if ((rc = prepare(rowpass_kernel<ST, D, MMA, PASS_SSMAX>, smem, "rowpass_kernel"))) return rc;
            FLASH_LAUNCH(grid, NT, smem, st, rowpass_kernel<ST, D, MMA, PASS_SSMAX>)(a);
            if ((rc = launched("the launch of rowpass_kernel (ssmax)"))) return rc;
        }
    }
    return LSSAR_OK;
}

// stages x D x mode -> the template instance
template <int ST, bool MMA>
static int fwd_d(int D, const fwd_args &a, dim3 grid, cudaStream_t st) {
    switch (D) {
    case 16: return launch_fwd<ST, 16, MMA>(a, grid, st);
    case 32: return launch_fwd<ST, 32, MMA>(a, grid, st);
    case 64: return launch_fwd<ST, 64, MMA>(a, grid, st);
    default: return launch_fwd<ST, 128, MMA>(a, grid, st);
    }
}
template <int ST, bool MMA>
static int bwd_d(int D, const bwd_args &a, dim3 grid, cudaStream_t st) {
    switch (D) {
    case 16: return launch_bwd<ST, 16, MMA>(a, grid, st);
    case 32: return launch_bwd<ST, 32, MMA>(a, grid, st);
    case 64: return launch_bwd<ST, 64, MMA>(a, grid, st);
    default: return launch_bwd<ST, 128, MMA>(a, grid, st);
    }
}
/* stages x D x mode -> the template instance (flash_st): the 9 stage instances; dot and ssmax share
   one, and so do sigmoid and relu. */
#define FLASH_STAGES(fp, CALL)                                                                          \
    if ((fp).norm == LSSAR_NORM_LEN) return CALL(flash_st(0, LSSAR_PHI_SIGMOID, 0));                    \
    if ((fp).score == LSSAR_SCORE_COS) {                                                                \
        if ((fp).phi == LSSAR_PHI_EXP)                                                                  \
            return (fp).rw ? CALL(flash_st(1, LSSAR_PHI_EXP, 1)) : CALL(flash_st(1, LSSAR_PHI_EXP, 0)); \
        return (fp).rw ? CALL(flash_st(1, LSSAR_PHI_SOFTPLUS, 1))                                       \
                       : CALL(flash_st(1, LSSAR_PHI_SOFTPLUS, 0));                                      \
    }                                                                                                   \
    if ((fp).phi == LSSAR_PHI_EXP)                                                                      \
        return (fp).rw ? CALL(flash_st(0, LSSAR_PHI_EXP, 1)) : CALL(flash_st(0, LSSAR_PHI_EXP, 0));     \
    return (fp).rw ? CALL(flash_st(0, LSSAR_PHI_SOFTPLUS, 1)) : CALL(flash_st(0, LSSAR_PHI_SOFTPLUS, 0))
template <bool MMA>
static int fwd_stages(int D, const fwd_args &a, dim3 grid, cudaStream_t st) {
#define FWD_CALL(S) fwd_d<S, MMA>(D, a, grid, st)
    FLASH_STAGES(a.fp, FWD_CALL);
#undef FWD_CALL
}
template <bool MMA>
static int bwd_stages(int D, const bwd_args &a, dim3 grid, cudaStream_t st) {
#define BWD_CALL(S) bwd_d<S, MMA>(D, a, grid, st)
    FLASH_STAGES(a.fp, BWD_CALL);
#undef BWD_CALL
}
template <int ST>
static int launch_rows(const bwd_args &a, int D, unsigned nblocks, cudaStream_t st) {
    FLASH_LAUNCH(nblocks, 128, 0, st, bwd_rows_kernel<ST>)(a, D);
    return launched("the launch of bwd_rows_kernel");
}
static int rows_stages(const bwd_args &a, int D, unsigned nblocks, cudaStream_t st) {
#define ROWS_CALL(S) launch_rows<S>(a, D, nblocks, st)
    FLASH_STAGES(a.fp, ROWS_CALL);
#undef ROWS_CALL
}

static int norms(const void *x, float *out, int B, int n, int stride, int H, int D, int io_bf16,
                 cudaStream_t st) {
    int64_t rows = (int64_t)B * n * H;
    FLASH_LAUNCH((unsigned)((rows + 255) / 256), 256, 0, st, norms_kernel)
    (x, out, B, n, stride, H, D, io_bf16);
    return launched("the launch of norms_kernel");
}

// Argument checks shared by every entry point (the CPU path's, plus what the kernels need).
static int check_desc(const lssar_attn_desc *d, const char *fn) {
    int rc = attn_desc_check(d, fn);
    return rc ? rc : flash_emu_check_fused(d, fn);
}
static int check_sizes(const char *fn, int B, int Tq, int Tk, int kvs, int H, int D) {
    if (B <= 0 || Tq <= 0 || H <= 0 || D <= 0 || Tq > Tk || kvs < Tk)
        return lssar_fail(LSSAR_E_SIZE, "%s: B=%d Tq=%d Tk=%d kv_stride=%d H=%d D=%d; need sizes > 0 and "
                          "Tq <= Tk <= kv_stride", fn, B, Tq, Tk, kvs, H, D);
    if (D != 16 && D != 32 && D != 64 && D != 128)
        return lssar_fail(LSSAR_E_UNSUPPORTED,
                          "%s: head dim D=%d; the CUDA kernels support 16, 32, 64 and 128", fn, D);
    // query (key) tiles are grid.y (< 65536; the argmax then also travels exactly as a float in
    // the stats, < 2^24); (b, h) pairs grid.x
    if ((Tk + 63) / 64 > 65535 || (int64_t)B * H > INT32_MAX || (int64_t)H * D > INT32_MAX / 2 ||
        (int64_t)B * kvs > INT32_MAX)
        return lssar_fail(LSSAR_E_SIZE, "%s: B=%d T=%d H=%d D=%d is too large (T at most 65535 x 64)", fn, B,
                          Tk, H, D);
    return LSSAR_OK;
}
// The kind has score ssmax (its ds output); 0 for a value that is not a kind.
static bool attn_ssmax_kind(lssar_attn_kind k) {
    lssar_attn_stages st;
    return attn_kind_ok(k) && !lssar_attn_stages_of(k, &st) && st.score == LSSAR_SCORE_SSMAX;
}
static int check_ptr(const char *fn, const char *name, const void *p) {
    if (!p) return lssar_fail(LSSAR_E_NULL, "%s: %s is NULL", fn, name);
    if ((uintptr_t)p % 16)
        return lssar_fail(LSSAR_E_ARG, "%s: %s is not 16-byte aligned (the kernels load 16 bytes at a time; "
                          "cudaMalloc's pointers are)", fn, name);
    return LSSAR_OK;
}

// Scratch layout (each piece 256-byte aligned): rq (B, H, Tq), rk (B, H, Tk) for lssa / lssar;
// for the backward bstat (B, H, Tq, FLASH_NBSTAT), dqacc (B, Tq, H, D), the counters (B H, query
// tiles) and, ssmax, rowds (B, H, Tq).
typedef struct { float *rq, *rk, *bstat, *rowds, *dqacc; int *sem; size_t bytes; } scratch_map;
// The launch parameters of a descriptor whose kind is valid.
static flash_params desc_params(const lssar_attn_desc *d, int D) {
    lssar_attn_stages st;
    lssar_attn_stages_of(d->kind, &st);
    flash_params fp;
    flash_params_init(&fp, &st, d->p, D);
    flash_params_len(&fp, d->len_norm == LSSAR_LEN_NORM_ROW, d->train_len);
    flash_params_temp(&fp, d->temp_d);
    return fp;
}
static scratch_map carve(const lssar_attn_desc *d, int B, int Tq, int Tk, int H, int D, void *base,
                         int backward) {
    scratch_map m = {NULL, NULL, NULL, NULL, NULL, NULL, 0};
    char *p = static_cast<char *>(base);
    size_t off = 0, rows_q = (size_t)B * H * Tq, rows_k = (size_t)B * H * Tk;
    const flash_params fp = desc_params(d, 16);
    if (flash_needs_norms(&fp)) {
        m.rq = p ? reinterpret_cast<float *>(p + off) : NULL;
        off += round256(rows_q * sizeof(float));
        m.rk = p ? reinterpret_cast<float *>(p + off) : NULL;
        off += round256(rows_k * sizeof(float));
    }
    if (backward) {
        m.bstat = p ? reinterpret_cast<float *>(p + off) : NULL;
        off += round256(rows_q * FLASH_NBSTAT * sizeof(float));
        m.dqacc = p ? reinterpret_cast<float *>(p + off) : NULL;
        off += round256(rows_q * D * sizeof(float));
        m.sem = p ? reinterpret_cast<int *>(p + off) : NULL;
        off += round256((size_t)B * H * ((Tq + 63) / 64) * sizeof(int));
        if (fp.score == LSSAR_SCORE_SSMAX) {
            m.rowds = p ? reinterpret_cast<float *>(p + off) : NULL;
            off += round256(rows_q * sizeof(float));
        }
    }
    m.bytes = off;
    return m;
}

extern "C" size_t cuda_attn_stats_floats(const lssar_attn_desc *d, int B, int T, int H, int D) {
    lssar_attn_stages st;
    if (!d || B <= 0 || T <= 0 || H <= 0 || D <= 0 || !attn_kind_ok(d->kind) ||
        lssar_attn_stages_of(d->kind, &st) || !flash_fused_supported(&st))
        return 0;  // (a kind the kernels refuse: as flash_emu_stats_floats)
    const flash_params fp = desc_params(d, D);
    return flash_stats_floats(&fp, B, T, H, D);
}

extern "C" size_t cuda_attn_scratch_bytes(const lssar_attn_desc *d, int B, int Tq, int Tk, int H, int D) {
    if (!d || B <= 0 || Tq <= 0 || Tk <= 0 || H <= 0 || D <= 0 || !attn_kind_ok(d->kind)) return 0;
    // the backward's layout includes the forward's (Tq = Tk there)
    return carve(d, B, Tq, Tk, H, D, NULL, 1).bytes;
}

// The forward on either storage type (the public API's bf16 and the backend's fp32).
static int attn_forward(const char *fn, const lssar_attn_desc *d, int mma, int io_bf16, int B, int Tq, int Tk,
                        int kvs, int H, int D, const void *q, const void *k, const void *v, void *out,
                        float *stats, void *scratch, cudaStream_t stream) {
    int rc = check_desc(d, fn);
    if (!rc) rc = check_sizes(fn, B, Tq, Tk, kvs, H, D);
    if (!rc) rc = check_ptr(fn, "q", q);
    if (!rc) rc = check_ptr(fn, "k", k);
    if (!rc) rc = check_ptr(fn, "v", v);
    if (!rc) rc = check_ptr(fn, "out", out);
    if (!rc && stats) rc = check_ptr(fn, "stats", stats);
    if (rc) return rc;
    scratch_map sm = carve(d, B, Tq, Tk, H, D, scratch, 0);
    if (sm.bytes && !scratch)
        return lssar_fail(LSSAR_E_NULL, "%s: scratch is NULL (%zu bytes needed)", fn, sm.bytes);
    fwd_args a;
    memset(&a, 0, sizeof a);
    a.fp = desc_params(d, D);
    a.q = q; a.k = k; a.v = v; a.out = out; a.stats = stats;
    a.rq = sm.rq; a.rk = sm.rk;
    a.ssmax_s = a.fp.score == LSSAR_SCORE_SSMAX ? d->ssmax_s : NULL;
    a.B = B; a.Tq = Tq; a.Tk = Tk; a.kvs = kvs; a.H = H; a.q0 = Tk - Tq;
    a.io_bf16 = io_bf16;
    if (flash_needs_norms(&a.fp)) {
        if ((rc = norms(q, sm.rq, B, Tq, Tq, H, D, io_bf16, stream))) return rc;
        if ((rc = norms(k, sm.rk, B, Tk, kvs, H, D, io_bf16, stream))) return rc;
    }
    dim3 grid((unsigned)(B * H), (unsigned)((Tq + 63) / 64));
    return mma ? fwd_stages<true>(D, a, grid, stream) : fwd_stages<false>(D, a, grid, stream);
}

static int attn_backward(const char *fn, const lssar_attn_desc *d, int mma, int io_bf16, int B, int T, int H,
                         int D, const void *q, const void *k, const void *v, const void *out,
                         const float *stats, const void *dout, void *dq, void *dk, void *dv, float *dscale,
                         int accumulate, void *scratch, cudaStream_t stream) {
    int rc = check_desc(d, fn);
    if (!rc) rc = check_sizes(fn, B, T, T, T, H, D);
    const char *names[] = {"q", "k", "v", "out", "stats", "dout", "dq", "dk", "dv"};
    const void *ptrs[] = {q, k, v, out, stats, dout, dq, dk, dv};
    for (int t = 0; t < 9 && !rc; t++) rc = check_ptr(fn, names[t], ptrs[t]);
    if (rc) return rc;
    scratch_map sm = carve(d, B, T, T, H, D, scratch, 1);
    if (!scratch) return lssar_fail(LSSAR_E_NULL, "%s: scratch is NULL (%zu bytes needed)", fn, sm.bytes);
    bwd_args a;
    memset(&a, 0, sizeof a);
    a.fp = desc_params(d, D);
    const bool ssmax = a.fp.score == LSSAR_SCORE_SSMAX;
    a.q = q; a.k = k; a.v = v; a.out = out; a.dout = dout; a.dq = dq; a.dk = dk; a.dv = dv;
    a.stats = stats; a.bstat = sm.bstat; a.rowds = ssmax && dscale ? sm.rowds : NULL;
    a.dqacc = sm.dqacc; a.sem = sm.sem;
    a.rq = sm.rq; a.rk = sm.rk;
    a.ssmax_s = ssmax ? d->ssmax_s : NULL;
    a.dscale = dscale;
    a.B = B; a.T = T; a.H = H; a.io_bf16 = io_bf16; a.mma = mma; a.accumulate = accumulate;
    if (flash_needs_norms(&a.fp)) {
        if ((rc = norms(q, sm.rq, B, T, T, H, D, io_bf16, stream))) return rc;
        if ((rc = norms(k, sm.rk, B, T, T, H, D, io_bf16, stream))) return rc;
    }
    const int64_t rows = (int64_t)B * T * H;
    const unsigned rb = (unsigned)((rows + 127) / 128);
    // sigmoid / relu: no row pre-pass (bwd_load_rows gives them zeros)
    if (!flash_unnormed(&a.fp) && (rc = rows_stages(a, D, rb, stream))) return rc;
    dim3 grid((unsigned)(B * H), (unsigned)((T + 63) / 64));
    rc = mma ? bwd_stages<true>(D, a, grid, stream) : bwd_stages<false>(D, a, grid, stream);
    if (rc) return rc;
    if (a.rowds) {
        FLASH_LAUNCH(H, DS_THREADS, 0, stream, ds_kernel)(a.rowds, dscale, B, T, H, accumulate);
        if ((rc = launched("the launch of ds_kernel"))) return rc;
    }
    return LSSAR_OK;
}

extern "C" int cuda_attn_forward(const lssar_attn_desc *d, int bf16_products, lssar_dtype storage, int B,
                                 int Tq, int Tk, int kv_stride, int H, int D, const void *q, const void *k,
                                 const void *v, void *out, float *stats, void *scratch, cudaStream_t stream) {
    // bf16 storage feeds the tensor cores as it is: bf16 products
    const int io = storage == LSSAR_BF16;
    return attn_forward("attention forward (CUDA)", d, bf16_products != 0 || io, io, B, Tq, Tk, kv_stride, H, D,
                        q, k, v, out, stats, scratch, stream);
}

extern "C" int cuda_attn_backward(const lssar_attn_desc *d, int bf16_products, lssar_dtype storage, int B,
                                  int T, int H, int D, const void *q, const void *k, const void *v,
                                  const void *out, const float *stats, const void *dout, void *dq, void *dk,
                                  void *dv, float *dscale, void *scratch, cudaStream_t stream) {
    const int io = storage == LSSAR_BF16;
    return attn_backward("attention backward (CUDA)", d, bf16_products != 0 || io, io, B, T, H, D, q, k, v,
                         out, stats, dout, dq, dk, dv, d && attn_ssmax_kind(d->kind) ? dscale : NULL, 1,
                         scratch, stream);
}

// ---------------------------------------------------------------- the public API (lssar.h)

// The workspace: the statistics (the forward writes them, the backward reads them), then the scratch.
static size_t ws_stats_bytes(const lssar_attn_desc *a, int B, int T, int H, int D) {
    return round256(cuda_attn_stats_floats(a, B, T, H, D) * sizeof(float));
}

static int check_dtype(const char *fn, lssar_dtype dtype) {
    if (dtype != LSSAR_F32 && dtype != LSSAR_BF16)
        return lssar_fail(LSSAR_E_ARG, "%s: dtype %d; use LSSAR_F32 or LSSAR_BF16", fn, (int)dtype);
    return LSSAR_OK;
}

size_t lssar_attn_cuda_workspace_size(const lssar_attn_desc *a, lssar_dtype dtype, int B, int T, int H,
                                      int D) {
    if (!a || (dtype != LSSAR_F32 && dtype != LSSAR_BF16)) return 0;
    if (flash_emu_check_fused(a, "lssar_attn_cuda_workspace_size")) return 0;  // LSSAR_E_UNSUPPORTED set
    size_t s = cuda_attn_stats_floats(a, B, T, H, D);
    if (!s) return 0;
    return ws_stats_bytes(a, B, T, H, D) + cuda_attn_scratch_bytes(a, B, T, T, H, D);
}

int lssar_attn_forward_cuda(const lssar_attn_desc *a, lssar_dtype dtype, int B, int T, int H, int D,
                            const void *q, const void *k, const void *v, void *out, void *workspace,
                            void *stream) {
    const char *fn = "lssar_attn_forward_cuda";
    int rc = check_dtype(fn, dtype);
    if (!rc) rc = check_desc(a, fn);
    if (!rc) rc = check_sizes(fn, B, T, T, T, H, D);
    if (!rc) rc = check_ptr(fn, "workspace", workspace);
    if (rc) return rc;
    char *ws = static_cast<char *>(workspace);
    int bf16 = dtype == LSSAR_BF16;
    return attn_forward(fn, a, bf16, bf16, B, T, T, T, H, D, q, k, v, out, reinterpret_cast<float *>(ws),
                        ws + ws_stats_bytes(a, B, T, H, D), static_cast<cudaStream_t>(stream));
}

int lssar_attn_backward_cuda(const lssar_attn_desc *a, lssar_dtype dtype, int B, int T, int H, int D,
                             const void *q, const void *k, const void *v, const void *out, const void *dout,
                             void *dq, void *dk, void *dv, float *ds, void *workspace, void *stream) {
    const char *fn = "lssar_attn_backward_cuda";
    int rc = check_dtype(fn, dtype);
    if (!rc) rc = check_desc(a, fn);
    if (!rc) rc = check_sizes(fn, B, T, T, T, H, D);
    if (!rc) rc = check_ptr(fn, "workspace", workspace);
    if (rc) return rc;
    char *ws = static_cast<char *>(workspace);
    int bf16 = dtype == LSSAR_BF16;
    return attn_backward(fn, a, bf16, bf16, B, T, H, D, q, k, v, out, reinterpret_cast<const float *>(ws),
                         dout, dq, dk, dv, attn_ssmax_kind(a->kind) ? ds : NULL, 0,
                         ws + ws_stats_bytes(a, B, T, H, D), static_cast<cudaStream_t>(stream));
}

int lssar_cuda_device_count(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();  // no driver / no GPU: not an error of a later call
        return 0;
    }
    return n;
}
