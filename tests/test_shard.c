// test_shard.c - the shard format, the synthetic task, atomic files and the RNG.
#include <string.h>
#include <unistd.h>
#include "harness.h"
#include "core/util.h"
#include "data/shard.h"
#include "data/synth.h"

// A library call that returns an error code (0 = success): a failure fails the test, with the
// library's message, instead of being ignored.

static char dir[] = "/tmp/lssar_test_shard_XXXXXX";

static void path_in(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", dir, name); }

static void test_round_trip_two_channels(void) {
    char p[256]; path_in(p, sizeof p, "two.bin");
    shard_writer w;
    CHECK(shard_writer_open(&w, p, 2, 0) == 0, "open: %s", lssar_errmsg());
    uint16_t toks[10];
    for (int i = 0; i < 10; i++) toks[i] = (uint16_t)(7000 + i);
    CHECK(shard_writer_append(&w, toks, 3) == 0, "append");
    CHECK(shard_writer_append(&w, toks + 6, 2) == 0, "append");
    CHECK(shard_writer_close(&w) == 0, "close: %s", lssar_errmsg());
    shard s;
    CHECK(shard_open(&s, p) == 0, "open: %s", lssar_errmsg());
    CHECK(s.n == 5 && s.channels == 2, "n %zu channels %d", s.n, s.channels);
    CHECK(s.tokens[0] == 7000 && s.tokens[5] == 7005 && s.tokens[6] == 7006 && s.tokens[9] == 7009, "tokens");
    CHECK(s.vocab == 0, "no vocabulary recorded: %d", s.vocab);
    shard_close(&s);
    // the vocabulary the writer knows is in header[4] (what `lssar train` takes for --vocab)
    CHECK_OK(shard_writer_open(&w, p, 1, 33));
    CHECK_OK(shard_writer_append(&w, toks, 4));
    CHECK_OK(shard_writer_close(&w));
    CHECK_OK(shard_open(&s, p));
    CHECK(s.vocab == 33, "vocabulary %d, want 33", s.vocab);
    shard_close(&s);
    CHECK(shard_writer_open(&w, p, 1, 65537) == LSSAR_E_ARG, "a vocabulary beyond uint16 ids is refused");
}

static void write_raw(const char *p, const int32_t *hdr, size_t ntok) {
    FILE *f = fopen(p, "wb");
    fwrite(hdr, 4, 256, f);
    for (size_t i = 0; i < ntok; i++) { uint16_t t = (uint16_t)i; fwrite(&t, 2, 1, f); }
    fclose(f);
}

static void test_llmc_header_and_damage(void) {
    char p[256]; path_in(p, sizeof p, "llmc.bin");
    int32_t h[256] = {20240520, 1, 10};  // llm.c writes 0 in header[3]
    write_raw(p, h, 10);
    shard s;
    CHECK(shard_open(&s, p) == 0 && s.n == 10 && s.channels == 1 && s.vocab == 0, "llm.c shard: %s", lssar_errmsg());
    shard_close(&s);
    h[4] = -3;  // the vocabulary slot: 0..65536
    write_raw(p, h, 10);
    CHECK(shard_open(&s, p) == LSSAR_E_FORMAT && strstr(lssar_errmsg(), "vocabulary -3"), "bad vocabulary: %s", lssar_errmsg());
    h[4] = 0;
    write_raw(p, h, 9);  // truncated
    CHECK(shard_open(&s, p) == LSSAR_E_FORMAT && strstr(lssar_errmsg(), "truncated"), "truncated: %s", lssar_errmsg());
    h[0] = 12345;
    write_raw(p, h, 10);
    CHECK(shard_open(&s, p) == LSSAR_E_FORMAT && strstr(lssar_errmsg(), "magic"), "magic: %s", lssar_errmsg());
    h[0] = 20240520; h[1] = 7;
    write_raw(p, h, 10);
    CHECK(shard_open(&s, p) == LSSAR_E_FORMAT && strstr(lssar_errmsg(), "version"), "version: %s", lssar_errmsg());
    FILE *f = fopen(p, "wb"); fwrite("abc", 1, 3, f); fclose(f);
    CHECK(shard_open(&s, p) == LSSAR_E_FORMAT, "tiny file");
    CHECK(shard_open(&s, "/nonexistent/x.bin") == LSSAR_E_IO, "missing file");
}

static void test_synth_repeat_structure(void) {
    char p[256]; path_in(p, sizeof p, "synth.bin");
    synth_params sp = {16, 3, 9};
    CHECK(synth_write_repeat(p, &sp, 5000, 42) == 0, "write: %s", lssar_errmsg());
    shard s;
    CHECK(shard_open(&s, p) == 0 && s.n == 5000, "open");
    CHECK(s.vocab == 17, "the synthetic shard records its vocabulary (alphabet + end-of-text): %d", s.vocab);
    // every complete document is s s EOT
    size_t start = 0, docs = 0;
    int bad = 0;
    for (size_t i = 0; i < s.n; i++) {
        if (s.tokens[i] != 16) continue;
        size_t len = i - start;
        if (len % 2 || len / 2 < 3 || len / 2 > 9) bad++;
        else if (memcmp(s.tokens + start, s.tokens + start + len / 2, len)) bad++;
        docs++; start = i + 1;
    }
    CHECK(bad == 0 && docs > 200, "docs %zu bad %d", docs, bad);
    shard_close(&s);
    char q[256]; path_in(q, sizeof q, "synth2.bin");
    CHECK_OK(synth_write_repeat(q, &sp, 5000, 42));
    char *a, *b; size_t la, lb;
    CHECK_OK(lssar_read_file(p, &a, &la)); CHECK_OK(lssar_read_file(q, &b, &lb));
    CHECK(la == lb && memcmp(a, b, la) == 0, "deterministic");
    free(a); free(b);
    sp.max_len = 1;
    CHECK(synth_write_repeat(p, &sp, 10, 1) == LSSAR_E_ARG, "bad params");
}

static void test_afile_abort_keeps_old(void) {
    char p[256]; path_in(p, sizeof p, "atomic.txt");
    lssar_afile a;
    CHECK(lssar_afile_open(&a, p) == 0, "open");
    fputs("old", a.f);
    CHECK(lssar_afile_commit(&a) == 0, "commit");
    CHECK(lssar_afile_open(&a, p) == 0, "open 2");
    fputs("new-partial", a.f);
    lssar_afile_abort(&a);
    char *d; size_t n;
    CHECK(lssar_read_file(p, &d, &n) == 0 && n == 3 && !memcmp(d, "old", 3), "old content kept");
    free(d);
    CHECK(lssar_afile_open(&a, "/nonexistent/dir/x") == LSSAR_E_IO, "bad dir");
}

static void test_rng(void) {
    lssar_rng r;
    lssar_rng_seed(&r, 1);
    double s = 0, s2 = 0;
    int n = 200000, below_bad = 0;
    for (int i = 0; i < n; i++) { double x = lssar_rng_normal(&r); s += x; s2 += x * x; }
    CHECK(fabs(s / n) < 0.01 && fabs(s2 / n - 1) < 0.02, "normal moments %g %g", s / n, s2 / n);
    for (int i = 0; i < 10000; i++) if (lssar_rng_below(&r, 7) >= 7) below_bad++;
    CHECK(below_bad == 0, "below out of range");
    lssar_rng a, b;
    lssar_rng_stream(&a, 5, 0); lssar_rng_stream(&b, 5, 1);
    CHECK(lssar_rng_u64(&a) != lssar_rng_u64(&b), "streams differ");
}

int main(void) {
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    RUN(test_round_trip_two_channels);
    RUN(test_llmc_header_and_damage);
    RUN(test_synth_repeat_structure);
    RUN(test_afile_abort_keeps_old);
    RUN(test_rng);
    char cmd[300]; snprintf(cmd, sizeof cmd, "rm -rf %s", dir); if (system(cmd)) {}
    return test_summary("test_shard");
}
