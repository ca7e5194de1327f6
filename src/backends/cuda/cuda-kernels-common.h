/*
 * cuda-kernels-common.h -- what the CUDA backend's kernel files share: the
 * build switches (device or host emulator), the device helpers, the launch
 * helpers and the op macros. The kernels (everything but the GEMMs, which go
 * through cuBLAS in cuda-ops.c), one file per op family, each its own
 * translation unit:
 *   cuda-kernels-tabular.cu      QUANTILE, BUCKETIZE_NORM, EMBED_FEATURES, LABEL_TOKENS
 *   cuda-kernels-norm.cu         LAYER_NORM, BATCH_NORM; the probe; the emulator's
 *                                implementation (NF_CUDA_EMU_IMPLEMENTATION)
 *   cuda-kernels-gemm.cu         the LINEAR and CONV1D kernels around cuBLAS
 *   cuda-kernels-attention.cu    ATTENTION (softmax, one-launch small), BUCKET_ROUTE,
 *                                BUCKET_GATHER
 *   cuda-kernels-elementwise.cu  FILL, AXIAL_POS, GATHER_ROWS
 *   cuda-kernels-train.cu        COL_SUM, ACT, ACT_BACKWARD, LAYER_NORM_BACKWARD,
 *                                ADAMW, COPY (the training ops, set A; GEMM is
 *                                cuBLAS in cuda-ops.c)
 *   cuda-kernels-train-b.cu      ATTENTION_BACKWARD, EMBED_FEATURES_BACKWARD,
 *                                LABEL_TOKENS_BACKWARD, CROSS_ENTROPY, MSE_LOSS
 *   cuda-kernels-train-c.cu      SCATTER_ADD_ROWS, CLIP_GRAD_NORM, SCALE
 *
 * Exactness rules (see src/core/nf-impl.h for each op's definition):
 *  - built WITHOUT -use_fast_math and WITH --fmad=false: nvcc contracts no
 *    a*b+c into an FMA behind our back, just as the cpu reference is built
 *    with -ffp-contract=off. Where the op definition says fmaf, we call fmaf.
 *  - '/' and sqrtf are IEEE round-to-nearest (nvcc's default -prec-div=true
 *    -prec-sqrt=true); expf and erff are the accurate libdevice versions
 *    (max 2 ulp), never __expf-style intrinsics.
 *  - no atomics: every reduction has a fixed shape and order (shared-memory
 *    trees, xor-butterflies whose lanes all end with the same bits, because
 *    fp addition is commutative), so results repeat bit for bit.
 *  - 64-bit indexing with grid-stride loops: any size is covered whatever
 *    the grid cap.
 *
 * Built twice: by nvcc for the device, or (NOFALL_CUDA_EMU=ON) by the host
 * C++ compiler against cuda-emu.h, which runs every block's threads as host
 * threads so that the same kernel code can be tested without a GPU.
 */
#ifndef NF_CUDA_KERNELS_COMMON_H
#define NF_CUDA_KERNELS_COMMON_H

#ifdef NF_CUDA_EMU
#include "cuda-emu.h"
#define NF_MAX_GRID 3 /* few blocks: grid-stride loops get exercised */
#define NF_UNROLL
#include <algorithm>
#include <vector>
#else
#include <cuda_runtime.h>
#include <cub/device/device_segmented_radix_sort.cuh>
#define NF_MAX_GRID                          65535
#define NF_UNROLL                            _Pragma("unroll")
#define NF_LAUNCH(kern, grid, block, stream) kern<<<(grid), (block), 0, (stream)>>>
#endif

#include "cuda-kernels.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define NF_FOR(i, n) \
    for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t) gridDim.x * blockDim.x)

/* ---- device helpers ------------------------------------------------------ */

/* ATTENTION's dropout factor of mask element i (nf-ops.def; DROPOUT's hash, nf_k_dropout): scale, or 0
 * where the element is dropped (the forward and ATTENTION_BACKWARD) */
__device__ __forceinline__ float nf_attn_drop(int64_t seed, int64_t i, int32_t thr, float scale) {
    uint64_t z = (uint64_t) seed + ((uint64_t) i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (int64_t) (z >> 40) >= (int64_t) thr ? scale : 0.0f;
}

/* GELU as the cpu reference computes it (cpu-kernels.c nf__gelu_block): float
 * product with the float constant 1/sqrt(2), erff, float products. */
__device__ __forceinline__ float nf_gelu(float t) { return 0.5f * t * (1.0f + erff(t * 0.70710678118654752440f)); }

/* Sum over the block (NF_CUDA_BLOCK threads), fixed tree order. Every thread
 * must call it; returns the sum to all. */
static __device__ inline double nf_block_sum(double v, double * red) {
    const int t = (int) threadIdx.x;
    red[t] = v;
    __syncthreads();
    for (int s = NF_CUDA_BLOCK / 2; s > 0; s >>= 1) {
        if (t < s) red[t] += red[t + s];
        __syncthreads();
    }
    const double r = red[0];
    __syncthreads();
    return r;
}

/* Warp sums and max by xor-butterfly: all 32 lanes get identical bits. */
__device__ __forceinline__ double nf_warp_sum(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float nf_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* LAYER_NORM's row statistics (one warp per row, all lanes call; LAYER_NORM
 * and LAYER_NORM_BACKWARD share them): sums in double, two passes,
 * mu = (float)(sum x / k); var = (float)(sum ((double)x-(double)mu)^2 / k);
 * rstd = 1.0f / sqrtf(var + eps). */
__device__ __forceinline__ void nf_ln_stats(const float * xr, int64_t k, float eps, int lane, float * mu_out,
                                            float * rstd_out) {
    double s = 0.0;
    for (int64_t c = lane; c < k; c += 32) s += xr[c];
    s = nf_warp_sum(s);
    const float mu = (float) (s / (double) k);
    double ss = 0.0;
    for (int64_t c = lane; c < k; c += 32) {
        const double d = (double) xr[c] - (double) mu;
        ss += d * d;
    }
    ss = nf_warp_sum(ss);
    const float var = (float) (ss / (double) k);
    *mu_out = mu;
    *rstd_out = 1.0f / sqrtf(var + eps);
}

/* --precision bf16-autocast: the bf16 bits of f, round to nearest, ties to even; a NaN
 * stays a quiet NaN; nf_bf16: f rounded to bf16, as a float */
__device__ __forceinline__ uint16_t nf_bf16_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t) ((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t) (u >> 16);
}
__device__ __forceinline__ float nf_bf16(float f) {
    const uint32_t u = (uint32_t) nf_bf16_bits(f) << 16;
    float r;
    memcpy(&r, &u, sizeof(r));
    return r;
}

/* BUCKET_ROUTE's pick over a row's probabilities P (nb): v* the first maximum,
 * prob = (P[v*], P[v*] - the largest other; 0 where there is none), as the cpu
 * reference's nf__cpu_route_pick */
__device__ __forceinline__ void nf_route_pick(const float * P, int64_t nb, int32_t * sel, float * prob) {
    int64_t best = 0;
    for (int64_t v = 1; v < nb; v++)
        if (P[v] > P[best]) best = v;
    float second = 0.0f;
    int have2 = 0;
    for (int64_t v = 0; v < nb; v++) {
        if (v == best) continue;
        if (!have2 || P[v] > second) second = P[v];
        have2 = 1;
    }
    *sel = (int32_t) best;
    prob[0] = P[best];
    prob[1] = have2 ? P[best] - second : 0.0f;
}
/* torch.bucketize(right=False) lower_bound, as ATen's cus_lower_bound:
 * first k with B[k] >= x; a NaN x (or NaN boundaries) gives nb. */
__device__ __forceinline__ int64_t nf_lower_bound(const float * B, int64_t nb, float x) {
    int64_t lo = 0, hi = nb;
    while (lo < hi) {
        const int64_t mid = lo + ((hi - lo) >> 1);
        if (!(B[mid] >= x))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* ---- sequence ops (SpTransformer) ------------------------------------------
 * Position-major tensors (a row is a position, its columns the channels).
 * The row kernels take a warp per row (lanes over the columns), as
 * nf_k_layer_norm; the row loop bound is uniform in a warp. Every output
 * element is computed by one thread in the reference's order of float
 * operations (no FMA: --fmad=false). */

#define NF_WARP_ROWS(r, n)                                                            \
    for (int64_t r = ((int64_t) blockIdx.x * blockDim.x + threadIdx.x) >> 5; r < (n); \
         r += ((int64_t) gridDim.x * blockDim.x) >> 5)

/* ---- launch helpers ---------------------------------------------------------- */

static inline unsigned nf_blocks(int64_t work, int64_t per_block) {
    int64_t nb = (work + per_block - 1) / per_block;
    if (nb > NF_MAX_GRID) nb = NF_MAX_GRID;
    if (nb < 1) nb = 1;
    return (unsigned) nb;
}

#define NF_CHECK_LAUNCH(name)                \
    do {                                     \
        cudaError_t e_ = cudaGetLastError(); \
        if (e_ != cudaSuccess) {             \
            if (kernel) *kernel = (name);    \
            return e_;                       \
        }                                    \
    } while (0)

static inline size_t nf_align256(size_t n) { return (n + 255) & ~(size_t) 255; }

/* ---- the ops (kernel-table entries: cuda-kernels.h, cuda-ops.c) ---------------- */

#define NF_F(t) ((float *) ((char *) (t)->buf->handle + (t)->offs))
#define NF_I(t) ((int32_t *) ((char *) (t)->buf->handle + (t)->offs))
/* run a launcher; on failure report the kernel it names */
#define NF_OP_LAUNCH(call)                                                                              \
    do {                                                                                                \
        const char * kname_ = NULL;                                                                     \
        cudaError_t e_ = (call);                                                                        \
        if (e_ != cudaSuccess) return nf__cuda_op_launch_err(be, op, kname_ ? kname_ : #call, e_, err); \
    } while (0)
#define NF_K (&kname_)

#endif /* NF_CUDA_KERNELS_COMMON_H */
