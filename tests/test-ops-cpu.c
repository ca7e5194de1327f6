/* test-ops-cpu.c -- every cpu op against a naive double-precision loop, and
 * the quantile / bucketize edge cases of torch.quantile + torch.bucketize. */
#include "nf-test.h"
#include "nf-impl.h"
#include "backends/cpu/cpu-kernels.h"

#include <math.h>
#include <stdlib.h>

static uint64_t rs = 12345;
static float frand(void) {
    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
    return (float) ((rs >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
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
/* t (an owner, passed by value and discarded) reshaped: the result takes
 * over the ownership, unlike a view */
static nf_tensor shaped(nf_tensor t, int nd, int64_t a, int64_t b, int64_t c) {
    int64_t ne[3] = {a, b, c};
    nf_tensor v = nf__tensor_view(&t, 0, nd, ne);
    v.owner = t.owner;
    return v;
}
static float * host(const nf_tensor * t) { return (float *) ((char *) t->buf->handle + t->offs); }

static void test_linear(int64_t m, int64_t k, int64_t n, int act, int acc, int bias) {
    int64_t ldx = k + 3, ldy = n + 1;
    float *x = malloc((size_t) (m * ldx) * 4), *W = malloc((size_t) (n * k) * 4), *b = malloc((size_t) n * 4),
          *y0 = malloc((size_t) (m * ldy) * 4);
    for (int64_t i = 0; i < m * ldx; i++) x[i] = frand();
    for (int64_t i = 0; i < n * k; i++) W[i] = frand();
    for (int64_t i = 0; i < n; i++) b[i] = frand();
    for (int64_t i = 0; i < m * ldy; i++) y0[i] = frand();
    nf_tensor tx = mk(m * ldx, x), tW = shaped(mk(n * k, W), 2, n, k, 0), tb = mk(n, b), ty = mk(m * ldy, y0);
    nf_op op = {.type = NF_OP_LINEAR, .label = "test", .n_src = bias ? 3 : 2, .n_dst = 1};
    op.src[0] = tx;
    op.src[1] = tW;
    op.src[2] = tb;
    op.dst[0] = ty;
    op.p.linear.m = m;
    op.p.linear.k = k;
    op.p.linear.n = n;
    op.p.linear.ldx = ldx;
    op.p.linear.ldy = ldy;
    op.p.linear.act = act;
    op.p.linear.accumulate = acc;
    nf_err err = {0};
    CHECK_RC(nf__op_run(be, &op, &err), NF_OK, &err);
    double worst = 0;
    for (int64_t r = 0; r < m; r++)
        for (int64_t o = 0; o < n; o++) {
            double s = bias ? b[o] : 0.0;
            for (int64_t c = 0; c < k; c++) s += (double) x[r * ldx + c] * W[o * k + c];
            if (act) s = 0.5 * s * (1.0 + erf(s / sqrt(2.0)));
            if (acc) s += y0[r * ldy + o];
            double e = fabs(s - host(&ty)[r * ldy + o]) / (1.0 + fabs(s));
            if (e > worst) worst = e;
        }
    /* padding between rows untouched */
    for (int64_t r = 0; r + 1 < m; r++)
        CHECK(host(&ty)[r * ldy + n] == y0[r * ldy + n], "LINEAR wrote into the row padding");
    CHECK(worst < 1e-5 * sqrt((double) k), "LINEAR m=%lld k=%lld n=%lld act=%d acc=%d: rel err %.3e", (long long) m,
          (long long) k, (long long) n, act, acc, worst);
    nf__tensor_free(&tx);
    nf__tensor_free(&tW);
    nf__tensor_free(&tb);
    nf__tensor_free(&ty);
    free(x);
    free(W);
    free(b);
    free(y0);
}

static void test_layer_norm(int64_t m, int64_t k) {
    int64_t ld = k + 2;
    float *x = malloc((size_t) (m * ld) * 4), *g = malloc((size_t) k * 4), *b = malloc((size_t) k * 4);
    for (int64_t i = 0; i < m * ld; i++) x[i] = 3.0f * frand() + 1.0f;
    for (int64_t i = 0; i < k; i++) {
        g[i] = 1.0f + 0.1f * frand();
        b[i] = 0.1f * frand();
    }
    nf_tensor tx = mk(m * ld, x), tg = mk(k, g), tb = mk(k, b), ty = mk(m * ld, NULL);
    nf_op op = {.type = NF_OP_LAYER_NORM, .label = "test", .n_src = 3, .n_dst = 1};
    op.src[0] = tx;
    op.src[1] = tg;
    op.src[2] = tb;
    op.dst[0] = ty;
    op.p.layer_norm.m = m;
    op.p.layer_norm.k = k;
    op.p.layer_norm.ldx = ld;
    op.p.layer_norm.ldy = ld;
    op.p.layer_norm.eps = 1e-5f;
    nf_err err = {0};
    CHECK_RC(nf__op_run(be, &op, &err), NF_OK, &err);
    double worst = 0;
    for (int64_t r = 0; r < m; r++) {
        double mu = 0, var = 0;
        for (int64_t c = 0; c < k; c++) mu += x[r * ld + c];
        mu /= (double) k;
        for (int64_t c = 0; c < k; c++) var += (x[r * ld + c] - mu) * (x[r * ld + c] - mu);
        var /= (double) k;
        for (int64_t c = 0; c < k; c++) {
            double want = (x[r * ld + c] - mu) / sqrt(var + 1e-5) * g[c] + b[c];
            double e = fabs(want - host(&ty)[r * ld + c]);
            if (e > worst) worst = e;
        }
    }
    CHECK(worst < 2e-5, "LAYER_NORM m=%lld k=%lld: err %.3e", (long long) m, (long long) k, worst);
    nf__tensor_free(&tx);
    nf__tensor_free(&tg);
    nf__tensor_free(&tb);
    nf__tensor_free(&ty);
    free(x);
    free(g);
    free(b);
}

/* row-mode and feature-mode layouts of Mitra */
static void test_attention(int64_t rows, int64_t T, int64_t H, int64_t E, int row_mode, int64_t lk_rows) {
    const int64_t D = H * E;
    const int64_t nq = rows * T * D, nk = (row_mode ? lk_rows : rows) * T * D;
    float *q = malloc((size_t) nq * 4), *k = malloc((size_t) nk * 4), *v = malloc((size_t) nk * 4);
    for (int64_t i = 0; i < nq; i++) q[i] = 2.0f * frand();
    for (int64_t i = 0; i < nk; i++) {
        k[i] = 2.0f * frand();
        v[i] = frand();
    }
    nf_tensor tq = mk(nq, q), tk = mk(nk, k), tv = mk(nk, v), to = mk(nq, NULL);
    nf_op op = {.type = NF_OP_ATTENTION, .label = "test", .n_src = 3, .n_dst = 1};
    op.src[0] = tq;
    op.src[1] = tk;
    op.src[2] = tv;
    op.dst[0] = to;
    op.p.attention.n_heads = H;
    op.p.attention.head_dim = E;
    op.p.attention.scale = 1.0f / sqrtf((float) E);
    if (row_mode) {
        op.p.attention.n_groups = T;
        op.p.attention.lq = rows;
        op.p.attention.lk = lk_rows;
        op.p.attention.q_gs = op.p.attention.kv_gs = op.p.attention.o_gs = D;
        op.p.attention.q_ss = op.p.attention.kv_ss = op.p.attention.o_ss = T * D;
    } else {
        op.p.attention.n_groups = rows;
        op.p.attention.lq = T;
        op.p.attention.lk = T;
        op.p.attention.q_gs = op.p.attention.kv_gs = op.p.attention.o_gs = T * D;
        op.p.attention.q_ss = op.p.attention.kv_ss = op.p.attention.o_ss = D;
    }
    nf_err err = {0};
    CHECK_RC(nf__op_run(be, &op, &err), NF_OK, &err);
    const struct nf_attention_params * p = &op.p.attention;
    double worst = 0;
    double * s = malloc((size_t) p->lk * sizeof(double));
    for (int64_t g = 0; g < p->n_groups; g++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < p->lq; i++) {
                const float * qi = q + g * p->q_gs + i * p->q_ss + h * E;
                double mx = -1e300, sum = 0;
                for (int64_t j = 0; j < p->lk; j++) {
                    const float * kj = k + g * p->kv_gs + j * p->kv_ss + h * E;
                    double d = 0;
                    for (int64_t e = 0; e < E; e++) d += (double) qi[e] * kj[e];
                    s[j] = d * p->scale;
                    if (s[j] > mx) mx = s[j];
                }
                for (int64_t j = 0; j < p->lk; j++) {
                    s[j] = exp(s[j] - mx);
                    sum += s[j];
                }
                for (int64_t e = 0; e < E; e++) {
                    double o = 0;
                    for (int64_t j = 0; j < p->lk; j++) o += s[j] / sum * v[g * p->kv_gs + j * p->kv_ss + h * E + e];
                    double err2 = fabs(o - host(&to)[g * p->o_gs + i * p->o_ss + h * E + e]);
                    if (err2 > worst) worst = err2;
                }
            }
    CHECK(worst < 1e-5, "ATTENTION %s rows=%lld T=%lld H=%lld E=%lld lk=%lld: err %.3e", row_mode ? "row" : "feature",
          (long long) rows, (long long) T, (long long) H, (long long) E, (long long) p->lk, worst);
    /* a negative stride (rows before the tensors' start) is refused before anything runs */
    const int64_t strides[6] = {p->q_gs, p->q_ss, p->kv_gs, p->kv_ss, p->o_gs, p->o_ss};
    for (int which = 0; which < 6; which++) {
        nf_op bad = op;
        int64_t * f[6] = {&bad.p.attention.q_gs,  &bad.p.attention.q_ss, &bad.p.attention.kv_gs,
                          &bad.p.attention.kv_ss, &bad.p.attention.o_gs, &bad.p.attention.o_ss};
        *f[which] = -strides[which];
        CHECK_RC(nf__op_run(be, &bad, &err), NF_ERR_ARG, &err);
        CHECK_MSG(&err, "negative stride");
    }
    free(s);
    nf__tensor_free(&tq);
    nf__tensor_free(&tk);
    nf__tensor_free(&tv);
    nf__tensor_free(&to);
    free(q);
    free(k);
    free(v);
}

/* quantile + bucketize: hand-derived values */
static void run_quantile(const float * col, int64_t n, float * B) {
    nf_tensor tx = shaped(mk(n, col), 2, n, 1, 0), tB = shaped(mk(999, NULL), 2, 1, 999, 0);
    nf_op op = {.type = NF_OP_QUANTILE, .label = "test", .n_src = 1, .n_dst = 1};
    op.src[0] = tx;
    op.dst[0] = tB;
    op.p.quantile.nq = 999;
    op.p.quantile.q_denom = 1000;
    nf_err err = {0};
    CHECK_RC(nf__op_run(be, &op, &err), NF_OK, &err);
    memcpy(B, host(&tB), 999 * 4);
    nf__tensor_free(&tx);
    nf__tensor_free(&tB);
}

static void run_bucketize(const float * xs, int64_t ns, const float * xq, int64_t nq, float * zs, float * zq) {
    float B[999];
    run_quantile(xs, ns, B);
    nf_tensor txs = shaped(mk(ns, xs), 2, ns, 1, 0), txq = shaped(mk(nq, xq), 2, nq, 1, 0),
              tB = shaped(mk(999, B), 2, 1, 999, 0);
    nf_tensor tzs = shaped(mk(ns, NULL), 2, ns, 1, 0), tzq = shaped(mk(nq, NULL), 2, nq, 1, 0);
    nf_op op = {.type = NF_OP_BUCKETIZE_NORM, .label = "test", .n_src = 3, .n_dst = 2};
    op.src[0] = txs;
    op.src[1] = txq;
    op.src[2] = tB;
    op.dst[0] = tzs;
    op.dst[1] = tzq;
    nf_err err = {0};
    CHECK_RC(nf__op_run(be, &op, &err), NF_OK, &err);
    memcpy(zs, host(&tzs), (size_t) ns * 4);
    memcpy(zq, host(&tzq), (size_t) nq * 4);
    nf__tensor_free(&txs);
    nf__tensor_free(&txq);
    nf__tensor_free(&tB);
    nf__tensor_free(&tzs);
    nf__tensor_free(&tzq);
}

static void test_quantile_edges(void) {
    float B[999];
    /* 0..4 unsorted: pos = q*4; q=0.5 -> exactly v[2]; q=0.001 -> 0.004 */
    const float a[5] = {3, 0, 4, 1, 2};
    run_quantile(a, 5, B);
    CHECK(B[499] == 2.0f, "median of 0..4 = %g", B[499]);
    CHECK(B[0] == fmaf(0.001f * 4.0f, 1.0f, 0.0f), "q=0.001 boundary %g", B[0]);
    CHECK(B[998] < 4.0f && B[998] > 3.99f, "q=0.999 boundary %g", B[998]);
    for (int k = 1; k < 999; k++) CHECK(B[k] >= B[k - 1], "boundaries non-decreasing at %d", k);
    /* a single row: every boundary is that value */
    const float one[1] = {7.5f};
    run_quantile(one, 1, B);
    int all = 1;
    for (int k = 0; k < 999; k++) all &= B[k] == 7.5f;
    CHECK(all, "n=1: all boundaries equal the value");
    /* ties: [1,1,1,2]: pos = q*3 < 2 -> 1, between 2 and 3 -> lerp(1,2) */
    const float t[4] = {1, 2, 1, 1};
    run_quantile(t, 4, B);
    CHECK(B[665] == 1.0f, "ties: q=0.666 -> pos 1.998 -> 1, got %g", B[665]);
    CHECK(B[899] > 1.0f && B[899] < 2.0f, "ties: q=0.9 interpolates, got %g", B[899]);

    /* bucketize: count of boundaries strictly below x */
    float zs[5], zq[4];
    const float q4[4] = {-10.0f, 0.0f, 4.0f, 100.0f};
    run_bucketize(a, 5, q4, 4, zs, zq);
    /* x=0 -> bucket 0 (no boundary < 0); x=4 -> bucket 999 (all boundaries < 4) */
    CHECK(zq[0] == zq[1], "queries at and below the minimum share bucket 0: %g vs %g", zq[0], zq[1]);
    CHECK(zq[2] == zq[3], "queries at and above the maximum share bucket 999: %g vs %g", zq[2], zq[3]);
    CHECK(zq[0] < 0 && zq[3] > 0, "standardized: below mean < 0 < above mean");
    CHECK(zs[1] == zq[1] && zs[2] == zq[2], "support value 0 and 4 bucket like queries 0 and 4");
    double mean = 0, var = 0;
    for (int i = 0; i < 5; i++) mean += zs[i];
    mean /= 5;
    for (int i = 0; i < 5; i++) var += (zs[i] - mean) * (zs[i] - mean);
    var /= 5;
    CHECK(fabs(mean) < 1e-6 && fabs(var - 1.0) < 1e-5, "support z has mean 0 (%g) and variance 1 (%g)", mean, var);
    /* constant column: variance 0 -> z = 0 everywhere */
    const float c[3] = {5, 5, 5}, cq[2] = {4, 6};
    float cz[3], czq[2];
    run_bucketize(c, 3, cq, 2, cz, czq);
    CHECK(cz[0] == 0 && cz[1] == 0 && cz[2] == 0 && czq[0] == 0 && czq[1] == 0, "constant column -> all zeros");
    /* exact index check: values 0..999 as support -> boundaries at k*0.999 */
    float big[1000], bq[3] = {0.5f, 0.001f * 999.0f, 1.0f};
    for (int i = 0; i < 1000; i++) big[i] = (float) i;
    run_quantile(big, 1000, B);
    CHECK(B[0] == 0.001f * 999.0f, "B_1 of 0..999 = float(0.001f*999), got %.9g", B[0]);
    float bz[1000], bzq[3];
    run_bucketize(big, 1000, bq, 3, bz, bzq);
    CHECK(bzq[0] == bzq[1], "0.5 and 0.999 (= B_1) both bucket 0");
    CHECK(bzq[2] > bzq[1], "1.0 > B_1 buckets to 1");
}

/* QUANTILE + BUCKETIZE_NORM against a naive reference: boundaries from a
 * plain insertion sort, bucket = linear count of boundaries < x, moments in
 * double. Several columns with ties, integers and a constant one. */
static int cmp_f(const void * a, const void * b) {
    float x = *(const float *) a, y = *(const float *) b;
    return (x > y) - (x < y);
}
static void test_bucketize_naive(int64_t ns, int64_t nq, int64_t F) {
    float *xs = malloc((size_t) (ns * F) * 4), *xq = malloc((size_t) (nq * F) * 4);
    for (int64_t r = 0; r < ns + nq; r++)
        for (int64_t j = 0; j < F; j++) {
            float v = j % 4 == 0   ? (float) ((int) (5.0f * (frand() + 1.0f)))
                      : j % 4 == 1 ? 3.25f
                      : j % 4 == 2 ? roundf(frand() * 8.0f) / 4.0f
                                   : 10.0f * frand();
            if (r >= ns) v = v * 1.5f; /* queries also beyond the support range */
            (r < ns ? xs + r * F : xq + (r - ns) * F)[j] = v;
        }
    nf_tensor txs = shaped(mk(ns * F, xs), 2, ns, F, 0), txq = shaped(mk(nq * F, xq), 2, nq, F, 0);
    nf_tensor tB = shaped(mk(F * 999, NULL), 2, F, 999, 0);
    nf_tensor tzs = shaped(mk(ns * F, NULL), 2, ns, F, 0), tzq = shaped(mk(nq * F, NULL), 2, nq, F, 0);
    nf_op op = {.type = NF_OP_QUANTILE, .label = "test", .n_src = 1, .n_dst = 1};
    op.src[0] = txs;
    op.dst[0] = tB;
    op.p.quantile.nq = 999;
    op.p.quantile.q_denom = 1000;
    nf_err err = {0};
    CHECK_RC(nf__op_run(be, &op, &err), NF_OK, &err);
    op = (nf_op){.type = NF_OP_BUCKETIZE_NORM, .label = "test", .n_src = 3, .n_dst = 2};
    op.src[0] = txs;
    op.src[1] = txq;
    op.src[2] = tB;
    op.dst[0] = tzs;
    op.dst[1] = tzq;
    CHECK_RC(nf__op_run(be, &op, &err), NF_OK, &err);
    float *col = malloc((size_t) ns * 4), B[999];
    double * us = malloc((size_t) (ns + nq) * sizeof(double));
    double worst = 0, worstB = 0;
    for (int64_t j = 0; j < F; j++) {
        for (int64_t r = 0; r < ns; r++) col[r] = xs[r * F + j];
        qsort(col, (size_t) ns, 4, cmp_f);
        for (int k = 1; k <= 999; k++) {
            /* torch.quantile's position is a float32 product; the lerp is then done in double here */
            const double pos = (double) (((float) k / 1000.0f) * (float) (ns - 1));
            const int64_t lo = (int64_t) floor(pos), hi = (int64_t) ceil(pos);
            B[k - 1] = (float) (col[lo] + (pos - (double) lo) * ((double) col[hi] - col[lo]));
            const double e = fabs((double) B[k - 1] - host(&tB)[j * 999 + k - 1]);
            if (e > worstB) worstB = e;
        }
        const float * Bd = host(&tB) + j * 999; /* bucket against the op's own boundaries */
        double mean = 0, var = 0;
        for (int64_t r = 0; r < ns + nq; r++) {
            const float x = r < ns ? xs[r * F + j] : xq[(r - ns) * F + j];
            int cnt = 0;
            for (int k = 0; k < 999; k++) cnt += Bd[k] < x;
            us[r] = (double) cnt / (double) ns;
            if (r < ns) mean += us[r];
        }
        mean /= (double) ns;
        for (int64_t r = 0; r < ns; r++) var += (us[r] - mean) * (us[r] - mean);
        var /= (double) ns;
        for (int64_t r = 0; r < ns + nq; r++) {
            const double want = var == 0 ? 0.0 : (us[r] - mean) / sqrt(var);
            const double got = r < ns ? host(&tzs)[r * F + j] : host(&tzq)[(r - ns) * F + j];
            if (fabs(want - got) > worst) worst = fabs(want - got);
        }
    }
    CHECK(worstB <= 1e-5, "QUANTILE vs naive lerp (ns=%lld): %.3e", (long long) ns, worstB);
    CHECK(worst <= 2e-5, "BUCKETIZE_NORM vs naive (ns=%lld nq=%lld F=%lld): %.3e", (long long) ns, (long long) nq,
          (long long) F, worst);
    free(col);
    free(us);
    free(xs);
    free(xq);
    nf__tensor_free(&txs);
    nf__tensor_free(&txq);
    nf__tensor_free(&tB);
    nf__tensor_free(&tzs);
    nf__tensor_free(&tzq);
}

static void test_embed_and_labels(void) {
    const int64_t n = 3, F = 2, D = 4, T = F + 1;
    float z[6] = {0.5f, -1.0f, 2.0f, 0.0f, 1.0f, -0.25f}, w[4] = {1, 2, 3, 4}, b[4] = {0.1f, 0.2f, 0.3f, 0.4f};
    nf_tensor tz = shaped(mk(6, z), 2, n, F, 0), tw = mk(4, w), tb = mk(4, b),
              tok = shaped(mk(n * T * D, NULL), 3, n, T, D);
    memset(host(&tok), 0, (size_t) (n * T * D) * 4);
    nf_op op = {.type = NF_OP_EMBED_FEATURES, .label = "test", .n_src = 3, .n_dst = 1};
    op.src[0] = tz;
    op.src[1] = tw;
    op.src[2] = tb;
    op.dst[0] = tok;
    nf_err err = {0};
    CHECK_RC(nf__op_run(be, &op, &err), NF_OK, &err);
    CHECK(host(&tok)[(1 * T + 2) * D + 3] == 0.0f * 4 + 0.4f, "tok[1][2][3]");
    CHECK(host(&tok)[(2 * T + 1) * D + 1] == 1.0f * 2 + 0.2f, "tok[2][1][1]");
    CHECK(host(&tok)[(0 * T + 0) * D + 0] == 0.0f, "token 0 untouched");
    /* class labels */
    int64_t ne1[1] = {n};
    nf_tensor ty;
    CHECK_RC(nf__tensor_alloc(be, &ty, NF_I32, 1, ne1, "y", &err), NF_OK, &err);
    int32_t yv[3] = {2, 0, 1};
    nf__tensor_upload(&ty, yv, &err);
    float E[12];
    for (int i = 0; i < 12; i++) E[i] = (float) i;
    nf_tensor tE = shaped(mk(12, E), 2, 3, D, 0);
    op = (nf_op){.type = NF_OP_LABEL_TOKENS, .label = "test", .n_src = 2, .n_dst = 1};
    op.p.label_tokens.mode = NF_LABEL_CLASS;
    op.src[0] = ty;
    op.src[1] = tE;
    op.dst[0] = tok;
    CHECK_RC(nf__op_run(be, &op, &err), NF_OK, &err);
    CHECK(host(&tok)[0 * T * D + 1] == 9.0f && host(&tok)[1 * T * D + 3] == 3.0f, "class label rows");
    yv[1] = 3; /* out of range is an error, not a read past the table */
    nf__tensor_upload(&ty, yv, &err);
    CHECK_RC(nf__op_run(be, &op, &err), NF_ERR_INPUT, &err);
    /* mask */
    op = (nf_op){.type = NF_OP_LABEL_TOKENS, .label = "test", .n_src = 2, .n_dst = 1};
    op.p.label_tokens.mode = NF_LABEL_MASK;
    op.src[1] = tw;
    op.dst[0] = tok;
    CHECK_RC(nf__op_run(be, &op, &err), NF_OK, &err);
    CHECK(host(&tok)[2 * T * D + 2] == 3.0f, "mask row");
    /* value */
    nf_tensor tyv = mk(3, z);
    op = (nf_op){.type = NF_OP_LABEL_TOKENS, .label = "test", .n_src = 3, .n_dst = 1};
    op.p.label_tokens.mode = NF_LABEL_VALUE;
    op.src[0] = tyv;
    op.src[1] = tw;
    op.src[2] = tb;
    op.dst[0] = tok;
    CHECK_RC(nf__op_run(be, &op, &err), NF_OK, &err);
    CHECK(host(&tok)[2 * T * D + 1] == 2.0f * 2 + 0.2f, "value row");
    nf__tensor_free(&tz);
    nf__tensor_free(&tw);
    nf__tensor_free(&tb);
    nf__tensor_free(&tok);
    nf__tensor_free(&ty);
    nf__tensor_free(&tE);
    nf__tensor_free(&tyv);
}

/* the cpu backend's erf: correctly rounded (to within 1e-11 relative of a
 * rounding tie) against libm's double erf, and within 1 ulp of erff */
static void test_erf(void) {
    int64_t bad = 0, n = 0, off_erff = 0;
    double worst_ulps = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int64_t i = -1200000; i <= 1200000; i++) {
            const float x = pass == 0 ? (float) i * 5e-6f
                                      : copysignf(ldexpf(1.0f, -126 + (int) (llabs(i) % 130)) *
                                                      (1.0f + (float) (llabs(i) % 977) / 977.0f),
                                                  (float) i);
            const double e = erf((double) x);
            const float got = nf__erf_f32(x);
            const double ulp = (double) nextafterf(fabsf((float) e), INFINITY) - fabs((double) (float) e);
            const double d = fabs((double) got - e) / ulp;
            if (d > worst_ulps) worst_ulps = d;
            bad += d > 0.5 + 1e-3;
            off_erff += fabsf(got - erff(x)) > (float) ulp;
            n++;
        }
    }
    CHECK(bad == 0, "erf: %lld of %lld values not correctly rounded (worst %.4f ulp)", (long long) bad, (long long) n,
          worst_ulps);
    CHECK(off_erff == 0, "erf: %lld values more than 1 ulp from erff", (long long) off_erff);
    CHECK(nf__erf_f32(0.0f) == 0.0f && nf__erf_f32(10.0f) == 1.0f && nf__erf_f32(-INFINITY) == -1.0f, "erf specials");
    CHECK(isnan(nf__erf_f32(NAN)), "erf(NaN) is NaN");
    printf("erf: %lld points, worst %.4f ulp from the correctly rounded value\n", (long long) n, worst_ulps);
}

/* the cpu backend's exp: correctly rounded (to within ~1e-15 relative of a
 * rounding tie) against the long double expl, within 1 ulp of libm's expf,
 * on a grid over the softmax's range (x <= 0, down to the subnormal
 * results and the underflow to 0) and over the positive range up to the
 * overflow; the specials */
static void test_exp(void) {
    int64_t bad = 0, n = 0, off_expf = 0;
    double worst_ulps = 0;
    for (int64_t i = -2200000; i <= 1800000; i++) {
        const float x = (float) i * 5e-5f; /* -110 .. 90 */
        const long double e = expl((long double) x);
        const float got = nf__exp_f32(x);
        const float ef = (float) e;
        double d = 0;
        if (ef == 0.0f || isinf(ef)) {
            d = got == ef ? 0 : 1e9;
        } else {
            const long double ulp = (long double) nextafterf(ef, INFINITY) - (long double) ef;
            d = (double) (fabsl((long double) got - e) / ulp);
        }
        if (d > worst_ulps) worst_ulps = d;
        bad += d > 0.5 + 1e-6;
        const float lf = expf(x);
        off_expf += got != lf && nextafterf(got, INFINITY) != lf && nextafterf(got, -INFINITY) != lf;
        n++;
    }
    CHECK(bad == 0, "exp: %lld of %lld values not correctly rounded (worst %.4f ulp)", (long long) bad, (long long) n,
          worst_ulps);
    CHECK(off_expf == 0, "exp: %lld values more than 1 ulp from expf", (long long) off_expf);
    CHECK(nf__exp_f32(0.0f) == 1.0f && nf__exp_f32(-0.0f) == 1.0f, "exp(0) = 1");
    CHECK(nf__exp_f32(-INFINITY) == 0.0f && nf__exp_f32(-1000.0f) == 0.0f, "exp(-Inf) = 0");
    CHECK(isinf(nf__exp_f32(INFINITY)) && isinf(nf__exp_f32(89.0f)), "exp overflows to Inf");
    CHECK(isnan(nf__exp_f32(NAN)) && isnan(nf__exp_f32(-NAN)), "exp(NaN) is NaN");
    CHECK(nf__exp_f32(-100.0f) > 0.0f && nf__exp_f32(-100.0f) == expf(-100.0f), "exp(-100): the subnormal");
    printf("exp: %lld points, worst %.4f ulp from the correctly rounded value\n", (long long) n, worst_ulps);
}

/* nf__cpu_max_row against the serial loop (m = s[0], then s[j] > m ? s[j] : m), bit for
 * bit: rows of every length to 70 with many equal values, a zero max of both signs behind
 * negative values, a NaN first or later, -Inf */
static void test_max_row(void) {
    float s[70];
    int64_t bad = 0, n = 0;
    for (int trial = 0; trial < 4000; trial++) {
        const int64_t len = 1 + trial % 70;
        for (int64_t j = 0; j < len; j++) {
            const float r = frand();
            s[j] = trial % 5 == 0   ? (r > 0 ? 0.0f : -0.0f)
                   : trial % 5 == 1 ? roundf(r * 2.0f)
                   : trial % 5 == 2 ? (r < 0.2f   ? -2.0f + r
                                       : r < 0.6f ? 0.0f
                                                  : -0.0f) /* a zero max, both signs */
                                    : r;
        }
        if (trial % 7 == 3) s[(trial / 7) % len] = NAN;
        if (trial % 11 == 4) s[(trial / 11) % len] = -INFINITY;
        float m = s[0];
        for (int64_t j = 1; j < len; j++) m = s[j] > m ? s[j] : m;
        const float got = nf__cpu_max_row(s, len);
        bad += memcmp(&m, &got, sizeof(m)) != 0;
        n++;
    }
    CHECK(bad == 0, "max row: %lld of %lld rows differ from the serial loop's bits", (long long) bad, (long long) n);
    printf("max row: %lld rows, bitwise the serial loop's\n", (long long) n);
}

static void test_bounds(void) {
    /* an op whose strided access would leave its tensor is refused */
    nf_tensor x = mk(10, NULL), W = shaped(mk(4, NULL), 2, 2, 2, 0), y = mk(10, NULL);
    nf_op op = {.type = NF_OP_LINEAR, .label = "oob", .n_src = 2, .n_dst = 1};
    op.src[0] = x;
    op.src[1] = W;
    op.dst[0] = y;
    op.p.linear.m = 6;
    op.p.linear.k = 2;
    op.p.linear.n = 2;
    op.p.linear.ldx = 2;
    op.p.linear.ldy = 2;
    nf_err err = {0};
    CHECK_RC(nf__op_run(be, &op, &err), NF_ERR_SHAPE, &err);
    CHECK_MSG(&err, "LINEAR (oob)");
    nf__tensor_free(&x);
    nf__tensor_free(&W);
    nf__tensor_free(&y);
}

int main(void) {
    nf_err err = {0};
    if (nf_backend_init("cpu", NF_PRECISION_EXACT, &be, &err) != NF_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    int64_t ms[] = {1, 7, 130}, ks[] = {1, 5, 64, 512}, ns[] = {1, 3, 17, 256};
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 4; b++)
            for (int c = 0; c < 4; c++) {
                test_linear(ms[a], ks[b], ns[c], (a + b + c) % 2, (a + c) % 2, (b + c) % 3 != 0);
            }
    test_linear(300, 512, 2048, 1, 0, 1);
    test_linear(300, 2048, 512, 0, 1, 1);
    test_layer_norm(1, 1);
    test_layer_norm(7, 8);
    test_layer_norm(65, 512);
    test_attention(16, 14, 4, 128, 1, 16);
    test_attention(5, 3, 2, 8, 1, 300);
    test_attention(300, 2, 1, 4, 1, 300);
    test_attention(1, 1, 1, 1, 1, 1);
    test_attention(24, 14, 4, 128, 0, 0);
    test_attention(3, 33, 2, 16, 0, 0);
    /* the tiles' 32-column blocks and their 16-column remainders: 80 keys
     * (32 + 32 + 16), 40 channels (32 + 16, of which 8 written) */
    test_attention(3, 70, 2, 40, 0, 0);
    test_erf();
    test_exp();
    test_max_row();
    test_quantile_edges();
    test_bucketize_naive(1, 3, 4);
    test_bucketize_naive(2, 5, 4);
    test_bucketize_naive(37, 11, 8);
    test_bucketize_naive(1500, 20, 5);
    test_embed_and_labels();
    test_bounds();
    nf_backend_free(be);
    return nf_test_done("test-ops-cpu");
}
