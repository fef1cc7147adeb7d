// extrap_cache.c - a run's evaluation and downstream scores kept in its folder, under a key of
// everything they depend on; see extrap_run.h.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/json.h"
#include "exp/extrap_run.h"

void extrap_cache_path(char *buf, size_t n, const char *out, const extrap_run *r, const char *what) {
    if (r->eval_only) snprintf(buf, n, "%s/%s/%s-%s.json", out, r->src, what, r->name);
    else snprintf(buf, n, "%s/%s/%s.json", out, r->src, what);
}

void extrap_cache_key(char *buf, size_t n, const extrap *x, const extrap_run *r) {
    const extrap_opts *o = x->o;
    const mqar_params *mp = &o->mqar_task;
    char extra[256];
    if (o->mqar)
        snprintf(extra, sizeof extra, "mqar k%d v%d p%d n%d attn%d p%g", mp->keys, mp->values, mp->pairs,
                 o->mqar_eval, r->attn, r->p);
    else snprintf(extra, sizeof extra, "%s attn%d p%g docs%d", x->hash, r->attn, r->p, x->have_docs);
    int k = snprintf(buf, n, "%s|step=%lld|maxw=%d|%s|seqs=", o->mqar ? "mqar" : "text", (long long)r->step,
                     o->max_windows, extra);
    for (int i = 0; i < x->nf && k < (int)n; i++) k += snprintf(buf + k, n - k, "%d,", x->seqs[i]);
}

static double number_or_nan(const cJSON *j, const char *key) {
    const cJSON *v = cJSON_GetObjectItem(j, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

// The text task's per-position curve: absent in caches of older versions (then recomputed).
static int load_positions(const cJSON *j, extrap_run *r) {
    cJSON *pp = cJSON_GetObjectItem(j, "per_position"), *x;
    if (!cJSON_IsArray(pp) || cJSON_GetArraySize(pp) > EXTRAP_POS_BINS) return 0;
    cJSON_ArrayForEach(x, pp) r->pos_loss[r->pos_bins++] = cJSON_IsNumber(x) ? x->valuedouble : NAN;
    return 1;
}

// Length i's entry e into r (and, for the text task, its per-window losses into *win when win is
// not NULL); 0 when the text entry lacks them.
static int load_length(const cJSON *e, extrap_run *r, int i, int mqar, double **win) {
    cJSON *w = cJSON_GetObjectItem(e, "windows");
    r->loss[i] = number_or_nan(e, "loss");
    r->se[i] = number_or_nan(e, "stderr");
    r->lo[i] = number_or_nan(e, "lo");
    r->hi[i] = number_or_nan(e, "hi");
    r->windows[i] = cJSON_IsNumber(w) ? w->valueint : 0;
    if (mqar) return 1;
    cJSON *wl = cJSON_GetObjectItem(e, "window_losses"), *v;
    int ok = cJSON_IsArray(wl) && r->windows[i] >= 0 && cJSON_GetArraySize(wl) == r->windows[i];
    if (!ok || !win || r->windows[i] == 0) return ok;
    if (!(*win = malloc((size_t)r->windows[i] * sizeof **win))) return 0;
    int t = 0;
    cJSON_ArrayForEach(v, wl) {
        if (!cJSON_IsNumber(v) && !cJSON_IsNull(v)) return 0;
        (*win)[t++] = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    }
    return 1;
}

int extrap_cache_load(const char *path, const char *key, extrap_run *r, int nf, int mqar, double **win) {
    if (win) for (int i = 0; i < nf; i++) win[i] = NULL;
    cJSON *j = lssar_read_json(path);
    if (!j) return 0;
    cJSON *k = cJSON_GetObjectItem(j, "key"), *res = cJSON_GetObjectItem(j, "results");
    int ok = (!key || (cJSON_IsString(k) && !strcmp(k->valuestring, key))) && cJSON_IsArray(res) &&
             cJSON_GetArraySize(res) == nf;
    r->pos_bins = 0;
    if (ok && !mqar) ok = load_positions(j, r);
    for (int i = 0; ok && i < nf; i++)
        ok = load_length(cJSON_GetArrayItem(res, i), r, i, mqar, win ? &win[i] : NULL);
    cJSON_Delete(j);
    if (!ok && win) for (int i = 0; i < nf; i++) { free(win[i]); win[i] = NULL; }
    return ok;
}

cJSON *extrap_results_json(const extrap_run *r, const int *seqs, int nf, int mqar) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < nf; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "seq", seqs[i]);
        if (mqar) {
            cJSON_AddItemToObject(e, "accuracy", lssar_json_number(r->loss[i]));
            cJSON_AddItemToObject(e, "lo", lssar_json_number(r->lo[i]));
            cJSON_AddItemToObject(e, "hi", lssar_json_number(r->hi[i]));
            cJSON_AddNumberToObject(e, "queries", r->windows[i]);
        } else {
            cJSON_AddItemToObject(e, "loss", lssar_json_number(r->loss[i]));
            cJSON_AddItemToObject(e, "stderr", lssar_json_number(r->se[i]));
            cJSON_AddNumberToObject(e, "windows", r->windows[i]);
        }
        cJSON_AddItemToArray(a, e);
    }
    return a;
}

int extrap_cache_save(const char *path, const char *key, const extrap *x, const extrap_run *r,
                      double *const *win) {
    const int mqar = x->o->mqar;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "key", key);
    cJSON *a = extrap_results_json(r, x->seqs, x->nf, mqar), *e;
    // keep the names loss and windows for the reader whatever the task
    int i = 0;
    cJSON_ArrayForEach(e, a) {
        if (mqar) {
            cJSON_AddItemToObject(e, "loss", lssar_json_number(r->loss[i]));
            cJSON_AddNumberToObject(e, "windows", r->windows[i]);
        } else {
            cJSON *wl = cJSON_AddArrayToObject(e, "window_losses");
            for (int w = 0; w < r->windows[i]; w++) cJSON_AddItemToArray(wl, lssar_json_number(win[i][w]));
        }
        i++;
    }
    cJSON_AddItemToObject(j, "results", a);
    if (!mqar) {
        cJSON *pp = cJSON_AddArrayToObject(j, "per_position");
        for (int b = 0; b < r->pos_bins; b++) cJSON_AddItemToArray(pp, lssar_json_number(r->pos_loss[b]));
    }
    int rc = lssar_write_json(path, j);
    cJSON_Delete(j);
    return rc;
}

void extrap_ds_cache_key(char *buf, size_t n, const extrap *x, const extrap_run *r) {
    const extrap_opts *o = x->o;
    int k = snprintf(buf, n, "step=%lld|limit=%d|attn%d p%g|", (long long)r->step, o->task_limit, r->attn,
                     r->p);
    for (int t = 0; t < o->ntasks && k < (int)n; t++)
        k += snprintf(buf + k, n - k, "%s=%s,", o->tasks[t].name, o->tasks[t].path);
}

int extrap_ds_cache_load(const char *path, const char *key, extrap_run *r, int ntasks) {
    cJSON *j = lssar_read_json(path);
    cJSON *k = cJSON_GetObjectItem(j, "key"), *a = cJSON_GetObjectItem(j, "results");
    int ok = cJSON_IsString(k) && !strcmp(k->valuestring, key) && cJSON_GetArraySize(a) == ntasks;
    for (int t = 0; t < ntasks && ok; t++) ok = !ds_result_from_json(cJSON_GetArrayItem(a, t), &r->ds[t]);
    cJSON_Delete(j);
    return ok;
}

int extrap_ds_cache_save(const char *path, const char *key, const extrap_run *r, int ntasks) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "key", key);
    cJSON *a = cJSON_AddArrayToObject(j, "results");
    for (int t = 0; t < ntasks; t++) cJSON_AddItemToArray(a, ds_result_json(&r->ds[t]));
    int rc = lssar_write_json(path, j);
    cJSON_Delete(j);
    return rc;
}
