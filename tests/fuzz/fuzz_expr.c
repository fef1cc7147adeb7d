// fuzz_expr.c - the symbolic-regression expression parser and evaluator (src/symreg/expr.c,
// lssar_sr_eval): any bytes as an equation over the names x, y, m1, m2, r.
#include <math.h>
#include "fuzz_common.h"
#include "lssar.h"

enum { ROWS = 5, NF = 5 };
static const char *const NAMES[NF] = {"x", "y", "m1", "m2", "r"};
static const double X[NF * ROWS] = {
    0, 1, -1, 2.5, 1e300,        // x
    1, 0, 3, -0.5, -1e-300,      // y
    1e-6, 1, 2, 3, 4,            // m1
    1, 1, 1, 1, 1,               // m2
    0.5, 1, 2, 40, 1e-3,         // r
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = 0;
    double pred[ROWS];
    int rc = lssar_sr_eval(s, X, ROWS, NF, NAMES, pred);
    if (rc == 0)
        for (int i = 0; i < ROWS; i++) if (!isfinite(pred[i])) abort();   // LSSAR_E_NAN otherwise
    free(s);
    return 0;
}
