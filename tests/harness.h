/*
 * harness.h - a minimal test harness. Each test is a function; CHECK records a failed property
 * with its message and lets the test continue; the binary ends with the line
 * "<suite>: N passed, M failed" that tests/run.sh sums.
 *
 *   static void test_something(void) { CHECK(x == 1, "x is %d", x); }
 *   int main(void) { RUN(test_something); return test_summary("suite"); }
 *
 * LSSAR_TEST_SKIP="test_a,test_b" skips those tests (they count as neither passed nor failed and
 * print "skip - NAME"); tests/test_cpus.sh uses it to leave the longest tests out of its runs
 * under CPU emulation, since the native run covers them. LSSAR_TEST_ONLY="test_a,..." runs only
 * those (while working on one).
 */
#ifndef LSSAR_TEST_HARNESS_H
#define LSSAR_TEST_HARNESS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int th_tests_passed, th_tests_failed, th_current_failed;
static const char *th_current = "";

#define CHECK(cond, ...)                                                            \
    do {                                                                            \
        if (!(cond)) {                                                              \
            th_current_failed++;                                                    \
            fprintf(stderr, "  FAIL %s (%s:%d): ", th_current, __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                           \
            fputc('\n', stderr);                                                    \
        }                                                                           \
    } while (0)

/* A library call that must succeed (0), else the failure with the library's message. */
#define CHECK_OK(call) CHECK((call) == 0, "%s failed: %s", #call, lssar_errmsg())

/* |got - want| <= tol * max(1, |want|) */
#define CHECK_CLOSE(got, want, tol)                                                              \
    CHECK(fabs((double)(got) - (double)(want)) <= (tol) * fmax(1.0, fabs((double)(want))),       \
          "%s = %.9g, expected %.9g (tol %g)", #got, (double)(got), (double)(want), (double)(tol))

// name is an entry of the comma-separated list (NULL: none)
static inline int th_listed(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; p && (p = strstr(p, name)); p += n)
        if ((p == list || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return 1;
    return 0;
}
static inline int th_skipped(const char *name) {
    const char *only = getenv("LSSAR_TEST_ONLY");
    return th_listed(getenv("LSSAR_TEST_SKIP"), name) || (only && *only && !th_listed(only, name));
}

static inline void th_run(const char *name, void (*fn)(void)) {
    if (th_skipped(name)) { printf("skip - %s\n", name); fflush(stdout); return; }
    th_current = name;
    th_current_failed = 0;
    fn();
    if (th_current_failed) { th_tests_failed++; printf("not ok - %s\n", name); }
    else { th_tests_passed++; printf("ok - %s\n", name); }
    fflush(stdout);
}
#define RUN(fn) th_run(#fn, fn)

static inline int test_summary(const char *suite) {
    printf("%s: %d passed, %d failed\n", suite, th_tests_passed, th_tests_failed);
    return th_tests_failed ? 1 : 0;
}

#endif
