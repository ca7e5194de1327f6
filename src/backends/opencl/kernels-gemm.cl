/*
 * kernels-gemm.cl -- LINEAR (the built-in GEMM and the epilogue CLBlast uses too) and CONV1D (im2col + GEMM)
 * (part of the program: see kernels-common.cl)
 */

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
 * t = tmp[r][o] (+ bias[o]);  y = accumulate ? y + t : t.
 * bf16 (--precision bf16-autocast; tmp the fp32 sums of the bf16 x and W, R =
 * nf__bf16): t = R(tmp + R(bias)), y = accumulate ? R(y + t) : t. */
__kernel void nf_conv1d_epilogue(__global const float * tmp, long tmp_off,
                                 __global const float * bias, long b_off, int has_bias,
                                 __global float * y, long y_off, long ldy, long y_gs,
                                 int r0, int nr, int len, int N, int accumulate, int bf16)
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
    __global float * yp = y + y_off + s * y_gs + t * ldy + o;
    if (bf16) {
        v = nf__bf16(v + (has_bias ? nf__bf16(bias[b_off + o]) : 0.0f));
        *yp = accumulate ? nf__bf16(*yp + v) : v;
        return;
    }
    if (has_bias) {
        v = v + bias[b_off + o];
    }
    *yp = accumulate ? *yp + v : v;
}
