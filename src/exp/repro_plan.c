// repro_plan.c - the plan of `lssar reproduce`: every job an ordinary lssar command (repro.h).
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "exp/repro.h"
#include "core/util.h"
#include "exp/common.h"

const repro_kind REPRO_KINDS[REPRO_NKINDS] = {
    {.attn = "softmax", .p = 0, .run = "softmax"},
    {.attn = "ssmax", .p = 0, .run = "ssmax"},
    {.attn = "sigmoid", .p = 0, .run = "sigmoid"},
    {.attn = "relu", .p = 0, .run = "relu"},
    {.attn = "lssa", .p = 15, .run = "lssa"},   // also scored with LSSAR re-weighting at evaluation only
    {.attn = "lssar", .p = 3, .run = "lssar-p3"},
    {.attn = "lssar", .p = 15, .run = "lssar-p15"},
};

/* The candidate causes of the head-size effect (issue 33), each one change to a model of head size
   D at the width of section 1, softmax and/or lssar p = 15:
   - the RoPE pairs that turn slower than the training length (D = 16 has 5 of 8 at base 10000,
     D = 64 has 21 of 32; base 38 leaves D = 64 with 5);
   - the ln(D) factor of the temperature alone (the other D's ln);
   - the spread of unrelated scores, ln(D) ln(n) cos with sd(cos) ~ 1/sqrt(D): a temperature D' with
     ln(D')/sqrt(D) equal to the other head size's ln(D)/sqrt(D). */
const repro_cause REPRO_CAUSES[REPRO_NCAUSES] = {
    {.name = "d64-rope38", .what = "D = 64, RoPE base 38: 5 pairs turn slower than T, as at D = 16",
     .D = 64, .rope_base = 38, .attn = "softmax,lssar"},
    {.name = "d16-temp64", .what = "D = 16 with D = 64's temperature, ln(64) ln(n)",
     .D = 16, .temp_d = 64, .attn = "lssar"},
    {.name = "d64-temp16", .what = "D = 64 with D = 16's temperature, ln(16) ln(n)",
     .D = 64, .temp_d = 16, .attn = "lssar"},
    {.name = "d16-temp8", .what = "D = 16 with D = 64's score spread: ln(8)/4 = ln(64)/8",
     .D = 16, .temp_d = 8, .attn = "lssar"},
    {.name = "d64-temp256", .what = "D = 64 with D = 16's score spread: ln(256)/8 = ln(16)/4",
     .D = 64, .temp_d = 256, .attn = "lssar"},
};

/* The ablation (issue 34): which stage of LSSAR carries the flat loss. Each run changes one stage
   of its neighbour, at the head size of section 1, to the sweep's lengths. */
const repro_ablation REPRO_ABLATION[REPRO_NABLATION] = {
    {"softmax", "the baseline: dot score, exp, l1"},
    {"softmax+cos", "+ QK normalisation with the length temperature ln(D) ln(n)"},
    {"softmax+cos+rw-p15", "+ the re-weighting, p = 15"},
    {"softmax+rw-p15", "softmax + the re-weighting, p = 15 (no QK normalisation)"},
    {"ssmax", "SSMax: ssmax score s_h ln(n) q.k / sqrt(D), exp, l1"},
    {"ssmax+rw-p15", "SSMax + the re-weighting, p = 15"},
    {"lssa", "LSSA: cos score, softplus, l1"},
    {"lssar-p1", "LSSAR p = 1"}, {"lssar-p3", "LSSAR p = 3"}, {"lssar-p7", "LSSAR p = 7"},
    {"lssar-p15", "LSSAR p = 15 (the paper)"}, {"lssar-p31", "LSSAR p = 31"},
};

int repro_ints(const char *s, int *out, int max) {
    double v[64];
    int n = exp_parse_doubles(s, v, max < 64 ? max : 64);   // the scale table's lists are valid
    for (int i = 0; i < n; i++) out[i] = (int)v[i];
    return n > 0 ? n : 0;
}

void repro_zeroshot_label(char *buf, size_t cap) {
    snprintf(buf, cap, "lssa+lssar-p%d", REPRO_KINDS[REPRO_LSSA].p);
}

typedef struct {
    job_plan *p;
    const repro_scale *sc;
    const char *out, *data;
    int data_job[1], nd;      // the data job the training jobs wait for (nd = 0: none)
} planner;

static void add_model_flags(args_vec *a, int layers, int heads, int dim, int seq, int batch, int steps,
                            int warmup, float lr) {
    args_add(a, "--layers"); args_add(a, "%d", layers); args_add(a, "--heads"); args_add(a, "%d", heads);
    args_add(a, "--dim"); args_add(a, "%d", dim); args_add(a, "--seq"); args_add(a, "%d", seq);
    args_add(a, "--batch"); args_add(a, "%d", batch); args_add(a, "--steps"); args_add(a, "%d", steps);
    args_add(a, "--warmup"); args_add(a, "%d", warmup); args_add(a, "--lr"); args_add(a, "%g", (double)lr);
    args_add(a, "--seed"); args_add(a, "1337"); args_add(a, "--threads"); args_add(a, "1");
}

// One `lssar extrapolate` into OUT/DIR of the kinds attn (with --lssar-p lssar_p unless NULL) at
// `heads` heads and width `dim`, evaluated at `factors`; passkey selects the passkey models (their
// own sizes). Jobs of one kind share OUT/DIR with the other kinds: only the gathering call (plot)
// draws.
static void extrapolate_args(const planner *pl, args_vec *a, const char *dir, const char *attn,
                             const char *lssar_p, int plot, int heads, int dim, const char *factors,
                             int passkey) {
    const repro_scale *sc = pl->sc;
    args_add(a, "extrapolate"); args_add(a, "--data"); args_add(a, "%s", pl->data);
    args_add(a, "--out"); args_add(a, "%s/%s", pl->out, dir);
    args_add(a, "--attn"); args_add(a, "%s", attn);
    if (lssar_p) { args_add(a, "--lssar-p"); args_add(a, "%s", lssar_p); }
    if (!plot) args_add(a, "--no-plot");
    if (passkey) {
        add_model_flags(a, sc->p_layers, sc->p_heads, sc->p_dim, sc->p_seq, sc->p_batch, sc->p_steps,
                        sc->p_warmup, sc->p_lr);
        args_add(a, "--passkey-mix"); args_add(a, "%g", (double)sc->p_mix);
        if (sc->p_short) args_add(a, "--passkey-short");
        args_add(a, "--factors"); args_add(a, "1"); args_add(a, "--seeds"); args_add(a, "%d", sc->p_seeds);
    } else {
        add_model_flags(a, sc->x_layers, heads, dim, sc->x_seq, sc->x_batch, sc->x_steps, sc->x_warmup,
                        sc->x_lr);
        args_add(a, "--factors"); args_add(a, "%s", factors);
        args_add(a, "--seeds"); args_add(a, "%d", sc->seeds);
    }
    args_add(a, "--max-windows"); args_add(a, "%d", sc->x_windows); args_add(a, "--quiet");
}

// The comparison of every kind into OUT/DIR: one job per kind, then the gathering call; returns
// the gathering job; the jobs are PREFIX/RUN and PREFIX/all. passkey: the passkey models (their
// jobs need nothing but the data).
static int kinds_jobs(planner *pl, const char *dir, const char *prefix, int heads, int dim,
                      const char *factors, int passkey, double cost, int *per_kind) {
    args_vec a = {0};
    char name[64], p[16];
    for (int k = 0; k < REPRO_NKINDS; k++) {
        snprintf(p, sizeof p, "%d", REPRO_KINDS[k].p);
        extrapolate_args(pl, &a, dir, REPRO_KINDS[k].attn, REPRO_KINDS[k].p ? p : NULL, 0, heads, dim,
                         factors, passkey);
        snprintf(name, sizeof name, "%s/%s", prefix, REPRO_KINDS[k].run);
        per_kind[k] = jobs_add(pl->p, name, cost * (k == REPRO_LSSA ? 1.2 : 1), pl->data_job, pl->nd, &a);
    }
    extrapolate_args(pl, &a, dir, "softmax,ssmax,sigmoid,relu,lssa,lssar", "15,3", 1, heads, dim, factors,
                     passkey);
    snprintf(name, sizeof name, "%s/all", prefix);
    return jobs_add(pl->p, name, 10, per_kind, REPRO_NKINDS, &a);
}

// The run folders of one run over the seeds: D/RUN,D/RUN-s1,... (comma-separated, into buf).
static void seed_list(char *buf, size_t cap, const char *out, const char *dir, const char *run, int seeds) {
    size_t k = 0;
    buf[0] = 0;
    for (int s = 0; s < seeds && k < cap; s++) {
        if (s) k += (size_t)snprintf(buf + k, cap - k, ",");
        if (k < cap)
            k += (size_t)snprintf(buf + k, cap - k, s ? "%s/%s/%s-s%d" : "%s/%s/%s", out, dir, run, s);
    }
}

// `lssar attnstats` over every kind's models of OUT/DIR (seeds pooled), after job `after`.
static void attnstats_job(planner *pl, const char *dir, const char *suffix, int after) {
    const repro_scale *sc = pl->sc;
    args_vec a = {0};
    char models[1 << 14];
    size_t k = 0;
    for (int i = 0; i < REPRO_NKINDS; i++) {
        char one[4096];
        seed_list(one, sizeof one, pl->out, dir, REPRO_KINDS[i].run, sc->seeds);
        k += (size_t)snprintf(models + k, sizeof models - k, "%s%s", i ? "," : "", one);
    }
    args_add(&a, "attnstats"); args_add(&a, "--model"); args_add(&a, "%s", models);
    args_add(&a, "--data"); args_add(&a, "%s/val.bin", pl->data);
    args_add(&a, "--seq"); args_add(&a, "%d,%d,%d", sc->x_seq, 4 * sc->x_seq, 16 * sc->x_seq);
    args_add(&a, "--windows"); args_add(&a, "%d", sc->a_windows);
    args_add(&a, "--rows"); args_add(&a, "%d", sc->a_rows);
    args_add(&a, "--json"); args_add(&a, "%s/attnstats%s.json", pl->out, suffix);
    args_add(&a, "--plot"); args_add(&a, "%s/attnstats%s.png", pl->out, suffix);
    args_add(&a, "--threads"); args_add(&a, "1");
    char name[64];
    snprintf(name, sizeof name, "attnstats%s", suffix);
    jobs_add(pl->p, name, sc->c_attnstats, &after, 1, &a);
}

// 1c. head size at the width of 1: softmax and lssar p = 15 per D, then the cause experiments.
static void headsize_jobs(planner *pl) {
    const repro_scale *sc = pl->sc;
    args_vec a = {0};
    char dir[64];
    int ds[8], nds = repro_ints(sc->sweep, ds, 8);
    for (int i = 0; i < nds; i++) {
        snprintf(dir, sizeof dir, "headsize/d%d", ds[i]);
        extrapolate_args(pl, &a, dir, "softmax,lssar", "15", 1, sc->x_dim / ds[i], sc->x_dim,
                         sc->sweep_factors, 0);
        jobs_add(pl->p, dir, 2 * sc->c_extrap * sc->seeds, pl->data_job, pl->nd, &a);
    }
    for (int i = 0; i < REPRO_NCAUSES; i++) {
        const repro_cause *c = &REPRO_CAUSES[i];
        snprintf(dir, sizeof dir, "causes/%s", c->name);
        extrapolate_args(pl, &a, dir, c->attn, "15", 1, sc->x_dim / c->D, sc->x_dim, sc->sweep_factors, 0);
        if (c->rope_base > 0) { args_add(&a, "--rope-base"); args_add(&a, "%g", (double)c->rope_base); }
        if (c->temp_d > 0) { args_add(&a, "--temp-d"); args_add(&a, "%d", c->temp_d); }
        double kinds = strchr(c->attn, ',') ? 2 : 1;
        jobs_add(pl->p, dir, kinds * sc->c_extrap * sc->seeds, pl->data_job, pl->nd, &a);
    }
}

// 1d. the ablation: one job per run, then the gathering call.
static void ablation_jobs(planner *pl) {
    const repro_scale *sc = pl->sc;
    args_vec a = {0};
    int ab[REPRO_NABLATION];
    char all[1024], name[64];
    size_t k = 0;
    for (int i = 0; i < REPRO_NABLATION; i++) {
        extrapolate_args(pl, &a, "ablation", REPRO_ABLATION[i].run, NULL, 0, sc->x_heads, sc->x_dim,
                         sc->sweep_factors, 0);
        snprintf(name, sizeof name, "ablation/%s", REPRO_ABLATION[i].run);
        ab[i] = jobs_add(pl->p, name, sc->c_extrap * sc->seeds, pl->data_job, pl->nd, &a);
        k += (size_t)snprintf(all + k, sizeof all - k, "%s%s", i ? "," : "", REPRO_ABLATION[i].run);
    }
    extrapolate_args(pl, &a, "ablation", all, "15", 1, sc->x_heads, sc->x_dim, sc->sweep_factors, 0);
    jobs_add(pl->p, "ablation/all", 10, ab, REPRO_NABLATION, &a);
}

// 3. passkey: training (with its validation loss), the gathering call, the scores.
static void passkey_jobs(planner *pl) {
    const repro_scale *sc = pl->sc;
    args_vec a = {0};
    int pk[REPRO_NKINDS];
    kinds_jobs(pl, "passkey", "passkey-train", 0, 0, NULL, 1, sc->c_ptrain * sc->p_seeds, pk);
    char lengths[256], name[64];
    int f[8], nf = repro_ints(sc->p_factors, f, 8);
    size_t n = 0;
    for (int i = 0; i < nf; i++)
        n += (size_t)snprintf(lengths + n, sizeof lengths - n, "%s%d", i ? "," : "", f[i] * sc->p_seq);
    for (int k = 0; k <= REPRO_NKINDS; k++) {
        // the last: the lssa models scored with LSSAR re-weighting switched on (the fine-tuning-free claim)
        const int zs = k == REPRO_NKINDS;
        const int src = zs ? REPRO_LSSA : k;
        char models[4096], zsl[32];
        seed_list(models, sizeof models, pl->out, "passkey", REPRO_KINDS[src].run, sc->p_seeds);
        repro_zeroshot_label(zsl, sizeof zsl);
        const char *label = zs ? zsl : REPRO_KINDS[k].run;
        args_add(&a, "passkey");
        args_add(&a, "--model"); args_add(&a, "%s", models);
        args_add(&a, "--lengths"); args_add(&a, "%s", lengths);
        args_add(&a, "--depths"); args_add(&a, "%d", sc->p_depths);
        args_add(&a, "--trials"); args_add(&a, "%d", sc->p_trials);
        if (zs) {
            args_add(&a, "--attn"); args_add(&a, "lssar");
            args_add(&a, "--p"); args_add(&a, "%d", REPRO_KINDS[REPRO_LSSA].p);
        }
        args_add(&a, "--json"); args_add(&a, "%s/passkey/passkey-%s.json", pl->out, label);
        args_add(&a, "--plot"); args_add(&a, "%s/passkey/passkey-%s.png", pl->out, label);
        args_add(&a, "--threads"); args_add(&a, "1");
        snprintf(name, sizeof name, "passkey/%s", label);
        jobs_add(pl->p, name, sc->c_peval * sc->p_seeds, &pk[src], 1, &a);
    }
}

int repro_plan_build(job_plan *p, const repro_scale *sc, const char *data) {
    planner pl = {.p = p, .sc = sc, .out = p->out, .data = data, .data_job = {-1}};
    args_vec a = {0};
    char path[4400];
    snprintf(path, sizeof path, "%s/manifest.json", data);
    if (access(path, F_OK)) {
        args_add(&a, "data"); args_add(&a, "build"); args_add(&a, "--corpus"); args_add(&a, "sotu");
        args_add(&a, "--tokenizer"); args_add(&a, "byte");
        args_add(&a, "--out"); args_add(&a, "%s", data);
        args_add(&a, "--quiet");
        pl.data_job[0] = jobs_add(p, "data", sc->c_data, NULL, 0, &a);
    }
    pl.nd = pl.data_job[0] >= 0;
    // 1. extrapolation at D = x_dim / x_heads, 1b. at D = s_dim / s_heads; 2. their attention statistics
    int xk[REPRO_NKINDS], sk[REPRO_NKINDS];
    int xall = kinds_jobs(&pl, "extrapolate", "extrapolate", sc->x_heads, sc->x_dim, sc->factors, 0,
                          sc->c_extrap * sc->seeds, xk);
    int sall = kinds_jobs(&pl, "extrapolate-d16", "extrapolate-d16", sc->s_heads, sc->s_dim, sc->s_factors, 0,
                          sc->c_small * sc->seeds, sk);
    attnstats_job(&pl, "extrapolate", "", xall);
    attnstats_job(&pl, "extrapolate-d16", "_d16", sall);
    headsize_jobs(&pl);
    ablation_jobs(&pl);
    passkey_jobs(&pl);
    // 4. orbits
    args_add(&a, "orbits"); args_add(&a, "run"); args_add(&a, "--scale"); args_add(&a, "%s", sc->orbits);
    args_add(&a, "--attn"); args_add(&a, "softmax,lssar");
    if (sc->o_heads) { args_add(&a, "--heads"); args_add(&a, "%d", sc->o_heads); }
    args_add(&a, "--out"); args_add(&a, "%s/orbits", pl.out);
    args_add(&a, "--threads"); args_add(&a, "1");
    jobs_add(p, "orbits", sc->c_orbits, NULL, 0, &a);
    return p->n < JOBS_MAX ? 0 : lssar_fail(LSSAR_E_ARG, "the plan has too many jobs");
}
