/*
 * shard.h - token shards in llm.c's format.
 *
 * Layout: a header of 256 int32 (little-endian): [0] magic 20240520, [1] version 1, [2] number of
 * positions, [3] channels C (0 or 1 means one channel, so llm.c's FineWeb and TinyStories shards
 * read unchanged), [4] the vocabulary size when the writer knows it (0: not recorded, as in
 * llm.c's shards, which leave it 0); then positions x C uint16 tokens, the C channels of a
 * position interleaved.
 */
#ifndef LSSAR_SHARD_H
#define LSSAR_SHARD_H

#include <stddef.h>
#include <stdint.h>
#include "../core/util.h"

#define SHARD_MAGIC 20240520
#define SHARD_VERSION 1
#define SHARD_HEADER_INTS 256

typedef struct {
    char *path;
    const uint16_t *tokens;  // (n, C), memory-mapped
    size_t n;                // positions
    int channels;            // C
    int vocab;               // ids per channel as the writer recorded it; 0: not recorded
    void *map; size_t map_len;
} shard;

/* Map a shard read-only and validate its header and size; errors name the file and the problem. */
int shard_open(shard *s, const char *path);
void shard_close(shard *s);

/* Streaming writer: positions are appended, the header is completed by shard_writer_close, and
   the file appears atomically under its name only then. */
typedef struct {
    lssar_afile af;
    int channels;
    int vocab;
    size_t n;
} shard_writer;
/* vocab: the ids per channel the shard's tokens come from (0: unknown); `lssar train` takes it
   as its default --vocab. */
int shard_writer_open(shard_writer *w, const char *path, int channels, int vocab);
/* Append n positions (n x C uint16). */
int shard_writer_append(shard_writer *w, const uint16_t *tokens, size_t n);
int shard_writer_close(shard_writer *w);   /* commit */
void shard_writer_abort(shard_writer *w);  /* discard */

#endif
