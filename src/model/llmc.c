// llmc.c - llm.c's GPT-2 model file; see llmc.h.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "core/util.h"
#include "model/llmc.h"

// The parameter kinds in llm.c's order: lssar's tensor name (%d: the layer) and whether there is
// one per layer.
static const struct { const char *name; int per_layer; } KINDS[] = {
    {"wte.0", 0}, {"wpe", 0},
    {"h.%d.ln_1.weight", 1}, {"h.%d.ln_1.bias", 1},
    {"h.%d.attn.c_attn.weight", 1}, {"h.%d.attn.c_attn.bias", 1},
    {"h.%d.attn.c_proj.weight", 1}, {"h.%d.attn.c_proj.bias", 1},
    {"h.%d.ln_2.weight", 1}, {"h.%d.ln_2.bias", 1},
    {"h.%d.mlp.c_fc.weight", 1}, {"h.%d.mlp.c_fc.bias", 1},
    {"h.%d.mlp.c_proj.weight", 1}, {"h.%d.mlp.c_proj.bias", 1},
    {"ln_f.weight", 0}, {"ln_f.bias", 0}};
enum { NKINDS = sizeof KINDS / sizeof KINDS[0] };

static int padded_vocab(int V) { return (V + 127) / 128 * 128; }

// The index of kind k's tensor of layer l in m (-1 if absent).
static int tensor_of(const gpt *m, int k, int l) {
    char nm[64];
    snprintf(nm, sizeof nm, KINDS[k].name, l);
    return gpt_tensor_index(m, nm);
}

int llmc_save(const gpt *m, const char *path) {
    const gpt_config *c = gpt_get_config(m);
    const char *why = gpt_not_gpt2(c);
    if (why)
        return lssar_fail(LSSAR_E_UNSUPPORTED,
                          "llm.c's model file holds GPT-2 (softmax, learned positions, tied head, one token "
                          "channel): this model cannot be written there, because %s",
                          why);
    const int V = c->vocab, Vp = padded_vocab(V), C = c->dim, L = c->layers;
    int32_t h[256] = {LLMC_MAGIC, LLMC_VERSION_F32, c->max_seq, V, L, c->heads, C, Vp};
    float *buf = malloc((size_t)Vp * C * sizeof(float));   // the largest tensor: wte padded
    if (!buf) return lssar_fail(LSSAR_E_NOMEM, "out of memory writing %s", path);
    lssar_afile a;
    int rc = lssar_afile_open(&a, path);
    if (rc) { free(buf); return rc; }
    if (fwrite(h, sizeof h, 1, a.f) != 1)
        rc = lssar_fail(LSSAR_E_IO, "writing %s failed: %s", path, strerror(errno));
    for (int k = 0; k < NKINDS && !rc; k++)
        for (int l = 0; l < (KINDS[k].per_layer ? L : 1) && !rc; l++) {
            int i = tensor_of(m, k, l);
            if (i < 0) {
                rc = lssar_fail(LSSAR_E_FORMAT, "the model has no tensor for %s", KINDS[k].name);
                break;
            }
            size_t n = gpt_tensor_numel(m, i);
            if ((rc = gpt_read_tensor(m, GPT_BUF_PARAM, i, buf))) break;
            if (k == 0) {   // padding rows
                memset(buf + n, 0, ((size_t)Vp - V) * C * sizeof(float));
                n = (size_t)Vp * C;
            }
            if (fwrite(buf, sizeof(float), n, a.f) != n)
                rc = lssar_fail(LSSAR_E_IO, "writing %s failed: %s (disk full?)", path, strerror(errno));
        }
    free(buf);
    if (rc) { lssar_afile_abort(&a); return rc; }
    return lssar_afile_commit(&a);
}

int llmc_load(const char *path, gpt **out) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return lssar_fail(LSSAR_E_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    int32_t h[256];
    int rc = 0;
    if (fstat(fileno(f), &st) || fread(h, sizeof h, 1, f) != 1)
        rc = lssar_fail(LSSAR_E_FORMAT,
                        "%s is shorter than llm.c's 1024-byte model header: not an llm.c model file", path);
    else if (h[0] != LLMC_MAGIC)
        rc = lssar_fail(LSSAR_E_FORMAT,
                        "%s: magic number %d is not llm.c's model file (%d); a token shard has 20240520",
                        path, h[0], LLMC_MAGIC);
    else if (h[1] != LLMC_VERSION_F32 && h[1] != LLMC_VERSION_BF16)
        rc = lssar_fail(LSSAR_E_FORMAT,
                        "%s: llm.c model version %d; lssar reads 3 (float32) and 5 (bfloat16)", path, h[1]);
    int maxT = h[2], V = h[3], L = h[4], NH = h[5], C = h[6], Vp = h[7];
    if (!rc && (maxT < 1 || V < 1 || V > 65536 || L < 1 || NH < 1 || C < 1 || C % NH || Vp < V || L > 4096 ||
                C > 65536 || maxT > 1 << 20))
        rc = lssar_fail(LSSAR_E_FORMAT, "%s: damaged header (maxT %d, V %d, L %d, NH %d, C %d, Vp %d)", path,
                        maxT, V, L, NH, C, Vp);
    gpt *m = NULL;
    if (!rc) {
        size_t es = h[1] == LLMC_VERSION_F32 ? 4 : 2;
        size_t n = (size_t)Vp * C + (size_t)maxT * C + (size_t)L * (12 * (size_t)C * C + 13 * (size_t)C) +
                   2 * (size_t)C;
        if ((size_t)st.st_size != sizeof h + n * es)
            rc = lssar_fail(LSSAR_E_FORMAT,
                            "%s: the header's shape needs %zu bytes but the file has %lld: truncated or "
                            "damaged",
                            path, sizeof h + n * es, (long long)st.st_size);
        gpt_config cfg = {.layers = L, .heads = NH, .dim = C, .vocab = V, .channels = 1, .max_seq = maxT,
                          .pos = LSSAR_POS_LEARNED, .attn = LSSAR_ATTN_SOFTMAX, .p = 15.0f, .tied = 1,
                          .device = LSSAR_DEVICE_CPU};
        if (!rc) rc = gpt_create_empty(&cfg, &m);
    }
    float *buf = rc ? NULL : malloc((size_t)Vp * C * sizeof(float));
    if (!rc && !buf) rc = lssar_fail(LSSAR_E_NOMEM, "out of memory reading %s", path);
    for (int k = 0; k < NKINDS && !rc; k++)
        for (int l = 0; l < (KINDS[k].per_layer ? L : 1) && !rc; l++) {
            int i = tensor_of(m, k, l);
            size_t n = k == 0 ? (size_t)Vp * C : gpt_tensor_numel(m, i);   // wte: with its padding rows
            if (h[1] == LLMC_VERSION_F32) {
                if (fread(buf, sizeof(float), n, f) != n)
                    rc = lssar_fail(LSSAR_E_IO, "reading %s failed", path);
            } else {   // bfloat16: the upper half of a float32
                uint16_t *b16 = (uint16_t *)buf + n;   // read into the back half, widen forwards
                if (fread(b16, 2, n, f) != n) rc = lssar_fail(LSSAR_E_IO, "reading %s failed", path);
                for (size_t j = 0; !rc && j < n; j++) {
                    uint32_t u = (uint32_t)b16[j] << 16;
                    memcpy(&buf[j], &u, 4);
                }
            }
            if (!rc) rc = gpt_write_tensor(m, GPT_BUF_PARAM, i, buf);   // wte: the first V rows
        }
    fclose(f);
    free(buf);
    if (rc) { gpt_free(m); return rc; }
    *out = m;
    return 0;
}
