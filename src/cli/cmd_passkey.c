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
#include "lssar.h"
#include "exp/common.h"
#include "model/checkpoint.h"
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
    "--json FILE: {\"results\": [{\"length\", \"depth\", \"accuracy\", \"digit_accuracy\", \"trials\", \"lo\",\n"
    "\"hi\"}], \"passkey_mix\": F}. --plot FILE.png: heatmap of accuracy, length x depth.";

#define MAXL 16
#define MAXD 64

int cmd_passkey(int argc, char **argv) {
    const char *model = NULL, *lengths_s = NULL, *json = NULL, *plot = NULL, *attn = NULL;
    int depths = 11, trials = 20, batch = 8, threads = 0;
    float p = 0;
    uint64_t seed = 1;
    const char *device_name = "cpu";
    arg_spec sp[] = {
        {"model", ARG_STR, &model, "run directory (or .safetensors file)", 1, 0},
        {"lengths", ARG_STR, &lengths_s, "sequence lengths L1,L2,... (tokens the model reads)", 1, 0},
        {"depths", ARG_INT, &depths, "needle depths, evenly spaced from 0% to 100%", 0, 0},
        {"trials", ARG_INT, &trials, "random keys per length and depth", 0, 0},
        {"batch", ARG_INT, &batch, "sequences per forward pass", 0, 0},
        {"attn", ARG_STR, &attn, "evaluate with this kind instead (lssa <-> lssar only)", 0, 0},
        {"p", ARG_FLOAT, &p, "LSSAR power override (0: the model's)", 0, 0},
        {"seed", ARG_U64, &seed, "seed of the keys", 0, 0},
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
    if (attn && args_attn_kind(attn, &load.attn)) return args_error("passkey", "--attn '%s' is unknown", attn);
    gpt *g = NULL;
    if ((rc = ckpt_load_model(model, &load, &g, NULL))) return args_error("passkey", "%s", lssar_errmsg());
    const gpt_config *c = gpt_get_config(g);
    if (c->channels != 1) { gpt_free(g); return args_error("passkey", "the passkey test needs a one-channel text model"); }
    lssar_tokenizer *tok = NULL;
    if ((rc = passkey_tokenizer_for_vocab(c->vocab, &tok))) { gpt_free(g); return args_error("passkey", "%s", lssar_errmsg()); }
    passkey_pieces pp;
    if ((rc = passkey_pieces_init(&pp, tok))) { lssar_tokenizer_free(tok); gpt_free(g); return args_error("passkey", "%s", lssar_errmsg()); }
    int minlen = passkey_min_len(&pp) - 1;
    for (int i = 0; i < nl; i++)
        if (lens[i] < minlen) {
            rc = args_error("passkey", "--lengths %d is too short: the prompt needs at least %d %s tokens", lens[i], minlen, lssar_tokenizer_name(tok));
            passkey_pieces_free(&pp); lssar_tokenizer_free(tok); gpt_free(g);
            return rc; }
    double mix = exp_passkey_mix(model);
    static double acc[MAXL * MAXD], dacc[MAXL * MAXD], lo[MAXL * MAXD], hi[MAXL * MAXD];
    static int ok_n[MAXL * MAXD];
    double dv[MAXD], lv[MAXL];
    for (int d = 0; d < depths; d++) dv[d] = depths == 1 ? 0.5 : (double)d / (depths - 1);
    int maxL = 0;
    for (int i = 0; i < nl; i++) { lv[i] = lens[i]; if (lens[i] > maxL) maxL = lens[i]; }
    int B = batch < trials ? batch : trials;
    uint16_t *seq = malloc(sizeof(uint16_t) * (size_t)B * (maxL + 1)), *in = malloc(sizeof(uint16_t) * (size_t)B * maxL);
    uint16_t *pred = malloc(sizeof(uint16_t) * (size_t)B * maxL);
    int *apos = malloc(sizeof(int) * B), *alen = malloc(sizeof(int) * B);
    if (!seq || !in || !pred || !apos || !alen) rc = lssar_fail(LSSAR_E_NOMEM, "out of memory");
    lssar_progress pg;
    lssar_progress_start(&pg, "passkey", "cells", (double)nl * depths);
    for (int li = 0; li < nl && !rc; li++) {
        int L = lens[li];
        if ((rc = gpt_reserve(g, B, L, 0))) break;
        for (int d = 0; d < depths && !rc; d++) {
            lssar_rng rng;
            lssar_rng_stream(&rng, seed, (uint64_t)li * 1000 + d);
            int ok = 0;
            double dsum = 0;
            for (int t0 = 0; t0 < trials && !rc; t0 += B) {
                int b = trials - t0 < B ? trials - t0 : B;
                for (int i = 0; i < b && !rc; i++) {
                    int key = 10000 + (int)lssar_rng_below(&rng, 90000);
                    rc = passkey_build(&pp, L + 1, dv[d], key, seq + (size_t)i * (L + 1), &apos[i], &alen[i]);
                    memcpy(in + (size_t)i * L, seq + (size_t)i * (L + 1), sizeof(uint16_t) * L);
                }
                if (rc) break;
                if ((rc = gpt_forward(g, in, NULL, b, L, NULL))) break;
                if ((rc = gpt_get_argmax(g, pred))) break;
                for (int i = 0; i < b; i++) {
                    double da = 0;
                    ok += passkey_score(&pp, seq + (size_t)i * (L + 1), pred + (size_t)i * L, apos[i], alen[i], &da);
                    dsum += da;
                }
            }
            int k = li * depths + d;
            ok_n[k] = ok;
            acc[k] = (double)ok / trials;
            dacc[k] = dsum / trials;
            wilson_interval(ok, trials, 1.96, &lo[k], &hi[k]);
            char ex[64];
            snprintf(ex, sizeof ex, "L=%d depth=%.0f%% acc=%.2f", L, 100 * dv[d], acc[k]);
            lssar_progress_update(&pg, li * depths + d + 1, ex);
        }
    }
    free(seq); free(in); free(pred); free(apos); free(alen);
    passkey_pieces_free(&pp);
    const char *tname = lssar_tokenizer_name(tok);
    char tokname[16];
    snprintf(tokname, sizeof tokname, "%s", tname);
    lssar_tokenizer_free(tok);
    char kind[64];
    if (c->attn == LSSAR_ATTN_LSSAR) snprintf(kind, sizeof kind, "lssar p=%g", c->p);
    else snprintf(kind, sizeof kind, "%s", lssar_attn_name(c->attn));
    int train_T = c->max_seq;
    gpt_free(g);
    if (rc) { fprintf(stderr, "lssar passkey: %s\n", lssar_errmsg()); return 1; }

    // table: accuracy per length x depth, then per length overall with its Wilson interval
    printf("passkey retrieval: %s (%s attention, trained at T=%d, passkey mix %g), %d trials per cell, %s tokens\n",
           model, kind, train_T, mix, trials, tokname);
    printf("%-8s", "length");
    for (int d = 0; d < depths; d++) printf(" %5.0f%%", 100 * dv[d]);
    printf(" | %-6s %-13s %s\n", "all", "95% CI", "digits");
    for (int li = 0; li < nl; li++) {
        printf("%-8d", lens[li]);
        int tot = 0;
        double ds = 0;
        for (int d = 0; d < depths; d++) { int k = li * depths + d; printf(" %6.2f", acc[k]); tot += ok_n[k]; ds += dacc[k]; }
        double l, h;
        wilson_interval(tot, trials * depths, 1.96, &l, &h);
        printf(" | %6.3f [%.2f, %.2f] %6.3f\n", (double)tot / (trials * depths), l, h, ds / depths);
    }
    if (json) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "model", model);
        cJSON_AddStringToObject(root, "attn", kind);
        cJSON_AddNumberToObject(root, "train_seq", train_T);
        cJSON_AddStringToObject(root, "tokenizer", tokname);
        cJSON_AddNumberToObject(root, "passkey_mix", mix);
        cJSON_AddNumberToObject(root, "trials", trials);
        cJSON *ra = cJSON_AddArrayToObject(root, "results");
        for (int li = 0; li < nl; li++)
            for (int d = 0; d < depths; d++) {
                int k = li * depths + d;
                cJSON *e = cJSON_CreateObject();
                cJSON_AddNumberToObject(e, "length", lens[li]);
                cJSON_AddNumberToObject(e, "depth", dv[d]);
                cJSON_AddNumberToObject(e, "accuracy", acc[k]);
                cJSON_AddNumberToObject(e, "digit_accuracy", dacc[k]);
                cJSON_AddNumberToObject(e, "trials", trials);
                cJSON_AddNumberToObject(e, "lo", lo[k]);
                cJSON_AddNumberToObject(e, "hi", hi[k]);
                cJSON_AddItemToArray(ra, e);
            }
        rc = lssar_write_json(json, root);
        cJSON_Delete(root);
        if (rc) { fprintf(stderr, "lssar passkey: %s\n", lssar_errmsg()); return 1; }
        printf("json: %s\n", json);
    }
    if (plot) {
        double dp[MAXD];
        for (int d = 0; d < depths; d++) dp[d] = round(100 * dv[d]);
        char title[256];
        snprintf(title, sizeof title, "passkey accuracy, %s (trained at T=%d, mix %g)", kind, train_T, mix);
        if (plot_heatmap(plot, title, "needle depth (%)", "length (tokens)", nl, lv, depths, dp, acc, 0, 1)) {
            fprintf(stderr, "lssar passkey: %s\n", lssar_errmsg());
            return 1;
        }
        printf("plot: %s\n", plot);
    }
    return 0;
}
