/*
 * kernels-norm.cl -- LAYER_NORM and BATCH_NORM
 * (part of the program: see kernels-common.cl)
 */

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

/* The row statistics of LAYER_NORM (and LAYER_NORM_BACKWARD, kernels-train.cl):
 * mu, rstd of the k elements at xr; all work-items of the group must call. */
static void nf_ln_stats(__global const float * xr, int k, float eps, __local nf_acc * red, int lid, int wg,
                        float * mu_out, float * rstd_out)
{
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
    const float var = NF_ACC_DIV(nf_wg_sum(red, s2, lid, wg), (nf_acc)k);
    *mu_out   = mu;
    *rstd_out = NF_DIV(1.0f, NF_SQRT(var + eps));
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

    float mu, rstd;
    nf_ln_stats(xr, k, eps, red, lid, wg, &mu, &rstd);
    for (int c = lid; c < k; c += wg) {
        const float t = (xr[c] - mu) * rstd;
        const float u = t * g[g_off + c];
        yr[c] = u + b[b_off + c];
    }
}

/* ---- BATCH_NORM ---------------------------------------------------------- */

/* dim 0: channel c < C; dim 1: a block of NF_BN_ROWS rows.  The cpu order:
 * a = (1 / sqrt(var + eps)) * w;  sh = b - mean * a;  y = x * a + sh;
 * y = relu && y < 0 ? 0 : y.  bf16 (--precision bf16-autocast): y =
 * R(R(x) * a + sh), R = nf__bf16, then the ReLU (it commutes with R). */
#define NF_BN_ROWS 16
__kernel void nf_batch_norm(__global const float * x, long x_off, long ldx,
                            __global const float * w, long w_off,
                            __global const float * b, long b_off,
                            __global const float * mean, long mean_off,
                            __global const float * var, long var_off,
                            __global float * y, long y_off, long ldy,
                            long m, int C, float eps, int relu, int bf16)
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
        const float xr = x[x_off + r * ldx + c];
        const float xa = (bf16 ? nf__bf16(xr) : xr) * a;
        const float v  = bf16 ? nf__bf16(xa + sh) : xa + sh;
        y[y_off + r * ldy + c] = relu && v < 0.0f ? 0.0f : v;
    }
}
