// cmd_attnstats.c - `lssar attnstats`: entropy, sink weight and top-1 weight of attention rows per
// layer and length (src/exp/attnstats.h), for one or more models.
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include "args.h"
#include "lssar.h"
#include "exp/attnstats.h"

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

int cmd_attnstats(int argc, char **argv) {
    attnstats_opts o = {.windows = 4, .rows = 64};
    const char *models = NULL, *seqs_s = NULL, *attn = NULL;
    float p = 0;
    int threads = 0;
    const char *device_name = "cpu";
    arg_spec sp[] = {
        {"model", ARG_STR, &models, "run directory (or several, comma-separated)", 1, 0},
        {"data", ARG_STR, &o.data, "token shard, e.g. DATA/val.bin", 1, 0},
        {"seq", ARG_STR, &seqs_s, "lengths T1,T2,...", 1, 0},
        {"windows", ARG_INT, &o.windows, "windows per length", 0, 0},
        {"rows", ARG_INT, &o.rows, "query rows per window and head (evenly spaced over [T/2, T))", 0, 0},
        {"attn", ARG_STR, &attn, "evaluate with this kind instead (lssa <-> lssar only)", 0, 0},
        {"p", ARG_FLOAT, &p, "LSSAR power override (0: the model's)", 0, 0},
        {"json", ARG_STR, &o.json, "write the numbers here", 0, 0},
        {"plot", ARG_STR, &o.plot, "write PNG plots FILE.png and FILE_sink.png (gnuplot)", 0, 0},
        {"threads", ARG_INT, &threads, "OpenMP threads (0: all)", 0, 0},
        {"device", ARG_STR, &device_name, ARGS_DEVICE_HELP, 0, 0},
        {0}};
    int rc = args_parse("attnstats", ABOUT, sp, argc, argv);
    if (rc >= 0) return rc;
    lssar_device device;
    if (args_device("attnstats", device_name, &device)) return 2;
    o.nseqs = args_int_list("attnstats", "--seq", seqs_s, o.seqs, ATTNSTATS_MAX_LENGTHS);
    if (o.nseqs < 1) return 2;
    for (int i = 0; i < o.nseqs; i++)
        if (o.seqs[i] < 2) return args_error("attnstats", "--seq values must be >= 2");
    if (o.windows < 1 || o.rows < 1) return args_error("attnstats", "--windows and --rows must be >= 1");
    o.load = (ckpt_load_opts){.set_attn = attn != NULL, .p = p, .device = device};
    if (attn && args_attn_kind("attnstats", attn, &o.load.attn)) return 2;
    if (p < 0) return args_error("attnstats", "--p must be > 0 (or 0 for the model's)");
    if (threads > 0) omp_set_num_threads(threads);
    static char list[4096];
    snprintf(list, sizeof list, "%s", models);
    for (char *t = strtok(list, ","); t; t = strtok(NULL, ",")) {
        if (o.nmodels == ATTNSTATS_MAX_MODELS)
            return args_error("attnstats", "--model: at most %d models", ATTNSTATS_MAX_MODELS);
        o.models[o.nmodels++] = t;
    }
    int bad_data;
    if (attnstats_run(&o, &bad_data)) {
        fprintf(stderr, "lssar attnstats: %s\n", lssar_errmsg());
        return bad_data ? 2 : 1;
    }
    return 0;
}
