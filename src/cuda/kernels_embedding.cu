// kernels_embedding.cu - token embeddings of Ch channels summed, plus learned positions
// (src/nn/embedding.c), and a deterministic backward without atomics: per channel the (token,
// row) pairs are sorted stably by token (CUB's radix sort: integer keys, so its output is the one
// stable order), and each run of one token adds its rows, in row order, into the stored gradient
// row. That is the order of the CPU's scatter, so dwte and dwpe come out with the CPU backend's bits
// (and kemu_embedding_backward's).
#include <cub/device/device_radix_sort.cuh>
#include "cuda/cuda_common.h"

#define EMB_MAXCH 16   /* channels per forward launch (more: further launches accumulate) */
struct emb_tables { const float *p[EMB_MAXCH]; };

// out (B*T, C): one thread per value. Launch ch0 = 0 writes wte[0] (+ wpe) + wte[1..]; a later
// launch (ch0 > 0) adds its channels to out: the order of embedding.c's loop in every case. A: the
// element type of out (km_ld / km_st); the model's channels (GPT_MAX_CHANNELS) take one launch.
template <typename A>
static __global__ void embedding_forward_kernel(A *out, const uint16_t *tokens, emb_tables wte,
                                                const float *wpe, size_t n, int T, int Ch, int ch0, int nch,
                                                int C) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t bt = i / C;
        int c = (int)(i % C), k0 = 0;
        const uint16_t *tok = tokens + bt * Ch + ch0;
        float o;
        if (ch0 == 0) {
            o = wte.p[0][(size_t)tok[0] * C + c];
            if (wpe) o = KM_ADD(o, wpe[(bt % T) * C + c]);
            k0 = 1;
        } else {
            o = km_ld(out, i);
        }
        // unrolled with constant indices, so the tables stay in the parameter bank (a dynamic
        // index into a by-value struct copies it to local memory)
#pragma unroll
        for (int k = 0; k < EMB_MAXCH; k++)
            if (k >= k0 && k < nch) o = KM_ADD(o, wte.p[k][(size_t)tok[k] * C + c]);
        km_st(out, i, o);
    }
}

// keys (n) = the tokens of channel ch, rows (n) = 0..n-1
static __global__ void emb_gather_kernel(uint16_t *keys, int *rows, const uint16_t *tokens, int n, int Ch,
                                         int ch) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { keys[i] = tokens[(size_t)i * Ch + ch]; rows[i] = i; }
}

// One block per sorted position i; the block of a run's first position adds the run's rows to
// dwte[token] (C columns, KM_EMB_THREADS at a time); the others leave at once.
template <typename A>
static __global__ void emb_run_kernel(float *dwte, const A *dout, const uint16_t *keys, const int *rows, int n,
                                      int C) {
    int i = blockIdx.x;
    if (!km_emb_run_start(keys, i)) return;
    int e = km_emb_run_end(keys, n, i);
    float *w = dwte + (size_t)keys[i] * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) w[c] = km_emb_run_col(w[c], dout, rows, i, e, C, c);
}

// dwpe (T, C) += the rows of position t over b in order: one thread per value
template <typename A> static __global__ void emb_pos_kernel(float *dwpe, const A *dout, int B, int T, int C) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (size_t)T * C) {
        int t = (int)(i / C), c = (int)(i % C);
        dwpe[i] = km_emb_pos_col(dwpe[i], dout, B, T, C, t, c);
    }
}

int cuda_embedding_forward(lssar_dtype at, void *out, const uint16_t *tokens, float *const *wte,
                           const float *wpe, int B, int T, int Ch, int C, cudaStream_t stream) {
    size_t n = (size_t)B * T * C;
    if (!n || Ch <= 0) return 0;
    size_t nb = (n + KM_EW_THREADS - 1) / KM_EW_THREADS;
    unsigned blocks = nb < (1u << 20) ? (unsigned)nb : (1u << 20);
    for (int ch0 = 0; ch0 < Ch; ch0 += EMB_MAXCH) {
        int nch = Ch - ch0 < EMB_MAXCH ? Ch - ch0 : EMB_MAXCH;
        emb_tables tb = {};
        for (int k = 0; k < nch; k++) tb.p[k] = wte[ch0 + k];
        int rc = cuda_by_act(at, [&](auto tag) {
            typedef CUDA_ACT_T(tag) A;
            embedding_forward_kernel<<<blocks, KM_EW_THREADS, 0, stream>>>((A *)out, tokens, tb, wpe, n, T, Ch,
                                                                           ch0, nch, C);
            CUDA_LAUNCHED("embedding_forward_kernel");
            return 0;
        });
        if (rc) return rc;
    }
    return 0;
}

// scratch: keys in / out (uint16), rows in / out (int), the sort's temporary storage
static int emb_sort_bytes(int n, size_t *bytes) {
    size_t tmp = 0;
    CUDA_TRY(cub::DeviceRadixSort::SortPairs(NULL, tmp, (const uint16_t *)NULL, (uint16_t *)NULL,
                                             (const int *)NULL, (int *)NULL, n, 0, 16));
    *bytes = tmp;
    return 0;
}

int cuda_embedding_backward_scratch(int B, int T, size_t *bytes) {
    int n = B * T, rc;
    size_t tmp = 0;
    if (n > 0 && (rc = emb_sort_bytes(n, &tmp))) return rc;
    size_t m = (size_t)(n > 0 ? n : 1);
    *bytes = 2 * cuda_round256(m * sizeof(uint16_t)) + 2 * cuda_round256(m * sizeof(int)) +
             cuda_round256(tmp);
    return 0;
}

int cuda_embedding_backward(lssar_dtype at, float *const *dwte, float *dwpe, const void *dout,
                            const uint16_t *tokens, int B, int T, int Ch, int C, void *scratch,
                            size_t scratch_bytes, cudaStream_t stream) {
    int n = B * T, rc;
    if (n <= 0 || C <= 0) return 0;
    size_t tmp = 0;
    if ((rc = emb_sort_bytes(n, &tmp))) return rc;
    char *p = (char *)scratch;
    uint16_t *kin = (uint16_t *)cuda_carve(&p, n * sizeof(uint16_t)),
             *kout = (uint16_t *)cuda_carve(&p, n * sizeof(uint16_t));
    int *rin = (int *)cuda_carve(&p, n * sizeof(int)), *rout = (int *)cuda_carve(&p, n * sizeof(int));
    void *sort_tmp = cuda_carve(&p, tmp);
    if ((size_t)(p - (char *)scratch) > scratch_bytes)
        return lssar_fail(LSSAR_E_SIZE, "cuda embedding backward: scratch of %zu bytes, %zu needed",
                          scratch_bytes, (size_t)(p - (char *)scratch));
    for (int ch = 0; ch < Ch; ch++) {
        // channel by channel, so that the runs of one launch never share a table (and tables shared
        // between channels, which the model never has, would still be race-free)
        emb_gather_kernel<<<cuda_blocks(n, KM_EW_THREADS), KM_EW_THREADS, 0, stream>>>(
            kin, rin, tokens, n, Ch, ch);
        CUDA_LAUNCHED("emb_gather_kernel");
        CUDA_TRY(cub::DeviceRadixSort::SortPairs(sort_tmp, tmp, kin, kout, rin, rout, n, 0, 16, stream));
        rc = cuda_by_act(at, [&](auto tag) {
            typedef CUDA_ACT_T(tag) A;
            emb_run_kernel<<<n, KM_EMB_THREADS, 0, stream>>>(dwte[ch], (const A *)dout, kout, rout, n, C);
            CUDA_LAUNCHED("emb_run_kernel");
            return 0;
        });
        if (rc) return rc;
    }
    if (!dwpe) return 0;
    return cuda_by_act(at, [&](auto tag) {
        typedef CUDA_ACT_T(tag) A;
        emb_pos_kernel<<<cuda_blocks((size_t)T * C, KM_EW_THREADS), KM_EW_THREADS, 0, stream>>>(
            dwpe, (const A *)dout, B, T, C);
        CUDA_LAUNCHED("emb_pos_kernel");
        return 0;
    });
}
