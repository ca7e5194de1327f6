/*
 * cuda-kernels-gemm.cu -- the kernels around the cuBLAS GEMMs of LINEAR and CONV1D (cuda-ops.c):
 * the LINEAR epilogue, CONV1D's weight permutation, im2col and epilogue
 * (the CUDA backend's kernel files: see cuda-kernels-common.h)
 */
#include "cuda-kernels-common.h"

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

/* ---- launchers --------------------------------------------------------------- */

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
