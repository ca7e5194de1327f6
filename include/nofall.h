/*
 * nofall.h -- public API of libnofall.
 *
 * A run is bound to exactly one backend instance ("device"). Every tensor the
 * library creates lives on one device; an op whose operands are not on the
 * run's device is an error (NF_ERR_PLACEMENT), never a silent copy. Host <->
 * device transfers happen only at the explicit boundary (weights once, inputs
 * in, outputs out) and are recorded in the backend's trace.
 *
 * Errors: every fallible call returns an int result code (NF_OK == 0) and, on
 * failure, fills the caller's nf_err with a message naming the file, tensor,
 * op or device involved. The library never calls abort() or exit().
 */
#ifndef NOFALL_H
#define NOFALL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NF_VERSION "0.1.0"

/* ---- result codes ------------------------------------------------------ */
enum nf_result {
    NF_OK = 0,
    NF_ERR_GENERIC = 1,    /* unspecified failure                              */
    NF_ERR_IO,             /* cannot open/read/write/rename a file             */
    NF_ERR_FORMAT,         /* malformed file (safetensors, npy, json)          */
    NF_ERR_CHECKPOINT,     /* checkpoint does not match the model's key set    */
    NF_ERR_SHAPE,          /* wrong tensor shape                               */
    NF_ERR_INPUT,          /* bad input values (NaN/Inf, label out of range)   */
    NF_ERR_NOMEM,          /* host or device allocation failed                 */
    NF_ERR_DEVICE,         /* device absent / driver error / kernel build      */
    NF_ERR_UNSUPPORTED,    /* op not supported by the run's backend            */
    NF_ERR_PLACEMENT,      /* operand on another device than the op's backend  */
    NF_ERR_ARG,            /* bad argument (usage)                             */
    NF_ERR_MISMATCH,       /* verification failed against thresholds           */
    NF_RESULT_COUNT
};

typedef struct nf_err {
    int  code;
    char msg[4096];
} nf_err;

const char * nf_result_name(int code);   /* "NF_ERR_IO", ... */

/* ---- backends / devices ------------------------------------------------- */
typedef struct nf_backend nf_backend;   /* opaque: one device, one run */

enum nf_precision {
    NF_PRECISION_EXACT = 0,  /* exact fp32 everywhere (default)                */
    NF_PRECISION_TF32  = 1,  /* opt-in: TF32 tensor-op GEMM where the device has it */
};
const char * nf_precision_name(int precision);

/* device: "cpu", "opencl[:N]", "cuda[:N]". Fails at once (NF_ERR_DEVICE) when
 * the backend is not compiled in or the device is absent; never falls back. */
int  nf_backend_init(const char * device, int precision, nf_backend ** out, nf_err * err);
void nf_backend_free(nf_backend * be);
const char * nf_backend_name(const nf_backend * be);        /* e.g. "opencl:0"      */
const char * nf_backend_kind(const nf_backend * be);        /* "cpu", "opencl", ... */
const char * nf_backend_description(const nf_backend * be); /* device name etc.     */
int          nf_backend_precision(const nf_backend * be);
const char * nf_backend_precision_detail(const nf_backend * be); /* build options, math mode */
/* "" or a warning the user should see, e.g. that the cpu GEMM library runs
 * kernels well below what this CPU can do */
const char * nf_backend_warning(const nf_backend * be);
int  nf_backend_sync(nf_backend * be, nf_err * err);

/* Write the compiled-in backends and the devices each sees to f. */
void nf_devices_print(FILE * f);

/* ---- op trace ------------------------------------------------------------ */
struct nf_trace_totals {
    int64_t ops;            /* op records                                    */
    int64_t ops_off_device; /* ops whose executing device != the run device  */
    int64_t h2d_copies, d2h_copies;
    int64_t h2d_bytes,  d2h_bytes;
    int64_t allocs, alloc_bytes; /* device allocations (tensors, backend scratch) */
    double  flops;          /* sum of the ops' FLOP counts                   */
    double  op_ms;          /* sum of per-op elapsed time (timed traces only) */
};
/* timed != 0: sync after every op and record its elapsed time. */
void nf_trace_reset(nf_backend * be, int timed);
void nf_trace_totals_get(const nf_backend * be, struct nf_trace_totals * out);
/* JSON document {"device":..,"ops":[..],"transfers":[..],"totals":{..}} */
int  nf_trace_write_json(const nf_backend * be, FILE * f);

/* ---- Mitra (Tab2D) ------------------------------------------------------- */
typedef struct nf_mitra nf_mitra;

enum nf_task { NF_TASK_CLASSIFICATION = 0, NF_TASK_REGRESSION = 1 };

struct nf_mitra_config {
    int dim, dim_output, n_layers, n_heads;
    int task;                     /* enum nf_task */
};

/* Load DIR/config.json + DIR/model.safetensors with the strict key check and
 * upload the weights to be's device once. */
int  nf_mitra_load(nf_backend * be, const char * dir, nf_mitra ** out, nf_err * err);
void nf_mitra_free(nf_mitra * m);
const struct nf_mitra_config * nf_mitra_get_config(const nf_mitra * m);
/* where the weights live, measured from the device's own API ("cuda:0", ...) */
int  nf_mitra_weights_device(const nf_mitra * m, char * out, size_t n, nf_err * err);
int64_t nf_mitra_n_params(const nf_mitra * m);

/* Where things were measured to live during the last forward (driver query
 * at allocation time): the weights, the uploaded inputs, the logits tensor,
 * and the device(s) that executed the forward's ops (from the op records). */
struct nf_mitra_placement {
    char weights[32], inputs[32], logits[32], ops[96];
};
void nf_mitra_get_placement(const nf_mitra * m, struct nf_mitra_placement * out);
/* Output layout: 1 when the model returns one value per query row
 * (regression with dim_output 1), else dim_output. */
int  nf_mitra_output_width(const nf_mitra * m);
int  nf_mitra_uses_class_labels(const nf_mitra * m);

struct nf_mitra_input {
    int64_t n_support, n_query, n_features;
    const float   * x_support;   /* (n_support, n_features) row-major        */
    const float   * x_query;     /* (n_query,   n_features)                  */
    const int64_t * y_class;     /* classification: (n_support), 0..C-1      */
    const float   * y_value;     /* regression:     (n_support)              */
};

/* Rows of the stream (support and query rows alike) processed together by
 * each sub-block: bounds the scratch memory; 0 = default (4096 tokens on cpu
 * and opencl, 16384 on cuda). */
void nf_mitra_set_chunk_rows(nf_mitra * m, int64_t rows);

/* Stage callback (for verifying and bisecting backends). Stages:
 *   "inputs"  the x_support / x_query tensors read back from the device
 *   "embedding", "layers.<l>.{row_attention,mlp1,feature_attention,mlp2}"
 *             host copies of the support and query residual streams
 *   "head"    the logits (support == NULL)
 * NF_STAGES_INPUTS reports "inputs" and "head" only; NF_STAGES_ALL all of
 * them. Every stage adds (counted) device->host copies. */
enum nf_stages { NF_STAGES_NONE = 0, NF_STAGES_INPUTS = 1, NF_STAGES_ALL = 2 };
typedef int (*nf_stage_fn)(void * user, const char * stage,
                           const float * support, int64_t n_support_elems,
                           const float * query,   int64_t n_query_elems);
void nf_mitra_set_stage_callback(nf_mitra * m, int stages, nf_stage_fn fn, void * user);

/* logits: classification (n_query, dim_output); regression (n_query).
 * The forward's device workspace stays allocated in the model and is reused
 * by the next forward of the same shape (n_support, n_query, n_features):
 * repeated forwards allocate no device memory. A forward of another shape
 * or a failed one frees it first; nf_mitra_release_workspace frees it now. */
int  nf_mitra_forward(nf_mitra * m, const struct nf_mitra_input * in, float * logits, nf_err * err);
void nf_mitra_release_workspace(nf_mitra * m);

/* Write a synthetic checkpoint with the official layout: DIR/config.json and
 * DIR/model.safetensors, values drawn deterministically from seed. */
int  nf_mitra_gen_weights(const char * dir, const struct nf_mitra_config * cfg, uint64_t seed, nf_err * err);

#ifdef __cplusplus
}
#endif
#endif /* NOFALL_H */
