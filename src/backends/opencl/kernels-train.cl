/*
 * kernels-train.cl -- the training ops, set A: GEMM (built-in kernel and the
 * store after CLBlast), COL_SUM, ACT, ACT_BACKWARD, LAYER_NORM_BACKWARD,
 * ADAMW, COPY (part of the program: see kernels-common.cl; LAYER_NORM's row
 * statistics nf_ln_stats and the work-group sum nf_wg_sum are kernels-norm.cl's).
 * Sums over rows in nf_acc (double with fp64), one work-item per column or a
 * fixed tree: deterministic.
 */

/* ---- GEMM ------------------------------------------------------------------ */

/* C (+)= op(A) op(B), one NF_GT x NF_GT output tile per work-group of
 * NF_GT x NF_GT work-items, one output each, K in tiles of NF_GT through
 * local memory; each output is one fma chain in k order. */
#define NF_GT 16
__kernel __attribute__((reqd_work_group_size(NF_GT, NF_GT, 1)))
void nf_gemm(__global const float * A, long a_off, long lda, int trans_a,
             __global const float * B, long b_off, long ldb, int trans_b,
             __global float * C, long c_off, long ldc,
             int M, int N, int K, int accumulate)
{
    __local float As[NF_GT][NF_GT + 1];
    __local float Bs[NF_GT][NF_GT + 1];
    const int tx = get_local_id(0);
    const int ty = get_local_id(1);
    const int j  = get_group_id(0) * NF_GT + tx;
    const int i  = get_group_id(1) * NF_GT + ty;
    const int i0 = get_group_id(1) * NF_GT;
    const int j0 = get_group_id(0) * NF_GT;
    float acc = 0.0f;
    for (int l0 = 0; l0 < K; l0 += NF_GT) {
        /* As[r][l] = op(A)[i0 + r][l0 + l], Bs[l][c] = op(B)[l0 + l][j0 + c] */
        {
            const int r = ty, l = tx;
            const int gi = i0 + r, gl = l0 + l;
            float a = 0.0f;
            if (gi < M && gl < K) {
                a = trans_a ? A[a_off + (long)gl * lda + gi] : A[a_off + (long)gi * lda + gl];
            }
            As[r][l] = a;
        }
        {
            const int l = ty, c = tx;
            const int gl = l0 + l, gj = j0 + c;
            float b = 0.0f;
            if (gl < K && gj < N) {
                b = trans_b ? B[b_off + (long)gj * ldb + gl] : B[b_off + (long)gl * ldb + gj];
            }
            Bs[l][c] = b;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int l = 0; l < NF_GT; l++) {
            acc = fma(As[ty][l], Bs[l][tx], acc);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (i < M && j < N) {
        __global float * cp = C + c_off + (long)i * ldc + j;
        *cp = accumulate ? *cp + acc : acc;
    }
}

/* after an external GEMM (CLBlast) wrote t (M x N, contiguous):
 * C[i*ldc + j] (+)= t[i][j] */
__kernel void nf_gemm_store(__global const float * t, __global float * C, long c_off, long ldc,
                            int M, int N, int accumulate)
{
    const int j = get_global_id(0);
    const int i = get_global_id(1);
    if (j >= N || i >= M) {
        return;
    }
    const float v = t[(long)i * N + j];
    __global float * cp = C + c_off + (long)i * ldc + j;
    *cp = accumulate ? *cp + v : v;
}

/* ---- COL_SUM --------------------------------------------------------------- */

/* one work-item per column, the rows in order in nf_acc */
__kernel void nf_col_sum(__global const float * x, long x_off, long ldx,
                         __global float * y, long y_off, long m, int n, int accumulate)
{
    const int j = get_global_id(0);
    if (j >= n) {
        return;
    }
    nf_acc s = 0;
    for (long i = 0; i < m; i++) {
        s += (nf_acc)x[x_off + i * ldx + j];
    }
    __global float * yp = y + y_off + j;
    *yp = accumulate ? *yp + (float)s : (float)s;
}

/* ---- ACT, ACT_BACKWARD ------------------------------------------------------- */

/* act 1: GELU as nf_linear's epilogue (the same expression); 2: ReLU */
__kernel void nf_act(__global const float * x, long x_off, __global float * y, long y_off, long n, int act)
{
    const long i = get_global_id(0);
    if (i >= n) {
        return;
    }
    float t = x[x_off + i];
    if (act == 1) {
        const float e = NF_ERF(NF_GELU_ARG(t));
        const float h = 0.5f * t;
        t = h * (1.0f + e);
    } else {
        t = t < 0.0f ? 0.0f : t;
    }
    y[y_off + i] = t;
}

/* dx = dy * act'(x): GELU c = 0.5 (1 + erf(x * 0.70710678f)),
 * p = exp(-0.5 x x) * 0.3989422804f, dx = dy * (c + x p); ReLU x > 0 ? dy : 0.
 * dx may be dy: each work-item reads its x, dy before writing. */
__kernel void nf_act_backward(__global const float * x, long x_off, __global const float * dy, long dy_off,
                              __global float * dx, long dx_off, long n, int act)
{
    const long i = get_global_id(0);
    if (i >= n) {
        return;
    }
    const float xv = x[x_off + i];
    const float g  = dy[dy_off + i];
    float r;
    if (act == 1) {
        const float e   = NF_ERF(xv * 0.70710678f);
        const float cdf = 0.5f * (1.0f + e);
        const float q   = -0.5f * xv;
        const float pdf = NF_EXP(q * xv) * 0.3989422804f;
        const float xp  = xv * pdf;
        r = g * (cdf + xp);
    } else {
        r = xv > 0.0f ? g : 0.0f;
    }
    dx[dx_off + i] = r;
}

/* ---- LAYER_NORM_BACKWARD ----------------------------------------------------- */

/* pass 1: one work-group per row (as nf_layer_norm, the same statistics
 * code): mu, rstd into st[2r], st[2r+1] for pass 2; a = mean(gd),
 * b = mean(gd * xh) in nf_acc; dx (+)= rstd * ((gd - a) - xh * b). */
__kernel void nf_ln_backward_rows(__global const float * x, long x_off, long ldx,
                                  __global const float * g, long g_off,
                                  __global const float * dy, long dy_off, long lddy,
                                  __global float * dx, long dx_off, long lddx,
                                  __global float * st, int k, float eps, int accumulate,
                                  __local nf_acc * red)
{
    const long r   = get_group_id(0);
    const int  lid = get_local_id(0);
    const int  wg  = get_local_size(0);
    __global const float * xr  = x + x_off + r * ldx;
    __global const float * dyr = dy + dy_off + r * lddy;
    __global float * dxr = dx + dx_off + r * lddx;
    float mu, rstd;
    nf_ln_stats(xr, k, eps, red, lid, wg, &mu, &rstd);
    if (lid == 0) {
        st[2 * r]     = mu;
        st[2 * r + 1] = rstd;
    }
    nf_acc sa = 0, sb = 0;
    for (int c = lid; c < k; c += wg) {
        const float xh = (xr[c] - mu) * rstd;
        const float gd = dyr[c] * g[g_off + c];
        sa += (nf_acc)gd;
        sb += (nf_acc)gd * (nf_acc)xh;
    }
    const float a = NF_ACC_DIV(nf_wg_sum(red, sa, lid, wg), (nf_acc)k);
    const float b = NF_ACC_DIV(nf_wg_sum(red, sb, lid, wg), (nf_acc)k);
    for (int c = lid; c < k; c += wg) {
        const float xh = (xr[c] - mu) * rstd;
        const float gd = dyr[c] * g[g_off + c];
        const float u  = gd - a;
        const float w  = xh * b;
        const float t  = rstd * (u - w);
        dxr[c] = accumulate ? dxr[c] + t : t;
    }
}

/* pass 2: one work-item per column c, the rows in order:
 * dg[c] += (float) sum dy * xh, db[c] += (float) sum dy (nf_acc) */
__kernel void nf_ln_backward_cols(__global const float * x, long x_off, long ldx,
                                  __global const float * dy, long dy_off, long lddy,
                                  __global const float * st,
                                  __global float * dg, long dg_off, __global float * db, long db_off,
                                  long m, int k)
{
    const int c = get_global_id(0);
    if (c >= k) {
        return;
    }
    nf_acc sg = 0, sd = 0;
    for (long r = 0; r < m; r++) {
        const float xh = (x[x_off + r * ldx + c] - st[2 * r]) * st[2 * r + 1];
        const float d  = dy[dy_off + r * lddy + c];
        sg += (nf_acc)d * (nf_acc)xh;
        sd += (nf_acc)d;
    }
    dg[dg_off + c] = dg[dg_off + c] + (float)sg;
    db[db_off + c] = db[db_off + c] + (float)sd;
}

/* ---- ADAMW, COPY ------------------------------------------------------------- */

/* PyTorch AdamW's step (nf-ops.def ADAMW): fma() is the one fused operation */
__kernel void nf_adamw(__global const float * g, long g_off, __global float * p, long p_off,
                       __global float * m, long m_off, __global float * v, long v_off, long n,
                       float decay, float w1, float b2, float c2, float bc2s, float eps, float s)
{
    const long i = get_global_id(0);
    if (i >= n) {
        return;
    }
    const float gi = g[g_off + i];
    const float m0 = m[m_off + i];
    const float pi = p[p_off + i] * decay;
    const float mi = fma(w1, gi - m0, m0);
    const float vb = v[v_off + i] * b2;
    const float cg = c2 * gi;
    const float vi = vb + cg * gi;
    const float d  = NF_DIV(NF_SQRT(vi), bc2s) + eps;
    const float sm = s * mi;
    m[m_off + i] = mi;
    v[v_off + i] = vi;
    p[p_off + i] = pi + NF_DIV(sm, d);
}

__kernel void nf_copy(__global const float * x, long x_off, __global float * y, long y_off, long n)
{
    const long i = get_global_id(0);
    if (i < n) {
        y[y_off + i] = x[x_off + i];
    }
}
