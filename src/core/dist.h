/*
 * dist.h - the ranks of a distributed run: MPI (Open MPI), one process per rank.
 *
 * `mpirun -np N lssar ...` (or `srun`) starts N copies of the program; lssar_dist_init, called once
 * by main, joins them into one job when a launcher started it (it reads the launcher's
 * environment: OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_SIZE) and otherwise stays a job of one rank
 * without touching MPI, so a plain `lssar` never pays for MPI. Every collective below works for a
 * job of one rank too, which makes the single-process path the N = 1 case of the distributed one.
 *
 * Every collective must be called by every rank, in the same order. A rank that fails on its own
 * (a file it cannot read) must not simply return, or the others wait for it forever:
 * lssar_dist_agree is the meeting point where every rank learns whether any rank failed, and
 * all of them then return the first failing rank's error, prefixed with its number.
 *
 * Reductions here never use MPI_Reduce's own order (which Open MPI chooses by message size):
 * lssar_dist_sum_f32 moves the pieces with MPI_Alltoallv and sums them on the receiving rank in
 * rank order 0, 1, ..., N-1, so a sum is the same for every run with the same pieces.
 */
#ifndef LSSAR_DIST_H
#define LSSAR_DIST_H

#include <stddef.h>

/* Join the job (see above); 0 or an lssar_err. argc/argv may be NULL. */
int lssar_dist_init(int *argc, char ***argv);
/* Leave it (MPI_Finalize); safe to call when init was not. */
void lssar_dist_finalize(void);
/* Leave it at once with exit code rc, taking every rank with it (MPI_Abort). */
void lssar_dist_abort(int rc);
int lssar_dist_rank(void);   /* 0 .. size-1 */
int lssar_dist_size(void);   /* 1 without a launcher */
/* 1 if this build has MPI (0: every job is one rank). */
int lssar_dist_built(void);

/* Collective: every rank passes its own rc (0 or an lssar_err, with its lssar_errmsg). Returns 0
   on every rank if all passed 0; else every rank returns the lowest failing rank's code, its
   message prefixed "rank R: " (without the prefix in a job of one rank). */
int lssar_dist_agree(int rc);
/* Whether the last error came from lssar_dist_agree (then every rank holds it, and only rank 0
   needs to print it). */
int lssar_dist_error_shared(void);
/* Declare the caller's error one that every rank reaches by itself from the same command line (a
   command that does not run under mpirun), so that main ends the ranks without MPI_Abort. */
void lssar_dist_error_is_shared(void);
/* Collective: every rank passes `what` (a NUL-terminated string, e.g. its command line); an error
   on every rank naming the first rank whose string differs from rank 0's. */
int lssar_dist_check_same(const char *what, const char *label);

/* Collectives on host memory; 0 or an lssar_err. */
int lssar_dist_bcast(void *buf, size_t bytes, int root);
int lssar_dist_barrier(void);
/* all (size * n) = every rank's mine (n), in rank order. */
int lssar_dist_allgather_f64(const double *mine, size_t n, double *all);
/* The rank-order sum of pieces: rank s's piece for rank r is x + off[r] (cnt[r] floats, the same
   off and cnt on every rank). Rank r receives out (cnt[r]) = (accumulate ? out : 0) + piece of
   rank 0 + piece of rank 1 + ..., added in that order (scratch: size * cnt[r] floats). */
int lssar_dist_sum_f32(float *out, const float *x, const size_t *off, const size_t *cnt, int accumulate,
                       float *scratch);
/* x + off[r] (cnt[r] floats) = rank r's, in place: on every rank (root < 0: all-gather) or on
   rank root alone (root >= 0: gather; the other ranks' x outside their own part is untouched). */
int lssar_dist_allgather_f32(float *x, const size_t *off, const size_t *cnt, int root);

/* Work sharing for the embarrassingly parallel jobs (orbits simulate, eval, symreg restarts, the
   runs of an experiment): n items numbered 0..n-1 split into contiguous parts in rank order, this
   rank's being [*lo, *hi) (rank r: [r n / N, (r + 1) n / N)). Not a collective. */
void lssar_dist_share(long n, long *lo, long *hi);
/* Collective: every rank passes its bytes (n of them, which may differ across ranks); on every
   rank *all (malloc'd, the caller frees; NULL when the total is 0) holds them concatenated in rank
   order and *total their length; counts (size entries, may be NULL) receives each rank's n. */
int lssar_dist_allgather_bytes(const void *mine, size_t n, char **all, size_t *total, size_t *counts);
/* lssar_dist_share's split, for any rank: rank's part [*lo, *hi) of n items. Not a collective. */
void lssar_dist_share_of(long n, int rank, long *lo, long *hi);
/* Collective: rank r passes its counts[r] bytes at mine (the same counts on every rank, so that
   every rank checks the sizes alike); root receives them concatenated in rank order in all (the
   sum of counts bytes; all is unused on the other ranks). Root's own piece may already lie at its
   place in all (mine == all + the counts of the ranks before it): then it is not copied. For a
   rank-order gather of results that only root writes out, in rounds of bounded size. */
int lssar_dist_gather_bytes(const void *mine, void *all, const size_t *counts, int root);

/* Solo mode, for a command that spreads whole jobs over the ranks (extrapolate's runs): while on,
   this rank is a job of one rank by itself: lssar_dist_rank() is 0, lssar_dist_size() 1 and every
   collective above acts as for one rank (no MPI traffic), so code it calls (train_run, which
   would otherwise take part in data parallelism over every rank) runs exactly as one process.
   Not a collective; nests (on twice needs off twice). Every rank must leave it before the next
   real collective (lssar_dist_agree after the jobs) and before the command returns, since main
   reads lssar_dist_size() to decide how to end the job. */
void lssar_dist_solo(int on);
int lssar_dist_world_rank(void);   /* the rank in the whole job, solo or not */
int lssar_dist_world_size(void);   /* the ranks of the whole job, solo or not */

#endif
