// repro_tables.c - the tables of the reproduce report computed from the JSON the jobs wrote: the
// rise with length per head size and per cause experiment, the ablation's stage effects (paired by
// seed, 95% t intervals over seeds) and passkey retrieval across kinds (Wilson intervals).
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <cJSON.h>
#include "exp/repro.h"
#include "core/json.h"
#include "exp/passkey.h"
#include "exp/stats.h"

/* The stage effects the ablation measures: run `to` minus run `from`, paired by seed. */
static const struct { const char *stage, *from, *to; } STAGE_STEPS[] = {
    {"QK normalisation with ln(D) ln(n), on softmax", "softmax", "softmax+cos"},
    {"re-weighting p = 15, on softmax + QK norm", "softmax+cos", "softmax+cos+rw-p15"},
    {"re-weighting p = 15, on softmax", "softmax", "softmax+rw-p15"},
    {"re-weighting p = 15, on SSMax", "ssmax", "ssmax+rw-p15"},
    {"re-weighting p = 15, on LSSA", "lssa", "lssar-p15"},
    {"softplus for exp (QK norm, no re-weighting)", "softmax+cos", "lssa"},
    {"softplus for exp (QK norm, re-weighting p = 15)", "softmax+cos+rw-p15", "lssar-p15"},
    {"LSSAR p = 1 instead of 15", "lssar-p15", "lssar-p1"},
    {"LSSAR p = 3 instead of 15", "lssar-p15", "lssar-p3"},
    {"LSSAR p = 7 instead of 15", "lssar-p15", "lssar-p7"},
    {"LSSAR p = 31 instead of 15", "lssar-p15", "lssar-p31"},
};
#define NSTAGE_STEPS (int)(sizeof STAGE_STEPS / sizeof STAGE_STEPS[0])

// The passkey table across kinds: per model group and length the successes over every depth and
// seed, with the Wilson interval; the validation loss of the same models (passkey training).
void repro_passkey_table(FILE *f, const char *out, const repro_scale *sc, cJSON *pj) {
    char tpath[4400];
    snprintf(tpath, sizeof tpath, "%s/passkey/results.json", out);
    cJSON *train = lssar_read_json(tpath);
    int f_[8], nf = repro_ints(sc->p_factors, f_, 8);
    fprintf(f, "| model | validation loss at %d (price of the mix) |", sc->p_seq);
    for (int i = 0; i < nf; i++) fprintf(f, " %dx (%d) |", f_[i], f_[i] * sc->p_seq);
    fprintf(f, "\n|---|---|");
    for (int i = 0; i < nf; i++) fprintf(f, "---|");
    fprintf(f, "\n");
    for (int k = 0; k <= REPRO_NKINDS; k++) {
        char zsl[32];
        repro_zeroshot_label(zsl, sizeof zsl);
        const char *label = k == REPRO_NKINDS ? zsl : REPRO_KINDS[k].run;
        char path[4400];
        snprintf(path, sizeof path, "%s/passkey/passkey-%s.json", out, label);
        cJSON *j = lssar_read_json(path);
        // the validation loss: the group of that name in the training's results.json
        double val = NAN, lo = NAN, hi = NAN;
        const cJSON *g;
        cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(train, "groups")) {
            const cJSON *nm = cJSON_GetObjectItemCaseSensitive(g, "name");
            if (!cJSON_IsString(nm) || strcmp(nm->valuestring, label)) continue;
            const cJSON *r0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(g, "results"), 0);
            const cJSON *m = cJSON_GetObjectItemCaseSensitive(r0, "mean"),
                        *ci = cJSON_GetObjectItemCaseSensitive(r0, "ci95");
            if (cJSON_IsNumber(m)) val = m->valuedouble;
            if (cJSON_GetArraySize(ci) == 2) {
                lo = cJSON_GetArrayItem(ci, 0)->valuedouble;
                hi = cJSON_GetArrayItem(ci, 1)->valuedouble;
            }
        }
        if (isnan(val)) fprintf(f, "| %s | - |", label);  // its training has not run
        else fprintf(f, "| %s | %.3f [%.3f, %.3f] |", label, val, lo, hi);
        for (int i = 0; i < nf; i++) {
            int ok = 0, n = 0;
            const cJSON *r;
            cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(j, "results")) {
                const cJSON *L = cJSON_GetObjectItemCaseSensitive(r, "length");
                if (!cJSON_IsNumber(L) || L->valueint != f_[i] * sc->p_seq) continue;
                const cJSON *succ = cJSON_GetObjectItemCaseSensitive(r, "successes"),
                            *tr = cJSON_GetObjectItemCaseSensitive(r, "trials");
                if (cJSON_IsNumber(succ) && cJSON_IsNumber(tr)) { ok += succ->valueint; n += tr->valueint; }
            }
            if (!n) { fprintf(f, " - |"); continue; }
            double wl, wh;
            wilson_interval(ok, n, 1.96, &wl, &wh);
            fprintf(f, " %s%d/%d = %.2f [%.2f, %.2f]%s |", ok * 10 >= n * 9 ? "**" : "", ok, n,
                    (double)ok / n, wl, wh, ok * 10 >= n * 9 ? "**" : "");
        }
        fprintf(f, "\n");
        if (j) cJSON_AddItemToObject(pj, label, j);
    }
    fprintf(f,
            "\nEach cell: keys retrieved over every depth (and seed) / trials, the share and its 95%% Wilson "
            "interval; bold: at least 90%%. The validation loss is the same models' mean next-token loss on "
            "held-out documents at the training length (%s; `passkey/results.md`). Heatmaps: "
            "`passkey/passkey-MODEL.png`.\n\n",
            sc->p_seeds > 1 ? "mean over seeds, 95% t interval over seeds"
                            : "one seed: 95% interval over the windows");
    cJSON_Delete(train);
}

// The per-seed losses of group `group` at length seq in an extrapolate results.json (NaN-free);
// the count, 0 when absent.
static int group_seeds(const cJSON *res, const char *group, int seq, double *v, int cap) {
    const cJSON *g;
    cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(res, "groups")) {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(g, "name");
        if (!cJSON_IsString(nm) || strcmp(nm->valuestring, group)) continue;
        const cJSON *r;
        cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(g, "results")) {
            const cJSON *T = cJSON_GetObjectItemCaseSensitive(r, "seq");
            if (!cJSON_IsNumber(T) || T->valueint != seq) continue;
            int n = 0;
            const cJSON *x;
            cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(r, "per_seed")) {
                if (!cJSON_IsNumber(x) || n == cap) return 0;
                v[n++] = x->valuedouble;
            }
            return n;
        }
    }
    return 0;
}

// The factor of the head-size rise: 16x (the paper's claim), or the sweep's largest below it.
static int rise_factor(const repro_scale *sc) {
    int f[16], nf = repro_ints(sc->sweep_factors, f, 16), r = 1;
    for (int i = 0; i < nf; i++) if (f[i] <= 16 && f[i] > r) r = f[i];
    return r;
}

// The rise of a group's loss from T to R T, per seed (rise[k]); the count of seeds (0: missing).
#define MAXS 16
static int group_rise(const cJSON *res, const char *group, int T, int R, double *l1, double *l16,
                      double *rise) {
    int n1 = group_seeds(res, group, T, l1, MAXS), n16 = group_seeds(res, group, R * T, l16, MAXS);
    if (n1 < 1 || n1 != n16) return 0;
    for (int k = 0; k < n1; k++) rise[k] = l16[k] - l1[k];
    return n1;
}

// "mean +- half" of x (the 95% t interval), or "-" for none, into buf.
static const char *mean_ci(char *buf, size_t cap, const double *x, int n, cJSON *o, const char *key) {
    double m, h;
    if (n < 1) { snprintf(buf, cap, "-"); return buf; }
    exp_mean_ci95(x, n, &m, &h);
    if (isfinite(h)) snprintf(buf, cap, "%+.3f [%+.3f, %+.3f]", m, m - h, m + h);
    else snprintf(buf, cap, "%+.3f", m);
    if (o) {
        cJSON *e = cJSON_AddObjectToObject(o, key);
        cJSON_AddItemToObject(e, "mean", lssar_json_number(m));
        cJSON *ci = cJSON_AddArrayToObject(e, "ci95");
        cJSON_AddItemToArray(ci, lssar_json_number(m - h));
        cJSON_AddItemToArray(ci, lssar_json_number(m + h));
    }
    return buf;
}

static double mean_of(const double *x, int n) {
    double m, se;
    exp_mean_se(x, n, &m, &se);   // NaN for none
    return m;
}

// The results.json of section 1 for head size D, else of OUT/headsize/dD (NULL: not run).
static cJSON *headsize_results(const char *out, const repro_scale *sc, int D) {
    char path[4400];
    if (D == sc->x_dim / sc->x_heads) snprintf(path, sizeof path, "%s/extrapolate/results.json", out);
    else snprintf(path, sizeof path, "%s/headsize/d%d/results.json", out, D);
    return lssar_read_json(path);
}

// 1d: each run's rise from 1x to 16x, then each stage's effect: the paired difference of the loss
// at 1x, 16x and the longest length, and of the rise.
void repro_ablation_tables(FILE *f, const char *out, const repro_scale *sc, cJSON *root) {
    const int T = sc->x_seq, R = rise_factor(sc);
    int fac[16], nf = repro_ints(sc->sweep_factors, fac, 16), F = 1;
    for (int i = 0; i < nf; i++) if (fac[i] > F) F = fac[i];
    char path[4400];
    snprintf(path, sizeof path, "%s/ablation/results.json", out);
    cJSON *res = lssar_read_json(path);
    cJSON *o = cJSON_AddObjectToObject(root, "ablation_rise");
    fprintf(f,
            "Each run's rise: the loss at %dx minus the loss at 1x, per seed, then the mean [95%% t interval "
            "over %d seeds].\n\n"
            "| run | 1x | %dx | %dx | rise to %dx |\n|---|---|---|---|---|\n",
            R, sc->seeds, R, F, R);
    for (int i = 0; i < REPRO_NABLATION; i++) {
        double l1[MAXS], lr[MAXS], r[MAXS], lf[MAXS];
        int n = group_rise(res, REPRO_ABLATION[i].run, T, R, l1, lr, r),
            nl = group_seeds(res, REPRO_ABLATION[i].run, F * T, lf, MAXS);
        char buf[96];
        cJSON *e = cJSON_AddObjectToObject(o, REPRO_ABLATION[i].run);
        fprintf(f, "| %s | %.3f | %.3f | %.3f | %s |\n", REPRO_ABLATION[i].run, mean_of(l1, n),
                mean_of(lr, n), mean_of(lf, nl), mean_ci(buf, sizeof buf, r, n, e, "rise"));
    }
    cJSON *so = cJSON_AddObjectToObject(root, "ablation_stages");
    fprintf(f,
            "\nEach stage's effect: the run with it minus the run without it, paired by seed (negative: the "
            "stage lowers the loss), at 1x, %dx and %dx, and on the rise to %dx.\n\n"
            "| stage | from -> to | at 1x | at %dx | at %dx | on the rise to %dx "
            "|\n|---|---|---|---|---|---|\n",
            R, F, R, R, F, R);
    for (int i = 0; i < NSTAGE_STEPS; i++) {
        cJSON *e = cJSON_AddObjectToObject(so, STAGE_STEPS[i].stage);
        cJSON_AddStringToObject(e, "from", STAGE_STEPS[i].from);
        cJSON_AddStringToObject(e, "to", STAGE_STEPS[i].to);
        fprintf(f, "| %s | %s -> %s |", STAGE_STEPS[i].stage, STAGE_STEPS[i].from, STAGE_STEPS[i].to);
        static const char *const KEY[3] = {"at_1x", "at_rx", "at_longest"};
        const int at[3] = {1, R, F};
        for (int c = 0; c < 3; c++) {
            double a[MAXS], b[MAXS], d[MAXS];
            int na = group_seeds(res, STAGE_STEPS[i].from, at[c] * T, a, MAXS),
                nb = group_seeds(res, STAGE_STEPS[i].to, at[c] * T, b, MAXS);
            int n = na == nb ? na : 0;
            for (int k = 0; k < n; k++) d[k] = b[k] - a[k];
            char buf[96];
            fprintf(f, " %s |", mean_ci(buf, sizeof buf, d, n, e, KEY[c]));
        }
        double a1[MAXS], ar[MAXS], ra[MAXS], b1[MAXS], br[MAXS], rb[MAXS], d[MAXS];
        int na = group_rise(res, STAGE_STEPS[i].from, T, R, a1, ar, ra),
            nb = group_rise(res, STAGE_STEPS[i].to, T, R, b1, br, rb);
        int n = na == nb ? na : 0;
        for (int k = 0; k < n; k++) d[k] = rb[k] - ra[k];
        char buf[96];
        fprintf(f, " %s |\n", mean_ci(buf, sizeof buf, d, n, e, "on_rise"));
    }
    fprintf(f, "\n");
    cJSON_Delete(res);
}

// The cause experiments, each against the unchanged model of its head size (paired by seed).
static void causes_table(FILE *f, const char *out, const repro_scale *sc, int T, int R, cJSON *root) {
    fprintf(f,
            "\nThe causes: each experiment changes one thing in a model of head size D (same width, data, "
            "seeds); its rise is set against the unchanged model of that D, paired by seed (change - "
            "unchanged).\n\n"
            "| experiment | change | kind | 1x | %dx | rise | rise - unchanged rise "
            "|\n|---|---|---|---|---|---|---|\n",
            R);
    cJSON *co = cJSON_AddObjectToObject(root, "causes");
    for (int i = 0; i < REPRO_NCAUSES; i++) {
        const repro_cause *c = &REPRO_CAUSES[i];
        char path[4400];
        snprintf(path, sizeof path, "%s/causes/%s/results.json", out, c->name);
        cJSON *res = lssar_read_json(path), *base = headsize_results(out, sc, c->D);
        cJSON *o = cJSON_AddObjectToObject(co, c->name);
        cJSON_AddStringToObject(o, "change", c->what);
        static const char *const G[2] = {"softmax", "lssar-p15"};
        for (int g = 0; g < 2; g++) {
            double l1[MAXS], l16[MAXS], r[MAXS], b1[MAXS], b16[MAXS], br[MAXS], d[MAXS];
            int n = group_rise(res, G[g], T, R, l1, l16, r);
            if (!n) continue;
            int nb = group_rise(base, G[g], T, R, b1, b16, br);
            if (nb != n) nb = 0;
            for (int k = 0; k < nb; k++) d[k] = r[k] - br[k];
            cJSON *e = cJSON_AddObjectToObject(o, G[g]);
            cJSON_AddItemToObject(e, "loss_1x", lssar_json_number(mean_of(l1, n)));
            cJSON_AddItemToObject(e, "loss_rx", lssar_json_number(mean_of(l16, n)));
            char b_1[96], b_2[96];
            fprintf(f, "| %s | %s | %s | %.3f | %.3f | %s | %s |\n", c->name, c->what, G[g],
                    mean_of(l1, n), mean_of(l16, n), mean_ci(b_1, sizeof b_1, r, n, e, "rise"),
                    mean_ci(b_2, sizeof b_2, d, nb, e, "rise_minus_unchanged"));
        }
        cJSON_Delete(res);
        cJSON_Delete(base);
    }
    fprintf(f, "\n");
}

// 1c: the rise from 1x to 16x per head size (softmax, lssar p = 15), then the cause experiments,
// each against the unchanged model of its head size (paired by seed).
void repro_headsize_tables(FILE *f, const char *out, const repro_scale *sc, cJSON *root) {
    const int T = sc->x_seq, Dx = sc->x_dim / sc->x_heads, R = rise_factor(sc);
    int ds[9], nds = repro_ints(sc->sweep, ds, 8);
    ds[nds++] = Dx;
    for (int i = 1; i < nds; i++)   // ascending D
        for (int j = i; j > 0 && ds[j] < ds[j - 1]; j--) { int t = ds[j]; ds[j] = ds[j - 1]; ds[j - 1] = t; }
    cJSON *arr = cJSON_AddArrayToObject(root, "head_size");
    cJSON_AddNumberToObject(root, "head_size_rise_factor", R);
    fprintf(f,
            "Width %d, 2 kinds x %d seeds per head size D = %d / heads, trained at T = %d. Rise: the loss at "
            "%dx (T = %d) minus the loss at 1x, per seed, then the mean [95%% t interval over seeds]. lssar "
            "- softmax: the paired difference at %dx.\n\n"
            "| D | heads | softmax 1x | softmax %dx | softmax rise | lssar p=15 1x | lssar p=15 %dx | lssar "
            "p=15 rise | lssar - softmax at %dx |\n"
            "|---|---|---|---|---|---|---|---|---|\n",
            sc->x_dim, sc->seeds, sc->x_dim, T, R, R * T, R, R, R, R);
    for (int i = 0; i < nds; i++) {
        cJSON *res = headsize_results(out, sc, ds[i]);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "D", ds[i]);
        cJSON_AddNumberToObject(o, "heads", sc->x_dim / ds[i]);
        fprintf(f, "| %d | %d |", ds[i], sc->x_dim / ds[i]);
        double l1[2][MAXS], l16[2][MAXS], r[2][MAXS], d[MAXS];
        int n[2];
        static const char *const G[2] = {"softmax", "lssar-p15"};
        for (int g = 0; g < 2; g++) {
            char buf[96];
            n[g] = group_rise(res, G[g], T, R, l1[g], l16[g], r[g]);
            cJSON *e = cJSON_AddObjectToObject(o, G[g]);
            cJSON_AddItemToObject(e, "loss_1x", lssar_json_number(mean_of(l1[g], n[g])));
            cJSON_AddItemToObject(e, "loss_rx", lssar_json_number(mean_of(l16[g], n[g])));
            fprintf(f, " %.3f | %.3f | %s |", mean_of(l1[g], n[g]), mean_of(l16[g], n[g]),
                    mean_ci(buf, sizeof buf, r[g], n[g], e, "rise"));
        }
        char buf[96];
        int nd = n[0] == n[1] ? n[0] : 0;
        for (int k = 0; k < nd; k++) d[k] = l16[1][k] - l16[0][k];
        fprintf(f, " %s |\n", mean_ci(buf, sizeof buf, d, nd, o, "lssar_minus_softmax_rx"));
        cJSON_AddItemToArray(arr, o);
        cJSON_Delete(res);
    }
    causes_table(f, out, sc, T, R, root);
}
