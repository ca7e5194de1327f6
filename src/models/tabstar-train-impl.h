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
    /* backward scratch */
    nf_tensor dX, dX2, dE, dh, ds, da, dqkv, dH, dxa, dxn, datt, stats;
};

/* the module's A / B / gradient views in arena a */
nf_tensor nf__tt_a(const struct nf_tab_train * t, int a, int i);
nf_tensor nf__tt_b(const struct nf_tab_train * t, int a, int i);

#endif
