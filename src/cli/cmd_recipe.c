// cmd_recipe.c - `lssar recipe NAME`: a paper-scale run as one command: flags -> recipe_opts ->
// recipe_gpt2 or recipe_orbits (src/exp/recipe.h), whose stages are the commands a user would type
// (lssar train, eval, passkey; for the orbits, lssar orbits run), each printed, appended to
// OUT/commands.sh and run in this process (cli_run).
#include <stdio.h>
#include <string.h>
#include "args.h"
#include "commands.h"
#include "exp/recipe.h"
#include "lssar.h"

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
    recipe_opts o = {.name = name, .attn = attn, .data = data, .val = val, .out = out, .dev = dev, .p = p,
                     .vocab = vocab, .batch = batch, .steps = steps, .threads = threads, .smoke = smoke,
                     .dry = dry};
    return is_orbits ? recipe_orbits(&o, cli_run) : recipe_gpt2(&o, cli_run);
}
