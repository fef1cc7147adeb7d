// dataloader.c - random T+1 windows over token shards; see dataloader.h.
#include <stdlib.h>
#include <string.h>
#include "dataloader.h"

int shard_max_token(const shard *s) {
    size_t n = s->n * (size_t)s->channels;
    uint16_t mx = 0;
    for (size_t i = 0; i < n; i++) if (s->tokens[i] > mx) mx = s->tokens[i];
    return n ? mx : -1;
}

int dl_open(dataloader *d, const char *paths, int T, int align, const char *flag) {
    memset(d, 0, sizeof *d);
    if (!paths || !*paths)
        return lssar_fail(LSSAR_E_ARG, "%s is empty: give one or more shard files separated by commas", flag);
    if (T < 1) return lssar_fail(LSSAR_E_SIZE, "sequence length %d must be >= 1", T);
    if (align < 1) return lssar_fail(LSSAR_E_ARG, "--align must be >= 1, got %d", align);
    int count = 1;
    for (const char *p = paths; *p; p++) count += *p == ',';
    d->shards = calloc(count, sizeof *d->shards);
    d->max_token = calloc(count, sizeof *d->max_token);
    d->starts = calloc(count, sizeof *d->starts);
    char *copy = strdup(paths);
    if (!d->shards || !d->max_token || !d->starts || !copy) {
        free(copy);
        dl_close(d);
        return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    }
    d->T = T;
    d->align = align;
    int rc = 0;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save)) {
        shard *s = &d->shards[d->n];
        if ((rc = shard_open(s, tok))) break;
        d->n++;
        if (d->n == 1) d->channels = s->channels;
        else if (s->channels != d->channels)
            rc = lssar_fail(LSSAR_E_FORMAT,
                            "%s: %s has %d token channels but %s has %d: all shards of %s must have the same "
                            "channels",
                            flag, tok, s->channels, d->shards[0].path, d->channels, flag);
        if (!rc && s->n < (size_t)T + 1)
            rc = lssar_fail(LSSAR_E_SIZE,
                            "%s: %s has %zu positions, fewer than --seq + 1 = %d: use a smaller --seq or a "
                            "bigger shard",
                            flag, tok, s->n, T + 1);
        if (!rc) {
            d->max_token[d->n - 1] = shard_max_token(s);
            // starts k * align with k * align + T + 1 <= n
            d->starts[d->n - 1] = (s->n - (size_t)T - 1) / (size_t)align + 1;
            d->total_starts += d->starts[d->n - 1];
        }
    }
    free(copy);
    if (!rc && d->n == 0) rc = lssar_fail(LSSAR_E_ARG, "%s names no shard file", flag);
    if (rc) dl_close(d);
    return rc;
}

void dl_close(dataloader *d) {
    for (int i = 0; i < d->n; i++) shard_close(&d->shards[i]);
    free(d->shards); free(d->max_token); free(d->starts);
    memset(d, 0, sizeof *d);
}

int dl_max_token(const dataloader *d) {
    int mx = -1;
    for (int i = 0; i < d->n; i++) if (d->max_token[i] > mx) mx = d->max_token[i];
    return mx;
}

int dl_vocab(const dataloader *d) {
    int v = 0;
    for (int i = 0; i < d->n; i++) if (d->shards[i].vocab > v) v = d->shards[i].vocab;
    return v;
}

int dl_check_vocab(const dataloader *d, int vocab, const char *flag) {
    for (int i = 0; i < d->n; i++)
        if (d->max_token[i] >= vocab)
            return lssar_fail(LSSAR_E_FORMAT,
                              "%s: %s holds token id %d but the vocabulary has %d ids (0..%d): pass a larger "
                              "--vocab or a shard made with the model's tokenizer",
                              flag, d->shards[i].path, d->max_token[i], vocab, vocab - 1);
    return 0;
}

void dl_next_batch(dataloader *d, lssar_rng *rng, int B, uint16_t *inputs, uint16_t *targets) {
    const int T = d->T, C = d->channels;
    for (int b = 0; b < B; b++) {
        // One draw picks both the shard and the start, uniformly over all starts.
        uint64_t r = lssar_rng_below(rng, d->total_starts);
        int i = 0;
        while (r >= d->starts[i]) { r -= d->starts[i]; i++; }
        if (!inputs) continue;   // another rank's window: only the draw
        const uint16_t *w = d->shards[i].tokens + r * d->align * C;   // (T+1, C)
        memcpy(inputs + (size_t)b * T * C, w, sizeof(uint16_t) * T * C);
        memcpy(targets + (size_t)b * T * C, w + C, sizeof(uint16_t) * T * C);
    }
}
