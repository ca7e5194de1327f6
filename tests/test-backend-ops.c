/*
 * test-backend-ops.c -- op conformance suite (in the spirit of ggml's
 * test-backend-ops): every op, on random shapes including odd sizes and size
 * 1, is run on the cpu backend (the reference kernels) and on every other
 * backend that initialises, and the results are compared.
 *
 *   test-backend-ops [-b DEVICE]... [-o OP]... [-v]
 *
 *   -b DEVICE  test this device (repeatable). It is then REQUIRED: an init
 *              failure is a FAIL. Default: "cpu", "opencl:0", "cuda:0", where
 *              a default device that is absent (not compiled in / no platform
 *              / no such device) is skipped with "not available: <reason>".
 *   -o OP      only this op (QUANTILE, LINEAR, ...; repeatable).
 *   -v         print the worst element of every case.
 *
 * Every operand lives in its own buffer at a non-zero element offset, with a
 * guard region before and after it filled with a sentinel pattern; the dst
 * guards must be bitwise untouched, and the src buffers must be bitwise
 * unchanged after the op. Each case runs twice on the device under test and
 * the two results must be bitwise identical (determinism).
 *
 * Tolerances (eps = FLT_EPSILON), per element of what the op writes:
 *   QUANTILE, BUCKETIZE_NORM, EMBED_FEATURES, LABEL_TOKENS: exact
 *     (a == b, or both NaN);
 *   LAYER_NORM: |d| <= 1e-5 * (1 + |ref|);
 *   LINEAR: |d| <= 8 eps (sum_c |x_c W_c| + |bias| + |y_old| + |ref|)
 *     (any summation order of k terms is well inside this for k <= 2048);
 *   ATTENTION: |d| <= 8 eps vmax (sqrt(lk) + 4 smag + 4), vmax = max |v| of
 *     the head, smag = max_j scale * sum_e |q_e k_e| of the query row;
 *   elements inside a dst view that the op does not write (token 0 for
 *     EMBED_FEATURES, stride gaps): exact.
 * A NaN/Inf where the reference has none (or the reverse) always fails.
 * One line per (backend, op, shape): OK / FAIL with the error figures.
 * Exit status 1 on any FAIL.
 */
#define _POSIX_C_SOURCE 200809L

#include "nf-impl.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SENTINEL 0xC5F31A2Bu   /* a finite float (about -7779.27) with an odd bit pattern */
#define GUARD    7             /* guard elements before and after every operand          */

/* ---- deterministic RNG (splitmix64) --------------------------------------------------- */

static uint64_t g_rng;

static uint64_t rng_u64(void)
{
    uint64_t z = (g_rng += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static float rng_unif(float lo, float hi)   /* [lo, hi) */
{
    return lo + (hi - lo) * (float)((double)(rng_u64() >> 40) / (double)(1ULL << 24));
}

static int64_t rng_int(int64_t n)   /* [0, n) */
{
    return (int64_t)(rng_u64() % (uint64_t)n);
}

static float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---- test cases ----------------------------------------------------------------------- */

struct operand {
    int           used;
    enum nf_dtype type;
    int           ndim;
    int64_t       ne[NF_MAX_DIMS];
    uint32_t    * host;   /* GUARD + numel + GUARD words: the initial buffer */
};

struct tcase {
    char           desc[192];
    nf_op          op;      /* type, counts, params; tensors are filled per run */
    struct operand src[NF_OP_MAX_SRC];
    struct operand dst[NF_OP_MAX_DST];
};

static int64_t opnd_numel(const struct operand * o)
{
    int64_t n = 1;
    for (int i = 0; i < o->ndim; i++) {
        n *= o->ne[i];
    }
    return n;
}

static int64_t opnd_words(const struct operand * o)
{
    return GUARD + opnd_numel(o) + GUARD;
}

/* the view part of the host buffer, as floats / ints */
static float * opnd_f(const struct operand * o)
{
    return (float *)(void *)(o->host + GUARD);
}

static int32_t * opnd_i(const struct operand * o)
{
    return (int32_t *)(void *)(o->host + GUARD);
}

static void opnd_init(struct operand * o, enum nf_dtype type, int ndim, int64_t a, int64_t b, int64_t c)
{
    memset(o, 0, sizeof(*o));
    o->used = 1;
    o->type = type;
    o->ndim = ndim;
    o->ne[0] = a;
    o->ne[1] = b;
    o->ne[2] = c;
    const int64_t n = opnd_words(o);
    o->host = malloc((size_t)n * sizeof(uint32_t));
    if (!o->host) {
        fprintf(stderr, "out of memory\n");
        exit(2);   /* test program only */
    }
    for (int64_t i = 0; i < n; i++) {
        o->host[i] = SENTINEL;
    }
}

static void fill_unif(struct operand * o, float lo, float hi)
{
    float * f = opnd_f(o);
    for (int64_t i = 0; i < opnd_numel(o); i++) {
        f[i] = rng_unif(lo, hi);
    }
}

static void tcase_free(struct tcase * tc)
{
    for (int i = 0; i < NF_OP_MAX_SRC; i++) {
        free(tc->src[i].host);
    }
    for (int i = 0; i < NF_OP_MAX_DST; i++) {
        free(tc->dst[i].host);
    }
    memset(tc, 0, sizeof(*tc));
}

static void tcase_begin(struct tcase * tc, enum nf_op_type type, int n_src, int n_dst)
{
    memset(tc, 0, sizeof(*tc));
    tc->op.type  = type;
    tc->op.n_src = n_src;
    tc->op.n_dst = n_dst;
    tc->op.label = "test";
}

/* ---- running one case on one backend ------------------------------------------------------ */

struct run_out {
    uint32_t * dst[NF_OP_MAX_DST];   /* full buffers after the op (guards included) */
    int        src_clobbered;       /* index+1 of a src whose buffer changed, else 0 */
};

static void run_out_free(struct run_out * r)
{
    for (int i = 0; i < NF_OP_MAX_DST; i++) {
        free(r->dst[i]);
        r->dst[i] = NULL;
    }
}

static int run_case(nf_backend * be, const struct tcase * tc, struct run_out * out, nf_err * err)
{
    static const char * const sname[] = { "src0", "src1", "src2", "src3" };
    static const char * const dname[] = { "dst0", "dst1" };
    nf_tensor full[NF_OP_MAX_SRC + NF_OP_MAX_DST];
    memset(full, 0, sizeof(full));
    memset(out, 0, sizeof(*out));
    nf_op op = tc->op;
    int rc = NF_OK;
    const int n_all = tc->op.n_src + tc->op.n_dst;
    for (int i = 0; i < n_all && rc == NF_OK; i++) {
        const int is_src = i < tc->op.n_src;
        const struct operand * o = is_src ? &tc->src[i] : &tc->dst[i - tc->op.n_src];
        nf_tensor * t = is_src ? &op.src[i] : &op.dst[i - tc->op.n_src];
        memset(t, 0, sizeof(*t));
        if (!o->used) {
            continue;
        }
        const int64_t words = opnd_words(o);
        const char * nm = is_src ? sname[i] : dname[i - tc->op.n_src];
        rc = nf__tensor_alloc(be, &full[i], o->type, 1, &words, nm, err);
        if (rc == NF_OK) {
            rc = nf__tensor_upload(&full[i], o->host, err);
        }
        if (rc == NF_OK) {
            *t = nf__tensor_view(&full[i], GUARD, o->ndim, o->ne);
        }
    }
    if (rc == NF_OK) {
        rc = nf__op_run(be, &op, err);
    }
    if (rc == NF_OK) {
        rc = nf_backend_sync(be, err);
    }
    for (int i = 0; i < n_all && rc == NF_OK; i++) {
        const int is_src = i < tc->op.n_src;
        const struct operand * o = is_src ? &tc->src[i] : &tc->dst[i - tc->op.n_src];
        if (!o->used) {
            continue;
        }
        const int64_t words = opnd_words(o);
        uint32_t * h = malloc((size_t)words * sizeof(uint32_t));
        if (!h) {
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of host memory");
            break;
        }
        rc = nf__tensor_download(&full[i], h, err);
        if (is_src) {
            if (rc == NF_OK && memcmp(h, o->host, (size_t)words * sizeof(uint32_t)) != 0 && !out->src_clobbered) {
                out->src_clobbered = i + 1;
            }
            free(h);
        } else {
            out->dst[i - tc->op.n_src] = h;
        }
    }
    for (int i = 0; i < n_all; i++) {
        nf__tensor_free(&full[i]);
    }
    if (rc != NF_OK) {
        run_out_free(out);
    }
    return rc;
}

/* ---- tolerances ------------------------------------------------------------------------- */

/* tol[i] for every element of dst j's view: 0 = exact, > 0 = absolute bound.
 * One function per op with a tolerance (its test descriptor names it); ops
 * without one are compared exactly. */
typedef void (*tol_fn)(const struct tcase * tc, int j, const float * ref, double * tol);

static void tol_layer_norm(const struct tcase * tc, int j, const float * ref, double * tol)
{
    const struct nf_layer_norm_params * p = &tc->op.p.layer_norm;
    for (int64_t r = 0; r < p->m; r++) {
        for (int64_t c = 0; c < p->k; c++) {
            const int64_t i = r * p->ldy + c;
            tol[i] = 1e-5 * (1.0 + fabs((double)ref[i]));
        }
    }
}

static void tol_linear(const struct tcase * tc, int j, const float * ref, double * tol)
{
    const struct nf_linear_params * p = &tc->op.p.linear;
    const double eps = FLT_EPSILON;
    const float * x = opnd_f(&tc->src[0]);
    const float * W = opnd_f(&tc->src[1]);
    const float * b = tc->op.n_src == 3 ? opnd_f(&tc->src[2]) : NULL;
    const float * y0 = opnd_f(&tc->dst[0]);
    for (int64_t r = 0; r < p->m; r++) {
        for (int64_t o = 0; o < p->n; o++) {
            double mag = b ? fabs((double)b[o]) : 0.0;
            for (int64_t c = 0; c < p->k; c++) {
                mag += fabs((double)x[r * p->ldx + c] * (double)W[o * p->k + c]);
            }
            const int64_t i = r * p->ldy + o;
            if (p->accumulate) {
                mag += fabs((double)y0[i]);
            }
            tol[i] = 8.0 * eps * (mag + fabs((double)ref[i])) + 1e-37;
        }
    }
}

static void tol_attention(const struct tcase * tc, int j, const float * ref, double * tol)
{
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
                    const double a = fabs((double)v[g * p->kv_gs + jj * p->kv_ss + h * E + e]);
                    vmax = a > vmax ? a : vmax;
                }
            }
            for (int64_t i = 0; i < p->lq; i++) {
                double smag = 0.0;
                for (int64_t jj = 0; jj < p->lk; jj++) {
                    double s = 0.0;
                    for (int64_t e = 0; e < E; e++) {
                        s += fabs((double)q[g * p->q_gs + i * p->q_ss + h * E + e] *
                                  (double)k[g * p->kv_gs + jj * p->kv_ss + h * E + e]);
                    }
                    s *= fabs((double)p->scale);
                    smag = s > smag ? s : smag;
                }
                const double t = 8.0 * eps * vmax * (sqrt((double)p->lk) + 4.0 * smag + 4.0) + 1e-37;
                for (int64_t e = 0; e < E; e++) {
                    tol[g * p->o_gs + i * p->o_ss + h * E + e] = t;
                }
            }
        }
    }
}

/* ---- comparing ---------------------------------------------------------------------------- */

struct cmp {
    int64_t n_bad, n_guard, n_nondet;
    double  max_abs, max_rel, max_ratio;
    int64_t worst_i;
    float   worst_ref, worst_dev;
    int     worst_dst;
};

static void compare_dst(const struct tcase * tc, tol_fn tolerances, int j, const uint32_t * ref_full,
                        const uint32_t * dev_full, const uint32_t * dev_full2, struct cmp * c)
{
    const struct operand * o = &tc->dst[j];
    const int64_t n_el = opnd_numel(o);
    const int64_t words = opnd_words(o);
    for (int64_t i = 0; i < words; i++) {
        if (dev_full2 && dev_full2[i] != dev_full[i]) {
            c->n_nondet++;
        }
        if ((i < GUARD || i >= GUARD + n_el) && dev_full[i] != o->host[i]) {
            c->n_guard++;
        }
    }
    const float * ref = (const float *)(const void *)(ref_full + GUARD);
    const float * dev = (const float *)(const void *)(dev_full + GUARD);
    double * tol = malloc((size_t)(n_el ? n_el : 1) * sizeof(double));
    if (!tol) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    for (int64_t i = 0; i < n_el; i++) {
        tol[i] = 0.0;
    }
    if (tolerances) {
        tolerances(tc, j, ref, tol);
    }
    const int is_int = o->type == NF_I32;
    for (int64_t i = 0; i < n_el; i++) {
        int ok;
        double d = 0.0;
        if (is_int) {
            ok = ref_full[GUARD + i] == dev_full[GUARD + i];
        } else {
            const float r = ref[i], v = dev[i];
            if (isnan(r) || isnan(v)) {
                ok = isnan(r) && isnan(v);
            } else if (isinf(r) || isinf(v)) {
                ok = r == v;
            } else {
                d = fabs((double)r - (double)v);
                ok = tol[i] > 0.0 ? d <= tol[i] : r == v;
                if (d > c->max_abs) {
                    c->max_abs = d;
                }
                const double rel = d / (fabs((double)r) > 1e-30 ? fabs((double)r) : 1e-30);
                if (d > 0 && rel > c->max_rel) {
                    c->max_rel = rel;
                }
                if (tol[i] > 0.0 && d / tol[i] > c->max_ratio) {
                    c->max_ratio = d / tol[i];
                }
            }
        }
        if (!ok) {
            if (c->n_bad == 0) {
                c->worst_i = i;
                c->worst_ref = ref[i];
                c->worst_dev = dev[i];
                c->worst_dst = j;
            }
            c->n_bad++;
        }
    }
    free(tol);
}

/* ---- case builders ------------------------------------------------------------------------- */

typedef void (*case_fn)(struct tcase * tc, int variant);

/* QUANTILE: x (n, F) with ties; a NaN column in some variants */
static const struct { int64_t n, F; int nq, denom, levels, nan_col; } quantile_shapes[] = {
    { 1, 1, 999, 1000, 0, 0 },   { 2, 3, 999, 1000, 0, 0 },  { 3, 2, 999, 1000, 3, 0 },
    { 999, 3, 999, 1000, 0, 0 }, { 1500, 4, 999, 1000, 17, 1 }, { 17, 5, 7, 8, 4, 1 },
    { 1500, 1, 999, 1000, 2, 0 }, { 64, 7, 3, 4, 0, 0 },
};

static void case_quantile(struct tcase * tc, int v)
{
    const int64_t n = quantile_shapes[v].n, F = quantile_shapes[v].F;
    const int nq = quantile_shapes[v].nq, levels = quantile_shapes[v].levels;
    tcase_begin(tc, NF_OP_QUANTILE, 1, 1);
    tc->op.p.quantile.nq = nq;
    tc->op.p.quantile.q_denom = quantile_shapes[v].denom;
    opnd_init(&tc->src[0], NF_F32, 2, n, F, 0);
    float * x = opnd_f(&tc->src[0]);
    for (int64_t i = 0; i < n * F; i++) {
        /* levels > 0: few distinct values (many ties); else continuous */
        x[i] = levels ? (float)rng_int(levels) * 0.25f - 1.0f : rng_unif(-3.0f, 3.0f);
    }
    if (quantile_shapes[v].nan_col && F > 1) {
        x[rng_int(n) * F + 1] = NAN;
    }
    opnd_init(&tc->dst[0], NF_F32, 2, F, nq, 0);
    snprintf(tc->desc, sizeof(tc->desc), "n=%lld F=%lld nq=%d q_denom=%d%s%s", (long long)n, (long long)F, nq,
             quantile_shapes[v].denom, levels ? " ties" : "", quantile_shapes[v].nan_col && F > 1 ? " nan-col" : "");
}

/* BUCKETIZE_NORM: boundaries with ties, x values on the boundaries, NaN x,
 * a constant column (var == 0) */
static const struct { int64_t ns, nq, F, nb; } bucketize_shapes[] = {
    { 1, 0, 1, 999 }, { 5, 1, 2, 7 }, { 300, 33, 4, 999 }, { 2, 3, 3, 1 }, { 1000, 0, 3, 999 }, { 17, 129, 5, 31 },
};

static void case_bucketize(struct tcase * tc, int v)
{
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
                cur += 0.125f * (float)(1 + rng_int(2));
            }
            B[j * nb + k] = cur;
        }
    }
    float * xs = opnd_f(&tc->src[0]);
    float * xq = opnd_f(&tc->src[1]);
    for (int64_t r = 0; r < ns; r++) {
        for (int64_t j = 0; j < F; j++) {
            float x = rng_int(2) ? B[j * nb + rng_int(nb)] : rng_unif(-3.0f, 3.0f + 0.25f * (float)nb);
            if (j == F - 1 && F > 2) {
                x = 0.5f;   /* constant column: var == 0 -> z = 0 */
            }
            xs[r * F + j] = x;
        }
    }
    for (int64_t r = 0; r < nqr; r++) {
        for (int64_t j = 0; j < F; j++) {
            const int64_t kind = rng_int(8);
            xq[r * F + j] = kind == 0 ? NAN : kind < 4 ? B[j * nb + rng_int(nb)] : rng_unif(-4.0f, 4.0f + 0.25f * (float)nb);
        }
    }
    snprintf(tc->desc, sizeof(tc->desc), "n_s=%lld n_q=%lld F=%lld nb=%lld", (long long)ns, (long long)nqr,
             (long long)F, (long long)nb);
}

static const struct { int64_t n, F, D; } embed_shapes[] = {
    { 1, 1, 1 }, { 7, 5, 16 }, { 33, 3, 512 }, { 2, 1, 17 },
};

static void case_embed(struct tcase * tc, int v)
{
    const int64_t n = embed_shapes[v].n, F = embed_shapes[v].F, D = embed_shapes[v].D;
    tcase_begin(tc, NF_OP_EMBED_FEATURES, 3, 1);
    opnd_init(&tc->src[0], NF_F32, 2, n, F, 0);
    fill_unif(&tc->src[0], -2.0f, 2.0f);
    opnd_init(&tc->src[1], NF_F32, 2, D, 1, 0);
    fill_unif(&tc->src[1], -1.0f, 1.0f);
    opnd_init(&tc->src[2], NF_F32, 1, D, 0, 0);
    fill_unif(&tc->src[2], -1.0f, 1.0f);
    opnd_init(&tc->dst[0], NF_F32, 3, n, F + 1, D);   /* token 0 stays SENTINEL */
    snprintf(tc->desc, sizeof(tc->desc), "n=%lld F=%lld D=%lld", (long long)n, (long long)F, (long long)D);
}

static const struct { int mode; int64_t n, T, D, C; } label_shapes[] = {
    { NF_LABEL_CLASS, 1, 1, 1, 1 },  { NF_LABEL_CLASS, 9, 4, 17, 10 }, { NF_LABEL_CLASS, 100, 3, 512, 10 },
    { NF_LABEL_VALUE, 1, 1, 1, 0 },  { NF_LABEL_VALUE, 9, 4, 17, 0 },  { NF_LABEL_VALUE, 100, 2, 512, 0 },
    { NF_LABEL_MASK, 1, 1, 1, 0 },   { NF_LABEL_MASK, 9, 4, 17, 0 },   { NF_LABEL_MASK, 100, 3, 512, 0 },
};

static void case_label(struct tcase * tc, int v)
{
    const int mode = label_shapes[v].mode;
    const int64_t n = label_shapes[v].n, T = label_shapes[v].T, D = label_shapes[v].D, C = label_shapes[v].C;
    static const char * const mname[] = { "class", "value", "mask" };
    if (mode == NF_LABEL_CLASS) {
        tcase_begin(tc, NF_OP_LABEL_TOKENS, 2, 1);
        opnd_init(&tc->src[0], NF_I32, 1, n, 0, 0);
        int32_t * y = opnd_i(&tc->src[0]);
        for (int64_t r = 0; r < n; r++) {
            y[r] = (int32_t)rng_int(C);
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
        tc->src[0].used = 0;   /* unused in mask mode */
        opnd_init(&tc->src[1], NF_F32, 2, 1, D, 0);
        fill_unif(&tc->src[1], -1.0f, 1.0f);
    }
    tc->op.p.label_tokens.mode = mode;
    opnd_init(&tc->dst[0], NF_F32, 3, n, T, D);   /* tokens 1.. stay SENTINEL */
    snprintf(tc->desc, sizeof(tc->desc), "%s n=%lld T=%lld D=%lld%s", mname[mode], (long long)n, (long long)T,
             (long long)D, mode == NF_LABEL_CLASS ? (C == 1 ? " C=1" : " C=10") : "");
}

static const struct { int64_t m, k, xpad, ypad; float offset; } ln_shapes[] = {
    { 1, 1, 0, 0, 0.0f },   { 7, 8, 3, 0, 0.0f }, { 130, 512, 0, 5, 0.0f }, { 33, 512, 0, 0, 3.0f },
    { 2, 8, 1, 2, 100.0f }, { 1, 512, 0, 0, 0.0f },
};

static void case_layer_norm(struct tcase * tc, int v)
{
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
    snprintf(tc->desc, sizeof(tc->desc), "m=%lld k=%lld ldx=%lld ldy=%lld mean~%g", (long long)m, (long long)k,
             (long long)ldx, (long long)ldy, (double)ln_shapes[v].offset);
}

static const int64_t lin_m[] = { 1, 7, 33, 130 };
static const int64_t lin_k[] = { 1, 5, 64, 512 };
static const int64_t lin_n[] = { 1, 3, 17, 2048 };
#define N_LINEAR (4 * 4 * 4)

static void case_linear(struct tcase * tc, int v)
{
    const int64_t m = lin_m[v / 16], k = lin_k[(v / 4) % 4], n = lin_n[v % 4];
    /* variant bits cycle through bias / GELU / accumulate / padded strides */
    const int bias = (v % 8) != 3;
    const int gelu = (v / 2) % 2;
    const int acc  = (v % 3) == 1;
    const int pad  = (v % 5) == 2;
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
    snprintf(tc->desc, sizeof(tc->desc), "m=%lld k=%lld n=%lld ldx=%lld ldy=%lld%s%s%s", (long long)m, (long long)k,
             (long long)n, (long long)ldx, (long long)ldy, bias ? " bias" : "", gelu ? " gelu" : "", acc ? " acc" : "");
}

/* ATTENTION in Mitra's two layouts over a (rows, T, H*E) token tensor:
 *   row mode:     group = token column t, row i of the group at i*T*D (q_ss = T*D, q_gs = D);
 *                 queries (lq rows) attend to support rows (lk rows);
 *   feature mode: group = row, token i at i*D (q_ss = D, q_gs = T*D), lq = lk = T.
 * o uses a padded row stride in some variants (gaps must stay untouched). */
static const struct { int feature; int64_t lq, lk, H, E, G; int opad; } attn_shapes[] = {
    { 0, 1, 1, 1, 1, 1, 0 },     { 0, 5, 2, 2, 8, 3, 1 },     { 0, 33, 17, 4, 128, 2, 0 },
    { 0, 16, 300, 1, 128, 2, 1 }, { 0, 7, 300, 2, 8, 4, 0 },   { 0, 3, 17, 1, 1, 5, 0 },
    { 1, 1, 1, 4, 8, 3, 0 },     { 1, 2, 2, 2, 128, 7, 1 },   { 1, 17, 17, 4, 128, 3, 0 },
    { 1, 11, 11, 1, 1, 40, 0 },  { 0, 40, 1000, 1, 64, 1, 0 },
    /* around the cuda backend's one-kernel limit lk <= 256 (head_dim <= 128
     * is every backend's: the opencl kernel's too) */
    { 0, 9, 256, 2, 32, 2, 1 },  { 0, 9, 257, 2, 32, 2, 0 },
    { 0, 8, 31, 3, 100, 2, 0 },  { 0, 17, 33, 1, 128, 1, 1 },
};

static void case_attention(struct tcase * tc, int v)
{
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
    p->scale = 1.0f / sqrtf((float)E);
    int64_t o_ss, o_gs;
    if (!feature) {
        const int64_t T = G;
        p->q_ss = T * D;  p->q_gs = D;
        p->kv_ss = T * D; p->kv_gs = D;
        o_ss = T * D + (attn_shapes[v].opad ? 5 : 0);
        o_gs = D;
    } else {
        const int64_t T = lq;
        p->q_ss = D;  p->q_gs = T * D;
        p->kv_ss = D; p->kv_gs = T * D;
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
             feature ? "feature" : "row", (long long)G, (long long)lq, (long long)lk, (long long)H, (long long)E,
             (long long)p->q_ss, (long long)o_ss);
}

/* One test descriptor per op: its case builder, how many variants it
 * builds, its tolerance (NULL: exact). Every op of the table (nf-ops.def)
 * must have one: main() fails otherwise. */
static const struct {
    enum nf_op_type type;
    case_fn         fn;
    int             n;
    tol_fn          tol;
} g_ops[] = {
    { NF_OP_QUANTILE,       case_quantile,   (int)(sizeof(quantile_shapes) / sizeof(quantile_shapes[0])), NULL },
    { NF_OP_BUCKETIZE_NORM, case_bucketize,  (int)(sizeof(bucketize_shapes) / sizeof(bucketize_shapes[0])), NULL },
    { NF_OP_EMBED_FEATURES, case_embed,      (int)(sizeof(embed_shapes) / sizeof(embed_shapes[0])), NULL },
    { NF_OP_LABEL_TOKENS,   case_label,      (int)(sizeof(label_shapes) / sizeof(label_shapes[0])), NULL },
    { NF_OP_LAYER_NORM,     case_layer_norm, (int)(sizeof(ln_shapes) / sizeof(ln_shapes[0])), tol_layer_norm },
    { NF_OP_LINEAR,         case_linear,     N_LINEAR, tol_linear },
    { NF_OP_ATTENTION,      case_attention,  (int)(sizeof(attn_shapes) / sizeof(attn_shapes[0])), tol_attention },
};
#define N_OPS ((int)(sizeof(g_ops) / sizeof(g_ops[0])))

/* ---- backend-specific checks (error paths) ------------------------------------------------- */

static int g_fail;

static void report(const char * be, const char * what, int ok, const char * fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static void report(const char * be, const char * what, int ok, const char * fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    printf("%-4s %-9s %-15s %s\n", ok ? "OK" : "FAIL", be, what, msg);
    fflush(stdout);
    if (!ok) {
        g_fail = 1;
    }
}

/* the device placement check must hold on every backend: an operand on the
 * cpu backend given to another backend's op is NF_ERR_PLACEMENT */
static void check_placement(nf_backend * be, nf_backend * cpu)
{
    nf_err err;
    memset(&err, 0, sizeof(err));
    nf_tensor x, g, b, y;
    const int64_t k = 8;
    int rc = nf__tensor_alloc(cpu, &x, NF_F32, 1, &k, "x_on_cpu", &err);
    rc = rc ? rc : nf__tensor_alloc(be, &g, NF_F32, 1, &k, "g", &err);
    rc = rc ? rc : nf__tensor_alloc(be, &b, NF_F32, 1, &k, "b", &err);
    rc = rc ? rc : nf__tensor_alloc(be, &y, NF_F32, 1, &k, "y", &err);
    if (rc != NF_OK) {
        report(nf_backend_name(be), "placement", 0, "setup: %s", err.msg);
        return;
    }
    char where_ok = strcmp(y.buf->where, nf_backend_name(be)) == 0;
    nf_op op;
    memset(&op, 0, sizeof(op));
    op.type = NF_OP_LAYER_NORM;
    op.label = "placement";
    op.n_src = 3;
    op.n_dst = 1;
    op.src[0] = x;
    op.src[1] = g;
    op.src[2] = b;
    op.dst[0] = y;
    op.p.layer_norm.m = 1;
    op.p.layer_norm.k = k;
    op.p.layer_norm.ldx = k;
    op.p.layer_norm.ldy = k;
    op.p.layer_norm.eps = 1e-5f;
    rc = nf__op_run(be, &op, &err);
    report(nf_backend_name(be), "placement", rc == NF_ERR_PLACEMENT && where_ok,
           "cpu operand -> %s (%s); buffer_where = \"%s\"", nf_result_name(rc), rc ? err.msg : "ran!", y.buf->where);
    nf__tensor_free(&x);
    nf__tensor_free(&g);
    nf__tensor_free(&b);
    nf__tensor_free(&y);
}

#ifdef NF_HAVE_OPENCL
static void check_opencl_errors(void)
{
    nf_err err;
    nf_backend * be = NULL;
    memset(&err, 0, sizeof(err));
    int rc = nf_backend_init("opencl:99", NF_PRECISION_EXACT, &be, &err);
    report("opencl", "no-such-device", rc == NF_ERR_DEVICE && !be && strstr(err.msg, "opencl:99") != NULL,
           "%s: %s", nf_result_name(rc), err.msg);
    nf_backend_free(be);
    be = NULL;

    memset(&err, 0, sizeof(err));
    rc = nf_backend_init("opencl:0", NF_PRECISION_TF32, &be, &err);
    report("opencl", "tf32", rc == NF_ERR_ARG && !be, "%s: %s", nf_result_name(rc), err.msg);
    nf_backend_free(be);
    be = NULL;

    /* kernel build failure: only meaningful where a device exists */
    memset(&err, 0, sizeof(err));
    rc = nf_backend_init("opencl:0", NF_PRECISION_EXACT, &be, &err);
    nf_backend_free(be);
    be = NULL;
    if (rc != NF_OK) {
        printf("SKIP opencl    build-failure   not available: %s\n", err.msg);
        return;
    }
    static const char * const broken[] = { "opencl.test_break_build=1", NULL };
    const struct nf_backend_opts bo = { .precision = NF_PRECISION_EXACT, .options = broken };
    memset(&err, 0, sizeof(err));
    rc = nf_backend_init_opts("opencl:0", &bo, &be, &err);
    const char * nl = strchr(err.msg, '\n');
    report("opencl", "build-failure", rc == NF_ERR_DEVICE && !be && strstr(err.msg, "kernel build failed") != NULL &&
           nl != NULL && nl[1] != '\0', "%s: %.*s (+ build log, %zu chars)", nf_result_name(rc),
           nl ? (int)(nl - err.msg) : (int)strlen(err.msg), err.msg, nl ? strlen(nl + 1) : (size_t)0);
    nf_backend_free(be);
}
#endif

static void test_backend(nf_backend * be, const char * disp, nf_backend * cpu, const char * const * only_ops,
                         int n_only, int verbose, int * n_cases, int * n_ok)
{
    nf_err err;
    printf("---- %s: %s\n     %s\n", disp, nf_backend_description(be), nf_backend_precision_detail(be));
    for (int oi = 0; oi < N_OPS; oi++) {
        const char * opname = nf__op_name(g_ops[oi].type);
        if (n_only) {
            int want = 0;
            for (int k = 0; k < n_only; k++) {
                want |= strcmp(only_ops[k], opname) == 0;
            }
            if (!want) {
                continue;
            }
        }
        for (int v = 0; v < g_ops[oi].n; v++) {
            struct tcase tc;
            g_rng = 0x5EED0000ULL + (uint64_t)oi * 1000u + (uint64_t)v;   /* same data on every backend */
            g_ops[oi].fn(&tc, v);
            (*n_cases)++;
            struct run_out ref, dev1, dev2;
            memset(&err, 0, sizeof(err));
            if (run_case(cpu, &tc, &ref, &err) != NF_OK) {
                report(disp, opname, 0, "%s: cpu reference failed: %s", tc.desc, err.msg);
                tcase_free(&tc);
                continue;
            }
            if (run_case(be, &tc, &dev1, &err) != NF_OK) {
                report(disp, opname, 0, "%s: %s", tc.desc, err.msg);
                run_out_free(&ref);
                tcase_free(&tc);
                continue;
            }
            if (run_case(be, &tc, &dev2, &err) != NF_OK) {
                report(disp, opname, 0, "%s: second run: %s", tc.desc, err.msg);
                run_out_free(&ref);
                run_out_free(&dev1);
                tcase_free(&tc);
                continue;
            }
            struct cmp c;
            memset(&c, 0, sizeof(c));
            for (int j = 0; j < tc.op.n_dst; j++) {
                if (tc.dst[j].used) {
                    compare_dst(&tc, g_ops[oi].tol, j, ref.dst[j], dev1.dst[j], dev2.dst[j], &c);
                }
            }
            const int ok = c.n_bad == 0 && c.n_guard == 0 && c.n_nondet == 0 && !dev1.src_clobbered &&
                           !ref.src_clobbered;
            char extra[256] = "";
            if (c.n_bad && (verbose || !ok)) {
                snprintf(extra, sizeof(extra), " first bad: dst%d[%lld] ref=%.9g dev=%.9g", c.worst_dst,
                         (long long)c.worst_i, (double)c.worst_ref, (double)c.worst_dev);
            }
            report(disp, opname, ok,
                   "%s  max_abs=%.3g max_rel=%.3g err/tol=%.3g bad=%lld guard=%lld nondet=%lld%s%s",
                   tc.desc, c.max_abs, c.max_rel, c.max_ratio, (long long)c.n_bad, (long long)c.n_guard,
                   (long long)c.n_nondet, dev1.src_clobbered || ref.src_clobbered ? " SRC-CLOBBERED" : "", extra);
            *n_ok += ok;
            run_out_free(&ref);
            run_out_free(&dev1);
            run_out_free(&dev2);
            tcase_free(&tc);
        }
    }
}

/* ---- main ------------------------------------------------------------------------------------- */

static int absent_reason(const char * msg)
{
    static const char * const pats[] = {
        "not compiled", "no such device", "no OpenCL platform", "no OpenCL device",
        "no CUDA device", "cudaErrorNoDevice", "cudaErrorInsufficientDriver",
    };
    for (size_t i = 0; i < sizeof(pats) / sizeof(pats[0]); i++) {
        if (strstr(msg, pats[i])) {
            return 1;
        }
    }
    return 0;
}

int main(int argc, char ** argv)
{
    const char * devs[16];
    int n_devs = 0, explicit_devs = 0, verbose = 0;
    const char * only_ops[16];
    int n_only = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-b") == 0 && i + 1 < argc && n_devs < 16) {
            devs[n_devs++] = argv[++i];
            explicit_devs = 1;
        } else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc && n_only < 16) {
            only_ops[n_only++] = argv[++i];
        } else if (strcmp(argv[i], "-v") == 0) {
            verbose = 1;
        } else {
            fprintf(stderr, "usage: %s [-b DEVICE]... [-o OP]... [-v]\n", argv[0]);
            return 2;
        }
    }
    if (!explicit_devs) {
        devs[n_devs++] = "cpu";
        devs[n_devs++] = "opencl:0";
        devs[n_devs++] = "cuda:0";
    }

    nf_err err;
    memset(&err, 0, sizeof(err));
    nf_backend * cpu = NULL;
    if (nf_backend_init("cpu", NF_PRECISION_EXACT, &cpu, &err) != NF_OK) {
        printf("FAIL cpu: init: %s\n", err.msg);
        return 1;
    }

    /* the suite covers the whole op table */
    for (int t = 0; t < NF_OP_COUNT; t++) {
        int have = 0;
        for (int oi = 0; oi < N_OPS; oi++) {
            have |= g_ops[oi].type == (enum nf_op_type)t;
        }
        if (!have) {
            report("-", nf__op_name((enum nf_op_type)t), 0, "no test descriptor in test-backend-ops.c");
        }
    }

    int n_cases = 0, n_ok = 0, n_tested_devs = 0;
    for (int di = 0; di < n_devs; di++) {
        nf_backend * be = NULL;
        memset(&err, 0, sizeof(err));
        if (strcmp(devs[di], "cpu") == 0) {
            be = cpu;
        } else if (nf_backend_init(devs[di], NF_PRECISION_EXACT, &be, &err) != NF_OK) {
            if (!explicit_devs && absent_reason(err.msg)) {
                printf("SKIP %-9s not available: %s\n", devs[di], err.msg);
            } else {
                report(devs[di], "init", 0, "%s", err.msg);
            }
            continue;
        }
        n_tested_devs++;
        test_backend(be, nf_backend_name(be), cpu, only_ops, n_only, verbose, &n_cases, &n_ok);
#ifdef NF_HAVE_OPENCL
        /* the OpenCL backend has two GEMM paths (CLBlast and its own kernel, with a
         * CPU and a GPU tile geometry): test LINEAR on the other ones too */
        if (strcmp(nf_backend_kind(be), "opencl") == 0) {
            static const struct { const char * tag, * gemm, * geo; } alt[] = {
                { "own",     "own", NULL },
                { "own-gpu", "own", "64 64 16 16 16 0" },
                { "own-cpu", "own", "64 64 16 16 8 1" },
            };
            int want = !n_only;
            for (int k = 0; k < n_only; k++) {
                want |= strcmp(only_ops[k], "LINEAR") == 0;
            }
            for (size_t a = 0; want && a < sizeof(alt) / sizeof(alt[0]); a++) {
                nf_backend * ob = NULL;
                char kv_gemm[64], kv_geo[96];
                snprintf(kv_gemm, sizeof(kv_gemm), "opencl.gemm=%s", alt[a].gemm);
                snprintf(kv_geo, sizeof(kv_geo), "opencl.gemm_geometry=%s", alt[a].geo ? alt[a].geo : "");
                const char * const kvs[] = { kv_gemm, alt[a].geo ? kv_geo : NULL, NULL };
                const struct nf_backend_opts ao = { .precision = NF_PRECISION_EXACT, .options = kvs };
                const int rc = nf_backend_init_opts(devs[di], &ao, &ob, &err);
                char disp[48];
                snprintf(disp, sizeof(disp), "%s/%s", nf_backend_name(be), alt[a].tag);
                if (rc != NF_OK) {
                    report(disp, "init", 0, "%s", err.msg);
                    continue;
                }
                if (!alt[a].geo && !strstr(nf_backend_precision_detail(be), "CLBlast")) {
                    nf_backend_free(ob);   /* the main pass already used the built-in GEMM */
                    continue;
                }
                const char * lin[1] = { "LINEAR" };
                test_backend(ob, disp, cpu, lin, 1, verbose, &n_cases, &n_ok);
                nf_backend_free(ob);
            }
        }
#endif
        if (be != cpu) {
            check_placement(be, cpu);
            nf_backend_free(be);
        }
    }
#ifdef NF_HAVE_OPENCL
    if (!n_only) {
        check_opencl_errors();
    }
#endif
    nf_backend_free(cpu);
    printf("%d/%d cases OK on %d backend(s)%s\n", n_ok, n_cases, n_tested_devs, g_fail ? " -- FAILED" : "");
    return g_fail ? 1 : 0;
}
