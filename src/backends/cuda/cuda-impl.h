/*
 * cuda-impl.h -- private to the CUDA backend's host code: the context
 * (device, stream, cuBLAS handle, scratch) and what its two files share.
 *   cuda.c       errors, device memory and scratch, transfers, the vtable,
 *                init / list
 *   cuda-ops.c   the cuBLAS GEMM, LINEAR, ATTENTION and CONV1D host code, the
 *                per-op limits and the kernel table (the other ops' kernels
 *                and launchers are in cuda-kernels-*.cu)
 *   cuda-bf16.c  --precision bf16-autocast (bf16 cuBLAS GEMM, cuda-kernels-bf16.cu)
 */
#ifndef NF_CUDA_IMPL_H
#define NF_CUDA_IMPL_H

#include "nf-impl.h"
#include "cuda-kernels.h"

#ifndef NF_CUDA_EMU
#include <cuda_runtime_api.h>
#include <cublas_v2.h>
#include "cublas-dl.h" /* cuBLAS is loaded on the first cuda device */
#endif

#include <stdint.h>

/* Work buffers for attention scores, for accumulating LINEAR chunks and for
 * CONV1D's im2col are capped at this many floats (256 MiB); larger problems
 * run in chunks.
 * the cuda.chunk_floats=<n> option (CLI: NF_CUDA_CHUNK_FLOATS) lowers the cap (tests use it
 * to exercise the chunked paths on small problems). */
#define NF_CUDA_CHUNK_FLOATS_DEFAULT ((int64_t) 64 * 1024 * 1024)
/* cuBLAS batched GEMMs: at most this many matrices per call. */
#define NF_CUDA_MAX_BATCH 65535

typedef struct nf_cuda_ctx {
    int device;
    cudaStream_t stream;
    cublasHandle_t blas;
    cublasComputeType_t compute;
    const char * compute_name;
    void * scratch;
    size_t scratch_size;
    int64_t chunk_floats;
    int attention_small; /* 0: cuda.attention=cublas (every ATTENTION through cuBLAS) */
    int bf16;            /* --precision bf16-autocast: ops through cuda-bf16.c */
} nf_cuda_ctx;

static inline nf_cuda_ctx * nf__cuda(nf_backend * be) { return (nf_cuda_ctx *) be->ctx; }

#define NF__F(t) ((float *) ((char *) (t)->buf->handle + (t)->offs))
#define NF__I(t) ((int32_t *) ((char *) (t)->buf->handle + (t)->offs))

static inline const char * nf__op_label(const nf_op * op) { return op->label ? op->label : "-"; }

/* cuda.c: scratch device memory, grown on demand (never shrunk) */
int nf__cuda_scratch(nf_backend * be, size_t bytes, void ** out, nf_err * err);

/* cuda-bf16.c: the launch of --precision bf16-autocast */
int nf__cuda_bf16_launch(nf_backend * be, const struct nf_kernel * k, const nf_op * op, nf_err * err);

/* cuda-ops.c: the kernel table */
extern const struct nf_kernel nf__cuda_kernels[NF_OP_COUNT];

#endif
