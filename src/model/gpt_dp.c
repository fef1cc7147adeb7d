// gpt_dp.c - data-parallel gradient sums, norms and AdamW over the job's ranks; see gpt_dp.h.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "core/util.h"
#include "core/dist.h"
#include "model/gpt_dp.h"
#include "model/gpt_internal.h"

struct gpt_dp {
    gpt *m;
    int rank, ranks, accum, zero;
    size_t nblocks;            // blocks of GPT_NORM_BLOCK floats over the flat buffers (last one short)
    size_t *off, *cnt;         // (ranks) each: rank r's part, floats
    size_t *b0;                // (ranks + 1): rank r's part is blocks b0[r] .. b0[r+1]-1
    float *total;              // (cnt[rank]) the step's gradient sum of this rank's part (backend
                               // memory); aliases grads_mem + off[rank] when accum == 1
    float *scratch;            // (ranks * cnt[rank]) the pieces being summed; NULL for one rank
    float *mom_m, *mom_v;      // zero 1: (cnt[rank]) AdamW moments of this rank's part
    double *bss, *bss_all;     // (maxb), (ranks * maxb): block sums of squares, host (ranks > 1)
    size_t maxb;
    double *bss_dev;           // (maxb) this rank's block sums of squares, backend memory
    double *all_dev;           // (nblocks) every rank's, in block order, backend memory (ranks > 1)
    float *norm_dev;           // a step's norm when nothing is recorded, backend memory
    // gpt_dp_records: each step's values kept on the backend, `cap` steps, nrec of them so far.
    // rec: (cap, accum, 2) doubles (each micro-batch's loss accumulator: sum, count), then (cap)
    // floats (the norms); one download reads them all. Host: rec_host (rec's bytes), mine
    // (cap * accum) micro-batch losses, all (ranks * cap * accum) every rank's.
    int cap, nrec;
    void *rec;
    double *rec_host, *mine, *all;
    double comm_s;             // seconds spent in the collectives so far (waiting included)
    // the micro-batch being computed (its index in this rank's step), and the blocks of its
    // gradient summed already: [ready_block, nblocks), by the backward's grads_ready calls
    int micro;
    size_t ready_block;
    size_t *boff, *bcnt;       // (ranks) each: a bucket's pieces (part r's share of the bucket)
};

static int grads_ready(void *user, size_t from);

static void part_of(gpt_dp *dp) {
    const size_t n = dp->m->nfloats;
    for (int r = 0; r <= dp->ranks; r++) dp->b0[r] = dp->nblocks * (size_t)r / (size_t)dp->ranks;
    for (int r = 0; r < dp->ranks; r++) {
        size_t lo = dp->b0[r] * GPT_NORM_BLOCK, hi = dp->b0[r + 1] * GPT_NORM_BLOCK;
        if (hi > n) hi = n;
        if (lo > n) lo = n;
        dp->off[r] = lo;
        dp->cnt[r] = hi - lo;
        if (dp->b0[r + 1] - dp->b0[r] > dp->maxb) dp->maxb = dp->b0[r + 1] - dp->b0[r];
    }
}

void gpt_dp_free(gpt_dp *dp) {
    if (!dp) return;
    const nn_backend *be = dp->m->be;
    if (dp->accum > 1) be->release(dp->m->ctx, dp->total);
    be->release(dp->m->ctx, dp->scratch);
    be->release(dp->m->ctx, dp->mom_m);
    be->release(dp->m->ctx, dp->mom_v);
    be->release(dp->m->ctx, dp->bss_dev);
    be->release(dp->m->ctx, dp->all_dev);
    be->release(dp->m->ctx, dp->norm_dev);
    be->release(dp->m->ctx, dp->rec);
    free(dp->rec_host); free(dp->mine); free(dp->all);
    if (dp->m->grads_ready_user == dp) { dp->m->grads_ready = NULL; dp->m->grads_ready_user = NULL; }
    free(dp->off);
    free(dp->cnt);
    free(dp->b0);
    free(dp->bss);
    free(dp->bss_all);
    free(dp->boff);
    free(dp->bcnt);
    free(dp);
}

int gpt_dp_create(gpt *m, int accum, int zero, gpt_dp **out) {
    *out = NULL;
    if (!m) return lssar_fail(LSSAR_E_NULL, "gpt_dp_create: model is NULL");
    if (accum < 1 || (zero != 0 && zero != 1))
        return lssar_fail(LSSAR_E_ARG, "gpt_dp_create: accum %d, zero %d", accum, zero);
    if (!m->be->dist_sum || !m->be->dist_allgather)
        return lssar_fail(LSSAR_E_UNSUPPORTED, "the %s backend has no data-parallel collectives",
                          m->be->name);
    int rc = gpt_zero_grad(m);   // allocates gradients and moments if missing
    if (rc) return rc;
    gpt_dp *dp = calloc(1, sizeof *dp);
    if (!dp) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    dp->m = m; dp->accum = accum; dp->zero = zero;
    dp->rank = lssar_dist_rank(); dp->ranks = lssar_dist_size();
    dp->nblocks = (m->nfloats + GPT_NORM_BLOCK - 1) / GPT_NORM_BLOCK;
    dp->off = calloc(dp->ranks, sizeof(size_t));
    dp->cnt = calloc(dp->ranks, sizeof(size_t));
    dp->b0 = calloc(dp->ranks + 1, sizeof(size_t));
    dp->boff = calloc(dp->ranks, sizeof(size_t));
    dp->bcnt = calloc(dp->ranks, sizeof(size_t));
    if (!dp->off || !dp->cnt || !dp->b0 || !dp->boff || !dp->bcnt) {
        gpt_dp_free(dp);
        return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    }
    part_of(dp);
    const size_t mine = dp->cnt[dp->rank], bytes = (mine ? mine : 1) * sizeof(float);
    dp->bss = calloc(dp->maxb ? dp->maxb : 1, sizeof(double));
    dp->bss_all = calloc((dp->maxb ? dp->maxb : 1) * dp->ranks, sizeof(double));
    if (accum == 1) dp->total = m->grads_mem + dp->off[dp->rank];
    else dp->total = m->be->alloc(m->ctx, bytes);
    if (dp->ranks > 1) dp->scratch = m->be->alloc(m->ctx, bytes * dp->ranks);
    dp->bss_dev = m->be->alloc(m->ctx, (dp->maxb ? dp->maxb : 1) * sizeof(double));
    if (dp->ranks > 1) dp->all_dev = m->be->alloc(m->ctx, (dp->nblocks ? dp->nblocks : 1) * sizeof(double));
    dp->norm_dev = m->be->alloc(m->ctx, 64);
    int ok = dp->bss && dp->bss_all && dp->total && (dp->ranks == 1 || (dp->scratch && dp->all_dev)) &&
             dp->bss_dev && dp->norm_dev;
    if (ok && zero) {
        // this rank's part of the moments (loaded from a checkpoint, or zero); the whole ones go
        dp->mom_m = m->be->alloc(m->ctx, bytes);
        dp->mom_v = m->be->alloc(m->ctx, bytes);
        ok = dp->mom_m && dp->mom_v;
        if (ok) {
            m->be->copy(m->ctx, dp->mom_m, m->adam_m + dp->off[dp->rank], mine * sizeof(float));
            m->be->copy(m->ctx, dp->mom_v, m->adam_v + dp->off[dp->rank], mine * sizeof(float));
            gpt_dp_drop_moments(dp);
        }
    }
    if (!ok) {
        gpt_dp_free(dp);
        return lssar_fail(LSSAR_E_NOMEM, "out of memory for the data-parallel buffers (%zu MiB)",
                          mine * 4 * (size_t)(dp->ranks + 3) >> 20);
    }
    dp->ready_block = dp->nblocks;
    gpt_dp_overlap(dp, m->be->dist_wait != NULL);
    *out = dp;
    return 0;
}

// Sum blocks [b_lo, b_hi) of the micro-batch's gradient over the ranks into the step's sum: each
// rank r receives the share of the bucket inside its part. The sum of every element is the same
// rank-order sum whatever the buckets (it is elementwise), so bucketing changes no bit.
static int sum_bucket(gpt_dp *dp, size_t b_lo, size_t b_hi) {
    gpt *m = dp->m;
    const size_t lo = b_lo * GPT_NORM_BLOCK,
                 hi = b_hi * GPT_NORM_BLOCK < m->nfloats ? b_hi * GPT_NORM_BLOCK : m->nfloats;
    for (int r = 0; r < dp->ranks; r++) {
        size_t a = dp->off[r] > lo ? dp->off[r] : lo,
               b = dp->off[r] + dp->cnt[r] < hi ? dp->off[r] + dp->cnt[r] : hi;
        dp->boff[r] = a;
        dp->bcnt[r] = b > a ? b - a : 0;
    }
    double t0 = lssar_now();
    int rc = m->be->dist_sum(m->ctx, dp->total + (dp->boff[dp->rank] - dp->off[dp->rank]), m->grads_mem,
                             dp->boff, dp->bcnt, dp->micro > 0, dp->scratch);
    dp->comm_s += lssar_now() - t0;
    return rc;
}

// The backward's grads_ready (gpt_internal.h): sum the blocks that have just become final. Every
// rank has the same model, so the same calls with the same buckets, in the same order.
static int grads_ready(void *user, size_t from) {
    gpt_dp *dp = user;
    size_t b = (from + GPT_NORM_BLOCK - 1) / GPT_NORM_BLOCK;   // whole blocks only
    if (b >= dp->ready_block) return 0;
    int rc = sum_bucket(dp, b, dp->ready_block);
    dp->ready_block = b;
    return rc;
}

static double *rec_loss(gpt_dp *dp, int step, int a) {
    return (double *)dp->rec + ((size_t)step * dp->accum + a) * 2;
}
static float *rec_norm(gpt_dp *dp, int step) {
    return (float *)((double *)dp->rec + (size_t)dp->cap * dp->accum * 2) + step;
}
static int rec_full(const gpt_dp *dp) {
    return lssar_fail(LSSAR_E_ARG,
                      "gpt_dp: %d steps recorded, the most gpt_dp_records allows: call gpt_dp_flush first",
                      dp->cap);
}

int gpt_dp_add_grads(gpt_dp *dp, int a) {
    gpt *m = dp->m;
    if (a != dp->micro)
        return lssar_fail(LSSAR_E_ARG, "gpt_dp_add_grads: micro-batch %d of the step, expected %d", a,
                          dp->micro);
    if (dp->cap) {   // the forward's loss, still in its device accumulator (the backward only reads it)
        if (dp->nrec >= dp->cap) return rec_full(dp);
        m->be->copy(m->ctx, rec_loss(dp, dp->nrec, a), m->acts.loss_acc, 2 * sizeof(double));
    }
    int rc = dp->ready_block ? sum_bucket(dp, 0, dp->ready_block) : 0;   // what the backward left
    dp->ready_block = dp->nblocks;
    dp->micro = a + 1;
    if (m->be->dist_wait) m->be->dist_wait(m->ctx);   // before the next zero_grad or the step
    return rc;
}

double gpt_dp_comm_seconds(const gpt_dp *dp) { return dp->comm_s; }

void gpt_dp_overlap(gpt_dp *dp, int on) {
    dp->m->grads_ready = on ? grads_ready : NULL;
    dp->m->grads_ready_user = on ? dp : NULL;
}

// The global norm into *norm (backend memory) and the clip of this rank's part, on the backend:
// the sums of squares of this rank's blocks (one call), and with several ranks every rank's,
// gathered over the host (this rank's downloaded: the step's one wait) and uploaded again in
// block order; then clip_norm adds them in that order (gpt_sum_squares's definition, gpt.h).
static int clip_grads(gpt_dp *dp, float clip, float *norm) {
    gpt *m = dp->m;
    const nn_backend *be = m->be;
    const size_t nb = dp->b0[dp->rank + 1] - dp->b0[dp->rank], n = dp->cnt[dp->rank];
    be->block_sum_squares(m->ctx, dp->bss_dev, dp->total, n, GPT_NORM_BLOCK);
    const double *ss = dp->bss_dev;
    size_t nall = nb;
    if (dp->ranks > 1) {
        memset(dp->bss, 0, dp->maxb * sizeof(double));
        be->download(m->ctx, dp->bss, dp->bss_dev, nb * sizeof(double));
        double t0 = lssar_now();
        int rc = lssar_dist_allgather_f64(dp->bss, dp->maxb, dp->bss_all);
        dp->comm_s += lssar_now() - t0;
        if (rc) return rc;
        nall = 0;   // compacted in place: rank r's blocks follow rank r - 1's
        for (int r = 0; r < dp->ranks; r++)
            for (size_t b = 0; b < dp->b0[r + 1] - dp->b0[r]; b++)
                dp->bss_all[nall++] = dp->bss_all[(size_t)r * dp->maxb + b];
        be->upload(m->ctx, dp->all_dev, dp->bss_all, nall * sizeof(double));
        ss = dp->all_dev;
    }
    be->clip_norm(m->ctx, dp->total, n, ss, nall, clip, norm);
    return 0;
}

int gpt_dp_step(gpt_dp *dp, float clip, int t, float lr, float beta1, float beta2, float eps, float wd,
                float *norm) {
    gpt *m = dp->m;
    const nn_backend *be = m->be;
    const size_t lo = dp->off[dp->rank], n = dp->cnt[dp->rank];
    dp->micro = 0;
    if (dp->cap && dp->nrec >= dp->cap) return rec_full(dp);
    float *nd = dp->cap ? rec_norm(dp, dp->nrec) : dp->norm_dev;
    int rc = clip_grads(dp, clip, nd);
    if (rc) return rc;
    if (dp->cap) dp->nrec++;
    if (norm) {   // the caller waits for the norm, and no update follows a non-finite one
        be->download(m->ctx, norm, nd, sizeof *norm);
        if (!isfinite(*norm)) return 0;   // every rank sees the same NaN: the caller stops them all
    }
    if (!dp->zero) {   // plain data parallelism: the whole gradient everywhere, the whole update
        if (dp->total != m->grads_mem + lo) be->copy(m->ctx, m->grads_mem + lo, dp->total, n * sizeof(float));
        double t0 = lssar_now();
        rc = be->dist_allgather(m->ctx, m->grads_mem, dp->off, dp->cnt, -1);
        dp->comm_s += lssar_now() - t0;
        if (rc) return rc;
        return gpt_adamw_step(m, t, lr, beta1, beta2, eps, wd);
    }
    // ZeRO-1: the tensors (or their pieces) in this rank's part, then everyone's parameters
    gpt_adamw_part(m, lo, n, dp->total, dp->mom_m, dp->mom_v, t, lr, beta1, beta2, eps, wd);
    double t0 = lssar_now();
    rc = be->dist_allgather(m->ctx, m->params_mem, dp->off, dp->cnt, -1);
    dp->comm_s += lssar_now() - t0;
    return rc;
}

int gpt_dp_gather_moments(gpt_dp *dp) {
    if (!dp->zero) return 0;
    gpt *m = dp->m;
    const size_t lo = dp->off[dp->rank], n = dp->cnt[dp->rank];
    // Rank 0 alone holds the whole moments (it writes the checkpoint), so no other rank's memory
    // grows past its part at a save. A sender reads only x + off[its rank]: its own part buffers,
    // passed with that offset 0.
    int rc = 0;
    size_t *off0 = malloc(sizeof(size_t) * dp->ranks);
    if (!off0) rc = lssar_fail(LSSAR_E_NOMEM, "out of memory");
    else {
        memcpy(off0, dp->off, sizeof(size_t) * dp->ranks);
        if (dp->rank) off0[dp->rank] = 0;
    }
    if (!rc && dp->rank == 0) {
        if (!m->adam_m) m->adam_m = m->be->alloc(m->ctx, m->nfloats * sizeof(float));
        if (!m->adam_v) m->adam_v = m->be->alloc(m->ctx, m->nfloats * sizeof(float));
        if (!m->adam_m || !m->adam_v)
            rc = lssar_fail(LSSAR_E_NOMEM,
                            "out of memory gathering the AdamW state for a checkpoint (2 x %zu MiB)",
                            m->nfloats * 4 >> 20);
    }
    if ((rc = lssar_dist_agree(rc))) {
        free(off0);
        gpt_dp_drop_moments(dp);
        return rc;
    }
    float *mm = dp->mom_m, *vv = dp->mom_v;
    if (dp->rank == 0) {
        m->be->copy(m->ctx, m->adam_m + lo, dp->mom_m, n * sizeof(float));
        m->be->copy(m->ctx, m->adam_v + lo, dp->mom_v, n * sizeof(float));
        mm = m->adam_m;
        vv = m->adam_v;
    }
    rc = m->be->dist_allgather(m->ctx, mm, off0, dp->cnt, 0);
    if (!rc) rc = m->be->dist_allgather(m->ctx, vv, off0, dp->cnt, 0);
    free(off0);
    return rc;
}

void gpt_dp_drop_moments(gpt_dp *dp) {
    if (!dp->zero) return;
    gpt *m = dp->m;
    m->be->release(m->ctx, m->adam_m);
    m->be->release(m->ctx, m->adam_v);
    m->adam_m = m->adam_v = NULL;
}

size_t gpt_dp_moment_floats(const gpt_dp *dp) {
    return 2 * (dp->zero ? dp->cnt[dp->rank] : dp->m->nfloats);
}

int gpt_dp_records(gpt_dp *dp, int steps) {
    gpt *m = dp->m;
    if (steps < 0) return lssar_fail(LSSAR_E_ARG, "gpt_dp_records: %d steps", steps);
    if (dp->nrec)
        return lssar_fail(LSSAR_E_ARG, "gpt_dp_records: %d steps recorded are not flushed yet", dp->nrec);
    m->be->release(m->ctx, dp->rec);
    free(dp->rec_host); free(dp->mine); free(dp->all);
    dp->rec = NULL; dp->rec_host = dp->mine = dp->all = NULL;
    dp->cap = 0;
    if (!steps) return 0;
    const size_t nl = (size_t)steps * dp->accum,
                 bytes = nl * 2 * sizeof(double) + (size_t)steps * sizeof(float);
    dp->rec = m->be->alloc(m->ctx, bytes);
    dp->rec_host = malloc(bytes);
    dp->mine = malloc(nl * sizeof(double));
    dp->all = malloc(nl * dp->ranks * sizeof(double));
    if (!dp->rec || !dp->rec_host || !dp->mine || !dp->all) {
        gpt_dp_records(dp, 0);
        return lssar_fail(LSSAR_E_NOMEM, "gpt_dp_records: out of memory for %d steps of records", steps);
    }
    dp->cap = steps;
    return 0;
}

int gpt_dp_flush(gpt_dp *dp, int *nsteps, double *loss, float *norm) {
    gpt *m = dp->m;
    const int n = dp->nrec, G = dp->accum;
    *nsteps = n;
    if (!n) return 0;   // the same on every rank: they all record the same steps
    const size_t nl = (size_t)dp->cap * G * 2;
    m->be->download(m->ctx, dp->rec_host, dp->rec, nl * sizeof(double) + (size_t)n * sizeof(float));
    dp->nrec = 0;
    for (size_t i = 0; i < (size_t)n * G; i++) dp->mine[i] = gpt_loss_of(dp->rec_host + 2 * i);
    const size_t per = (size_t)n * G;   // each rank's losses
    double t0 = lssar_now();
    int rc = lssar_dist_allgather_f64(dp->mine, per, dp->all);
    dp->comm_s += lssar_now() - t0;
    if (rc) return rc;
    const float *nr = (const float *)(dp->rec_host + nl);
    for (int i = 0; i < n; i++) {
        // micro-batch a of rank k is the step's micro-batch a * ranks + k: one process's order
        double s = 0;
        for (int a = 0; a < G; a++)
            for (int k = 0; k < dp->ranks; k++) s += dp->all[(size_t)k * per + (size_t)i * G + a];
        loss[i] = s;
        norm[i] = nr[i];
    }
    return 0;
}
