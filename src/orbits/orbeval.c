// orbeval.c - `lssar orbits eval`: how well an orbit model predicts the next position, next to the
// trivial "the body stays where it was" baseline.
//
// Each sequence is evaluated whole, aligned at its dt row (window = rows 0..T), exactly as the
// model is meant to see it. Target row r holds body b at step s (orb_row_body); the previous row is
// another body, so the baseline predicts the tokens of row r - (K + 1), the same body one step
// earlier, which exists for s >= 1. The comparison uses those rows only, for both.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/util.h"
#include "data/shard.h"
#include "lssar.h"
#include "exp/stats.h"
#include "orbits/probe.h"

const double ORB_EVAL_BAND_AU[ORB_EVAL_BANDS] = { 0, 5, 10, 20, 30 };

// Distance (AU) between the decoded positions of two (x, y) token pairs; ids past the bins
// (dt tokens, the spare) decode to the nearest edge bin, so a nonsense prediction still costs.
static double decoded_dist(const uint16_t *a, const uint16_t *b) {
    int ax = a[0] < LSSAR_ORB_BINS ? a[0] : LSSAR_ORB_BINS - 1,
        ay = a[1] < LSSAR_ORB_BINS ? a[1] : LSSAR_ORB_BINS - 1;
    int bx = b[0] < LSSAR_ORB_BINS ? b[0] : LSSAR_ORB_BINS - 1,
        by = b[1] < LSSAR_ORB_BINS ? b[1] : LSSAR_ORB_BINS - 1;
    double dx = lssar_orb_unbin(ax) - lssar_orb_unbin(bx), dy = lssar_orb_unbin(ay) - lssar_orb_unbin(by);
    return sqrt(dx * dx + dy * dy);
}

int orb_eval_model(gpt *m, const char *dir, const char *split, int64_t max_systems, int T, int B,
                   int progress, orb_eval_result *r) {
    memset(r, 0, sizeof *r);
    const gpt_config *c = gpt_get_config(m);
    if (c->channels != 2 || c->vocab < LSSAR_ORB_VOCAB - 1)
        return lssar_fail(LSSAR_E_ARG, "the model has %d channel(s) and vocabulary %d; an orbit model has 2 "
                          "channels and vocabulary %d (train it with `lssar train --vocab %d` "
                          "on orbit shards)", c->channels, c->vocab, LSSAR_ORB_VOCAB, LSSAR_ORB_VOCAB);
    if (T < 1 || T > LSSAR_ORB_ROWS - 1)
        return lssar_fail(LSSAR_E_ARG, "--seq must be 1..%d (a sequence has %d rows), got %d",
                          LSSAR_ORB_ROWS - 1, LSSAR_ORB_ROWS, T);
    if (c->pos == LSSAR_POS_LEARNED && T > c->max_seq) T = c->max_seq;   // learned positions stop there
    if (B < 1) B = 1;
    char path[4400];
    orb_meta meta;
    if (orb_path(path, sizeof path, dir, split, "systems", 0))
        return lssar_fail(LSSAR_E_ARG, "path too long: %s", dir);
    int rc = orb_meta_open(&meta, path);
    if (rc) return rc;
    int64_t nsys = meta.n;
    if (max_systems > 0 && max_systems < nsys) nsys = max_systems;
    if (nsys < 1) { orb_meta_close(&meta); return lssar_fail(LSSAR_E_SIZE, "%s holds no systems", path); }
    if ((rc = gpt_reserve(m, B, T, 0))) { orb_meta_close(&meta); return rc; }
    size_t per = (size_t)B * T * 2;
    uint16_t *in = malloc(per * sizeof(uint16_t)), *tg = malloc(per * sizeof(uint16_t)),
             *am = malloc(per * sizeof(uint16_t));
    float *ls = malloc(per * sizeof(float));
    // (nsys) per-system differences
    double *dacc = malloc((size_t)nsys * sizeof(double)), *derr = malloc((size_t)nsys * sizeof(double));
    uint16_t *seq = malloc((size_t)B * LSSAR_ORB_ROWS * 2 * sizeof(uint16_t));
    if (!in || !tg || !am || !ls || !seq || !dacc || !derr) {
        rc = lssar_fail(LSSAR_E_NOMEM, "orbits eval: out of memory");
        goto done;
    }
    double loss = 0, accc = 0, accb = 0, err = 0, caccc = 0, caccb = 0, cerr = 0, baccc = 0, baccb = 0,
           berr = 0;
    int64_t rows = 0, crow = 0, nd = 0;   // nd: systems with compared rows (dacc, derr)
    shard sh = {0};
    int64_t shard_i = -1, shard_first = 0, shard_count = 0;
    lssar_progress pg;
    if (progress) lssar_progress_start(&pg, "orbits eval", "systems", (double)nsys);
    for (int64_t s0 = 0; s0 < nsys; s0 += B) {
        int b = nsys - s0 < B ? (int)(nsys - s0) : B;
        // copy the b sequences (the shard holding system i is found by walking the shards in order)
        for (int k = 0; k < b; k++) {
            int64_t i = s0 + k;
            while (i >= shard_first + shard_count) {
                if (shard_i >= 0) shard_close(&sh);
                shard_first += shard_count;
                shard_i++;
                if (orb_path(path, sizeof path, dir, split, "shard", shard_i)) {
                    rc = lssar_fail(LSSAR_E_ARG, "path too long");
                    goto done_shard;
                }
                if ((rc = shard_open(&sh, path))) { shard_i = -1; goto done_shard; }
                if (sh.channels != 2) {
                    rc = lssar_fail(LSSAR_E_FORMAT, "%s has %d channel(s); orbit shards have 2", path,
                                    sh.channels);
                    goto done_shard;
                }
                if (sh.n % LSSAR_ORB_ROWS || sh.n == 0) {
                    rc = lssar_fail(LSSAR_E_FORMAT, "%s holds %zu rows, not whole %d-row sequences (damaged: "
                                    "regenerate it with `lssar orbits simulate`)", path, sh.n,
                                    LSSAR_ORB_ROWS);
                    goto done_shard;
                }
                for (size_t t = 0; t < sh.n * 2; t++)   // bins 0..ORB_BINS-1 and the two dt tokens
                    if (sh.tokens[t] > ORB_BINS + 1) {
                        rc = lssar_fail(LSSAR_E_FORMAT, "%s: token %u at row %zu is not an orbit token "
                                        "(0..%d): damaged; regenerate it with `lssar orbits simulate`", path,
                                        sh.tokens[t], t / 2, ORB_BINS + 1);
                        goto done_shard;
                    }
                shard_count = (int64_t)(sh.n / LSSAR_ORB_ROWS);
            }
            memcpy(seq + (size_t)k * LSSAR_ORB_ROWS * 2,
                   sh.tokens + (size_t)(i - shard_first) * LSSAR_ORB_ROWS * 2,
                   LSSAR_ORB_ROWS * 2 * sizeof(uint16_t));
        }
        for (int k = 0; k < b; k++) {
            const uint16_t *q = seq + (size_t)k * LSSAR_ORB_ROWS * 2;
            memcpy(in + (size_t)k * T * 2, q, (size_t)T * 2 * sizeof(uint16_t));
            memcpy(tg + (size_t)k * T * 2, q + 2, (size_t)T * 2 * sizeof(uint16_t));
        }
        float bl;
        if ((rc = gpt_forward(m, in, tg, b, T, &bl))) goto done_shard;
        gpt_get_argmax(m, am);
        gpt_get_losses(m, ls);
        for (int k = 0; k < b; k++) {
            const orb_system *sys = &meta.sys[s0 + k];
            int K = sys->K;
            const uint16_t *q = seq + (size_t)k * LSSAR_ORB_ROWS * 2;
            double sacc = 0, serr = 0;   // this system's model - baseline sums over its compared rows
            int64_t srows = 0;
            for (int t = 0; t < T; t++) {
                int row = t + 1, body, step;
                size_t o = ((size_t)k * T + t) * 2;
                const uint16_t *truth = q + (size_t)row * 2, *p = am + o;
                int cx = p[0] == truth[0], cy = p[1] == truth[1];
                double e = decoded_dist(p, truth);
                loss += 0.5 * (ls[o] + ls[o + 1]);
                accc += 0.5 * (cx + cy); accb += cx && cy; err += e; rows++;
                orb_row_body(K, row, &body, &step);
                if (step < 1) continue;
                const uint16_t *prev = q + (size_t)(row - (K + 1)) * 2;
                int px = prev[0] == truth[0], py = prev[1] == truth[1];
                double be = decoded_dist(prev, truth);
                caccc += 0.5 * (cx + cy); caccb += cx && cy; cerr += e;
                baccc += 0.5 * (px + py); baccb += px && py; berr += be;
                sacc += 0.5 * (cx + cy) - 0.5 * (px + py); serr += e - be; srows++;
                double tr = hypot(lssar_orb_unbin(truth[0]), lssar_orb_unbin(truth[1]));   // truth: bins only
                int band = ORB_EVAL_BANDS - 1;
                while (band > 0 && tr < ORB_EVAL_BAND_AU[band]) band--;
                r->band_rows[band]++; r->band_err_au[band] += e; r->band_base_err_au[band] += be;
                crow++;
            }
            if (srows) { dacc[nd] = sacc / srows; derr[nd++] = serr / srows; }
        }
        if (progress) lssar_progress_update(&pg, (double)(s0 + b), NULL);
    }
    r->systems = nsys; r->rows = rows; r->cmp_rows = crow;
    r->loss = loss / rows; r->acc_channel = accc / rows; r->acc_both = accb / rows; r->err_au = err / rows;
    if (crow) {
        r->cmp_acc_channel = caccc / crow; r->cmp_acc_both = caccb / crow; r->cmp_err_au = cerr / crow;
        r->base_acc_channel = baccc / crow; r->base_acc_both = baccb / crow; r->base_err_au = berr / crow;
        exp_mean_ci95(dacc, (int)nd, &r->diff_acc, &r->diff_acc_half);
        exp_mean_ci95(derr, (int)nd, &r->diff_err, &r->diff_err_half);
    }
    for (int i = 0; i < ORB_EVAL_BANDS; i++)   // sums -> means (NaN for an empty band)
        if (r->band_rows[i]) {
            r->band_err_au[i] /= r->band_rows[i];
            r->band_base_err_au[i] /= r->band_rows[i];
        }
        else r->band_err_au[i] = r->band_base_err_au[i] = NAN;
done_shard:
    if (shard_i >= 0) shard_close(&sh);
done:
    free(in); free(tg); free(am); free(ls); free(seq); free(dacc); free(derr);
    orb_meta_close(&meta);
    return rc;
}
