// cmd_orbits_oracle.c - `lssar orbits oracle`: the force probe's control. A k-nearest-neighbour
// regressor (k = 2) on the standardised TRUE state [dx, dy, dvx, dvy, m1, m2] predicts |F| of the
// same test rows the model probe uses, and writes the same forces.csv: flags -> orb_oracle_opts ->
// orb_oracle_run (src/orbits/tasks.h).
#include <stdio.h>
#include <stdlib.h>
#include <cJSON.h>
#include "args.h"
#include "core/util.h"
#include "lssar.h"
#include "orbits/tasks.h"

int cmd_orbits_oracle(int argc, char **argv) {
    const char *data = NULL, *split = "force", *out = NULL;
    uint64_t systems = 0, keep = 5000, seed = 0;
    int k = 2, threads = 0;
    arg_spec specs[] = {
        {"data", ARG_STR, &data, "directory holding the force set (simulate --two-body --state)", 1, 0},
        {"split", ARG_STR, &split, "the force set's file prefix in --data", 0, 0},
        {"out", ARG_STR, &out, "output directory: OUT/forces.csv", 1, 0},
        {"systems", ARG_U64, &systems,
         "use the first N force-set systems (0: all; 90% fully labelled, 10% with 2 rows)", 0, 0},
        {"keep", ARG_U64, &keep, "test rows kept: those nearest (1-NN, standardised state) to a labelled row",
         0, 0},
        {"k", ARG_INT, &k, "neighbours averaged", 0, 0},
        {"seed", ARG_U64, &seed, "seed of the 2 labelled rows per test system", 0, 0},
        {"threads", ARG_INT, &threads, "OpenMP threads (0: all)", 0, 0},
        {0}};
    int rc = args_parse("orbits oracle",
                        "The control of the force probe (Vafa et al. 2025): a k-nearest-neighbour regressor "
                        "(k = 2) on the\n"
                        "standardised true state [dx, dy, dvx, dvy, m1, m2] (position and velocity relative "
                        "to the star,\n"
                        "planet and star mass; standardised over the labelled rows) predicts |F| for the "
                        "force set's test\n"
                        "rows. Labelled: every planet row of systems 0..90%, 2 random planet rows of each "
                        "other system; the\n"
                        "other planet rows are test rows, of which the --keep nearest to a labelled state "
                        "are written to\n"
                        "OUT/forces.csv (r,m1,m2,F_pred,F_true), the same rows `lssar orbits probe` writes.",
                        specs, argc, argv);
    if (rc >= 0) return rc;
    if (k < 1 || k > 16) return args_error("orbits oracle", "--k must be 1..16, got %d", k);
    if (threads < 0) return args_error("orbits oracle", "--threads must be >= 0, got %d", threads);
    orb_oracle_opts oo;
    orb_oracle_defaults(&oo);
    oo.data = data; oo.split = split; oo.out = out;
    oo.systems = systems; oo.keep = keep; oo.seed = seed; oo.k = k; oo.threads = threads;
    oo.report = stderr;
    orb_probe_summary sum;
    if (orb_oracle_run(&oo, &sum)) {
        fprintf(stderr, "lssar orbits oracle: %s\n", lssar_errmsg());
        return 1;
    }
    return 0;
}
