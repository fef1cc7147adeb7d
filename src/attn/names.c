// names.c - attention kind names for the CLI, checkpoints and reports.
#include <string.h>
#include "lssar.h"
#include "core/util.h"

static const char *const names[] = {"softmax", "ssmax", "lssa", "lssar"};

const char *lssar_attn_name(lssar_attn_kind kind) {
    return (unsigned)kind < 4 ? names[kind] : "unknown";
}

int lssar_attn_parse(const char *name, lssar_attn_kind *out) {
    if (!name || !out) return lssar_fail(LSSAR_E_NULL, "lssar_attn_parse: NULL argument");
    for (int i = 0; i < 4; i++)
        if (!strcmp(name, names[i])) { *out = (lssar_attn_kind)i; return 0; }
    return lssar_fail(LSSAR_E_KIND, "attention kind '%s': use softmax, ssmax, lssa or lssar", name);
}
