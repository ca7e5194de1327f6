/*
 * kernels-bf16.cl -- --precision bf16-autocast (opencl-bf16.c; part of the
 * program: see kernels-common.cl). fp32 arithmetic with bf16 rounding where
 * the cpu backend's mode rounds (src/backends/cpu/cpu-bf16.c,
 * docs/precision.md): no bf16 storage or bf16 arithmetic, every value is a
 * float, rounded to the nearest bf16 (ties to even, NaN kept) where upstream's
 * torch.autocast("cpu", bfloat16) holds a bf16 tensor. The rounding, nf__bf16,
 * is in kernels-common.cl.
 */

/* dim 0: c < cols; dim 1: r < rows.  dst[d_off + r*cols + c] = bf16(src[s_off + r*lds + c]) */
__kernel void nf_bf16_round_rows(__global const float * src, long s_off, long lds,
                                 __global float * dst, long d_off, int rows, int cols)
{
    const int cc = get_global_id(0);
    const int r  = get_global_id(1);
    if (cc >= cols || r >= rows) {
        return;
    }
    dst[d_off + (long)r * cols + cc] = nf__bf16(src[s_off + (long)r * lds + cc]);
}

/* LINEAR's epilogue on the raw fp32 sums t of bf16-rounded x and W, as cpu-bf16.c:
 * twice (bias_after_round): t = bf16(t); t = bf16(t + bf16(bias)); GELU / ReLU
 * in fp32 then bf16; y = accumulate ? y + t : t (fp32), rounded again with
 * stream (p.bf16_stream: SpTransformer's bf16 residual). */
__kernel void nf_bf16_linear_epilogue(__global const float * tmp, long t_off,
                                      __global const float * bias, long b_off, int has_bias,
                                      __global float * y, long y_off, long ldy,
                                      int M, int N, int act, int accumulate, int twice, int stream)
{
    const int gn = get_global_id(0);
    const int gm = get_global_id(1);
    if (gn >= N || gm >= M) {
        return;
    }
    float t = tmp[t_off + (long)gm * N + gn];
    if (twice) {
        t = nf__bf16(t);
    }
    t = nf__bf16(t + (has_bias ? nf__bf16(bias[b_off + gn]) : 0.0f));
    if (act == 1) {
        const float e = NF_ERF(NF_GELU_ARG(t));
        const float h = 0.5f * t;
        t = nf__bf16(h * (1.0f + e));
    } else if (act == 2) {
        t = nf__bf16(t < 0.0f ? 0.0f : t);
    }
    __global float * yp = y + y_off + (long)gm * ldy + gn;
    *yp = accumulate ? (stream ? nf__bf16(*yp + t) : *yp + t) : t;
}

/* ATTENTION, one work-item per (query row i, head h, group g): q, k, v rounded
 * to bf16; s_j = scale * (fp32 sum of the exact bf16 products); m = max_j s_j;
 * p_j = exp(s_j - m) summed in fp32 (l); acc = sum_j bf16(p_j) * v_j in fp32;
 * o = bf16(acc * (1 / l)).  head_dim <= NF_BF16_AHD. */
#define NF_BF16_AHD 256
__kernel void nf_bf16_attention(__global const float * q, long q_off, __global const float * k, long k_off,
                                __global const float * v, long v_off, __global float * o, long o_off,
                                int lq, int lk, int hd, long q_gs, long q_ss, long kv_gs, long kv_ss,
                                long o_gs, long o_ss, float scale)
{
    const int  i = get_global_id(0);
    const long h = get_global_id(1);
    const long g = get_global_id(2);
    if (i >= lq) {
        return;
    }
    __global const float * qb = q + q_off + g * q_gs + (long)i * q_ss + h * hd;
    __global const float * kb = k + k_off + g * kv_gs + h * hd;
    __global const float * vb = v + v_off + g * kv_gs + h * hd;
    float qr[NF_BF16_AHD], acc[NF_BF16_AHD];
    for (int e = 0; e < hd; e++) {
        qr[e] = nf__bf16(qb[e]);
        acc[e] = 0.0f;
    }
    float mx = -INFINITY;
    for (int j = 0; j < lk; j++) {
        float s = 0.0f;
        for (int e = 0; e < hd; e++) {
            s = s + qr[e] * nf__bf16(kb[(long)j * kv_ss + e]);
        }
        s = s * scale;
        mx = s > mx ? s : mx;
    }
    float l = 0.0f;
    for (int j = 0; j < lk; j++) {
        float s = 0.0f;
        for (int e = 0; e < hd; e++) {
            s = s + qr[e] * nf__bf16(kb[(long)j * kv_ss + e]);
        }
        const float p = NF_EXP(s * scale - mx);
        l = l + p;
        const float pb = nf__bf16(p);
        for (int e = 0; e < hd; e++) {
            acc[e] = acc[e] + pb * nf__bf16(vb[(long)j * kv_ss + e]);
        }
    }
    const float rl = NF_DIV(1.0f, l);
    __global float * ob = o + o_off + g * o_gs + (long)i * o_ss + h * hd;
    for (int e = 0; e < hd; e++) {
        ob[e] = nf__bf16(acc[e] * rl);
    }
}

/* EMBED_FEATURES and the regressor's LABEL_TOKENS: nf_embed_features and
 * nf_label_value (kernels-tabular.cl) with their bf16 flag set */
