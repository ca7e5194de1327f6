/*
 * backend-ops/cases-attn-drop.c -- ATTENTION's training form: dropout on the
 * probabilities (nf-ops.def ATTENTION, p.drop_*), checked on every backend,
 * the cpu's too, against the forward in double with the same mask
 * (attn_row64, cases-train-b.c); ATTENTION_BACKWARD's dropout cases are
 * cases-train-b.c's.
 */
#define _POSIX_C_SOURCE 200809L

#include "backend-ops.h"

#include <float.h>
#include <math.h>

#define EPS ((double) FLT_EPSILON)

static double * to_double(const struct operand * o) {
    const int64_t n = opnd_numel(o);
    double * d = calloc((size_t) (n > 0 ? n : 1), sizeof(double));
    if (!d) exit(2);
    for (int64_t i = 0; i < n; i++) d[i] = (double) opnd_f(o)[i];
    return d;
}

/* row / feature layouts as the ATTENTION cases, o's rows padded in some: the cpu's tiled kernel (lk 17) and
 * its GEMMs (lk 300), opencl's kernels (head_dim <= 128) and its wide one (TabSTAR's fusion heads of 192),
 * cuda's one-launch kernel and its cuBLAS path (lk > 256 or head_dim > 128) */
static const struct {
    int feature;
    int64_t lq, lk, H, E, G;
    int opad;
    float drop;
} adrop_shapes[N_ATTN_DROP_CASES] = {
    {0, 5, 2, 2, 8, 3, 1, 0.5f},    {0, 33, 17, 4, 128, 2, 0, 0.1f}, {0, 16, 300, 1, 128, 2, 1, 0.2f},
    {1, 2, 2, 2, 192, 50, 0, 0.1f}, {1, 17, 17, 4, 64, 3, 0, 0.3f},  {0, 9, 257, 2, 32, 2, 0, 0.5f},
};

/* the op's params as ATTENTION_BACKWARD's (the double forward, attn_row64, reads those) */
static struct nf_attention_backward_params adrop_bw(const struct nf_attention_params * a) {
    return (struct nf_attention_backward_params){.n_groups = a->n_groups,
                                                 .lq = a->lq,
                                                 .lk = a->lk,
                                                 .n_heads = a->n_heads,
                                                 .head_dim = a->head_dim,
                                                 .q_gs = a->q_gs,
                                                 .q_ss = a->q_ss,
                                                 .kv_gs = a->kv_gs,
                                                 .kv_ss = a->kv_ss,
                                                 .o_gs = a->o_gs,
                                                 .o_ss = a->o_ss,
                                                 .scale = a->scale,
                                                 .drop_seed = a->drop_seed,
                                                 .drop_threshold = a->drop_threshold,
                                                 .drop_scale = a->drop_scale};
}

void case_attention_drop(struct tcase * tc, int v) {
    const int feature = adrop_shapes[v].feature;
    const int64_t lq = adrop_shapes[v].lq, lk = adrop_shapes[v].lk, H = adrop_shapes[v].H, E = adrop_shapes[v].E;
    const int64_t G = adrop_shapes[v].G, D = H * E;
    tcase_begin(tc, NF_OP_ATTENTION, 3, 1);
    struct nf_attention_params * p = &tc->op.p.attention;
    p->n_groups = G;
    p->lq = lq;
    p->lk = lk;
    p->n_heads = H;
    p->head_dim = E;
    p->scale = 1.0f / sqrtf((float) E);
    attn_drop_params(adrop_shapes[v].drop, 100 + v, &p->drop_seed, &p->drop_threshold, &p->drop_scale);
    if (!feature) { /* group = token column of rows of T = G tokens */
        p->q_ss = p->kv_ss = G * D;
        p->q_gs = p->kv_gs = p->o_gs = D;
        p->o_ss = G * D + (adrop_shapes[v].opad ? 5 : 0);
    } else { /* group = row, lq = lk = T tokens */
        p->q_ss = p->kv_ss = D;
        p->q_gs = p->kv_gs = lq * D;
        p->o_ss = D + (adrop_shapes[v].opad ? 3 : 0);
        p->o_gs = lq * p->o_ss;
    }
    const int64_t qe = (G - 1) * p->q_gs + (lq - 1) * p->q_ss + D;
    const int64_t ke = (G - 1) * p->kv_gs + (lk - 1) * p->kv_ss + D;
    const int64_t oe = (G - 1) * p->o_gs + (lq - 1) * p->o_ss + D;
    opnd_init(&tc->src[0], NF_F32, 1, qe, 0, 0);
    fill_unif(&tc->src[0], -2.0f, 2.0f);
    opnd_init(&tc->src[1], NF_F32, 1, ke, 0, 0);
    fill_unif(&tc->src[1], -2.0f, 2.0f);
    opnd_init(&tc->src[2], NF_F32, 1, ke, 0, 0);
    fill_unif(&tc->src[2], -1.0f, 1.0f);
    opnd_init(&tc->dst[0], NF_F32, 1, oe, 0, 0);
    fill_unif(&tc->dst[0], -1.0f, 1.0f); /* the gaps of padded rows must stay */
    snprintf(tc->desc, sizeof(tc->desc),
             "%s groups=%lld lq=%lld lk=%lld heads=%lld head_dim=%lld o_ss=%lld dropout %.2g",
             feature ? "feature" : "row", (long long) G, (long long) lq, (long long) lk, (long long) H, (long long) E,
             (long long) p->o_ss, (double) adrop_shapes[v].drop);
}

/* o = sum_j P_ij M_ij v_j in double (attn_row64); the bound: ATTENTION's (tol_attention: the scores' dots,
 * the softmax, the sum over j) times the mask's scale */
void ref_attention_drop(const struct tcase * tc, double * const * ref, double * const * tol) {
    const struct nf_attention_params * a = &tc->op.p.attention;
    const struct nf_attention_backward_params p = adrop_bw(a);
    const int64_t E = p.head_dim;
    double *q = to_double(&tc->src[0]), *k = to_double(&tc->src[1]), *v = to_double(&tc->src[2]);
    double *P = calloc((size_t) p.lk, sizeof(double)), *orow = calloc((size_t) E, sizeof(double));
    if (!P || !orow) exit(2);
    for (int64_t g = 0; g < p.n_groups; g++)
        for (int64_t h = 0; h < p.n_heads; h++) {
            double vmax = 0.0;
            for (int64_t j = 0; j < p.lk; j++)
                for (int64_t e = 0; e < E; e++) {
                    const double x = fabs(v[g * p.kv_gs + j * p.kv_ss + h * E + e]);
                    vmax = x > vmax ? x : vmax;
                }
            for (int64_t i = 0; i < p.lq; i++) {
                attn_row64(&p, q, k, v, g, h, i, P, orow);
                double smag = 0.0;
                for (int64_t j = 0; j < p.lk; j++) {
                    double s = 0.0;
                    for (int64_t e = 0; e < E; e++)
                        s += fabs(q[g * p.q_gs + i * p.q_ss + h * E + e] * k[g * p.kv_gs + j * p.kv_ss + h * E + e]);
                    smag = fabs((double) p.scale) * s > smag ? fabs((double) p.scale) * s : smag;
                }
                const double t = 8.0 * EPS * (double) p.drop_scale * vmax * (sqrt((double) p.lk) + 4.0 * smag + 4.0);
                for (int64_t e = 0; e < E; e++) {
                    ref[0][g * p.o_gs + i * p.o_ss + h * E + e] = orow[e];
                    tol[0][g * p.o_gs + i * p.o_ss + h * E + e] = t + 1e-37;
                }
            }
        }
    free(q), free(k), free(v), free(P), free(orow);
}
