/*
 * bench.h - `lssar bench` as a library call: a full training step timed at a few model shapes
 * (forward, backward, clip, AdamW; FLOPs, MFU and peak memory beside it, and on the CPU OpenBLAS
 * sgemm on the step's own GEMM shapes), then (CPU) attention forward + backward at a few lengths.
 * Prints the tables on stdout and writes the JSON that `lssar bench --help` describes.
 */
#ifndef LSSAR_EXP_BENCH_H
#define LSSAR_EXP_BENCH_H

#include "lssar.h"

#define BENCH_MAX_KINDS 8

typedef struct {
    lssar_attn_kind kinds[BENCH_MAX_KINDS];   // attention kinds of the timed steps
    int nkinds;
    const char *attn_list;   // the kinds as given (JSON "train_attn")
    lssar_pos pos;
    lssar_device device;
    int quick;               // tiny shapes
    int layers, dim, heads, vocab;   // a shape of one's own when any is set (0: GPT-2 small's)
    int batch, seq;          // 0: the shapes' own
    float peak_tflops;       // 0: a known GPU's peak from its name
    int warmup, repeats;     // repeats 0: 3, or 2 for a 12-layer step (4096-long attention)
    int threads;             // 0: all cores
    int no_train, no_attn, recompute;
    const char *json;        // NULL: no JSON
} bench_opts;

/* Run the benchmark. 0, or an lssar_err with the message in lssar_errmsg (after the rows done). */
int bench_run(const bench_opts *o);

#endif
