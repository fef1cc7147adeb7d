// kernels_rope.cu - rotary position embedding, rotate-half (src/nn/rope.c): pairs (c, c + HS/2) of
// every head rotated by the host-made tables cos_t, sin_t (maxT, HS/2); the backward is the
// inverse (transpose) rotation. One thread per pair; kemu_rope is the same arithmetic.
#include "cuda/cuda_common.h"

// x (B, T, NH, HS); pair index i = ((bt * NH + hd) * h + c), h = HS / 2; dir = +1 or -1
template <typename A>
static __global__ void rope_kernel(A *x, const float *cos_t, const float *sin_t, size_t npairs, int T,
                                   int NH, int HS, int pos0, float dir) {
    int h = HS / 2;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < npairs;
         i += (size_t)gridDim.x * blockDim.x) {
        int c = (int)(i % h);
        size_t rest = i / h;
        int hd = (int)(rest % NH);
        size_t bt = rest / NH;
        int t = (int)(bt % T) + pos0;
        A *v = x + (bt * NH + hd) * HS;
        float cc = cos_t[(size_t)t * h + c], ss = dir * sin_t[(size_t)t * h + c];
        float x1 = km_ld(v, c), x2 = km_ld(v, c + h);
        km_rope_pair(&x1, &x2, cc, ss);
        km_st(v, c, x1);
        km_st(v, c + h, x2);
    }
}

int cuda_rope(lssar_dtype at, void *x, const float *cos_t, const float *sin_t, int B, int T, int NH, int HS,
              int pos0, int inverse, cudaStream_t stream) {
    size_t npairs = (size_t)B * T * NH * (HS / 2);
    if (!npairs) return 0;
    size_t nb = (npairs + KM_EW_THREADS - 1) / KM_EW_THREADS;
    unsigned blocks = nb < (1u << 20) ? (unsigned)nb : (1u << 20);
    return cuda_by_act(at, [&](auto tag) {
        typedef CUDA_ACT_T(tag) A;
        rope_kernel<<<blocks, KM_EW_THREADS, 0, stream>>>((A *)x, cos_t, sin_t, npairs, T, NH, HS, pos0,
                                                         inverse ? -1.0f : 1.0f);
        CUDA_LAUNCHED("rope_kernel");
        return 0;
    });
}
