// extrap_stats.c - the statistics of every group of runs at every length: the mean over seeds with
// its 95% interval and the paired difference to softmax; see extrap_run.h.
//
//   seeds >= 2: the t interval over seeds (src/exp/stats.h) of the per-seed means, and of the
//               per-seed paired differences d_K = mean over windows w of loss(run, K, w) -
//               loss(softmax, K, w) (the same windows: they depend only on the data and T);
//   one seed:   the windows' variation only: mean +- 1.96 x its standard error over windows, and
//               the same for the per-window differences (paired); for mqar, the Wilson interval of
//               the accuracy and no interval for the difference.
// The softmax group's own difference is exactly 0 (every window minus itself).
#include <math.h>
#include <stdlib.h>
#include "exp/extrap_run.h"
#include "exp/stats.h"

// Group b's mean at length f and its interval, from the runs' numbers; 0 when a seed has none.
static int group_mean(const extrap *x, const extrap_run *runs, int b, int f, extrap_gstat *g) {
    const int nb = x->nb, seeds = x->o->seeds;
    double v[EXTRAP_MAX_RUNS];
    int fin = 1;
    for (int k = 0; k < seeds; k++) fin &= isfinite(v[k] = runs[k * nb + b].loss[f]);
    if (!fin) return 0;
    const extrap_run *r0 = &runs[b];
    if (seeds >= 2) {
        double h;
        exp_mean_ci95(v, seeds, &g->mean, &h);
        g->lo = g->mean - h;
        g->hi = g->mean + h;
    } else if (x->o->mqar) {
        g->mean = r0->loss[f]; g->lo = r0->lo[f]; g->hi = r0->hi[f];
    } else {
        g->mean = r0->loss[f];
        if (r0->windows[f] >= 2) { g->lo = g->mean - 1.96 * r0->se[f]; g->hi = g->mean + 1.96 * r0->se[f]; }
    }
    return 1;
}

// Seed k's paired difference of group b to group sg at length f into g->dseed[k] (text: the mean
// over the identical windows, its standard error into *dse); 0 when the windows do not pair up.
static int seed_diff(const extrap *x, const extrap_run *runs, double *const *win, int b, int sg, int f, int k,
                     extrap_gstat *g, double *dse) {
    const int nb = x->nb, nf = x->nf, i = k * nb + b, j = k * nb + sg;
    if (x->o->mqar) { g->dseed[k] = runs[i].loss[f] - runs[j].loss[f]; return 1; }
    const int W = runs[i].windows[f];
    const double *wi = win[i * nf + f], *wj = win[j * nf + f];
    if (W != runs[j].windows[f] || W < 1 || !wi || !wj) return 0;
    double *d = malloc((size_t)W * sizeof *d);
    if (!d) return 0;
    for (int w = 0; w < W; w++) d[w] = wi[w] - wj[w];
    exp_mean_se(d, W, &g->dseed[k], dse);
    if (W < 2) *dse = NAN;
    free(d);
    return 1;
}

// Group b's difference to group sg at length f, over the seeds.
static void group_diff(const extrap *x, const extrap_run *runs, double *const *win, int b, int sg, int f,
                       extrap_gstat *g) {
    const int seeds = x->o->seeds;
    double dse = NAN;
    for (int k = 0; k < seeds; k++)
        if (!seed_diff(x, runs, win, b, sg, f, k, g, &dse)) return;
    if (seeds >= 2) {
        double h;
        exp_mean_ci95(g->dseed, seeds, &g->dmean, &h);
        g->dlo = g->dmean - h;
        g->dhi = g->dmean + h;
    } else {
        g->dmean = g->dseed[0];
        if (!x->o->mqar) { g->dlo = g->dmean - 1.96 * dse; g->dhi = g->dmean + 1.96 * dse; }
    }
}

// Every group at every length, from the runs read back (cr) and their per-window losses (win[i *
// nf + f], text only).
static void group_stats(const extrap *x, extrap_stats *st, double *const *win) {
    for (int b = 0; b < x->nb; b++)
        for (int f = 0; f < x->nf; f++) {
            extrap_gstat *g = &st->gs[b * x->nf + f];
            g->mean = g->lo = g->hi = g->dmean = g->dlo = g->dhi = NAN;
            for (int k = 0; k < x->o->seeds; k++) g->dseed[k] = NAN;
            if (group_mean(x, st->cr, b, f, g) && st->sg >= 0) group_diff(x, st->cr, win, b, st->sg, f, g);
        }
}

// Each group's per-position curve: the mean over its seeds, bin by bin (as many bins as all have).
static void group_positions(const extrap *x, extrap_stats *st) {
    const int nb = x->nb, seeds = x->o->seeds;
    st->tmax = x->seqs[x->nf - 1];
    st->pbw = extrap_pos_bin_width(st->tmax);
    for (int b = 0; b < nb; b++) {
        int n = x->o->mqar ? 0 : st->cr[b].pos_bins;
        for (int k = 1; k < seeds; k++) if (st->cr[k * nb + b].pos_bins < n) n = st->cr[k * nb + b].pos_bins;
        st->gbins[b] = n;
        for (int i = 0; i < n; i++) {
            double s = 0;
            for (int k = 0; k < seeds; k++) s += st->cr[k * nb + b].pos_loss[i];
            st->gpos[b][i] = s / seeds;
        }
    }
}

double extrap_ds_score(const ds_result *d) { return d->lambada ? d->acc : d->acc_norm; }

// Group b on downstream task t over the seeds: the per-seed scores and the per-seed differences
// to the softmax group (paired by seed index, over the same documents).
static extrap_dsstat ds_group(const extrap *x, int b, int sg, int t) {
    const int nb = x->nb, seeds = x->o->seeds;
    const extrap_run *runs = x->runs;
    extrap_dsstat s = {NAN, NAN, NAN, NAN};
    double v[EXTRAP_MAX_RUNS] = {0}, dv[EXTRAP_MAX_RUNS] = {0};
    for (int k = 0; k < seeds; k++) {
        v[k] = extrap_ds_score(&runs[k * nb + b].ds[t]);
        if (sg >= 0) dv[k] = v[k] - extrap_ds_score(&runs[k * nb + sg].ds[t]);
    }
    exp_mean_ci95(v, seeds, &s.mean, &s.half);
    if (sg >= 0) exp_mean_ci95(dv, seeds, &s.dmean, &s.dhalf);
    return s;
}

// Every run's cache back into st->cr (and the text task's per-window losses into win).
static int read_back(const extrap *x, extrap_stats *st, double **win) {
    for (int i = 0; i < x->nr; i++) {
        char cp[4400];
        extrap_cache_path(cp, sizeof cp, x->o->out, &x->runs[i], "extrap");
        double **w = x->o->mqar ? NULL : win + (size_t)i * x->nf;
        if (!extrap_cache_load(cp, NULL, &st->cr[i], x->nf, x->o->mqar, w))
            return lssar_fail(LSSAR_E_IO, "%s: cannot read the evaluation of %s back (written in this call): "
                                          "is --out on a filesystem every rank sees?",
                              cp, x->runs[i].name);
    }
    return 0;
}

int extrap_stats_compute(const extrap *x, extrap_stats *st) {
    const int nr = x->nr, nb = x->nb, nf = x->nf, seeds = x->o->seeds;
    st->sg = -1;
    for (int b = 0; b < nb && st->sg < 0; b++)
        if (x->runs[b].attn == LSSAR_ATTN_SOFTMAX && !x->runs[b].eval_only) st->sg = b;
    double **win = calloc((size_t)nr * nf, sizeof *win);
    st->cr = calloc((size_t)nr, sizeof *st->cr);
    st->gs = calloc((size_t)nb * nf, sizeof *st->gs);
    st->dseed = calloc((size_t)nb * nf * seeds, sizeof *st->dseed);
    int rc = win && st->cr && st->gs && st->dseed ? 0 : lssar_fail(LSSAR_E_NOMEM, "out of memory");
    if (!rc) rc = read_back(x, st, win);
    if (!rc) {
        for (int i = 0; i < nb * nf; i++) st->gs[i].dseed = st->dseed + (size_t)i * seeds;
        group_stats(x, st, win);
        group_positions(x, st);
        for (int b = 0; seeds >= 2 && b < nb; b++)
            for (int t = 0; t < x->o->ntasks; t++) st->dss[b][t] = ds_group(x, b, st->sg, t);
    }
    for (int i = 0; win && i < nr * nf; i++) free(win[i]);
    free(win);
    return rc;
}

void extrap_stats_free(extrap_stats *st) {
    free(st->cr);
    free(st->gs);
    free(st->dseed);
    st->cr = NULL;
    st->gs = NULL;
    st->dseed = NULL;
}
