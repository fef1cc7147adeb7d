// cmd_sample.c - `lssar sample`: generate token ids from a trained model with the KV cache.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include "args.h"
#include "lssar.h"
#include "exp/generate.h"

static const char *ABOUT =
    "Generate --tokens positions after a prompt, one position at a time with the model's KV cache.\n"
    "--prompt TEXT: the text is encoded with the model's tokenizer (--tokenizer; by default byte for\n"
    "a vocabulary of 257, gpt2 for 50257 or 50304; an empty prompt starts from end-of-text) and the\n"
    "continuation is printed as text. --prompt-ids: the prompt as token ids, and the generated ids\n"
    "(not the prompt) are printed on one line, separated by spaces.\n"
    "Each id is drawn from softmax(logits / --temperature); --temperature 0 takes the most likely id.\n"
    "Models with C > 1 token channels (orbits): --prompt-ids lists positions one after another with\n"
    "their C ids interleaved (p0c0,p0c1,p1c0,p1c1,...), and the output is interleaved the same way;\n"
    "each channel is sampled independently from its own head.\n"
    "--model is a run directory (its model.safetensors) or a .safetensors file.";

// "1,2,3" -> ids (0 allowed, unlike args_int_list); returns the count or -1 (error printed).
static int parse_ids(const char *s, int **out) {
    int n = 0, cap = 64;
    int *ids = malloc(cap * sizeof *ids);
    const char *p = s;
    while (ids && *p) {
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < 0 || x > 65534 || (*end && *end != ',')) {
            free(ids);
            args_error("sample", "--prompt-ids expects token ids (0..65534) separated by commas, got '%s'",
                       s);
            return -1;
        }
        if (n == cap) {
            cap *= 2;
            int *t = realloc(ids, cap * sizeof *ids);
            if (!t) {
                free(ids);
                ids = NULL;
                break;
            }
            ids = t;
        }
        ids[n++] = (int)x;
        p = *end ? end + 1 : end;
    }
    if (!ids) { args_error("sample", "out of memory"); return -1; }
    *out = ids;
    return n;
}

int cmd_sample(int argc, char **argv) {
    const char *model = NULL, *prompt = NULL, *text = NULL, *tok_name = NULL;
    int tokens = 32, threads = 0;
    float temp = 1.0f;
    uint64_t seed = 1337;
    const char *device_name = "cpu";
    arg_spec sp[] = {
        {"model", ARG_STR, &model, "run directory or model .safetensors file", 1, 0},
        {"prompt", ARG_STR, &text, "prompt text (printed back: the continuation as text)", 0, 0},
        {"prompt-ids", ARG_STR, &prompt, "prompt token ids, comma-separated (channels interleaved)", 0, 0},
        {"tokenizer", ARG_STR, &tok_name, "--prompt's tokenizer: gpt2 or byte (default: from the vocabulary)",
         0, 0},
        {"tokens", ARG_INT, &tokens, "positions to generate", 0, 0},
        {"temperature", ARG_FLOAT, &temp, "sampling temperature (0: greedy)", 0, 0},
        {"seed", ARG_U64, &seed, "sampling seed", 0, 0},
        {"threads", ARG_INT, &threads, "CPU threads (0: all cores)", 0, 0},
        {"device", ARG_STR, &device_name, ARGS_DEVICE_HELP, 0, 0},
        {0}};
    int rc = args_parse("sample", ABOUT, sp, argc, argv);
    if (rc >= 0) return rc;
    lssar_device device;
    if (args_device("sample", device_name, &device)) return 2;
    if (tokens < 0) return args_error("sample", "--tokens must be >= 0");
    if (temp < 0) return args_error("sample", "--temperature must be >= 0 (0: greedy)");
    if (threads < 0) return args_error("sample", "--threads must be >= 0");
    if (!prompt == !text)
        return args_error("sample", "give the prompt as --prompt TEXT or as --prompt-ids IDS (one of the "
                                    "two)");
    if (tok_name && !text) return args_error("sample", "--tokenizer goes with --prompt (text)");
    int *ids = NULL;
    int nids = 0;
    if (prompt) {
        nids = parse_ids(prompt, &ids);
        if (nids < 0) return 2;
        if (nids == 0) {
            free(ids);
            return args_error("sample", "--prompt-ids is empty: give at least one position");
        }
    }
    if (threads > 0) lssar_set_threads(threads);
    generate_opts o = {.model = model, .load = {.device = device}, .ids = ids, .nids = nids, .text = text,
                       .tokenizer = tok_name, .tokens = tokens, .temperature = temp, .seed = seed};
    int usage;
    rc = generate_run(&o, &usage);
    if (rc) fprintf(stderr, "lssar sample: %s\n", lssar_errmsg());
    free(ids);
    return rc ? (usage ? 2 : 1) : 0;
}
