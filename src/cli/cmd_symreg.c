// cmd_symreg.c - `lssar symreg`: symbolic regression on a CSV file. Progress on stderr, the Pareto
// table on stdout, and optionally JSON {"selected": {...}, "pareto": [...]}.
#include <string.h>
#include "cli/args.h"
#include "symreg/sr.h"

int cmd_symreg(int argc, char **argv) {
    lssar_sr_options o;
    lssar_sr_defaults(&o);
    const char *csv = NULL, *target = NULL, *features = NULL, *loss = "l2", *select = "best", *json = NULL;
    int threads = 0, quiet = 0;
    uint64_t seed = 0;
    float time_limit = 0, early_stop = (float)o.early_stop, opt_child = (float)o.opt_child;
    arg_spec specs[] = {
        {"csv", ARG_STR, &csv, "CSV file with a header row of column names", 1, 0},
        {"target", ARG_STR, &target, "column to predict", 1, 0},
        {"features", ARG_STR, &features, "comma list of feature columns (default: all but the target)", 0, 0},
        {"ops", ARG_STR, &o.ops, "operators: + - * / pow neg sin cos exp log inv sqrt square cube abs", 0, 0},
        {"complexity", ARG_STR, &o.complexity, "per-operator complexity, e.g. pow=2,exp=2 (others 1)", 0, 0},
        {"maxsize", ARG_INT, &o.maxsize, "largest expression complexity", 0, 0},
        {"loss", ARG_STR, &loss, "l2, l1, l1dz (L1 with a 1e-8 dead zone) or rel (relative L1)", 0, 0},
        {"populations", ARG_INT, &o.populations, "islands evolved in parallel", 0, 0},
        {"population-size", ARG_INT, &o.population_size, "members per island", 0, 0},
        {"iterations", ARG_INT, &o.iterations, "synchronised iterations (evolve, optimise, migrate)", 0, 0},
        {"cycles", ARG_INT, &o.cycles, "mutations per island per iteration", 0, 0},
        {"restarts", ARG_INT, &o.restarts, "independent searches whose fronts are merged", 0, 0},
        {"opt-restarts", ARG_INT, &o.opt_restarts, "extra starts of the constant optimiser", 0, 0},
        {"opt-child", ARG_FLOAT, &opt_child,
         "share of new children whose constants are re-fitted before they compete", 0, 0},
        {"early-stop", ARG_FLOAT, &early_stop,
         "stop when the error relative to a constant fit is below this (0: never)", 0, 0},
        {"seed", ARG_U64, &seed, "random seed (same seed and threads: same result)", 0, 0},
        {"threads", ARG_INT, &threads, "OpenMP threads (0: all)", 0, 0},
        {"time-limit", ARG_FLOAT, &time_limit, "seconds, checked between iterations (0: none)", 0, 0},
        {"select", ARG_STR, &select, "score, best or accuracy", 0, 0},
        {"json", ARG_STR, &json, "write {selected, pareto} to this JSON file", 0, 0},
        {"quiet", ARG_BOOL, &quiet, "no progress lines", 0, 0},
        {0}};
    int rc = args_parse("symreg",
                        "Symbolic regression (PySR-style evolution on islands) on a CSV file.\n"
                        "Prints the Pareto front (complexity, loss, score, equation); equations parse with "
                        "SymPy.",
                        specs, argc, argv);
    if (rc >= 0) return rc;
    o.seed = seed;
    o.threads = threads;
    o.time_limit = time_limit;
    o.early_stop = early_stop;
    o.verbose = !quiet;
    o.opt_child = opt_child;
    if (!strcmp(loss, "l2")) o.loss = LSSAR_SR_L2;
    else if (!strcmp(loss, "l1")) o.loss = LSSAR_SR_L1;
    else if (!strcmp(loss, "l1dz")) o.loss = LSSAR_SR_L1DZ;
    else if (!strcmp(loss, "rel")) o.loss = LSSAR_SR_REL;
    else return args_error("symreg", "--loss '%s': use l2, l1, l1dz or rel", loss);
    if (!strcmp(select, "score")) o.select = LSSAR_SR_SCORE;
    else if (!strcmp(select, "best")) o.select = LSSAR_SR_BEST;
    else if (!strcmp(select, "accuracy")) o.select = LSSAR_SR_ACCURACY;
    else return args_error("symreg", "--select '%s': use score, best or accuracy", select);
    sr_csv_opts co = {.csv = csv, .target = target, .features = features, .json = json, .sr = o};
    if (sr_csv_run(&co)) return args_error("symreg", "%s", lssar_errmsg());
    return 0;
}
