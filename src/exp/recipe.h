/*
 * recipe.h - `lssar recipe gpt2-124m`: GPT-2 124M as llm.c trains it, then its loss and passkey
 * retrieval at 1x..16x the training length. The stages are the commands a user would type (lssar
 * train, eval, passkey): a plan (exp/plan.h) run in this process through the CLI's dispatcher, each
 * printed and appended to OUT/commands.sh, so the recipe has no option a command lacks. A rerun
 * continues: training resumes from its checkpoint, and a stage whose JSON is newer than the model
 * is not run again. OUT/RESULTS.md and OUT/recipe.json sum it up (recipe_report.c).
 */
#ifndef LSSAR_EXP_RECIPE_H
#define LSSAR_EXP_RECIPE_H

#include <cJSON.h>

typedef struct {
    const char *name;          // "gpt2-124m", "orbits-109m"
    const char *attn, *data, *val, *out, *dev;
    float p;                   // LSSAR power (0: the trainer's)
    int vocab, batch, steps, threads;   // 0: the recipe's (vocab: the trainer's)
    int smoke, dry;
} recipe_opts;

/* The whole recipe; `run` runs one lssar command in this process (argv[0] the command). Returns 0
   or the failed stage's exit status (printed). */
int recipe_gpt2(const recipe_opts *o, int (*run)(int argc, char **argv));

/* `lssar recipe orbits-109m`: one stage, `lssar orbits run --scale paper` (smoke: --scale smoke),
   which prints, logs and reports its own stages. */
int recipe_orbits(const recipe_opts *o, int (*run)(int argc, char **argv));

/* OUT/recipe.json and OUT/RESULTS.md: rep ({"recipe", "attn", "device", "smoke", "stages"}) with
   the summaries of OUT/train/log.jsonl, and unless failed of OUT/eval.json and OUT/passkey.json. */
int recipe_report(const char *out, cJSON *rep, int failed, double seconds);

#endif
