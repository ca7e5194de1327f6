/*
 * opencl-train-b.c -- the OpenCL backend's training ops, set B (limits and
 * host launchers; kernels in kernels-train-b.cl): ATTENTION_BACKWARD,
 * EMBED_FEATURES_BACKWARD, LABEL_TOKENS_BACKWARD, CROSS_ENTROPY, MSE_LOSS.
 */
#define _POSIX_C_SOURCE 200809L
#include "opencl-impl.h"

/* ---- ATTENTION_BACKWARD ------------------------------------------------------------- */

bool nf__cl_attention_backward_supports(nf_backend * be, const nf_op * op) {
    struct nf_cl * c = be->ctx;
    const struct nf_attention_backward_params * p = &op->p.attention_backward;
    for (int i = 0; i < 5; i++)
        if (!is_f32(&op->src[i])) return false;
    for (int i = 0; i < 4; i++)
        if (!is_f32(&op->dst[i])) return false;
    return p->head_dim >= 1 && p->head_dim <= NF_CL_ABW_MAX_HD && p->lk >= 1 && fits_int(p->lq) && fits_int(p->lk) &&
           fits_int(p->n_heads) && fits_int(p->n_groups) && c->kwg[K_ATTN_BWD_Q] >= NF_CL_ABW_WG &&
           c->kwg[K_ATTN_BWD_KV] >= NF_CL_ABW_WG;
}

/* pass 1: a work-group per query row (dq, the rows' max and sum into
 * stats); pass 2: a work-group per key row (dk, dv) */
int nf__cl_attention_backward(nf_backend * be, const nf_op * op, nf_err * err) {
    struct nf_cl * c = be->ctx;
    const struct nf_attention_backward_params * p = &op->p.attention_backward;
    if (p->n_groups == 0 || p->lq == 0) return NF_OK;
    const nf_tensor *q = &op->src[0], *k = &op->src[1], *v = &op->src[2], *o = &op->src[3], *dO = &op->src[4];
    const nf_tensor *dq = &op->dst[0], *dk = &op->dst[1], *dv = &op->dst[2], *st = &op->dst[3];
    const size_t ls[3] = {NF_CL_ABW_WG, 1, 1};
    const size_t g1[3] = {(size_t) p->lq * NF_CL_ABW_WG, (size_t) p->n_heads, (size_t) p->n_groups};
    NF_TRY(LAUNCH(c, K_ATTN_BWD_Q, 3, g1, ls, err, KMEM(tmem(q)), KLONG(toff(q)), KMEM(tmem(k)), KLONG(toff(k)),
                  KMEM(tmem(v)), KLONG(toff(v)), KMEM(tmem(o)), KLONG(toff(o)), KMEM(tmem(dO)), KLONG(toff(dO)),
                  KINT(p->lq), KINT(p->lk), KINT(p->head_dim), KINT(p->n_heads), KLONG(p->q_gs), KLONG(p->q_ss),
                  KLONG(p->kv_gs), KLONG(p->kv_ss), KLONG(p->o_gs), KLONG(p->o_ss), KFLT(p->scale), KLONG(p->drop_seed),
                  KINT(p->drop_threshold), KFLT(p->drop_scale), KMEM(tmem(dq)), KLONG(toff(dq)), KMEM(tmem(st)),
                  KLONG(toff(st))));
    const size_t g2[3] = {(size_t) p->lk * NF_CL_ABW_WG, (size_t) p->n_heads, (size_t) p->n_groups};
    return LAUNCH(c, K_ATTN_BWD_KV, 3, g2, ls, err, KMEM(tmem(q)), KLONG(toff(q)), KMEM(tmem(k)), KLONG(toff(k)),
                  KMEM(tmem(v)), KLONG(toff(v)), KMEM(tmem(o)), KLONG(toff(o)), KMEM(tmem(dO)), KLONG(toff(dO)),
                  KINT(p->lq), KINT(p->lk), KINT(p->head_dim), KINT(p->n_heads), KLONG(p->q_gs), KLONG(p->q_ss),
                  KLONG(p->kv_gs), KLONG(p->kv_ss), KLONG(p->o_gs), KLONG(p->o_ss), KFLT(p->scale), KLONG(p->drop_seed),
                  KINT(p->drop_threshold), KFLT(p->drop_scale), KMEM(tmem(st)), KLONG(toff(st)), KMEM(tmem(dk)),
                  KLONG(toff(dk)), KMEM(tmem(dv)), KLONG(toff(dv)), KINT(p->accumulate_kv != 0));
}

/* ---- EMBED_FEATURES_BACKWARD / LABEL_TOKENS_BACKWARD ---------------------------------- */

/* the chunk partial sums go to the scratch buffer: NF_CL_TB_CHUNKS x D x 2 nf_acc */
static size_t nf__cl_part_bytes(const struct nf_cl * c, int64_t D) {
    return (size_t) NF_CL_TB_CHUNKS * (size_t) D * 2 * (c->fp64 ? sizeof(cl_double) : sizeof(cl_float));
}

static int nf__cl_colsum_finalize(struct nf_cl * c, int64_t D, const nf_tensor * o0, const nf_tensor * o1,
                                  nf_err * err) {
    const size_t ls[1] = {D >= 64 ? 64 : (size_t) D};
    const size_t gs[1] = {(size_t) D};
    return LAUNCH(c, K_COLSUM_FINALIZE, 1, gs, ls, err, KMEM(c->scratch), KINT(NF_CL_TB_CHUNKS), KINT(D),
                  KMEM(tmem(o0)), KLONG(toff(o0)), KMEM(tmem(o1 ? o1 : o0)), KLONG(toff(o1 ? o1 : o0)),
                  KINT(o1 ? 2 : 1));
}

bool nf__cl_embed_features_backward_supports(nf_backend * be, const nf_op * op) {
    return is_f32(&op->src[0]) && is_f32(&op->src[1]) && is_f32(&op->dst[0]) && is_f32(&op->dst[1]) &&
           fits_int(op->src[0].ne[1] + 1) && fits_int(op->src[1].ne[2]);
}

int nf__cl_embed_features_backward(nf_backend * be, const nf_op * op, nf_err * err) {
    struct nf_cl * c = be->ctx;
    const nf_tensor *z = &op->src[0], *dt = &op->src[1];
    const int64_t n = z->ne[0], F = z->ne[1], D = dt->ne[2], nF = n * F;
    if (D == 0) return NF_OK;
    NF_TRY(nf__cl_ensure_scratch(c, nf__cl_part_bytes(c, D), err));
    const int64_t per = (nF + NF_CL_TB_CHUNKS - 1) / NF_CL_TB_CHUNKS;
    const size_t ls[2] = {D >= 64 ? 64 : (size_t) D, 1};
    const size_t gs[2] = {(size_t) D, NF_CL_TB_CHUNKS};
    NF_TRY(LAUNCH(c, K_EMBED_BWD_PART, 2, gs, ls, err, KMEM(tmem(z)), KLONG(toff(z)), KMEM(tmem(dt)), KLONG(toff(dt)),
                  KLONG(nF), KINT(F), KINT(D), KLONG(per), KMEM(c->scratch)));
    return nf__cl_colsum_finalize(c, D, &op->dst[0], &op->dst[1], err);
}

bool nf__cl_label_tokens_backward_supports(nf_backend * be, const nf_op * op) {
    const nf_tensor * dt = &op->src[1];
    if (!is_f32(dt) || !is_f32(&op->dst[0]) || !fits_int(dt->ne[0]) || !fits_int(dt->ne[1]) || !fits_int(dt->ne[2]))
        return false;
    switch (op->p.label_tokens_backward.mode) {
        case NF_LABEL_CLASS:
            return has_tensor(&op->src[0]) && op->src[0].type == NF_I32 && op->src[0].offs % 4 == 0 &&
                   fits_int(op->dst[0].ne[0]);
        case NF_LABEL_VALUE: return is_f32(&op->src[0]) && is_f32(&op->dst[1]);
        case NF_LABEL_MASK: return true;
        default: return false;
    }
}

int nf__cl_label_tokens_backward(nf_backend * be, const nf_op * op, nf_err * err) {
    struct nf_cl * c = be->ctx;
    const nf_tensor *y = &op->src[0], *dt = &op->src[1];
    const int64_t n = dt->ne[0], T = dt->ne[1], D = dt->ne[2];
    const int mode = op->p.label_tokens_backward.mode;
    if (D == 0) return NF_OK;
    const size_t l1 = D >= 64 ? 64 : (size_t) D;
    if (mode == NF_LABEL_CLASS) {
        const nf_tensor * dE = &op->dst[0];
        const int64_t C = dE->ne[0];
        const size_t ls[2] = {l1, 1};
        const size_t gs[2] = {(size_t) D, (size_t) C};
        return LAUNCH(c, K_LABEL_BWD_CLASS, 2, gs, ls, err, KMEM(tmem(y)), KLONG(toff(y)), KMEM(tmem(dt)),
                      KLONG(toff(dt)), KINT(n), KINT(T), KINT(D), KINT(C), KMEM(tmem(dE)), KLONG(toff(dE)));
    }
    const int value = mode == NF_LABEL_VALUE;
    NF_TRY(nf__cl_ensure_scratch(c, nf__cl_part_bytes(c, D), err));
    const int64_t per = (n + NF_CL_TB_CHUNKS - 1) / NF_CL_TB_CHUNKS;
    const size_t ls[2] = {l1, 1};
    const size_t gs[2] = {(size_t) D, NF_CL_TB_CHUNKS};
    /* mask mode: no y (the kernel does not read it; any buffer stands in) */
    const nf_tensor * yy = value ? y : dt;
    NF_TRY(LAUNCH(c, K_LABEL_BWD_PART, 2, gs, ls, err, KMEM(tmem(yy)), KLONG(toff(yy)), KINT(value), KMEM(tmem(dt)),
                  KLONG(toff(dt)), KINT(n), KINT(T), KINT(D), KINT(per), KMEM(c->scratch)));
    return nf__cl_colsum_finalize(c, D, &op->dst[0], value ? &op->dst[1] : NULL, err);
}

/* ---- CROSS_ENTROPY / MSE_LOSS ------------------------------------------------------------ */

bool nf__cl_cross_entropy_supports(nf_backend * be, const nf_op * op) {
    struct nf_cl * c = be->ctx;
    return is_f32(&op->src[0]) && has_tensor(&op->src[1]) && op->src[1].offs % 4 == 0 && is_f32(&op->dst[0]) &&
           (op->n_dst < 2 || is_f32(&op->dst[1])) && fits_int(op->p.cross_entropy.c) &&
           c->kwg[K_CROSS_ENTROPY] >= NF_CL_LOSS_WG;
}

int nf__cl_cross_entropy(nf_backend * be, const nf_op * op, nf_err * err) {
    struct nf_cl * c = be->ctx;
    const struct nf_cross_entropy_params * p = &op->p.cross_entropy;
    const nf_tensor *l = &op->src[0], *y = &op->src[1], *loss = &op->dst[0];
    const int has = op->n_dst == 2;
    const nf_tensor * dl = has ? &op->dst[1] : loss;
    const size_t ls[1] = {NF_CL_LOSS_WG};
    return LAUNCH(c, K_CROSS_ENTROPY, 1, ls, ls, err, KMEM(tmem(l)), KLONG(toff(l)), KLONG(p->ldl), KMEM(tmem(y)),
                  KLONG(toff(y)), KLONG(p->n), KINT(p->c), KFLT(p->grad_scale), KMEM(tmem(loss)), KLONG(toff(loss)),
                  KMEM(tmem(dl)), KLONG(toff(dl)), KINT(has));
}

bool nf__cl_mse_loss_supports(nf_backend * be, const nf_op * op) {
    struct nf_cl * c = be->ctx;
    return is_f32(&op->src[0]) && is_f32(&op->src[1]) && is_f32(&op->dst[0]) &&
           (op->n_dst < 2 || is_f32(&op->dst[1])) && c->kwg[K_MSE_LOSS] >= NF_CL_LOSS_WG;
}

int nf__cl_mse_loss(nf_backend * be, const nf_op * op, nf_err * err) {
    struct nf_cl * c = be->ctx;
    const struct nf_mse_loss_params * p = &op->p.mse_loss;
    const nf_tensor *pr = &op->src[0], *t = &op->src[1], *loss = &op->dst[0];
    const int has = op->n_dst == 2;
    const nf_tensor * dp = has ? &op->dst[1] : loss;
    const size_t ls[1] = {NF_CL_LOSS_WG};
    return LAUNCH(c, K_MSE_LOSS, 1, ls, ls, err, KMEM(tmem(pr)), KLONG(toff(pr)), KLONG(p->ldp), KMEM(tmem(t)),
                  KLONG(toff(t)), KLONG(p->n), KFLT(p->grad_scale), KMEM(tmem(loss)), KLONG(toff(loss)), KMEM(tmem(dp)),
                  KLONG(toff(dp)), KINT(has));
}
