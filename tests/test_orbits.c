/*
 * test_orbits.c - the orbits data: physics against an independent RK4 integration, conservation
 * laws, Kepler's third law, the sampled distributions against their closed forms, binning, the
 * sequence layout, and the written files (deterministic whatever the thread count).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "harness.h"
#include "lssar.h"
#include "data/shard.h"
#include "orbits/format.h"
#include "orbits/kepler.h"
#include "orbits/sample.h"
#include "orbits/sequence.h"

static orb_row rows[ORB_BODY_ROWS];

// A hand-made one-planet system (the star moves), dt chosen by the caller.
static orb_system one_planet(double M, double m, double a, double e, double theta, double tau_frac, double dt) {
    orb_system s;
    memset(&s, 0, sizeof s);
    s.K = 1; s.star_mass = M; s.dt = dt; s.dt_token = 7000;
    s.cx = 0.3; s.cy = -0.7;
    s.fix_planet = s.fix_step = -1;
    s.p[0] = (orb_planet){m, a, e, theta, 0};
    double P = 2 * M_PI / orb_mean_motion(a, ORB_G * (M + m));
    s.p[0].tau = tau_frac * P;
    double rel[2], vrel[2];
    orb_rel_state(&s.p[0], M, 0, rel, vrel);
    s.star_x = s.cx + rel[0] * m / (M + m);
    s.star_y = s.cy + rel[1] * m / (M + m);
    return s;
}

/* ---------------------------------------------------------------- Kepler's equation */
static void test_kepler_equation(void) {
    const double es[] = {0, 1e-3, 0.1, 0.5, 0.9, 0.99, 0.999, 0.999999};
    double worst = 0;
    for (int ie = 0; ie < 8; ie++)
        for (int i = -2000; i <= 2000; i++) {
            double M = i * (10 * M_PI / 2000) + (i % 7) * 1e-9;  // also tiny |M| near 0 and multiples of pi
            double e = es[ie], E = orb_kepler_E(M, e);
            double res = fabs(remainder(E - e * sin(E) - M, 2 * M_PI));
            if (res > worst) worst = res;
            CHECK(E >= -M_PI - 1e-12 && E <= M_PI + 1e-12, "E = %g out of [-pi, pi] (M %g, e %g)", E, M, e);
        }
    CHECK(worst < 1e-13, "worst Kepler residual %g", worst);
    // the vectorised batch gives the same bits as one equation at a time, tail included
    double M[37], E[37], s[37], c[37];
    for (int i = 0; i < 37; i++) M[i] = 0.37 * i * i - 20;
    orb_kepler_solve_n(M, 0.7, 37, E, s, c);
    for (int i = 0; i < 37; i++) {
        double s1, c1, E1 = orb_kepler_solve(M[i], 0.7, &s1, &c1);
        CHECK(E1 == E[i] && s1 == s[i] && c1 == c[i], "batch and single solves differ at %d", i);
        CHECK(fabs(s[i] - sin(E[i])) < 1e-15 && fabs(c[i] - cos(E[i])) < 1e-15, "sin/cos of E off at %d: %g %g", i, s[i] - sin(E[i]), c[i] - cos(E[i]));
    }
}

// The analytic position equals the spec's formula: nu = 2 atan(sqrt((1+e)/(1-e)) tan(E/2)),
// r = a (1 - e^2) / (1 + e cos nu), rel = R(theta) [r cos nu, r sin nu].
static void test_position_matches_spec_formula(void) {
    lssar_rng r;
    lssar_rng_seed(&r, 7);
    for (int i = 0; i < 2000; i++) {
        orb_planet p = {1e-4, 0.3 + 31.7 * lssar_rng_uniform(&r), 0.98 * lssar_rng_uniform(&r),
                        2 * M_PI * lssar_rng_uniform(&r), 100 * lssar_rng_uniform(&r)};
        double Ms = 0.2 + 2 * lssar_rng_uniform(&r), t = 300 * lssar_rng_uniform(&r);
        double mu = ORB_G * (Ms + p.m), n = sqrt(mu / (p.a * p.a * p.a));
        double E = orb_kepler_E(n * (t + p.tau), p.e);
        double nu = 2 * atan(sqrt((1 + p.e) / (1 - p.e)) * tan(E / 2));
        double rr = p.a * (1 - p.e * p.e) / (1 + p.e * cos(nu));
        double want[2] = {cos(p.theta) * rr * cos(nu) - sin(p.theta) * rr * sin(nu),
                          sin(p.theta) * rr * cos(nu) + cos(p.theta) * rr * sin(nu)};
        double rel[2], vrel[2];
        orb_rel_state(&p, Ms, t, rel, vrel);
        double err = hypot(rel[0] - want[0], rel[1] - want[1]);
        CHECK(err < 1e-10 * p.a, "position differs from the spec's formula by %g AU (a %g, e %g)", err, p.a, p.e);
    }
}

/* ---------------------------------------------------------- independent integration */
// Full two-body Newtonian ODE in absolute coordinates, state (xp, yp, xs, ys, vxp, vyp, vxs, vys).
static void deriv(const double *y, double m, double M, double *dy) {
    double dx = y[2] - y[0], dyy = y[3] - y[1];        // star - planet
    double r2 = dx * dx + dyy * dyy, ir3 = 1.0 / (r2 * sqrt(r2));
    dy[0] = y[4]; dy[1] = y[5]; dy[2] = y[6]; dy[3] = y[7];
    dy[4] = ORB_G * M * dx * ir3;  dy[5] = ORB_G * M * dyy * ir3;   // planet pulled to the star
    dy[6] = -ORB_G * m * dx * ir3; dy[7] = -ORB_G * m * dyy * ir3;  // star pulled to the planet
}

static void rk4(double *y, double m, double M, double h, int n) {
    double k1[8], k2[8], k3[8], k4[8], t[8];
    for (int s = 0; s < n; s++) {
        deriv(y, m, M, k1);
        for (int i = 0; i < 8; i++) t[i] = y[i] + 0.5 * h * k1[i];
        deriv(t, m, M, k2);
        for (int i = 0; i < 8; i++) t[i] = y[i] + 0.5 * h * k2[i];
        deriv(t, m, M, k3);
        for (int i = 0; i < 8; i++) t[i] = y[i] + h * k3[i];
        deriv(t, m, M, k4);
        for (int i = 0; i < 8; i++) y[i] += h / 6 * (k1[i] + 2 * k2[i] + 2 * k3[i] + k4[i]);
    }
}

// Start RK4 from the generated positions and velocities at step 0 and compare the positions of both
// bodies at every generated step over 1.2 orbits (dt = P / 40), and the return after exactly P.
static void check_against_rk4(orb_system s, const char *what) {
    const orb_planet *p = &s.p[0];
    double mu = ORB_G * (s.star_mass + p->m), P = 2 * M_PI * sqrt(p->a * p->a * p->a / mu);
    s.dt = P / 40;
    orb_sequence_rows(&s, rows);
    CHECK(rows[0].body == 1 && rows[1].body == 0, "%s: K = 1 rows are planet, star", what);
    double y[8] = {rows[0].x, rows[0].y, rows[1].x, rows[1].y, rows[0].vx, rows[0].vy, rows[1].vx, rows[1].vy};
    double y0[8];
    memcpy(y0, y, sizeof y);
    int sub = (int)(100 / pow(1 - p->e, 1.5)) + 50;   // RK4 substeps per dt: finer for eccentric orbits
    double worst = 0;
    for (int j = 1; j <= 48; j++) {
        rk4(y, p->m, s.star_mass, s.dt / sub, sub);
        const orb_row *pl = &rows[2 * j], *st = &rows[2 * j + 1];
        double ep = hypot(y[0] - pl->x, y[1] - pl->y), es = hypot(y[2] - st->x, y[3] - st->y);
        double rel_err = fmax(ep, es) / p->a;
        if (rel_err > worst) worst = rel_err;
    }
    CHECK(worst < 1e-6, "%s: positions differ from RK4 by %.3g a over 1.2 orbits (e %g)", what, worst, p->e);
    // Kepler's third law: after exactly P = 2 pi sqrt(a^3 / mu) the integrated relative orbit closes.
    memcpy(y, y0, sizeof y);
    rk4(y, p->m, s.star_mass, P / (40 * sub), 40 * sub);
    double d0x = y0[0] - y0[2], d0y = y0[1] - y0[3], d1x = y[0] - y[2], d1y = y[1] - y[3];
    CHECK(hypot(d1x - d0x, d1y - d0y) < 1e-6 * p->a, "%s: RK4 orbit does not close after P (%.3g a)", what, hypot(d1x - d0x, d1y - d0y) / p->a);
    memcpy(y, y0, sizeof y);
    rk4(y, p->m, s.star_mass, P / (40 * sub), 36 * sub);  // 0.9 P: not closed yet
    double far = hypot(y[0] - y[2] - d0x, y[1] - y[3] - d0y);
    CHECK(far > 1e-3 * p->a, "%s: orbit closes already at 0.9 P (%.3g a)", what, far / p->a);
}

static void test_two_body_vs_rk4(void) {
    check_against_rk4(one_planet(1.0, 3.0e-6, 1.0, 0.0167, 0.3, 0.25, 0), "earth-like");
    check_against_rk4(one_planet(0.3, 1e-3, 5.0, 0.5, 2.0, 0.6, 0), "e = 0.5");
    check_against_rk4(one_planet(2.0, 1e-4, 0.5, 0.9, 4.0, 0.05, 0), "e = 0.9");
    check_against_rk4(one_planet(1.0, 1e-3, 2.0, 0.97, 5.5, 0.95, 0), "e = 0.97");
    // a heavy 'planet' makes the star's motion large enough to test its placement too
    check_against_rk4(one_planet(1.0, 0.3, 3.0, 0.4, 1.0, 0.5, 0), "heavy planet");
    for (uint64_t i = 0; i < 6; i++) {  // sampled systems
        orb_system s;
        orb_system_at(11, i, ORB_PRESET_CODE, 1, &s);
        char what[64];
        snprintf(what, sizeof what, "sampled system %llu", (unsigned long long)i);
        check_against_rk4(s, what);
    }
}

/* ------------------------------------------------------------------ conservation laws */
static void test_conservation_and_force(void) {
    for (uint64_t i = 0; i < 300; i++) {
        orb_system s;
        orb_system_at(5, i, ORB_PRESET_CODE, i % 3 == 0, &s);
        orb_sequence_rows(&s, rows);
        double E0[ORB_MAX_PLANETS], h0[ORB_MAX_PLANETS];
        int seen[ORB_MAX_PLANETS] = {0};
        for (int j = 0; j < ORB_BODY_ROWS; j++) {
            const orb_row *r = &rows[j];
            if (r->body == 0) {
                if (s.K >= 2) CHECK(r->x == s.star_x && r->y == s.star_y && r->vx == 0 && r->vy == 0,
                                    "system %llu: the star must stay fixed with K = %d", (unsigned long long)i, s.K);
                continue;
            }
            int k = r->body - 1;
            const orb_planet *p = &s.p[k];
            double mu = ORB_G * (s.star_mass + p->m);
            double v2 = r->dvx * r->dvx + r->dvy * r->dvy, rr = hypot(r->dx, r->dy);
            double E = 0.5 * v2 - mu / rr, h = r->dx * r->dvy - r->dy * r->dvx;
            CHECK(h > 0, "system %llu planet %d: clockwise orbit (h = %g)", (unsigned long long)i, k, h);
            CHECK_CLOSE(r->r, rr, 1e-12);
            CHECK(fabs(r->F - ORB_G * p->m * s.star_mass / (rr * rr)) <= 1e-12 * r->F, "F is not G m M / r^2");
            CHECK(rr >= p->a * (1 - p->e) * (1 - 1e-9) && rr <= p->a * (1 + p->e) * (1 + 1e-9), "r outside [a(1-e), a(1+e)]");
            if (!seen[k]) {
                seen[k] = 1; E0[k] = E; h0[k] = h;
                CHECK(fabs(-mu / (2 * E) - p->a) < 1e-9 * p->a, "vis-viva a = %.12g, sampled %.12g", -mu / (2 * E), p->a);
                double e2 = 1 + 2 * E * h * h / (mu * mu);
                CHECK(fabs(sqrt(fmax(e2, 0)) - p->e) < 1e-6, "eccentricity from E, h: %.9g, sampled %.9g", sqrt(fmax(e2, 0)), p->e);
            } else {
                CHECK(fabs(E - E0[k]) <= 1e-10 * fabs(E0[k]), "energy drifts: %.15g vs %.15g", E, E0[k]);
                CHECK(fabs(h - h0[k]) <= 1e-10 * fabs(h0[k]), "angular momentum drifts: %.15g vs %.15g", h, h0[k]);
            }
            if (s.K == 1 && j + 1 < ORB_BODY_ROWS) {  // momentum and centre of mass of the pair
                const orb_row *st = &rows[j + 1];
                double M = s.star_mass, m = p->m;
                CHECK(fabs(m * r->vx + M * st->vx) < 1e-12 * (M * fabs(st->vx) + m * fabs(r->vx) + 1e-300) + 1e-15 &&
                      fabs(m * r->vy + M * st->vy) < 1e-12 * (M * fabs(st->vy) + m * fabs(r->vy) + 1e-300) + 1e-15,
                      "total momentum is not zero");
                CHECK(fabs((m * r->x + M * st->x) / (m + M) - s.cx) < 1e-12 * (1 + p->a) &&
                      fabs((m * r->y + M * st->y) / (m + M) - s.cy) < 1e-12 * (1 + p->a), "centre of mass moved");
            }
        }
    }
}

// The acceleration of the planet (central difference of its generated velocity) is G M / r^2
// pointed at the star: the force's sign and size, independent of the Kepler solver's internals.
static void test_force_direction(void) {
    orb_system s = one_planet(0.8, 2e-4, 1.5, 0.6, 0.9, 0.1, 1e-5);
    orb_sequence_rows(&s, rows);
    for (int j = 1; j < 40; j += 7) {
        const orb_row *a = &rows[2 * (j - 1)], *b = &rows[2 * j], *c = &rows[2 * (j + 1)];
        const orb_row *st = &rows[2 * j + 1];
        double ax = (c->vx - a->vx) / (2 * s.dt), ay = (c->vy - a->vy) / (2 * s.dt);
        double dx = st->x - b->x, dy = st->y - b->y, r = hypot(dx, dy);
        double gx = ORB_G * s.star_mass * dx / (r * r * r), gy = ORB_G * s.star_mass * dy / (r * r * r);
        CHECK(hypot(ax - gx, ay - gy) < 1e-5 * hypot(gx, gy), "planet acceleration (%g, %g) is not G M / r^2 to the star (%g, %g)", ax, ay, gx, gy);
        // and the position is the integral of the velocity
        double vx = (c->x - a->x) / (2 * s.dt), vy = (c->y - a->y) / (2 * s.dt);
        CHECK(hypot(vx - b->vx, vy - b->vy) < 1e-6 * hypot(b->vx, b->vy), "velocity is not d position / dt");
    }
}

// K >= 2: the star sits at a point of its own two-body orbit with planet fix_planet, near c,
// and every planet is drawn at star - rel_k(t).
static void test_fixed_star_placement(void) {
    int checked = 0;
    for (uint64_t i = 0; i < 200; i++) {
        orb_system s;
        orb_system_at(3, i, ORB_PRESET_CODE, 0, &s);
        if (s.K < 2) { CHECK(s.fix_planet == -1 && s.fix_step == -1, "K = 1 must not fix the star"); continue; }
        checked++;
        CHECK(s.fix_planet >= 0 && s.fix_planet < s.K && s.fix_step >= 0 && s.fix_step < ORB_STEPS, "bad fixed-star draw");
        const orb_planet *p = &s.p[s.fix_planet];
        double rel[2], vrel[2];
        orb_rel_state(p, s.star_mass, s.fix_step * s.dt, rel, vrel);
        double w = p->m / (s.star_mass + p->m);
        CHECK(fabs(s.star_x - (s.cx + w * rel[0])) < 1e-12 && fabs(s.star_y - (s.cy + w * rel[1])) < 1e-12, "star not on its orbit");
        CHECK(hypot(s.star_x - s.cx, s.star_y - s.cy) <= w * p->a * (1 + p->e) + 1e-12, "star too far from c");
        orb_sequence_rows(&s, rows);
        for (int j = 0; j < 50; j++) {
            if (rows[j].body == 0) continue;
            const orb_planet *q = &s.p[rows[j].body - 1];
            orb_rel_state(q, s.star_mass, rows[j].step * s.dt, rel, vrel);
            CHECK(fabs(rows[j].x - (s.star_x - rel[0])) < 1e-12 && fabs(rows[j].y - (s.star_y - rel[1])) < 1e-12, "planet not at star - rel");
        }
    }
    CHECK(checked > 100, "only %d multi-planet systems", checked);
}

/* ----------------------------------------------------------------------- distributions */
typedef struct { double n, s, s2; } acc;
static void add(acc *a, double x) { a->n++; a->s += x; a->s2 += x * x; }
static double mean(const acc *a) { return a->s / a->n; }
static double var(const acc *a) { double m = mean(a); return a->s2 / a->n - m * m; }
// Mean within 5 standard errors; variance within 5% (enough samples that it is ~10 SE).
#define CHECK_MOMENTS(a, m, v, what)                                                                         \
    do {                                                                                                     \
        double se_ = sqrt((v) / (a).n);                                                                      \
        CHECK(fabs(mean(&(a)) - (m)) < 5 * se_, "%s: mean %.6g, expected %.6g (se %.2g)", what, mean(&(a)), (double)(m), se_); \
        CHECK(fabs(var(&(a)) / (v) - 1) < 0.05, "%s: variance %.6g, expected %.6g", what, var(&(a)), (double)(v)); \
    } while (0)

// Regularised lower incomplete gamma P(a, x) by its series (x small here).
static double gamma_p(double a, double x) {
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < 500; n++) { term *= x / (a + n); sum += term; if (term < 1e-17 * sum) break; }
    return exp(a * log(x) - x - lgamma(a)) * sum;
}

static void test_gamma_beta(void) {
    lssar_rng r;
    lssar_rng_seed(&r, 42);
    const double shapes[] = {0.3202, 0.867, 1.0, 3.03, 12.5};
    for (int i = 0; i < 5; i++) {
        acc a = {0};
        for (int j = 0; j < 200000; j++) add(&a, orb_gamma(&r, shapes[i]));
        char what[64];
        snprintf(what, sizeof what, "Gamma(%g)", shapes[i]);
        CHECK_MOMENTS(a, shapes[i], shapes[i], what);
    }
    acc b = {0};
    double ab = 0.867 + 3.03;
    for (int j = 0; j < 200000; j++) add(&b, orb_beta(&r, 0.867, 3.03));
    CHECK_MOMENTS(b, 0.867 / ab, 0.867 * 3.03 / (ab * ab * (ab + 1)), "Beta(0.867, 3.03)");
}

static void test_code_preset_distributions(void) {
    const int N = 100000;
    acc K = {0}, mstar = {0}, mp = {0}, a = {0}, e = {0}, th = {0}, tauf = {0}, cx = {0}, cy = {0}, week = {0};
    int kcount[11] = {0}, clipped_hi = 0, np = 0;
    double mmin = 1, mmax = 0, smin = 10, smax = 0;
    for (uint64_t i = 0; i < (uint64_t)N; i++) {
        orb_system s;
        orb_system_at(2024, i, ORB_PRESET_CODE, 0, &s);
        add(&K, s.K); kcount[s.K]++;
        add(&mstar, s.star_mass);
        smin = fmin(smin, s.star_mass); smax = fmax(smax, s.star_mass);
        add(&cx, s.cx); add(&cy, s.cy);
        add(&week, s.dt_token == 7000);
        CHECK((s.dt_token == 7000 && s.dt == ORB_DT_WEEK) || (s.dt_token == 7001 && s.dt == ORB_DT_HALFYEAR), "dt and its token disagree");
        for (int k = 0; k < s.K; k++) {
            const orb_planet *p = &s.p[k];
            np++;
            add(&mp, p->m); add(&a, p->a); add(&e, p->e); add(&th, p->theta);
            double P = 2 * M_PI / orb_mean_motion(p->a, ORB_G * (s.star_mass + p->m));
            add(&tauf, p->tau / P);
            clipped_hi += p->m == 1e-3;
            mmin = fmin(mmin, p->m); mmax = fmax(mmax, p->m);
        }
        for (int k = s.K; k < ORB_MAX_PLANETS; k++) CHECK(s.p[k].a == 0 && s.p[k].m == 0, "unused planet slots must be zero");
    }
    CHECK_MOMENTS(K, 5.5, 99.0 / 12, "K ~ U{1..10}");
    for (int k = 1; k <= 10; k++) CHECK(fabs(kcount[k] - N / 10.0) < 5 * sqrt(N * 0.09), "K = %d drawn %d times of %d", k, kcount[k], N);
    CHECK_MOMENTS(a, (0.3 + 32) / 2, 31.7 * 31.7 / 12, "a ~ U(0.3, 32)");
    double ab = 0.867 + 3.03;
    CHECK_MOMENTS(e, 0.867 / ab, 0.867 * 3.03 / (ab * ab * (ab + 1)), "e ~ Beta(0.867, 3.03)");
    CHECK_MOMENTS(th, M_PI, 4 * M_PI * M_PI / 12, "theta ~ U(0, 2 pi)");
    CHECK_MOMENTS(tauf, 0.5, 1.0 / 12, "tau / P ~ U(0, 1)");
    CHECK_MOMENTS(cx, 0, 1, "centre x ~ N(0, 1)");
    CHECK_MOMENTS(cy, 0, 1, "centre y ~ N(0, 1)");
    CHECK_MOMENTS(week, 0.5, 0.25, "P(dt = 1 week)");
    // star mass: -0.679371 + 1.627161 exp(0.200446 z), z ~ N(0,1); clipping at 0.1 / 5 is < 1e-4 likely
    double s2 = 0.200446 * 0.200446, sc = 1.627161;
    double m_star = -0.679371 + sc * exp(s2 / 2), v_star = sc * sc * (exp(s2) - 1) * exp(s2);
    CHECK_MOMENTS(mstar, m_star, v_star, "star mass (fitted log-normal)");
    CHECK(smin >= 0.1 && smax <= 5.0, "star mass outside [0.1, 5]: %g .. %g", smin, smax);
    // planet mass: 6.0098e-8 + 1.10559e-3 G, G ~ Gamma(0.3202), clipped to [1e-9, 1e-3]
    double al = 0.32020, loc = 6.0098e-8, scale = 1.10559e-3, c = (1e-3 - loc) / scale;
    double Pc = gamma_p(al, c), EG = al * gamma_p(al + 1, c) + c * (1 - Pc);
    double EG2 = al * (al + 1) * gamma_p(al + 2, c) + c * c * (1 - Pc);
    double m_mean = loc + scale * EG, m_var = scale * scale * (EG2 - EG * EG);
    CHECK_MOMENTS(mp, m_mean, m_var, "planet mass (clipped Gamma)");
    double frac = (double)clipped_hi / np, pfrac = 1 - Pc;
    CHECK(fabs(frac - pfrac) < 5 * sqrt(pfrac * (1 - pfrac) / np), "planet masses clipped to 1e-3: %.4f, expected %.4f", frac, pfrac);
    CHECK(mmin >= 1e-9 && mmax <= 1e-3, "planet mass outside [1e-9, 1e-3]: %g .. %g", mmin, mmax);
}

static void test_paper_preset_and_two_body(void) {
    const int N = 60000;
    acc a = {0}, lm = {0}, ms = {0};
    for (uint64_t i = 0; i < (uint64_t)N; i++) {
        orb_system s;
        orb_system_at(9, i, ORB_PRESET_PAPER, 1, &s);
        CHECK(s.K == 1, "--two-body must give K = 1, got %d", s.K);
        add(&a, s.p[0].a); add(&lm, log10(s.p[0].m)); add(&ms, s.star_mass);
    }
    CHECK_MOMENTS(a, (0.3 + 42) / 2, 41.7 * 41.7 / 12, "paper a ~ U(0.3, 42)");
    CHECK_MOMENTS(lm, -5, 16.0 / 12, "paper log10 m ~ U(-7, -3)");
    CHECK_MOMENTS(ms, 2.75, 4.5 * 4.5 / 12, "paper star mass ~ U(0.5, 5)");
    // the stream of system i does not depend on the run's size or order
    orb_system x, y;
    orb_system_at(9, 12345, ORB_PRESET_CODE, 0, &x);
    for (int i = 0; i < 3; i++) orb_system_at(9, (uint64_t)i, ORB_PRESET_CODE, 0, &y);
    orb_system_at(9, 12345, ORB_PRESET_CODE, 0, &y);
    CHECK(memcmp(&x, &y, sizeof x) == 0, "system 12345 depends on what was drawn before");
}

/* -------------------------------------------------------------------- binning, layout */
static void test_binning(void) {
    const double w = 100.0 / 7000;
    CHECK(orb_bin(-50) == 0 && orb_bin(-1e9) == 0 && orb_bin(NAN) == 0, "low clip");
    CHECK(orb_bin(50) == 6999 && orb_bin(1e9) == 6999, "high clip");
    CHECK(orb_bin(0) == 3500 && orb_bin(-1e-9) == 3499, "bin of 0 is 3500, just below is 3499");
    CHECK(lssar_orb_bin(12.3) == orb_bin(12.3) && lssar_orb_unbin(17) == orb_unbin(17), "public wrappers");
    lssar_rng r;
    lssar_rng_seed(&r, 1);
    double worst = 0;
    int prev = -1;
    for (int i = 0; i < 200000; i++) {
        double v = -49.9999 + 99.9998 * lssar_rng_uniform(&r);
        int b = orb_bin(v);
        CHECK(b == (int)floor((v + 50) / w), "bin of %.17g is %d", v, b);
        worst = fmax(worst, fabs(orb_unbin(b) - v));
    }
    CHECK(worst <= 0.5 * w * (1 + 1e-9), "decode error %g > half a bin %g", worst, 0.5 * w);
    for (int i = 0; i <= 7000 * 4; i++) {  // monotone over the whole range
        int b = orb_bin(-50 + i * (w / 4));
        CHECK(b >= prev, "bins not monotone at %d", i);
        prev = b;
    }
    for (int b = 0; b < 7000; b++) CHECK(orb_bin(orb_unbin(b)) == b, "midpoint of bin %d decodes to another bin", b);
}

static void test_sequence_layout(void) {
    for (int K = 1; K <= 10; K++) {
        orb_system s;
        uint64_t i = 0;
        do orb_system_at(77, i++, ORB_PRESET_CODE, 0, &s); while (s.K != K);
        orb_sequence_rows(&s, rows);
        uint16_t tok[ORB_ROWS * 2];
        orb_sequence_tokens(&s, rows, tok);
        CHECK(tok[0] == s.dt_token && tok[1] == s.dt_token, "row 0 must be the dt token in both channels");
        int maxstep = 0;
        for (int j = 0; j < ORB_BODY_ROWS; j++) {
            int slot = j % (K + 1);
            CHECK(rows[j].step == j / (K + 1), "K %d row %d: step %d", K, j + 1, rows[j].step);
            CHECK(rows[j].body == (slot < K ? slot + 1 : 0), "K %d row %d: body %d, slot %d", K, j + 1, rows[j].body, slot);
            int body, step;
            orb_row_body(K, j + 1, &body, &step);
            CHECK(body == rows[j].body && step == rows[j].step, "orb_row_body(K %d, row %d) = %d, %d", K, j + 1, body, step);
            CHECK(tok[2 * (j + 1)] == orb_bin(rows[j].x) && tok[2 * (j + 1) + 1] == orb_bin(rows[j].y), "token of row %d", j + 1);
            CHECK(tok[2 * (j + 1)] < 7000 && tok[2 * (j + 1) + 1] < 7000, "position token out of the bins");
            maxstep = rows[j].step;
        }
        CHECK(maxstep + 1 == orb_seq_steps(K) && orb_seq_steps(K) <= ORB_STEPS, "K %d covers %d steps", K, maxstep + 1);
    }
}

/* -------------------------------------------------------------------- written files */
static int files_equal(const char *a, const char *b) {
    char *x, *y;
    size_t nx, ny;
    if (lssar_read_file(a, &x, &nx)) return 0;
    if (lssar_read_file(b, &y, &ny)) { free(x); return 0; }
    int eq = nx == ny && memcmp(x, y, nx) == 0;
    free(x); free(y);
    return eq;
}

static void test_files_deterministic(void) {
    char d1[] = "/tmp/lssar-test-orbits-XXXXXX", d2[] = "/tmp/lssar-test-orbits-XXXXXX";
    CHECK(mkdtemp(d1) && mkdtemp(d2), "mkdtemp");
    char csv[256], p1[512], p2[512];
    snprintf(csv, sizeof csv, "%s/x.csv", d1);
    lssar_orb_opts o;
    lssar_orb_defaults(&o);
    o.systems = 300; o.seed = 99; o.two_body = 1; o.state = 1; o.shard_systems = 128; o.split = "force";
    o.threads = 1; o.csv_path = csv;
    lssar_orb_stats st;
    int rc = lssar_orbits_simulate(d1, &o, &st);
    CHECK(rc == 0, "simulate: %s", lssar_errmsg());
    CHECK(st.rows == 300 * 1000, "rows %lld", (long long)st.rows);
    o.threads = 2; o.csv_path = NULL;
    rc = lssar_orbits_simulate(d2, &o, &st);
    CHECK(rc == 0, "simulate (2 threads): %s", lssar_errmsg());
    const char *names[] = {"force_000000.bin", "force_000001.bin", "force_000002.bin", "force_systems.bin", "force_state.bin", "force.json"};
    for (int i = 0; i < 6; i++) {
        snprintf(p1, sizeof p1, "%s/%s", d1, names[i]);
        snprintf(p2, sizeof p2, "%s/%s", d2, names[i]);
        CHECK(files_equal(p1, p2), "%s differs between 1 and 2 threads (or is missing)", names[i]);
    }
    // shards: 2 channels, 128 + 128 + 44 sequences, contents = the sequences of the systems
    int64_t sys = 0;
    for (int i = 0; i < 3; i++) {
        shard sh;
        snprintf(p1, sizeof p1, "%s/force_%06d.bin", d1, i);
        CHECK(shard_open(&sh, p1) == 0, "shard_open: %s", lssar_errmsg());
        if (!sh.tokens) continue;
        CHECK(sh.channels == 2 && sh.n == (size_t)(i < 2 ? 128 : 44) * 1000, "shard %d: %d channels, %zu rows", i, sh.channels, sh.n);
        for (size_t q = 0; q < sh.n / 1000; q++, sys++) {
            orb_system s;
            orb_system_at(99, (uint64_t)sys, ORB_PRESET_CODE, 1, &s);
            orb_sequence_rows(&s, rows);
            uint16_t tok[ORB_ROWS * 2];
            orb_sequence_tokens(&s, rows, tok);
            CHECK(memcmp(tok, sh.tokens + q * 2000, sizeof tok) == 0, "system %lld's tokens differ", (long long)sys);
        }
        shard_close(&sh);
    }
    CHECK(sys == 300, "shards hold %lld systems", (long long)sys);
    // metadata and state
    orb_meta m;
    snprintf(p1, sizeof p1, "%s/force_systems.bin", d1);
    CHECK(orb_meta_open(&m, p1) == 0, "orb_meta_open: %s", lssar_errmsg());
    orb_state sv;
    snprintf(p1, sizeof p1, "%s/force_state.bin", d1);
    CHECK(orb_state_open(&sv, p1) == 0, "orb_state_open: %s", lssar_errmsg());
    if (m.sys && sv.rows) {
        CHECK(m.n == 300 && m.h->seed == 99 && m.h->two_body == 1 && sv.n == 300, "headers");
        for (int64_t i = 0; i < 300; i++) {
            orb_system s;
            orb_system_at(99, (uint64_t)i, ORB_PRESET_CODE, 1, &s);
            CHECK(memcmp(&s, &m.sys[i], sizeof s) == 0, "record %lld", (long long)i);
            const float *f = sv.rows + (size_t)i * ORB_ROWS * ORB_S_FIELDS;
            for (int k = 0; k < ORB_S_FIELDS; k++) CHECK(f[k] == 0, "the dt row's state must be zero");
            for (int j = 1; j < ORB_ROWS; j += 2) {  // planet rows are the odd rows when K = 1
                const float *x = f + (size_t)j * ORB_S_FIELDS;
                double r = hypot(x[ORB_S_DX], x[ORB_S_DY]);
                double F = ORB_G * x[ORB_S_MASS] * x[ORB_S_STAR_MASS] / (r * r);
                CHECK(fabs(x[ORB_S_F] - F) < 1e-5 * F && fabs(x[ORB_S_R] - r) < 1e-6 * r, "state row %d: F %g vs G m M / r^2 %g", j, x[ORB_S_F], F);
                CHECK(x[ORB_S_MASS] == (float)s.p[0].m && x[ORB_S_STAR_MASS] == (float)s.star_mass, "state masses");
            }
        }
    }
    orb_meta_close(&m);
    orb_state_close(&sv);
    // CSV: exact header, one line per position row
    FILE *f = fopen(csv, "r");
    CHECK(f != NULL, "no CSV");
    if (f) {
        char line[512];
        CHECK(fgets(line, sizeof line, f) && !strcmp(line, "system,body,step,t,x,y,vx,vy,mass,star_mass\n"), "CSV header is '%s'", line);
        long n = 0;
        long long sysno = -1; int body = -1, step = -1;
        double t, x, y, vx, vy, mass, ms;
        while (fgets(line, sizeof line, f)) {
            if (n == 2 * 7 + 0) sscanf(line, "%lld,%d,%d,%lf,%lf,%lf,%lf,%lf,%lf,%lf", &sysno, &body, &step, &t, &x, &y, &vx, &vy, &mass, &ms);
            n++;
        }
        fclose(f);
        CHECK(n == 300L * 999, "CSV has %ld rows", n);
        orb_system s;
        orb_system_at(99, 0, ORB_PRESET_CODE, 1, &s);
        orb_sequence_rows(&s, rows);
        CHECK(sysno == 0 && body == 1 && step == 7 && fabs(x - rows[14].x) < 1e-9 * (1 + fabs(x)) &&
              fabs(t - 7 * s.dt) < 1e-9 && fabs(mass - s.p[0].m) <= 1e-9 * s.p[0].m,
              "CSV row 15: system %lld body %d step %d x %g (want %g)", sysno, body, step, x, rows[14].x);
    }
    // bad input: clear errors, no crash
    o.systems = 0;
    CHECK(lssar_orbits_simulate(d2, &o, NULL) == LSSAR_E_SIZE && strstr(lssar_errmsg(), "--systems"), "systems = 0 must fail");
    o.systems = 10; o.split = "a/b";
    CHECK(lssar_orbits_simulate(d2, &o, NULL) == LSSAR_E_ARG, "a split with '/' must fail");
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", d1, d2);
    CHECK(system(cmd) == 0, "cleanup");
}

int main(void) {
    RUN(test_kepler_equation);
    RUN(test_position_matches_spec_formula);
    RUN(test_two_body_vs_rk4);
    RUN(test_conservation_and_force);
    RUN(test_force_direction);
    RUN(test_fixed_star_placement);
    RUN(test_gamma_beta);
    RUN(test_code_preset_distributions);
    RUN(test_paper_preset_and_two_body);
    RUN(test_binning);
    RUN(test_sequence_layout);
    RUN(test_files_deterministic);
    return test_summary("orbits");
}
