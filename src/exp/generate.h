/*
 * generate.h - `lssar sample` as a library call: a prompt (token ids, or text encoded with the
 * model's tokenizer) through the model's KV cache, then --tokens positions drawn one at a time
 * from softmax(logits / temperature) (argmax at 0), each channel from its own head, printed on
 * stdout as they come (ids on one line, or the continuation as text).
 */
#ifndef LSSAR_EXP_GENERATE_H
#define LSSAR_EXP_GENERATE_H

#include <stdint.h>
#include "model/checkpoint.h"

typedef struct {
    const char *model;          // run directory or model file
    ckpt_load_opts load;        // --device
    const int *ids;             // the prompt as ids, channels interleaved (NULL: text)
    int nids;
    const char *text;           // the prompt as text (one-channel models)
    const char *tokenizer;      // the text's tokenizer (NULL: the one the vocabulary implies)
    int tokens;                 // positions to generate
    float temperature;          // 0: greedy
    uint64_t seed;
} generate_opts;

/* 0, or an lssar_err (lssar_errmsg); *usage is set when the prompt does not fit the model (its
   channels, vocabulary or learned positions, or no tokenizer for its text). */
int generate_run(const generate_opts *o, int *usage);

#endif
