/*
 * dist_nccl.h - the CUDA backend's data-parallel collectives (nn_backend's dist_sum and
 * dist_allgather, src/nn/backend.h) over NCCL, on device memory, in order on the context's stream
 * (nvcc only).
 *
 * One communicator per context, made by the first collective (every rank makes its contexts and
 * calls the collectives in the same order, so the first one is the same call everywhere): rank 0's
 * ncclUniqueId goes to the others with lssar_dist_bcast (MPI), then ncclCommInitRank with the
 * job's rank and size (src/core/dist.h). Each rank's communicator is on its current CUDA device,
 * which must be its own (NCCL refuses two ranks on one GPU). A job of one rank never touches
 * NCCL: the sum is a copy or an add on the stream.
 *
 * The sum has the host's order (lssar_dist_sum_f32): an all-to-all-v of the pieces into scratch,
 * then one kernel that adds them per element in rank order 0, 1, ..., N-1, so its result is
 * bit-identical to the CPU backend's for the same pieces (NCCL's own reductions choose their
 * order by topology and size, hence not ncclReduceScatter).
 *
 * Errors: 0 or an lssar_err (LSSAR_E_IO, the failed NCCL or CUDA call and its error string).
 */
#ifndef LSSAR_CUDA_DIST_NCCL_H
#define LSSAR_CUDA_DIST_NCCL_H

#include <stddef.h>
#include <cuda_runtime.h>
#include <nccl.h>

// *comm: the context's communicator, NULL until the first collective of a job of several ranks
// makes it. out (cnt[rank]), x, scratch (ranks * cnt[rank]): device memory; off, cnt (ranks): host.
int cuda_dist_sum(ncclComm_t *comm, float *out, const float *x, const size_t *off, const size_t *cnt,
                  int accumulate, float *scratch, cudaStream_t stream);
// x + off[r] (cnt[r] floats) = rank r's, in place, on every rank (root < 0) or on rank root alone
int cuda_dist_allgather(ncclComm_t *comm, float *x, const size_t *off, const size_t *cnt, int root,
                        cudaStream_t stream);
// The context's free path (comm NULL: nothing). failed 0: after the stream is idle, frees the
// communicator. failed 1 (the context holds an error): its operations may never finish (a peer
// died), so before waiting on the stream, aborts them (ncclCommAbort) and frees it.
void cuda_dist_free(ncclComm_t comm, int failed);

#endif
