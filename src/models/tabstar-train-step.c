/* tabstar-train-step.c -- TabSTAR's training forward, loss and backward on
 * the run's device (tabstar-train.h; spec shared/specs/finetune.md §3.5,
 * tabstar.md §4-§7 for the forward).
 *
 * The forward is nf__tab_forward_tokens' (tabstar-forward.c), op for op,
 * with the adapters added where PEFT adds them (y = W x + b + 2 B (A x),
 * before the ReLU of linear1 and of the head; linear2's output with its
 * adapter before the residual add) and every tensor the backward reads kept:
 * text layers >= NF_TAB_TRAIN_BERT (their inputs, q/k/v, attention output,
 * the sums before both LayerNorms, the GELU's input), every
 * TransformerEncoderLayer (LN outputs, q/k/v, attention output, the stream
 * after attention, linear1's pre-activation and ReLU output, the adapters'
 * A x), the head. Text layers below run forward only. Dropout is off unless
 * nf__tab_train_dropout turned it on (then DROPOUT at upstream's elementwise
 * points and ATTENTION's on the probabilities, the backward applying the same
 * counter-based masks).
 * Strings of one length are one ATTENTION group (no padding, no mask), so
 * ATTENTION_BACKWARD needs no mask either.
 * The backward: head -> [scatter to the target cells] -> 6 interaction TELs
 * -> fusion mean (½ to each token) -> fusion TEL -> [scatter of the text
 * tokens to the distinct strings] -> [scatter to the [CLS] rows] -> the
 * trainable text layers from the top. Frozen weights get no gradient (dx
 * only); LayerNorm's dgamma/dbeta go to a scratch that is never read. */
#include "tabstar-train-impl.h"

#include <stdlib.h>
#include <string.h>

#define R NF_TAB_LORA_R

/* the index lists, one i32 buffer (positions in elements) */
struct nf__tt_ix {
    int64_t ids, pos, zero, cls, cell, even, odd, tgt;
    int64_t cls_o, cls_s, cell_o, cell_s, even_o, even_s, odd_o, odd_s, tgt_o, tgt_s;
    int64_t mids, mpos, mzero, crow, mst, n; /* the text cache: uncached strings' tokens, every token's cache row,
                                                (padded runs) the new tokens' rows in the run */
};

static struct nf__tt_ix nf__tt_layout(int64_t T, int64_t U, int64_t BS, int64_t BC) {
    struct nf__tt_ix x;
    x.ids = 0;
    x.pos = T;
    x.zero = 2 * T;
    x.cls = 3 * T;
    x.cell = x.cls + U;
    x.even = x.cell + BS;
    x.odd = x.even + BS;
    x.tgt = x.odd + BS;
    x.cls_o = x.tgt + BC;
    x.cls_s = x.cls_o + U;
    x.cell_o = x.cls_s + T + 1;
    x.cell_s = x.cell_o + BS;
    x.even_o = x.cell_s + U + 1;
    x.even_s = x.even_o + BS;
    x.odd_o = x.even_s + 2 * BS + 1;
    x.odd_s = x.odd_o + BS;
    x.tgt_o = x.odd_s + 2 * BS + 1;
    x.tgt_s = x.tgt_o + BC;
    x.mids = x.tgt_s + BS + 1;
    x.mpos = x.mids + T;
    x.mzero = x.mpos + T;
    x.crow = x.mzero + T;
    x.mst = x.crow + T;
    x.n = x.mst + T;
    return x;
}

/* a capacity: max(have, need) plus a quarter of need */
static int64_t nf__tt_grow(int64_t have, int64_t need) {
    const int64_t c = need + need / 4;
    return c > have ? c : have;
}

static int nf__tt_ws(struct nf_tab_train * t, int64_t T, int64_t U, int64_t B, int64_t BS, int64_t BC, int64_t idx_n,
                     nf_err * err) {
    if (t->have_ws && t->T >= T && t->U >= U && t->B >= B && t->BS >= BS && t->BC >= BC && t->idx_n >= idx_n &&
        t->ws_drop >= (t->drop > 0.0f))
        return NF_OK;
    /* growing: a quarter more than this batch needs (and never below the last capacity), so that later
     * batches of the fit (other permutations, the validation batches) fit without a new buffer -- each new
     * one is a fresh mapping whose every page faults in again (hundreds of MB); pages a batch does not reach
     * are never touched, so the headroom costs address space, not memory */
    const int had = t->have_ws;
    T = nf__tt_grow(had ? t->T : 0, T);
    U = nf__tt_grow(had ? t->U : 0, U);
    B = nf__tt_grow(had ? t->B : 0, B);
    BS = nf__tt_grow(had ? t->BS : 0, BS);
    BC = nf__tt_grow(had ? t->BC : 0, BC);
    idx_n = nf__tt_grow(had ? t->idx_n : 0, idx_n);
    nf__workspace_release(&t->mem);
    t->have_ws = 0;
    nf_tab * m = t->m;
    nf_backend * be = m->be;
    const int64_t D = NF_TAB_D, FF = NF_TAB_FF, I = m->cfg.text_ff, nt = t->n_text, N2 = 2 * BS;
    const int64_t nh = nt + 1 > 2 ? nt + 1 : 2, hmax = I > FF ? I : FF;
    int64_t rows = T > N2 ? T : N2;
    if (BC > rows) rows = BC;
    int64_t st = T * m->cfg.text_heads;
    if (N2 * NF_TAB_FUSION_HEADS > st) st = N2 * NF_TAB_FUSION_HEADS;
    if (BS * NF_TAB_HEADS > st) st = BS * NF_TAB_HEADS;
    t->T = T;
    t->U = U;
    t->B = B;
    t->BS = BS;
    t->BC = BC;
    t->idx_n = idx_n;
    t->ws_drop = t->drop > 0.0f;
    /* the i32 lists and the targets apart; every f32 tensor a view of one buffer (two passes: size, carve) */
    int64_t ne_ = idx_n;
    NF_TRY(nf__workspace_tensor(&t->mem, be, &t->idx, NF_I32, 1, &ne_, "train.indices", err));
    ne_ = B;
    NF_TRY(nf__workspace_tensor(&t->mem, be, &t->y, t->C > 1 ? NF_I32 : NF_F32, 1, &ne_, "train.y", err));
    int64_t used = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) NF_TRY(nf__workspace_tensor(&t->mem, be, &t->work, NF_F32, 1, &used, "train.work", err));
        used = 0;
#define NF__ALLOC(f, type, nm_, n)              \
    do {                                        \
        const int64_t n_ = (n) > 0 ? (n) : 1;   \
        if (pass == 1) {                        \
            (f) = nf_view1(&t->work, used, n_); \
            (f).name = nm_;                     \
        }                                       \
        used += (n_ + 15) / 16 * 16;            \
    } while (0)
        NF__ALLOC(t->z, NF_F32, "train.x_num", BS);
        NF__ALLOC(t->sh, NF_F32, "train.scalar_hidden", BS * NF_TAB_SCALAR_HIDDEN);
        NF__ALLOC(t->loss, NF_F32, "train.loss", 1);
        NF__ALLOC(t->dlogits, NF_F32, "train.d_logits", BC);
        NF__ALLOC(t->lnj, NF_F32, "train.frozen_ln_grad", 2 * D);
        NF__ALLOC(t->hs, NF_F32, "train.text_streams", nh * T * D);
        NF__ALLOC(t->bqkv, NF_F32, "train.text_qkv", nt * T * 3 * D);
        NF__ALLOC(t->bxa, NF_F32, "train.text_lora_ax", nt * T * 3 * R);
        NF__ALLOC(t->batt, NF_F32, "train.text_attn", nt * T * D);
        NF__ALLOC(t->bs1, NF_F32, "train.text_sum1", nt * T * D);
        NF__ALLOC(t->ba1, NF_F32, "train.text_ln1", nt * T * D);
        NF__ALLOC(t->bffp, NF_F32, "train.text_ff_preact", (nt > 0 ? nt : 1) * T * I);
        NF__ALLOC(t->bs2, NF_F32, "train.text_sum2", nt * T * D);
        NF__ALLOC(t->E, NF_F32, "train.text_cls", U * D);
        NF__ALLOC(t->X0, NF_F32, "train.fusion_in", N2 * D);
        NF__ALLOC(t->X1, NF_F32, "train.fusion_out", N2 * D);
        NF__ALLOC(t->Fs, NF_F32, "train.cell_streams", (NF_TAB_LAYERS + 1) * BS * D);
        for (int l = 0; l <= NF_TAB_LAYERS; l++) {
            struct nf__tt_tel * L = &t->tel[l];
            const int64_t N = l == 0 ? N2 : BS;
            NF__ALLOC(L->xn1, NF_F32, "train.tel_ln1", N * D);
            NF__ALLOC(L->qkv, NF_F32, "train.tel_qkv", N * 3 * D);
            NF__ALLOC(L->att, NF_F32, "train.tel_attn", N * D);
            NF__ALLOC(L->xmid, NF_F32, "train.tel_mid", N * D);
            NF__ALLOC(L->xn2, NF_F32, "train.tel_ln2", N * D);
            NF__ALLOC(L->hp, NF_F32, "train.tel_preact", N * FF);
            NF__ALLOC(L->h, NF_F32, "train.tel_hidden", N * FF);
            NF__ALLOC(L->xa1, NF_F32, "train.tel_lora1_ax", N * R);
            NF__ALLOC(L->xa2, NF_F32, "train.tel_lora2_ax", N * R);
        }
        NF__ALLOC(t->Tt, NF_F32, "train.target_tokens", BC * D);
        NF__ALLOC(t->Hp, NF_F32, "train.head_preact", BC * FF);
        NF__ALLOC(t->Hh, NF_F32, "train.head_hidden", BC * FF);
        NF__ALLOC(t->xah, NF_F32, "train.head_lora_ax", BC * R);
        NF__ALLOC(t->logits, NF_F32, "train.logits", BC);
        NF__ALLOC(t->ff, NF_F32, "train.ff_out", N2 * D);
        NF__ALLOC(t->dX, NF_F32, "train.d_cells", BS * D);
        NF__ALLOC(t->dX2, NF_F32, "train.d_fusion", N2 * D);
        NF__ALLOC(t->dE, NF_F32, "train.d_text_cls", U * D);
        NF__ALLOC(t->dh, NF_F32, "train.d_text", T * D);
        NF__ALLOC(t->ds, NF_F32, "train.d_text_sum", T * D);
        NF__ALLOC(t->da, NF_F32, "train.d_text_ln1", T * D);
        NF__ALLOC(t->dqkv, NF_F32, "train.d_qkv", rows * 3 * D);
        NF__ALLOC(t->dH, NF_F32, "train.d_hidden", rows * hmax);
        NF__ALLOC(t->dxa, NF_F32, "train.d_lora_ax", rows * R);
        NF__ALLOC(t->dxn, NF_F32, "train.d_normed", rows * D);
        NF__ALLOC(t->datt, NF_F32, "train.d_attn", rows * D);
        NF__ALLOC(t->stats, NF_F32, "train.attn_stats", 2 * st);
        if (t->ws_drop) { /* dropout's scratch: only while it is on (the layout without it is unchanged) */
            NF__ALLOC(t->dropb, NF_F32, "train.dropout", rows * D);
            NF__ALLOC(t->lorab, NF_F32, "train.lora_dropout", rows * hmax);
        }
    }
#undef NF__ALLOC
    t->have_ws = 1;
    return NF_OK;
}

/* rows x (ld) slice i of a per-layer stack */
static nf_tensor nf__sl(const nf_tensor * s, int64_t i, int64_t n) { return nf_view1(s, i * n, n); }

/* ---- BERT ------------------------------------------------------------------------------------- */

/* text layer l's ATTENTION call k over the group gr; with dropout, BERT's attention_probs_dropout on the
 * probabilities (its mask: site NF__DS_BATT(l, k)) */
static struct nf_attn_layout nf__bert_layout(const struct nf_tab_train * t, int l, int k,
                                             const struct nf__tt_grp * gr) {
    const nf_tab * m = t->m;
    const int64_t D = NF_TAB_D;
    return (struct nf_attn_layout){.groups = gr->n,
                                   .lq = gr->len,
                                   .lk = gr->len,
                                   .n_heads = m->cfg.text_heads,
                                   .head_dim = D / m->cfg.text_heads,
                                   .q_gs = gr->len * 3 * D,
                                   .q_ss = 3 * D,
                                   .kv_gs = gr->len * 3 * D,
                                   .kv_ss = 3 * D,
                                   .o_gs = gr->len * D,
                                   .o_ss = D,
                                   .drop_p = t->dp ? t->drop : 0.0f,
                                   .drop_seed = t->dp ? nf__tt_seed(t, NF__DS_BATT(l, k)) : 0};
}

/* text layer l from hin into hout; j >= 0: trainable layer j (adapters on q/k/v, tensors kept) */
static int nf__bert_fwd(nf_graph * g, struct nf_tab_train * t, int l, int j, const struct nf__tt_grp * grp, int ng,
                        nf_tensor hin, nf_tensor hout) {
    nf_tab * m = t->m;
    const struct nf_tab_bert_layer * L = &m->bert[l];
    const int64_t D = NF_TAB_D, I = m->cfg.text_ff, T = t->Tcur;
    const int64_t jj = j >= 0 ? j : 0;
    nf_tensor qkv = nf__sl(&t->bqkv, jj, T * 3 * D), att = nf__sl(&t->batt, jj, T * D);
    nf_tensor s1 = nf__sl(&t->bs1, jj, T * D), a1 = nf__sl(&t->ba1, jj, T * D);
    nf_tensor ffp = nf__sl(&t->bffp, jj, T * I), s2 = nf__sl(&t->bs2, jj, T * D);
    nf_tensor ffa = nf_view1(&t->dH, 0, T * I);
    if (j < 0) { /* frozen: the first trainable slot is scratch (the fused LINEAR+GELU as the forward) */
        if (t->n_text == 0) {
            qkv = nf_view1(&t->dqkv, 0, T * 3 * D);
            att = nf_view1(&t->datt, 0, T * D);
            s1 = nf_view1(&t->dh, 0, T * D);
            a1 = nf_view1(&t->ds, 0, T * D);
            s2 = nf_view1(&t->da, 0, T * D);
        }
    }
    NF_TRY(
        nf_linear(g, nf_label(g, "attention.self.qkv"), hin, T, D, &L->qkv_w, &L->qkv_b, qkv, 3 * D, NF_ACT_NONE, 0));
    for (int c = 0; j >= 0 && c < 3; c++) {
        NF_TRY(nf__tt_lora_fwd(g, t, 3 * j + c, hin, D, T, nf_view1(&t->bxa, (j * 3 + c) * T * R, T * R),
                               nf_view1(&qkv, c * D, T * 3 * D - c * D), 3 * D));
    }
    for (int k = 0; k < ng; k++) {
        const struct nf_attn_layout lay = nf__bert_layout(t, l, k, &grp[k]);
        const int64_t t0 = grp[k].t0, qn = grp[k].n * grp[k].len * 3 * D;
        NF_TRY(nf_attention(g, nf_label(g, "attention.self"), &lay, nf_view1(&qkv, t0 * 3 * D, qn),
                            nf_view1(&qkv, t0 * 3 * D + D, qn - D), nf_view1(&qkv, t0 * 3 * D + 2 * D, qn - 2 * D),
                            nf_view1(&att, t0 * D, grp[k].n * grp[k].len * D)));
    }
    NF_TRY(nf_copy(g, nf_label(g, "attention.residual"), hin, s1, T * D));
    nf_tensor db = t->dp ? nf_view1(&t->dropb, 0, T * D) : s1;
    if (t->dp) { /* s1 = hin + dropout(dense(att)) (BertSelfOutput) */
        NF_TRY(nf_linear(g, nf_label(g, "attention.output.dense"), att, T, D, &L->o_w, &L->o_b, db, D, NF_ACT_NONE, 0));
        NF_TRY(nf__tt_drop(g, t, nf_label(g, "attention.output.dropout"), NF__DS_BERT(l, 0), db, s1, T * D, 1));
    } else {
        NF_TRY(nf_linear(g, nf_label(g, "attention.output.dense"), att, T, D, &L->o_w, &L->o_b, s1, D, NF_ACT_NONE, 1));
    }
    NF_TRY(nf_layer_norm(g, nf_label(g, "attention.output.LayerNorm"), s1, T, D, &L->ln1_w, &L->ln1_b, a1, D,
                         NF_TAB_BERT_EPS));
    if (j >= 0) {
        NF_TRY(nf_linear(g, nf_label(g, "intermediate.dense"), a1, T, D, &L->i_w, &L->i_b, ffp, I, NF_ACT_NONE, 0));
        NF_TRY(nf_act(g, nf_label(g, "intermediate.gelu"), ffp, ffa, T * I, NF_ACT_GELU));
    } else {
        NF_TRY(nf_linear(g, nf_label(g, "intermediate.dense"), a1, T, D, &L->i_w, &L->i_b, ffa, I, NF_ACT_GELU, 0));
    }
    NF_TRY(nf_copy(g, nf_label(g, "output.residual"), a1, s2, T * D));
    if (t->dp) { /* s2 = a1 + dropout(dense(GELU(...))) (BertOutput) */
        NF_TRY(nf_linear(g, nf_label(g, "output.dense"), ffa, T, I, &L->f_w, &L->f_b, db, D, NF_ACT_NONE, 0));
        NF_TRY(nf__tt_drop(g, t, nf_label(g, "output.dropout"), NF__DS_BERT(l, 1), db, s2, T * D, 1));
    } else {
        NF_TRY(nf_linear(g, nf_label(g, "output.dense"), ffa, T, I, &L->f_w, &L->f_b, s2, D, NF_ACT_NONE, 1));
    }
    return nf_layer_norm(g, nf_label(g, "output.LayerNorm"), s2, T, D, &L->ln2_w, &L->ln2_b, hout, D, NF_TAB_BERT_EPS);
}

/* trainable text layer j: t->dh = d hout in; d hin out (when need_dx) */
static int nf__bert_bwd(nf_graph * g, struct nf_tab_train * t, int j, const struct nf__tt_grp * grp, int ng,
                        nf_tensor hin, int need_dx) {
    nf_tab * m = t->m;
    const struct nf_tab_bert_layer * L = &m->bert[NF_TAB_TRAIN_BERT + j];
    const int64_t D = NF_TAB_D, I = m->cfg.text_ff, T = t->Tcur;
    nf_tensor qkv = nf__sl(&t->bqkv, j, T * 3 * D), att = nf__sl(&t->batt, j, T * D);
    nf_tensor s1 = nf__sl(&t->bs1, j, T * D);
    nf_tensor ffp = nf__sl(&t->bffp, j, T * I), s2 = nf__sl(&t->bs2, j, T * D);
    nf_tensor dH = nf_view1(&t->dH, 0, T * I), datt = nf_view1(&t->datt, 0, T * D);
    nf_tensor dqkv = nf_view1(&t->dqkv, 0, T * 3 * D);
    /* h = LN2(a1 + W_f GELU(W_i a1)), a1 = LN1(hin + W_o att) */
    NF_TRY(nf__tt_ln_bwd(g, t, nf_label(g, "output.LayerNorm.backward"), s2, &L->ln2_w, t->dh, t->ds, T,
                         NF_TAB_BERT_EPS, 0));
    const int l = NF_TAB_TRAIN_BERT + j;
    nf_tensor dy = t->ds; /* d of a dense output: its dropout's mask on ds */
    if (t->dp) {
        dy = nf_view1(&t->dropb, 0, T * D);
        NF_TRY(nf__tt_drop(g, t, nf_label(g, "output.dropout.backward"), NF__DS_BERT(l, 1), t->ds, dy, T * D, 0));
    }
    NF_TRY(nf__tt_frozen_dx(g, nf_label(g, "output.dense.dx"), dy, D, &L->f_w, dH, I, T, 0));
    NF_TRY(nf_act_backward(g, nf_label(g, "intermediate.gelu.backward"), ffp, dH, dH, T * I, NF_ACT_GELU));
    NF_TRY(nf_copy(g, nf_label(g, "output.residual.backward"), t->ds, t->da, T * D));
    NF_TRY(nf__tt_frozen_dx(g, nf_label(g, "intermediate.dense.dx"), dH, I, &L->i_w, t->da, D, T, 1));
    NF_TRY(nf__tt_ln_bwd(g, t, nf_label(g, "attention.output.LayerNorm.backward"), s1, &L->ln1_w, t->da, t->ds, T,
                         NF_TAB_BERT_EPS, 0));
    if (t->dp)
        NF_TRY(nf__tt_drop(g, t, nf_label(g, "attention.output.dropout.backward"), NF__DS_BERT(l, 0), t->ds, dy, T * D,
                           0));
    NF_TRY(nf__tt_frozen_dx(g, nf_label(g, "attention.output.dense.dx"), dy, D, &L->o_w, datt, D, T, 0));
    for (int k = 0; k < ng; k++) {
        const struct nf_attn_layout lay = nf__bert_layout(t, NF_TAB_TRAIN_BERT + j, k, &grp[k]);
        const int64_t t0 = grp[k].t0, qn = grp[k].n * grp[k].len * 3 * D, on = grp[k].n * grp[k].len * D;
        NF_TRY(nf_attention_backward(
            g, nf_label(g, "attention.self.backward"), &lay, nf_view1(&qkv, t0 * 3 * D, qn),
            nf_view1(&qkv, t0 * 3 * D + D, qn - D), nf_view1(&qkv, t0 * 3 * D + 2 * D, qn - 2 * D),
            nf_view1(&att, t0 * D, on), nf_view1(&datt, t0 * D, on), nf_view1(&dqkv, t0 * 3 * D, qn),
            nf_view1(&dqkv, t0 * 3 * D + D, qn - D), nf_view1(&dqkv, t0 * 3 * D + 2 * D, qn - 2 * D), t->stats, 0));
    }
    /* d hin = ds (the residual) + dqkv W_qkv + the adapters' dx: into t->dh (d hout is consumed) */
    if (need_dx) {
        NF_TRY(nf_copy(g, nf_label(g, "attention.residual.backward"), t->ds, t->dh, T * D));
        NF_TRY(nf__tt_frozen_dx(g, nf_label(g, "attention.self.qkv.dx"), dqkv, 3 * D, &L->qkv_w, t->dh, D, T, 1));
    }
    for (int c = 0; c < 3; c++) {
        NF_TRY(nf__tt_lora_bwd(g, t, 3 * j + c, hin, D, T, nf_view1(&t->bxa, (j * 3 + c) * T * R, T * R),
                               nf_view1(&dqkv, c * D, T * 3 * D - c * D), 3 * D, need_dx ? &t->dh : NULL, D));
    }
    return NF_OK;
}

/* embeddings + the frozen text layers over `rows` tokens (ids / pos / zero index views, strings in groups)
 * into stream 0 */
static int nf__text_frozen(nf_graph * g, struct nf_tab_train * t, nf_tensor ids, nf_tensor pos, nf_tensor zero,
                           int64_t rows, const struct nf__tt_grp * grp, int ng) {
    nf_tab * m = t->m;
    const int64_t D = NF_TAB_D, TD = rows * D;
    const int nfz = m->cfg.text_layers - t->n_text;
    t->Tcur = rows;
    nf_graph_prefix(g, "text_encoder.embeddings.");
    struct nf_gather gs = {.rows = rows, .k = D, .n_table = m->cfg.vocab, .ldw = D, .ldy = D};
    nf_tensor e2 = nf_view1(&t->ds, 0, TD);
    NF_TRY(nf_gather_rows(g, nf_label(g, "word_embeddings"), &gs, ids, m->word, e2));
    gs.n_table = m->cfg.type_vocab;
    gs.accumulate = 1;
    NF_TRY(nf_gather_rows(g, nf_label(g, "token_type_embeddings"), &gs, zero, m->type, e2));
    gs.n_table = m->cfg.max_pos;
    NF_TRY(nf_gather_rows(g, nf_label(g, "position_embeddings"), &gs, pos, m->pos, e2));
    /* ping-pong between streams 0 and 1, ending in 0 */
    NF_TRY(nf_layer_norm(g, nf_label(g, "LayerNorm"), e2, rows, D, &m->eln_w, &m->eln_b, nf__sl(&t->hs, nfz % 2, TD), D,
                         NF_TAB_BERT_EPS));
    if (t->dp)
        NF_TRY(nf__tt_drop(g, t, nf_label(g, "dropout"), NF__DS_EMB, nf__sl(&t->hs, nfz % 2, TD),
                           nf__sl(&t->hs, nfz % 2, TD), TD, 0));
    for (int l = 0; l < nfz; l++) {
        nf_graph_prefix(g, "text_encoder.encoder.layer.%d.", l);
        NF_TRY(nf__bert_fwd(g, t, l, -1, grp, ng, nf__sl(&t->hs, (l + nfz) % 2, TD),
                            nf__sl(&t->hs, (l + 1 + nfz) % 2, TD)));
    }
    return NF_OK;
}

/* ---- the step --------------------------------------------------------------------------------- */

struct nf__tt_host {
    int32_t * hx;
    struct nf__tt_grp *grp, *mgrp; /* all strings; the uncached ones (text cache) */
    int ng, nmg;
    int64_t Tm;   /* tokens of the uncached strings (and padding); -1: no cache this step */
    int64_t Tnew; /* of which new strings' (stored in the cache) */
    int pad;      /* cached strings pad the run to min_rows tokens: the new tokens' rows are listed in mst */
};

static void nf__tt_host_free(struct nf__tt_host * h) {
    free(h->hx);
    free(h->grp);
    free(h->mgrp);
}

/* the text cache's plan for a batch: the uncached strings (sorted by length, as the batch) get the next
 * rows of the cache; mids/mpos/mzero list their tokens, crow every token's cache row. h->Tm = -1 when the
 * cache is off or full. */
static int nf__tt_cache_plan(struct nf_tab_train * t, const struct nf__tt_ix * ix, int64_t U, struct nf__tt_host * h,
                             nf_err * err) {
    h->Tm = -1;
    if (t->cache_rows < 1) return NF_OK;
    int32_t * hx = h->hx;
    h->mgrp = malloc((size_t) (h->ng + 1) * sizeof(*h->mgrp));
    if (!h->mgrp) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    /* pass 1: the rows the uncached strings need */
    int64_t need = 0, p = 0;
    for (int k = 0; k < h->ng; k++) {
        for (int64_t q = 0; q < h->grp[k].n; q++, p++) {
            const int32_t len = (int32_t) h->grp[k].len;
            if (nf__tt_cache_find(t, hx + ix->ids + hx[ix->cls + p], len) < 0) need += len;
        }
    }
    if (t->cache_used + need > t->cache_rows) return NF_OK; /* full: this batch runs uncached */
    if (ix->pos < t->min_rows) return NF_OK;                /* too few rows (min_rows): uncached */
    /* fewer uncached tokens than min_rows: cached strings of the batch join the run of layers 0..5 until it
     * has min_rows tokens (a batch has that many); only the new strings' rows are stored */
    h->pad = need > 0 && need < t->min_rows;
    (void) U;
    int64_t tm = 0, tnew = 0, padded = 0;
    h->nmg = 0;
    p = 0;
    for (int k = 0; k < h->ng; k++) {
        const int32_t len = (int32_t) h->grp[k].len;
        for (int64_t q = 0; q < h->grp[k].n; q++, p++) {
            const int32_t * ids = hx + ix->ids + hx[ix->cls + p];
            int64_t row = nf__tt_cache_find(t, ids, len);
            const int is_new = row < 0, in_run = is_new || (h->pad && need + padded < t->min_rows);
            if (is_new) {
                /* a string twice in the batch is one string (np.unique): found on its second visit */
                row = t->cache_used + tnew;
                NF_TRY(nf__tt_cache_add(t, ids, len, row, err));
            } else if (in_run) {
                padded += len;
            }
            if (in_run) {
                if (h->nmg == 0 || h->mgrp[h->nmg - 1].len != len) h->mgrp[h->nmg++] = (struct nf__tt_grp){0, len, tm};
                h->mgrp[h->nmg - 1].n++;
                for (int32_t j = 0; j < len; j++, tm++) {
                    hx[ix->mids + tm] = ids[j];
                    hx[ix->mpos + tm] = j;
                    hx[ix->mzero + tm] = 0;
                    if (is_new) hx[ix->mst + tnew++] = (int32_t) tm;
                }
            }
            for (int32_t j = 0; j < len; j++) hx[ix->crow + hx[ix->cls + p] + j] = (int32_t) (row + j);
        }
    }
    h->Tm = tm;
    h->Tnew = tnew;
    return NF_OK;
}

/* the index lists and plans of a batch (strings sorted by length, as the forward) */
static int nf__tt_indices(const struct nf_tab_batch * b, struct nf__tt_ix * ix, int64_t * T_out, struct nf__tt_host * h,
                          nf_err * err) {
    const int64_t U = b->n_str, BS = b->B * b->S, BC = b->B * b->C;
    int64_t T = 0;
    for (int64_t u = 0; u < U; u++) {
        if (b->lens[u] < 1 || b->lens[u] > NF_TAB_MAX_TOKENS)
            return nf__err_set(err, NF_ERR_INPUT, "tabstar training: string %lld has %d tokens (1..%d)", (long long) u,
                               b->lens[u], NF_TAB_MAX_TOKENS);
        T += b->lens[u];
    }
    for (int64_t i = 0; i < BS; i++) {
        if (b->cell[i] < 0 || b->cell[i] >= U)
            return nf__err_set(err, NF_ERR_INPUT, "tabstar training: cell %lld names string %d of %lld", (long long) i,
                               b->cell[i], (long long) U);
    }
    if (T > INT32_MAX / 4 || 2 * BS > INT32_MAX / 4)
        return nf__err_set(err, NF_ERR_SHAPE, "tabstar training: %lld tokens / %lld cells are too many for one batch",
                           (long long) T, (long long) BS);
    *ix = nf__tt_layout(T, U, BS, BC);
    *T_out = T;
    int64_t *order = malloc((size_t) (U + 1) * sizeof(int64_t)), *where = malloc((size_t) (U + 1) * sizeof(int64_t)),
            *in_off = malloc((size_t) (U + 1) * sizeof(int64_t));
    h->hx = malloc((size_t) ix->n * sizeof(int32_t));
    h->grp = malloc((size_t) (U + 1) * sizeof(*h->grp));
    int rc = NF_OK;
    if (!order || !where || !in_off || !h->hx || !h->grp) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        goto done;
    }
    {
        int64_t cnt[NF_TAB_MAX_TOKENS + 2], off = 0;
        memset(cnt, 0, sizeof(cnt));
        for (int64_t u = 0; u < U; u++) {
            in_off[u] = off;
            off += b->lens[u];
            cnt[b->lens[u] + 1]++;
        }
        for (int l = 1; l < NF_TAB_MAX_TOKENS + 2; l++) cnt[l] += cnt[l - 1];
        for (int64_t u = 0; u < U; u++) {
            const int64_t p = cnt[b->lens[u]]++;
            order[p] = u;
            where[u] = p;
        }
    }
    int32_t * hx = h->hx;
    int64_t tk = 0;
    h->ng = 0;
    for (int64_t p = 0; p < U; p++) {
        const int64_t u = order[p];
        if (p == 0 || b->lens[order[p - 1]] != b->lens[u]) h->grp[h->ng++] = (struct nf__tt_grp){0, b->lens[u], tk};
        h->grp[h->ng - 1].n++;
        hx[ix->cls + p] = (int32_t) tk;
        for (int32_t j = 0; j < b->lens[u]; j++, tk++) {
            hx[ix->ids + tk] = b->ids[in_off[u] + j];
            hx[ix->pos + tk] = j;
            hx[ix->zero + tk] = 0;
        }
    }
    for (int64_t i = 0; i < BS; i++) {
        hx[ix->cell + i] = (int32_t) where[b->cell[i]];
        hx[ix->even + i] = (int32_t) (2 * i);
        hx[ix->odd + i] = (int32_t) (2 * i + 1);
    }
    for (int64_t r = 0; r < b->B; r++)
        for (int64_t c = 0; c < b->C; c++) hx[ix->tgt + r * b->C + c] = (int32_t) (r * b->S + c);
    if ((rc = nf_scatter_plan(hx + ix->cls, U, T, hx + ix->cls_o, hx + ix->cls_s, err)) != NF_OK) goto done;
    if ((rc = nf_scatter_plan(hx + ix->cell, BS, U, hx + ix->cell_o, hx + ix->cell_s, err)) != NF_OK) goto done;
    if ((rc = nf_scatter_plan(hx + ix->even, BS, 2 * BS, hx + ix->even_o, hx + ix->even_s, err)) != NF_OK) goto done;
    if ((rc = nf_scatter_plan(hx + ix->odd, BS, 2 * BS, hx + ix->odd_o, hx + ix->odd_s, err)) != NF_OK) goto done;
    rc = nf_scatter_plan(hx + ix->tgt, BC, BS, hx + ix->tgt_o, hx + ix->tgt_s, err);
done:
    free(order);
    free(where);
    free(in_off);
    return rc;
}

/* forward (+ loss when y given; + backward when grad) */
static int nf__tt_run(struct nf_tab_train * t, const struct nf_tab_batch * b, const int64_t * y_class,
                      const float * y_value, float loss_scale, int grad, float * loss, float * logits, nf_err * err) {
    nf_tab * m = t->m;
    const int64_t D = NF_TAB_D, FF = NF_TAB_FF, B = b->B, S = b->S, C = b->C, BS = B * S, BC = B * C, U = b->n_str;
    if (C != t->C)
        return nf__err_set(err, NF_ERR_ARG, "tabstar training: a batch of %lld targets for an arena of %lld",
                           (long long) C, (long long) t->C);
    if (B < 1 || S < C || U < 1)
        return nf__err_set(err, NF_ERR_ARG, "tabstar training: a batch of %lld rows x %lld cells, %lld strings",
                           (long long) B, (long long) S, (long long) U);
    const int has_y = C > 1 ? y_class != NULL : y_value != NULL;
    if (grad && !has_y) return nf__err_set(err, NF_ERR_ARG, "tabstar training: no targets for the training step");
    for (int64_t r = 0; C > 1 && has_y && r < B; r++) {
        if (y_class[r] < 0 || y_class[r] >= C)
            return nf__err_set(err, NF_ERR_INPUT, "tabstar training: row %lld's class %lld is out of range 0..%lld",
                               (long long) r, (long long) y_class[r], (long long) (C - 1));
    }
    struct nf__tt_ix ix = {0};
    struct nf__tt_host h = {0};
    int64_t T = 0;
    int rc = nf__tt_indices(b, &ix, &T, &h, err);
    t->dp = grad && t->drop > 0.0f; /* dropout in this run: the masks of this _grad call */
    if (t->dp) t->drop_calls++;
    h.Tm = -1;
    if (rc == NF_OK) rc = nf__tt_ws(t, T, U, B, BS, BC, ix.n, err);
    /* with dropout text layers 0..5 are stochastic: no cache (run per batch, as upstream) */
    if (rc == NF_OK && !t->dp) rc = nf__tt_cache_plan(t, &ix, U, &h, err);
    if (rc == NF_OK) {
        nf_tensor iv = nf_view1(&t->idx, 0, ix.n), zv = nf_view1(&t->z, 0, BS);
        rc = nf__tensor_upload(&iv, h.hx, err);
        if (rc == NF_OK) rc = nf__tensor_upload(&zv, b->x_num, err);
    }
    if (rc == NF_OK && has_y) {
        nf_tensor yv = nf_view1(&t->y, 0, B);
        if (C > 1) {
            int32_t * y32 = malloc((size_t) B * sizeof(int32_t));
            if (!y32) rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
            for (int64_t r = 0; y32 && r < B; r++) y32[r] = (int32_t) y_class[r];
            if (y32) rc = nf__tensor_upload(&yv, y32, err);
            free(y32);
        } else {
            rc = nf__tensor_upload(&yv, y_value, err);
        }
    }
    if (rc != NF_OK) {
        if (h.Tm > 0) nf__tt_cache_clear(t);
        nf__tt_host_free(&h);
        t->dp = 0;
        return rc;
    }
    t->Tcur = T; /* the stacks are sliced at the batch's size (the capacity may be larger) */
    nf_graph gr, *g = &gr;
    nf_graph_init(g, m->be, err);
#define IDX(field, n) nf_view1(&t->idx, ix.field, (n))
#define RUN(call)                   \
    do {                            \
        rc = (call);                \
        if (rc != NF_OK) goto done; \
    } while (0)
    const int nt = t->n_text, nfz = m->cfg.text_layers - nt;
    const int64_t TD = T * D;
    if (grad) RUN(nf_fill(g, "train.frozen_ln_grad", t->lnj, 1, 2 * D, 2 * D, 0.0f));
    /* §4 BERT: the frozen layers into stream 0 (from the text cache when it is on) */
    if (h.Tm < 0) {
        RUN(nf__text_frozen(g, t, IDX(ids, T), IDX(pos, T), IDX(zero, T), T, h.grp, h.ng));
    } else {
        if (h.Tm > 0) {
            RUN(nf__text_frozen(g, t, IDX(mids, h.Tm), IDX(mpos, h.Tm), IDX(mzero, h.Tm), h.Tm, h.mgrp, h.nmg));
            if (h.pad) { /* the new strings' rows of the padded run */
                const struct nf_gather gp = {.rows = h.Tnew, .k = D, .n_table = h.Tm, .ldw = D, .ldy = D};
                RUN(nf_gather_rows(g, "text_encoder.cache.store", &gp, IDX(mst, h.Tnew), t->hs,
                                   nf_view1(&t->cache, t->cache_used * D, h.Tnew * D)));
            } else {
                RUN(nf_copy(g, "text_encoder.cache.store", t->hs, nf_view1(&t->cache, t->cache_used * D, h.Tm * D),
                            h.Tm * D));
            }
            t->cache_used += h.Tnew;
            t->Tcur = T;
        }
        nf_graph_prefix(g, "text_encoder.");
        const struct nf_gather gc = {.rows = T, .k = D, .n_table = t->cache_rows, .ldw = D, .ldy = D};
        RUN(nf_gather_rows(g, nf_label(g, "cache.load"), &gc, IDX(crow, T), t->cache, nf__sl(&t->hs, 0, TD)));
    }
    /* without dropout the top layer runs on the [CLS] rows only (tabstar-train-top.c) */
    const int top = nt > 0 && !t->dp && U >= t->min_rows;
    for (int j = 0; j < nt; j++) {
        nf_graph_prefix(g, "text_encoder.encoder.layer.%d.", nfz + j);
        if (top && j == nt - 1)
            RUN(nf__tt_bert_top_fwd(g, t, j, h.grp, h.ng, IDX(cls, U), U, nf__sl(&t->hs, j, TD), t->E));
        else
            RUN(nf__bert_fwd(g, t, nfz + j, j, h.grp, h.ng, nf__sl(&t->hs, j, TD), nf__sl(&t->hs, j + 1, TD)));
    }
    struct nf_gather gs;
    if (!top) {
        const nf_tensor hlast = nf__sl(&t->hs, nt, TD);
        nf_graph_prefix(g, "text_encoder.");
        gs = (struct nf_gather){.rows = U, .k = D, .n_table = T, .ldw = D, .ldy = D};
        RUN(nf_gather_rows(g, nf_label(g, "cls"), &gs, IDX(cls, U), hlast, t->E));
    }
    /* §5 fusion */
    nf_graph_prefix(g, "numerical_fusion.");
    gs = (struct nf_gather){.rows = BS, .k = D, .n_table = U, .ldw = D, .ldy = 2 * D};
    RUN(nf_gather_rows(g, nf_label(g, "text"), &gs, IDX(cell, BS), t->E, t->X0));
    RUN(nf_linear(g, nf_label(g, "scalar_embedder.0"), t->z, BS, 1, &m->s0_w, &m->s0_b, t->sh, NF_TAB_SCALAR_HIDDEN,
                  NF_ACT_RELU, 0));
    if (t->dp)
        RUN(nf__tt_drop(g, t, nf_label(g, "scalar_embedder.2"), NF__DS_SCALAR, t->sh, t->sh, BS * NF_TAB_SCALAR_HIDDEN,
                        0));
    RUN(nf_linear(g, nf_label(g, "scalar_embedder.3"), t->sh, BS, NF_TAB_SCALAR_HIDDEN, &m->s3_w, &m->s3_b,
                  nf_view1(&t->X0, D, 2 * BS * D - D), 2 * D, NF_ACT_NONE, 0));
    const int mf = 3 * nt; /* fusion linear1's module */
    nf_graph_prefix(g, "numerical_fusion.fusion_block.");
    RUN(nf__tt_tel_fwd(g, t, &m->fusion, &t->tel[0], mf, NF_TAB_FUSION_HEADS, BS, 2, t->X0, t->X1));
    nf_graph_prefix(g, "numerical_fusion.");
    nf_tensor F0 = nf__sl(&t->Fs, 0, BS * D);
    gs = (struct nf_gather){.rows = BS, .k = D, .n_table = 2 * BS, .ldw = D, .ldy = D, .scale = 0.5f};
    RUN(nf_gather_rows(g, nf_label(g, "mean.text"), &gs, IDX(even, BS), t->X1, F0));
    gs.accumulate = 1;
    RUN(nf_gather_rows(g, nf_label(g, "mean.num"), &gs, IDX(odd, BS), t->X1, F0));
    /* §6 interaction */
    for (int l = 0; l < NF_TAB_LAYERS; l++) {
        nf_graph_prefix(g, "tabular_encoder.encoder.layers.%d.", l);
        RUN(nf__tt_tel_fwd(g, t, &m->tab[l], &t->tel[1 + l], mf + 2 + 2 * l, NF_TAB_HEADS, B, S,
                           nf__sl(&t->Fs, l, BS * D), nf__sl(&t->Fs, l + 1, BS * D)));
    }
    /* §7 head */
    const int reg = C == 1, mh = t->n_mod - 1;
    const nf_tensor *W0 = reg ? &m->reg_w0 : &m->cls_w0, *b0 = reg ? &m->reg_b0 : &m->cls_b0;
    const nf_tensor *W2 = reg ? &m->reg_w2 : &m->cls_w2, *b2 = reg ? &m->reg_b2 : &m->cls_b2;
    nf_tensor Flast = nf__sl(&t->Fs, NF_TAB_LAYERS, BS * D);
    nf_tensor Tt = nf_view1(&t->Tt, 0, BC * D), Hp = nf_view1(&t->Hp, 0, BC * FF), Hh = nf_view1(&t->Hh, 0, BC * FF);
    nf_tensor xah = nf_view1(&t->xah, 0, BC * R), lg = nf_view1(&t->logits, 0, BC);
    nf_graph_prefix(g, reg ? "reg_head." : "cls_head.");
    gs = (struct nf_gather){.rows = BC, .k = D, .n_table = BS, .ldw = D, .ldy = D};
    RUN(nf_gather_rows(g, nf_label(g, "targets"), &gs, IDX(tgt, BC), Flast, Tt));
    RUN(nf_linear(g, nf_label(g, "layers.0"), Tt, BC, D, W0, b0, Hp, FF, NF_ACT_NONE, 0));
    RUN(nf__tt_lora_fwd(g, t, mh, Tt, D, BC, xah, Hp, FF));
    RUN(nf_act(g, nf_label(g, "layers.1"), Hp, Hh, BC * FF, NF_ACT_RELU));
    RUN(nf_linear(g, nf_label(g, "layers.2"), Hh, BC, FF, W2, b2, lg, 1, NF_ACT_NONE, 0));
    nf_graph_prefix(g, "%s", "");
    /* loss */
    nf_tensor dl = nf_view1(&t->dlogits, 0, BC), none = {0};
    if (has_y) {
        nf_tensor yv = nf_view1(&t->y, 0, B);
        if (!reg) {
            RUN(nf_cross_entropy(g, "loss.cross_entropy", lg, B, C, C, yv, t->loss, grad ? dl : none,
                                 (float) ((double) loss_scale / (double) B)));
        } else {
            RUN(nf_mse_loss(g, "loss.mse", lg, B, 1, yv, t->loss, grad ? dl : none,
                            (float) (2.0 * (double) loss_scale / (double) B)));
        }
    }
    if (grad) {
        /* head */
        nf_graph_prefix(g, reg ? "reg_head." : "cls_head.");
        nf_tensor dH = nf_view1(&t->dH, 0, BC * FF), dT = nf_view1(&t->dxn, 0, BC * D);
        RUN(nf_gemm(g, nf_label(g, "layers.2.dx"), dl, 0, 1, *W2, 0, FF, dH, FF, BC, FF, 1, 0));
        (void) b2;
        RUN(nf_act_backward(g, nf_label(g, "layers.1.backward"), Hp, dH, dH, BC * FF, NF_ACT_RELU));
        RUN(nf__tt_frozen_dx(g, nf_label(g, "layers.0.dx"), dH, FF, W0, dT, D, BC, 0));
        RUN(nf__tt_lora_bwd(g, t, mh, Tt, D, BC, xah, dH, FF, &dT, D));
        nf_tensor dX = nf_view1(&t->dX, 0, BS * D);
        gs = (struct nf_gather){.rows = BC, .k = D, .n_table = BS, .ldw = D, .ldy = D};
        RUN(nf_scatter_add_rows(g, nf_label(g, "targets.backward"), &gs, IDX(tgt_o, BC), IDX(tgt_s, BS + 1), dT, dX));
        /* interaction, from the top */
        for (int l = NF_TAB_LAYERS - 1; l >= 0; l--) {
            nf_graph_prefix(g, "tabular_encoder.encoder.layers.%d.", l);
            RUN(nf__tt_tel_bwd(g, t, &m->tab[l], &t->tel[1 + l], mf + 2 + 2 * l, NF_TAB_HEADS, B, S,
                               nf__sl(&t->Fs, l, BS * D), dX));
        }
        /* fusion mean: ½ to each token */
        nf_graph_prefix(g, "numerical_fusion.");
        nf_tensor dX2 = nf_view1(&t->dX2, 0, 2 * BS * D);
        gs = (struct nf_gather){.rows = BS, .k = D, .n_table = 2 * BS, .ldw = D, .ldy = D, .scale = 0.5f};
        RUN(nf_scatter_add_rows(g, nf_label(g, "mean.text.backward"), &gs, IDX(even_o, BS), IDX(even_s, 2 * BS + 1), dX,
                                dX2));
        gs.accumulate = 1;
        RUN(nf_scatter_add_rows(g, nf_label(g, "mean.num.backward"), &gs, IDX(odd_o, BS), IDX(odd_s, 2 * BS + 1), dX,
                                dX2));
        nf_graph_prefix(g, "numerical_fusion.fusion_block.");
        RUN(nf__tt_tel_bwd(g, t, &m->fusion, &t->tel[0], mf, NF_TAB_FUSION_HEADS, BS, 2, t->X0, dX2));
        if (nt > 0) {
            /* the text tokens' gradient onto the distinct strings, then onto their [CLS] rows */
            nf_graph_prefix(g, "numerical_fusion.");
            nf_tensor dE = nf_view1(&t->dE, 0, U * D), dh = nf_view1(&t->dh, 0, T * D);
            gs = (struct nf_gather){.rows = BS, .k = D, .n_table = U, .ldw = D, .ldy = 2 * D};
            RUN(nf_scatter_add_rows(g, nf_label(g, "text.backward"), &gs, IDX(cell_o, BS), IDX(cell_s, U + 1), dX2,
                                    dE));
            if (!top) {
                nf_graph_prefix(g, "text_encoder.");
                gs = (struct nf_gather){.rows = U, .k = D, .n_table = T, .ldw = D, .ldy = D};
                RUN(nf_scatter_add_rows(g, nf_label(g, "cls.backward"), &gs, IDX(cls_o, U), IDX(cls_s, T + 1), dE, dh));
            }
            for (int j = nt - 1; j >= 0; j--) {
                nf_graph_prefix(g, "text_encoder.encoder.layer.%d.", nfz + j);
                if (top && j == nt - 1)
                    RUN(nf__tt_bert_top_bwd(g, t, j, h.grp, h.ng, IDX(cls_o, U), IDX(cls_s, T + 1), U,
                                            nf__sl(&t->hs, j, TD), dE, j > 0));
                else
                    RUN(nf__bert_bwd(g, t, j, h.grp, h.ng, nf__sl(&t->hs, j, TD), j > 0));
            }
        }
        nf_graph_prefix(g, "%s", "");
    }
    if (has_y && loss) RUN(nf__tensor_download(&t->loss, loss, err));
    if (logits) RUN(nf__tensor_download(&lg, logits, err));
#undef RUN
#undef IDX
done:
    if (rc != NF_OK && h.Tm > 0) nf__tt_cache_clear(t); /* rows promised to strings may not hold them */
    nf__tt_host_free(&h);
    t->dp = 0;
    return rc;
}

int nf__tab_train_grad(struct nf_tab_train * t, const struct nf_tab_batch * b, const int64_t * y_class,
                       const float * y_value, float loss_scale, float * loss, float * logits, nf_err * err) {
    nf__trace_where_reset(t->m->be);
    const int rc = nf__tt_run(t, b, y_class, y_value, loss_scale, 1, loss, logits, err);
    nf__trace_where(t->m->be, t->m->placement.ops, sizeof(t->m->placement.ops));
    return rc;
}

int nf__tab_train_eval(struct nf_tab_train * t, const struct nf_tab_batch * b, const int64_t * y_class,
                       const float * y_value, float * logits, float * loss, nf_err * err) {
    return nf__tt_run(t, b, y_class, y_value, 1.0f, 0, loss, logits, err);
}
