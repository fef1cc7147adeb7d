// names.c - attention kind and length-normalisation names for the CLI, checkpoints and reports.
#include <string.h>
#include "lssar.h"
#include "core/util.h"

// Indexed by lssar_attn_kind (the values are the checkpoint format: append only).
static const char *const names[] = {"softmax", "ssmax", "lssa", "lssar", "sigmoid", "relu"};
#define N_KINDS (int)(sizeof names / sizeof names[0])

const char *lssar_attn_name(lssar_attn_kind kind) {
    return (unsigned)kind < (unsigned)N_KINDS ? names[kind] : "unknown";
}

int lssar_attn_parse(const char *name, lssar_attn_kind *out) {
    if (!name || !out) return lssar_fail(LSSAR_E_NULL, "lssar_attn_parse: NULL argument");
    for (int i = 0; i < N_KINDS; i++)
        if (!strcmp(name, names[i])) { *out = (lssar_attn_kind)i; return 0; }
    return lssar_fail(LSSAR_E_KIND, "attention kind '%s': use softmax, ssmax, lssa, lssar, sigmoid or relu", name);
}

static const char *const len_norm_names[] = {"train", "row"};

const char *lssar_len_norm_name(lssar_len_norm ln) {
    return (unsigned)ln < 2 ? len_norm_names[ln] : "unknown";
}

int lssar_len_norm_parse(const char *name, lssar_len_norm *out) {
    if (!name || !out) return lssar_fail(LSSAR_E_NULL, "lssar_len_norm_parse: NULL argument");
    for (int i = 0; i < 2; i++)
        if (!strcmp(name, len_norm_names[i])) { *out = (lssar_len_norm)i; return 0; }
    return lssar_fail(LSSAR_E_ARG, "length normalisation '%s': use train or row", name);
}
