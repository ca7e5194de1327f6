/* mitra-train.c -- one Mitra training step on the run's device (mitra-train.h).
 *
 * Forward (finetune.md §1.4 item 4): the JOINT stream X = [support; query]
 * (mitra-forward.h), every layer but the top one in full (there the chunks
 * of support rows alone are skipped: nf__row0), keeping the L+1 residual
 * streams at the layer boundaries (§5.3) and, for the top layers that fit in
 * NF__KEEP_BYTES, the inputs of their sub-blocks b, c, d.
 * Backward (§2), layer by layer from the top: a layer whose sub-block
 * inputs were not kept is run again from its saved input, keeping them; then
 * each sub-block is differentiated chunk by chunk of rows, recomputing its
 * LayerNorm, projections and attention output per chunk: the n x n
 * attention probabilities are never stored (ATTENTION_BACKWARD recomputes
 * them). dX holds d loss / d stream; every LayerNorm backward accumulates
 * into it (the residual's identity path). The row attention's support K/V
 * collect their gradient from every query chunk (dKV) before flowing back
 * through K1/V1 and LayerNorm 1.
 * Gradients land in one arena laid out exactly like the weight buffer
 * (the same offsets), so AdamW is one op over the whole arena and the
 * gradient of a weight is the view at its offset. */
#include "mitra-train.h"
#include "mitra-forward.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { NF__ARENA_G, NF__ARENA_M, NF__ARENA_V, NF__ARENA_BEST, NF__N_ARENAS };

/* bytes the forward may spend on the layers' sub-block inputs (3 streams a
 * layer) so that backward need not run those layers again */
#define NF__KEEP_BYTES ((int64_t) 2 << 30)

struct nf_mitra_train {
    nf_mitra * m;
    int64_t n;    /* floats in the weight buffer and in each arena */
    int64_t step; /* AdamW steps taken */
    nf_tensor arena[NF__N_ARENAS];
    struct nf_workspace arenas;
    /* the step's work area, for one episode shape */
    struct nf__ws * w;
    nf_tensor X_own;  /* w->X as allocated: the step points w->X at other streams */
    nf_tensor Xs;     /* (L+1) streams at the layer boundaries */
    nf_tensor Xsub;   /* inputs of sub-blocks b, c, d: 3 streams per kept layer (slot) */
    int64_t keep;     /* the top `keep` layers' sub-block inputs are saved by the forward */
    int64_t keep_max; /* at most this many (-1: as NF__KEEP_BYTES allows) */
    nf_tensor dX, dKV;
    nf_tensor dXn, dP, dA, Hpre, stats, yq, loss, dlogits;
    struct nf_workspace mem;
};

/* the gradient of weight view W: the view at its offset in arena a */
static nf_tensor nf__gv(const struct nf_mitra_train * t, int a, const nf_tensor * W) {
    nf_tensor v = nf__tensor_view(&t->arena[a], (int64_t) (W->offs - t->m->weights.buf.offs) / 4, W->ndim, W->ne);
    v.name = W->name;
    return v;
}

static void nf__train_ws_free(struct nf_mitra_train * t) {
    t->X_own = (nf_tensor){0};
    nf__workspace_release(&t->mem);
    nf__mitra_ws_free(t->w);
    t->w = NULL;
}

void nf__mitra_train_free(struct nf_mitra_train * t) {
    if (!t) return;
    nf__train_ws_free(t);
    nf__workspace_release(&t->arenas);
    free(t);
}

int nf__mitra_train_new(nf_mitra * m, struct nf_mitra_train ** out, nf_err * err) {
    *out = NULL;
    NF_TRY(nf__mitra_train_check_device(m, err));
    struct nf_mitra_train * t = calloc(1, sizeof(*t));
    if (!t) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    t->m = m;
    t->n = nf__tensor_numel(&m->weights.buf);
    t->keep_max = -1;
    static const char * const names[NF__N_ARENAS] = {"grad", "adam_m", "adam_v", "best_weights"};
    nf_graph g;
    nf_graph_init(&g, m->be, err);
    for (int a = 0; a < NF__N_ARENAS; a++) {
        int rc = nf__workspace_tensor(&t->arenas, m->be, &t->arena[a], NF_F32, 1, &t->n, names[a], err);
        if (rc == NF_OK) rc = nf_fill(&g, names[a], t->arena[a], 1, t->n, t->n, 0.0f);
        if (rc != NF_OK) {
            nf__mitra_train_free(t);
            return rc;
        }
    }
    *out = t;
    return NF_OK;
}

int64_t nf__mitra_train_steps(const struct nf_mitra_train * t) { return t->step; }
int64_t nf__mitra_train_floats(const struct nf_mitra_train * t) { return t->n; }

void nf__mitra_train_keep_layers(struct nf_mitra_train * t, int64_t layers) {
    t->keep_max = layers;
    nf__train_ws_free(t); /* the next step lays its work area out again */
}

int nf__mitra_train_read(const struct nf_mitra_train * t, int what, float * out, nf_err * err) {
    if (what == 0) return nf__tensor_download(&t->m->weights.buf, out, err);
    if (what < 1 || what > NF__N_ARENAS) return nf__err_set(err, NF_ERR_ARG, "no training arena %d", what);
    return nf__tensor_download(&t->arena[what - 1], out, err);
}

int nf__mitra_train_write(struct nf_mitra_train * t, int what, const float * in, int64_t steps, nf_err * err) {
    nf_tensor * dst = what == 0 ? &t->m->weights.buf : what >= 1 && what <= NF__N_ARENAS ? &t->arena[what - 1] : NULL;
    if (!dst) return nf__err_set(err, NF_ERR_ARG, "no training arena %d", what);
    NF_TRY(nf__tensor_upload(dst, in, err));
    if (steps >= 0) t->step = steps;
    return NF_OK;
}

/* ---- the device check ------------------------------------------------------------------- */

int nf__mitra_train_check_device(nf_mitra * m, nf_err * err) {
    static const enum nf_op_type need[] = {
        NF_OP_QUANTILE,
        NF_OP_BUCKETIZE_NORM,
        NF_OP_EMBED_FEATURES,
        NF_OP_LABEL_TOKENS,
        NF_OP_LAYER_NORM,
        NF_OP_LINEAR,
        NF_OP_ATTENTION,
        NF_OP_FILL,
        NF_OP_GEMM,
        NF_OP_COL_SUM,
        NF_OP_ACT,
        NF_OP_ACT_BACKWARD,
        NF_OP_COPY,
        NF_OP_LAYER_NORM_BACKWARD,
        NF_OP_ATTENTION_BACKWARD,
        NF_OP_EMBED_FEATURES_BACKWARD,
        NF_OP_ADAMW,
        NF_OP_CROSS_ENTROPY,
        NF_OP_LABEL_TOKENS_BACKWARD,
        NF_OP_MSE_LOSS,
    };
    /* bf16-autocast: the forward has its rules, the backward ops none yet -- refused here,
     * before the epoch-0 validation, not at the first backward op minutes later */
    if (nf_backend_precision(m->be) == NF_PRECISION_BF16_AUTOCAST)
        return nf__err_set(err, NF_ERR_UNSUPPORTED,
                           "fine-tuning under --precision bf16-autocast: the backward ops have no bf16-autocast rule "
                           "yet (docs/precision.md \"Left to do\"); fine-tune in exact fp32 (--precision exact)");
    const struct nf_kernel * k = m->be->iface->kernels;
    for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
        if (!k || !k[need[i]].run) {
            return nf__err_set(err, NF_ERR_UNSUPPORTED,
                               "op %s: not supported by the %s backend (%s), which fine-tuning needs; nofall does not "
                               "fall back to another device",
                               nf__op_name(need[i]), m->be->iface->kind, m->be->name);
        }
    }
    return NF_OK;
}

/* ---- the work area ------------------------------------------------------------------------ */

static int nf__train_ws(struct nf_mitra_train * t, const struct nf_mitra_input * in, nf_err * err) {
    nf_mitra * m = t->m;
    const int64_t T = in->n_features + 1, D = m->cfg.dim, C = m->cfg.dim_output, L = m->cfg.n_layers;
    const int64_t ct = m->chunk_tokens > T ? m->chunk_tokens : T;
    struct nf__ws * w = t->w;
    if (w && w->ns == in->n_support && w->nq == in->n_query && w->F == in->n_features) return NF_OK;
    nf__train_ws_free(t);
    w = calloc(1, sizeof(*w));
    if (!w) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    *w = (struct nf__ws){.ns = in->n_support, .nq = in->n_query, .F = in->n_features, .T = T, .D = D, .ct = ct};
    w->qc = w->nq;
    w->nx = w->ns + w->nq;
    w->mode = NF__JOINT;
    w->n_kv = 1;
    t->w = w;
    NF_TRY(nf__mitra_ws_alloc(m, w, C, err));
    t->X_own = w->X;
    const int64_t stream = w->nx * T * D, big = ct > w->nq ? ct : w->nq;
#define NF__ALLOC(f, type, name, n)                                                    \
    do {                                                                               \
        const int64_t ne_ = (n);                                                       \
        NF_TRY(nf__workspace_tensor(&t->mem, m->be, &t->f, type, 1, &ne_, name, err)); \
    } while (0)
    NF__ALLOC(Xs, NF_F32, "train.boundary_streams", (L + 1) * stream);
    /* the top layers whose sub-block inputs fit in NF__KEEP_BYTES keep them
     * from the forward (no recompute of the layer in backward); the others
     * recompute into slot 0, free by then (the backward runs top down) */
    const int64_t per_layer = 3 * stream * (int64_t) sizeof(float);
    t->keep = NF__KEEP_BYTES / per_layer < L ? NF__KEEP_BYTES / per_layer : L;
    if (t->keep_max >= 0 && t->keep > t->keep_max) t->keep = t->keep_max;
    NF__ALLOC(Xsub, NF_F32, "train.sublayer_streams", 3 * (t->keep > 0 ? t->keep : 1) * stream);
    NF__ALLOC(dX, NF_F32, "train.d_stream", stream);
    NF__ALLOC(dKV, NF_F32, "train.d_support_kv", nf__mitra_kv_elems(w));
    NF__ALLOC(dXn, NF_F32, "train.d_normed", big * D);
    NF__ALLOC(dP, NF_F32, "train.d_proj", ct * 4 * D);
    NF__ALLOC(dA, NF_F32, "train.d_attn_out", ct * D);
    NF__ALLOC(Hpre, NF_F32, "train.mlp_preact", ct * 4 * D);
    NF__ALLOC(stats, NF_F32, "train.attn_stats", 2 * ct * m->cfg.n_heads);
    NF__ALLOC(yq, nf__mitra_class_labels(&m->cfg) ? NF_I32 : NF_F32, "train.y_query", w->nq);
    NF__ALLOC(loss, NF_F32, "train.loss", 1);
    NF__ALLOC(dlogits, NF_F32, "train.d_logits", w->nq * C);
#undef NF__ALLOC
    return NF_OK;
}

static nf_tensor nf__stream(const struct nf_mitra_train * t, const nf_tensor * arena, int64_t i) {
    const int64_t n = t->w->nx * t->w->T * t->w->D;
    return nf_view1(arena, i * n, n);
}

/* layer l's sub-block input slot: its own when kept, else slot 0 */
static int64_t nf__sub_slot(const struct nf_mitra_train * t, int64_t l) {
    const int64_t first = t->m->cfg.n_layers - t->keep;
    return l >= first ? l - first : 0;
}

static int nf__sub_kept(const struct nf_mitra_train * t, int64_t l) { return l >= t->m->cfg.n_layers - t->keep; }

/* ---- linear backward: y = x Wᵀ + b over `rows` rows ------------------------------------ */

/* dW += dyᵀ x, db += Σ dy, and (dx != NULL) dx = dy W */
static int nf__linear_bwd(nf_graph * g, struct nf_mitra_train * t, const char * name, nf_tensor x, int64_t ldx,
                          const nf_tensor * W, const nf_tensor * b, nf_tensor dy, int64_t lddy, nf_tensor * dx,
                          int64_t lddx, int64_t rows) {
    const int64_t n = W->ne[0], k = W->ne[1];
    NF_TRY(nf_gemm(g, nf_label(g, "%s.dW", name), dy, 1, lddy, x, 0, ldx, nf__gv(t, NF__ARENA_G, W), k, n, k, rows, 1));
    if (b) NF_TRY(nf_col_sum(g, nf_label(g, "%s.db", name), dy, rows, n, lddy, nf__gv(t, NF__ARENA_G, b), 1));
    if (dx) NF_TRY(nf_gemm(g, nf_label(g, "%s.dx", name), dy, 0, lddy, *W, 0, k, *dx, lddx, rows, k, n, 0));
    return NF_OK;
}

static int nf__ln_bwd(nf_graph * g, struct nf_mitra_train * t, const char * name, nf_tensor x, int64_t ldx,
                      const nf_tensor * gam, const nf_tensor * bet, nf_tensor dy, int64_t lddy, nf_tensor dx,
                      int64_t lddx, int64_t rows) {
    return nf_layer_norm_backward(g, nf_label(g, "%s.backward", name), x, rows, ldx, gam, dy, lddy, dx, lddx,
                                  nf__gv(t, NF__ARENA_G, gam), nf__gv(t, NF__ARENA_G, bet), NF_MITRA_LN_EPS, 1);
}

static int64_t nf__crows(const struct nf_mitra_train * t) {
    const int64_t c = t->w->ct / t->w->T;
    return c > 0 ? c : 1;
}

/* ---- sub-block backwards ------------------------------------------------------------------- */

/* (b)/(d): Xin is the sub-block's input stream; dX += d/dXin */
static int nf__mlp_bwd(nf_graph * g, struct nf_mitra_train * t, const struct nf_mitra_layer * L, int half,
                       const nf_tensor * Xin, int64_t rbeg) {
    struct nf__ws * w = t->w;
    const int64_t D = w->D, H = 4 * D, cr = nf__crows(t);
    const int li = 1 + 2 * half;
    const nf_tensor *W1 = &L->lw[2 * half], *b1 = &L->lb[2 * half], *W2 = &L->lw[1 + 2 * half],
                    *b2 = &L->lb[1 + 2 * half];
    for (int64_t r0 = rbeg; r0 < w->nx; r0 += cr) {
        const int64_t r1 = r0 + cr < w->nx ? r0 + cr : w->nx, tok = (r1 - r0) * w->T;
        nf_tensor x = nf__mitra_rows(w, Xin, r0, r1), dy = nf__mitra_rows(w, &t->dX, r0, r1);
        nf_tensor xn = nf_view1(&w->Xn, 0, tok * D), hp = nf_view1(&t->Hpre, 0, tok * H);
        nf_tensor a = nf_view1(&w->H, 0, tok * H), dh = nf_view1(&t->dP, 0, tok * H);
        nf_tensor dxn = nf_view1(&t->dXn, 0, tok * D);
        NF_TRY(nf_layer_norm(g, nf_label(g, "layer_norm%d", li + 1), x, tok, D, &L->ln_w[li], &L->ln_b[li], xn, D,
                             NF_MITRA_LN_EPS));
        NF_TRY(nf_linear(g, nf_label(g, "linear%d", li), xn, tok, D, W1, b1, hp, H, NF_ACT_NONE, 0));
        NF_TRY(nf_act(g, nf_label(g, "linear%d.gelu", li), hp, a, tok * H, NF_ACT_GELU));
        NF_TRY(nf__linear_bwd(g, t, nf_label(g, "linear%d", li + 1), a, H, W2, b2, dy, D, &dh, H, tok));
        NF_TRY(nf_act_backward(g, nf_label(g, "linear%d.gelu.backward", li), hp, dh, dh, tok * H, NF_ACT_GELU));
        NF_TRY(nf__linear_bwd(g, t, nf_label(g, "linear%d", li), xn, D, W1, b1, dh, H, &dxn, D, tok));
        NF_TRY(nf__ln_bwd(g, t, nf_label(g, "layer_norm%d", li + 1), x, D, &L->ln_w[li], &L->ln_b[li], dxn, D, dy, D,
                          tok));
    }
    return NF_OK;
}

/* (c): feature attention over the T tokens of each row */
static int nf__feature_attention_bwd(nf_graph * g, struct nf_mitra_train * t, const struct nf_mitra_layer * L,
                                     const nf_tensor * Xin, int64_t rbeg) {
    struct nf__ws * w = t->w;
    const nf_mitra * m = t->m;
    const int64_t D = w->D, D3 = 3 * D, T = w->T, cr = nf__crows(t);
    for (int64_t r0 = rbeg; r0 < w->nx; r0 += cr) {
        const int64_t r1 = r0 + cr < w->nx ? r0 + cr : w->nx, c = r1 - r0, tok = c * T, n3 = tok * D3;
        nf_tensor x = nf__mitra_rows(w, Xin, r0, r1), dy = nf__mitra_rows(w, &t->dX, r0, r1);
        nf_tensor xn = nf_view1(&w->Xn, 0, tok * D), qkv = nf_view1(&w->Pqkv, 0, n3);
        nf_tensor o = nf_view1(&w->A, 0, tok * D), dO = nf_view1(&t->dA, 0, tok * D);
        nf_tensor dqkv = nf_view1(&t->dP, 0, n3), dxn = nf_view1(&t->dXn, 0, tok * D);
        NF_TRY(
            nf_layer_norm(g, nf_label(g, "layer_norm3"), x, tok, D, &L->ln_w[2], &L->ln_b[2], xn, D, NF_MITRA_LN_EPS));
        NF_TRY(nf_linear(g, nf_label(g, "attention2.qkv"), xn, tok, D, &L->qkv_w[1], &L->qkv_b[1], qkv, D3, NF_ACT_NONE,
                         0));
        const struct nf_attn_layout lay = {
            .groups = c,
            .lq = T,
            .lk = T,
            .n_heads = m->cfg.n_heads,
            .head_dim = D / m->cfg.n_heads,
            .q_gs = T * D3,
            .q_ss = D3,
            .kv_gs = T * D3,
            .kv_ss = D3,
            .o_gs = T * D,
            .o_ss = D,
        };
        NF_TRY(nf_attention(g, nf_label(g, "attention2"), &lay, nf_view1(&qkv, 0, n3), nf_view1(&qkv, D, n3 - D),
                            nf_view1(&qkv, 2 * D, n3 - 2 * D), o));
        NF_TRY(nf__linear_bwd(g, t, "attention2.o", o, D, &L->aw[1][3], &L->ab[1][3], dy, D, &dO, D, tok));
        NF_TRY(nf_attention_backward(g, nf_label(g, "attention2.backward"), &lay, nf_view1(&qkv, 0, n3),
                                     nf_view1(&qkv, D, n3 - D), nf_view1(&qkv, 2 * D, n3 - 2 * D), o, dO,
                                     nf_view1(&dqkv, 0, n3), nf_view1(&dqkv, D, n3 - D),
                                     nf_view1(&dqkv, 2 * D, n3 - 2 * D), t->stats, 0));
        NF_TRY(nf__linear_bwd(g, t, "attention2.qkv", xn, D, &L->qkv_w[1], &L->qkv_b[1], dqkv, D3, &dxn, D, tok));
        NF_TRY(nf__ln_bwd(g, t, "layer_norm3", x, D, &L->ln_w[2], &L->ln_b[2], dxn, D, dy, D, tok));
    }
    return NF_OK;
}

/* (a): row attention; the support K/V (in w->KV: recomputed unless
 * kv_ready, the layer's forward having just left them there) collect their
 * gradient from every row's query first */
static int nf__row_attention_bwd(nf_graph * g, struct nf_mitra_train * t, const struct nf_mitra_layer * L,
                                 const nf_tensor * Xin, int kv_ready, int64_t rbeg) {
    struct nf__ws * w = t->w;
    const nf_mitra * m = t->m;
    const int64_t D = w->D, D2 = 2 * D, T = w->T, cr = nf__crows(t), nkv = w->ns * T * D2;
    nf_tensor kv = nf__mitra_kv(w, 0);
    /* K/V of the support rows, from the input stream */
    if (!kv_ready) {
        const nf_tensor X_saved = w->X;
        w->X = *Xin;
        int rc = nf__mitra_row_kv(g, w, L, kv, cr);
        w->X = X_saved;
        NF_TRY(rc);
    }
    NF_TRY(nf_fill(g, nf_label(g, "attention1.d_kv"), t->dKV, 1, nkv, nkv, 0.0f));
    for (int64_t r0 = rbeg, r1; r0 < w->nx; r0 = r1) {
        const int64_t lim = r0 < w->ns ? w->ns : w->nx;
        r1 = r0 + cr < lim ? r0 + cr : lim;
        const int64_t tok = (r1 - r0) * T;
        nf_tensor x = nf__mitra_rows(w, Xin, r0, r1), dy = nf__mitra_rows(w, &t->dX, r0, r1);
        nf_tensor xn = nf_view1(&w->Xn, 0, tok * D), q = nf_view1(&w->Pqkv, 0, tok * D);
        nf_tensor o = nf_view1(&w->A, 0, tok * D), dO = nf_view1(&t->dA, 0, tok * D);
        nf_tensor dq = nf_view1(&t->dP, 0, tok * D), dxn = nf_view1(&t->dXn, 0, tok * D);
        const struct nf_attn_layout lay = nf__mitra_row_layout(w, m, r1 - r0);
        NF_TRY(
            nf_layer_norm(g, nf_label(g, "layer_norm1"), x, tok, D, &L->ln_w[0], &L->ln_b[0], xn, D, NF_MITRA_LN_EPS));
        NF_TRY(nf_linear(g, nf_label(g, "attention1.q"), xn, tok, D, &L->aw[0][0], &L->ab[0][0], q, D, NF_ACT_NONE, 0));
        NF_TRY(
            nf_attention(g, nf_label(g, "attention1"), &lay, q, nf_view1(&kv, 0, nkv), nf_view1(&kv, D, nkv - D), o));
        NF_TRY(nf__linear_bwd(g, t, "attention1.o", o, D, &L->aw[0][3], &L->ab[0][3], dy, D, &dO, D, tok));
        NF_TRY(nf_attention_backward(g, nf_label(g, "attention1.backward"), &lay, q, nf_view1(&kv, 0, nkv),
                                     nf_view1(&kv, D, nkv - D), o, dO, dq, nf_view1(&t->dKV, 0, nkv),
                                     nf_view1(&t->dKV, D, nkv - D), t->stats, 1));
        NF_TRY(nf__linear_bwd(g, t, "attention1.q", xn, D, &L->aw[0][0], &L->ab[0][0], dq, D, &dxn, D, tok));
        NF_TRY(nf__ln_bwd(g, t, "layer_norm1", x, D, &L->ln_w[0], &L->ln_b[0], dxn, D, dy, D, tok));
    }
    /* the support rows' K/V path */
    for (int64_t r0 = 0; r0 < w->ns; r0 += cr) {
        const int64_t r1 = r0 + cr < w->ns ? r0 + cr : w->ns, tok = (r1 - r0) * T;
        nf_tensor x = nf__mitra_rows(w, Xin, r0, r1), dy = nf__mitra_rows(w, &t->dX, r0, r1);
        nf_tensor xn = nf_view1(&w->Xn, 0, tok * D), dxn = nf_view1(&t->dXn, 0, tok * D);
        NF_TRY(
            nf_layer_norm(g, nf_label(g, "layer_norm1"), x, tok, D, &L->ln_w[0], &L->ln_b[0], xn, D, NF_MITRA_LN_EPS));
        NF_TRY(nf__linear_bwd(g, t, "attention1.kv", xn, D, &L->kv_w[0], &L->kv_b[0],
                              nf_view1(&t->dKV, r0 * T * D2, tok * D2), D2, &dxn, D, tok));
        NF_TRY(nf__ln_bwd(g, t, "layer_norm1", x, D, &L->ln_w[0], &L->ln_b[0], dxn, D, dy, D, tok));
    }
    return NF_OK;
}

/* ---- forward pieces on a chosen stream ------------------------------------------------------- */

/* one whole layer on stream X (in place), every row, every token */
/* The first row of layer l whose update is computed (forward) and
 * differentiated (backward): 0, but in the top layer, whose support rows
 * only give the row attention its keys and values (the head reads the query
 * rows), the chunks of support rows alone are skipped: the row attention's
 * from n_s (its chunks stop there), the other sub-blocks' from the chunk
 * holding row n_s (their chunks run from row 0 across it). Those rows'
 * gradient there is exactly 0 (it flows back only through the K/V), so the
 * skipped products would add exact zeros; the rows computed, and their
 * chunks, are the same as without the skip, so every result is bit for bit
 * the same. A straddling chunk's support rows read stale (finite) inputs
 * whose products with their zero gradient are zero all the same. */
static int64_t nf__row0(const struct nf_mitra_train * t, int l, int row_attention) {
    if (l != t->m->cfg.n_layers - 1) return 0;
    return row_attention ? t->w->ns : t->w->ns / nf__crows(t) * nf__crows(t);
}

static int nf__layer_fwd(nf_graph * g, struct nf_mitra_train * t, int l, nf_tensor X, nf_tensor * sub) {
    struct nf__ws * w = t->w;
    const nf_mitra * m = t->m;
    const struct nf_mitra_layer * L = &m->layers[l];
    const int64_t cr = nf__crows(t), n = w->nx * w->T * w->D, ra0 = nf__row0(t, l, 1), r0 = nf__row0(t, l, 0);
    const nf_tensor X_saved = w->X;
    w->X = X;
    int rc = nf__mitra_row_kv(g, w, L, nf__mitra_kv(w, 0), cr);
    if (rc == NF_OK) rc = nf__mitra_row_attend(g, w, m, L, nf__mitra_kv(w, 0), ra0, w->nx, cr);
    if (rc == NF_OK && sub) rc = nf_copy(g, "train.save_sublayer", X, sub[0], n);
    if (rc == NF_OK) rc = nf__mitra_mlp(g, w, L, 0, r0, w->nx, cr, 0);
    if (rc == NF_OK && sub) rc = nf_copy(g, "train.save_sublayer", X, sub[1], n);
    if (rc == NF_OK) rc = nf__mitra_feature_attention(g, w, m, L, r0, w->nx, cr, 0);
    if (rc == NF_OK && sub) rc = nf_copy(g, "train.save_sublayer", X, sub[2], n);
    if (rc == NF_OK) rc = nf__mitra_mlp(g, w, L, 1, r0, w->nx, cr, 0);
    w->X = X_saved;
    return rc;
}

static int nf__upload_inputs(struct nf_mitra_train * t, const struct nf_mitra_input * in, const int64_t * yqc,
                             const float * yqv, nf_err * err) {
    struct nf__ws * w = t->w;
    NF_TRY(nf__tensor_upload(&w->xs, in->x_support, err));
    NF_TRY(nf__tensor_upload(&w->xq, in->x_query, err));
    if (!nf__mitra_class_labels(&t->m->cfg)) {
        NF_TRY(nf__tensor_upload(&w->ys, in->y_value, err));
        return nf__tensor_upload(&t->yq, yqv, err);
    }
    const int64_t n = w->ns > w->nq ? w->ns : w->nq;
    int32_t * y32 = malloc((size_t) n * sizeof(int32_t));
    if (!y32) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < w->ns; i++) y32[i] = (int32_t) in->y_class[i];
    int rc = nf__tensor_upload(&w->ys, y32, err);
    for (int64_t i = 0; rc == NF_OK && i < w->nq; i++) y32[i] = (int32_t) yqc[i];
    if (rc == NF_OK) rc = nf__tensor_upload(&t->yq, y32, err);
    free(y32);
    return rc;
}

/* ---- the step ----------------------------------------------------------------------------------- */

static int nf__train_grad(struct nf_mitra_train * t, const struct nf_mitra_input * in, const int64_t * yqc,
                          const float * yqv, float * loss, float * logits, nf_err * err) {
    nf_mitra * m = t->m;
    NF_TRY(nf__train_ws(t, in, err));
    struct nf__ws * w = t->w;
    const int64_t D = w->D, T = w->T, C = m->cfg.dim_output, nL = m->cfg.n_layers, n = w->nx * T * D;
    const int cls = nf__mitra_class_labels(&m->cfg);
    NF_TRY(nf__upload_inputs(t, in, yqc, yqv, err));
    nf_graph gr, *g = &gr;
    nf_graph_init(g, m->be, err);
    NF_TRY(nf_fill(g, "train.zero_grad", t->arena[NF__ARENA_G], 1, t->n, t->n, 0.0f));

    /* forward: embeddings into stream 0, layer l from stream l into stream l+1 */
    NF_TRY(nf_quantile(g, "x_quantile", w->xs, w->B, NF_MITRA_N_QUANTILES, NF_MITRA_Q_DENOM));
    NF_TRY(nf_bucketize_norm(g, "x_quantile", w->xs, w->xq, w->B, w->zs, w->zq));
    w->X = nf__stream(t, &t->Xs, 0);
    NF_TRY(nf__mitra_embed_support(g, m, w));
    NF_TRY(nf__mitra_embed_queries(g, m, w, 0, w->nq));
    for (int l = 0; l < nL; l++) {
        nf_graph_prefix(g, "layers.%d.", l);
        nf_tensor next = nf__stream(t, &t->Xs, l + 1);
        NF_TRY(nf_copy(g, "train.stream", nf__stream(t, &t->Xs, l), next, n));
        const int64_t s0 = 3 * nf__sub_slot(t, l);
        nf_tensor sub[3] = {nf__stream(t, &t->Xsub, s0), nf__stream(t, &t->Xsub, s0 + 1),
                            nf__stream(t, &t->Xsub, s0 + 2)};
        NF_TRY(nf__layer_fwd(g, t, l, next, nf__sub_kept(t, l) ? sub : NULL));
    }
    nf_graph_prefix(g, "%s", "");
    w->X = nf__stream(t, &t->Xs, (int) nL);
    NF_TRY(nf__mitra_head(g, m, w, 0, w->nq));

    /* loss and d logits */
    if (cls) {
        NF_TRY(nf_cross_entropy(g, "loss.cross_entropy", w->logits, w->nq, C, C, t->yq, t->loss, t->dlogits,
                                (float) (1.0 / (double) w->nq)));
    } else {
        NF_TRY(nf_mse_loss(g, "loss.mse", w->logits, w->nq, C, t->yq, t->loss, t->dlogits,
                           (float) (2.0 / (double) w->nq)));
    }

    /* backward: the head, token 0 of the query rows */
    NF_TRY(nf_fill(g, "train.d_stream", t->dX, 1, n, n, 0.0f));
    nf_tensor hq = nf_view1(&w->hq, 0, w->nq * D), dhq = nf_view1(&t->dXn, 0, w->nq * D);
    NF_TRY(nf__linear_bwd(g, t, "final_layer", hq, D, &m->f_w, &m->f_b, t->dlogits, C, &dhq, D, w->nq));
    NF_TRY(nf__ln_bwd(g, t, "final_layer_norm", nf__mitra_rows(w, &w->X, w->ns, w->nx), T * D, &m->fln_w, &m->fln_b,
                      dhq, D, nf__mitra_rows(w, &t->dX, w->ns, w->nx), T * D, w->nq));

    /* the layers, from the top; w->KV holds the top layer's support K/V
     * (the forward's last) */
    int kv_ready = 1;
    for (int l = (int) nL - 1; l >= 0; l--) {
        nf_graph_prefix(g, "layers.%d.", l);
        const struct nf_mitra_layer * L = &m->layers[l];
        const nf_tensor Xin = nf__stream(t, &t->Xs, l);
        const int64_t s0 = 3 * nf__sub_slot(t, l);
        nf_tensor sub[3] = {nf__stream(t, &t->Xsub, s0), nf__stream(t, &t->Xsub, s0 + 1),
                            nf__stream(t, &t->Xsub, s0 + 2)};
        if (!nf__sub_kept(t, l)) {
            /* the layer again from its input: the inputs of sub-blocks b, c, d
             * (and its support K/V in w->KV) */
            nf_tensor scratch = nf__stream(t, &t->Xs, l + 1); /* stream l+1 is no longer needed */
            NF_TRY(nf_copy(g, "train.stream", Xin, scratch, n));
            NF_TRY(nf__layer_fwd(g, t, l, scratch, sub));
            kv_ready = 1;
        }
        const int64_t r0 = nf__row0(t, l, 0);
        NF_TRY(nf__mlp_bwd(g, t, L, 1, &sub[2], r0));
        NF_TRY(nf__feature_attention_bwd(g, t, L, &sub[1], r0));
        NF_TRY(nf__mlp_bwd(g, t, L, 0, &sub[0], r0));
        NF_TRY(nf__row_attention_bwd(g, t, L, &Xin, kv_ready, nf__row0(t, l, 1)));
        kv_ready = 0;
    }
    nf_graph_prefix(g, "%s", "");

    /* the embeddings */
    const int64_t ne_s[3] = {w->ns, T, D}, ne_q[3] = {w->nq, T, D};
    nf_tensor dS = nf__tensor_view(&t->dX, 0, 3, ne_s), dQ = nf__tensor_view(&t->dX, w->ns * T * D, 3, ne_q);
    const nf_tensor gxw = nf__gv(t, NF__ARENA_G, &m->x_w), gxb = nf__gv(t, NF__ARENA_G, &m->x_b);
    NF_TRY(nf_embed_features_backward(g, "x_embedding.backward", w->zs, dS, gxw, gxb));
    NF_TRY(nf_embed_features_backward(g, "x_embedding.backward", w->zq, dQ, gxw, gxb));
    if (cls) {
        NF_TRY(nf_label_tokens_backward_class(g, "y_embedding.backward", w->ys, dS, nf__gv(t, NF__ARENA_G, &m->y_w)));
    } else {
        NF_TRY(nf_label_tokens_backward_value(g, "y_embedding.backward", w->ys, dS, nf__gv(t, NF__ARENA_G, &m->y_w),
                                              nf__gv(t, NF__ARENA_G, &m->y_b)));
    }
    NF_TRY(nf_label_tokens_backward_mask(g, "y_embedding.y_mask.backward", dQ, nf__gv(t, NF__ARENA_G, &m->y_mask)));

    /* outputs: the loss (and the logits) are the step's only device->host copies */
    NF_TRY(nf__tensor_download(&t->loss, loss, err));
    if (logits) NF_TRY(nf__tensor_download(&w->logits, logits, err));
    return NF_OK;
}

int nf__mitra_train_grad(struct nf_mitra_train * t, const struct nf_mitra_input * in, const int64_t * y_query_class,
                         const float * y_query_value, float * loss, float * logits, nf_err * err) {
    NF_TRY(nf__mitra_check_input(t->m, in, err));
    const int cls = nf__mitra_class_labels(&t->m->cfg);
    if (cls ? !y_query_class : !y_query_value) return nf__err_set(err, NF_ERR_ARG, "training step: no query targets");
    for (int64_t i = 0; cls && i < in->n_query; i++) {
        if (y_query_class[i] < 0 || y_query_class[i] >= t->m->cfg.dim_output) {
            return nf__err_set(err, NF_ERR_INPUT, "query label %lld is out of range 0..%d",
                               (long long) y_query_class[i], t->m->cfg.dim_output - 1);
        }
    }
    nf__trace_where_reset(t->m->be);
    int rc = nf__train_grad(t, in, y_query_class, y_query_value, loss, logits, err);
    if (t->w && t->X_own.buf) t->w->X = t->X_own; /* the workspace frees what it allocated */
    if (rc != NF_OK) nf__train_ws_free(t);
    nf__trace_where(t->m->be, t->m->placement.ops, sizeof(t->m->placement.ops));
    return rc;
}

int nf__mitra_train_adamw(struct nf_mitra_train * t, double lr, double beta1, double beta2, double eps, double wd,
                          nf_err * err) {
    struct nf_adamw_step st;
    nf_adamw_scalars(lr, beta1, beta2, eps, wd, t->step + 1, &st);
    nf_graph g;
    nf_graph_init(&g, t->m->be, err);
    NF_TRY(nf_adamw(&g, "adamw", t->arena[NF__ARENA_G], t->m->weights.buf, t->arena[NF__ARENA_M], t->arena[NF__ARENA_V],
                    t->n, &st));
    t->step++;
    return NF_OK;
}

int nf__mitra_train_save_best(struct nf_mitra_train * t, nf_err * err) {
    nf_graph g;
    nf_graph_init(&g, t->m->be, err);
    return nf_copy(&g, "best_weights.save", t->m->weights.buf, t->arena[NF__ARENA_BEST], t->n);
}

int nf__mitra_train_restore_best(struct nf_mitra_train * t, nf_err * err) {
    nf_graph g;
    nf_graph_init(&g, t->m->be, err);
    return nf_copy(&g, "best_weights.restore", t->arena[NF__ARENA_BEST], t->m->weights.buf, t->n);
}
