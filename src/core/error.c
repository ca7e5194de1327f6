/* error.c -- result codes and messages (SQLite-style: codes + text, never abort). */
#include "nf-impl.h"

#include <stdio.h>
#include <string.h>

static const char * const nf__result_names[NF_RESULT_COUNT] = {
    [NF_OK] = "NF_OK",
    [NF_ERR_GENERIC] = "NF_ERR_GENERIC",
    [NF_ERR_IO] = "NF_ERR_IO",
    [NF_ERR_FORMAT] = "NF_ERR_FORMAT",
    [NF_ERR_CHECKPOINT] = "NF_ERR_CHECKPOINT",
    [NF_ERR_SHAPE] = "NF_ERR_SHAPE",
    [NF_ERR_INPUT] = "NF_ERR_INPUT",
    [NF_ERR_NOMEM] = "NF_ERR_NOMEM",
    [NF_ERR_DEVICE] = "NF_ERR_DEVICE",
    [NF_ERR_UNSUPPORTED] = "NF_ERR_UNSUPPORTED",
    [NF_ERR_PLACEMENT] = "NF_ERR_PLACEMENT",
    [NF_ERR_ARG] = "NF_ERR_ARG",
    [NF_ERR_MISMATCH] = "NF_ERR_MISMATCH",
};

const char * nf_result_name(int code) {
    if (code < 0 || code >= NF_RESULT_COUNT || !nf__result_names[code]) return "NF_ERR_UNKNOWN";
    return nf__result_names[code];
}

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

const char * nf_precision_name(int precision) {
    switch (precision) {
        case NF_PRECISION_EXACT: return "exact-fp32";
        case NF_PRECISION_TF32: return "tf32";
        default: return "unknown";
    }
}
