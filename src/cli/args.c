// args.c - the shared flag parser; see args.h.
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "args.h"
#include "core/dist.h"
#include "attn/flash.h"
#include "model/gpt.h"

int args_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "lssar %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 2;
}

static const char *type_hint(arg_type t) {
    switch (t) {
    case ARG_INT: return "N";
    case ARG_U64: return "N";
    case ARG_FLOAT: return "X";
    case ARG_STR: return "S";
    default: return "";
    }
}

static void print_help(const char *cmd, const char *about, const arg_spec *s) {
    printf("usage: lssar %s [flags]\n\n%s\n\nflags:\n", cmd, about);
    for (; s->name; s++) {
        char left[64];
        snprintf(left, sizeof left, "--%s %s", s->name, type_hint(s->type));
        printf("  %-24s %s", left, s->help ? s->help : "");
        if (s->required) printf(" (required)");
        else switch (s->type) {
            case ARG_INT: printf(" [default %d]", *(int *)s->dst); break;
            case ARG_U64: printf(" [default %llu]", (unsigned long long)*(uint64_t *)s->dst); break;
            case ARG_FLOAT: printf(" [default %g]", *(float *)s->dst); break;
            case ARG_STR: if (*(const char **)s->dst) printf(" [default %s]", *(const char **)s->dst); break;
            default: break;
        }
        printf("\n");
    }
    printf("  %-24s %s\n", "--help", "show this help");
}

static int set_value(const char *cmd, arg_spec *s, const char *v) {
    char *end;
    errno = 0;
    switch (s->type) {
    case ARG_INT: {
        long x = strtol(v, &end, 10);
        if (*v == 0 || *end || errno || x < -2147483647L || x > 2147483647L)
            return args_error(cmd, "--%s expects an integer, got '%s'", s->name, v);
        *(int *)s->dst = (int)x; return 0;
    }
    case ARG_U64: {
        unsigned long long x = strtoull(v, &end, 10);
        if (*v == 0 || *v == '-' || *end || errno)
            return args_error(cmd, "--%s expects a non-negative integer, got '%s'", s->name, v);
        *(uint64_t *)s->dst = x; return 0;
    }
    case ARG_FLOAT: {
        double x = strtod(v, &end);
        if (*v == 0 || *end || errno || !isfinite(x))
            return args_error(cmd, "--%s expects a number, got '%s'", s->name, v);
        *(float *)s->dst = (float)x; return 0;
    }
    case ARG_STR: *(const char **)s->dst = v; return 0;
    default: return 0;
    }
}

int args_parse(const char *cmd, const char *about, arg_spec *specs, int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { print_help(cmd, about, specs); return 0; }
        if (strncmp(a, "--", 2) != 0)
            return args_error(cmd, "unexpected argument '%s': flags start with -- (see lssar %s --help)", a,
                              cmd);
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        arg_spec *s = specs;
        for (; s->name; s++) if (strlen(s->name) == len && !strncmp(s->name, name, len)) break;
        if (!s->name)
            return args_error(cmd, "unknown flag --%.*s (see lssar %s --help)", (int)len, name, cmd);
        s->seen = 1;
        if (s->type == ARG_BOOL) {
            if (eq) return args_error(cmd, "--%s takes no value", s->name);
            *(int *)s->dst = 1;
            continue;
        }
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!v) return args_error(cmd, "--%s needs a value (see lssar %s --help)", s->name, cmd);
        if (set_value(cmd, s, v)) return 2;
    }
    for (arg_spec *s = specs; s->name; s++)
        if (s->required && !s->seen)
            return args_error(cmd, "missing required flag --%s (see lssar %s --help)", s->name, cmd);
    return -1;
}

int args_int_list(const char *cmd, const char *flag, const char *s, int *out, int max) {
    int n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x <= 0 || x > 1 << 30 || (*end && *end != ',')) {
            args_error(cmd, "--%s expects positive integers separated by commas, got '%s'", flag, s);
            return -1;
        }
        if (n == max) { args_error(cmd, "--%s: at most %d values", flag, max); return -1; }
        out[n++] = (int)x;
        p = *end ? end + 1 : end;
    }
    if (n == 0) { args_error(cmd, "--%s is empty", flag); return -1; }
    return n;
}

int args_fail_inputs(const char *cmd, const char *model, const char *data) {
    const char *msg = lssar_errmsg();
    if (strstr(msg, model) || strstr(msg, data)) fprintf(stderr, "lssar %s: %s\n", cmd, msg);
    else fprintf(stderr, "lssar %s: --model %s, --data %s: %s\n", cmd, model, data, msg);
    return 1;
}

int args_device(const char *cmd, const char *name, lssar_device *out) {
    int gpus = lssar_cuda_device_count();
    if (name && !strcmp(name, "auto")) {   // the GPU when there is one; else the CPU, said once
        *out = gpus > 0 ? LSSAR_DEVICE_CUDA : LSSAR_DEVICE_CPU;
        if (gpus == 0)
            fprintf(stderr, "lssar %s: no CUDA GPU found (%s); running on the CPU\n", cmd,
                    LSSAR_HAVE_CUDA ? "none visible to the CUDA runtime" : "this build has no CUDA backend");
        return 0;
    }
    if (lssar_device_parse(name, out))
        return args_error(cmd, "--device '%s': use cpu, cuda or auto", name ? name : "");
    if (*out == LSSAR_DEVICE_CUDA && gpus == 0)
        return args_error(cmd, "--device cuda: %s; use --device cpu (or auto)",
                          LSSAR_HAVE_CUDA ? "no CUDA GPU found (none visible to the CUDA runtime)"
                                          : "this build has no CUDA backend (rebuild where nvcc is "
                                            "installed)");
    return 0;
}

int args_attn_kind(const char *cmd, const char *name, lssar_attn_kind *out) {
    if (!name || lssar_attn_parse(name, out))
        return args_error(cmd, "--attn: %s", name ? lssar_errmsg() : "missing");
    return 0;
}

int args_rope_temp(const char *cmd, float rope_base, int temp_d) {
    if (!gpt_rope_base_ok(rope_base))
        return args_error(cmd,
                          "--rope-base must be a finite base > 1 (GPT-NeoX and the paper use 10000), got %g",
                          (double)rope_base);
    if (!attn_temp_d_ok(temp_d))
        return args_error(
            cmd, "--temp-d must be 0 (ln of the head size, the paper) or a head size >= 2, got %d", temp_d);
    return 0;
}

int args_model_check(const char *cmd, const args_model_flags *f, gpt_config *m) {
    if (args_device(cmd, f->device, &m->device)) return 2;
    int ps = gpt_pos_parse(f->pos);
    if (ps < 0) return args_error(cmd, "--pos '%s' is unknown: use rope, learned or none", f->pos);
    m->pos = (lssar_pos)ps;
    if (args_rope_temp(cmd, m->rope_base, m->temp_d)) return 2;
    m->tied = !f->untied;   // the flag names the exception, the config the default
    return 0;
}

int cli_alone_under_ranks(const char *cmd) {
    fprintf(stderr,
            "lssar %s: runs in one process; under mpirun only train, eval, extrapolate, symreg, orbits "
            "simulate and orbits newton share their work over the %d ranks (docs/DISTRIBUTED.md): run it "
            "without mpirun\n",
            cmd, lssar_dist_size());
    lssar_dist_error_is_shared();
    return 2;
}
