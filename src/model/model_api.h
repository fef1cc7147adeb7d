/*
 * model_api.h - inside the library: what the public lssar_model handle (include/lssar.h) holds,
 * so higher layers (src/train: lssar_model_eval_shard, lssar_train) can implement public
 * functions over the gpt model without their own copy of the handle.
 */
#ifndef LSSAR_MODEL_API_H
#define LSSAR_MODEL_API_H

#include <stdint.h>
#include "lssar.h"
#include "model/gpt.h"

struct lssar_model {
    gpt *g;
    int64_t step;     // optimizer steps it was trained for
};

/* A handle that owns g (freed by lssar_model_free). On failure g is left to the caller. */
int model_api_wrap(gpt *g, int64_t step, lssar_model **out);

#endif
