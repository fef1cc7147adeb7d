// forceset.c - the force probe's data (spec/orbits.md, "Force probe"): which rows of the K = 1
// force set are labelled and which are test rows, the standardised state used for nearest
// neighbours, the selection of the test rows nearest to training states, the k-NN oracle, and
// forces.csv.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/json.h"
#include "core/util.h"
#include "orbits/probe.h"

static const float *row_of(const orb_state *st, int64_t id) { return st->rows + (size_t)id * ORB_S_FIELDS; }

int orb_force_split_make(const orb_state *st, int64_t systems, int labelled, uint64_t seed,
                         orb_force_split *s) {
    memset(s, 0, sizeof *s);
    if (!st || !st->rows) return lssar_fail(LSSAR_E_NULL, "orb_force_split_make: no state file");
    if (systems <= 0 || systems > st->n) systems = st->n;
    if (systems < 2)
        return lssar_fail(LSSAR_E_SIZE, "the force set has %lld systems; the 90%%/10%% split needs >= 2 "
                          "(simulate more with `lssar orbits simulate --two-body --state --systems N`)",
                          (long long)systems);
    if (labelled < 0 || labelled >= ORB_PLANET_ROWS)
        return lssar_fail(LSSAR_E_ARG, "labelled rows per test system must be 0..%d, got %d",
                          ORB_PLANET_ROWS - 1, labelled);
    // every planet row of a two-body system is odd: check the file really is a K = 1 set
    for (int64_t i = 0; i < systems; i += systems / 16 + 1) {
        const float *r = row_of(st, i * ORB_ROWS + 2);   // row 2 is the star's first row when K = 1
        if (r[ORB_S_R] != 0.0f || r[ORB_S_MASS] != r[ORB_S_STAR_MASS])
            return lssar_fail(LSSAR_E_FORMAT, "the force set must have one planet per system (system %lld "
                              "does not); make it with `lssar orbits simulate --two-body --state`",
                              (long long)i);
    }
    s->systems = systems;
    s->full = (int64_t)floor(0.9 * (double)systems);
    if (s->full < 1) s->full = 1;
    int64_t ntest_sys = systems - s->full;
    s->ntrain = s->full * ORB_PLANET_ROWS + ntest_sys * labelled;
    s->ntest = ntest_sys * (ORB_PLANET_ROWS - labelled);
    s->train = malloc((size_t)(s->ntrain ? s->ntrain : 1) * sizeof(int64_t));
    s->test = malloc((size_t)(s->ntest ? s->ntest : 1) * sizeof(int64_t));
    if (!s->train || !s->test) {
        orb_force_split_free(s);
        return lssar_fail(LSSAR_E_NOMEM, "force split: out of memory");
    }
    int64_t a = 0, b = 0;
    for (int64_t i = 0; i < s->full; i++)
        for (int j = 0; j < ORB_PLANET_ROWS; j++) s->train[a++] = i * ORB_ROWS + 1 + 2 * j;
    for (int64_t i = s->full; i < systems; i++) {
        // `labelled` distinct planet rows of this system, from its own stream
        unsigned char pick[ORB_PLANET_ROWS] = {0};
        lssar_rng rng;
        lssar_rng_stream(&rng, seed, (uint64_t)i);
        for (int c = 0; c < labelled;) {
            int j = (int)lssar_rng_below(&rng, ORB_PLANET_ROWS);
            if (!pick[j]) { pick[j] = 1; c++; }
        }
        for (int j = 0; j < ORB_PLANET_ROWS; j++) {
            int64_t id = i * ORB_ROWS + 1 + 2 * j;
            if (pick[j]) s->train[a++] = id; else s->test[b++] = id;
        }
    }
    // standardisation of the state over the labelled rows
    static const int fields[ORB_FEAT] = {ORB_S_DX, ORB_S_DY, ORB_S_DVX, ORB_S_DVY, ORB_S_MASS,
                                         ORB_S_STAR_MASS};
    for (int f = 0; f < ORB_FEAT; f++) {
        double sum = 0, sq = 0;
        for (int64_t k = 0; k < s->ntrain; k++) {
            double v = row_of(st, s->train[k])[fields[f]];
            sum += v; sq += v * v;
        }
        double mu = sum / s->ntrain, var = sq / s->ntrain - mu * mu;
        s->mean[f] = (float)mu;
        s->sd[f] = var > 0 ? (float)sqrt(var) : 1.0f;
    }
    return 0;
}

void orb_force_split_free(orb_force_split *s) {
    free(s->train); free(s->test);
    memset(s, 0, sizeof *s);
}

void orb_force_features(const orb_state *st, const orb_force_split *s, int64_t id, float *out) {
    static const int fields[ORB_FEAT] = {ORB_S_DX, ORB_S_DY, ORB_S_DVX, ORB_S_DVY, ORB_S_MASS,
                                         ORB_S_STAR_MASS};
    const float *r = row_of(st, id);
    for (int f = 0; f < ORB_FEAT; f++) out[f] = (r[fields[f]] - s->mean[f]) / s->sd[f];
}

int orb_force_tree(const orb_state *st, const orb_force_split *s, orb_kdtree **out) {
    float *pts = malloc((size_t)s->ntrain * ORB_FEAT * sizeof(float));
    if (!pts) return lssar_fail(LSSAR_E_NOMEM, "force tree: out of memory");
    for (int64_t k = 0; k < s->ntrain; k++) orb_force_features(st, s, s->train[k], pts + k * ORB_FEAT);
    int rc = orb_kd_build(pts, s->ntrain, ORB_FEAT, out);
    free(pts);
    return rc;
}

typedef struct { float d2; int64_t id; } dist_id;
static int cmp_dist(const void *a, const void *b) {
    const dist_id *x = a, *y = b;
    if (x->d2 != y->d2) return x->d2 < y->d2 ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;   // ties: by id, so the selection is deterministic
}

int orb_force_nearest(const orb_state *st, const orb_force_split *s, const orb_kdtree *tree, int64_t keep,
                      int64_t **ids, int64_t *n) {
    *ids = NULL; *n = 0;
    if (s->ntest < 1) return lssar_fail(LSSAR_E_SIZE, "the force split has no test rows (use more systems)");
    orb_kdtree *own = NULL;
    if (!tree) { int rc = orb_force_tree(st, s, &own); if (rc) return rc; tree = own; }
    dist_id *d = malloc((size_t)s->ntest * sizeof *d);
    if (!d) { orb_kd_free(own); return lssar_fail(LSSAR_E_NOMEM, "nearest test rows: out of memory"); }
    #pragma omp parallel for schedule(dynamic, 256)
    for (int64_t k = 0; k < s->ntest; k++) {
        float q[ORB_FEAT], d2;
        int64_t idx;
        orb_force_features(st, s, s->test[k], q);
        orb_kd_knn(tree, q, 1, &idx, &d2);
        d[k].d2 = d2; d[k].id = s->test[k];
    }
    qsort(d, (size_t)s->ntest, sizeof *d, cmp_dist);
    if (keep <= 0 || keep > s->ntest) keep = s->ntest;
    *ids = malloc((size_t)keep * sizeof(int64_t));
    if (!*ids) {
        free(d);
        orb_kd_free(own);
        return lssar_fail(LSSAR_E_NOMEM, "nearest test rows: out of memory");
    }
    for (int64_t k = 0; k < keep; k++) (*ids)[k] = d[k].id;
    *n = keep;
    free(d);
    orb_kd_free(own);
    return 0;
}

int orb_knn_predict(const orb_state *st, const orb_force_split *s, const orb_kdtree *tree, int k,
                    const int64_t *ids, int64_t n, double *pred) {
    if (k < 1 || k > 16) return lssar_fail(LSSAR_E_ARG, "k-NN: k must be 1..16, got %d", k);
    #pragma omp parallel for schedule(dynamic, 64)
    for (int64_t i = 0; i < n; i++) {
        float q[ORB_FEAT], d2[16];
        int64_t nb[16];
        orb_force_features(st, s, ids[i], q);
        orb_kd_knn(tree, q, k, nb, d2);
        double sum = 0;
        for (int j = 0; j < k; j++) sum += row_of(st, s->train[nb[j]])[ORB_S_F];
        pred[i] = sum / k;
    }
    return 0;
}

int orb_forces_write(const char *path, const orb_state *st, const int64_t *ids, const double *pred,
                     int64_t n) {
    lssar_afile af;
    int rc = lssar_afile_open(&af, path);
    if (rc) return rc;
    fprintf(af.f, "r,m1,m2,F_pred,F_true\n");
    for (int64_t i = 0; i < n; i++) {
        const float *r = row_of(st, ids[i]);
        fprintf(af.f, "%.9g,%.9g,%.9g,%.9g,%.9g\n", r[ORB_S_R], r[ORB_S_MASS], r[ORB_S_STAR_MASS], pred[i],
                r[ORB_S_F]);
    }
    return lssar_afile_commit(&af);
}

int orb_forces_finish(const char *out, const orb_state *st, const orb_force_split *fs, const int64_t *ids,
                      const double *pred, int64_t n, cJSON *summary, double *lerr) {
    char path[4400];
    double e = 0;  // how close the predictions are on the kept rows (log10 space: scale-free)
    for (int64_t i = 0; i < n; i++)
        e += fabs(log10(fmax(pred[i], 1e-30)) - log10(fmax(row_of(st, ids[i])[ORB_S_F], 1e-30)));
    *lerr = n > 0 ? e / n : NAN;
    cJSON_AddNumberToObject(summary, "systems", (double)fs->systems);
    cJSON_AddNumberToObject(summary, "labelled_rows", (double)fs->ntrain);
    cJSON_AddNumberToObject(summary, "test_rows", (double)fs->ntest);
    cJSON_AddNumberToObject(summary, "kept_rows", (double)n);
    cJSON_AddNumberToObject(summary, "mean_abs_log10_error", *lerr);
    int rc = lssar_mkdirs(out);
    if (!rc) {
        snprintf(path, sizeof path, "%s/forces.csv", out);
        rc = orb_forces_write(path, st, ids, pred, n);
    }
    if (!rc) { snprintf(path, sizeof path, "%s/probe.json", out); rc = lssar_write_json(path, summary); }
    cJSON_Delete(summary);
    return rc;
}
