/*
 * cuda-kernels-train.cu -- the training ops, set A: COL_SUM, ACT, ACT_BACKWARD,
 * LAYER_NORM_BACKWARD, ADAMW, COPY (GEMM is cuBLAS, cuda-ops.c)
 * (the CUDA backend's kernel files: see cuda-kernels-common.h)
 *
 * Sums over rows in double, one thread per column walking the rows in order
 * (or LAYER_NORM's warp per row): no atomics, bitwise reproducible.
 */
#include "cuda-kernels-common.h"

/* ---- COL_SUM -------------------------------------------------------------------- */

/* y[j] (+)= (float) sum_i x[i][j]: a thread per column, the rows in order */
__global__ void nf_k_col_sum(const float * __restrict__ x, int64_t ldx, int64_t m, int64_t n, float * y,
                             int accumulate) {
    NF_FOR(j, n) {
        double s = 0.0;
        for (int64_t i = 0; i < m; i++) s += (double) x[i * ldx + j];
        y[j] = accumulate ? y[j] + (float) s : (float) s;
    }
}

/* ---- ACT, ACT_BACKWARD ------------------------------------------------------------ */

/* act 1: GELU (nf_gelu, LINEAR's epilogue), 2: ReLU; x may be y */
__global__ void nf_k_act(const float * x, float * y, int64_t n, int act) {
    NF_FOR(i, n) {
        const float t = x[i];
        y[i] = act == 1 ? nf_gelu(t) : (t < 0.0f ? 0.0f : t);
    }
}

/* dx = dy * act'(x) (nf-ops.def ACT_BACKWARD; erff, expf accurate); dx may be dy */
__global__ void nf_k_act_backward(const float * x, const float * dy, float * dx, int64_t n, int act) {
    NF_FOR(i, n) {
        const float xv = x[i], g = dy[i];
        if (act == 1) {
            const float cdf = 0.5f * (1.0f + erff(xv * 0.70710678f));
            const float pdf = expf(-0.5f * xv * xv) * 0.3989422804f;
            dx[i] = g * (cdf + xv * pdf);
        } else {
            dx[i] = xv > 0.0f ? g : 0.0f;
        }
    }
}

/* ---- LAYER_NORM_BACKWARD ------------------------------------------------------------ */

/* pass 1, a warp per row (nf_ln_stats, as LAYER_NORM): mu, rstd into st[2r],
 * st[2r+1]; a = mean(gd), b = mean(gd xh) in double (xor-butterfly sums);
 * dx (+)= rstd * ((gd - a) - xh * b) */
__global__ void nf_k_ln_backward_rows(const float * __restrict__ x, int64_t ldx, const float * __restrict__ g,
                                      const float * __restrict__ dy, int64_t lddy, float * dx, int64_t lddx,
                                      float * __restrict__ st, int64_t m, int64_t k, float eps, int accumulate) {
    const int lane = (int) (threadIdx.x & 31);
    NF_WARP_ROWS(r, m) {
        const float * xr = x + r * ldx;
        const float * dyr = dy + r * lddy;
        float * dxr = dx + r * lddx;
        float mu, rstd;
        nf_ln_stats(xr, k, eps, lane, &mu, &rstd);
        if (lane == 0) {
            st[2 * r] = mu;
            st[2 * r + 1] = rstd;
        }
        double sa = 0.0, sb = 0.0;
        for (int64_t c = lane; c < k; c += 32) {
            const float xh = (xr[c] - mu) * rstd;
            const float gd = dyr[c] * g[c];
            sa += (double) gd;
            sb += (double) gd * (double) xh;
        }
        sa = nf_warp_sum(sa);
        sb = nf_warp_sum(sb);
        const float a = (float) (sa / (double) k), b = (float) (sb / (double) k);
        for (int64_t c = lane; c < k; c += 32) {
            const float xh = (xr[c] - mu) * rstd;
            const float gd = dyr[c] * g[c];
            const float t = rstd * ((gd - a) - xh * b);
            dxr[c] = accumulate ? dxr[c] + t : t;
        }
    }
}

/* pass 2, a thread per column, the rows in order: dg += (float) sum dy xh,
 * db += (float) sum dy (double sums) */
__global__ void nf_k_ln_backward_cols(const float * __restrict__ x, int64_t ldx, const float * __restrict__ dy,
                                      int64_t lddy, const float * __restrict__ st, float * dg, float * db, int64_t m,
                                      int64_t k) {
    NF_FOR(c, k) {
        double sg = 0.0, sd = 0.0;
        for (int64_t r = 0; r < m; r++) {
            const float xh = (x[r * ldx + c] - st[2 * r]) * st[2 * r + 1];
            const float d = dy[r * lddy + c];
            sg += (double) d * (double) xh;
            sd += (double) d;
        }
        dg[c] = dg[c] + (float) sg;
        db[c] = db[c] + (float) sd;
    }
}

/* ---- ADAMW, COPY -------------------------------------------------------------------- */

/* PyTorch AdamW's step (nf-ops.def ADAMW): --fmad=false, fmaf the one fused
 * operation; IEEE '/' and sqrtf */
__global__ void nf_k_adamw(const float * __restrict__ g, float * __restrict__ p, float * __restrict__ m,
                           float * __restrict__ v, int64_t n, float decay, float w1, float b2, float c2, float bc2s,
                           float eps, float s) {
    NF_FOR(i, n) {
        const float gi = g[i], m0 = m[i];
        const float pi = p[i] * decay;
        const float mi = fmaf(w1, gi - m0, m0);
        const float vi = v[i] * b2 + (c2 * gi) * gi;
        const float d = sqrtf(vi) / bc2s + eps;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi + (s * mi) / d;
    }
}

__global__ void nf_k_copy(const float * x, float * y, int64_t n) { NF_FOR(i, n) y[i] = x[i]; }

/* ---- launchers ----------------------------------------------------------------------- */

static cudaError_t nf_col_sum(cudaStream_t st, const float * x, int64_t ldx, int64_t m, int64_t n, float * y,
                              int accumulate, const char ** kernel) {
    if (n <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_col_sum, nf_blocks(n, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)(x, ldx, m, n, y, accumulate);
    NF_CHECK_LAUNCH("nf_k_col_sum");
    return cudaSuccess;
}

static cudaError_t nf_act(cudaStream_t st, const float * x, float * y, int64_t n, int act, const char ** kernel) {
    if (n <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_act, nf_blocks(n, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)(x, y, n, act);
    NF_CHECK_LAUNCH("nf_k_act");
    return cudaSuccess;
}

static cudaError_t nf_act_backward(cudaStream_t st, const float * x, const float * dy, float * dx, int64_t n, int act,
                                   const char ** kernel) {
    if (n <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_act_backward, nf_blocks(n, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)(x, dy, dx, n, act);
    NF_CHECK_LAUNCH("nf_k_act_backward");
    return cudaSuccess;
}

static cudaError_t nf_ln_backward(cudaStream_t st, const float * x, int64_t ldx, const float * g, const float * dy,
                                  int64_t lddy, float * dx, int64_t lddx, float * dg, float * db, float * stats,
                                  int64_t m, int64_t k, float eps, int accumulate, const char ** kernel) {
    if (m <= 0 || k <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_ln_backward_rows, nf_blocks(m, NF_CUDA_BLOCK / 32), NF_CUDA_BLOCK, st)
    (x, ldx, g, dy, lddy, dx, lddx, stats, m, k, eps, accumulate);
    NF_CHECK_LAUNCH("nf_k_ln_backward_rows");
    NF_LAUNCH(nf_k_ln_backward_cols, nf_blocks(k, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)
    (x, ldx, dy, lddy, stats, dg, db, m, k);
    NF_CHECK_LAUNCH("nf_k_ln_backward_cols");
    return cudaSuccess;
}

static cudaError_t nf_adamw(cudaStream_t st, const float * g, float * p, float * m, float * v,
                            const struct nf_adamw_params * a, const char ** kernel) {
    if (a->n <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_adamw, nf_blocks(a->n, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)
    (g, p, m, v, a->n, a->decay, a->w1, a->b2, a->c2, a->bc2s, a->eps, a->s);
    NF_CHECK_LAUNCH("nf_k_adamw");
    return cudaSuccess;
}

static cudaError_t nf_copy(cudaStream_t st, const float * x, float * y, int64_t n, const char ** kernel) {
    if (n <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_copy, nf_blocks(n, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)(x, y, n);
    NF_CHECK_LAUNCH("nf_k_copy");
    return cudaSuccess;
}

/* ---- the ops ----------------------------------------------------------------------- */

int nf__cuda_col_sum(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_col_sum_params * p = &op->p.col_sum;
    NF_OP_LAUNCH(nf_col_sum(nf__cuda_op_stream(be), NF_F(&op->src[0]), p->ldx, p->m, p->n, NF_F(&op->dst[0]),
                            p->accumulate != 0, NF_K));
    return NF_OK;
}
bool nf__cuda_col_sum_supports(nf_backend * be, const nf_op * op) { return true; }

int nf__cuda_act(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_act_params * p = &op->p.act;
    NF_OP_LAUNCH(nf_act(nf__cuda_op_stream(be), NF_F(&op->src[0]), NF_F(&op->dst[0]), p->n,
                        p->act == NF_ACT_GELU ? 1 : 2, NF_K));
    return NF_OK;
}
bool nf__cuda_act_supports(nf_backend * be, const nf_op * op) { return true; }

int nf__cuda_act_backward(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_act_backward_params * p = &op->p.act_backward;
    NF_OP_LAUNCH(nf_act_backward(nf__cuda_op_stream(be), NF_F(&op->src[0]), NF_F(&op->src[1]), NF_F(&op->dst[0]), p->n,
                                 p->act == NF_ACT_GELU ? 1 : 2, NF_K));
    return NF_OK;
}
bool nf__cuda_act_backward_supports(nf_backend * be, const nf_op * op) { return true; }

int nf__cuda_layer_norm_backward(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_layer_norm_backward_params * p = &op->p.layer_norm_backward;
    if (p->m <= 0) return NF_OK;
    void * scratch = NULL;
    size_t size = 0;
    int rc = nf__cuda_op_scratch(be, 2 * (size_t) p->m * sizeof(float), &scratch, &size, err);
    if (rc != NF_OK) return rc;
    NF_OP_LAUNCH(nf_ln_backward(nf__cuda_op_stream(be), NF_F(&op->src[0]), p->ldx, NF_F(&op->src[1]), NF_F(&op->src[2]),
                                p->lddy, NF_F(&op->dst[0]), p->lddx, NF_F(&op->dst[1]), NF_F(&op->dst[2]),
                                (float *) scratch, p->m, p->k, p->eps, p->accumulate != 0, NF_K));
    return NF_OK;
}
bool nf__cuda_layer_norm_backward_supports(nf_backend * be, const nf_op * op) { return true; }

int nf__cuda_adamw(nf_backend * be, const nf_op * op, nf_err * err) {
    NF_OP_LAUNCH(nf_adamw(nf__cuda_op_stream(be), NF_F(&op->src[0]), NF_F(&op->dst[0]), NF_F(&op->dst[1]),
                          NF_F(&op->dst[2]), &op->p.adamw, NF_K));
    return NF_OK;
}
bool nf__cuda_adamw_supports(nf_backend * be, const nf_op * op) { return true; }

int nf__cuda_copy(nf_backend * be, const nf_op * op, nf_err * err) {
    NF_OP_LAUNCH(nf_copy(nf__cuda_op_stream(be), NF_F(&op->src[0]), NF_F(&op->dst[0]), op->p.copy.n, NF_K));
    return NF_OK;
}
bool nf__cuda_copy_supports(nf_backend * be, const nf_op * op) { return true; }
