/* cpu-train.c -- the cpu reference kernels of the training ops, set A (GEMM,
 * COL_SUM, ACT, ACT_BACKWARD, LAYER_NORM_BACKWARD, ADAMW, COPY; contracts in
 * nf-ops.def). Exact fp32 as cpu-kernels.c (-ffp-contract=off: only the
 * explicit fmaf fuses); sums over rows in double, in row order; OpenMP loops
 * split independent rows or columns only, so the results do not depend on the
 * thread count. */
#include "cpu-gemm.h"
#include "cpu-kernels.h"

#include <math.h>
#include <string.h>

#define NF__PTR(t) ((float *) ((char *) (t)->buf->handle + (t)->offs))

/* columns per task of the column reductions: each task keeps one double
 * accumulator per column and walks the rows in order */
#define NF__COLS 256

/* ---- GEMM ---------------------------------------------------------------------------- */

/* oneDNN's sgemm ('N'/'T' for both operands). Accumulating, t goes to
 * scratch first and C = C + t is one rounding, as LINEAR's accumulate (a
 * beta = 1 sgemm may fold C into a partial sum of a split K). */
int nf__cpu_gemm(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_gemm_params * p = &op->p.gemm;
    if (p->m == 0 || p->n == 0) return NF_OK;
    const float * A = NF__PTR(&op->src[0]);
    const float * B = NF__PTR(&op->src[1]);
    float * C = NF__PTR(&op->dst[0]);
    if (!p->accumulate)
        return nf__cpu_sgemm_tt(p->trans_a, p->trans_b, p->m, p->n, p->k, A, p->lda, B, p->ldb, 0.0f, C, p->ldc, err);
    float * t = nf__backend_host_scratch(be, (size_t) p->m * (size_t) p->n * sizeof(float));
    if (!t) return nf__err_set(err, NF_ERR_NOMEM, "GEMM %s: out of memory", op->label ? op->label : "");
    NF_TRY(nf__cpu_sgemm_tt(p->trans_a, p->trans_b, p->m, p->n, p->k, A, p->lda, B, p->ldb, 0.0f, t, p->n, err));
    const int64_t m = p->m, n = p->n;
#pragma omp parallel for schedule(static) if (NF_CPU_PAR(m * n))
    for (int64_t i = 0; i < m; i++) {
        float * cr = C + i * p->ldc;
        const float * tr = t + i * n;
        for (int64_t j = 0; j < n; j++) cr[j] = cr[j] + tr[j];
    }
    return NF_OK;
}

/* ---- COL_SUM ------------------------------------------------------------------------- */

int nf__cpu_col_sum(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_col_sum_params * p = &op->p.col_sum;
    const float * x = NF__PTR(&op->src[0]);
    float * y = NF__PTR(&op->dst[0]);
    const int64_t nblk = (p->n + NF__COLS - 1) / NF__COLS;
#pragma omp parallel for schedule(static) if (NF_CPU_PAR(p->m * p->n))
    for (int64_t bj = 0; bj < nblk; bj++) {
        const int64_t j0 = bj * NF__COLS, nj = p->n - j0 < NF__COLS ? p->n - j0 : NF__COLS;
        double s[NF__COLS];
        for (int64_t j = 0; j < nj; j++) s[j] = 0.0;
        for (int64_t i = 0; i < p->m; i++) {
            const float * xr = x + i * p->ldx + j0;
            for (int64_t j = 0; j < nj; j++) s[j] += (double) xr[j];
        }
        for (int64_t j = 0; j < nj; j++) y[j0 + j] = p->accumulate ? y[j0 + j] + (float) s[j] : (float) s[j];
    }
    return NF_OK;
}

/* ---- ACT, ACT_BACKWARD --------------------------------------------------------------- */

#define NF__ACT_CHUNK ((int64_t) 4096)

int nf__cpu_act(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_act_params * p = &op->p.act;
    const float * x = NF__PTR(&op->src[0]);
    float * y = NF__PTR(&op->dst[0]);
    const int64_t nchunk = (p->n + NF__ACT_CHUNK - 1) / NF__ACT_CHUNK;
#pragma omp parallel for schedule(static) if (NF_CPU_PAR(p->n))
    for (int64_t c = 0; c < nchunk; c++) {
        const int64_t i0 = c * NF__ACT_CHUNK, len = p->n - i0 < NF__ACT_CHUNK ? p->n - i0 : NF__ACT_CHUNK;
        nf__cpu_act_row(y + i0, x + i0, len, p->act);
    }
    return NF_OK;
}

/* GELU: PyTorch's GeluBackward (approximate='none') in float, erf and exp
 * correctly rounded (cpu-kernels.c: nf__cpu_gelu_backward_row, nf__erf_f32 /
 * nf__exp_f32 vectorised) */
int nf__cpu_act_backward(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_act_backward_params * p = &op->p.act_backward;
    const float * x = NF__PTR(&op->src[0]);
    const float * dy = NF__PTR(&op->src[1]);
    float * dx = NF__PTR(&op->dst[0]);
    if (p->act == NF_ACT_GELU) {
        /* blocks of 4096 elements, each one call of the vectorised row */
        const int64_t nblk = (p->n + 4095) / 4096;
#pragma omp parallel for schedule(static) if (NF_CPU_PAR(p->n))
        for (int64_t blk = 0; blk < nblk; blk++) {
            const int64_t i0 = blk * 4096, nb = p->n - i0 < 4096 ? p->n - i0 : 4096;
            nf__cpu_gelu_backward_row(dx + i0, x + i0, dy + i0, nb);
        }
        return NF_OK;
    }
#pragma omp parallel for schedule(static) if (NF_CPU_PAR(p->n))
    for (int64_t i = 0; i < p->n; i++) {
        const float xv = x[i], g = dy[i];
        dx[i] = xv > 0.0f ? g : 0.0f;
    }
    return NF_OK;
}

/* ---- LAYER_NORM_BACKWARD ------------------------------------------------------------- */

/* pass 1, per row (parallel over rows): mu, rstd (kept for pass 2), the
 * row means a, b in double, dx; pass 2, per block of columns (parallel over
 * the blocks), the rows in order: dg, db in double. */
int nf__cpu_layer_norm_backward(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_layer_norm_backward_params * p = &op->p.layer_norm_backward;
    const float * x = NF__PTR(&op->src[0]);
    const float * g = NF__PTR(&op->src[1]);
    const float * dy = NF__PTR(&op->src[2]);
    float * dx = NF__PTR(&op->dst[0]);
    float * dg = NF__PTR(&op->dst[1]);
    float * db = NF__PTR(&op->dst[2]);
    const int64_t m = p->m, k = p->k;
    float * st = nf__backend_host_scratch(be, (size_t) (2 * (m > 0 ? m : 1)) * sizeof(float));
    if (!st) return nf__err_set(err, NF_ERR_NOMEM, "LAYER_NORM_BACKWARD %s: out of memory", op->label ? op->label : "");
#pragma omp parallel for schedule(static) if (NF_CPU_PAR(m * k))
    for (int64_t r = 0; r < m; r++) {
        const float * xr = x + r * p->ldx;
        const float * dyr = dy + r * p->lddy;
        float * dxr = dx + r * p->lddx;
        float mu, rstd;
        nf__cpu_ln_stats(xr, k, p->eps, &mu, &rstd);
        st[2 * r] = mu;
        st[2 * r + 1] = rstd;
        double sa = 0.0, sb = 0.0;
        for (int64_t c = 0; c < k; c++) {
            const float xh = (xr[c] - mu) * rstd;
            const float gd = dyr[c] * g[c];
            sa += (double) gd;
            sb += (double) gd * (double) xh;
        }
        const float a = (float) (sa / (double) k), b = (float) (sb / (double) k);
        for (int64_t c = 0; c < k; c++) {
            const float xh = (xr[c] - mu) * rstd;
            const float gd = dyr[c] * g[c];
            const float t = rstd * ((gd - a) - xh * b);
            dxr[c] = p->accumulate ? dxr[c] + t : t;
        }
    }
    const int64_t nblk = (k + NF__COLS - 1) / NF__COLS;
#pragma omp parallel for schedule(static) if (NF_CPU_PAR(m * k))
    for (int64_t bj = 0; bj < nblk; bj++) {
        const int64_t c0 = bj * NF__COLS, nc = k - c0 < NF__COLS ? k - c0 : NF__COLS;
        double sg[NF__COLS], sd[NF__COLS];
        for (int64_t c = 0; c < nc; c++) sg[c] = sd[c] = 0.0;
        for (int64_t r = 0; r < m; r++) {
            const float * xr = x + r * p->ldx + c0;
            const float * dyr = dy + r * p->lddy + c0;
            const float mu = st[2 * r], rstd = st[2 * r + 1];
            for (int64_t c = 0; c < nc; c++) {
                const float xh = (xr[c] - mu) * rstd;
                sg[c] += (double) dyr[c] * (double) xh;
                sd[c] += (double) dyr[c];
            }
        }
        for (int64_t c = 0; c < nc; c++) {
            dg[c0 + c] = dg[c0 + c] + (float) sg[c];
            db[c0 + c] = db[c0 + c] + (float) sd[c];
        }
    }
    return NF_OK;
}

/* ---- ADAMW --------------------------------------------------------------------------- */

/* torch.optim.AdamW, _single_tensor_adamw, and the ATen CPU kernels it runs
 * (checked against PyTorch's sources: torch/optim/adamw.py and adam.py,
 * aten/src/ATen/native/cpu/LerpKernel.cpp, PointwiseOpsKernel.cpp,
 * BinaryOpsKernel.cpp):
 *   param.mul_(1 - lr*wd)            p * (float)decay (a float tensor times a
 *                                    Python scalar: the scalar cast to float);
 *   exp_avg.lerp_(grad, 1 - beta1)   lerp_vec: |w| < 0.5, so coeff = w, base =
 *                                    self: vec::fmadd(w, end - self, self), one
 *                                    fused rounding -> fmaf(w1, g - m, m) (the
 *                                    scalar tail is self + w*(end - self),
 *                                    fused or not as the compiler contracts it);
 *   exp_avg_sq.mul_(beta2)           v * (float)beta2;
 *     .addcmul_(grad, grad, 1-beta2) self + scalar * t1 * t2, left to right:
 *                                    v + (c2 * g) * g;
 *   denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
 *                                    sqrtf(v) / (float)bc2s + (float)eps (a true
 *                                    division: the CPU kernel takes the
 *                                    reciprocal of a scalar divisor only for
 *                                    bf16/half);
 *   param.addcdiv_(exp_avg, denom, value=-step_size)
 *                                    self + scalar * t1 / t2, left to right:
 *                                    p + (s * m) / d.                         */
int nf__cpu_adamw(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_adamw_params * p = &op->p.adamw;
    const float * g = NF__PTR(&op->src[0]);
    float * pp = NF__PTR(&op->dst[0]);
    float * m = NF__PTR(&op->dst[1]);
    float * v = NF__PTR(&op->dst[2]);
#pragma omp parallel for schedule(static) if (NF_CPU_PAR(p->n))
    for (int64_t i = 0; i < p->n; i++) {
        const float gi = g[i];
        const float pi = pp[i] * p->decay;
        const float mi = fmaf(p->w1, gi - m[i], m[i]);
        const float vi = v[i] * p->b2 + (p->c2 * gi) * gi;
        const float d = sqrtf(vi) / p->bc2s + p->eps;
        m[i] = mi;
        v[i] = vi;
        pp[i] = pi + (p->s * mi) / d;
    }
    return NF_OK;
}

/* ---- COPY ---------------------------------------------------------------------------- */

int nf__cpu_copy(nf_backend * be, const nf_op * op, nf_err * err) {
    const int64_t n = op->p.copy.n;
    if (n > 0) memmove(NF__PTR(&op->dst[0]), NF__PTR(&op->src[0]), (size_t) n * sizeof(float));
    return NF_OK;
}
