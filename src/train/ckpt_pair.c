// ckpt_pair.c - the crash-safe checkpoint: two files that move into place together; see rundir.h.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE   // O_CLOEXEC
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "core/util.h"
#include "rundir.h"

// A checkpoint is two files that must be at the same step. Each is written atomically (temporary
// file, fsync, rename), but a kill between the two renames would leave them at different steps.
// So both are first written into DIR/.ckpt-next/, then DIR/.ckpt-next/COMPLETE marks the pair
// whole, then they are renamed into DIR and COMPLETE removed. train_recover (under the lock, before
// a run reads DIR) finishes a move that a kill interrupted, and discards an unmarked pair.
#define NEXT_DIR ".ckpt-next"
#define NEXT_MARK "COMPLETE"
static const char *const CKPT_FILES[2] = {CKPT_MODEL_FILE, CKPT_TRAINER_FILE};

static int file_exists(const char *path) { struct stat st; return stat(path, &st) == 0; }

static int move_into_place(const char *out, const char *nd) {
    char a[4400], b[4400];
    for (int k = 0; k < 2; k++) {
        snprintf(a, sizeof a, "%s/%s", nd, CKPT_FILES[k]);
        snprintf(b, sizeof b, "%s/%s", out, CKPT_FILES[k]);
        if (!file_exists(a)) continue;   // recovery: moved before the kill
        if (k && lssar_save_pause) lssar_save_pause();   // tests: a kill lands between the two renames
        if (rename(a, b) != 0)
            return lssar_fail(LSSAR_E_IO, "renaming %s to %s failed: %s", a, b, strerror(errno));
    }
    return lssar_fsync_dir_of(b);
}

// Remove what killed writers left: temporary files of the checkpoint and log in DIR (out; NULL:
// skip), and every file of an unmarked DIR/.ckpt-next (an interrupted write of a pair).
static void remove_leftovers(const char *out, const char *nd) {
    const char *dirs[2] = {out, nd};
    for (int d = 0; d < 2; d++) {
        DIR *dp = dirs[d] ? opendir(dirs[d]) : NULL;
        if (!dp) continue;
        struct dirent *e;
        char p[4400];
        while ((e = readdir(dp))) {
            const char *n = e->d_name;
            int ours = !strncmp(n, CKPT_MODEL_FILE ".tmp.", strlen(CKPT_MODEL_FILE) + 5) ||
                       !strncmp(n, CKPT_TRAINER_FILE ".tmp.", strlen(CKPT_TRAINER_FILE) + 5) ||
                       !strncmp(n, "log.jsonl.tmp.", 14);
            if (d == 1) ours = strcmp(n, ".") && strcmp(n, "..");
            if (!ours) continue;
            snprintf(p, sizeof p, "%s/%s", dirs[d], n);
            unlink(p);
        }
        closedir(dp);
    }
    rmdir(nd);
}

int train_recover(const char *out, int quiet) {
    char nd[4200], mark[4300];
    snprintf(nd, sizeof nd, "%s/" NEXT_DIR, out);
    snprintf(mark, sizeof mark, "%s/" NEXT_MARK, nd);
    if (file_exists(mark)) {
        int rc = move_into_place(out, nd);
        if (rc) return rc;
        if (unlink(mark) != 0) return lssar_fail(LSSAR_E_IO, "cannot remove %s: %s", mark, strerror(errno));
        if (!quiet)
            fprintf(stderr, "lssar train: %s: completed the checkpoint that a stopped run was moving into "
                    "place\n", out);
    }
    remove_leftovers(out, nd);
    return 0;
}

int train_ckpt_save(const char *out, const gpt *m, const train_state *s) {
    char nd[4200], mark[4300];
    snprintf(nd, sizeof nd, "%s/" NEXT_DIR, out);
    snprintf(mark, sizeof mark, "%s/" NEXT_MARK, nd);
    if (unlink(mark) == 0) lssar_fsync_dir_of(mark);   // never left by a finished save; be safe
    int rc = ckpt_save(nd, m, s);                    // mkdir + both files, each fsynced
    if (!rc) {   // an empty mark; the directory's fsync makes it and the pair's renames durable
        int fd = open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
        if (fd < 0 || close(fd) != 0) {
            int e = errno;
            rc = lssar_fail(LSSAR_E_IO, "cannot create %s: %s (%s)", mark, strerror(e), lssar_io_hint(e));
        } else rc = lssar_fsync_dir_of(mark);   // from here on the pair is the checkpoint
    }
    if (rc) {   // an unmarked pair is no checkpoint: free its space (a full disk) and keep DIR's
        remove_leftovers(NULL, nd);
        return rc;
    }
    if ((rc = move_into_place(out, nd))) return rc;
    if (unlink(mark) != 0) return lssar_fail(LSSAR_E_IO, "cannot remove %s: %s", mark, strerror(errno));
    rmdir(nd);
    return 0;
}
