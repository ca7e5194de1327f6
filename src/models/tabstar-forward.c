/* tabstar-forward.c -- TabSTAR's forward, as spec §4-§7 write it
 * (shared/specs/tabstar.md), over already tokenized distinct strings.
 *
 *   §4  BERT (e5-small-v2): every distinct string once, at its own length
 *       (no padding, so no mask); strings of one length are the groups of
 *       one ATTENTION call. h0 = LN(word[t] + type[0] + pos[j]), eps 1e-12;
 *       per layer (post-LN): a = LN(h + O(MHA(h))), h = LN(a + W2 GELU(W1 a));
 *       e = row 0 ([CLS]) of the last hidden state.
 *   §5  per cell: X = [e; n], n = W3 ReLU(W0 z + b0) + b3; one pre-LN
 *       TransformerEncoderLayer (2 heads, ReLU, eps 1e-5); F = (X0 + X1) / 2.
 *   §6  6 pre-LN layers (6 heads) over the cells of each row, no final norm.
 *   §7  cls_head (C > 1) or reg_head (C == 1), 384 -> 1536 -> ReLU -> 1, on
 *       the C target tokens.
 * Row-major tensors, rows = tokens (BERT) or cells. */
#include "tabstar-impl.h"
#include "nf-ops.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct nf_tab_ws {
    int64_t T, U, BS, BC; /* capacities: text tokens, strings, cells, target cells */
    nf_tensor idx;        /* i32 index lists (see the layout in the forward)       */
    int64_t idx_n;
    nf_tensor h, h2, qkv, a, ff;    /* BERT: (T, D) (T, D) (T, 3D) (T, D) (T, I) */
    nf_tensor E;                    /* (U, D) the strings' [CLS] vectors          */
    nf_tensor z, sh;                /* (BS), (BS, 768)                            */
    nf_tensor X, Xn, qkv2, a2, hid; /* (2BS, D) (2BS, D) (2BS, 3D) (2BS, D) (2BS, F) */
    nf_tensor F;                    /* (BS, D)                                  */
    nf_tensor Tt, Hh, logits;       /* (BC, D) (BC, F) (BC)                      */
    struct nf_workspace mem;        /* the tensors above, freed together; the stage dumps */
};

static void nf__ws_free(struct nf_tab_ws * w) {
    if (!w) return;
    nf__workspace_release(&w->mem);
    free(w);
}

void nf__tab_release_workspace(nf_tab * m) {
    if (!m) return;
    nf__ws_free(m->ws);
    m->ws = NULL;
}

void nf__tab_bind_views(nf_tab * m) {
    for (int l = 0; l < m->cfg.text_layers; l++) {
        struct nf_tab_bert_layer * L = &m->bert[l];
        const int64_t w[2] = {3 * NF_TAB_D, NF_TAB_D}, b[1] = {3 * NF_TAB_D};
        L->qkv_w = nf__tensor_view(&L->q_w, 0, 2, w); /* the table packs key, value right after query */
        L->qkv_b = nf__tensor_view(&L->q_b, 0, 1, b);
        snprintf(L->qkv_w_name, sizeof(L->qkv_w_name), "text_encoder.encoder.layer.%d.attention.self.qkv.weight", l);
        snprintf(L->qkv_b_name, sizeof(L->qkv_b_name), "text_encoder.encoder.layer.%d.attention.self.qkv.bias", l);
        L->qkv_w.name = L->qkv_w_name;
        L->qkv_b.name = L->qkv_b_name;
    }
}

static int nf__ws_alloc(nf_tab * m, struct nf_tab_ws * w, nf_err * err) {
    nf_backend * be = m->be;
    const int64_t D = NF_TAB_D, T = w->T, BS = w->BS, BC = w->BC;
#define NF__ALLOC(t, type, name, n)                                                \
    do {                                                                           \
        const int64_t ne_[1] = {(n)};                                              \
        NF_TRY(nf__workspace_tensor(&w->mem, be, &w->t, type, 1, ne_, name, err)); \
    } while (0)
    NF__ALLOC(idx, NF_I32, "indices", w->idx_n);
    NF__ALLOC(h, NF_F32, "text_hidden", T * D);
    NF__ALLOC(h2, NF_F32, "text_hidden2", T * D);
    NF__ALLOC(qkv, NF_F32, "text_qkv", T * 3 * D);
    NF__ALLOC(a, NF_F32, "text_attn", T * D);
    NF__ALLOC(ff, NF_F32, "text_ff", T * (int64_t) m->cfg.text_ff);
    NF__ALLOC(E, NF_F32, "text_cls", w->U * D);
    NF__ALLOC(z, NF_F32, "x_num", BS);
    NF__ALLOC(sh, NF_F32, "scalar_hidden", BS * NF_TAB_SCALAR_HIDDEN);
    NF__ALLOC(X, NF_F32, "fusion_stream", 2 * BS * D);
    NF__ALLOC(Xn, NF_F32, "normed", 2 * BS * D);
    NF__ALLOC(qkv2, NF_F32, "qkv", 2 * BS * 3 * D);
    NF__ALLOC(a2, NF_F32, "attn", 2 * BS * D);
    NF__ALLOC(hid, NF_F32, "ff_hidden", 2 * BS * NF_TAB_FF);
    NF__ALLOC(F, NF_F32, "cells", BS * D);
    NF__ALLOC(Tt, NF_F32, "target_tokens", BC * D);
    NF__ALLOC(Hh, NF_F32, "head_hidden", BC * NF_TAB_FF);
    NF__ALLOC(logits, NF_F32, "logits", BC);
#undef NF__ALLOC
    return NF_OK;
}

/* a workspace at least this large (kept for the next forward) */
static int nf__ws_get(nf_tab * m, int64_t T, int64_t U, int64_t BS, int64_t BC, int64_t idx_n, struct nf_tab_ws ** out,
                      nf_err * err) {
    struct nf_tab_ws * w = m->ws;
    if (w && w->T >= T && w->U >= U && w->BS >= BS && w->BC >= BC && w->idx_n >= idx_n) {
        *out = w;
        return NF_OK;
    }
    nf__tab_release_workspace(m);
    w = calloc(1, sizeof(*w));
    if (!w) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    w->T = T;
    w->U = U;
    w->BS = BS;
    w->BC = BC;
    w->idx_n = idx_n;
    int rc = nf__ws_alloc(m, w, err);
    if (rc != NF_OK) {
        nf__ws_free(w);
        return rc;
    }
    *out = m->ws = w;
    return NF_OK;
}

/* ---- stages ------------------------------------------------------------------------------ */

static const char * const nf__tab_stage_names[] = {"text.cls", "fusion", "interaction", "head"};
int nf__tab_stage_count(const nf_tab * m) {
    (void) m;
    return 4;
}
int nf__tab_stage_name(const nf_tab * m, int i, char * out, size_t n) {
    if (i < 0 || i >= nf__tab_stage_count(m)) return 0;
    snprintf(out, n, "%s", nf__tab_stage_names[i]);
    return 1;
}

static int nf__stage(nf_tab * m, struct nf_tab_ws * w, const char * name, const nf_tensor * t, int ndim,
                     const int64_t * shape, int always, nf_err * err) {
    return nf__workspace_stage(&w->mem, m->stages, m->stage_fn, m->stage_user, name, t, ndim, shape, always, err);
}

/* ---- the blocks -------------------------------------------------------------------------- */

/* a pre-LN nn.TransformerEncoderLayer (spec §5.1) over `groups` sequences of seq rows of x */
static int nf__tel(nf_graph * g, const struct nf_tab_tel * L, int64_t heads, nf_tensor x, int64_t groups, int64_t seq,
                   struct nf_tab_ws * w) {
    const struct nf_mhsa sa = {
        .ln_g = &L->n1_w,
        .ln_b = &L->n1_b,
        .w_qkv = &L->in_w,
        .b_qkv = &L->in_b,
        .w_o = &L->out_w,
        .b_o = &L->out_b,
        .n_heads = heads,
        .eps = NF_TAB_TEL_EPS,
        .ln_label = nf_label(g, "norm1"),
        .qkv_label = nf_label(g, "self_attn.in_proj"),
        .attn_label = nf_label(g, "self_attn"),
        .o_label = nf_label(g, "self_attn.out_proj"),
    };
    NF_TRY(nf_prenorm_self_attention(g, &sa, x, groups, seq, w->Xn, w->qkv2, w->a2));
    const struct nf_mlp ff = {
        .ln_g = &L->n2_w,
        .ln_b = &L->n2_b,
        .w1 = &L->l1_w,
        .b1 = &L->l1_b,
        .w2 = &L->l2_w,
        .b2 = &L->l2_b,
        .eps = NF_TAB_TEL_EPS,
        .act = NF_ACT_RELU,
        .ln_label = nf_label(g, "norm2"),
        .fc1_label = nf_label(g, "linear1"),
        .fc2_label = nf_label(g, "linear2"),
    };
    return nf_prenorm_mlp(g, &ff, x, groups * seq, NF_TAB_D, w->Xn, w->hid);
}

/* the index lists, one i32 buffer:
 *   [ids T] [positions T] [zeros T] [cls rows U] [cell strings BS] [even BS] [odd BS] [target rows BC] */
struct nf_tab_idx {
    int64_t ids, pos, zero, cls, cell, even, odd, tgt, n;
};

int nf__tab_forward_tokens(nf_tab * m, const int32_t * ids, const int32_t * lens, int64_t n_str, const int32_t * cell,
                           const float * x_num, int64_t B, int64_t S, int64_t C, float * logits, nf_err * err) {
    const int64_t D = NF_TAB_D, I = m->cfg.text_ff, BS = B * S, BC = B * C, U = n_str;
    /* strings by length (stable): the groups of equal length */
    int64_t * order = malloc((size_t) U * sizeof(int64_t));
    int64_t * in_off = malloc((size_t) U * sizeof(int64_t));
    int64_t * where = malloc((size_t) U * sizeof(int64_t));
    if (!order || !in_off || !where) {
        free(order);
        free(in_off);
        free(where);
        return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    }
    int64_t T = 0;
    int maxlen = 0;
    for (int64_t u = 0; u < U; u++) {
        in_off[u] = T;
        T += lens[u];
        if (lens[u] > maxlen) maxlen = lens[u];
    }
    {
        /* counting sort by length */
        int64_t cnt[NF_TAB_MAX_TOKENS + 2];
        memset(cnt, 0, sizeof(cnt));
        for (int64_t u = 0; u < U; u++) cnt[lens[u] + 1]++;
        for (int l = 1; l < NF_TAB_MAX_TOKENS + 2; l++) cnt[l] += cnt[l - 1];
        for (int64_t u = 0; u < U; u++) {
            const int64_t p = cnt[lens[u]]++;
            order[p] = u;
            where[u] = p;
        }
    }
    if (T > INT32_MAX / 4 || 2 * BS > INT32_MAX / 4 || BC > INT32_MAX / 4) {
        free(order);
        free(in_off);
        free(where);
        return nf__err_set(err, NF_ERR_SHAPE,
                           "tabstar: %lld text tokens / %lld cells are too many for one forward (split the rows)",
                           (long long) T, (long long) BS);
    }
    struct nf_tab_idx ix;
    ix.ids = 0;
    ix.pos = T;
    ix.zero = 2 * T;
    ix.cls = 3 * T;
    ix.cell = ix.cls + U;
    ix.even = ix.cell + BS;
    ix.odd = ix.even + BS;
    ix.tgt = ix.odd + BS;
    ix.n = ix.tgt + BC;
    int32_t * hx = malloc((size_t) ix.n * sizeof(int32_t));
    int rc = NF_OK;
    struct nf_tab_ws * w = NULL;
    if (!hx) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        goto done;
    }
    {
        int64_t t = 0;
        for (int64_t p = 0; p < U; p++) {
            const int64_t u = order[p];
            hx[ix.cls + p] = (int32_t) t;
            for (int32_t j = 0; j < lens[u]; j++, t++) {
                hx[ix.ids + t] = ids[in_off[u] + j];
                hx[ix.pos + t] = j;
                hx[ix.zero + t] = 0;
            }
        }
        for (int64_t i = 0; i < BS; i++) {
            hx[ix.cell + i] = (int32_t) where[cell[i]];
            hx[ix.even + i] = (int32_t) (2 * i);
            hx[ix.odd + i] = (int32_t) (2 * i + 1);
        }
        for (int64_t b = 0; b < B; b++)
            for (int64_t c = 0; c < C; c++) hx[ix.tgt + b * C + c] = (int32_t) (b * S + c);
    }
    rc = nf__ws_get(m, T, U, BS, BC, ix.n, &w, err);
    if (rc != NF_OK) goto done;
    {
        nf_tensor iv = nf_view1(&w->idx, 0, ix.n);
        rc = nf__tensor_upload(&iv, hx, err);
        if (rc != NF_OK) goto done;
        nf_tensor zv = nf_view1(&w->z, 0, BS);
        rc = nf__tensor_upload(&zv, x_num, err);
        if (rc != NF_OK) goto done;
    }
    snprintf(m->placement.inputs, sizeof(m->placement.inputs), "%s", w->idx.buf->where);
    snprintf(m->placement.logits, sizeof(m->placement.logits), "%s", w->logits.buf->where);
    snprintf(m->placement.ops, sizeof(m->placement.ops), "%s", m->be->name);
    m->last_strings = U;
    m->last_tokens = T;

    nf_graph gr, *g = &gr;
    nf_graph_init(g, m->be, err);
#define IDX(field, n) nf_view1(&w->idx, ix.field, (n))
#define RUN(call)                   \
    do {                            \
        rc = (call);                \
        if (rc != NF_OK) goto done; \
    } while (0)

    /* §4 embeddings: (word + type) + position, then LayerNorm (HF BertEmbeddings' order) */
    nf_graph_prefix(g, "text_encoder.embeddings.");
    struct nf_gather gs = {.rows = T, .k = D, .n_table = m->cfg.vocab, .ldw = D, .ldy = D};
    RUN(nf_gather_rows(g, nf_label(g, "word_embeddings"), &gs, IDX(ids, T), m->word, w->h2));
    gs.n_table = m->cfg.type_vocab;
    gs.accumulate = 1;
    RUN(nf_gather_rows(g, nf_label(g, "token_type_embeddings"), &gs, IDX(zero, T), m->type, w->h2));
    gs.n_table = m->cfg.max_pos;
    RUN(nf_gather_rows(g, nf_label(g, "position_embeddings"), &gs, IDX(pos, T), m->pos, w->h2));
    RUN(nf_layer_norm(g, nf_label(g, "LayerNorm"), w->h2, T, D, &m->eln_w, &m->eln_b, w->h, D, NF_TAB_BERT_EPS));

    for (int l = 0; l < m->cfg.text_layers; l++) {
        const struct nf_tab_bert_layer * L = &m->bert[l];
        nf_graph_prefix(g, "text_encoder.encoder.layer.%d.", l);
        RUN(nf_linear(g, nf_label(g, "attention.self.qkv"), w->h, T, D, &L->qkv_w, &L->qkv_b, w->qkv, 3 * D,
                      NF_ACT_NONE, 0));
        /* one ATTENTION per run of equal-length strings */
        for (int64_t p0 = 0; p0 < U;) {
            const int64_t len = lens[order[p0]], t0 = hx[ix.cls + p0];
            int64_t p1 = p0;
            while (p1 < U && lens[order[p1]] == len) p1++;
            const int64_t n = p1 - p0, span = n * len;
            const struct nf_attn_layout lay = {.groups = n,
                                               .lq = len,
                                               .lk = len,
                                               .n_heads = m->cfg.text_heads,
                                               .head_dim = D / m->cfg.text_heads,
                                               .q_gs = len * 3 * D,
                                               .q_ss = 3 * D,
                                               .kv_gs = len * 3 * D,
                                               .kv_ss = 3 * D,
                                               .o_gs = len * D,
                                               .o_ss = D};
            const int64_t qn = span * 3 * D;
            RUN(nf_attention(g, nf_label(g, "attention.self"), &lay, nf_view1(&w->qkv, t0 * 3 * D, qn),
                             nf_view1(&w->qkv, t0 * 3 * D + D, qn - D),
                             nf_view1(&w->qkv, t0 * 3 * D + 2 * D, qn - 2 * D), nf_view1(&w->a, t0 * D, span * D)));
            p0 = p1;
        }
        RUN(nf_linear(g, nf_label(g, "attention.output.dense"), w->a, T, D, &L->o_w, &L->o_b, w->h, D, NF_ACT_NONE, 1));
        RUN(nf_layer_norm(g, nf_label(g, "attention.output.LayerNorm"), w->h, T, D, &L->ln1_w, &L->ln1_b, w->h2, D,
                          NF_TAB_BERT_EPS));
        RUN(nf_linear(g, nf_label(g, "intermediate.dense"), w->h2, T, D, &L->i_w, &L->i_b, w->ff, I, NF_ACT_GELU, 0));
        RUN(nf_linear(g, nf_label(g, "output.dense"), w->ff, T, I, &L->f_w, &L->f_b, w->h2, D, NF_ACT_NONE, 1));
        RUN(nf_layer_norm(g, nf_label(g, "output.LayerNorm"), w->h2, T, D, &L->ln2_w, &L->ln2_b, w->h, D,
                          NF_TAB_BERT_EPS));
    }
    /* [CLS] = row 0 of each string's last hidden state (sorted order) */
    nf_graph_prefix(g, "text_encoder.");
    gs = (struct nf_gather){.rows = U, .k = D, .n_table = T, .ldw = D, .ldy = D};
    RUN(nf_gather_rows(g, nf_label(g, "cls"), &gs, IDX(cls, U), w->h, w->E));
    {
        const int64_t sh[2] = {U, D};
        /* in the caller's string order */
        if (m->stages == NF_STAGES_ALL) {
            nf_tensor tmp = w->h2; /* (T, D) >= (U, D): reorder into it */
            gs = (struct nf_gather){.rows = U, .k = D, .n_table = U, .ldw = D, .ldy = D};
            int32_t * back = malloc((size_t) U * sizeof(int32_t));
            if (!back) {
                rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
                goto done;
            }
            for (int64_t u = 0; u < U; u++) back[u] = (int32_t) where[u];
            nf_tensor bv = IDX(cls, U); /* reuse the cls slot: no longer needed */
            rc = nf__tensor_upload(&bv, back, err);
            free(back);
            if (rc != NF_OK) goto done;
            RUN(nf_gather_rows(g, "text.cls(order)", &gs, bv, w->E, tmp));
            RUN(nf__stage(m, w, "text.cls", &tmp, 2, sh, 0, err));
        }
    }

    /* §5 fusion: X = [e; n] per cell */
    nf_graph_prefix(g, "numerical_fusion.");
    gs = (struct nf_gather){.rows = BS, .k = D, .n_table = U, .ldw = D, .ldy = 2 * D};
    RUN(nf_gather_rows(g, nf_label(g, "text"), &gs, IDX(cell, BS), w->E, w->X));
    RUN(nf_linear(g, nf_label(g, "scalar_embedder.0"), w->z, BS, 1, &m->s0_w, &m->s0_b, w->sh, NF_TAB_SCALAR_HIDDEN,
                  NF_ACT_RELU, 0));
    RUN(nf_linear(g, nf_label(g, "scalar_embedder.3"), w->sh, BS, NF_TAB_SCALAR_HIDDEN, &m->s3_w, &m->s3_b,
                  nf_view1(&w->X, D, 2 * BS * D - D), 2 * D, NF_ACT_NONE, 0));
    nf_graph_prefix(g, "numerical_fusion.fusion_block.");
    RUN(nf__tel(g, &m->fusion, NF_TAB_FUSION_HEADS, w->X, BS, 2, w));
    nf_graph_prefix(g, "numerical_fusion.");
    gs = (struct nf_gather){.rows = BS, .k = D, .n_table = 2 * BS, .ldw = D, .ldy = D, .scale = 0.5f};
    RUN(nf_gather_rows(g, nf_label(g, "mean.text"), &gs, IDX(even, BS), w->X, w->F));
    gs.accumulate = 1;
    RUN(nf_gather_rows(g, nf_label(g, "mean.num"), &gs, IDX(odd, BS), w->X, w->F));
    {
        const int64_t sh[3] = {B, S, D};
        RUN(nf__stage(m, w, "fusion", &w->F, 3, sh, 0, err));
    }

    /* §6 interaction */
    for (int l = 0; l < NF_TAB_LAYERS; l++) {
        nf_graph_prefix(g, "tabular_encoder.encoder.layers.%d.", l);
        RUN(nf__tel(g, &m->tab[l], NF_TAB_HEADS, w->F, B, S, w));
    }
    {
        const int64_t sh[3] = {B, S, D};
        RUN(nf__stage(m, w, "interaction", &w->F, 3, sh, 0, err));
    }

    /* §7 heads on the target tokens */
    const int reg = C == 1;
    nf_graph_prefix(g, reg ? "reg_head." : "cls_head.");
    gs = (struct nf_gather){.rows = BC, .k = D, .n_table = BS, .ldw = D, .ldy = D};
    RUN(nf_gather_rows(g, nf_label(g, "targets"), &gs, IDX(tgt, BC), w->F, w->Tt));
    RUN(nf_linear(g, nf_label(g, "layers.0"), w->Tt, BC, D, reg ? &m->reg_w0 : &m->cls_w0,
                  reg ? &m->reg_b0 : &m->cls_b0, w->Hh, NF_TAB_FF, NF_ACT_RELU, 0));
    RUN(nf_linear(g, nf_label(g, "layers.2"), w->Hh, BC, NF_TAB_FF, reg ? &m->reg_w2 : &m->cls_w2,
                  reg ? &m->reg_b2 : &m->cls_b2, w->logits, 1, NF_ACT_NONE, 0));
    {
        nf_tensor lv = nf_view1(&w->logits, 0, BC);
        RUN(nf__tensor_download(&lv, logits, err));
        const int64_t sh[2] = {B, C};
        if (m->stages != NF_STAGES_NONE && m->stage_fn && m->stage_fn(m->stage_user, "head", logits, 2, sh) != 0)
            rc = nf__err_set(err, NF_ERR_ARG, "stage callback stopped the forward at head");
    }
#undef RUN
#undef IDX
done:
    free(hx);
    free(order);
    free(in_off);
    free(where);
    return rc;
}
