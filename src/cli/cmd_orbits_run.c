// cmd_orbits_run.c - `lssar orbits run`: the whole orbits pipeline in one command, one model per
// attention kind side by side: simulate -> train -> orbits eval -> probe -> newton, plus the k-NN
// oracle control; then OUT/RESULTS.md (laws, audits, accuracies) and OUT/forces.png (predicted
// against true |F|, log-log). Each stage calls the library function its subcommand calls
// (src/orbits/tasks.h, train_run), with the options the subcommand's flags would give; the
// equivalent command lines are printed and written to OUT/commands.sh, and RESULTS.md is built
// from the results the stages return.
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cJSON.h>
#include "args.h"
#include "cli/commands.h"
#include "core/json.h"
#include "core/util.h"
#include "model/checkpoint.h"
#include "exp/plot.h"
#include "exp/stats.h"
#include "lssar.h"
#include "model/gpt.h"
#include "orbits/sample.h"
#include "orbits/tasks.h"
#include "train/train.h"


/* A scale's sizes. */
typedef struct {
    const char *name, *about;
    int train_sys, val_sys, force_sys;        // systems simulated
    int layers, heads, dim, seq, batch, steps;
    float lr;
    int eval_sys;                             // validation systems scored by orbits eval
    int probe_steps, probe_batch, keep;       // probe
    float probe_lr;
    int galaxies, rows, iterations, restarts; // newton
    int two_body;    // training and validation systems have one planet (the force set's kind), not 1..10
    int ordered;     // tied heads, the ordinal init of the bins (train --ordinal 7000), no weight decay
                     // (--wd 0: decay would wear the order off the embeddings of the far-out bins, which
                     // training seldom visits) and AdamW eps ORDERED_EPS, instead of the published
                     // untied heads
} scale;

// AdamW eps of the ordered scales. With tied heads every bin's embedding gets a small gradient at
// every step (the softmax's push away from the bins not chosen); eps 1e-8 scales that noise up to
// full-size steps, which moves the seldom-seen far-out bins together and off their order. 1e-4 damps
// it: on 1,000 fresh validation systems the laptop softmax model's mean error beyond 30 AU fell from
// 7.04 (eps 1e-8) and 4.72 (1e-5) to 0.94 AU, and its error against the previous position from
// +0.31 +- 0.17 and +0.16 +- 0.13 to -0.089 +- 0.038 AU (docs/ORBITS_RESULTS.md section 5).
#define ORDERED_EPS_LIT 1e-4
#define ORDERED_EPS ((float)ORDERED_EPS_LIT)
#define ORDERED_EPS_TEXT STRINGIFY(ORDERED_EPS_LIT)   // "1e-4", for the texts below
#define STRINGIFY(x) STRINGIFY_(x)
#define STRINGIFY_(x) #x

static const scale SCALES[] = {
    {"smoke", "every stage in seconds on one CPU core (10 training steps of a 1-layer model): the "
              "recipe's test, not a result",
     40, 10, 40, 1, 2, 16, 999, 1, 10, 1e-3f, 4, 3, 1, 50, 1e-3f, 1, 50, 10, 1, 0, 0},
    {"tiny", "2 CPU cores, < 20 minutes: a smoke test of every stage, not a result",
     200, 20, 200, 2, 2, 32, 999, 2, 60, 1e-3f, 10, 100, 2, 1000, 1e-3f, 3, 300, 20, 1, 0, 0},
    // laptop: short windows (the first 255 rows of a system, --align keeps them at its dt row) give
    // many systems per token; width 64 keeps the two 7003-way heads, which dominate the cost, cheap.
    // What it took to beat the previous position at this size (docs/ORBITS_RESULTS.md): two-body
    // systems (the probe's own kind; a 4-layer model on 1..10 planets learnt only the marginal
    // distribution in 3000 steps), and tied heads with ordered bins (--ordinal: the model need not
    // learn from scratch that bin 3001 is next to bin 3000)
    {"laptop", "one CPU core per model, ~40 min on an AVX2 EPYC (training 36 min); trained on "
               "two-body systems, with tied heads, ordered bins, no weight decay and AdamW eps "
               ORDERED_EPS_TEXT " (not the published recipe: what it took to beat the "
               "previous-position baseline at this size)",
     50000, 1000, 2000, 2, 4, 64, 255, 8, 6000, 3e-3f, 1000, 200, 4, 5000, 1e-3f, 5, 1000, 40, 1, 1, 1},
    {"small", "one GPU (--device cuda), ~10 minutes; on the CPU it runs for hours",
     100000, 200, 10000, 6, 6, 384, 999, 32, 5000, 6e-4f, 200, 1000, 16, 5000, 1e-4f, 5, 1000, 100, 3, 0, 0},
    // paper: 25 epochs of 10M sequences at 64 sequences per step (e.g. 8 GPUs x 8) = 3.9M steps
    {"paper", "the published scale (Vafa et al. 2025): 109M models on 10M systems, 3.9M steps of "
              "64 sequences; runs with --device cuda (one GPU: days), printed only on the CPU",
     10000000, 1000, 10000, 12, 12, 768, 999, 64, 3906250, 6e-4f, 1000, 10000, 16, 5000, 1e-4f,
     5, 1000, 100, 3, 0, 0},
};
#define NSCALES (int)(sizeof SCALES / sizeof SCALES[0])


#define MAXM 16        // models: kinds x --seeds
static FILE *g_log;   // OUT/commands.sh
static int g_dry;
// wall time per stage, for RESULTS.md: 3 simulations, train + eval + probe per model, the oracle,
// newton per model and the oracle
static struct { char what[64]; double seconds; } g_times[3 + 3 * MAXM + 1 + MAXM + 1];
static int g_ntimes;

/* The stages: the library call behind each subcommand, with the errors printed as the
   subcommand prints them and its exit status. */
typedef struct {
    const char *data;          // simulate: OUT/data
    lssar_orb_opts sim;
    train_opts train;
    orb_eval_opts eval;
    orb_eval_result *eval_r;
    orb_probe_task probe;
    orb_oracle_opts oracle;
    orb_probe_summary *probe_r;
    orb_newton_opts newton;
    orb_newton_result *newton_r;
} stage_args;

static int run_simulate(stage_args *s) {
    if (!orb_simulate_run(s->data, &s->sim, stderr)) return 0;
    fprintf(stderr, "lssar orbits simulate: %s\n", lssar_errmsg());
    return 1;
}
static int run_train(stage_args *s) {
    int rc = train_run(&s->train, NULL);
    if (!rc) return 0;
    fprintf(stderr, "lssar train: %s\n", lssar_errmsg()[0] ? lssar_errmsg() : lssar_strerror(rc));
    return rc == LSSAR_E_NAN ? 3 : 1;
}
static int run_eval(stage_args *s) {
    if (!orb_eval_run(&s->eval, s->eval_r)) return 0;
    fprintf(stderr, "lssar orbits eval: %s\n", lssar_errmsg());
    return 1;
}
static int run_probe(stage_args *s) {
    if (!orb_probe_run(&s->probe, s->probe_r)) return 0;
    fprintf(stderr, "lssar orbits probe: %s\n", lssar_errmsg());
    return 1;
}
static int run_oracle(stage_args *s) {
    if (!orb_oracle_run(&s->oracle, s->probe_r)) return 0;
    fprintf(stderr, "lssar orbits oracle: %s\n", lssar_errmsg());
    return 1;
}
static int run_newton(stage_args *s) {
    if (!orb_newton_run(&s->newton, s->newton_r)) return 0;
    fprintf(stderr, "lssar orbits newton: %s\n", lssar_errmsg());
    return 1;
}

// Whether DATA/SPLIT.json (written last by the simulator) records this simulation: a rerun of the
// pipeline does not simulate it again.
static int simulated(const char *data, const char *split, int systems, int seed, int two_body) {
    char path[4400], want[32];
    snprintf(path, sizeof path, "%s/%s.json", data, split);
    cJSON *j = lssar_read_json(path);
    if (!j) return 0;
    snprintf(want, sizeof want, "%d", seed);
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(j, "systems"),
                *s = cJSON_GetObjectItemCaseSensitive(j, "seed"),
                *t = cJSON_GetObjectItemCaseSensitive(j, "two_body");
    int same = cJSON_IsNumber(n) && n->valuedouble == systems && cJSON_IsString(s) &&
               !strcmp(s->valuestring, want) && cJSON_IsBool(t) && cJSON_IsTrue(t) == (two_body != 0);
    cJSON_Delete(j);
    return same;
}

// Whether the model in RUN (an earlier run of this pipeline, to be resumed) was made with other
// settings than these (an earlier version of the scale): resuming it would train that model on.
// 0 when it matches; else 1 with lssar_errmsg saying what differs.
static int other_model(const char *run, const train_opts *to) {
    char mp[4400];
    snprintf(mp, sizeof mp, "%s/" CKPT_MODEL_FILE, run);
    st_file f;
    gpt_config c;
    if (st_open(&f, mp)) return 0;   // unreadable: train's resume reports it
    int rc = ckpt_config_from_meta(&f, &c, NULL);
    st_close(&f);
    if (rc) return 0;
    const gpt_config *tc = &to->model;
    if (c.attn == tc->attn && c.layers == tc->layers && c.heads == tc->heads && c.dim == tc->dim &&
        c.tied == tc->tied) {
        train_state ts;   // the same model; was it trained with the same optimizer?
        snprintf(mp, sizeof mp, "%s/" CKPT_TRAINER_FILE, run);
        // unreadable: resume reports it
        if (ckpt_read_train_state(mp, &ts) || (ts.eps == to->eps && ts.wd == to->wd)) return 0;
        lssar_fail(LSSAR_E_ARG,
                   "%s was trained with AdamW eps %g, weight decay %g in an earlier run; this scale uses eps "
                   "%g, weight decay %g: remove %s (or pass another --out) to train it afresh",
                   run, (double)ts.eps, (double)ts.wd, (double)to->eps, (double)to->wd, run);
        return 1;
    }
    lssar_fail(LSSAR_E_ARG,
               "%s holds a %s model of %d layers, %d heads, width %d, %s heads from an earlier run; this "
               "scale trains %s, %d layers, %d heads, width %d, %s heads: remove %s (or pass another --out) "
               "to train it afresh",
               run, lssar_attn_name(c.attn), c.layers, c.heads, c.dim, c.tied ? "tied" : "untied",
               lssar_attn_name(tc->attn), tc->layers, tc->heads, tc->dim, tc->tied ? "tied" : "untied", run);
    return 1;
}

// Print (and log) the command line of a stage, then run it unless this is a dry run.
static int stage(const char *prefix, int (*fn)(stage_args *), stage_args *sa, args_vec *a) {
    char pre[32];
    snprintf(pre, sizeof pre, "lssar%s", prefix);
    char *line = args_line(a, pre);
    printf("\n$ %s\n", line ? line : pre);
    fflush(stdout);
    if (g_log && line) { fprintf(g_log, "%s\n", line); fflush(g_log); }
    free(line);
    int rc = 0;
    if (!g_dry) {
        double t0 = lssar_now();
        rc = fn(sa);
        double dt = lssar_now() - t0;
        printf("  (%.1f s)\n", dt);
        if (g_ntimes < (int)(sizeof g_times / sizeof g_times[0])) {
            // "train softmax", "newton tiny/lssar/forces.csv", ...: the stage and its first
            // path-like argument
            const char *arg = a->n > 2 ? a->v[2] : "";
            for (int i = 1; i + 1 < a->n; i++)
                if (!strcmp(a->v[i], "--attn") || !strcmp(a->v[i], "--model") ||
                    !strcmp(a->v[i], "--forces") || !strcmp(a->v[i], "--split") ||
                    (!strcmp(a->v[i], "--out") && !strcmp(a->v[0], "train"))) {
                    arg = a->v[i + 1];
                    break;
                }
            snprintf(g_times[g_ntimes].what, sizeof g_times[0].what, "%s %s", a->v[0], arg);
            g_times[g_ntimes++].seconds = dt;
        }
    }
    args_clear(a);
    return rc;
}

// What the stages returned, per model (and the oracle, the last), for RESULTS.md.
typedef struct {
    int have_eval, have_probe, have_newton;
    orb_eval_result eval;
    orb_probe_summary probe;
    orb_newton_result newton;
} model_results;

// A number as a JSON file would have carried it: NaN and infinities (null in JSON) as NaN.
static double fin(double x) { return isfinite(x) ? x : NAN; }

// Predicted against true |F|, log-log, one series per forces.csv.
static int plot_forces(const char *png, const char *out, char names[][32], int n) {
    char paths[10][4400];
    const char *csv[10], *titles[10];
    if (n > 10) n = 10;
    for (int i = 0; i < n; i++) {
        snprintf(paths[i], sizeof paths[i], "%s/%s/forces.csv", out, names[i]);
        csv[i] = paths[i]; titles[i] = names[i];
    }
    return plot_csv_loglog(png, "Force probe: predicted vs true |F| (test rows nearest to training states)",
                           "true |F| (Msun AU / yr^2)", "predicted |F|", csv, titles, n, 5, 4);
}

// The models of one kind over the seeds (models k * seeds .. k * seeds + seeds - 1): per column the
// mean and the half-width of its 95% t interval (exp/stats.h); the next-position columns also as the
// difference to the previous-position baseline (on the same validation rows, so paired per model).
static void pooled_table(FILE *f, char names[][32], const model_results *res, int nk, int seeds,
                         int galaxies) {
    fprintf(f,
            "## Pooled over the %d seeds (mean +- the half-width of its 95%% t interval)\n\n"
            "| kind | accuracy | accuracy - previous position | error (AU) | error - previous position (AU) "
            "| probe mean abs log10 error | laws with m2 | laws = G m1 m2/r^2 (1%%) |\n"
            "|---|---|---|---|---|---|---|---|\n",
            seeds);
    for (int k = 0; k < nk; k++) {
        double v[5][MAXM];
        int m2 = 0, newton = 0;
        for (int s = 0; s < seeds; s++) {
            const model_results *r = &res[k * seeds + s];
            v[0][s] = fin(r->eval.cmp_acc_channel); v[1][s] = v[0][s] - fin(r->eval.base_acc_channel);
            v[2][s] = fin(r->eval.cmp_err_au);      v[3][s] = v[2][s] - fin(r->eval.base_err_au);
            v[4][s] = r->have_probe ? fin(r->probe.mean_abs_log10_error) : NAN;
            if (r->have_newton) {
                m2 += r->newton.galaxies_depending_on_m2;
                newton += r->newton.galaxies_newton_within_1pct;
            }
        }
        fprintf(f, "| %s |", names[k * seeds]);
        for (int c = 0; c < 5; c++) {
            double mean, half;
            exp_mean_ci95(v[c], seeds, &mean, &half);
            fprintf(f, c == 1 || c == 3 ? " %+.4f +- %.4f |" : " %.4f +- %.4f |", mean, half);
        }
        fprintf(f, " %d of %d | %d of %d |\n", m2, seeds * galaxies, newton, seeds * galaxies);
    }
    fprintf(f, "\nThe differences are model minus the previous-position baseline on the same rows: the model "
               "beats the baseline where the accuracy difference is positive and the error difference "
               "negative, with intervals that exclude 0.\n\n");
}

static void write_results(const char *out, const scale *sc, int steps, char names[][32],
                          const model_results *res, int nk, int seeds) {
    char path[4400];
    snprintf(path, sizeof path, "%s/RESULTS.md", out);
    lssar_afile af;
    if (lssar_afile_open(&af, path)) { fprintf(stderr, "lssar orbits run: %s\n", lssar_errmsg()); return; }
    FILE *f = af.f;
    fprintf(f, "# Orbits pipeline, scale `%s`\n\n%s.\n\n", sc->name, sc->about);
    fprintf(f,
            "Data: %d training / %d validation systems (1000 rows each; %s), force set %d two-body systems.\n"
            "Model: %d layers, %d heads, width %d, %s, seq %d, batch %d, %d steps, lr %g, %d seed(s). Probe: "
            "%d steps, batch %d, lr %g, %d test rows kept. Newton: %d galaxies of %d rows, %d iterations, %d "
            "restarts (published: 5 x 1000, 100, 3).\n"
            "Commands: `commands.sh`.\n\n",
            sc->train_sys, sc->val_sys,
            sc->two_body ? "one planet each, as in the force set" : "1..10 planets, as published",
            sc->force_sys, sc->layers, sc->heads, sc->dim,
            sc->ordered ? "tied heads, ordered bins (--ordinal 7000), no weight decay, AdamW "
                          "eps " ORDERED_EPS_TEXT
                        : "untied heads, as published",
            sc->seq, sc->batch, steps, (double)sc->lr, seeds, sc->probe_steps, sc->probe_batch,
            (double)sc->probe_lr, sc->keep, sc->galaxies, sc->rows, sc->iterations, sc->restarts);
    fprintf(f,
            "## Next-position prediction (validation: rows 1..%d of %d systems, those with a previous "
            "step)\n\n"
            "| model | loss | accuracy | error (AU) | previous-position accuracy | previous-position error "
            "(AU) | accuracy - previous | error - previous (AU) |\n"
            "|---|---|---|---|---|---|---|---|\n",
            sc->seq, sc->eval_sys);
    for (int i = 0; i < nk; i++) {
        if (!strcmp(names[i], "oracle") || !res[i].have_eval) continue;
        const orb_eval_result *e = &res[i].eval;
        fprintf(f, "| %s | %.4f | %.4f | %.4f | %.4f | %.4f | %+.4f +- %.4f | %+.4f +- %.4f |\n", names[i],
                fin(e->loss), fin(e->cmp_acc_channel), fin(e->cmp_err_au), fin(e->base_acc_channel),
                fin(e->base_err_au), fin(e->diff_acc), fin(e->diff_acc_half), fin(e->diff_err),
                fin(e->diff_err_half));
    }
    fprintf(f, "\nThe last two columns: model minus previous position per validation system, then the mean "
               "over the systems +- the half-width of its 95%% t interval; the model beats the baseline "
               "where the accuracy difference is positive and the error difference negative, with intervals "
               "that exclude 0.\n\n");
    fprintf(f, "Where the error comes from: the same rows by the target's distance from the origin, mean "
               "error (AU) of the model / of the previous position.\n\n| model |");
    for (int b = 0; b < ORB_EVAL_BANDS; b++)
        if (b + 1 < ORB_EVAL_BANDS) fprintf(f, " %g-%g AU |", ORB_EVAL_BAND_AU[b], ORB_EVAL_BAND_AU[b + 1]);
        else fprintf(f, " >= %g AU |", ORB_EVAL_BAND_AU[b]);
    fprintf(f, "\n|---|");
    for (int b = 0; b < ORB_EVAL_BANDS; b++) fprintf(f, "---|");
    fprintf(f, "\n");
    for (int i = 0; i < nk; i++) {
        if (!strcmp(names[i], "oracle") || !res[i].have_eval) continue;
        const orb_eval_result *e = &res[i].eval;
        fprintf(f, "| %s |", names[i]);
        for (int b = 0; b < ORB_EVAL_BANDS; b++)
            fprintf(f, " %.3f / %.3f (%lld rows) |", fin(e->band_err_au[b]), fin(e->band_base_err_au[b]),
                    (long long)e->band_rows[b]);
        fprintf(f, "\n");
    }
    fprintf(f, "\n");
    if (seeds >= 2) pooled_table(f, names, res, (nk - 1) / seeds, seeds, sc->galaxies);
    fprintf(f, "## Force probe and law audit\n\n"
               "| forces from | probe mean abs log10 error | c of c m1 m2/r^2 (c/G) | c of c m1/r^2 | better "
               "form | rank corr. of m2 with F r^2/m1 | laws with m2 | laws = G m1 m2/r^2 (1%%) |\n"
               "|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < nk; i++) {
        if (!res[i].have_newton) continue;
        const orb_newton_result *a = &res[i].newton;
        fprintf(f, "| %s | %.3f | %.4g (%.4f) | %.4g | `%s` | %.3f | %.0f of %d | %.0f of %d |\n", names[i],
                res[i].have_probe ? fin(res[i].probe.mean_abs_log10_error) : NAN, fin(a->c_m1m2),
                fin(a->c_m1m2_over_G), fin(a->c_m1), a->better_form ? a->better_form : "?",
                fin(a->m2_rank_correlation), (double)a->galaxies_depending_on_m2, sc->galaxies,
                (double)a->galaxies_newton_within_1pct, sc->galaxies);
    }
    fprintf(f, "\n## Laws found (one per galaxy)\n\n");
    for (int i = 0; i < nk; i++) {
        if (!res[i].have_newton) continue;
        const orb_newton_result *a = &res[i].newton;
        static const char *const FEAT[3] = {"r", "m1", "m2"};
        fprintf(f, "- **%s**:\n", names[i]);
        for (int g = 0; g < a->galaxies; g++) {
            fprintf(f, "  - `%s` (depends on:", a->galaxy[g].equation ? a->galaxy[g].equation : "?");
            for (int x = 0; x < 3; x++) if (a->galaxy[g].depends[x]) fprintf(f, " %s", FEAT[x]);
            fprintf(f, ")\n");
        }
    }
    fprintf(f, "\n## Wall time per stage\n\n| stage | seconds |\n|---|---|\n");
    double total = 0;
    for (int i = 0; i < g_ntimes; i++) {
        fprintf(f, "| %s | %.1f |\n", g_times[i].what, g_times[i].seconds);
        total += g_times[i].seconds;
    }
    fprintf(f, "| total | %.1f |\n", total);
    fprintf(f, "\n![predicted vs true |F|](forces.png)\n");
    if (lssar_afile_commit(&af)) fprintf(stderr, "lssar orbits run: %s\n", lssar_errmsg());
}

int cmd_orbits_run(int argc, char **argv) {
    const char *scale_name = "tiny", *attn = "softmax,lssar", *out = NULL, *pos = "rope",
               *device_name = "cpu";
    // said: the error is printed already
    int threads = 0, dry = 0, skip_sim = 0, steps = 0, seeds = 1, said = 0, heads = 0, dim = 0;
    arg_spec specs[] = {
        {"scale", ARG_STR, &scale_name,
         "smoke, tiny, laptop, small or paper (paper runs only with --device cuda)", 0, 0},
        {"attn", ARG_STR, &attn, "comma list of attention kinds, one model each", 0, 0},
        {"pos", ARG_STR, &pos, "positions of the models: rope, learned or none", 0, 0},
        {"out", ARG_STR, &out, "output directory [default runs/orbits-SCALE]", 0, 0},
        {"threads", ARG_INT, &threads, "CPU threads for every stage (0: all)", 0, 0},
        {"dry-run", ARG_BOOL, &dry, "print the commands without running them", 0, 0},
        {"skip-simulate", ARG_BOOL, &skip_sim, "reuse OUT/data from an earlier run", 0, 0},
        {"steps", ARG_INT, &steps, "training steps of each model (0: the scale's)", 0, 0},
        {"heads", ARG_INT, &heads,
         "attention heads of each model (0: the scale's); the head size is --dim / --heads", 0, 0},
        {"dim", ARG_INT, &dim, "width of each model (0: the scale's)", 0, 0},
        {"seeds", ARG_INT, &seeds,
         "train every kind this many times (seeds 1337, 1338, ...; models KIND, KIND-s1, ...); RESULTS.md "
         "pools them",
         0, 0},
        {"device", ARG_STR, &device_name, ARGS_DEVICE_HELP "; training, eval and probe run there", 0, 0},
        {0}};
    int rc = args_parse("orbits run",
                        "The orbits experiment end to end, one model per --attn kind side by side:\n"
                        "  simulate (train, val, two-body force set) -> lssar train -> orbits eval -> orbits "
                        "probe ->\n"
                        "  orbits newton, plus the k-NN oracle control (orbits oracle -> newton).\n"
                        "Scales: smoke (seconds; 10 steps of a 1-layer model: checks the stages, says "
                        "nothing), tiny (2 CPU\n"
                        "cores, < 20 min), laptop (one CPU core per model, ~40 min; two-body systems, tied "
                        "heads with\n"
                        "ordered bins, no weight decay, AdamW eps " ORDERED_EPS_TEXT ": "
                                                                                     "docs/ORBITS_RESULTS.md "
                                                                                     "says why), small (one "
                                                                                     "GPU in ~10 min with\n"
                        "--device cuda; hours on the CPU), paper (the published 109M models, 2 channels, T = "
                        "999, on 10M\n"
                        "systems: runs with --device cuda, one GPU takes days; on the CPU it is printed, not "
                        "run). `lssar recipe orbits-109m` is the paper scale.\n"
                        "Writes OUT/commands.sh, OUT/RESULTS.md, OUT/forces.png.",
                        specs, argc, argv);
    if (rc >= 0) return rc;
    const scale *sc = NULL;
    for (int i = 0; i < NSCALES; i++) if (!strcmp(scale_name, SCALES[i].name)) sc = &SCALES[i];
    if (!sc)
        return args_error("orbits run", "--scale must be smoke, tiny, laptop, small or paper, got '%s'",
                          scale_name);
    if (threads < 0) return args_error("orbits run", "--threads must be >= 0, got %d", threads);
    if (steps < 0) return args_error("orbits run", "--steps must be >= 0 (0: the scale's), got %d", steps);
    if (seeds < 1 || seeds > MAXM)
        return args_error("orbits run", "--seeds must be in 1..%d, got %d", MAXM, seeds);
    lssar_device device;
    if (args_device("orbits run", device_name, &device)) return 2;
    if (heads < 0 || dim < 0)
        return args_error("orbits run", "--heads and --dim must be >= 0 (0: the scale's), got %d and %d",
                          heads, dim);
    const int train_steps = steps ? steps : sc->steps;
    const int n_heads = heads ? heads : sc->heads, width = dim ? dim : sc->dim;
    if (width % n_heads || (width / n_heads) % 2)
        return args_error("orbits run",
                          "the width %d must be a multiple of the heads %d with an even head size (RoPE)",
                          width, n_heads);
    scale sc_run = *sc;   // the scale as run: RESULTS.md reports these sizes
    sc_run.heads = n_heads; sc_run.dim = width;
    sc = &sc_run;
    const char *dev = lssar_device_name(device);
    char kinds[8][32], names[MAXM + 1][32];
    int nk = 0;
    {
        char buf[512];
        snprintf(buf, sizeof buf, "%s", attn);
        for (char *s = strtok(buf, ","); s; s = strtok(NULL, ",")) {
            lssar_attn_kind kind;
            if (args_attn_kind("orbits run", s, &kind)) return 2;
            if (nk == 8) return args_error("orbits run", "--attn: at most 8 kinds");
            snprintf(kinds[nk++], 32, "%s", s);
        }
        if (!nk) return args_error("orbits run", "--attn is empty");
        if (nk * seeds > MAXM)
            return args_error("orbits run", "%d kinds x --seeds %d is more than %d models", nk, seeds, MAXM);
    }
    if (strcmp(pos, "rope") && strcmp(pos, "learned") && strcmp(pos, "none"))
        return args_error("orbits run", "--pos must be rope, learned or none, got '%s'", pos);
    char outbuf[4096];
    if (!out) { snprintf(outbuf, sizeof outbuf, "runs/orbits-%s", sc->name); out = outbuf; }
    const int paper_on_cpu = !strcmp(sc->name, "paper") && device == LSSAR_DEVICE_CPU;
    g_dry = dry || paper_on_cpu;
    if (paper_on_cpu)
        printf("# scale paper: the published recipe (Vafa et al. 2025; spec/orbits.md). Not run on the CPU: "
               "~250B\n"
               "# training tokens take a GPU days (pass --device cuda to run it). The commands, in order:\n");
    char path[4400], data[4200];
    snprintf(data, sizeof data, "%s/data", out);
    if (!g_dry) {
        if (lssar_mkdirs(out)) { fprintf(stderr, "lssar orbits run: %s\n", lssar_errmsg()); return 1; }
        snprintf(path, sizeof path, "%s/commands.sh", out);
        g_log = fopen(path, "w");
        if (g_log)
            fprintf(g_log, "# lssar orbits run --scale %s --attn %s --pos %s --device %s%s\n", sc->name, attn,
                    pos, dev, steps ? " --steps (below)" : "");
    }
    double t0 = lssar_now();
    args_vec a = {0};
    static stage_args sa;              // the options of the stage being run (large: not on the stack)
    // per model (kind-major: kind k seed s is k * seeds + s), then the oracle
    static model_results res[MAXM + 1];
    memset(&sa, 0, sizeof sa);
    memset(res, 0, sizeof res);
    sa.data = data;
    const char *T = threads > 0 ? "--threads" : NULL;
#define THREADS() do { if (T) { args_add(&a, "--threads"); args_add(&a, "%d", threads); } } while (0)
    // 1. data
    if (!skip_sim) {
        static const struct {
            const char *split;
            int seed;
        } sets[3] = {{"train", 1}, {"val", 2}, {"force", 3}};
        for (int i = 0; i < 3; i++) {
            int n = i == 0 ? sc->train_sys : i == 1 ? sc->val_sys : sc->force_sys;
            // the force set always: the probe's systems have one planet
            int two_body = i == 2 || sc->two_body;
            args_add(&a, "simulate");
            args_add(&a, "--out"); args_add(&a, "%s", data);
            args_add(&a, "--split"); args_add(&a, "%s", sets[i].split);
            args_add(&a, "--systems"); args_add(&a, "%d", n);
            args_add(&a, "--seed"); args_add(&a, "%d", sets[i].seed);
            if (two_body) args_add(&a, "--two-body");
            if (i == 2) args_add(&a, "--state");     // the probe's labels
            args_add(&a, "--quiet"); THREADS();
            // what `orbits simulate` makes of these flags
            lssar_orb_defaults(&sa.sim);
            sa.sim.systems = n;
            sa.sim.seed = (uint64_t)sets[i].seed;
            sa.sim.split = sets[i].split;
            sa.sim.two_body = two_body;
            sa.sim.state = i == 2;
            sa.sim.threads = threads;
            sa.sim.progress = 0;
            if (!g_dry && simulated(data, sets[i].split, n, sets[i].seed, two_body)) {
                printf("\n(%s/%s.json: %s already simulated with these flags; not simulated again)\n", data,
                       sets[i].split, sets[i].split);
                args_clear(&a);
                continue;
            }
            if ((rc = stage(" orbits", run_simulate, &sa, &a))) goto fail;
        }
    }
    // training shards: every train_%06d.bin (a dry run lists the first)
    static char shards[1 << 16];
    shards[0] = 0;
    for (int i = 0; i < 1000; i++) {
        struct stat sb;
        snprintf(path, sizeof path, "%s/train_%06d.bin", data, i);
        // a dry run cannot look: the simulator's default is 100000 systems per shard
        if (i > 0 && (g_dry ? (int64_t)i * 100000 >= sc->train_sys : stat(path, &sb) != 0)) break;
        if (strlen(shards) + strlen(path) + 2 >= sizeof shards) break;
        if (i) strcat(shards, ",");
        strcat(shards, path);
    }
    char valpath[4400];
    snprintf(valpath, sizeof valpath, "%s/val_000000.bin", data);
    train_opts defaults;
    train_opts_default(&defaults);
    const int nm = nk * seeds;   // models
    for (int m = 0; m < nm; m++) {
        const int k = m / seeds, s = m % seeds;   // kind, seed index
        if (s) snprintf(names[m], 32, "%s-s%d", kinds[k], s);
        else snprintf(names[m], 32, "%s", kinds[k]);
        char run[4200];
        snprintf(run, sizeof run, "%s/%s", out, names[m]);
        // 2. train
        args_add(&a, "train");
        args_add(&a, "--data"); args_add(&a, "%s", shards);
        args_add(&a, "--val"); args_add(&a, "%s/val_000000.bin", data);
        args_add(&a, "--out"); args_add(&a, "%s", run);
        args_add(&a, "--attn"); args_add(&a, "%s", kinds[k]);
        args_add(&a, "--pos"); args_add(&a, "%s", pos);
        args_add(&a, "--vocab"); args_add(&a, "%d", LSSAR_ORB_VOCAB);
        if (sc->ordered) {
            args_add(&a, "--ordinal"); args_add(&a, "%d", LSSAR_ORB_BINS);
            args_add(&a, "--wd"); args_add(&a, "0");
            args_add(&a, "--eps"); args_add(&a, "%g", (double)ORDERED_EPS);
        }
        else args_add(&a, "--untied");   // the published models' separate heads
        // every window starts at a system's dt row
        args_add(&a, "--align"); args_add(&a, "%d", LSSAR_ORB_ROWS);
        args_add(&a, "--layers"); args_add(&a, "%d", sc->layers);
        args_add(&a, "--heads"); args_add(&a, "%d", sc->heads);
        args_add(&a, "--dim"); args_add(&a, "%d", sc->dim);
        args_add(&a, "--seq"); args_add(&a, "%d", sc->seq);
        args_add(&a, "--batch"); args_add(&a, "%d", sc->batch);
        args_add(&a, "--steps"); args_add(&a, "%d", train_steps);
        args_add(&a, "--lr"); args_add(&a, "%g", (double)sc->lr);
        if (s) {
            args_add(&a, "--seed"); args_add(&a, "%llu", (unsigned long long)(defaults.seed + (uint64_t)s));
        }
        args_add(&a, "--device"); args_add(&a, "%s", dev); args_add(&a, "--quiet"); THREADS();
        // what `lssar train` makes of these flags (no passkey share: batches straight from the shards)
        train_opts *to = &sa.train;
        train_opts_default(to);
        to->data = shards; to->val = valpath; to->out = run;
        lssar_attn_parse(kinds[k], &to->model.attn);  // checked above
        to->model.pos = (lssar_pos)gpt_pos_parse(pos);
        to->model.vocab = LSSAR_ORB_VOCAB; to->align = LSSAR_ORB_ROWS;
        to->model.tied = sc->ordered != 0; to->ordinal = sc->ordered ? LSSAR_ORB_BINS : 0;
        if (sc->ordered) { to->wd = 0; to->eps = ORDERED_EPS; }
        to->model.layers = sc->layers; to->model.heads = sc->heads; to->model.dim = sc->dim;
        to->seq = sc->seq; to->batch = sc->batch; to->steps = train_steps; to->lr = sc->lr;
        to->quiet = 1; to->threads = threads; to->model.device = device;
        to->seed = defaults.seed + (uint64_t)s;
        snprintf(path, sizeof path, "%s/" CKPT_MODEL_FILE, run);
        // an earlier run of this pipeline: continue it (or find it done)
        if (!g_dry && !access(path, F_OK)) {
            if (other_model(run, to)) {
                fprintf(stderr, "lssar orbits run: %s\n", lssar_errmsg());
                rc = 1;
                said = 1;
                goto fail;
            }
            args_add(&a, "--resume");          // the same flags, so the printed command is the one that runs
            to->resume = 1;
        }
        if ((rc = stage("", run_train, &sa, &a))) goto fail;
        // 3. next-position accuracy
        args_add(&a, "eval");
        args_add(&a, "--model"); args_add(&a, "%s", run);
        args_add(&a, "--data"); args_add(&a, "%s", data);
        args_add(&a, "--split"); args_add(&a, "val");
        args_add(&a, "--systems"); args_add(&a, "%d", sc->eval_sys);
        args_add(&a, "--seq"); args_add(&a, "%d", sc->seq);
        args_add(&a, "--json"); args_add(&a, "%s/eval.json", run);
        args_add(&a, "--device"); args_add(&a, "%s", dev);
        args_add(&a, "--quiet");
        char ejson[4400];
        snprintf(ejson, sizeof ejson, "%s/eval.json", run);
        orb_eval_defaults(&sa.eval);
        sa.eval.model = run; sa.eval.data = data; sa.eval.split = "val"; sa.eval.systems = sc->eval_sys;
        sa.eval.seq = sc->seq;   // the rows the model was trained on: rope past them is extrapolation
        sa.eval.json = ejson; sa.eval.progress = 0; sa.eval.report = stdout; sa.eval.device = device;
        sa.eval_r = &res[m].eval;
        if ((rc = stage(" orbits", run_eval, &sa, &a))) goto fail;
        res[m].have_eval = !g_dry;
        // 4. force probe
        args_add(&a, "probe");
        args_add(&a, "--model"); args_add(&a, "%s", run);
        args_add(&a, "--data"); args_add(&a, "%s", data);
        args_add(&a, "--out"); args_add(&a, "%s", run);
        args_add(&a, "--steps"); args_add(&a, "%d", sc->probe_steps);
        args_add(&a, "--batch"); args_add(&a, "%d", sc->probe_batch);
        args_add(&a, "--lr"); args_add(&a, "%g", (double)sc->probe_lr);
        args_add(&a, "--keep"); args_add(&a, "%d", sc->keep);
        args_add(&a, "--device"); args_add(&a, "%s", dev);
        args_add(&a, "--quiet");
        THREADS();
        orb_probe_task_defaults(&sa.probe);
        sa.probe.model = run; sa.probe.data = data; sa.probe.out = run;
        sa.probe.probe.steps = sc->probe_steps;
        sa.probe.probe.batch = sc->probe_batch;
        sa.probe.probe.lr = sc->probe_lr;
        sa.probe.keep = (uint64_t)sc->keep;
        sa.probe.probe.progress = 0;
        sa.probe.threads = threads;
        sa.probe.device = device;
        sa.probe.report = stderr;
        sa.probe_r = &res[m].probe;
        if ((rc = stage(" orbits", run_probe, &sa, &a))) goto fail;
        res[m].have_probe = !g_dry;
    }
    // 5. the oracle control
    snprintf(names[nm], 32, "oracle");
    args_add(&a, "oracle");
    args_add(&a, "--data"); args_add(&a, "%s", data);
    args_add(&a, "--out"); args_add(&a, "%s/oracle", out);
    args_add(&a, "--keep"); args_add(&a, "%d", sc->keep); THREADS();
    char oracle_out[4400];
    snprintf(oracle_out, sizeof oracle_out, "%s/oracle", out);
    orb_oracle_defaults(&sa.oracle);
    sa.oracle.data = data;
    sa.oracle.out = oracle_out;
    sa.oracle.keep = (uint64_t)sc->keep;
    sa.oracle.threads = threads;
    sa.oracle.report = stderr;
    sa.probe_r = &res[nm].probe;
    if ((rc = stage(" orbits", run_oracle, &sa, &a))) goto fail;
    res[nm].have_probe = !g_dry;
    // 6. the law, per model and for the oracle
    for (int k = 0; k <= nm; k++) {
        args_add(&a, "newton"); args_add(&a, "--forces"); args_add(&a, "%s/%s/forces.csv", out, names[k]);
        args_add(&a, "--galaxies"); args_add(&a, "%d", sc->galaxies);
        args_add(&a, "--rows"); args_add(&a, "%d", sc->rows);
        args_add(&a, "--iterations"); args_add(&a, "%d", sc->iterations);
        args_add(&a, "--restarts"); args_add(&a, "%d", sc->restarts);
        args_add(&a, "--json"); args_add(&a, "%s/%s/newton.json", out, names[k]);
        args_add(&a, "--quiet");
        THREADS();
        char forces[4400], njson[4400];
        snprintf(forces, sizeof forces, "%s/%s/forces.csv", out, names[k]);
        snprintf(njson, sizeof njson, "%s/%s/newton.json", out, names[k]);
        orb_newton_defaults(&sa.newton);
        sa.newton.forces = forces; sa.newton.json = njson;
        sa.newton.galaxies = sc->galaxies; sa.newton.rows = sc->rows;
        sa.newton.sr.iterations = sc->iterations; sa.newton.sr.restarts = sc->restarts;
        sa.newton.sr.threads = threads; sa.newton.sr.verbose = 0;
        sa.newton.report = stdout;
        sa.newton_r = &res[k].newton;
        if ((rc = stage(" orbits", run_newton, &sa, &a))) goto fail;
        res[k].have_newton = !g_dry;
    }
    if (g_dry) return 0;
    snprintf(path, sizeof path, "%s/forces.png", out);
    {   // the first seed's model of each kind, and the oracle
        char pn[9][32];
        int np = 0;
        for (int k = 0; k < nk; k++) memcpy(pn[np++], names[k * seeds], 32);
        memcpy(pn[np++], names[nm], 32);
        if (plot_forces(path, out, pn, np))
            fprintf(stderr, "lssar orbits run: no %s: %s\n", path, lssar_errmsg());
    }
    write_results(out, sc, train_steps, names, res, nm + 1, seeds);
    for (int k = 0; k <= nm; k++) orb_newton_result_free(&res[k].newton);
    if (g_log) fclose(g_log);
    printf("\norbits run (%s): done in %.1f s -> %s/RESULTS.md, %s/forces.png\n", sc->name, lssar_now() - t0,
           out, out);
    return 0;
fail:
    args_clear(&a);
    for (int k = 0; k <= MAXM; k++) orb_newton_result_free(&res[k].newton);
    if (g_log) fclose(g_log);
    g_log = NULL;
    if (!said) fprintf(stderr, "lssar orbits run: a stage failed (exit %d); its command is above\n", rc);
    return rc ? rc : 1;
}
