/*
 * opencl-kernels.h -- the embedded kernels.cl source and the launch geometry
 * that the host code must agree on with kernels.cl (shared by opencl.c and
 * bench/opencl-gemm.c).
 */
#ifndef NF_OPENCL_KERNELS_H
#define NF_OPENCL_KERNELS_H

#include <stddef.h>

/* kernels.cl, NUL-terminated; nf__opencl_kernels_src_len excludes the NUL. */
extern const char * const nf__opencl_kernels_src;
extern const size_t       nf__opencl_kernels_src_len;

/* nf_linear geometry, passed to the kernel build as -DNF_LIN_TM=... etc.:
 * TM x TN output tile per WX x WY work-group, K tiles of TK. */
#define NF_CL_LIN_TM 64
#define NF_CL_LIN_TN 64
#define NF_CL_LIN_TK 16
#define NF_CL_LIN_WX 16
#define NF_CL_LIN_WY 16
#define NF_CL_LIN_VEC 0   /* 1: float4 columns (requires TN == 4 * WX) */
/* nf_attention: NF_AQ query rows per work-group of NF_AWG work-items, head_dim <= NF_AHD. */
#define NF_CL_ATTN_ROWS   16
#define NF_CL_ATTN_WG     128
#define NF_CL_ATTN_MAX_HD 128

#endif
