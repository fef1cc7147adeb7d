// main.c - the lssar program: dispatch to one command per file (src/cli/cmd_*.c).
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include "lssar.h"

#include "cli/commands.h"

typedef struct { const char *name; int (*fn)(int, char **); const char *about; } command;
#define ENTRY(name, about) {#name, cmd_##name, about},
static const command commands[] = {COMMANDS(ENTRY)};
#define NCOMMANDS (int)(sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
    fprintf(f, "lssar %s - transformers with Softplus Attention with Re-weighting\n\n"
               "usage: lssar COMMAND [flags]     (lssar COMMAND --help for its flags)\n\ncommands:\n",
            LSSAR_VERSION);
    for (int i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].about);
}

int main(int argc, char **argv) {
    // Past a file size limit (ulimit -f) a write fails with EFBIG, which every writer reports with
    // the file's name, instead of SIGXFSZ killing the program mid-checkpoint.
    signal(SIGXFSZ, SIG_IGN);
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("lssar %s\n", LSSAR_VERSION);
#ifdef LSSAR_CUDA
        int gpus = lssar_cuda_device_count();
        printf("cuda: built in (sm_80, sm_90a, compute_90 PTX); %d GPU%s found%s\n", gpus, gpus == 1 ? "" : "s",
               gpus ? "" : ": runs on the CPU");
#else
        printf("cuda: not built in (built with CUDA=0, or no nvcc at build time)\n");
#endif
        return 0;
    }
    for (int i = 0; i < NCOMMANDS; i++) {
        if (strcmp(argv[1], commands[i].name)) continue;
        return commands[i].fn(argc - 1, argv + 1);
    }
    fprintf(stderr, "lssar: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
