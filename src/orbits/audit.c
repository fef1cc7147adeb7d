// audit.c - the law audit's one numeric kernel: the L1-optimal constant of a one-term law.
//
// min_c sum_i |y_i - c g_i| = min_c sum_i |g_i| |y_i / g_i - c|: a weighted L1 location problem,
// solved exactly by the weighted median of the ratios y_i / g_i with weights |g_i|. This is why a
// single heavy row can decide the constant (spec/orbits.md, "The 27.02 m / r^2 result").
#include <math.h>
#include <stdlib.h>
#include "orbits/probe.h"

typedef struct { double ratio, w; } rw;
static int cmp_ratio(const void *a, const void *b) {
    double x = ((const rw *)a)->ratio, y = ((const rw *)b)->ratio;
    return (x > y) - (x < y);
}

double orb_l1_const(const double *y, const double *g, int n, double *l1) {
    rw *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (!v) { if (l1) *l1 = NAN; return NAN; }
    int m = 0;
    double wsum = 0;
    for (int i = 0; i < n; i++) {
        if (g[i] == 0.0 || !isfinite(g[i]) || !isfinite(y[i])) continue;
        v[m].ratio = y[i] / g[i];
        v[m].w = fabs(g[i]);
        wsum += v[m].w;
        m++;
    }
    double c = NAN;
    if (m > 0) {
        qsort(v, (size_t)m, sizeof *v, cmp_ratio);
        // the first ratio where the cumulative weight reaches half the total
        double acc = 0;
        for (int i = 0; i < m; i++) {
            acc += v[i].w;
            if (acc >= 0.5 * wsum) { c = v[i].ratio; break; }
        }
        if (isnan(c)) c = v[m - 1].ratio;
    }
    free(v);
    if (l1) {
        double s = 0;
        int k = 0;
        for (int i = 0; i < n; i++) {
            if (!isfinite(g[i]) || !isfinite(y[i])) continue;
            s += fabs(y[i] - c * g[i]);
            k++;
        }
        *l1 = k ? s / k : NAN;
    }
    return c;
}
