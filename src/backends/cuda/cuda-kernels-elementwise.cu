/*
 * cuda-kernels-elementwise.cu -- FILL, AXIAL_POS, GATHER_ROWS
 * (the CUDA backend's kernel files: see cuda-kernels-common.h)
 */
#include "cuda-kernels-common.h"

/* FILL: y[r*ld + c] = value. */
__global__ void nf_k_fill_rows(float * __restrict__ y, int64_t ld, int64_t m, int64_t k, float value) {
    const int lane = (int) (threadIdx.x & 31);
    NF_WARP_ROWS(r, m) {
        float * yr = y + r * ld;
        for (int64_t c = lane; c < k; c += 32) yr[c] = value;
    }
}

/* AXIAL_POS: x[s][t][c] = x + (e0[t / n1][c] + e1[t % n1][c]); a warp per
 * (s, t) row. bf16 (bf16-autocast): x = R(x + R(e0 + e1)). */
__global__ void nf_k_axial_pos(const float * __restrict__ e0, const float * __restrict__ e1, int64_t n1,
                               float * __restrict__ x, int64_t ld, int64_t gs, int64_t len, int64_t rows, int64_t D,
                               int bf16) {
    const int lane = (int) (threadIdx.x & 31);
    NF_WARP_ROWS(st, rows) {
        const int64_t s = st / len, t = st - s * len;
        float * xr = x + s * gs + t * ld;
        const int64_t t0 = t / n1;
        const float * a = e0 + t0 * D;
        const float * b = e1 + (t - t0 * n1) * D;
        for (int64_t c = lane; c < D; c += 32)
            xr[c] = bf16 ? nf_bf16(xr[c] + nf_bf16(a[c] + b[c])) : xr[c] + (a[c] + b[c]);
    }
}

/* GATHER_ROWS: y[r][c] (+)= scale * W[idx[r]][c], a zero row for an index
 * outside [0, n_table); a warp per row. */
__global__ void nf_k_gather_rows(const int32_t * __restrict__ idx, const float * __restrict__ W, int64_t ldw,
                                 int64_t n_table, float * y, int64_t ldy, int64_t m, int64_t k, float scale,
                                 int accumulate) {
    const int lane = (int) (threadIdx.x & 31);
    NF_WARP_ROWS(r, m) {
        const int64_t i = idx[r];
        float * yr = y + r * ldy;
        const int ok = i >= 0 && i < n_table;
        const float * w = W + (ok ? i : 0) * ldw;
        for (int64_t c = lane; c < k; c += 32) {
            const float g = ok ? scale * w[c] : 0.0f;
            yr[c] = accumulate ? yr[c] + g : g;
        }
    }
}

/* ---- launchers --------------------------------------------------------------- */

static cudaError_t nf_fill_rows(cudaStream_t st, float * y, int64_t ld, int64_t m, int64_t k, float value,
                                const char ** kernel) {
    if (m <= 0 || k <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_fill_rows, nf_blocks(m, NF_CUDA_BLOCK / 32), NF_CUDA_BLOCK, st)(y, ld, m, k, value);
    NF_CHECK_LAUNCH("nf_k_fill_rows");
    return cudaSuccess;
}

static cudaError_t nf_axial_pos(cudaStream_t st, const float * e0, const float * e1, int64_t n1, float * x, int64_t ld,
                                int64_t gs, int64_t n_seq, int64_t len, int64_t D, int bf16, const char ** kernel) {
    const int64_t rows = n_seq * len;
    if (rows <= 0 || D <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_axial_pos, nf_blocks(rows, NF_CUDA_BLOCK / 32), NF_CUDA_BLOCK, st)
    (e0, e1, n1, x, ld, gs, len, rows, D, bf16);
    NF_CHECK_LAUNCH("nf_k_axial_pos");
    return cudaSuccess;
}

/* ---- the ops ----------------------------------------------------------------- */

int nf__cuda_fill(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_fill_params * p = &op->p.fill;
    NF_OP_LAUNCH(nf_fill_rows(nf__cuda_op_stream(be), NF_F(&op->dst[0]), p->ld, p->m, p->k, p->value, NF_K));
    return NF_OK;
}
bool nf__cuda_fill_supports(nf_backend * be, const nf_op * op) { return true; }

int nf__cuda_axial_pos_r(nf_backend * be, const nf_op * op, int bf16, nf_err * err) {
    const struct nf_axial_pos_params * p = &op->p.axial_pos;
    NF_OP_LAUNCH(nf_axial_pos(nf__cuda_op_stream(be), NF_F(&op->src[0]), NF_F(&op->src[1]), p->n1, NF_F(&op->dst[0]),
                              p->ld, p->gs, p->n_seq, p->len, p->dim, bf16, NF_K));
    return NF_OK;
}
int nf__cuda_axial_pos(nf_backend * be, const nf_op * op, nf_err * err) { return nf__cuda_axial_pos_r(be, op, 0, err); }
bool nf__cuda_axial_pos_supports(nf_backend * be, const nf_op * op) { return true; }

static cudaError_t nf_gather_rows(cudaStream_t st, const int32_t * idx, const float * W, int64_t ldw, int64_t n_table,
                                  float * y, int64_t ldy, int64_t m, int64_t k, float scale, int accumulate,
                                  const char ** kernel) {
    if (m <= 0 || k <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_gather_rows, nf_blocks(m, NF_CUDA_BLOCK / 32), NF_CUDA_BLOCK, st)
    (idx, W, ldw, n_table, y, ldy, m, k, scale, accumulate);
    NF_CHECK_LAUNCH("nf_k_gather_rows");
    return cudaSuccess;
}

int nf__cuda_gather_rows(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_gather_rows_params * p = &op->p.gather_rows;
    NF_OP_LAUNCH(nf_gather_rows(nf__cuda_op_stream(be), NF_I(&op->src[0]), NF_F(&op->src[1]), p->ldw, p->n_table,
                                NF_F(&op->dst[0]), p->ldy, p->m, p->k, p->scale, p->accumulate != 0, NF_K));
    return NF_OK;
}
bool nf__cuda_gather_rows_supports(nf_backend * be, const nf_op * op) { return true; }
