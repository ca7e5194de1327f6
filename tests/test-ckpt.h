/* test-ckpt.h -- what the .ckpt reader's test (test-ckpt.c) and the writer's
 * (test-ckpt-write.c) share: their scratch directory, file helpers, and the
 * reader called on a file with its expected result. */
#ifndef NF_TEST_CKPT_H
#define NF_TEST_CKPT_H
#include "nf-test.h"
#include "ckpt-gen.h"
#include "io/nf-io.h"
#include "weights.h"
#include "models/mitra-impl.h"
#include "models/sptransformer-impl.h"
#include "model.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

static char tmpdir[512] = "test-ckpt.tmp"; /* the working directory's scratch */
static const char * fixtures;              /* tests/fixtures/ckpt */

static inline void tpath(char * out, size_t n, const char * name) { snprintf(out, n, "%s/%s", tmpdir, name); }

static inline unsigned char * slurp(const char * path, size_t * len) {
    FILE * f = fopen(path, "rb");
    if (!f) {
        *len = 0;
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char * b = malloc((size_t) n + 1);
    *len = fread(b, 1, (size_t) n, f);
    fclose(f);
    return b;
}

static inline void spit(const char * path, const void * b, size_t n) {
    FILE * f = fopen(path, "wb");
    if (f) {
        fwrite(b, 1, n, f);
        fclose(f);
    }
}

static inline int load(const char * path, struct nf_safetensors * st, nf_err * err) {
    return nf__ckpt_load(path, st, err);
}

static inline void expect_file(const char * what, const char * path, int code, const char * needle) {
    nf_err err = {0};
    struct nf_safetensors st;
    int rc = load(path, &st, &err);
    CHECK(rc == code, "%s: got %s (want %s): %s", what, nf_result_name(rc), nf_result_name(code), err.msg);
    if (rc != NF_OK && needle)
        CHECK(strstr(err.msg, needle) != NULL, "%s: message \"%s\" lacks \"%s\"", what, err.msg, needle);
    if (rc != NF_OK) CHECK(strstr(err.msg, path) != NULL, "%s: the message names the file: %s", what, err.msg);
    if (rc == NF_OK) nf__st_close(&st);
}

static inline long local_data_at(const unsigned char * b, size_t n, const char * name) {
    const size_t L = strlen(name);
    for (size_t i = 0; i + 30 + L <= n; i++) {
        if (memcmp(b + i, "PK\3\4", 4) == 0 && (size_t) (b[i + 26] | b[i + 27] << 8) == L &&
            memcmp(b + i + 30, name, L) == 0) {
            return (long) (i + 30 + L + (size_t) (b[i + 28] | b[i + 29] << 8));
        }
    }
    return -1;
}

#endif
