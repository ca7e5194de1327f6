/* test-workspace.c -- the Mitra forward keeps its device workspace for the
 * next forward of the same shape:
 *  1. a repeated forward allocates nothing on the device and returns the
 *     same bytes as the first one, and as a freshly loaded model;
 *  2. a forward of another shape in between reallocates and does not
 *     disturb the results of either shape;
 *  3. a chunked forward (chunk rows changed between forwards) over a reused
 *     workspace allocates nothing and gives the same logits within fp32
 *     rounding (another chunking is another code path);
 *  4. nf_model_release_workspace frees it: the next forward allocates again.
 * usage: test-workspace MODEL_DIR [DEVICE]   (DEVICE default "cpu") */
#include "nf-test.h"
#include "nofall.h"

#include <stdint.h>
#include <stdlib.h>

struct table {
    int64_t ns, nq, F;
    float *xs, *xq;
    int64_t * y;
};

static void table_make(struct table * t, int64_t ns, int64_t nq, int64_t F, uint32_t seed, int C) {
    t->ns = ns;
    t->nq = nq;
    t->F = F;
    t->xs = malloc((size_t) (ns * F) * sizeof(float));
    t->xq = malloc((size_t) (nq * F) * sizeof(float));
    t->y = malloc((size_t) ns * sizeof(int64_t));
    uint32_t s = seed;
    for (int64_t i = 0; i < ns * F; i++) {
        s = s * 1664525u + 1013904223u;
        t->xs[i] = (float) (s >> 8) / 16777216.0f - 0.5f;
    }
    for (int64_t i = 0; i < nq * F; i++) {
        s = s * 1664525u + 1013904223u;
        t->xq[i] = (float) (s >> 8) / 16777216.0f - 0.5f;
    }
    for (int64_t i = 0; i < ns; i++) t->y[i] = i % C;
}

static void table_free(struct table * t) {
    free(t->xs);
    free(t->xq);
    free(t->y);
}

/* one forward; returns the device allocations it made, or -1 on error */
static int64_t forward(nf_backend * be, nf_model * m, const struct table * t, float * out, nf_err * err) {
    const struct nf_array in[3] = {
        {"support_x", NF_ARRAY_F32, 2, {t->ns, t->F}, t->xs},
        {"support_y", NF_ARRAY_I64, 1, {t->ns}, t->y},
        {"query_x", NF_ARRAY_F32, 2, {t->nq, t->F}, t->xq},
    };
    nf_trace_reset(be, 0);
    int rc = nf_model_forward(m, in, 3, out, err);
    CHECK(rc == NF_OK, "forward %lldx%lldx%lld: %s", (long long) t->ns, (long long) t->nq, (long long) t->F, err->msg);
    if (rc != NF_OK) return -1;
    struct nf_trace_totals tot;
    nf_trace_totals_get(be, &tot);
    return tot.allocs;
}

int main(int argc, char ** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test-workspace MODEL_DIR [DEVICE]\n");
        return 2;
    }
    const char * dev = argc > 2 ? argv[2] : "cpu";
    nf_err err = {0};
    nf_backend * be = NULL;
    nf_model *m = NULL, *fresh = NULL;
    if (nf_backend_init(dev, NF_PRECISION_EXACT, &be, &err) != NF_OK) {
        fprintf(stderr, "test-workspace: %s\n", err.msg);
        return 1;
    }
    CHECK_RC(nf_model_load(be, argv[1], &m, &err), NF_OK, &err);
    CHECK_RC(nf_model_load(be, argv[1], &fresh, &err), NF_OK, &err);
    if (!m || !fresh) return nf_test_done("test-workspace");
    const int C = (int) nf_model_input(m, 1)->n_classes; /* support_y: class labels */
    CHECK(C > 1, "a classifier (%d classes)", C);

    struct table a, b;
    table_make(&a, 9, 5, 4, 11u, C);
    table_make(&b, 6, 7, 3, 12u, C);
    const size_t na = (size_t) (a.nq * C), nb = (size_t) (b.nq * C);
    float *a1 = malloc(na * sizeof(float)), *a2 = malloc(na * sizeof(float)), *a3 = malloc(na * sizeof(float));
    float *a4 = malloc(na * sizeof(float)), *af = malloc(na * sizeof(float));
    float *b1 = malloc(nb * sizeof(float)), *bf = malloc(nb * sizeof(float));

    /* 1 */
    const int64_t first = forward(be, m, &a, a1, &err);
    CHECK(first > 0, "the first forward allocates its workspace (%lld allocations)", (long long) first);
    const int64_t again = forward(be, m, &a, a2, &err);
    CHECK(again == 0, "a repeated forward of the same shape allocates nothing (%lld allocations)", (long long) again);
    CHECK(memcmp(a1, a2, na * sizeof(float)) == 0, "repeated forward: identical logits");
    forward(be, fresh, &a, af, &err);
    CHECK(memcmp(a1, af, na * sizeof(float)) == 0, "reused workspace == fresh model, byte for byte");

    /* 2 */
    const int64_t other = forward(be, m, &b, b1, &err);
    CHECK(other > 0, "another shape reallocates (%lld allocations)", (long long) other);
    nf_model_release_workspace(fresh);
    forward(be, fresh, &b, bf, &err);
    CHECK(memcmp(b1, bf, nb * sizeof(float)) == 0, "shape B after shape A == fresh, byte for byte");
    forward(be, m, &a, a3, &err);
    CHECK(memcmp(a1, a3, na * sizeof(float)) == 0, "shape A after shape B: identical logits");

    /* 3: chunk rows change the schedule, not the allocation */
    CHECK_RC(nf_model_set_option(m, "chunk_rows", 2, &err), NF_OK, &err);
    CHECK_RC(nf_model_set_option(m, "chunk_size", 2, &err), NF_ERR_ARG, &err);
    const int64_t chunked = forward(be, m, &a, a4, &err);
    CHECK(chunked == 0, "chunked forward over the kept workspace allocates nothing (%lld)", (long long) chunked);
    /* another chunking is another code path (other GEMM shapes): equal within
     * fp32 rounding, not necessarily bytes (docs/numerics.md "Determinism") */
    CHECK(nf_test_close("chunked vs unchunked", a4, a1, na, 1e-5, 1e-6), "chunked forward: logits within rounding");
    nf_model_set_option(m, "chunk_rows", 0, &err);

    /* 4 */
    nf_model_release_workspace(m);
    nf_model_release_workspace(m); /* twice is harmless */
    const int64_t after = forward(be, m, &a, a2, &err);
    /* (the backend's own scratch, grown by the first forward, stays) */
    CHECK(after > 0 && after <= first, "after release the forward allocates again (%lld, first %lld)",
          (long long) after, (long long) first);
    CHECK(memcmp(a1, a2, na * sizeof(float)) == 0, "after release: identical logits");

    free(a1);
    free(a2);
    free(a3);
    free(a4);
    free(af);
    free(b1);
    free(bf);
    table_free(&a);
    table_free(&b);
    nf_model_free(m);
    nf_model_free(fresh);
    nf_backend_free(be);
    return nf_test_done("test-workspace");
}
