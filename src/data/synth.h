/*
 * synth.h - a built-in synthetic language for small CPU runs and tests: no download needed.
 *
 * "repeat": each document is a random string s over the alphabet (length uniform in
 * [min_len, max_len]) written twice, then end-of-text. The first copy is noise (its loss stays
 * near ln(alphabet)); the second copy is predictable only by finding the earlier occurrence and
 * copying from it (an induction head), so its loss shows how well attention finds one item among
 * many, and evaluating at longer windows (more documents in context) tests length extrapolation.
 * Token ids: 0..alphabet-1 symbols, alphabet = end-of-text. Vocabulary = alphabet + 1.
 */
#ifndef LSSAR_SYNTH_H
#define LSSAR_SYNTH_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int alphabet;      // symbols; the EOT id is `alphabet`
    int min_len, max_len;
} synth_params;

/* Write a 1-channel shard of exactly `tokens` tokens (documents cut at the end) generated from
   seed. Deterministic. */
int synth_write_repeat(const char *path, const synth_params *sp, size_t tokens, uint64_t seed);

#endif
