/*
 * backend-ops/cases-train-b.c -- the test descriptors of the training ops,
 * set B (ATTENTION_BACKWARD, EMBED_FEATURES_BACKWARD, LABEL_TOKENS_BACKWARD,
 * CROSS_ENTROPY, MSE_LOSS): case builders, float64 references with their
 * bounds (each op's formula evaluated in double; every backend, the cpu's
 * too, is compared with them) and finite-difference checks of the
 * gradients through the double forward formula on small cases.
 */
#define _POSIX_C_SOURCE 200809L

#include "backend-ops.h"

#include <float.h>
#include <math.h>

#define EPS ((double) FLT_EPSILON)

static double * dalloc(int64_t n) {
    double * p = calloc((size_t) (n > 0 ? n : 1), sizeof(double));
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

/* the bound of an accumulated column sum: S (the double sum) rounded to
 * float once, then added to the float destination (sumabs: sum of |terms|,
 * for the order of the double sums) */
static double tol_colsum(double S, double ref, double sumabs) {
    return EPS * (fabs(S) + fabs(ref)) + 1e-13 * sumabs + 1e-38;
}

/* ---- finite differences ---------------------------------------------------------------- */

/* central differences of L over the n_idx elements idx[] of x (double), h
 * = 1e-4, against grad[idx] (- base[idx] when the op accumulates into a
 * preset destination); bound 1e-4 (|fd| + max |fd| / 10) + 1e-6 */
typedef double (*loss_fn)(const void * ctx);

static int64_t fd_compare(const void * ctx, loss_fn L, double * x, const int64_t * idx, int64_t n_idx,
                          const float * grad, const float * base, double * worst) {
    const double h = 1e-4;
    double * fd = dalloc(n_idx);
    double mx = 0.0;
    for (int64_t t = 0; t < n_idx; t++) {
        const double x0 = x[idx[t]];
        x[idx[t]] = x0 + h;
        const double lp = L(ctx);
        x[idx[t]] = x0 - h;
        const double lm = L(ctx);
        x[idx[t]] = x0;
        fd[t] = (lp - lm) / (2.0 * h);
        mx = fabs(fd[t]) > mx ? fabs(fd[t]) : mx;
    }
    int64_t bad = 0;
    for (int64_t t = 0; t < n_idx; t++) {
        const double g = (double) grad[idx[t]] - (base ? (double) base[idx[t]] : 0.0);
        const double tol = 1e-4 * (fabs(fd[t]) + 0.1 * mx) + 1e-6;
        const double r = fabs(g - fd[t]) / tol;
        *worst = r > *worst ? r : *worst;
        bad += !(r <= 1.0);
    }
    free(fd);
    return bad;
}

static double * to_double(const struct operand * o) {
    const int64_t n = opnd_numel(o);
    double * d = dalloc(n);
    for (int64_t i = 0; i < n; i++) d[i] = (double) opnd_f(o)[i];
    return d;
}

/* ---- ATTENTION_BACKWARD ------------------------------------------------------------------ */

/* Mitra's two layouts as the ATTENTION cases (row: group = token column,
 * feature: group = row), several groups and heads, lq = 1, lk = 1, odd
 * sizes, head_dim up to 256, accumulate on / off, padded rows (the gaps of
 * dk and dv must stay untouched); the first six are small enough for the
 * finite differences. The last ones: the forward's dropout on the
 * probabilities (drop > 0; two small enough for the finite differences, the
 * cpu's tiled and blocked kernels, TabSTAR's fusion heads of 192, lk 300). */
static const struct {
    int feature;
    int64_t lq, lk, H, E, G;
    int acc, pad;
    float drop;
} abw_shapes[N_ATTN_BWD_CASES] = {
    {0, 1, 1, 1, 1, 1, 0, 0, 0.0f},      {0, 3, 4, 2, 3, 2, 0, 0, 0.0f},     {1, 5, 5, 1, 4, 2, 1, 0, 0.0f},
    {0, 2, 5, 2, 2, 1, 1, 1, 0.0f},      {0, 1, 3, 1, 4, 2, 0, 0, 0.0f},     {0, 4, 1, 2, 3, 2, 1, 0, 0.0f},
    {0, 5, 2, 2, 8, 3, 1, 1, 0.0f},      {0, 33, 17, 4, 128, 2, 0, 0, 0.0f}, {0, 16, 300, 1, 128, 2, 1, 1, 0.0f},
    {1, 17, 17, 4, 128, 3, 1, 0, 0.0f},  {1, 2, 2, 2, 192, 5, 0, 0, 0.0f},   {0, 19, 21, 1, 256, 2, 1, 1, 0.0f},
    {1, 9, 9, 3, 129, 3, 0, 0, 0.0f},    {0, 70, 65, 2, 16, 2, 1, 0, 0.0f},  {0, 7, 300, 2, 8, 4, 0, 1, 0.0f},
    {0, 130, 3, 1, 8, 1, 0, 0, 0.0f},    {0, 4, 5, 2, 3, 2, 1, 0, 0.5f},     {1, 5, 5, 1, 4, 2, 0, 1, 0.3f},
    {0, 33, 17, 4, 128, 2, 0, 0, 0.1f},  {0, 70, 65, 2, 16, 2, 1, 0, 0.2f},  {1, 2, 2, 2, 192, 5, 0, 0, 0.1f},
    {0, 16, 300, 1, 128, 2, 1, 1, 0.5f},
};

/* ATTENTION's dropout factor of mask element ((g H + h) lq + i) lk + j (nf-ops.def: DROPOUT's hash,
 * written out again here), in double: the scale or 0; 1 without dropout */
static double attn_mask64(int64_t seed, int32_t thr, float scale, int64_t H, int64_t lq, int64_t lk, int64_t g,
                          int64_t h, int64_t i, int64_t j) {
    if (thr <= 0) return 1.0;
    uint64_t z = (uint64_t) seed + ((uint64_t) (((g * H + h) * lq + i) * lk + j) + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (int64_t) (z >> 40) >= (int64_t) thr ? (double) scale : 0.0;
}
#define ABW_MASK(p, g, h, i, j) \
    attn_mask64((p)->drop_seed, (p)->drop_threshold, (p)->drop_scale, (p)->n_heads, (p)->lq, (p)->lk, g, h, i, j)

/* a case's dropout params (probability d, the seed from the variant) as nf_attention makes them */
void attn_drop_params(float d, int v, int64_t * seed, int32_t * thr, float * scale) {
    *seed = (int64_t) (0x5EEDD00Du + 7919u * (uint64_t) v);
    *thr = d > 0.0f ? (int32_t) floor((double) d * 16777216.0 + 0.5) : 0;
    *scale = d > 0.0f ? (float) (1.0 / (1.0 - (double) d)) : 1.0f;
}

/* the double forward: o[g][i][h] = softmax(scale q kᵀ) v for one (g, h, i), the probabilities times the
 * dropout mask (P itself without it) */
void attn_row64(const struct nf_attention_backward_params * p, const double * q, const double * k, const double * v,
                int64_t g, int64_t h, int64_t i, double * P, double * out) {
    const int64_t E = p->head_dim;
    const double * qi = q + g * p->q_gs + i * p->q_ss + h * E;
    double m = -INFINITY, l = 0.0;
    for (int64_t j = 0; j < p->lk; j++) {
        const double * kj = k + g * p->kv_gs + j * p->kv_ss + h * E;
        double s = 0.0;
        for (int64_t e = 0; e < E; e++) s += qi[e] * kj[e];
        P[j] = (double) p->scale * s;
        m = P[j] > m ? P[j] : m;
    }
    for (int64_t j = 0; j < p->lk; j++) l += (P[j] = exp(P[j] - m));
    for (int64_t j = 0; j < p->lk; j++) P[j] /= l;
    if (out) {
        for (int64_t e = 0; e < E; e++) {
            double a = 0.0;
            for (int64_t j = 0; j < p->lk; j++)
                a += P[j] * ABW_MASK(p, g, h, i, j) * v[g * p->kv_gs + j * p->kv_ss + h * E + e];
            out[e] = a;
        }
    }
}

/* fills the elements the op writes of an operand with kv layout (or q / o's) */
static void attn_fill_rows(struct operand * o, int64_t G, int64_t gs, int64_t L, int64_t ss, int64_t W, float lo,
                           float hi) {
    float * f = opnd_f(o);
    for (int64_t g = 0; g < G; g++)
        for (int64_t i = 0; i < L; i++)
            for (int64_t c = 0; c < W; c++) f[g * gs + i * ss + c] = rng_unif(lo, hi);
}

void case_attention_backward(struct tcase * tc, int v) {
    const int feature = abw_shapes[v].feature, pad = abw_shapes[v].pad;
    const int64_t lq = abw_shapes[v].lq, lk = abw_shapes[v].lk, H = abw_shapes[v].H, E = abw_shapes[v].E;
    const int64_t G = abw_shapes[v].G, D = H * E;
    tcase_begin(tc, NF_OP_ATTENTION_BACKWARD, 5, 4);
    struct nf_attention_backward_params * p = &tc->op.p.attention_backward;
    p->n_groups = G;
    p->lq = lq;
    p->lk = lk;
    p->n_heads = H;
    p->head_dim = E;
    p->scale = 1.0f / sqrtf((float) E);
    p->accumulate_kv = abw_shapes[v].acc;
    attn_drop_params(abw_shapes[v].drop, v, &p->drop_seed, &p->drop_threshold, &p->drop_scale);
    if (!feature) { /* group = token column of rows of T = G tokens */
        p->q_ss = G * D;
        p->q_gs = D;
        p->kv_ss = G * D + (pad ? 3 : 0);
        p->kv_gs = D;
        p->o_ss = G * D + (pad ? 5 : 0);
        p->o_gs = D;
    } else { /* group = row, lq = lk = T tokens */
        p->q_ss = D;
        p->q_gs = lq * D;
        p->kv_ss = D + (pad ? 3 : 0);
        p->kv_gs = lk * p->kv_ss;
        p->o_ss = D + (pad ? 2 : 0);
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
    opnd_init(&tc->src[3], NF_F32, 1, oe, 0, 0);
    opnd_init(&tc->src[4], NF_F32, 1, oe, 0, 0);
    fill_unif(&tc->src[4], -1.0f, 1.0f);
    /* o = the forward's output (double, rounded), so that the op's delta is right */
    double *qd = to_double(&tc->src[0]), *kd = to_double(&tc->src[1]), *vd = to_double(&tc->src[2]);
    double *P = dalloc(lk), *orow = dalloc(E);
    for (int64_t g = 0; g < G; g++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < lq; i++) {
                attn_row64(p, qd, kd, vd, g, h, i, P, orow);
                for (int64_t e = 0; e < E; e++)
                    opnd_f(&tc->src[3])[g * p->o_gs + i * p->o_ss + h * E + e] = (float) orow[e];
            }
    free(qd), free(kd), free(vd), free(P), free(orow);
    opnd_init(&tc->dst[0], NF_F32, 1, qe, 0, 0);
    opnd_init(&tc->dst[1], NF_F32, 1, ke, 0, 0);
    opnd_init(&tc->dst[2], NF_F32, 1, ke, 0, 0);
    if (p->accumulate_kv) {
        attn_fill_rows(&tc->dst[1], G, p->kv_gs, lk, p->kv_ss, D, -2.0f, 2.0f);
        attn_fill_rows(&tc->dst[2], G, p->kv_gs, lk, p->kv_ss, D, -2.0f, 2.0f);
    }
    opnd_init(&tc->dst[3], NF_F32, 1, 2 * G * H * lq, 0, 0);
    snprintf(tc->desc, sizeof(tc->desc), "%s groups=%lld lq=%lld lk=%lld heads=%lld head_dim=%lld kv_ss=%lld%s%s%.2g",
             feature ? "feature" : "row", (long long) G, (long long) lq, (long long) lk, (long long) H, (long long) E,
             (long long) p->kv_ss, p->accumulate_kv ? " acc" : "", abw_shapes[v].drop > 0.0f ? " dropout " : "",
             abw_shapes[v].drop > 0.0f ? (double) abw_shapes[v].drop : 0.0);
}

/* The formula in double, and per element a bound from fp32 rounding
 * (in units of eps): the scores' dot products (smag = max_j scale sum_e
 * |q k|), the softmax (kappa = 4 smag + 4 + sqrt(lk) relative to P), dP and
 * delta (sqrt(E) sum_e |do v|, |do o|), and the sums over j (dq: sqrt(lk))
 * and over i (dk, dv: sqrt(lq)) -- as tol_attention, times 8. */
void ref_attention_backward(const struct tcase * tc, double * const * ref, double * const * tol) {
    const struct nf_attention_backward_params * p = &tc->op.p.attention_backward;
    const int64_t G = p->n_groups, H = p->n_heads, E = p->head_dim, lq = p->lq, lk = p->lk;
    const double sc = (double) p->scale, cE = sqrt((double) E);
    double *q = to_double(&tc->src[0]), *k = to_double(&tc->src[1]), *v = to_double(&tc->src[2]);
    double *o = to_double(&tc->src[3]), *dO = to_double(&tc->src[4]);
    double *P = dalloc(lk), *dS = dalloc(lk), *eS = dalloc(lk), *M = dalloc(lk);
    double *ak = dalloc(lk * E), *av = dalloc(lk * E), *tk = dalloc(lk * E), *tv = dalloc(lk * E);
    const int64_t nst = opnd_numel(&tc->dst[3]);
    for (int64_t i = 0; i < nst; i++) tol[3][i] = -1.0; /* stats: a scratch */
    for (int64_t g = 0; g < G; g++) {
        for (int64_t h = 0; h < H; h++) {
            memset(ak, 0, (size_t) (lk * E) * sizeof(double));
            memset(av, 0, (size_t) (lk * E) * sizeof(double));
            memset(tk, 0, (size_t) (lk * E) * sizeof(double));
            memset(tv, 0, (size_t) (lk * E) * sizeof(double));
            for (int64_t i = 0; i < lq; i++) {
                const double * qi = q + g * p->q_gs + i * p->q_ss + h * E;
                const double * oi = o + g * p->o_gs + i * p->o_ss + h * E;
                const double * di = dO + g * p->o_gs + i * p->o_ss + h * E;
                attn_row64(p, q, k, v, g, h, i, P, NULL);
                double smag = 0.0, delta = 0.0, dlmag = 0.0;
                for (int64_t e = 0; e < E; e++) delta += di[e] * oi[e], dlmag += fabs(di[e] * oi[e]);
                for (int64_t j = 0; j < lk; j++) {
                    const double * kj = k + g * p->kv_gs + j * p->kv_ss + h * E;
                    double s = 0.0;
                    for (int64_t e = 0; e < E; e++) s += fabs(qi[e] * kj[e]);
                    smag = sc * s > smag ? sc * s : smag;
                }
                const double kap = 4.0 * smag + 4.0 + sqrt((double) lk);
                for (int64_t j = 0; j < lk; j++) {
                    const double * vj = v + g * p->kv_gs + j * p->kv_ss + h * E;
                    double dp = 0.0, dpmag = 0.0;
                    for (int64_t e = 0; e < E; e++) dp += di[e] * vj[e], dpmag += fabs(di[e] * vj[e]);
                    M[j] = ABW_MASK(p, g, h, i, j); /* the forward's dropout: dS = P (M dP - delta) */
                    dS[j] = P[j] * (M[j] * dp - delta);
                    eS[j] = P[j] * (cE * (M[j] * dpmag + dlmag) + fabs(M[j] * dp - delta) * kap);
                }
                for (int64_t e = 0; e < E; e++) {
                    double a = 0.0, t = 0.0;
                    for (int64_t j = 0; j < lk; j++) {
                        const double kje = k[g * p->kv_gs + j * p->kv_ss + h * E + e];
                        a += dS[j] * kje;
                        t += (eS[j] + sqrt((double) lk) * fabs(dS[j])) * fabs(kje);
                    }
                    const int64_t x = g * p->q_gs + i * p->q_ss + h * E + e;
                    ref[0][x] = sc * a;
                    tol[0][x] = 8.0 * EPS * sc * t + EPS * fabs(sc * a) + 1e-37;
                }
                for (int64_t j = 0; j < lk; j++) {
                    for (int64_t e = 0; e < E; e++) {
                        ak[j * E + e] += dS[j] * qi[e];
                        av[j * E + e] += P[j] * M[j] * di[e];
                        tk[j * E + e] += (eS[j] + sqrt((double) lq) * fabs(dS[j])) * fabs(qi[e]);
                        tv[j * E + e] += P[j] * M[j] * (kap + sqrt((double) lq)) * fabs(di[e]);
                    }
                }
            }
            for (int64_t j = 0; j < lk; j++) {
                for (int64_t e = 0; e < E; e++) {
                    const int64_t x = g * p->kv_gs + j * p->kv_ss + h * E + e;
                    const double b1 = p->accumulate_kv ? ref[1][x] : 0.0, b2 = p->accumulate_kv ? ref[2][x] : 0.0;
                    ref[1][x] = b1 + sc * ak[j * E + e];
                    ref[2][x] = b2 + av[j * E + e];
                    tol[1][x] = 8.0 * EPS * sc * tk[j * E + e] + EPS * (fabs(ref[1][x]) + fabs(b1)) + 1e-37;
                    tol[2][x] = 8.0 * EPS * tv[j * E + e] + EPS * (fabs(ref[2][x]) + fabs(b2)) + 1e-37;
                }
            }
        }
    }
    free(q), free(k), free(v), free(o), free(dO), free(P), free(dS), free(eS), free(M);
    free(ak), free(av), free(tk), free(tv);
}

struct abw_fd {
    const struct nf_attention_backward_params * p;
    double *q, *k, *v, *dO, *P, *orow;
};

/* L = sum do . o over every written o element, o by the double forward */
static double abw_loss(const void * vctx) {
    const struct abw_fd * c = vctx;
    const struct nf_attention_backward_params * p = c->p;
    double L = 0.0;
    for (int64_t g = 0; g < p->n_groups; g++)
        for (int64_t h = 0; h < p->n_heads; h++)
            for (int64_t i = 0; i < p->lq; i++) {
                attn_row64(p, c->q, c->k, c->v, g, h, i, c->P, c->orow);
                for (int64_t e = 0; e < p->head_dim; e++)
                    L += c->dO[g * p->o_gs + i * p->o_ss + h * p->head_dim + e] * c->orow[e];
            }
    return L;
}

/* the elements of rows (L rows at ss, groups at gs, W columns) */
static int64_t rows_index(int64_t G, int64_t gs, int64_t L, int64_t ss, int64_t W, int64_t * idx) {
    int64_t n = 0;
    for (int64_t g = 0; g < G; g++)
        for (int64_t i = 0; i < L; i++)
            for (int64_t c = 0; c < W; c++) idx[n++] = g * gs + i * ss + c;
    return n;
}

int64_t fd_attention_backward(const struct tcase * tc, const float * const * dst, double * worst) {
    const struct nf_attention_backward_params * p = &tc->op.p.attention_backward;
    if (p->lq > 5 || p->lk > 5 || p->head_dim > 4) return -1;
    const int64_t D = p->n_heads * p->head_dim;
    struct abw_fd c = {p,
                       to_double(&tc->src[0]),
                       to_double(&tc->src[1]),
                       to_double(&tc->src[2]),
                       to_double(&tc->src[4]),
                       dalloc(p->lk),
                       dalloc(p->head_dim)};
    int64_t * idx = malloc((size_t) (p->n_groups * (p->lq + p->lk) * D + 1) * sizeof(int64_t));
    if (!idx) exit(2);
    const float * base;
    int64_t n = rows_index(p->n_groups, p->q_gs, p->lq, p->q_ss, D, idx);
    int64_t bad = fd_compare(&c, abw_loss, c.q, idx, n, dst[0], NULL, worst);
    n = rows_index(p->n_groups, p->kv_gs, p->lk, p->kv_ss, D, idx);
    base = p->accumulate_kv ? opnd_f(&tc->dst[1]) : NULL;
    bad += fd_compare(&c, abw_loss, c.k, idx, n, dst[1], base, worst);
    base = p->accumulate_kv ? opnd_f(&tc->dst[2]) : NULL;
    bad += fd_compare(&c, abw_loss, c.v, idx, n, dst[2], base, worst);
    free(c.q), free(c.k), free(c.v), free(c.dO), free(c.P), free(c.orow), free(idx);
    return bad;
}

/* ---- EMBED_FEATURES_BACKWARD ---------------------------------------------------------------- */

static const struct {
    int64_t n, F, D;
} ebw_shapes[N_EMBED_BWD_CASES] = {{1, 1, 1}, {4, 3, 3}, {7, 5, 16}, {33, 3, 512}, {2, 1, 17}, {3000, 3, 5}};

void case_embed_backward(struct tcase * tc, int v) {
    const int64_t n = ebw_shapes[v].n, F = ebw_shapes[v].F, D = ebw_shapes[v].D;
    tcase_begin(tc, NF_OP_EMBED_FEATURES_BACKWARD, 2, 2);
    opnd_init(&tc->src[0], NF_F32, 2, n, F, 0);
    fill_unif(&tc->src[0], -2.0f, 2.0f);
    opnd_init(&tc->src[1], NF_F32, 3, n, F + 1, D);
    fill_unif(&tc->src[1], -1.0f, 1.0f);
    opnd_init(&tc->dst[0], NF_F32, 1, D, 0, 0);
    fill_unif(&tc->dst[0], -1.0f, 1.0f);
    opnd_init(&tc->dst[1], NF_F32, 1, D, 0, 0);
    fill_unif(&tc->dst[1], -1.0f, 1.0f);
    snprintf(tc->desc, sizeof(tc->desc), "n=%lld F=%lld D=%lld", (long long) n, (long long) F, (long long) D);
}

void ref_embed_backward(const struct tcase * tc, double * const * ref, double * const * tol) {
    const int64_t n = tc->src[0].ne[0], F = tc->src[0].ne[1], D = tc->src[1].ne[2];
    const float *z = opnd_f(&tc->src[0]), *t = opnd_f(&tc->src[1]);
    for (int64_t d = 0; d < D; d++) {
        double sw = 0.0, sb = 0.0, aw = 0.0, ab = 0.0;
        for (int64_t r = 0; r < n; r++)
            for (int64_t j = 0; j < F; j++) {
                const double x = (double) t[(r * (F + 1) + 1 + j) * D + d], zz = (double) z[r * F + j];
                sw += zz * x, aw += fabs(zz * x);
                sb += x, ab += fabs(x);
            }
        ref[0][d] += sw;
        ref[1][d] += sb;
        tol[0][d] = tol_colsum(sw, ref[0][d], aw);
        tol[1][d] = tol_colsum(sb, ref[1][d], ab);
    }
}

struct ebw_fd {
    const struct tcase * tc;
    double *w, *b;
};

/* L = sum over the feature tokens of dtok . (z w + b) */
static double ebw_loss(const void * vctx) {
    const struct ebw_fd * c = vctx;
    const int64_t n = c->tc->src[0].ne[0], F = c->tc->src[0].ne[1], D = c->tc->src[1].ne[2];
    const float *z = opnd_f(&c->tc->src[0]), *t = opnd_f(&c->tc->src[1]);
    double L = 0.0;
    for (int64_t r = 0; r < n; r++)
        for (int64_t j = 0; j < F; j++)
            for (int64_t d = 0; d < D; d++)
                L += (double) t[(r * (F + 1) + 1 + j) * D + d] * ((double) z[r * F + j] * c->w[d] + c->b[d]);
    return L;
}

static int64_t * iota(int64_t n) {
    int64_t * idx = malloc((size_t) (n > 0 ? n : 1) * sizeof(int64_t));
    if (!idx) exit(2);
    for (int64_t i = 0; i < n; i++) idx[i] = i;
    return idx;
}

int64_t fd_embed_backward(const struct tcase * tc, const float * const * dst, double * worst) {
    const int64_t D = tc->src[1].ne[2];
    if (opnd_numel(&tc->src[1]) > 200) return -1;
    struct ebw_fd c = {tc, dalloc(D), dalloc(D)};
    int64_t * idx = iota(D);
    int64_t bad = fd_compare(&c, ebw_loss, c.w, idx, D, dst[0], opnd_f(&tc->dst[0]), worst);
    bad += fd_compare(&c, ebw_loss, c.b, idx, D, dst[1], opnd_f(&tc->dst[1]), worst);
    free(c.w), free(c.b), free(idx);
    return bad;
}

/* ---- LABEL_TOKENS_BACKWARD ---------------------------------------------------------------- */

static const struct {
    int mode;
    int64_t n, T, D, C;
} lbw_shapes[N_LABEL_BWD_CASES] = {
    {NF_LABEL_CLASS, 1, 1, 1, 1},      {NF_LABEL_CLASS, 4, 2, 3, 3},    {NF_LABEL_CLASS, 9, 4, 17, 10},
    {NF_LABEL_CLASS, 100, 3, 512, 10}, {NF_LABEL_CLASS, 2000, 2, 3, 3}, {NF_LABEL_VALUE, 1, 1, 1, 0},
    {NF_LABEL_VALUE, 4, 2, 3, 0},      {NF_LABEL_VALUE, 9, 4, 17, 0},   {NF_LABEL_VALUE, 2000, 2, 5, 0},
    {NF_LABEL_MASK, 4, 2, 3, 0},       {NF_LABEL_MASK, 9, 4, 17, 0},    {NF_LABEL_MASK, 2000, 2, 3, 0},
};

void case_label_backward(struct tcase * tc, int v) {
    const int mode = lbw_shapes[v].mode;
    const int64_t n = lbw_shapes[v].n, T = lbw_shapes[v].T, D = lbw_shapes[v].D, C = lbw_shapes[v].C;
    static const char * const mname[] = {"class", "value", "mask"};
    tcase_begin(tc, NF_OP_LABEL_TOKENS_BACKWARD, 2, mode == NF_LABEL_VALUE ? 2 : 1);
    tc->op.p.label_tokens_backward.mode = mode;
    if (mode == NF_LABEL_CLASS) {
        opnd_init(&tc->src[0], NF_I32, 1, n, 0, 0);
        int32_t * y = opnd_i(&tc->src[0]);
        for (int64_t r = 0; r < n; r++) /* every seventh label out of range: contributes nothing */
            y[r] = r % 7 == 6 ? (r % 2 ? -1 : (int32_t) (C + r % 3)) : (int32_t) rng_int(C);
        opnd_init(&tc->dst[0], NF_F32, 2, C, D, 0);
    } else if (mode == NF_LABEL_VALUE) {
        opnd_init(&tc->src[0], NF_F32, 1, n, 0, 0);
        fill_unif(&tc->src[0], -5.0f, 5.0f);
        opnd_init(&tc->dst[0], NF_F32, 1, D, 0, 0);
        opnd_init(&tc->dst[1], NF_F32, 1, D, 0, 0);
        fill_unif(&tc->dst[1], -1.0f, 1.0f);
    } else {
        tc->src[0].used = 0; /* unused in mask mode */
        opnd_init(&tc->dst[0], NF_F32, 2, 1, D, 0);
    }
    fill_unif(&tc->dst[0], -1.0f, 1.0f);
    opnd_init(&tc->src[1], NF_F32, 3, n, T, D);
    fill_unif(&tc->src[1], -1.0f, 1.0f);
    snprintf(tc->desc, sizeof(tc->desc), "%s n=%lld T=%lld D=%lld C=%lld", mname[mode], (long long) n, (long long) T,
             (long long) D, (long long) C);
}

void ref_label_backward(const struct tcase * tc, double * const * ref, double * const * tol) {
    const int mode = tc->op.p.label_tokens_backward.mode;
    const int64_t n = tc->src[1].ne[0], T = tc->src[1].ne[1], D = tc->src[1].ne[2];
    const int64_t C = mode == NF_LABEL_CLASS ? tc->dst[0].ne[0] : 1;
    const float * t = opnd_f(&tc->src[1]);
    for (int64_t c = 0; c < C; c++) {
        for (int64_t d = 0; d < D; d++) {
            double s0 = 0.0, a0 = 0.0, s1 = 0.0, a1 = 0.0;
            for (int64_t r = 0; r < n; r++) {
                const double x = (double) t[r * T * D + d];
                double w = 1.0;
                if (mode == NF_LABEL_CLASS && opnd_i(&tc->src[0])[r] != c) continue;
                if (mode == NF_LABEL_VALUE) w = (double) opnd_f(&tc->src[0])[r];
                s0 += w * x, a0 += fabs(w * x);
                s1 += x, a1 += fabs(x);
            }
            ref[0][c * D + d] += s0;
            tol[0][c * D + d] = tol_colsum(s0, ref[0][c * D + d], a0);
            if (mode == NF_LABEL_VALUE) {
                ref[1][d] += s1;
                tol[1][d] = tol_colsum(s1, ref[1][d], a1);
            }
        }
    }
}

struct lbw_fd {
    const struct tcase * tc;
    double *p0, *p1; /* E (class), w and b (value), M (mask) */
};

/* L = sum_r dtok[r][0] . token 0 of row r (the forward) */
static double lbw_loss(const void * vctx) {
    const struct lbw_fd * c = vctx;
    const struct tcase * tc = c->tc;
    const int mode = tc->op.p.label_tokens_backward.mode;
    const int64_t n = tc->src[1].ne[0], T = tc->src[1].ne[1], D = tc->src[1].ne[2];
    const int64_t C = mode == NF_LABEL_CLASS ? tc->dst[0].ne[0] : 1;
    double L = 0.0;
    for (int64_t r = 0; r < n; r++) {
        for (int64_t d = 0; d < D; d++) {
            double tok;
            if (mode == NF_LABEL_CLASS) {
                const int32_t y = opnd_i(&tc->src[0])[r];
                if (y < 0 || y >= C) continue;
                tok = c->p0[y * D + d];
            } else if (mode == NF_LABEL_VALUE) {
                tok = (double) opnd_f(&tc->src[0])[r] * c->p0[d] + c->p1[d];
            } else {
                tok = c->p0[d];
            }
            L += (double) opnd_f(&tc->src[1])[r * T * D + d] * tok;
        }
    }
    return L;
}

int64_t fd_label_backward(const struct tcase * tc, const float * const * dst, double * worst) {
    if (opnd_numel(&tc->src[1]) > 200) return -1;
    const int64_t n0 = opnd_numel(&tc->dst[0]);
    struct lbw_fd c = {tc, dalloc(n0), dalloc(n0)};
    int64_t * idx = iota(n0);
    int64_t bad = fd_compare(&c, lbw_loss, c.p0, idx, n0, dst[0], opnd_f(&tc->dst[0]), worst);
    if (tc->op.p.label_tokens_backward.mode == NF_LABEL_VALUE)
        bad += fd_compare(&c, lbw_loss, c.p1, idx, n0, dst[1], opnd_f(&tc->dst[1]), worst);
    free(c.p0), free(c.p1), free(idx);
    return bad;
}

/* ---- CROSS_ENTROPY ---------------------------------------------------------------------- */

static const struct {
    int64_t n, c, pad;
    float range;
    int bad_y, grad;
} xent_shapes[N_XENT_CASES] = {
    {1, 1, 0, 5.0f, 0, 1},    {4, 3, 1, 5.0f, 0, 1}, {7, 3, 2, 5.0f, 0, 1},    {9, 10, 0, 5.0f, 1, 1},
    {300, 10, 5, 5.0f, 0, 1}, {5, 2, 0, 5.0f, 0, 0}, {2000, 4, 0, 5.0f, 0, 1}, {33, 7, 0, 60.0f, 0, 1},
};

void case_cross_entropy(struct tcase * tc, int v) {
    const int64_t n = xent_shapes[v].n, C = xent_shapes[v].c;
    const int grad = xent_shapes[v].grad;
    tcase_begin(tc, NF_OP_CROSS_ENTROPY, 2, grad ? 2 : 1);
    struct nf_cross_entropy_params * p = &tc->op.p.cross_entropy;
    p->n = n;
    p->c = C;
    p->ldl = C + xent_shapes[v].pad;
    p->grad_scale = (float) (1.0 / (double) n);
    opnd_init(&tc->src[0], NF_F32, 1, (n - 1) * p->ldl + C, 0, 0);
    fill_unif(&tc->src[0], -xent_shapes[v].range, xent_shapes[v].range);
    opnd_init(&tc->src[1], NF_I32, 1, n, 0, 0);
    for (int64_t r = 0; r < n; r++) opnd_i(&tc->src[1])[r] = (int32_t) rng_int(C);
    if (xent_shapes[v].bad_y) opnd_i(&tc->src[1])[n / 2] = (int32_t) C; /* out of range: the loss is NaN */
    opnd_init(&tc->dst[0], NF_F32, 1, 1, 0, 0);
    if (grad) opnd_init(&tc->dst[1], NF_F32, 2, n, C, 0);
    snprintf(tc->desc, sizeof(tc->desc), "n=%lld c=%lld ldl=%lld logits~%g%s%s", (long long) n, (long long) C,
             (long long) p->ldl, (double) xent_shapes[v].range, xent_shapes[v].bad_y ? " y-out-of-range" : "",
             grad ? "" : " loss-only");
}

/* the loss of row r in double, its softmax into sm (may be NULL) */
static double xent_row(const struct nf_cross_entropy_params * p, const double * l, int32_t y, double * sm) {
    double mx = l[0], s = 0.0;
    for (int64_t c = 1; c < p->c; c++) mx = l[c] > mx ? l[c] : mx;
    for (int64_t c = 0; c < p->c; c++) s += exp(l[c] - mx);
    if (sm)
        for (int64_t c = 0; c < p->c; c++) sm[c] = exp(l[c] - mx) / s;
    return y >= 0 && y < p->c ? mx + log(s) - l[y] : NAN;
}

void ref_cross_entropy(const struct tcase * tc, double * const * ref, double * const * tol) {
    const struct nf_cross_entropy_params * p = &tc->op.p.cross_entropy;
    double * l = to_double(&tc->src[0]);
    double * sm = dalloc(p->c);
    double tot = 0.0, mag = 0.0;
    for (int64_t r = 0; r < p->n; r++) {
        const int32_t y = opnd_i(&tc->src[1])[r];
        const double lr = xent_row(p, l + r * p->ldl, y, sm);
        tot += lr;
        mag += fabs(lr);
        if (tc->op.n_dst == 2) {
            for (int64_t c = 0; c < p->c; c++) {
                const double g = (sm[c] - (c == y ? 1.0 : 0.0)) * (double) p->grad_scale;
                ref[1][r * p->c + c] = g;
                tol[1][r * p->c + c] = EPS * fabs(g) + 1e-15 * fabs((double) p->grad_scale) + 1e-38;
            }
        }
    }
    ref[0][0] = tot / (double) p->n;
    tol[0][0] = 2.0 * EPS * fabs(ref[0][0]) + 1e-13 * mag / (double) p->n + 1e-38;
    free(l), free(sm);
}

struct xent_fd {
    const struct tcase * tc;
    double * l;
};

static double xent_loss(const void * vctx) {
    const struct xent_fd * c = vctx;
    const struct nf_cross_entropy_params * p = &c->tc->op.p.cross_entropy;
    double tot = 0.0;
    for (int64_t r = 0; r < p->n; r++) tot += xent_row(p, c->l + r * p->ldl, opnd_i(&c->tc->src[1])[r], NULL);
    return tot / (double) p->n;
}

int64_t fd_cross_entropy(const struct tcase * tc, const float * const * dst, double * worst) {
    const struct nf_cross_entropy_params * p = &tc->op.p.cross_entropy;
    if (tc->op.n_dst != 2 || p->n * p->c > 64) return -1;
    struct xent_fd c = {tc, to_double(&tc->src[0])};
    int64_t * idx = malloc((size_t) (p->n * p->c) * sizeof(int64_t));
    float * g = malloc((size_t) (opnd_numel(&tc->src[0])) * sizeof(float));
    if (!idx || !g) exit(2);
    /* dlogits is (n, c) contiguous, logits rows at ldl: compare through the logits' index */
    for (int64_t r = 0; r < p->n; r++)
        for (int64_t k = 0; k < p->c; k++) {
            idx[r * p->c + k] = r * p->ldl + k;
            g[r * p->ldl + k] = dst[1][r * p->c + k];
        }
    const int64_t bad = fd_compare(&c, xent_loss, c.l, idx, p->n * p->c, g, NULL, worst);
    free(c.l), free(idx), free(g);
    return bad;
}

/* ---- MSE_LOSS ------------------------------------------------------------------------------ */

static const struct {
    int64_t n, ldp;
    int grad;
} mse_shapes[N_MSE_CASES] = {{1, 1, 1}, {6, 2, 1}, {7, 3, 1}, {1000, 1, 1}, {5, 2, 0}};

void case_mse_loss(struct tcase * tc, int v) {
    const int64_t n = mse_shapes[v].n, ldp = mse_shapes[v].ldp;
    const int grad = mse_shapes[v].grad;
    tcase_begin(tc, NF_OP_MSE_LOSS, 2, grad ? 2 : 1);
    tc->op.p.mse_loss = (struct nf_mse_loss_params){.n = n, .ldp = ldp, .grad_scale = (float) (2.0 / (double) n)};
    opnd_init(&tc->src[0], NF_F32, 1, (n - 1) * ldp + 1, 0, 0);
    fill_unif(&tc->src[0], -3.0f, 3.0f);
    opnd_init(&tc->src[1], NF_F32, 1, n, 0, 0);
    fill_unif(&tc->src[1], -3.0f, 3.0f);
    opnd_init(&tc->dst[0], NF_F32, 1, 1, 0, 0);
    if (grad) opnd_init(&tc->dst[1], NF_F32, 1, n, 0, 0);
    snprintf(tc->desc, sizeof(tc->desc), "n=%lld ldp=%lld%s", (long long) n, (long long) ldp, grad ? "" : " loss-only");
}

void ref_mse_loss(const struct tcase * tc, double * const * ref, double * const * tol) {
    const struct nf_mse_loss_params * p = &tc->op.p.mse_loss;
    const float *x = opnd_f(&tc->src[0]), *t = opnd_f(&tc->src[1]);
    double tot = 0.0;
    for (int64_t i = 0; i < p->n; i++) {
        const double d = (double) x[i * p->ldp] - (double) t[i];
        tot += d * d;
        if (tc->op.n_dst == 2) {
            ref[1][i] = (double) p->grad_scale * d;
            tol[1][i] = 2.0 * EPS * fabs(ref[1][i]) + 1e-38;
        }
    }
    ref[0][0] = tot / (double) p->n;
    tol[0][0] = 2.0 * EPS * ref[0][0] + 1e-38;
}

struct mse_fd {
    const struct tcase * tc;
    double * x;
};

static double mse_loss64(const void * vctx) {
    const struct mse_fd * c = vctx;
    const struct nf_mse_loss_params * p = &c->tc->op.p.mse_loss;
    double tot = 0.0;
    for (int64_t i = 0; i < p->n; i++) {
        const double d = c->x[i * p->ldp] - (double) opnd_f(&c->tc->src[1])[i];
        tot += d * d;
    }
    return tot / (double) p->n;
}

int64_t fd_mse_loss(const struct tcase * tc, const float * const * dst, double * worst) {
    const struct nf_mse_loss_params * p = &tc->op.p.mse_loss;
    if (tc->op.n_dst != 2 || p->n > 64) return -1;
    struct mse_fd c = {tc, to_double(&tc->src[0])};
    int64_t * idx = malloc((size_t) p->n * sizeof(int64_t));
    float * g = calloc((size_t) opnd_numel(&tc->src[0]), sizeof(float));
    if (!idx || !g) exit(2);
    for (int64_t i = 0; i < p->n; i++) idx[i] = i * p->ldp, g[i * p->ldp] = dst[1][i];
    const int64_t bad = fd_compare(&c, mse_loss64, c.x, idx, p->n, g, NULL, worst);
    free(c.x), free(idx), free(g);
    return bad;
}
