// pretok.c - GPT-2's pre-tokeniser: PCRE2 (UTF, UCP, JIT) plus an ASCII fast path. See pretok.h.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>
#include "../core/util.h"
#include "pretok.h"

// \s as Unicode White_Space (tiktoken's reading of GPT-2's pattern), as a character-class body.
#define WS "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}" \
           "\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
static const char PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|[" WS "]+(?![^" WS "])|[" WS "]+";

struct pretok {
    pcre2_code *code;
    int jit;  // 1 if JIT compilation succeeded (else the interpreter runs; slower, same result)
};

int pretok_new(pretok **out) {
    *out = NULL;
    pretok *p = calloc(1, sizeof *p);
    if (!p) return lssar_fail(LSSAR_E_NOMEM, "out of memory compiling the GPT-2 pattern");
    int err; PCRE2_SIZE erroff;
    p->code = pcre2_compile((PCRE2_SPTR)PATTERN, PCRE2_ZERO_TERMINATED,
                            PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &erroff, NULL);
    if (!p->code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        free(p);
        return lssar_fail(LSSAR_E_UNSUPPORTED, "PCRE2 cannot compile GPT-2's pattern at offset %zu: %s "
                          "(needs PCRE2 >= 10.34 built with Unicode support)", (size_t)erroff, (char *)msg);
    }
    p->jit = pcre2_jit_compile(p->code, PCRE2_JIT_COMPLETE) == 0;
    *out = p;
    return 0;
}

void pretok_free(pretok *p) {
    if (!p) return;
    pcre2_code_free(p->code);
    free(p);
}

int pretok_iter_init(pretok_iter *it, const pretok *p) {
    memset(it, 0, sizeof *it);
    it->p = p;
    it->fast = 1;
    it->md = pcre2_match_data_create_from_pattern(p->code, NULL);
    if (!it->md) return lssar_fail(LSSAR_E_NOMEM, "out of memory for PCRE2 match data");
    return 0;
}

void pretok_iter_free(pretok_iter *it) {
    if (it->md) pcre2_match_data_free(it->md);
    it->md = NULL;
}

void pretok_iter_reset(pretok_iter *it, const uint8_t *s, size_t len) {
    it->s = s; it->len = len; it->pos = 0; it->pending = 0;
}

// ------------------------------------------------------------------------- ASCII fast path

enum { C_O = 0, C_L = 1, C_N = 2, C_W = 3 };  // other, letter, number, whitespace

static const uint8_t ascii_class[128] = {
    // 0x00-0x1f: controls are "other" except \t \n \v \f \r
    0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 3, 3, 3, 3, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  // space ! " # ...
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0,  // 0-9
    0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,  // @ A-O
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0,  // P-Z
    0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,  // ` a-o
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0,  // p-z, DEL is other
};

// The end of the piece starting at s[i] (an ASCII byte) if the pattern's choice can be made from
// ASCII bytes alone; 0 if it depends on a non-ASCII character (the caller asks PCRE2 instead).
static size_t ascii_piece(const uint8_t *s, size_t i, size_t end) {
    uint8_t c = s[i];
    if (c == '\'' && i + 1 < end) {  // contractions come first in the alternation
        uint8_t d = s[i + 1];
        if (d == 's' || d == 't' || d == 'm' || d == 'd') return i + 2;
        if (i + 2 < end) {
            uint8_t e = s[i + 2];
            if ((d == 'r' && e == 'e') || (d == 'v' && e == 'e') || (d == 'l' && e == 'l')) return i + 3;
        }
    }
    int k = ascii_class[c];
    size_t j = i;
    if (c == ' ') {  // " ?X+" beats the whitespace alternatives when a non-space follows
        if (i + 1 == end) return end;
        uint8_t d = s[i + 1];
        if (d >= 0x80) return 0;
        if (ascii_class[d] != C_W) { k = ascii_class[d]; j = i + 1; }
    }
    if (k != C_W) {  // a run of letters, numbers or others
        j++;
        while (j < end && s[j] < 0x80 && ascii_class[s[j]] == k) j++;
        return (j < end && s[j] >= 0x80) ? 0 : j;
    }
    // Whitespace: \s+(?!\S) takes the whole run at the end of the text, else the run minus its
    // last character (which then leads the next piece); a single one falls to plain \s+.
    j = i + 1;
    while (j < end && s[j] < 0x80 && ascii_class[s[j]] == C_W) j++;
    if (j == end) return end;
    if (s[j] >= 0x80) return 0;
    return j - i >= 2 ? j - 1 : j;
}

// ------------------------------------------------------------------------------- iteration

int pretok_next(pretok_iter *it, size_t *a, size_t *b) {
    if (it->pending) {
        it->pending = 0;
        *a = it->pend_a; *b = it->pend_b; it->pos = it->pend_b;
        return 1;
    }
    size_t pos = it->pos, len = it->len;
    if (pos >= len) return 0;
    if (it->fast && it->s[pos] < 0x80) {
        size_t e = ascii_piece(it->s, pos, len);
        if (e) { *a = pos; *b = e; it->pos = e; return 1; }
    }
    pcre2_match_data *md = it->md;
    int rc = it->p->jit ? pcre2_jit_match(it->p->code, it->s, len, pos, 0, md, NULL)
                        : pcre2_match(it->p->code, it->s, len, pos, 0, md, NULL);
    if (rc == PCRE2_ERROR_NOMATCH) {  // only invalid bytes remain: one last piece
        *a = pos; *b = len; it->pos = len;
        return 1;
    }
    if (rc < 0) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(rc, msg, sizeof msg);
        return -lssar_fail(LSSAR_E_FORMAT, "PCRE2 match failed at byte %zu: %s", pos, (char *)msg);
    }
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    size_t ma = ov[0], mb = ov[1];
    if (ma > pos) {  // invalid bytes before the match: they form their own piece
        it->pending = 1; it->pend_a = ma; it->pend_b = mb;
        *a = pos; *b = ma; it->pos = ma;
        return 1;
    }
    *a = ma; *b = mb; it->pos = mb;
    return 1;
}
