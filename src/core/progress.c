// progress.c - one-line progress reports with rate and ETA for long work.
#include <stdio.h>
#include <time.h>
#include "util.h"

double lssar_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

void lssar_progress_start(lssar_progress *p, const char *label, const char *unit, double total) {
    p->label = label; p->unit = unit; p->total = total;
    p->t0 = p->last = lssar_now();
    p->interval = 1.0;
}

static void fmt_duration(char *buf, size_t n, double s) {
    if (s < 0 || s > 1e8) { snprintf(buf, n, "?"); return; }
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
    else snprintf(buf, n, "%ld:%02ld", t / 60, t % 60);
}

int lssar_progress_update(lssar_progress *p, double done, const char *extra) {
    double now = lssar_now();
    int last = p->total > 0 && done >= p->total;
    if (!last && now - p->last < p->interval) return 0;
    p->last = now;
    double el = now - p->t0, rate = el > 0 ? done / el : 0;
    char eta[32], elapsed[32];
    fmt_duration(eta, sizeof eta, rate > 0 && p->total > 0 ? (p->total - done) / rate : -1);
    fmt_duration(elapsed, sizeof elapsed, el);
    if (p->total > 0)
        fprintf(stderr, "%s %.0f/%.0f (%.1f%%) | %.3g %s/s | elapsed %s | ETA %s%s%s\n", p->label,
                done, p->total, 100.0 * done / p->total, rate, p->unit, elapsed, eta,
                extra ? " | " : "", extra ? extra : "");
    else
        fprintf(stderr, "%s %.0f | %.3g %s/s | elapsed %s%s%s\n", p->label, done, rate, p->unit,
                elapsed, extra ? " | " : "", extra ? extra : "");
    fflush(stderr);
    return 1;
}
