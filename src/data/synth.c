// synth.c - the built-in "repeat" task; see synth.h.
#include <stdlib.h>
#include "shard.h"
#include "synth.h"

int synth_write_repeat(const char *path, const synth_params *sp, size_t tokens, uint64_t seed) {
    if (sp->alphabet < 2 || sp->alphabet > 65534 || sp->min_len < 1 || sp->max_len < sp->min_len)
        return lssar_fail(LSSAR_E_ARG, "synthetic task: need alphabet in 2..65534 and 1 <= "
                          "min_len <= max_len");
    if (tokens == 0) return lssar_fail(LSSAR_E_SIZE, "synthetic task: token count must be > 0");
    shard_writer w;
    int rc = shard_writer_open(&w, path, 1, sp->alphabet + 1);  // end-of-text is id alphabet
    if (rc) return rc;
    lssar_rng rng;
    lssar_rng_seed(&rng, seed);
    size_t cap = 2 * (size_t)sp->max_len + 1;
    uint16_t *doc = malloc(cap * sizeof *doc);  // (2 len + 1)
    if (!doc) { shard_writer_abort(&w); return lssar_fail(LSSAR_E_NOMEM, "out of memory"); }
    size_t written = 0;
    while (written < tokens) {
        int len = sp->min_len + (int)lssar_rng_below(&rng, sp->max_len - sp->min_len + 1);
        for (int i = 0; i < len; i++) doc[i] = doc[len + i] = (uint16_t)lssar_rng_below(&rng, sp->alphabet);
        doc[2 * len] = (uint16_t)sp->alphabet;
        size_t n = 2 * (size_t)len + 1;
        if (n > tokens - written) n = tokens - written;
        if ((rc = shard_writer_append(&w, doc, n))) break;
        written += n;
    }
    free(doc);
    if (rc) { shard_writer_abort(&w); return rc; }
    return shard_writer_close(&w);
}
