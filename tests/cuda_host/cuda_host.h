/*
 * cuda_host.h - CUDA on the CPU, for testing: compiles a .cu file's kernels and host code with g++
 * and runs them on the host, so that CI (which has no GPU) executes the kernels' own index math,
 * masking, fragment layout and reduction order. Test-only, never part of the library.
 *
 * Used by src/cuda/flash_attn.cu under -DLSSAR_CUDA_HOST (`g++ -x c++ -std=c++17 -pthread`, see
 * mk/cuda_host.mk) and by tests/cuda_host/test_flash_host.cpp, which compares those kernels with
 * the plain-C emulation src/attn/flash_emu.c. Include it before lssar.h and any CUDA header:
 * tests/cuda_host/cuda_runtime.h stands in for the toolkit's <cuda_runtime.h> on the host build's
 * include path (-Itests/cuda_host), because src/cuda/flash_attn.h includes that for cudaStream_t.
 *
 * What is emulated, and how
 * - Threads. Every CUDA thread of a block is a POSIX thread (a persistent pool, grown to the
 *   largest block launched, so a test run creates a few hundred threads, not one per CUDA thread
 *   and block; the 32 threads of a warp are pinned to one CPU, which keeps the wake-ups of a warp
 *   collective on that CPU: measured 1.5x faster on 2 CPUs). The blocks of a launch run one after another
 *   in blockIdx order (x fastest), each block's threads all at once, preemptively scheduled by
 *   the OS; every launch completes before it returns (streams are accepted and ignored:
 *   everything is synchronous). threadIdx and blockIdx are thread_local; gridDim and blockDim
 *   are set for the launch.
 * - __syncthreads: a barrier of the block's threads. A thread that has returned from the kernel
 *   counts as arrived (as bar.sync waits only for non-exited threads).
 * - Warps: lanes are threadIdx / 32 and threadIdx % 32 (1-D blocks). __syncwarp, the shuffles and
 *   mma.sync are warp barriers of the 32 lanes; the shuffles and the mma exchange their operands
 *   through a per-warp buffer (double-buffered, so one barrier per collective suffices: a lane can
 *   only overwrite a buffer two collectives later, after every lane has passed the next barrier,
 *   i.e. finished reading). Only full warps and the full mask are supported; a warp collective
 *   after a lane of the warp returned is reported as the error it is on a GPU.
 * - mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32: the lanes' A (4 registers), B (2) and C
 *   (4) fragments are gathered into the 16x16, 16x8 and 16x8 matrices using the PTX ISA's fragment
 *   layout (groupID g = lane / 4, threadID_in_group t = lane % 4; see cuda_host_mma_bf16), each
 *   lane then computes its D elements: D[r][c] = C[r][c] + sum_k A[r][k] B[k][c], the products
 *   exact (bf16 x bf16 fits in fp32), summed in k order from 0 in fp32, and that sum added to C:
 *   the model of one mma k-step that src/attn/flash_emu.c uses (KSTEP; docs/CUDA.md). The
 *   hardware's internal order and rounding of the sum are its own (the GPU tests cover them).
 * - Shared memory: the dynamic buffer of a block is a heap block of the launch's size followed by
 *   64 guard bytes that are checked after the block (a write past the end is reported; under
 *   AddressSanitizer a read past the guard too), and static __shared__ arrays come from a 48 KB
 *   per-block arena; both are filled with 0xff bytes (NaN as fp32 and bf16) before every block, so
 *   a read of shared memory that no thread wrote shows up as NaN in the results. Global memory is
 *   host memory: "device pointers" are host pointers.
 * - Launch checks, as the runtime's: block size (<= 1024 threads), grid limits (y, z <= 65535),
 *   dynamic shared memory above 48 KB only after cudaFuncSetAttribute(kernel,
 *   cudaFuncAttributeMaxDynamicSharedMemorySize, >= bytes), and never above the device's opt-in
 *   limit (cuda_host_device.smem_optin: 232448 bytes, an H100 / H200; a test may lower it). A
 *   failed launch runs nothing and leaves the error for cudaGetLastError.
 * - bf16 conversion (__floats2bfloat162_rn): round to nearest even, NaN to the canonical 0x7fff.
 * - A barrier that waits longer than LSSAR_HOST_TIMEOUT seconds (default 120) is reported as a
 *   deadlock (threads of one block at different barriers, a lane missing from a warp collective)
 *   and aborts, rather than hanging CI; a crash inside a kernel names the block and thread
 *   (except under AddressSanitizer, whose report says more).
 *
 * Limits: what this cannot tell you
 * - The mma fragment layout is this file's reading of the PTX ISA, and the kernel's fragment
 *   indexing was written from the same reading: a misreading shared by both would pass here and
 *   fail on a GPU. Only a GPU run (make test-gpu) checks the layout against the hardware.
 * - Floating point: the host copy is compiled with -ffp-contract=off (mk/cuda_host.mk), so
 *   a * b + c rounds twice, while nvcc contracts it into an FMA by default (-fmad=true): the host
 *   run rounds like the CPU emulation, not bit for bit like the GPU.
 * - Memory model and scheduling: the pthreads run with x86's strong ordering and no lockstep; a
 *   missing __syncthreads or __syncwarp shows only when the OS interleaves the threads badly
 *   (with 128 threads on a few CPUs it often does, but not reliably: compute-sanitizer racecheck
 *   on a GPU is the real check). Blocks never run concurrently, so races between blocks are not seen at all.
 *   Warps are not in lockstep, so code that relied on implicit warp synchronicity would fail here
 *   (which is right: it is wrong on Volta and later too).
 * - ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16 (cuda_host_ldmatrix_x4): a warp collective
 *   like the mma; each lane's row address is checked (in the block's shared memory, 16-byte
 *   aligned) and the four matrices are distributed by the PTX ISA's layout.
 * - cp.async (16 bytes, zero fill), commit_group, wait_group (cuda_host_cp_async16 and after):
 *   per thread, done as late as the PTX ISA allows (at the covering wait_group), the destination
 *   holding NaN bytes until then, so a read before the wait or its barrier is seen.
 * - Hand-overs between blocks (cuda_host_sem_wait / _post: a counter in global memory, waited for
 *   by ld.acquire and set by st.release): since blocks run in order, a wait must find its value
 *   set by an earlier block; a wait on a later block is reported as the deadlock it can be on a GPU.
 * - Not emulated: 2-D / 3-D warp numbering, partial masks, __shfl_up/down, atomics, textures,
 *   streams and events, device memory allocation (pointers are host pointers), bulk and TMA copies,
 *   cooperative groups, clusters. Anything the file uses must be added here first. Linux only
 *   (futex, CPU affinity).
 */
#ifndef LSSAR_TESTS_CUDA_HOST_H
#define LSSAR_TESTS_CUDA_HOST_H

#ifndef LSSAR_CUDA_HOST
#error "cuda_host.h is the -DLSSAR_CUDA_HOST build's CUDA shim (tests/cuda_host, mk/cuda_host.mk)"
#endif
#ifdef LSSAR_H
#error "include cuda_host.h before lssar.h: it renames the public CUDA entry points (see below)"
#endif

#include <linux/futex.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <tuple>
#include <vector>

/* ---- the host copy's own names. The library (liblssar.a, CUDA=1 or 0) defines these too: the
   nvcc-built backend or src/cuda/cuda_off.c. The host-compiled flash_attn.cu defines them under
   these names instead, so a test links both without a clash and knows which one it calls. */
#define cuda_attn_stats_floats cuda_host_attn_stats_floats
#define cuda_attn_scratch_bytes cuda_host_attn_scratch_bytes
#define cuda_attn_forward cuda_host_attn_forward
#define cuda_attn_backward cuda_host_attn_backward
#define lssar_attn_cuda_workspace_size lssar_host_attn_cuda_workspace_size
#define lssar_attn_forward_cuda lssar_host_attn_forward_cuda
#define lssar_attn_backward_cuda lssar_host_attn_backward_cuda
#define lssar_cuda_device_count lssar_host_cuda_device_count

/* ---- qualifiers */
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))

/* ---- vector types (the CUDA alignments) */
struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct uint3 { unsigned x, y, z; };
struct __attribute__((aligned(8))) float2 { float x, y; };
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
struct __attribute__((aligned(16))) uint4 { unsigned x, y, z, w; };
static inline float2 make_float2(float x, float y) { return float2{x, y}; }
static inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }

inline thread_local uint3 threadIdx;  // set for each CUDA thread
inline thread_local uint3 blockIdx;
inline dim3 gridDim, blockDim;         // set for each launch

/* ---- device functions */
template <typename T> static inline T __ldg(const T *p) { return *p; }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }

// bf16: round to nearest even; NaN becomes the canonical quiet NaN 0x7fff (as cuda_bf16.hpp)
static inline uint16_t cuda_host_bf16_rn(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static inline float cuda_host_bf16_to_float(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }
struct __attribute__((aligned(4))) __nv_bfloat162 { uint16_t x, y; };  // x in the low half
static inline __nv_bfloat162 __floats2bfloat162_rn(float lo, float hi) {
    return __nv_bfloat162{cuda_host_bf16_rn(lo), cuda_host_bf16_rn(hi)};
}

/* ---- runtime API: the part the kernels' host code uses */
typedef struct CUstream_st *cudaStream_t;
enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
};
typedef enum cudaError cudaError_t;
enum cudaDeviceAttr { cudaDevAttrMaxSharedMemoryPerBlockOptin = 97 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };

// The emulated device. smem_optin: the opt-in shared memory per block (H100 / H200: 227 KB;
// A100: 166912 = 163 KB); a test may change it between launches.
struct cuda_host_device_t {
    int smem_optin = 232448;
    unsigned long launches = 0;  // kernel launches run so far (all blocks of one = one)
};
inline cuda_host_device_t cuda_host_device;

namespace cuda_host {
inline cudaError_t last_error = cudaSuccess;                   // for cudaGetLastError (main thread)
inline std::map<const void *, int> max_dynamic_smem;           // cudaFuncSetAttribute grants
[[noreturn]] inline void fatal(const char *fmt, const char *a = "", long b = 0, long c = 0) {
    fprintf(stderr, "cuda_host: ");
    fprintf(stderr, fmt, a, b, c);
    fprintf(stderr, "\n");
    fflush(stderr);
    abort();
}
}  // namespace cuda_host

static inline const char *cudaGetErrorName(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    }
    return "cudaErrorUnknown";
}
static inline const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument (cuda_host)";
    case cudaErrorMemoryAllocation: return "out of memory (cuda_host)";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument (cuda_host)";
    }
    return "unknown error";
}
static inline cudaError_t cudaGetLastError(void) {
    cudaError_t e = cuda_host::last_error;
    cuda_host::last_error = cudaSuccess;
    return e;
}
static inline cudaError_t cudaGetDevice(int *dev) { *dev = 0; return cudaSuccess; }
static inline cudaError_t cudaGetDeviceCount(int *n) { *n = 1; return cudaSuccess; }
static inline cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr attr, int dev) {
    if (attr != cudaDevAttrMaxSharedMemoryPerBlockOptin || dev != 0) return cudaErrorInvalidValue;
    *v = cuda_host_device.smem_optin;
    return cudaSuccess;
}
template <typename F>
static inline cudaError_t cudaFuncSetAttribute(F *kernel, cudaFuncAttribute attr, int value) {
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 || value > cuda_host_device.smem_optin)
        return cudaErrorInvalidValue;
    cuda_host::max_dynamic_smem[reinterpret_cast<const void *>(kernel)] = value;
    return cudaSuccess;
}

/* ================================================================ threads, barriers, warps */
namespace cuda_host {

inline double timeout_s() {
    static double t = [] {
        const char *e = getenv("LSSAR_HOST_TIMEOUT");
        double v = e ? atof(e) : 0.0;
        return v > 0.0 ? v : 120.0;
    }();
    return t;
}

inline void futex_wait(std::atomic<uint32_t> *w, uint32_t v) {
    syscall(SYS_futex, reinterpret_cast<uint32_t *>(w), FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
}
inline void futex_wake(std::atomic<uint32_t> *w, int n) {
    syscall(SYS_futex, reinterpret_cast<uint32_t *>(w), FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

// A counting barrier on a futex: `expected` participants; a participant that leaves (retire)
// counts as arrived from then on. strict (warps): any use after a participant left is an error.
struct Barrier {
    std::atomic<uint32_t> gen{0};
    std::atomic<int> remaining{0}, expected{0};
    std::atomic<int> left{0};
    bool strict = false;
    const char *what = "";

    void reset(int n, bool strict_, const char *what_) {
        expected = n;
        remaining = n;
        left = 0;
        strict = strict_;
        what = what_;
    }
    void release() {
        remaining.store(expected.load());
        gen.fetch_add(1);
        futex_wake(&gen, INT32_MAX);
    }
    void wait() {
        if (strict && left.load())
            fatal("%s: a warp collective after a lane of the warp returned (undefined on a GPU)", what);
        uint32_t g = gen.load();
        if (remaining.fetch_sub(1) == 1) { release(); return; }
        double t0 = now();
        while (gen.load() == g) {
            struct timespec tmo = {1, 0};  // (wake up once a second to check the deadlock timeout)
            syscall(SYS_futex, reinterpret_cast<uint32_t *>(&gen), FUTEX_WAIT_PRIVATE, g, &tmo, NULL, 0);
            if (gen.load() == g && now() - t0 > timeout_s())
                fatal("%s: no progress for %ld s: a deadlock (threads at different barriers, or a lane "
                      "missing from a warp collective); LSSAR_HOST_TIMEOUT sets the limit", what, (long)(now() - t0));
        }
    }
    static double now() {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
    }
    void retire() {
        left.fetch_add(1);
        expected.fetch_sub(1);  // before the arrival below: whoever releases sees the new count
        if (remaining.fetch_sub(1) == 1) release();
    }
};

// One warp's exchange buffers (two, used alternately by consecutive collectives).
struct WarpSlot { uint32_t w[6]; };  // a shuffle uses w[0]; mma: a[4], b[2]; ldmatrix: an address
struct Warp {
    Barrier bar;
    WarpSlot buf[2][32];
};

struct Block {
    Barrier bar;           // __syncthreads
    Warp warps[32];        // up to 1024 threads
    unsigned char *dyn = nullptr;  // dyn_bytes, then GUARD bytes that must stay as they were
    size_t dyn_bytes = 0;
    static constexpr size_t GUARD = 64;
    static constexpr size_t STATIC_BYTES = 48 * 1024;
    alignas(64) unsigned char stat[STATIC_BYTES];
};

// The calling CUDA thread's place.
struct ThreadState {
    Block *blk = nullptr;
    unsigned tid = 0, warp = 0, lane = 0;
    unsigned phase = 0;       // collectives so far in this block (selects the exchange buffer)
    size_t stat_used = 0;     // static shared bytes handed out so far (same order in every thread)
    // cp.async: this thread's copies not yet waited for, each with the group it was committed in
    // (group -1: issued, not yet committed)
    struct Copy { unsigned char *dst; const unsigned char *src; unsigned n, fill; long group; };
    std::vector<Copy> copies;
    long groups = 0;          // groups committed so far
};
inline thread_local ThreadState ts;

// A pool of worker threads that run one block at a time: run(n, f) calls f(tid) on workers
// 0..n-1 and returns when all have finished. Each worker sleeps on its own futex word, so a block
// wakes exactly its n threads (no thundering herd on a shared lock).
class Pool {
  public:
    ~Pool() {
        stop_ = true;
        for (auto &w : workers_) {
            w->go.fetch_add(1);
            futex_wake(&w->go, 1);
        }
        for (auto &w : workers_) w->thread.join();
    }
    void run(unsigned n, const std::function<void(unsigned)> &f) {
        while (workers_.size() < n) {
            workers_.emplace_back(new Worker);
            Worker *w = workers_.back().get();
            unsigned id = (unsigned)workers_.size() - 1;
            w->thread = std::thread([this, w, id] { loop(w, id); });
            pin(w->thread, id / 32);
        }
        job_ = &f;
        remaining_ = n;
        const uint32_t done = done_.load();
        for (unsigned i = 0; i < n; i++) {
            workers_[i]->go.fetch_add(1);
            futex_wake(&workers_[i]->go, 1);
        }
        while (done_.load() == done) futex_wait(&done_, done);
        job_ = nullptr;
    }

  private:
    // The lanes of a warp share a CPU (warp w on the w-th allowed CPU, round robin): a warp
    // collective then wakes threads on the same CPU, not across CPUs.
    static void pin(std::thread &t, unsigned warp) {
        static cpu_set_t allowed;
        static int ncpu = [] {
            CPU_ZERO(&allowed);
            return sched_getaffinity(0, sizeof allowed, &allowed) == 0 ? CPU_COUNT(&allowed) : 0;
        }();
        if (ncpu <= 1) return;
        int k = (int)(warp % (unsigned)ncpu), cpu = 0;
        for (; cpu < CPU_SETSIZE; cpu++)
            if (CPU_ISSET(cpu, &allowed) && k-- == 0) break;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        pthread_setaffinity_np(t.native_handle(), sizeof one, &one);
    }
    struct Worker {
        std::thread thread;
        std::atomic<uint32_t> go{0};  // incremented once per job (and to stop)
    };
    void loop(Worker *w, unsigned id) {
        for (uint32_t seen = 0;; seen++) {
            while (w->go.load() == seen) futex_wait(&w->go, seen);
            if (stop_) return;
            (*job_)(id);
            if (remaining_.fetch_sub(1) == 1) {
                done_.fetch_add(1);
                futex_wake(&done_, 1);
            }
        }
    }
    std::vector<std::unique_ptr<Worker>> workers_;
    const std::function<void(unsigned)> *job_ = nullptr;
    std::atomic<uint32_t> remaining_{0}, done_{0};
    std::atomic<bool> stop_{false};
};
inline Pool &pool() {
    static Pool p;
    return p;
}

// A crash inside a kernel (an access out of bounds): say which CUDA thread it was, then die of
// the signal as before. (Not under AddressSanitizer, whose own report is better.)
inline void on_crash(int sig) {
    char msg[160];
    if (ts.blk) {
        int n = snprintf(msg, sizeof msg, "cuda_host: signal %d in a kernel: block (%u, %u, %u), thread %u (warp %u, lane %u)\n",
                         sig, blockIdx.x, blockIdx.y, blockIdx.z, ts.tid, ts.warp, ts.lane);
        if (n > 0) (void)!write(2, msg, (size_t)n);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}
inline void install_crash_report() {
#if !defined(__SANITIZE_ADDRESS__)
    static bool done = false;
    if (done) return;
    done = true;
    signal(SIGSEGV, on_crash);
    signal(SIGBUS, on_crash);
#endif
}

// Run `body` as every thread of every block of the launch; false (and last_error set) when the
// runtime would refuse the launch.
inline bool launch(const void *kernel, dim3 grid, dim3 block, size_t smem, const std::function<void()> &body) {
    unsigned long nt = (unsigned long)block.x * block.y * block.z;
    cudaError_t err = cudaSuccess;
    if (nt == 0 || nt > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64 || grid.x == 0 || grid.y == 0 ||
        grid.z == 0 || grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535)
        err = cudaErrorInvalidConfiguration;
    else if (block.y != 1 || block.z != 1)
        fatal("%s: 2-D and 3-D blocks are not emulated", "launch");
    if (!err && smem > 48 * 1024) {
        auto it = max_dynamic_smem.find(kernel);
        if (it == max_dynamic_smem.end() || (size_t)it->second < smem || smem > (size_t)cuda_host_device.smem_optin)
            err = cudaErrorInvalidValue;  // what the runtime says to a launch without the opt-in
    }
    if (err) {
        last_error = err;
        return false;
    }
    cuda_host_device.launches++;
    install_crash_report();
    gridDim = grid;
    blockDim = block;
    Block *blk = new Block;
    const unsigned nwarps = (unsigned)((nt + 31) / 32);
    for (unsigned by = 0; by < grid.z * grid.y; by++)
        for (unsigned bx = 0; bx < grid.x; bx++) {
            const uint3 bi = {bx, by % grid.y, by / grid.y};
            blk->bar.reset((int)nt, false, "__syncthreads");
            for (unsigned w = 0; w < nwarps; w++) {
                unsigned lanes = w + 1 < nwarps || nt % 32 == 0 ? 32 : (unsigned)(nt % 32);
                blk->warps[w].bar.reset((int)lanes, true, "warp collective");
            }
            blk->dyn_bytes = smem;
            blk->dyn = static_cast<unsigned char *>(malloc(smem + Block::GUARD));
            if (!blk->dyn) fatal("%s: out of memory for %ld bytes of shared memory", "launch", (long)smem);
            memset(blk->dyn, 0xff, smem);
            for (size_t i = 0; i < Block::GUARD; i++) blk->dyn[smem + i] = (unsigned char)(0xa5 ^ i);
            memset(blk->stat, 0xff, Block::STATIC_BYTES);
            pool().run((unsigned)nt, [&](unsigned tid) {
                ts.blk = blk;
                ts.tid = tid;
                ts.warp = tid / 32;
                ts.lane = tid % 32;
                ts.phase = 0;
                ts.stat_used = 0;
                threadIdx = uint3{tid, 0, 0};
                blockIdx = bi;
                body();
                if (!ts.copies.empty())
                    fatal("%s: thread %ld ended with %ld copies not waited for", "cp.async", (long)tid,
                          (long)ts.copies.size());
                ts.groups = 0;
                blk->warps[ts.warp].bar.retire();
                blk->bar.retire();
                ts.blk = nullptr;
            });
            for (size_t i = 0; i < Block::GUARD; i++)
                if (blk->dyn[smem + i] != (unsigned char)(0xa5 ^ i))
                    fatal("%s: block (%ld, %ld) wrote past its dynamic shared memory", "launch", (long)bx, (long)by);
            free(blk->dyn);
            blk->dyn = nullptr;
        }
    delete blk;
    return true;
}

inline void need_block(const char *what) {
    if (!ts.blk) fatal("%s called outside a kernel", what);
}
// The exchange buffer of this lane's next collective, and the warp's barrier.
inline WarpSlot *exchange(WarpSlot **all) {
    Warp &w = ts.blk->warps[ts.warp];
    WarpSlot *b = w.buf[ts.phase++ & 1];
    *all = b;
    return &b[ts.lane];
}
// The n bytes at p lie in the calling block's shared memory (its dynamic buffer or static arena).
inline bool in_shared(const void *p, size_t n) {
    const unsigned char *c = static_cast<const unsigned char *>(p);
    const Block *blk = ts.blk;
    return (blk->dyn && c >= blk->dyn && c + n <= blk->dyn + blk->dyn_bytes) ||
           (c >= blk->stat && c + n <= blk->stat + Block::STATIC_BYTES);
}
inline void full_mask(unsigned mask, const char *what) {
    if (mask != 0xffffffffu) fatal("%s: only the full mask is emulated", what);
}

}  // namespace cuda_host

/* ---- what the kernels call */
static inline void __syncthreads(void) {
    cuda_host::need_block("__syncthreads");
    cuda_host::ts.blk->bar.wait();
}
static inline void __syncwarp(unsigned mask = 0xffffffffu) {
    cuda_host::need_block("__syncwarp");
    cuda_host::full_mask(mask, "__syncwarp");
    cuda_host::ts.blk->warps[cuda_host::ts.warp].bar.wait();
}
// __shfl_xor_sync / __shfl_sync for 4-byte values: every lane publishes its value, then reads
// lane src's (width 32).
template <typename T>
static inline T cuda_host_shfl(unsigned mask, T v, unsigned src, const char *what) {
    static_assert(sizeof(T) == 4, "4-byte shuffles only");
    cuda_host::need_block(what);
    cuda_host::full_mask(mask, what);
    cuda_host::WarpSlot *all, *mine = cuda_host::exchange(&all);
    memcpy(&mine->w[0], &v, 4);
    cuda_host::ts.blk->warps[cuda_host::ts.warp].bar.wait();
    T r;
    memcpy(&r, &all[src & 31].w[0], 4);
    return r;
}
static inline float __shfl_xor_sync(unsigned mask, float v, int lane_mask, int width = 32) {
    if (width != 32) cuda_host::fatal("%s: width %ld is not emulated", "__shfl_xor_sync", width);
    return cuda_host_shfl(mask, v, cuda_host::ts.lane ^ (unsigned)lane_mask, "__shfl_xor_sync");
}
static inline int __shfl_xor_sync(unsigned mask, int v, int lane_mask, int width = 32) {
    if (width != 32) cuda_host::fatal("%s: width %ld is not emulated", "__shfl_xor_sync", width);
    return cuda_host_shfl(mask, v, cuda_host::ts.lane ^ (unsigned)lane_mask, "__shfl_xor_sync");
}
static inline float __shfl_sync(unsigned mask, float v, int src, int width = 32) {
    if (width != 32) cuda_host::fatal("%s: width %ld is not emulated", "__shfl_sync", width);
    return cuda_host_shfl(mask, v, (unsigned)src, "__shfl_sync");
}
static inline int __shfl_sync(unsigned mask, int v, int src, int width = 32) {
    if (width != 32) cuda_host::fatal("%s: width %ld is not emulated", "__shfl_sync", width);
    return cuda_host_shfl(mask, v, (unsigned)src, "__shfl_sync");
}

/* mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {c} = {a} x {b} + {c}, one warp. The PTX
   ISA's fragment layout ("Matrix Fragments for mma.m16n8k16 with floating point type"), with
   g = lane >> 2 (groupID) and t = lane % 4 (threadID_in_group); two bf16 per 32-bit register, the
   element with the lower index in the low half:
     A (16 x 16, row): a_i, i = 0..7, in register i / 2:
        row = g      for i in {0, 1, 4, 5},  g + 8 for i in {2, 3, 6, 7}
        col = 2t + (i & 1)  for i < 4,       2t + (i & 1) + 8 for i >= 4
     B (16 x 8, col):  b_i, i = 0..3, in register i / 2:
        row = 2t + (i & 1)  for i < 2,       2t + (i & 1) + 8 for i >= 2;   col = g
     C, D (16 x 8, f32): c_i, i = 0..3:
        row = g for i < 2, g + 8 for i >= 2;  col = 2t + (i & 1)
   Every lane gathers the whole A and B (32 lanes' registers) and computes its four D elements:
   the 16 products (of bf16 values: exact in fp32) summed in k order from 0, one fp32 rounding per
   addition, then added to C (the emulation's k-step). */
static inline void cuda_host_mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    cuda_host::need_block("mma.sync");
    cuda_host::WarpSlot *all, *mine = cuda_host::exchange(&all);
    for (int r = 0; r < 4; r++) mine->w[r] = a[r];
    mine->w[4] = b0;
    mine->w[5] = b1;
    cuda_host::ts.blk->warps[cuda_host::ts.warp].bar.wait();
    float A[16][16], B[16][8];
    for (int ln = 0; ln < 32; ln++) {
        const int g = ln >> 2, t = ln & 3;
        const uint32_t *w = all[ln].w;
        for (int i = 0; i < 8; i++) {
            int row = (i & 2) ? g + 8 : g;        // i in {2, 3, 6, 7}: g + 8
            int col = 2 * t + (i & 1) + (i >= 4 ? 8 : 0);
            uint32_t reg = w[i / 2];
            A[row][col] = cuda_host_bf16_to_float((uint16_t)((i & 1) ? reg >> 16 : reg & 0xffffu));
        }
        for (int i = 0; i < 4; i++) {
            int row = 2 * t + (i & 1) + (i >= 2 ? 8 : 0);
            uint32_t reg = w[4 + i / 2];
            B[row][g] = cuda_host_bf16_to_float((uint16_t)((i & 1) ? reg >> 16 : reg & 0xffffu));
        }
    }
    const int g = cuda_host::ts.lane >> 2, t = cuda_host::ts.lane & 3;
    for (int i = 0; i < 4; i++) {
        const int row = i < 2 ? g : g + 8, col = 2 * t + (i & 1);
        float sum = 0.0f;
        for (int k = 0; k < 16; k++) sum = fmaf(A[row][k], B[k][col], sum);  // (the product is exact)
        c[i] = c[i] + sum;
    }
}

/* ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16 {r0, r1, r2, r3}, [p], one warp. The PTX ISA
   ("Warp-level matrix load instruction: ldmatrix"): four 8 x 8 matrices of 16-bit elements; lane l
   gives the address of row l % 8 of matrix l / 8 (8 contiguous elements, 16-byte aligned, in shared
   memory); lane l receives in r_i the elements 2 (l % 4) and 2 (l % 4) + 1 of row l / 4 of matrix i
   (the lower index in the low half), or with .trans those of row l / 4 of its transpose: rows
   2 (l % 4) and 2 (l % 4) + 1, column l / 4. Every lane publishes its row address, then reads the
   rows it needs from the addresses of the others. An address outside the block's shared memory or
   not 16-byte aligned is the error it is on a GPU. */
static inline void cuda_host_ldmatrix_x4(uint32_t (&r)[4], const void *p, bool trans) {
    const char *what = trans ? "ldmatrix.x4.trans" : "ldmatrix.x4";
    cuda_host::need_block(what);
    cuda_host::Block *blk = cuda_host::ts.blk;
    if (!cuda_host::in_shared(p, 16))
        cuda_host::fatal("%s: lane %ld's row address is not in shared memory", what, (long)cuda_host::ts.lane);
    if ((uintptr_t)p % 16) cuda_host::fatal("%s: lane %ld's row address is not 16-byte aligned", what, (long)cuda_host::ts.lane);
    cuda_host::WarpSlot *all, *mine = cuda_host::exchange(&all);
    uintptr_t u = (uintptr_t)p;
    mine->w[0] = (uint32_t)u;
    mine->w[1] = (uint32_t)((uint64_t)u >> 32);
    blk->warps[cuda_host::ts.warp].bar.wait();
    auto row = [&](int ln) {  // the 8 elements of the row lane ln published
        return reinterpret_cast<const uint16_t *>((uintptr_t)((uint64_t)all[ln].w[1] << 32 | all[ln].w[0]));
    };
    const int l = cuda_host::ts.lane;
    for (int i = 0; i < 4; i++) {
        uint16_t lo, hi;
        if (!trans) {
            const uint16_t *rw = row(8 * i + l / 4);
            lo = rw[2 * (l % 4)];
            hi = rw[2 * (l % 4) + 1];
        } else {
            lo = row(8 * i + 2 * (l % 4))[l / 4];
            hi = row(8 * i + 2 * (l % 4) + 1)[l / 4];
        }
        r[i] = (uint32_t)lo | (uint32_t)hi << 16;
    }
}

/* cp.async.cg.shared.global [dst], [src], 16, src_size; cp.async.commit_group; cp.async.wait_group N
   (the PTX ISA's "Data Movement: cp.async"), per thread: a copy of 16 bytes from global to shared
   memory, of which the first src_size (0 or 16 here) come from src and the rest are zeros, lands
   at some time before the thread's wait_group that covers its group. Modelled as late as allowed:
   the copy is done at that wait_group, and until then the destination holds 0xff bytes (NaN as
   fp32 and bf16), so a read before the wait (or before the barrier that makes other threads'
   copies visible) shows up in the results. A copy outside the block's shared memory or not
   16-byte aligned, and a thread that ends with copies not waited for, are errors. */
static inline void cuda_host_cp_async16(void *dst, const void *src, unsigned src_size) {
    cuda_host::need_block("cp.async");
    unsigned char *d = static_cast<unsigned char *>(dst);
    if (!cuda_host::in_shared(d, 16))
        cuda_host::fatal("%s: thread %ld's destination is not in shared memory", "cp.async", (long)cuda_host::ts.tid);
    if ((uintptr_t)dst % 16 || (src_size && (uintptr_t)src % 16))
        cuda_host::fatal("%s: thread %ld's addresses are not 16-byte aligned", "cp.async", (long)cuda_host::ts.tid);
    if (src_size != 0 && src_size != 16) cuda_host::fatal("%s: src_size %ld is not emulated", "cp.async", (long)src_size);
    memset(d, 0xff, 16);
    cuda_host::ts.copies.push_back({d, static_cast<const unsigned char *>(src), 16, src_size, -1});
}
static inline void cuda_host_cp_async_commit(void) {
    cuda_host::need_block("cp.async.commit_group");
    for (auto &c : cuda_host::ts.copies)
        if (c.group < 0) c.group = cuda_host::ts.groups;
    cuda_host::ts.groups++;
}
// Wait until at most n of this thread's most recent groups are pending (copies not yet committed
// are pending too, as in the PTX ISA).
static inline void cuda_host_cp_async_wait(int n) {
    cuda_host::need_block("cp.async.wait_group");
    std::vector<cuda_host::ThreadState::Copy> left;
    for (auto &c : cuda_host::ts.copies) {
        if (c.group >= 0 && c.group < cuda_host::ts.groups - n) {
            memset(c.dst, 0, c.n);
            if (c.fill) memcpy(c.dst, c.src, c.fill);
        } else {
            left.push_back(c);
        }
    }
    cuda_host::ts.copies.swap(left);
}

/* ---- ordered hand-overs between the blocks of one launch (flash_attn.cu's sem_wait / sem_post:
   ld.acquire.gpu spinning until a counter in global memory holds v; st.release.gpu of the next
   value), and the L2 loads and stores (__ldcg, __stcg) of the data they guard. Blocks run here one
   after another in blockIdx order, so a wait can only ever be satisfied by an earlier block, which
   has finished: a wait that finds another value would spin forever here, and on a GPU it waits for
   a block with a larger index, which may not be resident (a deadlock). It is reported as that
   error. __threadfence orders nothing more here (x86 stores are seen in order, blocks do not
   overlap). */
static inline void cuda_host_sem_wait(const int *sem, int v) {
    cuda_host::need_block("sem_wait (ld.acquire.gpu spin)");
    int x = __atomic_load_n(sem, __ATOMIC_ACQUIRE);
    if (x != v)
        cuda_host::fatal("%s: a block waits for a counter to reach %ld, which holds %ld: only a later "
                         "block could set it (blocks may wait only on blocks launched before them)",
                         "sem_wait", (long)v, (long)x);
}
static inline void cuda_host_sem_post(int *sem, int v) {
    cuda_host::need_block("sem_post (st.release.gpu)");
    __atomic_store_n(sem, v, __ATOMIC_RELEASE);
}
static inline void __threadfence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
template <typename T> static inline T __ldcg(const T *p) { return *p; }
template <typename T> static inline void __stcg(T *p, T v) { *p = v; }

/* ---- shared memory (src/cuda/flash_attn.cu's FLASH_DYNAMIC_SHARED / FLASH_SHARED_ARRAY) */
static inline unsigned char *cuda_host_dynamic_shared(void) {
    cuda_host::need_block("extern __shared__");
    return cuda_host::ts.blk->dyn;
}
// Static __shared__ T name[n]: every thread declares the block's arrays in the same order, so
// the same running offset gives them the same storage.
template <typename T>
static inline T *cuda_host_static_shared(size_t n) {
    cuda_host::need_block("__shared__");
    size_t off = (cuda_host::ts.stat_used + alignof(T) - 1) / alignof(T) * alignof(T);
    if (off + n * sizeof(T) > cuda_host::Block::STATIC_BYTES)
        cuda_host::fatal("%s: more than %ld bytes of static shared memory", "__shared__", (long)cuda_host::Block::STATIC_BYTES);
    cuda_host::ts.stat_used = off + n * sizeof(T);
    return reinterpret_cast<T *>(cuda_host::ts.blk->stat + off);
}

/* ---- launches: cuda_host_launch(kernel, grid, block, smem, stream)(args...) is
   kernel<<<grid, block, smem, stream>>>(args...): the arguments are converted to the kernel's
   parameter types once, and every CUDA thread gets its own copy, as from the parameter space. */
template <typename... P>
struct cuda_host_launcher {
    void (*kernel)(P...);
    dim3 grid, block;
    size_t smem;
    template <typename... A>
    void operator()(A &&...args) const {
        std::tuple<P...> params(std::forward<A>(args)...);
        void (*k)(P...) = kernel;
        cuda_host::launch(reinterpret_cast<const void *>(kernel), grid, block, smem,
                          [&params, k] { std::apply(k, params); });
    }
};
template <typename... P>
static inline cuda_host_launcher<P...> cuda_host_launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem,
                                                        cudaStream_t stream) {
    (void)stream;  // synchronous
    return cuda_host_launcher<P...>{kernel, grid, block, smem};
}

#endif
