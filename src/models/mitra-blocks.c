/* mitra-blocks.c -- Mitra's forward sub-blocks on the core's typed op calls
 * (mitra-forward.h): the work area, the row attention, the MLPs, the feature
 * attention, the embeddings and the head. The inference forward (mitra.c)
 * and the training step (mitra-train.c) are both written with them.
 * Spec: shared/specs/mitra.md §4. */
#include "mitra-forward.h"

#include <stdlib.h>

void nf__mitra_ws_free_host(struct nf__ws * w) {
    free(w->host_s);
    free(w->host_q);
    w->host_s = w->host_q = NULL;
}

void nf__mitra_ws_free(struct nf__ws * w) {
    if (!w) return;
    nf__workspace_release(&w->mem);
    nf__mitra_ws_free_host(w);
    free(w);
}

/* floats of one K/V slice: [k v] of the support rows, (n_s, T, 2D) */
int64_t nf__mitra_kv_elems(const struct nf__ws * w) { return w->ns * w->T * 2 * w->D; }

int nf__mitra_ws_alloc(nf_mitra * m, struct nf__ws * w, int64_t C, nf_err * err) {
    nf_backend * be = m->be;
    const int64_t D = w->D, T = w->T;
#define NF__ALLOC(t, type, nd, name, ...)                                           \
    do {                                                                            \
        int64_t ne_[] = {__VA_ARGS__};                                              \
        NF_TRY(nf__workspace_tensor(&w->mem, be, &w->t, type, nd, ne_, name, err)); \
    } while (0)
    NF__ALLOC(xs, NF_F32, 2, "x_support", w->ns, w->F);
    NF__ALLOC(xq, NF_F32, 2, "x_query", w->nq, w->F);
    NF__ALLOC(ys, nf__mitra_class_labels(&m->cfg) ? NF_I32 : NF_F32, 1, "y_support", w->ns);
    NF__ALLOC(B, NF_F32, 2, "quantile_boundaries", w->F, NF_MITRA_N_QUANTILES);
    NF__ALLOC(zs, NF_F32, 2, "z_support", w->ns, w->F);
    NF__ALLOC(zq, NF_F32, 2, "z_query", w->nq, w->F);
    NF__ALLOC(X, NF_F32, 3, "stream", w->nx, T, D);
    NF__ALLOC(KV, NF_F32, 1, "support_kv", w->n_kv * nf__mitra_kv_elems(w));
    NF__ALLOC(Xn, NF_F32, 1, "normed", w->ct * D);
    NF__ALLOC(Pqkv, NF_F32, 1, "proj_qkv", w->ct * 3 * D);
    NF__ALLOC(A, NF_F32, 1, "attn_out", w->ct * D);
    NF__ALLOC(H, NF_F32, 1, "mlp_hidden", w->ct * 4 * D);
    NF__ALLOC(hq, NF_F32, 2, "head_normed", w->qc, D);
    NF__ALLOC(logits, NF_F32, 2, "logits", w->nq, C);
#undef NF__ALLOC
    return NF_OK;
}

/* rows [r0, r1) of the stream, as a flat view */
nf_tensor nf__mitra_rows(const struct nf__ws * w, const nf_tensor * t, int64_t r0, int64_t r1) {
    return nf_view1(t, r0 * w->T * w->D, (r1 - r0) * w->T * w->D);
}

/* K/V slice i: (n_s, T, 2D) */
nf_tensor nf__mitra_kv(const struct nf__ws * w, int i) {
    const int64_t n = nf__mitra_kv_elems(w);
    return nf_view1(&w->KV, i * n, n);
}

/* ---- forward: sub-blocks ------------------------------------------------------------------- */

/* (b)/(d): X += linear_{2h+2}(GELU(linear_{2h+1}(LN_{2h+2}(X)))) for rows
 * [rbeg, rend); tok0: token 0 of each row only (the last layer's queries) */
int nf__mitra_mlp(nf_graph * g, struct nf__ws * w, const struct nf_mitra_layer * L, int half, int64_t rbeg,
                  int64_t rend, int64_t crows, int tok0) {
    const struct nf_mlp mlp = {
        .ln_g = &L->ln_w[1 + 2 * half],
        .ln_b = &L->ln_b[1 + 2 * half],
        .w1 = &L->lw[2 * half],
        .b1 = &L->lb[2 * half],
        .w2 = &L->lw[1 + 2 * half],
        .b2 = &L->lb[1 + 2 * half],
        .eps = NF_MITRA_LN_EPS,
        .act = NF_ACT_GELU,
        .ln_label = nf_label(g, "layer_norm%d", 2 + 2 * half),
        .fc1_label = nf_label(g, "linear%d", 1 + 2 * half),
        .fc2_label = nf_label(g, "linear%d", 2 + 2 * half),
    };
    /* tok0: one row of D per stream row, at the stream row's stride */
    const int64_t per_row = tok0 ? 1 : w->T, ldx = tok0 ? w->T * w->D : w->D;
    for (int64_t r0 = rbeg; r0 < rend; r0 += crows) {
        const int64_t r1 = r0 + crows < rend ? r0 + crows : rend;
        NF_TRY(nf_prenorm_mlp(g, &mlp, nf__mitra_rows(w, &w->X, r0, r1), (r1 - r0) * per_row, ldx, w->Xn, w->H));
    }
    return NF_OK;
}

/* (c), the last layer's queries: only token 0 is read downstream (the head),
 * so only its query, attention and output are computed; the keys and values
 * are every token's (spec §4.9) */
static int nf__feature_attention_tok0(nf_graph * g, struct nf__ws * w, const nf_mitra * m,
                                      const struct nf_mitra_layer * L, int64_t r0, int64_t r1) {
    const int64_t D = w->D, T = w->T, c = r1 - r0, tok = c * T;
    nf_tensor x = nf__mitra_rows(w, &w->X, r0, r1), kv = nf_view1(&w->Pqkv, 0, tok * 2 * D);
    nf_tensor q = nf_view1(&w->Pqkv, 2 * w->ct * D, c * D), a = nf_view1(&w->A, 0, c * D);
    NF_TRY(
        nf_layer_norm(g, nf_label(g, "layer_norm3"), x, tok, D, &L->ln_w[2], &L->ln_b[2], w->Xn, D, NF_MITRA_LN_EPS));
    NF_TRY(
        nf_linear(g, nf_label(g, "attention2.kv"), w->Xn, tok, D, &L->kv_w[1], &L->kv_b[1], kv, 2 * D, NF_ACT_NONE, 0));
    NF_TRY(
        nf_linear(g, nf_label(g, "attention2.q"), w->Xn, c, T * D, &L->aw[1][0], &L->ab[1][0], q, D, NF_ACT_NONE, 0));
    const struct nf_attn_layout lay = {
        .groups = c,
        .lq = 1,
        .lk = T,
        .n_heads = m->cfg.n_heads,
        .head_dim = D / m->cfg.n_heads,
        .q_gs = D,
        .q_ss = D,
        .kv_gs = T * 2 * D,
        .kv_ss = 2 * D,
        .o_gs = D,
        .o_ss = D,
    };
    NF_TRY(nf_attention(g, nf_label(g, "attention2"), &lay, q, kv, nf_view1(&kv, D, tok * 2 * D - D), a));
    return nf_linear(g, nf_label(g, "attention2.o"), a, c, D, &L->aw[1][3], &L->ab[1][3], x, T * D, NF_ACT_NONE, 1);
}

/* (c): X[r] += O2(MHA over the T tokens of row r) for rows [rbeg, rend);
 * tok0: token 0 only (nf__feature_attention_tok0) */
int nf__mitra_feature_attention(nf_graph * g, struct nf__ws * w, const nf_mitra * m, const struct nf_mitra_layer * L,
                                int64_t rbeg, int64_t rend, int64_t crows, int tok0) {
    const struct nf_mhsa mhsa = {
        .ln_g = &L->ln_w[2],
        .ln_b = &L->ln_b[2],
        .w_qkv = &L->qkv_w[1],
        .b_qkv = &L->qkv_b[1],
        .w_o = &L->aw[1][3],
        .b_o = &L->ab[1][3],
        .n_heads = m->cfg.n_heads,
        .eps = NF_MITRA_LN_EPS,
        .ln_label = nf_label(g, "layer_norm3"),
        .qkv_label = nf_label(g, "attention2.qkv"),
        .attn_label = nf_label(g, "attention2"),
        .o_label = nf_label(g, "attention2.o"),
    };
    for (int64_t r0 = rbeg; r0 < rend; r0 += crows) {
        const int64_t r1 = r0 + crows < rend ? r0 + crows : rend;
        NF_TRY(tok0 ? nf__feature_attention_tok0(g, w, m, L, r0, r1)
                    : nf_prenorm_self_attention(g, &mhsa, nf__mitra_rows(w, &w->X, r0, r1), r1 - r0, w->T, w->Xn,
                                                w->Pqkv, w->A));
    }
    return NF_OK;
}

/* (a), first half: kv (n_s, T, 2D) = [K1 V1] LN1(S) of the support rows,
 * before any row of this layer changes */
int nf__mitra_row_kv(nf_graph * g, struct nf__ws * w, const struct nf_mitra_layer * L, nf_tensor kv, int64_t crows) {
    const int64_t D = w->D, T = w->T;
    for (int64_t r0 = 0; r0 < w->ns; r0 += crows) {
        const int64_t r1 = r0 + crows < w->ns ? r0 + crows : w->ns, tok = (r1 - r0) * T;
        NF_TRY(nf_layer_norm(g, nf_label(g, "layer_norm1"), nf__mitra_rows(w, &w->X, r0, r1), tok, D, &L->ln_w[0],
                             &L->ln_b[0], w->Xn, D, NF_MITRA_LN_EPS));
        /* upstream projects the row attention's rearranged (non-contiguous)
         * input with matmul + add: under bf16 autocast, two roundings */
        g->linear_bias_after_round = 1;
        const int rc = nf_linear(g, nf_label(g, "attention1.kv"), w->Xn, tok, D, &L->kv_w[0], &L->kv_b[0],
                                 nf_view1(&kv, r0 * T * 2 * D, tok * 2 * D), 2 * D, NF_ACT_NONE, 0);
        g->linear_bias_after_round = 0;
        NF_TRY(rc);
    }
    return NF_OK;
}

/* the row attention's layout for c rows of q (a chunk's, (c, T, D)) against
 * the support rows' packed [k v] (n_s, T, 2D): one group per token column */
struct nf_attn_layout nf__mitra_row_layout(const struct nf__ws * w, const nf_mitra * m, int64_t c) {
    const int64_t D = w->D, T = w->T;
    return (struct nf_attn_layout){
        .groups = T,
        .lq = c,
        .lk = w->ns,
        .n_heads = m->cfg.n_heads,
        .head_dim = D / m->cfg.n_heads,
        .q_gs = D,
        .q_ss = T * D,
        .kv_gs = 2 * D,
        .kv_ss = T * 2 * D,
        .o_gs = D,
        .o_ss = T * D,
    };
}

/* (a), second half: per token column, rows [rbeg, rend) attend to the
 * support rows' kv: X += O1(MHA(Q1 LN1(X), kv)), chunk by chunk. A chunk's
 * q is projected before its own rows change, and no row reads another's q,
 * so support and query rows are treated alike. */
int nf__mitra_row_attend(nf_graph * g, struct nf__ws * w, const nf_mitra * m, const struct nf_mitra_layer * L,
                         nf_tensor kv, int64_t rbeg, int64_t rend, int64_t crows) {
    const int64_t D = w->D, T = w->T, D2 = 2 * D, nkv = w->ns * T * D2;
    for (int64_t r0 = rbeg, r1; r0 < rend; r0 = r1) {
        /* chunks do not straddle the support/query boundary */
        const int64_t lim = r0 < w->ns && rend > w->ns ? w->ns : rend;
        r1 = r0 + crows < lim ? r0 + crows : lim;
        const int64_t c = r1 - r0, tok = c * T;
        nf_tensor x = nf__mitra_rows(w, &w->X, r0, r1), q = nf_view1(&w->Pqkv, 0, tok * D);
        NF_TRY(nf_layer_norm(g, nf_label(g, "layer_norm1"), x, tok, D, &L->ln_w[0], &L->ln_b[0], w->Xn, D,
                             NF_MITRA_LN_EPS));
        g->linear_bias_after_round = 1; /* as attention1.kv (nf__mitra_row_kv) */
        const int rc = nf_linear(g, nf_label(g, "attention1.q"), w->Xn, tok, D, &L->aw[0][0], &L->ab[0][0], q, D,
                                 NF_ACT_NONE, 0);
        g->linear_bias_after_round = 0;
        NF_TRY(rc);
        const struct nf_attn_layout lay = nf__mitra_row_layout(w, m, c);
        NF_TRY(nf_attention(g, nf_label(g, "attention1"), &lay, q, nf_view1(&kv, 0, nkv), nf_view1(&kv, D, nkv - D),
                            w->A));
        NF_TRY(
            nf_linear(g, nf_label(g, "attention1.o"), w->A, tok, D, &L->aw[0][3], &L->ab[0][3], x, D, NF_ACT_NONE, 1));
    }
    return NF_OK;
}

/* step 2 (spec §4.3): token embeddings of the support rows into X[0, n_s);
 * token 0 = label, 1..F = features */
int nf__mitra_embed_support(nf_graph * g, const nf_mitra * m, struct nf__ws * w) {
    const int64_t ne[3] = {w->ns, w->T, w->D};
    nf_tensor S = nf__tensor_view(&w->X, 0, 3, ne);
    NF_TRY(nf_embed_features(g, "x_embedding", w->zs, &m->x_w, &m->x_b, S));
    if (nf__mitra_class_labels(&m->cfg)) return nf_label_tokens_class(g, "y_embedding", w->ys, &m->y_w, S);
    return nf_label_tokens_value(g, "y_embedding", w->ys, &m->y_w, &m->y_b, S);
}

/* ... and of query rows [q0, q0 + c) into X[n_s, n_s + c), label token masked */
int nf__mitra_embed_queries(nf_graph * g, const nf_mitra * m, struct nf__ws * w, int64_t q0, int64_t c) {
    const int64_t ne_z[2] = {c, w->F}, ne[3] = {c, w->T, w->D};
    nf_tensor Q = nf__tensor_view(&w->X, w->ns * w->T * w->D, 3, ne);
    NF_TRY(nf_embed_features(g, "x_embedding", nf__tensor_view(&w->zq, q0 * w->F, 2, ne_z), &m->x_w, &m->x_b, Q));
    return nf_label_tokens_mask(g, "y_embedding.y_mask", &m->y_mask, Q);
}

/* step 4 (spec §4.5): logits[q0, q0 + c) = head on token 0 of the pass's query rows */
int nf__mitra_head(nf_graph * g, const nf_mitra * m, struct nf__ws * w, int64_t q0, int64_t c) {
    const int64_t C = m->cfg.dim_output;
    nf_tensor hq = nf_view1(&w->hq, 0, c * w->D);
    NF_TRY(nf_layer_norm(g, "final_layer_norm", nf__mitra_rows(w, &w->X, w->ns, w->ns + c), c, w->T * w->D, &m->fln_w,
                         &m->fln_b, hq, w->D, NF_MITRA_LN_EPS));
    return nf_linear(g, "final_layer", hq, c, w->D, &m->f_w, &m->f_b, nf_view1(&w->logits, q0 * C, c * C), C,
                     NF_ACT_NONE, 0);
}
