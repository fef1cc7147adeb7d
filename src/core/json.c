// json.c - atomic JSON files; see json.h.
#include <math.h>
#include <stdlib.h>
#include "core/json.h"
#include "core/util.h"

int lssar_write_json(const char *path, const cJSON *root) {
    char *text = cJSON_Print(root);
    if (!text) return lssar_fail(LSSAR_E_NOMEM, "out of memory printing JSON for %s", path);
    lssar_afile af;
    int rc = lssar_afile_open(&af, path);
    if (!rc) {
        if (fputs(text, af.f) < 0 || fputc('\n', af.f) == EOF) {
            lssar_afile_abort(&af);
            rc = lssar_fail(LSSAR_E_IO, "writing %s failed (disk full?)", path);
        } else {
            rc = lssar_afile_commit(&af);
        }
    }
    free(text);
    return rc;
}

cJSON *lssar_read_json(const char *path) {
    size_t n = 0;
    char *text = NULL;
    if (lssar_read_file(path, &text, &n)) return NULL;
    cJSON *j = cJSON_ParseWithLength(text, n);
    free(text);
    return j;
}

cJSON *lssar_json_number(double v) { return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }
