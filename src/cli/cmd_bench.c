// cmd_bench.c - `lssar bench`: training-step time against same-run sgemm, and attention kernels.
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "args.h"
#include "lssar.h"
#include "exp/bench.h"
#include "model/gpt.h"

static const char *ABOUT =
    "Time a full training step (forward, backward, gradient clipping, AdamW) at the GPT-2-small\n"
    "shape (12 layers, width 768, 12 heads) and a small one (4 layers, width 256, 4 heads), both with\n"
    "vocabulary 50304, B = 4, T = 256, on random tokens (or one shape of your own: --layers, --dim,\n"
    "--heads, --vocab, --batch, --seq; unset ones keep GPT-2 small's, B = 4, T = 256), for each kind\n"
    "in --attn; report ms/step, tokens/s and GFLOP/s with FLOPs/step = (6 N + 12 L C T) B T\n"
    "(N = parameter count), MFU = that rate / the device's peak, and peak memory. On the CPU, next\n"
    "to OpenBLAS sgemm GFLOP/s measured in the same run on the step's own matrix shapes (the forward\n"
    "GEMMs of one block and the output layer, weighted by how often a step runs them), and their\n"
    "ratio. Then (CPU only) attention forward + backward (lssar_attn_forward/backward, B = 1,\n"
    "H = 12, D = 64) for softmax and lssar at T = 256, 1024, 4096 (on a GPU: bench/gpu_attn).\n"
    "Each time is the median of --repeats runs after --warmup untimed ones; a step ends with a\n"
    "read-back from the device, so a GPU step's time includes all its work.\n"
    "--device cuda: the model in a bf16 context (docs/CUDA.md); MFU against the GPU's dense bf16\n"
    "peak, from its name (H100 / H200 SXM 989.4 TFLOP/s, H100 PCIe 756, A100 312) or\n"
    "--peak-tflops; peak memory = the most bytes the model's backend context held (parameters,\n"
    "optimiser state, activations, scratch) and the most device memory in use (cudaMemGetInfo).\n"
    "--device cpu: MFU only with --peak-tflops; peak memory = the process's peak RSS (getrusage:\n"
    "the most so far, so later rows include earlier ones).\n"
    "--quick: tiny shapes (for tests). Times on a shared machine are noisy: compare ratios.\n"
    "--recompute: the steps recompute the blocks' activations in the backward (lssar train\n"
    "--recompute); GFLOP/s still counts the model's FLOPs, so it shows what recomputation costs.\n"
    "JSON (--json): {\"device\", \"threads\", \"quick\", \"train_attn\", \"train\": [{\"attn\", \"pos\",\n"
    "\"layers\", \"dim\", \"heads\", \"vocab\", \"batch\", \"seq\", \"params\", \"recompute\",\n"
    "\"activation_mib\", \"gflop_per_step\",\n"
    "\"ms_per_step\", \"gflops\", \"tokens_per_s\", \"peak_tflops\", \"mfu\" (null: peak unknown),\n"
    "\"sgemm_gflops\", \"sgemm_ratio\" (null on a GPU), \"peak_rss_bytes\" (CPU), \"device_name\",\n"
    "\"device_held_peak_bytes\", \"device_used_peak_bytes\", \"device_total_bytes\" (GPU)}, ...],\n"
    "\"attention\": [{\"kind\", \"T\", \"heads\", \"head_dim\", \"fwd_bwd_ms\", \"ratio_vs_softmax\"}, "
    "...]}.";

// --attn LIST -> o->kinds: 0, or 2 after the error.
static int parse_kinds(const char *attn, bench_opts *o) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", attn);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (o->nkinds == BENCH_MAX_KINDS) return args_error("bench", "--attn: at most 8 kinds");
        if (args_attn_kind("bench", tok, &o->kinds[o->nkinds])) return 2;
        o->nkinds++;
    }
    if (!o->nkinds)
        return args_error("bench", "--attn is empty: give a kind, e.g. --attn lssar or --attn "
                                   "softmax,lssar");
    return 0;
}

// The numbers: 0, or 2 after the error.
static int check_numbers(const bench_opts *o) {
    if (o->repeats < 0 || o->repeats > 64)
        return args_error("bench", "--repeats must be 0 to 64 (0: the default)");
    if (o->warmup < 0) return args_error("bench", "--warmup must be >= 0");
    if (o->threads < 0) return args_error("bench", "--threads must be >= 0");
    if (o->layers < 0 || o->dim < 0 || o->heads < 0 || o->vocab < 0 || o->batch < 0 || o->seq < 0)
        return args_error("bench", "--layers, --dim, --heads, --vocab, --batch and --seq must be >= 0 (0: "
                                   "the default)");
    if (o->vocab > 65535)
        return args_error("bench", "--vocab %d: tokens are 16-bit, use at most 65535", o->vocab);
    if (!(o->peak_tflops >= 0) || !isfinite(o->peak_tflops))
        return args_error("bench", "--peak-tflops must be a number >= 0 (0: from the GPU's name)");
    return 0;
}

int cmd_bench(int argc, char **argv) {
    bench_opts o = {.attn_list = "lssar", .warmup = 1};
    const char *device_name = "cpu", *pos_name = "rope";
    arg_spec sp[] = {
        {"json", ARG_STR, &o.json, "write the results as JSON to this file", 0, 0},
        {"quick", ARG_BOOL, &o.quick, "tiny shapes (seconds; for tests)", 0, 0},
        {"device", ARG_STR, &device_name, ARGS_DEVICE_HELP, 0, 0},
        {"attn", ARG_STR, &o.attn_list,
         "attention kinds of the timed training steps, a list (e.g. softmax,lssar): one row per kind and "
         "shape",
         0, 0},
        {"layers", ARG_INT, &o.layers,
         "time one shape of your own: layers (0: the default shapes; an unset shape flag takes GPT-2 "
         "small's)",
         0, 0},
        {"dim", ARG_INT, &o.dim, "its width (0: 768 with a shape of your own)", 0, 0},
        {"heads", ARG_INT, &o.heads, "its heads (0: 12 with a shape of your own)", 0, 0},
        {"vocab", ARG_INT, &o.vocab, "its vocabulary, <= 65535 (0: 50304)", 0, 0},
        {"batch", ARG_INT, &o.batch, "sequences per step, B (0: 4, or 2 with --quick)", 0, 0},
        {"seq", ARG_INT, &o.seq, "sequence length, T (0: 256, or the tiny shapes' with --quick)", 0, 0},
        {"pos", ARG_STR, &pos_name, "positions: rope, learned (GPT-2's) or none", 0, 0},
        {"peak-tflops", ARG_FLOAT, &o.peak_tflops,
         "the device's peak TFLOP/s for MFU (0: a known GPU's dense bf16 peak from its name; none on the "
         "CPU)",
         0, 0},
        {"warmup", ARG_INT, &o.warmup, "untimed runs before each measurement", 0, 0},
        {"repeats", ARG_INT, &o.repeats,
         "timed runs per measurement, at most 64 (0: 3, or 2 for a 12-layer step)", 0, 0},
        {"threads", ARG_INT, &o.threads, "CPU threads (0: all cores)", 0, 0},
        {"no-train", ARG_BOOL, &o.no_train, "skip the training steps", 0, 0},
        {"no-attn", ARG_BOOL, &o.no_attn, "skip the attention kernels", 0, 0},
        {"recompute", ARG_BOOL, &o.recompute, "training steps with activation recomputation (see above)", 0,
         0},
        {0}};
    int rc = args_parse("bench", ABOUT, sp, argc, argv);
    if (rc >= 0) return rc;
    if (parse_kinds(o.attn_list, &o)) return 2;
    int pos = gpt_pos_parse(pos_name);
    if (pos < 0) return args_error("bench", "--pos '%s' is unknown: use rope, learned or none", pos_name);
    o.pos = (lssar_pos)pos;
    if (check_numbers(&o) || args_device("bench", device_name, &o.device)) return 2;
    if (bench_run(&o)) {
        fprintf(stderr, "lssar bench: %s\n", lssar_errmsg());
        return 1;
    }
    return 0;
}
