/* backend.c -- device selection, the op dispatcher and its checks.
 *
 * There is no fallback path: nf_backend_init either returns the requested
 * device or an error, and nf__op_run either runs the op on the run's backend
 * or returns an error naming the op and the device. */
#include "nf-impl.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

nf_backend * nf__backend_new(const struct nf_backend_i * iface, void * ctx, const char * name) {
    nf_backend * be = calloc(1, sizeof(*be));
    if (!be) return NULL;
    be->iface = iface;
    be->ctx   = ctx;
    snprintf(be->name, sizeof(be->name), "%s", name);
    return be;
}

static int nf__parse_index(const char * s, int * idx) {
    if (*s == '\0') { *idx = 0; return 1; }
    if (*s != ':') return 0;
    s++;
    if (*s < '0' || *s > '9') return 0;
    char * end;
    long v = strtol(s, &end, 10);
    if (*end != '\0' || v < 0 || v > 1024) return 0;
    *idx = (int) v;
    return 1;
}

int nf_backend_init(const char * device, int precision, nf_backend ** out, nf_err * err) {
    *out = NULL;
    if (!device) return nf__err_set(err, NF_ERR_ARG, "no device given");
    if (precision != NF_PRECISION_EXACT && precision != NF_PRECISION_TF32) {
        return nf__err_set(err, NF_ERR_ARG, "unknown precision mode %d", precision);
    }
    int idx = 0;
    if (strncmp(device, "cpu", 3) == 0 && nf__parse_index(device + 3, &idx) && idx == 0) {
        return nf__backend_cpu_init(precision, out, err);
    }
    if (strncmp(device, "opencl", 6) == 0 && nf__parse_index(device + 6, &idx)) {
        return nf__backend_opencl_init(idx, precision, out, err);
    }
    if (strncmp(device, "cuda", 4) == 0 && nf__parse_index(device + 4, &idx)) {
        return nf__backend_cuda_init(idx, precision, out, err);
    }
    return nf__err_set(err, NF_ERR_DEVICE,
                       "unknown device '%s' (expected cpu, opencl[:N] or cuda[:N])", device);
}

void nf_backend_free(nf_backend * be) {
    if (!be) return;
    free(be->ops);
    free(be->xfers);
    if (be->iface && be->iface->free) be->iface->free(be);
    free(be);
}

const char * nf_backend_name(const nf_backend * be)        { return be->name; }
const char * nf_backend_kind(const nf_backend * be)        { return be->iface->kind; }
const char * nf_backend_description(const nf_backend * be) { return be->desc; }
int          nf_backend_precision(const nf_backend * be)   { return be->precision; }
const char * nf_backend_precision_detail(const nf_backend * be) { return be->precision_detail; }
const char * nf_backend_warning(const nf_backend * be) { return be->warning; }

int nf_backend_sync(nf_backend * be, nf_err * err) {
    return be->iface->sync ? be->iface->sync(be, err) : NF_OK;
}

void nf_devices_print(FILE * f) {
    nf_backend * cpu = NULL;
    nf_err err = {0};
    if (nf__backend_cpu_init(NF_PRECISION_EXACT, &cpu, &err) == NF_OK) {
        fprintf(f, "cpu: compiled in\n  cpu  %s\n", cpu->desc);
        if (cpu->warning[0]) fprintf(f, "  cpu  warning: %s\n", cpu->warning);
        nf_backend_free(cpu);
    } else {
        fprintf(f, "cpu: compiled in, failed: %s\n", err.msg);
    }
    nf__backend_opencl_list(f);
    nf__backend_cuda_list(f);
}

#ifndef NF_HAVE_OPENCL
int nf__backend_opencl_init(int index, int precision, nf_backend ** out, nf_err * err) {
    *out = NULL;
    return nf__err_set(err, NF_ERR_DEVICE, "opencl:%d: the opencl backend is not compiled into this build", index);
}
void nf__backend_opencl_list(FILE * f) { fprintf(f, "opencl: not compiled in\n"); }
#endif
#ifndef NF_HAVE_CUDA
int nf__backend_cuda_init(int index, int precision, nf_backend ** out, nf_err * err) {
    *out = NULL;
    return nf__err_set(err, NF_ERR_DEVICE, "cuda:%d: the cuda backend is not compiled into this build", index);
}
void nf__backend_cuda_list(FILE * f) { fprintf(f, "cuda: not compiled in\n"); }
#endif

/* ---- ops --------------------------------------------------------------------- */

static const char * const nf__op_names[NF_OP_COUNT] = {
    [NF_OP_QUANTILE]        = "QUANTILE",
    [NF_OP_BUCKETIZE_NORM]  = "BUCKETIZE_NORM",
    [NF_OP_EMBED_FEATURES]  = "EMBED_FEATURES",
    [NF_OP_LABEL_TOKENS]    = "LABEL_TOKENS",
    [NF_OP_LAYER_NORM]      = "LAYER_NORM",
    [NF_OP_LINEAR]          = "LINEAR",
    [NF_OP_ATTENTION]       = "ATTENTION",
};
_Static_assert(NF_OP_COUNT == 7, "update nf__op_names, nf__op_flops and nf__op_validate");

const char * nf__op_name(enum nf_op_type t) {
    return (t >= 0 && t < NF_OP_COUNT) ? nf__op_names[t] : "UNKNOWN";
}

double nf__op_flops(const nf_op * op) {
    const struct nf_op_params * p = &op->p;
    switch (op->type) {
        case NF_OP_LINEAR:
            return 2.0 * (double) p->m * (double) p->n * (double) p->k;
        case NF_OP_ATTENTION:
            return 4.0 * (double) p->n_groups * (double) p->n_heads * (double) p->lq * (double) p->lk * (double) p->head_dim;
        case NF_OP_LAYER_NORM:
            return 8.0 * (double) p->m * (double) p->k;
        default:
            return 0.0;
    }
}

static int64_t nf__extent(int64_t rows, int64_t ld, int64_t width) {
    return rows <= 0 ? 0 : (rows - 1) * ld + width;
}

#define NF__OPERR(code, ...) nf__op_err(err, op, be, code, __VA_ARGS__)
static int nf__op_err(nf_err * err, const nf_op * op, const nf_backend * be, int code, const char * fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;
static int nf__op_err(nf_err * err, const nf_op * op, const nf_backend * be, int code, const char * fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return nf__err_set(err, code, "op %s (%s) on %s: %s", nf__op_name(op->type),
                       op->label ? op->label : "-", be->name, msg);
}

static int nf__check_extent(nf_err * err, const nf_op * op, const nf_backend * be,
                            const nf_tensor * t, const char * role, int64_t need) {
    int64_t have = nf__tensor_numel(t);
    if (need > have) {
        return NF__OPERR(NF_ERR_SHAPE, "%s '%s' has %lld elements, the op reads/writes %lld",
                         role, t->name ? t->name : "?", (long long) have, (long long) need);
    }
    return NF_OK;
}

static int nf__shape_is(const nf_tensor * t, int ndim, int64_t a, int64_t b, int64_t c) {
    if (t->ndim != ndim) return 0;
    if (ndim >= 1 && t->ne[0] != a) return 0;
    if (ndim >= 2 && t->ne[1] != b) return 0;
    if (ndim >= 3 && t->ne[2] != c) return 0;
    return 1;
}

/* Shapes, dtypes and strided extents of one op. */
static int nf__op_validate(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_op_params * p = &op->p;
    const nf_tensor * s = op->src;
    const nf_tensor * d = op->dst;
    switch (op->type) {
        case NF_OP_QUANTILE: {
            if (op->n_src != 1 || op->n_dst != 1 || s[0].ndim != 2) return NF__OPERR(NF_ERR_ARG, "expects x (n, F) -> B (F, nq)");
            if (p->nq < 1 || p->q_denom < 1) return NF__OPERR(NF_ERR_ARG, "bad quantile count");
            if (s[0].ne[0] < 1) return NF__OPERR(NF_ERR_SHAPE, "quantile of an empty column");
            if (!nf__shape_is(&d[0], 2, s[0].ne[1], p->nq, 0)) return NF__OPERR(NF_ERR_SHAPE, "B must be (F, nq)");
            return NF_OK;
        }
        case NF_OP_BUCKETIZE_NORM: {
            if (op->n_src != 3 || op->n_dst != 2) return NF__OPERR(NF_ERR_ARG, "expects xs, xq, B -> zs, zq");
            int64_t F = s[0].ne[1];
            if (s[0].ndim != 2 || s[0].ne[0] < 1) return NF__OPERR(NF_ERR_SHAPE, "xs must be (n_s>=1, F)");
            if (s[1].ndim != 2 || s[1].ne[1] != F) return NF__OPERR(NF_ERR_SHAPE, "xq must be (n_q, F)");
            if (s[2].ndim != 2 || s[2].ne[0] != F) return NF__OPERR(NF_ERR_SHAPE, "B must be (F, nb)");
            if (!nf__shape_is(&d[0], 2, s[0].ne[0], F, 0) || !nf__shape_is(&d[1], 2, s[1].ne[0], F, 0)) {
                return NF__OPERR(NF_ERR_SHAPE, "zs/zq must match xs/xq");
            }
            return NF_OK;
        }
        case NF_OP_EMBED_FEATURES: {
            if (op->n_src != 3 || op->n_dst != 1) return NF__OPERR(NF_ERR_ARG, "expects z, w, b -> tok");
            int64_t n = s[0].ne[0], F = s[0].ne[1], D = d[0].ne[2];
            if (s[0].ndim != 2 || !nf__shape_is(&d[0], 3, n, F + 1, D)) return NF__OPERR(NF_ERR_SHAPE, "tok must be (n, F+1, D)");
            NF_TRY(nf__check_extent(err, op, be, &s[1], "w", D));
            NF_TRY(nf__check_extent(err, op, be, &s[2], "b", D));
            return NF_OK;
        }
        case NF_OP_LABEL_TOKENS: {
            if (op->n_dst != 1 || d[0].ndim != 3) return NF__OPERR(NF_ERR_ARG, "expects tok (n, T, D)");
            int64_t n = d[0].ne[0], D = d[0].ne[2];
            if (p->mode == NF_LABEL_CLASS) {
                if (op->n_src != 2 || s[0].type != NF_I32) return NF__OPERR(NF_ERR_ARG, "class mode expects y (i32), E");
                NF_TRY(nf__check_extent(err, op, be, &s[0], "y", n));
                if (s[1].ndim != 2 || s[1].ne[1] != D) return NF__OPERR(NF_ERR_SHAPE, "E must be (C, D)");
            } else if (p->mode == NF_LABEL_VALUE) {
                if (op->n_src != 3 || s[0].type != NF_F32) return NF__OPERR(NF_ERR_ARG, "value mode expects y (f32), w, b");
                NF_TRY(nf__check_extent(err, op, be, &s[0], "y", n));
                NF_TRY(nf__check_extent(err, op, be, &s[1], "w", D));
                NF_TRY(nf__check_extent(err, op, be, &s[2], "b", D));
            } else if (p->mode == NF_LABEL_MASK) {
                if (op->n_src != 2) return NF__OPERR(NF_ERR_ARG, "mask mode expects (unused), M");
                NF_TRY(nf__check_extent(err, op, be, &s[1], "M", D));
            } else {
                return NF__OPERR(NF_ERR_ARG, "unknown label mode %d", p->mode);
            }
            return NF_OK;
        }
        case NF_OP_LAYER_NORM: {
            if (op->n_src != 3 || op->n_dst != 1) return NF__OPERR(NF_ERR_ARG, "expects x, g, b -> y");
            if (p->k < 1 || p->ldx < p->k || p->ldy < p->k) return NF__OPERR(NF_ERR_ARG, "bad k/ldx/ldy");
            NF_TRY(nf__check_extent(err, op, be, &s[0], "x", nf__extent(p->m, p->ldx, p->k)));
            NF_TRY(nf__check_extent(err, op, be, &s[1], "g", p->k));
            NF_TRY(nf__check_extent(err, op, be, &s[2], "b", p->k));
            NF_TRY(nf__check_extent(err, op, be, &d[0], "y", nf__extent(p->m, p->ldy, p->k)));
            return NF_OK;
        }
        case NF_OP_LINEAR: {
            if ((op->n_src != 2 && op->n_src != 3) || op->n_dst != 1) return NF__OPERR(NF_ERR_ARG, "expects x, W[, bias] -> y");
            if (p->k < 1 || p->n < 1 || p->ldx < p->k || p->ldy < p->n) return NF__OPERR(NF_ERR_ARG, "bad k/n/ldx/ldy");
            if (s[1].ndim != 2 || s[1].ne[0] != p->n || s[1].ne[1] != p->k) {
                return NF__OPERR(NF_ERR_SHAPE, "W '%s' must be (%lld, %lld)", s[1].name ? s[1].name : "?",
                                 (long long) p->n, (long long) p->k);
            }
            NF_TRY(nf__check_extent(err, op, be, &s[0], "x", nf__extent(p->m, p->ldx, p->k)));
            if (op->n_src == 3) NF_TRY(nf__check_extent(err, op, be, &s[2], "bias", p->n));
            NF_TRY(nf__check_extent(err, op, be, &d[0], "y", nf__extent(p->m, p->ldy, p->n)));
            return NF_OK;
        }
        case NF_OP_ATTENTION: {
            if (op->n_src != 3 || op->n_dst != 1) return NF__OPERR(NF_ERR_ARG, "expects q, k, v -> o");
            if (p->n_heads < 1 || p->head_dim < 1 || p->lk < 1) return NF__OPERR(NF_ERR_ARG, "bad heads/head_dim/lk");
            int64_t w = p->n_heads * p->head_dim;
            int64_t qe = p->n_groups <= 0 || p->lq <= 0 ? 0 : (p->n_groups - 1) * p->q_gs + (p->lq - 1) * p->q_ss + w;
            int64_t ke = p->n_groups <= 0 ? 0 : (p->n_groups - 1) * p->kv_gs + (p->lk - 1) * p->kv_ss + w;
            int64_t oe = p->n_groups <= 0 || p->lq <= 0 ? 0 : (p->n_groups - 1) * p->o_gs + (p->lq - 1) * p->o_ss + w;
            NF_TRY(nf__check_extent(err, op, be, &s[0], "q", qe));
            NF_TRY(nf__check_extent(err, op, be, &s[1], "k", ke));
            NF_TRY(nf__check_extent(err, op, be, &s[2], "v", ke));
            NF_TRY(nf__check_extent(err, op, be, &d[0], "o", oe));
            return NF_OK;
        }
        case NF_OP_COUNT:
            break;
    }
    return NF__OPERR(NF_ERR_UNSUPPORTED, "unknown op type %d", (int) op->type);
}

int nf__op_check(nf_backend * be, const nf_op * op, nf_err * err) {
    if (op->type < 0 || op->type >= NF_OP_COUNT) return NF__OPERR(NF_ERR_UNSUPPORTED, "unknown op type %d", (int) op->type);
    if (op->n_src > NF_OP_MAX_SRC || op->n_dst > NF_OP_MAX_DST) return NF__OPERR(NF_ERR_ARG, "too many operands");
    /* placement: every operand must live on the run's device */
    for (int i = 0; i < op->n_src + op->n_dst; i++) {
        const nf_tensor * t = i < op->n_src ? &op->src[i] : &op->dst[i - op->n_src];
        const char * role = i < op->n_src ? "src" : "dst";
        int ri = i < op->n_src ? i : i - op->n_src;
        if (!t->buf) {
            /* LABEL_TOKENS mask mode leaves src[0] unused */
            if (op->type == NF_OP_LABEL_TOKENS && op->p.mode == NF_LABEL_MASK && i == 0) continue;
            return NF__OPERR(NF_ERR_ARG, "%s[%d] has no buffer", role, ri);
        }
        if (t->buf->be != be) {
            return NF__OPERR(NF_ERR_PLACEMENT,
                             "%s[%d] '%s' lives on %s, not on %s; nofall never copies operands implicitly",
                             role, ri, t->name ? t->name : "?", t->buf->be->name, be->name);
        }
        if (t->offs + nf__tensor_nbytes(t) > t->buf->size) {
            return NF__OPERR(NF_ERR_SHAPE, "%s[%d] '%s' extends past the end of its buffer", role, ri, t->name ? t->name : "?");
        }
        if (op->type != NF_OP_LABEL_TOKENS && t->type != NF_F32) {
            return NF__OPERR(NF_ERR_ARG, "%s[%d] '%s' must be f32", role, ri, t->name ? t->name : "?");
        }
    }
    NF_TRY(nf__op_validate(be, op, err));
    if (!be->iface->supports_op || !be->iface->supports_op(be, op)) {
        return NF__OPERR(NF_ERR_UNSUPPORTED,
                         "not supported by the %s backend; nofall does not fall back to another device",
                         be->iface->kind);
    }
    return NF_OK;
}

static double nf__now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec * 1e-6;
}

static void nf__trace_op(nf_backend * be, const nf_op * op, double ms) {
    if (be->n_ops == be->cap_ops) {
        int64_t cap = be->cap_ops ? be->cap_ops * 2 : 256;
        struct nf_trace_op * r = realloc(be->ops, (size_t) cap * sizeof(*r));
        if (!r) { be->totals.ops++; return; }   /* totals stay exact even if records can't grow */
        be->ops = r;
        be->cap_ops = cap;
    }
    struct nf_trace_op * r = &be->ops[be->n_ops++];
    memset(r, 0, sizeof(*r));
    r->type = op->type;
    snprintf(r->label, sizeof(r->label), "%s", op->label ? op->label : "");
    /* the executing backend, and where its operands were measured to live */
    snprintf(r->device, sizeof(r->device), "%s", be->name);
    snprintf(r->where, sizeof(r->where), "%s", be->name);
    for (int i = 0; i < op->n_src + op->n_dst; i++) {
        const nf_tensor * t = i < op->n_src ? &op->src[i] : &op->dst[i - op->n_src];
        if (t->buf && strcmp(t->buf->where, be->name) != 0) {
            snprintf(r->where, sizeof(r->where), "%s", t->buf->where);
            break;
        }
    }
    int off = 0;
    for (int i = 0; i < op->n_src + op->n_dst && off < (int) sizeof(r->shapes) - 24; i++) {
        const nf_tensor * t = i < op->n_src ? &op->src[i] : &op->dst[i - op->n_src];
        if (i == op->n_src) off += snprintf(r->shapes + off, sizeof(r->shapes) - off, "->");
        else if (i) off += snprintf(r->shapes + off, sizeof(r->shapes) - off, ",");
        if (!t->buf) { off += snprintf(r->shapes + off, sizeof(r->shapes) - off, "_"); continue; }
        for (int dd = 0; dd < t->ndim && off < (int) sizeof(r->shapes) - 12; dd++) {
            off += snprintf(r->shapes + off, sizeof(r->shapes) - off, dd ? "x%lld" : "%lld", (long long) t->ne[dd]);
        }
    }
    r->ms = ms;
    r->flops = nf__op_flops(op);
    be->totals.ops++;
    be->totals.flops += r->flops;
    if (ms > 0) be->totals.op_ms += ms;
    if (strcmp(r->where, be->name) != 0) be->totals.ops_off_device++;
}

int nf__op_run(nf_backend * be, const nf_op * op, nf_err * err) {
    NF_TRY(nf__op_check(be, op, err));
    double t0 = 0;
    if (be->trace_timed) {
        NF_TRY(nf_backend_sync(be, err));
        t0 = nf__now_ms();
    }
    int rc = be->iface->compute(be, op, err);
    if (rc != NF_OK) return rc;
    double ms = -1.0;
    if (be->trace_timed) {
        NF_TRY(nf_backend_sync(be, err));
        ms = nf__now_ms() - t0;
    }
    nf__trace_op(be, op, ms);
    return NF_OK;
}
