// names.c - attention kind names for the CLI, checkpoints and reports.
#include <string.h>
#include "lssar.h"

static const char *const names[] = {"softmax", "ssmax", "lssa", "lssar"};

const char *lssar_attn_name(lssar_attn_kind kind) {
    return (unsigned)kind < 4 ? names[kind] : "unknown";
}

int lssar_attn_parse(const char *name) {
    for (int i = 0; name && i < 4; i++)
        if (!strcmp(name, names[i])) return i;
    return -1;
}
