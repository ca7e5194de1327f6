/*
 * cuda-kernels.cu -- the CUDA backend's own kernels (everything but the
 * GEMMs, which go through cuBLAS in cuda-ops.c).
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
#ifdef NF_CUDA_EMU
#define NF_CUDA_EMU_IMPLEMENTATION
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

/* GELU as the cpu reference computes it (cpu-kernels.c nf__gelu): float
 * product with the float constant 1/sqrt(2), erff, float products. */
__device__ __forceinline__ float nf_gelu(float t) { return 0.5f * t * (1.0f + erff(t * 0.70710678118654752440f)); }

/* Sum over the block (NF_CUDA_BLOCK threads), fixed tree order. Every thread
 * must call it; returns the sum to all. */
__device__ double nf_block_sum(double v, double * red) {
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

/* ---- QUANTILE ------------------------------------------------------------ */

/* xt (F, n) = transpose of x (n, F): writes coalesced. */
__global__ void nf_k_transpose(const float * __restrict__ x, int64_t n, int64_t F, float * __restrict__ xt) {
    NF_FOR(e, n * F) {
        const int64_t j = e / n, i = e - j * n;
        xt[e] = x[i * F + j];
    }
}

/* flag[j] = column j of xt holds a NaN. One block per column. */
__global__ void nf_k_col_has_nan(const float * __restrict__ xt, int64_t n, int64_t F, int * __restrict__ flag) {
    for (int64_t j = blockIdx.x; j < F; j += gridDim.x) {
        int any = 0;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
            if (isnan(xt[j * n + i])) any = 1;
        any = __syncthreads_or(any);
        if (threadIdx.x == 0) flag[j] = any ? 1 : 0;
    }
}

__global__ void nf_k_segment_offsets(int * __restrict__ off, int64_t F, int64_t n) {
    NF_FOR(j, F + 1) off[j] = (int) (j * n);
}

__global__ void nf_k_fill(float * __restrict__ p, int64_t count, float v) { NF_FOR(i, count) p[i] = v; }

/* B[j][k-1] from the ascending column v = sorted + j*n (op doc, verbatim). */
__global__ void nf_k_quantile_lerp(const float * __restrict__ sorted, const int * __restrict__ nanflag, int64_t n,
                                   int64_t F, int32_t nq, int32_t q_denom, float * __restrict__ B) {
    NF_FOR(e, F * nq) {
        const int64_t j = e / nq;
        const int32_t k = (int32_t) (e - j * nq) + 1;
        float r;
        if (nanflag[j]) {
            r = NAN;
        } else {
            const float q = (float) k / (float) q_denom;
            const float pos = q * (float) (n - 1);
            int64_t lo = (int64_t) pos;
            const float w = pos - (float) lo;
            int64_t hi = (int64_t) ceilf(pos);
            /* only reachable with q outside [0,1]; keeps reads in the column */
            if (lo < 0) lo = 0;
            if (lo > n - 1) lo = n - 1;
            if (hi < 0) hi = 0;
            if (hi > n - 1) hi = n - 1;
            const float * v = sorted + j * n;
            const float a = v[lo], b = v[hi];
            r = fabsf(w) < 0.5f ? fmaf(w, b - a, a) : fmaf(w - 1.0f, b - a, b);
        }
        B[e] = r;
    }
}

/* ---- BUCKETIZE_NORM -------------------------------------------------------- */

/* One block per column j. Pass 1 writes u = idx/n_s into zs and sums it;
 * pass 2 centres it and sums the squares; pass 3 scales. Each thread only
 * rereads the elements it wrote itself. Sums in double, as the op allows:
 * sum_s u and sum_s u*u with u*u a float product, exactly as the C
 * expression `double acc; acc += u*u;`. */
__global__ void nf_k_bucketize_norm(const float * __restrict__ xs, int64_t n_s, const float * __restrict__ xq,
                                    int64_t n_q, int64_t F, const float * __restrict__ B, int64_t nb,
                                    float * __restrict__ zs, float * __restrict__ zq) {
    __shared__ double red[NF_CUDA_BLOCK];
    const float fn = (float) n_s;
    for (int64_t j = blockIdx.x; j < F; j += gridDim.x) {
        const float * Bj = B + j * nb;
        double s = 0.0;
        for (int64_t i = threadIdx.x; i < n_s; i += blockDim.x) {
            const float u = (float) nf_lower_bound(Bj, nb, xs[i * F + j]) / fn;
            zs[i * F + j] = u;
            s += u;
        }
        s = nf_block_sum(s, red);
        const float mean = (float) s / fn;
        double ss = 0.0;
        for (int64_t i = threadIdx.x; i < n_s; i += blockDim.x) {
            const float u = zs[i * F + j] - mean;
            zs[i * F + j] = u;
            ss += u * u;
        }
        ss = nf_block_sum(ss, red);
        const float var = (float) ss / fn;
        const float sd = sqrtf(var);
        for (int64_t i = threadIdx.x; i < n_s; i += blockDim.x) zs[i * F + j] = var == 0.0f ? 0.0f : zs[i * F + j] / sd;
        for (int64_t i = threadIdx.x; i < n_q; i += blockDim.x) {
            const float u = (float) nf_lower_bound(Bj, nb, xq[i * F + j]) / fn - mean;
            zq[i * F + j] = var == 0.0f ? 0.0f : u / sd;
        }
    }
}

/* ---- EMBED_FEATURES / LABEL_TOKENS --------------------------------------- */

/* tok[r][1+j][d] = z[r][j]*w[d] + b[d]: a rounded product, then a rounded
 * sum (no FMA: --fmad=false). */
__global__ void nf_k_embed_features(const float * __restrict__ z, int64_t n, int64_t F, const float * __restrict__ w,
                                    const float * __restrict__ b, float * __restrict__ tok, int64_t T, int64_t D) {
    NF_FOR(e, n * F * D) {
        const int64_t d = e % D;
        const int64_t rj = e / D;
        const int64_t j = rj % F, r = rj / F;
        tok[(r * T + 1 + j) * D + d] = z[r * F + j] * w[d] + b[d];
    }
}

__global__ void nf_k_label_tokens(int mode, int64_t n, const int32_t * __restrict__ yi, const float * __restrict__ yf,
                                  const float * __restrict__ E, int64_t C, const float * __restrict__ w,
                                  const float * __restrict__ b, float * __restrict__ tok, int64_t T, int64_t D) {
    NF_FOR(e, n * D) {
        const int64_t r = e / D, d = e - r * D;
        float v;
        if (mode == 0) {
            const int32_t c = yi[r];
            v = (c >= 0 && c < C) ? E[(int64_t) c * D + d] : NAN;
        } else if (mode == 1) {
            v = yf[r] * w[d] + b[d];
        } else {
            v = E[d];
        }
        tok[r * T * D + d] = v;
    }
}

/* ---- LAYER_NORM ------------------------------------------------------------ */

/* One warp per row, two passes, as the cpu reference: sums in double,
 * mu = (float)(sum x / k); var = (float)(sum ((double)x-(double)mu)^2 / k);
 * rstd = 1.0f / sqrtf(var + eps); y = (x-mu) * rstd * g + b (float ops,
 * left to right, no FMA). */
__global__ void nf_k_layer_norm(const float * x, int64_t ldx, const float * __restrict__ g,
                                const float * __restrict__ b, float eps, float * y, int64_t ldy, int64_t m, int64_t k) {
    const int lane = (int) (threadIdx.x & 31);
    const int64_t warp = ((int64_t) blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int64_t nwarps = ((int64_t) gridDim.x * blockDim.x) >> 5;
    for (int64_t r = warp; r < m; r += nwarps) {
        const float * xr = x + r * ldx;
        float * yr = y + r * ldy;
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
        const float rstd = 1.0f / sqrtf(var + eps);
        for (int64_t c = lane; c < k; c += 32) yr[c] = (xr[c] - mu) * rstd * g[c] + b[c];
    }
}

/* ---- LINEAR epilogue ------------------------------------------------------- */

__global__ void nf_k_linear_epilogue(const float * s, int64_t lds, const float * __restrict__ bias, int act,
                                     int accumulate, float * y, int64_t ldy, int64_t m, int64_t n) {
    NF_FOR(e, m * n) {
        const int64_t r = e / n, o = e - r * n;
        float t = s[r * lds + o];
        if (bias) t = t + bias[o];
        if (act) t = nf_gelu(t);
        float * yp = y + r * ldy + o;
        *yp = accumulate ? *yp + t : t;
    }
}

/* ---- softmax (ATTENTION) --------------------------------------------------- */

/* One warp per row: max, e = expf(s - max) stored in place and summed
 * (per lane in double, then a butterfly), then p = e * (1.0f / (float)sum)
 * as the cpu reference normalises. */
__global__ void nf_k_softmax_rows(float * S, int64_t rows, int64_t lk) {
    const int lane = (int) (threadIdx.x & 31);
    const int64_t warp = ((int64_t) blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int64_t nwarps = ((int64_t) gridDim.x * blockDim.x) >> 5;
    for (int64_t r = warp; r < rows; r += nwarps) {
        float * s = S + r * lk;
        float mx = -INFINITY;
        for (int64_t j = lane; j < lk; j += 32) mx = fmaxf(mx, s[j]);
        mx = nf_warp_max(mx);
        double sum = 0.0;
        for (int64_t j = lane; j < lk; j += 32) {
            const float e = expf(s[j] - mx);
            s[j] = e;
            sum += e;
        }
        sum = nf_warp_sum(sum);
        const float inv = 1.0f / (float) sum;
        for (int64_t j = lane; j < lk; j += 32) s[j] = s[j] * inv;
    }
}

/* ---- ATTENTION, small lk: one launch ------------------------------------------ */

#define NF_ATT_TK      32                 /* keys (values) per shared-memory tile */
#define NF_ATT_THREADS NF_CUDA_ATT_MAX_HD /* one thread per output column         */

/* A barrier (the previous tile's readers are done), rows j0 .. j0+nk-1 of
 * src (row stride ss, E floats each) into Ts, a barrier; returns nk. */
__device__ __forceinline__ int nf_att_tile(float (*Ts)[NF_CUDA_ATT_MAX_HD + 1], const float * __restrict__ src,
                                           int64_t ss, int j0, int LK, int E) {
    const int nk = LK - j0 < NF_ATT_TK ? LK - j0 : NF_ATT_TK;
    __syncthreads();
    for (int idx = (int) threadIdx.x; idx < nk * E; idx += NF_ATT_THREADS) {
        const int jj = idx / E, e = idx - jj * E;
        Ts[jj][e] = src[(int64_t) (j0 + jj) * ss + e];
    }
    __syncthreads();
    return nk;
}

/* Work item = (group g, head h, tile of NF_CUDA_ATT_ROWS query rows), taken
 * grid-stride. Per item:
 *   Qs (rows, hd)      the query rows
 *   S  (rows, lk)      s = (q . k, an fmaf chain over e) * scale, K by tiles
 *   softmax rows of S  (a warp per row; same sequence as nf_k_softmax_rows)
 *   o  (rows, hd)      o = sum_j p_j v_j, an fmaf chain over j, V by tiles
 * Tiles are padded by one float per row, so the score loop (lanes = keys)
 * reads distinct banks; in the value loop lanes are output columns. */
__global__ void nf_k_attention_small(const float * __restrict__ q, const float * __restrict__ k,
                                     const float * __restrict__ v, float * __restrict__ o, int64_t G, int64_t H,
                                     int64_t lq, int64_t lk, int64_t hd, int64_t q_gs, int64_t q_ss, int64_t kv_gs,
                                     int64_t kv_ss, int64_t o_gs, int64_t o_ss, float scale) {
    __shared__ float Qs[NF_CUDA_ATT_ROWS][NF_CUDA_ATT_MAX_HD];
    __shared__ float Ts[NF_ATT_TK][NF_CUDA_ATT_MAX_HD + 1];
    __shared__ float S[NF_CUDA_ATT_ROWS][NF_CUDA_ATT_MAX_LK];
    __shared__ float Inv[NF_CUDA_ATT_ROWS];
    const int t = (int) threadIdx.x, lane = t & 31, warp = t >> 5;
    const int E = (int) hd, LK = (int) lk;
    const int64_t ntiles = (lq + NF_CUDA_ATT_ROWS - 1) / NF_CUDA_ATT_ROWS;
    const int64_t items = G * H * ntiles;
    for (int64_t it = blockIdx.x; it < items; it += gridDim.x) {
        const int64_t tile = it % ntiles, gh = it / ntiles;
        const int64_t h = gh % H, g = gh / H;
        const int64_t i0 = tile * NF_CUDA_ATT_ROWS;
        const int nl = (int) (lq - i0 < NF_CUDA_ATT_ROWS ? lq - i0 : NF_CUDA_ATT_ROWS);
        const float * qb = q + g * q_gs + i0 * q_ss + h * hd;
        const float * kb = k + g * kv_gs + h * hd;
        const float * vb = v + g * kv_gs + h * hd;
        float * ob = o + g * o_gs + i0 * o_ss + h * hd;

        for (int idx = t; idx < NF_CUDA_ATT_ROWS * E; idx += NF_ATT_THREADS) {
            const int i = idx / E, e = idx - i * E;
            Qs[i][e] = i < nl ? qb[(int64_t) i * q_ss + e] : 0.0f;
        }
        /* scores */
        for (int j0 = 0; j0 < LK; j0 += NF_ATT_TK) {
            const int nk = nf_att_tile(Ts, kb, kv_ss, j0, LK, E); /* (its first barrier: Qs written) */
            for (int idx = t; idx < NF_CUDA_ATT_ROWS * NF_ATT_TK; idx += NF_ATT_THREADS) {
                const int i = idx / NF_ATT_TK, jj = idx - i * NF_ATT_TK;
                if (i < nl && jj < nk) {
                    float s = 0.0f;
                    for (int e = 0; e < E; e++) s = fmaf(Qs[i][e], Ts[jj][e], s);
                    S[i][j0 + jj] = s * scale;
                }
            }
        }
        __syncthreads();
        /* softmax, a warp per row (the loop bound is uniform in a warp) */
        for (int i = warp; i < nl; i += NF_ATT_THREADS / 32) {
            float mx = -INFINITY;
            for (int j = lane; j < LK; j += 32) mx = fmaxf(mx, S[i][j]);
            mx = nf_warp_max(mx);
            double sum = 0.0;
            for (int j = lane; j < LK; j += 32) {
                const float e = expf(S[i][j] - mx);
                S[i][j] = e;
                sum += e;
            }
            sum = nf_warp_sum(sum);
            if (lane == 0) Inv[i] = 1.0f / (float) sum;
        }
        __syncthreads();
        for (int idx = t; idx < nl * LK; idx += NF_ATT_THREADS) {
            const int i = idx / LK, j = idx - i * LK;
            S[i][j] = S[i][j] * Inv[i];
        }
        /* values */
        float acc[NF_CUDA_ATT_ROWS];
        NF_UNROLL
        for (int i = 0; i < NF_CUDA_ATT_ROWS; i++) acc[i] = 0.0f;
        for (int j0 = 0; j0 < LK; j0 += NF_ATT_TK) {
            const int nk = nf_att_tile(Ts, vb, kv_ss, j0, LK, E); /* (its first barrier: S normalised) */
            if (t < E) {
                for (int jj = 0; jj < nk; jj++) {
                    const float vv = Ts[jj][t];
                    NF_UNROLL
                    for (int i = 0; i < NF_CUDA_ATT_ROWS; i++) acc[i] = fmaf(S[i][j0 + jj], vv, acc[i]);
                }
            }
        }
        if (t < E) {
            NF_UNROLL
            for (int i = 0; i < NF_CUDA_ATT_ROWS; i++)
                if (i < nl) ob[(int64_t) i * o_ss + t] = acc[i];
        }
        __syncthreads(); /* before the next item overwrites Qs, Ts and S */
    }
}

/* ---- launchers ------------------------------------------------------------- */

static unsigned nf_blocks(int64_t work, int64_t per_block) {
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

static size_t nf_align256(size_t n) { return (n + 255) & ~(size_t) 255; }

extern "C" cudaError_t nf__cuda_probe(const char ** kernel) {
#ifdef NF_CUDA_EMU
    (void) kernel;
    return cudaSuccess;
#else
    struct cudaFuncAttributes a;
    cudaError_t e = cudaFuncGetAttributes(&a, nf_k_layer_norm);
    if (e != cudaSuccess && kernel) *kernel = "nf_k_layer_norm";
    return e;
#endif
}

static size_t nf_sort_temp_bytes(int64_t n, int64_t F) {
#ifdef NF_CUDA_EMU
    (void) n;
    (void) F;
    return 256;
#else
    size_t bytes = 0;
    cudaError_t e = cub::DeviceSegmentedRadixSort::SortKeys(
        (void *) NULL, bytes, (const float *) NULL, (float *) NULL, (int) (n * F), (int) F, (const int *) NULL,
        (const int *) NULL, 0, (int) (sizeof(float) * 8), (cudaStream_t) 0);
    if (e != cudaSuccess) {
        (void) cudaGetLastError();
        return 0;
    }
    return bytes;
#endif
}

static size_t nf_quantile_scratch(int64_t n, int64_t F) {
    if (n <= 0 || F <= 0) return 0;
    const size_t items = (size_t) n * (size_t) F;
    return 2 * nf_align256(items * sizeof(float)) + nf_align256((size_t) (F + 1) * sizeof(int)) +
           nf_align256((size_t) F * sizeof(int)) + nf_align256(nf_sort_temp_bytes(n, F));
}

static cudaError_t nf_quantile(cudaStream_t st, const float * x, int64_t n, int64_t F, int32_t nq, int32_t q_denom,
                               float * B, void * scratch, size_t scratch_size, const char ** kernel) {
    if (F <= 0 || nq <= 0) return cudaSuccess;
    if (n <= 0) { /* quantile of an empty column: NaN, as torch */
        NF_LAUNCH(nf_k_fill, nf_blocks(F * nq, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)(B, F * nq, NAN);
        NF_CHECK_LAUNCH("nf_k_fill");
        return cudaSuccess;
    }
    const size_t items = (size_t) n * (size_t) F;
    char * p = (char *) scratch;
    float * xt = (float *) p;
    p += nf_align256(items * sizeof(float));
    float * sorted = (float *) p;
    p += nf_align256(items * sizeof(float));
    int * off = (int *) p;
    p += nf_align256((size_t) (F + 1) * sizeof(int));
    int * flag = (int *) p;
    p += nf_align256((size_t) F * sizeof(int));
    size_t used = (size_t) (p - (char *) scratch);
    if (used > scratch_size) {
        if (kernel) *kernel = "quantile scratch";
        return cudaErrorInvalidValue;
    }
    void * temp = p;
    size_t temp_bytes = scratch_size - used;

    NF_LAUNCH(nf_k_transpose, nf_blocks((int64_t) items, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)(x, n, F, xt);
    NF_CHECK_LAUNCH("nf_k_transpose");
    NF_LAUNCH(nf_k_col_has_nan, nf_blocks(F, 1), NF_CUDA_BLOCK, st)(xt, n, F, flag);
    NF_CHECK_LAUNCH("nf_k_col_has_nan");
    NF_LAUNCH(nf_k_segment_offsets, nf_blocks(F + 1, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)(off, F, n);
    NF_CHECK_LAUNCH("nf_k_segment_offsets");

#ifdef NF_CUDA_EMU
    /* Host stand-in for CUB: ascending per segment, by the same total
     * order on bit patterns that a float radix sort uses. */
    (void) temp;
    (void) temp_bytes;
    {
        struct radix_less {
            static uint32_t key(float f) {
                uint32_t u;
                memcpy(&u, &f, 4);
                return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
            }
            bool operator()(float a, float b) const { return key(a) < key(b); }
        };
        memcpy(sorted, xt, items * sizeof(float));
        for (int64_t j = 0; j < F; j++) std::stable_sort(sorted + j * n, sorted + (j + 1) * n, radix_less());
    }
#else
    {
        cudaError_t e = cub::DeviceSegmentedRadixSort::SortKeys(
            temp, temp_bytes, (const float *) xt, sorted, (int) items, (int) F, (const int *) off,
            (const int *) (off + 1), 0, (int) (sizeof(float) * 8), st);
        if (e != cudaSuccess) {
            if (kernel) *kernel = "cub::DeviceSegmentedRadixSort::SortKeys";
            return e;
        }
        NF_CHECK_LAUNCH("cub::DeviceSegmentedRadixSort::SortKeys");
    }
#endif

    NF_LAUNCH(nf_k_quantile_lerp, nf_blocks(F * nq, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)
    (sorted, flag, n, F, nq, q_denom, B);
    NF_CHECK_LAUNCH("nf_k_quantile_lerp");
    return cudaSuccess;
}

static cudaError_t nf_bucketize_norm(cudaStream_t st, const float * xs, int64_t n_s, const float * xq, int64_t n_q,
                                     int64_t F, const float * B, int64_t nb, float * zs, float * zq,
                                     const char ** kernel) {
    if (F <= 0 || (n_s <= 0 && n_q <= 0)) return cudaSuccess;
    if (n_q <= 0) {
        xq = NULL;
        zq = NULL;
        n_q = 0;
    }
    NF_LAUNCH(nf_k_bucketize_norm, nf_blocks(F, 1), NF_CUDA_BLOCK, st)(xs, n_s, xq, n_q, F, B, nb, zs, zq);
    NF_CHECK_LAUNCH("nf_k_bucketize_norm");
    return cudaSuccess;
}

static cudaError_t nf_embed_features(cudaStream_t st, const float * z, int64_t n, int64_t F, const float * w,
                                     const float * b, float * tok, int64_t T, int64_t D, const char ** kernel) {
    const int64_t work = n * F * D;
    if (work <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_embed_features, nf_blocks(work, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)(z, n, F, w, b, tok, T, D);
    NF_CHECK_LAUNCH("nf_k_embed_features");
    return cudaSuccess;
}

static cudaError_t nf_label_tokens(cudaStream_t st, int mode, int64_t n, const int32_t * yi, const float * yf,
                                   const float * E, int64_t C, const float * w, const float * b, float * tok, int64_t T,
                                   int64_t D, const char ** kernel) {
    const int64_t work = n * D;
    if (work <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_label_tokens, nf_blocks(work, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)
    (mode, n, yi, yf, E, C, w, b, tok, T, D);
    NF_CHECK_LAUNCH("nf_k_label_tokens");
    return cudaSuccess;
}

static cudaError_t nf_layer_norm(cudaStream_t st, const float * x, int64_t ldx, const float * g, const float * b,
                                 float eps, float * y, int64_t ldy, int64_t m, int64_t k, const char ** kernel) {
    if (m <= 0 || k <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_layer_norm, nf_blocks(m, NF_CUDA_BLOCK / 32), NF_CUDA_BLOCK, st)(x, ldx, g, b, eps, y, ldy, m, k);
    NF_CHECK_LAUNCH("nf_k_layer_norm");
    return cudaSuccess;
}

/* ---- the ops (kernel-table entries, see NF_CUDA_DEVICE_OPS) ---------------- */

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

int nf__cuda_op_quantile(nf_backend * be, const nf_op * op, nf_err * err) {
    const int64_t n = op->src[0].ne[0], F = op->src[0].ne[1];
    void * scratch = NULL;
    size_t size = 0;
    int rc = nf__cuda_op_scratch(be, nf_quantile_scratch(n, F), &scratch, &size, err);
    if (rc != NF_OK) return rc;
    NF_OP_LAUNCH(nf_quantile(nf__cuda_op_stream(be), NF_F(&op->src[0]), n, F, op->p.quantile.nq, op->p.quantile.q_denom,
                             NF_F(&op->dst[0]), scratch, size, NF_K));
    return NF_OK;
}
bool nf__cuda_ok_quantile(nf_backend * be, const nf_op * op) {
    const struct nf_quantile_params * p = &op->p.quantile;
    const int64_t n = op->src[0].ne[0], F = op->src[0].ne[1];
    return op->src[0].ndim == 2 && p->q_denom > 0 && p->nq >= 0 && n >= 0 && F >= 0 &&
           (n == 0 || F <= INT_MAX / n); /* CUB segmented sort: int item counts */
}

int nf__cuda_op_bucketize_norm(nf_backend * be, const nf_op * op, nf_err * err) {
    const int64_t n_s = op->src[0].ne[0], F = op->src[0].ne[1];
    const int64_t n_q = (op->src[1].buf && op->dst[1].buf) ? op->src[1].ne[0] : 0;
    const int64_t nb = op->src[2].ne[1];
    NF_OP_LAUNCH(nf_bucketize_norm(nf__cuda_op_stream(be), NF_F(&op->src[0]), n_s, n_q ? NF_F(&op->src[1]) : NULL, n_q,
                                   F, NF_F(&op->src[2]), nb, NF_F(&op->dst[0]), n_q ? NF_F(&op->dst[1]) : NULL, NF_K));
    return NF_OK;
}
bool nf__cuda_ok_bucketize_norm(nf_backend * be, const nf_op * op) { return true; }

int nf__cuda_op_embed_features(nf_backend * be, const nf_op * op, nf_err * err) {
    const nf_tensor * tok = &op->dst[0];
    NF_OP_LAUNCH(nf_embed_features(nf__cuda_op_stream(be), NF_F(&op->src[0]), op->src[0].ne[0], op->src[0].ne[1],
                                   NF_F(&op->src[1]), NF_F(&op->src[2]), NF_F(tok), tok->ne[1], tok->ne[2], NF_K));
    return NF_OK;
}
bool nf__cuda_ok_embed_features(nf_backend * be, const nf_op * op) { return true; }

int nf__cuda_op_label_tokens(nf_backend * be, const nf_op * op, nf_err * err) {
    const nf_tensor * tok = &op->dst[0];
    const int64_t n = tok->ne[0], T = tok->ne[1], D = tok->ne[2];
    cudaStream_t st = nf__cuda_op_stream(be);
    switch (op->p.label_tokens.mode) {
        case NF_LABEL_CLASS:
            NF_OP_LAUNCH(nf_label_tokens(st, 0, n, NF_I(&op->src[0]), NULL, NF_F(&op->src[1]), op->src[1].ne[0], NULL,
                                         NULL, NF_F(tok), T, D, NF_K));
            return NF_OK;
        case NF_LABEL_VALUE:
            NF_OP_LAUNCH(nf_label_tokens(st, 1, n, NULL, NF_F(&op->src[0]), NULL, 0, NF_F(&op->src[1]),
                                         NF_F(&op->src[2]), NF_F(tok), T, D, NF_K));
            return NF_OK;
        case NF_LABEL_MASK:
            NF_OP_LAUNCH(
                nf_label_tokens(st, 2, n, NULL, NULL, NF_F(&op->src[1]), 1, NULL, NULL, NF_F(tok), T, D, NF_K));
            return NF_OK;
        default: break;
    }
    return nf__err_set(err, NF_ERR_UNSUPPORTED, "op LABEL_TOKENS (%s) on %s: unknown label mode %d",
                       op->label ? op->label : "-", be->name, (int) op->p.label_tokens.mode);
}
bool nf__cuda_ok_label_tokens(nf_backend * be, const nf_op * op) {
    const int mode = op->p.label_tokens.mode;
    if (mode == NF_LABEL_CLASS) return op->src[0].type == NF_I32;
    return mode == NF_LABEL_VALUE || mode == NF_LABEL_MASK;
}

int nf__cuda_op_layer_norm(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_layer_norm_params * p = &op->p.layer_norm;
    NF_OP_LAUNCH(nf_layer_norm(nf__cuda_op_stream(be), NF_F(&op->src[0]), p->ldx, NF_F(&op->src[1]), NF_F(&op->src[2]),
                               p->eps, NF_F(&op->dst[0]), p->ldy, p->m, p->k, NF_K));
    return NF_OK;
}
bool nf__cuda_ok_layer_norm(nf_backend * be, const nf_op * op) { return true; }

extern "C" cudaError_t nf__cuda_linear_epilogue(cudaStream_t st, const float * s, int64_t lds, const float * bias,
                                                int act, int accumulate, float * y, int64_t ldy, int64_t m, int64_t n,
                                                const char ** kernel) {
    const int64_t work = m * n;
    if (work <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_linear_epilogue, nf_blocks(work, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)
    (s, lds, bias, act, accumulate, y, ldy, m, n);
    NF_CHECK_LAUNCH("nf_k_linear_epilogue");
    return cudaSuccess;
}

extern "C" cudaError_t nf__cuda_attention_small(cudaStream_t st, const float * q, const float * k, const float * v,
                                                float * o, int64_t G, int64_t H, int64_t lq, int64_t lk, int64_t hd,
                                                int64_t q_gs, int64_t q_ss, int64_t kv_gs, int64_t kv_ss, int64_t o_gs,
                                                int64_t o_ss, float scale, const char ** kernel) {
    if (G <= 0 || H <= 0 || lq <= 0 || hd <= 0) return cudaSuccess;
    if (lk < 1 || lk > NF_CUDA_ATT_MAX_LK || hd > NF_CUDA_ATT_MAX_HD) {
        if (kernel) *kernel = "nf_k_attention_small (lk or head_dim out of range)";
        return cudaErrorInvalidValue;
    }
    const int64_t items = G * H * ((lq + NF_CUDA_ATT_ROWS - 1) / NF_CUDA_ATT_ROWS);
    NF_LAUNCH(nf_k_attention_small, nf_blocks(items, 1), NF_ATT_THREADS, st)
    (q, k, v, o, G, H, lq, lk, hd, q_gs, q_ss, kv_gs, kv_ss, o_gs, o_ss, scale);
    NF_CHECK_LAUNCH("nf_k_attention_small");
    return cudaSuccess;
}

extern "C" cudaError_t nf__cuda_softmax_rows(cudaStream_t st, float * S, int64_t rows, int64_t lk,
                                             const char ** kernel) {
    if (rows <= 0 || lk <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_softmax_rows, nf_blocks(rows, NF_CUDA_BLOCK / 32), NF_CUDA_BLOCK, st)(S, rows, lk);
    NF_CHECK_LAUNCH("nf_k_softmax_rows");
    return cudaSuccess;
}
