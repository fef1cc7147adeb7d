// dist_nccl.cu - the CUDA backend's data-parallel collectives over NCCL: an all-to-all-v and a
// rank-order sum (dist_sum), an in-place all-gather-v (dist_allgather); see dist_nccl.h.
#include <string.h>
#include "cuda/cuda_common.h"
#include "cuda/dist_nccl.h"
extern "C" {
#include "core/dist.h"
}

#define DS_MAX_BLOCKS (1u << 20)   /* grid-stride beyond, as kernels_elementwise.cu */

/* ---- errors: LSSAR_E_IO, "rank R: " first in a job of several ranks (as lssar_dist_agree's) */
// ": " and NCCL's own last message (often the cause: a duplicate GPU, a refused connection), or ""
static void nccl_detail(char *buf, size_t n) {
    const char *d = ncclGetLastError(NULL);
    snprintf(buf, n, "%s%s", d && *d ? ": " : "", d ? d : "");
}
static int dist_fail_nccl(ncclResult_t r, const char *what) {
    char detail[512];
    nccl_detail(detail, sizeof detail);
    return lssar_fail(LSSAR_E_IO, "rank %d: %s failed: %s%s", lssar_dist_rank(), what, ncclGetErrorString(r),
                      detail);
}
static int dist_fail_cuda(cudaError_t e, const char *what) {
    const int size = lssar_dist_size();
    if (size == 1) return lssar_fail(LSSAR_E_IO, "dist_sum: %s failed: %s", what, cudaGetErrorString(e));
    return lssar_fail(LSSAR_E_IO, "rank %d: dist_sum: %s failed: %s", lssar_dist_rank(), what,
                      cudaGetErrorString(e));
}

/* ---- the rank-order sum */
// out (n) = (accumulate ? out : 0) + piece 0 + piece 1 + ... (piece s at p + s * stride), one
// rounding per addition in that order, as lssar_dist_sum_f32 on the host: the same bits
static __global__ void sum_pieces_kernel(float *out, const float *p, size_t stride, int npieces, size_t n,
                                         int accumulate) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float s = accumulate ? KM_ADD(out[i], p[i]) : p[i];
        for (int k = 1; k < npieces; k++) s = KM_ADD(s, p[(size_t)k * stride + i]);
        out[i] = s;
    }
}
static int sum_pieces(float *out, const float *p, size_t stride, int npieces, size_t n, int accumulate,
                      cudaStream_t stream) {
    if (!n) return 0;
    size_t b = (n + KM_EW_THREADS - 1) / KM_EW_THREADS;
    sum_pieces_kernel<<<b < DS_MAX_BLOCKS ? (unsigned)b : DS_MAX_BLOCKS, KM_EW_THREADS, 0, stream>>>(
        out, p, stride, npieces, n, accumulate);
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : dist_fail_cuda(e, "the launch of sum_pieces_kernel");
}

/* ---- the communicator */
// Collective, from the first dist_sum / dist_allgather of a context. Every failure goes through
// lssar_dist_agree: a rank that simply returned would leave the others waiting for it in the
// broadcast or in ncclCommInitRank.
static int comm_create(ncclComm_t *comm) {
    const int rank = lssar_dist_rank(), size = lssar_dist_size();
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    char detail[512];
    ncclResult_t r;
    int rc = 0;
    if (rank == 0 && (r = ncclGetUniqueId(&id)) != ncclSuccess) {
        nccl_detail(detail, sizeof detail);
        rc = lssar_fail(LSSAR_E_IO, "ncclGetUniqueId failed: %s%s", ncclGetErrorString(r), detail);
    }
    if ((rc = lssar_dist_agree(rc))) return rc;
    if ((rc = lssar_dist_bcast(&id, sizeof id, 0))) return rc;
    ncclComm_t cm = NULL;
    if ((r = ncclCommInitRank(&cm, size, id, rank)) != ncclSuccess) {
        int dev = -1;
        cudaGetDevice(&dev);
        nccl_detail(detail, sizeof detail);
        // two ranks on one GPU (which NCCL refuses) is the usual ncclInvalidUsage here
        rc = lssar_fail(LSSAR_E_IO, "ncclCommInitRank (%d ranks, CUDA device %d) failed: %s%s%s", size, dev,
                        ncclGetErrorString(r), detail,
                        r == ncclInvalidUsage ? " (every rank needs a GPU of its own)" : "");
        cm = NULL;   // not made: nothing to free
    }
    if ((rc = lssar_dist_agree(rc))) {
        if (cm) ncclCommDestroy(cm);
        return rc;
    }
    *comm = cm;
    return 0;
}

void cuda_dist_free(ncclComm_t comm, int failed) {
    if (!comm) return;
    if (failed) ncclCommAbort(comm);
    else ncclCommDestroy(comm);
}

/* ---- the collectives */
// A failed call inside a group fails the whole group at ncclGroupEnd (nothing of it is launched),
// and the group must be closed all the same: the first failure is the one reported.
#define GROUP_CALL(call, name)                            \
    do {                                                  \
        if (r == ncclSuccess && (r = (call)) != ncclSuccess) what = name; \
    } while (0)

// Opens a group on the communicator, which the first collective of a context creates.
static int group_begin(ncclComm_t *comm) {
    int rc = *comm ? 0 : comm_create(comm);
    if (rc) return rc;
    ncclResult_t r = ncclGroupStart();
    return r == ncclSuccess ? 0 : dist_fail_nccl(r, "ncclGroupStart");
}

// Closes the group whatever happened inside it; r and what: the first failed call in it, if any.
static int group_end(ncclResult_t r, const char *what) {
    ncclResult_t end = ncclGroupEnd();
    if (r == ncclSuccess) {
        r = end;
        what = "ncclGroupEnd";
    }
    return r == ncclSuccess ? 0 : dist_fail_nccl(r, what);
}

int cuda_dist_sum(ncclComm_t *comm, float *out, const float *x, const size_t *off, const size_t *cnt,
                  int accumulate, float *scratch, cudaStream_t stream) {
    const int me = lssar_dist_rank(), size = lssar_dist_size();
    const size_t n = cnt[me];
    if (size == 1) {   // the only piece is our own: no NCCL
        const float *p = x + off[0];
        if (accumulate) return sum_pieces(out, p, 0, 1, n, 1, stream);
        if (out == p || !n) return 0;
        cudaError_t e = cudaMemcpyAsync(out, p, n * sizeof(float), cudaMemcpyDeviceToDevice, stream);
        return e == cudaSuccess ? 0 : dist_fail_cuda(e, "cudaMemcpyAsync");
    }
    // All-to-all-v: rank s's piece for this rank (cnt[me] floats) lands at scratch + s * n. A
    // send and the peer's receive have the same count (cnt is the same on every rank), so both
    // sides skip the empty ones alike.
    int rc = group_begin(comm);
    if (rc) return rc;
    ncclResult_t r = ncclSuccess;
    const char *what = NULL;
    for (int s = 0; s < size; s++) {
        if (cnt[s]) GROUP_CALL(ncclSend(x + off[s], cnt[s], ncclFloat, s, *comm, stream), "ncclSend");
        if (n) GROUP_CALL(ncclRecv(scratch + (size_t)s * n, n, ncclFloat, s, *comm, stream), "ncclRecv");
    }
    if ((rc = group_end(r, what))) return rc;
    // after the exchange on the stream, so out may lie inside x (a sum into the gradient in place)
    return sum_pieces(out, scratch, n, size, n, accumulate, stream);
}

int cuda_dist_allgather(ncclComm_t *comm, float *x, const size_t *off, const size_t *cnt, int root,
                        cudaStream_t stream) {
    const int size = lssar_dist_size(), rank = lssar_dist_rank();
    if (size == 1) return 0;
    // all-gather-v in place: rank r broadcasts its part, every part in one fused launch; a gather:
    // every other rank sends its part to root, which receives each in place
    int rc = group_begin(comm);
    if (rc) return rc;
    ncclResult_t r = ncclSuccess;
    const char *what = NULL;
    for (int s = 0; s < size; s++) {
        if (!cnt[s]) continue;
        if (root < 0)
            GROUP_CALL(ncclBroadcast(x + off[s], x + off[s], cnt[s], ncclFloat, s, *comm, stream),
                       "ncclBroadcast");
        else if (rank == root && s != root)
            GROUP_CALL(ncclRecv(x + off[s], cnt[s], ncclFloat, s, *comm, stream), "ncclRecv");
        else if (rank == s && s != root)
            GROUP_CALL(ncclSend(x + off[s], cnt[s], ncclFloat, root, *comm, stream), "ncclSend");
    }
    return group_end(r, what);
}
