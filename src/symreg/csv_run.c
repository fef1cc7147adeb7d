// csv_run.c - `lssar symreg` as a library call (sr.h): symbolic regression on a CSV file's
// columns, the Pareto table on stdout and optionally JSON {"selected": {...}, "pareto": [...]}.
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/dist.h"
#include "core/json.h"
#include "core/util.h"
#include "symreg/sr.h"

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

int sr_csv_run(const sr_csv_opts *o) {
    // Every rank reads the CSV itself and they meet at lssar_dist_agree, so a file only some
    // ranks can read is one error naming the rank, not a rank waiting forever.
    sr_csv c = {0};
    int *fi = NULL, nf = 0, ti = -1;
    double *X = NULL;
    const char **names = NULL;
    int rc = load(o->csv, o->target, o->features, &c, &ti, &fi, &nf, &X, &names);
    if ((rc = lssar_dist_agree(rc))) {
        free(X); free(names); free(fi); sr_csv_free(&c);
        return rc;
    }
    // The restarts run spread over the ranks (sr_search_jobs); every rank gets the whole result,
    // rank 0 alone prints it and writes the JSON.
    lssar_sr_result r;
    rc = lssar_symreg(&o->sr, X, c.data + (size_t)ti * c.rows, c.rows, nf, names, &r);
    if (rc) {
        rc = lssar_fail(rc, "%s: %s", o->csv, lssar_errmsg());
    } else {
        printf("%-10s %-12s %-10s %s\n", "complexity", "loss", "score", "equation");
        for (int k = 0; k < r.n; k++)
            printf("%-10d %-12.6g %-10.4g %s%s\n", r.front[k].complexity, r.front[k].loss, r.front[k].score,
                   r.front[k].equation, k == r.selected ? "   <- selected" : "");
        fprintf(stderr, "symreg: %d iterations in %.1f s, %.3g evaluations, %.3g node-evals/s\n",
                r.iterations, r.seconds, r.evaluations, r.node_evals_per_s);
        int wrc = o->json && lssar_dist_rank() == 0 ? write_json(o->json, &r) : 0;
        rc = lssar_dist_agree(wrc);
        lssar_sr_result_free(&r);
    }
    free(X); free(names); free(fi); sr_csv_free(&c);
    return rc;
}
