/* tiny-models.h -- what the tests over the public API for every model type
 * (test-generic.c, test-verify.c) share: a CHECK that counts failures, and
 * each type's tiny synthetic configuration (seconds on a CPU) as
 * gen-weights options. */
#ifndef NF_TINY_MODELS_H
#define NF_TINY_MODELS_H

#include <stdio.h>
#include <string.h>

static int fails = 0;
#define CHECK(c, ...)                                   \
    do {                                                \
        if (!(c)) {                                     \
            printf("FAIL %s:%d: ", __FILE__, __LINE__); \
            printf(__VA_ARGS__);                        \
            printf("\n");                               \
            fails++;                                    \
        }                                               \
    } while (0)

/* type's tiny configuration: n (key, value) options into keys / values (8 at most) */
static inline int tiny(const char * type, const char ** keys, const char ** values) {
    static const char *mk[] = {"dim", "layers", "heads", "outputs"}, *mv[] = {"32", "2", "2", "3"};
    static const char *sk[] = {"dim", "depth", "tissues", "context", "window"}, *sv[] = {"16", "1", "15", "8", "128"};
    static const char *tk[] = {"layers", "vocab"}, *tv[] = {"1", "1000"};
    const char **k = NULL, **v = NULL;
    int n = 0;
    if (strcmp(type, "mitra") == 0) k = mk, v = mv, n = 4;
    if (strcmp(type, "sptransformer") == 0) k = sk, v = sv, n = 5;
    if (strcmp(type, "tabstar") == 0) k = tk, v = tv, n = 2;
    for (int i = 0; i < n; i++) keys[i] = k[i], values[i] = v[i];
    return n;
}

#endif
