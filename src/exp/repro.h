/*
 * repro.h - the inside of repro_run (reproduce.h is the entry): the runs the plan trains, shared by
 * the plan (repro_plan.c) and the report (repro_report.c, repro_tables.c).
 */
#ifndef LSSAR_EXP_REPRO_H
#define LSSAR_EXP_REPRO_H

#include <stddef.h>
#include <stdio.h>
#include <cJSON.h>
#include "exp/plan.h"
#include "exp/reproduce.h"

/* The runs of the comparison: the kind, the LSSAR power, and the run folder extrapolate makes. */
typedef struct { const char *attn; int p; const char *run; } repro_kind;
enum { REPRO_NKINDS = 7, REPRO_LSSA = 4 };   // REPRO_KINDS[REPRO_LSSA]: the lssa runs
extern const repro_kind REPRO_KINDS[REPRO_NKINDS];

/* The experiments that separate the causes of the head-size effect: one change to a model of head
   size D at the width of section 1 (repro_plan.c says which). */
typedef struct {
    const char *name, *what;
    int D;
    float rope_base;          // 0: the default
    int temp_d;               // 0: D's own temperature
    const char *attn;
} repro_cause;
enum { REPRO_NCAUSES = 5 };
extern const repro_cause REPRO_CAUSES[REPRO_NCAUSES];

/* The ablation: one stage of LSSAR changed per run; run is a kind and power as `lssar extrapolate
   --attn` takes it (and names its folder). */
typedef struct { const char *run, *what; } repro_ablation;
enum { REPRO_NABLATION = 12 };
extern const repro_ablation REPRO_ABLATION[REPRO_NABLATION];

/* "1,2,4" of the scale table into out (at most max); the count. */
int repro_ints(const char *s, int *out, int max);
/* The name of the lssa models' evaluation with LSSAR re-weighting, as extrapolate names it
   ("lssa+lssar-p15"). */
void repro_zeroshot_label(char *buf, size_t cap);

/* Every job of the scale into p (p->out is OUT). LSSAR_E_ARG when the plan is too long. */
int repro_plan_build(job_plan *p, const repro_scale *sc, const char *data);
/* OUT/REPORT.md and OUT/report.json from the jobs' states and the JSON their commands wrote. */
int repro_report_write(const job_plan *p, const repro_scale *sc, const char *data);

/* The tables the report computes, to f and under root (repro_tables.c). */
void repro_headsize_tables(FILE *f, const char *out, const repro_scale *sc, cJSON *root);
void repro_ablation_tables(FILE *f, const char *out, const repro_scale *sc, cJSON *root);
void repro_passkey_table(FILE *f, const char *out, const repro_scale *sc, cJSON *pj);

#endif
