// cmd_orbits_newton.c - `lssar orbits newton`: symbolic regression of the forces a probe (or the
// oracle) predicted, per "galaxy", and the law audit of spec/orbits.md: flags -> orb_newton_opts ->
// orb_newton_run (src/orbits/newton.c).
#include <stdio.h>
#include <string.h>
#include "args.h"
#include "core/util.h"
#include "lssar.h"
#include "orbits/tasks.h"

int cmd_orbits_newton(int argc, char **argv) {
    orb_newton_opts no;
    orb_newton_defaults(&no);
    const char *forces = NULL, *json = NULL, *target = no.target;
    int galaxies = no.galaxies, rows = no.rows, threads = 0, quiet = 0;
    uint64_t seed = 0;
    lssar_sr_options o = no.sr;
    arg_spec specs[] = {
        {"forces", ARG_STR, &forces,
         "forces.csv from `lssar orbits probe` or `oracle` (header r,m1,m2,F_pred[,F_true])", 1, 0},
        {"target", ARG_STR, &target, "column regressed: F_pred (the probe's forces) or F_true (a check)", 0,
         0},
        {"galaxies", ARG_INT, &galaxies, "random subsamples searched separately", 0, 0},
        {"rows", ARG_INT, &rows, "rows per galaxy (all rows if the file has fewer)", 0, 0},
        {"ops", ARG_STR, &o.ops, "symbolic-regression operators", 0, 0},
        {"maxsize", ARG_INT, &o.maxsize, "largest expression complexity", 0, 0},
        {"iterations", ARG_INT, &o.iterations, "symbolic-regression iterations", 0, 0},
        {"restarts", ARG_INT, &o.restarts, "independent searches per galaxy", 0, 0},
        {"populations", ARG_INT, &o.populations, "islands per search", 0, 0},
        {"cycles", ARG_INT, &o.cycles, "mutations per island per iteration", 0, 0},
        {"seed", ARG_U64, &seed, "seed of the subsamples and the searches", 0, 0},
        {"threads", ARG_INT, &threads, "OpenMP threads (0: all)", 0, 0},
        {"json", ARG_STR, &json, "also write {galaxies: [...], audit: {...}} to this file", 0, 0},
        {"quiet", ARG_BOOL, &quiet, "no progress lines", 0, 0},
        {0}};
    int rc = args_parse(
        "orbits newton",
        "Which force law do the predicted forces follow? Per galaxy (--rows random rows of --forces), a\n"
        "symbolic regression of --target on r, m1, m2 with the published settings (operators +, *, sin,\n"
        "cos, exp, inv; max size 20; L1 loss; 100 iterations; 3 restarts; the law chosen by score), then "
        "the\n"
        "law audit: the L1-optimal constants (weighted medians) of c m1 m2 / r^2 and c m1 / r^2 with their\n"
        "errors, whether each found law depends on m2 (named in it, and its predictions move when m2 is\n"
        "scaled by 1.1), and the m1 m2 constant against G = 4 pi^2 = 39.478 (AU, yr, Msun). Independently "
        "of\n"
        "the search, whether the forces themselves depend on m2: the rank correlation of log m2 with\n"
        "log(F r^2 / m1) (1 for Newton, ~0 without m2; |rho| > 0.5 counts). With F_true present, the same\n"
        "fits on the true forces are reported beside. JSON audit: c_m1m2, c_m1m2_over_G, c_m1, their\n"
        "relative L1 errors, better_form, depends_on_m2 (the laws, majority of galaxies),\n"
        "galaxies_depending_on_m2, m2_rank_correlation, forces_depend_on_m2, galaxies_newton_within_1pct.",
        specs, argc, argv);
    if (rc >= 0) return rc;
    if (galaxies < 1 || galaxies > 1000)
        return args_error("orbits newton", "--galaxies must be 1..1000, got %d", galaxies);
    if (rows < 10) return args_error("orbits newton", "--rows must be >= 10, got %d", rows);
    if (threads < 0) return args_error("orbits newton", "--threads must be >= 0, got %d", threads);
    o.threads = threads;
    o.verbose = !quiet;
    no.forces = forces; no.target = target; no.json = json;
    no.galaxies = galaxies; no.rows = rows; no.seed = seed;
    no.sr = o;
    no.report = stdout;
    orb_newton_result res;
    if (orb_newton_run(&no, &res)) {
        fprintf(stderr, "lssar orbits newton: %s\n", lssar_errmsg());
        return 1;
    }
    orb_newton_result_free(&res);
    return 0;
}
