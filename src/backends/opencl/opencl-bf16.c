/*
 * opencl-bf16.c -- --precision bf16-autocast on the OpenCL backend: the cpu
 * backend's mode (src/backends/cpu/cpu-bf16.c, docs/precision.md) as fp32
 * arithmetic with bf16 rounding (kernels-bf16.cl): every value a float,
 * rounded to the nearest bf16 (ties to even, as torch) exactly where the cpu
 * mode rounds.
 *  - LINEAR: nf__cl_linear_chunks (opencl-gemm.c) with its bf16 flag: x and W
 *    rounded into scratch, the fp32 GEMM LINEAR uses (its sums of exact bf16
 *    products), then nf_bf16_linear_epilogue (bias rounded, one or two output
 *    roundings by p.bias_after_round, the activation rounded, the fp32
 *    accumulate);
 *  - ATTENTION: bf16 q, k, v, fp32 scores and softmax sum, the softmax
 *    numerators rounded to bf16 before P·V, the output rounded;
 *  - EMBED_FEATURES and the regressor's LABEL_TOKENS as Linear(1, D): the exact
 *    kernels with their bf16 flag (nf__cl_embed_features_r, nf__cl_label_tokens_r);
 *  - SpTransformer's rules (kernels-bf16-spt.cl; the cpu's cpu-bf16-spt.c and
 *    cpu-bf16.c): ATTENTION with p.bf16_stream (torch's unfused bf16 attention:
 *    scores, scaled scores, probabilities, P·V each rounded), BUCKET_ROUTE
 *    (bucket means, scores and softmax rounded), BUCKET_GATHER (R(p · k)),
 *    AXIAL_POS (R(x + R(e0 + e1))), CONV1D (bf16 W and im2col, R(sum + R(b)),
 *    accumulating R(y + that)), BATCH_NORM (R(R(x) · a + sh)) and LINEAR's
 *    bf16 residual (p.bf16_stream: R(y + t));
 *  - the fp32 ops through the exact kernels; any other op refused.
 */
#define _POSIX_C_SOURCE 200809L
#include "opencl-impl.h"

static int bf16_attention(nf_backend * be, const nf_op * op, nf_err * err) {
    struct nf_cl * c = be->ctx;
    const nf_tensor * q = &op->src[0];
    const nf_tensor * k = &op->src[1];
    const nf_tensor * v = &op->src[2];
    const nf_tensor * o = &op->dst[0];
    const struct nf_attention_params * p = &op->p.attention;
    if (p->head_dim > NF_CL_BF16_AHD) {
        return nf__err_set(err, NF_ERR_UNSUPPORTED, "%s: bf16-autocast ATTENTION: head_dim %lld > %d", c->name,
                           (long long) p->head_dim, NF_CL_BF16_AHD);
    }
    const size_t ls[3] = {16, 1, 1};
    const size_t gs[3] = {(size_t) p->lq, (size_t) p->n_heads, (size_t) p->n_groups};
    return LAUNCH(c, K_BF16_ATTENTION, 3, gs, ls, err, KMEM(tmem(q)), KLONG(toff(q)), KMEM(tmem(k)), KLONG(toff(k)),
                  KMEM(tmem(v)), KLONG(toff(v)), KMEM(tmem(o)), KLONG(toff(o)), KINT(p->lq), KINT(p->lk),
                  KINT(p->head_dim), KLONG(p->q_gs), KLONG(p->q_ss), KLONG(p->kv_gs), KLONG(p->kv_ss), KLONG(p->o_gs),
                  KLONG(p->o_ss), KFLT(p->scale));
}

/* ATTENTION with p.bf16_stream: the scores of a chunk of groups in scratch
 * (lk floats per query row and head) */
#define NF_CL_BF16_SCORE_BYTES ((size_t) 64 << 20)
static int bf16_spt_attention(nf_backend * be, const nf_op * op, nf_err * err) {
    struct nf_cl * c = be->ctx;
    const nf_tensor * q = &op->src[0];
    const nf_tensor * k = &op->src[1];
    const nf_tensor * v = &op->src[2];
    const nf_tensor * o = &op->dst[0];
    const struct nf_attention_params * p = &op->p.attention;
    if (p->n_groups == 0 || p->lq == 0 || p->n_heads == 0) {
        return NF_OK;
    }
    const size_t per_group = (size_t) p->n_heads * (size_t) p->lq * (size_t) (p->lk > 0 ? p->lk : 1) * sizeof(float);
    size_t gc = NF_CL_BF16_SCORE_BYTES / per_group;
    gc = gc < 1 ? 1 : gc > (size_t) p->n_groups ? (size_t) p->n_groups : gc;
    NF_TRY(nf__cl_ensure_scratch(c, gc * per_group, err));
    const size_t ls[3] = {16, 1, 1};
    for (size_t g0 = 0; g0 < (size_t) p->n_groups; g0 += gc) {
        const size_t ng = (size_t) p->n_groups - g0 < gc ? (size_t) p->n_groups - g0 : gc;
        const size_t gs[3] = {(size_t) p->lq, (size_t) p->n_heads, ng};
        NF_TRY(LAUNCH(c, K_BF16_SPT_ATTENTION, 3, gs, ls, err, KMEM(tmem(q)), KLONG(toff(q)), KMEM(tmem(k)),
                      KLONG(toff(k)), KMEM(tmem(v)), KLONG(toff(v)), KMEM(tmem(o)), KLONG(toff(o)), KMEM(c->scratch),
                      KINT(p->lq), KINT(p->lk), KINT(p->head_dim), KINT(p->n_heads), KINT(g0), KLONG(p->q_gs),
                      KLONG(p->q_ss), KLONG(p->kv_gs), KLONG(p->kv_ss), KLONG(p->o_gs), KLONG(p->o_ss),
                      KFLT(p->scale)));
    }
    return NF_OK;
}

int nf__cl_bf16_launch(nf_backend * be, const struct nf_kernel * k, const nf_op * op, nf_err * err) {
    switch (op->type) {
        case NF_OP_LINEAR: return nf__cl_linear_chunks(be, op, 1, err);
        case NF_OP_ATTENTION:
            return op->p.attention.bf16_stream ? bf16_spt_attention(be, op, err) : bf16_attention(be, op, err);
        case NF_OP_BUCKET_ROUTE: return nf__cl_bucket_route_r(be, op, 1, err);
        case NF_OP_BUCKET_GATHER: return nf__cl_bucket_gather_r(be, op, 1, err);
        case NF_OP_AXIAL_POS: return nf__cl_axial_pos_r(be, op, 1, err);
        case NF_OP_BATCH_NORM: return nf__cl_batch_norm_r(be, op, 1, err);
        case NF_OP_CONV1D: return nf__cl_conv1d_r(be, op, 1, err);
        case NF_OP_EMBED_FEATURES: return nf__cl_embed_features_r(be, op, 1, err);
        case NF_OP_LABEL_TOKENS: return nf__cl_label_tokens_r(be, op, 1, err);
        /* fp32 under autocast: the exact kernels */
        case NF_OP_QUANTILE:
        case NF_OP_BUCKETIZE_NORM:
        case NF_OP_LAYER_NORM:
        case NF_OP_FILL:
        case NF_OP_COPY:
        case NF_OP_GATHER_ROWS: return k->run(be, op, err);
        default:
            return nf__err_set(err, NF_ERR_UNSUPPORTED,
                               "no bf16-autocast rule for this op on opencl (the mode covers the Mitra and "
                               "SpTransformer forwards, docs/precision.md); run with --precision exact");
    }
}
