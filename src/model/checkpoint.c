// checkpoint.c - model.safetensors and trainer.safetensors of a run directory; see checkpoint.h.
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "attn/attn.h"
#include "model/checkpoint.h"

// ---------------------------------------------------------------------------- metadata fields
//
// One table per file lists every __metadata__ key with its type and where it lives in the struct;
// the same table writes the keys (in table order) and reads them back, so a new field is one line.

typedef enum { MF_INT, MF_I64, MF_U64, MF_FLOAT, MF_STR, MF_POS, MF_ATTN, MF_LEN_NORM } meta_type;
typedef struct {
    const char *key;
    meta_type type;
    size_t off;          // offset of the field in the struct the table describes
    size_t size;         // MF_STR: the char buffer's size
    long lo, hi;         // MF_INT, MF_I64: accepted range
    int optional;        // absent in older files: the field keeps `dflt`
    double dflt;
} meta_field;

#define META_OPTIONAL(dflt) 1, (dflt)
#define META_REQUIRED 0, 0

// model.safetensors: the config and the step.
typedef struct { gpt_config c; int64_t step; } model_meta;
#define MM(f) offsetof(model_meta, f)
static const meta_field MODEL_FIELDS[] = {
    {"layers", MF_INT, MM(c.layers), 0, 1, 1 << 16, META_REQUIRED},
    {"heads", MF_INT, MM(c.heads), 0, 1, 1 << 16, META_REQUIRED},
    {"dim", MF_INT, MM(c.dim), 0, 1, 1 << 20, META_REQUIRED},
    {"vocab", MF_INT, MM(c.vocab), 0, 1, 65536, META_REQUIRED},
    {"channels", MF_INT, MM(c.channels), 0, 1, 64, META_REQUIRED},
    {"max_seq", MF_INT, MM(c.max_seq), 0, 1, 1 << 30, META_REQUIRED},
    {"pos", MF_POS, MM(c.pos), 0, 0, 0, META_REQUIRED},
    {"attn", MF_ATTN, MM(c.attn), 0, 0, 0, META_REQUIRED},
    {"p", MF_FLOAT, MM(c.p), 0, 0, 0, META_REQUIRED},
    {"tied", MF_INT, MM(c.tied), 0, 0, 1, META_REQUIRED},
    // "train" or "row" (sigmoid / relu; written for every kind). Files from before it load as train,
    // the only behaviour there was.
    {"len_norm", MF_LEN_NORM, MM(c.len_norm), 0, 0, 0, META_OPTIONAL(LSSAR_LEN_NORM_TRAIN)},
    // Files from before these load as what there was: base 10000, the head size's ln(D).
    {"rope_base", MF_FLOAT, MM(c.rope_base), 0, 0, 0, META_OPTIONAL(GPT_ROPE_BASE)},
    {"temp_d", MF_INT, MM(c.temp_d), 0, 0, 1 << 20, META_OPTIONAL(0)},
    {"step", MF_I64, MM(step), 0, 0, INT32_MAX, META_REQUIRED},
};
#define N_MODEL_FIELDS (int)(sizeof MODEL_FIELDS / sizeof MODEL_FIELDS[0])

// trainer.safetensors: the schedule and batch arguments. "step" here is informational (the I64
// tensor "step" is what --resume trusts), so it is optional on reading and then overwritten.
#define TS(f) offsetof(train_state, f)
static const meta_field TRAINER_FIELDS[] = {
    {"lr", MF_FLOAT, TS(lr), 0, 0, 0, META_REQUIRED},
    {"min_lr_frac", MF_FLOAT, TS(min_lr_frac), 0, 0, 0, META_REQUIRED},
    {"warmup", MF_INT, TS(warmup), 0, 0, INT32_MAX, META_REQUIRED},
    {"steps", MF_INT, TS(steps), 0, 1, INT32_MAX, META_REQUIRED},
    {"batch", MF_INT, TS(batch), 0, 1, 1 << 20, META_REQUIRED},
    {"seq", MF_INT, TS(seq), 0, 1, 1 << 30, META_REQUIRED},
    {"accum", MF_INT, TS(accum), 0, 1, 1 << 20, META_REQUIRED},
    {"seed", MF_U64, TS(seed), 0, 0, 0, META_REQUIRED},
    {"wd", MF_FLOAT, TS(wd), 0, 0, 0, META_REQUIRED},
    {"clip", MF_FLOAT, TS(clip), 0, 0, 0, META_REQUIRED},
    {"beta1", MF_FLOAT, TS(beta1), 0, 0, 0, META_REQUIRED},
    {"beta2", MF_FLOAT, TS(beta2), 0, 0, 0, META_REQUIRED},
    {"eps", MF_FLOAT, TS(eps), 0, 0, 0, META_REQUIRED},
    {"passkey_mix", MF_FLOAT, TS(passkey_mix), 0, 0, 0, META_OPTIONAL(0)},
    {"passkey_prompt", MF_INT, TS(passkey_prompt), 0, 0, 1, META_OPTIONAL(0)},
    {"align", MF_INT, TS(align), 0, 1, 1 << 30, META_OPTIONAL(1)},
    {"data", MF_STR, TS(data), sizeof(((train_state *)0)->data), 0, 0, META_OPTIONAL(0)},
    {"val", MF_STR, TS(val), sizeof(((train_state *)0)->val), 0, 0, META_OPTIONAL(0)},
    {"step", MF_I64, TS(step), 0, 0, INT64_MAX, META_OPTIONAL(0)},
};
#define N_TRAINER_FIELDS (int)(sizeof TRAINER_FIELDS / sizeof TRAINER_FIELDS[0])

// The stored name of an attention kind or position scheme -> its value; -1 if unknown. (Local:
// the file's names are the checkpoint format, whatever the CLI's parsers accept.)
static int attn_from_name(const char *v) {
    for (int k = 0; k < LSSAR_ATTN_NKINDS; k++)
        if (!strcmp(v, lssar_attn_name((lssar_attn_kind)k))) return k;
    return -1;
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

// Write every field of the table from the struct at base.
static int meta_write(st_writer *w, const meta_field *fields, int n, const void *base) {
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        const meta_field *fd = &fields[i];
        const char *at = (const char *)base + fd->off;
        char b[48];
        switch (fd->type) {
        case MF_INT: snprintf(b, sizeof b, "%d", *(const int *)at); rc = st_writer_meta(w, fd->key, b); break;
        case MF_I64:
            snprintf(b, sizeof b, "%lld", (long long)*(const int64_t *)at);
            rc = st_writer_meta(w, fd->key, b);
            break;
        case MF_U64:
            snprintf(b, sizeof b, "%llu", (unsigned long long)*(const uint64_t *)at);
            rc = st_writer_meta(w, fd->key, b);
            break;
        case MF_FLOAT: rc = put_float(w, fd->key, *(const float *)at); break;
        case MF_STR: rc = st_writer_meta(w, fd->key, at); break;
        case MF_POS: rc = st_writer_meta(w, fd->key, lssar_pos_name(*(const lssar_pos *)at)); break;
        case MF_ATTN: rc = st_writer_meta(w, fd->key, lssar_attn_name(*(const lssar_attn_kind *)at)); break;
        case MF_LEN_NORM:
            rc = st_writer_meta(w, fd->key, lssar_len_norm_name(*(const lssar_len_norm *)at));
            break;
        }
    }
    return rc;
}

// Read one field of the table into the struct at base; errors name the file, the key and the value.
static int meta_read_field(const st_file *f, const meta_field *fd, void *base) {
    char *at = (char *)base + fd->off;
    const char *v = st_meta(f, fd->key);
    if (!v) {
        if (!fd->optional) {
            if (fd->type == MF_POS)
                return lssar_fail(LSSAR_E_FORMAT,
                                  "%s: metadata field 'pos' is missing (expected rope, learned or none)",
                                  f->path);
            if (fd->type == MF_ATTN)
                return lssar_fail(LSSAR_E_FORMAT,
                                  "%s: metadata field 'attn' is missing (expected an attention kind: "
                                  "softmax, lssar, ...)",
                                  f->path);
            return lssar_fail(LSSAR_E_FORMAT,
                              "%s: metadata field '%s' is missing: not an lssar checkpoint, or damaged",
                              f->path, fd->key);
        }
        switch (fd->type) {
        case MF_INT: *(int *)at = (int)fd->dflt; break;
        case MF_I64: *(int64_t *)at = (int64_t)fd->dflt; break;
        case MF_U64: *(uint64_t *)at = (uint64_t)fd->dflt; break;
        case MF_FLOAT: *(float *)at = (float)fd->dflt; break;
        case MF_STR: at[0] = 0; break;
        case MF_LEN_NORM: *(lssar_len_norm *)at = (lssar_len_norm)(int)fd->dflt; break;
        case MF_POS: case MF_ATTN: break;   // never optional
        }
        return 0;
    }
    char *end;
    errno = 0;
    switch (fd->type) {
    case MF_INT: case MF_I64: {
        long long x = strtoll(v, &end, 10);
        if (!*v || *end || errno || x < fd->lo || x > fd->hi)
            return lssar_fail(LSSAR_E_FORMAT, "%s: metadata field '%s' = '%s' is not an integer in %ld..%ld",
                              f->path, fd->key, v, fd->lo, fd->hi);
        if (fd->type == MF_INT) *(int *)at = (int)x;
        else *(int64_t *)at = x;
        return 0;
    }
    case MF_U64: {
        unsigned long long x = strtoull(v, &end, 10);
        if (!*v || *v == '-' || *end || errno)
            return lssar_fail(LSSAR_E_FORMAT, "%s: metadata field '%s' = '%s' is not a non-negative integer",
                              f->path, fd->key, v);
        *(uint64_t *)at = x;
        return 0;
    }
    case MF_FLOAT: {
        float x = strtof(v, &end);
        if (!*v || *end || errno || !isfinite(x))
            return lssar_fail(LSSAR_E_FORMAT, "%s: metadata field '%s' = '%s' is not a finite number",
                              f->path, fd->key, v);
        *(float *)at = x;
        return 0;
    }
    case MF_STR:
        snprintf(at, fd->size, "%s", v);
        return 0;
    case MF_POS: {
        int k = gpt_pos_parse(v);
        if (k < 0)
            return lssar_fail(LSSAR_E_FORMAT,
                              "%s: metadata field 'pos' is %s (expected rope, learned or none)", f->path, v);
        *(lssar_pos *)at = (lssar_pos)k;
        return 0;
    }
    case MF_LEN_NORM: {
        lssar_len_norm ln;
        if (lssar_len_norm_parse(v, &ln))
            return lssar_fail(LSSAR_E_FORMAT, "%s: metadata field 'len_norm' is %s (expected train or row)",
                              f->path, v);
        *(lssar_len_norm *)at = ln;
        return 0;
    }
    case MF_ATTN: {
        int k = attn_from_name(v);
        if (k < 0)
            return lssar_fail(LSSAR_E_FORMAT,
                              "%s: metadata field 'attn' is %s (expected one of lssar's attention kinds: "
                              "softmax, ssmax, lssa, lssar, sigmoid, relu or a combination of their stages "
                              "such as softmax+cos+rw; a newer lssar may know it)",
                              f->path, v);
        *(lssar_attn_kind *)at = (lssar_attn_kind)k;
        return 0;
    }
    }
    return 0;
}

static int meta_read(const st_file *f, const meta_field *fields, int n, void *base) {
    for (int i = 0; i < n; i++) {
        int rc = meta_read_field(f, &fields[i], base);
        if (rc) return rc;
    }
    return 0;
}

// ----------------------------------------------------------------------------------- model

int ckpt_model_path(const char *path, char *out, size_t n) {
    if (!path || !out || n == 0) return lssar_fail(LSSAR_E_NULL, "ckpt_model_path: NULL argument");
    struct stat st;
    int len = stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? snprintf(out, n, "%s/%s", path, CKPT_MODEL_FILE)
                                                          : snprintf(out, n, "%s", path);
    if (len < 0 || (size_t)len >= n) return lssar_fail(LSSAR_E_ARG, "model path %s is too long", path);
    if (access(out, R_OK) != 0)
        return lssar_fail(LSSAR_E_IO,
                          "no model at %s: cannot open it (%s); give a run directory written by `lssar "
                          "train` (it holds %s) or a .safetensors file",
                          out, strerror(errno), CKPT_MODEL_FILE);
    return 0;
}

int ckpt_config_from_meta(const st_file *f, gpt_config *cfg, int64_t *step) {
    memset(cfg, 0, sizeof *cfg);
    const char *fmt = st_meta(f, "lssar_format");
    if (!fmt || strcmp(fmt, "gpt-v1"))
        return lssar_fail(LSSAR_E_FORMAT,
                          "%s: metadata lssar_format is %s%s%s, expected \"gpt-v1\": not an lssar model file",
                          f->path, fmt ? "\"" : "missing", fmt ? fmt : "", fmt ? "\"" : "");
    model_meta mm;
    memset(&mm, 0, sizeof mm);
    // "step" is the table's last field: read it only when asked (as before).
    int rc = meta_read(f, MODEL_FIELDS, step ? N_MODEL_FIELDS : N_MODEL_FIELDS - 1, &mm);
    if (rc) return rc;
    *cfg = mm.c;
    if (step) *step = mm.step;
    if (gpt_config_check(cfg))
        return lssar_fail(LSSAR_E_FORMAT, "%s: the stored model config is invalid: %s", f->path,
                          lssar_errmsg());
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
    st_writer_meta(&w, "format", "pt");   // what transformers' loader asks of a safetensors file
    model_meta mm;
    memset(&mm, 0, sizeof mm);
    mm.c = *c;
    mm.step = step;
    meta_write(&w, MODEL_FIELDS, N_MODEL_FIELDS, &mm);
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
    if (!t)
        return lssar_fail(LSSAR_E_FORMAT,
                          "%s: tensor '%s' is missing: damaged file, or it was written for another model "
                          "config",
                          f->path, name);
    if (strcmp(t->dtype, "F32"))
        return lssar_fail(LSSAR_E_FORMAT,
                          "%s: tensor '%s' has dtype %s; lssar checkpoints are F32 (convert it with .float() "
                          "before saving)",
                          f->path, name, t->dtype);
    int nd = gpt_tensor_ndim(m, i);
    const int *shape = gpt_tensor_shape(m, i);
    int same = t->ndim == nd;
    for (int k = 0; same && k < nd; k++) same = t->shape[k] == shape[k];
    if (!same) {
        char want[128] = "", got[128] = "";
        for (int k = 0; k < nd; k++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%d", k ? ", " : "", shape[k]);
        for (int k = 0; k < t->ndim; k++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", k ? ", " : "",
                     (long long)t->shape[k]);
        return lssar_fail(LSSAR_E_FORMAT,
                          "%s: tensor '%s' has shape (%s) but the model config needs (%s): damaged or "
                          "mismatched file",
                          f->path, name, got, want);
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
            return lssar_fail(LSSAR_E_FORMAT,
                              "%s: tensor '%s' holds a non-finite value (NaN or Inf) at element %zu: damaged "
                              "file",
                              f->path, name, k);
    return gpt_write_tensor(m, which, i, src);
}

// Every tensor of the file must be one we load: an extra one means a config mismatch.
static int check_no_extra(const gpt *m, const st_file *f, const char *const *prefixes, int np, int n_extra_ok,
                          const char *const *extra_ok) {
    for (int j = 0; j < f->n; j++) {
        const char *nm = f->tensors[j].name;
        int ok = 0;
        for (int e = 0; e < n_extra_ok && !ok; e++) ok = !strcmp(nm, extra_ok[e]);
        for (int p = 0; p < np && !ok; p++) {
            size_t pl = strlen(prefixes[p]);
            ok = !strncmp(nm, prefixes[p], pl) && gpt_tensor_index(m, nm + pl) >= 0;
        }
        if (!ok)
            return lssar_fail(LSSAR_E_FORMAT,
                              "%s: unexpected tensor '%s' (not part of this model config): damaged or "
                              "mismatched file",
                              f->path, nm);
    }
    return 0;
}

int ckpt_load_model(const char *path, const ckpt_load_opts *o, gpt **out, int64_t *step) {
    static const ckpt_load_opts defaults;
    if (!o) o = &defaults;
    *out = NULL;
    char file[4096];
    int rc = ckpt_model_path(path, file, sizeof file);
    if (rc) return rc;
    path = file;
    st_file f;
    rc = st_open(&f, path);
    if (rc) return rc;
    gpt_config cfg;
    int64_t st = 0;
    rc = ckpt_config_from_meta(&f, &cfg, &st);
    if (!rc && o->set_attn && o->attn != cfg.attn) {
        lssar_attn_stages a = attn_stages(cfg.attn), b = attn_stages(o->attn);
        int ok = attn_kind_ok(o->attn) && a.score == b.score && a.phi == b.phi && a.norm == b.norm;
        if (!ok)
            rc = lssar_fail(LSSAR_E_ARG,
                            "%s was trained with %s attention; evaluating it as %s is allowed only with the "
                            "re-weighting switched on or off (lssa <-> lssar, softmax <-> softmax+rw, ...: "
                            "they share every parameter and the stages before it)",
                            path, lssar_attn_name(cfg.attn), lssar_attn_name(o->attn));
        else cfg.attn = o->attn;
    }
    if (!rc && o->p > 0) cfg.p = o->p;
    cfg.device = o->device;
    if (!rc) {
        // The parameters the config needs (gpt.c's tensor table) must all be in the file: check
        // before allocating them, so a damaged config in a small file never asks for gigabytes.
        // (A small shortfall is left to the per-tensor checks below, whose messages name the
        // missing or misshapen tensor.)
        double C = cfg.dim, V = cfg.vocab, ch = cfg.channels;
        double per_layer = 13.0 * C + 12.0 * C * C + (attn_has_ssmax_s(cfg.attn) ? cfg.heads : 0);
        double wpe = cfg.pos == LSSAR_POS_LEARNED ? (double)cfg.max_seq * C : 0;
        double need = ch * V * C * (cfg.tied ? 1 : 2) + wpe + cfg.layers * per_layer + 2.0 * C;
        if (need * sizeof(float) > (double)f.buf_len + (16 << 20))
            rc = lssar_fail(LSSAR_E_FORMAT,
                            "%s: its config (layers %d, dim %d, vocab %d, channels %d) needs %.0f bytes of "
                            "F32 parameters but the file holds %zu bytes of data: truncated, or damaged "
                            "metadata",
                            path, cfg.layers, cfg.dim, cfg.vocab, cfg.channels, need * sizeof(float),
                            f.buf_len);
    }
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
    meta_write(&w, TRAINER_FIELDS, N_TRAINER_FIELDS, s);
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
        return lssar_fail(LSSAR_E_FORMAT,
                          "%s: metadata lssar_format is not \"trainer-v1\": not an lssar trainer state",
                          f->path);
    int rc = meta_read(f, TRAINER_FIELDS, N_TRAINER_FIELDS, s);
    if (rc) return rc;
    if (!(s->passkey_mix >= 0 && s->passkey_mix <= 1))
        return lssar_fail(LSSAR_E_FORMAT, "%s: passkey_mix %g is outside [0, 1] (damaged)", f->path,
                          s->passkey_mix);
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
