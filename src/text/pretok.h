/*
 * pretok.h - GPT-2's pre-tokeniser: split text into the pieces that BPE encodes one by one.
 *
 * The pieces are the successive matches of GPT-2's pattern
 *     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * compiled with PCRE2 (UTF, UCP, JIT). \s is spelled out as Unicode White_Space, as PyPI tiktoken
 * (the reference, tests/test_tokenizer_parity.sh) reads it: tab, LF, VT, FF, CR, space, U+0085,
 * U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000. (JavaScript's \s, which
 * lssar followed until 2026-12-05 as js-tiktoken did, has U+FEFF instead of U+0085: ids differed
 * on text holding one of those two characters.)
 *
 * Invalid UTF-8 is allowed (PCRE2_MATCH_INVALID_UTF): no match can contain an invalid sequence,
 * and every valid character starts a match, so the gaps between matches are exactly the runs of
 * invalid bytes; each such run is returned as a piece of its own, which makes the pieces tile
 * the text and encoding exactly reversible.
 *
 * A hand-written scanner handles pieces that are plain ASCII and end before ASCII (most of
 * English text and source code) with the same result as the pattern; PCRE2 does the rest.
 * The compiled pattern is read-only: share one pretok between threads, one iterator per thread.
 */
#ifndef LSSAR_PRETOK_H
#define LSSAR_PRETOK_H

#include <stddef.h>
#include <stdint.h>

typedef struct pretok pretok;

int pretok_new(pretok **out);
void pretok_free(pretok *p);

typedef struct {
    const pretok *p;
    void *md;                 // pcre2_match_data, owned by the iterator
    const uint8_t *s;         // the text being split, s[0..len)
    size_t len, pos;          // next piece starts at pos
    size_t pend_a, pend_b;    // a match found after a gap, returned next
    int pending;
    int fast;                 // 1: use the ASCII scanner (default), 0: PCRE2 only (for tests)
} pretok_iter;

int pretok_iter_init(pretok_iter *it, const pretok *p);
void pretok_iter_free(pretok_iter *it);
/* Start splitting s[0..len). */
void pretok_iter_reset(pretok_iter *it, const uint8_t *s, size_t len);
/* The next piece is s[*a..*b): returns 1, 0 when the text is used up, or a negative number if
   PCRE2 fails (the message is in lssar_errmsg()). */
int pretok_next(pretok_iter *it, size_t *a, size_t *b);

#endif
