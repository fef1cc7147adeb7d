// cuda_off.c - the public CUDA entry points of a build without CUDA (`make CUDA=0`, or no nvcc):
// they exist, so a program linked against any liblssar builds, and they say why they cannot run.
#include "lssar.h"
#include "core/util.h"

#define NO_CUDA "this liblssar was built without CUDA; rebuild with the CUDA toolkit installed (`make`, " \
                "which finds nvcc) to use a GPU"

size_t lssar_attn_cuda_workspace_size(const lssar_attn_desc *a, lssar_dtype dtype, int B, int T, int H,
                                      int D) {
    (void)a; (void)dtype; (void)B; (void)T; (void)H; (void)D;
    return 0;
}

int lssar_attn_forward_cuda(const lssar_attn_desc *a, lssar_dtype dtype, int B, int T, int H, int D,
                            const void *q, const void *k, const void *v, void *out, void *workspace,
                            void *stream) {
    (void)a; (void)dtype; (void)B; (void)T; (void)H; (void)D; (void)q; (void)k; (void)v; (void)out;
    (void)workspace; (void)stream;
    return lssar_fail(LSSAR_E_UNSUPPORTED, "lssar_attn_forward_cuda: " NO_CUDA);
}

int lssar_attn_backward_cuda(const lssar_attn_desc *a, lssar_dtype dtype, int B, int T, int H, int D,
                             const void *q, const void *k, const void *v, const void *out,
                             const void *dout, void *dq, void *dk, void *dv, float *ds,
                             void *workspace, void *stream) {
    (void)a; (void)dtype; (void)B; (void)T; (void)H; (void)D; (void)q; (void)k; (void)v; (void)out;
    (void)dout; (void)dq; (void)dk; (void)dv; (void)ds; (void)workspace; (void)stream;
    return lssar_fail(LSSAR_E_UNSUPPORTED, "lssar_attn_backward_cuda: " NO_CUDA);
}

int lssar_cuda_device_count(void) { return 0; }
