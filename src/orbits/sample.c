// sample.c - the distributions of planetary systems; see sample.h.
#include <math.h>
#include <stddef.h>
#include <string.h>
#include "orbits/kepler.h"
#include "orbits/sample.h"

// orb_system is written to disk as is: pin its layout.
_Static_assert(sizeof(orb_planet) == 40, "orb_planet must be 40 bytes");
_Static_assert(sizeof(orb_system) == 464, "orb_system must be 464 bytes (on-disk record)");
_Static_assert(offsetof(orb_system, p) == 64, "orb_system.p must start at byte 64");
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the orbit metadata files are little-endian; this host is not"
#endif

// (0, 1]: safe for log and for u^(1/a).
static inline double uniform_pos(lssar_rng *r) { return 1.0 - lssar_rng_uniform(r); }

double orb_gamma(lssar_rng *r, double shape) {
    if (shape < 1.0) {
        // Gamma(a) = Gamma(a + 1) U^(1/a) (Marsaglia & Tsang, section 6)
        double g = orb_gamma(r, shape + 1.0);
        return g * pow(uniform_pos(r), 1.0 / shape);
    }
    double d = shape - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x, v;
        do {
            x = lssar_rng_normal(r);
            v = 1.0 + c * x;
        } while (v <= 0.0);
        v = v * v * v;
        double u = uniform_pos(r), x2 = x * x;
        if (u < 1.0 - 0.0331 * x2 * x2) return d * v;                      // squeeze
        if (log(u) < 0.5 * x2 + d * (1.0 - v + log(v))) return d * v;      // exact test
    }
}

double orb_beta(lssar_rng *r, double a, double b) {
    double x = orb_gamma(r, a), y = orb_gamma(r, b);
    return x / (x + y);
}

static double clip(double v, double lo, double hi) { return v < lo ? lo : v > hi ? hi : v; }

double orb_sample_planet_mass(lssar_rng *r, int preset) {
    if (preset == ORB_PRESET_PAPER)  // LogUniform(1e-7, 1e-3)
        return exp(log(1e-7) + lssar_rng_uniform(r) * (log(1e-3) - log(1e-7)));
    // scipy's gamma(shape 0.32020, loc 6.0098e-8, scale 1.10559e-3) fitted by the released code
    double m = 6.0098e-8 + 1.10559e-3 * orb_gamma(r, 0.32020);
    return clip(m, 1e-9, 1e-3);
}

double orb_sample_star_mass(lssar_rng *r, int preset) {
    if (preset == ORB_PRESET_PAPER) return 0.5 + 4.5 * lssar_rng_uniform(r);
    // scipy's lognorm(s 0.200446, loc -0.679371, scale 1.627161) fitted by the released code
    double m = -0.679371 + 1.627161 * exp(0.200446 * lssar_rng_normal(r));
    return clip(m, 0.1, 5.0);
}

double orb_sample_sma(lssar_rng *r, int preset) {
    double hi = preset == ORB_PRESET_PAPER ? 42.0 : 32.0;
    return 0.3 + (hi - 0.3) * lssar_rng_uniform(r);
}

double orb_sample_ecc(lssar_rng *r) { return orb_beta(r, 0.867, 3.03); }

/*
 * The order of the draws defines the data for a seed; change it and every dataset changes:
 *   K (unless two_body), star mass, then per planet: a, e, m, theta, tau/P; centre x, y; dt;
 *   and for K >= 2 the fixed star's planet and step.
 */
void orb_sample_system(lssar_rng *r, int preset, int two_body, orb_system *s) {
    memset(s, 0, sizeof *s);
    s->K = two_body ? 1 : 1 + (int)lssar_rng_below(r, ORB_MAX_PLANETS);
    s->star_mass = orb_sample_star_mass(r, preset);
    for (int k = 0; k < s->K; k++) {
        orb_planet *p = &s->p[k];
        p->a = orb_sample_sma(r, preset);
        p->e = orb_sample_ecc(r);
        p->m = orb_sample_planet_mass(r, preset);
        p->theta = 2.0 * M_PI * lssar_rng_uniform(r);
        double n = orb_mean_motion(p->a, ORB_G * (s->star_mass + p->m));
        p->tau = lssar_rng_uniform(r) * (2.0 * M_PI / n);
    }
    s->cx = lssar_rng_normal(r);
    s->cy = lssar_rng_normal(r);
    int week = lssar_rng_below(r, 2) == 0;
    s->dt = week ? ORB_DT_WEEK : ORB_DT_HALFYEAR;
    s->dt_token = week ? 7000 : 7001;
    // Star placement. K = 1: it moves on its two-body orbit (star_x/y record t = 0).
    // K >= 2: it is held at one point of one planet's two-body orbit, as the released code does
    // (a random planet, a random one of the 500 steps), close to c since m << M.
    s->fix_planet = s->fix_step = -1;
    int k = 0;
    double t = 0.0;
    if (s->K >= 2) {
        s->fix_planet = k = (int)lssar_rng_below(r, s->K);
        s->fix_step = (int)lssar_rng_below(r, ORB_STEPS);
        t = s->fix_step * s->dt;
    }
    double rel[2], vrel[2];
    orb_rel_state(&s->p[k], s->star_mass, t, rel, vrel);
    double w = s->p[k].m / (s->star_mass + s->p[k].m);
    s->star_x = s->cx + rel[0] * w;
    s->star_y = s->cy + rel[1] * w;
}

void orb_system_at(uint64_t seed, uint64_t index, int preset, int two_body, orb_system *s) {
    lssar_rng r;
    lssar_rng_stream(&r, seed, index);
    orb_sample_system(&r, preset, two_body, s);
}

const char *orb_preset_name(int preset) { return preset == ORB_PRESET_PAPER ? "paper" : "code"; }

int orb_preset_parse(const char *name) {
    if (!name) return -1;
    if (!strcmp(name, "code")) return ORB_PRESET_CODE;
    if (!strcmp(name, "paper")) return ORB_PRESET_PAPER;
    return -1;
}
