// cmd_orbits_oracle.c - `lssar orbits oracle`: the force probe's control. A k-nearest-neighbour
// regressor (k = 2) on the standardised TRUE state [dx, dy, dvx, dvy, m1, m2] predicts |F| of the
// same test rows the model probe uses, and writes the same forces.csv.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <omp.h>
#include <cJSON.h>
#include "args.h"
#include "core/util.h"
#include "lssar.h"
#include "orbits/probe.h"
#include "core/json.h"

/* Shared by the oracle and the probe: open DIR/SPLIT_state.bin and make the 90%/10% split. */
int orb_cli_force_open(const char *cmd, const char *data, const char *split, uint64_t systems, uint64_t seed,
                       orb_state *st, orb_force_split *fs);
int orb_cli_force_open(const char *cmd, const char *data, const char *split, uint64_t systems, uint64_t seed,
                       orb_state *st, orb_force_split *fs) {
    char path[4400];
    if (orb_path(path, sizeof path, data, split, "state", 0)) { fprintf(stderr, "lssar orbits %s: path too long\n", cmd); return 1; }
    if (orb_state_open(st, path)) {
        fprintf(stderr, "lssar orbits %s: %s\n  (the force set: `lssar orbits simulate --two-body --split %s --out %s`)\n",
                cmd, lssar_errmsg(), split, data);
        return 1;
    }
    if (orb_force_split_make(st, (int64_t)systems, 2, seed, fs)) {
        fprintf(stderr, "lssar orbits %s: %s: %s\n", cmd, path, lssar_errmsg());
        orb_state_close(st);
        return 1;
    }
    return 0;
}

int cmd_orbits_oracle(int argc, char **argv) {
    const char *data = NULL, *split = "force", *out = NULL;
    uint64_t systems = 0, keep = 5000, seed = 0;
    int k = 2, threads = 0;
    arg_spec specs[] = {
        {"data", ARG_STR, &data, "directory holding the force set (simulate --two-body)", 1, 0},
        {"split", ARG_STR, &split, "the force set's file prefix in --data", 0, 0},
        {"out", ARG_STR, &out, "output directory: OUT/forces.csv", 1, 0},
        {"systems", ARG_U64, &systems, "use the first N force-set systems (0: all; 90% fully labelled, 10% with 2 rows)", 0, 0},
        {"keep", ARG_U64, &keep, "test rows kept: those nearest (1-NN, standardised state) to a labelled row", 0, 0},
        {"k", ARG_INT, &k, "neighbours averaged", 0, 0},
        {"seed", ARG_U64, &seed, "seed of the 2 labelled rows per test system", 0, 0},
        {"threads", ARG_INT, &threads, "OpenMP threads (0: all)", 0, 0},
        {0}};
    int rc = args_parse("orbits oracle",
                        "The control of the force probe (Vafa et al. 2025): a k-nearest-neighbour regressor (k = 2) on the\n"
                        "standardised true state [dx, dy, dvx, dvy, m1, m2] (position and velocity relative to the star,\n"
                        "planet and star mass; standardised over the labelled rows) predicts |F| for the force set's test\n"
                        "rows. Labelled: every planet row of systems 0..90%, 2 random planet rows of each other system; the\n"
                        "other planet rows are test rows, of which the --keep nearest to a labelled state are written to\n"
                        "OUT/forces.csv (r,m1,m2,F_pred,F_true), the same rows `lssar orbits probe` writes.",
                        specs, argc, argv);
    if (rc >= 0) return rc;
    if (k < 1 || k > 16) return args_error("orbits oracle", "--k must be 1..16, got %d", k);
    if (threads < 0) return args_error("orbits oracle", "--threads must be >= 0, got %d", threads);
    if (threads > 0) omp_set_num_threads(threads);
    double t0 = lssar_now();
    orb_state st;
    orb_force_split fs;
    if (orb_cli_force_open("oracle", data, split, systems, seed, &st, &fs)) return 1;
    orb_kdtree *tree = NULL;
    int64_t *ids = NULL, n = 0;
    double *pred = NULL;
    rc = 1;
    if (orb_force_tree(&st, &fs, &tree) || orb_force_nearest(&st, &fs, tree, (int64_t)keep, &ids, &n)) goto fail;
    pred = malloc((size_t)n * sizeof(double));
    if (!pred) { lssar_fail(LSSAR_E_NOMEM, "out of memory"); goto fail; }
    if (orb_knn_predict(&st, &fs, tree, k, ids, n, pred)) goto fail;
    cJSON *j = cJSON_CreateObject();  // OUT/probe.json, the summary `lssar orbits run` reads
    cJSON_AddStringToObject(j, "model", "k-NN oracle");
    cJSON_AddNumberToObject(j, "k", k);
    double lerr;
    if (orb_forces_finish(out, &st, &fs, ids, pred, n, j, &lerr)) goto fail;
    fprintf(stderr, "lssar orbits oracle: %d-NN on %lld labelled rows -> %lld test rows (of %lld), mean |log10 F_pred - log10 F_true| = %.3f, "
            "in %.2f s -> %s/forces.csv\n", k, (long long)fs.ntrain, (long long)n, (long long)fs.ntest, lerr, lssar_now() - t0, out);
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "lssar orbits oracle: %s\n", lssar_errmsg());
done:
    free(pred); free(ids);
    orb_kd_free(tree);
    orb_force_split_free(&fs);
    orb_state_close(&st);
    return rc;
}
