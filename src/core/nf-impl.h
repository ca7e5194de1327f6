/*
 * nf-impl.h -- private core of libnofall: tensors, ops, the backend vtable.
 *
 * Every backend (cpu, opencl, cuda, and test backends) is one
 * `struct nf_backend_i` and implements the ops below with exactly the
 * semantics written here. tests/test-backend-ops.c checks every op of every
 * available backend against the cpu backend.
 *
 * Conventions: all float tensors are f32, row-major. Strides and offsets in
 * op params are in ELEMENTS. A tensor is a value (a view): buffer + byte
 * offset + shape. Its device is its buffer's backend.
 */
#ifndef NF_IMPL_H
#define NF_IMPL_H

#include "nofall.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

/* ---- errors -------------------------------------------------------------- */
/* Set err (may be NULL) and return code. printf-style message. */
int nf__err_set(nf_err * err, int code, const char * fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Prefix an existing message with context: "<ctx>: <old message>". */
int nf__err_prefix(nf_err * err, const char * fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Deterministic PRNG (splitmix64) for synthetic weights and tables: integer
 * arithmetic only, so the same seed gives the same bytes everywhere. */
static inline uint64_t nf__rng_next(uint64_t * s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
/* uniform in [0, 1) with 24 random bits: exact in float */
static inline float nf__rng_unif(uint64_t * s) {
    return (float) (nf__rng_next(s) >> 40) * (1.0f / 16777216.0f);
}

#define NF_TRY(expr) do { int nf__rc = (expr); if (nf__rc != NF_OK) return nf__rc; } while (0)

/* ---- tensors --------------------------------------------------------------- */
enum nf_dtype { NF_F32 = 0, NF_I32 = 1 };
size_t nf__dtype_size(enum nf_dtype t);

#define NF_MAX_DIMS 4

struct nf_buffer {
    nf_backend * be;       /* the device that owns this memory            */
    void       * handle;   /* host pointer / cl_mem / CUDA device pointer */
    size_t       size;     /* bytes                                       */
    char         where[32];/* where the memory lives, asked of the driver at
                              allocation ("cpu", "cuda:0", ...)            */
};

typedef struct nf_tensor {
    struct nf_buffer * buf;
    size_t        offs;            /* byte offset into buf                   */
    enum nf_dtype type;
    int           ndim;
    int64_t       ne[NF_MAX_DIMS]; /* ne[0] is the OUTERMOST dim (numpy order) */
    const char  * name;            /* for messages; may be NULL              */
} nf_tensor;

int64_t nf__tensor_numel(const nf_tensor * t);
size_t  nf__tensor_nbytes(const nf_tensor * t);
/* Allocate a new buffer on be holding one tensor of the given shape. */
int  nf__tensor_alloc(nf_backend * be, nf_tensor * t, enum nf_dtype type, int ndim,
                      const int64_t * ne, const char * name, nf_err * err);
void nf__tensor_free(nf_tensor * t);   /* frees t->buf (owner only) */
/* A view of t's buffer starting `elem_offs` elements after t's start. */
nf_tensor nf__tensor_view(const nf_tensor * t, int64_t elem_offs, int ndim, const int64_t * ne);
/* Boundary transfers (recorded in the trace). */
int nf__tensor_upload(nf_tensor * t, const void * src, nf_err * err);
int nf__tensor_download(const nf_tensor * t, void * dst, nf_err * err);

/* ---- ops ------------------------------------------------------------------- */
enum nf_op_type {
    /* QUANTILE: torch.quantile(x, q, dim=0, interpolation='linear') per column.
     *   src[0] x (n, F) f32 contiguous;  dst[0] B (F, nq) f32.
     *   q_k = (float)k / (float)p.q_denom for k = 1..nq (float32 divide).
     *   Column j: v = ascending sort of x[:, j] (NaN sorts last);
     *   if any NaN in the column every boundary is NaN; else
     *   pos = q_k * (float)(n-1); lo = (int64)pos; w = pos - (float)lo;
     *   hi = (int64)ceilf(pos); a = v[lo]; b = v[hi];
     *   B[j][k-1] = |w| < 0.5 ? fmaf(w, b-a, a) : fmaf(w-1, b-a, b).        */
    NF_OP_QUANTILE = 0,
    /* BUCKETIZE_NORM: Mitra's quantile embedding statistics.
     *   src[0] xs (n_s, F), src[1] xq (n_q, F) (n_q may be 0: then src[1] and
     *   dst[1] are unused), src[2] B (F, nb);  dst[0] zs (n_s, F), dst[1] zq.
     *   idx(x) = #{k : B[j][k] < x}  (lower_bound; NaN x -> nb), as float.
     *   u = idx / (float)n_s;  mean = (float)(sum_s u) / (float)n_s;
     *   u -= mean;  var = (float)(sum_s u*u) / (float)n_s;
     *   z = var == 0 ? 0 : u / sqrtf(var).   Sums may be taken in double.  */
    NF_OP_BUCKETIZE_NORM,
    /* EMBED_FEATURES: dst[0] tok (n, T, D) with T = F + 1:
     *   tok[r][1+j][:] = z[r][j] * w[:] + b[:]  for j < F; token 0 untouched.
     *   src[0] z (n, F), src[1] w (D) (the [D,1] weight), src[2] b (D).     */
    NF_OP_EMBED_FEATURES,
    /* LABEL_TOKENS: writes token 0 of every row of dst[0] tok (n, T, D).
     *   p.mode == NF_LABEL_CLASS:  src[0] y (n) i32, src[1] E (C, D):  tok[r][0] = E[y[r]]
     *   p.mode == NF_LABEL_VALUE:  src[0] y (n) f32, src[1] w (D), src[2] b (D):
     *                              tok[r][0] = y[r] * w + b
     *   p.mode == NF_LABEL_MASK:   src[1] M (1, D): tok[r][0] = M[0]  (src[0] unused) */
    NF_OP_LABEL_TOKENS,
    /* LAYER_NORM: for r < p.m rows:  x = src[0] + r*p.ldx (p.k elements),
     *   mu = mean(x), var = mean((x-mu)^2) (biased, two-pass),
     *   rstd = 1.0f / sqrtf(var + p.eps);
     *   dst[0][r*p.ldy + c] = (x[c]-mu) * rstd * g[c] + b[c].
     *   src[1] g (k), src[2] b (k).                                          */
    NF_OP_LAYER_NORM,
    /* LINEAR: y = act(x · Wᵀ + bias), optionally accumulated into dst.
     *   src[0] x: row r at offset r*p.ldx, p.k elements;  src[1] W (p.n, p.k);
     *   src[2] bias (p.n) or absent (n_src == 2);  dst[0] y: row r at r*p.ldy.
     *   t = sum_c x[r][c]*W[o][c] + bias[o];  t = p.act == NF_ACT_GELU ?
     *   0.5f*t*(1.0f+erf(t*0.70710678f)) : t (a float constant; erf exact to float
     *   rounding: libm erff, OpenCL erf, CUDA erff, the cpu's own series);
     *   y[r][o] = p.accumulate ? y[r][o] + t : t. */
    NF_OP_LINEAR,
    /* ATTENTION: softmax(scale · q kᵀ) v, per group g and head h.
     *   q row i of group g, head h: src[0] + g*p.q_gs + i*p.q_ss + h*p.head_dim
     *   k row j: src[1] + g*p.kv_gs + j*p.kv_ss + h*p.head_dim, v likewise in src[2]
     *   o row i: dst[0] + g*p.o_gs + i*p.o_ss + h*p.head_dim
     *   for g < p.n_groups, i < p.lq, j < p.lk, h < p.n_heads, e < p.head_dim.
     *   No mask. Softmax with max subtraction, expf exact.                   */
    NF_OP_ATTENTION,
    NF_OP_COUNT
};

enum nf_label_mode { NF_LABEL_CLASS = 0, NF_LABEL_VALUE = 1, NF_LABEL_MASK = 2 };
enum nf_act        { NF_ACT_NONE = 0, NF_ACT_GELU = 1 };

struct nf_op_params {
    /* QUANTILE */
    int32_t nq, q_denom;
    /* LABEL_TOKENS */
    int32_t mode;
    /* LAYER_NORM / LINEAR */
    int64_t m, k, n, ldx, ldy;
    float   eps;
    int32_t act, accumulate;
    /* ATTENTION */
    int64_t n_groups, lq, lk, n_heads, head_dim;
    int64_t q_gs, q_ss, kv_gs, kv_ss, o_gs, o_ss;
    float   scale;
};

#define NF_OP_MAX_SRC 4
#define NF_OP_MAX_DST 2

typedef struct nf_op {
    enum nf_op_type     type;
    const char        * label;   /* e.g. "layers.3.attention1" for traces */
    int                 n_src, n_dst;
    nf_tensor           src[NF_OP_MAX_SRC];
    nf_tensor           dst[NF_OP_MAX_DST];
    struct nf_op_params p;
} nf_op;

const char * nf__op_name(enum nf_op_type t);   /* "LINEAR", ... */
double       nf__op_flops(const nf_op * op);
/* Validate operand devices, dtypes and that every strided access stays inside
 * each tensor; then ask supports_op; then compute and record the op. */
int nf__op_run(nf_backend * be, const nf_op * op, nf_err * err);
/* Checks only (device, bounds, supports_op): used at plan time. */
int nf__op_check(nf_backend * be, const nf_op * op, nf_err * err);

/* ---- backend vtable -------------------------------------------------------- */
struct nf_backend_i {
    const char * kind;   /* "cpu", "opencl", "cuda" */
    void (*free)(nf_backend * be);
    int  (*buffer_alloc)(nf_backend * be, size_t size, void ** handle, nf_err * err);
    void (*buffer_free)(nf_backend * be, void * handle);
    int  (*upload)(nf_backend * be, void * handle, size_t offs, const void * src, size_t n, nf_err * err);
    int  (*download)(nf_backend * be, void * handle, size_t offs, void * dst, size_t n, nf_err * err);
    /* Where does this buffer's memory live, asked of the driver: writes e.g.
     * "cpu", "cuda:0", "opencl:0" (host memory on a device backend = "cpu"). */
    int  (*buffer_where)(nf_backend * be, void * handle, char * out, size_t n, nf_err * err);
    bool (*supports_op)(nf_backend * be, const nf_op * op);
    int  (*compute)(nf_backend * be, const nf_op * op, nf_err * err);
    int  (*sync)(nf_backend * be, nf_err * err);
};

struct nf_trace_op {
    enum nf_op_type type;
    char     label[48];
    char     device[32];      /* the backend that executed it                 */
    char     where[32];       /* measured location of its operands: the run
                                 device, or the first operand found elsewhere */
    char     shapes[96];
    double   ms;              /* < 0 when untimed */
    double   flops;
};
struct nf_trace_xfer {
    int      h2d;             /* 1 host->device, 0 device->host */
    int64_t  bytes;
    char     what[64];
};

struct nf_backend {
    const struct nf_backend_i * iface;
    void * ctx;                /* backend private state */
    char   name[32];           /* "cpu", "opencl:0", ...  */
    char   desc[256];          /* device description       */
    char   precision_detail[1024]; /* cuda worst case (tf32, override note) is ~520 chars */
    char   warning[256];       /* e.g. the cpu GEMM runs kernels below the CPU's ISA; "" if none */
    int    precision;
    /* tokens a model should process per sub-block chunk on this device
     * (bigger GEMMs, fewer launches on a GPU); 0 = the model's default */
    int64_t chunk_tokens;
    /* trace */
    int    trace_timed;
    struct nf_trace_op   * ops;   int64_t n_ops,   cap_ops;
    struct nf_trace_xfer * xfers; int64_t n_xfers, cap_xfers;
    struct nf_trace_totals totals;
};

/* Record a transfer (called by nf__tensor_upload/download). */
void nf__trace_xfer(nf_backend * be, int h2d, int64_t bytes, const char * what);
/* Count one device allocation (a tensor buffer, or a backend's own scratch). */
void nf__trace_alloc(nf_backend * be, int64_t bytes);

/* Backend constructors. Each returns NF_ERR_DEVICE with a clear message when
 * the device is absent or the backend is not compiled in. */
int nf__backend_cpu_init(int precision, nf_backend ** out, nf_err * err);
int nf__backend_opencl_init(int index, int precision, nf_backend ** out, nf_err * err);
int nf__backend_cuda_init(int index, int precision, nf_backend ** out, nf_err * err);
/* Listing for `nofall devices`. */
void nf__backend_opencl_list(FILE * f);
void nf__backend_cuda_list(FILE * f);

/* Allocate the common part; backends fill iface/ctx/name/desc. */
nf_backend * nf__backend_new(const struct nf_backend_i * iface, void * ctx, const char * name);

/* CPU reference kernels, shared by the cpu backend and by tests. Operate on
 * host pointers with the op's semantics. */
int nf__cpu_compute(const nf_op * op, nf_err * err);
/* the cpu backend's erf (double-precision Chebyshev series, see cpu-kernels.c) */
float nf__erf_f32(float x);

#endif /* NF_IMPL_H */
