/*
 * nf-impl.h -- private core of libnofall: tensors, ops, the backend vtable.
 *
 * Every backend (cpu, opencl, cuda, and test backends) is one
 * `struct nf_backend_i` and implements the ops of nf-ops.def with exactly the
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
#include "../base/nf-base.h" /* errors (nf__err_set, nf__err_prefix, NF_TRY), the PRNG */

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" { /* cuda-kernels-*.cu implements ops against this header */
#endif

/* ---- tensors --------------------------------------------------------------- */
enum nf_dtype { NF_F32 = 0, NF_I32 = 1 };
size_t nf__dtype_size(enum nf_dtype t);

#define NF_MAX_DIMS 4

struct nf_buffer {
    nf_backend * be; /* the device that owns this memory            */
    void * handle;   /* host pointer / cl_mem / CUDA device pointer */
    size_t size;     /* bytes                                       */
    char where[32];  /* where the memory lives, asked of the driver at
                        allocation ("cpu", "cuda:0", ...)            */
};

typedef struct nf_tensor {
    struct nf_buffer * buf;
    size_t offs; /* byte offset into buf                   */
    enum nf_dtype type;
    int ndim;
    int64_t ne[NF_MAX_DIMS]; /* ne[0] is the OUTERMOST dim (numpy order) */
    const char * name;       /* for messages; may be NULL              */
    bool owner;              /* made by nf__tensor_alloc: frees buf. A view
                                (nf__tensor_view) is never an owner, so
                                freeing a view cannot free its owner's memory */
} nf_tensor;

int64_t nf__tensor_numel(const nf_tensor * t);
size_t nf__tensor_nbytes(const nf_tensor * t);
/* Allocate a new buffer on be holding one tensor of the given shape. */
int nf__tensor_alloc(nf_backend * be, nf_tensor * t, enum nf_dtype type, int ndim, const int64_t * ne,
                     const char * name, nf_err * err);
/* Frees t's buffer if t is its owner; a view (or NULL) is left alone. */
void nf__tensor_free(nf_tensor * t);
/* A view of t's buffer starting `elem_offs` elements after t's start. */
nf_tensor nf__tensor_view(const nf_tensor * t, int64_t elem_offs, int ndim, const int64_t * ne);
/* Boundary transfers (recorded in the trace). */
int nf__tensor_upload(nf_tensor * t, const void * src, nf_err * err);
int nf__tensor_download(const nf_tensor * t, void * dst, nf_err * err);

/* ---- ops ------------------------------------------------------------------- */
/* The ops, their operands, parameters and contracts: src/core/nf-ops.def. */
enum nf_op_type {
#define NF_OP(NAME, name, SRC, DST, PARAMS, validate, flops) NF_OP_##NAME,
#include "nf-ops.def"
    NF_OP_COUNT
};

enum nf_label_mode { NF_LABEL_CLASS = 0, NF_LABEL_VALUE = 1, NF_LABEL_MASK = 2 };
enum nf_act { NF_ACT_NONE = 0, NF_ACT_GELU = 1, NF_ACT_RELU = 2 };

#define NF__UNPAREN(...) __VA_ARGS__
/* struct nf_<name>_params, one per op */
#define NF_OP(NAME, name, SRC, DST, PARAMS, validate, flops) \
    struct nf_##name##_params {                              \
        NF__UNPAREN PARAMS                                   \
    };
#include "nf-ops.def"

union nf_op_params {
#define NF_OP(NAME, name, SRC, DST, PARAMS, validate, flops) struct nf_##name##_params name;
#include "nf-ops.def"
};

#define NF_OP_MAX_SRC 5
#define NF_OP_MAX_DST 4 /* ATTENTION_BACKWARD: dq, dk, dv, stats */

/* CLIP_GRAD_NORM's blocks (nf-ops.def): every backend sums the squares of
 * NF_CLIP_BLOCK consecutive elements in order, in double, then the block
 * sums in block order (kernels-train-c.cl repeats the value) */
#define NF_CLIP_BLOCK 1024

typedef struct nf_op {
    enum nf_op_type type;
    const char * label; /* e.g. "layers.3.attention1" for traces */
    int n_src, n_dst;
    nf_tensor src[NF_OP_MAX_SRC];
    nf_tensor dst[NF_OP_MAX_DST];
    union nf_op_params p; /* p.<name>: the params of op `type` */
} nf_op;

/* One row of the op table (nf-ops.def), indexed by op type. */
struct nf_op_info {
    const char * name;     /* "LINEAR", ...                        */
    const char *src, *dst; /* operand specs, see nf-ops.def         */
    int (*validate)(nf_backend * be, const nf_op * op, nf_err * err);
    double (*flops)(const nf_op * op);
};
extern const struct nf_op_info nf__op_table[NF_OP_COUNT];

const char * nf__op_name(enum nf_op_type t); /* "LINEAR", ... */
double nf__op_flops(const nf_op * op);
/* Validate operand counts, devices, dtypes and that every strided access
 * stays inside each tensor; then ask the backend's kernel table; then compute
 * and record the op. */
int nf__op_run(nf_backend * be, const nf_op * op, nf_err * err);
/* Checks only (counts, device, bounds, kernel support): used at plan time. */
int nf__op_check(nf_backend * be, const nf_op * op, nf_err * err);
/* "op NAME (label) on DEVICE: <fmt>" -- the message form of every op error. */
int nf__op_err(nf_err * err, const nf_op * op, const nf_backend * be, int code, const char * fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

/* ---- kernels ---------------------------------------------------------------- */
/* A backend implements op type t with kernels[t]: `run` computes it (NULL:
 * the backend lacks the op, NF_ERR_UNSUPPORTED at dispatch); `supports`, if
 * not NULL, may refuse an op that validated (e.g. a head_dim over a kernel's
 * limit), with the same error. */
typedef int (*nf_kernel_fn)(nf_backend * be, const nf_op * op, nf_err * err);
typedef bool (*nf_supports_fn)(nf_backend * be, const nf_op * op);
struct nf_kernel {
    nf_kernel_fn run;
    nf_supports_fn supports;
};

/* A backend's kernel table is generated from nf-ops.def, never written row by
 * row. Backend BE names op `name`'s kernel nf__BE_<name> and its limits
 * nf__BE_<name>_supports (cpu: no limits), and defines its table as
 *
 *   #define NF_BE_LACKS_BUCKET_ROUTE NF_KERNEL_LACKS  <- the ops BE lacks: one line
 *                                                        each, all in one place
 *   const struct nf_kernel nf__BE_kernels[NF_OP_COUNT] = {
 *   #define NF_OP(NAME, name, ...) \
 *       [NF_OP_##NAME] = NF_KERNEL_ENTRY(NF_BE_LACKS_##NAME, nf__BE_##name, nf__BE_##name##_supports),
 *   #include "nf-ops.def"
 *   };
 *
 * NF_KERNEL_ENTRY gives {run, supports}, or {NULL, NULL} (NF_ERR_UNSUPPORTED
 * at dispatch) for an op listed as lacking. An op neither implemented nor
 * listed does not compile ('nf__BE_<name>' undeclared) or does not link; the
 * cpu reference lists none. */
#define NF_KERNEL_LACKS                       ~, 1
#define NF_KERNEL_ENTRY(lacks, run, supports) NF__KERNEL_PICK(NF__KERNEL_LACKS(lacks), run, supports)
#define NF__KERNEL_SECOND(a, b, ...)          b
#define NF__KERNEL_LACKS(...)                 NF__KERNEL_SECOND(__VA_ARGS__, 0, ~)
#define NF__KERNEL_CAT(a, b)                  a##b
#define NF__KERNEL_PICK(lacks, run, supports) NF__KERNEL_CAT(NF__KERNEL_ENTRY_, lacks)(run, supports)
#define NF__KERNEL_ENTRY_0(run, supports) \
    { run, supports }
#define NF__KERNEL_ENTRY_1(run, supports) \
    { NULL, NULL }

/* ---- backend vtable -------------------------------------------------------- */
struct nf_backend_i {
    const char * kind; /* "cpu", "opencl", "cuda" */
    void (*free)(nf_backend * be);
    int (*buffer_alloc)(nf_backend * be, size_t size, void ** handle, nf_err * err);
    void (*buffer_free)(nf_backend * be, void * handle);
    int (*upload)(nf_backend * be, void * handle, size_t offs, const void * src, size_t n, nf_err * err);
    int (*download)(nf_backend * be, void * handle, size_t offs, void * dst, size_t n, nf_err * err);
    /* Where does this buffer's memory live, asked of the driver: writes e.g.
     * "cpu", "cuda:0", "opencl:0" (host memory on a device backend = "cpu"). */
    int (*buffer_where)(nf_backend * be, void * handle, char * out, size_t n, nf_err * err);
    /* per-op kernels, indexed by op type (NF_OP_COUNT entries) */
    const struct nf_kernel * kernels;
    /* optional: runs every kernel (per-op device setup, error context);
     * NULL calls k->run directly */
    int (*launch)(nf_backend * be, const struct nf_kernel * k, const nf_op * op, nf_err * err);
    int (*sync)(nf_backend * be, nf_err * err);
};

struct nf_trace_op {
    enum nf_op_type type;
    char label[48];
    char device[32]; /* the backend that executed it                 */
    char where[32];  /* measured location of its operands: the run
                        device, or the first operand found elsewhere */
    char shapes[96];
    double ms; /* < 0 when untimed */
    double flops;
};
struct nf_trace_xfer {
    int h2d; /* 1 host->device, 0 device->host */
    int64_t bytes;
    char what[64];
};

struct nf_backend {
    const struct nf_backend_i * iface;
    void * ctx;                  /* backend private state */
    char name[32];               /* "cpu", "opencl:0", ...  */
    char desc[256];              /* device description       */
    char precision_detail[1024]; /* cuda worst case (tf32, override note) is ~520 chars */
    char warning[256];           /* e.g. the cpu GEMM runs kernels below the CPU's ISA; "" if none */
    int precision;
    /* tokens a model should process per sub-block chunk on this device
     * (bigger GEMMs, fewer launches on a GPU); 0 = the model's default */
    int64_t chunk_tokens;
    /* trace: totals always; records (bounded) only in NF_TRACE_RECORDS mode */
    int trace_mode;
    struct nf_trace_op * ops;
    int64_t n_ops, cap_ops;
    struct nf_trace_xfer * xfers;
    int64_t n_xfers, cap_xfers;
    struct nf_trace_totals totals;
    /* the distinct locations ops' operands were measured at since the last
     * nf__trace_where_reset (a model's forward): what OUTPUT_DEVICE reports */
    char op_where[4][32];
    int n_op_where;
    /* host scratch a kernel may borrow for the duration of one op (the cpu
     * LINEAR's accumulate buffer): owned here, freed with the backend,
     * counted in the trace when it grows */
    void * host_scratch;
    size_t host_scratch_bytes;
};

/* be's host scratch of at least `bytes`, or NULL (out of memory). */
void * nf__backend_host_scratch(nf_backend * be, size_t bytes);

/* Record one executed op (nf__op_run). ms < 0: untimed. */
void nf__trace_op(nf_backend * be, const nf_op * op, double ms);
/* Start a new set of op locations / write it as "a,b" (see op_where). */
void nf__trace_where_reset(nf_backend * be);
void nf__trace_where(const nf_backend * be, char * out, size_t n);
struct cJSON;
/* a trace document as the text nf_trace_json hands out (malloc'ed, newline-ended; nf_free);
 * root consumed (NULL: out of memory) */
char * nf__trace_text(struct cJSON * root, int pretty, const nf_backend * be, nf_err * err);
/* Record a transfer (called by nf__tensor_upload/download). */
void nf__trace_xfer(nf_backend * be, int h2d, int64_t bytes, const char * what);
/* Count one device allocation (a tensor buffer, or a backend's own scratch). */
void nf__trace_alloc(nf_backend * be, int64_t bytes);

/* Backend constructors. Each returns NF_ERR_DEVICE with a clear message when
 * the device is absent or the backend is not compiled in. */
int nf__backend_cpu_init(const struct nf_backend_opts * opts, nf_backend ** out, nf_err * err); /* opts may be NULL */
int nf__backend_opencl_init(int index, const struct nf_backend_opts * opts, nf_backend ** out, nf_err * err);
int nf__backend_cuda_init(int index, const struct nf_backend_opts * opts, nf_backend ** out, nf_err * err);
/* The value of backend option `key` ("opencl.gemm"), or NULL. */
const char * nf__opt(const struct nf_backend_opts * o, const char * key);
/* Every option of backend `kind` is one of `known` (NULL-terminated names). */
int nf__opts_check(const struct nf_backend_opts * o, const char * kind, const char * const * known, nf_err * err);
/* Listing for `nofall devices`. */
void nf__backend_opencl_list(FILE * f);
void nf__backend_cuda_list(FILE * f);

/* Allocate the common part; backends fill iface/ctx/name/desc. */
nf_backend * nf__backend_new(const struct nf_backend_i * iface, void * ctx, const char * name);

/* CPU reference kernels (host pointers, the ops' semantics), the cpu
 * backend's kernel table; tests reuse it for test backends. */
extern const struct nf_kernel nf__cpu_kernels[NF_OP_COUNT];
/* the cpu backend's erf (double-precision Chebyshev series, see cpu-kernels.c) */
float nf__erf_f32(float x);
/* the cpu backend's exp (double-precision Taylor series, see cpu-kernels.c) */
float nf__exp_f32(float x);

#ifdef __cplusplus
}
#endif
/* DROPOUT's mask (nf-ops.def): element i is kept */
static inline int nf__dropout_keep(uint64_t seed, uint64_t i, int32_t threshold) {
    uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (int64_t) (z >> 40) >= (int64_t) threshold;
}

#endif /* NF_IMPL_H */
