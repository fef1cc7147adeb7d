// extrap_plan.c - the run list of an extrapolation: a run per --attn kind and power, the lssa->lssar
// evaluation, every seed; see extrap_run.h.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "attn/attn.h"
#include "exp/extrap_run.h"

// One entry of --attn: a kind, optionally with its re-weighting power as a run folder names it
// ("lssar-p3", "softmax+rw-p15"): *pinned = 1 and *p set then.
static int parse_run(const char *tok, lssar_attn_kind *kind, float *p, int *pinned) {
    char name[128];
    const char *dash = strrchr(tok, '-');
    *pinned = dash && dash[1] == 'p' && dash[2];
    snprintf(name, sizeof name, "%.*s", *pinned ? (int)(dash - tok) : (int)strlen(tok), tok);
    if (lssar_attn_parse(name, kind)) return lssar_fail(LSSAR_E_ARG, "--attn: %s", lssar_errmsg());
    if (!*pinned) return 0;
    char *end;
    double v = strtod(dash + 2, &end);
    if (*end || !(v > 0) || !isfinite(v))
        return lssar_fail(LSSAR_E_ARG, "--attn: '%s': the power after -p must be a number > 0 (e.g. "
                                       "lssar-p15)", tok);
    lssar_attn_stages st;
    lssar_attn_stages_of(*kind, &st);
    if (!st.reweight)
        return lssar_fail(LSSAR_E_ARG, "--attn: '%s': %s does not re-weight, so it takes no power; drop -p%s",
                          tok, name, dash + 2);
    *p = (float)v;
    return 0;
}

// The runs of one --attn entry: one, or one per power for a kind that re-weights and pins none.
static int add_kind(extrap *x, const char *tok, int *have_lssa) {
    const extrap_opts *o = x->o;
    lssar_attn_kind a;
    float pin = 0;
    int pinned, rc = parse_run(tok, &a, &pin, &pinned);
    if (rc) return rc;
    const int rw = attn_reweights(a), reps = rw && !pinned ? o->npowers : 1;
    for (int k = 0; k < reps; k++) {
        if (x->nr == EXTRAP_MAX_GROUPS)
            return lssar_fail(LSSAR_E_ARG, "at most %d runs per seed (the kinds of --attn, one per --lssar-p "
                                           "power for those that re-weight)", EXTRAP_MAX_GROUPS);
        extrap_run *r = &x->runs[x->nr++];
        r->attn = a;
        r->p = !rw ? 15.0f : pinned ? pin : (float)o->powers[k];
        if (rw) snprintf(r->name, sizeof r->name, "%s-p%g", lssar_attn_name(a), (double)r->p);
        else snprintf(r->name, sizeof r->name, "%s", lssar_attn_name(a));
        snprintf(r->src, sizeof r->src, "%s", r->name);
    }
    if (a == LSSAR_ATTN_LSSA) *have_lssa = 1;
    return 0;
}

// Seed indices 1 .. seeds - 1: the first seed's nb runs again, each in the folder RUN-sK.
static void add_seeds(extrap_run *runs, int nb, int seeds) {
    for (int k = 1; k < seeds; k++)
        for (int b = 0; b < nb; b++) {
            extrap_run *r = &runs[k * nb + b];
            *r = runs[b];
            r->seed_ix = k;
            snprintf(r->name, sizeof r->name, "%s-s%d", runs[b].name, k);
            snprintf(r->src, sizeof r->src, "%s-s%d", runs[b].src, k);
        }
}

// The first seed's list (nb runs), then the same list for each further seed index K, named
// RUN-sK (seed index 0 keeps the plain names, so folders of one-seed calls stay valid).
int extrap_plan(extrap *x) {
    const extrap_opts *o = x->o;
    if (!(x->runs = calloc(EXTRAP_MAX_RUNS, sizeof *x->runs)))
        return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    int have_lssa = 0, rc = 0;
    char list[1024], *save = NULL;
    snprintf(list, sizeof list, "%s", o->attn);
    for (char *tok = strtok_r(list, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save))
        rc = add_kind(x, tok, &have_lssa);
    if (rc) return rc;
    // the paper's "fine-tuning-free" claim: the lssa model with the re-weighting switched on
    if (have_lssa && !o->no_zeroshot && x->nr < EXTRAP_MAX_GROUPS) {
        extrap_run *r = &x->runs[x->nr++];
        r->attn = LSSAR_ATTN_LSSAR;
        r->p = (float)o->powers[0];
        r->eval_only = 1;
        snprintf(r->name, sizeof r->name, "lssa+lssar-p%g", o->powers[0]);
        snprintf(r->src, sizeof r->src, "lssa");
    }
    const int nb = x->nb = x->nr;
    if (nb * o->seeds > EXTRAP_MAX_RUNS)
        return lssar_fail(LSSAR_E_ARG, "%d runs x --seeds %d is more than %d runs", nb, o->seeds,
                          EXTRAP_MAX_RUNS);
    for (int b = 0; b < nb; b++) x->runs[b].group = b;
    add_seeds(x->runs, nb, o->seeds);
    x->nr = nb * o->seeds;
    return 0;
}
