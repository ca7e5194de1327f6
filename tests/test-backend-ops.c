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
 * The training ops (backend-ops/cases-train.c) are compared, on every backend
 * including cpu, with a float64 reference (op_desc.ref64: the contract's
 * formula in double), with bounds derived from the formula's fp32 roundings:
 *   GEMM: 8 eps (sum_l |a b| + |C_old| + |ref|) (as LINEAR);
 *   COL_SUM: eps (|sum| + |ref|) + 1e-13 sum |x|;
 *   ACT: GELU 4 eps (|ref| + |x|), ReLU exact;
 *   ACT_BACKWARD: GELU 8 eps |dy| (1 + |x| pdf(x) (1 + x^2)) + 4 eps |ref|,
 *     ReLU exact;
 *   LAYER_NORM_BACKWARD: dx 16 eps rstd (|gd| + mean|gd| (1 + |xh|)) (1 + xm)
 *     + 2 eps (|dx_old| + |ref|), xm = 2 max|x| rstd of the row; dgamma
 *     8 eps sum_r |dy| (|xh| + 1 + xm) + 2 eps (|old| + |ref|); dbeta
 *     2 eps (|sum| + |old| + |ref|);
 *   ADAMW: eps (magnitude of the rounded terms + |ref|) per output;
 *   COPY: exact.
 * The gradient ops also get a finite-difference check (op_desc.fd, once per
 * small case, backend-free: "fd" lines): the gradient formula against central
 * differences of the forward formula in double (fd_check_grad).
 * The training ops of set B (ATTENTION_BACKWARD, EMBED_FEATURES_BACKWARD,
 * LABEL_TOKENS_BACKWARD, CROSS_ENTROPY, MSE_LOSS; backend-ops/cases-train-b.c)
 * likewise, through op_desc.refb (the formula in double and per-element
 * bounds computed together, a bound < 0 for a scratch never compared):
 *   ATTENTION_BACKWARD: 8 eps x the fp32 error terms of the scores, the
 *     softmax, dP, delta and the sums over keys (dq) or queries (dk, dv)
 *     (as tol_attention); its stats (a scratch) are not compared;
 *   the column sums (EMBED_FEATURES_BACKWARD, LABEL_TOKENS_BACKWARD):
 *     eps (|sum| + |ref|) + 1e-13 sum |terms|: a sum taken in double,
 *     rounded once and added in float (a float sum fails it);
 *   CROSS_ENTROPY: loss 2 eps |ref|, dlogits eps |ref| (double softmax);
 *   MSE_LOSS: 2 eps |ref| for the loss and dpred;
 * and on small cases op_desc.fd_dev, a finite-difference check of each
 * backend's gradients (its results, in the op's line) through the double
 * forward formula: |g - fd| <= 1e-4 (|fd| + max |fd| / 10) + 1e-6 (h = 1e-4,
 * central differences).
 * The training ops of set C (SCATTER_ADD_ROWS, CLIP_GRAD_NORM, SCALE;
 * TabSTAR; backend-ops/cases-train-c.c), through op_desc.refb likewise, each
 * bound counting the comparison with the reference rounded to float:
 *   SCATTER_ADD_ROWS: eps (|sum| + |ref|) + (eps/2 + 1e-13) sum |scale dy|,
 *     and fd_dev: the gradient of GATHER_ROWS' double forward;
 *   CLIP_GRAD_NORM: norm eps |ref|, gradients 4 eps |ref|;
 *   SCALE: eps/2 (|a x| (accumulating) + 2 |ref|).
 * A NaN/Inf where the reference has none (or the reverse) always fails.
 * One line per (backend, op, shape): OK / FAIL with the error figures.
 * Exit status 1 on any FAIL.
 *
 * The per-op case builders, tolerances and test descriptors are in
 * backend-ops/cases.c (the training ops' in backend-ops/cases-train.c); the
 * test-case helpers in backend-ops/backend-ops.h.
 */
#define _POSIX_C_SOURCE 200809L

#include "backend-ops/backend-ops.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t g_rng;

/* ---- running one case on one backend ------------------------------------------------------ */

struct run_out {
    uint32_t * dst[NF_OP_MAX_DST]; /* full buffers after the op (guards included) */
    int src_clobbered;             /* index+1 of a src whose buffer changed, else 0 */
};

static void run_out_free(struct run_out * r) {
    for (int i = 0; i < NF_OP_MAX_DST; i++) {
        free(r->dst[i]);
        r->dst[i] = NULL;
    }
}

static int run_case(nf_backend * be, const struct tcase * tc, struct run_out * out, nf_err * err) {
    static const char * const sname[NF_OP_MAX_SRC] = {"src0", "src1", "src2", "src3", "src4"};
    static const char * const dname[NF_OP_MAX_DST] = {"dst0", "dst1", "dst2", "dst3"};
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
        uint32_t * h = malloc((size_t) words * sizeof(uint32_t));
        if (!h) {
            rc = nf__err_set(err, NF_ERR_NOMEM, "out of host memory");
            break;
        }
        rc = nf__tensor_download(&full[i], h, err);
        if (is_src) {
            if (rc == NF_OK && memcmp(h, o->host, (size_t) words * sizeof(uint32_t)) != 0 && !out->src_clobbered) {
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

/* ---- comparing ---------------------------------------------------------------------------- */

struct cmp {
    int64_t n_bad, n_guard, n_nondet;
    double max_abs, max_rel, max_ratio;
    int64_t worst_i;
    float worst_ref, worst_dev;
    int worst_dst;
};

/* ref64 (may be NULL): the float64 reference of dst j's view; ref_full then
 * holds it rounded to float. tol_given (may be NULL): the bounds of a
 * descriptor's refb, else the tolerance function's (a bound < 0: not compared) */
static void compare_dst(const struct tcase * tc, tol_fn tolerances, const double * tol_given, int j,
                        const uint32_t * ref_full, const double * ref64, const uint32_t * dev_full,
                        const uint32_t * dev_full2, struct cmp * c) {
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
    const float * ref = (const float *) (const void *) (ref_full + GUARD);
    const float * dev = (const float *) (const void *) (dev_full + GUARD);
    double * tol = malloc((size_t) (n_el ? n_el : 1) * sizeof(double));
    if (!tol) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    for (int64_t i = 0; i < n_el; i++) {
        tol[i] = 0.0;
    }
    if (tol_given) {
        memcpy(tol, tol_given, (size_t) n_el * sizeof(double));
    } else if (tolerances) {
        tolerances(tc, j, ref, tol);
    }
    const int is_int = o->type == NF_I32;
    for (int64_t i = 0; i < n_el; i++) {
        int ok;
        double d = 0.0;
        if (tol[i] < 0.0) {
            continue; /* not compared (a scratch) */
        }
        if (is_int) {
            ok = ref_full[GUARD + i] == dev_full[GUARD + i];
        } else {
            const double r = ref64 ? ref64[i] : (double) ref[i];
            const float v = dev[i];
            if (isnan(r) || isnan(v)) {
                ok = isnan(r) && isnan(v);
            } else if (isinf(r) || isinf(v)) {
                ok = r == (double) v;
            } else {
                d = fabs(r - (double) v);
                ok = tol[i] > 0.0 ? d <= tol[i] : r == (double) v;
                if (d > c->max_abs) {
                    c->max_abs = d;
                }
                const double rel = d / (fabs(r) > 1e-30 ? fabs(r) : 1e-30);
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

/* The float64 reference of dst j (a descriptor's ref64_fn); the view part
 * of ref_full (the cpu kernel's output buffer) is overwritten with it rounded
 * to float, for the tolerance function and the messages. */
static double * ref64_dst(const struct tcase * tc, ref64_fn fn, int j, uint32_t * ref_full) {
    const int64_t n_el = opnd_numel(&tc->dst[j]);
    double * r = malloc((size_t) (n_el ? n_el : 1) * sizeof(double));
    if (!r) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    fn(tc, j, r);
    float * f = (float *) (void *) (ref_full + GUARD);
    for (int64_t i = 0; i < n_el; i++) {
        f[i] = (float) r[i];
    }
    return r;
}

/* ---- float64 references (the training ops) --------------------------------------------- */

/* a descriptor's refb (set B): the reference as full buffers (each dst's
 * initial guards and contents, the view overwritten by the rounded float64
 * values) and its bounds */
struct refb {
    uint32_t * full[NF_OP_MAX_DST];
    double * tol[NF_OP_MAX_DST];
};

static void refb_make(struct refb * r, const struct tcase * tc, ref_fn fn) {
    double * val[NF_OP_MAX_DST] = {NULL};
    memset(r, 0, sizeof(*r));
    for (int j = 0; j < tc->op.n_dst; j++) {
        const struct operand * o = &tc->dst[j];
        if (!o->used) {
            continue;
        }
        const int64_t n = opnd_numel(o), words = opnd_words(o);
        val[j] = malloc((size_t) (n ? n : 1) * sizeof(double));
        r->tol[j] = calloc((size_t) (n ? n : 1), sizeof(double));
        r->full[j] = malloc((size_t) words * sizeof(uint32_t));
        if (!val[j] || !r->tol[j] || !r->full[j]) {
            fprintf(stderr, "out of memory\n");
            exit(2);
        }
        memcpy(r->full[j], o->host, (size_t) words * sizeof(uint32_t));
        for (int64_t i = 0; i < n; i++) {
            val[j][i] = (double) opnd_f(o)[i];
        }
    }
    fn(tc, val, r->tol);
    for (int j = 0; j < tc->op.n_dst; j++) {
        if (!val[j]) {
            continue;
        }
        float * f = (float *) (void *) (r->full[j] + GUARD);
        for (int64_t i = 0; i < opnd_numel(&tc->dst[j]); i++) {
            f[i] = (float) val[j][i];
        }
        free(val[j]);
    }
}

static void refb_free(struct refb * r) {
    for (int j = 0; j < NF_OP_MAX_DST; j++) {
        free(r->full[j]);
        free(r->tol[j]);
    }
}

/* ---- backend-specific checks (error paths) ------------------------------------------------- */

static int g_fail;

static void report(const char * be, const char * what, int ok, const char * fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static void report(const char * be, const char * what, int ok, const char * fmt, ...) {
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
static void check_placement(nf_backend * be, nf_backend * cpu) {
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

/* ACT's GELU / ReLU must be bit-identical to LINEAR's epilogue on the same
 * backend: LINEAR through an identity weight (its t is x exactly) against ACT */
static void check_act_linear(nf_backend * be) {
    enum { M = 5, N = 37 };
    static float x[M * N], W[N * N], y1[M * N], y2[M * N];
    g_rng = 0xAC7ULL;
    for (int i = 0; i < M * N; i++) {
        x[i] = rng_unif(-6.0f, 6.0f);
    }
    x[3] = 0.0f; /* (not -0: the identity product gives +0 there) */
    x[4] = 1e-30f;
    for (int i = 0; i < N * N; i++) {
        W[i] = i / N == i % N ? 1.0f : 0.0f;
    }
    static const int acts[2] = {NF_ACT_GELU, NF_ACT_RELU};
    for (int a = 0; a < 2; a++) {
        nf_err err;
        memset(&err, 0, sizeof(err));
        nf_tensor tx, tw, ty1, ty2;
        memset(&tx, 0, sizeof(tx));
        memset(&tw, 0, sizeof(tw));
        memset(&ty1, 0, sizeof(ty1));
        memset(&ty2, 0, sizeof(ty2));
        const int64_t ne_x[2] = {M, N}, ne_w[2] = {N, N};
        int rc = nf__tensor_alloc(be, &tx, NF_F32, 2, ne_x, "x", &err);
        rc = rc ? rc : nf__tensor_alloc(be, &tw, NF_F32, 2, ne_w, "W", &err);
        rc = rc ? rc : nf__tensor_alloc(be, &ty1, NF_F32, 2, ne_x, "y_linear", &err);
        rc = rc ? rc : nf__tensor_alloc(be, &ty2, NF_F32, 2, ne_x, "y_act", &err);
        rc = rc ? rc : nf__tensor_upload(&tx, x, &err);
        rc = rc ? rc : nf__tensor_upload(&tw, W, &err);
        nf_op op;
        memset(&op, 0, sizeof(op));
        op.type = NF_OP_LINEAR;
        op.label = "act-vs-linear";
        op.n_src = 2;
        op.n_dst = 1;
        op.src[0] = tx;
        op.src[1] = tw;
        op.dst[0] = ty1;
        op.p.linear = (struct nf_linear_params){.m = M, .k = N, .n = N, .ldx = N, .ldy = N, .act = acts[a]};
        rc = rc ? rc : nf__op_run(be, &op, &err);
        memset(&op, 0, sizeof(op));
        op.type = NF_OP_ACT;
        op.label = "act-vs-linear";
        op.n_src = 1;
        op.n_dst = 1;
        op.src[0] = tx;
        op.dst[0] = ty2;
        op.p.act = (struct nf_act_params){.n = M * N, .act = acts[a]};
        rc = rc ? rc : nf__op_run(be, &op, &err);
        rc = rc ? rc : nf__tensor_download(&ty1, y1, &err);
        rc = rc ? rc : nf__tensor_download(&ty2, y2, &err);
        report(nf_backend_name(be), "act-vs-linear", rc == NF_OK && memcmp(y1, y2, sizeof(y1)) == 0,
               "%s: ACT %s LINEAR's epilogue bit for bit%s%s", a == 0 ? "gelu" : "relu",
               rc == NF_OK && memcmp(y1, y2, sizeof(y1)) == 0 ? "matches" : "does NOT match", rc ? ": " : "",
               rc ? err.msg : "");
        nf__tensor_free(&tx);
        nf__tensor_free(&tw);
        nf__tensor_free(&ty1);
        nf__tensor_free(&ty2);
    }
}

/* ---- finite-difference checks of the gradient ops (op_desc.fd) ------------------------------ */

int64_t fd_check_grad(fd_loss_fn loss, void * ctx, double * v, int64_t n, const double * grad, double h, double rtol,
                      double atol, struct fd_result * res) {
    memset(res, 0, sizeof(*res));
    for (int64_t i = 0; i < n; i++) {
        const double v0 = v[i], hi = h * (1.0 + fabs(v0));
        v[i] = v0 + hi;
        const double lp = loss(ctx, v);
        v[i] = v0 - hi;
        const double lm = loss(ctx, v);
        v[i] = v0;
        const double num = (lp - lm) / (2.0 * hi);
        const double bound = atol + rtol * (fabs(num) + fabs(grad[i]));
        const double ratio = fabs(num - grad[i]) / bound;
        if (!(ratio <= 1.0)) {
            res->n_bad++;
        }
        if (!(ratio <= res->max_ratio)) {
            res->max_ratio = ratio;
            res->worst = i;
            res->worst_num = num;
            res->worst_grad = grad[i];
        }
    }
    return res->n_bad;
}

/* every case of every descriptor with an fd check, once (backend-free) */
static void run_fd_checks(const char * const * only_ops, int n_only, int * n_cases, int * n_ok) {
    for (int oi = 0; oi < N_OPS; oi++) {
        const char * opname = nf__op_name(g_ops[oi].type);
        int want = !n_only;
        for (int k = 0; k < n_only; k++) {
            want |= strcmp(only_ops[k], opname) == 0;
        }
        if (!g_ops[oi].fd || !want) {
            continue;
        }
        for (int v = 0; v < g_ops[oi].n; v++) {
            struct tcase tc;
            g_rng = 0x5EED0000ULL + (uint64_t) oi * 1000u + (uint64_t) v;
            g_ops[oi].fn(&tc, v);
            char msg[256] = "";
            const int rc = g_ops[oi].fd(&tc, msg, sizeof(msg));
            if (rc >= 0) {
                (*n_cases)++;
                *n_ok += rc == 1;
                report("fd", opname, rc == 1, "%s  %s", tc.desc, msg);
            }
            tcase_free(&tc);
        }
    }
}

#ifdef NF_HAVE_OPENCL
static void check_opencl_errors(void) {
    nf_err err;
    nf_backend * be = NULL;
    memset(&err, 0, sizeof(err));
    int rc = nf_backend_init("opencl:99", NF_PRECISION_EXACT, &be, &err);
    report("opencl", "no-such-device", rc == NF_ERR_DEVICE && !be && strstr(err.msg, "opencl:99") != NULL, "%s: %s",
           nf_result_name(rc), err.msg);
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
    static const char * const broken[] = {"opencl.test_break_build=1", NULL};
    const struct nf_backend_opts bo = {.precision = NF_PRECISION_EXACT, .options = broken};
    memset(&err, 0, sizeof(err));
    rc = nf_backend_init_opts("opencl:0", &bo, &be, &err);
    const char * nl = strchr(err.msg, '\n');
    report("opencl", "build-failure",
           rc == NF_ERR_DEVICE && !be && strstr(err.msg, "kernel build failed") != NULL && nl != NULL && nl[1] != '\0',
           "%s: %.*s (+ build log, %zu chars)", nf_result_name(rc), nl ? (int) (nl - err.msg) : (int) strlen(err.msg),
           err.msg, nl ? strlen(nl + 1) : (size_t) 0);
    nf_backend_free(be);
}
#endif

static void test_backend(nf_backend * be, const char * disp, nf_backend * cpu, const char * const * only_ops,
                         int n_only, int verbose, int * n_cases, int * n_ok) {
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
            g_rng = 0x5EED0000ULL + (uint64_t) oi * 1000u + (uint64_t) v; /* same data on every backend */
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
            struct refb rb;
            if (g_ops[oi].refb) {
                refb_make(&rb, &tc, g_ops[oi].refb); /* replaces the cpu results by the float64 reference */
            }
            for (int j = 0; j < tc.op.n_dst; j++) {
                if (tc.dst[j].used) {
                    double * r64 = g_ops[oi].ref64 ? ref64_dst(&tc, g_ops[oi].ref64, j, ref.dst[j]) : NULL;
                    compare_dst(&tc, g_ops[oi].tol, g_ops[oi].refb ? rb.tol[j] : NULL, j,
                                g_ops[oi].refb ? rb.full[j] : ref.dst[j], r64, dev1.dst[j], dev2.dst[j], &c);
                    free(r64);
                }
            }
            if (g_ops[oi].refb) {
                refb_free(&rb);
            }
            /* set B: the finite-difference check of this backend's gradients, on small cases */
            int64_t fd_bad = -1;
            double fd_worst = 0.0;
            if (g_ops[oi].fd_dev) {
                const float * views[NF_OP_MAX_DST] = {NULL};
                for (int j = 0; j < tc.op.n_dst; j++) {
                    views[j] = dev1.dst[j] ? (const float *) (const void *) (dev1.dst[j] + GUARD) : NULL;
                }
                fd_bad = g_ops[oi].fd_dev(&tc, views, &fd_worst);
            }
            const int ok = c.n_bad == 0 && c.n_guard == 0 && c.n_nondet == 0 && !dev1.src_clobbered &&
                           !ref.src_clobbered && fd_bad <= 0;
            char extra[256] = "", fdmsg[64] = "";
            if (fd_bad >= 0) {
                snprintf(fdmsg, sizeof(fdmsg), " fd: bad=%lld err/tol=%.3g", (long long) fd_bad, fd_worst);
            }
            if (c.n_bad && (verbose || !ok)) {
                snprintf(extra, sizeof(extra), " first bad: dst%d[%lld] ref=%.9g dev=%.9g", c.worst_dst,
                         (long long) c.worst_i, (double) c.worst_ref, (double) c.worst_dev);
            }
            report(disp, opname, ok, "%s  max_abs=%.3g max_rel=%.3g err/tol=%.3g bad=%lld guard=%lld nondet=%lld%s%s%s",
                   tc.desc, c.max_abs, c.max_rel, c.max_ratio, (long long) c.n_bad, (long long) c.n_guard,
                   (long long) c.n_nondet, fdmsg, dev1.src_clobbered || ref.src_clobbered ? " SRC-CLOBBERED" : "",
                   extra);
            *n_ok += ok;
            run_out_free(&ref);
            run_out_free(&dev1);
            run_out_free(&dev2);
            tcase_free(&tc);
        }
    }
}

/* ---- main ------------------------------------------------------------------------------------- */

static int absent_reason(const char * msg) {
    static const char * const pats[] = {
        "not compiled",   "no such device",    "no OpenCL platform",          "no OpenCL device",
        "no CUDA device", "cudaErrorNoDevice", "cudaErrorInsufficientDriver",
    };
    for (size_t i = 0; i < sizeof(pats) / sizeof(pats[0]); i++) {
        if (strstr(msg, pats[i])) {
            return 1;
        }
    }
    return 0;
}

int main(int argc, char ** argv) {
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
            have |= g_ops[oi].type == (enum nf_op_type) t;
        }
        if (!have) {
            report("-", nf__op_name((enum nf_op_type) t), 0, "no test descriptor in test-backend-ops.c");
        }
    }

    int n_cases = 0, n_ok = 0, n_tested_devs = 0;
    run_fd_checks(only_ops, n_only, &n_cases, &n_ok);
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
         * CPU and a GPU tile geometry): test the ops on the GEMM (LINEAR, CONV1D,
         * GEMM) on the other ones too */
        if (strcmp(nf_backend_kind(be), "opencl") == 0) {
            static const struct {
                const char *tag, *gemm, *geo;
            } alt[] = {
                {"own", "own", NULL},
                {"own-gpu", "own", "64 64 16 16 16 0"},
                {"own-cpu", "own", "64 64 16 16 8 1"},
            };
            static const char * const gemm_ops[] = {"LINEAR", "CONV1D", "GEMM"};
            const char * alt_ops[3];
            int n_alt = 0;
            for (int g = 0; g < 3; g++) {
                int w = !n_only;
                for (int k = 0; k < n_only; k++) {
                    w |= strcmp(only_ops[k], gemm_ops[g]) == 0;
                }
                if (w) {
                    alt_ops[n_alt++] = gemm_ops[g];
                }
            }
            const int want = n_alt > 0;
            for (size_t a = 0; want && a < sizeof(alt) / sizeof(alt[0]); a++) {
                nf_backend * ob = NULL;
                char kv_gemm[64], kv_geo[96];
                snprintf(kv_gemm, sizeof(kv_gemm), "opencl.gemm=%s", alt[a].gemm);
                snprintf(kv_geo, sizeof(kv_geo), "opencl.gemm_geometry=%s", alt[a].geo ? alt[a].geo : "");
                const char * const kvs[] = {kv_gemm, alt[a].geo ? kv_geo : NULL, NULL};
                const struct nf_backend_opts ao = {.precision = NF_PRECISION_EXACT, .options = kvs};
                const int rc = nf_backend_init_opts(devs[di], &ao, &ob, &err);
                char disp[48];
                snprintf(disp, sizeof(disp), "%s/%s", nf_backend_name(be), alt[a].tag);
                if (rc != NF_OK) {
                    report(disp, "init", 0, "%s", err.msg);
                    continue;
                }
                if (!alt[a].geo && !strstr(nf_backend_precision_detail(be), "CLBlast")) {
                    nf_backend_free(ob); /* the main pass already used the built-in GEMM */
                    continue;
                }
                test_backend(ob, disp, cpu, alt_ops, n_alt, verbose, &n_cases, &n_ok);
                nf_backend_free(ob);
            }
        }
#endif
        if (!n_only) {
            check_act_linear(be);
        }
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
