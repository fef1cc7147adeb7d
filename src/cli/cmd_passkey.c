// cmd_passkey.c - `lssar passkey`: Mohtashami & Jaggi's passkey retrieval test (src/exp/passkey.h)
// over lengths x needle depths, teacher-forced argmax scoring.
#include <cJSON.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "args.h"
#include "attn/attn.h"
#include "lssar.h"
#include "exp/common.h"
#include "model/checkpoint.h"
#include "model/safetensors.h"
#include "exp/passkey.h"
#include "exp/plot.h"
#include "core/json.h"

static const char *ABOUT =
    "Passkey retrieval (Mohtashami & Jaggi 2023), in token space: the task line, the filler \"The grass\n"
    "is green. The sky is blue. ...\" repeated to the length, the needle \"The pass key is K. Remember\n"
    "it. K is the pass key.\" at each depth (0% = first, 100% = last before the question), then \"What\n"
    "is the pass key? The pass key is K\" with K a random 5-digit number. Scoring is teacher-forced:\n"
    "a trial succeeds when the model's argmax gets every token of \" K\" right; digit accuracy is the\n"
    "fraction of the 5 digits its predicted tokens get right in place. 95% Wilson intervals.\n"
    "The tokenizer follows the model's vocabulary (257: byte, >= 50257: GPT-2).\n"
    "Small models cannot do this untrained: see `lssar train --passkey-mix F` (the fraction F used in\n"
    "training is read from the run's trainer.safetensors metadata when present, and reported).\n"
    "Several models (--model A,B,C: typically the seeds of one kind, which must share the vocabulary,\n"
    "the attention kind, the training length and the passkey mix) are scored on the same keys and\n"
    "pooled: per cell the successes and trials summed over the models, the Wilson interval of the\n"
    "pooled proportion, and each model's overall accuracy under the table. The seeds of an\n"
    "`lssar extrapolate --seeds 3` run: --model out/lssar-p15,out/lssar-p15-s1,out/lssar-p15-s2.\n"
    "--json FILE: {\"results\": [{\"length\", \"depth\", \"accuracy\", \"digit_accuracy\", "
    "\"place_accuracy\" (the\n"
    "5 digits of the key, each right how often), \"trials\", \"lo\",\n"
    "\"hi\", \"successes\", \"per_model\": [{\"model\", \"accuracy\", \"digit_accuracy\"}]}], "
    "\"passkey_mix\": F,\n"
    "\"trials\": keys per cell and model, \"models\": [...]} (a cell's \"trials\" and \"successes\" are\n"
    "pooled over the models). --plot FILE.png: heatmap of the (pooled) accuracy, length x depth.";

#define MAXL 16
#define MAXD 64
#define MAXM 64

// What must agree between pooled models, read from each model file's metadata before any scoring
// (so that a mismatch in the last model costs no scoring of the first ones).
typedef struct {
    int vocab, channels, max_seq;
    char kind[64];
    double mix;
    int prompt;   // passkey_prompt the model was trained with
} pk_info;

static void kind_name(lssar_attn_kind a, float p, char *out, size_t n) {
    if (attn_reweights(a)) snprintf(out, n, "%s p=%g", lssar_attn_name(a), p);
    else snprintf(out, n, "%s", lssar_attn_name(a));
}

static int pk_read_info(const char *model, const ckpt_load_opts *load, pk_info *in) {
    char file[4096];
    int rc = ckpt_model_path(model, file, sizeof file);
    if (rc) return rc;
    st_file f;
    if ((rc = st_open(&f, file))) return rc;
    gpt_config c;
    rc = ckpt_config_from_meta(&f, &c, NULL);
    st_close(&f);
    if (rc) return rc;
    // as ckpt_load_model will build it (an --attn it refuses is refused there, by name)
    if (load->set_attn) c.attn = load->attn;
    if (load->p > 0) c.p = load->p;
    in->vocab = c.vocab;
    in->channels = c.channels;
    in->max_seq = c.max_seq;
    kind_name(c.attn, c.p, in->kind, sizeof in->kind);
    in->mix = exp_passkey_mix(model);
    in->prompt = exp_passkey_prompt(model);
    return 0;
}

int cmd_passkey(int argc, char **argv) {
    const char *model = NULL, *lengths_s = NULL, *json = NULL, *plot = NULL, *attn = NULL;
    int depths = 11, trials = 20, batch = 8, threads = 0;
    float p = 0;
    uint64_t seed = 1;
    const char *device_name = "cpu";
    arg_spec sp[] = {
        {"model", ARG_STR, &model,
         "run directory (or .safetensors file); several, comma-separated, are pooled", 1, 0},
        {"lengths", ARG_STR, &lengths_s, "sequence lengths L1,L2,... (tokens the model reads)", 1, 0},
        {"depths", ARG_INT, &depths, "needle depths, evenly spaced from 0% to 100%", 0, 0},
        {"trials", ARG_INT, &trials, "random keys per length and depth (and model)", 0, 0},
        {"batch", ARG_INT, &batch, "sequences per forward pass", 0, 0},
        {"attn", ARG_STR, &attn, "evaluate with this kind instead (lssa <-> lssar only)", 0, 0},
        {"p", ARG_FLOAT, &p, "LSSAR power override (0: the model's)", 0, 0},
        {"seed", ARG_U64, &seed, "seed of the keys (the same for every model)", 0, 0},
        {"json", ARG_STR, &json, "write the results here", 0, 0},
        {"plot", ARG_STR, &plot, "write a heatmap PNG here (gnuplot)", 0, 0},
        {"threads", ARG_INT, &threads, "OpenMP threads (0: all)", 0, 0},
        {"device", ARG_STR, &device_name, ARGS_DEVICE_HELP, 0, 0},
        {0}};
    int rc = args_parse("passkey", ABOUT, sp, argc, argv);
    if (rc >= 0) return rc;
    lssar_device device;
    if (args_device("passkey", device_name, &device)) return 2;
    int lens[MAXL];
    int nl = args_int_list("passkey", "--lengths", lengths_s, lens, MAXL);
    if (nl < 1) return 2;
    if (depths < 1 || depths > MAXD) return args_error("passkey", "--depths must be in 1..%d", MAXD);
    if (trials < 1 || batch < 1) return args_error("passkey", "--trials and --batch must be >= 1");
    if (threads > 0) omp_set_num_threads(threads);
    ckpt_load_opts load = {.set_attn = attn != NULL, .p = p, .device = device};
    if (attn && args_attn_kind("passkey", attn, &load.attn)) return 2;

    // --model A,B,C: the models to pool (one is the plain single-model test)
    static char list[8192];
    if (strlen(model) >= sizeof list)
        return args_error("passkey", "--model is longer than %zu characters", sizeof list - 1);
    snprintf(list, sizeof list, "%s", model);
    char *names[MAXM];
    int nm = 0;
    for (char *t = strtok(list, ","); t; t = strtok(NULL, ",")) {
        if (nm == MAXM) return args_error("passkey", "--model names more than %d models", MAXM);
        for (int j = 0; j < nm; j++)
            if (!strcmp(names[j], t))
                return args_error("passkey",
                                  "--model names %s twice: pooling it twice would count the same trials "
                                  "twice",
                                  t);
        names[nm++] = t;
    }
    if (nm < 1) return args_error("passkey", "--model names no model");
    static pk_info info[MAXM];
    for (int m = 0; m < nm; m++) {
        if ((rc = pk_read_info(names[m], &load, &info[m])))
            return args_error("passkey", "%s", lssar_errmsg());
        if (m == 0) continue;
        const pk_info *a = &info[0], *b = &info[m];
        if (b->vocab != a->vocab)
            return args_error("passkey",
                              "%s has a vocabulary of %d ids but %s has %d: the models pooled by --model "
                              "must share the tokenizer",
                              names[m], b->vocab, names[0], a->vocab);
        if (strcmp(b->kind, a->kind) || b->max_seq != a->max_seq || fabs(b->mix - a->mix) > 1e-9 ||
            b->prompt != a->prompt)
            return args_error("passkey",
                              "%s (%s attention, trained at T=%d, passkey mix %g) differs from %s (%s, T=%d, "
                              "mix %g): --model pools only the seeds of one configuration",
                              names[m], b->kind, b->max_seq, b->mix, names[0], a->kind, a->max_seq, a->mix);
    }
    if (info[0].channels != 1)
        return args_error("passkey", "the passkey test needs a one-channel text model");
    lssar_tokenizer *tok = NULL;
    if ((rc = passkey_tokenizer_for_vocab(info[0].vocab, &tok)))
        return args_error("passkey", "%s", lssar_errmsg());
    passkey_pieces pp;
    // the prompt the models were trained with (a model trained without passkeys: the full one)
    if ((rc = passkey_pieces_init(&pp, tok, (passkey_prompt)info[0].prompt))) {
        lssar_tokenizer_free(tok);
        return args_error("passkey", "%s", lssar_errmsg());
    }
    int minlen = passkey_min_len(&pp) - 1;
    for (int i = 0; i < nl; i++)
        if (lens[i] < minlen) {
            rc = args_error("passkey", "--lengths %d is too short: the prompt needs at least %d %s tokens",
                            lens[i], minlen, lssar_tokenizer_name(tok));
            passkey_pieces_free(&pp); lssar_tokenizer_free(tok);
            return rc; }
    const int nc = nl * depths;
    // per model m and cell k: mok[m * nc + k] successes of `trials`, mds the summed digit accuracies
    int *mok = calloc((size_t)nm * nc, sizeof(int));
    int *mpl = calloc((size_t)nm * nc * PASSKEY_DIGITS, sizeof(int));   // right digits by place
    double *mds = calloc((size_t)nm * nc, sizeof(double));
    if (!mok || !mds || !mpl) rc = lssar_fail(LSSAR_E_NOMEM, "out of memory");
    lssar_progress pg;
    lssar_progress_start(&pg, "passkey", "cells", (double)nm * nc);
    for (int m = 0; m < nm && !rc; m++) {
        gpt *g = NULL;
        if ((rc = ckpt_load_model(names[m], &load, &g, NULL))) break;
        // the metadata was read from this file a moment ago; the loaded model must still agree
        if (gpt_get_config(g)->vocab != info[0].vocab)
            rc = lssar_fail(LSSAR_E_FORMAT, "%s changed while it was read", names[m]);
        if (!rc)
            rc = passkey_eval(g, &pp, lens, nl, depths, trials, batch, seed, mok + (size_t)m * nc,
                              mds + (size_t)m * nc, mpl + (size_t)m * nc * PASSKEY_DIGITS, &pg,
                              (double)m * nc);
        gpt_free(g);
    }
    passkey_pieces_free(&pp);
    char tokname[16];
    snprintf(tokname, sizeof tokname, "%s", lssar_tokenizer_name(tok));
    lssar_tokenizer_free(tok);
    if (rc) {
        free(mok);
        free(mds);
        free(mpl);
        fprintf(stderr, "lssar passkey: %s\n", lssar_errmsg());
        return 1;
    }

    // pooled over the models: every model has `trials` keys per cell, the same keys
    const int ntr = nm * trials;
    static double acc[MAXL * MAXD], dacc[MAXL * MAXD], lo[MAXL * MAXD], hi[MAXL * MAXD];
    static int ok_n[MAXL * MAXD], place_n[MAXL * MAXD * PASSKEY_DIGITS];
    for (int k = 0; k < nc; k++) {
        int ok = 0;
        double ds = 0;
        for (int m = 0; m < nm; m++) { ok += mok[(size_t)m * nc + k]; ds += mds[(size_t)m * nc + k]; }
        for (int c = 0; c < PASSKEY_DIGITS; c++) {
            place_n[k * PASSKEY_DIGITS + c] = 0;
            for (int m = 0; m < nm; m++)
                place_n[k * PASSKEY_DIGITS + c] += mpl[((size_t)m * nc + k) * PASSKEY_DIGITS + c];
        }
        ok_n[k] = ok;
        acc[k] = (double)ok / ntr;
        dacc[k] = ds / ntr;
        wilson_interval(ok, ntr, 1.96, &lo[k], &hi[k]);
    }
    double dv[MAXD], lv[MAXL];
    for (int d = 0; d < depths; d++) dv[d] = passkey_depth(d, depths);
    for (int i = 0; i < nl; i++) lv[i] = lens[i];
    const char *kind = info[0].kind;
    const int train_T = info[0].max_seq;
    const double mix = info[0].mix;

    // table: accuracy per length x depth, then per length overall with its Wilson interval
    if (nm == 1)
        printf("passkey retrieval: %s (%s attention, trained at T=%d, passkey mix %g), %d trials per cell, "
               "%s tokens, %s prompt\n",
               model, kind, train_T, mix, trials, tokname,
               passkey_prompt_name((passkey_prompt)info[0].prompt));
    else
        printf("passkey retrieval: %d models pooled (%s attention, trained at T=%d, passkey mix %g), %d "
               "trials per cell (%d per model), %s tokens, %s prompt\n",
               nm, kind, train_T, mix, ntr, trials, tokname,
               passkey_prompt_name((passkey_prompt)info[0].prompt));
    printf("%-8s", "length");
    for (int d = 0; d < depths; d++) printf(" %5.0f%%", 100 * dv[d]);
    printf(" | %-6s %-13s %-6s %s\n", "all", "95% CI", "digits", "by place (1st..5th)");
    for (int li = 0; li < nl; li++) {
        printf("%-8d", lens[li]);
        int tot = 0;
        double ds = 0;
        for (int d = 0; d < depths; d++) {
            int k = li * depths + d;
            printf(" %6.2f", acc[k]);
            tot += ok_n[k];
            ds += dacc[k];
        }
        double l, h;
        wilson_interval(tot, ntr * depths, 1.96, &l, &h);
        printf(" | %6.3f [%.2f, %.2f] %6.3f", (double)tot / (ntr * depths), l, h, ds / depths);
        for (int c = 0; c < PASSKEY_DIGITS; c++) {
            int r = 0;
            for (int d = 0; d < depths; d++) r += place_n[(li * depths + d) * PASSKEY_DIGITS + c];
            printf(" %.2f", (double)r / (ntr * depths));
        }
        printf("\n");
    }
    if (nm > 1)   // each model over all cells: how far the seeds disagree
        for (int m = 0; m < nm; m++) {
            int tot = 0;
            for (int k = 0; k < nc; k++) tot += mok[(size_t)m * nc + k];
            double l, h;
            wilson_interval(tot, trials * nc, 1.96, &l, &h);
            printf("  %s: %6.3f [%.2f, %.2f]\n", names[m], (double)tot / (trials * nc), l, h);
        }
    if (json) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "model", model);
        cJSON_AddStringToObject(root, "attn", kind);
        cJSON_AddNumberToObject(root, "train_seq", train_T);
        cJSON_AddStringToObject(root, "tokenizer", tokname);
        cJSON_AddNumberToObject(root, "passkey_mix", mix);
        cJSON_AddStringToObject(root, "prompt", passkey_prompt_name((passkey_prompt)info[0].prompt));
        cJSON_AddNumberToObject(root, "trials", trials);
        cJSON *ma = cJSON_AddArrayToObject(root, "models");
        for (int m = 0; m < nm; m++) cJSON_AddItemToArray(ma, cJSON_CreateString(names[m]));
        cJSON *ra = cJSON_AddArrayToObject(root, "results");
        for (int li = 0; li < nl; li++)
            for (int d = 0; d < depths; d++) {
                int k = li * depths + d;
                cJSON *e = cJSON_CreateObject();
                cJSON_AddNumberToObject(e, "length", lens[li]);
                cJSON_AddNumberToObject(e, "depth", dv[d]);
                cJSON_AddNumberToObject(e, "accuracy", acc[k]);
                cJSON_AddNumberToObject(e, "digit_accuracy", dacc[k]);
                cJSON *pa = cJSON_AddArrayToObject(e, "place_accuracy");
                for (int c = 0; c < PASSKEY_DIGITS; c++)
                    cJSON_AddItemToArray(pa,
                                         cJSON_CreateNumber((double)place_n[k * PASSKEY_DIGITS + c] / ntr));
                cJSON_AddNumberToObject(e, "trials", ntr);
                cJSON_AddNumberToObject(e, "lo", lo[k]);
                cJSON_AddNumberToObject(e, "hi", hi[k]);
                cJSON_AddNumberToObject(e, "successes", ok_n[k]);
                cJSON *pm = cJSON_AddArrayToObject(e, "per_model");
                for (int m = 0; m < nm; m++) {
                    cJSON *x = cJSON_CreateObject();
                    cJSON_AddStringToObject(x, "model", names[m]);
                    cJSON_AddNumberToObject(x, "accuracy", (double)mok[(size_t)m * nc + k] / trials);
                    cJSON_AddNumberToObject(x, "digit_accuracy", mds[(size_t)m * nc + k] / trials);
                    cJSON_AddItemToArray(pm, x);
                }
                cJSON_AddItemToArray(ra, e);
            }
        rc = lssar_write_json(json, root);
        cJSON_Delete(root);
        if (rc) {
            free(mok);
            free(mds);
            free(mpl);
            fprintf(stderr, "lssar passkey: %s\n", lssar_errmsg());
            return 1;
        }
        printf("json: %s\n", json);
    }
    free(mok); free(mds); free(mpl);
    if (plot) {
        double dp[MAXD];
        for (int d = 0; d < depths; d++) dp[d] = round(100 * dv[d]);
        char title[256];
        if (nm == 1)
            snprintf(title, sizeof title, "passkey accuracy, %s (trained at T=%d, mix %g)", kind, train_T,
                     mix);
        else
            snprintf(title, sizeof title, "passkey accuracy, %s, %d models pooled (trained at T=%d, mix %g)",
                     kind, nm, train_T, mix);
        if (plot_heatmap(plot, title, "needle depth (%)", "length (tokens)", nl, lv, depths, dp, acc, 0, 1)) {
            fprintf(stderr, "lssar passkey: %s\n", lssar_errmsg());
            return 1;
        }
        printf("plot: %s\n", plot);
    }
    return 0;
}
