/*
 * args.h - one flag parser for every lssar command, so --help and errors look the same everywhere.
 *
 *   int steps = 100; const char *out = NULL; int resume = 0;
 *   arg_spec specs[] = {
 *       {"steps", ARG_INT, &steps, "optimizer steps", 0},
 *       {"out", ARG_STR, &out, "output directory", 1},      // 1 = required
 *       {"resume", ARG_BOOL, &resume, "continue the run in --out", 0},
 *       {0}};
 *   int rc = args_parse("train", "Train a GPT model.", specs, argc, argv);
 *   if (rc >= 0) return rc;   // 0 after --help, 2 after an error (already printed)
 *
 * Flags are --name VALUE or --name=VALUE; ARG_BOOL takes no value. The defaults shown by --help are
 * the values the variables hold before parsing. argv[0] is the command name and is skipped.
 */
#ifndef LSSAR_ARGS_H
#define LSSAR_ARGS_H

#include <stdint.h>
#include "lssar.h"
#include "core/argv.h"
#include "model/gpt.h"

typedef enum { ARG_END = 0, ARG_INT, ARG_FLOAT, ARG_STR, ARG_BOOL, ARG_U64 } arg_type;
typedef struct {
    const char *name;   // without the leading "--"
    arg_type type;
    void *dst;          // int*, float*, const char**, int* (bool), uint64_t*
    const char *help;
    int required;
    int seen;           // set by the parser
} arg_spec;

/* Returns -1 when the command should run, 0 if --help was printed, 2 on an error (printed with
   the flag's name and the fix). `about` is the command's description for --help. */
int args_parse(const char *cmd, const char *about, arg_spec *specs, int argc, char **argv);
/* Print an error in the common form "lssar CMD: MESSAGE" and return 2 (for exit codes). */
int args_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Split "a,b,c" of integers into out[] (at most max); returns the count or -1 (error printed). */
int args_int_list(const char *cmd, const char *flag, const char *s, int *out, int max);
/* Print the last failure for a command that read --model and --data, naming both when the message
   names neither (a NaN loss from damaged weights, say), and return 1 (the exit status). */
int args_fail_inputs(const char *cmd, const char *model, const char *data);
/* --device NAME -> *out: 0, or 2 after printing the error. Every command that builds or loads a
   model takes --device (ARGS_DEVICE_HELP); a build without CUDA refuses cuda when the model is made. */
#define ARGS_DEVICE_HELP                                                                                    \
    "where the model runs: cpu, cuda (a GPU; a build with the CUDA backend), or auto (the GPU if there is " \
    "one)"
#ifdef LSSAR_CUDA
#define LSSAR_HAVE_CUDA 1
#else
#define LSSAR_HAVE_CUDA 0
#endif
int args_device(const char *cmd, const char *name, lssar_device *out);
/* An attention kind ("softmax", "lssar", or a preset with stages: "softmax+cos+rw", see
   lssar_attn_parse) -> *out; 0, or 2 after printing what is wrong as args_error. The one place
   the CLI parses --attn. */
int args_attn_kind(const char *cmd, const char *name, lssar_attn_kind *out);
/* --rope-base and --temp-d: 0 (printed as args_error, exit 2) when rope_base > 1 and temp_d is 0
   or >= 2 (gpt_config_check's rules, said in the flags' words). */
int args_rope_temp(const char *cmd, float rope_base, int temp_d);
/* The model flags that train and extrapolate share, declared once: ARGS_MODEL_SPECS(m, f, brief)
   expands to their arg_spec rows (--pos --rope-base --temp-d --layers --heads --dim --vocab
   --untied, in this order) writing into the gpt_config *m and the args_model_flags *f; brief picks
   extrapolate's shorter help texts. After parsing, args_model_check sets m->device, m->pos and
   m->tied from f and checks --device, --pos, --rope-base and --temp-d: 0, or 2 after the error. */
typedef struct {
    const char *device, *pos;   // --device and --pos as given
    int untied;                 // --untied
} args_model_flags;
#define ARGS_MODEL_SPECS(m, f, brief)                                                                  \
    {"pos", ARG_STR, &(f)->pos, "positions: rope, learned or none", 0, 0},                             \
    {"rope-base", ARG_FLOAT, &(m)->rope_base,                                                          \
     "RoPE base theta (pair i turns at theta^(-2i/D); GPT-NeoX's 10000)", 0, 0},                       \
    {"temp-d", ARG_INT, &(m)->temp_d,                                                                  \
     "lssa/lssar: the D of the ln(D) ln(n) temperature (0: the head size, as the paper)", 0, 0},       \
    {"layers", ARG_INT, &(m)->layers, "transformer blocks", 0, 0},                                     \
    {"heads", ARG_INT, &(m)->heads, (brief) ? "attention heads" : "attention heads (must divide --dim)", \
     0, 0},                                                                                            \
    {"dim", ARG_INT, &(m)->dim, "model width", 0, 0},                                                  \
    {"vocab", ARG_INT, &(m)->vocab,                                                                    \
     (brief) ? "token ids (0: from the data; byte data wants 257)"                                     \
             : "token ids per channel (0: what the shards record, else 50257: see above)",             \
     0, 0},                                                                                            \
    {"untied", ARG_BOOL, &(f)->untied,                                                                 \
     (brief) ? "separate output head" : "separate output head instead of the token embedding", 0, 0}
int args_model_check(const char *cmd, const args_model_flags *f, gpt_config *m);

/* A command that runs in one process, started by mpirun with more than one rank: print which
   commands share their work over ranks, and return 2. */
int cli_alone_under_ranks(const char *cmd);

#endif
