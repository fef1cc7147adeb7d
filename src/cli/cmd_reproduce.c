// cmd_reproduce.c - `lssar reproduce --scale laptop`: the paper's comparison as one plan of
// ordinary lssar commands (length extrapolation, attention statistics, passkey, orbits), run on
// --jobs worker processes (jobs.h: dependencies, critical path first, resumable, progress and
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
#include "jobs.h"
#include "lssar.h"
#include "core/json.h"
#include "core/sha256.h"
#include "core/util.h"
#include "exp/passkey.h"

/* The sizes of a scale. Every job runs on one core (--threads 1); the costs are the seconds one
   job took on one core of the reference machine (2-core x86-64, 2026-12), for the order and ETA. */
typedef struct {
    const char *name, *about;
    // 1. length extrapolation (the demo's model, more steps, every kind, `seeds` seeds)
    int x_layers, x_heads, x_dim, x_seq, x_batch, x_steps, x_warmup, x_windows, seeds;
    float x_lr;
    const char *factors;
    // 2. attention statistics over those models
    int a_windows, a_rows;
    // 3. passkey: models trained with a passkey share, then scored at factors x p_seq
    int p_layers, p_heads, p_dim, p_seq, p_batch, p_steps, p_warmup, p_depths, p_trials, p_seeds;
    float p_lr, p_mix;
    // 4. orbits: `lssar orbits run --scale orbits`
    const char *orbits;
    double c_data, c_extrap, c_attnstats, c_ptrain, c_peval, c_orbits;
} repro_scale;

static const repro_scale SCALES[] = {
    {"smoke", "every job at toy size in about a minute: checks the plan, says nothing about attention",
     1, 2, 16, 32, 2, 4, 1, 2, 2, 3e-3f, "1,2", 1, 8,
     1, 2, 16, 260, 2, 3, 1, 2, 2, 1, 3e-3f, 0.75f,
     "smoke", 5, 5, 5, 5, 5, 20},
    {"laptop", "the whole comparison on 2 CPU cores in under 3 hours: 7 attention kinds x 3 seeds for the length "
               "extrapolation, passkey models that first learn the task at 1x, and the orbits laptop scale",
     // extrapolation with 2 layers and 1000 steps (docs/EARLIER_RESULTS.md run A), so that the plan
     // fits on a 2-core AVX2 EPYC, where 4 layers x 2000 steps x 21 models alone took 2 core-hours;
     // the cost estimates are seconds measured there (orbits: 2 two-body models of 36 min plus the stages)
     2, 4, 64, 128, 16, 1000, 50, 32, 3, 3e-3f, "1,2,4,8,16", 4, 64,
     2, 4, 64, 320, 16, 4000, 100, 5, 10, 1, 3e-3f, 0.75f,
     "laptop", 40, 100, 150, 890, 150, 5000},
};
#define NSCALES (int)(sizeof SCALES / sizeof SCALES[0])

/* The runs of the comparison: the kind, the LSSAR power, and the run folder extrapolate makes. */
static const struct { const char *attn; int p; const char *run; } KINDS[] = {
    {"softmax", 0, "softmax"}, {"ssmax", 0, "ssmax"}, {"sigmoid", 0, "sigmoid"}, {"relu", 0, "relu"},
    {"lssa", 15, "lssa"}, {"lssar", 3, "lssar-p3"}, {"lssar", 15, "lssar-p15"},
};
#define NKINDS (int)(sizeof KINDS / sizeof KINDS[0])
#define LSSA 4   // KINDS[LSSA]: the lssa runs, also scored with LSSAR re-weighting at evaluation only

// The name of that evaluation-only run, as extrapolate names it ("lssa+lssar-p15").
static void zeroshot_label(char *buf, size_t cap) { snprintf(buf, cap, "lssa+lssar-p%d", KINDS[LSSA].p); }

static const char *ABOUT =
    "The paper's comparison at laptop scale as one command (issue 17). The plan, every job an ordinary\n"
    "lssar command on one core, --jobs of them at a time:\n"
    "  1. extrapolation: `lssar extrapolate` per kind (softmax, ssmax, sigmoid, relu, lssa (+ its LSSAR\n"
    "     re-weighting at evaluation only), lssar p = 3, lssar p = 15), --seeds each, loss at 1x..16x the\n"
    "     training length with 95% intervals over seeds and the paired difference to softmax; then one\n"
    "     call over all kinds that only gathers their cached results into OUT/extrapolate/results.*\n"
    "  2. attention statistics (`lssar attnstats`, seeds pooled) of those models at 1x, 4x, 16x\n"
    "  3. passkey: per kind a model trained with a share of passkey sequences (`lssar extrapolate\n"
    "     --passkey-mix`, which also measures the same models' ordinary validation loss: the price of the\n"
    "     mix), then `lssar passkey` at 1x..16x its training length (95% Wilson intervals)\n"
    "  4. orbits: `lssar orbits run` (simulation, softmax and lssar world models, next-position accuracy\n"
    "     against the previous-position baseline, force probe, Newton audit, k-NN oracle)\n"
    "Scales: smoke (a minute: the plan's test) and laptop (2 cores, under 3 hours).\n"
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
    "\"machine\", \"jobs\": [{\"name\", \"command\", \"exit\", \"seconds\", \"reused\"}], \"wall_seconds\", \"data\":\n"
    "[{\"file\", \"bytes\", \"sha256\"}], \"extrapolate\", \"passkey_training\", \"attnstats\", \"passkey\": {RUN: ...},\n"
    "\"orbits\": {RUN: {\"eval\", \"newton\"}}} (the JSON the commands wrote).\n"
    "Exit status: 0 done, 2 bad flags, 1 a job failed (the others ran; rerun to continue).";

/* ---------------------------------------------------------------- the plan */
typedef struct {
    job_plan *p;
    const repro_scale *sc;
    const char *out, *data;
} planner;

static void add_model_flags(args_vec *a, int layers, int heads, int dim, int seq, int batch, int steps, int warmup, float lr) {
    args_add(a, "--layers"); args_add(a, "%d", layers); args_add(a, "--heads"); args_add(a, "%d", heads);
    args_add(a, "--dim"); args_add(a, "%d", dim); args_add(a, "--seq"); args_add(a, "%d", seq);
    args_add(a, "--batch"); args_add(a, "%d", batch); args_add(a, "--steps"); args_add(a, "%d", steps);
    args_add(a, "--warmup"); args_add(a, "%d", warmup); args_add(a, "--lr"); args_add(a, "%g", (double)lr);
    args_add(a, "--seed"); args_add(a, "1337"); args_add(a, "--threads"); args_add(a, "1");
}

// One `lssar extrapolate` into OUT/DIR: a kind (k >= 0) or every kind (k < 0: the gathering call,
// which finds every model trained and every evaluation cached). passkey selects the passkey models.
static void extrapolate_args(const planner *pl, args_vec *a, const char *dir, int k, int passkey) {
    const repro_scale *sc = pl->sc;
    args_add(a, "extrapolate"); args_add(a, "--data"); args_add(a, "%s", pl->data);
    args_add(a, "--out"); args_add(a, "%s/%s", pl->out, dir);
    if (k >= 0) {
        args_add(a, "--attn"); args_add(a, "%s", KINDS[k].attn);
        if (KINDS[k].p) { args_add(a, "--lssar-p"); args_add(a, "%d", KINDS[k].p); }
        args_add(a, "--no-plot");   // the kinds share OUT/DIR: only the gathering call draws
    } else {
        args_add(a, "--attn"); args_add(a, "softmax,ssmax,sigmoid,relu,lssa,lssar"); args_add(a, "--lssar-p"); args_add(a, "15,3");
    }
    if (passkey) {
        add_model_flags(a, sc->p_layers, sc->p_heads, sc->p_dim, sc->p_seq, sc->p_batch, sc->p_steps, sc->p_warmup, sc->p_lr);
        args_add(a, "--passkey-mix"); args_add(a, "%g", (double)sc->p_mix);
        args_add(a, "--factors"); args_add(a, "1"); args_add(a, "--seeds"); args_add(a, "%d", sc->p_seeds);
    } else {
        add_model_flags(a, sc->x_layers, sc->x_heads, sc->x_dim, sc->x_seq, sc->x_batch, sc->x_steps, sc->x_warmup, sc->x_lr);
        args_add(a, "--factors"); args_add(a, "%s", sc->factors); args_add(a, "--seeds"); args_add(a, "%d", sc->seeds);
    }
    args_add(a, "--max-windows"); args_add(a, "%d", sc->x_windows); args_add(a, "--quiet");
}

// The run folders of one run over the seeds: D/RUN,D/RUN-s1,... (comma-separated, into buf).
static void seed_list(char *buf, size_t cap, const char *out, const char *dir, const char *run, int seeds) {
    size_t k = 0;
    buf[0] = 0;
    for (int s = 0; s < seeds && k < cap; s++) {
        if (s) k += (size_t)snprintf(buf + k, cap - k, ",");
        if (k < cap) k += (size_t)snprintf(buf + k, cap - k, s ? "%s/%s/%s-s%d" : "%s/%s/%s", out, dir, run, s);
    }
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
        args_add(&a, "--tokenizer"); args_add(&a, "byte"); args_add(&a, "--out"); args_add(&a, "%s", pl->data); args_add(&a, "--quiet");
        data = jobs_add(p, "data", sc->c_data, NULL, 0, &a);
    }
    const int nd = data >= 0;
    // 1. extrapolation, then its gathering call, then the attention statistics
    int xk[NKINDS], pk[NKINDS];
    for (int k = 0; k < NKINDS; k++) {
        extrapolate_args(pl, &a, "extrapolate", k, 0);
        snprintf(name, sizeof name, "extrapolate/%s", KINDS[k].run);
        xk[k] = jobs_add(p, name, sc->c_extrap * sc->seeds * (k == LSSA ? 1.2 : 1), &data, nd, &a);
    }
    extrapolate_args(pl, &a, "extrapolate", -1, 0);
    int xall = jobs_add(p, "extrapolate/all", 10, xk, NKINDS, &a);
    {
        static char models[1 << 14];
        size_t k = 0;
        for (int i = 0; i < NKINDS; i++) {
            char one[4096];
            seed_list(one, sizeof one, pl->out, "extrapolate", KINDS[i].run, sc->seeds);
            k += (size_t)snprintf(models + k, sizeof models - k, "%s%s", i ? "," : "", one);
        }
        args_add(&a, "attnstats"); args_add(&a, "--model"); args_add(&a, "%s", models);
        args_add(&a, "--data"); args_add(&a, "%s/val.bin", pl->data);
        args_add(&a, "--seq"); args_add(&a, "%d,%d,%d", sc->x_seq, 4 * sc->x_seq, 16 * sc->x_seq);
        args_add(&a, "--windows"); args_add(&a, "%d", sc->a_windows); args_add(&a, "--rows"); args_add(&a, "%d", sc->a_rows);
        args_add(&a, "--json"); args_add(&a, "%s/attnstats.json", pl->out); args_add(&a, "--plot"); args_add(&a, "%s/attnstats.png", pl->out);
        args_add(&a, "--threads"); args_add(&a, "1");
        jobs_add(p, "attnstats", sc->c_attnstats, &xall, 1, &a);
    }
    // 3. passkey: training (with its validation loss), the gathering call, the scores
    for (int k = 0; k < NKINDS; k++) {
        extrapolate_args(pl, &a, "passkey", k, 1);
        snprintf(name, sizeof name, "passkey-train/%s", KINDS[k].run);
        pk[k] = jobs_add(p, name, sc->c_ptrain * sc->p_seeds, &data, nd, &a);
    }
    extrapolate_args(pl, &a, "passkey", -1, 1);
    jobs_add(p, "passkey-train/all", 10, pk, NKINDS, &a);
    char lengths[256];
    {
        int f[8], nf = args_int_list("reproduce", "factors", sc->factors, f, 8);
        size_t k = 0;
        for (int i = 0; i < nf; i++) k += (size_t)snprintf(lengths + k, sizeof lengths - k, "%s%d", i ? "," : "", f[i] * sc->p_seq);
    }
    for (int k = 0; k <= NKINDS; k++) {
        // the last: the lssa models scored with LSSAR re-weighting switched on (the fine-tuning-free claim)
        const int zs = k == NKINDS;
        const int src = zs ? LSSA : k;
        char models[4096], zsl[32];
        seed_list(models, sizeof models, pl->out, "passkey", KINDS[src].run, sc->p_seeds);
        zeroshot_label(zsl, sizeof zsl);
        const char *label = zs ? zsl : KINDS[k].run;
        args_add(&a, "passkey"); args_add(&a, "--model"); args_add(&a, "%s", models); args_add(&a, "--lengths"); args_add(&a, "%s", lengths);
        args_add(&a, "--depths"); args_add(&a, "%d", sc->p_depths); args_add(&a, "--trials"); args_add(&a, "%d", sc->p_trials);
        if (zs) { args_add(&a, "--attn"); args_add(&a, "lssar"); args_add(&a, "--p"); args_add(&a, "%d", KINDS[LSSA].p); }
        args_add(&a, "--json"); args_add(&a, "%s/passkey/passkey-%s.json", pl->out, label);
        args_add(&a, "--plot"); args_add(&a, "%s/passkey/passkey-%s.png", pl->out, label);
        args_add(&a, "--threads"); args_add(&a, "1");
        snprintf(name, sizeof name, "passkey/%s", label);
        jobs_add(p, name, sc->c_peval * sc->p_seeds, &pk[src], 1, &a);
    }
    // 4. orbits
    args_add(&a, "orbits"); args_add(&a, "run"); args_add(&a, "--scale"); args_add(&a, "%s", sc->orbits);
    args_add(&a, "--attn"); args_add(&a, "softmax,lssar"); args_add(&a, "--out"); args_add(&a, "%s/orbits", pl->out);
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
            if (c[0] == ']' && c[1] == '(' && strncmp(c + 2, "http", 4)) { fputc('(', f); fprintf(f, "%s/", sub); c++; }
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
    int f_[8], nf = args_int_list("reproduce", "factors", sc->factors, f_, 8);
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
            const cJSON *m = cJSON_GetObjectItemCaseSensitive(r0, "mean"), *ci = cJSON_GetObjectItemCaseSensitive(r0, "ci95");
            if (cJSON_IsNumber(m)) val = m->valuedouble;
            if (cJSON_GetArraySize(ci) == 2) { lo = cJSON_GetArrayItem(ci, 0)->valuedouble; hi = cJSON_GetArrayItem(ci, 1)->valuedouble; }
        }
        fprintf(f, "| %s | %.3f [%.3f, %.3f] |", label, val, lo, hi);
        for (int i = 0; i < nf; i++) {
            int ok = 0, n = 0;
            const cJSON *r;
            cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(j, "results")) {
                const cJSON *L = cJSON_GetObjectItemCaseSensitive(r, "length");
                if (!cJSON_IsNumber(L) || L->valueint != f_[i] * sc->p_seq) continue;
                const cJSON *succ = cJSON_GetObjectItemCaseSensitive(r, "successes"), *tr = cJSON_GetObjectItemCaseSensitive(r, "trials");
                if (cJSON_IsNumber(succ) && cJSON_IsNumber(tr)) { ok += succ->valueint; n += tr->valueint; }
            }
            if (!n) { fprintf(f, " - |"); continue; }
            double wl, wh;
            wilson_interval(ok, n, 1.96, &wl, &wh);
            fprintf(f, " %s%d/%d = %.2f [%.2f, %.2f]%s |", ok * 10 >= n * 9 ? "**" : "", ok, n, (double)ok / n, wl, wh, ok * 10 >= n * 9 ? "**" : "");
        }
        fprintf(f, "\n");
        if (j) cJSON_AddItemToObject(pj, label, j);
    }
    fprintf(f, "\nEach cell: keys retrieved over every depth (and seed) / trials, the share and its 95%% Wilson interval; bold: at least 90%%. "
               "The validation loss is the same models' mean next-token loss on held-out documents at the training length "
               "(%s; `passkey/results.md`). Heatmaps: `passkey/passkey-MODEL.png`.\n\n",
            sc->p_seeds > 1 ? "mean over seeds, 95% t interval over seeds" : "one seed: 95% interval over the windows");
    cJSON_Delete(train);
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
    fprintf(f, "lssar %s, %s, %s; %d jobs at a time, each on one core. %d of %d jobs finished; their wall times sum to %.0f s "
               "(%.2f h of one core); this call took %.0f s. Every job's command: `commands.sh`; its output: `logs/`.\n\n",
            LSSAR_VERSION, when, mach, p->workers, ok, p->n, sum, sum / 3600, p->wall);
    fprintf(f, "## Data\n\n| file | bytes | SHA-256 |\n|---|---|---|\n");
    cJSON *darr = cJSON_AddArrayToObject(root, "data");
    hash_dir(f, darr, data);
    snprintf(path, sizeof path, "%s/orbits/data", out);
    hash_dir(f, darr, path);
    fprintf(f, "\n## 1. Length extrapolation\n\n");
    include_md(f, out, "extrapolate", "results.md");
    fprintf(f, "![loss against length](extrapolate/loss_vs_length.png)\n\n## 2. Attention statistics (seeds pooled)\n\n");
    include_log(f, out, "attnstats", "pooled over");
    fprintf(f, "Plots: `attnstats.png`, `attnstats_sink.png`; numbers: `attnstats.json`.\n\n## 3. Passkey retrieval\n\n"
               "Models of %d layers, width %d, trained at T = %d for %d steps with %.0f%% of the windows replaced by passkey "
               "sequences, %d seed(s) per kind; %d depths x %d keys per length and model.\n\n",
            sc->p_layers, sc->p_dim, sc->p_seq, sc->p_steps, 100.0 * sc->p_mix, sc->p_seeds, sc->p_depths, sc->p_trials);
    passkey_table(f, out, sc, cJSON_AddObjectToObject(root, "passkey"));
    fprintf(f, "### The passkey models' validation loss at 1x\n\n");
    include_md(f, out, "passkey", "results.md");
    fprintf(f, "## 4. Orbits\n\n");
    include_md(f, out, "orbits", "RESULTS.md");
    fprintf(f, "## Jobs\n\n| job | exit | seconds | |\n|---|---|---|---|\n");
    cJSON *jarr = cJSON_AddArrayToObject(root, "jobs");
    for (int i = 0; i < p->n; i++) {
        const job *j = &p->jobs[i];
        const char *what = j->state == JOB_DONE ? (j->reused ? "finished in an earlier call" : "")
                         : j->state == JOB_FAILED ? "FAILED" : "not run (a job it needs failed)";
        fprintf(f, "| %s | %d | %.1f | %s |\n", j->name, j->exit, j->seconds, what);
        char *cmd = jobs_command(j);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", j->name);
        cJSON_AddStringToObject(o, "command", cmd ? cmd : "");
        cJSON_AddStringToObject(o, "state", j->state == JOB_DONE ? "done" : j->state == JOB_FAILED ? "failed" : "not run");
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
        {"extrapolate", "extrapolate/results.json"}, {"passkey_training", "passkey/results.json"}, {"attnstats", "attnstats.json"}};
    for (int i = 0; i < 3; i++) {
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
    int workers = 2, dry = 0;
    arg_spec specs[] = {
        {"scale", ARG_STR, &scale_name, "smoke or laptop", 0, 0},
        {"out", ARG_STR, &out, "output folder [default runs/reproduce-SCALE]", 0, 0},
        {"data", ARG_STR, &data, "byte-level data folder (built by a first job when missing)", 0, 0},
        {"jobs", ARG_INT, &workers, "jobs at a time (one core each)", 0, 0},
        {"dry-run", ARG_BOOL, &dry, "print the plan's commands, run nothing", 0, 0},
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
    if ((rc = build_plan(&pl))) { fprintf(stderr, "lssar reproduce: %s\n", lssar_errmsg()); jobs_free(&plan); return 1; }
    if (!dry) {
        double total = 0;
        for (int i = 0; i < plan.n; i++) total += plan.jobs[i].cost;
        fprintf(stderr, "reproduce --scale %s: %d jobs, about %.1f h of one core, %d at a time -> %s\n", sc->name, plan.n,
                total / 3600, workers, out);
    }
    rc = jobs_run(&plan, dry);
    if (rc < 0) { fprintf(stderr, "lssar reproduce: %s\n", lssar_errmsg()); jobs_free(&plan); return 1; }
    if (!dry) {
        if (write_report(&plan, sc, out, data)) { fprintf(stderr, "lssar reproduce: %s\n", lssar_errmsg()); rc = 1; }
        else printf("reproduce (%s): %s -> %s/REPORT.md, %s/report.json\n", sc->name, rc ? "some jobs failed (above)" : "done", out, out);
    }
    jobs_free(&plan);
    return rc;
}
