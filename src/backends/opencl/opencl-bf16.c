/*
 * opencl-bf16.c -- --precision bf16-autocast on the OpenCL backend: the cpu
 * backend's mode (src/backends/cpu/cpu-bf16.c, docs/precision.md) as fp32
 * arithmetic with bf16 rounding (kernels-bf16.cl): every value a float,
 * rounded to the nearest bf16 (ties to even, as torch) exactly where the cpu
 * mode rounds.
 *  - LINEAR: x and W rounded into scratch, the fp32 GEMM LINEAR uses (its
 *    sums of exact bf16 products), then nf_bf16_linear_epilogue (bias rounded,
 *    one or two output roundings by p.bias_after_round, the activation
 *    rounded, the fp32 accumulate);
 *  - ATTENTION: bf16 q, k, v, fp32 scores and softmax sum, the softmax
 *    numerators rounded to bf16 before P·V, the output rounded;
 *  - EMBED_FEATURES and the regressor's LABEL_TOKENS as Linear(1, D);
 *  - the fp32 ops through the exact kernels; any other op refused.
 */
#define _POSIX_C_SOURCE 200809L
#include "opencl-impl.h"

/* rows (row stride lds) of src to bf16-rounded, contiguous rows of dst */
static int round_rows(struct nf_cl * c, cl_mem src, cl_long s_off, cl_long lds, cl_mem dst, cl_long d_off, int64_t rows,
                      int64_t ncols, nf_err * err) {
    const size_t ls[2] = {64, 1};
    const size_t gs[2] = {(size_t) ncols, (size_t) rows};
    return LAUNCH(c, K_BF16_ROUND_ROWS, 2, gs, ls, err, KMEM(src), KLONG(s_off), KLONG(lds), KMEM(dst), KLONG(d_off),
                  KINT(rows), KINT(ncols));
}

/* scratch bytes per chunk of LINEAR rows (beside the rounded W) */
#define NF_CL_BF16_CHUNK_BYTES ((size_t) 64 << 20)

static int bf16_linear(nf_backend * be, const nf_op * op, nf_err * err) {
    struct nf_cl * c = be->ctx;
    const nf_tensor * x = &op->src[0];
    const nf_tensor * W = &op->src[1];
    const int has_bias = op->n_src >= 3 && has_tensor(&op->src[2]);
    const nf_tensor * bias = has_bias ? &op->src[2] : &op->src[1];
    const nf_tensor * y = &op->dst[0];
    const struct nf_linear_params * p = &op->p.linear;
    const size_t M = (size_t) p->m, N = (size_t) p->n, K = (size_t) p->k;
    if (M == 0) {
        return NF_OK;
    }
    /* scratch: W rounded (N*K), then per chunk of rows x rounded (mc*K) and the sums (mc*N) */
    size_t mc = NF_CL_BF16_CHUNK_BYTES / sizeof(float) / (K + N);
    mc = mc < 1 ? 1 : mc > M ? M : mc;
    const size_t wa = 0, xa = N * K, ta = xa + mc * K;
    NF_TRY(nf__cl_ensure_scratch(c, (ta + mc * N) * sizeof(float), err));
    NF_TRY(round_rows(c, tmem(W), toff(W), (cl_long) K, c->scratch, (cl_long) wa, (int64_t) N, (int64_t) K, err));
    for (size_t r0 = 0; r0 < M; r0 += mc) {
        const size_t rows = M - r0 < mc ? M - r0 : mc;
        NF_TRY(round_rows(c, tmem(x), toff(x) + (cl_long) (r0 * (size_t) p->ldx), p->ldx, c->scratch, (cl_long) xa,
                          (int64_t) rows, (int64_t) K, err));
        NF_TRY(nf__cl_gemm_raw(c, c->scratch, xa, K, c->scratch, wa, c->scratch, ta, rows, N, K, err));
        const size_t ls[2] = {64, 1};
        const size_t gs[2] = {N, rows};
        NF_TRY(LAUNCH(c, K_BF16_LINEAR_EPILOGUE, 2, gs, ls, err, KMEM(c->scratch), KLONG(ta), KMEM(tmem(bias)),
                      KLONG(toff(bias)), KINT(has_bias), KMEM(tmem(y)),
                      KLONG(toff(y) + (cl_long) (r0 * (size_t) p->ldy)), KLONG(p->ldy), KINT(rows), KINT(N),
                      KINT(p->act), KINT(p->accumulate != 0), KINT(p->bias_after_round != 0)));
    }
    return NF_OK;
}

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

static int bf16_embed_features(nf_backend * be, const nf_op * op, nf_err * err) {
    struct nf_cl * c = be->ctx;
    const nf_tensor * z = &op->src[0];
    const nf_tensor * w = &op->src[1];
    const nf_tensor * b = &op->src[2];
    const nf_tensor * tok = &op->dst[0];
    const int64_t n = dim(z, 0), F = dim(z, 1), D = tok->ne[2];
    const size_t ls[2] = {D >= 64 ? 64 : (size_t) D, 1};
    const size_t gs[2] = {(size_t) D, (size_t) (n * F)};
    return LAUNCH(c, K_BF16_EMBED_FEATURES, 2, gs, ls, err, KMEM(tmem(z)), KLONG(toff(z)), KMEM(tmem(w)),
                  KLONG(toff(w)), KMEM(tmem(b)), KLONG(toff(b)), KMEM(tmem(tok)), KLONG(toff(tok)), KLONG(n * F),
                  KINT(F), KINT(F + 1), KINT(D));
}

static int bf16_label_tokens(nf_backend * be, const struct nf_kernel * k, const nf_op * op, nf_err * err) {
    if (op->p.label_tokens.mode != NF_LABEL_VALUE) {
        return k->run(be, op, err); /* nn.Embedding: fp32 under autocast */
    }
    struct nf_cl * c = be->ctx;
    const nf_tensor * tok = &op->dst[0];
    const nf_tensor * y = &op->src[0];
    const nf_tensor * w = &op->src[1];
    const nf_tensor * b = &op->src[2];
    const int64_t n = tok->ne[0], T = tok->ne[1], D = tok->ne[2];
    const size_t ls[2] = {D >= 64 ? 64 : (size_t) D, 1};
    const size_t gs[2] = {(size_t) D, (size_t) n};
    return LAUNCH(c, K_BF16_LABEL_VALUE, 2, gs, ls, err, KMEM(tmem(y)), KLONG(toff(y)), KMEM(tmem(w)), KLONG(toff(w)),
                  KMEM(tmem(b)), KLONG(toff(b)), KMEM(tmem(tok)), KLONG(toff(tok)), KINT(n), KINT(T), KINT(D));
}

int nf__cl_bf16_launch(nf_backend * be, const struct nf_kernel * k, const nf_op * op, nf_err * err) {
    switch (op->type) {
        case NF_OP_LINEAR: return bf16_linear(be, op, err);
        case NF_OP_ATTENTION: return bf16_attention(be, op, err);
        case NF_OP_EMBED_FEATURES: return bf16_embed_features(be, op, err);
        case NF_OP_LABEL_TOKENS: return bf16_label_tokens(be, k, op, err);
        /* fp32 under autocast: the exact kernels */
        case NF_OP_QUANTILE:
        case NF_OP_BUCKETIZE_NORM:
        case NF_OP_LAYER_NORM:
        case NF_OP_FILL:
        case NF_OP_COPY:
        case NF_OP_GATHER_ROWS: return k->run(be, op, err);
        default:
            return nf__err_set(err, NF_ERR_UNSUPPORTED,
                               "no bf16-autocast rule for this op on opencl (the mode covers Mitra's forward, "
                               "docs/precision.md); run with --precision exact");
    }
}
