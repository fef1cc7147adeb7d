/*
 * sample.h - random planetary systems for the orbits data (the spec: spec/orbits.md, "Orbits").
 *
 * One system = one star and K planets, each planet on an analytic Kepler orbit about the star.
 * Two presets of the distributions:
 *   code  (the released code; default)  a ~ U(0.3, 32), planet mass ~ clipped Gamma,
 *                                       star mass ~ clipped fitted log-normal
 *   paper (the paper's appendix)        a ~ U(0.3, 42), planet mass ~ LogUniform(1e-7, 1e-3),
 *                                       star mass ~ U(0.5, 5)
 * Both: K ~ U{1..10} (K = 1 with two_body), e ~ Beta(0.867, 3.03), theta ~ U(0, 2 pi),
 * tau ~ U(0, P), centre c ~ N(0, I2), dt = 1 week or 6 months with probability 1/2.
 *
 * The system record orb_system is also the on-disk record of NAME_systems.bin (see format.h), so
 * its layout is fixed: 464 bytes, little-endian, no padding (static-asserted in sample.c).
 */
#ifndef LSSAR_ORBITS_SAMPLE_H
#define LSSAR_ORBITS_SAMPLE_H

#include <stdint.h>
#include "core/util.h"

#define ORB_G 39.4784176044            // 4 pi^2: AU^3 / (yr^2 Msun)
#define ORB_MAX_PLANETS 10
#define ORB_STEPS 500                  // time steps generated per body (the fixed star is drawn among them)
#define ORB_DT_WEEK (7 * 0.0027)       // years
#define ORB_DT_HALFYEAR (180 * 0.0027)

enum { ORB_PRESET_CODE = 0, ORB_PRESET_PAPER = 1 };

typedef struct {
    double m;      // planet mass (Msun)
    double a;      // semi-major axis (AU)
    double e;      // eccentricity in [0, 1)
    double theta;  // periapsis orientation (rad): rel = R(theta) [r cos nu, r sin nu]
    double tau;    // phase (yr): mean anomaly M = n (t + tau)
} orb_planet;      // 40 bytes

typedef struct {
    int32_t K;           // number of planets, 1..10
    int32_t dt_token;    // 7000 (1 week) or 7001 (6 months)
    double dt;           // years per step
    double star_mass;    // Msun
    double cx, cy;       // centre of mass of the two-body orbits, ~ N(0, I2) (AU)
    double star_x, star_y; // K >= 2: the star's fixed position; K = 1: the star's position at t = 0
    int32_t fix_planet;  // K >= 2: the star sits where planet fix_planet's two-body orbit puts it
    int32_t fix_step;    //          at step fix_step (0..499); both -1 when K = 1 (the star moves)
    orb_planet p[ORB_MAX_PLANETS]; // planets 0..K-1; unused slots are zero
} orb_system;            // 464 bytes

/* Gamma(shape, 1): Marsaglia & Tsang (2000); shape < 1 via Gamma(shape + 1) U^(1/shape). */
double orb_gamma(lssar_rng *r, double shape);
/* Beta(a, b) = X / (X + Y), X ~ Gamma(a), Y ~ Gamma(b). */
double orb_beta(lssar_rng *r, double a, double b);
/* The distributions of one preset, one draw each (exposed for the distribution tests). */
double orb_sample_planet_mass(lssar_rng *r, int preset);
double orb_sample_star_mass(lssar_rng *r, int preset);
double orb_sample_sma(lssar_rng *r, int preset);
double orb_sample_ecc(lssar_rng *r);

/* Draw a whole system (the draws' order is part of the data's definition: see sample.c). */
void orb_sample_system(lssar_rng *r, int preset, int two_body, orb_system *s);
/* The system `index` of a run seeded with `seed`: its own RNG stream, so the result does not
   depend on which thread draws it or in what order. */
void orb_system_at(uint64_t seed, uint64_t index, int preset, int two_body, orb_system *s);

const char *orb_preset_name(int preset);   // "code" / "paper"
int orb_preset_parse(const char *name);    // -1 if unknown

#endif
