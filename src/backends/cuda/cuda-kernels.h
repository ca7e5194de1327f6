/*
 * cuda-kernels.h -- launchers of the CUDA backend's kernels (cuda-kernels.cu).
 *
 * Plain C interface, so that the host side (cuda.c) is C11 compiled with the
 * project's -Werror flags. Every pointer is a device pointer that already
 * includes the tensor's byte offset. Each launcher enqueues its kernels on
 * `st` (asynchronously) and returns cudaSuccess or the first launch error; on
 * error *kernel (if not NULL) names the kernel that failed.
 *
 * The numerics follow src/core/nf-impl.h op by op; the comment of each
 * kernel in cuda-kernels.cu says how. Kernels use no atomics and reduce in
 * a fixed order, so results are bitwise reproducible run to run.
 *
 * With NF_CUDA_EMU defined (the NOFALL_CUDA_EMU=ON test build) the same code
 * runs on the host through cuda-emu.h instead of the CUDA runtime.
 */
#ifndef NF_CUDA_KERNELS_H
#define NF_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef NF_CUDA_EMU
#include "cuda-emu.h"
#else
#include <cuda_runtime_api.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Threads per block of the row/column kernels (a multiple of 32). */
#define NF_CUDA_BLOCK 256

/* Verify that the kernels of this build have code loadable on the current
 * device (cudaFuncGetAttributes): sm_90 SASS or compute_90 PTX. */
cudaError_t nf__cuda_probe(const char ** kernel);

/* QUANTILE. x (n, F) -> B (F, nq). Scratch: nf__cuda_quantile_scratch bytes,
 * 256-byte aligned. Needs n*F <= INT_MAX (CUB offsets). */
size_t      nf__cuda_quantile_scratch(int64_t n, int64_t F);
cudaError_t nf__cuda_quantile(cudaStream_t st, const float * x, int64_t n, int64_t F,
                              int32_t nq, int32_t q_denom, float * B,
                              void * scratch, size_t scratch_size, const char ** kernel);

/* BUCKETIZE_NORM. xq/zq may be NULL when n_q == 0. */
cudaError_t nf__cuda_bucketize_norm(cudaStream_t st, const float * xs, int64_t n_s,
                                    const float * xq, int64_t n_q, int64_t F,
                                    const float * B, int64_t nb,
                                    float * zs, float * zq, const char ** kernel);

/* EMBED_FEATURES. z (n, F), w (D), b (D) -> tok (n, T, D), tokens 1..F. */
cudaError_t nf__cuda_embed_features(cudaStream_t st, const float * z, int64_t n, int64_t F,
                                    const float * w, const float * b,
                                    float * tok, int64_t T, int64_t D, const char ** kernel);

/* LABEL_TOKENS, token 0 of each of n rows of tok (n, T, D).
 * mode 0 class: yi (n) i32, E (C, D) (an out-of-range label writes NaN: the
 *               kernel cannot fail; nf_mitra_forward checks labels on the host);
 * mode 1 value: yf (n), w (D), b (D);  mode 2 mask: M (D) passed as E. */
cudaError_t nf__cuda_label_tokens(cudaStream_t st, int mode, int64_t n,
                                  const int32_t * yi, const float * yf,
                                  const float * E, int64_t C,
                                  const float * w, const float * b,
                                  float * tok, int64_t T, int64_t D, const char ** kernel);

/* LAYER_NORM over m rows of k elements. */
cudaError_t nf__cuda_layer_norm(cudaStream_t st, const float * x, int64_t ldx,
                                const float * g, const float * b, float eps,
                                float * y, int64_t ldy, int64_t m, int64_t k,
                                const char ** kernel);

/* LINEAR epilogue: t = s[r][o] (+ bias[o]); t = gelu(t) if act; 
 * y[r][o] = accumulate ? y[r][o] + t : t.  s may equal y (in place, then
 * accumulate must be 0). bias may be NULL. */
cudaError_t nf__cuda_linear_epilogue(cudaStream_t st, const float * s, int64_t lds,
                                     const float * bias, int act, int accumulate,
                                     float * y, int64_t ldy, int64_t m, int64_t n,
                                     const char ** kernel);

/* ATTENTION in one launch, for lk <= NF_CUDA_ATT_MAX_LK and head_dim <=
 * NF_CUDA_ATT_MAX_HD (Mitra's feature attention, and row attention over a
 * small support set): each block takes NF_CUDA_ATT_ROWS query rows of one
 * (group, head), keeps their whole score rows in shared memory and does the
 * same exact two-pass softmax as nf_k_softmax_rows (max, expf, double sum,
 * e * (1/sum)) between the two fp32 products. Strides as the op (nf-impl.h). */
#define NF_CUDA_ATT_MAX_LK 256
#define NF_CUDA_ATT_MAX_HD 128
#define NF_CUDA_ATT_ROWS   8
cudaError_t nf__cuda_attention_small(cudaStream_t st, const float * q, const float * k, const float * v, float * o,
                                     int64_t G, int64_t H, int64_t lq, int64_t lk, int64_t hd,
                                     int64_t q_gs, int64_t q_ss, int64_t kv_gs, int64_t kv_ss,
                                     int64_t o_gs, int64_t o_ss, float scale, const char ** kernel);

/* Row softmax in place: rows of length lk, contiguous (row stride lk). */
cudaError_t nf__cuda_softmax_rows(cudaStream_t st, float * S, int64_t rows, int64_t lk,
                                  const char ** kernel);

#ifdef __cplusplus
}
#endif
#endif /* NF_CUDA_KERNELS_H */
