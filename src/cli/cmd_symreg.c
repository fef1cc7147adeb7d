// cmd_symreg.c - `lssar symreg`: symbolic regression on a CSV file. Progress on stderr, the Pareto
// table on stdout, and optionally JSON {"selected": {...}, "pareto": [...]}.
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/args.h"
#include "core/dist.h"
#include "core/util.h"
#include "symreg/sr.h"
#include "core/json.h"

static int write_json(const char *path, const lssar_sr_result *r) {
    cJSON *root = cJSON_CreateObject(), *pareto = cJSON_CreateArray();
    if (r->selected >= 0) {
        const lssar_sr_equation *e = &r->front[r->selected];
        cJSON *sel = cJSON_CreateObject();
        cJSON_AddStringToObject(sel, "equation", e->equation);
        cJSON_AddNumberToObject(sel, "complexity", e->complexity);
        cJSON_AddNumberToObject(sel, "loss", e->loss);
        cJSON_AddItemToObject(root, "selected", sel);
    }
    for (int k = 0; k < r->n; k++) {
        cJSON *it = cJSON_CreateObject();
        cJSON_AddNumberToObject(it, "complexity", r->front[k].complexity);
        cJSON_AddNumberToObject(it, "loss", r->front[k].loss);
        cJSON_AddNumberToObject(it, "score", r->front[k].score);
        cJSON_AddStringToObject(it, "equation", r->front[k].equation);
        cJSON_AddItemToArray(pareto, it);
    }
    cJSON_AddItemToObject(root, "pareto", pareto);
    cJSON_AddNumberToObject(root, "seconds", r->seconds);
    cJSON_AddNumberToObject(root, "iterations", r->iterations);
    cJSON_AddNumberToObject(root, "node_evals_per_s", r->node_evals_per_s);
    int rc = lssar_write_json(path, root);
    cJSON_Delete(root);
    return rc;
}

// The CSV, the target and feature columns and X (column-major); 0 or an error (lssar_errmsg).
static int load(const char *csv, const char *target, const char *features, sr_csv *c, int *ti, int **fi_out,
                int *nf_out, double **X_out, const char ***names_out) {
    int rc = sr_csv_read(csv, c);
    if (rc) return rc;
    if ((*ti = sr_csv_column(c, target)) < 0) {
        char prev[1024];  // (copied first: lssar_fail writes the buffer lssar_errmsg reads)
        snprintf(prev, sizeof prev, "%s", lssar_errmsg());
        return lssar_fail(LSSAR_E_ARG, "--target: %s", prev);
    }
    int *fi = *fi_out = malloc(sizeof(int) * c->cols), nf = 0;
    if (!fi) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    if (features) {
        char *s = strdup(features), *save = NULL;
        if (!s) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
        for (char *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            int j = -1;
            for (int k = 0; k < c->cols; k++) if (!strcmp(c->names[k], t)) j = k;
            if (j < 0 || j == *ti || nf >= c->cols) {
                int rc = lssar_fail(LSSAR_E_ARG, j == *ti ? "--features: '%s' is the target"
                                    : "--features: '%s' is not a column of the CSV (or repeated)", t);
                free(s);
                return rc;
            }
            fi[nf++] = j;
        }
        free(s);
    } else {
        for (int j = 0; j < c->cols; j++) if (j != *ti) fi[nf++] = j;
    }
    *nf_out = nf;
    if (nf == 0)
        return lssar_fail(LSSAR_E_ARG, "no feature columns: the CSV needs at least one column besides the "
                                       "target");
    double *X = *X_out = malloc(sizeof(double) * (size_t)nf * c->rows);
    const char **names = *names_out = malloc(sizeof(char *) * nf);
    if (!X || !names) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    for (int k = 0; k < nf; k++) {
        memcpy(X + (size_t)k * c->rows, c->data + (size_t)fi[k] * c->rows, sizeof(double) * c->rows);
        names[k] = c->names[fi[k]];
    }
    return 0;
}

int cmd_symreg(int argc, char **argv) {
    lssar_sr_options o;
    lssar_sr_defaults(&o);
    const char *csv = NULL, *target = NULL, *features = NULL, *loss = "l2", *select = "best", *json = NULL;
    int threads = 0, quiet = 0;
    uint64_t seed = 0;
    float time_limit = 0, early_stop = (float)o.early_stop, opt_child = (float)o.opt_child;
    arg_spec specs[] = {
        {"csv", ARG_STR, &csv, "CSV file with a header row of column names", 1, 0},
        {"target", ARG_STR, &target, "column to predict", 1, 0},
        {"features", ARG_STR, &features, "comma list of feature columns (default: all but the target)", 0, 0},
        {"ops", ARG_STR, &o.ops, "operators: + - * / pow neg sin cos exp log inv sqrt square cube abs", 0, 0},
        {"complexity", ARG_STR, &o.complexity, "per-operator complexity, e.g. pow=2,exp=2 (others 1)", 0, 0},
        {"maxsize", ARG_INT, &o.maxsize, "largest expression complexity", 0, 0},
        {"loss", ARG_STR, &loss, "l2, l1, l1dz (L1 with a 1e-8 dead zone) or rel (relative L1)", 0, 0},
        {"populations", ARG_INT, &o.populations, "islands evolved in parallel", 0, 0},
        {"population-size", ARG_INT, &o.population_size, "members per island", 0, 0},
        {"iterations", ARG_INT, &o.iterations, "synchronised iterations (evolve, optimise, migrate)", 0, 0},
        {"cycles", ARG_INT, &o.cycles, "mutations per island per iteration", 0, 0},
        {"restarts", ARG_INT, &o.restarts, "independent searches whose fronts are merged", 0, 0},
        {"opt-restarts", ARG_INT, &o.opt_restarts, "extra starts of the constant optimiser", 0, 0},
        {"opt-child", ARG_FLOAT, &opt_child,
         "share of new children whose constants are re-fitted before they compete", 0, 0},
        {"early-stop", ARG_FLOAT, &early_stop,
         "stop when the error relative to a constant fit is below this (0: never)", 0, 0},
        {"seed", ARG_U64, &seed, "random seed (same seed and threads: same result)", 0, 0},
        {"threads", ARG_INT, &threads, "OpenMP threads (0: all)", 0, 0},
        {"time-limit", ARG_FLOAT, &time_limit, "seconds, checked between iterations (0: none)", 0, 0},
        {"select", ARG_STR, &select, "score, best or accuracy", 0, 0},
        {"json", ARG_STR, &json, "write {selected, pareto} to this JSON file", 0, 0},
        {"quiet", ARG_BOOL, &quiet, "no progress lines", 0, 0},
        {0}};
    int rc = args_parse("symreg",
                        "Symbolic regression (PySR-style evolution on islands) on a CSV file.\n"
                        "Prints the Pareto front (complexity, loss, score, equation); equations parse with "
                        "SymPy.",
                        specs, argc, argv);
    if (rc >= 0) return rc;
    o.seed = seed;
    o.threads = threads;
    o.time_limit = time_limit;
    o.early_stop = early_stop;
    o.verbose = !quiet;
    o.opt_child = opt_child;
    if (!strcmp(loss, "l2")) o.loss = LSSAR_SR_L2;
    else if (!strcmp(loss, "l1")) o.loss = LSSAR_SR_L1;
    else if (!strcmp(loss, "l1dz")) o.loss = LSSAR_SR_L1DZ;
    else if (!strcmp(loss, "rel")) o.loss = LSSAR_SR_REL;
    else return args_error("symreg", "--loss '%s': use l2, l1, l1dz or rel", loss);
    if (!strcmp(select, "score")) o.select = LSSAR_SR_SCORE;
    else if (!strcmp(select, "best")) o.select = LSSAR_SR_BEST;
    else if (!strcmp(select, "accuracy")) o.select = LSSAR_SR_ACCURACY;
    else return args_error("symreg", "--select '%s': use score, best or accuracy", select);

    // Under mpirun every rank reads the CSV itself and they meet at lssar_dist_agree, so a file
    // only some ranks can read is one error naming the rank, not a rank waiting forever.
    sr_csv c = {0};
    int *fi = NULL, nf = 0, ti = -1;
    double *X = NULL;
    const char **names = NULL;
    rc = load(csv, target, features, &c, &ti, &fi, &nf, &X, &names);
    if ((rc = lssar_dist_agree(rc))) {
        args_error("symreg", "%s", lssar_errmsg());
        free(X); free(names); free(fi); sr_csv_free(&c);
        return 2;
    }
    // The restarts run spread over the ranks (sr_search_jobs); every rank gets the whole result,
    // rank 0 alone prints it and writes --json.
    lssar_sr_result r;
    rc = lssar_symreg(&o, X, c.data + (size_t)ti * c.rows, c.rows, nf, names, &r);
    if (rc) {
        args_error("symreg", "%s: %s", csv, lssar_errmsg());
        rc = 2;
    } else {
        printf("%-10s %-12s %-10s %s\n", "complexity", "loss", "score", "equation");
        for (int k = 0; k < r.n; k++)
            printf("%-10d %-12.6g %-10.4g %s%s\n", r.front[k].complexity, r.front[k].loss, r.front[k].score,
                   r.front[k].equation, k == r.selected ? "   <- selected" : "");
        fprintf(stderr, "symreg: %d iterations in %.1f s, %.3g evaluations, %.3g node-evals/s\n",
                r.iterations, r.seconds, r.evaluations, r.node_evals_per_s);
        int wrc = json && lssar_dist_rank() == 0 ? write_json(json, &r) : 0;
        if (lssar_dist_agree(wrc)) { args_error("symreg", "%s", lssar_errmsg()); rc = 2; }
        lssar_sr_result_free(&r);
    }
    free(X); free(names); free(fi); sr_csv_free(&c);
    return rc;
}
