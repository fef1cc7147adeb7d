/*
 * test_flash_host.cpp - the fused attention CUDA kernels (src/cuda/flash_attn.cu, compiled as host
 * C++ against tests/cuda_host/cuda_host.h: every CUDA thread a pthread, mma.sync emulated from the
 * PTX fragment layout) against their plain-C emulation src/attn/flash_emu.c, which
 * tests/test_flash.c checks against a float64 reference. This runs the kernels' own index math,
 * tile walk, masking, fragment ownership, shuffles and reduction order on every CI run, where no
 * GPU is available. What it cannot see is in cuda_host.h ("Limits").
 *
 * Checks (one line each; the last line "test_flash_host: N passed, M failed", exit 1 on a failure):
 *   fwd+bwd  kind x product mode (SIMT fp32, MMA bf16) x T x D on normal(0, 1) inputs: out, every
 *            statistics slot (the argmax exactly), yc, Ec; dq, dk, dv, ssmax ds; within the
 *            allowances of `Model`; no output left unwritten (outputs start as NaN), the guard
 *            bytes around every buffer untouched
 *   exact    inputs +-2^e, on which every product is exact: forward and backward bit-identical to
 *            the emulation (the reduction order itself; see `Family`)
 *   adv      repeated keys (exact ties of the argmax), a zero query row, larger logits
 *   decode   Tq < Tk with a kv cache stride > Tk whose unused rows are NaN; out without stats
 *            bit-identical to out with stats
 *   api      lssar_attn_*_cuda with bf16 storage against the emulation's BF16 mode on the same
 *            (bf16) inputs; with fp32 storage bit-identical to cuda_attn_* (SIMT)
 *   nonfinite NaN or inf in one element of q, k or v: the emulation's NaN pattern, its values
 *            elsewhere, the guard bytes untouched (a row without an argmax once read v out of range)
 *   rerun    a second forward and backward give the same bits (the shim's threads interleave
 *            differently on every run, so a race that changes results would show)
 *   host     argument errors and the shared-memory opt-in: the codes, and nothing launched
 *   shim     the shim itself: mma against a plain product (fragments placed by the PTX table
 *            written the other way round), shuffles, barriers with returned threads, launch limits
 * Quick mode (the default, for CI) runs a covering subset: every kind x mode, every D in each
 * mode, the tile boundaries; LSSAR_HOST_FULL=1 (or the argument `full`) runs the whole grid
 * (several times longer). LSSAR_HOST_FILTER=substring runs only the cases whose name contains it.
 *
 * Tolerances: see `Model` below. The kernels perform the emulation's operations in the emulation's
 * order, but not bit for bit (fmaf contraction differs), so the comparison allows a few ulp per
 * accumulation step, plus bf16 rounding flips in the MMA mode; the exact family has no allowance.
 */
#include "cuda_host.h"  // first: it renames the host copy's public entry points

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <string>
#include <vector>

#include "lssar.h"
#include "attn/flash.h"
#include "cuda/flash_attn.h"
extern "C" {
#include "attn/flash_emu.h"
}

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define GUARD_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define GUARD_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define GUARD_POISON(p, n) ((void)(p), (void)(n))
#define GUARD_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

static int n_pass = 0, n_fail = 0;
static bool full_mode = false;
static const char *filter = NULL;
#define KIND_NAME(kind) lssar_attn_name((lssar_attn_kind)(kind))
#define NKINDS LSSAR_ATTN_NKINDS  // every valid combination of stages
// The stages of a kind (lssar.h); and the flash.h parameters they give.
static lssar_attn_stages stages(int kind) {
    lssar_attn_stages st;
    memset(&st, 0, sizeof st);
    lssar_attn_stages_of((lssar_attn_kind)kind, &st);
    return st;
}
static flash_params stage_params(int kind) {
    lssar_attn_stages st = stages(kind);
    flash_params fp;
    flash_params_init(&fp, &st, 15.0f, 16);
    return fp;
}
static bool is_ssmax(int kind) { return stages(kind).score == LSSAR_SCORE_SSMAX; }
// The kinds the fused path supports (flash.h's flash_fused_supported): the grids skip the others,
// and run_refused checks that the kernels' entry points refuse each of those.
static bool fused_ok(int kind) {
    lssar_attn_stages st = stages(kind);
    return flash_fused_supported(&st) != 0;
}

static void result(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void result(bool ok, const char *fmt, ...) {
    (ok ? n_pass : n_fail)++;
    printf("%s ", ok ? "ok  " : "FAIL");
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

// ------------------------------------------------------------------ inputs

// A small deterministic generator (the same numbers on every platform and library).
struct Rng {
    uint64_t s;
    explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
    uint64_t next() {
        s ^= s >> 12; s ^= s << 25; s ^= s >> 27;
        return s * 0x2545F4914F6CDD1Dull;
    }
    double uniform() { return ((next() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
    float normal() { return (float)(sqrt(-2.0 * log(uniform())) * cos(6.283185307179586 * uniform())); }
};
static float bf16_round(float x) { return cuda_host_bf16_to_float(cuda_host_bf16_rn(x)); }
static void fill(std::vector<float> &x, Rng &r, float scale) {
    for (auto &v : x) v = scale * r.normal();
}

/* "Device" memory: a 256-byte aligned block (as cudaMalloc's) with 256 guard bytes on each side.
   The guards hold a pattern that check() verifies (a write past either end shows in every build)
   and are poisoned under AddressSanitizer (so is any read). Outputs start as NaN (0xff bytes). */
struct DevBuf {
    static constexpr size_t G = 256;
    unsigned char *base = nullptr;
    size_t bytes = 0;
    DevBuf() = default;
    DevBuf(const DevBuf &) = delete;
    DevBuf &operator=(const DevBuf &) = delete;
    explicit DevBuf(size_t n, int fill_byte = 0xff) { alloc(n, fill_byte); }
    ~DevBuf() {
        if (base) {
            GUARD_UNPOISON(base, G);
            GUARD_UNPOISON(base + G + bytes, G);
            free(base);
        }
    }
    void alloc(size_t n, int fill_byte = 0xff) {
        bytes = n;
        base = static_cast<unsigned char *>(aligned_alloc(256, (2 * G + n + 255) / 256 * 256));
        if (!base) { fprintf(stderr, "out of memory\n"); exit(2); }
        for (size_t i = 0; i < G; i++) base[i] = base[G + n + i] = (unsigned char)(0x5a ^ i);
        memset(base + G, fill_byte, n);
        GUARD_POISON(base, G);
        GUARD_POISON(base + G + n, G);
    }
    void *p() const { return base + G; }
    float *f() const { return reinterpret_cast<float *>(base + G); }
    uint16_t *h() const { return reinterpret_cast<uint16_t *>(base + G); }
    bool guards_ok() const {
        GUARD_UNPOISON(base, G);
        GUARD_UNPOISON(base + G + bytes, G);
        bool ok = true;
        for (size_t i = 0; i < G; i++) ok &= base[i] == (unsigned char)(0x5a ^ i) && base[G + bytes + i] == (unsigned char)(0x5a ^ i);
        GUARD_POISON(base, G);
        GUARD_POISON(base + G + bytes, G);
        return ok;
    }
};
static void to_dev(DevBuf &d, const std::vector<float> &x) {
    d.alloc(x.size() * sizeof(float));
    memcpy(d.p(), x.data(), x.size() * sizeof(float));
}

// ------------------------------------------------------------------ comparison

/* got against ref, n values in rows of len (a head's D values, or one statistics slot):
   rms  = |got - ref| / |ref| over the whole tensor (2-norms);
   row  = the largest |got_r - ref_r| / max(|ref_r|, rms row norm of ref): the same measure per
          row, so that an error confined to a few rows (a mask, a tile edge) is not averaged away;
          the floor keeps rows whose values are small by cancellation from counting as relative;
   bad  = values that are not finite in one and are not the same bits in the other;
   bits = values whose bits differ (shown, not checked). */
struct Diff { double rms = 0, row = 0; size_t bad = 0, bits = 0, n = 0; };
static Diff diff(const float *got, const float *ref, size_t n, size_t len) {
    Diff r;
    r.n = n;
    size_t rows = len ? n / len : 0;
    std::vector<double> en(rows, 0.0), rn(rows, 0.0);
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        bool same = memcmp(&got[i], &ref[i], 4) == 0;
        r.bits += !same;
        if (!std::isfinite(got[i]) || !std::isfinite(ref[i])) {
            r.bad += !same;
            continue;
        }
        double d = (double)got[i] - ref[i];
        en[i / len] += d * d;
        rn[i / len] += (double)ref[i] * ref[i];
    }
    for (size_t q = 0; q < rows; q++) { num += en[q]; den += rn[q]; }
    r.rms = den > 0 ? sqrt(num / den) : (num > 0 ? INFINITY : 0.0);
    double floor2 = rows ? den / rows : 0.0;
    for (size_t q = 0; q < rows; q++) {
        double d2 = std::max(rn[q], floor2);
        double e = d2 > 0 ? sqrt(en[q] / d2) : (en[q] > 0 ? INFINITY : 0.0);
        r.row = std::max(r.row, e);
    }
    return r;
}

struct Tol { double rms, row; };
static void check(const std::string &name, const char *what, const Diff &d, Tol t) {
    bool ok = d.bad == 0 && d.rms <= t.rms && d.row <= t.row;
    result(ok, "%-44s %-10s rms %.1e (tol %.1e)  row %.1e (tol %.1e)  bits %zu/%zu%s", name.c_str(), what, d.rms, t.rms,
           d.row, t.row, d.bits, d.n, d.bad ? "  NON-FINITE/UNWRITTEN" : "");
}
static void check_exact(const std::string &name, const char *what, const float *a, const float *b, size_t n) {
    size_t nd = 0;
    for (size_t i = 0; i < n; i++) nd += memcmp(&a[i], &b[i], 4) != 0;
    result(nd == 0, "%-44s %-10s bit-identical: %zu of %zu differ", name.c_str(), what, nd, n);
}
static double now_s() {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static double case_t0;  // the start of the current case (shown on its guards line)
static void check_guards(const std::string &name, std::initializer_list<const DevBuf *> bufs) {
    bool ok = true;
    for (const DevBuf *b : bufs) ok &= b->guards_ok();
    result(ok, "%-44s %-10s guard bytes around every buffer intact  [%.1f s]", name.c_str(), "guards", now_s() - case_t0);
}

/* ------------------------------------------------------------------ tolerances

   Why not bit-exact. The kernels perform the emulation's operations in the emulation's order
   (tiles, lanes, k-steps, quad trees: docs/CUDA.md), but (1) the kernels' products use fmaf, one
   rounding, where the emulation's a * b + c rounds twice (the library is built for x86-64-v2,
   which has no FMA; with NATIVE=1 GCC contracts some of the emulation's and flash.h's a * b + c
   instead); (2) the emulated mma adds its 16 products onto the accumulator, where the emulation
   sums a k-step from 0 and then adds it; (3) the norms, the row pre-pass dots and the projection
   dots are fmaf chains in the kernels. Each such step moves a result by at most about one ulp on
   each side.

   The allowance (fp32, SIMT) is a few ulp per accumulation step on the path to an output:
       rms = ULPS * FLT_EPSILON * sqrt((m_w * A)^2 + N),          row = ROWS * rms
   - ULPS = 4: one ulp per differently rounded step on each side (2), doubled because a perturbed
     argument of the ~2-ulp fastmath functions (fastmath.h: exp, softplus, log1p, pow) can round
     differently again.
   - N: the accumulation steps after the scores: a k-step product (16 products, then one add per
     k-step: 16 + Tk / 16), a row sum (16 lane elements, one add per key tile, the quad: 18 +
     Tk / 64), the per-element functions (8); the backward adds its four D-term dots (dW = dy . v,
     the pre-pass dot, dy . Ec, the projection's x . G: 4 D) and its own element functions (8).
   - A: how far an error of the scores reaches the weights. A score S = q . k is a sum of D
     products whose rounding errors, in quadrature, come to ~ eps sqrt(sum_d s_d^2) over the
     partial sums s_d, which for random directions grow as sqrt(d / D) |q| |k|: ~ eps |q| |k|.
     The logit x = scale S carries that as the absolute error eps scale |q| |k|, and exp /
     softplus turn an absolute error of x into the same relative error of the weight. So A = the
     largest scale_i |q_i| |k_j| over the visible pairs, from the inputs (lambda_i = ln D ln n for
     lssa / lssar, whose q and k are normalised; the ssmax scale s_h ln n / sqrt D).
   - m_w: softmax / ssmax 2 (w = exp(x - m): x and the row max both carry it); lssa 1; lssar
     p (1 + 1 / u_max) (w = (u / u_max)^p multiplies the relative error of u by p, and u = n a / Z
     - 1 loses 1 + 1 / u of it to the subtraction; the weights that matter have u near u_max; u_max
     per row is the saved statistic of the emulation).
   - Errors from independent steps add in quadrature (the sqrt), which is what an RMS over
     thousands of values measures; ROWS = 4 covers the largest row of a few hundred (a 4-sigma
     row), which the row measure takes.
   MMA (bf16 products) adds the rounding flips: a product operand rounded to bf16 from an fp32
   value (P, G, dS, W, and the inputs) lands on the neighbouring bf16 value when the two sides'
   fp32 values straddle a rounding midpoint, a difference of one bf16 ulp (<= 2^-7 relative), for
   about the fraction f = rms / 2^-8 of the operands (the fp32 difference over the spacing of the
   midpoints, >= 2^-8 relative). Those flips are independent, so they add 2^-7 sqrt(f) to the RMS;
   a row may hold the flip of its largest operand (and the api's final bf16 rounding of an output
   one more): 2 x 2^-7 more per row (3 x with bf16 storage). */
static const double ULPS = 4.0, ROWS = 4.0, BF16_ULP = 0x1p-7, BF16_MID = 0x1p-8;

struct Model { Tol fwd, bwd; double A, mw; };
// q (B, Tq, H, D), k (B, kvs, H, D) as the kernels read them; stats: the emulation's (for u_max).
static Model model(const lssar_attn_desc &d, int mma, int bf16_io, int B, int Tq, int Tk, int kvs, int H, int D,
                   const float *q, const float *k, const float *stats) {
    const int kind = (int)d.kind;
    const lssar_attn_stages stg = stages(kind);
    const flash_params fp = stage_params(kind);
    const bool normed = stg.score == LSSAR_SCORE_COS;
    double A = 0.0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            double kmax = 0.0;  // max |k_j| over j <= i (keys are visible in order)
            int jdone = 0;
            for (int r = 0; r < Tq; r++) {
                int i = Tk - Tq + r;
                for (; jdone <= i; jdone++) {
                    const float *kr = k + (((size_t)b * kvs + jdone) * H + h) * D;
                    double s = 0;
                    for (int e = 0; e < D; e++) s += (double)kr[e] * kr[e];
                    kmax = std::max(kmax, sqrt(s));
                }
                const float *qr = q + (((size_t)b * Tq + r) * H + h) * D;
                double s = 0;
                for (int e = 0; e < D; e++) s += (double)qr[e] * qr[e];
                const double n = i + 1.0;
                if (normed)  // rq_i |q_i| = rk_j |k_j| = 1: lambda_i
                    A = std::max(A, log((double)D) * log(n));
                else if (flash_unnormed(&fp))  // |x| <= |q| |k| / sqrt(D) + |b|, |b| <= ln max(L, n)
                    A = std::max(A, sqrt(s) * kmax / sqrt((double)D) + log(std::max(n, (double)std::max(d.train_len, 1))));
                else
                    A = std::max(A, (is_ssmax(kind) ? d.ssmax_s[h] * log(n) : 1.0) / sqrt((double)D) * sqrt(s) * kmax);
            }
        }
    double mw = flash_centred(&fp) ? 2.0 : 1.0;
    if (stg.reweight) {
        double umin = INFINITY;  // over the rows that subtract o = 1 and are not fallback rows
        for (size_t row = 0; row < (size_t)B * H * Tq; row++) {
            int i = Tk - Tq + (int)(row % Tq);
            const float *st = stats + row * FLASH_NSTAT;
            if (i >= 3 && st[FLASH_ST_W] >= 0.0f) umin = std::min(umin, (double)st[FLASH_ST_UMAX]);
        }
        mw = d.p * (1.0 + (umin < INFINITY ? 1.0 / umin : 0.0));
    }
    double ma = mw * A;
    double nf = (16 + Tk / 16.0) + (18 + Tk / 64.0) + 8;
    double nb = nf + 4.0 * D + 8;
    Model m;
    m.A = A;
    m.mw = mw;
    double tf = ULPS * FLT_EPSILON * sqrt(ma * ma + nf), tb = ULPS * FLT_EPSILON * sqrt(ma * ma + nb);
    m.fwd = {tf, ROWS * tf};
    m.bwd = {tb, ROWS * tb};
    if (mma) {
        int nrow = bf16_io ? 3 : 2;
        m.fwd = {tf + BF16_ULP * sqrt(std::min(1.0, tf / BF16_MID)), ROWS * tf + nrow * BF16_ULP};
        m.bwd = {tb + BF16_ULP * sqrt(std::min(1.0, tb / BF16_MID)), ROWS * tb + nrow * BF16_ULP};
    }
    return m;
}

// ------------------------------------------------------------------ the statistics

// Compare the kernel's statistics with the emulation's: every per-row slot as its own tensor (the
// argmax and the reserved slots exactly), then yc and Ec as rows of D.
static void check_stats(const std::string &name, int kind, const float *got, const float *ref, int B, int Tq, int H, int D,
                        Tol t) {
    const flash_params fp = stage_params(kind);
    const size_t rows = (size_t)B * Tq * H;
    std::vector<float> g(rows), e(rows);
    static const char *slot_name[FLASH_NSTAT] = {"st.M", "st.jmax", "st.umax", "st.W", "st.S", "st.5", "st.6", "st.7"};
    for (int s = 0; s < FLASH_NSTAT; s++) {
        for (size_t r = 0; r < rows; r++) { g[r] = got[r * FLASH_NSTAT + s]; e[r] = ref[r * FLASH_NSTAT + s]; }
        bool used = (s == FLASH_ST_M && !flash_unnormed(&fp)) ||
                    (fp.rw && s >= FLASH_ST_UMAX && s <= FLASH_ST_S) ||
                    (fp.rw && fp.phi == LSSAR_PHI_EXP && s == FLASH_ST_XMAX);  // sigmoid / relu: every slot 0
        if (s == FLASH_ST_JMAX || !used) {
            // exact: an argmax (first index of the largest logit; a near tie within rounding would
            // show here, and then in yc) or a slot that must stay 0
            size_t nd = 0, first = rows;
            for (size_t r = 0; r < rows; r++)
                if (memcmp(&g[r], &e[r], 4)) { nd++; first = std::min(first, r); }
            if (s == FLASH_ST_JMAX || nd || (s == FLASH_ST_M && flash_unnormed(&fp)))
                result(nd == 0, "%-44s %-10s exact: %zu of %zu rows differ%s", name.c_str(), slot_name[s], nd, rows,
                       nd ? " (an argmax near-tie, or a wrong index)" : "");
            if (nd && s == FLASH_ST_JMAX)
                printf("     first: row %zu kernel %g emulation %g\n", first, (double)g[first], (double)e[first]);
        } else {
            check(name, slot_name[s], diff(g.data(), e.data(), rows, 1), t);
        }
    }
    const size_t nd = rows * D;
    if (flash_stats_drows(&fp) >= 1)
        check(name, "st.yc", diff(got + flash_stats_yc(B, Tq, H), ref + flash_stats_yc(B, Tq, H), nd, D), t);
    if (fp.rw)
        check(name, "st.Ec", diff(got + flash_stats_ec(B, Tq, H, D), ref + flash_stats_ec(B, Tq, H, D), nd, D), t);
}

static std::string case_name(const char *tag, int kind, int mma, int B, int Tq, int Tk, int kvs, int H, int D) {
    char s[128];
    if (Tq == Tk && kvs == Tk) snprintf(s, sizeof s, "%s %s %s B%d T%d H%d D%d", tag, KIND_NAME(kind), mma ? "mma" : "simt", B, Tk, H, D);
    else snprintf(s, sizeof s, "%s %s %s B%d Tq%d Tk%d kvs%d H%d D%d", tag, KIND_NAME(kind), mma ? "mma" : "simt", B, Tq, Tk, kvs, H, D);
    return s;
}
static bool selected(const std::string &name) { return !filter || name.find(filter) != std::string::npos; }

// lssa / lssar: the temperature's D of the cases run while it is set (0: the head size).
static int case_temp_d = 0;

// sigmoid / relu: len_norm (ln) train with L = 48 (below most T: rows past the training length),
// or row.
static lssar_attn_desc make_desc(int kind, std::vector<float> &ssmax_s, int H, int ln = 0) {
    ssmax_s.resize(H);
    for (int h = 0; h < H; h++) ssmax_s[h] = 0.43f + 0.1f * h;
    lssar_attn_desc d;
    memset(&d, 0, sizeof d);
    d.kind = (lssar_attn_kind)kind;
    d.p = 15.0f;
    d.ssmax_s = is_ssmax(kind) ? ssmax_s.data() : NULL;
    d.len_norm = (lssar_len_norm)ln;
    d.train_len = 48;
    d.temp_d = case_temp_d;
    return d;
}

// ------------------------------------------------------------------ forward + backward, T = Tq = Tk

/* The families of inputs:
   PLAIN        normal(0, 1) q, k, v, dy;
   ADVERSARIAL  q 4x as large (larger logits, peaked rows), every third key a copy of key 0 (exact
                ties of the argmax: the first index must win on both sides), a zero query row;
   EXACT        every q, k, v, dy element +-2^e, e in -2..1. Then every product either has such
                an element as a factor (q k, dy v, P v, dS k, dS q, W dy, dy yc, dy Ec, q G, k G)
                or multiplies two bf16 values (MMA), and is exact; the sums of the scores, the
                norms and dW are exact too (multiples of 2^-4, far below 2^24 of them). So fmaf
                and a * b + c give the same bits, everything else the two sides compute by the
                same operations in the same order (the shim's mma sums a k-step as the emulation
                does), and the results must be bit-identical: this family checks the kernels'
                reduction order itself (lane partials, tile adds, quad trees, k-steps, the online
                rescale), which the allowances of the other families cannot resolve. Where the
                library was built with FMA available (NATIVE=1: GCC contracts flash.h's a * b + c
                in the emulation, not in the host copy), the family falls back to the allowances
                (LSSAR_HOST_EMU_FMA, set by mk/cuda_host.mk). */
enum Family { PLAIN, ADVERSARIAL, EXACT };

#ifdef LSSAR_HOST_EMU_FMA
static const bool emu_contracts = true;
#else
static const bool emu_contracts = false;
#endif

static void fill_pow2(std::vector<float> &x, Rng &r) {
    for (auto &v : x) {
        uint64_t u = r.next();
        v = ldexpf((u & 1) ? -1.0f : 1.0f, (int)((u >> 1) % 4) - 2);
    }
}

/* Compare got with ref bit for bit (the EXACT family), or within the allowance where the
   emulation was built with FMA contraction. One exception to "every product is exact": a product
   below FLT_MIN (a weight or dS near 0, e.g. r^p with p = 15) rounds to the subnormal grid of
   2^-149 in the emulation's a * b + c but not in the kernel's fmaf. Each such operation moves a
   result by at most one step of that grid, and a value of T = Tq = Tk positions passes at most
   2 T + 2 D + 4 operations (the products over keys or rows with their k-step adds, the l2
   projection's dot and update), so those differ by at most that many steps (x 2 for the
   projection's factor |x|^2 rx^2 <= 1 applied to a dot that carries the same steps). A
   difference only counts as one above that, or where either side is not below 2^-100 (a
   normal-range result: an underflowed product could only flip its last bit in a rounding tie). */
static void check_same(const std::string &name, const char *what, const float *got, const float *ref, size_t n, size_t len,
                       Tol t, int T) {
    if (emu_contracts) {
        check(name, what, diff(got, ref, n, len), t);
        return;
    }
    const double grid = ldexp(1.0, -149), allow = 2.0 * (2.0 * T + 2.0 * (double)len + 4.0) * grid;
    size_t nd = 0, nsub = 0;
    for (size_t i = 0; i < n; i++) {
        if (!memcmp(&got[i], &ref[i], 4)) continue;
        double a = got[i], b = ref[i];
        bool tiny = fabs(a) < ldexp(1.0, -100) && fabs(b) < ldexp(1.0, -100) && fabs(a - b) <= allow;
        if (tiny) nsub++;
        else nd++;
    }
    result(nd == 0, "%-44s %-10s bit-identical: %zu of %zu differ (%zu more within the underflow allowance)",
           name.c_str(), what, nd, n, nsub);
}

static void run_case(int kind, int mma, int B, int T, int H, int D, uint64_t seed, Family fam, bool rerun) {
    std::string name = case_name(fam == ADVERSARIAL ? "adv" : fam == EXACT ? "exact" : "fwd+bwd", kind, mma, B, T, T, T, H, D);
    if (!selected(name)) return;
    case_t0 = now_s();
    const size_t n = (size_t)B * T * H * D;
    Rng rng(seed);
    std::vector<float> q(n), k(n), v(n), dy(n), ss;
    if (fam == EXACT) {
        fill_pow2(q, rng);
        fill_pow2(k, rng);
        fill_pow2(v, rng);
        fill_pow2(dy, rng);
    } else {
        fill(q, rng, fam == ADVERSARIAL ? 4.0f : 1.0f);
        fill(k, rng, 1.0f);
        fill(v, rng, 1.0f);
        fill(dy, rng, 1.0f);
    }
    if (fam == ADVERSARIAL) {
        // every third key a copy of key 0 (exact ties: the argmax keeps the first), a zero query row
        for (int b = 0; b < B; b++)
            for (int t = 3; t < T; t += 3)
                for (int h = 0; h < H; h++)
                    memcpy(&k[(((size_t)b * T + t) * H + h) * D], &k[((size_t)b * T * H + h) * D], D * sizeof(float));
        if (T > 5) memset(&q[((size_t)5 * H) * D], 0, D * sizeof(float));
    }
    lssar_attn_desc d = make_desc(kind, ss, H, (int)(seed & 1));
    const flash_mode mode = mma ? FLASH_BF16 : FLASH_FP32;

    // the emulation
    const size_t ns = flash_emu_stats_floats(&d, B, T, H, D);
    std::vector<float> eo(n), es(ns), edq(n), edk(n), edv(n), eds(H, 0.0f);
    if (flash_emu_forward(&d, mode, B, T, T, T, H, D, q.data(), k.data(), v.data(), eo.data(), es.data()) ||
        flash_emu_backward(&d, mode, B, T, H, D, q.data(), k.data(), v.data(), eo.data(), es.data(), dy.data(), edq.data(),
                           edk.data(), edv.data(), is_ssmax(kind) ? eds.data() : NULL)) {
        result(false, "%-44s emulation failed: %s", name.c_str(), lssar_errmsg());
        return;
    }
    Model m = model(d, mma, 0, B, T, T, T, H, D, q.data(), k.data(), es.data());

    // the kernels
    if (cuda_attn_stats_floats(&d, B, T, H, D) != ns) result(false, "%-44s stats floats differ", name.c_str());
    DevBuf dq_, dk_, dv_, ddy, dsc((size_t)H * sizeof(float), 0), out(n * 4), st(ns * 4), gq(n * 4), gk(n * 4), gv(n * 4);
    to_dev(dq_, q); to_dev(dk_, k); to_dev(dv_, v); to_dev(ddy, dy);
    DevBuf scr(cuda_attn_scratch_bytes(&d, B, T, T, H, D));
    DevBuf ssd((size_t)H * 4);
    memcpy(ssd.p(), ss.data(), (size_t)H * 4);
    lssar_attn_desc dd = d;
    if (is_ssmax(kind)) dd.ssmax_s = ssd.f();
    // dscale accumulates: start it at -(the emulation's ds), so that it ends as the difference
    // (exact: two floats within a factor 2 of each other subtract exactly), which also checks that
    // the kernel adds rather than overwrites
    for (int h = 0; h < H; h++) dsc.f()[h] = -eds[h];
    int rc = cuda_attn_forward(&dd, mma, LSSAR_F32, B, T, T, T, H, D, dq_.f(), dk_.f(), dv_.f(), out.f(), st.f(), scr.p(), NULL);
    if (!rc)
        rc = cuda_attn_backward(&dd, mma, LSSAR_F32, B, T, H, D, dq_.f(), dk_.f(), dv_.f(), out.f(), st.f(), ddy.f(), gq.f(), gk.f(),
                                gv.f(), is_ssmax(kind) ? dsc.f() : NULL, scr.p(), NULL);
    if (rc) {
        result(false, "%-44s kernels failed: %s", name.c_str(), lssar_errmsg());
        return;
    }
    if (fam == EXACT) {
        check_same(name, "out", out.f(), eo.data(), n, D, m.fwd, T);
        check_same(name, "stats", st.f(), es.data(), ns, D, m.fwd, T);
        check_same(name, "dq", gq.f(), edq.data(), n, D, m.bwd, T);
        check_same(name, "dk", gk.f(), edk.data(), n, D, m.bwd, T);
        check_same(name, "dv", gv.f(), edv.data(), n, D, m.bwd, T);
        if (is_ssmax(kind)) {
            // ds_h: both sides sum the same float row terms in double, in different orders (the
            // kernel's thread runs and halving tree, the emulation's running sum); the double
            // results differ by a few double ulps, which can move the float rounding by 1 ulp
            bool ok = true;
            for (int h = 0; h < H; h++) {
                float got = eds[h] + dsc.f()[h];  // dsc = kernel - emulation, exactly
                ok &= fabsf(dsc.f()[h]) <= (emu_contracts ? m.bwd.row * fabsf(eds[h]) : fabsf(nextafterf(got, INFINITY) - got));
            }
            result(ok, "%-44s %-10s within 1 ulp of the emulation's", name.c_str(), "ds");
        }
        check_guards(name, {&dq_, &dk_, &dv_, &ddy, &dsc, &out, &st, &gq, &gk, &gv, &scr, &ssd});
        return;
    }
    check(name, "out", diff(out.f(), eo.data(), n, D), m.fwd);
    check_stats(name, kind, st.f(), es.data(), B, T, H, D, m.fwd);
    check(name, "dq", diff(gq.f(), edq.data(), n, D), m.bwd);
    check(name, "dk", diff(gk.f(), edk.data(), n, D), m.bwd);
    check(name, "dv", diff(gv.f(), edv.data(), n, D), m.bwd);
    if (is_ssmax(kind)) {
        // dsc = kernel - emulation; as a Diff against eds
        std::vector<float> got(H);
        for (int h = 0; h < H; h++) got[h] = eds[h] + dsc.f()[h];
        Diff df = diff(got.data(), eds.data(), H, 1);
        double num = 0, den = 0;
        for (int h = 0; h < H; h++) { num += (double)dsc.f()[h] * dsc.f()[h]; den += (double)eds[h] * eds[h]; }
        df.rms = den > 0 ? sqrt(num / den) : 0.0;  // from the exact differences
        check(name, "ds", df, m.bwd);
    }
    check_guards(name, {&dq_, &dk_, &dv_, &ddy, &dsc, &out, &st, &gq, &gk, &gv, &scr, &ssd});
    if (rerun) {
        DevBuf out2(n * 4), st2(ns * 4), gq2(n * 4), gk2(n * 4), gv2(n * 4), dsc2((size_t)H * 4, 0);
        rc = cuda_attn_forward(&dd, mma, LSSAR_F32, B, T, T, T, H, D, dq_.f(), dk_.f(), dv_.f(), out2.f(), st2.f(), scr.p(), NULL);
        if (!rc)
            rc = cuda_attn_backward(&dd, mma, LSSAR_F32, B, T, H, D, dq_.f(), dk_.f(), dv_.f(), out2.f(), st2.f(), ddy.f(), gq2.f(),
                                    gk2.f(), gv2.f(), is_ssmax(kind) ? dsc2.f() : NULL, scr.p(), NULL);
        if (rc) { result(false, "%-44s rerun failed: %s", name.c_str(), lssar_errmsg()); return; }
        std::vector<float> a, b;
        for (const DevBuf *x : {&out, &st, &gq, &gk, &gv}) a.insert(a.end(), x->f(), x->f() + x->bytes / 4);
        for (const DevBuf *x : {&out2, &st2, &gq2, &gk2, &gv2}) b.insert(b.end(), x->f(), x->f() + x->bytes / 4);
        check_exact(name, "rerun", a.data(), b.data(), a.size());
    }
}

// ------------------------------------------------------------------ non-finite inputs

// got against ref where NaN may occur: the NaN positions must be the same; the rest as diff().
static Diff diff_nan(const float *got, const float *ref, size_t n, size_t len) {
    std::vector<float> g(got, got + n), r(ref, ref + n);
    size_t apart = 0;
    for (size_t i = 0; i < n; i++) {
        bool gn = std::isnan(g[i]), rn = std::isnan(r[i]);
        apart += gn != rn;
        if (gn || rn) g[i] = r[i] = 0.0f;
    }
    Diff d = diff(g.data(), r.data(), n, len);
    d.bad += apart;
    return d;
}

/* One non-finite element (value val at position t0, head 0, channel 1 of q, k or v; tensor 0..2):
   the kernels must give the emulation's NaN pattern and, elsewhere, its values within the
   allowances of the clean inputs (tests/attn_ref.h check_nonfinite checks the emulation itself).
   A row whose logits are all NaN has no argmax: the guard bytes (and ASan) see a read of v at row
   -1, and row INT_MAX crashes. */
static void run_nonfinite(int kind, int mma, int tensor, int t0, float val, uint64_t seed) {
    const int B = 1, T = 130, H = 2, D = 16;
    char tag[64];
    snprintf(tag, sizeof tag, "nonfinite %c[%d]=%g", "qkv"[tensor], t0, val);
    std::string name = case_name(tag, kind, mma, B, T, T, T, H, D);
    if (!selected(name)) return;
    case_t0 = now_s();
    const size_t n = (size_t)B * T * H * D;
    Rng rng(seed);
    std::vector<float> q(n), k(n), v(n), dy(n), ss;
    fill(q, rng, 1.0f);
    fill(k, rng, 1.0f);
    fill(v, rng, 1.0f);
    fill(dy, rng, 1.0f);
    lssar_attn_desc d = make_desc(kind, ss, H, 0);
    const flash_mode mode = mma ? FLASH_BF16 : FLASH_FP32;
    const size_t ns = flash_emu_stats_floats(&d, B, T, H, D);
    std::vector<float> eo(n), es(ns), edq(n), edk(n), edv(n), eds(H, 0.0f);
    // the allowances: from the clean inputs (the statistics of the emulation's clean forward)
    if (flash_emu_forward(&d, mode, B, T, T, T, H, D, q.data(), k.data(), v.data(), eo.data(), es.data())) {
        result(false, "%-44s emulation failed: %s", name.c_str(), lssar_errmsg());
        return;
    }
    Model m = model(d, mma, 0, B, T, T, T, H, D, q.data(), k.data(), es.data());
    std::vector<float> *x = tensor == 0 ? &q : tensor == 1 ? &k : &v;
    (*x)[((size_t)t0 * H + 0) * D + 1] = val;
    if (flash_emu_forward(&d, mode, B, T, T, T, H, D, q.data(), k.data(), v.data(), eo.data(), es.data()) ||
        flash_emu_backward(&d, mode, B, T, H, D, q.data(), k.data(), v.data(), eo.data(), es.data(), dy.data(), edq.data(),
                           edk.data(), edv.data(), is_ssmax(kind) ? eds.data() : NULL)) {
        result(false, "%-44s emulation failed: %s", name.c_str(), lssar_errmsg());
        return;
    }
    DevBuf dq_, dk_, dv_, ddy, dsc((size_t)H * sizeof(float), 0), out(n * 4), st(ns * 4), gq(n * 4), gk(n * 4), gv(n * 4);
    to_dev(dq_, q); to_dev(dk_, k); to_dev(dv_, v); to_dev(ddy, dy);
    DevBuf scr(cuda_attn_scratch_bytes(&d, B, T, T, H, D));
    DevBuf ssd((size_t)H * 4);
    memcpy(ssd.p(), ss.data(), (size_t)H * 4);
    lssar_attn_desc dd = d;
    if (is_ssmax(kind)) dd.ssmax_s = ssd.f();
    int rc = cuda_attn_forward(&dd, mma, LSSAR_F32, B, T, T, T, H, D, dq_.f(), dk_.f(), dv_.f(), out.f(), st.f(), scr.p(), NULL);
    if (!rc)
        rc = cuda_attn_backward(&dd, mma, LSSAR_F32, B, T, H, D, dq_.f(), dk_.f(), dv_.f(), out.f(), st.f(), ddy.f(), gq.f(), gk.f(),
                                gv.f(), is_ssmax(kind) ? dsc.f() : NULL, scr.p(), NULL);
    if (rc) {
        result(false, "%-44s kernels failed: %s", name.c_str(), lssar_errmsg());
        return;
    }
    check(name, "out", diff_nan(out.f(), eo.data(), n, D), m.fwd);
    check(name, "dq", diff_nan(gq.f(), edq.data(), n, D), m.bwd);
    check(name, "dk", diff_nan(gk.f(), edk.data(), n, D), m.bwd);
    check(name, "dv", diff_nan(gv.f(), edv.data(), n, D), m.bwd);
    check_guards(name, {&dq_, &dk_, &dv_, &ddy, &dsc, &out, &st, &gq, &gk, &gv, &scr, &ssd});
}

// ------------------------------------------------------------------ decode: Tq < Tk, a kv cache

static void run_decode(int kind, int mma, int B, int Tq, int Tk, int kvs, int H, int D, uint64_t seed) {
    std::string name = case_name("decode", kind, mma, B, Tq, Tk, kvs, H, D);
    if (!selected(name)) return;
    case_t0 = now_s();
    const size_t nq = (size_t)B * Tq * H * D, nk = (size_t)B * kvs * H * D;
    Rng rng(seed);
    std::vector<float> q(nq), k(nk), v(nk), ss;
    fill(q, rng, 1.0f);
    fill(k, rng, 1.0f);
    fill(v, rng, 1.0f);
    for (int b = 0; b < B; b++)  // the cache rows past Tk are not the sequence's: NaN must not leak
        for (size_t e = (size_t)Tk * H * D; e < (size_t)kvs * H * D; e++) k[b * (size_t)kvs * H * D + e] = v[b * (size_t)kvs * H * D + e] = NAN;
    lssar_attn_desc d = make_desc(kind, ss, H, (int)(seed & 1));
    const size_t ns = flash_emu_stats_floats(&d, B, Tq, H, D);
    std::vector<float> eo(nq), es(ns);
    if (flash_emu_forward(&d, mma ? FLASH_BF16 : FLASH_FP32, B, Tq, Tk, kvs, H, D, q.data(), k.data(), v.data(), eo.data(),
                          es.data())) {
        result(false, "%-44s emulation failed: %s", name.c_str(), lssar_errmsg());
        return;
    }
    Model m = model(d, mma, 0, B, Tq, Tk, kvs, H, D, q.data(), k.data(), es.data());
    DevBuf dq_, dk_, dv_, out(nq * 4), st(ns * 4), out2(nq * 4), scr(cuda_attn_scratch_bytes(&d, B, Tq, Tk, H, D)), ssd((size_t)H * 4);
    to_dev(dq_, q); to_dev(dk_, k); to_dev(dv_, v);
    memcpy(ssd.p(), ss.data(), (size_t)H * 4);
    lssar_attn_desc dd = d;
    if (is_ssmax(kind)) dd.ssmax_s = ssd.f();
    int rc = cuda_attn_forward(&dd, mma, LSSAR_F32, B, Tq, Tk, kvs, H, D, dq_.f(), dk_.f(), dv_.f(), out.f(), st.f(), scr.p(), NULL);
    if (!rc) rc = cuda_attn_forward(&dd, mma, LSSAR_F32, B, Tq, Tk, kvs, H, D, dq_.f(), dk_.f(), dv_.f(), out2.f(), NULL, scr.p(), NULL);
    if (rc) { result(false, "%-44s kernels failed: %s", name.c_str(), lssar_errmsg()); return; }
    check(name, "out", diff(out.f(), eo.data(), nq, D), m.fwd);
    check_stats(name, kind, st.f(), es.data(), B, Tq, H, D, m.fwd);
    check_exact(name, "no-stats", out2.f(), out.f(), nq);
    check_guards(name, {&dq_, &dk_, &dv_, &out, &st, &out2, &scr, &ssd});
}

// ------------------------------------------------------------------ the public API

// bf16 storage: against the emulation's BF16 mode on the same bf16-valued inputs (outputs rounded
// to bf16 for the comparison); fp32 storage: bit-identical to the cuda_attn_* SIMT path.
static void run_api(int kind, int B, int T, int H, int D, uint64_t seed) {
    std::string name = case_name("api-bf16", kind, 1, B, T, T, T, H, D);
    if (!selected(name)) return;
    case_t0 = now_s();
    const size_t n = (size_t)B * T * H * D;
    Rng rng(seed);
    std::vector<float> q(n), k(n), v(n), dy(n), ss;
    for (auto *x : {&q, &k, &v, &dy}) {
        fill(*x, rng, 1.0f);
        for (auto &e : *x) e = bf16_round(e);
    }
    lssar_attn_desc d = make_desc(kind, ss, H, (int)(seed & 1));
    const size_t ns = flash_emu_stats_floats(&d, B, T, H, D);
    const flash_params fpk = stage_params(kind);
    std::vector<float> eo(n), es(ns), edq(n), edk(n), edv(n), eds(H, 0.0f), eob(n);
    flash_emu_forward(&d, FLASH_BF16, B, T, T, T, H, D, q.data(), k.data(), v.data(), eo.data(), es.data());
    for (size_t i = 0; i < n; i++) eob[i] = bf16_round(eo[i]);
    // the API's lssa backward reads the stored (bf16) output: give the emulation the same
    flash_emu_backward(&d, FLASH_BF16, B, T, H, D, q.data(), k.data(), v.data(), !flash_centred(&fpk) ? eob.data() : eo.data(),
                       es.data(), dy.data(), edq.data(), edk.data(), edv.data(), is_ssmax(kind) ? eds.data() : NULL);
    Model m = model(d, 1, 1, B, T, T, T, H, D, q.data(), k.data(), es.data());
    DevBuf bq(n * 2), bk(n * 2), bv(n * 2), bdy(n * 2), bo(n * 2), bdq(n * 2), bdk(n * 2), bdv(n * 2), ds((size_t)H * 4), ssd((size_t)H * 4);
    for (size_t i = 0; i < n; i++) {
        bq.h()[i] = cuda_host_bf16_rn(q[i]); bk.h()[i] = cuda_host_bf16_rn(k[i]);
        bv.h()[i] = cuda_host_bf16_rn(v[i]); bdy.h()[i] = cuda_host_bf16_rn(dy[i]);
    }
    memcpy(ssd.p(), ss.data(), (size_t)H * 4);
    lssar_attn_desc dd = d;
    if (is_ssmax(kind)) dd.ssmax_s = ssd.f();
    DevBuf ws(lssar_attn_cuda_workspace_size(&d, LSSAR_BF16, B, T, H, D));
    int rc = lssar_attn_forward_cuda(&dd, LSSAR_BF16, B, T, H, D, bq.p(), bk.p(), bv.p(), bo.p(), ws.p(), NULL);
    if (!rc)
        rc = lssar_attn_backward_cuda(&dd, LSSAR_BF16, B, T, H, D, bq.p(), bk.p(), bv.p(), bo.p(), bdy.p(), bdq.p(), bdk.p(),
                                      bdv.p(), is_ssmax(kind) ? ds.f() : NULL, ws.p(), NULL);
    if (rc) { result(false, "%-44s api failed: %s", name.c_str(), lssar_errmsg()); return; }
    auto tof = [n](const DevBuf &x) { std::vector<float> f(n); for (size_t i = 0; i < n; i++) f[i] = cuda_host_bf16_to_float(x.h()[i]); return f; };
    auto rnd = [n](const std::vector<float> &x) { std::vector<float> f(n); for (size_t i = 0; i < n; i++) f[i] = bf16_round(x[i]); return f; };
    check(name, "out", diff(tof(bo).data(), eob.data(), n, D), m.fwd);
    check(name, "dq", diff(tof(bdq).data(), rnd(edq).data(), n, D), m.bwd);
    check(name, "dk", diff(tof(bdk).data(), rnd(edk).data(), n, D), m.bwd);
    check(name, "dv", diff(tof(bdv).data(), rnd(edv).data(), n, D), m.bwd);
    if (is_ssmax(kind)) check(name, "ds", diff(ds.f(), eds.data(), H, 1), m.bwd);  // written (started NaN)
    check_guards(name, {&bq, &bk, &bv, &bdy, &bo, &bdq, &bdk, &bdv, &ds, &ssd, &ws});

    // fp32 storage through the API = the SIMT kernels of cuda_attn_* (ds: written, not added)
    std::string name32 = case_name("api-f32", kind, 0, B, T, T, T, H, D);
    DevBuf fq, fk, fv, fdy, fo(n * 4), fdq(n * 4), fdk(n * 4), fdv(n * 4), fds((size_t)H * 4);
    to_dev(fq, q); to_dev(fk, k); to_dev(fv, v); to_dev(fdy, dy);
    DevBuf ws32(lssar_attn_cuda_workspace_size(&d, LSSAR_F32, B, T, H, D));
    rc = lssar_attn_forward_cuda(&dd, LSSAR_F32, B, T, H, D, fq.p(), fk.p(), fv.p(), fo.p(), ws32.p(), NULL);
    if (!rc)
        rc = lssar_attn_backward_cuda(&dd, LSSAR_F32, B, T, H, D, fq.p(), fk.p(), fv.p(), fo.p(), fdy.p(), fdq.p(), fdk.p(),
                                      fdv.p(), is_ssmax(kind) ? fds.f() : NULL, ws32.p(), NULL);
    DevBuf co(n * 4), cst(ns * 4), cdq(n * 4), cdk(n * 4), cdv(n * 4), cds((size_t)H * 4, 0), cscr(cuda_attn_scratch_bytes(&d, B, T, T, H, D));
    if (!rc) rc = cuda_attn_forward(&dd, 0, LSSAR_F32, B, T, T, T, H, D, fq.f(), fk.f(), fv.f(), co.f(), cst.f(), cscr.p(), NULL);
    if (!rc)
        rc = cuda_attn_backward(&dd, 0, LSSAR_F32, B, T, H, D, fq.f(), fk.f(), fv.f(), co.f(), cst.f(), fdy.f(), cdq.f(), cdk.f(), cdv.f(),
                                is_ssmax(kind) ? cds.f() : NULL, cscr.p(), NULL);
    if (rc) { result(false, "%-44s api failed: %s", name32.c_str(), lssar_errmsg()); return; }
    std::vector<float> a, b;
    for (const DevBuf *x : {&fo, &fdq, &fdk, &fdv}) a.insert(a.end(), x->f(), x->f() + n);
    for (const DevBuf *x : {&co, &cdq, &cdk, &cdv}) b.insert(b.end(), x->f(), x->f() + n);
    if (is_ssmax(kind)) { a.insert(a.end(), fds.f(), fds.f() + H); b.insert(b.end(), cds.f(), cds.f() + H); }
    check_exact(name32, "vs cuda_attn", a.data(), b.data(), a.size());
}

// ------------------------------------------------------------------ host-side checks

static void run_host_checks() {
    const std::string name = "host";
    if (!selected(name)) return;
    case_t0 = now_s();
    std::vector<float> ss;
    lssar_attn_desc d = make_desc(LSSAR_ATTN_LSSA, ss, 2);
    const int B = 1, T = 70, H = 2;
    DevBuf x((size_t)B * T * H * 128 * 4, 0), y((size_t)B * T * H * 128 * 4), st(1 << 20), scr(1 << 20), ws(1 << 22);
    unsigned long l0 = cuda_host_device.launches;
    int rc = cuda_attn_forward(&d, 0, LSSAR_F32, B, T, T, T, H, 48, x.f(), x.f(), x.f(), y.f(), st.f(), scr.p(), NULL);
    result(rc == LSSAR_E_UNSUPPORTED && cuda_host_device.launches == l0, "%-44s D = 48 refused (%d: %s), nothing launched",
           name.c_str(), rc, lssar_errmsg());
    rc = cuda_attn_forward(&d, 0, LSSAR_F32, B, T, T, T, H, 32, x.f() + 1, x.f(), x.f(), y.f(), st.f(), scr.p(), NULL);
    result(rc == LSSAR_E_ARG && cuda_host_device.launches == l0, "%-44s unaligned q refused (%d: %s)", name.c_str(), rc,
           lssar_errmsg());
    rc = cuda_attn_forward(&d, 0, LSSAR_F32, B, T, T, T, H, 32, x.f(), x.f(), x.f(), y.f(), st.f(), NULL, NULL);
    result(rc == LSSAR_E_NULL && cuda_host_device.launches == l0, "%-44s NULL scratch refused (%d: %s)", name.c_str(), rc,
           lssar_errmsg());
    lssar_attn_desc sd = make_desc(LSSAR_ATTN_SSMAX, ss, 2);
    sd.ssmax_s = NULL;
    rc = cuda_attn_forward(&sd, 0, LSSAR_F32, B, T, T, T, H, 32, x.f(), x.f(), x.f(), y.f(), st.f(), scr.p(), NULL);
    result(rc == LSSAR_E_SSMAX, "%-44s ssmax without scales refused (%d)", name.c_str(), rc);
    rc = cuda_attn_forward(&d, 0, LSSAR_F32, B, 65536 * 64, 65536 * 64, 65536 * 64, H, 32, x.f(), x.f(), x.f(), y.f(), st.f(), scr.p(), NULL);
    result(rc == LSSAR_E_SIZE && cuda_host_device.launches == l0, "%-44s T = 2^22 (grid.y > 65535) refused (%d)", name.c_str(), rc);
    rc = lssar_attn_forward_cuda(&d, (lssar_dtype)7, B, T, H, 32, x.p(), x.p(), x.p(), y.p(), ws.p(), NULL);
    result(rc == LSSAR_E_ARG, "%-44s api: unknown dtype refused (%d)", name.c_str(), rc);
    size_t need = lssar_attn_cuda_workspace_size(&d, LSSAR_BF16, B, T, H, 32);
    size_t parts = (cuda_attn_stats_floats(&d, B, T, H, 32) * 4 + 255) / 256 * 256 + cuda_attn_scratch_bytes(&d, B, T, T, H, 32);
    result(need == parts && cuda_attn_stats_floats(&d, B, T, H, 32) == flash_emu_stats_floats(&d, B, T, H, 32),
           "%-44s api workspace %zu = stats + scratch, stats floats as the emulation's", name.c_str(), need);
    // The shared-memory opt-in: an A100 (163 KB per block) cannot hold the SIMT D = 128 dK / dV
    // kernel's tiles; the forward (105 KB) fits. prepare() must say so before launching anything.
    cuda_host_device.smem_optin = 166912;
    DevBuf g((size_t)B * T * H * 128 * 4);
    rc = cuda_attn_forward(&d, 0, LSSAR_F32, B, T, T, T, H, 128, x.f(), x.f(), x.f(), y.f(), st.f(), scr.p(), NULL);
    result(rc == 0, "%-44s A100 limit: SIMT D = 128 forward runs (%d)", name.c_str(), rc);
    l0 = cuda_host_device.launches;
    rc = cuda_attn_backward(&d, 0, LSSAR_F32, B, T, H, 128, x.f(), x.f(), x.f(), y.f(), st.f(), x.f(), g.f(), g.f(), g.f(), NULL, scr.p(), NULL);
    const char *msg = lssar_errmsg();
    result(rc == LSSAR_E_UNSUPPORTED && strstr(msg, "shared memory"), "%-44s A100 limit: SIMT D = 128 backward refused (%d: %s)",
           name.c_str(), rc, msg);
    cuda_host_device.smem_optin = 232448;
    result(cudaGetLastError() == cudaSuccess, "%-44s no launch error left behind", name.c_str());
    result(lssar_cuda_device_count() == 1, "%-44s the emulated device is counted (%d)", name.c_str(), lssar_cuda_device_count());
    check_guards(name, {&x, &y, &st, &scr, &ws, &g});
}

// ------------------------------------------------------------------ the shim itself

// mma: lane l puts A, B, C of the 16x16 x 16x8 product into its fragments by the PTX ISA table,
// written here in the other direction (element -> lane, register, half), runs the emulated
// instruction, and checks its D elements against the product summed in double.
__global__ void shim_mma_kernel(const float *A, const float *B, const float *C, float *Dout) {
    const int l = threadIdx.x;
    uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
    float c[4] = {0, 0, 0, 0};
    for (int r = 0; r < 16; r++)
        for (int k = 0; k < 16; k++)
            if ((r % 8) * 4 + (k % 8) / 2 == l)
                a[(r >= 8) + 2 * (k >= 8)] |= (uint32_t)cuda_host_bf16_rn(A[r * 16 + k]) << (16 * (k % 2));
    for (int k = 0; k < 16; k++)
        for (int n = 0; n < 8; n++)
            if (n * 4 + (k % 8) / 2 == l) b[k >= 8] |= (uint32_t)cuda_host_bf16_rn(B[k * 8 + n]) << (16 * (k % 2));
    for (int r = 0; r < 16; r++)
        for (int n = 0; n < 8; n++)
            if ((r % 8) * 4 + n / 2 == l) c[2 * (r >= 8) + n % 2] = C[r * 8 + n];
    cuda_host_mma_bf16(c, a, b[0], b[1]);
    for (int r = 0; r < 16; r++)
        for (int n = 0; n < 8; n++)
            if ((r % 8) * 4 + n / 2 == l) Dout[r * 8 + n] = c[2 * (r >= 8) + n % 2];
}
// shuffles, __syncthreads with returned threads, static and dynamic shared memory
__global__ void shim_sync_kernel(int *out, int n_early) {
    const int t = threadIdx.x;
    int *sh = cuda_host_static_shared<int>(256);
    unsigned char *dyn = cuda_host_dynamic_shared();
    int x = __shfl_xor_sync(0xffffffffu, t, 5);  // every warp: lane ^ 5
    out[t] = x;
    if (t >= (int)blockDim.x - n_early) return;  // the last warps leave; the barriers go on
    sh[t] = t * 3;
    dyn[t] = (unsigned char)t;
    __syncthreads();
    out[256 + t] = sh[(t + 1) % (blockDim.x - n_early)] + dyn[(t + 7) % (blockDim.x - n_early)];
    __syncthreads();
}
__global__ void shim_empty_kernel(int *p) { if (threadIdx.x == 0) p[blockIdx.x + gridDim.x * blockIdx.y] += 1; }

static void run_shim_checks() {
    const std::string name = "shim";
    if (!selected(name)) return;
    Rng rng(77);
    std::vector<float> A(256), B(128), C(128), Dv(128, NAN);
    fill(A, rng, 1.0f); fill(B, rng, 1.0f); fill(C, rng, 1.0f);
    cuda_host_launch(shim_mma_kernel, 1, 32, 0, NULL)(A.data(), B.data(), C.data(), Dv.data());
    double worst = 0;
    for (int r = 0; r < 16; r++)
        for (int n = 0; n < 8; n++) {
            double s = C[r * 8 + n], m = fabs(s);
            for (int k = 0; k < 16; k++) {
                double p = (double)bf16_round(A[r * 16 + k]) * bf16_round(B[k * 8 + n]);
                s += p;
                m += fabs(p);
            }
            worst = std::max(worst, fabs(Dv[r * 8 + n] - s) / m);  // 16 fp32 roundings of terms <= m
        }
    result(worst <= 16 * FLT_EPSILON, "%-44s mma.m16n8k16 from the PTX fragment table: D = A B + C within %.1e (16 roundings)",
           name.c_str(), worst);

    std::vector<int> out(512, -1);
    cuda_host_launch(shim_sync_kernel, 1, 256, 256, NULL)(out.data(), 64);
    bool ok = true;
    for (int t = 0; t < 256; t++) ok &= out[t] == ((t & ~31) | ((t & 31) ^ 5));
    for (int t = 0; t < 192; t++) ok &= out[256 + t] == 3 * ((t + 1) % 192) + (t + 7) % 192;
    result(ok && cudaGetLastError() == cudaSuccess, "%-44s shuffles, __syncthreads after 64 threads returned, shared memory",
           name.c_str());

    std::vector<int> cnt(6, 0);
    cuda_host_launch(shim_empty_kernel, dim3(3, 2), 64, 0, NULL)(cnt.data());
    result(std::count(cnt.begin(), cnt.end(), 1) == 6, "%-44s a 3 x 2 grid runs every block once", name.c_str());
    unsigned long l0 = cuda_host_device.launches;
    cuda_host_launch(shim_empty_kernel, 1, 1025, 0, NULL)(cnt.data());
    cudaError_t e1 = cudaGetLastError();
    cuda_host_launch(shim_empty_kernel, dim3(1, 65536), 32, 0, NULL)(cnt.data());
    cudaError_t e2 = cudaGetLastError();
    cuda_host_launch(shim_empty_kernel, 1, 32, 64 * 1024, NULL)(cnt.data());
    cudaError_t e3 = cudaGetLastError();
    result(e1 == cudaErrorInvalidConfiguration && e2 == cudaErrorInvalidConfiguration && e3 == cudaErrorInvalidValue &&
               cuda_host_device.launches == l0,
           "%-44s refused launches: 1025 threads (%s), grid.y 65536 (%s), 64 KB without the opt-in (%s)", name.c_str(),
           cudaGetErrorName(e1), cudaGetErrorName(e2), cudaGetErrorName(e3));
    cudaError_t e4 = cudaFuncSetAttribute(shim_empty_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024);
    cuda_host_launch(shim_empty_kernel, 1, 32, 64 * 1024, NULL)(cnt.data());
    cudaError_t e5 = cudaGetLastError();
    result(e4 == cudaSuccess && e5 == cudaSuccess && cnt[0] == 2, "%-44s 64 KB after cudaFuncSetAttribute runs", name.c_str());
}

// A kind the fused path does not support: the workspace size is 0, and the forward, the backward and
// the internal entry points return LSSAR_E_UNSUPPORTED with a message that names the kind (so the
// grids' skip cannot hide a wrong answer), before any launch.
static void run_refused(int kind) {
    std::string name = case_name("refused", kind, 0, 1, 4, 4, 4, 2, 16);
    if (!selected(name)) return;
    std::vector<float> ss;
    lssar_attn_desc d = make_desc(kind, ss, 2);
    DevBuf ssd(2 * 4), buf(4096, 0), ws(4096, 0);
    memcpy(ssd.p(), ss.data(), ss.size() * 4);
    if (is_ssmax(kind)) d.ssmax_s = ssd.f();
    const unsigned long l0 = cuda_host_device.launches;
    auto named = [&](int rc) {
        return rc == LSSAR_E_UNSUPPORTED && strstr(lssar_errmsg(), lssar_attn_name((lssar_attn_kind)kind)) &&
               strstr(lssar_errmsg(), "issue 34");
    };
    size_t wsz = lssar_attn_cuda_workspace_size(&d, LSSAR_F32, 1, 4, 2, 16);
    bool ok_ws = wsz == 0 && strstr(lssar_errmsg(), "issue 34");
    void *p = buf.p();
    bool ok_f = named(lssar_attn_forward_cuda(&d, LSSAR_F32, 1, 4, 2, 16, p, p, p, p, ws.p(), NULL));
    bool ok_b =
        named(lssar_attn_backward_cuda(&d, LSSAR_F32, 1, 4, 2, 16, p, p, p, p, p, p, p, p, ssd.f(), ws.p(), NULL));
    float *f = buf.f();
    bool ok_i = named(cuda_attn_forward(&d, 0, LSSAR_F32, 1, 4, 4, 4, 2, 16, f, f, f, f, f, ws.p(), NULL)) &&
                named(cuda_attn_backward(&d, 0, LSSAR_F32, 1, 4, 2, 16, f, f, f, f, f, f, f, f, f, ssd.f(), ws.p(),
                                         NULL));
    result(ok_ws && ok_f && ok_b && ok_i && cuda_host_device.launches == l0,
           "%-44s workspace %zu (%d), forward %d, backward %d, internal %d: LSSAR_E_UNSUPPORTED, no launch",
           name.c_str(), wsz, ok_ws, ok_f, ok_b, ok_i);
}

// ------------------------------------------------------------------ the grid of cases

int main(int argc, char **argv) {
    const char *e = getenv("LSSAR_HOST_FULL");
    full_mode = (e && *e && strcmp(e, "0")) || (argc > 1 && !strcmp(argv[1], "full"));
    filter = getenv("LSSAR_HOST_FILTER");
    if (filter && !*filter) filter = NULL;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    printf("test_flash_host: the CUDA attention kernels on the CPU (tests/cuda_host/cuda_host.h) against "
           "flash_emu, %s mode\n", full_mode ? "full" : "quick (LSSAR_HOST_FULL=1: all cases)");

    run_shim_checks();
    run_host_checks();
    for (int kind = 0; kind < NKINDS; kind++) if (!fused_ok(kind)) run_refused(kind);
    static const int Ts[] = {1, 63, 64, 65, 130};
    static const int Ds[] = {16, 32, 64, 128};
    uint64_t seed = 1;
    for (int kind = 0; kind < NKINDS; kind++) if (fused_ok(kind))
        for (int mma = 0; mma < 2; mma++)
            for (int ti = 0; ti < 5; ti++)
                for (int di = 0; di < 4; di++, seed++) {
                    const int T = Ts[ti], D = Ds[di];
                    // quick: T = 65 (two query and key tiles, a one-row last tile) at one D per
                    // kind x mode (each mode sees all four D), and T = 1, T = 64 (one full tile)
                    // and T = 130 (three tiles) at D = 16. B = 2 except at T = 130 (and, in the
                    // quick mode, at D = 128, the slowest: the batch offsets are covered at T <= 65)
                    bool quick = (T == 65 && di == (kind + 2 * mma) % 4) || (D == 16 && (T == 130 || T == 1 || T == 64));
                    if (!full_mode && !quick) continue;
                    const int B = T > 65 || (!full_mode && D == 128) ? 1 : 2;
                    run_case(kind, mma, B, T, 2, D, seed, PLAIN, T == 64);
                }
    for (int kind = 0; kind < NKINDS; kind++) if (fused_ok(kind))
        for (int mma = 0; mma < 2; mma++)
            for (int di = 0; di < 4; di++)
                if (full_mode || di == 1) run_case(kind, mma, 1, 130, 2, Ds[di], 6000 + 10 * kind + mma, EXACT, false);
    for (int kind = 0; kind < NKINDS; kind++) if (fused_ok(kind))
        for (int mma = 0; mma < 2; mma++) {
            run_case(kind, mma, 1, 97, 2, 32, 1000 + 10 * kind + mma, ADVERSARIAL, false);
            run_decode(kind, mma, 2, 1, 70, 100, 2, 32, 2000 + 10 * kind + mma);
            run_decode(kind, mma, 1, 5, 130, 130, 2, 16, 3000 + 10 * kind + mma);
            if (full_mode || mma) run_decode(kind, mma, 1, 66, 131, 140, 1, 64, 4000 + 10 * kind + mma);
        }
    for (int kind = 0; kind < NKINDS; kind++) if (fused_ok(kind)) run_api(kind, 1, 70, 2, 32, 5000 + kind);
    // bf16 storage over four tiles: the cp.async double buffers of the forward's and the row
    // pass's key tiles and dK / dV's query tiles each take their third tile into a reused buffer
    for (int kind = 0; kind < NKINDS; kind++)
        if (fused_ok(kind) && (full_mode || kind == LSSAR_ATTN_SOFTMAX || kind == LSSAR_ATTN_LSSAR))
            run_api(kind, 1, 200, 1, kind == LSSAR_ATTN_LSSAR ? 64 : 16, 5100 + kind);
    // non-finite inputs: NaN in q (rows without an argmax), k (key 1: rows 1 and 2 have lssar's
    // o = 0) and v; +inf in q (lssa / lssar: every logit NaN), -inf in k
    // (quick: each case in one of the two modes, alternating)
    for (int kind = 0; kind < NKINDS; kind++) if (fused_ok(kind))
        for (int mma = 0; mma < 2; mma++) {
            uint64_t sd = 8000 + 10 * kind + mma;
            if (full_mode || (kind + 0) % 2 == mma) run_nonfinite(kind, mma, 0, 70, NAN, sd);
            if (full_mode || (kind + 1) % 2 == mma) run_nonfinite(kind, mma, 1, 1, NAN, sd);
            if (full_mode || (kind + 0) % 2 == mma) run_nonfinite(kind, mma, 2, 70, NAN, sd);
            if (full_mode || (kind + 1) % 2 == mma) run_nonfinite(kind, mma, 0, 70, INFINITY, sd);
            if (full_mode || (kind + 0) % 2 == mma) run_nonfinite(kind, mma, 1, 70, -INFINITY, sd);
        }
    // another head size's temperature (temp_d): the kernels read it as the emulation does
    for (int kind = 0; kind < NKINDS; kind++) if (fused_ok(kind))
        for (int mma = 0; mma < 2; mma++) {
            if (stages(kind).score != LSSAR_SCORE_COS) continue;
            case_temp_d = 64;
            run_case(kind, mma, 1, 130, 2, 16, 7000 + 10 * kind + mma, PLAIN, false);
            case_temp_d = 0;
        }

    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("(%.1f s, %lu kernel launches)\n", (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec),
           cuda_host_device.launches);
    printf("test_flash_host: %d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
