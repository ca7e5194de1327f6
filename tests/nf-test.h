/* nf-test.h -- a tiny assertion harness: every CHECK counts, any failure makes
 * the test exit 1. */
#ifndef NF_TEST_H
#define NF_TEST_H

#include <stdio.h>
#include <string.h>

static int nf_test_fails = 0, nf_test_checks = 0;

#define CHECK(cond, ...) do { \
    nf_test_checks++; \
    if (!(cond)) { \
        nf_test_fails++; \
        fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
        fprintf(stderr, __VA_ARGS__); \
        fputc('\n', stderr); \
    } \
} while (0)

#define CHECK_RC(expr, want, err) do { \
    int rc_ = (expr); \
    CHECK(rc_ == (want), "%s returned %s (want %s): %s", #expr, nf_result_name(rc_), nf_result_name(want), (err)->msg); \
} while (0)

#define CHECK_MSG(err, needle) \
    CHECK(strstr((err)->msg, (needle)) != NULL, "message \"%s\" lacks \"%s\"", (err)->msg, (needle))

static int nf_test_done(const char * name) {
    printf("%s: %d checks, %d failed\n", name, nf_test_checks, nf_test_fails);
    return nf_test_fails ? 1 : 0;
}

#endif
