/*
 * nf-base.h -- the bottom layer of the library, what every layer (io/, text/,
 * core/, backends/, models/, ...) may use without depending on a layer above
 * it: setting and prefixing the result code and message of an nf_err
 * (include/nofall.h; err.c), NF_TRY, the deterministic PRNG. Depends on the
 * public header and libc only.
 */
#ifndef NF_BASE_H
#define NF_BASE_H

#include "nofall.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Set err (may be NULL) and return code. printf-style message. */
int nf__err_set(nf_err * err, int code, const char * fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Prefix an existing message with context: "<ctx>: <old message>". */
int nf__err_prefix(nf_err * err, const char * fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* return the result of expr unless it is NF_OK */
#define NF_TRY(expr)                        \
    do {                                    \
        int nf__rc = (expr);                \
        if (nf__rc != NF_OK) return nf__rc; \
    } while (0)

/* Deterministic PRNG (splitmix64) for synthetic weights and tables: integer
 * arithmetic only, so the same seed gives the same bytes everywhere. */
static inline uint64_t nf__rng_next(uint64_t * s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
/* uniform in [0, 1) with 24 random bits: exact in float */
static inline float nf__rng_unif(uint64_t * s) { return (float) (nf__rng_next(s) >> 40) * (1.0f / 16777216.0f); }

#ifdef __cplusplus
}
#endif
#endif
