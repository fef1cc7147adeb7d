// argv.c - command lines built argument by argument; see argv.h.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/argv.h"

void args_add(args_vec *a, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!buf) return;
    va_start(ap, fmt);
    vsnprintf(buf, (size_t)n + 1, fmt, ap);
    va_end(ap);
    if (a->n < ARGS_VEC_MAX) a->v[a->n++] = buf;
    else free(buf);
    a->v[a->n] = NULL;
}

char *args_line(const args_vec *a, const char *prefix) {
    size_t len = strlen(prefix) + 1;
    for (int i = 0; i < a->n; i++) len += 4 * strlen(a->v[i]) + 3;   // worst case: every byte a quote
    char *line = malloc(len), *w = line;
    if (!line) return NULL;
    w += sprintf(w, "%s", prefix);
    for (int i = 0; i < a->n; i++) {
        const char *v = a->v[i];
        if (w > line) *w++ = ' ';
        // quote what a shell would split or expand (shard lists are plain; a path may hold a space);
        // inside single quotes only ' itself needs care: end the quote, an escaped ', reopen
        int q = !v[0] || strpbrk(v, " \t\n*?[]{}~#!$`\\'\"&;|<>()") != NULL;
        if (q) *w++ = '\'';
        for (; *v; v++)
            if (*v == '\'' && q) { memcpy(w, "'\\''", 4); w += 4; }
            else *w++ = *v;
        if (q) *w++ = '\'';
    }
    *w = 0;
    return line;
}

void args_clear(args_vec *a) {
    for (int i = 0; i < a->n; i++) free(a->v[i]);
    a->n = 0;
    a->v[0] = NULL;
}
