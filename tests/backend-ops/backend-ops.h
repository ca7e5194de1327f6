/*
 * backend-ops.h -- shared by the op conformance suite's files:
 *   test-backend-ops.c     running a case on a backend, comparing, the
 *                          error-path checks, main
 *   backend-ops/cases.c    per op: its case builders (shapes, operands,
 *                          params), its tolerance and its test descriptor
 * Test cases are host buffers with guard regions; see test-backend-ops.c.
 */
#ifndef NF_TEST_BACKEND_OPS_H
#define NF_TEST_BACKEND_OPS_H

#include "nf-impl.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SENTINEL 0xC5F31A2Bu /* a finite float (about -7779.27) with an odd bit pattern */
#define GUARD    7           /* guard elements before and after every operand          */

/* ---- deterministic RNG (splitmix64) --------------------------------------------------- */

extern uint64_t g_rng; /* seeded by main per case */

static inline uint64_t rng_u64(void) {
    uint64_t z = (g_rng += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static inline float rng_unif(float lo, float hi) /* [lo, hi) */
{
    return lo + (hi - lo) * (float) ((double) (rng_u64() >> 40) / (double) (1ULL << 24));
}

static inline int64_t rng_int(int64_t n) /* [0, n) */
{
    return (int64_t) (rng_u64() % (uint64_t) n);
}

static inline float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---- test cases ----------------------------------------------------------------------- */

struct operand {
    int used;
    enum nf_dtype type;
    int ndim;
    int64_t ne[NF_MAX_DIMS];
    uint32_t * host; /* GUARD + numel + GUARD words: the initial buffer */
};

struct tcase {
    char desc[192];
    nf_op op; /* type, counts, params; tensors are filled per run */
    struct operand src[NF_OP_MAX_SRC];
    struct operand dst[NF_OP_MAX_DST];
};

static inline int64_t opnd_numel(const struct operand * o) {
    int64_t n = 1;
    for (int i = 0; i < o->ndim; i++) {
        n *= o->ne[i];
    }
    return n;
}

static inline int64_t opnd_words(const struct operand * o) { return GUARD + opnd_numel(o) + GUARD; }

/* the view part of the host buffer, as floats / ints */
static inline float * opnd_f(const struct operand * o) { return (float *) (void *) (o->host + GUARD); }

static inline int32_t * opnd_i(const struct operand * o) { return (int32_t *) (void *) (o->host + GUARD); }

static inline void opnd_init(struct operand * o, enum nf_dtype type, int ndim, int64_t a, int64_t b, int64_t c) {
    memset(o, 0, sizeof(*o));
    o->used = 1;
    o->type = type;
    o->ndim = ndim;
    o->ne[0] = a;
    o->ne[1] = b;
    o->ne[2] = c;
    const int64_t n = opnd_words(o);
    o->host = malloc((size_t) n * sizeof(uint32_t));
    if (!o->host) {
        fprintf(stderr, "out of memory\n");
        exit(2); /* test program only */
    }
    for (int64_t i = 0; i < n; i++) {
        o->host[i] = SENTINEL;
    }
}

static inline void fill_unif(struct operand * o, float lo, float hi) {
    float * f = opnd_f(o);
    for (int64_t i = 0; i < opnd_numel(o); i++) {
        f[i] = rng_unif(lo, hi);
    }
}

static inline void tcase_free(struct tcase * tc) {
    for (int i = 0; i < NF_OP_MAX_SRC; i++) {
        free(tc->src[i].host);
    }
    for (int i = 0; i < NF_OP_MAX_DST; i++) {
        free(tc->dst[i].host);
    }
    memset(tc, 0, sizeof(*tc));
}

static inline void tcase_begin(struct tcase * tc, enum nf_op_type type, int n_src, int n_dst) {
    memset(tc, 0, sizeof(*tc));
    tc->op.type = type;
    tc->op.n_src = n_src;
    tc->op.n_dst = n_dst;
    tc->op.label = "test";
}

/* ---- test descriptors (backend-ops/cases.c) --------------------------------------------- */

/* tol[i] for every element of dst j's view: 0 = exact, > 0 = absolute bound.
 * One function per op with a tolerance (its test descriptor names it); ops
 * without one are compared exactly. */
typedef void (*tol_fn)(const struct tcase * tc, int j, const float * ref, double * tol);
typedef void (*case_fn)(struct tcase * tc, int variant);

/* The float64 reference of an op (optional): out[i] = the value element i
 * of dst j's view must have after the op, the op's formula evaluated in
 * double on the case's initial operands (an element the op does not write:
 * its initial value). Every backend, cpu included, is then compared with it
 * (tolerance: the descriptor's tol_fn, which gets these values rounded to
 * float as `ref`) instead of with the cpu kernel. */
typedef void (*ref64_fn)(const struct tcase * tc, int j, double * out);

/* A finite-difference check of a gradient op (optional), run once per case,
 * whatever the backend: it checks the gradient formula itself (the one the
 * ref64 function evaluates) against central differences of the op's forward
 * formula in double, typically with fd_check_grad below. Returns 1 (OK), 0
 * (FAIL) or -1 (not run for this case, e.g. too big), and a message. */
typedef int (*fd_fn)(const struct tcase * tc, char * msg, size_t n);

/* Set B's float64 reference (the training ops of cases-train-b.c): fills
 * ref[j] (every dst j's view, preset to its initial contents) with the op's
 * formula evaluated in double and tol[j] (preset to 0: exact) with the bound
 * of each element it writes (-1: not compared, e.g. a scratch). Every
 * backend, the cpu included, is then compared with it. */
typedef void (*ref_fn)(const struct tcase * tc, double * const * ref, double * const * tol);
/* Set B's finite-difference check of a gradient op on one backend's results
 * (dst[j]: dst j's view): -1 when the case is too big for it, else the
 * number of elements outside the bound; *worst = the largest err / bound. */
typedef int64_t (*fd_dev_fn)(const struct tcase * tc, const float * const * dst, double * worst);

/* One test descriptor per op: its case builder, how many variants it
 * builds, its tolerance (NULL: exact), its float64 reference and
 * finite-difference check (set A's form: ref64, fd; set B's: refb, fd_dev;
 * NULL: none). Every op of the table (nf-ops.def) must have one: main()
 * fails otherwise. */
struct op_desc {
    enum nf_op_type type;
    case_fn fn;
    int n;
    tol_fn tol;
    ref64_fn ref64;
    fd_fn fd;
    ref_fn refb;
    fd_dev_fn fd_dev;
};

/* backend-ops/cases-train-b.c: the training ops, set B */
#define N_ATTN_BWD_CASES  22
#define N_ATTN_DROP_CASES 6
#define N_EMBED_BWD_CASES 6
#define N_LABEL_BWD_CASES 12
#define N_XENT_CASES      8
#define N_MSE_CASES       5
void case_attention_backward(struct tcase * tc, int variant);
void ref_attention_backward(const struct tcase * tc, double * const * ref, double * const * tol);
int64_t fd_attention_backward(const struct tcase * tc, const float * const * dst, double * worst);
/* the double forward of one (group g, head h, query i): P (lk) the probabilities, out (head_dim, or NULL)
 * sum_j P_j M_j v_j with M the dropout mask of p.drop_* (1 without); a case's dropout params from its
 * probability d and variant v */
void attn_row64(const struct nf_attention_backward_params * p, const double * q, const double * k, const double * v,
                int64_t g, int64_t h, int64_t i, double * P, double * out);
void attn_drop_params(float d, int v, int64_t * seed, int32_t * thr, float * scale);
/* backend-ops/cases-attn-drop.c: ATTENTION with dropout on the probabilities (its training form) */
void case_attention_drop(struct tcase * tc, int variant);
void ref_attention_drop(const struct tcase * tc, double * const * ref, double * const * tol);
void case_embed_backward(struct tcase * tc, int variant);
void ref_embed_backward(const struct tcase * tc, double * const * ref, double * const * tol);
int64_t fd_embed_backward(const struct tcase * tc, const float * const * dst, double * worst);
void case_label_backward(struct tcase * tc, int variant);
void ref_label_backward(const struct tcase * tc, double * const * ref, double * const * tol);
int64_t fd_label_backward(const struct tcase * tc, const float * const * dst, double * worst);
void case_cross_entropy(struct tcase * tc, int variant);
void ref_cross_entropy(const struct tcase * tc, double * const * ref, double * const * tol);
int64_t fd_cross_entropy(const struct tcase * tc, const float * const * dst, double * worst);
void case_mse_loss(struct tcase * tc, int variant);
void ref_mse_loss(const struct tcase * tc, double * const * ref, double * const * tol);
int64_t fd_mse_loss(const struct tcase * tc, const float * const * dst, double * worst);
/* backend-ops/cases-train-c.c: the training ops, set C (TabSTAR) */
#define N_SCATTER_CASES 8
#define N_CLIP_CASES    8
#define N_SCALE_CASES   5
void case_scatter_add_rows(struct tcase * tc, int variant);
void ref_scatter_add_rows(const struct tcase * tc, double * const * ref, double * const * tol);
int64_t fd_scatter_add_rows(const struct tcase * tc, const float * const * dst, double * worst);
void case_clip_grad_norm(struct tcase * tc, int variant);
void ref_clip_grad_norm(const struct tcase * tc, double * const * ref, double * const * tol);
void case_scale(struct tcase * tc, int variant);
void ref_scale(const struct tcase * tc, double * const * ref, double * const * tol);
#define N_DROPOUT_CASES 5
void case_dropout(struct tcase * tc, int variant);
void ref_dropout(const struct tcase * tc, double * const * ref, double * const * tol);
extern const struct op_desc g_ops[];
extern const int g_n_ops;
#define N_OPS g_n_ops

/* ---- finite differences (test-backend-ops.c; for fd_fn checks) ----------------------------- */

/* a scalar loss of the doubles at v (the perturbed inputs), in double */
typedef double (*fd_loss_fn)(void * ctx, const double * v);
struct fd_result {
    int64_t n_bad, worst;
    double max_ratio; /* max over i of |num - grad| / bound */
    double worst_num, worst_grad;
};
/* For each i < n: num = (loss(v + h_i e_i) - loss(v - h_i e_i)) / (2 h_i), with
 * h_i = h * (1 + |v_i|) (v is perturbed in place and restored), compared with
 * grad[i]: OK when |num - grad[i]| <= atol + rtol * (|num| + |grad[i]|).
 * Returns the number of failures (also in res). */
int64_t fd_check_grad(fd_loss_fn loss, void * ctx, double * v, int64_t n, const double * grad, double h, double rtol,
                      double atol, struct fd_result * res);

/* ---- the training ops' descriptors (backend-ops/cases-train.c) ---------------------------- */

void case_gemm(struct tcase * tc, int v);
void tol_gemm(const struct tcase * tc, int j, const float * ref, double * tol);
void ref_gemm(const struct tcase * tc, int j, double * out);
void case_col_sum(struct tcase * tc, int v);
void tol_col_sum(const struct tcase * tc, int j, const float * ref, double * tol);
void ref_col_sum(const struct tcase * tc, int j, double * out);
void case_act(struct tcase * tc, int v);
void tol_act(const struct tcase * tc, int j, const float * ref, double * tol);
void ref_act(const struct tcase * tc, int j, double * out);
void case_act_backward(struct tcase * tc, int v);
void tol_act_backward(const struct tcase * tc, int j, const float * ref, double * tol);
void ref_act_backward(const struct tcase * tc, int j, double * out);
int fd_act_backward(const struct tcase * tc, char * msg, size_t n);
void case_ln_backward(struct tcase * tc, int v);
void tol_ln_backward(const struct tcase * tc, int j, const float * ref, double * tol);
void ref_ln_backward(const struct tcase * tc, int j, double * out);
int fd_ln_backward(const struct tcase * tc, char * msg, size_t n);
void case_adamw(struct tcase * tc, int v);
void tol_adamw(const struct tcase * tc, int j, const float * ref, double * tol);
void ref_adamw(const struct tcase * tc, int j, double * out);
void case_copy(struct tcase * tc, int v);
/* their variant counts (cases-train.c checks them against its shape tables) */
#define N_GEMM_CASES        20
#define N_COL_SUM_CASES     6
#define N_ACT_CASES         8
#define N_LN_BACKWARD_CASES 8
#define N_ADAMW_CASES       6
#define N_COPY_CASES        3

#endif
