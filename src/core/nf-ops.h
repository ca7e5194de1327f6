/*
 * nf-ops.h -- typed op calls and shared sub-blocks, for models' forwards.
 *
 * A forward is a sequence of one-line calls on a graph context `g` (the
 * backend, the caller's error, labels for the trace):
 *
 *     nf_graph g;
 *     nf_graph_init(&g, be, err);
 *     nf_graph_prefix(&g, "layers.%d.", l);
 *     NF_TRY(nf_layer_norm(&g, nf_label(&g, "layer_norm%d", 1), x, rows, D, &ln_g, &ln_b, xn, D, 1e-5f));
 *
 * Each call fills one nf_op (nf-ops.def has every op's contract) and runs
 * it through the dispatcher (nf__op_run): the same checks, no fallback.
 * Conventions: activations (views) are passed by value, weights by pointer;
 * strides are in elements; every call returns NF_OK or the error code set
 * in g->err.
 */
#ifndef NF_OPS_H
#define NF_OPS_H

#include "nf-impl.h"

/* ---- the graph context ------------------------------------------------------------ */

#define NF_GRAPH_LABELS   8  /* labels alive at once (nf_label's ring)  */
#define NF_GRAPH_LABEL_SZ 48 /* the trace keeps 47 characters of a label */

typedef struct nf_graph {
    nf_backend * be;
    nf_err * err;
    char prefix[NF_GRAPH_LABEL_SZ];
    char labels[NF_GRAPH_LABELS][NF_GRAPH_LABEL_SZ];
    int next;
    /* copied into every LINEAR's p.bias_after_round (bf16-autocast's
     * rounding of torch's matmul + add path; 0 by nf_graph_init) */
    int linear_bias_after_round;
    /* copied into every LINEAR's and ATTENTION's p.bf16_stream: under
     * bf16-autocast the model's activations are all bf16 (SpTransformer) */
    int bf16_stream;
} nf_graph;

void nf_graph_init(nf_graph * g, nf_backend * be, nf_err * err);
/* Prefix of the labels nf_label formats from now on ("layers.3."; "" for none). */
void nf_graph_prefix(nf_graph * g, const char * fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* prefix + the formatted label (a label passed as a plain string is used as
 * it is, unprefixed), in g's ring: valid until NF_GRAPH_LABELS
 * more nf_label calls (long enough for one op or one sub-block). */
const char * nf_label(nf_graph * g, const char * fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* 1-D view of n elements of t starting at element off */
static inline nf_tensor nf_view1(const nf_tensor * t, int64_t off, int64_t n) {
    const int64_t ne[1] = {n};
    return nf__tensor_view(t, off, 1, ne);
}

/* ---- typed op calls (one per op of nf-ops.def) ---------------------------------------- */

/* B (F, nq) = quantiles k/q_denom, k = 1..nq, of each column of x (n, F) */
int nf_quantile(nf_graph * g, const char * label, nf_tensor x, nf_tensor B, int32_t nq, int32_t q_denom);
/* zs, zq = standardised bucket indices of xs, xq against boundaries B */
int nf_bucketize_norm(nf_graph * g, const char * label, nf_tensor xs, nf_tensor xq, nf_tensor B, nf_tensor zs,
                      nf_tensor zq);
/* tok[r][1+j] = z[r][j] * w + b */
int nf_embed_features(nf_graph * g, const char * label, nf_tensor z, const nf_tensor * w, const nf_tensor * b,
                      nf_tensor tok);
/* token 0 of every row of tok: E[y] (class), y * w + b (value), M (mask) */
int nf_label_tokens_class(nf_graph * g, const char * label, nf_tensor y, const nf_tensor * E, nf_tensor tok);
int nf_label_tokens_value(nf_graph * g, const char * label, nf_tensor y, const nf_tensor * w, const nf_tensor * b,
                          nf_tensor tok);
int nf_label_tokens_mask(nf_graph * g, const char * label, const nf_tensor * M, nf_tensor tok);
/* y = LayerNorm(x) * gamma + beta over `rows` rows of gamma->ne[0] elements */
int nf_layer_norm(nf_graph * g, const char * label, nf_tensor x, int64_t rows, int64_t ldx, const nf_tensor * gamma,
                  const nf_tensor * beta, nf_tensor y, int64_t ldy, float eps);
/* y (+)= act(x · Wᵀ + bias) over `rows` rows; W (n, k); bias may be NULL */
int nf_linear(nf_graph * g, const char * label, nf_tensor x, int64_t rows, int64_t ldx, const nf_tensor * W,
              const nf_tensor * bias, nf_tensor y, int64_t ldy, enum nf_act act, int accumulate);

/* Where the rows of q, k, v and o of ATTENTION are (strides in elements). */
struct nf_attn_layout {
    int64_t groups, lq, lk, n_heads, head_dim;
    int64_t q_gs, q_ss, kv_gs, kv_ss, o_gs, o_ss;
    float scale; /* 0: the usual 1 / sqrtf(head_dim) */
    /* training: dropout on the probabilities with probability drop_p (0: none) and DROPOUT's mask
     * from drop_seed (nf-ops.def ATTENTION); the backward takes the forward's layout */
    float drop_p;
    uint64_t drop_seed;
};
int nf_attention(nf_graph * g, const char * label, const struct nf_attn_layout * L, nf_tensor q, nf_tensor k,
                 nf_tensor v, nf_tensor o);

/* ---- the sequence ops (position-major sequences, nf-ops.def) -------------------------- */

/* n_seq contiguous sequences of len rows; "same" padding */
struct nf_conv1d_shape {
    int64_t n_seq, len, dilation, pad;
};
/* y (+)= Conv1d(x) with W (cout, cin, k): x rows of cin, y rows of cout, contiguous */
int nf_conv1d(nf_graph * g, const char * label, const struct nf_conv1d_shape * s, nf_tensor x, const nf_tensor * W,
              const nf_tensor * bias, nf_tensor y, int accumulate);
/* y = [ReLU](BatchNorm_eval(x)) over rows x c, contiguous */
int nf_batch_norm(nf_graph * g, const char * label, nf_tensor x, int64_t rows, int64_t c, const nf_tensor * w,
                  const nf_tensor * b, const nf_tensor * mean, const nf_tensor * var, nf_tensor y, float eps, int relu);
/* y[r*ld + c] = value for r < m, c < k */
int nf_fill(nf_graph * g, const char * label, nf_tensor y, int64_t m, int64_t k, int64_t ld, float value);
/* x (n_seq, len, dim) contiguous += e0[t / n1] + e1[t % n1] */
int nf_axial_pos(nf_graph * g, const char * label, const nf_tensor * e0, const nf_tensor * e1, nf_tensor x,
                 int64_t n_seq, int64_t len, int64_t dim, int64_t n1);
/* where BUCKET_ROUTE / BUCKET_GATHER find the heads' rows: q, k and v rows
 * at stride ss, sequences at stride gs */
struct nf_bucket_shape {
    int64_t n_seq, n_buckets, bucket, n_heads, head_dim, ss, gs;
};
int nf_bucket_route(nf_graph * g, const char * label, const struct nf_bucket_shape * s, nf_tensor q, nf_tensor k,
                    nf_tensor sel, nf_tensor prob, float scale);
int nf_bucket_gather(nf_graph * g, const char * label, const struct nf_bucket_shape * s, nf_tensor k, nf_tensor v,
                     nf_tensor sel, nf_tensor prob, nf_tensor kcat, nf_tensor vcat, int reuse_keys);

/* y[r] (+)= scale * W[idx[r]] for r < rows: rows of k elements (k = W's
 * row length unless W is a flat view: pass k and ldw), y rows at ldy;
 * n_table rows of W at stride ldw; an idx outside [0, n_table) is a zero row */
struct nf_gather {
    int64_t rows, k, n_table, ldw, ldy;
    float scale; /* 0: 1.0f */
    int accumulate;
};
int nf_gather_rows(nf_graph * g, const char * label, const struct nf_gather * s, nf_tensor idx, nf_tensor W,
                   nf_tensor y);

/* ---- training ops, set A (nf-ops.def: GEMM ... COPY) ---------------------------------- */

/* C (+)= op(A) · op(B), row-major; op(A) (m, k) is A or, trans_a, Aᵀ of A
 * stored (k, m); op(B) (k, n) likewise. dx = dy·W: (dy, 0, W, 0);
 * dW += dyᵀ·x: (dy, trans_a = 1, x, 0, accumulate = 1). */
int nf_gemm(nf_graph * g, const char * label, nf_tensor A, int trans_a, int64_t lda, nf_tensor B, int trans_b,
            int64_t ldb, nf_tensor C, int64_t ldc, int64_t m, int64_t n, int64_t k, int accumulate);
/* y[j] (+)= sum over the m rows of x (stride ldx) of column j, j < n (bias gradients) */
int nf_col_sum(nf_graph * g, const char * label, nf_tensor x, int64_t m, int64_t n, int64_t ldx, nf_tensor y,
               int accumulate);
/* y = act(x) elementwise over n (GELU / ReLU as LINEAR's) */
int nf_act(nf_graph * g, const char * label, nf_tensor x, nf_tensor y, int64_t n, enum nf_act act);
/* dx = dy * act'(x) over n; dx may be dy */
int nf_act_backward(nf_graph * g, const char * label, nf_tensor x, nf_tensor dy, nf_tensor dx, int64_t n,
                    enum nf_act act);
/* the backward of nf_layer_norm: dx (+)= dLN/dx · dy; dgamma += , dbeta += (the caller zeroes them) */
int nf_layer_norm_backward(nf_graph * g, const char * label, nf_tensor x, int64_t rows, int64_t ldx,
                           const nf_tensor * gamma, nf_tensor dy, int64_t lddy, nf_tensor dx, int64_t lddx,
                           nf_tensor dgamma, nf_tensor dbeta, float eps, int accumulate);
/* the float scalars of one AdamW step (nf-ops.def ADAMW; nf_adamw_scalars) */
struct nf_adamw_step {
    float decay, w1, b2, c2, bc2s, eps, s;
};
/* PyTorch's AdamW for step t >= 1 (torch.optim.AdamW, not amsgrad, not maximize) */
void nf_adamw_scalars(double lr, double beta1, double beta2, double eps, double wd, int64_t t,
                      struct nf_adamw_step * out);
/* one AdamW step of the n parameters p with gradient g and moments m, v */
int nf_adamw(nf_graph * g, const char * label, nf_tensor grad, nf_tensor p, nf_tensor m, nf_tensor v, int64_t n,
             const struct nf_adamw_step * st);
/* y = x over n elements */
int nf_copy(nf_graph * g, const char * label, nf_tensor x, nf_tensor y, int64_t n);

/* ---- training ops, set B (nf-ops.def): attention, embeddings, losses ----------------- */

/* dq (overwritten), dk, dv ((+)= by accumulate_kv) of ATTENTION with layout L
 * (dq at q's, dk/dv at k's/v's, dout at o's); stats: scratch of at least
 * 2 * groups * n_heads * lq floats */
int nf_attention_backward(nf_graph * g, const char * label, const struct nf_attn_layout * L, nf_tensor q, nf_tensor k,
                          nf_tensor v, nf_tensor o, nf_tensor dout, nf_tensor dq, nf_tensor dk, nf_tensor dv,
                          nf_tensor stats, int accumulate_kv);
/* dw, db += the gradients of EMBED_FEATURES' w, b */
int nf_embed_features_backward(nf_graph * g, const char * label, nf_tensor z, nf_tensor dtok, nf_tensor dw,
                               nf_tensor db);
/* += the gradients of LABEL_TOKENS' E (class), w and b (value), M (mask) */
int nf_label_tokens_backward_class(nf_graph * g, const char * label, nf_tensor y, nf_tensor dtok, nf_tensor dE);
int nf_label_tokens_backward_value(nf_graph * g, const char * label, nf_tensor y, nf_tensor dtok, nf_tensor dw,
                                   nf_tensor db);
int nf_label_tokens_backward_mask(nf_graph * g, const char * label, nf_tensor dtok, nf_tensor dM);
/* loss = mean cross-entropy of n rows of c logits (rows at ldl) against y;
 * dlogits (n, c) = its gradient times n * grad_scale (dlogits.buf NULL: none) */
int nf_cross_entropy(nf_graph * g, const char * label, nf_tensor logits, int64_t n, int64_t c, int64_t ldl, nf_tensor y,
                     nf_tensor loss, nf_tensor dlogits, float grad_scale);
/* loss = mean squared error of n predictions (at stride ldp) against target;
 * dpred = grad_scale * (pred - target) (dpred.buf NULL: none) */
int nf_mse_loss(nf_graph * g, const char * label, nf_tensor pred, int64_t n, int64_t ldp, nf_tensor target,
                nf_tensor loss, nf_tensor dpred, float grad_scale);

/* ---- training ops, set C (nf-ops.def; TabSTAR's LoRA fine-tuning) -------------------- */

/* the backward of nf_gather_rows with the same shape s (rows = m, k,
 * n_table, ldw, ldy, scale, accumulate): dW[i] (+)= sum of scale * dy[r]
 * over the rows r with idx[r] == i, in row order, summed in double; order
 * and start are the plan nf_scatter_plan makes from idx (i32 tensors) */
int nf_scatter_add_rows(nf_graph * g, const char * label, const struct nf_gather * s, nf_tensor order, nf_tensor start,
                        nf_tensor dy, nf_tensor dW);
/* the plan of SCATTER_ADD_ROWS from idx (m entries): order (m) = the rows r
 * with 0 <= idx[r] < n_table sorted by (idx[r], r) (a stable counting sort;
 * the rest of order is -1), start (n_table + 1): start[i]..start[i+1] the
 * part of order holding the rows of i. NF_ERR_ARG (err may be NULL) when
 * m or n_table is negative or over INT32_MAX. */
int nf_scatter_plan(const int32_t * idx, int64_t m, int64_t n_table, int32_t * order, int32_t * start, nf_err * err);
/* torch.nn.utils.clip_grad_norm_(max_norm) over the n contiguous gradients
 * g (in place); norm (1 float) gets the total norm before clipping */
int nf_clip_grad_norm(nf_graph * g, const char * label, nf_tensor grad, int64_t n, float max_norm, nf_tensor norm);
/* y (+)= a * x over n contiguous floats (y may be x when not accumulating) */
int nf_scale(nf_graph * g, const char * label, nf_tensor x, nf_tensor y, int64_t n, float a, int accumulate);
/* y (+)= mask * x / (1 - p) over n contiguous floats: DROPOUT with drop
 * probability p (0 <= p < 1; the threshold round(p 2^24)) and the mask of
 * seed; the same call on dy is the backward */
int nf_dropout(nf_graph * g, const char * label, nf_tensor x, nf_tensor y, int64_t n, float p, uint64_t seed,
               int accumulate);

/* torch.optim.lr_scheduler.OneCycleLR (two phases, not three_phase) on one
 * param group of Adam/AdamW: the lr and beta1 after s scheduler steps, with
 * PyTorch's double arithmetic (bit for bit: tests/test-train-c.c) */
struct nf_onecycle {
    double max_lr;
    int64_t total_steps;
    double pct_start;        /* torch's default 0.3 */
    int anneal_linear;       /* 0: "cos" (the default), 1: "linear" */
    double div_factor;       /* 25 */
    double final_div_factor; /* 1e4 */
    int cycle_momentum;      /* 1: beta1 cycles between max_momentum and base_momentum */
    double base_momentum;    /* 0.85 */
    double max_momentum;     /* 0.95 */
    double beta1;            /* the optimizer's beta1, kept when !cycle_momentum */
};
/* torch's defaults for max_lr and total_steps (beta1 0.9) */
void nf_onecycle_defaults(struct nf_onecycle * oc, double max_lr, int64_t total_steps);
/* lr and beta1 (either may be NULL) after s steps, 0 <= s <= total_steps
 * (torch raises past it); NF_ERR_ARG (err may be NULL) for s out of range, a
 * bad setting, or a zero-length first phase torch divides by */
int nf_onecycle_at(const struct nf_onecycle * oc, int64_t s, double * lr, double * beta1, nf_err * err);

/* ---- shared sub-blocks ------------------------------------------------------------- */

/* Pre-norm MLP with a residual add (Mitra, BERT's and SpTransformer's
 * feed-forward; post-norm models call the three ops themselves):
 *   x += fc2(act(fc1(LayerNorm(x))))
 * over `rows` rows of D = ln_g->ne[0] elements at stride ldx. Scratch: xn
 * (rows, D) contiguous, h (rows, hidden = w1->ne[0]) contiguous. */
struct nf_mlp {
    const nf_tensor *ln_g, *ln_b; /* the pre-norm                  */
    const nf_tensor *w1, *b1;     /* (hidden, D), (hidden) or NULL */
    const nf_tensor *w2, *b2;     /* (D, hidden), (D) or NULL      */
    float eps;
    enum nf_act act;
    const char *ln_label, *fc1_label, *fc2_label;
};
int nf_prenorm_mlp(nf_graph * g, const struct nf_mlp * p, nf_tensor x, int64_t rows, int64_t ldx, nf_tensor xn,
                   nf_tensor h);

/* Pre-norm multi-head self-attention with packed q, k, v and a residual add:
 *   x += o(MHA(qkv(LayerNorm(x))))
 * x: `groups` sequences of `seq` tokens of D = ln_g->ne[0] elements,
 * contiguous; each sequence attends to itself. w_qkv (3D, D) = [Wq; Wk; Wv]
 * and b_qkv (3D) are packed. Scratch: xn (groups*seq, D), qkv
 * (groups*seq, 3D), a (groups*seq, D), all contiguous. */
struct nf_mhsa {
    const nf_tensor *ln_g, *ln_b;
    const nf_tensor *w_qkv, *b_qkv;
    const nf_tensor *w_o, *b_o;
    int64_t n_heads;
    float eps;
    const char *ln_label, *qkv_label, *attn_label, *o_label;
};
int nf_prenorm_self_attention(nf_graph * g, const struct nf_mhsa * p, nf_tensor x, int64_t groups, int64_t seq,
                              nf_tensor xn, nf_tensor qkv, nf_tensor a);

#endif /* NF_OPS_H */
