/* ops.c -- typed op calls and shared sub-blocks (nf-ops.h). */
#include "nf-ops.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

void nf_graph_init(nf_graph * g, nf_backend * be, nf_err * err) {
    memset(g, 0, sizeof(*g));
    g->be = be;
    g->err = err;
}

void nf_graph_prefix(nf_graph * g, const char * fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->prefix, sizeof(g->prefix), fmt, ap);
    va_end(ap);
}

const char * nf_label(nf_graph * g, const char * fmt, ...) {
    char * out = g->labels[g->next];
    g->next = (g->next + 1) % NF_GRAPH_LABELS;
    int n = snprintf(out, NF_GRAPH_LABEL_SZ, "%s", g->prefix);
    if (n < 0 || n >= NF_GRAPH_LABEL_SZ) return out;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out + n, (size_t) (NF_GRAPH_LABEL_SZ - n), fmt, ap);
    va_end(ap);
    return out;
}

/* ---- typed op calls ------------------------------------------------------------------- */

static nf_op nf__op(enum nf_op_type type, const char * label, int n_src, int n_dst) {
    nf_op op;
    memset(&op, 0, sizeof(op));
    op.type = type;
    op.label = label;
    op.n_src = n_src;
    op.n_dst = n_dst;
    return op;
}

int nf_quantile(nf_graph * g, const char * label, nf_tensor x, nf_tensor B, int32_t nq, int32_t q_denom) {
    nf_op op = nf__op(NF_OP_QUANTILE, label, 1, 1);
    op.src[0] = x;
    op.dst[0] = B;
    op.p.quantile.nq = nq;
    op.p.quantile.q_denom = q_denom;
    return nf__op_run(g->be, &op, g->err);
}

int nf_bucketize_norm(nf_graph * g, const char * label, nf_tensor xs, nf_tensor xq, nf_tensor B, nf_tensor zs,
                      nf_tensor zq) {
    nf_op op = nf__op(NF_OP_BUCKETIZE_NORM, label, 3, 2);
    op.src[0] = xs;
    op.src[1] = xq;
    op.src[2] = B;
    op.dst[0] = zs;
    op.dst[1] = zq;
    return nf__op_run(g->be, &op, g->err);
}

int nf_embed_features(nf_graph * g, const char * label, nf_tensor z, const nf_tensor * w, const nf_tensor * b,
                      nf_tensor tok) {
    nf_op op = nf__op(NF_OP_EMBED_FEATURES, label, 3, 1);
    op.src[0] = z;
    op.src[1] = *w;
    op.src[2] = *b;
    op.dst[0] = tok;
    return nf__op_run(g->be, &op, g->err);
}

int nf_label_tokens_class(nf_graph * g, const char * label, nf_tensor y, const nf_tensor * E, nf_tensor tok) {
    nf_op op = nf__op(NF_OP_LABEL_TOKENS, label, 2, 1);
    op.p.label_tokens.mode = NF_LABEL_CLASS;
    op.src[0] = y;
    op.src[1] = *E;
    op.dst[0] = tok;
    return nf__op_run(g->be, &op, g->err);
}

int nf_label_tokens_value(nf_graph * g, const char * label, nf_tensor y, const nf_tensor * w, const nf_tensor * b,
                          nf_tensor tok) {
    nf_op op = nf__op(NF_OP_LABEL_TOKENS, label, 3, 1);
    op.p.label_tokens.mode = NF_LABEL_VALUE;
    op.src[0] = y;
    op.src[1] = *w;
    op.src[2] = *b;
    op.dst[0] = tok;
    return nf__op_run(g->be, &op, g->err);
}

int nf_label_tokens_mask(nf_graph * g, const char * label, const nf_tensor * M, nf_tensor tok) {
    nf_op op = nf__op(NF_OP_LABEL_TOKENS, label, 2, 1);
    op.p.label_tokens.mode = NF_LABEL_MASK;
    op.src[1] = *M; /* src[0] unused */
    op.dst[0] = tok;
    return nf__op_run(g->be, &op, g->err);
}

int nf_layer_norm(nf_graph * g, const char * label, nf_tensor x, int64_t rows, int64_t ldx, const nf_tensor * gamma,
                  const nf_tensor * beta, nf_tensor y, int64_t ldy, float eps) {
    nf_op op = nf__op(NF_OP_LAYER_NORM, label, 3, 1);
    op.src[0] = x;
    op.src[1] = *gamma;
    op.src[2] = *beta;
    op.dst[0] = y;
    struct nf_layer_norm_params * p = &op.p.layer_norm;
    p->m = rows;
    p->k = gamma->ne[0];
    p->ldx = ldx;
    p->ldy = ldy;
    p->eps = eps;
    return nf__op_run(g->be, &op, g->err);
}

int nf_linear(nf_graph * g, const char * label, nf_tensor x, int64_t rows, int64_t ldx, const nf_tensor * W,
              const nf_tensor * bias, nf_tensor y, int64_t ldy, enum nf_act act, int accumulate) {
    nf_op op = nf__op(NF_OP_LINEAR, label, bias ? 3 : 2, 1);
    op.src[0] = x;
    op.src[1] = *W;
    if (bias) op.src[2] = *bias;
    op.dst[0] = y;
    struct nf_linear_params * p = &op.p.linear;
    p->m = rows;
    p->n = W->ne[0];
    p->k = W->ne[1];
    p->ldx = ldx;
    p->ldy = ldy;
    p->act = act;
    p->accumulate = accumulate;
    p->bias_after_round = g->linear_bias_after_round;
    p->bf16_stream = g->bf16_stream;
    return nf__op_run(g->be, &op, g->err);
}

int nf_conv1d(nf_graph * g, const char * label, const struct nf_conv1d_shape * s, nf_tensor x, const nf_tensor * W,
              const nf_tensor * bias, nf_tensor y, int accumulate) {
    nf_op op = nf__op(NF_OP_CONV1D, label, bias ? 3 : 2, 1);
    op.src[0] = x;
    op.src[1] = *W;
    if (bias) op.src[2] = *bias;
    op.dst[0] = y;
    struct nf_conv1d_params * p = &op.p.conv1d;
    p->n_seq = s->n_seq;
    p->len = s->len;
    p->cout = W->ne[0];
    p->cin = W->ndim == 3 ? W->ne[1] : 0;
    p->ksize = W->ndim == 3 ? W->ne[2] : 0;
    p->dilation = s->dilation;
    p->pad = s->pad;
    p->ldx = p->cin;
    p->ldy = p->cout;
    p->x_gs = s->len * p->cin;
    p->y_gs = s->len * p->cout;
    p->accumulate = accumulate;
    return nf__op_run(g->be, &op, g->err);
}

int nf_batch_norm(nf_graph * g, const char * label, nf_tensor x, int64_t rows, int64_t c, const nf_tensor * w,
                  const nf_tensor * b, const nf_tensor * mean, const nf_tensor * var, nf_tensor y, float eps,
                  int relu) {
    nf_op op = nf__op(NF_OP_BATCH_NORM, label, 5, 1);
    op.src[0] = x;
    op.src[1] = *w;
    op.src[2] = *b;
    op.src[3] = *mean;
    op.src[4] = *var;
    op.dst[0] = y;
    struct nf_batch_norm_params * p = &op.p.batch_norm;
    p->m = rows;
    p->c = c;
    p->ldx = p->ldy = c;
    p->eps = eps;
    p->relu = relu;
    return nf__op_run(g->be, &op, g->err);
}

int nf_fill(nf_graph * g, const char * label, nf_tensor y, int64_t m, int64_t k, int64_t ld, float value) {
    nf_op op = nf__op(NF_OP_FILL, label, 0, 1);
    op.dst[0] = y;
    op.p.fill = (struct nf_fill_params){.m = m, .k = k, .ld = ld, .value = value};
    return nf__op_run(g->be, &op, g->err);
}

int nf_axial_pos(nf_graph * g, const char * label, const nf_tensor * e0, const nf_tensor * e1, nf_tensor x,
                 int64_t n_seq, int64_t len, int64_t dim, int64_t n1) {
    nf_op op = nf__op(NF_OP_AXIAL_POS, label, 2, 1);
    op.src[0] = *e0;
    op.src[1] = *e1;
    op.dst[0] = x;
    op.p.axial_pos = (struct nf_axial_pos_params){
        .n_seq = n_seq, .len = len, .dim = dim, .n1 = n1, .ld = dim, .gs = len * dim};
    return nf__op_run(g->be, &op, g->err);
}

int nf_bucket_route(nf_graph * g, const char * label, const struct nf_bucket_shape * s, nf_tensor q, nf_tensor k,
                    nf_tensor sel, nf_tensor prob, float scale) {
    nf_op op = nf__op(NF_OP_BUCKET_ROUTE, label, 2, 2);
    op.src[0] = q;
    op.src[1] = k;
    op.dst[0] = sel;
    op.dst[1] = prob;
    op.p.bucket_route = (struct nf_bucket_route_params){.n_seq = s->n_seq,
                                                        .n_buckets = s->n_buckets,
                                                        .bucket = s->bucket,
                                                        .n_heads = s->n_heads,
                                                        .head_dim = s->head_dim,
                                                        .q_ss = s->ss,
                                                        .q_gs = s->gs,
                                                        .k_ss = s->ss,
                                                        .k_gs = s->gs,
                                                        .scale = scale};
    return nf__op_run(g->be, &op, g->err);
}

int nf_bucket_gather(nf_graph * g, const char * label, const struct nf_bucket_shape * s, nf_tensor k, nf_tensor v,
                     nf_tensor sel, nf_tensor prob, nf_tensor kcat, nf_tensor vcat, int reuse_keys) {
    nf_op op = nf__op(NF_OP_BUCKET_GATHER, label, 4, 2);
    op.src[0] = k;
    op.src[1] = v;
    op.src[2] = sel;
    op.src[3] = prob;
    op.dst[0] = kcat;
    op.dst[1] = vcat;
    op.p.bucket_gather = (struct nf_bucket_gather_params){.n_seq = s->n_seq,
                                                          .n_buckets = s->n_buckets,
                                                          .bucket = s->bucket,
                                                          .n_heads = s->n_heads,
                                                          .head_dim = s->head_dim,
                                                          .kv_ss = s->ss,
                                                          .kv_gs = s->gs,
                                                          .reuse_keys = reuse_keys};
    return nf__op_run(g->be, &op, g->err);
}

/* the dropout params of a layout's drop_p / drop_seed as nf_dropout makes them (0 < p < 1; else none) */
static void nf__attn_drop(const struct nf_attn_layout * L, int64_t * seed, int32_t * thr, float * scale) {
    const float p = L->drop_p;
    *seed = (int64_t) L->drop_seed;
    *thr = p > 0.0f && p < 1.0f ? (int32_t) floor((double) p * 16777216.0 + 0.5) : 0;
    *scale = *thr > 0 ? (float) (1.0 / (1.0 - (double) p)) : 1.0f;
}

/* ATTENTION's and ATTENTION_BACKWARD's layout params from an nf_attn_layout */
#define NF__ATTN_PARAMS(p, L)          \
    do {                               \
        (p)->n_groups = (L)->groups;   \
        (p)->lq = (L)->lq;             \
        (p)->lk = (L)->lk;             \
        (p)->n_heads = (L)->n_heads;   \
        (p)->head_dim = (L)->head_dim; \
        (p)->q_gs = (L)->q_gs;         \
        (p)->q_ss = (L)->q_ss;         \
        (p)->kv_gs = (L)->kv_gs;       \
        (p)->kv_ss = (L)->kv_ss;       \
        (p)->o_gs = (L)->o_gs;         \
        (p)->o_ss = (L)->o_ss;         \
    } while (0)

int nf_attention(nf_graph * g, const char * label, const struct nf_attn_layout * L, nf_tensor q, nf_tensor k,
                 nf_tensor v, nf_tensor o) {
    nf_op op = nf__op(NF_OP_ATTENTION, label, 3, 1);
    op.src[0] = q;
    op.src[1] = k;
    op.src[2] = v;
    op.dst[0] = o;
    struct nf_attention_params * p = &op.p.attention;
    if (!(L->drop_p >= 0.0f && L->drop_p < 1.0f))
        return nf__err_set(g->err, NF_ERR_ARG, "%s: attention dropout probability %g (0 <= p < 1)", label,
                           (double) L->drop_p);
    NF__ATTN_PARAMS(p, L);
    nf__attn_drop(L, &p->drop_seed, &p->drop_threshold, &p->drop_scale);
    p->scale = L->scale != 0.0f ? L->scale : 1.0f / sqrtf((float) L->head_dim);
    p->bf16_stream = g->bf16_stream;
    return nf__op_run(g->be, &op, g->err);
}

int nf_gather_rows(nf_graph * g, const char * label, const struct nf_gather * s, nf_tensor idx, nf_tensor W,
                   nf_tensor y) {
    nf_op op = nf__op(NF_OP_GATHER_ROWS, label, 2, 1);
    op.src[0] = idx;
    op.src[1] = W;
    op.dst[0] = y;
    op.p.gather_rows = (struct nf_gather_rows_params){.m = s->rows,
                                                      .k = s->k,
                                                      .n_table = s->n_table,
                                                      .ldw = s->ldw,
                                                      .ldy = s->ldy,
                                                      .scale = s->scale != 0.0f ? s->scale : 1.0f,
                                                      .accumulate = s->accumulate};
    return nf__op_run(g->be, &op, g->err);
}

/* ---- training ops, set A --------------------------------------------------------------- */

int nf_gemm(nf_graph * g, const char * label, nf_tensor A, int trans_a, int64_t lda, nf_tensor B, int trans_b,
            int64_t ldb, nf_tensor C, int64_t ldc, int64_t m, int64_t n, int64_t k, int accumulate) {
    nf_op op = nf__op(NF_OP_GEMM, label, 2, 1);
    op.src[0] = A;
    op.src[1] = B;
    op.dst[0] = C;
    op.p.gemm = (struct nf_gemm_params){.m = m,
                                        .n = n,
                                        .k = k,
                                        .lda = lda,
                                        .ldb = ldb,
                                        .ldc = ldc,
                                        .trans_a = trans_a,
                                        .trans_b = trans_b,
                                        .accumulate = accumulate};
    return nf__op_run(g->be, &op, g->err);
}

int nf_col_sum(nf_graph * g, const char * label, nf_tensor x, int64_t m, int64_t n, int64_t ldx, nf_tensor y,
               int accumulate) {
    nf_op op = nf__op(NF_OP_COL_SUM, label, 1, 1);
    op.src[0] = x;
    op.dst[0] = y;
    op.p.col_sum = (struct nf_col_sum_params){.m = m, .n = n, .ldx = ldx, .accumulate = accumulate};
    return nf__op_run(g->be, &op, g->err);
}

int nf_act(nf_graph * g, const char * label, nf_tensor x, nf_tensor y, int64_t n, enum nf_act act) {
    nf_op op = nf__op(NF_OP_ACT, label, 1, 1);
    op.src[0] = x;
    op.dst[0] = y;
    op.p.act = (struct nf_act_params){.n = n, .act = act};
    return nf__op_run(g->be, &op, g->err);
}

int nf_act_backward(nf_graph * g, const char * label, nf_tensor x, nf_tensor dy, nf_tensor dx, int64_t n,
                    enum nf_act act) {
    nf_op op = nf__op(NF_OP_ACT_BACKWARD, label, 2, 1);
    op.src[0] = x;
    op.src[1] = dy;
    op.dst[0] = dx;
    op.p.act_backward = (struct nf_act_backward_params){.n = n, .act = act};
    return nf__op_run(g->be, &op, g->err);
}

int nf_layer_norm_backward(nf_graph * g, const char * label, nf_tensor x, int64_t rows, int64_t ldx,
                           const nf_tensor * gamma, nf_tensor dy, int64_t lddy, nf_tensor dx, int64_t lddx,
                           nf_tensor dgamma, nf_tensor dbeta, float eps, int accumulate) {
    nf_op op = nf__op(NF_OP_LAYER_NORM_BACKWARD, label, 3, 3);
    op.src[0] = x;
    op.src[1] = *gamma;
    op.src[2] = dy;
    op.dst[0] = dx;
    op.dst[1] = dgamma;
    op.dst[2] = dbeta;
    op.p.layer_norm_backward = (struct nf_layer_norm_backward_params){
        .m = rows, .k = gamma->ne[0], .ldx = ldx, .lddy = lddy, .lddx = lddx, .eps = eps, .accumulate = accumulate};
    return nf__op_run(g->be, &op, g->err);
}

/* torch.optim.AdamW, _single_tensor_adamw (not capturable): the Python
 * scalars in double, each rounded to float where the tensor op takes it
 * (nf-ops.def ADAMW) */
void nf_adamw_scalars(double lr, double beta1, double beta2, double eps, double wd, int64_t t,
                      struct nf_adamw_step * out) {
    const double bc1 = 1.0 - pow(beta1, (double) t), bc2 = 1.0 - pow(beta2, (double) t);
    out->decay = (float) (1.0 - lr * wd);
    out->w1 = (float) (1.0 - beta1);
    out->b2 = (float) beta2;
    out->c2 = (float) (1.0 - beta2);
    out->bc2s = (float) sqrt(bc2);
    out->eps = (float) eps;
    out->s = (float) (-(lr / bc1));
}

int nf_adamw(nf_graph * g, const char * label, nf_tensor grad, nf_tensor p, nf_tensor m, nf_tensor v, int64_t n,
             const struct nf_adamw_step * st) {
    nf_op op = nf__op(NF_OP_ADAMW, label, 1, 3);
    op.src[0] = grad;
    op.dst[0] = p;
    op.dst[1] = m;
    op.dst[2] = v;
    op.p.adamw = (struct nf_adamw_params){.n = n,
                                          .decay = st->decay,
                                          .w1 = st->w1,
                                          .b2 = st->b2,
                                          .c2 = st->c2,
                                          .bc2s = st->bc2s,
                                          .eps = st->eps,
                                          .s = st->s};
    return nf__op_run(g->be, &op, g->err);
}

int nf_copy(nf_graph * g, const char * label, nf_tensor x, nf_tensor y, int64_t n) {
    nf_op op = nf__op(NF_OP_COPY, label, 1, 1);
    op.src[0] = x;
    op.dst[0] = y;
    op.p.copy.n = n;
    return nf__op_run(g->be, &op, g->err);
}

/* ---- training ops, set B ---------------------------------------------------------- */

int nf_attention_backward(nf_graph * g, const char * label, const struct nf_attn_layout * L, nf_tensor q, nf_tensor k,
                          nf_tensor v, nf_tensor o, nf_tensor dout, nf_tensor dq, nf_tensor dk, nf_tensor dv,
                          nf_tensor stats, int accumulate_kv) {
    nf_op op = nf__op(NF_OP_ATTENTION_BACKWARD, label, 5, 4);
    op.src[0] = q;
    op.src[1] = k;
    op.src[2] = v;
    op.src[3] = o;
    op.src[4] = dout;
    op.dst[0] = dq;
    op.dst[1] = dk;
    op.dst[2] = dv;
    op.dst[3] = stats;
    struct nf_attention_backward_params * p = &op.p.attention_backward;
    if (!(L->drop_p >= 0.0f && L->drop_p < 1.0f))
        return nf__err_set(g->err, NF_ERR_ARG, "%s: attention dropout probability %g (0 <= p < 1)", label,
                           (double) L->drop_p);
    NF__ATTN_PARAMS(p, L);
    nf__attn_drop(L, &p->drop_seed, &p->drop_threshold, &p->drop_scale);        /* the forward's mask */
    p->scale = L->scale != 0.0f ? L->scale : 1.0f / sqrtf((float) L->head_dim); /* as nf_attention */
    p->accumulate_kv = accumulate_kv;
    return nf__op_run(g->be, &op, g->err);
}

int nf_embed_features_backward(nf_graph * g, const char * label, nf_tensor z, nf_tensor dtok, nf_tensor dw,
                               nf_tensor db) {
    nf_op op = nf__op(NF_OP_EMBED_FEATURES_BACKWARD, label, 2, 2);
    op.src[0] = z;
    op.src[1] = dtok;
    op.dst[0] = dw;
    op.dst[1] = db;
    return nf__op_run(g->be, &op, g->err);
}

int nf_label_tokens_backward_class(nf_graph * g, const char * label, nf_tensor y, nf_tensor dtok, nf_tensor dE) {
    nf_op op = nf__op(NF_OP_LABEL_TOKENS_BACKWARD, label, 2, 1);
    op.p.label_tokens_backward.mode = NF_LABEL_CLASS;
    op.src[0] = y;
    op.src[1] = dtok;
    op.dst[0] = dE;
    return nf__op_run(g->be, &op, g->err);
}

int nf_label_tokens_backward_value(nf_graph * g, const char * label, nf_tensor y, nf_tensor dtok, nf_tensor dw,
                                   nf_tensor db) {
    nf_op op = nf__op(NF_OP_LABEL_TOKENS_BACKWARD, label, 2, 2);
    op.p.label_tokens_backward.mode = NF_LABEL_VALUE;
    op.src[0] = y;
    op.src[1] = dtok;
    op.dst[0] = dw;
    op.dst[1] = db;
    return nf__op_run(g->be, &op, g->err);
}

int nf_label_tokens_backward_mask(nf_graph * g, const char * label, nf_tensor dtok, nf_tensor dM) {
    nf_op op = nf__op(NF_OP_LABEL_TOKENS_BACKWARD, label, 2, 1);
    op.p.label_tokens_backward.mode = NF_LABEL_MASK;
    op.src[1] = dtok; /* src[0] unused */
    op.dst[0] = dM;
    return nf__op_run(g->be, &op, g->err);
}

int nf_cross_entropy(nf_graph * g, const char * label, nf_tensor logits, int64_t n, int64_t c, int64_t ldl, nf_tensor y,
                     nf_tensor loss, nf_tensor dlogits, float grad_scale) {
    nf_op op = nf__op(NF_OP_CROSS_ENTROPY, label, 2, dlogits.buf ? 2 : 1);
    op.src[0] = logits;
    op.src[1] = y;
    op.dst[0] = loss;
    if (dlogits.buf) op.dst[1] = dlogits;
    op.p.cross_entropy = (struct nf_cross_entropy_params){.n = n, .c = c, .ldl = ldl, .grad_scale = grad_scale};
    return nf__op_run(g->be, &op, g->err);
}

int nf_mse_loss(nf_graph * g, const char * label, nf_tensor pred, int64_t n, int64_t ldp, nf_tensor target,
                nf_tensor loss, nf_tensor dpred, float grad_scale) {
    nf_op op = nf__op(NF_OP_MSE_LOSS, label, 2, dpred.buf ? 2 : 1);
    op.src[0] = pred;
    op.src[1] = target;
    op.dst[0] = loss;
    if (dpred.buf) op.dst[1] = dpred;
    op.p.mse_loss = (struct nf_mse_loss_params){.n = n, .ldp = ldp, .grad_scale = grad_scale};
    return nf__op_run(g->be, &op, g->err);
}

/* ---- training ops, set C (host helpers: train-host.c) ------------------------------------ */

int nf_scatter_add_rows(nf_graph * g, const char * label, const struct nf_gather * s, nf_tensor order, nf_tensor start,
                        nf_tensor dy, nf_tensor dW) {
    nf_op op = nf__op(NF_OP_SCATTER_ADD_ROWS, label, 3, 1);
    op.src[0] = order;
    op.src[1] = start;
    op.src[2] = dy;
    op.dst[0] = dW;
    op.p.scatter_add_rows = (struct nf_scatter_add_rows_params){.m = s->rows,
                                                                .k = s->k,
                                                                .n_table = s->n_table,
                                                                .ldw = s->ldw,
                                                                .ldy = s->ldy,
                                                                .scale = s->scale != 0.0f ? s->scale : 1.0f,
                                                                .accumulate = s->accumulate};
    return nf__op_run(g->be, &op, g->err);
}

int nf_clip_grad_norm(nf_graph * g, const char * label, nf_tensor grad, int64_t n, float max_norm, nf_tensor norm) {
    nf_op op = nf__op(NF_OP_CLIP_GRAD_NORM, label, 0, 2);
    op.dst[0] = grad;
    op.dst[1] = norm;
    op.p.clip_grad_norm = (struct nf_clip_grad_norm_params){.n = n, .max_norm = max_norm};
    return nf__op_run(g->be, &op, g->err);
}

int nf_scale(nf_graph * g, const char * label, nf_tensor x, nf_tensor y, int64_t n, float a, int accumulate) {
    nf_op op = nf__op(NF_OP_SCALE, label, 1, 1);
    op.src[0] = x;
    op.dst[0] = y;
    op.p.scale = (struct nf_scale_params){.n = n, .a = a, .accumulate = accumulate};
    return nf__op_run(g->be, &op, g->err);
}

int nf_dropout(nf_graph * g, const char * label, nf_tensor x, nf_tensor y, int64_t n, float p, uint64_t seed,
               int accumulate) {
    nf_op op = nf__op(NF_OP_DROPOUT, label, 1, 1);
    op.src[0] = x;
    op.dst[0] = y;
    const double thr = p > 0.0f && p < 1.0f ? floor((double) p * 16777216.0 + 0.5) : 0.0;
    op.p.dropout = (struct nf_dropout_params){.n = n,
                                              .seed = (int64_t) seed,
                                              .threshold = (int32_t) thr,
                                              .scale = (float) (1.0 / (1.0 - (double) p)),
                                              .accumulate = accumulate};
    if (!(p >= 0.0f && p < 1.0f))
        return nf__err_set(g->err, NF_ERR_ARG, "%s: dropout probability %g (0 <= p < 1)", label, (double) p);
    return nf__op_run(g->be, &op, g->err);
}

/* ---- shared sub-blocks ------------------------------------------------------------- */

int nf_prenorm_mlp(nf_graph * g, const struct nf_mlp * p, nf_tensor x, int64_t rows, int64_t ldx, nf_tensor xn,
                   nf_tensor h) {
    const int64_t D = p->ln_g->ne[0], hidden = p->w1->ne[0];
    NF_TRY(nf_layer_norm(g, p->ln_label, x, rows, ldx, p->ln_g, p->ln_b, xn, D, p->eps));
    NF_TRY(nf_linear(g, p->fc1_label, xn, rows, D, p->w1, p->b1, h, hidden, p->act, 0));
    return nf_linear(g, p->fc2_label, h, rows, hidden, p->w2, p->b2, x, ldx, NF_ACT_NONE, 1);
}

int nf_prenorm_self_attention(nf_graph * g, const struct nf_mhsa * p, nf_tensor x, int64_t groups, int64_t seq,
                              nf_tensor xn, nf_tensor qkv, nf_tensor a) {
    const int64_t D = p->ln_g->ne[0], D3 = 3 * D, tok = groups * seq, n3 = tok * D3;
    NF_TRY(nf_layer_norm(g, p->ln_label, x, tok, D, p->ln_g, p->ln_b, xn, D, p->eps));
    /* [q k v] (tok, 3D) = LN(x) [Wq; Wk; Wv]ᵀ + [bq bk bv] */
    NF_TRY(nf_linear(g, p->qkv_label, xn, tok, D, p->w_qkv, p->b_qkv, qkv, D3, NF_ACT_NONE, 0));
    const struct nf_attn_layout lay = {
        .groups = groups,
        .lq = seq,
        .lk = seq,
        .n_heads = p->n_heads,
        .head_dim = D / p->n_heads,
        .q_gs = seq * D3,
        .q_ss = D3,
        .kv_gs = seq * D3,
        .kv_ss = D3,
        .o_gs = seq * D,
        .o_ss = D,
    };
    NF_TRY(nf_attention(g, p->attn_label, &lay, nf_view1(&qkv, 0, n3), nf_view1(&qkv, D, n3 - D),
                        nf_view1(&qkv, 2 * D, n3 - 2 * D), a));
    return nf_linear(g, p->o_label, a, tok, D, p->w_o, p->b_o, x, D, NF_ACT_NONE, 1);
}
