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

int orb_newton_run(const orb_newton_opts *opt, orb_newton_result *res) {
    memset(res, 0, sizeof *res);
    const char *forces = opt->forces, *target = opt->target ? opt->target : "F_pred", *json = opt->json;
    const int galaxies = opt->galaxies, rows = opt->rows;
    const uint64_t seed = opt->seed;
    FILE *out = lssar_dist_rank() == 0 ? opt->report : NULL;  // rank 0 alone reports
    lssar_sr_options o = opt->sr;
    if (!forces) return lssar_fail(LSSAR_E_ARG, "--forces is required");
    if (galaxies < 1 || galaxies > 1000)
        return lssar_fail(LSSAR_E_ARG, "--galaxies must be 1..1000, got %d", galaxies);
    if (rows < 10) return lssar_fail(LSSAR_E_ARG, "--rows must be >= 10, got %d", rows);
    int rc = 0, N = 0, n = 0, col[3] = {-1, -1, -1}, cy = -1, ct = -1, chunk = 0;
    double *Xc = NULL, *yc = NULL, *ytc = NULL, *b1 = NULL, *b2 = NULL, *w = NULL, *cs = NULL;
    int *perm = NULL;
    lssar_sr_options *og = NULL;
    sr_job *jobs = NULL;
    lssar_sr_result *sres = NULL;
    char (*labels)[24] = NULL;
    cJSON *jg = NULL;
    sr_csv csv = {0};
    // Under mpirun every rank reads --forces itself; they meet at lssar_dist_agree below, so a
    // file that one rank cannot read (or finds wrong) is one error naming that rank.
    if ((rc = sr_csv_read(forces, &csv))) goto agree;
    for (int f = 0; f < 3; f++)
        if ((col[f] = sr_csv_column(&csv, NAMES[f])) < 0) {
            rc = refail(LSSAR_E_FORMAT, forces, HEADER_HINT);
            goto agree;
        }
    if ((cy = sr_csv_column(&csv, target)) < 0) {
        rc = refail(LSSAR_E_FORMAT, forces, HEADER_HINT);
        goto agree;
    }
    ct = sr_csv_column(&csv, "F_true");
    N = csv.rows;
    if (N < 10) { rc = lssar_fail(LSSAR_E_SIZE, "%s has %d rows; need >= 10", forces, N); goto agree; }
    for (int i = 0; i < N; i++)
        if (!(csv.data[(size_t)col[0] * N + i] > 0)) {
            rc = lssar_fail(LSSAR_E_ARG, "%s: row %d has r = %g; distances must be > 0", forces, i + 2,
                            csv.data[(size_t)col[0] * N + i]);
            goto agree;
        }
    n = rows < N ? rows : N;
    // The searches of `chunk` galaxies run together (sr_search_jobs spreads their restarts over
    // the ranks), so their samples are held at once: all galaxies, up to 64 MiB of them.
    chunk = (int)fmin(galaxies, fmax(1, (64.0 * 1024 * 1024) / (40.0 * n)));
    Xc = malloc(sizeof(double) * 3 * n * chunk);
    yc = malloc(sizeof(double) * n * chunk);
    ytc = malloc(sizeof(double) * n * chunk);
    b1 = malloc(sizeof(double) * n);
    b2 = malloc(sizeof(double) * n);
    w = malloc(sizeof(double) * (3 * n > galaxies ? 3 * n : galaxies));
    perm = malloc(sizeof(int) * N);
    cs = malloc(sizeof(double) * galaxies * 5);
    og = malloc(sizeof *og * chunk); jobs = malloc(sizeof *jobs * chunk); sres = calloc(chunk, sizeof *sres);
    labels = malloc(sizeof *labels * chunk);
    res->galaxy = calloc((size_t)galaxies, sizeof *res->galaxy);
    if (!Xc || !yc || !ytc || !b1 || !b2 || !w || !perm || !cs || !og || !jobs || !sres || !labels ||
        !res->galaxy)
        rc = lssar_fail(LSSAR_E_NOMEM, "out of memory");
agree:
    if ((rc = lssar_dist_agree(rc))) goto done;
    res->galaxies = galaxies;
    jg = cJSON_CreateArray();
    int dep_m2 = 0, newton_found = 0;
    double t0 = lssar_now();
    OUT("orbits newton: %s, target %s, %d galaxies of %d rows (of %d); ops %s, maxsize %d, L1, %d "
        "iterations, %d restarts, select score\n",
           forces, target, galaxies, n, N, o.ops, o.maxsize, o.iterations, o.restarts);
    for (int g0 = 0; g0 < galaxies; g0 += chunk) {
        int gn = galaxies - g0 < chunk ? galaxies - g0 : chunk;
        for (int k = 0; k < gn; k++) {
            // galaxy g: n rows without replacement (partial Fisher-Yates on its own stream)
            int g = g0 + k;
            double *X = Xc + (size_t)3 * n * k, *y = yc + (size_t)n * k, *yt = ytc + (size_t)n * k;
            lssar_rng rng;
            lssar_rng_stream(&rng, seed, (uint64_t)g);
            for (int i = 0; i < N; i++) perm[i] = i;
            for (int i = 0; i < n; i++) {
                int j = i + (int)lssar_rng_below(&rng, (uint64_t)(N - i));
                int t = perm[i]; perm[i] = perm[j]; perm[j] = t;
            }
            for (int i = 0; i < n; i++) {
                for (int f = 0; f < 3; f++) X[f * n + i] = csv.data[(size_t)col[f] * N + perm[i]];
                y[i] = csv.data[(size_t)cy * N + perm[i]];
                yt[i] = ct >= 0 ? csv.data[(size_t)ct * N + perm[i]] : NAN;
            }
            og[k] = o;
            og[k].seed = seed * 1000003u + (uint64_t)g * 101u;
            snprintf(labels[k], sizeof labels[k], "galaxy %d", g);
            jobs[k] = (sr_job){&og[k], X, y, n, 3, NAMES, labels[k], &sres[k]};
        }
        int bad = -1;
        if ((rc = sr_search_jobs(jobs, gn, &bad))) {
            if (bad >= 0) {
                char what[32];
                snprintf(what, sizeof what, "galaxy %d", g0 + bad);
                rc = refail(rc, what, "");
            }
            goto done;
        }
        for (int k = 0; k < gn; k++) {
            int g = g0 + k;
            const double *X = Xc + (size_t)3 * n * k, *y = yc + (size_t)n * k, *yt = ytc + (size_t)n * k;
            lssar_sr_result *sr = &sres[k];
            const lssar_sr_equation *e = &sr->front[sr->selected];
            double sens[3];
            int dep[3];
            for (int f = 0; f < 3; f++) {
                sens[f] = sensitivity(e->equation, X, n, f, b1, b2, w);
                dep[f] = mentions(e->equation, NAMES[f]) && (sens[f] > 1e-9 || isnan(sens[f]));
            }
            // the law against Newton: median relative difference from G m1 m2 / r^2
            lssar_sr_eval(e->equation, X, n, 3, NAMES, b1);
            for (int i = 0; i < n; i++) {
                double nw = ORB_G * X[n + i] * X[2 * n + i] / (X[i] * X[i]);
                w[i] = fabs(b1[i] - nw) / nw;
            }
            qsort(w, (size_t)n, sizeof(double), cmp_double);
            double newton_rel = w[n / 2];
            fit1 f12 = fit_form(X, y, n, 1, b2), f1 = fit_form(X, y, n, 0, b2);
            fit1 t12 = {NAN, NAN, NAN}, t1 = {NAN, NAN, NAN};
            if (ct >= 0) { t12 = fit_form(X, yt, n, 1, b2); t1 = fit_form(X, yt, n, 0, b2); }
            double rho = m2_rank_corr(X, y, n);
            cs[g * 5 + 0] = f12.c;
            cs[g * 5 + 1] = f1.c;
            cs[g * 5 + 2] = f12.rel;
            cs[g * 5 + 3] = f1.rel;
            cs[g * 5 + 4] = rho;
            dep_m2 += dep[2];
            newton_found += newton_rel < 0.01;
            OUT("galaxy %d: %s   (complexity %d, L1 %.4g, %.1f s)\n", g, e->equation, e->complexity, e->loss,
                sr->seconds);
            OUT("  depends on:%s%s%s   (median change for x1.1: r %.3g, m1 %.3g, m2 %.3g); vs G m1 m2/r^2: "
                "median rel. diff %.3g\n",
                dep[0] ? " r" : "", dep[1] ? " m1" : "", dep[2] ? " m2" : "", sens[0], sens[1], sens[2],
                newton_rel);
            OUT("  forces vs m2: rank correlation of log m2 with log(%s r^2/m1) = %.3f\n", target, rho);
            OUT("  fits to %s: c m1 m2/r^2: c = %.5g (c/G = %.4f, rel. L1 %.3g)   c m1/r^2: c = %.5g (rel. "
                "L1 %.3g)\n",
                   target, f12.c, f12.c / ORB_G, f12.rel, f1.c, f1.rel);
            if (ct >= 0)
                OUT("  fits to F_true: c m1 m2/r^2: c = %.5g (rel. L1 %.3g)   c m1/r^2: c = %.5g (rel. L1 "
                    "%.3g)\n", t12.c, t12.rel, t1.c, t1.rel);
            cJSON *jo = cJSON_CreateObject(), *jd = cJSON_CreateArray(), *js = cJSON_CreateObject();
            cJSON_AddNumberToObject(jo, "galaxy", g);
            cJSON_AddNumberToObject(jo, "rows", n);
            cJSON_AddStringToObject(jo, "equation", e->equation);
            cJSON_AddNumberToObject(jo, "complexity", e->complexity);
            cJSON_AddNumberToObject(jo, "loss", e->loss);
            for (int f = 0; f < 3; f++) {
                if (dep[f]) cJSON_AddItemToArray(jd, cJSON_CreateString(NAMES[f]));
                cJSON_AddNumberToObject(js, NAMES[f], sens[f]);
            }
            cJSON_AddItemToObject(jo, "depends_on", jd);
            cJSON_AddItemToObject(jo, "sensitivity", js);
            cJSON_AddNumberToObject(jo, "newton_median_rel_diff", newton_rel);
            cJSON_AddNumberToObject(jo, "m2_rank_correlation", rho);
            cJSON_AddItemToObject(jo, "fit_m1m2", fit_json(f12));
            cJSON_AddItemToObject(jo, "fit_m1", fit_json(f1));
            if (ct >= 0) {
                cJSON_AddItemToObject(jo, "true_fit_m1m2", fit_json(t12));
                cJSON_AddItemToObject(jo, "true_fit_m1", fit_json(t1));
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
            cJSON_AddItemToArray(jg, jo);
            res->galaxy[g].equation = strdup(e->equation);
            for (int f = 0; f < 3; f++) res->galaxy[g].depends[f] = dep[f];
            lssar_sr_result_free(sr);
            if (!res->galaxy[g].equation) { rc = lssar_fail(LSSAR_E_NOMEM, "out of memory"); goto done; }
        }
    }
    // audit over galaxies: medians of the constants
    double med[5];
    for (int k = 0; k < 5; k++) {
        for (int g = 0; g < galaxies; g++) w[g] = cs[g * 5 + k];
        qsort(w, (size_t)galaxies, sizeof(double), cmp_double);
        med[k] = galaxies % 2 ? w[galaxies / 2] : 0.5 * (w[galaxies / 2 - 1] + w[galaxies / 2]);
    }
    const char *prefers = med[2] <= med[3] ? "c*m1*m2/r**2" : "c*m1/r**2";
    OUT("law audit (%.1f s): c m1 m2/r^2: median c = %.5g = %.4f G (rel. L1 %.3g); c m1/r^2: median c = %.5g "
        "(rel. L1 %.3g)\n",
           lssar_now() - t0, med[0], med[0] / ORB_G, med[2], med[1], med[3]);
    OUT("  better one-term form: %s; laws depending on m2: %d of %d; laws matching G m1 m2/r^2 within 1%%: "
        "%d of %d\n",
           prefers, dep_m2, galaxies, newton_found, galaxies);
    OUT("  the forces themselves %s on m2 (median rank correlation of log m2 with log(F r^2/m1): %.3f)\n",
           fabs(med[4]) > 0.5 ? "depend" : "do not depend", med[4]);
    res->c_m1m2 = med[0]; res->c_m1m2_over_G = med[0] / ORB_G; res->rel_l1_m1m2 = med[2];
    res->c_m1 = med[1]; res->rel_l1_m1 = med[3]; res->m2_rank_correlation = med[4];
    res->better_form = prefers;
    res->galaxies_depending_on_m2 = dep_m2;
    res->galaxies_newton_within_1pct = newton_found;
    if (json) {
        cJSON *j = cJSON_CreateObject(), *a = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "forces", forces);
        cJSON_AddStringToObject(j, "target", target);
        cJSON *set = cJSON_CreateObject();
        cJSON_AddStringToObject(set, "ops", o.ops);
        cJSON_AddNumberToObject(set, "maxsize", o.maxsize);
        cJSON_AddStringToObject(set, "loss", "l1");
        cJSON_AddNumberToObject(set, "iterations", o.iterations);
        cJSON_AddNumberToObject(set, "restarts", o.restarts);
        cJSON_AddStringToObject(set, "select", "score");
        cJSON_AddItemToObject(j, "settings", set);
        cJSON_AddItemToObject(j, "galaxies", jg);
        jg = NULL;
        cJSON_AddNumberToObject(a, "G", ORB_G);
        cJSON_AddNumberToObject(a, "c_m1m2", med[0]);
        cJSON_AddNumberToObject(a, "c_m1m2_over_G", med[0] / ORB_G);
        cJSON_AddNumberToObject(a, "relative_l1_m1m2", med[2]);
        cJSON_AddNumberToObject(a, "c_m1", med[1]);
        cJSON_AddNumberToObject(a, "relative_l1_m1", med[3]);
        cJSON_AddStringToObject(a, "better_form", prefers);
        cJSON_AddNumberToObject(a, "galaxies_depending_on_m2", dep_m2);
        cJSON_AddBoolToObject(a, "depends_on_m2", dep_m2 * 2 > galaxies);
        cJSON_AddNumberToObject(a, "m2_rank_correlation", med[4]);
        cJSON_AddBoolToObject(a, "forces_depend_on_m2", fabs(med[4]) > 0.5);
        cJSON_AddNumberToObject(a, "galaxies_newton_within_1pct", newton_found);
        cJSON_AddItemToObject(j, "audit", a);
        rc = lssar_dist_rank() == 0 ? lssar_write_json(json, j) : 0;  // rank 0 alone writes
        cJSON_Delete(j);
        rc = lssar_dist_agree(rc);
    }
done:
    cJSON_Delete(jg);
    for (int k = 0; k < chunk && sres; k++) lssar_sr_result_free(&sres[k]);
    free(Xc); free(yc); free(ytc); free(b1); free(b2); free(w); free(perm); free(cs);
    free(og); free(jobs); free(sres); free(labels);
    sr_csv_free(&csv);
    if (rc) orb_newton_result_free(res);
    return rc;
}
