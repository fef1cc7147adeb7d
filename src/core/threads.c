// threads.c - lssar_set_threads / lssar_get_threads (lssar.h) and lssar_free.
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <cblas.h>
#include "lssar.h"
#include "core/util.h"

static int initial_threads = 1;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static void remember_initial(void) { initial_threads = omp_get_max_threads(); }

int lssar_set_threads(int n) {
    pthread_once(&once, remember_initial);
    if (n < 0)
        return lssar_fail(LSSAR_E_ARG, "lssar_set_threads: n must be >= 0 (0: the default), got %d", n);
    if (n == 0) n = initial_threads;
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
    return 0;
}

int lssar_get_threads(void) {
    pthread_once(&once, remember_initial);
    return omp_get_max_threads();
}

void lssar_free(void *p) { free(p); }
