/*
 * kernels-train-b.cl -- the training ops, set B: ATTENTION_BACKWARD,
 * EMBED_FEATURES_BACKWARD, LABEL_TOKENS_BACKWARD, CROSS_ENTROPY, MSE_LOSS
 * (part of the program: see kernels-common.cl). Sums over rows in nf_acc
 * (double with fp64), every reduction in a fixed order.
 */

/* ---- ATTENTION_BACKWARD ---------------------------------------------------- */

/* NF_ABW_WG work-items per work-group (opencl-kernels.h NF_CL_ABW_WG), head_dim <= NF_ABW_HD */
#define NF_ABW_WG 64
#define NF_ABW_HD 256
#define NF_ABW_PT (NF_ABW_HD / NF_ABW_WG) /* head_dim columns per work-item */

/* the forward's score dot (nf_attention): an fma chain over e, then * scale */
inline float nf_abw_dot_lg(__local const float * a, __global const float * b, int hd)
{
    float s = 0.0f;
    for (int e = 0; e < hd; e++) {
        s = fma(a[e], b[e], s);
    }
    return s;
}

inline float nf_abw_dot_gg(__global const float * a, __global const float * b, int hd)
{
    float s = 0.0f;
    for (int e = 0; e < hd; e++) {
        s = fma(a[e], b[e], s);
    }
    return s;
}

/* the same dot with the local operand second (identical bits to the above) */
inline float nf_abw_dot_gl(__global const float * a, __local const float * b, int hd)
{
    float s = 0.0f;
    for (int e = 0; e < hd; e++) {
        s = fma(a[e], b[e], s);
    }
    return s;
}

#define NF_ABW_ARGS                                                                           \
    __global const float * q, long q_off, __global const float * k, long k_off,              \
    __global const float * v, long v_off, __global const float * o, long o_off,              \
    __global const float * dO, long do_off, int lq, int lk, int hd, int H,                    \
    long q_gs, long q_ss, long kv_gs, long kv_ss, long o_gs, long o_ss, float scale,          \
    long drop_seed, int drop_thr, float drop_scale

/* Pass 1: one work-group per (query row i, head h, group g). The row's max
 * and exp sum (each work-item over keys j = lid mod WG, then a fixed tree),
 * P = exp(s - m) / l, dS = P (dP - delta) (with the forward's dropout,
 * nf_attn_drop: P (M dP - delta)), and dq = scale * sum_j dS_j k_j
 * by tiles of WG keys, each work-item summing its columns over j in order.
 * stats[2*row] = m, stats[2*row + 1] = l. */
__kernel __attribute__((reqd_work_group_size(NF_ABW_WG, 1, 1)))
void nf_attn_bwd_q(NF_ABW_ARGS, __global float * dq, long dq_off, __global float * st, long st_off)
{
    __local float qs[NF_ABW_HD], ds[NF_ABW_HD], red[NF_ABW_WG], dS[NF_ABW_WG];
    __local float delta_s;
    const int  lid = get_local_id(0);
    const int  i   = get_group_id(0);
    const long h   = get_group_id(1);
    const long g   = get_group_id(2);
    __global const float * qi = q + q_off + g * q_gs + i * q_ss + h * hd;
    __global const float * oi = o + o_off + g * o_gs + i * o_ss + h * hd;
    __global const float * di = dO + do_off + g * o_gs + i * o_ss + h * hd;
    __global const float * kb = k + k_off + g * kv_gs + h * hd;
    __global const float * vb = v + v_off + g * kv_gs + h * hd;
    for (int e = lid; e < hd; e += NF_ABW_WG) {
        qs[e] = qi[e];
        ds[e] = di[e];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0) {
        delta_s = nf_abw_dot_lg(ds, oi, hd);
    }
    float mx = -INFINITY;
    for (int j = lid; j < lk; j += NF_ABW_WG) {
        const float s = nf_abw_dot_lg(qs, kb + j * kv_ss, hd) * scale;
        mx = s > mx ? s : mx;
    }
    red[lid] = mx;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int w = NF_ABW_WG / 2; w > 0; w >>= 1) {
        if (lid < w) {
            red[lid] = red[lid + w] > red[lid] ? red[lid + w] : red[lid];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float m = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    float l = 0.0f;
    for (int j = lid; j < lk; j += NF_ABW_WG) {
        l = l + NF_EXP(nf_abw_dot_lg(qs, kb + j * kv_ss, hd) * scale - m);
    }
    red[lid] = l;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int w = NF_ABW_WG / 2; w > 0; w >>= 1) {
        if (lid < w) {
            red[lid] = red[lid] + red[lid + w];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float lsum = red[0];
    const float delta = delta_s;
    float acc[NF_ABW_PT];
    for (int r = 0; r < NF_ABW_PT; r++) {
        acc[r] = 0.0f;
    }
    for (int j0 = 0; j0 < lk; j0 += NF_ABW_WG) {
        const int j = j0 + lid;
        float d = 0.0f;
        if (j < lk) {
            const float p = NF_DIV(NF_EXP(nf_abw_dot_lg(qs, kb + j * kv_ss, hd) * scale - m), lsum);
            const float dp = nf_abw_dot_lg(ds, vb + j * kv_ss, hd);
            d = drop_thr > 0
                    ? p * (nf_attn_drop(drop_seed, ((g * H + h) * lq + i) * (long) lk + j, drop_thr, drop_scale) * dp -
                           delta)
                    : p * (dp - delta);
        }
        dS[lid] = d;
        barrier(CLK_LOCAL_MEM_FENCE);
        const int nj = lk - j0 < NF_ABW_WG ? lk - j0 : NF_ABW_WG;
        for (int r = 0; r < NF_ABW_PT; r++) {
            const int e = lid + r * NF_ABW_WG;
            if (e < hd) {
                float a = acc[r];
                for (int jj = 0; jj < nj; jj++) {
                    a = fma(dS[jj], kb[(j0 + jj) * kv_ss + e], a);
                }
                acc[r] = a;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    __global float * dqi = dq + dq_off + g * q_gs + i * q_ss + h * hd;
    for (int r = 0; r < NF_ABW_PT; r++) {
        const int e = lid + r * NF_ABW_WG;
        if (e < hd) {
            dqi[e] = scale * acc[r];
        }
    }
    if (lid == 0) {
        const long row = (g * H + h) * lq + i;
        st[st_off + 2 * row]     = m;
        st[st_off + 2 * row + 1] = lsum;
    }
}

/* Pass 2: one work-group per (key row j, head h, group g): the queries by
 * tiles of WG (P from pass 1's m, l; delta recomputed as pass 1 does), each
 * work-item summing its columns of dk and dv over i in order (dropout: dS as
 * pass 1, dv from P M). */
__kernel __attribute__((reqd_work_group_size(NF_ABW_WG, 1, 1)))
void nf_attn_bwd_kv(NF_ABW_ARGS, __global const float * st, long st_off, __global float * dk, long dk_off,
                    __global float * dv, long dv_off, int accumulate)
{
    __local float ks[NF_ABW_HD], vs[NF_ABW_HD], Ps[NF_ABW_WG], dS[NF_ABW_WG];
    const int  lid = get_local_id(0);
    const int  j   = get_group_id(0);
    const long h   = get_group_id(1);
    const long g   = get_group_id(2);
    __global const float * qb = q + q_off + g * q_gs + h * hd;
    __global const float * ob = o + o_off + g * o_gs + h * hd;
    __global const float * db = dO + do_off + g * o_gs + h * hd;
    __global const float * kj = k + k_off + g * kv_gs + j * kv_ss + h * hd;
    __global const float * vj = v + v_off + g * kv_gs + j * kv_ss + h * hd;
    for (int e = lid; e < hd; e += NF_ABW_WG) {
        ks[e] = kj[e];
        vs[e] = vj[e];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    float ak[NF_ABW_PT], av[NF_ABW_PT];
    for (int r = 0; r < NF_ABW_PT; r++) {
        ak[r] = 0.0f;
        av[r] = 0.0f;
    }
    for (int i0 = 0; i0 < lq; i0 += NF_ABW_WG) {
        const int i = i0 + lid;
        float p = 0.0f, d = 0.0f;
        if (i < lq) {
            const long row = (g * H + h) * lq + i;
            const float m = st[st_off + 2 * row], lsum = st[st_off + 2 * row + 1];
            __global const float * di = db + i * o_ss;
            p = NF_DIV(NF_EXP(nf_abw_dot_gl(qb + i * q_ss, ks, hd) * scale - m), lsum);
            const float dp = nf_abw_dot_gl(di, vs, hd), delta = nf_abw_dot_gg(di, ob + i * o_ss, hd);
            if (drop_thr > 0) {
                const float mk = nf_attn_drop(drop_seed, row * (long) lk + j, drop_thr, drop_scale);
                d = p * (mk * dp - delta);
                p = p * mk;
            } else {
                d = p * (dp - delta);
            }
        }
        Ps[lid] = p;
        dS[lid] = d;
        barrier(CLK_LOCAL_MEM_FENCE);
        const int ni = lq - i0 < NF_ABW_WG ? lq - i0 : NF_ABW_WG;
        for (int r = 0; r < NF_ABW_PT; r++) {
            const int e = lid + r * NF_ABW_WG;
            if (e < hd) {
                float a = ak[r], b = av[r];
                for (int ii = 0; ii < ni; ii++) {
                    a = fma(dS[ii], qb[(i0 + ii) * q_ss + e], a);
                    b = fma(Ps[ii], db[(i0 + ii) * o_ss + e], b);
                }
                ak[r] = a;
                av[r] = b;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    __global float * dkj = dk + dk_off + g * kv_gs + j * kv_ss + h * hd;
    __global float * dvj = dv + dv_off + g * kv_gs + j * kv_ss + h * hd;
    for (int r = 0; r < NF_ABW_PT; r++) {
        const int e = lid + r * NF_ABW_WG;
        if (e < hd) {
            const float tk = scale * ak[r];
            dkj[e] = accumulate ? dkj[e] + tk : tk;
            dvj[e] = accumulate ? dvj[e] + av[r] : av[r];
        }
    }
}

/* ---- EMBED_FEATURES_BACKWARD / LABEL_TOKENS_BACKWARD ----------------------- */

/* Column sums in two steps: NF_CL_TB_CHUNKS (opencl-kernels.h) chunks of
 * rows, each summed in order per column into part[(c*D + d)*2 + {0, 1}]
 * (nf_acc), then nf_colsum_finalize adds the chunks in order. */

/* dim 0: d < D; dim 1: chunk c.  Rows rj = r*F + j of the chunk:
 * part0 = sum z[rj] * dtok[r][1+j][d], part1 = sum dtok[r][1+j][d]. */
__kernel void nf_embed_bwd_part(__global const float * z, long z_off, __global const float * dtok, long t_off,
                                long nF, int F, int D, long per, __global nf_acc * part)
{
    const int d = get_global_id(0);
    const int c = get_global_id(1);
    if (d >= D) {
        return;
    }
    nf_acc a0 = 0, a1 = 0;
    const long end = (c + 1) * per < nF ? (c + 1) * per : nF;
    for (long rj = c * per; rj < end; rj++) {
        const long r = rj / F;
        const long j = rj - r * F;
        const float t = dtok[t_off + ((r * (F + 1)) + 1 + j) * D + d];
        a0 += (nf_acc)z[z_off + rj] * (nf_acc)t;
        a1 += (nf_acc)t;
    }
    part[((long)c * D + d) * 2]     = a0;
    part[((long)c * D + d) * 2 + 1] = a1;
}

/* dim 0: d < D; dim 1: chunk c.  Token 0 of rows r of the chunk, weight
 * w_r = y[r] (value mode) or 1: part0 = sum w_r * dtok[r][0][d], part1 = sum dtok[r][0][d]. */
__kernel void nf_label_bwd_part(__global const float * y, long y_off, int use_y, __global const float * dtok,
                                long t_off, int n, int T, int D, int per, __global nf_acc * part)
{
    const int d = get_global_id(0);
    const int c = get_global_id(1);
    if (d >= D) {
        return;
    }
    nf_acc a0 = 0, a1 = 0;
    const int end = (c + 1) * per < n ? (c + 1) * per : n;
    for (int r = c * per; r < end; r++) {
        const float t = dtok[t_off + (long)r * T * D + d];
        a0 += (use_y ? (nf_acc)y[y_off + r] : (nf_acc)1) * (nf_acc)t;
        a1 += (nf_acc)t;
    }
    part[((long)c * D + d) * 2]     = a0;
    part[((long)c * D + d) * 2 + 1] = a1;
}

/* out0[d] += (float)(sum_c part0), out1[d] += (float)(sum_c part1) (n_out == 2) */
__kernel void nf_colsum_finalize(__global const nf_acc * part, int nch, int D, __global float * out0, long off0,
                                 __global float * out1, long off1, int n_out)
{
    const int d = get_global_id(0);
    if (d >= D) {
        return;
    }
    nf_acc a0 = 0, a1 = 0;
    for (int c = 0; c < nch; c++) {
        a0 += part[((long)c * D + d) * 2];
        a1 += part[((long)c * D + d) * 2 + 1];
    }
    out0[off0 + d] = out0[off0 + d] + (float)a0;
    if (n_out == 2) {
        out1[off1 + d] = out1[off1 + d] + (float)a1;
    }
}

/* dim 0: d < D; dim 1: class c < C.  dE[c][d] += (float)(sum_{r: y[r] == c} dtok[r][0][d]), rows in order */
__kernel void nf_label_bwd_class(__global const int * y, long y_off, __global const float * dtok, long t_off,
                                 int n, int T, int D, int C, __global float * dE, long e_off)
{
    const int d = get_global_id(0);
    const int c = get_global_id(1);
    if (d >= D || c >= C) {
        return;
    }
    nf_acc a = 0;
    for (int r = 0; r < n; r++) {
        if (y[y_off + r] == c) {
            a += (nf_acc)dtok[t_off + (long)r * T * D + d];
        }
    }
    dE[e_off + (long)c * D + d] = dE[e_off + (long)c * D + d] + (float)a;
}

/* ---- CROSS_ENTROPY / MSE_LOSS ----------------------------------------------- */

/* One work-group of NF_LOSS_WG (opencl-kernels.h NF_CL_LOSS_WG): work-item t
 * takes rows t, t + WG, ... in order, then a fixed tree adds the partial sums. */
#define NF_LOSS_WG 64

inline void nf_loss_tree(__local nf_acc * red, int lid)
{
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int w = NF_LOSS_WG / 2; w > 0; w >>= 1) {
        if (lid < w) {
            red[lid] = red[lid] + red[lid + w];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

__kernel __attribute__((reqd_work_group_size(NF_LOSS_WG, 1, 1)))
void nf_cross_entropy(__global const float * l, long l_off, long ldl, __global const int * y, long y_off,
                      long n, int C, float grad_scale, __global float * loss, long loss_off,
                      __global float * dl, long dl_off, int has_dl)
{
    __local nf_acc red[NF_LOSS_WG];
    const int lid = get_local_id(0);
    nf_acc tot = 0;
    for (long r = lid; r < n; r += NF_LOSS_WG) {
        __global const float * lr = l + l_off + r * ldl;
        float mx = lr[0];
        for (int c = 1; c < C; c++) {
            mx = lr[c] > mx ? lr[c] : mx;
        }
        nf_acc sum = 0;
        for (int c = 0; c < C; c++) {
            sum += exp((nf_acc)lr[c] - (nf_acc)mx);
        }
        const int yr = y[y_off + r];
        tot += (yr >= 0 && yr < C) ? (nf_acc)mx + log(sum) - (nf_acc)lr[yr] : (nf_acc)NAN;
        if (has_dl) {
            for (int c = 0; c < C; c++) {
                const nf_acc sm = exp((nf_acc)lr[c] - (nf_acc)mx) / sum;
                dl[dl_off + r * C + c] = (float)((sm - (c == yr ? (nf_acc)1 : (nf_acc)0)) * (nf_acc)grad_scale);
            }
        }
    }
    red[lid] = tot;
    nf_loss_tree(red, lid);
    if (lid == 0) {
        loss[loss_off] = (float)(red[0] / (nf_acc)n);
    }
}

__kernel __attribute__((reqd_work_group_size(NF_LOSS_WG, 1, 1)))
void nf_mse_loss(__global const float * p, long p_off, long ldp, __global const float * t, long t_off, long n,
                 float grad_scale, __global float * loss, long loss_off, __global float * dp, long dp_off,
                 int has_dp)
{
    __local nf_acc red[NF_LOSS_WG];
    const int lid = get_local_id(0);
    nf_acc tot = 0;
    for (long i = lid; i < n; i += NF_LOSS_WG) {
        const float x = p[p_off + i * ldp];
        const float ti = t[t_off + i];
        const nf_acc d = (nf_acc)x - (nf_acc)ti;
        tot += d * d;
        if (has_dp) {
            dp[dp_off + i] = grad_scale * (x - ti);
        }
    }
    red[lid] = tot;
    nf_loss_tree(red, lid);
    if (lid == 0) {
        loss[loss_off] = (float)(red[0] / (nf_acc)n);
    }
}
