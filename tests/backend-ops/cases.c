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
    const int acc = (v % 3) == 1;
    const int pad = (v % 5) == 2;
    const int64_t ldx = k + (pad ? 3 : 0), ldy = n + (pad ? 2 : 0);
    tcase_begin(tc, NF_OP_LINEAR, bias ? 3 : 2, 1);
    tc->op.p.linear.m = m;
    tc->op.p.linear.k = k;
    tc->op.p.linear.n = n;
    tc->op.p.linear.ldx = ldx;
    tc->op.p.linear.ldy = ldy;
    tc->op.p.linear.act = gelu ? NF_ACT_GELU : NF_ACT_NONE;
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
             (long long) n, (long long) ldx, (long long) ldy, bias ? " bias" : "", gelu ? " gelu" : "",
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

/* the test descriptors (struct op_desc in backend-ops.h), in the order they run */
const struct op_desc g_ops[] = {
    {NF_OP_QUANTILE, case_quantile, (int) (sizeof(quantile_shapes) / sizeof(quantile_shapes[0])), NULL},
    {NF_OP_BUCKETIZE_NORM, case_bucketize, (int) (sizeof(bucketize_shapes) / sizeof(bucketize_shapes[0])), NULL},
    {NF_OP_EMBED_FEATURES, case_embed, (int) (sizeof(embed_shapes) / sizeof(embed_shapes[0])), NULL},
    {NF_OP_LABEL_TOKENS, case_label, (int) (sizeof(label_shapes) / sizeof(label_shapes[0])), NULL},
    {NF_OP_LAYER_NORM, case_layer_norm, (int) (sizeof(ln_shapes) / sizeof(ln_shapes[0])), tol_layer_norm},
    {NF_OP_LINEAR, case_linear, N_LINEAR, tol_linear},
    {NF_OP_ATTENTION, case_attention, (int) (sizeof(attn_shapes) / sizeof(attn_shapes[0])), tol_attention},
};
const int g_n_ops = (int) (sizeof(g_ops) / sizeof(g_ops[0]));
