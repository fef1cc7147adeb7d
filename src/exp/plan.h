/*
 * plan.h - a plan of lssar commands with dependencies, run on N worker processes (`lssar
 * reproduce`): the `make -j` of experiments; or one after another in this process (`lssar recipe`,
 * `lssar orbits run`: jobs_run_inline). A job is only its argv: the printed command is what runs.
 *
 * Each job is an ordinary lssar command line (printed, and written to OUT/commands.sh in an
 * order that respects the dependencies, so the plan can be replayed by hand). The runner starts
 * every job as a child process of this same binary with its output in OUT/logs/NAME.log, keeps at
 * most `workers` running, and always starts the ready job with the longest estimated path to the
 * end of the plan (critical path first), so a long job does not start last. A job that exits 0
 * leaves OUT/jobs/NAME.json (its command, exit status and wall time); a rerun skips the jobs whose
 * record holds the same command, and the commands themselves resume what was interrupted
 * (training from its checkpoint, evaluations from their caches). A failed job stops its
 * dependents, not the others. Progress (jobs done, what runs, elapsed, ETA from the estimates
 * scaled by how long the finished jobs really took) goes to stderr.
 */
#ifndef LSSAR_EXP_PLAN_H
#define LSSAR_EXP_PLAN_H

#include <stdio.h>
#include <cJSON.h>
#include "core/argv.h"

#define JOBS_MAX 128
#define JOBS_MAX_DEPS 16

typedef enum { JOB_WAITING, JOB_RUNNING, JOB_DONE, JOB_FAILED, JOB_BLOCKED } job_state;

typedef struct {
    char name[64];            // "extrapolate/softmax": the log and record file names ('/' -> '-')
    args_vec argv;            // the command, without "lssar"
    double cost;              // estimated seconds on one core (order and ETA)
    int deps[JOBS_MAX_DEPS], ndeps;
    const char *skip;         // in-process: why it need not run (printed, not run; a static string)
    // what happened
    job_state state;
    int reused;               // finished by an earlier run (its record)
    int exit;                 // exit status (a signal: 128 + its number)
    double seconds;           // wall time (of the run that finished it)
    double t0;
    int pid;
} job;

typedef struct {
    job jobs[JOBS_MAX];
    int n;
    const char *out;          // OUT: OUT/logs, OUT/jobs, OUT/commands.sh
    int workers;
    double wall;              // seconds this call of jobs_run took
} job_plan;

/* Append a job running `lssar ARGV` (the strings of a move to the job; a is left empty) after the
   jobs deps[0..ndeps-1] (indices returned by earlier calls). Returns its index, or -1 when the
   plan is full. */
int jobs_add(job_plan *p, const char *name, double cost, const int *deps, int ndeps, args_vec *a);
/* Write OUT/commands.sh; with dry set, print the commands and stop there. Otherwise run the plan
   to its end. Returns 0 when every job finished, 1 when one failed (each failure is printed with
   its log), -1 when OUT cannot be written (lssar_errmsg says why). */
int jobs_run(job_plan *p, int dry);
/* Without running anything: mark the jobs whose record (OUT/jobs) holds their command as done (as
   jobs_run finds them), the others as waiting; the number done. For a report of where a plan stands. */
int jobs_load(job_plan *p);
/* In-process: the plan's waiting jobs, in the order they were added (a plan may be built step by
   step: each call runs the jobs added since the last), each printed as "\n$ lssar ...", appended to
   log and run through run(argc, argv), the caller's command dispatcher (argv[0] the command). Stops
   at the first job that fails and returns its exit status; 0 when all finished. */
typedef struct {
    int (*run)(int argc, char **argv);
    FILE *log;                // OUT/commands.sh, one line per job (NULL: none)
    int dry;                  // print the commands, run nothing
    int timings;              // print each job's wall time after it, "  (1.2 s)"
} plan_inline;
int jobs_run_inline(job_plan *p, const plan_inline *o);
/* The job's command as a shell line ("lssar train ..."); malloc'd. */
char *jobs_command(const job *j);
/* What a finished job did, {"name", "command", "exit", "seconds"}: its record in OUT/jobs and its
   entry in a report (each adds its own keys after these). */
cJSON *jobs_record(const job *j);
void jobs_free(job_plan *p);

#endif
