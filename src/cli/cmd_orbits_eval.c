// cmd_orbits_eval.c - `lssar orbits eval`: next-position accuracy and decoded error of an orbit
// model beside the previous-position baseline: flags -> orb_eval_opts -> orb_eval_run (src/orbits/tasks.h).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cJSON.h>
#include "args.h"
#include "core/util.h"
#include "lssar.h"
#include "orbits/tasks.h"

int cmd_orbits_eval(int argc, char **argv) {
    const char *model = NULL, *data = NULL, *split = "val", *json = NULL;
    uint64_t systems = 0;
    const char *device_name = "cpu";
    int seq = LSSAR_ORB_ROWS - 1, batch = 4, quiet = 0;
    arg_spec specs[] = {
        {"model", ARG_STR, &model, "trained orbit model: run directory or .safetensors file", 1, 0},
        {"data", ARG_STR, &data, "directory written by `lssar orbits simulate`", 1, 0},
        {"split", ARG_STR, &split, "which split of --data (file prefix)", 0, 0},
        {"systems", ARG_U64, &systems, "evaluate the first N systems (0: all)", 0, 0},
        {"seq", ARG_INT, &seq,
         "rows predicted per sequence (1..999; learned positions cap it at the training length)", 0, 0},
        {"batch", ARG_INT, &batch, "sequences per forward pass", 0, 0},
        {"json", ARG_STR, &json, "also write the results to this JSON file", 0, 0},
        {"quiet", ARG_BOOL, &quiet, "no progress lines", 0, 0},
        {"device", ARG_STR, &device_name, ARGS_DEVICE_HELP, 0, 0},
        {0}};
    int rc = args_parse("orbits eval",
                        "Next-position prediction of an orbit model on whole sequences (window = rows "
                        "0..seq, aligned at\n"
                        "the dt row): cross-entropy, token accuracy (mean of the x and y channels; and both "
                        "right) and the\n"
                        "mean distance in AU between the decoded predicted and true positions (bin "
                        "midpoints).\n"
                        "Baseline: predict the same body's previous position (row r - (K + 1): the previous "
                        "row is another\n"
                        "body). Model and baseline are compared on the rows where that previous position "
                        "exists (step >= 1):\n"
                        "model minus baseline per system with its 95% t interval over systems, and both "
                        "errors by the\n"
                        "target's distance from the origin (0-5, 5-10, 10-20, 20-30, >= 30 AU), where the "
                        "error comes from.\n"
                        "JSON: {\"model\", \"data\", \"split\", \"systems\", \"rows\", \"loss\", "
                        "\"accuracy\", \"accuracy_both\",\n"
                        "\"error_au\", \"compared\": {\"rows\", \"model\": {\"accuracy\", \"accuracy_both\", "
                        "\"error_au\"},\n"
                        "\"previous_position\": {...}, \"model_minus_previous\": {\"accuracy\", "
                        "\"accuracy_ci95_half\", \"error_au\",\n"
                        "\"error_au_ci95_half\"}, \"by_radius\": [{\"from_au\", \"to_au\", \"rows\", "
                        "\"model_error_au\", \"previous_error_au\"}]}}.",
                        specs, argc, argv);
    if (rc >= 0) return rc;
    lssar_device device;
    if (args_device("orbits eval", device_name, &device)) return 2;
    if (batch < 1) return args_error("orbits eval", "--batch must be >= 1, got %d", batch);
    if (seq < 1 || seq > LSSAR_ORB_ROWS - 1)
        return args_error("orbits eval", "--seq must be 1..%d, got %d", LSSAR_ORB_ROWS - 1, seq);
    orb_eval_opts eo;
    orb_eval_defaults(&eo);
    eo.model = model; eo.data = data; eo.split = split; eo.json = json;
    eo.systems = (int64_t)systems; eo.seq = seq; eo.batch = batch; eo.progress = !quiet; eo.device = device;
    eo.report = stdout;
    orb_eval_result r;
    if (orb_eval_run(&eo, &r))
        return args_fail_inputs("orbits eval", model, data);
    return 0;
}
