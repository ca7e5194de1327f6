/* cpu-train-c.c -- the cpu reference kernels of the training ops, set C
 * (SCATTER_ADD_ROWS, CLIP_GRAD_NORM, SCALE; contracts in nf-ops.def, TabSTAR's
 * LoRA fine-tuning). Exact fp32 (-ffp-contract=off), sums in double in the
 * contract's order; OpenMP loops split independent outputs or blocks only,
 * so the results do not depend on the thread count. */
#include "cpu-kernels.h"

#define NF__PTR(t)  ((float *) ((char *) (t)->buf->handle + (t)->offs))
#define NF__IPTR(t) ((const int32_t *) (const void *) ((char *) (t)->buf->handle + (t)->offs))

/* ---- SCATTER_ADD_ROWS ------------------------------------------------------------------- */

/* a row of the table per task: its range of order, in order, one double
 * accumulator per column */
int nf__cpu_scatter_add_rows(nf_backend * be, const nf_op * op, nf_err * err) {
    (void) be;
    (void) err;
    const struct nf_scatter_add_rows_params * p = &op->p.scatter_add_rows;
    const int32_t * order = NF__IPTR(&op->src[0]);
    const int32_t * start = NF__IPTR(&op->src[1]);
    const float * dy = NF__PTR(&op->src[2]);
    float * dW = NF__PTR(&op->dst[0]);
    const int64_t m = p->m, k = p->k;
    const float scale = p->scale;
#pragma omp parallel for schedule(static) if (NF_CPU_PAR(p->n_table * k + m * k))
    for (int64_t i = 0; i < p->n_table; i++) {
        int64_t lo = start[i], hi = start[i + 1];
        lo = lo < 0 ? 0 : lo;
        hi = hi > m ? m : hi;
        float * w = dW + i * p->ldw;
        for (int64_t c = 0; c < k; c++) {
            double s = 0.0;
            for (int64_t u = lo; u < hi; u++) {
                const int64_t r = order[u];
                if (r >= 0 && r < m) s += (double) (scale * dy[r * p->ldy + c]);
            }
            w[c] = p->accumulate ? w[c] + (float) s : (float) s;
        }
    }
    return NF_OK;
}

/* ---- CLIP_GRAD_NORM ---------------------------------------------------------------------- */

/* pass 1 (parallel over blocks): each block's sum of squares in double,
 * in order; pass 2: the block sums in order, total, coef; pass 3 (parallel):
 * g * coef. torch.nn.utils.clip_grad_norm_ (torch 2.13, clip_grad.py):
 * clip_coef = max_norm / (total_norm + 1e-6) on a float32 0-dim tensor, i.e.
 * Tensor.__rdiv__ = self.reciprocal() * other: (1 / (total + 1e-6f)) * max_norm
 * in float (checked bit for bit against torch on 2000 random vectors, where
 * max_norm / (total + 1e-6f) differs in 11% of them), then
 * torch.clamp(clip_coef, max=1.0) and grads * clip_coef_clamped, always. */
int nf__cpu_clip_grad_norm(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_clip_grad_norm_params * p = &op->p.clip_grad_norm;
    float * g = NF__PTR(&op->dst[0]);
    float * norm = NF__PTR(&op->dst[1]);
    const int64_t n = p->n, nb = (n + NF_CLIP_BLOCK - 1) / NF_CLIP_BLOCK;
    double * part = nf__backend_host_scratch(be, (size_t) (nb > 0 ? nb : 1) * sizeof(double));
    if (!part) return nf__err_set(err, NF_ERR_NOMEM, "CLIP_GRAD_NORM %s: out of memory", op->label ? op->label : "");
#pragma omp parallel for schedule(static) if (NF_CPU_PAR(n))
    for (int64_t b = 0; b < nb; b++) {
        const int64_t i0 = b * NF_CLIP_BLOCK, i1 = i0 + NF_CLIP_BLOCK < n ? i0 + NF_CLIP_BLOCK : n;
        double s = 0.0;
        for (int64_t i = i0; i < i1; i++) s += (double) g[i] * (double) g[i];
        part[b] = s;
    }
    double S = 0.0;
    for (int64_t b = 0; b < nb; b++) S += part[b];
    const float total = (float) sqrt(S);
    const float q = (1.0f / (total + 1e-6f)) * p->max_norm;
    const float coef = q > 1.0f ? 1.0f : q; /* a NaN stays NaN, as torch.clamp */
    norm[0] = total;
#pragma omp parallel for schedule(static) if (NF_CPU_PAR(n))
    for (int64_t i = 0; i < n; i++) g[i] = g[i] * coef;
    return NF_OK;
}

/* ---- SCALE ------------------------------------------------------------------------------- */

int nf__cpu_scale(nf_backend * be, const nf_op * op, nf_err * err) {
    (void) be;
    (void) err;
    const struct nf_scale_params * p = &op->p.scale;
    const float * x = NF__PTR(&op->src[0]);
    float * y = NF__PTR(&op->dst[0]);
    const float a = p->a;
    if (p->accumulate) {
#pragma omp parallel for schedule(static) if (NF_CPU_PAR(p->n))
        for (int64_t i = 0; i < p->n; i++) y[i] = y[i] + a * x[i];
    } else {
#pragma omp parallel for schedule(static) if (NF_CPU_PAR(p->n))
        for (int64_t i = 0; i < p->n; i++) y[i] = a * x[i];
    }
    return NF_OK;
}

/* ---- DROPOUT ------------------------------------------------------------------------------ */

int nf__cpu_dropout(nf_backend * be, const nf_op * op, nf_err * err) {
    (void) be;
    (void) err;
    const struct nf_dropout_params * p = &op->p.dropout;
    const float * x = NF__PTR(&op->src[0]);
    float * y = NF__PTR(&op->dst[0]);
    const int64_t n = p->n, blk = 4096, nb = (n + blk - 1) / blk;
#pragma omp parallel for schedule(static) if (NF_CPU_PAR(n))
    for (int64_t b = 0; b < nb; b++) {
        const int64_t i0 = b * blk, m = n - i0 < blk ? n - i0 : blk;
        nf__cpu_dropout_row(x + i0, y + i0, m, i0, (uint64_t) p->seed, p->threshold, p->scale, p->accumulate != 0);
    }
    return NF_OK;
}
