/*
 * test_decode_host.cpp - the split-KV decoding kernels (src/cuda/flash_decode.cu, compiled as host
 * C++ against tests/cuda_host/cuda_host.h: every CUDA thread a pthread) against their plain-C
 * emulation src/attn/flash_decode_emu.c, which tests/test_flash_decode.c checks against the
 * float64 reference. Bit for bit: both run flash_decode.h's functions in the same order (explicit
 * fmaf where they fuse), so any difference is the kernels' indexing, masking, split boundaries or
 * synchronisation. (A library built with FMA contraction, LSSAR_HOST_EMU_FMA, rounds the shared
 * flash.h math differently in the emulation: then a relative allowance of 1e-5.)
 *
 * Checks (the last line "test_decode_host: N passed, M failed", exit 1 on a failure):
 *   exact     every kind x mode (fp32, bf16 products; bf16 storage: q, k, v and out bf16, against
 *             the emulation's bf16 mode on the same values, its output rounded), two (D, case)
 *             pairs each in rotation over D = 16, 32, 64, 128 and the (Tq, Tk, kv_stride, nsplit)
 *             cases; softmax and lssar fp32 over every D (every case at D = 16, every third
 *             otherwise). The cases: Tk = 1, Tk
 *             not a multiple of the 32-key tile, nsplit = 1, the automatic split count, more splits
 *             than tiles, Tq = 16. The kv cache rows past Tk NaN (never read); out starts NaN (every
 *             element written); some cases run twice, the same bits (the shim's threads interleave
 *             differently each time)
 *   nonfinite NaN (and inf or -inf in rotation) in one element of q, k or v, every kind: the same
 *             bits as the emulation (NaN where it has NaN), the rows that cannot see it unchanged
 *   args      Tq > 16, D = 48, NULL scratch: refused with the codes; cuda_attn_decode_applies
 */
#include "cuda_host.h"  // first: the shim

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "lssar.h"
#include "cuda/flash_decode.h"
extern "C" {
#include "attn/flash_decode_emu.h"
#include "core/fastmath.h"
}

static int n_pass = 0, n_fail = 0;
#define KIND_NAME(kind) lssar_attn_name((lssar_attn_kind)(kind))

static void check(bool ok, const char *what) {
    if (ok) {
        n_pass++;
        printf("ok   %s\n", what);
        return;
    }
    n_fail++;
    printf("FAIL %s\n", what);
    fflush(stdout);
}

// Deterministic normal(0, 1) inputs.
struct Rng {
    uint64_t s;
    double uni() {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        return ((s >> 11) + 0.5) * 0x1p-53;
    }
    float normal() { return (float)(sqrt(-2.0 * log(uni())) * cos(6.283185307179586 * uni())); }
};

// Same value, NaN matching NaN (a relative allowance when the emulation's library contracts).
static bool same(float a, float b) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
#ifdef LSSAR_HOST_EMU_FMA
    if (a == b) return true;   // (infinities too: inf - inf is NaN)
    return fabsf(a - b) <= 1e-5f * fmaxf(1.0f, fmaxf(fabsf(a), fabsf(b)));
#else
    return memcmp(&a, &b, 4) == 0;
#endif
}

struct Case { int Tq, Tk, kvs, nsplit; };

// x as bf16 bits, and back
static std::vector<uint16_t> to16(const float *x, size_t n) {
    std::vector<uint16_t> h(n);
    for (size_t i = 0; i < n; i++) h[i] = fm_bf16_rne(x[i]);
    return h;
}
static std::vector<float> widened(const std::vector<uint16_t> &h) {
    std::vector<float> x(h.size());
    for (size_t i = 0; i < h.size(); i++) x[i] = fm_bf16_float(h[i]);
    return x;
}

// One run of the kernel and of the emulation; returns the number of elements that differ (-1: an
// error) and leaves the kernel's output in got. mode 0: fp32, 1: bf16 products, 2: bf16 storage
// (the inputs rounded to bf16 first; the emulation's bf16 mode on those values, its output rounded).
static long run_one(const lssar_attn_desc &a, int mode, const Case &c, int B, int H, int D, const float *q,
                    const float *k, const float *v, std::vector<float> &got) {
    size_t no = (size_t)B * c.Tq * H * D, nk = (size_t)B * c.kvs * H * D;
    std::vector<float> ref(no, NAN);
    got.assign(no, NAN);
    size_t sb = cuda_attn_decode_scratch_bytes(&a, c.nsplit, B, c.Tq, c.Tk, H, D);
    std::vector<unsigned char> scratch(sb + 16, 0xff);
    int rc, rc2;
    if (mode == 2) {
        std::vector<uint16_t> q16 = to16(q, no), k16 = to16(k, nk), v16 = to16(v, nk), o16(no, 0xFFFF);
        std::vector<float> qf = widened(q16), kf = widened(k16), vf = widened(v16);
        rc = cuda_attn_decode_forward(&a, 0, LSSAR_BF16, c.nsplit, B, c.Tq, c.Tk, c.kvs, H, D, q16.data(),
                                      k16.data(), v16.data(), o16.data(), scratch.data(), NULL);
        rc2 = flash_decode_emu_forward(&a, FLASH_BF16, c.nsplit, B, c.Tq, c.Tk, c.kvs, H, D, qf.data(),
                                       kf.data(), vf.data(), ref.data());
        got = widened(o16);
        ref = widened(to16(ref.data(), no));
    } else {
        rc = cuda_attn_decode_forward(&a, mode, LSSAR_F32, c.nsplit, B, c.Tq, c.Tk, c.kvs, H, D, q, k, v,
                                      got.data(), scratch.data(), NULL);
        rc2 = flash_decode_emu_forward(&a, (flash_mode)mode, c.nsplit, B, c.Tq, c.Tk, c.kvs, H, D, q, k, v,
                                       ref.data());
    }
    if (rc || rc2) {
        printf("  error: %s\n", lssar_errmsg());
        return -1;
    }
    long bad = 0;
    for (size_t i = 0; i < no; i++) bad += !same(got[i], ref[i]);
    return bad;
}

static void fill(Rng &g, std::vector<float> &x, float scale) {
    for (auto &e : x) e = scale * g.normal();
}

// One exact case: kind, mode, D, c; rerun: a second run must give the same bits.
static void exact_case(int kind, int mode, int D, const Case &c, int len_norm, bool rerun) {
    const int B = 1, H = 2;
    float ssm[H] = {0.43f, 0.71f};
    Rng g{0x9e3779b97f4a7c15ull ^ (uint64_t)(kind * 131 + mode * 17 + D + c.Tk * 7919 + c.nsplit)};
    std::vector<float> q((size_t)B * c.Tq * H * D), k((size_t)B * c.kvs * H * D, NAN), v(k.size(), NAN);
    fill(g, q, 1.5f);
    for (int b = 0; b < B; b++)  // rows past Tk stay NaN: never read
        for (size_t e = 0; e < (size_t)c.Tk * H * D; e++) {
            size_t i = (size_t)b * c.kvs * H * D + e;
            k[i] = 1.5f * g.normal();
            v[i] = g.normal();
        }
    lssar_attn_desc a;
    memset(&a, 0, sizeof a);
    a.kind = (lssar_attn_kind)kind; a.p = 15.0f; a.ssmax_s = ssm;
    a.len_norm = (lssar_len_norm)len_norm; a.train_len = 64;
    std::vector<float> got, again;
    long bad = run_one(a, mode, c, B, H, D, q.data(), k.data(), v.data(), got), bad2 = 0;
    bool same_run = true;
    if (rerun) {
        bad2 = run_one(a, mode, c, B, H, D, q.data(), k.data(), v.data(), again);
        same_run = bad2 == 0 && memcmp(got.data(), again.data(), got.size() * 4) == 0;
    }
    long nan = 0;
    for (float y : got) nan += isnan(y);
    char what[200];
    snprintf(what, sizeof what, "exact %s %s D=%d Tq=%d Tk=%d kvs=%d nsplit=%d: %ld differ, %ld NaN%s",
             KIND_NAME(kind), mode == 2 ? "bf16-storage" : mode ? "bf16" : "fp32", D, c.Tq, c.Tk, c.kvs,
             c.nsplit, bad, nan,
             rerun ? (same_run ? ", rerun same" : ", rerun DIFFERS") : "");
    check(bad == 0 && nan == 0 && same_run, what);
}

// Every kind x mode with a D and two cases in rotation; then softmax and lssar (fp32) over every D
// and case. The cases: Tk = 1, Tk not a multiple of the 32-key tile, nsplit = 1, automatic, more
// splits requested than tiles, Tq = 16, a long cache.
static void test_exact(void) {
    static const Case cases[] = {{1, 1, 1, 1},      {1, 33, 40, 1},     {1, 100, 130, 0},
                                 {2, 65, 65, 3},    {16, 16, 20, 2},    {5, 300, 300, 7},
                                 {16, 200, 210, 0}, {1, 1500, 1501, 0}, {3, 97, 97, 50}};
    const int nc = (int)(sizeof cases / sizeof cases[0]), Ds[4] = {16, 32, 64, 128};
    int n = 0;
    for (int kind = 0; kind < LSSAR_ATTN_NKINDS; kind++)
        for (int mode = 0; mode < 3; mode++, n++) {
            exact_case(kind, mode, Ds[n % 4], cases[n % nc], n % 2, n % 5 == 0);
            exact_case(kind, mode, Ds[(n + 1) % 4], cases[(n + 4) % nc], (n + 1) % 2, false);
        }
    for (int kind : {(int)LSSAR_ATTN_SOFTMAX, (int)LSSAR_ATTN_LSSAR})
        for (int D : Ds)
            for (int ci = 0; ci < nc; ci += (D == 16 ? 1 : 3)) exact_case(kind, 0, D, cases[ci], 0, false);
}

static void test_nonfinite(void) {
    const int B = 1, H = 2, D = 16;
    const Case c = {4, 130, 130, 3};
    const float vals[3] = {NAN, INFINITY, -INFINITY};
    float ssm[H] = {0.5f, 0.6f};
    for (int kind = 0; kind < LSSAR_ATTN_NKINDS; kind++) {
        Rng g{77u + (uint64_t)kind};
        std::vector<float> q((size_t)B * c.Tq * H * D), k((size_t)B * c.kvs * H * D), v(k.size()), base;
        fill(g, q, 1.0f); fill(g, k, 1.0f); fill(g, v, 1.0f);
        lssar_attn_desc a;
        memset(&a, 0, sizeof a);
        a.kind = (lssar_attn_kind)kind; a.p = 15.0f; a.ssmax_s = ssm; a.train_len = 64;
        long bad = run_one(a, 0, c, B, H, D, q.data(), k.data(), v.data(), base), rows_changed = 0,
             nan_missing = 0;
        for (int ti = 0; ti < 3; ti++)
            for (int vi = 0; vi < 3; vi++) {
                if (vi && (kind + ti + vi) % 3) continue;  // NaN everywhere, inf in rotation (time)
                std::vector<float> qq = q, kk = k, vv = v, got;
                int pos = ti == 0 ? 1 : 128;  // query row 1, or key 128 (seen by query rows 2 and 3 only)
                (ti == 0 ? qq : ti == 1 ? kk : vv)[(size_t)pos * H * D + 1] = vals[vi];
                long b1 = run_one(a, 0, c, B, H, D, qq.data(), kk.data(), vv.data(), got);
                bad += b1 < 0 ? 1 : b1;
                for (int r = 0; r < c.Tq; r++)
                    for (int h = 0; h < H; h++) {
                        const float *o = got.data() + ((size_t)r * H + h) * D,
                                    *o0 = base.data() + ((size_t)r * H + h) * D;
                        int sees = h == 0 && (ti == 0 ? r == pos : c.Tk - c.Tq + r >= pos);
                        if (!sees) rows_changed += memcmp(o, o0, D * 4) != 0;
                        if (sees && vi == 0)
                            for (int d = 0; d < D; d++) nan_missing += (ti < 2 || d == 1) && !isnan(o[d]);
                    }
            }
        char what[200];
        snprintf(what, sizeof what,
                 "nonfinite %s: %ld differ from the emulation, %ld rows that cannot see it changed, "
                 "%ld outputs of rows that see a NaN not NaN",
                 KIND_NAME(kind), bad, rows_changed, nan_missing);
        check(bad == 0 && rows_changed == 0 && nan_missing == 0, what);
    }
}

static void test_args(void) {
    lssar_attn_desc a;
    memset(&a, 0, sizeof a);
    a.kind = LSSAR_ATTN_SOFTMAX;
    std::vector<float> x(17 * 64 * 4, 0.0f), out(x.size());
    std::vector<unsigned char> s(1 << 20);
    unsigned long before = cuda_host_device.launches;
    check(cuda_attn_decode_forward(&a, 0, LSSAR_F32, 0, 1, 17, 64, 64, 1, 64, x.data(), x.data(), x.data(),
                                   out.data(), s.data(), NULL) == LSSAR_E_SIZE,
          "args: Tq = 17 refused");
    check(cuda_attn_decode_forward(&a, 0, LSSAR_F32, 0, 1, 1, 64, 64, 1, 48, x.data(), x.data(), x.data(),
                                   out.data(), s.data(), NULL) == LSSAR_E_UNSUPPORTED,
          "args: D = 48 refused");
    check(cuda_attn_decode_forward(&a, 0, LSSAR_F32, 0, 1, 1, 64, 64, 1, 64, x.data(), x.data(), x.data(),
                                   out.data(), NULL, NULL) == LSSAR_E_NULL,
          "args: NULL scratch refused");
    check(cuda_host_device.launches == before, "args: nothing launched");
    // the dispatch's test (the host build's device has 132 SMs)
    check(cuda_attn_decode_applies(&a, 1, 1, 1024, 12, 64, 0) == 1, "applies: B = 1, H = 12, Tk = 1024");
    check(cuda_attn_decode_applies(&a, 1, 16, 300, 12, 128, 0) == 1, "applies: Tq = 16, D = 128");
    check(cuda_attn_decode_applies(&a, 1, 1, 1024, 12, 64, 1) == 0, "applies: not with statistics");
    check(cuda_attn_decode_applies(&a, 1, 17, 1024, 12, 64, 0) == 0, "applies: not for Tq = 17");
    check(cuda_attn_decode_applies(&a, 64, 1, 1024, 12, 64, 0) == 0, "applies: not when B H fills the GPU");
    check(cuda_attn_decode_applies(&a, 1, 1, 40, 12, 64, 0) == 0, "applies: not for Tk < 64 (one split)");
    check(cuda_attn_decode_applies(&a, 1, 1, 1024, 12, 48, 0) == 0, "applies: not for D = 48");
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    test_args();
    test_nonfinite();
    test_exact();
    printf("test_decode_host: %d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
