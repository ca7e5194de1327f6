/* tabstar-train-top.c -- the top text layer of TabSTAR's training step on
 * its [CLS] rows only (tabstar-train-impl.h).
 *
 * The fusion reads one row of the text encoder's output per string, its
 * [CLS] token (row 0). In the top layer every other row's output is never
 * read: its attention output, dense + residual + LayerNorm, feed-forward and
 * second LayerNorm are computed for the U [CLS] rows, the attention's query
 * being the [CLS] row of each string against all its tokens' keys and values
 * (which still need q/k/v of every token). The backward mirrors it: the
 * gradient enters at the [CLS] rows, the attention backward gives dq at
 * those rows (the other rows' dq is zero: their outputs had no gradient) and
 * dk / dv at every token. Every row it computes is the row the full layer
 * computes, op for op; the rows it skips only ever contributed exact zeros to
 * the backward. Dropout off only (the attention's mask is indexed by query
 * row): with dropout the step runs the full layer. */
#include "tabstar-train-impl.h"

/* group k of strings of one length: its [CLS] queries (one per string) against its tokens */
static struct nf_attn_layout nf__top_layout(const nf_tab * m, const struct nf__tt_grp * gr) {
    const int64_t D = NF_TAB_D;
    return (struct nf_attn_layout){.groups = gr->n,
                                   .lq = 1,
                                   .lk = gr->len,
                                   .n_heads = m->cfg.text_heads,
                                   .head_dim = D / m->cfg.text_heads,
                                   .q_gs = gr->len * 3 * D,
                                   .q_ss = 3 * D,
                                   .kv_gs = gr->len * 3 * D,
                                   .kv_ss = 3 * D,
                                   .o_gs = D,
                                   .o_ss = D};
}

/* the kept tensors of trainable layer j at U rows (the stacks' slices hold T >= U rows) */
static nf_tensor nf__top_sl(const nf_tensor * s, int64_t j, int64_t n, int64_t used) {
    return nf_view1(s, j * n, used);
}

int nf__tt_bert_top_fwd(nf_graph * g, struct nf_tab_train * t, int j, const struct nf__tt_grp * grp, int ng,
                        nf_tensor cls, int64_t U, nf_tensor hin, nf_tensor E) {
    nf_tab * m = t->m;
    const int l = m->cfg.text_layers - t->n_text + j;
    const struct nf_tab_bert_layer * L = &m->bert[l];
    const int64_t D = NF_TAB_D, I = m->cfg.text_ff, T = t->Tcur;
    nf_tensor qkv = nf__top_sl(&t->bqkv, j, T * 3 * D, T * 3 * D), att = nf__top_sl(&t->batt, j, T * D, U * D);
    nf_tensor s1 = nf__top_sl(&t->bs1, j, T * D, U * D), a1 = nf__top_sl(&t->ba1, j, T * D, U * D);
    nf_tensor ffp = nf__top_sl(&t->bffp, j, T * I, U * I), s2 = nf__top_sl(&t->bs2, j, T * D, U * D);
    nf_tensor ffa = nf_view1(&t->dH, 0, U * I);
    NF_TRY(
        nf_linear(g, nf_label(g, "attention.self.qkv"), hin, T, D, &L->qkv_w, &L->qkv_b, qkv, 3 * D, NF_ACT_NONE, 0));
    for (int c = 0; c < 3; c++) {
        NF_TRY(nf__tt_lora_fwd(g, t, 3 * j + c, hin, D, T,
                               nf_view1(&t->bxa, (j * 3 + c) * T * NF_TAB_LORA_R, T * NF_TAB_LORA_R),
                               nf_view1(&qkv, c * D, T * 3 * D - c * D), 3 * D));
    }
    for (int k = 0, p0 = 0; k < ng; p0 += (int) grp[k].n, k++) {
        const struct nf_attn_layout lay = nf__top_layout(m, &grp[k]);
        const int64_t t0 = grp[k].t0, qn = grp[k].n * grp[k].len * 3 * D;
        NF_TRY(nf_attention(g, nf_label(g, "attention.self.cls"), &lay, nf_view1(&qkv, t0 * 3 * D, qn),
                            nf_view1(&qkv, t0 * 3 * D + D, qn - D), nf_view1(&qkv, t0 * 3 * D + 2 * D, qn - 2 * D),
                            nf_view1(&att, p0 * D, grp[k].n * D)));
    }
    const struct nf_gather gc = {.rows = U, .k = D, .n_table = T, .ldw = D, .ldy = D};
    NF_TRY(nf_gather_rows(g, nf_label(g, "attention.residual.cls"), &gc, cls, hin, s1));
    NF_TRY(nf_linear(g, nf_label(g, "attention.output.dense"), att, U, D, &L->o_w, &L->o_b, s1, D, NF_ACT_NONE, 1));
    NF_TRY(nf_layer_norm(g, nf_label(g, "attention.output.LayerNorm"), s1, U, D, &L->ln1_w, &L->ln1_b, a1, D,
                         NF_TAB_BERT_EPS));
    NF_TRY(nf_linear(g, nf_label(g, "intermediate.dense"), a1, U, D, &L->i_w, &L->i_b, ffp, I, NF_ACT_NONE, 0));
    NF_TRY(nf_act(g, nf_label(g, "intermediate.gelu"), ffp, ffa, U * I, NF_ACT_GELU));
    NF_TRY(nf_copy(g, nf_label(g, "output.residual"), a1, s2, U * D));
    NF_TRY(nf_linear(g, nf_label(g, "output.dense"), ffa, U, I, &L->f_w, &L->f_b, s2, D, NF_ACT_NONE, 1));
    return nf_layer_norm(g, nf_label(g, "output.LayerNorm"), s2, U, D, &L->ln2_w, &L->ln2_b, E, D, NF_TAB_BERT_EPS);
}

int nf__tt_bert_top_bwd(nf_graph * g, struct nf_tab_train * t, int j, const struct nf__tt_grp * grp, int ng,
                        nf_tensor cls_o, nf_tensor cls_s, int64_t U, nf_tensor hin, nf_tensor dE, int need_dx) {
    nf_tab * m = t->m;
    const int l = m->cfg.text_layers - t->n_text + j;
    const struct nf_tab_bert_layer * L = &m->bert[l];
    const int64_t D = NF_TAB_D, I = m->cfg.text_ff, T = t->Tcur;
    nf_tensor qkv = nf__top_sl(&t->bqkv, j, T * 3 * D, T * 3 * D), att = nf__top_sl(&t->batt, j, T * D, U * D);
    nf_tensor s1 = nf__top_sl(&t->bs1, j, T * D, U * D);
    nf_tensor ffp = nf__top_sl(&t->bffp, j, T * I, U * I), s2 = nf__top_sl(&t->bs2, j, T * D, U * D);
    nf_tensor dH = nf_view1(&t->dH, 0, U * I), datt = nf_view1(&t->datt, 0, U * D);
    nf_tensor ds = nf_view1(&t->ds, 0, U * D), da = nf_view1(&t->da, 0, U * D);
    nf_tensor dqkv = nf_view1(&t->dqkv, 0, T * 3 * D);
    NF_TRY(nf__tt_ln_bwd(g, t, nf_label(g, "output.LayerNorm.backward"), s2, &L->ln2_w, dE, ds, U, NF_TAB_BERT_EPS, 0));
    NF_TRY(nf__tt_frozen_dx(g, nf_label(g, "output.dense.dx"), ds, D, &L->f_w, dH, I, U, 0));
    NF_TRY(nf_act_backward(g, nf_label(g, "intermediate.gelu.backward"), ffp, dH, dH, U * I, NF_ACT_GELU));
    NF_TRY(nf_copy(g, nf_label(g, "output.residual.backward"), ds, da, U * D));
    NF_TRY(nf__tt_frozen_dx(g, nf_label(g, "intermediate.dense.dx"), dH, I, &L->i_w, da, D, U, 1));
    NF_TRY(nf__tt_ln_bwd(g, t, nf_label(g, "attention.output.LayerNorm.backward"), s1, &L->ln1_w, da, ds, U,
                         NF_TAB_BERT_EPS, 0));
    NF_TRY(nf__tt_frozen_dx(g, nf_label(g, "attention.output.dense.dx"), ds, D, &L->o_w, datt, D, U, 0));
    /* dq: zero but at the [CLS] rows (the attention backward writes those) */
    NF_TRY(nf_fill(g, nf_label(g, "attention.self.dq"), dqkv, T, D, 3 * D, 0.0f));
    for (int k = 0, p0 = 0; k < ng; p0 += (int) grp[k].n, k++) {
        const struct nf_attn_layout lay = nf__top_layout(m, &grp[k]);
        const int64_t t0 = grp[k].t0, qn = grp[k].n * grp[k].len * 3 * D, on = grp[k].n * D;
        NF_TRY(nf_attention_backward(
            g, nf_label(g, "attention.self.cls.backward"), &lay, nf_view1(&qkv, t0 * 3 * D, qn),
            nf_view1(&qkv, t0 * 3 * D + D, qn - D), nf_view1(&qkv, t0 * 3 * D + 2 * D, qn - 2 * D),
            nf_view1(&att, p0 * D, on), nf_view1(&datt, p0 * D, on), nf_view1(&dqkv, t0 * 3 * D, qn),
            nf_view1(&dqkv, t0 * 3 * D + D, qn - D), nf_view1(&dqkv, t0 * 3 * D + 2 * D, qn - 2 * D), t->stats, 0));
    }
    /* d hin = ds at the [CLS] rows (the residual; zero elsewhere) + dqkv W_qkv + the adapters' dx */
    if (need_dx) {
        const struct nf_gather gs = {.rows = U, .k = D, .n_table = T, .ldw = D, .ldy = D};
        NF_TRY(nf_scatter_add_rows(g, nf_label(g, "attention.residual.cls.backward"), &gs, cls_o, cls_s, ds, t->dh));
        NF_TRY(nf__tt_frozen_dx(g, nf_label(g, "attention.self.qkv.dx"), dqkv, 3 * D, &L->qkv_w, t->dh, D, T, 1));
    }
    for (int c = 0; c < 3; c++) {
        NF_TRY(nf__tt_lora_bwd(g, t, 3 * j + c, hin, D, T,
                               nf_view1(&t->bxa, (j * 3 + c) * T * NF_TAB_LORA_R, T * NF_TAB_LORA_R),
                               nf_view1(&dqkv, c * D, T * 3 * D - c * D), 3 * D, need_dx ? &t->dh : NULL, D));
    }
    return NF_OK;
}
