/*
 * kernels-attention.cl -- ATTENTION and the sinkhorn bucket ops BUCKET_ROUTE, BUCKET_GATHER
 * (part of the program: see kernels-common.cl)
 */

/* ---- ATTENTION ----------------------------------------------------------- */

/* One work-group of AWG work-items per (block of AQ query rows, head, group).
 * Keys/values stream through local memory in tiles of AK with an online
 * softmax (running max m, running sum l, rescale alpha), so any lk works with
 * fixed local memory; head_dim <= AHD. The tile shape is a compile-time
 * argument of nf__attention_tile (inlined and folded): nf_attention is 16
 * query rows x 16-key tiles for head_dim <= 128, nf_attention_wide 8 x 8 for
 * 128 < head_dim <= 256 (TabSTAR's 2-head fusion layer: head_dim 192), so
 * that its local memory stays under 32 KB. Both give each work-item
 * NF_APT = AQ * AHD / AWG outputs. */
#define NF_APT 16
#define NF_ATTENTION_ARGS                                                                  \
    __global const float * q, long q_off, __global const float * k, long k_off,           \
    __global const float * v, long v_off, __global float * o, long o_off,                 \
    int lq, int lk, int hd, long q_gs, long q_ss, long kv_gs, long kv_ss, long o_gs, long o_ss, \
    float scale, long drop_seed, int drop_thr, float drop_scale

/* ATTENTION's dropout factor of mask element i (nf-ops.def; DROPOUT's hash, nf_dropout): drop_scale, or 0
 * where the element is dropped. Also ATTENTION_BACKWARD's (kernels-train-b.cl). */
inline float nf_attn_drop(long seed, long i, int thr, float drop_scale)
{
    ulong z = (ulong) seed + ((ulong) i + 1UL) * 0x9E3779B97F4A7C15UL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9UL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBUL;
    z ^= z >> 31;
    return (long) (z >> 40) >= (long) thr ? drop_scale : 0.0f;
}

void nf__attention_tile(NF_ATTENTION_ARGS,
                        __local float * Qs, __local float * Ks, __local float * Vs, __local float * S,
                        __local float * Ml, __local float * Ll, __local float * Al,
                        const int AQ, const int AK, const int AHD, const int AWG)
{
    const int  tid = get_local_id(0);
    const int  i0  = get_group_id(0) * AQ;
    const long h   = get_group_id(1);
    const long g   = get_group_id(2);

    __global const float * qb = q + q_off + g * q_gs  + h * hd;
    __global const float * kb = k + k_off + g * kv_gs + h * hd;
    __global const float * vb = v + v_off + g * kv_gs + h * hd;
    __global float       * ob = o + o_off + g * o_gs  + h * hd;

    for (int idx = tid; idx < AQ * hd; idx += AWG) {
        const int i = idx / hd;
        const int e = idx % hd;
        Qs[i * AHD + e] = (i0 + i < lq) ? qb[(long)(i0 + i) * q_ss + e] : 0.0f;
    }
    if (tid < AQ) {
        Ml[tid] = -INFINITY;
        Ll[tid] = 0.0f;
    }
    float acc[NF_APT];
    for (int r = 0; r < NF_APT; r++) {
        acc[r] = 0.0f;
    }

    for (int j0 = 0; j0 < lk; j0 += AK) {
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int idx = tid; idx < AK * hd; idx += AWG) {
            const int jj = idx / hd;
            const int e  = idx % hd;
            const int ok = j0 + jj < lk;
            Ks[jj * (AHD + 1) + e] = ok ? kb[(long)(j0 + jj) * kv_ss + e] : 0.0f;
            Vs[jj * AHD + e]       = ok ? vb[(long)(j0 + jj) * kv_ss + e] : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int idx = tid; idx < AQ * AK; idx += AWG) {
            const int i  = idx / AK;
            const int jj = idx % AK;
            float s = 0.0f;
            for (int e = 0; e < hd; e++) {
                s = fma(Qs[i * AHD + e], Ks[jj * (AHD + 1) + e], s);
            }
            S[i * (AK + 1) + jj] = (j0 + jj < lk) ? s * scale : -INFINITY;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (tid < AQ) {
            const float m_old = Ml[tid];
            float mx = m_old;
            for (int jj = 0; jj < AK; jj++) {
                const float sv = S[tid * (AK + 1) + jj];
                mx = sv > mx ? sv : mx;
            }
            const float alpha = NF_EXP(m_old - mx);
            float l = Ll[tid] * alpha;
            /* the mask row of query i0 + tid (dropout: the sum l is the unmasked one's) */
            const long dbase = ((g * (long) get_num_groups(1) + h) * lq + i0 + tid) * (long) lk + j0;
            for (int jj = 0; jj < AK; jj++) {
                const float p = (j0 + jj < lk) ? NF_EXP(S[tid * (AK + 1) + jj] - mx) : 0.0f;
                S[tid * (AK + 1) + jj] =
                    drop_thr > 0 ? p * nf_attn_drop(drop_seed, dbase + jj, drop_thr, drop_scale) : p;
                l = l + p;
            }
            Ml[tid] = mx;
            Ll[tid] = l;
            Al[tid] = alpha;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int r = 0; r < NF_APT; r++) {
            const int idx = tid + r * AWG;
            if (idx < AQ * hd) {
                const int i = idx / hd;
                const int e = idx % hd;
                float a = acc[r] * Al[i];
                for (int jj = 0; jj < AK; jj++) {
                    a = fma(S[i * (AK + 1) + jj], Vs[jj * AHD + e], a);
                }
                acc[r] = a;
            }
        }
    }

    for (int r = 0; r < NF_APT; r++) {
        const int idx = tid + r * AWG;
        if (idx < AQ * hd) {
            const int i = idx / hd;
            const int e = idx % hd;
            if (i0 + i < lq) {
                ob[(long)(i0 + i) * o_ss + e] = NF_DIV(acc[r], Ll[i]);
            }
        }
    }
}

#define NF_ATTENTION_KERNEL(name, AQ, AK, AHD, AWG)                                              \
    __kernel __attribute__((reqd_work_group_size(AWG, 1, 1))) void name(NF_ATTENTION_ARGS)      \
    {                                                                                            \
        __local float Qs[AQ * AHD], Ks[AK * (AHD + 1)], Vs[AK * AHD], S[AQ * (AK + 1)];          \
        __local float Ml[AQ], Ll[AQ], Al[AQ];                                                    \
        nf__attention_tile(q, q_off, k, k_off, v, v_off, o, o_off, lq, lk, hd, q_gs, q_ss, kv_gs, \
                           kv_ss, o_gs, o_ss, scale, drop_seed, drop_thr, drop_scale, Qs, Ks, Vs, S, Ml, Ll, Al, AQ, \
                           AK, AHD, AWG);                                                            \
    }
NF_ATTENTION_KERNEL(nf_attention, 16, 16, 128, 128)
NF_ATTENTION_KERNEL(nf_attention_wide, 8, 8, 256, 128)

/* ---- BUCKET_ROUTE / BUCKET_GATHER ---------------------------------------- */

/* dim 0: e < E; dim 1: bucket u < nb; dim 2: z < 2*SH (SH = n_seq*H; z < SH:
 * q of (s, h) = z, else k of z - SH).  The bucket mean, rows summed in
 * ascending order: out[(z*nb + u)*E + e] = (sum_i x[u*bkt + i][h][e]) / bkt. */
__kernel void nf_bucket_means(__global const float * q, long q_off, long q_ss, long q_gs,
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
        acc += base[((long)u * bkt + i) * ss];
    }
    out[((long)z * nb + u) * E + e] = NF_DIV(acc, (float)bkt);
}

/* dim 0: query bucket u < nb; dim 1: sh = s*H + h < SH.  means as written by
 * nf_bucket_means (q: z = sh, k: z = SH + sh); R (SH, nb, nb) a scratch row
 * per (sh, u).  The cpu reference's order: R[v] = (sum_e qbar[e]*kbar_v[e]) *
 * scale; m = max; R[v] = exp(R[v] - m), summed ascending; R[v] /= sum, the
 * first maximum is v*; prob = (P[v*], P[v*] - max_{v != v*} P[v]). */
__kernel void nf_bucket_route(__global const float * means, __global float * R, long R_off,
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
        Rr[v] = d * scale;
    }
    float mx = Rr[0];
    for (int v = 1; v < nb; v++) {
        mx = Rr[v] > mx ? Rr[v] : mx;
    }
    float sum = 0.0f;
    for (int v = 0; v < nb; v++) {
        const float p = NF_EXP(Rr[v] - mx);
        Rr[v] = p;
        sum += p;
    }
    int best = 0;
    for (int v = 0; v < nb; v++) {
        Rr[v] = NF_DIV(Rr[v], sum);
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

/* dim 0: he = h*E + e < W (= H*E); dim 1: j < 2*B; dim 2: su = s*nb + u < n_su.
 * kcat/vcat row j of (s, u): j < B the (clamped) selected bucket v* scaled by
 * prob[0] (vcat from k when reuse_keys), else the query's own bucket. */
__kernel void nf_bucket_gather(__global const float * k, long k_off,
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
        kc[kc_off + d] = pu * kk;
        vc[vc_off + d] = pu * (reuse_keys ? kk : v[v_off + rs]);
    } else {
        const long ro = s * kv_gs + ((long)u * B + (j - B)) * kv_ss + he;
        kc[kc_off + d] = k[k_off + ro];
        vc[vc_off + d] = v[v_off + ro];
    }
}
