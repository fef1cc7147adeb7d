/*
 * kepler.h - analytic two-body motion: Kepler's equation and the relative orbit.
 *
 * Sign convention (the released code's): rel = star - planet. The planet sits at
 * c - rel M/(M + m) and the star at c + rel m/(M + m) (about the centre of mass c), so the planet
 * relative to the star is -rel. rel obeys rel'' = -mu rel / |rel|^3 with mu = G (M + m), i.e. the
 * force on the planet, G m M / r^2, points from the planet to the star (along +rel). Orbits run
 * counter-clockwise (angular momentum rel x rel' > 0, and so also for -rel).
 */
#ifndef LSSAR_ORBITS_KEPLER_H
#define LSSAR_ORBITS_KEPLER_H

#include "orbits/sample.h"

/* Solve E - e sin E = M for the eccentric anomaly, any real M, 0 <= e < 1 (robust to e -> 1).
   The result lies in [-pi, pi] (congruent to M modulo 2 pi). */
double orb_kepler_E(double M, double e);
/* The same, also returning sin E and cos E (which the solver has computed anyway). */
double orb_kepler_solve(double M, double e, double *sinE, double *cosE);
/* n equations of one eccentricity at once (vectorised; the same bits as one at a time).
   E may be NULL. */
void orb_kepler_solve_n(const double *M, double e, int n, double *E, double *sinE, double *cosE);

/* Mean motion n = sqrt(mu / a^3) (rad/yr) and period 2 pi / n (yr). */
double orb_mean_motion(double a, double mu);

/* rel = star - planet and its time derivative at time t (yr) for a planet about a star of mass
   star_mass: positions in AU, velocities in AU/yr. */
void orb_rel_state(const orb_planet *p, double star_mass, double t, double rel[2], double vrel[2]);

/* The same with the per-orbit constants computed once (for many times t). */
typedef struct { double n, a, e, b, cT, sT, tau; } orb_orbit;
void orb_orbit_init(orb_orbit *o, const orb_planet *p, double star_mass);
void orb_orbit_state(const orb_orbit *o, double t, double rel[2], double vrel[2]);
/* rel and vrel from sin E and cos E (orb_kepler_solve_n). */
void orb_orbit_from_E(const orb_orbit *o, double sE, double cE, double rel[2], double vrel[2]);

#endif
