// optimize.c - constant optimisation: Levenberg-Marquardt with a forward-difference Jacobian.
// Squared losses are minimised directly; L1-type losses by iteratively reweighted least squares
// (weights 1/sqrt(|r|)), a step being accepted only if the TRUE loss drops.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "symreg/sr.h"


// Solve (A) x = b for symmetric positive definite k x k A by Cholesky; returns -1 if not SPD.
static int chol_solve(double *A, double *b, int k) {
    for (int j = 0; j < k; j++) {
        double s = A[j * k + j];
        for (int t = 0; t < j; t++) s -= A[j * k + t] * A[j * k + t];
        if (!(s > 0)) return -1;
        double l = sqrt(s);
        A[j * k + j] = l;
        for (int i = j + 1; i < k; i++) {
            double v = A[i * k + j];
            for (int t = 0; t < j; t++) v -= A[i * k + t] * A[j * k + t];
            A[i * k + j] = v / l;
        }
    }
    for (int i = 0; i < k; i++) {  // L z = b
        double v = b[i];
        for (int t = 0; t < i; t++) v -= A[i * k + t] * b[t];
        b[i] = v / A[i * k + i];
    }
    for (int i = k - 1; i >= 0; i--) {  // L^T x = z
        double v = b[i];
        for (int t = i + 1; t < k; t++) v -= A[t * k + i] * b[t];
        b[i] = v / A[i * k + i];
    }
    return 0;
}

// Row weights for the least-squares surrogate of the loss at residual r = pred - y.
static void lm_weights(const sr_data *d, const double *pred, double *w, double floor_r) {
    for (int i = 0; i < d->n; i++) {
        double r = fabs(pred[i] - d->y[i]);
        switch (d->loss) {
        case LSSAR_SR_L2: w[i] = 1; break;
        case LSSAR_SR_REL: w[i] = 1.0 / (fabs(d->y[i]) * sqrt(fmax(r / fabs(d->y[i]), floor_r))); break;
        default: w[i] = 1.0 / sqrt(fmax(r, floor_r)); break;  // L1, L1 with dead zone
        }
    }
}

// One Levenberg-Marquardt run from q's constants; q is updated in place; returns its loss.
static double lm_run(sr_prog *q, const sr_data *d, int *ci, int k, int iters, double *work) {
    int n = d->n;
    double *pred = work, *pred2 = work + n, *w = work + 2 * n, *J = work + 3 * n;  // J: (k, n)
    if (sr_eval(q, d, pred)) return INFINITY;
    double cur = sr_loss_of(pred, d);
    double ymag = 0;
    for (int i = 0; i < n; i++) ymag += fabs(d->y[i]);
    double floor_r = 1e-12 * (ymag / n + 1e-300);
    double lambda = 1e-3;
    for (int it = 0; it < iters && cur > 0; it++) {
        lm_weights(d, pred, w, d->loss == LSSAR_SR_REL ? 1e-12 : floor_r);
        for (int j = 0; j < k; j++) {  // forward differences, step relative to the constant
            double c = q->n[ci[j]].c, h = 1e-7 * fmax(fabs(c), 1e-3);
            q->n[ci[j]].c = c + h;
            int bad = sr_eval(q, d, pred2);
            q->n[ci[j]].c = c;
            double *Jj = J + (size_t)j * n;
            for (int i = 0; i < n; i++) Jj[i] = bad ? 0 : (pred2[i] - pred[i]) / h;
        }
        double A[SR_MAXC * SR_MAXC], g[SR_MAXC];
        for (int a = 0; a < k; a++) {
            const double *Ja = J + (size_t)a * n;
            double s = 0;
            for (int i = 0; i < n; i++) s += Ja[i] * w[i] * w[i] * (pred[i] - d->y[i]);
            g[a] = s;
            for (int b = 0; b <= a; b++) {
                const double *Jb = J + (size_t)b * n;
                double t = 0;
                for (int i = 0; i < n; i++) t += Ja[i] * w[i] * w[i] * Jb[i];
                A[a * k + b] = A[b * k + a] = t;
            }
        }
        int accepted = 0;
        for (int tries = 0; tries < 6 && !accepted; tries++) {
            double M[SR_MAXC * SR_MAXC], step[SR_MAXC];
            memcpy(M, A, sizeof(double) * k * k);
            for (int a = 0; a < k; a++) { M[a * k + a] += lambda * A[a * k + a] + 1e-300; step[a] = -g[a]; }
            if (chol_solve(M, step, k)) { lambda *= 10; continue; }
            double old[SR_MAXC];
            for (int a = 0; a < k; a++) { old[a] = q->n[ci[a]].c; q->n[ci[a]].c = old[a] + step[a]; }
            double nl = sr_eval(q, d, pred2) ? INFINITY : sr_loss_of(pred2, d);
            if (nl < cur) {
                accepted = 1;
                double gain = (cur - nl) / cur;
                cur = nl;
                memcpy(pred, pred2, n * sizeof(double));
                lambda = fmax(lambda / 3, 1e-12);
                if (gain < 1e-10) it = iters;  // converged
            } else {
                for (int a = 0; a < k; a++) q->n[ci[a]].c = old[a];
                lambda *= 4;
            }
        }
        if (!accepted) break;
    }
    return cur;
}

double sr_optimize_constants(sr_prog *p, const sr_data *d, double loss0, int iters, int restarts,
                             lssar_rng *rng, double *work) {
    int ci[SR_MAXC], k = 0;
    for (int i = 0; i < p->len && k < SR_MAXC; i++) if (p->n[i].op == SR_CONST) ci[k++] = i;
    if (k == 0) return loss0;
    sr_prog best = *p;
    double bestloss = loss0;
    for (int r = 0; r <= restarts; r++) {
        sr_prog q = best;
        if (r > 0)  // restart from perturbed constants (multiplicative, random sign flips rarely)
            for (int j = 0; j < k; j++) {
                double c = q.n[ci[j]].c * (1 + 0.5 * lssar_rng_normal(rng));
                // e.g. exp(+c x) vs exp(-c x): a basin LM cannot cross
                if (lssar_rng_uniform(rng) < 0.25) c = -c;
                q.n[ci[j]].c = c;
            }
        double l = lm_run(&q, d, ci, k, iters, work);
        if (l < bestloss) { bestloss = l; best = q; }
    }
    *p = best;
    return bestloss;
}
