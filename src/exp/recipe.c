// recipe.c - the stages of `lssar recipe` as a plan of lssar commands; see recipe.h.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cJSON.h>
#include "exp/recipe.h"
#include "exp/plan.h"
#include "core/util.h"

/* The GPT-2 recipe's sizes: llm.c's 124M run (train_gpt2.cu defaults and its README's command),
   and the toy shape of --smoke. Lengths are 1x..16x of seq. */
typedef struct {
    int layers, heads, dim, seq, batch, tokens_per_step, steps, warmup, eval_every, save_every;
    int val_batches, eval_batches, pk_depths, pk_trials;
} gpt2_sizes;
static const gpt2_sizes GPT2_124M = {
    .layers = 12, .heads = 12, .dim = 768, .seq = 1024, .batch = 16, .tokens_per_step = 524288,
    .steps = 19073, .warmup = 700, .eval_every = 250, .save_every = 500,
    .val_batches = 20, .eval_batches = 16, .pk_depths = 5, .pk_trials = 10};
static const gpt2_sizes GPT2_SMOKE = {
    .layers = 2, .heads = 2, .dim = 32, .seq = 256, .batch = 2, .tokens_per_step = 512,
    .steps = 10, .warmup = 2, .eval_every = 5, .save_every = 5,
    .val_batches = 2, .eval_batches = 2, .pk_depths = 2, .pk_trials = 2};

static double mtime_of(const char *path) {
    struct stat st;
    if (stat(path, &st)) return -1;
    return (double)st.st_mtim.tv_sec + 1e-9 * (double)st.st_mtim.tv_nsec;
}

// Why a stage whose output is `json` need not run again: its JSON is newer than the model.
static const char *done_reason(const char *json, const char *model_file) {
    double tj = mtime_of(json), tm = mtime_of(model_file);
    return tj >= 0 && tm >= 0 && tj >= tm ? "its JSON is newer than the model" : NULL;
}

// Add the stage to the plan and run it (the plan runs its new jobs only); skip: why it need not run.
static int run_step(job_plan *p, const plan_inline *in, const char *name, args_vec *a,
                    const char *skip) {
    int i = jobs_add(p, name, 1, NULL, 0, a);
    if (i < 0) return 1;
    p->jobs[i].skip = in->dry ? NULL : skip;
    return jobs_run_inline(p, in);
}

static void add_device(const recipe_opts *o, args_vec *a) {
    args_add(a, "--device"); args_add(a, "%s", o->dev);
    if (o->threads > 0) { args_add(a, "--threads"); args_add(a, "%d", o->threads); }
}

// 1. training (a rerun resumes; at the last step train says there is nothing to do)
static void train_args(const recipe_opts *o, const gpt2_sizes *z, const char *run, int resume, args_vec *a) {
    const int batch = o->batch > 0 ? o->batch : z->batch, steps = o->steps > 0 ? o->steps : z->steps;
    int accum = z->tokens_per_step / (batch * z->seq);
    if (accum < 1) accum = 1;
    if (accum * batch * z->seq != z->tokens_per_step)
        fprintf(stderr, "lssar recipe: note: %d tokens per step (--batch %d x %d x accum %d), not %d\n",
                accum * batch * z->seq, batch, z->seq, accum, z->tokens_per_step);
    args_add(a, "train");
    if (resume) {
        args_add(a, "--resume");
        args_add(a, "--out"); args_add(a, "%s", run);
        args_add(a, "--steps"); args_add(a, "%d", steps);
    } else {
        args_add(a, "--data"); args_add(a, "%s", o->data);
        args_add(a, "--val"); args_add(a, "%s", o->val);
        args_add(a, "--out"); args_add(a, "%s", run);
        args_add(a, "--attn"); args_add(a, "%s", o->attn);
        if (o->p > 0) { args_add(a, "--p"); args_add(a, "%g", (double)o->p); }
        args_add(a, "--pos"); args_add(a, "rope");
        args_add(a, "--layers"); args_add(a, "%d", z->layers);
        args_add(a, "--heads"); args_add(a, "%d", z->heads);
        args_add(a, "--dim"); args_add(a, "%d", z->dim);
        if (o->vocab > 0) { args_add(a, "--vocab"); args_add(a, "%d", o->vocab); }
        args_add(a, "--seq"); args_add(a, "%d", z->seq);
        args_add(a, "--batch"); args_add(a, "%d", batch);
        args_add(a, "--accum"); args_add(a, "%d", accum);
        args_add(a, "--steps"); args_add(a, "%d", steps);
        args_add(a, "--lr"); args_add(a, "0.0006");
        args_add(a, "--warmup"); args_add(a, "%d", z->warmup);
        args_add(a, "--lr-floor"); args_add(a, "0");
        args_add(a, "--wd"); args_add(a, "0.1");
        args_add(a, "--clip"); args_add(a, "1");
        args_add(a, "--beta1"); args_add(a, "0.9"); args_add(a, "--beta2"); args_add(a, "0.95");
    }
    args_add(a, "--eval-every"); args_add(a, "%d", z->eval_every);
    args_add(a, "--eval-batches"); args_add(a, "%d", z->val_batches);
    args_add(a, "--save-every"); args_add(a, "%d", z->save_every);
    add_device(o, a);
}

// train, then eval and passkey at 1x..16x of the training length
static int stages(const recipe_opts *o, job_plan *p, const plan_inline *in) {
    const gpt2_sizes *z = o->smoke ? &GPT2_SMOKE : &GPT2_124M;
    char run[4200], model_file[4300], ejson[4300], pjson[4300], lengths[256] = "";
    snprintf(run, sizeof run, "%s/train", o->out);
    snprintf(model_file, sizeof model_file, "%s/model.safetensors", run);
    snprintf(ejson, sizeof ejson, "%s/eval.json", o->out);
    snprintf(pjson, sizeof pjson, "%s/passkey.json", o->out);
    for (int m = 1; m <= 16; m *= 2)
        snprintf(lengths + strlen(lengths), sizeof lengths - strlen(lengths), "%s%d", m > 1 ? "," : "",
                 m * z->seq);
    args_vec a = {0};
    train_args(o, z, run, !o->dry && mtime_of(model_file) >= 0, &a);
    int rc = run_step(p, in, "train", &a, NULL);
    if (rc) return rc;
    // batch 1: one 16K sequence at a time, O(T) memory
    args_add(&a, "eval");
    args_add(&a, "--model"); args_add(&a, "%s", run);
    args_add(&a, "--data"); args_add(&a, "%s", o->val);
    args_add(&a, "--seq"); args_add(&a, "%s", lengths);
    args_add(&a, "--batch"); args_add(&a, "1");
    args_add(&a, "--batches"); args_add(&a, "%d", z->eval_batches);
    args_add(&a, "--json"); args_add(&a, "%s", ejson);
    add_device(o, &a);
    if ((rc = run_step(p, in, "eval", &a, done_reason(ejson, model_file)))) return rc;
    args_add(&a, "passkey");
    args_add(&a, "--model"); args_add(&a, "%s", run);
    args_add(&a, "--lengths"); args_add(&a, "%s", lengths);
    args_add(&a, "--depths"); args_add(&a, "%d", z->pk_depths);
    args_add(&a, "--trials"); args_add(&a, "%d", z->pk_trials);
    args_add(&a, "--batch"); args_add(&a, "1");
    args_add(&a, "--json"); args_add(&a, "%s", pjson);
    args_add(&a, "--plot"); args_add(&a, "%s/passkey.png", o->out);
    add_device(o, &a);
    return run_step(p, in, "passkey", &a, done_reason(pjson, model_file));
}

// recipe.json's "stages": what ran (or was found done), in order
static void stage_records(const job_plan *p, cJSON *stages) {
    for (int i = 0; i < p->n; i++) {
        const job *j = &p->jobs[i];
        if (j->state != JOB_DONE && j->state != JOB_FAILED) continue;
        cJSON *s = jobs_record(j);
        cJSON_AddBoolToObject(s, "skipped", j->skip != NULL);
        cJSON_AddItemToArray(stages, s);
    }
}

int recipe_gpt2(const recipe_opts *o, int (*run)(int argc, char **argv)) {
    job_plan *plan = calloc(1, sizeof *plan);   // large: not on the stack
    if (!plan) { fprintf(stderr, "lssar recipe: out of memory\n"); return 1; }
    plan_inline in = {.run = run, .dry = o->dry};
    if (!o->dry) {
        if (lssar_mkdirs(o->out)) { fprintf(stderr, "lssar recipe: %s\n", lssar_errmsg()); return 1; }
        char path[4200];
        snprintf(path, sizeof path, "%s/commands.sh", o->out);
        in.log = fopen(path, "a");   // a rerun appends what it ran
        if (!in.log)
            fprintf(stderr, "lssar recipe: warning: cannot open %s; the commands are only printed\n", path);
        else
            fprintf(in.log, "# lssar recipe %s --attn %s --device %s%s\n", o->name, o->attn, o->dev,
                    o->smoke ? " --smoke" : "");
    }
    double t0 = lssar_now();
    int rc = stages(o, plan, &in);
    if (in.log) fclose(in.log);
    if (!o->dry) {
        cJSON *rep = cJSON_CreateObject();
        cJSON_AddStringToObject(rep, "recipe", o->name);
        cJSON_AddStringToObject(rep, "attn", o->attn);
        cJSON_AddStringToObject(rep, "device", o->dev);
        cJSON_AddBoolToObject(rep, "smoke", o->smoke);
        stage_records(plan, cJSON_AddArrayToObject(rep, "stages"));
        if (recipe_report(o->out, rep, rc, lssar_now() - t0))
            fprintf(stderr, "lssar recipe: %s\n", lssar_errmsg());
        cJSON_Delete(rep);
    }
    jobs_free(plan);
    free(plan);
    if (rc) {
        fprintf(stderr, "lssar recipe: a stage failed (exit %d); its command is above; rerun the recipe to "
                        "continue\n", rc);
        return rc;
    }
    if (!o->dry)
        printf("\nrecipe %s (%s, %s): done in %.1f s -> %s/RESULTS.md, %s/recipe.json\n", o->name, o->attn,
               o->dev, lssar_now() - t0, o->out, o->out);
    return 0;
}

int recipe_orbits(const recipe_opts *o, int (*run)(int argc, char **argv)) {
    job_plan *plan = calloc(1, sizeof *plan);
    if (!plan) { fprintf(stderr, "lssar recipe: out of memory\n"); return 1; }
    args_vec a = {0};
    args_add(&a, "orbits"); args_add(&a, "run");
    args_add(&a, "--scale"); args_add(&a, "%s", o->smoke ? "smoke" : "paper");
    args_add(&a, "--attn"); args_add(&a, "%s", o->attn);
    args_add(&a, "--out"); args_add(&a, "%s", o->out); args_add(&a, "--device"); args_add(&a, "%s", o->dev);
    if (o->steps) { args_add(&a, "--steps"); args_add(&a, "%d", o->steps); }
    if (o->threads) { args_add(&a, "--threads"); args_add(&a, "%d", o->threads); }
    if (o->dry) args_add(&a, "--dry-run");
    // orbits run logs its own stages and writes OUT/RESULTS.md
    int rc = run_step(plan, &(plan_inline){.run = run}, "orbits run", &a, NULL);
    jobs_free(plan);
    free(plan);
    return rc;
}
