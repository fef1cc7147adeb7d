// main.c - the lssar program: dispatch to one command per file (src/cli/cmd_*.c).
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lssar.h"
#include "core/dist.h"
#include "core/util.h"

#include "cli/args.h"
#include "cli/commands.h"

typedef struct { const char *name; int (*fn)(int, char **); int ranks; const char *about; } command;
#define ENTRY(name, ranks, about) {#name, cmd_##name, ranks, about},
static const command commands[] = {COMMANDS(ENTRY)};
#define NCOMMANDS (int)(sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
    fprintf(f, "lssar %s - transformers with Softplus Attention with Re-weighting\n\n"
               "usage: lssar COMMAND [flags]     (lssar COMMAND --help for its flags)\n\ncommands:\n",
            LSSAR_VERSION);
    for (int i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].about);
}

int cli_run(int argc, char **argv) {
    for (int i = 0; i < NCOMMANDS; i++)
        if (!strcmp(argv[0], commands[i].name)) return commands[i].fn(argc, argv);
    fprintf(stderr, "lssar: unknown command '%s'\n", argv[0]);
    return 2;
}

// Under mpirun (src/core/dist.h): join the job, check that every rank runs the same command line,
// and let rank 0 alone speak: the other ranks' stdout and stderr go to /dev/null
// (LSSAR_RANK_STDERR=1 keeps them), since every error that matters reaches rank 0 through
// lssar_dist_agree. A command that does not share its work (commands.h) refuses. Returns 0 or an
// exit code.
static int start_ranks(int argc, char **argv, int shared) {
    if (lssar_dist_init(&argc, &argv)) {
        fprintf(stderr, "lssar: %s\n", lssar_errmsg());
        return 2;
    }
    if (lssar_dist_size() == 1) return 0;
    const char *keep = getenv("LSSAR_RANK_STDERR");
    if (lssar_dist_rank() > 0 && !(keep && !strcmp(keep, "1")) &&
        (!freopen("/dev/null", "w", stderr) || !freopen("/dev/null", "w", stdout)))
        return 1;
    size_t n = 1;
    for (int i = 1; i < argc; i++) n += strlen(argv[i]) + 1;
    char *line = calloc(n, 1);
    if (!line) return 1;
    for (int i = 1; i < argc; i++) { strcat(line, argv[i]); strcat(line, "\x1f"); }
    int rc = lssar_dist_check_same(line, "command line");
    free(line);
    if (rc) { fprintf(stderr, "lssar: %s\n", lssar_errmsg()); return 2; }
    return shared ? 0 : cli_alone_under_ranks(argv[1]);
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
        printf("cuda: built in (sm_80, sm_90a, compute_90 PTX); %d GPU%s found%s\n", gpus,
               gpus == 1 ? "" : "s", gpus ? "" : ": runs on the CPU");
#else
        printf("cuda: not built in (built with CUDA=0, or no nvcc at build time)\n");
#endif
        return 0;
    }
    for (int i = 0; i < NCOMMANDS; i++) {
        if (strcmp(argv[1], commands[i].name)) continue;
        int rc = start_ranks(argc, argv, commands[i].ranks);
        if (!rc) rc = commands[i].fn(argc - 1, argv + 1);
        // An error only this rank has (not met at lssar_dist_agree) may leave the others waiting in
        // a collective, and MPI_Finalize would then wait for them: end the whole job instead.
        if (rc && lssar_dist_size() > 1 && !lssar_dist_error_shared()) lssar_dist_abort(rc);
        lssar_dist_finalize();
        return rc;
    }
    fprintf(stderr, "lssar: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
