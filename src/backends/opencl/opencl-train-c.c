/*
 * opencl-train-c.c -- the OpenCL backend's training ops, set C (limits and
 * host launchers; kernels in kernels-train-c.cl): SCATTER_ADD_ROWS,
 * CLIP_GRAD_NORM, SCALE.
 */
#define _POSIX_C_SOURCE 200809L
#include "opencl-impl.h"

static bool nf__cl_is_i32(const nf_tensor * t) { return has_tensor(t) && t->type == NF_I32 && t->offs % 4 == 0; }

bool nf__cl_scatter_add_rows_supports(nf_backend * be, const nf_op * op) {
    const struct nf_scatter_add_rows_params * p = &op->p.scatter_add_rows;
    return nf__cl_is_i32(&op->src[0]) && nf__cl_is_i32(&op->src[1]) && is_f32(&op->src[2]) && is_f32(&op->dst[0]) &&
           fits_int(p->k);
}

/* a work-item per (table row, column) */
int nf__cl_scatter_add_rows(nf_backend * be, const nf_op * op, nf_err * err) {
    struct nf_cl * c = be->ctx;
    const struct nf_scatter_add_rows_params * p = &op->p.scatter_add_rows;
    const nf_tensor *order = &op->src[0], *start = &op->src[1], *dy = &op->src[2], *dW = &op->dst[0];
    if (p->n_table == 0) return NF_OK;
    const size_t ls[2] = {p->k >= 64 ? 64 : (size_t) p->k, 1};
    const size_t gs[2] = {(size_t) p->k, (size_t) p->n_table};
    return LAUNCH(c, K_SCATTER_ADD_ROWS, 2, gs, ls, err, KMEM(tmem(order)), KLONG(toff(order)), KMEM(tmem(start)),
                  KLONG(toff(start)), KMEM(tmem(dy)), KLONG(toff(dy)), KLONG(p->ldy), KMEM(tmem(dW)), KLONG(toff(dW)),
                  KLONG(p->ldw), KLONG(p->m), KLONG(p->n_table), KINT(p->k), KFLT(p->scale), KINT(p->accumulate != 0));
}

bool nf__cl_clip_grad_norm_supports(nf_backend * be, const nf_op * op) {
    return is_f32(&op->dst[0]) && is_f32(&op->dst[1]);
}

/* the block sums into the scratch buffer, their total (one work-item), the
 * scaling */
int nf__cl_clip_grad_norm(nf_backend * be, const nf_op * op, nf_err * err) {
    struct nf_cl * c = be->ctx;
    const struct nf_clip_grad_norm_params * p = &op->p.clip_grad_norm;
    const nf_tensor *g = &op->dst[0], *norm = &op->dst[1];
    const int64_t nb = (p->n + NF_CLIP_BLOCK - 1) / NF_CLIP_BLOCK;
    NF_TRY(
        nf__cl_ensure_scratch(c, (size_t) (nb > 0 ? nb : 1) * (c->fp64 ? sizeof(cl_double) : sizeof(cl_float)), err));
    const size_t l1[1] = {64};
    const size_t g1[1] = {(size_t) nb};
    NF_TRY(LAUNCH(c, K_CLIP_PART, 1, g1, l1, err, KMEM(tmem(g)), KLONG(toff(g)), KLONG(p->n), KLONG(nb),
                  KMEM(c->scratch)));
    const size_t one[1] = {1};
    NF_TRY(LAUNCH(c, K_CLIP_TOTAL, 1, one, one, err, KMEM(c->scratch), KLONG(nb), KMEM(tmem(norm)), KLONG(toff(norm))));
    const size_t g3[1] = {(size_t) p->n};
    return LAUNCH(c, K_CLIP_APPLY, 1, g3, l1, err, KMEM(tmem(g)), KLONG(toff(g)), KLONG(p->n), KMEM(tmem(norm)),
                  KLONG(toff(norm)), KFLT(p->max_norm));
}

bool nf__cl_scale_supports(nf_backend * be, const nf_op * op) { return is_f32(&op->src[0]) && is_f32(&op->dst[0]); }

int nf__cl_scale(nf_backend * be, const nf_op * op, nf_err * err) {
    struct nf_cl * c = be->ctx;
    const struct nf_scale_params * p = &op->p.scale;
    const nf_tensor *x = &op->src[0], *y = &op->dst[0];
    const size_t ls[1] = {64};
    const size_t gs[1] = {(size_t) p->n};
    return LAUNCH(c, K_SCALE, 1, gs, ls, err, KMEM(tmem(x)), KLONG(toff(x)), KMEM(tmem(y)), KLONG(toff(y)), KLONG(p->n),
                  KFLT(p->a), KINT(p->accumulate != 0));
}

bool nf__cl_dropout_supports(nf_backend * be, const nf_op * op) { return is_f32(&op->src[0]) && is_f32(&op->dst[0]); }

int nf__cl_dropout(nf_backend * be, const nf_op * op, nf_err * err) {
    struct nf_cl * c = be->ctx;
    const struct nf_dropout_params * p = &op->p.dropout;
    const nf_tensor *x = &op->src[0], *y = &op->dst[0];
    if (p->n <= 0) return NF_OK;
    const size_t ls[1] = {64};
    const size_t gs[1] = {(size_t) p->n};
    return LAUNCH(c, K_DROPOUT, 1, gs, ls, err, KMEM(tmem(x)), KLONG(toff(x)), KMEM(tmem(y)), KLONG(toff(y)),
                  KLONG(p->n), KLONG(p->seed), KINT(p->threshold), KFLT(p->scale), KINT(p->accumulate != 0));
}
