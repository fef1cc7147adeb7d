// test_symreg.c - symbolic regression: evaluation against a float64 scalar reference, printing and
// parsing, simplification, constant optimisation, unsafe operations, determinism, the ten public
// laws (one seed each, default budget, 2 threads), 1% noise, and bad CSV files.
//
// "Exact recovery" here: the selected equation, evaluated on 1,000 FRESH points of the law's domain,
// has max relative error < 1e-6 against the true law (constants right to ~1e-6 and the structure
// right; an approximation cannot reach that over the whole domain). tests/test_symreg_sympy.py adds
// the symbolic check (sympify + simplify(found - truth) == 0 after rounding constants).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "harness.h"
#include "symreg/sr.h"

// A library call that returns an error code (0 = success): a failure fails the test, with the
// library's message, instead of being ignored.

#define ROWS 1000

// The float64 scalar reference for a few hand-written programs.
static double ref_expr(int which, double x0, double x1) {
    switch (which) {
    case 0: return 2.5 * x0 * x1 / (x0 * x0);
    case 1: return exp(-x0 * x0 / 2) / sqrt(2 * M_PI) + sin(x1) - cos(x0);
    case 2: return log(x0) * sqrt(x1) + 1 / x1 - pow(x0, 1.5);
    default: return fabs(x0 - x1) + x0 * x0 * x0;
    }
}
static const char *ref_text[] = {"2.5*x0*x1/x0**2", "exp(-x0**2/2)/sqrt(2*pi) + sin(x1) - cos(x0)",
                                 "log(x0)*sqrt(x1) + inv(x1) - x0**1.5", "abs(x0 - x1) + cube(x0)"};

static void fill_uniform(double *x, int n, double lo, double hi, uint64_t seed) {
    lssar_rng r;
    lssar_rng_seed(&r, seed);
    for (int i = 0; i < n; i++) x[i] = lo + (hi - lo) * lssar_rng_uniform(&r);
}

static void test_eval_matches_scalar_reference(void) {
    const char *names[] = {"x0", "x1"};
    int n = 1000;  // not a multiple of the 256-row block: checks the tail block
    double *X = malloc(sizeof(double) * 2 * n), *pred = malloc(sizeof(double) * n);
    fill_uniform(X, 2 * n, 0.5, 4, 1);
    for (int w = 0; w < 4; w++) {
        int rc = lssar_sr_eval(ref_text[w], X, n, 2, names, pred);
        CHECK(rc == 0, "eval '%s' failed: %s", ref_text[w], lssar_errmsg());
        double worst = 0;
        for (int i = 0; i < n; i++) {
            double want = ref_expr(w, X[i], X[n + i]);
            worst = fmax(worst, fabs(pred[i] - want) / fmax(1, fabs(want)));
        }
        CHECK(worst < 1e-13, "'%s' differs from the scalar reference by %g", ref_text[w], worst);
    }
    // exp, log, sin and cos run through glibc's vector library (libmvec): over wide ranges they
    // must agree with the scalar libm to a few ulp (1e-14 relative), sin/cos to 1e-14 absolute.
    {
        static const struct { const char *eq; double lo, hi; int absolute; } wide[] = {
            {"exp(x0)", -700, 700, 0}, {"log(x0)", 1e-300, 1e300, 0}, {"sin(x0)", -1e5, 1e5, 1}, {"cos(x0)", -1e5, 1e5, 1}};
        for (int w = 0; w < 4; w++) {
            fill_uniform(X, n, wide[w].lo, wide[w].hi, 9 + w);
            if (w == 1) for (int i = 0; i < n; i++) X[i] = pow(10, -300 + 600 * (double)i / n);  // every decade
            CHECK(lssar_sr_eval(wide[w].eq, X, n, 1, names, pred) == 0, "eval '%s': %s", wide[w].eq, lssar_errmsg());
            double worst = 0;
            for (int i = 0; i < n; i++) {
                double x = X[i], want = w == 0 ? exp(x) : w == 1 ? log(x) : w == 2 ? sin(x) : cos(x);
                worst = fmax(worst, fabs(pred[i] - want) / (wide[w].absolute ? 1 : fmax(fabs(want), 1e-300)));
            }
            CHECK(worst < 1e-14, "'%s' over [%g, %g] differs from libm by %g", wide[w].eq, wide[w].lo, wide[w].hi, worst);
        }
        fill_uniform(X, 2 * n, 0.5, 4, 1);
    }
    // The fused loss equals the loss of the predictions.
    sr_prog p;
    CHECK(sr_parse(ref_text[1], names, 2, &p) == 0, "parse");
    double *y = malloc(sizeof(double) * n);
    fill_uniform(y, n, -1, 1, 2);
    for (int loss = 0; loss <= LSSAR_SR_REL; loss++) {
        sr_data d = {X, y, n, 2, loss};
        CHECK_OK(sr_eval(&p, &d, pred));
        double a = sr_loss(&p, &d), b = 0;
        for (int i = 0; i < n; i++) {
            double e = fabs(pred[i] - y[i]);
            b += loss == LSSAR_SR_L2 ? e * e : loss == LSSAR_SR_L1 ? e : loss == LSSAR_SR_L1DZ ? fmax(e, 1e-8) - 1e-8 : e / fabs(y[i]);
        }
        CHECK_CLOSE(a, b / n, 1e-12);
    }
    free(X); free(pred); free(y);
}

static void test_print_parse_roundtrip(void) {
    // Every printed form parses back to the same function (SymPy syntax: **, 1/(x), (x)**2).
    const char *names[] = {"alpha", "m_1"};
    const char *src[] = {"-0.5*alpha**2 + m_1", "inv(alpha)*square(m_1 - 3)", "sqrt(exp(alpha)/(m_1 + 1e-3))",
                         "(alpha**m_1)**0.25 - (-2)", "cos(sin(alpha))*cube(m_1)/-3.25e-7"};
    int n = 300;
    double *X = malloc(sizeof(double) * 2 * n), *a = malloc(sizeof(double) * n), *b = malloc(sizeof(double) * n);
    fill_uniform(X, 2 * n, 0.5, 2, 3);
    for (int k = 0; k < 5; k++) {
        sr_prog p, q;
        CHECK(sr_parse(src[k], names, 2, &p) == 0, "parse '%s': %s", src[k], lssar_errmsg());
        char *s = sr_to_string(&p, names);
        CHECK(s && sr_parse(s, names, 2, &q) == 0, "reparse '%s'", s ? s : "(null)");
        sr_data d = {X, NULL, n, 2, 0};
        CHECK_OK(sr_eval(&p, &d, a));
        CHECK_OK(sr_eval(&q, &d, b));
        double worst = 0;
        for (int i = 0; i < n; i++) worst = fmax(worst, fabs(a[i] - b[i]) / fmax(1, fabs(a[i])));
        CHECK(worst < 1e-9, "'%s' printed as '%s' changes values by %g", src[k], s, worst);
        CHECK(!strstr(s, "inv") && !strstr(s, "square") && !strstr(s, "cube"), "'%s' uses a non-SymPy name", s);
        free(s);
    }
    sr_prog p;
    CHECK(sr_parse("x + (", names, 2, &p) == LSSAR_E_ARG, "syntax error accepted");
    CHECK(sr_parse("zeta*2", names, 2, &p) == LSSAR_E_ARG, "unknown name accepted");
    free(X); free(a); free(b);
}

static void test_simplify(void) {
    const char *names[] = {"x"};
    sr_prog p;
    CHECK_OK(sr_parse("(2*3)*(4*x) + 0 - (x - x)", names, 1, &p));
    int before = p.len;
    CHECK(sr_simplify(&p) == 1, "nothing simplified");
    char *s = sr_to_string(&p, names);
    CHECK(p.len <= 3, "'%s' should fold to 24*x (3 nodes), got %d nodes (from %d)", s, p.len, before);
    CHECK(s && strstr(s, "24"), "constant not folded: %s", s);
    free(s);
    // The presentation rules: (x + 3) - 3 -> x, 0 - x*y -> -(x*y), and snapping cancels.
    CHECK_OK(sr_parse("(x + 3) - 3", names, 1, &p));
    sr_simplify_full(&p);
    CHECK(p.len == 1 && p.n[0].op == SR_VAR, "(x + 3) - 3 should become x, got %d nodes", p.len);
    CHECK_OK(sr_parse("0 - x*x", names, 1, &p));
    sr_simplify_full(&p);
    CHECK(p.len == 4 && p.n[3].op == SR_NEG, "0 - x*x should become -(x*x), got %d nodes", p.len);
    CHECK_OK(sr_parse("1.75 - (1/(x*x) + 0.75)", names, 1, &p)); // a constant split in two, as searches leave it
    sr_simplify_full(&p);
    CHECK(p.len == 7 && p.n[0].op == SR_CONST && p.n[0].c == 1.0, "c1 - (Y + c2) should become (c1 - c2) - Y, got %d nodes", p.len);
    CHECK_OK(sr_parse("exp(log((x*x)*(-1)/(-1)))*(-1) + (-1)", names, 1, &p));
    sr_simplify_full(&p);
    s = sr_to_string(&p, names);
    CHECK(s && !strcmp(s, "(-(x*x)) - 1"), "exp(log(y)), y*(-1), y/(-1) and + (-1): got '%s'", s ? s : "(null)");
    free(s);
    CHECK_OK(sr_parse("x*log(exp(log(exp(x))))", names, 1, &p));
    sr_simplify_full(&p);
    CHECK(p.len == 3, "log(exp(x)) should become x, got %d nodes", p.len);
    // Folding never changes the function.
    double X[50], a[50], b[50];
    fill_uniform(X, 50, -3, 3, 4);
    sr_data d = {X, NULL, 50, 1, 0};
    const char *src[] = {"exp(1)*x + sin(0)*x", "x/1 + 1*x + (x + x)", "(x*2)*(3*(x*5))", "(2 - (x - 1.5)) - 0.5",
                         "0 - (x + 2) + 2", "1.5 - (0.5 + x*x)", "3 - (x + 0.25)", "(x*(-1))/(-1) - (-(-x))",
                         "(x + 1)*(-1) + exp(log(x*x + 1))", "(-0.4)/(-exp(x)) + (-x)*2 + (-x)/(-3)",
                         "2*((3*x)*5)", "(x*(2*x))*3", "(2 + (3*x + 4)) + 1", "((x*3)*x)*2"};
    for (int k = 0; k < (int)(sizeof src / sizeof *src); k++) {
        CHECK_OK(sr_parse(src[k], names, 1, &p));
        CHECK_OK(sr_eval(&p, &d, a));
        sr_simplify(&p);
        CHECK_OK(sr_eval(&p, &d, b));
        for (int i = 0; i < 50; i++) CHECK_CLOSE(b[i], a[i], 1e-12);
        sr_simplify_full(&p);
        CHECK_OK(sr_eval(&p, &d, b));
        for (int i = 0; i < 50; i++) CHECK_CLOSE(b[i], a[i], 1e-12);
    }
}

// Known structure, unknown constants: Levenberg-Marquardt must find them from a poor start.
static void test_constant_optimisation(void) {
    const sr_law *L = &sr_laws[0];  // Newton
    double *X = malloc(sizeof(double) * 3 * ROWS), *y = malloc(sizeof(double) * ROWS);
    double *work = malloc(sizeof(double) * (SR_MAXC + 3) * ROWS);
    CHECK_OK(sr_law_data(L, ROWS, 5, 0, X, y));
    lssar_rng rng;
    lssar_rng_seed(&rng, 1);
    for (int loss = LSSAR_SR_L2; loss <= LSSAR_SR_L1; loss++) {
        sr_data d = {X, y, ROWS, 3, loss};
        sr_prog p;
        CHECK_OK(sr_parse("1.0*m1*m2/r**2", L->feat, 3, &p));
        double l0 = sr_loss(&p, &d);
        double l = sr_optimize_constants(&p, &d, l0, 20, 2, &rng, work);
        CHECK(l < 1e-12 * l0, "loss %d: %g -> %g", loss, l0, l);
        CHECK_CLOSE(p.n[0].c, 39.4784, 1e-8);
    }
    // Two constants inside a non-linear function (the Gaussian law): a*exp(b*theta**2).
    const sr_law *G = &sr_laws[5];
    CHECK_OK(sr_law_data(G, ROWS, 6, 0, X, y));
    sr_data d = {X, y, ROWS, 1, LSSAR_SR_L2};
    sr_prog p;
    CHECK_OK(sr_parse("1.0*exp(-1.0*theta**2)", G->feat, 1, &p));
    double l = sr_optimize_constants(&p, &d, sr_loss(&p, &d), 30, 3, &rng, work);
    CHECK(l < 1e-20, "gaussian constants: loss %g", l);
    CHECK_CLOSE(p.n[0].c, 1 / sqrt(2 * M_PI), 1e-6);
    CHECK_CLOSE(p.n[1].c, -0.5, 1e-6);  // postfix: 1.0, -1.0, theta, square, *, exp, *
    free(X); free(y); free(work);
}

static void test_unsafe_operations(void) {
    const char *names[] = {"x"};
    int n = 600;
    double X[600], y[600], pred[600];
    fill_uniform(X, n, -2, 2, 7);
    X[17] = 0;  // exact zero for the divisions
    for (int i = 0; i < n; i++) y[i] = X[i] * X[i];
    sr_data d = {X, y, n, 1, LSSAR_SR_L2};
    const char *bad[] = {"1/x", "log(x)", "sqrt(x)", "exp(exp(exp(exp(x*10))))", "1/(1/(x - x))",
                         "exp(-exp(exp(exp(x*100))))", "x**0.5", "0*log(x)", "(x*1e200)*(x*1e200)"};
    for (int k = 0; k < 9; k++) {
        sr_prog p;
        CHECK(sr_parse(bad[k], names, 1, &p) == 0, "parse %s", bad[k]);
        CHECK(isinf(sr_loss(&p, &d)), "'%s' must have infinite loss, got %g", bad[k], sr_loss(&p, &d));
        CHECK(sr_eval(&p, &d, pred) != 0, "'%s' must be reported non-finite", bad[k]);
    }
    // A search with every unsafe operator on data crossing zero: no crash, a finite front whose
    // equations are finite on the data.
    lssar_sr_options o;
    lssar_sr_defaults(&o);
    o.ops = "+,-,*,/,log,sqrt,exp,pow,inv";
    o.iterations = 8; o.populations = 4; o.cycles = 150; o.threads = 2; o.seed = 3;
    lssar_sr_result r;
    CHECK(lssar_symreg(&o, X, y, n, 1, names, &r) == 0, "search failed: %s", lssar_errmsg());
    CHECK(r.n > 0, "empty front");
    for (int k = 0; k < r.n; k++) {
        CHECK(isfinite(r.front[k].loss), "front loss %g", r.front[k].loss);
        CHECK(lssar_sr_eval(r.front[k].equation, X, n, 1, names, pred) == 0, "front equation '%s' not finite on the data",
              r.front[k].equation);
        if (k) CHECK(r.front[k].loss < r.front[k - 1].loss && r.front[k].complexity > r.front[k - 1].complexity,
                     "front not Pareto at %d", k);
    }
    lssar_sr_result_free(&r);
}

static void test_api_errors(void) {
    double X[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    const char *names[] = {"x"}, *badnames[] = {"x 1"};
    lssar_sr_options o;
    lssar_sr_result r;
    lssar_sr_defaults(&o);
    o.ops = "+,frobnicate";
    CHECK(lssar_symreg(&o, X, y, 8, 1, names, &r) == LSSAR_E_ARG && strstr(lssar_errmsg(), "frobnicate"), "bad op: %s", lssar_errmsg());
    lssar_sr_defaults(&o);
    CHECK(lssar_symreg(&o, X, y, 8, 1, badnames, &r) == LSSAR_E_ARG && strstr(lssar_errmsg(), "identifier"), "bad name: %s", lssar_errmsg());
    y[3] = NAN;
    CHECK(lssar_symreg(&o, X, y, 8, 1, names, &r) == LSSAR_E_NAN, "NaN target accepted");
    y[3] = 4;
    o.maxsize = 1000;
    CHECK(lssar_symreg(&o, X, y, 8, 1, names, &r) == LSSAR_E_SIZE, "maxsize 1000 accepted");
    CHECK(lssar_symreg(NULL, X, y, 8, 1, names, &r) == LSSAR_E_NULL, "NULL options accepted");
}

static int fronts_equal(const lssar_sr_result *a, const lssar_sr_result *b) {
    if (a->n != b->n || a->selected != b->selected) return 0;
    for (int k = 0; k < a->n; k++)
        if (strcmp(a->front[k].equation, b->front[k].equation) || a->front[k].loss != b->front[k].loss) return 0;
    return 1;
}

static void test_determinism(void) {
    const sr_law *L = &sr_laws[3];  // a law not found in 6 iterations, so the fronts are rich
    double *X = malloc(sizeof(double) * 3 * ROWS), *y = malloc(sizeof(double) * ROWS);
    CHECK_OK(sr_law_data(L, ROWS, 11, 0, X, y));
    lssar_sr_options o;
    lssar_sr_defaults(&o);
    o.iterations = 6; o.populations = 6; o.cycles = 150; o.seed = 42; o.threads = 2;
    lssar_sr_result a, b, c, e;
    CHECK(lssar_symreg(&o, X, y, ROWS, 3, L->feat, &a) == 0, "run a");
    CHECK(lssar_symreg(&o, X, y, ROWS, 3, L->feat, &b) == 0, "run b");
    CHECK(fronts_equal(&a, &b), "same seed and threads gave different fronts");
    o.threads = 1;  // islands read only synchronised state: the thread count does not matter either
    CHECK(lssar_symreg(&o, X, y, ROWS, 3, L->feat, &c) == 0, "run c");
    CHECK(fronts_equal(&a, &c), "1 thread and 2 threads gave different fronts");
    o.threads = 2; o.seed = 43;
    CHECK(lssar_symreg(&o, X, y, ROWS, 3, L->feat, &e) == 0, "run e");
    CHECK(!fronts_equal(&a, &e), "a different seed gave the identical front");
    lssar_sr_result_free(&a); lssar_sr_result_free(&b); lssar_sr_result_free(&c); lssar_sr_result_free(&e);
    free(X); free(y);
}

// Each public law, default budget, 2 threads: seed 0 first, and seeds 1 and 2 only if a seed
// misses. The search is deterministic for one build on one CPU, but its path is not the same on
// every CPU: the AVX-512, AVX2 and SSE clones of the evaluation call different libmvec variants
// (whose last bits of exp/log/sin/cos differ) and sum the loss in different lane orders, and the
// search amplifies such differences (docs/symreg.md: vectorising exp alone changed every path).
// Seed 0 recovers all ten on AVX-512, but an AVX2 build (-march=x86-64-v3) missed relativistic
// mass with seed 0 (selected an approximation with max relative error 3e-4). Recovery is a
// property of the engine measured over seeds: 100/100 (law, seed) cases (bench/symreg_recovery.sh,
// docs/symreg.md); taking the per-seed miss rate of the hardest law as at most 1/4 (the lower 95%
// confidence limit of its 10/10 is 0.74), three independent seeds all miss with probability
// <= 1/64, while an engine that really lost a law misses all three.
#define LAW_SEEDS 3
static void test_public_laws(void) {
    double total = 0;
    int found = 0;
    for (int li = 0; li < SR_NLAWS; li++) {
        const sr_law *L = &sr_laws[li];
        double *X = malloc(sizeof(double) * L->nf * ROWS), *y = malloc(sizeof(double) * ROWS);
        CHECK_OK(sr_law_data(L, ROWS, 1000, 0, X, y));
        int ok = 0;
        char last[512] = "";
        double last_err = INFINITY;
        for (int seed = 0; seed < LAW_SEEDS && !ok; seed++) {
            lssar_sr_options o;
            lssar_sr_defaults(&o);
            o.threads = 2;
            o.seed = (uint64_t)seed;
            lssar_sr_result r;
            int rc = lssar_symreg(&o, X, y, ROWS, L->nf, L->feat, &r);
            CHECK(rc == 0, "%s (seed %d): %s", L->name, seed, lssar_errmsg());
            if (rc) break;
            const char *eq = r.front[r.selected].equation;
            double err = sr_law_max_relerr(L, eq, ROWS, 77);
            ok = err < 1e-6;
            printf("  %-18s %-9s seed %d %5.1f s  %s  max rel err %.2g  (truth %s)\n", L->name,
                   ok ? "recovered" : "MISSED", seed, r.seconds, eq, err, L->truth);
            fflush(stdout);
            snprintf(last, sizeof last, "%s", eq);
            last_err = err;
            // Newton's law is found in the first iterations (then 5 more run); a search that needs
            // many more has lost its selection pressure (a 0-size tournament once did exactly that
            // and still found it, in ~40x the time).
            if (li == 0 && seed == 0) CHECK(r.iterations <= 25, "newton took %d iterations (expected an early stop)", r.iterations);
            total += r.seconds;
            lssar_sr_result_free(&r);
        }
        CHECK(ok, "%s not recovered with seeds 0..%d: last selected '%s' (max relative error %g)", L->name,
              LAW_SEEDS - 1, last, last_err);
        found += ok;
        free(X); free(y);
    }
    printf("  public laws recovered (up to %d seeds): %d/%d in %.1f s\n", LAW_SEEDS, found, SR_NLAWS, total);
}

// Relative RMS difference sqrt(sum (eq - truth)^2 / sum truth^2) on fresh points of L.
static double rms_relerr(const sr_law *L, const char *eq) {
    double *X = malloc(sizeof(double) * L->nf * ROWS), *t = malloc(sizeof(double) * ROWS), *p = malloc(sizeof(double) * ROWS);
    double num = 0, den = 0;
    CHECK_OK(sr_law_data(L, ROWS, 79, 0, X, t));
    if (lssar_sr_eval(eq, X, ROWS, L->nf, L->feat, p)) num = INFINITY;
    for (int i = 0; i < ROWS; i++) { num += (p[i] - t[i]) * (p[i] - t[i]); den += t[i] * t[i]; }
    free(X); free(t); free(p);
    return sqrt(num / den);
}

// 1% multiplicative noise (L2 loss, selection by score): the selected law must match the truth to
// within the noise level in the L2 sense (relative RMS < 2%) on fresh points. Max relative error is
// also printed: L2 cannot see a tiny additive constant that matters only on the smallest targets.
static void test_noise(void) {
    const int laws[] = {0, 2, 6};
    for (int k = 0; k < 3; k++) {
        const sr_law *L = &sr_laws[laws[k]];
        double *X = malloc(sizeof(double) * L->nf * ROWS), *y = malloc(sizeof(double) * ROWS);
        CHECK_OK(sr_law_data(L, ROWS, 2000, 0.01, X, y));
        lssar_sr_options o;
        lssar_sr_defaults(&o);
        o.threads = 2; o.iterations = 30; o.select = LSSAR_SR_SCORE;
        o.restarts = 1;  // noise never meets the exact-fit stop, so every restart would run in full
        lssar_sr_result r;
        int rc = lssar_symreg(&o, X, y, ROWS, L->nf, L->feat, &r);
        CHECK(rc == 0, "%s: %s", L->name, lssar_errmsg());
        if (rc) { free(X); free(y); continue; }
        const char *eq = r.front[r.selected].equation;
        double err = sr_law_max_relerr(L, eq, ROWS, 78), rms = rms_relerr(L, eq);
        printf("  noisy %-12s %s  relative RMS error %.2g, max rel err %.2g\n", L->name, eq, rms, err);
        CHECK(rms < 0.02, "%s with 1%% noise: selected '%s' is off by %g (relative RMS)", L->name, eq, rms);
        lssar_sr_result_free(&r);
        free(X); free(y);
    }
}

static int write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fputs(text, f);
    return fclose(f);
}

static void test_bad_csv(void) {
    char dir[] = "/tmp/lssar_sr_csvXXXXXX", path[128];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    struct { const char *text, *expect; } cases[] = {
        {"", "empty"},
        {"x,y\n1,2\n3\n", "fields"},
        {"x,y\n1,2\n3,abc\n", "not a finite number"},
        {"x,y\n1,2\n3,nan\n", "not a finite number"},
        {"x,y\n", "no data rows"},
        {"1,2\n3,4\n", "header"},
    };
    for (int k = 0; k < 6; k++) {
        snprintf(path, sizeof path, "%s/bad%d.csv", dir, k);
        write_file(path, cases[k].text);
        sr_csv c;
        int rc = sr_csv_read(path, &c);
        CHECK(rc == LSSAR_E_FORMAT && strstr(lssar_errmsg(), cases[k].expect), "case %d: rc %d, message '%s' lacks '%s'",
              k, rc, lssar_errmsg(), cases[k].expect);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/good.csv", dir);
    write_file(path, "x, \"y\"\r\n1, 2\r\n\r\n3,4.5e1\r\n");
    sr_csv c;
    CHECK(sr_csv_read(path, &c) == 0, "good csv: %s", lssar_errmsg());
    CHECK(c.rows == 2 && c.cols == 2 && c.data[3] == 45, "good csv parsed wrong");
    CHECK(sr_csv_column(&c, "y") == 1, "column y");
    CHECK(sr_csv_column(&c, "F") == -1 && strstr(lssar_errmsg(), "'F'"), "missing target: %s", lssar_errmsg());
    sr_csv_free(&c);
    unlink(path);
    snprintf(path, sizeof path, "%s/missing.csv", dir);
    CHECK(sr_csv_read(path, &c) == LSSAR_E_IO, "missing file");
    rmdir(dir);
}

int main(void) {
    RUN(test_eval_matches_scalar_reference);
    RUN(test_print_parse_roundtrip);
    RUN(test_simplify);
    RUN(test_constant_optimisation);
    RUN(test_unsafe_operations);
    RUN(test_api_errors);
    RUN(test_bad_csv);
    RUN(test_determinism);
    RUN(test_noise);
    RUN(test_public_laws);
    return test_summary("test_symreg");
}
