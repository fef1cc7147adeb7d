// matmul.c - linear layers through OpenBLAS cblas_sgemm; bias loops parallel with OpenMP.
//
// Threading: every sgemm here runs as one single-threaded OpenBLAS call per OpenMP thread, each on
// its own block of output rows (or columns), so the whole model runs on OpenMP's threads alone.
// With OpenBLAS's OpenMP build (what the Makefile links on Debian) a call inside a parallel region
// is single-threaded by itself. With the pthreads build, OpenBLAS keeps its own thread pool, which
// fights OpenMP's spinning threads for the cores (a training step loses much of its time in
// spin-waits; docs/PERF.md), so its thread count is set to 1 around our regions and restored
// after. (The OpenMP build's openblas_set_num_threads also changes OpenMP's own thread count, so
// it is only called for the pthreads build.)
// Determinism: the blocks are cut from the shape alone (CHUNK_MIN / CHUNK_PARTS), never from the
// thread count, and a single thread runs the same block calls one after the other. Cutting by
// the thread count (as before) gave results that differed between 1 and 2 threads: OpenBLAS
// picks its kernel from the shape of each call (its small-matrix kernels on AVX-512 CPUs sum in
// another order), so one output element came out of differently shaped calls.
#include <cblas.h>
#include <omp.h>
#include "core/dispatch.h"
#include "nn.h"

// C[r0:r1, c0:c1] += bias[c0:c1]
LSSAR_HOT static void add_bias(float *C, int ldc, const float *bias, int r0, int r1, int c0, int c1) {
    for (int r = r0; r < r1; r++) {
        float *c = C + (size_t)r * ldc;
        for (int j = c0; j < c1; j++) c[j] += bias[j];
    }
}

// Blocks of the larger output dimension: CHUNK_PARTS equal parts rounded up to whole 16-element
// groups (the kernels' register tiles), at least CHUNK_MIN, the last one ragged. Up to 8 threads
// get work. Small products (at most 2^18 multiply-adds) are one direct call: OpenBLAS runs those
// single-threaded itself (its interface/gemm.c threshold, 65536 x GEMM_MULTITHREAD_THRESHOLD 4),
// so they need no team (which costs a fork/join per call, and much more on a loaded machine).
#define CHUNK_MIN 128
#define CHUNK_PARTS 8

// C (M, N) = op(A) op(B) + beta C (+ bias (N) on every row if non-NULL), row-major, in blocks
// spread over the OpenMP threads; each thread adds the bias to its own block while it is still in
// cache. The blocks depend on the shape only, and every call runs single-threaded inside OpenBLAS
// (inside our own team for its OpenMP build, even when there is only one block: a multithreaded
// OpenBLAS call also sums differently), so the result does not depend on the thread count.
static void sgemm_par(int transA, int transB, int M, int N, int K, const float *A, int lda,
                      const float *B, int ldb, float beta, float *C, int ldc, const float *bias) {
    long work = (long)M * N * K;
    int split_rows = M >= N;   // cut the larger output dimension
    int len = split_rows ? M : N;
    int chunk = ((len + CHUNK_PARTS - 1) / CHUNK_PARTS + 15) / 16 * 16;
    if (chunk < CHUNK_MIN) chunk = CHUNK_MIN;
    int nchunks = (len + chunk - 1) / chunk;
    if (work <= (1L << 18)) {
        cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
                    M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
        if (bias) add_bias(C, ldc, bias, 0, M, 0, N);
        return;
    }
    int nt = omp_get_max_threads();
    int team = nt > 1 && !omp_in_parallel();
    int pthreads_blas = openblas_get_parallel() == 1;
    int blas_threads = team && pthreads_blas ? openblas_get_num_threads() : 1;
    if (blas_threads > 1) openblas_set_num_threads(1);
    #pragma omp parallel for schedule(static) num_threads(nt) if (team)
    for (int c = 0; c < nchunks; c++) {
        int i0 = c * chunk, i1 = i0 + chunk < len ? i0 + chunk : len;
        if (split_rows) {
            const float *a = transA ? A + i0 : A + (size_t)i0 * lda;
            cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
                        transB ? CblasTrans : CblasNoTrans, i1 - i0, N, K, 1.0f, a, lda, B, ldb, beta,
                        C + (size_t)i0 * ldc, ldc);
            if (bias) add_bias(C, ldc, bias, i0, i1, 0, N);
        } else {
            const float *b = transB ? B + (size_t)i0 * ldb : B + i0;
            cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
                        transB ? CblasTrans : CblasNoTrans, M, i1 - i0, K, 1.0f, A, lda, b, ldb, beta,
                        C + i0, ldc);
            if (bias) add_bias(C, ldc, bias, 0, M, i0, i1);
        }
    }
    if (blas_threads > 1) openblas_set_num_threads(blas_threads);
}

// out (N, OC) = inp (N, IC) @ weight^T (weight (OC, IC)) + bias (OC)
void matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
                    int N, int IC, int OC) {
    sgemm_par(0, 1, N, OC, IC, inp, IC, weight, IC, 0.0f, out, OC, bias);
}

// Column blocks so that each column's sum runs over the rows in order, whatever the threads.
#define COLBLK 64
LSSAR_HOT void colsum_accumulate(float *dbias, const float *dout, int N, int OC) {
    int nblk = (OC + COLBLK - 1) / COLBLK;
    #pragma omp parallel for schedule(static)
    for (int bk = 0; bk < nblk; bk++) {
        int j0 = bk * COLBLK, j1 = j0 + COLBLK < OC ? j0 + COLBLK : OC;
        float acc[COLBLK] = {0};
        for (int r = 0; r < N; r++) {
            const float *d = dout + (size_t)r * OC;
            for (int j = j0; j < j1; j++) acc[j - j0] += d[j];
        }
        for (int j = j0; j < j1; j++) dbias[j] += acc[j - j0];
    }
}

// dinp (N, IC) = / += dout (N, OC) @ weight (OC, IC)
// dweight (OC, IC) += dout^T @ inp;  dbias (OC) += colsum(dout)
void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                     const float *inp, const float *weight, int N, int IC, int OC, int accumulate) {
    if (dinp) sgemm_par(0, 0, N, IC, OC, dout, OC, weight, IC, accumulate ? 1.0f : 0.0f, dinp, IC, NULL);
    if (dweight) sgemm_par(1, 0, OC, IC, N, dout, OC, inp, IC, 1.0f, dweight, IC, NULL);
    if (dbias) colsum_accumulate(dbias, dout, N, OC);
}
