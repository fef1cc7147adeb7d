// kdtree.c - a static k-d tree over float points for exact k-nearest-neighbour queries: the force
// probe's test-row selection (1-NN distance to a labelled row) and the k-NN oracle (k = 2), over
// millions of 6-D states, where brute force (n_test x n_train) would take hours.
//
// Layout: the points are copied in tree order; node h covers [lo, hi) and has children 2h, 2h+1
// (implicit heap numbering), split at the median of its widest dimension. Leaves hold <= LEAF
// points. Queries descend the near side first and visit the far side only if the splitting plane
// is closer than the current k-th best.
#include <float.h>
#include <stdlib.h>
#include <string.h>
#include "core/util.h"
#include "orbits/probe.h"

#define LEAF 16
#define KMAX 16
#define DMAX 8

struct orb_kdtree {
    int d;
    int64_t n;
    float *pts;          // (n, d) in tree order
    int64_t *perm;       // tree order -> original index
    int *dim;            // per node: split dimension (-1: leaf)
    float *val;          // per node: split value
    int64_t nodes;
};

static void swap_pts(float *p, int64_t *perm, int d, int64_t a, int64_t b) {
    float t[DMAX];
    memcpy(t, p + a * d, d * sizeof(float));
    memcpy(p + a * d, p + b * d, d * sizeof(float));
    memcpy(p + b * d, t, d * sizeof(float));
    int64_t q = perm[a]; perm[a] = perm[b]; perm[b] = q;
}

// Quickselect: afterwards point k of [lo, hi) has the k-th value of dimension j, those before it
// are <= and those after >=.
static void select_k(float *p, int64_t *perm, int d, int64_t lo, int64_t hi, int64_t k, int j) {
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        // median of three as the pivot, moved to hi - 1
        float a = p[lo * d + j], b = p[mid * d + j], c = p[(hi - 1) * d + j];
        int64_t piv = (a < b) ? ((b < c) ? mid : (a < c ? hi - 1 : lo))
                              : ((a < c) ? lo : (b < c ? hi - 1 : mid));
        swap_pts(p, perm, d, piv, hi - 1);
        float pv = p[(hi - 1) * d + j];
        int64_t store = lo;
        for (int64_t i = lo; i < hi - 1; i++)
            if (p[i * d + j] < pv) swap_pts(p, perm, d, i, store++);
        swap_pts(p, perm, d, store, hi - 1);
        if (store == k) return;
        if (k < store) hi = store; else lo = store + 1;
    }
}

static void build(orb_kdtree *t, int64_t h, int64_t lo, int64_t hi) {
    if (hi - lo <= LEAF) { t->dim[h] = -1; return; }
    int d = t->d, best = 0;
    float spread = -1.0f;
    for (int j = 0; j < d; j++) {
        float mn = FLT_MAX, mx = -FLT_MAX;
        for (int64_t i = lo; i < hi; i++) {
            float v = t->pts[i * d + j];
            if (v < mn) mn = v;
            if (v > mx) mx = v;
        }
        if (mx - mn > spread) { spread = mx - mn; best = j; }
    }
    int64_t mid = lo + (hi - lo) / 2;
    select_k(t->pts, t->perm, d, lo, hi, mid, best);
    t->dim[h] = best;
    t->val[h] = t->pts[mid * d + best];
    build(t, 2 * h, lo, mid);
    build(t, 2 * h + 1, mid, hi);
}

int orb_kd_build(const float *pts, int64_t n, int d, orb_kdtree **out) {
    *out = NULL;
    if (!pts || n < 1 || d < 1 || d > DMAX)
        return lssar_fail(LSSAR_E_ARG, "orb_kd_build: need n >= 1 points of 1..%d dimensions (n "
                          "= %lld, d = %d)", DMAX, (long long)n, d);
    orb_kdtree *t = calloc(1, sizeof *t);
    if (!t) return lssar_fail(LSSAR_E_NOMEM, "orb_kd_build: out of memory");
    t->d = d; t->n = n;
    // nodes: depth grows until a node holds <= LEAF points; halving rounds up, so 2^(depth+1) covers it
    int64_t nodes = 2, cover = LEAF;
    while (cover < n) { cover *= 2; nodes *= 2; }
    t->nodes = nodes * 2;
    t->pts = malloc((size_t)n * d * sizeof(float));
    t->perm = malloc((size_t)n * sizeof(int64_t));
    t->dim = malloc((size_t)t->nodes * sizeof(int));
    t->val = malloc((size_t)t->nodes * sizeof(float));
    if (!t->pts || !t->perm || !t->dim || !t->val) {
        orb_kd_free(t);
        return lssar_fail(LSSAR_E_NOMEM, "orb_kd_build: out of memory for %lld points", (long long)n);
    }
    memcpy(t->pts, pts, (size_t)n * d * sizeof(float));
    for (int64_t i = 0; i < n; i++) t->perm[i] = i;
    build(t, 1, 0, n);
    *out = t;
    return 0;
}

void orb_kd_free(orb_kdtree *t) {
    if (!t) return;
    free(t->pts); free(t->perm); free(t->dim); free(t->val);
    free(t);
}

typedef struct { int k, m; float d2[KMAX]; int64_t idx[KMAX]; } heap_k;   // sorted ascending, m <= k

static void offer(heap_k *b, float d2, int64_t idx) {
    if (b->m == b->k && d2 >= b->d2[b->m - 1]) return;
    int i = b->m < b->k ? b->m++ : b->m - 1;
    while (i > 0 && b->d2[i - 1] > d2) { b->d2[i] = b->d2[i - 1]; b->idx[i] = b->idx[i - 1]; i--; }
    b->d2[i] = d2; b->idx[i] = idx;
}

static void search(const orb_kdtree *t, int64_t h, int64_t lo, int64_t hi, const float *q, heap_k *b) {
    int d = t->d;
    if (t->dim[h] < 0) {
        for (int64_t i = lo; i < hi; i++) {
            const float *p = t->pts + i * d;
            float s = 0.0f;
            for (int j = 0; j < d; j++) { float u = p[j] - q[j]; s += u * u; }
            offer(b, s, t->perm[i]);
        }
        return;
    }
    int64_t mid = lo + (hi - lo) / 2;
    float diff = q[t->dim[h]] - t->val[h];
    if (diff < 0) {
        search(t, 2 * h, lo, mid, q, b);
        if (b->m < b->k || diff * diff < b->d2[b->m - 1]) search(t, 2 * h + 1, mid, hi, q, b);
    } else {
        search(t, 2 * h + 1, mid, hi, q, b);
        if (b->m < b->k || diff * diff < b->d2[b->m - 1]) search(t, 2 * h, lo, mid, q, b);
    }
}

void orb_kd_knn(const orb_kdtree *t, const float *q, int k, int64_t *idx, float *d2) {
    heap_k b;
    if (k > KMAX) k = KMAX;
    if (k > t->n) k = (int)t->n;
    b.k = k; b.m = 0;
    search(t, 1, 0, t->n, q, &b);
    for (int i = 0; i < b.m; i++) {
        if (idx) idx[i] = b.idx[i];
        if (d2) d2[i] = b.d2[i];
    }
}
