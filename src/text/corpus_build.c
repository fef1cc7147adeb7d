// corpus_build.c - `lssar data build`: load the corpora, tokenize every document (OpenMP across
// documents, output order fixed), hold out whole documents for val, write llm.c-format shards,
// val_index.json and manifest.json. The same inputs give the same bytes: nothing depends on the
// thread count, the clock or the file system's listing order.
#include <cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "corpus.h"
#include "../core/sha256.h"
#include "../core/util.h"
#include "../data/shard.h"
#include "../core/json.h"

#define MAX_CORPORA 8

void corpus_build_defaults(corpus_build_opts *o) {
    memset(o, 0, sizeof *o);
    o->corpora = "all";
    o->tokenizer = "gpt2";
    o->val_frac = 0.1;
    o->val_max_frac = 0.25;
    o->long_tokens = 16384;
    o->min_long_val = 20;
    o->shard_tokens = 100000000L;
    o->seed = 1337;
}

typedef struct {
    const corpus_info *info;
    int first, count;          // its documents in the combined list
    cJSON *packages;           // from raw/NAME/packages.txt (NULL for "text")
    double load_s;
} corpus_part;

typedef struct {
    int32_t *ids;              // document tokens (no EOT)
    size_t n;
    int val;                   // 1 = held out
    uint64_t hash;             // split order
} doc_tokens;

static uint64_t fnv1a(const char *s) {
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) { h ^= (unsigned char)*s; h *= 1099511628211ULL; }
    // splitmix64 finaliser: spreads the bits so the order looks random
    h += 0x9e3779b97f4a7c15ULL;
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
    return h ^ (h >> 31);
}

/* raw/NAME/packages.txt: "registry package version sha256" per line -> JSON array. */
static int read_packages(const char *dir, const char *name, cJSON **out) {
    char path[4096];
    corpus_path(path, sizeof path, "%s/packages.txt", dir);
    char *txt; size_t len;
    if (lssar_read_file(path, &txt, &len))
        return lssar_fail(LSSAR_E_IO, "corpus '%s' has not been fetched (%s is missing): run "
                          "scripts/fetch-corpora.sh %s (it downloads into $LSSAR_DATA/raw, default "
                          "./data/raw; or point --raw at the folder)", name, path, name);
    cJSON *arr = cJSON_CreateArray();
    char *save = NULL;
    for (char *line = strtok_r(txt, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char reg[64], pkg[256], ver[128], sha[80];
        if (sscanf(line, "%63s %255s %127s %79s", reg, pkg, ver, sha) != 4) continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "registry", reg);
        cJSON_AddStringToObject(o, "package", pkg);
        cJSON_AddStringToObject(o, "version", ver);
        cJSON_AddStringToObject(o, "sha256", sha);
        cJSON_AddItemToArray(arr, o);
    }
    free(txt);
    if (cJSON_GetArraySize(arr) == 0) {
        cJSON_Delete(arr);
        return lssar_fail(LSSAR_E_FORMAT, "%s lists no packages: the fetch was interrupted? delete %s and "
                          "run scripts/fetch-corpora.sh %s", path, dir, name);
    }
    *out = arr;
    return 0;
}

/* Split "a,b,all" into corpus infos (no duplicates, in the given order). */
static int parse_corpora(const char *list, int want_text, const corpus_info **out, int *n) {
    *n = 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list ? list : "");
    char *save = NULL;
    static const char *all[] = {"sotu", "kjv", "web", "austen", "mobydick"};
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ') tok++;
        const char *names[5] = {tok};
        int k = 1;
        if (!strcmp(tok, "all")) { for (int i = 0; i < 5; i++) names[i] = all[i]; k = 5; }
        for (int i = 0; i < k; i++) {
            const corpus_info *c = corpus_find(names[i]);
            if (!c)
                return lssar_fail(LSSAR_E_ARG, "unknown corpus '%s' in --corpus (known: %s)", names[i],
                                  corpus_known_names());
            int dup = 0;
            for (int j = 0; j < *n; j++) dup |= out[j] == c;
            if (!dup && *n < MAX_CORPORA) out[(*n)++] = c;
        }
    }
    if (want_text) {
        const corpus_info *t = corpus_find("text");
        int has = 0;
        for (int j = 0; j < *n; j++) has |= out[j] == t;
        if (!has) out[(*n)++] = t;
    } else {
        for (int j = 0; j < *n; j++)
            if (!strcmp(out[j]->name, "text"))
                return lssar_fail(LSSAR_E_ARG, "--corpus includes 'text' but no --text PATH was given (name "
                                  "the files or folder with --text)");
    }
    if (*n == 0)
        return lssar_fail(LSSAR_E_ARG, "no corpus given: use --corpus (%s) and/or --text PATH",
                          corpus_known_names());
    return 0;
}

/* Choose the held-out documents; see docs/DATA.md ("The split"). */
typedef struct { int doc; uint64_t h; int is_long; } cand;
static int cmp_cand(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->is_long != y->is_long) return y->is_long - x->is_long;  // long documents first
    return x->h < y->h ? -1 : x->h > y->h;
}

static int choose_val(const corpus_build_opts *o, corpus_part *parts, int nparts, doc_tokens *dt,
                      char *const *keys, int *long_val) {
    cand *order[MAX_CORPORA] = {0};
    int next[MAX_CORPORA] = {0}, nval[MAX_CORPORA] = {0};
    double tot[MAX_CORPORA] = {0}, vtok[MAX_CORPORA] = {0};
    *long_val = 0;
    for (int c = 0; c < nparts; c++) {
        corpus_part *p = &parts[c];
        order[c] = malloc((p->count ? p->count : 1) * sizeof(cand));
        if (!order[c]) {
            for (int k = 0; k < c; k++) free(order[k]);
            return lssar_fail(LSSAR_E_NOMEM, "out of memory");
        }
        for (int i = 0; i < p->count; i++) {
            int d = p->first + i;
            order[c][i] = (cand){d, dt[d].hash, dt[d].n >= (size_t)o->long_tokens};
            tot[c] += dt[d].n;
        }
        qsort(order[c], p->count, sizeof(cand), cmp_cand);
        if (p->info->held_out) {  // an evaluation-only corpus: all of it is held out
            for (; next[c] < p->count; next[c]++) {
                cand *k = &order[c][next[c]];
                dt[k->doc].val = 1; nval[c]++; vtok[c] += dt[k->doc].n; *long_val += k->is_long;
            }
            continue;
        }
        // Phase 1: each corpus gives val_frac of its tokens, long documents first, in hash order;
        // never more than half of its documents (a corpus of one document stays in train).
        int maxval = p->count / 2;
        for (; next[c] < p->count && nval[c] < maxval && vtok[c] < o->val_frac * tot[c]; next[c]++) {
            cand *k = &order[c][next[c]];
            dt[k->doc].val = 1; nval[c]++; vtok[c] += dt[k->doc].n; *long_val += k->is_long;
        }
    }
    // Phase 2: until enough long documents are held out, the corpus with the smallest held-out
    // share gives its next long document (the 16x-extrapolation evaluation needs them).
    while (*long_val < o->min_long_val) {
        int best = -1;
        for (int c = 0; c < nparts; c++) {
            if (next[c] >= parts[c].count || !order[c][next[c]].is_long || nval[c] >= parts[c].count / 2)
                continue;
            // keep most of it for training
            if (vtok[c] + dt[order[c][next[c]].doc].n > o->val_max_frac * tot[c]) continue;
            if (best < 0 || vtok[c] / tot[c] < vtok[best] / tot[best]) best = c;
        }
        if (best < 0) break;
        cand *k = &order[best][next[best]++];
        dt[k->doc].val = 1; nval[best]++; vtok[best] += dt[k->doc].n; (*long_val)++;
    }
    for (int c = 0; c < nparts; c++) free(order[c]);
    // Phase 3: documents that share a key (the same Bible book in both translations) share a
    // side, so no held-out book is trained on in the other translation.
    int ndocs = nparts ? parts[nparts - 1].first + parts[nparts - 1].count : 0;
    for (int i = 0; i < ndocs; i++) {
        if (dt[i].val) continue;
        for (int j = 0; j < ndocs; j++)
            if (dt[j].val && dt[j].hash == dt[i].hash && !strcmp(keys[j], keys[i])) {
                dt[i].val = 1;
                *long_val += dt[i].n >= (size_t)o->long_tokens;
                break;
            }
    }
    return 0;
}

/* Append EOT + the document's tokens to a shard. */
static int write_doc(shard_writer *w, int eot, const doc_tokens *d, uint16_t *tmp, size_t tmpn) {
    uint16_t e = (uint16_t)eot;
    int rc = shard_writer_append(w, &e, 1);
    for (size_t i = 0; !rc && i < d->n; i += tmpn) {
        size_t k = d->n - i < tmpn ? d->n - i : tmpn;
        for (size_t j = 0; j < k; j++) tmp[j] = (uint16_t)d->ids[i + j];
        rc = shard_writer_append(w, tmp, k);
    }
    return rc;
}

static cJSON *split_stats(double docs, double bytes, double tokens) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "documents", docs);
    cJSON_AddNumberToObject(o, "bytes", bytes);
    cJSON_AddNumberToObject(o, "tokens", tokens);
    return o;
}

/* Remove train_NNN.bin files left by an earlier, larger build (nshards and above). */
static void remove_stale_shards(const char *dir, int nshards) {
    for (int i = nshards; i < 100000; i++) {
        char p[4096];
        corpus_path(p, sizeof p, "%s/train_%03d.bin", dir, i);
        if (unlink(p) != 0) break;
    }
}

// One build: its sources, documents and tokens, and what the shards hold.
typedef struct {
    const corpus_build_opts *o;
    char raw[4096];                    // the folder of the fetched corpora
    corpus_part parts[MAX_CORPORA];
    int nparts;
    lssar_tokenizer *tok;
    int vocab, eot;
    corpus_docs docs;
    doc_tokens *dt;                    // (docs.n)
    int long_val;                      // long documents held out
    double vt, vb, vn, tt, tb, tn;     // val and train: tokens, bytes, documents
    int nshards;
    cJSON *shards, *vdocs;             // for manifest.json and val_index.json
} corpus_run;

static int check_opts(const corpus_build_opts *o) {
    if (!o->out_dir || !*o->out_dir) return lssar_fail(LSSAR_E_ARG, "no output folder: give --out DIR");
    if (!(o->val_frac >= 0 && o->val_frac < 1))
        return lssar_fail(LSSAR_E_ARG, "--val-frac must be in [0, 1), got %g", o->val_frac);
    if (!(o->val_max_frac >= 0 && o->val_max_frac <= 1))
        return lssar_fail(LSSAR_E_ARG, "--val-max-frac must be in [0, 1], got %g", o->val_max_frac);
    if (o->long_tokens < 1)
        return lssar_fail(LSSAR_E_ARG, "--long-tokens must be >= 1, got %d", o->long_tokens);
    if (o->shard_tokens < 1024)
        return lssar_fail(LSSAR_E_ARG, "--shard-tokens must be >= 1024, got %ld", o->shard_tokens);
    return 0;
}

// The corpora and the tokenizer. Every source is checked before the slow work, so a missing one
// fails fast.
static int open_sources(corpus_run *b) {
    const corpus_build_opts *o = b->o;
    const corpus_info *infos[MAX_CORPORA];
    int rc = parse_corpora(o->corpora, o->text_path != NULL, infos, &b->nparts);
    if (rc) return rc;
    if (o->raw_dir) corpus_path(b->raw, sizeof b->raw, "%s", o->raw_dir);
    else corpus_path(b->raw, sizeof b->raw, "%s/raw", getenv("LSSAR_DATA") &&
                     *getenv("LSSAR_DATA") ? getenv("LSSAR_DATA") : "./data");
    for (int c = 0; c < b->nparts; c++) {
        b->parts[c].info = infos[c];
        if (!infos[c]->load) continue;
        char dir[4096];
        corpus_path(dir, sizeof dir, "%s/%s", b->raw, infos[c]->name);
        if ((rc = read_packages(dir, infos[c]->name, &b->parts[c].packages))) return rc;
    }
    if ((rc = lssar_tokenizer_open(o->tokenizer, &b->tok))) return rc;
    b->vocab = lssar_tokenizer_vocab_size(b->tok);
    b->eot = lssar_tokenizer_eot(b->tok);
    if (b->vocab > 65536)
        return lssar_fail(LSSAR_E_UNSUPPORTED, "tokenizer %s has %d ids; uint16 shards hold at most 65536",
                          o->tokenizer, b->vocab);
    return 0;
}

// 1. Load and clean every corpus's documents.
static int load_docs(corpus_run *b) {
    for (int c = 0; c < b->nparts; c++) {
        corpus_part *p = &b->parts[c];
        double t0 = lssar_now();
        p->first = b->docs.n;
        int rc;
        if (p->info->load) {
            char dir[4096];
            corpus_path(dir, sizeof dir, "%s/%s", b->raw, p->info->name);
            rc = p->info->load(dir, &b->docs);
        } else {
            rc = corpus_load_text(b->o->text_path, &b->docs);
        }
        if (rc) return rc;
        p->count = b->docs.n - p->first;
        p->load_s = lssar_now() - t0;
        if (p->count == 0)
            return lssar_fail(LSSAR_E_FORMAT, "corpus '%s': empty input (no documents)", p->info->name);
        if (!b->o->quiet) {
            size_t n = 0;
            for (int i = 0; i < p->count; i++) n += b->docs.docs[p->first + i].len;
            fprintf(stderr, "lssar data: %-8s %5d documents, %9zu bytes (extracted in %.2f s)\n",
                    p->info->name, p->count, n, p->load_s);
        }
    }
    return 0;
}

// 2. Tokenize, documents in parallel; each result lands in its own slot, so order is fixed.
static int tokenize_docs(corpus_run *b) {
    const corpus_docs *docs = &b->docs;
    doc_tokens *dt = b->dt = calloc((size_t)(docs->n > 0 ? docs->n : 1), sizeof *dt);
    if (!dt) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    double total_bytes = 0;
    for (int i = 0; i < docs->n; i++) total_bytes += docs->docs[i].len;
    lssar_progress prog;
    lssar_progress_start(&prog, "lssar data: tokenize", "MB", total_bytes / 1e6);
    double done_bytes = 0;
    int first_err = -1, err_code = 0;
    char err_msg[1024] = "";
    #pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < docs->n; i++) {
        int r = lssar_encode(b->tok, docs->docs[i].text, docs->docs[i].len, 0, &dt[i].ids, &dt[i].n);
        #pragma omp critical(corpus_progress)
        {
            if (r && (first_err < 0 || i < first_err)) {
                first_err = i; err_code = r;
                snprintf(err_msg, sizeof err_msg, "%s", lssar_errmsg());
            }
            done_bytes += docs->docs[i].len;
            if (!b->o->quiet) lssar_progress_update(&prog, done_bytes / 1e6, NULL);
        }
    }
    if (first_err >= 0)
        return lssar_fail(err_code, "tokenizing %s failed: %s", docs->docs[first_err].name, err_msg);
    for (int i = 0; i < docs->n; i++) {
        dt[i].hash = fnv1a(docs->docs[i].key);
        for (size_t j = 0; j < dt[i].n; j++)
            if (dt[i].ids[j] < 0 || dt[i].ids[j] >= b->vocab)
                return lssar_fail(LSSAR_E_FORMAT, "tokenizer returned id %d outside 0..%d for %s",
                                  dt[i].ids[j], b->vocab - 1, docs->docs[i].name);
    }
    return 0;
}

// 3. The split: which documents are held out.
static int split_docs(corpus_run *b) {
    const corpus_build_opts *o = b->o;
    char **keys = malloc((size_t)(b->docs.n > 0 ? b->docs.n : 1) * sizeof *keys);
    if (!keys) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    for (int i = 0; i < b->docs.n; i++) keys[i] = b->docs.docs[i].key;
    int rc = choose_val(o, b->parts, b->nparts, b->dt, keys, &b->long_val);
    free(keys);
    if (rc) return rc;
    if (b->long_val < o->min_long_val && !o->quiet)
        fprintf(stderr, "lssar data: warning: val holds %d documents of >= %d tokens, fewer than the %d "
                "wanted for 16x extrapolation at T = 1024; add corpora (--corpus all gives more) or lower "
                "--min-long-val\n", b->long_val, o->long_tokens, o->min_long_val);
    return 0;
}

enum { TMPN = 1 << 16 };   // tokens converted to uint16 at a time

// 4a. val.bin: held-out documents in corpus order, each preceded by EOT; where each lies goes to
// b->vdocs.
static int write_val(corpus_run *b, uint16_t *tmp) {
    const corpus_docs *docs = &b->docs;
    char path[4096];
    shard_writer w;
    corpus_path(path, sizeof path, "%s/val.bin", b->o->out_dir);
    int rc = shard_writer_open(&w, path, 1, b->vocab);
    if (rc) return rc;
    for (int i = 0; i < docs->n && !rc; i++) {
        if (!b->dt[i].val) continue;
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", docs->docs[i].name);
        cJSON_AddNumberToObject(e, "start", (double)(w.n + 1));   // first token after the EOT
        cJSON_AddNumberToObject(e, "tokens", (double)b->dt[i].n);
        cJSON_AddNumberToObject(e, "bytes", (double)docs->docs[i].len);
        cJSON_AddItemToArray(b->vdocs, e);
        rc = write_doc(&w, b->eot, &b->dt[i], tmp, TMPN);
        b->vn++; b->vb += docs->docs[i].len;
    }
    b->vt = (double)w.n;
    if (rc || (rc = shard_writer_close(&w))) {
        if (rc && w.af.f) shard_writer_abort(&w);
        return rc;
    }
    if (b->vn == 0 && !b->o->quiet)
        fprintf(stderr, "lssar data: warning: no document was held out (val.bin is empty): give more than "
                "one document\n");
    return 0;
}

// A closed shard's entry of the manifest: file, tokens, sha256.
static int add_shard(corpus_run *b, const char *path, size_t n) {
    char hex[65];
    int rc = sha256_file_hex(path, hex);
    if (rc) return rc;
    cJSON *s = cJSON_CreateObject();
    const char *base = strrchr(path, '/');
    cJSON_AddStringToObject(s, "file", base ? base + 1 : path);
    cJSON_AddNumberToObject(s, "tokens", (double)n);
    cJSON_AddStringToObject(s, "sha256", hex);
    cJSON_AddItemToArray(b->shards, s);
    return 0;
}

// 4b. train_NNN.bin: the rest, in a seeded shuffle so consecutive tokens mix the corpora; a shard
// closes when the next document would overflow it. Shards of an earlier, larger build go.
static int write_train(corpus_run *b, uint16_t *tmp) {
    const corpus_build_opts *o = b->o;
    int *train = malloc((size_t)(b->docs.n > 0 ? b->docs.n : 1) * sizeof *train);
    if (!train) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    int ntrain = 0;
    for (int i = 0; i < b->docs.n; i++) if (!b->dt[i].val) train[ntrain++] = i;
    lssar_rng rng;
    lssar_rng_seed(&rng, o->seed);
    for (int i = ntrain - 1; i > 0; i--) {
        int j = (int)lssar_rng_below(&rng, (uint64_t)i + 1), t = train[i];
        train[i] = train[j]; train[j] = t;
    }
    char path[4096];
    shard_writer w;
    int open_shard = 0, rc = 0;
    for (int k = 0; k <= ntrain && !rc; k++) {
        int i = k < ntrain ? train[k] : -1;
        if (open_shard && (i < 0 || w.n + 1 + b->dt[i].n > (size_t)o->shard_tokens)) {
            size_t n = w.n;
            if ((rc = shard_writer_close(&w))) break;
            open_shard = 0;
            if ((rc = add_shard(b, path, n))) break;
        }
        if (i < 0) break;
        if (!open_shard) {
            corpus_path(path, sizeof path, "%s/train_%03d.bin", o->out_dir, b->nshards++);
            if ((rc = shard_writer_open(&w, path, 1, b->vocab))) break;
            open_shard = 1;
        }
        rc = write_doc(&w, b->eot, &b->dt[i], tmp, TMPN);
        b->tn++; b->tb += b->docs.docs[i].len; b->tt += b->dt[i].n + 1;
    }
    free(train);
    if (rc) {
        if (open_shard) shard_writer_abort(&w);
        return rc;
    }
    remove_stale_shards(o->out_dir, b->nshards);
    return 0;
}

// 5. val_index.json: where each held-out document lies in val.bin.
static int write_val_index(corpus_run *b) {
    cJSON *vindex = cJSON_CreateObject();
    cJSON_AddStringToObject(vindex, "file", "val.bin");
    cJSON_AddStringToObject(vindex, "tokenizer", b->o->tokenizer);
    cJSON_AddNumberToObject(vindex, "eot", b->eot);
    cJSON_AddStringToObject(vindex, "layout", "each document is preceded by one EOT token; start is the "
                            "position of its first token, tokens excludes the EOT");
    cJSON_AddItemToObject(vindex, "documents", b->vdocs);
    b->vdocs = NULL;
    char path[4096];
    corpus_path(path, sizeof path, "%s/val_index.json", b->o->out_dir);
    int rc = lssar_write_json(path, vindex);
    cJSON_Delete(vindex);
    return rc;
}

// The manifest's "corpora": each one's source, licence and its documents, bytes and tokens by split.
static void manifest_corpora(corpus_run *b, cJSON *man) {
    cJSON *cj = cJSON_AddArrayToObject(man, "corpora");
    for (int c = 0; c < b->nparts; c++) {
        corpus_part *p = &b->parts[c];
        double s[2][3] = {{0}};   // [train/val][documents, bytes, tokens]
        for (int i = 0; i < p->count; i++) {
            int d = p->first + i, v = b->dt[d].val;
            s[v][0]++; s[v][1] += b->docs.docs[d].len; s[v][2] += b->dt[d].n + 1;
        }
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", p->info->name);
        cJSON_AddStringToObject(e, "title", p->info->title);
        cJSON_AddStringToObject(e, "source", p->info->source);
        cJSON_AddStringToObject(e, "licence", p->info->licence);
        if (p->info->held_out) cJSON_AddBoolToObject(e, "held_out", 1);
        if (p->packages) { cJSON_AddItemToObject(e, "packages", p->packages); p->packages = NULL; }
        else cJSON_AddStringToObject(e, "path", b->o->text_path);
        cJSON_AddItemToObject(e, "all", split_stats(s[0][0] + s[1][0], s[0][1] + s[1][1], s[0][2] + s[1][2]));
        cJSON_AddItemToObject(e, "train", split_stats(s[0][0], s[0][1], s[0][2]));
        cJSON_AddItemToObject(e, "val", split_stats(s[1][0], s[1][1], s[1][2]));
        cJSON_AddItemToArray(cj, e);
    }
}

// The manifest's "split": its rule and parameters.
static void manifest_split(const corpus_run *b, cJSON *man) {
    const corpus_build_opts *o = b->o;
    cJSON *sp = cJSON_AddObjectToObject(man, "split");
    cJSON_AddStringToObject(sp, "rule", "whole documents; an evaluation-only corpus (mobydick) entirely; per "
                            "other corpus, long documents first then short, each group in the order of a "
                            "hash of the document key, until val_frac of the corpus's tokens (at most half "
                            "its documents); then more long documents, from the corpus with the smallest "
                            "held-out share while it stays within val_max_frac, until min_long_val long "
                            "documents are held out; documents sharing a key (the same Bible book in kjv and "
                            "web) are held out together");
    cJSON_AddNumberToObject(sp, "val_frac", o->val_frac);
    cJSON_AddNumberToObject(sp, "val_max_frac", o->val_max_frac);
    cJSON_AddNumberToObject(sp, "long_tokens", o->long_tokens);
    cJSON_AddNumberToObject(sp, "min_long_val", o->min_long_val);
    cJSON_AddNumberToObject(sp, "long_val_documents", b->long_val);
    cJSON_AddNumberToObject(sp, "train_order_seed", (double)o->seed);
}

// The manifest's "val": its figures and the hashes of val.bin and val_index.json.
static int manifest_val(const corpus_run *b, cJSON *man) {
    char path[4096], hex[65];
    cJSON *vj = split_stats(b->vn, b->vb, b->vt);
    cJSON_AddItemToObject(man, "val", vj);
    cJSON_AddNumberToObject(vj, "long_documents", b->long_val);
    cJSON_AddStringToObject(vj, "file", "val.bin");
    corpus_path(path, sizeof path, "%s/val.bin", b->o->out_dir);
    int rc = sha256_file_hex(path, hex);
    if (rc) return rc;
    cJSON_AddStringToObject(vj, "sha256", hex);
    cJSON_AddStringToObject(vj, "index", "val_index.json");
    corpus_path(path, sizeof path, "%s/val_index.json", b->o->out_dir);
    if ((rc = sha256_file_hex(path, hex))) return rc;
    cJSON_AddStringToObject(vj, "index_sha256", hex);
    return 0;
}

// 6. manifest.json: the tokenizer, the layout, the corpora, the split, the shards and their hashes.
static int write_manifest(corpus_run *b) {
    cJSON *man = cJSON_CreateObject();
    cJSON_AddStringToObject(man, "format", "lssar-corpus-1");
    cJSON *tj = cJSON_AddObjectToObject(man, "tokenizer");
    cJSON_AddStringToObject(tj, "name", b->o->tokenizer);
    cJSON_AddNumberToObject(tj, "vocab_size", b->vocab);
    cJSON_AddNumberToObject(tj, "eot", b->eot);
    cJSON_AddStringToObject(man, "dtype", "uint16");
    cJSON_AddStringToObject(man, "layout", "llm.c shards (256 int32 header, then uint16 tokens); every "
                            "document is preceded by one EOT token");
    manifest_corpora(b, man);
    manifest_split(b, man);
    cJSON *trj = split_stats(b->tn, b->tb, b->tt);
    cJSON_AddItemToObject(trj, "shards", b->shards);
    b->shards = NULL;
    cJSON_AddItemToObject(man, "train", trj);
    int rc = manifest_val(b, man);
    char path[4096];
    corpus_path(path, sizeof path, "%s/manifest.json", b->o->out_dir);
    if (!rc) rc = lssar_write_json(path, man);
    cJSON_Delete(man);
    return rc;
}

// 4-6: the shards, val_index.json and manifest.json.
static int write_outputs(corpus_run *b) {
    int rc = lssar_mkdirs(b->o->out_dir);
    if (rc) return rc;
    uint16_t *tmp = malloc(TMPN * sizeof *tmp);
    b->vdocs = cJSON_CreateArray();
    b->shards = cJSON_CreateArray();
    if (!tmp) rc = lssar_fail(LSSAR_E_NOMEM, "out of memory");
    if (!rc) rc = write_val(b, tmp);
    if (!rc) rc = write_train(b, tmp);
    free(tmp);
    if (!rc) rc = write_val_index(b);
    if (!rc) rc = write_manifest(b);
    return rc;
}

int corpus_build(const corpus_build_opts *o) {
    int rc = check_opts(o);
    if (rc) return rc;
    corpus_run *b = calloc(1, sizeof *b);
    if (!b) return lssar_fail(LSSAR_E_NOMEM, "out of memory");
    b->o = o;
    rc = open_sources(b);
    if (!rc) rc = load_docs(b);
    if (!rc) rc = tokenize_docs(b);
    if (!rc) rc = split_docs(b);
    if (!rc) rc = write_outputs(b);
    if (!rc && !o->quiet)
        fprintf(stderr, "lssar data: wrote %s: train %.0f documents / %.0f tokens in %d shard%s, val %.0f "
                "documents / %.0f tokens (%d with >= %d tokens)\n", o->out_dir, b->tn, b->tt,
                b->nshards, b->nshards == 1 ? "" : "s", b->vn, b->vt, b->long_val, o->long_tokens);
    cJSON_Delete(b->shards); cJSON_Delete(b->vdocs);
    if (b->dt) for (int i = 0; i < b->docs.n; i++) free(b->dt[i].ids);
    free(b->dt);
    corpus_docs_free(&b->docs);
    lssar_tokenizer_free(b->tok);
    for (int c = 0; c < b->nparts; c++) cJSON_Delete(b->parts[c].packages);
    free(b);
    return rc;
}
