/*
 * util.h - small internal helpers shared by every module: error reporting, timing, a seeded RNG,
 * progress lines and atomic file writes. Internal: not part of the public API in include/lssar.h.
 */
#ifndef LSSAR_UTIL_H
#define LSSAR_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stddef.h>
#include "lssar.h"

/* Record a failure for lssar_errmsg() and return code, so callers write
   `return lssar_fail(LSSAR_E_IO, "cannot open %s: %s", path, strerror(errno));` */
int lssar_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Monotonic wall-clock seconds. */
double lssar_now(void);

/* ---- RNG: xoshiro256** seeded through splitmix64. Deterministic across platforms; the whole
   state is four words so a checkpoint can save and restore it exactly. */
typedef struct { uint64_t s[4]; } lssar_rng;
void lssar_rng_seed(lssar_rng *r, uint64_t seed);
uint64_t lssar_rng_u64(lssar_rng *r);
double lssar_rng_uniform(lssar_rng *r);            /* [0, 1), 53 bits */
uint64_t lssar_rng_below(lssar_rng *r, uint64_t n); /* [0, n), unbiased */
double lssar_rng_normal(lssar_rng *r);             /* N(0, 1), Box-Muller, no cached pair */
/* An independent stream for item `index` of a run seeded with `seed` (e.g. one per system or
   thread), so results do not depend on the thread count. */
void lssar_rng_stream(lssar_rng *r, uint64_t seed, uint64_t index);

/* ---- Progress lines on stderr: "label  done/total  rate unit/s  ETA m:ss  extra".
   Prints at most every `interval` seconds (and always on the last item); quiet if stderr is not
   a terminal and LSSAR_PROGRESS is unset? No: always prints, one line per update, so logs show it. */
typedef struct {
    const char *label, *unit;
    double total, t0, last;
    double interval;
} lssar_progress;
void lssar_progress_start(lssar_progress *p, const char *label, const char *unit, double total);
/* extra may be NULL. Returns 1 if it printed. */
int lssar_progress_update(lssar_progress *p, double done, const char *extra);

/* ---- Atomic files: write to PATH.tmp.PID, fsync, rename over PATH, fsync the directory.
   A reader never sees a half-written file; a killed writer leaves the old file intact. */
typedef struct { FILE *f; char *path; char *tmp; } lssar_afile;
int lssar_afile_open(lssar_afile *a, const char *path);   /* then write to a->f */
int lssar_afile_commit(lssar_afile *a);                    /* fsync + rename; closes */
void lssar_afile_abort(lssar_afile *a);                    /* remove the temporary file */
/* fsync the directory that holds path (after a rename in it); 0 also where directories cannot
   be synced. */
int lssar_fsync_dir_of(const char *path);
/* What to do about a failed write with errno err: "no space left: the disk is full; ..." for
   ENOSPC, the file size limit for EFBIG (writers name the file, strerror(err) and this). */
const char *lssar_io_hint(int err);
/* Test seam: where a checkpoint write can be caught half done. lssar_afile_commit calls it between
   writing the temporary file and renaming it, the trainer between the two renames of a checkpoint
   pair. NULL (no call) in the library and the program; the test build of the program sets it
   (tests/hooks.c), so that a test's kill -9 lands inside a write. */
extern void (*lssar_save_pause)(void);
/* Create a directory and its parents (mkdir -p). */
int lssar_mkdirs(const char *path);
/* The folder above the one this code was loaded from (liblssar.so or the program linked with it):
   PREFIX of an installed lssar (PREFIX/lib, PREFIX/bin), the clone of a build (build/). 0 if
   unknown. Data installed beside the library lives under it (share/lssar). */
int lssar_prefix_dir(char *buf, size_t n);
/* Read a whole file into a malloc'd buffer (NUL-terminated for convenience). */
int lssar_read_file(const char *path, char **data, size_t *len);

#endif
