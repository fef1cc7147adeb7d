// passkey_run.c - `lssar passkey` as a library call (passkey.h): the models checked against each
// other, scored on the same keys, pooled per cell; the table, the JSON and the heatmap.
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "attn/attn.h"
#include "core/json.h"
#include "exp/common.h"
#include "exp/passkey.h"
#include "exp/plot.h"
#include "model/safetensors.h"

#define MAXL PASSKEY_MAX_LENGTHS
#define MAXD PASSKEY_MAX_DEPTHS
#define MAXM PASSKEY_MAX_MODELS

// What must agree between pooled models, read from each model file's metadata before any scoring
// (so that a mismatch in the last model costs no scoring of the first ones).
typedef struct {
    int vocab, channels, max_seq;
    char kind[64];
    double mix;
    int prompt;   // passkey_prompt the model was trained with
} pk_info;

// One run: per model m and cell k = length * depths + depth, then pooled over the models.
typedef struct {
    const passkey_opts *o;
    pk_info info[MAXM];
    char tokname[16];
    int nc, ntr;                  // cells; trials per cell over all models
    int *mok, *mpl;               // (nmodels, nc) successes; (nmodels, nc, PASSKEY_DIGITS) right digits
    double *mds;                  // (nmodels, nc) summed digit accuracies
    double acc[MAXL * MAXD], dacc[MAXL * MAXD], lo[MAXL * MAXD], hi[MAXL * MAXD];   // pooled
    int ok_n[MAXL * MAXD], place_n[MAXL * MAXD * PASSKEY_DIGITS];
    double dv[MAXD], lv[MAXL];    // depths in [0, 1], lengths
} pk_run;

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

// Every model's metadata, and the models pooled must agree: the vocabulary, the kind, the training
// length, the passkey mix and prompt; a one-channel text model.
static int read_models(pk_run *r) {
    const passkey_opts *o = r->o;
    for (int m = 0; m < o->nmodels; m++) {
        int rc = pk_read_info(o->models[m], &o->load, &r->info[m]);
        if (rc) return rc;
        if (m == 0) continue;
        const pk_info *a = &r->info[0], *b = &r->info[m];
        if (b->vocab != a->vocab)
            return lssar_fail(LSSAR_E_ARG,
                              "%s has a vocabulary of %d ids but %s has %d: the models pooled by --model "
                              "must share the tokenizer",
                              o->models[m], b->vocab, o->models[0], a->vocab);
        if (strcmp(b->kind, a->kind) || b->max_seq != a->max_seq || fabs(b->mix - a->mix) > 1e-9 ||
            b->prompt != a->prompt)
            return lssar_fail(LSSAR_E_ARG,
                              "%s (%s attention, trained at T=%d, passkey mix %g) differs from %s (%s, T=%d, "
                              "mix %g): --model pools only the seeds of one configuration",
                              o->models[m], b->kind, b->max_seq, b->mix, o->models[0], a->kind, a->max_seq,
                              a->mix);
    }
    if (r->info[0].channels != 1)
        return lssar_fail(LSSAR_E_ARG, "the passkey test needs a one-channel text model");
    return 0;
}

// The prompt's pieces for the models' tokenizer (the prompt they were trained with; a model
// trained without passkeys: the full one), and every length long enough for it.
static int prompt_pieces(pk_run *r, lssar_tokenizer **tok, passkey_pieces *pp) {
    int rc = passkey_tokenizer_for_vocab(r->info[0].vocab, tok);
    if (rc) return rc;
    snprintf(r->tokname, sizeof r->tokname, "%s", lssar_tokenizer_name(*tok));
    if ((rc = passkey_pieces_init(pp, *tok, (passkey_prompt)r->info[0].prompt))) return rc;
    const int minlen = passkey_min_len(pp) - 1;
    for (int i = 0; i < r->o->nlens; i++)
        if (r->o->lens[i] < minlen)
            return lssar_fail(LSSAR_E_ARG,
                              "--lengths %d is too short: the prompt needs at least %d %s tokens",
                              r->o->lens[i], minlen, r->tokname);
    return 0;
}

// Every model on every cell, the same keys for each.
static int score_models(pk_run *r, const passkey_pieces *pp) {
    const passkey_opts *o = r->o;
    const int nm = o->nmodels, nc = r->nc;
    lssar_progress pg;
    lssar_progress_start(&pg, "passkey", "cells", (double)nm * nc);
    int rc = 0;
    for (int m = 0; m < nm && !rc; m++) {
        gpt *g = NULL;
        if ((rc = ckpt_load_model(o->models[m], &o->load, &g, NULL))) break;
        // the metadata was read from this file a moment ago; the loaded model must still agree
        if (gpt_get_config(g)->vocab != r->info[0].vocab)
            rc = lssar_fail(LSSAR_E_FORMAT, "%s changed while it was read", o->models[m]);
        if (!rc)
            rc = passkey_eval(g, pp, o->lens, o->nlens, o->depths, o->trials, o->batch, o->seed,
                              r->mok + (size_t)m * nc, r->mds + (size_t)m * nc,
                              r->mpl + (size_t)m * nc * PASSKEY_DIGITS, &pg, (double)m * nc);
        gpt_free(g);
    }
    return rc;
}

// Pooled over the models: every model has `trials` keys per cell, the same keys.
static void pool_cells(pk_run *r) {
    const int nm = r->o->nmodels, nc = r->nc;
    for (int k = 0; k < nc; k++) {
        int ok = 0;
        double ds = 0;
        for (int m = 0; m < nm; m++) { ok += r->mok[(size_t)m * nc + k]; ds += r->mds[(size_t)m * nc + k]; }
        for (int c = 0; c < PASSKEY_DIGITS; c++) {
            r->place_n[k * PASSKEY_DIGITS + c] = 0;
            for (int m = 0; m < nm; m++)
                r->place_n[k * PASSKEY_DIGITS + c] += r->mpl[((size_t)m * nc + k) * PASSKEY_DIGITS + c];
        }
        r->ok_n[k] = ok;
        r->acc[k] = (double)ok / r->ntr;
        r->dacc[k] = ds / r->ntr;
        wilson_interval(ok, r->ntr, 1.96, &r->lo[k], &r->hi[k]);
    }
    for (int d = 0; d < r->o->depths; d++) r->dv[d] = passkey_depth(d, r->o->depths);
    for (int i = 0; i < r->o->nlens; i++) r->lv[i] = r->o->lens[i];
}

// The table: accuracy per length x depth, then per length overall with its Wilson interval, the
// digit accuracy and the digits by place; with several models each one's overall accuracy.
static void print_table(const pk_run *r) {
    const passkey_opts *o = r->o;
    const pk_info *in = &r->info[0];
    const int nm = o->nmodels, depths = o->depths, ntr = r->ntr;
    if (nm == 1)
        printf("passkey retrieval: %s (%s attention, trained at T=%d, passkey mix %g), %d trials per cell, "
               "%s tokens, %s prompt\n",
               o->model, in->kind, in->max_seq, in->mix, o->trials, r->tokname,
               passkey_prompt_name((passkey_prompt)in->prompt));
    else
        printf("passkey retrieval: %d models pooled (%s attention, trained at T=%d, passkey mix %g), %d "
               "trials per cell (%d per model), %s tokens, %s prompt\n",
               nm, in->kind, in->max_seq, in->mix, ntr, o->trials, r->tokname,
               passkey_prompt_name((passkey_prompt)in->prompt));
    printf("%-8s", "length");
    for (int d = 0; d < depths; d++) printf(" %5.0f%%", 100 * r->dv[d]);
    printf(" | %-6s %-13s %-6s %s\n", "all", "95% CI", "digits", "by place (1st..5th)");
    for (int li = 0; li < o->nlens; li++) {
        printf("%-8d", o->lens[li]);
        int tot = 0;
        double ds = 0;
        for (int d = 0; d < depths; d++) {
            int k = li * depths + d;
            printf(" %6.2f", r->acc[k]);
            tot += r->ok_n[k];
            ds += r->dacc[k];
        }
        double l, h;
        wilson_interval(tot, ntr * depths, 1.96, &l, &h);
        printf(" | %6.3f [%.2f, %.2f] %6.3f", (double)tot / (ntr * depths), l, h, ds / depths);
        for (int c = 0; c < PASSKEY_DIGITS; c++) {
            int n = 0;
            for (int d = 0; d < depths; d++) n += r->place_n[(li * depths + d) * PASSKEY_DIGITS + c];
            printf(" %.2f", (double)n / (ntr * depths));
        }
        printf("\n");
    }
    if (nm > 1)   // each model over all cells: how far the seeds disagree
        for (int m = 0; m < nm; m++) {
            int tot = 0;
            for (int k = 0; k < r->nc; k++) tot += r->mok[(size_t)m * r->nc + k];
            double l, h;
            wilson_interval(tot, o->trials * r->nc, 1.96, &l, &h);
            printf("  %s: %6.3f [%.2f, %.2f]\n", o->models[m], (double)tot / (o->trials * r->nc), l, h);
        }
}

// One cell's JSON object: the pooled figures and each model's.
static cJSON *cell_json(const pk_run *r, int li, int d) {
    const passkey_opts *o = r->o;
    const int k = li * o->depths + d;
    cJSON *e = cJSON_CreateObject();
    cJSON_AddNumberToObject(e, "length", o->lens[li]);
    cJSON_AddNumberToObject(e, "depth", r->dv[d]);
    cJSON_AddNumberToObject(e, "accuracy", r->acc[k]);
    cJSON_AddNumberToObject(e, "digit_accuracy", r->dacc[k]);
    cJSON *pa = cJSON_AddArrayToObject(e, "place_accuracy");
    for (int c = 0; c < PASSKEY_DIGITS; c++)
        cJSON_AddItemToArray(pa, cJSON_CreateNumber((double)r->place_n[k * PASSKEY_DIGITS + c] / r->ntr));
    cJSON_AddNumberToObject(e, "trials", r->ntr);
    cJSON_AddNumberToObject(e, "lo", r->lo[k]);
    cJSON_AddNumberToObject(e, "hi", r->hi[k]);
    cJSON_AddNumberToObject(e, "successes", r->ok_n[k]);
    cJSON *pm = cJSON_AddArrayToObject(e, "per_model");
    for (int m = 0; m < o->nmodels; m++) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "model", o->models[m]);
        cJSON_AddNumberToObject(x, "accuracy", (double)r->mok[(size_t)m * r->nc + k] / o->trials);
        cJSON_AddNumberToObject(x, "digit_accuracy", r->mds[(size_t)m * r->nc + k] / o->trials);
        cJSON_AddItemToArray(pm, x);
    }
    return e;
}

static int write_json(const pk_run *r) {
    const passkey_opts *o = r->o;
    const pk_info *in = &r->info[0];
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "model", o->model);
    cJSON_AddStringToObject(root, "attn", in->kind);
    cJSON_AddNumberToObject(root, "train_seq", in->max_seq);
    cJSON_AddStringToObject(root, "tokenizer", r->tokname);
    cJSON_AddNumberToObject(root, "passkey_mix", in->mix);
    cJSON_AddStringToObject(root, "prompt", passkey_prompt_name((passkey_prompt)in->prompt));
    cJSON_AddNumberToObject(root, "trials", o->trials);
    cJSON *ma = cJSON_AddArrayToObject(root, "models");
    for (int m = 0; m < o->nmodels; m++) cJSON_AddItemToArray(ma, cJSON_CreateString(o->models[m]));
    cJSON *ra = cJSON_AddArrayToObject(root, "results");
    for (int li = 0; li < o->nlens; li++)
        for (int d = 0; d < o->depths; d++) cJSON_AddItemToArray(ra, cell_json(r, li, d));
    int rc = lssar_write_json(o->json, root);
    cJSON_Delete(root);
    if (!rc) printf("json: %s\n", o->json);
    return rc;
}

// The heatmap of the pooled accuracy, length x depth.
static int write_plot(const pk_run *r) {
    const passkey_opts *o = r->o;
    const pk_info *in = &r->info[0];
    double dp[MAXD];
    for (int d = 0; d < o->depths; d++) dp[d] = round(100 * r->dv[d]);
    char title[256];
    if (o->nmodels == 1)
        snprintf(title, sizeof title, "passkey accuracy, %s (trained at T=%d, mix %g)", in->kind, in->max_seq,
                 in->mix);
    else
        snprintf(title, sizeof title, "passkey accuracy, %s, %d models pooled (trained at T=%d, mix %g)",
                 in->kind, o->nmodels, in->max_seq, in->mix);
    int rc = plot_heatmap(o->plot, title, "needle depth (%)", "length (tokens)", o->nlens, r->lv, o->depths,
                          dp, r->acc, 0, 1);
    if (!rc) printf("plot: %s\n", o->plot);
    return rc;
}

int passkey_run(const passkey_opts *o, int *bad_args) {
    *bad_args = 0;
    pk_run *r = calloc(1, sizeof *r);
    if (!r) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    r->o = o;
    r->nc = o->nlens * o->depths;
    r->ntr = o->nmodels * o->trials;
    lssar_tokenizer *tok = NULL;
    passkey_pieces pp = {0};
    int rc = read_models(r);
    if (!rc) rc = prompt_pieces(r, &tok, &pp);
    *bad_args = rc != 0;
    if (!rc) {
        r->mok = calloc((size_t)o->nmodels * r->nc, sizeof(int));
        r->mpl = calloc((size_t)o->nmodels * r->nc * PASSKEY_DIGITS, sizeof(int));   // right digits by place
        r->mds = calloc((size_t)o->nmodels * r->nc, sizeof(double));
        if (!r->mok || !r->mds || !r->mpl) rc = lssar_fail(LSSAR_E_NOMEM, "out of memory");
    }
    if (!rc) rc = score_models(r, &pp);
    passkey_pieces_free(&pp);
    lssar_tokenizer_free(tok);
    if (!rc) {
        pool_cells(r);
        print_table(r);
    }
    if (!rc && o->json) rc = write_json(r);
    free(r->mok); free(r->mds); free(r->mpl);
    if (!rc && o->plot) rc = write_plot(r);
    free(r);
    return rc;
}
