/*
 * opencl-impl.h -- private to the OpenCL backend: struct nf_cl (one device,
 * context, queue, program), the kernel list, the CL_CHECK / LAUNCH helpers and
 * the functions the backend's files share. Include it first, after
 * _POSIX_C_SOURCE:
 *   opencl.c          device enumeration, init / free, listing, the vtable
 *   opencl-buffers.c  device buffers, upload / download, scratch
 *   opencl-program.c  program build from the embedded kernels-*.cl + binary cache
 *   opencl-gemm.c     LINEAR, CONV1D and GEMM: the GEMM choice, CLBlast or the built-in kernel
 *   opencl-ops.c      kernel launch, per-op limits and launchers, the kernel table
 *   opencl-train-b.c  the training ops, set B (attention backward, embeddings, losses)
 *   opencl-train-c.c  the training ops, set C (scatter-add, gradient clipping, scaling)
 *   opencl-bf16.c     --precision bf16-autocast (kernels-bf16.cl, kernels-bf16-spt.cl)
 */
#ifndef NF_OPENCL_IMPL_H
#define NF_OPENCL_IMPL_H

#define CL_TARGET_OPENCL_VERSION 120
#ifndef CL_USE_DEPRECATED_OPENCL_1_2_APIS
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#endif

#include "nf-impl.h"
#include "opencl-kernels.h"

#include <CL/cl.h>
#include <CL/cl_ext.h>
#ifdef NF_HAVE_CLBLAST
#include <clblast_c.h>
#endif

#include <stdint.h>
#include <stdio.h>

#ifndef CL_PLATFORM_NOT_FOUND_KHR
#define CL_PLATFORM_NOT_FOUND_KHR -1001
#endif

/* ---- errors ------------------------------------------------------------------- */

const char * nf__cl_err_name(cl_int e);

/* Every OpenCL call goes through this: on failure return an nf error naming
 * the call (what) and the CL error by name and number. */
#define CL_CHECK(call, err, what)                                                                               \
    do {                                                                                                        \
        cl_int nf__cl_rc = (call);                                                                              \
        if (nf__cl_rc != CL_SUCCESS) {                                                                          \
            return nf__err_set((err), cl_rc_code(nf__cl_rc), "%s: %s (%d)", (what), nf__cl_err_name(nf__cl_rc), \
                               (int) nf__cl_rc);                                                                \
        }                                                                                                       \
    } while (0)

static inline int cl_rc_code(cl_int e) {
    switch (e) {
        case CL_MEM_OBJECT_ALLOCATION_FAILURE:
        case CL_OUT_OF_HOST_MEMORY:
        case CL_INVALID_BUFFER_SIZE: return NF_ERR_NOMEM;
        default: return NF_ERR_DEVICE;
    }
}

/* ---- state -------------------------------------------------------------------- */

/* the program's kernels: one entry each (enum value, kernel name in kernels-*.cl) */
/* clang-format off */
#define CL_KERNELS(X)                                                               \
    X(K_QUANTILE_SORT, "nf_quantile_sort") X(K_QUANTILE_INTERP, "nf_quantile_interp") \
    X(K_BUCKETIZE_U, "nf_bucketize_u") X(K_BUCKETIZE_STATS, "nf_bucketize_stats")     \
    X(K_BUCKETIZE_Z, "nf_bucketize_z")                                              \
    X(K_EMBED_FEATURES, "nf_embed_features")                                        \
    X(K_LABEL_CLASS, "nf_label_class") X(K_LABEL_VALUE, "nf_label_value")           \
    X(K_LABEL_MASK, "nf_label_mask")                                                \
    X(K_LAYER_NORM, "nf_layer_norm")                                                \
    X(K_LINEAR, "nf_linear") X(K_LINEAR_EPILOGUE, "nf_linear_epilogue")             \
    X(K_ATTENTION, "nf_attention") X(K_ATTENTION_WIDE, "nf_attention_wide")         \
    X(K_CONV1D_WPERM, "nf_conv1d_wperm") X(K_CONV1D_IM2COL, "nf_conv1d_im2col")     \
    X(K_CONV1D_EPILOGUE, "nf_conv1d_epilogue")                                      \
    X(K_BATCH_NORM, "nf_batch_norm") X(K_FILL, "nf_fill")                           \
    X(K_AXIAL_POS, "nf_axial_pos") X(K_GATHER_ROWS, "nf_gather_rows")               \
    X(K_BUCKET_MEANS, "nf_bucket_means") X(K_BUCKET_ROUTE, "nf_bucket_route")       \
    X(K_BUCKET_GATHER, "nf_bucket_gather")                                          \
    X(K_GEMM, "nf_gemm") X(K_GEMM_STORE, "nf_gemm_store") X(K_COL_SUM, "nf_col_sum") \
    X(K_ACT, "nf_act") X(K_ACT_BACKWARD, "nf_act_backward")                         \
    X(K_LN_BACKWARD_ROWS, "nf_ln_backward_rows")                                    \
    X(K_LN_BACKWARD_COLS, "nf_ln_backward_cols")                                    \
    X(K_ADAMW, "nf_adamw") X(K_COPY, "nf_copy")                                     \
    X(K_ATTN_BWD_Q, "nf_attn_bwd_q") X(K_ATTN_BWD_KV, "nf_attn_bwd_kv")             \
    X(K_EMBED_BWD_PART, "nf_embed_bwd_part") X(K_LABEL_BWD_PART, "nf_label_bwd_part") \
    X(K_COLSUM_FINALIZE, "nf_colsum_finalize") X(K_LABEL_BWD_CLASS, "nf_label_bwd_class") \
    X(K_CROSS_ENTROPY, "nf_cross_entropy") X(K_MSE_LOSS, "nf_mse_loss")            \
    X(K_SCATTER_ADD_ROWS, "nf_scatter_add_rows") X(K_CLIP_PART, "nf_clip_part")      \
    X(K_CLIP_TOTAL, "nf_clip_total") X(K_CLIP_APPLY, "nf_clip_apply") X(K_SCALE, "nf_scale") X(K_DROPOUT, "nf_dropout") \
    X(K_BF16_ROUND_ROWS, "nf_bf16_round_rows")                                      \
    X(K_BF16_LINEAR_EPILOGUE, "nf_bf16_linear_epilogue")                            \
    X(K_BF16_ATTENTION, "nf_bf16_attention")                                        \
    X(K_BF16_BUCKET_MEANS, "nf_bf16_bucket_means")                                  \
    X(K_BF16_BUCKET_ROUTE, "nf_bf16_bucket_route")                                  \
    X(K_BF16_BUCKET_GATHER, "nf_bf16_bucket_gather")                                \
    X(K_BF16_SPT_ATTENTION, "nf_bf16_spt_attention")
/* clang-format on */

enum {
#define X(id, kname) id,
    CL_KERNELS(X)
#undef X
        K_COUNT
};
extern const char * const nf__cl_k_names[K_COUNT];

struct nf_cl {
    nf_backend * be; /* the backend this context serves (for counters) */
    int index;
    char name[32];
    cl_platform_id platform;
    cl_device_id device;
    cl_context context;
    cl_command_queue queue;
    cl_program program;
    cl_kernel k[K_COUNT];
    size_t kwg[K_COUNT]; /* CL_KERNEL_WORK_GROUP_SIZE */
    int fp64;
    int cr_divsqrt;
    size_t max_wg;
    cl_ulong max_alloc;
    size_t ln_wg;   /* LAYER_NORM work-group (power of two) */
    size_t sort_wg; /* QUANTILE sort work-group (power of two) */
    cl_mem scratch;
    size_t scratch_size;
    struct nf_cl_lin_geo lin; /* nf_linear geometry (built-in GEMM) */
    int use_clblast;          /* LINEAR via CLBlast SGEMM + nf_linear_epilogue */
    char gemm_desc[160];
    cl_mem gemm_tmp; /* CLBlast's temporary buffer */
    size_t gemm_tmp_size;
    /* the backend options (struct nf_backend_opts), copied at init */
    char cache_dir[1024];  /* "" = no binary cache */
    char opt_gemm[16];     /* opencl.gemm: "", "own", "clblast" */
    char opt_geometry[64]; /* opencl.gemm_geometry */
    int opt_break_build;   /* opencl.test_break_build=1 */
    int bf16;              /* --precision bf16-autocast: ops through opencl-bf16.c */
};

/* ---- shared between the files (see the file comment) -------------------------- */

/* a device info string, "?" when the query fails */
static inline void nf__cl_dev_str(cl_device_id d, cl_device_info what, char * out, size_t n) {
    out[0] = '\0';
    if (clGetDeviceInfo(d, what, n, out, NULL) != CL_SUCCESS) {
        snprintf(out, n, "?");
    }
    out[n - 1] = '\0';
}

/* opencl-buffers.c */
int nf__cl_buffer_alloc(nf_backend * be, size_t size, void ** handle, nf_err * err);
void nf__cl_buffer_free(nf_backend * be, void * handle);
int nf__cl_upload(nf_backend * be, void * handle, size_t offs, const void * src, size_t n, nf_err * err);
int nf__cl_download(nf_backend * be, void * handle, size_t offs, void * dst, size_t n, nf_err * err);
int nf__cl_buffer_where(nf_backend * be, void * handle, char * out, size_t n, nf_err * err);
int nf__cl_reserve_buffer(struct nf_cl * c, cl_mem * buf, size_t * cur, size_t size, const char * what, nf_err * err);
int nf__cl_ensure_scratch(struct nf_cl * c, size_t size, nf_err * err);

/* opencl-program.c */
void nf__cl_build_options(const struct nf_cl * c, const char * clc_version, char * out, size_t n);
int nf__cl_build_program(struct nf_cl * c, const char * opts, char * dev_name, char * drv, char * plat_name,
                         nf_err * err);

/* opencl-gemm.c */
int nf__cl_choose_gemm(struct nf_cl * c, nf_err * err);
bool nf__cl_linear_supports(nf_backend * be, const nf_op * op);
int nf__cl_linear(nf_backend * be, const nf_op * op, nf_err * err);
/* LINEAR by chunks of rows: the GEMM's raw sums into scratch, then the epilogue; bf16
 * (--precision bf16-autocast): x and W rounded to bf16 first, the bf16 epilogue */
int nf__cl_linear_chunks(nf_backend * be, const nf_op * op, int bf16, nf_err * err);
/* EMBED_FEATURES, LABEL_TOKENS; bf16: the regressor's Linear(1, D) with autocast's roundings */
int nf__cl_embed_features_r(nf_backend * be, const nf_op * op, int bf16, nf_err * err);
int nf__cl_label_tokens_r(nf_backend * be, const nf_op * op, int bf16, nf_err * err);
bool nf__cl_conv1d_supports(nf_backend * be, const nf_op * op);
int nf__cl_conv1d(nf_backend * be, const nf_op * op, nf_err * err);
/* CONV1D; bf16 (--precision bf16-autocast): W and the im2col block rounded to bf16, the
 * epilogue with its bf16 flag (nf_conv1d_epilogue) */
int nf__cl_conv1d_r(nf_backend * be, const nf_op * op, int bf16, nf_err * err);
/* SpTransformer's BATCH_NORM, AXIAL_POS, BUCKET_ROUTE, BUCKET_GATHER: bf16 1 for
 * --precision bf16-autocast (BATCH_NORM and AXIAL_POS: the exact kernels' bf16 flag;
 * the sort net: kernels-bf16-spt.cl's, with the exact ones' arguments) */
int nf__cl_batch_norm_r(nf_backend * be, const nf_op * op, int bf16, nf_err * err);
int nf__cl_axial_pos_r(nf_backend * be, const nf_op * op, int bf16, nf_err * err);
int nf__cl_bucket_route_r(nf_backend * be, const nf_op * op, int bf16, nf_err * err);
int nf__cl_bucket_gather_r(nf_backend * be, const nf_op * op, int bf16, nf_err * err);
bool nf__cl_gemm_supports(nf_backend * be, const nf_op * op);
/* C[c_off + r*N + o] = sum_k A[a_off + r*lda + k] * B[b_off + o*K + k] (fp32; LINEAR's GEMM, no epilogue) */
int nf__cl_gemm_raw(struct nf_cl * c, cl_mem A, size_t a_off, size_t lda, cl_mem B, size_t b_off, cl_mem C,
                    size_t c_off, size_t M, size_t N, size_t K, nf_err * err);

/* opencl-bf16.c: --precision bf16-autocast (kernels-bf16.cl, kernels-bf16-spt.cl) */
#define NF_CL_BF16_AHD 256 /* ATTENTION head_dim limit (NF_BF16_AHD in kernels-bf16.cl) */
int nf__cl_bf16_launch(nf_backend * be, const struct nf_kernel * k, const nf_op * op, nf_err * err);
int nf__cl_gemm(nf_backend * be, const nf_op * op, nf_err * err);

/* opencl-train-b.c: the training ops, set B */
#define NF_CL_TRAIN_B(X) \
    X(attention_backward) X(embed_features_backward) X(label_tokens_backward) X(cross_entropy) X(mse_loss)
#define NF_CL_DECL(name)                                              \
    bool nf__cl_##name##_supports(nf_backend * be, const nf_op * op); \
    int nf__cl_##name(nf_backend * be, const nf_op * op, nf_err * err);
NF_CL_TRAIN_B(NF_CL_DECL)
/* opencl-train-c.c: the training ops, set C (TabSTAR) */
#define NF_CL_TRAIN_C(X) X(scatter_add_rows) X(clip_grad_norm) X(scale) X(dropout)
NF_CL_TRAIN_C(NF_CL_DECL)
#undef NF_CL_DECL

/* opencl-ops.c */
extern const struct nf_kernel nf__cl_kernels[NF_OP_COUNT];

/* ---- kernel launch ------------------------------------------------------------- */

struct karg {
    size_t size;
    const void * ptr;
};
#define KMEM(m)                           \
    {                                     \
        sizeof(cl_mem), &(cl_mem) { (m) } \
    }
#define KLONG(v)                                     \
    {                                                \
        sizeof(cl_long), &(cl_long) { (cl_long)(v) } \
    }
#define KINT(v)                                   \
    {                                             \
        sizeof(cl_int), &(cl_int) { (cl_int)(v) } \
    }
#define KFLT(v)                                         \
    {                                                   \
        sizeof(cl_float), &(cl_float) { (cl_float)(v) } \
    }
#define KLOCAL(n) \
    { (n), NULL }

int nf__cl_launch(struct nf_cl * c, int kid, const struct karg * a, int na, cl_uint dims, const size_t * gws_in,
                  const size_t * lws, nf_err * err);

#define LAUNCH(c, kid, dims, gws, lws, err, ...)                                                                  \
    nf__cl_launch((c), (kid), (const struct karg[]){__VA_ARGS__},                                                 \
                  (int) (sizeof((const struct karg[]){__VA_ARGS__}) / sizeof(struct karg)), (dims), (gws), (lws), \
                  (err))

/* ---- tensor helpers ------------------------------------------------------------- */

static inline cl_mem tmem(const nf_tensor * t) { return (cl_mem) t->buf->handle; }

/* element offset of a tensor view */
static inline cl_long toff(const nf_tensor * t) { return (cl_long) (t->offs / nf__dtype_size(t->type)); }

static inline int64_t dim(const nf_tensor * t, int i) { return i < t->ndim ? t->ne[i] : 1; }

static inline int64_t cols(const nf_tensor * t) {
    int64_t n = 1;
    for (int i = 1; i < t->ndim; i++) {
        n *= t->ne[i];
    }
    return n;
}

static inline bool has_tensor(const nf_tensor * t) { return t->buf != NULL && t->buf->handle != NULL; }

static inline bool is_f32(const nf_tensor * t) {
    return has_tensor(t) && t->type == NF_F32 && t->offs % sizeof(float) == 0;
}

static inline bool fits_int(int64_t v) { return v >= 0 && v <= INT32_MAX; }

#endif
