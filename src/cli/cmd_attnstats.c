// cmd_attnstats.c - `lssar attnstats`: entropy, sink weight and top-1 weight of attention rows per
// layer and length (src/exp/attnstats.h), for one or more models.
#include <cJSON.h>
#include <libgen.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "args.h"
#include "lssar.h"
#include "attn/attn.h"
#include "data/shard.h"
#include "exp/attnstats.h"
#include "exp/common.h"
#include "model/checkpoint.h"
#include "exp/docwin.h"
#include "exp/plot.h"
#include "exp/stats.h"
#include "core/json.h"

static const char *ABOUT =
    "Attention statistics per layer and length, to test \"attention smoothing\" and the \"attention\n"
    "sink\" with numbers. For each model (--model DIR[,DIR2,...]) and each --seq length T, --windows\n"
    "windows of VAL.bin (inside one held-out document each when val_index.json sits beside it) go\n"
    "through the model; each layer's attention rows (the model's own kind: softmax, SSMax, LSSA alpha\n"
    "or LSSAR beta) are recomputed from its post-RoPE q and k for up to --rows query rows evenly\n"
    "spaced over the window's second half, and averaged over heads, rows and windows:\n"
    "  entropy   -sum_j w_j ln w_j (nats; a uniform row over n keys has ln n)\n"
    "  ent/ln n  entropy / ln(i+1): 1 uniform (fully smoothed), 0 one-hot\n"
    "  sink      weight on the window's first token\n"
    "  top1      largest weight of the row\n"
    "--attn lssar [--p P] evaluates an lssa model with LSSAR re-weighting (and back).\n"
    "--json FILE: {\"models\": [{\"model\", \"attn\", \"p\", \"results\": [{\"seq\", \"layers\": "
    "[{\"layer\",\n"
    "\"entropy\", \"entropy_norm\", \"sink\", \"top1\"}], \"mean\": {...}}]}]}.\n"
    "Seeds: models of one configuration (the same kind, p and length normalisation; e.g. the seeds\n"
    "of `lssar extrapolate --seeds 3`, given in seed order) are pooled: per length the mean of each\n"
    "layer-mean statistic over the models with its 95% t interval, and, beside a softmax group of\n"
    "as many models, the paired difference (model i against softmax model i, the same windows) with\n"
    "its interval, marked * where it excludes 0. JSON: \"groups\": [{\"attn\", \"models\", \"results\":\n"
    "[{\"seq\", STAT: {\"mean\", \"ci95\": [lo, hi]}, \"diff_vs_softmax\": {STAT: {\"mean\", \"ci95\",\n"
    "\"excludes_zero\"}}}]}] for STAT in entropy, entropy_norm, sink, top1 (ci95 null for one model).\n"
    "--plot FILE.png: normalised entropy vs length (layer mean, one line per model, or per group\n"
    "with its interval when models are pooled); the sink weight goes to FILE_sink.png.";

#define MAXT 16
#define MAXM 32
#define NSTAT 4
static const char *STAT_NAMES[NSTAT] = {"entropy", "entropy_norm", "sink", "top1"};

/* The pooled table and JSON groups: models with the same configuration key, in first-seen order;
   v[model][length][stat] the layer means. Writes each group's mean and interval into gm / gh
   (for the plot). Returns the number of groups, 0 when no group has two models (nothing to pool). */
static int pool_groups(int nm, char **names, const char keys[][64], double v[][MAXT][NSTAT], int nt,
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

int cmd_attnstats(int argc, char **argv) {
    const char *models = NULL, *data = NULL, *seqs_s = NULL, *json = NULL, *plot = NULL, *attn = NULL;
    float p = 0;
    int windows = 4, rows = 64, threads = 0;
    const char *device_name = "cpu";
    arg_spec sp[] = {
        {"model", ARG_STR, &models, "run directory (or several, comma-separated)", 1, 0},
        {"data", ARG_STR, &data, "token shard, e.g. DATA/val.bin", 1, 0},
        {"seq", ARG_STR, &seqs_s, "lengths T1,T2,...", 1, 0},
        {"windows", ARG_INT, &windows, "windows per length", 0, 0},
        {"rows", ARG_INT, &rows, "query rows per window and head (evenly spaced over [T/2, T))", 0, 0},
        {"attn", ARG_STR, &attn, "evaluate with this kind instead (lssa <-> lssar only)", 0, 0},
        {"p", ARG_FLOAT, &p, "LSSAR power override (0: the model's)", 0, 0},
        {"json", ARG_STR, &json, "write the numbers here", 0, 0},
        {"plot", ARG_STR, &plot, "write PNG plots FILE.png and FILE_sink.png (gnuplot)", 0, 0},
        {"threads", ARG_INT, &threads, "OpenMP threads (0: all)", 0, 0},
        {"device", ARG_STR, &device_name, ARGS_DEVICE_HELP, 0, 0},
        {0}};
    int rc = args_parse("attnstats", ABOUT, sp, argc, argv);
    if (rc >= 0) return rc;
    lssar_device device;
    if (args_device("attnstats", device_name, &device)) return 2;
    int seqs[MAXT];
    int nt = args_int_list("attnstats", "--seq", seqs_s, seqs, MAXT);
    if (nt < 1) return 2;
    for (int i = 0; i < nt; i++) if (seqs[i] < 2) return args_error("attnstats", "--seq values must be >= 2");
    if (windows < 1 || rows < 1) return args_error("attnstats", "--windows and --rows must be >= 1");
    ckpt_load_opts lo = {.set_attn = attn != NULL, .p = p, .device = device};
    if (attn && args_attn_kind("attnstats", attn, &lo.attn)) return 2;
    if (p < 0) return args_error("attnstats", "--p must be > 0 (or 0 for the model's)");
    if (threads > 0) omp_set_num_threads(threads);

    shard s;
    if ((rc = shard_open(&s, data))) return args_error("attnstats", "%s", lssar_errmsg());
    exp_docs docs = {0};
    int have_docs = 0;
    {
        char *tmp = strdup(data), idx[4200];
        snprintf(idx, sizeof idx, "%s/val_index.json", dirname(tmp));
        free(tmp);
        struct stat st;
        if (stat(idx, &st) == 0 && strstr(data, "val.bin") && !exp_docs_load(idx, &docs)) have_docs = 1;
    }

    char list[4096];
    snprintf(list, sizeof list, "%s", models);
    char *names[MAXM];
    int nm = 0;
    for (char *t = strtok(list, ","); t; t = strtok(NULL, ",")) {
        if (nm == MAXM) {
            shard_close(&s);
            exp_docs_free(&docs);
            return args_error("attnstats", "--model: at most %d models", MAXM);
        }
        names[nm++] = t;
    }
    static double ent[MAXM][MAXT], sink[MAXM][MAXT], xs[MAXM][MAXT], v[MAXM][MAXT][NSTAT];
    static double gm[MAXM][MAXT][NSTAT], gh[MAXM][MAXT][NSTAT];
    char labels[MAXM][128], keys[MAXM][64], glabel[MAXM][64];
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "data", data);
    cJSON_AddNumberToObject(root, "windows", windows);
    cJSON_AddNumberToObject(root, "rows", rows);
    cJSON_AddBoolToObject(root, "document_windows", have_docs);
    cJSON *ma = cJSON_AddArrayToObject(root, "models");
    printf("attention statistics (rows in [T/2, T), %d windows per length%s)\n", windows,
           have_docs ? ", inside held-out documents" : "");
    for (int mi = 0; mi < nm && !rc; mi++) {
        gpt *g = NULL;
        if ((rc = ckpt_load_model(names[mi], &lo, &g, NULL))) break;
        const gpt_config *c = gpt_get_config(g);
        if (c->channels != s.channels) {
            rc = lssar_fail(LSSAR_E_FORMAT, "%s has %d channels but the model has %d", data, s.channels,
                            c->channels);
            gpt_free(g);
            break;
        }
        // one pass: a damaged or foreign shard fails here, naming it
        for (size_t t = 0; t < s.n * (size_t)s.channels; t++)
            if (s.tokens[t] >= c->vocab) {
                rc = lssar_fail(LSSAR_E_FORMAT,
                                "%s: token %d at position %zu is outside the vocabulary of %s (0..%d): "
                                "damaged, or data for another model",
                                data, s.tokens[t], t / s.channels, names[mi], c->vocab - 1);
                break;
            }
        if (rc) { gpt_free(g); break; }
        // plot label: the run's folder name and its kind
        const char *base = names[mi] + strlen(names[mi]);
        while (base > names[mi] && base[-1] == '/') base--;
        const char *end = base;
        while (base > names[mi] && base[-1] != '/') base--;
        // (a kind that re-weights with its power: runs of other powers are other configurations)
        const int rw = attn_reweights(c->attn);
        if (rw)
            snprintf(labels[mi], sizeof labels[mi], "%.*s (%s p=%g)", (int)(end - base), base,
                     lssar_attn_name(c->attn), c->p);
        else
            snprintf(labels[mi], sizeof labels[mi], "%.*s (%s)", (int)(end - base), base,
                     lssar_attn_name(c->attn));
        // the configuration the seeds of one kind share (what pool_groups groups by)
        if (rw) snprintf(keys[mi], sizeof keys[mi], "%s p=%g", lssar_attn_name(c->attn), c->p);
        else if (attn_stages(c->attn).norm == LSSAR_NORM_LEN)
            snprintf(keys[mi], sizeof keys[mi], "%s len-norm %s", lssar_attn_name(c->attn),
                     lssar_len_norm_name(c->len_norm));
        else snprintf(keys[mi], sizeof keys[mi], "%s", lssar_attn_name(c->attn));
        cJSON *mj = cJSON_CreateObject();
        cJSON_AddStringToObject(mj, "model", names[mi]);
        cJSON_AddStringToObject(mj, "attn", lssar_attn_name(c->attn));
        if (rw) cJSON_AddNumberToObject(mj, "p", c->p);
        cJSON_AddNumberToObject(mj, "train_seq", c->max_seq);
        cJSON *rj = cJSON_AddArrayToObject(mj, "results");
        cJSON_AddItemToArray(ma, mj);
        printf("\n%s: %s\n%-8s %-6s %9s %9s %9s %9s\n", names[mi], labels[mi], "T", "layer", "entropy",
               "ent/ln n", "sink", "top1");
        attn_layer_stats *st = calloc(c->layers, sizeof *st);
        uint16_t *win = NULL;
        for (int ti = 0; ti < nt && !rc; ti++) {
            int T = seqs[ti];
            size_t *starts = NULL;
            int nw = 0;
            if ((rc = have_docs ? exp_doc_windows(&docs, T, windows, &starts, &nw)
                                : exp_plain_windows(s.n, T, windows, &starts, &nw)))
                break;
            xs[mi][ti] = T;
            ent[mi][ti] = sink[mi][ti] = NAN;
            for (int k = 0; k < NSTAT; k++) v[mi][ti][k] = NAN;
            if (nw == 0) {
                printf("%-8d (no window of %d tokens in %s)\n", T, T + 1, data);
                free(starts);
                continue;
            }
            win = realloc(win, sizeof(uint16_t) * (size_t)nw * T * c->channels);
            for (int w = 0; w < nw; w++)
                memcpy(win + (size_t)w * T * c->channels, s.tokens + starts[w] * c->channels,
                       sizeof(uint16_t) * T * c->channels);
            free(starts);
            if ((rc = attn_stats(g, win, nw, T, rows, st))) break;
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
                printf("%-8d %-6d %9.4f %9.4f %9.4f %9.4f\n", T, l, st[l].entropy, st[l].entropy_norm,
                       st[l].sink, st[l].top1);
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
            ent[mi][ti] = men / L;
            sink[mi][ti] = ms / L;
            v[mi][ti][0] = me / L; v[mi][ti][1] = men / L; v[mi][ti][2] = ms / L; v[mi][ti][3] = mt / L;
        }
        free(win); free(st);
        gpt_free(g);
    }
    shard_close(&s);
    exp_docs_free(&docs);
    if (rc) { cJSON_Delete(root); fprintf(stderr, "lssar attnstats: %s\n", lssar_errmsg()); return 1; }
    const int ng = pool_groups(nm, names, keys, v, nt, seqs, glabel, gm, gh, root);
    if (json) {
        if ((rc = lssar_write_json(json, root))) {
            cJSON_Delete(root);
            fprintf(stderr, "lssar attnstats: %s\n", lssar_errmsg());
            return 1;
        }
        printf("\njson: %s\n", json);
    }
    cJSON_Delete(root);
    if (plot) {
        plot_series se[MAXM], ss[MAXM];
        static double gx[MAXM][MAXT], gy[2][MAXM][MAXT], ge[2][MAXM][MAXT];
        const int nl = ng ? ng : nm;   // pooled: one line per group, with its interval
        for (int i = 0; i < nl; i++) {
            if (!ng) {
                se[i] = (plot_series){labels[i], nt, xs[i], ent[i], NULL};
                ss[i] = (plot_series){labels[i], nt, xs[i], sink[i], NULL};
                continue;
            }
            for (int t = 0; t < nt; t++) {
                gx[i][t] = seqs[t];
                gy[0][i][t] = gm[i][t][1]; ge[0][i][t] = gh[i][t][1];
                gy[1][i][t] = gm[i][t][2]; ge[1][i][t] = gh[i][t][2];
            }
            se[i] = (plot_series){glabel[i], nt, gx[i], gy[0][i], ge[0][i]};
            ss[i] = (plot_series){glabel[i], nt, gx[i], gy[1][i], ge[1][i]};
        }
        char sp2[4200];
        snprintf(sp2, sizeof sp2, "%.*s_sink.png",
                 (int)(strlen(plot) > 4 && !strcmp(plot + strlen(plot) - 4, ".png") ? strlen(plot) - 4
                                                                                    : strlen(plot)),
                 plot);
        if (plot_lines(plot, "attention entropy / ln(n), mean over layers (1 = uniform)", "length T",
                       "normalised entropy", 1, se, nl) ||
            plot_lines(sp2, "weight on the first token (attention sink), mean over layers", "length T",
                       "sink weight", 1, ss, nl)) {
            fprintf(stderr, "lssar attnstats: %s\n", lssar_errmsg());
            return 1;
        }
        printf("plots: %s %s\n", plot, sp2);
    }
    return 0;
}
