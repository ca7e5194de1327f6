/* nf-test.h -- a tiny assertion harness: every CHECK counts, any failure makes
 * the test exit 1. */
#ifndef NF_TEST_H
#define NF_TEST_H

#include <math.h>
#include <stdio.h>
#include <string.h>

static int nf_test_fails = 0, nf_test_checks = 0;

#define CHECK(cond, ...)                                                             \
    do {                                                                             \
        nf_test_checks++;                                                            \
        if (!(cond)) {                                                               \
            nf_test_fails++;                                                         \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                            \
            fputc('\n', stderr);                                                     \
        }                                                                            \
    } while (0)

#define CHECK_RC(expr, want, err)                                                                              \
    do {                                                                                                       \
        int rc_ = (expr);                                                                                      \
        CHECK(rc_ == (want), "%s returned %s (want %s): %s", #expr, nf_result_name(rc_), nf_result_name(want), \
              (err)->msg);                                                                                     \
    } while (0)

#define CHECK_MSG(err, needle) \
    CHECK(strstr((err)->msg, (needle)) != NULL, "message \"%s\" lacks \"%s\"", (err)->msg, (needle))

/* Two results of the same computation along different code paths (another
 * chunking, another GEMM kernel) agree within fp32 rounding: docs/numerics.md's
 * "Determinism" bound, max |a-b| <= max_abs * s and mean |a-b| <= mean_abs * s,
 * s = max(1, max |b|), finite exactly where the other is. Prints the figures. */
static inline int nf_test_close(const char * what, const float * a, const float * b, size_t n, double max_abs,
                                double mean_abs) {
    double worst = 0.0, total = 0.0, scale = 1.0;
    size_t differ = 0, mismatch = 0;
    for (size_t i = 0; i < n; i++) {
        const double x = a[i], y = b[i];
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0) differ++;
        if (isfinite(x) != isfinite(y)) {
            mismatch++;
            continue;
        }
        if (!isfinite(y)) continue;
        const double d = fabs(x - y);
        worst = d > worst ? d : worst;
        total += d;
        scale = fabs(y) > scale ? fabs(y) : scale;
    }
    const double mean = n ? total / (double) n : 0.0;
    const int ok = mismatch == 0 && worst <= max_abs * scale && mean <= mean_abs * scale;
    printf("%s: %zu values, %zu differ in bits, max_abs %.3g (bound %.3g), mean_abs %.3g (bound %.3g): %s\n", what, n,
           differ, worst, max_abs * scale, mean, mean_abs * scale, ok ? "within rounding" : "NOT within rounding");
    return ok;
}

/* remove a generated model directory: model.safetensors, config.json, the directory */
static inline void nf_test_rm_model(const char * dir) {
    char p[1024];
    snprintf(p, sizeof(p), "%s/model.safetensors", dir);
    remove(p);
    snprintf(p, sizeof(p), "%s/config.json", dir);
    remove(p);
    remove(dir);
}

static int nf_test_done(const char * name) {
    printf("%s: %d checks, %d failed\n", name, nf_test_checks, nf_test_fails);
    return nf_test_fails ? 1 : 0;
}

#endif
