/*
 * llmc.h - llm.c's GPT-2 model file (its gpt2_124M.bin), read and written.
 *
 * Layout: a header of 256 int32 (little-endian): [0] magic 20240326, [1] version (3: float32
 * parameters; 5: bfloat16, read only), [2] maxT, [3] V, [4] L, [5] NH, [6] C, [7] Vp (V padded up
 * to a multiple of 128, as llm.c pads 50257 to 50304); then the parameters, each kind for all
 * layers before the next: wte (Vp, C), wpe (maxT, C), ln1w (L, C), ln1b (L, C), qkvw (L, 3C, C),
 * qkvb (L, 3C), attprojw (L, C, C), attprojb (L, C), ln2w (L, C), ln2b (L, C), fcw (L, 4C, C),
 * fcb (L, 4C), fcprojw (L, C, 4C), fcprojb (L, C), lnfw (C), lnfb (C). Rows V..Vp-1 of wte are
 * padding (written as 0, dropped on reading).
 *
 * That is GPT-2 exactly, so only lssar models of GPT-2's shape convert: softmax attention,
 * learned positions, tied head, one token channel. lssar's weights are (out, in) like llm.c's, so
 * each tensor is copied as it is.
 */
#ifndef LSSAR_MODEL_LLMC_H
#define LSSAR_MODEL_LLMC_H

#include "model/gpt.h"

#define LLMC_MAGIC 20240326
#define LLMC_VERSION_F32 3
#define LLMC_VERSION_BF16 5

/* Write m to path atomically (version 3). LSSAR_E_UNSUPPORTED, naming what differs, for a model
   of another shape than GPT-2's. */
int llmc_save(const gpt *m, const char *path);
/* A new CPU model from an llm.c file (version 3 or 5); errors name the file and the problem. */
int llmc_load(const char *path, gpt **out);

#endif
