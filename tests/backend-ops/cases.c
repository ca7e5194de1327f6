/*
 * backend-ops/cases.c -- the op conformance suite's test descriptors: per op,
 * its case builders (shapes including odd sizes and size 1, operands, params)
 * and its tolerance (the bounds are listed in test-backend-ops.c's comment).
 * Adding an op: a case builder, a tolerance if it is not exact, and one
 * line in g_ops.
 */
#define _POSIX_C_SOURCE 200809L

#include "backend-ops.h"

#include <float.h>
#include <math.h>

/* ---- tolerances ------------------------------------------------------------------------- */

static void tol_layer_norm(const struct tcase * tc, int j, const float * ref, double * tol) {
    const struct nf_layer_norm_params * p = &tc->op.p.layer_norm;
    for (int64_t r = 0; r < p->m; r++) {
        for (int64_t c = 0; c < p->k; c++) {
            const int64_t i = r * p->ldy + c;
            tol[i] = 1e-5 * (1.0 + fabs((double) ref[i]));
        }
    }
}

static void tol_linear(const struct tcase * tc, int j, const float * ref, double * tol) {
    const struct nf_linear_params * p = &tc->op.p.linear;
    const double eps = FLT_EPSILON;
    const float * x = opnd_f(&tc->src[0]);
    const float * W = opnd_f(&tc->src[1]);
    const float * b = tc->op.n_src == 3 ? opnd_f(&tc->src[2]) : NULL;
    const float * y0 = opnd_f(&tc->dst[0]);
    for (int64_t r = 0; r < p->m; r++) {
        for (int64_t o = 0; o < p->n; o++) {
            double mag = b ? fabs((double) b[o]) : 0.0;
            for (int64_t c = 0; c < p->k; c++) {
                mag += fabs((double) x[r * p->ldx + c] * (double) W[o * p->k + c]);
            }
            const int64_t i = r * p->ldy + o;
            if (p->accumulate) {
                mag += fabs((double) y0[i]);
            }
            tol[i] = 8.0 * eps * (mag + fabs((double) ref[i])) + 1e-37;
        }
    }
}

static void tol_attention(const struct tcase * tc, int j, const float * ref, double * tol) {
    const struct nf_attention_params * p = &tc->op.p.attention;
    const double eps = FLT_EPSILON;
    const float * q = opnd_f(&tc->src[0]);
    const float * k = opnd_f(&tc->src[1]);
    const float * v = opnd_f(&tc->src[2]);
    const int64_t E = p->head_dim;
    for (int64_t g = 0; g < p->n_groups; g++) {
        for (int64_t h = 0; h < p->n_heads; h++) {
            double vmax = 0.0;
            for (int64_t jj = 0; jj < p->lk; jj++) {
                for (int64_t e = 0; e < E; e++) {
                    const double a = fabs((double) v[g * p->kv_gs + jj * p->kv_ss + h * E + e]);
                    vmax = a > vmax ? a : vmax;
                }
            }
            for (int64_t i = 0; i < p->lq; i++) {
                double smag = 0.0;
                for (int64_t jj = 0; jj < p->lk; jj++) {
                    double s = 0.0;
                    for (int64_t e = 0; e < E; e++) {
                        s += fabs((double) q[g * p->q_gs + i * p->q_ss + h * E + e] *
                                  (double) k[g * p->kv_gs + jj * p->kv_ss + h * E + e]);
                    }
                    s *= fabs((double) p->scale);
                    smag = s > smag ? s : smag;
                }
                const double t = 8.0 * eps * vmax * (sqrt((double) p->lk) + 4.0 * smag + 4.0) + 1e-37;
                for (int64_t e = 0; e < E; e++) {
                    tol[g * p->o_gs + i * p->o_ss + h * E + e] = t;
                }
            }
        }
    }
}

/* ---- case builders ------------------------------------------------------------------------- */

/* QUANTILE: x (n, F) with ties; a NaN column in some variants */
static const struct {
    int64_t n, F;
    int nq, denom, levels, nan_col;
} quantile_shapes[] = {
    {1, 1, 999, 1000, 0, 0},     {2, 3, 999, 1000, 0, 0}, {3, 2, 999, 1000, 3, 0},    {999, 3, 999, 1000, 0, 0},
    {1500, 4, 999, 1000, 17, 1}, {17, 5, 7, 8, 4, 1},     {1500, 1, 999, 1000, 2, 0}, {64, 7, 3, 4, 0, 0},
};

static void case_quantile(struct tcase * tc, int v) {
    const int64_t n = quantile_shapes[v].n, F = quantile_shapes[v].F;
    const int nq = quantile_shapes[v].nq, levels = quantile_shapes[v].levels;
    tcase_begin(tc, NF_OP_QUANTILE, 1, 1);
    tc->op.p.quantile.nq = nq;
    tc->op.p.quantile.q_denom = quantile_shapes[v].denom;
    opnd_init(&tc->src[0], NF_F32, 2, n, F, 0);
    float * x = opnd_f(&tc->src[0]);
    for (int64_t i = 0; i < n * F; i++) {
        /* levels > 0: few distinct values (many ties); else continuous */
        x[i] = levels ? (float) rng_int(levels) * 0.25f - 1.0f : rng_unif(-3.0f, 3.0f);
    }
    if (quantile_shapes[v].nan_col && F > 1) {
        x[rng_int(n) * F + 1] = NAN;
    }
    opnd_init(&tc->dst[0], NF_F32, 2, F, nq, 0);
    snprintf(tc->desc, sizeof(tc->desc), "n=%lld F=%lld nq=%d q_denom=%d%s%s", (long long) n, (long long) F, nq,
             quantile_shapes[v].denom, levels ? " ties" : "", quantile_shapes[v].nan_col && F > 1 ? " nan-col" : "");
}

/* BUCKETIZE_NORM: boundaries with ties, x values on the boundaries, NaN x,
 * a constant column (var == 0) */
static const struct {
    int64_t ns, nq, F, nb;
} bucketize_shapes[] = {
    {1, 0, 1, 999}, {5, 1, 2, 7}, {300, 33, 4, 999}, {2, 3, 3, 1}, {1000, 0, 3, 999}, {17, 129, 5, 31},
};

static void case_bucketize(struct tcase * tc, int v) {
    const int64_t ns = bucketize_shapes[v].ns, nqr = bucketize_shapes[v].nq;
    const int64_t F = bucketize_shapes[v].F, nb = bucketize_shapes[v].nb;
    tcase_begin(tc, NF_OP_BUCKETIZE_NORM, 3, 2);
    opnd_init(&tc->src[0], NF_F32, 2, ns, F, 0);
    opnd_init(&tc->src[1], NF_F32, 2, nqr, F, 0);
    opnd_init(&tc->src[2], NF_F32, 2, F, nb, 0);
    opnd_init(&tc->dst[0], NF_F32, 2, ns, F, 0);
    opnd_init(&tc->dst[1], NF_F32, 2, nqr, F, 0);
    float * B = opnd_f(&tc->src[2]);
    for (int64_t j = 0; j < F; j++) {
        /* sorted boundaries on a grid of 1/8: ties */
        float cur = -2.0f;
        for (int64_t k = 0; k < nb; k++) {
            if (rng_int(3) != 0) {
                cur += 0.125f * (float) (1 + rng_int(2));
            }
            B[j * nb + k] = cur;
        }
    }
    float * xs = opnd_f(&tc->src[0]);
    float * xq = opnd_f(&tc->src[1]);
    for (int64_t r = 0; r < ns; r++) {
        for (int64_t j = 0; j < F; j++) {
            float x = rng_int(2) ? B[j * nb + rng_int(nb)] : rng_unif(-3.0f, 3.0f + 0.25f * (float) nb);
            if (j == F - 1 && F > 2) {
                x = 0.5f; /* constant column: var == 0 -> z = 0 */
            }
            xs[r * F + j] = x;
        }
    }
    for (int64_t r = 0; r < nqr; r++) {
        for (int64_t j = 0; j < F; j++) {
            const int64_t kind = rng_int(8);
            xq[r * F + j] = kind == 0  ? NAN
                            : kind < 4 ? B[j * nb + rng_int(nb)]
                                       : rng_unif(-4.0f, 4.0f + 0.25f * (float) nb);
        }
    }
    snprintf(tc->desc, sizeof(tc->desc), "n_s=%lld n_q=%lld F=%lld nb=%lld", (long long) ns, (long long) nqr,
             (long long) F, (long long) nb);
}

static const struct {
    int64_t n, F, D;
} embed_shapes[] = {
    {1, 1, 1},
    {7, 5, 16},
    {33, 3, 512},
    {2, 1, 17},
};

static void case_embed(struct tcase * tc, int v) {
    const int64_t n = embed_shapes[v].n, F = embed_shapes[v].F, D = embed_shapes[v].D;
    tcase_begin(tc, NF_OP_EMBED_FEATURES, 3, 1);
    opnd_init(&tc->src[0], NF_F32, 2, n, F, 0);
    fill_unif(&tc->src[0], -2.0f, 2.0f);
    opnd_init(&tc->src[1], NF_F32, 2, D, 1, 0);
    fill_unif(&tc->src[1], -1.0f, 1.0f);
    opnd_init(&tc->src[2], NF_F32, 1, D, 0, 0);
    fill_unif(&tc->src[2], -1.0f, 1.0f);
    opnd_init(&tc->dst[0], NF_F32, 3, n, F + 1, D); /* token 0 stays SENTINEL */
    snprintf(tc->desc, sizeof(tc->desc), "n=%lld F=%lld D=%lld", (long long) n, (long long) F, (long long) D);
}

static const struct {
    int mode;
    int64_t n, T, D, C;
} label_shapes[] = {
    {NF_LABEL_CLASS, 1, 1, 1, 1}, {NF_LABEL_CLASS, 9, 4, 17, 10}, {NF_LABEL_CLASS, 100, 3, 512, 10},
    {NF_LABEL_VALUE, 1, 1, 1, 0}, {NF_LABEL_VALUE, 9, 4, 17, 0},  {NF_LABEL_VALUE, 100, 2, 512, 0},
    {NF_LABEL_MASK, 1, 1, 1, 0},  {NF_LABEL_MASK, 9, 4, 17, 0},   {NF_LABEL_MASK, 100, 3, 512, 0},
};

static void case_label(struct tcase * tc, int v) {
    const int mode = label_shapes[v].mode;
    const int64_t n = label_shapes[v].n, T = label_shapes[v].T, D = label_shapes[v].D, C = label_shapes[v].C;
    static const char * const mname[] = {"class", "value", "mask"};
    if (mode == NF_LABEL_CLASS) {
        tcase_begin(tc, NF_OP_LABEL_TOKENS, 2, 1);
        opnd_init(&tc->src[0], NF_I32, 1, n, 0, 0);
        int32_t * y = opnd_i(&tc->src[0]);
        for (int64_t r = 0; r < n; r++) {
            y[r] = (int32_t) rng_int(C);
        }
        opnd_init(&tc->src[1], NF_F32, 2, C, D, 0);
        fill_unif(&tc->src[1], -1.0f, 1.0f);
    } else if (mode == NF_LABEL_VALUE) {
        tcase_begin(tc, NF_OP_LABEL_TOKENS, 3, 1);
        opnd_init(&tc->src[0], NF_F32, 1, n, 0, 0);
        fill_unif(&tc->src[0], -5.0f, 5.0f);
        opnd_init(&tc->src[1], NF_F32, 2, D, 1, 0);
        fill_unif(&tc->src[1], -1.0f, 1.0f);
        opnd_init(&tc->src[2], NF_F32, 1, D, 0, 0);
        fill_unif(&tc->src[2], -1.0f, 1.0f);
    } else {
        tcase_begin(tc, NF_OP_LABEL_TOKENS, 2, 1);
        tc->src[0].used = 0; /* unused in mask mode */
        opnd_init(&tc->src[1], NF_F32, 2, 1, D, 0);
        fill_unif(&tc->src[1], -1.0f, 1.0f);
    }
    tc->op.p.label_tokens.mode = mode;
    opnd_init(&tc->dst[0], NF_F32, 3, n, T, D); /* tokens 1.. stay SENTINEL */
    snprintf(tc->desc, sizeof(tc->desc), "%s n=%lld T=%lld D=%lld%s", mname[mode], (long long) n, (long long) T,
             (long long) D, mode == NF_LABEL_CLASS ? (C == 1 ? " C=1" : " C=10") : "");
}

static const struct {
    int64_t m, k, xpad, ypad;
    float offset;
} ln_shapes[] = {
    {1, 1, 0, 0, 0.0f},    {7, 8, 3, 0, 0.0f},   {130, 512, 0, 5, 0.0f},
    {33, 512, 0, 0, 3.0f}, {2, 8, 1, 2, 100.0f}, {1, 512, 0, 0, 0.0f},
};

static void case_layer_norm(struct tcase * tc, int v) {
    const int64_t m = ln_shapes[v].m, k = ln_shapes[v].k;
    const int64_t ldx = k + ln_shapes[v].xpad, ldy = k + ln_shapes[v].ypad;
    tcase_begin(tc, NF_OP_LAYER_NORM, 3, 1);
    tc->op.p.layer_norm.m = m;
    tc->op.p.layer_norm.k = k;
    tc->op.p.layer_norm.ldx = ldx;
    tc->op.p.layer_norm.ldy = ldy;
    tc->op.p.layer_norm.eps = 1e-5f;
    opnd_init(&tc->src[0], NF_F32, 1, (m - 1) * ldx + k, 0, 0);
    fill_unif(&tc->src[0], ln_shapes[v].offset - 1.0f, ln_shapes[v].offset + 1.0f);
    opnd_init(&tc->src[1], NF_F32, 1, k, 0, 0);
    fill_unif(&tc->src[1], 0.5f, 1.5f);
    opnd_init(&tc->src[2], NF_F32, 1, k, 0, 0);
    fill_unif(&tc->src[2], -0.5f, 0.5f);
    opnd_init(&tc->dst[0], NF_F32, 1, (m - 1) * ldy + k, 0, 0);
    snprintf(tc->desc, sizeof(tc->desc), "m=%lld k=%lld ldx=%lld ldy=%lld mean~%g", (long long) m, (long long) k,
             (long long) ldx, (long long) ldy, (double) ln_shapes[v].offset);
}

static const int64_t lin_m[] = {1, 7, 33, 130};
static const int64_t lin_k[] = {1, 5, 64, 512};
static const int64_t lin_n[] = {1, 3, 17, 2048};
#define N_LINEAR (4 * 4 * 4)

static void case_linear(struct tcase * tc, int v) {
    const int64_t m = lin_m[v / 16], k = lin_k[(v / 4) % 4], n = lin_n[v % 4];
    /* variant bits cycle through bias / GELU / accumulate / padded strides */
    const int bias = (v % 8) != 3;
    const int gelu = (v / 2) % 2;
    const int relu = !gelu && (v % 7) == 5; /* TabSTAR's feed-forwards and heads */
    const int acc = (v % 3) == 1;
    const int pad = (v % 5) == 2;
    const int64_t ldx = k + (pad ? 3 : 0), ldy = n + (pad ? 2 : 0);
    tcase_begin(tc, NF_OP_LINEAR, bias ? 3 : 2, 1);
    tc->op.p.linear.m = m;
    tc->op.p.linear.k = k;
    tc->op.p.linear.n = n;
    tc->op.p.linear.ldx = ldx;
    tc->op.p.linear.ldy = ldy;
    tc->op.p.linear.act = gelu ? NF_ACT_GELU : relu ? NF_ACT_RELU : NF_ACT_NONE;
    tc->op.p.linear.accumulate = acc;
    opnd_init(&tc->src[0], NF_F32, 1, (m - 1) * ldx + k, 0, 0);
    fill_unif(&tc->src[0], -1.0f, 1.0f);
    opnd_init(&tc->src[1], NF_F32, 2, n, k, 0);
    fill_unif(&tc->src[1], -1.0f, 1.0f);
    if (bias) {
        opnd_init(&tc->src[2], NF_F32, 1, n, 0, 0);
        fill_unif(&tc->src[2], -1.0f, 1.0f);
    }
    opnd_init(&tc->dst[0], NF_F32, 1, (m - 1) * ldy + n, 0, 0);
    if (acc) {
        fill_unif(&tc->dst[0], -2.0f, 2.0f);
        /* keep the stride gaps at SENTINEL so that a write into them shows */
        float * y = opnd_f(&tc->dst[0]);
        for (int64_t r = 0; r < m; r++) {
            for (int64_t c = n; c < ldy && r * ldy + c < (m - 1) * ldy + n; c++) {
                y[r * ldy + c] = u2f(SENTINEL);
            }
        }
    }
    snprintf(tc->desc, sizeof(tc->desc), "m=%lld k=%lld n=%lld ldx=%lld ldy=%lld%s%s%s", (long long) m, (long long) k,
             (long long) n, (long long) ldx, (long long) ldy, bias ? " bias" : "",
             gelu   ? " gelu"
             : relu ? " relu"
                    : "",
             acc ? " acc" : "");
}

/* ATTENTION in Mitra's two layouts over a (rows, T, H*E) token tensor:
 *   row mode:     group = token column t, row i of the group at i*T*D (q_ss = T*D, q_gs = D);
 *                 queries (lq rows) attend to support rows (lk rows);
 *   feature mode: group = row, token i at i*D (q_ss = D, q_gs = T*D), lq = lk = T.
 * o uses a padded row stride in some variants (gaps must stay untouched). */
static const struct {
    int feature;
    int64_t lq, lk, H, E, G;
    int opad;
} attn_shapes[] = {
    {0, 1, 1, 1, 1, 1, 0},
    {0, 5, 2, 2, 8, 3, 1},
    {0, 33, 17, 4, 128, 2, 0},
    {0, 16, 300, 1, 128, 2, 1},
    {0, 7, 300, 2, 8, 4, 0},
    {0, 3, 17, 1, 1, 5, 0},
    {1, 1, 1, 4, 8, 3, 0},
    {1, 2, 2, 2, 128, 7, 1},
    {1, 17, 17, 4, 128, 3, 0},
    {1, 11, 11, 1, 1, 40, 0},
    {0, 40, 1000, 1, 64, 1, 0},
    /* around the cuda backend's one-kernel limit lk <= 256 (head_dim <= 128
     * is every backend's: the opencl kernel's too) */
    {0, 9, 256, 2, 32, 2, 1},
    {0, 9, 257, 2, 32, 2, 0},
    {0, 8, 31, 3, 100, 2, 0},
    {0, 17, 33, 1, 128, 1, 1},
    /* head_dim above 128 (opencl: its wide kernel): TabSTAR's fusion layer
     * (2 heads of 192 over 2 tokens, many groups), odd sizes */
    {1, 2, 2, 2, 192, 50, 0},
    {0, 19, 21, 1, 256, 2, 1},
    {1, 9, 9, 3, 129, 3, 0},
};

static void case_attention(struct tcase * tc, int v) {
    const int feature = attn_shapes[v].feature;
    const int64_t lq = attn_shapes[v].lq, lk = attn_shapes[v].lk, H = attn_shapes[v].H, E = attn_shapes[v].E;
    const int64_t G = attn_shapes[v].G, D = H * E;
    tcase_begin(tc, NF_OP_ATTENTION, 3, 1);
    struct nf_attention_params * p = &tc->op.p.attention;
    p->n_groups = G;
    p->lq = lq;
    p->lk = lk;
    p->n_heads = H;
    p->head_dim = E;
    p->scale = 1.0f / sqrtf((float) E);
    int64_t o_ss, o_gs;
    if (!feature) {
        const int64_t T = G;
        p->q_ss = T * D;
        p->q_gs = D;
        p->kv_ss = T * D;
        p->kv_gs = D;
        o_ss = T * D + (attn_shapes[v].opad ? 5 : 0);
        o_gs = D;
    } else {
        const int64_t T = lq;
        p->q_ss = D;
        p->q_gs = T * D;
        p->kv_ss = D;
        p->kv_gs = T * D;
        o_ss = D + (attn_shapes[v].opad ? 3 : 0);
        o_gs = T * o_ss;
    }
    p->o_ss = o_ss;
    p->o_gs = o_gs;
    const int64_t qe = (G - 1) * p->q_gs + (lq - 1) * p->q_ss + D;
    const int64_t ke = (G - 1) * p->kv_gs + (lk - 1) * p->kv_ss + D;
    const int64_t oe = (G - 1) * o_gs + (lq - 1) * o_ss + D;
    opnd_init(&tc->src[0], NF_F32, 1, qe, 0, 0);
    fill_unif(&tc->src[0], -2.0f, 2.0f);
    opnd_init(&tc->src[1], NF_F32, 1, ke, 0, 0);
    fill_unif(&tc->src[1], -2.0f, 2.0f);
    opnd_init(&tc->src[2], NF_F32, 1, ke, 0, 0);
    fill_unif(&tc->src[2], -1.0f, 1.0f);
    opnd_init(&tc->dst[0], NF_F32, 1, oe, 0, 0);
    snprintf(tc->desc, sizeof(tc->desc), "%s groups=%lld lq=%lld lk=%lld heads=%lld head_dim=%lld q_ss=%lld o_ss=%lld",
             feature ? "feature" : "row", (long long) G, (long long) lq, (long long) lk, (long long) H, (long long) E,
             (long long) p->q_ss, (long long) o_ss);
}

/* ---- the sequence ops (SpTransformer) --------------------------------------------------- */

static void tol_conv1d(const struct tcase * tc, int j, const float * ref, double * tol) {
    const struct nf_conv1d_params * p = &tc->op.p.conv1d;
    const double eps = FLT_EPSILON;
    const float * x = opnd_f(&tc->src[0]);
    const float * W = opnd_f(&tc->src[1]);
    const float * b = tc->op.n_src == 3 ? opnd_f(&tc->src[2]) : NULL;
    const float * y0 = opnd_f(&tc->dst[0]);
    for (int64_t s = 0; s < p->n_seq; s++) {
        for (int64_t t = 0; t < p->len; t++) {
            for (int64_t o = 0; o < p->cout; o++) {
                double mag = b ? fabs((double) b[o]) : 0.0;
                for (int64_t k = 0; k < p->ksize; k++) {
                    const int64_t ti = t + k * p->dilation - p->pad;
                    if (ti < 0 || ti >= p->len) continue;
                    for (int64_t c = 0; c < p->cin; c++) {
                        mag += fabs((double) x[s * p->x_gs + ti * p->ldx + c] *
                                    (double) W[(o * p->cin + c) * p->ksize + k]);
                    }
                }
                const int64_t i = s * p->y_gs + t * p->ldy + o;
                if (p->accumulate) mag += fabs((double) y0[i]);
                tol[i] = 8.0 * eps * (mag + fabs((double) ref[i])) + 1e-37;
            }
        }
    }
}

static void tol_batch_norm(const struct tcase * tc, int j, const float * ref, double * tol) {
    const struct nf_batch_norm_params * p = &tc->op.p.batch_norm;
    const float * x = opnd_f(&tc->src[0]);
    const float *w = opnd_f(&tc->src[1]), *b = opnd_f(&tc->src[2]);
    const float *mean = opnd_f(&tc->src[3]), *var = opnd_f(&tc->src[4]);
    for (int64_t r = 0; r < p->m; r++) {
        for (int64_t c = 0; c < p->c; c++) {
            const double a = fabs((double) w[c]) / sqrt((double) var[c] + (double) p->eps);
            const double mag = fabs((double) x[r * p->ldx + c]) * a + fabs((double) b[c]) + fabs((double) mean[c]) * a;
            const int64_t i = r * p->ldy + c;
            tol[i] = 8.0 * FLT_EPSILON * (mag + fabs((double) ref[i])) + 1e-37;
        }
    }
}

static void tol_bucket_route(const struct tcase * tc, int j, const float * ref, double * tol) {
    if (j != 1) return; /* sel: exact */
    const int64_t n = opnd_numel(&tc->dst[1]);
    for (int64_t i = 0; i < n; i++) tol[i] = 1e-5 * (1.0 + fabs((double) ref[i]));
}

/* CONV1D: the encoders' shapes (11/21 taps, dilations 1..20, padding wider
 * than the sequence), 1x1, odd sizes; x/y as column blocks of wider rows;
 * several sequences; accumulate. */
static const struct {
    int64_t n_seq, len, cin, cout, K, dil;
    int acc, bias, pad;
} conv_shapes[] = {
    {1, 1, 1, 1, 1, 1, 0, 1, 0},         {1, 7, 3, 5, 3, 1, 1, 1, 1},       {2, 33, 4, 8, 11, 1, 0, 1, 0},
    {1, 50, 16, 16, 11, 4, 1, 1, 1},     {2, 300, 32, 32, 21, 10, 0, 1, 0}, {1, 130, 64, 64, 21, 20, 1, 1, 0},
    {1, 600, 128, 128, 11, 1, 1, 1, 1},  {3, 17, 5, 3, 1, 1, 0, 0, 1},      {1, 513, 64, 64, 21, 20, 0, 1, 1},
    {2, 260, 128, 128, 21, 10, 1, 1, 0},
};

static void case_conv1d(struct tcase * tc, int v) {
    const int64_t S = conv_shapes[v].n_seq, L = conv_shapes[v].len, ci = conv_shapes[v].cin;
    const int64_t co = conv_shapes[v].cout, K = conv_shapes[v].K, d = conv_shapes[v].dil;
    const int acc = conv_shapes[v].acc, bias = conv_shapes[v].bias, pad = conv_shapes[v].pad;
    tcase_begin(tc, NF_OP_CONV1D, bias ? 3 : 2, 1);
    struct nf_conv1d_params * p = &tc->op.p.conv1d;
    p->n_seq = S;
    p->len = L;
    p->cin = ci;
    p->cout = co;
    p->ksize = K;
    p->dilation = d;
    p->pad = d * (K - 1) / 2;
    p->ldx = ci + (pad ? 3 : 0);
    p->ldy = co + (pad ? 5 : 0);
    p->x_gs = L * p->ldx + (pad ? 2 : 0);
    p->y_gs = L * p->ldy;
    p->accumulate = acc;
    opnd_init(&tc->src[0], NF_F32, 1, (S - 1) * p->x_gs + (L - 1) * p->ldx + ci, 0, 0);
    fill_unif(&tc->src[0], -1.0f, 1.0f);
    opnd_init(&tc->src[1], NF_F32, 3, co, ci, K);
    fill_unif(&tc->src[1], -0.5f, 0.5f);
    if (bias) {
        opnd_init(&tc->src[2], NF_F32, 1, co, 0, 0);
        fill_unif(&tc->src[2], -1.0f, 1.0f);
    }
    opnd_init(&tc->dst[0], NF_F32, 1, (S - 1) * p->y_gs + (L - 1) * p->ldy + co, 0, 0);
    if (acc) {
        fill_unif(&tc->dst[0], -2.0f, 2.0f);
        float * y = opnd_f(&tc->dst[0]);
        for (int64_t s = 0; s < S; s++)
            for (int64_t t = 0; t < L; t++)
                for (int64_t c = co; c < p->ldy && (s * L + t) * p->ldy + c < opnd_numel(&tc->dst[0]); c++)
                    y[s * p->y_gs + t * p->ldy + c] = u2f(SENTINEL);
    }
    snprintf(tc->desc, sizeof(tc->desc), "seqs=%lld len=%lld cin=%lld cout=%lld k=%lld dilation=%lld ldx=%lld%s%s",
             (long long) S, (long long) L, (long long) ci, (long long) co, (long long) K, (long long) d,
             (long long) p->ldx, bias ? " bias" : "", acc ? " acc" : "");
}

/* BATCH_NORM: with and without ReLU, padded strides, size 1 */
static const struct {
    int64_t m, c;
    int relu, pad;
} bn_shapes[] = {{1, 1, 0, 0}, {7, 3, 1, 1}, {300, 128, 1, 0}, {129, 64, 0, 1}, {2, 257, 1, 1}};

static void case_batch_norm(struct tcase * tc, int v) {
    const int64_t m = bn_shapes[v].m, c = bn_shapes[v].c;
    tcase_begin(tc, NF_OP_BATCH_NORM, 5, 1);
    struct nf_batch_norm_params * p = &tc->op.p.batch_norm;
    p->m = m;
    p->c = c;
    p->ldx = c + (bn_shapes[v].pad ? 4 : 0);
    p->ldy = c + (bn_shapes[v].pad ? 1 : 0);
    p->eps = 1e-5f;
    p->relu = bn_shapes[v].relu;
    opnd_init(&tc->src[0], NF_F32, 1, (m - 1) * p->ldx + c, 0, 0);
    fill_unif(&tc->src[0], -3.0f, 3.0f);
    const float lo[4] = {0.5f, -1.0f, -0.5f, 0.05f}, hi[4] = {1.5f, 1.0f, 0.5f, 2.0f};
    for (int i = 1; i < 5; i++) {
        opnd_init(&tc->src[i], NF_F32, 1, c, 0, 0);
        fill_unif(&tc->src[i], lo[i - 1], hi[i - 1]);
    }
    opnd_init(&tc->dst[0], NF_F32, 1, (m - 1) * p->ldy + c, 0, 0);
    snprintf(tc->desc, sizeof(tc->desc), "m=%lld c=%lld ldx=%lld ldy=%lld%s", (long long) m, (long long) c,
             (long long) p->ldx, (long long) p->ldy, p->relu ? " relu" : "");
}

/* FILL: rows of a wider buffer (the gaps stay untouched) */
static const struct {
    int64_t m, k, ld;
    float value;
} fill_shapes[] = {{1, 1, 1, 0.0f}, {5, 3, 7, 0.0f}, {300, 320, 320, -1.5f}, {0, 4, 4, 1.0f}, {3, 0, 5, 2.0f}};

static void case_fill(struct tcase * tc, int v) {
    tcase_begin(tc, NF_OP_FILL, 0, 1);
    struct nf_fill_params * p = &tc->op.p.fill;
    p->m = fill_shapes[v].m;
    p->k = fill_shapes[v].k;
    p->ld = fill_shapes[v].ld;
    p->value = fill_shapes[v].value;
    opnd_init(&tc->dst[0], NF_F32, 1, p->m * p->ld + 1, 0, 0);
    snprintf(tc->desc, sizeof(tc->desc), "m=%lld k=%lld ld=%lld value=%g", (long long) p->m, (long long) p->k,
             (long long) p->ld, (double) p->value);
}

/* AXIAL_POS: SpTransformer's 128 x 64 grid, a partial last row of e0, padded rows */
static const struct {
    int64_t n_seq, len, dim, n1;
    int pad;
} axial_shapes[] = {{1, 1, 1, 1, 0}, {2, 100, 8, 16, 1}, {1, 8192, 256, 64, 0}, {2, 130, 256, 64, 1}};

static void case_axial_pos(struct tcase * tc, int v) {
    const int64_t S = axial_shapes[v].n_seq, L = axial_shapes[v].len, D = axial_shapes[v].dim;
    const int64_t n1 = axial_shapes[v].n1, n0 = (L + n1 - 1) / n1;
    tcase_begin(tc, NF_OP_AXIAL_POS, 2, 1);
    struct nf_axial_pos_params * p = &tc->op.p.axial_pos;
    p->n_seq = S;
    p->len = L;
    p->dim = D;
    p->n1 = n1;
    p->ld = D + (axial_shapes[v].pad ? 3 : 0);
    p->gs = L * p->ld;
    opnd_init(&tc->src[0], NF_F32, 2, n0, D, 0);
    fill_unif(&tc->src[0], -1.0f, 1.0f);
    opnd_init(&tc->src[1], NF_F32, 2, n1, D, 0);
    fill_unif(&tc->src[1], -1.0f, 1.0f);
    opnd_init(&tc->dst[0], NF_F32, 1, (S - 1) * p->gs + (L - 1) * p->ld + D, 0, 0);
    fill_unif(&tc->dst[0], -2.0f, 2.0f);
    snprintf(tc->desc, sizeof(tc->desc), "seqs=%lld len=%lld dim=%lld n1=%lld ld=%lld", (long long) S, (long long) L,
             (long long) D, (long long) n1, (long long) p->ld);
}

/* BUCKET_ROUTE / BUCKET_GATHER: q, k as head columns of wider rows
 * (SpTransformer's to_q / to_kv outputs); rows of bucket v are a random
 * centre plus noise, so the bucket scores are well separated (a near-tie
 * could flip the argmax between two correct backends). */
static const struct {
    int64_t n_seq, nb, bkt, H, E;
} bucket_shapes[] = {{1, 1, 1, 1, 1}, {1, 2, 3, 1, 4}, {2, 16, 8, 3, 32}, {1, 128, 64, 6, 32}, {3, 5, 7, 2, 9}};

static void fill_bucketed(struct operand * o, int64_t S, int64_t gs, int64_t rows, int64_t ss, int64_t bkt, int64_t W) {
    float * f = opnd_f(o);
    float * c = malloc((size_t) W * sizeof(float));
    if (!c) exit(2);
    for (int64_t s = 0; s < S; s++) {
        for (int64_t r = 0; r < rows; r++) {
            if (r % bkt == 0)
                for (int64_t e = 0; e < W; e++) c[e] = rng_unif(-2.0f, 2.0f);
            for (int64_t e = 0; e < W; e++) f[s * gs + r * ss + e] = c[e] + rng_unif(-0.3f, 0.3f);
        }
    }
    free(c);
}

static void case_bucket_route(struct tcase * tc, int v) {
    const int64_t S = bucket_shapes[v].n_seq, nb = bucket_shapes[v].nb, B = bucket_shapes[v].bkt;
    const int64_t H = bucket_shapes[v].H, E = bucket_shapes[v].E, rows = nb * B;
    tcase_begin(tc, NF_OP_BUCKET_ROUTE, 2, 2);
    struct nf_bucket_route_params * p = &tc->op.p.bucket_route;
    p->n_seq = S;
    p->n_buckets = nb;
    p->bucket = B;
    p->n_heads = H;
    p->head_dim = E;
    p->q_ss = H * E + 5;
    p->q_gs = rows * p->q_ss;
    p->k_ss = 2 * H * E;
    p->k_gs = rows * p->k_ss + 1;
    p->scale = 1.0f / sqrtf((float) E);
    opnd_init(&tc->src[0], NF_F32, 1, (S - 1) * p->q_gs + (rows - 1) * p->q_ss + H * E, 0, 0);
    fill_bucketed(&tc->src[0], S, p->q_gs, rows, p->q_ss, B, H * E);
    opnd_init(&tc->src[1], NF_F32, 1, (S - 1) * p->k_gs + (rows - 1) * p->k_ss + H * E, 0, 0);
    fill_bucketed(&tc->src[1], S, p->k_gs, rows, p->k_ss, B, H * E);
    opnd_init(&tc->dst[0], NF_I32, 3, S, H, nb);
    opnd_init(&tc->dst[1], NF_F32, 3, S, H, nb * 2); /* (S, H, nb, 2) */
    snprintf(tc->desc, sizeof(tc->desc), "seqs=%lld buckets=%lld bucket=%lld heads=%lld head_dim=%lld", (long long) S,
             (long long) nb, (long long) B, (long long) H, (long long) E);
}

static void case_bucket_gather(struct tcase * tc, int v) {
    const int64_t S = bucket_shapes[v].n_seq, nb = bucket_shapes[v].nb, B = bucket_shapes[v].bkt;
    const int64_t H = bucket_shapes[v].H, E = bucket_shapes[v].E, rows = nb * B;
    tcase_begin(tc, NF_OP_BUCKET_GATHER, 4, 2);
    struct nf_bucket_gather_params * p = &tc->op.p.bucket_gather;
    p->n_seq = S;
    p->n_buckets = nb;
    p->bucket = B;
    p->n_heads = H;
    p->head_dim = E;
    p->kv_ss = 2 * H * E + 3;
    p->kv_gs = rows * p->kv_ss;
    p->reuse_keys = v % 2 == 0;
    const int64_t kv = (S - 1) * p->kv_gs + (rows - 1) * p->kv_ss + H * E;
    opnd_init(&tc->src[0], NF_F32, 1, kv, 0, 0);
    fill_unif(&tc->src[0], -2.0f, 2.0f);
    opnd_init(&tc->src[1], NF_F32, 1, kv, 0, 0);
    fill_unif(&tc->src[1], -2.0f, 2.0f);
    opnd_init(&tc->src[2], NF_I32, 3, S, H, nb);
    int32_t * sel = opnd_i(&tc->src[2]);
    for (int64_t i = 0; i < S * H * nb; i++) sel[i] = (int32_t) rng_int(nb);
    if (v == 4) { /* out of range: clamped */
        sel[0] = -3;
        sel[S * H * nb - 1] = (int32_t) nb + 7;
    }
    opnd_init(&tc->src[3], NF_F32, 3, S, H, nb * 2);
    fill_unif(&tc->src[3], 0.0f, 1.0f);
    opnd_init(&tc->dst[0], NF_F32, 1, S * rows * 2 * H * E, 0, 0);
    opnd_init(&tc->dst[1], NF_F32, 1, S * rows * 2 * H * E, 0, 0);
    snprintf(tc->desc, sizeof(tc->desc), "seqs=%lld buckets=%lld bucket=%lld heads=%lld head_dim=%lld%s%s",
             (long long) S, (long long) nb, (long long) B, (long long) H, (long long) E,
             p->reuse_keys ? " reuse-keys" : "", v == 4 ? " clamp" : "");
}

/* GATHER_ROWS: TabSTAR's lookups -- word embeddings (a big table, ids out of
 * range among them), the [CLS] rows of a hidden state (strided table), the
 * halves of the fusion mean (scale 0.5, accumulating), one row */
static const struct {
    int64_t m, k, n_table, ldw_pad, ldy_pad;
    float scale;
    int acc;
} gather_shapes[] = {{1, 1, 1, 0, 0, 1.0f, 0},
                     {37, 384, 30522, 0, 0, 1.0f, 0},
                     {9, 384, 50, 384, 0, 1.0f, 0},
                     {64, 384, 128, 384, 384, 0.5f, 1},
                     {5, 17, 3, 2, 5, 1.0f, 1}};

static void case_gather_rows(struct tcase * tc, int v) {
    const int64_t m = gather_shapes[v].m, k = gather_shapes[v].k, nt = gather_shapes[v].n_table;
    tcase_begin(tc, NF_OP_GATHER_ROWS, 2, 1);
    struct nf_gather_rows_params * p = &tc->op.p.gather_rows;
    p->m = m;
    p->k = k;
    p->n_table = nt;
    p->ldw = k + gather_shapes[v].ldw_pad;
    p->ldy = k + gather_shapes[v].ldy_pad;
    p->scale = gather_shapes[v].scale;
    p->accumulate = gather_shapes[v].acc;
    opnd_init(&tc->src[0], NF_I32, 1, m, 0, 0);
    int32_t * idx = opnd_i(&tc->src[0]);
    for (int64_t r = 0; r < m; r++) {
        /* every fifth index out of range (below 0 or past the table) when m > 1 */
        idx[r] = m > 1 && r % 5 == 4 ? (r % 2 ? -1 - (int32_t) r : (int32_t) (nt + r)) : (int32_t) rng_int(nt);
    }
    opnd_init(&tc->src[1], NF_F32, 1, (nt - 1) * p->ldw + k, 0, 0);
    fill_unif(&tc->src[1], -1.0f, 1.0f);
    opnd_init(&tc->dst[0], NF_F32, 1, (m - 1) * p->ldy + k, 0, 0);
    if (p->accumulate) fill_unif(&tc->dst[0], -2.0f, 2.0f);
    snprintf(tc->desc, sizeof(tc->desc), "m=%lld k=%lld table=%lld ldw=%lld ldy=%lld scale=%g%s", (long long) m,
             (long long) k, (long long) nt, (long long) p->ldw, (long long) p->ldy, (double) p->scale,
             p->accumulate ? " acc" : "");
}

/* the test descriptors (struct op_desc in backend-ops.h), in the order they run */
const struct op_desc g_ops[] = {
    {NF_OP_QUANTILE, case_quantile, (int) (sizeof(quantile_shapes) / sizeof(quantile_shapes[0])), NULL, NULL, NULL,
     NULL, NULL},
    {NF_OP_BUCKETIZE_NORM, case_bucketize, (int) (sizeof(bucketize_shapes) / sizeof(bucketize_shapes[0])), NULL, NULL,
     NULL, NULL, NULL},
    {NF_OP_EMBED_FEATURES, case_embed, (int) (sizeof(embed_shapes) / sizeof(embed_shapes[0])), NULL, NULL, NULL, NULL,
     NULL},
    {NF_OP_LABEL_TOKENS, case_label, (int) (sizeof(label_shapes) / sizeof(label_shapes[0])), NULL, NULL, NULL, NULL,
     NULL},
    {NF_OP_LAYER_NORM, case_layer_norm, (int) (sizeof(ln_shapes) / sizeof(ln_shapes[0])), tol_layer_norm, NULL, NULL,
     NULL, NULL},
    {NF_OP_LINEAR, case_linear, N_LINEAR, tol_linear, NULL, NULL, NULL, NULL},
    {NF_OP_ATTENTION, case_attention, (int) (sizeof(attn_shapes) / sizeof(attn_shapes[0])), tol_attention, NULL, NULL,
     NULL, NULL},
    {NF_OP_CONV1D, case_conv1d, (int) (sizeof(conv_shapes) / sizeof(conv_shapes[0])), tol_conv1d, NULL, NULL, NULL,
     NULL},
    {NF_OP_BATCH_NORM, case_batch_norm, (int) (sizeof(bn_shapes) / sizeof(bn_shapes[0])), tol_batch_norm, NULL, NULL,
     NULL, NULL},
    {NF_OP_FILL, case_fill, (int) (sizeof(fill_shapes) / sizeof(fill_shapes[0])), NULL, NULL, NULL, NULL, NULL},
    {NF_OP_AXIAL_POS, case_axial_pos, (int) (sizeof(axial_shapes) / sizeof(axial_shapes[0])), NULL, NULL, NULL, NULL,
     NULL},
    {NF_OP_BUCKET_ROUTE, case_bucket_route, (int) (sizeof(bucket_shapes) / sizeof(bucket_shapes[0])), tol_bucket_route,
     NULL, NULL, NULL, NULL},
    {NF_OP_BUCKET_GATHER, case_bucket_gather, (int) (sizeof(bucket_shapes) / sizeof(bucket_shapes[0])), NULL, NULL,
     NULL, NULL, NULL},
    {NF_OP_GATHER_ROWS, case_gather_rows, (int) (sizeof(gather_shapes) / sizeof(gather_shapes[0])), NULL, NULL, NULL,
     NULL, NULL},
    /* ---- training ops, set A (cases-train.c): checked against float64 references */
    {NF_OP_GEMM, case_gemm, N_GEMM_CASES, tol_gemm, ref_gemm, NULL, NULL, NULL},
    {NF_OP_COL_SUM, case_col_sum, N_COL_SUM_CASES, tol_col_sum, ref_col_sum, NULL, NULL, NULL},
    {NF_OP_ACT, case_act, N_ACT_CASES, tol_act, ref_act, NULL, NULL, NULL},
    {NF_OP_ACT_BACKWARD, case_act_backward, N_ACT_CASES, tol_act_backward, ref_act_backward, fd_act_backward, NULL,
     NULL},
    {NF_OP_LAYER_NORM_BACKWARD, case_ln_backward, N_LN_BACKWARD_CASES, tol_ln_backward, ref_ln_backward, fd_ln_backward,
     NULL, NULL},
    {NF_OP_ADAMW, case_adamw, N_ADAMW_CASES, tol_adamw, ref_adamw, NULL, NULL, NULL},
    {NF_OP_COPY, case_copy, N_COPY_CASES, NULL, NULL, NULL, NULL, NULL},
    /* the training ops, set B (cases-train-b.c): against float64 references, with finite differences */
    {NF_OP_ATTENTION_BACKWARD, case_attention_backward, N_ATTN_BWD_CASES, NULL, NULL, NULL, ref_attention_backward,
     fd_attention_backward},
    {NF_OP_EMBED_FEATURES_BACKWARD, case_embed_backward, N_EMBED_BWD_CASES, NULL, NULL, NULL, ref_embed_backward,
     fd_embed_backward},
    {NF_OP_LABEL_TOKENS_BACKWARD, case_label_backward, N_LABEL_BWD_CASES, NULL, NULL, NULL, ref_label_backward,
     fd_label_backward},
    {NF_OP_CROSS_ENTROPY, case_cross_entropy, N_XENT_CASES, NULL, NULL, NULL, ref_cross_entropy, fd_cross_entropy},
    {NF_OP_MSE_LOSS, case_mse_loss, N_MSE_CASES, NULL, NULL, NULL, ref_mse_loss, fd_mse_loss},
    /* the training ops, set C (cases-train-c.c; TabSTAR): against float64 references */
    {NF_OP_SCATTER_ADD_ROWS, case_scatter_add_rows, N_SCATTER_CASES, NULL, NULL, NULL, ref_scatter_add_rows,
     fd_scatter_add_rows},
    {NF_OP_CLIP_GRAD_NORM, case_clip_grad_norm, N_CLIP_CASES, NULL, NULL, NULL, ref_clip_grad_norm, NULL},
    {NF_OP_SCALE, case_scale, N_SCALE_CASES, NULL, NULL, NULL, ref_scale, NULL},
    {NF_OP_DROPOUT, case_dropout, N_DROPOUT_CASES, NULL, NULL, NULL, ref_dropout, NULL},
    /* ATTENTION's training form, dropout on the probabilities (cases-train-b.c; last: the seeds above stay) */
    {NF_OP_ATTENTION, case_attention_drop, N_ATTN_DROP_CASES, NULL, NULL, NULL, ref_attention_drop, NULL},
};
const int g_n_ops = (int) (sizeof(g_ops) / sizeof(g_ops[0]));
