/*
 * kernels-bf16-spt.cl -- --precision bf16-autocast for SpTransformer's own ops
 * (opencl-bf16.c; part of the program: see kernels-common.cl). fp32 arithmetic
 * with bf16 rounding exactly where the cpu backend's rules round
 * (src/backends/cpu/cpu-bf16-spt.c, cpu-bf16.c; docs/precision.md
 * "SpTransformer under CPU autocast"). R below: nf__bf16, round to nearest,
 * ties to even. Every sum is fp32 in the cpu kernel's order.
 */

/* R(softmax) in place over n values of a row: m = max (from r[0]), p =
 * exp(r - m) summed ascending, r = R(p * (1 / sum)) (the cpu's reciprocal). */
void nf__bf16_softmax_row(__global float * r, int n)
{
    float mx = r[0];
    for (int j = 1; j < n; j++) {
        mx = r[j] > mx ? r[j] : mx;
    }
    float sum = 0.0f;
    for (int j = 0; j < n; j++) {
        const float p = NF_EXP(r[j] - mx);
        r[j] = p;
        sum += p;
    }
    const float inv = NF_DIV(1.0f, sum);
    for (int j = 0; j < n; j++) {
        r[j] = nf__bf16(r[j] * inv);
    }
}

/* BUCKET_ROUTE's bucket means, as nf_bucket_means with torch's bf16 mean:
 * R(R(sum_i R(x_i)) / bkt), the rows summed ascending. */
__kernel void nf_bf16_bucket_means(__global const float * q, long q_off, long q_ss, long q_gs,
                                   __global const float * k, long k_off, long k_ss, long k_gs,
                                   __global float * out, int nb, int bkt, int H, int E, int SH)
{
    const int e = get_global_id(0);
    const int u = get_global_id(1);
    const int z = get_global_id(2);
    if (e >= E || u >= nb || z >= 2 * SH) {
        return;
    }
    const int  isk = z >= SH;
    const int  sh  = isk ? z - SH : z;
    const long s   = sh / H;
    const int  h   = sh % H;
    const long ss  = isk ? k_ss : q_ss;
    __global const float * base = (isk ? k + k_off + s * k_gs : q + q_off + s * q_gs) + (long)h * E + e;
    float acc = 0.0f;
    for (int i = 0; i < bkt; i++) {
        acc += nf__bf16(base[((long)u * bkt + i) * ss]);
    }
    out[((long)z * nb + u) * E + e] = nf__bf16(NF_DIV(nf__bf16(acc), (float)bkt));
}

/* BUCKET_ROUTE's scores and pick, as nf_bucket_route with the roundings:
 * R[v] = R(R(sum_e qbar[e] kbar_v[e]) * scale); R(softmax); v* the first
 * maximum; prob = (P[v*], P[v*] - max_{v != v*} P[v]). */
__kernel void nf_bf16_bucket_route(__global const float * means, __global float * R, long R_off,
                                   int nb, int E, int SH, float scale,
                                   __global int * sel, long sel_off, __global float * prob, long prob_off)
{
    const int u  = get_global_id(0);
    const int sh = get_global_id(1);
    if (u >= nb || sh >= SH) {
        return;
    }
    __global const float * qb = means + ((long)sh * nb + u) * E;
    __global const float * kb = means + (long)(SH + sh) * nb * E;
    __global float * Rr = R + R_off + ((long)sh * nb + u) * nb;
    for (int v = 0; v < nb; v++) {
        float d = 0.0f;
        for (int e = 0; e < E; e++) {
            d += qb[e] * kb[(long)v * E + e];
        }
        Rr[v] = nf__bf16(nf__bf16(d) * scale);
    }
    nf__bf16_softmax_row(Rr, nb);
    int best = 0;
    for (int v = 1; v < nb; v++) {
        if (Rr[v] > Rr[best]) {
            best = v;
        }
    }
    float second = 0.0f;
    int have2 = 0;
    for (int v = 0; v < nb; v++) {
        if (v == best) {
            continue;
        }
        if (!have2 || Rr[v] > second) {
            second = Rr[v];
        }
        have2 = 1;
    }
    const long i = (long)sh * nb + u;
    const float pb = Rr[best];
    sel[sel_off + i] = best;
    prob[prob_off + 2 * i]     = pb;
    prob[prob_off + 2 * i + 1] = have2 ? pb - second : 0.0f;
}

/* BUCKET_GATHER, as nf_bucket_gather: the routed rows R(p * k) (and, as values,
 * R(p * (reuse_keys ? k : v))), the own rows copied. */
__kernel void nf_bf16_bucket_gather(__global const float * k, long k_off,
                                    __global const float * v, long v_off,
                                    __global const int * sel, long sel_off,
                                    __global const float * prob, long prob_off,
                                    __global float * kc, long kc_off,
                                    __global float * vc, long vc_off,
                                    long kv_ss, long kv_gs, int nb, int B, int H, int E, int reuse_keys, int n_su)
{
    const int he = get_global_id(0);
    const int j  = get_global_id(1);
    const int su = get_global_id(2);
    const int W  = H * E;
    if (he >= W || j >= 2 * B || su >= n_su) {
        return;
    }
    const long s = su / nb;
    const int  u = su % nb;
    const int  h = he / E;
    const long i = (s * H + h) * nb + u;
    const long d = ((long)su * 2 * B + j) * W + he;
    if (j < B) {
        int vs = sel[sel_off + i];
        vs = vs < 0 ? 0 : vs >= nb ? nb - 1 : vs;
        const float pu = prob[prob_off + 2 * i];
        const long  rs = s * kv_gs + ((long)vs * B + j) * kv_ss + he;
        const float kk = k[k_off + rs];
        kc[kc_off + d] = nf__bf16(pu * kk);
        vc[vc_off + d] = nf__bf16(pu * (reuse_keys ? kk : v[v_off + rs]));
    } else {
        const long ro = s * kv_gs + ((long)u * B + (j - B)) * kv_ss + he;
        kc[kc_off + d] = k[k_off + ro];
        vc[vc_off + d] = v[v_off + ro];
    }
}

/* ATTENTION with p.bf16_stream (torch's unfused bf16 attention), one work-item
 * per (query row i, head h, group g0 + g); q, k, v hold bf16 values and are
 * read as they are (the cpu's rule). The row's scores in S (lk floats per
 * work-item): s_j = R(R(sum_e q[e] k_j[e]) * scale); P = R(softmax(s));
 * o[e] = R(sum_j P_j v_j[e]), the sums ascending. */
__kernel void nf_bf16_spt_attention(__global const float * q, long q_off, __global const float * k, long k_off,
                                    __global const float * v, long v_off, __global float * o, long o_off,
                                    __global float * S, int lq, int lk, int hd, int H, int g0, long q_gs,
                                    long q_ss, long kv_gs, long kv_ss, long o_gs, long o_ss, float scale)
{
    const int  i  = get_global_id(0);
    const int  h  = get_global_id(1);
    const int  gl = get_global_id(2);
    if (i >= lq) {
        return;
    }
    const long g = (long)g0 + gl;
    __global const float * qb = q + q_off + g * q_gs + (long)i * q_ss + (long)h * hd;
    __global const float * kb = k + k_off + g * kv_gs + (long)h * hd;
    __global const float * vb = v + v_off + g * kv_gs + (long)h * hd;
    __global float * s = S + (((long)gl * H + h) * lq + i) * lk;
    for (int j = 0; j < lk; j++) {
        float d = 0.0f;
        for (int e = 0; e < hd; e++) {
            d += qb[e] * kb[(long)j * kv_ss + e];
        }
        s[j] = nf__bf16(nf__bf16(d) * scale);
    }
    nf__bf16_softmax_row(s, lk);
    __global float * ob = o + o_off + g * o_gs + (long)i * o_ss + (long)h * hd;
    for (int e = 0; e < hd; e++) {
        float acc = 0.0f;
        for (int j = 0; j < lk; j++) {
            acc += s[j] * vb[(long)j * kv_ss + e];
        }
        ob[e] = nf__bf16(acc);
    }
}
