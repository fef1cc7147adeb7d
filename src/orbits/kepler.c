// kepler.c - Kepler's equation and the analytic relative orbit; see kepler.h.
#include <math.h>
#include <string.h>
#include "orbits/kepler.h"

/*
 * sin and cos of x in [0, pi] (valid on [-0.1, pi + 0.1]): with y = x - pi/2 in [-pi/2, pi/2],
 * sin x = cos y and cos x = -sin y, each a Taylor polynomial in y^2 whose truncation error is
 * below 1e-17 there. Plain FMAs, so the lane loops below vectorise (libm's sincos does not), and
 * the results are the same bits in every lane and in the scalar path.
 */
static inline void sincos_0pi(double x, double *sx, double *cx) {
    double y = x - 1.5707963267948966, y2 = y * y;
    double ps = 1.9572941063391263e-20;             // sin y / y = sum (-1)^k y^2k / (2k+1)!
    ps = fma(ps, y2, -8.22063524662433e-18);   ps = fma(ps, y2, 2.8114572543455206e-15);
    ps = fma(ps, y2, -7.647163731819816e-13);  ps = fma(ps, y2, 1.6059043836821613e-10);
    ps = fma(ps, y2, -2.505210838544172e-08);  ps = fma(ps, y2, 2.7557319223985893e-06);
    ps = fma(ps, y2, -0.0001984126984126984);  ps = fma(ps, y2, 0.008333333333333333);
    ps = fma(ps, y2, -0.16666666666666666);    ps = fma(ps, y2, 1.0);
    double pc = -8.896791392450574e-22;             // cos y = sum (-1)^k y^2k / (2k)!
    pc = fma(pc, y2, 4.110317623312165e-19);   pc = fma(pc, y2, -1.5619206968586225e-16);
    pc = fma(pc, y2, 4.779477332387385e-14);   pc = fma(pc, y2, -1.1470745597729725e-11);
    pc = fma(pc, y2, 2.08767569878681e-09);    pc = fma(pc, y2, -2.755731922398589e-07);
    pc = fma(pc, y2, 2.48015873015873e-05);    pc = fma(pc, y2, -0.001388888888888889);
    pc = fma(pc, y2, 0.041666666666666664);    pc = fma(pc, y2, -0.5);
    pc = fma(pc, y2, 1.0);
    *sx = pc;
    *cx = -y * ps;
}

/*
 * Halley's method on f(E) = E - e sin E - M, solved for |M| reduced to [0, pi] (f is odd, so
 * E(-M) = -E(M)). It starts at E = M; the root lies in [M, min(M + e, pi)] (E - M = e sin E is in
 * [0, e]), and that bracket is tightened by the sign of f at every iterate: a step that would
 * leave it bisects instead, so the solver converges for every e < 1 (e -> 1 near periapsis is the
 * hard case). Halley converges cubically: once a step is below 1e-6 f' the next error is ~1e-16,
 * so a lane stops there (or at the rounding floor of the step when f' is tiny) and rotates its
 * last sin/cos by the final step instead of evaluating them again: few evaluations per solve on
 * the sampled eccentricities (docs/PERF.md).
 *
 * ORB_LANES equations are solved in lockstep (branch-free lane loops that the compiler vectorises);
 * a block runs until its slowest lane has converged, which beats latency-bound scalar Newton/Halley
 * with libm's sincos.
 */
#define ORB_LANES 8

static void solve_block(const double *M, double e, double *E_out, double *sin_out, double *cos_out) {
    const double twopi_hi = 6.283185307179586, twopi_lo = 2.4492935982947064e-16;
    double Mr[ORB_LANES], sg[ORB_LANES], E[ORB_LANES], lo[ORB_LANES], hi[ORB_LANES];
    double s[ORB_LANES], c[ORB_LANES], done[ORB_LANES];
    for (int l = 0; l < ORB_LANES; l++) {
        // M mod 2 pi into [-pi, pi] (remainder() is much slower); 2 pi in two parts keeps the
        // reduction exact to ~1e-16 |M| for the |M| < 1e5 that the sequences reach.
        double k = nearbyint(M[l] * (1.0 / (2.0 * M_PI)));
        double m = fma(-k, twopi_hi, M[l]) - k * twopi_lo;
        sg[l] = m < 0 ? -1.0 : 1.0;
        m = fabs(m);
        Mr[l] = m < M_PI ? m : M_PI;  // (fmin is a libm call without -ffast-math)
        E[l] = lo[l] = Mr[l];
        hi[l] = Mr[l] + e < M_PI ? Mr[l] + e : M_PI;
        done[l] = 0.0;
        sincos_0pi(E[l], &s[l], &c[l]);
    }
    for (int it = 0; it < 100; it++) {
        double ndone = 0;
        for (int l = 0; l < ORB_LANES; l++) {  // branch-free (bitwise masks) so that it vectorises
            double f = E[l] - e * s[l] - Mr[l], f1 = 1.0 - e * c[l];
            int live = done[l] == 0.0;
            lo[l] = (live & (f < 0)) ? E[l] : lo[l];
            hi[l] = (live & (f >= 0)) ? E[l] : hi[l];
            double d = f * f1 / (f1 * f1 - 0.5 * f * e * s[l]);     // Halley, f'' = e sin E
            double En = E[l] - d;
            // Converged when the step is below 1e-6 f' (the next error ~ (d / f')^3 f'... < 1e-16) or at
            // the rounding floor of f / f' (~1e-16 / f'), which is what stops e -> 1 near periapsis.
            double tol = 1e-6 * f1 > 8e-16 / f1 ? 1e-6 * f1 : 8e-16 / f1;
            int conv = fabs(d) <= tol;
            int out = (!conv) & ((!(En > lo[l])) | (!(En < hi[l])));
            En = out ? 0.5 * (lo[l] + hi[l]) : En;                  // left the bracket: bisect
            double cd = 1.0 - 0.5 * d * d;                            // |d|^3 / 6 < 2e-19
            double sr = s[l] * cd - c[l] * d, cr = c[l] * cd + s[l] * d;  // sin, cos of E - d
            double sn, cn;
            sincos_0pi(En, &sn, &cn);
            sn = conv ? sr : sn;
            cn = conv ? cr : cn;
            s[l] = live ? sn : s[l];
            c[l] = live ? cn : c[l];
            E[l] = live ? En : E[l];
            done[l] = (live & conv) ? 1.0 : done[l];
            ndone += done[l];
        }
        if (ndone == ORB_LANES) break;
    }
    for (int l = 0; l < ORB_LANES; l++) {
        if (E_out) E_out[l] = sg[l] * E[l];
        sin_out[l] = sg[l] * s[l];
        cos_out[l] = c[l];
    }
}

void orb_kepler_solve_n(const double *M, double e, int n, double *E, double *sinE, double *cosE) {
    double m[ORB_LANES], Eb[ORB_LANES], sb[ORB_LANES], cb[ORB_LANES];
    int i = 0;
    for (; i + ORB_LANES <= n; i += ORB_LANES)
        solve_block(M + i, e, E ? E + i : NULL, sinE + i, cosE + i);
    if (i < n) {  // the tail, padded with copies of its last equation
        for (int l = 0; l < ORB_LANES; l++) m[l] = M[i + (l < n - i ? l : n - i - 1)];
        solve_block(m, e, Eb, sb, cb);
        for (int l = 0; l < n - i; l++) {
            if (E) E[i + l] = Eb[l];
            sinE[i + l] = sb[l];
            cosE[i + l] = cb[l];
        }
    }
}

double orb_kepler_solve(double M, double e, double *sinE, double *cosE) {
    double E;
    orb_kepler_solve_n(&M, e, 1, &E, sinE, cosE);
    return E;
}

double orb_kepler_E(double M, double e) {
    double s, c;
    return orb_kepler_solve(M, e, &s, &c);
}

double orb_mean_motion(double a, double mu) { return sqrt(mu / (a * a * a)); }

void orb_orbit_init(orb_orbit *o, const orb_planet *p, double star_mass) {
    o->n = orb_mean_motion(p->a, ORB_G * (star_mass + p->m));
    o->a = p->a;
    o->e = p->e;
    o->b = sqrt(1.0 - p->e * p->e);
    sincos(p->theta, &o->sT, &o->cT);
    o->tau = p->tau;
}

/*
 * From E: r cos nu = a (cos E - e) and r sin nu = a sqrt(1 - e^2) sin E, which equal the spec's
 * nu = 2 atan(sqrt((1+e)/(1-e)) tan(E/2)), r = a (1 - e^2) / (1 + e cos nu) without the atan/tan
 * (tests/test_orbits.c checks the identity). dE/dt = n / (1 - e cos E).
 */
void orb_orbit_from_E(const orb_orbit *o, double sE, double cE, double rel[2], double vrel[2]) {
    double px = o->a * (cE - o->e), py = o->a * o->b * sE;  // in the orbit's frame (periapsis on +x)
    double Edot = o->n / (1.0 - o->e * cE);
    double vx = -o->a * sE * Edot, vy = o->a * o->b * cE * Edot;
    rel[0] = o->cT * px - o->sT * py;  rel[1] = o->sT * px + o->cT * py;  // rotate by theta
    vrel[0] = o->cT * vx - o->sT * vy; vrel[1] = o->sT * vx + o->cT * vy;
}

void orb_orbit_state(const orb_orbit *o, double t, double rel[2], double vrel[2]) {
    double sE, cE;
    orb_kepler_solve(o->n * (t + o->tau), o->e, &sE, &cE);
    orb_orbit_from_E(o, sE, cE, rel, vrel);
}

void orb_rel_state(const orb_planet *p, double star_mass, double t, double rel[2], double vrel[2]) {
    orb_orbit o;
    orb_orbit_init(&o, p, star_mass);
    orb_orbit_state(&o, t, rel, vrel);
}
