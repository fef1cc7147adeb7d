/*
 * safetensors.h - read and write the safetensors format (https://github.com/huggingface/safetensors):
 *
 *   8 bytes    N, little-endian uint64: length of the JSON header
 *   N bytes    JSON object: {"NAME": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]},
 *              ..., "__metadata__": {"key": "string value", ...}}  (padded with spaces)
 *   rest       the byte buffer; offsets are relative to its start, little-endian, row-major.
 *
 * The reader maps the file read-only and refuses anything damaged, with a message naming the
 * file and the problem: a header longer than the file, JSON that is not an object, an unknown
 * dtype, negative or non-integer shapes, offsets that disagree with dtype x shape, tensors that
 * overlap or leave holes, a buffer that ends early (truncated) or late (trailing bytes), duplicate
 * names, metadata values that are not strings.
 *
 * The writer streams: declare every tensor first (name, dtype, shape), then begin() writes the
 * header and write() appends the tensors' bytes in declaration order, so a 500 MB model needs
 * only one tensor's worth of scratch memory. The file appears atomically at commit (lssar_afile).
 */
#ifndef LSSAR_SAFETENSORS_H
#define LSSAR_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include "core/util.h"

#define ST_MAX_DIMS 8
#define ST_MAX_HEADER (100u << 20)   /* refuse headers over 100 MB: a garbage length, not a model */

/* Bytes per element of a safetensors dtype ("F32", "I64", "U8", ...); 0 if unknown. */
size_t st_dtype_size(const char *dtype);

typedef struct {
    char *name;
    char dtype[8];
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    size_t numel;
    size_t begin, nbytes;   // within the data buffer
    const void *data;       // into the mapping; may be unaligned for files from other writers
} st_tensor;

typedef struct {
    char *path;
    void *map; size_t map_len;
    const uint8_t *buf; size_t buf_len;   // the byte buffer after the header
    st_tensor *tensors; int n;
    char **meta_keys, **meta_vals; int n_meta;
} st_file;

/* Open and validate. LSSAR_E_IO if the file cannot be read, LSSAR_E_FORMAT if it is damaged. */
int st_open(st_file *f, const char *path);
void st_close(st_file *f);
const st_tensor *st_find(const st_file *f, const char *name);   /* NULL if absent */
const char *st_meta(const st_file *f, const char *key);           /* NULL if absent */
/* Copy a tensor out (handles unaligned data); checks dtype and element count, errors name both. */
int st_read(const st_file *f, const char *name, const char *dtype, void *dst, size_t numel);

typedef struct {
    char *name; char dtype[8]; int ndim; int64_t shape[ST_MAX_DIMS]; size_t nbytes;
} st_decl;

typedef struct {
    st_decl *decls; int n, cap;
    char **meta_keys, **meta_vals; int n_meta;
    lssar_afile af;
    int open;               // begin() succeeded
    int next;               // declaration being written
    size_t written_in_next; // bytes of it written so far
} st_writer;

void st_writer_init(st_writer *w);
int st_writer_meta(st_writer *w, const char *key, const char *value);
int st_writer_add(st_writer *w, const char *name, const char *dtype, int ndim, const int64_t *shape);
int st_writer_begin(st_writer *w, const char *path);
/* Append bytes of the tensors in declaration order (any chunking). */
int st_writer_write(st_writer *w, const void *data, size_t bytes);
/* Checks every declared byte was written, then fsync + rename. Frees the writer either way. */
int st_writer_commit(st_writer *w);
void st_writer_abort(st_writer *w);   /* discard; frees */

#endif
