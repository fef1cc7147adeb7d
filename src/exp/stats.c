// stats.c - t intervals over seeds; see stats.h.
#include <math.h>
#include "exp/stats.h"

double exp_t975(int df) {
    // t(0.975, df), df = 1..30 (standard tables, 3 decimals)
    static const double tab[30] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                                   2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                                   2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
    if (df < 1) return NAN;
    if (df <= 30) return tab[df - 1];
    // Cornish-Fisher: t = z + g1/df + g2/df^2 + g3/df^3 (Abramowitz and Stegun 26.7.5)
    const double z = 1.959963985, z2 = z * z, d = df;
    double g1 = z * (z2 + 1) / 4;
    double g2 = z * ((5 * z2 + 16) * z2 + 3) / 96;
    double g3 = z * (((3 * z2 + 19) * z2 + 17) * z2 - 15) / 384;
    return z + g1 / d + g2 / (d * d) + g3 / (d * d * d);
}

void exp_mean_se(const double *x, int n, double *mean, double *se) {
    *mean = *se = NAN;
    if (n < 1) return;
    double s = 0;
    for (int i = 0; i < n; i++) s += x[i];
    const double m = s / n;
    double v = 0;   // two passes: the spread of losses near 5 is small beside their square
    for (int i = 0; i < n; i++) v += (x[i] - m) * (x[i] - m);
    *mean = m;
    *se = n > 1 ? sqrt(v / (n - 1) / n) : 0;
}

void exp_mean_ci95(const double *x, int n, double *mean, double *half) {
    double se;
    exp_mean_se(x, n, mean, &se);
    *half = n >= 2 ? exp_t975(n - 1) * se : NAN;
}
