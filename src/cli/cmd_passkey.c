// cmd_passkey.c - `lssar passkey`: Mohtashami & Jaggi's passkey retrieval test (src/exp/passkey.h)
// over lengths x needle depths, teacher-forced argmax scoring.
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include "args.h"
#include "lssar.h"
#include "exp/passkey.h"

static const char *ABOUT =
    "Passkey retrieval (Mohtashami & Jaggi 2023), in token space: the task line, the filler \"The grass\n"
    "is green. The sky is blue. ...\" repeated to the length, the needle \"The pass key is K. Remember\n"
    "it. K is the pass key.\" at each depth (0% = first, 100% = last before the question), then \"What\n"
    "is the pass key? The pass key is K\" with K a random 5-digit number. Scoring is teacher-forced:\n"
    "a trial succeeds when the model's argmax gets every token of \" K\" right; digit accuracy is the\n"
    "fraction of the 5 digits its predicted tokens get right in place. 95% Wilson intervals.\n"
    "The tokenizer follows the model's vocabulary (257: byte, >= 50257: GPT-2).\n"
    "Small models cannot do this untrained: see `lssar train --passkey-mix F` (the fraction F used in\n"
    "training is read from the run's trainer.safetensors metadata when present, and reported).\n"
    "Several models (--model A,B,C: typically the seeds of one kind, which must share the vocabulary,\n"
    "the attention kind, the training length and the passkey mix) are scored on the same keys and\n"
    "pooled: per cell the successes and trials summed over the models, the Wilson interval of the\n"
    "pooled proportion, and each model's overall accuracy under the table. The seeds of an\n"
    "`lssar extrapolate --seeds 3` run: --model out/lssar-p15,out/lssar-p15-s1,out/lssar-p15-s2.\n"
    "--json FILE: {\"results\": [{\"length\", \"depth\", \"accuracy\", \"digit_accuracy\", "
    "\"place_accuracy\" (the\n"
    "5 digits of the key, each right how often), \"trials\", \"lo\",\n"
    "\"hi\", \"successes\", \"per_model\": [{\"model\", \"accuracy\", \"digit_accuracy\"}]}], "
    "\"passkey_mix\": F,\n"
    "\"trials\": keys per cell and model, \"models\": [...]} (a cell's \"trials\" and \"successes\" are\n"
    "pooled over the models). --plot FILE.png: heatmap of the (pooled) accuracy, length x depth.";

// --model A,B,C: the models to pool (one is the plain single-model test), each named once.
static int split_models(const char *model, passkey_opts *o) {
    static char list[8192];
    if (strlen(model) >= sizeof list)
        return args_error("passkey", "--model is longer than %zu characters", sizeof list - 1);
    snprintf(list, sizeof list, "%s", model);
    for (char *t = strtok(list, ","); t; t = strtok(NULL, ",")) {
        if (o->nmodels == PASSKEY_MAX_MODELS)
            return args_error("passkey", "--model names more than %d models", PASSKEY_MAX_MODELS);
        for (int j = 0; j < o->nmodels; j++)
            if (!strcmp(o->models[j], t))
                return args_error("passkey",
                                  "--model names %s twice: pooling it twice would count the same trials "
                                  "twice",
                                  t);
        o->models[o->nmodels++] = t;
    }
    if (o->nmodels < 1) return args_error("passkey", "--model names no model");
    return 0;
}

int cmd_passkey(int argc, char **argv) {
    passkey_opts o = {.depths = 11, .trials = 20, .batch = 8, .seed = 1};
    const char *lengths_s = NULL, *attn = NULL;
    int threads = 0;
    float p = 0;
    const char *device_name = "cpu";
    arg_spec sp[] = {
        {"model", ARG_STR, &o.model,
         "run directory (or .safetensors file); several, comma-separated, are pooled", 1, 0},
        {"lengths", ARG_STR, &lengths_s, "sequence lengths L1,L2,... (tokens the model reads)", 1, 0},
        {"depths", ARG_INT, &o.depths, "needle depths, evenly spaced from 0% to 100%", 0, 0},
        {"trials", ARG_INT, &o.trials, "random keys per length and depth (and model)", 0, 0},
        {"batch", ARG_INT, &o.batch, "sequences per forward pass", 0, 0},
        {"attn", ARG_STR, &attn, "evaluate with this kind instead (lssa <-> lssar only)", 0, 0},
        {"p", ARG_FLOAT, &p, "LSSAR power override (0: the model's)", 0, 0},
        {"seed", ARG_U64, &o.seed, "seed of the keys (the same for every model)", 0, 0},
        {"json", ARG_STR, &o.json, "write the results here", 0, 0},
        {"plot", ARG_STR, &o.plot, "write a heatmap PNG here (gnuplot)", 0, 0},
        {"threads", ARG_INT, &threads, "OpenMP threads (0: all)", 0, 0},
        {"device", ARG_STR, &device_name, ARGS_DEVICE_HELP, 0, 0},
        {0}};
    int rc = args_parse("passkey", ABOUT, sp, argc, argv);
    if (rc >= 0) return rc;
    lssar_device device;
    if (args_device("passkey", device_name, &device)) return 2;
    o.nlens = args_int_list("passkey", "--lengths", lengths_s, o.lens, PASSKEY_MAX_LENGTHS);
    if (o.nlens < 1) return 2;
    if (o.depths < 1 || o.depths > PASSKEY_MAX_DEPTHS)
        return args_error("passkey", "--depths must be in 1..%d", PASSKEY_MAX_DEPTHS);
    if (o.trials < 1 || o.batch < 1) return args_error("passkey", "--trials and --batch must be >= 1");
    if (threads > 0) omp_set_num_threads(threads);
    o.load = (ckpt_load_opts){.set_attn = attn != NULL, .p = p, .device = device};
    if (attn && args_attn_kind("passkey", attn, &o.load.attn)) return 2;
    if (split_models(o.model, &o)) return 2;
    int bad_args;
    if (passkey_run(&o, &bad_args)) {
        fprintf(stderr, "lssar passkey: %s\n", lssar_errmsg());
        return bad_args ? 2 : 1;
    }
    return 0;
}
