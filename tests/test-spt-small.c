/* test-spt-small.c -- SpTransformer at small configurations (dim 16, depth 2,
 * context 50; windows of 64, 128 and 192 positions: 1, 2 and 3 local windows
 * of 64) on DEVICE against REF (cpu unless given): for every length case
 * (the shortest and the longest valid length, zero-padded and cropped
 * windows of both parities, a batch of 2, runs of N), the logits within fp32
 * rounding (max_abs <= 1e-5 x max(1, max |ref|), mean_abs <= 1e-6 x that:
 * nf_test_close), every bucket choice identical (stage "layers.%d.buckets"),
 * and two DEVICE forwards bitwise identical. The real model is far too slow
 * for the cuda emulator; this runs the same forward code, every op and
 * every windowing path at ~1/1000 of the cost.
 *
 * usage: test-spt-small DEVICE [REF] [--quick]   (exit 77: DEVICE not available)
 *   --quick: the cases marked quick only, and the second DEVICE forward only
 *   for the first case of each window (the cuda emulator: ~1 minute) */
#include "nf-test.h"
#include "models/sptransformer-impl.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define CTX 50

struct len_case {
    int64_t B, L;
    uint64_t seed;
    int n_run; /* positions [L/3, L/3 + n_run) of row 0 set to N */
    int quick; /* in the --quick set */
};

struct model_case {
    const char * window; /* --window */
    struct len_case lens[6];
};

/* valid L: 2 x 50 + 1 .. 2 x 50 + window */
static const struct model_case cases[] = {
    {"64", /* nw = 1: the one window attends to itself only */
     {{1, 101, 11, 0, 0}, {1, 164, 12, 9, 0}, {2, 131, 13, 0, 1}, {0, 0, 0, 0, 0}}},
    {"128",                /* nw = 2: both windows are end windows */
     {{1, 101, 21, 0, 1},  /* shortest: 1 output, window pad 13 / 14 */
      {1, 117, 22, 5, 1},  /* odd pad */
      {1, 164, 23, 0, 0},  /* even crop 18 / 18 */
      {1, 228, 24, 40, 1}, /* longest: 128 outputs, no pad or crop at the heads */
      {2, 157, 25, 0, 1},  /* batch 2, odd crop */
      {0, 0, 0, 0, 0}}},
    {"192", /* nw = 3: one interior window */
     {{1, 150, 31, 0, 1}, {1, 255, 32, 17, 1}, {2, 292, 33, 0, 0}, {1, 101, 34, 0, 0}, {0, 0, 0, 0, 0}}},
};

struct bucket_log {
    int n_layers;
    int64_t n; /* per layer: B x heads x buckets */
    float * sel;
};

static int bucket_stage(void * user, const char * stage, const float * data, int ndim, const int64_t * shape) {
    struct bucket_log * bl = user;
    int l;
    char what[32];
    if (sscanf(stage, "layers.%d.%31s", &l, what) != 2 || l < 0 || l >= bl->n_layers) return 0;
    if (strcmp(what, "buckets") == 0 && ndim == 3 && shape[0] * shape[1] * shape[2] == bl->n)
        memcpy(bl->sel + l * bl->n, data, (size_t) bl->n * sizeof(float));
    return 0;
}

/* logits and bucket choices of one forward; a second forward without the
 * stage callback into out2 when given */
static int run(nf_model * m, const struct nf_array * in, float * out, float * out2, struct bucket_log * bl,
               const char * dev) {
    nf_err err = {0};
    nf_model_set_stage_callback(m, NF_STAGES_INPUTS, bucket_stage, bl);
    int rc = nf_model_forward(m, in, 1, out, &err);
    nf_model_set_stage_callback(m, NF_STAGES_NONE, NULL, NULL);
    CHECK(rc == NF_OK, "%s: forward (B=%lld, L=%lld): %s: %s", dev, (long long) in->shape[0], (long long) in->shape[1],
          nf_result_name(rc), err.msg);
    if (rc == NF_OK && out2) {
        rc = nf_model_forward(m, in, 1, out2, &err);
        CHECK(rc == NF_OK, "%s: second forward: %s: %s", dev, nf_result_name(rc), err.msg);
    }
    return rc;
}

static void test_model(const struct model_case * mc, const char * dev, nf_backend * be, nf_backend * ref_be,
                       const char * ref, int quick) {
    nf_err err = {0};
    char dir[256];
    snprintf(dir, sizeof(dir), "test-spt-small.tmp/w%s", mc->window);
    const char * keys[] = {"dim", "depth", "tissues", "context", "window"};
    char ctx[16];
    snprintf(ctx, sizeof(ctx), "%d", CTX);
    const char * vals[] = {"16", "2", "5", ctx, mc->window};
    CHECK_RC(nf__model_gen_weights_ex("sptransformer", dir, 20240816, 5, keys, vals, NULL, 0.0f, NULL, 0, &err), NF_OK,
             &err);
    nf_model *m = NULL, *r = NULL;
    CHECK_RC(nf_model_load(be, dir, &m, &err), NF_OK, &err);
    CHECK_RC(nf_model_load(ref_be, dir, &r, &err), NF_OK, &err);
    if (!m || !r) goto done;
    const nf_spt * s = m->impl;
    const int64_t N = s->cfg.max_seq_len, nb = N / s->cfg.bucket_size, nsh = s->cfg.heads - s->cfg.n_local_attn_heads;
    const int64_t C = NF_SPT_N_SPLICE + s->cfg.tissue_num;
    CHECK(s->cfg.context_len == CTX && N == atoi(mc->window) && s->cfg.dim == 16 && s->cfg.attn_depth == 2,
          "config: context %d, window %lld", s->cfg.context_len, (long long) N);
    int first = 1;
    for (const struct len_case * lc = mc->lens; lc->B; lc++) {
        if (quick && !lc->quick) continue;
        const int repeat = !quick || first;
        first = 0;
        const int64_t B = lc->B, L = lc->L, out_len = L - 2 * CTX;
        int64_t * ids = malloc((size_t) (B * L) * sizeof(int64_t));
        int8_t * t8 = malloc((size_t) L);
        for (int64_t b = 0; b < B; b++) {
            nf__spt_seeded_tokens(lc->seed * 16 + (uint64_t) b, L, t8);
            for (int64_t i = 0; i < L; i++) ids[b * L + i] = t8[i];
        }
        for (int i = 0; i < lc->n_run; i++) ids[L / 3 + i] = NF_SPT_N;
        const size_t nout = (size_t) (B * out_len * C);
        float *o1 = malloc(nout * sizeof(float)), *o2 = malloc(nout * sizeof(float)),
              *oref = malloc(nout * sizeof(float));
        struct bucket_log bl = {s->cfg.attn_depth, B * nsh * nb, NULL}, br = bl;
        bl.sel = calloc((size_t) (bl.n_layers * bl.n), sizeof(float));
        br.sel = calloc((size_t) (br.n_layers * br.n), sizeof(float));
        for (int64_t i = 0; i < bl.n_layers * bl.n; i++) bl.sel[i] = br.sel[i] = -1.0f;
        struct nf_array in = {"tokens", NF_ARRAY_I64, 2, {B, L}, ids};
        const int64_t start = -((N - L) >= 0 ? (N - L) / 2 : -((L - N + 1) / 2)); /* ceil((L - N) / 2) */
        char what[160];
        snprintf(what, sizeof(what), "window %lld (%lld local windows), B=%lld L=%lld (%s %lld; %lld outputs)",
                 (long long) N, (long long) nb, (long long) B, (long long) L, start < 0 ? "pad" : "crop",
                 (long long) (start < 0 ? -start : start), (long long) out_len);
        if (run(m, &in, o1, repeat ? o2 : NULL, &bl, dev) == NF_OK && run(r, &in, oref, NULL, &br, ref) == NF_OK) {
            if (repeat) {
                CHECK(memcmp(o1, o2, nout * sizeof(float)) == 0, "%s: two %s forwards bitwise identical", what, dev);
                printf("%s: two %s forwards: %s\n", what, dev,
                       memcmp(o1, o2, nout * sizeof(float)) == 0 ? "bitwise identical" : "DIFFER");
            }
            int64_t bad = 0;
            for (size_t i = 0; i < nout; i++) bad += !isfinite(oref[i]);
            CHECK(bad == 0, "%s: %s logits finite (%lld not)", what, ref, (long long) bad);
            char lbl[256];
            snprintf(lbl, sizeof(lbl), "%s: %s vs %s", what, dev, ref);
            CHECK(nf_test_close(lbl, o1, oref, nout, 1e-5, 1e-6), "%s: logits within fp32 rounding", lbl);
            int64_t agree = 0, unset = 0;
            for (int64_t i = 0; i < bl.n_layers * bl.n; i++) {
                agree += bl.sel[i] == br.sel[i];
                unset += bl.sel[i] < 0.0f || br.sel[i] < 0.0f;
            }
            CHECK(unset == 0 && agree == bl.n_layers * bl.n, "%s: bucket choices: %lld of %lld identical (%lld unset)",
                  what, (long long) agree, (long long) (bl.n_layers * bl.n), (long long) unset);
            printf("%s: bucket choices: %lld of %lld identical\n", what, (long long) agree,
                   (long long) (bl.n_layers * bl.n));
        }
        free(ids);
        free(t8);
        free(o1);
        free(o2);
        free(oref);
        free(bl.sel);
        free(br.sel);
    }
    /* the length bounds of this configuration */
    struct nf_array in = {"tokens", NF_ARRAY_I64, 2, {1, 2 * CTX}, NULL};
    int nd = 0;
    int64_t sh[NF_ARRAY_MAX_DIMS] = {0};
    CHECK_RC(nf_model_output_shape(m, &in, 1, &nd, sh, &err), NF_ERR_SHAPE, &err);
    in.shape[1] = 2 * CTX + N + 1;
    CHECK_RC(nf_model_output_shape(m, &in, 1, &nd, sh, &err), NF_ERR_SHAPE, &err);
    in.shape[1] = 2 * CTX + N;
    CHECK_RC(nf_model_output_shape(m, &in, 1, &nd, sh, &err), NF_OK, &err);
    CHECK(nd == 3 && sh[1] == N && sh[2] == C, "L = 2 context + window: %lld outputs", (long long) sh[1]);
done:
    nf_model_free(m);
    nf_model_free(r);
    nf_test_rm_model(dir);
}

int main(int argc, char ** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test-spt-small DEVICE [REF] [--quick]\n");
        return 2;
    }
    const char *dev = argv[1], *ref = "cpu";
    int quick = 0;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            quick = 1;
        else
            ref = argv[i];
    }
    nf_err err = {0};
    nf_backend *be = NULL, *ref_be = NULL;
    int rc = nf_backend_init(dev, NF_PRECISION_EXACT, &be, &err);
    if (rc == NF_ERR_DEVICE) {
        printf("test-spt-small: SKIP: %s not available: %s\n", dev, err.msg);
        return 77;
    }
    CHECK_RC(rc, NF_OK, &err);
    CHECK_RC(nf_backend_init(ref, NF_PRECISION_EXACT, &ref_be, &err), NF_OK, &err);
    mkdir("test-spt-small.tmp", 0777);
    if (be && ref_be)
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
            test_model(&cases[i], dev, be, ref_be, ref, quick);
    nf_backend_free(be);
    nf_backend_free(ref_be);
    rmdir("test-spt-small.tmp");
    return nf_test_done("test-spt-small");
}
