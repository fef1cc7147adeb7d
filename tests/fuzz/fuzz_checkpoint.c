// fuzz_checkpoint.c - loading checkpoints (src/model/checkpoint.c): the input as a model file
// (ckpt_load_model: the config in __metadata__, then every tensor's dtype, shape and values) and as
// a trainer file (ckpt_read_train_state, and ckpt_load_trainer into a fixed tiny model).
#include "fuzz_common.h"
#include "model/checkpoint.h"

static gpt *tiny;   // the model the trainer files of the seed corpus were written for

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    gpt_config c;
    memset(&c, 0, sizeof c);
    // = `lssar train --layers 1 --heads 2 --dim 8 --seq 8 --vocab 16 --attn lssar` (tests/fuzz/README.md)
    c.layers = 1; c.heads = 2; c.dim = 8; c.vocab = 16; c.channels = 1; c.max_seq = 8;
    c.pos = LSSAR_POS_ROPE; c.attn = LSSAR_ATTN_LSSAR; c.p = 15; c.tied = 1;
    if (gpt_create(&c, 1, &tiny) || gpt_reserve(tiny, 1, 8, 1)) {
        fprintf(stderr, "fuzz_checkpoint: cannot build the tiny model: %s\n", lssar_errmsg());
        exit(1);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[64];
    int fd = fuzz_memfile(data, size, path);
    gpt *m = NULL;
    int64_t step = -1;
    if (ckpt_load_model(path, NULL, &m, &step) == 0) {
        if (!m || step < 0) abort();
        gpt_free(m);
    }
    train_state s;
    ckpt_read_train_state(path, &s);
    ckpt_load_trainer(tiny, path, &s);
    close(fd);
    return 0;
}
