/* error.c -- the names of result codes and precision modes (setting an nf_err:
 * base/err.c). */
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

const char * nf_precision_name(int precision) {
    switch (precision) {
        case NF_PRECISION_EXACT: return "exact-fp32";
        case NF_PRECISION_TF32: return "tf32";
        case NF_PRECISION_BF16_AUTOCAST: return "bf16-autocast";
        default: return "unknown";
    }
}
