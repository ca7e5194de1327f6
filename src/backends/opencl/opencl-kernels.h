/*
 * opencl-kernels.h -- the embedded kernel source (kernels-*.cl) and the launch geometry
 * that the host code must agree on with the kernels (shared by opencl-*.c and
 * bench/opencl-gemm.c).
 */
#ifndef NF_OPENCL_KERNELS_H
#define NF_OPENCL_KERNELS_H

#include <stddef.h>

/* the kernel files concatenated (CMakeLists.txt), NUL-terminated; nf__opencl_kernels_src_len excludes the NUL. */
extern const char * const nf__opencl_kernels_src;
extern const size_t nf__opencl_kernels_src_len;

/* nf_linear geometry, passed to the kernel build as -DNF_LIN_TM=... etc.:
 * a TM x TN output tile per WX x WY work-group, K in tiles of TK; vec = 1:
 * each work-item owns 4 contiguous columns (float4 math, TN == 4 * WX).
 * Measured on PoCL (GEMM.md): the float4 variant with 8 rows per work-item
 * is ~1.7x faster on a CPU device; GPUs get the classic strided 4x4 blocking. */
struct nf_cl_lin_geo {
    int tm, tn, tk, wx, wy, vec;
};

static inline struct nf_cl_lin_geo nf__cl_lin_geo(int device_is_cpu) {
    struct nf_cl_lin_geo cpu = {64, 64, 16, 16, 8, 1};
    struct nf_cl_lin_geo gpu = {64, 64, 16, 16, 16, 0};
    return device_is_cpu ? cpu : gpu;
}

/* nf_attention: NF_AQ query rows per work-group of NF_AWG work-items, head_dim <= NF_AHD. */
#define NF_CL_ATTN_ROWS   16
#define NF_CL_ATTN_WG     128
#define NF_CL_ATTN_MAX_HD 128
/* nf_attention_wide: 128 < head_dim <= 256, NF_AQW query rows per work-group */
#define NF_CL_ATTNW_ROWS   8
#define NF_CL_ATTNW_MAX_HD 256

/* nf_attn_bwd_q / nf_attn_bwd_kv (kernels-train-b.cl NF_ABW_WG, NF_ABW_HD):
 * work-group size, head_dim limit */
#define NF_CL_ABW_WG     64
#define NF_CL_ABW_MAX_HD 256
/* the column sums of EMBED_FEATURES_BACKWARD / LABEL_TOKENS_BACKWARD: row chunks */
#define NF_CL_TB_CHUNKS 64
/* nf_cross_entropy / nf_mse_loss: one work-group (kernels-train-b.cl NF_LOSS_WG) */
#define NF_CL_LOSS_WG 64

/* nf_batch_norm: rows per work-item (NF_BN_ROWS in kernels-norm.cl) */
#define NF_CL_BN_ROWS 16

#endif
