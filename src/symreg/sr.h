/*
 * sr.h - internals of the symbolic regression engine (see docs in include/lssar.h,
 * and /work/shared/spec/symreg.md).
 *
 * An expression is a flat POSTFIX array of nodes: leaves push a row-vector (a feature column or a
 * constant), operators pop their arguments and push the result. Postfix keeps every subtree a
 * contiguous range [start, end] ending at its root, so mutations are array splices, and evaluation
 * is one pass over the nodes with a small stack of row-vectors (BLK rows at a time).
 */
#ifndef LSSAR_SR_H
#define LSSAR_SR_H

#include <stdint.h>
#include "core/util.h"
#include "lssar.h"

enum {
    SR_CONST = 0, SR_VAR,                                    // leaves
    SR_ADD, SR_SUB, SR_MUL, SR_DIV, SR_POW,                  // binary
    SR_NEG, SR_SIN, SR_COS, SR_EXP, SR_LOG, SR_INV, SR_SQRT, // unary
    SR_SQUARE, SR_CUBE, SR_ABS,
    SR_NOPS
};

#define SR_MAXLEN 64          // hard cap on nodes in one expression (maxsize <= this)
#define SR_MAXC 16            // constants the optimiser tunes per expression
#define SR_REFIT_ROWS 128     // rows used for the quick constant refit of a new child (search.c)
#define SR_BLK 256            // rows evaluated together: the stack of row-vectors stays in L1/L2

typedef struct { uint8_t op; uint8_t pad; uint16_t feat; double c; } sr_node;  // 16 bytes
typedef struct { int len; sr_node n[SR_MAXLEN]; } sr_prog;                    // postfix

extern const char *const sr_op_names[SR_NOPS];   // "+", "sin", ... (leaves: "const", "var")
int sr_arity(int op);                            // 0, 1 or 2
int sr_op_parse(const char *name);               // "+" or "add", "sin", "inv", ... -> op; -1 unknown

/* Index of the first node of the subtree whose root is node i. */
int sr_subtree_start(const sr_prog *p, int i);
/* 1 if p is a well-formed postfix program (every op has its arguments; one value left). */
int sr_valid(const sr_prog *p);
/* Replace nodes [s, e] of p by seq[0..m); fails (returns 0, p unchanged) past SR_MAXLEN. */
int sr_splice(sr_prog *p, int s, int e, const sr_node *seq, int m);
/* Largest stack depth while evaluating p. */
int sr_depth(const sr_prog *p);

/* Data: column-major features X[f * n + i], target y[i]. */
typedef struct {
    const double *X, *y;
    int n, nf;
    int loss;                 // LSSAR_SR_L2 ...
} sr_data;

/* Evaluate p on all rows into pred[n]. Returns 0 if every row and every intermediate value that
   could hide an overflow is finite, else -1 (pred then holds garbage). */
int sr_eval(const sr_prog *p, const sr_data *d, double *pred);
/* Mean loss of p on d; +INFINITY for any non-finite value. Fused evaluation + loss, no pred array. */
double sr_loss(const sr_prog *p, const sr_data *d);
/* Loss of predictions already computed. */
double sr_loss_of(const double *pred, const sr_data *d);

/* Constant folding and a few algebraic identities; returns 1 if p changed. */
int sr_simplify(sr_prog *p);
/* The same plus rules for presenting results: x - c -> x + (-c), 0 - x -> -x, (x + c) - c -> x.
   (Kept out of the search itself: redundant intermediate forms help it.) */
int sr_simplify_full(sr_prog *p);
/* Human/SymPy form: "((39.4784*m1)*m2)/(r**2)" ...; malloc'd. names[f] for SR_VAR. */
char *sr_to_string(const sr_prog *p, const char *const *names);
/* Parse the infix form (as printed above, or typed by a person) into p. Names are matched against
   names[0..nf); unknown names and syntax errors return LSSAR_E_ARG with a message. */
int sr_parse(const char *s, const char *const *names, int nf, sr_prog *p);

/* Constant optimisation (Levenberg-Marquardt on the weighted squared residual; L1-type losses
   through iteratively reweighted least squares). Improves p in place if the loss drops; returns
   the new loss. iters: LM iterations per start; restarts: extra starts from perturbed constants. */
double sr_optimize_constants(sr_prog *p, const sr_data *d, double loss0, int iters, int restarts,
                             lssar_rng *rng, double *work /* (SR_MAXC + 3) * n */);

/* Several searches at once, their restarts spread over the ranks of the job (core/dist.h): the
   implementation of lssar_symreg (one job) and of orbits newton (a job per galaxy). A collective:
   every rank passes the same jobs and receives every job's result, identical to what one process
   computes (unless a time_limit stops a search). res of every job is written (freed again on
   failure); on failure *failed (may be NULL) is the job whose error this rank had, else -1. label:
   the progress lines' name (NULL: "symreg"). */
typedef struct {
    const lssar_sr_options *o;
    const double *X, *y;
    int rows, nfeat;
    const char *const *names;
    const char *label;
    lssar_sr_result *res;
} sr_job;
int sr_search_jobs(const sr_job *jobs, int njobs, int *failed);

/* CSV reader: header row of names, then numbers. Column-major data (cols x rows). */
typedef struct { int rows, cols; char **names; double *data; } sr_csv;
int sr_csv_read(const char *path, sr_csv *out);
void sr_csv_free(sr_csv *c);
/* Index of the column called name, or -1 with lssar_errmsg() listing the columns. */
int sr_csv_column(const sr_csv *c, const char *name);

/* `lssar symreg`: the search on a CSV file's columns (target, and the features: a comma list, or
   NULL for every other column), the Pareto table on stdout (rank 0 alone writes json). Under
   mpirun every rank reads the CSV and they agree on any failure. 0, or an lssar_err whose
   message names the file where it is about it. */
typedef struct {
    const char *csv, *target, *features, *json;
    lssar_sr_options sr;
} sr_csv_opts;
int sr_csv_run(const sr_csv_opts *o);

/* The public test laws of the spec (synthetic data), shared by the tests and the benchmarks. */
typedef struct {
    const char *name, *target, *truth;  // truth: an equation over the feature names
    int nf;
    const char *feat[4];
    double lo[4], hi[4];                // inputs ~ U(lo, hi)
} sr_law;
#define SR_NLAWS 10
extern const sr_law sr_laws[SR_NLAWS];
/* rows samples of law L: X column-major (nf, rows), y = truth * (1 + noise * N(0,1)). */
int sr_law_data(const sr_law *L, int rows, uint64_t seed, double noise, double *X, double *y);
/* Largest relative error |eq - truth| / |truth| over `rows` fresh points of L (seed `seed`);
   +INFINITY if eq does not parse or is not finite there. Our "exact recovery" test: < 1e-6. */
double sr_law_max_relerr(const sr_law *L, const char *eq, int rows, uint64_t seed);

#endif
