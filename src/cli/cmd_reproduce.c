// cmd_reproduce.c - `lssar reproduce --scale laptop`: the paper's comparison as one plan of
// ordinary lssar commands (length extrapolation, attention statistics, passkey, orbits), run on
// --jobs worker processes (exp/plan.h: dependencies, critical path first, resumable, progress and
// ETA), then one report: OUT/REPORT.md (the tables the commands wrote, a passkey table across
// kinds, data hashes, every command with its wall time) and OUT/report.json.
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cJSON.h>
#include "args.h"
#include "commands.h"
#include "exp/plan.h"
#include "lssar.h"
#include "core/json.h"
#include "core/sha256.h"
#include "core/util.h"
#include "exp/passkey.h"
#include "exp/stats.h"

/* The sizes of a scale, by name. Every job runs on one core (--threads 1); the costs are the
   seconds one job takes per seed on one core of the reference machine (2-core x86-64, 2026-12),
   for the order and ETA. Every trained configuration has `seeds` seeds, paired across kinds. */
typedef struct {
    const char *name, *about;
    int seeds;
    // 1. length extrapolation at the paper's head size D = x_dim / x_heads: every kind
    int x_layers, x_heads, x_dim, x_seq, x_batch, x_steps, x_warmup, x_windows;
    float x_lr;
    const char *factors;
    // 1b. the same plan at the head size our first studies used, D = s_dim / s_heads
    int s_heads, s_dim;
    const char *s_factors;
    // 1c. head size: softmax and lssar p = 15 at width x_dim for each D of sweep (the D of
    // section 1 is taken from there), and the cause experiments (CAUSES), to sweep_factors
    const char *sweep, *sweep_factors;
    // 2. attention statistics over the models of 1 and 1b
    int a_windows, a_rows;
    // 3. passkey: models trained with a passkey share, then scored at p_factors x p_seq
    int p_layers, p_heads, p_dim, p_seq, p_batch, p_steps, p_warmup, p_depths, p_trials, p_seeds;
    float p_lr, p_mix;
    int p_short;   // passkey sequences without the task sentence (extrapolate --passkey-short)
    const char *p_factors;
    // 4. orbits: `lssar orbits run --scale orbits --heads o_heads` (0: the orbit scale's heads)
    const char *orbits;
    int o_heads;
    double c_data, c_extrap, c_small, c_attnstats, c_ptrain, c_peval, c_orbits;
} repro_scale;

static const repro_scale SCALES[] = {
    {.name = "smoke",
     .about = "every job at toy size in about a minute: checks the plan, says nothing about attention",
     .seeds = 2,
     .x_layers = 1,
     .x_heads = 2,
     .x_dim = 128,
     .x_seq = 32,
     .x_batch = 2,
     .x_steps = 4,
     .x_warmup = 1,
     .x_windows = 2,
     .x_lr = 3e-3f,
     .factors = "1,2",
     .s_heads = 4,
     .s_dim = 64,
     .s_factors = "1,2",
     .sweep = "16,32",
     .sweep_factors = "1,2",
     .a_windows = 1,
     .a_rows = 8,
     .p_layers = 1,
     .p_heads = 2,
     .p_dim = 16,
     .p_seq = 260,
     .p_batch = 2,
     .p_steps = 3,
     .p_warmup = 1,
     .p_depths = 2,
     .p_trials = 2,
     .p_seeds = 1,
     .p_lr = 3e-3f,
     .p_mix = 0.75f,
     .p_short = 1,
     .p_factors = "1,2",
     .orbits = "smoke",
     .o_heads = 0,
     .c_data = 5,
     .c_extrap = 5,
     .c_small = 5,
     .c_attnstats = 5,
     .c_ptrain = 5,
     .c_peval = 5,
     .c_orbits = 20},
    // The extrapolation model is docs/EARLIER_RESULTS.md run A (2 layers, 1000 steps) at width 128
    // with 2 heads: the head size of GPT-2 small, D = 64 (issue 33). The first studies used width 64
    // with 4 heads, D = 16: section 1b keeps them, because the verdict depends on it. The passkey
    // models are section 1's shape with the short prompt, one seed: in 4000 steps they retrieve most
    // digits at 1x but few whole keys (docs/REPRODUCE.md lists the shapes tried), and three seeds
    // (or more steps) would take the plan past 3 hours on 2 cores.
    {.name = "laptop",
     .about = "the whole comparison on 2 CPU cores in about 3.5 hours (resumable): at the paper's head size "
              "D = 64, 7 attention kinds x 3 seeds for the length extrapolation (and again at D = 16), a "
              "head-size sweep with the experiments that separate its causes, the ablation of the "
              "attention's stages, passkey models that first learn the task at 1x, and the orbits laptop "
              "scale",
     .seeds = 3,
     .x_layers = 2,
     .x_heads = 2,
     .x_dim = 128,
     .x_seq = 128,
     .x_batch = 16,
     .x_steps = 1000,
     .x_warmup = 50,
     .x_windows = 32,
     .x_lr = 3e-3f,
     .factors = "1,2,4,8,16,32,64",
     .s_heads = 4,
     .s_dim = 64,
     .s_factors = "1,2,4,8,16,32",
     .sweep = "16,32,128",
     .sweep_factors = "1,2,4,8,16,32",
     .a_windows = 4,
     .a_rows = 64,
     .p_layers = 2,
     .p_heads = 2,
     .p_dim = 128,
     .p_seq = 320,
     .p_batch = 16,
     .p_steps = 4000,
     .p_warmup = 100,
     .p_depths = 5,
     .p_trials = 10,
     .p_seeds = 1,
     .p_lr = 3e-3f,
     .p_mix = 0.75f,
     .p_short = 1,
     .p_factors = "1,2,4,8,16",
     .orbits = "laptop",
     .o_heads = 1,
     .c_data = 40,
     .c_extrap = 140,
     .c_small = 50,
     .c_attnstats = 150,
     .c_ptrain = 1100,
     .c_peval = 40,
     .c_orbits = 3100},
};
#define NSCALES (int)(sizeof SCALES / sizeof SCALES[0])

/* The runs of the comparison: the kind, the LSSAR power, and the run folder extrapolate makes. */
static const struct { const char *attn; int p; const char *run; } KINDS[] = {
    {"softmax", 0, "softmax"}, {"ssmax", 0, "ssmax"}, {"sigmoid", 0, "sigmoid"}, {"relu", 0, "relu"},
    {"lssa", 15, "lssa"}, {"lssar", 3, "lssar-p3"}, {"lssar", 15, "lssar-p15"},
};
#define NKINDS (int)(sizeof KINDS / sizeof KINDS[0])
#define LSSA 4   // KINDS[LSSA]: the lssa runs, also scored with LSSAR re-weighting at evaluation only

/* The experiments that separate the candidate causes of the head-size effect (issue 33), each one
   change to a model of head size D at the width of section 1, softmax and/or lssar p = 15:
   - the RoPE pairs that turn slower than the training length (D = 16 has 5 of 8 at base 10000,
     D = 64 has 21 of 32; base 38 leaves D = 64 with 5);
   - the ln(D) factor of the temperature alone (the other D's ln);
   - the spread of unrelated scores, ln(D) ln(n) cos with sd(cos) ~ 1/sqrt(D): a temperature D' with
     ln(D')/sqrt(D) equal to the other head size's ln(D)/sqrt(D). */
static const struct {
    const char *name, *what;
    int D;
    float rope_base;
    int temp_d;
    const char *attn;
} CAUSES[] = {
    {"d64-rope38", "D = 64, RoPE base 38: 5 pairs turn slower than T, as at D = 16", 64, 38, 0,
     "softmax,lssar"},
    {"d16-temp64", "D = 16 with D = 64's temperature, ln(64) ln(n)", 16, 0, 64, "lssar"},
    {"d64-temp16", "D = 64 with D = 16's temperature, ln(16) ln(n)", 64, 0, 16, "lssar"},
    {"d16-temp8", "D = 16 with D = 64's score spread: ln(8)/4 = ln(64)/8", 16, 0, 8, "lssar"},
    {"d64-temp256", "D = 64 with D = 16's score spread: ln(256)/8 = ln(16)/4", 64, 0, 256, "lssar"},
};
#define NCAUSES (int)(sizeof CAUSES / sizeof CAUSES[0])

/* The ablation (issue 34): which stage of LSSAR carries the flat loss. Each run changes one stage
   of its neighbour, at the head size of section 1, to the sweep's lengths; every run is a kind and
   power as `lssar extrapolate --attn` takes it (and names its folder). */
static const struct { const char *run, *what; } ABLATION[] = {
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
#define NABLATION (int)(sizeof ABLATION / sizeof ABLATION[0])

/* The stage effects the ablation measures: run `to` minus run `from`, paired by seed. */
static const struct { const char *stage, *from, *to; } STAGE_STEPS[] = {
    {"QK normalisation with ln(D) ln(n), on softmax", "softmax", "softmax+cos"},
    {"re-weighting p = 15, on softmax + QK norm", "softmax+cos", "softmax+cos+rw-p15"},
    {"re-weighting p = 15, on softmax", "softmax", "softmax+rw-p15"},
    {"re-weighting p = 15, on SSMax", "ssmax", "ssmax+rw-p15"},
    {"re-weighting p = 15, on LSSA", "lssa", "lssar-p15"},
    {"softplus for exp (QK norm, no re-weighting)", "softmax+cos", "lssa"},
    {"softplus for exp (QK norm, re-weighting p = 15)", "softmax+cos+rw-p15", "lssar-p15"},
    {"LSSAR p = 1 instead of 15", "lssar-p15", "lssar-p1"},
    {"LSSAR p = 3 instead of 15", "lssar-p15", "lssar-p3"},
    {"LSSAR p = 7 instead of 15", "lssar-p15", "lssar-p7"},
    {"LSSAR p = 31 instead of 15", "lssar-p15", "lssar-p31"},
};
#define NSTAGE_STEPS (int)(sizeof STAGE_STEPS / sizeof STAGE_STEPS[0])

// The name of that evaluation-only run, as extrapolate names it ("lssa+lssar-p15").
static void zeroshot_label(char *buf, size_t cap) { snprintf(buf, cap, "lssa+lssar-p%d", KINDS[LSSA].p); }

static const char *ABOUT =
    "The paper's comparison at laptop scale as one command (issues 17, 33). The plan, every job an\n"
    "ordinary lssar command on one core, --jobs of them at a time:\n"
    "  1. extrapolation at the paper's head size (D = 64 at laptop scale): `lssar extrapolate` per kind\n"
    "     (softmax, ssmax, sigmoid, relu, lssa (+ its LSSAR re-weighting at evaluation only), lssar p = 3,\n"
    "     lssar p = 15), --seeds each, loss at 1x..64x the training length with 95% intervals over seeds,\n"
    "     the paired difference to softmax and the loss at each position of the longest windows; then\n"
    "     one call over all kinds that only gathers their cached results into OUT/extrapolate/results.*\n"
    "     1b. the same at D = 16, the head size of our first studies (OUT/extrapolate-d16)\n"
    "     1c. head size: softmax and lssar p = 15 at D = 16, 32, 128 at the same width (OUT/headsize),\n"
    "     and the experiments that separate the causes (OUT/causes: RoPE base, the ln(D) factor, the\n"
    "     spread of the scores)\n"
    "     1d. which stage carries it: softmax, + QK normalisation with ln(D) ln(n), + re-weighting;\n"
    "     softmax and SSMax with re-weighting; LSSA; LSSAR p = 1, 3, 7, 15, 31 (OUT/ablation)\n"
    "  2. attention statistics (`lssar attnstats`, seeds pooled) of the models of 1 and 1b at 1x, 4x, 16x\n"
    "  3. passkey: per kind a model trained with a share of passkey sequences (`lssar extrapolate\n"
    "     --passkey-mix`, which also measures the same models' ordinary validation loss: the price of the\n"
    "     mix), then `lssar passkey` at 1x..16x its training length (95% Wilson intervals, seeds pooled)\n"
    "  4. orbits: `lssar orbits run` (simulation, softmax and lssar world models at D = 64, next-position\n"
    "     accuracy against the previous-position baseline, force probe, Newton audit, k-NN oracle)\n"
    "Scales: smoke (a minute: the plan's test) and laptop (2 cores, about 3.5 hours).\n"
    "\n"
    "--data DIR is a byte-level folder from `lssar data build --tokenizer byte`; when DIR/manifest.json\n"
    "is missing a first job builds it from the State of the Union corpus (fetch it first:\n"
    "scripts/fetch-corpora.sh sotu; `make reproduce` does both).\n"
    "\n"
    "Resumable: a rerun of the same command skips the jobs that finished (OUT/jobs/NAME.json holds each\n"
    "one's command, exit status and wall time) and the others continue where they stopped (checkpoints,\n"
    "cached evaluations). A failed job stops only the jobs that need it; its log is OUT/logs/NAME.log.\n"
    "Writes OUT/commands.sh (the plan, runnable one job after another), OUT/REPORT.md (every table,\n"
    "plot links, data SHA-256, commands and wall times) and OUT/report.json {\"scale\", \"version\",\n"
    "\"machine\", \"jobs\": [{\"name\", \"command\", \"exit\", \"seconds\", \"reused\"}], \"wall_seconds\", "
    "\"data\":\n"
    "[{\"file\", \"bytes\", \"sha256\"}], \"extrapolate\", \"extrapolate_d16\", \"head_size\": [{\"D\", "
    "\"heads\",\n"
    "\"softmax\" and \"lssar-p15\": {\"loss_1x\", \"loss_rx\", \"rise\": {\"mean\", \"ci95\"}}, "
    "\"lssar_minus_softmax_rx\"}]\n"
    "(rx: head_size_rise_factor, 16x at laptop scale), \"causes\": {NAME: {\"change\", KIND: {\"loss_1x\", "
    "\"loss_rx\",\n"
    "\"rise\", \"rise_minus_unchanged\"}}},\n"
    "\"passkey_training\", \"attnstats\", \"attnstats_d16\", \"passkey\": {RUN: ...}, \"orbits\": {RUN: "
    "{\"eval\",\n"
    "\"newton\"}}} (the JSON the commands wrote; the head-size rises computed from it).\n"
    "Exit status: 0 done, 2 bad flags, 1 a job failed (the others ran; rerun to continue).";

/* ---------------------------------------------------------------- the plan */
typedef struct {
    job_plan *p;
    const repro_scale *sc;
    const char *out, *data;
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
                      const char *factors, int passkey, double cost, const int *data, int nd, int *per_kind) {
    args_vec a = {0};
    char name[64], p[16];
    for (int k = 0; k < NKINDS; k++) {
        snprintf(p, sizeof p, "%d", KINDS[k].p);
        extrapolate_args(pl, &a, dir, KINDS[k].attn, KINDS[k].p ? p : NULL, 0, heads, dim, factors, passkey);
        snprintf(name, sizeof name, "%s/%s", prefix, KINDS[k].run);
        per_kind[k] = jobs_add(pl->p, name, cost * (k == LSSA ? 1.2 : 1), data, nd, &a);
    }
    extrapolate_args(pl, &a, dir, "softmax,ssmax,sigmoid,relu,lssa,lssar", "15,3", 1, heads, dim, factors,
                     passkey);
    snprintf(name, sizeof name, "%s/all", prefix);
    return jobs_add(pl->p, name, 10, per_kind, NKINDS, &a);
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
    static char models[1 << 14];
    size_t k = 0;
    for (int i = 0; i < NKINDS; i++) {
        char one[4096];
        seed_list(one, sizeof one, pl->out, dir, KINDS[i].run, sc->seeds);
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

static int build_plan(planner *pl) {
    job_plan *p = pl->p;
    const repro_scale *sc = pl->sc;
    args_vec a = {0};
    char path[4400], name[64];
    int data = -1;
    snprintf(path, sizeof path, "%s/manifest.json", pl->data);
    if (access(path, F_OK)) {
        args_add(&a, "data"); args_add(&a, "build"); args_add(&a, "--corpus"); args_add(&a, "sotu");
        args_add(&a, "--tokenizer"); args_add(&a, "byte");
        args_add(&a, "--out"); args_add(&a, "%s", pl->data);
        args_add(&a, "--quiet");
        data = jobs_add(p, "data", sc->c_data, NULL, 0, &a);
    }
    const int nd = data >= 0;
    // 1. extrapolation at D = x_dim / x_heads, 1b. at D = s_dim / s_heads; 2. their attention statistics
    int xk[NKINDS], sk[NKINDS], pk[NKINDS];
    int xall = kinds_jobs(pl, "extrapolate", "extrapolate", sc->x_heads, sc->x_dim, sc->factors, 0,
                          sc->c_extrap * sc->seeds, &data, nd, xk);
    int sall = kinds_jobs(pl, "extrapolate-d16", "extrapolate-d16", sc->s_heads, sc->s_dim, sc->s_factors, 0,
                          sc->c_small * sc->seeds, &data, nd, sk);
    attnstats_job(pl, "extrapolate", "", xall);
    attnstats_job(pl, "extrapolate-d16", "_d16", sall);
    // 1c. head size at the width of 1: softmax and lssar p = 15 per D, then the cause experiments
    int ds[8], nds = args_int_list("reproduce", "sweep", sc->sweep, ds, 8);
    for (int i = 0; i < nds; i++) {
        char dir[64];
        snprintf(dir, sizeof dir, "headsize/d%d", ds[i]);
        extrapolate_args(pl, &a, dir, "softmax,lssar", "15", 1, sc->x_dim / ds[i], sc->x_dim,
                         sc->sweep_factors, 0);
        jobs_add(p, dir, 2 * sc->c_extrap * sc->seeds, &data, nd, &a);
    }
    for (int i = 0; i < NCAUSES; i++) {
        char dir[64];
        snprintf(dir, sizeof dir, "causes/%s", CAUSES[i].name);
        extrapolate_args(pl, &a, dir, CAUSES[i].attn, "15", 1, sc->x_dim / CAUSES[i].D, sc->x_dim,
                         sc->sweep_factors, 0);
        if (CAUSES[i].rope_base > 0) {
            args_add(&a, "--rope-base"); args_add(&a, "%g", (double)CAUSES[i].rope_base);
        }
        if (CAUSES[i].temp_d > 0) { args_add(&a, "--temp-d"); args_add(&a, "%d", CAUSES[i].temp_d); }
        jobs_add(p, dir, (strchr(CAUSES[i].attn, ',') ? 2 : 1) * sc->c_extrap * sc->seeds, &data, nd, &a);
    }
    // 1d. the ablation: one job per run, then the gathering call
    {
        int ab[NABLATION];
        char all[1024];
        size_t k = 0;
        for (int i = 0; i < NABLATION; i++) {
            extrapolate_args(pl, &a, "ablation", ABLATION[i].run, NULL, 0, sc->x_heads, sc->x_dim,
                             sc->sweep_factors, 0);
            snprintf(name, sizeof name, "ablation/%s", ABLATION[i].run);
            ab[i] = jobs_add(p, name, sc->c_extrap * sc->seeds, &data, nd, &a);
            k += (size_t)snprintf(all + k, sizeof all - k, "%s%s", i ? "," : "", ABLATION[i].run);
        }
        extrapolate_args(pl, &a, "ablation", all, "15", 1, sc->x_heads, sc->x_dim, sc->sweep_factors, 0);
        jobs_add(p, "ablation/all", 10, ab, NABLATION, &a);
    }
    // 3. passkey: training (with its validation loss), the gathering call, the scores
    kinds_jobs(pl, "passkey", "passkey-train", 0, 0, NULL, 1, sc->c_ptrain * sc->p_seeds, &data, nd, pk);
    char lengths[256];
    {
        int f[8], nf = args_int_list("reproduce", "factors", sc->p_factors, f, 8);
        size_t k = 0;
        for (int i = 0; i < nf; i++)
            k += (size_t)snprintf(lengths + k, sizeof lengths - k, "%s%d", i ? "," : "", f[i] * sc->p_seq);
    }
    for (int k = 0; k <= NKINDS; k++) {
        // the last: the lssa models scored with LSSAR re-weighting switched on (the fine-tuning-free claim)
        const int zs = k == NKINDS;
        const int src = zs ? LSSA : k;
        char models[4096], zsl[32];
        seed_list(models, sizeof models, pl->out, "passkey", KINDS[src].run, sc->p_seeds);
        zeroshot_label(zsl, sizeof zsl);
        const char *label = zs ? zsl : KINDS[k].run;
        args_add(&a, "passkey");
        args_add(&a, "--model"); args_add(&a, "%s", models);
        args_add(&a, "--lengths"); args_add(&a, "%s", lengths);
        args_add(&a, "--depths"); args_add(&a, "%d", sc->p_depths);
        args_add(&a, "--trials"); args_add(&a, "%d", sc->p_trials);
        if (zs) {
            args_add(&a, "--attn"); args_add(&a, "lssar");
            args_add(&a, "--p"); args_add(&a, "%d", KINDS[LSSA].p);
        }
        args_add(&a, "--json"); args_add(&a, "%s/passkey/passkey-%s.json", pl->out, label);
        args_add(&a, "--plot"); args_add(&a, "%s/passkey/passkey-%s.png", pl->out, label);
        args_add(&a, "--threads"); args_add(&a, "1");
        snprintf(name, sizeof name, "passkey/%s", label);
        jobs_add(p, name, sc->c_peval * sc->p_seeds, &pk[src], 1, &a);
    }
    // 4. orbits
    args_add(&a, "orbits"); args_add(&a, "run"); args_add(&a, "--scale"); args_add(&a, "%s", sc->orbits);
    args_add(&a, "--attn"); args_add(&a, "softmax,lssar");
    if (sc->o_heads) { args_add(&a, "--heads"); args_add(&a, "%d", sc->o_heads); }
    args_add(&a, "--out"); args_add(&a, "%s/orbits", pl->out);
    args_add(&a, "--threads"); args_add(&a, "1");
    jobs_add(p, "orbits", sc->c_orbits, NULL, 0, &a);
    return p->n < JOBS_MAX ? 0 : lssar_fail(LSSAR_E_ARG, "the plan has too many jobs");
}

/* ---------------------------------------------------------------- the report */
// A Markdown file of a sub-folder, its headings one level down and its relative links pointing
// into the sub-folder; a note when it is missing.
static void include_md(FILE *f, const char *out, const char *sub, const char *file) {
    char path[4400];
    snprintf(path, sizeof path, "%s/%s/%s", out, sub, file);
    FILE *in = fopen(path, "r");
    if (!in) { fprintf(f, "(%s/%s is missing: its job did not finish)\n\n", sub, file); return; }
    char line[8192];
    while (fgets(line, sizeof line, in)) {
        if (line[0] == '#') fputc('#', f);
        for (char *c = line; *c; c++) {
            fputc(*c, f);
            if (c[0] == ']' && c[1] == '(' && strncmp(c + 2, "http", 4)) {
                fputc('(', f);
                fprintf(f, "%s/", sub);
                c++;
            }
        }
    }
    fclose(in);
    fputc('\n', f);
}

// A job's printed output from the first line that starts with `from` (its log without the
// command line, up to a line starting "json:"), in a code block.
static void include_log(FILE *f, const char *out, const char *job, const char *from) {
    char path[4400];
    snprintf(path, sizeof path, "%s/logs/%s.log", out, job);
    FILE *in = fopen(path, "r");
    if (!in) { fprintf(f, "(no log: the job did not run)\n\n"); return; }
    fprintf(f, "```\n");
    char line[8192];
    int on = 0;
    while (fgets(line, sizeof line, in)) {
        if (!strncmp(line, from, strlen(from))) on = 1;
        if (!strncmp(line, "json:", 5)) on = 0;
        if (on && line[0] != '$') fputs(line, f);
    }
    fclose(in);
    fprintf(f, "```\n\n");
}

static int by_name(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

// Every regular file of dir (not below it): size and SHA-256, to the table and to arr.
static void hash_dir(FILE *f, cJSON *arr, const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    char names[256][256];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 256)
        if (e->d_name[0] != '.' && strlen(e->d_name) < 256) snprintf(names[n++], 256, "%s", e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], by_name);
    for (int i = 0; i < n; i++) {
        char path[4400], hex[65];
        struct stat st;
        if (snprintf(path, sizeof path, "%s/%s", dir, names[i]) >= (int)sizeof path) continue;
        if (stat(path, &st) || !S_ISREG(st.st_mode) || strstr(names[i], ".tmp.")) continue;
        if (sha256_file_hex(path, hex)) snprintf(hex, sizeof hex, "(unreadable)");
        fprintf(f, "| `%s` | %lld | `%s` |\n", path, (long long)st.st_size, hex);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "file", path);
        cJSON_AddNumberToObject(o, "bytes", (double)st.st_size);
        cJSON_AddStringToObject(o, "sha256", hex);
        cJSON_AddItemToArray(arr, o);
    }
}

// The passkey table across kinds: per model group and length the successes over every depth and
// seed, with the Wilson interval; the validation loss of the same models (passkey training).
static void passkey_table(FILE *f, const char *out, const repro_scale *sc, cJSON *pj) {
    char tpath[4400];
    snprintf(tpath, sizeof tpath, "%s/passkey/results.json", out);
    cJSON *train = lssar_read_json(tpath);
    int f_[8], nf = args_int_list("reproduce", "factors", sc->p_factors, f_, 8);
    fprintf(f, "| model | validation loss at %d (price of the mix) |", sc->p_seq);
    for (int i = 0; i < nf; i++) fprintf(f, " %dx (%d) |", f_[i], f_[i] * sc->p_seq);
    fprintf(f, "\n|---|---|");
    for (int i = 0; i < nf; i++) fprintf(f, "---|");
    fprintf(f, "\n");
    for (int k = 0; k <= NKINDS; k++) {
        char zsl[32];
        zeroshot_label(zsl, sizeof zsl);
        const char *label = k == NKINDS ? zsl : KINDS[k].run;
        char path[4400];
        snprintf(path, sizeof path, "%s/passkey/passkey-%s.json", out, label);
        cJSON *j = lssar_read_json(path);
        // the validation loss: the group of that name in the training's results.json
        double val = NAN, lo = NAN, hi = NAN;
        const cJSON *g;
        cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(train, "groups")) {
            const cJSON *nm = cJSON_GetObjectItemCaseSensitive(g, "name");
            if (!cJSON_IsString(nm) || strcmp(nm->valuestring, label)) continue;
            const cJSON *r0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(g, "results"), 0);
            const cJSON *m = cJSON_GetObjectItemCaseSensitive(r0, "mean"),
                        *ci = cJSON_GetObjectItemCaseSensitive(r0, "ci95");
            if (cJSON_IsNumber(m)) val = m->valuedouble;
            if (cJSON_GetArraySize(ci) == 2) {
                lo = cJSON_GetArrayItem(ci, 0)->valuedouble;
                hi = cJSON_GetArrayItem(ci, 1)->valuedouble;
            }
        }
        if (isnan(val)) fprintf(f, "| %s | - |", label);  // its training has not run
        else fprintf(f, "| %s | %.3f [%.3f, %.3f] |", label, val, lo, hi);
        for (int i = 0; i < nf; i++) {
            int ok = 0, n = 0;
            const cJSON *r;
            cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(j, "results")) {
                const cJSON *L = cJSON_GetObjectItemCaseSensitive(r, "length");
                if (!cJSON_IsNumber(L) || L->valueint != f_[i] * sc->p_seq) continue;
                const cJSON *succ = cJSON_GetObjectItemCaseSensitive(r, "successes"),
                            *tr = cJSON_GetObjectItemCaseSensitive(r, "trials");
                if (cJSON_IsNumber(succ) && cJSON_IsNumber(tr)) { ok += succ->valueint; n += tr->valueint; }
            }
            if (!n) { fprintf(f, " - |"); continue; }
            double wl, wh;
            wilson_interval(ok, n, 1.96, &wl, &wh);
            fprintf(f, " %s%d/%d = %.2f [%.2f, %.2f]%s |", ok * 10 >= n * 9 ? "**" : "", ok, n,
                    (double)ok / n, wl, wh, ok * 10 >= n * 9 ? "**" : "");
        }
        fprintf(f, "\n");
        if (j) cJSON_AddItemToObject(pj, label, j);
    }
    fprintf(f,
            "\nEach cell: keys retrieved over every depth (and seed) / trials, the share and its 95%% Wilson "
            "interval; bold: at least 90%%. The validation loss is the same models' mean next-token loss on "
            "held-out documents at the training length (%s; `passkey/results.md`). Heatmaps: "
            "`passkey/passkey-MODEL.png`.\n\n",
            sc->p_seeds > 1 ? "mean over seeds, 95% t interval over seeds"
                            : "one seed: 95% interval over the windows");
    cJSON_Delete(train);
}

// The per-seed losses of group `group` at length seq in an extrapolate results.json (NaN-free);
// the count, 0 when absent.
static int group_seeds(const cJSON *res, const char *group, int seq, double *v, int cap) {
    const cJSON *g;
    cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(res, "groups")) {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(g, "name");
        if (!cJSON_IsString(nm) || strcmp(nm->valuestring, group)) continue;
        const cJSON *r;
        cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(g, "results")) {
            const cJSON *T = cJSON_GetObjectItemCaseSensitive(r, "seq");
            if (!cJSON_IsNumber(T) || T->valueint != seq) continue;
            int n = 0;
            const cJSON *x;
            cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(r, "per_seed")) {
                if (!cJSON_IsNumber(x) || n == cap) return 0;
                v[n++] = x->valuedouble;
            }
            return n;
        }
    }
    return 0;
}

// The factor of the head-size rise: 16x (the paper's claim), or the sweep's largest below it.
static int rise_factor(const repro_scale *sc) {
    int f[16], nf = args_int_list("reproduce", "sweep-factors", sc->sweep_factors, f, 16), r = 1;
    for (int i = 0; i < nf; i++) if (f[i] <= 16 && f[i] > r) r = f[i];
    return r;
}

// The rise of a group's loss from T to R T, per seed (rise[k]); the count of seeds (0: missing).
#define MAXS 16
static int group_rise(const cJSON *res, const char *group, int T, int R, double *l1, double *l16,
                      double *rise) {
    int n1 = group_seeds(res, group, T, l1, MAXS), n16 = group_seeds(res, group, R * T, l16, MAXS);
    if (n1 < 1 || n1 != n16) return 0;
    for (int k = 0; k < n1; k++) rise[k] = l16[k] - l1[k];
    return n1;
}

// "mean +- half" of x (the 95% t interval), or "-" for none, into buf.
static const char *mean_ci(char *buf, size_t cap, const double *x, int n, cJSON *o, const char *key) {
    double m, h;
    if (n < 1) { snprintf(buf, cap, "-"); return buf; }
    exp_mean_ci95(x, n, &m, &h);
    if (isfinite(h)) snprintf(buf, cap, "%+.3f [%+.3f, %+.3f]", m, m - h, m + h);
    else snprintf(buf, cap, "%+.3f", m);
    if (o) {
        cJSON *e = cJSON_AddObjectToObject(o, key);
        cJSON_AddItemToObject(e, "mean", lssar_json_number(m));
        cJSON *ci = cJSON_AddArrayToObject(e, "ci95");
        cJSON_AddItemToArray(ci, lssar_json_number(m - h));
        cJSON_AddItemToArray(ci, lssar_json_number(m + h));
    }
    return buf;
}

static double mean_of(const double *x, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += x[i];
    return n ? s / n : NAN;
}

// The results.json of section 1 for head size D, else of OUT/headsize/dD (NULL: not run).
static cJSON *headsize_results(const char *out, const repro_scale *sc, int D) {
    char path[4400];
    if (D == sc->x_dim / sc->x_heads) snprintf(path, sizeof path, "%s/extrapolate/results.json", out);
    else snprintf(path, sizeof path, "%s/headsize/d%d/results.json", out, D);
    return lssar_read_json(path);
}

// 1d: each run's rise from 1x to 16x, then each stage's effect: the paired difference of the loss
// at 1x, 16x and the longest length, and of the rise.
static void ablation_tables(FILE *f, const char *out, const repro_scale *sc, cJSON *root) {
    const int T = sc->x_seq, R = rise_factor(sc);
    int fac[16], nf = args_int_list("reproduce", "sweep-factors", sc->sweep_factors, fac, 16), F = 1;
    for (int i = 0; i < nf; i++) if (fac[i] > F) F = fac[i];
    char path[4400];
    snprintf(path, sizeof path, "%s/ablation/results.json", out);
    cJSON *res = lssar_read_json(path);
    cJSON *o = cJSON_AddObjectToObject(root, "ablation_rise");
    fprintf(f,
            "Each run's rise: the loss at %dx minus the loss at 1x, per seed, then the mean [95%% t interval "
            "over %d seeds].\n\n"
            "| run | 1x | %dx | %dx | rise to %dx |\n|---|---|---|---|---|\n",
            R, sc->seeds, R, F, R);
    for (int i = 0; i < NABLATION; i++) {
        double l1[MAXS], lr[MAXS], r[MAXS], lf[MAXS];
        int n = group_rise(res, ABLATION[i].run, T, R, l1, lr, r),
            nl = group_seeds(res, ABLATION[i].run, F * T, lf, MAXS);
        char buf[96];
        cJSON *e = cJSON_AddObjectToObject(o, ABLATION[i].run);
        fprintf(f, "| %s | %.3f | %.3f | %.3f | %s |\n", ABLATION[i].run, mean_of(l1, n), mean_of(lr, n),
                mean_of(lf, nl), mean_ci(buf, sizeof buf, r, n, e, "rise"));
    }
    cJSON *so = cJSON_AddObjectToObject(root, "ablation_stages");
    fprintf(f,
            "\nEach stage's effect: the run with it minus the run without it, paired by seed (negative: the "
            "stage lowers the loss), at 1x, %dx and %dx, and on the rise to %dx.\n\n"
            "| stage | from -> to | at 1x | at %dx | at %dx | on the rise to %dx "
            "|\n|---|---|---|---|---|---|\n",
            R, F, R, R, F, R);
    for (int i = 0; i < NSTAGE_STEPS; i++) {
        cJSON *e = cJSON_AddObjectToObject(so, STAGE_STEPS[i].stage);
        cJSON_AddStringToObject(e, "from", STAGE_STEPS[i].from);
        cJSON_AddStringToObject(e, "to", STAGE_STEPS[i].to);
        fprintf(f, "| %s | %s -> %s |", STAGE_STEPS[i].stage, STAGE_STEPS[i].from, STAGE_STEPS[i].to);
        static const char *const KEY[3] = {"at_1x", "at_rx", "at_longest"};
        const int at[3] = {1, R, F};
        for (int c = 0; c < 3; c++) {
            double a[MAXS], b[MAXS], d[MAXS];
            int na = group_seeds(res, STAGE_STEPS[i].from, at[c] * T, a, MAXS),
                nb = group_seeds(res, STAGE_STEPS[i].to, at[c] * T, b, MAXS);
            int n = na == nb ? na : 0;
            for (int k = 0; k < n; k++) d[k] = b[k] - a[k];
            char buf[96];
            fprintf(f, " %s |", mean_ci(buf, sizeof buf, d, n, e, KEY[c]));
        }
        double a1[MAXS], ar[MAXS], ra[MAXS], b1[MAXS], br[MAXS], rb[MAXS], d[MAXS];
        int na = group_rise(res, STAGE_STEPS[i].from, T, R, a1, ar, ra),
            nb = group_rise(res, STAGE_STEPS[i].to, T, R, b1, br, rb);
        int n = na == nb ? na : 0;
        for (int k = 0; k < n; k++) d[k] = rb[k] - ra[k];
        char buf[96];
        fprintf(f, " %s |\n", mean_ci(buf, sizeof buf, d, n, e, "on_rise"));
    }
    fprintf(f, "\n");
    cJSON_Delete(res);
}

// 1c: the rise from 1x to 16x per head size (softmax, lssar p = 15), then the cause experiments,
// each against the unchanged model of its head size (paired by seed).
static void headsize_tables(FILE *f, const char *out, const repro_scale *sc, cJSON *root) {
    const int T = sc->x_seq, Dx = sc->x_dim / sc->x_heads, R = rise_factor(sc);
    int ds[9], nds = args_int_list("reproduce", "sweep", sc->sweep, ds, 8);
    ds[nds++] = Dx;
    for (int i = 1; i < nds; i++)   // ascending D
        for (int j = i; j > 0 && ds[j] < ds[j - 1]; j--) { int t = ds[j]; ds[j] = ds[j - 1]; ds[j - 1] = t; }
    cJSON *arr = cJSON_AddArrayToObject(root, "head_size");
    cJSON_AddNumberToObject(root, "head_size_rise_factor", R);
    fprintf(f,
            "Width %d, 2 kinds x %d seeds per head size D = %d / heads, trained at T = %d. Rise: the loss at "
            "%dx (T = %d) minus the loss at 1x, per seed, then the mean [95%% t interval over seeds]. lssar "
            "- softmax: the paired difference at %dx.\n\n"
            "| D | heads | softmax 1x | softmax %dx | softmax rise | lssar p=15 1x | lssar p=15 %dx | lssar "
            "p=15 rise | lssar - softmax at %dx |\n"
            "|---|---|---|---|---|---|---|---|---|\n",
            sc->x_dim, sc->seeds, sc->x_dim, T, R, R * T, R, R, R, R);
    for (int i = 0; i < nds; i++) {
        cJSON *res = headsize_results(out, sc, ds[i]);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "D", ds[i]);
        cJSON_AddNumberToObject(o, "heads", sc->x_dim / ds[i]);
        fprintf(f, "| %d | %d |", ds[i], sc->x_dim / ds[i]);
        double l1[2][MAXS], l16[2][MAXS], r[2][MAXS], d[MAXS];
        int n[2];
        static const char *const G[2] = {"softmax", "lssar-p15"};
        for (int g = 0; g < 2; g++) {
            char buf[96];
            n[g] = group_rise(res, G[g], T, R, l1[g], l16[g], r[g]);
            cJSON *e = cJSON_AddObjectToObject(o, G[g]);
            cJSON_AddItemToObject(e, "loss_1x", lssar_json_number(mean_of(l1[g], n[g])));
            cJSON_AddItemToObject(e, "loss_rx", lssar_json_number(mean_of(l16[g], n[g])));
            fprintf(f, " %.3f | %.3f | %s |", mean_of(l1[g], n[g]), mean_of(l16[g], n[g]),
                    mean_ci(buf, sizeof buf, r[g], n[g], e, "rise"));
        }
        char buf[96];
        int nd = n[0] == n[1] ? n[0] : 0;
        for (int k = 0; k < nd; k++) d[k] = l16[1][k] - l16[0][k];
        fprintf(f, " %s |\n", mean_ci(buf, sizeof buf, d, nd, o, "lssar_minus_softmax_rx"));
        cJSON_AddItemToArray(arr, o);
        cJSON_Delete(res);
    }
    fprintf(f,
            "\nThe causes: each experiment changes one thing in a model of head size D (same width, data, "
            "seeds); its rise is set against the unchanged model of that D, paired by seed (change - "
            "unchanged).\n\n"
            "| experiment | change | kind | 1x | %dx | rise | rise - unchanged rise "
            "|\n|---|---|---|---|---|---|---|\n",
            R);
    cJSON *co = cJSON_AddObjectToObject(root, "causes");
    for (int i = 0; i < NCAUSES; i++) {
        char path[4400];
        snprintf(path, sizeof path, "%s/causes/%s/results.json", out, CAUSES[i].name);
        cJSON *res = lssar_read_json(path), *base = headsize_results(out, sc, CAUSES[i].D);
        cJSON *o = cJSON_AddObjectToObject(co, CAUSES[i].name);
        cJSON_AddStringToObject(o, "change", CAUSES[i].what);
        static const char *const G[2] = {"softmax", "lssar-p15"};
        for (int g = 0; g < 2; g++) {
            double l1[MAXS], l16[MAXS], r[MAXS], b1[MAXS], b16[MAXS], br[MAXS], d[MAXS];
            int n = group_rise(res, G[g], T, R, l1, l16, r);
            if (!n) continue;
            int nb = group_rise(base, G[g], T, R, b1, b16, br);
            if (nb != n) nb = 0;
            for (int k = 0; k < nb; k++) d[k] = r[k] - br[k];
            cJSON *e = cJSON_AddObjectToObject(o, G[g]);
            cJSON_AddItemToObject(e, "loss_1x", lssar_json_number(mean_of(l1, n)));
            cJSON_AddItemToObject(e, "loss_rx", lssar_json_number(mean_of(l16, n)));
            char b_1[96], b_2[96];
            fprintf(f, "| %s | %s | %s | %.3f | %.3f | %s | %s |\n", CAUSES[i].name, CAUSES[i].what, G[g],
                    mean_of(l1, n), mean_of(l16, n), mean_ci(b_1, sizeof b_1, r, n, e, "rise"),
                    mean_ci(b_2, sizeof b_2, d, nb, e, "rise_minus_unchanged"));
        }
        cJSON_Delete(res);
        cJSON_Delete(base);
    }
    fprintf(f, "\n");
}

static void machine(char *buf, size_t cap) {
    char model[256] = "unknown CPU";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "model name", 10)) {
                char *c = strchr(line, ':');
                if (c) { snprintf(model, sizeof model, "%s", c + 2); model[strcspn(model, "\n")] = 0; }
                break;
            }
        fclose(f);
    }
    snprintf(buf, cap, "%s, %ld cores", model, sysconf(_SC_NPROCESSORS_ONLN));
}

static int write_report(const job_plan *p, const repro_scale *sc, const char *out, const char *data) {
    char path[4400], mach[400], when[32];
    machine(mach, sizeof mach);
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    lssar_afile af;
    snprintf(path, sizeof path, "%s/REPORT.md", out);
    int rc = lssar_afile_open(&af, path);
    if (rc) return rc;
    FILE *f = af.f;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "scale", sc->name);
    cJSON_AddStringToObject(root, "version", LSSAR_VERSION);
    cJSON_AddStringToObject(root, "machine", mach);
    cJSON_AddNumberToObject(root, "workers", p->workers);
    double sum = 0;
    int ok = 0;
    for (int i = 0; i < p->n; i++) { sum += p->jobs[i].seconds; ok += p->jobs[i].state == JOB_DONE; }
    fprintf(f, "# lssar reproduce --scale %s\n\n%s.\n\n", sc->name, sc->about);
    fprintf(f,
            "lssar %s, %s, %s; %d jobs at a time, each on one core. %d of %d jobs finished; their wall times "
            "sum to %.0f s (%.2f h of one core); this call took %.0f s. Every job's command: `commands.sh`; "
            "its output: `logs/`.\n\n",
            LSSAR_VERSION, when, mach, p->workers, ok, p->n, sum, sum / 3600, p->wall);
    fprintf(f, "## Data\n\n| file | bytes | SHA-256 |\n|---|---|---|\n");
    cJSON *darr = cJSON_AddArrayToObject(root, "data");
    hash_dir(f, darr, data);
    snprintf(path, sizeof path, "%s/orbits/data", out);
    hash_dir(f, darr, path);
    fprintf(f, "\n## 1. Length extrapolation at head size D = %d (%d heads, width %d)\n\n",
            sc->x_dim / sc->x_heads, sc->x_heads, sc->x_dim);
    include_md(f, out, "extrapolate", "results.md");
    fprintf(f, "![loss against length](extrapolate/loss_vs_length.png)\n\n![loss by "
               "position](extrapolate/loss_vs_position.png)\n\n");
    fprintf(f, "## 1b. The same at head size D = %d (%d heads, width %d), as in our first studies\n\n",
            sc->s_dim / sc->s_heads, sc->s_heads, sc->s_dim);
    include_md(f, out, "extrapolate-d16", "results.md");
    fprintf(f, "![loss against length](extrapolate-d16/loss_vs_length.png)\n\n![loss by "
               "position](extrapolate-d16/loss_vs_position.png)\n\n");
    fprintf(f, "## 1c. Why head size matters\n\n");
    headsize_tables(f, out, sc, root);
    fprintf(f,
            "## 1d. Which stage carries the flat loss: the ablation at D = %d\n\n| run | what changes "
            "|\n|---|---|\n",
            sc->x_dim / sc->x_heads);
    for (int i = 0; i < NABLATION; i++) fprintf(f, "| %s | %s |\n", ABLATION[i].run, ABLATION[i].what);
    fprintf(f, "\n");
    ablation_tables(f, out, sc, root);
    include_md(f, out, "ablation", "results.md");
    fprintf(f, "![loss against length](ablation/loss_vs_length.png)\n\n![loss by "
               "position](ablation/loss_vs_position.png)\n\n");
    fprintf(f, "## 2. Attention statistics (seeds pooled)\n\nAt D = %d:\n\n", sc->x_dim / sc->x_heads);
    include_log(f, out, "attnstats", "pooled over");
    fprintf(f, "At D = %d:\n\n", sc->s_dim / sc->s_heads);
    include_log(f, out, "attnstats_d16", "pooled over");
    fprintf(f,
            "Plots: `attnstats.png`, `attnstats_sink.png` (D = %d: `attnstats_d16*.png`); numbers: "
            "`attnstats*.json`.\n\n## 3. Passkey retrieval\n\n"
            "Models of %d layers, %d heads, width %d, trained at T = %d for %d steps with %.0f%% of the "
            "windows replaced by passkey sequences (%s prompt), %d seed(s) per kind; %d depths x %d keys per "
            "length and model.\n\n",
            sc->s_dim / sc->s_heads, sc->p_layers, sc->p_heads, sc->p_dim, sc->p_seq, sc->p_steps,
            100.0 * sc->p_mix, sc->p_short ? "short: no task sentence" : "full", sc->p_seeds, sc->p_depths,
            sc->p_trials);
    passkey_table(f, out, sc, cJSON_AddObjectToObject(root, "passkey"));
    fprintf(f, "### The passkey models' validation loss at 1x\n\n");
    include_md(f, out, "passkey", "results.md");
    fprintf(f, "## 4. Orbits\n\n");
    include_md(f, out, "orbits", "RESULTS.md");
    fprintf(f, "## Jobs\n\n| job | exit | seconds | |\n|---|---|---|---|\n");
    cJSON *jarr = cJSON_AddArrayToObject(root, "jobs");
    for (int i = 0; i < p->n; i++) {
        const job *j = &p->jobs[i];
        const char *what = j->state == JOB_DONE      ? (j->reused ? "finished in an earlier call" : "")
                           : j->state == JOB_FAILED  ? "FAILED"
                           : j->state == JOB_WAITING ? "not run yet"
                                                     : "not run (a job it needs failed)";
        fprintf(f, "| %s | %d | %.1f | %s |\n", j->name, j->exit, j->seconds, what);
        char *cmd = jobs_command(j);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", j->name);
        cJSON_AddStringToObject(o, "command", cmd ? cmd : "");
        cJSON_AddStringToObject(o, "state",
                                j->state == JOB_DONE     ? "done"
                                : j->state == JOB_FAILED ? "failed"
                                                         : "not run");
        cJSON_AddNumberToObject(o, "exit", j->exit);
        cJSON_AddNumberToObject(o, "seconds", j->seconds);
        cJSON_AddBoolToObject(o, "reused", j->reused);
        cJSON_AddItemToArray(jarr, o);
        free(cmd);
    }
    fprintf(f, "| total | | %.1f | |\n", sum);
    cJSON_AddNumberToObject(root, "job_seconds", sum);
    cJSON_AddNumberToObject(root, "wall_seconds", p->wall);
    // the JSON the commands wrote
    static const struct { const char *key, *file; } PARTS[] = {
        {"extrapolate", "extrapolate/results.json"}, {"extrapolate_d16", "extrapolate-d16/results.json"},
        {"ablation", "ablation/results.json"},
        {"passkey_training", "passkey/results.json"}, {"attnstats", "attnstats.json"},
        {"attnstats_d16", "attnstats_d16.json"}};
    for (int i = 0; i < (int)(sizeof PARTS / sizeof PARTS[0]); i++) {
        snprintf(path, sizeof path, "%s/%s", out, PARTS[i].file);
        cJSON *j = lssar_read_json(path);
        cJSON_AddItemToObject(root, PARTS[i].key, j ? j : cJSON_CreateNull());
    }
    cJSON *orb = cJSON_AddObjectToObject(root, "orbits");
    static const char *const ORUNS[3] = {"softmax", "lssar", "oracle"};
    for (int i = 0; i < 3; i++) {
        cJSON *o = cJSON_AddObjectToObject(orb, ORUNS[i]);
        static const char *const FILES[2] = {"eval", "newton"};
        for (int k = 0; k < 2; k++) {
            snprintf(path, sizeof path, "%s/orbits/%s/%s.json", out, ORUNS[i], FILES[k]);
            cJSON *j = lssar_read_json(path);
            cJSON_AddItemToObject(o, FILES[k], j ? j : cJSON_CreateNull());
        }
    }
    if ((rc = lssar_afile_commit(&af))) { cJSON_Delete(root); return rc; }
    snprintf(path, sizeof path, "%s/report.json", out);
    rc = lssar_write_json(path, root);
    cJSON_Delete(root);
    return rc;
}

int cmd_reproduce(int argc, char **argv) {
    const char *scale_name = "laptop", *out = NULL, *data = "data/demo-sotu-byte";
    int workers = 2, dry = 0, report_only = 0;
    arg_spec specs[] = {
        {"scale", ARG_STR, &scale_name, "smoke or laptop", 0, 0},
        {"out", ARG_STR, &out, "output folder [default runs/reproduce-SCALE]", 0, 0},
        {"data", ARG_STR, &data, "byte-level data folder (built by a first job when missing)", 0, 0},
        {"jobs", ARG_INT, &workers, "jobs at a time (one core each)", 0, 0},
        {"dry-run", ARG_BOOL, &dry, "print the plan's commands, run nothing", 0, 0},
        {"report-only", ARG_BOOL, &report_only,
         "write REPORT.md and report.json from what OUT holds now, run nothing", 0, 0},
        {0}};
    int rc = args_parse("reproduce", ABOUT, specs, argc, argv);
    if (rc >= 0) return rc;
    const repro_scale *sc = NULL;
    for (int i = 0; i < NSCALES; i++) if (!strcmp(scale_name, SCALES[i].name)) sc = &SCALES[i];
    if (!sc) return args_error("reproduce", "--scale must be smoke or laptop, got '%s'", scale_name);
    if (workers < 1 || workers > 64) return args_error("reproduce", "--jobs must be 1..64, got %d", workers);
    if (!data[0]) return args_error("reproduce", "--data is empty");
    char outbuf[4096];
    if (!out) { snprintf(outbuf, sizeof outbuf, "runs/reproduce-%s", sc->name); out = outbuf; }
    if (!dry && lssar_mkdirs(out)) { fprintf(stderr, "lssar reproduce: %s\n", lssar_errmsg()); return 1; }
    static job_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.out = out;
    plan.workers = workers;
    planner pl = {&plan, sc, out, data};
    if ((rc = build_plan(&pl))) {
        fprintf(stderr, "lssar reproduce: %s\n", lssar_errmsg());
        jobs_free(&plan);
        return 1;
    }
    if (report_only) {   // where the plan stands: the tables of whatever has been written
        int done = jobs_load(&plan);
        rc = write_report(&plan, sc, out, data);
        if (rc) fprintf(stderr, "lssar reproduce: %s\n", lssar_errmsg());
        else
            printf("reproduce (%s): %d of %d jobs recorded as done; report -> %s/REPORT.md, %s/report.json\n",
                   sc->name, done, plan.n, out, out);
        jobs_free(&plan);
        return rc ? 1 : 0;
    }
    if (!dry) {
        double total = 0;
        for (int i = 0; i < plan.n; i++) total += plan.jobs[i].cost;
        fprintf(stderr, "reproduce --scale %s: %d jobs, about %.1f h of one core, %d at a time -> %s\n",
                sc->name, plan.n, total / 3600, workers, out);
    }
    rc = jobs_run(&plan, dry);
    if (rc < 0) { fprintf(stderr, "lssar reproduce: %s\n", lssar_errmsg()); jobs_free(&plan); return 1; }
    if (!dry) {
        if (write_report(&plan, sc, out, data)) {
            fprintf(stderr, "lssar reproduce: %s\n", lssar_errmsg());
            rc = 1;
        } else
            printf("reproduce (%s): %s -> %s/REPORT.md, %s/report.json\n", sc->name,
                   rc ? "some jobs failed (above)" : "done", out, out);
    }
    jobs_free(&plan);
    return rc;
}
