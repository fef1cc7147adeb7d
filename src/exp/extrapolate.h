/*
 * extrapolate.h - length extrapolation (`lssar extrapolate`): one model per attention kind, all
 * trained with the same data order, size, seed and budget, then each evaluated at T x factor.
 *
 *   extrap_opts o;
 *   extrap_opts_default(&o);
 *   o.data = "data/en"; o.out = "runs/x"; o.attn = "softmax,lssar";   // and the lengths, powers
 *   extrap_stage at;
 *   if (extrapolate(&o, &at)) ...   // lssar_errmsg() says why, `at` in which stage
 *
 * The runs: every kind of o.attn (one per power of o.powers for a kind that re-weights and names
 * no power of its own, "lssar-p3"), and, when lssa is trained, the lssa model evaluated with LSSAR
 * re-weighting (p = powers[0]); each o.seeds times, as RUN, RUN-s1, ... Under mpirun run i goes
 * to rank i mod N; rank 0 writes OUT/results.json, results.md (also on stdout) and the plots.
 * Trained models, evaluations and downstream scores are cached in the run folders, so a rerun
 * continues where an interrupted one stopped (extrap_run.h).
 */
#ifndef LSSAR_EXP_EXTRAPOLATE_H
#define LSSAR_EXP_EXTRAPOLATE_H

#include "exp/mqar.h"
#include "train/train.h"

#define EXTRAP_MAX_LENGTHS 16   // --factors
#define EXTRAP_MAX_POWERS 8     // --lssar-p
#define EXTRAP_MAX_TASKS 8      // --downstream
#define EXTRAP_MAX_RUNS 256     // every run of every seed

typedef struct {
    char name[64], path[4096];   // ds_resolve_task's name and requests file
} extrap_task;

typedef struct {
    train_opts train;            // every run's model, optimiser, budget and --seed (seed index 0)
    int mqar;                    // 0: held-out text documents of `data`; 1: associative recall
    const char *data;            // text: a folder written by `lssar data build`
    const char *out;             // a folder per run, results.*
    const char *attn;            // the kinds, comma-separated; one that re-weights may pin its power
    double powers[EXTRAP_MAX_POWERS];   // re-weighting powers (npowers >= 1)
    int npowers;
    int factors[EXTRAP_MAX_LENGTHS];    // evaluation lengths: train.seq x factor (nfactors >= 1)
    int nfactors;
    int seeds;                   // each run trained with --seed, --seed + 1, ...
    int max_windows;             // text: windows per length at most
    int eval_batch;              // windows per forward pass
    int no_zeroshot;             // 1: no lssa model evaluated with LSSAR re-weighting
    int no_plot;
    mqar_params mqar_task;       // mqar: alphabets and pairs
    int mqar_eval;               // mqar: test sequences per length
    int mqar_train_seqs;         // mqar: training sequences (0: steps x batch x accum x 2)
    extrap_task tasks[EXTRAP_MAX_TASKS];   // downstream tasks each run is scored on
    int ntasks;
    int task_limit;              // documents per downstream task at most (0: all)
} extrap_opts;

/* The defaults of `lssar extrapolate --help` (no lengths or powers: the caller gives them). */
void extrap_opts_default(extrap_opts *o);

/* Where a failed call stopped: the caller's message and exit status depend on it. */
typedef enum {
    EXTRAP_SETUP,        // the run list, --out or the data: a bad option or input
    EXTRAP_TRAIN,        // training a run (LSSAR_E_NAN: the loss diverged)
    EXTRAP_EVAL,         // evaluating a run
    EXTRAP_TOKENIZER,    // opening the GPT-2 tokenizer for the downstream tasks
    EXTRAP_DOWNSTREAM,   // scoring a run on the downstream tasks
    EXTRAP_GATHER,       // collecting every rank's runs
    EXTRAP_REPORT,       // results.*, plots: rank 0's error (the other ranks only learn that it failed)
} extrap_stage;

/* Train, evaluate and report every run; 0, or the error with *at the stage it stopped in. Every
   rank of an MPI job calls it; a failure of one rank is every rank's. */
int extrapolate(const extrap_opts *o, extrap_stage *at);

#endif
