// run_log.c - the run's log.jsonl: one JSON object per step, trimmed on resume; see rundir.h.
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cJSON.h>
#include "core/util.h"
#include "rundir.h"

// Flushed, so a killed run keeps its log. A failed write (disk full) is an error: the run stops
// before its next checkpoint would fail the same way.
int train_log_line(FILE *f, const char *path, cJSON *o) {
    int rc = 0;
    if (f) {
        char *s = cJSON_PrintUnformatted(o);
        if (!s) rc = lssar_fail(LSSAR_E_NOMEM, "out of memory writing %s", path);
        else {
            errno = 0;
            if (fprintf(f, "%s\n", s) < 0 || fflush(f) != 0) {
                int e = errno ? errno : EIO;
                rc = lssar_fail(LSSAR_E_IO, "writing %s failed: %s (%s)", path, strerror(e),
                                lssar_io_hint(e));
            }
            free(s);
        }
    }
    cJSON_Delete(o);
    return rc;
}

// The lines of steps after the checkpoint were written before a kill and will be written again,
// and a last line may be cut short: dropping them makes the log read as one uninterrupted run.
int train_log_trim(const char *path, int64_t step) {
    char *d;
    size_t n;
    struct stat st;
    if (stat(path, &st) != 0 || lssar_read_file(path, &d, &n)) return 0;   // no log: nothing to trim
    size_t keep = 0, at = 0;
    int drop = 0;
    while (at < n) {
        char *nl = memchr(d + at, '\n', n - at);
        if (!nl) { drop = 1; break; }   // cut short by a kill
        *nl = 0;
        cJSON *j = cJSON_Parse(d + at);
        const cJSON *js = j ? cJSON_GetObjectItemCaseSensitive(j, "step") : NULL;
        int ok = cJSON_IsNumber(js) && js->valuedouble <= (double)step;
        cJSON_Delete(j);
        *nl = '\n';
        size_t len = (size_t)(nl - (d + at)) + 1;
        if (ok) { if (keep != at) memmove(d + keep, d + at, len); keep += len; }
        else drop = 1;
        at += len;
    }
    int rc = 0;
    if (drop) {
        lssar_afile a;
        rc = lssar_afile_open(&a, path);
        if (!rc) {
            if (keep && fwrite(d, 1, keep, a.f) != keep) {
                int e = errno;
                lssar_afile_abort(&a);
                rc = lssar_fail(LSSAR_E_IO, "writing %s failed: %s (%s)", path, strerror(e),
                                lssar_io_hint(e));
            } else rc = lssar_afile_commit(&a);
        }
    }
    free(d);
    return rc;
}
