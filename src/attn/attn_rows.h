/*
 * attn_rows.h - the per-row elementwise part of causal attention (internal).
 *
 * The driver (attention.c) computes raw dot products S_ij = q_i . k_j for a block of query rows
 * with sgemm, hands each row to attn_row_forward, which turns it into the final weights w_ij
 * (softmax probabilities, LSSA alpha or LSSAR beta), and multiplies the weights by V with sgemm.
 * The backward does the same recomputation, then attn_row_backward turns dw_ij = dy_i . v_j into
 * dS_ij, the gradient with respect to the raw dot product, so that dq = dS K and dk = dS^T Q are
 * again plain sgemms. For LSSA/LSSAR the l2 normalisation of q and k is folded in:
 * c_ij = rq_i * rk_j * S_ij with rq = 1 / max(|q|, 1e-12), and the driver projects the sgemm
 * results afterwards (see attention.c). The exact math is in docs/attention.md.
 */
#ifndef LSSAR_ATTN_ROWS_H
#define LSSAR_ATTN_ROWS_H

#include "lssar.h"

typedef struct {
    lssar_attn_stages st;  // the kind's stages
    int norms;         // 1: the row functions read rq and rk (score cos, or re-weighting: its
                       // uniform-row test is relative to |q| max |k|); the driver computes them
    float p;           // re-weighting power
    float inv_sqrt_d;  // 1 / sqrt(D) (scores dot, ssmax)
    float ln_d;        // ln(D) (score cos)
    float uniform_eps; // 8 sqrt(D) FLT_EPSILON: the re-weighting's fallback tolerance per unit of
                       // the largest possible |logit| (lambda for cos)
    float s_h;         // SSMax scale of this head
    // sigmoid / relu length normalisation: len_row = 1 uses n_i of each row (b_i = -ln n_i,
    // 1 / n_i, computed per row); otherwise the training length L, fixed per call:
    int len_row;
    float len_bias;    // sigmoid: b = -ln L
    float inv_len;     // relu: 1 / L
} attn_row_params;

/* The row parameters of head h for a descriptor already checked by the caller (attention.c's
   check_common); the one place that derives them, so every user of the row functions (the
   kernels, attnstats) gets the same weights. */
void attn_row_params_init(attn_row_params *pp, const lssar_attn_desc *a, int D, int h);

// What the backward needs from the forward of one row besides the stored row buffers.
typedef struct {
    float z;           // l1: sum_j a_j (exp: of exp(x_j - max x))
    int fallback;      // re-weighting: 1 when sum_j b_j == 0 and beta = alpha
    int jmax;          // argmax_j of the logit x_j, hence of every weight (see attn_rows.c)
    float scale;       // logit = scale * S: dot/ssmax 1/sqrt(D) (* s_h ln n); cos lambda_i / |q_i| (* rk_j)
} attn_row_stats;

/* Row i (0-based) of a block; the row sees keys 0..i and the buffers have ncols >= i+1 columns,
   entries past i are set to 0 in w (and in dS by the backward).
   s:     in: raw dot products q_i . k_j (ncols). Scores dot/ssmax: left as is.
          Score cos: overwritten with x_ij = lambda_i c_ij.
   alpha: re-weighting only: receives a_j = phi(x_j) (exp: exp(x_j - max x)), the unnormalised
          alpha (alpha_j = a_j / z); may be NULL for other kinds.
   w:     out: final weights (ncols).
   rq, rk: pp->norms: 1 / max(|q_i|, 1e-12) and the same for every key j (ignored otherwise). */
void attn_row_forward(const attn_row_params *pp, int i, int ncols, float rq, const float *rk,
                      float *s, float *alpha, float *w, attn_row_stats *st);

/* Backward of the same row after attn_row_forward: dw holds dy_i . v_j on entry and dS_ij (the
   gradient with respect to the raw dot product q_i . k_j) on return. ssmax adds its contribution
   to d(loss)/d(s_h) into *ds_acc. */
void attn_row_backward(const attn_row_params *pp, int i, int ncols, float rq, const float *rk,
                       const float *s, const float *alpha, const float *w,
                       const attn_row_stats *st, float *dw, double *ds_acc);

#endif
