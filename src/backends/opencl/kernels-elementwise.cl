/*
 * kernels-elementwise.cl -- FILL, AXIAL_POS, GATHER_ROWS
 * (part of the program: see kernels-common.cl)
 */

/* ---- FILL, AXIAL_POS ------------------------------------------------------ */

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
 * x[s][t][c] = x[s][t][c] + (e0[t / n1][c] + e1[t % n1][c]); bf16
 * (--precision bf16-autocast): x = R(x + R(e0 + e1)), R = nf__bf16. */
__kernel void nf_axial_pos(__global const float * e0, long e0_off,
                           __global const float * e1, long e1_off,
                           __global float * x, long x_off, long ld, long gs,
                           long n_rows, long len, long n1, int D, int bf16)
{
    const int  c  = get_global_id(0);
    const long st = get_global_id(1);
    if (c >= D || st >= n_rows) {
        return;
    }
    const long s = st / len;
    const long t = st % len;
    const float e = e0[e0_off + (t / n1) * D + c] + e1[e1_off + (t % n1) * D + c];
    __global float * xp = x + x_off + s * gs + t * ld + c;
    *xp = bf16 ? nf__bf16(*xp + nf__bf16(e)) : *xp + e;
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
