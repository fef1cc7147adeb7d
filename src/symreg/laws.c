// laws.c - the ten public test laws of the symbolic regression spec, and their synthetic data.
#include <math.h>
#include <stdlib.h>
#include "symreg/sr.h"

const sr_law sr_laws[SR_NLAWS] = {
    {"newton", "F", "39.4784*m1*m2/r**2", 3, {"r", "m1", "m2"}, {0.5, 0.1, 0.1}, {5, 2, 2}},
    {"coulomb", "F", "q1*q2/(4*pi*eps*r**2)", 4, {"q1", "q2", "eps", "r"}, {1, 1, 1, 1}, {5, 5, 5, 5}},
    {"potential", "U", "m*g*z", 3, {"m", "g", "z"}, {1, 1, 1}, {5, 5, 5}},
    {"relativistic_mass", "mr", "m0/sqrt(1 - v**2/c**2)", 3, {"m0", "v", "c"}, {1, 1, 3}, {5, 2, 10}},
    {"centre_of_mass", "rc", "(m1*r1 + m2*r2)/(m1 + m2)", 4, {"m1", "r1", "m2", "r2"}, {1, 1, 1, 1},
     {5, 5, 5, 5}},
    {"gaussian", "f", "exp(-theta**2/2)/sqrt(2*pi)", 1, {"theta"}, {1}, {5}},
    {"flux", "flux", "P/(4*pi*r**2)", 2, {"P", "r"}, {1, 1}, {5, 5}},
    {"kepler", "T", "2*pi*sqrt(a**3/(G*M))", 3, {"a", "G", "M"}, {1, 1, 1}, {5, 5, 5}},
    {"mass_energy", "E", "m*c**2", 2, {"m", "c"}, {1, 1}, {5, 5}},
    {"angular_momentum", "L", "m*v*r", 3, {"m", "v", "r"}, {1, 1, 1}, {5, 5, 5}},
};

int sr_law_data(const sr_law *L, int rows, uint64_t seed, double noise, double *X, double *y) {
    lssar_rng r;
    lssar_rng_seed(&r, seed);
    for (int i = 0; i < rows; i++)
        for (int f = 0; f < L->nf; f++)
            X[(size_t)f * rows + i] = L->lo[f] + (L->hi[f] - L->lo[f]) * lssar_rng_uniform(&r);
    int rc = lssar_sr_eval(L->truth, X, rows, L->nf, L->feat, y);
    if (rc) return rc;
    if (noise > 0)
        for (int i = 0; i < rows; i++) y[i] *= 1 + noise * lssar_rng_normal(&r);
    return 0;
}

double sr_law_max_relerr(const sr_law *L, const char *eq, int rows, uint64_t seed) {
    double *X = malloc(sizeof(double) * (size_t)rows * (L->nf + 2));
    if (!X) return INFINITY;
    double *y = X + (size_t)rows * L->nf, *p = y + rows, worst = INFINITY;
    if (!sr_law_data(L, rows, seed, 0, X, y) && !lssar_sr_eval(eq, X, rows, L->nf, L->feat, p)) {
        worst = 0;
        for (int i = 0; i < rows; i++) worst = fmax(worst, fabs(p[i] - y[i]) / fabs(y[i]));
        if (!isfinite(worst)) worst = INFINITY;
    }
    free(X);
    return worst;
}
