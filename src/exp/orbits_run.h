/*
 * orbits_run.h - the orbits pipeline of `lssar orbits run`, one model per attention kind side by
 * side: simulate -> train -> orbits eval -> probe -> newton, plus the k-NN oracle control. Each
 * stage is an lssar command line, printed, written to OUT/commands.sh and run in this process
 * through the CLI's dispatcher (a plan, exp/plan.h); then OUT/RESULTS.md and OUT/forces.png are
 * built from the JSON files the stages wrote (orbits_report).
 */
#ifndef LSSAR_EXP_ORBITS_RUN_H
#define LSSAR_EXP_ORBITS_RUN_H

#include "exp/plan.h"

/* AdamW eps of the ordered scales. With tied heads every bin's embedding gets a small gradient at
   every step (the softmax's push away from the bins not chosen); eps 1e-8 scales that noise up to
   full-size steps, which moves the seldom-seen far-out bins together and off their order; 1e-4
   damps it (docs/ORBITS_RESULTS.md section 5). */
#define ORBITS_ORDERED_EPS_LIT 1e-4
#define ORBITS_ORDERED_EPS ((float)ORBITS_ORDERED_EPS_LIT)
#define ORBITS_STRINGIFY_(x) #x
#define ORBITS_STRINGIFY(x) ORBITS_STRINGIFY_(x)
#define ORBITS_ORDERED_EPS_TEXT ORBITS_STRINGIFY(ORBITS_ORDERED_EPS_LIT)   // "1e-4", for texts

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
                     // training seldom visits) and AdamW eps ORBITS_ORDERED_EPS, instead of the
                     // published untied heads
} orbits_scale;

/* The scale named name (smoke, tiny, laptop, small, paper), or NULL. */
const orbits_scale *orbits_scale_find(const char *name);

#define ORBITS_MAX_KINDS 8
#define ORBITS_MAX_MODELS 16   // kinds x seeds
typedef struct {
    orbits_scale scale;        // the sizes as run (--heads, --dim applied)
    char kinds[ORBITS_MAX_KINDS][32];
    int nkinds, seeds;         // models: kind k seed s is model k * seeds + s
    const char *attn;          // --attn as given (OUT/commands.sh's first line)
    const char *out, *pos, *dev;
    int steps;                 // training steps (0: the scale's)
    int threads, skip_simulate, dry;
} orbits_run_opts;

/* The model names: KIND, KIND-s1, ... (kind-major), then "oracle"; the number of models. */
int orbits_model_names(const orbits_run_opts *o, char names[][32]);
/* The whole pipeline; `run` runs one lssar command in this process (argv[0] the command). Prints
   what failed; returns 0 or the failed stage's exit status. */
int orbits_run(const orbits_run_opts *o, int (*run)(int argc, char **argv));
/* OUT/RESULTS.md and OUT/forces.png from the files the stages wrote in OUT; the wall time per stage
   from the jobs of `times` that ran (NULL: none). 0, or -1 with the errors printed. */
int orbits_report(const orbits_run_opts *o, const job_plan *times);

#endif
