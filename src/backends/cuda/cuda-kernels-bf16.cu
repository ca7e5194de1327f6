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
                                          int accumulate, int twice, int stream, float * y, int64_t ldy, int64_t m,
                                          int64_t n) {
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
        /* stream: SpTransformer's residual, bf16 + bf16 -> bf16 */
        *yp = accumulate ? (stream ? nf_bf16(*yp + t) : *yp + t) : t;
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

/* ---- SpTransformer's rules (cuda-bf16.c; the cpu's cpu-bf16-spt.c, opencl's
 * kernels-bf16-spt.cl): every activation bf16, each op's result rounded ---- */

/* R(softmax) in place over n values of a row: max from r[0], p = expf(r - max)
 * summed ascending, r = R(p * (1 / sum)) */
__device__ void nf_bf16_softmax_row(float * r, int64_t n) {
    float mx = r[0];
    for (int64_t j = 1; j < n; j++) mx = r[j] > mx ? r[j] : mx;
    float sum = 0.0f;
    for (int64_t j = 0; j < n; j++) {
        const float p = expf(r[j] - mx);
        r[j] = p;
        sum = sum + p;
    }
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j < n; j++) r[j] = nf_bf16(r[j] * inv);
}

/* a row of scores of bf16 values: out[j] = R(R(sum_e q[e] k_j[e], e ascending) * scale), key j
 * at k + j * ks, j < n */
__device__ void nf_bf16_scores_row(const float * q, const float * k, int64_t ks, int64_t n, int64_t E, float scale,
                                   float * out) {
    for (int64_t j = 0; j < n; j++) {
        float d = 0.0f;
        for (int64_t e = 0; e < E; e++) d = d + q[e] * k[j * ks + e];
        out[j] = nf_bf16(nf_bf16(d) * scale);
    }
}

/* ATTENTION with p.bf16_stream (torch's unfused bf16 attention), a thread per
 * (group g0 + gl, head, query row): s_j = R(R(sum_e q[e] k_j[e]) * scale) in the
 * row's scratch S (lk floats); P = R(softmax(s)); o[e] = R(sum_j P_j v_j[e]),
 * the sums ascending; q, k, v bf16 values read as they are */
__global__ void nf_k_bf16_spt_attention(const float * __restrict__ q, const float * __restrict__ k,
                                        const float * __restrict__ v, float * __restrict__ o, float * __restrict__ S,
                                        int64_t g0, int64_t ng, int64_t H, int64_t lq, int64_t lk, int64_t hd,
                                        int64_t q_gs, int64_t q_ss, int64_t kv_gs, int64_t kv_ss, int64_t o_gs,
                                        int64_t o_ss, float scale) {
    NF_FOR(t, ng * H * lq) {
        const int64_t i = t % lq, gh = t / lq, h = gh % H, g = g0 + gh / H;
        const float * qb = q + g * q_gs + i * q_ss + h * hd;
        const float * kb = k + g * kv_gs + h * hd;
        const float * vb = v + g * kv_gs + h * hd;
        float * s = S + t * lk;
        nf_bf16_scores_row(qb, kb, kv_ss, lk, hd, scale, s);
        nf_bf16_softmax_row(s, lk);
        float * ob = o + g * o_gs + i * o_ss + h * hd;
        for (int64_t e = 0; e < hd; e++) {
            float acc = 0.0f;
            for (int64_t j = 0; j < lk; j++) acc = acc + s[j] * vb[j * kv_ss + e];
            ob[e] = nf_bf16(acc);
        }
    }
}

/* BUCKET_ROUTE's bucket means as torch's bf16 mean, for every (operand z: 0 q,
 * 1 k; s, h; u; e): out[((z*SH + s*H + h)*nb + u)*E + e] = R(R(sum_i R(x_i)) / bkt) */
__global__ void nf_k_bf16_bucket_means(const float * __restrict__ q, int64_t q_ss, int64_t q_gs,
                                       const float * __restrict__ k, int64_t k_ss, int64_t k_gs, int64_t SH, int64_t H,
                                       int64_t nb, int64_t bkt, int64_t E, float * __restrict__ out) {
    NF_FOR(idx, 2 * SH * nb * E) {
        const int64_t e = idx % E, zu = idx / E, u = zu % nb, z = zu / nb;
        const int isk = z >= SH;
        const int64_t sh = isk ? z - SH : z, s = sh / H, h = sh % H, ss = isk ? k_ss : q_ss;
        const float * base = (isk ? k + s * k_gs : q + s * q_gs) + h * E + e;
        float acc = 0.0f;
        for (int64_t i = 0; i < bkt; i++) acc = acc + nf_bf16(base[(u * bkt + i) * ss]);
        out[idx] = nf_bf16(nf_bf16(acc) / (float) bkt);
    }
}

/* BUCKET_ROUTE's scores and pick, a thread per row it = sh*nb + u: R[v] =
 * R(R(sum_e qbar[e] kbar_v[e]) * scale); R(softmax); v* the first maximum;
 * prob = (P[v*], P[v*] - the largest other) */
__global__ void nf_k_bf16_bucket_route(const float * __restrict__ means, int64_t SH, int64_t nb, int64_t E, float scale,
                                       float * __restrict__ R, int32_t * __restrict__ sel, float * __restrict__ prob) {
    NF_FOR(it, SH * nb) {
        const int64_t sh = it / nb;
        const float * qb = means + it * E;
        const float * kb = means + (SH + sh) * nb * E;
        float * Rr = R + it * nb;
        nf_bf16_scores_row(qb, kb, E, nb, E, scale, Rr);
        nf_bf16_softmax_row(Rr, nb);
        nf_route_pick(Rr, nb, sel + it, prob + 2 * it);
    }
}

/* CONV1D's epilogue on the fp32 sums t (nr x cout, ld cout) of bf16 operands: y =
 * R(t + R(b)), or accumulating (the resblock residual, the skips) y = R(y + that) */
__global__ void nf_k_bf16_conv_epilogue(const float * __restrict__ t, const float * __restrict__ bias, int accumulate,
                                        float * y, int64_t ldy, int64_t nr, int64_t cout) {
    NF_FOR(idx, nr * cout) {
        const int64_t o = idx % cout, r = idx / cout;
        const float u = nf_bf16(t[idx] + (bias ? nf_bf16(bias[o]) : 0.0f));
        float * yp = y + r * ldy + o;
        *yp = accumulate ? nf_bf16(*yp + u) : u;
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
                                                     int accumulate, int twice, int stream, float * y, int64_t ldy,
                                                     int64_t m, int64_t n, const char ** kernel) {
    const int64_t work = m * n;
    if (work <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_bf16_linear_epilogue, nf_blocks(work, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)
    (s, bias, act, accumulate, twice, stream, y, ldy, m, n);
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

extern "C" cudaError_t nf__cuda_bf16_spt_attention(cudaStream_t st, const float * q, const float * k, const float * v,
                                                   float * o, float * S, int64_t g0, int64_t ng, int64_t H, int64_t lq,
                                                   int64_t lk, int64_t hd, int64_t q_gs, int64_t q_ss, int64_t kv_gs,
                                                   int64_t kv_ss, int64_t o_gs, int64_t o_ss, float scale,
                                                   const char ** kernel) {
    const int64_t work = ng * H * lq;
    if (work <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_bf16_spt_attention, nf_blocks(work, 64), 64, st)
    (q, k, v, o, S, g0, ng, H, lq, lk, hd, q_gs, q_ss, kv_gs, kv_ss, o_gs, o_ss, scale);
    NF_CHECK_LAUNCH("nf_k_bf16_spt_attention");
    return cudaSuccess;
}

extern "C" cudaError_t nf__cuda_bf16_bucket_route(cudaStream_t st, const struct nf_bucket_route_params * p,
                                                  const float * q, const float * k, int32_t * sel, float * prob,
                                                  float * means, float * R, const char ** kernel) {
    const int64_t SH = p->n_seq * p->n_heads, nb = p->n_buckets, E = p->head_dim;
    if (SH * nb <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_bf16_bucket_means, nf_blocks(2 * SH * nb * E, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)
    (q, p->q_ss, p->q_gs, k, p->k_ss, p->k_gs, SH, p->n_heads, nb, p->bucket, E, means);
    NF_CHECK_LAUNCH("nf_k_bf16_bucket_means");
    NF_LAUNCH(nf_k_bf16_bucket_route, nf_blocks(SH * nb, 64), 64, st)(means, SH, nb, E, p->scale, R, sel, prob);
    NF_CHECK_LAUNCH("nf_k_bf16_bucket_route");
    return cudaSuccess;
}

extern "C" cudaError_t nf__cuda_bf16_conv_epilogue(cudaStream_t st, const float * t, const float * bias, int accumulate,
                                                   float * y, int64_t ldy, int64_t nr, int64_t cout,
                                                   const char ** kernel) {
    const int64_t work = nr * cout;
    if (work <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_bf16_conv_epilogue, nf_blocks(work, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)
    (t, bias, accumulate, y, ldy, nr, cout);
    NF_CHECK_LAUNCH("nf_k_bf16_conv_epilogue");
    return cudaSuccess;
}
