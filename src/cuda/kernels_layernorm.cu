// kernels_layernorm.cu - LayerNorm forward and backward (eps 1e-5, biased variance, two-pass
// statistics as src/nn/layernorm.c). Emulated by kernels_emu.c (kemu_layernorm_*), bit for bit:
// the lane loops are kernels_math.h's, the warp sums the xor butterfly, no FMA (KM_ operations).
#include "cuda/cuda_common.h"

// One warp per row (KM_LN_WARPS rows per block). out (N, C); mean, rstd (N) or NULL. A: the
// activations' element type (km_ld / km_st).
template <typename A>
static __global__ void layernorm_forward_kernel(A *out, float *mean, float *rstd, const A *inp,
                                                const float *weight, const float *bias, int N, int C) {
    int row = blockIdx.x * KM_LN_WARPS + threadIdx.x / KM_WARP, lane = threadIdx.x % KM_WARP;
    if (row >= N) return;   // the whole warp leaves together: the shuffles below stay full-warp
    const A *x = inp + (size_t)row * C;
    A *o = out + (size_t)row * C;
    float m = KM_DIV(cuda_warp_sum(km_ln_lane_sum(x, C, lane)), (float)C);
    float s = km_ln_rstd(KM_DIV(cuda_warp_sum(km_ln_lane_sqdev(x, C, lane, m)), (float)C));
    for (int i = lane; i < C; i += KM_WARP) km_st(o, i, km_ln_out(km_ld(x, i), m, s, weight[i], bias[i]));
    if (lane == 0) {
        if (mean) mean[row] = m;
        if (rstd) rstd[row] = s;
    }
}

// dinp (N, C) += rstd (dout w - mean(dout w) - xh mean(dout w xh)): one warp per row
template <typename A>
static __global__ void layernorm_backward_dinp_kernel(A *dinp, const A *dout, const A *inp, const float *weight,
                                                      const float *mean, const float *rstd, int N, int C) {
    int row = blockIdx.x * KM_LN_WARPS + threadIdx.x / KM_WARP, lane = threadIdx.x % KM_WARP;
    if (row >= N) return;
    const A *x = inp + (size_t)row * C, *d = dout + (size_t)row * C;
    A *dx = dinp + (size_t)row * C;
    float m = mean[row], s = rstd[row], a, b;
    km_ln_bwd_lane(x, d, weight, m, s, C, lane, &a, &b);
    float gm = KM_DIV(cuda_warp_sum(a), (float)C), gxm = KM_DIV(cuda_warp_sum(b), (float)C);
    for (int i = lane; i < C; i += KM_WARP)
        km_st(dx, i, km_ln_dx(km_ld(dx, i), km_ld(d, i), weight[i], km_ld(x, i), m, s, gm, gxm));
}

// Parameter-gradient partials. grid (ceil(C / 32), chunks of 256 rows), block (32, 8): thread
// (tx, ty) sums column j = 32 bx + tx over rows ty, ty + 8, ... of chunk by (coalesced: a warp is
// 32 consecutive columns of one row); the 8 partials of a column meet in km_tree_f(., 8).
// part_w, part_b (chunks, C).
template <typename A>
static __global__ void layernorm_param_partials_kernel(float *part_w, float *part_b, const A *dout,
                                                       const A *inp, const float *mean, const float *rstd, int N,
                                                       int C) {
    __shared__ float sw[KM_COL_TY][KM_COL_TX], sb[KM_COL_TY][KM_COL_TX];
    int tx = threadIdx.x, ty = threadIdx.y, j = blockIdx.x * KM_COL_TX + tx, chunk = blockIdx.y;
    float aw = 0.0f, ab = 0.0f;
    if (j < C) km_ln_param_thread(dout, inp, mean, rstd, N, C, chunk, ty, j, &aw, &ab);
    sw[ty][tx] = aw;
    sb[ty][tx] = ab;
    __syncthreads();
    if (ty == 0 && j < C) {
        float pw[KM_COL_TY], pb[KM_COL_TY];
        for (int k = 0; k < KM_COL_TY; k++) { pw[k] = sw[k][tx]; pb[k] = sb[k][tx]; }
        part_w[(size_t)chunk * C + j] = km_tree_f(pw, KM_COL_TY);
        part_b[(size_t)chunk * C + j] = km_tree_f(pb, KM_COL_TY);
    }
}

int cuda_layernorm_forward(lssar_dtype at, void *out, float *mean, float *rstd, const void *inp,
                           const float *weight, const float *bias, int N, int C, cudaStream_t stream) {
    if (N <= 0 || C <= 0) return 0;
    return cuda_by_act(at, [&](auto tag) {
        typedef CUDA_ACT_T(tag) A;
        layernorm_forward_kernel<<<cuda_blocks(N, KM_LN_WARPS), KM_LN_WARPS * KM_WARP, 0, stream>>>(
            (A *)out, mean, rstd, (const A *)inp, weight, bias, N, C);
        CUDA_LAUNCHED("layernorm_forward_kernel");
        return 0;
    });
}

size_t cuda_layernorm_backward_scratch(int N, int C) {
    return 2 * cuda_round256(sizeof(float) * (size_t)km_col_chunks(N) * (size_t)C);
}

int cuda_layernorm_backward(lssar_dtype at, void *dinp, float *dweight, float *dbias, const void *dout,
                            const void *inp, const float *weight, const float *mean, const float *rstd, int N,
                            int C, void *scratch, cudaStream_t stream) {
    if (N <= 0 || C <= 0) return 0;
    int nch = km_col_chunks(N);
    float *pw = NULL, *pb = NULL;   // (nch, C) each: the parameter gradients' partials
    if (dweight || dbias) {
        char *p = (char *)scratch;
        pw = (float *)cuda_carve(&p, sizeof(float) * (size_t)nch * C);
        pb = (float *)cuda_carve(&p, sizeof(float) * (size_t)nch * C);
    }
    int rc = cuda_by_act(at, [&](auto tag) {
        typedef CUDA_ACT_T(tag) A;
        if (dinp) {
            layernorm_backward_dinp_kernel<<<cuda_blocks(N, KM_LN_WARPS), KM_LN_WARPS * KM_WARP, 0, stream>>>(
                (A *)dinp, (const A *)dout, (const A *)inp, weight, mean, rstd, N, C);
            CUDA_LAUNCHED("layernorm_backward_dinp_kernel");
        }
        if (!dweight && !dbias) return 0;
        dim3 grid(cuda_blocks(C, KM_COL_TX), nch), block(KM_COL_TX, KM_COL_TY);
        layernorm_param_partials_kernel<<<grid, block, 0, stream>>>(pw, pb, (const A *)dout, (const A *)inp,
                                                                    mean, rstd, N, C);
        CUDA_LAUNCHED("layernorm_param_partials_kernel");
        return 0;
    });
    if (rc || (!dweight && !dbias)) return rc;
    if (dweight && (rc = cuda_col_finish(dweight, pw, nch, C, stream))) return rc;
    if (dbias && (rc = cuda_col_finish(dbias, pb, nch, C, stream))) return rc;
    return 0;
}
