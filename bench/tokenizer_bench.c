// tokenizer_bench.c - GPT-2 encoding throughput of lssar: one thread on one long text, and many
// documents encoded in parallel (OpenMP) with 1, 2, ... threads. Run by bench/tokenizer.sh.
//
//   build/bench/tokenizer_bench FILE [--reps N] [--threads 1,2] [--doc-bytes B] [--json OUT]
//
// Prints one line per measurement: "lssar <what> <MB/s> ..." (MB = 10^6 bytes of input text).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>
#include <cJSON.h>
#include "lssar.h"
#include "core/util.h"

static double encode_once(const lssar_tokenizer *t, const char *s, size_t len, size_t *ntok) {
    int32_t *ids; size_t n;
    double t0 = lssar_now();
    if (lssar_encode(t, s, len, 0, &ids, &n)) { fprintf(stderr, "encode: %s\n", lssar_errmsg()); exit(1); }
    double dt = lssar_now() - t0;
    free(ids);
    *ntok = n;
    return dt;
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help")) {
        fprintf(stderr, "usage: tokenizer_bench FILE [--reps N] [--threads 1,2] [--doc-bytes B] [--json OUT]\n");
        return 2;
    }
    const char *path = argv[1], *threads_s = "1,2", *json_out = NULL;
    int reps = 3;
    size_t doc_bytes = 8192;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads_s = argv[i + 1];
        else if (!strcmp(argv[i], "--doc-bytes")) doc_bytes = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--json")) json_out = argv[i + 1];
        else { fprintf(stderr, "tokenizer_bench: unknown flag %s\n", argv[i]); return 2; }
    }
    if (reps < 1 || doc_bytes < 64) { fprintf(stderr, "tokenizer_bench: --reps >= 1, --doc-bytes >= 64\n"); return 2; }
    char *text; size_t len;
    if (lssar_read_file(path, &text, &len)) { fprintf(stderr, "tokenizer_bench: %s\n", lssar_errmsg()); return 1; }

    double t0 = lssar_now();
    lssar_tokenizer *t;
    if (lssar_tokenizer_open("gpt2", &t)) { fprintf(stderr, "tokenizer_bench: %s\n", lssar_errmsg()); return 1; }
    double load_ms = (lssar_now() - t0) * 1e3;
    cJSON *js = cJSON_CreateObject();
    cJSON_AddNumberToObject(js, "bytes", (double)len);
    cJSON_AddNumberToObject(js, "load_ms", load_ms);
    printf("lssar load %.1f ms (encoder.json + vocab.bpe + PCRE2 JIT)\n", load_ms);

    // Single thread, the whole text as one document: best of reps.
    size_t ntok = 0;
    double best = 1e30;
    for (int r = 0; r < reps; r++) { double dt = encode_once(t, text, len, &ntok); if (dt < best) best = dt; }
    printf("lssar 1-thread %.2f MB/s (%zu bytes -> %zu tokens, best of %d: %.3f s)\n", len / best / 1e6, len, ntok, reps, best);
    printf("RESULT lssar 1 %.2f %zu %.1f\n", len / best / 1e6, ntok, load_ms);
    cJSON_AddNumberToObject(js, "tokens", (double)ntok);
    cJSON_AddNumberToObject(js, "single_thread_MBps", len / best / 1e6);

    // Many documents: cut the text at line ends into pieces of about doc_bytes; encode them in
    // parallel, one document per task (what the corpus builder does).
    size_t ndoc = 0, cap = len / doc_bytes + 2;
    size_t *start = malloc(sizeof(size_t) * (cap + 1));
    for (size_t p = 0; p < len && ndoc < cap;) {
        start[ndoc++] = p;
        size_t q = p + doc_bytes < len ? p + doc_bytes : len;
        while (q < len && text[q - 1] != '\n' && text[q - 1] != ' ') q++;  // end at a space or line end
        p = q;
    }
    start[ndoc] = len;
    cJSON *scal = cJSON_AddArrayToObject(js, "threads");
    double base = 0;
    for (const char *p = threads_s; *p;) {
        int nt = atoi(p);
        if (nt < 1) break;
        double bt = 1e30;
        for (int r = 0; r < reps; r++) {
            double t1 = lssar_now();
#pragma omp parallel for schedule(dynamic, 4) num_threads(nt)
            for (size_t d = 0; d < ndoc; d++) {
                int32_t *ids; size_t n;
                if (lssar_encode(t, text + start[d], start[d + 1] - start[d], 0, &ids, &n) == 0) free(ids);
            }
            double dt = lssar_now() - t1;
            if (dt < bt) bt = dt;
        }
        if (!base) base = bt;
        printf("lssar %d-thread docs %.2f MB/s (%zu documents, %.0f bytes on average, speedup %.2fx)\n", nt, len / bt / 1e6, ndoc,
               (double)len / ndoc, base / bt);
        printf("RESULT lssar-docs %d %.2f %zu %.2f\n", nt, len / bt / 1e6, ndoc, base / bt);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "threads", nt);
        cJSON_AddNumberToObject(o, "MBps", len / bt / 1e6);
        cJSON_AddNumberToObject(o, "speedup", base / bt);
        cJSON_AddItemToArray(scal, o);
        p = strchr(p, ',');
        if (!p) break;
        p++;
    }
    if (json_out) {
        char *s = cJSON_Print(js);
        FILE *f = fopen(json_out, "w");
        if (f) { fputs(s, f); fputc('\n', f); fclose(f); }
        free(s);
    }
    cJSON_Delete(js);
    free(start); free(text);
    lssar_tokenizer_free(t);
    return 0;
}
