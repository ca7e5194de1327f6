/* test-bf16-ops.c [DEVICE] -- a backend's --precision bf16-autocast kernels
 * (cpu: src/backends/cpu/cpu-bf16.c; opencl: opencl-bf16.c; cuda: cuda-bf16.c;
 * docs/precision.md; default cpu) against the arithmetic
 * written out here: inputs rounded to bf16, sums in double, outputs rounded to
 * bf16 where torch's autocast rounds. The kernels sum in fp32, so a result may
 * land one bf16 ulp away where the exact value sits at a rounding boundary:
 * allowed in a small share of the elements, never more than one ulp. Without
 * the input rounding (or with the wrong number of roundings) about a third of
 * the elements move. Exit 77 (skip) where the CPU has no bf16 kernels. */
#include "nf-test.h"
#include "nf-impl.h"
#include "backends/cpu/cpu-bf16.h"

#include <math.h>
#include <stdlib.h>

static uint64_t rs = 777;
static float frand(void) {
    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
    return (float) ((rs >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
}

/* round to bf16, nearest even (written here, not the library's) */
static float bf(double v) {
    float f = (float) v;
    uint32_t u;
    memcpy(&u, &f, 4);
    const uint32_t lsb = (u >> 16) & 1u;
    u = (u + 0x7fffu + lsb) & 0xffff0000u;
    memcpy(&f, &u, 4);
    return f;
}
/* |a - b| in bf16 ulps of b (b a bf16 value) */
static double ulps(float a, float b) {
    if (a == b) return 0.0;
    const double e = b == 0.0f ? -133.0 : floor(log2(fabs((double) b)));
    return fabs((double) a - (double) b) / ldexp(1.0, (int) e - 7);
}

static nf_backend * be;

static nf_tensor mk(int64_t n, const float * data) {
    nf_tensor t;
    nf_err err = {0};
    int64_t ne[1] = {n};
    nf__tensor_alloc(be, &t, NF_F32, 1, ne, "t", &err);
    if (data) nf__tensor_upload(&t, data, &err);
    return t;
}
/* the tensor's n floats, downloaded (malloc'ed) */
static float * fetch(const nf_tensor * t, int64_t n) {
    float * h = malloc((size_t) n * 4);
    nf_err err = {0};
    CHECK_RC(nf__tensor_download(t, h, &err), NF_OK, &err);
    return h;
}

/* the share of elements off by one ulp; fails on any off by more */
static double tally(const char * what, const float * got, const float * want, int64_t n) {
    int64_t off = 0;
    double worst = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const double d = ulps(got[i], want[i]);
        off += d > 0.0;
        worst = d > worst ? d : worst;
    }
    CHECK(worst <= 1.0, "%s: an element %.2f bf16 ulps away", what, worst);
    printf("%-44s %lld of %lld elements one ulp off\n", what, (long long) off, (long long) n);
    return (double) off / (double) n;
}

/* stream (p.bf16_stream, SpTransformer's bf16 residual): y = R(y0 + t), y0 bf16 values */
static void test_linear(int64_t m, int64_t k, int64_t n, int act, int acc, int twice, int stream) {
    const int64_t ldx = k + 2, ldy = n + 1;
    float *x = malloc((size_t) (m * ldx) * 4), *W = malloc((size_t) (n * k) * 4), *b = malloc((size_t) n * 4),
          *y0 = malloc((size_t) (m * ldy) * 4), *want = malloc((size_t) (m * n) * 4),
          *got = malloc((size_t) (m * n) * 4);
    for (int64_t i = 0; i < m * ldx; i++) x[i] = frand();
    for (int64_t i = 0; i < n * k; i++) W[i] = frand() * 0.3f;
    for (int64_t i = 0; i < n; i++) b[i] = frand();
    /* y0 in {-1, 0, 1}: y0 + t is exact in fp32 for a bf16 t of magnitude >= 2^-16, so y - y0 recovers t */
    for (int64_t i = 0; i < m * ldy; i++) y0[i] = stream ? bf(frand() * 2.0f) : roundf(frand());
    nf_tensor tx = mk(m * ldx, x), tW = mk(n * k, W), tb = mk(n, b), ty = mk(m * ldy, y0);
    int64_t wne[2] = {n, k};
    nf_tensor vW = nf__tensor_view(&tW, 0, 2, wne);
    nf_op op = {.type = NF_OP_LINEAR, .label = "bf16", .n_src = 3, .n_dst = 1};
    op.src[0] = tx;
    op.src[1] = vW;
    op.src[2] = tb;
    op.dst[0] = ty;
    op.p.linear = (struct nf_linear_params){.m = m,
                                            .k = k,
                                            .n = n,
                                            .ldx = ldx,
                                            .ldy = ldy,
                                            .act = act,
                                            .accumulate = acc,
                                            .bias_after_round = twice,
                                            .bf16_stream = stream};
    nf_err err = {0};
    CHECK_RC(nf__op_run(be, &op, &err), NF_OK, &err);
    float * yh = fetch(&ty, m * ldy);
    for (int64_t r = 0; r < m; r++)
        for (int64_t o = 0; o < n; o++) {
            double s = 0.0;
            for (int64_t c = 0; c < k; c++) s += (double) bf(x[r * ldx + c]) * (double) bf(W[o * k + c]);
            float t = twice ? bf((double) bf(s) + (double) bf(b[o])) : bf(s + (double) bf(b[o]));
            if (act == NF_ACT_GELU) t = bf(0.5 * t * (1.0 + erf(t / sqrt(2.0))));
            want[r * n + o] = stream && acc ? bf((double) y0[r * ldy + o] + (double) t) : t;
            got[r * n + o] = acc && !stream ? yh[r * ldy + o] - y0[r * ldy + o] : yh[r * ldy + o];
        }
    char what[96];
    snprintf(what, sizeof(what), "LINEAR %lldx%lldx%lld act=%d acc=%d twice=%d%s", (long long) m, (long long) k,
             (long long) n, act, acc, twice, stream ? " stream" : "");
    CHECK(tally(what, got, want, m * n) < 0.02, "%s: over 2%% of the elements one ulp off", what);
    for (int64_t r = 0; r + 1 < m; r++) CHECK(yh[r * ldy + n] == y0[r * ldy + n], "LINEAR wrote into padding");
    free(yh);
    nf__tensor_free(&tx);
    nf__tensor_free(&tW);
    nf__tensor_free(&tb);
    nf__tensor_free(&ty);
    free(x), free(W), free(b), free(y0), free(want), free(got);
}

/* ATTENTION's parameters: G groups of lq query rows against lk keys, H heads of E, the
 * queries and outputs packed (rows H E apart, groups lq rows apart), key and value rows
 * kv_ss apart (groups lk rows apart) */
static struct nf_attention_params attn_params(int64_t G, int64_t H, int64_t E, int64_t lq, int64_t lk, int64_t kv_ss,
                                              float scale) {
    return (struct nf_attention_params){.n_groups = G,
                                        .lq = lq,
                                        .lk = lk,
                                        .n_heads = H,
                                        .head_dim = E,
                                        .q_gs = lq * H * E,
                                        .q_ss = H * E,
                                        .kv_gs = lk * kv_ss,
                                        .kv_ss = kv_ss,
                                        .o_gs = lq * H * E,
                                        .o_ss = H * E,
                                        .scale = scale};
}

/* an ATTENTION's outputs (to, nq floats) against want: a score one fp32 ulp off (another
 * order of its sum) can move a bf16-rounded probability by 2^-8 of it, so where the sum over
 * j cancels (|o| under 1/16 of mag = sum P |v|) that can be several ulps of o: there the
 * bound is mag / 256 (+ o's rounding); elsewhere tally's (one ulp, in under 5 %) */
static void check_attention_out(const char * what, const nf_tensor * to, const float * want, const float * mag,
                                int64_t nq) {
    float * oh = fetch(to, nq);
    for (int64_t i = 0; i < nq; i++)
        if (fabs(want[i]) < mag[i] / 16.0f) {
            CHECK(fabs((double) oh[i] - want[i]) <= mag[i] / 256.0 + fabs(want[i]) / 128.0,
                  "%s: element %lld: %g, not %g (cancelling)", what, (long long) i, oh[i], want[i]);
            oh[i] = want[i];
        }
    CHECK(tally(what, oh, want, nq) < 0.05, "%s: over 5%% of the elements one ulp off", what);
    free(oh);
}

static void test_attention(int64_t G, int64_t H, int64_t E, int64_t lq, int64_t lk) {
    const int64_t D = H * E, nq = G * lq * D, nk = G * lk * D;
    float *q = malloc((size_t) nq * 4), *k = malloc((size_t) nk * 4), *v = malloc((size_t) nk * 4),
          *want = malloc((size_t) nq * 4), *mag = malloc((size_t) nq * 4);
    for (int64_t i = 0; i < nq; i++) q[i] = frand() * 2.0f;
    for (int64_t i = 0; i < nk; i++) k[i] = frand() * 2.0f, v[i] = frand();
    nf_tensor tq = mk(nq, q), tk = mk(nk, k), tv = mk(nk, v), to = mk(nq, NULL);
    nf_op op = {.type = NF_OP_ATTENTION, .label = "bf16", .n_src = 3, .n_dst = 1};
    op.src[0] = tq, op.src[1] = tk, op.src[2] = tv, op.dst[0] = to;
    const float scale = 1.0f / sqrtf((float) E);
    op.p.attention = attn_params(G, H, E, lq, lk, D, scale);
    nf_err err = {0};
    CHECK_RC(nf__op_run(be, &op, &err), NF_OK, &err);
    double * p = malloc((size_t) lk * sizeof(double));
    for (int64_t g = 0; g < G; g++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < lq; i++) {
                const float * qi = q + g * lq * D + i * D + h * E;
                double mx = -INFINITY, l = 0.0;
                for (int64_t j = 0; j < lk; j++) {
                    double s = 0.0;
                    for (int64_t e = 0; e < E; e++) s += (double) bf(qi[e]) * bf(k[g * lk * D + j * D + h * E + e]);
                    p[j] = (double) (float) ((float) s * scale); /* scores in fp32 */
                    mx = p[j] > mx ? p[j] : mx;
                }
                for (int64_t j = 0; j < lk; j++) {
                    p[j] = exp(p[j] - mx);
                    l += p[j];
                    p[j] = bf(p[j]); /* the numerators in bf16 */
                }
                for (int64_t e = 0; e < E; e++) {
                    double o = 0.0, a = 0.0;
                    for (int64_t j = 0; j < lk; j++) {
                        o += p[j] * bf(v[g * lk * D + j * D + h * E + e]);
                        a += p[j] * fabs(bf(v[g * lk * D + j * D + h * E + e]));
                    }
                    want[g * lq * D + i * D + h * E + e] = bf(o / l);
                    mag[g * lq * D + i * D + h * E + e] = (float) (a / l);
                }
            }
    char what[96];
    snprintf(what, sizeof(what), "ATTENTION G=%lld H=%lld E=%lld lq=%lld lk=%lld", (long long) G, (long long) H,
             (long long) E, (long long) lq, (long long) lk);
    check_attention_out(what, &to, want, mag, nq); /* mag: sum p |v| / l, the numerators' share */
    nf__tensor_free(&tq);
    nf__tensor_free(&tk);
    nf__tensor_free(&tv);
    nf__tensor_free(&to);
    free(q), free(k), free(v), free(want), free(mag), free(p);
}

/* CONV1D: y (+)= bf16(sum over taps of bf16(x) · bf16(W) + bf16(b)), zeros past
 * the ends; accumulating rounds the bf16 + bf16 sum again (SpTransformer's
 * stream is bf16 under autocast). Two sequences, dilation and "same" padding
 * as a resblock's, and an unpadded one. */
static void test_conv1d(int64_t S, int64_t L, int64_t cin, int64_t cout, int64_t K, int64_t dil, int64_t pad, int acc) {
    float *x = malloc((size_t) (S * L * cin) * 4), *W = malloc((size_t) (cout * cin * K) * 4),
          *b = malloc((size_t) cout * 4), *y0 = malloc((size_t) (S * L * cout) * 4),
          *want = malloc((size_t) (S * L * cout) * 4);
    for (int64_t i = 0; i < S * L * cin; i++) x[i] = frand();
    for (int64_t i = 0; i < cout * cin * K; i++) W[i] = frand() * 0.2f;
    for (int64_t i = 0; i < cout; i++) b[i] = frand();
    for (int64_t i = 0; i < S * L * cout; i++) y0[i] = bf(frand() * 2.0f);
    nf_tensor tx = mk(S * L * cin, x), tW = mk(cout * cin * K, W), tb = mk(cout, b), ty = mk(S * L * cout, y0);
    int64_t wne[3] = {cout, cin, K};
    nf_tensor vW = nf__tensor_view(&tW, 0, 3, wne);
    nf_op op = {.type = NF_OP_CONV1D, .label = "bf16", .n_src = 3, .n_dst = 1};
    op.src[0] = tx;
    op.src[1] = vW;
    op.src[2] = tb;
    op.dst[0] = ty;
    op.p.conv1d = (struct nf_conv1d_params){.n_seq = S,
                                            .len = L,
                                            .cout = cout,
                                            .cin = cin,
                                            .ksize = K,
                                            .dilation = dil,
                                            .pad = pad,
                                            .ldx = cin,
                                            .ldy = cout,
                                            .x_gs = L * cin,
                                            .y_gs = L * cout,
                                            .accumulate = acc};
    nf_err err = {0};
    CHECK_RC(nf__op_run(be, &op, &err), NF_OK, &err);
    for (int64_t s = 0; s < S; s++)
        for (int64_t r = 0; r < L; r++)
            for (int64_t o = 0; o < cout; o++) {
                double sum = 0.0;
                for (int64_t k = 0; k < K; k++) {
                    const int64_t ri = r + k * dil - pad;
                    if (ri < 0 || ri >= L) continue;
                    for (int64_t c = 0; c < cin; c++)
                        sum += (double) bf(x[(s * L + ri) * cin + c]) * (double) bf(W[(o * cin + c) * K + k]);
                }
                const float t = bf(sum + (double) bf(b[o]));
                const int64_t i = (s * L + r) * cout + o;
                want[i] = acc ? bf((double) y0[i] + (double) t) : t;
            }
    char what[96];
    snprintf(what, sizeof(what), "CONV1D %lldx%lld %lld->%lld k=%lld dil=%lld pad=%lld acc=%d", (long long) S,
             (long long) L, (long long) cin, (long long) cout, (long long) K, (long long) dil, (long long) pad, acc);
    float * got = fetch(&ty, S * L * cout);
    CHECK(tally(what, got, want, S * L * cout) < 0.02, "%s: over 2%% of the elements one ulp off", what);
    free(got);
    nf__tensor_free(&tx);
    nf__tensor_free(&tW);
    nf__tensor_free(&tb);
    nf__tensor_free(&ty);
    free(x), free(W), free(b), free(y0), free(want);
}

/* BATCH_NORM (eval, fused ReLU): bf16(relu(bf16(x) a + (b - mean a))), a = w / sqrt(var + eps) in fp32 */
static void test_batch_norm(int64_t m, int64_t C, int relu) {
    float *x = malloc((size_t) (m * C) * 4), *prm = malloc((size_t) (4 * C) * 4), *want = malloc((size_t) (m * C) * 4);
    for (int64_t i = 0; i < m * C; i++) x[i] = frand() * 3.0f;
    for (int64_t i = 0; i < 4 * C; i++) prm[i] = frand();
    for (int64_t c = 0; c < C; c++) prm[3 * C + c] = 0.5f + prm[3 * C + c] * prm[3 * C + c]; /* var > 0 */
    nf_tensor tx = mk(m * C, x), tw = mk(C, prm), tb = mk(C, prm + C), tm = mk(C, prm + 2 * C), tv = mk(C, prm + 3 * C),
              ty = mk(m * C, NULL);
    nf_op op = {.type = NF_OP_BATCH_NORM, .label = "bf16", .n_src = 5, .n_dst = 1};
    op.src[0] = tx, op.src[1] = tw, op.src[2] = tb, op.src[3] = tm, op.src[4] = tv;
    op.dst[0] = ty;
    op.p.batch_norm = (struct nf_batch_norm_params){.m = m, .c = C, .ldx = C, .ldy = C, .eps = 1e-5f, .relu = relu};
    nf_err err = {0};
    CHECK_RC(nf__op_run(be, &op, &err), NF_OK, &err);
    for (int64_t r = 0; r < m; r++)
        for (int64_t c = 0; c < C; c++) {
            const double a = (double) prm[c] / sqrt((double) prm[3 * C + c] + 1e-5);
            const double v = (double) bf(x[r * C + c]) * a + ((double) prm[C + c] - (double) prm[2 * C + c] * a);
            want[r * C + c] = relu && v < 0.0 ? 0.0f : bf(v);
        }
    char what[96];
    snprintf(what, sizeof(what), "BATCH_NORM %lldx%lld relu=%d", (long long) m, (long long) C, relu);
    float * got = fetch(&ty, m * C);
    CHECK(tally(what, got, want, m * C) < 0.02, "%s: over 2%% of the elements one ulp off", what);
    free(got);
    nf__tensor_free(&tx), nf__tensor_free(&tw), nf__tensor_free(&tb), nf__tensor_free(&tm), nf__tensor_free(&tv);
    nf__tensor_free(&ty);
    free(x), free(prm), free(want);
}

/* y = LINEAR(x, W) (m x k x n, no bias), fetched; x, W tensors of m*k, n*k floats */
static float * lin(nf_tensor tx, nf_tensor tW, int64_t m, int64_t k, int64_t n, int act) {
    nf_tensor ty = mk(m * n, NULL);
    int64_t wne[2] = {n, k};
    nf_op op = {.type = NF_OP_LINEAR, .label = "bf16", .n_src = 2, .n_dst = 1};
    op.src[0] = tx, op.src[1] = nf__tensor_view(&tW, 0, 2, wne), op.dst[0] = ty;
    op.p.linear = (struct nf_linear_params){.m = m, .k = k, .n = n, .ldx = k, .ldy = n, .act = act};
    nf_err err = {0};
    CHECK_RC(nf__op_run(be, &op, &err), NF_OK, &err);
    float * y = fetch(&ty, m * n);
    nf__tensor_free(&ty);
    return y;
}

static void run1(nf_op * op) {
    nf_err err = {0};
    CHECK_RC(nf__op_run(be, op, &err), NF_OK, &err);
}

/* ---- SpTransformer's rules (cpu-bf16-spt.c, kernels-bf16-spt.cl): every activation a
 * bf16 value, so the inputs here are bf16 values ---------------------------------------- */

/* R(softmax(s)) over n values, in double: R(exp(s - max) / sum) */
static void softmax_bf(double * s, int64_t n) {
    double mx = s[0], l = 0.0;
    for (int64_t j = 1; j < n; j++) mx = s[j] > mx ? s[j] : mx;
    for (int64_t j = 0; j < n; j++) l += (s[j] = exp(s[j] - mx));
    for (int64_t j = 0; j < n; j++) s[j] = bf(s[j] / l);
}

/* ATTENTION with p.bf16_stream (torch's unfused bf16 attention): s = R(R(q·kᵀ) · scale),
 * P = R(softmax(s)), o = R(P·V). Group g's keys start gs rows after group g - 1's (gs <
 * lk: SpTransformer's overlapping windows). q and k are multiples of 1/8 (|x| <= 3), so q·kᵀ
 * is exact in fp32 in any order: a score one fp32 ulp off could round to bf16 a step of
 * 2^-8 away and move its row's outputs by several ulps, and the kernels sum in their own
 * order (oneDNN's on cpu). As in test_attention, a probability one ulp off moves an output
 * whose sum cancels by up to 2^-8 sum P |v|. */
static void test_spt_attention(int64_t G, int64_t H, int64_t E, int64_t lq, int64_t lk, int64_t gs) {
    const int64_t D = H * E, nq = G * lq * D, nk = ((G - 1) * gs + lk) * D;
    float *q = malloc((size_t) nq * 4), *k = malloc((size_t) nk * 4), *v = malloc((size_t) nk * 4),
          *want = malloc((size_t) nq * 4), *mag = malloc((size_t) nq * 4);
    for (int64_t i = 0; i < nq; i++) q[i] = roundf(frand() * 24.0f) / 8.0f;
    for (int64_t i = 0; i < nk; i++) k[i] = roundf(frand() * 24.0f) / 8.0f, v[i] = bf(frand());
    nf_tensor tq = mk(nq, q), tk = mk(nk, k), tv = mk(nk, v), to = mk(nq, NULL);
    nf_op op = {.type = NF_OP_ATTENTION, .label = "bf16", .n_src = 3, .n_dst = 1};
    op.src[0] = tq, op.src[1] = tk, op.src[2] = tv, op.dst[0] = to;
    const float scale = 1.0f / sqrtf((float) E);
    op.p.attention = attn_params(G, H, E, lq, lk, D, scale);
    op.p.attention.kv_gs = gs * D;
    op.p.attention.bf16_stream = 1;
    run1(&op);
    double * p = malloc((size_t) lk * sizeof(double));
    for (int64_t g = 0; g < G; g++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < lq; i++) {
                const float * qi = q + g * lq * D + i * D + h * E;
                const int64_t o0 = g * lq * D + i * D + h * E;
                for (int64_t j = 0; j < lk; j++) {
                    double s = 0.0;
                    for (int64_t e = 0; e < E; e++) s += (double) qi[e] * k[(g * gs + j) * D + h * E + e];
                    p[j] = bf((double) bf(s) * scale);
                }
                softmax_bf(p, lk);
                for (int64_t e = 0; e < E; e++) {
                    double o = 0.0, a = 0.0;
                    for (int64_t j = 0; j < lk; j++) {
                        o += p[j] * v[(g * gs + j) * D + h * E + e];
                        a += p[j] * fabs(v[(g * gs + j) * D + h * E + e]);
                    }
                    want[o0 + e] = bf(o);
                    mag[o0 + e] = (float) a;
                }
            }
    char what[96];
    snprintf(what, sizeof(what), "ATTENTION stream G=%lld H=%lld E=%lld lq=%lld lk=%lld gs=%lld", (long long) G,
             (long long) H, (long long) E, (long long) lq, (long long) lk, (long long) gs);
    check_attention_out(what, &to, want, mag, nq);
    free(p), free(mag);
    nf__tensor_free(&tq), nf__tensor_free(&tk), nf__tensor_free(&tv), nf__tensor_free(&to);
    free(q), free(k), free(v), free(want);
}

/* AXIAL_POS: x = R(x + R(e0 + e1)) */
static void test_axial_pos(int64_t S, int64_t L, int64_t D, int64_t n1) {
    const int64_t ld = D + 3, n0 = (L + n1 - 1) / n1;
    float *x = malloc((size_t) (S * L * ld) * 4), *e = malloc((size_t) ((n0 + n1) * D) * 4),
          *want = malloc((size_t) (S * L * D) * 4), *got = malloc((size_t) (S * L * D) * 4);
    for (int64_t i = 0; i < S * L * ld; i++) x[i] = bf(frand() * 4.0f);
    for (int64_t i = 0; i < (n0 + n1) * D; i++) e[i] = frand();
    nf_tensor tx = mk(S * L * ld, x), te0 = mk(n0 * D, e), te1 = mk(n1 * D, e + n0 * D);
    nf_op op = {.type = NF_OP_AXIAL_POS, .label = "bf16", .n_src = 2, .n_dst = 1};
    op.src[0] = te0, op.src[1] = te1, op.dst[0] = tx;
    op.p.axial_pos = (struct nf_axial_pos_params){.n_seq = S, .len = L, .dim = D, .n1 = n1, .ld = ld, .gs = L * ld};
    run1(&op);
    float * xh = fetch(&tx, S * L * ld);
    for (int64_t s = 0; s < S; s++)
        for (int64_t t = 0; t < L; t++)
            for (int64_t c = 0; c < D; c++) {
                const float pe = bf((double) (e[(t / n1) * D + c] + e[n0 * D + (t % n1) * D + c]));
                want[(s * L + t) * D + c] = bf((double) x[s * L * ld + t * ld + c] + pe);
                got[(s * L + t) * D + c] = xh[s * L * ld + t * ld + c];
            }
    char what[96];
    snprintf(what, sizeof(what), "AXIAL_POS %lldx%lldx%lld n1=%lld", (long long) S, (long long) L, (long long) D,
             (long long) n1);
    CHECK(tally(what, got, want, S * L * D) == 0.0, "%s: elements off", what);
    free(xh);
    nf__tensor_free(&tx), nf__tensor_free(&te0), nf__tensor_free(&te1);
    free(x), free(e), free(want), free(got);
}

/* BUCKET_ROUTE (the sort net) then BUCKET_GATHER: bucket means R(R(sum) / bkt), scores
 * R(R(qbar·kbar) · scale), R(softmax), the first maximum and its probability; the
 * routed rows R(p · k), the own rows as they are */
static void test_route_gather(int64_t S, int64_t nb, int64_t B, int64_t H, int64_t E) {
    const int64_t D = H * E, L = nb * B, n = S * L * D, nc = S * nb * 2 * B * D;
    float *k = malloc((size_t) n * 4), *q = malloc((size_t) n * 4), *v = malloc((size_t) n * 4);
    for (int64_t i = 0; i < n; i++) q[i] = bf(frand() * 4.0f), k[i] = bf(frand() * 4.0f), v[i] = bf(frand());
    nf_tensor tq = mk(n, q), tk = mk(n, k), tv = mk(n, v), tp = mk(S * H * nb * 2, NULL), tkc = mk(nc, NULL),
              tvc = mk(nc, NULL), tsel;
    int64_t ne[1] = {S * H * nb};
    nf_err err = {0};
    CHECK_RC(nf__tensor_alloc(be, &tsel, NF_I32, 1, ne, "sel", &err), NF_OK, &err);
    const float scale = 1.0f / sqrtf((float) E);
    nf_op op = {.type = NF_OP_BUCKET_ROUTE, .label = "bf16", .n_src = 2, .n_dst = 2};
    op.src[0] = tq, op.src[1] = tk, op.dst[0] = tsel, op.dst[1] = tp;
    op.p.bucket_route = (struct nf_bucket_route_params){.n_seq = S,
                                                        .n_buckets = nb,
                                                        .bucket = B,
                                                        .n_heads = H,
                                                        .head_dim = E,
                                                        .q_ss = D,
                                                        .q_gs = L * D,
                                                        .k_ss = D,
                                                        .k_gs = L * D,
                                                        .scale = scale};
    run1(&op);
    int32_t * sel = malloc((size_t) (S * H * nb) * 4);
    CHECK_RC(nf__tensor_download(&tsel, sel, &err), NF_OK, &err);
    float * prob = fetch(&tp, S * H * nb * 2);
    double *m = malloc((size_t) (2 * nb * E) * sizeof(double)), *R = malloc((size_t) nb * sizeof(double));
    int64_t same = 0, pr_off = 0;
    for (int64_t s = 0; s < S; s++)
        for (int64_t h = 0; h < H; h++) {
            for (int64_t z = 0; z < 2; z++)
                for (int64_t u = 0; u < nb; u++)
                    for (int64_t e = 0; e < E; e++) {
                        double a = 0.0;
                        for (int64_t i = 0; i < B; i++) a += (z ? k : q)[s * L * D + (u * B + i) * D + h * E + e];
                        m[(z * nb + u) * E + e] = bf((double) bf(a) / (double) B);
                    }
            for (int64_t u = 0; u < nb; u++) {
                for (int64_t w = 0; w < nb; w++) {
                    double d = 0.0;
                    for (int64_t e = 0; e < E; e++) d += m[u * E + e] * m[(nb + w) * E + e];
                    R[w] = bf((double) bf(d) * scale);
                }
                softmax_bf(R, nb);
                int64_t best = 0;
                for (int64_t w = 1; w < nb; w++) best = R[w] > R[best] ? w : best;
                const int64_t i = (s * H + h) * nb + u;
                same += sel[i] == best;
                pr_off += prob[2 * i] != (float) R[sel[i] >= 0 && sel[i] < nb ? sel[i] : 0];
            }
        }
    printf("%-44s %lld of %lld choices differ, %lld probabilities\n", "BUCKET_ROUTE", (long long) (S * H * nb - same),
           (long long) (S * H * nb), (long long) pr_off);
    CHECK(same >= S * H * nb * 95 / 100 && pr_off * 20 <= S * H * nb, "BUCKET_ROUTE: choices or probabilities off");
    /* the gather of the device's own choices */
    op = (nf_op){.type = NF_OP_BUCKET_GATHER, .label = "bf16", .n_src = 4, .n_dst = 2};
    op.src[0] = tk, op.src[1] = tv, op.src[2] = tsel, op.src[3] = tp, op.dst[0] = tkc, op.dst[1] = tvc;
    op.p.bucket_gather = (struct nf_bucket_gather_params){.n_seq = S,
                                                          .n_buckets = nb,
                                                          .bucket = B,
                                                          .n_heads = H,
                                                          .head_dim = E,
                                                          .kv_ss = D,
                                                          .kv_gs = L * D,
                                                          .reuse_keys = 1};
    run1(&op);
    float *kc = fetch(&tkc, nc), *vc = fetch(&tvc, nc), *wk = malloc((size_t) nc * 4), *wv = malloc((size_t) nc * 4);
    for (int64_t s = 0; s < S; s++)
        for (int64_t u = 0; u < nb; u++)
            for (int64_t j = 0; j < 2 * B; j++)
                for (int64_t h = 0; h < H; h++) {
                    const int64_t i = (s * H + h) * nb + u, vs = sel[i] < 0 ? 0 : sel[i] >= nb ? nb - 1 : sel[i];
                    for (int64_t e = 0; e < E; e++) {
                        const int64_t d = ((s * nb + u) * 2 * B + j) * D + h * E + e;
                        if (j < B) {
                            const float kk = k[s * L * D + (vs * B + j) * D + h * E + e];
                            wk[d] = wv[d] = bf((double) (prob[2 * i] * kk));
                        } else {
                            wk[d] = k[s * L * D + (u * B + j - B) * D + h * E + e];
                            wv[d] = v[s * L * D + (u * B + j - B) * D + h * E + e];
                        }
                    }
                }
    CHECK(tally("BUCKET_GATHER keys", kc, wk, nc) == 0.0, "BUCKET_GATHER: keys off");
    CHECK(tally("BUCKET_GATHER values (reuse_keys)", vc, wv, nc) == 0.0, "BUCKET_GATHER: values off");
    nf__tensor_free(&tq), nf__tensor_free(&tk), nf__tensor_free(&tv), nf__tensor_free(&tp), nf__tensor_free(&tsel);
    nf__tensor_free(&tkc), nf__tensor_free(&tvc);
    free(q), free(k), free(v), free(sel), free(prob), free(m), free(R), free(kc), free(vc), free(wk), free(wv);
}

/* the cpu mode keeps bf16 copies of LINEAR's inputs (W from its first use, a LAYER_NORM's
 * or GELU's output for the next LINEAR): whatever writes their fp32 values (an upload, an
 * op) must be seen. Each LINEAR here equals the same LINEAR on fresh tensors. */
/* nf__bf16_expf (the bf16 attention's exp, cpu-bf16.h): within an ulp of expl on every
 * 997th float of [-87.33, 0], 0 below, exact at 0, NaN kept */
static void test_expf(void) {
    const float lo = -87.33f;
    uint32_t b0, b1;
    const float z = -0.0f;
    memcpy(&b0, &z, sizeof(b0));
    memcpy(&b1, &lo, sizeof(b1));
    double worst = 0.0;
    int64_t n = 0;
    for (uint32_t b = b0; b <= b1; b += 997) {
        float x;
        memcpy(&x, &b, sizeof(x));
        const long double w = expl((long double) x);
        int e;
        frexpl(w, &e);
        const long double u = w < 0x1p-126L ? 0x1p-149L : ldexpl(1.0L, e - 24);
        const double d = (double) (fabsl((long double) nf__bf16_expf(x) - w) / u);
        worst = d > worst ? d : worst;
        n++;
    }
    CHECK(worst < 1.0, "bf16 exp: %.3f ulp from expl", worst);
    CHECK(nf__bf16_expf(0.0f) == 1.0f && nf__bf16_expf(-0.0f) == 1.0f, "bf16 exp(0) is not 1");
    CHECK(nf__bf16_expf(-87.34f) == 0.0f && nf__bf16_expf(-INFINITY) == 0.0f, "bf16 exp below -87.33 is not 0");
    CHECK(isnan(nf__bf16_expf(NAN)), "bf16 exp(NaN) is not NaN");
    printf("%-44s %lld points, worst %.3f ulp\n", "bf16 attention exp", (long long) n, worst);
}

/* ATTENTION over Mitra's packed [k v] rows (one tensor, k at 0, v at D), lq = lk = 64:
 * the cpu's bf16 matmul path, which keeps the bits of that region between calls */
static float * attn_kv(nf_tensor tq, nf_tensor tkv, int64_t l, int64_t H, int64_t E) {
    const int64_t D = H * E;
    nf_tensor to = mk(l * D, NULL);
    int64_t kne[1] = {l * 2 * D}, vne[1] = {l * 2 * D - D};
    nf_op op = {.type = NF_OP_ATTENTION, .label = "bf16", .n_src = 3, .n_dst = 1};
    op.src[0] = tq, op.src[1] = nf__tensor_view(&tkv, 0, 1, kne), op.src[2] = nf__tensor_view(&tkv, D, 1, vne);
    op.dst[0] = to;
    op.p.attention = attn_params(1, H, E, l, l, 2 * D, 0.25f);
    run1(&op);
    float * o = fetch(&to, l * D);
    nf__tensor_free(&to);
    return o;
}

static void test_kv_copies(void) {
    const int64_t l = 64, H = 2, E = 16, D = H * E;
    float *q = malloc((size_t) (l * D) * 4), *kv1 = malloc((size_t) (l * 2 * D) * 4),
          *kv2 = malloc((size_t) (l * 2 * D) * 4);
    for (int64_t i = 0; i < l * D; i++) q[i] = frand() * 2.0f;
    for (int64_t i = 0; i < l * 2 * D; i++) kv1[i] = frand() * 2.0f, kv2[i] = frand() * 2.0f;
    nf_tensor tq = mk(l * D, q), tkv = mk(l * 2 * D, kv1), tkv1 = mk(l * 2 * D, kv1), tkv2 = mk(l * 2 * D, kv2);
    float *o1 = attn_kv(tq, tkv, l, H, E), *o1b = attn_kv(tq, tkv, l, H, E);
    CHECK(memcmp(o1, o1b, (size_t) (l * D) * 4) == 0, "ATTENTION on kept key/value bits differs");
    nf_err err = {0};
    CHECK_RC(nf__tensor_upload(&tkv, kv2, &err), NF_OK, &err); /* keys and values rewritten by an upload */
    float *o2 = attn_kv(tq, tkv, l, H, E), *o2f = attn_kv(tq, tkv2, l, H, E);
    CHECK(memcmp(o2, o2f, (size_t) (l * D) * 4) == 0, "ATTENTION after an upload of k, v: stale bf16 bits");
    CHECK(memcmp(o1, o2, (size_t) (l * D) * 4) != 0, "the two k, v give the same ATTENTION");
    nf_op cp = {.type = NF_OP_COPY, .label = "bf16", .n_src = 1, .n_dst = 1};
    cp.src[0] = tkv1, cp.dst[0] = tkv, cp.p.copy.n = l * 2 * D;
    run1(&cp); /* and by an op */
    float * o3 = attn_kv(tq, tkv, l, H, E);
    CHECK(memcmp(o1, o3, (size_t) (l * D) * 4) == 0, "ATTENTION after an op wrote k, v: stale bf16 bits");
    printf("%-44s stale copies none\n", "bf16 copies of attention's k, v");
    nf__tensor_free(&tq), nf__tensor_free(&tkv), nf__tensor_free(&tkv1), nf__tensor_free(&tkv2);
    free(q), free(kv1), free(kv2), free(o1), free(o1b), free(o2), free(o2f), free(o3);
}

static void test_copies(void) {
    const int64_t m = 24, k = 40, n = 36;
    float *a = malloc((size_t) (m * k) * 4), *w1 = malloc((size_t) (n * k) * 4), *w2 = malloc((size_t) (n * k) * 4);
    for (int64_t i = 0; i < m * k; i++) a[i] = frand();
    for (int64_t i = 0; i < n * k; i++) w1[i] = frand(), w2[i] = frand();
    nf_tensor tx = mk(m * k, a), tW = mk(n * k, w1), tW2 = mk(n * k, w2);
    float * y1 = lin(tx, tW, m, k, n, NF_ACT_NONE);
    nf_err err = {0};
    CHECK_RC(nf__tensor_upload(&tW, w2, &err), NF_OK, &err); /* W rewritten by an upload */
    float *y2 = lin(tx, tW, m, k, n, NF_ACT_NONE), *y2f = lin(tx, tW2, m, k, n, NF_ACT_NONE);
    CHECK(memcmp(y2, y2f, (size_t) (m * n) * 4) == 0, "LINEAR after an upload of W: a stale bf16 W");
    CHECK(memcmp(y1, y2, (size_t) (m * n) * 4) != 0, "the two W give the same LINEAR");
    nf_tensor tW1 = mk(n * k, w1);
    nf_op cp = {.type = NF_OP_COPY, .label = "bf16", .n_src = 1, .n_dst = 1};
    cp.src[0] = tW1, cp.dst[0] = tW, cp.p.copy.n = n * k;
    run1(&cp); /* W rewritten by an op */
    float * y3 = lin(tx, tW, m, k, n, NF_ACT_NONE);
    CHECK(memcmp(y1, y3, (size_t) (m * n) * 4) == 0, "LINEAR after an op wrote W: a stale bf16 W");
    /* LAYER_NORM's output, rewritten before the LINEAR that reads it */
    float * g = malloc((size_t) k * 8);
    for (int64_t i = 0; i < 2 * k; i++) g[i] = frand();
    nf_tensor tg = mk(k, g), tb = mk(k, g + k), tn = mk(m * k, NULL);
    nf_op ln = {.type = NF_OP_LAYER_NORM, .label = "bf16", .n_src = 3, .n_dst = 1};
    ln.src[0] = tx, ln.src[1] = tg, ln.src[2] = tb, ln.dst[0] = tn;
    ln.p.layer_norm = (struct nf_layer_norm_params){.m = m, .k = k, .ldx = k, .ldy = k, .eps = 1e-5f};
    run1(&ln);
    CHECK_RC(nf__tensor_upload(&tn, a, &err), NF_OK, &err);
    float * y4 = lin(tn, tW, m, k, n, NF_ACT_NONE);
    CHECK(memcmp(y1, y4, (size_t) (m * n) * 4) == 0, "LINEAR after an upload of its x: a stale bf16 x");
    run1(&ln);
    nf_tensor tn2 = mk(m * k, NULL);
    nf_op cp2 = {.type = NF_OP_COPY, .label = "bf16", .n_src = 1, .n_dst = 1};
    cp2.src[0] = tn, cp2.dst[0] = tn2, cp2.p.copy.n = m * k;
    run1(&cp2);
    float * y5 = lin(tn2, tW, m, k, n, NF_ACT_GELU); /* from fresh fp32 values */
    run1(&ln);
    float * y6 = lin(tn, tW, m, k, n, NF_ACT_GELU); /* from LAYER_NORM's bf16 copy */
    CHECK(memcmp(y5, y6, (size_t) (m * n) * 4) == 0, "LINEAR on LAYER_NORM's bf16 copy differs");
    cp.src[0] = tx, cp.dst[0] = tn, cp.p.copy.n = m * k;
    run1(&ln);
    run1(&cp); /* x rewritten by an op after LAYER_NORM */
    float * y7 = lin(tn, tW, m, k, n, NF_ACT_NONE);
    CHECK(memcmp(y1, y7, (size_t) (m * n) * 4) == 0, "LINEAR after an op wrote its x: a stale bf16 x");
    /* ATTENTION reads a LINEAR's (bf16-valued) outputs in place: the same as from copies */
    nf_tensor t3[3], c3[3], to[2];
    for (int i = 0; i < 3; i++) {
        t3[i] = mk(m * n, NULL), c3[i] = mk(m * n, NULL);
        nf_op l = {.type = NF_OP_LINEAR, .label = "bf16", .n_src = 2, .n_dst = 1};
        int64_t wne[2] = {n, k};
        l.src[0] = i == 1 ? tn : tx, l.src[1] = nf__tensor_view(i == 2 ? &tW2 : &tW, 0, 2, wne), l.dst[0] = t3[i];
        l.p.linear = (struct nf_linear_params){.m = m, .k = k, .n = n, .ldx = k, .ldy = n};
        run1(&l);
    }
    for (int pass = 0; pass < 2; pass++) {
        if (pass)
            for (int i = 0; i < 3; i++) {
                cp.src[0] = t3[i], cp.dst[0] = c3[i], cp.p.copy.n = m * n;
                run1(&cp);
            }
        to[pass] = mk(m * n, NULL);
        nf_op at = {.type = NF_OP_ATTENTION, .label = "bf16", .n_src = 3, .n_dst = 1};
        for (int i = 0; i < 3; i++) at.src[i] = pass ? c3[i] : t3[i];
        at.dst[0] = to[pass];
        at.p.attention = attn_params(2, 3, n / 3, m / 2, m / 2, n, 0.25f);
        run1(&at);
    }
    float *o0 = fetch(&to[0], m * n), *o1 = fetch(&to[1], m * n);
    CHECK(memcmp(o0, o1, (size_t) (m * n) * 4) == 0, "ATTENTION on LINEAR outputs in place differs");
    for (int i = 0; i < 3; i++) nf__tensor_free(&t3[i]), nf__tensor_free(&c3[i]);
    nf__tensor_free(&to[0]), nf__tensor_free(&to[1]);
    free(o0), free(o1);
    printf("%-44s stale copies none\n", "bf16 copies of W and x");
    nf__tensor_free(&tx), nf__tensor_free(&tW), nf__tensor_free(&tW2), nf__tensor_free(&tW1);
    nf__tensor_free(&tg), nf__tensor_free(&tb), nf__tensor_free(&tn), nf__tensor_free(&tn2);
    free(a), free(w1), free(w2), free(g), free(y1), free(y2), free(y2f), free(y3), free(y4), free(y5), free(y6);
    free(y7);
}

/* the cpu mode keeps W packed in the layout its matmul picks, which may differ by the
 * number of rows m: W used at several m, and W with one row rewritten by an op, equal
 * the same LINEAR on a fresh W tensor */
static void test_packed_w(void) {
    const int64_t k = 72, n = 40, ms[3] = {24, 1, 300};
    float *a = malloc((size_t) (300 * k) * 4), *w1 = malloc((size_t) (n * k) * 4), *w2 = malloc((size_t) (n * k) * 4);
    for (int64_t i = 0; i < 300 * k; i++) a[i] = frand();
    for (int64_t i = 0; i < n * k; i++) w1[i] = frand(), w2[i] = frand();
    nf_tensor tx = mk(300 * k, a), tW = mk(n * k, w1);
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < 3; i++) {
            nf_tensor tf = mk(n * k, w1);
            float *y = lin(tx, tW, ms[i], k, n, NF_ACT_NONE), *yf = lin(tx, tf, ms[i], k, n, NF_ACT_NONE);
            CHECK(memcmp(y, yf, (size_t) (ms[i] * n) * 4) == 0, "LINEAR with W kept packed, m = %lld: differs",
                  (long long) ms[i]);
            nf__tensor_free(&tf);
            free(y), free(yf);
        }
    nf_tensor t2 = mk(n * k, w2);
    int64_t row[1] = {k};
    nf_op cp = {.type = NF_OP_COPY, .label = "bf16", .n_src = 1, .n_dst = 1};
    cp.src[0] = nf__tensor_view(&t2, 5 * k, 1, row), cp.dst[0] = nf__tensor_view(&tW, 5 * k, 1, row);
    cp.p.copy.n = k;
    run1(&cp); /* row 5 of W rewritten by an op */
    memcpy(w1 + 5 * k, w2 + 5 * k, (size_t) k * 4);
    nf_tensor tf = mk(n * k, w1);
    float *y = lin(tx, tW, 24, k, n, NF_ACT_NONE), *yf = lin(tx, tf, 24, k, n, NF_ACT_NONE);
    CHECK(memcmp(y, yf, (size_t) (24 * n) * 4) == 0, "LINEAR after an op wrote one row of W: a stale packed W");
    printf("%-44s stale copies none\n", "packed W at m = 24, 1, 300; one row written");
    nf__tensor_free(&tx), nf__tensor_free(&tW), nf__tensor_free(&t2), nf__tensor_free(&tf);
    free(a), free(w1), free(w2), free(y), free(yf);
}

int main(int argc, char ** argv) {
    nf_err err = {0};
    const char * dev = argc > 1 ? argv[1] : "cpu";
    const int rc = nf_backend_init(dev, NF_PRECISION_BF16_AUTOCAST, &be, &err);
    if (rc == NF_ERR_DEVICE && strstr(err.msg, "AVX512_BF16")) {
        printf("skipped: %s\n", err.msg);
        return 77;
    }
    CHECK_RC(rc, NF_OK, &err);
    if (rc != NF_OK) return 1;
    CHECK(nf_backend_precision(be) == NF_PRECISION_BF16_AUTOCAST, "precision not recorded");
    CHECK(strstr(nf_backend_precision_detail(be), "bf16-autocast") != NULL, "precision detail does not name the mode");
    test_linear(37, 70, 45, NF_ACT_NONE, 0, 0, 0);
    test_linear(37, 70, 45, NF_ACT_NONE, 0, 1, 0);
    test_linear(64, 128, 96, NF_ACT_GELU, 0, 0, 0);
    test_linear(20, 96, 33, NF_ACT_NONE, 1, 0, 0);
    test_copies();
    test_attention(3, 2, 16, 20, 33);
    test_attention(2, 4, 32, 130, 40); /* two blocks of query rows */
    test_attention(6, 2, 32, 130, 80); /* the cpu's bf16 matmuls: a full block and a last one, 12 tasks */
    test_attention(3, 1, 16, 64, 64);  /* the fewest keys and rows they take */
    /* SpTransformer's ops (docs/precision.md "SpTransformer under CPU autocast") */
    test_conv1d(2, 150, 24, 20, 11, 4, 20, 1); /* a resblock's conv2: same padding, into the residual */
    test_conv1d(1, 90, 16, 12, 3, 1, 1, 0);
    test_conv1d(1, 1100, 8, 16, 5, 2, 4, 1); /* the cpu's blocks of 512 output rows, and a remainder */
    test_batch_norm(300, 40, 1);
    test_batch_norm(64, 24, 0);
    test_linear(20, 96, 33, NF_ACT_NONE, 1, 0, 1); /* to_out / ff.w2 into the bf16 residual */
    test_spt_attention(3, 2, 8, 40, 80, 80);       /* local heads: 2 windows of keys */
    test_spt_attention(2, 3, 8, 64, 128, 128);     /* sinkhorn heads: routed + own bucket (cpu: the matmuls) */
    test_spt_attention(2, 2, 16, 64, 128, 128);    /* the cpu's matmuls: one chunk of groups */
    test_spt_attention(1, 2, 20, 37, 75, 75);      /* 4-row and 16-wide blocks with remainders */
    test_axial_pos(2, 50, 24, 8);
    test_route_gather(2, 6, 16, 3, 8);
    /* last: their frand() draws leave the other tests' inputs as they were */
    test_spt_attention(4, 2, 32, 64, 192, 64);   /* the model's windows: 3 of keys, overlapping; its head size */
    test_spt_attention(11, 2, 16, 64, 128, 128); /* the cpu's chunks of 8 groups, and one of 3 */
    test_packed_w();
    test_kv_copies();
    test_expf();
    nf_backend_free(be);
    char name[64];
    snprintf(name, sizeof(name), "bf16-ops %s", dev);
    return nf_test_done(name);
}
