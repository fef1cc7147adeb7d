/*
 * tasks.h - the `lssar orbits` stages as library functions, each with an options struct: the
 * subcommands (src/cli/cmd_orbits_*.c) parse their flags into these and call them, and
 * `lssar orbits run` calls the same functions in sequence and builds RESULTS.md from what they
 * return. Each writes the files its command writes and prints the command's summary to
 * `report` (NULL: nothing); failures return an lssar_err with the detail in lssar_errmsg()
 * (the commands print it as "lssar orbits NAME: DETAIL").
 */
#ifndef LSSAR_ORBITS_TASKS_H
#define LSSAR_ORBITS_TASKS_H

#include <stdint.h>
#include <stdio.h>
#include "lssar.h"
#include "orbits/probe.h"

/* simulate: lssar_orbits_simulate into dir, then one summary line (rows, rate, files) to report. */
int orb_simulate_run(const char *dir, const lssar_orb_opts *o, FILE *report);

/* bench: rows/s of the simulator on 1 and `threads` threads (0: all cores), optionally with the
   files written (into a temporary folder under dir, removed after; NULL: /tmp), the projected
   hours for the published 10M systems, to report; json (NULL: none) gets the figures. */
typedef struct {
    int64_t systems;
    int threads, write;
    int preset;                 // orb_preset_parse
    const char *preset_name;    // as given (the report's first line)
    const char *dir, *json;
} orb_bench_opts;
int orb_bench_run(const orb_bench_opts *o, FILE *report);

/* eval: next-position accuracy of a trained orbit model (orb_eval_model) beside the previous-
   position baseline; the table to report, and the JSON file when json is set. */
typedef struct {
    const char *model;      // run directory or .safetensors file
    const char *data;       // directory written by orbits simulate
    const char *split;      // ("val")
    const char *json;       // NULL: no JSON file
    int64_t systems;        // first N systems (0: all)
    int seq, batch;         // rows predicted per sequence (999), sequences per forward (4)
    int progress;
    lssar_device device;    // where the model runs (LSSAR_DEVICE_CPU)
    FILE *report;           // (stdout)
} orb_eval_opts;
void orb_eval_defaults(orb_eval_opts *o);
int orb_eval_run(const orb_eval_opts *o, orb_eval_result *r);

/* The force set DATA/SPLIT_state.bin and its 90%/10% labelled split (orb_force_split_make with 2
   labelled rows per test system); the error says how to make the force set. */
int orb_force_open(const char *data, const char *split, uint64_t systems, uint64_t seed,
                   orb_state *st, orb_force_split *fs);

/* probe: fine-tune the model with the force head, predict the kept test rows: OUT/forces.csv and
   OUT/probe.json; a summary line to report. */
typedef struct {
    const char *model, *data, *out;
    const char *split;      // ("force")
    uint64_t systems, keep; // (0: all; 5000)
    int threads;            // > 0: OpenMP threads
    lssar_device device;    // where the model is fine-tuned (LSSAR_DEVICE_CPU)
    orb_probe_opts probe;   // orb_probe_defaults; its seed also draws the labelled rows
    FILE *report;           // (stderr)
} orb_probe_task;
void orb_probe_task_defaults(orb_probe_task *o);
typedef struct {
    int64_t rows;           // test rows kept
    double final_train_mse, mean_abs_log10_error, seconds;
} orb_probe_summary;
int orb_probe_run(const orb_probe_task *o, orb_probe_summary *r);

/* oracle: the k-NN control on the true state, the same rows and files as the probe. */
typedef struct {
    const char *data, *out;
    const char *split;      // ("force")
    uint64_t systems, keep, seed;   // (0, 5000, 0)
    int k, threads;         // (2, 0)
    FILE *report;           // (stderr)
} orb_oracle_opts;
void orb_oracle_defaults(orb_oracle_opts *o);
int orb_oracle_run(const orb_oracle_opts *o, orb_probe_summary *r);

/* newton: symbolic regression of forces.csv per galaxy and the law audit (newton.c). */
typedef struct {
    const char *forces;     // forces.csv
    const char *target;     // ("F_pred") or "F_true"
    const char *json;       // NULL: no JSON file
    int galaxies, rows;     // (5, 1000)
    uint64_t seed;
    lssar_sr_options sr;    // the published settings; threads and verbose are the caller's
    FILE *report;           // (stdout)
} orb_newton_opts;
void orb_newton_defaults(orb_newton_opts *o);
typedef struct {
    char *equation;         // the selected law
    int depends[3];         // on r, m1, m2
} orb_newton_galaxy;
typedef struct {
    int galaxies;
    orb_newton_galaxy *galaxy;
    double c_m1m2, c_m1m2_over_G, rel_l1_m1m2, c_m1, rel_l1_m1, m2_rank_correlation;   // medians
    const char *better_form;            // "c*m1*m2/r**2" or "c*m1/r**2" (static)
    int galaxies_depending_on_m2, galaxies_newton_within_1pct;
} orb_newton_result;
int orb_newton_run(const orb_newton_opts *o, orb_newton_result *r);
void orb_newton_result_free(orb_newton_result *r);

#endif
