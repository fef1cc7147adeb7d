/*
 * driver.c - a main() for the fuzz targets when they are not linked with libFuzzer
 * (`make fuzz-build FUZZ_ENGINE=driver`, the default when FUZZ_CC is afl-clang-fast / afl-clang-lto):
 *
 *   build-fuzz/fuzz_NAME FILE|DIR ...   run the target once on each file (a folder: each file in it)
 *   build-fuzz/fuzz_NAME < FILE         run it on stdin; under afl-clang-fast in AFL++'s
 *                                       persistent mode (__AFL_LOOP), e.g.
 *   afl-fuzz -i tests/fuzz/corpus/NAME -o out -x tests/fuzz/NAME.dict -- build-fuzz/fuzz_NAME
 *
 * It also replays crash files from libFuzzer without libFuzzer, under any compiler.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

static uint8_t *read_all(FILE *f, size_t *n) {
    size_t cap = 1 << 16, len = 0;
    uint8_t *buf = malloc(cap);
    if (!buf) abort();
    for (;;) {
        size_t r = fread(buf + len, 1, cap - len, f);
        len += r;
        if (len < cap) break;
        uint8_t *nb = realloc(buf, cap *= 2);
        if (!nb) abort();
        buf = nb;
    }
    *n = len;
    return buf;
}

static int run_file(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) { fprintf(stderr, "cannot stat %s\n", path); return 1; }
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (!d) { fprintf(stderr, "cannot open %s\n", path); return 1; }
        struct dirent *e;
        int rc = 0;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            char p[4096];
            snprintf(p, sizeof p, "%s/%s", path, e->d_name);
            rc |= run_file(p);
        }
        closedir(d);
        return rc;
    }
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "cannot open %s\n", path); return 1; }
    size_t n;
    uint8_t *buf = read_all(f, &n);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 0;
}

#ifdef __AFL_FUZZ_TESTCASE_LEN
__AFL_FUZZ_INIT();
#endif

int main(int argc, char **argv) {
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    if (argc > 1) {
        int rc = 0;
        for (int i = 1; i < argc; i++) rc |= run_file(argv[i]);
        return rc;
    }
#ifdef __AFL_FUZZ_TESTCASE_LEN
    // AFL++ persistent mode with shared-memory test cases.
    __AFL_INIT();
    unsigned char *buf = __AFL_FUZZ_TESTCASE_BUF;
    while (__AFL_LOOP(10000)) {
        size_t n = __AFL_FUZZ_TESTCASE_LEN;
        uint8_t *copy = malloc(n ? n : 1);   // a private copy, so ASan sees its exact size
        memcpy(copy, buf, n);
        LLVMFuzzerTestOneInput(copy, n);
        free(copy);
    }
    return 0;
#else
    size_t n;
    uint8_t *buf = read_all(stdin, &n);
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 0;
#endif
}
