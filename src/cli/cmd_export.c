// cmd_export.c - `lssar export`: a run's model in another program's format (llm.c's).
#include <stdio.h>
#include <string.h>
#include "args.h"
#include "lssar.h"
#include "model/checkpoint.h"
#include "model/llmc.h"

static const char *ABOUT =
    "Write a model in another program's file format.\n"
    "--format llmc: llm.c's GPT-2 model file (the layout of its gpt2_124M.bin: float32, the\n"
    "vocabulary padded to a multiple of 128), for models of GPT-2's shape: softmax attention,\n"
    "learned positions, tied head, one token channel (train with --pos learned --attn softmax).\n"
    "llm.c's train_gpt2 then loads it in place of gpt2_124M.bin. `lssar import` reads it back.\n"
    "--model is a run directory (its model.safetensors) or a .safetensors file.";

int cmd_export(int argc, char **argv) {
    const char *model = NULL, *out = NULL, *format = NULL;
    arg_spec sp[] = {
        {"model", ARG_STR, &model, "run directory or model .safetensors file", 1, 0},
        {"format", ARG_STR, &format, "llmc (llm.c's GPT-2 model file)", 1, 0},
        {"out", ARG_STR, &out, "the file to write", 1, 0},
        {0}};
    int rc = args_parse("export", ABOUT, sp, argc, argv);
    if (rc >= 0) return rc;
    if (strcmp(format, "llmc")) return args_error("export", "--format '%s': the format written is llmc (llm.c's model file)", format);
    gpt *m = NULL;
    if ((rc = ckpt_load_model(model, &(ckpt_load_opts){.device = LSSAR_DEVICE_CPU}, &m, NULL)) || (rc = llmc_save(m, out))) {
        fprintf(stderr, "lssar export: %s\n", lssar_errmsg());
        gpt_free(m);
        return rc == LSSAR_E_UNSUPPORTED ? 2 : 1;
    }
    const gpt_config *c = gpt_get_config(m);
    printf("wrote %s: llm.c model (L %d, NH %d, C %d, V %d, maxT %d)\n", out, c->layers, c->heads, c->dim, c->vocab, c->max_seq);
    gpt_free(m);
    return 0;
}
