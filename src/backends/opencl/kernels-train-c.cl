/*
 * kernels-train-c.cl -- the training ops, set C (TabSTAR's LoRA fine-tuning):
 * SCATTER_ADD_ROWS, CLIP_GRAD_NORM, SCALE (part of the program: see
 * kernels-common.cl). Every output element is written by one work-item that
 * sums in nf_acc (double with fp64) in the contract's order: deterministic,
 * and the same sums as the cpu reference.
 */

/* = NF_CLIP_BLOCK of src/core/nf-impl.h */
#define NF_CL_CLIP_BLOCK 1024

/* ---- SCATTER_ADD_ROWS ---------------------------------------------------------- */

/* dim 0: c < k; dim 1: i < n_table. The rows of i are order[start[i] ..
 * start[i+1]) (clamped to [0, m]; an order entry outside [0, m) is skipped). */
__kernel void nf_scatter_add_rows(__global const int * order, long order_off,
                                  __global const int * start, long start_off,
                                  __global const float * dy, long dy_off, long ldy,
                                  __global float * dW, long dw_off, long ldw,
                                  long m, long n_table, int k, float scale, int accumulate)
{
    const int  c = get_global_id(0);
    const long i = get_global_id(1);
    if (c >= k || i >= n_table) {
        return;
    }
    long lo = start[start_off + i], hi = start[start_off + i + 1];
    lo = lo < 0 ? 0 : lo;
    hi = hi > m ? m : hi;
    nf_acc s = 0;
    for (long u = lo; u < hi; u++) {
        const long r = order[order_off + u];
        if (r >= 0 && r < m) {
            const float t = scale * dy[dy_off + r * ldy + c];
            s += (nf_acc)t;
        }
    }
    __global float * wp = dW + dw_off + i * ldw + c;
    *wp = accumulate ? *wp + (float)s : (float)s;
}

/* ---- CLIP_GRAD_NORM ------------------------------------------------------------- */

/* pass 1: a work-item per block of NF_CL_CLIP_BLOCK elements, its sum of
 * squares in order into part[b] */
__kernel void nf_clip_part(__global const float * g, long g_off, long n, long nb, __global nf_acc * part)
{
    const long b = get_global_id(0);
    if (b >= nb) {
        return;
    }
    const long i0 = b * NF_CL_CLIP_BLOCK;
    const long i1 = i0 + NF_CL_CLIP_BLOCK < n ? i0 + NF_CL_CLIP_BLOCK : n;
    nf_acc s = 0;
    for (long i = i0; i < i1; i++) {
        const nf_acc v = (nf_acc)g[g_off + i];
        s += v * v;
    }
    part[b] = s;
}

/* pass 2: one work-item: the block sums in order, norm = (float)sqrt(S) */
__kernel void nf_clip_total(__global const nf_acc * part, long nb, __global float * norm, long norm_off)
{
    if (get_global_id(0) != 0) {
        return;
    }
    nf_acc s = 0;
    for (long b = 0; b < nb; b++) {
        s += part[b];
    }
#ifdef NF_FP64
    norm[norm_off] = (float)sqrt(s);
#else
    norm[norm_off] = NF_SQRT(s);
#endif
}

/* pass 3: g = g * coef, coef = min((1 / (norm + 1e-6f)) * max_norm, 1) in
 * float (torch's reciprocal() * max_norm, clamp(max=1)) */
__kernel void nf_clip_apply(__global float * g, long g_off, long n, __global const float * norm, long norm_off,
                            float max_norm)
{
    const long i = get_global_id(0);
    if (i >= n) {
        return;
    }
    const float d = norm[norm_off] + 1e-6f;
    const float r = NF_DIV(1.0f, d);
    const float q = r * max_norm;
    const float coef = q > 1.0f ? 1.0f : q; /* a NaN stays NaN, as torch.clamp */
    g[g_off + i] = g[g_off + i] * coef;
}

/* ---- SCALE ----------------------------------------------------------------------- */

__kernel void nf_scale(__global const float * x, long x_off, __global float * y, long y_off, long n, float a,
                       int accumulate)
{
    const long i = get_global_id(0);
    if (i >= n) {
        return;
    }
    const float t = a * x[x_off + i];
    __global float * yp = y + y_off + i;
    *yp = accumulate ? *yp + t : t;
}

/* ---- DROPOUT --------------------------------------------------------------------- */

__kernel void nf_dropout(__global const float * x, long x_off, __global float * y, long y_off, long n, long seed,
                         int threshold, float scale, int accumulate)
{
    const long i = get_global_id(0);
    if (i >= n) {
        return;
    }
    ulong z = (ulong) seed + ((ulong) i + 1UL) * 0x9E3779B97F4A7C15UL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9UL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBUL;
    z ^= z >> 31;
    const float t = (long) (z >> 40) >= (long) threshold ? x[x_off + i] * scale : 0.0f;
    __global float * yp = y + y_off + i;
    *yp = accumulate ? *yp + t : t;
}
