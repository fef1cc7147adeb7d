/*
 * cmd_orbits.c - `lssar orbits SUBCOMMAND ...`: the orbits data, world model and Newton probe.
 *
 * Subcommands are the table ORBITS_SUBCOMMANDS of cli/commands.h, like main.c's commands. Each is
 * `int cmd_orbits_NAME(int argc, char **argv)` (argv[0] = "NAME"), defined here or in its own
 * src/cli/cmd_orbits_NAME.c.
 */
#include <stdio.h>
#include <string.h>
#include "cli/args.h"
#include "core/dist.h"
#include "lssar.h"
#include "orbits/sample.h"
#include "orbits/tasks.h"
#include "cli/commands.h"

typedef struct { const char *name; int (*fn)(int, char **); int ranks; const char *about; } subcommand;
#define ENTRY(name, ranks, about) {#name, cmd_orbits_##name, ranks, about},
static const subcommand subs[] = {ORBITS_SUBCOMMANDS(ENTRY)};
#define NSUBS (int)(sizeof subs / sizeof subs[0])

static void usage(FILE *f) {
    fprintf(f, "usage: lssar orbits SUBCOMMAND [flags]     (lssar orbits SUBCOMMAND --help)\n\n"
               "Planetary trajectories (Vafa et al. 2025), the orbit world model and the Newton probe.\n\n"
               "subcommands:\n");
    for (int i = 0; i < NSUBS; i++)
        fprintf(f, "  %-10s %s\n", subs[i].name, subs[i].about);
}

int cmd_orbits(int argc, char **argv) {
    if (argc < 2) { usage(stderr); return 2; }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (int i = 0; i < NSUBS; i++) {
        if (strcmp(argv[1], subs[i].name)) continue;
        if (!subs[i].ranks && lssar_dist_size() > 1) {
            char name[64];
            snprintf(name, sizeof name, "orbits %s", subs[i].name);
            return cli_alone_under_ranks(name);
        }
        return subs[i].fn(argc - 1, argv + 1);
    }
    fprintf(stderr, "lssar orbits: unknown subcommand '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}

/* ------------------------------------------------------------------ simulate */
int cmd_orbits_simulate(int argc, char **argv) {
    lssar_orb_opts o;
    lssar_orb_defaults(&o);
    uint64_t systems = 1000, shard_systems = (uint64_t)o.shard_systems;
    const char *out = NULL, *preset = "code", *csv = NULL, *split = o.split;
    int two_body = 0, state = 0, threads = 0, quiet = 0;
    arg_spec specs[] = {
        {"systems", ARG_U64, &systems, "number of systems = sequences of 1000 rows", 0, 0},
        {"seed", ARG_U64, &o.seed,
         "random seed; system i uses stream (seed, i), so any --threads gives the same files", 0, 0},
        {"two-body", ARG_BOOL, &two_body,
         "one planet per system (K = 1; with --state: a force set for the probe)", 0, 0},
        {"preset", ARG_STR, &preset, "distributions: code (the released code) or paper (the appendix)", 0, 0},
        {"out", ARG_STR, &out, "output directory (layout: src/orbits/format.h)", 1, 0},
        {"split", ARG_STR, &split,
         "file-name prefix: NAME_000000.bin, NAME_systems.bin, NAME.json (use its own --seed)", 0, 0},
        {"state", ARG_BOOL, &state,
         "also write NAME_state.bin: per-row positions, velocities, r, masses, |F| (48 bytes a row: 48 kB a "
         "system)",
         0, 0},
        {"csv", ARG_STR, &csv, "also write continuous values: system,body,step,t,x,y,vx,vy,mass,star_mass", 0,
         0},
        {"shard-systems", ARG_U64, &shard_systems, "sequences per token shard", 0, 0},
        {"threads", ARG_INT, &threads, "worker threads (0: all cores / OMP_NUM_THREADS)", 0, 0},
        {"quiet", ARG_BOOL, &quiet, "no progress lines", 0, 0},
        {0}};
    int rc = args_parse("orbits simulate",
                        "Sample planetary systems (Kepler orbits) and write one 1000-row, 2-channel token "
                        "sequence per\n"
                        "system: row 0 the dt token (7000 = 1 week, 7001 = 6 months), then x, y binned into "
                        "7000 bins over\n"
                        "[-50, 50] AU, time-major and body-minor (planets, then the star). Deterministic per "
                        "--seed.\n"
                        "Under `mpirun -np N` the ranks split the systems and rank 0 writes the same files "
                        "as one\n"
                        "process, byte for byte (--threads is per rank; docs/DISTRIBUTED.md).",
                        specs, argc, argv);
    if (rc >= 0) return rc;
    if ((o.preset = orb_preset_parse(preset)) < 0)
        return args_error("orbits simulate", "--preset must be code or paper, got '%s'", preset);
    if (systems == 0 || systems > (uint64_t)1 << 40)
        return args_error("orbits simulate", "--systems must be 1..2^40, got %llu",
                          (unsigned long long)systems);
    if (shard_systems == 0 || shard_systems > 2147483)
        return args_error("orbits simulate",
                          "--shard-systems must be 1..2147483 (a shard holds < 2^31 rows), got %llu",
                          (unsigned long long)shard_systems);
    if (threads < 0) return args_error("orbits simulate", "--threads must be >= 0, got %d", threads);
    o.systems = (int64_t)systems;
    o.shard_systems = (int64_t)shard_systems;
    o.two_body = two_body;
    o.state = state;
    o.threads = threads;
    o.split = split;
    o.csv_path = csv;
    o.progress = !quiet;
    if (orb_simulate_run(out, &o, stderr)) {
        fprintf(stderr, "lssar orbits simulate: %s\n", lssar_errmsg());
        return 1;
    }
    return 0;
}

/* --------------------------------------------------------------------- bench */
int cmd_orbits_bench(int argc, char **argv) {
    uint64_t systems = 20000;
    int threads = 0, write = 0;
    const char *dir = NULL, *preset = "code", *json = NULL;
    arg_spec specs[] = {
        {"systems", ARG_U64, &systems, "systems per measurement (1000 rows each)", 0, 0},
        {"threads", ARG_INT, &threads, "threads for the multi-threaded runs (0: all cores)", 0, 0},
        {"preset", ARG_STR, &preset, "distributions: code or paper", 0, 0},
        {"write", ARG_BOOL, &write, "also time the full run with files written (to --dir)", 0, 0},
        {"dir", ARG_STR, &dir, "directory for --write (files are removed afterwards) [default /tmp]", 0, 0},
        {"json", ARG_STR, &json, "also write the figures to this JSON file", 0, 0},
        {0}};
    int rc = args_parse("orbits bench",
                        "Rows/s of the orbit simulator (a row = one token row; a system = 1000 rows): "
                        "compute only on\n"
                        "1 thread and on --threads threads, optionally with the files written; and the "
                        "projected time\n"
                        "for the published 10M-system set (1e10 rows) here, and on 16 cores at the measured "
                        "per-core rate.",
                        specs, argc, argv);
    if (rc >= 0) return rc;
    orb_bench_opts b = {.systems = (int64_t)systems, .threads = threads, .write = write,
                        .preset = orb_preset_parse(preset), .preset_name = preset, .dir = dir, .json = json};
    if (b.preset < 0) return args_error("orbits bench", "--preset must be code or paper, got '%s'", preset);
    if (systems == 0 || systems > 100000000)
        return args_error("orbits bench", "--systems must be 1..1e8, got %llu", (unsigned long long)systems);
    if (threads < 0) return args_error("orbits bench", "--threads must be >= 0, got %d", threads);
    if (orb_bench_run(&b, stdout)) {
        fprintf(stderr, "lssar orbits bench: %s\n", lssar_errmsg());
        return 1;
    }
    return 0;
}
