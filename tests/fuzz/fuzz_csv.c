// fuzz_csv.c - the symbolic-regression CSV reader (src/symreg/csv.c: sr_csv_read, sr_csv_column).
#include "fuzz_common.h"
#include "symreg/sr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[64];
    int fd = fuzz_memfile(data, size, path);
    sr_csv c;
    if (sr_csv_read(path, &c) == 0) {
        if (c.rows < 1 || c.cols < 1) abort();
        fuzz_touch(c.data, sizeof(double) * (size_t)c.rows * c.cols);
        for (int j = 0; j < c.cols; j++)
            if (sr_csv_column(&c, c.names[j]) > j) abort();   // first column of that name
        sr_csv_column(&c, "no such column");
        sr_csv_free(&c);
    }
    close(fd);
    return 0;
}
