// cmd_recipe.c - `lssar recipe NAME`: a paper-scale run as one command. Its stages are the
// commands a user would type (lssar train, eval, passkey; for the orbits, lssar orbits run):
// each is printed, appended to OUT/commands.sh and run in this process through the same
// command function, so the recipe never has options of its own that a command lacks. A rerun
// continues: training resumes from its checkpoint, and a stage whose JSON is newer than the
// model is not run again. OUT/RESULTS.md and OUT/recipe.json sum it up.
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cJSON.h>
#include "args.h"
#include "commands.h"
#include "lssar.h"
#include "core/json.h"
#include "core/util.h"
#include "exp/passkey.h"

static const char *ABOUT =
    "The paper's runs as one command each, on the GPU (--device cuda, or auto when one is found).\n"
    "\n"
    "  gpt2-124m    GPT-2 124M (12 layers, 12 heads, width 768, T = 1024) with RoPE and the chosen "
    "attention,\n"
    "               with llm.c's 124M hyper-parameters: 524288 tokens per step (--batch x 1024 x the\n"
    "               accumulation that makes it up), AdamW lr 6e-4, betas 0.9/0.95, weight decay 0.1, clip "
    "1,\n"
    "               700 warmup steps then cosine to 0 over 19073 steps (10B tokens: llm.c's FineWeb-10B\n"
    "               shards, --data 'fineweb_train_*.bin' listed with commas, --val fineweb_val_000000.bin);\n"
    "               then the loss at 1K, 2K, 4K, 8K and 16K tokens (lssar eval) and passkey retrieval at\n"
    "               the same lengths (lssar passkey). Any of our corpora works too (lssar data build).\n"
    "  orbits-109m  the orbit world model at the paper's size (12 layers, width 768, 2 channels, T = 999):\n"
    "               lssar orbits run --scale paper (simulation of 10M systems, training, eval, force\n"
    "               probe, Newton audit; docs/ORBITS.md).\n"
    "\n"
    "--smoke runs the same stages at toy size in seconds on the CPU (gpt2-124m: 2 layers, width 32,\n"
    "T = 256, 10 steps, lengths 256..4096; orbits-109m: the orbits smoke scale, 10 steps): it checks the\n"
    "recipe, not the model. On the CPU without --smoke the commands are printed, not run (weeks of\n"
    "CPU time); --dry-run prints them anywhere.\n"
    "\n"
    "Every stage is printed as the command it is and logged to OUT/commands.sh, so any one of them can be\n"
    "rerun or changed by hand. Rerunning the recipe continues: training resumes from OUT/train (bit for\n"
    "bit as an uninterrupted run), and eval / passkey are skipped when their JSON is newer than the model.\n"
    "Writes OUT/train/ (checkpoints, log.jsonl), OUT/eval.json, OUT/passkey.json, OUT/passkey.png,\n"
    "OUT/RESULTS.md and OUT/recipe.json {\"recipe\", \"attn\", \"device\", \"smoke\", \"stages\": "
    "[{\"name\",\n"
    "\"command\", \"exit\", \"seconds\", \"skipped\"}], \"train\": {\"step\", \"loss\", \"val_loss\"}, "
    "\"eval\":\n"
    "[{\"seq\", \"loss\"}], \"passkey\": [{\"length\", \"accuracy\", \"lo\", \"hi\", \"trials\"}]}.\n"
    "Exit status: 0 done, 2 bad flags, 3 training stopped on a NaN (checkpoint intact), 1 a stage failed.";

/* The GPT-2 recipe's sizes: llm.c's 124M run (train_gpt2.cu defaults and its README's command),
   and the toy shape of --smoke. Lengths are 1x..16x of seq. */
typedef struct {
    int layers, heads, dim, seq, batch, tokens_per_step, steps, warmup, eval_every, save_every;
    int val_batches, eval_batches, pk_depths, pk_trials;
} gpt2_sizes;
static const gpt2_sizes GPT2_124M = {12, 12, 768, 1024, 16, 524288, 19073, 700, 250, 500, 20, 16, 5, 10};
static const gpt2_sizes GPT2_SMOKE = {2, 2, 32, 256, 2, 512, 10, 2, 5, 5, 2, 2, 2, 2};

/* ---------------------------------------------------------------- stages */
typedef struct {
    FILE *log;          // OUT/commands.sh (NULL on a dry run)
    int dry;
    cJSON *stages;      // recipe.json's "stages"
} runner;

// Print the stage's command (and log it), then run it through its command function unless this
// is a dry run or skip says it is done. Returns the command's exit status.
static int stage(runner *r, const char *name, const char *prefix, int (*fn)(int, char **), args_vec *a,
                 const char *skip) {
    char pre[64];
    snprintf(pre, sizeof pre, "lssar%s", prefix);
    char *line = args_line(a, pre);
    if (!line) { args_clear(a); return 1; }
    printf("\n$ %s\n", line);
    fflush(stdout);
    if (r->log) { fprintf(r->log, "%s\n", line); fflush(r->log); }
    int rc = 0;
    double t0 = lssar_now();
    if (skip) printf("(%s: %s; not run again)\n", name, skip);
    else if (!r->dry) rc = fn(a->n, a->v);
    fflush(stdout);
    if (!r->dry && r->stages) {
        cJSON *s = cJSON_CreateObject();
        cJSON_AddStringToObject(s, "name", name);
        cJSON_AddStringToObject(s, "command", line);
        cJSON_AddNumberToObject(s, "exit", rc);
        cJSON_AddNumberToObject(s, "seconds", skip ? 0 : lssar_now() - t0);
        cJSON_AddBoolToObject(s, "skipped", skip != NULL);
        cJSON_AddItemToArray(r->stages, s);
    }
    free(line);
    args_clear(a);
    return rc;
}

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

/* ---------------------------------------------------------------- the report */
// train: the last step's loss and the last validation loss, from OUT/train/log.jsonl
static cJSON *train_summary(const char *run) {
    char path[4400];
    snprintf(path, sizeof path, "%s/log.jsonl", run);
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    cJSON *out = cJSON_CreateObject();
    double step = NAN, loss = NAN, val = NAN;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        cJSON *j = cJSON_Parse(line);
        if (!j) continue;
        const cJSON *s = cJSON_GetObjectItem(j, "step"), *l = cJSON_GetObjectItem(j, "loss"),
                    *v = cJSON_GetObjectItem(j, "val_loss");
        if (cJSON_IsNumber(l) && cJSON_IsNumber(s)) { step = s->valuedouble; loss = l->valuedouble; }
        if (cJSON_IsNumber(v)) val = v->valuedouble;
        cJSON_Delete(j);
    }
    fclose(f);
    cJSON_AddNumberToObject(out, "step", step);
    cJSON_AddNumberToObject(out, "loss", loss);
    cJSON_AddNumberToObject(out, "val_loss", val);   // NaN (null in JSON) without validation
    return out;
}

// eval.json's results as [{seq, loss}]
static cJSON *eval_summary(const char *path) {
    cJSON *j = lssar_read_json(path);
    if (!j) return NULL;
    cJSON *out = cJSON_CreateArray(), *res;
    cJSON_ArrayForEach(res, cJSON_GetObjectItem(j, "results")) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "seq", cJSON_GetNumberValue(cJSON_GetObjectItem(res, "seq")));
        cJSON_AddNumberToObject(e, "loss", cJSON_GetNumberValue(cJSON_GetObjectItem(res, "loss")));
        cJSON_AddItemToArray(out, e);
    }
    cJSON_Delete(j);
    return out;
}

// passkey.json's cells summed over the depths: per length the accuracy with its Wilson interval
static cJSON *passkey_summary(const char *path) {
    cJSON *j = lssar_read_json(path);
    if (!j) return NULL;
    enum { MAXL = 32 };
    int len[MAXL], k[MAXL] = {0}, n[MAXL] = {0}, nl = 0;
    cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(j, "results")) {
        int L = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(c, "length"));
        int i = 0;
        while (i < nl && len[i] != L) i++;
        if (i == nl) { if (nl == MAXL) continue; len[nl++] = L; }
        k[i] += (int)cJSON_GetNumberValue(cJSON_GetObjectItem(c, "successes"));
        n[i] += (int)cJSON_GetNumberValue(cJSON_GetObjectItem(c, "trials"));
    }
    cJSON_Delete(j);
    cJSON *out = cJSON_CreateArray();
    for (int i = 0; i < nl; i++) {
        double lo, hi;
        wilson_interval(k[i], n[i], 1.96, &lo, &hi);
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "length", len[i]);
        cJSON_AddNumberToObject(e, "accuracy", n[i] ? (double)k[i] / n[i] : NAN);
        cJSON_AddNumberToObject(e, "lo", lo);
        cJSON_AddNumberToObject(e, "hi", hi);
        cJSON_AddNumberToObject(e, "trials", n[i]);
        cJSON_AddItemToArray(out, e);
    }
    return out;
}

static double num(const cJSON *o, const char *key) {
    return cJSON_GetNumberValue(cJSON_GetObjectItem(o, key));
}

static int write_report(const char *out, cJSON *rep) {
    char path[4200];
    snprintf(path, sizeof path, "%s/recipe.json", out);
    int rc = lssar_write_json(path, rep);
    snprintf(path, sizeof path, "%s/RESULTS.md", out);
    lssar_afile af;
    if (rc || (rc = lssar_afile_open(&af, path))) return rc;
    FILE *f = af.f;
    const cJSON *tr = cJSON_GetObjectItem(rep, "train");
    fprintf(f, "# lssar recipe %s, %s attention, on %s%s\n\n",
            cJSON_GetStringValue(cJSON_GetObjectItem(rep, "recipe")),
            cJSON_GetStringValue(cJSON_GetObjectItem(rep, "attn")),
            cJSON_GetStringValue(cJSON_GetObjectItem(rep, "device")),
            cJSON_IsTrue(cJSON_GetObjectItem(rep, "smoke")) ? " (--smoke: a toy model; these numbers check "
                                                              "the recipe, not the model)"
                                                            : "");
    if (tr)
        fprintf(f, "Training: step %.0f, train loss %.4f, validation loss %.4f.\n\n", num(tr, "step"),
                num(tr, "loss"), num(tr, "val_loss"));
    const cJSON *ev = cJSON_GetObjectItem(rep, "eval"), *e;
    if (ev && cJSON_GetArraySize(ev) > 0) {
        double base = num(cJSON_GetArrayItem(ev, 0), "loss");
        fprintf(f,
                "## Loss against context length (lssar eval)\n\n| tokens | loss | minus loss at %.0f "
                "|\n|---:|---:|---:|\n",
                num(cJSON_GetArrayItem(ev, 0), "seq"));
        cJSON_ArrayForEach(e, ev)
            fprintf(f, "| %.0f | %.4f | %+.4f |\n", num(e, "seq"), num(e, "loss"), num(e, "loss") - base);
        fprintf(f, "\n");
    }
    const cJSON *pk = cJSON_GetObjectItem(rep, "passkey");
    if (pk && cJSON_GetArraySize(pk) > 0) {
        fprintf(f, "## Passkey retrieval (lssar passkey; all depths pooled, 95%% Wilson interval)\n\n"
                   "| tokens | accuracy | 95%% interval | trials |\n|---:|---:|:---:|---:|\n");
        cJSON_ArrayForEach(e, pk)
            fprintf(f, "| %.0f | %.3f | %.3f-%.3f | %.0f |\n", num(e, "length"), num(e, "accuracy"),
                    num(e, "lo"), num(e, "hi"), num(e, "trials"));
        fprintf(f, "\n");
    }
    fprintf(f, "## Stages (OUT/commands.sh)\n\n| stage | seconds | exit | command |\n|---|---:|---:|---|\n");
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(rep, "stages"))
        fprintf(f, "| %s | %s%.1f | %.0f | `%s` |\n", cJSON_GetStringValue(cJSON_GetObjectItem(e, "name")),
                cJSON_IsTrue(cJSON_GetObjectItem(e, "skipped")) ? "done earlier, " : "", num(e, "seconds"),
                num(e, "exit"), cJSON_GetStringValue(cJSON_GetObjectItem(e, "command")));
    return lssar_afile_commit(&af);
}

/* ---------------------------------------------------------------- gpt2-124m */
typedef struct {
    const char *attn, *data, *val, *out, *dev;
    float p;
    int vocab, batch, steps, threads, smoke;
} gpt2_args;

static int recipe_gpt2(const gpt2_args *g, runner *r) {
    const gpt2_sizes *z = g->smoke ? &GPT2_SMOKE : &GPT2_124M;
    const int batch = g->batch > 0 ? g->batch : z->batch, steps = g->steps > 0 ? g->steps : z->steps;
    int accum = z->tokens_per_step / (batch * z->seq);
    if (accum < 1) accum = 1;
    if (accum * batch * z->seq != z->tokens_per_step)
        fprintf(stderr, "lssar recipe: note: %d tokens per step (--batch %d x %d x accum %d), not %d\n",
                accum * batch * z->seq, batch, z->seq, accum, z->tokens_per_step);
    char run[4200], model_file[4300], ejson[4300], pjson[4300], lengths[256] = "";
    snprintf(run, sizeof run, "%s/train", g->out);
    snprintf(model_file, sizeof model_file, "%s/model.safetensors", run);
    snprintf(ejson, sizeof ejson, "%s/eval.json", g->out);
    snprintf(pjson, sizeof pjson, "%s/passkey.json", g->out);
    for (int m = 1; m <= 16; m *= 2)
        snprintf(lengths + strlen(lengths), sizeof lengths - strlen(lengths), "%s%d", m > 1 ? "," : "",
                 m * z->seq);
    const int resume = !r->dry && mtime_of(model_file) >= 0;
    args_vec a = {0};
    // 1. training (a rerun resumes; at the last step train says there is nothing to do)
    args_add(&a, "train");
    if (resume) {
        args_add(&a, "--resume");
        args_add(&a, "--out"); args_add(&a, "%s", run);
        args_add(&a, "--steps"); args_add(&a, "%d", steps);
    } else {
        args_add(&a, "--data"); args_add(&a, "%s", g->data);
        args_add(&a, "--val"); args_add(&a, "%s", g->val);
        args_add(&a, "--out"); args_add(&a, "%s", run);
        args_add(&a, "--attn"); args_add(&a, "%s", g->attn);
        if (g->p > 0) { args_add(&a, "--p"); args_add(&a, "%g", (double)g->p); }
        args_add(&a, "--pos"); args_add(&a, "rope");
        args_add(&a, "--layers"); args_add(&a, "%d", z->layers);
        args_add(&a, "--heads"); args_add(&a, "%d", z->heads);
        args_add(&a, "--dim"); args_add(&a, "%d", z->dim);
        if (g->vocab > 0) { args_add(&a, "--vocab"); args_add(&a, "%d", g->vocab); }
        args_add(&a, "--seq"); args_add(&a, "%d", z->seq);
        args_add(&a, "--batch"); args_add(&a, "%d", batch);
        args_add(&a, "--accum"); args_add(&a, "%d", accum);
        args_add(&a, "--steps"); args_add(&a, "%d", steps);
        args_add(&a, "--lr"); args_add(&a, "0.0006");
        args_add(&a, "--warmup"); args_add(&a, "%d", z->warmup);
        args_add(&a, "--lr-floor"); args_add(&a, "0");
        args_add(&a, "--wd"); args_add(&a, "0.1");
        args_add(&a, "--clip"); args_add(&a, "1");
        args_add(&a, "--beta1"); args_add(&a, "0.9"); args_add(&a, "--beta2"); args_add(&a, "0.95");
    }
    args_add(&a, "--eval-every"); args_add(&a, "%d", z->eval_every);
    args_add(&a, "--eval-batches"); args_add(&a, "%d", z->val_batches);
    args_add(&a, "--save-every"); args_add(&a, "%d", z->save_every);
    args_add(&a, "--device"); args_add(&a, "%s", g->dev);
    if (g->threads > 0) { args_add(&a, "--threads"); args_add(&a, "%d", g->threads); }
    int rc = stage(r, "train", "", cmd_train, &a, NULL);
    if (rc) return rc;
    // 2. loss at 1x..16x of the training length (batch 1: one 16K sequence at a time, O(T) memory)
    args_add(&a, "eval");
    args_add(&a, "--model"); args_add(&a, "%s", run);
    args_add(&a, "--data"); args_add(&a, "%s", g->val);
    args_add(&a, "--seq"); args_add(&a, "%s", lengths);
    args_add(&a, "--batch"); args_add(&a, "1");
    args_add(&a, "--batches"); args_add(&a, "%d", z->eval_batches);
    args_add(&a, "--json"); args_add(&a, "%s", ejson); args_add(&a, "--device"); args_add(&a, "%s", g->dev);
    if (g->threads > 0) { args_add(&a, "--threads"); args_add(&a, "%d", g->threads); }
    if ((rc = stage(r, "eval", "", cmd_eval, &a, r->dry ? NULL : done_reason(ejson, model_file)))) return rc;
    // 3. passkey at the same lengths
    args_add(&a, "passkey");
    args_add(&a, "--model"); args_add(&a, "%s", run);
    args_add(&a, "--lengths"); args_add(&a, "%s", lengths);
    args_add(&a, "--depths"); args_add(&a, "%d", z->pk_depths);
    args_add(&a, "--trials"); args_add(&a, "%d", z->pk_trials);
    args_add(&a, "--batch"); args_add(&a, "1");
    args_add(&a, "--json"); args_add(&a, "%s", pjson);
    args_add(&a, "--plot"); args_add(&a, "%s/passkey.png", g->out);
    args_add(&a, "--device"); args_add(&a, "%s", g->dev);
    if (g->threads > 0) { args_add(&a, "--threads"); args_add(&a, "%d", g->threads); }
    return stage(r, "passkey", "", cmd_passkey, &a, r->dry ? NULL : done_reason(pjson, model_file));
}

int cmd_recipe(int argc, char **argv) {
    const char *attn = "lssar", *data = NULL, *val = NULL, *out = NULL, *device_name = "auto";
    int smoke = 0, dry = 0, steps = 0, batch = 0, vocab = 0, threads = 0;
    float p = 0;
    arg_spec specs[] = {
        {"attn", ARG_STR, &attn, "attention kind: softmax, ssmax, lssa, lssar, sigmoid or relu", 0, 0},
        {"p", ARG_FLOAT, &p, "LSSAR power (0: the trainer's default, 15)", 0, 0},
        {"data", ARG_STR, &data, "gpt2-124m: training shards A.bin,B.bin,... (llm.c format)", 0, 0},
        {"val", ARG_STR, &val,
         "gpt2-124m: validation shard (eval and passkey lengths need 16 x 1024 + 1 tokens)", 0, 0},
        {"vocab", ARG_INT, &vocab,
         "gpt2-124m: token ids (0: what the shards record, else the trainer's default)", 0, 0},
        {"out", ARG_STR, &out, "output directory [default runs/recipe-NAME-ATTN]", 0, 0},
        {"device", ARG_STR, &device_name, ARGS_DEVICE_HELP, 0, 0},
        {"smoke", ARG_BOOL, &smoke, "the same stages at toy size (seconds, CPU): checks the recipe", 0, 0},
        {"steps", ARG_INT, &steps, "training steps (0: the recipe's)", 0, 0},
        {"batch", ARG_INT, &batch,
         "gpt2-124m: sequences per micro-batch (0: 16); accumulation keeps 524288 tokens per step", 0, 0},
        {"threads", ARG_INT, &threads, "CPU threads (0: all)", 0, 0},
        {"dry-run", ARG_BOOL, &dry, "print the commands without running them", 0, 0},
        {0}};
    const char *name = argc > 1 && argv[1][0] != '-' ? argv[1] : NULL;
    int rc = args_parse("recipe", ABOUT, specs, argc - (name != NULL), argv + (name != NULL));
    if (rc >= 0) return rc;
    if (!name) return args_error("recipe", "name a recipe: lssar recipe gpt2-124m|orbits-109m [flags]");
    int is_gpt2 = !strcmp(name, "gpt2-124m"), is_orbits = !strcmp(name, "orbits-109m");
    if (!is_gpt2 && !is_orbits)
        return args_error("recipe", "unknown recipe '%s': gpt2-124m or orbits-109m", name);
    lssar_attn_kind kind;
    if (args_attn_kind("recipe", attn, &kind)) return 2;
    if (steps < 0 || batch < 0 || vocab < 0 || threads < 0 || p < 0)
        return args_error("recipe", "--steps, --batch, --vocab, --threads and --p must be >= 0");
    if (is_gpt2 && (!data || !val))
        return args_error("recipe", "gpt2-124m needs --data TRAIN.bin[,...] and --val VAL.bin");
    if (is_orbits && (data || val || vocab || batch))
        return args_error("recipe", "orbits-109m simulates its own data: --data, --val, --vocab and --batch "
                                    "are for gpt2-124m");
    lssar_device device;
    if (args_device("recipe", device_name, &device)) return 2;
    const char *dev = lssar_device_name(device);
    char outbuf[4096];
    if (!out) {
        snprintf(outbuf, sizeof outbuf, "runs/recipe-%s-%s%s", name, attn, smoke ? "-smoke" : "");
        out = outbuf;
    }
    if (!smoke && device == LSSAR_DEVICE_CPU && !dry) {
        printf("# lssar recipe %s is a GPU recipe: on the CPU it would take weeks, so it is printed, not "
               "run.\n"
               "# --device cuda runs it on a GPU; --smoke runs the same stages at toy size here.\n",
               name);
        dry = 1;
    }
    if (is_orbits) {   // the orbits pipeline at the paper's scale is `orbits run --scale paper`
        args_vec a = {0};
        args_add(&a, "run");
        args_add(&a, "--scale"); args_add(&a, "%s", smoke ? "smoke" : "paper");
        args_add(&a, "--attn"); args_add(&a, "%s", attn);
        args_add(&a, "--out"); args_add(&a, "%s", out); args_add(&a, "--device"); args_add(&a, "%s", dev);
        if (steps) { args_add(&a, "--steps"); args_add(&a, "%d", steps); }
        if (threads) { args_add(&a, "--threads"); args_add(&a, "%d", threads); }
        if (dry) args_add(&a, "--dry-run");
        runner r = {NULL, 0, NULL};   // orbits run logs its own stages and writes OUT/RESULTS.md
        return stage(&r, "orbits run", " orbits", cmd_orbits_run, &a, NULL);
    }
    runner r = {NULL, dry, NULL};
    cJSON *rep = NULL;
    if (!dry) {
        if (lssar_mkdirs(out)) { fprintf(stderr, "lssar recipe: %s\n", lssar_errmsg()); return 1; }
        char path[4200];
        snprintf(path, sizeof path, "%s/commands.sh", out);
        r.log = fopen(path, "a");   // a rerun appends what it ran
        if (!r.log)
            fprintf(stderr, "lssar recipe: warning: cannot open %s; the commands are only printed\n", path);
        else
            fprintf(r.log, "# lssar recipe %s --attn %s --device %s%s\n", name, attn, dev,
                    smoke ? " --smoke" : "");
        rep = cJSON_CreateObject();
        cJSON_AddStringToObject(rep, "recipe", name);
        cJSON_AddStringToObject(rep, "attn", attn);
        cJSON_AddStringToObject(rep, "device", dev);
        cJSON_AddBoolToObject(rep, "smoke", smoke);
        r.stages = cJSON_AddArrayToObject(rep, "stages");
    }
    double t0 = lssar_now();
    gpt2_args g = {attn, data, val, out, dev, p, vocab, batch, steps, threads, smoke};
    rc = recipe_gpt2(&g, &r);
    if (r.log) fclose(r.log);
    if (!dry) {
        char path[4300];
        snprintf(path, sizeof path, "%s/train", out);
        cJSON *t = train_summary(path);
        if (t) cJSON_AddItemToObject(rep, "train", t);
        snprintf(path, sizeof path, "%s/eval.json", out);
        cJSON *e = rc ? NULL : eval_summary(path);
        if (e) cJSON_AddItemToObject(rep, "eval", e);
        snprintf(path, sizeof path, "%s/passkey.json", out);
        cJSON *k = rc ? NULL : passkey_summary(path);
        if (k) cJSON_AddItemToObject(rep, "passkey", k);
        cJSON_AddNumberToObject(rep, "seconds", lssar_now() - t0);
        if (write_report(out, rep)) fprintf(stderr, "lssar recipe: %s\n", lssar_errmsg());
        cJSON_Delete(rep);
    }
    if (rc) {
        fprintf(stderr,
                "lssar recipe: a stage failed (exit %d); its command is above; rerun the recipe to "
                "continue\n",
                rc);
        return rc;
    }
    if (!dry)
        printf("\nrecipe %s (%s, %s): done in %.1f s -> %s/RESULTS.md, %s/recipe.json\n", name, attn, dev,
               lssar_now() - t0, out, out);
    return 0;
}
