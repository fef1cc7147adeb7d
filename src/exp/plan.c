// plan.c - run a plan of lssar commands on N worker processes; see plan.h.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cJSON.h>
#include "exp/plan.h"
#include "core/json.h"
#include "core/util.h"

int jobs_add(job_plan *p, const char *name, double cost, const int *deps, int ndeps, args_vec *a) {
    if (p->n >= JOBS_MAX || ndeps > JOBS_MAX_DEPS) { args_clear(a); return -1; }
    job *j = &p->jobs[p->n];
    memset(j, 0, sizeof *j);
    snprintf(j->name, sizeof j->name, "%s", name);
    j->argv = *a;                      // the strings move to the job
    a->n = 0; a->v[0] = NULL;
    j->cost = cost > 1 ? cost : 1;
    for (int i = 0; i < ndeps; i++) if (deps[i] >= 0 && deps[i] < p->n) j->deps[j->ndeps++] = deps[i];
    return p->n++;
}

char *jobs_command(const job *j) { return args_line(&j->argv, "lssar"); }

void jobs_free(job_plan *p) {
    for (int i = 0; i < p->n; i++) args_clear(&p->jobs[i].argv);
    p->n = 0;
}

// "extrapolate/softmax" -> "extrapolate-softmax": one file name per job
static void slug(const char *name, char *out, size_t cap) {
    snprintf(out, cap, "%s", name);
    for (char *c = out; *c; c++) if (*c == '/' || *c == ' ') *c = '-';
}
static void job_path(const job_plan *p, const job *j, const char *dir, const char *ext, char *out,
                     size_t cap) {
    char s[80];
    slug(j->name, s, sizeof s);
    snprintf(out, cap, "%s/%s/%s.%s", p->out, dir, s, ext);
}

// "1h02m", "3m05s", "12s"
static void fmt_dur(double s, char *out, size_t cap) {
    if (s < 0) s = 0;
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(out, cap, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else if (t >= 60) snprintf(out, cap, "%ldm%02lds", t / 60, t % 60);
    else snprintf(out, cap, "%lds", t);
}

// The record of an earlier run that finished this job with the same command: its wall time.
static int read_record(const job_plan *p, const job *j, double *seconds) {
    char path[4400];
    job_path(p, j, "jobs", "json", path, sizeof path);
    cJSON *r = lssar_read_json(path);
    if (!r) return 0;
    char *cmd = jobs_command(j);
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(r, "command"),
                *e = cJSON_GetObjectItemCaseSensitive(r, "exit"),
                *s = cJSON_GetObjectItemCaseSensitive(r, "seconds");
    int same = cmd && cJSON_IsString(c) && !strcmp(c->valuestring, cmd) && cJSON_IsNumber(e) &&
               e->valueint == 0 && cJSON_IsNumber(s);
    if (same) *seconds = s->valuedouble;
    free(cmd);
    cJSON_Delete(r);
    return same;
}

cJSON *jobs_record(const job *j) {
    char *cmd = jobs_command(j);
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "name", j->name);
    cJSON_AddStringToObject(r, "command", cmd ? cmd : "");
    cJSON_AddNumberToObject(r, "exit", j->exit);
    cJSON_AddNumberToObject(r, "seconds", j->seconds);
    free(cmd);
    return r;
}

static int write_record(const job_plan *p, const job *j) {
    char path[4400], when[32];
    job_path(p, j, "jobs", "json", path, sizeof path);
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    cJSON *r = jobs_record(j);
    cJSON_AddStringToObject(r, "finished", when);
    int rc = lssar_write_json(path, r);
    cJSON_Delete(r);
    return rc;
}

// The longest estimated path from the start of job i to the end of the plan (i included).
static double path_cost(const job_plan *p, int i, double *memo) {
    if (memo[i] >= 0) return memo[i];
    double tail = 0;
    for (int k = i + 1; k < p->n; k++)
        for (int d = 0; d < p->jobs[k].ndeps; d++)
            if (p->jobs[k].deps[d] == i) { double c = path_cost(p, k, memo); if (c > tail) tail = c; }
    return memo[i] = p->jobs[i].cost + tail;
}

// Start job j as a child: this binary with the job's arguments, output appended to its log. The
// child asks for SIGTERM when the runner dies, so a killed run leaves no orphans behind.
static int start_job(job_plan *p, job *j) {
    char log[4400];
    job_path(p, j, "logs", "log", log, sizeof log);
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return lssar_fail(LSSAR_E_IO, "cannot open %s: %s", log, strerror(errno));
    char *cmd = jobs_command(j);
    if (cmd) { dprintf(fd, "$ %s\n", cmd); free(cmd); }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fd);
        return lssar_fail(LSSAR_E_IO, "cannot start a process for %s: %s", j->name, strerror(errno));
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() == 1) _exit(128 + SIGTERM);   // the runner died before prctl
        dup2(fd, 1);
        dup2(fd, 2);
        char *argv[ARGS_VEC_MAX + 2];
        argv[0] = "lssar";
        for (int i = 0; i < j->argv.n; i++) argv[i + 1] = j->argv.v[i];
        argv[j->argv.n + 1] = NULL;
        execv("/proc/self/exe", argv);
        dprintf(2, "lssar reproduce: cannot run /proc/self/exe: %s\n", strerror(errno));
        _exit(127);
    }
    close(fd);
    j->pid = pid;
    j->state = JOB_RUNNING;
    j->t0 = lssar_now();
    return 0;
}

// The last lines of a failed job's log, for the error message.
static void print_tail(const char *log) {
    FILE *f = fopen(log, "r");
    if (!f) return;
    char lines[8][512];
    int n = 0;
    while (fgets(lines[n % 8], sizeof lines[0], f)) n++;
    fclose(f);
    for (int i = n > 8 ? n - 8 : 0; i < n; i++) fprintf(stderr, "    | %s", lines[i % 8]);
}

static void status_line(const job_plan *p, double t0, double scale) {
    int done = 0, total = p->n;
    double left = 0, longest = 0;
    char running[512] = "";
    for (int i = 0; i < p->n; i++) {
        const job *j = &p->jobs[i];
        if (j->state == JOB_DONE) done++;
        else if (j->state == JOB_WAITING) left += j->cost * scale;
        else if (j->state == JOB_RUNNING) {
            double el = lssar_now() - j->t0, rem = j->cost * scale - el;
            // over its estimate: a little more
            if (rem < 0.05 * j->cost * scale) rem = 0.05 * j->cost * scale;
            left += rem;
            if (rem > longest) longest = rem;
            char d[32], item[128];
            fmt_dur(el, d, sizeof d);
            snprintf(item, sizeof item, "%s%s (%s)", running[0] ? ", " : "", j->name, d);
            if (strlen(running) + strlen(item) < sizeof running) strcat(running, item);
        }
    }
    double eta = left / p->workers;
    if (eta < longest) eta = longest;
    char el[32], et[32];
    fmt_dur(lssar_now() - t0, el, sizeof el);
    fmt_dur(eta, et, sizeof et);
    fprintf(stderr, "reproduce  %d/%d jobs  elapsed %s  ETA %s  running: %s\n", done, total, el, et,
            running[0] ? running : "-");
}

int jobs_load(job_plan *p) {
    int done = 0;
    for (int i = 0; i < p->n; i++) {
        job *j = &p->jobs[i];
        j->state = JOB_WAITING;
        if (read_record(p, j, &j->seconds)) { j->state = JOB_DONE; j->reused = 1; done++; }
    }
    return done;
}

int jobs_run(job_plan *p, int dry) {
    char path[4400];
    if (!dry) {
        static const char *const DIRS[2] = {"logs", "jobs"};
        for (int d = 0; d < 2; d++) {
            snprintf(path, sizeof path, "%s/%s", p->out, DIRS[d]);
            if (lssar_mkdirs(path)) return -1;
        }
    }
    // OUT/commands.sh: the plan in order (every job after its dependencies, as they were added)
    lssar_afile af = {0};
    snprintf(path, sizeof path, "%s/commands.sh", p->out);
    if (!dry && lssar_afile_open(&af, path)) return -1;
    FILE *cf = dry ? stdout : af.f;
    fprintf(cf,
            "#!/bin/sh\n# The plan of `lssar reproduce`, one job per line, each after the jobs it needs "
            "(the\n"
            "# runner runs %d at a time; this file runs them one after another).\nset -e\n",
            p->workers);
    for (int i = 0; i < p->n; i++) {
        char *cmd = jobs_command(&p->jobs[i]);
        fprintf(cf, "# %s (~%.0f s)%s", p->jobs[i].name, p->jobs[i].cost, p->jobs[i].ndeps ? ", after" : "");
        for (int d = 0; d < p->jobs[i].ndeps; d++) fprintf(cf, " %s", p->jobs[p->jobs[i].deps[d]].name);
        fprintf(cf, "\n%s\n", cmd ? cmd : "");
        free(cmd);
    }
    if (dry) return 0;
    if (lssar_afile_commit(&af)) return -1;

    double memo[JOBS_MAX];
    for (int i = 0; i < p->n; i++) memo[i] = -1;
    for (int i = 0; i < p->n; i++) path_cost(p, i, memo);
    int reused = jobs_load(p);
    if (reused)
        fprintf(stderr, "reproduce: %d of %d jobs finished in an earlier run (OUT/jobs); not run again\n",
                reused, p->n);
    const double t0 = lssar_now();
    // The ETA scales the estimates by how long the finished jobs really took against their
    // estimates. Both sums start with a tenth of the plan's estimate, so that one short job that
    // found its work already done (a data set that exists) does not shrink every estimate at once.
    double prior = 0;
    for (int i = 0; i < p->n; i++) if (p->jobs[i].state == JOB_WAITING) prior += 0.1 * p->jobs[i].cost;
    double last_status = t0, est_done = prior, real_done = prior;
    int running = 0, failed = 0;
    for (;;) {
        // start the ready jobs, the longest path to the end first
        while (running < p->workers) {
            int best = -1;
            for (int i = 0; i < p->n; i++) {
                job *j = &p->jobs[i];
                if (j->state != JOB_WAITING) continue;
                int ready = 1;
                for (int d = 0; d < j->ndeps; d++) {
                    job_state s = p->jobs[j->deps[d]].state;
                    if (s == JOB_FAILED || s == JOB_BLOCKED) { j->state = JOB_BLOCKED; ready = 0; break; }
                    if (s != JOB_DONE) ready = 0;
                }
                if (ready && (best < 0 || memo[i] > memo[best])) best = i;
            }
            if (best < 0) break;
            job *j = &p->jobs[best];
            char *cmd = jobs_command(j);
            fprintf(stderr, "reproduce: start %s\n  $ %s\n", j->name, cmd ? cmd : "");
            free(cmd);
            if (start_job(p, j)) {
                fprintf(stderr, "reproduce: %s\n", lssar_errmsg());
                j->state = JOB_FAILED; j->exit = 1; failed++;
                continue;
            }
            running++;
        }
        if (!running) break;
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid < 0 && errno != EINTR) break;
        if (pid <= 0) {
            nanosleep(&(struct timespec){0, 200000000}, NULL);
            if (lssar_now() - last_status >= 60) {
                status_line(p, t0, est_done > 0 ? real_done / est_done : 1);
                last_status = lssar_now();
            }
            continue;
        }
        for (int i = 0; i < p->n; i++) {
            job *j = &p->jobs[i];
            if (j->state != JOB_RUNNING || j->pid != pid) continue;
            running--;
            j->seconds = lssar_now() - j->t0;
            j->exit = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
            char d[32];
            fmt_dur(j->seconds, d, sizeof d);
            job_path(p, j, "logs", "log", path, sizeof path);
            if (j->exit == 0) {
                j->state = JOB_DONE;
                est_done += j->cost; real_done += j->seconds;
                if (write_record(p, j))
                    fprintf(stderr, "reproduce: %s (the job is done but will run again next time)\n",
                            lssar_errmsg());
                fprintf(stderr, "reproduce: done %s in %s\n", j->name, d);
            } else {
                j->state = JOB_FAILED;
                failed++;
                fprintf(stderr, "reproduce: FAILED %s (exit %d after %s); the end of %s:\n", j->name, j->exit,
                        d, path);
                print_tail(path);
            }
            status_line(p, t0, est_done > 0 ? real_done / est_done : 1);
            last_status = lssar_now();
        }
    }
    p->wall = lssar_now() - t0;
    for (int i = 0; i < p->n; i++) if (p->jobs[i].state == JOB_WAITING) p->jobs[i].state = JOB_BLOCKED;
    if (failed) {
        int blocked = 0;
        for (int i = 0; i < p->n; i++) blocked += p->jobs[i].state == JOB_BLOCKED;
        fprintf(stderr,
                "reproduce: %d job(s) failed and %d could not start without them; fix the cause (the logs "
                "are in %s/logs) and run the same command again: finished jobs are kept\n",
                failed, blocked, p->out);
        return 1;
    }
    return 0;
}

int jobs_run_inline(job_plan *p, const plan_inline *o) {
    for (int i = 0; i < p->n; i++) {
        job *j = &p->jobs[i];
        if (j->state != JOB_WAITING) continue;
        char *line = jobs_command(j);
        if (!line) return 1;
        printf("\n$ %s\n", line);
        fflush(stdout);
        if (o->log) { fprintf(o->log, "%s\n", line); fflush(o->log); }
        free(line);
        j->t0 = lssar_now();
        if (j->skip) printf("(%s: %s; not run again)\n", j->name, j->skip);
        else if (!o->dry) j->exit = o->run(j->argv.n, j->argv.v);
        fflush(stdout);
        j->seconds = j->skip ? 0 : lssar_now() - j->t0;
        j->state = j->exit ? JOB_FAILED : JOB_DONE;
        if (o->timings && !o->dry && !j->skip) printf("  (%.1f s)\n", j->seconds);
        if (j->exit) return j->exit;
    }
    return 0;
}
