// shard.c - read (mmap) and write llm.c-format token shards; see shard.h.
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "shard.h"

int shard_open(shard *s, const char *path) {
    memset(s, 0, sizeof *s);
    if (!path) return lssar_fail(LSSAR_E_NULL, "shard path is NULL");
    int fd = open(path, O_RDONLY);
    if (fd < 0) return lssar_fail(LSSAR_E_IO, "cannot open shard %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return lssar_fail(LSSAR_E_IO, "cannot stat %s: %s", path, strerror(errno));
    }
    size_t len = (size_t)st.st_size, hdr = SHARD_HEADER_INTS * sizeof(int32_t);
    if (len < hdr) {
        close(fd);
        return lssar_fail(LSSAR_E_FORMAT, "%s is %zu bytes, shorter than the 1024-byte shard header: not a "
                          "token shard, or truncated", path, len);
    }
    void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return lssar_fail(LSSAR_E_IO, "cannot map %s: %s", path, strerror(errno));
    const int32_t *h = map;
    int rc = 0;
    int C = h[3] <= 1 ? 1 : h[3];
    if (h[0] != SHARD_MAGIC)
        rc = lssar_fail(LSSAR_E_FORMAT, "%s: bad magic number %d (expected %d): not an "
                        "llm.c/lssar token shard", path, h[0], SHARD_MAGIC);
    else if (h[1] != SHARD_VERSION)
        rc = lssar_fail(LSSAR_E_FORMAT, "%s: shard version %d is not supported (expected %d)", path, h[1],
                        SHARD_VERSION);
    else if (h[2] < 0 || h[3] < 0 || h[3] > 64 || h[4] < 0 || h[4] > 65536)
        rc = lssar_fail(LSSAR_E_FORMAT, "%s: corrupt header (count %d, channels %d, vocabulary %d)", path,
                        h[2], h[3], h[4]);
    else if (len != hdr + (size_t)h[2] * C * sizeof(uint16_t))
        rc = lssar_fail(LSSAR_E_FORMAT, "%s: header says %d positions x %d channels (%zu bytes) but the file "
                        "is %zu bytes: truncated or damaged; rebuild it", path, h[2], C,
                        hdr + (size_t)h[2] * C * 2, len);
    if (rc) { munmap(map, len); return rc; }
    s->path = strdup(path);
    s->map = map; s->map_len = len;
    s->tokens = (const uint16_t *)((const char *)map + hdr);
    s->n = (size_t)h[2];
    s->channels = C;
    s->vocab = h[4];
    return 0;
}

void shard_close(shard *s) {
    if (s->map) munmap(s->map, s->map_len);
    free(s->path);
    memset(s, 0, sizeof *s);
}

int shard_writer_open(shard_writer *w, const char *path, int channels, int vocab) {
    memset(w, 0, sizeof *w);
    if (channels < 1 || channels > 64)
        return lssar_fail(LSSAR_E_ARG, "shard channels must be 1..64, got %d", channels);
    if (vocab < 0 || vocab > 65536)
        return lssar_fail(LSSAR_E_ARG, "shard vocabulary must be 0..65536, got %d", vocab);
    w->channels = channels;
    w->vocab = vocab;
    int rc = lssar_afile_open(&w->af, path);
    if (rc) return rc;
    int32_t h[SHARD_HEADER_INTS] = {0};  // completed on close
    if (fwrite(h, sizeof h, 1, w->af.f) != 1) {
        lssar_afile_abort(&w->af);
        return lssar_fail(LSSAR_E_IO, "writing %s failed (disk full?)", path);
    }
    return 0;
}

int shard_writer_append(shard_writer *w, const uint16_t *tokens, size_t n) {
    if (w->n + n > (size_t)INT32_MAX)
        return lssar_fail(LSSAR_E_SIZE, "shard would exceed 2^31-1 positions; split it into several shards");
    if (n && fwrite(tokens, sizeof(uint16_t) * w->channels, n, w->af.f) != n)
        return lssar_fail(LSSAR_E_IO, "writing %s failed: %s (disk full?)", w->af.path, strerror(errno));
    w->n += n;
    return 0;
}

int shard_writer_close(shard_writer *w) {
    int32_t h[SHARD_HEADER_INTS] = {0};
    h[0] = SHARD_MAGIC; h[1] = SHARD_VERSION; h[2] = (int32_t)w->n; h[3] = w->channels; h[4] = w->vocab;
    if (fseek(w->af.f, 0, SEEK_SET) != 0 || fwrite(h, sizeof h, 1, w->af.f) != 1) {
        lssar_afile_abort(&w->af);
        return lssar_fail(LSSAR_E_IO, "finishing shard header failed");
    }
    return lssar_afile_commit(&w->af);
}

void shard_writer_abort(shard_writer *w) { lssar_afile_abort(&w->af); }
