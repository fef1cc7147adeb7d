/*
 * extrap_run.h - the inside of extrapolate(): a run, the state its stages share, and the files
 * of each stage (extrapolate.h is the entry).
 *
 *   extrapolate.c      the stages in order; the data; runs spread over MPI ranks
 *   extrap_plan.c      the run list: --attn kinds x powers, the lssa->lssar run, seeds
 *   extrap_train.c     train (or resume, or reuse) one run's model
 *   extrap_eval.c      evaluate one run at every length; score it on the downstream tasks
 *   extrap_cache.c     the caches of both in the run's folder, under a key of what they depend on
 *   extrap_stats.c     the statistics over seeds of each group, from the caches read back
 *   extrap_json.c      results.json
 *   extrap_report.c    results.md (and stdout) and the plots
 *
 * Run K * nb + b is group b's run of seed index K: the groups are the runs of the first seed's
 * list, and the runs of one group differ only in their seed (a paired design: the kinds of one
 * seed index share the initialisation stream and the data order).
 */
#ifndef LSSAR_EXP_EXTRAP_RUN_H
#define LSSAR_EXP_EXTRAP_RUN_H

#include <cJSON.h>
#include <stdint.h>
#include "data/shard.h"
#include "exp/docwin.h"
#include "exp/downstream.h"
#include "exp/extrapolate.h"

#define EXTRAP_MAX_GROUPS 16   // runs per seed: the kinds, the powers, the lssa->lssar evaluation
#define EXTRAP_POS_BINS 64     // text: bins of the per-position loss over the longest windows

typedef struct {
    char name[64];          // run folder and table label
    lssar_attn_kind attn;   // the kind evaluated
    float p;
    int eval_only;          // 1: evaluate the model trained in folder src with attn switched on
    char src[64];
    int group;              // its run in the first seed's list
    int seed_ix;            // trained with --seed + seed_ix
    int64_t step;
    double train_s;
    double loss[EXTRAP_MAX_LENGTHS], se[EXTRAP_MAX_LENGTHS];   // mqar: accuracy in loss
    double lo[EXTRAP_MAX_LENGTHS], hi[EXTRAP_MAX_LENGTHS];     // mqar: its Wilson interval
    int windows[EXTRAP_MAX_LENGTHS];                           // mqar: queries
    double pos_loss[EXTRAP_POS_BINS];   // text: mean loss per token in bins of the longest windows
    int pos_bins;                       // how many (0: no window of the longest length)
    ds_result ds[EXTRAP_MAX_TASKS];     // downstream results, one per task
} extrap_run;

typedef struct {
    const extrap_opts *o;
    train_opts base;          // what every run is trained with (data, vocab, align set up here)
    extrap_run *runs;
    int nr, nb;               // nr = nb x seeds runs, nb groups
    int seqs[EXTRAP_MAX_LENGTHS], nf;   // the evaluation lengths
    char *train_list;         // the training shards, comma-separated
    char val_path[4096];      // text: val.bin
    char hash[65];            // text: sha256 of the data's manifest.json ("none" for mqar)
    shard val;
    exp_docs docs;            // text: val_index.json, when have_docs
    int have_docs;
    lssar_tokenizer *tok;     // GPT-2, for the downstream tasks
    double t_all;             // when training started (the report's wall time)
} extrap;

/* The per-position curve's bin width at the longest length T: EXTRAP_POS_BINS bins (1 position
   each below that). */
static inline int extrap_pos_bin_width(int T) {
    return T >= EXTRAP_POS_BINS ? (T + EXTRAP_POS_BINS - 1) / EXTRAP_POS_BINS : 1;
}

/* x->runs, x->nr, x->nb from the options (LSSAR_E_ARG naming the flag). */
int extrap_plan(extrap *x);

/* Train (or resume) run r unless its model already reached the step budget; a folder holding
   another configuration, data recipe or seed is an error. */
int extrap_train_run(extrap *x, extrap_run *r);
/* A run's training wall time, as its folder recorded it (NaN if not). */
double extrap_train_seconds(const char *out, const char *name);

/* Evaluate run r at every length (or read its cache) and cache the result. */
int extrap_eval_run(extrap *x, extrap_run *r);
/* Score run r on the downstream tasks (or read their cache) and cache the results. */
int extrap_downstream_run(extrap *x, extrap_run *r);

/* Where a run's cache `what` ("extrap": its evaluation, "downstream": its downstream scores) is
   kept: RUN/WHAT.json, RUN/WHAT-NAME.json for a run that only evaluates the model of RUN. */
void extrap_cache_path(char *buf, size_t n, const char *out, const extrap_run *r, const char *what);
/* The evaluation cache of a run: the key of what its numbers depend on, and reading it back
   into r: 1 if it is there, under key (NULL: any key), and complete. The text task's entries must
   hold the per-window losses (the paired statistics' input): a cache of an older version without
   them counts as absent. win, if not NULL, receives them (win[f] malloc'd, r->windows[f] entries;
   the caller frees them). */
void extrap_cache_key(char *buf, size_t n, const extrap *x, const extrap_run *r);
int extrap_cache_load(const char *path, const char *key, extrap_run *r, int nf, int mqar, double **win);
/* win: the text task's per-window losses, win[f] of r->windows[f] (NULL for mqar). */
int extrap_cache_save(const char *path, const char *key, const extrap *x, const extrap_run *r,
                      double *const *win);
/* A run's results at each length, as results.json and the cache hold them. */
cJSON *extrap_results_json(const extrap_run *r, const int *seqs, int nf, int mqar);
/* The downstream cache of a run: the key (step, limit, kind, tasks and their files), and reading
   it back: 1 if it holds key. */
void extrap_ds_cache_key(char *buf, size_t n, const extrap *x, const extrap_run *r);
int extrap_ds_cache_load(const char *path, const char *key, extrap_run *r, int ntasks);
int extrap_ds_cache_save(const char *path, const char *key, const extrap_run *r, int ntasks);

/* A group at one length: the mean over seeds with its 95% interval, and the paired difference to
   the softmax group; NaN where there is nothing (no windows, no interval, no softmax group). */
typedef struct {
    double mean, lo, hi;
    double dmean, dlo, dhi;
    double *dseed;            // the difference of each seed (seeds entries)
} extrap_gstat;

/* A group on one downstream task over the seeds (seeds >= 2): the mean score and the half-width
   of its t interval, and the same for the paired difference to softmax. */
typedef struct { double mean, half, dmean, dhalf; } extrap_dsstat;

typedef struct {
    int sg;                   // the softmax group (-1: none)
    extrap_run *cr;           // every run as its cache holds it (nr)
    extrap_gstat *gs;         // group b at length f: gs[b * nf + f]
    double *dseed;            // their dseed arrays
    int tmax, pbw;            // the longest length and its per-position bin width
    double gpos[EXTRAP_MAX_GROUPS][EXTRAP_POS_BINS];   // each group's per-position curve
    int gbins[EXTRAP_MAX_GROUPS];
    extrap_dsstat dss[EXTRAP_MAX_GROUPS][EXTRAP_MAX_TASKS];
} extrap_stats;

/* The statistics of every group, from every run's cache read back (each written by the rank that
   evaluated the run), so that one process, N ranks and a rerun compute from the same bits. */
int extrap_stats_compute(const extrap *x, extrap_stats *st);
void extrap_stats_free(extrap_stats *st);
/* The score a pooled downstream table reports: acc_norm, LAMBADA's acc. */
double extrap_ds_score(const ds_result *d);

/* results.json (extrap_json.c), then results.md, stdout and the plots: rank 0's part. */
int extrap_write_json(const extrap *x, const extrap_stats *st);
int extrap_report(const extrap *x);

#endif
