/*
 * cuda-kernels-bf16.cu -- --precision bf16-autocast (cuda-bf16.c): the
 * kernels around the bf16 cuBLAS GEMM, as the cpu backend's mode
 * (src/backends/cpu/cpu-bf16.c, docs/precision.md): fp32 arithmetic with
 * rounding to bf16 (nearest, ties to even, NaN kept) where torch's autocast
 * holds bf16 tensors. The GEMM operands are stored as bf16 bit patterns
 * (uint16_t, CUDA_R_16BF); everything else is float.
 * (the CUDA backend's kernel files: see cuda-kernels-common.h)
 */
#include "cuda-kernels-common.h"

/* the bf16 bits of f: round to nearest, ties to even; a NaN stays a quiet NaN */
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

/* dst[r*cols + c] = bf16 bits of src[r*lds + c] */
__global__ void nf_k_bf16_pack(const float * __restrict__ src, int64_t lds, int64_t rows, int64_t cols,
                               uint16_t * __restrict__ dst) {
    NF_FOR(e, rows * cols) {
        const int64_t r = e / cols, c = e - r * cols;
        dst[e] = nf_bf16_bits(src[r * lds + c]);
    }
}

/* LINEAR's epilogue on the fp32 sums s (ld n): cpu-bf16.c's sequence */
__global__ void nf_k_bf16_linear_epilogue(const float * __restrict__ s, const float * __restrict__ bias, int act,
                                          int accumulate, int twice, float * y, int64_t ldy, int64_t m, int64_t n) {
    NF_FOR(e, m * n) {
        const int64_t r = e / n, o = e - r * n;
        float t = s[e];
        if (twice) t = nf_bf16(t);
        t = nf_bf16(t + (bias ? nf_bf16(bias[o]) : 0.0f));
        if (act == 1)
            t = nf_bf16(nf_gelu(t));
        else if (act == 2)
            t = nf_bf16(t < 0.0f ? 0.0f : t);
        float * yp = y + r * ldy + o;
        *yp = accumulate ? *yp + t : t;
    }
}

/* ATTENTION, a thread per (group, head, query row): bf16 q, k, v; fp32 sums
 * of the exact products times scale; the fp32 max over all keys; numerators
 * expf(s - max) summed in fp32 and rounded to bf16 before P·V; P·V in fp32;
 * o = bf16(acc * (1 / sum)).  hd <= NF_CUDA_BF16_AHD. */
__global__ void nf_k_bf16_attention(const float * __restrict__ q, const float * __restrict__ k,
                                    const float * __restrict__ v, float * __restrict__ o, int64_t G, int64_t H,
                                    int64_t lq, int64_t lk, int64_t hd, int64_t q_gs, int64_t q_ss, int64_t kv_gs,
                                    int64_t kv_ss, int64_t o_gs, int64_t o_ss, float scale) {
    NF_FOR(t, G * H * lq) {
        const int64_t i = t % lq, gh = t / lq, h = gh % H, g = gh / H;
        const float * qb = q + g * q_gs + i * q_ss + h * hd;
        const float * kb = k + g * kv_gs + h * hd;
        const float * vb = v + g * kv_gs + h * hd;
        float qr[NF_CUDA_BF16_AHD], acc[NF_CUDA_BF16_AHD];
        for (int64_t e = 0; e < hd; e++) {
            qr[e] = nf_bf16(qb[e]);
            acc[e] = 0.0f;
        }
        float mx = -INFINITY;
        for (int64_t j = 0; j < lk; j++) {
            float s = 0.0f;
            for (int64_t e = 0; e < hd; e++) s = s + qr[e] * nf_bf16(kb[j * kv_ss + e]);
            s = s * scale;
            mx = s > mx ? s : mx;
        }
        float l = 0.0f;
        for (int64_t j = 0; j < lk; j++) {
            float s = 0.0f;
            for (int64_t e = 0; e < hd; e++) s = s + qr[e] * nf_bf16(kb[j * kv_ss + e]);
            const float p = expf(s * scale - mx);
            l = l + p;
            const float pb = nf_bf16(p);
            for (int64_t e = 0; e < hd; e++) acc[e] = acc[e] + pb * nf_bf16(vb[j * kv_ss + e]);
        }
        const float rl = 1.0f / l;
        float * ob = o + g * o_gs + i * o_ss + h * hd;
        for (int64_t e = 0; e < hd; e++) ob[e] = nf_bf16(acc[e] * rl);
    }
}

/* EMBED_FEATURES as Linear(1, D): tok[r][1+j][d] = bf16(bf16(z)·bf16(w) + bf16(b)) */
__global__ void nf_k_bf16_embed_features(const float * __restrict__ z, int64_t n, int64_t F,
                                         const float * __restrict__ w, const float * __restrict__ b,
                                         float * __restrict__ tok, int64_t T, int64_t D) {
    NF_FOR(e, n * F * D) {
        const int64_t d = e % D, rj = e / D;
        const int64_t j = rj % F, r = rj / F;
        tok[(r * T + 1 + j) * D + d] = nf_bf16(nf_bf16(z[r * F + j]) * nf_bf16(w[d]) + nf_bf16(b[d]));
    }
}

/* the regressor's LABEL_TOKENS (Linear(1, D)): tok[r][0][d] likewise */
__global__ void nf_k_bf16_label_value(const float * __restrict__ y, int64_t n, const float * __restrict__ w,
                                      const float * __restrict__ b, float * __restrict__ tok, int64_t T, int64_t D) {
    NF_FOR(e, n * D) {
        const int64_t r = e / D, d = e - r * D;
        tok[r * T * D + d] = nf_bf16(nf_bf16(y[r]) * nf_bf16(w[d]) + nf_bf16(b[d]));
    }
}

/* ---- launchers (cuda-kernels.h) ------------------------------------------------ */

extern "C" cudaError_t nf__cuda_bf16_pack(cudaStream_t st, const float * src, int64_t lds, int64_t rows, int64_t cols,
                                          uint16_t * dst, const char ** kernel) {
    const int64_t work = rows * cols;
    if (work <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_bf16_pack, nf_blocks(work, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)(src, lds, rows, cols, dst);
    NF_CHECK_LAUNCH("nf_k_bf16_pack");
    return cudaSuccess;
}

extern "C" cudaError_t nf__cuda_bf16_linear_epilogue(cudaStream_t st, const float * s, const float * bias, int act,
                                                     int accumulate, int twice, float * y, int64_t ldy, int64_t m,
                                                     int64_t n, const char ** kernel) {
    const int64_t work = m * n;
    if (work <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_bf16_linear_epilogue, nf_blocks(work, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)
    (s, bias, act, accumulate, twice, y, ldy, m, n);
    NF_CHECK_LAUNCH("nf_k_bf16_linear_epilogue");
    return cudaSuccess;
}

extern "C" cudaError_t nf__cuda_bf16_attention(cudaStream_t st, const float * q, const float * k, const float * v,
                                               float * o, int64_t G, int64_t H, int64_t lq, int64_t lk, int64_t hd,
                                               int64_t q_gs, int64_t q_ss, int64_t kv_gs, int64_t kv_ss, int64_t o_gs,
                                               int64_t o_ss, float scale, const char ** kernel) {
    const int64_t work = G * H * lq;
    if (work <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_bf16_attention, nf_blocks(work, 64), 64, st)
    (q, k, v, o, G, H, lq, lk, hd, q_gs, q_ss, kv_gs, kv_ss, o_gs, o_ss, scale);
    NF_CHECK_LAUNCH("nf_k_bf16_attention");
    return cudaSuccess;
}

extern "C" cudaError_t nf__cuda_bf16_embed(cudaStream_t st, int label, const float * z, int64_t n, int64_t F,
                                           const float * w, const float * b, float * tok, int64_t T, int64_t D,
                                           const char ** kernel) {
    if (label) {
        if (n * D <= 0) return cudaSuccess;
        NF_LAUNCH(nf_k_bf16_label_value, nf_blocks(n * D, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)(z, n, w, b, tok, T, D);
        NF_CHECK_LAUNCH("nf_k_bf16_label_value");
        return cudaSuccess;
    }
    if (n * F * D <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_bf16_embed_features, nf_blocks(n * F * D, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)
    (z, n, F, w, b, tok, T, D);
    NF_CHECK_LAUNCH("nf_k_bf16_embed_features");
    return cudaSuccess;
}
