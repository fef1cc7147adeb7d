// test_checkpoint.c - safetensors reader/writer and the run-directory checkpoints: round trips
// are bit-exact, and every kind of damage is refused with LSSAR_E_FORMAT and a message naming
// the file, never a crash.
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "harness.h"
#include "model/checkpoint.h"
#include "model/safetensors.h"

// A library call that returns an error code (0 = success): a failure fails the test, with the
// library's message, instead of being ignored.

static char tmpdir[64];

static const char *tpath(const char *name) {
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

// Raw file: 8-byte length, header text, data.
static void write_raw(const char *path, const char *json, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    uint64_t len = strlen(json);
    fwrite(&len, 8, 1, f);
    fwrite(json, 1, len, f);
    if (n) fwrite(data, 1, n, f);
    fclose(f);
}

static int count_tmp_files(void) {
    DIR *d = opendir(tmpdir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) if (strstr(e->d_name, ".tmp.")) n++;
    closedir(d);
    return n;
}

static size_t file_size(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    fseek(f, 0, SEEK_END);
    size_t n = ftell(f);
    fclose(f);
    return n;
}

// A good file with three tensors and metadata.
static float A[6] = {1, -2, 3.5f, 1e-30f, -0.0f, 7};
static int64_t I[4] = {-1, 0, 1LL << 40, INT64_MIN};
static int write_good(const char *path) {
    st_writer w;
    st_writer_init(&w);
    CHECK_OK(st_writer_meta(&w, "config", "{\"layers\": 2}"));
    CHECK_OK(st_writer_meta(&w, "name", "test"));
    int64_t sa[2] = {2, 3}, si[1] = {4}, se[2] = {0, 5};
    CHECK_OK(st_writer_add(&w, "a", "F32", 2, sa));
    CHECK_OK(st_writer_add(&w, "ints", "I64", 1, si));
    CHECK_OK(st_writer_add(&w, "empty", "F32", 2, se));
    float s = 42;
    CHECK_OK(st_writer_add(&w, "scalar", "F32", 0, NULL));
    int rc = st_writer_begin(&w, path);
    if (rc) return rc;
    // any chunking of the stream is allowed
    CHECK_OK(st_writer_write(&w, A, 8));
    CHECK_OK(st_writer_write(&w, (char *)A + 8, sizeof A - 8));
    CHECK_OK(st_writer_write(&w, I, sizeof I));
    CHECK_OK(st_writer_write(&w, &s, 4));
    return st_writer_commit(&w);
}

static void test_roundtrip(void) {
    const char *p = tpath("good.safetensors");
    int rc = write_good(p);
    CHECK(rc == 0, "write failed: %s", lssar_errmsg());
    CHECK(count_tmp_files() == 0, "temporary files left behind");
    // header length is a multiple of 8 and the data follows it
    FILE *f = fopen(p, "rb");
    uint64_t hl = 0;
    CHECK(f && fread(&hl, 8, 1, f) == 1, "cannot read back");
    if (f) fclose(f);
    CHECK(hl % 8 == 0, "header length %llu not 8-aligned", (unsigned long long)hl);
    CHECK(file_size(p) == 8 + hl + sizeof A + sizeof I + 4, "file size %zu", file_size(p));
    st_file sf;
    rc = st_open(&sf, p);
    CHECK(rc == 0, "open failed: %s", lssar_errmsg());
    if (rc) return;
    CHECK(sf.n == 4, "%d tensors", sf.n);
    const st_tensor *t = st_find(&sf, "a");
    CHECK(t && t->ndim == 2 && t->shape[0] == 2 && t->shape[1] == 3 && !strcmp(t->dtype, "F32"), "tensor a header");
    CHECK(t && memcmp(t->data, A, sizeof A) == 0, "tensor a data differs");
    int64_t got[4];
    CHECK(st_read(&sf, "ints", "I64", got, 4) == 0 && memcmp(got, I, sizeof I) == 0, "ints differ");
    t = st_find(&sf, "empty");
    CHECK(t && t->numel == 0 && t->nbytes == 0, "empty tensor");
    float s = 0;
    CHECK(st_read(&sf, "scalar", "F32", &s, 1) == 0 && s == 42, "scalar %g", s);
    CHECK(st_meta(&sf, "config") && !strcmp(st_meta(&sf, "config"), "{\"layers\": 2}"), "metadata config");
    CHECK(st_meta(&sf, "name") && !strcmp(st_meta(&sf, "name"), "test"), "metadata name");
    CHECK(st_meta(&sf, "nope") == NULL, "absent metadata");
    CHECK(st_find(&sf, "nope") == NULL, "absent tensor");
    // st_read checks dtype and size
    CHECK(st_read(&sf, "a", "I64", got, 6) == LSSAR_E_FORMAT, "wrong dtype accepted");
    CHECK(st_read(&sf, "a", "F32", got, 5) == LSSAR_E_FORMAT, "wrong count accepted");
    CHECK(st_read(&sf, "missing", "F32", got, 1) == LSSAR_E_FORMAT, "missing tensor accepted");
    CHECK(strstr(lssar_errmsg(), "missing") != NULL, "message: %s", lssar_errmsg());
    st_close(&sf);
}

// Open must fail with `want`, and the message must name the file.
static void expect_bad(const char *path, int want, const char *what) {
    st_file sf;
    int rc = st_open(&sf, path);
    CHECK(rc == want, "%s: st_open returned %d (want %d), message: %s", what, rc, want, lssar_errmsg());
    if (rc == 0) st_close(&sf);
    else CHECK(strstr(lssar_errmsg(), path) != NULL, "%s: message does not name the file: %s", what, lssar_errmsg());
}

static void test_damaged(void) {
    const char *good = tpath("good2.safetensors");
    CHECK(write_good(good) == 0, "write failed");
    char *data; size_t len;
    CHECK(lssar_read_file(good, &data, &len) == 0, "read back");
    const char *p = tpath("bad.safetensors");
    FILE *f;
    // truncated by one byte, and to half, and to 5 bytes
    size_t cuts[] = {len - 1, len / 2, 20, 5, 0};
    for (int i = 0; i < 5; i++) {
        f = fopen(p, "wb"); fwrite(data, 1, cuts[i], f); fclose(f);
        expect_bad(p, LSSAR_E_FORMAT, "truncated");
    }
    // trailing garbage
    f = fopen(p, "wb"); fwrite(data, 1, len, f); fwrite("xyz", 1, 3, f); fclose(f);
    expect_bad(p, LSSAR_E_FORMAT, "trailing bytes");
    // garbage header length
    char *copy = malloc(len);
    memcpy(copy, data, len);
    memset(copy, 0xFF, 8);
    f = fopen(p, "wb"); fwrite(copy, 1, len, f); fclose(f);
    expect_bad(p, LSSAR_E_FORMAT, "huge header length");
    uint64_t small = 3;
    memcpy(copy, data, len); memcpy(copy, &small, 8);
    f = fopen(p, "wb"); fwrite(copy, 1, len, f); fclose(f);
    expect_bad(p, LSSAR_E_FORMAT, "short header length");
    // bad JSON: break the first key/value separator
    memcpy(copy, data, len);
    char *colon = memchr(copy + 9, ':', len - 9);
    if (colon) *colon = '#';
    f = fopen(p, "wb"); fwrite(copy, 1, len, f); fclose(f);
    expect_bad(p, LSSAR_E_FORMAT, "bad JSON");
    free(copy);
    free(data);
    float d[4] = {1, 2, 3, 4};
    write_raw(p, "{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}} x", d, 16);
    expect_bad(p, LSSAR_E_FORMAT, "garbage after the header object");
    write_raw(p, "[1, 2]", NULL, 0);
    expect_bad(p, LSSAR_E_FORMAT, "header not an object");
    write_raw(p, "{\"a\": {\"dtype\": \"F99\", \"shape\": [4], \"data_offsets\": [0, 16]}}", d, 16);
    expect_bad(p, LSSAR_E_FORMAT, "unknown dtype");
    write_raw(p, "{\"a\": {\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [0, 16]}}", d, 16);
    expect_bad(p, LSSAR_E_FORMAT, "shape disagrees with offsets");
    write_raw(p, "{\"a\": {\"dtype\": \"F32\", \"shape\": [-4], \"data_offsets\": [0, 16]}}", d, 16);
    expect_bad(p, LSSAR_E_FORMAT, "negative shape");
    write_raw(p, "{\"a\": {\"dtype\": \"F32\", \"shape\": [2.5], \"data_offsets\": [0, 16]}}", d, 16);
    expect_bad(p, LSSAR_E_FORMAT, "fractional shape");
    write_raw(p, "{\"a\": {\"dtype\": \"F32\", \"shape\": [8], \"data_offsets\": [0, 32]}}", d, 16);
    expect_bad(p, LSSAR_E_FORMAT, "offsets past the end");
    write_raw(p, "{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [16, 0]}}", d, 16);
    expect_bad(p, LSSAR_E_FORMAT, "end before begin");
    write_raw(p, "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}", d, 16);
    expect_bad(p, LSSAR_E_FORMAT, "overlapping tensors");
    write_raw(p, "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 16]}}", d, 16);
    expect_bad(p, LSSAR_E_FORMAT, "hole at the start");
    write_raw(p, "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, \"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 16]}}", d, 16);
    expect_bad(p, LSSAR_E_FORMAT, "duplicate name");
    write_raw(p, "{\"__metadata__\": {\"k\": 3}, \"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}}", d, 16);
    expect_bad(p, LSSAR_E_FORMAT, "non-string metadata");
    write_raw(p, "{\"a\": {\"dtype\": \"F32\", \"shape\": [4]}}", d, 16);
    expect_bad(p, LSSAR_E_FORMAT, "missing data_offsets");
    write_raw(p, "{\"a\": 5}", d, 16);
    expect_bad(p, LSSAR_E_FORMAT, "entry not an object");
    // a well-formed foreign file with a header length that leaves the data unaligned still reads
    write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", d, 16);
    st_file sf;
    int rc = st_open(&sf, p);
    CHECK(rc == 0, "unpadded file refused: %s", lssar_errmsg());
    if (!rc) {
        float got[4];
        CHECK(st_read(&sf, "a", "F32", got, 4) == 0 && !memcmp(got, d, 16), "unaligned read");
        st_close(&sf);
    }
    expect_bad(tpath("does-not-exist.safetensors"), LSSAR_E_IO, "missing file");
    expect_bad(tmpdir, LSSAR_E_IO, "a directory");
}

static void test_atomic(void) {
    const char *p = tpath("atomic.safetensors");
    CHECK(write_good(p) == 0, "write failed");
    size_t before = file_size(p);
    // a writer that is aborted, or that did not write every declared byte, leaves the old file
    st_writer w;
    st_writer_init(&w);
    int64_t s[1] = {1000};
    CHECK_OK(st_writer_add(&w, "x", "F32", 1, s));
    CHECK(st_writer_begin(&w, p) == 0, "begin");
    float z[10] = {0};
    CHECK_OK(st_writer_write(&w, z, sizeof z));
    int rc = st_writer_commit(&w);
    CHECK(rc != 0, "commit with missing data succeeded");
    CHECK(file_size(p) == before, "old file changed by a failed commit");
    st_writer_init(&w);
    CHECK_OK(st_writer_add(&w, "x", "F32", 1, s));
    CHECK(st_writer_begin(&w, p) == 0, "begin");
    st_writer_abort(&w);
    CHECK(file_size(p) == before, "old file changed by an abort");
    st_file sf;
    CHECK(st_open(&sf, p) == 0, "old file no longer opens: %s", lssar_errmsg());
    st_close(&sf);
    // writing more than declared is refused
    st_writer_init(&w);
    int64_t one = 1;
    CHECK_OK(st_writer_add(&w, "x", "F32", 1, &one));
    CHECK(st_writer_begin(&w, p) == 0, "begin");
    CHECK(st_writer_write(&w, z, 8) != 0, "overlong write accepted");
    st_writer_abort(&w);
    CHECK(count_tmp_files() == 0, "temporary files left behind");
    // a directory that does not exist: clear error, no crash
    st_writer_init(&w);
    CHECK_OK(st_writer_add(&w, "x", "F32", 1, &one));
    rc = st_writer_begin(&w, tpath("no/such/dir/x.safetensors"));
    CHECK(rc == LSSAR_E_IO, "missing directory: rc %d", rc);
    st_writer_abort(&w);
}

// ------------------------------------------------------------------ model checkpoints

static gpt *tiny_model(int dim, lssar_attn_kind kind, uint64_t seed) {
    gpt_config c = {.layers = 2, .heads = 2, .dim = dim, .vocab = 11, .channels = 2, .max_seq = 8,
                    .pos = LSSAR_POS_ROPE, .attn = kind, .p = 15.0f, .tied = 0};
    gpt *m = NULL;
    int rc = gpt_create(&c, seed, &m);
    CHECK(rc == 0, "gpt_create: %s", lssar_errmsg());
    return m;
}

// 1 if buffer `which` of every tensor is bitwise equal in a and b.
static int same_buffers(const gpt *a, const gpt *b, gpt_buffer which) {
    if (gpt_num_tensors(a) != gpt_num_tensors(b)) return 0;
    int same = 1;
    for (int i = 0; i < gpt_num_tensors(a) && same; i++) {
        size_t n = gpt_tensor_numel(a, i);
        if (n != gpt_tensor_numel(b, i) || strcmp(gpt_tensor_name(a, i), gpt_tensor_name(b, i))) return 0;
        float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
        CHECK_OK(gpt_read_tensor(a, which, i, x));
        CHECK_OK(gpt_read_tensor(b, which, i, y));
        same = !memcmp(x, y, n * sizeof *x);
        free(x); free(y);
    }
    return same;
}

static void test_model_roundtrip(void) {
    gpt *m = tiny_model(16, LSSAR_ATTN_LSSAR, 5);
    if (!m) return;
    const char *p = tpath("model.safetensors");
    CHECK(ckpt_save_model(m, p, 42) == 0, "save: %s", lssar_errmsg());
    gpt *l = NULL;
    int64_t step = 0;
    int rc = ckpt_load_model(p, NULL, &l, &step);
    CHECK(rc == 0, "load: %s", lssar_errmsg());
    if (!rc) {
        const gpt_config *a = gpt_get_config(m), *b = gpt_get_config(l);
        CHECK(step == 42, "step %lld", (long long)step);
        CHECK(a->layers == b->layers && a->heads == b->heads && a->dim == b->dim && a->vocab == b->vocab &&
              a->channels == b->channels && a->max_seq == b->max_seq && a->pos == b->pos && a->attn == b->attn &&
              a->p == b->p && a->tied == b->tied, "config differs after the round trip");
        CHECK(same_buffers(m, l, GPT_BUF_PARAM), "parameters differ after the round trip");
        gpt_free(l);
    }
    // the file is plain safetensors: every tensor F32 under its gpt.h name, config in metadata
    st_file f;
    CHECK(st_open(&f, p) == 0, "st_open");
    CHECK(f.n == gpt_num_tensors(m), "%d tensors in the file, model has %d", f.n, gpt_num_tensors(m));
    CHECK(st_find(&f, "wte.0") && st_find(&f, "wte.1") && st_find(&f, "lm_head.1") && st_find(&f, "h.1.attn.c_attn.weight"), "GPT-2 names");
    CHECK(st_meta(&f, "attn") && !strcmp(st_meta(&f, "attn"), "lssar"), "attn metadata");
    st_close(&f);
    // lssa <-> lssar may be swapped at load; other kinds may not
    l = NULL;
    CHECK(ckpt_load_model(p, &(ckpt_load_opts){.set_attn = 1, .attn = LSSAR_ATTN_LSSA}, &l, NULL) == 0 && l && gpt_get_config(l)->attn == LSSAR_ATTN_LSSA, "lssar -> lssa refused");
    if (l) gpt_free(l);
    l = NULL;
    CHECK(ckpt_load_model(p, &(ckpt_load_opts){.set_attn = 1, .attn = LSSAR_ATTN_LSSAR, .p = 4.0f}, &l, NULL) == 0 && l && gpt_get_config(l)->p == 4.0f, "p override");
    if (l) gpt_free(l);
    l = NULL;
    rc = ckpt_load_model(p, &(ckpt_load_opts){.set_attn = 1, .attn = LSSAR_ATTN_SOFTMAX}, &l, NULL);
    CHECK(rc == LSSAR_E_ARG && l == NULL, "lssar -> softmax accepted (rc %d)", rc);
    CHECK(strstr(lssar_errmsg(), "lssa") != NULL, "message: %s", lssar_errmsg());
    gpt_free(m);
}

static void expect_model_bad(const char *path, const char *what, const char *needle);

// Copy model file `src` to `dst` with metadata key `key` dropped (val NULL) or set to val.
static void rewrite_meta(const char *src, const char *dst, const char *key, const char *val) {
    st_file f;
    CHECK_OK(st_open(&f, src));
    st_writer w;
    st_writer_init(&w);
    for (int i = 0; i < f.n_meta; i++)
        if (strcmp(f.meta_keys[i], key)) CHECK_OK(st_writer_meta(&w, f.meta_keys[i], f.meta_vals[i]));
    if (val) CHECK_OK(st_writer_meta(&w, key, val));
    for (int i = 0; i < f.n; i++) {
        const st_tensor *t = &f.tensors[i];
        CHECK_OK(st_writer_add(&w, t->name, t->dtype, t->ndim, t->shape));
    }
    CHECK_OK(st_writer_begin(&w, dst));
    for (int i = 0; i < f.n; i++) CHECK_OK(st_writer_write(&w, f.tensors[i].data, f.tensors[i].nbytes));
    CHECK_OK(st_writer_commit(&w));
    st_close(&f);
}

// sigmoid / relu and their length normalisation survive the round trip; a file from before the
// len_norm field loads as train (what those files meant); an unknown value is a format error;
// both backends accept the two kinds (the CUDA one has them since the fused kernels do).
static void test_len_norm_roundtrip(void) {
    const char *p = tpath("ln.safetensors"), *q = tpath("ln-old.safetensors");
    for (int kind = LSSAR_ATTN_SIGMOID; kind <= LSSAR_ATTN_RELU; kind++)
        for (int ln = 0; ln < 2; ln++) {
            gpt_config c = {.layers = 1, .heads = 2, .dim = 8, .vocab = 11, .channels = 1, .max_seq = 8,
                            .pos = LSSAR_POS_ROPE, .attn = kind, .p = 15.0f, .tied = 1,
                            .len_norm = ln};
            gpt *m = NULL, *l = NULL;
            CHECK_OK(gpt_create(&c, 3, &m));
            if (!m) continue;
            CHECK_OK(ckpt_save_model(m, p, 7));
            st_file f;
            CHECK_OK(st_open(&f, p));
            CHECK(st_meta(&f, "len_norm") && !strcmp(st_meta(&f, "len_norm"), ln ? "row" : "train") &&
                  st_meta(&f, "attn") && !strcmp(st_meta(&f, "attn"), lssar_attn_name(kind)), "metadata");
            st_close(&f);
            CHECK(ckpt_load_model(p, NULL, &l, NULL) == 0 && l, "load: %s", lssar_errmsg());
            if (l) {
                CHECK(gpt_get_config(l)->attn == kind && gpt_get_config(l)->len_norm == ln, "%s len_norm %d: read back "
                      "as %s %d", lssar_attn_name(kind), ln, lssar_attn_name(gpt_get_config(l)->attn),
                      (int)gpt_get_config(l)->len_norm);
                CHECK(same_buffers(m, l, GPT_BUF_PARAM), "parameters differ after the round trip");
                gpt_free(l);
                l = NULL;
            }
            rewrite_meta(p, q, "len_norm", NULL);   // a file from before the field
            CHECK(ckpt_load_model(q, NULL, &l, NULL) == 0 && l && gpt_get_config(l)->len_norm == LSSAR_LEN_NORM_TRAIN,
                  "a file without len_norm: %s", lssar_errmsg());
            if (l) gpt_free(l);
            l = NULL;
            rewrite_meta(p, q, "len_norm", "sideways");
            expect_model_bad(q, "len_norm sideways", "len_norm");
            // the configuration is valid for the GPU backend too
            c.device = LSSAR_DEVICE_CUDA;
            CHECK(gpt_config_check(&c) == 0, "cuda %s: %s", lssar_attn_name(kind), lssar_errmsg());
            gpt_free(m);
        }
}

// Every kind (each combination of stages) survives the round trip under its name, with its
// re-weighting power and SSMax scales; a model may be loaded with the re-weighting switched (the
// kinds share every parameter) but not as another score or phi; an unknown name is a format error.
static void test_stages_roundtrip(void) {
    const char *p = tpath("stages.safetensors"), *q = tpath("stages-bad.safetensors");
    for (int kind = 0; kind < LSSAR_ATTN_NKINDS; kind++) {
        gpt_config c = {.layers = 1, .heads = 2, .dim = 8, .vocab = 11, .channels = 1, .max_seq = 8,
                        .pos = LSSAR_POS_ROPE, .attn = kind, .p = 7.0f, .tied = 1};
        gpt *m = NULL, *l = NULL;
        CHECK_OK(gpt_create(&c, 5, &m));
        if (!m) continue;
        CHECK_OK(ckpt_save_model(m, p, 3));
        CHECK(ckpt_load_model(p, NULL, &l, NULL) == 0 && l, "%s: load: %s", lssar_attn_name(kind), lssar_errmsg());
        if (l) {
            CHECK(gpt_get_config(l)->attn == kind && gpt_get_config(l)->p == 7.0f, "%s read back as %s p %g",
                  lssar_attn_name(kind), lssar_attn_name(gpt_get_config(l)->attn), (double)gpt_get_config(l)->p);
            CHECK(same_buffers(m, l, GPT_BUF_PARAM), "%s: parameters differ after the round trip", lssar_attn_name(kind));
            gpt_free(l);
            l = NULL;
        }
        lssar_attn_stages st, sw;
        lssar_attn_stages_of(kind, &st);
        for (int other = 0; other < LSSAR_ATTN_NKINDS; other++) {
            if (other == kind) continue;
            lssar_attn_stages_of(other, &sw);
            int ok = sw.score == st.score && sw.phi == st.phi && sw.norm == st.norm;
            ckpt_load_opts o = {.set_attn = 1, .attn = other, .p = 3.0f};
            int rc = ckpt_load_model(p, &o, &l, NULL);
            CHECK(ok ? rc == 0 && l && gpt_get_config(l)->attn == other : rc == LSSAR_E_ARG,
                  "%s loaded as %s: %d (%s)", lssar_attn_name(kind), lssar_attn_name(other), rc, lssar_errmsg());
            if (l) gpt_free(l);
            l = NULL;
        }
        gpt_free(m);
    }
    gpt_config c = {.layers = 1, .heads = 2, .dim = 8, .vocab = 11, .channels = 1, .max_seq = 8,
                    .pos = LSSAR_POS_ROPE, .attn = LSSAR_ATTN_SOFTMAX_COS_RW, .p = 15.0f, .tied = 1};
    gpt *m = NULL;
    CHECK_OK(gpt_create(&c, 5, &m));
    if (m) {
        CHECK_OK(ckpt_save_model(m, p, 3));
        rewrite_meta(p, q, "attn", "softmax+cos+sideways");
        expect_model_bad(q, "attn softmax+cos+sideways", "attn");
        gpt_free(m);
    }
}

// The RoPE base and the temperature's D survive the round trip (and reach the attention: the
// loaded model scores as the saved one); a file from before them loads as base 10000 and the head
// size's ln; a created model records the base it uses; bad values are refused.
static void test_rope_temp_roundtrip(void) {
    const char *p = tpath("rt.safetensors"), *q = tpath("rt-old.safetensors");
    gpt_config c = {.layers = 1, .heads = 2, .dim = 16, .vocab = 11, .channels = 1, .max_seq = 8,
                    .pos = LSSAR_POS_ROPE, .attn = LSSAR_ATTN_LSSAR, .p = 15.0f, .tied = 1, .rope_base = 38.0f,
                    .temp_d = 64};
    gpt *m = NULL, *l = NULL;
    CHECK_OK(gpt_create(&c, 3, &m));
    if (!m) return;
    CHECK_OK(ckpt_save_model(m, p, 7));
    st_file f;
    CHECK_OK(st_open(&f, p));
    CHECK(st_meta(&f, "rope_base") && atof(st_meta(&f, "rope_base")) == 38.0 && st_meta(&f, "temp_d") &&
          atoi(st_meta(&f, "temp_d")) == 64, "metadata rope_base %s temp_d %s", st_meta(&f, "rope_base"), st_meta(&f, "temp_d"));
    st_close(&f);
    CHECK(ckpt_load_model(p, NULL, &l, NULL) == 0 && l, "load: %s", lssar_errmsg());
    if (l) {
        CHECK(gpt_get_config(l)->rope_base == 38.0f && gpt_get_config(l)->temp_d == 64, "read back as %g, %d",
              (double)gpt_get_config(l)->rope_base, gpt_get_config(l)->temp_d);
        gpt_free(l);
        l = NULL;
    }
    rewrite_meta(p, q, "rope_base", NULL);   // a file from before the fields
    rewrite_meta(q, q, "temp_d", NULL);
    CHECK(ckpt_load_model(q, NULL, &l, NULL) == 0 && l && gpt_get_config(l)->rope_base == GPT_ROPE_BASE &&
          gpt_get_config(l)->temp_d == 0, "a file without rope_base and temp_d: %s", lssar_errmsg());
    if (l) gpt_free(l);
    l = NULL;
    rewrite_meta(p, q, "rope_base", "0.5");
    CHECK(ckpt_load_model(q, NULL, &l, NULL) != 0 && !l && strstr(lssar_errmsg(), "rope_base"), "rope_base 0.5: %s", lssar_errmsg());
    rewrite_meta(p, q, "temp_d", "1");
    CHECK(ckpt_load_model(q, NULL, &l, NULL) != 0 && !l && strstr(lssar_errmsg(), "temp_d"), "temp_d 1: %s", lssar_errmsg());
    gpt_free(m);
    // the same weights score differently with another base or temperature (the fields reach the
    // model's forward), and identically with base 0 and 10000 (0 means 10000, as the model records)
    uint16_t in[8] = {1, 2, 3, 4, 5, 6, 7, 8}, tg[8] = {2, 3, 4, 5, 6, 7, 8, 9};
    float loss[4];
    const float bases[4] = {38.0f, 0.0f, GPT_ROPE_BASE, GPT_ROPE_BASE};
    const int temps[4] = {0, 0, 0, 64};
    for (int i = 0; i < 4; i++) {
        gpt_config d = c;
        d.rope_base = bases[i];
        d.temp_d = temps[i];
        loss[i] = NAN;
        CHECK_OK(gpt_create(&d, 3, &m));
        if (!m) continue;
        CHECK(gpt_get_config(m)->rope_base == (bases[i] ? bases[i] : GPT_ROPE_BASE), "base %g became %g", (double)bases[i],
              (double)gpt_get_config(m)->rope_base);
        CHECK_OK(gpt_reserve(m, 1, 8, 0));
        CHECK_OK(gpt_forward(m, in, tg, 1, 8, &loss[i]));
        gpt_free(m);
    }
    CHECK(loss[1] == loss[2], "base 0 and base 10000 differ: %.9g vs %.9g", loss[1], loss[2]);
    CHECK(loss[0] != loss[2] && loss[3] != loss[2], "rope_base or temp_d does not reach the forward: %.9g %.9g %.9g",
          loss[0], loss[2], loss[3]);
}

// Write `path` with the metadata of model a and the tensors of model b, changed by `mode`:
// 0 as is, 1 drop one tensor, 2 one tensor as I32, 3 one extra tensor, 4 a NaN in one tensor.
static void write_mixed(const char *path, const gpt *a, const gpt *b, int mode) {
    const char *ref = tpath("ref.safetensors");
    CHECK_OK(ckpt_save_model(a, ref, 1));
    st_file f;
    CHECK_OK(st_open(&f, ref));
    st_writer w;
    st_writer_init(&w);
    for (int i = 0; i < f.n_meta; i++) CHECK_OK(st_writer_meta(&w, f.meta_keys[i], f.meta_vals[i]));
    int n = gpt_num_tensors(b);
    for (int i = 0; i < n; i++) {
        if (mode == 1 && i == 3) continue;
        int64_t sh[8];
        for (int k = 0; k < gpt_tensor_ndim(b, i); k++) sh[k] = gpt_tensor_shape(b, i)[k];
        CHECK_OK(st_writer_add(&w, gpt_tensor_name(b, i), mode == 2 && i == 3 ? "I32" : "F32", gpt_tensor_ndim(b, i), sh));
    }
    int64_t one = 1;
    if (mode == 3) st_writer_add(&w, "h.9.surprise", "F32", 1, &one);
    CHECK_OK(st_writer_begin(&w, path));
    for (int i = 0; i < n; i++) {
        if (mode == 1 && i == 3) continue;
        size_t k = gpt_tensor_numel(b, i);
        float *x = malloc(k * sizeof *x);
        CHECK_OK(gpt_read_tensor(b, GPT_BUF_PARAM, i, x));
        if (mode == 4 && i == 5) x[k / 2] = NAN;
        CHECK_OK(st_writer_write(&w, x, k * sizeof *x));
        free(x);
    }
    float z = 0;
    if (mode == 3) st_writer_write(&w, &z, 4);
    CHECK_OK(st_writer_commit(&w));
    st_close(&f);
}

static void expect_model_bad(const char *path, const char *what, const char *needle) {
    gpt *l = NULL;
    int rc = ckpt_load_model(path, NULL, &l, NULL);
    CHECK(rc == LSSAR_E_FORMAT && l == NULL, "%s: rc %d (%s)", what, rc, lssar_errmsg());
    CHECK(strstr(lssar_errmsg(), needle) != NULL, "%s: message lacks '%s': %s", what, needle, lssar_errmsg());
    if (l) gpt_free(l);
}

static void test_model_damaged(void) {
    gpt *a = tiny_model(16, LSSAR_ATTN_SOFTMAX, 1), *b = tiny_model(8, LSSAR_ATTN_SOFTMAX, 1);
    if (!a || !b) return;
    const char *p = tpath("mixed.safetensors");
    write_mixed(p, a, a, 0);
    gpt *l = NULL;
    CHECK(ckpt_load_model(p, NULL, &l, NULL) == 0, "control file refused: %s", lssar_errmsg());
    if (l) gpt_free(l);
    write_mixed(p, a, b, 0);
    expect_model_bad(p, "wrong shapes", "shape");
    write_mixed(p, a, a, 1);
    expect_model_bad(p, "missing tensor", "missing");
    write_mixed(p, a, a, 2);
    expect_model_bad(p, "wrong dtype", "dtype");
    write_mixed(p, a, a, 3);
    expect_model_bad(p, "extra tensor", "unexpected");
    write_mixed(p, a, a, 4);
    expect_model_bad(p, "NaN weight", "non-finite");
    // a safetensors file that is not an lssar model
    const char *g = tpath("good3.safetensors");
    write_good(g);
    expect_model_bad(g, "foreign file", "lssar_format");
    // truncated model file
    CHECK_OK(ckpt_save_model(a, p, 1));
    char *data; size_t len;
    CHECK_OK(lssar_read_file(p, &data, &len));
    FILE *f = fopen(p, "wb"); fwrite(data, 1, len - 100, f); fclose(f);
    free(data);
    expect_model_bad(p, "truncated model", "truncated");
    gpt_free(a); gpt_free(b);
}

static void test_trainer_roundtrip(void) {
    gpt *m = tiny_model(16, LSSAR_ATTN_LSSAR, 3);
    if (!m) return;
    CHECK(gpt_reserve(m, 2, 8, 1) == 0, "reserve: %s", lssar_errmsg());
    uint16_t in[2 * 8 * 2], tg[2 * 8 * 2];
    for (int i = 0; i < 32; i++) { in[i] = (uint16_t)(i % 11); tg[i] = (uint16_t)((i * 7) % 11); }
    float loss;
    CHECK_OK(gpt_zero_grad(m));
    CHECK(gpt_forward(m, in, tg, 2, 8, &loss) == 0 && gpt_backward(m, 1.0f) == 0, "train step: %s", lssar_errmsg());
    CHECK_OK(gpt_adamw_step(m, 1, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f));
    train_state s;
    memset(&s, 0, sizeof s);
    s.lr = 1e-3f; s.min_lr_frac = 0.1f; s.warmup = 3; s.steps = 17; s.batch = 2; s.seq = 8; s.accum = 2; s.align = 1000; s.passkey_mix = 0.25f;
    s.seed = 18446744073709551615ULL; s.wd = 0.1f; s.clip = 1.0f; s.beta1 = 0.9f; s.beta2 = 0.95f; s.eps = 1e-8f;
    snprintf(s.data, sizeof s.data, "a.bin,b.bin");
    s.step = 1;
    lssar_rng_seed(&s.rng, 99);
    lssar_rng_u64(&s.rng);
    CHECK(ckpt_save(tmpdir, m, &s) == 0, "ckpt_save: %s", lssar_errmsg());
    CHECK(count_tmp_files() == 0, "temporary files left behind");
    gpt *l = NULL;
    char mp[256], tp[256];
    snprintf(mp, sizeof mp, "%s/%s", tmpdir, CKPT_MODEL_FILE);
    snprintf(tp, sizeof tp, "%s/%s", tmpdir, CKPT_TRAINER_FILE);
    CHECK(ckpt_load_model(mp, NULL, &l, NULL) == 0, "load model: %s", lssar_errmsg());
    if (!l) { gpt_free(m); return; }
    CHECK(gpt_reserve(l, 2, 8, 1) == 0, "reserve");
    train_state r;
    int rc = ckpt_load_trainer(l, tp, &r);
    CHECK(rc == 0, "load trainer: %s", lssar_errmsg());
    CHECK(r.lr == s.lr && r.min_lr_frac == s.min_lr_frac && r.warmup == 3 && r.steps == 17 && r.batch == 2 && r.seq == 8 &&
          r.accum == 2 && r.align == 1000 && r.passkey_mix == 0.25f && r.seed == s.seed && r.wd == s.wd && r.clip == s.clip && r.beta1 == s.beta1 && r.beta2 == s.beta2 &&
          r.eps == s.eps && r.step == 1 && !strcmp(r.data, "a.bin,b.bin") && !memcmp(&r.rng, &s.rng, sizeof r.rng),
          "train state differs after the round trip");
    CHECK(same_buffers(m, l, GPT_BUF_ADAM_M) && same_buffers(m, l, GPT_BUF_ADAM_V), "AdamW state differs after the round trip");
    // the trainer file of another model is refused
    gpt *o = tiny_model(8, LSSAR_ATTN_LSSAR, 3);
    CHECK_OK(gpt_reserve(o, 2, 8, 1));
    rc = ckpt_load_trainer(o, tp, &r);
    CHECK(rc == LSSAR_E_FORMAT, "trainer state of another shape accepted (rc %d)", rc);
    gpt_free(o);
    gpt_free(l);
    gpt_free(m);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/lssar_ckpt_XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }
    RUN(test_roundtrip);
    RUN(test_damaged);
    RUN(test_atomic);
    RUN(test_model_roundtrip);
    RUN(test_model_damaged);
    RUN(test_trainer_roundtrip);
    RUN(test_len_norm_roundtrip);
    RUN(test_rope_temp_roundtrip);
    RUN(test_stages_roundtrip);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd)) {}
    return test_summary("test_checkpoint");
}
