// recipe_report.c - OUT/recipe.json and OUT/RESULTS.md of `lssar recipe`, from the files its
// stages wrote (OUT/train/log.jsonl, OUT/eval.json, OUT/passkey.json); see recipe.h.
#include <math.h>
#include <stdio.h>
#include <cJSON.h>
#include "exp/recipe.h"
#include "core/json.h"
#include "core/util.h"
#include "exp/passkey.h"

// train: the last step's loss and the last validation loss, from OUT/train/log.jsonl
static cJSON *train_summary(const char *run) {
    char path[4400];
    snprintf(path, sizeof path, "%s/log.jsonl", run);
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    cJSON *out = cJSON_CreateObject();
    double step = NAN, loss = NAN, val = NAN;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        cJSON *j = cJSON_Parse(line);
        if (!j) continue;
        const cJSON *s = cJSON_GetObjectItem(j, "step"), *l = cJSON_GetObjectItem(j, "loss"),
                    *v = cJSON_GetObjectItem(j, "val_loss");
        if (cJSON_IsNumber(l) && cJSON_IsNumber(s)) { step = s->valuedouble; loss = l->valuedouble; }
        if (cJSON_IsNumber(v)) val = v->valuedouble;
        cJSON_Delete(j);
    }
    fclose(f);
    cJSON_AddNumberToObject(out, "step", step);
    cJSON_AddNumberToObject(out, "loss", loss);
    cJSON_AddNumberToObject(out, "val_loss", val);   // NaN (null in JSON) without validation
    return out;
}

// eval.json's results as [{seq, loss}]
static cJSON *eval_summary(const char *path) {
    cJSON *j = lssar_read_json(path);
    if (!j) return NULL;
    cJSON *out = cJSON_CreateArray(), *res;
    cJSON_ArrayForEach(res, cJSON_GetObjectItem(j, "results")) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "seq", cJSON_GetNumberValue(cJSON_GetObjectItem(res, "seq")));
        cJSON_AddNumberToObject(e, "loss", cJSON_GetNumberValue(cJSON_GetObjectItem(res, "loss")));
        cJSON_AddItemToArray(out, e);
    }
    cJSON_Delete(j);
    return out;
}

// passkey.json's cells summed over the depths: per length the accuracy with its Wilson interval
static cJSON *passkey_summary(const char *path) {
    cJSON *j = lssar_read_json(path);
    if (!j) return NULL;
    enum { MAXL = 32 };
    int len[MAXL], k[MAXL] = {0}, n[MAXL] = {0}, nl = 0;
    cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(j, "results")) {
        int L = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(c, "length"));
        int i = 0;
        while (i < nl && len[i] != L) i++;
        if (i == nl) { if (nl == MAXL) continue; len[nl++] = L; }
        k[i] += (int)cJSON_GetNumberValue(cJSON_GetObjectItem(c, "successes"));
        n[i] += (int)cJSON_GetNumberValue(cJSON_GetObjectItem(c, "trials"));
    }
    cJSON_Delete(j);
    cJSON *out = cJSON_CreateArray();
    for (int i = 0; i < nl; i++) {
        double lo, hi;
        wilson_interval(k[i], n[i], 1.96, &lo, &hi);
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "length", len[i]);
        cJSON_AddNumberToObject(e, "accuracy", n[i] ? (double)k[i] / n[i] : NAN);
        cJSON_AddNumberToObject(e, "lo", lo);
        cJSON_AddNumberToObject(e, "hi", hi);
        cJSON_AddNumberToObject(e, "trials", n[i]);
        cJSON_AddItemToArray(out, e);
    }
    return out;
}

static double num(const cJSON *o, const char *key) {
    return cJSON_GetNumberValue(cJSON_GetObjectItem(o, key));
}

static int write_files(const char *out, cJSON *rep) {
    char path[4200];
    snprintf(path, sizeof path, "%s/recipe.json", out);
    int rc = lssar_write_json(path, rep);
    snprintf(path, sizeof path, "%s/RESULTS.md", out);
    lssar_afile af;
    if (rc || (rc = lssar_afile_open(&af, path))) return rc;
    FILE *f = af.f;
    const cJSON *tr = cJSON_GetObjectItem(rep, "train");
    fprintf(f, "# lssar recipe %s, %s attention, on %s%s\n\n",
            cJSON_GetStringValue(cJSON_GetObjectItem(rep, "recipe")),
            cJSON_GetStringValue(cJSON_GetObjectItem(rep, "attn")),
            cJSON_GetStringValue(cJSON_GetObjectItem(rep, "device")),
            cJSON_IsTrue(cJSON_GetObjectItem(rep, "smoke")) ? " (--smoke: a toy model; these numbers check "
                                                              "the recipe, not the model)"
                                                            : "");
    if (tr)
        fprintf(f, "Training: step %.0f, train loss %.4f, validation loss %.4f.\n\n", num(tr, "step"),
                num(tr, "loss"), num(tr, "val_loss"));
    const cJSON *ev = cJSON_GetObjectItem(rep, "eval"), *e;
    if (ev && cJSON_GetArraySize(ev) > 0) {
        double base = num(cJSON_GetArrayItem(ev, 0), "loss");
        fprintf(f,
                "## Loss against context length (lssar eval)\n\n| tokens | loss | minus loss at %.0f "
                "|\n|---:|---:|---:|\n",
                num(cJSON_GetArrayItem(ev, 0), "seq"));
        cJSON_ArrayForEach(e, ev)
            fprintf(f, "| %.0f | %.4f | %+.4f |\n", num(e, "seq"), num(e, "loss"), num(e, "loss") - base);
        fprintf(f, "\n");
    }
    const cJSON *pk = cJSON_GetObjectItem(rep, "passkey");
    if (pk && cJSON_GetArraySize(pk) > 0) {
        fprintf(f, "## Passkey retrieval (lssar passkey; all depths pooled, 95%% Wilson interval)\n\n"
                   "| tokens | accuracy | 95%% interval | trials |\n|---:|---:|:---:|---:|\n");
        cJSON_ArrayForEach(e, pk)
            fprintf(f, "| %.0f | %.3f | %.3f-%.3f | %.0f |\n", num(e, "length"), num(e, "accuracy"),
                    num(e, "lo"), num(e, "hi"), num(e, "trials"));
        fprintf(f, "\n");
    }
    fprintf(f, "## Stages (OUT/commands.sh)\n\n| stage | seconds | exit | command |\n|---|---:|---:|---|\n");
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(rep, "stages"))
        fprintf(f, "| %s | %s%.1f | %.0f | `%s` |\n", cJSON_GetStringValue(cJSON_GetObjectItem(e, "name")),
                cJSON_IsTrue(cJSON_GetObjectItem(e, "skipped")) ? "done earlier, " : "", num(e, "seconds"),
                num(e, "exit"), cJSON_GetStringValue(cJSON_GetObjectItem(e, "command")));
    return lssar_afile_commit(&af);
}

int recipe_report(const char *out, cJSON *rep, int failed, double seconds) {
    char path[4300];
    snprintf(path, sizeof path, "%s/train", out);
    cJSON *t = train_summary(path);
    if (t) cJSON_AddItemToObject(rep, "train", t);
    snprintf(path, sizeof path, "%s/eval.json", out);
    cJSON *e = failed ? NULL : eval_summary(path);
    if (e) cJSON_AddItemToObject(rep, "eval", e);
    snprintf(path, sizeof path, "%s/passkey.json", out);
    cJSON *k = failed ? NULL : passkey_summary(path);
    if (k) cJSON_AddItemToObject(rep, "passkey", k);
    cJSON_AddNumberToObject(rep, "seconds", seconds);
    return write_files(out, rep);
}
