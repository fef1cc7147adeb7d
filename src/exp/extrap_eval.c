// extrap_eval.c - one run's evaluation at every length and its downstream scores, each read from
// its cache when it holds this call's key; see extrap_run.h.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "exp/extrap_run.h"
#include "exp/passkey.h"
#include "model/checkpoint.h"

// How a run's model is loaded: a zero-shot run (eval_only) switches the kind.
static ckpt_load_opts load_opts(const extrap *x, const extrap_run *r) {
    ckpt_load_opts o = {.device = x->base.model.device};
    if (r->eval_only) { o.set_attn = 1; o.attn = r->attn; o.p = r->p; }
    return o;
}

// The progress line of length f, once evaluated (the text task's also when that failed).
static void length_done(const extrap *x, lssar_progress *pg, const extrap_run *r, int f) {
    char extra[64];
    snprintf(extra, sizeof extra, "T=%d %s=%.4f", x->seqs[f], x->o->mqar ? "acc" : "loss", r->loss[f]);
    if (!x->base.quiet) lssar_progress_update(pg, f + 1, extra);
}

// mqar at length f: the accuracy of the values after the queries, with its Wilson interval.
static int eval_mqar(const extrap *x, gpt *g, extrap_run *r, int f, lssar_progress *pg) {
    const extrap_opts *o = x->o;
    long c = 0, tot = 0;
    int rc = mqar_eval(g, &o->mqar_task, x->seqs[f], o->mqar_eval, o->eval_batch, x->base.seed + 7 + f, &c,
                       &tot);
    if (rc) return rc;
    r->loss[f] = tot ? (double)c / tot : NAN;
    wilson_interval((int)c, (int)tot, 1.96, &r->lo[f], &r->hi[f]);
    r->windows[f] = (int)tot;
    length_done(x, pg, r, f);
    return 0;
}

// Mean the T per-position losses into bins of extrap_pos_bin_width(T) positions.
static void bin_positions(extrap_run *r, const double *pp, int T) {
    const int w = extrap_pos_bin_width(T);
    r->pos_bins = (T + w - 1) / w;
    for (int b = 0; b < r->pos_bins; b++) {
        double s = 0;
        int n = 0;
        for (int t = b * w; t < T && t < (b + 1) * w; t++, n++) s += pp[t];
        r->pos_loss[b] = s / n;
    }
}

// text at length f: the mean loss over the held-out windows, each window's loss into *win; the
// longest windows also give the loss at each position.
static int eval_text(const extrap *x, gpt *g, extrap_run *r, int f, double **win, lssar_progress *pg) {
    const int T = x->seqs[f], maxw = x->o->max_windows;
    size_t *st = NULL;
    double *pp = NULL;
    int nw = 0;
    int rc = x->have_docs ? exp_doc_windows(&x->docs, T, maxw, &st, &nw)
                          : exp_plain_windows(x->val.n, T, maxw, &st, &nw);
    if (rc) return rc;
    r->windows[f] = nw;
    if (nw > 0 && !(*win = malloc((size_t)nw * sizeof **win)))
        rc = lssar_fail(LSSAR_E_NOMEM, "out of memory");
    if (nw > 0 && !rc && f == x->nf - 1 && !(pp = malloc((size_t)T * sizeof *pp)))
        rc = lssar_fail(LSSAR_E_NOMEM, "out of memory");
    if (nw > 0 && !rc)
        rc = exp_eval_windows(g, &x->val, st, nw, T, x->o->eval_batch, &r->loss[f], &r->se[f], *win, pp);
    if (pp && !rc) bin_positions(r, pp, T);
    if (nw <= 0) fprintf(stderr, "extrapolate: note: no held-out document has %d tokens; T = %d is left "
                                 "empty\n", T + 1, T);
    free(pp);
    free(st);
    length_done(x, pg, r, f);
    return rc;
}

// Every length with the run's model, then the cache.
static int eval_lengths(const extrap *x, gpt *g, extrap_run *r, const char *cp, const char *key) {
    double *win[EXTRAP_MAX_LENGTHS] = {0};   // the per-window losses of each length, for the cache
    int rc = 0;
    r->pos_bins = 0;
    lssar_progress pg;
    lssar_progress_start(&pg, r->name, "lengths", x->nf);
    for (int f = 0; f < x->nf && !rc; f++) {
        r->loss[f] = r->se[f] = r->lo[f] = r->hi[f] = NAN;
        rc = x->o->mqar ? eval_mqar(x, g, r, f, &pg) : eval_text(x, g, r, f, &win[f], &pg);
    }
    if (!rc) rc = extrap_cache_save(cp, key, x, r, win);
    for (int f = 0; f < x->nf; f++) free(win[f]);
    return rc;
}

int extrap_eval_run(extrap *x, extrap_run *r) {
    char dir[4200], cp[4400], key[1024];
    snprintf(dir, sizeof dir, "%s/%s", x->o->out, r->src);
    gpt *g = NULL;
    ckpt_load_opts lo = load_opts(x, r);
    int rc = ckpt_load_model(dir, &lo, &g, &r->step);
    if (rc) return rc;
    extrap_cache_path(cp, sizeof cp, x->o->out, r, "extrap");
    extrap_cache_key(key, sizeof key, x, r);
    if (extrap_cache_load(cp, key, r, x->nf, x->o->mqar, NULL)) {
        if (!x->base.quiet) fprintf(stderr, "extrapolate: %s: evaluation cached in %s\n", r->name, cp);
    } else rc = eval_lengths(x, g, r, cp, key);
    gpt_free(g);
    return rc;
}

int extrap_downstream_run(extrap *x, extrap_run *r) {
    const extrap_opts *o = x->o;
    if (!o->ntasks) return 0;
    char dir[4200], cp[4400], key[8192];
    snprintf(dir, sizeof dir, "%s/%s", o->out, r->src);
    extrap_cache_path(cp, sizeof cp, o->out, r, "downstream");
    extrap_ds_cache_key(key, sizeof key, x, r);
    if (extrap_ds_cache_load(cp, key, r, o->ntasks)) {
        if (!x->base.quiet)
            fprintf(stderr, "extrapolate: %s: downstream results cached in %s\n", r->name, cp);
        return 0;
    }
    gpt *g = NULL;
    ckpt_load_opts lo = load_opts(x, r);
    int rc = ckpt_load_model(dir, &lo, &g, NULL);
    if (rc) return rc;
    ds_opts dopt = {o->task_limit, o->eval_batch > 16 ? o->eval_batch : 16, 0, x->base.quiet, NULL};
    for (int t = 0; t < o->ntasks && !rc; t++)
        rc = ds_run_task(g, x->tok, o->tasks[t].name, o->tasks[t].path, &dopt, &r->ds[t]);
    gpt_free(g);
    if (!rc) extrap_ds_cache_save(cp, key, r, o->ntasks);
    return rc;
}
