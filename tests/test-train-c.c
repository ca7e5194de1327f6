/* test-train-c.c -- the training ops, set C (TabSTAR's LoRA fine-tuning;
 * nf-ops.h), on a device (argv[2]; default cpu): SCATTER_ADD_ROWS' plan
 * (nf_scatter_plan) against a brute-force sort, the typed calls (the scatter
 * as the adjoint of GATHER_ROWS, clipping and SCALE in place on views,
 * errors naming the op), and nf_onecycle against torch's OneCycleLR
 * (argv[1]: tests/fixtures/onecycle.json, made by
 * reference/onecycle_fixtures.py): lr and beta1 bit for bit. The kernels'
 * numerics are tests/test-backend-ops.c's. */
#include "nf-test.h"
#include "nf-ops.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>

static uint64_t rs = 4242;
static uint32_t urand(void) {
    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t) (rs >> 33);
}
static float frand(void) { return (float) (urand() & 0xffffff) / 16777216.0f * 2.0f - 1.0f; }

static nf_backend * be;

static nf_tensor mk(enum nf_dtype type, int64_t n, const void * data) {
    nf_tensor t;
    nf_err err = {0};
    if (nf__tensor_alloc(be, &t, type, 1, &n, "t", &err) != NF_OK) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    if (data) nf__tensor_upload(&t, data, &err);
    return t;
}

static void get(const nf_tensor * t, void * out) {
    nf_err err = {0};
    nf__tensor_download(t, out, &err);
}

/* the plan against sorting the in-range rows by (idx, row) by brute force */
static void test_plan(int64_t m, int64_t nt) {
    int32_t *idx = malloc((size_t) (m + 1) * 4), *order = malloc((size_t) (m + 1) * 4);
    int32_t * start = malloc((size_t) (nt + 2) * 4);
    for (int64_t r = 0; r < m; r++) idx[r] = (int32_t) (urand() % (uint32_t) (nt + 3)) - 1; /* -1 .. nt+1 */
    nf_err err = {0};
    CHECK_RC(nf_scatter_plan(idx, m, nt, order, start, &err), NF_OK, &err);
    int64_t u = 0, bad = 0;
    for (int64_t i = 0; i < nt; i++) {
        bad += start[i] != u;
        for (int64_t r = 0; r < m; r++)
            if (idx[r] == i) bad += order[u++] != r;
    }
    bad += start[nt] != u;
    for (; u < m; u++) bad += order[u] != -1;
    CHECK(bad == 0, "nf_scatter_plan m=%lld n_table=%lld: %lld entries differ from the sort", (long long) m,
          (long long) nt, (long long) bad);
    free(idx), free(order), free(start);
}

/* <gather(W), dy> == <W, scatter(dy)> (GATHER_ROWS' adjoint), in double */
static void test_scatter_adjoint(void) {
    const int64_t m = 40, k = 6, nt = 9, ld = 8;
    int32_t idx[40], order[40], start[10];
    for (int64_t r = 0; r < m; r++) idx[r] = (int32_t) (urand() % 11) - 1;
    nf_err err = {0};
    CHECK_RC(nf_scatter_plan(idx, m, nt, order, start, &err), NF_OK, &err);
    float W[72], dy[320], y[320], dW[72];
    for (int i = 0; i < 72; i++) W[i] = frand(), dW[i] = 5.0f;
    for (int i = 0; i < 320; i++) dy[i] = frand();
    nf_tensor ti = mk(NF_I32, m, idx), to = mk(NF_I32, m, order), ts = mk(NF_I32, nt + 1, start);
    nf_tensor tW = mk(NF_F32, nt * ld, W), tdy = mk(NF_F32, m * ld, dy), ty = mk(NF_F32, m * ld, dy);
    nf_tensor tdW = mk(NF_F32, nt * ld, dW);
    nf_graph g;
    nf_graph_init(&g, be, &err);
    const struct nf_gather sh = {.rows = m, .k = k, .n_table = nt, .ldw = ld, .ldy = ld, .scale = 0.5f};
    CHECK_RC(nf_gather_rows(&g, "gather", &sh, ti, tW, ty), NF_OK, &err);
    CHECK_RC(nf_scatter_add_rows(&g, "scatter", &sh, to, ts, tdy, tdW), NF_OK, &err);
    get(&ty, y);
    get(&tdW, dW);
    double a = 0.0, b = 0.0, mag = 0.0;
    int64_t gaps = 0;
    for (int64_t r = 0; r < m; r++)
        for (int64_t c = 0; c < k; c++) a += (double) y[r * ld + c] * dy[r * ld + c], mag += fabs(y[r * ld + c]);
    for (int64_t i = 0; i < nt; i++) {
        for (int64_t c = 0; c < k; c++) b += (double) W[i * ld + c] * dW[i * ld + c];
        for (int64_t c = k; c < ld; c++) gaps += dW[i * ld + c] != 5.0f;
    }
    CHECK(fabs(a - b) <= 1e-6 * (mag + 1.0) && gaps == 0,
          "scatter as gather's adjoint: %.9g vs %.9g, %lld gaps written", a, b, (long long) gaps);
    /* a plan too short for n_table: an error naming the op */
    const struct nf_gather big = {.rows = m, .k = k, .n_table = nt + 5, .ldw = ld, .ldy = ld};
    CHECK_RC(nf_scatter_add_rows(&g, "scatter", &big, to, ts, tdy, tdW), NF_ERR_SHAPE, &err);
    CHECK_MSG(&err, "SCATTER_ADD_ROWS");
    nf__tensor_free(&ti), nf__tensor_free(&to), nf__tensor_free(&ts), nf__tensor_free(&tW);
    nf__tensor_free(&tdy), nf__tensor_free(&ty), nf__tensor_free(&tdW);
}

/* clipping a view of an arena (the elements around it untouched) and SCALE in place */
static void test_clip_scale(void) {
    float a[3010], out[3010];
    for (int i = 0; i < 3010; i++) a[i] = frand();
    nf_tensor ta = mk(NF_F32, 3010, a), tn = mk(NF_F32, 1, NULL);
    nf_err err = {0};
    nf_graph g;
    nf_graph_init(&g, be, &err);
    CHECK_RC(nf_clip_grad_norm(&g, "clip", nf_view1(&ta, 5, 3000), 3000, 1.0f, tn), NF_OK, &err);
    float norm;
    get(&tn, &norm);
    get(&ta, out);
    double S = 0.0;
    for (int i = 5; i < 3005; i++) S += (double) a[i] * a[i];
    const double coef = 1.0 / (sqrt(S) + 1e-6);
    double worst = 0.0, after = 0.0;
    int64_t outside = 0;
    for (int i = 0; i < 3010; i++) {
        if (i < 5 || i >= 3005) {
            outside += out[i] != a[i];
            continue;
        }
        worst = fmax(worst, fabs(out[i] - a[i] * coef) / (fabs(a[i] * coef) + 1e-30));
        after += (double) out[i] * out[i];
    }
    CHECK(fabs(norm - sqrt(S)) <= 1e-6 * sqrt(S) && worst < 4e-7 && outside == 0 && fabs(sqrt(after) - 1.0) < 1e-5,
          "CLIP_GRAD_NORM: norm %.9g vs %.9g, rel err %.3g, norm after %.9g, %lld outside written", (double) norm,
          sqrt(S), worst, sqrt(after), (long long) outside);
    /* below max_norm: the gradients unchanged (coef clamped to 1) */
    CHECK_RC(nf_clip_grad_norm(&g, "clip", ta, 3010, 1e6f, tn), NF_OK, &err);
    float again[3010];
    get(&ta, again);
    CHECK(memcmp(again, out, sizeof(out)) == 0, "CLIP_GRAD_NORM below max_norm changed the gradients");
    /* SCALE in place, then accumulated */
    CHECK_RC(nf_scale(&g, "half", ta, ta, 3010, 0.5f, 0), NF_OK, &err);
    CHECK_RC(nf_scale(&g, "half", ta, ta, 3010, 2.0f, 1), NF_OK, &err);
    get(&ta, again);
    int64_t bad = 0;
    for (int i = 0; i < 3010; i++) bad += again[i] != 1.5f * out[i];
    CHECK(bad == 0, "SCALE in place (0.5x, then += 2x): %lld of 3010 wrong", (long long) bad);
    CHECK_RC(nf_scale(&g, "s", ta, tn, 2, 1.0f, 0), NF_ERR_SHAPE, &err);
    CHECK_MSG(&err, "SCALE");
    CHECK_RC(nf_clip_grad_norm(&g, "clip", ta, 3010, -1.0f, tn), NF_ERR_ARG, &err);
    CHECK_MSG(&err, "CLIP_GRAD_NORM");
    nf__tensor_free(&ta), nf__tensor_free(&tn);
}

/* nf_onecycle_at against torch's values, bit for bit */
static void test_onecycle(const char * path) {
    FILE * f = fopen(path, "rb");
    CHECK(f != NULL, "cannot open %s", path);
    if (!f) return;
    static char buf[1 << 17];
    const size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    cJSON * doc = cJSON_Parse(buf);
    const cJSON * sets = cJSON_GetObjectItem(doc, "settings");
    CHECK(cJSON_GetArraySize(sets) >= 2, "%s: no settings", path);
    const cJSON * st;
    cJSON_ArrayForEach(st, sets) {
        struct nf_onecycle oc;
        nf_onecycle_defaults(&oc, cJSON_GetObjectItem(st, "max_lr")->valuedouble,
                             (int64_t) cJSON_GetObjectItem(st, "total_steps")->valuedouble);
        oc.pct_start = cJSON_GetObjectItem(st, "pct_start")->valuedouble;
        oc.anneal_linear = strcmp(cJSON_GetObjectItem(st, "anneal_strategy")->valuestring, "linear") == 0;
        oc.div_factor = cJSON_GetObjectItem(st, "div_factor")->valuedouble;
        oc.final_div_factor = cJSON_GetObjectItem(st, "final_div_factor")->valuedouble;
        oc.cycle_momentum = cJSON_IsTrue(cJSON_GetObjectItem(st, "cycle_momentum"));
        oc.base_momentum = cJSON_GetObjectItem(st, "base_momentum")->valuedouble;
        oc.max_momentum = cJSON_GetObjectItem(st, "max_momentum")->valuedouble;
        const cJSON *lrs = cJSON_GetObjectItem(st, "lr"), *b1s = cJSON_GetObjectItem(st, "beta1");
        int64_t bad = 0, steps = 0;
        for (int64_t s = 0; s < cJSON_GetArraySize(lrs); s++, steps++) {
            const double want_lr = strtod(cJSON_GetArrayItem(lrs, (int) s)->valuestring, NULL);
            const double want_b1 = strtod(cJSON_GetArrayItem(b1s, (int) s)->valuestring, NULL);
            double lr = -1, b1 = -1;
            nf_err err = {0};
            CHECK_RC(nf_onecycle_at(&oc, s, &lr, &b1, &err), NF_OK, &err);
            if (memcmp(&lr, &want_lr, 8) != 0 || memcmp(&b1, &want_b1, 8) != 0) {
                if (!bad)
                    fprintf(stderr, "  %s step %lld: lr %.17g vs torch %.17g, beta1 %.17g vs %.17g\n",
                            cJSON_GetObjectItem(st, "name")->valuestring, (long long) s, lr, want_lr, b1, want_b1);
                bad++;
            }
        }
        CHECK(bad == 0 && steps == oc.total_steps + 1, "OneCycle '%s': %lld of %lld steps differ from torch",
              cJSON_GetObjectItem(st, "name")->valuestring, (long long) bad, (long long) steps);
        nf_err err = {0};
        CHECK_RC(nf_onecycle_at(&oc, oc.total_steps + 1, NULL, NULL, &err), NF_ERR_ARG, &err);
        CHECK_MSG(&err, "OneCycle");
    }
    cJSON_Delete(doc);
}

int main(int argc, char ** argv) {
    nf_err err = {0};
    const char * dev = argc > 2 ? argv[2] : "cpu";
    if (nf_backend_init(dev, NF_PRECISION_EXACT, &be, &err) != NF_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    test_plan(0, 3);
    test_plan(1, 1);
    test_plan(57, 6);
    test_plan(500, 120);
    CHECK_RC(nf_scatter_plan(NULL, -1, 3, NULL, NULL, &err), NF_ERR_ARG, &err);
    test_scatter_adjoint();
    test_clip_scale();
    if (argc > 1) test_onecycle(argv[1]);
    nf_backend_free(be);
    return nf_test_done("test-train-c");
}
