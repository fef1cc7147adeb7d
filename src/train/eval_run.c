// eval_run.c - `lssar eval` as a library call (eval.h): a model's loss at several lengths.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cJSON.h>
#include "lssar.h"
#include "attn/attn.h"
#include "core/dist.h"
#include "core/json.h"
#include "core/util.h"
#include "train/eval.h"

// The table's first lines and the JSON's model fields.
static cJSON *model_header(const char *mp, const gpt_config *c, int64_t step, const char *data) {
    char kdesc[32];   // sigmoid / relu: their length normalisation instead of the (unused) p
    if (attn_stages(c->attn).norm == LSSAR_NORM_LEN)
        snprintf(kdesc, sizeof kdesc, "len-norm %s", lssar_len_norm_name(c->len_norm));
    else
        snprintf(kdesc, sizeof kdesc, "p %g", c->p);
    printf("model %s: %s attention (%s), %s positions, trained at seq %d, step %lld\n", mp,
           lssar_attn_name(c->attn), kdesc, lssar_pos_name(c->pos), c->max_seq, (long long)step);
    printf("%8s %10s %10s %12s %8s\n", "seq", "loss", "ppl", "tokens", "windows");
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "model", mp);
    cJSON_AddStringToObject(root, "attn", lssar_attn_name(c->attn));
    cJSON_AddNumberToObject(root, "p", c->p);
    if (attn_stages(c->attn).norm == LSSAR_NORM_LEN)
        cJSON_AddStringToObject(root, "len_norm", lssar_len_norm_name(c->len_norm));
    cJSON_AddStringToObject(root, "pos", lssar_pos_name(c->pos));
    cJSON_AddNumberToObject(root, "train_seq", c->max_seq);
    cJSON_AddNumberToObject(root, "step", (double)step);
    cJSON_AddStringToObject(root, "data", data);
    return root;
}

// One length: its row of the table and its JSON object in res.
static int eval_length(const eval_run_opts *o, gpt *m, const shard *s, int T, cJSON *res) {
    double *pp = o->per_position ? malloc(sizeof(double) * T) : NULL;
    eval_result er;
    double t0 = lssar_now();
    int rc = eval_shard_ranks(m, s, T, o->batch, o->batches * o->batch, &er, pp);   // a collective
    if (rc) {
        free(pp);
        return lssar_fail(rc, "--seq %d: %s", T, lssar_errmsg());
    }
    printf("%8d %10.4f %10.3f %12zu %8d   (%.1f s)\n", T, er.loss, exp(er.loss), er.tokens, er.windows,
           lssar_now() - t0);
    fflush(stdout);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "seq", T);
    cJSON_AddNumberToObject(j, "loss", er.loss);
    cJSON_AddNumberToObject(j, "tokens", (double)er.tokens);
    cJSON_AddNumberToObject(j, "windows", er.windows);
    cJSON_AddNumberToObject(j, "seconds", lssar_now() - t0);
    if (pp) {
        cJSON *a = cJSON_AddArrayToObject(j, "per_position");
        for (int t = 0; t < T; t++) cJSON_AddItemToArray(a, cJSON_CreateNumber(pp[t]));
    }
    cJSON_AddItemToArray(res, j);
    free(pp);
    return 0;
}

// Every length, then on a GPU the device's peak memory.
static int eval_lengths(const eval_run_opts *o, gpt *m, const shard *s, int64_t step, const char *mp) {
    cJSON *root = model_header(mp, gpt_get_config(m), step, o->data);
    cJSON *res = cJSON_AddArrayToObject(root, "results");
    int rc = 0;
    for (int i = 0; i < o->nseqs && !rc; i++) rc = eval_length(o, m, s, o->seqs[i], res);
    char dname[96];
    size_t held_peak, used_peak, total;
    if (!rc && !gpt_device_stats(m, dname, sizeof dname, &held_peak, &used_peak, &total)) {   // a GPU
        printf("device %s: peak %.0f MiB held by the model, peak %.0f MiB in use on the device (of %.0f)\n",
               dname, held_peak / 1048576.0, used_peak / 1048576.0, total / 1048576.0);
        cJSON_AddStringToObject(root, "device_name", dname);
        cJSON_AddNumberToObject(root, "device_held_peak_bytes", (double)held_peak);
        cJSON_AddNumberToObject(root, "device_used_peak_bytes", (double)used_peak);
    }
    // rank 0 writes; the others learn whether it could
    if (!rc && o->json) {
        rc = lssar_dist_agree(lssar_dist_rank() == 0 ? lssar_write_json(o->json, root) : 0);
        if (rc) rc = lssar_fail(rc, "--json: %s", lssar_errmsg());
    }
    cJSON_Delete(root);
    return rc;
}

int eval_run(const eval_run_opts *o, int *usage) {
    *usage = 0;
    char mp[4096];
    gpt *m = NULL;
    int64_t step = 0;
    // a file one rank cannot read must stop every rank (lssar_dist_agree), not leave them waiting
    int rc = ckpt_model_path(o->model, mp, sizeof mp);
    if (!rc) rc = ckpt_load_model(mp, &o->load, &m, &step);
    if ((rc = lssar_dist_agree(rc))) {
        gpt_free(m);
        return rc;
    }
    const gpt_config *c = gpt_get_config(m);
    for (int i = 0; i < o->nseqs; i++)
        if (c->pos == LSSAR_POS_LEARNED && o->seqs[i] > c->max_seq) {
            *usage = 1;
            rc = lssar_fail(LSSAR_E_ARG,
                            "--seq %d: the model has learned positions for up to %d tokens; use lengths <= "
                            "%d (only rope and none positions extrapolate)",
                            o->seqs[i], c->max_seq, c->max_seq);
            gpt_free(m);
            return rc;
        }
    shard s;
    rc = shard_open(&s, o->data);
    if ((rc = lssar_dist_agree(rc))) {
        shard_close(&s);   // a no-op where the open failed
        gpt_free(m);
        return lssar_fail(rc, "--data: %s", lssar_errmsg());
    }
    rc = eval_lengths(o, m, &s, step, mp);
    shard_close(&s);
    gpt_free(m);
    return rc;
}
