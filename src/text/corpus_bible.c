// corpus_bible.c - the two Bibles, one document per book, named by OSIS book id so the same book
// has the same split key in both ("bible/Gen").
//   kjv: kjv.txt, printed by Debian's `bible -f` program (fetch-corpora.sh runs it): one verse a
//        line, "Ge1:1 In the beginning ...". A chapter becomes one paragraph.
//   web: a SWORD zText module: *.bzv verse index -> *.bzs block index -> zlib blocks in *.bzz,
//        whose text is OSIS XML. Notes, editorial headings and introductions are dropped.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "corpus.h"
#include "../core/util.h"

/* ---- King James Bible */

// The bible program's book abbreviations, in canonical order, with their OSIS ids.
static const char *kjv_books[66][2] = {
    {"Ge", "Gen"}, {"Exo", "Exod"}, {"Lev", "Lev"}, {"Num", "Num"}, {"Deu", "Deut"}, {"Josh", "Josh"},
    {"Jdgs", "Judg"}, {"Ruth", "Ruth"}, {"1Sm", "1Sam"}, {"2Sm", "2Sam"}, {"1Ki", "1Kgs"}, {"2Ki", "2Kgs"},
    {"1Chr", "1Chr"}, {"2Chr", "2Chr"}, {"Ezra", "Ezra"}, {"Neh", "Neh"}, {"Est", "Esth"}, {"Job", "Job"},
    {"Psa", "Ps"}, {"Prv", "Prov"}, {"Eccl", "Eccl"}, {"SSol", "Song"}, {"Isa", "Isa"}, {"Jer", "Jer"},
    {"Lam", "Lam"}, {"Eze", "Ezek"}, {"Dan", "Dan"}, {"Hos", "Hos"}, {"Joel", "Joel"}, {"Amos", "Amos"},
    {"Obad", "Obad"}, {"Jonah", "Jonah"}, {"Mic", "Mic"}, {"Nahum", "Nah"}, {"Hab", "Hab"}, {"Zep", "Zeph"},
    {"Hag", "Hag"}, {"Zec", "Zech"}, {"Mal", "Mal"}, {"Mat", "Matt"}, {"Mark", "Mark"}, {"Luke", "Luke"},
    {"John", "John"}, {"Acts", "Acts"}, {"Rom", "Rom"}, {"1Cor", "1Cor"}, {"2Cor", "2Cor"}, {"Gal", "Gal"},
    {"Eph", "Eph"}, {"Phi", "Phil"}, {"Col", "Col"}, {"1Th", "1Thess"}, {"2Th", "2Thess"}, {"1Tim", "1Tim"},
    {"2Tim", "2Tim"}, {"Titus", "Titus"}, {"Phmn", "Phlm"}, {"Heb", "Heb"}, {"Jas", "Jas"}, {"1Pet", "1Pet"},
    {"2Pet", "2Pet"}, {"1Jn", "1John"}, {"2Jn", "2John"}, {"3Jn", "3John"}, {"Jude", "Jude"}, {"Rev", "Rev"}};

static const char *kjv_osis(const char *abbr, size_t n) {
    for (int i = 0; i < 66; i++)
        if (strlen(kjv_books[i][0]) == n && !memcmp(kjv_books[i][0], abbr, n)) return kjv_books[i][1];
    return NULL;
}

static int add_book(corpus_docs *out, const char *corpus, const char *osis, corpus_buf *b) {
    size_t len;
    char *text = corpus_buf_take(b, &len);
    if (!text) return LSSAR_E_NOMEM;
    len = corpus_clean(text, len, 0);
    if (!len) { free(text); return 0; }
    char name[128], key[128];
    corpus_path(name, sizeof name, "%s/%s", corpus, osis);
    // The Greek Daniel and Esther (WEB's DanGr, EsthGr) repeat most of Dan and Esth: same key, so
    // the split keeps them on one side.
    size_t kl = strlen(osis);
    if (kl > 2 && !strcmp(osis + kl - 2, "Gr")) kl -= 2;
    snprintf(key, sizeof key, "bible/%.*s", (int)kl, osis);
    return corpus_docs_add(out, name, key, text, len);
}

int corpus_load_kjv(const char *dir, corpus_docs *out) {
    char path[4096], *raw; size_t len;
    int rc = corpus_read_raw("kjv", dir, "kjv.txt", path, sizeof path, &raw, &len);
    if (rc) return rc;
    corpus_buf b = {0};
    const char *book = NULL;
    long chapter = -1, lineno = 0;
    int nbooks = 0;
    for (size_t s = 0; s < len && !rc;) {
        size_t e = s;
        while (e < len && raw[e] != '\n') e++;
        lineno++;
        if (e > s) {
            // "1Chr10:3 text": the reference runs to the first space; the book is what precedes
            // the chapter digits before the ':'.
            size_t sp = s;
            while (sp < e && raw[sp] != ' ') sp++;
            size_t colon = sp;
            while (colon > s && raw[colon] != ':') colon--;
            size_t c0 = colon;
            while (c0 > s + 1 && raw[c0 - 1] >= '0' && raw[c0 - 1] <= '9') c0--;
            const char *osis = colon > s ? kjv_osis(raw + s, c0 - s) : NULL;
            if (!osis) {
                rc = lssar_fail(LSSAR_E_FORMAT, "corpus 'kjv': %s line %ld does not start with a verse "
                                "reference like Ge1:1 (got '%.20s'); delete %s and run "
                                "scripts/fetch-corpora.sh kjv", path, lineno, raw + s, dir);
                break;
            }
            long ch = strtol(raw + c0, NULL, 10);
            if (osis != book) {
                if (book && (rc = add_book(out, "kjv", book, &b))) break;
                book = osis; chapter = -1; nbooks++;
            }
            if (ch != chapter) { corpus_buf_break(&b, 2); chapter = ch; }   // a chapter is a paragraph
            else corpus_buf_addc(&b, ' ');
            if (sp < e) corpus_buf_add(&b, raw + sp + 1, e - sp - 1);
        }
        s = e + 1;
    }
    if (!rc && book) rc = add_book(out, "kjv", book, &b);
    free(b.p);
    free(raw);
    if (!rc && nbooks != 66)
        rc = lssar_fail(LSSAR_E_FORMAT, "corpus 'kjv': %s has %d books, expected 66: truncated? delete %s "
                        "and run scripts/fetch-corpora.sh kjv", path, nbooks, dir);
    return rc;
}

/* ---- OSIS XML -> plain text */

// Value of attribute `name` inside a tag's text [t, e); copies it into v (empty if absent).
static void attr(const char *t, const char *e, const char *name, char *v, size_t vn) {
    size_t nl = strlen(name);
    v[0] = 0;
    for (const char *p = t; p + nl + 2 < e; p++) {
        if ((p[-1] == ' ' || p[-1] == '\t' || p[-1] == '\n') && !memcmp(p, name, nl) && p[nl] == '=' &&
            (p[nl + 1] == '"' || p[nl + 1] == '\'')) {
            char q = p[nl + 1];
            const char *s = p + nl + 2, *z = s;
            while (z < e && *z != q) z++;
            size_t n = (size_t)(z - s) < vn - 1 ? (size_t)(z - s) : vn - 1;
            memcpy(v, s, n);
            v[n] = 0;
            return;
        }
    }
}

// Append text, decoding XML entities.
static int add_xml_text(corpus_buf *b, const char *s, size_t n) {
    static const char *ent[][2] = {{"&amp;", "&"}, {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""},
                                   {"&apos;", "'"}};
    size_t i = 0, start = 0;
    while (i < n) {
        if (s[i] == '&') {
            for (int k = 0; k < 5; k++) {
                size_t L = strlen(ent[k][0]);
                if (i + L <= n && !memcmp(s + i, ent[k][0], L)) {
                    if (corpus_buf_add(b, s + start, i - start) || corpus_buf_add(b, ent[k][1], 1))
                        return LSSAR_E_NOMEM;
                    i += L; start = i;
                    goto next;
                }
            }
        }
        i++;
    next:;
    }
    return corpus_buf_add(b, s + start, n - start);
}

static int is_word_start(unsigned char c) {
    // letters, digits, and the first byte of a multi-byte UTF-8 character (curly quotes, letters)
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c >= 0xC0;
}

int corpus_osis_to_docs(const char *osis, size_t len, const char *corpus, corpus_docs *out) {
    corpus_buf b = {0};
    char book[64] = "";          // current book's OSIS id; "" = outside any book (text dropped)
    char skip_div[64] = "";      // sID of an introduction/glossary/front div being skipped
    int note = 0, title_skip = 0, soft_space = 0, rc = 0;
    const char *p = osis, *end = osis + len;
    while (p < end && !rc) {
        if (*p != '<') {
            const char *q = p;
            while (q < end && *q != '<') q++;
            if (book[0] && !note && !title_skip && !skip_div[0]) {
                // A dropped note often took the space between two words with it.
                if (soft_space && b.n && b.p[b.n - 1] != ' ' && b.p[b.n - 1] != '\n' &&
                    is_word_start((unsigned char)*p))
                    corpus_buf_addc(&b, ' ');
                soft_space = 0;
                rc = add_xml_text(&b, p, q - p);
            }
            p = q;
            continue;
        }
        const char *t = p + 1, *e = p;
        while (e < end && *e != '>') e++;
        if (e == end) break;                       // truncated tag at the end: ignore it
        p = e + 1;
        int closing = *t == '/';
        if (closing) t++;
        int selfclose = e[-1] == '/';
        const char *ne = t;
        while (ne < e && *ne != ' ' && *ne != '/' && *ne != '\t' && *ne != '\n') ne++;
        size_t nl = ne - t;
        char type[64], sid[64], eid[64], canon[16], id[64];
#define IS(s) (nl == strlen(s) && !memcmp(t, s, nl))
        if (IS("note")) {
            if (closing) { if (note > 0) note--; soft_space = 1; }
            else if (!selfclose) note++;
            continue;
        }
        if (note) continue;
        if (IS("title")) {
            if (closing) { if (title_skip) title_skip--; else corpus_buf_break(&b, 2); continue; }
            if (selfclose) continue;
            attr(ne, e, "canonical", canon, sizeof canon);
            if (title_skip || strcmp(canon, "true")) title_skip++;   // headings added by editors
            else corpus_buf_break(&b, 2);                            // psalm superscriptions stay
            continue;
        }
        if (IS("div")) {
            attr(ne, e, "type", type, sizeof type);
            attr(ne, e, "sID", sid, sizeof sid);
            attr(ne, e, "eID", eid, sizeof eid);
            if (skip_div[0]) { if (!strcmp(eid, skip_div)) skip_div[0] = 0; continue; }
            if (!strcmp(type, "book")) {
                if (sid[0]) {
                    attr(ne, e, "osisID", id, sizeof id);
                    if (book[0] && (rc = add_book(out, corpus, book, &b))) break;
                    free(b.p); memset(&b, 0, sizeof b);
                    snprintf(book, sizeof book, "%s", id[0] ? id : "unknown");
                } else if (eid[0] && book[0]) {
                    if ((rc = add_book(out, corpus, book, &b))) break;
                    book[0] = 0;
                }
            } else if (!strcmp(type, "introduction") || !strcmp(type, "glossary") || !strcmp(type, "front")) {
                if (sid[0]) snprintf(skip_div, sizeof skip_div, "%s", sid);
            } else if (!strcmp(type, "x-p") || !strcmp(type, "paragraph")) {
                corpus_buf_break(&b, 2);
            }
            continue;
        }
        if (skip_div[0] || title_skip) continue;
        if (IS("chapter") || IS("lg") || IS("p")) corpus_buf_break(&b, 2);
        else if (IS("l") || IS("lb") || IS("item")) corpus_buf_break(&b, 1);
        else if (IS("speaker")) corpus_buf_break(&b, closing ? 1 : 2);
#undef IS
    }
    if (!rc && book[0]) rc = add_book(out, corpus, book, &b);
    free(b.p);
    return rc;
}

/* ---- SWORD zText */

static uint32_t le32(const unsigned char *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }

// Append the OSIS text of every verse of one testament ("ot" or "nt") to osis, in index order.
static int ztext_testament(const char *mod, const char *t, corpus_buf *osis) {
    char pbzs[4096], pbzv[4096], pbzz[4096];
    corpus_path(pbzs, sizeof pbzs, "%s/%s.bzs", mod, t);
    corpus_path(pbzv, sizeof pbzv, "%s/%s.bzv", mod, t);
    corpus_path(pbzz, sizeof pbzz, "%s/%s.bzz", mod, t);
    char *bzs = NULL, *bzv = NULL, *bzz = NULL;
    size_t nbzs, nbzv, nbzz;
    int rc = lssar_read_file(pbzs, &bzs, &nbzs);
    if (!rc) rc = lssar_read_file(pbzv, &bzv, &nbzv);
    if (!rc) rc = lssar_read_file(pbzz, &bzz, &nbzz);
    if (rc) {
        free(bzs); free(bzv); free(bzz);
        return lssar_fail(LSSAR_E_IO, "corpus 'web': %s; fetch it with scripts/fetch-corpora.sh web",
                          lssar_errmsg());
    }
    size_t nblocks = nbzs / 12;
    char **block = calloc(nblocks ? nblocks : 1, sizeof *block);
    size_t *blen = calloc(nblocks ? nblocks : 1, sizeof *blen);
    if (!block || !blen) rc = lssar_fail(LSSAR_E_NOMEM, "out of memory reading the WEB module");
    // .bzv: 10-byte entries (uint32 block, uint32 offset in the inflated block, uint16 size).
    for (size_t i = 0; !rc && i + 10 <= nbzv; i += 10) {
        const unsigned char *v = (const unsigned char *)bzv + i;
        uint32_t bi = le32(v), off = le32(v + 4);
        uint16_t size = (uint16_t)(v[8] | v[9] << 8);
        if (size == 0) continue;                       // a verse that this versification lacks
        if (bi >= nblocks) {
            rc = lssar_fail(LSSAR_E_FORMAT, "corpus 'web': %s entry %zu names block %u of %zu: "
                            "damaged module", pbzv, i / 10, bi, nblocks);
            break;
        }
        if (!block[bi]) {
            // .bzs: 12-byte entries (uint32 offset in .bzz, compressed size, inflated size).
            const unsigned char *s = (const unsigned char *)bzs + 12 * bi;
            uint32_t zo = le32(s), zs = le32(s + 4), us = le32(s + 8);
            if ((size_t)zo + zs > nbzz) {
                rc = lssar_fail(LSSAR_E_FORMAT, "corpus 'web': block %u runs past the end of %s: "
                                "damaged module", bi, pbzz);
                break;
            }
            uLongf got = us;
            block[bi] = malloc(us + 1);
            if (!block[bi]) {
                rc = lssar_fail(LSSAR_E_NOMEM, "out of memory inflating the WEB module");
                break;
            }
            if (uncompress((Bytef *)block[bi], &got, (const Bytef *)bzz + zo, zs) != Z_OK || got != us) {
                rc = lssar_fail(LSSAR_E_FORMAT, "corpus 'web': block %u of %s does not inflate: damaged "
                                "module; delete it and run scripts/fetch-corpora.sh web", bi, pbzz);
                break;
            }
            blen[bi] = us;
        }
        if ((size_t)off + size > blen[bi]) {
            rc = lssar_fail(LSSAR_E_FORMAT, "corpus 'web': verse %zu runs past its block in %s: "
                            "damaged module", i / 10, pbzv);
            break;
        }
        rc = corpus_buf_add(osis, block[bi] + off, size);
        if (!rc) rc = corpus_buf_addc(osis, ' ');     // verses are separate runs of text
    }
    for (size_t i = 0; block && i < nblocks; i++) free(block[i]);
    free(block); free(blen); free(bzs); free(bzv); free(bzz);
    return rc;
}

int corpus_load_web(const char *dir, corpus_docs *out) {
    char mod[4096];
    corpus_path(mod, sizeof mod, "%s/root/usr/share/sword/modules/texts/ztext/engWEB2015eb", dir);
    corpus_buf osis = {0};
    int rc = ztext_testament(mod, "ot", &osis);
    if (!rc) rc = ztext_testament(mod, "nt", &osis);
    int n0 = out->n;
    if (!rc) rc = corpus_osis_to_docs(osis.p, osis.n, "web", out);
    free(osis.p);
    if (!rc && out->n - n0 < 66)
        rc = lssar_fail(LSSAR_E_FORMAT, "corpus 'web': only %d books found in %s (expected 66 or more); "
                        "delete %s and run scripts/fetch-corpora.sh web", out->n - n0, mod, dir);
    return rc;
}
