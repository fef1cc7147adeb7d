// torch_parity_driver.c - the C side of tests/test_torch_parity.py (which compiles this file
// against the built liblssar.a; it is not a test program by itself). For one model config it
// creates a model, perturbs the parameters away from GPT-2's near-uniform init (so every path
// carries signal), runs forward + backward on a fixed batch with some ignored targets, and writes:
//   OUT/tensors.txt   one line per tensor: name ndim shape0 shape1 numel
//   OUT/params.bin, OUT/grads.bin   float32, tensors concatenated in that order
//   OUT/inputs.bin, OUT/targets.bin   uint16 (B, T, channels)
//   OUT/losses.bin (float32) and OUT/argmax.bin (uint16), (B, T, channels)
//   OUT/result.txt   "loss <value>"
// usage: torch_parity_driver OUT layers heads dim vocab channels max_seq pos attn p tied B T scale [len_norm]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/util.h"
#include "model/gpt.h"

// A library call that returns an error code (0 = success): a failure ends the driver with exit
// status 1 and the library's message (test_torch_parity.py then fails), instead of being ignored.
#define CHECK_OK(call)                                                                    \
    do {                                                                                  \
        if ((call) != 0) {                                                                \
            fprintf(stderr, "%s failed: %s\n", #call, lssar_errmsg());                   \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

static int write_file(const char *dir, const char *name, const void *data, size_t bytes) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    int bad = !f || fwrite(data, 1, bytes, f) != bytes;
    if (f && fclose(f)) bad = 1;   // a write error may only show at the flush
    if (bad) { fprintf(stderr, "cannot write %s\n", path); return 1; }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 15 && argc != 16) {
        fprintf(stderr, "usage: %s OUT layers heads dim vocab channels max_seq pos attn p tied B T scale [len_norm]\n", argv[0]);
        return 2;
    }
    const char *out = argv[1];
    gpt_config c = {.layers = atoi(argv[2]), .heads = atoi(argv[3]), .dim = atoi(argv[4]), .vocab = atoi(argv[5]),
                    .channels = atoi(argv[6]), .max_seq = atoi(argv[7]), .pos = gpt_pos_parse(argv[8]),
                    .p = (float)atof(argv[10]), .tied = atoi(argv[11])};
    if (lssar_attn_parse(argv[9], &c.attn)) { fprintf(stderr, "%s\n", lssar_errmsg()); return 2; }
    if (argc == 16 && lssar_len_norm_parse(argv[15], &c.len_norm)) { fprintf(stderr, "%s\n", lssar_errmsg()); return 2; }
    int B = atoi(argv[12]), T = atoi(argv[13]);
    double scale = atof(argv[14]);
    gpt *m;
    if (gpt_create(&c, 42, &m) || gpt_reserve(m, B, T, 1)) { fprintf(stderr, "%s\n", lssar_errmsg()); return 1; }
    lssar_rng r;
    lssar_rng_seed(&r, 4242);
    size_t np = gpt_num_params(m), off = 0;
    float *params = malloc(np * sizeof(float)), *grads = malloc(np * sizeof(float));
    char path[4096];
    snprintf(path, sizeof path, "%s/tensors.txt", out);
    FILE *tf = fopen(path, "w");
    if (!tf) { fprintf(stderr, "cannot write %s\n", path); return 1; }
    for (int i = 0; i < gpt_num_tensors(m); i++) {
        const char *nm = gpt_tensor_name(m, i);
        size_t k = gpt_tensor_numel(m, i);
        const int *sh = gpt_tensor_shape(m, i);
        fprintf(tf, "%s %d %d %d %zu\n", nm, gpt_tensor_ndim(m, i), sh[0], gpt_tensor_ndim(m, i) > 1 ? sh[1] : 0, k);
        CHECK_OK(gpt_read_tensor(m, GPT_BUF_PARAM, i, params + off));
        int is_ln = strstr(nm, "ln_") != NULL, is_s = strstr(nm, "ssmax") != NULL;
        for (size_t j = 0; j < k; j++) {
            double z = lssar_rng_normal(&r);
            if (is_ln) params[off + j] += (float)(0.1 * z);
            else if (is_s) params[off + j] = (float)(1.0 + 0.3 * z);
            else params[off + j] = (float)(scale * z);
        }
        CHECK_OK(gpt_write_tensor(m, GPT_BUF_PARAM, i, params + off));
        off += k;
    }
    if (fclose(tf)) { fprintf(stderr, "cannot write %s\n", path); return 1; }
    size_t nt = (size_t)B * T * c.channels;
    uint16_t *in = malloc(nt * 2), *tg = malloc(nt * 2), *am = malloc(nt * 2);
    float *losses = malloc(nt * sizeof(float));
    for (size_t i = 0; i < nt; i++) {
        in[i] = (uint16_t)lssar_rng_below(&r, c.vocab);
        tg[i] = lssar_rng_below(&r, 10) == 0 ? GPT_IGNORE : (uint16_t)lssar_rng_below(&r, c.vocab);
    }
    float loss;
    if (gpt_forward(m, in, tg, B, T, &loss) || gpt_zero_grad(m) || gpt_backward(m, 1.0f)) {
        fprintf(stderr, "%s\n", lssar_errmsg());
        return 1;
    }
    CHECK_OK(gpt_get_losses(m, losses));
    CHECK_OK(gpt_get_argmax(m, am));
    off = 0;
    for (int i = 0; i < gpt_num_tensors(m); i++) {
        CHECK_OK(gpt_read_tensor(m, GPT_BUF_GRAD, i, grads + off));
        off += gpt_tensor_numel(m, i);
    }
    int rc = write_file(out, "params.bin", params, np * 4) || write_file(out, "grads.bin", grads, np * 4) ||
             write_file(out, "inputs.bin", in, nt * 2) || write_file(out, "targets.bin", tg, nt * 2) ||
             write_file(out, "losses.bin", losses, nt * 4) || write_file(out, "argmax.bin", am, nt * 2);
    snprintf(path, sizeof path, "%s/result.txt", out);
    FILE *f = fopen(path, "w");
    if (!f) return 1;
    int wbad = fprintf(f, "loss %.9g\n", loss) < 0;
    if (fclose(f) || wbad) { fprintf(stderr, "cannot write %s\n", path); return 1; }
    gpt_free(m);
    free(params); free(grads); free(in); free(tg); free(am); free(losses);
    return rc;
}
