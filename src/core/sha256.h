/*
 * sha256.h - SHA-256 checksums for dataset manifests and run records, computed by Debian's
 * nettle (libnettle); the tests check them against the FIPS 180-4 vectors and sha256sum.
 */
#ifndef LSSAR_SHA256_H
#define LSSAR_SHA256_H

#include <stddef.h>

/* Digest of a whole buffer as 64 lowercase hex digits + NUL. */
void sha256_hex(const void *data, size_t n, char hex[65]);
/* Digest of a file as hex; 0 or an lssar_err (the error names the file). */
int sha256_file_hex(const char *path, char hex[65]);

#endif
