// attnstats_run.c - `lssar attnstats` as a library call (attnstats.h): each model's statistics per
// layer and length, the seeds of one configuration pooled, the JSON and the plots.
#include <cJSON.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "attn/attn.h"
#include "core/json.h"
#include "data/shard.h"
#include "exp/attnstats.h"
#include "exp/docwin.h"
#include "exp/plot.h"
#include "exp/stats.h"

#define MAXT ATTNSTATS_MAX_LENGTHS
#define MAXM ATTNSTATS_MAX_MODELS
#define NSTAT 4
static const char *STAT_NAMES[NSTAT] = {"entropy", "entropy_norm", "sink", "top1"};

// One run's data and results: per model mi and length ti the layer means.
typedef struct {
    const attnstats_opts *o;
    shard s;
    exp_docs docs;
    int have_docs;                   // windows inside the held-out documents of val_index.json
    double ent[MAXM][MAXT], sink[MAXM][MAXT], xs[MAXM][MAXT];   // for the plots
    double v[MAXM][MAXT][NSTAT];     // every statistic, for pooling
    double gm[MAXM][MAXT][NSTAT], gh[MAXM][MAXT][NSTAT];        // group means, half-widths
    char labels[MAXM][128], keys[MAXM][64], glabel[MAXM][64];
    cJSON *root, *models;
} as_run;

/* The pooled table and JSON groups: models with the same configuration key, in first-seen order;
   v[model][length][stat] the layer means. Writes each group's mean and interval into gm / gh
   (for the plot). Returns the number of groups, 0 when no group has two models (nothing to pool). */
static int pool_groups(int nm, char *const *names, const char keys[][64], double v[][MAXT][NSTAT], int nt,
                       const int *seqs, char glabel[][64], double gm[][MAXT][NSTAT], double gh[][MAXT][NSTAT],
                       cJSON *root) {
    int gid[MAXM], ng = 0, size[MAXM] = {0}, biggest = 0;
    for (int i = 0; i < nm; i++) {
        int g = 0;
        while (g < ng && strcmp(glabel[g], keys[i])) g++;
        if (g == ng) snprintf(glabel[ng++], 64, "%.63s", keys[i]);
        gid[i] = g;
        if (++size[g] > biggest) biggest = size[g];
    }
    if (biggest < 2) return 0;
    int soft = -1;
    for (int g = 0; g < ng; g++) if (!strcmp(glabel[g], "softmax")) soft = g;
    printf("\npooled over the models of each kind (seeds): mean [95%% t interval]%s\n",
           soft >= 0 ? "; vs softmax: paired difference (model i - softmax model i), * = interval excludes 0"
                     : "");
    int w = 4;   // the kind column: as wide as the longest label ("sigmoid len-norm train")
    for (int g = 0; g < ng; g++) if ((int)strlen(glabel[g]) > w) w = (int)strlen(glabel[g]);
    printf("%-*s %-6s %3s %26s %26s %26s%s\n", w, "kind", "T", "n", "ent/ln n", "sink", "top1",
           soft >= 0 ? "   d ent/ln n vs softmax" : "");
    cJSON *ga = cJSON_AddArrayToObject(root, "groups");
    for (int g = 0; g < ng; g++) {
        int idx[MAXM], n = 0, sidx[MAXM], ns = 0;
        for (int i = 0; i < nm; i++) {
            if (gid[i] == g) idx[n++] = i;
            if (soft >= 0 && gid[i] == soft) sidx[ns++] = i;
        }
        const int paired = soft >= 0 && g != soft && ns == n;
        cJSON *gj = cJSON_CreateObject(), *mj = cJSON_AddArrayToObject(gj, "models"), *rj;
        cJSON_AddStringToObject(gj, "attn", glabel[g]);
        for (int k = 0; k < n; k++) cJSON_AddItemToArray(mj, cJSON_CreateString(names[idx[k]]));
        rj = cJSON_AddArrayToObject(gj, "results");
        cJSON_AddItemToArray(ga, gj);
        for (int t = 0; t < nt; t++) {
            cJSON *tj = cJSON_CreateObject(), *dj = paired ? cJSON_CreateObject() : NULL;
            cJSON_AddNumberToObject(tj, "seq", seqs[t]);
            char cell[NSTAT][32], dcell[48] = "";
            for (int st = 0; st < NSTAT; st++) {
                double x[MAXM], d[MAXM], m, h, dm, dh;
                for (int k = 0; k < n; k++) x[k] = v[idx[k]][t][st];
                exp_mean_ci95(x, n, &m, &h);
                gm[g][t][st] = m;
                gh[g][t][st] = isnan(h) ? 0 : h;
                cJSON *o = cJSON_AddObjectToObject(tj, STAT_NAMES[st]);
                cJSON_AddNumberToObject(o, "mean", m);
                cJSON_AddItemToObject(o, "ci95",
                                      isnan(h) ? cJSON_CreateNull()
                                               : cJSON_CreateDoubleArray((double[]){m - h, m + h}, 2));
                if (isnan(h)) snprintf(cell[st], sizeof cell[st], "%.4f", m);
                else snprintf(cell[st], sizeof cell[st], "%.4f [%.4f, %.4f]", m, m - h, m + h);
                if (!paired) continue;
                for (int k = 0; k < n; k++) d[k] = v[idx[k]][t][st] - v[sidx[k]][t][st];
                exp_mean_ci95(d, n, &dm, &dh);
                const int excl = !isnan(dh) && (dm - dh > 0 || dm + dh < 0);
                cJSON *e = cJSON_AddObjectToObject(dj, STAT_NAMES[st]);
                cJSON_AddNumberToObject(e, "mean", dm);
                cJSON_AddItemToObject(e, "ci95",
                                      isnan(dh) ? cJSON_CreateNull()
                                                : cJSON_CreateDoubleArray((double[]){dm - dh, dm + dh}, 2));
                cJSON_AddBoolToObject(e, "excludes_zero", excl);
                if (st == 1) {
                    if (isnan(dh)) snprintf(dcell, sizeof dcell, "   %+.4f", dm);
                    else
                        snprintf(dcell, sizeof dcell, "   %+.4f [%+.4f, %+.4f]%s", dm, dm - dh, dm + dh,
                                 excl ? " *" : "");
                }
            }
            if (dj) cJSON_AddItemToObject(tj, "diff_vs_softmax", dj);
            cJSON_AddItemToArray(rj, tj);
            printf("%-*s %-6d %3d %26s %26s %26s%s\n", w, glabel[g], seqs[t], n, cell[1], cell[2], cell[3],
                   dcell);
        }
    }
    return ng;
}

// The shard, and its documents when a val_index.json sits beside a val.bin.
static int open_data(as_run *r) {
    int rc = shard_open(&r->s, r->o->data);
    if (rc) return rc;
    char *tmp = strdup(r->o->data), idx[4200];
    snprintf(idx, sizeof idx, "%s/val_index.json", dirname(tmp));
    free(tmp);
    struct stat st;
    if (stat(idx, &st) == 0 && strstr(r->o->data, "val.bin") && !exp_docs_load(idx, &r->docs))
        r->have_docs = 1;
    return 0;
}

// The shard fits the model: its channels, and every token inside the vocabulary (one pass: a
// damaged or foreign shard fails here, naming it).
static int check_data(const as_run *r, const gpt_config *c, const char *name) {
    const shard *s = &r->s;
    if (c->channels != s->channels)
        return lssar_fail(LSSAR_E_FORMAT, "%s has %d channels but the model has %d", r->o->data, s->channels,
                          c->channels);
    for (size_t t = 0; t < s->n * (size_t)s->channels; t++)
        if (s->tokens[t] >= c->vocab)
            return lssar_fail(LSSAR_E_FORMAT,
                              "%s: token %d at position %zu is outside the vocabulary of %s (0..%d): "
                              "damaged, or data for another model",
                              r->o->data, s->tokens[t], t / s->channels, name, c->vocab - 1);
    return 0;
}

// Model mi's plot label (the run's folder name and its kind) and pooling key (the configuration the
// seeds of one kind share). A kind that re-weights shows its power: runs of other powers are other
// configurations.
static void model_labels(as_run *r, int mi, const gpt_config *c) {
    const char *name = r->o->models[mi];
    const char *base = name + strlen(name);
    while (base > name && base[-1] == '/') base--;
    const char *end = base;
    while (base > name && base[-1] != '/') base--;
    const int rw = attn_reweights(c->attn);
    if (rw)
        snprintf(r->labels[mi], sizeof r->labels[mi], "%.*s (%s p=%g)", (int)(end - base), base,
                 lssar_attn_name(c->attn), c->p);
    else
        snprintf(r->labels[mi], sizeof r->labels[mi], "%.*s (%s)", (int)(end - base), base,
                 lssar_attn_name(c->attn));
    if (rw) snprintf(r->keys[mi], sizeof r->keys[mi], "%s p=%g", lssar_attn_name(c->attn), c->p);
    else if (attn_stages(c->attn).norm == LSSAR_NORM_LEN)
        snprintf(r->keys[mi], sizeof r->keys[mi], "%s len-norm %s", lssar_attn_name(c->attn),
                 lssar_len_norm_name(c->len_norm));
    else snprintf(r->keys[mi], sizeof r->keys[mi], "%s", lssar_attn_name(c->attn));
}

// Model mi at length ti: its layers' rows of the table and JSON (into rj), and the layer means.
// st: (layers) scratch; *win: the windows' buffer, grown as needed.
static int one_length(as_run *r, gpt *g, int mi, int ti, attn_layer_stats *st, uint16_t **win, cJSON *rj) {
    const gpt_config *c = gpt_get_config(g);
    const int T = r->o->seqs[ti];
    size_t *starts = NULL;
    int nw = 0, rc;
    if ((rc = r->have_docs ? exp_doc_windows(&r->docs, T, r->o->windows, &starts, &nw)
                           : exp_plain_windows(r->s.n, T, r->o->windows, &starts, &nw)))
        return rc;
    r->xs[mi][ti] = T;
    r->ent[mi][ti] = r->sink[mi][ti] = NAN;
    for (int k = 0; k < NSTAT; k++) r->v[mi][ti][k] = NAN;
    if (nw == 0) {
        printf("%-8d (no window of %d tokens in %s)\n", T, T + 1, r->o->data);
        free(starts);
        return 0;
    }
    *win = realloc(*win, sizeof(uint16_t) * (size_t)nw * T * c->channels);   // (nw, T, channels)
    for (int w = 0; w < nw; w++)
        memcpy(*win + (size_t)w * T * c->channels, r->s.tokens + starts[w] * c->channels,
               sizeof(uint16_t) * T * c->channels);
    free(starts);
    if ((rc = attn_stats(g, *win, nw, T, r->o->rows, st))) return rc;
    cJSON *tj = cJSON_CreateObject();
    cJSON_AddNumberToObject(tj, "seq", T);
    cJSON_AddNumberToObject(tj, "windows", nw);
    cJSON *lj = cJSON_AddArrayToObject(tj, "layers");
    double me = 0, men = 0, ms = 0, mt = 0;
    for (int l = 0; l < c->layers; l++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "layer", l);
        cJSON_AddNumberToObject(e, "entropy", st[l].entropy);
        cJSON_AddNumberToObject(e, "entropy_norm", st[l].entropy_norm);
        cJSON_AddNumberToObject(e, "sink", st[l].sink);
        cJSON_AddNumberToObject(e, "top1", st[l].top1);
        cJSON_AddItemToArray(lj, e);
        printf("%-8d %-6d %9.4f %9.4f %9.4f %9.4f\n", T, l, st[l].entropy, st[l].entropy_norm, st[l].sink,
               st[l].top1);
        me += st[l].entropy; men += st[l].entropy_norm; ms += st[l].sink; mt += st[l].top1;
    }
    int L = c->layers;
    printf("%-8d %-6s %9.4f %9.4f %9.4f %9.4f\n", T, "mean", me / L, men / L, ms / L, mt / L);
    cJSON *mm = cJSON_AddObjectToObject(tj, "mean");
    cJSON_AddNumberToObject(mm, "entropy", me / L);
    cJSON_AddNumberToObject(mm, "entropy_norm", men / L);
    cJSON_AddNumberToObject(mm, "sink", ms / L);
    cJSON_AddNumberToObject(mm, "top1", mt / L);
    cJSON_AddItemToArray(rj, tj);
    r->ent[mi][ti] = men / L;
    r->sink[mi][ti] = ms / L;
    r->v[mi][ti][0] = me / L; r->v[mi][ti][1] = men / L; r->v[mi][ti][2] = ms / L; r->v[mi][ti][3] = mt / L;
    return 0;
}

// Model mi: loaded, checked against the data, labelled, then every length.
static int one_model(as_run *r, int mi) {
    const char *name = r->o->models[mi];
    gpt *g = NULL;
    int rc = ckpt_load_model(name, &r->o->load, &g, NULL);
    if (rc) return rc;
    const gpt_config *c = gpt_get_config(g);
    if ((rc = check_data(r, c, name))) { gpt_free(g); return rc; }
    model_labels(r, mi, c);
    cJSON *mj = cJSON_CreateObject();
    cJSON_AddStringToObject(mj, "model", name);
    cJSON_AddStringToObject(mj, "attn", lssar_attn_name(c->attn));
    if (attn_reweights(c->attn)) cJSON_AddNumberToObject(mj, "p", c->p);
    cJSON_AddNumberToObject(mj, "train_seq", c->max_seq);
    cJSON *rj = cJSON_AddArrayToObject(mj, "results");
    cJSON_AddItemToArray(r->models, mj);
    printf("\n%s: %s\n%-8s %-6s %9s %9s %9s %9s\n", name, r->labels[mi], "T", "layer", "entropy", "ent/ln n",
           "sink", "top1");
    attn_layer_stats *st = calloc(c->layers, sizeof *st);
    uint16_t *win = NULL;
    for (int ti = 0; ti < r->o->nseqs && !rc; ti++) rc = one_length(r, g, mi, ti, st, &win, rj);
    free(win); free(st);
    gpt_free(g);
    return rc;
}

// FILE.png (normalised entropy) and FILE_sink.png: one line per model, or per group (ng > 0)
// with its interval.
static int write_plots(as_run *r, int ng) {
    const attnstats_opts *o = r->o;
    const int nm = o->nmodels, nt = o->nseqs;
    plot_series se[MAXM], ss[MAXM];
    static double gx[MAXM][MAXT], gy[2][MAXM][MAXT], ge[2][MAXM][MAXT];
    const int nl = ng ? ng : nm;
    for (int i = 0; i < nl; i++) {
        if (!ng) {
            se[i] = (plot_series){r->labels[i], nt, r->xs[i], r->ent[i], NULL};
            ss[i] = (plot_series){r->labels[i], nt, r->xs[i], r->sink[i], NULL};
            continue;
        }
        for (int t = 0; t < nt; t++) {
            gx[i][t] = o->seqs[t];
            gy[0][i][t] = r->gm[i][t][1]; ge[0][i][t] = r->gh[i][t][1];
            gy[1][i][t] = r->gm[i][t][2]; ge[1][i][t] = r->gh[i][t][2];
        }
        se[i] = (plot_series){r->glabel[i], nt, gx[i], gy[0][i], ge[0][i]};
        ss[i] = (plot_series){r->glabel[i], nt, gx[i], gy[1][i], ge[1][i]};
    }
    const char *plot = o->plot;
    char sp2[4200];
    snprintf(sp2, sizeof sp2, "%.*s_sink.png",
             (int)(strlen(plot) > 4 && !strcmp(plot + strlen(plot) - 4, ".png") ? strlen(plot) - 4
                                                                                : strlen(plot)),
             plot);
    int rc = plot_lines(plot, "attention entropy / ln(n), mean over layers (1 = uniform)", "length T",
                        "normalised entropy", 1, se, nl);
    if (!rc)
        rc = plot_lines(sp2, "weight on the first token (attention sink), mean over layers", "length T",
                        "sink weight", 1, ss, nl);
    if (!rc) printf("plots: %s %s\n", plot, sp2);
    return rc;
}

int attnstats_run(const attnstats_opts *o, int *bad_data) {
    *bad_data = 0;
    as_run *r = calloc(1, sizeof *r);
    if (!r) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    r->o = o;
    int rc = open_data(r);
    if (rc) { *bad_data = 1; free(r); return rc; }
    r->root = cJSON_CreateObject();
    cJSON_AddStringToObject(r->root, "data", o->data);
    cJSON_AddNumberToObject(r->root, "windows", o->windows);
    cJSON_AddNumberToObject(r->root, "rows", o->rows);
    cJSON_AddBoolToObject(r->root, "document_windows", r->have_docs);
    r->models = cJSON_AddArrayToObject(r->root, "models");
    printf("attention statistics (rows in [T/2, T), %d windows per length%s)\n", o->windows,
           r->have_docs ? ", inside held-out documents" : "");
    for (int mi = 0; mi < o->nmodels && !rc; mi++) rc = one_model(r, mi);
    shard_close(&r->s);
    exp_docs_free(&r->docs);
    int ng = 0;
    if (!rc)
        ng = pool_groups(o->nmodels, o->models, r->keys, r->v, o->nseqs, o->seqs, r->glabel, r->gm, r->gh,
                         r->root);
    if (!rc && o->json && !(rc = lssar_write_json(o->json, r->root))) printf("\njson: %s\n", o->json);
    cJSON_Delete(r->root);
    if (!rc && o->plot) rc = write_plots(r, ng);
    free(r);
    return rc;
}
