/*
 * reproduce.h - the paper's comparison as one plan of ordinary lssar commands (`lssar reproduce`):
 * length extrapolation, head size and its causes, the ablation of the attention's stages,
 * attention statistics, passkey and orbits, run on worker processes (exp/plan.h), then one report,
 * OUT/REPORT.md and OUT/report.json, read from the JSON each command wrote.
 *
 *   repro_opts o = {.scale = repro_scale_named("smoke"), .out = "runs/x", .data = "data/d",
 *                   .workers = 2};
 *   repro_result r;
 *   int rc = repro_run(&o, &r);   // -1: lssar_errmsg() says why; 1: a job failed; 0: done
 *
 * The files: reproduce.c (the scales and the run), repro_plan.c (the plan), repro_report.c
 * (REPORT.md and report.json), repro_tables.c (the tables computed from the commands' JSON).
 */
#ifndef LSSAR_EXP_REPRODUCE_H
#define LSSAR_EXP_REPRODUCE_H

/* The sizes of a scale, by name. Every job runs on one core (--threads 1); the costs are the
   seconds one job takes per seed on one core of the reference machine (2-core x86-64, 2026-12),
   for the order and ETA. Every trained configuration has `seeds` seeds, paired across kinds. */
typedef struct {
    const char *name, *about;
    int seeds;
    // 1. length extrapolation at the paper's head size D = x_dim / x_heads: every kind
    int x_layers, x_heads, x_dim, x_seq, x_batch, x_steps, x_warmup, x_windows;
    float x_lr;
    const char *factors;
    // 1b. the same plan at the head size our first studies used, D = s_dim / s_heads
    int s_heads, s_dim;
    const char *s_factors;
    // 1c. head size: softmax and lssar p = 15 at width x_dim for each D of sweep (the D of
    // section 1 is taken from there), and the cause experiments (CAUSES), to sweep_factors
    const char *sweep, *sweep_factors;
    // 2. attention statistics over the models of 1 and 1b
    int a_windows, a_rows;
    // 3. passkey: models trained with a passkey share, then scored at p_factors x p_seq
    int p_layers, p_heads, p_dim, p_seq, p_batch, p_steps, p_warmup, p_depths, p_trials, p_seeds;
    float p_lr, p_mix;
    int p_short;   // passkey sequences without the task sentence (extrapolate --passkey-short)
    const char *p_factors;
    // 4. orbits: `lssar orbits run --scale orbits --heads o_heads` (0: the orbit scale's heads)
    const char *orbits;
    int o_heads;
    double c_data, c_extrap, c_small, c_attnstats, c_ptrain, c_peval, c_orbits;
} repro_scale;

typedef struct {
    const repro_scale *scale;
    const char *out;          // OUT: the jobs' folders, logs/, jobs/, commands.sh, the report
    const char *data;         // a byte-level data folder; a first job builds it when it is missing
    int workers;              // jobs at a time, one core each
    int dry;                  // print the plan's commands, run nothing
    int report_only;          // write the report of what OUT holds now, run nothing
} repro_opts;

typedef struct {
    int jobs;                 // jobs in the plan
    int done;                 // --report-only: jobs recorded as done
} repro_result;

/* The scale of that name (smoke, laptop); NULL for another. */
const repro_scale *repro_scale_named(const char *name);
/* Build the plan and, as o says, print it, run it and write the report, or only write the report.
   Returns 0 when every job finished (or for a dry run), 1 when a job failed (the others ran and
   the report is written), -1 when the plan or the report cannot be written (lssar_errmsg). */
int repro_run(const repro_opts *o, repro_result *r);

#endif
