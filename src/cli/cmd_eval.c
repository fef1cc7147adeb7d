// cmd_eval.c - `lssar eval`: mean next-token loss of a trained model at several context lengths.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cJSON.h>
#include "args.h"
#include "lssar.h"
#include "attn/attn.h"
#include "model/gpt.h"
#include "model/checkpoint.h"
#include "train/eval.h"
#include "core/json.h"
#include "core/dist.h"

static const char *ABOUT =
    "Mean next-token loss (nats per token, averaged over positions and channels) of a trained model\n"
    "at each context length in --seq. The windows are deterministic: the consecutive, non-overlapping\n"
    "windows of --seq + 1 tokens from the start of --data (window k starts at position k x seq), the\n"
    "first --batches x --batch of them (fewer if the shard is shorter), so runs and models compare.\n"
    "Lengths beyond the training length work with rope or none positions (length extrapolation);\n"
    "learned positions stop at the training length.\n"
    "\n"
    "--attn/--p evaluate the weights with another attention kind: allowed between lssa and lssar,\n"
    "which share every parameter (e.g. an lssa-trained model with lssar re-weighting, p = 15).\n"
    "--model is a run directory (its model.safetensors) or a .safetensors file.\n"
    "Under mpirun -np N the batches of each length are split over the ranks and the losses gathered:\n"
    "the numbers are bit for bit those of one process (docs/DISTRIBUTED.md); rank 0 prints and writes.\n"
    "JSON (--json): {\"model\": ..., \"attn\": ..., \"p\": ..., \"results\": [{\"seq\": T, \"loss\": x,\n"
    "\"tokens\": n, \"windows\": w, \"seconds\": s[, \"per_position\": [...]]}, ...]}; on a GPU also\n"
    "\"device_name\", \"device_held_peak_bytes\" (the most the model's backend context held: weights,\n"
    "activations, scratch) and \"device_used_peak_bytes\" (the most device memory in use, cudaMemGetInfo)\n"
    "over all the lengths.";

int cmd_eval(int argc, char **argv) {
    const char *model = NULL, *data = NULL, *seqs = NULL, *json = NULL, *attn = NULL;
    int batches = 8, batch = 4, threads = 0, per_pos = 0;
    float p = 0;
    const char *device_name = "cpu";
    arg_spec sp[] = {
        {"model", ARG_STR, &model, "run directory or model .safetensors file", 1, 0},
        {"data", ARG_STR, &data, "token shard to evaluate on (e.g. the val shard)", 1, 0},
        {"seq", ARG_STR, &seqs, "context lengths, comma-separated (e.g. 128,256,512)", 1, 0},
        {"batches", ARG_INT, &batches, "batches per length (0: every window of the shard)", 0, 0},
        {"batch", ARG_INT, &batch, "windows per batch", 0, 0},
        {"attn", ARG_STR, &attn, "evaluate with this attention kind instead (lssa <-> lssar only)", 0, 0},
        {"p", ARG_FLOAT, &p, "LSSAR power for --attn lssar (0: the model's)", 0, 0},
        {"json", ARG_STR, &json, "also write the results as JSON to this file", 0, 0},
        {"per-position", ARG_BOOL, &per_pos, "include the mean loss at every position in the JSON", 0, 0},
        {"threads", ARG_INT, &threads, "CPU threads (0: all cores)", 0, 0},
        {"device", ARG_STR, &device_name, ARGS_DEVICE_HELP, 0, 0},
        {0}};
    int rc = args_parse("eval", ABOUT, sp, argc, argv);
    if (rc >= 0) return rc;
    lssar_device device;
    if (args_device("eval", device_name, &device)) return 2;
    int T[64];
    int nT = args_int_list("eval", "seq", seqs, T, 64);
    if (nT < 0) return 2;
    if (batches < 0) return args_error("eval", "--batches must be >= 0 (0: all windows)");
    if (batch < 1) return args_error("eval", "--batch must be >= 1");
    if (threads < 0) return args_error("eval", "--threads must be >= 0");
    if (p < 0) return args_error("eval", "--p must be > 0");
    ckpt_load_opts lo = {.set_attn = attn != NULL, .p = p, .device = device};
    if (attn && args_attn_kind("eval", attn, &lo.attn)) return 2;
    if (threads > 0) lssar_set_threads(threads);

    char mp[4096];
    gpt *m = NULL;
    int64_t step = 0;
    // a file one rank cannot read must stop every rank (lssar_dist_agree), not leave them waiting
    rc = ckpt_model_path(model, mp, sizeof mp);
    if (!rc) rc = ckpt_load_model(mp, &lo, &m, &step);
    if ((rc = lssar_dist_agree(rc))) {
        gpt_free(m);
        fprintf(stderr, "lssar eval: %s\n", lssar_errmsg());
        return 1;
    }
    const gpt_config *c = gpt_get_config(m);
    for (int i = 0; i < nT; i++)
        if (c->pos == LSSAR_POS_LEARNED && T[i] > c->max_seq) {
            int mx = c->max_seq;   // c dies with the model
            gpt_free(m);
            return args_error("eval",
                              "--seq %d: the model has learned positions for up to %d tokens; use lengths <= "
                              "%d (only rope and none positions extrapolate)",
                              T[i], mx, mx);
        }
    shard s;
    rc = shard_open(&s, data);
    if ((rc = lssar_dist_agree(rc))) {
        shard_close(&s);   // a no-op where the open failed
        fprintf(stderr, "lssar eval: --data: %s\n", lssar_errmsg());
        gpt_free(m);
        return 1;
    }
    char kdesc[32];   // sigmoid / relu: their length normalisation instead of the (unused) p
    if (attn_stages(c->attn).norm == LSSAR_NORM_LEN)
        snprintf(kdesc, sizeof kdesc, "len-norm %s", lssar_len_norm_name(c->len_norm));
    else
        snprintf(kdesc, sizeof kdesc, "p %g", c->p);
    printf("model %s: %s attention (%s), %s positions, trained at seq %d, step %lld\n", mp,
           lssar_attn_name(c->attn), kdesc, lssar_pos_name(c->pos), c->max_seq, (long long)step);
    printf("%8s %10s %10s %12s %8s\n", "seq", "loss", "ppl", "tokens", "windows");
    cJSON *root = cJSON_CreateObject(), *res = NULL;
    cJSON_AddStringToObject(root, "model", mp);
    cJSON_AddStringToObject(root, "attn", lssar_attn_name(c->attn));
    cJSON_AddNumberToObject(root, "p", c->p);
    if (attn_stages(c->attn).norm == LSSAR_NORM_LEN)
        cJSON_AddStringToObject(root, "len_norm", lssar_len_norm_name(c->len_norm));
    cJSON_AddStringToObject(root, "pos", lssar_pos_name(c->pos));
    cJSON_AddNumberToObject(root, "train_seq", c->max_seq);
    cJSON_AddNumberToObject(root, "step", (double)step);
    cJSON_AddStringToObject(root, "data", data);
    res = cJSON_AddArrayToObject(root, "results");
    for (int i = 0; i < nT && !rc; i++) {
        double *pp = per_pos ? malloc(sizeof(double) * T[i]) : NULL;
        eval_result er;
        double t0 = lssar_now();
        rc = eval_shard_ranks(m, &s, T[i], batch, batches * batch, &er, pp);   // a collective
        if (rc) { fprintf(stderr, "lssar eval: --seq %d: %s\n", T[i], lssar_errmsg()); free(pp); break; }
        printf("%8d %10.4f %10.3f %12zu %8d   (%.1f s)\n", T[i], er.loss, exp(er.loss), er.tokens, er.windows,
               lssar_now() - t0);
        fflush(stdout);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "seq", T[i]);
        cJSON_AddNumberToObject(o, "loss", er.loss);
        cJSON_AddNumberToObject(o, "tokens", (double)er.tokens);
        cJSON_AddNumberToObject(o, "windows", er.windows);
        cJSON_AddNumberToObject(o, "seconds", lssar_now() - t0);
        if (pp) {
            cJSON *a = cJSON_AddArrayToObject(o, "per_position");
            for (int t = 0; t < T[i]; t++) cJSON_AddItemToArray(a, cJSON_CreateNumber(pp[t]));
        }
        cJSON_AddItemToArray(res, o);
        free(pp);
    }
    char dname[96];
    size_t held_peak, used_peak, total;
    if (!rc && !gpt_device_stats(m, dname, sizeof dname, &held_peak, &used_peak, &total)) {   // a GPU
        printf("device %s: peak %.0f MiB held by the model, peak %.0f MiB in use on the device (of %.0f)\n",
               dname, held_peak / 1048576.0, used_peak / 1048576.0, total / 1048576.0);
        cJSON_AddStringToObject(root, "device_name", dname);
        cJSON_AddNumberToObject(root, "device_held_peak_bytes", (double)held_peak);
        cJSON_AddNumberToObject(root, "device_used_peak_bytes", (double)used_peak);
    }
    if (!rc && json) {
        // rank 0 writes; the others learn whether it could
        if ((rc = lssar_dist_agree(lssar_dist_rank() == 0 ? lssar_write_json(json, root) : 0)))
            fprintf(stderr, "lssar eval: --json: %s\n", lssar_errmsg());
    }
    cJSON_Delete(root);
    shard_close(&s);
    gpt_free(m);
    return rc ? 1 : 0;
}
