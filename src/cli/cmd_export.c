// cmd_export.c - `lssar export`: a run's model in another program's format (llm.c's, transformers').
#include <stdio.h>
#include <string.h>
#include "args.h"
#include "lssar.h"
#include "model/checkpoint.h"
#include "model/hf.h"
#include "model/llmc.h"

static const char *ABOUT =
    "Write a model in another program's file format.\n"
    "--format llmc: llm.c's GPT-2 model file (the layout of its gpt2_124M.bin: float32, the\n"
    "vocabulary padded to a multiple of 128), for models of GPT-2's shape: softmax attention,\n"
    "learned positions, tied head, one token channel (train with --pos learned --attn softmax).\n"
    "llm.c's train_gpt2 then loads it in place of gpt2_124M.bin.\n"
    "--format hf: a folder (--out) with config.json and model.safetensors that Hugging Face\n"
    "transformers loads with from_pretrained: softmax models with learned positions as GPT-2,\n"
    "with RoPE as GPT-NeoX (tied head, one token channel); every other text model as lssar's own\n"
    "checkpoint with modeling_lssar.py (transformers' trust_remote_code), whose attention is the\n"
    "lssar Python package's (make python).\n"
    "`lssar import` reads both back.\n"
    "--model is a run directory (its model.safetensors) or a .safetensors file.";

int cmd_export(int argc, char **argv) {
    const char *model = NULL, *out = NULL, *format = NULL;
    arg_spec sp[] = {
        {"model", ARG_STR, &model, "run directory or model .safetensors file", 1, 0},
        {"format", ARG_STR, &format, "llmc (llm.c's GPT-2 model file) or hf (a transformers folder)", 1, 0},
        {"out", ARG_STR, &out, "the file (llmc) or folder (hf) to write", 1, 0},
        {0}};
    int rc = args_parse("export", ABOUT, sp, argc, argv);
    if (rc >= 0) return rc;
    int hf = !strcmp(format, "hf");
    if (!hf && strcmp(format, "llmc"))
        return args_error(
            "export", "--format '%s': use llmc (llm.c's model file) or hf (a transformers folder)", format);
    gpt *m = NULL;
    if ((rc = ckpt_load_model(model, &(ckpt_load_opts){.device = LSSAR_DEVICE_CPU}, &m, NULL)) ||
        (rc = hf ? hf_save(m, out) : llmc_save(m, out))) {
        fprintf(stderr, "lssar export: %s\n", lssar_errmsg());
        gpt_free(m);
        return rc == LSSAR_E_UNSUPPORTED ? 2 : 1;
    }
    const gpt_config *c = gpt_get_config(m);
    printf("wrote %s: %s (L %d, NH %d, C %d, V %d, maxT %d)\n", out,
           hf ? "transformers folder" : "llm.c model", c->layers, c->heads, c->dim, c->vocab, c->max_seq);
    gpt_free(m);
    return 0;
}
