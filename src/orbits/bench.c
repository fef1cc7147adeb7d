// bench.c - `lssar orbits bench` as a library function (tasks.h): the simulator's rows/s and the
// time it projects for the published 10M-system set.
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <cJSON.h>
#include "core/json.h"
#include "core/util.h"
#include "lssar.h"
#include "orbits/tasks.h"

#define OUT(...) do { if (out) fprintf(out, __VA_ARGS__); } while (0)

static const double FULL_ROWS = 1e10;   // 10M systems x 1000 rows

// Remove what a benchmark run wrote into its temporary directory.
static void remove_run(const char *dir, int64_t systems, int64_t shard_systems) {
    char path[4400];
    for (int64_t i = 0; i * shard_systems < systems; i++) {
        snprintf(path, sizeof path, "%s/bench_%06lld.bin", dir, (long long)i);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/bench_systems.bin", dir); unlink(path);
    snprintf(path, sizeof path, "%s/bench.json", dir); unlink(path);
}

// The full run with its files written, into a temporary folder under dir that goes afterwards.
static int time_written(lssar_orb_opts o, const char *dir, lssar_orb_stats *sW) {
    o.split = "bench";
    o.progress = 0;
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/lssar-orbits-bench-XXXXXX", dir ? dir : "/tmp");
    if (!mkdtemp(tmpl))
        return lssar_fail(LSSAR_E_IO, "cannot create a directory under %s", dir ? dir : "/tmp");
    int rc = lssar_orbits_simulate(tmpl, &o, sW);
    remove_run(tmpl, o.systems, o.shard_systems);
    rmdir(tmpl);
    return rc;
}

static int write_json(const orb_bench_opts *b, int T, double r1, double rT, double rW, double per_core) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "bench", "orbits simulate");
    cJSON_AddNumberToObject(j, "systems", (double)b->systems);
    cJSON_AddNumberToObject(j, "rows_per_system", LSSAR_ORB_ROWS);
    cJSON_AddNumberToObject(j, "threads", T);
    cJSON_AddNumberToObject(j, "rows_per_s_1_thread", r1);
    cJSON_AddNumberToObject(j, "rows_per_s_threads", rT);
    if (b->write) cJSON_AddNumberToObject(j, "rows_per_s_written", rW);
    cJSON_AddNumberToObject(j, "rows_per_s_per_core", per_core);
    cJSON_AddNumberToObject(j, "hours_10M_systems_here", FULL_ROWS / (b->write ? rW : rT) / 3600);
    cJSON_AddNumberToObject(j, "hours_10M_systems_16_cores", FULL_ROWS / (per_core * 16) / 3600);
    int rc = lssar_write_json(b->json, j);
    cJSON_Delete(j);
    return rc;
}

int orb_bench_run(const orb_bench_opts *b, FILE *out) {
    int T = b->threads > 0 ? b->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (T < 1) T = 1;
    lssar_orb_opts o;
    lssar_orb_defaults(&o);
    o.preset = b->preset;
    o.systems = b->systems;
    o.seed = 1;
    lssar_orb_stats s1, sT, sW = {0, 0};
    o.threads = 1;
    int rc = lssar_orbits_simulate(NULL, &o, &s1);
    if (rc) return rc;
    o.threads = T;
    if ((rc = lssar_orbits_simulate(NULL, &o, &sT))) return rc;
    double r1 = s1.rows / s1.seconds, rT = sT.rows / sT.seconds;
    OUT("orbits bench: %llu systems (%lld rows), preset %s\n", (unsigned long long)b->systems,
        (long long)s1.rows, b->preset_name);
    OUT("  compute, 1 thread   : %10.3g rows/s  (%.2f s)  -> 10M systems in %.2f h\n", r1, s1.seconds,
        FULL_ROWS / r1 / 3600);
    OUT("  compute, %2d threads : %10.3g rows/s  (%.2f s)  -> 10M systems in %.2f h  (%.2fx of 1 "
        "thread)\n",
        T, rT, sT.seconds, FULL_ROWS / rT / 3600, rT / r1);
    double rW = 0;
    if (b->write) {
        if ((rc = time_written(o, b->dir, &sW))) return rc;
        rW = sW.rows / sW.seconds;
        OUT("  written, %2d threads : %10.3g rows/s  (%.2f s)  -> 10M systems in %.2f h (%.1f MB/s of "
            "tokens)\n",
            T, rW, sW.seconds, FULL_ROWS / rW / 3600, rW * 4 / 1e6);
    }
    double per_core = rT / T > r1 ? rT / T : r1;  // shared cores: take the better per-core figure
    OUT("  per core            : %10.3g rows/s -> 10M systems on 16 cores in %.2f h of compute (goal: 1 "
        "h; 2.5M rows/s/core)\n",
        per_core, FULL_ROWS / (per_core * 16) / 3600);
    OUT("  published Python generator (anchors.md): 5.3k rows/s on 2 cores -> %.0fx slower than this "
        "run's %d threads\n",
        rT / 5.3e3, T);
    return b->json ? write_json(b, T, r1, rT, rW, per_core) : 0;
}
