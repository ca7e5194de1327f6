/* test-train-b.c -- the typed calls of the training ops, set B (nf-ops.h),
 * on a device (argument; default cpu): the parameters they fill, Mitra's
 * packed [q k v] layout (dq, dk, dv written into one packed gradient
 * buffer, each its own columns), the optional outputs, the accumulation,
 * and errors naming the op. The numerics are tests/test-backend-ops.c's. */
#include "nf-test.h"
#include "nf-ops.h"

#include <math.h>
#include <stdlib.h>

static uint64_t rs = 777;
static float frand(void) {
    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
    return (float) ((rs >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
}

static nf_backend * be;

static nf_tensor mk(enum nf_dtype type, int nd, int64_t a, int64_t b, int64_t c, const void * data) {
    nf_tensor t;
    nf_err err = {0};
    const int64_t ne[3] = {a, b, c};
    if (nf__tensor_alloc(be, &t, type, nd, ne, "t", &err) != NF_OK) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    if (data) nf__tensor_upload(&t, data, &err);
    return t;
}

static void get(const nf_tensor * t, float * out) {
    nf_err err = {0};
    nf__tensor_download(t, out, &err);
}

static float * rnd(int64_t n) {
    float * p = malloc((size_t) n * sizeof(float));
    for (int64_t i = 0; i < n; i++) p[i] = frand();
    return p;
}

/* self-attention over `groups` sequences of S tokens, D = H * E, q k v
 * packed in rows of 3D: the gradients into a packed (tok, 3D) buffer
 * through nf_attention_backward, against the same op on separate q, k, v
 * buffers (ATTENTION_BACKWARD run directly): bit for bit */
static void test_attention_packed(int64_t groups, int64_t S, int64_t H, int64_t E) {
    const int64_t D = H * E, D3 = 3 * D, tok = groups * S, n3 = tok * D3;
    float * qkv = rnd(n3);
    float * dout = rnd(tok * D);
    nf_tensor tqkv = mk(NF_F32, 1, n3, 0, 0, qkv), to = mk(NF_F32, 1, tok * D, 0, 0, NULL);
    nf_tensor tdo = mk(NF_F32, 1, tok * D, 0, 0, dout), tg = mk(NF_F32, 1, n3, 0, 0, NULL);
    nf_tensor tst = mk(NF_F32, 1, 2 * groups * H * S, 0, 0, NULL);
    nf_err err = {0};
    nf_graph g;
    nf_graph_init(&g, be, &err);
    const struct nf_attn_layout L = {.groups = groups,
                                     .lq = S,
                                     .lk = S,
                                     .n_heads = H,
                                     .head_dim = E,
                                     .q_gs = S * D3,
                                     .q_ss = D3,
                                     .kv_gs = S * D3,
                                     .kv_ss = D3,
                                     .o_gs = S * D,
                                     .o_ss = D};
    CHECK_RC(nf_attention(&g, "fwd", &L, nf_view1(&tqkv, 0, n3), nf_view1(&tqkv, D, n3 - D),
                          nf_view1(&tqkv, 2 * D, n3 - 2 * D), to),
             NF_OK, &err);
    CHECK_RC(nf_attention_backward(&g, "bwd", &L, nf_view1(&tqkv, 0, n3), nf_view1(&tqkv, D, n3 - D),
                                   nf_view1(&tqkv, 2 * D, n3 - 2 * D), to, tdo, nf_view1(&tg, 0, n3),
                                   nf_view1(&tg, D, n3 - D), nf_view1(&tg, 2 * D, n3 - 2 * D), tst, 0),
             NF_OK, &err);
    /* the same on separate, contiguous (tok, D) copies of q, k, v */
    float *o = malloc((size_t) (tok * D) * sizeof(float)), *sep[3], *packed = malloc((size_t) n3 * sizeof(float));
    get(&to, o);
    get(&tg, packed);
    nf_tensor ts[3], td[3];
    for (int c = 0; c < 3; c++) {
        sep[c] = malloc((size_t) (tok * D) * sizeof(float));
        for (int64_t r = 0; r < tok; r++)
            for (int64_t e = 0; e < D; e++) sep[c][r * D + e] = qkv[r * D3 + c * D + e];
        ts[c] = mk(NF_F32, 1, tok * D, 0, 0, sep[c]);
        td[c] = mk(NF_F32, 1, tok * D, 0, 0, NULL);
    }
    nf_op op = {.type = NF_OP_ATTENTION_BACKWARD, .label = "direct", .n_src = 5, .n_dst = 4};
    op.src[0] = ts[0], op.src[1] = ts[1], op.src[2] = ts[2], op.src[3] = to, op.src[4] = tdo;
    op.dst[0] = td[0], op.dst[1] = td[1], op.dst[2] = td[2], op.dst[3] = tst;
    op.p.attention_backward = (struct nf_attention_backward_params){.n_groups = groups,
                                                                    .lq = S,
                                                                    .lk = S,
                                                                    .n_heads = H,
                                                                    .head_dim = E,
                                                                    .q_gs = S * D,
                                                                    .q_ss = D,
                                                                    .kv_gs = S * D,
                                                                    .kv_ss = D,
                                                                    .o_gs = S * D,
                                                                    .o_ss = D,
                                                                    .scale = 1.0f / sqrtf((float) E)};
    CHECK_RC(nf__op_run(be, &op, &err), NF_OK, &err);
    int64_t differ = 0;
    for (int c = 0; c < 3; c++) {
        get(&td[c], sep[c]);
        for (int64_t r = 0; r < tok; r++)
            for (int64_t e = 0; e < D; e++) differ += memcmp(&sep[c][r * D + e], &packed[r * D3 + c * D + e], 4) != 0;
        nf__tensor_free(&ts[c]);
        nf__tensor_free(&td[c]);
        free(sep[c]);
    }
    CHECK(differ == 0, "packed attention backward groups=%lld S=%lld H=%lld E=%lld: %lld elements differ",
          (long long) groups, (long long) S, (long long) H, (long long) E, (long long) differ);
    nf__tensor_free(&tqkv), nf__tensor_free(&to), nf__tensor_free(&tdo), nf__tensor_free(&tg), nf__tensor_free(&tst);
    free(qkv), free(dout), free(o), free(packed);
}

/* the embedding and label backward calls accumulate (twice = 2x the sums) */
static void test_token_grads(void) {
    const int64_t n = 5, F = 3, T = F + 1, D = 4, C = 3;
    float *z = rnd(n * F), *dt = rnd(n * T * D), yv[5], zero[12] = {0}, a[12], b[12];
    const int32_t yc[5] = {0, 2, 2, -1, 1};
    for (int i = 0; i < 5; i++) yv[i] = frand();
    nf_tensor tz = mk(NF_F32, 2, n, F, 0, z), tdt = mk(NF_F32, 3, n, T, D, dt);
    nf_tensor tw = mk(NF_F32, 1, D, 0, 0, zero), tb = mk(NF_F32, 1, D, 0, 0, zero);
    nf_tensor tyc = mk(NF_I32, 1, n, 0, 0, yc), tyv = mk(NF_F32, 1, n, 0, 0, yv);
    nf_tensor tE = mk(NF_F32, 2, C, D, 0, zero), tM = mk(NF_F32, 2, 1, D, 0, zero);
    nf_err err = {0};
    nf_graph g;
    nf_graph_init(&g, be, &err);
    for (int rep = 0; rep < 2; rep++) CHECK_RC(nf_embed_features_backward(&g, "emb", tz, tdt, tw, tb), NF_OK, &err);
    get(&tw, a);
    get(&tb, b);
    double worst = 0;
    for (int64_t d = 0; d < D; d++) {
        double sw = 0, sb = 0;
        for (int64_t r = 0; r < n; r++)
            for (int64_t j = 0; j < F; j++) {
                sw += (double) z[r * F + j] * dt[(r * T + 1 + j) * D + d];
                sb += dt[(r * T + 1 + j) * D + d];
            }
        worst = fmax(worst, fmax(fabs(a[d] - 2 * sw), fabs(b[d] - 2 * sb)));
    }
    CHECK(worst < 1e-5, "EMBED_FEATURES_BACKWARD twice: err %.3g", worst);
    CHECK_RC(nf_label_tokens_backward_class(&g, "lab", tyc, tdt, tE), NF_OK, &err);
    get(&tE, a);
    worst = 0;
    for (int64_t c = 0; c < C; c++)
        for (int64_t d = 0; d < D; d++) {
            double s = 0;
            for (int64_t r = 0; r < n; r++)
                if (yc[r] == c) s += dt[r * T * D + d];
            worst = fmax(worst, fabs(a[c * D + d] - s));
        }
    CHECK(worst < 1e-6, "LABEL_TOKENS_BACKWARD class (a y of -1 ignored): err %.3g", worst);
    nf__tensor_upload(&tw, zero, &err);
    nf__tensor_upload(&tb, zero, &err);
    CHECK_RC(nf_label_tokens_backward_value(&g, "lab", tyv, tdt, tw, tb), NF_OK, &err);
    CHECK_RC(nf_label_tokens_backward_mask(&g, "lab", tdt, tM), NF_OK, &err);
    get(&tw, a);
    get(&tb, b);
    float m[4];
    get(&tM, m);
    worst = 0;
    for (int64_t d = 0; d < D; d++) {
        double sw = 0, sb = 0;
        for (int64_t r = 0; r < n; r++) sw += (double) yv[r] * dt[r * T * D + d], sb += dt[r * T * D + d];
        worst = fmax(worst, fmax(fabs(a[d] - sw), fmax(fabs(b[d] - sb), fabs(m[d] - sb))));
    }
    CHECK(worst < 1e-6, "LABEL_TOKENS_BACKWARD value / mask: err %.3g", worst);
    /* a label tensor too short for dtok's rows: an error naming the op */
    nf_tensor short_y = nf__tensor_view(&tyc, 0, 1, (const int64_t[]){2});
    CHECK_RC(nf_label_tokens_backward_class(&g, "lab", short_y, tdt, tE), NF_ERR_SHAPE, &err);
    CHECK_MSG(&err, "LABEL_TOKENS_BACKWARD");
    nf__tensor_free(&tz), nf__tensor_free(&tdt), nf__tensor_free(&tw), nf__tensor_free(&tb);
    nf__tensor_free(&tyc), nf__tensor_free(&tyv), nf__tensor_free(&tE), nf__tensor_free(&tM);
    free(z), free(dt);
}

/* the losses, with and without their gradient (a tensor without a buffer) */
static void test_losses(void) {
    const int64_t n = 6, C = 3, ldl = 4;
    float * l = rnd(n * ldl);
    const int32_t y[6] = {0, 1, 2, 2, 1, 0};
    nf_tensor tl = mk(NF_F32, 1, n * ldl, 0, 0, l), ty = mk(NF_I32, 1, n, 0, 0, y);
    nf_tensor tloss = mk(NF_F32, 1, 1, 0, 0, NULL), tdl = mk(NF_F32, 2, n, C, 0, NULL), none = {0};
    nf_err err = {0};
    nf_graph g;
    nf_graph_init(&g, be, &err);
    float loss1, loss2, dl[18];
    CHECK_RC(nf_cross_entropy(&g, "ce", tl, n, C, ldl, ty, tloss, none, 1.0f / (float) n), NF_OK, &err);
    get(&tloss, &loss1);
    CHECK_RC(nf_cross_entropy(&g, "ce", tl, n, C, ldl, ty, tloss, tdl, 1.0f / (float) n), NF_OK, &err);
    get(&tloss, &loss2);
    get(&tdl, dl);
    double ref = 0, worst = 0;
    for (int64_t r = 0; r < n; r++) {
        double mx = l[r * ldl], s = 0;
        for (int64_t c = 1; c < C; c++) mx = fmax(mx, l[r * ldl + c]);
        for (int64_t c = 0; c < C; c++) s += exp(l[r * ldl + c] - mx);
        ref += mx + log(s) - l[r * ldl + y[r]];
        for (int64_t c = 0; c < C; c++)
            worst = fmax(worst, fabs(dl[r * C + c] - (exp(l[r * ldl + c] - mx) / s - (c == y[r])) / (double) n));
    }
    ref /= (double) n;
    CHECK(loss1 == loss2 && fabs(loss1 - ref) < 1e-6 && worst < 1e-7,
          "CROSS_ENTROPY: loss %.9g / %.9g vs %.9g, dlogits err %.3g", (double) loss1, (double) loss2, ref, worst);
    float t[6], dp[6];
    for (int i = 0; i < 6; i++) t[i] = frand();
    nf_tensor tt = mk(NF_F32, 1, n, 0, 0, t), tdp = mk(NF_F32, 1, n, 0, 0, NULL);
    CHECK_RC(nf_mse_loss(&g, "mse", tl, n, ldl, tt, tloss, tdp, (float) (2.0 / (double) n)), NF_OK, &err);
    get(&tloss, &loss1);
    get(&tdp, dp);
    ref = 0, worst = 0;
    for (int64_t i = 0; i < n; i++) {
        const double d = (double) l[i * ldl] - t[i];
        ref += d * d / (double) n;
        worst = fmax(worst, fabs(dp[i] - 2.0 * d / (double) n));
    }
    CHECK(fabs(loss1 - ref) < 1e-6 && worst < 1e-6, "MSE_LOSS: loss %.9g vs %.9g, dpred err %.3g", (double) loss1, ref,
          worst);
    /* ldl below c: an argument error naming the op */
    CHECK_RC(nf_cross_entropy(&g, "ce", tl, n, C, C - 1, ty, tloss, none, 1.0f), NF_ERR_ARG, &err);
    CHECK_MSG(&err, "CROSS_ENTROPY");
    nf__tensor_free(&tl), nf__tensor_free(&ty), nf__tensor_free(&tloss), nf__tensor_free(&tdl);
    nf__tensor_free(&tt), nf__tensor_free(&tdp);
    free(l);
}

int main(int argc, char ** argv) {
    nf_err err = {0};
    const char * dev = argc > 1 ? argv[1] : "cpu";
    if (nf_backend_init(dev, NF_PRECISION_EXACT, &be, &err) != NF_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    test_attention_packed(1, 1, 1, 1);
    test_attention_packed(3, 5, 2, 4);
    test_attention_packed(2, 17, 4, 32);
    test_token_grads();
    test_losses();
    nf_backend_free(be);
    return nf_test_done("test-train-b");
}
