// fuzz_bpe.c - loading a GPT-2 vocabulary (src/text/bpe.c: bpe_load of encoder.json and
// vocab.bpe, through lssar_tokenizer_gpt2). The input is encoder.json, a NUL byte, then vocab.bpe
// (no NUL: all of it is encoder.json and vocab.bpe is empty). A vocabulary that loads must then
// encode and decode a fixed text losslessly.
#include "fuzz_common.h"
#include "lssar.h"

static const char TEXT[] = "Hello world, <|endoftext|> caf\xc3\xa9 \xff\xfe  \n\n 12345 it's";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t n1 = nul ? (size_t)(nul - data) : size;
    char p1[64], p2[64];
    int fd1 = fuzz_memfile(data, n1, p1);
    int fd2 = fuzz_memfile(nul ? nul + 1 : data, nul ? size - n1 - 1 : 0, p2);
    lssar_tokenizer *t = NULL;
    if (lssar_tokenizer_gpt2(p1, p2, &t) == 0) {
        int32_t *ids = NULL;
        size_t n = 0;
        char *back = NULL;
        size_t blen = 0;
        if (lssar_encode(t, TEXT, sizeof TEXT - 1, 1, &ids, &n)) abort();
        if (lssar_decode(t, ids, n, &back, &blen)) abort();
        if (blen != sizeof TEXT - 1 || memcmp(back, TEXT, blen)) abort();
        lssar_free(ids);
        lssar_free(back);
        lssar_tokenizer_free(t);
    }
    close(fd1);
    close(fd2);
    return 0;
}
