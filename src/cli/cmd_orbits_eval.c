// cmd_orbits_eval.c - `lssar orbits eval`: next-position accuracy and decoded error of an orbit
// model beside the previous-position baseline (src/orbits/orbeval.c).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cJSON.h>
#include "args.h"
#include "core/util.h"
#include "lssar.h"
#include "orbits/probe.h"
#include "train/checkpoint.h"
#include "core/json.h"

// DIR -> DIR/model.safetensors; a .safetensors path stays.
static void model_path(char *buf, size_t n, const char *p) {
    size_t l = strlen(p);
    if (l > 12 && !strcmp(p + l - 12, ".safetensors")) snprintf(buf, n, "%s", p);
    else snprintf(buf, n, "%s/%s", p, CKPT_MODEL_FILE);
}

int orb_cli_load_model(const char *cmd, const char *path, gpt **m);
int orb_cli_load_model(const char *cmd, const char *path, gpt **m) {
    char mp[4400];
    model_path(mp, sizeof mp, path);
    if (ckpt_load_model(mp, -1, 0.0f, m, NULL)) {
        fprintf(stderr, "lssar orbits %s: %s\n", cmd, lssar_errmsg());
        return 1;
    }
    return 0;
}

int cmd_orbits_eval(int argc, char **argv) {
    const char *model = NULL, *data = NULL, *split = "val", *json = NULL;
    uint64_t systems = 0;
    int seq = LSSAR_ORB_ROWS - 1, batch = 4, quiet = 0;
    arg_spec specs[] = {
        {"model", ARG_STR, &model, "trained orbit model: run directory or .safetensors file", 1, 0},
        {"data", ARG_STR, &data, "directory written by `lssar orbits simulate`", 1, 0},
        {"split", ARG_STR, &split, "which split of --data (file prefix)", 0, 0},
        {"systems", ARG_U64, &systems, "evaluate the first N systems (0: all)", 0, 0},
        {"seq", ARG_INT, &seq, "rows predicted per sequence (1..999; learned positions cap it at the training length)", 0, 0},
        {"batch", ARG_INT, &batch, "sequences per forward pass", 0, 0},
        {"json", ARG_STR, &json, "also write the results to this JSON file", 0, 0},
        {"quiet", ARG_BOOL, &quiet, "no progress lines", 0, 0},
        {0}};
    int rc = args_parse("orbits eval",
                        "Next-position prediction of an orbit model on whole sequences (window = rows 0..seq, aligned at\n"
                        "the dt row): cross-entropy, token accuracy (mean of the x and y channels; and both right) and the\n"
                        "mean distance in AU between the decoded predicted and true positions (bin midpoints).\n"
                        "Baseline: predict the same body's previous position (row r - (K + 1): the previous row is another\n"
                        "body). Model and baseline are compared on the rows where that previous position exists (step >= 1).\n"
                        "JSON: {\"model\", \"data\", \"split\", \"systems\", \"rows\", \"loss\", \"accuracy\", \"accuracy_both\",\n"
                        "\"error_au\", \"compared\": {\"rows\", \"model\": {\"accuracy\", \"accuracy_both\", \"error_au\"},\n"
                        "\"previous_position\": {...}}}.",
                        specs, argc, argv);
    if (rc >= 0) return rc;
    if (batch < 1) return args_error("orbits eval", "--batch must be >= 1, got %d", batch);
    if (seq < 1 || seq > LSSAR_ORB_ROWS - 1) return args_error("orbits eval", "--seq must be 1..%d, got %d", LSSAR_ORB_ROWS - 1, seq);
    gpt *m = NULL;
    if (orb_cli_load_model("eval", model, &m)) return 1;
    const gpt_config *cfg = gpt_get_config(m);
    if (cfg->pos == GPT_POS_LEARNED && seq > cfg->max_seq)
        fprintf(stderr, "lssar orbits eval: note: learned positions stop at %d; scoring rows 1..%d of each sequence\n",
                cfg->max_seq, cfg->max_seq);
    orb_eval_result r;
    double t0 = lssar_now();
    if (orb_eval_model(m, data, split, (int64_t)systems, seq, batch, !quiet, &r)) {
        fprintf(stderr, "lssar orbits eval: %s\n", lssar_errmsg());
        gpt_free(m);
        return 1;
    }
    double secs = lssar_now() - t0;
    gpt_free(m);
    printf("orbits eval: %s on %s/%s: %lld systems, %lld target rows (%.1f s)\n", model, data, split,
           (long long)r.systems, (long long)r.rows, secs);
    printf("  all rows            loss %.4f  accuracy %.4f  both %.4f  error %.4f AU\n", r.loss, r.acc_channel, r.acc_both, r.err_au);
    printf("  rows with step >= 1 (%lld):\n", (long long)r.cmp_rows);
    printf("    model             accuracy %.4f  both %.4f  error %.4f AU\n", r.cmp_acc_channel, r.cmp_acc_both, r.cmp_err_au);
    printf("    previous position accuracy %.4f  both %.4f  error %.4f AU\n", r.base_acc_channel, r.base_acc_both, r.base_err_au);
    if (json) {
        cJSON *j = cJSON_CreateObject(), *cmp = cJSON_CreateObject(), *mo = cJSON_CreateObject(), *bo = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "model", model);
        cJSON_AddStringToObject(j, "data", data);
        cJSON_AddStringToObject(j, "split", split);
        cJSON_AddNumberToObject(j, "systems", (double)r.systems);
        cJSON_AddNumberToObject(j, "rows", (double)r.rows);
        cJSON_AddNumberToObject(j, "loss", r.loss);
        cJSON_AddNumberToObject(j, "accuracy", r.acc_channel);
        cJSON_AddNumberToObject(j, "accuracy_both", r.acc_both);
        cJSON_AddNumberToObject(j, "error_au", r.err_au);
        cJSON_AddNumberToObject(j, "seconds", secs);
        cJSON_AddNumberToObject(cmp, "rows", (double)r.cmp_rows);
        cJSON_AddNumberToObject(mo, "accuracy", r.cmp_acc_channel);
        cJSON_AddNumberToObject(mo, "accuracy_both", r.cmp_acc_both);
        cJSON_AddNumberToObject(mo, "error_au", r.cmp_err_au);
        cJSON_AddNumberToObject(bo, "accuracy", r.base_acc_channel);
        cJSON_AddNumberToObject(bo, "accuracy_both", r.base_acc_both);
        cJSON_AddNumberToObject(bo, "error_au", r.base_err_au);
        cJSON_AddItemToObject(cmp, "model", mo);
        cJSON_AddItemToObject(cmp, "previous_position", bo);
        cJSON_AddItemToObject(j, "compared", cmp);
        int jrc = lssar_write_json(json, j);
        cJSON_Delete(j);
        if (jrc) { fprintf(stderr, "lssar orbits eval: %s\n", lssar_errmsg()); return 1; }
    }
    return 0;
}
