// cmd_sample.c - `lssar sample`: generate token ids from a trained model with the KV cache.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "args.h"
#include "lssar.h"
#include "model/gpt.h"
#include "model/checkpoint.h"

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

// One id from logits (V): argmax at temperature 0, else a draw from softmax(logits / temp).
static int pick(const float *logits, int V, float temp, lssar_rng *rng) {
    int best = 0;
    for (int i = 1; i < V; i++) if (logits[i] > logits[best]) best = i;
    if (temp <= 0) return best;
    double z = 0, mx = logits[best];
    for (int i = 0; i < V; i++) z += exp((logits[i] - mx) / temp);
    double u = lssar_rng_uniform(rng) * z, acc = 0;
    for (int i = 0; i < V; i++) {
        acc += exp((logits[i] - mx) / temp);
        if (u < acc) return i;
    }
    return best;   // rounding at the very end of the range
}

// --prompt: the tokenizer named, or the one the vocabulary V implies; NULL (error set) if none.
static lssar_tokenizer *text_tokenizer(const char *name, int V) {
    if (!name) name = V == 257 ? "byte" : V == 50257 || V == 50304 ? "gpt2" : NULL;
    if (!name) {
        lssar_fail(LSSAR_E_ARG,
                   "the model's vocabulary (%d) is neither byte's (257) nor GPT-2's (50257, 50304): give "
                   "--tokenizer, or the prompt as --prompt-ids",
                   V);
        return NULL;
    }
    lssar_tokenizer *t = NULL;
    if (lssar_tokenizer_open(name, &t)) return NULL;
    if (lssar_tokenizer_vocab_size(t) > V) {
        lssar_fail(LSSAR_E_ARG, "tokenizer %s has %d ids but the model only %d", name,
                   lssar_tokenizer_vocab_size(t), V);
        lssar_tokenizer_free(t);
        return NULL;
    }
    return t;
}

// Print one generated token: its id (ids mode), or its text (t given).
static void emit(const lssar_tokenizer *t, int id, int first) {
    if (!t) { printf("%s%d", first ? "" : " ", id); return; }
    int32_t one = id;
    char *txt = NULL;
    size_t len = 0;
    if (!lssar_decode(t, &one, 1, &txt, &len)) fwrite(txt, 1, len, stdout);
    lssar_free(txt);
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

    gpt *m = NULL;
    if ((rc = ckpt_load_model(model, &(ckpt_load_opts){.device = device}, &m, NULL))) {
        fprintf(stderr, "lssar sample: %s\n", lssar_errmsg());
        free(ids);
        return 1;
    }
    const gpt_config *c = gpt_get_config(m);
    const int C = c->channels, V = c->vocab;
    rc = 0;
    lssar_tokenizer *tk = NULL;
    if (text) {   // encode the prompt: the ids of the text, or end-of-text alone for an empty one
        int32_t *enc = NULL;
        size_t ne = 0;
        if (C != 1)
            rc = args_error("sample",
                            "--prompt is text, but this model has %d token channels: give --prompt-ids", C);
        else if (!(tk = text_tokenizer(tok_name, V)) || lssar_encode(tk, text, strlen(text), 0, &enc, &ne)) {
            fprintf(stderr, "lssar sample: %s\n", lssar_errmsg());
            rc = 2;
        } else if (!(ids = malloc(sizeof *ids * (ne ? ne : 1)))) rc = args_error("sample", "out of memory");
        else {
            for (size_t i = 0; i < ne; i++) ids[i] = enc[i];
            if (!ne) ids[0] = lssar_tokenizer_eot(tk);
            nids = ne ? (int)ne : 1;
        }
        lssar_free(enc);
    }
    if (nids % C)
        rc = args_error("sample",
                        "--prompt-ids has %d ids but the model has %d channels: give whole positions (a "
                        "multiple of %d ids, interleaved)",
                        nids, C, C);
    for (int i = 0; !rc && i < nids; i++)
        if (ids[i] >= V)
            rc = args_error("sample", "--prompt-ids: id %d is outside the model's vocabulary (0..%d)", ids[i],
                            V - 1);
    const int P = nids / C, total = P + tokens;
    if (!rc && c->pos == LSSAR_POS_LEARNED && total > c->max_seq)
        rc = args_error("sample",
                        "prompt (%d positions) + --tokens %d exceeds the %d positions this model learned: "
                        "use fewer --tokens",
                        P, tokens, c->max_seq);
    if (rc) { gpt_free(m); free(ids); lssar_tokenizer_free(tk); return rc; }

    uint16_t *tok = malloc(sizeof(uint16_t) * (P > 1 ? P : 1) * C);   // (P, C) the prompt, then (C)
    float *logits = malloc(sizeof(float) * C * V);   // (C, V)
    gpt_kvcache *kv = NULL;
    lssar_rng rng;
    lssar_rng_seed(&rng, seed);
    if (!tok || !logits) rc = lssar_fail(LSSAR_E_NOMEM, "out of memory");
    if (!rc) rc = gpt_kvcache_create(m, 1, total, &kv);
    if (!rc) {   // the whole prompt in one call
        for (int i = 0; i < P * C; i++) tok[i] = (uint16_t)ids[i];
        rc = gpt_decode(m, kv, tok, P, logits);
    }
    for (int n = 0; !rc && n < tokens; n++) {
        for (int ch = 0; ch < C; ch++) {
            tok[ch] = (uint16_t)pick(logits + (size_t)ch * V, V, temp, &rng);
            emit(tk, tok[ch], !n && !ch);
        }
        fflush(stdout);
        if (n + 1 < tokens) rc = gpt_decode(m, kv, tok, 1, logits);
    }
    gpt_kvcache_free(kv);
    printf("\n");
    if (rc) fprintf(stderr, "lssar sample: %s\n", lssar_errmsg());
    free(tok); free(logits); free(ids);
    lssar_tokenizer_free(tk);
    gpt_free(m);
    return rc ? 1 : 0;
}
