/*
 * attention.c - causal attention forward and backward on the CPU for every kind: softmax, SSMax,
 * LSSA, LSSAR, sigmoid, relu and the other combinations of their stages (the math:
 * docs/attention.md).
 *
 * Layout: q, k, v, out and their gradients are (B, T, H, D) float32, so the rows of one head are
 * strided by H*D; sgemm's leading dimension takes that stride and nothing is copied.
 *
 * No T x T matrix: query rows are processed in blocks of BQ rows against the keys they can see
 * (0..i1-1), so the scratch is a few BQ x T float buffers per thread. The backward recomputes the
 * forward of each block (nothing is kept between the two calls), then
 *   dW = dY V^T,  dV += W^T dY,  dS = rows(dW),  dQ = dS K,  dK += dS^T Q    (all sgemm).
 *
 * Threads: OpenMP over (b, h, row block) in the forward (each task writes its own output rows)
 * and over (b, h) in the backward (dK and dV of a head are sums over its row blocks, so one task
 * owns a head and adds the blocks in a fixed order). Results therefore do not depend on the
 * thread count. OpenBLAS runs single-threaded inside our parallel region (see blas_single_begin).
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>
#include <cblas.h>
#include "lssar.h"
#include "core/util.h"
#include "core/dispatch.h"
#include "attn/attn.h"
#include "attn/attn_rows.h"
#include "attn/flash.h"

#ifndef BQ
#define BQ 64  // query rows per block
#endif

// ------------------------------------------------------------------ argument checks

int attn_desc_check(const lssar_attn_desc *a, const char *fn) {
    if (!a) return lssar_fail(LSSAR_E_NULL, "%s: the descriptor is NULL; pass a lssar_attn_desc", fn);
    char what[96];
    snprintf(what, sizeof what, "%s: kind", fn);
    int rc = attn_kind_check(a->kind, what);
    if (rc) return rc;
    lssar_attn_stages st = attn_stages(a->kind);
    if (st.norm == LSSAR_NORM_LEN) {
        snprintf(what, sizeof what, "%s: %s len_norm", fn, lssar_attn_name(a->kind));
        if ((rc = attn_len_norm_check(a->len_norm, what))) return rc;
        if (a->len_norm == LSSAR_LEN_NORM_TRAIN && a->train_len < 1)
            return lssar_fail(LSSAR_E_ARG, "%s: %s with len_norm train needs train_len >= 1 "
                              "(the training length L), got %d", fn, lssar_attn_name(a->kind), a->train_len);
    }
    if (!attn_temp_d_ok(a->temp_d))
        return lssar_fail(LSSAR_E_ARG, "%s: temp_d = %d; use 0 (ln of the head size) or a D >= 2", fn,
                          a->temp_d);
    if (st.reweight && !(a->p > 0.0f && isfinite(a->p)))
        return lssar_fail(LSSAR_E_P, "%s: %s re-weighting power p = %g; it must be finite and > 0 "
                          "(the paper uses 15)", fn, lssar_attn_name(a->kind), (double)a->p);
    if (st.score == LSSAR_SCORE_SSMAX && !a->ssmax_s)
        return lssar_fail(LSSAR_E_SSMAX, "%s: %s needs ssmax_s (H per-head scales, e.g. 0.43)", fn,
                          lssar_attn_name(a->kind));
    return LSSAR_OK;
}

static int check_common(const lssar_attn_desc *a, int B, int T, int H, int D) {
    int rc = attn_desc_check(a, "attention");
    if (rc) return rc;
    if (B <= 0 || T <= 0 || H <= 0 || D <= 0)
        return lssar_fail(LSSAR_E_SIZE, "attention: B=%d T=%d H=%d D=%d; every size must be > 0", B, T, H, D);
    // Element counts must fit size_t (bytes) and the row stride H*D must fit sgemm's int.
    size_t n = (size_t)B;
    if (n > SIZE_MAX / (size_t)T) goto too_big;
    n *= (size_t)T;
    if (n > SIZE_MAX / (size_t)H) goto too_big;
    n *= (size_t)H;
    if (n > SIZE_MAX / (size_t)D / sizeof(float)) goto too_big;
    if ((int64_t)H * D > INT32_MAX / 2 || (int64_t)B * H > INT32_MAX) goto too_big;
    if ((size_t)T > SIZE_MAX / sizeof(float) / 4 / BQ) goto too_big;
    if (attn_has_ssmax_s(a->kind))
        for (int h = 0; h < H; h++)
            if (!isfinite(a->ssmax_s[h]))
                return lssar_fail(LSSAR_E_ARG, "attention: ssmax_s[%d] = %g is not finite", h,
                                  (double)a->ssmax_s[h]);
    return LSSAR_OK;
too_big:
    return lssar_fail(LSSAR_E_SIZE, "attention: B=%d T=%d H=%d D=%d is too large to index; "
                      "use smaller tensors", B, T, H, D);
}

// ------------------------------------------------------------------ per-thread scratch

// Each OpenMP thread keeps its scratch between calls: fresh pages are very slow to touch on the
// machines we use, and the model calls attention with the same shapes every step. The buffers live
// until the thread ends (OpenMP threads live as long as the process).
static _Thread_local float *tl_buf;
static _Thread_local size_t tl_cap;

static float *scratch(size_t nfloats) {
    if (nfloats > tl_cap) {
        free(tl_buf);
        tl_buf = NULL;
        tl_cap = 0;
        if (posix_memalign((void **)&tl_buf, 64, nfloats * sizeof(float))) { tl_buf = NULL; return NULL; }
        tl_cap = nfloats;
    }
    return tl_buf;
}

static size_t round16(size_t n) { return (n + 15) & ~(size_t)15; }

// 1 / max(|x_r|, 1e-12) for n rows of length D with stride ld.
LSSAR_HOT static void inv_norms(const float *x, int n, int D, int ld, float *out) {
    for (int r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * ld;
        // float is enough: |x|^2 overflows only where q . k in the sgemm would overflow too
        float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
        for (int d = 0; d < D; d++) ss += xr[d] * xr[d];
        float nr = sqrtf(ss);
        out[r] = 1.0f / (nr > 1e-12f ? nr : 1e-12f);
    }
}

// g <- g - xh (xh . g) with xh = x * rx: the backward of the l2 normalisation, given g already
// multiplied by rx (see attention.c's header and docs/attention.md).
LSSAR_HOT static void project_rows(float *g, const float *x, const float *rx, int n, int D, int ld) {
    for (int r = 0; r < n; r++) {
        float *gr = g + (size_t)r * ld;
        const float *xr = x + (size_t)r * ld;
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int d = 0; d < D; d++) dot += xr[d] * gr[d];
        float c = dot * rx[r] * rx[r];
#pragma omp simd
        for (int d = 0; d < D; d++) gr[d] -= c * xr[d];
    }
}

// Each of our threads calls sgemm on small blocks; OpenBLAS must not start threads of its own there.
// The OpenMP build of OpenBLAS (what the Makefile links when installed) already runs single-threaded
// inside a parallel region, and its openblas_set_num_threads would also change OUR OpenMP thread
// count, so it is left alone. The pthreads build is set to one thread for the duration of the call
// and restored afterwards. Skipped when the caller is itself inside a parallel region (then our
// region is one thread, and flipping a process-wide setting from several threads could leave it
// wrong).
static int blas_single_begin(void) {
    if (openblas_get_parallel() != 1 || omp_in_parallel()) return 0;
    int n = openblas_get_num_threads();
    if (n != 1) openblas_set_num_threads(1);
    return n;
}
static void blas_single_end(int saved) {
    if (saved > 1) openblas_set_num_threads(saved);
}

// ------------------------------------------------------------------ forward

int lssar_attn_forward(const lssar_attn_desc *a, int B, int T, int H, int D,
                       const float *q, const float *k, const float *v, float *out) {
    return attn_forward_cached(a, B, T, T, T, H, D, q, k, v, out);
}

// The last Tq of Tk positions (see attn.h). The full forward is Tq = Tk = kv_stride; decoding
// over a KV cache is the same code with fewer query rows, so both give the same weights.
int attn_forward_cached(const lssar_attn_desc *a, int B, int Tq, int Tk, int kv_stride, int H, int D,
                        const float *q, const float *k, const float *v, float *out) {
    int rc = check_common(a, B, Tk, H, D);
    if (rc) return rc;
    if (Tq < 1 || Tq > Tk || kv_stride < Tk)
        return lssar_fail(LSSAR_E_SIZE, "attention forward: %d query rows of %d positions in a cache of %d; "
                          "need 1 <= Tq <= Tk <= capacity", Tq, Tk, kv_stride);
    if (!q || !k || !v || !out)
        return lssar_fail(LSSAR_E_NULL, "attention forward: q, k, v and out must be non-NULL");
    const int HD = H * D, nb = (Tq + BQ - 1) / BQ, q0 = Tk - Tq;
    const int64_t ntask = (int64_t)B * H * nb;
    const size_t ldt = round16((size_t)Tk);
    attn_row_params pp0;  // what the driver computes besides the products: the inverse norms
    attn_row_params_init(&pp0, a, D, 0);
    const int normed = pp0.norms;
    int failed = 0;
    int blas_threads = blas_single_begin();
#pragma omp parallel
    {
        // s: scores / logits (BQ, Tk); al: alpha (BQ, Tk); w: weights (BQ, Tk); rk: (Tk); rq: (BQ)
        float *buf = scratch(3 * BQ * ldt + ldt + BQ);
        if (!buf) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < ntask; t++) {
            if (!buf) continue;
            float *s = buf, *al = s + BQ * ldt, *w = al + BQ * ldt, *rk = w + BQ * ldt, *rq = rk + ldt;
            // Largest (last) row blocks of every head first: better load balance under causal masking.
            int rb = nb - 1 - (int)(t / ((int64_t)B * H));
            int bh = (int)(t % ((int64_t)B * H)), b = bh / H, h = bh % H;
            // query rows r0..r1-1 of this call are positions i0..i1-1; they see keys 0..i1-1
            int r0 = rb * BQ, r1 = r0 + BQ < Tq ? r0 + BQ : Tq, bq = r1 - r0, i0 = q0 + r0, n = q0 + r1;
            const float *qb = q + ((size_t)b * Tq + r0) * HD + (size_t)h * D;       // (bq, D) stride HD
            const float *kh = k + (size_t)b * kv_stride * HD + (size_t)h * D;      // (n, D) stride HD
            const float *vh = v + (size_t)b * kv_stride * HD + (size_t)h * D;
            float *ob = out + ((size_t)b * Tq + r0) * HD + (size_t)h * D;
            attn_row_params pp;
            attn_row_params_init(&pp, a, D, h);
            // S = Q_blk K^T  (bq, n)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bq, n, D, 1.0f, qb, HD, kh, HD,
                        0.0f, s, (int)ldt);
            // score cos, re-weighting: 1/|k| of the n visible keys, recomputed per task (n D flops
            // against the block's 4 BQ n D in sgemm) because a shared precomputed array would cost
            // one more barrier per call, and on a busy machine a barrier can cost a whole time slice.
            if (normed) {
                inv_norms(kh, n, D, HD, rk);
                inv_norms(qb, bq, D, HD, rq);
            } else {
                for (int r = 0; r < bq; r++) rq[r] = 1.0f;  // unused
            }
            for (int r = 0; r < bq; r++) {
                attn_row_stats st;
                attn_row_forward(&pp, i0 + r, n, rq[r], rk, s + r * ldt, al + r * ldt, w + r * ldt, &st);
            }
            // Y = W V  (bq, D)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bq, D, n, 1.0f, w, (int)ldt, vh, HD,
                        0.0f, ob, HD);
        }
    }
    blas_single_end(blas_threads);
    if (failed) return lssar_fail(LSSAR_E_NOMEM, "attention forward: cannot allocate scratch for T=%d", Tk);
    return LSSAR_OK;
}

// ------------------------------------------------------------------ backward

int lssar_attn_backward(const lssar_attn_desc *a, int B, int T, int H, int D,
                        const float *q, const float *k, const float *v, const float *dout,
                        float *dq, float *dk, float *dv, float *ds) {
    int rc = check_common(a, B, T, H, D);
    if (rc) return rc;
    if (!q || !k || !v || !dout || !dq || !dk || !dv)
        return lssar_fail(LSSAR_E_NULL, "attention backward: q, k, v, dout, dq, dk and dv must be non-NULL");
    const int HD = H * D, nb = (T + BQ - 1) / BQ, nbh = B * H;
    const size_t ldt = round16((size_t)T);
    attn_row_params pp0;  // the inverse norms; the l2 normalisation's projection (score cos)
    attn_row_params_init(&pp0, a, D, 0);
    const int normed = pp0.norms, cos = pp0.st.score == LSSAR_SCORE_COS;
    double *dsp = NULL;  // per-(b, h) partial d(loss)/d(s_h), summed in a fixed order at the end
    if (pp0.st.score == LSSAR_SCORE_SSMAX && ds) {
        dsp = calloc((size_t)nbh, sizeof(double));
        if (!dsp) return lssar_fail(LSSAR_E_NOMEM, "attention backward: out of memory");
    }
    int failed = 0;
    int blas_threads = blas_single_begin();
#pragma omp parallel
    {
        // s, al, w, dw: (BQ, T) each; rk: (T); rq: (BQ)
        float *buf = scratch(4 * BQ * ldt + ldt + BQ);
        if (!buf) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic, 1)
        for (int bh = 0; bh < nbh; bh++) {
            if (!buf) continue;
            float *s = buf, *al = s + BQ * ldt, *w = al + BQ * ldt, *dw = w + BQ * ldt;
            float *rk = dw + BQ * ldt, *rq = rk + ldt;
            int b = bh / H, h = bh % H;
            size_t head = (size_t)b * T * HD + (size_t)h * D;
            const float *qh = q + head, *kh = k + head, *vh = v + head, *dyh = dout + head;
            float *dqh = dq + head, *dkh = dk + head, *dvh = dv + head;
            attn_row_params pp;
            attn_row_params_init(&pp, a, D, h);
            for (int t = 0; t < T; t++) {
                memset(dkh + (size_t)t * HD, 0, D * sizeof(float));
                memset(dvh + (size_t)t * HD, 0, D * sizeof(float));
            }
            if (normed) inv_norms(kh, T, D, HD, rk);
            double dsacc = 0.0;
            for (int rb = 0; rb < nb; rb++) {
                int i0 = rb * BQ, i1 = i0 + BQ < T ? i0 + BQ : T, bq = i1 - i0, n = i1;
                const float *qb = qh + (size_t)i0 * HD, *dyb = dyh + (size_t)i0 * HD;
                float *dqb = dqh + (size_t)i0 * HD;
                // recompute the forward of this block: S = Q_blk K^T, weights W  (bq, n)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bq, n, D, 1.0f, qb, HD, kh, HD,
                            0.0f, s, (int)ldt);
                if (normed) inv_norms(qb, bq, D, HD, rq);
                else for (int r = 0; r < bq; r++) rq[r] = 1.0f;  // unused
                attn_row_stats st[BQ];
                for (int r = 0; r < bq; r++)
                    attn_row_forward(&pp, i0 + r, n, rq[r], rk, s + r * ldt, al + r * ldt, w + r * ldt,
                                     &st[r]);
                // dW = dY V^T  (bq, n)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bq, n, D, 1.0f, dyb, HD, vh, HD,
                            0.0f, dw, (int)ldt);
                // dV += W^T dY  (n, D)
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, D, bq, 1.0f, w, (int)ldt, dyb, HD,
                            1.0f, dvh, HD);
                for (int r = 0; r < bq; r++)
                    attn_row_backward(&pp, i0 + r, n, rq[r], rk, s + r * ldt, al + r * ldt, w + r * ldt,
                                      &st[r], dw + r * ldt, &dsacc);
                // dQ = dS K  (bq, D);  dK += dS^T Q  (n, D)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bq, D, n, 1.0f, dw, (int)ldt, kh, HD,
                            0.0f, dqb, HD);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, D, bq, 1.0f, dw, (int)ldt, qb, HD,
                            1.0f, dkh, HD);
                if (cos) project_rows(dqb, qb, rq, bq, D, HD);
            }
            if (cos) project_rows(dkh, kh, rk, T, D, HD);
            if (dsp) dsp[bh] = dsacc;
        }
    }
    blas_single_end(blas_threads);
    if (dsp) {
        for (int h = 0; h < H; h++) {
            double sum = 0.0;
            for (int b = 0; b < B; b++) sum += dsp[b * H + h];
            ds[h] = (float)sum;
        }
        free(dsp);
    }
    if (failed) return lssar_fail(LSSAR_E_NOMEM, "attention backward: cannot allocate scratch for T=%d", T);
    return LSSAR_OK;
}
