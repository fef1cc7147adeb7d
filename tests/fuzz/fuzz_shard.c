// fuzz_shard.c - token shard header and contents (src/data/shard.c: shard_open).
#include "fuzz_common.h"
#include "data/shard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[64];
    int fd = fuzz_memfile(data, size, path);
    shard s;
    if (shard_open(&s, path) == 0) {
        if (s.channels < 1 || s.channels > 64) abort();
        fuzz_touch(s.tokens, s.n * (size_t)s.channels * sizeof(uint16_t));
        shard_close(&s);
    }
    close(fd);
    return 0;
}
