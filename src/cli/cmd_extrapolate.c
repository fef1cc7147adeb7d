// cmd_extrapolate.c - `lssar extrapolate`: train one model per attention kind with the same data
// order, size, seed and budget, then evaluate each at T x factor (src/exp/).
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "args.h"
#include "lssar.h"
#include "data/shard.h"
#include "exp/common.h"
#include "exp/docwin.h"
#include "exp/downstream.h"
#include "exp/mqar.h"
#include "exp/passkey.h"
#include "exp/plot.h"
#include "exp/stats.h"
#include "attn/attn.h"
#include "model/checkpoint.h"
#include "train/train.h"
#include "core/json.h"
#include "core/dist.h"

static const char *ABOUT =
    "Length extrapolation: train one model per attention kind (identical data order, size, seed and\n"
    "step budget), then evaluate each at T x factor for every --factors entry.\n"
    "\n"
    "--task text (default): --data DIR is a folder written by `lssar data build` (train_*.bin, val.bin,\n"
    "val_index.json). Evaluation windows lie inside one held-out document each (val_index.json);\n"
    "at most --max-windows per length, evenly spaced, the same windows for every run; the table gives\n"
    "the mean next-token loss +- the half-width of its 95% interval (see --seeds).\n"
    "--task mqar: multi-query associative recall (Zoology): --pairs key-value pairs then the keys as\n"
    "queries; trained at --seq, tested on --mqar-eval fresh sequences per length; the table gives the\n"
    "accuracy of the values predicted after the queries (95% Wilson interval in results.json). Each\n"
    "training sequence is exactly one training window (T + 1 tokens; windows start only at sequence\n"
    "boundaries, train --align T+1), so every query's pair is in the window.\n"
    "\n"
    "--passkey-mix F (text task): each kind is trained with a share F of its windows replaced by passkey\n"
    "sequences (train --passkey-mix; byte data needs --seq >= 257); test them with `lssar passkey`\n"
    "(with --seeds N, all seeds of a kind pooled: --model OUT/KIND,OUT/KIND-s1,...,OUT/KIND-s{N-1}).\n"
    "\n"
    "Runs: every kind in --attn; lssar once per power in --lssar-p (default 15; e.g. 15,3); and, when lssa\n"
    "is trained, the lssa model evaluated with LSSAR re-weighting switched on at evaluation only\n"
    "(p = the first --lssar-p): the paper's \"fine-tuning-free\" claim.\n"
    "\n"
    "--seeds N: every run is trained N times, with seeds --seed, --seed + 1, ..., --seed + N - 1, in\n"
    "folders RUN (seed index 0: the names of a one-seed call), RUN-s1, ..., RUN-s(N-1); the kinds of\n"
    "one seed index share the seed, hence the initialisation stream and the data order (a paired\n"
    "design). Per run group (kind or power) and length: the mean over seeds of the per-seed mean\n"
    "with the 95% Student t interval mean +- t(0.975, N-1) sd / sqrt(N), and, when softmax is among\n"
    "the kinds, the paired difference to softmax: d_K = mean over the (identical) windows of\n"
    "loss(run, seed K) - loss(softmax, seed K), with its t interval over the N values d_K; the\n"
    "difference table of results.md marks (bold) only the cells whose interval excludes 0. With one\n"
    "seed (the default) the intervals are over windows only (mean +- 1.96 standard errors, of the\n"
    "per-window loss or per-window difference; mqar: the Wilson interval, no interval for the\n"
    "difference): they leave out the variation between trainings.\n"
    "\n"
    "Writes --out/RUN/ (each run's checkpoint and log.jsonl), --out/results.json\n"
    "({\"seeds\", \"interval\", \"groups\": [{\"name\", \"attn\", \"p\", \"eval_only\", \"runs\", \"seeds\",\n"
    "\"results\": [{\"seq\", \"mean\", \"ci95\": [lo, hi], \"per_seed\", \"windows\", \"diff_vs_softmax\":\n"
    "{\"mean\", \"ci95\", \"excludes_zero\", \"per_seed\"}}]}], \"runs\": [{\"name\", \"group\", \"seed\",\n"
    "\"attn\", \"p\", \"train_seq\", \"results\": [{\"seq\", \"loss\", \"stderr\", \"windows\"}]}]}),\n"
    "--out/results.md (tables) and --out/loss_vs_length.png (group means with their intervals;\n"
    "gnuplot; skipped with a note if missing). The text task also gives the loss at each position of\n"
    "the longest windows, in 64 bins (where each kind breaks past its training length): each group's\n"
    "\"per_position\": {\"seq\", \"bin\", \"start\", \"loss\"} (mean over seeds), each run's \"per_position\"\n"
    "(the bins' losses), a table of results.md by position range and --out/loss_vs_position.png.\n"
    "Resumable: a run whose model reached --steps is not retrained; an interrupted one resumes from\n"
    "its checkpoint; evaluations, with their per-window losses, are cached in RUN/extrap*.json (a\n"
    "cache without them, from an older version, is recomputed).\n"
    "\n"
    "--downstream TASKS (text task, GPT-2-tokenizer data): also score every run zero-shot on these\n"
    "`lssar downstream` tasks (e.g. hellaswag,piqa or all; the first --downstream-limit documents of\n"
    "each, 0: all) and put acc / acc_norm with 95% Wilson intervals and chance into results.json\n"
    "(each run's \"downstream\") and a second table of results.md; cached in RUN/downstream*.json.\n"
    "With --seeds N >= 2 a third table pools the seeds: per group and task the mean acc_norm (LAMBADA:\n"
    "acc) with its 95% t interval and the paired difference to softmax (each group's \"downstream\":\n"
    "[{\"task\", \"metric\", \"mean\", \"ci95\", \"per_seed\", \"diff_vs_softmax\"}]).\n"
    "\n"
    "Under mpirun -np N the runs (of every seed) are spread over the ranks (run i of the list on\n"
    "rank i mod N; rank 0 prints which): each rank trains and evaluates its runs as one process\n"
    "would, and rank 0 writes results.*, the same numbers as one process. --out must be a folder\n"
    "every rank sees (a shared filesystem): each run's folder is written by the rank that trains it,\n"
    "the lssa->lssar run reads the lssa checkpoint, and rank 0 reads every run's cached evaluation.\n"
    "--threads is per rank (docs/DISTRIBUTED.md).";

#define MAXF 16
#define MAXB 16    // runs per seed: the kinds, the lssar powers, the lssa->lssar evaluation
#define MAXR 256   // runs in all: MAXB x --seeds at most
#define MAXD 8
#define NPB 64     // text: bins of the per-position loss over the longest windows

typedef struct {
    char name[64];      // run directory / table label
    lssar_attn_kind attn; // kind evaluated
    float p;
    int eval_only;      // 1: evaluate the model trained in dir `src` with `attn` switched on
    char src[64];
    int group;          // index of its run in the first seed's list: the runs of one group differ only in seed
    int seed_ix;        // 0 .. --seeds - 1: trained with --seed + seed_ix
    int64_t step;
    double train_s;
    double loss[MAXF], se[MAXF], lo[MAXF], hi[MAXF];
    int windows[MAXF];
    double pos_loss[NPB]; // text: mean loss per token in bins of pos_bin positions of the longest windows
    int pos_bins;         // how many (0: no window of the longest length)
    ds_result ds[MAXD];   // --downstream results, one per task
} run_t;

// The per-position curve's bin width at the longest length T: NPB bins (1 position each below).
static int pos_bin_width(int T) { return T >= NPB ? (T + NPB - 1) / NPB : 1; }

// Mean the T per-position losses into bins of pos_bin_width(T) positions.
static void bin_positions(run_t *r, const double *pp, int T) {
    const int w = pos_bin_width(T);
    r->pos_bins = (T + w - 1) / w;
    for (int b = 0; b < r->pos_bins; b++) {
        double s = 0;
        int n = 0;
        for (int t = b * w; t < T && t < (b + 1) * w; t++, n++) s += pp[t];
        r->pos_loss[b] = s / n;
    }
}

static int file_exists(const char *p) { struct stat st; return stat(p, &st) == 0; }

// How a run's model is loaded for evaluation: a zero-shot run (eval_only) switches the kind.
static ckpt_load_opts run_load_opts(const run_t *r, lssar_device device) {
    ckpt_load_opts o = {.device = device};
    if (r->eval_only) { o.set_attn = 1; o.attn = (lssar_attn_kind)r->attn; o.p = r->p; }
    return o;
}

// Train (or resume) one run unless its model already reached the step budget.
static int ensure_trained(const train_opts *base, const char *out, run_t *r, int quiet) {
    char dir[4096], mp[4200], tp[4200];
    snprintf(dir, sizeof dir, "%s/%s", out, r->name);
    snprintf(mp, sizeof mp, "%s/%s", dir, CKPT_MODEL_FILE);
    snprintf(tp, sizeof tp, "%s/%s", dir, CKPT_TRAINER_FILE);
    if (file_exists(mp)) {
        gpt *g = NULL;
        int64_t step = 0;
        int rc = ckpt_load_model(dir, &(ckpt_load_opts){.device = base->device}, &g, &step);
        if (rc) return rc;
        // a folder left by a different experiment must not pass for this one
        const gpt_config *c = gpt_get_config(g);
        int same = c->layers == base->layers && c->heads == base->heads && c->dim == base->dim &&
                   (base->vocab == 0 || c->vocab == base->vocab) && (int)c->attn == r->attn &&
                   (!attn_reweights(r->attn) || c->p == r->p) && c->pos == base->pos && c->max_seq == base->seq &&
                   c->rope_base == base->rope_base && c->temp_d == base->temp_d;
        gpt_free(g);
        if (!same)
            return lssar_fail(LSSAR_E_ARG, "%s holds a model with another configuration (layers, heads, dim, vocab, attention, positions, seq, RoPE base or temperature D differ): delete it or choose another --out", dir);
        // the data recipe too: window alignment (mqar) and the passkey share
        int align = (int)exp_trainer_meta(dir, "align", 1);
        double mix = exp_passkey_mix(dir);
        int prompt = exp_passkey_prompt(dir);
        if (align != base->align || fabs(mix - base->passkey_mix) > 1e-6 || (mix > 0 && prompt != base->passkey_prompt))
            return lssar_fail(LSSAR_E_ARG, "%s was trained with align %d and passkey mix %g (%s prompt), this call asks for align %d and passkey mix %g (%s prompt): delete it or choose another --out",
                              dir, align, mix, passkey_prompt_name((passkey_prompt)prompt), base->align, (double)base->passkey_mix,
                              passkey_prompt_name((passkey_prompt)base->passkey_prompt));
        // and the seed: run -sK is trained with --seed + K
        double sd = exp_trainer_meta(dir, "seed", NAN);
        if (isfinite(sd) && sd < 9007199254740992.0 && (uint64_t)sd != base->seed + (uint64_t)r->seed_ix)
            return lssar_fail(LSSAR_E_ARG, "%s was trained with seed %.0f, this call trains it with seed %llu (--seed + its seed index): delete it or choose another --out",
                              dir, sd, (unsigned long long)(base->seed + (uint64_t)r->seed_ix));
        if (step >= base->steps) {
            if (!quiet) fprintf(stderr, "extrapolate: %s already trained (%lld steps), not retrained\n", r->name, (long long)step);
            r->step = step;
            return 0;
        }
    }
    train_opts o = *base;
    o.out = dir;
    o.attn = (lssar_attn_kind)r->attn;
    o.p = r->p;
    o.seed = base->seed + (uint64_t)r->seed_ix;   // seed index K: the same init seed and data order for every kind
    if (file_exists(mp) && file_exists(tp)) {
        o.resume = 1;
        if (!quiet) fprintf(stderr, "extrapolate: resuming %s\n", r->name);
    } else if (!quiet) fprintf(stderr, "extrapolate: training %s (%d steps, T = %d)\n", r->name, o.steps, o.seq);
    train_result res;
    double t0 = lssar_now();
    int rc = train_run(&o, &res);
    if (rc) return rc;
    r->step = res.step;
    r->train_s = lssar_now() - t0;
    // remember the wall time beside the checkpoint (a later resumable call reads it back)
    char wp[4200], buf[64];
    snprintf(wp, sizeof wp, "%s/train_seconds.txt", dir);
    snprintf(buf, sizeof buf, "%.1f\n", r->train_s);
    exp_write_text(wp, buf);
    return 0;
}

static double read_train_seconds(const char *out, const char *name) {
    char wp[4200];
    snprintf(wp, sizeof wp, "%s/%s/train_seconds.txt", out, name);
    char *s = NULL;
    size_t n;
    if (lssar_read_file(wp, &s, &n)) return NAN;
    double v = atof(s);
    free(s);
    return v;
}

// The cache key of an evaluation: everything its numbers depend on.
static void cache_key(char *buf, size_t n, const char *task, const int *seqs, int nf, int maxw, int64_t step, const char *extra) {
    int k = snprintf(buf, n, "%s|step=%lld|maxw=%d|%s|seqs=", task, (long long)step, maxw, extra);
    for (int i = 0; i < nf && k < (int)n; i++) k += snprintf(buf + k, n - k, "%d,", seqs[i]);
}

// Where a run's evaluation is cached: RUN/extrap.json, RUN/extrap-NAME.json for a run that only
// evaluates the model of RUN (lssa->lssar).
static void cache_path(char *buf, size_t n, const char *out, const run_t *r) {
    if (r->eval_only) snprintf(buf, n, "%s/%s/extrap-%s.json", out, r->src, r->name);
    else snprintf(buf, n, "%s/%s/extrap.json", out, r->src);
}

// Read a cached evaluation into r; 1 if it is there, under key (NULL: any key), and complete. The
// text task's entries must hold the per-window losses (window_losses, the paired statistics'
// input): a cache of an older version without them counts as absent and is recomputed. win, if
// not NULL, receives them (win[i] malloc'd, r->windows[i] entries; the caller frees them).
static int load_cache(const char *path, const char *key, run_t *r, int nf, int mqar, double **win) {
    char *s = NULL;
    size_t n;
    if (win) for (int i = 0; i < nf; i++) win[i] = NULL;
    if (lssar_read_file(path, &s, &n)) return 0;
    cJSON *j = cJSON_Parse(s);
    free(s);
    if (!j) return 0;
    cJSON *k = cJSON_GetObjectItem(j, "key"), *res = cJSON_GetObjectItem(j, "results");
    int ok = (!key || (cJSON_IsString(k) && !strcmp(k->valuestring, key))) && cJSON_IsArray(res) && cJSON_GetArraySize(res) == nf;
    // the text task's per-position curve (absent in caches of older versions: recomputed)
    cJSON *pp = cJSON_GetObjectItem(j, "per_position");
    if (ok && !mqar) ok = cJSON_IsArray(pp) && cJSON_GetArraySize(pp) <= NPB;
    r->pos_bins = 0;
    if (ok && !mqar) {
        cJSON *x;
        cJSON_ArrayForEach(x, pp) r->pos_loss[r->pos_bins++] = cJSON_IsNumber(x) ? x->valuedouble : NAN;
    }
    for (int i = 0; ok && i < nf; i++) {
        cJSON *e = cJSON_GetArrayItem(res, i);
        cJSON *l = cJSON_GetObjectItem(e, "loss"), *se = cJSON_GetObjectItem(e, "stderr"), *w = cJSON_GetObjectItem(e, "windows");
        cJSON *lo = cJSON_GetObjectItem(e, "lo"), *hi = cJSON_GetObjectItem(e, "hi");
        r->loss[i] = cJSON_IsNumber(l) ? l->valuedouble : NAN;
        r->se[i] = cJSON_IsNumber(se) ? se->valuedouble : NAN;
        r->lo[i] = cJSON_IsNumber(lo) ? lo->valuedouble : NAN;
        r->hi[i] = cJSON_IsNumber(hi) ? hi->valuedouble : NAN;
        r->windows[i] = cJSON_IsNumber(w) ? w->valueint : 0;
        if (mqar) continue;
        cJSON *wl = cJSON_GetObjectItem(e, "window_losses");
        ok = cJSON_IsArray(wl) && r->windows[i] >= 0 && cJSON_GetArraySize(wl) == r->windows[i];
        if (ok && win && r->windows[i] > 0) {
            ok = (win[i] = malloc((size_t)r->windows[i] * sizeof **win)) != NULL;
            int t = 0;
            cJSON *x;
            cJSON_ArrayForEach(x, wl) if (ok) { ok = cJSON_IsNumber(x) || cJSON_IsNull(x); win[i][t++] = cJSON_IsNumber(x) ? x->valuedouble : NAN; }
        }
    }
    cJSON_Delete(j);
    if (!ok && win) for (int i = 0; i < nf; i++) { free(win[i]); win[i] = NULL; }
    return ok;
}


static cJSON *results_json(const run_t *r, const int *seqs, int nf, int mqar) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < nf; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "seq", seqs[i]);
        if (mqar) {
            cJSON_AddItemToObject(e, "accuracy", lssar_json_number(r->loss[i]));
            cJSON_AddItemToObject(e, "lo", lssar_json_number(r->lo[i]));
            cJSON_AddItemToObject(e, "hi", lssar_json_number(r->hi[i]));
            cJSON_AddNumberToObject(e, "queries", r->windows[i]);
        } else {
            cJSON_AddItemToObject(e, "loss", lssar_json_number(r->loss[i]));
            cJSON_AddItemToObject(e, "stderr", lssar_json_number(r->se[i]));
            cJSON_AddNumberToObject(e, "windows", r->windows[i]);
        }
        cJSON_AddItemToArray(a, e);
    }
    return a;
}

// win: the text task's per-window losses, win[i] of r->windows[i] (NULL for mqar).
static int save_cache(const char *path, const char *key, const run_t *r, const int *seqs, int nf, int mqar, double *const *win) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "key", key);
    cJSON *a = results_json(r, seqs, nf, mqar);
    // keep loss/stderr names for the reader whatever the task
    cJSON *e;
    int i = 0;
    cJSON_ArrayForEach(e, a) {
        if (mqar) { cJSON_AddItemToObject(e, "loss", lssar_json_number(r->loss[i])); cJSON_AddNumberToObject(e, "windows", r->windows[i]); }
        else {
            cJSON *wl = cJSON_AddArrayToObject(e, "window_losses");
            for (int w = 0; w < r->windows[i]; w++) cJSON_AddItemToArray(wl, lssar_json_number(win[i][w]));
        }
        i++;
    }
    cJSON_AddItemToObject(j, "results", a);
    if (!mqar) {
        cJSON *pp = cJSON_AddArrayToObject(j, "per_position");
        for (int b = 0; b < r->pos_bins; b++) cJSON_AddItemToArray(pp, lssar_json_number(r->pos_loss[b]));
    }
    int rc = lssar_write_json(path, j);
    cJSON_Delete(j);
    return rc;
}

// Every rank's runs to every rank: run i is filled in by rank i mod N (cmd_extrapolate), whose
// run_t arrives whole (plain numbers and strings: the ranks run the same build), so rank 0 writes
// from the same bits one process would have.
static int gather_runs(run_t *runs, int nr) {
    const int rank = lssar_dist_rank(), ranks = lssar_dist_size();
    if (ranks == 1) return 0;
    int mine = 0;
    for (int i = rank; i < nr; i += ranks) mine++;
    run_t *buf = malloc((mine ? mine : 1) * sizeof *buf);
    int rc = lssar_dist_agree(buf ? 0 : lssar_fail(LSSAR_E_NOMEM, "out of memory"));
    if (rc) { free(buf); return rc; }
    for (int i = rank, k = 0; i < nr; i += ranks) buf[k++] = runs[i];
    char *all = NULL;
    size_t total = 0;
    rc = lssar_dist_allgather_bytes(buf, mine * sizeof *buf, &all, &total, NULL);
    if (!rc && total != (size_t)nr * sizeof *buf)
        rc = lssar_fail(LSSAR_E_SIZE, "extrapolate: the ranks returned %zu bytes of results, %zu expected", total, (size_t)nr * sizeof *buf);
    for (int q = 0, at = 0; !rc && q < ranks; q++) {   // rank q's runs q, q + N, ... in that order
        const run_t *from = (const run_t *)(all + (size_t)at * sizeof *buf);
        int k = 0;
        for (int i = q; i < nr; i += ranks) runs[i] = from[k++];
        at += k;
    }
    free(all); free(buf);
    return rc;
}

// A group (one run of the first seed's list and its repeats with the other seeds) at one length:
// the mean over seeds and its 95% interval, and the paired difference to the softmax group.
typedef struct {
    double mean, lo, hi;        // NaN where there is nothing (no windows, no interval)
    double dmean, dlo, dhi;     // group - softmax; NaN without a softmax group
    double *dseed;              // the difference of each seed (seeds entries)
} gstat;

// The statistics of every group at every length (gs[b * nf + f]), from the runs' numbers and,
// for the text task, the per-window losses of their caches (win[i * nf + f], r->windows[f] each).
//   seeds >= 2: the t interval over seeds (src/exp/stats.h) of the per-seed means, and of the
//               per-seed paired differences d_K = mean over windows w of loss(run, K, w) -
//               loss(softmax, K, w) (the same windows: they depend only on the data and T);
//   one seed:   the windows' variation only: mean +- 1.96 x its standard error over windows, and
//               the same for the per-window differences (paired); for mqar, the Wilson interval of
//               the accuracy and no interval for the difference.
// The softmax group's own difference is exactly 0 (every window minus itself).
static void group_stats(const run_t *runs, int nb, int seeds, int nf, int mqar, double *const *win, int sg, gstat *gs) {
    double *v = malloc((size_t)seeds * sizeof *v);
    for (int b = 0; b < nb; b++)
        for (int f = 0; f < nf; f++) {
            gstat *g = &gs[b * nf + f];
            g->mean = g->lo = g->hi = g->dmean = g->dlo = g->dhi = NAN;
            for (int k = 0; k < seeds; k++) g->dseed[k] = NAN;
            int fin = 1;
            for (int k = 0; k < seeds; k++) fin &= isfinite(v[k] = runs[k * nb + b].loss[f]);
            if (!fin) continue;
            const run_t *r0 = &runs[b];
            if (seeds >= 2) {
                double h;
                exp_mean_ci95(v, seeds, &g->mean, &h);
                g->lo = g->mean - h; g->hi = g->mean + h;
            } else if (mqar) {
                g->mean = r0->loss[f]; g->lo = r0->lo[f]; g->hi = r0->hi[f];
            } else {
                g->mean = r0->loss[f];
                if (r0->windows[f] >= 2) { g->lo = g->mean - 1.96 * r0->se[f]; g->hi = g->mean + 1.96 * r0->se[f]; }
            }
            if (sg < 0) continue;
            double dse = NAN;
            for (int k = 0; k < seeds; k++) {
                const int i = k * nb + b, j = k * nb + sg;
                if (mqar) { g->dseed[k] = runs[i].loss[f] - runs[j].loss[f]; continue; }
                const int W = runs[i].windows[f];
                if (W != runs[j].windows[f] || W < 1 || !win[i * nf + f] || !win[j * nf + f]) { fin = 0; break; }
                double *d = malloc((size_t)W * sizeof *d);
                if (!d) { fin = 0; break; }
                for (int w = 0; w < W; w++) d[w] = win[i * nf + f][w] - win[j * nf + f][w];
                exp_mean_se(d, W, &g->dseed[k], &dse);
                if (W < 2) dse = NAN;
                free(d);
            }
            if (!fin) continue;
            if (seeds >= 2) {
                double h;
                exp_mean_ci95(g->dseed, seeds, &g->dmean, &h);
                g->dlo = g->dmean - h; g->dhi = g->dmean + h;
            } else {
                g->dmean = g->dseed[0];
                if (!mqar) { g->dlo = g->dmean - 1.96 * dse; g->dhi = g->dmean + 1.96 * dse; }
            }
        }
    free(v);
}

// The score a pooled downstream table reports: acc_norm for a multiple-choice task (the
// length-normalised accuracy, the usual headline), acc for LAMBADA's last word.
static double ds_score(const ds_result *d) { return d->lambada ? d->acc : d->acc_norm; }

// Group b on downstream task t over the seeds (seeds >= 2): the mean of the per-seed scores with
// the half-width of its 95% t interval, and the same for the per-seed differences to the softmax
// group (paired by seed index, over the same documents).
typedef struct { double mean, half, dmean, dhalf; } dsstat;
static dsstat ds_group_stats(const run_t *runs, int nb, int seeds, int b, int sg, int t) {
    dsstat s = {NAN, NAN, NAN, NAN};
    double v[MAXR], dv[MAXR];
    for (int k = 0; k < seeds; k++) {
        v[k] = ds_score(&runs[k * nb + b].ds[t]);
        if (sg >= 0) dv[k] = v[k] - ds_score(&runs[k * nb + sg].ds[t]);
    }
    exp_mean_ci95(v, seeds, &s.mean, &s.half);
    if (sg >= 0) exp_mean_ci95(dv, seeds, &s.dmean, &s.dhalf);
    return s;
}

static cJSON *pair_or_null(double lo, double hi) {
    if (!isfinite(lo) || !isfinite(hi)) return cJSON_CreateNull();
    cJSON *a = cJSON_CreateArray();
    cJSON_AddItemToArray(a, cJSON_CreateNumber(lo));
    cJSON_AddItemToArray(a, cJSON_CreateNumber(hi));
    return a;
}

// What write_results needs from cmd_extrapolate, under the names it has there.
typedef struct {
    run_t *runs;
    int nr, nb, seeds;   // nr = nb x seeds runs: group b's are runs b, nb + b, ...
    const int *seqs, *fac;
    int nf, mqar;
    const char *task, *data, *hash;
    int max_windows, pairs, mqar_keys, mqar_values, mqar_eval_n, nds;
    char (*ds_names)[64];
    int downstream_limit;
    const train_opts *o;
    int steps;
    const char *pos, *out;
    int no_plot;
    double t_all;
} results_ctx;

// results.json, results.md (and its table on stdout) and the plot: rank 0's part.
static int write_results(const results_ctx *c) {
    run_t *runs = c->runs;
    const int nr = c->nr, *seqs = c->seqs, *fac = c->fac, nf = c->nf, mqar = c->mqar, max_windows = c->max_windows;
    const int pairs = c->pairs, mqar_keys = c->mqar_keys, mqar_values = c->mqar_values, mqar_eval_n = c->mqar_eval_n;
    const int nds = c->nds, downstream_limit = c->downstream_limit, steps = c->steps, no_plot = c->no_plot;
    const char *task = c->task, *data = c->data, *hash = c->hash, *pos = c->pos, *out = c->out;
    char (*ds_names)[64] = c->ds_names;
    const train_opts o = *c->o;
    const double t_all = c->t_all;
    const int nb = c->nb, seeds = c->seeds;
    // The statistics over seeds come from every run's cache, read back here (each written by the
    // rank that evaluated the run): its per-window losses and its numbers as stored (the JSON
    // keeps ~15 digits), so that one process, N ranks and a rerun from the caches all compute
    // from the same bits.
    int sg = -1;   // the softmax group
    for (int b = 0; b < nb && sg < 0; b++) if (runs[b].attn == LSSAR_ATTN_SOFTMAX && !runs[b].eval_only) sg = b;
    double **win = calloc((size_t)nr * nf, sizeof *win);
    run_t *cr = calloc((size_t)nr, sizeof *cr);
    gstat *gs = calloc((size_t)nb * nf, sizeof *gs);
    double *dseed = calloc((size_t)nb * nf * seeds, sizeof *dseed);
    if (!win || !cr || !gs || !dseed) { free(win); free(cr); free(gs); free(dseed); return lssar_fail(LSSAR_E_NOMEM, "out of memory"); }
    int rc = 0;
    for (int i = 0; i < nr && !rc; i++) {
        char cp[4400];
        cache_path(cp, sizeof cp, out, &runs[i]);
        if (!load_cache(cp, NULL, &cr[i], nf, mqar, mqar ? NULL : win + (size_t)i * nf))
            rc = lssar_fail(LSSAR_E_IO, "%s: cannot read the evaluation of %s back (written in this call): is --out on a filesystem every rank sees?", cp, runs[i].name);
    }
    for (int i = 0; i < nb * nf; i++) gs[i].dseed = dseed + (size_t)i * seeds;
    if (!rc) group_stats(cr, nb, seeds, nf, mqar, win, sg, gs);
    for (int i = 0; i < nr * nf; i++) free(win[i]);
    free(win);
    if (rc) { free(cr); free(gs); free(dseed); return rc; }
    // the per-position curve of each group: the mean over its seeds, bin by bin
    const int Tmax = seqs[nf - 1], pbw = pos_bin_width(Tmax);
    double gpos[MAXB][NPB];
    int gbins[MAXB];
    for (int b = 0; b < nb; b++) {
        gbins[b] = mqar ? 0 : cr[b].pos_bins;
        for (int k = 1; k < seeds; k++) if (cr[k * nb + b].pos_bins < gbins[b]) gbins[b] = cr[k * nb + b].pos_bins;
        for (int i = 0; i < gbins[b]; i++) {
            double s = 0;
            for (int k = 0; k < seeds; k++) s += cr[k * nb + b].pos_loss[i];
            gpos[b][i] = s / seeds;
        }
    }
    dsstat dss[MAXB][MAXD];   // the downstream scores pooled over seeds (seeds >= 2), for JSON and table
    if (seeds >= 2)
        for (int b = 0; b < nb; b++)
            for (int t = 0; t < nds; t++) dss[b][t] = ds_group_stats(runs, nb, seeds, b, sg, t);
    // results.json
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "task", task);
    if (nds) {
        cJSON *dt = cJSON_AddArrayToObject(root, "downstream_tasks");
        for (int t = 0; t < nds; t++) cJSON_AddItemToArray(dt, cJSON_CreateString(ds_names[t]));
        cJSON_AddNumberToObject(root, "downstream_limit", downstream_limit);
    }
    if (!mqar) {
        cJSON_AddStringToObject(root, "data", data);
        cJSON_AddStringToObject(root, "manifest_sha256", hash);
        cJSON_AddNumberToObject(root, "max_windows", max_windows);
    } else {
        cJSON_AddNumberToObject(root, "pairs", pairs);
        cJSON_AddNumberToObject(root, "keys", mqar_keys);
        cJSON_AddNumberToObject(root, "values", mqar_values);
        cJSON_AddNumberToObject(root, "test_sequences", mqar_eval_n);
    }
    cJSON *cfg = cJSON_AddObjectToObject(root, "config");
    cJSON_AddNumberToObject(cfg, "layers", o.layers); cJSON_AddNumberToObject(cfg, "heads", o.heads);
    cJSON_AddNumberToObject(cfg, "dim", o.dim); cJSON_AddStringToObject(cfg, "pos", pos);
    cJSON_AddNumberToObject(cfg, "seq", o.seq); cJSON_AddNumberToObject(cfg, "batch", o.batch);
    cJSON_AddNumberToObject(cfg, "accum", o.accum); cJSON_AddNumberToObject(cfg, "steps", steps);
    cJSON_AddNumberToObject(cfg, "lr", o.lr); cJSON_AddNumberToObject(cfg, "seed", (double)o.seed);
    cJSON_AddNumberToObject(cfg, "align", o.align); cJSON_AddNumberToObject(cfg, "passkey_mix", o.passkey_mix);
    cJSON_AddNumberToObject(cfg, "seeds", seeds);
    cJSON_AddNumberToObject(root, "seeds", seeds);
    cJSON_AddStringToObject(root, "interval", seeds >= 2 ? "95% Student t interval over seeds; differences paired by seed index over identical windows"
                                              : mqar ? "one seed: 95% Wilson interval over the queries; no interval for differences"
                                                     : "one seed: interval over windows only (mean +- 1.96 standard errors; differences paired over identical windows)");
    // groups: one per run of the first seed's list, over all seeds
    cJSON *ga = cJSON_AddArrayToObject(root, "groups");
    for (int b = 0; b < nb; b++) {
        const run_t *r = &runs[b];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", r->name);
        cJSON_AddStringToObject(e, "attn", lssar_attn_name((lssar_attn_kind)r->attn));
        if (attn_reweights(r->attn)) cJSON_AddNumberToObject(e, "p", r->p);
        cJSON_AddBoolToObject(e, "eval_only", r->eval_only);
        cJSON *rn = cJSON_AddArrayToObject(e, "runs"), *sd = cJSON_AddArrayToObject(e, "seeds");
        for (int k = 0; k < seeds; k++) {
            cJSON_AddItemToArray(rn, cJSON_CreateString(runs[k * nb + b].name));
            cJSON_AddItemToArray(sd, cJSON_CreateNumber((double)(o.seed + (uint64_t)k)));
        }
        cJSON *res = cJSON_AddArrayToObject(e, "results");
        for (int f = 0; f < nf; f++) {
            const gstat *g = &gs[b * nf + f];
            cJSON *x = cJSON_CreateObject();
            cJSON_AddNumberToObject(x, "seq", seqs[f]);
            cJSON_AddItemToObject(x, "mean", lssar_json_number(g->mean));
            cJSON_AddItemToObject(x, "ci95", pair_or_null(g->lo, g->hi));
            cJSON *ps = cJSON_AddArrayToObject(x, "per_seed");
            for (int k = 0; k < seeds; k++) cJSON_AddItemToArray(ps, lssar_json_number(cr[k * nb + b].loss[f]));
            cJSON_AddNumberToObject(x, mqar ? "queries" : "windows", r->windows[f]);
            if (sg >= 0) {
                cJSON *d = cJSON_AddObjectToObject(x, "diff_vs_softmax");
                cJSON_AddItemToObject(d, "mean", lssar_json_number(g->dmean));
                cJSON_AddItemToObject(d, "ci95", pair_or_null(g->dlo, g->dhi));
                cJSON_AddBoolToObject(d, "excludes_zero", g->dlo > 0 || g->dhi < 0);
                cJSON *dp = cJSON_AddArrayToObject(d, "per_seed");
                for (int k = 0; k < seeds; k++) cJSON_AddItemToArray(dp, lssar_json_number(g->dseed[k]));
            }
            cJSON_AddItemToArray(res, x);
        }
        if (gbins[b] > 0) {
            cJSON *pp = cJSON_AddObjectToObject(e, "per_position");
            cJSON_AddNumberToObject(pp, "seq", Tmax);
            cJSON_AddNumberToObject(pp, "bin", pbw);
            cJSON *ps = cJSON_AddArrayToObject(pp, "start"), *pl = cJSON_AddArrayToObject(pp, "loss");
            for (int i = 0; i < gbins[b]; i++) {
                cJSON_AddItemToArray(ps, cJSON_CreateNumber(i * pbw));
                cJSON_AddItemToArray(pl, lssar_json_number(gpos[b][i]));
            }
        }
        if (nds && seeds >= 2) {
            cJSON *da = cJSON_AddArrayToObject(e, "downstream");
            for (int t = 0; t < nds; t++) {
                const dsstat st = dss[b][t];
                cJSON *x = cJSON_CreateObject();
                cJSON_AddStringToObject(x, "task", ds_names[t]);
                cJSON_AddStringToObject(x, "metric", runs[b].ds[t].lambada ? "acc" : "acc_norm");
                cJSON_AddItemToObject(x, "mean", lssar_json_number(st.mean));
                cJSON_AddItemToObject(x, "ci95", pair_or_null(st.mean - st.half, st.mean + st.half));
                cJSON *ps = cJSON_AddArrayToObject(x, "per_seed");
                for (int k = 0; k < seeds; k++) cJSON_AddItemToArray(ps, lssar_json_number(ds_score(&runs[k * nb + b].ds[t])));
                if (sg >= 0) {
                    cJSON *d = cJSON_AddObjectToObject(x, "diff_vs_softmax");
                    cJSON_AddItemToObject(d, "mean", lssar_json_number(st.dmean));
                    cJSON_AddItemToObject(d, "ci95", pair_or_null(st.dmean - st.dhalf, st.dmean + st.dhalf));
                    cJSON_AddBoolToObject(d, "excludes_zero", st.dmean - st.dhalf > 0 || st.dmean + st.dhalf < 0);
                }
                cJSON_AddItemToArray(da, x);
            }
        }
        cJSON_AddItemToArray(ga, e);
    }
    cJSON *ra = cJSON_AddArrayToObject(root, "runs");
    for (int i = 0; i < nr; i++) {
        run_t *r = &runs[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", r->name);
        cJSON_AddStringToObject(e, "attn", lssar_attn_name((lssar_attn_kind)r->attn));
        if (attn_reweights(r->attn)) cJSON_AddNumberToObject(e, "p", r->p);
        cJSON_AddStringToObject(e, "trained_attn", r->eval_only ? "lssa" : lssar_attn_name((lssar_attn_kind)r->attn));
        cJSON_AddBoolToObject(e, "eval_only", r->eval_only);
        cJSON_AddStringToObject(e, "model", r->src);
        cJSON_AddStringToObject(e, "group", runs[r->group].name);
        cJSON_AddNumberToObject(e, "seed", (double)(o.seed + (uint64_t)r->seed_ix));
        cJSON_AddNumberToObject(e, "train_seq", o.seq);
        cJSON_AddNumberToObject(e, "steps", (double)r->step);
        cJSON_AddItemToObject(e, "train_seconds", lssar_json_number(r->train_s));
        char md[4200];
        snprintf(md, sizeof md, "%s/%s", out, r->src);
        cJSON_AddNumberToObject(e, "passkey_mix", exp_passkey_mix(md));
        cJSON_AddItemToObject(e, "results", results_json(r, seqs, nf, mqar));
        if (!mqar && cr[i].pos_bins > 0) {
            cJSON *pl = cJSON_AddArrayToObject(e, "per_position");
            for (int b = 0; b < cr[i].pos_bins; b++) cJSON_AddItemToArray(pl, lssar_json_number(cr[i].pos_loss[b]));
        }
        if (nds) {
            cJSON *da = cJSON_AddArrayToObject(e, "downstream");
            for (int t = 0; t < nds; t++) cJSON_AddItemToArray(da, ds_result_json(&r->ds[t]));
        }
        cJSON_AddItemToArray(ra, e);
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/results.json", out);
    rc = lssar_write_json(path, root);
    cJSON_Delete(root);
    free(cr);
    if (rc) { free(gs); free(dseed); return rc; }

    // results.md (and the same table on stdout)
    size_t cap = 1 << 18;
    char *md = malloc(cap);
    if (!md) { free(gs); free(dseed); return lssar_fail(LSSAR_E_NOMEM, "out of memory"); }
    int k = 0;
    char nseeds[96] = "";
    if (seeds >= 2) snprintf(nseeds, sizeof nseeds, ", mean over %d seeds (%llu..%llu)", seeds, (unsigned long long)o.seed, (unsigned long long)(o.seed + seeds - 1));
    if (mqar)
        k += snprintf(md + k, cap - k, "Associative recall (MQAR, %d pairs, %d keys, %d values): accuracy of the value after each query, %d test sequences per length; trained at T = %d (whole sequences per window), %d steps%s.\n\n",
                      pairs, mqar_keys, mqar_values, mqar_eval_n, o.seq, steps, nseeds);
    else
        k += snprintf(md + k, cap - k, "Mean next-token loss (nats/token) on held-out documents (at most %d windows per length, each inside one document), +- the half-width of its 95%% interval; trained at T = %d, %d steps%s. Data %s (manifest sha256 %.12s).\n\n",
                      max_windows, o.seq, steps, nseeds, data, hash);
    if (!mqar && o.passkey_mix > 0)
        k += snprintf(md + k, cap - k, "Trained with a passkey share of %g of the windows (the loss is on the held-out text only).\n\n", o.passkey_mix);
    k += snprintf(md + k, cap - k, "| run |");
    for (int f = 0; f < nf; f++) k += snprintf(md + k, cap - k, " T=%d (x%d) |", seqs[f], fac[f]);
    k += snprintf(md + k, cap - k, "\n|---|");
    for (int f = 0; f < nf; f++) k += snprintf(md + k, cap - k, "---|");
    k += snprintf(md + k, cap - k, "\n");
    for (int b = 0; b < nb; b++) {
        k += snprintf(md + k, cap - k, "| %s%s |", runs[b].name, runs[b].eval_only ? " (eval only)" : "");
        for (int f = 0; f < nf; f++) {
            const gstat *g = &gs[b * nf + f];
            if (!isfinite(g->mean)) k += snprintf(md + k, cap - k, " - |");
            else if (!isfinite(g->lo)) k += snprintf(md + k, cap - k, " %.3f |", g->mean);
            else if (mqar && seeds < 2) k += snprintf(md + k, cap - k, " %.3f [%.2f, %.2f] |", g->mean, g->lo, g->hi);
            else k += snprintf(md + k, cap - k, " %.3f +- %.3f |", g->mean, (g->hi - g->lo) / 2);
        }
        k += snprintf(md + k, cap - k, "\n");
    }
    if (seeds >= 2)
        k += snprintf(md + k, cap - k, "\n%d seeds: 95%% Student t interval over seeds (mean +- t(0.975, %d) sd / sqrt(%d) of the per-seed means).\n", seeds, seeds - 1, seeds);
    else if (mqar)
        k += snprintf(md + k, cap - k, "\nOne seed: 95%% Wilson interval over the queries (the variation between trainings is not in it).\n");
    else
        k += snprintf(md + k, cap - k, "\nOne seed: interval over windows only (mean +- 1.96 standard errors; the variation between trainings is not in it).\n");
    // the paired differences to softmax
    if (sg >= 0 && nb > 1) {
        k += snprintf(md + k, cap - k, "\nDifference to softmax (run - softmax, %s), mean [95%% interval]; **bold**: the interval excludes 0.\n\n| run |",
                      mqar ? "accuracy" : "loss");
        for (int f = 0; f < nf; f++) k += snprintf(md + k, cap - k, " T=%d |", seqs[f]);
        k += snprintf(md + k, cap - k, "\n|---|");
        for (int f = 0; f < nf; f++) k += snprintf(md + k, cap - k, "---|");
        k += snprintf(md + k, cap - k, "\n");
        for (int b = 0; b < nb; b++) {
            if (b == sg) continue;
            k += snprintf(md + k, cap - k, "| %s%s |", runs[b].name, runs[b].eval_only ? " (eval only)" : "");
            for (int f = 0; f < nf; f++) {
                const gstat *g = &gs[b * nf + f];
                const char *mk = g->dlo > 0 || g->dhi < 0 ? "**" : "";
                if (!isfinite(g->dmean)) k += snprintf(md + k, cap - k, " - |");
                else if (!isfinite(g->dlo)) k += snprintf(md + k, cap - k, " %+.3f |", g->dmean);
                else k += snprintf(md + k, cap - k, " %s%+.3f [%+.3f, %+.3f]%s |", mk, g->dmean, g->dlo, g->dhi, mk);
            }
            k += snprintf(md + k, cap - k, "\n");
        }
        if (seeds >= 2)
            k += snprintf(md + k, cap - k, "\nPaired by seed index (the same seed, hence the same initialisation stream and data order, for every kind) and over identical %s; t interval over the %d per-seed differences.\n",
                          mqar ? "test sequences" : "windows", seeds);
        else if (mqar)
            k += snprintf(md + k, cap - k, "\nOne seed: no interval for the difference (rerun with --seeds 2 or more).\n");
        else
            k += snprintf(md + k, cap - k, "\nOne seed: interval over windows only (the per-window differences over identical windows, mean +- 1.96 standard errors).\n");
    }
    if (!mqar && nf > 1 && gbins[0] > 0) {
        // the longest windows by position range: [0, T), [T, 2T), [2T, 4T), ...
        k += snprintf(md + k, cap - k, "\nLoss by position inside the T=%d windows (mean per token over the windows%s): where each kind breaks past the length it was trained at.\n\n| run |", Tmax, seeds >= 2 ? " and the seeds" : "");
        for (int f = 0; f < nf; f++) k += snprintf(md + k, cap - k, " %d-%d |", f ? seqs[f - 1] : 0, seqs[f] - 1);
        k += snprintf(md + k, cap - k, "\n|---|");
        for (int f = 0; f < nf; f++) k += snprintf(md + k, cap - k, "---|");
        k += snprintf(md + k, cap - k, "\n");
        for (int b = 0; b < nb; b++) {
            k += snprintf(md + k, cap - k, "| %s%s |", runs[b].name, runs[b].eval_only ? " (eval only)" : "");
            for (int f = 0; f < nf; f++) {
                const int lo = f ? seqs[f - 1] : 0, hi = seqs[f];
                double s = 0;
                int n = 0;
                for (int i = 0; i < gbins[b]; i++) if (i * pbw >= lo && i * pbw < hi) { s += gpos[b][i]; n++; }
                if (n) k += snprintf(md + k, cap - k, " %.3f |", s / n);
                else k += snprintf(md + k, cap - k, " - |");
            }
            k += snprintf(md + k, cap - k, "\n");
        }
    }
    if (!mqar) {
        k += snprintf(md + k, cap - k, "\nWindows per length:");
        for (int f = 0; f < nf; f++) k += snprintf(md + k, cap - k, " T=%d: %d;", seqs[f], runs[0].windows[f]);
        k += snprintf(md + k, cap - k, "\n");
    }
    if (nds) {
        char lim[64] = "all documents";
        if (downstream_limit) snprintf(lim, sizeof lim, "the first %d documents", downstream_limit);
        k += snprintf(md + k, cap - k, "\nZero-shot downstream accuracy (`lssar downstream`, %s of each task): acc / acc_norm [95%% Wilson interval of acc_norm; LAMBADA: acc [interval], perplexity]; chance in the header.\n\n| run |", lim);
        for (int t = 0; t < nds; t++) {
            if (runs[0].ds[t].lambada) k += snprintf(md + k, cap - k, " %s (acc, ppl) |", ds_names[t]);
            else k += snprintf(md + k, cap - k, " %s (chance %.3f) |", ds_names[t], runs[0].ds[t].chance);
        }
        k += snprintf(md + k, cap - k, "\n|---|");
        for (int t = 0; t < nds; t++) k += snprintf(md + k, cap - k, "---|");
        k += snprintf(md + k, cap - k, "\n");
        for (int i = 0; i < nr && k < (int)cap - 512; i++) {
            k += snprintf(md + k, cap - k, "| %s%s |", runs[i].name, runs[i].eval_only ? " (eval only)" : "");
            for (int t = 0; t < nds; t++) {
                const ds_result *d = &runs[i].ds[t];
                if (d->lambada) k += snprintf(md + k, cap - k, " %.3f [%.3f, %.3f], %.0f |", d->acc, d->acc_lo, d->acc_hi, d->ppl);
                else k += snprintf(md + k, cap - k, " %.3f / %.3f [%.3f, %.3f] |", d->acc, d->acc_norm, d->norm_lo, d->norm_hi);
            }
            k += snprintf(md + k, cap - k, "\n");
        }
        {
            char note[1024];
            const char *tn[MAXD];
            for (int t = 0; t < nds; t++) tn[t] = ds_names[t];
            if (ds_harness_note(note, sizeof note, tn, nds)) k += snprintf(md + k, cap - k, "\n%s", note);
        }
        if (seeds >= 2) {
            k += snprintf(md + k, cap - k, "\nPooled over the %d seeds: mean acc_norm (LAMBADA: acc) +- the half-width of its 95%% t interval; in brackets the difference to softmax, paired by seed over the same documents, mean [95%% t interval]; **bold**: that interval excludes 0.\n\n| run |", seeds);
            for (int t = 0; t < nds; t++) k += snprintf(md + k, cap - k, " %s |", ds_names[t]);
            k += snprintf(md + k, cap - k, "\n|---|");
            for (int t = 0; t < nds; t++) k += snprintf(md + k, cap - k, "---|");
            k += snprintf(md + k, cap - k, "\n");
            for (int b = 0; b < nb && k < (int)cap - 512; b++) {
                k += snprintf(md + k, cap - k, "| %s%s |", runs[b].name, runs[b].eval_only ? " (eval only)" : "");
                for (int t = 0; t < nds; t++) {
                    const dsstat st = dss[b][t];
                    k += snprintf(md + k, cap - k, " %.3f +- %.3f", st.mean, st.half);
                    if (sg >= 0 && b != sg) {
                        const char *mk = st.dmean - st.dhalf > 0 || st.dmean + st.dhalf < 0 ? "**" : "";
                        k += snprintf(md + k, cap - k, " (%s%+.3f [%+.3f, %+.3f]%s)", mk, st.dmean, st.dmean - st.dhalf, st.dmean + st.dhalf, mk);
                    }
                    k += snprintf(md + k, cap - k, " |");
                }
                k += snprintf(md + k, cap - k, "\n");
            }
        }
    }
    k += snprintf(md + k, cap - k, "\nTraining wall time:");
    for (int i = 0; i < nr; i++) if (!runs[i].eval_only && isfinite(runs[i].train_s)) k += snprintf(md + k, cap - k, " %s %.0f s;", runs[i].name, runs[i].train_s);
    k += snprintf(md + k, cap - k, " this call %.0f s.\n", lssar_now() - t_all);
    snprintf(path, sizeof path, "%s/results.md", out);
    exp_write_text(path, md);
    fputs(md, stdout);
    free(md);

    // plot
    if (!no_plot) {
        // each group's mean with its 95% interval as the error bar (none where there is none)
        plot_series s[MAXB];
        double xs[MAXB][MAXF], ys[MAXB][MAXF], es[MAXB][MAXF];
        for (int b = 0; b < nb; b++) {
            for (int f = 0; f < nf; f++) {
                const gstat *g = &gs[b * nf + f];
                xs[b][f] = seqs[f];
                ys[b][f] = g->mean;
                es[b][f] = isfinite(g->lo) && !(mqar && seeds < 2) ? (g->hi - g->lo) / 2 : 0;   // (a Wilson interval is not symmetric)
            }
            s[b] = (plot_series){runs[b].name, nf, xs[b], ys[b], es[b]};
        }
        snprintf(path, sizeof path, "%s/%s", out, mqar ? "accuracy_vs_length.png" : "loss_vs_length.png");
        char title[256];
        snprintf(title, sizeof title, mqar ? "MQAR accuracy vs length (trained at T=%d)" : "held-out loss vs length (trained at T=%d)", o.seq);
        if (plot_lines(path, title, "evaluation length T", mqar ? "accuracy" : "loss (nats/token)", 1, s, nb))
            fprintf(stderr, "extrapolate: note: no plot: %s\n", lssar_errmsg());
        else printf("plot: %s\n", path);
        // the loss at each position of the longest windows (bin centres; the training length marked by the x axis)
        static double px[MAXB][NPB];
        int np = 0;
        for (int b = 0; b < nb; b++) {
            for (int i = 0; i < gbins[b]; i++) px[b][i] = i * pbw + 0.5 * (pbw - 1);
            if (gbins[b] > 0) s[np++] = (plot_series){runs[b].name, gbins[b], px[b], gpos[b], NULL};
        }
        snprintf(path, sizeof path, "%s/loss_vs_position.png", out);
        snprintf(title, sizeof title, "held-out loss by position in T=%d windows (trained at T=%d; bins of %d)", Tmax, o.seq, pbw);
        if (np && !plot_lines(path, title, "position (log scale)", "loss (nats/token)", 1, s, np)) printf("plot: %s\n", path);
        else if (np) fprintf(stderr, "extrapolate: note: no plot: %s\n", lssar_errmsg());
    }
    printf("results: %s/results.json, %s/results.md\n", out, out);
    free(gs); free(dseed);
    return 0;
}

int cmd_extrapolate(int argc, char **argv) {
    train_opts o;
    train_opts_default(&o);
    o.source = passkey_train_source;   // --passkey-mix mixes passkey windows into the shard batches
    const char *data = NULL, *out = NULL, *attn_list = "softmax,ssmax,lssa,lssar", *factors = "1,2,4,8,16";
    const char *lssar_p = "15", *pos = "rope", *task = "text";
    int steps = 200, max_windows = 64, eval_batch = 4, no_zeroshot = 0, no_plot = 0, seeds = 1;
    const char *downstream = NULL;
    int downstream_limit = 0;
    int pairs = 8, mqar_keys = 64, mqar_values = 64, mqar_eval_n = 64, mqar_train_seqs = 0;
    o.quiet = 0;
    const char *device_name = "cpu";
    arg_spec sp[] = {
        {"task", ARG_STR, &task, "text (held-out documents) or mqar (associative recall)", 0, 0},
        {"data", ARG_STR, &data, "folder from `lssar data build` (text task)", 0, 0},
        {"out", ARG_STR, &out, "output folder (one sub-folder per run, results.*)", 1, 0},
        {"attn", ARG_STR, &attn_list, "attention kinds to train, comma-separated: presets or presets with stages "
                                      "(softmax+cos+rw; see `lssar train --help`); a kind that re-weights may fix its "
                                      "power as its run folder is named (softmax+rw-p15)", 0, 0},
        {"lssar-p", ARG_STR, &lssar_p, "re-weighting powers, one run each for every kind that re-weights and fixes "
                                       "no power (the first is also used for the lssa->lssar evaluation)", 0, 0},
        {"factors", ARG_STR, &factors, "evaluation lengths as multiples of --seq", 0, 0},
        {"max-windows", ARG_INT, &max_windows, "text: windows per length at most (evenly spaced)", 0, 0},
        {"eval-batch", ARG_INT, &eval_batch, "windows per forward pass in evaluation", 0, 0},
        {"no-zeroshot", ARG_BOOL, &no_zeroshot, "skip the lssa model evaluated with LSSAR re-weighting", 0, 0},
        {"no-plot", ARG_BOOL, &no_plot, "do not run gnuplot", 0, 0},
        {"downstream", ARG_STR, &downstream, "also score each run on these `lssar downstream` tasks (comma list or all)", 0, 0},
        {"downstream-limit", ARG_INT, &downstream_limit, "documents per downstream task at most (0: all)", 0, 0},
        {"pairs", ARG_INT, &pairs, "mqar: key-value pairs per sequence", 0, 0},
        {"mqar-keys", ARG_INT, &mqar_keys, "mqar: key alphabet", 0, 0},
        {"mqar-values", ARG_INT, &mqar_values, "mqar: value alphabet", 0, 0},
        {"passkey-mix", ARG_FLOAT, &o.passkey_mix, "text: share of training windows replaced by passkey sequences (0-1)", 0, 0},
        {"passkey-short", ARG_BOOL, &o.passkey_prompt, "text: passkey sequences without the task sentence (lssar passkey reads it from the run)", 0, 0},
        {"mqar-eval", ARG_INT, &mqar_eval_n, "mqar: test sequences per length", 0, 0},
        {"mqar-train-seqs", ARG_INT, &mqar_train_seqs, "mqar: training sequences (0: steps x batch x accum x 2)", 0, 0},
        {"pos", ARG_STR, &pos, "positions: rope, learned or none", 0, 0},
        {"rope-base", ARG_FLOAT, &o.rope_base, "RoPE base theta (pair i turns at theta^(-2i/D); GPT-NeoX's 10000)", 0, 0},
        {"temp-d", ARG_INT, &o.temp_d, "lssa/lssar: the D of the ln(D) ln(n) temperature (0: the head size, as the paper)", 0, 0},
        {"layers", ARG_INT, &o.layers, "transformer blocks", 0, 0},
        {"heads", ARG_INT, &o.heads, "attention heads", 0, 0},
        {"dim", ARG_INT, &o.dim, "model width", 0, 0},
        {"vocab", ARG_INT, &o.vocab, "token ids (0: from the data; byte data wants 257)", 0, 0},
        {"untied", ARG_BOOL, &o.untied, "separate output head", 0, 0},
        {"seq", ARG_INT, &o.seq, "training length T", 0, 0},
        {"batch", ARG_INT, &o.batch, "sequences per micro-batch", 0, 0},
        {"accum", ARG_INT, &o.accum, "micro-batches per step", 0, 0},
        {"steps", ARG_INT, &steps, "optimizer steps per run (the same budget for every kind)", 0, 0},
        {"lr", ARG_FLOAT, &o.lr, "peak learning rate", 0, 0},
        {"warmup", ARG_INT, &o.warmup, "warmup steps (-1: 10%)", 0, 0},
        {"lr-floor", ARG_FLOAT, &o.min_lr_frac, "cosine floor as a fraction of --lr", 0, 0},
        {"wd", ARG_FLOAT, &o.wd, "AdamW weight decay", 0, 0},
        {"clip", ARG_FLOAT, &o.clip, "gradient norm clip (0: off)", 0, 0},
        {"seed", ARG_U64, &o.seed, "seed of initialisation and data order (the same for every kind)", 0, 0},
        {"seeds", ARG_INT, &seeds, "train every run this many times, with --seed, --seed + 1, ... (95% intervals over seeds)", 0, 0},
        {"threads", ARG_INT, &o.threads, "CPU threads (0: all)", 0, 0},
        {"quiet", ARG_BOOL, &o.quiet, "no progress lines", 0, 0},
        {"device", ARG_STR, &device_name, ARGS_DEVICE_HELP, 0, 0},
        {0}};
    int rc = args_parse("extrapolate", ABOUT, sp, argc, argv);
    if (rc >= 0) return rc;
    lssar_device device;
    if (args_device("extrapolate", device_name, &device)) return 2;
    o.device = device;
    int mqar = !strcmp(task, "mqar");
    if (!mqar && strcmp(task, "text")) return args_error("extrapolate", "--task '%s' is unknown: use text or mqar", task);
    if (!mqar && !data) return args_error("extrapolate", "missing --data DIR (a folder written by `lssar data build`)");
    int ps = gpt_pos_parse(pos);
    if (ps < 0) return args_error("extrapolate", "--pos '%s' is unknown: use rope, learned or none", pos);
    o.pos = (gpt_pos)ps;
    if (steps < 1 || o.seq < 1 || o.batch < 1 || o.accum < 1) return args_error("extrapolate", "--steps, --seq, --batch and --accum must be >= 1");
    if (o.layers < 1 || o.heads < 1 || o.dim % o.heads) return args_error("extrapolate", "--heads must divide --dim (and both be >= 1)");
    if (eval_batch < 1) return args_error("extrapolate", "--eval-batch must be >= 1");
    if (seeds < 1 || seeds > MAXR) return args_error("extrapolate", "--seeds must be in 1..%d (got %d)", MAXR, seeds);
    if (!(o.passkey_mix >= 0 && o.passkey_mix <= 1)) return args_error("extrapolate", "--passkey-mix must be in [0, 1] (got %g)", o.passkey_mix);
    if (args_rope_temp("extrapolate", o.rope_base, o.temp_d)) return 2;
    if (mqar && o.passkey_mix > 0) return args_error("extrapolate", "--passkey-mix needs text data: drop it for --task mqar");
    o.steps = steps;
    // --downstream: resolve the tasks now, so a typo or an unfetched set fails before training
    char ds_names[MAXD][64], ds_paths[MAXD][4096];
    int nds = 0;
    if (downstream) {
        if (mqar) return args_error("extrapolate", "--downstream needs the text task (GPT-2-tokenizer data)");
        if (downstream_limit < 0) return args_error("extrapolate", "--downstream-limit must be >= 0 (0: all documents)");
        char dl[2048], evdir[4096];
        snprintf(dl, sizeof dl, "%s", strcmp(downstream, "all") ? downstream : DS_ALL_TASKS);
        const char *ld = getenv("LSSAR_DATA");
        snprintf(evdir, sizeof evdir, "%s/evals", ld && *ld ? ld : "data");
        for (char *tk = strtok(dl, ","); tk; tk = strtok(NULL, ",")) {
            if (nds == MAXD) return args_error("extrapolate", "--downstream: at most %d tasks", MAXD);
            if (ds_resolve_task(tk, evdir, ds_names[nds], sizeof ds_names[nds], ds_paths[nds], sizeof ds_paths[nds]))
                return args_error("extrapolate", "--downstream: %s", lssar_errmsg());
            nds++;
        }
    }
    int fac[MAXF];
    int nf = args_int_list("extrapolate", "--factors", factors, fac, MAXF);
    if (nf < 1) return 2;
    int seqs[MAXF];
    for (int i = 0; i < nf; i++) {
        if (fac[i] < 1) return args_error("extrapolate", "--factors must be >= 1 (got %d)", fac[i]);
        seqs[i] = o.seq * fac[i];
    }
    if (o.pos == GPT_POS_LEARNED)
        for (int i = 0; i < nf; i++)
            if (fac[i] > 1) return args_error("extrapolate", "learned positions cannot go past --seq: use --pos rope or none, or --factors 1");
    double pv[8];
    int np = exp_parse_doubles(lssar_p, pv, 8);
    if (np < 1) return args_error("extrapolate", "--lssar-p '%s' must be a comma list of powers like 15,3", lssar_p);
    for (int i = 0; i < np; i++) if (!(pv[i] > 0)) return args_error("extrapolate", "--lssar-p values must be > 0");

    // the runs: the list of one seed (nb runs), then the same list for each further seed index K,
    // named RUN-sK (seed index 0 keeps the plain names, so folders of one-seed calls stay valid);
    // run K * nb + b belongs to group b.
    run_t *runs = calloc(MAXR, sizeof *runs);
    if (!runs) return 1;
    int nr = 0, have_lssa = 0;
    char list[1024];
    snprintf(list, sizeof list, "%s", attn_list);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        lssar_attn_kind a;
        float pin = 0;
        int pinned;
        if (args_attn_run("extrapolate", tok, &a, &pin, &pinned)) { free(runs); return 2; }
        const int rw = attn_reweights(a);
        int reps = rw && !pinned ? np : 1;
        for (int k = 0; k < reps; k++) {
            if (nr == MAXB) { free(runs); return args_error("extrapolate", "at most %d runs per seed (the kinds of --attn, one per --lssar-p power for those that re-weight)", MAXB); }
            run_t *r = &runs[nr++];
            r->attn = a;
            r->p = !rw ? 15.0f : pinned ? pin : (float)pv[k];
            if (rw) snprintf(r->name, sizeof r->name, "%s-p%g", lssar_attn_name(a), (double)r->p);
            else snprintf(r->name, sizeof r->name, "%s", lssar_attn_name(a));
            snprintf(r->src, sizeof r->src, "%s", r->name);
        }
        if (a == LSSAR_ATTN_LSSA) have_lssa = 1;
    }
    if (have_lssa && !no_zeroshot && nr < MAXB) {
        run_t *r = &runs[nr++];
        r->attn = LSSAR_ATTN_LSSAR;
        r->p = (float)pv[0];
        r->eval_only = 1;
        snprintf(r->name, sizeof r->name, "lssa+lssar-p%g", pv[0]);
        snprintf(r->src, sizeof r->src, "lssa");
    }
    const int nb = nr;
    if (nb * seeds > MAXR) { free(runs); return args_error("extrapolate", "%d runs x --seeds %d is more than %d runs", nb, seeds, MAXR); }
    for (int b = 0; b < nb; b++) runs[b].group = b;
    for (int k = 1; k < seeds; k++)
        for (int b = 0; b < nb; b++) {
            run_t *r = &runs[nr++];
            *r = runs[b];
            r->seed_ix = k;
            snprintf(r->name, sizeof r->name, "%s-s%d", runs[b].name, k);
            snprintf(r->src, sizeof r->src, "%s-s%d", runs[b].src, k);
        }
    if ((rc = lssar_mkdirs(out))) { free(runs); return args_error("extrapolate", "%s", lssar_errmsg()); }

    // data
    char *train_list = NULL, valp[4096], idxp[4096], hash[65] = "none";
    mqar_params mp = {mqar_keys, mqar_values, pairs};
    exp_docs docs = {0};
    shard val = {0};
    int have_docs = 0;
    if (mqar) {
        if (o.vocab == 0) o.vocab = mqar_vocab(&mp);
        if (o.vocab < mqar_vocab(&mp)) { free(runs); return args_error("extrapolate", "--vocab %d is smaller than the mqar vocabulary %d", o.vocab, mqar_vocab(&mp)); }
        char tp[4200];
        int ns = mqar_train_seqs > 0 ? mqar_train_seqs : 2 * steps * o.batch * o.accum;
        // the name holds everything the shard depends on, so a call with other settings never
        // trains on sequences of another length
        snprintf(tp, sizeof tp, "%s/mqar_train_T%d_k%d_v%d_p%d_n%d_s%llu.bin", out, o.seq, mqar_keys, mqar_values, pairs, ns,
                 (unsigned long long)o.seed);
        // Each sequence is T + 1 tokens, exactly one training window: aligning window starts to
        // T + 1 makes every window one whole sequence (EOT, all pairs, all queries). Unaligned
        // windows cut sequences and hide the pairs most queries refer to.
        o.align = o.seq + 1;
        // rank 0 alone writes it (the ranks share --out), the others wait for it here
        if (lssar_dist_rank() == 0 && !file_exists(tp)) rc = mqar_write_shard(tp, &mp, o.seq, ns, o.seed + 1000);
        if ((rc = lssar_dist_agree(rc))) { free(runs); return args_error("extrapolate", "%s", lssar_errmsg()); }
        train_list = strdup(tp);
        o.val = NULL;
    } else {
        snprintf(valp, sizeof valp, "%s/val.bin", data);
        snprintf(idxp, sizeof idxp, "%s/val_index.json", data);
        rc = exp_train_shards(data, &train_list);
        if (!rc) rc = shard_open(&val, valp);
        if (!rc && file_exists(idxp)) have_docs = !(rc = exp_docs_load(idxp, &docs));
        // a file one rank cannot read stops every rank here, with that rank's error
        if ((rc = lssar_dist_agree(rc))) {
            shard_close(&val); exp_docs_free(&docs); free(train_list); free(runs);   // no-ops where not opened
            return args_error("extrapolate", "%s", lssar_errmsg());
        }
        if (!have_docs) fprintf(stderr, "extrapolate: note: %s is missing; windows are consecutive ones of val.bin and may cross documents\n", idxp);
        o.val = valp;
        exp_manifest_hash(data, hash);
        if (o.vocab == 0) {
            o.vocab = exp_manifest_vocab(data);   // 257 for byte data, 50257 for GPT-2
            if (o.vocab < 0 || o.vocab > 65535) {
                int v = o.vocab;
                shard_close(&val); exp_docs_free(&docs); free(train_list); free(runs);
                return args_error("extrapolate", "%s/manifest.json: tokenizer vocab_size %d is outside 1..65535 (damaged): rebuild the folder with `lssar data build`, or give --vocab", data, v);
            }
        }
        if (nds && o.vocab && (o.vocab < 50257 || o.vocab > 50304)) {
            shard_close(&val); exp_docs_free(&docs); free(train_list); free(runs);
            return args_error("extrapolate", "--downstream needs models with the GPT-2 tokenizer (vocabulary 50257..50304), %s has vocabulary %d (byte-level data?)", data, o.vocab);
        }
    }
    o.data = train_list;
    o.eval_every = 0;

    // The runs are spread over the ranks: run i on rank i mod N. Each rank trains and evaluates its
    // own in solo mode (src/core/dist.h), as one process, so that train_run does not take part in
    // data parallelism over the other ranks; each phase ends at lssar_dist_agree, where a failure
    // of one rank becomes every rank's error. Training comes first for every run, since the
    // lssa->lssar run evaluates the lssa model, which another rank may train.
    const int rank = lssar_dist_rank(), ranks = lssar_dist_size();
    if (ranks > 1 && !o.quiet) {
        fprintf(stderr, "extrapolate: %d runs over %d ranks:", nr, ranks);
        for (int q = 0; q < ranks && q < nr; q++) {
            fprintf(stderr, "%s rank %d:", q ? ";" : "", q);
            for (int i = q; i < nr; i += ranks) fprintf(stderr, " %s", runs[i].name);
        }
        fprintf(stderr, " (the other ranks' progress is not shown)\n");
    }

    // train
    double t_all = lssar_now();
    lssar_dist_solo(1);
    for (int i = rank; i < nr && !rc; i += ranks)
        if (!runs[i].eval_only) rc = ensure_trained(&o, out, &runs[i], o.quiet);
    lssar_dist_solo(0);
    if ((rc = lssar_dist_agree(rc))) {
        int code = rc == LSSAR_E_NAN ? 3 : 1;
        fprintf(stderr, "lssar extrapolate: training failed: %s\n", lssar_errmsg());
        free(train_list); shard_close(&val); exp_docs_free(&docs); free(runs);
        return code;
    }

    // evaluate
    lssar_dist_solo(1);
    for (int i = rank; i < nr && !rc; i += ranks) {
        run_t *r = &runs[i];
        char dir[4200], cp[4400], key[1024];
        snprintf(dir, sizeof dir, "%s/%s", out, r->src);
        gpt *g = NULL;
        int64_t step = 0;
        ckpt_load_opts lo = run_load_opts(r, device);
        if ((rc = ckpt_load_model(dir, &lo, &g, &step))) break;
        r->step = step;
        cache_path(cp, sizeof cp, out, r);
        char extra[256];
        if (mqar) snprintf(extra, sizeof extra, "mqar k%d v%d p%d n%d attn%d p%g", mqar_keys, mqar_values, pairs, mqar_eval_n, r->attn, r->p);
        else snprintf(extra, sizeof extra, "%s attn%d p%g docs%d", hash, r->attn, r->p, have_docs);
        cache_key(key, sizeof key, task, seqs, nf, max_windows, step, extra);
        if (load_cache(cp, key, r, nf, mqar, NULL)) {
            if (!o.quiet) fprintf(stderr, "extrapolate: %s: evaluation cached in %s\n", r->name, cp);
            gpt_free(g);
            continue;
        }
        double *win[MAXF] = {0};   // the per-window losses of each length, for the cache
        r->pos_bins = 0;
        lssar_progress pg;
        lssar_progress_start(&pg, r->name, "lengths", nf);
        for (int f = 0; f < nf && !rc; f++) {
            int T = seqs[f];
            r->loss[f] = r->se[f] = r->lo[f] = r->hi[f] = NAN;
            if (mqar) {
                long c = 0, tot = 0;
                if ((rc = mqar_eval(g, &mp, T, mqar_eval_n, eval_batch, o.seed + 7 + f, &c, &tot))) break;
                r->loss[f] = tot ? (double)c / tot : NAN;
                wilson_interval((int)c, (int)tot, 1.96, &r->lo[f], &r->hi[f]);
                r->windows[f] = (int)tot;
            } else {
                size_t *st = NULL;
                int nw = 0;
                rc = have_docs ? exp_doc_windows(&docs, T, max_windows, &st, &nw) : exp_plain_windows(val.n, T, max_windows, &st, &nw);
                if (rc) break;
                r->windows[f] = nw;
                if (nw > 0 && !(win[f] = malloc((size_t)nw * sizeof *win[f]))) rc = lssar_fail(LSSAR_E_NOMEM, "out of memory");
                // the longest windows also give the loss at each position
                double *pp = NULL;
                if (nw > 0 && !rc && f == nf - 1 && !(pp = malloc((size_t)T * sizeof *pp))) rc = lssar_fail(LSSAR_E_NOMEM, "out of memory");
                if (nw > 0 && !rc) rc = exp_eval_windows(g, &val, st, nw, T, eval_batch, &r->loss[f], &r->se[f], win[f], pp);
                if (pp && !rc) bin_positions(r, pp, T);
                free(pp);
                if (nw <= 0) fprintf(stderr, "extrapolate: note: no held-out document has %d tokens; T = %d is left empty\n", T + 1, T);
                free(st);
            }
            char extra2[64];
            snprintf(extra2, sizeof extra2, "T=%d %s=%.4f", T, mqar ? "acc" : "loss", r->loss[f]);
            if (!o.quiet) lssar_progress_update(&pg, f + 1, extra2);
        }
        gpt_free(g);
        if (!rc) rc = save_cache(cp, key, r, seqs, nf, mqar, win);
        for (int f = 0; f < nf; f++) free(win[f]);
    }
    lssar_dist_solo(0);
    if ((rc = lssar_dist_agree(rc))) {
        fprintf(stderr, "lssar extrapolate: evaluation failed: %s\n", lssar_errmsg());
        free(train_list); shard_close(&val); exp_docs_free(&docs); free(runs);
        return 1;
    }
    // downstream tasks (cached per run in RUN/downstream[-NAME].json under a key of step, tasks, limit)
    lssar_tokenizer *dtok = NULL;
    if (nds) rc = lssar_tokenizer_open("gpt2", &dtok);
    if ((rc = lssar_dist_agree(rc))) {
        fprintf(stderr, "lssar extrapolate: %s\n", lssar_errmsg());
        free(train_list); shard_close(&val); exp_docs_free(&docs); free(runs);
        return 1;
    }
    lssar_dist_solo(1);
    for (int i = rank; i < nr && nds && !rc; i += ranks) {
        run_t *r = &runs[i];
        char dir[4200], cp[4400], key[8192];
        snprintf(dir, sizeof dir, "%s/%s", out, r->src);
        if (r->eval_only) snprintf(cp, sizeof cp, "%s/downstream-%s.json", dir, r->name);
        else snprintf(cp, sizeof cp, "%s/downstream.json", dir);
        int k = snprintf(key, sizeof key, "step=%lld|limit=%d|attn%d p%g|", (long long)r->step, downstream_limit, r->attn, r->p);
        for (int t = 0; t < nds && k < (int)sizeof key; t++) k += snprintf(key + k, sizeof key - k, "%s=%s,", ds_names[t], ds_paths[t]);
        char *txt = NULL;
        size_t tl;
        int cached = 0;
        if (!lssar_read_file(cp, &txt, &tl)) {
            cJSON *j = cJSON_Parse(txt);
            cJSON *kk = cJSON_GetObjectItem(j, "key"), *a = cJSON_GetObjectItem(j, "results");
            if (cJSON_IsString(kk) && !strcmp(kk->valuestring, key) && cJSON_GetArraySize(a) == nds) {
                cached = 1;
                for (int t = 0; t < nds && cached; t++) cached = !ds_result_from_json(cJSON_GetArrayItem(a, t), &r->ds[t]);
            }
            cJSON_Delete(j);
            free(txt);
        }
        if (cached) { if (!o.quiet) fprintf(stderr, "extrapolate: %s: downstream results cached in %s\n", r->name, cp); continue; }
        gpt *g = NULL;
        ckpt_load_opts lo = run_load_opts(r, device);
        if ((rc = ckpt_load_model(dir, &lo, &g, NULL))) break;
        ds_opts dopt = {downstream_limit, eval_batch > 16 ? eval_batch : 16, 0, o.quiet, NULL};
        for (int t = 0; t < nds && !rc; t++) rc = ds_run_task(g, dtok, ds_names[t], ds_paths[t], &dopt, &r->ds[t]);
        gpt_free(g);
        if (rc) break;
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "key", key);
        cJSON *a = cJSON_AddArrayToObject(j, "results");
        for (int t = 0; t < nds; t++) cJSON_AddItemToArray(a, ds_result_json(&r->ds[t]));
        lssar_write_json(cp, j);
        cJSON_Delete(j);
    }
    lssar_dist_solo(0);
    lssar_tokenizer_free(dtok);
    if ((rc = lssar_dist_agree(rc))) {
        fprintf(stderr, "lssar extrapolate: downstream evaluation failed: %s\n", lssar_errmsg());
        free(train_list); shard_close(&val); exp_docs_free(&docs); free(runs);
        return rc == LSSAR_E_UNSUPPORTED ? 2 : 1;
    }
    if ((rc = gather_runs(runs, nr))) {
        fprintf(stderr, "lssar extrapolate: %s\n", lssar_errmsg());
        free(train_list); shard_close(&val); exp_docs_free(&docs); free(runs);
        return 1;
    }
    for (int i = 0; i < nr; i++)
        if (!runs[i].eval_only) runs[i].train_s = read_train_seconds(out, runs[i].name);
    // rank 0 alone writes the results; the others wait for it at the end
    if (rank == 0) rc = write_results(&(results_ctx){runs, nr, nb, seeds, seqs, fac, nf, mqar, task, data, hash, max_windows, pairs,
                                                     mqar_keys, mqar_values, mqar_eval_n, nds, ds_names, downstream_limit,
                                                     &o, steps, pos, out, no_plot, t_all});
    rc = lssar_dist_agree(rc);
    if (rc && rank == 0) fprintf(stderr, "lssar extrapolate: %s\n", lssar_errmsg());
    free(train_list); shard_close(&val); exp_docs_free(&docs); free(runs);
    return rc ? 1 : 0;
}

