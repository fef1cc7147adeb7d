// cmd_reproduce.c - `lssar reproduce --scale laptop`: the paper's comparison as one plan of
// ordinary lssar commands (length extrapolation, attention statistics, passkey, orbits), run on
// --jobs worker processes, then one report: OUT/REPORT.md and OUT/report.json. The flags become
// a repro_opts and repro_run (exp/reproduce.h) does the rest.
#include <stdio.h>
#include "args.h"
#include "commands.h"
#include "lssar.h"
#include "exp/reproduce.h"

static const char *ABOUT =
    "The paper's comparison at laptop scale as one command (issues 17, 33). The plan, every job an\n"
    "ordinary lssar command on one core, --jobs of them at a time:\n"
    "  1. extrapolation at the paper's head size (D = 64 at laptop scale): `lssar extrapolate` per kind\n"
    "     (softmax, ssmax, sigmoid, relu, lssa (+ its LSSAR re-weighting at evaluation only), lssar p = 3,\n"
    "     lssar p = 15), --seeds each, loss at 1x..64x the training length with 95% intervals over seeds,\n"
    "     the paired difference to softmax and the loss at each position of the longest windows; then\n"
    "     one call over all kinds that only gathers their cached results into OUT/extrapolate/results.*\n"
    "     1b. the same at D = 16, the head size of our first studies (OUT/extrapolate-d16)\n"
    "     1c. head size: softmax and lssar p = 15 at D = 16, 32, 128 at the same width (OUT/headsize),\n"
    "     and the experiments that separate the causes (OUT/causes: RoPE base, the ln(D) factor, the\n"
    "     spread of the scores)\n"
    "     1d. which stage carries it: softmax, + QK normalisation with ln(D) ln(n), + re-weighting;\n"
    "     softmax and SSMax with re-weighting; LSSA; LSSAR p = 1, 3, 7, 15, 31 (OUT/ablation)\n"
    "  2. attention statistics (`lssar attnstats`, seeds pooled) of the models of 1 and 1b at 1x, 4x, 16x\n"
    "  3. passkey: per kind a model trained with a share of passkey sequences (`lssar extrapolate\n"
    "     --passkey-mix`, which also measures the same models' ordinary validation loss: the price of the\n"
    "     mix), then `lssar passkey` at 1x..16x its training length (95% Wilson intervals, seeds pooled)\n"
    "  4. orbits: `lssar orbits run` (simulation, softmax and lssar world models at D = 64, next-position\n"
    "     accuracy against the previous-position baseline, force probe, Newton audit, k-NN oracle)\n"
    "Scales: smoke (a minute: the plan's test) and laptop (2 cores, about 3.5 hours).\n"
    "\n"
    "--data DIR is a byte-level folder from `lssar data build --tokenizer byte`; when DIR/manifest.json\n"
    "is missing a first job builds it from the State of the Union corpus (fetch it first:\n"
    "scripts/fetch-corpora.sh sotu; `make reproduce` does both).\n"
    "\n"
    "Resumable: a rerun of the same command skips the jobs that finished (OUT/jobs/NAME.json holds each\n"
    "one's command, exit status and wall time) and the others continue where they stopped (checkpoints,\n"
    "cached evaluations). A failed job stops only the jobs that need it; its log is OUT/logs/NAME.log.\n"
    "Writes OUT/commands.sh (the plan, runnable one job after another), OUT/REPORT.md (every table,\n"
    "plot links, data SHA-256, commands and wall times) and OUT/report.json {\"scale\", \"version\",\n"
    "\"machine\", \"jobs\": [{\"name\", \"command\", \"exit\", \"seconds\", \"reused\"}], \"wall_seconds\", "
    "\"data\":\n"
    "[{\"file\", \"bytes\", \"sha256\"}], \"extrapolate\", \"extrapolate_d16\", \"head_size\": [{\"D\", "
    "\"heads\",\n"
    "\"softmax\" and \"lssar-p15\": {\"loss_1x\", \"loss_rx\", \"rise\": {\"mean\", \"ci95\"}}, "
    "\"lssar_minus_softmax_rx\"}]\n"
    "(rx: head_size_rise_factor, 16x at laptop scale), \"causes\": {NAME: {\"change\", KIND: {\"loss_1x\", "
    "\"loss_rx\",\n"
    "\"rise\", \"rise_minus_unchanged\"}}},\n"
    "\"passkey_training\", \"attnstats\", \"attnstats_d16\", \"passkey\": {RUN: ...}, \"orbits\": {RUN: "
    "{\"eval\",\n"
    "\"newton\"}}} (the JSON the commands wrote; the head-size rises computed from it).\n"
    "Exit status: 0 done, 2 bad flags, 1 a job failed (the others ran; rerun to continue).";


int cmd_reproduce(int argc, char **argv) {
    const char *scale_name = "laptop", *out = NULL, *data = "data/demo-sotu-byte";
    int workers = 2, dry = 0, report_only = 0;
    arg_spec specs[] = {
        {"scale", ARG_STR, &scale_name, "smoke or laptop", 0, 0},
        {"out", ARG_STR, &out, "output folder [default runs/reproduce-SCALE]", 0, 0},
        {"data", ARG_STR, &data, "byte-level data folder (built by a first job when missing)", 0, 0},
        {"jobs", ARG_INT, &workers, "jobs at a time (one core each)", 0, 0},
        {"dry-run", ARG_BOOL, &dry, "print the plan's commands, run nothing", 0, 0},
        {"report-only", ARG_BOOL, &report_only,
         "write REPORT.md and report.json from what OUT holds now, run nothing", 0, 0},
        {0}};
    int rc = args_parse("reproduce", ABOUT, specs, argc, argv);
    if (rc >= 0) return rc;
    const repro_scale *sc = repro_scale_named(scale_name);
    if (!sc) return args_error("reproduce", "--scale must be smoke or laptop, got '%s'", scale_name);
    if (workers < 1 || workers > 64) return args_error("reproduce", "--jobs must be 1..64, got %d", workers);
    if (!data[0]) return args_error("reproduce", "--data is empty");
    char outbuf[4096];
    if (!out) { snprintf(outbuf, sizeof outbuf, "runs/reproduce-%s", sc->name); out = outbuf; }
    repro_opts o = {.scale = sc, .out = out, .data = data, .workers = workers, .dry = dry,
                    .report_only = report_only};
    repro_result r;
    rc = repro_run(&o, &r);
    if (rc < 0) { fprintf(stderr, "lssar reproduce: %s\n", lssar_errmsg()); return 1; }
    if (report_only)
        printf("reproduce (%s): %d of %d jobs recorded as done; report -> %s/REPORT.md, %s/report.json\n",
               sc->name, r.done, r.jobs, out, out);
    else if (!dry)
        printf("reproduce (%s): %s -> %s/REPORT.md, %s/report.json\n", sc->name,
               rc ? "some jobs failed (above)" : "done", out, out);
    return rc;
}
