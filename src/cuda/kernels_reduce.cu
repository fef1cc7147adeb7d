// kernels_reduce.cu - deterministic sums: column sums (matmul dbias, and the second pass of every
// column reduction) and the sum of squares in double. Two stages each, shapes fixed by the sizes
// alone (never by the device), no atomics: the same bits on every run and every GPU, and those of
// kernels_emu.c (kemu_colsum, kemu_sum_squares, kemu_block_sum_squares); and the gradient norm
// from the block sums (kemu_clip_norm).
#include "cuda/cuda_common.h"
#include "nn/gradnorm.h"

// part (chunks, C): grid (ceil(C / 32), chunks of 256 rows), block (32, 8), as the layernorm
// parameter partials (kernels_layernorm.cu); x: activations of element type A (km_ld)
template <typename A> static __global__ void colsum_partials_kernel(float *part, const A *x, int N, int C) {
    __shared__ float sh[KM_COL_TY][KM_COL_TX];
    int tx = threadIdx.x, ty = threadIdx.y, j = blockIdx.x * KM_COL_TX + tx, chunk = blockIdx.y;
    sh[ty][tx] = j < C ? km_colsum_thread(x, N, C, chunk, ty, j) : 0.0f;
    __syncthreads();
    if (ty == 0 && j < C) {
        float p[KM_COL_TY];
        for (int k = 0; k < KM_COL_TY; k++) p[k] = sh[k][tx];
        part[(size_t)chunk * C + j] = km_tree_f(p, KM_COL_TY);
    }
}

// dst[j] += the chunks of column j in order; one thread per column
static __global__ void col_finish_kernel(float *dst, const float *part, int nchunks, int C) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j < C) dst[j] = KM_ADD(dst[j], km_col_finish(part, nchunks, C, j));
}

int cuda_col_finish(float *dst, const float *part, int nchunks, int C, cudaStream_t stream) {
    col_finish_kernel<<<cuda_blocks(C, KM_FIN_THREADS), KM_FIN_THREADS, 0, stream>>>(dst, part, nchunks, C);
    CUDA_LAUNCHED("col_finish_kernel");
    return 0;
}

size_t cuda_colsum_scratch(int N, int C) {
    return cuda_round256(sizeof(float) * (size_t)km_col_chunks(N) * C);
}

int cuda_colsum(lssar_dtype at, float *dst, const void *x, int N, int C, void *scratch, cudaStream_t stream) {
    if (N <= 0 || C <= 0) return 0;
    int nch = km_col_chunks(N);
    float *part = (float *)scratch;
    dim3 grid(cuda_blocks(C, KM_COL_TX), nch), block(KM_COL_TX, KM_COL_TY);
    int rc = cuda_by_act(at, [&](auto tag) {
        typedef CUDA_ACT_T(tag) A;
        colsum_partials_kernel<<<grid, block, 0, stream>>>(part, (const A *)x, N, C);
        CUDA_LAUNCHED("colsum_partials_kernel");
        return 0;
    });
    return rc ? rc : cuda_col_finish(dst, part, nch, C, stream);
}

// Sum of squares, stage 1: block b sums chunk b (KM_SS_CHUNK values) into part[b] (double)
static __global__ void sumsq_partials_kernel(double *part, const float *x, size_t n) {
    __shared__ double sh[KM_WARP];
    double s = cuda_block_sum(km_ss_thread(x, n, blockIdx.x, threadIdx.x), sh);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}
// stage 2: one block over the nb partials
static __global__ void sumsq_finish_kernel(double *out, const double *part, size_t nb) {
    __shared__ double sh[KM_WARP];
    double s = cuda_block_sum(km_ss_finish_thread(part, nb, threadIdx.x), sh);
    if (threadIdx.x == 0) *out = s;
}

size_t cuda_sum_squares_scratch(size_t n) {
    size_t nb = (n + KM_SS_CHUNK - 1) / KM_SS_CHUNK;
    return cuda_round256(sizeof(double) * (nb ? nb : 1));
}

int cuda_sum_squares(double *out, const float *x, size_t n, void *scratch, cudaStream_t stream) {
    size_t nb = (n + KM_SS_CHUNK - 1) / KM_SS_CHUNK;
    if (nb > 0x7fffffffu)
        return lssar_fail(LSSAR_E_SIZE, "cuda sum_squares: %zu values is more than one launch covers", n);
    double *part = (double *)scratch;
    if (nb) {
        sumsq_partials_kernel<<<(unsigned)nb, KM_SS_THREADS, 0, stream>>>(part, x, n);
        CUDA_LAUNCHED("sumsq_partials_kernel");
    }
    // nb == 0: the finish sums nothing and writes 0
    sumsq_finish_kernel<<<1, KM_SS_THREADS, 0, stream>>>(out, part, nb);
    CUDA_LAUNCHED("sumsq_finish_kernel");
    return 0;
}

// The sums of squares of every block of `block` values (a multiple of KM_SS_CHUNK) at once. Stage 1
// is sumsq_partials_kernel over the whole range: its chunks are those of each block on its own (a
// block starts on a chunk boundary, and only the last block, holding the range's end, has a
// shorter last chunk). Stage 2: block b of this kernel is sumsq_finish_kernel over block b's
// chunks. So out[b] has the bits of cuda_sum_squares on that block alone.
static __global__ void sumsq_blocks_finish_kernel(double *out, const double *part, size_t nchunks,
                                                  size_t per) {
    __shared__ double sh[KM_WARP];
    size_t c0 = (size_t)blockIdx.x * per, nc = nchunks - c0 < per ? nchunks - c0 : per;
    double s = cuda_block_sum(km_ss_finish_thread(part + c0, nc, threadIdx.x), sh);
    if (threadIdx.x == 0) out[blockIdx.x] = s;
}

size_t cuda_block_sum_squares_scratch(size_t n) { return cuda_sum_squares_scratch(n); }

int cuda_block_sum_squares(double *out, const float *x, size_t n, size_t block, void *scratch,
                           cudaStream_t stream) {
    if (block == 0 || block % KM_SS_CHUNK)
        return lssar_fail(LSSAR_E_ARG, "cuda block_sum_squares: blocks of %zu values; use a multiple of %d",
                          block, KM_SS_CHUNK);
    size_t nchunks = (n + KM_SS_CHUNK - 1) / KM_SS_CHUNK, nb = (n + block - 1) / block;
    if (nchunks > 0x7fffffffu)
        return lssar_fail(LSSAR_E_SIZE, "cuda block_sum_squares: %zu values is more than one launch covers",
                          n);
    if (!nb) return 0;
    double *part = (double *)scratch;
    sumsq_partials_kernel<<<(unsigned)nchunks, KM_SS_THREADS, 0, stream>>>(part, x, n);
    CUDA_LAUNCHED("sumsq_partials_kernel");
    sumsq_blocks_finish_kernel<<<(unsigned)nb, KM_SS_THREADS, 0, stream>>>(out, part, nchunks,
                                                                           block / KM_SS_CHUNK);
    CUDA_LAUNCHED("sumsq_blocks_finish_kernel");
    return 0;
}

// One thread: the norm of the block sums (nn/gradnorm.h, a serial sum in block order: a few
// thousand additions) and the clip factor for cuda_scale_by
static __global__ void clip_norm_kernel(float *norm, float *factor, const double *ss, size_t nb, float clip) {
    if (threadIdx.x || blockIdx.x) return;
    float nm = nn_norm_of_blocks(ss, nb);
    *norm = nm;
    *factor = nn_clip_factor(nm, clip);
}

int cuda_clip_norm(float *x, size_t n, const double *ss, size_t nb, float clip, float *norm, float *factor,
                   cudaStream_t stream) {
    clip_norm_kernel<<<1, KM_WARP, 0, stream>>>(norm, factor, ss, nb, clip);
    CUDA_LAUNCHED("clip_norm_kernel");
    return cuda_scale_by(x, n, factor, stream);
}
