// cmd_eval.c - `lssar eval`: mean next-token loss of a trained model at several context lengths.
#include <stdio.h>
#include "args.h"
#include "lssar.h"
#include "train/eval.h"

static const char *ABOUT =
    "Mean next-token loss (nats per token, averaged over positions and channels) of a trained model\n"
    "at each context length in --seq. The windows are deterministic: the consecutive, non-overlapping\n"
    "windows of --seq + 1 tokens from the start of --data (window k starts at position k x seq), the\n"
    "first --batches x --batch of them (fewer if the shard is shorter), so runs and models compare.\n"
    "Lengths beyond the training length work with rope or none positions (length extrapolation);\n"
    "learned positions stop at the training length.\n"
    "\n"
    "--attn/--p evaluate the weights with another attention kind: allowed between lssa and lssar,\n"
    "which share every parameter (e.g. an lssa-trained model with lssar re-weighting, p = 15).\n"
    "--model is a run directory (its model.safetensors) or a .safetensors file.\n"
    "Under mpirun -np N the batches of each length are split over the ranks and the losses gathered:\n"
    "the numbers are bit for bit those of one process (docs/DISTRIBUTED.md); rank 0 prints and writes.\n"
    "JSON (--json): {\"model\": ..., \"attn\": ..., \"p\": ..., \"results\": [{\"seq\": T, \"loss\": x,\n"
    "\"tokens\": n, \"windows\": w, \"seconds\": s[, \"per_position\": [...]]}, ...]}; on a GPU also\n"
    "\"device_name\", \"device_held_peak_bytes\" (the most the model's backend context held: weights,\n"
    "activations, scratch) and \"device_used_peak_bytes\" (the most device memory in use, cudaMemGetInfo)\n"
    "over all the lengths.";

int cmd_eval(int argc, char **argv) {
    const char *model = NULL, *data = NULL, *seqs = NULL, *json = NULL, *attn = NULL;
    int batches = 8, batch = 4, threads = 0, per_pos = 0;
    float p = 0;
    const char *device_name = "cpu";
    arg_spec sp[] = {
        {"model", ARG_STR, &model, "run directory or model .safetensors file", 1, 0},
        {"data", ARG_STR, &data, "token shard to evaluate on (e.g. the val shard)", 1, 0},
        {"seq", ARG_STR, &seqs, "context lengths, comma-separated (e.g. 128,256,512)", 1, 0},
        {"batches", ARG_INT, &batches, "batches per length (0: every window of the shard)", 0, 0},
        {"batch", ARG_INT, &batch, "windows per batch", 0, 0},
        {"attn", ARG_STR, &attn, "evaluate with this attention kind instead (lssa <-> lssar only)", 0, 0},
        {"p", ARG_FLOAT, &p, "LSSAR power for --attn lssar (0: the model's)", 0, 0},
        {"json", ARG_STR, &json, "also write the results as JSON to this file", 0, 0},
        {"per-position", ARG_BOOL, &per_pos, "include the mean loss at every position in the JSON", 0, 0},
        {"threads", ARG_INT, &threads, "CPU threads (0: all cores)", 0, 0},
        {"device", ARG_STR, &device_name, ARGS_DEVICE_HELP, 0, 0},
        {0}};
    int rc = args_parse("eval", ABOUT, sp, argc, argv);
    if (rc >= 0) return rc;
    lssar_device device;
    if (args_device("eval", device_name, &device)) return 2;
    int T[64];
    int nT = args_int_list("eval", "seq", seqs, T, 64);
    if (nT < 0) return 2;
    if (batches < 0) return args_error("eval", "--batches must be >= 0 (0: all windows)");
    if (batch < 1) return args_error("eval", "--batch must be >= 1");
    if (threads < 0) return args_error("eval", "--threads must be >= 0");
    if (p < 0) return args_error("eval", "--p must be > 0");
    ckpt_load_opts lo = {.set_attn = attn != NULL, .p = p, .device = device};
    if (attn && args_attn_kind("eval", attn, &lo.attn)) return 2;
    if (threads > 0) lssar_set_threads(threads);

    eval_run_opts o = {.model = model, .data = data, .json = json, .seqs = T, .nseqs = nT,
                       .batches = batches, .batch = batch, .per_position = per_pos, .load = lo};
    int usage;
    if (eval_run(&o, &usage)) {
        fprintf(stderr, "lssar eval: %s\n", lssar_errmsg());
        return usage ? 2 : 1;
    }
    return 0;
}
