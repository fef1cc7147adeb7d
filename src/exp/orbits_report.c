// orbits_report.c - OUT/RESULTS.md and OUT/forces.png of `lssar orbits run`, from the JSON files
// its stages wrote (MODEL/eval.json, MODEL/probe.json, MODEL/newton.json; oracle/...): a report
// can be rebuilt from a finished OUT. See orbits_run.h.
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <cJSON.h>
#include "exp/orbits_run.h"
#include "exp/plot.h"
#include "exp/stats.h"
#include "core/json.h"
#include "core/util.h"
#include "orbits/tasks.h"

// One model's (or the oracle's) JSON files; NULL where a stage wrote none.
typedef struct { cJSON *eval, *probe, *newton; } model_files;

// The number at a path of keys ("compared", "model", "accuracy", NULL); NaN where there is none
// (JSON's null for NaN and the infinities included).
static double at(const cJSON *j, ...) {
    va_list ap;
    va_start(ap, j);
    for (const char *k = va_arg(ap, const char *); k && j; k = va_arg(ap, const char *))
        j = cJSON_GetObjectItemCaseSensitive(j, k);
    va_end(ap);
    return cJSON_IsNumber(j) ? j->valuedouble : NAN;
}
#define AT(...) at(__VA_ARGS__, (const char *)NULL)

// The row of the radius band b in eval.json's by_radius, or NULL.
static const cJSON *band(const cJSON *eval, int b) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(eval, "compared");
    return cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(c, "by_radius"), b);
}

// Predicted against true |F|, log-log, one series per forces.csv: the first seed's model of each
// kind, and the oracle.
static int plot_forces(const orbits_run_opts *o, char names[][32], int nm) {
    char png[4400], paths[ORBITS_MAX_KINDS + 1][4400];
    const char *csv[ORBITS_MAX_KINDS + 1], *titles[ORBITS_MAX_KINDS + 1];
    int n = 0;
    for (int k = 0; k <= o->nkinds; k++) {
        const char *name = names[k < o->nkinds ? k * o->seeds : nm];
        snprintf(paths[n], sizeof paths[n], "%s/%s/forces.csv", o->out, name);
        csv[n] = paths[n]; titles[n++] = name;
    }
    snprintf(png, sizeof png, "%s/forces.png", o->out);
    int rc = plot_csv_loglog(png, "Force probe: predicted vs true |F| (test rows nearest to training states)",
                             "true |F| (Msun AU / yr^2)", "predicted |F|", csv, titles, n, 5, 4);
    if (rc) fprintf(stderr, "lssar orbits run: no %s: %s\n", png, lssar_errmsg());
    return rc;
}

// The models of one kind over the seeds: per column the mean and the half-width of its 95% t
// interval (exp/stats.h); the next-position columns also as the difference to the previous-position
// baseline (on the same validation rows, so paired per model).
static void pooled_table(FILE *f, const orbits_run_opts *o, char names[][32], const model_files *mf) {
    const int seeds = o->seeds, galaxies = o->scale.galaxies;
    fprintf(f,
            "## Pooled over the %d seeds (mean +- the half-width of its 95%% t interval)\n\n"
            "| kind | accuracy | accuracy - previous position | error (AU) | error - previous position (AU) "
            "| probe mean abs log10 error | laws with m2 | laws = G m1 m2/r^2 (1%%) |\n"
            "|---|---|---|---|---|---|---|---|\n",
            seeds);
    for (int k = 0; k < o->nkinds; k++) {
        double v[5][ORBITS_MAX_MODELS];
        int m2 = 0, newton = 0;
        for (int s = 0; s < seeds; s++) {
            const model_files *r = &mf[k * seeds + s];
            v[0][s] = AT(r->eval, "compared", "model", "accuracy");
            v[1][s] = v[0][s] - AT(r->eval, "compared", "previous_position", "accuracy");
            v[2][s] = AT(r->eval, "compared", "model", "error_au");
            v[3][s] = v[2][s] - AT(r->eval, "compared", "previous_position", "error_au");
            v[4][s] = AT(r->probe, "mean_abs_log10_error");
            if (r->newton) {
                m2 += (int)AT(r->newton, "audit", "galaxies_depending_on_m2");
                newton += (int)AT(r->newton, "audit", "galaxies_newton_within_1pct");
            }
        }
        fprintf(f, "| %s |", names[k * seeds]);
        for (int c = 0; c < 5; c++) {
            double mean, half;
            exp_mean_ci95(v[c], seeds, &mean, &half);
            fprintf(f, c == 1 || c == 3 ? " %+.4f +- %.4f |" : " %.4f +- %.4f |", mean, half);
        }
        fprintf(f, " %d of %d | %d of %d |\n", m2, seeds * galaxies, newton, seeds * galaxies);
    }
    fprintf(f, "\nThe differences are model minus the previous-position baseline on the same rows: the model "
               "beats the baseline where the accuracy difference is positive and the error difference "
               "negative, with intervals that exclude 0.\n\n");
}

static void header(FILE *f, const orbits_run_opts *o) {
    const orbits_scale *sc = &o->scale;
    fprintf(f, "# Orbits pipeline, scale `%s`\n\n%s.\n\n", sc->name, sc->about);
    fprintf(f,
            "Data: %d training / %d validation systems (1000 rows each; %s), force set %d two-body systems.\n"
            "Model: %d layers, %d heads, width %d, %s, seq %d, batch %d, %d steps, lr %g, %d seed(s). Probe: "
            "%d steps, batch %d, lr %g, %d test rows kept. Newton: %d galaxies of %d rows, %d iterations, %d "
            "restarts (published: 5 x 1000, 100, 3).\n"
            "Commands: `commands.sh`.\n\n",
            sc->train_sys, sc->val_sys,
            sc->two_body ? "one planet each, as in the force set" : "1..10 planets, as published",
            sc->force_sys, sc->layers, sc->heads, sc->dim,
            sc->ordered ? "tied heads, ordered bins (--ordinal 7000), no weight decay, AdamW "
                          "eps " ORBITS_ORDERED_EPS_TEXT
                        : "untied heads, as published",
            sc->seq, sc->batch, o->steps ? o->steps : sc->steps, (double)sc->lr, o->seeds, sc->probe_steps,
            sc->probe_batch, (double)sc->probe_lr, sc->keep, sc->galaxies, sc->rows, sc->iterations,
            sc->restarts);
}

// Next-position prediction per model (eval.json), and its error by the target's distance.
static void eval_tables(FILE *f, const orbits_run_opts *o, char names[][32], const model_files *mf,
                        int nm) {
    fprintf(f,
            "## Next-position prediction (validation: rows 1..%d of %d systems, those with a previous "
            "step)\n\n"
            "| model | loss | accuracy | error (AU) | previous-position accuracy | previous-position error "
            "(AU) | accuracy - previous | error - previous (AU) |\n"
            "|---|---|---|---|---|---|---|---|\n",
            o->scale.seq, o->scale.eval_sys);
    for (int i = 0; i < nm; i++) {
        const cJSON *e = mf[i].eval;
        if (!e) continue;
        fprintf(f, "| %s | %.4f | %.4f | %.4f | %.4f | %.4f | %+.4f +- %.4f | %+.4f +- %.4f |\n", names[i],
                AT(e, "loss"), AT(e, "compared", "model", "accuracy"), AT(e, "compared", "model", "error_au"),
                AT(e, "compared", "previous_position", "accuracy"),
                AT(e, "compared", "previous_position", "error_au"),
                AT(e, "compared", "model_minus_previous", "accuracy"),
                AT(e, "compared", "model_minus_previous", "accuracy_ci95_half"),
                AT(e, "compared", "model_minus_previous", "error_au"),
                AT(e, "compared", "model_minus_previous", "error_au_ci95_half"));
    }
    fprintf(f, "\nThe last two columns: model minus previous position per validation system, then the mean "
               "over the systems +- the half-width of its 95%% t interval; the model beats the baseline "
               "where the accuracy difference is positive and the error difference negative, with intervals "
               "that exclude 0.\n\n");
    fprintf(f, "Where the error comes from: the same rows by the target's distance from the origin, mean "
               "error (AU) of the model / of the previous position.\n\n| model |");
    for (int b = 0; b < ORB_EVAL_BANDS; b++)
        if (b + 1 < ORB_EVAL_BANDS) fprintf(f, " %g-%g AU |", ORB_EVAL_BAND_AU[b], ORB_EVAL_BAND_AU[b + 1]);
        else fprintf(f, " >= %g AU |", ORB_EVAL_BAND_AU[b]);
    fprintf(f, "\n|---|");
    for (int b = 0; b < ORB_EVAL_BANDS; b++) fprintf(f, "---|");
    fprintf(f, "\n");
    for (int i = 0; i < nm; i++) {
        if (!mf[i].eval) continue;
        fprintf(f, "| %s |", names[i]);
        for (int b = 0; b < ORB_EVAL_BANDS; b++) {
            const cJSON *bd = band(mf[i].eval, b);
            fprintf(f, " %.3f / %.3f (%lld rows) |", AT(bd, "model_error_au"), AT(bd, "previous_error_au"),
                    (long long)AT(bd, "rows"));
        }
        fprintf(f, "\n");
    }
    fprintf(f, "\n");
}

// The force probe and the law audit (probe.json, newton.json), then the laws found.
static void law_tables(FILE *f, const orbits_run_opts *o, char names[][32], const model_files *mf, int n) {
    const int galaxies = o->scale.galaxies;
    fprintf(f, "## Force probe and law audit\n\n"
               "| forces from | probe mean abs log10 error | c of c m1 m2/r^2 (c/G) | c of c m1/r^2 | better "
               "form | rank corr. of m2 with F r^2/m1 | laws with m2 | laws = G m1 m2/r^2 (1%%) |\n"
               "|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n; i++) {
        if (!mf[i].newton) continue;
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(mf[i].newton, "audit");
        const char *form = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(a, "better_form"));
        fprintf(f, "| %s | %.3f | %.4g (%.4f) | %.4g | `%s` | %.3f | %.0f of %d | %.0f of %d |\n", names[i],
                AT(mf[i].probe, "mean_abs_log10_error"), AT(a, "c_m1m2"), AT(a, "c_m1m2_over_G"), AT(a, "c_m1"),
                form ? form : "?", AT(a, "m2_rank_correlation"), AT(a, "galaxies_depending_on_m2"), galaxies,
                AT(a, "galaxies_newton_within_1pct"), galaxies);
    }
    fprintf(f, "\n## Laws found (one per galaxy)\n\n");
    for (int i = 0; i < n; i++) {
        if (!mf[i].newton) continue;
        static const char *const FEAT[3] = {"r", "m1", "m2"};
        fprintf(f, "- **%s**:\n", names[i]);
        const cJSON *g;
        cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(mf[i].newton, "galaxies")) {
            const char *eq = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(g, "equation"));
            fprintf(f, "  - `%s` (depends on:", eq ? eq : "?");
            const cJSON *dep = cJSON_GetObjectItemCaseSensitive(g, "depends_on"), *d;
            for (int x = 0; x < 3; x++)
                cJSON_ArrayForEach(d, dep) if (cJSON_IsString(d) && !strcmp(d->valuestring, FEAT[x]))
                    fprintf(f, " %s", FEAT[x]);
            fprintf(f, ")\n");
        }
    }
}

static cJSON *read_in(const char *out, const char *model, const char *file) {
    char path[4400];
    snprintf(path, sizeof path, "%s/%s/%s", out, model, file);
    return lssar_read_json(path);
}

int orbits_report(const orbits_run_opts *o, const job_plan *times) {
    char names[ORBITS_MAX_MODELS + 1][32], path[4400];
    const int n = orbits_model_names(o, names) + 1;   // the models and the oracle
    model_files mf[ORBITS_MAX_MODELS + 1];
    for (int i = 0; i < n; i++) {
        mf[i].eval = i < n - 1 ? read_in(o->out, names[i], "eval.json") : NULL;
        mf[i].probe = read_in(o->out, names[i], "probe.json");
        mf[i].newton = read_in(o->out, names[i], "newton.json");
    }
    int rc = plot_forces(o, names, n - 1) ? -1 : 0;
    lssar_afile af;
    snprintf(path, sizeof path, "%s/RESULTS.md", o->out);
    if (lssar_afile_open(&af, path)) {
        fprintf(stderr, "lssar orbits run: %s\n", lssar_errmsg());
        rc = -1;
    } else {
        FILE *f = af.f;
        header(f, o);
        eval_tables(f, o, names, mf, n);
        if (o->seeds >= 2) pooled_table(f, o, names, mf);
        law_tables(f, o, names, mf, n);
        fprintf(f, "\n## Wall time per stage\n\n| stage | seconds |\n|---|---|\n");
        double total = 0;
        for (int i = 0; times && i < times->n; i++) {
            const job *j = &times->jobs[i];
            if (j->state != JOB_DONE || j->skip) continue;
            fprintf(f, "| %s | %.1f |\n", j->name, j->seconds);
            total += j->seconds;
        }
        fprintf(f, "| total | %.1f |\n", total);
        fprintf(f, "\n![predicted vs true |F|](forces.png)\n");
        if (lssar_afile_commit(&af)) { fprintf(stderr, "lssar orbits run: %s\n", lssar_errmsg()); rc = -1; }
    }
    for (int i = 0; i < n; i++) {
        cJSON_Delete(mf[i].eval);
        cJSON_Delete(mf[i].probe);
        cJSON_Delete(mf[i].newton);
    }
    return rc;
}
