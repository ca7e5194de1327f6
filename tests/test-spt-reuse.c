/* test-spt-reuse.c -- SpTransformer's reuse within a batch (option
 * batch_reuse, sptransformer-forward.c): a batch of sequences that repeat or
 * differ from one another in a short run (annotate's reference / alternate
 * windows), on DEVICE, with reuse on against the same batch with it off:
 *  - every sequence's logits within fp32 rounding (nf_test_close: max_abs
 *    <= 1e-5 x max(1, max |ref|), mean_abs <= 1e-6 x that), each against
 *    the same sequence computed in full;
 *  - a repeated sequence's logits bitwise those of its first occurrence;
 *  - the counts the model reports (options "distinct", "reused"): which
 *    sequences were computed once, and which reused their base's encoder
 *    rows, so that a plan that silently computed everything in full fails;
 *  - reuse off is the batch as given (distinct = B, reused = 0).
 * Cases: annotate's windows (context C, L = 2 C + 201: the variant at C + 100;
 * dim 16, depth 1) where the saving is real: a single-base change in the
 * middle, near the start, at the end, a run of N; and a small configuration
 * (context 50, L = 228) with batch_reuse = 2, where the differing run covers
 * the whole sequence within a few resblocks (the clipping at both ends).
 * The context only sets where the output window starts (the encoder runs
 * on all L positions alike), so a shorter one takes the same code paths:
 * C = 4000 (L = 8201, the full length) on cpu; C = 400 (L = 1001) on the
 * devices, a tenth of the work (PoCL computes at ~13 GFLOP/s).
 *
 * usage: test-spt-reuse DEVICE [--quick | --context C]   (exit 77: DEVICE not available)
 *   --quick: the small configuration only (the cuda emulator) */
#include "nf-test.h"
#include "models/sptransformer-impl.h"

#include <stdint.h>
#include <stdlib.h>

struct edit {
    int from;   /* the sequence it copies */
    int64_t at; /* first position changed (-1: none, a repeat) */
    int n;      /* positions changed */
    int to_n;   /* set them to N instead of the next base */
};

static void make_batch(const struct edit * ed, int B, int64_t L, uint64_t seed, int64_t * ids) {
    int8_t * t8 = malloc((size_t) L);
    for (int b = 0; b < B; b++) {
        int64_t * t = ids + b * L;
        if (ed[b].from < 0) {
            nf__spt_seeded_tokens(seed * 64 + (uint64_t) b, L, t8);
            for (int64_t i = 0; i < L; i++) t[i] = t8[i];
            continue;
        }
        memcpy(t, ids + ed[b].from * L, (size_t) L * sizeof(int64_t));
        for (int k = 0; ed[b].at >= 0 && k < ed[b].n; k++) {
            const int64_t i = ed[b].at + k;
            t[i] = ed[b].to_n ? NF_SPT_N : (t[i] + 1) % 4;
        }
    }
    free(t8);
}

static int64_t opt(nf_model * m, const char * key) {
    nf_err err = {0};
    int64_t v = -1;
    CHECK_RC(nf_model_get_option(m, key, &v, &err), NF_OK, &err);
    return v;
}

static void run_case(nf_backend * be, const char * dev, const char * what, const char * const * vals, int64_t L,
                     const struct edit * ed, int B, int mode, int64_t want_distinct, int64_t want_reused) {
    nf_err err = {0};
    char dir[256]; /* one per device: the ctest runs may overlap */
    snprintf(dir, sizeof(dir), "test-spt-reuse-%s.tmp", dev);
    const char * keys[] = {"dim", "depth", "tissues", "context", "window"};
    CHECK_RC(nf__model_gen_weights_ex("sptransformer", dir, 20241202, 5, keys, vals, NULL, 0.0f, NULL, 0, &err), NF_OK,
             &err);
    nf_model * m = NULL;
    CHECK_RC(nf_model_load(be, dir, &m, &err), NF_OK, &err);
    if (!m) return;
    const nf_spt * s = m->impl;
    const int64_t out_len = L - 2 * (int64_t) s->cfg.context_len, C = NF_SPT_N_SPLICE + s->cfg.tissue_num;
    const size_t per = (size_t) (out_len * C), nout = per * (size_t) B;
    int64_t * ids = malloc((size_t) (B * L) * sizeof(int64_t));
    float *on = malloc(nout * sizeof(float)), *off = malloc(nout * sizeof(float));
    make_batch(ed, B, L, (uint64_t) L, ids);
    struct nf_array in = {"tokens", NF_ARRAY_I64, 2, {B, L}, ids};

    CHECK(opt(m, "batch_reuse") == 1, "%s: batch_reuse defaults to 1", what);
    CHECK_RC(nf_model_set_option(m, "batch_reuse", 3, &err), NF_ERR_ARG, &err);
    CHECK_RC(nf_model_set_option(m, "batch_reuse", 0, &err), NF_OK, &err);
    CHECK_RC(nf_model_forward(m, &in, 1, off, &err), NF_OK, &err);
    CHECK(opt(m, "distinct") == B && opt(m, "reused") == 0, "%s: reuse off: %lld distinct, %lld reused (want %d, 0)",
          what, (long long) opt(m, "distinct"), (long long) opt(m, "reused"), B);
    CHECK_RC(nf_model_set_option(m, "batch_reuse", mode, &err), NF_OK, &err);
    CHECK_RC(nf_model_forward(m, &in, 1, on, &err), NF_OK, &err);
    const int64_t nd = opt(m, "distinct"), nr = opt(m, "reused");
    printf("%s on %s: batch_reuse %d: %lld of %d sequences computed, %lld of them reusing encoder rows\n", what, dev,
           mode, (long long) nd, B, (long long) nr);
    CHECK(nd == want_distinct && nr == want_reused, "%s: %lld distinct, %lld reused (want %lld, %lld)", what,
          (long long) nd, (long long) nr, (long long) want_distinct, (long long) want_reused);
    for (int b = 0; b < B; b++) {
        char lbl[200];
        snprintf(lbl, sizeof(lbl), "%s on %s: sequence %d (%s), reuse vs full", what, dev, b,
                 ed[b].from < 0 ? "random"
                 : ed[b].at < 0 ? "a repeat"
                                : "an edit");
        CHECK(nf_test_close(lbl, on + b * per, off + b * per, per, 1e-5, 1e-6), "%s", lbl);
        if (ed[b].from >= 0 && ed[b].at < 0)
            CHECK(memcmp(on + b * per, on + ed[b].from * per, per * sizeof(float)) == 0,
                  "%s: sequence %d (a repeat of %d) bitwise its first occurrence", what, b, ed[b].from);
    }
    nf_model_free(m);
    free(ids);
    free(on);
    free(off);
    nf_test_rm_model(dir);
}

int main(int argc, char ** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test-spt-reuse DEVICE [--quick | --context C]\n");
        return 2;
    }
    const char * dev = argv[1];
    const int quick = argc > 2 && strcmp(argv[2], "--quick") == 0;
    int64_t C = 4000;
    if (argc > 3 && strcmp(argv[2], "--context") == 0) C = strtoll(argv[3], NULL, 10);
    if (C < 200 || C > 4000) {
        fprintf(stderr, "test-spt-reuse: --context %lld is not in [200, 4000]\n", (long long) C);
        return 2;
    }
    nf_err err = {0};
    nf_backend * be = NULL;
    int rc = nf_backend_init(dev, NF_PRECISION_EXACT, &be, &err);
    if (rc == NF_ERR_DEVICE) {
        printf("test-spt-reuse: SKIP: %s not available: %s\n", dev, err.msg);
        return 77;
    }
    CHECK_RC(rc, NF_OK, &err);
    if (!be) return 1;

    if (!quick) {
        /* annotate's windows: L = 2 C + 201, the variant at C + 100 */
        char ctx[32], what[64];
        snprintf(ctx, sizeof(ctx), "%lld", (long long) C);
        const int64_t L = 2 * C + 201;
        snprintf(what, sizeof(what), "L=%lld", (long long) L);
        const char * full[] = {"16", "1", "5", ctx, "256"};
        const struct edit ed[] = {
            {-1, -1, 0, 0},     /* 0 random                                        */
            {0, C + 100, 1, 0}, /* 1 an SNV in the middle: its encoders reuse 0's  */
            {0, 3, 1, 0},       /* 2 near the start (the run clipped at 0)         */
            {0, -1, 0, 0},      /* 3 a repeat of 0: computed once                  */
            {-1, -1, 0, 0},     /* 4 random                                        */
            {4, L - 2, 2, 0},   /* 5 the last two positions (clipped at L)         */
            {4, C, 11, 1}       /* 6 a run of N                                    */
        };
        run_case(be, dev, what, full, L, ed, 7, 1, 6, 4);
    }
    /* small: the run reaches both ends within a few resblocks */
    const char * small[] = {"16", "2", "5", "50", "128"};
    const struct edit es[] = {{-1, -1, 0, 0}, {0, 0, 1, 0},   {0, 113, 1, 0}, {0, 227, 1, 0},
                              {0, -1, 0, 0},  {0, 60, 20, 1}, {-1, -1, 0, 0}};
    run_case(be, dev, "L=228", small, 228, es, 7, 2, 6, 5); /* 6 too: mode 2 reuses whatever the run */

    nf_backend_free(be);
    return nf_test_done("test-spt-reuse");
}
