/*
 * probe.h - the orbit world model's evaluation and the Newton force probe (spec/orbits.md,
 * "Force probe"): next-position accuracy against the previous-position baseline, the force set's
 * labelled/test split, a k-d tree for nearest neighbours (the test-row selection and the k-NN
 * oracle), the regression head, forces.csv, and the law audit behind `lssar orbits newton`.
 *
 * Rows are named by one int64 id = system * 1000 + row (row 1..999 as in format.h).
 */
#ifndef LSSAR_ORBITS_PROBE_H
#define LSSAR_ORBITS_PROBE_H

#include <stdint.h>
#include "model/gpt.h"
#include "orbits/format.h"

/* ------------------------------------------------------------ evaluation */
#define ORB_EVAL_BANDS 5
extern const double ORB_EVAL_BAND_AU[ORB_EVAL_BANDS];   /* band lower edges: 0, 5, 10, 20, 30 AU */
typedef struct {
    int64_t systems, rows;          // sequences evaluated; target rows counted (all)
    double loss;                    // mean cross-entropy over all targets and both channels
    double acc_channel;             // token accuracy, mean of the x and y channels (all targets)
    double acc_both;                // both channels right (all targets)
    double err_au;                  // mean distance (AU) of the decoded prediction to the decoded target
    // rows with a previous step of the same body (step >= 1): the comparison with the baseline
    int64_t cmp_rows;
    double cmp_acc_channel, cmp_acc_both, cmp_err_au;    // the model on those rows
    double base_acc_channel, base_acc_both, base_err_au; // "same body's previous position"
    // model - baseline per system (its compared rows), then the mean over systems and the half-width
    // of its 95% t interval: systems are the independent units (a system's rows share one orbit)
    double diff_acc, diff_acc_half, diff_err, diff_err_half;
    // the compared rows by the target's distance from the origin (AU), ORB_EVAL_BAND_AU[i] ..
    // ORB_EVAL_BAND_AU[i + 1] (the last band open): where the error comes from
    int64_t band_rows[ORB_EVAL_BANDS];
    double band_err_au[ORB_EVAL_BANDS], band_base_err_au[ORB_EVAL_BANDS];
} orb_eval_result;

/* Evaluate on the first max_systems (0: all) sequences of split `split` in `dir`: window = rows
   0..T of each sequence (inputs 0..T-1, targets 1..T), T <= 999, B sequences per forward. */
int orb_eval_model(gpt *m, const char *dir, const char *split, int64_t max_systems, int T, int B,
                   int progress, orb_eval_result *r);

/* --------------------------------------------------------------- k-d tree */
typedef struct orb_kdtree orb_kdtree;
/* pts (n, d) float, copied; d <= 8. */
int orb_kd_build(const float *pts, int64_t n, int d, orb_kdtree **out);
void orb_kd_free(orb_kdtree *t);
/* The k (<= 16) nearest points to q (Euclidean): original indices and squared distances,
   nearest first. Thread-safe. */
void orb_kd_knn(const orb_kdtree *t, const float *q, int k, int64_t *idx, float *d2);

/* -------------------------------------------------------- the force set */
#define ORB_FEAT 6   /* state features: dx, dy, dvx, dvy, m1, m2 (standardised) */
typedef struct {
    int64_t systems;        // systems used (the first `systems` of the file)
    int64_t full;           // systems 0..full-1 fully labelled (90%)
    int64_t ntrain, ntest;  // labelled rows; unlabelled planet rows of systems full..systems-1
    int64_t *train, *test;  // row ids
    float mean[ORB_FEAT], sd[ORB_FEAT];   // feature standardisation (over the labelled rows)
} orb_force_split;

/* Planet rows of a K = 1 sequence that the model sees as inputs: 1, 3, ..., 997. */
#define ORB_PLANET_ROWS 499
/* Split the first `systems` systems (0: all) of a force-set state file: the first 90% fully
   labelled, the rest with `labelled` (2) random planet rows each (stream `seed`). */
int orb_force_split_make(const orb_state *st, int64_t systems, int labelled, uint64_t seed,
                         orb_force_split *s);
void orb_force_split_free(orb_force_split *s);
/* Standardised features of row id into out[ORB_FEAT]. */
void orb_force_features(const orb_state *st, const orb_force_split *s, int64_t id, float *out);
/* The `keep` test rows nearest (1-NN in the standardised state) to a labelled row, sorted by
   distance: *ids malloc'd, *n = min(keep, ntest). tree may be NULL (built here). */
int orb_force_nearest(const orb_state *st, const orb_force_split *s, const orb_kdtree *tree, int64_t keep,
                      int64_t **ids, int64_t *n);
/* Tree over the labelled rows' standardised features (index i -> s->train[i]). */
int orb_force_tree(const orb_state *st, const orb_force_split *s, orb_kdtree **out);
/* k-NN regressor: mean |F| of the k nearest labelled rows, for each of n row ids. */
int orb_knn_predict(const orb_state *st, const orb_force_split *s, const orb_kdtree *tree, int k,
                    const int64_t *ids, int64_t n, double *pred);
/* forces.csv: "r,m1,m2,F_pred,F_true", one line per id. */
int orb_forces_write(const char *path, const orb_state *st, const int64_t *ids, const double *pred,
                     int64_t n);
/* The end of `orbits probe` and `orbits oracle`: OUT/forces.csv (orb_forces_write) and
   OUT/probe.json, which is `summary` (the command's own fields; freed here) plus the split's sizes
   and mean_abs_log10_error, the mean |log10 F_pred - log10 F_true| over the rows, also put in *lerr. */
struct cJSON;
int orb_forces_finish(const char *out, const orb_state *st, const orb_force_split *fs, const int64_t *ids,
                      const double *pred, int64_t n, struct cJSON *summary, double *lerr);

/* ------------------------------------------------------ regression head */
/* The head: pred[i] = h[i] . w + b over N rows of width C. */
void orb_head_forward(float *pred, const float *h, const float *w, float b, int N, int C);
/* Masked MSE = sum over mask of (pred - y)^2 / n_mask and its backward: dh (N, C) written (0 off
   the mask), dw (C) and db ACCUMULATED. Returns the loss (0 if nothing is masked in). */
double orb_head_loss_backward(const float *pred, const float *y, const unsigned char *mask, const float *h,
                              const float *w, int N, int C, float *dh, float *dw, float *db);
/* Options of the probe's fine-tuning (defaults: orb_probe_defaults). */
typedef struct {
    int steps, batch;       // optimizer steps; sequences per step
    float lr, head_lr, wd, clip;
    int target_log;         // 1: regress standardised log10 |F| (default); 0: |F| / sd(|F|)
    uint64_t seed;
    int progress;
} orb_probe_opts;
void orb_probe_defaults(orb_probe_opts *o);
/* Fine-tune m (reserved here for training) with a linear head on the labelled rows of s, then
   predict |F| for ids (n). force_dir/split: the force set's token shards. final_loss may be NULL. */
int orb_probe_fit_predict(gpt *m, const char *force_dir, const char *split, const orb_state *st,
                          const orb_force_split *s, const orb_probe_opts *o, const int64_t *ids, int64_t n,
                          double *pred, double *final_loss);

/* ----------------------------------------------------------- law audit */
/* The L1-optimal c of y ~ c g: the weighted median of y_i / g_i with weights |g_i|. *l1 (may be
   NULL) receives mean |y - c g|. n rows; rows with g = 0 are skipped. */
double orb_l1_const(const double *y, const double *g, int n, double *l1);

#endif
