/*
 * attnstats.h - what the attention rows of a trained model look like, per layer, at a given length:
 *
 *   entropy       mean over rows of H(w_i) = -sum_j w_ij ln w_ij (nats); a uniform row over n
 *                 keys has ln n, so growing entropy with length is "attention smoothing"
 *   entropy_norm  the same divided by ln(i + 1): 1 = uniform, 0 = one-hot
 *   sink          mean weight on the window's first token (the "attention sink")
 *   top1          mean largest weight of a row
 *
 * Rows are the model's real weights (softmax probabilities, SSMax, LSSA alpha, LSSAR beta),
 * recomputed from each layer's post-RoPE q and k (src/model/gpt_probe.h) with the same per-row
 * code as the attention kernel (src/attn/attn_rows.h), averaged over heads, windows and the
 * sampled query rows: up to `rows` rows evenly spaced over the window's second half [T/2, T), so
 * each length is measured where the context is that long.
 */
#ifndef LSSAR_ATTNSTATS_H
#define LSSAR_ATTNSTATS_H

#include <stdint.h>
#include "model/checkpoint.h"
#include "model/gpt.h"

typedef struct {
    double entropy, entropy_norm, sink, top1;
    long rows;   // rows averaged (windows x heads x sampled rows)
} attn_layer_stats;

/* The attention weights w[0..i] of query row i, head h, batch row b, from post-RoPE q, k
   (B, T, NH, HS) with the model's attention d: the per-row code of the kernel itself. */
int attn_weights_row(const lssar_attn_desc *d, const float *q, const float *k, int T, int NH, int HS,
                     int b, int h, int i, float *w);

/* windows: (B, T, channels) inputs. st: layers entries, overwritten. */
int attn_stats(gpt *m, const uint16_t *windows, int B, int T, int rows, attn_layer_stats *st);

#define ATTNSTATS_MAX_LENGTHS 16
#define ATTNSTATS_MAX_MODELS 32

/* `lssar attnstats`: the statistics of each model at each length, printed per layer, the models of
   one configuration (seeds) pooled with 95% t intervals and paired differences to softmax, and the
   JSON and plots that `lssar attnstats --help` describes. */
typedef struct {
    char *models[ATTNSTATS_MAX_MODELS];   // run directories or model files
    int nmodels;
    const char *data;                     // token shard; windows inside documents for a val.bin
    int seqs[ATTNSTATS_MAX_LENGTHS];      // lengths T
    int nseqs;
    int windows, rows;                    // windows per length, query rows per window and head
    ckpt_load_opts load;                  // --attn, --p, --device
    const char *json, *plot;              // NULL: none
} attnstats_opts;

/* 0, or an lssar_err (lssar_errmsg); *bad_data is set when --data could not be read. */
int attnstats_run(const attnstats_opts *o, int *bad_data);

#endif
