// tokenize_run.c - text <-> token ids for `lssar tokenize`; see tokenize_run.h.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cJSON.h>
#include "lssar.h"
#include "core/util.h"
#include "data/shard.h"
#include "text/tokenize_run.h"

// Read all of a FILE (stdin) into a malloc'd buffer.
static int read_stream(FILE *f, char **data, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf) return lssar_fail(LSSAR_E_NOMEM, "out of memory reading the input");
    size_t r;
    while ((r = fread(buf + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            char *nb = realloc(buf, 2 * cap + 1);
            if (!nb) { free(buf); return lssar_fail(LSSAR_E_NOMEM, "out of memory reading the input"); }
            buf = nb; cap *= 2;
        }
    }
    if (ferror(f)) { free(buf); return lssar_fail(LSSAR_E_IO, "error reading standard input"); }
    buf[n] = 0;
    *data = buf; *len = n;
    return 0;
}

static int read_input(const char *path, char **data, size_t *len) {
    if (!path || !strcmp(path, "-")) return read_stream(stdin, data, len);
    return lssar_read_file(path, data, len);
}

// Parse ids separated by whitespace, commas or brackets ("1 2 3", "[1, 2, 3]").
static int parse_ids(const char *s, size_t len, int32_t **ids, size_t *n) {
    size_t cap = 1024, k = 0;
    int32_t *out = malloc(sizeof(int32_t) * cap);
    if (!out) return lssar_fail(LSSAR_E_NOMEM, "out of memory parsing ids");
    const char *p = s, *end = s + len;
    while (p < end) {
        if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == ',' || *p == '[' || *p == ']') {
            p++;
            continue;
        }
        char *e;
        errno = 0;
        long v = strtol(p, &e, 10);
        if (e == p || errno || v < 0 || v > INT32_MAX || (e < end && !strchr(" \t\n\r,[]", *e))) {
            const char *q = p;
            while (q < end && !strchr(" \t\n\r,[]", *q)) q++;
            free(out);
            return lssar_fail(LSSAR_E_ARG,
                              "'%.*s' (id number %zu) is not a token id: --decode expects non-negative "
                              "integers separated by spaces or commas",
                              (int)(q - p > 40 ? 40 : q - p), p, k + 1);
        }
        if (k == cap) {
            int32_t *nb = realloc(out, sizeof(int32_t) * (cap *= 2));
            if (!nb) { free(out); return lssar_fail(LSSAR_E_NOMEM, "out of memory parsing ids"); }
            out = nb;
        }
        out[k++] = (int32_t)v;
        p = e;
    }
    *ids = out; *n = k;
    return 0;
}

// --decode --in FILE.bin: the ids of a 1-channel token shard.
static int shard_ids(const char *path, int32_t **ids, size_t *n) {
    shard s;
    int rc = shard_open(&s, path);
    if (rc) return rc;
    if (s.channels != 1) {
        shard_close(&s);
        return lssar_fail(LSSAR_E_ARG,
                          "%s has %d channels per position; --decode reads 1-channel token shards", path,
                          s.channels);
    }
    int32_t *out = malloc(sizeof(int32_t) * (s.n ? s.n : 1));
    if (!out) { shard_close(&s); return lssar_fail(LSSAR_E_NOMEM, "out of memory reading %s", path); }
    for (size_t i = 0; i < s.n; i++) out[i] = s.tokens[i];
    *ids = out; *n = s.n;
    shard_close(&s);
    return 0;
}

static int is_shard(const char *path) {
    FILE *f = path ? fopen(path, "rb") : NULL;
    if (!f) return 0;
    int32_t magic = 0;
    int ok = fread(&magic, sizeof magic, 1, f) == 1 && magic == SHARD_MAGIC;
    fclose(f);
    return ok;
}

static int write_bytes(const char *path, const char *data, size_t len) {
    if (!path) {
        if (len && fwrite(data, 1, len, stdout) != len)
            return lssar_fail(LSSAR_E_IO, "writing to standard output failed");
        return fflush(stdout) ? lssar_fail(LSSAR_E_IO, "writing to standard output failed") : 0;
    }
    lssar_afile af;
    int rc = lssar_afile_open(&af, path);
    if (rc) return rc;
    if (len && fwrite(data, 1, len, af.f) != len) {
        lssar_afile_abort(&af);
        return lssar_fail(LSSAR_E_IO, "writing %s failed (disk full?)", path);
    }
    return lssar_afile_commit(&af);
}

static int print_ids(const int32_t *ids, size_t n) {
    char buf[16];
    for (size_t i = 0; i < n; i++) {
        int k = snprintf(buf, sizeof buf, i ? " %d" : "%d", (int)ids[i]);
        fwrite(buf, 1, (size_t)k, stdout);
    }
    fputc('\n', stdout);
    return fflush(stdout) || ferror(stdout) ? lssar_fail(LSSAR_E_IO, "writing to standard output failed") : 0;
}

// --jsonl: every line of data is a JSON string, or an object with a "text" string (the usual
// JSON Lines corpus), encoded on its own; one line of ids per line.
static int encode_jsonl(const lssar_tokenizer *t, char *data, size_t len, int allow_special) {
    char *p = data, *end = data + len;
    int line = 0, rc = 0;
    while (!rc && p < end) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *eol = nl ? nl : end;
        line++;
        cJSON *j = cJSON_ParseWithLength(p, (size_t)(eol - p));
        const cJSON *s = cJSON_IsObject(j) ? cJSON_GetObjectItemCaseSensitive(j, "text") : j;
        if (!cJSON_IsString(s)) {
            cJSON_Delete(j);
            return lssar_fail(LSSAR_E_FORMAT,
                              "--jsonl: line %d is neither a JSON string (\"...\") nor an object with a "
                              "\"text\" string ({\"text\": \"...\"}): %.*s",
                              line, (int)(eol - p > 40 ? 40 : eol - p), p);
        }
        // cJSON strings stop at a NUL: a document with \u0000 would be cut short, so refuse it.
        const char *doc = cJSON_GetStringValue(s);
        if (memmem(p, (size_t)(eol - p), "\\u0000", 6))
            rc = lssar_fail(LSSAR_E_FORMAT,
                            "--jsonl: line %d contains \\u0000, which this reader cannot keep", line);
        int32_t *ids = NULL; size_t n = 0;
        if (!rc) rc = lssar_encode(t, doc, strlen(doc), allow_special, &ids, &n);
        if (!rc) rc = print_ids(ids, n);
        free(ids);
        cJSON_Delete(j);
        p = eol + 1;
    }
    return rc;
}

static int write_shard(const char *path, const int32_t *ids, size_t n, int vocab) {
    uint16_t *tok = malloc(sizeof(uint16_t) * (n ? n : 1));
    if (!tok) return lssar_fail(LSSAR_E_NOMEM, "out of memory writing %s", path);
    for (size_t i = 0; i < n; i++) tok[i] = (uint16_t)ids[i];  // ids < vocab <= 65536
    shard_writer w;
    int rc = shard_writer_open(&w, path, 1, vocab);
    if (!rc) {
        rc = shard_writer_append(&w, tok, n);
        if (rc) shard_writer_abort(&w);
        else rc = shard_writer_close(&w);
    }
    free(tok);
    return rc;
}

// ids (text, or a token shard given as --in FILE.bin) -> bytes. *in_stage is cleared once the
// input has been read (an error after it names the output file).
static int tokenize_decode(const tokenize_opts *o, const lssar_tokenizer *t, int *in_stage) {
    char *data = NULL, *text = NULL;
    int32_t *ids = NULL;
    size_t len = 0, n = 0;
    int rc;
    if (o->in && is_shard(o->in)) rc = shard_ids(o->in, &ids, &n);
    else {
        rc = read_input(o->in, &data, &len);
        if (!rc) rc = parse_ids(data, len, &ids, &n);
    }
    if (!rc) rc = lssar_decode(t, ids, n, &text, &len);
    if (!rc) { *in_stage = 0; rc = write_bytes(o->out, text, len); }
    free(data); free(text); free(ids);
    return rc;
}

// text -> ids, printed or written as a shard (with a line on stderr saying what was written).
static int tokenize_encode(const tokenize_opts *o, const lssar_tokenizer *t, int *in_stage) {
    char *data = NULL;
    int32_t *ids = NULL;
    size_t len = 0, n = 0;
    double t0 = lssar_now();
    int rc = read_input(o->in, &data, &len);
    if (!rc) rc = lssar_encode(t, data, len, o->allow_special, &ids, &n);
    if (!rc && o->out && n == 0)
        rc = lssar_fail(LSSAR_E_ARG, "the input%s%s is empty: nothing to write to %s", o->in ? " " : "",
                        o->in ? o->in : "", o->out);
    if (!rc && o->out) {
        *in_stage = 0;
        rc = write_shard(o->out, ids, n, lssar_tokenizer_vocab_size(t));
        if (!rc)
            fprintf(stderr, "lssar tokenize: %zu bytes -> %zu %s tokens in %.2f s -> %s\n", len, n,
                    o->tokenizer, lssar_now() - t0, o->out);
    } else if (!rc) rc = print_ids(ids, n);
    free(data); free(ids);
    return rc;
}

int tokenize_run(const tokenize_opts *o) {
    lssar_tokenizer *t = NULL;
    int rc = lssar_tokenizer_open(o->tokenizer, &t);
    int in_stage = !rc;   // errors from here on are about the input (or name the output file)
    if (!rc && o->decode) rc = tokenize_decode(o, t, &in_stage);
    else if (!rc && o->jsonl) {
        char *data = NULL;
        size_t len = 0;
        rc = read_input(o->in, &data, &len);
        if (!rc) rc = encode_jsonl(t, data, len, o->allow_special);
        free(data);
    } else if (!rc) rc = tokenize_encode(o, t, &in_stage);
    lssar_tokenizer_free(t);
    // name the input the message is about
    const char *in = o->in ? o->in : "standard input";
    if (rc && in_stage && !strstr(lssar_errmsg(), in))
        lssar_fail(rc, "%s%s: %s", o->in ? "--in " : "", in, lssar_errmsg());
    return rc;
}
