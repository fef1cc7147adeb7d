/*
 * docwin.h - evaluation windows that lie inside one held-out document, and the mean loss over
 * them with its standard error.
 *
 * `lssar data build` writes DIR/val_index.json: for each held-out document its name, start (the
 * position of its first token in val.bin) and tokens. A window of length T needs T + 1 positions
 * (T inputs, T next-token targets), all inside [start, start + tokens). Each document gives its
 * consecutive non-overlapping windows start + k T; when there are more than max_windows in all,
 * an evenly spaced subset is kept (deterministic), so long and short lengths sample the same
 * documents as far as they can.
 */
#ifndef LSSAR_DOCWIN_H
#define LSSAR_DOCWIN_H

#include <stddef.h>
#include "data/shard.h"
#include "model/gpt.h"

typedef struct {
    int n;
    size_t *start, *tokens;
    char **name;
} exp_docs;

/* Read val_index.json; errors name the file and the missing field. */
int exp_docs_load(const char *path, exp_docs *d);
void exp_docs_free(exp_docs *d);

/* Window starts for length T (malloc'd into *starts, *n of them; 0 if no document is long enough). */
int exp_doc_windows(const exp_docs *d, int T, int max_windows, size_t **starts, int *n);
/* Consecutive windows from the start of a shard of npos positions (no index available). */
int exp_plain_windows(size_t npos, int T, int max_windows, size_t **starts, int *n);

/* Mean next-token loss of the model over the given windows of shard s (B windows per forward;
   the loop of eval_windows, src/train/eval.h, in this process alone: not a collective):
   *mean over windows of each window's mean loss, *se = sample std / sqrt(n) (0 for n = 1).
   win, unless NULL, receives the n per-window mean losses (paired comparisons of two models on
   the same windows, src/exp/stats.h). per_pos, unless NULL, receives T doubles: the mean loss per
   token at each position of the windows (where a model breaks past its training length). */
int exp_eval_windows(gpt *m, const shard *s, const size_t *starts, int n, int T, int B,
                     double *mean, double *se, double *win, double *per_pos);

#endif
