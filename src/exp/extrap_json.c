// extrap_json.c - OUT/results.json of an extrapolation: the call, each group over its seeds, each
// run; see extrap_run.h (the keys are listed in `lssar extrapolate --help`).
#include <math.h>
#include <stdio.h>
#include "attn/attn.h"
#include "core/json.h"
#include "exp/common.h"
#include "exp/extrap_run.h"

static cJSON *pair_or_null(double lo, double hi) {
    if (!isfinite(lo) || !isfinite(hi)) return cJSON_CreateNull();
    cJSON *a = cJSON_CreateArray();
    cJSON_AddItemToArray(a, cJSON_CreateNumber(lo));
    cJSON_AddItemToArray(a, cJSON_CreateNumber(hi));
    return a;
}

// {"mean", "ci95", "excludes_zero"}: a difference to softmax with its interval [lo, hi].
static cJSON *diff_json(cJSON *parent, double mean, double lo, double hi) {
    cJSON *d = cJSON_AddObjectToObject(parent, "diff_vs_softmax");
    cJSON_AddItemToObject(d, "mean", lssar_json_number(mean));
    cJSON_AddItemToObject(d, "ci95", pair_or_null(lo, hi));
    cJSON_AddBoolToObject(d, "excludes_zero", lo > 0 || hi < 0);
    return d;
}

// The call: task, data or mqar task, the training configuration, the kind of interval.
static void add_call(cJSON *root, const extrap *x) {
    const extrap_opts *o = x->o;
    const train_opts *t = &x->base;
    cJSON_AddStringToObject(root, "task", o->mqar ? "mqar" : "text");
    if (o->ntasks) {
        cJSON *dt = cJSON_AddArrayToObject(root, "downstream_tasks");
        for (int i = 0; i < o->ntasks; i++) cJSON_AddItemToArray(dt, cJSON_CreateString(o->tasks[i].name));
        cJSON_AddNumberToObject(root, "downstream_limit", o->task_limit);
    }
    if (!o->mqar) {
        cJSON_AddStringToObject(root, "data", o->data);
        cJSON_AddStringToObject(root, "manifest_sha256", x->hash);
        cJSON_AddNumberToObject(root, "max_windows", o->max_windows);
    } else {
        cJSON_AddNumberToObject(root, "pairs", o->mqar_task.pairs);
        cJSON_AddNumberToObject(root, "keys", o->mqar_task.keys);
        cJSON_AddNumberToObject(root, "values", o->mqar_task.values);
        cJSON_AddNumberToObject(root, "test_sequences", o->mqar_eval);
    }
    cJSON *cfg = cJSON_AddObjectToObject(root, "config");
    const gpt_config *mc = &t->model;
    cJSON_AddNumberToObject(cfg, "layers", mc->layers); cJSON_AddNumberToObject(cfg, "heads", mc->heads);
    cJSON_AddNumberToObject(cfg, "dim", mc->dim);
    cJSON_AddStringToObject(cfg, "pos", lssar_pos_name(mc->pos));
    cJSON_AddNumberToObject(cfg, "seq", t->seq); cJSON_AddNumberToObject(cfg, "batch", t->batch);
    cJSON_AddNumberToObject(cfg, "accum", t->accum); cJSON_AddNumberToObject(cfg, "steps", t->steps);
    cJSON_AddNumberToObject(cfg, "lr", t->lr); cJSON_AddNumberToObject(cfg, "seed", (double)t->seed);
    cJSON_AddNumberToObject(cfg, "align", t->align);
    cJSON_AddNumberToObject(cfg, "passkey_mix", t->passkey_mix);
    cJSON_AddNumberToObject(cfg, "seeds", o->seeds);
    cJSON_AddNumberToObject(root, "seeds", o->seeds);
    const char *iv = "one seed: interval over windows only (mean +- 1.96 standard errors; differences "
                     "paired over identical windows)";
    if (o->seeds >= 2)
        iv = "95% Student t interval over seeds; differences paired by seed index over identical windows";
    else if (o->mqar) iv = "one seed: 95% Wilson interval over the queries; no interval for differences";
    cJSON_AddStringToObject(root, "interval", iv);
}

// Group b at length f: the mean over seeds, its interval, each seed's value, the difference to softmax.
static cJSON *group_length(const extrap *x, const extrap_stats *st, int b, int f) {
    const int seeds = x->o->seeds, nb = x->nb;
    const extrap_gstat *g = &st->gs[b * x->nf + f];
    cJSON *e = cJSON_CreateObject();
    cJSON_AddNumberToObject(e, "seq", x->seqs[f]);
    cJSON_AddItemToObject(e, "mean", lssar_json_number(g->mean));
    cJSON_AddItemToObject(e, "ci95", pair_or_null(g->lo, g->hi));
    cJSON *ps = cJSON_AddArrayToObject(e, "per_seed");
    for (int k = 0; k < seeds; k++) cJSON_AddItemToArray(ps, lssar_json_number(st->cr[k * nb + b].loss[f]));
    cJSON_AddNumberToObject(e, x->o->mqar ? "queries" : "windows", x->runs[b].windows[f]);
    if (st->sg >= 0) {
        cJSON *dp = cJSON_AddArrayToObject(diff_json(e, g->dmean, g->dlo, g->dhi), "per_seed");
        for (int k = 0; k < seeds; k++) cJSON_AddItemToArray(dp, lssar_json_number(g->dseed[k]));
    }
    return e;
}

// Group b's per-position curve: {"seq", "bin", "start", "loss"}.
static void add_positions(cJSON *e, const extrap_stats *st, int b) {
    cJSON *pp = cJSON_AddObjectToObject(e, "per_position");
    cJSON_AddNumberToObject(pp, "seq", st->tmax);
    cJSON_AddNumberToObject(pp, "bin", st->pbw);
    cJSON *ps = cJSON_AddArrayToObject(pp, "start"), *pl = cJSON_AddArrayToObject(pp, "loss");
    for (int i = 0; i < st->gbins[b]; i++) {
        cJSON_AddItemToArray(ps, cJSON_CreateNumber(i * st->pbw));
        cJSON_AddItemToArray(pl, lssar_json_number(st->gpos[b][i]));
    }
}

// Group b's downstream scores pooled over the seeds.
static void add_downstream(cJSON *e, const extrap *x, const extrap_stats *st, int b) {
    cJSON *da = cJSON_AddArrayToObject(e, "downstream");
    for (int t = 0; t < x->o->ntasks; t++) {
        const extrap_dsstat s = st->dss[b][t];
        cJSON *y = cJSON_CreateObject();
        cJSON_AddStringToObject(y, "task", x->o->tasks[t].name);
        cJSON_AddStringToObject(y, "metric", x->runs[b].ds[t].lambada ? "acc" : "acc_norm");
        cJSON_AddItemToObject(y, "mean", lssar_json_number(s.mean));
        cJSON_AddItemToObject(y, "ci95", pair_or_null(s.mean - s.half, s.mean + s.half));
        cJSON *ps = cJSON_AddArrayToObject(y, "per_seed");
        for (int k = 0; k < x->o->seeds; k++)
            cJSON_AddItemToArray(ps, lssar_json_number(extrap_ds_score(&x->runs[k * x->nb + b].ds[t])));
        if (st->sg >= 0) diff_json(y, s.dmean, s.dmean - s.dhalf, s.dmean + s.dhalf);
        cJSON_AddItemToArray(da, y);
    }
}

// {"name", "attn", "p"}: a run's name and the kind it evaluates (the power of one that re-weights).
static cJSON *kind_json(const extrap_run *r) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "name", r->name);
    cJSON_AddStringToObject(e, "attn", lssar_attn_name(r->attn));
    if (attn_reweights(r->attn)) cJSON_AddNumberToObject(e, "p", r->p);
    return e;
}

// Group b: one run of the first seed's list over all seeds.
static cJSON *group_json(const extrap *x, const extrap_stats *st, int b) {
    const extrap_run *r = &x->runs[b];
    cJSON *e = kind_json(r);
    cJSON_AddBoolToObject(e, "eval_only", r->eval_only);
    cJSON *rn = cJSON_AddArrayToObject(e, "runs"), *sd = cJSON_AddArrayToObject(e, "seeds");
    for (int k = 0; k < x->o->seeds; k++) {
        cJSON_AddItemToArray(rn, cJSON_CreateString(x->runs[k * x->nb + b].name));
        cJSON_AddItemToArray(sd, cJSON_CreateNumber((double)(x->base.seed + (uint64_t)k)));
    }
    cJSON *res = cJSON_AddArrayToObject(e, "results");
    for (int f = 0; f < x->nf; f++) cJSON_AddItemToArray(res, group_length(x, st, b, f));
    if (st->gbins[b] > 0) add_positions(e, st, b);
    if (x->o->ntasks && x->o->seeds >= 2) add_downstream(e, x, st, b);
    return e;
}

// Run i as it was trained and evaluated.
static cJSON *run_json(const extrap *x, const extrap_stats *st, int i) {
    const extrap_run *r = &x->runs[i], *c = &st->cr[i];
    cJSON *e = kind_json(r);
    cJSON_AddStringToObject(e, "trained_attn", r->eval_only ? "lssa" : lssar_attn_name(r->attn));
    cJSON_AddBoolToObject(e, "eval_only", r->eval_only);
    cJSON_AddStringToObject(e, "model", r->src);
    cJSON_AddStringToObject(e, "group", x->runs[r->group].name);
    cJSON_AddNumberToObject(e, "seed", (double)(x->base.seed + (uint64_t)r->seed_ix));
    cJSON_AddNumberToObject(e, "train_seq", x->base.seq);
    cJSON_AddNumberToObject(e, "steps", (double)r->step);
    cJSON_AddItemToObject(e, "train_seconds", lssar_json_number(r->train_s));
    char md[4200];
    snprintf(md, sizeof md, "%s/%s", x->o->out, r->src);
    cJSON_AddNumberToObject(e, "passkey_mix", exp_passkey_mix(md));
    cJSON_AddItemToObject(e, "results", extrap_results_json(r, x->seqs, x->nf, x->o->mqar));
    if (!x->o->mqar && c->pos_bins > 0) {
        cJSON *pl = cJSON_AddArrayToObject(e, "per_position");
        for (int b = 0; b < c->pos_bins; b++) cJSON_AddItemToArray(pl, lssar_json_number(c->pos_loss[b]));
    }
    if (x->o->ntasks) {
        cJSON *da = cJSON_AddArrayToObject(e, "downstream");
        for (int t = 0; t < x->o->ntasks; t++) cJSON_AddItemToArray(da, ds_result_json(&r->ds[t]));
    }
    return e;
}

int extrap_write_json(const extrap *x, const extrap_stats *st) {
    cJSON *root = cJSON_CreateObject();
    add_call(root, x);
    cJSON *ga = cJSON_AddArrayToObject(root, "groups");
    for (int b = 0; b < x->nb; b++) cJSON_AddItemToArray(ga, group_json(x, st, b));
    cJSON *ra = cJSON_AddArrayToObject(root, "runs");
    for (int i = 0; i < x->nr; i++) cJSON_AddItemToArray(ra, run_json(x, st, i));
    char path[4200];
    snprintf(path, sizeof path, "%s/results.json", x->o->out);
    int rc = lssar_write_json(path, root);
    cJSON_Delete(root);
    return rc;
}
