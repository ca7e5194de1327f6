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

/* NF_API marks the exported symbols (for a shared build with -fvisibility=hidden) */
#if defined(__GNUC__)
#define NF_API __attribute__((visibility("default")))
#else
#define NF_API
#endif

/* ---- result codes ------------------------------------------------------ */
enum nf_result {
    NF_OK = 0,
    NF_ERR_GENERIC = 1, /* unspecified failure                              */
    NF_ERR_IO,          /* cannot open/read/write/rename a file             */
    NF_ERR_FORMAT,      /* malformed file (safetensors, npy, json)          */
    NF_ERR_CHECKPOINT,  /* checkpoint does not match the model's key set    */
    NF_ERR_SHAPE,       /* wrong tensor shape                               */
    NF_ERR_INPUT,       /* bad input values (NaN/Inf, label out of range)   */
    NF_ERR_NOMEM,       /* host or device allocation failed                 */
    NF_ERR_DEVICE,      /* device absent / driver error / kernel build      */
    NF_ERR_UNSUPPORTED, /* op not supported by the run's backend            */
    NF_ERR_PLACEMENT,   /* operand on another device than the op's backend  */
    NF_ERR_ARG,         /* bad argument (usage)                             */
    NF_ERR_MISMATCH,    /* verification failed against thresholds           */
    NF_RESULT_COUNT
};

typedef struct nf_err {
    int code;
    char msg[4096];
} nf_err;

NF_API const char * nf_result_name(int code); /* "NF_ERR_IO", ... */

/* ---- backends / devices ------------------------------------------------- */
typedef struct nf_backend nf_backend; /* opaque: one device, one run */

enum nf_precision {
    NF_PRECISION_EXACT = 0,         /* exact fp32 everywhere (default)                */
    NF_PRECISION_TF32 = 1,          /* opt-in: TF32 tensor-op GEMM where the device has it */
    NF_PRECISION_BF16_AUTOCAST = 2, /* opt-in: upstream's torch.autocast(bfloat16) numerics:
                                       bf16 inputs / fp32 accumulation where autocast runs an op
                                       in bf16 (linear, attention), fp32 elsewhere (docs/precision.md) */
};
NF_API const char * nf_precision_name(int precision);

/* How a backend is set up, passed explicitly: the library reads no
 * environment variable to steer a backend (the CLI maps its NOFALL_* / NF_*
 * variables to these, see nf_backend_env_read). */
struct nf_backend_opts {
    int precision;                /* enum nf_precision                              */
    const char * cache_dir;       /* opencl: where compiled kernel binaries are kept;
                                     NULL or "" = no cache                           */
    const char * const * options; /* NULL, or a NULL-terminated list of "key=value":
                                       opencl.gemm=own|clblast        LINEAR's GEMM (default: CLBlast where allowed)
                                       opencl.gemm_geometry="TM TN TK WX WY VEC"   the built-in GEMM's tiles
                                       opencl.test_break_build=1     (tests) a kernel source that fails to build
                                       cuda.attention=auto|cublas    ATTENTION's path
                                       cuda.chunk_floats=N           (tests) cap on cuda's attention work buffer
                                     keys of other backends are ignored; an unknown
                                     key of the chosen backend is NF_ERR_ARG         */
};

/* device: "cpu", "opencl[:N]", "cuda[:N]". Fails at once (NF_ERR_DEVICE) when
 * the backend is not compiled in or the device is absent; never falls back. */
NF_API int nf_backend_init_opts(const char * device, const struct nf_backend_opts * opts, nf_backend ** out,
                                nf_err * err);
/* = nf_backend_init_opts with only the precision set */
NF_API int nf_backend_init(const char * device, int precision, nf_backend ** out, nf_err * err);
NF_API void nf_backend_free(nf_backend * be);
NF_API const char * nf_backend_name(const nf_backend * be);        /* e.g. "opencl:0"      */
NF_API const char * nf_backend_kind(const nf_backend * be);        /* "cpu", "opencl", ... */
NF_API const char * nf_backend_description(const nf_backend * be); /* device name etc.     */
NF_API int nf_backend_precision(const nf_backend * be);
NF_API const char * nf_backend_precision_detail(const nf_backend * be); /* build options, math mode */
/* "" or a warning the user should see, e.g. that the cpu GEMM library runs
 * kernels well below what this CPU can do */
NF_API const char * nf_backend_warning(const nf_backend * be);
NF_API int nf_backend_sync(nf_backend * be, nf_err * err);

/* A convenience for command-line tools, and the only place the library looks
 * at the environment, when asked: fills e->opts from NOFALL_CACHE_DIR /
 * XDG_CACHE_HOME / HOME (cache dir; NOFALL_OPENCL_NO_CACHE=1: none),
 * NOFALL_OPENCL_GEMM, NOFALL_OPENCL_GEMM_GEOMETRY,
 * NOFALL_OPENCL_TEST_BREAK_BUILD, NF_CUDA_ATTENTION, NF_CUDA_CHUNK_FLOATS. */
struct nf_backend_env {
    struct nf_backend_opts opts;
    char cache_dir[4096];
    char kv[8][256];
    const char * list[9];
};
NF_API void nf_backend_env_read(struct nf_backend_env * e, int precision);

/* The compiled-in backends and the devices each sees, as text (one line per
 * backend, then one indented line per device), malloc'ed: release with
 * nf_free. NULL and err set on failure. */
NF_API char * nf_devices_describe(nf_err * err);

/* ---- op trace ------------------------------------------------------------ */
/* Every backend keeps running totals of the ops and transfers since the last
 * nf_trace_reset (O(1) memory, always on). Per-op and per-transfer records
 * are kept only when asked (NF_TRACE_RECORDS), at most NF_TRACE_MAX_RECORDS
 * of each; further ones are counted in records_dropped. So a long-lived
 * process (a server, the Python binding) holds its memory flat. */
struct nf_trace_totals {
    int64_t ops;            /* ops run                                       */
    int64_t ops_off_device; /* ops with an operand measured off the run device */
    int64_t h2d_copies, d2h_copies;
    int64_t h2d_bytes, d2h_bytes;
    int64_t allocs, alloc_bytes; /* device allocations (tensors, backend scratch) */
    int64_t records_dropped;     /* op/transfer records not kept (over the cap)   */
    double flops;                /* sum of the ops' FLOP counts                   */
    double op_ms;                /* sum of per-op elapsed time (timed traces only) */
};
enum nf_trace_mode {
    NF_TRACE_TOTALS = 0,  /* totals only (the default)                          */
    NF_TRACE_RECORDS = 1, /* also a record per op and per transfer (bounded)    */
    NF_TRACE_TIMED = 3,   /* records, and a sync after every op to time it      */
};
#define NF_TRACE_MAX_RECORDS 65536
/* Clear the totals and records; mode is an nf_trace_mode. */
NF_API void nf_trace_reset(nf_backend * be, int mode);
NF_API void nf_trace_totals_get(const nf_backend * be, struct nf_trace_totals * out);
/* The trace as a JSON document {"device":..,"ops":[..],"transfers":[..],
 * "totals":{..}}, malloc'ed (release with nf_free); NULL and err set on
 * failure. */
NF_API char * nf_trace_json(const nf_backend * be, nf_err * err);
/* Release memory the library returned (nf_trace_json, nf_devices_describe). */
NF_API void nf_free(void * p);

/* ---- models -------------------------------------------------------------- */
/* A model is loaded from a checkpoint directory: DIR/config.json and
 * DIR/model.safetensors. Its type comes from config.json "model_type" when
 * present ("mitra", ...); Mitra's official config has none, so a config
 * without it is Mitra. Loading is strict: every missing, unexpected,
 * wrong-dtype or wrong-shape tensor is named (NF_ERR_CHECKPOINT), and the
 * weights go to be's device in one upload. */
typedef struct nf_model nf_model;

NF_API int nf_model_load(nf_backend * be, const char * dir, nf_model ** out, nf_err * err);
NF_API void nf_model_free(nf_model * m);
NF_API const char * nf_model_type(const nf_model * m); /* "mitra" */
NF_API int64_t nf_model_n_params(const nf_model * m);

/* The configuration, item by item (as in config.json): returns 0 past the end.
 * str is NULL for a number. */
struct nf_config_item {
    const char * key;
    const char * str;
    int64_t num;
};
NF_API int nf_model_config_item(const nf_model * m, int i, struct nf_config_item * out);

/* Arrays in and out: row-major host data. */
enum nf_array_dtype { NF_ARRAY_F32 = 0, NF_ARRAY_I64 = 1 };
#define NF_ARRAY_MAX_DIMS 4
struct nf_array {
    const char * name; /* one of the model's input names */
    int dtype;         /* enum nf_array_dtype            */
    int ndim;
    int64_t shape[NF_ARRAY_MAX_DIMS];
    const void * data;
};
/* What the forward takes. Mitra: support_x (n_support, n_features) f32,
 * support_y (n_support) i64 class labels 0..n_classes-1 (classifier) or f32
 * targets (regressor), query_x (n_query, n_features) f32. */
struct nf_input_desc {
    const char * name;
    int dtype; /* enum nf_array_dtype */
    int ndim;
    const char * dims; /* the dims' names: "n_support n_features" */
    int64_t n_classes; /* i64 class labels: their count; else 0 */
};
NF_API int nf_model_n_inputs(const nf_model * m);
NF_API const struct nf_input_desc * nf_model_input(const nf_model * m, int i);
/* The output ("logits" for Mitra) and its shape for these inputs: Mitra
 * (n_query, n_classes), or (n_query) for a regressor with one output. */
NF_API const char * nf_model_output_name(const nf_model * m);
NF_API int nf_model_output_shape(const nf_model * m, const struct nf_array * in, int n_in, int * ndim, int64_t * shape,
                                 nf_err * err);

/* Where things were measured to live during the last forward (driver query
 * at allocation time): the weights, the uploaded inputs, the output tensor,
 * and the device(s) where the forward's ops found their operands (tracked for
 * every op, records on or off). */
struct nf_placement {
    char weights[32], inputs[32], outputs[32], ops[96];
};
NF_API void nf_model_get_placement(const nf_model * m, struct nf_placement * out);
/* where the weights live, asked of the device's own API now ("cuda:0", ...) */
NF_API int nf_model_weights_device(const nf_model * m, char * out, size_t n, nf_err * err);

/* Provenance: the files a loaded model was read from (its config.json where
 * there is one, the weights file, TabSTAR's vocab.txt), i in
 * [0, nf_model_file_count); and the SHA-256 of each (64 lowercase hex digits,
 * computed on first request and kept), so that a result can be tied to its
 * weights. nf_sha256_file hashes any file. */
NF_API int nf_model_file_count(const nf_model * m);
NF_API const char * nf_model_file_path(const nf_model * m, int i); /* NULL when i is out of range */
NF_API int nf_model_file_sha256(nf_model * m, int i, char hex[65], nf_err * err);
NF_API int nf_sha256_file(const char * path, char hex[65], nf_err * err);

/* Options (Mitra):
 *   "chunk_rows"   rows of the stream processed together by each sub-block;
 *                  bounds the scratch memory; 0 = default, 4096 tokens on
 *                  cpu and opencl, 16384 on cuda;
 *   "query_chunk"  query rows a pass (0 = default: 16 chunks' worth of
 *                  tokens). More queries than that stream through in passes
 *                  against the support computed once, each layer's support
 *                  K/V kept (n_layers x n_support x (F+1) x 2 x dim floats):
 *                  memory independent of the number of queries;
 *   "kv_cache_mb"  the most that K/V cache may take (0 = 4096); beyond it
 *                  each pass recomputes the support (as upstream does);
 *   "query_begin", "query_end"  run only the passes whose first query row
 *                  is in [query_begin, query_end) (0, 0 = all): the other
 *                  rows' logits are 0. The plan (passes, shapes) is the
 *                  whole forward's, so the rows run are byte-identical to
 *                  the whole forward's; shards [b_i, b_i+1) covering the
 *                  queries run every pass once (MPI: README "Running on a
 *                  cluster with mpirun").
 * NF_ERR_ARG for an option the model lacks. */
NF_API int nf_model_set_option(nf_model * m, const char * key, int64_t value, nf_err * err);
/* An option's value, or what the last forward did (Mitra: "support_passes",
 * 1 when the support was computed once; "query_chunk_used"; "kv_cache_bytes";
 * "query_rows_begin" / "query_rows_end", the query rows it computed).
 * NF_ERR_ARG for an unknown key. */
NF_API int nf_model_get_option(const nf_model * m, const char * key, int64_t * value, nf_err * err);

/* Stage callback (for verifying and bisecting backends): host copies of
 * intermediate arrays, in forward order. Mitra's stages:
 *   "inputs.support_x", "inputs.query_x"  the inputs read back from the device
 *   "embedding", "layers.<l>.{row_attention,mlp1,feature_attention,mlp2}"
 *             the residual stream (n_support + n_query, T, dim), support rows first
 *   "head"    the output
 * NF_STAGES_INPUTS reports the "inputs.*" stages and "head" only;
 * NF_STAGES_ALL all of them. Every stage adds (counted) device->host copies.
 * A nonzero return fails the forward. */
enum nf_stages { NF_STAGES_NONE = 0, NF_STAGES_INPUTS = 1, NF_STAGES_ALL = 2 };
typedef int (*nf_stage_fn)(void * user, const char * stage, const float * data, int ndim, const int64_t * shape);
NF_API void nf_model_set_stage_callback(nf_model * m, int stages, nf_stage_fn fn, void * user);
NF_API int nf_model_stage_count(const nf_model * m); /* stages of NF_STAGES_ALL */
NF_API int nf_model_stage_name(const nf_model * m, int i, char * out, size_t n);

/* out: the output, nf_model_output_shape elements.
 * The forward's device workspace stays allocated in the model and is reused
 * by the next forward of the same input shapes: repeated forwards allocate
 * no device memory. A forward of other shapes or a failed one frees it
 * first; nf_model_release_workspace frees it now. */
NF_API int nf_model_forward(nf_model * m, const struct nf_array * in, int n_in, float * out, nf_err * err);
NF_API void nf_model_release_workspace(nf_model * m);

/* Model types compiled in, and synthetic checkpoints with the official
 * layout (DIR/config.json, DIR/model.safetensors, values drawn
 * deterministically from seed). opts: n (key, value) pairs of the type's
 * configuration, e.g. Mitra {"dim","512"}, {"layers","12"}, {"heads","4"},
 * {"outputs","10"}, {"task","classification"}; absent keys take the
 * official checkpoint's values. */
NF_API int nf_model_type_count(void);
NF_API const char * nf_model_type_name(int i);
NF_API int nf_model_gen_weights(const char * type, const char * dir, uint64_t seed, int n, const char * const * keys,
                                const char * const * values, nf_err * err);

/* gen-weights, in full (the command line's): a type's configuration
 * options, i = 0, 1, ... (NULL past the end; *help its text); the file
 * name of its torch.save checkpoint (NULL: none); and the weights in a
 * format, "safetensors" (or NULL) or "ckpt" (also DIR/<ckpt name>), with one
 * tensor shifted by perturb_delta (perturb_key NULL: none; bisect tests);
 * summary: the configuration in words. */
NF_API const char * nf_model_type_gen_option(const char * type, int i, const char ** help);
NF_API const char * nf_model_type_ckpt_name(const char * type);
NF_API int nf_model_gen_weights_full(const char * type, const char * dir, const char * format, uint64_t seed, int n,
                                     const char * const * keys, const char * const * values, const char * perturb_key,
                                     float perturb_delta, char * summary, size_t summary_n, nf_err * err);

/* ---- a model's own inputs: what `nofall run / verify / bench` feed it ---------------- */
/* Every model can make a deterministic synthetic input from a seed (the same
 * bytes on every machine) and read its inputs from files; the command line
 * feeds any model through these, without knowing its type. Options are
 * (key, value) text pairs:
 *   every model    "seed"  (0 .. 2^53-1; default 42)
 *   Mitra          "support", "query", "features": the seeded table's sizes (16, 8, 13)
 *   SpTransformer  "length" (input length, flanks included; 8201), "batch" (1):
 *                  batch sequences of seeds seed, seed+1, ..., N flanks of context_len
 *   TabSTAR        "cells": a CELLS.json file ("nofall-tabstar-cells/1") instead of
 *                  the seeded row
 * An option the model does not take is NF_ERR_ARG naming it. */
typedef struct nf_inputs nf_inputs;
/* TabSTAR's tokenizer truncates a string at this many ids (BERT's model_max_length) */
#define NF_TABSTAR_MAX_TOKENS 512
NF_API int nf_model_inputs(nf_model * m, int n, const char * const * keys, const char * const * values,
                           nf_inputs ** out, nf_err * err);
/* the same with arrays the caller made (SpTransformer: "tokens" from a
 * sequence or FASTA, with "source", "context" (pad|given) and "flank"
 * describing them); the set keeps copies */
NF_API int nf_model_inputs_given(nf_model * m, const struct nf_array * given, int n_given, int n,
                                 const char * const * keys, const char * const * values, nf_inputs ** out,
                                 nf_err * err);
NF_API int nf_inputs_count(const nf_inputs * in);
NF_API const struct nf_array * nf_inputs_arrays(const nf_inputs * in); /* nf_model_forward's inputs */
/* Facts about the inputs, item by item (0 past the end; str NULL for a
 * number): items describe them ("case", sizes), markers are what a tool
 * prints as KEY=value lines (e.g. SpTransformer POSITIONS_SCORED). */
NF_API int nf_inputs_item(const nf_inputs * in, int i, struct nf_config_item * out);
NF_API int nf_inputs_marker(const nf_inputs * in, int i, struct nf_config_item * out);
NF_API void nf_inputs_free(nf_inputs * in);
/* Merge an adapter directory into the loaded weights (TabSTAR: a PEFT LoRA
 * adapter); summary: what was merged, in words. NF_ERR_UNSUPPORTED for a
 * model that takes none. */
NF_API int nf_model_apply_adapter(nf_model * m, const char * dir, char * summary, size_t summary_n, nf_err * err);

/* ---- what `nofall run` writes, per model type ------------------------------------------- */
/* By type name ("mitra", ...; NULL, "" or an unknown name: the default type,
 * Mitra): its description; the options a run of it takes (NULL-terminated:
 * input keys of nf_model_inputs, nf_model_set_option keys, "adapter"); the
 * files a run writes into its output set (NULL-terminated, report.json
 * among them); the check of a run's input options taken together (NF_ERR_ARG
 * with a message naming them, e.g. two input sources). */
NF_API const char * nf_model_type_description(const char * type);
NF_API const char * const * nf_model_type_run_options(const char * type);
NF_API const char * const * nf_model_type_artifacts(const char * type);
NF_API int nf_model_type_check_inputs(const char * type, int n, const char * const * keys, const char * const * values,
                                      nf_err * err);
/* One forward's outputs: nf_model_write_outputs writes the model's
 * artifacts (all but report.json) into dir from the inputs and the forward's
 * output; res gets the markers' LOGITS_SHAPE and PREDICTED_CLASS and the
 * model's members of report.json (a JSON object's text, release with
 * nf_free). adapter: what nf_model_apply_adapter merged, or NULL.
 * nf_model_check_outputs reads them back. */
struct nf_run_outputs {
    char shape[64];
    char classes[4096];
    char * report;
};
NF_API int nf_model_write_outputs(nf_model * m, const nf_inputs * in, const float * out, const char * adapter,
                                  const char * dir, struct nf_run_outputs * res, nf_err * err);
NF_API int nf_model_check_outputs(nf_model * m, const nf_inputs * in, const float * out, const char * dir,
                                  nf_err * err);

/* ---- verify: a device against the cpu backend or a fixture (README "verify") ------------ */
/* The model type a model path names, without loading it: config.json's
 * "model_type" ("mitra" when it has none); "sptransformer" for a file (a
 * .ckpt); "" when config.json is missing or unreadable (the load says why). */
NF_API void nf_model_type_of(const char * path, char * out, size_t n);
/* What `nofall verify` does for any model type: every case (seeded: per seed
 * of the list and --samples more of varied size; or each case directory of
 * a fixture) runs on the device and on the reference (the cpu backend, or
 * the fixture's stored outputs); the model type reads its fixtures, sets the
 * thresholds' defaults, compares, prints its case lines and summary on the
 * report stream and makes the JSON. */
struct nf_verify_opts {
    const char * type;                   /* nf_model_type_of(model); NULL: read here */
    const char *model, *reference_model; /* reference_model NULL: model */
    const char * device;                 /* NULL: the type's default, if it has one */
    const char * against;                /* "cpu" or a fixture directory */
    const char * seeds;                  /* "42,100,..."; NULL: the type's seeds */
    int samples;                         /* extra seeded cases per seed */
    int precision;                       /* the device side's */
    double max_abs, mean_abs;            /* < 0: the type's default */
    int bisect;                          /* 0; 1: on a failure; 2: always (first stage over) */
    int trace;                           /* time every op of the device (nf_trace_json) */
    const char *adapter, *cells;         /* TabSTAR: a LoRA adapter; the rows (CELLS.json) */
    /* makes each backend; NULL: nf_backend_init */
    int (*backend_init)(const char * device, int precision, nf_backend ** out, nf_err * err);
    /* 1: each bisected case's error after every stage, as "stages" in the
     * JSON (verify --plot, nofall-plot.h nf_plot_verify_svg) */
    int stage_errors;
};
typedef struct nf_verify nf_verify;
/* the options as the type takes them (NF_ERR_ARG: a usage error; nothing read) */
NF_API int nf_verify_check_opts(const struct nf_verify_opts * o, nf_err * err);
/* a verify, its fixture's cases found (nothing loaded); o's strings must outlive it */
NF_API int nf_verify_new(const struct nf_verify_opts * o, nf_verify ** out, nf_err * err);
/* NF_ERR_ARG when path, an output the caller will write (flag names it), is a file the run reads */
NF_API int nf_verify_check_output(const nf_verify * v, const char * flag, const char * path, nf_err * err);
/* load both sides, run and compare every case: the case lines and the summary to report */
NF_API int nf_verify_run(nf_verify * v, FILE * report, nf_err * err);
NF_API int nf_verify_failed(const nf_verify * v);                 /* failed cases */
NF_API char * nf_verify_json(const nf_verify * v, nf_err * err);  /* the results as JSON text (nf_free) */
NF_API const nf_backend * nf_verify_backend(const nf_verify * v); /* the device side (its trace) */
NF_API void nf_verify_free(nf_verify * v);

/* ---- fine-tuning (Mitra; shared/specs/finetune.md §1) ------------------------
 * nf_finetune trains the loaded model's weights in place on its device, as
 * AutoGluon's Mitra trainer does: per step one episode drawn from numpy's
 * legacy RandomState(seed) (the stratified 5-fold split or the 80/20 one,
 * support <= max_support, query <= max_query, the support reshuffled), one
 * AdamW step (PyTorch's fp32 arithmetic) with LinearLR warmup, then a full
 * validation pass (val rows in chunks of max_query, each against its own
 * random order of the training rows); the weights with the strictly lowest
 * validation loss (the pretrained ones, step 0, included) are kept, early
 * stopping after `patience` steps without a 1e-4 improvement. The arrays
 * are Mitra's Preprocessor output (mirror and imputation applied). */
struct nf_finetune_step;
struct nf_finetune_opts {
    int64_t steps;                  /* fine_tune_steps: 50                          */
    double lr, weight_decay;        /* 1e-4, 0.1                                    */
    double beta1, beta2, eps;       /* 0.9, 0.999, 1e-8                             */
    int64_t warmup_steps;           /* 1000 (LinearLR from lr / warmup_steps)       */
    int64_t patience;               /* early stopping: 40                           */
    int64_t max_support, max_query; /* 8192, 1024                                   */
    uint64_t seed;                  /* the trainer's RandomState: 0                 */
    int keep_last;                  /* 1: end with the last step's weights, as
                                       upstream's CPU fine-tune does (its best-weights
                                       copy aliases the live ones); 0: the best     */
    /* called after every step (and once for step 0); non-zero stops the run */
    int (*on_step)(void * user, const struct nf_finetune_step * s);
    /* called with each step's episode before it trains: the training rows
     * (ids into x_train) of the support, in the order fed, and of the query
     * (for logs and verification); may be NULL */
    int (*on_batch)(void * user, int64_t step, const int64_t * support, int64_t n_support, const int64_t * query,
                    int64_t n_query);
    void * user;
    /* a run in two parts, bit for bit the same as one: stop_after (> 0)
     * stops after that step and saves the whole state (weights, Adam's
     * moments and step, the best weights and loss, early stopping's
     * counters, the RandomState) as state_dir/finetune-state.safetensors,
     * leaving the live weights; a run with resume_dir set continues from it
     * (the same model, data and options) */
    int64_t stop_after;
    const char * state_dir;
    const char * resume_dir;
};
struct nf_finetune_step {
    int64_t step;      /* 0 = the pretrained weights' validation */
    double lr;         /* the step's learning rate (0 at step 0) */
    double train_loss; /* the episode's loss (NaN at step 0) */
    double val_loss;   /* cross-entropy over the 10 logits / MSE in the target's units */
    int64_t best_step; /* the best so far */
    int64_t patience_count;
};
NF_API void nf_finetune_opts_default(struct nf_finetune_opts * o);

struct nf_finetune_data {
    int64_t n_train, n_val, n_features;
    const float * x_train; /* (n_train, n_features) */
    const float * x_val;   /* (n_val, n_features)   */
    /* classification: class ids 0..K-1 */
    const int64_t *y_train_class, *y_val_class;
    /* regression: the training targets normalised as the Preprocessor does
     * (min-max, then 1 - y when mirrored), the validation targets in their
     * own units, and the transform (the validation loss un-normalises) */
    const float * y_train_value;
    const double * y_val_value;
    double y_min, y_max;
    int y_mirror;
};
struct nf_finetune_result {
    int64_t steps_run;    /* steps taken (< opts.steps after early stopping) */
    int64_t best_step;    /* the step whose weights the model now holds (0: the pretrained) */
    int64_t stopped_at;   /* the step early stopping fired at, or -1 */
    double best_val_loss; /* its validation loss */
};
NF_API int nf_finetune(nf_model * m, const struct nf_finetune_data * d, const struct nf_finetune_opts * o,
                       struct nf_finetune_result * res, nf_err * err);
/* The model's weights (as loaded or as trained) as DIR/model.safetensors +
 * DIR/config.json, the checkpoint's keys and layout: a fine-tuned model a
 * later nf_model_load (and upstream's from_pretrained) reads strictly. */
NF_API int nf_model_save(nf_model * m, const char * dir, nf_err * err);

/* ---- version and build (issue #29: install) --------------------------------- */
/* This build's version: the CMake project version plus the git commit it was
 * built from, "0.1.0+g<12 hex>" (".dirty" appended for uncommitted changes;
 * NF_VERSION, the API's version, is the part before the "+"). Static string. */
NF_API const char * nf_version(void);
/* "nofall VERSION\nbackends: cpu, opencl, cuda\ngemm: cpu: oneDNN ...\n...":
 * the backends compiled in and the GEMM library each calls, malloc'ed
 * (release with nf_free); NULL and err set on failure. */
NF_API char * nf_build_info(nf_err * err);

#ifdef __cplusplus
}
#endif
#endif /* NOFALL_H */
