// rng.c - xoshiro256** (Blackman & Vigna) seeded by splitmix64; see util.h.
#include <math.h>
#include "util.h"

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void lssar_rng_seed(lssar_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

void lssar_rng_stream(lssar_rng *r, uint64_t seed, uint64_t index) {
    uint64_t x = seed ^ 0x5851f42d4c957f2dULL;
    uint64_t mixed = splitmix64(&x) ^ (index * 0xd1342543de82ef95ULL + 0x2545f4914f6cdd1dULL);
    lssar_rng_seed(r, mixed);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t lssar_rng_u64(lssar_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double lssar_rng_uniform(lssar_rng *r) { return (lssar_rng_u64(r) >> 11) * 0x1.0p-53; }

uint64_t lssar_rng_below(lssar_rng *r, uint64_t n) {
    if (n == 0) return 0;
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;  // reject the biased tail
    uint64_t x;
    do x = lssar_rng_u64(r); while (x >= limit);
    return x % n;
}

double lssar_rng_normal(lssar_rng *r) {
    double u1 = lssar_rng_uniform(r), u2 = lssar_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}
