// kernels_reduce.cu - deterministic sums: column sums (matmul dbias, and the second pass of every
// column reduction) and the sum of squares in double. Two stages each, shapes fixed by the sizes
// alone (never by the device), no atomics: the same bits on every run and every GPU, and those of
// kernels_emu.c (kemu_colsum, kemu_sum_squares).
#include "cuda/cuda_common.h"

// part (chunks, C): grid (ceil(C / 32), chunks of 256 rows), block (32, 8), as the layernorm
// parameter partials (kernels_layernorm.cu)
static __global__ void colsum_partials_kernel(float *part, const float *x, int N, int C) {
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

size_t cuda_colsum_scratch(int N, int C) { return cuda_round256(sizeof(float) * (size_t)km_col_chunks(N) * C); }

int cuda_colsum(float *dst, const float *x, int N, int C, void *scratch, cudaStream_t stream) {
    if (N <= 0 || C <= 0) return 0;
    int nch = km_col_chunks(N);
    float *part = (float *)scratch;
    dim3 grid(cuda_blocks(C, KM_COL_TX), nch), block(KM_COL_TX, KM_COL_TY);
    colsum_partials_kernel<<<grid, block, 0, stream>>>(part, x, N, C);
    CUDA_LAUNCHED("colsum_partials_kernel");
    return cuda_col_finish(dst, part, nch, C, stream);
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
