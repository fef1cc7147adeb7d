// kernels_xent.cu - softmax cross-entropy over the vocabulary (src/nn/xent.c): the probabilities
// in place, per-row loss and argmax, the loss accumulator acc (double[2], device) and the backward.
// Emulated by kernels_emu.c (kemu_xent_forward / _backward).
#include "cuda/cuda_common.h"

// One block of KM_XENT_THREADS per row r of logits (R, V). Thread t owns columns t, t + 512, ...
// (coalesced). Three passes over the row: max + first argmax (+ the non-finite test), then the sum z
// of e = exp(x - max) (block tree), then e / z in place (e made again: km_xent_thread_probs).
// rowloss (R): the loss of every row (0 when ignored), for the accumulator kernel. A: the logits'
// element type (km_ld / km_st).
template <typename A>
static __global__ void __launch_bounds__(KM_XENT_THREADS)
xent_forward_kernel(A *logits, float *losses, uint16_t *argmax, const uint16_t *targets, int tstride,
                    int ostride, int V, float *rowloss) {
    __shared__ float sm[KM_WARP], sz[KM_WARP];
    __shared__ int si[KM_WARP];
    int r = blockIdx.x, t = threadIdx.x, lane = t % KM_WARP, w = t / KM_WARP;
    A *x = logits + (size_t)r * V;
    int tg = targets ? targets[(size_t)r * tstride] : KM_IGNORE;
    float m;
    int idx, bad;
    km_xent_thread_max(x, V, t, &m, &idx, &bad);
    // thread 0 reads the target's logit now: nobody writes the row before the barriers below
    float xt = t == 0 && tg != KM_IGNORE ? km_ld(x, tg) : 0.0f;
    // (max, first index): km_xent_better is a total order (no NaN here unless x[0] is, and then
    // every m is that NaN), so the butterfly leaves the row's answer in every lane
    for (int o = KM_WARP / 2; o > 0; o /= 2) {
        float om = __shfl_xor_sync(0xffffffffu, m, o);
        int oi = __shfl_xor_sync(0xffffffffu, idx, o);
        if (km_xent_better(m, idx, om, oi)) { m = om; idx = oi; }
    }
    if (lane == 0) { sm[w] = m; si[w] = idx; }
    bad = __syncthreads_or(bad);   // also the barrier that publishes sm, si
    int nw = blockDim.x / KM_WARP;
    m = sm[lane < nw ? lane : 0];
    idx = si[lane < nw ? lane : 0];
    for (int o = KM_WARP / 2; o > 0; o /= 2) {
        float om = __shfl_xor_sync(0xffffffffu, m, o);
        int oi = __shfl_xor_sync(0xffffffffu, idx, o);
        if (km_xent_better(m, idx, om, oi)) { m = om; idx = oi; }
    }
    float mx = m;
    float z = cuda_block_sum(km_xent_thread_z(x, V, t, mx), sz);
    km_xent_thread_probs(x, V, t, mx, KM_DIV(1.0f, z));
    if (t == 0) {
        float l = km_xent_loss(z, xt, mx, tg, bad);
        if (losses) losses[(size_t)r * ostride] = l;
        if (argmax) argmax[(size_t)r * ostride] = (uint16_t)km_xent_argmax(mx, idx, V);
        rowloss[r] = l;
    }
}

// acc[0] += sum of the row losses (double, fixed tree), acc[1] += rows whose target is counted.
// One block of KM_ACC_THREADS.
static __global__ void xent_acc_kernel(double *acc, const float *rowloss, const uint16_t *targets,
                                       int tstride, int R) {
    __shared__ double sh[KM_WARP];
    int t = threadIdx.x;
    double s = cuda_block_sum(km_acc_thread(rowloss, R, t), sh);
    int cnt = 0;
    for (int r = t; r < R; r += KM_ACC_THREADS) cnt += targets[(size_t)r * tstride] != KM_IGNORE;
    double c = cuda_block_sum((double)cnt, sh);   // integers below 2^53: exact in any order
    if (t == 0) {
        acc[0] = KM_DADD(acc[0], s);
        acc[1] = KM_DADD(acc[1], c);
    }
}

// probs (R, V) -> dlogits = (grad_scale / acc[1]) (p - onehot); ignored rows 0. One block per row.
template <typename A>
static __global__ void xent_backward_kernel(A *probs, const uint16_t *targets, int tstride, int V,
                                            float grad_scale, const double *acc) {
    int r = blockIdx.x;
    A *p = probs + (size_t)r * V;
    int tg = targets[(size_t)r * tstride];
    float s = km_xent_scale(grad_scale, acc[1]);
    for (int j = threadIdx.x; j < V; j += blockDim.x)
        km_st(p, j, tg == KM_IGNORE ? 0.0f : km_xent_grad(km_ld(p, j), s, j == tg));
}

size_t cuda_xent_forward_scratch(int R) { return cuda_round256(sizeof(float) * (size_t)(R > 0 ? R : 1)); }

int cuda_xent_forward(lssar_dtype at, void *logits, float *losses, uint16_t *argmax, const uint16_t *targets,
                      int tstride, int ostride, int R, int V, double *acc, void *scratch, cudaStream_t stream) {
    if (R <= 0 || V <= 0) return 0;
    float *rowloss = (float *)scratch;
    int rc = cuda_by_act(at, [&](auto tag) {
        typedef CUDA_ACT_T(tag) A;
        xent_forward_kernel<<<R, KM_XENT_THREADS, 0, stream>>>((A *)logits, losses, argmax, targets, tstride,
                                                               ostride, V, rowloss);
        CUDA_LAUNCHED("xent_forward_kernel");
        return 0;
    });
    if (rc) return rc;
    // without targets nothing is counted: acc stays (the CPU backend adds 0 and 0)
    if (targets && acc) {
        xent_acc_kernel<<<1, KM_ACC_THREADS, 0, stream>>>(acc, rowloss, targets, tstride, R);
        CUDA_LAUNCHED("xent_acc_kernel");
    }
    return 0;
}

int cuda_xent_backward(lssar_dtype at, void *probs, const uint16_t *targets, int tstride, int R, int V,
                       float grad_scale, const double *acc, cudaStream_t stream) {
    if (R <= 0 || V <= 0) return 0;
    return cuda_by_act(at, [&](auto tag) {
        typedef CUDA_ACT_T(tag) A;
        xent_backward_kernel<<<R, KM_EW_THREADS, 0, stream>>>((A *)probs, targets, tstride, V, grad_scale, acc);
        CUDA_LAUNCHED("xent_backward_kernel");
        return 0;
    });
}
