/*
 * test_flash.c - the CPU emulation of the fused GPU attention kernels (src/attn/flash_emu.c, the
 * algorithm in src/attn/flash.h) against the float64 reference of tests/attn_ref.h.
 *
 * FP32 mode: the spec's 1e-4 relative error (whole tensors, the error measures and floors of
 * test_attention.c; ssmax ds also within its float32 rounding bound where that is larger, see
 * compare_flash) on every input family, D in {16, 32, 64, 128}, T from 1 to a few hundred (odd
 * T and the 64-row tile edges), T = 1024 and 4096; other lssar powers; the cached forward
 * (Tq < Tk) against the full one, bit for bit; central finite differences; T = 16384 lssar
 * p = 15 in both modes; thread-count independence in both modes. sigmoid and relu (no row
 * normalisation) run through the same grids with len_norm train (L = ATTN_REF_TRAIN_LEN = 64,
 * below most T: rows past the training length) and row, alternately; their negative control:
 * the emulation given the other len_norm than the reference fails (test_fp32_len_norm_control);
 * T = 16384 with both settings (test_long_rows_unnormed).
 * BF16 mode: see the comment above U_BF16 (derived bounds, with negative controls).
 * Checked by breaking the emulation on purpose (then restored): no centring of D1, no
 * rejoining of the old argmax in the online softmax, the diagonal mask one key off, the Ec
 * centring term dropped, ssmax's plain row term, the lssar fallback without its tolerance,
 * attn_rows.c's sigmoid, sigmoid's derivative as s(-|x|) instead of s(x) s(-x) (dq, dk 1e-2..0.8
 * off on the random grid), the re-weighting kinds but lssar without the backward's row-sum pass
 * (flash_bwd_rowsums; repeated keys T = 4 D = 128, dq 1.08e-4 softmax+rw): each fails here.
 * (Leaving P unrounded in BF16 mode passes: it is more accurate, not wrong.)
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>
#include "lssar.h"
#include "core/util.h"
#include "attn/flash.h"
#include "attn/flash_emu.h"
#include "harness.h"
#include "attn_ref.h"

// ------------------------------------------------------------------ FP32 against the reference

// The emulation's forward (with stats) then its backward from those stats, for compare_impl.
static int emu_impl(const lssar_attn_desc *a, int B, int T, int H, int D, const float *q, const float *k,
                    const float *v, const float *dy, float *out, float *dq, float *dk, float *dv, float *ds) {
    float *st = malloc(flash_emu_stats_floats(a, B, T, H, D) * sizeof(float));
    if (!st) return LSSAR_E_NOMEM;
    int rc = flash_emu_forward(a, FLASH_FP32, B, T, T, T, H, D, q, k, v, out, st);
    if (!rc) rc = flash_emu_backward(a, FLASH_FP32, B, T, H, D, q, k, v, out, st, dy, dq, dk, dv, ds);
    free(st);
    return rc;
}

// The errors against the float64 reference, measured as test_attention.c's compare_case does.
// T > 512: the reference's O(n) centred forms (checked against the default ones in
// test_reference_fast). ds: the spec's 1e-4, or within the float32 rounding bound of the sum
// (ds_error_bound) where that is larger. ds_h sums signed terms over (b, i, j) and can cancel far
// below the size of its terms; then no float32 algorithm resolves it to 1e-4 (e.g. random T = 127
// D = 16: ds = 0.06 against ~30 typically; the CPU kernel misses 1e-4 there too, by 3e-4), which
// is test_attention.c's FD criterion for ds.
// sigmoid / relu: len_norm train (L = ATTN_REF_TRAIN_LEN = 64, below most T: rows past the
// training length are covered) or row; the other kinds ignore it.
static errs compare_flash(int kind, int len_norm, float p, int family, uint64_t seed, int B, int T, int H, int D) {
    return compare_impl_ln(emu_impl, CMP_FAST_REF | CMP_DS_ROUNDING, kind, p, family, seed, B, T, H, D, len_norm,
                           ATTN_REF_TRAIN_LEN);
}

#define NKINDS LSSAR_ATTN_NKINDS  // every valid combination of stages (lssar_attn_kind)
static int is_unnormed(int kind) { return ref_unnormed(kind); }
// The kinds the fused path supports (flash.h's flash_fused_supported); the grids skip the others,
// and test_refused checks that each of those is refused, not run.
static int fused_ok(int kind) {
    lssar_attn_stages st = ref_stages(kind);
    return flash_fused_supported(&st);
}

static double worst_seen[IN_COUNT][NKINDS];  // per family and kind, FP32 mode

static void check_case_ln(int kind, int len_norm, float p, int fam, uint64_t seed, int B, int T, int H, int D) {
    errs e = compare_flash(kind, len_norm, p, fam, seed, B, T, H, D);
    double w = worst(e);
    worst_seen[fam][kind] = fmax(worst_seen[fam][kind], w);
    CHECK(w < 1e-4, "%s %s%s p=%g T=%d D=%d B=%d H=%d: rel err out %.2e dq %.2e dk %.2e dv %.2e ds %.2e",
          input_name[fam], kind_name(kind), is_unnormed(kind) ? (len_norm ? " (row)" : " (train)") : "", p, T, D, B, H,
          e.out, e.dq, e.dk, e.dv, e.ds);
}
static void check_case(int kind, float p, int fam, uint64_t seed, int B, int T, int H, int D) {
    check_case_ln(kind, LSSAR_LEN_NORM_TRAIN, p, fam, seed, B, T, H, D);
}

// Random inputs: every kind, T from 1 to 300 with the tile edges (63, 64, 65, 127, 128, 129) and
// odd lengths, D in {16, 32, 64, 128}, several B and H; sigmoid / relu with len_norm train and
// row alternately.
static void test_fp32_random(void) {
    static const int Ts[] = {1, 2, 3, 4, 17, 63, 64, 65, 127, 128, 129, 200, 300}, Ds[] = {16, 32, 64, 128};
    const int nT = (int)(sizeof Ts / sizeof Ts[0]);
    for (int kind = 0; kind < NKINDS; kind++)
        for (int ti = 0; ti < nT && fused_ok(kind); ti++)
            for (int di = 0; di < 4; di++) {
                int T = Ts[ti], D = Ds[di];
                int B = 1 + (ti + di) % 2, H = 1 + (ti + 2 * di + kind) % 3;
                if (T >= 128 && D >= 64) B = 1, H = 1;
                check_case_ln(kind, (ti + di) % 2, 15.0f, IN_RANDOM, 100 + ti * 10 + di, B, T, H, D);
            }
}

// The adversarial families of test_attention.c: peaked rows, zero vectors, repeated keys, large
// magnitudes (each with H = 2: for repeated keys head 0 is the lssar fallback).
static void test_fp32_adversarial(void) {
    static const int Ts[] = {1, 4, 17, 64, 130, 300}, Ds[] = {16, 32, 64, 128};
    for (int fam = IN_PEAKED; fam < IN_COUNT; fam++)
        for (int kind = 0; kind < NKINDS; kind++)
            for (int ti = 0; ti < 6 && fused_ok(kind); ti++)
                for (int di = 0; di < 4; di++) {
                    int T = Ts[ti], D = Ds[di];
                    if (T == 300 && D > 32) continue;  // (time)
                    check_case_ln(kind, (ti + di) % 2, 15.0f, fam, 1000 + fam * 100 + ti * 10 + di, 1, T, 2, D);
                }
}

// Other re-weighting powers (integer p < 16, p >= 16 and non-integer p go through different power
// functions) on every family, lssar on all of them, the other re-weighting kinds on two.
static void test_fp32_powers(void) {
    static const float ps[] = {1.0f, 3.0f, 2.5f, 20.0f};
    for (int kind = 0; kind < NKINDS; kind++)
        for (int pi = 0; pi < 4; pi++)
            for (int fam = 0; fam < IN_COUNT; fam++) {
                if (!fused_ok(kind) || !ref_stages(kind).reweight) continue;
                if (kind != LSSAR_ATTN_LSSAR && (fam + pi) % 2) continue;
                check_case(kind, ps[pi], fam, 5000 + pi * 10 + fam, 2, 70, 2, 32);
            }
}

// lssa / lssar with another head size's temperature (temp_d; attn_ref.h check_temp_d), across
// three key tiles.
static void test_fp32_temp_d(void) { check_temp_d(emu_impl, CMP_FAST_REF | CMP_DS_ROUNDING, 130, 6100); }
// NaN and inf in q, k, v for every kind (attn_ref.h): no out-of-range read, NaN rows, others untouched.
// (check_nonfinite loops over every kind: a kind the fused path refuses runs the CPU path, which is
// what it gets; nonfinite_impl checks the refusal first.)
static int nonfinite_impl(const lssar_attn_desc *a, int B, int T, int H, int D, const float *q,
                          const float *k, const float *v, const float *dy, float *out, float *dq, float *dk,
                          float *dv, float *ds) {
    if (fused_ok(a->kind)) return emu_impl(a, B, T, H, D, q, k, v, dy, out, dq, dk, dv, ds);
    int rc = emu_impl(a, B, T, H, D, q, k, v, dy, out, dq, dk, dv, ds);
    CHECK(rc == LSSAR_E_UNSUPPORTED, "%s: the fused path ran a refused kind (%d)", kind_name(a->kind), rc);
    rc = lssar_attn_forward(a, B, T, H, D, q, k, v, out);
    return rc ? rc : lssar_attn_backward(a, B, T, H, D, q, k, v, dy, dq, dk, dv, ds);
}
static void test_nonfinite(void) { check_nonfinite(nonfinite_impl); }

// Long sequences: T = 1024 for every kind and family (D = 32), T = 4096 for every kind (D = 16).
// (sigmoid / relu: len_norm train, row, train, row.)
static void test_fp32_long(void) {
    for (int kind = 0; kind < NKINDS; kind++) {
        if (!fused_ok(kind)) continue;
        check_case_ln(kind, 0, 15.0f, IN_RANDOM, 600 + kind, 1, 1024, 1, 32);
        check_case_ln(kind, 1, 15.0f, IN_PEAKED, 610 + kind, 1, 1024, 1, 32);
        check_case_ln(kind, 0, 15.0f, IN_REPEATED, 620 + kind, 1, 1024, 2, 16);
        check_case_ln(kind, 1, 15.0f, IN_RANDOM, 630 + kind, 1, 4096, 1, 16);
    }
}

static void print_worst(void) {
    for (int fam = 0; fam < IN_COUNT; fam++) {
        printf("  FP32 %-13s worst relative error:", input_name[fam]);
        for (int kind = 0; kind < NKINDS; kind++) printf(" %s %.1e", kind_name(kind), worst_seen[fam][kind]);
        printf("\n");
    }
}

// Negative control of the FP32 comparison for sigmoid / relu: the emulation given the other
// length normalisation than the reference (as if it ignored len_norm or took the wrong L) must
// fail the 1e-4 criterion, with both settings.
static int emu_impl_other_len_norm(const lssar_attn_desc *a, int B, int T, int H, int D, const float *q,
                                   const float *k, const float *v, const float *dy, float *out, float *dq, float *dk,
                                   float *dv, float *ds) {
    lssar_attn_desc b = *a;
    b.len_norm = a->len_norm == LSSAR_LEN_NORM_ROW ? LSSAR_LEN_NORM_TRAIN : LSSAR_LEN_NORM_ROW;
    return emu_impl(&b, B, T, H, D, q, k, v, dy, out, dq, dk, dv, ds);
}
static void test_fp32_len_norm_control(void) {
    for (int kind = LSSAR_ATTN_SIGMOID; kind <= LSSAR_ATTN_RELU; kind++)
        for (int ln = 0; ln < 2; ln++) {
            errs e = compare_impl_ln(emu_impl_other_len_norm, CMP_FAST_REF, kind, 15.0f, IN_RANDOM, 77, 1, 130, 2, 32,
                                     ln, ATTN_REF_TRAIN_LEN);
            CHECK(e.out > 1e-2, "%s: the emulation with len_norm %s passes against the reference's %s (out %.2e)",
                  kind_name(kind), len_norm_name[1 - ln], len_norm_name[ln], e.out);
        }
}

// The reference's O(n) forms for long rows (ref_backward_ex fast = 1) against its default ones:
// the gradients to 1e-12 (float64), every kind and family; the fast ds rounding bound is valid
// (not below the default one).
static void test_reference_fast(void) {
    int B = 1, T = 150, H = 2, D = 16;
    size_t N = (size_t)B * T * H * D;
    float *x = malloc(4 * N * 4);
    double *g = malloc(6 * N * 8);
    for (int fam = 0; fam < IN_COUNT; fam++)
        for (int kind = 0; kind < NKINDS; kind++) {
            make_inputs(fam, 55 + fam, B, T, H, D, x, x + N, x + 2 * N, x + 3 * N, kind);
            double *in = to_double(x, 4 * N), sd[2] = {0.43, 0.63}, ds[2][2], de[2][2];
            ref_desc rd = {.kind = kind, .p = 15.0, .s = sd, .len_norm = fam % 2, .L = ATTN_REF_TRAIN_LEN};
            for (int f = 0; f < 2; f++)
                ref_backward_ex(&rd, B, T, H, D, in, in + N, in + 2 * N, in + 3 * N, g + 3 * f * N, g + (3 * f + 1) * N,
                                g + (3 * f + 2) * N, ds[f], de[f], f);
            double e = 0, n = 0;
            for (size_t i = 0; i < 3 * N; i++) { e = fmax(e, fabs(g[i] - g[3 * N + i])); n = fmax(n, fabs(g[i])); }
            CHECK(e <= 1e-12 * n, "%s %s: fast reference differs by %.2e (max %.2e)", input_name[fam], kind_name(kind), e, n);
            // ds sums signed terms over (b, i, j) and can cancel far below them: each form is within
            // the float64 rounding of that sum, which is de (the float32 rounding bound of the same
            // sums) scaled from float32's unit roundoff to float64's; the two forms, twice that.
            if (ref_ssmax(kind))
                for (int h = 0; h < H; h++)
                    CHECK(fabs(ds[0][h] - ds[1][h]) <= fmax(1e-12 * fmax(1, fabs(ds[0][h])),
                                                            2 * de[0][h] * (DBL_EPSILON / FLT_EPSILON)) &&
                          de[1][h] >= de[0][h] * (1 - 1e-12),
                          "%s ssmax ds[%d]: %.12g / %.12g, bounds %.3g / %.3g", input_name[fam], h, ds[0][h], ds[1][h],
                          de[0][h], de[1][h]);
            free(in);
        }
    free(x);
    free(g);
}

// ------------------------------------------------------------------ cached forward

// Rows of D floats the stats of a kind hold (flash.h's flash_stats_drows).
static int stats_drows(int kind) {
    lssar_attn_stages st = ref_stages(kind);
    flash_params fp;
    flash_params_init(&fp, &st, 15.0f, 16);
    return flash_stats_drows(&fp);
}

// The last Tq of Tk positions over a cache of kv_stride > Tk rows must give the rows (and the
// row statistics) of the full forward bit for bit: each row runs the same key tiles through the
// same operations, whatever the other rows of its query tile. The cache rows past Tk are NaN, so
// reading one would show.
static void test_cached(void) {
    static const int cases[][3] = {{1, 300, 64}, {5, 130, 64}, {64, 129, 64}, {70, 70, 0}, {100, 257, 64}};
    for (int kind = 0; kind < NKINDS; kind++)
        for (int ci = 0; ci < 5 && fused_ok(kind); ci++) {
            int Tq = cases[ci][0], Tk = cases[ci][1], kvs = Tk + cases[ci][2], B = 2, H = 2, D = 32;
            for (int mode = 0; mode < 2; mode++) {
                size_t N = (size_t)B * Tk * H * D, HD = (size_t)H * D;
                float *q = malloc(N * 4), *k = malloc(N * 4), *v = malloc(N * 4), *dy = malloc(N * 4);
                float *kc = malloc((size_t)B * kvs * HD * 4), *vc = malloc((size_t)B * kvs * HD * 4);
                float *out = malloc(N * 4), *oc = malloc((size_t)B * Tq * HD * 4), *qc = malloc((size_t)B * Tq * HD * 4);
                float s[2] = {0.43f, 0.7f};
                make_inputs(ci == 4 ? IN_PEAKED : IN_RANDOM, 900 + ci, B, Tk, H, D, q, k, v, dy, kind);
                for (size_t i = 0; i < (size_t)B * kvs * HD; i++) kc[i] = vc[i] = NAN;
                for (int b = 0; b < B; b++) {
                    memcpy(kc + (size_t)b * kvs * HD, k + (size_t)b * Tk * HD, (size_t)Tk * HD * 4);
                    memcpy(vc + (size_t)b * kvs * HD, v + (size_t)b * Tk * HD, (size_t)Tk * HD * 4);
                    memcpy(qc + (size_t)b * Tq * HD, q + ((size_t)b * Tk + Tk - Tq) * HD, (size_t)Tq * HD * 4);
                }
                // (sigmoid / relu: len_norm row for odd ci; the row's n_i is its position, not r)
                lssar_attn_desc a = {.kind = kind, .p = 15.0f, .ssmax_s = s, .len_norm = (lssar_len_norm)(ci % 2),
                                     .train_len = ATTN_REF_TRAIN_LEN};
                size_t ns = flash_emu_stats_floats(&a, B, Tk, H, D), nsc = flash_emu_stats_floats(&a, B, Tq, H, D);
                float *st = malloc(ns * 4), *stc = malloc(nsc * 4);
                CHECK(flash_emu_forward(&a, mode, B, Tk, Tk, Tk, H, D, q, k, v, out, st) == 0, "full forward");
                CHECK(flash_emu_forward(&a, mode, B, Tq, Tk, kvs, H, D, qc, kc, vc, oc, stc) == 0, "cached forward");
                int bad = 0, bad_st = 0;
                for (int b = 0; b < B; b++) {
                    bad += memcmp(oc + (size_t)b * Tq * HD, out + ((size_t)b * Tk + Tk - Tq) * HD, (size_t)Tq * HD * 4) != 0;
                    for (int h = 0; h < H; h++)
                        for (int r = 0; r < Tq; r++) {
                            const float *x = stc + flash_row_index(b, h, r, H, Tq) * FLASH_NSTAT;
                            const float *y = st + flash_row_index(b, h, Tk - Tq + r, H, Tk) * FLASH_NSTAT;
                            bad_st += memcmp(x, y, FLASH_NSTAT * 4) != 0;
                        }
                    for (int dr = 0; dr < stats_drows(kind); dr++) {  // yc, Ec rows
                        const float *x = stc + flash_stats_yc(B, Tq, H) + (size_t)dr * B * Tq * HD + (size_t)b * Tq * HD;
                        const float *y = st + flash_stats_yc(B, Tk, H) + (size_t)dr * B * Tk * HD + ((size_t)b * Tk + Tk - Tq) * HD;
                        bad_st += memcmp(x, y, (size_t)Tq * HD * 4) != 0;
                    }
                }
                CHECK(bad == 0 && bad_st == 0, "%s %s Tq=%d Tk=%d stride=%d: cached rows differ from the full forward "
                      "(%d sequences, %d stats rows)", kind_name(kind), mode ? "bf16" : "fp32", Tq, Tk, kvs, bad, bad_st);
                free(q); free(k); free(v); free(dy); free(kc); free(vc); free(out); free(oc); free(qc); free(st); free(stc);
            }
        }
}

// ------------------------------------------------------------------ finite differences

// The emulation's gradients against central finite differences of the float64 reference
// (loss = sum(dy * out)), as test_attention.c's fd_case: |grad - FD| / max|grad| < 1e-4. ssmax
// ds: to 1e-4 of |FD| plus the float32 rounding bound of its sum (ds_error_bound) plus the FD
// error (|reference - FD|).
static double fd_worst, fd_worst_ds;

// sigmoid / relu: len_norm, with L = FD_TRAIN_LEN (below T: rows past L are covered).
#define FD_TRAIN_LEN 5
static void fd_case_x(int kind, float p, int family, int B, int T, int H, int D, int len_norm, int temp_d) {
    size_t N = (size_t)B * T * H * D;
    float *q = malloc(N * 4), *k = malloc(N * 4), *v = malloc(N * 4), *dy = malloc(N * 4);
    float *dq = malloc(N * 4), *dk = malloc(N * 4), *dv = malloc(N * 4);
    make_inputs(family, 177 + kind * 7 + family, B, T, H, D, q, k, v, dy, kind);
    float s[4] = {0.43f, 0.9f, 0.6f, 0.3f}, ds[4];
    double sd[4] = {0.43, 0.9, 0.6, 0.3}, dsr[4], dserr[4];
    lssar_attn_desc a = {.kind = kind, .p = p, .ssmax_s = s, .len_norm = (lssar_len_norm)len_norm,
                         .train_len = FD_TRAIN_LEN, .temp_d = temp_d};
    ref_desc rd = {.kind = kind, .p = p, .s = sd, .len_norm = len_norm, .L = FD_TRAIN_LEN, .temp_d = temp_d};
    CHECK(flash_emu_backward(&a, FLASH_FP32, B, T, H, D, q, k, v, NULL, NULL, dy, dq, dk, dv, ds) == 0,
          "backward failed: %s", lssar_errmsg());
    double *qd = to_double(q, N), *kd = to_double(k, N), *vd = to_double(v, N), *dyd = to_double(dy, N);
    double *rdq = malloc(N * 8), *rdk = malloc(N * 8), *rdv = malloc(N * 8), *tmp = malloc(N * 8);
    ref_backward(&rd, B, T, H, D, qd, kd, vd, dyd, rdq, rdk, rdv, dsr, dserr);
    double *xs[3] = {qd, kd, vd}, *rg[3] = {rdq, rdk, rdv};
    float *kg[3] = {dq, dk, dv};
    const char *nm[3] = {"q", "k", "v"};
    lssar_rng r;
    lssar_rng_seed(&r, 199 + kind);
    double gmax = 0;
    for (int t = 0; t < 3; t++)
        for (size_t i = 0; i < N; i++) gmax = fmax(gmax, fabs(rg[t][i]));
    for (int t = 0; t < 3; t++)
        for (int trial = 0; trial < 20; trial++) {
            size_t i = lssar_rng_below(&r, N);
            // head 0 of the repeated-keys input has uniform rows: not differentiable there in k
            if (family == IN_REPEATED && t == 1 && (i / D) % H == 0) continue;
            double x0 = xs[t][i], h = 1e-6 * fmax(1.0, fabs(x0));
            xs[t][i] = x0 + h;
            double lp = ref_loss(&rd, B, T, H, D, qd, kd, vd, dyd, tmp);
            xs[t][i] = x0 - h;
            double lm = ref_loss(&rd, B, T, H, D, qd, kd, vd, dyd, tmp);
            xs[t][i] = x0;
            double fd = (lp - lm) / (2 * h), ek = fabs(kg[t][i] - fd) / fmax(gmax, 1e-3);
            fd_worst = fmax(fd_worst, ek);
            CHECK(ek < 1e-4, "%s%s %s d%s[%zu]: emulation %.9g vs FD %.9g", kind_name(kind),
                  is_unnormed(kind) ? len_norm_name[len_norm] : "", input_name[family], nm[t], i, (double)kg[t][i], fd);
        }
    if (ref_ssmax(kind))
        for (int h = 0; h < H; h++) {
            double s0 = sd[h], hh = 1e-6;
            sd[h] = s0 + hh;
            double lp = ref_loss(&rd, B, T, H, D, qd, kd, vd, dyd, tmp);
            sd[h] = s0 - hh;
            double lm = ref_loss(&rd, B, T, H, D, qd, kd, vd, dyd, tmp);
            sd[h] = s0;
            double fd = (lp - lm) / (2 * hh), tol = 1e-4 * fabs(fd) + dserr[h] + fabs(dsr[h] - fd);
            CHECK(fabs(ds[h] - fd) <= tol, "ssmax %s ds[%d]: emulation %.9g vs FD %.9g (tolerance %.2e)",
                  input_name[family], h, (double)ds[h], fd, tol);
            fd_worst_ds = fmax(fd_worst_ds, fabs(ds[h] - fd) / tol);
        }
    free(q); free(k); free(v); free(dy); free(dq); free(dk); free(dv);
    free(qd); free(kd); free(vd); free(dyd); free(rdq); free(rdk); free(rdv); free(tmp);
}

static void fd_case_ln(int kind, float p, int family, int B, int T, int H, int D, int len_norm) {
    fd_case_x(kind, p, family, B, T, H, D, len_norm, 0);
}

static void fd_case(int kind, float p, int family, int B, int T, int H, int D) {
    fd_case_ln(kind, p, family, B, T, H, D, LSSAR_LEN_NORM_TRAIN);
    if (is_unnormed(kind)) fd_case_ln(kind, p, family, B, T, H, D, LSSAR_LEN_NORM_ROW);
}

static void test_finite_differences(void) {
    for (int kind = 0; kind < NKINDS; kind++) {
        if (!fused_ok(kind)) continue;
        fd_case(kind, 15.0f, IN_RANDOM, 2, 9, 2, 16);
        fd_case(kind, 15.0f, IN_RANDOM, 1, 70, 1, 8);  // two tiles
        fd_case(kind, 15.0f, IN_PEAKED, 1, 7, 2, 8);
        fd_case(kind, 15.0f, IN_REPEATED, 1, 8, 2, 8);
    }
    fd_case(LSSAR_ATTN_LSSAR, 1.0f, IN_RANDOM, 1, 10, 2, 16);
    fd_case(LSSAR_ATTN_LSSAR, 2.5f, IN_RANDOM, 1, 10, 2, 16);
    for (int kind = LSSAR_ATTN_LSSA; kind <= LSSAR_ATTN_LSSAR; kind++) {   // another head size's temperature
        fd_case_x(kind, 15.0f, IN_RANDOM, 1, 70, 1, 16, 0, 64);
        fd_case_x(kind, 3.0f, IN_RANDOM, 1, 10, 2, 16, 0, 2);
    }
    printf("  finite differences: worst |grad - FD| / max|grad| %.1e; ssmax |ds - FD| / tolerance %.1e\n", fd_worst,
           fd_worst_ds);
}

// ------------------------------------------------------------------ long rows

// T = 16384, lssar p = 15, H = 1, D = 16, with zero-norm keys (every 4th), zero queries (every
// 7th: uniform rows, the fallback) and peaked rows, as test_attention.c test_long_rows, in FP32
// and BF16 mode: finite; each output within the range of the values it sees; channel 0 of v = 1
// comes out 1 (the weights sum to 1); FP32: sampled rows against the float64 reference (floor:
// the float32 rounding bound of the sum, see there). Backward: finite, and with channel 0 of dy
// = 1, dv_j0 = sum_i beta_ij >= 0 and sum_j dv_j0 = T.
// The bounds, from the accumulation structure (flash.h): the output y = (acc' + w_jm v_jm) / W
// with acc' summed in k-steps of 16 (<= 16 + n / 16 roundings of a sum of non-negative terms)
// and W in per-lane tile partials (<= 16 + n / 64, + 2 for the quad); the weights' own errors
// cancel between acc' and W (the same w_k in both), so |y_0 - 1| <= gamma_{n/16 + n/64 + 40};
// BF16 adds u = 2^-8 (P rounded in P V, not in W), and for the range check 2u max|v|
// (v rounded, and the rounded weights summing to 1 +- u). dv_j0 likewise over the query rows.
static void test_long_rows(void) {
    int B = 1, T = 16384, H = 1, D = 16;
    size_t N = (size_t)B * T * H * D;
    float *x = malloc(8 * N * 4);
    float *q = x, *k = q + N, *v = k + N, *dy = v + N, *out = dy + N, *dq = out + N, *dk = dq + N, *dv = dk + N;
    long_rows_inputs(T, D, 4242, q, k, v, dy);
    lssar_attn_desc a = {.kind = LSSAR_ATTN_LSSAR, .p = 15.0f};
    float *st = malloc(flash_emu_stats_floats(&a, B, T, H, D) * 4);
    for (int mode = 0; mode < 2; mode++) {
        const char *mn = mode ? "bf16" : "fp32";
        double t0 = lssar_now();
        CHECK(flash_emu_forward(&a, mode, B, T, T, T, H, D, q, k, v, out, st) == 0, "forward failed: %s", lssar_errmsg());
        double t1 = lssar_now();
        CHECK(flash_emu_backward(&a, mode, B, T, H, D, q, k, v, out, st, dy, dq, dk, dv, NULL) == 0, "backward failed");
        double t2 = lssar_now();
        size_t bad = 0, outside = 0;
        double worst_one = 0, u = mode ? 0x1p-8 : 0;
        float lo[64], hi[64];
        for (int d = 0; d < D; d++) lo[d] = hi[d] = v[d];
        for (int i = 0; i < T; i++) {
            for (int d = 0; d < D; d++) {
                float vv = v[(size_t)i * D + d], y = out[(size_t)i * D + d];
                lo[d] = fminf(lo[d], vv); hi[d] = fmaxf(hi[d], vv);
                double tol = 2 * u * fmax(fabsf(lo[d]), fabsf(hi[d])) + gamma_f32(i / 16 + i / 64 + 40) * fmax(fabsf(lo[d]), fabsf(hi[d]));
                if (!isfinite(y)) bad++;
                else if (y < lo[d] - tol || y > hi[d] + tol) outside++;
            }
            worst_one = fmax(worst_one, fabs(out[(size_t)i * D] - 1.0));
        }
        size_t badg = 0;
        for (size_t i = 0; i < 3 * N; i++) badg += !isfinite(dq[i]);
        double dvsum = 0;
        size_t negdv = 0;
        for (int j = 0; j < T; j++) { dvsum += dv[(size_t)j * D]; negdv += dv[(size_t)j * D] < 0; }
        CHECK(bad == 0 && badg == 0, "%s: %zu non-finite outputs, %zu non-finite gradients at T=%d", mn, bad, badg, T);
        CHECK(outside == 0, "%s: %zu outputs outside the range of the values they see", mn, outside);
        double bound1 = u + gamma_f32(T / 16 + T / 64 + 40);  // see above
        CHECK(worst_one <= bound1, "%s: |sum of weights - 1| = %.2e > %.2e", mn, worst_one, bound1);
        // sum_j dv[j, 0] = sum_i sum_j beta_ij = T (each term >= 0)
        CHECK(negdv == 0 && fabs(dvsum - T) <= T * bound1, "%s: sum_j dv[j,0] = %.6f, expected %d (%zu negative)", mn,
              dvsum, T, negdv);
        if (mode == 0) {
            double *qd = to_double(q, N), *kd = to_double(k, N), *vd = to_double(v, N);
            ref_desc rd = {.kind = LSSAR_ATTN_LSSAR, .p = 15.0};
            ref_row *R = ref_row_new(T, D);
            ref_keys(B, T, H, D, kd, 0, 0, R->kh);
            static const int rows[] = {16383, 16000, 9001, 4097, 700, 16382, 16381, 16380, 12345, 10, 3, 2, 7 * 2000 + 3};
            double num = 0, den = 0, flo = 0;
            for (int ri = 0; ri < (int)(sizeof rows / sizeof rows[0]); ri++) {
                int i = rows[ri];
                ref_row_forward(&rd, B, T, H, D, qd, kd, 0, 0, i, R);
                for (int d = 0; d < D; d++) {
                    double y = 0, yabs = 0;
                    for (int j = 0; j <= i; j++) {
                        y += R->w[j] * vd[(size_t)j * D + d];
                        yabs += R->w[j] * fabs(vd[(size_t)j * D + d]);
                    }
                    // the fp32 sums (see above): gamma_{n/16 + n/64 + 40}
                    double e = out[(size_t)i * D + d] - y, g = gamma_f32(i / 16 + i / 64 + 40) * yabs;
                    num += e * e; den += y * y; flo += g * g;
                }
            }
            double rel = sqrt(num) / fmax(sqrt(den), 1e4 * sqrt(flo));
            CHECK(rel < 1e-4, "T=%d sampled rows: rel err %.2e against the float64 reference", T, rel);
            printf("  T=%d lssar p=15 fp32: forward %.1f s, backward %.1f s; sampled rows rel err %.1e, "
                   "|sum of weights - 1| %.1e\n", T, t1 - t0, t2 - t1, rel, worst_one);
            ref_row_free(R);
            free(qd); free(kd); free(vd);
        } else {
            printf("  T=%d lssar p=15 bf16: forward %.1f s, backward %.1f s; |sum of weights - 1| %.1e\n", T, t1 - t0,
                   t2 - t1, worst_one);
        }
    }
    free(st);
    free(x);
}

// T = 16384 for sigmoid and relu (no normalisation: the output is a sum of up to T terms that
// nothing divides), H = 1, D = 16, the long-row input, len_norm train (L = 1024, so most rows lie
// far beyond it) and row: FP32 forward and backward finite, sampled rows against the float64
// reference to 1e-4 with the floor of the fp32 sum's rounding bound (P V in k-steps of 16:
// gamma_{n/16 + 40} sum_j a_j |v_j|, as test_long_rows); BF16: finite.
static void test_long_rows_unnormed(void) {
    int B = 1, T = 16384, H = 1, D = 16, L = 1024;
    size_t N = (size_t)B * T * H * D;
    float *x = malloc(8 * N * 4);
    float *q = x, *k = q + N, *v = k + N, *dy = v + N, *out = dy + N, *dq = out + N, *dk = dq + N, *dv = dk + N;
    long_rows_inputs(T, D, 4343, q, k, v, dy);
    double *qd = to_double(q, N), *kd = to_double(k, N), *vd = to_double(v, N);
    ref_row *R = ref_row_new(T, D);
    for (int kind = LSSAR_ATTN_SIGMOID; kind <= LSSAR_ATTN_RELU; kind++)
        for (int ln = 0; ln < 2; ln++)
            for (int mode = 0; mode < 2; mode++) {
                if (mode == 1 && ln == 1) continue;  // (time)
                lssar_attn_desc a = {.kind = kind, .len_norm = (lssar_len_norm)ln, .train_len = L};
                float *st = malloc(flash_emu_stats_floats(&a, B, T, H, D) * 4);
                double t0 = lssar_now();
                CHECK(flash_emu_forward(&a, mode, B, T, T, T, H, D, q, k, v, out, st) == 0, "forward: %s", lssar_errmsg());
                CHECK(flash_emu_backward(&a, mode, B, T, H, D, q, k, v, out, st, dy, dq, dk, dv, NULL) == 0,
                      "backward: %s", lssar_errmsg());
                double t1 = lssar_now();
                size_t bad = 0;
                for (size_t i = 0; i < 4 * N; i++) bad += !isfinite(out[i]);
                CHECK(bad == 0, "%s (len-norm %s) %s: %zu non-finite outputs or gradients at T=%d", kind_name(kind),
                      len_norm_name[ln], mode ? "bf16" : "fp32", bad, T);
                double rel = 0;
                if (mode == 0) {
                    ref_desc rd = {.kind = kind, .len_norm = ln, .L = L};
                    static const int rows[] = {16383, 16000, 9001, 4097, 1023, 1024, 700, 12345, 10, 3, 0};
                    double num = 0, den = 0, flo = 0;
                    for (int ri = 0; ri < (int)(sizeof rows / sizeof rows[0]); ri++) {
                        int i = rows[ri];
                        ref_row_forward(&rd, B, T, H, D, qd, kd, 0, 0, i, R);
                        for (int d = 0; d < D; d++) {
                            double y = 0, yabs = 0;
                            for (int j = 0; j <= i; j++) {
                                y += R->w[j] * vd[(size_t)j * D + d];
                                yabs += R->w[j] * fabs(vd[(size_t)j * D + d]);
                            }
                            double e = out[(size_t)i * D + d] - y, g = gamma_f32(i / 16 + 40) * yabs;
                            num += e * e; den += y * y; flo += g * g;
                        }
                    }
                    rel = sqrt(num) / fmax(sqrt(den), 1e4 * sqrt(flo));
                    CHECK(rel < 1e-4, "%s (len-norm %s) T=%d sampled rows: rel err %.2e", kind_name(kind),
                          len_norm_name[ln], T, rel);
                }
                if (mode == 0)
                    printf("  T=%d %s (len-norm %s) fp32: forward + backward %.1f s; sampled rows rel err %.1e\n", T,
                           kind_name(kind), len_norm_name[ln], t1 - t0, rel);
                else
                    printf("  T=%d %s (len-norm %s) bf16: forward + backward %.1f s; finite\n", T, kind_name(kind),
                           len_norm_name[ln], t1 - t0);
                free(st);
            }
    ref_row_free(R);
    free(qd); free(kd); free(vd); free(x);
}

// ------------------------------------------------------------------ BF16

/* BF16 mode: two checks, both with bounds derived below (first order in the bf16 unit roundoff
   u = 2^-8: bf16 keeps 8 significant bits, so round-to-nearest-even has |bf16(x) - x| <= 2^-8 |x|;
   measured max 3.89e-3 = 2^-8 / (1 + 2^-8)), none fitted to a measurement. In both, the emulation's
   own fp32 rounding is covered by adding the FP32 mode's tolerance, 1e-4 of the reference (with
   the same floors as in FP32 mode): it is the same algorithm, and FP32 mode meets that.

   (A) The algorithm. The reference is the exact (float64) function of the emulation's model:
   the products of the bf16-rounded operands q~, k~, v~, dy~, with the norms rq, rk and the
   l2-normalisation projection from the fp32 inputs (model_ref). What then separates the emulation
   from it is only that the intermediate weights enter their products rounded to bf16 (relative
   error <= u each), and where that propagates:
     out_id:  <= u sum_j beta_j |v~_jd|                         (P rounded in P V)
     D1 - c:  e1 = u sum_{j != jm} beta_j Wabs_j, Wabs_j = sum_d |dy~_d v~_jd|  (P rounded in the
              centred output yc; lssa: D1 = dy . y, all j)
     lssar D2: eD2 = p o (u sum_{j != jm, u_j > 0} (beta_j / u_j) Wabs_j + e1 S)  (G rounded in Ec)
     dS_j:    softmax / ssmax sc beta_j e1; lssa and lssar fallback K_j e1 / Z;
              lssar K_j (n p beta_j / u_j [u_j > 0] e1 + eD2) / Z, with K_j = lambda rq rk_j sig(x_j)
     G_i = sum_j dS_j k~_j: per element <= sum_j (e(dS_j) + u |dS_j|) |k~_jd| (dS rounded in dS K);
              dq_i is G_i projected (l2 normalisation: a contraction), so ||e(dq_i)|| <= ||that||;
              dK likewise with q~_i, dV: u sum_i beta_ij |dy~_id| (W rounded in W^T dY)
     ds:      0 beyond fp32: the row term is A - Bs C (flash_ssmax_row_term), in which an error
              e of D1 - c moves every dx_j by -beta_j e and so the term by
              -e sum_j beta_j (S_j - C) = 0, C = sum_j beta_j S_j. Its fp32 slack: 1e-4 of
              max(|ds|, 1e-2 sum_ij |dx_ij t_ij|), as the dq / dk floors.
   (Where the argmax is a near tie, the j != jm exclusions are dropped: the emulation's fp32
   logits may pick the other key.) This bound is tight (u times weighted sums), so a wrong
   algorithm fails it (test_bf16_controls).

   (B) Against the exact function at the original inputs (the question the spec asks): out and
   dv to (A)'s bound plus the effect of rounding the operands. |q~_d k~_d - q_d k_d| <= (2u + u^2)
   |q_d k_d|, so the logit x_j moves by at most ex_j = (2u + u^2) sc_j Sabs_j, Sabs_j =
   sum_d |q_d k_jd| (sc_j = 1/sqrt(D) (ssmax: s_h ln n / sqrt(D)), or lambda rq rk_j). That gives
   rigorous intervals for the unnormalised weights: softmax exp(x - m) e^(+-ex); softplus
   a +- ex sig(x + ex) (sigmoid increases); each widened by the exponential unit's relative error
   (EXP_ERR below: the kernels' MUFU ex2, flash.h); lssar u = n alpha - o from alpha's interval, and
   (u / u_max)^p from u's, where p amplifies: a relative error e of u becomes one of ~p e in the
   weight (vacuous, |e(beta)| <= 1, where u_max's interval reaches 0). A normalised weight
   beta_j = b_j / sum_k b_k then lies in [lo_j / (lo_j + sum_{k != j} hi_k), hi_j / (hi_j +
   sum_{k != j} lo_k)], giving e(beta_j); and, with sum_j e(beta_j) = 0 as both sum to 1,
     out_id: sum_j e(beta_j) |v_jd - y_id| + u sum_j (beta_j + e(beta_j)) |v_jd|   (v rounded)
     dv_jd:  sum_i (e(beta_ij) (1 + u) + u beta_ij) |dy_id|.
   An exactly uniform lssar row (the fallback: zero query, identical keys) stays exactly uniform:
   identical operands round identically. For lssar the bound is informative only where lambda
   u Sabs / |q| |k| is well below 1 / p (short rows, small D); test_bf16 reports its size.
   sigmoid / relu (no normalisation): (A) out_id <= u sum_j a_j |v~_jd| (P rounded), and dS_j =
   a'(x_j) dw_j / sqrt(D) has no row term, so only its own rounding in dS K, dS^T Q (the u |dS_j|
   above) and W's in W^T dY; (B) a_j's own interval [f(x_j - ex_j), f(x_j + ex_j)] (f increasing),
   and out_id: sum_j e(a_j) |v_jd| + u sum_j (a_j + e(a_j)) |v_jd| (not centred on y: the errors
   of unnormalised weights need not sum to 0). */
#define U_BF16 0x1p-8
/* The exponential unit's relative error at exp(y) (flash.h, flash_ex2: eps_ex2 = 2^-22 of the unit
   plus the rounding of y log2 e and of log2 e itself, 1.173 |y| 2^-23 as the CUDA guide's __expf). phi exp's weights are
   products of exponentials: the online max is rescaled at most once per key tile (n / 64 + 1
   factors, whose arguments telescope to y = x - xmax), and the backward's exp(x - LSE) takes the
   LSE from them; hence (2 + n / 64) eps_ex2. Through the re-weighting's intervals below it is
   amplified as every error of alpha is: u = n alpha - o, then (u / u_max)^p turns a relative
   error e of u into ~p e of the weight. */
#define EXP_ERR(y, n) ((2 + (n) / 64) * 0x1p-22 + 1.173 * 0x1p-23 * fabs(y))

typedef struct {
    double *out, *dq, *dk, *dv, ds[16];   // the model's outputs (B, T, H, D), ds (H)
    double *bout, *bdq, *bdk, *bdv;        // (A): elementwise bounds
    double bds[16], dsabs[16];             // (A) for ds; sum over (b, i, j) of |dx t|
    double *Bout, *Bdv;                    // (B): the operand-rounding part, elementwise
} model_res;

static void model_alloc(model_res *M, size_t N) {
    double **f[] = {&M->out, &M->dq, &M->dk, &M->dv, &M->bout, &M->bdq, &M->bdk, &M->bdv, &M->Bout, &M->Bdv};
    for (int i = 0; i < 10; i++) *f[i] = calloc(N, sizeof(double));
}
static void model_free(model_res *M) {
    double *f[] = {M->out, M->dq, M->dk, M->dv, M->bout, M->bdq, M->bdk, M->bdv, M->Bout, M->Bdv};
    for (int i = 0; i < 10; i++) free(f[i]);
}

// Normalised weight intervals from unnormalised ones: e(beta_j) (see above). b, lo, hi >= 0.
static void norm_err(const double *b, const double *lo, const double *hi, int n, double *eb) {
    double sb = 0, slo = 0, shi = 0;
    for (int j = 0; j < n; j++) { sb += b[j]; slo += lo[j]; shi += hi[j]; }
    for (int j = 0; j < n; j++) {
        double beta = sb > 0 ? b[j] / sb : 0;
        double d1 = lo[j] + (shi - hi[j]), d2 = hi[j] + (slo - lo[j]);
        double blo = d1 > 0 ? lo[j] / d1 : 0, bhi = d2 > 0 ? hi[j] / d2 : 1;
        eb[j] = fmax(bhi - beta, beta - blo);
        if (!(eb[j] <= 1)) eb[j] = 1;
    }
}

/* The float64 model of the emulation (see above) with its bounds. qp, kp, vp, dyp: the product
   operands; qn, kn: the inputs the norms and the projection use. want_B: also the (B) bounds,
   for which the operands must be the original inputs. */
static void model_ref(int kind, int len_norm, int L, double p, const double *sh, int B, int T, int H, int D,
                      const double *qp, const double *kp, const double *vp, const double *dyp, const double *qn,
                      const double *kn, int want_B, model_res *M) {
    const double u = U_BF16, e2 = 2 * u + u * u;
    const lssar_attn_stages st = ref_stages(kind);
    const int cos = st.score == LSSAR_SCORE_COS, ssm = st.score == LSSAR_SCORE_SSMAX, unnormed = is_unnormed(kind);
    const int pexp = st.phi == LSSAR_PHI_EXP, rw = st.reweight;
    size_t N = (size_t)B * T * H * D;
    memset(M->dk, 0, N * 8); memset(M->dv, 0, N * 8); memset(M->bdk, 0, N * 8); memset(M->bdv, 0, N * 8);
    memset(M->Bdv, 0, N * 8);
    for (int h = 0; h < H; h++) M->ds[h] = M->bds[h] = M->dsabs[h] = 0;
#pragma omp parallel for schedule(dynamic, 1)
    for (int h = 0; h < H; h++) {
        double *buf = calloc((size_t)20 * T + 4 * D, sizeof(double));
        double *S = buf, *Sa = S + T, *x = Sa + T, *a = x + T, *al = a + T, *uu = al + T, *w = uu + T, *dw = w + T;
        double *Wa = dw + T, *cw = Wa + T, *dal = cw + T, *ca = dal + T, *dS = ca + T, *edS = dS + T, *rk = edS + T;
        double *lo = rk + T, *hi = lo + T, *bb = hi + T, *eb = bb + T, *ex = eb + T;
        double *y = ex + T, *G = y + D, *bG = G + D, *dKr = bG + D;
        double *dK = calloc(N / H, sizeof(double)), *bK = calloc(N / H, sizeof(double));  // (T, D) per b
        (void)dKr;
        for (int b = 0; b < B; b++) {
            memset(dK, 0, (size_t)T * D * 8); memset(bK, 0, (size_t)T * D * 8);
            for (int j = 0; j < T; j++) {
                double ss = 0;
                for (int d = 0; d < D; d++) ss += kn[IDX(b, j, h, d)] * kn[IDX(b, j, h, d)];
                rk[j] = 1 / fmax(sqrt(ss), 1e-12);
            }
            for (int i = 0; i < T; i++) {
                int n = i + 1;
                double qs = 0;
                for (int d = 0; d < D; d++) qs += qn[IDX(b, i, h, d)] * qn[IDX(b, i, h, d)];
                double rq = 1 / fmax(sqrt(qs), 1e-12), lam = log((double)D) * log((double)n);
                double sc = ssm ? sh[h] * log((double)n) / sqrt((double)D) : 1 / sqrt((double)D);
                // sigmoid / relu: the row's L (training length or n) and the sigmoid bias -ln L
                double lenL = len_norm == LSSAR_LEN_NORM_ROW ? (double)n : (double)L;
                double bias = st.phi == LSSAR_PHI_SIGMOID ? -log(lenL) : 0;
                for (int j = 0; j < n; j++) {
                    S[j] = Sa[j] = dw[j] = Wa[j] = 0;
                    for (int d = 0; d < D; d++) {
                        S[j] += qp[IDX(b, i, h, d)] * kp[IDX(b, j, h, d)];
                        Sa[j] += fabs(qn[IDX(b, i, h, d)] * kn[IDX(b, j, h, d)]);
                        dw[j] += dyp[IDX(b, i, h, d)] * vp[IDX(b, j, h, d)];
                        Wa[j] += fabs(dyp[IDX(b, i, h, d)] * vp[IDX(b, j, h, d)]);
                    }
                    double f = cos ? lam * rq * rk[j] : sc;
                    x[j] = f * S[j] + bias;
                    ex[j] = e2 * f * Sa[j];
                }
                int jm = 0, tie = 0;
                for (int j = 1; j < n; j++) if (x[j] > x[jm]) jm = j;
                for (int j = 0; j < n; j++) if (j != jm && x[jm] - x[j] <= 1e-4 * (1 + fabs(x[jm]))) tie = 1;
                int uniform = 1;
                for (int j = 1; j < n; j++) uniform &= x[j] == x[0];
                double z = 0, o = i < 3 ? 0 : 1;
                int fallback = 0;
                // weights
                if (unnormed) {
                    for (int j = 0; j < n; j++)
                        w[j] = st.phi == LSSAR_PHI_SIGMOID ? sigmoid(x[j]) : fmax(x[j], 0) / lenL;
                } else {
                    for (int j = 0; j < n; j++) { a[j] = pexp ? exp(x[j] - x[jm]) : softplus(x[j]); z += a[j]; }
                    for (int j = 0; j < n; j++) al[j] = a[j] / z;
                    if (!rw) {
                        for (int j = 0; j < n; j++) w[j] = al[j];
                    } else {
                        double um = 0, sb = 0;
                        for (int j = 0; j < n; j++) { uu[j] = n * al[j] - o; um = fmax(um, uu[j]); }
                        for (int j = 0; j < n; j++) { w[j] = um > 0 ? pow(fmax(uu[j], 0) / um, p) : 0; sb += w[j]; }
                        fallback = (i >= 3 && uniform) || sb == 0;
                        for (int j = 0; j < n; j++) w[j] = fallback ? al[j] : w[j] / sb;
                    }
                }
                // forward output and its (A) bound
                for (int d = 0; d < D; d++) {
                    double yy = 0, bo = 0;
                    for (int j = 0; j < n; j++) {
                        yy += w[j] * vp[IDX(b, j, h, d)];
                        bo += w[j] * fabs(vp[IDX(b, j, h, d)]);
                    }
                    y[d] = yy;
                    M->out[IDX(b, i, h, d)] = yy;
                    M->bout[IDX(b, i, h, d)] = u * bo;
                }
                // backward: dS_j and its (A) bound
                double e1 = 0;
                int centred = pexp || rw;
                for (int j = 0; j < n; j++)
                    if (!centred || tie || j != jm) e1 += w[j] * Wa[j];
                e1 *= u;
                if (unnormed) {  // dS_j = sc a'(x_j) dw_j: no normalisation, no D1 (and no e1)
                    for (int j = 0; j < n; j++) {
                        double fd = st.phi == LSSAR_PHI_SIGMOID ? sigmoid(x[j]) * sigmoid(-x[j]) : (x[j] > 0 ? 1 / lenL : 0);
                        dS[j] = sc * fd * dw[j];
                        edS[j] = 0;
                    }
                } else {
                    // dx_j = phi'(x_j) / Z (dalpha_j - D2) (K_j / Z: that factor times the logit's
                    // f_j, exp alpha_j Z, softplus sigmoid(x_j)); dalpha = dbeta without re-weighting
                    // and on the fallback row. ds's bound: an error d_j of dalpha_j (the re-weighting's
                    // D1, e1) moves the row term (after the A - Bs C correction of D2) by
                    // sum_j phi'_j t_j (d_j - sum_k alpha_k d_k).
                    double *hd = dw, Ssum = 0, eS = 0;
                    if (rw && !fallback) {
                        centred_all(w, dw, n, cw);
                        for (int j = 0; j < n; j++) {
                            dal[j] = uu[j] > 0 ? n * (p / uu[j]) * w[j] * cw[j] : 0;
                            if (uu[j] > 0) {
                                Ssum += w[j] / uu[j];
                                if (tie || j != jm) eS += w[j] / uu[j] * Wa[j];
                            }
                        }
                        hd = dal;
                    }
                    double eD2 = rw && !fallback ? p * o * (u * eS + e1 * Ssum) : 0;
                    centred_all(al, hd, n, ca);
                    double ft = 0, ftabs = 0, ad = 0, bd = 0;
                    for (int j = 0; j < n; j++) {
                        double fj = cos ? lam * rq * rk[j] : sc, ph = pexp ? a[j] : sigmoid(x[j]), K = fj * ph;
                        double dj = rw && !fallback && uu[j] > 0 ? n * p * w[j] / uu[j] * e1 : 0;
                        dS[j] = K * ca[j] / z;
                        edS[j] = K * (rw && !fallback ? dj + eD2 : e1) / z;
                        if (ssm) {
                            double dx = ph * ca[j] / z, t = log((double)n) * S[j] / sqrt((double)D);
#pragma omp atomic
                            M->ds[h] += dx * t;
#pragma omp atomic
                            M->dsabs[h] += fabs(dx * t);
                            ft += ph / z * t;
                            ftabs += fabs(ph / z * t) * dj;
                            ad += al[j] * dj;
                        }
                        bd = ftabs + fabs(ft) * ad;
                    }
                    if (ssm && rw) {
#pragma omp atomic
                        M->bds[h] += bd;
                    }
                }
                // dq = G (projected), dK, dV and their (A) bounds
                for (int d = 0; d < D; d++) { G[d] = bG[d] = 0; }
                for (int j = 0; j < n; j++)
                    for (int d = 0; d < D; d++) {
                        double kv = kp[IDX(b, j, h, d)], qv = qp[IDX(b, i, h, d)], e = edS[j] + u * fabs(dS[j]);
                        G[d] += dS[j] * kv;
                        bG[d] += e * fabs(kv);
                        dK[(size_t)j * D + d] += dS[j] * qv;
                        bK[(size_t)j * D + d] += e * fabs(qv);
                        M->dv[IDX(b, j, h, d)] += w[j] * dyp[IDX(b, i, h, d)];
                        M->bdv[IDX(b, j, h, d)] += u * w[j] * fabs(dyp[IDX(b, i, h, d)]);
                    }
                double qg = 0;
                for (int d = 0; d < D; d++) qg += qn[IDX(b, i, h, d)] * G[d];
                for (int d = 0; d < D; d++) {
                    M->dq[IDX(b, i, h, d)] = cos ? G[d] - qn[IDX(b, i, h, d)] * rq * rq * qg : G[d];
                    M->bdq[IDX(b, i, h, d)] = bG[d];
                }
                // (B): the weights' intervals under the operand rounding
                if (want_B) {
                    if (unnormed) {  // the weight's own interval (increasing in x): no normalisation
                        for (int j = 0; j < n; j++) {
                            double wl = st.phi == LSSAR_PHI_SIGMOID ? sigmoid(x[j] - ex[j]) : fmax(x[j] - ex[j], 0) / lenL;
                            double wh = st.phi == LSSAR_PHI_SIGMOID ? sigmoid(x[j] + ex[j]) : fmax(x[j] + ex[j], 0) / lenL;
                            eb[j] = fmax(wh - w[j], w[j] - wl);
                        }
                    } else if (rw && fallback) {
                        for (int j = 0; j < n; j++) eb[j] = 0;  // stays exactly uniform (see above)
                    } else {
                        for (int j = 0; j < n; j++) {
                            // the operands' rounding moves x by ex; the exponential unit adds its
                            // relative error (flash.h, flash_ex2): exp(y) within EXP_ERR, and
                            // softplus's e = exp(-|x|) within EXP_ERR moves log1p(e) by at most
                            // e EXP_ERR / (1 + e) (absolute)
                            double ea = ex[j] * sigmoid(x[j] + ex[j]), e = exp(-fabs(x[j]));
                            double ee = pexp ? EXP_ERR(x[j] - x[jm], n) : EXP_ERR(fabs(x[j]), 0) * e / (1 + e);
                            bb[j] = a[j];
                            lo[j] = pexp ? a[j] * exp(-ex[j]) * (1 - ee) : fmax(a[j] - ea - ee, 0);
                            hi[j] = pexp ? a[j] * exp(ex[j]) * (1 + ee) : a[j] + ea + ee;
                        }
                        norm_err(bb, lo, hi, n, eb);  // alpha's e
                        if (rw) {
                            // alpha's interval -> u's -> (u / u_max)^p's
                            double ulo_max = -INFINITY, uhi_max = -INFINITY, um = 0;
                            for (int j = 0; j < n; j++) {
                                lo[j] = n * fmax(al[j] - eb[j], 0) - o;
                                hi[j] = n * (al[j] + eb[j]) - o;
                                ulo_max = fmax(ulo_max, lo[j]);
                                uhi_max = fmax(uhi_max, hi[j]);
                                um = fmax(um, uu[j]);
                            }
                            if (!(ulo_max > 0)) {
                                for (int j = 0; j < n; j++) eb[j] = 1;  // vacuous
                            } else {
                                for (int j = 0; j < n; j++) {
                                    double rlo = fmax(lo[j], 0) / uhi_max, rhi = fmin(fmax(hi[j], 0) / ulo_max, 1);
                                    bb[j] = pow(fmax(uu[j], 0) / um, p);
                                    lo[j] = pow(rlo, p);
                                    hi[j] = pow(rhi, p);
                                }
                                norm_err(bb, lo, hi, n, eb);
                            }
                        }
                    }
                    for (int d = 0; d < D; d++) {
                        double e = 0;
                        for (int j = 0; j < n; j++) {
                            double vv = vp[IDX(b, j, h, d)];
                            // (the weights' errors sum to 0 where they are normalised: centred on y)
                            e += eb[j] * fabs(unnormed ? vv : vv - y[d]) + u * (w[j] + eb[j]) * fabs(vv);
                        }
                        M->Bout[IDX(b, i, h, d)] = e;
                    }
                    for (int j = 0; j < n; j++)
                        for (int d = 0; d < D; d++)
                            M->Bdv[IDX(b, j, h, d)] += (eb[j] * (1 + u) + u * w[j]) * fabs(dyp[IDX(b, i, h, d)]);
                }
            }
            for (int j = 0; j < T; j++) {
                double kg = 0, *g = dK + (size_t)j * D;
                for (int d = 0; d < D; d++) kg += kn[IDX(b, j, h, d)] * g[d];
                for (int d = 0; d < D; d++) {
                    M->dk[IDX(b, j, h, d)] = cos ? g[d] - kn[IDX(b, j, h, d)] * rk[j] * rk[j] * kg : g[d];
                    M->bdk[IDX(b, j, h, d)] = bK[(size_t)j * D + d];
                }
            }
        }
        free(dK); free(bK); free(buf);
    }
}

// ||got - ref|| against ||bound|| + 1e-4 max(||ref||, floor): returns the ratio (<= 1 passes).
static double bound_ratio(const float *got, const double *ref, const double *bound, size_t n, double floor) {
    double num = 0;
    for (size_t i = 0; i < n; i++) { double e = got[i] - ref[i]; num += e * e; }
    num = sqrt(num);
    double tol = norm2(bound, n) + 1e-4 * fmax(norm2(ref, n), floor);
    if (!isfinite(num)) return INFINITY;
    return tol > 0 ? num / tol : (num == 0 ? 0 : INFINITY);
}

typedef struct { double A[5], B[2], Bsize[2]; } bf16_result;  // A: out dq dk dv ds; B: out dv

// One BF16 case: the emulation (mode) against the model at the bf16-rounded operands, (A), and
// against the exact function at the original inputs, (B). p_emu, s_scale (ssmax s_h) and q_scale
// (the emulation's q times |q_scale|; q_scale < 0 also shifts v by one key) perturb what the
// emulation computes (the negative controls; 15, 1, 1 otherwise).
static bf16_result bf16_case(int kind, int ln, int mode, float p_emu, float s_scale, float q_scale, int family,
                             uint64_t seed, int B, int T, int H, int D) {
    size_t N = (size_t)B * T * H * D;
    float *x = malloc(8 * N * 4);
    float *q = x, *k = q + N, *v = k + N, *dy = v + N, *out = dy + N, *dq = out + N, *dk = dq + N, *dv = dk + N;
    make_inputs(family, seed, B, T, H, D, q, k, v, dy, kind);
    float s[16], ds[16];
    double sd[16];
    for (int h = 0; h < H; h++) { s[h] = (0.43f + 0.2f * h) * s_scale; sd[h] = 0.43f + 0.2f * h; }
    lssar_attn_desc a = {.kind = kind, .p = p_emu, .ssmax_s = ref_ssmax(kind) ? s : NULL,
                         .len_norm = (lssar_len_norm)ln, .train_len = ATTN_REF_TRAIN_LEN};
    float *st = malloc(flash_emu_stats_floats(&a, B, T, H, D) * 4), *qe = malloc(N * 4), *ve = malloc(N * 4);
    size_t HD = (size_t)H * D;
    for (size_t i = 0; i < N; i++) {
        qe[i] = q[i] * fabsf(q_scale);
        // q_scale < 0: key j gets the value of key j - 1 (an off-by-one key index)
        ve[i] = q_scale < 0 && (i / HD) % T > 0 ? v[i - HD] : v[i];
    }
    CHECK(flash_emu_forward(&a, mode, B, T, T, T, H, D, qe, k, ve, out, st) == 0 &&
          flash_emu_backward(&a, mode, B, T, H, D, qe, k, ve, out, st, dy, dq, dk, dv, ds) == 0, "emulation failed");
    free(qe);
    free(ve);
    double *orig = to_double(x, 4 * N), *rnd = malloc(4 * N * 8);
    for (size_t i = 0; i < 4 * N; i++) rnd[i] = flash_bf16(x[i]);
    model_res MA, MB;
    model_alloc(&MA, N);
    model_alloc(&MB, N);
    model_ref(kind, ln, ATTN_REF_TRAIN_LEN, 15.0, sd, B, T, H, D, rnd, rnd + N, rnd + 2 * N, rnd + 3 * N, orig,
              orig + N, 0, &MA);
    model_ref(kind, ln, ATTN_REF_TRAIN_LEN, 15.0, sd, B, T, H, D, orig, orig + N, orig + 2 * N, orig + 3 * N, orig,
              orig + N, 1, &MB);
    bf16_result r;
    double nq = norm2(orig, N), nk = norm2(orig + N, N);
    // The remnant floor of compare_impl_x (attn_ref.h): the re-weighting keeps weights down to
    // FLT_MIN of the row's largest, so gradients that only smaller weights carry (a peaked row
    // re-weighted: the power takes the other weights from e^-spread to e^-(p spread)) are 0 in
    // float32 and remnants far below 1e-20 of the scale in the float64 model; ds likewise.
    double g = norm2(orig + 2 * N, N) * norm2(orig + 3 * N, N) / sqrt((double)N);
    r.A[0] = bound_ratio(out, MA.out, MA.bout, N, 0);
    double fq = fmax(nq > 0 ? 1e-2 * norm2(MA.dk, N) * nk / nq : 0, 1e-20 * g * nk);
    double fk = fmax(nk > 0 ? 1e-2 * norm2(MA.dq, N) * nq / nk : 0, 1e-20 * g * nq);
    r.A[1] = bound_ratio(dq, MA.dq, MA.bdq, N, fq);
    r.A[2] = bound_ratio(dk, MA.dk, MA.bdk, N, fk);
    r.A[3] = bound_ratio(dv, MA.dv, MA.bdv, N, 0);
    r.A[4] = 0;
    if (ref_ssmax(kind))
        for (int h = 0; h < H; h++) {
            double fl = fmax(fmax(fabs(MA.ds[h]), 1e-2 * MA.dsabs[h]), 1e-20 * g * nq * nk);
            double tol = MA.bds[h] + 1e-4 * fl;
            r.A[4] = fmax(r.A[4], fabs(ds[h] - MA.ds[h]) / tol);
        }
    // (B): (A)'s bound (at the rounded operands) plus the operand-rounding part
    for (size_t i = 0; i < N; i++) { MB.Bout[i] += MA.bout[i]; MB.Bdv[i] += MA.bdv[i]; }
    r.B[0] = bound_ratio(out, MB.out, MB.Bout, N, 0);
    r.B[1] = bound_ratio(dv, MB.dv, MB.Bdv, N, 0);
    r.Bsize[0] = norm2(MB.Bout, N) / norm2(MB.out, N);
    r.Bsize[1] = norm2(MB.Bdv, N) / norm2(MB.dv, N);
    model_free(&MA);
    model_free(&MB);
    free(orig); free(rnd); free(st); free(x);
    return r;
}

// The model reference at the original operands is the spec's reference (attn_ref.h) in another
// form (raw dot products, the projection applied last): they agree to float64 rounding.
static void test_model_reference(void) {
    int B = 1, T = 70, H = 2, D = 16;
    size_t N = (size_t)B * T * H * D;
    float *x = malloc(4 * N * 4);
    double *g = malloc(4 * N * 8);
    for (int fam = 0; fam < IN_COUNT; fam++)
        for (int kind = 0; kind < NKINDS; kind++) {
            make_inputs(fam, 77 + fam, B, T, H, D, x, x + N, x + 2 * N, x + 3 * N, kind);
            double *in = to_double(x, 4 * N), sd[2] = {0.43, 0.63}, ds[2];
            ref_desc rd = {.kind = kind, .p = 15.0, .s = sd, .len_norm = fam % 2, .L = ATTN_REF_TRAIN_LEN};
            ref_forward(&rd, B, T, H, D, in, in + N, in + 2 * N, g);
            ref_backward(&rd, B, T, H, D, in, in + N, in + 2 * N, in + 3 * N, g + N, g + 2 * N, g + 3 * N, ds, NULL);
            model_res M;
            model_alloc(&M, N);
            model_ref(kind, fam % 2, ATTN_REF_TRAIN_LEN, 15.0, sd, B, T, H, D, in, in + N, in + 2 * N, in + 3 * N, in,
                      in + N, 1, &M);
            const double *mv[4] = {M.out, M.dq, M.dk, M.dv};
            for (int t = 0; t < 4; t++) {
                double e = 0, n = 0;
                for (size_t i = 0; i < N; i++) { e = fmax(e, fabs(mv[t][i] - g[t * N + i])); n = fmax(n, fabs(g[t * N + i])); }
                CHECK(e <= 1e-10 * n + 1e-300, "%s %s tensor %d: model reference differs by %.2e (max %.2e)",
                      input_name[fam], kind_name(kind), t, e, n);
            }
            if (ref_ssmax(kind))
                for (int h = 0; h < H; h++)
                    CHECK(fabs(M.ds[h] - ds[h]) <= 1e-10 * fmax(1, fabs(ds[h])), "ssmax ds[%d] %.12g vs %.12g", h, M.ds[h], ds[h]);
            model_free(&M);
            free(in);
        }
    free(x);
    free(g);
}

static double bf16_worstA[IN_COUNT][NKINDS], bf16_worstB[IN_COUNT][NKINDS], bf16_Bsize[IN_COUNT][NKINDS];

// Every kind and family, T in {1, 17, 64, 130, 300}, D in {16, 64}: (A) for out, dq, dk, dv, ds
// and (B) for out and dv, each measured error below its bound.
static void test_bf16(void) {
    static const int Ts[] = {1, 17, 64, 130, 300}, Ds[] = {16, 64};
    static const char *tn[] = {"out", "dq", "dk", "dv", "ds"};
    for (int fam = 0; fam < IN_COUNT; fam++)
        for (int kind = 0; kind < NKINDS; kind++)
            for (int ti = 0; ti < 5 && fused_ok(kind); ti++)
                for (int di = 0; di < 2; di++) {
                    int T = Ts[ti], D = Ds[di];
                    if (T == 300 && D == 64) continue;  // (time)
                    bf16_result r = bf16_case(kind, (ti + di) % 2, FLASH_BF16, 15.0f, 1.0f, 1.0f, fam, 3000 + fam * 100 + ti * 10 + di, 1,
                                              T, 2, D);
                    for (int t = 0; t < 5; t++) {
                        bf16_worstA[fam][kind] = fmax(bf16_worstA[fam][kind], r.A[t]);
                        CHECK(r.A[t] <= 1, "(A) %s %s T=%d D=%d: %s error %.2f x its bound", input_name[fam],
                              kind_name(kind), T, D, tn[t], r.A[t]);
                    }
                    for (int t = 0; t < 2; t++) {
                        bf16_worstB[fam][kind] = fmax(bf16_worstB[fam][kind], r.B[t]);
                        bf16_Bsize[fam][kind] = fmax(bf16_Bsize[fam][kind], r.Bsize[t]);
                        CHECK(r.B[t] <= 1, "(B) %s %s T=%d D=%d: %s error %.2f x its bound", input_name[fam],
                              kind_name(kind), T, D, t ? "dv" : "out", r.B[t]);
                    }
                }
    for (int fam = 0; fam < IN_COUNT; fam++) {
        printf("  BF16 %-13s error / bound (A) | (B) | (B) bound / |ref|:", input_name[fam]);
        for (int kind = 0; kind < NKINDS; kind++)
            printf(" %s %.2f|%.2f|%.1e", kind_name(kind), bf16_worstA[fam][kind], bf16_worstB[fam][kind],
                   bf16_Bsize[fam][kind]);
        printf("\n");
    }
}

// The bounds are not vacuous: results of a wrong computation fail them. (A): every re-weighting
// kind with p = 14 instead of 15; every ssmax-score kind with s_h 1% off (25% with the
// re-weighting; out or ds); lssar from unrounded operands (FP32 mode: p
// amplifies the operand rounding far beyond the P rounding that (A) allows; for the other kinds
// the two are of the same size, so that is no control there). (B), a worst-case bound (about
// 0.3 |ref| on random inputs), resolves gross mistakes: an off-by-one key index (each key with
// the previous key's value), every kind; softmax / ssmax / sigmoid / relu logits twice too large
// (a wrong scale).
static void test_bf16_controls(void) {
    bf16_result r;
    for (int kind = 0; kind < NKINDS; kind++) {  // the stage-specific controls: every kind with the stage
        if (!fused_ok(kind)) continue;
        if (ref_stages(kind).reweight) {
            r = bf16_case(kind, 0, FLASH_BF16, 14.0f, 1.0f, 1.0f, IN_RANDOM, 12, 1, 64, 2, 32);
            CHECK(r.A[0] > 1 && r.A[1] > 1, "%s p = 14 passes (A) (out %.2f, dq %.2f)", kind_name(kind), r.A[0],
                  r.A[1]);
        }
        // (re-weighting: its rows are nearly one-hot, so out and ds hardly move with s_h; 25% off)
        if (ref_ssmax(kind)) {
            float f = ref_stages(kind).reweight ? 1.25f : 1.01f;
            r = bf16_case(kind, 0, FLASH_BF16, 15.0f, f, 1.0f, IN_RANDOM, 13, 1, 64, 2, 32);
            CHECK(r.A[0] > 1 || r.A[4] > 1, "%s s_h x %g passes (A) (out %.2f, ds %.2f)", kind_name(kind), f,
                  r.A[0], r.A[4]);
        }
    }
    r = bf16_case(LSSAR_ATTN_LSSAR, 0, FLASH_FP32, 15.0f, 1.0f, 1.0f, IN_RANDOM, 11, 1, 64, 2, 32);
    CHECK(r.A[0] > 1, "lssar from unrounded operands passes (A) (out %.2f)", r.A[0]);
    for (int kind = 0; kind < NKINDS; kind++) {
        if (!fused_ok(kind)) continue;
        r = bf16_case(kind, kind % 2, FLASH_BF16, 15.0f, 1.0f, -1.0f, IN_RANDOM, 14, 1, 64, 2, 32);
        CHECK(r.B[0] > 1 && r.A[0] > 1, "%s with an off-by-one key index passes (B) (out %.2f; (A) %.2f)",
              kind_name(kind), r.B[0], r.A[0]);
        // (score cos: q x 2 leaves the logits as they are; re-weighting: (B) is vacuous where p amplifies)
        if (ref_cos(kind) || ref_stages(kind).reweight) continue;
        r = bf16_case(kind, kind % 2, FLASH_BF16, 15.0f, 1.0f, 2.0f, IN_RANDOM, 15, 1, 64, 2, 32);
        CHECK(r.B[0] > 1, "%s with logits x 2 passes (B) (out %.2f)", kind_name(kind), r.B[0]);
    }
}

// ------------------------------------------------------------------ threads

// Results do not depend on the thread count (each CTA owns its outputs; ds sums in index order).
static void test_thread_determinism(void) {
    int B = 2, T = 150, H = 3, D = 32;
    size_t N = (size_t)B * T * H * D;
    float *x = malloc(12 * N * 4);
    float *q = x, *k = q + N, *v = k + N, *dy = v + N;
    lssar_rng r;
    lssar_rng_seed(&r, 7);
    for (size_t i = 0; i < 4 * N; i++) x[i] = (float)lssar_rng_normal(&r);
    float s[3] = {0.4f, 0.5f, 0.6f};
    int saved = omp_get_max_threads();
    for (int kind = 0; kind < NKINDS; kind++)
        for (int mode = 0; mode < 2 && fused_ok(kind); mode++) {
            lssar_attn_desc a = {.kind = kind, .p = 15.0f, .ssmax_s = s, .train_len = ATTN_REF_TRAIN_LEN};
            float ds[2][3];
            float *res[2];
            for (int nt = 1; nt <= 2; nt++) {
                float *o = x + (4 + 4 * (nt - 1)) * N;
                res[nt - 1] = o;
                omp_set_num_threads(nt);
                CHECK(flash_emu_forward(&a, mode, B, T, T, T, H, D, q, k, v, o, NULL) == 0, "forward");
                CHECK(flash_emu_backward(&a, mode, B, T, H, D, q, k, v, NULL, NULL, dy, o + N, o + 2 * N, o + 3 * N,
                                         ds[nt - 1]) == 0, "backward");
            }
            CHECK(memcmp(res[0], res[1], 4 * N * 4) == 0, "%s mode %d: 1 and 2 threads differ", kind_name(kind), mode);
            if (ref_ssmax(kind)) CHECK(memcmp(ds[0], ds[1], sizeof ds[0]) == 0, "ssmax ds differs");
        }
    omp_set_num_threads(saved);
    free(x);
}

static void test_invalid_arguments(void) {
    float buf[64] = {0};
    lssar_attn_desc ok = {.kind = LSSAR_ATTN_LSSAR, .p = 15.0f}, bad = ok;
    CHECK(flash_emu_forward(&ok, FLASH_FP32, 1, 2, 2, 2, 2, 4, buf, buf, buf, buf, NULL) == 0, "valid call failed");
    CHECK(flash_emu_forward(NULL, FLASH_FP32, 1, 2, 2, 2, 2, 4, buf, buf, buf, buf, NULL) == LSSAR_E_NULL, "NULL desc");
    CHECK(flash_emu_forward(&ok, FLASH_FP32, 1, 3, 2, 2, 2, 4, buf, buf, buf, buf, NULL) == LSSAR_E_SIZE, "Tq > Tk");
    CHECK(flash_emu_forward(&ok, FLASH_FP32, 1, 2, 2, 1, 2, 4, buf, buf, buf, buf, NULL) == LSSAR_E_SIZE, "stride < Tk");
    CHECK(flash_emu_backward(&ok, FLASH_FP32, 1, 2, 2, 4, buf, buf, buf, buf, NULL, buf, buf, buf, buf, NULL) ==
          LSSAR_E_NULL, "out without stats");
    bad.p = 0.0f;
    CHECK(flash_emu_forward(&bad, FLASH_FP32, 1, 2, 2, 2, 2, 4, buf, buf, buf, buf, NULL) == LSSAR_E_P, "p = 0");
    bad = ok;
    bad.kind = LSSAR_ATTN_SSMAX;
    CHECK(flash_emu_backward(&bad, FLASH_FP32, 1, 2, 2, 4, buf, buf, buf, NULL, NULL, buf, buf, buf, buf, NULL) ==
          LSSAR_E_SSMAX, "ssmax without s");
    // sigmoid / relu: a valid call runs; a bad length normalisation is refused, saying what is wrong
    for (int kind = LSSAR_ATTN_SIGMOID; kind <= LSSAR_ATTN_RELU; kind++) {
        lssar_attn_desc u = {.kind = kind, .train_len = 8};
        CHECK(flash_emu_forward(&u, FLASH_FP32, 1, 2, 2, 2, 2, 4, buf, buf, buf, buf, NULL) == 0, "%s: %s",
              kind_name(kind), lssar_errmsg());
        u.train_len = 0;
        CHECK(flash_emu_forward(&u, FLASH_FP32, 1, 2, 2, 2, 2, 4, buf, buf, buf, buf, NULL) == LSSAR_E_ARG &&
              strstr(lssar_errmsg(), "train_len >= 1"), "%s train_len 0: %s", kind_name(kind), lssar_errmsg());
        u.len_norm = LSSAR_LEN_NORM_ROW;  // row needs no L
        CHECK(flash_emu_forward(&u, FLASH_FP32, 1, 2, 2, 2, 2, 4, buf, buf, buf, buf, NULL) == 0, "%s row: %s",
              kind_name(kind), lssar_errmsg());
        u.len_norm = (lssar_len_norm)2;
        CHECK(flash_emu_forward(&u, FLASH_FP32, 1, 2, 2, 2, 2, 4, buf, buf, buf, buf, NULL) == LSSAR_E_ARG &&
              strstr(lssar_errmsg(), "len_norm = 2"), "%s len_norm 2: %s", kind_name(kind), lssar_errmsg());
    }
    bad = ok;
    bad.kind = LSSAR_ATTN_NKINDS;
    CHECK(flash_emu_forward(&bad, FLASH_FP32, 1, 2, 2, 2, 2, 4, buf, buf, buf, buf, NULL) == LSSAR_E_KIND, "kind %d",
          LSSAR_ATTN_NKINDS);
    // every re-weighting kind checks p, every ssmax-score kind its scales
    for (int kind = 0; kind < NKINDS; kind++) {
        lssar_attn_desc d = {.kind = kind, .p = 0.0f, .train_len = 8};
        int rc = flash_emu_forward(&d, FLASH_FP32, 1, 2, 2, 2, 2, 4, buf, buf, buf, buf, NULL);
        int want = ref_stages(kind).reweight ? LSSAR_E_P : ref_ssmax(kind) ? LSSAR_E_SSMAX : 0;
        CHECK(rc == want, "%s with p = 0, no ssmax_s: %d, expected %d (%s)", kind_name(kind), rc, want, lssar_errmsg());
    }
}

// Every kind the fused path does not support (flash_fused_supported) is refused by the forward,
// the backward and the statistics size with LSSAR_E_UNSUPPORTED and a message that names it (so
// the grids' skip cannot hide a wrong answer); the presets are supported.
static void test_refused(void) {
    float buf[64] = {0}, s[2] = {0.4f, 0.5f};
    int nref = 0;
    for (int kind = 0; kind < NKINDS; kind++) {
        if (kind <= LSSAR_ATTN_RELU) CHECK(fused_ok(kind), "preset %s is refused", kind_name(kind));
        if (fused_ok(kind)) continue;
        nref++;
        lssar_attn_desc a = {.kind = kind, .p = 15.0f, .ssmax_s = s, .train_len = 8};
        int rc = flash_emu_forward(&a, FLASH_FP32, 1, 2, 2, 2, 2, 4, buf, buf, buf, buf, NULL);
        CHECK(rc == LSSAR_E_UNSUPPORTED && strstr(lssar_errmsg(), kind_name(kind)) &&
              strstr(lssar_errmsg(), "issue 34"), "%s: forward %d (%s)", kind_name(kind), rc,
              lssar_errmsg());
        rc = flash_emu_backward(&a, FLASH_FP32, 1, 2, 2, 4, buf, buf, buf, NULL, NULL, buf, buf, buf, buf,
                                buf);
        CHECK(rc == LSSAR_E_UNSUPPORTED, "%s: backward %d (%s)", kind_name(kind), rc, lssar_errmsg());
        CHECK(flash_emu_stats_floats(&a, 1, 2, 2, 4) == 0, "%s: a statistics size", kind_name(kind));
    }
    printf("  %d kinds refused by the fused path\n", nref);
}

/* flash_ex2's host model (flash.h) against 2^t in double: within half an ulp (relative 2^-24, the
   rounding of a correctly rounded result) plus the polynomial's 1e-14, on a sweep of t over the
   whole range; the unit's special values (+0 for -inf and below FLT_MIN, +inf, NaN). The bounds
   of the error-bound steps in flash.h take the model and the unit each within 2^-22. */
static void test_ex2_model(void) {
    double worst = 0;
    for (int k = 0; k <= 2600000; k++) {
        float t = -130.0f + (float)k * 1e-4f;
        double ref = exp2((double)t);
        float y = flash_ex2(t);
        if (ref < FLT_MIN) {
            CHECK(y == 0.0f, "flash_ex2(%.9g) = %.9g: not flushed to +0", t, y);
            continue;
        }
        if (ref > FLT_MAX) {
            CHECK(isinf(y) && y > 0, "flash_ex2(%.9g) = %.9g: not +inf", t, y);
            continue;
        }
        double rel = fabs((double)y - ref) / ref;
        worst = fmax(worst, rel);
        CHECK(rel <= ldexp(1.0, -24) + 1e-13, "flash_ex2(%.9g) = %.9g vs %.17g: relative error %.3g", t, y, ref, rel);
    }
    CHECK(flash_ex2(-INFINITY) == 0.0f && !signbit(flash_ex2(-INFINITY)), "flash_ex2(-inf) is not +0");
    CHECK(isinf(flash_ex2(INFINITY)) && flash_ex2(INFINITY) > 0, "flash_ex2(+inf) is not +inf");
    CHECK(isnan(flash_ex2(NAN)), "flash_ex2(NaN) is not NaN");
    CHECK(flash_ex2(0.0f) == 1.0f && flash_ex2(-126.0f) == FLT_MIN && flash_ex2(-126.5f) == 0.0f,
          "flash_ex2 at 0, -126, -126.5: %.9g %.9g %.9g", flash_ex2(0.0f), flash_ex2(-126.0f), flash_ex2(-126.5f));
    CHECK(fabs(flash_exp(-1.0f) - exp(-1.0)) <= 4e-7 * exp(-1.0), "flash_exp(-1) = %.9g", flash_exp(-1.0f));
    printf("  flash_ex2 model: worst relative error %.3g (2^-24 = %.3g)\n", worst, ldexp(1.0, -24));
}

// flash_rcp's host model (rcp.approx.ftz.f32): within half an ulp of 1 / x (the hardware is
// within one, flash.h), over every exponent of the normal range at a stride through the
// significands; the flushes of .ftz (a subnormal x is 0 of its sign, a subnormal result 0) and the
// special values.
static void test_rcp_model(void) {
    double worst = 0;
    for (uint32_t b = 0x00800000u; b < 0x7f800000u; b += 4099u) {
        float x;
        memcpy(&x, &b, 4);
        for (int sgn = 0; sgn < 2; sgn++, x = -x) {
            double ref = 1.0 / (double)x;
            float r = flash_rcp(x);
            if (fabs(ref) < FLT_MIN) {
                CHECK(r == 0.0f && signbit(r) == signbit(x), "flash_rcp(%.9g) = %.9g: not flushed to 0", x, r);
                continue;
            }
            double rel = fabs((double)r - ref) / fabs(ref);
            worst = fmax(worst, rel);
            CHECK(rel <= ldexp(1.0, -24), "flash_rcp(%.9g) = %.9g vs %.17g: relative error %.3g", x, r, ref, rel);
        }
    }
    const float sub = 1e-40f;  // subnormal: read as 0
    CHECK(isinf(flash_rcp(sub)) && flash_rcp(sub) > 0 && isinf(flash_rcp(-sub)) && flash_rcp(-sub) < 0,
          "flash_rcp of +-subnormal: %.9g %.9g", flash_rcp(sub), flash_rcp(-sub));
    CHECK(isinf(flash_rcp(0.0f)) && flash_rcp(0.0f) > 0 && isinf(flash_rcp(-0.0f)) && flash_rcp(-0.0f) < 0,
          "flash_rcp of +-0");
    CHECK(flash_rcp(INFINITY) == 0.0f && !signbit(flash_rcp(INFINITY)) && signbit(flash_rcp(-INFINITY)),
          "flash_rcp of +-inf");
    CHECK(isnan(flash_rcp(NAN)), "flash_rcp(NaN) is not NaN");
    CHECK(flash_rcp(FLT_MIN) == 1.0f / FLT_MIN && flash_rcp(0x1p126f) == 0x1p-126f && flash_rcp(0x1.8p126f) == 0.0f,
          "flash_rcp at FLT_MIN, 2^126, 1.5 2^126");
    printf("  flash_rcp model: worst relative error %.3g (2^-24 = %.3g)\n", worst, ldexp(1.0, -24));
}

int main(void) {
    double t0 = lssar_now();
    RUN(test_ex2_model);
    RUN(test_rcp_model);
    RUN(test_invalid_arguments);
    RUN(test_refused);
    RUN(test_reference_fast);
    RUN(test_fp32_random);
    RUN(test_fp32_adversarial);
    RUN(test_fp32_powers);
    RUN(test_fp32_temp_d);
    RUN(test_nonfinite);
    RUN(test_fp32_long);
    print_worst();
    RUN(test_fp32_len_norm_control);
    RUN(test_cached);
    RUN(test_model_reference);
    RUN(test_bf16);
    RUN(test_bf16_controls);
    RUN(test_finite_differences);
    RUN(test_thread_determinism);
    RUN(test_long_rows);
    RUN(test_long_rows_unnormed);
    printf("  total %.1f s\n", lssar_now() - t0);
    return test_summary("test_flash");
}
