/* backend.c -- device selection, the op dispatcher and its checks.
 *
 * There is no fallback path: nf_backend_init either returns the requested
 * device or an error, and nf__op_run either runs the op on the run's backend
 * or returns an error naming the op and the device. */
#include "nf-impl.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NF__OPERR(code, ...) nf__op_err(err, op, be, code, __VA_ARGS__)

nf_backend * nf__backend_new(const struct nf_backend_i * iface, void * ctx, const char * name) {
    nf_backend * be = calloc(1, sizeof(*be));
    if (!be) return NULL;
    be->iface = iface;
    be->ctx = ctx;
    snprintf(be->name, sizeof(be->name), "%s", name);
    return be;
}

static int nf__parse_index(const char * s, int * idx) {
    if (*s == '\0') {
        *idx = 0;
        return 1;
    }
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
    const struct nf_backend_opts opts = {.precision = precision};
    return nf_backend_init_opts(device, &opts, out, err);
}

int nf_backend_init_opts(const char * device, const struct nf_backend_opts * opts, nf_backend ** out, nf_err * err) {
    *out = NULL;
    if (!device) return nf__err_set(err, NF_ERR_ARG, "no device given");
    const struct nf_backend_opts none = {0};
    if (!opts) opts = &none;
    if (opts->precision != NF_PRECISION_EXACT && opts->precision != NF_PRECISION_TF32 &&
        opts->precision != NF_PRECISION_BF16_AUTOCAST) {
        return nf__err_set(err, NF_ERR_ARG, "unknown precision mode %d", opts->precision);
    }
    int idx = 0;
    if (strncmp(device, "cpu", 3) == 0 && nf__parse_index(device + 3, &idx) && idx == 0) {
        static const char * const known[] = {NULL};
        NF_TRY(nf__opts_check(opts, "cpu", known, err));
        return nf__backend_cpu_init(opts, out, err);
    }
    if (strncmp(device, "opencl", 6) == 0 && nf__parse_index(device + 6, &idx)) {
        static const char * const known[] = {"gemm", "gemm_geometry", "test_break_build", NULL};
        NF_TRY(nf__opts_check(opts, "opencl", known, err));
        return nf__backend_opencl_init(idx, opts, out, err);
    }
    if (strncmp(device, "cuda", 4) == 0 && nf__parse_index(device + 4, &idx)) {
        static const char * const known[] = {"attention", "chunk_floats", NULL};
        NF_TRY(nf__opts_check(opts, "cuda", known, err));
        return nf__backend_cuda_init(idx, opts, out, err);
    }
    return nf__err_set(err, NF_ERR_DEVICE, "unknown device '%s' (expected cpu, opencl[:N] or cuda[:N])", device);
}

void * nf__backend_host_scratch(nf_backend * be, size_t bytes) {
    if (bytes > be->host_scratch_bytes) {
        free(be->host_scratch);
        be->host_scratch = malloc(bytes);
        be->host_scratch_bytes = be->host_scratch ? bytes : 0;
        if (be->host_scratch) nf__trace_alloc(be, (int64_t) bytes);
    }
    return be->host_scratch;
}

void nf_backend_free(nf_backend * be) {
    if (!be) return;
    free(be->host_scratch);
    free(be->ops);
    free(be->xfers);
    if (be->iface && be->iface->free) be->iface->free(be);
    free(be);
}

const char * nf_backend_name(const nf_backend * be) { return be->name; }
const char * nf_backend_kind(const nf_backend * be) { return be->iface->kind; }
const char * nf_backend_description(const nf_backend * be) { return be->desc; }
int nf_backend_precision(const nf_backend * be) { return be->precision; }
const char * nf_backend_precision_detail(const nf_backend * be) { return be->precision_detail; }
const char * nf_backend_warning(const nf_backend * be) { return be->warning; }

int nf_backend_sync(nf_backend * be, nf_err * err) { return be->iface->sync ? be->iface->sync(be, err) : NF_OK; }

char * nf_devices_describe(nf_err * err) {
    char * text = NULL;
    size_t len = 0;
    FILE * f = open_memstream(&text, &len);
    if (!f) {
        nf__err_set(err, NF_ERR_NOMEM, "devices: out of memory");
        return NULL;
    }
    nf_backend * cpu = NULL;
    nf_err cerr = {0};
    if (nf__backend_cpu_init(NULL, &cpu, &cerr) == NF_OK) {
        fprintf(f, "cpu: compiled in\n  cpu  %s\n", cpu->desc);
        if (cpu->warning[0]) fprintf(f, "  cpu  warning: %s\n", cpu->warning);
        nf_backend_free(cpu);
        nf_backend * b16 = NULL;
        const struct nf_backend_opts o16 = {.precision = NF_PRECISION_BF16_AUTOCAST};
        if (nf__backend_cpu_init(&o16, &b16, &cerr) == NF_OK)
            fprintf(f, "  cpu  precision modes: exact, bf16-autocast\n");
        else
            fprintf(f, "  cpu  precision modes: exact (%s)\n", cerr.msg);
        nf_backend_free(b16);
    } else {
        fprintf(f, "cpu: compiled in, failed: %s\n", cerr.msg);
    }
    nf__backend_opencl_list(f);
    nf__backend_cuda_list(f);
    if (fclose(f) != 0 || !text) {
        free(text);
        nf__err_set(err, NF_ERR_NOMEM, "devices: out of memory");
        return NULL;
    }
    return text;
}

#ifndef NF_HAVE_OPENCL
int nf__backend_opencl_init(int index, const struct nf_backend_opts * opts, nf_backend ** out, nf_err * err) {
    *out = NULL;
    return nf__err_set(err, NF_ERR_DEVICE, "opencl:%d: the opencl backend is not compiled into this build", index);
}
void nf__backend_opencl_list(FILE * f) { fprintf(f, "opencl: not compiled in\n"); }
#endif
#ifndef NF_HAVE_CUDA
int nf__backend_cuda_init(int index, const struct nf_backend_opts * opts, nf_backend ** out, nf_err * err) {
    *out = NULL;
    return nf__err_set(err, NF_ERR_DEVICE, "cuda:%d: the cuda backend is not compiled into this build", index);
}
void nf__backend_cuda_list(FILE * f) { fprintf(f, "cuda: not compiled in\n"); }
#endif

/* ---- the dispatcher's checks ------------------------------------------------------ */

/* Operand i of a spec string ("x:f W:f bias:f?", see nf-ops.def): its dtype
 * letter and flags. Returns 0 when the spec has fewer operands. */
struct nf__opnd {
    char type;
    int optional, nullable;
};
static int nf__opnd_spec(const char * spec, int i, struct nf__opnd * o) {
    const char * s = spec;
    for (;;) {
        while (*s == ' ') s++;
        if (!*s) return 0;
        const char * colon = s;
        while (*colon && *colon != ':' && *colon != ' ') colon++;
        if (*colon != ':') return 0; /* malformed spec: caught by the tests */
        if (i-- == 0) {
            o->type = colon[1];
            o->optional = o->nullable = 0;
            for (const char * f = colon + 2; *f && *f != ' '; f++) {
                o->optional |= *f == '?';
                o->nullable |= *f == '~';
            }
            return 1;
        }
        while (*s && *s != ' ') s++;
    }
}

/* how many operands a spec allows: [*lo, *hi] */
static void nf__opnd_count(const char * spec, int * lo, int * hi) {
    struct nf__opnd o;
    *lo = *hi = 0;
    while (nf__opnd_spec(spec, *hi, &o)) {
        (*hi)++;
        if (!o.optional) *lo = *hi;
    }
}

int nf__op_check(nf_backend * be, const nf_op * op, nf_err * err) {
    if ((int) op->type < 0 || op->type >= NF_OP_COUNT)
        return NF__OPERR(NF_ERR_UNSUPPORTED, "unknown op type %d", (int) op->type);
    const struct nf_op_info * info = &nf__op_table[op->type];
    int slo, shi, dlo, dhi;
    nf__opnd_count(info->src, &slo, &shi);
    nf__opnd_count(info->dst, &dlo, &dhi);
    if (op->n_src < slo || op->n_src > shi || op->n_dst < dlo || op->n_dst > dhi || op->n_src > NF_OP_MAX_SRC ||
        op->n_dst > NF_OP_MAX_DST) {
        return NF__OPERR(NF_ERR_ARG, "expects operands (%s) -> (%s), got %d src and %d dst", info->src, info->dst,
                         op->n_src, op->n_dst);
    }
    /* placement: every operand must live on the run's device */
    for (int i = 0; i < op->n_src + op->n_dst; i++) {
        const int is_src = i < op->n_src;
        const nf_tensor * t = is_src ? &op->src[i] : &op->dst[i - op->n_src];
        const char * role = is_src ? "src" : "dst";
        int ri = is_src ? i : i - op->n_src;
        struct nf__opnd o = {0};
        nf__opnd_spec(is_src ? info->src : info->dst, ri, &o);
        if (!t->buf) {
            if (o.nullable) continue; /* the validator says whether it may be absent */
            return NF__OPERR(NF_ERR_ARG, "%s[%d] has no buffer", role, ri);
        }
        if (t->buf->be != be) {
            return NF__OPERR(NF_ERR_PLACEMENT,
                             "%s[%d] '%s' lives on %s, not on %s; nofall never copies operands implicitly", role, ri,
                             t->name ? t->name : "?", t->buf->be->name, be->name);
        }
        if (t->offs + nf__tensor_nbytes(t) > t->buf->size) {
            return NF__OPERR(NF_ERR_SHAPE, "%s[%d] '%s' extends past the end of its buffer", role, ri,
                             t->name ? t->name : "?");
        }
        if ((o.type == 'f' && t->type != NF_F32) || (o.type == 'i' && t->type != NF_I32)) {
            return NF__OPERR(NF_ERR_ARG, "%s[%d] '%s' must be %s", role, ri, t->name ? t->name : "?",
                             o.type == 'f' ? "f32" : "i32");
        }
    }
    NF_TRY(info->validate(be, op, err));
    const struct nf_kernel * k = be->iface->kernels ? &be->iface->kernels[op->type] : NULL;
    if (!k || !k->run || (k->supports && !k->supports(be, op))) {
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

int nf__op_run(nf_backend * be, const nf_op * op, nf_err * err) {
    NF_TRY(nf__op_check(be, op, err));
    double t0 = 0;
    if (be->trace_mode == NF_TRACE_TIMED) {
        NF_TRY(nf_backend_sync(be, err));
        t0 = nf__now_ms();
    }
    const struct nf_kernel * k = &be->iface->kernels[op->type];
    int rc = be->iface->launch ? be->iface->launch(be, k, op, err) : k->run(be, op, err);
    if (rc != NF_OK) return rc;
    double ms = -1.0;
    if (be->trace_mode == NF_TRACE_TIMED) {
        NF_TRY(nf_backend_sync(be, err));
        ms = nf__now_ms() - t0;
    }
    nf__trace_op(be, op, ms);
    return NF_OK;
}
