/* op-table.c -- the op table (nf-ops.def): each op's validator and FLOP
 * count, and the table the dispatcher, the trace and the tests read. */
#include "nf-impl.h"

#include <math.h>
#include <stdarg.h>

/* each op's validator and FLOP function, as named in nf-ops.def; the
 * generic ones (nf__validate_elementwise, nf__flops_zero,
 * nf__flops_elementwise) serve any op they fit */
int nf__validate_elementwise(nf_backend * be, const nf_op * op, nf_err * err);
double nf__flops_elementwise(const nf_op * op);
#define NF_OP(NAME, name, SRC, DST, PARAMS, validate, flops)       \
    int validate(nf_backend * be, const nf_op * op, nf_err * err); \
    double flops(const nf_op * op);
#include "nf-ops.def"

#define NF__OPERR(code, ...) nf__op_err(err, op, be, code, __VA_ARGS__)

static int64_t nf__extent(int64_t rows, int64_t ld, int64_t width) { return rows <= 0 ? 0 : (rows - 1) * ld + width; }

static int nf__check_extent(nf_err * err, const nf_op * op, const nf_backend * be, const nf_tensor * t,
                            const char * role, int64_t need) {
    int64_t have = nf__tensor_numel(t);
    if (need > have) {
        return NF__OPERR(NF_ERR_SHAPE, "%s '%s' has %lld elements, the op reads/writes %lld", role,
                         t->name ? t->name : "?", (long long) have, (long long) need);
    }
    return NF_OK;
}

static int nf__shape_is(const nf_tensor * t, int ndim, int64_t a, int64_t b, int64_t c) {
    if (t->ndim != ndim) return 0;
    if (ndim >= 1 && t->ne[0] != a) return 0;
    if (ndim >= 2 && t->ne[1] != b) return 0;
    if (ndim >= 3 && t->ne[2] != c) return 0;
    return 1;
}

/* ---- validators: shapes, params and strided extents (counts, placement and
 * dtypes of the operand specs are checked before, by nf__op_check) ---------- */

int nf__validate_quantile(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_quantile_params * p = &op->p.quantile;
    const nf_tensor *s = op->src, *d = op->dst;
    if (s[0].ndim != 2) return NF__OPERR(NF_ERR_ARG, "expects x (n, F) -> B (F, nq)");
    if (p->nq < 1 || p->q_denom < 1) return NF__OPERR(NF_ERR_ARG, "bad quantile count");
    if (s[0].ne[0] < 1) return NF__OPERR(NF_ERR_SHAPE, "quantile of an empty column");
    if (!nf__shape_is(&d[0], 2, s[0].ne[1], p->nq, 0)) return NF__OPERR(NF_ERR_SHAPE, "B must be (F, nq)");
    return NF_OK;
}

int nf__validate_bucketize_norm(nf_backend * be, const nf_op * op, nf_err * err) {
    const nf_tensor *s = op->src, *d = op->dst;
    int64_t F = s[0].ne[1];
    if (s[0].ndim != 2 || s[0].ne[0] < 1) return NF__OPERR(NF_ERR_SHAPE, "xs must be (n_s>=1, F)");
    if (s[1].ndim != 2 || s[1].ne[1] != F) return NF__OPERR(NF_ERR_SHAPE, "xq must be (n_q, F)");
    if (s[2].ndim != 2 || s[2].ne[0] != F) return NF__OPERR(NF_ERR_SHAPE, "B must be (F, nb)");
    if (!nf__shape_is(&d[0], 2, s[0].ne[0], F, 0) || !nf__shape_is(&d[1], 2, s[1].ne[0], F, 0)) {
        return NF__OPERR(NF_ERR_SHAPE, "zs/zq must match xs/xq");
    }
    return NF_OK;
}

int nf__validate_embed_features(nf_backend * be, const nf_op * op, nf_err * err) {
    const nf_tensor *s = op->src, *d = op->dst;
    int64_t n = s[0].ne[0], F = s[0].ne[1], D = d[0].ne[2];
    if (s[0].ndim != 2 || !nf__shape_is(&d[0], 3, n, F + 1, D))
        return NF__OPERR(NF_ERR_SHAPE, "tok must be (n, F+1, D)");
    NF_TRY(nf__check_extent(err, op, be, &s[1], "w", D));
    NF_TRY(nf__check_extent(err, op, be, &s[2], "b", D));
    return NF_OK;
}

int nf__validate_label_tokens(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_label_tokens_params * p = &op->p.label_tokens;
    const nf_tensor *s = op->src, *d = op->dst;
    if (d[0].ndim != 3) return NF__OPERR(NF_ERR_ARG, "expects tok (n, T, D)");
    int64_t n = d[0].ne[0], D = d[0].ne[2];
    if (p->mode != NF_LABEL_MASK && !s[0].buf) return NF__OPERR(NF_ERR_ARG, "src[0] has no buffer");
    if (p->mode == NF_LABEL_CLASS) {
        if (op->n_src != 2 || s[0].type != NF_I32) return NF__OPERR(NF_ERR_ARG, "class mode expects y (i32), E");
        NF_TRY(nf__check_extent(err, op, be, &s[0], "y", n));
        if (s[1].ndim != 2 || s[1].ne[1] != D) return NF__OPERR(NF_ERR_SHAPE, "E must be (C, D)");
    } else if (p->mode == NF_LABEL_VALUE) {
        if (op->n_src != 3 || s[0].type != NF_F32) return NF__OPERR(NF_ERR_ARG, "value mode expects y (f32), w, b");
        NF_TRY(nf__check_extent(err, op, be, &s[0], "y", n));
        NF_TRY(nf__check_extent(err, op, be, &s[1], "w", D));
        NF_TRY(nf__check_extent(err, op, be, &s[2], "b", D));
    } else if (p->mode == NF_LABEL_MASK) {
        if (op->n_src != 2) return NF__OPERR(NF_ERR_ARG, "mask mode expects (unused), M");
        NF_TRY(nf__check_extent(err, op, be, &s[1], "M", D));
    } else {
        return NF__OPERR(NF_ERR_ARG, "unknown label mode %d", p->mode);
    }
    return NF_OK;
}

int nf__validate_layer_norm(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_layer_norm_params * p = &op->p.layer_norm;
    const nf_tensor *s = op->src, *d = op->dst;
    if (p->k < 1 || p->ldx < p->k || p->ldy < p->k) return NF__OPERR(NF_ERR_ARG, "bad k/ldx/ldy");
    NF_TRY(nf__check_extent(err, op, be, &s[0], "x", nf__extent(p->m, p->ldx, p->k)));
    NF_TRY(nf__check_extent(err, op, be, &s[1], "g", p->k));
    NF_TRY(nf__check_extent(err, op, be, &s[2], "b", p->k));
    NF_TRY(nf__check_extent(err, op, be, &d[0], "y", nf__extent(p->m, p->ldy, p->k)));
    return NF_OK;
}

int nf__validate_linear(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_linear_params * p = &op->p.linear;
    const nf_tensor *s = op->src, *d = op->dst;
    if (p->k < 1 || p->n < 1 || p->ldx < p->k || p->ldy < p->n) return NF__OPERR(NF_ERR_ARG, "bad k/n/ldx/ldy");
    if (p->act != NF_ACT_NONE && p->act != NF_ACT_GELU && p->act != NF_ACT_RELU)
        return NF__OPERR(NF_ERR_ARG, "unknown activation %d", (int) p->act);
    if (s[1].ndim != 2 || s[1].ne[0] != p->n || s[1].ne[1] != p->k) {
        return NF__OPERR(NF_ERR_SHAPE, "W '%s' must be (%lld, %lld)", s[1].name ? s[1].name : "?", (long long) p->n,
                         (long long) p->k);
    }
    NF_TRY(nf__check_extent(err, op, be, &s[0], "x", nf__extent(p->m, p->ldx, p->k)));
    if (op->n_src == 3) NF_TRY(nf__check_extent(err, op, be, &s[2], "bias", p->n));
    NF_TRY(nf__check_extent(err, op, be, &d[0], "y", nf__extent(p->m, p->ldy, p->n)));
    return NF_OK;
}

/* ATTENTION's / ATTENTION_BACKWARD's dropout: a threshold of DROPOUT's range, a finite scale; not under
 * bf16-autocast (its attention kernels take no mask) */
static int nf__validate_attn_drop(nf_backend * be, const nf_op * op, int32_t thr, float scale, nf_err * err) {
    if (thr < 0 || thr > (1 << 24)) return NF__OPERR(NF_ERR_ARG, "bad drop_threshold %d (0..2^24)", thr);
    if (thr > 0 && !(isfinite(scale) && scale > 0.0f))
        return NF__OPERR(NF_ERR_ARG, "bad drop_scale %g", (double) scale);
    if (thr > 0 && be && be->precision == NF_PRECISION_BF16_AUTOCAST)
        return NF__OPERR(NF_ERR_UNSUPPORTED, "dropout on the probabilities: not under --precision bf16-autocast");
    return NF_OK;
}

int nf__validate_attention(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_attention_params * p = &op->p.attention;
    const nf_tensor *s = op->src, *d = op->dst;
    if (p->n_heads < 1 || p->head_dim < 1 || p->lk < 1) return NF__OPERR(NF_ERR_ARG, "bad heads/head_dim/lk");
    /* as ATTENTION_BACKWARD: a negative stride would put rows before the tensor's start,
     * which the extents below do not see */
    if (p->q_gs < 0 || p->q_ss < 0 || p->kv_gs < 0 || p->kv_ss < 0 || p->o_gs < 0 || p->o_ss < 0)
        return NF__OPERR(NF_ERR_ARG, "negative stride");
    NF_TRY(nf__validate_attn_drop(be, op, p->drop_threshold, p->drop_scale, err));
    int64_t w = p->n_heads * p->head_dim;
    int64_t qe = p->n_groups <= 0 || p->lq <= 0 ? 0 : (p->n_groups - 1) * p->q_gs + (p->lq - 1) * p->q_ss + w;
    int64_t ke = p->n_groups <= 0 ? 0 : (p->n_groups - 1) * p->kv_gs + (p->lk - 1) * p->kv_ss + w;
    int64_t oe = p->n_groups <= 0 || p->lq <= 0 ? 0 : (p->n_groups - 1) * p->o_gs + (p->lq - 1) * p->o_ss + w;
    NF_TRY(nf__check_extent(err, op, be, &s[0], "q", qe));
    NF_TRY(nf__check_extent(err, op, be, &s[1], "k", ke));
    NF_TRY(nf__check_extent(err, op, be, &s[2], "v", ke));
    NF_TRY(nf__check_extent(err, op, be, &d[0], "o", oe));
    return NF_OK;
}

/* the extent of n_seq sequences of `rows` rows (stride ld) of `width`
 * elements, sequence s at s*gs */
static int64_t nf__seq_extent(int64_t n_seq, int64_t gs, int64_t rows, int64_t ld, int64_t width) {
    return n_seq <= 0 || rows <= 0 ? 0 : (n_seq - 1) * gs + nf__extent(rows, ld, width);
}

int nf__validate_conv1d(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_conv1d_params * p = &op->p.conv1d;
    const nf_tensor *s = op->src, *d = op->dst;
    if (p->n_seq < 0 || p->len < 0 || p->cin < 1 || p->cout < 1 || p->ksize < 1 || p->dilation < 1 || p->pad < 0 ||
        p->ldx < p->cin || p->ldy < p->cout || p->x_gs < 0 || p->y_gs < 0)
        return NF__OPERR(NF_ERR_ARG, "bad conv1d parameters");
    if (2 * p->pad != p->dilation * (p->ksize - 1))
        return NF__OPERR(NF_ERR_ARG, "padding %lld is not the 'same' padding of kernel %lld, dilation %lld",
                         (long long) p->pad, (long long) p->ksize, (long long) p->dilation);
    if (!nf__shape_is(&s[1], 3, p->cout, p->cin, p->ksize)) {
        return NF__OPERR(NF_ERR_SHAPE, "W '%s' must be (%lld, %lld, %lld)", s[1].name ? s[1].name : "?",
                         (long long) p->cout, (long long) p->cin, (long long) p->ksize);
    }
    NF_TRY(nf__check_extent(err, op, be, &s[0], "x", nf__seq_extent(p->n_seq, p->x_gs, p->len, p->ldx, p->cin)));
    if (op->n_src == 3) NF_TRY(nf__check_extent(err, op, be, &s[2], "bias", p->cout));
    NF_TRY(nf__check_extent(err, op, be, &d[0], "y", nf__seq_extent(p->n_seq, p->y_gs, p->len, p->ldy, p->cout)));
    return NF_OK;
}

int nf__validate_batch_norm(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_batch_norm_params * p = &op->p.batch_norm;
    const nf_tensor *s = op->src, *d = op->dst;
    if (p->m < 0 || p->c < 1 || p->ldx < p->c || p->ldy < p->c || !(p->eps >= 0.0f))
        return NF__OPERR(NF_ERR_ARG, "bad m/c/ldx/ldy/eps");
    static const char * const role[5] = {"x", "weight", "bias", "running_mean", "running_var"};
    NF_TRY(nf__check_extent(err, op, be, &s[0], role[0], nf__extent(p->m, p->ldx, p->c)));
    for (int i = 1; i < 5; i++) NF_TRY(nf__check_extent(err, op, be, &s[i], role[i], p->c));
    NF_TRY(nf__check_extent(err, op, be, &d[0], "y", nf__extent(p->m, p->ldy, p->c)));
    return NF_OK;
}

int nf__validate_fill(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_fill_params * p = &op->p.fill;
    if (p->m < 0 || p->k < 0 || (p->m > 0 && p->ld < p->k)) return NF__OPERR(NF_ERR_ARG, "bad m/k/ld");
    return nf__check_extent(err, op, be, &op->dst[0], "y", p->k == 0 ? 0 : nf__extent(p->m, p->ld, p->k));
}

int nf__validate_axial_pos(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_axial_pos_params * p = &op->p.axial_pos;
    const nf_tensor *s = op->src, *d = op->dst;
    if (p->n_seq < 0 || p->len < 0 || p->dim < 1 || p->n1 < 1 || p->ld < p->dim || p->gs < 0)
        return NF__OPERR(NF_ERR_ARG, "bad axial_pos parameters");
    NF_TRY(nf__check_extent(err, op, be, &s[0], "e0", (p->len + p->n1 - 1) / p->n1 * p->dim));
    NF_TRY(nf__check_extent(err, op, be, &s[1], "e1", p->n1 * p->dim));
    NF_TRY(nf__check_extent(err, op, be, &d[0], "x", nf__seq_extent(p->n_seq, p->gs, p->len, p->ld, p->dim)));
    return NF_OK;
}

int nf__validate_bucket_route(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_bucket_route_params * p = &op->p.bucket_route;
    const nf_tensor *s = op->src, *d = op->dst;
    if (p->n_seq < 0 || p->n_buckets < 1 || p->bucket < 1 || p->n_heads < 1 || p->head_dim < 1)
        return NF__OPERR(NF_ERR_ARG, "bad buckets/heads/head_dim");
    const int64_t w = p->n_heads * p->head_dim, rows = p->n_buckets * p->bucket;
    if (p->q_ss < w || p->k_ss < w) return NF__OPERR(NF_ERR_ARG, "row strides below n_heads*head_dim");
    NF_TRY(nf__check_extent(err, op, be, &s[0], "q", nf__seq_extent(p->n_seq, p->q_gs, rows, p->q_ss, w)));
    NF_TRY(nf__check_extent(err, op, be, &s[1], "k", nf__seq_extent(p->n_seq, p->k_gs, rows, p->k_ss, w)));
    NF_TRY(nf__check_extent(err, op, be, &d[0], "sel", p->n_seq * p->n_heads * p->n_buckets));
    NF_TRY(nf__check_extent(err, op, be, &d[1], "prob", p->n_seq * p->n_heads * p->n_buckets * 2));
    return NF_OK;
}

int nf__validate_bucket_gather(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_bucket_gather_params * p = &op->p.bucket_gather;
    const nf_tensor *s = op->src, *d = op->dst;
    if (p->n_seq < 0 || p->n_buckets < 1 || p->bucket < 1 || p->n_heads < 1 || p->head_dim < 1)
        return NF__OPERR(NF_ERR_ARG, "bad buckets/heads/head_dim");
    const int64_t w = p->n_heads * p->head_dim, rows = p->n_buckets * p->bucket;
    if (p->kv_ss < w) return NF__OPERR(NF_ERR_ARG, "row stride below n_heads*head_dim");
    const int64_t kv = nf__seq_extent(p->n_seq, p->kv_gs, rows, p->kv_ss, w);
    NF_TRY(nf__check_extent(err, op, be, &s[0], "k", kv));
    NF_TRY(nf__check_extent(err, op, be, &s[1], "v", kv));
    NF_TRY(nf__check_extent(err, op, be, &s[2], "sel", p->n_seq * p->n_heads * p->n_buckets));
    NF_TRY(nf__check_extent(err, op, be, &s[3], "prob", p->n_seq * p->n_heads * p->n_buckets * 2));
    NF_TRY(nf__check_extent(err, op, be, &d[0], "kcat", p->n_seq * rows * 2 * w));
    NF_TRY(nf__check_extent(err, op, be, &d[1], "vcat", p->n_seq * rows * 2 * w));
    return NF_OK;
}

/* ---- training ops, set B ---------------------------------------------------------- */

int nf__validate_attention_backward(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_attention_backward_params * p = &op->p.attention_backward;
    const nf_tensor *s = op->src, *d = op->dst;
    if (p->n_groups < 0 || p->lq < 0 || p->n_heads < 1 || p->head_dim < 1 || p->lk < 1)
        return NF__OPERR(NF_ERR_ARG, "bad groups/lq/heads/head_dim/lk");
    if (p->q_gs < 0 || p->q_ss < 0 || p->kv_gs < 0 || p->kv_ss < 0 || p->o_gs < 0 || p->o_ss < 0)
        return NF__OPERR(NF_ERR_ARG, "negative stride");
    NF_TRY(nf__validate_attn_drop(be, op, p->drop_threshold, p->drop_scale, err));
    const int64_t w = p->n_heads * p->head_dim;
    const int64_t qe = nf__seq_extent(p->n_groups, p->q_gs, p->lq, p->q_ss, w);
    const int64_t ke = nf__seq_extent(p->n_groups, p->kv_gs, p->lk, p->kv_ss, w);
    const int64_t oe = nf__seq_extent(p->n_groups, p->o_gs, p->lq, p->o_ss, w);
    NF_TRY(nf__check_extent(err, op, be, &s[0], "q", qe));
    NF_TRY(nf__check_extent(err, op, be, &s[1], "k", ke));
    NF_TRY(nf__check_extent(err, op, be, &s[2], "v", ke));
    NF_TRY(nf__check_extent(err, op, be, &s[3], "o", oe));
    NF_TRY(nf__check_extent(err, op, be, &s[4], "do", oe));
    NF_TRY(nf__check_extent(err, op, be, &d[0], "dq", qe));
    NF_TRY(nf__check_extent(err, op, be, &d[1], "dk", ke));
    NF_TRY(nf__check_extent(err, op, be, &d[2], "dv", ke));
    NF_TRY(nf__check_extent(err, op, be, &d[3], "stats", 2 * p->n_groups * p->n_heads * p->lq));
    return NF_OK;
}

int nf__validate_embed_features_backward(nf_backend * be, const nf_op * op, nf_err * err) {
    const nf_tensor *s = op->src, *d = op->dst;
    const int64_t n = s[0].ne[0], F = s[0].ne[1], D = s[1].ne[2];
    if (s[0].ndim != 2 || !nf__shape_is(&s[1], 3, n, F + 1, D))
        return NF__OPERR(NF_ERR_SHAPE, "expects z (n, F) and dtok (n, F+1, D)");
    NF_TRY(nf__check_extent(err, op, be, &d[0], "dw", D));
    NF_TRY(nf__check_extent(err, op, be, &d[1], "db", D));
    return NF_OK;
}

int nf__validate_label_tokens_backward(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_label_tokens_backward_params * p = &op->p.label_tokens_backward;
    const nf_tensor *s = op->src, *d = op->dst;
    if (s[1].ndim != 3) return NF__OPERR(NF_ERR_ARG, "expects dtok (n, T, D)");
    const int64_t n = s[1].ne[0], D = s[1].ne[2];
    if (p->mode != NF_LABEL_MASK && !s[0].buf) return NF__OPERR(NF_ERR_ARG, "src[0] y has no buffer");
    if (p->mode == NF_LABEL_CLASS) {
        if (op->n_dst != 1 || s[0].type != NF_I32) return NF__OPERR(NF_ERR_ARG, "class mode expects y (i32) -> dE");
        NF_TRY(nf__check_extent(err, op, be, &s[0], "y", n));
        if (d[0].ndim != 2 || d[0].ne[1] != D) return NF__OPERR(NF_ERR_SHAPE, "dE must be (C, D)");
    } else if (p->mode == NF_LABEL_VALUE) {
        if (op->n_dst != 2 || s[0].type != NF_F32) return NF__OPERR(NF_ERR_ARG, "value mode expects y (f32) -> dw, db");
        NF_TRY(nf__check_extent(err, op, be, &s[0], "y", n));
        NF_TRY(nf__check_extent(err, op, be, &d[0], "dw", D));
        NF_TRY(nf__check_extent(err, op, be, &d[1], "db", D));
    } else if (p->mode == NF_LABEL_MASK) {
        if (op->n_dst != 1) return NF__OPERR(NF_ERR_ARG, "mask mode expects -> dM");
        NF_TRY(nf__check_extent(err, op, be, &d[0], "dM", D));
    } else {
        return NF__OPERR(NF_ERR_ARG, "unknown label mode %d", p->mode);
    }
    return NF_OK;
}

int nf__validate_cross_entropy(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_cross_entropy_params * p = &op->p.cross_entropy;
    const nf_tensor *s = op->src, *d = op->dst;
    if (p->n < 1 || p->c < 1 || p->ldl < p->c) return NF__OPERR(NF_ERR_ARG, "bad n/c/ldl");
    NF_TRY(nf__check_extent(err, op, be, &s[0], "logits", nf__extent(p->n, p->ldl, p->c)));
    NF_TRY(nf__check_extent(err, op, be, &s[1], "y", p->n));
    NF_TRY(nf__check_extent(err, op, be, &d[0], "loss", 1));
    if (op->n_dst == 2) NF_TRY(nf__check_extent(err, op, be, &d[1], "dlogits", p->n * p->c));
    return NF_OK;
}

int nf__validate_mse_loss(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_mse_loss_params * p = &op->p.mse_loss;
    const nf_tensor *s = op->src, *d = op->dst;
    if (p->n < 1 || p->ldp < 1) return NF__OPERR(NF_ERR_ARG, "bad n/ldp");
    NF_TRY(nf__check_extent(err, op, be, &s[0], "pred", nf__extent(p->n, p->ldp, 1)));
    NF_TRY(nf__check_extent(err, op, be, &s[1], "target", p->n));
    NF_TRY(nf__check_extent(err, op, be, &d[0], "loss", 1));
    if (op->n_dst == 2) NF_TRY(nf__check_extent(err, op, be, &d[1], "dpred", p->n));
    return NF_OK;
}

/* Generic: every operand present has the numel of dst[0] (elementwise ops). */
int nf__validate_elementwise(nf_backend * be, const nf_op * op, nf_err * err) {
    const int64_t n = nf__tensor_numel(&op->dst[0]);
    for (int i = 0; i < op->n_src + op->n_dst; i++) {
        const nf_tensor * t = i < op->n_src ? &op->src[i] : &op->dst[i - op->n_src];
        if (t->buf && nf__tensor_numel(t) != n) {
            return NF__OPERR(NF_ERR_SHAPE, "%s[%d] '%s' has %lld elements, dst[0] has %lld",
                             i < op->n_src ? "src" : "dst", i < op->n_src ? i : i - op->n_src, t->name ? t->name : "?",
                             (long long) nf__tensor_numel(t), (long long) n);
        }
    }
    return NF_OK;
}

/* ---- FLOP counts ---------------------------------------------------------------- */

double nf__flops_zero(const nf_op * op) {
    (void) op;
    return 0.0;
}

/* one per element of dst[0] (elementwise ops) */
double nf__flops_elementwise(const nf_op * op) { return (double) nf__tensor_numel(&op->dst[0]); }

double nf__flops_layer_norm(const nf_op * op) {
    const struct nf_layer_norm_params * p = &op->p.layer_norm;
    return 8.0 * (double) p->m * (double) p->k;
}

double nf__flops_linear(const nf_op * op) {
    const struct nf_linear_params * p = &op->p.linear;
    return 2.0 * (double) p->m * (double) p->n * (double) p->k;
}

double nf__flops_attention(const nf_op * op) {
    const struct nf_attention_params * p = &op->p.attention;
    return 4.0 * (double) p->n_groups * (double) p->n_heads * (double) p->lq * (double) p->lk * (double) p->head_dim;
}

double nf__flops_conv1d(const nf_op * op) {
    const struct nf_conv1d_params * p = &op->p.conv1d;
    return 2.0 * (double) p->n_seq * (double) p->len * (double) p->cout * (double) p->cin * (double) p->ksize;
}

double nf__flops_batch_norm(const nf_op * op) {
    const struct nf_batch_norm_params * p = &op->p.batch_norm;
    return 2.0 * (double) p->m * (double) p->c;
}

double nf__flops_bucket_route(const nf_op * op) {
    const struct nf_bucket_route_params * p = &op->p.bucket_route;
    const double nb = (double) p->n_buckets;
    return (double) p->n_seq * (double) p->n_heads * (double) p->head_dim * nb * (2.0 * (double) p->bucket + 2.0 * nb);
}

/* the backward recomputes the scores and the softmax, then dP, dq, dk, dv:
 * five products of lq x lk x head_dim */
double nf__flops_attention_backward(const nf_op * op) {
    const struct nf_attention_backward_params * p = &op->p.attention_backward;
    return 10.0 * (double) p->n_groups * (double) p->n_heads * (double) p->lq * (double) p->lk * (double) p->head_dim;
}

double nf__flops_embed_features_backward(const nf_op * op) { return 3.0 * (double) nf__tensor_numel(&op->src[1]); }

double nf__flops_label_tokens_backward(const nf_op * op) {
    const nf_tensor * t = &op->src[1];
    return t->ndim == 3 ? 2.0 * (double) t->ne[0] * (double) t->ne[2] : 0.0;
}

double nf__flops_cross_entropy(const nf_op * op) {
    const struct nf_cross_entropy_params * p = &op->p.cross_entropy;
    return 4.0 * (double) p->n * (double) p->c;
}

double nf__flops_mse_loss(const nf_op * op) { return 4.0 * (double) op->p.mse_loss.n; }

/* ---- the table -------------------------------------------------------------------- */

const struct nf_op_info nf__op_table[NF_OP_COUNT] = {
#define NF_OP(NAME, name, SRC, DST, PARAMS, validate, flops) [NF_OP_##NAME] = {#NAME, SRC, DST, validate, flops},
#include "nf-ops.def"
};

const char * nf__op_name(enum nf_op_type t) {
    return ((int) t >= 0 && t < NF_OP_COUNT) ? nf__op_table[t].name : "UNKNOWN";
}

double nf__op_flops(const nf_op * op) {
    return ((int) op->type >= 0 && op->type < NF_OP_COUNT) ? nf__op_table[op->type].flops(op) : 0.0;
}

int nf__op_err(nf_err * err, const nf_op * op, const nf_backend * be, int code, const char * fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return nf__err_set(err, code, "op %s (%s) on %s: %s", nf__op_name(op->type), op->label ? op->label : "-", be->name,
                       msg);
}

int nf__validate_gather_rows(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_gather_rows_params * p = &op->p.gather_rows;
    const nf_tensor *s = op->src, *d = op->dst;
    if (p->m < 0 || p->k < 1 || p->n_table < 0 || p->ldw < p->k || p->ldy < p->k)
        return NF__OPERR(NF_ERR_ARG, "bad m/k/n_table/ldw/ldy");
    NF_TRY(nf__check_extent(err, op, be, &s[0], "idx", p->m));
    NF_TRY(nf__check_extent(err, op, be, &s[1], "W", nf__extent(p->n_table, p->ldw, p->k)));
    NF_TRY(nf__check_extent(err, op, be, &d[0], "y", nf__extent(p->m, p->ldy, p->k)));
    return NF_OK;
}

/* ---- training ops, set A ------------------------------------------------------------ */

int nf__validate_gemm(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_gemm_params * p = &op->p.gemm;
    const nf_tensor *s = op->src, *d = op->dst;
    if (p->m < 0 || p->n < 0 || p->k < 1 || (p->trans_a != 0 && p->trans_a != 1) ||
        (p->trans_b != 0 && p->trans_b != 1))
        return NF__OPERR(NF_ERR_ARG, "bad m/n/k/trans (m=%lld n=%lld k=%lld)", (long long) p->m, (long long) p->n,
                         (long long) p->k);
    /* A is stored (m, k) or, transposed, (k, m); B (k, n) or (n, k) */
    const int64_t a_rows = p->trans_a ? p->k : p->m, a_cols = p->trans_a ? p->m : p->k;
    const int64_t b_rows = p->trans_b ? p->n : p->k, b_cols = p->trans_b ? p->k : p->n;
    if (p->lda < (a_cols > 1 ? a_cols : 1) || p->ldb < (b_cols > 1 ? b_cols : 1) || p->ldc < (p->n > 1 ? p->n : 1))
        return NF__OPERR(NF_ERR_ARG, "bad lda/ldb/ldc (%lld/%lld/%lld)", (long long) p->lda, (long long) p->ldb,
                         (long long) p->ldc);
    NF_TRY(nf__check_extent(err, op, be, &s[0], "A", a_cols == 0 ? 0 : nf__extent(a_rows, p->lda, a_cols)));
    NF_TRY(nf__check_extent(err, op, be, &s[1], "B", b_cols == 0 ? 0 : nf__extent(b_rows, p->ldb, b_cols)));
    NF_TRY(nf__check_extent(err, op, be, &d[0], "C", p->n == 0 ? 0 : nf__extent(p->m, p->ldc, p->n)));
    return NF_OK;
}

int nf__validate_col_sum(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_col_sum_params * p = &op->p.col_sum;
    if (p->m < 0 || p->n < 0 || p->ldx < (p->n > 1 ? p->n : 1)) return NF__OPERR(NF_ERR_ARG, "bad m/n/ldx");
    NF_TRY(nf__check_extent(err, op, be, &op->src[0], "x", p->n == 0 ? 0 : nf__extent(p->m, p->ldx, p->n)));
    NF_TRY(nf__check_extent(err, op, be, &op->dst[0], "y", p->n));
    return NF_OK;
}

static int nf__check_act(nf_backend * be, const nf_op * op, nf_err * err, int64_t n, int32_t act) {
    if (n < 0) return NF__OPERR(NF_ERR_ARG, "bad n %lld", (long long) n);
    if (act != NF_ACT_GELU && act != NF_ACT_RELU) return NF__OPERR(NF_ERR_ARG, "unknown activation %d", (int) act);
    return NF_OK;
}

int nf__validate_act(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_act_params * p = &op->p.act;
    NF_TRY(nf__check_act(be, op, err, p->n, p->act));
    NF_TRY(nf__check_extent(err, op, be, &op->src[0], "x", p->n));
    NF_TRY(nf__check_extent(err, op, be, &op->dst[0], "y", p->n));
    return NF_OK;
}

int nf__validate_act_backward(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_act_backward_params * p = &op->p.act_backward;
    NF_TRY(nf__check_act(be, op, err, p->n, p->act));
    NF_TRY(nf__check_extent(err, op, be, &op->src[0], "x", p->n));
    NF_TRY(nf__check_extent(err, op, be, &op->src[1], "dy", p->n));
    NF_TRY(nf__check_extent(err, op, be, &op->dst[0], "dx", p->n));
    return NF_OK;
}

int nf__validate_layer_norm_backward(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_layer_norm_backward_params * p = &op->p.layer_norm_backward;
    const nf_tensor *s = op->src, *d = op->dst;
    if (p->m < 0 || p->k < 1 || p->ldx < p->k || p->lddy < p->k || p->lddx < p->k)
        return NF__OPERR(NF_ERR_ARG, "bad m/k/ldx/lddy/lddx");
    NF_TRY(nf__check_extent(err, op, be, &s[0], "x", nf__extent(p->m, p->ldx, p->k)));
    NF_TRY(nf__check_extent(err, op, be, &s[1], "g", p->k));
    NF_TRY(nf__check_extent(err, op, be, &s[2], "dy", nf__extent(p->m, p->lddy, p->k)));
    NF_TRY(nf__check_extent(err, op, be, &d[0], "dx", nf__extent(p->m, p->lddx, p->k)));
    NF_TRY(nf__check_extent(err, op, be, &d[1], "dg", p->k));
    NF_TRY(nf__check_extent(err, op, be, &d[2], "db", p->k));
    return NF_OK;
}

int nf__validate_adamw(nf_backend * be, const nf_op * op, nf_err * err) {
    const int64_t n = op->p.adamw.n;
    if (n < 0) return NF__OPERR(NF_ERR_ARG, "bad n %lld", (long long) n);
    static const char * const role[4] = {"g", "p", "m", "v"};
    NF_TRY(nf__check_extent(err, op, be, &op->src[0], role[0], n));
    for (int i = 0; i < 3; i++) NF_TRY(nf__check_extent(err, op, be, &op->dst[i], role[i + 1], n));
    return NF_OK;
}

int nf__validate_copy(nf_backend * be, const nf_op * op, nf_err * err) {
    const int64_t n = op->p.copy.n;
    if (n < 0) return NF__OPERR(NF_ERR_ARG, "bad n %lld", (long long) n);
    NF_TRY(nf__check_extent(err, op, be, &op->src[0], "x", n));
    NF_TRY(nf__check_extent(err, op, be, &op->dst[0], "y", n));
    return NF_OK;
}

double nf__flops_gemm(const nf_op * op) {
    const struct nf_gemm_params * p = &op->p.gemm;
    return 2.0 * (double) p->m * (double) p->n * (double) p->k;
}

double nf__flops_col_sum(const nf_op * op) { return (double) op->p.col_sum.m * (double) op->p.col_sum.n; }

double nf__flops_act(const nf_op * op) { return 8.0 * (double) op->p.act.n; }

double nf__flops_act_backward(const nf_op * op) { return 12.0 * (double) op->p.act_backward.n; }

double nf__flops_layer_norm_backward(const nf_op * op) {
    const struct nf_layer_norm_backward_params * p = &op->p.layer_norm_backward;
    return 20.0 * (double) p->m * (double) p->k;
}

double nf__flops_adamw(const nf_op * op) { return 12.0 * (double) op->p.adamw.n; }

/* ---- training ops, set C (TabSTAR) ----------------------------------------------------- */

int nf__validate_scatter_add_rows(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_scatter_add_rows_params * p = &op->p.scatter_add_rows;
    const nf_tensor *s = op->src, *d = op->dst;
    if (p->m < 0 || p->k < 1 || p->n_table < 0 || p->ldw < p->k || p->ldy < p->k || p->m > INT32_MAX)
        return NF__OPERR(NF_ERR_ARG, "bad m/k/n_table/ldw/ldy");
    NF_TRY(nf__check_extent(err, op, be, &s[0], "order", p->m));
    NF_TRY(nf__check_extent(err, op, be, &s[1], "start", p->n_table + 1));
    NF_TRY(nf__check_extent(err, op, be, &s[2], "dy", nf__extent(p->m, p->ldy, p->k)));
    NF_TRY(nf__check_extent(err, op, be, &d[0], "dW", nf__extent(p->n_table, p->ldw, p->k)));
    return NF_OK;
}

int nf__validate_clip_grad_norm(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_clip_grad_norm_params * p = &op->p.clip_grad_norm;
    if (p->n < 0) return NF__OPERR(NF_ERR_ARG, "bad n %lld", (long long) p->n);
    if (!(p->max_norm >= 0.0f)) return NF__OPERR(NF_ERR_ARG, "bad max_norm %g", (double) p->max_norm);
    NF_TRY(nf__check_extent(err, op, be, &op->dst[0], "g", p->n));
    NF_TRY(nf__check_extent(err, op, be, &op->dst[1], "norm", 1));
    return NF_OK;
}

int nf__validate_scale(nf_backend * be, const nf_op * op, nf_err * err) {
    const int64_t n = op->p.scale.n;
    if (n < 0) return NF__OPERR(NF_ERR_ARG, "bad n %lld", (long long) n);
    NF_TRY(nf__check_extent(err, op, be, &op->src[0], "x", n));
    NF_TRY(nf__check_extent(err, op, be, &op->dst[0], "y", n));
    return NF_OK;
}

double nf__flops_scatter_add_rows(const nf_op * op) {
    return 2.0 * (double) op->p.scatter_add_rows.m * (double) op->p.scatter_add_rows.k;
}

double nf__flops_clip_grad_norm(const nf_op * op) { return 3.0 * (double) op->p.clip_grad_norm.n; }

double nf__flops_scale(const nf_op * op) { return 2.0 * (double) op->p.scale.n; }

int nf__validate_dropout(nf_backend * be, const nf_op * op, nf_err * err) {
    const struct nf_dropout_params * p = &op->p.dropout;
    if (p->n < 0) return NF__OPERR(NF_ERR_ARG, "bad n %lld", (long long) p->n);
    if (p->threshold < 0 || p->threshold > (1 << 24))
        return NF__OPERR(NF_ERR_ARG, "bad threshold %d (0..2^24)", p->threshold);
    NF_TRY(nf__check_extent(err, op, be, &op->src[0], "x", p->n));
    NF_TRY(nf__check_extent(err, op, be, &op->dst[0], "y", p->n));
    return NF_OK;
}

double nf__flops_scale_dropout(const nf_op * op) { return 2.0 * (double) op->p.dropout.n; }
