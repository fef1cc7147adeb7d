/*
 * tiny.c - the public API of liblssar end to end, using only <lssar.h>:
 * create a tiny LSSAR model from a config, score a few tokens, save it, load it back, check the
 * copy scores the same, and decode greedily through the KV cache.
 *
 *   cc examples/tiny.c $(pkg-config --cflags --libs lssar) -o tiny && ./tiny DIR
 *
 * DIR receives DIR/model.safetensors (the format `lssar train` writes, so `lssar eval` and
 * `lssar sample --model DIR` read it). Exit 0 on success; any failure prints lssar_errmsg().
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <lssar.h>

#define V 16          /* vocabulary */
#define T 16          /* window length */
#define NEW 8         /* tokens to decode */

static int fail(const char *what, int rc) {
    fprintf(stderr, "tiny: %s: %s (%s)\n", what, lssar_strerror(rc), lssar_errmsg());
    return 1;
}

/* Greedy decoding: feed the prompt at once, then one position per step; ids into out. */
static int greedy(lssar_model *m, const uint16_t *prompt, int np, uint16_t *out) {
    lssar_decoder *d = NULL;
    float logits[V];
    int rc = lssar_decoder_create(m, np + NEW, &d);
    if (!rc) rc = lssar_decoder_feed(d, prompt, np, logits);
    for (int i = 0; !rc && i < NEW; i++) {
        int best = 0;
        for (int v = 1; v < V; v++) if (logits[v] > logits[best]) best = v;
        out[i] = (uint16_t)best;
        if (i + 1 < NEW) rc = lssar_decoder_feed(d, &out[i], 1, logits);
    }
    if (!rc && lssar_decoder_len(d) != np + NEW - 1) rc = LSSAR_E_ARG;
    lssar_decoder_free(d);
    return rc;
}

/* The same loss as lssar_model_loss, from the decoder's next-position logits one step at a time. */
static int decoded_loss(lssar_model *m, const uint16_t *w, double *loss) {
    lssar_decoder *d = NULL;
    float logits[V];
    double sum = 0;
    int rc = lssar_decoder_create(m, T, &d);
    for (int t = 0; !rc && t < T; t++) {
        if ((rc = lssar_decoder_feed(d, &w[t], 1, logits))) break;
        double mx = logits[0], z = 0;
        for (int v = 1; v < V; v++) if (logits[v] > mx) mx = logits[v];
        for (int v = 0; v < V; v++) z += exp(logits[v] - mx);
        sum += log(z) + mx - logits[w[t + 1]];
    }
    lssar_decoder_free(d);
    *loss = sum / T;
    return rc;
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s DIR\n", argv[0]); return 2; }
    const char *dir = argv[1];
    printf("liblssar %s (header %s)\n", lssar_version(), LSSAR_VERSION);
    int rc = lssar_set_threads(1);
    if (rc) return fail("lssar_set_threads", rc);
    printf("threads %d\n", lssar_get_threads());

    lssar_model_config c;
    lssar_model_defaults(&c);
    c.vocab = V; c.layers = 1; c.heads = 2; c.dim = 16; c.max_seq = 32;
    c.pos = LSSAR_POS_ROPE; c.attn = LSSAR_ATTN_LSSAR; c.p = 15.0f;
    lssar_model *m = NULL;
    if ((rc = lssar_model_create(&c, 1, &m))) return fail("lssar_model_create", rc);
    lssar_model_info info;
    lssar_model_describe(m, &info);
    printf("model %d layers, %d heads, dim %d, vocab %d, %s positions, %s attention (p %g), %zu parameters\n",
           info.layers, info.heads, info.dim, info.vocab, lssar_pos_name(info.pos_kind),
           lssar_attn_name(info.attn), info.p, info.params);

    /* one window of T + 1 tokens: inputs the first T, targets the next T */
    uint16_t w[T + 1];
    for (int i = 0; i <= T; i++) w[i] = (uint16_t)((i * 5 + 3) % V);
    double loss = 0, loss2 = 0;
    if ((rc = lssar_model_loss(m, w, 1, T, &loss))) return fail("lssar_model_loss", rc);
    printf("loss %.6f (uniform guess: ln %d = 2.772589)\n", loss, V);

    if ((rc = lssar_model_save(m, dir))) return fail("lssar_model_save", rc);
    printf("saved %s/model.safetensors\n", dir);
    lssar_model *m2 = NULL;
    if ((rc = lssar_model_load(dir, NULL, &m2))) return fail("lssar_model_load", rc);
    if ((rc = lssar_model_loss(m2, w, 1, T, &loss2))) return fail("lssar_model_loss (loaded)", rc);
    printf("reloaded loss %.6f (%s)\n", loss2, loss2 == loss ? "same" : "DIFFERENT");

    /* a refused swap, to show typed load options and the error message */
    lssar_model *m3 = NULL;
    lssar_load_options as_softmax = {.set_attn = 1, .attn = LSSAR_ATTN_SOFTMAX};
    rc = lssar_model_load(dir, &as_softmax, &m3);
    printf("load as softmax: %s\n", rc == LSSAR_E_ARG && !m3 ? "refused" : "ACCEPTED");

    double dl = 0;
    if ((rc = decoded_loss(m2, w, &dl))) return fail("decoded loss", rc);
    int agree = fabs(dl - loss) < 1e-4;
    printf("decoded loss %.6f (%s the forward pass)\n", dl, agree ? "matches" : "DIFFERS FROM");

    uint16_t prompt[3] = {1, 2, 3}, a[NEW], b[NEW];
    if ((rc = greedy(m, prompt, 3, a))) return fail("decode", rc);
    if ((rc = greedy(m2, prompt, 3, b))) return fail("decode (loaded)", rc);
    printf("greedy:");
    for (int i = 0; i < NEW; i++) printf(" %d", a[i]);
    printf("\ngreedy after reload %s\n", memcmp(a, b, sizeof a) ? "DIFFERENT" : "same");

    /* memory the library hands over is released with lssar_free */
    lssar_tokenizer *tok = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    if ((rc = lssar_tokenizer_byte(&tok)) || (rc = lssar_encode(tok, "hi", 2, 0, &ids, &n))) return fail("byte tokenizer", rc);
    printf("byte tokens of \"hi\": %d %d\n", ids[0], ids[1]);
    lssar_free(ids);
    lssar_tokenizer_free(tok);

    lssar_model_free(m);
    lssar_model_free(m2);
    return loss2 == loss && agree && memcmp(a, b, sizeof a) == 0 ? 0 : 1;
}
