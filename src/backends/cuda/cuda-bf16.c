/*
 * cuda-bf16.c -- --precision bf16-autocast on the cuda backend: the cpu
 * backend's mode (src/backends/cpu/cpu-bf16.c, docs/precision.md).
 *  - LINEAR: x and W rounded to bf16 and stored as bf16 (nf_k_bf16_pack), the
 *    GEMM by cublasGemmEx on CUDA_R_16BF operands with CUBLAS_COMPUTE_32F
 *    into fp32 (bf16 x bf16 -> f32, as oneDNN's matmul on cpu), by chunks of
 *    rows, then the cpu mode's epilogue (nf_k_bf16_linear_epilogue);
 *  - ATTENTION, EMBED_FEATURES, the regressor's LABEL_TOKENS: fp32 kernels
 *    with bf16 rounding (cuda-kernels-bf16.cu);
 *  - SpTransformer's rules (the cpu's cpu-bf16-spt.c, opencl's
 *    kernels-bf16-spt.cl): ATTENTION with p.bf16_stream (scores, scaled scores,
 *    probabilities and P·V each rounded) and BUCKET_ROUTE as fp32 kernels with the
 *    rule's roundings, BUCKET_GATHER, AXIAL_POS and BATCH_NORM as the exact kernels
 *    with their bf16 flag (nf__cuda_*_r), CONV1D as LINEAR
 *    (bf16 cublasGemmEx over the tap-major W and the im2col, then R(t + R(b)),
 *    accumulating R(y + that)), LINEAR's bf16 residual (p.bf16_stream);
 *  - the fp32 ops through the exact kernels; any other op refused.
 */
#include "cuda-impl.h"

#include <limits.h>

#define NF_CUDA_R_16BF CUDA_R_16BF

#define NF__BF16_LAUNCH(call)                                                                           \
    do {                                                                                                \
        const char * kname_ = NULL;                                                                     \
        cudaError_t e_ = (call);                                                                        \
        if (e_ != cudaSuccess) return nf__cuda_op_launch_err(be, op, kname_ ? kname_ : #call, e_, err); \
    } while (0)
#define NF__BK (&kname_)

static size_t nf__al(size_t n) { return (n + 255) & ~(size_t) 255; }

static int nf__bf16_linear(nf_backend * be, const nf_op * op, nf_err * err) {
    nf_cuda_ctx * c = nf__cuda(be);
    const struct nf_linear_params * p = &op->p.linear;
    const int64_t m = p->m, n = p->n, k = p->k;
    if (m <= 0 || n <= 0) return NF_OK;
    if (n > INT_MAX || k > INT_MAX)
        return nf__err_set(err, NF_ERR_UNSUPPORTED, "op LINEAR (%s) on %s: dimensions exceed cuBLAS's int range",
                           nf__op_label(op), be->name);
    const float * x = NF__F(&op->src[0]);
    const float * W = NF__F(&op->src[1]);
    const float * bias = op->n_src >= 3 && op->src[2].buf ? NF__F(&op->src[2]) : NULL;
    float * y = NF__F(&op->dst[0]);
    const int act = p->act == NF_ACT_GELU ? 1 : p->act == NF_ACT_RELU ? 2 : 0;
    cudaStream_t st = c->stream;
    /* scratch: W as bf16 (n*k), per chunk of rows x as bf16 (rows*k) and the fp32 sums (rows*n) */
    int64_t rows = c->chunk_floats / (n + k);
    if (rows < 1) rows = 1;
    if (rows > m) rows = m;
    if (rows > INT_MAX) rows = INT_MAX;
    const size_t wb = nf__al((size_t) (n * k) * 2), xb = nf__al((size_t) (rows * k) * 2);
    void * scratch = NULL;
    NF_TRY(nf__cuda_scratch(be, wb + xb + (size_t) (rows * n) * sizeof(float), &scratch, err));
    uint16_t * Wh = (uint16_t *) scratch;
    uint16_t * xh = (uint16_t *) ((char *) scratch + wb);
    float * t = (float *) ((char *) scratch + wb + xb);
    NF__BF16_LAUNCH(nf__cuda_bf16_pack(st, W, k, n, k, Wh, NF__BK));
    const float one = 1.0f, zero = 0.0f;
    for (int64_t r0 = 0; r0 < m; r0 += rows) {
        const int64_t nr = m - r0 < rows ? m - r0 : rows;
        NF__BF16_LAUNCH(nf__cuda_bf16_pack(st, x + r0 * p->ldx, p->ldx, nr, k, xh, NF__BK));
        /* column-major tᵀ (n x nr) = op_T(W as k x n) · xᵀ (k x nr) (cuda.c's layout note) */
        cublasStatus_t s = cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int) n, (int) nr, (int) k, &one, Wh,
                                        NF_CUDA_R_16BF, (int) k, xh, NF_CUDA_R_16BF, (int) k, &zero, t, CUDA_R_32F,
                                        (int) n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        if (s != CUBLAS_STATUS_SUCCESS) {
            return nf__err_set(err, NF_ERR_DEVICE,
                               "op LINEAR (%s) on %s: cublasGemmEx (bf16 x bf16 -> f32, CUBLAS_COMPUTE_32F, m=%lld "
                               "n=%lld k=%lld) failed: %s (%s)",
                               nf__op_label(op), be->name, (long long) n, (long long) nr, (long long) k,
                               cublasGetStatusName(s), cublasGetStatusString(s));
        }
        NF__BF16_LAUNCH(nf__cuda_bf16_linear_epilogue(st, t, bias, act, p->accumulate != 0, p->bias_after_round != 0,
                                                      p->bf16_stream != 0, y + r0 * p->ldy, p->ldy, nr, n, NF__BK));
    }
    return NF_OK;
}

static int nf__bf16_attention(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_attention_params * p = &op->p.attention;
    if (p->head_dim > NF_CUDA_BF16_AHD)
        return nf__err_set(err, NF_ERR_UNSUPPORTED, "op ATTENTION (%s) on %s: bf16-autocast: head_dim %lld > %d",
                           nf__op_label(op), be->name, (long long) p->head_dim, NF_CUDA_BF16_AHD);
    NF__BF16_LAUNCH(nf__cuda_bf16_attention(nf__cuda(be)->stream, NF__F(&op->src[0]), NF__F(&op->src[1]),
                                            NF__F(&op->src[2]), NF__F(&op->dst[0]), p->n_groups, p->n_heads, p->lq,
                                            p->lk, p->head_dim, p->q_gs, p->q_ss, p->kv_gs, p->kv_ss, p->o_gs, p->o_ss,
                                            p->scale, NF__BK));
    return NF_OK;
}

/* ---- SpTransformer's rules (docs/precision.md "SpTransformer under CPU autocast") ---- */

/* ATTENTION with p.bf16_stream: the scores of a chunk of groups in scratch */
static int nf__bf16_spt_attention(nf_backend * be, const nf_op * op, nf_err * err) {
    nf_cuda_ctx * c = nf__cuda(be);
    const struct nf_attention_params * p = &op->p.attention;
    if (p->n_groups <= 0 || p->lq <= 0) return NF_OK;
    const int64_t per_group = p->n_heads * p->lq * p->lk;
    int64_t gc = c->chunk_floats / per_group;
    gc = gc < 1 ? 1 : gc > p->n_groups ? p->n_groups : gc;
    void * S = NULL;
    NF_TRY(nf__cuda_scratch(be, (size_t) (gc * per_group) * sizeof(float), &S, err));
    for (int64_t g0 = 0; g0 < p->n_groups; g0 += gc) {
        const int64_t ng = p->n_groups - g0 < gc ? p->n_groups - g0 : gc;
        NF__BF16_LAUNCH(nf__cuda_bf16_spt_attention(c->stream, NF__F(&op->src[0]), NF__F(&op->src[1]),
                                                    NF__F(&op->src[2]), NF__F(&op->dst[0]), (float *) S, g0, ng,
                                                    p->n_heads, p->lq, p->lk, p->head_dim, p->q_gs, p->q_ss, p->kv_gs,
                                                    p->kv_ss, p->o_gs, p->o_ss, p->scale, NF__BK));
    }
    return NF_OK;
}

static int nf__bf16_bucket_route(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_bucket_route_params * p = &op->p.bucket_route;
    const int64_t rows = p->n_seq * p->n_heads * p->n_buckets;
    if (rows <= 0) return NF_OK;
    const size_t mb = nf__al((size_t) (2 * rows * p->head_dim) * sizeof(float));
    void * sp = NULL;
    NF_TRY(nf__cuda_scratch(be, mb + (size_t) (rows * p->n_buckets) * sizeof(float), &sp, err));
    NF__BF16_LAUNCH(nf__cuda_bf16_bucket_route(nf__cuda(be)->stream, p, NF__F(&op->src[0]), NF__F(&op->src[1]),
                                               (int32_t *) NF__F(&op->dst[0]), NF__F(&op->dst[1]), (float *) sp,
                                               (float *) ((char *) sp + mb), NF__BK));
    return NF_OK;
}

/* CONV1D: torch's bf16 convolution, the cpu rule (cpu-bf16.c nf__bf16_conv1d) -- W
 * tap-major and each chunk's im2col as bf16 bits, cublasGemmEx (bf16 x bf16 -> f32,
 * CUBLAS_COMPUTE_32F) into t, then R(t + R(b)), accumulating R(y + that); a sequence at a
 * time in chunks of rows */
static int nf__bf16_conv1d(nf_backend * be, const nf_op * op, nf_err * err) {
    nf_cuda_ctx * c = nf__cuda(be);
    const struct nf_conv1d_params * p = &op->p.conv1d;
    const int64_t S = p->n_seq, L = p->len, cin = p->cin, cout = p->cout, K = p->ksize, KC = K * cin;
    if (S <= 0 || L <= 0) return NF_OK;
    if (KC > INT_MAX || cout > INT_MAX)
        return nf__err_set(err, NF_ERR_UNSUPPORTED, "op CONV1D (%s) on %s: dimensions exceed cuBLAS's int range",
                           nf__op_label(op), be->name);
    const float * x = NF__F(&op->src[0]);
    const float * bias = op->n_src >= 3 && op->src[2].buf ? NF__F(&op->src[2]) : NULL;
    float * y = NF__F(&op->dst[0]);
    cudaStream_t st = c->stream;
    int64_t rb = c->chunk_floats / (KC + cout);
    rb = rb < 1 ? 1 : rb > L ? L : rb > INT_MAX ? INT_MAX : rb;
    const size_t wf = nf__al((size_t) (cout * KC) * sizeof(float)), wh = nf__al((size_t) (cout * KC) * 2);
    const size_t cf = nf__al((size_t) (rb * KC) * sizeof(float)), ch = nf__al((size_t) (rb * KC) * 2);
    void * sp = NULL;
    NF_TRY(nf__cuda_scratch(be, wf + wh + cf + ch + (size_t) (rb * cout) * sizeof(float), &sp, err));
    char * base = (char *) sp;
    float *Wt = (float *) base, *col = (float *) (base + wf + wh), *t = (float *) (base + wf + wh + cf + ch);
    uint16_t *Wh = (uint16_t *) (base + wf), *colh = (uint16_t *) (base + wf + wh + cf);
    NF__BF16_LAUNCH(nf__cuda_conv_weights(st, NF__F(&op->src[1]), cout, cin, K, Wt, NF__BK));
    NF__BF16_LAUNCH(nf__cuda_bf16_pack(st, Wt, KC, cout, KC, Wh, NF__BK));
    const float one = 1.0f, zero = 0.0f;
    for (int64_t s = 0; s < S; s++)
        for (int64_t t0 = 0; t0 < L; t0 += rb) {
            const int64_t nr = L - t0 < rb ? L - t0 : rb;
            NF__BF16_LAUNCH(nf__cuda_conv_im2col(st, x + s * p->x_gs, p->ldx, p->x_gs, L, cin, K, p->dilation, p->pad,
                                                 t0, nr, 1, col, NF__BK));
            NF__BF16_LAUNCH(nf__cuda_bf16_pack(st, col, KC, nr, KC, colh, NF__BK));
            /* column-major tᵀ (cout x nr) = op_T(Wt as KC x cout) · colᵀ (KC x nr) */
            cublasStatus_t bs = cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int) cout, (int) nr, (int) KC, &one,
                                             Wh, NF_CUDA_R_16BF, (int) KC, colh, NF_CUDA_R_16BF, (int) KC, &zero, t,
                                             CUDA_R_32F, (int) cout, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
            if (bs != CUBLAS_STATUS_SUCCESS)
                return nf__err_set(err, NF_ERR_DEVICE,
                                   "op CONV1D (%s) on %s: cublasGemmEx (bf16 x bf16 -> f32, CUBLAS_COMPUTE_32F) "
                                   "failed: %s (%s)",
                                   nf__op_label(op), be->name, cublasGetStatusName(bs), cublasGetStatusString(bs));
            NF__BF16_LAUNCH(nf__cuda_bf16_conv_epilogue(st, t, bias, p->accumulate != 0, y + s * p->y_gs + t0 * p->ldy,
                                                        p->ldy, nr, cout, NF__BK));
        }
    return NF_OK;
}

int nf__cuda_bf16_launch(nf_backend * be, const struct nf_kernel * k, const nf_op * op, nf_err * err) {
    cudaStream_t st = nf__cuda(be)->stream;
    switch (op->type) {
        case NF_OP_LINEAR: return nf__bf16_linear(be, op, err);
        case NF_OP_ATTENTION:
            return op->p.attention.bf16_stream ? nf__bf16_spt_attention(be, op, err) : nf__bf16_attention(be, op, err);
        case NF_OP_CONV1D: return nf__bf16_conv1d(be, op, err);
        case NF_OP_BUCKET_ROUTE: return nf__bf16_bucket_route(be, op, err);
        case NF_OP_BUCKET_GATHER: return nf__cuda_bucket_gather_r(be, op, 1, err);
        case NF_OP_AXIAL_POS: return nf__cuda_axial_pos_r(be, op, 1, err);
        case NF_OP_BATCH_NORM: return nf__cuda_batch_norm_r(be, op, 1, err);
        case NF_OP_EMBED_FEATURES: {
            const nf_tensor * z = &op->src[0];
            const int64_t n = z->ne[0], F = z->ne[1], D = op->dst[0].ne[2];
            NF__BF16_LAUNCH(nf__cuda_bf16_embed(st, 0, NF__F(z), n, F, NF__F(&op->src[1]), NF__F(&op->src[2]),
                                                NF__F(&op->dst[0]), F + 1, D, NF__BK));
            return NF_OK;
        }
        case NF_OP_LABEL_TOKENS: {
            if (op->p.label_tokens.mode != NF_LABEL_VALUE) return k->run(be, op, err); /* nn.Embedding: fp32 */
            const nf_tensor * tok = &op->dst[0];
            NF__BF16_LAUNCH(nf__cuda_bf16_embed(st, 1, NF__F(&op->src[0]), tok->ne[0], 1, NF__F(&op->src[1]),
                                                NF__F(&op->src[2]), NF__F(tok), tok->ne[1], tok->ne[2], NF__BK));
            return NF_OK;
        }
        /* fp32 under autocast: the exact kernels */
        case NF_OP_QUANTILE:
        case NF_OP_BUCKETIZE_NORM:
        case NF_OP_LAYER_NORM:
        case NF_OP_FILL:
        case NF_OP_COPY:
        case NF_OP_GATHER_ROWS: return k->run(be, op, err);
        default:
            return nf__err_set(err, NF_ERR_UNSUPPORTED,
                               "op %s (%s) on %s: no bf16-autocast rule for it (the mode covers the Mitra and "
                               "SpTransformer forwards, docs/precision.md); run with --precision exact",
                               nf__op_name(op->type), nf__op_label(op), be->name);
    }
}
