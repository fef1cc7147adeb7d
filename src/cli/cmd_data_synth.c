// cmd_data_synth.c - `lssar data synth`: the built-in synthetic task (src/data/synth.h) as a shard.
#include <stdio.h>
#include <string.h>
#include "args.h"
#include "lssar.h"
#include "data/synth.h"

int cmd_data_synth(int argc, char **argv) {
    const char *out = NULL, *task = "repeat";
    int tokens = 1000000;
    uint64_t seed = 1;
    synth_params sp = {32, 4, 24};
    arg_spec specs[] = {
        {"out", ARG_STR, &out, "output shard (.bin)", 1, 0},
        {"task", ARG_STR, &task, "synthetic task (repeat: random strings written twice)", 0, 0},
        {"tokens", ARG_INT, &tokens, "tokens to write", 0, 0},
        {"alphabet", ARG_INT, &sp.alphabet,
         "symbols; end-of-text is id ALPHABET, so the vocabulary is ALPHABET+1", 0, 0},
        {"min-len", ARG_INT, &sp.min_len, "shortest string", 0, 0},
        {"max-len", ARG_INT, &sp.max_len, "longest string", 0, 0},
        {"seed", ARG_U64, &seed, "random seed", 0, 0},
        {0}};
    int rc = args_parse("data synth",
                        "Write a synthetic token shard: documents are a random string written twice, then\n"
                        "end-of-text, so the second copy is predictable only by attending back to the first.",
                        specs, argc, argv);
    if (rc >= 0) return rc;
    if (strcmp(task, "repeat"))
        return args_error("data synth", "--task: unknown task '%s' (the one task is repeat)", task);
    if (tokens <= 0) return args_error("data synth", "--tokens must be > 0, got %d", tokens);
    if (sp.alphabet < 2 || sp.alphabet > 65534)
        return args_error("data synth", "--alphabet must be 2..65534, got %d", sp.alphabet);
    if (sp.min_len < 1 || sp.max_len < sp.min_len)
        return args_error("data synth", "need 1 <= --min-len <= --max-len (got %d, %d)", sp.min_len,
                          sp.max_len);
    if ((rc = synth_write_repeat(out, &sp, (size_t)tokens, seed))) {
        fprintf(stderr, "lssar data synth: %s\n", lssar_errmsg());
        return 1;
    }
    printf("wrote %s: %d tokens, vocabulary %d\n", out, tokens, sp.alphabet + 1);
    return 0;
}
