// sha256.c - hex SHA-256 of a buffer or a file, over nettle's sha256 (see sha256.h).
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <nettle/sha2.h>
#include "core/sha256.h"
#include "core/util.h"

static void digest_hex(struct sha256_ctx *c, char hex[65]) {
    static const char digits[] = "0123456789abcdef";
    uint8_t d[SHA256_DIGEST_SIZE];
    sha256_digest(c, sizeof d, d);
    for (int i = 0; i < SHA256_DIGEST_SIZE; i++) {
        hex[2 * i] = digits[d[i] >> 4];
        hex[2 * i + 1] = digits[d[i] & 15];
    }
    hex[64] = 0;
}

void sha256_hex(const void *data, size_t n, char hex[65]) {
    struct sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, n, data);
    digest_hex(&c, hex);
}

int sha256_file_hex(const char *path, char hex[65]) {
    FILE *f = fopen(path, "rb");
    if (!f) return lssar_fail(LSSAR_E_IO, "cannot open %s to checksum it: %s", path, strerror(errno));
    struct sha256_ctx c;
    sha256_init(&c);
    static _Thread_local uint8_t buf[1 << 16];
    size_t r;
    while ((r = fread(buf, 1, sizeof buf, f)) > 0) sha256_update(&c, r, buf);
    int err = ferror(f);
    fclose(f);
    if (err) return lssar_fail(LSSAR_E_IO, "error reading %s to checksum it", path);
    digest_hex(&c, hex);
    return 0;
}
