/*
 * cuda-kernels.h -- launchers of the CUDA backend's kernels (cuda-kernels-*.cu).
 *
 * Plain C interface, so that the host side (cuda.c, cuda-ops.c) is C11 compiled with the
 * project's -Werror flags. In the launchers every pointer is a device pointer
 * that already includes the tensor's byte offset. Each launcher enqueues its kernels on
 * `st` (asynchronously) and returns cudaSuccess or the first launch error; on
 * error *kernel (if not NULL) names the kernel that failed.
 *
 * The numerics follow src/core/nf-impl.h op by op; the comment of each
 * kernel in cuda-kernels-*.cu says how. Kernels use no atomics and reduce in
 * a fixed order, so results are bitwise reproducible run to run.
 *
 * With NF_CUDA_EMU defined (the NOFALL_CUDA_EMU=ON test build) the same code
 * runs on the host through cuda-emu.h instead of the CUDA runtime.
 */
#ifndef NF_CUDA_KERNELS_H
#define NF_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "nf-impl.h"

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

/* ---- the kernels of the kernel table -------------------------------------
 * Every op NAME of nf-ops.def has
 *   int  nf__cuda_<name>(nf_backend *, const nf_op *, nf_err *)  the kernel
 *   bool nf__cuda_<name>_supports(nf_backend *, const nf_op *)   its limits
 * (the kernel-table types of nf-impl.h), declared here from nf-ops.def and
 * put in cuda-ops.c's kernel table. LINEAR, ATTENTION and CONV1D, which
 * drive cuBLAS from the host, are in cuda-ops.c; the others in the
 * cuda-kernels*.cu files. An op without them does not link (or is listed in
 * cuda-ops.c as one the backend lacks). */
#define NF_OP(NAME, name, SRC, DST, PARAMS, validate, flops)              \
    int nf__cuda_##name(nf_backend * be, const nf_op * op, nf_err * err); \
    bool nf__cuda_##name##_supports(nf_backend * be, const nf_op * op);
#include "nf-ops.def"

/* What the ops above need of the backend (cuda-ops.c): its stream, its scratch
 * (grown on demand; *size is what is available), the error of a failed
 * launch ("op NAME (label) on cuda:N: kernel K failed: ..."). */
cudaStream_t nf__cuda_op_stream(nf_backend * be);
int nf__cuda_op_scratch(nf_backend * be, size_t bytes, void ** out, size_t * size, nf_err * err);
int nf__cuda_op_launch_err(nf_backend * be, const nf_op * op, const char * kernel, cudaError_t e, nf_err * err);

/* ---- launchers used by the host-side ops (cuda-ops.c) -------------------- */

/* LINEAR epilogue: t = s[r][o] (+ bias[o]); t = gelu(t) if act; 
 * y[r][o] = accumulate ? y[r][o] + t : t.  s may equal y (in place, then
 * accumulate must be 0). bias may be NULL. */
cudaError_t nf__cuda_linear_epilogue(cudaStream_t st, const float * s, int64_t lds, const float * bias, int act,
                                     int accumulate, float * y, int64_t ldy, int64_t m, int64_t n,
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
                                     int64_t G, int64_t H, int64_t lq, int64_t lk, int64_t hd, int64_t q_gs,
                                     int64_t q_ss, int64_t kv_gs, int64_t kv_ss, int64_t o_gs, int64_t o_ss,
                                     float scale, int64_t drop_seed, int32_t drop_thr, float drop_scale,
                                     const char ** kernel);
/* ATTENTION's dropout (drop_thr > 0) on the probabilities S (nb, nl, lk) of the cuBLAS path: groups g0..,
 * query rows i0.., head h of H, lq query rows in all (the mask's element index, nf-ops.def) */
cudaError_t nf__cuda_attn_drop_rows(cudaStream_t st, float * S, int64_t nb, int64_t nl, int64_t lk, int64_t g0,
                                    int64_t i0, int64_t h, int64_t H, int64_t lq, int64_t seed, int32_t thr,
                                    float scale, const char ** kernel);

/* CONV1D (cuda-ops.c: im2col + cuBLAS GEMM + epilogue).
 * Weights to tap-major: Wt[o][k][c] = W[o][c][k] (W is PyTorch's (cout, cin, K)). */
cudaError_t nf__cuda_conv_weights(cudaStream_t st, const float * W, int64_t cout, int64_t cin, int64_t K, float * Wt,
                                  const char ** kernel);
/* im2col of gc sequences (x at the first; x_gs apart) x nr positions from t0:
 *   col[b*nr + r][k*cin + c] = x[b][t0 + r + k*dil - pad][c], 0 outside [0, len). */
cudaError_t nf__cuda_conv_im2col(cudaStream_t st, const float * x, int64_t ldx, int64_t x_gs, int64_t len, int64_t cin,
                                 int64_t K, int64_t dil, int64_t pad, int64_t t0, int64_t nr, int64_t gc, float * col,
                                 const char ** kernel);
/* t = s[b][r][o] (+ bias[o]); y[b][r][o] = accumulate ? y + t : t, for gc
 * sequences (s_gs, y_gs apart) x nr rows (lds, ldy) x cout columns. s may be
 * y (in place, accumulate 0); bias may be NULL. */
cudaError_t nf__cuda_conv_epilogue(cudaStream_t st, const float * s, int64_t lds, int64_t s_gs, const float * bias,
                                   int accumulate, float * y, int64_t ldy, int64_t y_gs, int64_t nr, int64_t gc,
                                   int64_t cout, const char ** kernel);

/* ---- --precision bf16-autocast (cuda-kernels-bf16.cu, cuda-bf16.c) -------- */
/* dst[r*cols + c] = the bf16 bits (nearest, ties to even) of src[r*lds + c] */
cudaError_t nf__cuda_bf16_pack(cudaStream_t st, const float * src, int64_t lds, int64_t rows, int64_t cols,
                               uint16_t * dst, const char ** kernel);
/* LINEAR epilogue on the fp32 sums s (m x n, ld n) of bf16 operands:
 * twice: t = bf16(t); t = bf16(t + bf16(bias)); act in fp32, rounded; y = acc ? y + t : t,
 * stream (SpTransformer's bf16 residual): y = bf16(y + t) */
cudaError_t nf__cuda_bf16_linear_epilogue(cudaStream_t st, const float * s, const float * bias, int act, int accumulate,
                                          int twice, int stream, float * y, int64_t ldy, int64_t m, int64_t n,
                                          const char ** kernel);
/* ATTENTION with bf16 rounding (q, k, v, the softmax numerators, o), head_dim <= NF_CUDA_BF16_AHD */
#define NF_CUDA_BF16_AHD 256
cudaError_t nf__cuda_bf16_attention(cudaStream_t st, const float * q, const float * k, const float * v, float * o,
                                    int64_t G, int64_t H, int64_t lq, int64_t lk, int64_t hd, int64_t q_gs,
                                    int64_t q_ss, int64_t kv_gs, int64_t kv_ss, int64_t o_gs, int64_t o_ss, float scale,
                                    const char ** kernel);
/* Linear(1, D) embeddings: label 0: EMBED_FEATURES (z n x F, tok[r][1+j]); 1: LABEL_TOKENS value (z = y, tok[r][0]) */
cudaError_t nf__cuda_bf16_embed(cudaStream_t st, int label, const float * z, int64_t n, int64_t F, const float * w,
                                const float * b, float * tok, int64_t T, int64_t D, const char ** kernel);

/* SpTransformer's rules (docs/precision.md "SpTransformer under CPU autocast"; the cpu's
 * cpu-bf16-spt.c): ATTENTION with p.bf16_stream over the groups g0 .. g0 + ng, S the rows'
 * scratch (ng H lq lk floats): s = R(R(q·kᵀ) scale), P = R(softmax(s)), o = R(P·V) */
cudaError_t nf__cuda_bf16_spt_attention(cudaStream_t st, const float * q, const float * k, const float * v, float * o,
                                        float * S, int64_t g0, int64_t ng, int64_t H, int64_t lq, int64_t lk,
                                        int64_t hd, int64_t q_gs, int64_t q_ss, int64_t kv_gs, int64_t kv_ss,
                                        int64_t o_gs, int64_t o_ss, float scale, const char ** kernel);
/* BUCKET_ROUTE: means (2 n_seq H nb E floats) and R (n_seq H nb nb) are scratch */
cudaError_t nf__cuda_bf16_bucket_route(cudaStream_t st, const struct nf_bucket_route_params * p, const float * q,
                                       const float * k, int32_t * sel, float * prob, float * means, float * R,
                                       const char ** kernel);
/* the exact kernels with their bf16-autocast rounding (bf16 1; 0: the table's kernel):
 * BUCKET_GATHER R(p * k), AXIAL_POS R(x + R(e0 + e1)), BATCH_NORM R(R(x) * a + sh) */
int nf__cuda_bucket_gather_r(nf_backend * be, const nf_op * op, int bf16, nf_err * err);
int nf__cuda_axial_pos_r(nf_backend * be, const nf_op * op, int bf16, nf_err * err);
int nf__cuda_batch_norm_r(nf_backend * be, const nf_op * op, int bf16, nf_err * err);
/* CONV1D's epilogue on the fp32 sums t (nr x cout): y = R(t + R(b)), accumulating R(y + that) */
cudaError_t nf__cuda_bf16_conv_epilogue(cudaStream_t st, const float * t, const float * bias, int accumulate, float * y,
                                        int64_t ldy, int64_t nr, int64_t cout, const char ** kernel);

/* Row softmax in place: rows of length lk, contiguous (row stride lk). */
cudaError_t nf__cuda_softmax_rows(cudaStream_t st, float * S, int64_t rows, int64_t lk, const char ** kernel);

#ifdef __cplusplus
}
#endif
#endif /* NF_CUDA_KERNELS_H */
