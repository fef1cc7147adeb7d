/*
 * bpe.h - GPT-2's byte-level byte-pair encoding: the vocabulary (encoder.json), the merge ranks
 * (vocab.bpe) and the merge loop that turns one pre-tokenised piece of bytes into token ids.
 * Internal to liblssar (the public API is the tokenizer section of include/lssar.h).
 *
 * Everything here is read-only after bpe_load, so any number of threads may encode at once.
 */
#ifndef LSSAR_BPE_H
#define LSSAR_BPE_H

#include <stddef.h>
#include <stdint.h>

/* A slot of the bytes -> id table: the token's first 8 bytes (zero-padded) sit in the slot, so
   finding a token of up to 8 bytes touches one cache line and nothing else. */
struct bpe_slot {
    uint64_t head;   // first min(len, 8) bytes, little-endian, zero-padded
    uint32_t off;    // the token's bytes: tok_bytes[off .. off+len)
    uint32_t meta;   // len << 17 | id; UINT32_MAX marks an empty slot
};

/* One merge rule "a b -> id", found by the pair (a, b) in an open-addressed table. */
typedef struct {
    uint32_t a, b;  // left and right token ids; a == UINT32_MAX marks an empty slot
    int32_t rank;   // line number in vocab.bpe (0 = first merge = applied first)
    int32_t id;     // the merged token
} bpe_merge;

typedef struct {
    int n_vocab;             // number of ids, specials included (50257 for GPT-2)
    int eot;                 // id of "<|endoftext|>", -1 if the vocabulary has none
    uint8_t *tok_bytes;      // all tokens' bytes back to back
    uint32_t *tok_off;       // (n_vocab + 1) offsets into tok_bytes: token i = [off[i], off[i+1])
    int32_t byte_id[256];    // the token of each single byte
    struct bpe_slot *lookup; // bytes -> id, open addressing; specials left out
    uint32_t lookup_mask;
    bpe_merge *merges;       // (a, b) -> rank and merged id, open addressing
    uint32_t merge_mask;
    int n_merges;
} bpe_model;

/* GPT-2's reversible map between bytes and printable unicode code points, in which
   encoder.json and vocab.bpe write tokens: out[b] is the code point that stands for byte b. */
void bpe_byte_to_unicode(int out[256]);

/* Load encoder.json and vocab.bpe; on failure the message names the file, line and problem. */
int bpe_load(bpe_model *m, const char *encoder_json, const char *vocab_bpe);
void bpe_free(bpe_model *m);

/* The id of the token whose bytes are exactly s[0..n), or -1 (specials never match). */
int32_t bpe_lookup(const bpe_model *m, const uint8_t *s, size_t n);

/* Per-call workspace: memory for pieces too long for the stack, and optionally a cache of the
   pieces of one text that needed the merge loop (words that are not tokens repeat within a
   document; the cache is private to one encode call, so threads never share it). */
typedef struct { uint64_t h; uint32_t off, len, tok, ntok; } bpe_cache_ent;
typedef struct {
    void *buf; size_t cap;          // heap-loop memory
    const uint8_t *text;            // cached pieces are text[off..off+len); NULL = no cache
    size_t text_len;
    bpe_cache_ent *ents;            // open addressing, len == 0 marks an empty slot
    uint32_t mask, used;
    int32_t *toks; size_t ntoks, tcap;  // the cached pieces' ids
} bpe_scratch;
/* Cache the merge results of pieces of text[0..len) (all later pieces must lie in it). */
void bpe_scratch_cache(bpe_scratch *sc, const uint8_t *text, size_t len);
void bpe_scratch_free(bpe_scratch *sc);

/* Pieces of at most this many bytes use the simple quadratic loop (fast for the short words of
   ordinary text); longer ones use a heap, O(n log n), so a megabyte without spaces is fine. */
#define BPE_SMALL 64

/* Encode one piece s[0..n), n >= 1: writes at most n ids to out and returns their number, or
   -1 if out of memory. Exactly GPT-2's result: repeatedly merge the adjacent pair with the lowest
   rank, leftmost first. A piece that is itself a token becomes that token (what tiktoken does;
   the same result for GPT-2's vocabulary, which tests/test_tokenizer.c checks). */
long bpe_encode_piece(const bpe_model *m, const uint8_t *s, size_t n, int32_t *out, bpe_scratch *sc);

/* The merge loop alone, for tests: small_max picks the algorithm (n <= small_max: quadratic,
   otherwise the heap), without the whole-piece shortcut. */
long bpe_merge_loop(const bpe_model *m, const uint8_t *s, size_t n, int32_t *out, bpe_scratch *sc,
                    size_t small_max);

#endif
