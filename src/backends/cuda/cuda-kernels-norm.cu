/*
 * cuda-kernels-norm.cu -- LAYER_NORM and BATCH_NORM; the probe of the device code
 * (the CUDA backend's kernel files: see cuda-kernels-common.h)
 */
#ifdef NF_CUDA_EMU
/* the host emulator's implementation, compiled once (cuda-emu.h) */
#define NF_CUDA_EMU_IMPLEMENTATION
#endif
#include "cuda-kernels-common.h"

/* ---- LAYER_NORM ------------------------------------------------------------ */

/* One warp per row, two passes, as the cpu reference (nf_ln_stats: sums in
 * double); y = (x-mu) * rstd * g + b (float ops, left to right, no FMA). */
__global__ void nf_k_layer_norm(const float * x, int64_t ldx, const float * __restrict__ g,
                                const float * __restrict__ b, float eps, float * y, int64_t ldy, int64_t m, int64_t k) {
    const int lane = (int) (threadIdx.x & 31);
    const int64_t warp = ((int64_t) blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int64_t nwarps = ((int64_t) gridDim.x * blockDim.x) >> 5;
    for (int64_t r = warp; r < m; r += nwarps) {
        const float * xr = x + r * ldx;
        float * yr = y + r * ldy;
        float mu, rstd;
        nf_ln_stats(xr, k, eps, lane, &mu, &rstd);
        for (int64_t c = lane; c < k; c += 32) yr[c] = (xr[c] - mu) * rstd * g[c] + b[c];
    }
}

/* BATCH_NORM coefficients, once per channel, as the reference:
 *   a = (1.0f / sqrtf(var + eps)) * w;  sh = b - mean * a. */
__global__ void nf_k_bn_coef(const float * __restrict__ w, const float * __restrict__ b,
                             const float * __restrict__ mean, const float * __restrict__ var, int64_t C, float eps,
                             float * __restrict__ a, float * __restrict__ sh) {
    NF_FOR(c, C) {
        const float ac = (1.0f / sqrtf(var[c] + eps)) * w[c];
        a[c] = ac;
        sh[c] = b[c] - mean[c] * ac;
    }
}

/* y = x * a + sh (a rounded product, then a rounded sum); ReLU as the
 * reference (a NaN passes). x may be y (in place). bf16 (bf16-autocast):
 * y = R(R(x) * a + sh), then the ReLU. */
__global__ void nf_k_bn_apply(const float * x, int64_t ldx, const float * __restrict__ a, const float * __restrict__ sh,
                              int relu, int bf16, float * y, int64_t ldy, int64_t m, int64_t C) {
    const int lane = (int) (threadIdx.x & 31);
    NF_WARP_ROWS(r, m) {
        const float * xr = x + r * ldx;
        float * yr = y + r * ldy;
        for (int64_t c = lane; c < C; c += 32) {
            const float v = bf16 ? nf_bf16(nf_bf16(xr[c]) * a[c] + sh[c]) : xr[c] * a[c] + sh[c];
            yr[c] = relu && v < 0.0f ? 0.0f : v;
        }
    }
}

/* ---- launchers --------------------------------------------------------------- */

extern "C" cudaError_t nf__cuda_probe(const char ** kernel) {
#ifdef NF_CUDA_EMU
    (void) kernel;
    return cudaSuccess;
#else
    struct cudaFuncAttributes a;
    cudaError_t e = cudaFuncGetAttributes(&a, nf_k_layer_norm);
    if (e != cudaSuccess && kernel) *kernel = "nf_k_layer_norm";
    return e;
#endif
}

static cudaError_t nf_layer_norm(cudaStream_t st, const float * x, int64_t ldx, const float * g, const float * b,
                                 float eps, float * y, int64_t ldy, int64_t m, int64_t k, const char ** kernel) {
    if (m <= 0 || k <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_layer_norm, nf_blocks(m, NF_CUDA_BLOCK / 32), NF_CUDA_BLOCK, st)(x, ldx, g, b, eps, y, ldy, m, k);
    NF_CHECK_LAUNCH("nf_k_layer_norm");
    return cudaSuccess;
}

static cudaError_t nf_batch_norm(cudaStream_t st, const float * x, int64_t ldx, const float * w, const float * b,
                                 const float * mean, const float * var, int64_t C, float eps, int relu, int bf16,
                                 float * y, int64_t ldy, int64_t m, float * coef, const char ** kernel) {
    if (m <= 0 || C <= 0) return cudaSuccess;
    NF_LAUNCH(nf_k_bn_coef, nf_blocks(C, NF_CUDA_BLOCK), NF_CUDA_BLOCK, st)(w, b, mean, var, C, eps, coef, coef + C);
    NF_CHECK_LAUNCH("nf_k_bn_coef");
    NF_LAUNCH(nf_k_bn_apply, nf_blocks(m, NF_CUDA_BLOCK / 32), NF_CUDA_BLOCK, st)
    (x, ldx, coef, coef + C, relu, bf16, y, ldy, m, C);
    NF_CHECK_LAUNCH("nf_k_bn_apply");
    return cudaSuccess;
}

/* ---- the ops ----------------------------------------------------------------- */

int nf__cuda_layer_norm(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_layer_norm_params * p = &op->p.layer_norm;
    NF_OP_LAUNCH(nf_layer_norm(nf__cuda_op_stream(be), NF_F(&op->src[0]), p->ldx, NF_F(&op->src[1]), NF_F(&op->src[2]),
                               p->eps, NF_F(&op->dst[0]), p->ldy, p->m, p->k, NF_K));
    return NF_OK;
}
bool nf__cuda_layer_norm_supports(nf_backend * be, const nf_op * op) { return true; }

int nf__cuda_batch_norm_r(nf_backend * be, const nf_op * op, int bf16, nf_err * err) {
    const struct nf_batch_norm_params * p = &op->p.batch_norm;
    if (p->m <= 0) return NF_OK;
    void * scratch = NULL;
    size_t size = 0;
    int rc = nf__cuda_op_scratch(be, 2 * (size_t) p->c * sizeof(float), &scratch, &size, err);
    if (rc != NF_OK) return rc;
    NF_OP_LAUNCH(nf_batch_norm(nf__cuda_op_stream(be), NF_F(&op->src[0]), p->ldx, NF_F(&op->src[1]), NF_F(&op->src[2]),
                               NF_F(&op->src[3]), NF_F(&op->src[4]), p->c, p->eps, p->relu, bf16, NF_F(&op->dst[0]),
                               p->ldy, p->m, (float *) scratch, NF_K));
    return NF_OK;
}
int nf__cuda_batch_norm(nf_backend * be, const nf_op * op, nf_err * err) {
    return nf__cuda_batch_norm_r(be, op, 0, err);
}
bool nf__cuda_batch_norm_supports(nf_backend * be, const nf_op * op) { return true; }
