/* tabstar-train-layers.c -- the pieces of TabSTAR's training step
 * (tabstar-train-step.c): DROPOUT at a site (nf__tab_train_dropout), the LoRA
 * linear's forward / backward (y += 2 B (A x), lora_dropout on x), a frozen
 * weight's dx, LayerNorm's backward, and the pre-LN TransformerEncoderLayer
 * (ReLU; adapters on linear1 / linear2; dropout1 / dropout / dropout2) forward
 * keeping what its backward reads, and that backward. */
#include "tabstar-train-impl.h"

#define R NF_TAB_LORA_R

/* ---- LoRA linear pieces ---------------------------------------------------------------------- */

uint64_t nf__tt_seed(const struct nf_tab_train * t, uint64_t site) {
    uint64_t z = t->drop_seed + t->drop_calls * 0xD1B54A32D192ED03ull + site * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

int nf__tt_drop(nf_graph * g, const struct nf_tab_train * t, const char * label, uint64_t site, nf_tensor x,
                nf_tensor y, int64_t n, int acc) {
    return nf_dropout(g, label, x, y, n, t->drop, nf__tt_seed(t, site), acc);
}

/* y (rows at ldy) += 2 B (A x): xa = 2 (x Aᵀ) kept for the backward; with dropout, x is lora_dropout(x) (in
 * t->lorab; x contiguous) */
int nf__tt_lora_fwd(nf_graph * g, const struct nf_tab_train * t, int mi, nf_tensor x, int64_t ldx, int64_t rows,
                    nf_tensor xa, nf_tensor y, int64_t ldy) {
    const struct nf_tab_lora_module * md = &t->mod[mi];
    if (t->dp) {
        nf_tensor xd = nf_view1(&t->lorab, 0, rows * md->in);
        NF_TRY(nf__tt_drop(g, t, nf_label(g, "%s.lora_dropout", md->name), NF__DS_LORA(mi), x, xd, rows * md->in, 0));
        x = xd;
        ldx = md->in;
    }
    NF_TRY(nf_gemm(g, nf_label(g, "%s.lora_A", md->name), x, 0, ldx, nf__tt_a(t, NF__TT_P, mi), 1, md->in, xa, R, rows,
                   R, md->in, 0));
    NF_TRY(nf_scale(g, nf_label(g, "%s.lora_scale", md->name), xa, xa, rows * R, NF_TAB_LORA_SCALE, 0));
    return nf_gemm(g, nf_label(g, "%s.lora_B", md->name), xa, 0, R, nf__tt_b(t, NF__TT_P, mi), 1, R, y, ldy, rows,
                   md->out, R, 1);
}

/* dB += dyᵀ xa, dA += 2 (dy B)ᵀ x, and (dx) dx += 2 (dy B) A */
int nf__tt_lora_bwd(nf_graph * g, struct nf_tab_train * t, int mi, nf_tensor x, int64_t ldx, int64_t rows, nf_tensor xa,
                    nf_tensor dy, int64_t lddy, nf_tensor * dx, int64_t lddx) {
    const struct nf_tab_lora_module * md = &t->mod[mi];
    nf_tensor dxa = nf_view1(&t->dxa, 0, rows * R), xd = t->dp ? nf_view1(&t->lorab, 0, rows * md->in) : x;
    if (t->dp) { /* the forward's lora_dropout(x) again (the same mask) */
        NF_TRY(nf__tt_drop(g, t, nf_label(g, "%s.lora_dropout", md->name), NF__DS_LORA(mi), x, xd, rows * md->in, 0));
        x = xd;
        ldx = md->in;
    }
    NF_TRY(nf_gemm(g, nf_label(g, "%s.lora_B.grad", md->name), dy, 1, lddy, xa, 0, R, nf__tt_b(t, NF__TT_G, mi), R,
                   md->out, R, rows, 1));
    NF_TRY(nf_gemm(g, nf_label(g, "%s.lora_B.dx", md->name), dy, 0, lddy, nf__tt_b(t, NF__TT_P, mi), 0, R, dxa, R, rows,
                   R, md->out, 0));
    NF_TRY(nf_scale(g, nf_label(g, "%s.lora_scale.dx", md->name), dxa, dxa, rows * R, NF_TAB_LORA_SCALE, 0));
    NF_TRY(nf_gemm(g, nf_label(g, "%s.lora_A.grad", md->name), dxa, 1, R, x, 0, ldx, nf__tt_a(t, NF__TT_G, mi), md->in,
                   R, md->in, rows, 1));
    if (dx && t->dp) { /* dx += mask (2 (dy B) A) (dx contiguous) */
        NF_TRY(nf_gemm(g, nf_label(g, "%s.lora_A.dx", md->name), dxa, 0, R, nf__tt_a(t, NF__TT_P, mi), 0, md->in, xd,
                       md->in, rows, md->in, R, 0));
        return nf__tt_drop(g, t, nf_label(g, "%s.lora_dropout.backward", md->name), NF__DS_LORA(mi), xd, *dx,
                           rows * md->in, 1);
    }
    if (dx)
        NF_TRY(nf_gemm(g, nf_label(g, "%s.lora_A.dx", md->name), dxa, 0, R, nf__tt_a(t, NF__TT_P, mi), 0, md->in, *dx,
                       lddx, rows, md->in, R, 1));
    return NF_OK;
}

/* dx (+)= dy W for a frozen W (n, k) */
int nf__tt_frozen_dx(nf_graph * g, const char * label, nf_tensor dy, int64_t lddy, const nf_tensor * W, nf_tensor dx,
                     int64_t lddx, int64_t rows, int acc) {
    return nf_gemm(g, label, dy, 0, lddy, *W, 0, W->ne[1], dx, lddx, rows, W->ne[1], W->ne[0], acc);
}

int nf__tt_ln_bwd(nf_graph * g, struct nf_tab_train * t, const char * label, nf_tensor x, const nf_tensor * gam,
                  nf_tensor dy, nf_tensor dx, int64_t rows, float eps, int acc) {
    const int64_t D = NF_TAB_D;
    return nf_layer_norm_backward(g, label, x, rows, D, gam, dy, D, dx, D, nf_view1(&t->lnj, 0, D),
                                  nf_view1(&t->lnj, D, D), eps, acc);
}

/* ---- TransformerEncoderLayer (pre-LN, ReLU), adapters on linear1 (mi) and linear2 (mi + 1) ------- */

/* TEL tl's self-attention; with dropout, MultiheadAttention's dropout on the probabilities (its mask: site
 * NF__DS_TEL(tl, 3)) */
static struct nf_attn_layout nf__tel_layout(const struct nf_tab_train * t, int64_t tl, int64_t groups, int64_t seq,
                                            int64_t heads) {
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
                                   .o_ss = D,
                                   .drop_p = t->dp ? t->drop : 0.0f,
                                   .drop_seed = t->dp ? nf__tt_seed(t, NF__DS_TEL(tl, 3)) : 0};
}

int nf__tt_tel_fwd(nf_graph * g, struct nf_tab_train * t, const struct nf_tab_tel * L, struct nf__tt_tel * S, int mi,
                   int64_t heads, int64_t groups, int64_t seq, nf_tensor xin, nf_tensor xout) {
    const int64_t D = NF_TAB_D, FF = NF_TAB_FF, N = groups * seq, n3 = N * 3 * D;
    const int64_t tl = S - t->tel; /* the TEL's index: its dropout sites */
    const struct nf_attn_layout lay = nf__tel_layout(t, tl, groups, seq, heads);
    nf_tensor db = t->dp ? nf_view1(&t->dropb, 0, N * D) : xout;
    NF_TRY(nf_layer_norm(g, nf_label(g, "norm1"), xin, N, D, &L->n1_w, &L->n1_b, S->xn1, D, NF_TAB_TEL_EPS));
    NF_TRY(nf_linear(g, nf_label(g, "self_attn.in_proj"), S->xn1, N, D, &L->in_w, &L->in_b, S->qkv, 3 * D, NF_ACT_NONE,
                     0));
    NF_TRY(nf_attention(g, nf_label(g, "self_attn"), &lay, nf_view1(&S->qkv, 0, n3), nf_view1(&S->qkv, D, n3 - D),
                        nf_view1(&S->qkv, 2 * D, n3 - 2 * D), S->att));
    NF_TRY(nf_copy(g, nf_label(g, "residual"), xin, S->xmid, N * D));
    if (t->dp) { /* xmid = xin + dropout1(out_proj(att)) */
        NF_TRY(
            nf_linear(g, nf_label(g, "self_attn.out_proj"), S->att, N, D, &L->out_w, &L->out_b, db, D, NF_ACT_NONE, 0));
        NF_TRY(nf__tt_drop(g, t, nf_label(g, "dropout1"), NF__DS_TEL(tl, 0), db, S->xmid, N * D, 1));
    } else {
        NF_TRY(nf_linear(g, nf_label(g, "self_attn.out_proj"), S->att, N, D, &L->out_w, &L->out_b, S->xmid, D,
                         NF_ACT_NONE, 1));
    }
    NF_TRY(nf_layer_norm(g, nf_label(g, "norm2"), S->xmid, N, D, &L->n2_w, &L->n2_b, S->xn2, D, NF_TAB_TEL_EPS));
    NF_TRY(nf_linear(g, nf_label(g, "linear1"), S->xn2, N, D, &L->l1_w, &L->l1_b, S->hp, FF, NF_ACT_NONE, 0));
    NF_TRY(nf__tt_lora_fwd(g, t, mi, S->xn2, D, N, S->xa1, S->hp, FF));
    NF_TRY(nf_act(g, nf_label(g, "linear1.relu"), S->hp, S->h, N * FF, NF_ACT_RELU));
    if (t->dp) NF_TRY(nf__tt_drop(g, t, nf_label(g, "dropout"), NF__DS_TEL(tl, 1), S->h, S->h, N * FF, 0));
    nf_tensor ff = nf_view1(&t->ff, 0, N * D);
    NF_TRY(nf_linear(g, nf_label(g, "linear2"), S->h, N, FF, &L->l2_w, &L->l2_b, ff, D, NF_ACT_NONE, 0));
    NF_TRY(nf__tt_lora_fwd(g, t, mi + 1, S->h, FF, N, S->xa2, ff, D));
    NF_TRY(nf_copy(g, nf_label(g, "residual"), S->xmid, xout, N * D));
    if (t->dp) return nf__tt_drop(g, t, nf_label(g, "dropout2"), NF__DS_TEL(tl, 2), ff, xout, N * D, 1);
    return nf_scale(g, nf_label(g, "residual.add"), ff, xout, N * D, 1.0f, 1);
}

/* dX (N, D): d xout in, d xin out */
int nf__tt_tel_bwd(nf_graph * g, struct nf_tab_train * t, const struct nf_tab_tel * L, struct nf__tt_tel * S, int mi,
                   int64_t heads, int64_t groups, int64_t seq, nf_tensor xin, nf_tensor dX) {
    const int64_t D = NF_TAB_D, FF = NF_TAB_FF, N = groups * seq, n3 = N * 3 * D;
    nf_tensor dH = nf_view1(&t->dH, 0, N * FF), dxn = nf_view1(&t->dxn, 0, N * D);
    nf_tensor datt = nf_view1(&t->datt, 0, N * D), dqkv = nf_view1(&t->dqkv, 0, n3);
    const int64_t tl = S - t->tel;
    nf_tensor dy = dX; /* d of linear2's output: dropout2's mask on dX */
    if (t->dp) {
        dy = nf_view1(&t->dropb, 0, N * D);
        NF_TRY(nf__tt_drop(g, t, nf_label(g, "dropout2.backward"), NF__DS_TEL(tl, 2), dX, dy, N * D, 0));
    }
    /* feed-forward: xout = xmid + linear2(relu(linear1(LN2(xmid)))) */
    NF_TRY(nf__tt_frozen_dx(g, nf_label(g, "linear2.dx"), dy, D, &L->l2_w, dH, FF, N, 0));
    NF_TRY(nf__tt_lora_bwd(g, t, mi + 1, S->h, FF, N, S->xa2, dy, D, &dH, FF));
    if (t->dp) NF_TRY(nf__tt_drop(g, t, nf_label(g, "dropout.backward"), NF__DS_TEL(tl, 1), dH, dH, N * FF, 0));
    NF_TRY(nf_act_backward(g, nf_label(g, "linear1.relu.backward"), S->hp, dH, dH, N * FF, NF_ACT_RELU));
    NF_TRY(nf__tt_frozen_dx(g, nf_label(g, "linear1.dx"), dH, FF, &L->l1_w, dxn, D, N, 0));
    NF_TRY(nf__tt_lora_bwd(g, t, mi, S->xn2, D, N, S->xa1, dH, FF, &dxn, D));
    NF_TRY(nf__tt_ln_bwd(g, t, nf_label(g, "norm2.backward"), S->xmid, &L->n2_w, dxn, dX, N, NF_TAB_TEL_EPS, 1));
    /* attention: xmid = xin + out_proj(MHA(in_proj(LN1(xin)))) */
    const struct nf_attn_layout lay = nf__tel_layout(t, tl, groups, seq, heads);
    if (t->dp) {
        dy = nf_view1(&t->dropb, 0, N * D);
        NF_TRY(nf__tt_drop(g, t, nf_label(g, "dropout1.backward"), NF__DS_TEL(tl, 0), dX, dy, N * D, 0));
    }
    NF_TRY(nf__tt_frozen_dx(g, nf_label(g, "self_attn.out_proj.dx"), dy, D, &L->out_w, datt, D, N, 0));
    NF_TRY(nf_attention_backward(g, nf_label(g, "self_attn.backward"), &lay, nf_view1(&S->qkv, 0, n3),
                                 nf_view1(&S->qkv, D, n3 - D), nf_view1(&S->qkv, 2 * D, n3 - 2 * D), S->att, datt,
                                 nf_view1(&dqkv, 0, n3), nf_view1(&dqkv, D, n3 - D), nf_view1(&dqkv, 2 * D, n3 - 2 * D),
                                 t->stats, 0));
    NF_TRY(nf__tt_frozen_dx(g, nf_label(g, "self_attn.in_proj.dx"), dqkv, 3 * D, &L->in_w, dxn, D, N, 0));
    return nf__tt_ln_bwd(g, t, nf_label(g, "norm1.backward"), xin, &L->n1_w, dxn, dX, N, NF_TAB_TEL_EPS, 1);
}
