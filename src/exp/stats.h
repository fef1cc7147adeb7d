/*
 * stats.h - the confidence intervals of the experiment commands over repeated runs (seeds).
 *
 * A mean over n independent values (one per seed) is reported with the Student t interval
 * mean +- t(0.975, n - 1) sd / sqrt(n), sd the sample standard deviation (n - 1 in the
 * denominator): exact for normal values, and the usual choice for the few seeds an experiment
 * can afford (the normal 1.96 would be too narrow: t(0.975, 2) = 4.30). Paired differences (the
 * same windows, the same seed index) are the same computation on the differences.
 */
#ifndef LSSAR_EXP_STATS_H
#define LSSAR_EXP_STATS_H

/* The 0.975 quantile of Student's t with df degrees of freedom (df >= 1; NaN otherwise):
   a table to df = 30, then the Cornish-Fisher expansion around the normal 1.959964 (error
   below 1e-4 there). */
double exp_t975(int df);
/* Mean of x[0..n-1] into *mean and the sample standard error sd / sqrt(n) into *se (0 for
   n = 1; both NaN for n < 1). */
void exp_mean_se(const double *x, int n, double *mean, double *se);
/* Mean and the half-width of its 95% t interval, t(0.975, n - 1) * se; the half-width is NaN
   for n < 2 (one value says nothing about the spread). */
void exp_mean_ci95(const double *x, int n, double *mean, double *half);

#endif
