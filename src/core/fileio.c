// fileio.c - atomic file replacement, mkdir -p and whole-file reads.
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <limits.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "util.h"

const char *lssar_io_hint(int err) {
    switch (err) {
    case ENOSPC:
#ifdef EDQUOT
    case EDQUOT:
#endif
        return "the disk is full: free space on it, or write to another disk";
    case EFBIG:
        return "the file size limit was reached (ulimit -f, or the file system's largest file); raise it, "
               "or write elsewhere";
    case EROFS: return "the file system is read-only";
    case EIO: return "an I/O error: the disk may be failing";
    default: return "disk full?";
    }
}

void (*lssar_save_pause)(void);

int lssar_afile_open(lssar_afile *a, const char *path) {
    a->f = NULL; a->path = a->tmp = NULL;
    if (!path || !*path) return lssar_fail(LSSAR_E_ARG, "empty output path");
    size_t n = strlen(path) + 32;
    a->path = strdup(path);
    a->tmp = malloc(n);
    if (!a->path || !a->tmp) {
        free(a->path);
        free(a->tmp);
        return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    }
    snprintf(a->tmp, n, "%s.tmp.%ld", path, (long)getpid());
    a->f = fopen(a->tmp, "wb");
    if (!a->f) {
        int e = errno;
        free(a->path); free(a->tmp); a->path = a->tmp = NULL;
        return lssar_fail(LSSAR_E_IO, "cannot create %s.tmp: %s (does the directory exist and "
                          "is it writable?)", path, strerror(e));
    }
    return 0;
}

void lssar_afile_abort(lssar_afile *a) {
    if (a->f) fclose(a->f);
    if (a->tmp) unlink(a->tmp);
    free(a->path); free(a->tmp);
    a->f = NULL; a->path = a->tmp = NULL;
}

int lssar_afile_commit(lssar_afile *a) {
    int rc = 0, e = 0;
    // errno is read right after the call that failed (a failed fwrite earlier leaves ferror set,
    // and fflush reports the error again for the bytes still buffered)
    if (fflush(a->f) != 0) e = errno ? errno : EIO;
    else if (ferror(a->f)) e = EIO;
    else if (fsync(fileno(a->f)) != 0) e = errno;
    if (e) rc = lssar_fail(LSSAR_E_IO, "writing %s failed: %s (%s)", a->path, strerror(e), lssar_io_hint(e));
    if (fclose(a->f) != 0 && rc == 0) {
        e = errno;
        rc = lssar_fail(LSSAR_E_IO, "closing %s failed: %s (%s)", a->path, strerror(e), lssar_io_hint(e));
    }
    a->f = NULL;
    if (rc == 0 && lssar_save_pause) lssar_save_pause();   // tests: a kill lands before the rename
    if (rc == 0 && rename(a->tmp, a->path) != 0) {
        e = errno;
        rc = lssar_fail(LSSAR_E_IO, "renaming %s to %s failed: %s", a->tmp, a->path, strerror(e));
    }
    if (rc != 0) unlink(a->tmp);
    else rc = lssar_fsync_dir_of(a->path);   // make the rename itself durable
    free(a->path); free(a->tmp);
    a->path = a->tmp = NULL;
    return rc;
}

int lssar_fsync_dir_of(const char *path) {
    char *d = strdup(path);
    if (!d) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    int rc = 0, fd = open(dirname(d), O_RDONLY | O_CLOEXEC);
    // a directory that cannot be opened or fsynced on this file system (EINVAL, ENOTSUP) is no
    // error; a real I/O error is
    if (fd >= 0) {
        if (fsync(fd) != 0 && errno == EIO)
            rc = lssar_fail(LSSAR_E_IO, "syncing the directory of %s failed: %s (%s)", path, strerror(EIO),
                            lssar_io_hint(EIO));
        close(fd);
    }
    free(d);
    return rc;
}

int lssar_mkdirs(const char *path) {
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf) return lssar_fail(LSSAR_E_ARG, "bad directory path '%s'", path);
    memcpy(buf, path, n + 1);
    for (char *p = buf + 1; ; p++) {
        if (*p == '/' || *p == 0) {
            char c = *p;
            *p = 0;
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return lssar_fail(LSSAR_E_IO, "cannot create directory %s: %s", buf, strerror(errno));
            *p = c;
            if (!c) break;
        }
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return lssar_fail(LSSAR_E_IO, "%s exists and is not a directory", path);
    return 0;
}

int lssar_read_file(const char *path, char **data, size_t *len) {
    *data = NULL; *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return lssar_fail(LSSAR_E_IO, "cannot open %s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf) { fclose(f); return lssar_fail(LSSAR_E_NOMEM, "out of memory reading %s", path); }
    for (;;) {
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (n < cap) break;
        char *nb = realloc(buf, 2 * cap + 1);
        if (!nb) { free(buf); fclose(f); return lssar_fail(LSSAR_E_NOMEM, "out of memory reading %s", path); }
        buf = nb; cap *= 2;
    }
    int err = ferror(f);
    fclose(f);
    if (err) { free(buf); return lssar_fail(LSSAR_E_IO, "error reading %s", path); }
    buf[n] = 0;
    *data = buf; *len = n;
    return 0;
}

int lssar_prefix_dir(char *buf, size_t n) {
    Dl_info info;
    char path[PATH_MAX];
    if (!dladdr((void *)lssar_prefix_dir, &info) || !info.dli_fname || !realpath(info.dli_fname, path))
        return 0;
    for (int up = 0; up < 2; up++) {   // the file, then its folder
        char *slash = strrchr(path, '/');
        if (!slash) return 0;
        *slash = 0;
    }
    return path[0] && snprintf(buf, n, "%s", path) < (int)n;
}
