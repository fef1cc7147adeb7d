// newton.c - `lssar orbits newton` as a library function (orbits/tasks.h): symbolic regression of
// the forces a probe (or the oracle) predicted, per "galaxy" (a random subsample of forces.csv),
// and the law audit of spec/orbits.md: does the law depend on the star mass m2 at all, and what are
// the L1-optimal constants of c m1 m2 / r^2 (Newton: c = G = 4 pi^2) and of c m1 / r^2 (the
// "27.02 m / r^2" form).
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cJSON.h>
#include "core/dist.h"
#include "core/json.h"
#include "core/util.h"
#include "lssar.h"
#include "orbits/probe.h"
#include "orbits/sample.h"
#include "orbits/tasks.h"
#include "symreg/sr.h"

#define OUT(...) do { if (out) fprintf(out, __VA_ARGS__); } while (0)

// lssar_fail with the previous failure's message in it (copied first: it is the buffer written).
static int refail(int code, const char *what, const char *hint) {
    char prev[1024];
    snprintf(prev, sizeof prev, "%s", lssar_errmsg());
    return lssar_fail(code, "%s: %s%s", what, prev, hint);
}
static const char *HEADER_HINT = "\n  (forces.csv needs the header r,m1,m2,F_pred,F_true)";

static const char *const NAMES[3] = {"r", "m1", "m2"};

// 1 if identifier `name` occurs in eq as a whole word.
static int mentions(const char *eq, const char *name) {
    size_t l = strlen(name);
    for (const char *p = strstr(eq, name); p; p = strstr(p + 1, name)) {
        int before = p > eq && (isalnum((unsigned char)p[-1]) || p[-1] == '_');
        int after = isalnum((unsigned char)p[l]) || p[l] == '_';
        if (!before && !after) return 1;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// Median relative change of the law's predictions when feature f is multiplied by 1.1: 0 for a
// law that ignores it (whether or not the name appears, e.g. m2 - m2).
static double sensitivity(const char *eq, const double *X, int n, int f, double *base, double *pert,
                          double *work) {
    memcpy(work, X, sizeof(double) * 3 * n);
    for (int i = 0; i < n; i++) work[f * n + i] *= 1.1;
    lssar_sr_eval(eq, X, n, 3, NAMES, base);
    lssar_sr_eval(eq, work, n, 3, NAMES, pert);
    int m = 0;
    for (int i = 0; i < n; i++) {
        double d = fabs(pert[i] - base[i]), s = fabs(base[i]);
        if (!isfinite(d)) continue;
        work[m++] = s > 0 ? d / s : (d > 0 ? INFINITY : 0.0);
    }
    if (!m) return NAN;
    qsort(work, (size_t)m, sizeof(double), cmp_double);
    return work[m / 2];
}

// Spearman rank correlation of log m2 with log(F r^2 / m1), the forces with the m1 / r^2 part
// divided out: ~1 for Newton's law, ~0 for a law without m2. A check of the FORCES that does not
// rely on the symbolic regression finding the law. Rows with F <= 0 are skipped; ties get the
// average rank.
typedef struct { double v; int i; } vi;
static int cmp_vi(const void *a, const void *b) {
    double x = ((const vi *)a)->v, y = ((const vi *)b)->v;
    return (x > y) - (x < y);
}
static void ranks(vi *t, int n, double *rank) {
    qsort(t, (size_t)n, sizeof *t, cmp_vi);
    for (int a = 0; a < n;) {
        int b = a;
        while (b + 1 < n && t[b + 1].v == t[a].v) b++;
        for (int k = a; k <= b; k++) rank[t[k].i] = 0.5 * (a + b);
        a = b + 1;
    }
}
static double m2_rank_corr(const double *X, const double *y, int n) {
    vi *t = malloc(sizeof(vi) * n);
    double *ra = malloc(sizeof(double) * n), *rb = malloc(sizeof(double) * n);
    int *keep = malloc(sizeof(int) * n), m = 0;
    double rho = NAN;
    if (!t || !ra || !rb || !keep) goto out;
    for (int i = 0; i < n; i++)
        if (y[i] > 0 && X[n + i] > 0 && X[2 * n + i] > 0) keep[m++] = i;
    if (m < 3) goto out;
    for (int k = 0; k < m; k++) { int i = keep[k]; t[k].v = log(X[2 * n + i]); t[k].i = k; }
    ranks(t, m, ra);
    for (int k = 0; k < m; k++) { int i = keep[k]; t[k].v = log(y[i] * X[i] * X[i] / X[n + i]); t[k].i = k; }
    ranks(t, m, rb);
    double ma = 0, mb = 0, sab = 0, saa = 0, sbb = 0;
    for (int k = 0; k < m; k++) { ma += ra[k]; mb += rb[k]; }
    ma /= m; mb /= m;
    for (int k = 0; k < m; k++) {
        sab += (ra[k] - ma) * (rb[k] - mb);
        saa += (ra[k] - ma) * (ra[k] - ma);
        sbb += (rb[k] - mb) * (rb[k] - mb);
    }
    rho = saa > 0 && sbb > 0 ? sab / sqrt(saa * sbb) : 0.0;   // constant ratios: no dependence
out:
    free(t); free(ra); free(rb); free(keep);
    return rho;
}

typedef struct { double c, l1, rel; } fit1;
// L1-optimal c of y ~ c m1 (m2) / r^2; rel = l1 / mean |y|.
static fit1 fit_form(const double *X, const double *y, int n, int with_m2, double *g) {
    fit1 f;
    double my = 0;
    for (int i = 0; i < n; i++) {
        double r = X[i], m1 = X[n + i], m2 = X[2 * n + i];
        g[i] = m1 * (with_m2 ? m2 : 1.0) / (r * r);
        my += fabs(y[i]);
    }
    f.c = orb_l1_const(y, g, n, &f.l1);
    f.rel = my > 0 ? f.l1 * n / my : NAN;
    return f;
}

static cJSON *fit_json(fit1 f) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "c", f.c);
    cJSON_AddNumberToObject(j, "l1", f.l1);
    cJSON_AddNumberToObject(j, "relative_l1", f.rel);
    return j;
}


void orb_newton_defaults(orb_newton_opts *o) {
    memset(o, 0, sizeof *o);
    o->target = "F_pred";
    o->galaxies = 5;
    o->rows = 1000;
    o->report = stdout;
    lssar_sr_defaults(&o->sr);
    o->sr.ops = "+,*,sin,cos,exp,inv";
    o->sr.maxsize = 20;
    o->sr.loss = LSSAR_SR_L1;
    o->sr.iterations = 100;
    o->sr.restarts = 3;
    o->sr.select = LSSAR_SR_SCORE;
}

void orb_newton_result_free(orb_newton_result *r) {
    if (!r) return;
    for (int g = 0; g < r->galaxies && r->galaxy; g++) free(r->galaxy[g].equation);
    free(r->galaxy);
    memset(r, 0, sizeof *r);
}

// One run: the forces table, the columns used, and the buffers of `chunk` galaxies searched together.
typedef struct {
    const orb_newton_opts *opt;
    const char *target;
    FILE *out;                         // the report; NULL on ranks other than 0
    sr_csv csv;
    int col[3], cy, ct;                // r, m1, m2; the target; F_true (-1 if absent)
    int N, n, chunk;                   // rows of the table, rows per galaxy, galaxies at once
    double *Xc, *yc, *ytc;             // (chunk, 3, n), (chunk, n), (chunk, n)
    double *b1, *b2, *w;               // (n), (n), (max(3 n, galaxies)) scratch
    int *perm;                         // (N)
    double *cs;                        // (galaxies, 5): c m1 m2, c m1, their rel. L1, m2 rank corr.
    lssar_sr_options *og;              // (chunk)
    sr_job *jobs;
    lssar_sr_result *sres;
    char (*labels)[24];
    cJSON *jg;                         // the galaxies' JSON
    int dep_m2, newton_found;          // galaxies whose law depends on m2, matches Newton within 1%
} newton_run;

// The forces table, its columns, and every distance > 0.
static int read_forces(newton_run *r) {
    const char *forces = r->opt->forces;
    int rc = sr_csv_read(forces, &r->csv);
    if (rc) return rc;
    for (int f = 0; f < 3; f++)
        if ((r->col[f] = sr_csv_column(&r->csv, NAMES[f])) < 0)
            return refail(LSSAR_E_FORMAT, forces, HEADER_HINT);
    if ((r->cy = sr_csv_column(&r->csv, r->target)) < 0) return refail(LSSAR_E_FORMAT, forces, HEADER_HINT);
    r->ct = sr_csv_column(&r->csv, "F_true");
    const int N = r->N = r->csv.rows;
    if (N < 10) return lssar_fail(LSSAR_E_SIZE, "%s has %d rows; need >= 10", forces, N);
    for (int i = 0; i < N; i++)
        if (!(r->csv.data[(size_t)r->col[0] * N + i] > 0))
            return lssar_fail(LSSAR_E_ARG, "%s: row %d has r = %g; distances must be > 0", forces, i + 2,
                              r->csv.data[(size_t)r->col[0] * N + i]);
    return 0;
}

// The searches of `chunk` galaxies run together (sr_search_jobs spreads their restarts over the
// ranks), so their samples are held at once: all galaxies, up to 64 MiB of them.
static int alloc_buffers(newton_run *r, orb_newton_result *res) {
    const int galaxies = r->opt->galaxies, rows = r->opt->rows;
    const int n = r->n = rows < r->N ? rows : r->N;
    const int chunk = r->chunk = (int)fmin(galaxies, fmax(1, (64.0 * 1024 * 1024) / (40.0 * n)));
    r->Xc = malloc(sizeof(double) * 3 * n * chunk);
    r->yc = malloc(sizeof(double) * n * chunk);
    r->ytc = malloc(sizeof(double) * n * chunk);
    r->b1 = malloc(sizeof(double) * n);
    r->b2 = malloc(sizeof(double) * n);
    r->w = malloc(sizeof(double) * (3 * n > galaxies ? 3 * n : galaxies));
    r->perm = malloc(sizeof(int) * r->N);
    r->cs = malloc(sizeof(double) * galaxies * 5);
    r->og = malloc(sizeof *r->og * chunk);
    r->jobs = malloc(sizeof *r->jobs * chunk);
    r->sres = calloc(chunk, sizeof *r->sres);
    r->labels = malloc(sizeof *r->labels * chunk);
    res->galaxy = calloc((size_t)galaxies, sizeof *res->galaxy);
    if (!r->Xc || !r->yc || !r->ytc || !r->b1 || !r->b2 || !r->w || !r->perm || !r->cs || !r->og ||
        !r->jobs || !r->sres || !r->labels || !res->galaxy)
        return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    return 0;
}

// Galaxy g into slot k: n rows without replacement (partial Fisher-Yates on its own stream), and
// its search job.
static void sample_galaxy(newton_run *r, int k, int g) {
    const int n = r->n, N = r->N;
    const uint64_t seed = r->opt->seed;
    double *X = r->Xc + (size_t)3 * n * k, *y = r->yc + (size_t)n * k, *yt = r->ytc + (size_t)n * k;
    lssar_rng rng;
    lssar_rng_stream(&rng, seed, (uint64_t)g);
    for (int i = 0; i < N; i++) r->perm[i] = i;
    for (int i = 0; i < n; i++) {
        int j = i + (int)lssar_rng_below(&rng, (uint64_t)(N - i));
        int t = r->perm[i]; r->perm[i] = r->perm[j]; r->perm[j] = t;
    }
    const double *d = r->csv.data;
    for (int i = 0; i < n; i++) {
        for (int f = 0; f < 3; f++) X[f * n + i] = d[(size_t)r->col[f] * N + r->perm[i]];
        y[i] = d[(size_t)r->cy * N + r->perm[i]];
        yt[i] = r->ct >= 0 ? d[(size_t)r->ct * N + r->perm[i]] : NAN;
    }
    r->og[k] = r->opt->sr;
    r->og[k].seed = seed * 1000003u + (uint64_t)g * 101u;
    snprintf(r->labels[k], sizeof r->labels[k], "galaxy %d", g);
    r->jobs[k] = (sr_job){&r->og[k], X, y, n, 3, NAMES, r->labels[k], &r->sres[k]};
}

// What one galaxy's audit found, for its report lines and JSON.
typedef struct {
    double sens[3];
    int dep[3];
    double newton_rel, rho;
    fit1 f12, f1, t12, t1;
} galaxy_audit;

// The selected law of slot k against Newton: which inputs it depends on, its median relative
// difference from G m1 m2 / r^2, the constant fits to the target (and F_true), the m2 correlation.
static void audit_galaxy(newton_run *r, int k, const lssar_sr_equation *e, galaxy_audit *a) {
    const int n = r->n;
    const double *X = r->Xc + (size_t)3 * n * k, *y = r->yc + (size_t)n * k, *yt = r->ytc + (size_t)n * k;
    for (int f = 0; f < 3; f++) {
        a->sens[f] = sensitivity(e->equation, X, n, f, r->b1, r->b2, r->w);
        a->dep[f] = mentions(e->equation, NAMES[f]) && (a->sens[f] > 1e-9 || isnan(a->sens[f]));
    }
    lssar_sr_eval(e->equation, X, n, 3, NAMES, r->b1);
    for (int i = 0; i < n; i++) {
        double nw = ORB_G * X[n + i] * X[2 * n + i] / (X[i] * X[i]);
        r->w[i] = fabs(r->b1[i] - nw) / nw;
    }
    qsort(r->w, (size_t)n, sizeof(double), cmp_double);
    a->newton_rel = r->w[n / 2];
    a->f12 = fit_form(X, y, n, 1, r->b2);
    a->f1 = fit_form(X, y, n, 0, r->b2);
    a->t12 = a->t1 = (fit1){NAN, NAN, NAN};
    if (r->ct >= 0) { a->t12 = fit_form(X, yt, n, 1, r->b2); a->t1 = fit_form(X, yt, n, 0, r->b2); }
    a->rho = m2_rank_corr(X, y, n);
}

static void report_galaxy(const newton_run *r, int g, const lssar_sr_result *sr, const galaxy_audit *a) {
    FILE *out = r->out;
    const lssar_sr_equation *e = &sr->front[sr->selected];
    OUT("galaxy %d: %s   (complexity %d, L1 %.4g, %.1f s)\n", g, e->equation, e->complexity, e->loss,
        sr->seconds);
    OUT("  depends on:%s%s%s   (median change for x1.1: r %.3g, m1 %.3g, m2 %.3g); vs G m1 m2/r^2: "
        "median rel. diff %.3g\n",
        a->dep[0] ? " r" : "", a->dep[1] ? " m1" : "", a->dep[2] ? " m2" : "", a->sens[0], a->sens[1],
        a->sens[2], a->newton_rel);
    OUT("  forces vs m2: rank correlation of log m2 with log(%s r^2/m1) = %.3f\n", r->target, a->rho);
    OUT("  fits to %s: c m1 m2/r^2: c = %.5g (c/G = %.4f, rel. L1 %.3g)   c m1/r^2: c = %.5g (rel. "
        "L1 %.3g)\n",
           r->target, a->f12.c, a->f12.c / ORB_G, a->f12.rel, a->f1.c, a->f1.rel);
    if (r->ct >= 0)
        OUT("  fits to F_true: c m1 m2/r^2: c = %.5g (rel. L1 %.3g)   c m1/r^2: c = %.5g (rel. L1 "
            "%.3g)\n", a->t12.c, a->t12.rel, a->t1.c, a->t1.rel);
}

static cJSON *galaxy_json(const newton_run *r, int g, const lssar_sr_result *sr, const galaxy_audit *a) {
    const lssar_sr_equation *e = &sr->front[sr->selected];
    cJSON *jo = cJSON_CreateObject(), *jd = cJSON_CreateArray(), *js = cJSON_CreateObject();
    cJSON_AddNumberToObject(jo, "galaxy", g);
    cJSON_AddNumberToObject(jo, "rows", r->n);
    cJSON_AddStringToObject(jo, "equation", e->equation);
    cJSON_AddNumberToObject(jo, "complexity", e->complexity);
    cJSON_AddNumberToObject(jo, "loss", e->loss);
    for (int f = 0; f < 3; f++) {
        if (a->dep[f]) cJSON_AddItemToArray(jd, cJSON_CreateString(NAMES[f]));
        cJSON_AddNumberToObject(js, NAMES[f], a->sens[f]);
    }
    cJSON_AddItemToObject(jo, "depends_on", jd);
    cJSON_AddItemToObject(jo, "sensitivity", js);
    cJSON_AddNumberToObject(jo, "newton_median_rel_diff", a->newton_rel);
    cJSON_AddNumberToObject(jo, "m2_rank_correlation", a->rho);
    cJSON_AddItemToObject(jo, "fit_m1m2", fit_json(a->f12));
    cJSON_AddItemToObject(jo, "fit_m1", fit_json(a->f1));
    if (r->ct >= 0) {
        cJSON_AddItemToObject(jo, "true_fit_m1m2", fit_json(a->t12));
        cJSON_AddItemToObject(jo, "true_fit_m1", fit_json(a->t1));
    }
    cJSON_AddNumberToObject(jo, "seconds", sr->seconds);
    cJSON *jf = cJSON_CreateArray();
    for (int k = 0; k < sr->n; k++) {
        cJSON *q = cJSON_CreateObject();
        cJSON_AddStringToObject(q, "equation", sr->front[k].equation);
        cJSON_AddNumberToObject(q, "complexity", sr->front[k].complexity);
        cJSON_AddNumberToObject(q, "loss", sr->front[k].loss);
        cJSON_AddNumberToObject(q, "score", sr->front[k].score);
        cJSON_AddItemToArray(jf, q);
    }
    cJSON_AddItemToObject(jo, "pareto", jf);
    return jo;
}

// The galaxies g0 .. g0 + gn - 1: sampled, searched together, audited, reported.
static int run_chunk(newton_run *r, int g0, int gn, orb_newton_result *res) {
    for (int k = 0; k < gn; k++) sample_galaxy(r, k, g0 + k);
    int bad = -1, rc = sr_search_jobs(r->jobs, gn, &bad);
    if (rc) {
        if (bad >= 0) {
            char what[32];
            snprintf(what, sizeof what, "galaxy %d", g0 + bad);
            rc = refail(rc, what, "");
        }
        return rc;
    }
    for (int k = 0; k < gn; k++) {
        const int g = g0 + k;
        lssar_sr_result *sr = &r->sres[k];
        const lssar_sr_equation *e = &sr->front[sr->selected];
        galaxy_audit a;
        audit_galaxy(r, k, e, &a);
        r->cs[g * 5 + 0] = a.f12.c;
        r->cs[g * 5 + 1] = a.f1.c;
        r->cs[g * 5 + 2] = a.f12.rel;
        r->cs[g * 5 + 3] = a.f1.rel;
        r->cs[g * 5 + 4] = a.rho;
        r->dep_m2 += a.dep[2];
        r->newton_found += a.newton_rel < 0.01;
        report_galaxy(r, g, sr, &a);
        cJSON_AddItemToArray(r->jg, galaxy_json(r, g, sr, &a));
        res->galaxy[g].equation = strdup(e->equation);
        for (int f = 0; f < 3; f++) res->galaxy[g].depends[f] = a.dep[f];
        lssar_sr_result_free(sr);
        if (!res->galaxy[g].equation) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    }
    return 0;
}

// The audit over galaxies: medians of the constants into med (5) and res, and its report lines.
static void audit_all(newton_run *r, double t0, double *med, orb_newton_result *res) {
    FILE *out = r->out;
    const int galaxies = r->opt->galaxies;
    for (int k = 0; k < 5; k++) {
        for (int g = 0; g < galaxies; g++) r->w[g] = r->cs[g * 5 + k];
        qsort(r->w, (size_t)galaxies, sizeof(double), cmp_double);
        med[k] = galaxies % 2 ? r->w[galaxies / 2] : 0.5 * (r->w[galaxies / 2 - 1] + r->w[galaxies / 2]);
    }
    const char *prefers = med[2] <= med[3] ? "c*m1*m2/r**2" : "c*m1/r**2";
    OUT("law audit (%.1f s): c m1 m2/r^2: median c = %.5g = %.4f G (rel. L1 %.3g); c m1/r^2: median c = %.5g "
        "(rel. L1 %.3g)\n",
           lssar_now() - t0, med[0], med[0] / ORB_G, med[2], med[1], med[3]);
    OUT("  better one-term form: %s; laws depending on m2: %d of %d; laws matching G m1 m2/r^2 within 1%%: "
        "%d of %d\n",
           prefers, r->dep_m2, galaxies, r->newton_found, galaxies);
    OUT("  the forces themselves %s on m2 (median rank correlation of log m2 with log(F r^2/m1): %.3f)\n",
           fabs(med[4]) > 0.5 ? "depend" : "do not depend", med[4]);
    res->c_m1m2 = med[0]; res->c_m1m2_over_G = med[0] / ORB_G; res->rel_l1_m1m2 = med[2];
    res->c_m1 = med[1]; res->rel_l1_m1 = med[3]; res->m2_rank_correlation = med[4];
    res->better_form = prefers;
    res->galaxies_depending_on_m2 = r->dep_m2;
    res->galaxies_newton_within_1pct = r->newton_found;
}

// --json: the settings, every galaxy and the audit; rank 0 alone writes.
static int write_json(newton_run *r, const double *med, const char *prefers) {
    const lssar_sr_options *o = &r->opt->sr;
    const int galaxies = r->opt->galaxies;
    cJSON *j = cJSON_CreateObject(), *a = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "forces", r->opt->forces);
    cJSON_AddStringToObject(j, "target", r->target);
    cJSON *set = cJSON_CreateObject();
    cJSON_AddStringToObject(set, "ops", o->ops);
    cJSON_AddNumberToObject(set, "maxsize", o->maxsize);
    cJSON_AddStringToObject(set, "loss", "l1");
    cJSON_AddNumberToObject(set, "iterations", o->iterations);
    cJSON_AddNumberToObject(set, "restarts", o->restarts);
    cJSON_AddStringToObject(set, "select", "score");
    cJSON_AddItemToObject(j, "settings", set);
    cJSON_AddItemToObject(j, "galaxies", r->jg);
    r->jg = NULL;
    cJSON_AddNumberToObject(a, "G", ORB_G);
    cJSON_AddNumberToObject(a, "c_m1m2", med[0]);
    cJSON_AddNumberToObject(a, "c_m1m2_over_G", med[0] / ORB_G);
    cJSON_AddNumberToObject(a, "relative_l1_m1m2", med[2]);
    cJSON_AddNumberToObject(a, "c_m1", med[1]);
    cJSON_AddNumberToObject(a, "relative_l1_m1", med[3]);
    cJSON_AddStringToObject(a, "better_form", prefers);
    cJSON_AddNumberToObject(a, "galaxies_depending_on_m2", r->dep_m2);
    cJSON_AddBoolToObject(a, "depends_on_m2", r->dep_m2 * 2 > galaxies);
    cJSON_AddNumberToObject(a, "m2_rank_correlation", med[4]);
    cJSON_AddBoolToObject(a, "forces_depend_on_m2", fabs(med[4]) > 0.5);
    cJSON_AddNumberToObject(a, "galaxies_newton_within_1pct", r->newton_found);
    cJSON_AddItemToObject(j, "audit", a);
    int rc = lssar_dist_rank() == 0 ? lssar_write_json(r->opt->json, j) : 0;
    cJSON_Delete(j);
    return lssar_dist_agree(rc);
}

static void free_run(newton_run *r) {
    cJSON_Delete(r->jg);
    for (int k = 0; k < r->chunk && r->sres; k++) lssar_sr_result_free(&r->sres[k]);
    free(r->Xc); free(r->yc); free(r->ytc); free(r->b1); free(r->b2); free(r->w); free(r->perm); free(r->cs);
    free(r->og); free(r->jobs); free(r->sres); free(r->labels);
    sr_csv_free(&r->csv);
}

int orb_newton_run(const orb_newton_opts *opt, orb_newton_result *res) {
    memset(res, 0, sizeof *res);
    const int galaxies = opt->galaxies;
    if (!opt->forces) return lssar_fail(LSSAR_E_ARG, "--forces is required");
    if (galaxies < 1 || galaxies > 1000)
        return lssar_fail(LSSAR_E_ARG, "--galaxies must be 1..1000, got %d", galaxies);
    if (opt->rows < 10) return lssar_fail(LSSAR_E_ARG, "--rows must be >= 10, got %d", opt->rows);
    newton_run r = {.opt = opt, .target = opt->target ? opt->target : "F_pred",
                    .out = lssar_dist_rank() == 0 ? opt->report : NULL,   // rank 0 alone reports
                    .col = {-1, -1, -1}, .cy = -1, .ct = -1};
    FILE *out = r.out;
    // Under mpirun every rank reads --forces itself; they meet at lssar_dist_agree, so a file that
    // one rank cannot read (or finds wrong) is one error naming that rank.
    int rc = read_forces(&r);
    if (!rc) rc = alloc_buffers(&r, res);
    if (!(rc = lssar_dist_agree(rc))) {
        res->galaxies = galaxies;
        r.jg = cJSON_CreateArray();
        double t0 = lssar_now();
        const lssar_sr_options *o = &opt->sr;
        OUT("orbits newton: %s, target %s, %d galaxies of %d rows (of %d); ops %s, maxsize %d, L1, %d "
            "iterations, %d restarts, select score\n",
               opt->forces, r.target, galaxies, r.n, r.N, o->ops, o->maxsize, o->iterations, o->restarts);
        for (int g0 = 0; g0 < galaxies && !rc; g0 += r.chunk)
            rc = run_chunk(&r, g0, galaxies - g0 < r.chunk ? galaxies - g0 : r.chunk, res);
        double med[5];
        if (!rc) audit_all(&r, t0, med, res);
        if (!rc && opt->json) rc = write_json(&r, med, res->better_form);
    }
    free_run(&r);
    if (rc) orb_newton_result_free(res);
    return rc;
}
