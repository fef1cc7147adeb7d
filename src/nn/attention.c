// attention.c - glue to the attention kernels (lssar_attn_forward / _backward, src/attn), and a
// one-row attention over a KV cache for incremental decoding (same math as docs/attention.md).
#include <math.h>
#include "core/dispatch.h"
#include "nn.h"

// out (B, T, NH, HS) from q, k, v (B, T, NH, HS)
int attention_forward(float *out, const float *q, const float *k, const float *v,
                      const lssar_attn_desc *a, int B, int T, int NH, int HS) {
    return lssar_attn_forward(a, B, T, NH, HS, q, k, v, out);
}

// dq, dk, dv (B, T, NH, HS) written; dscale (NH) += SSMax scale gradient
int attention_backward(float *dq, float *dk, float *dv, float *dscale, float *ds_tmp,
                       const float *dout, const float *q, const float *k, const float *v,
                       const lssar_attn_desc *a, int B, int T, int NH, int HS) {
    int ssmax = a->kind == LSSAR_ATTN_SSMAX;
    int rc = lssar_attn_backward(a, B, T, NH, HS, q, k, v, dout, dq, dk, dv, ssmax ? ds_tmp : NULL);
    if (rc) return rc;
    if (ssmax && dscale)
        for (int h = 0; h < NH; h++) dscale[h] += ds_tmp[h];
    return 0;
}

// One query row i = n - 1: q (NH, HS), cache kc, vc (n, NH, HS), out (NH, HS).
// Computed in double per row: decoding is memory-bound, so the precision is free.
LSSAR_HOT void attention_row_forward(float *out, const float *q, const float *kc, const float *vc, int n,
                           const lssar_attn_desc *a, int NH, int HS, double *scratch) {
    int C = NH * HS;
    double lnn = log((double)n);
    #pragma omp parallel for schedule(static)
    for (int h = 0; h < NH; h++) {
        double *w = scratch + (size_t)h * n;   // (n) weights of this head
        const float *qh = q + (size_t)h * HS;
        double qn = 1.0;
        if (a->kind == LSSAR_ATTN_LSSA || a->kind == LSSAR_ATTN_LSSAR) {
            double s = 0.0;
            for (int d = 0; d < HS; d++) s += (double)qh[d] * qh[d];
            qn = fmax(sqrt(s), 1e-12);
        }
        // scores x_j
        for (int j = 0; j < n; j++) {
            const float *kj = kc + (size_t)j * C + (size_t)h * HS;
            double dot = 0.0, kk = 0.0;
            for (int d = 0; d < HS; d++) { dot += (double)qh[d] * kj[d]; kk += (double)kj[d] * kj[d]; }
            switch (a->kind) {
            case LSSAR_ATTN_SOFTMAX: w[j] = dot / sqrt((double)HS); break;
            case LSSAR_ATTN_SSMAX: w[j] = a->ssmax_s[h] * lnn * dot / sqrt((double)HS); break;
            default: w[j] = log((double)HS) * lnn * dot / (qn * fmax(sqrt(kk), 1e-12)); break;
            }
        }
        // weights
        double z = 0.0;
        if (a->kind == LSSAR_ATTN_SOFTMAX || a->kind == LSSAR_ATTN_SSMAX) {
            double mx = w[0];
            for (int j = 1; j < n; j++) mx = fmax(mx, w[j]);
            for (int j = 0; j < n; j++) { w[j] = exp(w[j] - mx); z += w[j]; }
            for (int j = 0; j < n; j++) w[j] /= z;
        } else {
            for (int j = 0; j < n; j++) {   // softplus, then l1
                double x = w[j];
                w[j] = fmax(x, 0.0) + log1p(exp(-fabs(x)));
                z += w[j];
            }
            for (int j = 0; j < n; j++) w[j] /= z;
            if (a->kind == LSSAR_ATTN_LSSAR) {
                double o = n - 1 < 3 ? 0.0 : 1.0, umax = 0.0;
                for (int j = 0; j < n; j++) umax = fmax(umax, n * w[j] - o);
                if (umax > 0.0) {   // else the row is uniform: beta = alpha
                    double zb = 0.0;
                    for (int j = 0; j < n; j++) {
                        double u = n * w[j] - o;
                        w[j] = u > 0.0 ? pow(u / umax, (double)a->p) : 0.0;
                        zb += w[j];
                    }
                    for (int j = 0; j < n; j++) w[j] /= zb;
                }
            }
        }
        // y = sum_j w_j v_j
        float *oh = out + (size_t)h * HS;
        for (int d = 0; d < HS; d++) {
            double y = 0.0;
            for (int j = 0; j < n; j++) y += w[j] * vc[(size_t)j * C + (size_t)h * HS + d];
            oh[d] = (float)y;
        }
    }
}
