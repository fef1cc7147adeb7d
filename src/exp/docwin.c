// docwin.c - windows inside held-out documents and their mean loss; see docwin.h.
#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "exp/docwin.h"
#include "exp/stats.h"
#include "train/eval.h"

int exp_docs_load(const char *path, exp_docs *d) {
    memset(d, 0, sizeof *d);
    char *text = NULL;
    size_t len = 0;
    int rc = lssar_read_file(path, &text, &len);
    if (rc)
        return lssar_fail(LSSAR_E_IO,
                          "cannot read %s (it comes from `lssar data build`; give --data the folder it "
                          "wrote)",
                          path);
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!root)
        return lssar_fail(LSSAR_E_FORMAT, "%s is not valid JSON: rebuild it with `lssar data build`", path);
    // the index is either a list or an object holding a "documents" list
    cJSON *list = cJSON_IsArray(root) ? root : cJSON_GetObjectItem(root, "documents");
    if (!cJSON_IsArray(list)) {
        cJSON_Delete(root);
        return lssar_fail(LSSAR_E_FORMAT, "%s: expected a list of documents", path);
    }
    int n = cJSON_GetArraySize(list);
    d->start = calloc(n ? n : 1, sizeof *d->start);
    d->tokens = calloc(n ? n : 1, sizeof *d->tokens);
    d->name = calloc(n ? n : 1, sizeof *d->name);
    if (!d->start || !d->tokens || !d->name) {
        cJSON_Delete(root);
        exp_docs_free(d);
        return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    }
    int i = 0;
    cJSON *e;
    cJSON_ArrayForEach(e, list) {
        cJSON *s = cJSON_GetObjectItem(e, "start"), *t = cJSON_GetObjectItem(e, "tokens"),
              *nm = cJSON_GetObjectItem(e, "name");
        if (!cJSON_IsNumber(s) || !cJSON_IsNumber(t) || s->valuedouble < 0 || t->valuedouble < 0) {
            cJSON_Delete(root); d->n = i; exp_docs_free(d);
            return lssar_fail(LSSAR_E_FORMAT, "%s: document %d lacks a numeric start or tokens", path, i);
        }
        // val.bin is one shard (at most 2^31 - 1 positions): anything beyond is damage, and would
        // overflow the window arithmetic below.
        double sv = s->valuedouble, tv = t->valuedouble;
        if (sv != floor(sv) || tv != floor(tv) || sv + tv > (double)INT32_MAX) {
            cJSON_Delete(root); d->n = i; exp_docs_free(d);
            return lssar_fail(LSSAR_E_FORMAT,
                              "%s: document %d has start %.17g and tokens %.17g: they must be integers "
                              "within the 2^31 - 1 positions of a shard (damaged; rebuild it with `lssar "
                              "data build`)",
                              path, i, sv, tv);
        }
        d->start[i] = (size_t)s->valuedouble;
        d->tokens[i] = (size_t)t->valuedouble;
        d->name[i] = strdup(cJSON_IsString(nm) ? nm->valuestring : "?");
        i++;
    }
    d->n = i;
    cJSON_Delete(root);
    return 0;
}

void exp_docs_free(exp_docs *d) {
    if (d->name) for (int i = 0; i < d->n; i++) free(d->name[i]);
    free(d->name); free(d->start); free(d->tokens);
    memset(d, 0, sizeof *d);
}

// Keep an evenly spaced subset of max entries of a (in place).
static int thin(size_t *a, int n, int max) {
    if (max <= 0 || n <= max) return n;
    for (int i = 0; i < max; i++) a[i] = a[(size_t)i * n / max];
    return max;
}

int exp_doc_windows(const exp_docs *d, int T, int max_windows, size_t **starts, int *n) {
    *starts = NULL; *n = 0;
    if (T < 1) return lssar_fail(LSSAR_E_SIZE, "window length must be >= 1 (got %d)", T);
    size_t total = 0;
    for (int i = 0; i < d->n; i++)
        if (d->tokens[i] >= (size_t)T + 1) total += (d->tokens[i] - 1) / T;
    if (max_windows > 0 && total > (size_t)max_windows) {
        // Only the evenly spaced subset thin() would keep (window j * total / max of the list),
        // found in one sweep: a short index file may describe billions of windows.
        size_t *a = malloc((size_t)max_windows * sizeof *a);
        if (!a) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
        size_t before = 0;   // windows of the documents before document i
        int i = 0;
        for (int j = 0; j < max_windows; j++) {
            size_t g = (size_t)((unsigned __int128)j * total / (size_t)max_windows);
            for (;;) {
                size_t nw = d->tokens[i] >= (size_t)T + 1 ? (d->tokens[i] - 1) / T : 0;
                if (g < before + nw) break;
                before += nw; i++;
            }
            a[j] = d->start[i] + (g - before) * T;
        }
        *n = max_windows;
        *starts = a;
        return 0;
    }
    size_t *a = malloc((total ? total : 1) * sizeof *a);
    if (!a) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    size_t k = 0;
    for (int i = 0; i < d->n; i++)
        for (size_t w = 0; d->tokens[i] >= (size_t)T + 1 && w < (d->tokens[i] - 1) / T; w++)
            a[k++] = d->start[i] + w * T;
    *n = thin(a, (int)k, max_windows);
    *starts = a;
    return 0;
}

int exp_plain_windows(size_t npos, int T, int max_windows, size_t **starts, int *n) {
    *starts = NULL; *n = 0;
    if (T < 1) return lssar_fail(LSSAR_E_SIZE, "window length must be >= 1 (got %d)", T);
    size_t total = npos > (size_t)T ? (npos - 1) / T : 0;
    size_t *a = malloc((total ? total : 1) * sizeof *a);
    if (!a) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    for (size_t w = 0; w < total; w++) a[w] = w * T;
    *n = thin(a, (int)total, max_windows);
    *starts = a;
    return 0;
}

int exp_eval_windows(gpt *m, const shard *s, const size_t *starts, int n, int T, int B, double *mean,
                     double *se, double *win_out, double *per_pos) {
    *mean = NAN; *se = NAN;
    if (n < 1) return lssar_fail(LSSAR_E_SIZE, "no evaluation windows of length %d", T);
    double *win = malloc((size_t)n * sizeof *win);
    if (!win) return lssar_fail(LSSAR_E_NOMEM, "out of memory for evaluation");
    // the one evaluation loop (src/train/eval.h), here in this process alone
    int rc = eval_windows(m, s, starts, n, T, B, 0, win, per_pos);
    const int ch = gpt_get_config(m)->channels;
    const double per = (double)T * ch;
    for (int w = 0; !rc && w < n; w++) win[w] /= per;   // summed over positions -> mean per token
    for (int t = 0; !rc && per_pos && t < T; t++) per_pos[t] /= (double)n * ch;  // summed over windows
    if (!rc) exp_mean_se(win, n, mean, se);
    if (!rc && win_out) memcpy(win_out, win, (size_t)n * sizeof *win);
    free(win);
    return rc;
}
