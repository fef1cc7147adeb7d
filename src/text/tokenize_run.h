/*
 * tokenize_run.h - `lssar tokenize` as a library call: text -> ids (printed on stdout, one line;
 * or a 1-channel token shard), JSON Lines documents -> one line of ids each, or ids (text or a
 * token shard) -> the bytes they decode to.
 */
#ifndef LSSAR_TOKENIZE_RUN_H
#define LSSAR_TOKENIZE_RUN_H

typedef struct {
    const char *tokenizer;   // gpt2 or byte
    const char *in;          // input file; NULL or "-": standard input
    const char *out;         // encode: a token shard; decode: the text (NULL: standard output)
    int decode;              // ids -> text
    int allow_special;       // encode "<|endoftext|>" as the EOT id
    int jsonl;               // each input line a JSON string or {"text": ...}, encoded alone
} tokenize_opts;

/* 0, or an lssar_err whose message (lssar_errmsg) names the input it is about. */
int tokenize_run(const tokenize_opts *o);

#endif
