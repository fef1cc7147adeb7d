// kernels_emu.c - the CPU emulation of the CUDA backend's non-attention kernels (kernels_emu.h):
// the kernels' thread loops (kernels_math.h) run here for every thread in turn, and their warp
// shuffles are km_tree_f / km_tree_d over the lanes' values.
//
// No FMA contraction, so that every KM_ operation rounds as its _rn intrinsic on the GPU: GCC's
// default in ISO C mode (-std=c11) is -ffp-contract=off; clang contracts within an expression by
// default and needs the pragma (before the includes: the shared FM_FN code is compiled here).
// kemu_fp_contract_off() checks the result.
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif
#include <stdlib.h>
#include <string.h>
#include "core/util.h"
#include "nn/gradnorm.h"
#include "nn/nn.h"
#include "cuda/kernels_math.h"
#include "cuda/kernels_emu.h"

_Static_assert(KM_IGNORE == NN_IGNORE, "the kernels' ignore target is nn.h's");

int kemu_fp_contract_off(void) {
    // (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24 rounds (a tie, to even) to 1 + 2^-11: a * b - c is 0 with
    // two roundings and 2^-24 with one
    volatile float a = 1.0f + 0x1p-12f, c = 1.0f + 0x1p-11f;
    float x = a, y = c;
    float r = x * x - y;
    return r == 0.0f;
}

// One warp sum per warp, then a warp sum over 32 slots of the warp totals and zeros after them.
float kemu_block_sum_f(float *v, int nthreads) {
    float slot[KM_WARP] = {0};
    for (int w = 0; w < nthreads / KM_WARP; w++) slot[w] = km_tree_f(v + w * KM_WARP, KM_WARP);
    return km_tree_f(slot, KM_WARP);
}
double kemu_block_sum_d(double *v, int nthreads) {
    double slot[KM_WARP] = {0};
    for (int w = 0; w < nthreads / KM_WARP; w++) slot[w] = km_tree_d(v + w * KM_WARP, KM_WARP);
    return km_tree_d(slot, KM_WARP);
}

/* ---------------------------------------------------------------- layernorm */
void kemu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                            const float *bias, int N, int C) {
    float lane[KM_WARP];
    for (int r = 0; r < N; r++) {
        const float *x = inp + (size_t)r * C;
        float *o = out + (size_t)r * C;
        for (int l = 0; l < KM_WARP; l++) lane[l] = km_ln_lane_sum(x, C, l);
        float m = KM_DIV(km_tree_f(lane, KM_WARP), (float)C);
        for (int l = 0; l < KM_WARP; l++) lane[l] = km_ln_lane_sqdev(x, C, l, m);
        float s = km_ln_rstd(KM_DIV(km_tree_f(lane, KM_WARP), (float)C));
        for (int i = 0; i < C; i++) o[i] = km_ln_out(x[i], m, s, weight[i], bias[i]);
        if (mean) mean[r] = m;
        if (rstd) rstd[r] = s;
    }
}

// Column j of a column reduction: per chunk the KM_COL_TY thread partials, their tree, and the
// chunks added in order (the finish kernel): returns what the finish adds to the gradient.
static float col_reduce_w(const float *dout, const float *inp, const float *mean, const float *rstd, int N,
                          int C, int j, float *total_b) {
    int nch = km_col_chunks(N);
    float tw = 0.0f, tb = 0.0f;
    for (int c = 0; c < nch; c++) {
        float pw[KM_COL_TY], pb[KM_COL_TY];
        for (int ty = 0; ty < KM_COL_TY; ty++)
            km_ln_param_thread(dout, inp, mean, rstd, N, C, c, ty, j, &pw[ty], &pb[ty]);
        // = km_col_finish over part[c][j] = the trees, chunk by chunk from 0
        tw = KM_ADD(tw, km_tree_f(pw, KM_COL_TY));
        tb = KM_ADD(tb, km_tree_f(pb, KM_COL_TY));
    }
    *total_b = tb;
    return tw;
}

void kemu_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                             const float *weight, const float *mean, const float *rstd, int N, int C) {
    float la[KM_WARP], lb[KM_WARP];
    for (int r = 0; r < N; r++) {
        const float *x = inp + (size_t)r * C, *d = dout + (size_t)r * C;
        float *dx = dinp + (size_t)r * C;
        for (int l = 0; l < KM_WARP; l++)
            km_ln_bwd_lane(x, d, weight, mean[r], rstd[r], C, l, &la[l], &lb[l]);
        float gm = KM_DIV(km_tree_f(la, KM_WARP), (float)C), gxm = KM_DIV(km_tree_f(lb, KM_WARP), (float)C);
        for (int i = 0; i < C; i++) dx[i] = km_ln_dx(dx[i], d[i], weight[i], x[i], mean[r], rstd[r], gm, gxm);
    }
    for (int j = 0; j < C; j++) {
        float tb, tw = col_reduce_w(dout, inp, mean, rstd, N, C, j, &tb);
        if (dweight) dweight[j] = KM_ADD(dweight[j], tw);
        if (dbias) dbias[j] = KM_ADD(dbias[j], tb);
    }
}

void kemu_colsum(float *dbias, const float *dout, int N, int OC) {
    int nch = km_col_chunks(N);
    for (int j = 0; j < OC; j++) {
        float t = 0.0f;
        for (int c = 0; c < nch; c++) {
            float p[KM_COL_TY];
            for (int ty = 0; ty < KM_COL_TY; ty++) p[ty] = km_colsum_thread(dout, N, OC, c, ty, j);
            t = KM_ADD(t, km_tree_f(p, KM_COL_TY));
        }
        dbias[j] = KM_ADD(dbias[j], t);
    }
}

/* ------------------------------------------------------------ cross-entropy */
void kemu_xent_forward(float *logits, float *losses, uint16_t *argmax, const uint16_t *targets, int tstride,
                       int ostride, int R, int V, double *acc) {
    enum { NT = KM_XENT_THREADS };
    float z[NT];
    double accl[KM_ACC_THREADS] = {0};   // the accumulator kernel's threads: rows r = t (mod 256)
    long count = 0;
    for (int r = 0; r < R; r++) {
        float *x = logits + (size_t)r * V;
        int tg = targets ? targets[(size_t)r * tstride] : KM_IGNORE;
        float mx = 0.0f;
        int am = 0, bad = 0;
        for (int t = 0; t < NT; t++) {
            float m;
            int i, b;
            km_xent_thread_max(x, V, t, &m, &i, &b);
            // the max tree's result is the same for any order (km_xent_better is a total order)
            if (t == 0 || km_xent_better(mx, am, m, i)) { mx = m; am = i; }
            bad |= b;
        }
        am = km_xent_argmax(mx, am, V);
        float xt = tg != KM_IGNORE ? x[tg] : 0.0f;   // read before the probabilities overwrite it
        for (int t = 0; t < NT; t++) z[t] = km_xent_thread_z(x, V, t, mx);
        float zs = kemu_block_sum_f(z, NT);
        float inv = KM_DIV(1.0f, zs);
        for (int t = 0; t < NT; t++) km_xent_thread_probs(x, V, t, mx, inv);
        float l = km_xent_loss(zs, xt, mx, tg, bad);
        if (losses) losses[(size_t)r * ostride] = l;
        if (argmax) argmax[(size_t)r * ostride] = (uint16_t)am;
        accl[r % KM_ACC_THREADS] = KM_DADD(accl[r % KM_ACC_THREADS], (double)l);   // = km_acc_thread
        count += tg != KM_IGNORE;
    }
    if (targets) {
        acc[0] = KM_DADD(acc[0], kemu_block_sum_d(accl, KM_ACC_THREADS));
        acc[1] = KM_DADD(acc[1], (double)count);
    }
}

void kemu_xent_backward(float *probs, const uint16_t *targets, int tstride, int R, int V, float grad_scale,
                        const double *acc) {
    float s = km_xent_scale(grad_scale, acc[1]);
    for (int r = 0; r < R; r++) {
        float *p = probs + (size_t)r * V;
        int tg = targets[(size_t)r * tstride];
        for (int j = 0; j < V; j++) p[j] = tg == KM_IGNORE ? 0.0f : km_xent_grad(p[j], s, j == tg);
    }
}

/* --------------------------------------------------------- sum of squares */
double kemu_sum_squares(const float *x, size_t n) {
    size_t nb = (n + KM_SS_CHUNK - 1) / KM_SS_CHUNK;
    double th[KM_SS_THREADS], fin[KM_SS_THREADS] = {0};
    for (size_t b = 0; b < nb; b++) {
        for (int t = 0; t < KM_SS_THREADS; t++) th[t] = km_ss_thread(x, n, b, t);
        double part = kemu_block_sum_d(th, KM_SS_THREADS);
        // the finish kernel's thread b % 256 adds the partials b in increasing order
        // (km_ss_finish_thread), so they are accumulated here as they come
        fin[b % KM_SS_THREADS] = KM_DADD(fin[b % KM_SS_THREADS], part);
    }
    return kemu_block_sum_d(fin, KM_SS_THREADS);
}

// The kernels' one-call version: stage 1 over the chunks of the whole range, stage 2 one finish
// per block over that block's chunks (kernels_reduce.cu says why each block gets the bits of
// kemu_sum_squares on its own). block: a multiple of KM_SS_CHUNK (else nothing is written).
void kemu_block_sum_squares(double *out, const float *x, size_t n, size_t block) {
    if (block == 0 || block % KM_SS_CHUNK) return;
    size_t nchunks = (n + KM_SS_CHUNK - 1) / KM_SS_CHUNK, per = block / KM_SS_CHUNK;
    double *part = malloc((nchunks ? nchunks : 1) * sizeof(double)), th[KM_SS_THREADS];
    if (!part) return;
    for (size_t c = 0; c < nchunks; c++) {
        for (int t = 0; t < KM_SS_THREADS; t++) th[t] = km_ss_thread(x, n, c, t);
        part[c] = kemu_block_sum_d(th, KM_SS_THREADS);
    }
    for (size_t b = 0; b * per < nchunks; b++) {
        size_t c0 = b * per, nc = nchunks - c0 < per ? nchunks - c0 : per;
        for (int t = 0; t < KM_SS_THREADS; t++) th[t] = km_ss_finish_thread(part + c0, nc, t);
        out[b] = kemu_block_sum_d(th, KM_SS_THREADS);
    }
    free(part);
}

void kemu_clip_norm(float *x, size_t n, const double *ss, size_t nb, float clip, float *norm) {
    float nm = nn_norm_of_blocks(ss, nb), f = nn_clip_factor(nm, clip);
    *norm = nm;
    if (f != 1.0f) kemu_scale(x, n, f);
}

/* --------------------------------------------------------------- embedding */
void kemu_embedding_forward(float *out, const uint16_t *tokens, float *const *wte, const float *wpe, int B,
                            int T, int Ch, int C) {
    for (int bt = 0; bt < B * T; bt++)
        for (int c = 0; c < C; c++) {
            float o = wte[0][(size_t)tokens[(size_t)bt * Ch] * C + c];
            if (wpe) o = KM_ADD(o, wpe[(size_t)(bt % T) * C + c]);
            for (int ch = 1; ch < Ch; ch++)
                o = KM_ADD(o, wte[ch][(size_t)tokens[(size_t)bt * Ch + ch] * C + c]);
            out[(size_t)bt * C + c] = o;
        }
}

int kemu_embedding_backward(float *const *dwte, float *dwpe, const float *dout, const uint16_t *tokens, int B,
                            int T, int Ch, int C) {
    int n = B * T;
    uint16_t *keys = malloc(sizeof(uint16_t) * (n ? n : 1));
    int *rows = malloc(sizeof(int) * (n ? n : 1)), *cnt = malloc(sizeof(int) * 65537);
    if (!keys || !rows || !cnt) {
        free(keys); free(rows); free(cnt);
        return lssar_fail(LSSAR_E_NOMEM, "kemu_embedding_backward: out of memory");
    }
    for (int ch = 0; ch < Ch; ch++) {
        // a stable counting sort by token: what the radix sort gives (each key's rows ascending)
        memset(cnt, 0, sizeof(int) * 65537);
        for (int i = 0; i < n; i++) cnt[tokens[(size_t)i * Ch + ch] + 1]++;
        for (int k = 0; k < 65536; k++) cnt[k + 1] += cnt[k];
        for (int i = 0; i < n; i++) {
            uint16_t k = tokens[(size_t)i * Ch + ch];
            int at = cnt[k]++;
            keys[at] = k;
            rows[at] = i;
        }
        for (int i = 0; i < n; i++) {
            if (!km_emb_run_start(keys, i)) continue;
            int e = km_emb_run_end(keys, n, i);
            float *w = dwte[ch] + (size_t)keys[i] * C;
            for (int c = 0; c < C; c++) w[c] = km_emb_run_col(w[c], dout, rows, i, e, C, c);
        }
    }
    if (dwpe)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++)
                dwpe[(size_t)t * C + c] = km_emb_pos_col(dwpe[(size_t)t * C + c], dout, B, T, C, t, c);
    free(keys); free(rows); free(cnt);
    return 0;
}

/* -------------------------------------------------------------- elementwise */
void kemu_gelu_forward(float *out, const float *inp, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = km_gelu(inp[i]);
}
void kemu_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n) {
    for (size_t i = 0; i < n; i++) dinp[i] = km_gelu_grad(inp[i], dout[i]);
}
void kemu_residual_forward(float *out, const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = KM_ADD(a[i], b[i]);
}
void kemu_scale(float *x, size_t n, float s) {
    for (size_t i = 0; i < n; i++) x[i] = KM_MUL(x[i], s);
}
void kemu_to_bf16(uint16_t *out, const float *in, int rows, int cols, int ldo) {
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++) out[(size_t)r * ldo + j] = km_bf16_rne(in[(size_t)r * cols + j]);
}
void kemu_rope(float *x, const float *cos_t, const float *sin_t, int B, int T, int NH, int HS, int pos0,
               int inverse) {
    int h = HS / 2;
    for (int bt = 0; bt < B * T; bt++) {
        int t = bt % T + pos0;
        for (int hd = 0; hd < NH; hd++) {
            float *v = x + ((size_t)bt * NH + hd) * HS;
            for (int c = 0; c < h; c++) {
                float sn = sin_t[(size_t)t * h + c];
                km_rope_pair(&v[c], &v[c + h], cos_t[(size_t)t * h + c], inverse ? -sn : sn);
            }
        }
    }
}
void kemu_adamw(float *params, const float *grads, float *m, float *v, size_t n, int t, float lr, float beta1,
                float beta2, float eps, float wd) {
    float ibc1, ibc2;
    km_adamw_ibc(t, beta1, beta2, &ibc1, &ibc2);
    for (size_t i = 0; i < n; i++)
        km_adamw(&params[i], &m[i], &v[i], grads[i], lr, beta1, beta2, eps, wd, ibc1, ibc2);
}
