// fuzz_corpus.c - the corpus files `lssar data build` writes and the experiments read:
// val_index.json (src/exp/docwin.c: exp_docs_load, then the windows of several lengths) and
// manifest.json (src/exp/common.c: exp_manifest_vocab, exp_manifest_hash). The same input is
// tried as both. manifest.json is read from a folder, so it is written to a private temporary
// folder (made once, removed at exit).
#include <sys/stat.h>
#include "fuzz_common.h"
#include "exp/common.h"
#include "exp/docwin.h"

static char dir[64], manifest[96];

static void cleanup(void) { unlink(manifest); rmdir(dir); }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/lssar-fuzz-XXXXXX", tmp && *tmp && strlen(tmp) < 40 ? tmp : "/tmp");
    if (!mkdtemp(dir)) { perror("mkdtemp"); exit(1); }
    snprintf(manifest, sizeof manifest, "%s/manifest.json", dir);
    atexit(cleanup);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[64];
    int fd = fuzz_memfile(data, size, path);
    exp_docs d;
    if (exp_docs_load(path, &d) == 0) {
        static const int T[] = {1, 7, 128, 4096};
        for (int k = 0; k < 4; k++) {
            size_t *starts = NULL;
            int n = 0;
            if (exp_doc_windows(&d, T[k], 64, &starts, &n) == 0) {
                if (n < 0 || n > 64) abort();
                for (int i = 0; i < n; i++) fuzz_touch(&starts[i], sizeof *starts);
                free(starts);
            }
        }
        for (int i = 0; i < d.n; i++) fuzz_touch(d.name[i], strlen(d.name[i]));
        exp_docs_free(&d);
    }
    close(fd);
    FILE *f = fopen(manifest, "wb");
    if (!f) { perror(manifest); abort(); }
    fwrite(data, 1, size, f);
    fclose(f);
    int v = exp_manifest_vocab(dir);
    (void)v;
    char hex[65];
    exp_manifest_hash(dir, hex);
    if (strlen(hex) != 64 && strcmp(hex, "none")) abort();
    return 0;
}
