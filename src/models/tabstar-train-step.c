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
 * A x), the head. Text layers below run forward only. Dropout is off.
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
    int64_t cls_o, cls_s, cell_o, cell_s, even_o, even_s, odd_o, odd_s, tgt_o, tgt_s, n;
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
    x.n = x.tgt_s + BS + 1;
    return x;
}

static int nf__tt_ws(struct nf_tab_train * t, int64_t T, int64_t U, int64_t B, int64_t BS, int64_t BC, int64_t idx_n,
                     nf_err * err) {
    if (t->have_ws && t->T >= T && t->U >= U && t->B >= B && t->BS >= BS && t->BC >= BC && t->idx_n >= idx_n)
        return NF_OK;
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
    }
#undef NF__ALLOC
    t->have_ws = 1;
    return NF_OK;
}

/* rows x (ld) slice i of a per-layer stack */
static nf_tensor nf__sl(const nf_tensor * s, int64_t i, int64_t n) { return nf_view1(s, i * n, n); }

/* ---- LoRA linear pieces ---------------------------------------------------------------------- */

/* y (rows at ldy) += 2 B (A x): xa = 2 (x Aᵀ) kept for the backward */
static int nf__lora_fwd(nf_graph * g, const struct nf_tab_train * t, int mi, nf_tensor x, int64_t ldx, int64_t rows,
                        nf_tensor xa, nf_tensor y, int64_t ldy) {
    const struct nf_tab_lora_module * md = &t->mod[mi];
    NF_TRY(nf_gemm(g, nf_label(g, "%s.lora_A", md->name), x, 0, ldx, nf__tt_a(t, NF__TT_P, mi), 1, md->in, xa, R, rows,
                   R, md->in, 0));
    NF_TRY(nf_scale(g, nf_label(g, "%s.lora_scale", md->name), xa, xa, rows * R, NF_TAB_LORA_SCALE, 0));
    return nf_gemm(g, nf_label(g, "%s.lora_B", md->name), xa, 0, R, nf__tt_b(t, NF__TT_P, mi), 1, R, y, ldy, rows,
                   md->out, R, 1);
}

/* dB += dyᵀ xa, dA += 2 (dy B)ᵀ x, and (dx) dx += 2 (dy B) A */
static int nf__lora_bwd(nf_graph * g, struct nf_tab_train * t, int mi, nf_tensor x, int64_t ldx, int64_t rows,
                        nf_tensor xa, nf_tensor dy, int64_t lddy, nf_tensor * dx, int64_t lddx) {
    const struct nf_tab_lora_module * md = &t->mod[mi];
    nf_tensor dxa = nf_view1(&t->dxa, 0, rows * R);
    NF_TRY(nf_gemm(g, nf_label(g, "%s.lora_B.grad", md->name), dy, 1, lddy, xa, 0, R, nf__tt_b(t, NF__TT_G, mi), R,
                   md->out, R, rows, 1));
    NF_TRY(nf_gemm(g, nf_label(g, "%s.lora_B.dx", md->name), dy, 0, lddy, nf__tt_b(t, NF__TT_P, mi), 0, R, dxa, R, rows,
                   R, md->out, 0));
    NF_TRY(nf_scale(g, nf_label(g, "%s.lora_scale.dx", md->name), dxa, dxa, rows * R, NF_TAB_LORA_SCALE, 0));
    NF_TRY(nf_gemm(g, nf_label(g, "%s.lora_A.grad", md->name), dxa, 1, R, x, 0, ldx, nf__tt_a(t, NF__TT_G, mi), md->in,
                   R, md->in, rows, 1));
    if (dx)
        NF_TRY(nf_gemm(g, nf_label(g, "%s.lora_A.dx", md->name), dxa, 0, R, nf__tt_a(t, NF__TT_P, mi), 0, md->in, *dx,
                       lddx, rows, md->in, R, 1));
    return NF_OK;
}

/* dx (+)= dy W for a frozen W (n, k) */
static int nf__frozen_dx(nf_graph * g, const char * label, nf_tensor dy, int64_t lddy, const nf_tensor * W,
                         nf_tensor dx, int64_t lddx, int64_t rows, int acc) {
    return nf_gemm(g, label, dy, 0, lddy, *W, 0, W->ne[1], dx, lddx, rows, W->ne[1], W->ne[0], acc);
}

static int nf__ln_bwd(nf_graph * g, struct nf_tab_train * t, const char * label, nf_tensor x, const nf_tensor * gam,
                      nf_tensor dy, nf_tensor dx, int64_t rows, float eps, int acc) {
    const int64_t D = NF_TAB_D;
    return nf_layer_norm_backward(g, label, x, rows, D, gam, dy, D, dx, D, nf_view1(&t->lnj, 0, D),
                                  nf_view1(&t->lnj, D, D), eps, acc);
}

/* ---- TransformerEncoderLayer (pre-LN, ReLU), adapters on linear1 (mi) and linear2 (mi + 1) ------- */

static struct nf_attn_layout nf__tel_layout(int64_t groups, int64_t seq, int64_t heads) {
    const int64_t D = NF_TAB_D, D3 = 3 * D;
    return (struct nf_attn_layout){.groups = groups,
                                   .lq = seq,
                                   .lk = seq,
                                   .n_heads = heads,
                                   .head_dim = D / heads,
                                   .q_gs = seq * D3,
                                   .q_ss = D3,
                                   .kv_gs = seq * D3,
                                   .kv_ss = D3,
                                   .o_gs = seq * D,
                                   .o_ss = D};
}

static int nf__tel_fwd(nf_graph * g, struct nf_tab_train * t, const struct nf_tab_tel * L, struct nf__tt_tel * S,
                       int mi, int64_t heads, int64_t groups, int64_t seq, nf_tensor xin, nf_tensor xout) {
    const int64_t D = NF_TAB_D, FF = NF_TAB_FF, N = groups * seq, n3 = N * 3 * D;
    const struct nf_attn_layout lay = nf__tel_layout(groups, seq, heads);
    NF_TRY(nf_layer_norm(g, nf_label(g, "norm1"), xin, N, D, &L->n1_w, &L->n1_b, S->xn1, D, NF_TAB_TEL_EPS));
    NF_TRY(nf_linear(g, nf_label(g, "self_attn.in_proj"), S->xn1, N, D, &L->in_w, &L->in_b, S->qkv, 3 * D, NF_ACT_NONE,
                     0));
    NF_TRY(nf_attention(g, nf_label(g, "self_attn"), &lay, nf_view1(&S->qkv, 0, n3), nf_view1(&S->qkv, D, n3 - D),
                        nf_view1(&S->qkv, 2 * D, n3 - 2 * D), S->att));
    NF_TRY(nf_copy(g, nf_label(g, "residual"), xin, S->xmid, N * D));
    NF_TRY(nf_linear(g, nf_label(g, "self_attn.out_proj"), S->att, N, D, &L->out_w, &L->out_b, S->xmid, D, NF_ACT_NONE,
                     1));
    NF_TRY(nf_layer_norm(g, nf_label(g, "norm2"), S->xmid, N, D, &L->n2_w, &L->n2_b, S->xn2, D, NF_TAB_TEL_EPS));
    NF_TRY(nf_linear(g, nf_label(g, "linear1"), S->xn2, N, D, &L->l1_w, &L->l1_b, S->hp, FF, NF_ACT_NONE, 0));
    NF_TRY(nf__lora_fwd(g, t, mi, S->xn2, D, N, S->xa1, S->hp, FF));
    NF_TRY(nf_act(g, nf_label(g, "linear1.relu"), S->hp, S->h, N * FF, NF_ACT_RELU));
    nf_tensor ff = nf_view1(&t->ff, 0, N * D);
    NF_TRY(nf_linear(g, nf_label(g, "linear2"), S->h, N, FF, &L->l2_w, &L->l2_b, ff, D, NF_ACT_NONE, 0));
    NF_TRY(nf__lora_fwd(g, t, mi + 1, S->h, FF, N, S->xa2, ff, D));
    NF_TRY(nf_copy(g, nf_label(g, "residual"), S->xmid, xout, N * D));
    return nf_scale(g, nf_label(g, "residual.add"), ff, xout, N * D, 1.0f, 1);
}

/* dX (N, D): d xout in, d xin out */
static int nf__tel_bwd(nf_graph * g, struct nf_tab_train * t, const struct nf_tab_tel * L, struct nf__tt_tel * S,
                       int mi, int64_t heads, int64_t groups, int64_t seq, nf_tensor xin, nf_tensor dX) {
    const int64_t D = NF_TAB_D, FF = NF_TAB_FF, N = groups * seq, n3 = N * 3 * D;
    nf_tensor dH = nf_view1(&t->dH, 0, N * FF), dxn = nf_view1(&t->dxn, 0, N * D);
    nf_tensor datt = nf_view1(&t->datt, 0, N * D), dqkv = nf_view1(&t->dqkv, 0, n3);
    /* feed-forward: xout = xmid + linear2(relu(linear1(LN2(xmid)))) */
    NF_TRY(nf__frozen_dx(g, nf_label(g, "linear2.dx"), dX, D, &L->l2_w, dH, FF, N, 0));
    NF_TRY(nf__lora_bwd(g, t, mi + 1, S->h, FF, N, S->xa2, dX, D, &dH, FF));
    NF_TRY(nf_act_backward(g, nf_label(g, "linear1.relu.backward"), S->hp, dH, dH, N * FF, NF_ACT_RELU));
    NF_TRY(nf__frozen_dx(g, nf_label(g, "linear1.dx"), dH, FF, &L->l1_w, dxn, D, N, 0));
    NF_TRY(nf__lora_bwd(g, t, mi, S->xn2, D, N, S->xa1, dH, FF, &dxn, D));
    NF_TRY(nf__ln_bwd(g, t, nf_label(g, "norm2.backward"), S->xmid, &L->n2_w, dxn, dX, N, NF_TAB_TEL_EPS, 1));
    /* attention: xmid = xin + out_proj(MHA(in_proj(LN1(xin)))) */
    const struct nf_attn_layout lay = nf__tel_layout(groups, seq, heads);
    NF_TRY(nf__frozen_dx(g, nf_label(g, "self_attn.out_proj.dx"), dX, D, &L->out_w, datt, D, N, 0));
    NF_TRY(nf_attention_backward(g, nf_label(g, "self_attn.backward"), &lay, nf_view1(&S->qkv, 0, n3),
                                 nf_view1(&S->qkv, D, n3 - D), nf_view1(&S->qkv, 2 * D, n3 - 2 * D), S->att, datt,
                                 nf_view1(&dqkv, 0, n3), nf_view1(&dqkv, D, n3 - D), nf_view1(&dqkv, 2 * D, n3 - 2 * D),
                                 t->stats, 0));
    NF_TRY(nf__frozen_dx(g, nf_label(g, "self_attn.in_proj.dx"), dqkv, 3 * D, &L->in_w, dxn, D, N, 0));
    return nf__ln_bwd(g, t, nf_label(g, "norm1.backward"), xin, &L->n1_w, dxn, dX, N, NF_TAB_TEL_EPS, 1);
}

/* ---- BERT ------------------------------------------------------------------------------------- */

/* a run of distinct strings of one length: strings p0.. (sorted order), n of them, starting at token t0 */
struct nf__tt_grp {
    int64_t n, len, t0;
};

static struct nf_attn_layout nf__bert_layout(const nf_tab * m, const struct nf__tt_grp * gr) {
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
                                   .o_ss = D};
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
        NF_TRY(nf__lora_fwd(g, t, 3 * j + c, hin, D, T, nf_view1(&t->bxa, (j * 3 + c) * T * R, T * R),
                            nf_view1(&qkv, c * D, T * 3 * D - c * D), 3 * D));
    }
    for (int k = 0; k < ng; k++) {
        const struct nf_attn_layout lay = nf__bert_layout(m, &grp[k]);
        const int64_t t0 = grp[k].t0, qn = grp[k].n * grp[k].len * 3 * D;
        NF_TRY(nf_attention(g, nf_label(g, "attention.self"), &lay, nf_view1(&qkv, t0 * 3 * D, qn),
                            nf_view1(&qkv, t0 * 3 * D + D, qn - D), nf_view1(&qkv, t0 * 3 * D + 2 * D, qn - 2 * D),
                            nf_view1(&att, t0 * D, grp[k].n * grp[k].len * D)));
    }
    NF_TRY(nf_copy(g, nf_label(g, "attention.residual"), hin, s1, T * D));
    NF_TRY(nf_linear(g, nf_label(g, "attention.output.dense"), att, T, D, &L->o_w, &L->o_b, s1, D, NF_ACT_NONE, 1));
    NF_TRY(nf_layer_norm(g, nf_label(g, "attention.output.LayerNorm"), s1, T, D, &L->ln1_w, &L->ln1_b, a1, D,
                         NF_TAB_BERT_EPS));
    if (j >= 0) {
        NF_TRY(nf_linear(g, nf_label(g, "intermediate.dense"), a1, T, D, &L->i_w, &L->i_b, ffp, I, NF_ACT_NONE, 0));
        NF_TRY(nf_act(g, nf_label(g, "intermediate.gelu"), ffp, ffa, T * I, NF_ACT_GELU));
    } else {
        NF_TRY(nf_linear(g, nf_label(g, "intermediate.dense"), a1, T, D, &L->i_w, &L->i_b, ffa, I, NF_ACT_GELU, 0));
    }
    NF_TRY(nf_copy(g, nf_label(g, "output.residual"), a1, s2, T * D));
    NF_TRY(nf_linear(g, nf_label(g, "output.dense"), ffa, T, I, &L->f_w, &L->f_b, s2, D, NF_ACT_NONE, 1));
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
    NF_TRY(
        nf__ln_bwd(g, t, nf_label(g, "output.LayerNorm.backward"), s2, &L->ln2_w, t->dh, t->ds, T, NF_TAB_BERT_EPS, 0));
    NF_TRY(nf__frozen_dx(g, nf_label(g, "output.dense.dx"), t->ds, D, &L->f_w, dH, I, T, 0));
    NF_TRY(nf_act_backward(g, nf_label(g, "intermediate.gelu.backward"), ffp, dH, dH, T * I, NF_ACT_GELU));
    NF_TRY(nf_copy(g, nf_label(g, "output.residual.backward"), t->ds, t->da, T * D));
    NF_TRY(nf__frozen_dx(g, nf_label(g, "intermediate.dense.dx"), dH, I, &L->i_w, t->da, D, T, 1));
    NF_TRY(nf__ln_bwd(g, t, nf_label(g, "attention.output.LayerNorm.backward"), s1, &L->ln1_w, t->da, t->ds, T,
                      NF_TAB_BERT_EPS, 0));
    NF_TRY(nf__frozen_dx(g, nf_label(g, "attention.output.dense.dx"), t->ds, D, &L->o_w, datt, D, T, 0));
    for (int k = 0; k < ng; k++) {
        const struct nf_attn_layout lay = nf__bert_layout(m, &grp[k]);
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
        NF_TRY(nf__frozen_dx(g, nf_label(g, "attention.self.qkv.dx"), dqkv, 3 * D, &L->qkv_w, t->dh, D, T, 1));
    }
    for (int c = 0; c < 3; c++) {
        NF_TRY(nf__lora_bwd(g, t, 3 * j + c, hin, D, T, nf_view1(&t->bxa, (j * 3 + c) * T * R, T * R),
                            nf_view1(&dqkv, c * D, T * 3 * D - c * D), 3 * D, need_dx ? &t->dh : NULL, D));
    }
    return NF_OK;
}

/* ---- the step --------------------------------------------------------------------------------- */

struct nf__tt_host {
    int32_t * hx;
    struct nf__tt_grp * grp;
    int ng;
};

static void nf__tt_host_free(struct nf__tt_host * h) {
    free(h->hx);
    free(h->grp);
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
    if (rc == NF_OK) rc = nf__tt_ws(t, T, U, B, BS, BC, ix.n, err);
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
        nf__tt_host_free(&h);
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
    nf_tensor h0 = nf__sl(&t->hs, nfz % 2 == 0 ? 0 : 1, TD);
    if (grad) RUN(nf_fill(g, "train.frozen_ln_grad", t->lnj, 1, 2 * D, 2 * D, 0.0f));
    /* §4 BERT */
    nf_graph_prefix(g, "text_encoder.embeddings.");
    struct nf_gather gs = {.rows = T, .k = D, .n_table = m->cfg.vocab, .ldw = D, .ldy = D};
    nf_tensor e2 = nf_view1(&t->ds, 0, T * D);
    RUN(nf_gather_rows(g, nf_label(g, "word_embeddings"), &gs, IDX(ids, T), m->word, e2));
    gs.n_table = m->cfg.type_vocab;
    gs.accumulate = 1;
    RUN(nf_gather_rows(g, nf_label(g, "token_type_embeddings"), &gs, IDX(zero, T), m->type, e2));
    gs.n_table = m->cfg.max_pos;
    RUN(nf_gather_rows(g, nf_label(g, "position_embeddings"), &gs, IDX(pos, T), m->pos, e2));
    RUN(nf_layer_norm(g, nf_label(g, "LayerNorm"), e2, T, D, &m->eln_w, &m->eln_b, h0, D, NF_TAB_BERT_EPS));
    for (int l = 0; l < m->cfg.text_layers; l++) {
        nf_graph_prefix(g, "text_encoder.encoder.layer.%d.", l);
        const int j = l - nfz;
        nf_tensor hin, hout;
        if (j < 0) {
            hin = nf__sl(&t->hs, (l + (nfz % 2)) % 2, TD);
            hout = nf__sl(&t->hs, (l + 1 + (nfz % 2)) % 2, TD);
        } else {
            hin = nf__sl(&t->hs, j, TD);
            hout = nf__sl(&t->hs, j + 1, TD);
        }
        RUN(nf__bert_fwd(g, t, l, j, h.grp, h.ng, hin, hout));
    }
    const nf_tensor hlast = nf__sl(&t->hs, nt, TD);
    nf_graph_prefix(g, "text_encoder.");
    gs = (struct nf_gather){.rows = U, .k = D, .n_table = T, .ldw = D, .ldy = D};
    RUN(nf_gather_rows(g, nf_label(g, "cls"), &gs, IDX(cls, U), hlast, t->E));
    /* §5 fusion */
    nf_graph_prefix(g, "numerical_fusion.");
    gs = (struct nf_gather){.rows = BS, .k = D, .n_table = U, .ldw = D, .ldy = 2 * D};
    RUN(nf_gather_rows(g, nf_label(g, "text"), &gs, IDX(cell, BS), t->E, t->X0));
    RUN(nf_linear(g, nf_label(g, "scalar_embedder.0"), t->z, BS, 1, &m->s0_w, &m->s0_b, t->sh, NF_TAB_SCALAR_HIDDEN,
                  NF_ACT_RELU, 0));
    RUN(nf_linear(g, nf_label(g, "scalar_embedder.3"), t->sh, BS, NF_TAB_SCALAR_HIDDEN, &m->s3_w, &m->s3_b,
                  nf_view1(&t->X0, D, 2 * BS * D - D), 2 * D, NF_ACT_NONE, 0));
    const int mf = 3 * nt; /* fusion linear1's module */
    nf_graph_prefix(g, "numerical_fusion.fusion_block.");
    RUN(nf__tel_fwd(g, t, &m->fusion, &t->tel[0], mf, NF_TAB_FUSION_HEADS, BS, 2, t->X0, t->X1));
    nf_graph_prefix(g, "numerical_fusion.");
    nf_tensor F0 = nf__sl(&t->Fs, 0, BS * D);
    gs = (struct nf_gather){.rows = BS, .k = D, .n_table = 2 * BS, .ldw = D, .ldy = D, .scale = 0.5f};
    RUN(nf_gather_rows(g, nf_label(g, "mean.text"), &gs, IDX(even, BS), t->X1, F0));
    gs.accumulate = 1;
    RUN(nf_gather_rows(g, nf_label(g, "mean.num"), &gs, IDX(odd, BS), t->X1, F0));
    /* §6 interaction */
    for (int l = 0; l < NF_TAB_LAYERS; l++) {
        nf_graph_prefix(g, "tabular_encoder.encoder.layers.%d.", l);
        RUN(nf__tel_fwd(g, t, &m->tab[l], &t->tel[1 + l], mf + 2 + 2 * l, NF_TAB_HEADS, B, S, nf__sl(&t->Fs, l, BS * D),
                        nf__sl(&t->Fs, l + 1, BS * D)));
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
    RUN(nf__lora_fwd(g, t, mh, Tt, D, BC, xah, Hp, FF));
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
        RUN(nf__frozen_dx(g, nf_label(g, "layers.0.dx"), dH, FF, W0, dT, D, BC, 0));
        RUN(nf__lora_bwd(g, t, mh, Tt, D, BC, xah, dH, FF, &dT, D));
        nf_tensor dX = nf_view1(&t->dX, 0, BS * D);
        gs = (struct nf_gather){.rows = BC, .k = D, .n_table = BS, .ldw = D, .ldy = D};
        RUN(nf_scatter_add_rows(g, nf_label(g, "targets.backward"), &gs, IDX(tgt_o, BC), IDX(tgt_s, BS + 1), dT, dX));
        /* interaction, from the top */
        for (int l = NF_TAB_LAYERS - 1; l >= 0; l--) {
            nf_graph_prefix(g, "tabular_encoder.encoder.layers.%d.", l);
            RUN(nf__tel_bwd(g, t, &m->tab[l], &t->tel[1 + l], mf + 2 + 2 * l, NF_TAB_HEADS, B, S,
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
        RUN(nf__tel_bwd(g, t, &m->fusion, &t->tel[0], mf, NF_TAB_FUSION_HEADS, BS, 2, t->X0, dX2));
        if (nt > 0) {
            /* the text tokens' gradient onto the distinct strings, then onto their [CLS] rows */
            nf_graph_prefix(g, "numerical_fusion.");
            nf_tensor dE = nf_view1(&t->dE, 0, U * D), dh = nf_view1(&t->dh, 0, T * D);
            gs = (struct nf_gather){.rows = BS, .k = D, .n_table = U, .ldw = D, .ldy = 2 * D};
            RUN(nf_scatter_add_rows(g, nf_label(g, "text.backward"), &gs, IDX(cell_o, BS), IDX(cell_s, U + 1), dX2,
                                    dE));
            nf_graph_prefix(g, "text_encoder.");
            gs = (struct nf_gather){.rows = U, .k = D, .n_table = T, .ldw = D, .ldy = D};
            RUN(nf_scatter_add_rows(g, nf_label(g, "cls.backward"), &gs, IDX(cls_o, U), IDX(cls_s, T + 1), dE, dh));
            for (int j = nt - 1; j >= 0; j--) {
                nf_graph_prefix(g, "text_encoder.encoder.layer.%d.", nfz + j);
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
    nf__tt_host_free(&h);
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
