// orbits_run.c - the stages of `lssar orbits run` as one plan of lssar commands; see orbits_run.h.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cJSON.h>
#include "exp/orbits_run.h"
#include "core/json.h"
#include "core/util.h"
#include "lssar.h"
#include "model/checkpoint.h"
#include "model/gpt.h"
#include "train/train.h"

static const orbits_scale SCALES[] = {
    {.name = "smoke",
     .about = "every stage in seconds on one CPU core (10 training steps of a 1-layer model): the "
              "recipe's test, not a result",
     .train_sys = 40, .val_sys = 10, .force_sys = 40,
     .layers = 1, .heads = 2, .dim = 16, .seq = 999, .batch = 1, .steps = 10, .lr = 1e-3f,
     .eval_sys = 4, .probe_steps = 3, .probe_batch = 1, .keep = 50, .probe_lr = 1e-3f,
     .galaxies = 1, .rows = 50, .iterations = 10, .restarts = 1},
    {.name = "tiny", .about = "2 CPU cores, < 20 minutes: a smoke test of every stage, not a result",
     .train_sys = 200, .val_sys = 20, .force_sys = 200,
     .layers = 2, .heads = 2, .dim = 32, .seq = 999, .batch = 2, .steps = 60, .lr = 1e-3f,
     .eval_sys = 10, .probe_steps = 100, .probe_batch = 2, .keep = 1000, .probe_lr = 1e-3f,
     .galaxies = 3, .rows = 300, .iterations = 20, .restarts = 1},
    // laptop: short windows (the first 255 rows of a system, --align keeps them at its dt row) give
    // many systems per token; width 64 keeps the two 7003-way heads, which dominate the cost, cheap.
    // What it took to beat the previous position at this size (docs/ORBITS_RESULTS.md): two-body
    // systems (the probe's own kind; a 4-layer model on 1..10 planets learnt only the marginal
    // distribution), and tied heads with ordered bins (--ordinal: the model need not learn from
    // scratch that bin 3001 is next to bin 3000)
    {.name = "laptop",
     .about = "one CPU core per model, ~40 min on an AVX2 EPYC (training 36 min); trained on "
              "two-body systems, with tied heads, ordered bins, no weight decay and AdamW eps "
              ORBITS_ORDERED_EPS_TEXT " (not the published recipe: what it took to beat the "
              "previous-position baseline at this size)",
     .train_sys = 50000, .val_sys = 1000, .force_sys = 2000,
     .layers = 2, .heads = 4, .dim = 64, .seq = 255, .batch = 8, .steps = 6000, .lr = 3e-3f,
     .eval_sys = 1000, .probe_steps = 200, .probe_batch = 4, .keep = 5000, .probe_lr = 1e-3f,
     .galaxies = 5, .rows = 1000, .iterations = 40, .restarts = 1, .two_body = 1, .ordered = 1},
    {.name = "small", .about = "one GPU (--device cuda), ~10 minutes; on the CPU it runs for hours",
     .train_sys = 100000, .val_sys = 200, .force_sys = 10000,
     .layers = 6, .heads = 6, .dim = 384, .seq = 999, .batch = 32, .steps = 5000, .lr = 6e-4f,
     .eval_sys = 200, .probe_steps = 1000, .probe_batch = 16, .keep = 5000, .probe_lr = 1e-4f,
     .galaxies = 5, .rows = 1000, .iterations = 100, .restarts = 3},
    // paper: 25 epochs of 10M sequences at 64 sequences per step (e.g. 8 GPUs x 8) = 3.9M steps
    {.name = "paper",
     .about = "the published scale (Vafa et al. 2025): 109M models on 10M systems, 3.9M steps of "
              "64 sequences; runs with --device cuda (one GPU: days), printed only on the CPU",
     .train_sys = 10000000, .val_sys = 1000, .force_sys = 10000,
     .layers = 12, .heads = 12, .dim = 768, .seq = 999, .batch = 64, .steps = 3906250, .lr = 6e-4f,
     .eval_sys = 1000, .probe_steps = 10000, .probe_batch = 16, .keep = 5000, .probe_lr = 1e-4f,
     .galaxies = 5, .rows = 1000, .iterations = 100, .restarts = 3},
};

const orbits_scale *orbits_scale_find(const char *name) {
    for (size_t i = 0; i < sizeof SCALES / sizeof SCALES[0]; i++)
        if (!strcmp(name, SCALES[i].name)) return &SCALES[i];
    return NULL;
}

int orbits_model_names(const orbits_run_opts *o, char names[][32]) {
    const int nm = o->nkinds * o->seeds;
    for (int m = 0; m < nm; m++) {
        if (m % o->seeds) snprintf(names[m], 32, "%s-s%d", o->kinds[m / o->seeds], m % o->seeds);
        else snprintf(names[m], 32, "%s", o->kinds[m / o->seeds]);
    }
    snprintf(names[nm], 32, "oracle");
    return nm;
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
// settings than the scale's (an earlier version of the scale): resuming it would train that model
// on. 0 when it matches; else 1 with lssar_errmsg saying what differs.
static int other_model(const char *run, const orbits_scale *sc, const char *attn) {
    char mp[4400];
    snprintf(mp, sizeof mp, "%s/" CKPT_MODEL_FILE, run);
    st_file f;
    gpt_config c;
    if (st_open(&f, mp)) return 0;   // unreadable: train's resume reports it
    int rc = ckpt_config_from_meta(&f, &c, NULL);
    st_close(&f);
    if (rc) return 0;
    lssar_attn_kind kind;
    lssar_attn_parse(attn, &kind);   // checked by the caller
    train_opts d;
    train_opts_default(&d);
    const float eps = sc->ordered ? ORBITS_ORDERED_EPS : d.eps, wd = sc->ordered ? 0 : d.wd;
    const int tied = sc->ordered != 0;
    if (c.attn == kind && c.layers == sc->layers && c.heads == sc->heads && c.dim == sc->dim &&
        c.tied == tied) {
        train_state ts;   // the same model; was it trained with the same optimizer?
        snprintf(mp, sizeof mp, "%s/" CKPT_TRAINER_FILE, run);
        // unreadable: resume reports it
        if (ckpt_read_train_state(mp, &ts) || (ts.eps == eps && ts.wd == wd)) return 0;
        lssar_fail(LSSAR_E_ARG,
                   "%s was trained with AdamW eps %g, weight decay %g in an earlier run; this scale uses eps "
                   "%g, weight decay %g: remove %s (or pass another --out) to train it afresh",
                   run, (double)ts.eps, (double)ts.wd, (double)eps, (double)wd, run);
        return 1;
    }
    lssar_fail(LSSAR_E_ARG,
               "%s holds a %s model of %d layers, %d heads, width %d, %s heads from an earlier run; this "
               "scale trains %s, %d layers, %d heads, width %d, %s heads: remove %s (or pass another --out) "
               "to train it afresh",
               run, lssar_attn_name(c.attn), c.layers, c.heads, c.dim, c.tied ? "tied" : "untied",
               lssar_attn_name(kind), sc->layers, sc->heads, sc->dim, tied ? "tied" : "untied", run);
    return 1;
}

/* ---------------------------------------------------------------- the stages */
typedef struct {
    const orbits_run_opts *o;
    job_plan *plan;
    plan_inline in;
    char data[4200];
} pipeline;

// "train runs/x/softmax", "simulate val", "newton runs/x/oracle/forces.csv": the stage and its
// first path-like argument, the job's name (RESULTS.md's wall-time table)
static void stage_name(const args_vec *a, char *out, size_t cap) {
    const int o = a->n > 1 && !strcmp(a->v[0], "orbits");   // `orbits SUBCOMMAND`
    const char *arg = a->n > o + 2 ? a->v[o + 2] : "";
    for (int i = o + 1; i + 1 < a->n; i++)
        if (!strcmp(a->v[i], "--attn") || !strcmp(a->v[i], "--model") || !strcmp(a->v[i], "--forces") ||
            !strcmp(a->v[i], "--split") || (!strcmp(a->v[i], "--out") && !strcmp(a->v[o], "train"))) {
            arg = a->v[i + 1];
            break;
        }
    snprintf(out, cap, "%s %s", a->v[o], arg);
}

// Add the command in a to the plan and run it (the plan runs its new jobs only).
static int run_step(pipeline *pl, args_vec *a) {
    char name[64];
    stage_name(a, name, sizeof name);
    if (jobs_add(pl->plan, name, 1, NULL, 0, a) < 0) return 1;
    return jobs_run_inline(pl->plan, &pl->in);
}

static void add_threads(const orbits_run_opts *o, args_vec *a) {
    if (o->threads > 0) { args_add(a, "--threads"); args_add(a, "%d", o->threads); }
}

// 1. the training, validation and force sets (the force set always two-body, with the probe's labels)
static int simulate_stages(pipeline *pl) {
    const orbits_run_opts *o = pl->o;
    static const struct { const char *split; int seed; } SETS[3] = {{"train", 1}, {"val", 2}, {"force", 3}};
    for (int i = 0; i < 3; i++) {
        const int n = i == 0 ? o->scale.train_sys : i == 1 ? o->scale.val_sys : o->scale.force_sys;
        const int two_body = i == 2 || o->scale.two_body;
        if (!o->dry && simulated(pl->data, SETS[i].split, n, SETS[i].seed, two_body)) {
            printf("\n(%s/%s.json: %s already simulated with these flags; not simulated again)\n", pl->data,
                   SETS[i].split, SETS[i].split);
            continue;
        }
        args_vec a = {0};
        args_add(&a, "orbits"); args_add(&a, "simulate");
        args_add(&a, "--out"); args_add(&a, "%s", pl->data);
        args_add(&a, "--split"); args_add(&a, "%s", SETS[i].split);
        args_add(&a, "--systems"); args_add(&a, "%d", n);
        args_add(&a, "--seed"); args_add(&a, "%d", SETS[i].seed);
        if (two_body) args_add(&a, "--two-body");
        if (i == 2) args_add(&a, "--state");
        args_add(&a, "--quiet");
        add_threads(o, &a);
        int rc = run_step(pl, &a);
        if (rc) return rc;
    }
    return 0;
}

// Every training shard DATA/train_%06d.bin, comma-separated (a dry run cannot look: the
// simulator's default is 100000 systems per shard).
static void train_shards(const pipeline *pl, char *shards, size_t cap) {
    char path[4400];
    shards[0] = 0;
    for (int i = 0; i < 1000; i++) {
        struct stat sb;
        snprintf(path, sizeof path, "%s/train_%06d.bin", pl->data, i);
        if (i > 0 && (pl->o->dry ? (int64_t)i * 100000 >= pl->o->scale.train_sys : stat(path, &sb) != 0))
            break;
        if (strlen(shards) + strlen(path) + 2 >= cap) break;
        if (i) strcat(shards, ",");
        strcat(shards, path);
    }
}

// 2. train model m (a rerun resumes it), 3. its next-position accuracy, 4. its force probe. said:
// the error is printed already.
static int model_stages(pipeline *pl, int m, const char *name, const char *shards, int *said) {
    const orbits_run_opts *o = pl->o;
    const orbits_scale *sc = &o->scale;
    const char *kind = o->kinds[m / o->seeds];
    char run[4300], path[4400];
    snprintf(run, sizeof run, "%s/%s", o->out, name);
    args_vec a = {0};
    args_add(&a, "train");
    args_add(&a, "--data"); args_add(&a, "%s", shards);
    args_add(&a, "--val"); args_add(&a, "%s/val_000000.bin", pl->data);
    args_add(&a, "--out"); args_add(&a, "%s", run);
    args_add(&a, "--attn"); args_add(&a, "%s", kind);
    args_add(&a, "--pos"); args_add(&a, "%s", o->pos);
    args_add(&a, "--vocab"); args_add(&a, "%d", LSSAR_ORB_VOCAB);
    if (sc->ordered) {
        args_add(&a, "--ordinal"); args_add(&a, "%d", LSSAR_ORB_BINS);
        args_add(&a, "--wd"); args_add(&a, "0");
        args_add(&a, "--eps"); args_add(&a, "%g", (double)ORBITS_ORDERED_EPS);
    }
    else args_add(&a, "--untied");   // the published models' separate heads
    // every window starts at a system's dt row
    args_add(&a, "--align"); args_add(&a, "%d", LSSAR_ORB_ROWS);
    args_add(&a, "--layers"); args_add(&a, "%d", sc->layers);
    args_add(&a, "--heads"); args_add(&a, "%d", sc->heads);
    args_add(&a, "--dim"); args_add(&a, "%d", sc->dim);
    args_add(&a, "--seq"); args_add(&a, "%d", sc->seq);
    args_add(&a, "--batch"); args_add(&a, "%d", sc->batch);
    args_add(&a, "--steps"); args_add(&a, "%d", o->steps ? o->steps : sc->steps);
    args_add(&a, "--lr"); args_add(&a, "%g", (double)sc->lr);
    if (m % o->seeds) {
        train_opts d;
        train_opts_default(&d);
        args_add(&a, "--seed"); args_add(&a, "%llu", (unsigned long long)(d.seed + (uint64_t)(m % o->seeds)));
    }
    args_add(&a, "--device"); args_add(&a, "%s", o->dev); args_add(&a, "--quiet");
    add_threads(o, &a);
    snprintf(path, sizeof path, "%s/" CKPT_MODEL_FILE, run);
    // an earlier run of this pipeline: continue it (or find it done)
    if (!o->dry && !access(path, F_OK)) {
        if (other_model(run, sc, kind)) {
            fprintf(stderr, "lssar orbits run: %s\n", lssar_errmsg());
            args_clear(&a);
            *said = 1;
            return 1;
        }
        args_add(&a, "--resume");
    }
    int rc = run_step(pl, &a);
    if (rc) return rc;
    args_add(&a, "orbits"); args_add(&a, "eval");
    args_add(&a, "--model"); args_add(&a, "%s", run);
    args_add(&a, "--data"); args_add(&a, "%s", pl->data);
    args_add(&a, "--split"); args_add(&a, "val");
    args_add(&a, "--systems"); args_add(&a, "%d", sc->eval_sys);
    // the rows the model was trained on: rope past them is extrapolation
    args_add(&a, "--seq"); args_add(&a, "%d", sc->seq);
    args_add(&a, "--json"); args_add(&a, "%s/eval.json", run);
    args_add(&a, "--device"); args_add(&a, "%s", o->dev);
    args_add(&a, "--quiet");
    if ((rc = run_step(pl, &a))) return rc;
    args_add(&a, "orbits"); args_add(&a, "probe");
    args_add(&a, "--model"); args_add(&a, "%s", run);
    args_add(&a, "--data"); args_add(&a, "%s", pl->data);
    args_add(&a, "--out"); args_add(&a, "%s", run);
    args_add(&a, "--steps"); args_add(&a, "%d", sc->probe_steps);
    args_add(&a, "--batch"); args_add(&a, "%d", sc->probe_batch);
    args_add(&a, "--lr"); args_add(&a, "%g", (double)sc->probe_lr);
    args_add(&a, "--keep"); args_add(&a, "%d", sc->keep);
    args_add(&a, "--device"); args_add(&a, "%s", o->dev);
    args_add(&a, "--quiet");
    add_threads(o, &a);
    return run_step(pl, &a);
}

// 5. the oracle control, 6. the law, per model and for the oracle
static int law_stages(pipeline *pl, char names[][32], int nm) {
    const orbits_run_opts *o = pl->o;
    args_vec a = {0};
    args_add(&a, "orbits"); args_add(&a, "oracle");
    args_add(&a, "--data"); args_add(&a, "%s", pl->data);
    args_add(&a, "--out"); args_add(&a, "%s/oracle", o->out);
    args_add(&a, "--keep"); args_add(&a, "%d", o->scale.keep);
    add_threads(o, &a);
    int rc = run_step(pl, &a);
    for (int k = 0; k <= nm && !rc; k++) {
        args_add(&a, "orbits"); args_add(&a, "newton");
        args_add(&a, "--forces"); args_add(&a, "%s/%s/forces.csv", o->out, names[k]);
        args_add(&a, "--galaxies"); args_add(&a, "%d", o->scale.galaxies);
        args_add(&a, "--rows"); args_add(&a, "%d", o->scale.rows);
        args_add(&a, "--iterations"); args_add(&a, "%d", o->scale.iterations);
        args_add(&a, "--restarts"); args_add(&a, "%d", o->scale.restarts);
        args_add(&a, "--json"); args_add(&a, "%s/%s/newton.json", o->out, names[k]);
        args_add(&a, "--quiet");
        add_threads(o, &a);
        rc = run_step(pl, &a);
    }
    return rc;
}

int orbits_run(const orbits_run_opts *o, int (*run)(int argc, char **argv)) {
    job_plan *plan = calloc(1, sizeof *plan);   // large: not on the stack
    if (!plan) { fprintf(stderr, "lssar orbits run: out of memory\n"); return 1; }
    pipeline pl = {.o = o, .plan = plan, .in = {.run = run, .dry = o->dry, .timings = 1}};
    snprintf(pl.data, sizeof pl.data, "%s/data", o->out);
    if (!o->dry) {
        char path[4400];
        if (lssar_mkdirs(o->out)) { fprintf(stderr, "lssar orbits run: %s\n", lssar_errmsg()); return 1; }
        snprintf(path, sizeof path, "%s/commands.sh", o->out);
        pl.in.log = fopen(path, "w");
        if (pl.in.log)
            fprintf(pl.in.log, "# lssar orbits run --scale %s --attn %s --pos %s --device %s%s\n",
                    o->scale.name, o->attn, o->pos, o->dev, o->steps ? " --steps (below)" : "");
    }
    double t0 = lssar_now();
    char names[ORBITS_MAX_MODELS + 1][32], shards[1 << 16];
    const int nm = orbits_model_names(o, names);
    int said = 0, rc = o->skip_simulate ? 0 : simulate_stages(&pl);
    if (!rc) train_shards(&pl, shards, sizeof shards);
    for (int m = 0; m < nm && !rc; m++) rc = model_stages(&pl, m, names[m], shards, &said);
    if (!rc) rc = law_stages(&pl, names, nm);
    if (pl.in.log) fclose(pl.in.log);
    if (!rc && !o->dry) {
        orbits_report(o, plan);
        printf("\norbits run (%s): done in %.1f s -> %s/RESULTS.md, %s/forces.png\n", o->scale.name,
               lssar_now() - t0, o->out, o->out);
    }
    if (rc && !said)
        fprintf(stderr, "lssar orbits run: a stage failed (exit %d); its command is above\n", rc);
    jobs_free(plan);
    free(plan);
    return rc;
}
