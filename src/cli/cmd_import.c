// cmd_import.c - `lssar import`: another program's model file as an lssar run directory.
#include <stdio.h>
#include <string.h>
#include "args.h"
#include "lssar.h"
#include "core/util.h"
#include "model/checkpoint.h"
#include "model/hf.h"
#include "model/llmc.h"

static const char *ABOUT =
    "Read a model file of another program into an lssar run directory (OUT/model.safetensors),\n"
    "which eval, sample, passkey and attnstats read like any run's.\n"
    "--format llmc: llm.c's GPT-2 model file (gpt2_124M.bin and the files llm.c's training writes;\n"
    "float32 or bfloat16): softmax attention, learned positions, tied head; the padding rows of the\n"
    "vocabulary are dropped.\n"
    "--format hf: a transformers GPT-2 or GPT-NeoX folder (config.json and model.safetensors in\n"
    "float32, as save_pretrained writes them or the Hub's gpt2 holds them).";

int cmd_import(int argc, char **argv) {
    const char *in = NULL, *out = NULL, *format = NULL;
    arg_spec sp[] = {{"in", ARG_STR, &in, "the model file (llmc) or folder (hf) to read", 1, 0},
                     {"format", ARG_STR, &format,
                      "llmc (llm.c's GPT-2 model file) or hf (transformers' GPT-2 folder)", 1, 0},
                     {"out", ARG_STR, &out, "run directory to write (model.safetensors)", 1, 0},
                     {0}};
    int rc = args_parse("import", ABOUT, sp, argc, argv);
    if (rc >= 0) return rc;
    int hf = !strcmp(format, "hf");
    if (!hf && strcmp(format, "llmc"))
        return args_error("import",
                          "--format '%s': use llmc (llm.c's model file) or hf (transformers' GPT-2)", format);
    gpt *m = NULL;
    char path[4200];
    snprintf(path, sizeof path, "%s/model.safetensors", out);
    if ((rc = hf ? hf_load(in, &m) : llmc_load(in, &m)) || (rc = lssar_mkdirs(out)) ||
        (rc = ckpt_save_model(m, path, 0))) {
        fprintf(stderr, "lssar import: %s\n", lssar_errmsg());
        gpt_free(m);
        return 1;
    }
    const gpt_config *c = gpt_get_config(m);
    printf("wrote %s: softmax GPT-2 (layers %d, heads %d, dim %d, vocab %d, max_seq %d, %zu parameters)\n",
           path, c->layers, c->heads, c->dim, c->vocab, c->max_seq, gpt_num_params(m));
    gpt_free(m);
    return 0;
}
