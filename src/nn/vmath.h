/*
 * vmath.h - exp and tanh written so that GCC vectorises the loops that call them (glibc's expf /
 * tanhf are scalar calls without -ffast-math, and these loops run over 50k-entry vocabularies).
 * nn_expf: range reduction x = n ln2 + r, |r| <= ln2/2, then a degree-7 Taylor polynomial;
 * relative error about 2e-7 (1-2 ulp). Inputs are clamped to [-87.3, 88.7], so it never returns
 * 0, inf or a subnormal; callers that must see NaN check for it themselves.
 */
#ifndef LSSAR_VMATH_H
#define LSSAR_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* c ? a : b without a branch. GCC does not if-convert `x < k ? k : x` once it is inlined into an
   `omp simd` loop (float compares may trap), which left the loops calling nn_expf scalar in the
   baseline and AVX2 clones (only AVX-512's masked stores vectorised them); this bit select
   becomes a compare and a blend in every clone. NaN compares false, so NaN passes through. */
static inline float nn_selectf(int c, float a, float b) {
    int32_t m = -(int32_t)c, ia, ib, r;
    memcpy(&ia, &a, sizeof ia);
    memcpy(&ib, &b, sizeof ib);
    r = (ia & m) | (ib & ~m);
    float f;
    memcpy(&f, &r, sizeof f);
    return f;
}

static inline float nn_expf(float x) {
    x = nn_selectf(x < -87.3f, -87.3f, x);
    x = nn_selectf(x > 88.7f, 88.7f, x);
    // round to nearest by adding and subtracting 1.5 * 2^23 (floorf does not vectorise)
    float n = (x * 1.44269504f + 12582912.0f) - 12582912.0f;
    n = n == n ? n : 0.0f;  // x NaN: (int32_t)NaN is UB (INT_MIN on x86, then a negative << 23); the result stays NaN via p
    float r = x - n * 0.693145752f - n * 1.42860677e-6f;   // ln 2 in two parts (Cody-Waite)
    float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.6666667e-1f + r * (4.1666668e-2f +
              r * (8.3333338e-3f + r * (1.3888889e-3f + r * 1.9841270e-4f))))));
    int32_t e = ((int32_t)n + 127) << 23;
    float s;
    memcpy(&s, &e, sizeof s);
    return p * s;
}

/* tanh(u) = 1 - 2 / (exp(2u) + 1): absolute error ~1e-7, exact limits +-1 */
static inline float nn_tanhf(float u) { return 1.0f - 2.0f / (nn_expf(2.0f * u) + 1.0f); }

/* sqrt(x) for x >= 0 (0 gives 0): an integer-trick 1/sqrt estimate and three Newton steps,
   then x * (1/sqrt x); relative error ~1e-7. sqrtf itself does not vectorise without
   -fno-math-errno because of its errno branch. */
static inline float nn_sqrtf(float x) {
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
