/*
 * opencl-ops.c -- the OpenCL backend's kernel launch, the per-op limits and
 * host launchers, and the kernel table (LINEAR, CONV1D and GEMM are in opencl-gemm.c).
 */
#define _POSIX_C_SOURCE 200809L
#include "opencl-impl.h"

#include <stdio.h>

/* ---- kernel launch ------------------------------------------------------------------ */

int nf__cl_launch(struct nf_cl * c, int kid, const struct karg * a, int na, cl_uint dims, const size_t * gws_in,
                  const size_t * lws, nf_err * err) {
    size_t gws[3];
    for (cl_uint d = 0; d < dims; d++) {
        if (gws_in[d] == 0) {
            return NF_OK; /* nothing to do */
        }
        gws[d] = gws_in[d];
        if (lws) {
            gws[d] = (gws[d] + lws[d] - 1) / lws[d] * lws[d];
        }
    }
    char what[96];
    for (int i = 0; i < na; i++) {
        cl_int rc = clSetKernelArg(c->k[kid], (cl_uint) i, a[i].size, a[i].ptr);
        if (rc != CL_SUCCESS) {
            return nf__err_set(err, NF_ERR_DEVICE, "%s: clSetKernelArg(%s, %d): %s (%d)", c->name, nf__cl_k_names[kid],
                               i, nf__cl_err_name(rc), (int) rc);
        }
    }
    snprintf(what, sizeof(what), "clEnqueueNDRangeKernel(%s)", nf__cl_k_names[kid]);
    cl_int rc = clEnqueueNDRangeKernel(c->queue, c->k[kid], dims, NULL, gws, lws, 0, NULL, NULL);
    if (rc != CL_SUCCESS) {
        return nf__err_set(err, cl_rc_code(rc), "%s: %s: %s (%d)", c->name, what, nf__cl_err_name(rc), (int) rc);
    }
    return NF_OK;
}

/* ---- per-op limits (kernel table .supports) ------------------------------------- */

/* per-op limits of the kernels below (the dispatcher has validated the op) */
static bool nf__cl_quantile_supports(nf_backend * be, const nf_op * op) {
    const struct nf_quantile_params * p = &op->p.quantile;
    if (op->n_src < 1 || op->n_dst < 1 || !is_f32(&op->src[0]) || !is_f32(&op->dst[0])) {
        return false;
    }
    const int64_t n = dim(&op->src[0], 0);
    return n >= 1 && n <= (1 << 24) && fits_int(cols(&op->src[0])) && p->nq >= 1 && p->q_denom >= 1;
}

static bool nf__cl_bucketize_norm_supports(nf_backend * be, const nf_op * op) {
    if (op->n_src < 3 || op->n_dst < 1 || !is_f32(&op->src[0]) || !is_f32(&op->src[2]) || !is_f32(&op->dst[0])) {
        return false;
    }
    const int64_t n_s = dim(&op->src[0], 0);
    if (n_s < 1 || !fits_int(n_s) || !fits_int(cols(&op->src[0])) || !fits_int(cols(&op->src[2]))) {
        return false;
    }
    if (op->n_src >= 2 && has_tensor(&op->src[1]) && nf__tensor_numel(&op->src[1]) > 0) {
        return op->n_dst >= 2 && is_f32(&op->src[1]) && is_f32(&op->dst[1]);
    }
    return true;
}

static bool nf__cl_embed_features_supports(nf_backend * be, const nf_op * op) {
    return op->n_src >= 3 && op->n_dst >= 1 && is_f32(&op->src[0]) && is_f32(&op->src[1]) && is_f32(&op->src[2]) &&
           is_f32(&op->dst[0]) && op->dst[0].ndim == 3 && fits_int(op->dst[0].ne[1]) && fits_int(op->dst[0].ne[2]);
}

static bool nf__cl_label_tokens_supports(nf_backend * be, const nf_op * op) {
    if (op->n_dst < 1 || !is_f32(&op->dst[0]) || op->dst[0].ndim != 3 || !fits_int(op->dst[0].ne[0]) ||
        !fits_int(op->dst[0].ne[1]) || !fits_int(op->dst[0].ne[2])) {
        return false;
    }
    switch (op->p.label_tokens.mode) {
        case NF_LABEL_CLASS:
            return op->n_src >= 2 && has_tensor(&op->src[0]) && op->src[0].type == NF_I32 && op->src[0].offs % 4 == 0 &&
                   is_f32(&op->src[1]) && fits_int(dim(&op->src[1], 0));
        case NF_LABEL_VALUE: return op->n_src >= 3 && is_f32(&op->src[0]) && is_f32(&op->src[1]) && is_f32(&op->src[2]);
        case NF_LABEL_MASK: return op->n_src >= 2 && is_f32(&op->src[1]);
        default: return false;
    }
}

static bool nf__cl_layer_norm_supports(nf_backend * be, const nf_op * op) {
    const struct nf_layer_norm_params * p = &op->p.layer_norm;
    return op->n_src >= 3 && op->n_dst >= 1 && is_f32(&op->src[0]) && is_f32(&op->src[1]) && is_f32(&op->src[2]) &&
           is_f32(&op->dst[0]) && p->k >= 1 && fits_int(p->k) && p->m >= 0;
}

static bool nf__cl_attention_supports(nf_backend * be, const nf_op * op) {
    struct nf_cl * c = be->ctx;
    const struct nf_attention_params * p = &op->p.attention;
    return op->n_src >= 3 && op->n_dst >= 1 && is_f32(&op->src[0]) && is_f32(&op->src[1]) && is_f32(&op->src[2]) &&
           is_f32(&op->dst[0]) && p->head_dim >= 1 && p->head_dim <= NF_CL_ATTNW_MAX_HD && p->lk >= 1 &&
           fits_int(p->lq) && fits_int(p->lk) && fits_int(p->n_heads) && fits_int(p->n_groups) &&
           c->kwg[p->head_dim <= NF_CL_ATTN_MAX_HD ? K_ATTENTION : K_ATTENTION_WIDE] >= NF_CL_ATTN_WG;
}

static bool nf__cl_batch_norm_supports(nf_backend * be, const nf_op * op) {
    const struct nf_batch_norm_params * p = &op->p.batch_norm;
    if (op->n_src < 5 || op->n_dst < 1 || !is_f32(&op->dst[0])) {
        return false;
    }
    for (int i = 0; i < 5; i++) {
        if (!is_f32(&op->src[i])) {
            return false;
        }
    }
    return fits_int(p->c) && p->m >= 0;
}

static bool nf__cl_fill_supports(nf_backend * be, const nf_op * op) {
    const struct nf_fill_params * p = &op->p.fill;
    return op->n_dst >= 1 && is_f32(&op->dst[0]) && fits_int(p->m) && fits_int(p->k);
}

static bool nf__cl_axial_pos_supports(nf_backend * be, const nf_op * op) {
    const struct nf_axial_pos_params * p = &op->p.axial_pos;
    return op->n_src >= 2 && op->n_dst >= 1 && is_f32(&op->src[0]) && is_f32(&op->src[1]) && is_f32(&op->dst[0]) &&
           fits_int(p->dim);
}

static bool is_i32(const nf_tensor * t) { return has_tensor(t) && t->type == NF_I32 && t->offs % sizeof(int32_t) == 0; }

static bool nf__cl_gather_rows_supports(nf_backend * be, const nf_op * op) {
    const struct nf_gather_rows_params * p = &op->p.gather_rows;
    return op->n_src >= 2 && op->n_dst >= 1 && is_i32(&op->src[0]) && is_f32(&op->src[1]) && is_f32(&op->dst[0]) &&
           fits_int(p->k) && p->m >= 0;
}

static bool nf__cl_bucket_route_supports(nf_backend * be, const nf_op * op) {
    const struct nf_bucket_route_params * p = &op->p.bucket_route;
    return op->n_src >= 2 && op->n_dst >= 2 && is_f32(&op->src[0]) && is_f32(&op->src[1]) && is_i32(&op->dst[0]) &&
           is_f32(&op->dst[1]) && fits_int(p->n_buckets) && fits_int(p->bucket) && fits_int(p->head_dim) &&
           fits_int(p->n_heads) && fits_int(2 * p->n_seq * p->n_heads);
}

static bool nf__cl_bucket_gather_supports(nf_backend * be, const nf_op * op) {
    const struct nf_bucket_gather_params * p = &op->p.bucket_gather;
    return op->n_src >= 4 && op->n_dst >= 2 && is_f32(&op->src[0]) && is_f32(&op->src[1]) && is_i32(&op->src[2]) &&
           is_f32(&op->src[3]) && is_f32(&op->dst[0]) && is_f32(&op->dst[1]) && fits_int(p->n_buckets) &&
           fits_int(2 * p->bucket) && fits_int(p->n_heads * p->head_dim) && fits_int(p->n_seq * p->n_buckets);
}

/* ---- compute ------------------------------------------------------------------------ */

static int nf__cl_quantile(nf_backend * be, const nf_op * op, nf_err * err) {
    struct nf_cl * c = be->ctx;
    const nf_tensor * x = &op->src[0];
    const nf_tensor * B = &op->dst[0];
    const int64_t n = dim(x, 0);
    const int64_t F = cols(x);
    size_t P = 1;
    while ((int64_t) P < n) {
        P *= 2;
    }
    NF_TRY(nf__cl_ensure_scratch(c, (size_t) F * P * sizeof(float), err));
    size_t wg = c->sort_wg;
    if (wg > P / 2) {
        wg = P / 2 > 0 ? P / 2 : 1;
    }
    const size_t gs[1] = {(size_t) F * wg};
    const size_t ls[1] = {wg};
    NF_TRY(LAUNCH(c, K_QUANTILE_SORT, 1, gs, ls, err, KMEM(tmem(x)), KLONG(toff(x)), KINT(n), KINT(F), KMEM(c->scratch),
                  KINT(P)));
    const size_t gi[2] = {(size_t) op->p.quantile.nq, (size_t) F};
    return LAUNCH(c, K_QUANTILE_INTERP, 2, gi, NULL, err, KMEM(c->scratch), KINT(P), KINT(n), KINT(op->p.quantile.nq),
                  KINT(op->p.quantile.q_denom), KINT(F), KMEM(tmem(B)), KLONG(toff(B)));
}

static int nf__cl_bucketize_norm(nf_backend * be, const nf_op * op, nf_err * err) {
    struct nf_cl * c = be->ctx;
    const nf_tensor * xs = &op->src[0];
    const nf_tensor * xq = &op->src[1];
    const nf_tensor * B = &op->src[2];
    const nf_tensor * zs = &op->dst[0];
    const nf_tensor * zq = &op->dst[1];
    const int64_t n_s = dim(xs, 0);
    const int64_t F = cols(xs);
    const int64_t nb = cols(B);
    const int has_q = has_tensor(xq) && nf__tensor_numel(xq) > 0 && op->n_dst >= 2 && has_tensor(zq);
    const int64_t n_q = has_q ? dim(xq, 0) : 0;
    const size_t l1[1] = {64};

    NF_TRY(nf__cl_ensure_scratch(c, (size_t) F * 2 * sizeof(float), err));
    const size_t g_s[1] = {(size_t) (n_s * F)};
    NF_TRY(LAUNCH(c, K_BUCKETIZE_U, 1, g_s, l1, err, KMEM(tmem(xs)), KLONG(toff(xs)), KLONG(n_s * F), KINT(F),
                  KMEM(tmem(B)), KLONG(toff(B)), KINT(nb), KINT(n_s), KMEM(tmem(zs)), KLONG(toff(zs))));
    if (has_q) {
        const size_t g_q[1] = {(size_t) (n_q * F)};
        NF_TRY(LAUNCH(c, K_BUCKETIZE_U, 1, g_q, l1, err, KMEM(tmem(xq)), KLONG(toff(xq)), KLONG(n_q * F), KINT(F),
                      KMEM(tmem(B)), KLONG(toff(B)), KINT(nb), KINT(n_s), KMEM(tmem(zq)), KLONG(toff(zq))));
    }
    const size_t g_f[1] = {(size_t) F};
    NF_TRY(LAUNCH(c, K_BUCKETIZE_STATS, 1, g_f, NULL, err, KMEM(tmem(zs)), KLONG(toff(zs)), KINT(n_s), KINT(F),
                  KMEM(c->scratch)));
    NF_TRY(LAUNCH(c, K_BUCKETIZE_Z, 1, g_s, l1, err, KMEM(tmem(zs)), KLONG(toff(zs)), KLONG(n_s * F), KINT(F),
                  KMEM(c->scratch)));
    if (has_q) {
        const size_t g_q[1] = {(size_t) (n_q * F)};
        NF_TRY(LAUNCH(c, K_BUCKETIZE_Z, 1, g_q, l1, err, KMEM(tmem(zq)), KLONG(toff(zq)), KLONG(n_q * F), KINT(F),
                      KMEM(c->scratch)));
    }
    return NF_OK;
}

int nf__cl_embed_features_r(nf_backend * be, const nf_op * op, int bf16, nf_err * err) {
    struct nf_cl * c = be->ctx;
    const nf_tensor * z = &op->src[0];
    const nf_tensor * w = &op->src[1];
    const nf_tensor * b = &op->src[2];
    const nf_tensor * tok = &op->dst[0];
    const int64_t n = dim(z, 0), F = dim(z, 1), D = tok->ne[2];
    const int64_t T = F + 1;
    const size_t ls[2] = {D >= 64 ? 64 : (size_t) D, 1};
    const size_t gs[2] = {(size_t) D, (size_t) (n * F)};
    return LAUNCH(c, K_EMBED_FEATURES, 2, gs, ls, err, KMEM(tmem(z)), KLONG(toff(z)), KMEM(tmem(w)), KLONG(toff(w)),
                  KMEM(tmem(b)), KLONG(toff(b)), KMEM(tmem(tok)), KLONG(toff(tok)), KLONG(n * F), KINT(F), KINT(T),
                  KINT(D), KINT(bf16));
}

static int nf__cl_embed_features(nf_backend * be, const nf_op * op, nf_err * err) {
    return nf__cl_embed_features_r(be, op, 0, err);
}

int nf__cl_label_tokens_r(nf_backend * be, const nf_op * op, int bf16, nf_err * err) {
    struct nf_cl * c = be->ctx;
    const nf_tensor * tok = &op->dst[0];
    const int64_t n = tok->ne[0], T = tok->ne[1], D = tok->ne[2];
    const size_t ls[2] = {D >= 64 ? 64 : (size_t) D, 1};
    const size_t gs[2] = {(size_t) D, (size_t) n};
    switch (op->p.label_tokens.mode) {
        case NF_LABEL_CLASS: {
            const nf_tensor * y = &op->src[0];
            const nf_tensor * E = &op->src[1];
            return LAUNCH(c, K_LABEL_CLASS, 2, gs, ls, err, KMEM(tmem(y)), KLONG(toff(y)), KMEM(tmem(E)),
                          KLONG(toff(E)), KINT(dim(E, 0)), KMEM(tmem(tok)), KLONG(toff(tok)), KINT(n), KINT(T),
                          KINT(D));
        }
        case NF_LABEL_VALUE: {
            const nf_tensor * y = &op->src[0];
            const nf_tensor * w = &op->src[1];
            const nf_tensor * b = &op->src[2];
            return LAUNCH(c, K_LABEL_VALUE, 2, gs, ls, err, KMEM(tmem(y)), KLONG(toff(y)), KMEM(tmem(w)),
                          KLONG(toff(w)), KMEM(tmem(b)), KLONG(toff(b)), KMEM(tmem(tok)), KLONG(toff(tok)), KINT(n),
                          KINT(T), KINT(D), KINT(bf16));
        }
        case NF_LABEL_MASK: {
            const nf_tensor * M = &op->src[1];
            return LAUNCH(c, K_LABEL_MASK, 2, gs, ls, err, KMEM(tmem(M)), KLONG(toff(M)), KMEM(tmem(tok)),
                          KLONG(toff(tok)), KINT(n), KINT(T), KINT(D));
        }
        default:
            return nf__err_set(err, NF_ERR_UNSUPPORTED, "%s: LABEL_TOKENS mode %d", c->name,
                               (int) op->p.label_tokens.mode);
    }
}

static int nf__cl_label_tokens(nf_backend * be, const nf_op * op, nf_err * err) {
    return nf__cl_label_tokens_r(be, op, 0, err);
}

static int nf__cl_layer_norm(nf_backend * be, const nf_op * op, nf_err * err) {
    struct nf_cl * c = be->ctx;
    const nf_tensor * x = &op->src[0];
    const nf_tensor * g = &op->src[1];
    const nf_tensor * b = &op->src[2];
    const nf_tensor * y = &op->dst[0];
    const struct nf_layer_norm_params * p = &op->p.layer_norm;
    const size_t ls[1] = {c->ln_wg};
    const size_t gs[1] = {(size_t) p->m * c->ln_wg};
    return LAUNCH(c, K_LAYER_NORM, 1, gs, ls, err, KMEM(tmem(x)), KLONG(toff(x)), KLONG(p->ldx), KMEM(tmem(g)),
                  KLONG(toff(g)), KMEM(tmem(b)), KLONG(toff(b)), KMEM(tmem(y)), KLONG(toff(y)), KLONG(p->ldy),
                  KINT(p->k), KFLT(p->eps), KLOCAL(c->ln_wg * (c->fp64 ? sizeof(cl_double) : sizeof(cl_float))));
}

static int nf__cl_attention(nf_backend * be, const nf_op * op, nf_err * err) {
    struct nf_cl * c = be->ctx;
    const nf_tensor * q = &op->src[0];
    const nf_tensor * k = &op->src[1];
    const nf_tensor * v = &op->src[2];
    const nf_tensor * o = &op->dst[0];
    const struct nf_attention_params * p = &op->p.attention;
    const int wide = p->head_dim > NF_CL_ATTN_MAX_HD;
    const size_t rows = wide ? NF_CL_ATTNW_ROWS : NF_CL_ATTN_ROWS;
    const size_t ls[3] = {NF_CL_ATTN_WG, 1, 1};
    const size_t gs[3] = {((size_t) p->lq + rows - 1) / rows * NF_CL_ATTN_WG, (size_t) p->n_heads,
                          (size_t) p->n_groups};
    return LAUNCH(c, wide ? K_ATTENTION_WIDE : K_ATTENTION, 3, gs, ls, err, KMEM(tmem(q)), KLONG(toff(q)),
                  KMEM(tmem(k)), KLONG(toff(k)), KMEM(tmem(v)), KLONG(toff(v)), KMEM(tmem(o)), KLONG(toff(o)),
                  KINT(p->lq), KINT(p->lk), KINT(p->head_dim), KLONG(p->q_gs), KLONG(p->q_ss), KLONG(p->kv_gs),
                  KLONG(p->kv_ss), KLONG(p->o_gs), KLONG(p->o_ss), KFLT(p->scale), KLONG(p->drop_seed),
                  KINT(p->drop_threshold), KFLT(p->drop_scale));
}

int nf__cl_batch_norm_r(nf_backend * be, const nf_op * op, int bf16, nf_err * err) {
    struct nf_cl * c = be->ctx;
    const nf_tensor * x = &op->src[0];
    const nf_tensor * w = &op->src[1];
    const nf_tensor * b = &op->src[2];
    const nf_tensor * mean = &op->src[3];
    const nf_tensor * var = &op->src[4];
    const nf_tensor * y = &op->dst[0];
    const struct nf_batch_norm_params * p = &op->p.batch_norm;
    const size_t ls[2] = {p->c >= 64 ? 64 : (size_t) p->c, 1};
    const size_t gs[2] = {(size_t) p->c, ((size_t) p->m + NF_CL_BN_ROWS - 1) / NF_CL_BN_ROWS};
    return LAUNCH(c, K_BATCH_NORM, 2, gs, ls, err, KMEM(tmem(x)), KLONG(toff(x)), KLONG(p->ldx), KMEM(tmem(w)),
                  KLONG(toff(w)), KMEM(tmem(b)), KLONG(toff(b)), KMEM(tmem(mean)), KLONG(toff(mean)), KMEM(tmem(var)),
                  KLONG(toff(var)), KMEM(tmem(y)), KLONG(toff(y)), KLONG(p->ldy), KLONG(p->m), KINT(p->c), KFLT(p->eps),
                  KINT(p->relu != 0), KINT(bf16));
}

static int nf__cl_batch_norm(nf_backend * be, const nf_op * op, nf_err * err) {
    return nf__cl_batch_norm_r(be, op, 0, err);
}

static int nf__cl_fill(nf_backend * be, const nf_op * op, nf_err * err) {
    struct nf_cl * c = be->ctx;
    const nf_tensor * y = &op->dst[0];
    const struct nf_fill_params * p = &op->p.fill;
    const size_t ls[2] = {p->k >= 64 ? 64 : (size_t) p->k, 1};
    const size_t gs[2] = {(size_t) p->k, (size_t) p->m};
    return LAUNCH(c, K_FILL, 2, gs, ls, err, KMEM(tmem(y)), KLONG(toff(y)), KLONG(p->ld), KINT(p->m), KINT(p->k),
                  KFLT(p->value));
}

static int nf__cl_gather_rows(nf_backend * be, const nf_op * op, nf_err * err) {
    struct nf_cl * c = be->ctx;
    const nf_tensor * idx = &op->src[0];
    const nf_tensor * W = &op->src[1];
    const nf_tensor * y = &op->dst[0];
    const struct nf_gather_rows_params * p = &op->p.gather_rows;
    if (p->m == 0) {
        return NF_OK;
    }
    const size_t ls[2] = {p->k >= 64 ? 64 : (size_t) p->k, 1};
    const size_t gs[2] = {((size_t) p->k + ls[0] - 1) / ls[0] * ls[0], (size_t) p->m};
    return LAUNCH(c, K_GATHER_ROWS, 2, gs, ls, err, KMEM(tmem(idx)), KLONG(toff(idx)), KMEM(tmem(W)), KLONG(toff(W)),
                  KLONG(p->ldw), KLONG(p->n_table), KMEM(tmem(y)), KLONG(toff(y)), KLONG(p->ldy), KLONG(p->m),
                  KINT(p->k), KFLT(p->scale), KINT(p->accumulate != 0));
}

int nf__cl_axial_pos_r(nf_backend * be, const nf_op * op, int bf16, nf_err * err) {
    struct nf_cl * c = be->ctx;
    const nf_tensor * e0 = &op->src[0];
    const nf_tensor * e1 = &op->src[1];
    const nf_tensor * x = &op->dst[0];
    const struct nf_axial_pos_params * p = &op->p.axial_pos;
    const int64_t n_rows = p->n_seq * p->len;
    const size_t ls[2] = {p->dim >= 64 ? 64 : (size_t) p->dim, 1};
    const size_t gs[2] = {(size_t) p->dim, (size_t) n_rows};
    return LAUNCH(c, K_AXIAL_POS, 2, gs, ls, err, KMEM(tmem(e0)), KLONG(toff(e0)), KMEM(tmem(e1)), KLONG(toff(e1)),
                  KMEM(tmem(x)), KLONG(toff(x)), KLONG(p->ld), KLONG(p->gs), KLONG(n_rows), KLONG(p->len), KLONG(p->n1),
                  KINT(p->dim), KINT(bf16));
}

static int nf__cl_axial_pos(nf_backend * be, const nf_op * op, nf_err * err) {
    return nf__cl_axial_pos_r(be, op, 0, err);
}

/* bucket means of q and k into scratch (2*SH, nb, E), then one work-item per
 * (sequence, head, bucket) for its score row (scratch, after the means) and
 * softmax */
int nf__cl_bucket_route_r(nf_backend * be, const nf_op * op, int bf16, nf_err * err) {
    struct nf_cl * c = be->ctx;
    const nf_tensor * q = &op->src[0];
    const nf_tensor * k = &op->src[1];
    const nf_tensor * sel = &op->dst[0];
    const nf_tensor * prob = &op->dst[1];
    const struct nf_bucket_route_params * p = &op->p.bucket_route;
    const size_t SH = (size_t) (p->n_seq * p->n_heads), nb = (size_t) p->n_buckets, E = (size_t) p->head_dim;
    if (SH == 0) {
        return NF_OK;
    }
    const size_t r_off = 2 * SH * nb * E;
    NF_TRY(nf__cl_ensure_scratch(c, (r_off + SH * nb * nb) * sizeof(float), err));
    const size_t lm[3] = {E >= 64 ? 64 : E, 1, 1};
    const size_t gm[3] = {E, nb, 2 * SH};
    NF_TRY(LAUNCH(c, bf16 ? K_BF16_BUCKET_MEANS : K_BUCKET_MEANS, 3, gm, lm, err, KMEM(tmem(q)), KLONG(toff(q)),
                  KLONG(p->q_ss), KLONG(p->q_gs), KMEM(tmem(k)), KLONG(toff(k)), KLONG(p->k_ss), KLONG(p->k_gs),
                  KMEM(c->scratch), KINT(nb), KINT(p->bucket), KINT(p->n_heads), KINT(E), KINT(SH)));
    const size_t lr[2] = {nb >= 64 ? 64 : nb, 1};
    const size_t gr[2] = {nb, SH};
    return LAUNCH(c, bf16 ? K_BF16_BUCKET_ROUTE : K_BUCKET_ROUTE, 2, gr, lr, err, KMEM(c->scratch), KMEM(c->scratch),
                  KLONG(r_off), KINT(nb), KINT(E), KINT(SH), KFLT(p->scale), KMEM(tmem(sel)), KLONG(toff(sel)),
                  KMEM(tmem(prob)), KLONG(toff(prob)));
}

static int nf__cl_bucket_route(nf_backend * be, const nf_op * op, nf_err * err) {
    return nf__cl_bucket_route_r(be, op, 0, err);
}

int nf__cl_bucket_gather_r(nf_backend * be, const nf_op * op, int bf16, nf_err * err) {
    struct nf_cl * c = be->ctx;
    const nf_tensor * k = &op->src[0];
    const nf_tensor * v = &op->src[1];
    const nf_tensor * sel = &op->src[2];
    const nf_tensor * prob = &op->src[3];
    const nf_tensor * kc = &op->dst[0];
    const nf_tensor * vc = &op->dst[1];
    const struct nf_bucket_gather_params * p = &op->p.bucket_gather;
    const size_t W = (size_t) (p->n_heads * p->head_dim), n_su = (size_t) (p->n_seq * p->n_buckets);
    const size_t ls[3] = {W >= 64 ? 64 : W, 1, 1};
    const size_t gs[3] = {W, (size_t) (2 * p->bucket), n_su};
    return LAUNCH(c, bf16 ? K_BF16_BUCKET_GATHER : K_BUCKET_GATHER, 3, gs, ls, err, KMEM(tmem(k)), KLONG(toff(k)),
                  KMEM(tmem(v)), KLONG(toff(v)), KMEM(tmem(sel)), KLONG(toff(sel)), KMEM(tmem(prob)), KLONG(toff(prob)),
                  KMEM(tmem(kc)), KLONG(toff(kc)), KMEM(tmem(vc)), KLONG(toff(vc)), KLONG(p->kv_ss), KLONG(p->kv_gs),
                  KINT(p->n_buckets), KINT(p->bucket), KINT(p->n_heads), KINT(p->head_dim), KINT(p->reuse_keys != 0),
                  KINT(n_su));
}

static int nf__cl_bucket_gather(nf_backend * be, const nf_op * op, nf_err * err) {
    return nf__cl_bucket_gather_r(be, op, 0, err);
}

/* ---- the training ops, set A (GEMM: opencl-gemm.c) ------------------------------------ */

static bool nf__cl_col_sum_supports(nf_backend * be, const nf_op * op) {
    return is_f32(&op->src[0]) && is_f32(&op->dst[0]) && fits_int(op->p.col_sum.n);
}

static int nf__cl_col_sum(nf_backend * be, const nf_op * op, nf_err * err) {
    struct nf_cl * c = be->ctx;
    const nf_tensor * x = &op->src[0];
    const nf_tensor * y = &op->dst[0];
    const struct nf_col_sum_params * p = &op->p.col_sum;
    const size_t ls[1] = {64};
    const size_t gs[1] = {(size_t) p->n};
    return LAUNCH(c, K_COL_SUM, 1, gs, ls, err, KMEM(tmem(x)), KLONG(toff(x)), KLONG(p->ldx), KMEM(tmem(y)),
                  KLONG(toff(y)), KLONG(p->m), KINT(p->n), KINT(p->accumulate != 0));
}

static bool nf__cl_act_supports(nf_backend * be, const nf_op * op) {
    return is_f32(&op->src[0]) && is_f32(&op->dst[0]);
}

static int nf__cl_act(nf_backend * be, const nf_op * op, nf_err * err) {
    struct nf_cl * c = be->ctx;
    const nf_tensor * x = &op->src[0];
    const nf_tensor * y = &op->dst[0];
    const size_t ls[1] = {64};
    const size_t gs[1] = {(size_t) op->p.act.n};
    return LAUNCH(c, K_ACT, 1, gs, ls, err, KMEM(tmem(x)), KLONG(toff(x)), KMEM(tmem(y)), KLONG(toff(y)),
                  KLONG(op->p.act.n), KINT(op->p.act.act == NF_ACT_GELU ? 1 : 2));
}

static bool nf__cl_act_backward_supports(nf_backend * be, const nf_op * op) {
    return is_f32(&op->src[0]) && is_f32(&op->src[1]) && is_f32(&op->dst[0]);
}

static int nf__cl_act_backward(nf_backend * be, const nf_op * op, nf_err * err) {
    struct nf_cl * c = be->ctx;
    const nf_tensor * x = &op->src[0];
    const nf_tensor * dy = &op->src[1];
    const nf_tensor * dx = &op->dst[0];
    const struct nf_act_backward_params * p = &op->p.act_backward;
    const size_t ls[1] = {64};
    const size_t gs[1] = {(size_t) p->n};
    return LAUNCH(c, K_ACT_BACKWARD, 1, gs, ls, err, KMEM(tmem(x)), KLONG(toff(x)), KMEM(tmem(dy)), KLONG(toff(dy)),
                  KMEM(tmem(dx)), KLONG(toff(dx)), KLONG(p->n), KINT(p->act == NF_ACT_GELU ? 1 : 2));
}

static bool nf__cl_layer_norm_backward_supports(nf_backend * be, const nf_op * op) {
    const struct nf_layer_norm_backward_params * p = &op->p.layer_norm_backward;
    for (int i = 0; i < 3; i++) {
        if (!is_f32(&op->src[i]) || !is_f32(&op->dst[i])) {
            return false;
        }
    }
    return p->k >= 1 && fits_int(p->k) && p->m >= 0;
}

/* pass 1 (a work-group per row, LAYER_NORM's): mu, rstd into scratch and dx;
 * pass 2 (a work-item per column): dg, db */
static int nf__cl_layer_norm_backward(nf_backend * be, const nf_op * op, nf_err * err) {
    struct nf_cl * c = be->ctx;
    const nf_tensor * x = &op->src[0];
    const nf_tensor * g = &op->src[1];
    const nf_tensor * dy = &op->src[2];
    const nf_tensor * dx = &op->dst[0];
    const nf_tensor * dg = &op->dst[1];
    const nf_tensor * db = &op->dst[2];
    const struct nf_layer_norm_backward_params * p = &op->p.layer_norm_backward;
    if (p->m == 0) {
        return NF_OK;
    }
    NF_TRY(nf__cl_ensure_scratch(c, 2 * (size_t) p->m * sizeof(float), err));
    const size_t ls[1] = {c->ln_wg};
    const size_t gs[1] = {(size_t) p->m * c->ln_wg};
    NF_TRY(LAUNCH(c, K_LN_BACKWARD_ROWS, 1, gs, ls, err, KMEM(tmem(x)), KLONG(toff(x)), KLONG(p->ldx), KMEM(tmem(g)),
                  KLONG(toff(g)), KMEM(tmem(dy)), KLONG(toff(dy)), KLONG(p->lddy), KMEM(tmem(dx)), KLONG(toff(dx)),
                  KLONG(p->lddx), KMEM(c->scratch), KINT(p->k), KFLT(p->eps), KINT(p->accumulate != 0),
                  KLOCAL(c->ln_wg * (c->fp64 ? sizeof(cl_double) : sizeof(cl_float)))));
    const size_t lc[1] = {64};
    const size_t gc[1] = {(size_t) p->k};
    return LAUNCH(c, K_LN_BACKWARD_COLS, 1, gc, lc, err, KMEM(tmem(x)), KLONG(toff(x)), KLONG(p->ldx), KMEM(tmem(dy)),
                  KLONG(toff(dy)), KLONG(p->lddy), KMEM(c->scratch), KMEM(tmem(dg)), KLONG(toff(dg)), KMEM(tmem(db)),
                  KLONG(toff(db)), KLONG(p->m), KINT(p->k));
}

static bool nf__cl_adamw_supports(nf_backend * be, const nf_op * op) {
    return is_f32(&op->src[0]) && is_f32(&op->dst[0]) && is_f32(&op->dst[1]) && is_f32(&op->dst[2]);
}

static int nf__cl_adamw(nf_backend * be, const nf_op * op, nf_err * err) {
    struct nf_cl * c = be->ctx;
    const nf_tensor * g = &op->src[0];
    const nf_tensor * pp = &op->dst[0];
    const nf_tensor * m = &op->dst[1];
    const nf_tensor * v = &op->dst[2];
    const struct nf_adamw_params * p = &op->p.adamw;
    const size_t ls[1] = {64};
    const size_t gs[1] = {(size_t) p->n};
    return LAUNCH(c, K_ADAMW, 1, gs, ls, err, KMEM(tmem(g)), KLONG(toff(g)), KMEM(tmem(pp)), KLONG(toff(pp)),
                  KMEM(tmem(m)), KLONG(toff(m)), KMEM(tmem(v)), KLONG(toff(v)), KLONG(p->n), KFLT(p->decay),
                  KFLT(p->w1), KFLT(p->b2), KFLT(p->c2), KFLT(p->bc2s), KFLT(p->eps), KFLT(p->s));
}

static bool nf__cl_copy_supports(nf_backend * be, const nf_op * op) {
    return is_f32(&op->src[0]) && is_f32(&op->dst[0]);
}

static int nf__cl_copy(nf_backend * be, const nf_op * op, nf_err * err) {
    struct nf_cl * c = be->ctx;
    const nf_tensor * x = &op->src[0];
    const nf_tensor * y = &op->dst[0];
    const size_t ls[1] = {64};
    const size_t gs[1] = {(size_t) op->p.copy.n};
    return LAUNCH(c, K_COPY, 1, gs, ls, err, KMEM(tmem(x)), KLONG(toff(x)), KMEM(tmem(y)), KLONG(toff(y)),
                  KLONG(op->p.copy.n));
}

/* ---- the kernel table (nf-ops.def; nf-impl.h, NF_KERNEL_ENTRY) ---------------------- */

/* the ops this backend lacks (NF_ERR_UNSUPPORTED), one line each:
 *   #define NF_CL_LACKS_<NAME> NF_KERNEL_LACKS
 * none: every op has a kernel nf__cl_<name> and its limits nf__cl_<name>_supports */

const struct nf_kernel nf__cl_kernels[NF_OP_COUNT] = {
#define NF_OP(NAME, name, SRC, DST, PARAMS, validate, flops) \
    [NF_OP_##NAME] = NF_KERNEL_ENTRY(NF_CL_LACKS_##NAME, nf__cl_##name, nf__cl_##name##_supports),
#include "nf-ops.def"
};
