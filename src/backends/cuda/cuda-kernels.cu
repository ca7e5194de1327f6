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
        if (act == 1)
            t = nf_gelu(t);
        else if (act == 2)
            t = t < 0.0f ? 0.0f : t; /* ReLU: NaN stays NaN */
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

/* ---- sequence ops (SpTransformer) ------------------------------------------
 * Position-major tensors (a row is a position, its columns the channels).
 * The row kernels take a warp per row (lanes over the columns), as
 * nf_k_layer_norm; the row loop bound is uniform in a warp. Every output
 * element is computed by one thread in the reference's order of float
 * operations (no FMA: --fmad=false). */

#define NF_WARP_ROWS(r, n)                                                            \
    for (int64_t r = ((int64_t) blockIdx.x * blockDim.x + threadIdx.x) >> 5; r < (n); \
         r += ((int64_t) gridDim.x * blockDim.x) >> 5)

/* CONV1D weights, tap-major: Wt[o][k][c] = W[o][c][k] (PyTorch's (cout, cin,
 * K) layout), so that a row of the GEMM's B is K whole input rows. */
__global__ void nf_k_conv_weights(const float * __restrict__ W, int64_t cout, int64_t cin, int64_t K,
                                  float * __restrict__ Wt) {
    NF_FOR(e, cout * K * cin) {
        const int64_t c = e % cin, ok = e / cin;
        const int64_t k = ok % K, o = ok / K;
        Wt[e] = W[(o * cin + c) * K + k];
    }
}

/* im2col of `rows` = gc sequences x nr positions from position t0:
 *   col[b*nr + r][k*cin + c] = x[b][t0 + r + k*dil - pad][c]  (0 outside [0, len))
 * x already points at the chunk's first sequence (stride x_gs between
 * sequences). A warp per col row: reads and writes are runs of cin floats. */
__global__ void nf_k_conv_im2col(const float * __restrict__ x, int64_t ldx, int64_t x_gs, int64_t len, int64_t cin,
                                 int64_t K, int64_t dil, int64_t pad, int64_t t0, int64_t nr, int64_t rows,
                                 float * __restrict__ col) {
    const int lane = (int) (threadIdx.x & 31);
    NF_WARP_ROWS(rr, rows) {
        const int64_t b = rr / nr, r = rr - b * nr;
        const float * xs = x + b * x_gs;
        float * cr = col + rr * K * cin;
        for (int64_t k = 0; k < K; k++) {
            const int64_t ti = t0 + r + k * dil - pad;
            float * ck = cr + k * cin;
            if (ti >= 0 && ti < len) {
                const float * xr = xs + ti * ldx;
                for (int64_t c = lane; c < cin; c += 32) ck[c] = xr[c];
            } else {
                for (int64_t c = lane; c < cin; c += 32) ck[c] = 0.0f;
            }
        }
    }
}

/* CONV1D epilogue over `rows` = gc sequences x nr positions:
 *   t = s[b][r][o] (+ bias[o]);  y[b][r][o] = accumulate ? y + t : t
 * (the reference's y + (sum + bias)). s may be y itself (in place, then
 * accumulate is 0); bias may be NULL. */
__global__ void nf_k_conv_epilogue(const float * s, int64_t lds, int64_t s_gs, const float * __restrict__ bias,
                                   int accumulate, float * y, int64_t ldy, int64_t y_gs, int64_t nr, int64_t rows,
                                   int64_t cout) {
    const int lane = (int) (threadIdx.x & 31);
    NF_WARP_ROWS(rr, rows) {
        const int64_t b = rr / nr, r = rr - b * nr;
        const float * sr = s + b * s_gs + r * lds;
        float * yr = y + b * y_gs + r * ldy;
        for (int64_t o = lane; o < cout; o += 32) {
            float t = sr[o];
            if (bias) t = t + bias[o];
            yr[o] = accumulate ? yr[o] + t : t;
        }
    }
}

/* BATCH_NORM coefficients, once per channel, as the reference:
 *   a = (1.0f / sqrtf(var + eps)) * w;  sh = b - mean * a. */
__global__ void nf_k_bn_coef(const float * __restrict__ w, const float * __restrict__ b,
                             const float * __restrict__ mean, const float * __restrict__ var, int64_t C, float eps,
                             float * __restrict__ a, float * __restrict__ sh) {
    NF_FOR(c, C) {
        const float ac = (1.0f / sqrtf(var[c] + eps)) * w[c];
        a[c] = ac;
        sh[c] = b[c] - mean[c] * ac;
    }
}

/* y = x * a + sh (a rounded product, then a rounded sum); ReLU as the
 * reference (a NaN passes). x may be y (in place). */
__global__ void nf_k_bn_apply(const float * x, int64_t ldx, const float * __restrict__ a, const float * __restrict__ sh,
                              int relu, float * y, int64_t ldy, int64_t m, int64_t C) {
    const int lane = (int) (threadIdx.x & 31);
    NF_WARP_ROWS(r, m) {
        const float * xr = x + r * ldx;
        float * yr = y + r * ldy;
        for (int64_t c = lane; c < C; c += 32) {
            const float v = xr[c] * a[c] + sh[c];
            yr[c] = relu && v < 0.0f ? 0.0f : v;
        }
    }
}

/* FILL: y[r*ld + c] = value. */
__global__ void nf_k_fill_rows(float * __restrict__ y, int64_t ld, int64_t m, int64_t k, float value) {
    const int lane = (int) (threadIdx.x & 31);
    NF_WARP_ROWS(r, m) {
        float * yr = y + r * ld;
        for (int64_t c = lane; c < k; c += 32) yr[c] = value;
    }
}

/* AXIAL_POS: x[s][t][c] = x + (e0[t / n1][c] + e1[t % n1][c]); a warp per
 * (s, t) row. */
__global__ void nf_k_axial_pos(const float * __restrict__ e0, const float * __restrict__ e1, int64_t n1,
                               float * __restrict__ x, int64_t ld, int64_t gs, int64_t len, int64_t rows, int64_t D) {
    const int lane = (int) (threadIdx.x & 31);
    NF_WARP_ROWS(st, rows) {
        const int64_t s = st / len, t = st - s * len;
        float * xr = x + s * gs + t * ld;
        const int64_t t0 = t / n1;
        const float * a = e0 + t0 * D;
        const float * b = e1 + (t - t0 * n1) * D;
        for (int64_t c = lane; c < D; c += 32) xr[c] = xr[c] + (a[c] + b[c]);
    }
}

/* GATHER_ROWS: y[r][c] (+)= scale * W[idx[r]][c], a zero row for an index
 * outside [0, n_table); a warp per row. */
__global__ void nf_k_gather_rows(const int32_t * __restrict__ idx, const float * __restrict__ W, int64_t ldw,
                                 int64_t n_table, float * y, int64_t ldy, int64_t m, int64_t k, float scale,
                                 int accumulate) {
    const int lane = (int) (threadIdx.x & 31);
    NF_WARP_ROWS(r, m) {
        const int64_t i = idx[r];
        float * yr = y + r * ldy;
        const int ok = i >= 0 && i < n_table;
        const float * w = W + (ok ? i : 0) * ldw;
        for (int64_t c = lane; c < k; c += 32) {
            const float g = ok ? scale * w[c] : 0.0f;
            yr[c] = accumulate ? yr[c] + g : g;
        }
    }
}

/* BUCKET_ROUTE, step 1: bucket means of one operand, for every (s, h, u, e):
 *   out[((s*H + h)*nb + u)*E + e] = (sum_i x[s][u*bkt + i][h][e], i ascending,
 *   from 0.0f) / (float)bkt. */
__global__ void nf_k_bucket_means(const float * __restrict__ x, int64_t ss, int64_t gs, int64_t n_seq, int64_t H,
                                  int64_t nb, int64_t bkt, int64_t E, float * __restrict__ out) {
    const float fb = (float) bkt;
    NF_FOR(idx, n_seq * H * nb * E) {
        const int64_t e = idx % E, shu = idx / E;
        const int64_t u = shu % nb, sh = shu / nb;
        const int64_t h = sh % H, s = sh / H;
        const float * p = x + s * gs + u * bkt * ss + h * E + e;
        float acc = 0.0f;
        for (int64_t i = 0; i < bkt; i++) acc += p[i * ss];
        out[idx] = acc / fb;
    }
}

/* BUCKET_ROUTE, step 2: a block of NF_ROUTE_THREADS threads per row
 * it = (s*H + h)*nb + u, exactly the reference's sequence:
 *   R[v] = (sum_e qbar_u[e] * kbar_v[e], e ascending) * scale   (lanes over v)
 *   m = max (serial: R[v] > m ? R[v] : m from R[0]);  R[v] = expf(R[v] - m)
 *   sum (serial, ascending v);  P[v] = R[v] / sum
 *   v* = first index of the max of P, the runner-up (serial);
 * R is the row's scratch (nb floats in global memory). */
#define NF_ROUTE_THREADS 32
__global__ void nf_k_bucket_route(const float * __restrict__ qbar, const float * __restrict__ kbar, int64_t rows,
                                  int64_t nb, int64_t E, float scale, float * __restrict__ R,
                                  int32_t * __restrict__ sel, float * __restrict__ prob) {
    __shared__ float s_val;
    const int t = (int) threadIdx.x;
    for (int64_t it = blockIdx.x; it < rows; it += gridDim.x) {
        const float * q = qbar + it * E;
        const float * kh = kbar + (it / nb) * nb * E;
        float * Rr = R + it * nb;
        for (int64_t v = t; v < nb; v += NF_ROUTE_THREADS) {
            const float * kv = kh + v * E;
            float d = 0.0f;
            for (int64_t e = 0; e < E; e++) d += q[e] * kv[e];
            Rr[v] = d * scale;
        }
        __syncthreads();
        if (t == 0) {
            float mx = Rr[0];
            for (int64_t v = 1; v < nb; v++) mx = Rr[v] > mx ? Rr[v] : mx;
            s_val = mx;
        }
        __syncthreads();
        const float mx = s_val;
        for (int64_t v = t; v < nb; v += NF_ROUTE_THREADS) Rr[v] = expf(Rr[v] - mx);
        __syncthreads();
        if (t == 0) {
            float sum = 0.0f;
            for (int64_t v = 0; v < nb; v++) sum += Rr[v];
            s_val = sum;
        }
        __syncthreads();
        const float sum = s_val;
        for (int64_t v = t; v < nb; v += NF_ROUTE_THREADS) Rr[v] = Rr[v] / sum;
        __syncthreads();
        if (t == 0) {
            int64_t best = 0;
            for (int64_t v = 0; v < nb; v++)
                if (Rr[v] > Rr[best]) best = v;
            float second = 0.0f;
            int have2 = 0;
            for (int64_t v = 0; v < nb; v++) {
                if (v == best) continue;
                if (!have2 || Rr[v] > second) second = Rr[v];
                have2 = 1;
            }
            sel[it] = (int32_t) best;
            prob[2 * it] = Rr[best];
            prob[2 * it + 1] = have2 ? Rr[best] - second : 0.0f;
        }
        __syncthreads(); /* s_val is rewritten by the next row */
    }
}

/* BUCKET_GATHER: a warp per output row rr = (s*nb + u)*2B + j of kcat and
 * vcat (n_heads*head_dim columns); sel clamped into [0, nb). vsrc is k
 * (reuse_keys) or v. */
__global__ void nf_k_bucket_gather(const float * k, const float * v, const float * vsrc,
                                   const int32_t * __restrict__ sel, const float * __restrict__ prob, int64_t rows,
                                   int64_t nb, int64_t B, int64_t H, int E, int64_t kv_ss, int64_t kv_gs,
                                   float * __restrict__ kc, float * __restrict__ vc) {
    const int lane = (int) (threadIdx.x & 31);
    const int Wd = (int) H * E;
    NF_WARP_ROWS(rr, rows) {
        const int64_t su = rr / (2 * B), j = rr - su * 2 * B;
        const int64_t s = su / nb, u = su - s * nb;
        float * kd = kc + rr * Wd;
        float * vd = vc + rr * Wd;
        for (int c = lane; c < Wd; c += 32) {
            const int h = c / E, e = c - h * E;
            if (j < B) {
                const int64_t i = (s * H + h) * nb + u;
                int64_t vs = sel[i];
                vs = vs < 0 ? 0 : vs >= nb ? nb - 1 : vs;
                const float pu = prob[2 * i];
                const int64_t rs = s * kv_gs + (vs * B + j) * kv_ss + h * E + e;
                kd[c] = pu * k[rs];
                vd[c] = pu * vsrc[rs];
            } else {
                const int64_t ro = s * kv_gs + (u * B + j - B) * kv_ss + h * E + e;
                kd[c] = k[ro];
                vd[c] = v[ro];
            }
        }
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

static cudaError_t nf_batch_norm(cudaStream_t st, const float * x, int64_t ldx, const float * w, const float * b,
                                 const float * mean, const float * var, int64_t C, float eps, int relu, float * y,
                                 int64_t ldy, int64_t m, float * coef, const char ** kernel) {
    if (m <= 0 || C <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_bn_coef, nf_blocks(C, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)(w, b, mean, var, C, eps, coef, coef + C);
    NF_CHECK_LAUNCH("nf_k_bn_coef");
    NF_LAUNCH(nf_k_bn_apply, nf_blocks(m, NF_CUDA_BLOCK / 32), NF_CUDA_BLOCK, st)
    (x, ldx, coef, coef + C, relu, y, ldy, m, C);
    NF_CHECK_LAUNCH("nf_k_bn_apply");
    return cudaSuccess;
}

static cudaError_t nf_fill_rows(cudaStream_t st, float * y, int64_t ld, int64_t m, int64_t k, float value,
                                const char ** kernel) {
    if (m <= 0 || k <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_fill_rows, nf_blocks(m, NF_CUDA_BLOCK / 32), NF_CUDA_BLOCK, st)(y, ld, m, k, value);
    NF_CHECK_LAUNCH("nf_k_fill_rows");
    return cudaSuccess;
}

static cudaError_t nf_axial_pos(cudaStream_t st, const float * e0, const float * e1, int64_t n1, float * x, int64_t ld,
                                int64_t gs, int64_t n_seq, int64_t len, int64_t D, const char ** kernel) {
    const int64_t rows = n_seq * len;
    if (rows <= 0 || D <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_axial_pos, nf_blocks(rows, NF_CUDA_BLOCK / 32), NF_CUDA_BLOCK, st)
    (e0, e1, n1, x, ld, gs, len, rows, D);
    NF_CHECK_LAUNCH("nf_k_axial_pos");
    return cudaSuccess;
}

/* scratch of BUCKET_ROUTE: qbar, kbar (rows x E each), R (rows x nb), rows = n_seq*H*nb */
static size_t nf_bucket_route_scratch(int64_t rows, int64_t nb, int64_t E) {
    return 2 * nf_align256((size_t) rows * (size_t) E * sizeof(float)) +
           nf_align256((size_t) rows * (size_t) nb * sizeof(float));
}

static cudaError_t nf_bucket_route(cudaStream_t st, const struct nf_bucket_route_params * p, const float * q,
                                   const float * k, int32_t * sel, float * prob, void * scratch, size_t scratch_size,
                                   const char ** kernel) {
    const int64_t H = p->n_heads, nb = p->n_buckets, E = p->head_dim, rows = p->n_seq * H * nb;
    if (rows <= 0) return cudaSuccess;
    if (nf_bucket_route_scratch(rows, nb, E) > scratch_size) {
        if (kernel) *kernel = "bucket_route scratch";
        return cudaErrorInvalidValue;
    }
    char * sp = (char *) scratch;
    float * qbar = (float *) sp;
    sp += nf_align256((size_t) rows * (size_t) E * sizeof(float));
    float * kbar = (float *) sp;
    sp += nf_align256((size_t) rows * (size_t) E * sizeof(float));
    float * R = (float *) sp;
    NF_LAUNCH(nf_k_bucket_means, nf_blocks(rows * E, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)
    (q, p->q_ss, p->q_gs, p->n_seq, H, nb, p->bucket, E, qbar);
    NF_CHECK_LAUNCH("nf_k_bucket_means");
    NF_LAUNCH(nf_k_bucket_means, nf_blocks(rows * E, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)
    (k, p->k_ss, p->k_gs, p->n_seq, H, nb, p->bucket, E, kbar);
    NF_CHECK_LAUNCH("nf_k_bucket_means");
    NF_LAUNCH(nf_k_bucket_route, nf_blocks(rows, 1), NF_ROUTE_THREADS, st)
    (qbar, kbar, rows, nb, E, p->scale, R, sel, prob);
    NF_CHECK_LAUNCH("nf_k_bucket_route");
    return cudaSuccess;
}

static cudaError_t nf_bucket_gather(cudaStream_t st, const struct nf_bucket_gather_params * p, const float * k,
                                    const float * v, const int32_t * sel, const float * prob, float * kc, float * vc,
                                    const char ** kernel) {
    const int64_t rows = p->n_seq * p->n_buckets * 2 * p->bucket;
    if (rows <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_bucket_gather, nf_blocks(rows, NF_CUDA_BLOCK / 32), NF_CUDA_BLOCK, st)
    (k, v, p->reuse_keys ? k : v, sel, prob, rows, p->n_buckets, p->bucket, p->n_heads, (int) p->head_dim, p->kv_ss,
     p->kv_gs, kc, vc);
    NF_CHECK_LAUNCH("nf_k_bucket_gather");
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

int nf__cuda_quantile(nf_backend * be, const nf_op * op, nf_err * err) {
    const int64_t n = op->src[0].ne[0], F = op->src[0].ne[1];
    void * scratch = NULL;
    size_t size = 0;
    int rc = nf__cuda_op_scratch(be, nf_quantile_scratch(n, F), &scratch, &size, err);
    if (rc != NF_OK) return rc;
    NF_OP_LAUNCH(nf_quantile(nf__cuda_op_stream(be), NF_F(&op->src[0]), n, F, op->p.quantile.nq, op->p.quantile.q_denom,
                             NF_F(&op->dst[0]), scratch, size, NF_K));
    return NF_OK;
}
bool nf__cuda_quantile_supports(nf_backend * be, const nf_op * op) {
    const struct nf_quantile_params * p = &op->p.quantile;
    const int64_t n = op->src[0].ne[0], F = op->src[0].ne[1];
    return op->src[0].ndim == 2 && p->q_denom > 0 && p->nq >= 0 && n >= 0 && F >= 0 &&
           (n == 0 || F <= INT_MAX / n); /* CUB segmented sort: int item counts */
}

int nf__cuda_bucketize_norm(nf_backend * be, const nf_op * op, nf_err * err) {
    const int64_t n_s = op->src[0].ne[0], F = op->src[0].ne[1];
    const int64_t n_q = (op->src[1].buf && op->dst[1].buf) ? op->src[1].ne[0] : 0;
    const int64_t nb = op->src[2].ne[1];
    NF_OP_LAUNCH(nf_bucketize_norm(nf__cuda_op_stream(be), NF_F(&op->src[0]), n_s, n_q ? NF_F(&op->src[1]) : NULL, n_q,
                                   F, NF_F(&op->src[2]), nb, NF_F(&op->dst[0]), n_q ? NF_F(&op->dst[1]) : NULL, NF_K));
    return NF_OK;
}
bool nf__cuda_bucketize_norm_supports(nf_backend * be, const nf_op * op) { return true; }

int nf__cuda_embed_features(nf_backend * be, const nf_op * op, nf_err * err) {
    const nf_tensor * tok = &op->dst[0];
    NF_OP_LAUNCH(nf_embed_features(nf__cuda_op_stream(be), NF_F(&op->src[0]), op->src[0].ne[0], op->src[0].ne[1],
                                   NF_F(&op->src[1]), NF_F(&op->src[2]), NF_F(tok), tok->ne[1], tok->ne[2], NF_K));
    return NF_OK;
}
bool nf__cuda_embed_features_supports(nf_backend * be, const nf_op * op) { return true; }

int nf__cuda_label_tokens(nf_backend * be, const nf_op * op, nf_err * err) {
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
bool nf__cuda_label_tokens_supports(nf_backend * be, const nf_op * op) {
    const int mode = op->p.label_tokens.mode;
    if (mode == NF_LABEL_CLASS) return op->src[0].type == NF_I32;
    return mode == NF_LABEL_VALUE || mode == NF_LABEL_MASK;
}

int nf__cuda_layer_norm(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_layer_norm_params * p = &op->p.layer_norm;
    NF_OP_LAUNCH(nf_layer_norm(nf__cuda_op_stream(be), NF_F(&op->src[0]), p->ldx, NF_F(&op->src[1]), NF_F(&op->src[2]),
                               p->eps, NF_F(&op->dst[0]), p->ldy, p->m, p->k, NF_K));
    return NF_OK;
}
bool nf__cuda_layer_norm_supports(nf_backend * be, const nf_op * op) { return true; }

int nf__cuda_batch_norm(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_batch_norm_params * p = &op->p.batch_norm;
    if (p->m <= 0) return NF_OK;
    void * scratch = NULL;
    size_t size = 0;
    int rc = nf__cuda_op_scratch(be, 2 * (size_t) p->c * sizeof(float), &scratch, &size, err);
    if (rc != NF_OK) return rc;
    NF_OP_LAUNCH(nf_batch_norm(nf__cuda_op_stream(be), NF_F(&op->src[0]), p->ldx, NF_F(&op->src[1]), NF_F(&op->src[2]),
                               NF_F(&op->src[3]), NF_F(&op->src[4]), p->c, p->eps, p->relu, NF_F(&op->dst[0]), p->ldy,
                               p->m, (float *) scratch, NF_K));
    return NF_OK;
}
bool nf__cuda_batch_norm_supports(nf_backend * be, const nf_op * op) { return true; }

int nf__cuda_fill(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_fill_params * p = &op->p.fill;
    NF_OP_LAUNCH(nf_fill_rows(nf__cuda_op_stream(be), NF_F(&op->dst[0]), p->ld, p->m, p->k, p->value, NF_K));
    return NF_OK;
}
bool nf__cuda_fill_supports(nf_backend * be, const nf_op * op) { return true; }

int nf__cuda_axial_pos(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_axial_pos_params * p = &op->p.axial_pos;
    NF_OP_LAUNCH(nf_axial_pos(nf__cuda_op_stream(be), NF_F(&op->src[0]), NF_F(&op->src[1]), p->n1, NF_F(&op->dst[0]),
                              p->ld, p->gs, p->n_seq, p->len, p->dim, NF_K));
    return NF_OK;
}
bool nf__cuda_axial_pos_supports(nf_backend * be, const nf_op * op) { return true; }

static cudaError_t nf_gather_rows(cudaStream_t st, const int32_t * idx, const float * W, int64_t ldw, int64_t n_table,
                                  float * y, int64_t ldy, int64_t m, int64_t k, float scale, int accumulate,
                                  const char ** kernel) {
    if (m <= 0 || k <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_gather_rows, nf_blocks(m, NF_CUDA_BLOCK / 32), NF_CUDA_BLOCK, st)
    (idx, W, ldw, n_table, y, ldy, m, k, scale, accumulate);
    NF_CHECK_LAUNCH("nf_k_gather_rows");
    return cudaSuccess;
}

int nf__cuda_gather_rows(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_gather_rows_params * p = &op->p.gather_rows;
    NF_OP_LAUNCH(nf_gather_rows(nf__cuda_op_stream(be), NF_I(&op->src[0]), NF_F(&op->src[1]), p->ldw, p->n_table,
                                NF_F(&op->dst[0]), p->ldy, p->m, p->k, p->scale, p->accumulate != 0, NF_K));
    return NF_OK;
}
bool nf__cuda_gather_rows_supports(nf_backend * be, const nf_op * op) { return true; }

int nf__cuda_bucket_route(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_bucket_route_params * p = &op->p.bucket_route;
    const int64_t rows = p->n_seq * p->n_heads * p->n_buckets;
    if (rows <= 0) return NF_OK;
    void * scratch = NULL;
    size_t size = 0;
    int rc = nf__cuda_op_scratch(be, nf_bucket_route_scratch(rows, p->n_buckets, p->head_dim), &scratch, &size, err);
    if (rc != NF_OK) return rc;
    NF_OP_LAUNCH(nf_bucket_route(nf__cuda_op_stream(be), p, NF_F(&op->src[0]), NF_F(&op->src[1]), NF_I(&op->dst[0]),
                                 NF_F(&op->dst[1]), scratch, size, NF_K));
    return NF_OK;
}
bool nf__cuda_bucket_route_supports(nf_backend * be, const nf_op * op) { return true; }

int nf__cuda_bucket_gather(nf_backend * be, const nf_op * op, nf_err * err) {
    NF_OP_LAUNCH(nf_bucket_gather(nf__cuda_op_stream(be), &op->p.bucket_gather, NF_F(&op->src[0]), NF_F(&op->src[1]),
                                  NF_I(&op->src[2]), NF_F(&op->src[3]), NF_F(&op->dst[0]), NF_F(&op->dst[1]), NF_K));
    return NF_OK;
}
bool nf__cuda_bucket_gather_supports(nf_backend * be, const nf_op * op) {
    /* the kernel indexes a row's n_heads*head_dim columns with int */
    const struct nf_bucket_gather_params * p = &op->p.bucket_gather;
    return p->head_dim <= INT_MAX && p->n_heads <= INT_MAX / p->head_dim;
}

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

extern "C" cudaError_t nf__cuda_conv_weights(cudaStream_t st, const float * W, int64_t cout, int64_t cin, int64_t K,
                                             float * Wt, const char ** kernel) {
    const int64_t work = cout * K * cin;
    if (work <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_conv_weights, nf_blocks(work, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)(W, cout, cin, K, Wt);
    NF_CHECK_LAUNCH("nf_k_conv_weights");
    return cudaSuccess;
}

extern "C" cudaError_t nf__cuda_conv_im2col(cudaStream_t st, const float * x, int64_t ldx, int64_t x_gs, int64_t len,
                                            int64_t cin, int64_t K, int64_t dil, int64_t pad, int64_t t0, int64_t nr,
                                            int64_t gc, float * col, const char ** kernel) {
    const int64_t rows = gc * nr;
    if (rows <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_conv_im2col, nf_blocks(rows, NF_CUDA_BLOCK / 32), NF_CUDA_BLOCK, st)
    (x, ldx, x_gs, len, cin, K, dil, pad, t0, nr, rows, col);
    NF_CHECK_LAUNCH("nf_k_conv_im2col");
    return cudaSuccess;
}

extern "C" cudaError_t nf__cuda_conv_epilogue(cudaStream_t st, const float * s, int64_t lds, int64_t s_gs,
                                              const float * bias, int accumulate, float * y, int64_t ldy, int64_t y_gs,
                                              int64_t nr, int64_t gc, int64_t cout, const char ** kernel) {
    const int64_t rows = gc * nr;
    if (rows <= 0 || cout <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_conv_epilogue, nf_blocks(rows, NF_CUDA_BLOCK / 32), NF_CUDA_BLOCK, st)
    (s, lds, s_gs, bias, accumulate, y, ldy, y_gs, nr, rows, cout);
    NF_CHECK_LAUNCH("nf_k_conv_epilogue");
    return cudaSuccess;
}
