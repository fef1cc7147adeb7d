// tasks.c - the orbits stages simulate, eval, probe and oracle as library functions (tasks.h);
// newton is in newton.c. Moved out of src/cli/cmd_orbits*.c so that `lssar orbits run` calls them.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cJSON.h>
#include "core/dist.h"
#include "core/json.h"
#include "core/util.h"
#include "lssar.h"
#include "model/checkpoint.h"
#include "orbits/probe.h"
#include "orbits/tasks.h"

// lssar_fail with the previous failure's message after `what` (copied first: it is the buffer written).
static int refail(int code, const char *what) {
    char prev[1024];
    snprintf(prev, sizeof prev, "%s", lssar_errmsg());
    return lssar_fail(code, "%s: %s", what, prev);
}

/* ------------------------------------------------------------------ simulate */
int orb_simulate_run(const char *dir, const lssar_orb_opts *o, FILE *report) {
    lssar_orb_stats st;
    int rc = lssar_orbits_simulate(dir, o, &st);
    if (rc) return rc;
    if (report && lssar_dist_rank() == 0)   // under mpirun, rank 0 speaks for the job
        fprintf(report, "lssar orbits simulate: %lld systems (%lld rows) in %.2f s = %.3g rows/s -> "
                "%s/%s_*.bin%s\n", (long long)o->systems, (long long)st.rows, st.seconds,
                st.seconds > 0 ? st.rows / st.seconds : 0.0, dir, o->split, o->state ? " (+ state)" : "");
    return 0;
}

/* ---------------------------------------------------------------------- eval */
void orb_eval_defaults(orb_eval_opts *o) {
    memset(o, 0, sizeof *o);
    o->split = "val";
    o->seq = LSSAR_ORB_ROWS - 1;
    o->batch = 4;
    o->report = stdout;
}

int orb_eval_run(const orb_eval_opts *o, orb_eval_result *r) {
    if (o->batch < 1) return lssar_fail(LSSAR_E_ARG, "--batch must be >= 1, got %d", o->batch);
    if (o->seq < 1 || o->seq > LSSAR_ORB_ROWS - 1)
        return lssar_fail(LSSAR_E_ARG, "--seq must be 1..%d, got %d", LSSAR_ORB_ROWS - 1, o->seq);
    gpt *m = NULL;
    int rc = ckpt_load_model(o->model, &(ckpt_load_opts){.device = o->device}, &m, NULL);
    if (rc) return rc;
    const gpt_config *cfg = gpt_get_config(m);
    if (cfg->pos == LSSAR_POS_LEARNED && o->seq > cfg->max_seq)
        fprintf(stderr, "lssar orbits eval: note: learned positions stop at %d; scoring rows 1..%d of each "
                "sequence\n", cfg->max_seq, cfg->max_seq);
    double t0 = lssar_now();
    rc = orb_eval_model(m, o->data, o->split, o->systems, o->seq, o->batch, o->progress, r);
    gpt_free(m);
    if (rc) return rc;
    double secs = lssar_now() - t0;
    FILE *f = o->report;
    if (f) {
        fprintf(f, "orbits eval: %s on %s/%s: %lld systems, %lld target rows (%.1f s)\n", o->model, o->data,
                o->split, (long long)r->systems, (long long)r->rows, secs);
        fprintf(f, "  all rows            loss %.4f  accuracy %.4f  both %.4f  error %.4f AU\n", r->loss,
                r->acc_channel, r->acc_both, r->err_au);
        fprintf(f, "  rows with step >= 1 (%lld):\n", (long long)r->cmp_rows);
        fprintf(f, "    model             accuracy %.4f  both %.4f  error %.4f AU\n", r->cmp_acc_channel,
                r->cmp_acc_both, r->cmp_err_au);
        fprintf(f, "    previous position accuracy %.4f  both %.4f  error %.4f AU\n", r->base_acc_channel,
                r->base_acc_both, r->base_err_au);
        fprintf(f, "    model - previous  accuracy %+.4f +- %.4f  error %+.4f +- %.4f AU (mean over systems, "
                "95%% t interval)\n", r->diff_acc, r->diff_acc_half, r->diff_err, r->diff_err_half);
        fprintf(f, "    by the target's distance from the origin:\n");
        for (int i = 0; i < ORB_EVAL_BANDS; i++) {
            char band[32];
            if (i + 1 < ORB_EVAL_BANDS)
                snprintf(band, sizeof band, "%g-%g AU", ORB_EVAL_BAND_AU[i], ORB_EVAL_BAND_AU[i + 1]);
            else snprintf(band, sizeof band, ">= %g AU", ORB_EVAL_BAND_AU[i]);
            fprintf(f, "      %-10s %6lld rows  error: model %.4f  previous position %.4f AU\n", band,
                    (long long)r->band_rows[i], r->band_err_au[i], r->band_base_err_au[i]);
        }
    }
    if (o->json) {
        cJSON *j = cJSON_CreateObject(), *cmp = cJSON_CreateObject(), *mo = cJSON_CreateObject(),
              *bo = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "model", o->model);
        cJSON_AddStringToObject(j, "data", o->data);
        cJSON_AddStringToObject(j, "split", o->split);
        cJSON_AddNumberToObject(j, "systems", (double)r->systems);
        cJSON_AddNumberToObject(j, "rows", (double)r->rows);
        cJSON_AddNumberToObject(j, "loss", r->loss);
        cJSON_AddNumberToObject(j, "accuracy", r->acc_channel);
        cJSON_AddNumberToObject(j, "accuracy_both", r->acc_both);
        cJSON_AddNumberToObject(j, "error_au", r->err_au);
        cJSON_AddNumberToObject(j, "seconds", secs);
        cJSON_AddNumberToObject(cmp, "rows", (double)r->cmp_rows);
        cJSON_AddNumberToObject(mo, "accuracy", r->cmp_acc_channel);
        cJSON_AddNumberToObject(mo, "accuracy_both", r->cmp_acc_both);
        cJSON_AddNumberToObject(mo, "error_au", r->cmp_err_au);
        cJSON_AddNumberToObject(bo, "accuracy", r->base_acc_channel);
        cJSON_AddNumberToObject(bo, "accuracy_both", r->base_acc_both);
        cJSON_AddNumberToObject(bo, "error_au", r->base_err_au);
        cJSON_AddItemToObject(cmp, "model", mo);
        cJSON_AddItemToObject(cmp, "previous_position", bo);
        cJSON *dd = cJSON_CreateObject();   // per system, then over systems
        cJSON_AddNumberToObject(dd, "accuracy", r->diff_acc);
        cJSON_AddItemToObject(dd, "accuracy_ci95_half", lssar_json_number(r->diff_acc_half));
        cJSON_AddNumberToObject(dd, "error_au", r->diff_err);
        cJSON_AddItemToObject(dd, "error_au_ci95_half", lssar_json_number(r->diff_err_half));
        cJSON_AddItemToObject(cmp, "model_minus_previous", dd);
        cJSON *bands = cJSON_AddArrayToObject(cmp, "by_radius");   // the target's distance from the origin
        for (int i = 0; i < ORB_EVAL_BANDS; i++) {
            cJSON *bd = cJSON_CreateObject();
            cJSON_AddNumberToObject(bd, "from_au", ORB_EVAL_BAND_AU[i]);
            cJSON_AddItemToObject(bd, "to_au",
                                  i + 1 < ORB_EVAL_BANDS ? cJSON_CreateNumber(ORB_EVAL_BAND_AU[i + 1])
                                                         : cJSON_CreateNull());
            cJSON_AddNumberToObject(bd, "rows", (double)r->band_rows[i]);
            cJSON_AddItemToObject(bd, "model_error_au", lssar_json_number(r->band_err_au[i]));
            cJSON_AddItemToObject(bd, "previous_error_au", lssar_json_number(r->band_base_err_au[i]));
            cJSON_AddItemToArray(bands, bd);
        }
        cJSON_AddItemToObject(j, "compared", cmp);
        rc = lssar_write_json(o->json, j);
        cJSON_Delete(j);
    }
    return rc;
}

/* ----------------------------------------------------------- the force set */
int orb_force_open(const char *data, const char *split, uint64_t systems, uint64_t seed,
                   orb_state *st, orb_force_split *fs) {
    char path[4400];
    if (orb_path(path, sizeof path, data, split, "state", 0)) return lssar_fail(LSSAR_E_ARG, "path too long");
    int rc = orb_state_open(st, path);
    if (rc) {
        char prev[1024];
        snprintf(prev, sizeof prev, "%s", lssar_errmsg());
        return lssar_fail(rc, "%s\n  (the force set: `lssar orbits simulate --two-body --state "
                          "--split %s --out %s`)", prev, split, data);
    }
    if ((rc = orb_force_split_make(st, (int64_t)systems, 2, seed, fs))) {
        rc = refail(rc, path);
        orb_state_close(st);
        return rc;
    }
    return 0;
}

/* --------------------------------------------------------------------- probe */
void orb_probe_task_defaults(orb_probe_task *o) {
    memset(o, 0, sizeof *o);
    o->split = "force";
    o->keep = 5000;
    orb_probe_defaults(&o->probe);
    o->report = stderr;
}

int orb_probe_run(const orb_probe_task *o, orb_probe_summary *r) {
    const orb_probe_opts *po = &o->probe;
    memset(r, 0, sizeof *r);
    if (po->steps < 0) return lssar_fail(LSSAR_E_ARG, "--steps must be >= 0, got %d", po->steps);
    if (po->batch < 1) return lssar_fail(LSSAR_E_ARG, "--batch must be >= 1, got %d", po->batch);
    if (!(po->lr >= 0) || !(po->head_lr >= 0))
        return lssar_fail(LSSAR_E_ARG, "--lr and --head-lr must be >= 0");
    if (o->threads > 0) omp_set_num_threads(o->threads);
    double t0 = lssar_now();
    gpt *m = NULL;
    int rc = ckpt_load_model(o->model, &(ckpt_load_opts){.device = o->device}, &m, NULL);
    if (rc) return rc;
    orb_state st;
    orb_force_split fs;
    if ((rc = orb_force_open(o->data, o->split, o->systems, po->seed, &st, &fs))) { gpt_free(m); return rc; }
    int64_t *ids = NULL, n = 0;
    double *pred = NULL, mse = NAN;
    if ((rc = orb_force_nearest(&st, &fs, NULL, (int64_t)o->keep, &ids, &n))) goto done;
    pred = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (!pred) { rc = lssar_fail(LSSAR_E_NOMEM, "out of memory"); goto done; }
    if ((rc = orb_probe_fit_predict(m, o->data, o->split, &st, &fs, po, ids, n, pred, &mse))) goto done;
    double secs = lssar_now() - t0;
    cJSON *j = cJSON_CreateObject();  // OUT/probe.json
    cJSON_AddStringToObject(j, "model", o->model);
    cJSON_AddStringToObject(j, "data", o->data);
    cJSON_AddNumberToObject(j, "steps", po->steps);
    cJSON_AddNumberToObject(j, "batch", po->batch);
    cJSON_AddNumberToObject(j, "lr", po->lr);
    cJSON_AddNumberToObject(j, "head_lr", po->head_lr);
    cJSON_AddStringToObject(j, "target", po->target_log ? "log" : "raw");
    cJSON_AddNumberToObject(j, "final_train_mse", mse);
    cJSON_AddNumberToObject(j, "seconds", secs);
    double lerr;
    if ((rc = orb_forces_finish(o->out, &st, &fs, ids, pred, n, j, &lerr))) goto done;
    r->rows = n;
    r->final_train_mse = mse;
    r->mean_abs_log10_error = lerr;
    r->seconds = secs;
    if (o->report)
        fprintf(o->report, "lssar orbits probe: %d steps, final train mse %.4f (%s target); %lld test rows: "
                "mean |log10 F_pred - log10 F_true| = %.3f; %.1f s -> %s/forces.csv\n",
                po->steps, mse, po->target_log ? "log" : "raw", (long long)n, lerr, secs, o->out);
done:
    free(pred); free(ids);
    orb_force_split_free(&fs);
    orb_state_close(&st);
    gpt_free(m);
    return rc;
}

/* -------------------------------------------------------------------- oracle */
void orb_oracle_defaults(orb_oracle_opts *o) {
    memset(o, 0, sizeof *o);
    o->split = "force";
    o->keep = 5000;
    o->k = 2;
    o->report = stderr;
}

int orb_oracle_run(const orb_oracle_opts *o, orb_probe_summary *r) {
    memset(r, 0, sizeof *r);
    if (o->k < 1 || o->k > 16) return lssar_fail(LSSAR_E_ARG, "--k must be 1..16, got %d", o->k);
    if (o->threads > 0) omp_set_num_threads(o->threads);
    double t0 = lssar_now();
    orb_state st;
    orb_force_split fs;
    int rc = orb_force_open(o->data, o->split, o->systems, o->seed, &st, &fs);
    if (rc) return rc;
    orb_kdtree *tree = NULL;
    int64_t *ids = NULL, n = 0;
    double *pred = NULL;
    if ((rc = orb_force_tree(&st, &fs, &tree)) ||
        (rc = orb_force_nearest(&st, &fs, tree, (int64_t)o->keep, &ids, &n)))
        goto done;
    pred = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    if (!pred) { rc = lssar_fail(LSSAR_E_NOMEM, "out of memory"); goto done; }
    if ((rc = orb_knn_predict(&st, &fs, tree, o->k, ids, n, pred))) goto done;
    cJSON *j = cJSON_CreateObject();  // OUT/probe.json
    cJSON_AddStringToObject(j, "model", "k-NN oracle");
    cJSON_AddNumberToObject(j, "k", o->k);
    double lerr;
    if ((rc = orb_forces_finish(o->out, &st, &fs, ids, pred, n, j, &lerr))) goto done;
    r->rows = n;
    r->final_train_mse = NAN;
    r->mean_abs_log10_error = lerr;
    r->seconds = lssar_now() - t0;
    if (o->report)
        fprintf(o->report, "lssar orbits oracle: %d-NN on %lld labelled rows -> %lld test rows (of %lld), "
                "mean |log10 F_pred - log10 F_true| = %.3f, in %.2f s -> %s/forces.csv\n", o->k,
                (long long)fs.ntrain, (long long)n, (long long)fs.ntest, lerr, r->seconds, o->out);
done:
    free(pred); free(ids);
    orb_kd_free(tree);
    orb_force_split_free(&fs);
    orb_state_close(&st);
    return rc;
}
