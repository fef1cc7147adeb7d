/*
 * test_flash_decode.c - split-KV decoding's CPU emulation (src/attn/flash_decode_emu.c; the
 * algorithm and its error bound: src/attn/flash_decode.h) against the float64 reference of
 * tests/attn_ref.h. (The CUDA kernels are checked against this emulation bit for bit by
 * tests/cuda_host/test_decode_host.cpp.)
 *
 * FP32: every kind, D in {16, 32, 64, 128}, Tk from 1 to 3001 (Tk = 1, tile edges 31 / 33 / 64,
 *   Tk not a multiple of the split), Tq 1, 3 and 16, nsplit 1, automatic, 5 and more than there
 *   are tiles; the input families in rotation. Bound (flash_decode.h): ||y~ - y|| <= max(1e-4 ||y||,
 *   ||gamma_{2K+1} sum_j w_j |v_j|||), K = FD_KT + 2 chunk / FD_KT + 2 nsplit + 4.
 * BF16: against the fused path's emulation in BF16 mode (the same bf16 operands Q, K, V; each
 *   rounds its weights P to bf16 at its own scale, relative 2^-9 each): ||y~ - y_fused|| <=
 *   max(1e-3 ||y_fused||, ||(2^-8 + 2 gamma_{2K+1}) sum_j w_j |v_j|||).
 * NaN in q, k or v: the rows that see it are NaN, the others unchanged bit for bit.
 * Checked by breaking on purpose (then restored): each split one key short (321 cases fail here),
 * the combine's factors c_s paired with the splits in reverse order (70 fail); one key of overlap
 * between the kernel's splits fails 74 of test_decode_host's checks.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "lssar.h"
#include "core/util.h"
#include "attn/flash.h"
#include "attn/flash_emu.h"
#include "attn/flash_decode.h"
#include "attn/flash_decode_emu.h"
#include "harness.h"
#include "attn_ref.h"

typedef struct { int Tq, Tk, nsplit; } dcase;

// The summation bound's K for Tk keys and a requested split count (flash_decode.h).
static double bound_k(int B, int H, int Tk, int nsplit) {
    int chunk = fd_chunk(Tk, nsplit ? nsplit : fd_auto_nsplit(B * H, Tk, 132)), ns = fd_nsplit(Tk, chunk);
    return 2.0 * (FD_KT + 2.0 * chunk / FD_KT + 2.0 * ns + 4) + 1;
}

// One case; mode FLASH_FP32: against the reference, FLASH_BF16: against the fused emulation.
// Returns the relative error measure (the check passes below 1: err / allowed).
static double decode_case(int kind, int mode, int family, int len_norm, const dcase *c, int D,
                          uint64_t seed) {
    const int B = 2, H = 2, T = c->Tk, Tq = c->Tq;  // (T: attn_ref.h's IDX)
    size_t N = (size_t)B * T * H * D, NQ = (size_t)B * Tq * H * D;
    float *in = malloc((4 * N + 3 * NQ) * sizeof(float));
    float *q = in, *k = q + N, *v = k + N, *dy = v + N, *qt = dy + N, *out = qt + NQ, *fout = out + NQ;
    make_inputs(family, seed, B, T, H, D, q, k, v, dy, kind);
    for (int b = 0; b < B; b++)  // the queries: the last Tq positions
        for (int r = 0; r < Tq; r++)
            memcpy(qt + ((size_t)b * Tq + r) * H * D, q + IDX(b, T - Tq + r, 0, 0),
                   (size_t)H * D * sizeof(float));
    float s[2] = {0.43f, 0.63f};
    double sd[2] = {s[0], s[1]};
    lssar_attn_desc a = {.kind = kind, .p = 15.0f, .ssmax_s = ref_ssmax(kind) ? s : NULL,
                         .len_norm = (lssar_len_norm)len_norm, .train_len = ATTN_REF_TRAIN_LEN};
    int rc = flash_decode_emu_forward(&a, mode, c->nsplit, B, Tq, T, T, H, D, qt, k, v, out);
    CHECK(rc == 0, "%s: %s", kind_name(kind), lssar_errmsg());
    if (mode == FLASH_BF16) {
        rc = flash_emu_forward(&a, FLASH_BF16, B, Tq, T, T, H, D, qt, k, v, fout, NULL);
        CHECK(rc == 0, "%s fused: %s", kind_name(kind), lssar_errmsg());
    }
    double *qd = to_double(q, N), *kd = to_double(k, N), *vd = to_double(v, N);
    ref_desc rd = {.kind = kind, .p = 15.0, .s = sd, .len_norm = len_norm, .L = ATTN_REF_TRAIN_LEN};
    ref_row *R = ref_row_new(T, D);
    double g = gamma_f32(bound_k(B, H, T, c->nsplit)), e2 = 0, y2 = 0, f2 = 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            ref_keys(B, T, H, D, kd, b, h, R->kh);
            for (int r = 0; r < Tq; r++) {
                int i = T - Tq + r;
                ref_row_forward(&rd, B, T, H, D, qd, kd, b, h, i, R);
                for (int d = 0; d < D; d++) {
                    double y = 0, yabs = 0;
                    for (int j = 0; j <= i; j++) {
                        y += R->w[j] * vd[IDX(b, j, h, d)];
                        yabs += fabs(R->w[j]) * fabs(vd[IDX(b, j, h, d)]);
                    }
                    size_t o = ((size_t)b * Tq + r) * H * D + (size_t)h * D + d;
                    double want = mode == FLASH_BF16 ? fout[o] : y, e = out[o] - want;
                    double fl = mode == FLASH_BF16 ? (0x1p-8 + 2 * g) * yabs : g * yabs;
                    e2 += e * e; y2 += want * want; f2 += fl * fl;
                }
            }
        }
    ref_row_free(R);
    free(qd); free(kd); free(vd); free(in);
    double tol = mode == FLASH_BF16 ? 1e-3 : attn_ref_tol(15.0);
    double allowed = fmax(tol * sqrt(y2), sqrt(f2));
    if (e2 == 0) return 0;  // (exact: a relu row of zeros has a zero bound too)
    return isnan(e2) ? INFINITY : sqrt(e2) / allowed;
}

static const dcase cases[] = {{1, 1, 1},    {1, 2, 0},     {3, 31, 1},     {1, 33, 2},    {16, 64, 0},
                              {3, 100, 5},  {16, 517, 0},  {1, 2049, 0},   {3, 3001, 7},  {1, 700, 1},
                              {16, 97, 200}};
enum { NCASES = sizeof cases / sizeof cases[0] };

static void run_grid(int mode) {
    static const int Ds[4] = {16, 32, 64, 128};
    double worst = 0;
    int n = 0;
    for (int kind = 0; kind < LSSAR_ATTN_NKINDS; kind++)
        for (int di = 0; di < 4; di++)
            for (int ci = 0; ci < NCASES; ci++, n++) {
                if (mode == FLASH_BF16 && (ci + di) % 3) continue;  // (time)
                if (Ds[di] == 128 && cases[ci].Tk > 1000 && kind % 2) continue;
                int fam = n % IN_COUNT;
                double r = decode_case(kind, mode, fam, n % 2, &cases[ci], Ds[di], 9000 + n);
                CHECK(r <= 1.0, "%s %s %s D=%d Tq=%d Tk=%d nsplit=%d: error %.3g of the bound",
                      kind_name(kind), mode ? "bf16" : "fp32", input_name[fam], Ds[di], cases[ci].Tq,
                      cases[ci].Tk, cases[ci].nsplit, r);
                worst = r > worst ? r : worst;
            }
    printf("  %s: worst error / bound %.3g\n", mode ? "bf16 vs fused" : "fp32 vs float64", worst);
}
static void test_fp32_reference(void) { run_grid(FLASH_FP32); }
static void test_bf16_fused(void) { run_grid(FLASH_BF16); }

// NaN in q (row 1), k or v (key 128) with Tq = 4, Tk = 130, 3 splits: rows that see it NaN (v: in
// channel 1), the others the clean run's bits.
static void test_nonfinite(void) {
    enum { B = 1, T = 130, H = 2, D = 16, Tq = 4 };
    size_t N = (size_t)B * T * H * D, NQ = (size_t)B * Tq * H * D;
    float *buf = malloc((4 * N + 3 * NQ) * sizeof(float));
    float *q = buf, *k = q + N, *v = k + N, *dy = v + N, *qt = dy + N, *out0 = qt + NQ, *out = out0 + NQ;
    float s[H] = {0.5f, 0.6f};
    for (int kind = 0; kind < LSSAR_ATTN_NKINDS; kind++) {
        make_inputs(IN_RANDOM, 700 + kind, B, T, H, D, q, k, v, dy, kind);
        memcpy(qt, q + IDX(0, T - Tq, 0, 0), NQ * sizeof(float));
        lssar_attn_desc a = {.kind = kind, .p = 15.0f, .ssmax_s = s, .train_len = ATTN_REF_TRAIN_LEN};
        CHECK_OK(flash_decode_emu_forward(&a, FLASH_FP32, 3, B, Tq, T, T, H, D, qt, k, v, out0));
        for (int ti = 0; ti < 3; ti++) {
            float *x = ti == 0 ? qt : ti == 1 ? k : v;
            size_t at = ti == 0 ? (size_t)1 * H * D + 1 : (size_t)128 * H * D + 1;
            float keep = x[at];
            x[at] = NAN;
            CHECK_OK(flash_decode_emu_forward(&a, FLASH_FP32, 3, B, Tq, T, T, H, D, qt, k, v, out));
            x[at] = keep;
            int changed = 0, finite = 0;
            for (int r = 0; r < Tq; r++)
                for (int h = 0; h < H; h++) {
                    const float *o = out + ((size_t)r * H + h) * D, *o0 = out0 + ((size_t)r * H + h) * D;
                    int sees = h == 0 && (ti == 0 ? r == 1 : T - Tq + r >= 128);
                    if (!sees) changed += memcmp(o, o0, D * sizeof(float)) != 0;
                    else
                        for (int d = 0; d < D; d++) finite += (ti < 2 || d == 1) && !isnan(o[d]);
                }
            CHECK(changed == 0 && finite == 0,
                  "%s: NaN in %c: %d rows that cannot see it changed, %d outputs not NaN", kind_name(kind),
                  "qkv"[ti], changed, finite);
        }
    }
    free(buf);
}

int main(void) {
    RUN(test_nonfinite);
    RUN(test_fp32_reference);
    RUN(test_bf16_fused);
    return test_summary("test_flash_decode");
}
