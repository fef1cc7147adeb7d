/*
 * fastmath.h - exp, log, log1p, softplus, sigmoid, powers, tanh and sqrt for float32, written so
 * that GCC vectorises the loops that call them: the attention rows (src/attn) and the layers
 * (src/nn) share this one set.
 *
 * glibc's expf/log1pf/powf/tanhf are scalar calls unless the whole build uses -ffast-math (and
 * sqrtf keeps an errno branch), and these run once or twice per attention score and per entry of
 * a 50k vocabulary, where libm's scalar calls dominated the attention time (docs/PERF.md). These
 * are plain arithmetic (Cody-Waite range reduction + polynomials in a * b + c form, which GCC
 * turns into vector FMA instructions where the target has FMA), branch-free, accurate to about 2
 * float32 ulp over the ranges used, and tested against float64 in tests/test_attention.c
 * (test_math_functions) and tests/test_layers.c (test_vmath).
 *
 * Callers must be compiled with -fno-trapping-math (the Makefile sets it for src/attn and src/nn):
 * the selects below (x < -87.3 ? 0 : y, big ? a : b) are turned into branches by earlier passes,
 * and under the default -ftrapping-math GCC may only if-convert such branches back into vector
 * blends with AVX-512 masked arithmetic, so with SSE/AVX2 the loops stayed scalar.
 *
 * Every function is FM_FN and uses no library call, so a CUDA file can include this
 * header too (FM_FN adds __host__ __device__ under nvcc) and run the same per-element math.
 */
#ifndef LSSAR_FASTMATH_H
#define LSSAR_FASTMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define FM_FN static inline __host__ __device__
#else
#define FM_FN static inline
#endif

// a * b + c. Plain arithmetic, not fmaf: the files including this are built with
// -ffp-contract=fast (Makefile), so it becomes one FMA wherever the target has FMA, including the
// AVX2/AVX-512 clones of a portable build (dispatch.h), where `#ifdef __FMA__` is a preprocessor
// test and false; and fmaf without hardware support is a slow library call that blocks
// vectorising. The polynomials below are accurate to ~2 ulp either way (tests/test_attention.c
// test_math_functions runs in every build).
#define FM_FMA(a, b, c) ((a) * (b) + (c))

FM_FN float fm_bits_to_float(int32_t i) { float f; memcpy(&f, &i, 4); return f; }
FM_FN int32_t fm_float_to_bits(float f) { int32_t i; memcpy(&i, &f, 4); return i; }

/* x rounded to the nearest bfloat16, ties to even, as its 16 bits: the upper 16 bits of
   x + 0x7FFF + (bit 16 of x), which is round-to-nearest-even on every finite x, subnormals
   included (fp32 and bf16 share the exponent range, so a subnormal keeps its top 7 fraction
   bits, rounded), carries into the exponent (the largest values round to inf) and keeps +-inf
   and +-0. A NaN gives the canonical bf16 NaN 0x7FFF (CUDART_NAN_BF16, what cuda_bf16.hpp's host
   conversion returns). The one host definition: the attention's flash_bf16, the GEMM casts'
   km_bf16_rne and the fake GPU use it (on the device, the conversion instruction). */
FM_FN uint16_t fm_bf16_rne(float x) {
    uint32_t b = (uint32_t)fm_float_to_bits(x);
    if ((b & 0x7fffffffu) > 0x7f800000u) return 0x7fff;  // NaN
    b += 0x7fffu + ((b >> 16) & 1u);
    return (uint16_t)(b >> 16);
}
// the float a bf16 holds (exact)
FM_FN float fm_bf16_float(uint16_t h) { return fm_bits_to_float((int32_t)((uint32_t)h << 16)); }

/* exp(x). Exactly 0 below -87.3 (where float32 would go subnormal), clamped to exp(88) above. */
FM_FN float fm_exp(float x) {
    float xc = x > 88.0f ? 88.0f : x;
    xc = xc < -87.0f ? -87.0f : xc;
    // n = round(x / ln 2) with the 1.5 * 2^23 trick (exact, no libm call)
    float t = xc * 1.44269504088896341f;
    float n = (t + 12582912.0f) - 12582912.0f;
    // x NaN: (int32_t)NaN is UB (INT_MIN on x86, then a negative << 23); y stays NaN via p
    n = n == n ? n : 0.0f;
    // r = x - n ln2 in two pieces so r keeps full precision
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    // exp(r) on |r| <= ln2 / 2: 1 + r + r^2 P(r), P of degree 5 (minimax-fitted coefficients)
    float r2 = r * r;
    float p = 1.9875691500e-4f;
    p = FM_FMA(p, r, 1.3981999507e-3f);
    p = FM_FMA(p, r, 8.3334519073e-3f);
    p = FM_FMA(p, r, 4.1665795894e-2f);
    p = FM_FMA(p, r, 1.6666665459e-1f);
    p = FM_FMA(p, r, 5.0000001201e-1f);
    p = FM_FMA(p, r2, r + 1.0f);
    float scale = fm_bits_to_float(((int32_t)n + 127) << 23);
    float y = p * scale;
    return x < -87.3f ? 0.0f : y;
}

/* log(x) for normal x > 0 (x < FLT_MIN gives a large negative number, not -inf). */
FM_FN float fm_log(float x) {
    int32_t b = fm_float_to_bits(x);
    int32_t e = ((b >> 23) & 0xff) - 127;
    float m = fm_bits_to_float((b & 0x007fffff) | 0x3f800000);  // [1, 2)
    // move m to [sqrt(1/2), sqrt(2)) so s below stays small
    int big = m > 1.41421356f;
    m = big ? m * 0.5f : m;
    float fe = (float)(e + big);
    // log m = 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 0.1716
    float s = (m - 1.0f) / (m + 1.0f), s2 = s * s;
    float p = 1.0f / 11.0f;
    p = FM_FMA(p, s2, 1.0f / 9.0f);
    p = FM_FMA(p, s2, 1.0f / 7.0f);
    p = FM_FMA(p, s2, 1.0f / 5.0f);
    p = FM_FMA(p, s2, 1.0f / 3.0f);
    p = FM_FMA(p, s2, 1.0f);
    return fe * 0.693147180559945f + 2.0f * s * p;
}

/* log(1 + f) for f in [sqrt(1/2) - 1, sqrt(2) - 1]: f - f^2/2 + f^3 P(f), P of degree 8 with the
   classic minimax coefficients for float32 (about 1 ulp). No division. */
FM_FN float fm_log1p_small(float f) {
    float z = f * f;
    float p = 7.0376836292e-2f;
    p = FM_FMA(p, f, -1.1514610310e-1f);
    p = FM_FMA(p, f, 1.1676998740e-1f);
    p = FM_FMA(p, f, -1.2420140846e-1f);
    p = FM_FMA(p, f, 1.4249322787e-1f);
    p = FM_FMA(p, f, -1.6668057665e-1f);
    p = FM_FMA(p, f, 2.0000714765e-1f);
    p = FM_FMA(p, f, -2.4999993993e-1f);
    p = FM_FMA(p, f, 3.3333331174e-1f);
    return f + FM_FMA(p * f, z, -0.5f * z);
}

/* log1p(y) for y in [0, 1], without a division (it was the costliest step of softplus):
   u = 1 + y rounds; log u from the polynomial above (halving u above sqrt 2); then the rounding
   c = y - (u - 1) (exact) adds c / u, with 1/u ~ 2 - u: where c matters (tiny y) u is ~1 and the
   approximation is exact to O(y^2); where u is far from 1, c is ~1e-8 of the result. */
FM_FN float fm_log1p01(float y) {
    float u = 1.0f + y;
    float c = y - (u - 1.0f);
    int big = u > 1.41421356f;
    float f = big ? 0.5f * u - 1.0f : u - 1.0f;
    float l = fm_log1p_small(f) + (big ? 0.693147180559945f : 0.0f);
    return l + c * (2.0f - u);
}

/* softplus(x) = max(x, 0) + log1p(e) and sigmoid(x) = 1 / (1 + e) (x >= 0) or e / (1 + e), from
   e = exp(-|x|) (so they never overflow) of the caller's exponential: fm_exp below, the GPU's
   exponential unit in attn/flash.h. */
FM_FN float fm_softplus_e(float x, float e) { return (x > 0.0f ? x : 0.0f) + fm_log1p01(e); }
FM_FN float fm_sigmoid_e(float x, float e) {
    float inv = 1.0f / (1.0f + e);
    return x >= 0.0f ? inv : e * inv;
}
FM_FN float fm_softplus(float x) { return fm_softplus_e(x, fm_exp(x < 0.0f ? x : -x)); }
FM_FN float fm_sigmoid(float x) { return fm_sigmoid_e(x, fm_exp(x < 0.0f ? x : -x)); }

/* sigmoid'(x) = sigmoid(x) sigmoid(-x) = e / (1 + e)^2 with e = exp(-|x|) (even in x). Not as
   s (1 - s): for x >> 0, 1 - s is all rounding (absolute error 6e-8 on a value of e^-x). */
FM_FN float fm_sigmoid_grad(float x) {
    float ax = x < 0.0f ? -x : x;
    float e = fm_exp(-ax);
    float inv = 1.0f / (1.0f + e);
    return e * inv * inv;
}

/* r^p for normal r in (0, 1] and p > 0 (0 when below float32's normal range). The caller masks
   r <= FLT_MIN itself with a select AFTER the call: a clamp inside (r < FLT_MIN ? FLT_MIN : r)
   lets GCC split off a constant-folded path and then it no longer vectorises the loop. */
FM_FN float fm_pow01(float r, float p) { return fm_exp(p * fm_log(r)); }

/* r^ip for an integer 1 <= ip < 2^NB by repeated squaring: NB squarings, exact to a few ulp and
   much cheaper than exp(p log r). NB is a constant at each call site, so the bit loop unrolls and
   the caller's loop still vectorises. */
#define FM_POWI(NB)                                                          \
    FM_FN float fm_powi##NB(float r, int ip) {                       \
        float acc = 1.0f, base = r;                                          \
        for (int t = 0; t < NB; t++) {                                       \
            acc = (ip >> t) & 1 ? acc * base : acc;                          \
            base = base * base;                                              \
        }                                                                    \
        return acc;                                                          \
    }
FM_POWI(4)
FM_POWI(6)
#undef FM_POWI


/* c ? a : b without a branch. GCC does not if-convert `x < k ? k : x` once it is inlined into an
   `omp simd` loop (float compares may trap), which left the loops calling fm_exp scalar in the
   baseline and AVX2 clones (only AVX-512's masked stores vectorised them); this bit select
   becomes a compare and a blend in every clone. NaN compares false, so NaN passes through. */
FM_FN float fm_select(int c, float a, float b) {
    int32_t m = -(int32_t)c, ia, ib, r;
    memcpy(&ia, &a, sizeof ia);
    memcpy(&ib, &b, sizeof ib);
    r = (ia & m) | (ib & ~m);
    float f;
    memcpy(&f, &r, sizeof f);
    return f;
}

/* tanh(u) = 1 - 2 / (exp(2u) + 1): absolute error ~1e-7, exact limits +-1 */
FM_FN float fm_tanh(float u) { return 1.0f - 2.0f / (fm_exp(2.0f * u) + 1.0f); }

/* sqrt(x) for x >= 0 (0 gives 0): an integer-trick 1/sqrt estimate and three Newton steps,
   then x * (1/sqrt x); relative error ~1e-7. sqrtf itself does not vectorise without
   -fno-math-errno because of its errno branch. */
FM_FN float fm_sqrt(float x) {
    int32_t i;
    memcpy(&i, &x, sizeof i);
    i = 0x5f3759df - (i >> 1);
    float y;
    memcpy(&y, &i, sizeof y);
    float h = 0.5f * x;
    y = y * (1.5f - h * y * y);
    y = y * (1.5f - h * y * y);
    y = y * (1.5f - h * y * y);
    return x * y;
}

#endif
