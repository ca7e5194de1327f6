/* tabstar-train-impl.h -- the training state shared by tabstar-train.c (the
 * arenas, the optimizer, the merge) and tabstar-train-step.c (the training
 * forward and backward). Private to those two files. */
#ifndef NF_TABSTAR_TRAIN_IMPL_H
#define NF_TABSTAR_TRAIN_IMPL_H

#include "tabstar-train.h"
#include "nf-ops.h"

enum { NF__TT_P, NF__TT_G, NF__TT_M, NF__TT_V, NF__TT_N };

/* one TransformerEncoderLayer's saved forward (rows N) */
struct nf__tt_tel {
    nf_tensor xn1, qkv, att, xmid, xn2, hp, h, xa1, xa2;
};

/* one cached string: its token ids and its first row in the cache buffer */
struct nf__tt_cent {
    uint64_t h;
    int64_t row;
    int32_t len;
    int32_t * ids; /* NULL: an empty slot */
};

struct nf_tab_train {
    nf_tab * m;
    int64_t C;
    int n_mod, n_text; /* modules; trainable text layers (text_layers - NF_TAB_TRAIN_BERT, >= 0) */
    struct nf_tab_lora_module * mod;
    int64_t n, step;
    nf_tensor arena[NF__TT_N];
    nf_tensor norm, scratch; /* 1 float; (NF_TAB_FF * r) for the merge */
    struct nf_workspace arenas;
    /* the step's work area (capacities) */
    int64_t T, U, BS, BC, B, idx_n;
    int64_t Tcur; /* the current batch's text tokens */
    int have_ws;
    struct nf_workspace mem;
    nf_tensor work; /* the one f32 buffer the tensors below (but idx, y) are views of */
    nf_tensor idx, z, sh, y, loss, dlogits, lnj;
    nf_tensor hs;                                   /* (max(n_text + 1, 2), T, D): text layer boundaries */
    nf_tensor bqkv, bxa, batt, bs1, ba1, bffp, bs2; /* per trainable text layer */
    nf_tensor E, X0, X1;                            /* (U, D); fusion stream in / out (2BS, D) */
    nf_tensor Fs;                                   /* (NF_TAB_LAYERS + 1, BS, D) interaction streams */
    struct nf__tt_tel tel[1 + NF_TAB_LAYERS];
    nf_tensor Tt, Hp, Hh, xah, logits; /* head */
    nf_tensor ff;                      /* (2BS, D) linear2's output before the residual */
    /* the text cache: layer NF_TAB_TRAIN_BERT - 1's output per distinct string (tabstar-train-cache.c) */
    struct nf_workspace cache_mem;
    nf_tensor cache;                /* (cache_rows, D) */
    int64_t cache_rows, cache_used; /* capacity, rows in use */
    struct nf__tt_cent * cent;      /* open addressing, n_cent slots (a power of 2) */
    int64_t n_cent, n_cached;
    int64_t min_rows; /* nf__tab_train_text_cache_rows */
    /* backward scratch */
    nf_tensor dX, dX2, dE, dh, ds, da, dqkv, dH, dxa, dxn, datt, stats;
    /* dropout (nf__tab_train_dropout): probability, seed, _grad calls since set; this run applies it;
     * (rows, D) and (rows, max(FF, text_ff)) scratch, allocated while it is on */
    float drop;
    uint64_t drop_seed, drop_calls;
    int dp, ws_drop;
    nf_tensor dropb, lorab;
};

/* the mask seed of a dropout site in this _grad (tabstar-train-layers.c) */
uint64_t nf__tt_seed(const struct nf_tab_train * t, uint64_t site);

/* the module's A / B / gradient views in arena a */
nf_tensor nf__tt_a(const struct nf_tab_train * t, int a, int i);
nf_tensor nf__tt_b(const struct nf_tab_train * t, int a, int i);

/* tabstar-train-cache.c: the row of a cached string or -1; add one (NF_ERR_NOMEM); forget everything */
int64_t nf__tt_cache_find(const struct nf_tab_train * t, const int32_t * ids, int32_t len);
int nf__tt_cache_add(struct nf_tab_train * t, const int32_t * ids, int32_t len, int64_t row, nf_err * err);
void nf__tt_cache_clear(struct nf_tab_train * t);
void nf__tt_cache_free(struct nf_tab_train * t);

/* tabstar-train-layers.c: the pieces the step is made of (dropout, LoRA linear, frozen dx, LayerNorm
 * backward, the TransformerEncoderLayer forward / backward) */
/* dropout sites (the mask seeds): the embeddings, the scalar embedder, text layer l's two, TEL l's three
 * (k = 3: its attention probabilities), module mi's lora_dropout, text layer l's attention probabilities
 * in its ATTENTION call k (a group of strings of one length) */
#define NF__DS_EMB        1u
#define NF__DS_SCALAR     2u
#define NF__DS_BERT(l, k) (100u + 2u * (uint64_t) (l) + (k))
#define NF__DS_TEL(l, k)  (1000u + 4u * (uint64_t) (l) + (k))
#define NF__DS_LORA(mi)   (5000u + (uint64_t) (mi))
#define NF__DS_BATT(l, k) (0x100000000ull + ((uint64_t) (l) << 24) + (uint64_t) (k))
int nf__tt_drop(nf_graph * g, const struct nf_tab_train * t, const char * label, uint64_t site, nf_tensor x,
                nf_tensor y, int64_t n, int acc);
int nf__tt_lora_fwd(nf_graph * g, const struct nf_tab_train * t, int mi, nf_tensor x, int64_t ldx, int64_t rows,
                    nf_tensor xa, nf_tensor y, int64_t ldy);
int nf__tt_lora_bwd(nf_graph * g, struct nf_tab_train * t, int mi, nf_tensor x, int64_t ldx, int64_t rows, nf_tensor xa,
                    nf_tensor dy, int64_t lddy, nf_tensor * dx, int64_t lddx);
int nf__tt_frozen_dx(nf_graph * g, const char * label, nf_tensor dy, int64_t lddy, const nf_tensor * W, nf_tensor dx,
                     int64_t lddx, int64_t rows, int acc);
int nf__tt_ln_bwd(nf_graph * g, struct nf_tab_train * t, const char * label, nf_tensor x, const nf_tensor * gam,
                  nf_tensor dy, nf_tensor dx, int64_t rows, float eps, int acc);
int nf__tt_tel_fwd(nf_graph * g, struct nf_tab_train * t, const struct nf_tab_tel * L, struct nf__tt_tel * S, int mi,
                   int64_t heads, int64_t groups, int64_t seq, nf_tensor xin, nf_tensor xout);
int nf__tt_tel_bwd(nf_graph * g, struct nf_tab_train * t, const struct nf_tab_tel * L, struct nf__tt_tel * S, int mi,
                   int64_t heads, int64_t groups, int64_t seq, nf_tensor xin, nf_tensor dX);

/* a run of distinct strings of one length: strings p0.. (sorted order), n of them, starting at token t0 */
struct nf__tt_grp {
    int64_t n, len, t0;
};

/* tabstar-train-top.c: the top trainable text layer j on the U [CLS] rows only (dropout off): the forward
 * from hin (T rows) into E (U rows, the strings' sorted order; cls: each one's token row), and its backward
 * from dE (U rows), d hin into t->dh when need_dx (cls_o / cls_s: the plan of the cls list) */
int nf__tt_bert_top_fwd(nf_graph * g, struct nf_tab_train * t, int j, const struct nf__tt_grp * grp, int ng,
                        nf_tensor cls, int64_t U, nf_tensor hin, nf_tensor E);
int nf__tt_bert_top_bwd(nf_graph * g, struct nf_tab_train * t, int j, const struct nf__tt_grp * grp, int ng,
                        nf_tensor cls_o, nf_tensor cls_s, int64_t U, nf_tensor hin, nf_tensor dE, int need_dx);

#endif
