// cmd_orbits_run.c - `lssar orbits run`: the whole orbits pipeline in one command, one model per
// attention kind side by side: simulate -> train -> orbits eval -> probe -> newton, plus the k-NN
// oracle control; then OUT/RESULTS.md (laws, audits, accuracies) and OUT/forces.png (predicted
// against true |F|, log-log). Each stage is the same subcommand a person would type (the exact
// command lines are written to OUT/commands.sh), run in this process.
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cJSON.h>
#include "args.h"
#include "cli/commands.h"
#include "core/util.h"
#include "exp/plot.h"
#include "lssar.h"
#include "orbits/sample.h"


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
} scale;

static const scale SCALES[] = {
    {"tiny", "2 CPU cores, < 20 minutes: a smoke test of every stage, not a result",
     200, 20, 200, 2, 2, 32, 999, 2, 60, 1e-3f, 10, 100, 2, 1000, 1e-3f, 3, 300, 20, 1},
    {"small", "one GPU, ~10 minutes (no GPU backend yet: on CPU it runs, for hours)",
     100000, 200, 10000, 6, 6, 384, 999, 32, 5000, 6e-4f, 200, 1000, 16, 5000, 1e-4f, 5, 1000, 100, 3},
    // paper: 25 epochs of 10M sequences at 64 sequences per step (e.g. 8 GPUs x 8) = 3.9M steps
    {"paper", "the published scale (Vafa et al. 2025): 8 GPUs, days; printed, not run",
     10000000, 1000, 10000, 12, 12, 768, 999, 64, 3906250, 6e-4f, 1000, 10000, 16, 5000, 1e-4f, 5, 1000, 100, 3},
};
#define NSCALES (int)(sizeof SCALES / sizeof SCALES[0])

/* argv builder */
typedef struct { int n; char *v[64]; } argvec;
static void add(argvec *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(argvec *a, const char *fmt, ...) {
    char buf[4600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (a->n < 63) a->v[a->n++] = strdup(buf);
    a->v[a->n] = NULL;
}
static void clear(argvec *a) {
    for (int i = 0; i < a->n; i++) free(a->v[i]);
    a->n = 0;
}

static FILE *g_log;   // OUT/commands.sh
static int g_dry;
static struct { char what[64]; double seconds; } g_times[64];   // wall time per stage, for RESULTS.md
static int g_ntimes;

// Print (and log) the command line of a stage, then run it unless this is a dry run.
static int stage(const char *prefix, int (*fn)(int, char **), argvec *a) {
    printf("\n$ lssar%s", prefix);
    for (int i = 0; i < a->n; i++) printf(" %s", a->v[i]);
    printf("\n");
    fflush(stdout);
    if (g_log) {
        fprintf(g_log, "lssar%s", prefix);
        for (int i = 0; i < a->n; i++) fprintf(g_log, " %s", a->v[i]);
        fprintf(g_log, "\n");
        fflush(g_log);
    }
    int rc = 0;
    if (!g_dry) {
        double t0 = lssar_now();
        if (!fn) { fprintf(stderr, "lssar orbits run: '%s' is not built into this binary\n", a->v[0]); rc = 1; }
        else rc = fn(a->n, a->v);
        double dt = lssar_now() - t0;
        printf("  (%.1f s)\n", dt);
        if (g_ntimes < 64) {
            // "train softmax", "newton tiny/lssar/forces.csv", ...: the stage and its first path-like argument
            const char *arg = a->n > 2 ? a->v[2] : "";
            for (int i = 1; i + 1 < a->n; i++)
                if (!strcmp(a->v[i], "--attn") || !strcmp(a->v[i], "--model") || !strcmp(a->v[i], "--forces") ||
                    !strcmp(a->v[i], "--split")) { arg = a->v[i + 1]; break; }
            snprintf(g_times[g_ntimes].what, sizeof g_times[0].what, "%s %s", a->v[0], arg);
            g_times[g_ntimes++].seconds = dt;
        }
    }
    clear(a);
    return rc;
}

static cJSON *read_json(const char *path) {
    char *text = NULL;
    size_t len = 0;
    if (lssar_read_file(path, &text, &len)) return NULL;
    cJSON *j = cJSON_Parse(text);
    free(text);
    return j;
}

static double num(const cJSON *j, const char *a, const char *b) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, a);
    if (b) x = cJSON_GetObjectItemCaseSensitive(x, b);
    return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

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

static void write_results(const char *out, const scale *sc, char names[][32], int nk) {
    char path[4400];
    snprintf(path, sizeof path, "%s/RESULTS.md", out);
    lssar_afile af;
    if (lssar_afile_open(&af, path)) { fprintf(stderr, "lssar orbits run: %s\n", lssar_errmsg()); return; }
    FILE *f = af.f;
    fprintf(f, "# Orbits pipeline, scale `%s`\n\n%s.\n\n", sc->name, sc->about);
    fprintf(f, "Data: %d training / %d validation systems (1000 rows each), force set %d two-body systems.\n"
               "Model: %d layers, %d heads, width %d, seq %d, batch %d, %d steps, lr %g. Probe: %d steps, batch %d, lr %g, "
               "%d test rows kept. Newton: %d galaxies of %d rows, %d iterations, %d restarts (published: 5 x 1000, 100, 3).\n"
               "Commands: `commands.sh`.\n\n",
            sc->train_sys, sc->val_sys, sc->force_sys, sc->layers, sc->heads, sc->dim, sc->seq, sc->batch, sc->steps,
            (double)sc->lr, sc->probe_steps, sc->probe_batch, (double)sc->probe_lr, sc->keep, sc->galaxies, sc->rows,
            sc->iterations, sc->restarts);
    fprintf(f, "## Next-position prediction (validation, rows with a previous step)\n\n"
               "| model | loss | accuracy | error (AU) | previous-position accuracy | previous-position error (AU) |\n"
               "|---|---|---|---|---|---|\n");
    for (int i = 0; i < nk; i++) {
        if (!strcmp(names[i], "oracle")) continue;
        snprintf(path, sizeof path, "%s/%s/eval.json", out, names[i]);
        cJSON *j = read_json(path);
        if (!j) continue;
        fprintf(f, "| %s | %.4f | %.4f | %.4f | %.4f | %.4f |\n", names[i], num(j, "loss", NULL),
                num(cJSON_GetObjectItem(j, "compared"), "model", "accuracy"),
                num(cJSON_GetObjectItem(j, "compared"), "model", "error_au"),
                num(cJSON_GetObjectItem(j, "compared"), "previous_position", "accuracy"),
                num(cJSON_GetObjectItem(j, "compared"), "previous_position", "error_au"));
        cJSON_Delete(j);
    }
    fprintf(f, "\n## Force probe and law audit\n\n"
               "| forces from | probe mean abs log10 error | c of c m1 m2/r^2 (c/G) | c of c m1/r^2 | better form | rank corr. of m2 with F r^2/m1 | laws with m2 | laws = G m1 m2/r^2 (1%%) |\n"
               "|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < nk; i++) {
        snprintf(path, sizeof path, "%s/%s/newton.json", out, names[i]);
        cJSON *j = read_json(path);
        if (!j) continue;
        snprintf(path, sizeof path, "%s/%s/probe.json", out, names[i]);
        cJSON *p = read_json(path);
        const cJSON *a = cJSON_GetObjectItem(j, "audit");
        const cJSON *bf = cJSON_GetObjectItem(a, "better_form");
        fprintf(f, "| %s | %.3f | %.4g (%.4f) | %.4g | `%s` | %.3f | %.0f of %d | %.0f of %d |\n", names[i],
                p ? num(p, "mean_abs_log10_error", NULL) : NAN, num(a, "c_m1m2", NULL), num(a, "c_m1m2_over_G", NULL),
                num(a, "c_m1", NULL), cJSON_IsString(bf) ? bf->valuestring : "?", num(a, "m2_rank_correlation", NULL),
                num(a, "galaxies_depending_on_m2", NULL),
                sc->galaxies, num(a, "galaxies_newton_within_1pct", NULL), sc->galaxies);
        cJSON_Delete(p);
        cJSON_Delete(j);
    }
    fprintf(f, "\n## Laws found (one per galaxy)\n\n");
    for (int i = 0; i < nk; i++) {
        snprintf(path, sizeof path, "%s/%s/newton.json", out, names[i]);
        cJSON *j = read_json(path);
        if (!j) continue;
        fprintf(f, "- **%s**:\n", names[i]);
        const cJSON *g;
        cJSON_ArrayForEach(g, cJSON_GetObjectItem(j, "galaxies")) {
            const cJSON *e = cJSON_GetObjectItem(g, "equation"), *d = cJSON_GetObjectItem(g, "depends_on"), *x;
            fprintf(f, "  - `%s` (depends on:", cJSON_IsString(e) ? e->valuestring : "?");
            cJSON_ArrayForEach(x, d) fprintf(f, " %s", cJSON_IsString(x) ? x->valuestring : "?");
            fprintf(f, ")\n");
        }
        cJSON_Delete(j);
    }
    fprintf(f, "\n## Wall time per stage\n\n| stage | seconds |\n|---|---|\n");
    double total = 0;
    for (int i = 0; i < g_ntimes; i++) { fprintf(f, "| %s | %.1f |\n", g_times[i].what, g_times[i].seconds); total += g_times[i].seconds; }
    fprintf(f, "| total | %.1f |\n", total);
    fprintf(f, "\n![predicted vs true |F|](forces.png)\n");
    if (lssar_afile_commit(&af)) fprintf(stderr, "lssar orbits run: %s\n", lssar_errmsg());
}

int cmd_orbits_run(int argc, char **argv) {
    const char *scale_name = "tiny", *attn = "softmax,lssar", *out = NULL, *pos = "rope";
    int threads = 0, dry = 0, skip_sim = 0;
    arg_spec specs[] = {
        {"scale", ARG_STR, &scale_name, "tiny, small or paper (paper is printed, never run)", 0, 0},
        {"attn", ARG_STR, &attn, "comma list of attention kinds, one model each", 0, 0},
        {"pos", ARG_STR, &pos, "positions of the models: rope, learned or none", 0, 0},
        {"out", ARG_STR, &out, "output directory [default runs/orbits-SCALE]", 0, 0},
        {"threads", ARG_INT, &threads, "CPU threads for every stage (0: all)", 0, 0},
        {"dry-run", ARG_BOOL, &dry, "print the commands without running them", 0, 0},
        {"skip-simulate", ARG_BOOL, &skip_sim, "reuse OUT/data from an earlier run", 0, 0},
        {0}};
    int rc = args_parse("orbits run",
                        "The orbits experiment end to end, one model per --attn kind side by side:\n"
                        "  simulate (train, val, two-body force set) -> lssar train -> orbits eval -> orbits probe ->\n"
                        "  orbits newton, plus the k-NN oracle control (orbits oracle -> newton).\n"
                        "Scales: tiny (2 CPU cores, < 20 min; a smoke test), small (sized for one GPU in ~10 min; no GPU\n"
                        "backend yet, so it runs on CPU for hours), paper (the published 109M models on 10M systems: a\n"
                        "multi-GPU recipe, printed only). Writes OUT/commands.sh, OUT/RESULTS.md, OUT/forces.png.",
                        specs, argc, argv);
    if (rc >= 0) return rc;
    const scale *sc = NULL;
    for (int i = 0; i < NSCALES; i++) if (!strcmp(scale_name, SCALES[i].name)) sc = &SCALES[i];
    if (!sc) return args_error("orbits run", "--scale must be tiny, small or paper, got '%s'", scale_name);
    if (threads < 0) return args_error("orbits run", "--threads must be >= 0, got %d", threads);
    char kinds[8][32], names[10][32];
    int nk = 0;
    {
        char buf[512];
        snprintf(buf, sizeof buf, "%s", attn);
        for (char *s = strtok(buf, ","); s; s = strtok(NULL, ",")) {
            if (lssar_attn_parse(s) < 0) return args_error("orbits run", "--attn: unknown kind '%s' (softmax, ssmax, lssa, lssar)", s);
            if (nk == 8) return args_error("orbits run", "--attn: at most 8 kinds");
            snprintf(kinds[nk++], 32, "%s", s);
        }
        if (!nk) return args_error("orbits run", "--attn is empty");
    }
    if (strcmp(pos, "rope") && strcmp(pos, "learned") && strcmp(pos, "none"))
        return args_error("orbits run", "--pos must be rope, learned or none, got '%s'", pos);
    char outbuf[4096];
    if (!out) { snprintf(outbuf, sizeof outbuf, "runs/orbits-%s", sc->name); out = outbuf; }
    g_dry = dry || !strcmp(sc->name, "paper");
    if (!strcmp(sc->name, "paper"))
        printf("# scale paper: the published recipe (Vafa et al. 2025; spec/orbits.md). Not run here: ~20B training\n"
               "# tokens need 8 GPUs for days, and this build has no GPU backend yet. The commands, in order:\n");
    char path[4400], data[4200];
    snprintf(data, sizeof data, "%s/data", out);
    if (!g_dry) {
        if (lssar_mkdirs(out)) { fprintf(stderr, "lssar orbits run: %s\n", lssar_errmsg()); return 1; }
        snprintf(path, sizeof path, "%s/commands.sh", out);
        g_log = fopen(path, "w");
        if (g_log) fprintf(g_log, "# lssar orbits run --scale %s --attn %s --pos %s\n", sc->name, attn, pos);
    }
    double t0 = lssar_now();
    argvec a = {0};
    const char *T = threads > 0 ? "--threads" : NULL;
#define THREADS() do { if (T) { add(&a, "--threads"); add(&a, "%d", threads); } } while (0)
    // 1. data
    if (!skip_sim) {
        static const struct { const char *split; int seed, two_body; } sets[3] = {{"train", 1, 0}, {"val", 2, 0}, {"force", 3, 1}};
        for (int i = 0; i < 3; i++) {
            int n = i == 0 ? sc->train_sys : i == 1 ? sc->val_sys : sc->force_sys;
            add(&a, "simulate"); add(&a, "--out"); add(&a, "%s", data); add(&a, "--split"); add(&a, "%s", sets[i].split);
            add(&a, "--systems"); add(&a, "%d", n); add(&a, "--seed"); add(&a, "%d", sets[i].seed);
            if (sets[i].two_body) add(&a, "--two-body");
            add(&a, "--quiet"); THREADS();
            if ((rc = stage(" orbits", cmd_orbits_simulate, &a))) goto fail;
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
    for (int k = 0; k < nk; k++) {
        char run[4200];
        snprintf(run, sizeof run, "%s/%s", out, kinds[k]);
        memcpy(names[k], kinds[k], 32);
        // 2. train
        add(&a, "train"); add(&a, "--data"); add(&a, "%s", shards); add(&a, "--val"); add(&a, "%s/val_000000.bin", data);
        add(&a, "--out"); add(&a, "%s", run); add(&a, "--attn"); add(&a, "%s", kinds[k]); add(&a, "--pos"); add(&a, "%s", pos);
        add(&a, "--vocab"); add(&a, "%d", LSSAR_ORB_VOCAB); add(&a, "--untied");
        add(&a, "--align"); add(&a, "%d", LSSAR_ORB_ROWS);   // every window starts at a system's dt row
        add(&a, "--layers"); add(&a, "%d", sc->layers); add(&a, "--heads"); add(&a, "%d", sc->heads); add(&a, "--dim"); add(&a, "%d", sc->dim);
        add(&a, "--seq"); add(&a, "%d", sc->seq); add(&a, "--batch"); add(&a, "%d", sc->batch); add(&a, "--steps"); add(&a, "%d", sc->steps);
        add(&a, "--lr"); add(&a, "%g", (double)sc->lr); add(&a, "--quiet"); THREADS();
        if ((rc = stage("", cmd_train, &a))) goto fail;
        // 3. next-position accuracy
        add(&a, "eval"); add(&a, "--model"); add(&a, "%s", run); add(&a, "--data"); add(&a, "%s", data); add(&a, "--split"); add(&a, "val");
        add(&a, "--systems"); add(&a, "%d", sc->eval_sys); add(&a, "--json"); add(&a, "%s/eval.json", run); add(&a, "--quiet");
        if ((rc = stage(" orbits", cmd_orbits_eval, &a))) goto fail;
        // 4. force probe
        add(&a, "probe"); add(&a, "--model"); add(&a, "%s", run); add(&a, "--data"); add(&a, "%s", data); add(&a, "--out"); add(&a, "%s", run);
        add(&a, "--steps"); add(&a, "%d", sc->probe_steps); add(&a, "--batch"); add(&a, "%d", sc->probe_batch);
        add(&a, "--lr"); add(&a, "%g", (double)sc->probe_lr); add(&a, "--keep"); add(&a, "%d", sc->keep); add(&a, "--quiet"); THREADS();
        if ((rc = stage(" orbits", cmd_orbits_probe, &a))) goto fail;
    }
    // 5. the oracle control
    snprintf(names[nk], 32, "oracle");
    add(&a, "oracle"); add(&a, "--data"); add(&a, "%s", data); add(&a, "--out"); add(&a, "%s/oracle", out);
    add(&a, "--keep"); add(&a, "%d", sc->keep); THREADS();
    if ((rc = stage(" orbits", cmd_orbits_oracle, &a))) goto fail;
    // 6. the law, per model and for the oracle
    for (int k = 0; k <= nk; k++) {
        add(&a, "newton"); add(&a, "--forces"); add(&a, "%s/%s/forces.csv", out, names[k]);
        add(&a, "--galaxies"); add(&a, "%d", sc->galaxies); add(&a, "--rows"); add(&a, "%d", sc->rows);
        add(&a, "--iterations"); add(&a, "%d", sc->iterations); add(&a, "--restarts"); add(&a, "%d", sc->restarts);
        add(&a, "--json"); add(&a, "%s/%s/newton.json", out, names[k]); add(&a, "--quiet"); THREADS();
        if ((rc = stage(" orbits", cmd_orbits_newton, &a))) goto fail;
    }
    if (g_dry) return 0;
    snprintf(path, sizeof path, "%s/forces.png", out);
    if (plot_forces(path, out, names, nk + 1)) fprintf(stderr, "lssar orbits run: no %s: %s\n", path, lssar_errmsg());
    write_results(out, sc, names, nk + 1);
    if (g_log) fclose(g_log);
    printf("\norbits run (%s): done in %.1f s -> %s/RESULTS.md, %s/forces.png\n", sc->name, lssar_now() - t0, out, out);
    return 0;
fail:
    clear(&a);
    if (g_log) fclose(g_log);
    g_log = NULL;
    fprintf(stderr, "lssar orbits run: a stage failed (exit %d); its command is above\n", rc);
    return rc ? rc : 1;
}
