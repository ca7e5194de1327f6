/* test-stream.c -- Mitra's queries in passes (docs/architecture.md "Many test rows"):
 *   1. STREAM (query_chunk 7 < n_query): the support computed once
 *      ("support_passes" 1), the same FLOPs as the all-at-once (JOINT)
 *      forward, logits within fp32 rounding of it; twice: identical bytes;
 *   2. RECOMPUTE (kv_cache_mb below the K/V cache): one support pass per
 *      query chunk, logits within rounding of JOINT;
 *   3. memory: 1,000 support rows, 10,000 then 100,000 query rows, STREAM
 *      with the default chunk: peak RSS grows by no more than the inputs,
 *      outputs and their device copies (O(n_query x (F + C)) floats) + 8 MiB,
 *      (an all-at-once stream of 100,000 rows would add n_query x (F + 1) x
 *      dim floats and its scratch). Prints both peaks.
 * usage: test-stream DEVICE [MEMORY [quick]]   (MEMORY = 0 skips part 3;
 *   quick, the cuda emulator: parts 1 and 2 on smaller tables, 64 x 40 and
 *   400 x 20, the same plans: a stream of 7-row chunks, and a cache of 1.2 MB
 *   recomputed per 16-row chunk) */
#include "nofall.h"
#include "nf-test.h"

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#if defined(__SANITIZE_ADDRESS__)
#define NF_RSS_ASSERTED 0
#else
#define NF_RSS_ASSERTED 1
#endif

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static float frand(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float) ((rng_state >> 40) & 0xFFFFFF) / 16777216.0f * 4.0f - 2.0f;
}

struct table {
    int64_t ns, nq, F, C;
    float *xs, *xq, *out;
    int64_t * ys;
};

static int table_make(struct table * t, int64_t ns, int64_t nq, int64_t F, int64_t C) {
    *t = (struct table){ns, nq, F, C, NULL, NULL, NULL, NULL};
    t->xs = malloc((size_t) (ns * F) * sizeof(float));
    t->xq = malloc((size_t) (nq * F) * sizeof(float));
    t->out = malloc((size_t) (nq * C) * sizeof(float));
    t->ys = malloc((size_t) ns * sizeof(int64_t));
    if (!t->xs || !t->xq || !t->out || !t->ys) return 0;
    for (int64_t i = 0; i < ns * F; i++) t->xs[i] = frand();
    for (int64_t i = 0; i < nq * F; i++) t->xq[i] = frand();
    for (int64_t i = 0; i < ns; i++) t->ys[i] = i % C;
    return 1;
}

static void table_free(struct table * t) {
    free(t->xs);
    free(t->xq);
    free(t->out);
    free(t->ys);
}

static int forward(nf_model * m, nf_backend * be, struct table * t, int64_t query_chunk, int64_t kv_mb, double * flops,
                   int64_t * passes, nf_err * err) {
    const struct nf_array in[3] = {
        {"support_x", NF_ARRAY_F32, 2, {t->ns, t->F}, t->xs},
        {"support_y", NF_ARRAY_I64, 1, {t->ns}, t->ys},
        {"query_x", NF_ARRAY_F32, 2, {t->nq, t->F}, t->xq},
    };
    int rc = nf_model_set_option(m, "query_chunk", query_chunk, err);
    if (rc == NF_OK) rc = nf_model_set_option(m, "kv_cache_mb", kv_mb, err);
    if (rc != NF_OK) return rc;
    nf_trace_reset(be, NF_TRACE_TOTALS);
    rc = nf_model_forward(m, in, 3, t->out, err);
    if (rc != NF_OK) return rc;
    struct nf_trace_totals tt;
    nf_trace_totals_get(be, &tt);
    if (flops) *flops = tt.flops;
    return passes ? nf_model_get_option(m, "support_passes", passes, err) : NF_OK;
}

static long peak_rss_kib(void) {
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : -1;
}

int main(int argc, char ** argv) {
    const char * dev = argc > 1 ? argv[1] : "cpu";
    const int memory = argc > 2 ? atoi(argv[2]) : 1;
    const int quick = argc > 3 && strcmp(argv[3], "quick") == 0;
    const int64_t ns1 = quick ? 64 : 200, nq1 = quick ? 40 : 300, ns2 = quick ? 400 : 600, nq2 = quick ? 20 : 50;
    nf_err err = {0};
    nf_backend * be = NULL;
    nf_model * m = NULL;
    if (nf_backend_init(dev, NF_PRECISION_EXACT, &be, &err) != NF_OK) {
        fprintf(stderr, "test-stream: %s\n", err.msg);
        return err.code == NF_ERR_DEVICE ? 77 : 1;
    }
    /* a small classifier: dim 32, 2 layers, 2 heads, 10 classes */
    const char * keys[5] = {"dim", "layers", "heads", "outputs", "task"};
    const char * vals[5] = {"32", "2", "2", "10", "classification"};
    CHECK_RC(nf_model_gen_weights("mitra", "stream-model", 11, 5, keys, vals, &err), NF_OK, &err);
    CHECK_RC(nf_model_load(be, "stream-model", &m, &err), NF_OK, &err);
    if (!m) return nf_test_done("test-stream");

    /* 1 + 2: 200 support rows, 5 features, 300 queries */
    struct table t;
    CHECK(table_make(&t, ns1, nq1, 5, 10), "tables allocated");
    const size_t n = (size_t) (t.nq * t.C);
    float * joint = malloc(n * sizeof(float));
    float * again = malloc(n * sizeof(float));
    double f_joint = 0, f_stream = 0, f_re = 0;
    int64_t p_joint = 0, p_stream = 0, p_re = 0;
    CHECK_RC(forward(m, be, &t, 0, 0, &f_joint, &p_joint, &err), NF_OK, &err);
    memcpy(joint, t.out, n * sizeof(float));
    CHECK(p_joint == 1, "all at once: one support pass (got %lld)", (long long) p_joint);

    CHECK_RC(forward(m, be, &t, 7, 0, &f_stream, &p_stream, &err), NF_OK, &err);
    CHECK(p_stream == 1, "query_chunk 7: the support computed once (got %lld passes)", (long long) p_stream);
    CHECK(f_stream == f_joint, "query_chunk 7: the same FLOPs as all at once (%.6g vs %.6g)", f_stream, f_joint);
    CHECK(nf_test_close("query_chunk 7 vs all at once", t.out, joint, n, 1e-5, 1e-6),
          "streamed logits within rounding");
    memcpy(again, t.out, n * sizeof(float));
    CHECK_RC(forward(m, be, &t, 7, 0, NULL, NULL, &err), NF_OK, &err);
    CHECK(memcmp(again, t.out, n * sizeof(float)) == 0, "query_chunk 7 twice: identical bytes");

    /* the K/V cache here: 2 layers x 200 x 6 x 64 floats = 0.6 MB; 1 MiB holds it, so use more support rows */
    struct table big;
    CHECK(table_make(&big, ns2, nq2, 5, 10), "tables allocated");
    const size_t nb = (size_t) (big.nq * big.C);
    float * bj = malloc(nb * sizeof(float));
    CHECK_RC(forward(m, be, &big, 0, 0, NULL, NULL, &err), NF_OK, &err);
    memcpy(bj, big.out, nb * sizeof(float));
    CHECK_RC(forward(m, be, &big, 16, 1, &f_re, &p_re, &err), NF_OK, &err);
    CHECK(p_re == (nq2 + 15) / 16,
          "kv_cache_mb 1 (cache %.1f MB): the support recomputed per 16-row chunk (got %lld passes)",
          2.0 * (double) ns2 * 6 * 64 * 4 / 1e6, (long long) p_re);
    CHECK(nf_test_close("recomputed support vs all at once", big.out, bj, nb, 1e-5, 1e-6),
          "recompute logits within rounding");
    int64_t used = 0;
    CHECK_RC(nf_model_get_option(m, "query_chunk_used", &used, &err), NF_OK, &err);
    CHECK(used == 16, "query_chunk_used 16 (got %lld)", (long long) used);
    CHECK(nf_model_get_option(m, "no_such_stat", &used, &err) == NF_ERR_ARG, "an unknown statistic is refused");
    free(bj);
    table_free(&big);
    free(joint);
    free(again);
    table_free(&t);

    /* 3: memory independent of the number of queries, on a tiny model
     * (dim 16, 1 layer, 1 head: the row attention over 1,000 support rows dominates) */
    nf_model_free(m);
    m = NULL;
    vals[0] = "16";
    vals[1] = "1";
    vals[2] = "1";
    CHECK_RC(nf_model_gen_weights("mitra", "stream-tiny", 12, 5, keys, vals, &err), NF_OK, &err);
    CHECK_RC(nf_model_load(be, "stream-tiny", &m, &err), NF_OK, &err);
    if (memory && m) {
        long peak[2] = {0, 0};
        const int64_t nqs[2] = {10000, 100000};
        for (int k = 0; k < 2; k++) {
            struct table q;
            CHECK(table_make(&q, 1000, nqs[k], 20, 10), "tables allocated");
            int64_t passes = 0, kv = 0;
            CHECK_RC(forward(m, be, &q, 0, 0, NULL, &passes, &err), NF_OK, &err);
            CHECK_RC(nf_model_get_option(m, "kv_cache_bytes", &kv, &err), NF_OK, &err);
            CHECK(passes == 1, "%lld queries: support computed once", (long long) nqs[k]);
            peak[k] = peak_rss_kib();
            printf("1000 support x %lld queries x 20 features: peak RSS %.1f MiB (K/V cache %.1f MiB)\n",
                   (long long) nqs[k], peak[k] / 1024.0, kv / 1048576.0);
            nf_model_release_workspace(m);
            table_free(&q);
        }
        /* what 90,000 more queries must take: the host inputs and outputs,
         * and their device copies x_query, z_query, logits: 2 x (20 + 10) + 20 floats a row */
        const double allowed = 90000.0 * (2 * (20 + 10) + 20) * 4 / 1024.0 + 8 * 1024.0;
        const double joint_would = 90000.0 * 21 * 16 * 4 / 1024.0;
        printf("peak RSS grew %ld KiB for 90,000 more queries (allowed %.0f; an all-at-once stream adds %.0f)\n",
               peak[1] - peak[0], allowed, joint_would);
        if (NF_RSS_ASSERTED)
            CHECK((double) (peak[1] - peak[0]) <= allowed, "peak RSS independent of the number of queries");
        else
            printf("AddressSanitizer build: peak RSS printed, not asserted\n");
    }
    nf_model_free(m);
    nf_backend_free(be);
    return nf_test_done("test-stream");
}
