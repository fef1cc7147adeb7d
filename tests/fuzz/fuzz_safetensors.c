// fuzz_safetensors.c - the safetensors reader (src/model/safetensors.c): header length, header
// JSON, dtypes, shapes, data_offsets, __metadata__; then every tensor's bytes and st_read.
#include "fuzz_common.h"
#include "model/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[64];
    int fd = fuzz_memfile(data, size, path);
    st_file f;
    if (st_open(&f, path) == 0) {
        size_t total = 0;
        for (int i = 0; i < f.n; i++) {
            const st_tensor *t = &f.tensors[i];
            if (t->nbytes != t->numel * st_dtype_size(t->dtype)) abort();
            if (t->begin + t->nbytes > f.buf_len || t->ndim < 0 || t->ndim > ST_MAX_DIMS) abort();
            fuzz_touch(t->data, t->nbytes);
            total += t->nbytes;
            if (st_find(&f, t->name) != t) abort();   // names are unique
            void *dst = malloc(t->nbytes ? t->nbytes : 1);
            if (st_read(&f, t->name, t->dtype, dst, t->numel) != 0) abort();
            free(dst);
        }
        if (total != f.buf_len) abort();              // exactly covered
        for (int i = 0; i < f.n_meta; i++)
            if (!f.meta_keys[i] || !f.meta_vals[i] || !st_meta(&f, f.meta_keys[i])) abort();
        st_close(&f);
    }
    close(fd);
    return 0;
}
