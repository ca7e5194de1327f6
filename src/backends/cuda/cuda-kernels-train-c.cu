/*
 * cuda-kernels-train-c.cu -- the training ops, set C (TabSTAR's LoRA
 * fine-tuning): SCATTER_ADD_ROWS, CLIP_GRAD_NORM, SCALE
 * (the CUDA backend's kernel files: see cuda-kernels-common.h)
 *
 * Every output element is written by one thread, sums in double in the
 * contract's order (the cpu reference's): no atomics, bitwise reproducible.
 */
#include "cuda-kernels-common.h"

/* ---- SCATTER_ADD_ROWS ----------------------------------------------------------------- */

/* a thread per (table row i, column c): the rows order[start[i] .. start[i+1])
 * (clamped to [0, m]; an entry outside [0, m) skipped), in order */
__global__ void nf_k_scatter_add_rows(const int32_t * __restrict__ order, const int32_t * __restrict__ start,
                                      const float * __restrict__ dy, int64_t ldy, float * dW, int64_t ldw, int64_t m,
                                      int64_t n_table, int64_t k, float scale, int accumulate) {
    NF_FOR(t, n_table * k) {
        const int64_t i = t / k, c = t % k;
        int64_t lo = start[i], hi = start[i + 1];
        lo = lo < 0 ? 0 : lo;
        hi = hi > m ? m : hi;
        double s = 0.0;
        for (int64_t u = lo; u < hi; u++) {
            const int64_t r = order[u];
            if (r >= 0 && r < m) s += (double) (scale * dy[r * ldy + c]);
        }
        float * w = dW + i * ldw + c;
        *w = accumulate ? *w + (float) s : (float) s;
    }
}

/* ---- CLIP_GRAD_NORM --------------------------------------------------------------------- */

/* pass 1: a thread per block of NF_CLIP_BLOCK elements, its squares in order */
__global__ void nf_k_clip_part(const float * __restrict__ g, int64_t n, int64_t nb, double * __restrict__ part) {
    NF_FOR(b, nb) {
        const int64_t i0 = b * NF_CLIP_BLOCK, i1 = i0 + NF_CLIP_BLOCK < n ? i0 + NF_CLIP_BLOCK : n;
        double s = 0.0;
        for (int64_t i = i0; i < i1; i++) s += (double) g[i] * (double) g[i];
        part[b] = s;
    }
}

/* pass 2: one thread, the block sums in order: norm = (float) sqrt(S) */
__global__ void nf_k_clip_total(const double * __restrict__ part, int64_t nb, float * norm) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    double s = 0.0;
    for (int64_t b = 0; b < nb; b++) s += part[b];
    norm[0] = (float) sqrt(s);
}

/* pass 3: g *= coef, coef = (1 / (norm + 1e-6f)) * max_norm clamped to 1 (a
 * NaN stays NaN; torch's reciprocal() * max_norm and clamp(max=1)) */
__global__ void nf_k_clip_apply(float * g, int64_t n, const float * __restrict__ norm, float max_norm) {
    const float q = (1.0f / (norm[0] + 1e-6f)) * max_norm;
    const float coef = q > 1.0f ? 1.0f : q;
    NF_FOR(i, n) g[i] = g[i] * coef;
}

/* ---- SCALE ------------------------------------------------------------------------------- */

__global__ void nf_k_scale(const float * x, float * y, int64_t n, float a, int accumulate) {
    NF_FOR(i, n) {
        const float t = a * x[i];
        y[i] = accumulate ? y[i] + t : t;
    }
}

/* ---- DROPOUT ------------------------------------------------------------------------------ */

__global__ void nf_k_dropout(const float * x, float * y, int64_t n, uint64_t seed, int32_t threshold, float s,
                             int accumulate) {
    NF_FOR(i, n) {
        uint64_t z = seed + ((uint64_t) i + 1) * 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        const float t = (int64_t) (z >> 40) >= (int64_t) threshold ? x[i] * s : 0.0f;
        y[i] = accumulate ? y[i] + t : t;
    }
}

/* ---- launchers ----------------------------------------------------------------------------- */

static cudaError_t nf_scatter_add_rows(cudaStream_t st, const int32_t * order, const int32_t * start, const float * dy,
                                       float * dW, const struct nf_scatter_add_rows_params * p, const char ** kernel) {
    if (p->n_table <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_scatter_add_rows, nf_blocks(p->n_table * p->k, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)
    (order, start, dy, p->ldy, dW, p->ldw, p->m, p->n_table, p->k, p->scale, p->accumulate != 0);
    NF_CHECK_LAUNCH("nf_k_scatter_add_rows");
    return cudaSuccess;
}

static cudaError_t nf_clip_grad_norm(cudaStream_t st, float * g, int64_t n, float max_norm, float * norm, double * part,
                                     const char ** kernel) {
    const int64_t nb = (n + NF_CLIP_BLOCK - 1) / NF_CLIP_BLOCK;
    if (nb > 0) {
        NF_LAUNCH(nf_k_clip_part, nf_blocks(nb, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)(g, n, nb, part);
        NF_CHECK_LAUNCH("nf_k_clip_part");
    }
    NF_LAUNCH(nf_k_clip_total, 1, 32, st)(part, nb, norm);
    NF_CHECK_LAUNCH("nf_k_clip_total");
    if (n > 0) {
        NF_LAUNCH(nf_k_clip_apply, nf_blocks(n, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)(g, n, norm, max_norm);
        NF_CHECK_LAUNCH("nf_k_clip_apply");
    }
    return cudaSuccess;
}

static cudaError_t nf_scale(cudaStream_t st, const float * x, float * y, const struct nf_scale_params * p,
                            const char ** kernel) {
    if (p->n <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_scale, nf_blocks(p->n, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)(x, y, p->n, p->a, p->accumulate != 0);
    NF_CHECK_LAUNCH("nf_k_scale");
    return cudaSuccess;
}

static cudaError_t nf_dropout(cudaStream_t st, const float * x, float * y, const struct nf_dropout_params * p,
                              const char ** kernel) {
    if (p->n <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_dropout, nf_blocks(p->n, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)
    (x, y, p->n, (uint64_t) p->seed, p->threshold, p->scale, p->accumulate != 0);
    NF_CHECK_LAUNCH("nf_k_dropout");
    return cudaSuccess;
}

/* ---- the ops --------------------------------------------------------------------------------- */

int nf__cuda_scatter_add_rows(nf_backend * be, const nf_op * op, nf_err * err) {
    NF_OP_LAUNCH(nf_scatter_add_rows(nf__cuda_op_stream(be), NF_I(&op->src[0]), NF_I(&op->src[1]), NF_F(&op->src[2]),
                                     NF_F(&op->dst[0]), &op->p.scatter_add_rows, NF_K));
    return NF_OK;
}
bool nf__cuda_scatter_add_rows_supports(nf_backend * be, const nf_op * op) {
    return op->src[0].type == NF_I32 && op->src[1].type == NF_I32;
}

int nf__cuda_clip_grad_norm(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_clip_grad_norm_params * p = &op->p.clip_grad_norm;
    const int64_t nb = (p->n + NF_CLIP_BLOCK - 1) / NF_CLIP_BLOCK;
    void * scratch = NULL;
    size_t size = 0;
    int rc = nf__cuda_op_scratch(be, (size_t) (nb > 0 ? nb : 1) * sizeof(double), &scratch, &size, err);
    if (rc != NF_OK) return rc;
    NF_OP_LAUNCH(nf_clip_grad_norm(nf__cuda_op_stream(be), NF_F(&op->dst[0]), p->n, p->max_norm, NF_F(&op->dst[1]),
                                   (double *) scratch, NF_K));
    return NF_OK;
}
bool nf__cuda_clip_grad_norm_supports(nf_backend * be, const nf_op * op) { return true; }

int nf__cuda_scale(nf_backend * be, const nf_op * op, nf_err * err) {
    NF_OP_LAUNCH(nf_scale(nf__cuda_op_stream(be), NF_F(&op->src[0]), NF_F(&op->dst[0]), &op->p.scale, NF_K));
    return NF_OK;
}
bool nf__cuda_scale_supports(nf_backend * be, const nf_op * op) { return true; }

int nf__cuda_dropout(nf_backend * be, const nf_op * op, nf_err * err) {
    NF_OP_LAUNCH(nf_dropout(nf__cuda_op_stream(be), NF_F(&op->src[0]), NF_F(&op->dst[0]), &op->p.dropout, NF_K));
    return NF_OK;
}
bool nf__cuda_dropout_supports(nf_backend * be, const nf_op * op) { return true; }
