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
#include "data/shard.h"
#include "exp/attnstats.h"
#include "exp/common.h"
#include "model/checkpoint.h"
#include "exp/docwin.h"
#include "exp/plot.h"
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
    "--json FILE: {\"models\": [{\"model\", \"attn\", \"p\", \"results\": [{\"seq\", \"layers\": [{\"layer\",\n"
    "\"entropy\", \"entropy_norm\", \"sink\", \"top1\"}], \"mean\": {...}}]}]}.\n"
    "--plot FILE.png: normalised entropy vs length (layer mean, one line per model); the sink\n"
    "weight goes to FILE_sink.png.";

#define MAXT 16
#define MAXM 8

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
    if (attn && args_attn_kind(attn, &lo.attn)) return args_error("attnstats", "--attn '%s' is unknown", attn);
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
    for (char *t = strtok(list, ","); t && nm < MAXM; t = strtok(NULL, ",")) names[nm++] = t;
    static double ent[MAXM][MAXT], sink[MAXM][MAXT], xs[MAXM][MAXT];
    char labels[MAXM][128];
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "data", data);
    cJSON_AddNumberToObject(root, "windows", windows);
    cJSON_AddNumberToObject(root, "rows", rows);
    cJSON_AddBoolToObject(root, "document_windows", have_docs);
    cJSON *ma = cJSON_AddArrayToObject(root, "models");
    printf("attention statistics (rows in [T/2, T), %d windows per length%s)\n", windows, have_docs ? ", inside held-out documents" : "");
    for (int mi = 0; mi < nm && !rc; mi++) {
        gpt *g = NULL;
        if ((rc = ckpt_load_model(names[mi], &lo, &g, NULL))) break;
        const gpt_config *c = gpt_get_config(g);
        if (c->channels != s.channels) { rc = lssar_fail(LSSAR_E_FORMAT, "%s has %d channels but the model has %d", data, s.channels, c->channels); gpt_free(g); break; }
        for (size_t t = 0; t < s.n * (size_t)s.channels; t++)   // one pass: a damaged or foreign shard fails here, naming it
            if (s.tokens[t] >= c->vocab) {
                rc = lssar_fail(LSSAR_E_FORMAT, "%s: token %d at position %zu is outside the vocabulary of %s (0..%d): damaged, or data for another model",
                                data, s.tokens[t], t / s.channels, names[mi], c->vocab - 1);
                break;
            }
        if (rc) { gpt_free(g); break; }
        // plot label: the run's folder name and its kind
        const char *base = names[mi] + strlen(names[mi]);
        while (base > names[mi] && base[-1] == '/') base--;
        const char *end = base;
        while (base > names[mi] && base[-1] != '/') base--;
        if (c->attn == LSSAR_ATTN_LSSAR) snprintf(labels[mi], sizeof labels[mi], "%.*s (lssar p=%g)", (int)(end - base), base, c->p);
        else snprintf(labels[mi], sizeof labels[mi], "%.*s (%s)", (int)(end - base), base, lssar_attn_name(c->attn));
        cJSON *mj = cJSON_CreateObject();
        cJSON_AddStringToObject(mj, "model", names[mi]);
        cJSON_AddStringToObject(mj, "attn", lssar_attn_name(c->attn));
        if (c->attn == LSSAR_ATTN_LSSAR) cJSON_AddNumberToObject(mj, "p", c->p);
        cJSON_AddNumberToObject(mj, "train_seq", c->max_seq);
        cJSON *rj = cJSON_AddArrayToObject(mj, "results");
        cJSON_AddItemToArray(ma, mj);
        printf("\n%s: %s\n%-8s %-6s %9s %9s %9s %9s\n", names[mi], labels[mi], "T", "layer", "entropy", "ent/ln n", "sink", "top1");
        attn_layer_stats *st = calloc(c->layers, sizeof *st);
        uint16_t *win = NULL;
        for (int ti = 0; ti < nt && !rc; ti++) {
            int T = seqs[ti];
            size_t *starts = NULL;
            int nw = 0;
            if ((rc = have_docs ? exp_doc_windows(&docs, T, windows, &starts, &nw) : exp_plain_windows(s.n, T, windows, &starts, &nw))) break;
            xs[mi][ti] = T;
            ent[mi][ti] = sink[mi][ti] = NAN;
            if (nw == 0) { printf("%-8d (no window of %d tokens in %s)\n", T, T + 1, data); free(starts); continue; }
            win = realloc(win, sizeof(uint16_t) * (size_t)nw * T * c->channels);
            for (int w = 0; w < nw; w++) memcpy(win + (size_t)w * T * c->channels, s.tokens + starts[w] * c->channels, sizeof(uint16_t) * T * c->channels);
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
                printf("%-8d %-6d %9.4f %9.4f %9.4f %9.4f\n", T, l, st[l].entropy, st[l].entropy_norm, st[l].sink, st[l].top1);
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
        }
        free(win); free(st);
        gpt_free(g);
    }
    shard_close(&s);
    exp_docs_free(&docs);
    if (rc) { cJSON_Delete(root); fprintf(stderr, "lssar attnstats: %s\n", lssar_errmsg()); return 1; }
    if (json) {
        if ((rc = lssar_write_json(json, root))) { cJSON_Delete(root); fprintf(stderr, "lssar attnstats: %s\n", lssar_errmsg()); return 1; }
        printf("\njson: %s\n", json);
    }
    cJSON_Delete(root);
    if (plot) {
        plot_series se[MAXM], ss[MAXM];
        for (int i = 0; i < nm; i++) {
            se[i] = (plot_series){labels[i], nt, xs[i], ent[i], NULL};
            ss[i] = (plot_series){labels[i], nt, xs[i], sink[i], NULL};
        }
        char sp2[4200];
        snprintf(sp2, sizeof sp2, "%.*s_sink.png", (int)(strlen(plot) > 4 && !strcmp(plot + strlen(plot) - 4, ".png") ? strlen(plot) - 4 : strlen(plot)), plot);
        if (plot_lines(plot, "attention entropy / ln(n), mean over layers (1 = uniform)", "length T", "normalised entropy", 1, se, nm) ||
            plot_lines(sp2, "weight on the first token (attention sink), mean over layers", "length T", "sink weight", 1, ss, nm)) {
            fprintf(stderr, "lssar attnstats: %s\n", lssar_errmsg());
            return 1;
        }
        printf("plots: %s %s\n", plot, sp2);
    }
    return 0;
}
