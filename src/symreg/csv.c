// csv.c - a strict numeric CSV reader for symbolic regression: one header row of names, then one
// number per column on every row. Any deviation is an error naming the file, line and column.
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "symreg/sr.h"

// Split line (modified in place) on commas; fields trimmed of spaces and surrounding quotes.
static int split(char *line, char **f, int max) {
    int n = 0;
    char *p = line;
    for (;;) {
        char *e = strchr(p, ',');
        if (e) *e = 0;
        while (*p == ' ' || *p == '\t') p++;
        char *q = p + strlen(p);
        while (q > p && (q[-1] == ' ' || q[-1] == '\t')) *--q = 0;
        if (q - p >= 2 && *p == '"' && q[-1] == '"') { q[-1] = 0; p++; }
        if (n < max) f[n] = p;
        n++;
        if (!e) break;
        p = e + 1;
    }
    return n;
}

void sr_csv_free(sr_csv *c) {
    if (!c) return;
    if (c->names) for (int j = 0; j < c->cols; j++) free(c->names[j]);
    free(c->names);
    free(c->data);
    memset(c, 0, sizeof *c);
}

int sr_csv_read(const char *path, sr_csv *out) {
    memset(out, 0, sizeof *out);
    char *text = NULL;
    size_t len = 0;
    int rc = lssar_read_file(path, &text, &len);
    if (rc) return rc;
    // Lines: split on \n, drop \r, skip blank lines.
    char **lines = NULL;
    int nl = 0, cap = 0, lineno_base = 0;
    int *lineno = NULL;
    char *p = text;
    int ln = 0;
    while (p && *p) {
        char *e = strchr(p, '\n');
        if (e) *e = 0;
        ln++;
        size_t l = strlen(p);
        if (l && p[l - 1] == '\r') p[--l] = 0;
        int blank = 1;
        for (char *q = p; *q; q++) if (*q != ' ' && *q != '\t') { blank = 0; break; }
        if (!blank) {
            if (nl == cap) {
                cap = cap ? 2 * cap : 1024;
                char **nlines = realloc(lines, cap * sizeof(char *));
                int *nno = realloc(lineno, cap * sizeof(int));
                if (!nlines || !nno) {
                    free(nlines ? nlines : lines);
                    free(nno ? nno : lineno);
                    free(text);
                    return lssar_fail(LSSAR_E_NOMEM, "out of memory reading %s", path);
                }
                lines = nlines; lineno = nno;
            }
            lines[nl] = p; lineno[nl] = ln; nl++;
        }
        p = e ? e + 1 : NULL;
    }
    (void)lineno_base;
    if (nl == 0) {
        free(text);
        free(lines);
        free(lineno);
        return lssar_fail(LSSAR_E_FORMAT, "%s is empty: expected a header row of column names, then "
                          "rows of numbers", path);
    }
    enum { MAXCOL = 4096 };
    char **f = malloc(MAXCOL * sizeof(char *));
    if (!f) { free(text); free(lines); free(lineno); return lssar_fail(LSSAR_E_NOMEM, "out of memory"); }
    int cols = split(lines[0], f, MAXCOL);
    if (cols > MAXCOL) {
        rc = lssar_fail(LSSAR_E_FORMAT, "%s: %d columns, at most %d supported", path, cols, MAXCOL);
        goto fail;
    }
    out->cols = cols;
    out->names = calloc(cols, sizeof(char *));
    if (!out->names) { rc = lssar_fail(LSSAR_E_NOMEM, "out of memory"); goto fail; }
    for (int j = 0; j < cols; j++) {
        char *end;
        if (!*f[j]) {
            rc = lssar_fail(LSSAR_E_FORMAT, "%s line %d: column %d has an empty name; the first row must "
                            "name every column", path, lineno[0], j + 1);
            goto fail;
        }
        strtod(f[j], &end);
        if (*end == 0) {
            rc = lssar_fail(LSSAR_E_FORMAT, "%s line %d: the first row must be a header of column names, "
                            "found the number '%s'", path, lineno[0], f[j]);
            goto fail;
        }
        out->names[j] = strdup(f[j]);
        if (!out->names[j]) { rc = lssar_fail(LSSAR_E_NOMEM, "out of memory"); goto fail; }
    }
    int rows = nl - 1;
    if (rows == 0) { rc = lssar_fail(LSSAR_E_FORMAT, "%s has a header but no data rows", path); goto fail; }
    out->rows = rows;
    out->data = malloc(sizeof(double) * (size_t)rows * cols);
    if (!out->data) {
        rc = lssar_fail(LSSAR_E_NOMEM, "out of memory for %d x %d values", rows, cols);
        goto fail;
    }
    for (int i = 0; i < rows; i++) {
        int n = split(lines[i + 1], f, MAXCOL);
        if (n != cols) {
            rc = lssar_fail(LSSAR_E_FORMAT, "%s line %d has %d fields but the header has %d columns: every "
                            "row needs one value per column", path, lineno[i + 1], n, cols);
            goto fail;
        }
        for (int j = 0; j < cols; j++) {
            char *end;
            errno = 0;
            double v = strtod(f[j], &end);
            if (!*f[j] || *end || !isfinite(v)) {
                rc = lssar_fail(LSSAR_E_FORMAT, "%s line %d, column '%s': '%s' is not a finite number", path,
                                lineno[i + 1], out->names[j], f[j]);
                goto fail;
            }
            out->data[(size_t)j * rows + i] = v;
        }
    }
    free(f); free(text); free(lines); free(lineno);
    return 0;
fail:
    free(f); free(text); free(lines); free(lineno);
    sr_csv_free(out);
    return rc;
}

int sr_csv_column(const sr_csv *c, const char *name) {
    for (int j = 0; j < c->cols; j++) if (!strcmp(c->names[j], name)) return j;
    char list[512] = "";
    size_t n = 0;
    for (int j = 0; j < c->cols && n < sizeof list - 40; j++)
        n += snprintf(list + n, sizeof list - n, "%s%s", j ? ", " : "", c->names[j]);
    lssar_fail(LSSAR_E_ARG, "column '%s' is not in the CSV; its columns are: %s", name, list);
    return -1;
}
