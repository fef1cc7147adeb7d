// repro_report.c - the report of `lssar reproduce`: OUT/REPORT.md (the tables the commands wrote
// and those computed from their JSON, data hashes, every job with its wall time) and OUT/report.json.
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cJSON.h>
#include "exp/repro.h"
#include "lssar.h"
#include "core/json.h"
#include "core/sha256.h"
#include "core/util.h"

// A Markdown file of a sub-folder, its headings one level down and its relative links pointing
// into the sub-folder; a note when it is missing.
static void include_md(FILE *f, const char *out, const char *sub, const char *file) {
    char path[4400];
    snprintf(path, sizeof path, "%s/%s/%s", out, sub, file);
    FILE *in = fopen(path, "r");
    if (!in) { fprintf(f, "(%s/%s is missing: its job did not finish)\n\n", sub, file); return; }
    char line[8192];
    while (fgets(line, sizeof line, in)) {
        if (line[0] == '#') fputc('#', f);
        for (char *c = line; *c; c++) {
            fputc(*c, f);
            if (c[0] == ']' && c[1] == '(' && strncmp(c + 2, "http", 4)) {
                fputc('(', f);
                fprintf(f, "%s/", sub);
                c++;
            }
        }
    }
    fclose(in);
    fputc('\n', f);
}

// A job's printed output from the first line that starts with `from` (its log without the
// command line, up to a line starting "json:"), in a code block.
static void include_log(FILE *f, const char *out, const char *job, const char *from) {
    char path[4400];
    snprintf(path, sizeof path, "%s/logs/%s.log", out, job);
    FILE *in = fopen(path, "r");
    if (!in) { fprintf(f, "(no log: the job did not run)\n\n"); return; }
    fprintf(f, "```\n");
    char line[8192];
    int on = 0;
    while (fgets(line, sizeof line, in)) {
        if (!strncmp(line, from, strlen(from))) on = 1;
        if (!strncmp(line, "json:", 5)) on = 0;
        if (on && line[0] != '$') fputs(line, f);
    }
    fclose(in);
    fprintf(f, "```\n\n");
}

static int by_name(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

// Every regular file of dir (not below it): size and SHA-256, to the table and to arr.
static void hash_dir(FILE *f, cJSON *arr, const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    char names[256][256];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 256)
        if (e->d_name[0] != '.' && strlen(e->d_name) < 256) snprintf(names[n++], 256, "%s", e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], by_name);
    for (int i = 0; i < n; i++) {
        char path[4400], hex[65];
        struct stat st;
        if (snprintf(path, sizeof path, "%s/%s", dir, names[i]) >= (int)sizeof path) continue;
        if (stat(path, &st) || !S_ISREG(st.st_mode) || strstr(names[i], ".tmp.")) continue;
        if (sha256_file_hex(path, hex)) snprintf(hex, sizeof hex, "(unreadable)");
        fprintf(f, "| `%s` | %lld | `%s` |\n", path, (long long)st.st_size, hex);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "file", path);
        cJSON_AddNumberToObject(o, "bytes", (double)st.st_size);
        cJSON_AddStringToObject(o, "sha256", hex);
        cJSON_AddItemToArray(arr, o);
    }
}

static void machine(char *buf, size_t cap) {
    char model[256] = "unknown CPU";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "model name", 10)) {
                char *c = strchr(line, ':');
                if (c) { snprintf(model, sizeof model, "%s", c + 2); model[strcspn(model, "\n")] = 0; }
                break;
            }
        fclose(f);
    }
    snprintf(buf, cap, "%s, %ld cores", model, sysconf(_SC_NPROCESSORS_ONLN));
}

// Sections 1 to 4: the tables the commands wrote, and those computed from their JSON (into root).
static void sections(FILE *f, const char *out, const repro_scale *sc, cJSON *root) {
    fprintf(f, "\n## 1. Length extrapolation at head size D = %d (%d heads, width %d)\n\n",
            sc->x_dim / sc->x_heads, sc->x_heads, sc->x_dim);
    include_md(f, out, "extrapolate", "results.md");
    fprintf(f, "![loss against length](extrapolate/loss_vs_length.png)\n\n![loss by "
               "position](extrapolate/loss_vs_position.png)\n\n");
    fprintf(f, "## 1b. The same at head size D = %d (%d heads, width %d), as in our first studies\n\n",
            sc->s_dim / sc->s_heads, sc->s_heads, sc->s_dim);
    include_md(f, out, "extrapolate-d16", "results.md");
    fprintf(f, "![loss against length](extrapolate-d16/loss_vs_length.png)\n\n![loss by "
               "position](extrapolate-d16/loss_vs_position.png)\n\n");
    fprintf(f, "## 1c. Why head size matters\n\n");
    repro_headsize_tables(f, out, sc, root);
    fprintf(f,
            "## 1d. Which stage carries the flat loss: the ablation at D = %d\n\n| run | what changes "
            "|\n|---|---|\n",
            sc->x_dim / sc->x_heads);
    for (int i = 0; i < REPRO_NABLATION; i++)
        fprintf(f, "| %s | %s |\n", REPRO_ABLATION[i].run, REPRO_ABLATION[i].what);
    fprintf(f, "\n");
    repro_ablation_tables(f, out, sc, root);
    include_md(f, out, "ablation", "results.md");
    fprintf(f, "![loss against length](ablation/loss_vs_length.png)\n\n![loss by "
               "position](ablation/loss_vs_position.png)\n\n");
    fprintf(f, "## 2. Attention statistics (seeds pooled)\n\nAt D = %d:\n\n", sc->x_dim / sc->x_heads);
    include_log(f, out, "attnstats", "pooled over");
    fprintf(f, "At D = %d:\n\n", sc->s_dim / sc->s_heads);
    include_log(f, out, "attnstats_d16", "pooled over");
    fprintf(f,
            "Plots: `attnstats.png`, `attnstats_sink.png` (D = %d: `attnstats_d16*.png`); numbers: "
            "`attnstats*.json`.\n\n## 3. Passkey retrieval\n\n"
            "Models of %d layers, %d heads, width %d, trained at T = %d for %d steps with %.0f%% of the "
            "windows replaced by passkey sequences (%s prompt), %d seed(s) per kind; %d depths x %d keys per "
            "length and model.\n\n",
            sc->s_dim / sc->s_heads, sc->p_layers, sc->p_heads, sc->p_dim, sc->p_seq, sc->p_steps,
            100.0 * sc->p_mix, sc->p_short ? "short: no task sentence" : "full", sc->p_seeds, sc->p_depths,
            sc->p_trials);
    repro_passkey_table(f, out, sc, cJSON_AddObjectToObject(root, "passkey"));
    fprintf(f, "### The passkey models' validation loss at 1x\n\n");
    include_md(f, out, "passkey", "results.md");
    fprintf(f, "## 4. Orbits\n\n");
    include_md(f, out, "orbits", "RESULTS.md");
}

// Every job: its exit status, wall time and state (the table), with its command (root's "jobs").
static void jobs_table(FILE *f, const job_plan *p, double sum, cJSON *root) {
    fprintf(f, "## Jobs\n\n| job | exit | seconds | |\n|---|---|---|---|\n");
    cJSON *jarr = cJSON_AddArrayToObject(root, "jobs");
    for (int i = 0; i < p->n; i++) {
        const job *j = &p->jobs[i];
        const char *what = j->state == JOB_DONE      ? (j->reused ? "finished in an earlier call" : "")
                           : j->state == JOB_FAILED  ? "FAILED"
                           : j->state == JOB_WAITING ? "not run yet"
                                                     : "not run (a job it needs failed)";
        fprintf(f, "| %s | %d | %.1f | %s |\n", j->name, j->exit, j->seconds, what);
        char *cmd = jobs_command(j);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", j->name);
        cJSON_AddStringToObject(o, "command", cmd ? cmd : "");
        cJSON_AddStringToObject(o, "state",
                                j->state == JOB_DONE     ? "done"
                                : j->state == JOB_FAILED ? "failed"
                                                         : "not run");
        cJSON_AddNumberToObject(o, "exit", j->exit);
        cJSON_AddNumberToObject(o, "seconds", j->seconds);
        cJSON_AddBoolToObject(o, "reused", j->reused);
        cJSON_AddItemToArray(jarr, o);
        free(cmd);
    }
    fprintf(f, "| total | | %.1f | |\n", sum);
}

// The JSON the commands wrote, as it is (null for a file not written yet).
static void commands_json(const char *out, cJSON *root) {
    static const struct { const char *key, *file; } PARTS[] = {
        {"extrapolate", "extrapolate/results.json"}, {"extrapolate_d16", "extrapolate-d16/results.json"},
        {"ablation", "ablation/results.json"},
        {"passkey_training", "passkey/results.json"}, {"attnstats", "attnstats.json"},
        {"attnstats_d16", "attnstats_d16.json"}};
    char path[4400];
    for (int i = 0; i < (int)(sizeof PARTS / sizeof PARTS[0]); i++) {
        snprintf(path, sizeof path, "%s/%s", out, PARTS[i].file);
        cJSON *j = lssar_read_json(path);
        cJSON_AddItemToObject(root, PARTS[i].key, j ? j : cJSON_CreateNull());
    }
    cJSON *orb = cJSON_AddObjectToObject(root, "orbits");
    static const char *const ORUNS[3] = {"softmax", "lssar", "oracle"};
    for (int i = 0; i < 3; i++) {
        cJSON *o = cJSON_AddObjectToObject(orb, ORUNS[i]);
        static const char *const FILES[2] = {"eval", "newton"};
        for (int k = 0; k < 2; k++) {
            snprintf(path, sizeof path, "%s/orbits/%s/%s.json", out, ORUNS[i], FILES[k]);
            cJSON *j = lssar_read_json(path);
            cJSON_AddItemToObject(o, FILES[k], j ? j : cJSON_CreateNull());
        }
    }
}

int repro_report_write(const job_plan *p, const repro_scale *sc, const char *data) {
    const char *out = p->out;
    char path[4400], mach[400], when[32];
    machine(mach, sizeof mach);
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    lssar_afile af;
    snprintf(path, sizeof path, "%s/REPORT.md", out);
    int rc = lssar_afile_open(&af, path);
    if (rc) return rc;
    FILE *f = af.f;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "scale", sc->name);
    cJSON_AddStringToObject(root, "version", LSSAR_VERSION);
    cJSON_AddStringToObject(root, "machine", mach);
    cJSON_AddNumberToObject(root, "workers", p->workers);
    double sum = 0;
    int ok = 0;
    for (int i = 0; i < p->n; i++) { sum += p->jobs[i].seconds; ok += p->jobs[i].state == JOB_DONE; }
    fprintf(f, "# lssar reproduce --scale %s\n\n%s.\n\n", sc->name, sc->about);
    fprintf(f,
            "lssar %s, %s, %s; %d jobs at a time, each on one core. %d of %d jobs finished; their wall times "
            "sum to %.0f s (%.2f h of one core); this call took %.0f s. Every job's command: `commands.sh`; "
            "its output: `logs/`.\n\n",
            LSSAR_VERSION, when, mach, p->workers, ok, p->n, sum, sum / 3600, p->wall);
    fprintf(f, "## Data\n\n| file | bytes | SHA-256 |\n|---|---|---|\n");
    cJSON *darr = cJSON_AddArrayToObject(root, "data");
    hash_dir(f, darr, data);
    snprintf(path, sizeof path, "%s/orbits/data", out);
    hash_dir(f, darr, path);
    sections(f, out, sc, root);
    jobs_table(f, p, sum, root);
    cJSON_AddNumberToObject(root, "job_seconds", sum);
    cJSON_AddNumberToObject(root, "wall_seconds", p->wall);
    commands_json(out, root);
    if ((rc = lssar_afile_commit(&af))) { cJSON_Delete(root); return rc; }
    snprintf(path, sizeof path, "%s/report.json", out);
    rc = lssar_write_json(path, root);
    cJSON_Delete(root);
    return rc;
}
