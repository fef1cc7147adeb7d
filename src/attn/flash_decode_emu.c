/*
 * flash_decode_emu.c - the CPU emulation of the split-KV decoding kernels (src/cuda/flash_decode.cu;
 * the algorithm and its orders: attn/flash_decode.h). A "CTA" is one call of split_cta for one
 * (b, h, split): its tiles are small local arrays laid out as the kernel's shared memory, and every
 * value is computed by the same flash_decode.h function, in the same order, as the kernel thread
 * that owns it. The CTAs run under OpenMP; each writes only its own partials, so the result does
 * not depend on the thread count.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "lssar.h"
#include "core/util.h"
#include "attn/attn.h"
#include "attn/flash.h"
#include "attn/flash_decode.h"
#include "attn/flash_decode_emu.h"

#define MAXD 128

typedef struct {
    flash_params fp;
    int bf16;
    int B, Tq, Tk, kvs, H, D, ns, chunk;
    const float *q, *k, *v, *ssmax_s;
    float *ps1, *ps, *pa;  // partials: pass 1's statistics, the last pass's statistics and acc
} dec_ctx;

static inline float rnd(const dec_ctx *c, float x) { return c->bf16 ? flash_bf16(x) : x; }
static inline const float *qrow(const dec_ctx *c, int b, int r, int h) {
    return c->q + ((size_t)b * c->Tq + r) * c->H * c->D + (size_t)h * c->D;
}
static inline const float *krow(const dec_ctx *c, const float *x, int b, int j, int h) {
    return x + ((size_t)b * c->kvs + j) * c->H * c->D + (size_t)h * c->D;
}
// Partial statistics of (bh, split s, row r) and its accumulator row.
static inline size_t ps_at(const dec_ctx *c, int bh, int s, int r) {
    return (((size_t)bh * c->ns + s) * c->Tq + r) * FD_NPS;
}
static inline size_t pa_at(const dec_ctx *c, int bh, int s, int r) {
    return (((size_t)bh * c->ns + s) * c->Tq + r) * c->D;
}

// The CTA's rows: constants (pass 2: with pass 1's partials combined), running values, Q.
static void split_rows(const dec_ctx *c, int pass, int bh, flash_row *RW, fd_rowst *RS, float *Qs) {
    const flash_params *fp = &c->fp;
    int b = bh / c->H, h = bh % c->H, D = c->D;
    float s_h = fp->score == LSSAR_SCORE_SSMAX ? c->ssmax_s[h] : 0.0f;
    for (int r = 0; r < c->Tq; r++) {
        const float *qr = qrow(c, b, r, h);
        float rq = flash_needs_norms(fp) ? fd_inv_norm(qr, D) : 1.0f;
        flash_row_init(fp, c->Tk - c->Tq + r, s_h, rq, &RW[r]);
        if (pass == FD_RW2)
            fd_rw1_combine(fp, &RW[r], c->ps1 + ps_at(c, bh, 0, r), c->ns, (size_t)c->Tq * FD_NPS);
        fd_row_begin(&RS[r]);
        for (int d = 0; d < D; d++) Qs[r * D + d] = rnd(c, qr[d]);
    }
}

// One CTA: (b, h) = bh, split s, pass FD_MAIN, FD_RW1 or FD_RW2.
static void split_cta(const dec_ctx *c, int pass, int bh, int s) {
    const flash_params *fp = &c->fp;
    const int b = bh / c->H, h = bh % c->H, D = c->D, Tq = c->Tq;
    float Qs[FD_MAXQ * MAXD], Ks[FD_KT * MAXD], Vs[FD_KT * MAXD], Xs[FD_MAXQ * FD_KT], RKs[FD_KT];
    float acc[FD_MAXQ * MAXD];
    flash_row RW[FD_MAXQ];
    fd_rowst RS[FD_MAXQ];
    split_rows(c, pass, bh, RW, RS, Qs);
    memset(acc, 0, sizeof acc);
    const int k0 = s * c->chunk, k1 = k0 + c->chunk < c->Tk ? k0 + c->chunk : c->Tk;
    for (int t0 = k0; t0 < k1; t0 += FD_KT) {
        int nk = k1 - t0 < FD_KT ? k1 - t0 : FD_KT;
        for (int j = 0; j < FD_KT; j++) {  // the tile (rows past nk zero), 1/|k| from the fp32 inputs
            const float *kr = j < nk ? krow(c, c->k, b, t0 + j, h) : NULL,
                        *vr = j < nk ? krow(c, c->v, b, t0 + j, h) : NULL;
            for (int d = 0; d < D; d++) {
                Ks[j * D + d] = kr ? rnd(c, kr[d]) : 0.0f;
                Vs[j * D + d] = vr ? rnd(c, vr[d]) : 0.0f;
            }
            RKs[j] = kr && flash_needs_norms(fp) ? fd_inv_norm(kr, D) : 1.0f;
        }
        for (int r = 0; r < Tq; r++)  // logits
            for (int j = 0; j < FD_KT; j++) {
                int vis = j < fd_nvis(c->Tk, Tq, r, t0, nk);
                Xs[r * FD_KT + j] =
                    vis ? flash_logit(fp, &RW[r], fd_dot(Qs + r * D, Ks + j * D, D), RKs[j]) : -INFINITY;
            }
        for (int r = 0; r < Tq; r++)  // row max, argmax, rescale
            fd_row_tile(fp, pass, &RS[r], Xs + r * FD_KT, RKs, fd_nvis(c->Tk, Tq, r, t0, nk), t0);
        for (int r = 0; r < Tq; r++)  // weights
            for (int j = 0; j < FD_KT; j++) {
                int vis = j < fd_nvis(c->Tk, Tq, r, t0, nk);
                float *x = &Xs[r * FD_KT + j];
                *x = vis ? fd_weight(fp, pass, &RW[r], RS[r].m, *x, t0 + j == RW[r].jm) : 0.0f;
            }
        for (int r = 0; r < Tq; r++) {  // sums and products
            int nv = fd_nvis(c->Tk, Tq, r, t0, nk);
            RS[r].l = fd_lsum(RS[r].l, RS[r].alpha, Xs + r * FD_KT, nv);
            if (pass != FD_RW1)
                for (int d = 0; d < D; d++)
                    acc[r * D + d] =
                        fd_acc_tile(acc[r * D + d], RS[r].alpha, Xs + r * FD_KT, Vs + d, D, nv, c->bf16);
        }
    }
    float *ps = pass == FD_RW1 ? c->ps1 : c->ps;
    for (int r = 0; r < Tq; r++) {
        fd_row_store(&RS[r], ps + ps_at(c, bh, s, r));
        if (pass != FD_RW1) memcpy(c->pa + pa_at(c, bh, s, r), acc + r * D, (size_t)D * sizeof(float));
    }
}

static void run_pass(const dec_ctx *c, int pass) {
    const int64_t ncta = (int64_t)c->B * c->H * c->ns;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t cta = 0; cta < ncta; cta++) split_cta(c, pass, (int)(cta / c->ns), (int)(cta % c->ns));
}

// The combine: every (b, h, row, d), the splits in order.
static void combine(const dec_ctx *c, int pass, float *out) {
    const int D = c->D;
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < c->B * c->H; bh++)
        for (int r = 0; r < c->Tq; r++)
            for (int d = 0; d < D; d++) {
                size_t o = ((size_t)(bh / c->H) * c->Tq + r) * c->H * D + (size_t)(bh % c->H) * D + d;
                out[o] = fd_combine(&c->fp, pass, c->ps + ps_at(c, bh, 0, r), (size_t)c->Tq * FD_NPS,
                                    c->pa + pa_at(c, bh, 0, r) + d, (size_t)c->Tq * D, c->ns);
            }
}

int flash_decode_emu_forward(const lssar_attn_desc *a, flash_mode mode, int nsplit, int B, int Tq, int Tk,
                             int kv_stride, int H, int D, const float *q, const float *k, const float *v,
                             float *out) {
    const char *fn = "flash decode forward";
    int rc = attn_desc_check(a, fn);
    if (!rc) rc = flash_emu_check_fused(a, fn);
    if (rc) return rc;
    if (B <= 0 || Tq <= 0 || Tq > FD_MAXQ || H <= 0 || Tq > Tk || kv_stride < Tk || nsplit < 0 ||
        Tk > (1 << 24))
        return lssar_fail(LSSAR_E_SIZE,
                          "%s: B=%d Tq=%d Tk=%d kv_stride=%d H=%d nsplit=%d; need sizes > 0, "
                          "Tq <= %d, Tq <= Tk <= kv_stride, nsplit >= 0",
                          fn, B, Tq, Tk, kv_stride, H, nsplit, FD_MAXQ);
    if (D != 16 && D != 32 && D != 64 && D != 128)
        return lssar_fail(LSSAR_E_UNSUPPORTED, "%s: head dim D=%d; need 16, 32, 64 or 128", fn, D);
    if (!q || !k || !v || !out) return lssar_fail(LSSAR_E_NULL, "%s: q, k, v and out must be non-NULL", fn);
    dec_ctx c;
    memset(&c, 0, sizeof c);
    lssar_attn_stages st = attn_stages(a->kind);
    flash_params_init(&c.fp, &st, a->p, D);
    flash_params_len(&c.fp, a->len_norm == LSSAR_LEN_NORM_ROW, a->train_len);
    flash_params_temp(&c.fp, a->temp_d);
    c.bf16 = mode == FLASH_BF16;
    c.B = B; c.Tq = Tq; c.Tk = Tk; c.kvs = kv_stride; c.H = H; c.D = D;
    c.chunk = fd_chunk(Tk, nsplit ? nsplit : fd_auto_nsplit(B * H, Tk, 132));
    c.ns = fd_nsplit(Tk, c.chunk);
    c.q = q; c.k = k; c.v = v;
    c.ssmax_s = st.score == LSSAR_SCORE_SSMAX ? a->ssmax_s : NULL;
    size_t nrow = (size_t)B * H * c.ns * Tq;
    c.ps1 = malloc(nrow * FD_NPS * sizeof(float));
    c.ps = malloc(nrow * FD_NPS * sizeof(float));
    c.pa = malloc(nrow * D * sizeof(float));
    if (!c.ps1 || !c.ps || !c.pa) {
        free(c.ps1); free(c.ps); free(c.pa);
        return lssar_fail(LSSAR_E_NOMEM, "%s: out of memory", fn);
    }
    if (c.fp.rw) run_pass(&c, FD_RW1);
    int pass = c.fp.rw ? FD_RW2 : FD_MAIN;
    run_pass(&c, pass);
    combine(&c, pass, out);
    free(c.ps1); free(c.ps); free(c.pa);
    return LSSAR_OK;
}
