// extrap_report.c - rank 0's report of an extrapolation: results.json (extrap_json.c), the tables
// of results.md (also printed) and the plots; see extrap_run.h.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "exp/common.h"
#include "exp/extrap_run.h"
#include "exp/plot.h"

// "| RUN |" (eval only runs marked), the first cell of a table row.
static void row_label(FILE *f, const extrap_run *r) {
    fprintf(f, "| %s%s |", r->name, r->eval_only ? " (eval only)" : "");
}

// The line under a table's header of n columns after "run".
static void header_rule(FILE *f, int n) {
    fprintf(f, "\n|---|");
    for (int i = 0; i < n; i++) fprintf(f, "---|");
    fprintf(f, "\n");
}

// What was measured, on which data, and how the model was trained.
static void md_intro(FILE *f, const extrap *x) {
    const extrap_opts *o = x->o;
    const train_opts *t = &x->base;
    const int seeds = o->seeds;
    char nseeds[96] = "";
    if (seeds >= 2)
        snprintf(nseeds, sizeof nseeds, ", mean over %d seeds (%llu..%llu)", seeds,
                 (unsigned long long)t->seed, (unsigned long long)(t->seed + seeds - 1));
    if (o->mqar)
        fprintf(f, "Associative recall (MQAR, %d pairs, %d keys, %d values): accuracy of the value after "
                   "each query, %d test sequences per length; trained at T = %d (whole sequences per "
                   "window), %d steps%s.\n\n",
                o->mqar_task.pairs, o->mqar_task.keys, o->mqar_task.values, o->mqar_eval, t->seq, t->steps,
                nseeds);
    else
        fprintf(f, "Mean next-token loss (nats/token) on held-out documents (at most %d windows per length, "
                   "each inside one document), +- the half-width of its 95%% interval; trained at T = %d, %d "
                   "steps%s. Data %s (manifest sha256 %.12s).\n\n",
                o->max_windows, t->seq, t->steps, nseeds, o->data, x->hash);
    if (!o->mqar && t->passkey_mix > 0)
        fprintf(f, "Trained with a passkey share of %g of the windows (the loss is on the held-out text "
                   "only).\n\n", t->passkey_mix);
}

// Each group's mean at each length with its interval.
static void md_means(FILE *f, const extrap *x, const extrap_stats *st) {
    const int seeds = x->o->seeds, mqar = x->o->mqar;
    fprintf(f, "| run |");
    for (int i = 0; i < x->nf; i++) fprintf(f, " T=%d (x%d) |", x->seqs[i], x->o->factors[i]);
    header_rule(f, x->nf);
    for (int b = 0; b < x->nb; b++) {
        row_label(f, &x->runs[b]);
        for (int i = 0; i < x->nf; i++) {
            const extrap_gstat *g = &st->gs[b * x->nf + i];
            if (!isfinite(g->mean)) fprintf(f, " - |");
            else if (!isfinite(g->lo)) fprintf(f, " %.3f |", g->mean);
            else if (mqar && seeds < 2) fprintf(f, " %.3f [%.2f, %.2f] |", g->mean, g->lo, g->hi);
            else fprintf(f, " %.3f +- %.3f |", g->mean, (g->hi - g->lo) / 2);
        }
        fprintf(f, "\n");
    }
    if (seeds >= 2)
        fprintf(f, "\n%d seeds: 95%% Student t interval over seeds (mean +- t(0.975, %d) sd / sqrt(%d) of "
                   "the per-seed means).\n", seeds, seeds - 1, seeds);
    else if (mqar)
        fprintf(f, "\nOne seed: 95%% Wilson interval over the queries (the variation between trainings is "
                   "not in it).\n");
    else
        fprintf(f, "\nOne seed: interval over windows only (mean +- 1.96 standard errors; the variation "
                   "between trainings is not in it).\n");
}

// Each group's paired difference to softmax; bold where its interval excludes 0.
static void md_diffs(FILE *f, const extrap *x, const extrap_stats *st) {
    const int seeds = x->o->seeds, mqar = x->o->mqar;
    fprintf(f, "\nDifference to softmax (run - softmax, %s), mean [95%% interval]; **bold**: the interval "
               "excludes 0.\n\n| run |", mqar ? "accuracy" : "loss");
    for (int i = 0; i < x->nf; i++) fprintf(f, " T=%d |", x->seqs[i]);
    header_rule(f, x->nf);
    for (int b = 0; b < x->nb; b++) {
        if (b == st->sg) continue;
        row_label(f, &x->runs[b]);
        for (int i = 0; i < x->nf; i++) {
            const extrap_gstat *g = &st->gs[b * x->nf + i];
            const char *mk = g->dlo > 0 || g->dhi < 0 ? "**" : "";
            if (!isfinite(g->dmean)) fprintf(f, " - |");
            else if (!isfinite(g->dlo)) fprintf(f, " %+.3f |", g->dmean);
            else fprintf(f, " %s%+.3f [%+.3f, %+.3f]%s |", mk, g->dmean, g->dlo, g->dhi, mk);
        }
        fprintf(f, "\n");
    }
    if (seeds >= 2)
        fprintf(f, "\nPaired by seed index (the same seed, hence the same initialisation stream and data "
                   "order, for every kind) and over identical %s; t interval over the %d per-seed "
                   "differences.\n", mqar ? "test sequences" : "windows", seeds);
    else if (mqar)
        fprintf(f, "\nOne seed: no interval for the difference (rerun with --seeds 2 or more).\n");
    else
        fprintf(f, "\nOne seed: interval over windows only (the per-window differences over identical "
                   "windows, mean +- 1.96 standard errors).\n");
}

// The longest windows by position range: [0, T), [T, 2T), [2T, 4T), ...
static void md_positions(FILE *f, const extrap *x, const extrap_stats *st) {
    const int *seqs = x->seqs, pbw = st->pbw;
    fprintf(f, "\nLoss by position inside the T=%d windows (mean per token over the windows%s): where each "
               "kind breaks past the length it was trained at.\n\n| run |", st->tmax,
            x->o->seeds >= 2 ? " and the seeds" : "");
    for (int i = 0; i < x->nf; i++) fprintf(f, " %d-%d |", i ? seqs[i - 1] : 0, seqs[i] - 1);
    header_rule(f, x->nf);
    for (int b = 0; b < x->nb; b++) {
        row_label(f, &x->runs[b]);
        for (int i = 0; i < x->nf; i++) {
            const int lo = i ? seqs[i - 1] : 0, hi = seqs[i];
            double s = 0;
            int n = 0;
            for (int k = 0; k < st->gbins[b]; k++)
                if (k * pbw >= lo && k * pbw < hi) { s += st->gpos[b][k]; n++; }
            if (n) fprintf(f, " %.3f |", s / n);
            else fprintf(f, " - |");
        }
        fprintf(f, "\n");
    }
}

// Every run's downstream accuracies, with the chance level of each task.
static void md_downstream_runs(FILE *f, const extrap *x) {
    const extrap_opts *o = x->o;
    char lim[64] = "all documents";
    if (o->task_limit) snprintf(lim, sizeof lim, "the first %d documents", o->task_limit);
    fprintf(f, "\nZero-shot downstream accuracy (`lssar downstream`, %s of each task): acc / acc_norm [95%% "
               "Wilson interval of acc_norm; LAMBADA: acc [interval], perplexity]; chance in the "
               "header.\n\n| run |", lim);
    for (int t = 0; t < o->ntasks; t++) {
        if (x->runs[0].ds[t].lambada) fprintf(f, " %s (acc, ppl) |", o->tasks[t].name);
        else fprintf(f, " %s (chance %.3f) |", o->tasks[t].name, x->runs[0].ds[t].chance);
    }
    header_rule(f, o->ntasks);
    for (int i = 0; i < x->nr; i++) {
        row_label(f, &x->runs[i]);
        for (int t = 0; t < o->ntasks; t++) {
            const ds_result *d = &x->runs[i].ds[t];
            if (d->lambada) fprintf(f, " %.3f [%.3f, %.3f], %.0f |", d->acc, d->acc_lo, d->acc_hi, d->ppl);
            else fprintf(f, " %.3f / %.3f [%.3f, %.3f] |", d->acc, d->acc_norm, d->norm_lo, d->norm_hi);
        }
        fprintf(f, "\n");
    }
    char note[1024];
    const char *tn[EXTRAP_MAX_TASKS];
    for (int t = 0; t < o->ntasks; t++) tn[t] = o->tasks[t].name;
    if (ds_harness_note(note, sizeof note, tn, o->ntasks)) fprintf(f, "\n%s", note);
}

// The downstream scores pooled over the seeds, with the paired difference to softmax.
static void md_downstream_pooled(FILE *f, const extrap *x, const extrap_stats *st) {
    const extrap_opts *o = x->o;
    fprintf(f, "\nPooled over the %d seeds: mean acc_norm (LAMBADA: acc) +- the half-width of its 95%% t "
               "interval; in brackets the difference to softmax, paired by seed over the same documents, "
               "mean [95%% t interval]; **bold**: that interval excludes 0.\n\n| run |",
            o->seeds);
    for (int t = 0; t < o->ntasks; t++) fprintf(f, " %s |", o->tasks[t].name);
    header_rule(f, o->ntasks);
    for (int b = 0; b < x->nb; b++) {
        row_label(f, &x->runs[b]);
        for (int t = 0; t < o->ntasks; t++) {
            const extrap_dsstat s = st->dss[b][t];
            fprintf(f, " %.3f +- %.3f", s.mean, s.half);
            if (st->sg >= 0 && b != st->sg) {
                const double lo = s.dmean - s.dhalf, hi = s.dmean + s.dhalf;
                const char *mk = lo > 0 || hi < 0 ? "**" : "";
                fprintf(f, " (%s%+.3f [%+.3f, %+.3f]%s)", mk, s.dmean, lo, hi, mk);
            }
            fprintf(f, " |");
        }
        fprintf(f, "\n");
    }
}

// results.md's tables in order, into f.
static void md_tables(FILE *f, const extrap *x, const extrap_stats *st) {
    md_intro(f, x);
    md_means(f, x, st);
    if (st->sg >= 0 && x->nb > 1) md_diffs(f, x, st);
    if (!x->o->mqar && x->nf > 1 && st->gbins[0] > 0) md_positions(f, x, st);
    if (!x->o->mqar) {
        fprintf(f, "\nWindows per length:");
        for (int i = 0; i < x->nf; i++) fprintf(f, " T=%d: %d;", x->seqs[i], x->runs[0].windows[i]);
        fprintf(f, "\n");
    }
    if (x->o->ntasks) md_downstream_runs(f, x);
    if (x->o->ntasks && x->o->seeds >= 2) md_downstream_pooled(f, x, st);
    fprintf(f, "\nTraining wall time:");
    for (int i = 0; i < x->nr; i++)
        if (!x->runs[i].eval_only && isfinite(x->runs[i].train_s))
            fprintf(f, " %s %.0f s;", x->runs[i].name, x->runs[i].train_s);
    fprintf(f, " this call %.0f s.\n", lssar_now() - x->t_all);
}

// results.md, and the same tables on stdout.
static int write_md(const extrap *x, const extrap_stats *st) {
    char *md = NULL, path[4200];
    size_t len = 0;
    FILE *f = open_memstream(&md, &len);
    if (f) md_tables(f, x, st);
    int rc = f && !fclose(f) ? 0 : lssar_fail(LSSAR_E_NOMEM, "out of memory");
    if (!rc) {
        snprintf(path, sizeof path, "%s/results.md", x->o->out);
        exp_write_text(path, md);
        fputs(md, stdout);
    }
    free(md);
    return rc;
}

// Each group's mean against the length, its 95% interval as the error bar (none where there is
// none; a Wilson interval is not symmetric, so mqar's one seed has none either).
static void plot_lengths(const extrap *x, const extrap_stats *st) {
    const int mqar = x->o->mqar, nf = x->nf;
    plot_series s[EXTRAP_MAX_GROUPS];
    double xs[EXTRAP_MAX_GROUPS][EXTRAP_MAX_LENGTHS], ys[EXTRAP_MAX_GROUPS][EXTRAP_MAX_LENGTHS];
    double es[EXTRAP_MAX_GROUPS][EXTRAP_MAX_LENGTHS];
    for (int b = 0; b < x->nb; b++) {
        for (int i = 0; i < nf; i++) {
            const extrap_gstat *g = &st->gs[b * nf + i];
            xs[b][i] = x->seqs[i];
            ys[b][i] = g->mean;
            es[b][i] = isfinite(g->lo) && !(mqar && x->o->seeds < 2) ? (g->hi - g->lo) / 2 : 0;
        }
        s[b] = (plot_series){x->runs[b].name, nf, xs[b], ys[b], es[b]};
    }
    char path[4200], title[256];
    snprintf(path, sizeof path, "%s/%s", x->o->out, mqar ? "accuracy_vs_length.png" : "loss_vs_length.png");
    snprintf(title, sizeof title, mqar ? "MQAR accuracy vs length (trained at T=%d)"
                                       : "held-out loss vs length (trained at T=%d)", x->base.seq);
    if (plot_lines(path, title, "evaluation length T", mqar ? "accuracy" : "loss (nats/token)", 1, s, x->nb))
        fprintf(stderr, "extrapolate: note: no plot: %s\n", lssar_errmsg());
    else printf("plot: %s\n", path);
}

// The loss at each position of the longest windows (bin centres; log x axis).
static void plot_positions(const extrap *x, const extrap_stats *st) {
    double px[EXTRAP_MAX_GROUPS][EXTRAP_POS_BINS];
    plot_series s[EXTRAP_MAX_GROUPS];
    const int pbw = st->pbw;
    int np = 0;
    for (int b = 0; b < x->nb; b++) {
        for (int i = 0; i < st->gbins[b]; i++) px[b][i] = i * pbw + 0.5 * (pbw - 1);
        if (st->gbins[b] > 0)
            s[np++] = (plot_series){x->runs[b].name, st->gbins[b], px[b], st->gpos[b], NULL};
    }
    char path[4200], title[256];
    snprintf(path, sizeof path, "%s/loss_vs_position.png", x->o->out);
    snprintf(title, sizeof title, "held-out loss by position in T=%d windows (trained at T=%d; bins of %d)",
             st->tmax, x->base.seq, pbw);
    if (np && !plot_lines(path, title, "position (log scale)", "loss (nats/token)", 1, s, np))
        printf("plot: %s\n", path);
    else if (np) fprintf(stderr, "extrapolate: note: no plot: %s\n", lssar_errmsg());
}

int extrap_report(const extrap *x) {
    extrap_stats *st = calloc(1, sizeof *st);
    int rc = st ? extrap_stats_compute(x, st) : lssar_fail(LSSAR_E_NOMEM, "out of memory");
    if (!rc) rc = extrap_write_json(x, st);
    if (!rc) rc = write_md(x, st);
    if (!rc && !x->o->no_plot) {
        plot_lengths(x, st);
        plot_positions(x, st);
    }
    if (!rc) printf("results: %s/results.json, %s/results.md\n", x->o->out, x->o->out);
    if (st) extrap_stats_free(st);
    free(st);
    return rc;
}
