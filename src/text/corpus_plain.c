// corpus_plain.c - corpora stored as one plain file per document: State of the Union speeches,
// Brown corpus samples (word/TAG form, detokenised here) and the user's own files.
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "corpus.h"
#include "../core/util.h"

/* ---- sorted directory listings */
typedef struct { char **v; int n, cap; } strlist;

static int strlist_add(strlist *l, const char *s) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        char **v = realloc(l->v, cap * sizeof *v);
        if (!v) return lssar_fail(LSSAR_E_NOMEM, "out of memory listing files");
        l->v = v; l->cap = cap;
    }
    if (!(l->v[l->n] = strdup(s))) return lssar_fail(LSSAR_E_NOMEM, "out of memory listing files");
    l->n++;
    return 0;
}
static void strlist_free(strlist *l) { for (int i = 0; i < l->n; i++) free(l->v[i]); free(l->v); memset(l, 0, sizeof *l); }
static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Regular files under dir (relative paths, sorted bytewise so every machine agrees); recursive
   descends into sub-folders; names starting with '.' are skipped. */
static int list_files(const char *root, const char *rel, int recursive, strlist *out) {
    char path[4096];
    corpus_path(path, sizeof path, "%s%s%s", root, *rel ? "/" : "", rel);
    DIR *d = opendir(path);
    if (!d) return lssar_fail(LSSAR_E_IO, "cannot read folder %s: %s", path, strerror(errno));
    strlist names = {0};
    struct dirent *e;
    int rc = 0;
    while (!rc && (e = readdir(d))) if (e->d_name[0] != '.') rc = strlist_add(&names, e->d_name);
    closedir(d);
    if (rc) { strlist_free(&names); return rc; }
    qsort(names.v, names.n, sizeof *names.v, cmp_str);
    for (int i = 0; i < names.n && !rc; i++) {
        char sub[4096], full[4096];
        corpus_path(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", names.v[i]);
        corpus_path(full, sizeof full, "%s/%s", root, sub);
        struct stat st;
        if (stat(full, &st) != 0) continue;  // dangling link
        if (S_ISDIR(st.st_mode)) { if (recursive) rc = list_files(root, sub, 1, out); }
        else if (S_ISREG(st.st_mode)) rc = strlist_add(out, sub);
    }
    strlist_free(&names);
    return rc;
}

static int missing_dir(const char *corpus, const char *path) {
    return lssar_fail(LSSAR_E_IO, "corpus '%s': %s is missing or unreadable; fetch it with scripts/fetch-corpora.sh %s", corpus, path, corpus);
}

/* ---- State of the Union: data/YYYY_first_last_party.txt, one address per file, no header. */
int corpus_load_sotu(const char *dir, corpus_docs *out) {
    char data[4096];
    corpus_path(data, sizeof data, "%s/package/data", dir);
    strlist files = {0};
    if (list_files(data, "", 0, &files)) { strlist_free(&files); return missing_dir("sotu", data); }
    int rc = 0, n0 = out->n;
    for (int i = 0; i < files.n && !rc; i++) {
        size_t L = strlen(files.v[i]);
        if (L < 5 || strcmp(files.v[i] + L - 4, ".txt")) continue;  // the .json twins hold the same text
        char path[4096], name[4096];
        corpus_path(path, sizeof path, "%s/%s", data, files.v[i]);
        corpus_path(name, sizeof name, "sotu/%.*s", (int)(L - 4), files.v[i]);
        char *text; size_t len;
        if ((rc = lssar_read_file(path, &text, &len))) break;
        len = corpus_clean(text, len, 0);  // mostly one line per address; keep any paragraph breaks
        if (len) rc = corpus_docs_add(out, name, NULL, text, len); else free(text);
    }
    strlist_free(&files);
    if (!rc && out->n == n0) rc = lssar_fail(LSSAR_E_FORMAT, "corpus 'sotu': no speeches (*.txt) in %s; delete %s and run scripts/fetch-corpora.sh sotu", data, dir);
    return rc;
}

/* ---- Brown corpus: "word/tag" tokens; a line per sentence, a blank line between paragraphs.
   Undo the tokenisation: `` and '' become ", no space before closing punctuation, none after
   opening brackets and quotes, "--" joins its neighbours. */
static int no_space_before(const char *w) {
    static const char *closing[] = {",", ".", ";", ":", "?", "!", ")", "]", "}", "''", "'", "%", "--", NULL};
    for (int i = 0; closing[i]; i++) if (!strcmp(w, closing[i])) return 1;
    return 0;
}
static int no_space_after(const char *w) {
    return !strcmp(w, "``") || !strcmp(w, "(") || !strcmp(w, "[") || !strcmp(w, "{") || !strcmp(w, "$") || !strcmp(w, "--");
}

int corpus_brown_line(const char *line, size_t len, corpus_buf *b) {
    int ntok = 0, nhl = 0, glue = 1;  // glue: no space before the next word (line start, after `` etc.)
    char word[512];
    size_t i = 0;
    while (i < len) {
        while (i < len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\n' || line[i] == '\r')) i++;
        size_t s = i;
        while (i < len && line[i] != ' ' && line[i] != '\t' && line[i] != '\n' && line[i] != '\r') i++;
        if (i == s) break;
        size_t e = i, slash = e;  // the tag follows the last '/'
        for (size_t k = s; k < e; k++) if (line[k] == '/') slash = k;
        if (slash == e || slash == s) slash = e;  // no tag (or a bare "/"): keep the token as is
        else {
            const char *tag = line + slash + 1;
            size_t tl = e - slash - 1;
            if (tl >= 3 && !memcmp(tag + tl - 3, "-hl", 3)) nhl++;
        }
        size_t wl = slash - s;
        if (wl >= sizeof word) wl = sizeof word - 1;
        memcpy(word, line + s, wl);
        word[wl] = 0;
        ntok++;
        // Form C writes every ';' twice (";/. ;/."), and a sentence-final '.' after an abbreviation
        // ("Jr. .") is the tokeniser's: print each once.
        if (b->n && ((!strcmp(word, ";") && b->p[b->n - 1] == ';') || (!strcmp(word, ".") && b->p[b->n - 1] == '.'))) continue;
        const char *text = (!strcmp(word, "``") || !strcmp(word, "''")) ? "\"" : word;
        if (!glue && !no_space_before(word) && corpus_buf_addc(b, ' ')) return -1;
        if (corpus_buf_add(b, text, strlen(text))) return -1;
        glue = no_space_after(word);
    }
    return ntok > 0 && nhl == ntok;
}

static int is_brown_sample(const char *f) {  // ca01 .. cr09
    return strlen(f) == 4 && f[0] == 'c' && f[1] >= 'a' && f[1] <= 'r' && f[2] >= '0' && f[2] <= '9' && f[3] >= '0' && f[3] <= '9';
}

int corpus_load_brown(const char *dir, corpus_docs *out) {
    char data[4096];
    corpus_path(data, sizeof data, "%s/package", dir);
    strlist files = {0};
    if (list_files(data, "", 0, &files)) { strlist_free(&files); return missing_dir("brown", data); }
    int rc = 0, n0 = out->n;
    for (int f = 0; f < files.n && !rc; f++) {
        if (!is_brown_sample(files.v[f])) continue;
        char path[4096], name[64];
        corpus_path(path, sizeof path, "%s/%s", data, files.v[f]);
        corpus_path(name, sizeof name, "brown/%s", files.v[f]);
        char *raw; size_t len;
        if ((rc = lssar_read_file(path, &raw, &len))) break;
        corpus_buf b = {0};
        int prev_hl = 0;
        for (size_t s = 0; s < len && !rc;) {
            size_t e = s;
            while (e < len && raw[e] != '\n') e++;
            size_t k = s;
            while (k < e && (raw[k] == ' ' || raw[k] == '\t' || raw[k] == '\r')) k++;
            if (k == e) corpus_buf_break(&b, 2);               // blank line: paragraph break
            else {
                size_t mark = b.n;
                if (b.n && b.p[b.n - 1] != '\n') corpus_buf_addc(&b, ' ');  // next sentence
                int hl = corpus_brown_line(raw + s, e - s, &b);
                if (hl < 0) rc = LSSAR_E_NOMEM;
                else if (hl || prev_hl) {                      // a headline is its own paragraph
                    corpus_buf tail = {0};
                    corpus_buf_add(&tail, b.p + mark, b.n - mark);
                    b.n = mark;
                    corpus_buf_break(&b, 2);
                    size_t t0 = 0;
                    while (t0 < tail.n && tail.p[t0] == ' ') t0++;
                    corpus_buf_add(&b, tail.p + t0, tail.n - t0);
                    free(tail.p);
                }
                prev_hl = hl > 0;
            }
            s = e + 1;
        }
        free(raw);
        size_t tl;
        char *text = corpus_buf_take(&b, &tl);
        if (!text) rc = LSSAR_E_NOMEM;
        if (rc) { free(text); break; }
        tl = corpus_clean(text, tl, 0);
        if (tl) rc = corpus_docs_add(out, name, NULL, text, tl); else free(text);
    }
    strlist_free(&files);
    if (!rc && out->n == n0) rc = lssar_fail(LSSAR_E_FORMAT, "corpus 'brown': no samples (ca01..cr09) in %s; delete %s and run scripts/fetch-corpora.sh brown", data, dir);
    return rc;
}

/* ---- the user's own files */
int corpus_load_text(const char *path, corpus_docs *out) {
    struct stat st;
    if (!path || !*path) return lssar_fail(LSSAR_E_ARG, "--text needs a file or folder");
    if (stat(path, &st) != 0)
        return lssar_fail(LSSAR_E_IO, "--text %s: %s (give an existing file or folder of text files)", path, strerror(errno));
    strlist files = {0};
    int rc = 0, is_dir = S_ISDIR(st.st_mode);
    if (is_dir) rc = list_files(path, "", 1, &files);
    else if (S_ISREG(st.st_mode)) rc = strlist_add(&files, path);
    else rc = lssar_fail(LSSAR_E_ARG, "--text %s is neither a regular file nor a folder", path);
    int n0 = out->n, skipped = 0;
    for (int i = 0; i < files.n && !rc; i++) {
        char full[4096], name[4096];
        if (is_dir) corpus_path(full, sizeof full, "%s/%s", path, files.v[i]);
        else corpus_path(full, sizeof full, "%s", files.v[i]);
        const char *base = is_dir ? files.v[i] : (strrchr(path, '/') ? strrchr(path, '/') + 1 : path);
        corpus_path(name, sizeof name, "text/%s", base);
        char *text; size_t len;
        if ((rc = lssar_read_file(full, &text, &len))) break;
        if (memchr(text, 0, len)) {
            fprintf(stderr, "lssar data: skipping %s: it contains NUL bytes (binary, not text)\n", full);
            free(text); skipped++; continue;
        }
        len = corpus_clean(text, len, 0);  // unknown layout: keep the user's line breaks
        if (!len) { fprintf(stderr, "lssar data: skipping %s: empty after cleaning\n", full); free(text); skipped++; continue; }
        rc = corpus_docs_add(out, name, NULL, text, len);
    }
    strlist_free(&files);
    if (!rc && out->n == n0)
        rc = lssar_fail(LSSAR_E_ARG, "--text %s: empty input: no non-empty text files found%s", path,
                        skipped ? " (all were empty or binary)" : "");
    return rc;
}
