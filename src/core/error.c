// error.c - error codes, their names, and the per-thread detail message.
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "util.h"

static _Thread_local char errmsg[1024];

const char *lssar_strerror(int code) {
    switch (code) {
    case LSSAR_OK: return "success";
    case LSSAR_E_NULL: return "invalid argument: NULL pointer";
    case LSSAR_E_SIZE: return "invalid argument: size out of range (must be > 0)";
    case LSSAR_E_KIND: return "invalid argument: unknown kind";
    case LSSAR_E_P: return "invalid argument: LSSAR power p must be finite and > 0";
    case LSSAR_E_SSMAX: return "invalid argument: SSMax needs its per-head scales (ssmax_s)";
    case LSSAR_E_NOMEM: return "out of memory";
    case LSSAR_E_IO: return "input/output error";
    case LSSAR_E_FORMAT: return "malformed or damaged file";
    case LSSAR_E_ARG: return "invalid argument";
    case LSSAR_E_NAN: return "non-finite value (NaN or infinity)";
    case LSSAR_E_UNSUPPORTED: return "not supported";
    default: return "unknown error code";
    }
}

const char *lssar_errmsg(void) { return errmsg; }

int lssar_fail(int code, const char *fmt, ...) {
    // Format into a copy first: callers often wrap the previous message, passing lssar_errmsg()
    // (this very buffer) as an argument, and vsnprintf into its own source is undefined.
    char buf[sizeof errmsg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    memcpy(errmsg, buf, sizeof errmsg);
    return code;
}
