// rope.c - rotary position embedding, "rotate half": pairs (c, c + HS/2) rotated by
// angle t * theta^(-2c/HS) (docs/attention.md).
#include <math.h>
#include "core/dispatch.h"
#include "nn.h"

// cos_t, sin_t (T, HS/2)
void rope_table(float *cos_t, float *sin_t, int T, int HS, double theta) {
    int h = HS / 2;
    #pragma omp parallel for schedule(static)
    for (int t = 0; t < T; t++)
        for (int c = 0; c < h; c++) {
            double ang = (double)t * pow(theta, -2.0 * c / HS);
            cos_t[(size_t)t * h + c] = (float)cos(ang);
            sin_t[(size_t)t * h + c] = (float)sin(ang);
        }
}

// x (B, T, NH, HS): (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin); dir -1 is the inverse
LSSAR_HOT static void rope_apply(float *x, const float *cos_t, const float *sin_t, int B, int T, int NH,
                       int HS, int pos0, float dir) {
    int h = HS / 2;
    #pragma omp parallel for schedule(static)
    for (int bt = 0; bt < B * T; bt++) {
        int t = bt % T + pos0;
        const float *cs = cos_t + (size_t)t * h, *sn = sin_t + (size_t)t * h;
        for (int hd = 0; hd < NH; hd++) {
            float *v = x + ((size_t)bt * NH + hd) * HS;
            for (int c = 0; c < h; c++) {
                float x1 = v[c], x2 = v[c + h], cc = cs[c], ss = dir * sn[c];
                v[c] = x1 * cc - x2 * ss;
                v[c + h] = x2 * cc + x1 * ss;
            }
        }
    }
}

void rope_forward(float *x, const float *cos_t, const float *sin_t, int B, int T, int NH, int HS,
                  int pos0) {
    rope_apply(x, cos_t, sin_t, B, T, NH, HS, pos0, 1.0f);
}

// The rotation is orthogonal, so its transpose (the gradient map) is the inverse rotation.
void rope_backward(float *dx, const float *cos_t, const float *sin_t, int B, int T, int NH,
                   int HS, int pos0) {
    rope_apply(dx, cos_t, sin_t, B, T, NH, HS, pos0, -1.0f);
}
