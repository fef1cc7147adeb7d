// safetensors.c - validated reader (mmap) and streaming atomic writer; see safetensors.h.
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cJSON.h>
#include "model/safetensors.h"

static const struct { const char *name; size_t size; } DTYPES[] = {
    {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2},
    {"I8", 1},  {"U64", 8}, {"U32", 4}, {"U16", 2},  {"U8", 1},  {"BOOL", 1},
};

size_t st_dtype_size(const char *dtype) {
    for (size_t i = 0; i < sizeof DTYPES / sizeof DTYPES[0]; i++)
        if (!strcmp(dtype, DTYPES[i].name)) return DTYPES[i].size;
    return 0;
}

// ------------------------------------------------------------------------------------ reader

// A JSON number that is a non-negative integer below 2^53 (exact in a double).
static int json_index(const cJSON *x, uint64_t *out) {
    if (!cJSON_IsNumber(x)) return 0;
    double d = x->valuedouble;
    if (!(d >= 0) || d > 9007199254740992.0 || floor(d) != d) return 0;
    *out = (uint64_t)d;
    return 1;
}

static int cmp_begin(const void *a, const void *b) {
    const st_tensor *x = *(const st_tensor *const *)a, *y = *(const st_tensor *const *)b;
    return x->begin < y->begin   ? -1
           : x->begin > y->begin ? 1
                                 : (x->nbytes > y->nbytes) - (x->nbytes < y->nbytes);
}

// Parse the header JSON; only padding may follow the object (cJSON stops at the end of the first
// value). The root object in *out, or LSSAR_E_FORMAT (message set).
static int parse_json_object(const st_file *f, const char *json, size_t len, cJSON **out) {
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    for (const char *c = end; root && c && c < json + len; c++)
        if (*c != ' ' && *c != '\t' && *c != '\n' && *c != '\r' && *c != 0) {
            cJSON_Delete(root);
            return lssar_fail(LSSAR_E_FORMAT,
                              "%s: unexpected bytes after the safetensors header's JSON object: damaged file",
                              f->path);
        }
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return lssar_fail(LSSAR_E_FORMAT,
                          "%s: the safetensors header is not a JSON object: damaged or not a safetensors "
                          "file",
                          f->path);
    }
    *out = root;
    return 0;
}

// The "__metadata__" entry into f->meta_keys / f->meta_vals: string values only, at most once.
static int read_metadata(st_file *f, const cJSON *e) {
    const char *path = f->path;
    if (!cJSON_IsObject(e)) return lssar_fail(LSSAR_E_FORMAT, "%s: __metadata__ is not a JSON object", path);
    if (f->meta_keys)
        return lssar_fail(LSSAR_E_FORMAT, "%s: __metadata__ appears twice in the header: damaged file", path);
    int nm = cJSON_GetArraySize(e);
    f->meta_keys = calloc(nm + 1, sizeof(char *));
    f->meta_vals = calloc(nm + 1, sizeof(char *));
    if (!f->meta_keys || !f->meta_vals) return lssar_fail(LSSAR_E_NOMEM, "out of memory reading %s", path);
    for (const cJSON *m = e->child; m; m = m->next) {
        if (!cJSON_IsString(m))
            return lssar_fail(LSSAR_E_FORMAT,
                              "%s: __metadata__ value '%s' is not a string (the format allows strings only)",
                              path, m->string);
        f->meta_keys[f->n_meta] = strdup(m->string);
        f->meta_vals[f->n_meta] = strdup(m->valuestring);
        f->n_meta++;
    }
    return 0;
}

// t->shape [ndim] and t->numel from the "shape" array; the element count stays far from overflow
// (times any dtype size).
static int read_shape(const st_file *f, st_tensor *t, const cJSON *sh) {
    t->ndim = cJSON_GetArraySize(sh);
    if (t->ndim > ST_MAX_DIMS)
        return lssar_fail(LSSAR_E_FORMAT, "%s: tensor '%s' has %d dimensions (at most %d supported)", f->path,
                          t->name, t->ndim, ST_MAX_DIMS);
    size_t numel = 1;
    int d = 0;
    for (const cJSON *x = sh->child; x; x = x->next, d++) {
        uint64_t v;
        if (!json_index(x, &v))
            return lssar_fail(LSSAR_E_FORMAT,
                              "%s: tensor '%s' has a shape entry that is not a non-negative integer", f->path,
                              t->name);
        t->shape[d] = (int64_t)v;
        if (v && numel > (SIZE_MAX / 16) / v)
            return lssar_fail(LSSAR_E_FORMAT, "%s: tensor '%s' shape is absurdly large", f->path, t->name);
        numel *= v;
    }
    t->numel = numel;
    return 0;
}

// t->begin / t->nbytes / t->data from "data_offsets": [begin, end] inside the buffer, and as many
// bytes as dtype x shape needs.
static int read_offsets(const st_file *f, st_tensor *t, const cJSON *off, size_t esize) {
    uint64_t b, en;
    if (cJSON_GetArraySize(off) != 2 || !json_index(off->child, &b) || !json_index(off->child->next, &en) ||
        en < b)
        return lssar_fail(LSSAR_E_FORMAT,
                          "%s: tensor '%s' data_offsets must be [begin, end] with 0 <= begin <= end", f->path,
                          t->name);
    if (en > f->buf_len)
        return lssar_fail(LSSAR_E_FORMAT,
                          "%s: tensor '%s' ends at byte %llu of the data but the file holds only %zu bytes "
                          "of data: truncated or damaged",
                          f->path, t->name, (unsigned long long)en, f->buf_len);
    if (en - b != t->numel * esize)
        return lssar_fail(LSSAR_E_FORMAT,
                          "%s: tensor '%s' has %llu bytes but dtype %s x shape needs %zu: damaged header",
                          f->path, t->name, (unsigned long long)(en - b), t->dtype, t->numel * esize);
    t->begin = b; t->nbytes = en - b;
    t->data = f->buf + b;
    return 0;
}

// One tensor entry NAME: {"dtype", "shape", "data_offsets"} into f->tensors[f->n]. The tensor is
// counted as soon as its name is copied, so st_close frees it whatever fails after.
static int read_tensor(st_file *f, const cJSON *e) {
    const char *name = e->string;
    if (st_find(f, name))
        return lssar_fail(LSSAR_E_FORMAT, "%s: tensor '%s' appears twice in the header", f->path, name);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsObject(e) || !cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(off))
        return lssar_fail(LSSAR_E_FORMAT,
                          "%s: tensor '%s' needs \"dtype\" (string), \"shape\" and \"data_offsets\" (arrays)",
                          f->path, name);
    size_t esize = st_dtype_size(dt->valuestring);
    if (!esize)
        return lssar_fail(LSSAR_E_FORMAT, "%s: tensor '%s' has unknown dtype '%s'", f->path, name,
                          dt->valuestring);
    st_tensor *t = &f->tensors[f->n];
    t->name = strdup(name);
    if (!t->name) return lssar_fail(LSSAR_E_NOMEM, "out of memory reading %s", f->path);
    f->n++;
    snprintf(t->dtype, sizeof t->dtype, "%s", dt->valuestring);
    int rc = read_shape(f, t, sh);
    return rc ? rc : read_offsets(f, t, off, esize);
}

// The buffer must be exactly covered: no overlaps, no holes, nothing after the last tensor.
static int check_coverage(const st_file *f) {
    st_tensor **order = malloc((f->n + 1) * sizeof *order);
    if (!order) return lssar_fail(LSSAR_E_NOMEM, "out of memory reading %s", f->path);
    for (int i = 0; i < f->n; i++) order[i] = &f->tensors[i];
    qsort(order, f->n, sizeof *order, cmp_begin);
    int rc = 0;
    size_t pos = 0;
    for (int i = 0; i < f->n && !rc; i++) {
        if (order[i]->begin != pos)
            rc = lssar_fail(LSSAR_E_FORMAT,
                            "%s: tensor '%s' starts at byte %zu but the previous data ends at %zu (%s): "
                            "damaged header",
                            f->path, order[i]->name, order[i]->begin, pos,
                            order[i]->begin < pos ? "overlap" : "hole");
        pos = order[i]->begin + order[i]->nbytes;
    }
    free(order);
    if (!rc && pos != f->buf_len)
        rc = lssar_fail(LSSAR_E_FORMAT,
                        "%s: the tensors cover %zu bytes of data but the file has %zu: damaged or appended "
                        "to",
                        f->path, pos, f->buf_len);
    return rc;
}

// Parse the header JSON into f->tensors / f->meta_*; 0 or LSSAR_E_FORMAT (message set).
static int parse_header(st_file *f, const char *json, size_t len) {
    cJSON *root = NULL;
    int rc = parse_json_object(f, json, len, &root);
    if (rc) return rc;
    int count = cJSON_GetArraySize(root);
    f->tensors = calloc(count > 0 ? count : 1, sizeof *f->tensors);
    if (!f->tensors) {
        cJSON_Delete(root);
        return lssar_fail(LSSAR_E_NOMEM, "out of memory reading %s", f->path);
    }
    for (const cJSON *e = root->child; e && !rc; e = e->next) {
        if (!e->string) rc = lssar_fail(LSSAR_E_FORMAT, "%s: header entry without a name", f->path);
        else if (!strcmp(e->string, "__metadata__")) rc = read_metadata(f, e);
        else rc = read_tensor(f, e);
    }
    cJSON_Delete(root);
    return rc ? rc : check_coverage(f);
}

int st_open(st_file *f, const char *path) {
    memset(f, 0, sizeof *f);
    if (!path) return lssar_fail(LSSAR_E_NULL, "safetensors path is NULL");
    int fd = open(path, O_RDONLY);
    if (fd < 0) return lssar_fail(LSSAR_E_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return lssar_fail(LSSAR_E_IO, "cannot stat %s: %s", path, strerror(errno));
    }
    if (!S_ISREG(st.st_mode)) { close(fd); return lssar_fail(LSSAR_E_IO, "%s is not a regular file", path); }
    size_t len = (size_t)st.st_size;
    if (len < 8) {
        close(fd);
        return lssar_fail(LSSAR_E_FORMAT, "%s is %zu bytes: too short for a safetensors file (truncated?)",
                          path, len);
    }
    void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return lssar_fail(LSSAR_E_IO, "cannot map %s: %s", path, strerror(errno));
    f->path = strdup(path);
    f->map = map; f->map_len = len;
    const uint8_t *p = map;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | p[i];   // little-endian whatever the host
    int rc = 0;
    if (hlen < 2 || hlen > ST_MAX_HEADER || hlen > len - 8)
        rc = lssar_fail(LSSAR_E_FORMAT,
                        "%s: header length %llu does not fit the %zu-byte file: truncated, damaged or not a "
                        "safetensors file",
                        path, (unsigned long long)hlen, len);
    else if (p[8] != '{')
        rc = lssar_fail(LSSAR_E_FORMAT,
                        "%s: the header does not start with '{': damaged or not a safetensors file", path);
    if (!rc) {
        f->buf = p + 8 + hlen;
        f->buf_len = len - 8 - hlen;
        rc = parse_header(f, (const char *)p + 8, hlen);
    }
    if (rc) st_close(f);
    return rc;
}

void st_close(st_file *f) {
    if (f->map) munmap(f->map, f->map_len);
    for (int i = 0; i < f->n; i++) free(f->tensors[i].name);
    free(f->tensors);
    for (int i = 0; i < f->n_meta; i++) { free(f->meta_keys[i]); free(f->meta_vals[i]); }
    free(f->meta_keys); free(f->meta_vals);
    free(f->path);
    memset(f, 0, sizeof *f);
}

const st_tensor *st_find(const st_file *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->tensors[i].name, name)) return &f->tensors[i];
    return NULL;
}

const char *st_meta(const st_file *f, const char *key) {
    for (int i = 0; i < f->n_meta; i++)
        if (!strcmp(f->meta_keys[i], key)) return f->meta_vals[i];
    return NULL;
}

int st_read(const st_file *f, const char *name, const char *dtype, void *dst, size_t numel) {
    const st_tensor *t = st_find(f, name);
    if (!t) return lssar_fail(LSSAR_E_FORMAT, "%s: tensor '%s' is missing", f->path, name);
    if (strcmp(t->dtype, dtype))
        return lssar_fail(LSSAR_E_FORMAT, "%s: tensor '%s' has dtype %s, expected %s", f->path, name,
                          t->dtype, dtype);
    if (t->numel != numel)
        return lssar_fail(LSSAR_E_FORMAT, "%s: tensor '%s' has %zu elements, expected %zu", f->path, name,
                          t->numel, numel);
    memcpy(dst, t->data, t->nbytes);
    return 0;
}

// ------------------------------------------------------------------------------------ writer

void st_writer_init(st_writer *w) { memset(w, 0, sizeof *w); }

static void writer_free(st_writer *w) {
    for (int i = 0; i < w->n; i++) free(w->decls[i].name);
    free(w->decls);
    for (int i = 0; i < w->n_meta; i++) { free(w->meta_keys[i]); free(w->meta_vals[i]); }
    free(w->meta_keys); free(w->meta_vals);
    memset(w, 0, sizeof *w);
}

int st_writer_meta(st_writer *w, const char *key, const char *value) {
    char **k = realloc(w->meta_keys, (w->n_meta + 1) * sizeof *k);
    if (!k) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    w->meta_keys = k;
    char **v = realloc(w->meta_vals, (w->n_meta + 1) * sizeof *v);
    if (!v) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    w->meta_vals = v;
    k[w->n_meta] = strdup(key);
    v[w->n_meta] = strdup(value);
    w->n_meta++;
    return 0;
}

int st_writer_add(st_writer *w, const char *name, const char *dtype, int ndim, const int64_t *shape) {
    size_t es = st_dtype_size(dtype);
    if (!es) return lssar_fail(LSSAR_E_ARG, "safetensors: unknown dtype '%s'", dtype);
    if (ndim < 0 || ndim > ST_MAX_DIMS)
        return lssar_fail(LSSAR_E_ARG, "safetensors: tensor '%s' has %d dimensions", name, ndim);
    if (!strcmp(name, "__metadata__"))
        return lssar_fail(LSSAR_E_ARG, "safetensors: '__metadata__' is reserved");
    if (w->n == w->cap) {
        int cap = w->cap ? 2 * w->cap : 64;
        st_decl *d = realloc(w->decls, cap * sizeof *d);
        if (!d) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
        w->decls = d; w->cap = cap;
    }
    st_decl *d = &w->decls[w->n];
    memset(d, 0, sizeof *d);
    d->name = strdup(name);
    snprintf(d->dtype, sizeof d->dtype, "%s", dtype);
    d->ndim = ndim;
    size_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return lssar_fail(LSSAR_E_ARG, "safetensors: tensor '%s' has a negative dimension", name);
        d->shape[i] = shape[i];
        numel *= (size_t)shape[i];
    }
    d->nbytes = numel * es;
    w->n++;
    return 0;
}

int st_writer_begin(st_writer *w, const char *path) {
    cJSON *root = cJSON_CreateObject();
    if (!root) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    if (w->n_meta) {
        cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
        for (int i = 0; i < w->n_meta; i++) cJSON_AddStringToObject(m, w->meta_keys[i], w->meta_vals[i]);
    }
    size_t off = 0;
    for (int i = 0; i < w->n; i++) {
        st_decl *d = &w->decls[i];
        cJSON *t = cJSON_AddObjectToObject(root, d->name);
        cJSON_AddStringToObject(t, "dtype", d->dtype);
        cJSON *sh = cJSON_AddArrayToObject(t, "shape");
        for (int k = 0; k < d->ndim; k++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)d->shape[k]));
        cJSON *o = cJSON_AddArrayToObject(t, "data_offsets");
        cJSON_AddItemToArray(o, cJSON_CreateNumber((double)off));
        cJSON_AddItemToArray(o, cJSON_CreateNumber((double)(off + d->nbytes)));
        off += d->nbytes;
    }
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!json) return lssar_fail(LSSAR_E_NOMEM, "out of memory building the safetensors header");
    // Pad with spaces so the data starts 8-byte aligned (tensors of any dtype stay aligned as
    // long as their sizes are; F32 and I64 tensors here always are multiples of their size).
    size_t n = strlen(json), padded = (n + 7) / 8 * 8;
    int rc = lssar_afile_open(&w->af, path);
    if (rc) { free(json); return rc; }
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    int ok = fwrite(len8, 8, 1, w->af.f) == 1 && fwrite(json, 1, n, w->af.f) == n;
    for (size_t i = n; ok && i < padded; i++) ok = fputc(' ', w->af.f) != EOF;
    free(json);
    if (!ok) {
        int e = errno;
        lssar_afile_abort(&w->af);
        return lssar_fail(LSSAR_E_IO, "writing %s failed: %s (%s)", path, strerror(e), lssar_io_hint(e));
    }
    w->open = 1; w->next = 0; w->written_in_next = 0;
    return 0;
}

int st_writer_write(st_writer *w, const void *data, size_t bytes) {
    if (!w->open) return lssar_fail(LSSAR_E_ARG, "safetensors: write before begin");
    // Track which declaration the bytes belong to, so commit can tell if something is missing.
    size_t left = bytes;
    while (left) {
        if (w->next >= w->n) return lssar_fail(LSSAR_E_ARG, "safetensors: more data written than declared");
        size_t room = w->decls[w->next].nbytes - w->written_in_next;
        size_t take = left < room ? left : room;
        w->written_in_next += take; left -= take;
        if (w->written_in_next == w->decls[w->next].nbytes) { w->next++; w->written_in_next = 0; }
    }
    if (bytes && fwrite(data, 1, bytes, w->af.f) != bytes)
        return lssar_fail(LSSAR_E_IO, "writing %s failed: %s (%s)", w->af.path, strerror(errno),
                          lssar_io_hint(errno));
    return 0;
}

int st_writer_commit(st_writer *w) {
    if (!w->open) { writer_free(w); return lssar_fail(LSSAR_E_ARG, "safetensors: commit before begin"); }
    while (w->next < w->n && w->decls[w->next].nbytes == 0) w->next++;   // empty tensors
    if (w->next != w->n) {
        lssar_afile_abort(&w->af);
        int rc = lssar_fail(LSSAR_E_ARG, "safetensors: tensor '%s' was declared but its data was not written",
                            w->decls[w->next].name);
        writer_free(w);
        return rc;
    }
    int rc = lssar_afile_commit(&w->af);
    writer_free(w);
    return rc;
}

void st_writer_abort(st_writer *w) {
    if (w->open) lssar_afile_abort(&w->af);
    writer_free(w);
}
