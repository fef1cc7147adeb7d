// corpus_austen.c - Jane Austen's novels from the R package janeaustenr, read without R.
//
// data/Rdata.rdb is a sequence of records [uint32 big-endian inflated length][zlib stream]; each
// record is one R object in R's binary serialisation ("X\n" format, version 2 or 3): here a
// character vector (STRSXP) with one string (CHARSXP) per line of the Gutenberg text, "" between
// paragraphs. One record = one novel. Gutenberg marks italics as _word_; the underscores go.
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "corpus.h"
#include "../core/util.h"

static uint32_t be32(const unsigned char *p) { return (uint32_t)p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3]; }

/* Inflate the zlib stream at src (at most n bytes) into a buffer of want bytes; *used = bytes of
   src consumed, so the next record follows. */
static int inflate_record(const unsigned char *src, size_t n, size_t want, unsigned char **dst,
                          size_t *used) {
    unsigned char *out = malloc(want + 1);
    if (!out) return lssar_fail(LSSAR_E_NOMEM, "out of memory (%zu bytes) inflating an R record", want);
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit(&z) != Z_OK) { free(out); return lssar_fail(LSSAR_E_NOMEM, "zlib inflateInit failed"); }
    z.next_in = (Bytef *)src; z.avail_in = (uInt)n;
    z.next_out = out; z.avail_out = (uInt)want;
    int zr = inflate(&z, Z_FINISH);
    size_t got = z.total_out;
    *used = z.total_in;
    inflateEnd(&z);
    if (zr != Z_STREAM_END || got != want) { free(out); return LSSAR_E_FORMAT; }
    *dst = out;
    return 0;
}

/* Parse one serialised character vector; append its lines, joined by '\n', to b. */
static int r_strings(const unsigned char *p, size_t n, corpus_buf *b) {
    size_t i = 0;
#define NEED(k) do { if (i + (k) > n) return LSSAR_E_FORMAT; } while (0)
    NEED(2);
    if (p[0] != 'X' || p[1] != '\n') return LSSAR_E_FORMAT;   // only the big-endian binary format
    i = 2;
    NEED(12);
    uint32_t version = be32(p + i);
    i += 12;                                                    // version, writer and minimal R versions
    if (version == 3) { NEED(4); uint32_t ne = be32(p + i); i += 4; NEED(ne); i += ne; }  // native encoding
    else if (version != 2) return LSSAR_E_FORMAT;
    NEED(8);
    uint32_t flags = be32(p + i);
    if ((flags & 0xff) != 16) return LSSAR_E_FORMAT;            // STRSXP
    int64_t count = (int32_t)be32(p + i + 4);
    i += 8;
    // long vector
    if (count == -1) { NEED(8); count = (int64_t)be32(p + i) << 32 | be32(p + i + 4); i += 8; }
    for (int64_t k = 0; k < count; k++) {
        NEED(8);
        if ((be32(p + i) & 0xff) != 9) return LSSAR_E_FORMAT;  // CHARSXP
        int32_t len = (int32_t)be32(p + i + 4);
        i += 8;
        if (len == -1) continue;                                // NA_character_
        if (len < 0) return LSSAR_E_FORMAT;
        NEED((size_t)len);
        for (int32_t c = 0; c < len; c++)
            if (p[i + c] != '_' && corpus_buf_addc(b, (char)p[i + c])) return LSSAR_E_NOMEM;
        if (corpus_buf_addc(b, '\n')) return LSSAR_E_NOMEM;
        i += len;
    }
#undef NEED
    return 0;
}

// "PRIDE AND PREJUDICE" -> "Pride_and_Prejudice" (a file-name-like document name)
static void title_name(const char *t, size_t n, char *out, size_t on) {
    size_t w = 0;
    int word_start = 1;
    for (size_t i = 0; i < n && w + 1 < on; i++) {
        char c = t[i];
        if (c == ' ') { out[w++] = '_'; word_start = 1; continue; }
        if (c >= 'A' && c <= 'Z' && !word_start) c = (char)(c - 'A' + 'a');
        out[w++] = c;
        word_start = 0;
    }
    out[w] = 0;
    if (!strcmp(out, "Pride_And_Prejudice")) snprintf(out, on, "Pride_and_Prejudice");
    if (!strcmp(out, "Sense_And_Sensibility")) snprintf(out, on, "Sense_and_Sensibility");
}

int corpus_load_austen(const char *dir, corpus_docs *out) {
    char path[4096], *raw; size_t len;
    int rc = corpus_read_raw("austen", dir, "root/usr/lib/R/site-library/janeaustenr/data/Rdata.rdb", path,
                             sizeof path, &raw, &len);
    if (rc) return rc;
    const unsigned char *p = (const unsigned char *)raw;
    int nrec = 0;
    for (size_t off = 0; off < len && !rc; nrec++) {
        if (off + 4 > len) { rc = LSSAR_E_FORMAT; break; }
        size_t want = be32(p + off), used = 0;
        unsigned char *rec = NULL;
        if ((rc = inflate_record(p + off + 4, len - off - 4, want, &rec, &used))) break;
        off += 4 + used;
        corpus_buf b = {0};
        rc = r_strings(rec, want, &b);
        free(rec);
        if (rc) { free(b.p); break; }
        size_t tl;
        char *text = corpus_buf_take(&b, &tl);
        if (!text) { rc = LSSAR_E_NOMEM; break; }
        tl = corpus_clean(text, tl, 1);   // Gutenberg hard-wraps at ~70 columns
        char name[128] = "austen/", tn[96];
        const char *nlp = memchr(text, '\n', tl);
        title_name(text, nlp ? (size_t)(nlp - text) : tl, tn, sizeof tn);
        strncat(name, tn, sizeof name - strlen(name) - 1);
        if (tl) rc = corpus_docs_add(out, name, NULL, text, tl); else free(text);
    }
    free(raw);
    if (rc == LSSAR_E_FORMAT)
        return lssar_fail(rc, "corpus 'austen': record %d of %s is not a zlib-compressed R character vector: "
                          "damaged or a different package version; delete %s and run "
                          "scripts/fetch-corpora.sh austen", nrec, path, dir);
    if (!rc && nrec == 0) return lssar_fail(LSSAR_E_FORMAT, "corpus 'austen': %s holds no records", path);
    return rc;
}
