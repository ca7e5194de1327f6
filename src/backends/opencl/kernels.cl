/*
 * kernels.cl -- nofall OpenCL kernels (OpenCL C 1.2), embedded into the
 * library at build time (see CMakeLists.txt in this directory).
 *
 * Exact fp32:
 *  - the program is built WITHOUT -cl-fast-relaxed-math, -cl-mad-enable,
 *    -cl-unsafe-math-optimizations and -cl-finite-math-only;
 *  - FP_CONTRACT is OFF below, so a*b+c is two roundings unless fma() is
 *    written explicitly;
 *  - division and sqrt are correctly rounded: either the device honours
 *    -cl-fp32-correctly-rounded-divide-sqrt (NF_CR_DIVSQRT), or they are done
 *    in double and rounded once (exact for +-*÷√: 53 >= 2*24+2);
 *  - with cl_khr_fp64 (NF_FP64) exp() and erf() are evaluated in double and
 *    rounded to float, which matches a correctly rounded expf/erff (and glibc)
 *    except in astronomically rare cases; without fp64 the OpenCL float
 *    built-ins are used (<= 3 ulp exp, <= 16 ulp erf by the spec).
 *  - no atomics, every reduction has a fixed order: results are bitwise
 *    reproducible run to run on one device.
 *
 * Offsets and strides are in elements (long); the host passes a tensor's
 * byte offset divided by the element size.
 */
#pragma OPENCL FP_CONTRACT OFF

#ifdef NF_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double nf_acc;
#define NF_ACC_DIV(a, b) ((float)((a) / (b)))   /* double divide: always correctly rounded */
#else
typedef float nf_acc;
#define NF_ACC_DIV(a, b) NF_DIV((a), (b))
#endif

#if defined(NF_CR_DIVSQRT)
#define NF_DIV(a, b) ((a) / (b))
#define NF_SQRT(a)   sqrt(a)
#elif defined(NF_FP64)
#define NF_DIV(a, b) ((float)((double)(a) / (double)(b)))
#define NF_SQRT(a)   ((float)sqrt((double)(a)))
#else
#define NF_DIV(a, b) ((a) / (b))
#define NF_SQRT(a)   sqrt(a)
#endif

#ifdef NF_FP64
#define NF_EXP(a)       ((float)exp((double)(a)))
#define NF_ERF(a)       ((float)erf((double)(a)))
#else
#define NF_EXP(a)       exp(a)
#define NF_ERF(a)       erf(a)
#endif
/* as the cpu reference: erff(t * 0.70710678f), a float multiply */
#define NF_GELU_ARG(t)  ((t) * 0.70710678118654752440f)

/* ---- QUANTILE ------------------------------------------------------------ */

/* Total order of the sort: NaN is greater than every number (sorts last). */
inline int nf_gt(float a, float b)
{
    return isnan(a) ? !isnan(b) : (a > b);
}

/* One work-group per column j: copy x[:, j] into s[j*P .. j*P+P) padded with
 * NaN (P = power of two >= n), then a bitonic sort in place. The loop bounds
 * are uniform across the work-group, so the barriers are legal. */
__kernel void nf_quantile_sort(__global const float * x, long x_off, int n, int F,
                               __global float * s, int P)
{
    const int j   = get_group_id(0);
    const int lid = get_local_id(0);
    const int wg  = get_local_size(0);
    __global float * v = s + (long)j * P;

    for (int i = lid; i < P; i += wg) {
        v[i] = i < n ? x[x_off + (long)i * F + j] : NAN;
    }
    barrier(CLK_GLOBAL_MEM_FENCE);

    for (int k = 2; k <= P; k <<= 1) {
        for (int h = k >> 1; h > 0; h >>= 1) {
            for (int t = lid; t < P / 2; t += wg) {
                const int lo = ((t & ~(h - 1)) << 1) | (t & (h - 1));
                const int hi = lo + h;
                const float a = v[lo];
                const float b = v[hi];
                const int up = (lo & k) == 0;
                if (up ? nf_gt(a, b) : nf_gt(b, a)) {
                    v[lo] = b;
                    v[hi] = a;
                }
            }
            barrier(CLK_GLOBAL_MEM_FENCE);
        }
    }
}

/* B[j][k] from the sorted column, PyTorch's linear interpolation (lerp). */
__kernel void nf_quantile_interp(__global const float * s, int P, int n, int nq, int q_denom,
                                 int F, __global float * B, long B_off)
{
    const int kk = get_global_id(0);
    const int j  = get_global_id(1);
    if (kk >= nq || j >= F) {
        return;
    }
    __global const float * v = s + (long)j * P;
    float r;
    if (isnan(v[n - 1])) {
        r = NAN;
    } else {
        const float q   = NF_DIV((float)(kk + 1), (float)q_denom);
        const float pos = q * (float)(n - 1);
        long lo = (long)pos;
        const float w = pos - (float)lo;
        long hi = (long)ceil(pos);
        /* memory safety only: q in [0,1] keeps both inside [0, n-1] */
        lo = clamp(lo, 0L, (long)(n - 1));
        hi = clamp(hi, 0L, (long)(n - 1));
        const float a = v[lo];
        const float b = v[hi];
        r = fabs(w) < 0.5f ? fma(w, b - a, a) : fma(w - 1.0f, b - a, b);
    }
    B[B_off + (long)j * nq + kk] = r;
}

/* ---- BUCKETIZE_NORM ------------------------------------------------------ */

/* lower_bound, exactly torch's cus_lower_bound: NaN x -> nb. */
inline int nf_lower_bound(__global const float * b, int nb, float x)
{
    int lo = 0;
    int hi = nb;
    while (lo < hi) {
        const int mid = lo + ((hi - lo) >> 1);
        if (!(b[mid] >= x)) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

/* u[e] = idx(x[e]) / n_s for every element e = r*F + j. */
__kernel void nf_bucketize_u(__global const float * x, long x_off, long n_elems, int F,
                             __global const float * B, long B_off, int nb, int n_s,
                             __global float * u, long u_off)
{
    const long e = get_global_id(0);
    if (e >= n_elems) {
        return;
    }
    const int j = (int)(e % F);
    const int idx = nf_lower_bound(B + B_off + (long)j * nb, nb, x[x_off + e]);
    u[u_off + e] = NF_DIV((float)idx, (float)n_s);
}

/* Per column: mean and variance of the support u, summed in row order
 * (nf_acc: double when the device has fp64, else float).
 * st[2j] = mean, st[2j+1] = var. */
__kernel void nf_bucketize_stats(__global const float * u, long u_off, int n_s, int F,
                                 __global float * st)
{
    const int j = get_global_id(0);
    if (j >= F) {
        return;
    }
    __global const float * c = u + u_off + j;
    nf_acc s = 0;
    for (int r = 0; r < n_s; r++) {
        s += (nf_acc)c[(long)r * F];
    }
    const float mean = NF_DIV((float)s, (float)n_s);
    nf_acc s2 = 0;
    for (int r = 0; r < n_s; r++) {
        const float d = c[(long)r * F] - mean;
        s2 += (nf_acc)(d * d);
    }
    const float var = NF_DIV((float)s2, (float)n_s);
    st[2 * j]     = mean;
    st[2 * j + 1] = var;
}

/* z = var == 0 ? 0 : (u - mean) / sqrt(var), in place. */
__kernel void nf_bucketize_z(__global float * u, long u_off, long n_elems, int F,
                             __global const float * st)
{
    const long e = get_global_id(0);
    if (e >= n_elems) {
        return;
    }
    const int j = (int)(e % F);
    const float mean = st[2 * j];
    const float var  = st[2 * j + 1];
    const float d = u[u_off + e] - mean;
    u[u_off + e] = var == 0.0f ? 0.0f : NF_DIV(d, NF_SQRT(var));
}

/* ---- EMBED_FEATURES / LABEL_TOKENS --------------------------------------- */

/* dim 0: d < D; dim 1: r*F + j < n*F.  tok[r][1+j][d] = z[r][j]*w[d] + b[d]. */
__kernel void nf_embed_features(__global const float * z, long z_off,
                                __global const float * w, long w_off,
                                __global const float * b, long b_off,
                                __global float * tok, long tok_off,
                                long nF, int F, int T, int D)
{
    const int  d  = get_global_id(0);
    const long rj = get_global_id(1);
    if (d >= D || rj >= nF) {
        return;
    }
    const long r = rj / F;
    const long j = rj % F;
    const float p = z[z_off + rj] * w[w_off + d];
    tok[tok_off + (r * T + 1 + j) * D + d] = p + b[b_off + d];
}

/* dim 0: d < D; dim 1: r < n.  tok[r][0] = E[y[r]] (NaN when out of range). */
__kernel void nf_label_class(__global const int * y, long y_off,
                             __global const float * E, long E_off, int C,
                             __global float * tok, long tok_off, int n, int T, int D)
{
    const int d = get_global_id(0);
    const int r = get_global_id(1);
    if (d >= D || r >= n) {
        return;
    }
    const int c = y[y_off + r];
    tok[tok_off + (long)r * T * D + d] = (c >= 0 && c < C) ? E[E_off + (long)c * D + d] : NAN;
}

/* tok[r][0] = y[r]*w + b */
__kernel void nf_label_value(__global const float * y, long y_off,
                             __global const float * w, long w_off,
                             __global const float * b, long b_off,
                             __global float * tok, long tok_off, int n, int T, int D)
{
    const int d = get_global_id(0);
    const int r = get_global_id(1);
    if (d >= D || r >= n) {
        return;
    }
    const float p = y[y_off + r] * w[w_off + d];
    tok[tok_off + (long)r * T * D + d] = p + b[b_off + d];
}

/* tok[r][0] = M[0] */
__kernel void nf_label_mask(__global const float * M, long M_off,
                            __global float * tok, long tok_off, int n, int T, int D)
{
    const int d = get_global_id(0);
    const int r = get_global_id(1);
    if (d >= D || r >= n) {
        return;
    }
    tok[tok_off + (long)r * T * D + d] = M[M_off + d];
}

/* ---- LAYER_NORM ---------------------------------------------------------- */

/* One work-group per row; the work-group size is a power of two. Each
 * work-item sums a fixed strided subset, then a fixed tree: deterministic.
 * Same arithmetic as the cpu reference: sums in nf_acc (double with fp64),
 * mu = (float)(s / k), var = (float)(sum (x-mu)^2 / k),
 * rstd = 1 / sqrt(var + eps), y = (x - mu) * rstd * g + b. */
/* Sum of v over the work-group (power-of-two size), a fixed-order tree:
 * deterministic. red has one slot per work-item; all work-items must call. */
static nf_acc nf_wg_sum(__local nf_acc * red, nf_acc v, int lid, int wg) {
    red[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = wg >> 1; h > 0; h >>= 1) {
        if (lid < h) {
            red[lid] += red[lid + h];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const nf_acc r = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

__kernel void nf_layer_norm(__global const float * x, long x_off, long ldx,
                            __global const float * g, long g_off,
                            __global const float * b, long b_off,
                            __global float * y, long y_off, long ldy,
                            int k, float eps, __local nf_acc * red)
{
    const long r   = get_group_id(0);
    const int  lid = get_local_id(0);
    const int  wg  = get_local_size(0);
    __global const float * xr = x + x_off + r * ldx;
    __global float * yr = y + y_off + r * ldy;

    nf_acc s = 0;
    for (int c = lid; c < k; c += wg) {
        s += (nf_acc)xr[c];
    }
    const float mu = NF_ACC_DIV(nf_wg_sum(red, s, lid, wg), (nf_acc)k);

    nf_acc s2 = 0;
    for (int c = lid; c < k; c += wg) {
        const nf_acc d = (nf_acc)xr[c] - (nf_acc)mu;
        s2 += d * d;
    }
    const float var  = NF_ACC_DIV(nf_wg_sum(red, s2, lid, wg), (nf_acc)k);
    const float rstd = NF_DIV(1.0f, NF_SQRT(var + eps));
    for (int c = lid; c < k; c += wg) {
        const float t = (xr[c] - mu) * rstd;
        const float u = t * g[g_off + c];
        yr[c] = u + b[b_off + c];
    }
}

/* ---- LINEAR -------------------------------------------------------------- */

/* y[m][n] = act(sum_k x[m][k]*W[n][k] + bias[n]) (+ y[m][n] if accumulate).
 * One NF_LIN_TM x NF_LIN_TN output tile per NF_LIN_WX x NF_LIN_WY work-group,
 * (TM/WY) x (TN/WX) outputs per work-item, K in tiles of NF_LIN_TK through
 * local memory. Each output is one fma chain in k order (deterministic).
 * The host passes the geometry as -D options (opencl-kernels.h). */
#ifndef NF_LIN_TM
#define NF_LIN_TM 64
#define NF_LIN_TN 64
#define NF_LIN_TK 16
#define NF_LIN_WX 16
#define NF_LIN_WY 16
#endif
#ifndef NF_LIN_VEC
#define NF_LIN_VEC 0
#endif
#define NF_LIN_RM (NF_LIN_TM / NF_LIN_WY)
#define NF_LIN_RN (NF_LIN_TN / NF_LIN_WX)
#define NF_LIN_NT (NF_LIN_WX * NF_LIN_WY)
/* column of output j of work-item tx: strided (scalar) or 4 contiguous (vector, RN == 4) */
#if NF_LIN_VEC
#define NF_LIN_COL(tx, j) (4 * (tx) + (j))
#else
#define NF_LIN_COL(tx, j) ((tx) + NF_LIN_WX * (j))
#endif

__kernel __attribute__((reqd_work_group_size(NF_LIN_WX, NF_LIN_WY, 1)))
void nf_linear(__global const float * x, long x_off, long ldx,
               __global const float * W, long W_off,
               __global const float * bias, long b_off, int has_bias,
               __global float * y, long y_off, long ldy,
               int M, int N, int K, int act, int accumulate)
{
    __local float As[NF_LIN_TK][NF_LIN_TM + 1];
    __local float Bs[NF_LIN_TK][NF_LIN_TN + 4];
    const int tx  = get_local_id(0);
    const int ty  = get_local_id(1);
    const int tid = ty * NF_LIN_WX + tx;
    const int n0  = get_group_id(0) * NF_LIN_TN;
    const int m0  = get_group_id(1) * NF_LIN_TM;

    float acc[NF_LIN_RM][NF_LIN_RN];
    for (int i = 0; i < NF_LIN_RM; i++) {
        for (int j = 0; j < NF_LIN_RN; j++) {
            acc[i][j] = 0.0f;
        }
    }
#if NF_LIN_VEC
    float4 acc4[NF_LIN_RM];
    for (int i = 0; i < NF_LIN_RM; i++) {
        acc4[i] = (float4)(0.0f);
    }
#endif

    for (int k0 = 0; k0 < K; k0 += NF_LIN_TK) {
        for (int idx = tid; idx < NF_LIN_TM * NF_LIN_TK; idx += NF_LIN_NT) {
            const int rr = idx / NF_LIN_TK;
            const int kk = idx % NF_LIN_TK;
            const int gm = m0 + rr;
            const int gk = k0 + kk;
            As[kk][rr] = (gm < M && gk < K) ? x[x_off + (long)gm * ldx + gk] : 0.0f;
        }
        for (int idx = tid; idx < NF_LIN_TN * NF_LIN_TK; idx += NF_LIN_NT) {
            const int rr = idx / NF_LIN_TK;
            const int kk = idx % NF_LIN_TK;
            const int gn = n0 + rr;
            const int gk = k0 + kk;
            Bs[kk][rr] = (gn < N && gk < K) ? W[W_off + (long)gn * K + gk] : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
#if NF_LIN_VEC
        /* work-item columns are 4 contiguous outputs: float4 math */
        for (int kk = 0; kk < NF_LIN_TK; kk++) {
            const float4 b4 = vload4(0, &Bs[kk][4 * tx]);
            for (int i = 0; i < NF_LIN_RM; i++) {
                acc4[i] = fma((float4)(As[kk][ty + NF_LIN_WY * i]), b4, acc4[i]);
            }
        }
#else
        for (int kk = 0; kk < NF_LIN_TK; kk++) {
            float a[NF_LIN_RM];
            float bb[NF_LIN_RN];
            for (int i = 0; i < NF_LIN_RM; i++) {
                a[i] = As[kk][ty + NF_LIN_WY * i];
            }
            for (int j = 0; j < NF_LIN_RN; j++) {
                bb[j] = Bs[kk][tx + NF_LIN_WX * j];
            }
            for (int i = 0; i < NF_LIN_RM; i++) {
                for (int j = 0; j < NF_LIN_RN; j++) {
                    acc[i][j] = fma(a[i], bb[j], acc[i][j]);
                }
            }
        }
#endif
        barrier(CLK_LOCAL_MEM_FENCE);
    }

#if NF_LIN_VEC
    for (int i = 0; i < NF_LIN_RM; i++) {
        acc[i][0] = acc4[i].s0;
        acc[i][1] = acc4[i].s1;
        acc[i][2] = acc4[i].s2;
        acc[i][3] = acc4[i].s3;
    }
#endif
    for (int i = 0; i < NF_LIN_RM; i++) {
        const int gm = m0 + ty + NF_LIN_WY * i;
        if (gm >= M) {
            continue;
        }
        for (int j = 0; j < NF_LIN_RN; j++) {
            const int gn = n0 + NF_LIN_COL(tx, j);
            if (gn >= N) {
                continue;
            }
            float t = acc[i][j];
            if (has_bias) {
                t = t + bias[b_off + gn];
            }
            if (act == 1) {
                const float e = NF_ERF(NF_GELU_ARG(t));
                const float h = 0.5f * t;
                t = h * (1.0f + e);
            } else if (act == 2) {
                t = t < 0.0f ? 0.0f : t;
            }
            __global float * yp = y + y_off + (long)gm * ldy + gn;
            *yp = accumulate ? *yp + t : t;
        }
    }
}

/* Epilogue for an external GEMM (CLBlast) that wrote the raw products
 * tmp[m][n] = sum_k x W^T: same bias / GELU / accumulate as nf_linear. */
__kernel void nf_linear_epilogue(__global const float * tmp,
                                 __global const float * bias, long b_off, int has_bias,
                                 __global float * y, long y_off, long ldy,
                                 int M, int N, int act, int accumulate)
{
    const int gn = get_global_id(0);
    const int gm = get_global_id(1);
    if (gn >= N || gm >= M) {
        return;
    }
    float t = tmp[(long)gm * N + gn];
    if (has_bias) {
        t = t + bias[b_off + gn];
    }
    if (act == 1) {
        const float e = NF_ERF(NF_GELU_ARG(t));
        const float h = 0.5f * t;
        t = h * (1.0f + e);
    } else if (act == 2) {
        t = t < 0.0f ? 0.0f : t;
    }
    __global float * yp = y + y_off + (long)gm * ldy + gn;
    *yp = accumulate ? *yp + t : t;
}

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
    float scale

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
            for (int jj = 0; jj < AK; jj++) {
                const float p = (j0 + jj < lk) ? NF_EXP(S[tid * (AK + 1) + jj] - mx) : 0.0f;
                S[tid * (AK + 1) + jj] = p;
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
                           kv_ss, o_gs, o_ss, scale, Qs, Ks, Vs, S, Ml, Ll, Al, AQ, AK, AHD, AWG); \
    }
NF_ATTENTION_KERNEL(nf_attention, 16, 16, 128, 128)
NF_ATTENTION_KERNEL(nf_attention_wide, 8, 8, 256, 128)

/* ---- CONV1D -------------------------------------------------------------- */

/* im2col + GEMM (opencl-gemm.c): W (cout, cin, K) is permuted tap-major into
 * Wt (cout, K, cin), so that an im2col row is K contiguous copies of input
 * rows; the GEMM writes the raw sums, nf_conv1d_epilogue adds the bias and
 * accumulates as the cpu reference: y + (sum + bias). */

/* Wt[(o*K + k)*cin + c] = W[(o*cin + c)*K + k], e < n = cout*K*cin */
__kernel void nf_conv1d_wperm(__global const float * W, long W_off,
                              __global float * Wt, long Wt_off, int cin, int K, long n)
{
    const long e = get_global_id(0);
    if (e >= n) {
        return;
    }
    const int  c  = (int)(e % cin);
    const long ok = e / cin;
    const int  k  = (int)(ok % K);
    const long o  = ok / K;
    Wt[Wt_off + e] = W[W_off + (o * cin + c) * K + k];
}

/* dim 0: kc = k*cin + c < KC; dim 1: r < nr.  Row r is the flattened
 * (sequence, position) index r0 + r = s*len + t:
 * col[r][kc] = x[s][t + k*dil - pad][c], 0 outside 0 <= t' < len. */
__kernel void nf_conv1d_im2col(__global const float * x, long x_off, long ldx, long x_gs,
                               __global float * col, long col_off,
                               int r0, int nr, int len, int cin, int KC, long dil, long pad)
{
    const int kc = get_global_id(0);
    const int r  = get_global_id(1);
    if (kc >= KC || r >= nr) {
        return;
    }
    const int  rr = r0 + r;   /* the host keeps n_seq*len in int: 32-bit divisions */
    const long s  = rr / len;
    const int  t  = rr % len;
    const int  k  = kc / cin;
    const int  c  = kc - k * cin;
    const long ti = t + (long)k * dil - pad;
    col[col_off + (long)r * KC + kc] = (ti >= 0 && ti < len) ? x[x_off + s * x_gs + ti * ldx + c] : 0.0f;
}

/* dim 0: o < N (= cout); dim 1: r < nr (rows as in nf_conv1d_im2col).
 * t = tmp[r][o] (+ bias[o]);  y = accumulate ? y + t : t. */
__kernel void nf_conv1d_epilogue(__global const float * tmp, long tmp_off,
                                 __global const float * bias, long b_off, int has_bias,
                                 __global float * y, long y_off, long ldy, long y_gs,
                                 int r0, int nr, int len, int N, int accumulate)
{
    const int o = get_global_id(0);
    const int r = get_global_id(1);
    if (o >= N || r >= nr) {
        return;
    }
    const int  rr = r0 + r;
    const long s  = rr / len;
    const long t  = rr % len;
    float v = tmp[tmp_off + (long)r * N + o];
    if (has_bias) {
        v = v + bias[b_off + o];
    }
    __global float * yp = y + y_off + s * y_gs + t * ldy + o;
    *yp = accumulate ? *yp + v : v;
}

/* ---- BATCH_NORM, FILL, AXIAL_POS ----------------------------------------- */

/* dim 0: channel c < C; dim 1: a block of NF_BN_ROWS rows.  The cpu order:
 * a = (1 / sqrt(var + eps)) * w;  sh = b - mean * a;  y = x * a + sh;
 * y = relu && y < 0 ? 0 : y. */
#define NF_BN_ROWS 16
__kernel void nf_batch_norm(__global const float * x, long x_off, long ldx,
                            __global const float * w, long w_off,
                            __global const float * b, long b_off,
                            __global const float * mean, long mean_off,
                            __global const float * var, long var_off,
                            __global float * y, long y_off, long ldy,
                            long m, int C, float eps, int relu)
{
    const int  c  = get_global_id(0);
    const long r0 = (long)get_global_id(1) * NF_BN_ROWS;
    if (c >= C || r0 >= m) {
        return;
    }
    const float rs = NF_DIV(1.0f, NF_SQRT(var[var_off + c] + eps));
    const float a  = rs * w[w_off + c];
    const float ma = mean[mean_off + c] * a;
    const float sh = b[b_off + c] - ma;
    const long  r1 = r0 + NF_BN_ROWS < m ? r0 + NF_BN_ROWS : m;
    for (long r = r0; r < r1; r++) {
        const float xa = x[x_off + r * ldx + c] * a;
        const float v  = xa + sh;
        y[y_off + r * ldy + c] = relu && v < 0.0f ? 0.0f : v;
    }
}

/* dim 0: c < k; dim 1: r < m.  y[r*ld + c] = value. */
__kernel void nf_fill(__global float * y, long y_off, long ld, int m, int k, float value)
{
    const int c = get_global_id(0);
    const int r = get_global_id(1);
    if (c >= k || r >= m) {
        return;
    }
    y[y_off + (long)r * ld + c] = value;
}

/* dim 0: c < D; dim 1: s*len + t < n_rows.
 * x[s][t][c] = x[s][t][c] + (e0[t / n1][c] + e1[t % n1][c]). */
__kernel void nf_axial_pos(__global const float * e0, long e0_off,
                           __global const float * e1, long e1_off,
                           __global float * x, long x_off, long ld, long gs,
                           long n_rows, long len, long n1, int D)
{
    const int  c  = get_global_id(0);
    const long st = get_global_id(1);
    if (c >= D || st >= n_rows) {
        return;
    }
    const long s = st / len;
    const long t = st % len;
    const float p = e0[e0_off + (t / n1) * D + c] + e1[e1_off + (t % n1) * D + c];
    __global float * xp = x + x_off + s * gs + t * ld + c;
    *xp = *xp + p;
}

/* ---- GATHER_ROWS ----------------------------------------------------------- */

/* dim 0: c < k; dim 1: r < m.  g = scale * W[idx[r]][c] (a zero row for an
 * index outside [0, n_table)); y[r][c] = accumulate ? y + g : g. */
__kernel void nf_gather_rows(__global const int * idx, long idx_off,
                             __global const float * W, long w_off, long ldw, long n_table,
                             __global float * y, long y_off, long ldy,
                             long m, int k, float scale, int accumulate)
{
    const int  c = get_global_id(0);
    const long r = get_global_id(1);
    if (c >= k || r >= m) {
        return;
    }
    const long i = idx[idx_off + r];
    const float g = (i >= 0 && i < n_table) ? scale * W[w_off + i * ldw + c] : 0.0f;
    __global float * yp = y + y_off + r * ldy + c;
    *yp = accumulate ? *yp + g : g;
}

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
