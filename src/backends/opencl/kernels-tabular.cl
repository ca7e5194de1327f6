/*
 * kernels-tabular.cl -- the tabular (Mitra) ops: QUANTILE, BUCKETIZE_NORM, EMBED_FEATURES, LABEL_TOKENS
 * (part of the program: see kernels-common.cl)
 */

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

/* z*w + b, or with bf16 (--precision bf16-autocast: Linear(1, D) under
 * autocast) bf16(bf16(z)*bf16(w) + bf16(b)) */
float nf__lin1(float z, float w, float b, int bf16)
{
    if (bf16) {
        z = nf__bf16(z);
        w = nf__bf16(w);
        b = nf__bf16(b);
    }
    const float p = z * w;
    const float s = p + b;
    return bf16 ? nf__bf16(s) : s;
}

/* dim 0: d < D; dim 1: r*F + j < n*F.  tok[r][1+j][d] = z[r][j]*w[d] + b[d] (nf__lin1). */
__kernel void nf_embed_features(__global const float * z, long z_off,
                                __global const float * w, long w_off,
                                __global const float * b, long b_off,
                                __global float * tok, long tok_off,
                                long nF, int F, int T, int D, int bf16)
{
    const int  d  = get_global_id(0);
    const long rj = get_global_id(1);
    if (d >= D || rj >= nF) {
        return;
    }
    const long r = rj / F;
    const long j = rj % F;
    tok[tok_off + (r * T + 1 + j) * D + d] = nf__lin1(z[z_off + rj], w[w_off + d], b[b_off + d], bf16);
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

/* tok[r][0] = y[r]*w + b (nf__lin1) */
__kernel void nf_label_value(__global const float * y, long y_off,
                             __global const float * w, long w_off,
                             __global const float * b, long b_off,
                             __global float * tok, long tok_off, int n, int T, int D, int bf16)
{
    const int d = get_global_id(0);
    const int r = get_global_id(1);
    if (d >= D || r >= n) {
        return;
    }
    tok[tok_off + (long)r * T * D + d] = nf__lin1(y[y_off + r], w[w_off + d], b[b_off + d], bf16);
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
