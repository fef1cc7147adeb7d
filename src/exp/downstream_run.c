// downstream_run.c - `lssar downstream` as a library call (downstream.h): the model, every task
// scored, the table, the JSON and the per-request file.
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "attn/attn.h"
#include "core/json.h"
#include "core/util.h"
#include "exp/downstream.h"

// The table on stdout: the model, its kind, steps and window, a row per task, the harness note.
static void print_table(const downstream_opts *o, const gpt_config *c, int64_t step, int W,
                        const ds_result *res, double t0) {
    printf("Zero-shot downstream accuracy of %s (%s attention, %lld steps, window %d tokens); 95%% "
           "Wilson intervals.\n\n",
           o->model, lssar_attn_name(c->attn), (long long)step, W);
    ds_table_header(stdout);
    for (int i = 0; i < o->ntasks; i++) ds_table_row(stdout, &res[i]);
    char note[1024];
    const char *tn[64];
    for (int i = 0; i < o->ntasks && i < 64; i++) tn[i] = res[i].name;
    if (ds_harness_note(note, sizeof note, tn, o->ntasks < 64 ? o->ntasks : 64)) printf("\n%s", note);
    printf("\nwall time %.1f s\n", lssar_now() - t0);
}

static int write_json(const downstream_opts *o, const gpt_config *c, int64_t step, int W,
                      const ds_result *res, double t0) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "model", o->model);
    cJSON_AddStringToObject(root, "attn", lssar_attn_name(c->attn));
    if (attn_reweights(c->attn)) cJSON_AddNumberToObject(root, "p", c->p);
    cJSON_AddNumberToObject(root, "steps", (double)step);
    cJSON_AddNumberToObject(root, "window", W);
    cJSON_AddNumberToObject(root, "limit", o->ds.limit);
    cJSON_AddStringToObject(root, "tokenization",
                            "harness: context and continuation encoded separately, left truncation");
    cJSON_AddStringToObject(root, "acc_norm",
                            "log-likelihood / characters of the choice (lm-evaluation-harness's "
                            "divisor)");
    cJSON_AddStringToObject(root, "interval", "Wilson 95%");
    cJSON *a = cJSON_AddArrayToObject(root, "results");
    for (int i = 0; i < o->ntasks; i++) cJSON_AddItemToArray(a, ds_result_json(&res[i]));
    cJSON_AddNumberToObject(root, "seconds", lssar_now() - t0);
    int rc = lssar_write_json(o->json, root);
    cJSON_Delete(root);
    return rc;
}

// Every task with the loaded model; the per-request lines kept only when all of them succeed.
static int score_tasks(const downstream_opts *o, gpt *m, const lssar_tokenizer *tok, ds_result *res,
                       int *usage) {
    lssar_afile af = {0};
    int rc = o->requests_out ? lssar_afile_open(&af, o->requests_out) : 0;
    if (rc) return rc;
    ds_opts d = o->ds;
    d.requests_out = o->requests_out ? af.f : NULL;
    for (int i = 0; i < o->ntasks && !rc; i++)
        if ((rc = ds_run_task(m, tok, o->names[i], o->paths[i], &d, &res[i]))) {
            *usage = rc == LSSAR_E_ARG || rc == LSSAR_E_UNSUPPORTED;
            rc = lssar_fail(rc, "%s: %s", o->names[i], lssar_errmsg());
        }
    if (o->requests_out) {
        if (rc) lssar_afile_abort(&af);
        else rc = lssar_afile_commit(&af);
    }
    return rc;
}

int downstream_run(const downstream_opts *o, int *usage) {
    *usage = 0;
    gpt *m = NULL;
    int64_t step = 0;
    int rc = ckpt_load_model(o->model, &o->load, &m, &step);
    if (rc) return rc;
    if ((rc = ds_check_model(m))) {
        *usage = 1;
        rc = lssar_fail(rc, "%s: %s", o->model, lssar_errmsg());
        gpt_free(m);
        return rc;
    }
    lssar_tokenizer *tok = NULL;
    ds_result *res = calloc(o->ntasks, sizeof *res);
    const gpt_config *c = gpt_get_config(m);
    if (!res) rc = lssar_fail(LSSAR_E_NOMEM, "out of memory");
    if (!rc) rc = lssar_tokenizer_open("gpt2", &tok);
    double t0 = lssar_now();
    if (!rc) rc = score_tasks(o, m, tok, res, usage);
    const int W = o->ds.window > 0 ? o->ds.window : c->max_seq;
    if (!rc) print_table(o, c, step, W, res, t0);
    if (!rc && o->json) rc = write_json(o, c, step, W, res, t0);
    free(res);
    lssar_tokenizer_free(tok);
    gpt_free(m);
    return rc;
}
