// cmd_extrapolate.c - `lssar extrapolate`: its flags into the options of extrapolate() (src/exp/
// extrapolate.h), which trains one model per attention kind with the same data order, size, seed
// and budget, then evaluates each at T x factor.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "args.h"
#include "lssar.h"
#include "core/dist.h"
#include "exp/common.h"
#include "exp/downstream.h"
#include "exp/extrapolate.h"

static const char *ABOUT =
    "Length extrapolation: train one model per attention kind (identical data order, size, seed and\n"
    "step budget), then evaluate each at T x factor for every --factors entry.\n"
    "\n"
    "--task text (default): --data DIR is a folder written by `lssar data build` (train_*.bin, val.bin,\n"
    "val_index.json). Evaluation windows lie inside one held-out document each (val_index.json);\n"
    "at most --max-windows per length, evenly spaced, the same windows for every run; the table gives\n"
    "the mean next-token loss +- the half-width of its 95% interval (see --seeds).\n"
    "--task mqar: multi-query associative recall (Zoology): --pairs key-value pairs then the keys as\n"
    "queries; trained at --seq, tested on --mqar-eval fresh sequences per length; the table gives the\n"
    "accuracy of the values predicted after the queries (95% Wilson interval in results.json). Each\n"
    "training sequence is exactly one training window (T + 1 tokens; windows start only at sequence\n"
    "boundaries, train --align T+1), so every query's pair is in the window.\n"
    "\n"
    "--passkey-mix F (text task): each kind is trained with a share F of its windows replaced by passkey\n"
    "sequences (train --passkey-mix; byte data needs --seq >= 257); test them with `lssar passkey`\n"
    "(with --seeds N, all seeds of a kind pooled: --model OUT/KIND,OUT/KIND-s1,...,OUT/KIND-s{N-1}).\n"
    "\n"
    "Runs: every kind in --attn; lssar once per power in --lssar-p (default 15; e.g. 15,3); and, when lssa\n"
    "is trained, the lssa model evaluated with LSSAR re-weighting switched on at evaluation only\n"
    "(p = the first --lssar-p): the paper's \"fine-tuning-free\" claim.\n"
    "\n"
    "--seeds N: every run is trained N times, with seeds --seed, --seed + 1, ..., --seed + N - 1, in\n"
    "folders RUN (seed index 0: the names of a one-seed call), RUN-s1, ..., RUN-s(N-1); the kinds of\n"
    "one seed index share the seed, hence the initialisation stream and the data order (a paired\n"
    "design). Per run group (kind or power) and length: the mean over seeds of the per-seed mean\n"
    "with the 95% Student t interval mean +- t(0.975, N-1) sd / sqrt(N), and, when softmax is among\n"
    "the kinds, the paired difference to softmax: d_K = mean over the (identical) windows of\n"
    "loss(run, seed K) - loss(softmax, seed K), with its t interval over the N values d_K; the\n"
    "difference table of results.md marks (bold) only the cells whose interval excludes 0. With one\n"
    "seed (the default) the intervals are over windows only (mean +- 1.96 standard errors, of the\n"
    "per-window loss or per-window difference; mqar: the Wilson interval, no interval for the\n"
    "difference): they leave out the variation between trainings.\n"
    "\n"
    "Writes --out/RUN/ (each run's checkpoint and log.jsonl), --out/results.json\n"
    "({\"seeds\", \"interval\", \"groups\": [{\"name\", \"attn\", \"p\", \"eval_only\", \"runs\", "
    "\"seeds\",\n"
    "\"results\": [{\"seq\", \"mean\", \"ci95\": [lo, hi], \"per_seed\", \"windows\", \"diff_vs_softmax\":\n"
    "{\"mean\", \"ci95\", \"excludes_zero\", \"per_seed\"}}]}], \"runs\": [{\"name\", \"group\", \"seed\",\n"
    "\"attn\", \"p\", \"train_seq\", \"results\": [{\"seq\", \"loss\", \"stderr\", \"windows\"}]}]}),\n"
    "--out/results.md (tables) and --out/loss_vs_length.png (group means with their intervals;\n"
    "gnuplot; skipped with a note if missing). The text task also gives the loss at each position of\n"
    "the longest windows, in 64 bins (where each kind breaks past its training length): each group's\n"
    "\"per_position\": {\"seq\", \"bin\", \"start\", \"loss\"} (mean over seeds), each run's "
    "\"per_position\"\n"
    "(the bins' losses), a table of results.md by position range and --out/loss_vs_position.png.\n"
    "Resumable: a run whose model reached --steps is not retrained; an interrupted one resumes from\n"
    "its checkpoint; evaluations, with their per-window losses, are cached in RUN/extrap*.json (a\n"
    "cache without them, from an older version, is recomputed).\n"
    "\n"
    "--downstream TASKS (text task, GPT-2-tokenizer data): also score every run zero-shot on these\n"
    "`lssar downstream` tasks (e.g. hellaswag,piqa or all; the first --downstream-limit documents of\n"
    "each, 0: all) and put acc / acc_norm with 95% Wilson intervals and chance into results.json\n"
    "(each run's \"downstream\") and a second table of results.md; cached in RUN/downstream*.json.\n"
    "With --seeds N >= 2 a third table pools the seeds: per group and task the mean acc_norm (LAMBADA:\n"
    "acc) with its 95% t interval and the paired difference to softmax (each group's \"downstream\":\n"
    "[{\"task\", \"metric\", \"mean\", \"ci95\", \"per_seed\", \"diff_vs_softmax\"}]).\n"
    "\n"
    "Under mpirun -np N the runs (of every seed) are spread over the ranks (run i of the list on\n"
    "rank i mod N; rank 0 prints which): each rank trains and evaluates its runs as one process\n"
    "would, and rank 0 writes results.*, the same numbers as one process. --out must be a folder\n"
    "every rank sees (a shared filesystem): each run's folder is written by the rank that trains it,\n"
    "the lssa->lssar run reads the lssa checkpoint, and rank 0 reads every run's cached evaluation.\n"
    "--threads is per rank (docs/DISTRIBUTED.md).";

// --task, --data and the numbers: 0, or 2 after the error.
static int check_flags(extrap_opts *o, const char *task) {
    const char *cmd = "extrapolate";
    train_opts *t = &o->train;
    o->mqar = !strcmp(task, "mqar");
    if (!o->mqar && strcmp(task, "text"))
        return args_error(cmd, "--task '%s' is unknown: use text or mqar", task);
    if (!o->mqar && !o->data)
        return args_error(cmd, "missing --data DIR (a folder written by `lssar data build`)");
    if (t->steps < 1 || t->seq < 1 || t->batch < 1 || t->accum < 1)
        return args_error(cmd, "--steps, --seq, --batch and --accum must be >= 1");
    if (t->model.layers < 1 || t->model.heads < 1 || t->model.dim % t->model.heads)
        return args_error(cmd, "--heads must divide --dim (and both be >= 1)");
    if (o->eval_batch < 1) return args_error(cmd, "--eval-batch must be >= 1");
    if (o->seeds < 1 || o->seeds > EXTRAP_MAX_RUNS)
        return args_error(cmd, "--seeds must be in 1..%d (got %d)", EXTRAP_MAX_RUNS, o->seeds);
    if (!(t->passkey_mix >= 0 && t->passkey_mix <= 1))
        return args_error(cmd, "--passkey-mix must be in [0, 1] (got %g)", t->passkey_mix);
    if (o->mqar && t->passkey_mix > 0)
        return args_error(cmd, "--passkey-mix needs text data: drop it for --task mqar");
    return 0;
}

// --downstream: the tasks resolved now, so that a typo or an unfetched set fails before training.
static int resolve_tasks(extrap_opts *o, const char *downstream) {
    const char *cmd = "extrapolate";
    if (!downstream) return 0;
    if (o->mqar) return args_error(cmd, "--downstream needs the text task (GPT-2-tokenizer data)");
    if (o->task_limit < 0) return args_error(cmd, "--downstream-limit must be >= 0 (0: all documents)");
    char dl[2048], evdir[4096];
    snprintf(dl, sizeof dl, "%s", strcmp(downstream, "all") ? downstream : DS_ALL_TASKS);
    const char *ld = getenv("LSSAR_DATA");
    snprintf(evdir, sizeof evdir, "%s/evals", ld && *ld ? ld : "data");
    for (char *tk = strtok(dl, ","); tk; tk = strtok(NULL, ",")) {
        if (o->ntasks == EXTRAP_MAX_TASKS)
            return args_error(cmd, "--downstream: at most %d tasks", EXTRAP_MAX_TASKS);
        extrap_task *t = &o->tasks[o->ntasks++];
        if (ds_resolve_task(tk, evdir, t->name, sizeof t->name, t->path, sizeof t->path))
            return args_error(cmd, "--downstream: %s", lssar_errmsg());
    }
    return 0;
}

// --factors and --lssar-p: 0, or 2 after the error.
static int parse_lists(extrap_opts *o, const char *factors, const char *lssar_p) {
    const char *cmd = "extrapolate";
    o->nfactors = args_int_list(cmd, "--factors", factors, o->factors, EXTRAP_MAX_LENGTHS);
    if (o->nfactors < 1) return 2;
    for (int i = 0; i < o->nfactors; i++)
        if (o->train.model.pos == LSSAR_POS_LEARNED && o->factors[i] > 1)
            return args_error(cmd, "learned positions cannot go past --seq: use --pos rope or none, or "
                                   "--factors 1");
    o->npowers = exp_parse_doubles(lssar_p, o->powers, EXTRAP_MAX_POWERS);
    if (o->npowers < 1)
        return args_error(cmd, "--lssar-p '%s' must be a comma list of powers like 15,3", lssar_p);
    for (int i = 0; i < o->npowers; i++)
        if (!(o->powers[i] > 0)) return args_error(cmd, "--lssar-p values must be > 0");
    return 0;
}

// The message and exit status of a failed call, by the stage it stopped in.
static int failed(extrap_stage at, int rc) {
    const char *msg = lssar_errmsg();
    switch (at) {
    case EXTRAP_SETUP: return args_error("extrapolate", "%s", msg);
    case EXTRAP_TRAIN:
        fprintf(stderr, "lssar extrapolate: training failed: %s\n", msg);
        return rc == LSSAR_E_NAN ? 3 : 1;
    case EXTRAP_EVAL: fprintf(stderr, "lssar extrapolate: evaluation failed: %s\n", msg); return 1;
    case EXTRAP_DOWNSTREAM:
        fprintf(stderr, "lssar extrapolate: downstream evaluation failed: %s\n", msg);
        return rc == LSSAR_E_UNSUPPORTED ? 2 : 1;
    case EXTRAP_REPORT: if (lssar_dist_rank() != 0) return 1;   // rank 0 says why
    /* fall through */
    default: fprintf(stderr, "lssar extrapolate: %s\n", msg); return 1;
    }
}

int cmd_extrapolate(int argc, char **argv) {
    extrap_opts o;
    extrap_opts_default(&o);
    train_opts *t = &o.train;
    const char *factors = "1,2,4,8,16", *lssar_p = "15", *task = "text", *downstream = NULL;
    args_model_flags mf = {.device = "cpu", .pos = "rope"};
    arg_spec sp[] = {
        {"task", ARG_STR, &task, "text (held-out documents) or mqar (associative recall)", 0, 0},
        {"data", ARG_STR, &o.data, "folder from `lssar data build` (text task)", 0, 0},
        {"out", ARG_STR, &o.out, "output folder (one sub-folder per run, results.*)", 1, 0},
        {"attn", ARG_STR, &o.attn,
         "attention kinds to train, comma-separated: presets or presets with stages (softmax+cos+rw; see "
         "`lssar train --help`); a kind that re-weights may fix its power as its run folder is named "
         "(softmax+rw-p15)", 0, 0},
        {"lssar-p", ARG_STR, &lssar_p,
         "re-weighting powers, one run each for every kind that re-weights and fixes no power (the first is "
         "also used for the lssa->lssar evaluation)", 0, 0},
        {"factors", ARG_STR, &factors, "evaluation lengths as multiples of --seq", 0, 0},
        {"max-windows", ARG_INT, &o.max_windows, "text: windows per length at most (evenly spaced)", 0, 0},
        {"eval-batch", ARG_INT, &o.eval_batch, "windows per forward pass in evaluation", 0, 0},
        {"no-zeroshot", ARG_BOOL, &o.no_zeroshot, "skip the lssa model evaluated with LSSAR re-weighting",
         0, 0},
        {"no-plot", ARG_BOOL, &o.no_plot, "do not run gnuplot", 0, 0},
        {"downstream", ARG_STR, &downstream,
         "also score each run on these `lssar downstream` tasks (comma list or all)", 0, 0},
        {"downstream-limit", ARG_INT, &o.task_limit, "documents per downstream task at most (0: all)", 0, 0},
        {"pairs", ARG_INT, &o.mqar_task.pairs, "mqar: key-value pairs per sequence", 0, 0},
        {"mqar-keys", ARG_INT, &o.mqar_task.keys, "mqar: key alphabet", 0, 0},
        {"mqar-values", ARG_INT, &o.mqar_task.values, "mqar: value alphabet", 0, 0},
        {"passkey-mix", ARG_FLOAT, &t->passkey_mix,
         "text: share of training windows replaced by passkey sequences (0-1)", 0, 0},
        {"passkey-short", ARG_BOOL, &t->passkey_prompt,
         "text: passkey sequences without the task sentence (lssar passkey reads it from the run)", 0, 0},
        {"mqar-eval", ARG_INT, &o.mqar_eval, "mqar: test sequences per length", 0, 0},
        {"mqar-train-seqs", ARG_INT, &o.mqar_train_seqs,
         "mqar: training sequences (0: steps x batch x accum x 2)", 0, 0},
        ARGS_MODEL_SPECS(&t->model, &mf, 1),
        {"seq", ARG_INT, &t->seq, "training length T", 0, 0},
        {"batch", ARG_INT, &t->batch, "sequences per micro-batch", 0, 0},
        {"accum", ARG_INT, &t->accum, "micro-batches per step", 0, 0},
        {"steps", ARG_INT, &t->steps, "optimizer steps per run (the same budget for every kind)", 0, 0},
        {"lr", ARG_FLOAT, &t->lr, "peak learning rate", 0, 0},
        {"warmup", ARG_INT, &t->warmup, "warmup steps (-1: 10%)", 0, 0},
        {"lr-floor", ARG_FLOAT, &t->min_lr_frac, "cosine floor as a fraction of --lr", 0, 0},
        {"wd", ARG_FLOAT, &t->wd, "AdamW weight decay", 0, 0},
        {"clip", ARG_FLOAT, &t->clip, "gradient norm clip (0: off)", 0, 0},
        {"seed", ARG_U64, &t->seed, "seed of initialisation and data order (the same for every kind)", 0, 0},
        {"seeds", ARG_INT, &o.seeds,
         "train every run this many times, with --seed, --seed + 1, ... (95% intervals over seeds)", 0, 0},
        {"threads", ARG_INT, &t->threads, "CPU threads (0: all)", 0, 0},
        {"quiet", ARG_BOOL, &t->quiet, "no progress lines", 0, 0},
        {"device", ARG_STR, &mf.device, ARGS_DEVICE_HELP, 0, 0},
        {0}};
    int rc = args_parse("extrapolate", ABOUT, sp, argc, argv);
    if (rc >= 0) return rc;
    if ((rc = args_model_check("extrapolate", &mf, &t->model)) || (rc = check_flags(&o, task)) ||
        (rc = resolve_tasks(&o, downstream)) || (rc = parse_lists(&o, factors, lssar_p)))
        return rc;
    extrap_stage at;
    return (rc = extrapolate(&o, &at)) ? failed(at, rc) : 0;
}
