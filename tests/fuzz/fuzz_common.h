/*
 * fuzz_common.h - shared helpers of the fuzz targets (tests/fuzz/fuzz_*.c).
 *
 * Each target defines LLVMFuzzerTestOneInput; it is linked either with libFuzzer
 * (-fsanitize=fuzzer, `make fuzz`) or with tests/fuzz/driver.c, a main() that runs files or stdin
 * (FUZZ_ENGINE=driver, e.g. for AFL++'s afl-clang-fast). The parsers take paths, so the input is
 * written to an anonymous memory file (memfd) and opened by its /proc/self/fd path: nothing is
 * left on disk, and closing the descriptor frees it.
 */
#ifndef LSSAR_FUZZ_COMMON_H
#define LSSAR_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The input as a file: returns the descriptor (close it after) and its path in path[64]. */
static inline int fuzz_memfile(const uint8_t *data, size_t size, char path[64]) {
    int fd = memfd_create("lssar-fuzz", MFD_CLOEXEC);
    if (fd < 0) { perror("memfd_create"); abort(); }
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(fd, data + off, size - off);
        if (w <= 0) { perror("write memfd"); abort(); }
        off += (size_t)w;
    }
    snprintf(path, 64, "/proc/self/fd/%d", fd);
    return fd;
}

/* Touch every byte of a buffer, so ASan checks the whole range the parser handed out. */
static inline unsigned fuzz_touch(const void *p, size_t n) {
    const volatile unsigned char *c = p;
    unsigned s = 0;
    for (size_t i = 0; i < n; i++) s += c[i];
    return s;
}

#endif
