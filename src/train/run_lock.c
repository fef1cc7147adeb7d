// run_lock.c - the run directory's lock: one writer per --out; see rundir.h.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE   // flock, O_CLOEXEC
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>
#include "core/util.h"
#include "rundir.h"

// flock on DIR/.lock, held while a run writes DIR; the kernel drops it when the process dies, so a
// killed run never blocks its resume. Counted per process, so `lssar train` can take it before
// train_run (which takes it again).
typedef struct { char dir[4096]; int fd, refs; } dir_lock;
static dir_lock g_locks[8];

// The lock is held: name its holder (the pid it wrote) and the ways out.
static int held_by_other(int fd, const char *dir, const char *lp) {
    char b[32] = "";
    ssize_t n = pread(fd, b, sizeof b - 1, 0);
    long pid = n > 0 ? atol(b) : 0;
    close(fd);
    char who[64] = "another process", stop[64] = "";
    if (pid > 0) {
        snprintf(who, sizeof who, "process %ld", pid);
        snprintf(stop, sizeof stop, " or stop it (kill %ld)", pid);
    }
    return lssar_fail(LSSAR_E_IO, "%s is in use: %s (another `lssar train`?) holds its lock %s and is "
                      "writing checkpoints there. Two runs must not write one --out: wait for it to "
                      "finish%s, then --resume; or choose another --out", dir, who, lp, stop);
}

int train_dir_lock(const char *dir) {
    for (int i = 0; i < 8; i++)
        if (g_locks[i].refs > 0 && !strcmp(g_locks[i].dir, dir)) { g_locks[i].refs++; return 0; }
    int slot = -1;
    for (int i = 0; i < 8 && slot < 0; i++) if (g_locks[i].refs == 0) slot = i;
    if (slot < 0 || strlen(dir) >= sizeof g_locks[0].dir)
        return lssar_fail(LSSAR_E_ARG, "cannot lock %s: too many run directories open at once, or the path "
                          "is too long", dir);
    char lp[4200];
    snprintf(lp, sizeof lp, "%s/.lock", dir);
    int fd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) {
        int e = errno;
        return lssar_fail(LSSAR_E_IO, "cannot create the lock file %s: %s (%s)", lp, strerror(e),
                          e == ENOSPC || e == EFBIG ? lssar_io_hint(e) : "is the directory writable?");
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        if (e == EWOULDBLOCK) return held_by_other(fd, dir, lp);
        close(fd);
        return lssar_fail(LSSAR_E_IO, "cannot lock %s: %s", lp, strerror(e));
    }
    char b[32];
    int n = snprintf(b, sizeof b, "%ld\n", (long)getpid());
    // the pid is only for the message above: a failed write (disk full) does not matter
    if (ftruncate(fd, 0) == 0 && pwrite(fd, b, (size_t)n, 0) != n) {}
    snprintf(g_locks[slot].dir, sizeof g_locks[slot].dir, "%s", dir);
    g_locks[slot].fd = fd;
    g_locks[slot].refs = 1;
    return 0;
}

void train_dir_unlock(const char *dir) {
    for (int i = 0; i < 8; i++)
        if (g_locks[i].refs > 0 && !strcmp(g_locks[i].dir, dir)) {
            if (--g_locks[i].refs == 0) close(g_locks[i].fd);   // closing drops the flock
            return;
        }
}
