// main.c - the lssar program: dispatch to one command per file (src/cli/cmd_*.c).
#include <stdio.h>
#include <string.h>
#include "lssar.h"

// Each command lives in its own file. Weak references let the program build while a command's
// file is absent (the command then says so) during development.
#define COMMANDS(X)                                                                         \
    X(train, "train a GPT model (softmax, ssmax, lssa or lssar attention)")                \
    X(eval, "mean next-token loss of a model at several context lengths")                  \
    X(sample, "generate tokens from a model")                                              \
    X(bench, "time training steps, sgemm and attention kernels")                           \
    X(tokenize, "GPT-2 or byte tokenizer: text <-> ids, or write a token shard")           \
    X(data, "build token shards from the bundled corpora")                                 \
    X(symreg, "symbolic regression on a CSV file")                                         \
    X(orbits, "planetary-trajectory data, orbit world model and the Newton probe")         \
    X(extrapolate, "train one model per attention kind and compare loss vs length")        \
    X(attnstats, "attention entropy, sink weight and top-1 weight per layer and length")   \
    X(passkey, "passkey retrieval at several lengths and depths")

#define DECLARE(name, about) extern int cmd_##name(int argc, char **argv) __attribute__((weak));
COMMANDS(DECLARE)

typedef struct { const char *name; int (*fn)(int, char **); const char *about; } command;
#define ENTRY(name, about) {#name, cmd_##name, about},
static const command commands[] = {COMMANDS(ENTRY)};
#define NCOMMANDS (int)(sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
    fprintf(f, "lssar %s - transformers with Softplus Attention with Re-weighting\n\n"
               "usage: lssar COMMAND [flags]     (lssar COMMAND --help for its flags)\n\ncommands:\n",
            LSSAR_VERSION);
    for (int i = 0; i < NCOMMANDS; i++)
        if (commands[i].fn) fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].about);
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) { printf("lssar %s\n", LSSAR_VERSION); return 0; }
    for (int i = 0; i < NCOMMANDS; i++) {
        if (strcmp(argv[1], commands[i].name)) continue;
        if (!commands[i].fn) {
            fprintf(stderr, "lssar: command '%s' is not built into this binary yet\n", argv[1]);
            return 2;
        }
        return commands[i].fn(argc - 1, argv + 1);
    }
    fprintf(stderr, "lssar: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
