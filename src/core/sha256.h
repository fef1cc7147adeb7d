/*
 * sha256.h - SHA-256 (FIPS 180-4), for the checksums in dataset manifests.
 * Written here (about 100 lines) rather than pulling in OpenSSL's libcrypto for one hash; the
 * tests check it against the FIPS test vectors and against sha256sum.
 */
#ifndef LSSAR_SHA256_H
#define LSSAR_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t h[8];
    uint64_t nbytes;      // message length so far
    uint8_t buf[64];      // pending partial block
    size_t nbuf;
} sha256_ctx;

void sha256_init(sha256_ctx *c);
void sha256_update(sha256_ctx *c, const void *data, size_t n);
void sha256_final(sha256_ctx *c, uint8_t digest[32]);
/* Digest of a whole buffer as 64 lowercase hex digits + NUL. */
void sha256_hex(const void *data, size_t n, char hex[65]);
/* Digest of a file as hex; 0 or an lssar_err (the error names the file). */
int sha256_file_hex(const char *path, char hex[65]);

#endif
