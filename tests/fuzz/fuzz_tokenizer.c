// fuzz_tokenizer.c - the tokenizers (src/text/): GPT-2 byte-level BPE (pretok.c, bpe.c,
// tokenizer.c) and the byte tokenizer, on arbitrary bytes (invalid UTF-8, long pieces), with and
// without special tokens; encode then decode must give the bytes back exactly. The same input is
// also read as int32 / uint16 ids and decoded (ids out of range must be an error, not a crash).
//
// The GPT-2 files come from scripts/fetch-gpt2.sh (data/gpt2, or $LSSAR_DATA/gpt2). Without them
// the target says so once and fuzzes only the byte tokenizer.
#include "fuzz_common.h"
#include "lssar.h"

static lssar_tokenizer *gpt2, *byte_tok;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    if (lssar_tokenizer_byte(&byte_tok)) { fprintf(stderr, "fuzz_tokenizer: %s\n", lssar_errmsg()); exit(1); }
    if (lssar_tokenizer_open("gpt2", &gpt2)) {
        fprintf(stderr, "fuzz_tokenizer: GPT-2 tokenizer not available (%s); fuzzing only the byte tokenizer\n", lssar_errmsg());
        gpt2 = NULL;
    }
    return 0;
}

static void roundtrip(const lssar_tokenizer *t, const uint8_t *s, size_t n, int special) {
    int32_t *ids = NULL;
    size_t nid = 0;
    if (lssar_encode(t, (const char *)s, n, special, &ids, &nid)) {
        fprintf(stderr, "encode failed: %s\n", lssar_errmsg());
        abort();   // encode accepts any bytes
    }
    int V = lssar_tokenizer_vocab_size(t);
    for (size_t i = 0; i < nid; i++) if (ids[i] < 0 || ids[i] >= V) abort();
    char *back = NULL;
    size_t blen = 0;
    if (lssar_decode(t, ids, nid, &back, &blen)) { fprintf(stderr, "decode failed: %s\n", lssar_errmsg()); abort(); }
    if (blen != n || memcmp(back, s, n) || back[blen]) {
        fprintf(stderr, "round trip differs: %zu bytes in, %zu out\n", n, blen);
        abort();
    }
    lssar_free(ids);
    lssar_free(back);
}

static void decode_ids(const lssar_tokenizer *t, const int32_t *ids, size_t n) {
    char *text = NULL;
    size_t len = 0;
    int V = lssar_tokenizer_vocab_size(t), bad = 0;
    for (size_t i = 0; i < n; i++) bad |= ids[i] < 0 || ids[i] >= V;
    int rc = lssar_decode(t, ids, n, &text, &len);
    if (bad != (rc != 0)) { fprintf(stderr, "decode of %s ids returned %d\n", bad ? "bad" : "good", rc); abort(); }
    if (!rc) { if (text[len]) abort(); lssar_free(text); }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int mode = data[0];
    const uint8_t *s = data + 1;
    size_t n = size - 1;
    const lssar_tokenizer *t = (mode & 1) && gpt2 ? gpt2 : byte_tok;
    if (!(mode & 2)) {
        // Specials: "<|endoftext|>" decodes back to the same text, so the round trip holds too.
        roundtrip(t, s, n, (mode >> 2) & 1);
    } else {
        size_t k = n / 4;
        int32_t *ids = malloc((k ? k : 1) * sizeof *ids);
        if (mode & 4) {   // raw int32: mostly out of range
            memcpy(ids, s, k * 4);
        } else {          // uint16 pairs modulo a bit more than the vocabulary: mostly valid
            int V = lssar_tokenizer_vocab_size(t);
            for (size_t i = 0; i < k; i++) ids[i] = (int32_t)(((uint32_t)s[4 * i] | (uint32_t)s[4 * i + 1] << 8 | (uint32_t)s[4 * i + 2] << 16) % (uint32_t)(V + 2));
        }
        decode_ids(t, ids, k);
        free(ids);
    }
    return 0;
}
