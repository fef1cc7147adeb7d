// checkpoint.c - model.safetensors and trainer.safetensors of a run directory; see checkpoint.h.
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "checkpoint.h"

// ---------------------------------------------------------------------------- metadata fields

static int meta_int(const st_file *f, const char *key, long lo, long hi, long *out) {
    const char *v = st_meta(f, key);
    if (!v) return lssar_fail(LSSAR_E_FORMAT, "%s: metadata field '%s' is missing: not an lssar checkpoint, or damaged", f->path, key);
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (!*v || *end || errno || x < lo || x > hi)
        return lssar_fail(LSSAR_E_FORMAT, "%s: metadata field '%s' = '%s' is not an integer in %ld..%ld", f->path, key, v, lo, hi);
    *out = x;
    return 0;
}

static int meta_float(const st_file *f, const char *key, float *out) {
    const char *v = st_meta(f, key);
    if (!v) return lssar_fail(LSSAR_E_FORMAT, "%s: metadata field '%s' is missing: not an lssar checkpoint, or damaged", f->path, key);
    char *end;
    errno = 0;
    float x = strtof(v, &end);
    if (!*v || *end || errno || !isfinite(x))
        return lssar_fail(LSSAR_E_FORMAT, "%s: metadata field '%s' = '%s' is not a finite number", f->path, key, v);
    *out = x;
    return 0;
}

static int meta_u64(const st_file *f, const char *key, uint64_t *out) {
    const char *v = st_meta(f, key);
    if (!v) return lssar_fail(LSSAR_E_FORMAT, "%s: metadata field '%s' is missing", f->path, key);
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (!*v || *v == '-' || *end || errno)
        return lssar_fail(LSSAR_E_FORMAT, "%s: metadata field '%s' = '%s' is not a non-negative integer", f->path, key, v);
    *out = x;
    return 0;
}

static int put_int(st_writer *w, const char *key, long x) {
    char b[32]; snprintf(b, sizeof b, "%ld", x);
    return st_writer_meta(w, key, b);
}
static int put_float(st_writer *w, const char *key, float x) {
    // The shortest decimal that reads back as exactly x (9 digits always do for float32), so
    // 3e-3 is stored as "0.003", not "0.00300000003".
    char b[48];
    for (int digits = 6; digits <= 9; digits++) {
        snprintf(b, sizeof b, "%.*g", digits, x);
        if (strtof(b, NULL) == x) break;
    }
    return st_writer_meta(w, key, b);
}

// Read integer metadata `key` into `field` or return the error.
#define GET_INT(key, lo, hi, field)                                   \
    do {                                                              \
        if ((rc = meta_int(f, key, lo, hi, &v))) return rc;           \
        field = (int)v;                                               \
    } while (0)

// ----------------------------------------------------------------------------------- model

int ckpt_config_from_meta(const st_file *f, gpt_config *cfg, int64_t *step) {
    memset(cfg, 0, sizeof *cfg);
    const char *fmt = st_meta(f, "lssar_format");
    if (!fmt || strcmp(fmt, "gpt-v1"))
        return lssar_fail(LSSAR_E_FORMAT, "%s: metadata lssar_format is %s%s%s, expected \"gpt-v1\": not an lssar model file",
                          f->path, fmt ? "\"" : "missing", fmt ? fmt : "", fmt ? "\"" : "");
    long v;
    int rc;
    GET_INT("layers", 1, 1 << 16, cfg->layers);
    GET_INT("heads", 1, 1 << 16, cfg->heads);
    GET_INT("dim", 1, 1 << 20, cfg->dim);
    GET_INT("vocab", 1, 65536, cfg->vocab);
    GET_INT("channels", 1, 64, cfg->channels);
    GET_INT("max_seq", 1, 1 << 30, cfg->max_seq);
    GET_INT("tied", 0, 1, cfg->tied);
    if ((rc = meta_float(f, "p", &cfg->p))) return rc;
    const char *pos = st_meta(f, "pos"), *attn = st_meta(f, "attn");
    int pi = pos ? gpt_pos_parse(pos) : -1, ai = attn ? lssar_attn_parse(attn) : -1;
    if (pi < 0) return lssar_fail(LSSAR_E_FORMAT, "%s: metadata field 'pos' is %s (expected rope, learned or none)", f->path, pos ? pos : "missing");
    if (ai < 0) return lssar_fail(LSSAR_E_FORMAT, "%s: metadata field 'attn' is %s (expected softmax, ssmax, lssa or lssar)", f->path, attn ? attn : "missing");
    cfg->pos = (gpt_pos)pi;
    cfg->attn = (lssar_attn_kind)ai;
    if (step) {
        if ((rc = meta_int(f, "step", 0, INT32_MAX, &v))) return rc;
        *step = v;
    }
    if (gpt_config_check(cfg))
        return lssar_fail(LSSAR_E_FORMAT, "%s: the stored model config is invalid: %s", f->path, lssar_errmsg());
    return 0;
}

static size_t max_numel(const gpt *m) {
    size_t mx = 1;
    for (int i = 0; i < gpt_num_tensors(m); i++) if (gpt_tensor_numel(m, i) > mx) mx = gpt_tensor_numel(m, i);
    return mx;
}

static void declare(st_writer *w, const gpt *m, int i, const char *prefix) {
    char name[256];
    snprintf(name, sizeof name, "%s%s", prefix, gpt_tensor_name(m, i));
    int64_t shape[ST_MAX_DIMS];
    int nd = gpt_tensor_ndim(m, i);
    for (int k = 0; k < nd; k++) shape[k] = gpt_tensor_shape(m, i)[k];
    st_writer_add(w, name, "F32", nd, shape);
}

// Stream buffer `which` of every tensor through one scratch buffer.
static int write_buffer(st_writer *w, const gpt *m, gpt_buffer which, float *scratch) {
    for (int i = 0; i < gpt_num_tensors(m); i++) {
        size_t n = gpt_tensor_numel(m, i);
        int rc = gpt_read_tensor(m, which, i, scratch);
        if (!rc) rc = st_writer_write(w, scratch, n * sizeof(float));
        if (rc) return rc;
    }
    return 0;
}

int ckpt_save_model(const gpt *m, const char *path, int64_t step) {
    const gpt_config *c = gpt_get_config(m);
    st_writer w;
    st_writer_init(&w);
    st_writer_meta(&w, "lssar_format", "gpt-v1");
    put_int(&w, "layers", c->layers);
    put_int(&w, "heads", c->heads);
    put_int(&w, "dim", c->dim);
    put_int(&w, "vocab", c->vocab);
    put_int(&w, "channels", c->channels);
    put_int(&w, "max_seq", c->max_seq);
    st_writer_meta(&w, "pos", gpt_pos_name(c->pos));
    st_writer_meta(&w, "attn", lssar_attn_name(c->attn));
    put_float(&w, "p", c->p);
    put_int(&w, "tied", c->tied);
    put_int(&w, "step", (long)step);
    for (int i = 0; i < gpt_num_tensors(m); i++) declare(&w, m, i, "");
    float *scratch = malloc(max_numel(m) * sizeof(float));
    if (!scratch) { st_writer_abort(&w); return lssar_fail(LSSAR_E_NOMEM, "out of memory saving %s", path); }
    int rc = st_writer_begin(&w, path);
    if (!rc) rc = write_buffer(&w, m, GPT_BUF_PARAM, scratch);
    free(scratch);
    if (rc) { st_writer_abort(&w); return rc; }
    return st_writer_commit(&w);
}

// Copy tensor `name` of the file into buffer `which` of tensor i, after checking dtype and shape.
static int load_tensor(gpt *m, const st_file *f, const char *name, int i, gpt_buffer which, float **scratch) {
    const st_tensor *t = st_find(f, name);
    if (!t) return lssar_fail(LSSAR_E_FORMAT, "%s: tensor '%s' is missing: damaged file, or it was written for another model config", f->path, name);
    if (strcmp(t->dtype, "F32"))
        return lssar_fail(LSSAR_E_FORMAT, "%s: tensor '%s' has dtype %s; lssar checkpoints are F32 (convert it with .float() before saving)", f->path, name, t->dtype);
    int nd = gpt_tensor_ndim(m, i);
    const int *shape = gpt_tensor_shape(m, i);
    int same = t->ndim == nd;
    for (int k = 0; same && k < nd; k++) same = t->shape[k] == shape[k];
    if (!same) {
        char want[128] = "", got[128] = "";
        for (int k = 0; k < nd; k++) snprintf(want + strlen(want), sizeof want - strlen(want), "%s%d", k ? ", " : "", shape[k]);
        for (int k = 0; k < t->ndim; k++) snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", k ? ", " : "", (long long)t->shape[k]);
        return lssar_fail(LSSAR_E_FORMAT, "%s: tensor '%s' has shape (%s) but the model config needs (%s): damaged or mismatched file", f->path, name, got, want);
    }
    const float *src = t->data;
    if ((uintptr_t)src % sizeof(float)) {   // files from other writers need not align the data
        if (!*scratch && !(*scratch = malloc(max_numel(m) * sizeof(float))))
            return lssar_fail(LSSAR_E_NOMEM, "out of memory loading %s", f->path);
        memcpy(*scratch, src, t->nbytes);
        src = *scratch;
    }
    // NaN or Inf in a stored tensor is damage (training never saves such a state): say so here
    // rather than as a NaN loss later.
    for (size_t k = 0; k < t->numel; k++)
        if (!isfinite(src[k]))
            return lssar_fail(LSSAR_E_FORMAT, "%s: tensor '%s' holds a non-finite value (NaN or Inf) at element %zu: damaged file", f->path, name, k);
    return gpt_write_tensor(m, which, i, src);
}

// Every tensor of the file must be one we load: an extra one means a config mismatch.
static int check_no_extra(const gpt *m, const st_file *f, const char *const *prefixes, int np, int n_extra_ok, const char *const *extra_ok) {
    for (int j = 0; j < f->n; j++) {
        const char *nm = f->tensors[j].name;
        int ok = 0;
        for (int e = 0; e < n_extra_ok && !ok; e++) ok = !strcmp(nm, extra_ok[e]);
        for (int p = 0; p < np && !ok; p++) {
            size_t pl = strlen(prefixes[p]);
            ok = !strncmp(nm, prefixes[p], pl) && gpt_tensor_index(m, nm + pl) >= 0;
        }
        if (!ok) return lssar_fail(LSSAR_E_FORMAT, "%s: unexpected tensor '%s' (not part of this model config): damaged or mismatched file", f->path, nm);
    }
    return 0;
}

int ckpt_load_model(const char *path, int attn_override, float p_override, gpt **out, int64_t *step) {
    *out = NULL;
    st_file f;
    int rc = st_open(&f, path);
    if (rc) return rc;
    gpt_config cfg;
    int64_t st = 0;
    rc = ckpt_config_from_meta(&f, &cfg, &st);
    if (!rc && attn_override >= 0 && attn_override != (int)cfg.attn) {
        int a = cfg.attn, b = attn_override;
        int ok = (a == LSSAR_ATTN_LSSA || a == LSSAR_ATTN_LSSAR) && (b == LSSAR_ATTN_LSSA || b == LSSAR_ATTN_LSSAR);
        if (!ok)
            rc = lssar_fail(LSSAR_E_ARG, "%s was trained with %s attention; evaluating it as %s is allowed only between lssa and lssar (they share every parameter and the score function)",
                            path, lssar_attn_name(cfg.attn), lssar_attn_name((lssar_attn_kind)attn_override));
        else cfg.attn = (lssar_attn_kind)attn_override;
    }
    if (!rc && p_override > 0) cfg.p = p_override;
    gpt *m = NULL;
    if (!rc) rc = gpt_create_empty(&cfg, &m);  // every tensor is read below: no random init (seconds at 124M)
    const char *pre[] = {""};
    if (!rc) rc = check_no_extra(m, &f, pre, 1, 0, NULL);
    float *scratch = NULL;
    for (int i = 0; !rc && i < gpt_num_tensors(m); i++)
        rc = load_tensor(m, &f, gpt_tensor_name(m, i), i, GPT_BUF_PARAM, &scratch);
    free(scratch);
    st_close(&f);
    if (rc) { if (m) gpt_free(m); return rc; }
    if (step) *step = st;
    *out = m;
    return 0;
}

// --------------------------------------------------------------------------------- trainer

int ckpt_save_trainer(const gpt *m, const train_state *s, const char *path) {
    st_writer w;
    st_writer_init(&w);
    st_writer_meta(&w, "lssar_format", "trainer-v1");
    put_float(&w, "lr", s->lr);
    put_float(&w, "min_lr_frac", s->min_lr_frac);
    put_int(&w, "warmup", s->warmup);
    put_int(&w, "steps", s->steps);
    put_int(&w, "batch", s->batch);
    put_int(&w, "seq", s->seq);
    put_int(&w, "accum", s->accum);
    char b[32]; snprintf(b, sizeof b, "%llu", (unsigned long long)s->seed);
    st_writer_meta(&w, "seed", b);
    put_float(&w, "wd", s->wd);
    put_float(&w, "clip", s->clip);
    put_float(&w, "beta1", s->beta1);
    put_float(&w, "beta2", s->beta2);
    put_float(&w, "eps", s->eps);
    put_float(&w, "passkey_mix", s->passkey_mix);
    put_int(&w, "align", s->align);
    st_writer_meta(&w, "data", s->data);
    st_writer_meta(&w, "val", s->val);
    put_int(&w, "step", (long)s->step);
    int64_t one = 1, four = 4;
    st_writer_add(&w, "step", "I64", 1, &one);
    st_writer_add(&w, "rng", "I64", 1, &four);
    for (int i = 0; i < gpt_num_tensors(m); i++) declare(&w, m, i, "adam_m.");
    for (int i = 0; i < gpt_num_tensors(m); i++) declare(&w, m, i, "adam_v.");
    float *scratch = malloc(max_numel(m) * sizeof(float));
    if (!scratch) { st_writer_abort(&w); return lssar_fail(LSSAR_E_NOMEM, "out of memory saving %s", path); }
    int rc = st_writer_begin(&w, path);
    int64_t step = s->step;
    if (!rc) rc = st_writer_write(&w, &step, 8);
    if (!rc) rc = st_writer_write(&w, s->rng.s, 32);   // uint64 -> I64, same bits (little-endian host)
    if (!rc) rc = write_buffer(&w, m, GPT_BUF_ADAM_M, scratch);
    if (!rc) rc = write_buffer(&w, m, GPT_BUF_ADAM_V, scratch);
    free(scratch);
    if (rc) { st_writer_abort(&w); return rc; }
    return st_writer_commit(&w);
}

static int state_from_file(const st_file *f, train_state *s) {
    memset(s, 0, sizeof *s);
    const char *fmt = st_meta(f, "lssar_format");
    if (!fmt || strcmp(fmt, "trainer-v1"))
        return lssar_fail(LSSAR_E_FORMAT, "%s: metadata lssar_format is not \"trainer-v1\": not an lssar trainer state", f->path);
    long v;
    int rc;
    if ((rc = meta_float(f, "lr", &s->lr)) || (rc = meta_float(f, "min_lr_frac", &s->min_lr_frac)) ||
        (rc = meta_float(f, "wd", &s->wd)) || (rc = meta_float(f, "clip", &s->clip)) ||
        (rc = meta_float(f, "beta1", &s->beta1)) || (rc = meta_float(f, "beta2", &s->beta2)) ||
        (rc = meta_float(f, "eps", &s->eps)) || (rc = meta_u64(f, "seed", &s->seed)))
        return rc;
    if (st_meta(f, "passkey_mix") && (rc = meta_float(f, "passkey_mix", &s->passkey_mix))) return rc;
    if (!(s->passkey_mix >= 0 && s->passkey_mix <= 1))
        return lssar_fail(LSSAR_E_FORMAT, "%s: passkey_mix %g is outside [0, 1] (damaged)", f->path, s->passkey_mix);
    GET_INT("warmup", 0, INT32_MAX, s->warmup);
    GET_INT("steps", 1, INT32_MAX, s->steps);
    GET_INT("batch", 1, 1 << 20, s->batch);
    GET_INT("seq", 1, 1 << 30, s->seq);
    GET_INT("accum", 1, 1 << 20, s->accum);
    s->align = 1;
    if (st_meta(f, "align")) GET_INT("align", 1, 1 << 30, s->align);
    const char *d = st_meta(f, "data"), *val = st_meta(f, "val");
    snprintf(s->data, sizeof s->data, "%s", d ? d : "");
    snprintf(s->val, sizeof s->val, "%s", val ? val : "");
    int64_t step;
    if ((rc = st_read(f, "step", "I64", &step, 1))) return rc;
    if ((rc = st_read(f, "rng", "I64", s->rng.s, 4))) return rc;
    if (step < 0) return lssar_fail(LSSAR_E_FORMAT, "%s: negative step %lld", f->path, (long long)step);
    if (!(s->rng.s[0] | s->rng.s[1] | s->rng.s[2] | s->rng.s[3]))
        return lssar_fail(LSSAR_E_FORMAT, "%s: the RNG state is all zero (damaged)", f->path);
    s->step = step;
    return 0;
}

int ckpt_read_train_state(const char *path, train_state *s) {
    st_file f;
    int rc = st_open(&f, path);
    if (rc) return rc;
    rc = state_from_file(&f, s);
    st_close(&f);
    return rc;
}

int ckpt_load_trainer(gpt *m, const char *path, train_state *s) {
    st_file f;
    int rc = st_open(&f, path);
    if (rc) return rc;
    rc = state_from_file(&f, s);
    const char *pre[] = {"adam_m.", "adam_v."}, *extra[] = {"step", "rng"};
    if (!rc) rc = check_no_extra(m, &f, pre, 2, 2, extra);
    float *scratch = NULL;
    char name[300];
    for (int i = 0; !rc && i < gpt_num_tensors(m); i++) {
        snprintf(name, sizeof name, "adam_m.%s", gpt_tensor_name(m, i));
        rc = load_tensor(m, &f, name, i, GPT_BUF_ADAM_M, &scratch);
        if (rc) break;
        snprintf(name, sizeof name, "adam_v.%s", gpt_tensor_name(m, i));
        rc = load_tensor(m, &f, name, i, GPT_BUF_ADAM_V, &scratch);
    }
    free(scratch);
    st_close(&f);
    return rc;
}

int ckpt_save(const char *dir, const gpt *m, const train_state *s) {
    int rc = lssar_mkdirs(dir);
    if (rc) return rc;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, CKPT_MODEL_FILE);
    if ((rc = ckpt_save_model(m, path, s->step))) return rc;
    snprintf(path, sizeof path, "%s/%s", dir, CKPT_TRAINER_FILE);
    return ckpt_save_trainer(m, s, path);
}
