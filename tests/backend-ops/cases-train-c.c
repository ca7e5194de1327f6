/*
 * backend-ops/cases-train-c.c -- the test descriptors of the training ops,
 * set C (SCATTER_ADD_ROWS, CLIP_GRAD_NORM, SCALE; TabSTAR's LoRA
 * fine-tuning): case builders, float64 references with bounds derived from
 * the fp32 roundings of each contract (every backend, the cpu's too, is
 * compared with them), and a finite-difference check of SCATTER_ADD_ROWS as
 * the gradient of GATHER_ROWS through the double forward.
 */
#define _POSIX_C_SOURCE 200809L

#include "backend-ops.h"
#include "nf-ops.h"

#include <float.h>
#include <math.h>

#define EPS ((double) FLT_EPSILON)

/* ---- SCATTER_ADD_ROWS ------------------------------------------------------------------- */

/* m rows of dy (k used, stride k + pad), a table of n_table rows (stride
 * k + pad); idx drawn in [-1, n_table] (out of range: -1 and n_table, when
 * `oor`), the plan from nf_scatter_plan; many rows per table row in the
 * large cases (long sums) */
static const struct {
    int64_t m, k, n_table, pad;
    int acc, oor;
    float scale;
} sc_shapes[N_SCATTER_CASES] = {
    {1, 1, 1, 0, 0, 0, 1.0f}, {7, 5, 3, 2, 1, 0, 1.0f},  {50, 16, 10, 3, 0, 1, 0.5f},  {300, 64, 40, 0, 1, 1, 1.0f},
    {0, 4, 3, 0, 1, 0, 1.0f}, {20, 3, 0, 0, 0, 0, 1.0f}, {1000, 33, 5, 1, 1, 0, 0.3f}, {9, 2, 30, 0, 0, 1, 1.0f},
};

void case_scatter_add_rows(struct tcase * tc, int v) {
    const int64_t m = sc_shapes[v].m, k = sc_shapes[v].k, nt = sc_shapes[v].n_table, pad = sc_shapes[v].pad;
    tcase_begin(tc, NF_OP_SCATTER_ADD_ROWS, 3, 1);
    struct nf_scatter_add_rows_params * p = &tc->op.p.scatter_add_rows;
    *p = (struct nf_scatter_add_rows_params){.m = m,
                                             .k = k,
                                             .n_table = nt,
                                             .ldw = k + pad,
                                             .ldy = k + pad + 1,
                                             .scale = sc_shapes[v].scale,
                                             .accumulate = sc_shapes[v].acc};
    int32_t * idx = malloc((size_t) (m > 0 ? m : 1) * sizeof(int32_t));
    if (!idx) exit(2);
    for (int64_t r = 0; r < m; r++)
        idx[r] = sc_shapes[v].oor ? (int32_t) rng_int(nt + 2) - 1 : (int32_t) rng_int(nt > 0 ? nt : 1);
    opnd_init(&tc->src[0], NF_I32, 1, m > 0 ? m : 1, 0, 0);
    opnd_init(&tc->src[1], NF_I32, 1, nt + 1, 0, 0);
    if (nf_scatter_plan(idx, m, nt, opnd_i(&tc->src[0]), opnd_i(&tc->src[1]), NULL) != NF_OK) exit(2);
    free(idx);
    opnd_init(&tc->src[2], NF_F32, 1, m > 0 ? (m - 1) * p->ldy + k : 1, 0, 0);
    fill_unif(&tc->src[2], -1.0f, 1.0f);
    opnd_init(&tc->dst[0], NF_F32, 1, nt > 0 ? (nt - 1) * p->ldw + k : 1, 0, 0);
    if (p->accumulate)
        for (int64_t i = 0; i < nt; i++)
            for (int64_t c = 0; c < k; c++) opnd_f(&tc->dst[0])[i * p->ldw + c] = rng_unif(-2.0f, 2.0f);
    snprintf(tc->desc, sizeof(tc->desc), "m=%lld k=%lld n_table=%lld ldw=%lld ldy=%lld scale=%g%s%s", (long long) m,
             (long long) k, (long long) nt, (long long) p->ldw, (long long) p->ldy, (double) p->scale,
             p->accumulate ? " acc" : "", sc_shapes[v].oor ? " out-of-range" : "");
}

/* t = sum over the plan's rows of (double)scale * dy exactly; bound: each
 * float product scale*dy (eps/2 of its size), the double sum (1e-13 of the
 * sum of sizes), its rounding to float (eps/2 |t|), the float add and the
 * comparison with the reference rounded to float (eps/2 |ref| each):
 * eps (|t| + |ref|) + eps/2 sum |scale dy| + 1e-13 sum |scale dy| */
void ref_scatter_add_rows(const struct tcase * tc, double * const * ref, double * const * tol) {
    const struct nf_scatter_add_rows_params * p = &tc->op.p.scatter_add_rows;
    const int32_t *order = opnd_i(&tc->src[0]), *start = opnd_i(&tc->src[1]);
    const float * dy = opnd_f(&tc->src[2]);
    for (int64_t i = 0; i < p->n_table; i++) {
        for (int64_t c = 0; c < p->k; c++) {
            double s = 0.0, mag = 0.0;
            for (int64_t u = start[i]; u < start[i + 1]; u++) {
                const double t = (double) p->scale * (double) dy[order[u] * p->ldy + c];
                s += t;
                mag += fabs(t);
            }
            const int64_t e = i * p->ldw + c;
            ref[0][e] = p->accumulate ? ref[0][e] + s : s;
            tol[0][e] = EPS * (fabs(s) + fabs(ref[0][e])) + (0.5 * EPS + 1e-13) * mag + 1e-38;
        }
    }
}

/* L(W) = sum_r sum_c dy[r][c] * GATHER_ROWS(W)[r][c] = sum_r sum_c dy * scale *
 * W[idx[r]][c] in double (idx recovered from the plan), against dW - dW_old */
struct sc_fd {
    const struct tcase * tc;
    const int32_t * idx;
    double * W;
};

static double sc_loss64(const struct sc_fd * f) {
    const struct nf_scatter_add_rows_params * p = &f->tc->op.p.scatter_add_rows;
    const float * dy = opnd_f(&f->tc->src[2]);
    double s = 0.0;
    for (int64_t r = 0; r < p->m; r++)
        if (f->idx[r] >= 0)
            for (int64_t c = 0; c < p->k; c++)
                s += (double) dy[r * p->ldy + c] * (double) p->scale * f->W[f->idx[r] * p->ldw + c];
    return s;
}

int64_t fd_scatter_add_rows(const struct tcase * tc, const float * const * dst, double * worst) {
    const struct nf_scatter_add_rows_params * p = &tc->op.p.scatter_add_rows;
    if (p->n_table * p->k > 256 || p->m == 0) return -1;
    const int32_t *order = opnd_i(&tc->src[0]), *start = opnd_i(&tc->src[1]);
    int32_t * idx = malloc((size_t) p->m * sizeof(int32_t));
    const int64_t nw = opnd_numel(&tc->dst[0]);
    double * W = calloc((size_t) nw, sizeof(double));
    if (!idx || !W) exit(2);
    for (int64_t r = 0; r < p->m; r++) idx[r] = -1;
    for (int64_t i = 0; i < p->n_table; i++)
        for (int64_t u = start[i]; u < start[i + 1]; u++) idx[order[u]] = (int32_t) i;
    for (int64_t e = 0; e < nw; e++) W[e] = 0.1 * (double) (e % 7);
    struct sc_fd f = {tc, idx, W};
    const double h = 1e-4;
    int64_t bad = 0;
    for (int64_t i = 0; i < p->n_table; i++) {
        for (int64_t c = 0; c < p->k; c++) {
            const int64_t e = i * p->ldw + c;
            const double w0 = W[e];
            W[e] = w0 + h;
            const double lp = sc_loss64(&f);
            W[e] = w0 - h;
            const double lm = sc_loss64(&f);
            W[e] = w0;
            const double fd = (lp - lm) / (2.0 * h);
            const double g = (double) dst[0][e] - (p->accumulate ? (double) opnd_f(&tc->dst[0])[e] : 0.0);
            const double r = fabs(g - fd) / (1e-4 * fabs(fd) + 1e-5);
            *worst = r > *worst ? r : *worst;
            bad += !(r <= 1.0);
        }
    }
    free(idx), free(W);
    return bad;
}

/* ---- CLIP_GRAD_NORM ----------------------------------------------------------------------- */

/* n (one and several NF_CLIP_BLOCKs, n = 0), the gradient's scale and
 * max_norm (clipping, not clipping: coef 1, exactly at the norm), a run of
 * zeros (a never-updated adapter) */
static const struct {
    int64_t n;
    float mag, max_norm;
    int zeros;
} clip_shapes[N_CLIP_CASES] = {
    {1, 3.0f, 1.0f, 0},    {7, 0.01f, 1.0f, 0}, {1000, 1.0f, 1.0f, 1},  {1025, 1.0f, 0.5f, 0},
    {5000, 0.1f, 1e6f, 1}, {0, 1.0f, 1.0f, 0},  {3000, 50.0f, 2.0f, 1}, {2049, 1e-3f, 1.0f, 0},
};

void case_clip_grad_norm(struct tcase * tc, int v) {
    const int64_t n = clip_shapes[v].n;
    tcase_begin(tc, NF_OP_CLIP_GRAD_NORM, 0, 2);
    tc->op.p.clip_grad_norm = (struct nf_clip_grad_norm_params){.n = n, .max_norm = clip_shapes[v].max_norm};
    opnd_init(&tc->dst[0], NF_F32, 1, n > 0 ? n : 1, 0, 0);
    fill_unif(&tc->dst[0], -clip_shapes[v].mag, clip_shapes[v].mag);
    if (clip_shapes[v].zeros)
        for (int64_t i = n / 3; i < n / 2; i++) opnd_f(&tc->dst[0])[i] = 0.0f;
    opnd_init(&tc->dst[1], NF_F32, 1, 1, 0, 0);
    snprintf(tc->desc, sizeof(tc->desc), "n=%lld |g|<%g max_norm=%g%s", (long long) n, (double) clip_shapes[v].mag,
             (double) clip_shapes[v].max_norm, clip_shapes[v].zeros ? " zeros" : "");
}

/* total = sqrt(sum g^2) and coef = min(max_norm / (total + 1e-6), 1) in
 * double. Bounds, in units of u = eps/2, where every comparison is with the
 * reference rounded to float (one more u |ref|): norm: the float rounding of
 * sqrt (u) + the comparison (u), the double sum negligible: eps |total|; g:
 * relative to g coef, total (u), 1e-6f for 1e-6 and the add (2u), the
 * reciprocal (u), times max_norm (u), times g (u), the comparison (u): 7u
 * first order, 4 eps |ref| with the higher-order terms */
void ref_clip_grad_norm(const struct tcase * tc, double * const * ref, double * const * tol) {
    const struct nf_clip_grad_norm_params * p = &tc->op.p.clip_grad_norm;
    const float * g = opnd_f(&tc->dst[0]);
    double S = 0.0;
    for (int64_t i = 0; i < p->n; i++) S += (double) g[i] * (double) g[i];
    const double total = sqrt(S);
    double coef = (double) p->max_norm / (total + 1e-6);
    coef = coef > 1.0 ? 1.0 : coef;
    for (int64_t i = 0; i < p->n; i++) {
        ref[0][i] = (double) g[i] * coef;
        tol[0][i] = 4.0 * EPS * fabs(ref[0][i]) + 1e-44;
    }
    ref[1][0] = total;
    tol[1][0] = (EPS + 1e-13) * total + 1e-44;
}

/* ---- SCALE ----------------------------------------------------------------------------------- */

static const struct {
    int64_t n;
    float a;
    int acc;
} scale_shapes[N_SCALE_CASES] = {{1, 0.5f, 0}, {7, 0.5f, 1}, {1000, -1.7f, 0}, {4099, 0.3f, 1}, {0, 2.0f, 1}};

void case_scale(struct tcase * tc, int v) {
    const int64_t n = scale_shapes[v].n;
    tcase_begin(tc, NF_OP_SCALE, 1, 1);
    tc->op.p.scale = (struct nf_scale_params){.n = n, .a = scale_shapes[v].a, .accumulate = scale_shapes[v].acc};
    opnd_init(&tc->src[0], NF_F32, 1, n > 0 ? n : 1, 0, 0);
    fill_unif(&tc->src[0], -3.0f, 3.0f);
    opnd_init(&tc->dst[0], NF_F32, 1, n > 0 ? n : 1, 0, 0);
    if (scale_shapes[v].acc) fill_unif(&tc->dst[0], -1.0f, 1.0f);
    snprintf(tc->desc, sizeof(tc->desc), "n=%lld a=%g%s", (long long) n, (double) scale_shapes[v].a,
             scale_shapes[v].acc ? " acc" : "");
}

/* a x (+ y) in double; bound: the float product (eps/2 |a x|) when
 * accumulating, the final rounding (eps/2 |ref|) and the comparison with
 * the reference rounded to float (eps/2 |ref|) */
void ref_scale(const struct tcase * tc, double * const * ref, double * const * tol) {
    const struct nf_scale_params * p = &tc->op.p.scale;
    const float * x = opnd_f(&tc->src[0]);
    for (int64_t i = 0; i < p->n; i++) {
        const double t = (double) p->a * (double) x[i];
        ref[0][i] = p->accumulate ? ref[0][i] + t : t;
        tol[0][i] = 0.5 * EPS * ((p->accumulate ? fabs(t) : 0.0) + 2.0 * fabs(ref[0][i])) + 1e-44;
    }
}

/* ---- DROPOUT ---------------------------------------------------------------------------------- */

static const struct {
    int64_t n;
    float p;
    uint64_t seed;
    int acc;
} dropout_shapes[N_DROPOUT_CASES] = {{1, 0.5f, 1, 0},
                                     {37, 0.1f, 0xFFFFFFFFFFFFFFFFull, 1},
                                     {1000, 0.1f, 0x0123456789ABCDEFull, 0},
                                     {4099, 0.3f, 42, 1},
                                     {0, 0.1f, 7, 1}};

void case_dropout(struct tcase * tc, int v) {
    const int64_t n = dropout_shapes[v].n;
    const double p = dropout_shapes[v].p;
    tcase_begin(tc, NF_OP_DROPOUT, 1, 1);
    tc->op.p.dropout = (struct nf_dropout_params){.n = n,
                                                  .seed = (int64_t) dropout_shapes[v].seed,
                                                  .threshold = (int32_t) floor(p * 16777216.0 + 0.5),
                                                  .scale = (float) (1.0 / (1.0 - p)),
                                                  .accumulate = dropout_shapes[v].acc};
    opnd_init(&tc->src[0], NF_F32, 1, n > 0 ? n : 1, 0, 0);
    fill_unif(&tc->src[0], -3.0f, 3.0f);
    opnd_init(&tc->dst[0], NF_F32, 1, n > 0 ? n : 1, 0, 0);
    if (dropout_shapes[v].acc) fill_unif(&tc->dst[0], -1.0f, 1.0f);
    snprintf(tc->desc, sizeof(tc->desc), "n=%lld p=%g seed=%llx%s", (long long) n, p,
             (unsigned long long) dropout_shapes[v].seed, dropout_shapes[v].acc ? " acc" : "");
}

/* the mask recomputed here (splitmix64 of the contract), x * scale (+ y) in double; bound as SCALE's */
void ref_dropout(const struct tcase * tc, double * const * ref, double * const * tol) {
    const struct nf_dropout_params * p = &tc->op.p.dropout;
    const float * x = opnd_f(&tc->src[0]);
    for (int64_t i = 0; i < p->n; i++) {
        uint64_t z = (uint64_t) p->seed + ((uint64_t) i + 1) * 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        const double t = (int64_t) (z >> 40) >= (int64_t) p->threshold ? (double) p->scale * (double) x[i] : 0.0;
        ref[0][i] = p->accumulate ? ref[0][i] + t : t;
        tol[0][i] = 0.5 * EPS * ((p->accumulate ? fabs(t) : 0.0) + 2.0 * fabs(ref[0][i])) + 1e-44;
    }
}
