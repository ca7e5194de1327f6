/* err.c -- result codes and messages (SQLite-style: codes + text, never abort). */
#include "nf-base.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int nf__err_set(nf_err * err, int code, const char * fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

int nf__err_prefix(nf_err * err, const char * fmt, ...) {
    if (!err) return NF_ERR_GENERIC;
    char pre[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof(pre), fmt, ap);
    va_end(ap);
    char old[sizeof(err->msg)];
    memcpy(old, err->msg, sizeof(old));
    snprintf(err->msg, sizeof(err->msg), "%s: %s", pre, old);
    return err->code ? err->code : NF_ERR_GENERIC;
}
