// kernels_elementwise.cu - GELU (tanh approximation), the residual add, scaling, AdamW, the
// matmul's bias fallback and the bf16 cast of its operands: one thread per value (grid-stride
// beyond 2^20 blocks), the per-value math of kernels_math.h (src/nn's formulas). No reductions,
// so nothing to order.
#include "cuda/cuda_common.h"

#define EW_MAX_BLOCKS (1u << 20)
static inline unsigned ew_blocks(size_t n) {
    size_t b = (n + KM_EW_THREADS - 1) / KM_EW_THREADS;
    return b < EW_MAX_BLOCKS ? (unsigned)b : EW_MAX_BLOCKS;
}
#define EW_LOOP(i, n)                                                       \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
         i += (size_t)gridDim.x * blockDim.x)

// A: the activations' element type (km_ld / km_st)
template <typename A> static __global__ void gelu_forward_kernel(A *out, const A *inp, size_t n) {
    EW_LOOP(i, n) km_st(out, i, km_gelu(km_ld(inp, i)));
}
// dinp may alias dout: each thread reads its value before writing it
template <typename A>
static __global__ void gelu_backward_kernel(A *dinp, const A *inp, const A *dout, size_t n) {
    EW_LOOP(i, n) km_st(dinp, i, km_gelu_grad(km_ld(inp, i), km_ld(dout, i)));
}
template <typename A> static __global__ void residual_forward_kernel(A *out, const A *a, const A *b, size_t n) {
    EW_LOOP(i, n) km_st(out, i, KM_ADD(km_ld(a, i), km_ld(b, i)));
}
static __global__ void scale_kernel(float *x, size_t n, float s) {
    EW_LOOP(i, n) x[i] = KM_MUL(x[i], s);
}
// x *= *s, the factor in device memory (the clip's, kernels_reduce.cu); 1 leaves x as it is, so
// every thread returns at once (x * 1 = x: the same bits as scaling)
static __global__ void scale_by_kernel(float *x, size_t n, const float *s) {
    const float f = *s;
    if (f == 1.0f) return;
    EW_LOOP(i, n) x[i] = KM_MUL(x[i], f);
}
static __global__ void adamw_kernel(float *params, const float *grads, float *m, float *v, size_t n, float lr,
                                    float beta1, float beta2, float eps, float wd, float ibc1, float ibc2) {
    EW_LOOP(i, n) {
        float p = params[i], mi = m[i], vi = v[i];
        km_adamw(&p, &mi, &vi, grads[i], lr, beta1, beta2, eps, wd, ibc1, ibc2);
        params[i] = p;
        m[i] = mi;
        v[i] = vi;
    }
}
// out rows ld apart, OC values each
template <typename A>
static __global__ void add_bias_kernel(A *out, const float *bias, size_t n, int OC, size_t ld) {
    EW_LOOP(i, n) {
        const size_t o = i / OC * ld + i % OC;
        km_st(out, o, KM_ADD(km_ld(out, o), bias[i % OC]));
    }
}
// out (rows, ldo) = in (rows, cols) rounded to bf16 (km_bf16_rne); out's columns cols..ldo-1 are
// left as they are (the GEMMs never read them). blockIdx.y strides over rows, x over columns: no
// division per value.
static __global__ void to_bf16_kernel(uint16_t *out, const float *in, int rows, int cols, int ldo) {
    for (int r = blockIdx.y; r < rows; r += gridDim.y) {
        const float *x = in + (size_t)r * cols;
        uint16_t *o = out + (size_t)r * ldo;
        for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < cols; j += gridDim.x * blockDim.x)
            o[j] = km_bf16_rne(x[j]);
    }
}

int cuda_gelu_forward(lssar_dtype at, void *out, const void *inp, size_t n, cudaStream_t stream) {
    if (!n) return 0;
    return cuda_by_act(at, [&](auto tag) {
        typedef CUDA_ACT_T(tag) A;
        gelu_forward_kernel<<<ew_blocks(n), KM_EW_THREADS, 0, stream>>>((A *)out, (const A *)inp, n);
        CUDA_LAUNCHED("gelu_forward_kernel");
        return 0;
    });
}
int cuda_gelu_backward(lssar_dtype at, void *dinp, const void *inp, const void *dout, size_t n,
                       cudaStream_t stream) {
    if (!n) return 0;
    return cuda_by_act(at, [&](auto tag) {
        typedef CUDA_ACT_T(tag) A;
        gelu_backward_kernel<<<ew_blocks(n), KM_EW_THREADS, 0, stream>>>((A *)dinp, (const A *)inp,
                                                                         (const A *)dout, n);
        CUDA_LAUNCHED("gelu_backward_kernel");
        return 0;
    });
}
int cuda_residual_forward(lssar_dtype at, void *out, const void *a, const void *b, size_t n,
                          cudaStream_t stream) {
    if (!n) return 0;
    return cuda_by_act(at, [&](auto tag) {
        typedef CUDA_ACT_T(tag) A;
        residual_forward_kernel<<<ew_blocks(n), KM_EW_THREADS, 0, stream>>>((A *)out, (const A *)a,
                                                                            (const A *)b, n);
        CUDA_LAUNCHED("residual_forward_kernel");
        return 0;
    });
}
int cuda_scale(float *x, size_t n, float s, cudaStream_t stream) {
    if (!n) return 0;
    scale_kernel<<<ew_blocks(n), KM_EW_THREADS, 0, stream>>>(x, n, s);
    CUDA_LAUNCHED("scale_kernel");
    return 0;
}
int cuda_scale_by(float *x, size_t n, const float *s, cudaStream_t stream) {
    if (!n) return 0;
    scale_by_kernel<<<ew_blocks(n), KM_EW_THREADS, 0, stream>>>(x, n, s);
    CUDA_LAUNCHED("scale_by_kernel");
    return 0;
}
int cuda_adamw(float *params, const float *grads, float *m, float *v, size_t n, float lr, float beta1,
               float beta2, float eps, float wd, float ibc1, float ibc2, cudaStream_t stream) {
    if (!n) return 0;
    adamw_kernel<<<ew_blocks(n), KM_EW_THREADS, 0, stream>>>(params, grads, m, v, n, lr, beta1, beta2, eps,
                                                             wd, ibc1, ibc2);
    CUDA_LAUNCHED("adamw_kernel");
    return 0;
}
int cuda_add_bias(lssar_dtype at, void *out, const float *bias, int N, int OC, int ld, cudaStream_t stream) {
    size_t n = (size_t)N * OC;
    if (!n) return 0;
    return cuda_by_act(at, [&](auto tag) {
        typedef CUDA_ACT_T(tag) A;
        add_bias_kernel<<<ew_blocks(n), KM_EW_THREADS, 0, stream>>>((A *)out, bias, n, OC, (size_t)ld);
        CUDA_LAUNCHED("add_bias_kernel");
        return 0;
    });
}
int cuda_to_bf16(uint16_t *out, const float *in, int rows, int cols, int ldo, cudaStream_t stream) {
    if (rows <= 0 || cols <= 0) return 0;
    unsigned gx = cuda_blocks((size_t)cols, KM_EW_THREADS), gy = rows < 65535 ? (unsigned)rows : 65535u;
    if (gx > 1024) gx = 1024;
    to_bf16_kernel<<<dim3(gx, gy), KM_EW_THREADS, 0, stream>>>(out, in, rows, cols, ldo);
    CUDA_LAUNCHED("to_bf16_kernel");
    return 0;
}
