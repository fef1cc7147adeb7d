/*
 * test_attention.c - the CPU attention kernels against a float64 reference written straight from
 * docs/attention.md, central finite differences, long rows, bad arguments and thread counts.
 *
 * Error measure (whole tensors): rel = ||got - ref||_2 / ||ref||_2; when ||ref|| is exactly 0
 * (e.g. dq at T = 1) the check is ||got||_2 <= 1e-6 * sqrt(N) instead.
 * One exception: some inputs make dq (or dk) vanish in real arithmetic although every term that
 * sums to it does not (identical keys: c_ij does not depend on q_i, so dq = 0 up to rounding, while
 * p = 15 makes the terms large). There float32 leaves rounding noise relative to those terms, and
 * a relative error against ~0 measures nothing. So dq's denominator is at least 1e-2 of its
 * partner's size, ||dk|| * rms(k) / rms(q) (S = q . k is symmetric in q and k), and vice versa.
 * The ssmax gradient ds has its own rounding bound (ds_error_bound), used where ds is exactly 0.
 *
 * sigmoid and relu (no row normalisation) run through every grid with the same 1e-4 criterion,
 * with len_norm train (L = ATTN_REF_TRAIN_LEN = 64, below most T: rows past the training length
 * are covered) and, in the random grid, the odd shapes and the finite differences, len_norm row.
 *
 * CPUs: the kernels run in the clone the CPU selects (core/dispatch.h): AVX-512, AVX2 + FMA, or
 * the x86-64-v2 baseline without FMA. `bench/dispatch.sh --test` builds and runs this test with
 * each clone's code compiled alone (-march=x86-64-v2 / x86-64-v3 / native, -DLSSAR_NATIVE), so
 * one AVX-512 machine checks all three.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>
#include "lssar.h"
#include "core/util.h"
#include "core/fastmath.h"
#include "harness.h"
#include "attn_ref.h"

// The CPU kernels, run for compare_impl (attn_ref.h).
static int cpu_impl(const lssar_attn_desc *a, int B, int T, int H, int D, const float *q, const float *k,
                    const float *v, const float *dy, float *out, float *dq, float *dk, float *dv, float *ds) {
    int rc = lssar_attn_forward(a, B, T, H, D, q, k, v, out);
    return rc ? rc : lssar_attn_backward(a, B, T, H, D, q, k, v, dy, dq, dk, dv, ds);
}

// The kernels against the reference on one configuration: the relative errors. ds: the spec's
// 1e-4 relative bound, as for the tensors. ds_h sums signed terms over every (b, i, j) and
// cancels, so this is the check most exposed to float32 (measured: up to 5e-5 with three
// OpenBLAS sgemm kernels, OPENBLAS_CORETYPE=SkylakeX/Haswell/Sandybridge). The rigorous rounding
// bound (ds_error_bound, used by the FD test where ds is exactly 0) is no usable floor here: it
// reaches 30% of |ds| on the large inputs.
static errs compare_case(int kind, float p, int family, uint64_t seed, int B, int T, int H, int D) {
    return compare_impl(cpu_impl, 0, kind, p, family, seed, B, T, H, D);
}
static errs compare_case_ln(int kind, int len_norm, int family, uint64_t seed, int B, int T, int H, int D) {
    return compare_impl_ln(cpu_impl, 0, kind, 15.0f, family, seed, B, T, H, D, len_norm, ATTN_REF_TRAIN_LEN);
}

#define N_KINDS LSSAR_ATTN_NKINDS  // every lssar_attn_kind: every valid combination of stages
// sigmoid / relu are tested with both length normalisations; the other kinds ignore the setting.
static int n_len_norms(int kind) { return ref_unnormed(kind) ? 2 : 1; }

// One line per kind of the worst errors a grid saw (maxe[kind][len_norm]).
static void print_worst(const char *what, double maxe[N_KINDS][2]) {
    printf("  %s, worst relative error:", what);
    for (int k = 0; k < N_KINDS; k++) {
        printf(" %s %.1e", kind_name(k), maxe[k][0]);
        if (n_len_norms(k) > 1) printf(" (row %.1e)", maxe[k][1]);
    }
    printf("\n");
}


// ------------------------------------------------------------------ tests

// The vectorisable float32 math of core/fastmath.h against libm in double, over the ranges attention
// uses: relative error within a few float32 ulp (pow: scaled by |p log r|, the size of its argument).
static void test_math_functions(void) {
    double e_exp = 0, e_l1p = 0, e_sp = 0, e_sig = 0, e_sigg = 0, e_log = 0, e_pow = 0, e_powi = 0;
    for (int i = 0; i <= 200000; i++) {
        double t = i / 200000.0;
        float x = (float)(-87.0 + 175.0 * t);  // exp: [-87, 88]
        e_exp = fmax(e_exp, fabs(fm_exp(x) - exp((double)x)) / exp((double)x));
        float y = (float)pow(10.0, -30.0 + 30.0 * t);  // log1p: [1e-30, 1]
        e_l1p = fmax(e_l1p, fabs(fm_log1p01(y) - log1p((double)y)) / log1p((double)y));
        float z = (float)(-50.0 + 100.0 * t);  // softplus, sigmoid: [-50, 50]
        double sp = fmax(z, 0.0) + log1p(exp(-fabs((double)z))), sg = 1.0 / (1.0 + exp(-(double)z));
        e_sp = fmax(e_sp, fabs(fm_softplus(z) - sp) / sp);
        e_sig = fmax(e_sig, fabs(fm_sigmoid(z) - sg) / sg);
        double sgg = sg * (1.0 / (1.0 + exp((double)z)));  // sigmoid(z) sigmoid(-z)
        e_sigg = fmax(e_sigg, fabs(fm_sigmoid_grad(z) - sgg) / sgg);
        float r = (float)pow(10.0, -37.0 + 37.0 * t);  // log, pow: [1e-37, 1]
        e_log = fmax(e_log, fabs(fm_log(r) - log((double)r)) / fmax(1.0, fabs(log((double)r))));
        static const float ps[] = {0.5f, 2.5f, 15.0f};
        for (int k = 0; k < 3; k++) {
            double want = pow((double)r, (double)ps[k]);
            if (want < 1e-37) continue;
            e_pow = fmax(e_pow, fabs(fm_pow01(r, ps[k]) - want) / want / (1.0 + fabs(ps[k] * log((double)r))));
        }
        for (int ip = 1; ip < 64; ip += 7) {
            double want = pow((double)r, ip);
            if (want < 1e-30) continue;
            float got = ip < 16 ? fm_powi4(r, ip) : fm_powi6(r, ip);
            e_powi = fmax(e_powi, fabs(got - want) / want / ip);
        }
    }
    printf("  math: max rel err exp %.1e log1p %.1e softplus %.1e sigmoid %.1e sigmoid' %.1e log %.1e pow %.1e powi %.1e\n",
           e_exp, e_l1p, e_sp, e_sig, e_sigg, e_log, e_pow, e_powi);
    CHECK(e_exp < 4e-7, "exp rel err %.2e", e_exp);
    CHECK(e_l1p < 4e-7, "log1p rel err %.2e", e_l1p);
    CHECK(e_sp < 4e-7, "softplus rel err %.2e", e_sp);
    CHECK(e_sig < 4e-7, "sigmoid rel err %.2e", e_sig);
    // e (1 + e)^-2: exp's 2 ulp, a division and two products: a few ulp more than sigmoid
    CHECK(e_sigg < 6e-7, "sigmoid' rel err %.2e", e_sigg);
    CHECK(e_log < 4e-7, "log err %.2e", e_log);
    CHECK(e_pow < 4e-7, "pow rel err / (1 + |p log r|) %.2e", e_pow);
    CHECK(e_powi < 4e-7, "powi rel err / p %.2e", e_powi);
    CHECK(fm_exp(-100.0f) == 0.0f && fm_exp(-87.5f) == 0.0f, "exp does not flush to 0 below -87.3");
    CHECK(isfinite(fm_exp(1000.0f)), "exp overflows");
}

// Every kind, T in {1,2,3,4,17,64,300}, D in {16,32,64,128}, random inputs, several B/H.
static void test_matches_reference_random(void) {
    static const int Ts[] = {1, 2, 3, 4, 17, 64, 300}, Ds[] = {16, 32, 64, 128};
    double maxe[N_KINDS][2] = {{0}};
    for (int kind = 0; kind < N_KINDS; kind++)
        for (int ln = 0; ln < n_len_norms(kind); ln++)
            for (int ti = 0; ti < 7; ti++)
                for (int di = 0; di < 4; di++) {
                    int T = Ts[ti], D = Ds[di];
                    int B = 1 + (ti + di) % 2, H = 1 + (ti + 2 * di + kind) % 3;
                    if (T == 300 && D >= 64) B = 1;
                    errs e = compare_case_ln(kind, ln, IN_RANDOM, 100 + ti * 10 + di, B, T, H, D);
                    double w = worst(e);
                    maxe[kind][ln] = fmax(maxe[kind][ln], w);
                    CHECK(w < 1e-4, "%s (len-norm %s) T=%d D=%d B=%d H=%d: rel err out %.2e dq %.2e dk %.2e dv %.2e ds %.2e",
                          kind_name(kind), len_norm_name[ln], T, D, B, H, e.out, e.dq, e.dk, e.dv, e.ds);
                }
    print_worst("random inputs", maxe);
}

// Adversarial inputs: peaked rows, zero vectors, repeated keys, large magnitudes.
static void test_matches_reference_adversarial(void) {
    static const int Ts[] = {1, 4, 17, 64, 300}, Ds[] = {16, 64, 128};
    for (int fam = IN_PEAKED; fam < IN_COUNT; fam++) {  // (T = 300 only with D = 16: time)
        double maxe[N_KINDS][2] = {{0}};
        for (int kind = 0; kind < N_KINDS; kind++)
            for (int ti = 0; ti < 5; ti++)
                for (int di = 0; di < 3; di++) {
                    int T = Ts[ti], D = Ds[di], B = 1, H = 2;
                    if (T == 300 && D != 16) continue;
                    errs e = compare_case(kind, 15.0f, fam, 1000 + fam * 100 + ti * 10 + di, B, T, H, D);
                    double w = worst(e);
                    maxe[kind][0] = fmax(maxe[kind][0], w);
                    CHECK(w < 1e-4, "%s %s T=%d D=%d: rel err out %.2e dq %.2e dk %.2e dv %.2e ds %.2e",
                          input_name[fam], kind_name(kind), T, D, e.out, e.dq, e.dk, e.dv, e.ds);
                }
        print_worst(input_name[fam], maxe);
    }
    // Long uniform rows at a small D: lambda = ln 16 ln 1024 = 19, so the repeated keys' logits
    // reach -19, where sigmoid(x) = 6e-9 must not be computed as 1 - exp(-softplus(x)) (which
    // leaves ~6e-8 of rounding on it; such rows are uniform, so sigmoid / Z ~ 1 / n is not small:
    // that shortcut gave 1.5e-4 on dk, found by the GPU emulation's test, tests/test_flash.c).
    for (int kind = 0; kind < N_KINDS; kind++) {
        if (!ref_cos(kind)) continue;
        errs e = compare_case(kind, 15.0f, IN_REPEATED, 4242 + kind, 1, 1024, 2, 16);
        CHECK(worst(e) < 1e-4, "repeated-keys %s T=1024 D=16: rel err out %.2e dq %.2e dk %.2e dv %.2e",
              kind_name(kind), e.out, e.dq, e.dk, e.dv);
    }
}

// Shapes off the usual grid: odd head dims and lengths at and around the 64-row block boundary.
// Not D = 1 for the kinds that re-weight a dot or ssmax score: there a query near 0 gives a row
// whose logits span ~|q| |k|, and u = n alpha - 1 loses eps / span of relative accuracy to
// cancellation, amplified p-fold; with D >= 16 such queries are rare (and the cos score has
// |c| = 1 at D = 1).
static void test_odd_shapes(void) {
    static const int Ts[] = {63, 65, 128, 129}, Ds[] = {1, 3, 24};
    for (int kind = 0; kind < N_KINDS; kind++)
        for (int ti = 0; ti < 4; ti++)
            for (int di = 0; di < 3; di++) {
                int T = Ts[ti], D = Ds[di], B = 1 + ti % 2, H = 1 + di % 2;
                if (D == 1 && ref_stages(kind).reweight && !ref_cos(kind)) continue;
                // sigmoid / relu: len-norm train and row alternately
                errs e = compare_case_ln(kind, (ti + di) % n_len_norms(kind), IN_RANDOM, 7000 + ti * 10 + di, B, T, H, D);
                CHECK(worst(e) < 1e-4, "%s T=%d D=%d B=%d H=%d: rel err out %.2e dq %.2e dk %.2e dv %.2e ds %.2e",
                      kind_name(kind), T, D, B, H, e.out, e.dq, e.dk, e.dv, e.ds);
            }
}

// The re-weighting with other powers p, for every kind that re-weights. p = 1 only on random
// inputs: max(u, 0)^p has a kink at u = 0 for p <= 1 (the derivative jumps from 0 to
// p u^(p-1) / sum b), so on a row where some u lies within float32 rounding of 0 (peaked and
// repeated rows have many) float32 and float64 may take different sides. (p < 1 is accepted but ill-conditioned: db/du = p u^(p-1) is
// unbounded near u = 0, so float32 cannot match float64 there; the finite-difference test covers
// p = 0.5 on the reference only.)
static void test_lssar_powers(void) {
    static const float ps[] = {1.0f, 3.0f, 15.0f, 31.0f};
    for (int kind = 0; kind < N_KINDS; kind++)
        for (int pi = 0; pi < 4 && ref_stages(kind).reweight; pi++)
            for (int fam = IN_RANDOM; fam <= (ps[pi] > 1 ? IN_REPEATED : IN_RANDOM); fam++) {
                errs e = compare_case(kind, ps[pi], fam, 5000 + pi * 10 + fam, 2, 70, 2, 32);
                double w = worst(e);
                CHECK(w < attn_ref_tol(ps[pi]), "%s p=%g %s: rel err out %.2e dq %.2e dk %.2e dv %.2e ds %.2e", kind_name(kind), ps[pi],
                      input_name[fam], e.out, e.dq, e.dk, e.dv, e.ds);
            }
}

// lssa / lssar with another head size's temperature (temp_d; attn_ref.h check_temp_d), and its
// refusals.
static void test_temp_d(void) {
    check_temp_d(cpu_impl, 0, 70, 6000);
    // refused: 1 (ln 1 = 0) and negative values
    float q[8] = {0}, o[8];
    lssar_attn_desc bad = {.kind = LSSAR_ATTN_LSSA, .temp_d = 1};
    CHECK(lssar_attn_forward(&bad, 1, 2, 1, 4, q, q, q, o) == LSSAR_E_ARG && strstr(lssar_errmsg(), "temp_d"),
          "temp_d 1: %s", lssar_errmsg());
    bad.temp_d = -3;
    CHECK(lssar_attn_forward(&bad, 1, 2, 1, 4, q, q, q, o) == LSSAR_E_ARG, "temp_d -3 accepted");
}
// The re-weighting leaves the first three rows uninhibited (offset o = 0: u = n alpha): with p = 1
// that makes beta = alpha there, so rows 0..2 of every kind that re-weights equal those of the same
// stages without it, and the later rows (o = 1) do not.
static void test_reweight_first_rows(void) {
    enum { B = 1, T = 12, H = 2, D = 16 };
    size_t N = (size_t)B * T * H * D;
    float q[N], k[N], v[N], dy[N], y1[N], y0[N], s[H] = {0.43f, 0.63f};
    make_inputs(IN_RANDOM, 31, B, T, H, D, q, k, v, dy, LSSAR_ATTN_SOFTMAX);
    for (int kind = 0; kind < N_KINDS; kind++) {
        lssar_attn_stages st = ref_stages(kind), off = st;
        if (!st.reweight) continue;
        off.reweight = 0;
        lssar_attn_kind twin;
        CHECK_OK(lssar_attn_from_stages(&off, &twin));
        lssar_attn_desc a = {.kind = kind, .p = 1.0f, .ssmax_s = s}, a0 = a;
        a0.kind = twin;
        CHECK_OK(lssar_attn_forward(&a, B, T, H, D, q, k, v, y1));
        CHECK_OK(lssar_attn_forward(&a0, B, T, H, D, q, k, v, y0));
        double early = 0, late = 0;
        for (int t = 0; t < T; t++)
            for (int c = 0; c < H * D; c++) {
                double e = fabs(y1[t * H * D + c] - y0[t * H * D + c]) / (fabs(y0[t * H * D + c]) + 1e-3);
                if (t < 3) early = fmax(early, e);
                else late = fmax(late, e);
            }
        CHECK(early < 1e-5, "%s p = 1: rows 0..2 differ from %s by %.2e", kind_name(kind), kind_name(twin), early);
        CHECK(late > 1e-2, "%s p = 1: rows 3.. equal %s (%.2e): the offset is not 1 there", kind_name(kind),
              kind_name(twin), late);
    }
}

// NaN and inf in q, k, v for every kind (attn_ref.h): no out-of-range read, NaN rows, others untouched.
static void test_nonfinite(void) { check_nonfinite(cpu_impl); }

// Central finite differences of the float64 reference: the reference backward is right, and the
// float32 kernel's gradient matches them too. Loss = sum(dy * out).

static double fd_worst_ref, fd_worst_kern;  // worst |grad - FD| / max |grad| seen
static double fd_worst_ds;                  // worst |ds - FD| / its tolerance
static double fd_worst_ref_k[2][2], fd_worst_kern_k[2][2];  // the same for sigmoid / relu x len-norm

// len_norm: sigmoid / relu, with L = FD_TRAIN_LEN (below T: rows past L are covered).
#define FD_TRAIN_LEN 5
static void fd_case_x(int kind, float p, int family, int B, int T, int H, int D, int len_norm, int temp_d) {
    size_t N = (size_t)B * T * H * D;
    float *q = malloc(N * 4), *k = malloc(N * 4), *v = malloc(N * 4), *dy = malloc(N * 4);
    float *dq = malloc(N * 4), *dk = malloc(N * 4), *dv = malloc(N * 4);
    make_inputs(family, 77 + kind * 7 + family, B, T, H, D, q, k, v, dy, kind);
    float s[4] = {0.43f, 0.9f, 0.6f, 0.3f}, ds[4];
    double sd[4] = {0.43, 0.9, 0.6, 0.3}, dsr[4], dserr[4];
    lssar_attn_desc a = {.kind = kind, .p = p, .ssmax_s = s, .len_norm = (lssar_len_norm)len_norm,
                         .train_len = FD_TRAIN_LEN, .temp_d = temp_d};
    ref_desc rd = {.kind = kind, .p = p, .s = sd, .len_norm = len_norm, .L = FD_TRAIN_LEN, .temp_d = temp_d};
    CHECK(lssar_attn_backward(&a, B, T, H, D, q, k, v, dy, dq, dk, dv, ds) == 0, "backward failed");
    double *qd = to_double(q, N), *kd = to_double(k, N), *vd = to_double(v, N), *dyd = to_double(dy, N);
    double *rdq = malloc(N * 8), *rdk = malloc(N * 8), *rdv = malloc(N * 8), *tmp = malloc(N * 8);
    ref_backward(&rd, B, T, H, D, qd, kd, vd, dyd, rdq, rdk, rdv, dsr, dserr);
    double *xs[3] = {qd, kd, vd}, *rg[3] = {rdq, rdk, rdv};
    float *kg[3] = {dq, dk, dv};
    const char *nm[3] = {"q", "k", "v"};
    lssar_rng r;
    lssar_rng_seed(&r, 99 + kind);
    double eps = 1e-6, worst_ref = 0, worst_kern = 0, gmax = 0;
    for (int t = 0; t < 3; t++)
        for (size_t i = 0; i < N; i++) gmax = fmax(gmax, fabs(rg[t][i]));
    for (int t = 0; t < 3; t++) {
        for (int trial = 0; trial < 24; trial++) {
            size_t i = lssar_rng_below(&r, N);
            // Head 0 of the repeated-keys input has uniform rows (the lssar fallback): moving one key
            // leaves the fallback branch, so the loss is not differentiable there in k.
            if (family == IN_REPEATED && t == 1 && (i / D) % H == 0) continue;
            double x0 = xs[t][i];
            double h = eps * fmax(1.0, fabs(x0));
            xs[t][i] = x0 + h;
            double lp = ref_loss(&rd, B, T, H, D, qd, kd, vd, dyd, tmp);
            xs[t][i] = x0 - h;
            double lm = ref_loss(&rd, B, T, H, D, qd, kd, vd, dyd, tmp);
            xs[t][i] = x0;
            double fd = (lp - lm) / (2 * h);
            double scale = fmax(gmax, 1e-3);
            double er = fabs(rg[t][i] - fd) / scale, ek = fabs(kg[t][i] - fd) / scale;
            worst_ref = fmax(worst_ref, er);
            worst_kern = fmax(worst_kern, ek);
            CHECK(er < 1e-5, "%s (len-norm %s) %s d%s[%zu]: reference %.9g vs FD %.9g", kind_name(kind),
                  len_norm_name[len_norm], input_name[family], nm[t], i, rg[t][i], fd);
            CHECK(ek < 1e-4, "%s (len-norm %s) %s d%s[%zu]: kernel %.9g vs FD %.9g", kind_name(kind),
                  len_norm_name[len_norm], input_name[family], nm[t], i, (double)kg[t][i], fd);
        }
    }
    fd_worst_ref = fmax(fd_worst_ref, worst_ref);
    fd_worst_kern = fmax(fd_worst_kern, worst_kern);
    if (ref_unnormed(kind)) {
        fd_worst_ref_k[kind - LSSAR_ATTN_SIGMOID][len_norm] = fmax(fd_worst_ref_k[kind - LSSAR_ATTN_SIGMOID][len_norm], worst_ref);
        fd_worst_kern_k[kind - LSSAR_ATTN_SIGMOID][len_norm] = fmax(fd_worst_kern_k[kind - LSSAR_ATTN_SIGMOID][len_norm], worst_kern);
    }
    if (ref_ssmax(kind))
        for (int h = 0; h < H; h++) {
            double s0 = sd[h], hh = 1e-6;
            sd[h] = s0 + hh;
            double lp = ref_loss(&rd, B, T, H, D, qd, kd, vd, dyd, tmp);
            sd[h] = s0 - hh;
            double lm = ref_loss(&rd, B, T, H, D, qd, kd, vd, dyd, tmp);
            sd[h] = s0;
            double fd = (lp - lm) / (2 * hh), scale = fmax(fabs(fd), 1e-3);
            CHECK(fabs(dsr[h] - fd) / scale < 1e-5, "ssmax ds[%d]: reference %.9g vs FD %.9g", h, dsr[h], fd);
            // The kernel: the spec's 1e-4 relative bound, plus the float32 rounding error bound of
            // its sum, E_h (ds_error_bound), plus the FD error itself (|reference - FD|, bounded
            // by the check above). ds can vanish in real arithmetic while its terms do
            // not: head 0 of the repeated-keys input has uniform rows, where the loss does not
            // depend on s_h at all and FD gives exactly 0, but float32 scores of identical keys
            // differ by rounding, so a relative test against 0 cannot hold. A wrong kernel
            // (sign, ln n, a missing term) is off by O(|ds|), far above E_h (1e-4..1e-3 of |ds| for
            // these inputs where ds is not 0; compare_case checks ds to 1e-4 against float64).
            double tol = 1e-4 * fabs(fd) + dserr[h] + fabs(dsr[h] - fd);
            CHECK(fabs(ds[h] - fd) <= tol, "ssmax %s ds[%d]: kernel %.9g vs FD %.9g (tolerance %.2e)",
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
}

static void test_finite_differences(void) {
    for (int kind = 0; kind < N_KINDS; kind++)
        for (int ln = 0; ln < n_len_norms(kind); ln++) {
            fd_case_ln(kind, 15.0f, IN_RANDOM, 2, 9, 2, 16, ln);
            fd_case_ln(kind, 15.0f, IN_PEAKED, 1, 7, 2, 8, ln);
            fd_case_ln(kind, 15.0f, IN_REPEATED, 1, 8, 2, 8, ln);
        }
    for (int kind = 0; kind < N_KINDS; kind++)
        if (ref_stages(kind).reweight) {
            fd_case(kind, 1.0f, IN_RANDOM, 1, 10, 2, 16);
            fd_case(kind, 3.0f, IN_RANDOM, 1, 10, 2, 16);
            fd_case(kind, 0.5f, IN_RANDOM, 1, 10, 2, 16);
        }
    // the temperature of another head size (temp_d): lssa and lssar, a smaller and a larger ln
    for (int kind = LSSAR_ATTN_LSSA; kind <= LSSAR_ATTN_LSSAR; kind++) {
        fd_case_x(kind, 15.0f, IN_RANDOM, 1, 10, 2, 16, 0, 64);
        fd_case_x(kind, 3.0f, IN_RANDOM, 1, 10, 2, 16, 0, 2);
    }
    printf("  finite differences: worst |grad - FD| / max|grad|: float64 reference %.1e, float32 kernel %.1e;"
           " ssmax |ds - FD| / tolerance %.1e\n", fd_worst_ref, fd_worst_kern, fd_worst_ds);
    printf("  finite differences (reference / kernel): sigmoid train %.1e / %.1e, row %.1e / %.1e;"
           " relu train %.1e / %.1e, row %.1e / %.1e\n",
           fd_worst_ref_k[0][0], fd_worst_kern_k[0][0], fd_worst_ref_k[0][1], fd_worst_kern_k[0][1],
           fd_worst_ref_k[1][0], fd_worst_kern_k[1][0], fd_worst_ref_k[1][1], fd_worst_kern_k[1][1]);
}

// Relative error of sampled rows (B = H = 1) of a long forward against the float64 reference, with
// the float32 sum's rounding bound as the floor: the output sum y = sum_j w_j v_j over n keys is a
// float32 sum (sgemm) whose error is at most gamma_{n+8} sum_j w_j |v_j| (+8: the weights' own few
// ulp), which for a nearly uniform row (zero queries) exceeds 1e-4 |y|, since such a y averages
// values of both signs. So the denominator is at least 1e4 times that bound: rel < 1e-4 means
// within 1e-4 relative or within the float32 rounding bound. *plain (may be NULL): without floor.
static double sampled_rows_rel_err(const ref_desc *rd, int B, int T, int H, int D, const double *qd,
                                   const double *kd, const double *vd, const float *out, const int *rows,
                                   int nrows, ref_row *R, double *plain) {
    double num = 0, den = 0, flo = 0;
    for (int ri = 0; ri < nrows; ri++) {
        int i = rows[ri];
        ref_row_forward(rd, B, T, H, D, qd, kd, 0, 0, i, R);
        for (int d = 0; d < D; d++) {
            double y = 0, yabs = 0;
            for (int j = 0; j <= i; j++) {
                y += R->w[j] * vd[(size_t)j * D + d];
                yabs += R->w[j] * fabs(vd[(size_t)j * D + d]);
            }
            double e = out[(size_t)i * D + d] - y, g = gamma_f32(i + 1 + 8) * yabs;
            num += e * e;
            den += y * y;
            flo += g * g;
        }
    }
    if (plain) *plain = sqrt(num / den);
    return sqrt(num) / fmax(sqrt(den), 1e4 * sqrt(flo));
}

// Long rows: T = 16384, lssar p = 15, with zero-norm keys (every 4th), zero queries (every 7th:
// uniform rows, the fallback) and peaked rows: finite, each output a convex combination of the
// values it sees (channel 0 of v is 1 everywhere, so it must come out 1: the weights sum to 1),
// and a sample of rows (the peaked ones, the last ones, some zero-query ones) against the
// float64 reference row by row, to the spec's 1e-4 (whole sample, as for whole tensors).
static void test_long_rows(void) {
    int B = 1, T = 16384, H = 1, D = 64;
    size_t N = (size_t)B * T * H * D;
    float *q = malloc(N * 4), *k = malloc(N * 4), *v = malloc(N * 4), *out = malloc(N * 4);
    long_rows_inputs(T, D, 4242, q, k, v, NULL);
    lssar_attn_desc a = {.kind = LSSAR_ATTN_LSSAR, .p = 15.0f};
    double t0 = lssar_now();
    CHECK(lssar_attn_forward(&a, B, T, H, D, q, k, v, out) == 0, "forward failed: %s", lssar_errmsg());
    double t1 = lssar_now();
    size_t bad = 0, outside = 0;
    double worst_one = 0;
    float *lo = malloc(D * 4), *hi = malloc(D * 4);
    for (int d = 0; d < D; d++) lo[d] = hi[d] = v[d];
    for (int i = 0; i < T; i++) {
        for (int d = 0; d < D; d++) {
            float vv = v[(size_t)i * D + d], y = out[(size_t)i * D + d];
            lo[d] = fminf(lo[d], vv); hi[d] = fmaxf(hi[d], vv);
            if (!isfinite(y)) bad++;
            else if (y < lo[d] - 1e-4f * (1 + fabsf(lo[d])) || y > hi[d] + 1e-4f * (1 + fabsf(hi[d]))) outside++;
        }
        worst_one = fmax(worst_one, fabs(out[(size_t)i * D] - 1.0));
    }
    CHECK(bad == 0, "%zu non-finite outputs at T=%d", bad, T);
    CHECK(outside == 0, "%zu outputs outside the range of the values they see", outside);
    // out[i, 0] = sum_j beta_j * 1: each beta_j carries a few ulp (b_j, and 1 / sum b from a
    // double sum), and sgemm adds the n products in float32: |out - 1| <= gamma_{n+4} (length-n
    // sum bound). (The sampled rows below check the weights to 1e-4 against float64.)
    CHECK(worst_one <= gamma_f32(T + 4), "weights do not sum to 1: |out[.,0] - 1| up to %.2e (bound %.2e)",
          worst_one, gamma_f32(T + 4));
    // The peaked rows must put (almost) all weight on their key.
    for (int p = 0; p < LONG_PEAKS; p++) {
        double e = 0;
        for (int d = 1; d < D; d++)
            e = fmax(e, fabs(out[(size_t)long_peak_row[p] * D + d] - v[(size_t)long_peak_key[p] * D + d]));
        CHECK(e < 1e-3, "peaked row %d: output differs from v_%d by %.2e", long_peak_row[p], long_peak_key[p], e);
    }
    // Sampled rows against the float64 reference.
    double *qd = to_double(q, N), *kd = to_double(k, N), *vd = to_double(v, N);
    ref_desc rd = {.kind = LSSAR_ATTN_LSSAR, .p = 15.0};
    ref_row *R = ref_row_new(T, D);
    ref_keys(B, T, H, D, kd, 0, 0, R->kh);
    static const int rows[] = {16383, 16000, 9001, 4097, 700, 16382, 16381, 16380, 16379, 12345, 10, 3, 2,
                               7 * 2000 + 3, 7 * 2339 + 3};
    int nrows = (int)(sizeof rows / sizeof rows[0]);
    // within 1e-4 relative or within the float32 sum's rounding bound (sampled_rows_rel_err)
    double rel_plain, rel = sampled_rows_rel_err(&rd, B, T, H, D, qd, kd, vd, out, rows, nrows, R, &rel_plain);
    CHECK(rel < 1e-4, "T=%d sampled rows: rel err %.2e against the float64 reference (plain %.2e)", T, rel,
          rel_plain);
    ref_row_free(R);
    free(qd); free(kd); free(vd);
    printf("  T=%d lssar p=15 forward: %.2f s; sampled rows rel err %.1e (plain %.1e), |sum of weights - 1| %.1e\n",
           T, t1 - t0, rel, rel_plain, worst_one);
    free(q); free(k); free(v); free(out); free(lo); free(hi);
}

// Long rows for sigmoid and relu, T = 16384, both length normalisations: finite everywhere, and
// sampled rows against the float64 reference with the same floor as test_long_rows (gamma_{n+8}
// sum_j a_j |v_j|, the float32 sum bound). With len-norm train (L = 64, 256 times shorter than the
// rows) the weights of a row sum to about n / L times their value at n = L, so the outputs grow
// with T: that is these baselines' known behaviour beyond the training length (the reason the
// LSSAR paper compares against them), not a bug; out[., 0] = sum_j a_j shows it.
static void test_long_rows_unnormed(void) {
    int B = 1, T = 16384, H = 1, D = 64, L = 64;
    size_t N = (size_t)B * T * H * D;
    float *q = malloc(N * 4), *k = malloc(N * 4), *v = malloc(N * 4), *out = malloc(N * 4);
    long_rows_inputs(T, D, 4243, q, k, v, NULL);
    double *qd = to_double(q, N), *kd = to_double(k, N), *vd = to_double(v, N);
    ref_row *R = ref_row_new(T, D);
    static const int rows[] = {16383, 16000, 9001, 4097, 700, 63, 64, 3, 0};
    int nrows = (int)(sizeof rows / sizeof rows[0]);
    for (int kind = LSSAR_ATTN_SIGMOID; kind <= LSSAR_ATTN_RELU; kind++)
        for (int ln = 0; ln < 2; ln++) {
            lssar_attn_desc a = {.kind = kind, .len_norm = (lssar_len_norm)ln, .train_len = L};
            double t0 = lssar_now();
            CHECK(lssar_attn_forward(&a, B, T, H, D, q, k, v, out) == 0, "forward failed: %s", lssar_errmsg());
            double t1 = lssar_now();
            size_t bad = 0;
            for (size_t i = 0; i < N; i++) bad += !isfinite(out[i]);
            CHECK(bad == 0, "%s (len-norm %s): %zu non-finite outputs at T=%d", kind_name(kind), len_norm_name[ln], bad, T);
            ref_desc rd = {.kind = kind, .len_norm = ln, .L = L};
            double rel = sampled_rows_rel_err(&rd, B, T, H, D, qd, kd, vd, out, rows, nrows, R, NULL);
            CHECK(rel < 1e-4, "%s (len-norm %s) T=%d sampled rows: rel err %.2e", kind_name(kind), len_norm_name[ln], T, rel);
            printf("  T=%d %s len-norm %s forward: %.2f s; sampled rows rel err %.1e; sum of weights row 63 %.3g, row %d %.3g\n",
                   T, kind_name(kind), len_norm_name[ln], t1 - t0, rel, out[(size_t)63 * D], T - 1, out[(size_t)(T - 1) * D]);
        }
    ref_row_free(R);
    free(qd); free(kd); free(vd);
    free(q); free(k); free(v); free(out);
}

// Negative control of the comparison for sigmoid / relu: a kernel given the other length
// normalisation than the reference (a kernel that ignored len_norm, or took the wrong L) must fail
// the 1e-4 criterion by far, so the grids above do test the normalisation.
static int cpu_impl_other_len_norm(const lssar_attn_desc *a, int B, int T, int H, int D, const float *q,
                                   const float *k, const float *v, const float *dy, float *out, float *dq,
                                   float *dk, float *dv, float *ds) {
    lssar_attn_desc b = *a;
    b.len_norm = a->len_norm == LSSAR_LEN_NORM_ROW ? LSSAR_LEN_NORM_TRAIN : LSSAR_LEN_NORM_ROW;
    return cpu_impl(&b, B, T, H, D, q, k, v, dy, out, dq, dk, dv, ds);
}
static void test_negative_control(void) {
    for (int kind = LSSAR_ATTN_SIGMOID; kind <= LSSAR_ATTN_RELU; kind++)
        for (int ln = 0; ln < 2; ln++) {
            errs e = compare_impl_ln(cpu_impl_other_len_norm, 0, kind, 15.0f, IN_RANDOM, 31, 1, 100, 2, 32, ln,
                                     ATTN_REF_TRAIN_LEN);
            CHECK(e.out > 1e-2 && worst(e) > 1e-2, "%s: swapping len-norm %s for the other went unnoticed (out %.2e)",
                  kind_name(kind), len_norm_name[ln], e.out);
            printf("  negative control: %s kernel with the other len-norm than the reference (%s): rel err out %.1e\n",
                   kind_name(kind), len_norm_name[ln], e.out);
        }
}

// The backward at a long row count stays finite too (T = 4096 keeps the test quick).
static void test_long_rows_backward(void) {
    int B = 1, T = 4096, H = 2, D = 64;
    size_t N = (size_t)B * T * H * D;
    float *x = malloc(7 * N * 4);
    float *q = x, *k = q + N, *v = k + N, *dy = v + N, *dq = dy + N, *dk = dq + N, *dv = dk + N;
    lssar_rng r;
    lssar_rng_seed(&r, 31);
    for (size_t i = 0; i < 4 * N; i++) x[i] = (float)lssar_rng_normal(&r);
    lssar_attn_desc a = {.kind = LSSAR_ATTN_LSSAR, .p = 15.0f};
    CHECK(lssar_attn_backward(&a, B, T, H, D, q, k, v, dy, dq, dk, dv, NULL) == 0, "backward failed");
    size_t bad = 0;
    for (size_t i = 0; i < 3 * N; i++) bad += !isfinite(dq[i]);
    CHECK(bad == 0, "%zu non-finite gradients at T=%d", bad, T);
    free(x);
}

static void test_invalid_arguments(void) {
    float buf[64] = {0}, s[2] = {0.43f, 0.43f};
    float *q = buf, *k = buf, *v = buf, *o = buf;
    lssar_attn_desc ok = {.kind = LSSAR_ATTN_LSSAR, .p = 15.0f};
    CHECK(lssar_attn_forward(&ok, 1, 2, 2, 4, q, k, v, o) == 0, "valid call failed: %s", lssar_errmsg());
    CHECK(lssar_attn_forward(NULL, 1, 2, 2, 4, q, k, v, o) == LSSAR_E_NULL, "NULL desc");
    CHECK(lssar_attn_forward(&ok, 1, 2, 2, 4, NULL, k, v, o) == LSSAR_E_NULL, "NULL q");
    CHECK(lssar_attn_forward(&ok, 1, 2, 2, 4, q, k, v, NULL) == LSSAR_E_NULL, "NULL out");
    CHECK(lssar_attn_backward(&ok, 1, 2, 2, 4, q, k, v, NULL, o, o, o, NULL) == LSSAR_E_NULL, "NULL dout");
    CHECK(lssar_attn_backward(&ok, 1, 2, 2, 4, q, k, v, o, o, NULL, o, NULL) == LSSAR_E_NULL, "NULL dk");
    CHECK(strlen(lssar_errmsg()) > 0, "no error message");
    int sizes[][4] = {{0, 2, 2, 4}, {1, 0, 2, 4}, {1, 2, -1, 4}, {1, 2, 2, 0}, {1 << 20, 1 << 20, 1 << 20, 1 << 20},
                      {1, 1, 1 << 16, 1 << 16}, {-5, -5, -5, -5}, {1 << 16, 1, 1 << 16, 1}};
    for (int i = 0; i < 8; i++) {
        CHECK(lssar_attn_forward(&ok, sizes[i][0], sizes[i][1], sizes[i][2], sizes[i][3], q, k, v, o) == LSSAR_E_SIZE,
              "sizes %d %d %d %d not rejected", sizes[i][0], sizes[i][1], sizes[i][2], sizes[i][3]);
        CHECK(lssar_attn_backward(&ok, sizes[i][0], sizes[i][1], sizes[i][2], sizes[i][3], q, k, v, o, o, o, o, NULL) ==
                  LSSAR_E_SIZE, "backward sizes %d not rejected", i);
    }
    lssar_attn_desc bad = ok;
    bad.kind = LSSAR_ATTN_NKINDS;
    CHECK(lssar_attn_forward(&bad, 1, 2, 2, 4, q, k, v, o) == LSSAR_E_KIND, "kind %d", LSSAR_ATTN_NKINDS);
    bad.kind = (lssar_attn_kind)-1;
    CHECK(lssar_attn_backward(&bad, 1, 2, 2, 4, q, k, v, o, o, o, o, NULL) == LSSAR_E_KIND, "kind -1");
    float ps[] = {0.0f, -1.0f, NAN, INFINITY};
    for (int i = 0; i < 4; i++) {
        bad = ok;
        bad.p = ps[i];
        CHECK(lssar_attn_forward(&bad, 1, 2, 2, 4, q, k, v, o) == LSSAR_E_P, "p=%g accepted", ps[i]);
        CHECK(lssar_attn_backward(&bad, 1, 2, 2, 4, q, k, v, o, o, o, o, NULL) == LSSAR_E_P, "p=%g accepted", ps[i]);
    }
    // p only matters for lssar
    lssar_attn_desc sm = {.kind = LSSAR_ATTN_SOFTMAX, .p = 0.0f};
    CHECK(lssar_attn_forward(&sm, 1, 2, 2, 4, q, k, v, o) == 0, "softmax with p=0 rejected");
    lssar_attn_desc ss = {.kind = LSSAR_ATTN_SSMAX};
    CHECK(lssar_attn_forward(&ss, 1, 2, 2, 4, q, k, v, o) == LSSAR_E_SSMAX, "ssmax without s");
    CHECK(lssar_attn_backward(&ss, 1, 2, 2, 4, q, k, v, o, o, o, o, NULL) == LSSAR_E_SSMAX, "ssmax without s");
    ss.ssmax_s = s;
    CHECK(lssar_attn_backward(&ss, 1, 2, 2, 4, q, k, v, o, o, o, o, NULL) == 0, "ssmax with ds=NULL failed");
    s[1] = NAN;
    CHECK(lssar_attn_forward(&ss, 1, 2, 2, 4, q, k, v, o) == LSSAR_E_ARG, "ssmax with NaN scale");
    // sigmoid / relu: len_norm train needs the training length; row does not; a bad len_norm is
    // refused; the other kinds ignore both fields.
    for (int kind = LSSAR_ATTN_SIGMOID; kind <= LSSAR_ATTN_RELU; kind++) {
        lssar_attn_desc u = {.kind = kind};
        CHECK(lssar_attn_forward(&u, 1, 2, 2, 4, q, k, v, o) == LSSAR_E_ARG, "%s with train_len 0", kind_name(kind));
        CHECK(lssar_attn_backward(&u, 1, 2, 2, 4, q, k, v, o, o, o, o, NULL) == LSSAR_E_ARG, "%s bwd train_len 0",
              kind_name(kind));
        u.train_len = 8;
        CHECK(lssar_attn_forward(&u, 1, 2, 2, 4, q, k, v, o) == 0, "%s train: %s", kind_name(kind), lssar_errmsg());
        u.len_norm = (lssar_len_norm)2;
        CHECK(lssar_attn_forward(&u, 1, 2, 2, 4, q, k, v, o) == LSSAR_E_ARG, "%s len_norm 2", kind_name(kind));
        u.len_norm = LSSAR_LEN_NORM_ROW;
        u.train_len = 0;
        CHECK(lssar_attn_forward(&u, 1, 2, 2, 4, q, k, v, o) == 0, "%s row: %s", kind_name(kind), lssar_errmsg());
    }
    lssar_attn_desc sm2 = {.kind = LSSAR_ATTN_SOFTMAX, .len_norm = (lssar_len_norm)9};
    CHECK(lssar_attn_forward(&sm2, 1, 2, 2, 4, q, k, v, o) == 0, "softmax looks at len_norm");
    bad = ok;
    bad.kind = (lssar_attn_kind)(LSSAR_ATTN_NKINDS + 1);
    CHECK(lssar_attn_forward(&bad, 1, 2, 2, 4, q, k, v, o) == LSSAR_E_KIND, "kind %d", LSSAR_ATTN_NKINDS + 1);
    // every kind with score ssmax needs the scales; every kind that re-weights a valid p
    for (int kind = 0; kind < N_KINDS; kind++) {
        lssar_attn_desc d = {.kind = kind, .p = 0.0f, .ssmax_s = NULL, .train_len = 8};
        int rc = lssar_attn_forward(&d, 1, 2, 2, 4, q, k, v, o);
        int want = ref_stages(kind).reweight ? LSSAR_E_P : ref_ssmax(kind) ? LSSAR_E_SSMAX : 0;
        CHECK(rc == want, "%s without scales, p = 0: %d (%s), want %d", kind_name(kind), rc, lssar_errmsg(), want);
    }
}

// Forward identical for 1 and 2 threads; the backward too (each (b, h) is owned by one thread
// and sums its row blocks in a fixed order).
static void test_thread_determinism(void) {
    int B = 2, T = 150, H = 3, D = 32;
    size_t N = (size_t)B * T * H * D;
    float *x = malloc(14 * N * 4);
    float *q = x, *k = q + N, *v = k + N, *dy = v + N;
    lssar_rng r;
    lssar_rng_seed(&r, 7);
    for (size_t i = 0; i < 4 * N; i++) x[i] = (float)lssar_rng_normal(&r);
    float s[3] = {0.4f, 0.5f, 0.6f};
    int saved = omp_get_max_threads();
    for (int kind = 0; kind < N_KINDS; kind++) {
        lssar_attn_desc a = {.kind = kind, .p = 15.0f, .ssmax_s = s, .train_len = 64};
        float ds[2][3];
        float *res[2];
        for (int nt = 1; nt <= 2; nt++) {
            float *o = x + (4 + 5 * (nt - 1)) * N;
            res[nt - 1] = o;
            omp_set_num_threads(nt);
            CHECK(lssar_attn_forward(&a, B, T, H, D, q, k, v, o) == 0, "forward");
            CHECK(lssar_attn_backward(&a, B, T, H, D, q, k, v, dy, o + N, o + 2 * N, o + 3 * N, ds[nt - 1]) == 0,
                  "backward");
        }
        CHECK(memcmp(res[0], res[1], 4 * N * 4) == 0, "%s: 1 and 2 threads differ", kind_name(kind));
        if (ref_ssmax(kind)) CHECK(memcmp(ds[0], ds[1], sizeof ds[0]) == 0, "%s ds differs", kind_name(kind));
        // The kernels leave the caller's OpenMP thread count as it was.
        CHECK(omp_get_max_threads() == 2, "thread count changed to %d by the kernels", omp_get_max_threads());
        // Called from two threads at once (each inside the caller's parallel region): same results.
        int bad = 0;
#pragma omp parallel num_threads(2) reduction(+ : bad)
        {
            float *mine = malloc(N * 4);
            bad += lssar_attn_forward(&a, B, T, H, D, q, k, v, mine) != 0;
            bad += memcmp(mine, res[0], N * 4) != 0;
            free(mine);
        }
        CHECK(bad == 0, "%s: forward called from inside a parallel region differs (%d)", kind_name(kind), bad);
    }
    omp_set_num_threads(saved);
    free(x);
}

int main(void) {
    double t0 = lssar_now();
    RUN(test_math_functions);
    RUN(test_invalid_arguments);
    RUN(test_matches_reference_random);
    RUN(test_matches_reference_adversarial);
    RUN(test_odd_shapes);
    RUN(test_lssar_powers);
    RUN(test_temp_d);
    RUN(test_reweight_first_rows);
    RUN(test_nonfinite);
    RUN(test_finite_differences);
    RUN(test_thread_determinism);
    RUN(test_long_rows_backward);
    RUN(test_long_rows);
    RUN(test_long_rows_unnormed);
    RUN(test_negative_control);
    printf("  total %.1f s\n", lssar_now() - t0);
    return test_summary("test_attention");
}
