// test_cuda_emu.c - the CPU emulation of the CUDA backend's non-attention kernels
// (src/cuda/kernels_emu.c, the same thread loops and trees as src/cuda/kernels_*.cu) against
// float64 references, per element, within error bounds derived in the comments; against the CPU
// backend (nn_backend_cpu: the functions the CUDA backend must match), within the sum of the two
// bounds, or bit for bit where both sides do the same IEEE operations in the same order; and
// against central finite differences where there is a backward. Every bounded check also runs the
// checker on a deliberately wrong result (a plausible bug) and requires it to FAIL, so a bound
// that could not catch that bug is itself an error. The measured worst error / bound ratios are
// printed.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"
#include "core/util.h"
#include "nn/backend.h"
#include "nn/nn.h"
#include "cuda/kernels_emu.h"
#include "cuda/kernels_math.h"
#include "attn/flash.h"

/* Error bounds. float32 rounds to nearest with unit roundoff U = 2^-24: fl(a op b) = (a op b)(1 +
   d), |d| <= U; float64 with U64 = 2^-53. gam(n) = nU / (1 - nU) bounds n compounded roundings
   (Higham, Accuracy and Stability of Numerical Algorithms, Lemma 3.1), so a sum in which every term
   passes through at most h additions has |error| <= gam(h) sum |terms|, whatever the order and
   whether or not products are fused (an FMA rounds once where a * b + c rounds twice): the bounds
   hold for the kernels as well as for the emulation and for the CPU backend (whose SIMD lane orders
   differ between its clones). The depth h of the kernels' trees: a chain of L per-thread additions,
   5 levels per warp tree (32 lanes), 10 per block tree (warp tree + slot tree).
   Where a bound has second-order terms (products of relative errors all below 1e-4), they are
   covered by a factor 1.01 on the first-order bound. fastmath.h's functions have the accuracies
   the other suites establish: fm_exp relative E_EXP = 4e-7 over [-87, 88] (test_attention
   test_math_functions), fm_tanh absolute E_TANH = 4e-7 and fm_sqrt relative E_SQRT = 5e-7
   (test_layers test_vmath). */
#define U32 0x1p-24
#define U64 0x1p-53
#define E_EXP 4e-7
#define E_TANH 4e-7
#define E_SQRT 5e-7
#define SECOND 1.01
static double gam(double n) { return n * U32 / (1 - n * U32); }
static double gam64(double n) { return n * U64 / (1 - n * U64); }
static int ceil_div(int a, int b) { return (a + b - 1) / b; }

static lssar_rng rng;
static void randn(float *x, size_t n, double s) { for (size_t i = 0; i < n; i++) x[i] = (float)(s * lssar_rng_normal(&rng)); }
static void f2d(double *d, const float *f, size_t n) { for (size_t i = 0; i < n; i++) d[i] = f[i]; }
static void *xmalloc(size_t n) { void *p = calloc(1, n ? n : 1); if (!p) abort(); return p; }

/* Worst |got_i - want_i| / bound_i (<= 1: every element within its bound; NaN counts as failing) */
static double worst_ratio(const float *got, const double *want, const double *bound, size_t n) {
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        double r = fabs(got[i] - want[i]) / bound[i];
        w = r == r ? fmax(w, r) : INFINITY;
    }
    return w;
}
/* the same for two float results, each within its own bound of the truth: bound = ba + bb */
static double worst_ratio2(const float *a, const float *b, const double *ba, const double *bb, size_t n) {
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        double r = fabs((double)a[i] - b[i]) / (ba[i] + bb[i]);
        w = r == r ? fmax(w, r) : INFINITY;
    }
    return w;
}
static int bits_equal(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof(float)) == 0; }

/* A check of a bounded result, with its negative control: `wrong` (a plausible bug's output)
   must be rejected by the same bound. */
static void check_bound(const char *what, const float *got, const float *wrong, const double *want,
                        const double *bound, size_t n) {
    double r = worst_ratio(got, want, bound, n);
    printf("  %-44s error / bound %.3g\n", what, r);
    CHECK(r <= 1, "%s: error / bound %g", what, r);
    if (wrong) {
        double rw = worst_ratio(wrong, want, bound, n);
        CHECK(rw > 1, "%s: the bound (ratio %g) does not reject the deliberately wrong result", what, rw);
    }
}

static nn_ctx *cpu;   // the CPU backend's context
#define CPU nn_backend_cpu

/* Gradient of sum(dout * f(in)) by central differences of a float64 reference. Rounding error:
   nout U64 sum |dout_j y_j| / h with h >= 1e-6 (fd_err); truncation h^2 |f'''| / 6, below 1e-10
   for these smooth layers (0 for the linear ones). */
typedef void (*ref_fn)(const double *in, double *out, const void *ctx);
static void fd_grad(ref_fn f, const void *ctx, const double *in, size_t nin, const double *dout, size_t nout,
                    double *grad) {
    double *x = xmalloc(nin * sizeof(double)), *y = xmalloc(nout * sizeof(double));
    memcpy(x, in, nin * sizeof(double));
    for (size_t i = 0; i < nin; i++) {
        double h = 1e-6 * fmax(1.0, fabs(in[i])), lp = 0, lm = 0;
        x[i] = in[i] + h; f(x, y, ctx);
        for (size_t j = 0; j < nout; j++) lp += dout[j] * y[j];
        x[i] = in[i] - h; f(x, y, ctx);
        for (size_t j = 0; j < nout; j++) lm += dout[j] * y[j];
        x[i] = in[i];
        grad[i] = (lp - lm) / (2 * h);
    }
    free(x); free(y);
}
static double fd_err(const double *dout, const double *y, size_t nout) {
    double s = 0;
    for (size_t j = 0; j < nout; j++) s += fabs(dout[j] * y[j]);
    return 4 * nout * U64 * s / 1e-6 + 1e-10;
}

/* ------------------------------------------------------------ the trees */
static void test_trees(void) {
    // the reductions' bit-for-bit agreement with the kernels assumes no FMA contraction here
    CHECK(kemu_fp_contract_off(), "kernels_emu.c was compiled with FMA contraction (-ffp-contract=fast)");
    // The block sum is the documented tree (warp halving trees, then the slot tree), which only
    // this order gets right: 2^24 in lane 1 and ones in lanes 0 and 16 of warp 0. Lanes 0 and 16
    // meet first (1 + 1 = 2, exact), so the total is 2^24 + 2; left to right, or pairing adjacent
    // lanes, each 1 meets 2^24 alone and is rounded away (2^24 + 1 is a tie, to even: 2^24).
    static float v[1024];
    v[0] = 1.0f; v[1] = 0x1p24f; v[16] = 1.0f;
    float s = kemu_block_sum_f(v, KM_XENT_THREADS);
    CHECK(s == 0x1p24f + 2.0f, "block sum %.1f, the documented tree gives %.1f", s, 0x1p24f + 2.0f);
    // across warps (a 1024-thread block): warp totals 2^24 (warp 1), 1 (warp 0) and 1 (warp 16):
    // the slot tree pairs slots 0 and 16 first, the same way
    memset(v, 0, sizeof v);
    v[32 * 1] = 0x1p24f; v[32 * 0] = 1.0f; v[32 * 16 + 5] = 1.0f;
    s = kemu_block_sum_f(v, 1024);
    CHECK(s == 0x1p24f + 2.0f, "block sum across warps %.1f", s);
    double d[KM_SS_THREADS] = {0};
    d[0] = 1.0; d[1] = 0x1p53; d[16] = 1.0;
    CHECK(kemu_block_sum_d(d, KM_SS_THREADS) == 0x1p53 + 2.0, "double block sum");
}

/* ------------------------------------------------------------ layernorm */
typedef struct { int N, C; } ln_ctx;
// y = layernorm(x; w, b) in float64; in = x (N, C), w (C), b (C)
static void ln_ref(const double *in, double *out, const void *c) {
    const ln_ctx *k = c;
    const double *x = in, *w = x + (size_t)k->N * k->C, *b = w + k->C;
    for (int r = 0; r < k->N; r++) {
        double m = 0, v = 0;
        for (int i = 0; i < k->C; i++) m += x[r * k->C + i];
        m /= k->C;
        for (int i = 0; i < k->C; i++) v += (x[r * k->C + i] - m) * (x[r * k->C + i] - m);
        v /= k->C;
        for (int i = 0; i < k->C; i++) out[r * k->C + i] = (x[r * k->C + i] - m) / sqrt(v + 1e-5) * w[i] + b[i];
    }
}

static void ln_forward_case(int N, int C) {
    size_t nx = (size_t)N * C;
    float *x = xmalloc(nx * 4), *w = xmalloc(C * 4), *b = xmalloc(C * 4), *out = xmalloc(nx * 4);
    float *cout = xmalloc(nx * 4), *wrong = xmalloc(nx * 4), *mean = xmalloc(N * 4), *rstd = xmalloc(N * 4);
    float *cmean = xmalloc(N * 4), *crstd = xmalloc(N * 4);
    double *bnd = xmalloc(nx * 8), *cbnd = xmalloc(nx * 8), *ref = xmalloc(nx * 8);
    double *mref = xmalloc(N * 8), *sref = xmalloc(N * 8), *mb = xmalloc(N * 8), *sb = xmalloc(N * 8);
    randn(x, nx, 1.0);
    for (size_t i = 0; i < nx; i++) x[i] += 3.0f;   // a non-zero mean
    randn(w, C, 0.5);
    for (int i = 0; i < C; i++) w[i] += 1.0f;
    randn(b, C, 0.5);
    kemu_layernorm_forward(out, mean, rstd, x, w, b, N, C);
    CPU.layernorm_forward(cpu, cout, cmean, crstd, x, w, b, N, C);
    // Per row, L = ceil(C / 32) columns per lane: the mean's sum passes every term through <= L
    // chain additions and the 5 tree levels, then the division: |dm| <= gam(L + 6) mean|x| = dmb.
    // The variance sums fl(fl(x - m^)^2) (3 roundings) the same way and divides (L + 9 in all):
    // var^ = (var + dm^2)(1 + th), |th| <= gam(L + 9) (the cross term vanishes: sum (x - m) = 0).
    // With eps added (U), the relative error of the argument of 1/sqrt is
    //   ra <= (gam(L + 9)(var + dmb^2) + dmb^2) / (var + eps) + U,
    // s = 1/sqrt(.) halves it and adds 2 roundings: rs <= ra / 2 + gam(2). The output
    // fl(fl(fl(x - m^) s^) w) + b has 4 more roundings:
    //   |do| <= 1.01 (|w| s dmb + |w s (x - m)| (rs + gam(3)) + U |o|).
    // The CPU backend's sums run over C terms in any lane order: the same with L -> C.
    int L = ceil_div(C, KM_WARP);
    for (int r = 0; r < N; r++) {
        double m = 0, v = 0, ma = 0;
        for (int i = 0; i < C; i++) { m += x[r * C + i]; ma += fabs(x[r * C + i]); }
        m /= C; ma /= C;
        for (int i = 0; i < C; i++) v += (x[r * C + i] - m) * (x[r * C + i] - m);
        v /= C;
        double s = 1 / sqrt(v + 1e-5);
        mref[r] = m; sref[r] = s;
        for (int pass = 0; pass < 2; pass++) {
            int h = pass ? C : L;
            double dmb = gam(h + 6) * ma;
            double ra = (gam(h + 9) * (v + dmb * dmb) + dmb * dmb) / (v + 1e-5) + U32;
            double rs = SECOND * ra / 2 + gam(2);
            if (!pass) { mb[r] = dmb; sb[r] = rs * s; }
            for (int i = 0; i < C; i++) {
                double o = (x[r * C + i] - m) * s * w[i] + b[i];
                if (!pass) ref[r * C + i] = o;
                (pass ? cbnd : bnd)[r * C + i] =
                    SECOND * (fabs(w[i]) * s * dmb + fabs(w[i] * s * (x[r * C + i] - m)) * (rs + gam(3)) + U32 * fabs(o));
            }
        }
        // the wrong result: the unbiased variance (C - 1), a classic slip
        double su = 1 / sqrt(v * C / (C - 1) + 1e-5);
        for (int i = 0; i < C; i++) wrong[r * C + i] = (float)((x[r * C + i] - m) * su * w[i] + b[i]);
    }
    char what[64];
    snprintf(what, sizeof what, "layernorm forward (C = %d)", C);
    check_bound(what, out, wrong, ref, bnd, nx);
    double rm = 0, rr = 0;
    for (int r = 0; r < N; r++) {
        rm = fmax(rm, fabs(mean[r] - mref[r]) / mb[r]);
        rr = fmax(rr, fabs(rstd[r] - sref[r]) / sb[r]);
    }
    CHECK(rm <= 1 && rr <= 1, "mean / rstd: error / bound %g, %g", rm, rr);
    double rc = worst_ratio2(out, cout, bnd, cbnd, nx);
    printf("  %-44s error / bound %.3g\n", "  vs the CPU backend", rc);
    CHECK(rc <= 1, "layernorm forward vs CPU: error / bound %g", rc);
    free(x); free(w); free(b); free(out); free(cout); free(wrong); free(mean); free(rstd); free(cmean); free(crstd);
    free(bnd); free(cbnd); free(ref); free(mref); free(sref); free(mb); free(sb);
}

// the double backward of the layernorm with given (m, s) per row (exact or the float ones)
static void ln_bwd_ref(double *dx, double *dw, double *db, const float *dout, const float *x, const float *w,
                       const double *m, const double *s, int N, int C, double *tmax /* (N*C) |t| */,
                       double *gsum, double *gxsum, double *gmv, double *gxmv) {
    for (int r = 0; r < N; r++) {
        double gm = 0, gxm = 0, ga = 0, gxa = 0;
        for (int i = 0; i < C; i++) {
            double g = (double)dout[r * C + i] * w[i], xh = (x[r * C + i] - m[r]) * s[r];
            gm += g; gxm += g * xh; ga += fabs(g); gxa += fabs(g * xh);
        }
        gm /= C; gxm /= C;
        if (gsum) { gsum[r] = ga; gxsum[r] = gxa; gmv[r] = gm; gxmv[r] = gxm; }
        for (int i = 0; i < C; i++) {
            double g = (double)dout[r * C + i] * w[i], xh = (x[r * C + i] - m[r]) * s[r];
            double t = g - gm - xh * gxm;
            dx[r * C + i] += s[r] * t;
            if (tmax) tmax[r * C + i] = fabs(t);
        }
    }
    for (int j = 0; j < C; j++)
        for (int r = 0; r < N; r++) {
            dw[j] += (double)dout[r * C + j] * (x[r * C + j] - m[r]) * s[r];
            db[j] += dout[r * C + j];
        }
}

static void test_layernorm_forward(void) {
    ln_forward_case(41, 100);    // 4 columns per lane, the last lanes short
    ln_forward_case(9, 1000);    // 32 per lane
    ln_forward_case(5, 7);       // fewer columns than lanes
}

static void test_layernorm_backward(void) {
    enum { N = 600, C = 70 };   // 3 chunks of rows (the last of 88), 3 column blocks (the last of 6)
    size_t nx = (size_t)N * C;
    float *x = xmalloc(nx * 4), *w = xmalloc(C * 4), *dout = xmalloc(nx * 4), *dx = xmalloc(nx * 4);
    float *cdx = xmalloc(nx * 4), *wrong = xmalloc(nx * 4), mf[N], sf[N];
    float dw[C], db[C], cdw[C], cdb[C], dw0[C], db0[C], cs[C], wrongw[C];
    double ms[N], ss[N], *rdx = xmalloc(nx * 8), rdw[C], rdb[C], *tm = xmalloc(nx * 8);
    double gsum[N], gxsum[N], gm[N], gxm[N], *bx = xmalloc(nx * 8), *cbx = xmalloc(nx * 8);
    double bw[C], bb[C], cbw[C], cbb[C];
    randn(x, nx, 1.0);
    for (size_t i = 0; i < nx; i++) x[i] += 3.0f;
    randn(w, C, 0.5);
    for (int i = 0; i < C; i++) w[i] += 1.0f;
    randn(dout, nx, 1.0);
    randn(dx, nx, 1.0);
    randn(dw0, C, 1.0);
    randn(db0, C, 1.0);
    // the saved statistics: the exact ones rounded to float, used as exact inputs by the reference,
    // so that only the backward's own arithmetic is measured
    for (int r = 0; r < N; r++) {
        double m = 0, v = 0;
        for (int i = 0; i < C; i++) m += x[r * C + i];
        m /= C;
        for (int i = 0; i < C; i++) v += (x[r * C + i] - m) * (x[r * C + i] - m);
        mf[r] = (float)m; sf[r] = (float)(1 / sqrt(v / C + 1e-5));
        ms[r] = mf[r]; ss[r] = sf[r];
    }
    memcpy(cdx, dx, nx * 4);
    for (size_t i = 0; i < nx; i++) rdx[i] = dx[i];
    for (int j = 0; j < C; j++) { rdw[j] = dw[j] = cdw[j] = dw0[j]; rdb[j] = db[j] = cdb[j] = cs[j] = db0[j]; }
    kemu_layernorm_backward(dx, dw, db, dout, x, w, mf, sf, N, C);
    CPU.layernorm_backward(cpu, cdx, cdw, cdb, dout, x, w, mf, sf, N, C);
    ln_bwd_ref(rdx, rdw, rdb, dout, x, w, ms, ss, N, C, tm, gsum, gxsum, gm, gxm);
    // dinp, per row with L = ceil(C / 32): gm = sum g / C over fl(d w) (1 rounding), L chain
    // additions, 5 tree levels, the division: |dgm| <= gam(L + 7) sum |g| / C; gxm's terms
    // g (x - m) s carry 4 roundings: |dgxm| <= gam(L + 10) sum |g xh| / C. Then
    // t = fl(fl(g - gm) - fl(xh gxm)) with xh = fl(fl(x - m) s): |dt| <= dgm + |xh| dgxm +
    // gam(5) (|g| + |gm| + |xh gxm|), and dx += fl(s t) (2 roundings):
    //   |ddx| <= 1.01 (s |dt| + U s |t| + U |dx|).
    // The CPU backend: the same with C-term sums in any order (L -> C).
    int L = ceil_div(C, KM_WARP);
    for (int pass = 0; pass < 2; pass++) {
        int h = pass ? C : L;
        for (int r = 0; r < N; r++) {
            double dgm = gam(h + 7) * gsum[r] / C, dgxm = gam(h + 10) * gxsum[r] / C;
            for (int i = 0; i < C; i++) {
                double g = fabs((double)dout[r * C + i] * w[i]), xh = fabs((x[r * C + i] - ms[r]) * ss[r]);
                double dt = dgm + xh * dgxm + gam(5) * (g + fabs(gm[r]) + xh * fabs(gxm[r]));
                (pass ? cbx : bx)[r * C + i] = SECOND * (ss[r] * dt + U32 * ss[r] * tm[r * C + i] + U32 * fabs(rdx[r * C + i]));
            }
        }
    }
    // dweight, dbias: in a chunk each thread sums <= 256 / 8 = 32 rows, the 8 partials meet in a
    // 3-level tree, the nch chunks are added in order and the total to the gradient (1): every term
    // passes <= 32 + 3 + nch + 1 additions; dweight's terms d (x - m) s carry 3 roundings more.
    // The CPU backend: N rows in order, then the addition: N + 1 (+ 3).
    int nch = ceil_div(N, KM_COL_ROWS), hw = KM_COL_ROWS / KM_COL_TY + 3 + nch + 1;
    for (int j = 0; j < C; j++) {
        double aw = fabs(dw0[j]), ab = fabs(db0[j]);
        for (int r = 0; r < N; r++) {
            aw += fabs((double)dout[r * C + j] * (x[r * C + j] - ms[r]) * ss[r]);
            ab += fabs(dout[r * C + j]);
        }
        bw[j] = gam(hw + 3) * aw; bb[j] = gam(hw) * ab;
        cbw[j] = gam(N + 4) * aw; cbb[j] = gam(N + 1) * ab;
    }
    // wrong results: the input gradient without the mean(g xh) projection term (a dropped term),
    // the weight gradient with xh taken about 0 instead of the mean
    for (int r = 0; r < N; r++)
        for (int i = 0; i < C; i++) wrong[r * C + i] = (float)(rdx[r * C + i] + ss[r] * (x[r * C + i] - ms[r]) * ss[r] * gxm[r]);
    for (int j = 0; j < C; j++) {
        double a = dw0[j];
        for (int r = 0; r < N; r++) a += (double)dout[r * C + j] * x[r * C + j] * ss[r];
        wrongw[j] = (float)a;
    }
    check_bound("layernorm backward dinp", dx, wrong, rdx, bx, nx);
    check_bound("layernorm backward dweight", dw, wrongw, rdw, bw, C);
    check_bound("layernorm backward dbias", db, dw, rdb, bb, C);
    double r1 = worst_ratio2(dx, cdx, bx, cbx, nx), r2 = worst_ratio2(dw, cdw, bw, cbw, C),
           r3 = worst_ratio2(db, cdb, bb, cbb, C);
    printf("  %-44s error / bound %.3g %.3g %.3g\n", "  vs the CPU backend (dinp, dweight, dbias)", r1, r2, r3);
    CHECK(r1 <= 1 && r2 <= 1 && r3 <= 1, "layernorm backward vs CPU: error / bound %g %g %g", r1, r2, r3);
    // dbias is a column sum of dout: the layernorm kernel and the column-sum kernel share the tree
    kemu_colsum(cs, dout, N, C);
    CHECK(bits_equal(cs, db, C), "layernorm dbias and the column sum of dout differ in their bits");
    free(x); free(w); free(dout); free(dx); free(cdx); free(wrong); free(rdx); free(tm); free(bx); free(cbx);
}

// Finite differences of the float64 forward: they check the reference backward's formula (the
// float64 gradient with the exact statistics), and the emulation's backward, given the emulation's
// own float statistics, directly: |emu - fd| <= its bound above (computed with the float
// statistics) + |ref(float stats) - ref(exact stats)| (the effect of the statistics' rounding,
// computed exactly in float64) + fd_err.
static void test_layernorm_fd(void) {
    enum { N = 3, C = 40 };
    ln_ctx k = {N, C};
    int nx = N * C, nin = nx + 2 * C;
    float in[N * C + 2 * C], dout[N * C], dx[N * C], dw[C], db[C], mf[N], sf[N];
    double din[N * C + 2 * C], dd[N * C], yref[N * C], g[N * C + 2 * C];
    double me[N], se[N], mfl[N], sfl[N], ex[N * C] = {0}, ew[C] = {0}, eb[C] = {0};
    double fx[N * C] = {0}, fw[C] = {0}, fb[C] = {0}, tm[N * C], gs[N], gxs[N], gm[N], gxm[N];
    float out[N * C];
    randn(in, nin, 1.0);
    for (int i = 0; i < nx; i++) in[i] += 2.0f;
    for (int i = 0; i < C; i++) in[nx + i] += 1.0f;
    randn(dout, nx, 1.0);
    f2d(din, in, nin); f2d(dd, dout, nx);
    ln_ref(din, yref, &k);
    fd_grad(ln_ref, &k, din, nin, dd, nx, g);
    kemu_layernorm_forward(out, mf, sf, in, in + nx, in + nx + C, N, C);
    for (int r = 0; r < N; r++) {
        double m = 0, v = 0;
        for (int i = 0; i < C; i++) m += din[r * C + i];
        m /= C;
        for (int i = 0; i < C; i++) v += (din[r * C + i] - m) * (din[r * C + i] - m);
        me[r] = m; se[r] = 1 / sqrt(v / C + 1e-5);
        mfl[r] = mf[r]; sfl[r] = sf[r];
    }
    ln_bwd_ref(ex, ew, eb, dout, in, in + nx, me, se, N, C, NULL, NULL, NULL, NULL, NULL);
    ln_bwd_ref(fx, fw, fb, dout, in, in + nx, mfl, sfl, N, C, tm, gs, gxs, gm, gxm);
    double fde = fd_err(dd, yref, nx), worst_ref = 0;
    for (int i = 0; i < nx; i++) worst_ref = fmax(worst_ref, fabs(ex[i] - g[i]));
    for (int j = 0; j < C; j++) worst_ref = fmax(worst_ref, fmax(fabs(ew[j] - g[nx + j]), fabs(eb[j] - g[nx + C + j])));
    // the float64 formula against the differences: both exact to ~1e-10 here
    CHECK(worst_ref <= fde + 1e-9, "float64 layernorm gradient vs finite differences: %g (bound %g)", worst_ref, fde + 1e-9);
    for (int i = 0; i < nx; i++) dx[i] = 0.0f;
    for (int j = 0; j < C; j++) dw[j] = db[j] = 0.0f;
    kemu_layernorm_backward(dx, dw, db, dout, in, in + nx, mf, sf, N, C);
    double b[N * C + 2 * C], want[N * C + 2 * C];
    float got[N * C + 2 * C];
    int L = ceil_div(C, KM_WARP);
    for (int r = 0; r < N; r++)
        for (int i = 0; i < C; i++) {
            double gg = fabs((double)dout[r * C + i] * in[nx + i]), xh = fabs((in[r * C + i] - mfl[r]) * sfl[r]);
            double dt = gam(L + 7) * gs[r] / C + xh * gam(L + 10) * gxs[r] / C + gam(5) * (gg + fabs(gm[r]) + xh * fabs(gxm[r]));
            b[r * C + i] = SECOND * (sfl[r] * dt + U32 * sfl[r] * tm[r * C + i] + U32 * fabs(fx[r * C + i])) +
                           fabs(fx[r * C + i] - ex[r * C + i]) + fde;
        }
    for (int j = 0; j < C; j++) {
        double aw = 0, ab = 0;
        for (int r = 0; r < N; r++) {
            aw += fabs((double)dout[r * C + j] * (in[r * C + j] - mfl[r]) * sfl[r]);
            ab += fabs(dout[r * C + j]);
        }
        b[nx + j] = gam(KM_COL_ROWS / KM_COL_TY + 8) * aw + fabs(fw[j] - ew[j]) + fde;
        b[nx + C + j] = gam(KM_COL_ROWS / KM_COL_TY + 5) * ab + fabs(fb[j] - eb[j]) + fde;
    }
    memcpy(got, dx, sizeof dx); memcpy(got + nx, dw, sizeof dw); memcpy(got + nx + C, db, sizeof db);
    memcpy(want, g, sizeof want);
    check_bound("layernorm backward vs finite differences", got, NULL, want, b, nin);
}

/* ------------------------------------------------------------ column sums */
static void colsum_case(int N, int OC) {
    float *x = xmalloc((size_t)N * OC * 4), *s = xmalloc(OC * 4), *cs = xmalloc(OC * 4), *wrong = xmalloc(OC * 4);
    double *ref = xmalloc(OC * 8), *b = xmalloc(OC * 8), *cb = xmalloc(OC * 8);
    randn(x, (size_t)N * OC, 1.0);
    randn(s, OC, 1.0);
    memcpy(cs, s, OC * 4);
    for (int j = 0; j < OC; j++) {
        double a = fabs(s[j]), t = s[j];
        for (int r = 0; r < N; r++) { t += x[(size_t)r * OC + j]; a += fabs(x[(size_t)r * OC + j]); }
        ref[j] = t;
        // thread chains of <= 32 rows, the 8-way tree (3), the chunks in order, the final addition
        b[j] = gam(KM_COL_ROWS / KM_COL_TY + 3 + ceil_div(N, KM_COL_ROWS) + 1) * a;
        cb[j] = gam(N + 1) * a;   // the CPU backend: the rows in order, then the addition
        wrong[j] = (float)(t - x[(size_t)(N - 1) * OC + j]);   // the last row dropped (a ragged chunk lost)
    }
    kemu_colsum(s, x, N, OC);
    CPU.matmul_backward(cpu, NULL, NULL, cs, x, NULL, NULL, N, 1, OC, 0);
    char what[64];
    snprintf(what, sizeof what, "column sums (N = %d)", N);
    check_bound(what, s, wrong, ref, b, OC);
    double rc = worst_ratio2(s, cs, b, cb, OC);
    CHECK(rc <= 1, "column sums vs CPU: error / bound %g", rc);
    free(x); free(s); free(cs); free(wrong); free(ref); free(b); free(cb);
}
static void test_colsum(void) {
    colsum_case(1000, 45);   // 4 chunks, the last of 232 rows; a ragged column block
    colsum_case(5, 3);       // one short chunk
    colsum_case(2304, 64);   // 9 whole chunks
}

/* ------------------------------------------------------------ cross-entropy */
// float64 softmax of one row: probabilities p (V), the loss for target tg (0 when ignored)
static double xent_row_ref(const float *x, int V, int tg, double *p) {
    double mx = x[0], z = 0;
    for (int j = 1; j < V; j++) mx = fmax(mx, x[j]);
    for (int j = 0; j < V; j++) z += exp(x[j] - mx);
    if (p) for (int j = 0; j < V; j++) p[j] = exp(x[j] - mx) / z;
    return tg == NN_IGNORE ? 0.0 : log(z) - (x[tg] - mx);
}
static int first_max(const float *x, int V) {
    int am = 0;
    for (int j = 1; j < V; j++) if (x[j] > x[am]) am = j;
    return am;
}

// Bounds for one row (V logits, max mx, spread = max |x_j - mx|): e_j = fm_exp(fl(x_j - mx)) has
// relative error re_j = E_EXP + U |x_j - mx| (the argument's rounding moves exp by that factor);
// z sums them through ceil(V / 512) chain additions and the 10-level block tree:
//   rz <= 1.01 (max re + gam(ceil(V / 512) + 10))   (h = V for the CPU backend's any-order sum);
// p_j = fl(e_j fl(1 / z)): |dp_j| <= 1.01 p_j (re_j + rz + gam(2)); the loss log z - (x_t - mx)
// in float64, rounded to float: |dl| <= 1.01 rz + U |l| + 1e-14 (1 + |l|).
static void xent_bounds(const float *x, int V, int h, const double *p, double l, double *bp, double *bl) {
    double mx = x[first_max(x, V)], spread = 0;
    for (int j = 0; j < V; j++) spread = fmax(spread, fabs(x[j] - mx));
    double rz = SECOND * (E_EXP + U32 * spread + gam(h));
    for (int j = 0; j < V; j++) bp[j] = SECOND * p[j] * (E_EXP + U32 * fabs(x[j] - mx) + rz + gam(2)) + 1e-45;
    *bl = SECOND * rz + U32 * fabs(l) + 1e-14 * (1 + fabs(l));
}

static void test_xent_forward(void) {
    enum { R = 9, V = 1500, TS = 2 };   // 3 columns for threads < 476, 2 after; targets strided
    size_t n = (size_t)R * V;
    float *lg = xmalloc(n * 4), *x0 = xmalloc(n * 4), *clg = xmalloc(n * 4), *wrong = xmalloc(n * 4);
    double *p = xmalloc(n * 8), *bp = xmalloc(n * 8), *cbp = xmalloc(n * 8);
    float losses[R * TS], closses[R * TS], wl[R];
    uint16_t tg[R * TS], am[R * TS], cam[R * TS];
    double rl[R], bl[R], cbl[R];
    randn(x0, n, 3.0);
    x0[2 * V + 77] = 40.0f;                                   // a peaked row
    x0[4 * V + 600] = x0[4 * V + 1100] = 30.0f;               // a tie: thread 88's column 600 is the
                                                              // first, thread 76 holds 1100
    x0[5 * V + 5] = x0[5 * V + 517] = 25.0f;                  // a tie inside thread 5
    for (int j = 0; j < V; j++) x0[6 * V + j] = 1.25f;        // all equal: argmax 0
    for (int r = 0; r < R; r++) tg[r * TS] = (uint16_t)((r * 379) % V), tg[r * TS + 1] = 0;
    tg[3 * TS] = NN_IGNORE;
    tg[6 * TS] = 1499;
    memcpy(lg, x0, n * 4); memcpy(clg, x0, n * 4);
    double acc[2] = {1.5, 2.0}, cacc[2] = {1.5, 2.0};
    kemu_xent_forward(lg, losses, am, tg, TS, TS, R, V, acc);
    CPU.xent_forward(cpu, clg, closses, cam, tg, TS, TS, R, V, cacc);
    double lsum = 0, lbsum = 0, clbsum = 0, labs = 0;
    int cnt = 0;
    for (int r = 0; r < R; r++) {
        const float *x = x0 + (size_t)r * V;
        rl[r] = xent_row_ref(x, V, tg[r * TS], p + (size_t)r * V);
        xent_bounds(x, V, ceil_div(V, KM_XENT_THREADS) + 10, p + (size_t)r * V, rl[r], bp + (size_t)r * V, &bl[r]);
        xent_bounds(x, V, V, p + (size_t)r * V, rl[r], cbp + (size_t)r * V, &cbl[r]);
        lsum += rl[r]; lbsum += bl[r]; clbsum += cbl[r]; labs += fabs(rl[r]);
        cnt += tg[r * TS] != NN_IGNORE;
        CHECK(am[r * TS] == first_max(x, V), "row %d: argmax %d, the first maximum is %d", r, am[r * TS], first_max(x, V));
        CHECK(am[r * TS] == cam[r * TS], "row %d: argmax %d, the CPU backend's %d", r, am[r * TS], cam[r * TS]);
        wl[r] = (float)(rl[r] == 0 ? 0 : rl[r] * (1 + 1e-4));
    }
    // wrong probabilities: a normaliser short by 1e-4 of itself (one exponential of ~1e4 dropped)
    for (size_t i = 0; i < n; i++) wrong[i] = (float)(p[i] / (1 - 1e-4));
    CHECK(am[4 * TS] == 600 && am[5 * TS] == 5 && am[6 * TS] == 0, "argmax ties: %d %d %d", am[4 * TS], am[5 * TS], am[6 * TS]);
    check_bound("cross-entropy probabilities", lg, wrong, p, bp, n);
    float lg1[R];
    double blw[R];
    for (int r = 0; r < R; r++) { lg1[r] = losses[r * TS]; blw[r] = bl[r] + 1e-30; }
    check_bound("cross-entropy losses", lg1, wl, rl, blw, R);
    CHECK(losses[3 * TS] == 0.0f, "ignored row: loss %g", losses[3 * TS]);
    // acc[0]: the float losses summed in float64 (R terms, depth <= R / 256 + 10 + 1)
    double ba = lbsum + gam64(R + 11) * (labs + 1.5);
    CHECK(fabs(acc[0] - (1.5 + lsum)) <= ba, "acc[0] %.17g vs %.17g (bound %g)", acc[0], 1.5 + lsum, ba);
    CHECK(acc[1] == 2.0 + cnt, "acc[1] %g, expected %d", acc[1], 2 + cnt);
    printf("  %-44s error / bound %.3g\n", "cross-entropy loss accumulator", fabs(acc[0] - (1.5 + lsum)) / ba);
    double rp = worst_ratio2(lg, clg, bp, cbp, n), rlc = 0;
    for (int r = 0; r < R; r++) rlc = fmax(rlc, fabs((double)losses[r * TS] - closses[r * TS]) / (bl[r] + cbl[r] + 1e-30));
    printf("  %-44s error / bound %.3g %.3g\n", "  vs the CPU backend (probabilities, losses)", rp, rlc);
    CHECK(rp <= 1 && rlc <= 1, "cross-entropy vs CPU: error / bound %g %g", rp, rlc);
    double cba = clbsum + gam64(R + 1) * (labs + 1.5);   // the CPU: its losses, summed in row order
    CHECK(cacc[1] == acc[1] && fabs(acc[0] - cacc[0]) <= ba + cba, "acc vs CPU: %.17g %.17g", acc[0], cacc[0]);
    // the same rows without the optional outputs: the same accumulator, bit for bit
    double acc2[2] = {1.5, 2.0};
    memcpy(lg, x0, n * 4);
    kemu_xent_forward(lg, NULL, NULL, tg, TS, TS, R, V, acc2);
    CHECK(acc2[0] == acc[0] && acc2[1] == acc[1], "losses / argmax NULL changed the accumulator");
    // no targets: losses 0, nothing counted
    memcpy(lg, x0, n * 4);
    acc2[0] = 1.5; acc2[1] = 2.0;
    kemu_xent_forward(lg, losses, am, NULL, TS, TS, R, V, acc2);
    CHECK(acc2[0] == 1.5 && acc2[1] == 2.0 && losses[0] == 0.0f && losses[8 * TS] == 0.0f, "no targets");
    free(lg); free(x0); free(clg); free(wrong); free(p); free(bp); free(cbp);
}

// Rows with a NaN or inf logit: the loss is NaN, the argmax the CPU's (a NaN in column 0 makes the
// row's max NaN, and xent.c's search then stops at V - 1), exactly as the CPU backend.
static void test_xent_nonfinite(void) {
    enum { R = 4, V = 700 };
    float lg[R * V], clg[R * V], losses[R], closses[R];
    uint16_t tg[R] = {3, 4, NN_IGNORE, 9}, am[R], cam[R];
    randn(lg, R * V, 1.0);
    lg[0 * V + 5] = NAN;
    lg[1 * V + 0] = NAN;
    lg[2 * V + 650] = INFINITY;
    lg[3 * V + 10] = -INFINITY;
    memcpy(clg, lg, sizeof lg);
    double acc[2] = {0, 0}, cacc[2] = {0, 0};
    kemu_xent_forward(lg, losses, am, tg, 1, 1, R, V, acc);
    CPU.xent_forward(cpu, clg, closses, cam, tg, 1, 1, R, V, cacc);
    for (int r = 0; r < R; r++) {
        CHECK(isnan(losses[r]) && isnan(closses[r]), "row %d: loss %g (CPU %g), expected NaN", r, losses[r], closses[r]);
        CHECK(am[r] == cam[r], "row %d: argmax %d, CPU %d", r, am[r], cam[r]);
    }
    CHECK(am[1] == V - 1 && am[2] == 650, "argmax %d %d", am[1], am[2]);
    CHECK(isnan(acc[0]) && acc[1] == 3, "acc {%g, %g}", acc[0], acc[1]);
}

// The backward: dlogits = (grad_scale / count) (p - onehot) for L = grad_scale * mean loss, checked
// against central differences of the float64 L. Per element: p^ (the forward above, |dp|) times the
// scale, and 3 roundings (the scale's division, the product, the target's subtraction):
//   |dg - g| <= 1.01 (scale |dp| + gam(3) (scale p + scale [target])) + fd_err.
typedef struct { int R, V; const uint16_t *tg; double gs; } xent_ctx;
static void xent_loss_ref(const double *in, double *out, const void *c) {
    const xent_ctx *k = c;
    double s = 0;
    int cnt = 0;
    for (int r = 0; r < k->R; r++) {
        double mx = in[r * k->V], z = 0;
        for (int j = 1; j < k->V; j++) mx = fmax(mx, in[r * k->V + j]);
        for (int j = 0; j < k->V; j++) z += exp(in[r * k->V + j] - mx);
        if (k->tg[r] != NN_IGNORE) { s += log(z) - (in[r * k->V + k->tg[r]] - mx); cnt++; }
    }
    out[0] = cnt ? k->gs * s / cnt : 0;
}
static void test_xent_backward(void) {
    enum { R = 4, V = 600 };
    float lg[R * V], x0[R * V], clg[R * V], wrong[R * V];
    uint16_t tg[R] = {17, NN_IGNORE, 599, 0};
    double din[R * V], g[R * V], p[R * V], bp[R * V], b[R * V], one = 1, yv;
    float gs = 0.75f;
    randn(x0, R * V, 2.0);
    f2d(din, x0, R * V);
    memcpy(lg, x0, sizeof lg);
    double acc[2] = {0, 0};
    kemu_xent_forward(lg, NULL, NULL, tg, 1, 1, R, V, acc);
    memcpy(clg, lg, sizeof lg);
    kemu_xent_backward(lg, tg, 1, R, V, gs, acc);
    CPU.xent_backward(cpu, clg, tg, 1, R, V, gs, acc);
    xent_ctx k = {R, V, tg, gs};
    fd_grad(xent_loss_ref, &k, din, R * V, &one, 1, g);
    xent_loss_ref(din, &yv, &k);
    double fde = fd_err(&one, &yv, 1), scale = gs / 3.0;
    for (int r = 0; r < R; r++) {
        double bl;
        xent_row_ref(x0 + r * V, V, tg[r], p + r * V);
        xent_bounds(x0 + r * V, V, ceil_div(V, KM_XENT_THREADS) + 10, p + r * V, 0, bp + r * V, &bl);
        for (int j = 0; j < V; j++) {
            int t = j == tg[r];
            b[r * V + j] = tg[r] == NN_IGNORE ? 1e-30 + fde : SECOND * (scale * bp[r * V + j] + gam(3) * scale * (p[r * V + j] + t)) + fde;
            wrong[r * V + j] = (float)(tg[r] == NN_IGNORE ? 0 : gs / 4.0 * (p[r * V + j] - t));   // count 4: the ignored row counted
        }
    }
    check_bound("cross-entropy backward vs finite differences", lg, wrong, g, b, R * V);
    int zero = 1, same = 1;
    for (int j = 0; j < V; j++) zero &= lg[V + j] == 0.0f;
    CHECK(zero, "the ignored row's gradient is not 0");
    for (int i = 0; i < R * V; i++) same &= fabs(lg[i] - clg[i]) <= 2 * b[i];
    CHECK(same, "cross-entropy backward vs CPU");
    // nothing counted: all zero
    double acc0[2] = {0, 0};
    memcpy(lg, x0, sizeof lg);
    kemu_xent_backward(lg, tg, 1, R, V, gs, acc0);
    zero = 1;
    for (int i = 0; i < R * V; i++) zero &= lg[i] == 0.0f;
    CHECK(zero, "count 0: dlogits not all 0");
}

/* ------------------------------------------------------------ sum of squares */
// float64 result: every term x^2 is exact in float64 (48-bit products); each passes through <= 32
// additions in its thread, the 10-level block tree, ceil(nb / 256) in the finish thread and its
// 10-level tree: |err| <= gam64(32 + 10 + ceil(nb / 256) + 10) sum x^2. The reference: Neumaier's
// compensated sum in long double (x87: 64-bit significand), within 2 2^-64 sum x^2 + n^2 2^-128.
// The CPU backend: 2048-term chains, 3 pairwise levels, nb16 = ceil(n / 16384) blocks in order.
static long double ss_ref(const float *x, size_t n) {
    long double s = 0, c = 0;
    for (size_t i = 0; i < n; i++) {
        long double t = (long double)x[i] * x[i], u = s + t;
        c += fabsl(s) >= fabsl(t) ? (s - u) + t : (t - u) + s;
        s = u;
    }
    return s + c;
}
static void test_sum_squares(void) {
    size_t sizes[] = {0, 1, 8191, 100000, 2 * 256 * (size_t)KM_SS_CHUNK + 77};
    size_t nmax = sizes[4];
    float *x = xmalloc(nmax * 4);
    randn(x, nmax, 0.5);
    for (int c = 0; c < 5; c++) {
        size_t n = sizes[c], nb = (n + KM_SS_CHUNK - 1) / KM_SS_CHUNK, nb16 = (n + 16383) / 16384;
        long double want = ss_ref(x, n);
        double got = kemu_sum_squares(x, n), cgot = CPU.sum_squares(cpu, x, n);
        double b = gam64(32 + 10 + (nb + 255) / 256 + 10) * (double)want + 2 * 0x1p-64 * (double)want + 1e-300;
        double cb = gam64(2048 + 3 + nb16) * (double)want + 2 * 0x1p-64 * (double)want + 1e-300;
        // wrong: the same sum accumulated in float
        float fw = 0.0f;
        for (size_t i = 0; i < n; i++) fw += x[i] * x[i];
        double r = fabs(got - (double)want) / b;
        printf("  sum of squares (n = %9zu)                  error / bound %.3g\n", n, r);
        CHECK(r <= 1, "n = %zu: %.17g vs %.17Lg (bound %g)", n, got, want, b);
        CHECK(fabs(got - cgot) <= b + cb, "n = %zu: vs CPU %.17g %.17g", n, got, cgot);
        if (n > 1000) CHECK(fabs(fw - (double)want) > b, "n = %zu: the bound does not reject a float sum", n);
    }
    // a fixed order: scaling by 0.5 scales every term and every partial sum exactly by 0.25
    size_t n = sizes[3];
    double s1 = kemu_sum_squares(x, n);
    kemu_scale(x, n, 0.5f);
    CHECK(kemu_sum_squares(x, n) == 0.25 * s1, "scaled sum of squares not exactly a quarter");
    free(x);
}

/* The gradient norm's block sums in one launch pair (chunks of the whole range, then a finish per
   block): every block has the bits of kemu_sum_squares on that block alone, the last one short;
   the clip from them: nn_norm_of_blocks and the scaled values, bits. Negative control: a block
   shifted by one value has another sum. */
static void test_block_sum_squares(void) {
    const size_t blk = 65536, n = 5 * blk + 3 * KM_SS_CHUNK + 101, nb = (n + blk - 1) / blk;
    float *x = xmalloc(n * 4), *y = xmalloc(n * 4), *z = xmalloc(n * 4);
    randn(x, n, 0.7);
    double got[8], one[8];
    kemu_block_sum_squares(got, x, n, blk);
    size_t same = 0;
    double tot = 0;
    for (size_t b = 0; b < nb; b++) {
        one[b] = kemu_sum_squares(x + b * blk, n - b * blk < blk ? n - b * blk : blk);
        same += memcmp(&one[b], &got[b], sizeof(double)) == 0;
        tot += one[b];
    }
    CHECK(same == nb, "%zu of %zu block sums have kemu_sum_squares's bits", same, nb);
    CHECK(kemu_sum_squares(x + 1, blk) != got[0], "negative control: a shifted block has block 0's sum");
    float norm = NAN, want = (float)sqrt(tot), f = 0.5f;
    memcpy(y, x, n * 4);
    memcpy(z, x, n * 4);
    kemu_clip_norm(y, n, got, nb, f * want, &norm);
    kemu_scale(z, n, (f * want) / want);
    CHECK(norm == want && !memcmp(y, z, n * 4), "clip: norm %.9g (want %.9g), the scaled values", norm, want);
    memcpy(y, x, n * 4);
    kemu_clip_norm(y, n, got, nb, 2 * want, &norm);
    CHECK(norm == want && !memcmp(y, x, n * 4), "no clip when the norm is below it");
    free(x); free(y); free(z);
}

/* ------------------------------------------------------------ embedding */
typedef struct { int B, T, Ch, C, V; const uint16_t *tok; } emb_ctx;
// in = wte[0] (V, C), ..., wte[Ch - 1], wpe (T, C);  out (B*T, C)
static void emb_ref(const double *in, double *out, const void *c) {
    const emb_ctx *k = c;
    const double *wpe = in + (size_t)k->Ch * k->V * k->C;
    for (int bt = 0; bt < k->B * k->T; bt++)
        for (int j = 0; j < k->C; j++) {
            double o = wpe[(bt % k->T) * k->C + j];
            for (int ch = 0; ch < k->Ch; ch++) o += in[((size_t)ch * k->V + k->tok[bt * k->Ch + ch]) * k->C + j];
            out[bt * k->C + j] = o;
        }
}
static void test_embedding(void) {
    enum { B = 3, T = 7, Ch = 2, C = 40, V = 11, NW = Ch * V * C, NP = T * C, NO = B * T * C };
    uint16_t tok[B * T * Ch];
    float w[NW + NP], out[NO], cout[NO], dout[NO], dw[NW + NP], cdw[NW + NP];
    double din[NW + NP], dd[NO], g[NW + NP], yref[NO], b[NW + NP];
    for (int i = 0; i < B * T * Ch; i++) tok[i] = (uint16_t)lssar_rng_below(&rng, V);
    tok[0] = tok[2] = tok[4] = 3;   // a token repeated in channel 0
    randn(w, NW + NP, 1.0);
    randn(dout, NO, 1.0);
    float *wte[Ch] = {w, w + V * C}, *dwte[Ch] = {dw, dw + V * C}, *cdwte[Ch] = {cdw, cdw + V * C};
    // forward: the CPU's additions in the CPU's order (w0 + wpe, then the other channels)
    kemu_embedding_forward(out, tok, wte, w + NW, B, T, Ch, C);
    CPU.embedding_forward(cpu, cout, tok, wte, w + NW, B, T, Ch, C);
    CHECK(bits_equal(out, cout, NO), "embedding forward differs from the CPU backend's bits");
    kemu_embedding_forward(out, tok, wte, NULL, B, T, Ch, C);
    CPU.embedding_forward(cpu, cout, tok, wte, NULL, B, T, Ch, C);
    CHECK(bits_equal(out, cout, NO), "embedding forward without positions differs from the CPU backend's bits");
    // backward, accumulated into non-zero gradients: every table entry receives its rows in row
    // order through the sort, which is the CPU's scatter order: the same bits
    randn(dw, NW + NP, 1.0);
    memcpy(cdw, dw, sizeof dw);
    float dw0[NW + NP];
    memcpy(dw0, dw, sizeof dw);
    CHECK(kemu_embedding_backward(dwte, dw + NW, dout, tok, B, T, Ch, C) == 0, "%s", lssar_errmsg());
    CPU.embedding_backward(cpu, cdwte, cdw + NW, dout, tok, B, T, Ch, C);
    CHECK(bits_equal(dw, cdw, NW + NP), "embedding backward differs from the CPU backend's bits");
    // against finite differences of the float64 forward (linear: exact up to fd_err); the
    // emulation adds k rows to the stored value: |err| <= gam(k) (|w0| + sum |dout|)
    emb_ctx k = {B, T, Ch, C, V, tok};
    f2d(din, w, NW + NP);
    f2d(dd, dout, NO);
    fd_grad(emb_ref, &k, din, NW + NP, dd, NO, g);
    emb_ref(din, yref, &k);
    double fde = fd_err(dd, yref, NO);
    for (int i = 0; i < NW + NP; i++) { g[i] += dw0[i]; b[i] = fabs(dw0[i]); }
    int cntk[NW + NP] = {0};
    for (int bt = 0; bt < B * T; bt++)
        for (int j = 0; j < C; j++) {
            for (int ch = 0; ch < Ch; ch++) {
                int e = (ch * V + tok[bt * Ch + ch]) * C + j;
                b[e] += fabs(dout[bt * C + j]); cntk[e]++;
            }
            int e = NW + (bt % T) * C + j;
            b[e] += fabs(dout[bt * C + j]); cntk[e]++;
        }
    float wrong[NW + NP];
    // wrong: the position gradient not accumulated (dwpe left as it was)
    for (int i = 0; i < NW + NP; i++) { b[i] = gam(cntk[i]) * b[i] + fde; wrong[i] = i < NW ? (float)g[i] : dw0[i]; }
    check_bound("embedding backward vs finite differences", dw, wrong, g, b, NW + NP);
}

/* ------------------------------------------------------------ rope */
typedef struct { int B, T, NH, HS, pos0; const float *cs, *sn; } rope_ctx;
// the rotation with the float tables (as exact values): the backward's transpose is exact
static void rope_ref(const double *in, double *out, const void *c) {
    const rope_ctx *k = c;
    int h = k->HS / 2;
    for (int bt = 0; bt < k->B * k->T; bt++) {
        int t = bt % k->T + k->pos0;
        for (int hd = 0; hd < k->NH; hd++) {
            size_t o = ((size_t)bt * k->NH + hd) * k->HS;
            for (int i = 0; i < h; i++) {
                double cc = k->cs[t * h + i], ss = k->sn[t * h + i], x1 = in[o + i], x2 = in[o + i + h];
                out[o + i] = x1 * cc - x2 * ss;
                out[o + i + h] = x2 * cc + x1 * ss;
            }
        }
    }
}
static void test_rope(void) {
    enum { B = 2, T = 5, NH = 3, HS = 16, P0 = 4, TT = 16, N = B * T * NH * HS };
    float cs[TT * HS / 2], sn[TT * HS / 2], x[N], cx[N], d[N], dx[N], cdx[N], wrong[N];
    double xr[N], yr[N], dd[N], g[N], b[N], cb[N];
    rope_table(cs, sn, TT, HS, 10000.0);
    randn(x, N, 1.0); randn(d, N, 1.0);
    f2d(xr, x, N); f2d(dd, d, N);
    rope_ctx k = {B, T, NH, HS, P0, cs, sn};
    rope_ref(xr, yr, &k);
    memcpy(cx, x, sizeof x);
    kemu_rope(x, cs, sn, B, T, NH, HS, P0, 0);
    CPU.rope_forward(cpu, cx, cs, sn, B, T, NH, HS, P0);
    // x1 c - x2 s: two products and a difference, each term 2 roundings: gam(2) (|x1 c| + |x2 s|)
    int h = HS / 2;
    for (int bt = 0; bt < B * T; bt++) {
        int t = bt % T + P0;
        for (int hd = 0; hd < NH; hd++)
            for (int c = 0; c < h; c++) {
                size_t o = ((size_t)bt * NH + hd) * HS;
                double cc = fabs(cs[t * h + c]), ss = fabs(sn[t * h + c]);
                b[o + c] = gam(2) * (fabs(xr[o + c]) * cc + fabs(xr[o + c + h]) * ss) + 1e-45;
                b[o + c + h] = gam(2) * (fabs(xr[o + c + h]) * cc + fabs(xr[o + c]) * ss) + 1e-45;
                // wrong: the table row of t without pos0
                int t0 = bt % T;
                wrong[o + c] = (float)(xr[o + c] * cs[t0 * h + c] - xr[o + c + h] * sn[t0 * h + c]);
                wrong[o + c + h] = (float)(xr[o + c + h] * cs[t0 * h + c] + xr[o + c] * sn[t0 * h + c]);
            }
    }
    check_bound("rope forward", x, wrong, yr, b, N);
    double rc = worst_ratio2(x, cx, b, b, N);
    CHECK(rc <= 1, "rope forward vs CPU: error / bound %g", rc);
    // backward (pos0 = 0 as the seam's rope_backward): the transpose, against finite differences
    rope_ctx k0 = {B, T, NH, HS, 0, cs, sn};
    fd_grad(rope_ref, &k0, xr, N, dd, N, g);
    rope_ref(xr, yr, &k0);
    double fde = fd_err(dd, yr, N);
    memcpy(dx, d, sizeof d); memcpy(cdx, d, sizeof d);
    kemu_rope(dx, cs, sn, B, T, NH, HS, 0, 1);
    CPU.rope_backward(cpu, cdx, cs, sn, B, T, NH, HS);
    for (int bt = 0; bt < B * T; bt++) {
        int t = bt % T;
        for (int hd = 0; hd < NH; hd++)
            for (int c = 0; c < h; c++) {
                size_t o = ((size_t)bt * NH + hd) * HS;
                double cc = fabs(cs[t * h + c]), ss = fabs(sn[t * h + c]);
                cb[o + c] = gam(2) * (fabs(dd[o + c]) * cc + fabs(dd[o + c + h]) * ss) + fde;
                cb[o + c + h] = gam(2) * (fabs(dd[o + c + h]) * cc + fabs(dd[o + c]) * ss) + fde;
                wrong[o + c] = (float)(dd[o + c] * cs[t * h + c] - dd[o + c + h] * sn[t * h + c]);   // the forward again
                wrong[o + c + h] = (float)(dd[o + c + h] * cs[t * h + c] + dd[o + c] * sn[t * h + c]);
            }
    }
    check_bound("rope backward vs finite differences", dx, wrong, g, cb, N);
    rc = worst_ratio2(dx, cdx, cb, cb, N);
    CHECK(rc <= 1, "rope backward vs CPU: error / bound %g", rc);
}

/* ------------------------------------------------------------ GELU, residual, scale */
static void gelu_ref(const double *in, double *out, const void *c) {
    int n = *(const int *)c;
    for (int i = 0; i < n; i++) {
        double x = in[i];
        out[i] = 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    }
}
static void test_gelu(void) {
    enum { N = 300 };
    int n = N;
    float x[N], y[N], cy[N], d[N], dx[N], cdx[N], wrong[N];
    double xr[N], yr[N], dd[N], g[N], b[N], cb[N];
    randn(x, N, 2.5);
    x[0] = 0; x[1] = 8; x[2] = -8; x[3] = 20; x[4] = -20; x[5] = 1e-3f;
    randn(d, N, 1.0);
    f2d(xr, x, N); f2d(dd, d, N);
    kemu_gelu_forward(y, x, N);
    CPU.gelu_forward(cpu, cy, x, N);
    gelu_ref(xr, yr, &n);
    // t = fm_tanh(a), a = k (v + c v^3): 5 roundings and the float constants k, c (one rounding
    // each), all terms of v's sign, so a is off by gam(7) relative and t by
    // E_TANH + max(a sech^2 a) gam(7) = E_TANH + 0.45 gam(7) = Et; y = 0.5 v (1 + t) adds 3:
    //   |dy| <= 0.5 |v| Et + gam(3) |y|
    double Et = E_TANH + 0.45 * gam(7);
    for (int i = 0; i < N; i++) {
        b[i] = 0.5 * fabs(xr[i]) * Et + gam(3) * fabs(yr[i]) + 1e-45;
        wrong[i] = (float)(xr[i] / (1 + exp(-1.702 * xr[i])));   // the sigmoid approximation of GELU
    }
    check_bound("gelu forward", y, wrong, yr, b, N);
    double rc = worst_ratio2(y, cy, b, b, N);
    CHECK(rc <= 1, "gelu forward vs CPU: error / bound %g", rc);
    // backward, against finite differences of the float64 forward: g' = 0.5 (1 + t) + q with
    // q = 0.5 v s2 k P, P = 1 + 3 c v^2, s2 = 1 - t t. t's error Et moves 0.5 (1 + t) by 0.5 Et
    // (and 1 + t rounds: U 0.5 |1 + t|), s2 by 2 Et + gam(2) (absolute); P (positive terms, the
    // constants 3 c and k rounded) is within gam(5), so q's products give gam(9) |q|; the sum and
    // the product with dout: gam(2) |dout g'|. With K(v) = 0.5 |v| k P:
    //   |ddx| <= |dout| (0.5 Et + 0.5 U |1 + t| + K (2 Et + gam(2)) + gam(9) |q|) + gam(2) |dout g'| + fd_err
    fd_grad(gelu_ref, &n, xr, N, dd, N, g);
    double fde = fd_err(dd, yr, N), kk = sqrt(2 / M_PI);
    kemu_gelu_backward(dx, x, d, N);
    CPU.gelu_backward(cpu, cdx, x, d, N);
    for (int i = 0; i < N; i++) {
        double v = xr[i], t = tanh(kk * (v + 0.044715 * v * v * v)), K = 0.5 * fabs(v) * kk * (1 + 3 * 0.044715 * v * v);
        double q = K * (1 - t * t), gp = 0.5 * (1 + t) + (v < 0 ? -q : q);
        b[i] = fabs(dd[i]) * (0.5 * Et + 0.5 * U32 * (1 + t) + K * (2 * Et + gam(2)) + gam(9) * q) + gam(2) * fabs(dd[i] * gp) + fde;
        cb[i] = b[i];
        wrong[i] = (float)(dd[i] * 0.5 * (1 + t));   // the second term dropped
    }
    check_bound("gelu backward vs finite differences", dx, wrong, g, b, N);
    rc = worst_ratio2(dx, cdx, b, cb, N);
    CHECK(rc <= 1, "gelu backward vs CPU: error / bound %g", rc);
    memcpy(dx, d, sizeof d);
    kemu_gelu_backward(dx, x, dx, N);   // in place
    CHECK(worst_ratio(dx, g, b, N) <= 1, "in-place gelu backward");
}

static void test_residual_scale(void) {
    enum { N = 100 };
    float a[N], b[N], o[N], co[N], s[N], cs[N];
    randn(a, N, 1); randn(b, N, 1);
    kemu_residual_forward(o, a, b, N);
    CPU.residual_forward(cpu, co, a, b, N);
    CHECK(bits_equal(o, co, N), "residual differs from the CPU backend (one IEEE addition each)");
    memcpy(s, a, sizeof a); memcpy(cs, a, sizeof a);
    kemu_scale(s, N, 0.3f);
    CPU.scale(cpu, cs, N, 0.3f);
    CHECK(bits_equal(s, cs, N), "scale differs from the CPU backend (one IEEE product each)");
    kemu_residual_forward(a, a, b, N);   // out aliasing a
    CHECK(bits_equal(a, o, N), "residual in place");
}

/* ------------------------------------------------------------ bf16 cast */
// An independent oracle for round-to-nearest-even into bf16, on magnitudes in float64: the
// truncation lo (toward zero) and the next bf16 away from zero hi (after the largest finite value,
// inf, which IEEE 754 places at 2^128 for rounding), the nearer one, on a tie the one with an even
// last bit. Both differences are exact in float64. NaN: the canonical 0x7FFF.
static double bf_mag(uint16_t h) {
    if ((h & 0x7fff) == 0x7f80) return 0x1p128;
    return fabs((double)fm_bf16_float(h));
}
static uint16_t bf16_oracle(float x) {
    uint32_t b;
    memcpy(&b, &x, 4);
    if (isnan(x)) return 0x7fff;
    uint16_t lo = (uint16_t)(b >> 16), hi = (uint16_t)(lo + 1);
    if (!(b & 0xffffu)) return lo;
    double dx = fabs((double)x), dl = dx - bf_mag(lo), dh = bf_mag(hi) - dx;
    return dl < dh ? lo : dl > dh ? hi : (lo & 1) ? hi : lo;
}
static float f_of(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }

// kemu_to_bf16 (the cast kernel's emulation, km_bf16_rne per value) bit for bit against the oracle
// on: every sign and exponent and top-7 fraction (all 2^16 upper halves) with the lower halves that
// decide the rounding (0, just below / at / just above the half, all ones), a stride through all
// 2^32 patterns, named cases (ties to even both ways, subnormals, the overflow to inf, inf, NaNs
// whose naive rounding would carry into inf or flip the sign), and the padded rows it writes.
// (km_bf16_rne is fm_bf16_rne on the host, as flash_bf16 and the fake GPU's rounding are.)
static void test_bf16_cast(void) {
    static const uint16_t low[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff};
    long bad = 0, n = 0;
    uint32_t first_bad = 0;
    for (int pass = 0; pass < 2; pass++) {
        size_t cnt = pass ? (1u << 20) : 65536u * 6;
        for (size_t i = 0; i < cnt; i++) {
            uint32_t b = pass ? (uint32_t)(i * 4099u + 12345u) : (uint32_t)((i / 6) << 16 | low[i % 6]);
            float x = f_of(b);
            uint16_t got = km_bf16_rne(x), want = bf16_oracle(x);
            n++;
            if (got != want && !bad++) first_bad = b;
        }
    }
    CHECK(!bad, "km_bf16_rne differs from the RNE oracle on %ld of %ld inputs (first 0x%08x)", bad, n,
          first_bad);
    static const struct { uint32_t x; uint16_t want; } named[] = {
        {0x3f808000, 0x3f80},   // 1 + 2^-8: a tie, even below
        {0x3f818000, 0x3f82},   // a tie, even above
        {0xbf818000, 0xbf82},   // the same negative
        {0x3f808001, 0x3f81},   // just above the tie
        {0x00008000, 0x0000},   // subnormal tie to +0
        {0x00018000, 0x0002},   // subnormal tie up
        {0x0000ffff, 0x0001},   // subnormal rounding up to the smallest bf16 subnormal
        {0x007fffff, 0x0080},   // the largest subnormal rounds to the smallest normal
        {0x80000001, 0x8000},   // -smallest subnormal: -0
        {0x7f7f7fff, 0x7f7f},   // below the overflow threshold: the largest finite bf16
        {0x7f7f8000, 0x7f80},   // the largest finite + half an ulp: inf (ties to even)
        {0x7f7fffff, 0x7f80},   // FLT_MAX: inf
        {0xff7fffff, 0xff80},   // -FLT_MAX: -inf
        {0x7f800000, 0x7f80},   // inf
        {0xff800000, 0xff80},   // -inf
        {0x7f800001, 0x7fff},   // signalling NaN: +0x7FFF would carry into inf
        {0x7fffffff, 0x7fff},   // NaN: +0x7FFF would carry into the sign
        {0xffc00000, 0x7fff},   // -NaN
        {0x80000000, 0x8000},   // -0
    };
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) {
        uint16_t got = km_bf16_rne(f_of(named[i].x));
        CHECK(got == named[i].want, "bf16 of 0x%08x: 0x%04x, expected 0x%04x", named[i].x, got,
              named[i].want);
    }
    // the padded rows of the operand copies: rows of cols values, ld rounded up to 8
    enum { R = 3, C = 13 };
    int ld = km_bf16_ld(C);
    CHECK(ld == 16 && km_bf16_ld(16) == 16 && km_bf16_ld(50257) == 50264, "km_bf16_ld");
    float in[R * C];
    uint16_t out[R * 16];
    randn(in, R * C, 3.0);
    in[5] = f_of(0x7f800001);
    for (int i = 0; i < R * 16; i++) out[i] = 0xabcd;
    kemu_to_bf16(out, in, R, C, ld);
    int ok = 1;
    for (int r = 0; r < R; r++)
        for (int j = 0; j < ld; j++)
            ok &= out[r * ld + j] == (j < C ? bf16_oracle(in[r * C + j]) : 0xabcd);
    CHECK(ok, "kemu_to_bf16: padded rows (values, or the padding overwritten)");
    // the backend's row chunks of the cast (CAST_CAP = 128 MiB) at GPT-2 124M, B T = 16384: the
    // MLP's backward (dout and inp, 768 + 3072 wide) in one product, the classifier's (V = 50257
    // padded to 50264, and 768) in chunks of 1280 rows; then the small cases
    size_t cap = (size_t)128 << 20;
    CHECK(km_cast_rows(16384, (768 + 3072) * 2, cap) == 16384, "cast rows, MLP backward");
    CHECK(km_cast_rows(16384, (size_t)(km_bf16_ld(50257) + 768) * 2, cap) == 1280, "cast rows, classifier");
    CHECK(km_cast_rows(300, 1000, 100000) == 100 && km_cast_rows(300, 200000, 100000) == 1 &&
          km_cast_rows(1000, 100, 25600) == 256, "cast rows, small caps");
}

/* ------------------------------------------------------------ AdamW */
// One step from a non-zero state, against the float64 formula on the float inputs (with the float
// bias corrections both backends use: 1 / (1 - powf(beta, t))). Per value:
//   m' = b1 m + (1 - b1) g (1 - b1 exact, Sterbenz): |dm'| <= gam(2) (|b1 m| + |(1 - b1) g|);
//   v' = b2 v + (1 - b2) g g: |dv'| <= gam(3) v' (no cancellation);
//   num = m' ibc1: |dnum| <= ibc1 |dm'| + U |num|;  den = fm_sqrt(v' ibc2) + eps: relative
//   rd <= gam(4) / 2 + E_SQRT + U;  r = num / den: |dr| <= |dnum| / den + |r| (rd + U);
//   u = r + wd p: |du| <= |dr| + U |wd p| + U |u|;  p' = p - lr u: |dp'| <= lr |du| + U lr |u| + U |p'|
// (each times 1.01 for the second-order terms). m' and v' are checked with their own bounds.
static void test_adamw(void) {
    enum { N = 257 };
    float p[N], g[N], m[N], v[N], cp[N], cm[N], cv[N], wrong[N];
    double pr[N], mr[N], vr[N], bpn[N], bm[N], bv[N];
    randn(p, N, 1); randn(g, N, 1); randn(m, N, 0.1);
    randn(v, N, 0.1);
    for (int i = 0; i < N; i++) v[i] = v[i] * v[i];
    g[0] = 0.0f; m[0] = 0.0f; v[0] = 0.0f;   // an untouched value: only the decay moves it
    const int t = 3;
    const float lr = 1e-2f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 0.1f;
    float ibc1, ibc2;
    km_adamw_ibc(t, b1, b2, &ibc1, &ibc2);
    for (int i = 0; i < N; i++) {
        double mm = (double)b1 * m[i] + (1.0 - (double)b1) * g[i];
        double vv = (double)b2 * v[i] + (1.0 - (double)b2) * (double)g[i] * g[i];
        double num = mm * ibc1, den = sqrt(vv * ibc2) + eps, r = num / den, u = r + (double)wd * p[i];
        mr[i] = mm; vr[i] = vv; pr[i] = p[i] - (double)lr * u;
        bm[i] = SECOND * gam(2) * (fabs((double)b1 * m[i]) + fabs((1.0 - (double)b1) * g[i])) + 1e-45;
        bv[i] = SECOND * gam(3) * vv + 1e-45;
        double dnum = ibc1 * bm[i] + U32 * fabs(num), rd = gam(4) / 2 + E_SQRT + U32;
        double dr = dnum / den + fabs(r) * (rd + U32), du = dr + U32 * fabs(wd * p[i]) + U32 * fabs(u);
        bpn[i] = SECOND * (lr * du + U32 * lr * fabs(u) + U32 * fabs(pr[i]));
        wrong[i] = (float)(p[i] - (double)lr * (mm / (sqrt(vv) + eps) + (double)wd * p[i]));   // no bias correction
    }
    memcpy(cp, p, sizeof p); memcpy(cm, m, sizeof m); memcpy(cv, v, sizeof v);
    kemu_adamw(p, g, m, v, N, t, lr, b1, b2, eps, wd);
    CPU.adamw(cpu, cp, g, cm, cv, N, t, lr, b1, b2, eps, wd);
    check_bound("adamw parameters", p, wrong, pr, bpn, N);
    check_bound("adamw first moment", m, NULL, mr, bm, N);
    check_bound("adamw second moment", v, NULL, vr, bv, N);
    double r1 = worst_ratio2(p, cp, bpn, bpn, N), r2 = worst_ratio2(m, cm, bm, bm, N), r3 = worst_ratio2(v, cv, bv, bv, N);
    CHECK(r1 <= 1 && r2 <= 1 && r3 <= 1, "adamw vs CPU: error / bound %g %g %g", r1, r2, r3);
}

int main(void) {
    lssar_rng_seed(&rng, 2027);
    if (CPU.ctx_create(&cpu, NN_FP32)) { fprintf(stderr, "cpu backend: %s\n", lssar_errmsg()); return 1; }
    RUN(test_trees);
    RUN(test_layernorm_forward);
    RUN(test_layernorm_backward);
    RUN(test_layernorm_fd);
    RUN(test_colsum);
    RUN(test_xent_forward);
    RUN(test_xent_nonfinite);
    RUN(test_xent_backward);
    RUN(test_sum_squares);
    RUN(test_block_sum_squares);
    RUN(test_embedding);
    RUN(test_rope);
    RUN(test_gelu);
    RUN(test_residual_scale);
    RUN(test_bf16_cast);
    RUN(test_adamw);
    CPU.ctx_free(cpu);
    return test_summary("test_cuda_emu");
}
