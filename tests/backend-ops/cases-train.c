/*
 * backend-ops/cases-train.c -- the conformance descriptors of the training
 * ops, set A (GEMM, COL_SUM, ACT, ACT_BACKWARD, LAYER_NORM_BACKWARD, ADAMW,
 * COPY): case builders, float64 references (ref_*: the contract's formula in
 * double), tolerances derived from the fp32 roundings of the formula, and
 * the finite-difference checks of the two gradient ops (fd_*: the gradient
 * formula against central differences of the forward formula, in double).
 * The descriptors themselves are in g_ops (cases.c).
 */
#define _POSIX_C_SOURCE 200809L

#include "backend-ops.h"
#include "nf-ops.h"

#include <float.h>
#include <math.h>

#define EPS          FLT_EPSILON
#define NF__SQRT_2PI 2.5066282746310002 /* sqrt(2 pi) */

/* a dst that starts random (accumulating ops) with its stride gaps at SENTINEL */
static void fill_rows_keep_gaps(struct operand * o, int64_t rows, int64_t width, int64_t ld, float lo, float hi) {
    float * f = opnd_f(o);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c = 0; c < width; c++) {
            f[r * ld + c] = rng_unif(lo, hi);
        }
    }
}

/* out = the initial values of dst j (the elements the op does not write) */
static void init_out(const struct tcase * tc, int j, double * out) {
    const float * f = opnd_f(&tc->dst[j]);
    for (int64_t i = 0; i < opnd_numel(&tc->dst[j]); i++) {
        out[i] = (double) f[i];
    }
}

/* ---- GEMM ------------------------------------------------------------------------------ */

static const struct {
    int64_t m, n, k;
} gemm_shapes[] = {{1, 1, 1}, {7, 5, 3}, {33, 17, 64}, {130, 65, 257}, {2, 300, 1}};
_Static_assert(sizeof(gemm_shapes) / sizeof(gemm_shapes[0]) * 4 == N_GEMM_CASES, "GEMM variants");

/* variant v: shape v / 4, trans_a = v & 1, trans_b = (v >> 1) & 1; accumulate
 * and padded leading dimensions alternate so that every trans pair sees both */
void case_gemm(struct tcase * tc, int v) {
    const int64_t m = gemm_shapes[v / 4].m, n = gemm_shapes[v / 4].n, k = gemm_shapes[v / 4].k;
    const int ta = v & 1, tb = (v >> 1) & 1, acc = ((v / 4) + v) % 2, pad = v % 3 == 1;
    tcase_begin(tc, NF_OP_GEMM, 2, 1);
    struct nf_gemm_params * p = &tc->op.p.gemm;
    p->m = m;
    p->n = n;
    p->k = k;
    p->trans_a = ta;
    p->trans_b = tb;
    p->accumulate = acc;
    const int64_t a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
    p->lda = a_cols + (pad ? 3 : 0);
    p->ldb = b_cols + (pad ? 1 : 0);
    p->ldc = n + (pad ? 2 : 0);
    opnd_init(&tc->src[0], NF_F32, 1, (a_rows - 1) * p->lda + a_cols, 0, 0);
    fill_unif(&tc->src[0], -1.0f, 1.0f);
    opnd_init(&tc->src[1], NF_F32, 1, (b_rows - 1) * p->ldb + b_cols, 0, 0);
    fill_unif(&tc->src[1], -1.0f, 1.0f);
    opnd_init(&tc->dst[0], NF_F32, 1, (m - 1) * p->ldc + n, 0, 0);
    if (acc) fill_rows_keep_gaps(&tc->dst[0], m, n, p->ldc, -2.0f, 2.0f);
    snprintf(tc->desc, sizeof(tc->desc), "m=%lld n=%lld k=%lld trans_a=%d trans_b=%d lda=%lld ldb=%lld ldc=%lld%s",
             (long long) m, (long long) n, (long long) k, ta, tb, (long long) p->lda, (long long) p->ldb,
             (long long) p->ldc, acc ? " acc" : "");
}

static double gemm_a(const struct tcase * tc, int64_t i, int64_t l) {
    const struct nf_gemm_params * p = &tc->op.p.gemm;
    return (double) opnd_f(&tc->src[0])[p->trans_a ? l * p->lda + i : i * p->lda + l];
}

static double gemm_b(const struct tcase * tc, int64_t l, int64_t j) {
    const struct nf_gemm_params * p = &tc->op.p.gemm;
    return (double) opnd_f(&tc->src[1])[p->trans_b ? j * p->ldb + l : l * p->ldb + j];
}

void ref_gemm(const struct tcase * tc, int j, double * out) {
    const struct nf_gemm_params * p = &tc->op.p.gemm;
    init_out(tc, j, out);
    for (int64_t i = 0; i < p->m; i++) {
        for (int64_t c = 0; c < p->n; c++) {
            double t = 0.0;
            for (int64_t l = 0; l < p->k; l++) t += gemm_a(tc, i, l) * gemm_b(tc, l, c);
            const int64_t e = i * p->ldc + c;
            out[e] = p->accumulate ? out[e] + t : t;
        }
    }
}

/* as LINEAR: 8 eps (sum_l |a b| + |C_old| + |ref|): a float GEMM of k terms in
 * any order, its rounding to float and the accumulating add */
void tol_gemm(const struct tcase * tc, int j, const float * ref, double * tol) {
    const struct nf_gemm_params * p = &tc->op.p.gemm;
    const float * c0 = opnd_f(&tc->dst[0]);
    for (int64_t i = 0; i < p->m; i++) {
        for (int64_t c = 0; c < p->n; c++) {
            double mag = 0.0;
            for (int64_t l = 0; l < p->k; l++) mag += fabs(gemm_a(tc, i, l) * gemm_b(tc, l, c));
            const int64_t e = i * p->ldc + c;
            if (p->accumulate) mag += fabs((double) c0[e]);
            tol[e] = 8.0 * EPS * (mag + fabs((double) ref[e])) + 1e-37;
        }
    }
}

/* ---- COL_SUM --------------------------------------------------------------------------- */

static const struct {
    int64_t m, n, pad;
    int acc;
} col_sum_shapes[] = {{1, 1, 0, 0}, {7, 5, 3, 1}, {300, 17, 0, 0}, {1000, 513, 1, 1}, {0, 4, 0, 1}, {2, 1, 6, 0}};
_Static_assert(sizeof(col_sum_shapes) / sizeof(col_sum_shapes[0]) == N_COL_SUM_CASES, "COL_SUM variants");

void case_col_sum(struct tcase * tc, int v) {
    const int64_t m = col_sum_shapes[v].m, n = col_sum_shapes[v].n;
    tcase_begin(tc, NF_OP_COL_SUM, 1, 1);
    struct nf_col_sum_params * p = &tc->op.p.col_sum;
    p->m = m;
    p->n = n;
    p->ldx = n + col_sum_shapes[v].pad;
    p->accumulate = col_sum_shapes[v].acc;
    opnd_init(&tc->src[0], NF_F32, 1, m > 0 ? (m - 1) * p->ldx + n : 1, 0, 0);
    fill_unif(&tc->src[0], -1.0f, 1.0f);
    opnd_init(&tc->dst[0], NF_F32, 1, n, 0, 0);
    if (p->accumulate) fill_unif(&tc->dst[0], -2.0f, 2.0f);
    snprintf(tc->desc, sizeof(tc->desc), "m=%lld n=%lld ldx=%lld%s", (long long) m, (long long) n, (long long) p->ldx,
             p->accumulate ? " acc" : "");
}

static double col_sum64(const struct tcase * tc, int64_t c, double * mag) {
    const struct nf_col_sum_params * p = &tc->op.p.col_sum;
    const float * x = opnd_f(&tc->src[0]);
    double s = 0.0, a = 0.0;
    for (int64_t i = 0; i < p->m; i++) {
        s += (double) x[i * p->ldx + c];
        a += fabs((double) x[i * p->ldx + c]);
    }
    if (mag) *mag = a;
    return s;
}

void ref_col_sum(const struct tcase * tc, int j, double * out) {
    const struct nf_col_sum_params * p = &tc->op.p.col_sum;
    init_out(tc, j, out);
    for (int64_t c = 0; c < p->n; c++) {
        const double s = col_sum64(tc, c, NULL);
        out[c] = p->accumulate ? out[c] + s : s;
    }
}

/* the double sum (m terms: 1e-13 of sum |x|), its rounding to float and the
 * float add: eps (|sum| + |ref|) */
void tol_col_sum(const struct tcase * tc, int j, const float * ref, double * tol) {
    const struct nf_col_sum_params * p = &tc->op.p.col_sum;
    for (int64_t c = 0; c < p->n; c++) {
        double mag;
        const double s = col_sum64(tc, c, &mag);
        tol[c] = EPS * (fabs(s) + fabs((double) ref[c])) + 1e-13 * mag + 1e-37;
    }
}

/* ---- ACT, ACT_BACKWARD ------------------------------------------------------------------- */

/* n, act; specials: 0, -0, NaN, +-Inf and large values among the inputs */
static const struct {
    int64_t n;
    int act, specials;
} act_shapes[] = {{1, NF_ACT_GELU, 0},    {7, NF_ACT_RELU, 0},    {50, NF_ACT_GELU, 0},    {40, NF_ACT_RELU, 0},
                  {1000, NF_ACT_GELU, 1}, {1000, NF_ACT_RELU, 1}, {65537, NF_ACT_GELU, 0}, {4099, NF_ACT_RELU, 0}};
_Static_assert(sizeof(act_shapes) / sizeof(act_shapes[0]) == N_ACT_CASES, "ACT variants");

static void fill_act_x(struct operand * o, int specials) {
    fill_unif(o, -6.0f, 6.0f);
    if (!specials) return;
    static const float sp[] = {0.0f, -0.0f, NAN, INFINITY, -INFINITY, 30.0f, -30.0f, 1e-30f, -1e-30f, 9.5f, -9.5f};
    float * x = opnd_f(o);
    for (size_t i = 0; i < sizeof(sp) / sizeof(sp[0]) && (int64_t) i * 7 < opnd_numel(o); i++) x[i * 7] = sp[i];
}

void case_act(struct tcase * tc, int v) {
    const int64_t n = act_shapes[v].n;
    tcase_begin(tc, NF_OP_ACT, 1, 1);
    tc->op.p.act.n = n;
    tc->op.p.act.act = act_shapes[v].act;
    opnd_init(&tc->src[0], NF_F32, 1, n, 0, 0);
    fill_act_x(&tc->src[0], act_shapes[v].specials);
    opnd_init(&tc->dst[0], NF_F32, 1, n, 0, 0);
    snprintf(tc->desc, sizeof(tc->desc), "n=%lld %s%s", (long long) n,
             act_shapes[v].act == NF_ACT_GELU ? "gelu" : "relu", act_shapes[v].specials ? " specials" : "");
}

static double gelu64(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }

void ref_act(const struct tcase * tc, int j, double * out) {
    const float * x = opnd_f(&tc->src[0]);
    for (int64_t i = 0; i < tc->op.p.act.n; i++) {
        const double xv = (double) x[i];
        out[i] = tc->op.p.act.act == NF_ACT_GELU ? gelu64(xv) : (xv < 0.0 ? 0.0 : xv);
    }
}

/* GELU: the float erf (<= 2 ulp of |erf| <= 1 on CUDA) times 0.5|x|, and the
 * float products: 4 eps (|ref| + |x|); ReLU exact */
void tol_act(const struct tcase * tc, int j, const float * ref, double * tol) {
    if (tc->op.p.act.act != NF_ACT_GELU) return;
    const float * x = opnd_f(&tc->src[0]);
    for (int64_t i = 0; i < tc->op.p.act.n; i++)
        tol[i] = 4.0 * EPS * (fabs((double) ref[i]) + fabs((double) x[i])) + 1e-37;
}

void case_act_backward(struct tcase * tc, int v) {
    const int64_t n = act_shapes[v].n;
    tcase_begin(tc, NF_OP_ACT_BACKWARD, 2, 1);
    tc->op.p.act_backward.n = n;
    tc->op.p.act_backward.act = act_shapes[v].act;
    opnd_init(&tc->src[0], NF_F32, 1, n, 0, 0);
    fill_act_x(&tc->src[0], act_shapes[v].specials);
    opnd_init(&tc->src[1], NF_F32, 1, n, 0, 0);
    fill_unif(&tc->src[1], -2.0f, 2.0f);
    opnd_init(&tc->dst[0], NF_F32, 1, n, 0, 0);
    snprintf(tc->desc, sizeof(tc->desc), "n=%lld %s%s", (long long) n,
             act_shapes[v].act == NF_ACT_GELU ? "gelu" : "relu", act_shapes[v].specials ? " specials" : "");
}

void ref_act_backward(const struct tcase * tc, int j, double * out) {
    const float * x = opnd_f(&tc->src[0]);
    const float * dy = opnd_f(&tc->src[1]);
    for (int64_t i = 0; i < tc->op.p.act_backward.n; i++) {
        const double xv = (double) x[i];
        if (tc->op.p.act_backward.act == NF_ACT_GELU) {
            /* the contract's form: Inf * 0 is NaN as in float */
            const double cdf = 0.5 * (1.0 + erf(xv / sqrt(2.0))), pdf = exp(-0.5 * xv * xv) / NF__SQRT_2PI;
            out[i] = (double) dy[i] * (cdf + xv * pdf);
        } else {
            out[i] = xv > 0.0 ? (double) dy[i] : 0.0;
        }
    }
}

/* GELU: the erf (<= 2 ulp, absolute <= 2 eps), the exp of a rounded argument
 * (relative (1 + x^2) eps) times |x|, the float sums and products:
 * 8 eps |dy| (1 + |x| pdf (1 + x^2)) + 4 eps |ref|; ReLU exact */
void tol_act_backward(const struct tcase * tc, int j, const float * ref, double * tol) {
    if (tc->op.p.act_backward.act != NF_ACT_GELU) return;
    const float * x = opnd_f(&tc->src[0]);
    const float * dy = opnd_f(&tc->src[1]);
    for (int64_t i = 0; i < tc->op.p.act_backward.n; i++) {
        const double xv = (double) x[i], pdf = exp(-0.5 * xv * xv) / NF__SQRT_2PI;
        tol[i] = 8.0 * EPS * fabs((double) dy[i]) * (1.0 + fabs(xv) * pdf * (1.0 + xv * xv)) +
                 4.0 * EPS * fabs((double) ref[i]) + 1e-37;
    }
}

/* one term dy * act(x) of the loss sum_i dy_i act(x_i) */
struct act_fd1 {
    double dy;
    int act;
};
static double act_loss1(void * ctx, const double * x) {
    const struct act_fd1 * a = ctx;
    return a->dy * (a->act == NF_ACT_GELU ? gelu64(x[0]) : (x[0] < 0.0 ? 0.0 : x[0]));
}

/* the gradient formula (ref_act_backward) against central differences of
 * sum_i dy_i act(x_i), one element at a time (the loss is separable); cases
 * without specials only */
int fd_act_backward(const struct tcase * tc, char * msg, size_t n) {
    const int64_t N = tc->op.p.act_backward.n;
    const float * x = opnd_f(&tc->src[0]);
    if (N > 1000) return -1;
    for (int64_t i = 0; i < N; i++)
        if (!isfinite(x[i]) || fabs((double) x[i]) < 1e-3) return -1; /* specials, ReLU's kink */
    double * g = malloc((size_t) N * sizeof(double));
    if (!g) exit(2);
    ref_act_backward(tc, 0, g);
    struct fd_result worst = {0};
    int64_t bad = 0;
    for (int64_t i = 0; i < N; i++) {
        struct act_fd1 ctx = {(double) opnd_f(&tc->src[1])[i], tc->op.p.act_backward.act};
        double v = (double) x[i];
        struct fd_result r;
        bad += fd_check_grad(act_loss1, &ctx, &v, 1, &g[i], 1e-5, 1e-6, 1e-9, &r);
        if (r.max_ratio > worst.max_ratio) {
            worst = r;
            worst.worst = i;
        }
    }
    free(g);
    snprintf(msg, n,
             "d/dx of sum dy*act(x): %lld of %lld elements off; worst err/bound %.3g (x[%lld]: fd %.9g, formula %.9g)",
             (long long) bad, (long long) N, worst.max_ratio, (long long) worst.worst, worst.worst_num,
             worst.worst_grad);
    return bad == 0;
}

/* ---- LAYER_NORM_BACKWARD ----------------------------------------------------------------- */

static const struct {
    int64_t m, k, xpad, ypad, dpad;
    int acc;
    float offset;
} lnb_shapes[] = {
    {1, 1, 0, 0, 0, 0, 0.0f},    {3, 4, 1, 2, 3, 1, 0.0f},    {4, 5, 0, 0, 0, 0, 2.0f},      {7, 8, 3, 0, 1, 1, 0.0f},
    {33, 512, 0, 0, 0, 0, 0.0f}, {130, 64, 2, 5, 0, 1, 0.0f}, {3, 1000, 0, 0, 0, 1, 100.0f}, {1, 512, 0, 0, 0, 0, 3.0f},
};
_Static_assert(sizeof(lnb_shapes) / sizeof(lnb_shapes[0]) == N_LN_BACKWARD_CASES, "LAYER_NORM_BACKWARD variants");

void case_ln_backward(struct tcase * tc, int v) {
    const int64_t m = lnb_shapes[v].m, k = lnb_shapes[v].k;
    tcase_begin(tc, NF_OP_LAYER_NORM_BACKWARD, 3, 3);
    struct nf_layer_norm_backward_params * p = &tc->op.p.layer_norm_backward;
    p->m = m;
    p->k = k;
    p->ldx = k + lnb_shapes[v].xpad;
    p->lddy = k + lnb_shapes[v].ypad;
    p->lddx = k + lnb_shapes[v].dpad;
    p->eps = 1e-5f;
    p->accumulate = lnb_shapes[v].acc;
    opnd_init(&tc->src[0], NF_F32, 1, (m - 1) * p->ldx + k, 0, 0);
    fill_unif(&tc->src[0], lnb_shapes[v].offset - 1.0f, lnb_shapes[v].offset + 1.0f);
    opnd_init(&tc->src[1], NF_F32, 1, k, 0, 0);
    fill_unif(&tc->src[1], 0.5f, 1.5f);
    opnd_init(&tc->src[2], NF_F32, 1, (m - 1) * p->lddy + k, 0, 0);
    fill_unif(&tc->src[2], -1.0f, 1.0f);
    opnd_init(&tc->dst[0], NF_F32, 1, (m - 1) * p->lddx + k, 0, 0);
    if (p->accumulate) fill_rows_keep_gaps(&tc->dst[0], m, k, p->lddx, -1.0f, 1.0f);
    opnd_init(&tc->dst[1], NF_F32, 1, k, 0, 0);
    fill_unif(&tc->dst[1], -1.0f, 1.0f);
    opnd_init(&tc->dst[2], NF_F32, 1, k, 0, 0);
    fill_unif(&tc->dst[2], -1.0f, 1.0f);
    snprintf(tc->desc, sizeof(tc->desc), "m=%lld k=%lld ldx=%lld lddy=%lld lddx=%lld mean~%g%s", (long long) m,
             (long long) k, (long long) p->ldx, (long long) p->lddy, (long long) p->lddx, (double) lnb_shapes[v].offset,
             p->accumulate ? " acc" : "");
}

/* the forward in double: y[r][c] = xh * g + b with xh = (x - mu) / sqrt(var + eps) */
struct lnb64 {
    int64_t m, k, ldx, lddy;
    double eps;
    const float * dy;
    double *x, *g, *b; /* m*k (compact), k, k: the variables of the fd checks */
};

static double lnb_xh(const struct lnb64 * L, const double * x, int64_t r, double * xh) {
    double mu = 0.0, var = 0.0;
    for (int64_t c = 0; c < L->k; c++) mu += x[r * L->k + c];
    mu /= (double) L->k;
    for (int64_t c = 0; c < L->k; c++) var += (x[r * L->k + c] - mu) * (x[r * L->k + c] - mu);
    var /= (double) L->k;
    const double rstd = 1.0 / sqrt(var + L->eps);
    for (int64_t c = 0; c < L->k; c++) xh[c] = (x[r * L->k + c] - mu) * rstd;
    return rstd;
}

/* the gradients of L = sum dy * y (the backward formula, in double): gx (m*k
 * compact), gg, gb (k); the magnitudes for the tolerances in the m-arrays
 * rs (rstd), xm (max |x - mu| + |mu|, times rstd) when not NULL */
static void lnb_grads(const struct lnb64 * L, double * gx, double * gg, double * gb, double * rs, double * xm) {
    double * xh = malloc((size_t) L->k * sizeof(double));
    if (!xh) exit(2);
    for (int64_t c = 0; c < L->k; c++) gg[c] = gb[c] = 0.0;
    for (int64_t r = 0; r < L->m; r++) {
        const double rstd = lnb_xh(L, L->x, r, xh);
        const float * dyr = L->dy + r * L->lddy;
        double a = 0.0, b = 0.0, mx = 0.0;
        for (int64_t c = 0; c < L->k; c++) {
            const double gd = (double) dyr[c] * L->g[c];
            a += gd;
            b += gd * xh[c];
            gg[c] += (double) dyr[c] * xh[c];
            gb[c] += (double) dyr[c];
            mx = fabs(L->x[r * L->k + c]) > mx ? fabs(L->x[r * L->k + c]) : mx;
        }
        a /= (double) L->k;
        b /= (double) L->k;
        for (int64_t c = 0; c < L->k; c++) gx[r * L->k + c] = rstd * ((double) dyr[c] * L->g[c] - a - xh[c] * b);
        if (rs) rs[r] = rstd;
        if (xm) xm[r] = 2.0 * mx * rstd;
    }
    free(xh);
}

static void lnb_load(const struct tcase * tc, struct lnb64 * L) {
    const struct nf_layer_norm_backward_params * p = &tc->op.p.layer_norm_backward;
    L->m = p->m;
    L->k = p->k;
    L->ldx = p->ldx;
    L->lddy = p->lddy;
    L->eps = (double) p->eps;
    L->dy = opnd_f(&tc->src[2]);
    L->x = malloc((size_t) (p->m * p->k + 2 * p->k) * sizeof(double));
    if (!L->x) exit(2);
    L->g = L->x + p->m * p->k;
    L->b = L->g + p->k;
    const float * x = opnd_f(&tc->src[0]);
    const float * g = opnd_f(&tc->src[1]);
    for (int64_t r = 0; r < p->m; r++)
        for (int64_t c = 0; c < p->k; c++) L->x[r * p->k + c] = (double) x[r * p->ldx + c];
    for (int64_t c = 0; c < p->k; c++) {
        L->g[c] = (double) g[c];
        L->b[c] = 0.25 * (double) c; /* beta does not change the gradients; any value */
    }
}

/* the three gradients, with the magnitudes the tolerances need */
struct lnb_all {
    struct lnb64 L;
    double *gx, *gg, *gb, *rs, *xm;
};

static void lnb_all(const struct tcase * tc, struct lnb_all * A) {
    lnb_load(tc, &A->L);
    const int64_t m = A->L.m, k = A->L.k;
    A->gx = malloc((size_t) (m * k + 2 * k + 2 * m + 2) * sizeof(double));
    if (!A->gx) exit(2);
    A->gg = A->gx + m * k;
    A->gb = A->gg + k;
    A->rs = A->gb + k;
    A->xm = A->rs + m + 1;
    lnb_grads(&A->L, A->gx, A->gg, A->gb, A->rs, A->xm);
}

static void lnb_free(struct lnb_all * A) {
    free(A->L.x);
    free(A->gx);
}

void ref_ln_backward(const struct tcase * tc, int j, double * out) {
    const struct nf_layer_norm_backward_params * p = &tc->op.p.layer_norm_backward;
    struct lnb_all A;
    lnb_all(tc, &A);
    init_out(tc, j, out);
    for (int64_t r = 0; r < (j == 0 ? p->m : 1); r++) {
        for (int64_t c = 0; c < p->k; c++) {
            if (j == 0) {
                const int64_t e = r * p->lddx + c;
                out[e] = p->accumulate ? out[e] + A.gx[r * p->k + c] : A.gx[r * p->k + c];
            } else {
                out[c] += j == 1 ? A.gg[c] : A.gb[c];
            }
        }
    }
    lnb_free(&A);
}

/* from the fp32 roundings of the formula: xh carries the rounding of mu and
 * rstd relative to the row's magnitude (xm = (|x| + |mu|) rstd); then
 *   dx: 16 eps rstd (|gd| + mean|gd| (1 + |xh|)) (1 + xm) + 2 eps (|dx_old| + |ref|)
 *   dg: 8 eps sum_r |dy| (|xh| + 1 + xm) + 2 eps (|dg_old| + |ref|)
 *   db: 2 eps (|sum| + |db_old| + |ref|)                                     */
void tol_ln_backward(const struct tcase * tc, int j, const float * ref, double * tol) {
    const struct nf_layer_norm_backward_params * p = &tc->op.p.layer_norm_backward;
    const float * x = opnd_f(&tc->src[0]);
    const float * g = opnd_f(&tc->src[1]);
    const float * dy = opnd_f(&tc->src[2]);
    const float * old = opnd_f(&tc->dst[j]);
    struct lnb_all A;
    lnb_all(tc, &A);
    double * acc = calloc((size_t) p->k, sizeof(double));
    if (!acc) exit(2);
    for (int64_t r = 0; r < p->m; r++) {
        double mu = 0.0, sg = 0.0;
        for (int64_t c = 0; c < p->k; c++) {
            mu += (double) x[r * p->ldx + c];
            sg += fabs((double) dy[r * p->lddy + c] * (double) g[c]);
        }
        mu /= (double) p->k;
        sg /= (double) p->k;
        const double rstd = A.rs[r], xm = A.xm[r];
        for (int64_t c = 0; c < p->k; c++) {
            const double xh = ((double) x[r * p->ldx + c] - mu) * rstd;
            const double d = fabs((double) dy[r * p->lddy + c]);
            if (j == 0) {
                const int64_t e = r * p->lddx + c;
                const double gd = d * fabs((double) g[c]);
                tol[e] = 16.0 * EPS * rstd * (gd + sg * (1.0 + fabs(xh))) * (1.0 + xm) +
                         2.0 * EPS * ((p->accumulate ? fabs((double) old[e]) : 0.0) + fabs((double) ref[e])) + 1e-37;
            } else if (j == 1) {
                acc[c] += d * (fabs(xh) + 1.0 + xm);
            } else {
                acc[c] += d;
            }
        }
    }
    if (j > 0) {
        for (int64_t c = 0; c < p->k; c++) {
            tol[c] = (j == 1 ? 8.0 : 2.0) * EPS * acc[c] + 2.0 * EPS * (fabs((double) old[c]) + fabs((double) ref[c])) +
                     1e-37;
        }
    }
    free(acc);
    lnb_free(&A);
}

/* L(x, g, b) = sum_r sum_c dy[r][c] * (xh[r][c] * g[c] + b[c]), in double; the
 * variables: x (m*k), then g (k), then b (k), contiguous in L->x */
static double lnb_loss(void * ctx, const double * v) {
    const struct lnb64 * L = ctx;
    (void) v; /* v is L->x itself, perturbed in place */
    double * xh = malloc((size_t) L->k * sizeof(double));
    if (!xh) exit(2);
    double s = 0.0;
    for (int64_t r = 0; r < L->m; r++) {
        lnb_xh(L, L->x, r, xh);
        for (int64_t c = 0; c < L->k; c++) s += (double) L->dy[r * L->lddy + c] * (xh[c] * L->g[c] + L->b[c]);
    }
    free(xh);
    return s;
}

/* the backward formula (ref_ln_backward's gradients) against central
 * differences of the forward, for every x, gamma and beta; small shapes */
int fd_ln_backward(const struct tcase * tc, char * msg, size_t n) {
    const struct nf_layer_norm_backward_params * p = &tc->op.p.layer_norm_backward;
    if (p->m * p->k > 64 || p->k < 2) return -1; /* k == 1: xh == 0, nothing to check */
    struct lnb_all A;
    lnb_all(tc, &A);
    const int64_t nv = p->m * p->k + 2 * p->k;
    double * grad = malloc((size_t) nv * sizeof(double));
    if (!grad) exit(2);
    memcpy(grad, A.gx, (size_t) (p->m * p->k) * sizeof(double));
    memcpy(grad + p->m * p->k, A.gg, (size_t) p->k * sizeof(double));
    memcpy(grad + p->m * p->k + p->k, A.gb, (size_t) p->k * sizeof(double));
    struct fd_result r;
    const int64_t bad = fd_check_grad(lnb_loss, &A.L, A.L.x, nv, grad, 1e-5, 1e-6, 1e-9, &r);
    snprintf(
        msg, n,
        "d/d(x, gamma, beta) of sum dy*LN(x): %lld of %lld off; worst err/bound %.3g (var %lld: fd %.9g, formula %.9g)",
        (long long) bad, (long long) nv, r.max_ratio, (long long) r.worst, r.worst_num, r.worst_grad);
    free(grad);
    lnb_free(&A);
    return bad == 0;
}

/* ---- ADAMW ------------------------------------------------------------------------------- */

static const struct {
    int64_t n, t;
    double lr, wd;
} adamw_shapes[] = {{1, 1, 1e-3, 0.01},      {7, 2, 1e-4, 0.0},  {1000, 10, 1e-3, 0.01},
                    {4099, 1000, 3e-4, 0.1}, {65, 1, 1e-2, 0.0}, {300, 100000, 1e-3, 0.01}};
_Static_assert(sizeof(adamw_shapes) / sizeof(adamw_shapes[0]) == N_ADAMW_CASES, "ADAMW variants");

void case_adamw(struct tcase * tc, int v) {
    const int64_t n = adamw_shapes[v].n;
    tcase_begin(tc, NF_OP_ADAMW, 1, 3);
    struct nf_adamw_step st;
    nf_adamw_scalars(adamw_shapes[v].lr, 0.9, 0.999, 1e-8, adamw_shapes[v].wd, adamw_shapes[v].t, &st);
    tc->op.p.adamw = (struct nf_adamw_params){
        .n = n, .decay = st.decay, .w1 = st.w1, .b2 = st.b2, .c2 = st.c2, .bc2s = st.bc2s, .eps = st.eps, .s = st.s};
    opnd_init(&tc->src[0], NF_F32, 1, n, 0, 0);
    fill_unif(&tc->src[0], -1.0f, 1.0f);
    opnd_init(&tc->dst[0], NF_F32, 1, n, 0, 0);
    fill_unif(&tc->dst[0], -1.0f, 1.0f);
    opnd_init(&tc->dst[1], NF_F32, 1, n, 0, 0);
    fill_unif(&tc->dst[1], -0.1f, 0.1f);
    opnd_init(&tc->dst[2], NF_F32, 1, n, 0, 0);
    fill_unif(&tc->dst[2], 0.0f, 0.01f);
    if (adamw_shapes[v].t == 1) { /* the first step: zero moments */
        memset(opnd_f(&tc->dst[1]), 0, (size_t) n * sizeof(float));
        memset(opnd_f(&tc->dst[2]), 0, (size_t) n * sizeof(float));
    }
    if (n > 3) { /* a zero gradient on zero moments: d = eps, the update 0 */
        opnd_f(&tc->src[0])[1] = 0.0f;
        opnd_f(&tc->dst[1])[1] = 0.0f;
        opnd_f(&tc->dst[2])[1] = 0.0f;
    }
    snprintf(tc->desc, sizeof(tc->desc), "n=%lld step=%lld lr=%g wd=%g", (long long) n, (long long) adamw_shapes[v].t,
             adamw_shapes[v].lr, adamw_shapes[v].wd);
}

/* the step in double from the float scalars; mag (may be NULL) gets the
 * magnitudes of the terms each result is the rounded sum of */
static void adamw64(const struct tcase * tc, int64_t i, double out[3], double mag[3]) {
    const struct nf_adamw_params * p = &tc->op.p.adamw;
    const double g = (double) opnd_f(&tc->src[0])[i];
    const double p0 = (double) opnd_f(&tc->dst[0])[i], m0 = (double) opnd_f(&tc->dst[1])[i];
    const double v0 = (double) opnd_f(&tc->dst[2])[i];
    const double m = m0 + (double) p->w1 * (g - m0);
    const double v = v0 * (double) p->b2 + (double) p->c2 * g * g;
    const double d = sqrt(v) / (double) p->bc2s + (double) p->eps;
    const double u = (double) p->s * m / d;
    out[0] = p0 * (double) p->decay + u;
    out[1] = m;
    out[2] = v;
    if (mag) {
        mag[0] = fabs(p0 * (double) p->decay) + 6.0 * fabs(u);
        mag[1] = fabs(m) + fabs((double) p->w1 * (g - m0)); /* g - m0 is a float difference */
        mag[2] = 2.0 * (fabs(v0 * (double) p->b2) + (double) p->c2 * g * g);
    }
}

void ref_adamw(const struct tcase * tc, int j, double * out) {
    for (int64_t i = 0; i < tc->op.p.adamw.n; i++) {
        double r[3];
        adamw64(tc, i, r, NULL);
        out[i] = r[j];
    }
}

/* m: the float g - m then one fused rounding; v: three roundings; p: the decay product, the
 * quotient (m, v and d carry ~6 eps relative) and the sum: eps (mag + |ref|) */
void tol_adamw(const struct tcase * tc, int j, const float * ref, double * tol) {
    for (int64_t i = 0; i < tc->op.p.adamw.n; i++) {
        double r[3], mag[3];
        adamw64(tc, i, r, mag);
        tol[i] = EPS * (mag[j] + fabs((double) ref[i])) + 1e-38;
    }
}

/* ---- COPY -------------------------------------------------------------------------------- */

static const int64_t copy_n[] = {1, 7, 100003};
_Static_assert(sizeof(copy_n) / sizeof(copy_n[0]) == N_COPY_CASES, "COPY variants");

void case_copy(struct tcase * tc, int v) {
    const int64_t n = copy_n[v];
    tcase_begin(tc, NF_OP_COPY, 1, 1);
    tc->op.p.copy.n = n;
    opnd_init(&tc->src[0], NF_F32, 1, n, 0, 0);
    fill_unif(&tc->src[0], -1.0f, 1.0f);
    if (n > 3) opnd_f(&tc->src[0])[2] = NAN;
    opnd_init(&tc->dst[0], NF_F32, 1, n, 0, 0);
    snprintf(tc->desc, sizeof(tc->desc), "n=%lld", (long long) n);
}
