// cmd_orbits_run.c - `lssar orbits run`: the whole orbits pipeline in one command, one model per
// attention kind side by side: flags -> orbits_run_opts -> orbits_run (src/exp/orbits_run.h), which
// prints each stage as the lssar command it is, writes it to OUT/commands.sh and runs it in this
// process (cli_run), then writes OUT/RESULTS.md and OUT/forces.png from the stages' JSON files.
#include <stdio.h>
#include <string.h>
#include "args.h"
#include "cli/commands.h"
#include "exp/orbits_run.h"
#include "lssar.h"

int cmd_orbits_run(int argc, char **argv) {
    const char *scale_name = "tiny", *attn = "softmax,lssar", *out = NULL, *pos = "rope",
               *device_name = "cpu";
    int threads = 0, dry = 0, skip_sim = 0, steps = 0, seeds = 1, heads = 0, dim = 0;
    arg_spec specs[] = {
        {"scale", ARG_STR, &scale_name,
         "smoke, tiny, laptop, small or paper (paper runs only with --device cuda)", 0, 0},
        {"attn", ARG_STR, &attn, "comma list of attention kinds, one model each", 0, 0},
        {"pos", ARG_STR, &pos, "positions of the models: rope, learned or none", 0, 0},
        {"out", ARG_STR, &out, "output directory [default runs/orbits-SCALE]", 0, 0},
        {"threads", ARG_INT, &threads, "CPU threads for every stage (0: all)", 0, 0},
        {"dry-run", ARG_BOOL, &dry, "print the commands without running them", 0, 0},
        {"skip-simulate", ARG_BOOL, &skip_sim, "reuse OUT/data from an earlier run", 0, 0},
        {"steps", ARG_INT, &steps, "training steps of each model (0: the scale's)", 0, 0},
        {"heads", ARG_INT, &heads,
         "attention heads of each model (0: the scale's); the head size is --dim / --heads", 0, 0},
        {"dim", ARG_INT, &dim, "width of each model (0: the scale's)", 0, 0},
        {"seeds", ARG_INT, &seeds,
         "train every kind this many times (seeds 1337, 1338, ...; models KIND, KIND-s1, ...); RESULTS.md "
         "pools them",
         0, 0},
        {"device", ARG_STR, &device_name, ARGS_DEVICE_HELP "; training, eval and probe run there", 0, 0},
        {0}};
    int rc = args_parse("orbits run",
                        "The orbits experiment end to end, one model per --attn kind side by side:\n"
                        "  simulate (train, val, two-body force set) -> lssar train -> orbits eval -> orbits "
                        "probe ->\n"
                        "  orbits newton, plus the k-NN oracle control (orbits oracle -> newton).\n"
                        "Scales: smoke (seconds; 10 steps of a 1-layer model: checks the stages, says "
                        "nothing), tiny (2 CPU\n"
                        "cores, < 20 min), laptop (one CPU core per model, ~40 min; two-body systems, tied "
                        "heads with\n"
                        "ordered bins, no weight decay, AdamW eps " ORBITS_ORDERED_EPS_TEXT
                        ": docs/ORBITS_RESULTS.md says why), small (one GPU in ~10 min with\n"
                        "--device cuda; hours on the CPU), paper (the published 109M models, 2 channels, T = "
                        "999, on 10M\n"
                        "systems: runs with --device cuda, one GPU takes days; on the CPU it is printed, not "
                        "run). `lssar recipe orbits-109m` is the paper scale.\n"
                        "Writes OUT/commands.sh, OUT/RESULTS.md, OUT/forces.png.",
                        specs, argc, argv);
    if (rc >= 0) return rc;
    const orbits_scale *sc = orbits_scale_find(scale_name);
    if (!sc)
        return args_error("orbits run", "--scale must be smoke, tiny, laptop, small or paper, got '%s'",
                          scale_name);
    if (threads < 0) return args_error("orbits run", "--threads must be >= 0, got %d", threads);
    if (steps < 0) return args_error("orbits run", "--steps must be >= 0 (0: the scale's), got %d", steps);
    if (seeds < 1 || seeds > ORBITS_MAX_MODELS)
        return args_error("orbits run", "--seeds must be in 1..%d, got %d", ORBITS_MAX_MODELS, seeds);
    lssar_device device;
    if (args_device("orbits run", device_name, &device)) return 2;
    if (heads < 0 || dim < 0)
        return args_error("orbits run", "--heads and --dim must be >= 0 (0: the scale's), got %d and %d",
                          heads, dim);
    const int n_heads = heads ? heads : sc->heads, width = dim ? dim : sc->dim;
    if (width % n_heads || (width / n_heads) % 2)
        return args_error("orbits run",
                          "the width %d must be a multiple of the heads %d with an even head size (RoPE)",
                          width, n_heads);
    orbits_run_opts o = {0};
    o.scale = *sc;              // the scale as run: RESULTS.md reports these sizes
    o.scale.heads = n_heads; o.scale.dim = width;
    o.attn = attn; o.pos = pos; o.dev = lssar_device_name(device);
    o.seeds = seeds; o.steps = steps; o.threads = threads; o.skip_simulate = skip_sim;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", attn);
    for (char *s = strtok(buf, ","); s; s = strtok(NULL, ",")) {
        lssar_attn_kind kind;
        if (args_attn_kind("orbits run", s, &kind)) return 2;
        if (o.nkinds == ORBITS_MAX_KINDS) return args_error("orbits run", "--attn: at most 8 kinds");
        snprintf(o.kinds[o.nkinds++], 32, "%s", s);
    }
    if (!o.nkinds) return args_error("orbits run", "--attn is empty");
    if (o.nkinds * seeds > ORBITS_MAX_MODELS)
        return args_error("orbits run", "%d kinds x --seeds %d is more than %d models", o.nkinds, seeds,
                          ORBITS_MAX_MODELS);
    if (strcmp(pos, "rope") && strcmp(pos, "learned") && strcmp(pos, "none"))
        return args_error("orbits run", "--pos must be rope, learned or none, got '%s'", pos);
    char outbuf[4096];
    if (!out) { snprintf(outbuf, sizeof outbuf, "runs/orbits-%s", sc->name); out = outbuf; }
    o.out = out;
    const int paper_on_cpu = !strcmp(sc->name, "paper") && device == LSSAR_DEVICE_CPU;
    o.dry = dry || paper_on_cpu;
    if (paper_on_cpu)
        printf("# scale paper: the published recipe (Vafa et al. 2025; spec/orbits.md). Not run on the CPU: "
               "~250B\n"
               "# training tokens take a GPU days (pass --device cuda to run it). The commands, in order:\n");
    return orbits_run(&o, cli_run);
}
