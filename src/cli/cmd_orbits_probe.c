// cmd_orbits_probe.c - `lssar orbits probe`: fine-tune an orbit model with a force regression head
// (src/orbits/head.c) on the force set's labelled rows, predict the test rows nearest to training
// states, and write OUT/forces.csv for `lssar orbits newton`: flags -> orb_probe_task ->
// orb_probe_run (src/orbits/tasks.h).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cJSON.h>
#include "args.h"
#include "core/util.h"
#include "lssar.h"
#include "orbits/tasks.h"

int cmd_orbits_probe(int argc, char **argv) {
    const char *model = NULL, *data = NULL, *split = "force", *out = NULL, *target = "log",
               *device_name = "cpu";
    uint64_t systems = 0, keep = 5000, seed = 0;
    int threads = 0, quiet = 0;
    orb_probe_opts po;
    orb_probe_defaults(&po);
    arg_spec specs[] = {
        {"model", ARG_STR, &model, "trained orbit model: run directory or .safetensors file", 1, 0},
        {"data", ARG_STR, &data,
         "directory holding the force set (simulate --two-body --state --split force)", 1, 0},
        {"split", ARG_STR, &split, "the force set's file prefix in --data", 0, 0},
        {"out", ARG_STR, &out, "output directory: OUT/forces.csv, OUT/probe.json", 1, 0},
        {"systems", ARG_U64, &systems,
         "use the first N force-set systems (0: all; 90% fully labelled, 10% with 2 rows)", 0, 0},
        {"keep", ARG_U64, &keep, "test rows kept: those nearest (1-NN, standardised state) to a labelled row",
         0, 0},
        {"steps", ARG_INT, &po.steps, "fine-tuning steps", 0, 0},
        {"batch", ARG_INT, &po.batch, "sequences per step", 0, 0},
        {"lr", ARG_FLOAT, &po.lr, "peak learning rate of the model (warmup 10%, cosine to 10%)", 0, 0},
        {"head-lr", ARG_FLOAT, &po.head_lr, "peak learning rate of the head", 0, 0},
        {"wd", ARG_FLOAT, &po.wd, "AdamW weight decay of the model's matrices", 0, 0},
        {"target", ARG_STR, &target, "regressed label: log (standardised log10 |F|) or raw (|F| / rms |F|)",
         0, 0},
        {"seed", ARG_U64, &seed, "seed of the labelled rows and the batches", 0, 0},
        {"threads", ARG_INT, &threads, "OpenMP threads (0: all)", 0, 0},
        {"quiet", ARG_BOOL, &quiet, "no progress lines", 0, 0},
        {"device", ARG_STR, &device_name, ARGS_DEVICE_HELP, 0, 0},
        {0}};
    int rc = args_parse(
        "orbits probe",
        "The force probe of Vafa et al. (2025): replace the model's output heads by a linear head\n"
        "(width -> 1), fine-tune the whole model with masked MSE on the force set's labelled planet rows\n"
        "(every planet row of systems 0..90%; 2 random planet rows of each other system), then predict the\n"
        "other planet rows and keep the --keep test rows nearest (1-NN in the standardised state [dx, dy,\n"
        "dvx, dvy, m1, m2]) to a labelled row: OUT/forces.csv (r,m1,m2,F_pred,F_true), the input of\n"
        "`lssar orbits newton`. Position t of a sequence reads row t (the model has seen that position).\n"
        "Label: by default standardised log10 |F| (|F| spans ~12 decades; predictions are mapped back by\n"
        "10^x); --target raw regresses |F| / rms|F|, the original's unnormalised target up to a scale.\n"
        "The whole sequence (999 positions) is read: learned-position models must be trained with --seq 999.",
        specs, argc, argv);
    if (rc >= 0) return rc;
    lssar_device device;
    if (args_device("orbits probe", device_name, &device)) return 2;
    if (!strcmp(target, "log")) po.target_log = 1;
    else if (!strcmp(target, "raw")) po.target_log = 0;
    else return args_error("orbits probe", "--target must be log or raw, got '%s'", target);
    if (po.steps < 0) return args_error("orbits probe", "--steps must be >= 0, got %d", po.steps);
    if (po.batch < 1) return args_error("orbits probe", "--batch must be >= 1, got %d", po.batch);
    if (!(po.lr >= 0) || !(po.head_lr >= 0))
        return args_error("orbits probe", "--lr and --head-lr must be >= 0");
    if (threads < 0) return args_error("orbits probe", "--threads must be >= 0, got %d", threads);
    orb_probe_task t;
    orb_probe_task_defaults(&t);
    t.model = model; t.data = data; t.split = split; t.out = out;
    t.systems = systems; t.keep = keep; t.threads = threads; t.device = device;
    po.seed = seed;
    po.progress = !quiet;
    t.probe = po;
    t.report = stderr;
    orb_probe_summary sum;
    if (orb_probe_run(&t, &sum))
        return args_fail_inputs("orbits probe", model, data);
    return 0;
}
